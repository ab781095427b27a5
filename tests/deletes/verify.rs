//! `dimlog verify` (spec section 4): exit 3 naming the key for what a watermark cannot
//! see (a change that did not move `updated_at`, a late commit behind the watermark) and
//! for a corrupted dimension; `run --full-refresh` and `rebuild` repair them.

use dimlog::pipeline::{RunOptions, RunReport};
use dimlog::state::RunKind;

use super::{assert_verify_passes, text, verify_cli};
use crate::support::fixture::{on_both_backends, ts, Fixture};

on_both_backends!(
    silent_change_found_by_verify_and_fixed_by_full_refresh,
    late_commit_behind_a_zero_lookback_found_by_verify,
    corrupted_dimension_found_by_verify_and_repaired_by_rebuild,
    a_source_row_stamped_before_its_current_version_is_reported_apart,
    rows_no_run_has_read_yet_are_a_notice,
    rows_after_the_last_upper_bound_are_ahead_below_an_earlier_one,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

fn full_refresh(upper: &str) -> RunOptions {
    RunOptions {
        kind: RunKind::FullRefresh,
        upper: Some(ts(upper)),
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

/// The keys named by a check's examples ("key: detail").
fn keys(examples: &[String]) -> Vec<&str> {
    examples
        .iter()
        .map(|e| e.split(':').next().unwrap_or_default())
        .collect()
}

/// A value changed in the source without moving `updated_at`, outside the lookback: no
/// incremental run reads it, `verify --against-source` reports the key (exit 3), and a
/// full refresh appends it as a correction (same surrogate key); a second full refresh of
/// the now in-sync dimension appends nothing.
async fn silent_change_found_by_verify_and_fixed_by_full_refresh(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:00:00Z' WHERE customer_id = 3")
        .await;
    assert_eq!(fx.run("2026-03-02T12:00:00Z").await.counts.versions, 1);

    fx.exec("UPDATE src_customers SET country = 'LU' WHERE customer_id = 2")
        .await;
    let r = fx.run("2026-03-02T12:30:00Z").await;
    assert_eq!(r.counts.rows_read, 1, "only customer 3 is inside the lookback");
    assert_eq!(appended(&r), (0, 0, 0, 0));
    assert_verify_passes(&fx, false);
    let (code, failing) = verify_cli(&fx, true);
    assert_eq!(code, 3, "{failing:#?}");
    assert_eq!(failing.keys().collect::<Vec<_>>(), ["source_different"], "{failing:#?}");
    assert_eq!(keys(&failing["source_different"]), ["2"]);
    let out = fx.cli(&["verify", "--against-source"]);
    assert_eq!(out.status.code(), Some(3));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("FAIL") && stdout.contains("2: tracked values differ"),
        "{stdout}"
    );

    let sks = fx.dimension().await.values("customer_sk");
    let r = fx.run_with(full_refresh("2026-03-02T13:00:00Z")).await;
    assert_eq!(r.counts.rows_read, 3);
    assert_eq!(appended(&r), (0, 0, 1, 0), "a correction, not a version");
    let dim = fx.dimension().await;
    assert_eq!(dim.values("customer_sk"), sks, "no surrogate key changed");
    let bob = dim
        .records()
        .into_iter()
        .find(|r| r["customer_id"].as_deref() == Some("2"))
        .expect("customer 2");
    assert_eq!(
        (bob["country"].as_deref(), bob["valid_from"].as_deref()),
        (Some("LU"), Some("2026-03-02T09:00:00.000000Z"))
    );
    fx.assert_dimension_derives_from_log().await;
    assert_verify_passes(&fx, true);

    let (log, dim) = (fx.log().await, fx.dimension().await);
    let r = fx.run_with(full_refresh("2026-03-02T13:05:00Z")).await;
    assert_eq!(r.counts.rows_read, 3);
    assert_eq!(appended(&r), (0, 0, 0, 0), "an in-sync dimension gets nothing");
    assert_eq!(fx.log().await, log);
    assert_eq!(fx.dimension().await, dim);
}

/// A source row stamped before its key's current version (its updated_at moved
/// backwards) is reported apart, as `source_behind` (spec 4: source and dimension
/// disagree), with a hint that no run changes it; it used to be `source_different`, whose
/// hint sent users to a full refresh that changed nothing. Loaded as a late version or
/// never read, before every version or inside a past one's interval: each is reported.
/// A changed row stamped at or after the current version stays `source_different`.
async fn a_source_row_stamped_before_its_current_version_is_reported_apart(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T08:50:00Z' WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T11:00:00Z").await;
    assert_eq!((r.counts.versions, r.counts.late_versions), (1, 1), "{r:?}");
    let (code, failing) = verify_cli(&fx, true);
    assert_eq!(code, 3, "{failing:#?}");
    assert_eq!(failing.keys().collect::<Vec<_>>(), ["source_behind"], "{failing:#?}");
    assert_eq!(keys(&failing["source_behind"]), ["1"]);
    let out = fx.cli(&["verify", "--against-source"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("moved backwards")
            && stdout.contains("no run changes this")
            && !stdout.contains("1: tracked values differ"),
        "{stdout}"
    );

    // Moved back past the lookback (never read): one before every version of its key, one
    // inside a past version's interval; and one changed without moving updated_at.
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 3")
        .await;
    assert_eq!(fx.run("2026-03-02T12:00:00Z").await.counts.versions, 1);
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T08:00:00Z' WHERE customer_id = 2")
        .await;
    fx.exec("UPDATE src_customers SET tier = 'silver', updated_at = '2026-03-02T10:00:00Z' WHERE customer_id = 3")
        .await;
    fx.exec("UPDATE src_customers SET country = 'LU' WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T12:30:00Z").await;
    assert_eq!(r.counts.rows_read, 0, "{r:?}");
    let (code, failing) = verify_cli(&fx, true);
    assert_eq!(code, 3, "{failing:#?}");
    assert_eq!(failing.keys().collect::<Vec<_>>(), ["source_behind"], "{failing:#?}");
    assert_eq!(keys(&failing["source_behind"]), ["1", "2", "3"]);
    fx.exec("UPDATE src_customers SET country = 'AT', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 3")
        .await;
    let (_, failing) = verify_cli(&fx, true);
    assert_eq!(keys(&failing["source_different"]), ["3"], "{failing:#?}");
    assert_eq!(keys(&failing["source_behind"]), ["1", "2"], "{failing:#?}");
}

/// With `lookback = "0s"`, rows committed late with an `updated_at` behind the watermark
/// are never read by an incremental run; `verify --against-source` reports each key (a
/// new key as missing, a changed one as different) and a full refresh loads them.
async fn late_commit_behind_a_zero_lookback_found_by_verify(mut fx: Fixture) {
    fx.set_setting("lookback", "\"0s\"");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:30:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(fx.watermark().await.as_deref(), Some("2026-03-02T09:30:00.000000Z"));

    // Two transactions that started before the run commit after it.
    fx.exec(&format!(
        "{INSERT} (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:10:00Z');
         UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T09:20:00Z' WHERE customer_id = 1"
    ))
    .await;
    let r = fx.run("2026-03-02T10:30:00Z").await;
    assert_eq!(
        r.low_watermark.map(|t| t.to_text()).as_deref(),
        Some("2026-03-02T09:30:00.000000Z")
    );
    assert_eq!(r.counts.rows_read, 1, "only the row at the watermark is read");
    assert_eq!(appended(&r), (0, 0, 0, 0));

    let (code, failing) = verify_cli(&fx, true);
    assert_eq!(code, 3, "{failing:#?}");
    assert_eq!(
        failing.keys().collect::<Vec<_>>(),
        ["source_different", "source_missing"],
        "{failing:#?}"
    );
    assert_eq!(keys(&failing["source_missing"]), ["3"]);
    assert_eq!(keys(&failing["source_different"]), ["1"]);

    let r = fx.run_with(full_refresh("2026-03-02T11:00:00Z")).await;
    assert_eq!(appended(&r), (2, 0, 0, 0), "{r:?}");
    fx.assert_dimension_derives_from_log().await;
    assert_verify_passes(&fx, true);
}

/// `verify` without the source checks the dimension against its invariants and a fresh
/// rebuild from the log: an overlap, a gap or a lost row exits 3 naming the key, and
/// `dimlog rebuild` restores the dimension the log describes.
async fn corrupted_dimension_found_by_verify_and_repaired_by_rebuild(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    for (tier, at, upper) in [
        ("pro", "2026-03-02T10:30:00Z", "2026-03-02T11:00:00Z"),
        ("gold", "2026-03-02T11:30:00Z", "2026-03-02T12:00:00Z"),
    ] {
        fx.exec(&format!(
            "UPDATE src_customers SET tier = '{tier}', updated_at = '{at}' WHERE customer_id = 1"
        ))
        .await;
        assert_eq!(fx.run(upper).await.counts.versions, 1);
    }
    assert_verify_passes(&fx, false);
    let good = fx.dimension().await;

    // An overlap: customer 1's first version is stretched over its second.
    fx.target_exec(
        "UPDATE dim_customer SET valid_to = '2026-03-02T11:00:00.000000Z'
         WHERE customer_id = 1 AND valid_from = '2026-03-02T09:00:00.000000Z'",
    )
    .await;
    let (code, failing) = verify_cli(&fx, false);
    assert_eq!(code, 3, "{failing:#?}");
    assert!(failing.contains_key("overlap_or_gap"), "{failing:#?}");
    assert!(failing["overlap_or_gap"][0].contains("overlaps"), "{failing:#?}");
    for (check, examples) in &failing {
        assert!(keys(examples).iter().all(|k| *k == "1"), "{check}: {examples:?}");
    }
    let out = fx.cli(&["rebuild"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_verify_passes(&fx, false);
    assert_eq!(fx.dimension().await, good);

    // Lost rows: customer 1's middle version (a gap) and customer 2 altogether.
    fx.target_exec(
        "DELETE FROM dim_customer WHERE customer_id = 1 AND valid_from = '2026-03-02T10:30:00.000000Z';
         DELETE FROM dim_customer WHERE customer_id = 2",
    )
    .await;
    let (code, failing) = verify_cli(&fx, false);
    assert_eq!(code, 3, "{failing:#?}");
    assert_eq!(keys(&failing["overlap_or_gap"]), ["1"], "{failing:#?}");
    assert!(failing["overlap_or_gap"][0].contains("gap"), "{failing:#?}");
    let mut lost = keys(&failing["rebuild_diff"]);
    lost.sort();
    assert_eq!(lost, ["1", "2"], "{failing:#?}");
    let out = fx.cli(&["rebuild"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_verify_passes(&fx, false);
    assert_eq!(fx.dimension().await, good);
}

/// Source rows stamped after the last run's upper bound are the next run's work:
/// `verify --against-source` lists them (`source_ahead`) as a notice, not a fault: exit 0,
/// `ok` true, the check's `fault` false, "note" instead of "FAIL" (it exited 3 while its
/// hint said there was nothing to repair, found by an outside trial). A fault beside it
/// still exits 3.
async fn rows_no_run_has_read_yet_are_a_notice(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-02T10:30:00Z')"
    ))
    .await;
    let (code, failing) = verify_cli(&fx, true);
    assert_eq!(code, 0, "{failing:#?}");
    assert_eq!(keys(&failing["source_ahead"]), ["2"]);
    let out = fx.cli(&["verify", "--against-source", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).expect("JSON");
    assert_eq!(v["ok"], true, "{v}");
    let ahead = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "source_ahead")
        .cloned()
        .unwrap();
    assert_eq!(
        (&ahead["fault"], &ahead["count"]),
        (&false.into(), &1.into()),
        "{ahead}"
    );
    let out = fx.cli(&["verify", "--against-source"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("note  keys whose source row is stamped after") && !stdout.contains("FAIL"),
        "{stdout}"
    );

    fx.exec("UPDATE src_customers SET country = 'LU' WHERE customer_id = 1")
        .await;
    let (code, failing) = verify_cli(&fx, true);
    assert_eq!(code, 3, "{failing:#?}");
}

/// "Not read yet" is measured from the last run's upper bound, not the greatest one: a
/// run with an earlier `--upper` (a scheduler catching up after a manual run) leaves rows
/// stamped after it for the next run, which reads them. A trial's `verify` called such
/// rows `source_different` and advised a full refresh.
async fn rows_after_the_last_upper_bound_are_ahead_below_an_earlier_one(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T12:00:00Z").await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-02T10:30:00Z')"
    ))
    .await;
    fx.exec("UPDATE src_customers SET country = 'LU', updated_at = '2026-03-02T10:45:00Z' WHERE customer_id = 1")
        .await;
    let (code, failing) = verify_cli(&fx, true);
    assert_eq!(code, 0, "{failing:#?}");
    let mut ahead = keys(&failing["source_ahead"]);
    ahead.sort();
    assert_eq!(ahead, ["1", "2"], "{failing:#?}");
    assert_eq!(failing.len(), 1, "only rows not read yet: {failing:#?}");

    // The next run reads them, and then nothing is ahead or different.
    let report = fx.run("2026-03-02T11:00:00Z").await;
    assert_eq!(report.counts.versions, 2, "{report:?}");
    let (code, failing) = verify_cli(&fx, true);
    assert_eq!((code, failing.len()), (0, 0), "{failing:#?}");
}
