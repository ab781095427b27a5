{# Whether the role may not make a load's working tables, which on Citus are tables of the
   log's schema ($2, or the session's current schema), made as loads need them: 'true'
   where the log ($1) is distributed (or not made yet) and the role lacks CREATE there.
   A dimension in local tables works in temporary tables. #}
-- statement: working_tables_uncreatable
SELECT (NOT (to_regclass($1) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1)))
        AND NOT COALESCE(has_schema_privilege(COALESCE($2, current_schema()::text), 'CREATE'), true))::text
