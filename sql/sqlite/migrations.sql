{# dimlog's own tables (dimlog_state, dimlog_runs, dimlog_dimensions) by schema version,
   one step a statement, applied in the order src/db/migrate.rs lists them; and
   dimlog_schema, which holds the version they are at. Timestamps are fixed-width UTC
   text, as in every table of dimlog's.

   A step's SQL never changes once released: a change is a new version. A step may have
   a second statement, its name followed by _done, that counts what of its work is there
   already (more than 0: the step is skipped); the baseline (version 1) has one for every
   step, since it meets targets an older dimlog made, before dimlog_schema, in any of its
   releases. A step with no SQL does nothing on this backend. #}
-- statement: schema_probe
SELECT CAST(count(*) AS TEXT), '1' FROM sqlite_master WHERE type = 'table' AND name = 'dimlog_schema' COLLATE NOCASE
{# SQLite has no roles: whoever may write the file may read it. #}
-- statement: schema_grant
-- statement: schema_version
SELECT CAST(max(version) AS TEXT) FROM dimlog_schema
-- statement: schema_table
CREATE TABLE IF NOT EXISTS dimlog_schema (
    version    INTEGER NOT NULL,
    applied_at TEXT    NOT NULL,
    applied_by TEXT    NOT NULL
)
-- statement: schema_clear
DELETE FROM dimlog_schema
-- statement: schema_stamp
INSERT INTO dimlog_schema (version, applied_at, applied_by) VALUES (?1, ?2, ?3)
{# Version 1, the baseline: the tables as dimlog made them before schema versions. #}
-- statement: v1_state_done
SELECT CAST(count(*) AS TEXT) FROM sqlite_master WHERE type = 'table' AND name = 'dimlog_state' COLLATE NOCASE
-- statement: v1_state
CREATE TABLE IF NOT EXISTS dimlog_state (
    dimension      TEXT NOT NULL,
    role           TEXT NOT NULL,
    high_watermark TEXT NOT NULL,
    run_id         INTEGER,
    updated_at     TEXT NOT NULL,
    PRIMARY KEY (dimension, role)
)
-- statement: v1_runs_done
SELECT CAST(count(*) AS TEXT) FROM sqlite_master WHERE type = 'table' AND name = 'dimlog_runs' COLLATE NOCASE
-- statement: v1_runs
CREATE TABLE IF NOT EXISTS dimlog_runs (
    run_id             INTEGER PRIMARY KEY AUTOINCREMENT,
    dimension          TEXT    NOT NULL,
    kind               TEXT    NOT NULL,
    role               TEXT,
    low_watermark      TEXT,
    high_watermark     TEXT,
    upper_bound        TEXT,
    rows_read          INTEGER NOT NULL DEFAULT 0,
    rows_after_dedupe  INTEGER NOT NULL DEFAULT 0,
    duplicates_dropped INTEGER NOT NULL DEFAULT 0,
    versions           INTEGER NOT NULL DEFAULT 0,
    late_versions      INTEGER NOT NULL DEFAULT 0,
    corrections        INTEGER NOT NULL DEFAULT 0,
    tombstones         INTEGER NOT NULL DEFAULT 0,
    revived            INTEGER NOT NULL DEFAULT 0,
    future_rows        INTEGER NOT NULL DEFAULT 0,
    status             TEXT    NOT NULL,
    started_at         TEXT    NOT NULL,
    finished_at        TEXT,
    error              TEXT
)
{# dimlog_runs made by an older dimlog lacks these counters. #}
-- statement: v1_runs_revived_done
SELECT CAST(count(*) AS TEXT) FROM pragma_table_info('dimlog_runs') WHERE name = 'revived' COLLATE NOCASE
-- statement: v1_runs_revived
ALTER TABLE dimlog_runs ADD COLUMN revived INTEGER NOT NULL DEFAULT 0
-- statement: v1_runs_future_rows_done
SELECT CAST(count(*) AS TEXT) FROM pragma_table_info('dimlog_runs') WHERE name = 'future_rows' COLLATE NOCASE
-- statement: v1_runs_future_rows
ALTER TABLE dimlog_runs ADD COLUMN future_rows INTEGER NOT NULL DEFAULT 0
-- statement: v1_runs_index_done
SELECT CAST(count(*) AS TEXT) FROM sqlite_master
WHERE type = 'index' AND tbl_name = 'dimlog_runs' COLLATE NOCASE AND name = 'dimlog_runs_dimension_idx' COLLATE NOCASE
-- statement: v1_runs_index
CREATE INDEX IF NOT EXISTS dimlog_runs_dimension_idx ON dimlog_runs (dimension, run_id)
-- statement: v1_dimensions_done
SELECT CAST(count(*) AS TEXT) FROM sqlite_master WHERE type = 'table' AND name = 'dimlog_dimensions' COLLATE NOCASE
-- statement: v1_dimensions
CREATE TABLE IF NOT EXISTS dimlog_dimensions (
    dimension          TEXT PRIMARY KEY,
    log_table          TEXT    NOT NULL,
    dimension_table    TEXT    NOT NULL,
    surrogate_key      TEXT    NOT NULL,
    key_columns        TEXT    NOT NULL,
    tracked_columns    TEXT    NOT NULL,
    type1_columns      TEXT    NOT NULL,
    column_types       TEXT    NOT NULL,
    hash_version       INTEGER NOT NULL,
    next_surrogate_key INTEGER NOT NULL,
    next_log_id        INTEGER NOT NULL,
    built_through_load INTEGER,
    updated_at         TEXT    NOT NULL
)
{# On SQLite `assign-keys` makes dimlog_assigned the first time it is used (lookup.sql). #}
-- statement: v1_assigned
{# Version 2: the source column the incremental watermark is kept on (NULL: not known
   yet, a dimension registered before version 2; its next run records it). #}
-- statement: v2_dimensions_change_column_done
SELECT CAST(count(*) AS TEXT) FROM pragma_table_info('dimlog_dimensions') WHERE name = 'change_column' COLLATE NOCASE
-- statement: v2_dimensions_change_column
ALTER TABLE dimlog_dimensions ADD COLUMN change_column TEXT
