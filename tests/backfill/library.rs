//! Backfills through the library API (`dimlog::backfill::run`): the watermark roles, the
//! half-open window, reruns, and replaying a landing table.

use std::collections::BTreeMap;

use super::{backfill, outcomes};
use crate::support::fixture::{assert_snapshot, on_every_engine, Fixture};

on_every_engine!(
    backfills_never_move_the_incremental_watermark,
    the_window_is_half_open,
    a_rerun_appends_nothing,
    replaying_a_landing_table_out_of_order_equals_loading_it_in_order,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";
const FEED_INSERT: &str = "INSERT INTO src_feed (customer_id, email, tier, country, is_deleted, updated_at) VALUES";

/// `dimlog_state` as a map from role to its whole row (watermark, run id, updated at).
async fn state_by_role(fx: &mut Fixture) -> BTreeMap<String, BTreeMap<String, Option<String>>> {
    fx.state()
        .await
        .records()
        .into_iter()
        .map(|r| (r["role"].clone().expect("a role"), r))
        .collect()
}

/// A backfill of dates behind the watermark, and one of dates after it, each keep their
/// own `backfill:<from>/<to>` row and leave the `incremental` row exactly as it was; the
/// next incremental run reads from where it stopped (and finds the backfilled rows
/// already loaded).
async fn backfills_never_move_the_incremental_watermark(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-01T10:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T10:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-03T10:00:00Z')"
    ))
    .await;
    fx.run("2026-03-03T12:00:00Z").await;
    let before = state_by_role(&mut fx).await;
    assert_eq!(before.len(), 1, "{before:?}");
    let incremental = before["incremental"].clone();
    assert_eq!(
        incremental["high_watermark"].as_deref(),
        Some("2026-03-03T10:00:00.000000Z")
    );

    // A change stamped far behind the watermark: the incremental lookback cannot see it,
    // a backfill of old dates can.
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-01T15:00:00Z' WHERE customer_id = 1")
        .await;
    let old = backfill(&fx, "2026-03-01T00:00:00Z", "2026-03-03T00:00:00Z", "1d").await;
    assert_eq!(outcomes(&old), ["committed", "committed"]);
    let reports: Vec<_> = old.iter().map(|c| c.report.clone().expect("a report")).collect();
    assert_eq!(
        reports
            .iter()
            .map(|r| (r.counts.rows_read, r.counts.versions))
            .collect::<Vec<_>>(),
        [(1, 1), (1, 0)]
    );
    let old_role = "backfill:2026-03-01T00:00:00.000000Z/2026-03-03T00:00:00.000000Z";
    assert!(reports.iter().all(|r| r.role == old_role), "{reports:?}");
    let state = state_by_role(&mut fx).await;
    assert_eq!(
        state["incremental"], incremental,
        "a backfill of old dates moved the watermark"
    );
    assert_eq!(
        state[old_role]["high_watermark"].as_deref(),
        Some("2026-03-02T10:00:00.000000Z"),
        "the backfill's own watermark is the greatest updated_at it read"
    );

    // A backfill of dates after the watermark reads rows the incremental run has not
    // seen yet, and still leaves its watermark alone.
    fx.exec(&format!(
        "{INSERT} (4, 'dee@example.com', 'free', 'BE', '2026-03-05T10:00:00Z')"
    ))
    .await;
    let later = backfill(&fx, "2026-03-04T00:00:00Z", "2026-03-06T00:00:00Z", "1d").await;
    assert_eq!(outcomes(&later), ["committed", "committed"]);
    let new_role = "backfill:2026-03-04T00:00:00.000000Z/2026-03-06T00:00:00.000000Z";
    let state = state_by_role(&mut fx).await;
    assert_eq!(
        state["incremental"], incremental,
        "a backfill of later dates moved the watermark"
    );
    assert_eq!(
        state[new_role]["high_watermark"].as_deref(),
        Some("2026-03-05T10:00:00.000000Z")
    );
    assert_eq!(
        state.keys().map(String::as_str).collect::<Vec<_>>(),
        [old_role, new_role, "incremental"]
    );
    let runs = fx.runs().await;
    assert_eq!(
        runs.values("kind"),
        ["incremental", "backfill", "backfill", "backfill", "backfill"].map(|k| Some(k.to_string()))
    );
    assert_eq!(
        runs.values("role")[1..],
        [old_role, old_role, new_role, new_role].map(|r| Some(r.to_string()))
    );

    // The next run starts from its own watermark (minus the lookback): it re-reads key 3
    // and reads key 4, already loaded by the backfill, so it appends nothing.
    let r = fx.run("2026-03-06T00:00:00Z").await;
    assert_eq!(r.watermark_before.map(|w| w.to_text()), incremental["high_watermark"]);
    assert_eq!(r.counts.rows_read, 2);
    assert_eq!(
        (r.counts.versions, r.counts.tombstones, r.counts.corrections),
        (0, 0, 0)
    );
    assert_eq!(fx.watermark().await.as_deref(), Some("2026-03-05T10:00:00.000000Z"));
    fx.assert_dimension_derives_from_log().await;
    assert_eq!(fx.count("dim_customer").await, 5);
}

