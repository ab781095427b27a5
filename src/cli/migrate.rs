//! `dimlog migrate`.

use super::{load_plan, GlobalArgs, Output};
use crate::pipeline::{self, Session};
use crate::Error;

/// Take a retyped source column's new type into the log and the dimension's record, in
/// one transaction (the migration a run's refusal prints); then `dimlog rebuild` and
/// `dimlog run --full-refresh`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// The source column whose type changed.
    #[arg(long, value_name = "COLUMN")]
    pub column: String,
    /// Exit 1 at once if another run of this dimension holds its lock.
    #[arg(long)]
    pub no_wait: bool,
}

/// Runs `migrate`.
pub async fn run(global: &GlobalArgs, args: MigrateArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let mut session = Session::open(&plan).await?;
    let wait = !args.no_wait;
    let migrated = session
        .interruptible(&plan, Some(&global.interrupt), async |s: &mut Session| {
            pipeline::migrate_column(s, &plan, &args.column, wait).await
        })
        .await;
    session.close().await;
    let m = migrated?;
    if out.json {
        out.print_json(&m);
    } else {
        out.line(format!(
            "column {} migrated from {} to {}{}; next: `dimlog rebuild`, then `dimlog run --full-refresh` \
             (a current version whose hash changes gets a correction: same surrogate key, no new version)",
            m.column,
            m.from,
            m.to,
            if m.log_altered {
                format!(" (the log {} altered, the type recorded)", plan.target.log)
            } else {
                " (recorded; this engine keeps the log's column as it is)".to_string()
            }
        ));
    }
    Ok(0)
}
