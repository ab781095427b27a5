//! The rebuild of touched keys on PostgreSQL 15+ (`rebuild_touched`: `derive_touched` into
//! `dimlog_derived`, dead versions marked, then one `merge_touched`), end to end through
//! real runs, against the full rebuild (`dimlog rebuild`) and `verify`.
//!
//! After every run each scenario asserts that the dimension (Type 1 and `current_<col>`
//! columns included) is exactly what a full rebuild of the log gives, that `verify` finds
//! nothing, and, on PostgreSQL, which dimension rows the run wrote: the merge must insert
//! or update exactly the rows whose derived values changed and leave every other row alone
//! (its `xmin` unchanged). The scenarios run on SQLite too (delete + insert), and the
//! `postgres` tests compare what both backends wrote after every run.

use std::collections::BTreeMap;

use dimlog::config::{Backend, DbUrl};
use dimlog::db::Conn;
use dimlog::pipeline::{self, Quiet, RunOptions, RunReport, Session};
use dimlog::state::RunKind;

use crate::support::fixture::{ts, Fixture, SENTINEL};

/// Instantiates each `async fn scenario(fx: Fixture) -> Vec<String>` (the transcript of
/// what it wrote after every run) as `scenario::sqlite`, `scenario::postgres` and (feature
/// `citus-tests`) `scenario::citus`; the latter two also run the scenario on SQLite and
/// assert that both wrote the same.
macro_rules! on_both_backends_alike {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                use crate::support::fixture::Fixture;

                #[tokio::test]
                async fn sqlite() {
                    super::$scenario(Fixture::sqlite().await).await;
                }

                #[tokio::test]
                async fn postgres() {
                    let postgres = super::$scenario(Fixture::postgres().await).await;
                    let sqlite = super::$scenario(Fixture::sqlite().await).await;
                    super::assert_backends_agree(&postgres, &sqlite);
                }

                #[cfg(feature = "citus-tests")]
                #[tokio::test]
                async fn citus() {
                    let citus = super::$scenario(Fixture::citus().await).await;
                    let sqlite = super::$scenario(Fixture::sqlite().await).await;
                    super::assert_backends_agree(&citus, &sqlite);
                }
            }
        )*
    };
}

on_both_backends_alike!(
    soft_delete_at_the_versions_own_timestamp_closes_it_1us_later,
    late_tombstone_at_a_closed_versions_timestamp_closes_it_1us_later,
    correction_in_a_later_run_updates_the_row_in_place,
    late_version_between_two_versions,
    type1_and_current_columns_across_runs,
    deleted_key_returns_in_a_later_run,
);

const DAY: &str = "2026-03-02";
const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";
const FEED_INSERT: &str = "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES";
const NAMED_INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, name, updated_at) VALUES";

/// `HH:MM` on the scenarios' day, as RFC 3339.
fn at(hm: &str) -> String {
    format!("{DAY}T{hm}:00Z")
}

/// `xmin` of every dimension row, by surrogate key (PostgreSQL).
type RowVersions = BTreeMap<String, String>;

/// One dimension under test, with the transcript of what it wrote after every run.
struct Scenario {
    fx: Fixture,
    transcript: Vec<String>,
    /// The dimension rows' `xmin` before the last run (PostgreSQL only).
    before: Option<RowVersions>,
}

impl Scenario {
    /// Wraps a fixture; on PostgreSQL, first asserts that the server has MERGE, so the
    /// scenario runs `merge_touched` and not the delete + insert fallback.
    async fn new(fx: Fixture) -> Scenario {
        if fx.backend == Backend::Postgres {
            let url = DbUrl::parse("target.url", &fx.target_url, None).expect("the target URL parses");
            let conn = Conn::connect(&url).await.expect("connect to the target");
            assert!(
                conn.has_merge(),
                "the PostgreSQL test server has no MERGE (< 15): these tests would not exercise merge_touched"
            );
        }
        Scenario {
            fx,
            transcript: Vec::new(),
            before: None,
        }
    }

    async fn exec(&mut self, sql: &str) {
        self.fx.exec(sql).await;
    }

    /// One incremental run with upper bound `HH:MM`.
    async fn run(&mut self, upper: &str) -> RunReport {
        self.run_with(RunOptions {
            upper: Some(ts(&at(upper))),
            ..RunOptions::incremental()
        })
        .await
    }

    /// A `--full-refresh` run with upper bound `HH:MM`.
    async fn full_refresh(&mut self, upper: &str) -> RunReport {
        self.run_with(RunOptions {
            kind: RunKind::FullRefresh,
            upper: Some(ts(&at(upper))),
            ..RunOptions::incremental()
        })
        .await
    }

    async fn run_with(&mut self, opts: RunOptions) -> RunReport {
        self.before = self.row_versions().await;
        self.fx.run_with(opts).await
    }

    /// `xmin` by surrogate key of every dimension row (PostgreSQL; empty before the
    /// dimension exists).
    async fn row_versions(&mut self) -> Option<RowVersions> {
        if self.fx.backend != Backend::Postgres {
            return None;
        }
        let plan = self.fx.plan();
        let dim = plan.target.dimension.quoted();
        if !self.fx.target_has_table(plan.target.dimension.name()).await {
            return Some(RowVersions::new());
        }
        let sk = plan.target.surrogate_key.quoted();
        let rows = self
            .fx
            .target_query(&format!("SELECT {sk}::text, xmin::text FROM {dim}"))
            .await;
        Some(
            rows.into_iter()
                .map(|r| (r[0].clone().expect("a surrogate key"), r[1].clone().expect("an xmin")))
                .collect(),
        )
    }

