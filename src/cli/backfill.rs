//! `dimlog backfill`.

use super::{failpoint_from_env, load_plan, parse_ts, GlobalArgs, Output};
use crate::backfill::{self, BackfillObserver, BackfillOptions, Chunk, ChunkOutcome, Selection};
use crate::pipeline::{Observer, Session};
use crate::Error;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicI64, Ordering};

/// Re-load history on purpose: read exactly [from, to) (no lookback), chunk by chunk,
/// through the same path as `run`; each chunk its own transaction and run record. Never
/// moves the incremental watermark. A rerun skips the chunks already committed.
#[derive(Debug, clap::Args)]
pub struct BackfillArgs {
    /// Inclusive start (RFC 3339).
    #[arg(long, value_name = "TS")]
    pub from: String,
    /// Exclusive end (RFC 3339): a row stamped exactly here is not read.
    #[arg(long, value_name = "TS")]
    pub to: String,
    /// Chunk length, e.g. 1d, 6h.
    #[arg(long, default_value = "1d")]
    pub chunk: String,
    /// Print the plan (one line per chunk with its state) and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Stop at the first failed chunk.
    #[arg(long)]
    pub fail_fast: bool,
    /// Rerun only the chunks whose last attempt failed.
    #[arg(long)]
    pub only_failed: bool,
    /// Exit 1 at once if another run of this dimension holds its lock.
    #[arg(long)]
    pub no_wait: bool,
}

struct Bars {
    bar: Option<ProgressBar>,
    versions: AtomicI64,
}

impl Observer for Bars {}

impl BackfillObserver for Bars {
    fn chunk_started(&self, index: usize, total: usize, chunk: &Chunk) {
        if let Some(b) = &self.bar {
            b.set_length(total as u64);
            b.set_message(format!("chunk {index}/{total} [{} .. {})", chunk.from, chunk.to));
        }
    }
    fn chunk_finished(&self, outcome: &ChunkOutcome) {
        if let Some(r) = &outcome.report {
            self.versions.fetch_add(r.counts.versions, Ordering::Relaxed);
        }
        if let Some(b) = &self.bar {
            b.set_position(outcome.index as u64);
            if let Some(e) = &outcome.error {
                b.println(super::output::escape(
                    &format!("chunk {} failed: {e}", outcome.index),
                    true,
                ));
            }
        }
    }
}

