{# Reading the dimension and the log for people: history of one key. Key values arrive
   as bound text and are cast to the column's type, so the key index is used. #}
{% macro key_filter(p) %}{% for c in key_defs %}{{ p }}{{ c.name }} = CAST(${{ loop.index }} AS {{ c.target_type }}){{ " AND " if not loop.last }}{% endfor %}{% endmacro %}
-- statement: history
SELECT x.sk::text, {% for c in attrs %}x.{{ c }}::text, {% endfor %}{{ "x.valid_from"|pgts }}, {{ "x.valid_to"|pgts }},
       x.is_current::text, x.is_deleted::text, x.load_id::text
FROM (
    SELECT d.{{ sk }} AS sk{% for c in attrs %}, d.{{ c }}{% endfor %}, d.valid_from, d.valid_to, d.is_current, false AS is_deleted, d.load_id
    FROM {{ dim }} d WHERE {{ key_filter("d.") }}
    UNION ALL
    SELECT NULL{% for c in attrs %}, NULL{% endfor %}, e.valid_from, NULL, false, true, e.load_id
    FROM (
        SELECT DISTINCT ON (l.valid_from) l.valid_from, l.is_deleted, l.load_id
        FROM {{ log }} l WHERE {{ key_filter("l.") }}
        ORDER BY l.valid_from, l.log_id DESC
    ) e
    WHERE e.is_deleted
) x
ORDER BY x.valid_from, x.is_deleted