    /// One customer's dimension rows in `valid_from` order, one line each:
    /// `sk from-to[ current]: values of columns joined by |`, times as `HH:MM` on the
    /// scenarios' day and the sentinel as `inf`.
    async fn versions(&mut self, customer: &str, columns: &[&str]) -> Vec<String> {
        fn time(t: &Option<String>) -> String {
            let t = t.as_deref().expect("a timestamp");
            if t == SENTINEL {
                return "inf".into();
            }
            match t.strip_prefix(&format!("{DAY}T")) {
                Some(rest) if rest.ends_with(":00.000000Z") => rest[..5].to_string(),
                _ => t.to_string(),
            }
        }
        self.fx
            .dimension_with_current()
            .await
            .records()
            .into_iter()
            .filter(|r| r["customer_id"].as_deref() == Some(customer))
            .map(|r| {
                let values: Vec<&str> = columns.iter().map(|c| r[*c].as_deref().unwrap_or("NULL")).collect();
                format!(
                    "{} {}-{}{}: {}",
                    r["customer_sk"].as_deref().unwrap_or("NULL"),
                    time(&r["valid_from"]),
                    time(&r["valid_to"]),
                    if r["is_current"].as_deref() == Some("true") {
                        " current"
                    } else {
                        ""
                    },
                    values.join("|")
                )
            })
            .collect()
    }

    /// Every column of one dimension row (row_hash and `current_<col>` included).
    async fn row(&mut self, sk: &str) -> BTreeMap<String, Option<String>> {
        let mut row = BTreeMap::new();
        for dump in [self.fx.dimension().await, self.fx.dimension_with_current().await] {
            let found = dump
                .records()
                .into_iter()
                .find(|r| r["customer_sk"].as_deref() == Some(sk))
                .unwrap_or_else(|| panic!("no dimension row with surrogate key {sk}"));
            row.extend(found);
        }
        row
    }

    /// After a run: on PostgreSQL, that the run wrote (inserted or updated) exactly the
    /// rows with surrogate keys `written`; that `verify` finds nothing; that the
    /// dimension is the one derived from the log and the one a full rebuild gives. Adds
    /// the dimension and the log to the transcript.
    async fn settle(&mut self, what: &str, written: &[i64], against_source: bool) {
        if let Some(before) = self.before.take() {
            let after = self.row_versions().await.expect("row versions on PostgreSQL");
            let mut changed: Vec<i64> = after
                .iter()
                .filter(|(sk, xmin)| before.get(*sk) != Some(xmin))
                .map(|(sk, _)| sk.parse().expect("an integer surrogate key"))
                .collect();
            changed.sort_unstable();
            assert_eq!(
                changed,
                written,
                "{what}: the surrogate keys of the dimension rows the run inserted or updated \
                 (every other row must be left as it was)\n{:?}",
                self.fx.dimension_with_current().await
            );
        }

        let plan = self.fx.plan();
        let mut session = Session::open(&plan).await.expect("open a session");
        let report = dimlog::verify::verify(&mut session, &plan, against_source, &Quiet)
            .await
            .unwrap_or_else(|e| panic!("{what}: verify failed to run: {e}"));
        let failing: Vec<_> = report.checks.iter().filter(|c| c.count > 0).collect();
        assert!(report.ok && failing.is_empty(), "{what}: verify found {failing:#?}");

        // The fixture's re-derivation does not know Type 1 observations (log rows with no
        // surrogate key that are no tombstones); the full rebuild below covers them.
        let sk = plan.target.surrogate_key.name().to_string();
        let observations = self
            .fx
            .log()
            .await
            .records()
            .iter()
            .any(|r| r[&sk].is_none() && r["is_deleted"].as_deref() == Some("false"));
        if !observations {
            self.fx.assert_dimension_derives_from_log().await;
        }

        let incremental = (self.fx.dimension().await, self.fx.dimension_with_current().await);
        pipeline::rebuild_all(&mut session, &plan, true)
            .await
            .unwrap_or_else(|e| panic!("{what}: the full rebuild failed: {e}"));
        drop(session);
        let rebuilt = (self.fx.dimension().await, self.fx.dimension_with_current().await);
        assert_eq!(
            incremental, rebuilt,
            "{what}: the dimension the run left (left) is not the one a full rebuild gives (right)"
        );

        let section = format!(
            "== {what}\n{}\n{}\n{}",
            rebuilt.1,
            rebuilt.0,
            self.fx.log().await.redact("loaded_at")
        );
        self.transcript.push(section);
    }
}

/// Both backends wrote the same dimension and log after every run.
fn assert_backends_agree(postgres: &[String], sqlite: &[String]) {
    for (p, s) in postgres.iter().zip(sqlite) {
        assert_eq!(p, s, "PostgreSQL (left) and SQLite (right) wrote different tables");
    }
    assert_eq!(postgres.len(), sqlite.len(), "both ran the same steps");
}

/// `(versions, late, corrections, tombstones)` of a run.
fn changes(r: &RunReport) -> (i64, i64, i64, i64) {
    let c = &r.counts;
    (c.versions, c.late_versions, c.corrections, c.tombstones)
}

