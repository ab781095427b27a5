{# Surrogate-key lookup for fact loaders: the version with valid_from <= ts < valid_to.
   Served by the dimension's index on (key, valid_from). #}
{% macro key_filter(p) %}{% for c in key_defs %}{{ p }}{{ c.name }} = CAST(${{ loop.index }} AS {{ c.target_type }}) AND {% endfor %}{% endmacro %}
-- statement: one
SELECT d.{{ sk }}::text FROM {{ dim }} d
WHERE {{ key_filter("d.") }}d.valid_from <= ${{ key_defs|length + 1 }} AND ${{ key_defs|length + 1 }} < d.valid_to
-- statement: fact_columns
SELECT a.attname::text, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
-- statement: add_sk_column
ALTER TABLE {{ facts }} ADD COLUMN IF NOT EXISTS {{ fact_sk }} bigint
-- statement: assign
UPDATE {{ facts }} f
SET {{ fact_sk }} = m.sk
FROM (
    SELECT x.ctid AS rid, COALESCE(d.{{ sk }}, -1) AS sk
    FROM {{ facts }} x
    LEFT JOIN {{ dim }} d
      ON {% for k in fact_keys %}d.{{ keys[loop.index0] }} = x.{{ k }} AND {% endfor %}d.valid_from <= x.{{ fact_at }} AND x.{{ fact_at }} < d.valid_to
) m
WHERE f.ctid = m.rid AND f.{{ fact_sk }} IS DISTINCT FROM m.sk
-- statement: counts
SELECT count(*) FILTER (WHERE {{ fact_sk }} <> -1)::text, count(*) FILTER (WHERE {{ fact_sk }} = -1)::text FROM {{ facts }}
-- statement: first_unknown
SELECT {% for k in fact_keys %}{{ k }}::text, {% endfor %}{{ fact_at|pgts }} FROM {{ facts }} WHERE {{ fact_sk }} = -1
ORDER BY {{ facts }}.{{ fact_at }}{% for k in fact_keys %}, {{ facts }}.{{ k }}{% endfor %} LIMIT 1
-- statement: index_rows
SELECT {% for k in keys %}d.{{ k }}::text, {% endfor %}(extract(epoch FROM d.valid_from) * 1000000)::bigint::text,
       (extract(epoch FROM d.valid_to) * 1000000)::bigint::text, d.{{ sk }}::text
FROM {{ dim }} d
ORDER BY {{ keys|cols("d") }}, d.valid_from
