{# `dimlog verify`: the invariants of the dimension and the log. Every check returns
   (offending key as text, detail) rows; `counted` counts them in the database and returns
   only the first few, so a check that finds millions costs no memory. #}
{% macro keytext(p) %}concat_ws(', '{% for k in keys %}, {{ p }}{{ k }}::text{% endfor %}){% endmacro %}
-- statement: bad_interval
SELECT {{ keytext("dimlog_d.") }}, 'valid_from ' || {{ "dimlog_d.valid_from"|pgts }} || ' is not before valid_to ' || {{ "dimlog_d.valid_to"|pgts }}
FROM {{ dim }} dimlog_d WHERE dimlog_d.valid_from >= dimlog_d.valid_to
-- statement: overlap_or_gap
SELECT {{ keytext("dimlog_x.") }},
       CASE WHEN dimlog_x.valid_from < dimlog_x.dimlog_prev_to THEN 'version at ' || {{ "dimlog_x.valid_from"|pgts }} || ' overlaps the one before (ends ' || {{ "dimlog_x.dimlog_prev_to"|pgts }} || ')'
            ELSE 'gap from ' || {{ "dimlog_x.dimlog_prev_to"|pgts }} || ' to ' || {{ "dimlog_x.valid_from"|pgts }} || ' with no tombstone' END
FROM (
    SELECT dimlog_d.*, LAG(dimlog_d.valid_to) OVER (PARTITION BY {{ keys|cols("dimlog_d") }} ORDER BY dimlog_d.valid_from) AS dimlog_prev_to
    FROM {{ dim }} dimlog_d
) dimlog_x
WHERE dimlog_x.dimlog_prev_to IS NOT NULL
  AND (dimlog_x.valid_from < dimlog_x.dimlog_prev_to
       OR (dimlog_x.valid_from > dimlog_x.dimlog_prev_to AND NOT EXISTS (
             SELECT 1 FROM {{ log }} dimlog_l WHERE {{ keys|eqs("dimlog_l", "dimlog_x") }} AND dimlog_l.valid_from = dimlog_x.dimlog_prev_to AND dimlog_l.is_deleted)))
-- statement: current
SELECT {{ keytext("dimlog_d.") }}, count(*) FILTER (WHERE dimlog_d.is_current)::text || ' current rows; open row is_current = ' || bool_or(dimlog_d.is_current AND dimlog_d.valid_to = {{ sentinel }})::text
FROM {{ dim }} dimlog_d
GROUP BY {{ keys|cols("dimlog_d") }}
HAVING count(*) FILTER (WHERE dimlog_d.is_current) > 1
    OR count(*) FILTER (WHERE dimlog_d.is_current AND dimlog_d.valid_to <> {{ sentinel }}) > 0
    OR count(*) FILTER (WHERE NOT dimlog_d.is_current AND dimlog_d.valid_to = {{ sentinel }}) > 0
-- statement: sk_reused
SELECT 'surrogate key ' || dimlog_l.{{ sk }}::text, count(DISTINCT ({{ keys|cols("dimlog_l") }}, dimlog_l.valid_from))::text || ' distinct (key, valid_from) pairs share it'
FROM {{ log }} dimlog_l
WHERE dimlog_l.{{ sk }} IS NOT NULL
GROUP BY dimlog_l.{{ sk }}
HAVING count(DISTINCT ({{ keys|cols("dimlog_l") }}, dimlog_l.valid_from)) > 1
-- statement: rebuild_diff
SELECT {{ keytext("dimlog_z.") }}, dimlog_z.dimlog_side || ' surrogate key ' || dimlog_z.dimlog_sk::text
FROM (
    (SELECT 'dimension has' AS dimlog_side, dimlog_d.{{ sk }} AS dimlog_sk{% for k in keys %}, dimlog_d.{{ k }}::text AS {{ k }}{% endfor %} FROM (
        SELECT {{ sk }}, {{ keys|cols }}, valid_from, valid_to, is_current, row_hash, load_id FROM {{ dim }}
        EXCEPT
        SELECT {{ sk }}, {{ keys|cols }}, valid_from, valid_to, is_current, row_hash, load_id FROM {{ dim_new }}) dimlog_d)
    UNION ALL
    (SELECT 'a fresh rebuild has', dimlog_n.{{ sk }}{% for k in keys %}, dimlog_n.{{ k }}::text{% endfor %} FROM (
        SELECT {{ sk }}, {{ keys|cols }}, valid_from, valid_to, is_current, row_hash, load_id FROM {{ dim_new }}
        EXCEPT
        SELECT {{ sk }}, {{ keys|cols }}, valid_from, valid_to, is_current, row_hash, load_id FROM {{ dim }}) dimlog_n)
) dimlog_z
-- statement: source_missing
SELECT {{ keytext("dimlog_s.") }}, 'in the source, not current in the dimension'
FROM dimlog_stage dimlog_s
WHERE NOT dimlog_s.is_deleted AND NOT EXISTS (SELECT 1 FROM {{ dim }} dimlog_d WHERE dimlog_d.is_current AND {{ keys|eqs("dimlog_d", "dimlog_s") }})
-- statement: source_extra
SELECT {{ keytext("dimlog_d.") }}, 'current in the dimension, not in the source'
FROM {{ dim }} dimlog_d
WHERE dimlog_d.is_current AND NOT EXISTS (SELECT 1 FROM dimlog_stage dimlog_s WHERE NOT dimlog_s.is_deleted AND {{ keys|eqs("dimlog_d", "dimlog_s") }})
-- statement: source_different
SELECT {{ keytext("dimlog_s.") }}, 'tracked values differ (source updated_at ' || {{ "dimlog_s.valid_from"|pgts }} || ', dimension valid_from ' || {{ "dimlog_d.valid_from"|pgts }} || ')'
FROM dimlog_stage dimlog_s
JOIN {{ dim }} dimlog_d ON dimlog_d.is_current AND {{ keys|eqs("dimlog_d", "dimlog_s") }}
WHERE NOT dimlog_s.is_deleted AND (dimlog_s.row_hash <> dimlog_d.row_hash{% for c in t1 %} OR dimlog_s.{{ c }}{{ "::text" if c in text_compared }} IS DISTINCT FROM dimlog_d.{{ c }}{{ "::text" if c in text_compared }}{% endfor %})
{# `rebuilt`, when the check compares with a fresh rebuild: rebuild.sql's `rebuilt`. #}
-- statement: counted
WITH {% if rebuilt %}{{ rebuilt }},
{% endif %}dimlog_check AS MATERIALIZED (
{{ check }}
)
SELECT CAST((SELECT count(*) FROM dimlog_check) AS TEXT), dimlog_c.* FROM dimlog_check dimlog_c LIMIT {{ examples }}