/// Case 1 on a table with one row per key: the source flags the key's newest row as
/// deleted without moving `updated_at`; the lookback re-reads it. A tombstone at exactly
/// that version's `valid_from` would replace the version, and facts may hold its
/// surrogate key, so the tombstone lands 1 µs after it (issue 21): the merge closes the
/// version there (an update of that row only), and the version before keeps its
/// `valid_to`. Un-flagging it at the same timestamp is the key restored with a stamp not
/// later than its tombstone: it is revived (spec 1.4), a new version with a new surrogate
/// key at the run's upper bound, the mirror of the tombstone.
async fn soft_delete_at_the_versions_own_timestamp_closes_it_1us_later(fx: Fixture) -> Vec<String> {
    let mut s = Scenario::new(fx).await;
    s.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '{}'),
                  (2, 'bob@example.com', 'pro', 'DE', '{}')",
        at("09:00"),
        at("09:00")
    ))
    .await;
    let r = s.run("09:30").await;
    assert_eq!(changes(&r), (2, 0, 0, 0));
    s.settle("first load", &[1, 2], true).await;

    s.exec(&format!(
        "UPDATE src_customers SET tier = 'pro', updated_at = '{}' WHERE customer_id = 1",
        at("09:40")
    ))
    .await;
    let r = s.run("10:00").await;
    assert_eq!(changes(&r), (1, 0, 0, 0));
    assert_eq!(
        s.versions("1", &["tier"]).await,
        ["1 09:00-09:40: free", "3 09:40-inf current: pro"]
    );
    s.settle("customer 1 goes pro at 09:40", &[1, 3], true).await;

    s.exec("UPDATE src_customers SET is_deleted = true WHERE customer_id = 1")
        .await;
    let r = s.run("10:05").await;
    assert_eq!(changes(&r), (0, 0, 0, 1), "a tombstone at 09:40 + 1 µs");
    assert_eq!(
        s.versions("1", &["tier"]).await,
        ["1 09:00-09:40: free", "3 09:40-2026-03-02T09:40:00.000001Z: pro"],
        "the 09:40 version keeps its surrogate key, closed 1 µs later; the one before still ends at 09:40"
    );
    assert_eq!(s.versions("2", &["tier"]).await, ["2 09:00-inf current: pro"]);
    s.settle("customer 1 deleted at 09:40 without moving updated_at", &[3], true)
        .await;

    s.exec("UPDATE src_customers SET is_deleted = false WHERE customer_id = 1")
        .await;
    let r = s.run("10:10").await;
    assert_eq!(changes(&r), (1, 0, 0, 0));
    assert_eq!(r.counts.revived, 1);
    assert_eq!(
        s.versions("1", &["tier"]).await,
        [
            "1 09:00-09:40: free",
            "3 09:40-2026-03-02T09:40:00.000001Z: pro",
            "4 10:10-inf current: pro"
        ],
        "revived at the upper bound with a new surrogate key (3 is never reused)"
    );
    s.settle("customer 1 undeleted at 09:40 without moving updated_at", &[4], true)
        .await;
    s.transcript
}

/// Case 1 on a change feed: a closed version's row is re-delivered as a delete at its own
/// timestamp (a late tombstone in the middle of the key's history). The tombstone lands
/// 1 µs after that version (issue 21), so the version keeps its surrogate key and a 1 µs
/// interval: the merge updates that row only; the version before keeps `valid_to`, the
/// one after stays current, and a key whose only version is deleted keeps it, closed.
/// A late version then fills the gap. An event edited back from deleted to live at its
/// own time is the version already logged at that time: it appends nothing, and the key
/// stays deleted until its next event.
async fn late_tombstone_at_a_closed_versions_timestamp_closes_it_1us_later(fx: Fixture) -> Vec<String> {
    let mut s = Scenario::new(fx).await;
    s.fx.use_feed().await;
    s.fx.set_setting("lookback", "\"1h\"");
    s.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'free', 'FR', '{}'),
                       (1, 'ann@example.com', 'pro', 'FR', '{}'),
                       (1, 'ann@example.com', 'gold', 'FR', '{}'),
                       (2, 'bob@example.com', 'free', 'DE', '{}'),
                       (3, 'cyd@example.com', 'pro', 'NL', '{}')",
        at("09:00"),
        at("09:20"),
        at("09:40"),
        at("09:00"),
        at("09:10")
    ))
    .await;
    let r = s.run("09:50").await;
    assert_eq!(changes(&r), (5, 0, 0, 0));
    assert_eq!(
        s.versions("1", &["tier"]).await,
        ["1 09:00-09:20: free", "2 09:20-09:40: pro", "3 09:40-inf current: gold"]
    );
    s.settle("first load", &[1, 2, 3, 4, 5], true).await;

    s.exec(&format!(
        "UPDATE src_feed SET is_deleted = true WHERE customer_id = 1 AND updated_at = '{}';
         UPDATE src_feed SET is_deleted = true WHERE customer_id = 3 AND updated_at = '{}'",
        at("09:20"),
        at("09:10")
    ))
    .await;
    let r = s.run("10:00").await;
    assert_eq!(changes(&r), (0, 0, 0, 2));
    assert_eq!(
        s.versions("1", &["tier"]).await,
        [
            "1 09:00-09:20: free",
            "2 09:20-2026-03-02T09:20:00.000001Z: pro",
            "3 09:40-inf current: gold"
        ],
        "the 09:20 version stays, closed 1 µs later; a gap where the tombstone stands"
    );
    assert_eq!(
        s.versions("3", &["tier"]).await,
        ["5 09:10-2026-03-02T09:10:00.000001Z: pro"]
    );
    assert_eq!(s.versions("2", &["tier"]).await, ["4 09:00-inf current: free"]);
    s.settle(
        "tombstones at customer 1's 09:20 version and customer 3's only version",
        &[2, 5],
        true,
    )
    .await;

    s.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'basic', 'FR', '{}')",
        at("09:30")
    ))
    .await;
    let r = s.run("10:05").await;
    assert_eq!(changes(&r), (1, 1, 0, 0));
    assert_eq!(
        s.versions("1", &["tier"]).await,
        [
            "1 09:00-09:20: free",
            "2 09:20-2026-03-02T09:20:00.000001Z: pro",
            "6 09:30-09:40: basic",
            "3 09:40-inf current: gold"
        ]
    );
    s.settle("a late version of customer 1 at 09:30, after the tombstone", &[6], true)
        .await;

    s.exec(&format!(
        "UPDATE src_feed SET is_deleted = false WHERE customer_id = 3 AND updated_at = '{}'",
        at("09:10")
    ))
    .await;
    let r = s.run("10:10").await;
    assert_eq!(
        changes(&r),
        (0, 0, 0, 0),
        "the 09:10 event is the version logged at 09:10 already"
    );
    assert_eq!(
        s.versions("3", &["tier"]).await,
        ["5 09:10-2026-03-02T09:10:00.000001Z: pro"]
    );
    // `verify --against-source` names customer 3 (live in the feed, not current): its
    // key comes back with its next event.
    s.settle("customer 3's 09:10 event live again", &[], false).await;

    // In one run: a delete at the key's only version (closed 1 µs later) and a new
    // version after it.
    s.exec(&format!(
        "UPDATE src_feed SET is_deleted = true WHERE customer_id = 2 AND updated_at = '{}';
         {FEED_INSERT} (2, 'bob@example.com', 'pro', 'DE', '{}')",
        at("09:00"),
        at("10:12")
    ))
    .await;
    let r = s.run("10:15").await;
    assert_eq!(changes(&r), (1, 0, 0, 1));
    assert_eq!(
        s.versions("2", &["tier"]).await,
        ["4 09:00-2026-03-02T09:00:00.000001Z: free", "7 10:12-inf current: pro"]
    );
    s.settle(
        "customer 2's only version closed by a delete and a new one at 10:12, in one run",
        &[4, 7],
        false,
    )
    .await;
    s.transcript
}

