//! Backfill: re-run history on purpose, chunk by chunk, through the production path.
//!
//! Each chunk is a half-open window `[from, to)` loaded by exactly the same
//! extract → dedupe → detect → append → rebuild path as `dimlog run`, in its own
//! transaction with its own run record (kind `backfill`). The backfill has its own
//! watermark role, `backfill:<from>/<to>`, and never reads or writes the `incremental`
//! row, so it can neither drag the nightly run back nor push it past rows it has not
//! seen. Run records say which chunks committed, so a rerun skips them.

use crate::config::Plan;
use crate::db::{sql, Conn, DbError, Param};
use crate::extract::Window;
use crate::pipeline::{self, Observer, RunOptions, RunReport, Session};
use crate::state::RunKind;
use crate::ts::Micros;
use crate::Error;
use serde::Serialize;

/// One chunk of a backfill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Chunk {
    /// Inclusive start.
    pub from: Micros,
    /// Exclusive end.
    pub to: Micros,
}

/// Where a chunk stands according to the run records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkState {
    /// Never run.
    Pending,
    /// Committed.
    Committed,
    /// Last attempt failed.
    Failed,
}

/// Chunks of the range that are not loaded once a backfill is done: failed here, not run
/// (after a failure with `fail_fast`), or not selected and never committed (with
/// [`Selection::OnlyFailed`], chunks that never ran). Zero when the whole range is in.
pub fn not_loaded(outcomes: &[ChunkOutcome]) -> usize {
    outcomes
        .iter()
        .filter(|o| !matches!(o.outcome.as_str(), "committed" | "skipped (committed earlier)"))
        .count()
}

/// The watermark role of a backfill.
pub fn role(from: Micros, to: Micros) -> String {
    format!("backfill:{}/{}", from.to_text(), to.to_text())
}

/// A backfill's range or chunk size that cannot make chunks (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackfillError {
    /// The range ends where or before it starts.
    #[error("the range to backfill is empty: its end {to} is not after its start {from}")]
    EmptyRange {
        /// Its start.
        from: Micros,
        /// Its end.
        to: Micros,
    },
    /// A chunk of no length.
    #[error("a backfill's chunks must be longer than zero")]
    NoChunkLength,
    /// More chunks than [`MAX_CHUNKS`].
    #[error(
        "chunks of {} cut the range [{from}, {to}) into {count} chunks, more than {MAX_CHUNKS} (each is a run of its own); \
         choose chunks of at least {}",
        humantime::format_duration(std::time::Duration::from_micros(*chunk_micros as u64)),
        humantime::format_duration(std::time::Duration::from_secs(*at_least_secs))
    )]
    TooManyChunks {
        /// The range's start.
        from: Micros,
        /// The range's end.
        to: Micros,
        /// The chunk size asked for.
        chunk_micros: i64,
        /// The chunks it would make.
        count: i64,
        /// The smallest chunk, in whole seconds, that stays within the limit.
        at_least_secs: u64,
    },
}

/// The most chunks one backfill may have.
pub const MAX_CHUNKS: i64 = 100_000;

/// Splits `[from, to)` into chunks of `chunk_micros` (the last may be shorter); refuses
/// more than [`MAX_CHUNKS`].
pub fn chunks(from: Micros, to: Micros, chunk_micros: i64) -> Result<Vec<Chunk>, BackfillError> {
    if to <= from {
        return Err(BackfillError::EmptyRange { from, to });
    }
    if chunk_micros <= 0 {
        return Err(BackfillError::NoChunkLength);
    }
    // Each chunk is a run with its own record: a chunk size far too small for the range
    // (a microsecond for a month: 2.6 trillion chunks) is refused before any is made.
    let range = (to.0 - from.0) as u64;
    let count = range.div_ceil(chunk_micros as u64) as i64;
    if count > MAX_CHUNKS {
        return Err(BackfillError::TooManyChunks {
            from,
            to,
            chunk_micros,
            count,
            at_least_secs: range.div_ceil(MAX_CHUNKS as u64).div_ceil(1_000_000),
        });
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut start = from;
    while start < to {
        let end = start.plus(chunk_micros).min(to);
        out.push(Chunk { from: start, to: end });
        start = end;
    }
    Ok(out)
}

/// Reads the state of every chunk from the run records of the backfill's role.
pub async fn chunk_states(
    conn: &mut Conn,
    plan: &Plan,
    role: &str,
    chunks: &[Chunk],
) -> Result<Vec<ChunkState>, DbError> {
    let sql = sql::statement(conn.backend(), "state", "backfill_chunks", &serde_json::json!({}))?;
    let rows = conn
        .query_text(
            "reading backfill run records",
            &sql,
            &[Param::Text(plan.name.clone()), Param::Text(role.into())],
        )
        .await?;
    let mut states = vec![ChunkState::Pending; chunks.len()];
    for r in rows {
        let low = r[0].as_deref().and_then(|t| Micros::parse(t, None).ok());
        let high = r[1].as_deref().and_then(|t| Micros::parse(t, None).ok());
        let Some(i) = chunks.iter().position(|c| Some(c.from) == low && Some(c.to) == high) else {
            continue;
        };
        match r[2].as_deref() {
            Some("succeeded") => states[i] = ChunkState::Committed,
            // An interrupted chunk rolled back, as a failed one did: `--only-failed` reruns it.
            Some("failed" | "interrupted") if states[i] != ChunkState::Committed => states[i] = ChunkState::Failed,
            _ => {}
        }
    }
    Ok(states)
}

/// Which chunks to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Every chunk not yet committed.
    NotCommitted,
    /// Only chunks whose last attempt failed.
    OnlyFailed,
}

