//! Revival (spec 1.4, issue 14 item 8): a key whose newest log row is a tombstone and that
//! the source holds live again with an `updated_at` not later than the tombstone (a row
//! restored from a backup, as dbt's own snapshot tests do) is revived by reconciliation and
//! by a full refresh: a new version with a new surrogate key at the run's upper bound, or
//! just after the tombstone if that is later. A change feed keeps such a row as a late
//! version. Reconciliation also loads a key the source holds that the dimension never saw
//! (inserted with a timestamp behind the window): no source row stays invisible.

use dimlog::config::Backend;
use dimlog::pipeline::RunOptions;
use dimlog::state::RunKind;

use super::{assert_verify_passes, verify_cli};
use crate::support::fixture::{assert_snapshot, on_both_backends, ts, Fixture};

on_both_backends!(
    a_restored_row_is_revived_by_reconciliation,
    a_restored_row_is_revived_by_a_full_refresh,
    a_soft_deleted_key_restored_with_its_old_stamp_is_revived,
    revival_after_a_tombstone_later_than_upper_opens_just_after_it,
    a_plain_run_that_reads_a_restored_row_revives_it,
    a_plain_run_does_not_revive_a_row_behind_its_window,
    reconciliation_closes_a_key_flagged_deleted_behind_every_window,
    a_change_stamped_between_the_tombstone_and_the_revival_is_the_state_now,
    a_delete_stamped_between_the_tombstone_and_the_revival_is_the_state_now,
    a_change_feed_keeps_an_earlier_row_as_a_late_version,
    reconciliation_loads_a_key_stamped_behind_the_window,
    a_late_delete_read_again_appends_nothing,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

fn opts(upper: &str, kind: RunKind, reconcile: bool) -> RunOptions {
    RunOptions {
        upper: Some(ts(upper)),
        kind,
        reconcile_deletes: reconcile,
        allow_mass_delete: true,
        ..RunOptions::incremental()
    }
}

/// Key 2's dimension rows: (surrogate key, valid_from, valid_to, is_current, tier).
async fn rows_of(fx: &mut Fixture, key: &str) -> Vec<[String; 5]> {
    fx.dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some(key))
        .map(|r| {
            let v = |c: &str| r[c].clone().unwrap_or_else(|| "NULL".into());
            [
                v("customer_sk"),
                v("valid_from"),
                v("valid_to"),
                v("is_current"),
                v("tier"),
            ]
        })
        .collect()
}

/// Three keys loaded at 09:00; key 2 hard-deleted and reconciled at 11:00; then restored in
/// the source with its original row.
async fn deleted_then_restored(fx: &mut Fixture) -> String {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let (_, mut snap) = fx.step("2026-03-02T10:00:00Z").await;
    fx.exec("DELETE FROM src_customers WHERE customer_id = 2").await;
    let r = fx
        .run_with(opts("2026-03-02T11:00:00Z", RunKind::Incremental, true))
        .await;
    assert_eq!(r.counts.tombstones, 1, "{r:?}");
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    snap += &format!(
        "== key 2 deleted at 11:00, restored with its 09:00 row\n{}\n",
        fx.dump_log().await
    );
    snap
}

async fn a_restored_row_is_revived_by_reconciliation(mut fx: Fixture) {
    let mut snap = deleted_then_restored(&mut fx).await;
    let r = fx
        .run_with(opts("2026-03-02T12:00:00Z", RunKind::Incremental, true))
        .await;
    assert_eq!(
        (r.counts.revived, r.counts.versions, r.counts.tombstones),
        (1, 1, 0),
        "{r:?}"
    );
    fx.assert_dimension_derives_from_log().await;
    assert_eq!(
        rows_of(&mut fx, "2").await,
        [
            [
                "2",
                "2026-03-02T09:00:00.000000Z",
                "2026-03-02T11:00:00.000000Z",
                "false",
                "free"
            ],
            [
                "4",
                "2026-03-02T12:00:00.000000Z",
                "9999-12-31T00:00:00.000000Z",
                "true",
                "free"
            ],
        ]
        .map(|r| r.map(String::from))
    );
    let runs = fx.runs().await;
    assert_eq!(
        runs.records().pop().unwrap()["revived"].as_deref(),
        Some("1"),
        "{runs:?}"
    );
    assert_verify_passes(&fx, true);
    // A second reconciliation finds nothing more to do.
    let r = fx
        .run_with(opts("2026-03-02T13:00:00Z", RunKind::Incremental, true))
        .await;
    assert_eq!((r.counts.revived, r.counts.versions), (0, 0), "{r:?}");
    snap += &format!(
        "== reconciled at 12:00\n{}\n{}\n",
        fx.dump_dimension().await,
        fx.dump_log().await
    );
    assert_snapshot(
        "revived_by_reconciliation",
        "a key restored with its old row, reconciled",
        &snap,
    );
}

