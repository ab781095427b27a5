{# `dimlog verify`: the invariants of the dimension and the log. Every check returns
   (offending key as text, detail) rows; `counted` counts them in the database and returns
   only the first few, so a check that finds millions costs no memory. #}
{% macro keytext(p) %}({% for k in keys %}CAST({{ p }}{{ k }} AS TEXT){{ " || ', ' || " if not loop.last }}{% endfor %}){% endmacro %}
-- statement: bad_interval
SELECT {{ keytext("d.") }}, 'valid_from ' || d.valid_from || ' is not before valid_to ' || d.valid_to
FROM {{ dim }} d WHERE d.valid_from >= d.valid_to
-- statement: overlap_or_gap
SELECT {{ keytext("x.") }},
       CASE WHEN x.valid_from < x.prev_to THEN 'version at ' || x.valid_from || ' overlaps the one before (ends ' || x.prev_to || ')'
            ELSE 'gap from ' || x.prev_to || ' to ' || x.valid_from || ' with no tombstone' END
FROM (
    SELECT d.*, LAG(d.valid_to) OVER (PARTITION BY {{ keys|cols("d") }} ORDER BY d.valid_from) AS prev_to
    FROM {{ dim }} d
) x
WHERE x.prev_to IS NOT NULL
  AND (x.valid_from < x.prev_to
       OR (x.valid_from > x.prev_to AND NOT EXISTS (
             SELECT 1 FROM {{ log }} l WHERE {{ keys|eqs("l", "x") }} AND l.valid_from = x.prev_to AND l.is_deleted)))
-- statement: current
SELECT {{ keytext("d.") }}, CAST(sum(d.is_current) AS TEXT) || ' current rows'
FROM {{ dim }} d
GROUP BY {{ keys|cols("d") }}
HAVING sum(d.is_current) > 1
    OR sum(d.is_current AND d.valid_to <> {{ sentinel }}) > 0
    OR sum(NOT d.is_current AND d.valid_to = {{ sentinel }}) > 0
-- statement: sk_reused
SELECT 'surrogate key ' || CAST(x.sk AS TEXT), CAST(count(*) AS TEXT) || ' distinct (key, valid_from) pairs share it'
FROM (SELECT DISTINCT l.{{ sk }} AS sk, {{ keys|cols("l") }}, l.valid_from FROM {{ log }} l WHERE l.{{ sk }} IS NOT NULL) x
GROUP BY x.sk
HAVING count(*) > 1
-- statement: rebuild_diff
SELECT {{ keytext("z.") }}, z.side || ' surrogate key ' || CAST(z.sk AS TEXT)
FROM (
    SELECT 'dimension has' AS side, d.{{ sk }} AS sk{% for k in keys %}, d.{{ k }}{% endfor %} FROM (
        SELECT {{ sk }}, {{ keys|cols }}, valid_from, valid_to, is_current, row_hash, load_id FROM {{ dim }}
        EXCEPT
        SELECT {{ sk }}, {{ keys|cols }}, valid_from, valid_to, is_current, row_hash, load_id FROM {{ dim_new }}) d
    UNION ALL
    SELECT 'a fresh rebuild has', n.{{ sk }}{% for k in keys %}, n.{{ k }}{% endfor %} FROM (
        SELECT {{ sk }}, {{ keys|cols }}, valid_from, valid_to, is_current, row_hash, load_id FROM {{ dim_new }}
        EXCEPT
        SELECT {{ sk }}, {{ keys|cols }}, valid_from, valid_to, is_current, row_hash, load_id FROM {{ dim }}) n
) z
-- statement: source_missing
SELECT {{ keytext("s.") }}, 'in the source, not current in the dimension'
FROM dimlog_stage s
WHERE NOT s.is_deleted AND NOT EXISTS (SELECT 1 FROM {{ dim }} d WHERE d.is_current AND {{ keys|eqs("d", "s") }})
-- statement: source_extra
SELECT {{ keytext("d.") }}, 'current in the dimension, not in the source'
FROM {{ dim }} d
WHERE d.is_current AND NOT EXISTS (SELECT 1 FROM dimlog_stage s WHERE NOT s.is_deleted AND {{ keys|eqs("d", "s") }})
-- statement: source_different
SELECT {{ keytext("s.") }}, 'tracked values differ (source updated_at ' || s.valid_from || ', dimension valid_from ' || d.valid_from || ')'
FROM dimlog_stage s
JOIN {{ dim }} d ON d.is_current AND {{ keys|eqs("d", "s") }}
WHERE NOT s.is_deleted AND (s.row_hash <> d.row_hash{% for c in t1 %} OR s.{{ c }} IS NOT d.{{ c }}{% endfor %})
{# `rebuilt`, when the check compares with a fresh rebuild: rebuild.sql's `rebuilt`. #}
-- statement: counted
WITH {% if rebuilt %}{{ rebuilt }},
{% endif %}dimlog_check AS MATERIALIZED (
{{ check }}
)
SELECT CAST((SELECT count(*) FROM dimlog_check) AS TEXT), c.* FROM dimlog_check c LIMIT {{ examples }}