/// Case 2: the source changes tracked values without moving `updated_at`, of the current
/// version and of a closed one, and the lookback re-reads them: corrections. The merge
/// updates both rows in place (same surrogate key, `valid_from`, `valid_to` and
/// `is_current`; new values, hash and `load_id`) and touches no other row; a second
/// correction of the same version, to values equal to the version before, too.
async fn correction_in_a_later_run_updates_the_row_in_place(fx: Fixture) -> Vec<String> {
    let mut s = Scenario::new(fx).await;
    s.fx.use_feed().await;
    s.fx.set_setting("lookback", "\"1h\"");
    s.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'free', 'FR', '{}'),
                       (1, 'ann@example.com', 'pro', 'FR', '{}'),
                       (2, 'bob@example.com', 'free', 'DE', '{}')",
        at("09:00"),
        at("09:40"),
        at("09:00")
    ))
    .await;
    let r = s.run("09:50").await;
    assert_eq!(changes(&r), (3, 0, 0, 0));
    s.settle("first load", &[1, 2, 3], true).await;
    let first = (s.row("1").await, s.row("2").await);

    s.exec(&format!(
        "UPDATE src_feed SET tier = 'gold' WHERE customer_id = 1 AND updated_at = '{}';
         UPDATE src_feed SET country = 'NL' WHERE customer_id = 1 AND updated_at = '{}'",
        at("09:40"),
        at("09:00")
    ))
    .await;
    let r = s.run("10:00").await;
    assert_eq!(changes(&r), (0, 0, 2, 0));
    assert_eq!(
        s.versions("1", &["tier", "country", "load_id"]).await,
        ["1 09:00-09:40: free|NL|2", "2 09:40-inf current: gold|FR|2"]
    );
    for (sk, old) in [("1", &first.0), ("2", &first.1)] {
        let new = s.row(sk).await;
        assert_ne!(new["row_hash"], old["row_hash"], "row {sk}: the corrected hash");
        for column in ["customer_id", "valid_from", "valid_to", "is_current"] {
            assert_eq!(new[column], old[column], "row {sk}: {column} changed");
        }
    }
    s.settle(
        "customer 1's 09:00 and 09:40 versions corrected without moving updated_at",
        &[1, 2],
        true,
    )
    .await;

    s.exec(&format!(
        "UPDATE src_feed SET tier = 'free', country = 'NL' WHERE customer_id = 1 AND updated_at = '{}'",
        at("09:40")
    ))
    .await;
    let r = s.run("10:10").await;
    assert_eq!(changes(&r), (0, 0, 1, 0));
    assert_eq!(
        s.versions("1", &["tier", "country", "load_id"]).await,
        ["1 09:00-09:40: free|NL|2", "2 09:40-inf current: free|NL|3"],
        "corrected again, to the values of the version before: both rows stay"
    );
    assert_eq!(s.row("1").await["row_hash"], s.row("2").await["row_hash"]);
    s.settle("customer 1's 09:40 version corrected again", &[2], true).await;

    // In one run: customer 2's only version corrected and a late version before it.
    s.exec(&format!(
        "UPDATE src_feed SET tier = 'gold' WHERE customer_id = 2 AND updated_at = '{}';
         {FEED_INSERT} (2, 'bob@example.com', 'basic', 'DE', '{}')",
        at("09:00"),
        at("08:50")
    ))
    .await;
    let r = s.run("10:15").await;
    assert_eq!(changes(&r), (1, 1, 1, 0));
    assert_eq!(
        s.versions("2", &["tier", "load_id"]).await,
        ["4 08:50-09:00: basic|4", "3 09:00-inf current: gold|4"]
    );
    s.settle(
        "customer 2's 09:00 version corrected and a late version at 08:50, in one run",
        &[3, 4],
        true,
    )
    .await;
    s.transcript
}