/// Runs `backfill`.
pub async fn run(global: &GlobalArgs, args: BackfillArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let from = parse_ts("--from", &args.from)?;
    let to = parse_ts("--to", &args.to)?;
    if to <= from {
        return Err(Error::Usage(format!("--to {to} must be after --from {from}")));
    }
    let chunk_micros =
        crate::config::parse_duration("--chunk", &args.chunk).map_err(|e| Error::Usage(e.to_string()))?;
    if chunk_micros <= 0 {
        return Err(Error::Usage("--chunk must be longer than zero".into()));
    }
    if let Some(warning) = many_chunks(to.0 - from.0, chunk_micros) {
        out.note("warning", &warning);
    }
    // A dry run only reads: where the engine has roles (PostgreSQL) it needs read rights
    // alone, like status.
    let mut session = if args.dry_run && plan.target.url.backend.dialect().has_roles() {
        Session::open_with(&plan, crate::db::Access::QueryOnly).await?
    } else {
        Session::open(&plan).await?
    };
    if args.dry_run {
        let chunks = backfill::plan_chunks(&mut session, &plan, from, to, chunk_micros).await;
        session.close().await;
        let chunks = chunks?;
        if out.json {
            let list: Vec<_> = chunks
                .iter()
                .map(|(c, s)| serde_json::json!({"from": c.from, "to": c.to, "state": s}))
                .collect();
            out.print_json(
                &serde_json::json!({"dimension": plan.name, "role": backfill::role(from, to), "chunks": list}),
            );
        } else {
            for (i, (c, s)) in chunks.iter().enumerate() {
                let state = match s {
                    backfill::ChunkState::Pending => "pending",
                    backfill::ChunkState::Committed => "committed (will be skipped)",
                    backfill::ChunkState::Failed => "failed (will be rerun)",
                };
                out.line(format!(
                    "chunk {}/{} [{} .. {}) {state}",
                    i + 1,
                    chunks.len(),
                    c.from,
                    c.to
                ));
            }
        }
        return Ok(0);
    }
    let bar = (!out.json && !out.quiet && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new(0);
        b.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} (eta {eta})").expect("valid template"));
        b
    });
    let observer = Bars {
        bar,
        versions: AtomicI64::new(0),
    };
    let opts = BackfillOptions {
        from,
        to,
        chunk_micros,
        selection: if args.only_failed {
            Selection::OnlyFailed
        } else {
            Selection::NotCommitted
        },
        fail_fast: args.fail_fast,
        wait: !args.no_wait,
        failpoint: failpoint_from_env(),
        interrupt: Some(global.interrupt.clone()),
    };
    let outcomes = backfill::run(&mut session, &plan, &opts, &observer).await;
    session.close().await;
    let outcomes = outcomes?;
    if let Some(b) = &observer.bar {
        b.finish_and_clear();
    }
    let failed = outcomes.iter().filter(|o| o.outcome == "failed").count();
    let not_loaded = backfill::not_loaded(&outcomes);
    if out.json {
        out.print_json(&serde_json::json!({
            "dimension": plan.name,
            "role": backfill::role(from, to),
            "chunks": outcomes,
            "failed": failed,
            "not_loaded": not_loaded,
        }));
    } else {
        for o in &outcomes {
            let detail = match (&o.report, &o.error) {
                (Some(r), _) => format!(
                    ": {} read, {} versions, {} corrections, {} tombstones{}",
                    r.counts.rows_read,
                    r.counts.versions,
                    r.counts.corrections,
                    r.counts.tombstones,
                    match r.unseen_deletes {
                        0 => String::new(),
                        1 => ", 1 delete of a key never seen".into(),
                        n => format!(", {n} deletes of a key never seen"),
                    }
                ),
                (_, Some(e)) => format!(": {e}"),
                _ => String::new(),
            };
            out.line(format!(
                "chunk {}/{} [{} .. {}) {}{detail}",
                o.index,
                outcomes.len(),
                o.chunk.from,
                o.chunk.to,
                o.outcome
            ));
        }
        // The way to load the rest is the same backfill again: --only-failed would leave
        // out the chunks that never ran.
        let pending = not_loaded - failed;
        if failed > 0 {
            super::output::eprint_text(&format!(
                "error: {failed} chunk(s) failed{}; fix the cause and rerun the same backfill: committed chunks are skipped{}",
                match pending {
                    0 => String::new(),
                    n => format!(" and {n} more of the range are not loaded"),
                },
                if pending == 0 {
                    " (--only-failed runs the failed ones alone)"
                } else {
                    ""
                }
            ));
        } else if pending > 0 {
            super::output::eprint_text(&format!(
                "error: {pending} chunk(s) of the range are not loaded (never run, so --only-failed does not select them): \
                 rerun the same backfill without --only-failed; committed chunks are skipped"
            ));
        }
    }
    Ok(if not_loaded > 0 { 1 } else { 0 })
}

/// Above this many chunks a backfill says so: each chunk is a run (a transaction, a
/// read of the source, a record), so a chunk size far too small for the range is more
/// likely a slip (`1s` for `1d`) than a wish.
const MANY_CHUNKS: i64 = 1_000;

/// The warning for a range cut into more than [`MANY_CHUNKS`] chunks, with a chunk size
/// that makes about a hundred.
fn many_chunks(range_micros: i64, chunk_micros: i64) -> Option<String> {
    let chunks = (range_micros + chunk_micros - 1) / chunk_micros;
    // (Past the library's limit the backfill is refused, saying so.)
    if chunks <= MANY_CHUNKS || chunks > crate::backfill::MAX_CHUNKS {
        return None;
    }
    const HOUR: i64 = 3_600_000_000;
    const DAY: i64 = 24 * HOUR;
    let wanted = range_micros / 100;
    let suggestion = if wanted >= DAY {
        format!("{}d", wanted / DAY)
    } else if wanted >= HOUR {
        format!("{}h", wanted / HOUR)
    } else {
        format!("{}m", (wanted / 60_000_000).max(1))
    };
    Some(format!(
        "--chunk cuts the range into {chunks} chunks, each a run of its own; --chunk {suggestion} makes about a hundred"
    ))
}

#[cfg(test)]
mod tests {
    use super::many_chunks;

    #[test]
    fn a_range_cut_into_more_than_a_thousand_chunks_is_warned_about() {
        const S: i64 = 1_000_000;
        let day = 86_400 * S;
        let w = many_chunks(day, S).expect("86,400 chunks");
        assert!(w.contains("86400 chunks") && w.contains("--chunk 14m"), "{w}");
        assert_eq!(many_chunks(day, 3_600 * S), None);
        assert_eq!(many_chunks(1_000 * S, S), None);
        assert!(many_chunks(1_001 * S, S).is_some());
        let w = many_chunks(3_650 * day, 3_600 * S).expect("87,600 chunks");
        assert!(w.contains("--chunk 36d"), "{w}");
        assert_eq!(many_chunks(30 * day, 1), None, "refused by the library instead");
    }
}