/// The outcome of one chunk in this invocation.
#[derive(Clone, Debug, Serialize)]
pub struct ChunkOutcome {
    /// Which chunk.
    pub chunk: Chunk,
    /// 1-based position.
    pub index: usize,
    /// committed earlier and skipped / run now and committed / failed / not selected.
    pub outcome: String,
    /// The run report of a committed chunk.
    pub report: Option<RunReport>,
    /// The error of a failed chunk.
    pub error: Option<String>,
}

/// Progress of a backfill, per chunk.
pub trait BackfillObserver: Observer {
    /// Chunk `index` of `total` starts.
    fn chunk_started(&self, _index: usize, _total: usize, _chunk: &Chunk) {}
    /// Chunk `index` finished.
    fn chunk_finished(&self, _outcome: &ChunkOutcome) {}
}

/// Options of one backfill invocation.
#[derive(Clone, Debug)]
pub struct BackfillOptions {
    /// Inclusive start.
    pub from: Micros,
    /// Exclusive end.
    pub to: Micros,
    /// Chunk length, µs.
    pub chunk_micros: i64,
    /// Which chunks to run.
    pub selection: Selection,
    /// Stop at the first failed chunk.
    pub fail_fast: bool,
    /// Wait for the dimension's lock.
    pub wait: bool,
    #[doc(hidden)]
    /// Failpoint for tests.
    pub failpoint: Option<String>,
    /// Stops the backfill when fired: the chunk in progress rolls back (recorded as
    /// interrupted), the ones before it stay committed, none after it runs.
    pub interrupt: Option<crate::interrupt::Interrupt>,
}

/// Refuses a backfill that ends after the source's clock
/// ([`crate::extract::WindowError::BackfillAfterSourceClock`]), before anything is read.
async fn check_end(session: &mut Session, plan: &Plan, to: Micros) -> Result<(), Error> {
    let Some(source) = session.source.as_mut() else {
        return Ok(());
    };
    let clock = crate::extract::source_now(source, plan, &session.layout).await?;
    crate::extract::check_backfill_end(to, clock).map_err(crate::extract::ExtractError::from)?;
    Ok(())
}

