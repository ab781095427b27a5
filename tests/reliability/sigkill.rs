//! A `dimlog run` process killed with SIGKILL after it appended to the log (spec 1.6): the
//! log, the dimension and the state are as before, and the next run (a new process) loads
//! everything and ends where an uninterrupted run ends.

use std::os::unix::process::ExitStatusExt as _;

use dimlog::config::Backend;

use super::cli;
use crate::support::fixture::{on_every_engine, Fixture};

on_every_engine!(a_killed_run_leaves_the_previous_state);

const UPPER: &str = "2026-03-02T10:00:00Z";

/// A loaded dimension, then changes of every kind for the next run.
async fn prepare(fx: &mut Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z'),
             (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:20:00Z')",
    )
    .await;
    fx.run("2026-03-02T09:30:00Z").await;
    fx.exec(
        "UPDATE src_customers SET tier = NULL, updated_at = '2026-03-02T09:40:00Z' WHERE customer_id = 1;
         UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T09:45:00Z' WHERE customer_id = 2;
         UPDATE src_customers SET country = 'BE' WHERE customer_id = 3;
         INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (4, 'dee@example.com', '', 'LU', '2026-03-02T09:50:00Z')",
    )
    .await;
}

/// Whether another session holds a lock on the log from an open transaction: the
/// killed run's append, on PostgreSQL.
async fn log_locked_by_another_session(fx: &mut Fixture) -> bool {
    let rows = fx
        .target_query(
            "SELECT count(*)::text FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
             WHERE c.relname = 'customer_versions' AND l.mode = 'RowExclusiveLock' AND l.granted \
             AND l.pid <> pg_backend_pid()",
        )
        .await;
    rows[0][0].as_deref() != Some("0")
}

async fn a_killed_run_leaves_the_previous_state(mut fx: Fixture) {
    prepare(&mut fx).await;
    let before = (fx.log().await, fx.dimension().await, fx.state().await);
    let runs_before = fx.runs().await.rows.len();

    let held = cli::hold(&fx.config_path(), &["run", "--upper", UPPER], "after_append").await;
    if fx.backend == Backend::Postgres {
        assert!(
            log_locked_by_another_session(&mut fx).await,
            "the run parked at after_append holds no lock on the log: it appended nothing"
        );
    }
    let status = held.kill();
    assert_eq!(status.signal(), Some(9), "{status}");

    assert_eq!(
        (fx.log().await, fx.dimension().await, fx.state().await),
        before,
        "a killed run changed the target"
    );
    // It could not say anything: at most a `running` record, never a succeeded one.
    let runs = fx.runs().await;
    let new: Vec<_> = runs.values("status").split_off(runs_before);
    assert!(
        new.iter().all(|s| s.as_deref() == Some("running")),
        "records of the killed run: {runs:?}"
    );

    // The next run, a new process, loads everything the killed one had read.
    let out = cli::run(&fx.config_path(), &["run", "--json", "--upper", UPPER]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");

    let mut twin = Fixture::on(fx.backend).await;
    prepare(&mut twin).await;
    let uninterrupted = twin.run(UPPER).await;
    let expected = serde_json::to_value(&uninterrupted).expect("json");
    for field in [
        "rows_read",
        "rows_after_dedupe",
        "duplicates_dropped",
        "versions",
        "late_versions",
        "corrections",
        "tombstones",
        "high_watermark",
        "low_watermark",
    ] {
        assert_eq!(report[field], expected[field], "{field}: {out:?}");
    }
    assert_eq!(
        (
            report["versions"].as_i64(),
            report["tombstones"].as_i64(),
            report["corrections"].as_i64()
        ),
        (Some(2), Some(1), Some(1))
    );
    assert_eq!(
        fx.log().await.redact("loaded_at").redact("load_id"),
        twin.log().await.redact("loaded_at").redact("load_id")
    );
    assert_eq!(
        fx.dimension().await.redact("load_id"),
        twin.dimension().await.redact("load_id")
    );
    assert_eq!(fx.watermark().await, twin.watermark().await);
    let statuses = fx.runs().await.values("status");
    assert!(
        !statuses.iter().any(|s| s.as_deref() == Some("running")),
        "a running record outlived the next run: {statuses:?}"
    );
}
