//! `dimlog doctor`.

use super::{load_plan, GlobalArgs, Output};
use crate::doctor::{Check, DoctorReport, Outcome};
use crate::Error;

/// Check the setup without writing anything: the config, the source (table, columns,
/// time zones), the target and the rights each command needs, the clocks, the columns
/// the dimension was built with, and whether a run holds the lock. One line per check;
/// exits 1 when one fails.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {}

/// Runs `doctor`.
pub async fn run(global: &GlobalArgs, _args: DoctorArgs, out: &Output) -> Result<i32, Error> {
    let mut code = 1;
    let report = match load_plan(global) {
        Ok(plan) => {
            let mut report = crate::doctor::doctor(&plan).await;
            report.checks.insert(
                0,
                Check {
                    name: "config",
                    outcome: Outcome::Ok,
                    detail: format!("{} parses", global.config.display()),
                    error: None,
                    fix: None,
                },
            );
            report
        }
        Err(e) => {
            // A config that does not parse exits as every command's does (2).
            code = e.exit_code();
            DoctorReport {
                dimension: String::new(),
                ok: false,
                checks: vec![Check {
                    name: "config",
                    outcome: Outcome::Fail,
                    detail: e.to_string(),
                    error: Some(std::sync::Arc::new(e)),
                    fix: None,
                }],
            }
        }
    };
    // What to do about a failure, in commands (the library only classifies it).
    let hints: Vec<Option<String>> = report
        .checks
        .iter()
        .map(|c| match c.fix {
            Some(fix) => Some(super::verify::hint(fix).to_string()),
            None => c.error.as_deref().and_then(super::error::hint),
        })
        .collect();
    if out.json {
        let mut value = serde_json::to_value(&report).expect("a report serialises");
        if let Some(checks) = value["checks"].as_array_mut() {
            // Every check has the key, null where there is no command to give (a failed
            // check's own detail then says what to do).
            for (check, hint) in checks.iter_mut().zip(&hints) {
                check["hint"] = hint.clone().into();
            }
        }
        out.print_json(&value);
    } else {
        for (i, c) in report.checks.iter().enumerate() {
            let label = match c.outcome {
                Outcome::Ok => "ok  ",
                Outcome::Note => "note",
                Outcome::Fail => "FAIL",
                Outcome::Skipped => "skip",
            };
            let mut text = format!("{label}  {}: {}", c.name, c.detail);
            if let Some(Some(hint)) = hints.get(i) {
                text.push_str(&format!("\n      hint: {hint}"));
            }
            if out.quiet {
                // With -q, only the failures, on stderr as errors are.
                if c.outcome == Outcome::Fail {
                    super::output::eprint_text(&super::output::escape(&text, true));
                }
            } else {
                // One list, in order, on stdout (`doctor | less` shows the failures too).
                out.line(text);
            }
        }
    }
    Ok(if report.ok { 0 } else { code })
}
