//! `dimlog verify`.

use super::{load_plan, GlobalArgs, Output};
use crate::db::Access;
use crate::pipeline::Session;
use crate::Error;

/// Check the dimension's invariants against the log (exit 3 on a discrepancy); with
/// --against-source, also compare the source's current rows with the dimension's.
/// Without it, verify reads the target only, with read rights alone, and never connects
/// to the source.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Also compare the source's current rows with the dimension's current rows.
    #[arg(long)]
    pub against_source: bool,
}

/// Runs `verify`.
pub async fn run(global: &GlobalArgs, args: VerifyArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let mut session = if args.against_source {
        Session::open_to_compare(&plan, Access::ReadWrite).await?
    } else {
        Session::open_target(&plan, Access::QueryOnly).await?
    };
    let progress = out.progress();
    let report = crate::verify::verify(&mut session, &plan, args.against_source, &progress).await;
    session.close().await;
    let report = report?;
    drop(progress);
    if out.json {
        out.print_json(&report);
    } else if out.quiet {
        // Quiet: only what failed, on stderr, as an error would be.
        for c in report.checks.iter().filter(|c| c.fault && c.count > 0) {
            let mut text = format!("FAIL  {}: {} found", c.description, c.count);
            for e in &c.examples {
                text.push_str(&format!("\n        {e}"));
            }
            text.push_str(&format!("\n      fix: {}", c.hint));
            super::output::eprint_text(&super::output::escape(&text, true));
        }
    } else {
        for c in &report.checks {
            if c.count == 0 {
                out.line(format!("ok    {}", c.description));
            } else {
                let (label, then) = if c.fault { ("FAIL", "fix") } else { ("note", "so") };
                out.line(format!("{label}  {}: {} found", c.description, c.count));
                for e in &c.examples {
                    out.line(format!("        {e}"));
                }
                out.line(format!("      {then}: {}", c.hint));
            }
        }
    }
    Ok(if report.ok { 0 } else { 3 })
}