/// A row stamped exactly at `--from` is read, one a microsecond earlier is not; a row
/// stamped exactly at `--to` (written with another offset) is not read, one a
/// microsecond earlier is; a row on a boundary between chunks is read once, by the later.
async fn the_window_is_half_open(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-02-28T23:59:59.999999Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-01T00:00:00Z'),
                  (3, 'cyd@example.com', 'free', 'NL', '2026-03-01T12:00:00Z'),
                  (4, 'dee@example.com', 'free', 'BE', '2026-03-01T23:59:59.999999Z'),
                  (5, 'eve@example.com', 'free', 'LU', '2026-03-02T01:00:00+01:00')"
    ))
    .await;
    let chunks = backfill(&fx, "2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z", "12h").await;
    assert_eq!(outcomes(&chunks), ["committed", "committed"]);
    let windows: Vec<(String, String)> = chunks
        .iter()
        .map(|c| (c.chunk.from.to_text(), c.chunk.to.to_text()))
        .collect();
    assert_eq!(
        windows,
        [
            ("2026-03-01T00:00:00.000000Z", "2026-03-01T12:00:00.000000Z"),
            ("2026-03-01T12:00:00.000000Z", "2026-03-02T00:00:00.000000Z"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let read: Vec<i64> = chunks
        .iter()
        .map(|c| c.report.as_ref().expect("a report").counts.rows_read)
        .collect();
    assert_eq!(read, [1, 2]);
    // A row stamped at a chunk's end is the next chunk's (or past the backfill), not a
    // row from the future (a trial saw `future_rows=1` for one).
    let future: Vec<i64> = chunks
        .iter()
        .map(|c| c.report.as_ref().expect("a report").counts.future_rows)
        .collect();
    assert_eq!(future, [0, 0]);
    let r = chunks[1].report.as_ref().expect("a report");
    assert_eq!(
        r.low_watermark.map(|t| t.to_text()).as_deref(),
        Some("2026-03-01T12:00:00.000000Z")
    );
    assert_eq!(r.upper_bound.to_text(), "2026-03-02T00:00:00.000000Z");

    let dim = fx.dimension().await;
    assert_eq!(dim.values("customer_id"), ["2", "3", "4"].map(|k| Some(k.to_string())));
    assert_eq!(
        dim.values("valid_from"),
        [
            "2026-03-01T00:00:00.000000Z",
            "2026-03-01T12:00:00.000000Z",
            "2026-03-01T23:59:59.999999Z"
        ]
        .map(|t| Some(t.to_string()))
    );
    fx.assert_dimension_derives_from_log().await;
}

/// Running the same backfill again skips every chunk as committed and changes nothing:
/// no log row, no dimension row, no run record, no watermark.
async fn a_rerun_appends_nothing(mut fx: Fixture) {
    fx.use_feed().await;
    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'free', 'FR', false, '2026-03-01T09:00:00Z'),
                       (2, 'bob@example.com', 'pro', 'DE', false, '2026-03-01T10:00:00Z'),
                       (1, 'ann@example.com', 'pro', 'FR', false, '2026-03-02T09:00:00Z'),
                       (2, NULL, NULL, NULL, true, '2026-03-02T11:00:00Z'),
                       (1, 'ann@example.com', NULL, 'FR', false, '2026-03-03T09:00:00Z')"
    ))
    .await;
    let first = backfill(&fx, "2026-03-01T00:00:00Z", "2026-03-04T00:00:00Z", "1d").await;
    assert_eq!(outcomes(&first), ["committed"; 3]);
    assert_eq!(fx.count("customer_versions").await, 5);
    let (log, dimension, state, runs) = (fx.log().await, fx.dimension().await, fx.state().await, fx.runs().await);

    let again = backfill(&fx, "2026-03-01T00:00:00Z", "2026-03-04T00:00:00Z", "1d").await;
    assert_eq!(outcomes(&again), ["skipped (committed earlier)"; 3]);
    assert!(again.iter().all(|c| c.report.is_none() && c.error.is_none()));
    assert_eq!(fx.log().await, log, "a rerun appended to the log");
    assert_eq!(fx.dimension().await, dimension, "a rerun changed the dimension");
    assert_eq!(fx.state().await, state, "a rerun moved a watermark");
    assert_eq!(fx.runs().await, runs, "a rerun recorded runs");
}

/// One row of a landing table: key, (email, tier) or `None` for a delete, `updated_at`.
type LandingRow = (i64, Option<(&'static str, &'static str)>, String);

