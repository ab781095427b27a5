//! The load's rules (spec 1.1, 1.2, 1.6, section 4 `--dry-run`), asserted directly.

use dimlog::detect::{row_hash, ColumnKind};
use dimlog::pipeline::RunOptions;
use dimlog::state::RunKind;

use crate::support::fixture::{on_every_engine, ts, Fixture};

on_every_engine!(
    unchanged_source_appends_nothing,
    watermark_is_the_greatest_updated_at_read,
    row_at_the_watermark_is_not_lost,
    dedupe_tie_picks_the_greatest_row_hash,
    dry_run_writes_nothing,
    null_updated_at_fails_the_run,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

fn at(hhmm: &str) -> String {
    format!("2026-03-02T{hhmm}:00.000000Z")
}

async fn loaded_keys(fx: &mut Fixture) -> Vec<String> {
    let mut keys: Vec<String> = fx
        .dimension()
        .await
        .values("customer_id")
        .into_iter()
        .map(|k| k.expect("a key"))
        .collect();
    keys.dedup();
    keys
}

async fn unchanged_source_appends_nothing(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, NULL, NULL, NULL, '2026-03-02T09:05:00Z'),
                  (3, 'cyd@example.com', '', 'NL', '2026-03-02T09:10:00Z')"
    ))
    .await;
    let first = fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(first.counts.versions, 3);
    let log = fx.log().await;
    let dimension = fx.dimension().await;

    let again = fx.run("2026-03-02T10:00:00Z").await;
    let later = fx.run("2026-03-02T10:05:00Z").await;
    let full = fx
        .run_with(RunOptions {
            kind: RunKind::FullRefresh,
            upper: Some(ts("2026-03-02T10:10:00Z")),
            ..RunOptions::incremental()
        })
        .await;
    assert_eq!(full.counts.rows_read, 3, "a full refresh reads the whole source");
    for r in [&again, &later, &full] {
        assert_eq!(
            (
                r.counts.versions,
                r.counts.corrections,
                r.counts.tombstones,
                r.counts.late_versions
            ),
            (0, 0, 0, 0),
            "{r:?}"
        );
    }
    assert_eq!(fx.log().await, log);
    assert_eq!(fx.dimension().await, dimension);
    assert_eq!(fx.count("dimlog_runs").await, 4);
}

async fn watermark_is_the_greatest_updated_at_read(mut fx: Fixture) {
    // Nothing read yet: no watermark row.
    let empty = fx.run("2026-03-02T09:00:00Z").await;
    assert_eq!((empty.counts.rows_read, empty.high_watermark), (0, None));
    assert_eq!(
        fx.watermark().await,
        None,
        "no dimlog_state row until a run has read something"
    );

    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:50:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T10:30:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(r.counts.rows_read, 2, "a row after upper is not read");
    assert_eq!(r.high_watermark.map(|t| t.to_text()), Some(at("09:50")));
    assert_eq!(
        fx.watermark().await,
        Some(at("09:50")),
        "max(updated_at read), not upper"
    );
    assert_eq!(loaded_keys(&mut fx).await, ["1", "2"]);

    // A source row whose updated_at moved backwards: read, but the watermark stays.
    fx.exec("UPDATE src_customers SET tier = 'free', updated_at = '2026-03-02T09:45:00Z' WHERE customer_id = 2")
        .await;
    let r = fx.run("2026-03-02T09:55:00Z").await;
    assert_eq!(r.low_watermark.map(|t| t.to_text()), Some(at("09:35")));
    assert_eq!(r.counts.rows_read, 1);
    assert_eq!(r.watermark_before.map(|t| t.to_text()), Some(at("09:50")));
    assert_eq!(r.high_watermark.map(|t| t.to_text()), Some(at("09:50")));
    assert_eq!(fx.watermark().await, Some(at("09:50")), "the watermark moved backwards");

    let r = fx.run("2026-03-02T10:40:00Z").await;
    assert_eq!((r.counts.rows_read, r.counts.versions), (2, 1));
    assert_eq!(fx.watermark().await, Some(at("10:30")));

    // An upper before the watermark reads nothing and moves nothing.
    let r = fx.run("2026-03-02T10:20:00Z").await;
    assert_eq!(r.counts.rows_read, 0);
    assert_eq!(r.high_watermark.map(|t| t.to_text()), Some(at("10:30")));
    assert_eq!(fx.watermark().await, Some(at("10:30")));

    let runs = fx.runs().await;
    assert_eq!(
        runs.values("high_watermark"),
        [
            None,
            Some(at("09:50")),
            Some(at("09:50")),
            Some(at("10:30")),
            Some(at("10:30"))
        ]
    );
    assert_eq!(
        runs.values("upper_bound"),
        ["09:00", "10:00", "09:55", "10:40", "10:20"].map(|t| Some(at(t)))
    );
}

