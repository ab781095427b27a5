{# dimlog's own tables, shared by every dimension in this database. Timestamps are
   fixed-width UTC text (2026-10-05T09:30:00.000000Z) so that text order is time order. #}
-- statement: lock
SELECT 1
-- statement: state
CREATE TABLE IF NOT EXISTS dimlog_state (
    dimension      TEXT NOT NULL,
    role           TEXT NOT NULL,
    high_watermark TEXT NOT NULL,
    run_id         INTEGER,
    updated_at     TEXT NOT NULL,
    PRIMARY KEY (dimension, role)
)
-- statement: runs
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
{# dimlog_runs made by an older dimlog lacks the newer counters: added once, only when
   missing, so no run takes a table lock on dimlog_runs for nothing. #}
-- statement: runs_columns
SELECT name FROM pragma_table_info('dimlog_runs')
-- statement: runs_add_counter
ALTER TABLE dimlog_runs ADD COLUMN {{ counter }} INTEGER NOT NULL DEFAULT 0
-- statement: runs_index
CREATE INDEX IF NOT EXISTS dimlog_runs_dimension_idx ON dimlog_runs (dimension, run_id)
-- statement: dimensions
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
