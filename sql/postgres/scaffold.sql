{# `dimlog new`: a quick profile of candidate columns, to guess the key and the change
   column. Each statement scans the table once; `new` runs them only for a few columns. #}
-- statement: counts
SELECT count(*)::text, count({{ column }})::text, count(DISTINCT {{ column }})::text
FROM {{ relation }}
-- statement: newest
SELECT max({{ column }})::text, (count(*) - count({{ column }}))::text
FROM {{ relation }}
-- statement: tuple_counts
SELECT count(*)::text,
       count(CASE WHEN {% for c in columns %}{{ c }} IS NOT NULL{{ " AND " if not loop.last }}{% endfor %} THEN 1 END)::text,
       (SELECT count(*) FROM (SELECT DISTINCT {{ columns | join(", ") }} FROM {{ relation }}
         WHERE {% for c in columns %}{{ c }} IS NOT NULL{{ " AND " if not loop.last }}{% endfor %}) dimlog_d)::text
FROM {{ relation }}
