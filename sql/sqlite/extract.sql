{# Reading the source. SQLite keeps timestamps as text that may carry any offset, so
   the window is applied loosely here, through julianday (which converts offsets to UTC
   but holds only about 40 µs of precision; naive local times with source.timezone need
   up to 14 h), and exactly in Rust after each value is parsed. #}
-- statement: rows
SELECT {% for c in columns %}CAST({{ c.name }} AS TEXT), {% endfor %}
       CAST({{ updated_at }} AS TEXT)
       {% if deleted_flag %}, CAST({{ deleted_flag }} AS TEXT){% endif %}
FROM {{ relation }}
WHERE {{ updated_at }} IS NOT NULL
{% if low %}  AND julianday({{ updated_at }}) >= julianday(?) - {{ slack_days }}{% endif %}
{% if high %}  AND julianday({{ updated_at }}) <= julianday(?) + {{ slack_days }}{% endif %}
-- statement: null_check
SELECT count(*) FROM {{ relation }} WHERE {{ updated_at }} IS NULL
-- statement: now
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
-- statement: newest
SELECT max({{ updated_at }}) FROM {{ relation }}
-- statement: keys
SELECT {% for c in key_columns %}CAST({{ c.name }} AS TEXT){{ ", " if not loop.last }}{% endfor %} FROM {{ relation }}
-- statement: columns
SELECT name, type, CAST(NULLIF(pk, 0) AS TEXT) FROM pragma_table_info(?, ?) ORDER BY cid
