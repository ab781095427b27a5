{# Reading the dimension and the log for people: history of one key. Key values arrive
   as bound text in canonical form and are cast to the column's type without its
   modifier (`key_casts`, see lookup::pg_cast_type), so the key index is used and
   nothing is rounded or cut short. #}
{% macro key_filter(p) %}{% for c in key_defs %}{{ p }}{{ c.name }} = CAST(${{ loop.index }} AS {{ key_casts[loop.index0] }}){{ " AND " if not loop.last }}{% endfor %}{% endmacro %}
-- statement: history
SELECT dimlog_x.dimlog_sk::text, {% for c in attrs %}dimlog_x.{{ c }}::text, {% endfor %}{{ "dimlog_x.valid_from"|pgts }}, {{ "dimlog_x.valid_to"|pgts }},
       dimlog_x.is_current::text, dimlog_x.is_deleted::text, dimlog_x.load_id::text
FROM (
    SELECT dimlog_d.{{ sk }} AS dimlog_sk{% for c in attrs %}, dimlog_d.{{ c }}{% endfor %}, dimlog_d.valid_from, dimlog_d.valid_to, dimlog_d.is_current, false AS is_deleted, dimlog_d.load_id
    FROM {{ dim }} dimlog_d WHERE {{ key_filter("dimlog_d.") }}
    UNION ALL
    SELECT NULL{% for c in attrs %}, NULL{% endfor %}, dimlog_e.valid_from, NULL, false, true, dimlog_e.load_id
    FROM (
        SELECT DISTINCT ON (dimlog_l.valid_from) dimlog_l.valid_from, dimlog_l.is_deleted, dimlog_l.load_id
        FROM {{ log }} dimlog_l WHERE {{ key_filter("dimlog_l.") }}
        ORDER BY dimlog_l.valid_from, dimlog_l.log_id DESC
    ) dimlog_e
    WHERE dimlog_e.is_deleted
) dimlog_x
ORDER BY dimlog_x.valid_from, dimlog_x.is_deleted
