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
{# The tables inheriting from a plain table that has a primary key: that key does not
   cover their rows, which a read of the parent includes. #}
-- statement: inheriting
SELECT string_agg(dimlog_c.oid::regclass::text, ', ' ORDER BY dimlog_c.oid::regclass::text)
FROM pg_inherits dimlog_h JOIN pg_class dimlog_c ON dimlog_c.oid = dimlog_h.inhrelid
WHERE dimlog_h.inhparent = to_regclass($1)
  AND EXISTS (SELECT 1 FROM pg_index dimlog_i WHERE dimlog_i.indrelid = to_regclass($1) AND dimlog_i.indisprimary)
  AND EXISTS (SELECT 1 FROM pg_class dimlog_p WHERE dimlog_p.oid = to_regclass($1) AND dimlog_p.relkind = 'r')