async fn a_restored_row_is_revived_by_a_full_refresh(mut fx: Fixture) {
    deleted_then_restored(&mut fx).await;
    // verify names the key and a fix that works.
    let (code, failing) = verify_cli(&fx, true);
    assert_eq!(code, 3, "{failing:?}");
    let r = fx
        .run_with(opts("2026-03-02T12:00:00Z", RunKind::FullRefresh, false))
        .await;
    assert_eq!((r.counts.revived, r.counts.versions), (1, 1), "{r:?}");
    fx.assert_dimension_derives_from_log().await;
    let rows = rows_of(&mut fx, "2").await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1][1], "2026-03-02T12:00:00.000000Z");
    assert_eq!(rows[1][3], "true");
    assert_verify_passes(&fx, true);
    // Through the binary: the count is in --json and in the summary line.
    let out = fx.cli(&["run", "--full-refresh", "--json", "--upper", "2026-03-02T12:30:00Z"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["revived"], 0, "{json}");
}

/// A soft delete at 10:30, then the row restored live with its 09:00 stamp (the flag
/// cleared, `updated_at` put back): revived by a full refresh.
async fn a_soft_deleted_key_restored_with_its_old_stamp_is_revived(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T10:30:00Z'")
        .await;
    assert_eq!(fx.run("2026-03-02T11:00:00Z").await.counts.tombstones, 1);
    fx.exec("UPDATE src_customers SET is_deleted = false, updated_at = '2026-03-02T09:00:00Z'")
        .await;
    let r = fx
        .run_with(opts("2026-03-02T12:00:00Z", RunKind::FullRefresh, false))
        .await;
    assert_eq!((r.counts.revived, r.counts.versions), (1, 1), "{r:?}");
    assert_eq!(
        rows_of(&mut fx, "1").await,
        [
            [
                "1",
                "2026-03-02T09:00:00.000000Z",
                "2026-03-02T10:30:00.000000Z",
                "false",
                "pro"
            ],
            [
                "2",
                "2026-03-02T12:00:00.000000Z",
                "9999-12-31T00:00:00.000000Z",
                "true",
                "pro"
            ],
        ]
        .map(|r| r.map(String::from))
    );
    assert_verify_passes(&fx, true);
}

/// The tombstone stands at 11:00; a reconciliation with `--upper 10:50` (inside the
/// window) revives 1 µs after the tombstone, never before it.
async fn revival_after_a_tombstone_later_than_upper_opens_just_after_it(mut fx: Fixture) {
    deleted_then_restored(&mut fx).await;
    let r = fx
        .run_with(opts("2026-03-02T10:50:00Z", RunKind::Incremental, true))
        .await;
    assert_eq!(r.counts.revived, 1, "{r:?}");
    fx.assert_dimension_derives_from_log().await;
    let rows = rows_of(&mut fx, "2").await;
    assert_eq!(rows[1][1], "2026-03-02T11:00:00.000001Z", "{rows:?}");
    assert_eq!(rows[0][2], "2026-03-02T11:00:00.000000Z", "{rows:?}");
}

/// A plain run that reads the restored row (its 09:00 stamp is inside the window) knows
/// the source holds the key live again: it revives it like reconciliation does.
async fn a_plain_run_that_reads_a_restored_row_revives_it(mut fx: Fixture) {
    deleted_then_restored(&mut fx).await;
    let r = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!(
        (r.counts.revived, r.counts.versions, r.counts.rows_read),
        (1, 1, 3),
        "{r:?}"
    );
    let rows = rows_of(&mut fx, "2").await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1][1], "2026-03-02T12:00:00.000000Z", "{rows:?}");
    assert_verify_passes(&fx, true);
}

