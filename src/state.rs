//! State: the dimension's lock, its watermarks and its run records.
//!
//! The watermark of a role moves only inside the run's transaction, together with the
//! log rows it covers, and only forwards: `max(old, greatest updated_at read)`, never
//! `now()`. Each backfill has its own role, so it can never drag or push the nightly
//! `incremental` watermark. A failed run leaves a `failed` record written after the
//! rollback, in its own transaction.

use crate::config::Plan;
use crate::db::{sql, Conn, DbError, Param};
use crate::ts::Micros;
use serde::Serialize;

/// The watermark role of `dimlog run`.
pub const INCREMENTAL: &str = "incremental";

/// Which kind of load a run record describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    /// `dimlog run`.
    Incremental,
    /// `dimlog run --full-refresh`.
    FullRefresh,
    /// One chunk of `dimlog backfill`.
    Backfill,
}

impl RunKind {
    /// The text stored in `dimlog_runs.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Incremental => "incremental",
            RunKind::FullRefresh => "full-refresh",
            RunKind::Backfill => "backfill",
        }
    }
}

fn empty() -> serde_json::Value {
    serde_json::json!({})
}

/// Takes the dimension's lock before anything is read: see [`Conn::lock_dimension`].
pub async fn lock(conn: &mut Conn, plan: &Plan, wait: bool) -> Result<(), DbError> {
    conn.lock_dimension(&plan.name, wait).await
}

/// Releases the dimension's lock where it belongs to the session.
pub async fn unlock(conn: &mut Conn, plan: &Plan) {
    conn.unlock_dimension(&plan.name).await;
}

/// A lock another run holds (the driver's code says so) as [`DbError::Locked`], with
/// who else may hold it as the database layer says.
pub fn locked_or(err: DbError, plan: &Plan) -> DbError {
    match err.busy_holder() {
        Some(holder) => DbError::Locked {
            dimension: plan.name.clone(),
            holder: holder.into(),
        },
        None => err,
    }
}

/// The high watermark of `role`, if a run of that role has read something.
pub async fn watermark(conn: &mut Conn, plan: &Plan, role: &str) -> Result<Option<Micros>, DbError> {
    let sql = sql::statement(conn.backend(), "state", "watermark_get", &empty())?;
    let rows = conn
        .query_text(
            "reading the watermark",
            &sql,
            &[Param::Text(plan.name.clone()), Param::Text(role.into())],
        )
        .await?;
    Ok(rows
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten())
        .and_then(|t| Micros::parse(&t, None).ok()))
}

/// Moves the watermark of `role` (the caller guarantees it only moves forwards).
pub async fn set_watermark(conn: &mut Conn, plan: &Plan, role: &str, to: Micros, run_id: i64) -> Result<(), DbError> {
    let sql = sql::statement(conn.backend(), "state", "watermark_set", &empty())?;
    conn.execute(
        "moving the watermark",
        &sql,
        &[
            Param::Text(plan.name.clone()),
            Param::Text(role.into()),
            Param::Ts(to),
            Param::I64(run_id),
            Param::Ts(Micros::from_utc(chrono::Utc::now())),
        ],
    )
    .await?;
    Ok(())
}

/// The run that last set the row of `role`, if there is one.
pub async fn run_of(conn: &mut Conn, plan: &Plan, role: &str) -> Result<Option<i64>, DbError> {
    Ok(watermarks(conn, plan)
        .await?
        .into_iter()
        .find(|r| r.first().and_then(|v| v.as_deref()) == Some(role))
        .and_then(|r| r.get(2).cloned().flatten())
        .and_then(|v| v.parse().ok()))
}

/// Every watermark of the dimension: (role, watermark, run id, updated at).
pub async fn watermarks(conn: &mut Conn, plan: &Plan) -> Result<Vec<crate::db::TextRow>, DbError> {
    let sql = sql::statement(conn.backend(), "state", "watermarks", &empty())?;
    conn.query_text("reading watermarks", &sql, &[Param::Text(plan.name.clone())])
        .await
}

/// The counts and bounds of one load, as `dimlog_runs` and `run --json` show them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RunCounts {
    /// Rows read in the window.
    pub rows_read: i64,
    /// Rows left after dedupe.
    pub rows_after_dedupe: i64,
    /// Rows dropped by dedupe (older rows of a key in the load, and ties).
    pub duplicates_dropped: i64,
    /// New versions appended (late ones included).
    pub versions: i64,
    /// New versions earlier than their key's newest one.
    pub late_versions: i64,
    /// Corrections appended (same key and valid_from, new values).
    pub corrections: i64,
    /// Tombstones appended.
    pub tombstones: i64,
    /// Deleted keys the source holds live again with a stamp not later than their
    /// tombstone, reopened at the upper bound (included in `versions`).
    pub revived: i64,
    /// Source rows stamped after the upper bound: not read by this run (a wrong clock at
    /// the source shows here instead of going unnoticed).
    pub future_rows: i64,
}

/// Inserts the run's record (`running`) inside the run's transaction; returns run_id.
pub async fn start_run(
    conn: &mut Conn,
    plan: &Plan,
    kind: RunKind,
    role: &str,
    started: Micros,
) -> Result<i64, DbError> {
    let sql = sql::statement(conn.backend(), "state", "run_start", &empty())?;
    let id = conn
        .query_count(
            "recording the run",
            &sql,
            &[
                Param::Text(plan.name.clone()),
                Param::Text(kind.as_str().into()),
                Param::Text(role.into()),
                Param::Ts(started),
            ],
        )
        .await?;
    Ok(id)
}

