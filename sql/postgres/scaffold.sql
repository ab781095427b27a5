{# `dimlog new`: a quick profile of candidate columns, to guess the key and the change
   column. Each statement scans the table once; `new` runs them only for a few columns. #}
-- statement: counts
SELECT count(*)::text, count({{ column }})::text, count(DISTINCT {{ column }})::text
FROM {{ relation }}
-- statement: newest
SELECT max({{ column }})::text, (count(*) - count({{ column }}))::text
FROM {{ relation }}
