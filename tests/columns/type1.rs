//! Type 1 columns and Type 6 twins (spec 1.4): a Type 1 change rewrites every row of its
//! key and opens no version; `current_<col>` shows the key's current value on every row.

use dimlog::detect::{row_hash, ColumnKind};
use dimlog::pipeline::{RunOptions, RunReport};
use dimlog::state::RunKind;

use super::{assert_verified, verify};
use crate::support::fixture::{assert_snapshot, on_both_backends, summary, ts, Fixture};

on_both_backends!(
    type1_correction_rewrites_every_row_of_the_key,
    type1_and_type2_change_in_one_load_make_one_version,
    current_columns_show_the_current_value_on_every_row,
    adding_type1_and_current_columns_later_opens_no_version,
    a_row_like_an_observation_behind_a_late_delete_opens_a_version,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, name, updated_at) VALUES";

/// One snapshot section: the run's counts, then the whole dimension and log.
async fn section(fx: &mut Fixture, title: &str, r: &RunReport) -> String {
    format!(
        "== {title}\n{} type1_updates={}\n\n{}\n{}\n",
        summary(r),
        r.type1_updates,
        fx.dump_dimension().await,
        fx.dump_log().await
    )
}

/// One column of one customer's dimension rows, in valid_from order.
async fn column_of(fx: &mut Fixture, customer: &str, column: &str) -> Vec<Option<String>> {
    fx.dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some(customer))
        .map(|r| r[column].clone())
        .collect()
}

fn some(values: &[&str]) -> Vec<Option<String>> {
    values.iter().map(|v| Some(v.to_string())).collect()
}

fn no_versions(r: &RunReport) -> (i64, i64, i64) {
    (r.counts.versions, r.counts.corrections, r.counts.tombstones)
}

