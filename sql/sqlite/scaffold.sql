{# `dimlog new`: a quick profile of candidate columns, to guess the key and the change
   column. Each statement scans the table once; `new` runs them only for a few columns. #}
-- statement: counts
SELECT CAST(count(*) AS TEXT), CAST(count({{ column }}) AS TEXT), CAST(count(DISTINCT {{ column }}) AS TEXT)
FROM {{ relation }}
-- statement: newest
SELECT CAST(max({{ column }}) AS TEXT), CAST(count(*) - count({{ column }}) AS TEXT)
FROM {{ relation }}
-- statement: tuple_counts
SELECT CAST(count(*) AS TEXT),
       CAST(count(CASE WHEN {% for c in columns %}{{ c }} IS NOT NULL{{ " AND " if not loop.last }}{% endfor %} THEN 1 END) AS TEXT),
       CAST((SELECT count(*) FROM (SELECT DISTINCT {{ columns | join(", ") }} FROM {{ relation }}
             WHERE {% for c in columns %}{{ c }} IS NOT NULL{{ " AND " if not loop.last }}{% endfor %})) AS TEXT)
FROM {{ relation }}
{# SQLite tables do not inherit: no table is named. #}
-- statement: inheriting
SELECT ?1 WHERE 0
