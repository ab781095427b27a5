{# dimlog's own tables, shared by every dimension in this database, are made and upgraded
   by migrations.sql (src/db/migrate.rs); `init` holds this lock while it does, so two
   sessions never create or upgrade them at once. #}
-- statement: lock
SELECT pg_advisory_xact_lock(7305291044116111)
