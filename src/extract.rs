//! Extract: the source's schema, the read window, and a streaming reader.
//!
//! This stage owns everything about reading the source: checking that the configured
//! columns exist (and what kind each is), the source's own clock, the bounded window
//! `[watermark - lookback, upper]`, and a reader that streams rows in batches through a
//! bounded channel so memory stays flat however large the window is. PostgreSQL rows
//! come through `COPY (SELECT …) TO STDOUT`. It never writes anywhere.

use crate::config::{Backend, ConfigError, Plan, Relation};
use crate::db::dialect::ChangeTime;
use crate::db::types::ColumnKind;
use crate::db::{sql, Conn, DbError, Param, PumpError, TextRow};
use crate::ident::Ident;
pub use crate::layout::{Col, CurrentCol, Layout};
use crate::ts::Micros;
use serde::Serialize;
use tokio::sync::mpsc;

/// Rows per batch sent from the reader to the pipeline.
pub const BATCH_ROWS: usize = 10_000;

/// What went wrong while reading the source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// The config does not match the source (exit 2).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A database error.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The source's role may read some of the columns a run reads, not all (PostgreSQL's
    /// column privileges): named, with the GRANT, before anything is read.
    #[error("the PostgreSQL role of source.url may not read column(s) {columns} of source table {table}, which dimlog reads (keys, tracked columns, the change column, the delete flag); nothing was read or written. Have the table's owner run: GRANT SELECT ({columns}) ON {table} TO the role of source.url (or GRANT SELECT ON {table}), or stop tracking those columns")]
    ColumnsUnreadable {
        /// The source table.
        table: String,
        /// The columns, joined by `, `.
        columns: String,
    },
    /// Rows whose change column is NULL would be invisible to every watermark.
    #[error("{count} source rows have a NULL `{column}` (source.updated_at), e.g. the row of key ({key}): they would never be loaded; fix them at the source or exclude them with source.query")]
    NullUpdatedAt {
        /// The change column.
        column: String,
        /// How many rows.
        count: i64,
        /// The key of one of them, its values joined by `, `.
        key: String,
    },
    /// Rows whose change column holds a value with no instant in time (PostgreSQL's
    /// `infinity`, SQLite text that is no time): no window holds them, so, like NULLs,
    /// they would be lost without a word (or, `infinity`, counted as rows from the future
    /// for ever).
    #[error("{count} source rows have a `{column}` (source.updated_at) that is no instant in time, e.g. {value:?} of key ({key}): no window can read them; fix them at the source (a real time, or NULL rows removed) or exclude them with source.query")]
    NoInstant {
        /// The change column.
        column: String,
        /// How many rows.
        count: i64,
        /// One such value, as text.
        value: String,
        /// That row's key, as text.
        key: String,
    },
    /// Rows without a natural key cannot be versioned.
    #[error("{count} source rows read have a NULL natural key {} (source.key); fix them at the source or exclude them with source.query", null_key_columns(.columns))]
    NullKey {
        /// Each key column with a NULL in some of those rows, and in how many.
        columns: Vec<(String, i64)>,
        /// How many rows.
        count: i64,
    },
    /// The window to read is impossible; refused before anything is read (exit 2).
    #[error(transparent)]
    Window(#[from] WindowError),
    /// A source value that is not UTF-8 text: it could not be loaded unchanged.
    #[error("source column `{column}` of key ({key}) holds text that is not valid UTF-8 (bytes {bytes}); dimlog loads text unchanged or not at all: {fix}")]
    NotUtf8 {
        /// The column.
        column: String,
        /// What to do: a change column must hold a time; another may be loaded as bytes.
        fix: &'static str,
        /// The key of the row, as text.
        key: String,
        /// The first bytes of the value, in hex.
        bytes: String,
    },
    /// A value read as a boolean (the soft-delete flag, a column of a boolean type) that
    /// spells neither true nor false: read as either, it would load a fact the source does
    /// not state (a live row deleted, a flag changed).
    #[error("source column `{column}` ({role}) of key ({key}) holds {value}, which is no boolean: dimlog reads true, t, 1, yes, y as true and false, f, 0, no, n or empty as false (any case); nothing was written. {fix}")]
    NotBoolean {
        /// The column.
        column: String,
        /// Its role, as the config names it.
        role: &'static str,
        /// The key of the row, as text.
        key: String,
        /// The value, as messages show it (quoted).
        value: String,
        /// What to do.
        fix: &'static str,
    },
    /// A change-column value that is not a usable timestamp.
    #[error("source column `{column}` (source.updated_at){}: {reason}{hint}", of_key(.key.as_deref()))]
    BadTimestamp {
        /// The change column.
        column: String,
        /// The key of the row holding the value, as text, when known.
        key: Option<String>,
        /// The parse error.
        reason: crate::ts::TimestampError,
        /// What to do.
        hint: &'static str,
    },
}

/// " of key (…)" for messages that can name the row, else nothing.
fn of_key(key: Option<&str>) -> String {
    key.map(|k| format!(" of key ({k})")).unwrap_or_default()
}

