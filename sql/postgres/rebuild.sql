{# The dimension is derived from the log: per key, the latest log row for each
   valid_from (Type 1 observations excluded), ordered; valid_to = LEAD(valid_from) or
   the far-future sentinel; tombstones close the version before them and are not rows.
   Type 1 columns show the key's newest observed value on every row; current_<col>
   twins (Type 6) show the value of the key's newest live version. #}
{# With `merged` (the touched keys, for `merge_touched`): read the keys' history as
   classify found it plus this load's rows, and keep dead versions, marked. #}
{% macro derived(touched, merged=false) %}
SELECT y.sk, {{ keys|cols("y") }}{% for c in cols %}, y.{{ c }}{% endfor %}{% for c in t1 %}, lt.{{ c }}{% endfor %}
{% for c in current_defs %}
       , FIRST_VALUE(y.{{ c.source }}) OVER (PARTITION BY {{ keys|cols("y") }} ORDER BY y.is_deleted, y.valid_from DESC)
{% endfor %}
       , y.valid_from, COALESCE(y.next_from, {{ sentinel }}), y.next_from IS NULL, y.row_hash, y.load_id{{ ", y.is_deleted" if merged }}
FROM (
    SELECT e.*, LEAD(e.valid_from) OVER (PARTITION BY {{ keys|cols("e") }} ORDER BY e.valid_from) AS next_from
    FROM (
        SELECT DISTINCT ON ({{ keys|cols("l") }}, l.valid_from)
               l.{{ sk }} AS sk, {{ keys|cols("l") }}{% for a in cols %}, l.{{ a }}{% endfor %}, l.valid_from, l.is_deleted, l.row_hash, l.load_id
{% if merged %}
        FROM (SELECT * FROM dimlog_history UNION ALL SELECT * FROM dimlog_appended) l
{% else %}
        FROM {{ log }} l
{% endif %}
{% if touched %}
        JOIN dimlog_touched t ON {{ keys|eqs("l", "t") }}
{% endif %}
        WHERE l.is_deleted OR l.{{ sk }} IS NOT NULL
        ORDER BY {{ keys|cols("l") }}, l.valid_from, l.log_id DESC
    ) e
) y
{% if t1 %}
LEFT JOIN (
    SELECT DISTINCT ON ({{ keys|cols("l") }}) {{ keys|cols("l") }}{% for c in t1 %}, l.{{ c }}{% endfor %}
    FROM {{ log }} l
{% if touched %}
    JOIN dimlog_touched t ON {{ keys|eqs("l", "t") }}
{% endif %}
    WHERE NOT l.is_deleted
    ORDER BY {{ keys|cols("l") }}, l.valid_from DESC, l.log_id DESC
) lt ON {{ keys|eqs("lt", "y") }}
{% endif %}
{% if not merged %}
WHERE NOT y.is_deleted
{% endif %}
{% endmacro %}
{% macro columns() %}{{ sk }}, {{ keys|cols }}{% for c in attrs %}, {{ c }}{% endfor %}{% for c in current_defs %}, {{ c.name }}{% endfor %}, valid_from, valid_to, is_current, row_hash, load_id{% endmacro %}
-- statement: touched
CREATE TEMP TABLE dimlog_touched ON COMMIT DROP AS
SELECT DISTINCT {{ keys|cols }} FROM dimlog_changes
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
MERGE INTO {{ dim }} d
USING dimlog_derived x ON {{ keys|eqs("d", "x") }} AND d.valid_from = x.valid_from
WHEN MATCHED AND x.dimlog_dead THEN DELETE
WHEN MATCHED AND ((d.{{ sk }}, d.row_hash, d.load_id, d.valid_to, d.is_current) IS DISTINCT FROM (x.{{ sk }}, x.row_hash, x.load_id, x.valid_to, x.is_current)
{% for c in t1 + current_defs|map(attribute="name")|list %}
{% set t = "::text" if c in text_compared else "" %}
                  OR d.{{ c }}{{ t }} IS DISTINCT FROM x.{{ c }}{{ t }}
{% endfor %}
                 ) THEN
    UPDATE SET {{ sk }} = x.{{ sk }}{% for c in attrs %}, {{ c }} = x.{{ c }}{% endfor %}{% for c in current_defs %}, {{ c.name }} = x.{{ c.name }}{% endfor %}, valid_to = x.valid_to, is_current = x.is_current, row_hash = x.row_hash, load_id = x.load_id
WHEN NOT MATCHED AND NOT x.dimlog_dead THEN
    INSERT ({{ columns() }})
    VALUES (x.{{ sk }}, {{ keys|cols("x") }}{% for c in attrs %}, x.{{ c }}{% endfor %}{% for c in current_defs %}, x.{{ c.name }}{% endfor %}, x.valid_from, x.valid_to, x.is_current, x.row_hash, x.load_id)
-- statement: insert_derived
INSERT INTO {{ dim }} ({{ columns() }})
SELECT {{ columns() }} FROM dimlog_derived WHERE NOT dimlog_dead
-- statement: delete_touched
DELETE FROM {{ dim }} d USING dimlog_touched t WHERE {{ keys|eqs("d", "t") }}
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
-- statement: insert_new
INSERT INTO {{ dim_new }} ({{ columns() }})
{{ derived(false) }}
{# The whole dimension derived from the log as a common table expression named
   `dim_new`, for `verify` to compare the dimension with without writing anything. #}
-- statement: rebuilt
{{ dim_new }} ({{ columns() }}) AS MATERIALIZED (
{{ derived(false) }}
)
-- statement: drop_old
DROP TABLE {{ dim }}
-- statement: rename_new
ALTER TABLE {{ dim_new }} RENAME TO {{ dim_bare }}
-- statement: rename_pk
ALTER INDEX {{ dim_new_pk_qualified }} RENAME TO {{ dim_pk }}
