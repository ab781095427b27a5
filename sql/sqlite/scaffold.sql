{# `dimlog new`: a quick profile of candidate columns, to guess the key and the change
   column. Each statement scans the table once; `new` runs them only for a few columns. #}
-- statement: counts
SELECT CAST(count(*) AS TEXT), CAST(count({{ column }}) AS TEXT), CAST(count(DISTINCT {{ column }}) AS TEXT)
FROM {{ relation }}
-- statement: newest
SELECT CAST(max({{ column }}) AS TEXT), CAST(count(*) - count({{ column }}) AS TEXT)
FROM {{ relation }}
