//! `dimlog distribute`.

use super::{load_plan, GlobalArgs, Output};
use crate::db::Access;
use crate::pipeline::{self, Session};
use crate::Error;

/// Turn the log and the dimension, local tables on a Citus coordinator (loaded before
/// Citus was there), into distributed tables colocated by the key, as a first run on
/// Citus makes them: their rows move to the shards, in one transaction, under the
/// dimension's lock (a key of several columns by its hash, which both tables get).
/// Refused, changing nothing, for foreign keys to or from the tables, or unique indexes
/// without the key. Needs only the target, and the rights to alter its tables.
#[derive(Debug, clap::Args)]
pub struct DistributeArgs {
    /// Exit 1 at once if a run of this dimension holds its lock.
    #[arg(long)]
    pub no_wait: bool,
}

/// Runs `distribute`.
pub async fn run(global: &GlobalArgs, args: DistributeArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let mut session = Session::open_target(&plan, Access::ReadWrite).await?;
    let started = std::time::Instant::now();
    let wait = !args.no_wait;
    let done = session
        .interruptible(
            &plan,
            Some(&global.interrupt),
            async |s: &mut crate::pipeline::Session| pipeline::distribute(s, &plan, wait).await,
        )
        .await;
    session.close().await;
    let done = done?;
    let seconds = started.elapsed().as_secs_f64();
    if out.json {
        out.print_json(&serde_json::json!({
            "dimension": plan.name,
            "converted": done.converted,
            "distribution_column": done.column,
            "shards": done.shards,
            "seconds": seconds,
        }));
    } else if done.converted {
        out.line(format!(
            "distributed {} and {} by {} across {} shards each, colocated, in {seconds:.2}s",
            plan.target.log, plan.target.dimension, done.column, done.shards
        ));
    } else {
        out.line(format!(
            "{} and {} are distributed already (by {}, {} shards each); nothing to do",
            plan.target.log, plan.target.dimension, done.column, done.shards
        ));
    }
    Ok(0)
}