/// A row's natural key as messages show it: its values, comma-separated.
pub fn key_text<S: AsRef<str>>(row: &[Option<S>], key_count: usize) -> String {
    row.iter()
        .take(key_count)
        .map(|v| v.as_ref().map_or("?", AsRef::as_ref))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ExtractError {
    /// `rows` rows with a NULL natural key, `per_column[i]` of them NULL in key column i:
    /// the error names every key column that holds a NULL (issue 21).
    #[doc(hidden)]
    pub fn null_key(layout: &Layout, per_column: &[i64], rows: i64) -> ExtractError {
        ExtractError::NullKey {
            columns: layout
                .keys
                .iter()
                .zip(per_column)
                .filter(|(_, n)| **n > 0)
                .map(|(c, n)| (c.bare.clone(), *n))
                .collect(),
            count: rows,
        }
    }

    /// A change-column value that did not read as a timestamp, with the hint that fits.
    ///
    /// A time without a zone (SQLite text without `Z` or an offset) is the config error a
    /// PostgreSQL `timestamp` change column is: `source.timezone` must say its zone (exit
    /// 2 on both backends).
    pub fn bad_change_column(plan: &Plan, reason: crate::ts::TimestampError, key: Option<String>) -> ExtractError {
        if let crate::ts::TimestampError::NoZone(value) = &reason {
            return ExtractError::Config(ConfigError::invalid(
                "source.timezone",
                format!(
                    "the change column `{}` holds {value:?}, which has no time zone (SQLite text without `Z` or an offset); \
                     set source.timezone to the zone its values are in, e.g. \"UTC\"",
                    plan.source.updated_at.name()
                ),
            ));
        }
        use crate::ts::TimestampError as T;
        let hint = match &reason {
            T::OutOfRange(_) => "; set that row's updated_at at the source to when it really changed",
            T::NonexistentLocalTime { .. } => "; fix that row's updated_at at the source, or check source.timezone",
            // Shaped like a timestamp, yet not one: a date that does not exist (Feb 30).
            T::Unparsable(v)
                if crate::ts::Micros::parse(&format!("{}T00:00:00Z", v.get(..10).unwrap_or("")), None).is_err()
                    && v.len() >= 10
                    && v.as_bytes()[4] == b'-'
                    && v.as_bytes()[7] == b'-' =>
            {
                "; that date does not exist: fix that row's updated_at at the source"
            }
            _ => "; store RFC 3339 timestamps, e.g. 2026-10-05T09:30:00Z",
        };
        ExtractError::BadTimestamp {
            column: plan.source.updated_at.name().into(),
            key,
            reason,
            hint,
        }
    }
}

/// Why a run's window cannot be read (spec section 1: the window is checked before
/// anything is read). Each names both times, so a wrong clock is found where it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    /// An upper bound later than the source's clock would let the watermark pass rows the
    /// source has not written yet, and every later run would start after them.
    #[error("upper bound {upper} is later than the source's clock {source_clock}: rows written from now on but stamped before {upper} would never be read; give an upper bound not later than the source's clock, or none (the source's clock minus source.safety_lag)")]
    AfterSourceClock {
        /// The upper bound asked for.
        upper: Micros,
        /// The source database's clock when the run started.
        source_clock: Micros,
    },
    /// A first load (no watermark yet) whose upper bound is before the source's oldest
    /// row: nothing could be read.
    #[error("the first load would read nothing: upper bound {upper}{origin} is earlier than the source's oldest row, stamped {oldest}; {hint}")]
    BeforeOldestRow {
        /// The upper bound.
        upper: Micros,
        /// Where the upper bound came from, in words (empty when given).
        origin: String,
        /// The oldest source row's change time.
        oldest: Micros,
        /// What to do.
        hint: String,
    },
    /// A backfill that ends after the source's clock: its last chunk, once committed, is
    /// skipped by a rerun, so rows written later but stamped before its end would never be
    /// read by it.
    #[error("the backfill's end {to} is later than the source's clock {source_clock}: rows written from now on but stamped before {to} would be missed by it; end it at the source's clock or earlier")]
    BackfillAfterSourceClock {
        /// The backfill's (exclusive) end.
        to: Micros,
        /// The source database's clock.
        source_clock: Micros,
    },
    /// An upper bound earlier than the window's low end: nothing could be read, and a
    /// run that "succeeds" reading nothing hides the mistake.
    #[error("the window is empty: upper bound {upper}{origin} is earlier than its low end {low} (the watermark {watermark} minus source.lookback {lookback}), so nothing could be read; {hint}")]
    BeforeLowEnd {
        /// The upper bound.
        upper: Micros,
        /// Where the upper bound came from, in words (empty when given).
        origin: String,
        /// `watermark - lookback`.
        low: Micros,
        /// The watermark.
        watermark: Micros,
        /// The lookback, as a duration.
        lookback: String,
        /// What to do.
        hint: String,
    },
}

/// Checks a first load's upper bound (no watermark yet: the whole source up to `upper`
/// is read) against the source's oldest row: a bound before it would read nothing, and a
/// run that "succeeds" reading nothing hides the mistake. `oldest` is the source's oldest
/// change (none for an empty source, which is no error).
pub fn check_first_window(
    plan: &Plan,
    upper: Micros,
    source_clock: Micros,
    upper_given: bool,
    oldest: Option<Micros>,
) -> Result<(), WindowError> {
    match oldest {
        Some(oldest) if oldest > upper => {
            Err(WindowError::BeforeOldestRow {
                upper,
                origin: if upper_given {
                    String::new()
                } else {
                    format!(
                        " (the source's clock {source_clock} minus source.safety_lag {})",
                        duration_text(plan.source.safety_lag_micros)
                    )
                },
                oldest,
                hint: if oldest > source_clock {
                    // No bound can reach it: one is never later than the source's clock.
                    format!(
                        "every source row is stamped after the source's clock ({source_clock}), so no upper bound reaches one; \
                         the change column's times are ahead of that clock (a wrong zone or offset in the values, or a clock \
                         running behind): fix the times or the clock, and load once they are in its past"
                    )
                } else if upper_given {
                    format!("give an upper bound at or after {oldest}, or none (the source's clock minus source.safety_lag)")
                } else {
                    "make source.safety_lag shorter than the time since the source's oldest row".to_string()
                },
            })
        }
        _ => Ok(()),
    }
}

/// Checks a backfill's end against the source's clock before anything is read, as a
/// run's upper bound is: rows the source writes later, stamped before the end, would be
/// missed by the backfill's committed chunks.
pub fn check_backfill_end(to: Micros, source_clock: Micros) -> Result<(), WindowError> {
    if to > source_clock {
        return Err(WindowError::BackfillAfterSourceClock { to, source_clock });
    }
    Ok(())
}

/// Checks a run's window against the source's clock before anything is read: an upper
/// bound later than the clock, or earlier than `watermark - lookback`, is refused.
/// `upper_given` says whether the bound was asked for (else it is the clock minus
/// `source.safety_lag`); `watermark` is the one `window.low` was derived from.
pub fn check_window(
    plan: &Plan,
    window: &Window,
    source_clock: Micros,
    upper_given: bool,
    watermark: Option<Micros>,
) -> Result<(), WindowError> {
    if window.high > source_clock {
        return Err(WindowError::AfterSourceClock {
            upper: window.high,
            source_clock,
        });
    }
    let (Some(low), Some(watermark)) = (window.low, watermark) else {
        return Ok(());
    };
    if window.high >= low {
        return Ok(());
    }
    let origin = if upper_given {
        String::new()
    } else {
        format!(
            " (the source's clock {source_clock} minus source.safety_lag {})",
            duration_text(plan.source.safety_lag_micros)
        )
    };
    let hint = if watermark > source_clock {
        watermark_ahead_text(plan, source_clock, watermark)
    } else if upper_given {
        "to re-read a past period, use `dimlog backfill` with its from and to".to_string()
    } else {
        "make source.safety_lag shorter than the time since the watermark".to_string()
    };
    Err(WindowError::BeforeLowEnd {
        upper: window.high,
        origin,
        low,
        watermark,
        lookback: duration_text(plan.source.lookback_micros),
        hint,
    })
}

/// What a watermark later than the source's clock means, and what to do. A run never
/// reads past the source's clock, so the clock is behind the one earlier runs read: it
/// was set back, or the source is another (restored from a backup, moved to a server
/// whose clock is behind), or the watermark was set by hand.
fn watermark_ahead_text(plan: &Plan, source_clock: Micros, watermark: Micros) -> String {
    format!(
        "the watermark of dimension {} ({watermark}) is later than the source's clock ({source_clock}), which earlier runs \
         read: the source's clock was set back, or the source is not the one they read (restored from a backup, moved to \
         another server), or the watermark was set by hand. Runs are refused until the clock passes the watermark. If the \
         clock is wrong, correct it (NTP); if the source is older than what was loaded, set the watermark back to the \
         source's newest change (UPDATE dimlog_state SET high_watermark = ... WHERE dimension = '{}' AND role = \
         'incremental') or load it with a full refresh, so that nothing changed since is skipped",
        plan.name, plan.name
    )
}

/// A config duration as a person would write it: whole days as days (humantime's months
/// of 30.44 days make `3650days` unreadable), the rest as humantime prints it.
fn duration_text(micros: i64) -> String {
    const DAY: i64 = 86_400_000_000;
    if micros >= DAY && micros % DAY == 0 {
        format!("{}days", micros / DAY)
    } else {
        humantime::format_duration(std::time::Duration::from_micros(micros.max(0) as u64)).to_string()
    }
}

