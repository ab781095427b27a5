//! `dimlog verify`.

use super::{load_plan, GlobalArgs, Output};
use crate::pipeline::Session;
use crate::Error;

/// Check the dimension's invariants against the log (exit 3 on a discrepancy); with
/// --against-source, also compare the source's current rows with the dimension's.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Also compare the source's current rows with the dimension's current rows.
    #[arg(long)]
    pub against_source: bool,
}

/// Runs `verify`.
pub async fn run(global: &GlobalArgs, args: VerifyArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let mut session = Session::open(&plan).await?;
    let progress = out.progress();
    let report = crate::verify::verify(&mut session, &plan, args.against_source, &progress).await?;
    drop(progress);
    if out.json {
        out.print_json(&report);
    } else {
        for c in &report.checks {
            if c.count == 0 {
                out.line(format!("ok    {}", c.description));
            } else {
                out.line(format!("FAIL  {}: {} found", c.description, c.count));
                for e in &c.examples {
                    out.line(format!("        {e}"));
                }
                out.line(format!("      fix: {}", c.hint));
            }
        }
    }
    Ok(if report.ok { 0 } else { 3 })
}
