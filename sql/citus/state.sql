{# Whether the role may not make a load's working tables, which on Citus are tables of the
   log's schema ($2, or the session's current schema), made as loads need them: 'true'
   where the log (named $1 there) is distributed (or not made yet) and the role lacks
   CREATE there. (Names, not regclass: a schema that does not exist is the config's
   error, named elsewhere.)
   A dimension in local tables works in temporary tables. #}
-- statement: working_tables_uncreatable
SELECT (COALESCE((SELECT NOT has_schema_privilege(dimlog_n.oid, 'CREATE') FROM pg_namespace dimlog_n WHERE dimlog_n.nspname = dimlog_x.dimlog_s), false)
        AND NOT EXISTS (SELECT 1 FROM pg_class dimlog_c JOIN pg_namespace dimlog_n ON dimlog_n.oid = dimlog_c.relnamespace
                        WHERE dimlog_n.nspname = dimlog_x.dimlog_s AND dimlog_c.relname = $1
                          AND NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = dimlog_c.oid)))::text
FROM (SELECT COALESCE($2, current_schema()::text) AS dimlog_s) dimlog_x
