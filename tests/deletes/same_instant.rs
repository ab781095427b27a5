//! Issue 21, item 3: a delete stamped at the same instant as a version, read in a later
//! load. Facts may already hold that version's surrogate key, so it never disappears: the
//! tombstone moves to the version's `valid_from` + 1 µs, the version keeps a 1 µs interval
//! (closed, not current), and `lookup` at the version's own time still finds it. `verify`
//! reports any surrogate key of the log's versions that the dimension lacks (a log written
//! before this rule, where such a tombstone replaced the version).

use dimlog::config::Backend;

use super::{assert_verify_passes, text, verify_cli};
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(
    a_delete_at_a_versions_own_time_keeps_its_surrogate_key,
    a_feed_delete_at_a_closed_versions_time_keeps_its_surrogate_key,
    a_reread_of_the_moved_delete_appends_nothing,
    verify_reports_a_surrogate_key_missing_from_the_dimension,
    a_delete_of_a_key_never_seen_is_counted_apart,
    a_feed_delete_of_a_key_never_seen_closes_a_late_version,
    a_delete_with_no_room_is_dropped_and_counted,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";
const FEED_INSERT: &str = "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES";

/// One key's dimension rows: `sk valid_from valid_to current tier`.
async fn rows_of(fx: &mut Fixture, key: &str) -> Vec<String> {
    fx.dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some(key))
        .map(|r| {
            let v = |c: &str| r[c].clone().unwrap_or_else(|| "NULL".into());
            format!(
                "{} {} {} {} {}",
                v("customer_sk"),
                v("valid_from"),
                v("valid_to"),
                v("is_current"),
                v("tier")
            )
        })
        .collect()
}

