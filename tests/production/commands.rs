//! Issue 20, item 12: `status` lists the newest runs first (by number, not as text).

use super::{loaded, text};
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(status_lists_the_newest_runs_first);

/// Twelve runs: `status --runs 3` shows 12, 11 and 10.
async fn status_lists_the_newest_runs_first(mut fx: Fixture) {
    loaded(&mut fx).await;
    for _ in 0..10 {
        fx.target_exec(
            "INSERT INTO dimlog_runs (dimension, kind, role, status, started_at)
             VALUES ('customer', 'incremental', 'incremental', 'failed', '2026-03-02T12:00:00.000000Z')",
        )
        .await;
    }
    let out = fx.cli(&["status", "--json", "--runs", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let ids: Vec<i64> = v["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("no runs in {v}"))
        .iter()
        .map(|r| r["run_id"].as_i64().expect("a run id"))
        .collect();
    assert_eq!(ids, [12, 11, 10]);
}