/// Source rows stamped after a run's upper bound: not read by the run, counted so that a
/// wrong clock at the source is seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FutureRows {
    /// How many.
    pub count: i64,
    /// The latest stamp among them.
    pub newest: Option<Micros>,
}

impl FutureRows {
    /// Adds rows counted elsewhere (those a loose window read and then dropped).
    pub fn add(&mut self, other: FutureRows) {
        self.count += other.count;
        self.newest = self.newest.max(other.newest);
    }
}

/// Which rows of a window a load stages, and the count of those it does not: the one
/// rule for every way rows are read (parsed rows, or COPY text passed through). A row
/// with a NULL change time is skipped; one outside the window is not staged (one read
/// past the upper bound, by a read wider than the window, is counted with the source's
/// future rows); one with a NULL in a key column is counted per column and fails the
/// load ([`Admission::null_key_error`]); a soft-delete flag marks a row deleted when it
/// reads as true ([`flagged_deleted`]; the caller refuses one that reads as neither).
#[derive(Debug)]
pub struct Admission {
    window: Window,
    /// Rows staged.
    pub rows_read: i64,
    /// Rows staged as deleted (soft-delete flag true).
    pub deleted: i64,
    /// The greatest change time staged.
    pub max_read: Option<Micros>,
    /// Rows read past the upper bound and dropped.
    pub beyond_upper: FutureRows,
    /// Rows skipped for a NULL in each key column.
    pub null_keys: Vec<i64>,
    /// Rows skipped for a NULL in any key column.
    pub null_key_rows: i64,
}

impl Admission {
    /// The rule for one window of a dimension whose key has `key_count` columns.
    pub fn new(window: Window, key_count: usize) -> Admission {
        Admission {
            window,
            rows_read: 0,
            deleted: 0,
            max_read: None,
            beyond_upper: FutureRows::default(),
            null_keys: vec![0; key_count],
            null_key_rows: 0,
        }
    }

    /// Whether the row stamped `change` (None: NULL) whose key column `i` is NULL when
    /// `null_key(i)` is staged; counts it either way.
    pub fn admit(&mut self, change: Option<Micros>, null_key: impl Fn(usize) -> bool, is_deleted: bool) -> bool {
        let Some(ts) = change else {
            return false;
        };
        if !self.window.contains(ts) {
            // After the window's end; a stamp at an end that is not the window's own (a
            // backfill chunk's) is the next chunk's first instant, not a future row.
            if self.window.low.is_none_or(|l| ts >= l) && ts > self.window.high {
                self.beyond_upper.add(FutureRows {
                    count: 1,
                    newest: Some(ts),
                });
            }
            return false;
        }
        let key_count = self.null_keys.len();
        if (0..key_count).any(&null_key) {
            for i in (0..key_count).filter(|&i| null_key(i)) {
                self.null_keys[i] += 1;
            }
            self.null_key_rows += 1;
            return false;
        }
        self.rows_read += 1;
        self.deleted += i64::from(is_deleted);
        self.max_read = Some(self.max_read.map_or(ts, |m| m.max(ts)));
        true
    }

    /// The error that fails a load that met rows with a NULL key, naming the columns.
    pub fn null_key_error(&self, layout: &Layout) -> Option<ExtractError> {
        (self.null_key_rows > 0).then(|| ExtractError::null_key(layout, &self.null_keys, self.null_key_rows))
    }
}

/// The instant of a change column's text (by the rule of `docs/concepts/time-zones.md`),
/// or the error that names the row's key (`key`, asked for only then).
pub fn change_time(plan: &Plan, text: &str, key: impl FnOnce() -> String) -> Result<Micros, ExtractError> {
    Micros::parse_change(text, plan.source.timezone.as_ref())
        .map_err(|reason| ExtractError::bad_change_column(plan, reason, Some(key())))
}

/// Whether a soft-delete flag's value marks its row deleted (NULL: live); `None` for a
/// value that spells neither (see [`ExtractError::NotBoolean`]).
pub fn flagged_deleted(value: Option<&str>) -> Option<bool> {
    value.map_or(Some(false), crate::db::types::boolean)
}

/// The refusal of a row whose soft-delete flag `value` spells neither true nor false.
pub fn not_a_flag(plan: &Plan, value: &str, key: String) -> ExtractError {
    ExtractError::NotBoolean {
        column: plan
            .source
            .deleted_flag
            .as_ref()
            .map_or_else(String::new, |f| f.name().to_string()),
        role: "source.deleted_flag",
        key,
        value: format!("{value:?}"),
        fix: FLAG_FIX,
    }
}

/// What to do with a soft-delete flag that is no boolean.
pub const FLAG_FIX: &str =
    "Read the flag through source.query as a boolean, e.g. CASE WHEN status = 'deleted' THEN 1 ELSE 0 END";

/// Counts the source rows stamped after `window.high` that the window's read does not
/// return (on SQLite the read is loose, and the rows it returns past the bound are counted
/// where they are dropped).
pub async fn future_rows(
    conn: &mut Conn,
    plan: &Plan,
    layout: &Layout,
    window: &Window,
    by_index: bool,
) -> Result<FutureRows, ExtractError> {
    let sql = sql::statement(
        conn.backend(),
        "extract",
        "future",
        &indexed_context(plan, layout, window, by_index),
    )?;
    let rows = conn
        .query_text(
            "counting source rows after the upper bound",
            &sql,
            &[Param::Ts(window.high)],
        )
        .await?;
    // No row: none in the future. Else the count, and the newest value with its key.
    let row = rows.into_iter().next().unwrap_or_default();
    let count = row.first().cloned().flatten().and_then(|c| c.parse().ok()).unwrap_or(0);
    let newest = match row.get(1).cloned().flatten() {
        Some(text) => Some(parse_with_key(plan, &text, &row[2..])?),
        None => None,
    };
    Ok(FutureRows { count, newest })
}

/// One source column as the catalog describes it.
#[derive(Clone, Debug, Serialize)]
pub struct SourceColumn {
    /// Column name as stored.
    pub name: String,
    /// Declared type, as the source prints it.
    pub type_name: String,
    /// Logical kind.
    pub kind: ColumnKind,
    /// Position in the primary key (1-based), when part of it.
    pub pk_position: Option<i64>,
}

/// The source's columns.
#[derive(Clone, Debug)]
pub struct SourceSchema {
    /// Backend of the source.
    pub backend: Backend,
    /// Columns in table order.
    pub columns: Vec<SourceColumn>,
}

/// Renders the relation a statement reads from.
pub fn relation_sql(relation: &Relation) -> String {
    match relation {
        Relation::Table(t) => t.quoted(),
        Relation::Query(q) => format!("({q}) AS dimlog_source"),
    }
}

