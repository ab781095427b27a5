{# The dimension is derived from the log: per key, the latest log row for each
   valid_from (Type 1 observations excluded), ordered; valid_to = LEAD(valid_from) or
   the far-future sentinel; tombstones close the version before them and are not rows.
   Type 1 columns show the key's newest observed value on every row; current_<col>
   twins (Type 6) show the value of the key's newest live version. #}
{% macro derived(touched) %}
SELECT y.sk, {{ keys|cols("y") }}{% for c in cols %}, y.{{ c }}{% endfor %}{% for c in t1 %}, lt.{{ c }}{% endfor %}
{% for c in current_defs %}
       , FIRST_VALUE(y.{{ c.source }}) OVER (PARTITION BY {{ keys|cols("y") }} ORDER BY y.valid_from DESC)
{% endfor %}
       , y.valid_from, COALESCE(y.next_from, {{ sentinel }}), y.next_from IS NULL, y.row_hash, y.load_id
FROM (
    SELECT e.*, LEAD(e.valid_from) OVER (PARTITION BY {{ keys|cols("e") }} ORDER BY e.valid_from) AS next_from
    FROM (
        SELECT l.{{ sk }} AS sk, {{ keys|cols("l") }}{% for a in cols %}, l.{{ a }}{% endfor %}, l.valid_from, l.is_deleted, l.row_hash, l.load_id,
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("l") }}, l.valid_from ORDER BY l.log_id DESC) AS dimlog_rn
        FROM {{ log }} l
{% if touched %}
        JOIN dimlog_touched t ON {{ keys|eqs("l", "t") }}
{% endif %}
        WHERE l.is_deleted OR l.{{ sk }} IS NOT NULL
    ) e
    WHERE e.dimlog_rn = 1
) y
{% if t1 %}
LEFT JOIN (
    SELECT {{ keys|cols }}{% for c in t1 %}, {{ c }}{% endfor %}
    FROM (
        SELECT {{ keys|cols("l") }}{% for c in t1 %}, l.{{ c }}{% endfor %},
               ROW_NUMBER() OVER (PARTITION BY {{ keys|cols("l") }} ORDER BY l.valid_from DESC, l.log_id DESC) AS dimlog_rn
        FROM {{ log }} l
{% if touched %}
        JOIN dimlog_touched t ON {{ keys|eqs("l", "t") }}
{% endif %}
        WHERE NOT l.is_deleted
    ) x
    WHERE x.dimlog_rn = 1
) lt ON {{ keys|eqs("lt", "y") }}
{% endif %}
WHERE NOT y.is_deleted
{% endmacro %}
{% macro columns() %}{{ sk }}, {{ keys|cols }}{% for c in attrs %}, {{ c }}{% endfor %}{% for c in current_defs %}, {{ c.name }}{% endfor %}, valid_from, valid_to, is_current, row_hash, load_id{% endmacro %}
-- statement: touched
CREATE TEMP TABLE dimlog_touched AS
SELECT DISTINCT {{ keys|cols }} FROM dimlog_changes
-- statement: delete_touched
DELETE FROM {{ dim }} WHERE EXISTS (SELECT 1 FROM dimlog_touched t WHERE {{ keys|eqs("t", dim) }})
-- statement: insert_touched
INSERT INTO {{ dim }} ({{ columns() }})
{{ derived(true) }}
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
