//! `dimlog verify`.

use super::{load_plan, GlobalArgs, Output};
use crate::db::Access;
use crate::pipeline::Session;
use crate::verify::Fix;
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
        Session::open_target_to_verify(&plan).await?
    };
    let progress = out.progress();
    let against_source = args.against_source;
    let report = session
        .interruptible(&plan, Some(&global.interrupt), async |s: &mut Session| {
            crate::verify::verify(s, &plan, against_source, &progress).await
        })
        .await;
    session.close().await;
    if report.is_err() {
        crate::pipeline::Observer::stopped(&progress);
    }
    drop(progress);
    let report = report?;
    if out.json {
        // The library classifies each check's fix; the hint says it in commands.
        let mut json = serde_json::to_value(&report).expect("a report serializes");
        if let Some(checks) = json["checks"].as_array_mut() {
            for (value, check) in checks.iter_mut().zip(&report.checks) {
                value["hint"] = hint(check.fix).into();
            }
        }
        out.print_json(&json);
    } else if out.quiet {
        // Quiet: only what failed, on stderr, as an error would be.
        for c in report.checks.iter().filter(|c| c.fault && c.count > 0) {
            let mut text = format!("FAIL  {}: {} found", c.description, c.count);
            for e in &c.examples {
                text.push_str(&format!("\n        {e}"));
            }
            text.push_str(&format!("\n      fix: {}", hint(c.fix)));
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
                out.line(format!("      {then}: {}", hint(c.fix)));
            }
        }
    }
    Ok(if report.ok { 0 } else { 3 })
}

/// What to do about a check's findings, in dimlog's commands.
pub(crate) fn hint(fix: Fix) -> &'static str {
    match fix {
        Fix::Rebuild => "run `dimlog rebuild`",
        Fix::RestoreLog => "the log was edited by hand; restore it from a backup",
        Fix::RestoreLogThenRebuild => {
            "the log is broken too (see above): restore it from a backup first, then run `dimlog rebuild`"
        }
        Fix::RebuildOrReassignFacts => {
            "facts that hold these surrogate keys join to nothing. If `rebuild_diff` names them too, \
             run `dimlog rebuild`. If a tombstone replaced the version (a log written before dimlog moved a delete at a \
             version's own time 1 µs after it), rerun `dimlog assign-keys` on every fact table that may hold them, so their \
             facts get the surrogate key in effect (or -1)"
        }
        Fix::NextRun => {
            "nothing to repair: the next `dimlog run` reads rows stamped before the source's clock; a row stamped later than the source's clock is read once the clock reaches it, so if that time is wrong, correct the row's updated_at or the clock at the source"
        }
        Fix::ReadAgain => "a late commit or a missed window: rerun with a longer source.lookback, or `dimlog run --full-refresh`",
        Fix::ReconcileDeletes => {
            "hard deletes: `dimlog run --reconcile-deletes` (or deletes.hard = \"reconcile\"); a row flagged deleted without moving its updated_at: move updated_at at the source, then `dimlog run`"
        }
        Fix::FullRefresh => {
            "a row stamped inside the next run's window (after the watermark minus source.lookback: committed after the last run read it) is loaded by the next `dimlog run`; an older one is a change that did not move updated_at: `dimlog run --full-refresh` (history = \"latest\"; set the updated_at of any `source_behind` key right first, or the full refresh logs its row as a late version); on a change feed (history = \"all\") an earlier row stays a late version, so correct its updated_at at the source"
        }
        Fix::FixAtSource => {
            "the source row's updated_at moved backwards: the dimension keeps the newer version current and holds the row as a late version (a full refresh loads it as one if it was never read), so no run changes this; set updated_at at the source to when the row really changed"
        }
    }
}
