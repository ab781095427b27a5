{# Reading the dimension and the log for people: history of one key. Bytes read as
   PostgreSQL shows bytea (`\x` and hex), whether or not they happen to be UTF-8. #}
{% macro key_filter(p) %}{% for c in key_defs %}{{ p }}{{ c.name }} = ?{{ loop.index }}{{ " AND " if not loop.last }}{% endfor %}{% endmacro %}
-- statement: history
SELECT CAST(dimlog_x.dimlog_sk AS TEXT), {% for c in attrs %}CASE WHEN typeof(dimlog_x.{{ c }}) = 'blob' THEN '\x' || lower(hex(dimlog_x.{{ c }})) ELSE {{ ("dimlog_x." ~ c)|text }} END, {% endfor %}dimlog_x.valid_from, dimlog_x.valid_to,
       CASE WHEN dimlog_x.is_current THEN 'true' ELSE 'false' END, CASE WHEN dimlog_x.is_deleted THEN 'true' ELSE 'false' END, CAST(dimlog_x.load_id AS TEXT)
FROM (
    SELECT dimlog_d.{{ sk }} AS dimlog_sk{% for c in attrs %}, dimlog_d.{{ c }}{% endfor %}, dimlog_d.valid_from, dimlog_d.valid_to, dimlog_d.is_current, 0 AS is_deleted, dimlog_d.load_id
    FROM {{ dim }} dimlog_d WHERE {{ key_filter("dimlog_d.") }}
    UNION ALL
    SELECT NULL{% for c in attrs %}, NULL{% endfor %}, dimlog_e.valid_from, NULL, 0, 1, dimlog_e.load_id
    FROM (
        SELECT dimlog_l.valid_from, dimlog_l.is_deleted, dimlog_l.load_id,
               ROW_NUMBER() OVER (PARTITION BY dimlog_l.valid_from ORDER BY dimlog_l.log_id DESC) AS dimlog_rn
        FROM {{ log }} dimlog_l WHERE {{ key_filter("dimlog_l.") }}
    ) dimlog_e
    WHERE dimlog_e.dimlog_rn = 1 AND dimlog_e.is_deleted
) dimlog_x
ORDER BY dimlog_x.valid_from, dimlog_x.is_deleted
