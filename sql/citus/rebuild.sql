{# The rebuild in place on Citus: the derived rows are matched to the dimension's by
   surrogate key AND key, which is the same match (a surrogate key belongs to one key)
   but one on the distribution column, so Citus runs it on the shards. The rest is
   PostgreSQL's (sql/postgres/rebuild.sql). #}
-- statement: delete_stale
{% set src = "dimlog_derived" if touched else "dimlog_rebuilt" %}
DELETE FROM {{ dim }} dimlog_d
WHERE {% if touched %}EXISTS (SELECT 1 FROM dimlog_touched dimlog_t WHERE {{ keys|eqs("dimlog_t", "dimlog_d") }}) AND {% endif %}NOT EXISTS (
    SELECT 1 FROM {{ src }} dimlog_x WHERE dimlog_x.{{ sk }} = dimlog_d.{{ sk }} AND {{ keys|eqs("dimlog_x", "dimlog_d") }}{{ " AND NOT dimlog_x.dimlog_dead" if touched }})
-- statement: update_changed
{% set src = "dimlog_derived" if touched else "dimlog_rebuilt" %}
UPDATE {{ dim }} dimlog_d
SET {% for c in every %}{{ c }} = dimlog_x.{{ c }}{{ ", " if not loop.last }}{% endfor %}

FROM {{ src }} dimlog_x
WHERE dimlog_x.{{ sk }} = dimlog_d.{{ sk }} AND {{ keys|eqs("dimlog_x", "dimlog_d") }}{{ " AND NOT dimlog_x.dimlog_dead" if touched }}
  AND ({% for c in every %}{% set t = "::text" if c in text_compared else "" %}dimlog_d.{{ c }}{{ t }} IS DISTINCT FROM dimlog_x.{{ c }}{{ t }}{{ "\n       OR " if not loop.last }}{% endfor %})
-- statement: insert_missing
{% set src = "dimlog_derived" if touched else "dimlog_rebuilt" %}
INSERT INTO {{ dim }} ({{ columns() }})
SELECT {{ columns() }} FROM {{ src }} dimlog_x
WHERE {{ "NOT dimlog_x.dimlog_dead AND " if touched }}NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE dimlog_d.{{ sk }} = dimlog_x.{{ sk }} AND {{ keys|eqs("dimlog_d", "dimlog_x") }})
{# Not materialized on Citus: inlined, the rebuild runs on the shards in each check that
   joins it with the dimension (by key); a materialized one would be gathered on the
   coordinator, where Citus cannot join it with the dimension. #}
-- statement: rebuilt
{{ dim_new }} ({{ columns() }}) AS NOT MATERIALIZED (
{{ derived(false) }}
)
{# Whole tables (see analyze_log in sql/citus/tables.sql). #}
-- statement: analyze_derived
ANALYZE dimlog_derived
-- statement: analyze_rebuilt
ANALYZE dimlog_rebuilt
