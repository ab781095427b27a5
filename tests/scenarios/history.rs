//! History rewrites (spec 1.4, 1.5): every scenario snapshots the whole dimension and log
//! after each run, and every run checks that the dimension is the one derived from the log.

use crate::support::fixture::{assert_snapshot, on_every_engine, Fixture, SENTINEL};

on_every_engine!(
    late_version_in_the_middle,
    late_version_before_the_first,
    null_transition,
    soft_delete_and_return,
    correction_at_the_same_timestamp,
    rerun_over_the_lookback_changes_nothing,
);

const FEED_INSERT: &str = "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES";
const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

/// The surrogate keys of one customer's dimension rows, in valid_from order.
async fn surrogate_keys(fx: &mut Fixture, customer: &str) -> Vec<String> {
    fx.dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some(customer))
        .map(|r| r["customer_sk"].clone().expect("a surrogate key"))
        .collect()
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

/// (a) A change feed delivers a version late: it happened between two versions already
/// loaded, and arrives within the lookback. It slots in between them with a new surrogate
/// key, and the version before it is closed at its valid_from.
async fn late_version_in_the_middle(mut fx: Fixture) {
    fx.use_feed().await;
    fx.set_setting("lookback", "\"1h\"");
    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                       (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let (r, mut snap) = fx.step("2026-03-02T09:30:00Z").await;
    assert_eq!(r.counts.versions, 2);

    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:40:00Z')"
    ))
    .await;
    let (r, s) = fx.step("2026-03-02T10:00:00Z").await;
    snap += &s;
    assert_eq!((r.counts.versions, r.counts.late_versions), (1, 0));

    // Happened at 09:20, landed only now.
    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'basic', 'FR', '2026-03-02T09:20:00Z')"
    ))
    .await;
    let (r, s) = fx.step("2026-03-02T10:10:00Z").await;
    snap += &s;
    assert_eq!(r.counts.rows_read, 4, "the lookback re-reads the whole feed");
    assert_eq!((r.counts.versions, r.counts.late_versions), (1, 1));
    assert_eq!((r.counts.corrections, r.counts.tombstones), (0, 0));
    assert_eq!(surrogate_keys(&mut fx, "1").await, ["1", "4", "3"]);
    assert_eq!(
        column_of(&mut fx, "1", "valid_to").await,
        [
            Some("2026-03-02T09:20:00.000000Z".to_string()),
            Some("2026-03-02T09:40:00.000000Z".to_string()),
            Some(SENTINEL.to_string())
        ]
    );
    assert_snapshot(
        "late_version_in_the_middle",
        "change feed: customer 1 free@09:00, pro@09:40, then basic@09:20 arrives late",
        &snap,
    );
}

/// (b) A version older than the key's first one arrives late. It becomes the key's first
/// row, closed at the old first version; a late version equal to the version after it
/// still stays (surrogate keys are never merged away).
async fn late_version_before_the_first(mut fx: Fixture) {
    fx.use_feed().await;
    fx.set_setting("lookback", "\"1h\"");
    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:30:00Z'),
                       (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:30:00Z')"
    ))
    .await;
    let (_, mut snap) = fx.step("2026-03-02T10:00:00Z").await;

    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:10:00Z'),
                       (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:15:00Z')"
    ))
    .await;
    let (r, s) = fx.step("2026-03-02T10:05:00Z").await;
    snap += &s;
    assert_eq!((r.counts.versions, r.counts.late_versions), (2, 2));
    assert_eq!(surrogate_keys(&mut fx, "1").await, ["3", "1"]);
    assert_eq!(surrogate_keys(&mut fx, "2").await, ["4", "2"]);
    assert_eq!(
        column_of(&mut fx, "1", "valid_from").await,
        [
            Some("2026-03-02T09:10:00.000000Z".to_string()),
            Some("2026-03-02T09:30:00.000000Z".to_string())
        ]
    );
    assert_eq!(
        column_of(&mut fx, "1", "is_current").await,
        [Some("false".to_string()), Some("true".to_string())]
    );
    assert_snapshot(
        "late_version_before_the_first",
        "change feed: first versions at 09:30, then versions at 09:10 (different) and 09:15 (equal) arrive late",
        &snap,
    );
}