impl SourceSchema {
    /// Reads the source's catalog (or describes its query).
    pub async fn load(conn: &mut Conn, relation: &Relation) -> Result<SourceSchema, ExtractError> {
        let backend = conn.backend();
        let columns = match relation {
            Relation::Table(t) => {
                let sql = sql::statement(backend, "extract", "columns", &serde_json::json!({}))?;
                let params = backend.dialect().table_params(t.name(), t.schema(), &t.quoted());
                let rows = conn
                    .query_text("reading the source table's columns", &sql, &params)
                    .await?;
                if rows.is_empty() {
                    return Err(ConfigError::invalid(
                        "source.table",
                        format!("table {t} does not exist in the source database (or has no columns); check the name and schema"),
                    )
                    .into());
                }
                rows.into_iter()
                    .map(|r| {
                        let name = r[0].clone().unwrap_or_default();
                        let type_name = r[1].clone().unwrap_or_default();
                        let kind = backend.dialect().kind_of_type(&type_name);
                        let pk_position = r[2].as_deref().and_then(|p| p.parse().ok());
                        SourceColumn {
                            name,
                            type_name,
                            kind,
                            pk_position,
                        }
                    })
                    .collect()
            }
            Relation::Query(q) => {
                let probe = format!("SELECT * FROM ({q}) AS dimlog_source");
                let described = conn.describe_columns(&probe).await;
                let described = described.map_err(|e| {
                    // A right the role lacks, or a connection lost, is no fault of the
                    // query's: the source's error (exit 1, with the GRANT that gives the
                    // right), as when a table is read; anything else the query's (exit 2).
                    let not_the_query = match &e {
                        sqlx::Error::Database(d) => d.code().as_deref() == Some("42501"),
                        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Protocol(_) => true,
                        _ => false,
                    };
                    if not_the_query {
                        ExtractError::Db(DbError::Query {
                            what: "describing source.query".into(),
                            source: e,
                        })
                    } else {
                        ConfigError::invalid("source.query", format!("the source database refused the query: {e}"))
                            .into()
                    }
                })?;
                described
                    .into_iter()
                    .map(|(name, type_name)| {
                        let kind = backend.dialect().kind_of_type(&type_name);
                        SourceColumn {
                            name,
                            type_name,
                            kind,
                            pk_position: None,
                        }
                    })
                    .collect()
            }
        };
        Ok(SourceSchema { backend, columns })
    }

    fn find(&self, setting: &str, ident: &Ident) -> Result<&SourceColumn, ConfigError> {
        self.columns
            .iter()
            .find(|c| c.name == ident.name())
            .ok_or_else(|| ConfigError::NotInSource {
                setting: setting.to_string(),
                column: ident.name().to_string(),
                has: self.columns.iter().map(|c| c.name.clone()).collect(),
            })
    }

    /// Checks every configured column against the source and decides each one's kind and
    /// target type.
    pub fn layout(&self, plan: &Plan, target: Backend) -> Result<Layout, ConfigError> {
        let col = |setting: &str, ident: &Ident| -> Result<Col, ConfigError> {
            let c = self.find(setting, ident)?;
            Ok(Col {
                name: ident.quoted(),
                bare: ident.name().to_string(),
                kind: c.kind,
                target_type: target_type(self.backend, target, c),
            })
        };
        let keys = plan
            .source
            .key
            .iter()
            .map(|k| col("source.key", k))
            .collect::<Result<_, _>>()?;
        let tracked: Vec<Col> = plan
            .tracked
            .iter()
            .map(|k| col("track.columns", k))
            .collect::<Result<_, _>>()?;
        let type1 = plan
            .type1
            .iter()
            .map(|k| col("track.type1", k))
            .collect::<Result<_, _>>()?;
        let tiebreak = plan
            .source
            .tiebreak
            .as_ref()
            .map(|k| col("source.tiebreak", k))
            .transpose()?;
        if let Some(d) = &plan.source.deleted_flag {
            self.find("source.deleted_flag", d)?;
        }
        let u = self.find("source.updated_at", &plan.source.updated_at)?;
        match self.backend.dialect().change_time(u.kind) {
            ChangeTime::Instant | ChangeTime::ByValue => {}
            ChangeTime::Local if plan.source.timezone.is_none() => {
                return Err(ConfigError::invalid(
                    "source.timezone",
                    format!(
                        "the change column `{}` is `{}`, which has no time zone; set source.timezone to the zone its values are in, e.g. \"UTC\"",
                        u.name, u.type_name
                    ),
                ))
            }
            ChangeTime::Local => {}
            ChangeTime::NotATime => {
                return Err(ConfigError::invalid(
                    "source.updated_at",
                    format!("column `{}` is `{}`, not a timestamp; name a timestamptz column", u.name, u.type_name),
                ))
            }
        }
        let current = plan
            .current
            .iter()
            .map(|c| {
                let t: &Col = tracked
                    .iter()
                    .find(|t| t.bare == c.name())
                    .expect("validated by config");
                let bare = format!("current_{}", c.name());
                CurrentCol {
                    source: t.name.clone(),
                    name: Ident::column(&bare).map(|i| i.quoted()).unwrap_or_default(),
                    bare,
                    target_type: t.target_type.clone(),
                }
            })
            .collect();
        let pk: Vec<&SourceColumn> = self.columns.iter().filter(|c| c.pk_position.is_some()).collect();
        let unique_key = matches!(plan.source.relation, Relation::Table(_))
            && !pk.is_empty()
            && pk.iter().all(|c| plan.source.key.iter().any(|k| k.name() == c.name));
        let unique_as_read = unique_key
            && (self.backend.dialect().values_have_declared_types()
                || matches!(&pk[..], [only] if only.type_name.eq_ignore_ascii_case("INTEGER")));
        Ok(Layout {
            keys,
            tracked,
            type1,
            current,
            tiebreak,
            updated_at_kind: u.kind,
            unique_key,
            unique_as_read,
        })
    }
}

/// The type a target column gets: a source of the target's own engine keeps its declared
/// type where the engine says so ([`crate::db::dialect::Dialect::carried_type`]);
/// everything else maps through the column's kind.
fn target_type(source: Backend, target: Backend, c: &SourceColumn) -> String {
    let target = target.dialect();
    (source.dialect().root() == target.root())
        .then(|| target.carried_type(&c.type_name, c.kind))
        .flatten()
        .unwrap_or_else(|| target.type_of_kind(c.kind).to_string())
}

/// The part of the source a load reads: `[low, high]` (or `[low, high)` for backfills).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Inclusive low bound; `None` reads from the beginning.
    pub low: Option<Micros>,
    /// The fixed upper bound.
    pub high: Micros,
    /// `<=` for runs, `<` for half-open backfill chunks.
    pub high_inclusive: bool,
}

impl Window {
    /// True when `t` falls inside.
    pub fn contains(&self, t: Micros) -> bool {
        self.low.is_none_or(|l| t >= l)
            && if self.high_inclusive {
                t <= self.high
            } else {
                t < self.high
            }
    }
}