/// Versions of a landing table: key, values (None: a delete), `updated_at`, one per key
/// and day. Key 2's day-3 version repeats its day-2 one (no new version); key 3 is
/// deleted on day 4 and comes back with its old values on day 5 (a new version); key 4
/// repeats itself on days 2 and 3.
fn landing_rows() -> Vec<LandingRow> {
    let versions: [[Option<(&str, &str)>; 5]; 4] = [
        [
            Some(("a1", "free")),
            Some(("a2", "pro")),
            Some(("a3", "gold")),
            Some(("a4", "pro")),
            Some(("a5", "free")),
        ],
        [
            Some(("b1", "free")),
            Some(("b2", "pro")),
            Some(("b2", "pro")),
            Some(("b4", "gold")),
            Some(("b5", "gold")),
        ],
        [
            Some(("c1", "pro")),
            Some(("c2", "pro")),
            Some(("c3", "free")),
            None,
            Some(("c3", "free")),
        ],
        [
            Some(("d1", "free")),
            Some(("d1", "free")),
            Some(("d1", "free")),
            Some(("d4", "free")),
            Some(("d5", "free")),
        ],
    ];
    let mut rows = Vec::new();
    for day in 1..=5usize {
        for key in 1..=4usize {
            // A different time of day for every key and day, always before 23:00.
            let hour = (key * 5 + day * 3) % 20 + 1;
            let at = format!("2026-03-0{day}T{hour:02}:{:02}:00Z", key * 7);
            rows.push((key as i64, versions[key - 1][day - 1], at));
        }
    }
    rows
}

fn feed_values(rows: &[&LandingRow]) -> String {
    rows.iter()
        .map(|(key, values, at)| match values {
            Some((email, tier)) => format!("({key}, '{email}', '{tier}', 'FR', false, '{at}')"),
            None => format!("({key}, NULL, NULL, NULL, true, '{at}')"),
        })
        .collect::<Vec<_>>()
        .join(",\n")
}

/// A landing table (`source.history = "all"`) holding five versions per key, written in a
/// scrambled order, replayed by one backfill in daily chunks, gives exactly the dimension
/// (surrogate keys and load ids included) and the log of loading the versions as they
/// happened: each day's rows landed, then an incremental run.
async fn replaying_a_landing_table_out_of_order_equals_loading_it_in_order(mut fx: Fixture) {
    let rows = landing_rows();
    assert_eq!(rows.len(), 20);

    // In order: each day lands and is loaded before the next.
    let mut in_order = Fixture::on(fx.backend).await;
    in_order.use_feed().await;
    for day in 1..=5 {
        let mut todays: Vec<_> = rows
            .iter()
            .filter(|r| r.2.starts_with(&format!("2026-03-0{day}")))
            .collect();
        todays.sort_by(|a, b| a.2.cmp(&b.2));
        in_order.exec(&format!("{FEED_INSERT} {}", feed_values(&todays))).await;
        let r = in_order.run(&format!("2026-03-0{day}T23:00:00Z")).await;
        assert_eq!(r.counts.late_versions, 0);
    }

    // Out of order: the whole landing table written at once, scrambled, then replayed.
    fx.use_feed().await;
    let mut scrambled: Vec<_> = rows.iter().collect();
    let n = scrambled.len();
    scrambled = (0..n).map(|i| scrambled[(i * 7 + 3) % n]).collect();
    scrambled.reverse();
    for part in scrambled.chunks(6) {
        fx.exec(&format!("{FEED_INSERT} {}", feed_values(part))).await;
    }
    let chunks = backfill(&fx, "2026-03-01T00:00:00Z", "2026-03-06T00:00:00Z", "1d").await;
    assert_eq!(outcomes(&chunks), ["committed"; 5]);
    let counts: Vec<(i64, i64, i64)> = chunks
        .iter()
        .map(|c| {
            let r = c.report.as_ref().expect("a report");
            (r.counts.rows_read, r.counts.versions, r.counts.tombstones)
        })
        .collect();
    assert_eq!(counts, [(4, 4, 0), (4, 3, 0), (4, 2, 0), (4, 3, 1), (4, 4, 0)]);
    fx.assert_dimension_derives_from_log().await;

    let replayed = fx.dimension().await;
    assert_eq!(
        replayed,
        in_order.dimension().await,
        "replaying out of order gave another dimension than loading in order"
    );
    assert_eq!(
        fx.log().await.redact("loaded_at"),
        in_order.log().await.redact("loaded_at"),
        "replaying out of order gave another log than loading in order"
    );
    assert_snapshot(
        "backfill_replay_of_a_landing_table",
        "4 keys x 5 daily versions (a repeat, a delete and a return) in a landing table written out of order, \
         replayed by `backfill --chunk 1d`; equal to loading each day in order",
        &replayed.to_string(),
    );
}