/// Case 3: late versions slot between two existing ones. The version before each is
/// closed at the late one's `valid_from` (updated in place), the late one is inserted,
/// and every other row (older versions outside the lookback, the versions after, other
/// keys, a key whose late version comes before its first) keeps every value and is not
/// rewritten. A late version equal to the one after it still stays.
async fn late_version_between_two_versions(fx: Fixture) -> Vec<String> {
    let mut s = Scenario::new(fx).await;
    s.fx.use_feed().await;
    s.fx.set_setting("lookback", "\"1h\"");
    s.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'basic', 'FR', '{}'),
                       (1, 'ann@example.com', 'free', 'FR', '{}'),
                       (1, 'ann@example.com', 'gold', 'FR', '{}'),
                       (2, 'bob@example.com', 'pro', 'DE', '{}')",
        at("08:30"),
        at("09:00"),
        at("09:40"),
        at("09:00")
    ))
    .await;
    let r = s.run("09:50").await;
    assert_eq!(changes(&r), (4, 0, 0, 0));
    s.settle("first load", &[1, 2, 3, 4], true).await;
    let unchanged = [s.row("1").await, s.row("3").await, s.row("4").await];
    let second = s.row("2").await;

    // The window starts at 08:40: the 08:30 version is not re-read, only derived.
    s.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'pro', 'FR', '{}')",
        at("09:20")
    ))
    .await;
    let r = s.run("10:00").await;
    assert_eq!(changes(&r), (1, 1, 0, 0));
    assert_eq!(
        s.versions("1", &["tier", "load_id"]).await,
        [
            "1 08:30-09:00: basic|1",
            "2 09:00-09:20: free|1",
            "5 09:20-09:40: pro|2",
            "3 09:40-inf current: gold|1"
        ]
    );
    for row in &unchanged {
        let sk = row["customer_sk"].clone().expect("a surrogate key");
        assert_eq!(&s.row(&sk).await, row, "row {sk} changed");
    }
    let mut closed = second.clone();
    closed.insert("valid_to".into(), Some(format!("{DAY}T09:20:00.000000Z")));
    assert_eq!(s.row("2").await, closed, "only valid_to of the version before changes");
    s.settle("customer 1's pro version at 09:20 arrives late", &[2, 5], true)
        .await;

    s.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'pro', 'FR', '{}'),
                       (2, 'bob@example.com', 'basic', 'DE', '{}')",
        at("09:10"),
        at("08:50")
    ))
    .await;
    let r = s.run("10:10").await;
    assert_eq!(changes(&r), (2, 2, 0, 0));
    assert_eq!(
        s.versions("1", &["tier", "load_id"]).await,
        [
            "1 08:30-09:00: basic|1",
            "2 09:00-09:10: free|1",
            "6 09:10-09:20: pro|3",
            "5 09:20-09:40: pro|2",
            "3 09:40-inf current: gold|1"
        ]
    );
    assert_eq!(
        s.versions("2", &["tier", "load_id"]).await,
        ["7 08:50-09:00: basic|3", "4 09:00-inf current: pro|1"]
    );
    for row in &unchanged {
        let sk = row["customer_sk"].clone().expect("a surrogate key");
        assert_eq!(&s.row(&sk).await, row, "row {sk} changed");
    }
    s.settle(
        "late versions: customer 1 pro at 09:10 (equal to the one after), customer 2 before its first",
        &[2, 6, 7],
        true,
    )
    .await;
    s.transcript
}