/// (c) A tracked column goes pro → NULL → pro: three versions. NULL, '' and the text
/// 'NULL' are three different values, so each move to NULL is a change.
async fn null_transition(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', '', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'NULL', 'NL', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let (_, mut snap) = fx.step("2026-03-02T09:30:00Z").await;

    fx.exec("UPDATE src_customers SET tier = NULL, updated_at = '2026-03-02T09:40:00Z'")
        .await;
    let (r, s) = fx.step("2026-03-02T10:00:00Z").await;
    snap += &s;
    assert_eq!(r.counts.versions, 3, "pro, '' and 'NULL' all differ from NULL");

    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T10:10:00Z' WHERE customer_id = 1")
        .await;
    let (r, s) = fx.step("2026-03-02T10:30:00Z").await;
    snap += &s;
    assert_eq!(r.counts.versions, 1);
    assert_eq!(
        column_of(&mut fx, "1", "tier").await,
        [Some("pro".to_string()), None, Some("pro".to_string())]
    );
    assert_eq!(surrogate_keys(&mut fx, "1").await, ["1", "4", "7"]);
    assert_eq!(
        column_of(&mut fx, "2", "tier").await,
        [Some(String::new()), None],
        "'' is not NULL"
    );
    let hashes = column_of(&mut fx, "1", "row_hash").await;
    assert_eq!(hashes[0], hashes[2], "the same values hash alike");
    assert_ne!(hashes[0], hashes[1]);
    assert_snapshot(
        "null_transition",
        "tier pro -> NULL -> pro for customer 1; '' -> NULL and 'NULL' -> NULL for customers 2 and 3",
        &snap,
    );
}

/// (d) A soft delete closes the key's version with a tombstone (not a dimension row, no
/// surrogate key); the key's return, even with the same values, opens a new version with
/// a new surrogate key.
async fn soft_delete_and_return(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let (_, mut snap) = fx.step("2026-03-02T09:30:00Z").await;

    fx.exec("UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T09:40:00Z' WHERE customer_id = 1")
        .await;
    let (r, s) = fx.step("2026-03-02T10:00:00Z").await;
    snap += &s;
    assert_eq!((r.counts.tombstones, r.counts.versions), (1, 0));
    assert_eq!(column_of(&mut fx, "1", "is_current").await, [Some("false".to_string())]);
    let tombstones: Vec<_> = fx
        .log()
        .await
        .records()
        .into_iter()
        .filter(|r| r["is_deleted"].as_deref() == Some("true"))
        .collect();
    assert_eq!(tombstones.len(), 1);
    assert_eq!(tombstones[0]["customer_sk"], None, "a tombstone has no surrogate key");
    assert_eq!(tombstones[0]["email"], None, "a tombstone carries no attributes");
    assert_eq!(tombstones[0]["row_hash"], None);

    // Re-reading the deleted row appends nothing: P already is a tombstone.
    let r = fx.run("2026-03-02T10:05:00Z").await;
    assert_eq!(r.counts.rows_read, 1);
    assert_eq!((r.counts.tombstones, r.counts.versions), (0, 0));

    fx.exec("UPDATE src_customers SET is_deleted = false, updated_at = '2026-03-02T10:10:00Z' WHERE customer_id = 1")
        .await;
    let (r, s) = fx.step("2026-03-02T10:30:00Z").await;
    snap += &s;
    assert_eq!((r.counts.versions, r.counts.tombstones), (1, 0));
    assert_eq!(surrogate_keys(&mut fx, "1").await, ["1", "3"]);
    assert_eq!(
        column_of(&mut fx, "1", "is_current").await,
        [Some("false".to_string()), Some("true".to_string())]
    );
    let hashes = column_of(&mut fx, "1", "row_hash").await;
    assert_eq!(hashes[0], hashes[1], "it came back with the same values");
    assert_snapshot(
        "soft_delete_and_return",
        "customer 1 soft-deleted at 09:40 and back with the same values at 10:10",
        &snap,
    );
}