fn extract_context(plan: &Plan, layout: &Layout, window: Option<&Window>) -> serde_json::Value {
    // A change column without a zone (PostgreSQL `timestamp` or `date`) is read as its
    // own text and converted by dimlog's one rule (`Micros::parse`), never by the
    // server's; the read is bounded in local time, widened by the zone's offsets, and
    // the exact window applies to the converted instants.
    let local_zone = plan
        .source
        .timezone
        .filter(|_| matches!(layout.updated_at_kind, ColumnKind::Timestamp | ColumnKind::Date));
    let local_text = |t: chrono::NaiveDateTime| t.format("%Y-%m-%d %H:%M:%S%.6f").to_string();
    let (low_local, high_local) = match (local_zone, window) {
        (Some(zone), Some(w)) => {
            let (low, high) = Micros::local_bounds(w.low, w.high, &zone);
            (low.map(local_text), Some(local_text(high)))
        }
        _ => (None, None),
    };
    serde_json::json!({
        "local": local_zone.is_some(),
        "low_local": low_local,
        "high_local": high_local,
        "columns": layout.read_columns(),
        "key_columns": layout.keys,
        "keys": layout.keys.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
        "updated_at": plan.source.updated_at.quoted(),
        "deleted_flag": plan.source.deleted_flag.as_ref().map(Ident::quoted),
        "relation": relation_sql(&plan.source.relation),
        "tz": plan.source.timezone.map(|z| z.name().to_string()),
        "low": window.and_then(|w| w.low).map(|t| t.to_text()),
        "high": window.map(|w| w.high.to_text()),
        "high_inclusive": window.is_none_or(|w| w.high_inclusive),
        "ordered": false,
        // SQLite: the window read through indexes ([`window_by_index`]).
        "indexed": false,
        // Slack of the loose SQLite window, in days: a second for values with offsets,
        // a day for naive local times (dimlog formats this number itself).
        "slack_days": if plan.source.timezone.is_some() { "1.0" } else { "0.0000116" },
    })
}

/// The source database's clock, the base of a run's upper bound.
pub async fn source_now(conn: &mut Conn, plan: &Plan, layout: &Layout) -> Result<Micros, ExtractError> {
    let sql = sql::statement(conn.backend(), "extract", "now", &extract_context(plan, layout, None))?;
    let rows = conn.query_text("reading the source clock", &sql, &[]).await?;
    let text = rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .unwrap_or_default();
    Micros::parse(&text, None).map_err(|reason| ExtractError::BadTimestamp {
        column: "now()".into(),
        key: None,
        reason,
        hint: "",
    })
}

