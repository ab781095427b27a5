{# Reading the source. COPY takes no bound parameters, so the window bounds are
   timestamp literals that dimlog formats itself from typed values (never user text).
   The change column is not hashed, so it comes as timestamptz's own text (the session
   is pinned to UTC and ISO dates: `2026-10-05 09:30:00+00`), which costs the server far
   less than to_char; tracked timestamptz columns keep their canonical to_char text.
   `ordered` (a first load straight into the log) sorts by the table's own key columns,
   text keys by their text bytewise, as append.sql's `key_order` does on the target. #}
{# A tracked timestamptz as fixed-width UTC text; an instant before the common era
   carries ` BC` (YYYY has no sign: it would read as the AD year), and the infinities
   their own names (to_char gives NULL for them). PostgreSQL reads every one back. #}
{% macro text(c) %}{% if c.kind == "timestamptz" %}CASE WHEN NOT isfinite({{ c.name }}) THEN {{ c.name }}::text WHEN {{ c.name }} < '0001-01-01 00:00:00+00' THEN to_char({{ c.name }} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z BC"') ELSE to_char({{ c.name }} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') END{% else %}{{ c.name }}::text{% endif %}{% endmacro %}
{# A change column without a zone (`local`: `timestamp` or `date` with source.timezone)
   comes as its own text, which dimlog converts by its one rule (see ts.rs), never the
   server's `AT TIME ZONE`; its window is bounded by local times dimlog computed, wider
   than the window by the zone's offsets, and applied exactly to the converted instants. #}
{% macro change(e) %}{% if local %}({{ e }})::text{% else %}({{ e }}){% endif %}{% endmacro %}
{# A single change value for Rust to convert: its own text (a timestamptz's carries
   `+00`, the session being pinned to UTC), so it does not depend on the column's type. #}
{% macro utc(e) %}({{ e }})::text{% endmacro %}
-- statement: rows
COPY (
  SELECT {% for c in columns %}{{ text(c) }}, {% endfor %}
         {{ change(updated_at) }}
         {% if deleted_flag %}, {{ deleted_flag }}::text{% endif %}
  FROM {{ relation }}{% if ordered %} AS dimlog_src{% endif %}
  WHERE TRUE
{% if local %}
  {% if low_local %}  AND {{ updated_at }} >= '{{ low_local }}'::timestamp{% endif %}
  {% if high_local %}  AND {{ updated_at }} <= '{{ high_local }}'::timestamp{% endif %}
{% else %}
  {% if low %}  AND {{ updated_at }} >= '{{ low }}'::timestamptz{% endif %}
  {% if high %}  AND {{ updated_at }} {{ "<=" if high_inclusive else "<" }} '{{ high }}'::timestamptz{% endif %}
{% endif %}
  {% if ordered %} ORDER BY {% for c in key_columns %}{% if c.kind == "text" %}(dimlog_src.{{ c.name }})::text COLLATE "C"{% else %}dimlog_src.{{ c.name }}{% endif %}{{ ", " if not loop.last }}{% endfor %}{% endif %}
) TO STDOUT
-- statement: null_check
SELECT count(*)::text FROM {{ relation }} WHERE {{ updated_at }} IS NULL
{# The key of one such row, for the error to name. #}
-- statement: null_example
SELECT {% for c in key_columns %}{{ text(c) }}{{ ", " if not loop.last }}{% endfor %} FROM {{ relation }} WHERE {{ updated_at }} IS NULL LIMIT 1
{# Change-column values with no instant (`infinity`, `-infinity`): how many, and the
   key and value of one of them (an equality, so an index on the column serves it). #}
-- statement: no_instant
SELECT (count(*) OVER ())::text, {{ updated_at }}::text{% for c in key_columns %}, {{ text(c) }}{% endfor %}
  FROM {{ relation }} WHERE {{ updated_at }} IN ('infinity', '-infinity') LIMIT 1
{# The oldest, the newest and the newest future change: the value with its row's key, so
   a value that names no instant is reported with the row holding it. A local column's
   order is its instants' order (the rule is monotone), so ORDER BY the column serves. #}
-- statement: oldest
SELECT {{ utc(updated_at) }}{% for c in key_columns %}, {{ text(c) }}{% endfor %}
  FROM {{ relation }} WHERE isfinite({{ updated_at }}) ORDER BY {{ updated_at }} LIMIT 1
{# Rows stamped after the upper bound (future_rows) that the read does not return; a
   read in local time returns some past the bound, counted where they are dropped. #}
-- statement: future
SELECT (count(*) OVER ())::text, {{ utc(updated_at) }}{% for c in key_columns %}, {{ text(c) }}{% endfor %}
  FROM {{ relation }}
WHERE {% if local %}{{ updated_at }} > '{{ high_local }}'::timestamp AND $1::timestamptz IS NOT NULL{% else %}{{ updated_at }} > $1::timestamptz{% endif %}
  ORDER BY {{ updated_at }} DESC LIMIT 1
{# Which database of which server this is: two URLs spelled differently (a host name and
   its address) may name one, and then a log named like the source table would be it. #}
-- statement: identity
SELECT current_database()::text || '/' || (SELECT oid FROM pg_database WHERE datname = current_database())::text
       || '/' || pg_postmaster_start_time()::text || '/' || current_setting('port')
-- statement: now
SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
-- statement: newest
SELECT {{ utc(updated_at) }}{% for c in key_columns %}, {{ text(c) }}{% endfor %}
  FROM {{ relation }} WHERE isfinite({{ updated_at }}) ORDER BY {{ updated_at }} DESC LIMIT 1
{# Each key, and with a soft-delete flag whether its row is live: NULL for a flag that
   spells neither true nor false (reconciliation refuses it, as a window's read does). #}
-- statement: keys
COPY (SELECT {% for c in key_columns %}{{ text(c) }}{{ ", " if not loop.last }}{% endfor %}
             {% if deleted_flag %}, CASE WHEN {{ deleted_flag }} IS NULL THEN true
                                         WHEN lower(btrim({{ deleted_flag }}::text, E' \t\n\r\f' || chr(11))) IN ('true', 't', '1', 'yes', 'y') THEN false
                                         WHEN lower(btrim({{ deleted_flag }}::text, E' \t\n\r\f' || chr(11))) IN ('false', 'f', '0', 'no', 'n', '') THEN true
                                    END{% endif %}
      FROM {{ relation }}) TO STDOUT
-- statement: columns
SELECT dimlog_a.attname::text,
       format_type(dimlog_a.atttypid, dimlog_a.atttypmod),
       (SELECT array_position(dimlog_i.indkey::int2[], dimlog_a.attnum)::text
          FROM pg_index dimlog_i WHERE dimlog_i.indrelid = dimlog_a.attrelid AND dimlog_i.indisprimary
           -- A plain table's primary key does not cover the tables inheriting from it,
           -- whose rows a read includes: then it is no key of what dimlog reads.
           AND NOT EXISTS (SELECT 1 FROM pg_inherits dimlog_h JOIN pg_class dimlog_p ON dimlog_p.oid = dimlog_h.inhparent
                           WHERE dimlog_h.inhparent = dimlog_a.attrelid AND dimlog_p.relkind = 'r'))
FROM pg_attribute dimlog_a
WHERE dimlog_a.attrelid = to_regclass($1) AND dimlog_a.attnum > 0 AND NOT dimlog_a.attisdropped
ORDER BY dimlog_a.attnum
{# Reads nothing, but needs every right a read does: the catalog shows a table's columns
   to a role that may not read its rows (`dimlog doctor`). #}
{# Every column a run reads: a role with SELECT on some columns only is refused here,
   not half-way through a load. #}
-- statement: readable
SELECT {% for c in columns %}{{ c.name }}, {% endfor %}{{ updated_at }}{% if deleted_flag %}, {{ deleted_flag }}{% endif %} FROM {{ relation }} WHERE 1 = 0
{# The columns of $2 (bare names joined by commas: names are plain identifiers) of table
   $1 the role may not read, one per row, for the refusal to name. #}
-- statement: unreadable_columns
SELECT dimlog_c.dimlog_n
FROM unnest(string_to_array($2, ',')) WITH ORDINALITY AS dimlog_c(dimlog_n, dimlog_o)
WHERE NOT has_column_privilege(to_regclass($1), dimlog_c.dimlog_n, 'SELECT')
ORDER BY dimlog_c.dimlog_o
