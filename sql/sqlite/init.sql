{# dimlog's own tables, shared by every dimension in this database, are made and upgraded
   by migrations.sql (src/db/migrate.rs). #}
-- statement: lock
SELECT 1