/// Keys 1 and 2 loaded at 09:00 (run at 10:00); key 2 hard-deleted and reconciled at 11:00.
async fn two_keys_then_2_deleted(fx: &mut Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("DELETE FROM src_customers WHERE customer_id = 2").await;
    let r = fx
        .run_with(opts("2026-03-02T11:00:00Z", RunKind::Incremental, true))
        .await;
    assert_eq!(r.counts.tombstones, 1, "{r:?}");
}

/// A row restored with a stamp behind the window is not read by a plain run, so nothing
/// is revived until reconciliation compares the key lists.
async fn a_plain_run_does_not_revive_a_row_behind_its_window(mut fx: Fixture) {
    two_keys_then_2_deleted(&mut fx).await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-01T09:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!((r.counts.revived, r.counts.versions), (0, 0), "{r:?}");
    assert_eq!(rows_of(&mut fx, "2").await.len(), 1);
    let r = fx
        .run_with(opts("2026-03-02T13:00:00Z", RunKind::Incremental, true))
        .await;
    assert_eq!((r.counts.revived, r.counts.versions), (1, 1), "{r:?}");
}

/// On a change feed (`history = "all"`) an earlier row is a late version, before the
/// tombstone, even in a full refresh.
async fn a_change_feed_keeps_an_earlier_row_as_a_late_version(mut fx: Fixture) {
    fx.use_feed().await;
    fx.exec(
        "INSERT INTO src_feed (customer_id, email, tier, country, is_deleted, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', false, '2026-03-02T09:00:00Z'),
             (1, 'ann@example.com', 'free', 'FR', true, '2026-03-02T10:30:00Z')",
    )
    .await;
    fx.run("2026-03-02T11:00:00Z").await;
    fx.exec(
        "INSERT INTO src_feed (customer_id, email, tier, country, is_deleted, updated_at) VALUES
             (1, 'ann@example.com', 'pro', 'FR', false, '2026-03-02T10:00:00Z')",
    )
    .await;
    let r = fx
        .run_with(opts("2026-03-02T12:00:00Z", RunKind::FullRefresh, false))
        .await;
    assert_eq!((r.counts.revived, r.counts.late_versions), (0, 1), "{r:?}");
    let rows = rows_of(&mut fx, "1").await;
    assert!(rows.iter().all(|r| r[3] == "false"), "{rows:?}");
    assert_eq!(rows.last().unwrap()[2], "2026-03-02T10:30:00.000000Z", "{rows:?}");
}

/// A key inserted with a stamp behind the window is invisible to every incremental read;
/// reconciliation compares the full key list and loads it, at its own timestamp.
async fn reconciliation_loads_a_key_stamped_behind_the_window(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-01T09:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T11:00:00Z").await;
    assert_eq!(r.counts.versions, 0, "{r:?}");
    let r = fx
        .run_with(opts("2026-03-02T12:00:00Z", RunKind::Incremental, true))
        .await;
    assert_eq!(
        (r.counts.versions, r.counts.revived, r.counts.tombstones),
        (1, 0, 0),
        "{r:?}"
    );
    assert_eq!(
        rows_of(&mut fx, "2").await,
        [[
            "2",
            "2026-03-01T09:00:00.000000Z",
            "9999-12-31T00:00:00.000000Z",
            "true",
            "free"
        ]]
        .map(|r| r.map(String::from))
    );
    assert_verify_passes(&fx, true);
}

/// How a run after the restore reads the source.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// An incremental run whose window holds the restored row.
    Plain,
    Reconcile,
    FullRefresh,
}

const WAYS: [Way; 3] = [Way::Plain, Way::Reconcile, Way::FullRefresh];

fn way(upper: &str, way: Way) -> RunOptions {
    match way {
        Way::Plain => opts(upper, RunKind::Incremental, false),
        Way::Reconcile => opts(upper, RunKind::Incremental, true),
        Way::FullRefresh => opts(upper, RunKind::FullRefresh, false),
    }
}

