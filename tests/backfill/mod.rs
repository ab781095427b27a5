//! Backfill (issue 3), on SQLite and PostgreSQL: a backfill reads exactly `[from, to)`
//! chunk by chunk through the production path, never moves the incremental watermark,
//! skips the chunks it already committed, replays a landing table into the same dimension
//! as loading it in order, reports a failed chunk and can rerun it alone.

mod cli;
mod library;
mod reconnect;

use dimlog::backfill::{self, BackfillObserver, BackfillOptions, ChunkOutcome, Selection};
use dimlog::pipeline::{Observer, Session};

use crate::support::fixture::{ts, Fixture};

/// Ignores progress.
struct Silent;
impl Observer for Silent {}
impl BackfillObserver for Silent {}

/// `dimlog::backfill::run` over `[from, to)` with the given chunk length (e.g. `1d`), every
/// chunk not yet committed; panics if the backfill as a whole fails (a failed chunk does
/// not: it is an outcome).
async fn backfill(fx: &Fixture, from: &str, to: &str, chunk: &str) -> Vec<ChunkOutcome> {
    let plan = fx.plan();
    let mut session = Session::open(&plan).await.expect("open a session");
    let opts = BackfillOptions {
        from: ts(from),
        to: ts(to),
        chunk_micros: dimlog::config::parse_duration("--chunk", chunk).expect("a chunk length"),
        selection: Selection::NotCommitted,
        fail_fast: false,
        wait: true,
        failpoint: None,
        interrupt: None,
    };
    backfill::run(&mut session, &plan, &opts, &Silent)
        .await
        .unwrap_or_else(|e| panic!("the backfill failed: {e}"))
}

/// The outcome of each chunk, in order.
fn outcomes(chunks: &[ChunkOutcome]) -> Vec<&str> {
    chunks.iter().map(|c| c.outcome.as_str()).collect()
}