/// Whether the source's role may read the source's rows (the columns come from the
/// catalog, which shows them to a role without that right): an error naming the refusal.
pub async fn check_readable(conn: &mut Conn, plan: &Plan, layout: &Layout) -> Result<(), ExtractError> {
    let sql = sql::statement(
        conn.backend(),
        "extract",
        "readable",
        &extract_context(plan, layout, None),
    )?;
    let refused = match conn.query_text("reading the source table", &sql, &[]).await {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    // A role with SELECT on some columns only: the columns it may not read, named.
    let (Relation::Table(table), true) = (&plan.source.relation, refused.is_denied()) else {
        return Err(refused.into());
    };
    let mut names: Vec<&str> = layout.read_columns().iter().map(|c| c.bare.as_str()).collect();
    names.push(plan.source.updated_at.name());
    names.extend(plan.source.deleted_flag.as_ref().map(Ident::name));
    let sql = sql::statement(conn.backend(), "extract", "unreadable_columns", &serde_json::json!({}))?;
    let params = [Param::Text(table.quoted()), Param::Text(names.join(","))];
    let unreadable: Vec<String> = match conn
        .query_text("finding the columns the source's role may not read", &sql, &params)
        .await
    {
        Ok(rows) => rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .collect(),
        Err(_) => return Err(refused.into()),
    };
    // None readable: the table's SELECT is missing, as the refusal says.
    if unreadable.is_empty() || unreadable.len() == names.len() {
        return Err(refused.into());
    }
    Err(ExtractError::ColumnsUnreadable {
        table: crate::rights::sql_name(&table.to_string()),
        columns: unreadable
            .iter()
            .map(|c| crate::rights::sql_ident(c))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Whether a read of the change column also refuses times without a zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zones {
    /// As [`check_zone`] does, in the same pass.
    Check,
    /// Already checked, or not to be.
    Checked,
}

/// The source's oldest change (a first load's window is checked against it); none for an
/// empty source. With [`Zones::Check`], the values are also held to [`check_zone`]'s rule
/// as they go by, and its error comes first, as it would from its own pass before.
pub async fn source_oldest(
    conn: &mut Conn,
    plan: &Plan,
    layout: &Layout,
    zones: Zones,
) -> Result<Option<Micros>, ExtractError> {
    let by_value = conn.dialect().change_time(layout.updated_at_kind) == ChangeTime::ByValue;
    let zones = match zones {
        Zones::Check if by_value && plan.source.timezone.is_none() => Zones::Check,
        _ => Zones::Checked,
    };
    earliest_or_latest(conn, plan, layout, std::cmp::Ordering::Less, zones).await
}

/// Whether a first load's read from `conn` (a window with no lower bound) makes the
/// checks [`source_oldest`] does as it goes: an engine whose change values are each read
/// by dimlog's rule ([`ChangeTime::ByValue`]) reads every row then, and parses every
/// value, so a time without a zone or a value with no instant fails that read too, and a
/// read of nothing from a source with rows is one whose upper bound is before them all.
pub fn first_read_checks_every_change(conn: &Conn, layout: &Layout) -> bool {
    conn.dialect().change_time(layout.updated_at_kind) == ChangeTime::ByValue
}

/// A change value read with its row's key: its instant, or the error naming both.
pub(crate) fn parse_with_key(plan: &Plan, text: &str, key: &[Option<String>]) -> Result<Micros, ExtractError> {
    Micros::parse_change(text, plan.source.timezone.as_ref())
        .map_err(|r| ExtractError::bad_change_column(plan, r, Some(key_text(key, key.len()))))
}

/// The earliest (`Less`) or latest (`Greater`) instant among the rows of the `oldest` or
/// `newest` statement (value, then key columns): PostgreSQL sends the one row, SQLite
/// every value. A value that names no instant is an error naming its row, as it is for a
/// run.
async fn earliest_or_latest(
    conn: &mut Conn,
    plan: &Plan,
    layout: &Layout,
    want: std::cmp::Ordering,
    zones: Zones,
) -> Result<Option<Micros>, ExtractError> {
    let (statement, what) = match want {
        std::cmp::Ordering::Less => ("oldest", "reading the oldest source change"),
        _ => ("newest", "reading the newest source change"),
    };
    let sql = sql::statement(
        conn.backend(),
        "extract",
        statement,
        &extract_context(plan, layout, None),
    )?;
    let mut best: Option<Micros> = None;
    // With zones to check, a value's other fault waits for the end of the pass: a time
    // without a zone anywhere is the error to give (a config error, the first to fix).
    let mut fault: Option<ExtractError> = None;
    let folded = conn
        .each_text_row(what, &sql, 1 + layout.keys.len(), |row| {
            let Some(text) = row.first().cloned().flatten() else {
                return Ok(());
            };
            let t = match parse_with_key(plan, &text, &row[1..]) {
                Ok(t) => t,
                Err(e) if zones == Zones::Check => {
                    if let Err(e @ crate::ts::TimestampError::NoZone(_)) = Micros::parse(&text, None) {
                        return Err(ExtractError::bad_change_column(plan, e, None));
                    }
                    fault.get_or_insert(e);
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            if best.is_none_or(|b| t.cmp(&b) == want) {
                best = Some(t);
            }
            Ok(())
        })
        .await;
    if let (Ok(()), Some(e)) = (&folded, fault) {
        return Err(e);
    }
    match folded {
        // (A scan is never stopped, nor held to an order.)
        Ok(()) | Err(PumpError::Stopped | PumpError::OutOfOrder) => Ok(best),
        Err(PumpError::Row(e)) => Err(e),
        Err(PumpError::Stream(crate::db::StreamError::Db(e)) | PumpError::Write(e)) => Err(e.into()),
        Err(PumpError::Stream(crate::db::StreamError::NotText { key, column, bytes })) => {
            // The row is the value, then its key.
            let selected = Selected {
                names: std::iter::once(plan.source.updated_at.name().to_string())
                    .chain(layout.keys.iter().map(|c| c.bare.clone()))
                    .collect(),
                key_count: layout.keys.len(),
                change_at: Some(0),
            };
            Err(selected.not_utf8(&key[1..], column, &bytes))
        }
    }
}

/// The newest change in the source, for `status` (lag) and messages.
pub async fn source_newest(conn: &mut Conn, plan: &Plan, layout: &Layout) -> Result<Option<Micros>, ExtractError> {
    earliest_or_latest(conn, plan, layout, std::cmp::Ordering::Greater, Zones::Checked).await
}

/// Fails the run when any source row has a NULL change column (checked every run: such
/// rows are outside every window and would be lost silently).
pub async fn check_null_updated_at(conn: &mut Conn, plan: &Plan, layout: &Layout) -> Result<(), ExtractError> {
    let sql = sql::statement(
        conn.backend(),
        "extract",
        "null_check",
        &extract_context(plan, layout, None),
    )?;
    let counts = conn
        .query_i64s("checking the source for NULL change columns", &sql, &[])
        .await?;
    if let Some(n) = counts.first().copied().flatten().filter(|&n| n > 0) {
        let sql = sql::statement(
            conn.backend(),
            "extract",
            "null_example",
            &extract_context(plan, layout, None),
        )?;
        // (A key that cannot be read is no reason to hide the error: it says `?` then.)
        let rows = conn
            .query_text("reading a source row with a NULL change column", &sql, &[])
            .await
            .unwrap_or_default();
        let key = rows.first().map_or_else(|| "?".into(), |row| key_text(row, row.len()));
        return Err(ExtractError::NullUpdatedAt {
            column: plan.source.updated_at.name().into(),
            count: n,
            key,
        });
    }
    let sql = sql::statement(
        conn.backend(),
        "extract",
        "no_instant",
        &extract_context(plan, layout, None),
    )?;
    let rows = conn
        .query_text("checking the source for change columns with no instant", &sql, &[])
        .await?;
    if let Some(row) = rows.into_iter().next() {
        let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "NULL".into());
        return Err(ExtractError::NoInstant {
            column: plan.source.updated_at.name().into(),
            count: row.first().cloned().flatten().and_then(|c| c.parse().ok()).unwrap_or(1),
            value: row.get(1).map(text).unwrap_or_default(),
            key: row.iter().skip(2).map(text).collect::<Vec<_>>().join(", "),
        });
    }
    Ok(())
}

/// Refuses a SQLite change column holding times without a zone when `source.timezone`
/// does not say which zone they are in — the config error PostgreSQL's `timestamp`
/// column gets from the schema, found here in the values (a sample of those without a
/// zone's mark; the extract finds any other). A no-op where the column's type decides
/// (PostgreSQL) or with a zone.
pub async fn check_zone(conn: &mut Conn, plan: &Plan, layout: &Layout) -> Result<(), ExtractError> {
    let by_value = conn.dialect().change_time(layout.updated_at_kind) == ChangeTime::ByValue;
    if !by_value || plan.source.timezone.is_some() {
        return Ok(());
    }
    let sql = sql::statement(
        conn.backend(),
        "extract",
        "zone_less",
        &extract_context(plan, layout, None),
    )?;
    let rows = conn
        .query_text("checking the change column for times without a zone", &sql, &[])
        .await?;
    for value in rows.into_iter().filter_map(|r| r.into_iter().next().flatten()) {
        if let Err(e @ crate::ts::TimestampError::NoZone(_)) = Micros::parse(&value, None) {
            return Err(ExtractError::bad_change_column(plan, e, None));
        }
    }
    Ok(())
}

/// A source row as read: key, attribute and tiebreak values in layout order, then the
/// change column and the delete flag, all as canonical text.
pub type SourceRow = TextRow;

/// Batches of rows arriving from the reader task.
pub type RowBatches = mpsc::Receiver<Result<Vec<SourceRow>, ExtractError>>;

/// What a row reader needs to name a value it cannot read: the columns it selects, in
/// order, of which the first `key_count` are the natural key.
#[derive(Clone, Debug)]
struct Selected {
    names: Vec<String>,
    key_count: usize,
    /// Where the change column is among `names`, if it is read.
    change_at: Option<usize>,
}

impl Selected {
    fn fault(&self, e: crate::db::StreamError) -> ExtractError {
        match e {
            crate::db::StreamError::Db(e) => e.into(),
            crate::db::StreamError::NotText { key, column, bytes } => self.not_utf8(&key, column, &bytes),
        }
    }

    /// The error for the value of `column` whose bytes are not UTF-8; `key` holds the
    /// row's key values as read (a key value that is not UTF-8 itself as its bytes).
    fn not_utf8(&self, key: &[Result<Option<String>, Vec<u8>>], column: usize, bytes: &[u8]) -> ExtractError {
        let mut hex = Vec::new();
        crate::db::push_hex(&mut hex, &bytes[..bytes.len().min(32)]);
        ExtractError::NotUtf8 {
            column: self.names.get(column).cloned().unwrap_or_default(),
            fix: if self.change_at == Some(column) {
                "the change column (source.updated_at) must hold a time: fix the value at the source, or leave the row out with source.query"
            } else {
                "fix the value at the source, or declare the column BLOB (or cast it to BLOB in source.query) to load it as bytes"
            },
            key: key
                .iter()
                .take(self.key_count)
                .map(key_part)
                .collect::<Vec<_>>()
                .join(", "),
            bytes: String::from_utf8(hex).unwrap_or_default(),
        }
    }
}

/// The key columns a NULL-key error names: "`id`" when one column holds the NULLs, else
/// every such column with its count ("`region` in 2 of them, `id` in 1").
fn null_key_columns(columns: &[(String, i64)]) -> String {
    match columns {
        [(c, _)] => format!("`{c}`"),
        _ => {
            let each: Vec<String> = columns.iter().map(|(c, n)| format!("`{c}` in {n}")).collect();
            format!("({} of them)", each.join(", "))
        }
    }
}

/// A key value as an error names it: text as it is, NULL as `NULL`, and bytes that are
/// not UTF-8 as an SQL blob literal `x'…'` (hex), so the key is never shown empty.
fn key_part(value: &Result<Option<String>, Vec<u8>>) -> String {
    match value {
        Ok(Some(text)) => text.clone(),
        Ok(None) => "NULL".into(),
        Err(bytes) => {
            let mut hex = Vec::new();
            crate::db::push_hex(&mut hex, bytes);
            format!("x'{}'", String::from_utf8(hex).unwrap_or_default())
        }
    }
}

fn indexed_context(plan: &Plan, layout: &Layout, window: &Window, by_index: bool) -> serde_json::Value {
    let mut ctx = extract_context(plan, layout, Some(window));
    ctx["indexed"] = serde_json::Value::Bool(by_index);
    ctx
}

/// Whether the source reads `window` through indexes, without scanning its table: on
/// SQLite, whose loose window is otherwise a scan that reads every change-column value,
/// when the change column has an index and the partial index of the values an index
/// cannot place ([`index_advice`]); only for a window with a lower bound (a first load
/// reads the table anyway). Asked of the engine's query plan, so a missing index means
/// the scan, never a wrong read.
pub async fn window_by_index(conn: &mut Conn, plan: &Plan, layout: &Layout, window: &Window) -> bool {
    let Some(low) = window.low else {
        return false;
    };
    let Ok(sql) = sql::statement(
        conn.backend(),
        "extract",
        "rows",
        &indexed_context(plan, layout, window, true),
    ) else {
        return false;
    };
    let params = [Param::Ts(low), Param::Ts(window.high)];
    match conn.reads_through_indexes(&sql, &params).await {
        Ok(by_index) => by_index,
        Err(e) => {
            tracing::debug!("reading the window's query plan: {e}");
            false
        }
    }
}

/// The indexes that let a SQLite source's window be read without a scan
/// ([`window_by_index`]): one on the change column, and one of only the values it cannot
/// place. `None` for a source query (indexes are the tables'), and for engines that
/// have no such statement (they read a window through whatever index there is).
pub fn index_advice(plan: &Plan, layout: &Layout) -> Option<String> {
    let crate::config::Relation::Table(table) = &plan.source.relation else {
        return None;
    };
    let name = |suffix: &str| {
        let bare = format!("{}_{}_{suffix}", table.name(), plan.source.updated_at.name());
        let quoted = format!("\"{}\"", bare.replace('"', "\"\""));
        match table.schema() {
            Some(schema) => format!("\"{}\".{quoted}", schema.replace('"', "\"\"")),
            None => quoted,
        }
    };
    let mut ctx = extract_context(plan, layout, None);
    ctx["index_name"] = name("window").into();
    ctx["guard_name"] = name("unplaceable").into();
    ctx["table"] = format!("\"{}\"", table.name().replace('"', "\"\"")).into();
    let sql = sql::statement(plan.source.url.backend, "extract", "index_advice", &ctx).ok()?;
    // One statement a line, to copy as it is.
    let statements: Vec<String> = sql
        .split(";\n")
        .map(|st| {
            st.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|st| !st.is_empty())
        .map(|st| format!("{};", st.trim_end_matches(';')))
        .collect();
    Some(statements.join("\n"))
}

/// A window's read: the statement, the bounds it binds, and the names of what it selects
/// (to name a value it cannot read).
pub struct WindowRead {
    /// The statement.
    pub sql: String,
    /// Bounds an engine's statement does not carry itself (PostgreSQL's has them
    /// rendered in), bound in order.
    pub params: Vec<Param>,
    selected: Selected,
}

impl WindowRead {
    /// The read of `window` on a source of `backend`, through its indexes when `by_index`
    /// (see [`window_by_index`]).
    pub fn new(
        backend: crate::db::Backend,
        plan: &Plan,
        layout: &Layout,
        window: &Window,
        by_index: bool,
    ) -> Result<WindowRead, ExtractError> {
        WindowRead::render(
            backend,
            plan,
            layout,
            window,
            indexed_context(plan, layout, window, by_index),
        )
    }

    /// The read of `window` in the order of the source's key (for a first load that
    /// numbers the rows as they arrive; a table keyed by SQLite's INTEGER PRIMARY KEY is
    /// read in that order anyway).
    pub fn in_key_order(
        backend: crate::db::Backend,
        plan: &Plan,
        layout: &Layout,
        window: &Window,
    ) -> Result<WindowRead, ExtractError> {
        let mut ctx = extract_context(plan, layout, Some(window));
        ctx["ordered"] = serde_json::Value::Bool(true);
        WindowRead::render(backend, plan, layout, window, ctx)
    }

    fn render(
        backend: crate::db::Backend,
        plan: &Plan,
        layout: &Layout,
        window: &Window,
        ctx: serde_json::Value,
    ) -> Result<WindowRead, ExtractError> {
        let sql = sql::statement(backend, "extract", "rows", &ctx)?;
        let mut params = Vec::new();
        if let Some(low) = window.low {
            params.push(Param::Ts(low));
        }
        params.push(Param::Ts(window.high));
        let mut names: Vec<String> = layout.read_columns().iter().map(|c| c.bare.clone()).collect();
        let change_at = Some(names.len());
        names.push(plan.source.updated_at.name().into());
        names.extend(plan.source.deleted_flag.iter().map(|d| d.name().to_string()));
        Ok(WindowRead {
            sql,
            params,
            selected: Selected {
                names,
                key_count: layout.keys.len(),
                change_at,
            },
        })
    }

    /// How many of the selected values, first, are the natural key.
    pub fn key_count(&self) -> usize {
        self.selected.key_count
    }

    /// The read's failure in the user's terms.
    pub fn fault(&self, e: crate::db::StreamError) -> ExtractError {
        self.selected.fault(e)
    }
}

/// Starts reading `window` on its own task. Batches arrive through a bounded channel
/// (back-pressure keeps memory flat); the task hands the connection back when done.
pub fn spawn_reader(
    conn: Conn,
    plan: &Plan,
    layout: &Layout,
    window: &Window,
    by_index: bool,
) -> Result<(RowBatches, tokio::task::JoinHandle<Conn>), ExtractError> {
    let read = WindowRead::new(conn.backend(), plan, layout, window, by_index)?;
    Ok(spawn_stream(conn, read.sql, read.params, read.selected))
}

/// Streams the source's full key list (key columns only), for delete reconciliation.
pub fn spawn_key_reader(
    conn: Conn,
    plan: &Plan,
    layout: &Layout,
) -> Result<(RowBatches, tokio::task::JoinHandle<Conn>), ExtractError> {
    let sql = sql::statement(conn.backend(), "extract", "keys", &extract_context(plan, layout, None))?;
    let mut names: Vec<String> = layout.keys.iter().map(|c| c.bare.clone()).collect();
    names.extend(plan.source.deleted_flag.iter().map(|d| d.name().to_string()));
    let selected = Selected {
        names,
        key_count: layout.keys.len(),
        change_at: None,
    };
    Ok(spawn_stream(conn, sql, Vec::new(), selected))
}

/// What [`spawn_raw_reader`] reads.
#[derive(Clone, Copy, Debug)]
pub enum RawRead<'a> {
    /// The rows of a window, as [`spawn_reader`] selects them.
    Window(&'a Window),
    /// The same rows in key order, for a first load that numbers them as they arrive
    /// (only for a table source: its primary key index usually serves the order).
    WindowByKey(&'a Window),
    /// The full key list, as [`spawn_key_reader`] selects it.
    Keys,
}

/// Pieces of the source's COPY text output (about 1 MiB each, whole rows, escapes intact).
pub type RawChunks = mpsc::Receiver<Result<Vec<u8>, ExtractError>>;

/// Size of the pieces [`spawn_raw_reader`] sends.
const RAW_CHUNK: usize = 1 << 20;

/// Like [`spawn_reader`] and [`spawn_key_reader`] for a PostgreSQL source, without
/// taking the rows apart: the COPY text goes on as it came, for a PostgreSQL target to
/// read with `COPY … FROM STDIN` in the same format. Memory stays flat: at most a few
/// pieces are in flight.
pub fn spawn_raw_reader(
    mut conn: Conn,
    plan: &Plan,
    layout: &Layout,
    read: RawRead<'_>,
) -> Result<(RawChunks, tokio::task::JoinHandle<Conn>), ExtractError> {
    let sql = match read {
        RawRead::Window(w) => sql::statement(
            conn.backend(),
            "extract",
            "rows",
            &extract_context(plan, layout, Some(w)),
        )?,
        RawRead::WindowByKey(w) => {
            let mut ctx = extract_context(plan, layout, Some(w));
            ctx["ordered"] = serde_json::Value::Bool(true);
            sql::statement(conn.backend(), "extract", "rows", &ctx)?
        }
        RawRead::Keys => sql::statement(conn.backend(), "extract", "keys", &extract_context(plan, layout, None))?,
    };
    let (tx, rx) = mpsc::channel(4);
    let handle = tokio::spawn(async move {
        let result = conn.stream_copy_text(&sql, RAW_CHUNK, &tx).await;
        if let Err(e) = result {
            // The source's error, so that it is reported as one (its role, its rights).
            let _ = tx.send(Err(ExtractError::Db(e))).await;
        }
        conn
    });
    Ok((rx, handle))
}

fn spawn_stream(
    mut conn: Conn,
    sql: String,
    params: Vec<Param>,
    selected: Selected,
) -> (RowBatches, tokio::task::JoinHandle<Conn>) {
    let (tx, rx) = mpsc::channel(4);
    let handle = tokio::spawn(async move {
        let result = stream_rows(&mut conn, &sql, params, &selected, &tx).await;
        if let Err(e) = result {
            let _ = tx.send(Err(e)).await;
        }
        conn
    });
    (rx, handle)
}

async fn stream_rows(
    conn: &mut Conn,
    sql: &str,
    params: Vec<Param>,
    selected: &Selected,
    tx: &mpsc::Sender<Result<Vec<SourceRow>, ExtractError>>,
) -> Result<(), ExtractError> {
    conn.stream_text_rows(sql, &params, selected.key_count, BATCH_ROWS, tx)
        .await
        .map_err(|e| selected.fault(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Micros {
        Micros::parse(text, None).expect("a time")
    }

    fn window(low: Option<&str>, high: &str, high_inclusive: bool) -> Window {
        Window {
            low: low.map(at),
            high: at(high),
            high_inclusive,
        }
    }

    #[test]
    fn a_window_holds_its_low_bound_and_its_high_bound_only_when_inclusive() {
        let run = window(Some("2026-01-01T00:00:00Z"), "2026-01-02T00:00:00Z", true);
        assert!(run.contains(at("2026-01-01T00:00:00Z")));
        assert!(run.contains(at("2026-01-02T00:00:00Z")));
        assert!(!run.contains(at("2026-01-02T00:00:00.000001Z")));
        assert!(!run.contains(at("2025-12-31T23:59:59.999999Z")));
        let chunk = Window {
            high_inclusive: false,
            ..run
        };
        assert!(!chunk.contains(at("2026-01-02T00:00:00Z")));
        assert!(chunk.contains(at("2026-01-01T23:59:59.999999Z")));
        let first = window(None, "2026-01-02T00:00:00Z", true);
        assert!(first.contains(at("0001-01-01T00:00:00Z")));
    }

    #[test]
    fn admission_stages_rows_in_the_window_with_whole_keys_and_counts_the_others() {
        let mut a = Admission::new(window(Some("2026-01-01T00:00:00Z"), "2026-01-02T00:00:00Z", true), 2);
        let whole = |_: usize| false;
        // NULL change time: skipped, counted nowhere.
        assert!(!a.admit(None, whole, false));
        // Before the low bound: skipped, not a future row.
        assert!(!a.admit(Some(at("2025-12-31T00:00:00Z")), whole, false));
        // Past the upper bound: skipped, counted with the newest stamp.
        assert!(!a.admit(Some(at("2026-01-03T00:00:00Z")), whole, false));
        assert!(!a.admit(Some(at("2026-01-05T00:00:00Z")), whole, false));
        // NULL in key column 1 (and in both): counted per column.
        assert!(!a.admit(Some(at("2026-01-01T12:00:00Z")), |i| i == 1, false));
        assert!(!a.admit(Some(at("2026-01-01T12:00:00Z")), |_| true, false));
        // Staged: one live, one deleted.
        assert!(a.admit(Some(at("2026-01-01T06:00:00Z")), whole, false));
        assert!(a.admit(Some(at("2026-01-01T18:00:00Z")), whole, true));
        assert_eq!(a.rows_read, 2);
        assert_eq!(a.deleted, 1);
        assert_eq!(a.max_read, Some(at("2026-01-01T18:00:00Z")));
        assert_eq!(a.beyond_upper.count, 2);
        assert_eq!(a.beyond_upper.newest, Some(at("2026-01-05T00:00:00Z")));
        assert_eq!(a.null_keys, vec![1, 2]);
        assert_eq!(a.null_key_rows, 2);
    }

    #[test]
    fn a_first_load_whose_rows_are_all_after_the_clock_is_told_so_not_to_shorten_the_lag() {
        let plan = crate::config::Plan::from_toml(
            r#"name = "c"
[source]
url = "sqlite:///tmp/s.db"
table = "t"
key = ["id"]
updated_at = "updated_at"
safety_lag = "0s"
[target]
url = "sqlite:///tmp/w.db"
log = "c_log"
dimension = "dim_c"
surrogate_key = "c_sk"
[track]
columns = ["v"]
"#,
            std::path::Path::new("dimlog.toml"),
            std::path::Path::new("/tmp"),
            &crate::config::Overrides::default(),
        )
        .expect("a plan");
        let clock = at("2026-12-03T10:00:00Z");
        for given in [false, true] {
            let future = check_first_window(&plan, clock, clock, given, Some(at("2027-01-01T00:00:00Z")))
                .expect_err("refused")
                .to_string();
            assert!(future.contains("stamped after the source's clock"), "{future}");
            assert!(!future.contains("safety_lag shorter"), "{future}");
            assert!(!future.contains("give an upper bound at or after"), "{future}");
        }
        let past = check_first_window(
            &plan,
            at("2026-01-01T00:00:00Z"),
            clock,
            false,
            Some(at("2026-06-01T00:00:00Z")),
        )
        .expect_err("refused")
        .to_string();
        assert!(past.contains("safety_lag shorter"), "{past}");
    }

    #[test]
    fn a_soft_delete_flag_reads_as_people_store_it() {
        for yes in ["true", "t", "1", "yes", "Y", " TRUE "] {
            assert_eq!(flagged_deleted(Some(yes)), Some(true), "{yes}");
        }
        for no in ["false", "f", "0", "no", "N", "", " False "] {
            assert_eq!(flagged_deleted(Some(no)), Some(false), "{no}");
        }
        assert_eq!(flagged_deleted(None), Some(false), "NULL: live");
        // Neither: read as either, it would state what the source does not.
        for neither in ["deleted", "maybe", "2", "-1", "1.0", "tru", "oui", "active"] {
            assert_eq!(flagged_deleted(Some(neither)), None, "{neither}");
        }
    }
}
