{# The dimension is derived from the log: per key, the latest log row for each
   valid_from (Type 1 observations excluded), ordered; valid_to = LEAD(valid_from) or
   the far-future sentinel; tombstones close the version before them and are not rows.
   Type 1 columns show the key's newest observed value on every row; current_<col>
   twins (Type 6) show the value of the key's newest live version. #}
{# Touched keys drive the read (`CROSS JOIN` keeps them the outer loop): SQLite then
   probes the log's key index per key instead of scanning the whole log. #}
{% macro derived(touched) %}
SELECT dimlog_y.dimlog_sk, {{ keys|cols("dimlog_y") }}{% for c in cols %}, dimlog_y.{{ c }}{% endfor %}{% for c in t1 %}, dimlog_lt.{{ c }}{% endfor %}
{% for c in current_defs %}
       , FIRST_VALUE(dimlog_y.{{ c.source }}) OVER (PARTITION BY {{ keys|cols("dimlog_y") }} ORDER BY dimlog_y.valid_from DESC)
{% endfor %}
       , dimlog_y.valid_from, COALESCE(dimlog_y.dimlog_next_from, {{ sentinel }}), dimlog_y.dimlog_next_from IS NULL, dimlog_y.row_hash, dimlog_y.load_id
FROM (
    SELECT dimlog_e.*, LEAD(dimlog_e.valid_from) OVER (PARTITION BY {{ keys|cols("dimlog_e") }} ORDER BY dimlog_e.valid_from) AS dimlog_next_from
    FROM (
        SELECT dimlog_l.{{ sk }} AS dimlog_sk, {{ keys|cols("dimlog_l") }}{% for a in cols %}, dimlog_l.{{ a }}{% endfor %}, dimlog_l.valid_from, dimlog_l.is_deleted, dimlog_l.row_hash, dimlog_l.load_id,
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from ORDER BY dimlog_l.log_id DESC) AS dimlog_rn
{% if touched %}
        FROM dimlog_touched dimlog_t
        CROSS JOIN {{ log }} dimlog_l ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
{% else %}
        FROM {{ log }} dimlog_l
{% endif %}
        WHERE dimlog_l.is_deleted OR dimlog_l.{{ sk }} IS NOT NULL
    ) dimlog_e
    WHERE dimlog_e.dimlog_rn = 1
) dimlog_y
{% if t1 %}
LEFT JOIN (
    SELECT {{ keys|cols }}{% for c in t1 %}, {{ c }}{% endfor %}
    FROM (
        SELECT {{ keys|cols("dimlog_l") }}{% for c in t1 %}, dimlog_l.{{ c }}{% endfor %},
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("dimlog_l") }} ORDER BY dimlog_l.valid_from DESC, dimlog_l.log_id DESC) AS dimlog_rn
{% if touched %}
        FROM dimlog_touched dimlog_t
        CROSS JOIN {{ log }} dimlog_l ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
{% else %}
        FROM {{ log }} dimlog_l
{% endif %}
        WHERE NOT dimlog_l.is_deleted
    ) dimlog_x
    WHERE dimlog_x.dimlog_rn = 1
) dimlog_lt ON {{ keys|eqs("dimlog_lt", "dimlog_y") }}
{% endif %}
WHERE NOT dimlog_y.is_deleted
{% endmacro %}
{# Every column of the dimension that dimlog writes, but the surrogate key. #}
{% set every = keys + attrs + (current_defs|map(attribute="name")|list) + ["valid_from", "valid_to", "is_current", "row_hash", "load_id"] %}
{% macro columns() %}{{ sk }}, {{ keys|cols }}{% for c in attrs %}, {{ c }}{% endfor %}{% for c in current_defs %}, {{ c.name }}{% endfor %}, valid_from, valid_to, is_current, row_hash, load_id{% endmacro %}
{# The keys the load's rows are of: its classified changes, and (`stale`) the earlier
   versions it carried over to a new Type 2 column set. #}
-- statement: touched
CREATE TEMP TABLE dimlog_touched AS
SELECT DISTINCT {{ keys|cols }} FROM dimlog_changes
{% if stale %}
UNION
SELECT {{ keys|cols }} FROM dimlog_stale
{% endif %}
{# Versions of the touched keys that the dimension holds and the log no longer does
   (rows deleted from the log): a rebuild of those keys would drop them, so the load
   stops instead. Probes the log's key index per row. #}
-- statement: lost_versions
SELECT {% for k in keys %}CAST(dimlog_d.{{ k }} AS TEXT), {% endfor %}CAST(dimlog_d.{{ sk }} AS TEXT)
FROM {{ dim }} dimlog_d JOIN dimlog_touched dimlog_t ON {{ keys|eqs("dimlog_d", "dimlog_t") }}
WHERE NOT EXISTS (SELECT 1 FROM {{ log }} dimlog_l WHERE {{ keys|eqs("dimlog_l", "dimlog_d") }} AND dimlog_l.{{ sk }} = dimlog_d.{{ sk }})
LIMIT 5
{# A first load: the log holds one row per key, so each live one is its key's only and
   current version (its own Type 1 and current_<col> values), and no sort is needed. #}
-- statement: insert_first
INSERT INTO {{ dim }} ({{ columns() }})
SELECT {{ sk }}, {{ keys|cols }}{% for c in attrs %}, {{ c }}{% endfor %}{% for c in current_defs %}, {{ c.source }}{% endfor %}, valid_from, {{ sentinel }}, 1, row_hash, load_id
FROM {{ log }}
WHERE NOT is_deleted
-- statement: delete_all
DELETE FROM {{ dim }}
-- statement: insert_all
INSERT INTO {{ dim }} ({{ columns() }})
{{ derived(false) }}
{# The whole dimension derived from the log as a common table expression named
   `dim_new`, for `verify` to compare the dimension with without writing anything. #}
-- statement: rebuilt
{{ dim_new }} ({{ columns() }}) AS MATERIALIZED (
{{ derived(false) }}
)
{# A rebuild in place, in the caller's transaction: the derived rows (of the touched
   keys, or all) go into `dimlog_rebuilt` and are merged into the dimension by surrogate
   key: rows whose surrogate key is no longer derived are deleted, rows that differ in a
   column dimlog writes are updated in place, and new ones inserted. Indexes, views,
   triggers, foreign keys to the surrogate key and users' own columns stay. #}
-- statement: drop_rebuilt
DROP TABLE IF EXISTS temp.dimlog_rebuilt
-- statement: derive_rebuilt
CREATE TEMP TABLE dimlog_rebuilt AS
WITH dimlog_r ({{ columns() }}) AS (
{{ derived(touched) }}
)
SELECT * FROM dimlog_r
-- statement: index_rebuilt
CREATE INDEX temp.dimlog_rebuilt_sk ON dimlog_rebuilt ({{ sk }})
{# IN, not a correlated EXISTS, for the touched keys: SQLite probes the dimension's key
   index for each touched key instead of scanning the whole dimension. #}
-- statement: delete_stale
DELETE FROM {{ dim }}
WHERE {% if touched %}({{ keys|cols }}) IN (SELECT {{ keys|cols }} FROM dimlog_touched) AND {% endif %}NOT EXISTS (
    SELECT 1 FROM dimlog_rebuilt dimlog_x WHERE dimlog_x.{{ sk }} = {{ dim }}.{{ sk }})
-- statement: update_changed
UPDATE {{ dim }}
SET {% for c in every %}{{ c }} = dimlog_x.{{ c }}{{ ", " if not loop.last }}{% endfor %}

FROM dimlog_rebuilt dimlog_x
WHERE dimlog_x.{{ sk }} = {{ dim }}.{{ sk }}
  AND ({% for c in every %}{{ dim }}.{{ c }} IS NOT dimlog_x.{{ c }}{{ "\n       OR " if not loop.last }}{% endfor %})
-- statement: insert_missing
INSERT INTO {{ dim }} ({{ columns() }})
SELECT {{ columns() }} FROM dimlog_rebuilt dimlog_x
WHERE NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE dimlog_d.{{ sk }} = dimlog_x.{{ sk }})
{# A dimension whose declared column types or primary key are not what dimlog makes
   (SQLite cannot alter them) is created again, only when nothing else uses it. #}
-- statement: drop_old
DROP TABLE {{ dim }}
-- statement: rename_new
ALTER TABLE {{ dim_new }} RENAME TO {{ dim_bare }}
-- statement: analyze_touched
{# Not needed on this engine: SQLite's planner needs no statistics: `index_rebuilt` indexes the derived rows. #}
-- statement: derive_touched
{# Not needed on this engine: `derive_rebuilt` derives the touched keys (touched = true). #}
-- statement: analyze_derived
{# Not needed on this engine: see `analyze_touched`. #}
-- statement: derive_all
{# Not needed on this engine: `derive_rebuilt` derives every key (touched = false). #}
-- statement: analyze_rebuilt
{# Not needed on this engine: see `analyze_touched`. #}
