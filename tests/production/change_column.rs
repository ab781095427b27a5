//! A dimension's versions are stamped by its change column: their `valid_from` times and
//! the incremental watermark are times of that column, which the target records
//! (`dimlog_dimensions.change_column`, schema version 2). Versions stamped by another
//! column would be placed among them by another clock (a change read later lands before
//! the current version, as a late one, and never becomes current), and a window from the
//! watermark would miss rows: no run mends that. So a config whose `source.updated_at`
//! names another column is refused by every run (incremental, dry, full refresh, config
//! change, backfill), naming the setting and both columns; a column only renamed at the
//! source is read under the recorded name through `source.query`. A dimension loaded
//! before the column was recorded records it on its next run, unless its watermark is
//! later than every value of the configured column (then kept on another one).

use dimlog::config::Backend;
use dimlog::pipeline::RunOptions;
use dimlog::state::RunKind;

use super::{cli_exits, text};
use crate::support::fixture::{on_every_engine, ts, Fixture};

on_every_engine!(
    a_switched_change_column_is_refused_by_every_run,
    a_renamed_change_column_is_read_under_its_recorded_name,
    a_version_1_target_records_its_column_unless_the_watermark_says_otherwise,
);

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

/// `(log rows, dimension rows, watermark)`: what a refused run must leave as it was.
async fn trace(fx: &mut Fixture) -> (i64, i64, Option<String>) {
    (
        fx.count("customer_versions").await,
        fx.count("dim_customer").await,
        fx.watermark().await,
    )
}

fn ts_type(fx: &Fixture) -> &'static str {
    match fx.backend {
        Backend::Sqlite => "TEXT",
        Backend::Postgres | Backend::Citus => "timestamptz",
    }
}

/// A source with a second clock, `synced_at`, a day behind `updated_at`, loaded by
/// `updated_at` (key 1).
async fn loaded_with_two_clocks(fx: &mut Fixture) {
    fx.exec(&format!(
        "ALTER TABLE src_customers ADD COLUMN synced_at {}",
        ts_type(fx)
    ))
    .await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at, synced_at) VALUES
         (1, 'a@x', 'free', 'FR', '2026-03-02T09:00:00Z', '2026-03-01T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(
        recorded(fx).await.as_deref(),
        Some("updated_at"),
        "the first run records its column"
    );
}

async fn a_switched_change_column_is_refused_by_every_run(mut fx: Fixture) {
    loaded_with_two_clocks(&mut fx).await;
    fx.edit_config("updated_at = \"updated_at\"", "updated_at = \"synced_at\"");
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T11:00:00Z', synced_at = '2026-03-01T11:00:00Z' WHERE customer_id = 1")
        .await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at, synced_at) VALUES
         (2, 'b@x', 'free', 'DE', '2026-03-02T11:30:00Z', '2026-03-01T11:30:00Z')",
    )
    .await;
    let before = trace(&mut fx).await;
    let backfill = RunOptions {
        window: Some(dimlog::extract::Window {
            low: Some(ts("2026-03-01T00:00:00Z")),
            high: ts("2026-03-02T00:00:00Z"),
            high_inclusive: false,
        }),
        role: "backfill:test".into(),
        ..opts("2026-03-02T12:00:00Z", RunKind::Backfill, false)
    };
    let runs = [
        ("incremental", opts("2026-03-02T12:00:00Z", RunKind::Incremental, false)),
        ("dry run", opts("2026-03-02T12:00:00Z", RunKind::Incremental, true)),
        (
            "full refresh",
            opts("2026-03-02T12:00:00Z", RunKind::FullRefresh, false),
        ),
        ("backfill", backfill),
    ];
    for (what, run) in runs {
        let err = fx.try_run_with(run).await.expect_err(what);
        let message = err.to_string();
        for needle in [
            "source.updated_at",
            "`synced_at`",
            "`updated_at`",
            "AS updated_at",
            "another `name`",
        ] {
            assert!(message.contains(needle), "{what}: {needle:?} not in: {message}");
        }
        assert_eq!(err.kind(), "config", "{what}");
        assert_eq!(trace(&mut fx).await, before, "{what}: nothing written");
    }
    // `status` shows the clock and that runs are refused; `doctor` says what `run` would.
    let status = text(&fx.cli(&["status"]).stdout);
    assert!(
        status.contains("versions stamped by updated_at, but source.updated_at is synced_at"),
        "{status}"
    );
    let json = text(&fx.cli(&["status", "--json"]).stdout);
    assert!(json.contains("\"change_column\":\"updated_at\""), "{json}");
    let doctor = fx.cli(&["doctor"]);
    let said = format!("{}{}", text(&doctor.stdout), text(&doctor.stderr));
    assert_ne!(doctor.status.code(), Some(0), "{said}");
    assert!(
        said.contains("recorded columns") && said.contains("`synced_at`"),
        "{said}"
    );
    // `backfill` says it once, as a config error, whatever the number of chunks.
    let backfill = fx.cli(&[
        "backfill",
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z",
        "--chunk",
        "6h",
    ]);
    let said = text(&backfill.stderr);
    assert_eq!(backfill.status.code(), Some(2), "{said}");
    assert_eq!(said.matches("was built with versions stamped by").count(), 1, "{said}");
    // A config change on top changes nothing.
    fx.edit_config(
        "columns = [\"email\", \"tier\", \"country\"]",
        "columns = [\"email\", \"tier\"]",
    );
    let accepting = RunOptions {
        accept_config_change: true,
        ..opts("2026-03-02T12:00:00Z", RunKind::Incremental, false)
    };
    let err = fx
        .try_run_with(accepting)
        .await
        .expect_err("a config change with the switch");
    assert!(err.to_string().contains("`synced_at`"), "{err}");
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z", "--full-refresh"], 2);
    assert!(stderr.contains("source.updated_at"), "{stderr}");
    let json = text(&fx.cli(&["run", "--upper", "2026-03-02T12:00:00Z", "--json"]).stdout);
    assert!(json.contains("\"config\""), "{json}");
    assert_eq!(trace(&mut fx).await, before);
    assert_eq!(recorded(&mut fx).await.as_deref(), Some("updated_at"));

    // Back to the recorded column: the changes load, and key 1's is current.
    fx.edit_config("updated_at = \"synced_at\"", "updated_at = \"updated_at\"");
    fx.edit_config(
        "columns = [\"email\", \"tier\"]",
        "columns = [\"email\", \"tier\", \"country\"]",
    );
    let report = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!(report.counts.versions, 2);
    let tiers = fx.dimension().await.values("tier");
    assert!(tiers.contains(&Some("pro".to_string())), "{tiers:?}");
    fx.assert_dimension_derives_from_log().await;
}

