{# The dimension is derived from the log: per key, the latest log row for each
   valid_from (Type 1 observations excluded), ordered; valid_to = LEAD(valid_from) or
   the far-future sentinel; tombstones close the version before them and are not rows.
   Type 1 columns show the key's newest observed value on every row; current_<col>
   twins (Type 6) show the value of the key's newest live version. #}
{# With `merged` (the touched keys, for `merge_touched`): read the keys' history as
   classify found it plus this load's rows, and keep dead versions, marked. #}
{% macro derived(touched, merged=false) %}
SELECT dimlog_y.dimlog_sk, {{ keys|cols("dimlog_y") }}{% for c in cols %}, dimlog_y.{{ c }}{% endfor %}{% for c in t1 %}, dimlog_lt.{{ c }}{% endfor %}
{% for c in current_defs %}
       , FIRST_VALUE(dimlog_y.{{ c.source }}) OVER (PARTITION BY {{ keys|cols("dimlog_y") }} ORDER BY dimlog_y.is_deleted, dimlog_y.valid_from DESC)
{% endfor %}
       , dimlog_y.valid_from, COALESCE(dimlog_y.dimlog_next_from, {{ sentinel }}), dimlog_y.dimlog_next_from IS NULL, dimlog_y.row_hash, dimlog_y.load_id{{ ", dimlog_y.is_deleted" if merged }}
FROM (
    SELECT dimlog_e.*, LEAD(dimlog_e.valid_from) OVER (PARTITION BY {{ keys|cols("dimlog_e") }} ORDER BY dimlog_e.valid_from) AS dimlog_next_from
    FROM (
        SELECT DISTINCT ON ({{ keys|cols("dimlog_l") }}, dimlog_l.valid_from)
               dimlog_l.{{ sk }} AS dimlog_sk, {{ keys|cols("dimlog_l") }}{% for a in cols %}, dimlog_l.{{ a }}{% endfor %}, dimlog_l.valid_from, dimlog_l.is_deleted, dimlog_l.row_hash, dimlog_l.load_id
{% if merged %}
        FROM (SELECT * FROM dimlog_history UNION ALL SELECT * FROM dimlog_appended) dimlog_l
{% else %}
        FROM {{ log }} dimlog_l
{% endif %}
{% if touched %}
        JOIN dimlog_touched dimlog_t ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
{% endif %}
        WHERE dimlog_l.is_deleted OR dimlog_l.{{ sk }} IS NOT NULL
        ORDER BY {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from, dimlog_l.log_id DESC
    ) dimlog_e
) dimlog_y
{% if t1 %}
LEFT JOIN (
    SELECT DISTINCT ON ({{ keys|cols("dimlog_l") }}) {{ keys|cols("dimlog_l") }}{% for c in t1 %}, dimlog_l.{{ c }}{% endfor %}
    FROM {{ log }} dimlog_l
{% if touched %}
    JOIN dimlog_touched dimlog_t ON {{ keys|eqs("dimlog_l", "dimlog_t") }}
{% endif %}
    WHERE NOT dimlog_l.is_deleted
    ORDER BY {{ keys|cols("dimlog_l") }}, dimlog_l.valid_from DESC, dimlog_l.log_id DESC
) dimlog_lt ON {{ keys|eqs("dimlog_lt", "dimlog_y") }}
{% endif %}
{% if not merged %}
WHERE NOT dimlog_y.is_deleted
{% endif %}
{% endmacro %}
{# Every column of the dimension that dimlog writes, but the surrogate key. #}
{% set every = keys + attrs + (current_defs|map(attribute="name")|list) + ["valid_from", "valid_to", "is_current", "row_hash", "load_id"] %}
{% macro columns() %}{{ sk }}, {{ keys|cols }}{% for c in attrs %}, {{ c }}{% endfor %}{% for c in current_defs %}, {{ c.name }}{% endfor %}, valid_from, valid_to, is_current, row_hash, load_id{% endmacro %}
{# The keys the load's rows are of: its classified changes, and (`stale`) the earlier
   versions it carried over to a new Type 2 column set. #}
-- statement: touched
CREATE TEMP TABLE dimlog_touched ON COMMIT DROP AS
SELECT DISTINCT {{ keys|cols }} FROM dimlog_changes
{% if stale %}
UNION
SELECT {{ keys|cols }} FROM dimlog_stale
{% endif %}
{# Versions of the touched keys that the dimension holds and the log no longer does
   (rows deleted from the log): a rebuild of those keys would drop them, so the load
   stops instead. Probes the log's key index per row. #}
-- statement: lost_versions
SELECT {% for k in key_names %}dimlog_d.{{ k }}::text, {% endfor %}dimlog_d.{{ sk }}::text
FROM {{ dim }} dimlog_d JOIN dimlog_touched dimlog_t ON {{ keys|eqs("dimlog_d", "dimlog_t") }}
WHERE NOT EXISTS (SELECT 1 FROM {{ log }} dimlog_l WHERE {{ keys|eqs("dimlog_l", "dimlog_d") }} AND dimlog_l.{{ sk }} = dimlog_d.{{ sk }})
LIMIT 5
-- statement: analyze_touched
ANALYZE dimlog_touched
{# PostgreSQL 15 and later: the touched keys' rows as the log says they should be, with
   the log's dead versions (a tombstone at a version's own valid_from removes that
   version), then merged into the dimension: rows that did not change are not written,
   a version that only closed is updated in place (no indexed column changes, so the
   update can stay on its page), and only new versions are inserted. A row's Type 2
   values are compared through its hash; Type 1 and current_<col> values directly
   (json, which has no equality, as text: `text_compared`). #}
-- statement: derive_touched
CREATE TEMP TABLE dimlog_derived ({{ columns() }}, dimlog_dead) ON COMMIT DROP AS
{{ derived(true, true) }}
-- statement: analyze_derived
ANALYZE dimlog_derived ({{ keys|cols }}, valid_from)
-- statement: merge_touched
MERGE INTO {{ dim }} dimlog_d
USING dimlog_derived dimlog_x ON {{ keys|eqs("dimlog_d", "dimlog_x") }} AND dimlog_d.valid_from = dimlog_x.valid_from
WHEN MATCHED AND dimlog_x.dimlog_dead THEN DELETE
WHEN MATCHED AND ((dimlog_d.{{ sk }}, dimlog_d.row_hash, dimlog_d.load_id, dimlog_d.valid_to, dimlog_d.is_current) IS DISTINCT FROM (dimlog_x.{{ sk }}, dimlog_x.row_hash, dimlog_x.load_id, dimlog_x.valid_to, dimlog_x.is_current)
{% for c in t1 + current_defs|map(attribute="name")|list %}
{% set t = "::text" if c in text_compared else "" %}
                  OR dimlog_d.{{ c }}{{ t }} IS DISTINCT FROM dimlog_x.{{ c }}{{ t }}
{% endfor %}
                 ) THEN
    UPDATE SET {{ sk }} = dimlog_x.{{ sk }}{% for c in attrs %}, {{ c }} = dimlog_x.{{ c }}{% endfor %}{% for c in current_defs %}, {{ c.name }} = dimlog_x.{{ c.name }}{% endfor %}, valid_to = dimlog_x.valid_to, is_current = dimlog_x.is_current, row_hash = dimlog_x.row_hash, load_id = dimlog_x.load_id
WHEN NOT MATCHED AND NOT dimlog_x.dimlog_dead THEN
    INSERT ({{ columns() }})
    VALUES (dimlog_x.{{ sk }}, {{ keys|cols("dimlog_x") }}{% for c in attrs %}, dimlog_x.{{ c }}{% endfor %}{% for c in current_defs %}, dimlog_x.{{ c.name }}{% endfor %}, dimlog_x.valid_from, dimlog_x.valid_to, dimlog_x.is_current, dimlog_x.row_hash, dimlog_x.load_id)
{# A first load: the log holds one row per key, so each live one is its key's only and
   current version (its own Type 1 and current_<col> values), and no sort is needed. #}
-- statement: insert_first
INSERT INTO {{ dim }} ({{ columns() }})
SELECT {{ sk }}, {{ keys|cols }}{% for c in attrs %}, {{ c }}{% endfor %}{% for c in current_defs %}, {{ c.source }}{% endfor %}, valid_from, {{ sentinel }}, true, row_hash, load_id
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
{# A rebuild in place, in the caller's transaction: the derived rows (all of them into
   `dimlog_rebuilt`, or the touched keys' into `dimlog_derived`, where dead versions are
   marked) are merged into the dimension by surrogate key: rows whose surrogate key is no
   longer derived are deleted, rows that differ in any column dimlog writes are updated
   in place, and new ones inserted. Only DML: no lock beyond a writer's, grants, indexes,
   comments, views, foreign keys to the surrogate key and users' own columns stay, and a
   REPEATABLE READ reader keeps seeing the rows of its snapshot. #}
-- statement: derive_all
CREATE TEMP TABLE dimlog_rebuilt ({{ columns() }}) ON COMMIT DROP AS
{{ derived(false) }}
-- statement: analyze_rebuilt
ANALYZE dimlog_rebuilt ({{ sk }})
-- statement: delete_stale
{% set src = "dimlog_derived" if touched else "dimlog_rebuilt" %}
DELETE FROM {{ dim }} dimlog_d
WHERE {% if touched %}EXISTS (SELECT 1 FROM dimlog_touched dimlog_t WHERE {{ keys|eqs("dimlog_t", "dimlog_d") }}) AND {% endif %}NOT EXISTS (
    SELECT 1 FROM {{ src }} dimlog_x WHERE dimlog_x.{{ sk }} = dimlog_d.{{ sk }}{{ " AND NOT dimlog_x.dimlog_dead" if touched }})
-- statement: update_changed
{% set src = "dimlog_derived" if touched else "dimlog_rebuilt" %}
UPDATE {{ dim }} dimlog_d
SET {% for c in every %}{{ c }} = dimlog_x.{{ c }}{{ ", " if not loop.last }}{% endfor %}

FROM {{ src }} dimlog_x
WHERE dimlog_x.{{ sk }} = dimlog_d.{{ sk }}{{ " AND NOT dimlog_x.dimlog_dead" if touched }}
  AND ({% for c in every %}{% set t = "::text" if c in text_compared else "" %}dimlog_d.{{ c }}{{ t }} IS DISTINCT FROM dimlog_x.{{ c }}{{ t }}{{ "\n       OR " if not loop.last }}{% endfor %})
-- statement: insert_missing
{% set src = "dimlog_derived" if touched else "dimlog_rebuilt" %}
INSERT INTO {{ dim }} ({{ columns() }})
SELECT {{ columns() }} FROM {{ src }} dimlog_x
WHERE {{ "NOT dimlog_x.dimlog_dead AND " if touched }}NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE dimlog_d.{{ sk }} = dimlog_x.{{ sk }})
-- statement: drop_rebuilt
{# Not needed on this engine: the derived rows are a temporary table that `derive_touched`/`derive_all` make. #}
-- statement: derive_rebuilt
{# Not needed on this engine: see `derive_touched` and `derive_all`. #}
-- statement: index_rebuilt
{# Not needed on this engine: the merge hashes the derived rows. #}
