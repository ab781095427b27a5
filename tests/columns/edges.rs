//! Issue 21, items 1 and 2: column changes at the edges of history.
//!
//! - `--accept-config-change` on a change feed (`history = "all"`) adds a Type 2 column
//!   without opening or correcting any version: rows read before the change are history
//!   under the old column set; only rows read after the change may open versions.
//! - A Type 2 column removed, then added back: the dimension shows the log's values where
//!   the log recorded them, NULL only where it never recorded one, and a value that changed
//!   while the column was not tracked is a version at the source row's own time, never
//!   shown from an earlier time.

use dimlog::pipeline::{RunOptions, RunReport};

use super::assert_verified;
use crate::support::fixture::{on_both_backends, ts, Fixture};

on_both_backends!(
    adding_a_column_to_a_feed_opens_and_corrects_nothing,
    a_readded_column_shows_the_logs_values,
    a_readded_column_unchanged_while_removed_is_carried_over,
    a_column_change_never_flips_a_tie_between_a_change_and_a_delete,
    a_type1_column_made_type2_keeps_the_history_it_showed,
);

const FEED_INSERT: &str = "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES";
const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

fn accepting(upper: &str) -> RunOptions {
    RunOptions {
        upper: Some(ts(upper)),
        accept_config_change: true,
        ..RunOptions::incremental()
    }
}

/// `(versions, late, corrections, tombstones)`.
fn appended(r: &RunReport) -> (i64, i64, i64, i64) {
    (
        r.counts.versions,
        r.counts.late_versions,
        r.counts.corrections,
        r.counts.tombstones,
    )
}

/// Key 1's dimension rows: `sk valid_from-valid_to[ current]: tier|country`.
async fn rows_of(fx: &mut Fixture, key: &str) -> Vec<String> {
    fx.dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some(key))
        .map(|r| {
            let v = |c: &str| r.get(c).cloned().flatten().unwrap_or_else(|| "NULL".into());
            let day = |t: String| t.get(5..13).map(str::to_string).unwrap_or(t);
            format!(
                "{} {}-{}{}: {}|{}",
                v("customer_sk"),
                day(v("valid_from")),
                day(v("valid_to")),
                if v("is_current") == "true" { " current" } else { "" },
                v("tier"),
                v("country")
            )
        })
        .collect()
}