/// Runs the selected chunks in order, each in its own transaction; a failed chunk is
/// reported and the others still run (unless `fail_fast`).
pub async fn run(
    session: &mut Session,
    plan: &Plan,
    opts: &BackfillOptions,
    observer: &dyn BackfillObserver,
) -> Result<Vec<ChunkOutcome>, Error> {
    let all = chunks(opts.from, opts.to, opts.chunk_micros)?;
    check_end(session, plan, opts.to).await?;
    let role = role(opts.from, opts.to);
    session.check_zone(plan).await?;
    session.create_target(plan).await?;
    // Under the dimension's lock, as each chunk is: with --no-wait a held lock refuses the
    // backfill here instead of waiting (on SQLite init's transaction is the lock).
    session
        .under_lock(plan, opts.wait, async |session: &mut Session| {
            crate::tables::init(&mut session.target, plan, &session.layout)
                .await
                .map_err(|e| pipeline::init_failed(e, plan))
        })
        .await?;
    let states = chunk_states(&mut session.target, plan, &role, &all).await?;
    let mut outcomes = Vec::new();
    let mut stop = false;
    for (i, (chunk, state)) in all.iter().zip(&states).enumerate() {
        let selected = match opts.selection {
            Selection::NotCommitted => *state != ChunkState::Committed,
            Selection::OnlyFailed => *state == ChunkState::Failed,
        };
        let mut outcome = ChunkOutcome {
            chunk: *chunk,
            index: i + 1,
            outcome: String::new(),
            report: None,
            error: None,
        };
        if !selected || stop {
            outcome.outcome = match state {
                ChunkState::Committed => "skipped (committed earlier)".into(),
                _ if stop => "not run (stopped after a failure)".into(),
                _ => "not selected".into(),
            };
            observer.chunk_finished(&outcome);
            outcomes.push(outcome);
            continue;
        }
        observer.chunk_started(i + 1, all.len(), chunk);
        // A connection lost in an earlier chunk fails that chunk alone.
        if let Err(e) = session.reconnect_lost(plan).await {
            outcome.outcome = "failed".into();
            outcome.error = Some(e.to_string());
            stop = opts.fail_fast;
            observer.chunk_finished(&outcome);
            outcomes.push(outcome);
            continue;
        }
        let run_opts = RunOptions {
            kind: RunKind::Backfill,
            role: role.clone(),
            window: Some(Window {
                low: Some(chunk.from),
                high: chunk.to,
                high_inclusive: false,
            }),
            wait: opts.wait,
            failpoint: opts.failpoint.clone(),
            interrupt: opts.interrupt.clone(),
            ..RunOptions::incremental()
        };
        match pipeline::run(session, plan, &run_opts, observer).await {
            Ok(report) => {
                outcome.outcome = "committed".into();
                outcome.report = Some(report);
            }
            // A config refused (exit 2) is refused for every chunk alike: said once, and
            // the backfill ends there (nothing of this chunk was written).
            Err(e @ Error::Config(_)) => return Err(e),
            Err(Error::Interrupted { .. }) => {
                let committed = outcomes
                    .iter()
                    .filter(|o: &&ChunkOutcome| o.outcome == "committed")
                    .count();
                return Err(Error::Interrupted { committed });
            }
            Err(e) => {
                outcome.outcome = "failed".into();
                outcome.error = Some(e.to_string());
                stop = opts.fail_fast;
            }
        }
        observer.chunk_finished(&outcome);
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The plan of a backfill: every chunk and its state (for `--dry-run`).
pub async fn plan_chunks(
    session: &mut Session,
    plan: &Plan,
    from: Micros,
    to: Micros,
    chunk_micros: i64,
) -> Result<Vec<(Chunk, ChunkState)>, Error> {
    let all = chunks(from, to, chunk_micros)?;
    check_end(session, plan, to).await?;
    let role = role(from, to);
    let states = match crate::tables::read_record(&mut session.target, plan).await {
        Ok(Some(_)) => chunk_states(&mut session.target, plan, &role, &all).await?,
        _ => vec![ChunkState::Pending; all.len()],
    };
    Ok(all.into_iter().zip(states).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk size far too small for the range is refused before any chunk is made
    /// (a microsecond for a month ran a machine out of memory).
    #[test]
    fn too_many_chunks_are_refused_before_any_is_made() {
        let from = Micros(0);
        let month = Micros(30 * 86_400_000_000);
        let e = chunks(from, month, 1).expect_err("2.6e12 chunks");
        assert!(
            e.to_string().contains("more than 100000") && e.to_string().contains("at least 26s"),
            "{e}"
        );
        assert_eq!(
            chunks(from, Micros(MAX_CHUNKS), 1).expect("at the limit").len(),
            MAX_CHUNKS as usize
        );
        assert!(chunks(from, Micros(MAX_CHUNKS + 1), 1).is_err());
    }

    #[test]
    fn chunks_are_half_open_and_cover_the_range() {
        let from = Micros::parse("2026-01-01T00:00:00Z", None).unwrap();
        let to = Micros::parse("2026-01-03T12:00:00Z", None).unwrap();
        let day = 86_400_000_000;
        let c = chunks(from, to, day).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].from, from);
        assert_eq!(c[0].to, c[1].from);
        assert_eq!(c[2].to, to);
        assert!(chunks(to, from, day).is_err());
    }
}