/// Case 4: a Type 1 column (`name`) and a Type 6 twin (`current_tier`) changing across
/// runs. A Type 1 change rewrites every row of its key (and only those) though no
/// row_hash, valid_to or load_id moves; a NULL Type 1 value counts as a change; a new
/// version changes `current_tier` on rows whose own values do not change; a deleted key
/// keeps its last tier as `current_tier`, and its return changes every row again; a Type
/// 1 change at the version's own timestamp (found by a full refresh) too.
async fn type1_and_current_columns_across_runs(fx: Fixture) -> Vec<String> {
    let mut s = Scenario::new(fx).await;
    s.fx.with_type1_name().await;
    s.fx.edit_config("type1 = [\"name\"]", "type1 = [\"name\"]\ncurrent_columns = [\"tier\"]");
    let cols = ["tier", "current_tier", "name"];
    s.exec(&format!(
        "{NAMED_INSERT} (1, 'ann@example.com', 'free', 'FR', 'Ann', '{}'),
                        (2, 'bob@example.com', 'pro', 'DE', 'Bob', '{}'),
                        (3, 'cyd@example.com', 'free', 'NL', 'Cyd', '{}')",
        at("09:00"),
        at("09:00"),
        at("09:00")
    ))
    .await;
    let r = s.run("09:30").await;
    assert_eq!(changes(&r), (3, 0, 0, 0));
    s.settle("first load", &[1, 2, 3], true).await;

    s.exec(&format!(
        "UPDATE src_customers SET tier = 'pro', updated_at = '{}' WHERE customer_id = 1",
        at("09:40")
    ))
    .await;
    let r = s.run("10:00").await;
    assert_eq!(changes(&r), (1, 0, 0, 0));
    assert_eq!(
        s.versions("1", &cols).await,
        ["1 09:00-09:40: free|pro|Ann", "4 09:40-inf current: pro|pro|Ann"]
    );
    s.settle("customer 1 goes pro (Type 2)", &[1, 4], true).await;

    s.exec(&format!(
        "UPDATE src_customers SET name = 'Ann Lee', updated_at = '{}' WHERE customer_id = 1;
         UPDATE src_customers SET name = NULL, updated_at = '{}' WHERE customer_id = 2",
        at("10:10"),
        at("10:10")
    ))
    .await;
    let r = s.run("10:20").await;
    assert_eq!((changes(&r), r.type1_updates), ((0, 0, 0, 0), 2));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            "1 09:00-09:40: free|pro|Ann Lee",
            "4 09:40-inf current: pro|pro|Ann Lee"
        ]
    );
    assert_eq!(s.versions("2", &cols).await, ["2 09:00-inf current: pro|pro|NULL"]);
    s.settle(
        "customer 1 renamed, customer 2's name set to NULL (Type 1 only)",
        &[1, 2, 4],
        true,
    )
    .await;

    s.exec(&format!(
        "UPDATE src_customers SET tier = 'gold', updated_at = '{}' WHERE customer_id = 1",
        at("10:30")
    ))
    .await;
    let r = s.run("10:40").await;
    assert_eq!(changes(&r), (1, 0, 0, 0));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            "1 09:00-09:40: free|gold|Ann Lee",
            "4 09:40-10:30: pro|gold|Ann Lee",
            "5 10:30-inf current: gold|gold|Ann Lee"
        ],
        "row 1 changes only in current_tier"
    );
    s.settle("customer 1 goes gold (Type 2)", &[1, 4, 5], true).await;

    s.exec(&format!(
        "UPDATE src_customers SET is_deleted = true, updated_at = '{}' WHERE customer_id = 1",
        at("10:50")
    ))
    .await;
    let r = s.run("11:00").await;
    assert_eq!(changes(&r), (0, 0, 0, 1));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            "1 09:00-09:40: free|gold|Ann Lee",
            "4 09:40-10:30: pro|gold|Ann Lee",
            "5 10:30-10:50: gold|gold|Ann Lee"
        ],
        "a deleted key keeps its last tier as current_tier"
    );
    s.settle("customer 1 deleted", &[5], true).await;

    s.exec(&format!(
        "UPDATE src_customers SET is_deleted = false, tier = 'free', name = 'Ann L.', updated_at = '{}'
         WHERE customer_id = 1;
         UPDATE src_customers SET tier = 'pro', name = 'Cyd Moe', updated_at = '{}' WHERE customer_id = 3",
        at("11:10"),
        at("11:10")
    ))
    .await;
    let r = s.run("11:20").await;
    assert_eq!((changes(&r), r.type1_updates), ((2, 0, 0, 0), 0));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            "1 09:00-09:40: free|free|Ann L.",
            "4 09:40-10:30: pro|free|Ann L.",
            "5 10:30-10:50: gold|free|Ann L.",
            "6 11:10-inf current: free|free|Ann L."
        ]
    );
    assert_eq!(
        s.versions("3", &cols).await,
        [
            "3 09:00-11:10: free|pro|Cyd Moe",
            "7 11:10-inf current: pro|pro|Cyd Moe"
        ]
    );
    s.settle(
        "customer 1 back as free and renamed; customer 3 goes pro and is renamed",
        &[1, 3, 4, 5, 6, 7],
        true,
    )
    .await;

    s.exec("UPDATE src_customers SET name = 'Cyd M.' WHERE customer_id = 3")
        .await;
    let r = s.full_refresh("11:30").await;
    assert_eq!((changes(&r), r.type1_updates), ((0, 0, 0, 0), 1));
    assert_eq!(
        s.versions("3", &cols).await,
        ["3 09:00-11:10: free|pro|Cyd M.", "7 11:10-inf current: pro|pro|Cyd M."]
    );
    s.settle(
        "customer 3 renamed without moving updated_at; full refresh",
        &[3, 7],
        true,
    )
    .await;
    s.transcript
}

/// Case 5: keys deleted (soft at a new timestamp, hard by reconciliation at the run's
/// upper bound) come back in a later run: a new version with a new surrogate key, the
/// closed rows untouched. A hard-deleted key that comes back with `updated_at` exactly at
/// its tombstone's time opens its new version there (the version supersedes the
/// tombstone). The untouched key is never rewritten.
async fn deleted_key_returns_in_a_later_run(fx: Fixture) -> Vec<String> {
    let mut s = Scenario::new(fx).await;
    s.fx.set_setting("hard", "\"reconcile\"");
    s.fx.set_setting("max_fraction", "1.0");
    s.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '{}'),
                  (2, 'bob@example.com', 'pro', 'DE', '{}'),
                  (3, 'cyd@example.com', 'free', 'NL', '{}')",
        at("09:00"),
        at("09:00"),
        at("09:00")
    ))
    .await;
    let r = s.run("09:30").await;
    assert_eq!(changes(&r), (3, 0, 0, 0));
    s.settle("first load", &[1, 2, 3], true).await;

    s.exec(&format!(
        "UPDATE src_customers SET is_deleted = true, updated_at = '{}' WHERE customer_id = 1;
         DELETE FROM src_customers WHERE customer_id = 2",
        at("09:40")
    ))
    .await;
    let r = s.run("10:00").await;
    assert_eq!((changes(&r), r.reconciled_deletes), ((0, 0, 0, 2), 1));
    assert_eq!(s.versions("1", &["tier"]).await, ["1 09:00-09:40: free"]);
    assert_eq!(s.versions("2", &["tier"]).await, ["2 09:00-10:00: pro"]);
    s.settle(
        "customer 1 soft-deleted at 09:40, customer 2 hard-deleted (tombstone at 10:00)",
        &[1, 2],
        true,
    )
    .await;

    s.exec(&format!(
        "UPDATE src_customers SET is_deleted = false, updated_at = '{}' WHERE customer_id = 1;
         {INSERT} (2, 'bob@example.com', 'gold', 'DE', '{}')",
        at("10:10"),
        at("10:00")
    ))
    .await;
    let r = s.run("10:30").await;
    assert_eq!(changes(&r), (2, 0, 0, 0));
    assert_eq!(
        s.versions("1", &["tier"]).await,
        ["1 09:00-09:40: free", "4 10:10-inf current: free"],
        "back with the same values, a new surrogate key"
    );
    assert_eq!(
        s.versions("2", &["tier"]).await,
        ["2 09:00-10:00: pro", "5 10:30-inf current: gold"],
        "back stamped at the tombstone's own time: not later than the tombstone, so revived at the upper bound (spec 1.4)"
    );
    s.settle(
        "customer 1 back at 10:10, customer 2 back stamped 10:00 (its tombstone's time): revived at the upper bound 10:30",
        &[4, 5],
        true,
    )
    .await;

    s.exec("DELETE FROM src_customers WHERE customer_id = 1").await;
    let r = s.run("10:45").await;
    assert_eq!((changes(&r), r.reconciled_deletes), ((0, 0, 0, 1), 1));
    assert_eq!(
        s.versions("1", &["tier"]).await,
        ["1 09:00-09:40: free", "4 10:10-10:45: free"]
    );
    s.settle("customer 1 hard-deleted (tombstone at 10:45)", &[4], true)
        .await;

    s.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '{}')",
        at("11:00")
    ))
    .await;
    let r = s.run("11:10").await;
    assert_eq!(changes(&r), (1, 0, 0, 0));
    assert_eq!(
        s.versions("1", &["tier"]).await,
        ["1 09:00-09:40: free", "4 10:10-10:45: free", "6 11:00-inf current: pro"]
    );
    assert_eq!(s.versions("3", &["tier"]).await, ["3 09:00-inf current: free"]);
    s.settle("customer 1 back again at 11:00", &[6], true).await;
    s.transcript
}