/// The bounds a run record stores.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunBounds {
    /// Low side of the window read.
    pub low: Option<Micros>,
    /// The watermark after the run.
    pub high_watermark: Option<Micros>,
    /// The run's fixed upper bound.
    pub upper: Option<Micros>,
    /// The rows left after deduplication, once known: a run that fails or is
    /// interrupted after it records them.
    pub rows_after_dedupe: Option<i64>,
}

/// Completes the run's record inside its transaction.
pub async fn finish_run(
    conn: &mut Conn,
    run_id: i64,
    bounds: RunBounds,
    c: &RunCounts,
    finished: Micros,
) -> Result<(), DbError> {
    let sql = sql::statement(conn.backend(), "state", "run_finish", &empty())?;
    conn.execute(
        "completing the run record",
        &sql,
        &[
            Param::I64(run_id),
            Param::OptTs(bounds.low),
            Param::OptTs(bounds.high_watermark),
            Param::OptTs(bounds.upper),
            Param::I64(c.rows_read),
            Param::I64(c.rows_after_dedupe),
            Param::I64(c.duplicates_dropped),
            Param::I64(c.versions),
            Param::I64(c.late_versions),
            Param::I64(c.corrections),
            Param::I64(c.tombstones),
            Param::I64(c.revived),
            Param::I64(c.future_rows),
            Param::Text("succeeded".into()),
            Param::Ts(finished),
            Param::Null,
        ],
    )
    .await?;
    Ok(())
}

/// Records a failed run (status `failed`, or `interrupted` when something from outside
/// stopped it) in its own transaction, after the rollback; returns its run_id.
pub async fn record_failure(
    conn: &mut Conn,
    plan: &Plan,
    (kind, role): (RunKind, &str),
    bounds: RunBounds,
    started: Micros,
    rows_read: i64,
    (interrupted, error): (bool, &str),
) -> Result<i64, DbError> {
    let status = if interrupted { "interrupted" } else { "failed" };
    let sql = sql::statement(conn.backend(), "state", "run_failed", &empty())?;
    let id = conn
        .query_count(
            "recording the failed run",
            &sql,
            &[
                Param::Text(plan.name.clone()),
                Param::Text(kind.as_str().into()),
                Param::Text(role.into()),
                Param::OptTs(bounds.low),
                Param::OptTs(bounds.upper),
                Param::Ts(started),
                Param::Ts(Micros::from_utc(chrono::Utc::now())),
                Param::Text(error.into()),
                Param::Text(status.into()),
                Param::I64(rows_read),
                Param::I64(bounds.rows_after_dedupe.unwrap_or(0)),
                Param::I64(bounds.rows_after_dedupe.map_or(0, |after| rows_read - after)),
            ],
        )
        .await?;
    Ok(id)
}

/// One row of `dimlog_runs`, for `status` and JSON output.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord {
    /// Run id (the `load_id` of its log rows).
    pub run_id: i64,
    /// Dimension name.
    pub dimension: String,
    /// incremental / full-refresh / backfill.
    pub kind: String,
    /// Watermark role.
    pub role: Option<String>,
    /// Low side of the window.
    pub low_watermark: Option<String>,
    /// Watermark after the run.
    pub high_watermark: Option<String>,
    /// Fixed upper bound.
    pub upper_bound: Option<String>,
    /// Counts.
    #[serde(flatten)]
    pub counts: RunCounts,
    /// succeeded / failed / running / abandoned.
    pub status: String,
    /// Pipeline clock at start.
    pub started_at: Option<String>,
    /// Pipeline clock at the end.
    pub finished_at: Option<String>,
    /// The error of a failed run.
    pub error: Option<String>,
}

/// The latest `limit` runs of the dimension, newest first.
pub async fn recent_runs(conn: &mut Conn, plan: &Plan, limit: i64) -> Result<Vec<RunRecord>, DbError> {
    let sql = sql::statement(conn.backend(), "state", "runs_recent", &empty())?;
    let rows = conn
        .query_records(
            "reading run records",
            &sql,
            &[Param::Text(plan.name.clone()), Param::I64(limit)],
        )
        .await?;
    rows.into_iter()
        .map(|r| {
            Ok(RunRecord {
                run_id: r.int("run_id")?,
                dimension: r.text("dimension")?,
                kind: r.text("kind")?,
                role: r.opt_text("role")?,
                low_watermark: r.opt_text("low_watermark")?,
                high_watermark: r.opt_text("high_watermark")?,
                upper_bound: r.opt_text("upper_bound")?,
                counts: RunCounts {
                    rows_read: r.int("rows_read")?,
                    rows_after_dedupe: r.int("rows_after_dedupe")?,
                    duplicates_dropped: r.int("duplicates_dropped")?,
                    versions: r.int("versions")?,
                    late_versions: r.int("late_versions")?,
                    corrections: r.int("corrections")?,
                    tombstones: r.int("tombstones")?,
                    revived: r.int("revived")?,
                    future_rows: r.int("future_rows")?,
                },
                status: r.text("status")?,
                started_at: r.opt_text("started_at")?,
                finished_at: r.opt_text("finished_at")?,
                error: r.opt_text("error")?,
            })
        })
        .collect()
}