/// Revival happens once, whatever reads the restored row and whatever it holds: key 2
/// (`free` at 09:00) is deleted and reconciled at 11:00, then restored with the same or
/// other values, stamped before its version, at it, between it and the tombstone, or at
/// the tombstone. The first run of any way opens one version at its upper bound; every
/// later run of every way appends nothing (no correction of the old version, no late
/// copy), and the source agrees with the dimension. When the restored row then changes
/// again in place (its stamp still old), the next run opens one version at its upper
/// bound, and reruns again append nothing.
async fn revival_settles_once_whatever_the_row_and_the_way(backend: Backend) {
    let mut cases = 0;
    for tier in ["free", "gold"] {
        for stamp in ["08:50", "09:00", "10:00", "11:00"] {
            for first in WAYS {
                let case = format!("restored {tier} at {stamp}, first read by {first:?}");
                let mut fx = Fixture::on(backend).await;
                two_keys_then_2_deleted(&mut fx).await;
                fx.exec(&format!(
                    "{INSERT} (2, 'bob@example.com', '{tier}', 'DE', '2026-03-02T{stamp}:00Z')"
                ))
                .await;
                let r = fx.run_with(way("2026-03-02T12:00:00Z", first)).await;
                assert_eq!(
                    (r.counts.revived, r.counts.versions, r.counts.corrections),
                    (1, 1, 0),
                    "{case}: {r:?}"
                );
                let current = |rows: &[[String; 5]]| {
                    rows.iter()
                        .filter(|r| r[3] == "true")
                        .map(|r| (r[1].clone(), r[4].clone()))
                        .collect::<Vec<_>>()
                };
                let rows = rows_of(&mut fx, "2").await;
                assert_eq!(
                    current(&rows),
                    [("2026-03-02T12:00:00.000000Z".to_string(), tier.to_string())],
                    "{case}: {rows:?}"
                );
                let log_rows = fx.count("customer_versions").await;
                for (i, later) in WAYS.iter().enumerate() {
                    let upper = format!("2026-03-02T12:{}0:00Z", i + 1);
                    let r = fx.run_with(way(&upper, *later)).await;
                    assert_eq!(
                        (
                            r.counts.versions,
                            r.counts.corrections,
                            r.counts.revived,
                            r.counts.tombstones
                        ),
                        (0, 0, 0, 0),
                        "{case}, then {later:?}: {r:?}"
                    );
                }
                assert_eq!(
                    fx.count("customer_versions").await,
                    log_rows,
                    "{case}: {}",
                    fx.dump_log().await
                );
                fx.assert_dimension_derives_from_log().await;
                assert_verify_passes(&fx, true);

                // The restored row changes again, its stamp still behind the tombstone.
                fx.exec("UPDATE src_customers SET tier = 'platinum' WHERE customer_id = 2")
                    .await;
                let r = fx.run_with(way("2026-03-02T13:00:00Z", first)).await;
                assert_eq!(
                    (
                        r.counts.versions,
                        r.counts.late_versions,
                        r.counts.corrections,
                        r.counts.revived
                    ),
                    (1, 0, 0, 0),
                    "{case}, changed again: {r:?}"
                );
                let rows = rows_of(&mut fx, "2").await;
                assert_eq!(
                    current(&rows),
                    [("2026-03-02T13:00:00.000000Z".to_string(), "platinum".to_string())],
                    "{case}, changed again: {rows:?}"
                );
                let log_rows = fx.count("customer_versions").await;
                for (i, later) in WAYS.iter().enumerate() {
                    let upper = format!("2026-03-02T13:{}0:00Z", i + 1);
                    let r = fx.run_with(way(&upper, *later)).await;
                    assert_eq!(
                        (r.counts.versions, r.counts.corrections, r.counts.revived),
                        (0, 0, 0),
                        "{case}, changed again, then {later:?}: {r:?}"
                    );
                }
                assert_eq!(
                    fx.count("customer_versions").await,
                    log_rows,
                    "{case}: {}",
                    fx.dump_log().await
                );
                assert_verify_passes(&fx, true);

                // Then soft-deleted, its stamp still stale: the key is deleted now, at the
                // upper bound; no version behind it is touched.
                let rows_before = rows_of(&mut fx, "2").await;
                fx.exec("UPDATE src_customers SET is_deleted = true WHERE customer_id = 2")
                    .await;
                let r = fx.run_with(way("2026-03-02T14:00:00Z", first)).await;
                assert_eq!(
                    (r.counts.tombstones, r.counts.versions, r.counts.corrections),
                    (1, 0, 0),
                    "{case}, deleted with a stale stamp: {r:?}"
                );
                let rows = rows_of(&mut fx, "2").await;
                assert_eq!(rows.len(), rows_before.len(), "{case}: {rows:?}");
                assert_eq!(current(&rows), [], "{case}, deleted: {rows:?}");
                assert_eq!(
                    rows.last().map(|r| r[2].as_str()),
                    Some("2026-03-02T14:00:00.000000Z"),
                    "{case}, deleted: {rows:?}"
                );
                for (i, later) in WAYS.iter().enumerate() {
                    let upper = format!("2026-03-02T14:{}0:00Z", i + 1);
                    let r = fx.run_with(way(&upper, *later)).await;
                    assert_eq!(
                        (r.counts.versions, r.counts.corrections, r.counts.tombstones),
                        (0, 0, 0),
                        "{case}, deleted, then {later:?}: {r:?}"
                    );
                }
                fx.assert_dimension_derives_from_log().await;
                assert_verify_passes(&fx, true);

                // And un-deleted again, still stale: revived once more.
                fx.exec("UPDATE src_customers SET is_deleted = false WHERE customer_id = 2")
                    .await;
                let r = fx.run_with(way("2026-03-02T15:00:00Z", first)).await;
                assert_eq!(
                    (r.counts.revived, r.counts.versions),
                    (1, 1),
                    "{case}, back again: {r:?}"
                );
                let rows = rows_of(&mut fx, "2").await;
                assert_eq!(
                    current(&rows),
                    [("2026-03-02T15:00:00.000000Z".to_string(), "platinum".to_string())],
                    "{case}, back again: {rows:?}"
                );
                assert_verify_passes(&fx, true);
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 24);
}

mod revival_settles_once_whatever_the_row_and_the_way {
    use dimlog::config::Backend;

    #[tokio::test]
    async fn sqlite() {
        super::revival_settles_once_whatever_the_row_and_the_way(Backend::Sqlite).await;
    }

    #[tokio::test]
    async fn postgres() {
        super::revival_settles_once_whatever_the_row_and_the_way(Backend::Postgres).await;
    }
}

/// A revived key's row stamped between its tombstone (11:00) and its revival (12:00) is
/// still the key's state now: a change opens a version at the run's upper bound and a
/// soft delete closes the revived version there, instead of a late version or tombstone
/// in the gap that leaves the revived values current.
async fn stamped_between_the_tombstone_and_the_revival(fx: &mut Fixture, update: &str, current_tier: Option<&str>) {
    two_keys_then_2_deleted(fx).await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!(r.counts.revived, 1, "{r:?}");
    fx.exec(&format!(
        "UPDATE src_customers SET {update}, updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 2"
    ))
    .await;
    let r = fx.run("2026-03-02T13:00:00Z").await;
    assert_eq!(r.counts.late_versions, 0, "{update}: {r:?}");
    let rows = rows_of(fx, "2").await;
    let current: Vec<_> = rows
        .iter()
        .filter(|r| r[3] == "true")
        .map(|r| (r[1].as_str(), r[4].as_str()))
        .collect();
    match current_tier {
        Some(tier) => assert_eq!(current, [("2026-03-02T13:00:00.000000Z", tier)], "{update}: {rows:?}"),
        None => {
            assert_eq!(current, [], "{update}: {rows:?}");
            assert_eq!(
                rows.last().unwrap()[2],
                "2026-03-02T13:00:00.000000Z",
                "{update}: {rows:?}"
            );
        }
    }
    let log_rows = fx.count("customer_versions").await;
    for upper in ["2026-03-02T13:10:00Z", "2026-03-02T13:20:00Z"] {
        fx.run_with(opts(upper, RunKind::FullRefresh, false)).await;
        fx.run_with(opts(upper, RunKind::Incremental, true)).await;
    }
    assert_eq!(
        fx.count("customer_versions").await,
        log_rows,
        "{update}: {}",
        fx.dump_log().await
    );
    fx.assert_dimension_derives_from_log().await;
    assert_verify_passes(fx, true);
}

async fn a_change_stamped_between_the_tombstone_and_the_revival_is_the_state_now(mut fx: Fixture) {
    stamped_between_the_tombstone_and_the_revival(&mut fx, "tier = 'gold'", Some("gold")).await;
}

async fn a_delete_stamped_between_the_tombstone_and_the_revival_is_the_state_now(mut fx: Fixture) {
    stamped_between_the_tombstone_and_the_revival(&mut fx, "is_deleted = true", None).await;
}

/// Reconciliation compares the dimension's live keys with the source's *live* keys: a
/// row flagged deleted behind every window (its stamp not moved, or moved back) closes
/// its key at the run's upper bound like a row that is gone, whether the key was ever
/// deleted before or was revived; a rerun appends nothing.
async fn reconciliation_closes_a_key_flagged_deleted_behind_every_window(mut fx: Fixture) {
    two_keys_then_2_deleted(&mut fx).await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T10:30:00Z')"
    ))
    .await;
    let r = fx
        .run_with(opts("2026-03-02T12:00:00Z", RunKind::Incremental, true))
        .await;
    assert_eq!(r.counts.revived, 1, "{r:?}");
    // The watermark is 10:30: no window reads 09:00 any more.
    fx.exec("UPDATE src_customers SET is_deleted = true WHERE customer_id IN (1, 2)")
        .await;
    let r = fx.run("2026-03-02T12:30:00Z").await;
    assert_eq!(r.counts.tombstones, 0, "not read: {r:?}");
    let r = fx
        .run_with(opts("2026-03-02T13:00:00Z", RunKind::Incremental, true))
        .await;
    assert_eq!((r.counts.tombstones, r.reconciled_deletes), (2, 2), "{r:?}");
    for key in ["1", "2"] {
        let rows = rows_of(&mut fx, key).await;
        assert!(rows.iter().all(|r| r[3] == "false"), "key {key}: {rows:?}");
        assert_eq!(
            rows.last().unwrap()[2],
            "2026-03-02T13:00:00.000000Z",
            "key {key}: {rows:?}"
        );
    }
    let log_rows = fx.count("customer_versions").await;
    fx.run_with(opts("2026-03-02T13:30:00Z", RunKind::Incremental, true))
        .await;
    fx.run_with(opts("2026-03-02T14:00:00Z", RunKind::FullRefresh, false))
        .await;
    assert_eq!(fx.count("customer_versions").await, log_rows, "{}", fx.dump_log().await);
    fx.assert_dimension_derives_from_log().await;
    assert_verify_passes(&fx, true);
}

