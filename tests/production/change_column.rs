//! The incremental watermark is a value of the change column it was kept on
//! (`dimlog_dimensions.change_column`, schema version 2). A config whose
//! `source.updated_at` names another column must not go on from that watermark: where the
//! new column's values lag the old one's, a window from the old watermark reads none of
//! the rows that changed, and the run "succeeds" with nothing. So an incremental run (and
//! its dry run) is refused, naming the setting, both columns and the way on; a full
//! refresh reads the whole source and starts the watermark over on the new column, after
//! which incremental runs read rows whose new column is older than the old watermark.

use dimlog::config::Backend;
use dimlog::pipeline::RunOptions;
use dimlog::state::RunKind;

use super::{cli_exits, text};
use crate::support::fixture::{on_every_engine, ts, Fixture};

on_every_engine!(a_switched_change_column_is_refused_until_a_full_refresh_starts_it_over);

fn opts(upper: &str, kind: RunKind, dry_run: bool) -> RunOptions {
    RunOptions {
        upper: Some(ts(upper)),
        kind,
        dry_run,
        ..RunOptions::incremental()
    }
}

async fn recorded(fx: &mut Fixture) -> Option<String> {
    let rows = fx
        .target_query("SELECT change_column FROM dimlog_dimensions WHERE dimension = 'customer'")
        .await;
    rows.into_iter().next().and_then(|r| r.into_iter().next().flatten())
}

/// `(runs, log rows, watermark)`: what a refused run must leave as it was.
async fn trace(fx: &mut Fixture) -> (i64, i64, Option<String>) {
    (
        fx.count("dimlog_runs").await,
        fx.count("customer_versions").await,
        fx.watermark().await,
    )
}

async fn a_switched_change_column_is_refused_until_a_full_refresh_starts_it_over(mut fx: Fixture) {
    let ts_type = match fx.backend {
        Backend::Sqlite => "TEXT",
        Backend::Postgres | Backend::Citus => "timestamptz",
    };
    fx.exec(&format!("ALTER TABLE src_customers ADD COLUMN synced_at {ts_type}"))
        .await;
    // `synced_at` lags `updated_at` by a day.
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at, synced_at) VALUES
         (1, 'a@x', 'free', 'FR', '2026-03-02T09:00:00Z', '2026-03-01T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(
        recorded(&mut fx).await.as_deref(),
        Some("updated_at"),
        "the first run records its column"
    );
    let watermark = fx.watermark().await;
    assert!(
        watermark.as_deref().is_some_and(|w| w.starts_with("2026-03-02T09:00")),
        "{watermark:?}"
    );

    // The config now names the lagging column; key 1 changes and key 2 arrives, both
    // stamped in it long before the old watermark.
    fx.edit_config("updated_at = \"updated_at\"", "updated_at = \"synced_at\"");
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T11:00:00Z', synced_at = '2026-03-01T11:00:00Z' WHERE customer_id = 1")
        .await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at, synced_at) VALUES
         (2, 'b@x', 'free', 'DE', '2026-03-02T11:30:00Z', '2026-03-01T11:30:00Z')",
    )
    .await;
    let before = trace(&mut fx).await;
    for dry_run in [false, true] {
        let err = fx
            .try_run_with(opts("2026-03-02T12:00:00Z", RunKind::Incremental, dry_run))
            .await
            .expect_err("an incremental run from the other column's watermark");
        let message = err.to_string();
        for needle in [
            "source.updated_at",
            "`synced_at`",
            "`updated_at`",
            "2026-03-02T09:00",
            "whole source",
        ] {
            assert!(message.contains(needle), "{needle:?} not in: {message}");
        }
        assert_eq!(
            trace(&mut fx).await,
            before,
            "a refused run (dry run: {dry_run}) writes nothing"
        );
    }
    // The same through the CLI: a config error, with the way on.
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 2);
    assert!(stderr.contains("dimlog run --full-refresh"), "{stderr}");
    let json = text(&fx.cli(&["run", "--upper", "2026-03-02T12:00:00Z", "--json"]).stdout);
    assert!(json.contains("\"config\""), "{json}");
    assert_eq!(trace(&mut fx).await, before);
    assert_eq!(recorded(&mut fx).await.as_deref(), Some("updated_at"));

    // A full refresh reads everything and starts the watermark over on `synced_at`.
    let report = fx
        .run_with(opts("2026-03-02T12:00:00Z", RunKind::FullRefresh, false))
        .await;
    assert_eq!(report.counts.rows_read, 2);
    assert_eq!(recorded(&mut fx).await.as_deref(), Some("synced_at"));
    let watermark = fx.watermark().await;
    assert!(
        watermark.as_deref().is_some_and(|w| w.starts_with("2026-03-01T11:30")),
        "the watermark is the new column's newest value read, not the old one's: {watermark:?}"
    );

    // Incremental again: a row whose `synced_at` is older than the old watermark is read.
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at, synced_at) VALUES
         (3, 'c@x', 'free', 'NL', '2026-03-02T12:30:00Z', '2026-03-01T12:30:00Z')",
    )
    .await;
    let report = fx.run("2026-03-02T13:00:00Z").await;
    assert_eq!(report.counts.versions, 1, "key 3 is read");
    let keys = fx.dimension().await.values("customer_id");
    assert!(keys.contains(&Some("3".to_string())), "{keys:?}");
    fx.assert_dimension_derives_from_log().await;

    // Back to `updated_at` is a switch again.
    fx.edit_config("updated_at = \"synced_at\"", "updated_at = \"updated_at\"");
    let err = fx
        .try_run_with(opts("2026-03-02T13:00:00Z", RunKind::Incremental, false))
        .await
        .expect_err("back to the first column");
    assert!(err.to_string().contains("kept on column `synced_at`"), "{err}");
}

on_every_engine!(a_version_1_target_gains_the_column_and_records_it_on_its_next_run);

/// A target stamped at schema version 1 (no `change_column`): the next run adds the
/// column, records the configured one (it cannot know which column an older dimlog kept
/// the watermark on, so that run is not refused), and stamps version 2.
async fn a_version_1_target_gains_the_column_and_records_it_on_its_next_run(mut fx: Fixture) {
    fx.exec("INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES (1, 'a@x', 'free', 'FR', '2026-03-02T09:00:00Z')")
        .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.target_exec("ALTER TABLE dimlog_dimensions DROP COLUMN change_column; UPDATE dimlog_schema SET version = 1")
        .await;
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T10:30:00Z' WHERE customer_id = 1")
        .await;
    let report = fx.run("2026-03-02T11:00:00Z").await;
    assert_eq!(report.counts.versions, 1);
    assert_eq!(recorded(&mut fx).await.as_deref(), Some("updated_at"));
    let version = fx
        .target_query("SELECT CAST(max(version) AS TEXT) FROM dimlog_schema")
        .await;
    assert_eq!(version[0][0].as_deref(), Some("2"));
}
