//! Issue 9, on both backends: hard deletes by key reconciliation and its mass-delete
//! guard, a key that returns after its tombstone, and `verify` (with and without
//! `--against-source`) finding what an incremental load cannot see, with the command
//! that repairs each: `run --full-refresh` or `rebuild`.

mod flag_values;
mod reconcile;
mod revival;
mod same_instant;
mod verify;
mod verify_edits;

use std::collections::BTreeMap;

use crate::support::fixture::Fixture;

/// Lossy UTF-8.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `dimlog verify --json [--against-source]` through the binary: the exit code and, per
/// failing check, its examples ("key: detail").
pub fn verify_cli(fx: &Fixture, against_source: bool) -> (i32, BTreeMap<String, Vec<String>>) {
    let mut args = vec!["verify", "--json"];
    if against_source {
        args.push("--against-source");
    }
    let out = fx.cli(&args);
    let stdout = text(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no JSON ({e}):\n{stdout}\nstderr:\n{}",
            text(&out.stderr)
        )
    });
    let failing = report["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks in {report}"))
        .iter()
        .filter(|c| c["count"].as_u64() != Some(0))
        .map(|c| {
            let examples = c["examples"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| e.as_str().unwrap_or_default().to_string())
                .collect();
            (c["name"].as_str().unwrap_or_default().to_string(), examples)
        })
        .collect();
    (out.status.code().expect("an exit code"), failing)
}

/// Asserts that `verify` exits 0 with every check passing.
pub fn assert_verify_passes(fx: &Fixture, against_source: bool) {
    let (code, failing) = verify_cli(fx, against_source);
    assert!(
        code == 0 && failing.is_empty(),
        "verify (against_source = {against_source}) exited {code}: {failing:#?}"
    );
}
