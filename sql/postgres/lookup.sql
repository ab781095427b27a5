{# Surrogate-key lookup for fact loaders: the version with valid_from <= ts < valid_to.
   Served by the dimension's index on (key, valid_from). #}
{% macro key_filter(p) %}{% for c in key_defs %}{{ p }}{{ c.name }} = CAST(${{ loop.index }} AS {{ c.target_type }}) AND {% endfor %}{% endmacro %}
-- statement: one
SELECT dimlog_d.{{ sk }}::text FROM {{ dim }} dimlog_d
WHERE {{ key_filter("dimlog_d.") }}dimlog_d.valid_from <= ${{ key_defs|length + 1 }} AND ${{ key_defs|length + 1 }} < dimlog_d.valid_to
-- statement: fact_columns
SELECT dimlog_a.attname::text, format_type(dimlog_a.atttypid, dimlog_a.atttypmod)
FROM pg_attribute dimlog_a WHERE dimlog_a.attrelid = to_regclass($1) AND dimlog_a.attnum > 0 AND NOT dimlog_a.attisdropped
-- statement: add_sk_column
ALTER TABLE {{ facts }} ADD COLUMN IF NOT EXISTS {{ fact_sk }} bigint
-- statement: assign
UPDATE {{ facts }} dimlog_f
SET {{ fact_sk }} = dimlog_m.dimlog_sk
FROM (
    SELECT dimlog_x.ctid AS dimlog_rid, COALESCE(dimlog_d.{{ sk }}, -1) AS dimlog_sk
    FROM {{ facts }} dimlog_x
    LEFT JOIN {{ dim }} dimlog_d
      ON {% for k in fact_keys %}dimlog_d.{{ keys[loop.index0] }} = dimlog_x.{{ k }} AND {% endfor %}dimlog_d.valid_from <= dimlog_x.{{ fact_at }} AND dimlog_x.{{ fact_at }} < dimlog_d.valid_to
) dimlog_m
WHERE dimlog_f.ctid = dimlog_m.dimlog_rid AND dimlog_f.{{ fact_sk }} IS DISTINCT FROM dimlog_m.dimlog_sk
-- statement: counts
SELECT count(*) FILTER (WHERE {{ fact_sk }} <> -1)::text, count(*) FILTER (WHERE {{ fact_sk }} = -1)::text FROM {{ facts }}
-- statement: first_unknown
SELECT {% for k in fact_keys %}{{ k }}::text, {% endfor %}{{ fact_at|pgts }} FROM {{ facts }} WHERE {{ fact_sk }} = -1
ORDER BY {{ facts }}.{{ fact_at }}{% for k in fact_keys %}, {{ facts }}.{{ k }}{% endfor %} LIMIT 1
-- statement: index_rows
SELECT {% for k in keys %}dimlog_d.{{ k }}::text, {% endfor %}(extract(epoch FROM dimlog_d.valid_from) * 1000000)::bigint::text,
       (extract(epoch FROM dimlog_d.valid_to) * 1000000)::bigint::text, dimlog_d.{{ sk }}::text
FROM {{ dim }} dimlog_d
ORDER BY {{ keys|cols("dimlog_d") }}, dimlog_d.valid_from
