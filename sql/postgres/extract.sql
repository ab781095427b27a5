{# Reading the source. COPY takes no bound parameters, so the window bounds are
   timestamp literals that dimlog formats itself from typed values (never user text).
   The change column is not hashed, so it comes as timestamptz's own text (the session
   is pinned to UTC and ISO dates: `2026-10-05 09:30:00+00`), which costs the server far
   less than to_char; tracked timestamptz columns keep their canonical to_char text.
   `ordered` (a first load straight into the log) sorts by the table's own key columns,
   text keys by their text bytewise, as append.sql's `key_order` does on the target. #}
{% macro text(c) %}{% if c.kind == "timestamptz" %}to_char({{ c.name }} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'){% else %}{{ c.name }}::text{% endif %}{% endmacro %}
{% macro ts(e) %}{% if tz %}(({{ e }}) AT TIME ZONE '{{ tz }}'){% else %}({{ e }}){% endif %}{% endmacro %}
{% macro bound(lit) %}{% if tz %}('{{ lit }}'::timestamptz AT TIME ZONE '{{ tz }}'){% else %}'{{ lit }}'::timestamptz{% endif %}{% endmacro %}
-- statement: rows
COPY (
  SELECT {% for c in columns %}{{ text(c) }}, {% endfor %}
         {{ ts(updated_at) }}
         {% if deleted_flag %}, {{ deleted_flag }}::text{% endif %}
  FROM {{ relation }}{% if ordered %} AS dimlog_src{% endif %}
  WHERE TRUE
  {% if low %}  AND {{ updated_at }} >= {{ bound(low) }}{% endif %}
  {% if high %}  AND {{ updated_at }} {{ "<=" if high_inclusive else "<" }} {{ bound(high) }}{% endif %}
  {% if ordered %} ORDER BY {% for c in key_columns %}{% if c.kind == "text" %}(dimlog_src.{{ c.name }})::text COLLATE "C"{% else %}dimlog_src.{{ c.name }}{% endif %}{{ ", " if not loop.last }}{% endfor %}{% endif %}
) TO STDOUT
-- statement: null_check
SELECT count(*)::text FROM {{ relation }} WHERE {{ updated_at }} IS NULL
{# Rows stamped after the upper bound (future_rows): not read, counted. #}
-- statement: future
SELECT count(*)::text, to_char(max({{ ts(updated_at) }}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM {{ relation }}
WHERE {{ updated_at }} > {% if tz %}($1::timestamptz AT TIME ZONE '{{ tz }}'){% else %}$1::timestamptz{% endif %}
-- statement: now
SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
-- statement: newest
SELECT to_char(max({{ ts(updated_at) }}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') FROM {{ relation }}
-- statement: keys
COPY (SELECT {% for c in key_columns %}{{ text(c) }}{{ ", " if not loop.last }}{% endfor %}
             {% if deleted_flag %}, NOT COALESCE(lower(btrim({{ deleted_flag }}::text)) IN ('true', 't', '1', 'yes', 'y'), false){% endif %}
      FROM {{ relation }}) TO STDOUT
-- statement: columns
SELECT a.attname::text,
       format_type(a.atttypid, a.atttypmod),
       (SELECT array_position(i.indkey::int2[], a.attnum)::text
          FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary
           -- A plain table's primary key does not cover the tables inheriting from it,
           -- whose rows a read includes: then it is no key of what dimlog reads.
           AND NOT EXISTS (SELECT 1 FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhparent
                           WHERE h.inhparent = a.attrelid AND p.relkind = 'r'))
FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
