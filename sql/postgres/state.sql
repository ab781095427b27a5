{# Watermarks, run records, per-dimension metadata, and the dimension's lock. #}
-- statement: try_lock
SELECT pg_try_advisory_lock($1)::text
{# The session holding a dimension's advisory lock ($1) in this database (advisory locks
   are per database; another database's dimension of the same name is not this one):
   pg_locks splits the 64-bit key into classid (high 32 bits) and objid (low 32 bits). #}
-- statement: lock_holder
SELECT dimlog_a.pid::text, COALESCE(dimlog_a.application_name, ''), COALESCE(dimlog_a.usename::text, ''),
       COALESCE(dimlog_a.state, ''), COALESCE({{ "dimlog_a.backend_start"|pgts }}, '')
FROM pg_locks dimlog_l JOIN pg_stat_activity dimlog_a ON dimlog_a.pid = dimlog_l.pid
WHERE dimlog_l.locktype = 'advisory' AND dimlog_l.granted AND dimlog_l.objsubid = 1
  AND dimlog_l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((dimlog_l.classid::bigint << 32) | dimlog_l.objid::bigint) = $1
LIMIT 1
-- statement: unlock
SELECT pg_advisory_unlock($1)
-- statement: watermark_get
SELECT {{ "high_watermark"|pgts }} FROM dimlog_state WHERE dimension = $1 AND role = $2
-- statement: watermark_set
INSERT INTO dimlog_state (dimension, role, high_watermark, run_id, updated_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (dimension, role) DO UPDATE
SET high_watermark = excluded.high_watermark, run_id = excluded.run_id, updated_at = excluded.updated_at
-- statement: watermarks
SELECT role, {{ "high_watermark"|pgts }}, run_id::text, {{ "updated_at"|pgts }}
FROM dimlog_state WHERE dimension = $1 ORDER BY role
-- statement: run_start
INSERT INTO dimlog_runs (dimension, kind, role, status, started_at)
VALUES ($1, $2, $3, 'running', $4)
RETURNING run_id::text
-- statement: run_finish
UPDATE dimlog_runs
SET low_watermark = $2, high_watermark = $3, upper_bound = $4, rows_read = $5, rows_after_dedupe = $6,
    duplicates_dropped = $7, versions = $8, late_versions = $9, corrections = $10, tombstones = $11,
    revived = $12, future_rows = $13, status = $14, finished_at = $15, error = $16
WHERE run_id = $1
-- statement: run_failed
INSERT INTO dimlog_runs (dimension, kind, role, low_watermark, upper_bound, status, started_at, finished_at, error, rows_read,
                         rows_after_dedupe, duplicates_dropped)
VALUES ($1, $2, $3, $4, $5, $9, $6, $7, $8, $10, $11, $12)
RETURNING run_id::text
{# Ordered by the table's run_id (a number): a bare `run_id` would be the text output
   column of the same name, and 10 would sort before 9. #}
-- statement: runs_recent
SELECT run_id::text, dimension, kind, role, {{ "low_watermark"|pgts }} AS low_watermark,
       {{ "high_watermark"|pgts }} AS high_watermark, {{ "upper_bound"|pgts }} AS upper_bound,
       rows_read::text, rows_after_dedupe::text, duplicates_dropped::text, versions::text, late_versions::text,
       corrections::text, tombstones::text, revived::text, future_rows::text, status,
       {{ "started_at"|pgts }} AS started_at, {{ "finished_at"|pgts }} AS finished_at, error
FROM dimlog_runs dimlog_r WHERE dimension = $1 ORDER BY dimlog_r.run_id DESC LIMIT $2
-- statement: dimension_get
SELECT key_columns, tracked_columns, type1_columns, column_types, hash_version::text,
       next_surrogate_key::text, next_log_id::text, built_through_load::text
FROM dimlog_dimensions WHERE dimension = $1
{# The surrogate-key column the dimension was built with (its tables keep it). #}
-- statement: dimension_surrogate_key
SELECT surrogate_key FROM dimlog_dimensions WHERE dimension = $1
{# The source column the incremental watermark is kept on (schema version 2: only
   after `init`'s migration, never by a command that only reads). #}
-- statement: dimension_change_column
SELECT change_column FROM dimlog_dimensions WHERE dimension = $1
-- statement: dimension_record_change_column
UPDATE dimlog_dimensions SET change_column = $2 WHERE dimension = $1 AND change_column IS NULL
-- statement: dimension_own_tables
SELECT log_table, dimension_table FROM dimlog_dimensions WHERE dimension = $1
-- statement: dimension_tables
SELECT dimension, log_table, dimension_table FROM dimlog_dimensions WHERE dimension <> $1
{# Whether this database has dimlog's tables at all (a target that was never loaded has
   none, and a command that only reads it must not create them). #}
-- statement: tables_exist
SELECT (to_regclass('dimlog_dimensions') IS NOT NULL)::int::text
-- statement: dimension_names
SELECT dimension FROM dimlog_dimensions ORDER BY dimension
-- statement: dimension_register
INSERT INTO dimlog_dimensions (dimension, log_table, dimension_table, surrogate_key, key_columns, tracked_columns,
                               type1_columns, column_types, hash_version, next_surrogate_key, next_log_id, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, 1, $10)
ON CONFLICT (dimension) DO NOTHING
-- statement: backfill_chunks
SELECT {{ "low_watermark"|pgts }}, {{ "upper_bound"|pgts }}, status
FROM dimlog_runs WHERE dimension = $1 AND role = $2 AND kind = 'backfill' ORDER BY run_id
{# The schemas that hold dimlog's tables (its registry), to find the tables of a target
   made by an older dimlog where its `search_path` pointed. Run before the connection
   qualifies dimlog's table names, and written so that it is not one of them. #}
-- statement: state_schemas
SELECT dimlog_n.nspname::text
FROM pg_class dimlog_c JOIN pg_namespace dimlog_n ON dimlog_n.oid = dimlog_c.relnamespace
WHERE dimlog_c.relname = 'dimlog_' || 'dimensions' AND dimlog_c.relkind IN ('r', 'p')
ORDER BY 1
{# Whether the set of dimlog's tables in `schema` records the dimension. #}
-- statement: state_schema_records
SELECT count(*)::text FROM {{ schema }}.dimlog_dimensions WHERE dimension = $1
{# A rebuild waits at most this long for a lock before it says whose lock it waits for
   (then it waits on, without a limit). #}
-- statement: lock_wait
SET LOCAL lock_timeout = '5s'
-- statement: lock_no_wait
SET LOCAL lock_timeout = '200ms'
{# Who holds a lock that a rebuild waits for: a lock on the dimension that conflicts
   with writing it, or an ACCESS EXCLUSIVE lock on the log (which it reads). No query
   text: it may hold values. #}
-- statement: lock_holders
SELECT DISTINCT dimlog_l.pid::text, dimlog_l.mode, dimlog_l.relation::regclass::text,
       COALESCE(dimlog_a.application_name, ''), COALESCE(dimlog_a.usename::text, ''), COALESCE(dimlog_a.state, '')
FROM pg_locks dimlog_l LEFT JOIN pg_stat_activity dimlog_a ON dimlog_a.pid = dimlog_l.pid
WHERE dimlog_l.granted AND dimlog_l.pid <> pg_backend_pid()
  AND ((dimlog_l.relation = to_regclass('{{ dim }}') AND dimlog_l.mode <> 'AccessShareLock')
       OR (dimlog_l.relation = to_regclass('{{ log }}') AND dimlog_l.mode = 'AccessExclusiveLock'))
ORDER BY 1
{# Rights of the session's role on the target, read from the catalogs only (so that a
   right the role lacks is named, never hit): its name, a schema it may not use, the
   privileges it lacks on a table (of a comma-separated list; none when the table does
   not exist), TEMPORARY on the database, and CREATE on a schema. #}
-- statement: role_name
SELECT quote_ident(current_user::text), quote_ident(current_database()::text)
-- statement: schema_unusable
SELECT (NOT has_schema_privilege(dimlog_n.oid, 'USAGE'))::text FROM pg_namespace dimlog_n WHERE dimlog_n.nspname = $1
{# The privileges of $2 the role lacks on table $1, and the table's name qualified by the
   schema it was found in (a GRANT run by another role, with another search_path, must
   name the same table). #}
-- statement: table_rights_missing
SELECT string_agg(dimlog_u.dimlog_p, ', ' ORDER BY dimlog_u.dimlog_o),
       (SELECT format('%I.%I', dimlog_n.nspname, dimlog_c.relname) FROM pg_class dimlog_c
        JOIN pg_namespace dimlog_n ON dimlog_n.oid = dimlog_c.relnamespace WHERE dimlog_c.oid = to_regclass($1))
FROM unnest(string_to_array($2, ',')) WITH ORDINALITY AS dimlog_u(dimlog_p, dimlog_o)
WHERE to_regclass($1) IS NOT NULL AND NOT has_table_privilege(to_regclass($1), dimlog_u.dimlog_p)
{# Whether this role gets read-only transactions here, as a session without dimlog's own
   settings would: a hot standby, or default_transaction_read_only set for the role and
   database, the role, or the database (most specific first; doctor's own session pins
   it on, so the catalog is read). #}
-- statement: read_only_by_default
SELECT (pg_is_in_recovery() OR COALESCE((
    SELECT lower(split_part(dimlog_c, '=', 2)) IN ('on', 'true', 'yes', '1', 't', 'y')
    FROM pg_db_role_setting dimlog_s, unnest(dimlog_s.setconfig) dimlog_c
    WHERE dimlog_s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
      AND dimlog_s.setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = current_user))
      AND lower(split_part(dimlog_c, '=', 1)) = 'default_transaction_read_only'
    ORDER BY (dimlog_s.setrole <> 0 AND dimlog_s.setdatabase <> 0) DESC, (dimlog_s.setrole <> 0) DESC
    LIMIT 1), false))::text
-- statement: temp_missing
SELECT (NOT has_database_privilege(current_database(), 'TEMPORARY'))::text
{# Whether schema $1 exists (a table named in it cannot be created otherwise). #}
-- statement: schema_exists
SELECT (to_regnamespace($1) IS NOT NULL)::text
-- statement: schema_creatable
SELECT COALESCE(has_schema_privilege(dimlog_n.oid, 'CREATE'), true)::text
FROM (SELECT $1::text AS dimlog_s) dimlog_x LEFT JOIN pg_namespace dimlog_n ON dimlog_n.nspname = dimlog_x.dimlog_s
-- statement: current_schema
SELECT COALESCE(current_schema()::text, 'public')
-- statement: owns_tables
SELECT COALESCE(bool_and(pg_has_role(relowner, 'USAGE')), false)::text FROM pg_class WHERE oid IN (to_regclass($1), to_regclass($2))
{# The role that owns table $1 (quoted where needed), to be named. #}
-- statement: table_owner
SELECT quote_ident(pg_get_userbyid(relowner)::text) FROM pg_class WHERE oid = to_regclass($1)
{# Not needed on this engine: a load's working tables are temporary (see
   sql/citus/state.sql). #}
-- statement: working_tables_uncreatable