/// A correction of a Type 1 column (`name`) shows on every row of the key, old versions
/// included, without a new version or surrogate key; the log records it as a row without
/// a surrogate key. A Type 1 change that did not move `updated_at` is reported by
/// `verify --against-source` and picked up by a full refresh.
async fn type1_correction_rewrites_every_row_of_the_key(mut fx: Fixture) {
    fx.with_type1_name().await;
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', 'Ann', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', 'Bob', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(r.counts.versions, 2);
    let mut snap = section(&mut fx, "first load", &r).await;

    // A Type 2 change gives customer 1 a second version.
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T11:00:00Z' WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!((r.counts.versions, r.type1_updates), (1, 0));
    snap += &section(&mut fx, "tier of customer 1 changes (Type 2)", &r).await;
    let before = fx.dimension().await;
    assert_eq!(column_of(&mut fx, "1", "name").await, some(&["Ann", "Ann"]));

    // The Type 1 correction: only the name changes.
    fx.exec("UPDATE src_customers SET name = 'Ann Lee', updated_at = '2026-03-02T13:00:00Z' WHERE customer_id = 1")
        .await;
    let log_rows = fx.count("customer_versions").await;
    let r = fx.run("2026-03-02T14:00:00Z").await;
    assert_eq!(no_versions(&r), (0, 0, 0), "a Type 1 change opens no version");
    assert_eq!((r.counts.rows_read, r.type1_updates), (1, 1));
    snap += &section(&mut fx, "name of customer 1 corrected (Type 1)", &r).await;
    assert_eq!(
        column_of(&mut fx, "1", "name").await,
        some(&["Ann Lee", "Ann Lee"]),
        "every row of the key, the closed version too, shows the latest Type 1 value"
    );
    assert_eq!(column_of(&mut fx, "1", "tier").await, some(&["free", "pro"]));
    assert_eq!(column_of(&mut fx, "2", "name").await, some(&["Bob"]));
    let after = fx.dimension().await;
    for column in [
        "customer_sk",
        "customer_id",
        "valid_from",
        "valid_to",
        "is_current",
        "row_hash",
    ] {
        assert_eq!(after.values(column), before.values(column), "{column} changed");
    }
    assert_eq!(fx.count("customer_versions").await, log_rows + 1);
    let newest = fx.log().await.records().pop().expect("a log row");
    assert_eq!(
        (newest["customer_sk"].as_deref(), newest["name"].as_deref()),
        (None, Some("Ann Lee")),
        "the observation is logged without a surrogate key"
    );

    // Rereading it within the lookback appends nothing.
    let r = fx.run("2026-03-02T14:05:00Z").await;
    assert_eq!((r.counts.rows_read, r.type1_updates), (1, 0));
    assert_eq!(no_versions(&r), (0, 0, 0));
    assert_eq!(fx.count("customer_versions").await, log_rows + 1);

    // A Type 1 value changed without moving updated_at, outside every window since.
    fx.exec("UPDATE src_customers SET name = 'Robert' WHERE customer_id = 2")
        .await;
    let r = fx.run("2026-03-02T14:10:00Z").await;
    assert_eq!((r.counts.rows_read, r.type1_updates), (1, 0), "customer 2 is not read");
    assert_verified(&fx, false).await;
    let report = verify(&fx, true).await;
    let different = report
        .checks
        .iter()
        .find(|c| c.name == "source_different")
        .expect("the source_different check");
    assert!(!report.ok, "{report:#?}");
    assert_eq!(different.count, 1, "{report:#?}");
    assert!(different.examples[0].starts_with("2: "), "{report:#?}");

    let r = fx
        .run_with(RunOptions {
            kind: RunKind::FullRefresh,
            upper: Some(ts("2026-03-02T14:15:00Z")),
            ..RunOptions::incremental()
        })
        .await;
    assert_eq!(no_versions(&r), (0, 0, 0));
    assert_eq!((r.counts.rows_read, r.type1_updates), (2, 1));
    snap += &section(
        &mut fx,
        "name of customer 2 fixed without moving updated_at; full refresh",
        &r,
    )
    .await;
    assert_eq!(column_of(&mut fx, "2", "name").await, some(&["Robert"]));
    assert_verified(&fx, true).await;

    assert_snapshot(
        "type1_correction_rewrites_every_row_of_the_key",
        "A Type 1 correction rewrites the name on every row of the key without a new version",
        &snap,
    );
}

/// A Type 2 and a Type 1 change in the same source row give exactly one new version,
/// carrying both values; the row hash covers the Type 2 columns only, and the older
/// version shows the new Type 1 value too.
async fn type1_and_type2_change_in_one_load_make_one_version(mut fx: Fixture) {
    fx.with_type1_name().await;
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', 'Ann', '2026-03-02T09:00:00Z')"
    ))
    .await;
    assert_eq!(fx.run("2026-03-02T10:00:00Z").await.counts.versions, 1);

    fx.exec(
        "UPDATE src_customers SET tier = 'pro', name = 'Ann Lee', updated_at = '2026-03-02T11:00:00Z'
         WHERE customer_id = 1",
    )
    .await;
    let r = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!(no_versions(&r), (1, 0, 0));
    assert_eq!(r.type1_updates, 0, "the Type 1 value travels with the version");
    assert_eq!(fx.count("customer_versions").await, 2, "one log row for both changes");

    let log = fx.log().await.records();
    assert_eq!(
        (
            log[1]["customer_sk"].as_deref(),
            log[1]["tier"].as_deref(),
            log[1]["name"].as_deref()
        ),
        (Some("2"), Some("pro"), Some("Ann Lee"))
    );
    assert_eq!(column_of(&mut fx, "1", "customer_sk").await, some(&["1", "2"]));
    assert_eq!(column_of(&mut fx, "1", "tier").await, some(&["free", "pro"]));
    assert_eq!(column_of(&mut fx, "1", "name").await, some(&["Ann Lee", "Ann Lee"]));
    assert_eq!(column_of(&mut fx, "1", "is_current").await, some(&["false", "true"]));
    let type2_only = row_hash([
        (ColumnKind::Text, Some("ann@example.com")),
        (ColumnKind::Text, Some("pro")),
        (ColumnKind::Text, Some("FR")),
    ]);
    let hex: String = type2_only.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        column_of(&mut fx, "1", "row_hash").await[1],
        Some(hex),
        "the row hash covers the Type 2 columns only"
    );
    assert_verified(&fx, true).await;
}

