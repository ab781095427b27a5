//! `dimlog rebuild`.

use super::{load_plan, GlobalArgs, Output};
use crate::db::Access;
use crate::pipeline::{self, Session};
use crate::Error;

/// Rebuild the whole dimension from the version log in place, in one transaction: only
/// the rows that differ are written (readers see the old rows until then), and what was
/// added to the table (grants, indexes, comments, views, foreign keys, columns) stays.
/// Needs only the target.
#[derive(Debug, clap::Args)]
pub struct RebuildArgs {
    /// Exit 1 at once if a run of this dimension holds its lock.
    #[arg(long)]
    pub no_wait: bool,
}

/// Runs `rebuild`.
pub async fn run(global: &GlobalArgs, args: RebuildArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let mut session = Session::open_target(&plan, Access::ReadWrite).await?;
    let started = std::time::Instant::now();
    let progress = out.progress();
    crate::pipeline::Observer::phase(&progress, "rebuilding the dimension");
    let wait = !args.no_wait;
    let rebuilt = session
        .interruptible(
            &plan,
            Some(&global.interrupt),
            async |s: &mut crate::pipeline::Session| pipeline::rebuild_all(s, &plan, wait).await,
        )
        .await;
    session.close().await;
    if rebuilt.is_err() {
        crate::pipeline::Observer::stopped(&progress);
    }
    drop(progress);
    rebuilt?;
    let seconds = started.elapsed().as_secs_f64();
    if out.json {
        out.print_json(&serde_json::json!({"dimension": plan.name, "rebuilt": true, "seconds": seconds}));
    } else {
        out.line(format!(
            "rebuilt {} from {} in {seconds:.2}s",
            plan.target.dimension, plan.target.log
        ));
    }
    Ok(0)
}
