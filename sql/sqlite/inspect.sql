{# Reading the dimension and the log for people: history of one key. #}
{% macro key_filter(p) %}{% for c in key_defs %}{{ p }}{{ c.name }} = ?{{ loop.index }}{{ " AND " if not loop.last }}{% endfor %}{% endmacro %}
-- statement: history
SELECT CAST(x.sk AS TEXT), {% for c in attrs %}CAST(x.{{ c }} AS TEXT), {% endfor %}x.valid_from, x.valid_to,
       CASE WHEN x.is_current THEN 'true' ELSE 'false' END, CASE WHEN x.is_deleted THEN 'true' ELSE 'false' END, CAST(x.load_id AS TEXT)
FROM (
    SELECT d.{{ sk }} AS sk{% for c in attrs %}, d.{{ c }}{% endfor %}, d.valid_from, d.valid_to, d.is_current, 0 AS is_deleted, d.load_id
    FROM {{ dim }} d WHERE {{ key_filter("d.") }}
    UNION ALL
    SELECT NULL{% for c in attrs %}, NULL{% endfor %}, e.valid_from, NULL, 0, 1, e.load_id
    FROM (
        SELECT l.valid_from, l.is_deleted, l.load_id,
               ROW_NUMBER() OVER (PARTITION BY l.valid_from ORDER BY l.log_id DESC) AS dimlog_rn
        FROM {{ log }} l WHERE {{ key_filter("l.") }}
    ) e
    WHERE e.dimlog_rn = 1 AND e.is_deleted
) x
ORDER BY x.valid_from, x.is_deleted