fn lookup(fx: &Fixture, key: &str, at: &str) -> String {
    let out = fx.cli(&["lookup", "--key", key, "--at", at]);
    assert!(out.status.success(), "lookup failed: {}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

async fn a_delete_at_a_versions_own_time_keeps_its_surrogate_key(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T09:30:00Z").await;
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T09:40:00Z' WHERE customer_id = 1")
        .await;
    fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(lookup(&fx, "1", "2026-03-02T09:40:00Z"), "2");
    // Deleted without moving updated_at: the lookback reads the delete at 09:40.
    fx.exec("UPDATE src_customers SET is_deleted = true WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T10:05:00Z").await;
    assert_eq!((r.counts.versions, r.counts.tombstones), (0, 1), "{r:?}");
    assert_eq!(
        rows_of(&mut fx, "1").await,
        [
            "1 2026-03-02T09:00:00.000000Z 2026-03-02T09:40:00.000000Z false free",
            "2 2026-03-02T09:40:00.000000Z 2026-03-02T09:40:00.000001Z false pro",
        ],
        "the 09:40 version keeps its surrogate key and a 1 µs interval"
    );
    let log = fx.log().await.records();
    let tombstone: Vec<_> = log
        .iter()
        .filter(|r| r["is_deleted"].as_deref() == Some("true"))
        .map(|r| r["valid_from"].clone().unwrap_or_default())
        .collect();
    assert_eq!(tombstone, ["2026-03-02T09:40:00.000001Z"]);
    fx.assert_dimension_derives_from_log().await;
    assert_eq!(lookup(&fx, "1", "2026-03-02T09:40:00Z"), "2");
    assert_eq!(lookup(&fx, "1", "2026-03-02T09:40:00.000001Z"), "-1");
    assert_verify_passes(&fx, false);
    assert_verify_passes(&fx, true);

    // The lookback reads the same delete again: nothing more.
    let r = fx.run("2026-03-02T10:10:00Z").await;
    assert_eq!(r.counts.tombstones, 0, "{r:?}");
    assert_eq!(rows_of(&mut fx, "1").await.len(), 2);
}

async fn a_feed_delete_at_a_closed_versions_time_keeps_its_surrogate_key(mut fx: Fixture) {
    fx.use_feed().await;
    fx.set_setting("lookback", "\"1h\"");
    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                       (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:20:00Z'),
                       (1, 'ann@example.com', 'gold', 'FR', '2026-03-02T09:40:00Z')"
    ))
    .await;
    fx.run("2026-03-02T09:50:00Z").await;
    fx.exec("UPDATE src_feed SET is_deleted = true WHERE customer_id = 1 AND updated_at = '2026-03-02T09:20:00Z'")
        .await;
    let r = fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!((r.counts.versions, r.counts.tombstones), (0, 1), "{r:?}");
    assert_eq!(
        rows_of(&mut fx, "1").await,
        [
            "1 2026-03-02T09:00:00.000000Z 2026-03-02T09:20:00.000000Z false free",
            "2 2026-03-02T09:20:00.000000Z 2026-03-02T09:20:00.000001Z false pro",
            "3 2026-03-02T09:40:00.000000Z 9999-12-31T00:00:00.000000Z true gold",
        ]
    );
    fx.assert_dimension_derives_from_log().await;
    assert_verify_passes(&fx, false);
    let r = fx.run("2026-03-02T10:05:00Z").await;
    assert_eq!(r.counts.tombstones, 0, "the same delete read again: {r:?}");
}

async fn a_reread_of_the_moved_delete_appends_nothing(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T09:30:00Z").await;
    fx.exec("UPDATE src_customers SET is_deleted = true WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T09:35:00Z").await;
    assert_eq!(r.counts.tombstones, 1, "{r:?}");
    assert_eq!(
        rows_of(&mut fx, "1").await,
        ["1 2026-03-02T09:00:00.000000Z 2026-03-02T09:00:00.000001Z false free"],
        "a key's only version stays, closed 1 µs after it opened"
    );
    let before = fx.count("customer_versions").await;
    for kind in [dimlog::state::RunKind::FullRefresh, dimlog::state::RunKind::Incremental] {
        let r = fx
            .run_with(dimlog::pipeline::RunOptions {
                upper: Some(crate::support::fixture::ts("2026-03-02T09:40:00Z")),
                kind,
                ..dimlog::pipeline::RunOptions::incremental()
            })
            .await;
        assert_eq!(r.counts.tombstones + r.counts.versions, 0, "{kind:?}: {r:?}");
    }
    assert_eq!(fx.count("customer_versions").await, before);
    assert_verify_passes(&fx, true);
}

/// A log written before the rule: a tombstone at a version's own `valid_from` replaced
/// that version in the dimension. `verify` names its surrogate key.
async fn verify_reports_a_surrogate_key_missing_from_the_dimension(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T09:30:00Z").await;
    let t = match fx.backend {
        Backend::Sqlite => "'2026-03-02T09:00:00.000000Z'",
        Backend::Postgres | Backend::Citus => "'2026-03-02T09:00:00Z'::timestamptz",
    };
    let truth = match fx.backend {
        Backend::Sqlite => "1",
        Backend::Postgres | Backend::Citus => "true",
    };
    fx.target_exec(&format!(
        "INSERT INTO customer_versions (log_id, customer_sk, customer_id, email, tier, country, valid_from, is_deleted, row_hash, load_id, loaded_at)
         SELECT max(log_id) + 1, NULL, 2, NULL, NULL, NULL, {t}, {truth}, NULL, max(load_id), max(loaded_at) FROM customer_versions;
         UPDATE dimlog_dimensions SET next_log_id = next_log_id + 1"
    ))
    .await;
    let out = fx.cli(&["rebuild"]);
    assert!(out.status.success(), "rebuild failed: {}", text(&out.stderr));
    let (code, failing) = verify_cli(&fx, false);
    assert_eq!(code, 3, "{failing:#?}");
    let examples = failing
        .get("sk_missing")
        .unwrap_or_else(|| panic!("no sk_missing finding: {failing:#?}"));
    assert_eq!(examples.len(), 1, "{examples:?}");
    assert!(
        examples[0].contains("surrogate key 2") && examples[0].contains("tombstone"),
        "{examples:?}"
    );
    let out = fx.cli(&["verify"]);
    let stderr = text(&out.stderr) + &text(&out.stdout);
    assert!(stderr.contains("assign-keys"), "the hint names what to do: {stderr}");
}

/// Issue 21, item 5: a delete of a key that has no version before it closes nothing, so
/// it is not counted as a tombstone but apart (`unseen_deletes`); its tombstone is still
/// logged (see the feed case below).
async fn a_delete_of_a_key_never_seen_is_counted_apart(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z');
         INSERT INTO src_customers (customer_id, email, tier, country, is_deleted, updated_at)
             VALUES (2, 'bob@example.com', 'pro', 'DE', true, '2026-03-02T09:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T09:30:00Z").await;
    assert_eq!(
        (r.counts.versions, r.counts.tombstones, r.unseen_deletes),
        (1, 0, 1),
        "first load: {r:?}"
    );
    fx.exec(
        "UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T09:40:00Z' WHERE customer_id = 1;
         INSERT INTO src_customers (customer_id, email, tier, country, is_deleted, updated_at)
             VALUES (3, 'cyd@example.com', 'pro', 'NL', true, '2026-03-02T09:40:00Z')",
    )
    .await;
    let out = fx.cli(&["run", "--upper", "2026-03-02T10:00:00Z"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(
        said.contains("1 tombstones") && said.contains("1 delete of a key never seen"),
        "{said}"
    );
    let runs = fx.runs().await.records();
    let last = runs.last().expect("a run");
    assert_eq!(last["tombstones"].as_deref(), Some("1"), "{last:?}");
    assert_verify_passes(&fx, true);
}

async fn a_feed_delete_of_a_key_never_seen_closes_a_late_version(mut fx: Fixture) {
    fx.use_feed().await;
    fx.set_setting("lookback", "\"1h\"");
    fx.exec(
        "INSERT INTO src_feed (customer_id, email, tier, country, is_deleted, updated_at)
             VALUES (5, NULL, NULL, NULL, true, '2026-03-02T10:00:00Z')",
    )
    .await;
    let r = fx.run("2026-03-02T10:05:00Z").await;
    assert_eq!((r.counts.tombstones, r.unseen_deletes), (0, 1), "{r:?}");
    fx.exec(&format!(
        "{FEED_INSERT} (5, 'eve@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T10:10:00Z").await;
    assert_eq!((r.counts.versions, r.counts.late_versions), (1, 1), "{r:?}");
    assert_eq!(
        rows_of(&mut fx, "5").await,
        ["1 2026-03-02T09:00:00.000000Z 2026-03-02T10:00:00.000000Z false pro"],
        "the late version is closed by the delete logged before it"
    );
    assert_verify_passes(&fx, false);
}

/// A feed delete at a version's own instant moves 1 µs later; when the key has another
/// live version exactly there, there is no room and the delete is dropped: counted in the
/// run's report (`dropped_deletes`) and warned about, never silent. The versions stay.
async fn a_delete_with_no_room_is_dropped_and_counted(mut fx: Fixture) {
    fx.use_feed().await;
    fx.set_setting("lookback", "\"1h\"");
    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                       (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:20:00Z'),
                       (1, 'ann@example.com', 'gold', 'FR', '2026-03-02T09:20:00.000001Z')"
    ))
    .await;
    fx.run("2026-03-02T09:50:00Z").await;
    let before = rows_of(&mut fx, "1").await;
    fx.exec("UPDATE src_feed SET is_deleted = true WHERE customer_id = 1 AND updated_at = '2026-03-02T09:20:00Z'")
        .await;
    let r = fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!((r.counts.tombstones, r.dropped_deletes), (0, 1), "{r:?}");
    assert_eq!(rows_of(&mut fx, "1").await, before, "the versions stay");
    fx.assert_dimension_derives_from_log().await;
    let out = fx.cli(&["run", "--upper", "2026-03-02T10:05:00Z", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["dropped_deletes"], 1, "{v}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("1 delete") && stderr.contains("dropped") && stderr.contains("customer_id"),
        "no warning: {stderr}"
    );
}