/// `current_columns = ["tier"]` adds `current_tier` beside `tier` on every row: the tier
/// of the key's current version (for a deleted key, of its last version).
async fn current_columns_show_the_current_value_on_every_row(mut fx: Fixture) {
    fx.edit_config(
        r#"columns = ["email", "tier", "country"]"#,
        "columns = [\"email\", \"tier\", \"country\"]\ncurrent_columns = [\"tier\"]",
    );
    let insert = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";
    fx.exec(&format!(
        "{insert} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'free', 'NL', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let mut snap = String::new();
    let steps: [(&str, &str, &str); 3] = [
        ("first load", "", "2026-03-02T10:00:00Z"),
        (
            "customer 1 goes pro",
            "UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T11:00:00Z' WHERE customer_id = 1",
            "2026-03-02T12:00:00Z",
        ),
        (
            "customer 1 goes gold, customer 3 is deleted",
            "UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T13:00:00Z' WHERE customer_id = 1;
             UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T12:30:00Z' WHERE customer_id = 3",
            "2026-03-02T14:00:00Z",
        ),
    ];
    for (title, change, upper) in steps {
        if !change.is_empty() {
            fx.exec(change).await;
        }
        let r = fx.run(upper).await;
        snap += &format!("== {title}\n{}\n\n{}\n", summary(&r), fx.dimension_with_current().await);
    }
    let dim = fx.dimension_with_current().await.records();
    for key in ["1", "2", "3"] {
        let rows: Vec<_> = dim
            .iter()
            .filter(|r| r["customer_id"].as_deref() == Some(key))
            .collect();
        let current = rows
            .iter()
            .find(|r| r["is_current"].as_deref() == Some("true"))
            .or(rows.last())
            .expect("rows of the key");
        for r in &rows {
            assert_eq!(r["current_tier"], current["tier"], "customer {key}: {r:?}");
        }
    }
    let tiers: Vec<_> = dim
        .iter()
        .filter(|r| r["customer_id"].as_deref() == Some("1"))
        .map(|r| (r["tier"].clone(), r["current_tier"].clone()))
        .collect();
    assert_eq!(
        tiers,
        [("free", "gold"), ("pro", "gold"), ("gold", "gold")].map(|(a, b)| (Some(a.to_string()), Some(b.to_string())))
    );
    assert_verified(&fx, true).await;
    assert_snapshot(
        "current_columns_show_the_current_value_on_every_row",
        "current_columns = [\"tier\"]: current_tier beside tier, the key's current tier on every row",
        &snap,
    );
}

/// Adding a Type 1 column and a `current_` twin to a loaded dimension is a change of the
/// column sets too: refused without `--accept-config-change`; accepted, it opens no
/// version and re-hashes nothing, records each key's Type 1 value as an observation and
/// shows both new columns on every row.
async fn adding_type1_and_current_columns_later_opens_no_version(mut fx: Fixture) {
    let insert = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";
    fx.exec(&format!(
        "{insert} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T11:00:00Z' WHERE customer_id = 1")
        .await;
    fx.run("2026-03-02T12:00:00Z").await;
    let before = fx.dimension().await;

    fx.with_type1_name().await;
    fx.edit_config("type1 = [\"name\"]", "type1 = [\"name\"]\ncurrent_columns = [\"tier\"]");
    fx.exec("UPDATE src_customers SET name = CASE customer_id WHEN 1 THEN 'Ann' ELSE 'Bob' END")
        .await;
    let upper = RunOptions {
        upper: Some(ts("2026-03-02T13:00:00Z")),
        ..RunOptions::incremental()
    };
    match fx.try_run_with(upper.clone()).await {
        Err(
            e @ dimlog::Error::Config(dimlog::config::ConfigError::NeedsStep {
                step: dimlog::config::NextStep::AcceptConfigChange,
                ..
            }),
        ) => {
            let message = e.to_string();
            assert!(
                message.contains("track.type1 added: name")
                    && message.contains("track.current_columns added: tier")
                    && message.contains("a run that accepts the change"),
                "{message}"
            );
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    assert_eq!(fx.count("customer_versions").await, 3, "the refusal wrote nothing");

    let r = fx
        .run_with(RunOptions {
            accept_config_change: true,
            ..upper
        })
        .await;
    assert_eq!(no_versions(&r), (0, 0, 0), "{r:?}");
    assert_eq!((r.rehashed, r.type1_updates), (0, 2), "{r:?}");
    let after = fx.dimension().await;
    for c in [
        "customer_sk",
        "customer_id",
        "tier",
        "valid_from",
        "valid_to",
        "is_current",
        "row_hash",
    ] {
        assert_eq!(after.values(c), before.values(c), "{c} changed");
    }
    let rows: Vec<_> = fx
        .dimension_with_current()
        .await
        .records()
        .into_iter()
        .map(|r| (r["customer_id"].clone(), r["name"].clone(), r["current_tier"].clone()))
        .collect();
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        rows,
        [
            (s("1"), s("Ann"), s("pro")),
            (s("1"), s("Ann"), s("pro")),
            (s("2"), s("Bob"), s("pro")),
        ]
    );
    let r = fx.run("2026-03-02T13:05:00Z").await;
    assert_eq!((no_versions(&r), r.type1_updates), ((0, 0, 0), 0));
    assert_verified(&fx, true).await;
}

/// A late delete lands between a version and the Type 1 observation after it: the key is
/// deleted from then on (an observation is no version). A row read again later with the
/// observation's values, stamped after the delete and before the watermark, brings the
/// key back as a new version; it must not pass for "the same as the key's newest row at
/// its instant" (that row is the observation, not a version it could equal).
async fn a_row_like_an_observation_behind_a_late_delete_opens_a_version(mut fx: Fixture) {
    fx.with_type1_name().await;
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', 'Ann', '2026-03-02T09:00:00Z')"
    ))
    .await;
    assert_eq!(fx.run("2026-03-02T10:00:00Z").await.counts.versions, 1);
    fx.exec("UPDATE src_customers SET name = 'Annie', updated_at = '2026-03-02T10:30:00Z'")
        .await;
    let r = fx.run("2026-03-02T11:00:00Z").await;
    assert_eq!((no_versions(&r), r.type1_updates), ((0, 0, 0), 1));
    // The delete, stamped before the observation, read by a full refresh; another key's
    // row moves the watermark to 11:00.
    fx.exec("UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T10:15:00Z'")
        .await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'pro', 'DE', 'Bob', '2026-03-02T11:00:00Z')"
    ))
    .await;
    let full_refresh = |upper: &str| RunOptions {
        kind: RunKind::FullRefresh,
        upper: Some(ts(upper)),
        ..RunOptions::incremental()
    };
    let r = fx.run_with(full_refresh("2026-03-02T12:00:00Z")).await;
    assert_eq!(no_versions(&r), (1, 0, 1), "{r:?}");
    fx.exec("UPDATE src_customers SET is_deleted = false, updated_at = '2026-03-02T10:40:00Z' WHERE customer_id = 1")
        .await;
    let r = fx.run_with(full_refresh("2026-03-02T13:00:00Z")).await;
    assert_eq!((no_versions(&r), r.type1_updates), ((1, 0, 0), 0), "{r:?}");
    assert_eq!(column_of(&mut fx, "1", "is_current").await, some(&["false", "true"]));
    assert_eq!(column_of(&mut fx, "1", "name").await, some(&["Annie", "Annie"]));
    assert_verified(&fx, true).await;
}
