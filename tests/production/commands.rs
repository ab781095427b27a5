//! Issue 20, items 12 and 8: `status` lists the newest runs first (by number, not as
//! text), and no command runs DDL on dimlog's shared tables outside `init`'s first time
//! and migrations, so a command never waits for a run of another dimension that holds
//! `dimlog_runs`.

use std::time::Duration;

use super::{cli_exits, loaded, text};
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

/// While another transaction has written to `dimlog_runs` (a run of another dimension
/// in progress), `run --no-wait`, `status` and `verify` of this dimension finish at once.
#[tokio::test]
async fn commands_do_not_wait_for_a_run_of_another_dimension() {
    let mut fx = Fixture::postgres().await;
    loaded(&mut fx).await;
    let mut other = dimlog::db::Conn::connect(&fx.plan().target.url).await.expect("connect");
    other
        .execute_script(
            "other run",
            "BEGIN; INSERT INTO dimlog_runs (dimension, kind, role, status, started_at)
             VALUES ('other', 'incremental', 'incremental', 'running', now())",
        )
        .await
        .expect("hold dimlog_runs");
    let mut waited = Vec::new();
    for args in [
        vec!["run", "--no-wait", "--upper", "2026-03-02T12:00:00Z"],
        vec!["status"],
        vec!["verify"],
        vec!["init"],
    ] {
        let config = fx.config_path();
        let dir = fx.dir().to_path_buf();
        let argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut child = Box::pin(tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_dimlog"))
                .arg("--config")
                .arg(config)
                .args(&argv)
                .current_dir(dir)
                .env_remove("DIMLOG_TARGET_URL")
                .env_remove("DIMLOG_SOURCE_URL")
                .output()
                .expect("run dimlog")
        }));
        match tokio::time::timeout(Duration::from_secs(20), &mut child).await {
            Ok(out) => {
                let out = out.expect("join");
                assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
            }
            Err(_) => {
                waited.push(args.join(" "));
                other.execute_script("other run", "ROLLBACK").await.expect("rollback");
                child.await.expect("join");
                break;
            }
        }
    }
    let _ = other.execute_script("other run", "ROLLBACK").await;
    assert!(waited.is_empty(), "waited for another dimension's run: {waited:?}");
}

/// `rebuild --no-wait` while another session holds a lock on the dimension that
/// conflicts with writing it (`LOCK TABLE … IN SHARE MODE`) exits 1 at once, naming the
/// session, instead of waiting.
#[tokio::test]
async fn rebuild_no_wait_does_not_wait_for_a_table_lock() {
    let mut fx = Fixture::postgres().await;
    loaded(&mut fx).await;
    let mut other = dimlog::db::Conn::connect(&fx.plan().target.url).await.expect("connect");
    other
        .execute_script("reader", "BEGIN; LOCK TABLE dim_customer IN SHARE MODE")
        .await
        .expect("lock the dimension");
    let config = fx.config_path();
    let dir = fx.dir().to_path_buf();
    let child = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_dimlog"))
            .arg("--config")
            .arg(config)
            .args(["rebuild", "--no-wait"])
            .current_dir(dir)
            .env_remove("DIMLOG_TARGET_URL")
            .env_remove("DIMLOG_SOURCE_URL")
            .output()
            .expect("run dimlog")
    });
    let out = match tokio::time::timeout(Duration::from_secs(15), child).await {
        Ok(out) => out.expect("join"),
        Err(_) => {
            other.execute_script("reader", "ROLLBACK").await.expect("rollback");
            panic!("rebuild --no-wait waited for the table lock");
        }
    };
    other.execute_script("reader", "ROLLBACK").await.expect("rollback");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ShareLock on dim_customer") && stderr.contains("session"),
        "{stderr}"
    );
    cli_exits(&fx, &["rebuild", "--no-wait"], 0);
}