async fn row_at_the_watermark_is_not_lost(mut fx: Fixture) {
    fx.set_setting("lookback", "\"0s\"");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:50:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(fx.watermark().await, Some(at("09:50")));

    // Committed in the source after the run read, stamped exactly at the watermark.
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:50:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T10:10:00Z").await;
    assert_eq!(r.low_watermark.map(|t| t.to_text()), Some(at("09:50")));
    assert_eq!(r.counts.rows_read, 2, "the low side is >=");
    assert_eq!(r.counts.versions, 1);
    assert_eq!(loaded_keys(&mut fx).await, ["1", "2"]);

    // The high side is <= upper.
    fx.exec(&format!(
        "{INSERT} (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T10:20:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T10:20:00Z").await;
    assert_eq!(r.counts.versions, 1);
    assert_eq!(fx.watermark().await, Some(at("10:20")));
    assert_eq!(loaded_keys(&mut fx).await, ["1", "2", "3"]);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Two rows with the same key and timestamp but different values: the greatest row_hash
/// wins, whatever order they were read in, in both history modes.
async fn dedupe_tie_picks_the_greatest_row_hash(fx: Fixture) {
    let hash = |email: &str| {
        row_hash([
            (ColumnKind::Text, Some(email)),
            (ColumnKind::Text, Some("pro")),
            (ColumnKind::Text, Some("FR")),
        ])
    };
    let (a, b) = (hash("a@example.com"), hash("b@example.com"));
    let (winner, winner_hash) = if a > b {
        ("a@example.com", a)
    } else {
        ("b@example.com", b)
    };
    let backend = fx.backend;
    let mut fixtures = [fx, Fixture::on(backend).await];
    for (fx, history) in fixtures.iter_mut().zip(["all", "latest"]) {
        fx.use_feed().await;
        fx.set_setting("history", &format!("\"{history}\""));
        // Customer 1 has a then b in insert order, customer 2 b then a.
        fx.exec(
            "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES
                 (1, 'a@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                 (2, 'b@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                 (2, 'a@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                 (1, 'b@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                 (3, 'c@example.com', 'pro', 'FR', '2026-03-02T08:00:00Z'),
                 (3, 'c@example.com', 'pro', 'FR', '2026-03-02T08:00:00Z')",
        )
        .await;
        let r = fx.run("2026-03-02T10:00:00Z").await;
        assert_eq!(r.counts.rows_read, 6, "history = {history}");
        assert_eq!(r.counts.rows_after_dedupe, 3, "history = {history}");
        assert_eq!(r.counts.duplicates_dropped, 3, "history = {history}");
        assert_eq!(r.counts.versions, 3, "history = {history}");
        let dim = fx.dimension().await;
        assert_eq!(
            dim.values("email"),
            [Some(winner), Some(winner), Some("c@example.com")].map(|e| e.map(String::from)),
            "history = {history}"
        );
        assert_eq!(
            dim.values("row_hash")[..2],
            [Some(hex(&winner_hash)), Some(hex(&winner_hash))]
        );
        let runs = fx.runs().await;
        assert_eq!(runs.values("duplicates_dropped"), [Some("3".to_string())]);
    }
}

async fn dry_run_writes_nothing(mut fx: Fixture) {
    let dry = |upper: &str| RunOptions {
        upper: Some(ts(upper)),
        dry_run: true,
        ..RunOptions::incremental()
    };
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;

    // On an empty target: the counts it would commit, and not even a table.
    let r = fx.run_with(dry("2026-03-02T10:00:00Z")).await;
    assert!(r.dry_run);
    assert_eq!((r.run_id, r.counts.versions), (None, 2));
    for table in [
        "dimlog_runs",
        "dimlog_state",
        "dimlog_dimensions",
        "customer_versions",
        "dim_customer",
    ] {
        assert!(
            !fx.target_has_table(table).await,
            "a dry run on an empty target created {table}"
        );
    }

    // On a loaded dimension: nothing moves, not even a run record.
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec(
        "UPDATE src_customers SET tier = 'free', updated_at = '2026-03-02T10:05:00Z' WHERE customer_id = 1;
         UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T10:06:00Z' WHERE customer_id = 2",
    )
    .await;
    let before = (fx.log().await, fx.dimension().await, fx.state().await, fx.runs().await);
    let r = fx.run_with(dry("2026-03-02T10:30:00Z")).await;
    assert_eq!((r.counts.versions, r.counts.tombstones), (1, 1));
    assert_eq!(r.high_watermark.map(|t| t.to_text()), Some(at("10:06")));
    let after = (fx.log().await, fx.dimension().await, fx.state().await, fx.runs().await);
    assert_eq!(after, before, "a dry run wrote something");

    // The same run for real commits what the dry run announced.
    let real = fx.run("2026-03-02T10:30:00Z").await;
    assert_eq!(real.counts, r.counts);
}

async fn null_updated_at_fails_the_run(mut fx: Fixture) {
    fx.create_source_table("src_nullable", true, false).await;
    fx.set_setting("table", "\"src_nullable\"");
    fx.exec(
        "INSERT INTO src_nullable (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    let before = (fx.log().await, fx.dimension().await, fx.state().await);
    let runs_before = fx.runs().await;

    fx.exec(
        "INSERT INTO src_nullable (customer_id, email, tier, country, updated_at) VALUES
             (2, 'bob@example.com', 'pro', 'DE', NULL),
             (3, 'cyd@example.com', 'pro', 'NL', NULL),
             (4, 'dee@example.com', 'pro', 'BE', '2026-03-02T10:05:00Z')",
    )
    .await;
    let err = fx
        .try_run_with(RunOptions {
            upper: Some(ts("2026-03-02T10:30:00Z")),
            ..RunOptions::incremental()
        })
        .await
        .expect_err("a NULL updated_at must fail the run");
    let message = err.to_string();
    assert!(message.contains("`updated_at`"), "{message}");
    assert!(message.contains("2 source rows"), "{message}");
    assert_eq!(err.exit_code(), 1, "{message}");

    let after = (fx.log().await, fx.dimension().await, fx.state().await);
    assert_eq!(after, before, "a failed run committed something");
    let runs = fx.runs().await;
    assert_eq!(runs.rows[..runs_before.rows.len()], runs_before.rows[..]);
    assert_eq!(runs.rows.len(), runs_before.rows.len() + 1);
    let failed = &runs.records()[runs_before.rows.len()];
    assert_eq!(failed["status"].as_deref(), Some("failed"));
    assert!(failed["error"].as_deref().unwrap_or("").contains("updated_at"));
}
