//! Issue 8, on both backends: Type 1 columns (`[track] type1`), Type 6 twins
//! (`[track] current_columns`), and changes of the tracked column sets, which a run only
//! makes with `--accept-config-change` and without re-versioning history.

mod edges;
mod extreme_times;
mod kinds;
mod late;
mod session_settings;
mod tracked;
mod type1;
mod widening;

use dimlog::pipeline::{Quiet, Session};
use dimlog::verify::VerifyReport;

use crate::support::fixture::Fixture;

/// `verify` through the library (the invariants, plus the source when asked).
pub async fn verify(fx: &Fixture, against_source: bool) -> VerifyReport {
    let plan = fx.plan();
    let mut session = Session::open(&plan).await.expect("open a session");
    dimlog::verify::verify(&mut session, &plan, against_source, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("verify failed to run: {e}"))
}

/// Asserts that every check of `verify` passes, listing the failures otherwise.
pub async fn assert_verified(fx: &Fixture, against_source: bool) {
    let report = verify(fx, against_source).await;
    let failing: Vec<_> = report.checks.iter().filter(|c| c.count > 0).collect();
    assert!(report.ok && failing.is_empty(), "verify found: {failing:#?}");
}