/// Adds json / jsonb columns to `src_customers` (PostgreSQL).
async fn with_json_columns(s: &mut Scenario, ddl: &str, track: &str) {
    s.exec(ddl).await;
    s.fx.edit_config(r#"columns = ["email", "tier", "country"]"#, track);
}

/// Case 4 with json on PostgreSQL: a json Type 2 column `doc` with its Type 6 twin
/// `current_doc`, and a jsonb Type 1 column `meta`. json has no equality operator, so the
/// merge must compare `current_doc` as text; every change must reach the rows it should
/// and no other.
#[tokio::test]
async fn json_type2_with_current_twin_and_jsonb_type1() {
    let mut s = Scenario::new(Fixture::postgres().await).await;
    with_json_columns(
        &mut s,
        "ALTER TABLE src_customers ADD COLUMN doc json, ADD COLUMN meta jsonb",
        "columns = [\"email\", \"tier\", \"country\", \"doc\"]\ntype1 = [\"meta\"]\ncurrent_columns = [\"doc\"]",
    )
    .await;
    let cols = ["doc", "current_doc", "meta"];
    s.exec(&format!(
        r#"INSERT INTO src_customers (customer_id, email, tier, country, doc, meta, updated_at) VALUES
           (1, 'ann@example.com', 'free', 'FR', '{{"a": 1}}', '{{"m": 1}}', '{}'),
           (2, 'bob@example.com', 'pro', 'DE', '{{"b": [1, 2]}}', NULL, '{}')"#,
        at("09:00"),
        at("09:00")
    ))
    .await;
    let r = s.run("09:30").await;
    assert_eq!(changes(&r), (2, 0, 0, 0));
    s.settle("first load", &[1, 2], true).await;

    s.exec(&format!(
        r#"UPDATE src_customers SET doc = '{{"a": 2}}', updated_at = '{}' WHERE customer_id = 1"#,
        at("09:40")
    ))
    .await;
    let r = s.run("10:00").await;
    assert_eq!(changes(&r), (1, 0, 0, 0));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            r#"1 09:00-09:40: {"a": 1}|{"a": 2}|{"m": 1}"#,
            r#"3 09:40-inf current: {"a": 2}|{"a": 2}|{"m": 1}"#
        ]
    );
    s.settle("customer 1's doc changes (json, Type 2)", &[1, 3], true).await;

    s.exec(&format!(
        r#"UPDATE src_customers SET meta = '{{"m": 2}}', updated_at = '{}' WHERE customer_id = 1;
           UPDATE src_customers SET meta = '{{"m": 3}}', doc = '{{"b": [1, 2, 3]}}', updated_at = '{}'
           WHERE customer_id = 2"#,
        at("10:10"),
        at("10:10")
    ))
    .await;
    let r = s.run("10:20").await;
    assert_eq!((changes(&r), r.type1_updates), ((1, 0, 0, 0), 1));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            r#"1 09:00-09:40: {"a": 1}|{"a": 2}|{"m": 2}"#,
            r#"3 09:40-inf current: {"a": 2}|{"a": 2}|{"m": 2}"#
        ]
    );
    assert_eq!(
        s.versions("2", &cols).await,
        [
            r#"2 09:00-10:10: {"b": [1, 2]}|{"b": [1, 2, 3]}|{"m": 3}"#,
            r#"4 10:10-inf current: {"b": [1, 2, 3]}|{"b": [1, 2, 3]}|{"m": 3}"#
        ]
    );
    s.settle(
        "customer 1's meta changes (jsonb, Type 1); customer 2's doc and meta",
        &[1, 2, 3, 4],
        true,
    )
    .await;

    s.exec(&format!(
        "UPDATE src_customers SET is_deleted = true, updated_at = '{}' WHERE customer_id = 1",
        at("10:30")
    ))
    .await;
    let r = s.run("10:40").await;
    assert_eq!(changes(&r), (0, 0, 0, 1));
    s.settle("customer 1 deleted", &[3], true).await;

    s.exec(&format!(
        r#"UPDATE src_customers SET is_deleted = false, doc = '{{"a": 1}}', meta = '{{"m": 9}}', updated_at = '{}'
           WHERE customer_id = 1"#,
        at("10:50")
    ))
    .await;
    let r = s.run("11:00").await;
    assert_eq!(changes(&r), (1, 0, 0, 0));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            r#"1 09:00-09:40: {"a": 1}|{"a": 1}|{"m": 9}"#,
            r#"3 09:40-10:30: {"a": 2}|{"a": 1}|{"m": 9}"#,
            r#"5 10:50-inf current: {"a": 1}|{"a": 1}|{"m": 9}"#
        ]
    );
    s.settle("customer 1 back with its first doc", &[1, 3, 5], true).await;

    // Only the json text changes (no key, no value): json keeps its text, so the hash
    // and current_doc differ.
    s.exec(&format!(
        r#"UPDATE src_customers SET doc = '{{"a":1}}', updated_at = '{}' WHERE customer_id = 1"#,
        at("11:10")
    ))
    .await;
    let r = s.run("11:20").await;
    assert_eq!(changes(&r), (1, 0, 0, 0));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            r#"1 09:00-09:40: {"a": 1}|{"a":1}|{"m": 9}"#,
            r#"3 09:40-10:30: {"a": 2}|{"a":1}|{"m": 9}"#,
            r#"5 10:50-11:10: {"a": 1}|{"a":1}|{"m": 9}"#,
            r#"6 11:10-inf current: {"a":1}|{"a":1}|{"m": 9}"#
        ]
    );
    s.settle("customer 1's doc respaced", &[1, 3, 5, 6], true).await;

    s.exec(r#"UPDATE src_customers SET meta = '{"m": 10}' WHERE customer_id = 2"#)
        .await;
    let r = s.full_refresh("11:30").await;
    assert_eq!((changes(&r), r.type1_updates), ((0, 0, 0, 0), 1));
    s.settle(
        "customer 2's meta changed without moving updated_at; full refresh",
        &[2, 4],
        true,
    )
    .await;
}