/// A key's row flagged deleted with its stamp moved back behind the key's newest version
/// (found by the new-user trial): the delete is a late tombstone at its own time, and the
/// version after it stays (spec 1.4). Read again, by the same run repeated or by the next
/// run's lookback, it is a delete already logged and appends nothing: the version logged
/// before the tombstone is no return of the key after it.
async fn a_late_delete_read_again_appends_nothing(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T09:30:00Z").await;
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T10:00:00Z'")
        .await;
    assert_eq!(fx.run("2026-03-02T10:05:00Z").await.counts.versions, 1);
    fx.exec("UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T09:59:30Z'")
        .await;
    let r = fx.run("2026-03-02T10:10:00Z").await;
    assert_eq!((r.counts.tombstones, r.counts.versions), (1, 0), "{r:?}");
    let rows = rows_of(&mut fx, "1").await;
    let log_rows = fx.count("customer_versions").await;
    for upper in ["2026-03-02T10:10:00Z", "2026-03-02T10:12:00Z"] {
        let r = fx.run(upper).await;
        assert_eq!(
            (r.counts.rows_read, r.counts.tombstones, r.counts.versions),
            (1, 0, 0),
            "read again at {upper}: {r:?}"
        );
        assert_eq!(rows_of(&mut fx, "1").await, rows, "at {upper}");
        assert_eq!(fx.count("customer_versions").await, log_rows, "at {upper}");
    }
}