/// (e) The source changes values without moving updated_at; the lookback re-reads the row
/// and a correction supersedes the version in place: same surrogate key, same valid_from.
async fn correction_at_the_same_timestamp(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let (_, mut snap) = fx.step("2026-03-02T09:05:00Z").await;

    fx.exec("UPDATE src_customers SET tier = 'pro' WHERE customer_id = 1")
        .await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:03:00Z')"
    ))
    .await;
    let (r, s) = fx.step("2026-03-02T09:10:00Z").await;
    snap += &s;
    assert_eq!((r.counts.corrections, r.counts.versions), (1, 1));
    assert_eq!(r.counts.rows_read, 2, "the lookback re-read the corrected row");
    assert_eq!(surrogate_keys(&mut fx, "1").await, ["1"]);
    assert_eq!(column_of(&mut fx, "1", "tier").await, [Some("pro".to_string())]);
    assert_eq!(column_of(&mut fx, "1", "load_id").await, [Some("2".to_string())]);
    assert_eq!(
        surrogate_keys(&mut fx, "2").await,
        ["2"],
        "a correction uses no surrogate key"
    );
    assert_eq!(
        fx.count("customer_versions").await,
        3,
        "the log keeps the superseded row"
    );
    assert_snapshot(
        "correction_at_the_same_timestamp",
        "customer 1 free@09:00 corrected to pro without moving updated_at",
        &snap,
    );
}

/// (f) Rerunning over a window that covers every change (new versions, a NULL, a
/// tombstone, a correction) appends nothing and leaves every table as it was.
async fn rerun_over_the_lookback_changes_nothing(mut fx: Fixture) {
    fx.set_setting("lookback", "\"2h\"");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:00:00Z'),
                  (4, 'dee@example.com', 'free', 'BE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let (_, mut snap) = fx.step("2026-03-02T09:30:00Z").await;

    fx.exec(
        "UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T09:40:00Z' WHERE customer_id = 1;
         UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T09:45:00Z' WHERE customer_id = 2;
         UPDATE src_customers SET country = NULL, updated_at = '2026-03-02T09:50:00Z' WHERE customer_id = 3;
         UPDATE src_customers SET email = 'dee@example.org' WHERE customer_id = 4",
    )
    .await;
    let (r, s) = fx.step("2026-03-02T10:00:00Z").await;
    snap += &s;
    assert_eq!(
        (r.counts.versions, r.counts.tombstones, r.counts.corrections),
        (2, 1, 1)
    );

    let dimension = fx.dimension().await;
    let log = fx.log().await;
    let state = fx.state().await;
    let runs_before = fx.count("dimlog_runs").await;
    // The same upper twice (a retry reads the same rows), then a later one.
    for (i, upper) in ["2026-03-02T10:30:00Z", "2026-03-02T10:30:00Z", "2026-03-02T10:45:00Z"]
        .into_iter()
        .enumerate()
    {
        let (r, s) = fx.step(upper).await;
        if i == 0 {
            snap += &s;
        }
        assert_eq!(r.counts.rows_read, 4, "the window covers every source row");
        assert_eq!(
            (
                r.counts.versions,
                r.counts.late_versions,
                r.counts.corrections,
                r.counts.tombstones
            ),
            (0, 0, 0, 0),
            "a rerun appended something"
        );
        assert_eq!(fx.dimension().await, dimension, "a rerun changed the dimension");
        assert_eq!(fx.log().await, log, "a rerun changed the log");
        assert_eq!(fx.state().await, state, "a rerun moved the watermark");
    }
    assert_eq!(fx.count("dimlog_runs").await, runs_before + 3);
    assert_snapshot(
        "rerun_over_the_lookback_changes_nothing",
        "a version, a tombstone, a NULL and a correction, then reruns over a 2h lookback",
        &snap,
    );
}