/// A dimension with a plain json Type 1 column `prefs` (PostgreSQL), first-loaded.
async fn json_type1_loaded() -> Scenario {
    let mut s = Scenario::new(Fixture::postgres().await).await;
    with_json_columns(
        &mut s,
        "ALTER TABLE src_customers ADD COLUMN prefs json",
        "columns = [\"email\", \"tier\", \"country\"]\ntype1 = [\"prefs\"]",
    )
    .await;
    s.exec(&format!(
        r#"INSERT INTO src_customers (customer_id, email, tier, country, prefs, updated_at) VALUES
           (1, 'ann@example.com', 'free', 'FR', '{{"x": 1}}', '{}'),
           (2, 'bob@example.com', 'pro', 'DE', '[]', '{}')"#,
        at("09:00"),
        at("09:00")
    ))
    .await;
    let r = s.run("09:30").await;
    assert_eq!(changes(&r), (2, 0, 0, 0));
    s
}

/// Case 4 with a plain json Type 1 column on PostgreSQL: `prefs json`. A change to it
/// alone is a Type 1 observation and must rewrite every row of its key (and no other).
/// `verify` runs without `--against-source` here (see the next test).
///
/// json has no equality operator, so classify's Type 1 check compares it as text
/// (`text_compared` in the SQL context); before that, every run after the first load
/// failed with "operator does not exist: json = json".
#[tokio::test]
async fn json_type1() {
    let mut s = json_type1_loaded().await;
    let cols = ["tier", "prefs"];
    s.settle("first load", &[1, 2], false).await;

    s.exec(&format!(
        r#"UPDATE src_customers SET tier = 'pro', prefs = '{{"x": 2}}', updated_at = '{}' WHERE customer_id = 1"#,
        at("09:40")
    ))
    .await;
    let r = s.run("10:00").await;
    assert_eq!(changes(&r), (1, 0, 0, 0));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            r#"1 09:00-09:40: free|{"x": 2}"#,
            r#"3 09:40-inf current: pro|{"x": 2}"#
        ]
    );
    s.settle("customer 1 goes pro with new prefs", &[1, 3], false).await;

    s.exec(&format!(
        r#"UPDATE src_customers SET prefs = '{{"x": 3}}', updated_at = '{}' WHERE customer_id = 1;
           UPDATE src_customers SET prefs = NULL, updated_at = '{}' WHERE customer_id = 2"#,
        at("10:10"),
        at("10:10")
    ))
    .await;
    let r = s.run("10:20").await;
    assert_eq!((changes(&r), r.type1_updates), ((0, 0, 0, 0), 2));
    assert_eq!(
        s.versions("1", &cols).await,
        [
            r#"1 09:00-09:40: free|{"x": 3}"#,
            r#"3 09:40-inf current: pro|{"x": 3}"#
        ]
    );
    assert_eq!(s.versions("2", &cols).await, ["2 09:00-inf current: pro|NULL"]);
    s.settle(
        "customer 1's prefs change, customer 2's become NULL (json, Type 1)",
        &[1, 2, 3],
        false,
    )
    .await;

    // Only the json text changes: json keeps its text, so it is a Type 1 change.
    s.exec(&format!(
        r#"UPDATE src_customers SET prefs = '{{"x":3}}', updated_at = '{}' WHERE customer_id = 1"#,
        at("10:30")
    ))
    .await;
    let r = s.run("10:40").await;
    assert_eq!((changes(&r), r.type1_updates), ((0, 0, 0, 0), 1));
    s.settle("customer 1's prefs respaced", &[1, 3], false).await;
}

/// `verify --against-source` compares a json Type 1 column with the source's as text
/// (it failed to run at all on such a dimension before).
#[tokio::test]
async fn json_type1_verify_against_source() {
    let mut s = json_type1_loaded().await;
    s.settle("first load", &[1, 2], true).await;
}