/// The source renames the change column (the same values): read under the recorded name
/// through `source.query`, every later change loads.
async fn a_renamed_change_column_is_read_under_its_recorded_name(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
         (1, 'a@x', 'free', 'FR', '2026-03-02T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("ALTER TABLE src_customers RENAME COLUMN updated_at TO modified_at")
        .await;
    fx.edit_config(
        "table = \"src_customers\"",
        "query = \"SELECT customer_id, email, tier, country, is_deleted, modified_at AS updated_at FROM src_customers\"",
    );
    fx.exec("UPDATE src_customers SET tier = 'pro', modified_at = '2026-03-02T10:30:00Z' WHERE customer_id = 1")
        .await;
    let report = fx.run("2026-03-02T11:00:00Z").await;
    assert_eq!(report.counts.versions, 1);
    assert_eq!(recorded(&mut fx).await.as_deref(), Some("updated_at"));
    fx.assert_dimension_derives_from_log().await;
}

/// A target stamped at schema version 1 (no `change_column`): the next run adds the
/// column and records the configured one, unless the watermark is later than every
/// value of it (kept on another column, which an older dimlog did not record), which a
/// full refresh, the user's word, records anyway.
async fn a_version_1_target_records_its_column_unless_the_watermark_says_otherwise(mut fx: Fixture) {
    loaded_with_two_clocks(&mut fx).await;
    let as_version_1 = "ALTER TABLE dimlog_dimensions DROP COLUMN change_column; UPDATE dimlog_schema SET version = 1";
    fx.target_exec(as_version_1).await;
    let doctor = text(&fx.cli(&["doctor"]).stdout);
    assert!(
        doctor.contains("rights to load: dimlog's tables are at schema version 1"),
        "{doctor}"
    );
    fx.edit_config("updated_at = \"updated_at\"", "updated_at = \"synced_at\"");
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T10:30:00Z', synced_at = '2026-03-01T10:30:00Z' WHERE customer_id = 1")
        .await;
    let before = trace(&mut fx).await;
    let err = fx
        .try_run_with(opts("2026-03-02T11:00:00Z", RunKind::Incremental, false))
        .await
        .expect_err("a watermark later than every synced_at");
    let message = err.to_string();
    for needle in [
        "source.updated_at",
        "`synced_at`",
        "2026-03-01T10:30:00",
        "2026-03-02T09:00:00",
    ] {
        assert!(message.contains(needle), "{needle:?} not in: {message}");
    }
    assert_eq!(trace(&mut fx).await, before);
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 2);
    assert!(stderr.contains("dimlog run --full-refresh"), "{stderr}");

    // The column it was loaded with: recorded, and the change loads.
    fx.edit_config("updated_at = \"synced_at\"", "updated_at = \"updated_at\"");
    let report = fx.run("2026-03-02T11:00:00Z").await;
    assert_eq!(report.counts.versions, 1);
    assert_eq!(recorded(&mut fx).await.as_deref(), Some("updated_at"));
    let version = fx
        .target_query("SELECT CAST(max(version) AS TEXT) FROM dimlog_schema")
        .await;
    assert_eq!(version[0][0].as_deref(), Some("2"));

    // Unrecorded again, `synced_at` configured: a full refresh records it.
    fx.target_exec("UPDATE dimlog_dimensions SET change_column = NULL")
        .await;
    fx.edit_config("updated_at = \"updated_at\"", "updated_at = \"synced_at\"");
    fx.run_with(opts("2026-03-02T11:00:00Z", RunKind::FullRefresh, false))
        .await;
    assert_eq!(recorded(&mut fx).await.as_deref(), Some("synced_at"));
}
