{# Reading the source. SQLite keeps timestamps as text that may carry any offset, so
   the window is applied loosely here, through julianday (which converts offsets to UTC
   but holds only about 40 µs of precision; naive local times with source.timezone need
   up to 14 h), and exactly in Rust after each value is parsed. #}
{# Byte strings read as PostgreSQL's bytea text (`\x` and hex), so they hash and load as
   the bytes they are; every other value as text, which must be UTF-8. #}
{# A value as text. A double (storage class REAL) in the fewest digits, 15 to 17, that
   give the same double back: SQLite's own text has 15, and would read two keys as one
   (`0.30000000000000004` and `0.3`) or a change in the last digits as none. #}
{% macro text(c) %}{% if c.kind == "bytes" %}CASE WHEN {{ c.name }} IS NULL THEN NULL ELSE '\x' || lower(hex({{ c.name }})) END {% else %}{{ c.name|text }}{% endif %}{% endmacro %}
{# A change-column value the loose window cannot place: not text, not read by julianday,
   not shaped like a date (julianday reads bare numbers as Julian day numbers), or a date
   SQLite would roll over (2026-02-30). Such rows are read whatever the window, so the
   exact parser sees each one and fails the run naming it: a value with no instant is
   never skipped as outside the window. #}
{% macro unreadable() %}(typeof({{ updated_at }}) <> 'text'
        OR julianday(trim({{ updated_at }})) IS NULL
        OR trim({{ updated_at }}) NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'
        OR date(substr(trim({{ updated_at }}), 1, 10)) IS NOT substr(trim({{ updated_at }}), 1, 10)
        OR substr(trim({{ updated_at }}), 1, 4) = '0000'
        OR (trim({{ updated_at }}) GLOB '??????????[Tt ][0-9][0-9]*' AND CAST(substr(trim({{ updated_at }}), 12, 2) AS INTEGER) > 23)){% endmacro %}
{# Read through indexes (`indexed`, for a window with a lower bound). A value of the
   shape `placeable` (text `YYYY-MM-DD[T ]HH:MM:SS`, a real date and time, 1 to 6 digits
   of fraction, then `Z`, an offset of at most 14:59, or with source.timezone nothing)
   is a local time less than a day from its instant, and its text sorts with its local
   time: with a space after the date it compares time for time with the bound
   `YYYY-MM-DD HH:MM:SS`, with `T` it is greater than every bound of its date. So the
   window's placeable rows are those whose text lies from a day before the lower bound
   to two days after the upper bound's date, a range an index on the column serves; every
   other value (`off_index`) is read wherever it lies, as `unreadable` is, through a
   partial index of exactly those rows (see `index_advice`). The exact window applies in
   Rust, which reads every placeable value. `placeable` uses no date function: a partial
   index is filled by whichever SQLite writes the table, and date functions differ
   between versions (3.40's `date('2026-02-30')` is `2026-02-30`, later ones roll it
   over), while text, CAST and arithmetic do not. #}
{% macro u() %}{{ updated_at }}{% endmacro %}
{% macro int_at(from, n) %}CAST(substr({{ u() }}, {{ from }}, {{ n }}) AS INTEGER){% endmacro %}
{% macro zone_part() %}(CASE WHEN substr({{ u() }}, 20, 1) = '.' THEN ltrim(substr({{ u() }}, 21), '0123456789') ELSE substr({{ u() }}, 20) END){% endmacro %}
{% macro placeable() %}(typeof({{ u() }}) = 'text'
        AND {{ u() }} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][T ][0-9][0-9]:[0-9][0-9]:[0-9][0-9]*'
        AND {{ int_at(1, 4) }} BETWEEN 1000 AND 9998
        AND {{ int_at(6, 2) }} BETWEEN 1 AND 12
        AND {{ int_at(9, 2) }} BETWEEN 1 AND (CASE {{ int_at(6, 2) }}
            WHEN 2 THEN 28 + ({{ int_at(1, 4) }} % 4 = 0 AND ({{ int_at(1, 4) }} % 100 <> 0 OR {{ int_at(1, 4) }} % 400 = 0))
            WHEN 4 THEN 30 WHEN 6 THEN 30 WHEN 9 THEN 30 WHEN 11 THEN 30 ELSE 31 END)
        AND {{ int_at(12, 2) }} < 24 AND {{ int_at(15, 2) }} < 60 AND {{ int_at(18, 2) }} < 60
        AND (substr({{ u() }}, 20, 1) <> '.' OR length(substr({{ u() }}, 21)) - length({{ zone_part() }}) BETWEEN 1 AND 6)
        AND ({{ zone_part() }} = 'Z'
             OR ({{ zone_part() }} GLOB '[+-][0-9][0-9]:[0-5][0-9]' AND CAST(substr({{ zone_part() }}, 2, 2) AS INTEGER) <= 14){% if tz %}
             OR {{ zone_part() }} = ''{% endif %})){% endmacro %}
{% macro off_index() %}(NOT {{ placeable() }}){% endmacro %}
{% macro in_text_range() %}({{ updated_at }} >= strftime('%Y-%m-%d %H:%M:%S', ?1, '-1 day') AND {{ updated_at }} < date(?2, '+2 days')){% endmacro %}
-- statement: rows
{% if indexed %}
{# The placeable rows of the text range, of which julianday (exact to within its 40 µs
   for these shapes, and here run by dimlog's own SQLite) keeps those from a second
   before the lower bound on (naive local times, which it would read as UTC, all); then
   every value an index cannot place. #}
SELECT {% for c in columns %}{{ text(c) }}, {% endfor %}
       CAST({{ updated_at }} AS TEXT)
       {% if deleted_flag %}, CAST({{ deleted_flag }} AS TEXT){% endif %}
FROM {{ relation }}
WHERE {{ in_text_range() }} AND {{ placeable() }}
  AND (julianday({{ updated_at }}) >= julianday(?1) - 0.0000116{% if tz %} OR {{ zone_part() }} = ''{% endif %})
UNION ALL
SELECT {% for c in columns %}{{ text(c) }}, {% endfor %}
       CAST({{ updated_at }} AS TEXT)
       {% if deleted_flag %}, CAST({{ deleted_flag }} AS TEXT){% endif %}
FROM {{ relation }}
WHERE {{ updated_at }} IS NOT NULL AND {{ off_index() }}
{% else %}
SELECT {% for c in columns %}{{ text(c) }}, {% endfor %}
       CAST({{ updated_at }} AS TEXT)
       {% if deleted_flag %}, CAST({{ deleted_flag }} AS TEXT){% endif %}
FROM {{ relation }}
WHERE {{ updated_at }} IS NOT NULL
{# Without a lower bound (a first load, a full refresh) nearly every row is in the
   window: a filter would cost more than reading the few past the upper bound, which
   Rust counts where it drops them (so `future` reads none). #}
{% if low %}
  AND ({{ unreadable() }}
       OR (julianday(trim({{ updated_at }})) >= julianday(?) - {{ slack_days }}
           AND julianday(trim({{ updated_at }})) <= julianday(?) + {{ slack_days }}))
{% endif %}
{# `ordered` (a first load straight into the log) in the key's order, by the source's
   own comparison of its columns: a table keyed by its INTEGER PRIMARY KEY is scanned in
   that order already. Whoever numbers the rows checks that they arrive in the order the
   log's columns give them (a collation or the values' types may differ). #}
{% if ordered %}
ORDER BY {% for c in key_columns %}{{ c.name }}{{ ", " if not loop.last }}{% endfor %}
{% endif %}
{% endif %}
{# The partial index that lets `rows` read the values off the date-ordered index without
   a scan: its condition is `off_index`, word for word, as SQLite needs to use it. #}
-- statement: index_advice
CREATE INDEX {{ index_name }} ON {{ table }} ({{ updated_at }});
CREATE INDEX {{ guard_name }} ON {{ table }} ({{ updated_at }}) WHERE {{ off_index() }};
{# Change-column values that may be times without a zone (text without `Z` or an offset
   after the time): read in Rust, which says which of them are; for a first load, whose
   tables must not be created for a config error. #}
-- statement: zone_less
SELECT DISTINCT CAST({{ updated_at }} AS TEXT) FROM {{ relation }}
WHERE typeof({{ updated_at }}) = 'text'
  AND NOT (substr({{ updated_at }}, -1) IN ('Z', 'z')
       OR {{ updated_at }} GLOB '????-??-??[Tt ]*[+-][0-9][0-9]:[0-9][0-9]'
       OR {{ updated_at }} GLOB '????-??-??[Tt ]*[+-][0-9][0-9][0-9][0-9]'
       OR {{ updated_at }} GLOB '????-??-??[Tt ]*[+-][0-9][0-9]')
LIMIT 100
-- statement: null_check
SELECT count(*) FROM {{ relation }} WHERE {{ updated_at }} IS NULL
{# The key of one such row, for the error to name. #}
-- statement: null_example
SELECT {% for c in key_columns %}{{ text(c) }}{{ ", " if not loop.last }}{% endfor %} FROM {{ relation }} WHERE {{ updated_at }} IS NULL LIMIT 1
{# Change-column values that are no time SQLite can place need no scan of their own: the
   window's read returns every `unreadable` row wherever it lies, and the exact parser
   fails the run naming its key and value. #}
-- statement: no_instant
SELECT NULL WHERE 0
{# The oldest change by instant: every value, with its row's key, which Rust parses
   (dimlog's one rule) and folds as they stream by. A whole scan either way, and
   julianday's filters cost SQLite more than the scan and the parse; a value that names
   no instant fails here as it fails a run. #}
-- statement: oldest
SELECT CAST({{ updated_at }} AS TEXT){% for c in key_columns %}, {{ text(c) }}{% endfor %} FROM {{ relation }}
WHERE {{ updated_at }} IS NOT NULL
{# Rows stamped after the upper bound (future_rows) that the loose window does not read
   either; those it reads past the bound are counted in Rust, where they are dropped. #}
-- statement: future
{% if indexed %}
{# Past the text range `rows` reads (the index finds them): each is a time julianday
   reads, and later than the upper bound. #}
SELECT count(*) OVER (), CAST({{ updated_at }} AS TEXT){% for c in key_columns %}, {{ text(c) }}{% endfor %}
  FROM {{ relation }}
WHERE {{ updated_at }} >= date(?1, '+2 days') AND {{ placeable() }}
ORDER BY julianday({{ updated_at }}) DESC LIMIT 1
{% elif low %}
SELECT count(*) OVER (), CAST({{ updated_at }} AS TEXT){% for c in key_columns %}, {{ text(c) }}{% endfor %}
  FROM {{ relation }}
WHERE julianday(trim({{ updated_at }})) > julianday(?1) + {{ slack_days }} AND NOT {{ unreadable() }}
ORDER BY julianday(trim({{ updated_at }})) DESC LIMIT 1
{% else %}
{# Without a lower bound `rows` reads them all (see there). #}
SELECT NULL WHERE 0
{% endif %}
-- statement: now
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
{# The newest change by instant, not by text (`…T12:00:00-05:00` is later than
   `… 23:00:00Z`): as `oldest`, every value, folded in Rust. #}
-- statement: newest
SELECT CAST({{ updated_at }} AS TEXT){% for c in key_columns %}, {{ text(c) }}{% endfor %} FROM {{ relation }}
WHERE {{ updated_at }} IS NOT NULL
{# Each key, and with a soft-delete flag whether its row is live: NULL for a flag that
   spells neither true nor false (reconciliation refuses it, as a window's read does). #}
-- statement: keys
SELECT {% for c in key_columns %}{{ text(c) }}{{ ", " if not loop.last }}{% endfor %}
       {% if deleted_flag %}, CASE WHEN {{ deleted_flag }} IS NULL THEN 'true'
                                   WHEN lower(trim(CAST({{ deleted_flag }} AS TEXT), ' ' || char(9, 10, 11, 12, 13))) IN ('true', 't', '1', 'yes', 'y') THEN 'false'
                                   WHEN lower(trim(CAST({{ deleted_flag }} AS TEXT), ' ' || char(9, 10, 11, 12, 13))) IN ('false', 'f', '0', 'no', 'n', '') THEN 'true'
                              END{% endif %} FROM {{ relation }}
-- statement: columns
SELECT name, type, CAST(NULLIF(pk, 0) AS TEXT) FROM pragma_table_info(?, ?) ORDER BY cid
{# Reads nothing, but needs every right a read does: the catalog shows a table's columns
   to a role that may not read its rows (`dimlog doctor`). #}
-- statement: readable
SELECT 1 FROM {{ relation }} WHERE 1 = 0
{# SQLite has no rights on columns. #}
-- statement: unreadable_columns
SELECT NULL WHERE 0
