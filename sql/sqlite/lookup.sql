{# Surrogate-key lookup for fact loaders: the version with valid_from <= ts < valid_to.
   Fact timestamps are compared as dimlog's fixed-width UTC text; other RFC 3339 forms
   are normalised first: strftime converts the text without its fraction to UTC (it
   would round a fraction to milliseconds, and .9999 up into the next second), and the
   fraction is carried over from the text (an offset moves whole minutes only), padded
   to 6 digits. #}
{% macro key_filter(p) %}{% for c in key_defs %}{{ p }}{{ c.name }} = ?{{ loop.index }} AND {% endfor %}{% endmacro %}
{% macro canon(x) %}(CASE WHEN {{ x }} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z' THEN {{ x }}
 WHEN {{ x }} GLOB '*Z' AND instr({{ x }}, '.') > 0 THEN strftime('%Y-%m-%dT%H:%M:%S', substr({{ x }}, 1, instr({{ x }}, '.') - 1) || 'Z') || '.' || substr(substr({{ x }}, instr({{ x }}, '.') + 1, length({{ x }}) - instr({{ x }}, '.') - 1) || '000000', 1, 6) || 'Z'
 WHEN {{ x }} GLOB '*[+-][0-9][0-9]:[0-9][0-9]' AND instr({{ x }}, '.') > 0 THEN strftime('%Y-%m-%dT%H:%M:%S', substr({{ x }}, 1, instr({{ x }}, '.') - 1) || substr({{ x }}, -6)) || '.' || substr(substr({{ x }}, instr({{ x }}, '.') + 1, length({{ x }}) - instr({{ x }}, '.') - 6) || '000000', 1, 6) || 'Z'
 ELSE strftime('%Y-%m-%dT%H:%M:%S', {{ x }}) || '.000000Z' END){% endmacro %}
-- statement: one
SELECT CAST(dimlog_d.{{ sk }} AS TEXT) FROM {{ dim }} dimlog_d
WHERE {{ key_filter("dimlog_d.") }}dimlog_d.valid_from <= ?{{ key_defs|length + 1 }} AND ?{{ key_defs|length + 1 }} < dimlog_d.valid_to
-- statement: fact_columns
SELECT name, type FROM pragma_table_info(?1)
-- statement: add_sk_column
ALTER TABLE {{ facts }} ADD COLUMN {{ fact_sk }} INTEGER
-- statement: assign
UPDATE {{ facts }}
SET {{ fact_sk }} = COALESCE((
    SELECT dimlog_d.{{ sk }} FROM {{ dim }} dimlog_d
    WHERE {% for k in fact_keys %}dimlog_d.{{ keys[loop.index0] }} = {{ facts }}.{{ k }} AND {% endfor %}dimlog_d.valid_from <= {{ canon(facts ~ "." ~ fact_at) }}
      AND {{ canon(facts ~ "." ~ fact_at) }} < dimlog_d.valid_to
), -1)
-- statement: counts
SELECT sum({{ fact_sk }} <> -1), sum({{ fact_sk }} = -1) FROM {{ facts }}
-- statement: first_unknown
SELECT {% for k in fact_keys %}CAST({{ k }} AS TEXT), {% endfor %}CAST({{ fact_at }} AS TEXT) FROM {{ facts }} WHERE {{ fact_sk }} = -1
ORDER BY {{ canon(fact_at) }}{% for k in fact_keys %}, {{ k }}{% endfor %} LIMIT 1
-- statement: index_rows
SELECT {% for k in keys %}CAST(dimlog_d.{{ k }} AS TEXT), {% endfor %}dimlog_d.valid_from, dimlog_d.valid_to, CAST(dimlog_d.{{ sk }} AS TEXT)
FROM {{ dim }} dimlog_d
ORDER BY {{ keys|cols("dimlog_d") }}, dimlog_d.valid_from