async fn adding_a_column_to_a_feed_opens_and_corrects_nothing(mut fx: Fixture) {
    fx.use_feed().await;
    fx.set_setting("columns", r#"["tier"]"#);
    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'a', 'x', '2026-03-01T09:00:00Z'),
                       (1, 'ann@example.com', 'a', 'y', '2026-03-02T09:00:00Z'),
                       (1, 'ann@example.com', 'b', 'y', '2026-03-03T09:00:00Z'),
                       (2, 'bob@example.com', 'a', 'x', '2026-03-01T09:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-03T10:00:00Z").await;
    assert_eq!(appended(&r), (3, 0, 0, 0), "{r:?}");
    assert_eq!(
        rows_of(&mut fx, "1").await,
        ["1 03-01T09-03-03T09: a|NULL", "2 03-03T09-12-31T00 current: b|NULL"]
    );

    // An event not read yet: read after the change, it may open a version.
    fx.exec(&format!(
        "{FEED_INSERT} (2, 'bob@example.com', 'a', 'z', '2026-03-04T09:00:00Z')"
    ))
    .await;
    fx.set_setting("columns", r#"["tier", "country"]"#);
    let r = fx.run_with(accepting("2026-03-04T10:00:00Z")).await;
    assert_eq!(
        appended(&r),
        (1, 0, 0, 0),
        "only key 2's new event opens a version: {r:?}"
    );
    assert_eq!(r.rehashed, 2, "both current versions carried over: {r:?}");
    assert_eq!(
        rows_of(&mut fx, "1").await,
        ["1 03-01T09-03-03T09: a|NULL", "2 03-03T09-12-31T00 current: b|y"],
        "no version at 03-02, the earlier version holds NULL"
    );
    assert_eq!(
        rows_of(&mut fx, "2").await,
        ["3 03-01T09-03-04T09: a|x", "4 03-04T09-12-31T00 current: a|z"]
    );
    assert_verified(&fx, true).await;

    // Later runs re-read the old events (lookback, full refresh): still nothing.
    let r = fx
        .run_with(RunOptions {
            upper: Some(ts("2026-03-04T11:00:00Z")),
            kind: dimlog::state::RunKind::FullRefresh,
            ..RunOptions::incremental()
        })
        .await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");

    // A key the log does not hold, stamped before the change but written after it, is
    // new and loads (it was left alone with the re-read history, and never loaded). A
    // late event of a key the log holds stays history under the old column set.
    fx.exec(&format!(
        "{FEED_INSERT} (3, 'cy@example.com', 'a', 'x', '2026-03-04T09:45:00Z'),
                       (2, 'bob@example.com', 'b', 'x', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let r = fx
        .run_with(RunOptions {
            upper: Some(ts("2026-03-04T12:00:00Z")),
            kind: dimlog::state::RunKind::FullRefresh,
            ..RunOptions::incremental()
        })
        .await;
    assert_eq!(appended(&r).0, 1, "the new key: {r:?}");
    assert_eq!(rows_of(&mut fx, "3").await, ["5 03-04T09-12-31T00 current: a|x"]);
    assert_eq!(
        rows_of(&mut fx, "2").await,
        ["3 03-01T09-03-04T09: a|x", "4 03-04T09-12-31T00 current: a|z"]
    );
    assert_verified(&fx, true).await;
}

/// (1, pro, DE) tracked [tier, country]; tier removed; country → BE on 03-02; tier →
/// platinum on 03-03; tier added back.
async fn a_readded_column_shows_the_logs_values(mut fx: Fixture) {
    fx.set_setting("columns", r#"["tier", "country"]"#);
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'DE', '2026-03-01T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-01T10:00:00Z").await;
    fx.set_setting("columns", r#"["country"]"#);
    let r = fx.run_with(accepting("2026-03-01T11:00:00Z")).await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
    fx.exec("UPDATE src_customers SET country = 'BE', updated_at = '2026-03-02T09:00:00Z' WHERE customer_id = 1")
        .await;
    assert_eq!(appended(&fx.run("2026-03-02T10:00:00Z").await), (1, 0, 0, 0));
    fx.exec("UPDATE src_customers SET tier = 'platinum', updated_at = '2026-03-03T09:00:00Z' WHERE customer_id = 1")
        .await;
    assert_eq!(appended(&fx.run("2026-03-03T10:00:00Z").await), (0, 0, 0, 0));

    fx.set_setting("columns", r#"["tier", "country"]"#);
    let r = fx.run_with(accepting("2026-03-03T11:00:00Z")).await;
    assert_eq!(
        appended(&r),
        (1, 0, 0, 0),
        "tier changed while it was not tracked: a version at the row's own time: {r:?}"
    );
    assert_eq!(
        rows_of(&mut fx, "1").await,
        [
            "1 03-01T09-03-02T09: pro|DE",
            "2 03-02T09-03-03T09: NULL|BE",
            "3 03-03T09-12-31T00 current: platinum|BE",
        ],
        "sk 1 shows the logged `pro`; sk 2 never recorded a tier"
    );
    assert_verified(&fx, true).await;
    let r = fx.run("2026-03-03T12:00:00Z").await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
}

/// The same, but tier did not change while it was removed: the current version is
/// carried over with it, no version opens.
async fn a_readded_column_unchanged_while_removed_is_carried_over(mut fx: Fixture) {
    fx.set_setting("columns", r#"["tier", "country"]"#);
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'DE', '2026-03-01T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-01T10:00:00Z").await;
    fx.set_setting("columns", r#"["country"]"#);
    fx.run_with(accepting("2026-03-01T11:00:00Z")).await;
    fx.exec("UPDATE src_customers SET country = 'BE', updated_at = '2026-03-02T09:00:00Z' WHERE customer_id = 1")
        .await;
    fx.run("2026-03-02T10:00:00Z").await;

    fx.set_setting("columns", r#"["tier", "country"]"#);
    let r = fx.run_with(accepting("2026-03-02T11:00:00Z")).await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
    assert_eq!(r.rehashed, 1, "{r:?}");
    assert_eq!(
        rows_of(&mut fx, "1").await,
        ["1 03-01T09-03-02T09: pro|DE", "2 03-02T09-12-31T00 current: pro|BE",]
    );
    assert_verified(&fx, true).await;
}

/// A live row and a delete of one key at one instant: the delete wins, whatever columns
/// are tracked, so accepting a column change (adding, then removing one) opens, revives
/// and deletes nothing. (The tie went by a hash of the tracked columns, and a column
/// change brought deleted keys back.)
async fn a_column_change_never_flips_a_tie_between_a_change_and_a_delete(mut fx: Fixture) {
    fx.use_feed().await;
    fx.set_setting("columns", r#"["tier"]"#);
    let mut rows = Vec::new();
    for k in 1..=40 {
        rows.push(format!(
            "({k}, 'k{k}@example.com', 'x', 'a{k}', false, '2026-03-01T09:00:00Z')"
        ));
        rows.push(format!(
            "({k}, 'k{k}@example.com', 'x', 'b{k}', true, '2026-03-01T09:00:00Z')"
        ));
    }
    fx.exec(&format!(
        "INSERT INTO src_feed (customer_id, email, tier, country, is_deleted, updated_at) VALUES {}",
        rows.join(", ")
    ))
    .await;
    fx.run("2026-03-01T10:00:00Z").await;
    assert_eq!(fx.count("dim_customer").await, 0, "every tie is a delete");
    for columns in [r#"["tier", "country"]"#, r#"["tier"]"#] {
        fx.set_setting("columns", columns);
        let r = fx.run_with(accepting("2026-03-01T11:00:00Z")).await;
        assert_eq!(
            (r.counts.versions, r.counts.revived, r.counts.tombstones),
            (0, 0, 0),
            "{columns}: {r:?}"
        );
        assert_eq!(fx.count("dim_customer").await, 0, "{columns}");
    }
}

/// A Type 1 column moved to Type 2: the dimension showed each key's latest Type 1 value
/// on every row; accepting the change carries the current version over with that value
/// (same surrogate key and valid_from) and opens no version for Type 1 edits made before
/// the change (they were logged as observations, which the check for a column added back
/// did not read: an edit of 10:00 became a version at 10:00, and facts assigned to the
/// old version after 10:00 silently pointed at the wrong one; found by an outside trial).
/// A change after the move opens a version as usual.
async fn a_type1_column_made_type2_keeps_the_history_it_showed(mut fx: Fixture) {
    fx.with_type1_name().await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at, name) VALUES \
         (1, 'ann@example.com', 'pro', 'DE', '2026-03-01T09:00:00Z', 'Ann'), \
         (2, 'bob@example.com', 'free', 'FR', '2026-03-01T09:00:00Z', 'Bob')",
    )
    .await;
    fx.run("2026-03-01T09:30:00Z").await;
    fx.exec("UPDATE src_customers SET name = 'Anna', updated_at = '2026-03-01T10:00:00Z' WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-01T10:30:00Z").await;
    assert_eq!((r.counts.versions, r.type1_updates), (0, 1), "{r:?}");
    let sk_before = fx.dimension().await.values("customer_sk");

    fx.edit_config(
        "columns = [\"email\", \"tier\", \"country\"]\ntype1 = [\"name\"]",
        "columns = [\"email\", \"tier\", \"country\", \"name\"]",
    );
    let r = fx.run_with(accepting("2026-03-01T11:00:00Z")).await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
    let dim = fx.dimension().await;
    assert_eq!(dim.values("customer_sk"), sk_before, "{dim:?}");
    let names: Vec<(Option<String>, Option<String>, Option<String>)> = dim
        .records()
        .into_iter()
        .map(|r| (r["customer_id"].clone(), r["name"].clone(), r["valid_from"].clone()))
        .collect();
    assert_eq!(
        names,
        [
            (
                Some("1".into()),
                Some("Anna".into()),
                Some("2026-03-01T09:00:00.000000Z".into())
            ),
            (
                Some("2".into()),
                Some("Bob".into()),
                Some("2026-03-01T09:00:00.000000Z".into())
            ),
        ],
        "{dim:?}"
    );
    // A rerun and a full refresh change nothing; a change of name now opens a version.
    let r = fx
        .run_with(RunOptions {
            kind: dimlog::state::RunKind::FullRefresh,
            upper: Some(ts("2026-03-01T11:30:00Z")),
            ..RunOptions::incremental()
        })
        .await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
    fx.exec("UPDATE src_customers SET name = 'Anne', updated_at = '2026-03-01T12:00:00Z' WHERE customer_id = 1")
        .await;
    assert_eq!(appended(&fx.run("2026-03-01T12:30:00Z").await), (1, 0, 0, 0));
    assert_verified(&fx, true).await;
}
