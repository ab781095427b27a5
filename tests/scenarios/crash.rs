//! Crash safety (spec 1.6): a run that dies at any failpoint before its commit leaves the
//! log, the dimension and the watermark exactly as they were, with only a `failed` run
//! record added, and its retry ends where an uninterrupted run ends.

use dimlog::failpoint::ALL;
use dimlog::pipeline::RunOptions;
use dimlog::state::RunCounts;

use crate::support::fixture::{on_every_engine, ts, Dump, Fixture};

on_every_engine!(
    a_failed_run_leaves_the_previous_state,
    a_crash_after_commit_is_committed
);

const UPPER: &str = "2026-03-02T10:00:00Z";

/// A loaded dimension, then source changes of every kind for the next run.
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
        "UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T09:40:00Z' WHERE customer_id = 1;
         UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T09:45:00Z' WHERE customer_id = 2;
         UPDATE src_customers SET country = 'BE' WHERE customer_id = 3;
         INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (4, 'dee@example.com', NULL, 'LU', '2026-03-02T09:50:00Z')",
    )
    .await;
}

/// Log and dimension without the columns that legitimately differ between an interrupted
/// and an uninterrupted history: wall-clock `loaded_at` and the run ids (a failed run uses
/// one).
async fn outcome(fx: &mut Fixture) -> (Dump, Dump, Option<String>) {
    (
        fx.log().await.redact("loaded_at").redact("load_id"),
        fx.dimension().await.redact("load_id"),
        fx.watermark().await,
    )
}

async fn uninterrupted(fx: &Fixture) -> ((Dump, Dump, Option<String>), RunCounts) {
    let mut twin = Fixture::on(fx.backend).await;
    prepare(&mut twin).await;
    let report = twin.run(UPPER).await;
    assert_eq!(
        (
            report.counts.versions,
            report.counts.tombstones,
            report.counts.corrections
        ),
        (2, 1, 1)
    );
    (outcome(&mut twin).await, report.counts)
}

fn with_failpoint(name: &str) -> RunOptions {
    RunOptions {
        upper: Some(ts(UPPER)),
        failpoint: Some(name.to_string()),
        ..RunOptions::incremental()
    }
}

async fn a_failed_run_leaves_the_previous_state(fx: Fixture) {
    let (expected, expected_counts) = uninterrupted(&fx).await;
    let backend = fx.backend;
    let mut first = Some(fx);
    for name in ALL.iter().copied().filter(|n| *n != "after_commit") {
        let mut fx = match first.take() {
            Some(fx) => fx,
            None => Fixture::on(backend).await,
        };
        prepare(&mut fx).await;
        let before = (fx.log().await, fx.dimension().await, fx.state().await);
        let runs_before = fx.runs().await;

        let err = fx
            .try_run_with(with_failpoint(name))
            .await
            .expect_err("the failpoint must fail the run");
        assert!(
            matches!(err, dimlog::Error::Failpoint(n) if n == name),
            "{name}: failed otherwise: {err}"
        );
        let after = (fx.log().await, fx.dimension().await, fx.state().await);
        assert_eq!(
            after, before,
            "{name}: the failed run changed the log, dimension or state"
        );
        let runs = fx.runs().await;
        assert_eq!(runs.rows.len(), runs_before.rows.len() + 1, "{name}: {runs:?}");
        assert_eq!(runs.rows[..runs_before.rows.len()], runs_before.rows[..], "{name}");
        let failed = runs.records().pop().expect("a run record");
        assert_eq!(failed["status"].as_deref(), Some("failed"), "{name}");
        assert!(
            failed["error"].as_deref().unwrap_or("").contains(name),
            "{name}: {failed:?}"
        );

        let retry = fx.run(UPPER).await;
        assert_eq!(retry.counts, expected_counts, "{name}: the retry loaded something else");
        fx.assert_dimension_derives_from_log().await;
        assert_eq!(outcome(&mut fx).await, expected, "{name}: the retry ended elsewhere");
        assert_eq!(
            fx.runs().await.values("status"),
            ["succeeded", "failed", "succeeded"].map(|s| Some(s.to_string())),
            "{name}"
        );
    }
}

async fn a_crash_after_commit_is_committed(mut fx: Fixture) {
    let (expected, expected_counts) = uninterrupted(&fx).await;
    prepare(&mut fx).await;
    let err = fx
        .try_run_with(with_failpoint("after_commit"))
        .await
        .expect_err("the failpoint must fail the run");
    assert!(matches!(err, dimlog::Error::Failpoint("after_commit")), "{err}");
    assert_eq!(outcome(&mut fx).await, expected, "the commit did not stick");
    let committed = fx
        .runs()
        .await
        .records()
        .into_iter()
        .find(|r| r["run_id"].as_deref() == Some("2"))
        .expect("the committed run's record");
    assert_eq!(committed["status"].as_deref(), Some("succeeded"));
    assert_eq!(
        committed["versions"].as_deref(),
        Some(expected_counts.versions.to_string().as_str())
    );

    let log = fx.log().await;
    let dimension = fx.dimension().await;
    let retry = fx.run(UPPER).await;
    assert_eq!(
        (retry.counts.versions, retry.counts.corrections, retry.counts.tombstones),
        (0, 0, 0),
        "the retry of a committed run appended something"
    );
    assert_eq!(fx.log().await, log);
    assert_eq!(fx.dimension().await, dimension);
}
