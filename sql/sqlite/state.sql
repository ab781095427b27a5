{# Watermarks, run records, per-dimension metadata. The lock is the write transaction
   itself (BEGIN IMMEDIATE). #}
-- statement: watermark_get
SELECT high_watermark FROM dimlog_state WHERE dimension = ?1 AND role = ?2
-- statement: watermark_set
INSERT INTO dimlog_state (dimension, role, high_watermark, run_id, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (dimension, role) DO UPDATE
SET high_watermark = excluded.high_watermark, run_id = excluded.run_id, updated_at = excluded.updated_at
-- statement: watermarks
SELECT role, high_watermark, run_id, updated_at FROM dimlog_state WHERE dimension = ?1 ORDER BY role
-- statement: run_start
INSERT INTO dimlog_runs (dimension, kind, role, status, started_at)
VALUES (?1, ?2, ?3, 'running', ?4)
RETURNING run_id
-- statement: run_finish
UPDATE dimlog_runs
SET low_watermark = ?2, high_watermark = ?3, upper_bound = ?4, rows_read = ?5, rows_after_dedupe = ?6,
    duplicates_dropped = ?7, versions = ?8, late_versions = ?9, corrections = ?10, tombstones = ?11,
    revived = ?12, future_rows = ?13, status = ?14, finished_at = ?15, error = ?16
WHERE run_id = ?1
-- statement: run_failed
INSERT INTO dimlog_runs (dimension, kind, role, low_watermark, upper_bound, status, started_at, finished_at, error, rows_read,
                         rows_after_dedupe, duplicates_dropped)
VALUES (?1, ?2, ?3, ?4, ?5, ?9, ?6, ?7, ?8, ?10, ?11, ?12)
RETURNING run_id
-- statement: runs_recent
SELECT run_id, dimension, kind, role, low_watermark, high_watermark, upper_bound,
       rows_read, rows_after_dedupe, duplicates_dropped, versions, late_versions,
       corrections, tombstones, revived, future_rows, status, started_at, finished_at, error
FROM dimlog_runs WHERE dimension = ?1 ORDER BY run_id DESC LIMIT ?2
-- statement: dimension_get
SELECT key_columns, tracked_columns, type1_columns, column_types, hash_version,
       next_surrogate_key, next_log_id, built_through_load
FROM dimlog_dimensions WHERE dimension = ?1
{# The surrogate-key column the dimension was built with (its tables keep it). #}
-- statement: dimension_surrogate_key
SELECT surrogate_key FROM dimlog_dimensions WHERE dimension = ?1
{# The source column the incremental watermark is kept on (schema version 2: only
   after `init`'s migration, never by a command that only reads). #}
-- statement: dimension_change_column
SELECT change_column FROM dimlog_dimensions WHERE dimension = ?1
-- statement: dimension_record_change_column
UPDATE dimlog_dimensions SET change_column = ?2 WHERE dimension = ?1 AND change_column IS NULL
-- statement: dimension_own_tables
SELECT log_table, dimension_table FROM dimlog_dimensions WHERE dimension = ?1
-- statement: dimension_tables
SELECT dimension, log_table, dimension_table FROM dimlog_dimensions WHERE dimension <> ?1
{# Whether this database has dimlog's tables at all (a target that was never loaded has
   none, and a command that only reads it must not create them). #}
-- statement: tables_exist
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'dimlog_dimensions'
-- statement: dimension_names
SELECT dimension FROM dimlog_dimensions ORDER BY dimension
-- statement: dimension_register
INSERT INTO dimlog_dimensions (dimension, log_table, dimension_table, surrogate_key, key_columns, tracked_columns,
                               type1_columns, column_types, hash_version, next_surrogate_key, next_log_id, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1, 1, ?10)
ON CONFLICT (dimension) DO NOTHING
-- statement: backfill_chunks
SELECT low_watermark, upper_bound, status
FROM dimlog_runs WHERE dimension = ?1 AND role = ?2 AND kind = 'backfill' ORDER BY run_id
{# Not needed on this engine: a load's working tables are temporary (see
   sql/citus/state.sql). #}
-- statement: working_tables_uncreatable
