//! Property: any history of a few keys, loaded by any schedule of runs, ends where the
//! oracle of spec section 1 ([`super::model`]) says, on SQLite and on PostgreSQL.
//!
//! A case is a random script of source writes (inserts, updates to and from NULL, values
//! that repeat, soft deletes, hard deletes, returns after a delete, rows stamped in the
//! past or the future of the run clock, corrections in place) and runs (random upper
//! bounds, lookbacks, reruns at the same upper, full refreshes, reconciliation of hard
//! deletes, dry runs, and crashes at every failpoint followed by a retry), against a
//! keyed table (`history = "latest"`) or a landing table (`history = "all"`). After every
//! run the run's counts, its window and watermark, the whole log and the whole dimension
//! must equal the model's. Surrogate keys are compared through a mapping that must be a
//! bijection, must never change once seen, and must give each run's new versions keys
//! above every earlier one; `row_hash` must be equal exactly when the tracked values are.
//! At the end, `verify` must find nothing, and a one-shot full load of the final source
//! into a second dimension must equal the declarative derivation (which the model must
//! agree with too).
//!
//! Cases come from a fixed seed; `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override the
//! count and the seed. A failure is shrunk to a short script and printed as the SQL and
//! `dimlog run` lines that reproduce it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Instant;

use dimlog::config::Backend;
use dimlog::pipeline::{Quiet, RunOptions, RunReport, Session};
use dimlog::state::RunKind;
use dimlog::ts::Micros;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{TestCaseError, TestError, TestRunner};

use super::model::{derive_from_history, show_vals, Model, Payload, Planned, RunSpec, Source, Vals};
use crate::support::fixture::{ts, Dump, Fixture};

/// Cases per backend when `PROPTEST_CASES` is not set.
const SQLITE_CASES: u32 = 160;
const POSTGRES_CASES: u32 = 80;
/// Cases on Citus: each distributes a dimension's tables anew (seconds, not milliseconds).
#[cfg(feature = "citus-tests")]
const CITUS_CASES: u32 = 16;
/// The fixed seed of CI runs (`PROPTEST_RNG_SEED` overrides).
const SEED: u64 = 0x5cd2_d1a1_0c0f_fee5;

const MINUTE: i64 = 60_000_000;
const EMAILS: [Option<&str>; 3] = [None, Some("a"), Some("b")];
/// NULL, '' and the text 'NULL' must all be told apart.
const TIERS: [Option<&str>; 3] = [None, Some(""), Some("NULL")];
const COUNTRIES: [Option<&str>; 2] = [Some("FR"), None];
const LOOKBACKS: [i64; 4] = [0, 5, 15, 60];
/// The values a `same` write repeats when the key has none yet.
const FIRST: Vals = [Some("a"), None, Some("FR")];

/// What a write puts in the key's row.
#[derive(Clone, Copy, Debug)]
enum What {
    Live(Vals),
    /// The key's last written values again, at a new time (an update that changes
    /// nothing tracked).
    Same,
    Deleted,
}

#[derive(Clone)]
struct RunStep {
    /// Minutes the run clock (its `--upper`) moves; 0 reruns at the same upper.
    advance: i64,
    /// `source.lookback`, minutes.
    lookback: i64,
    full_refresh: bool,
    reconcile: bool,
    /// Crash at this failpoint, then retry the same run.
    crash: Option<&'static str>,
    dry_run: bool,
}

#[derive(Clone)]
enum Step {
    /// A write to key `key` stamped `offset` minutes from the run clock (negative: in the
    /// past, possibly behind the watermark; positive: after the next upper bound), with
    /// the literal's offset `+02:00` instead of `Z` when `shifted`.
    Write {
        key: i64,
        offset: i64,
        what: What,
        shifted: bool,
    },
    /// A write to key `key` stamped `back` minutes before the key's newest source row
    /// (or the clock): a late row in a landing table, an `updated_at` that moves
    /// backwards in a keyed table.
    Late {
        key: i64,
        back: i64,
        what: What,
    },
    /// The key's newest source row rewritten in place, `updated_at` unchanged (the
    /// source corrected values without moving the change column).
    Correct {
        key: i64,
        what: What,
    },
    /// Every row of the key removed from the source.
    HardDelete {
        key: i64,
    },
    Run(RunStep),
}

#[derive(Clone)]
struct Case {
    /// A landing table read with `history = "all"`, else a keyed table.
    feed: bool,
    /// `deletes.hard = "reconcile"` in the config (else only `--reconcile-deletes` runs).
    reconcile_config: bool,
    /// Keyed by (region, customer_id), region a column the source generates from
    /// customer_id: the same keys, in a key of two columns (on Citus, distributed by its
    /// hash).
    composite: bool,
    steps: Vec<Step>,
}

impl fmt::Debug for RunStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run +{}m lookback {}m", self.advance, self.lookback)?;
        for (on, flag) in [
            (self.full_refresh, " --full-refresh"),
            (self.reconcile, " --reconcile-deletes"),
            (self.dry_run, " --dry-run"),
        ] {
            if on {
                f.write_str(flag)?;
            }
        }
        if let Some(c) = self.crash {
            write!(f, " crash@{c}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Write {
                key,
                offset,
                what,
                shifted,
            } => {
                write!(f, "write k{key} at clock{offset:+}m ")?;
                match what {
                    What::Live(v) => f.write_str(&show_vals(v))?,
                    What::Same => f.write_str("same values")?,
                    What::Deleted => f.write_str("soft delete")?,
                }
                if *shifted {
                    f.write_str(" (+02:00)")?;
                }
                Ok(())
            }
            Step::Late { key, back, what } => {
                write!(f, "write k{key} {back}m before its newest row ")?;
                match what {
                    What::Live(v) => f.write_str(&show_vals(v)),
                    What::Same => f.write_str("same values"),
                    What::Deleted => f.write_str("soft delete"),
                }
            }
            Step::Correct { key, what } => {
                write!(f, "correct k{key}'s newest row in place: ")?;
                match what {
                    What::Live(v) => f.write_str(&show_vals(v)),
                    What::Same => f.write_str("same values"),
                    What::Deleted => f.write_str("soft delete"),
                }
            }
            Step::HardDelete { key } => write!(f, "hard delete k{key}"),
            Step::Run(r) => write!(f, "{r:?}"),
        }
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Case: {} table{}",
            if self.feed {
                "landing (history = \"all\")"
            } else {
                "keyed (history = \"latest\")"
            },
            if self.reconcile_config {
                ", deletes.hard = \"reconcile\""
            } else {
                ""
            }
        )?;
        if self.composite {
            writeln!(f, "  keyed by (region, customer_id), region = customer_id % 3")?;
        }
        for (i, s) in self.steps.iter().enumerate() {
            writeln!(f, "  {:>2}. {s:?}", i + 1)?;
        }
        write!(f, "  and a final run +60m lookback 15m")
    }
}

fn vals() -> impl Strategy<Value = Vals> {
    (
        select(EMAILS.to_vec()),
        select(TIERS.to_vec()),
        select(COUNTRIES.to_vec()),
    )
        .prop_map(|(e, t, c)| [e, t, c])
}

fn what() -> impl Strategy<Value = What> {
    prop_oneof![
        5 => vals().prop_map(What::Live),
        2 => Just(What::Same),
        1 => Just(What::Deleted),
    ]
}

fn run_step() -> impl Strategy<Value = RunStep> {
    let advance = prop_oneof![1 => Just(0i64), 4 => 1..=30i64];
    let crash = prop_oneof![
        6 => Just(None),
        1 => select(dimlog::failpoint::ALL).prop_map(Some),
    ];
    (
        advance,
        select(LOOKBACKS.to_vec()),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.4),
        crash,
        prop::bool::weighted(0.1),
    )
        .prop_map(|(advance, lookback, full_refresh, reconcile, crash, dry_run)| RunStep {
            advance,
            lookback,
            full_refresh,
            reconcile,
            // A dry run commits nothing anyway; crashing one proves nothing more.
            dry_run: dry_run && crash.is_none(),
            crash: crash.filter(|_| cfg!(feature = "failpoints")),
        })
}

fn step() -> impl Strategy<Value = Step> {
    // Mostly near the clock (within the usual lookbacks), sometimes far behind it, and
    // now and then exactly at it: at the last upper bound, which a rerun reads again.
    let offset = prop_oneof![1 => Just(0i64), 3 => -15..=5i64, 1 => -40..=10i64];
    prop_oneof![
        5 => (1..=3i64, offset, what(), prop::bool::weighted(0.25))
            .prop_map(|(key, offset, what, shifted)| Step::Write { key, offset, what, shifted }),
        2 => (1..=3i64, 1..=10i64, what()).prop_map(|(key, back, what)| Step::Late { key, back, what }),
        2 => (1..=3i64, prop_oneof![4 => vals().prop_map(What::Live), 1 => Just(What::Deleted)])
            .prop_map(|(key, what)| Step::Correct { key, what }),
        2 => (1..=3i64).prop_map(|key| Step::HardDelete { key }),
        4 => run_step().prop_map(Step::Run),
    ]
}

/// A case; keyed by two columns in half the cases where `composite` (Citus's, whose
/// hashed keys are its own code path).
fn case(composite: bool) -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        prop::bool::weighted(0.5),
        prop::bool::weighted(if composite { 0.5 } else { 0.0 }),
        prop::collection::vec(step(), 1..=14),
    )
        .prop_map(|(feed, reconcile_config, composite, steps)| Case {
            feed,
            reconcile_config,
            composite,
            steps,
        })
}

type Check = Result<(), String>;

/// What the cases exercised, summed over a property test (to see that the generator
/// reaches the interesting rules).
#[derive(Default)]
struct Stats {
    cases: usize,
    /// Cases keyed by two columns.
    composite: usize,
    runs: usize,
    crashes: usize,
    dry_runs: usize,
    full_refreshes: usize,
    versions: i64,
    late_versions: i64,
    corrections: i64,
    tombstones: i64,
    reconciled: i64,
    reconciled_after_upper: i64,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} cases ({} keyed by two columns), {} committed runs ({} full refreshes), {} crashes retried, {} dry runs; \
             {} versions ({} late), {} corrections, {} tombstones ({} by reconciliation, {} of them \
             just after a version at the upper bound)",
            self.cases,
            self.composite,
            self.runs,
            self.full_refreshes,
            self.crashes,
            self.dry_runs,
            self.versions,
            self.late_versions,
            self.corrections,
            self.tombstones,
            self.reconciled,
            self.reconciled_after_upper
        )
    }
}

fn literal(at: Micros, shifted: bool) -> String {
    let t = at.to_utc();
    if shifted {
        (t + chrono::Duration::hours(2))
            .format("%Y-%m-%dT%H:%M:%S+02:00")
            .to_string()
    } else {
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    }
}

/// One log row of the target, parsed from the fixture's dump.
struct ActualLog {
    sk: Option<i64>,
    key: i64,
    vals: String,
    valid_from: String,
    deleted: bool,
    hash: Option<String>,
    load: i64,
}

fn render_vals(v: &[Option<String>]) -> String {
    let cells: Vec<String> = v
        .iter()
        .map(|c| c.as_deref().map_or_else(|| "NULL".to_string(), |s| format!("{s:?}")))
        .collect();
    format!("({})", cells.join(", "))
}

fn int(r: &std::collections::BTreeMap<String, Option<String>>, col: &str) -> Option<i64> {
    r[col]
        .as_deref()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{col} = {v:?}")))
}

fn parse_log(dump: &Dump) -> Vec<ActualLog> {
    dump.records()
        .iter()
        .map(|r| ActualLog {
            sk: int(r, "customer_sk"),
            key: int(r, "customer_id").expect("a key"),
            vals: render_vals(&[r["email"].clone(), r["tier"].clone(), r["country"].clone()]),
            valid_from: r["valid_from"].clone().expect("valid_from"),
            deleted: r["is_deleted"].as_deref() == Some("true"),
            hash: r["row_hash"].clone(),
            load: int(r, "load_id").expect("load_id"),
        })
        .collect()
}

fn log_line(key: i64, from: &str, deleted: bool, sk: &str, load: i64, vals: &str) -> String {
    let kind = if deleted { "tombstone" } else { "version  " };
    format!("k{key} {from} {kind} sk={sk} load={load} {vals}")
}

fn dim_line(key: i64, from: &str, to: &str, current: bool, sk: &str, load: i64, vals: &str) -> String {
    let state = if current { "current" } else { "closed " };
    format!("k{key} [{from} .. {to}) {state} sk={sk} load={load} {vals}")
}

/// Compares two multisets of lines; the error shows what is missing, what is extra, and
/// both whole tables.
fn same_lines(what: &str, mut expected: Vec<String>, mut actual: Vec<String>) -> Check {
    expected.sort();
    actual.sort();
    if expected == actual {
        return Ok(());
    }
    let mut missing = expected.clone();
    let mut extra = Vec::new();
    for a in &actual {
        match missing.iter().position(|e| e == a) {
            Some(i) => {
                missing.remove(i);
            }
            None => extra.push(a.clone()),
        }
    }
    let block = |lines: &[String]| {
        if lines.is_empty() {
            "    (none)\n".to_string()
        } else {
            lines.iter().map(|l| format!("    {l}\n")).collect()
        }
    };
    Err(format!(
        "the {what} differs from the oracle's\n  expected, not found:\n{}  found, not expected:\n{}  expected:\n{}  found:\n{}",
        block(&missing),
        block(&extra),
        block(&expected),
        block(&actual)
    ))
}

struct Harness {
    fx: Fixture,
    source: Source,
    model: Model,
    reconcile_config: bool,
    clock: Micros,
    lookback: i64,
    /// Actual run id of each of the model's successful runs.
    loads: Vec<i64>,
    /// Model surrogate key → actual, and back.
    sk_map: HashMap<u64, i64>,
    sk_owner: HashMap<i64, u64>,
    /// Tracked values → row_hash, and back, over everything seen.
    hashes: HashMap<String, String>,
    hash_owner: HashMap<String, String>,
    last_live: HashMap<i64, Vals>,
    /// What was done, as SQL and `dimlog run` lines.
    script: Vec<String>,
    stats: Stats,
}

impl Harness {
    /// A fixture in a new SQLite folder, or in `database` emptied (PostgreSQL).
    async fn new(backend: Backend, database: Option<&str>, case: &Case) -> Harness {
        let mut fx = match database {
            Some(url) => Fixture::postgres_reset(url.to_string()).await,
            None => Fixture::on(backend).await,
        };
        if case.feed {
            fx.use_feed().await;
        }
        if case.composite {
            let table = if case.feed { "src_feed" } else { "src_customers" };
            fx.exec(&format!(
                "ALTER TABLE {table} ADD COLUMN region bigint GENERATED ALWAYS AS (customer_id % 3) STORED"
            ))
            .await;
            fx.edit_config(r#"key = ["customer_id"]"#, r#"key = ["region", "customer_id"]"#);
        }
        fx.set_setting("max_fraction", "1.0");
        if case.reconcile_config {
            fx.set_setting("hard", "\"reconcile\"");
        }
        Harness {
            fx,
            source: Source::new(case.feed),
            model: Model::new(case.feed),
            reconcile_config: case.reconcile_config,
            clock: ts("2026-01-01T01:00:00Z"),
            lookback: 15,
            loads: Vec::new(),
            sk_map: HashMap::new(),
            sk_owner: HashMap::new(),
            hashes: HashMap::new(),
            hash_owner: HashMap::new(),
            last_live: HashMap::new(),
            script: vec![format!(
                "-- {} on {:?}, deletes.max_fraction = 1.0{}",
                if case.feed {
                    "src_feed, history = \"all\""
                } else {
                    "src_customers, history = \"latest\""
                },
                backend,
                if case.reconcile_config {
                    ", deletes.hard = \"reconcile\""
                } else {
                    ""
                }
            )],
            stats: Stats {
                cases: 1,
                ..Stats::default()
            },
        }
    }

    async fn step(&mut self, step: &Step) -> Check {
        match step {
            Step::Write {
                key,
                offset,
                what,
                shifted,
            } => {
                let at = self.clock.plus(offset * MINUTE);
                self.write(*key, at, literal(at, *shifted), what).await
            }
            Step::Late { key, back, what } => {
                let newest = self.source.rows.iter().filter(|r| r.key == *key).map(|r| r.at).max();
                let at = newest.unwrap_or(self.clock).plus(-back * MINUTE);
                self.write(*key, at, literal(at, false), what).await
            }
            Step::Correct { key, what } => {
                let newest = self.source.rows.iter().filter(|r| r.key == *key).max_by_key(|r| r.at);
                let Some(row) = newest.cloned() else {
                    self.script.push(format!("-- no row of k{key} to correct"));
                    return Ok(());
                };
                self.write(*key, row.at, row.literal, what).await
            }
            Step::HardDelete { key } => {
                let sql = self.source.hard_delete(*key);
                self.script.push(format!("{sql};"));
                self.fx.exec(&sql).await;
                Ok(())
            }
            Step::Run(r) => self.run(r).await,
        }
    }

    async fn write(&mut self, key: i64, at: Micros, literal: String, what: &What) -> Check {
        let payload = match what {
            What::Live(v) => Payload::Live(*v),
            What::Same => Payload::Live(self.last_live.get(&key).copied().unwrap_or(FIRST)),
            What::Deleted => Payload::Deleted,
        };
        if let Payload::Live(v) = payload {
            self.last_live.insert(key, v);
        }
        let sql = self.source.write(key, at, literal, payload);
        self.script.push(format!("{sql};"));
        self.fx.exec(&sql).await;
        Ok(())
    }

    async fn run(&mut self, step: &RunStep) -> Check {
        self.clock = self.clock.plus(step.advance * MINUTE);
        if step.lookback != self.lookback {
            self.fx.set_setting("lookback", &format!("\"{}m\"", step.lookback));
            self.lookback = step.lookback;
        }
        if let Some(name) = step.crash {
            self.attempt(step, Some(name), false).await?;
        }
        self.attempt(step, None, step.dry_run).await
    }

    async fn attempt(&mut self, step: &RunStep, crash: Option<&'static str>, dry_run: bool) -> Check {
        let spec = RunSpec {
            upper: self.clock,
            lookback: step.lookback * MINUTE,
            full_refresh: step.full_refresh,
            reconcile: step.reconcile || self.reconcile_config,
        };
        let mut line = format!("dimlog run --upper {}", self.clock);
        for (on, flag) in [
            (step.full_refresh, " --full-refresh"),
            (step.reconcile, " --reconcile-deletes"),
            (dry_run, " --dry-run"),
        ] {
            if on {
                line.push_str(flag);
            }
        }
        line.push_str(&format!("   # lookback {}m", step.lookback));
        if let Some(c) = crash {
            line.push_str(&format!(", DIMLOG_FAILPOINT={c}"));
        }
        self.script.push(line);

        let planned = self.model.plan(&self.source, &spec);
        if crash.is_some() {
            self.stats.crashes += 1;
        } else if dry_run {
            self.stats.dry_runs += 1;
        } else if !planned.refused {
            let c = &planned.counts;
            self.stats.runs += 1;
            self.stats.full_refreshes += usize::from(step.full_refresh);
            self.stats.versions += c.versions;
            self.stats.late_versions += c.late_versions;
            self.stats.corrections += c.corrections;
            self.stats.tombstones += c.tombstones;
            self.stats.reconciled += planned.reconciled;
            self.stats.reconciled_after_upper += planned.reconciled_after_upper;
        }
        let opts = RunOptions {
            kind: if step.full_refresh {
                RunKind::FullRefresh
            } else {
                RunKind::Incremental
            },
            upper: Some(self.clock),
            reconcile_deletes: step.reconcile,
            dry_run,
            failpoint: crash.map(str::to_string),
            ..RunOptions::incremental()
        };
        let before = if crash.is_some() || dry_run || planned.refused {
            Some(self.snapshot().await)
        } else {
            None
        };
        let result = self.fx.try_run_with(opts).await;
        if planned.refused {
            return match result {
                Err(e) if e.exit_code() == 2 => self.unchanged(before, "a refused window").await,
                Err(e) => Err(format!(
                    "the oracle refuses the window (upper before watermark - lookback, or before the oldest row on a first load); dimlog failed otherwise: {e}"
                )),
                Ok(report) => Err(format!(
                    "the oracle refuses the window (upper before watermark - lookback, or before the oldest row on a first load); dimlog ran: {report:?}"
                )),
            };
        }
        match (result, crash) {
            (Ok(report), _) if dry_run => {
                self.check_report(&report, &planned)?;
                if report.run_id.is_some() || report.status != "dry-run" {
                    return Err(format!("a dry run reported {report:?}"));
                }
                self.unchanged(before, "a dry run").await
            }
            (Err(dimlog::Error::Failpoint("after_commit")), Some("after_commit")) => {
                // The commit happened; only the report was lost.
                let run_id = self.latest_succeeded_run().await;
                self.committed(planned, run_id).await
            }
            (Err(dimlog::Error::Failpoint(fired)), Some(wanted)) if fired == wanted => {
                self.unchanged(before, &format!("a run that crashed at {fired}")).await
            }
            // after_append is only reached when there is something to append.
            (Ok(report), Some("after_append")) if planned.appended.is_empty() => {
                self.check_report(&report, &planned)?;
                let run_id = report.run_id.ok_or("no run id")?;
                self.committed(planned, run_id).await
            }
            (Ok(report), None) => {
                self.check_report(&report, &planned)?;
                let run_id = report.run_id.ok_or("no run id")?;
                self.committed(planned, run_id).await
            }
            (Ok(report), Some(c)) => Err(format!("the failpoint {c} did not fire: {report:?}")),
            (Err(e), _) => Err(format!("the run failed: {e}")),
        }
    }

    fn check_report(&self, report: &RunReport, planned: &Planned) -> Check {
        let text = |t: Option<Micros>| t.map_or_else(|| "-".to_string(), |t| t.to_text());
        let got = format!(
            "{:?}, reconciled {}, window [{} .. {}], watermark {}",
            report.counts,
            report.reconciled_deletes,
            text(report.low_watermark),
            report.upper_bound,
            text(report.high_watermark)
        );
        let want = format!(
            "{:?}, reconciled {}, window [{} .. {}], watermark {}",
            planned.counts,
            planned.reconciled,
            text(planned.low),
            self.clock,
            text(planned.watermark)
        );
        if got != want {
            return Err(format!("the run reported\n  {got}\nthe oracle expects\n  {want}"));
        }
        Ok(())
    }

    /// Log, dimension and state (none before the first run created the tables).
    async fn snapshot(&mut self) -> Vec<Dump> {
        if !self.fx.target_has_table("dimlog_state").await {
            return Vec::new();
        }
        vec![self.fx.log().await, self.fx.dimension().await, self.fx.state().await]
    }

    async fn unchanged(&mut self, before: Option<Vec<Dump>>, what: &str) -> Check {
        let before = before.expect("taken");
        let after = self.snapshot().await;
        let rows = |d: &[Dump]| d.iter().map(|d| d.rows.clone()).collect::<Vec<_>>();
        let empty = |d: &[Dump]| d.iter().all(|d| d.rows.is_empty());
        let same = if before.is_empty() {
            empty(&after)
        } else {
            rows(&before) == rows(&after)
        };
        if !same {
            return Err(format!(
                "{what} changed the target.\nbefore (log, dimension, state):{before:?}\nafter:{after:?}"
            ));
        }
        Ok(())
    }

    async fn latest_succeeded_run(&mut self) -> i64 {
        let runs = self.fx.runs().await;
        runs.records()
            .iter()
            .filter(|r| r["status"].as_deref() == Some("succeeded"))
            .filter_map(|r| int(r, "run_id"))
            .max()
            .expect("a succeeded run")
    }

    async fn committed(&mut self, planned: Planned, run_id: i64) -> Check {
        if self.loads.contains(&run_id) {
            return Err(format!("run id {run_id} was used twice"));
        }
        self.model.commit(planned);
        self.loads.push(run_id);
        let watermark = self.fx.watermark().await;
        let expected = self.model.watermark.map(|w| w.to_text());
        if watermark != expected {
            return Err(format!(
                "dimlog_state holds watermark {watermark:?}, the oracle {expected:?}"
            ));
        }
        self.compare_target().await
    }

    /// The whole log and dimension against the model's, with surrogate keys mapped.
    async fn compare_target(&mut self) -> Check {
        let log = parse_log(&self.fx.log().await);
        let dim_dump = self.fx.dimension().await;

        // Map the model's surrogate keys to the target's through the log rows that carry
        // them: same key, valid_from and run.
        let max_before = self.sk_owner.keys().max().copied().unwrap_or(0);
        for r in &self.model.log {
            let Some(m) = r.sk else { continue };
            let load = self.loads[r.run];
            let from = r.valid_from.to_text();
            let found: Vec<i64> = log
                .iter()
                .filter(|a| a.key == r.key && a.valid_from == from && !a.deleted && a.load == load)
                .filter_map(|a| a.sk)
                .collect();
            let [actual] = found[..] else { continue };
            match self.sk_map.get(&m) {
                Some(&known) if known != actual => {
                    return Err(format!(
                    "the version of k{} at {from} had surrogate key {known}; its log row of load {load} has {actual}",
                    r.key
                ))
                }
                Some(_) => {}
                None => {
                    if let Some(other) = self.sk_owner.get(&actual) {
                        return Err(format!(
                            "surrogate key {actual} is given to two versions (oracle keys {other} and {m})"
                        ));
                    }
                    if actual <= max_before {
                        return Err(format!(
                            "new surrogate key {actual} (k{} at {from}) does not continue from the maximum {max_before}",
                            r.key
                        ));
                    }
                    self.sk_map.insert(m, actual);
                    self.sk_owner.insert(actual, m);
                }
            }
        }
        let sk_text = |m: Option<u64>, map: &HashMap<u64, i64>| match m {
            None => "-".to_string(),
            Some(m) => map.get(&m).map_or_else(|| format!("?{m}"), i64::to_string),
        };

        let expected_log: Vec<String> = self
            .model
            .log
            .iter()
            .map(|r| {
                let vals = match r.payload {
                    Payload::Live(v) => show_vals(&v),
                    Payload::Deleted => show_vals(&[None, None, None]),
                };
                log_line(
                    r.key,
                    &r.valid_from.to_text(),
                    r.payload == Payload::Deleted,
                    &sk_text(r.sk, &self.sk_map),
                    self.loads[r.run],
                    &vals,
                )
            })
            .collect();
        let actual_log: Vec<String> = log
            .iter()
            .map(|a| {
                let sk = a.sk.map_or_else(|| "-".to_string(), |s| s.to_string());
                let line = log_line(a.key, &a.valid_from, a.deleted, &sk, a.load, &a.vals);
                if a.deleted && a.hash.is_some() {
                    format!("{line} with a row_hash")
                } else {
                    line
                }
            })
            .collect();
        same_lines("log", expected_log, actual_log)?;

        let expected_dim: Vec<String> = self
            .model
            .dimension()
            .iter()
            .map(|d| {
                dim_line(
                    d.key,
                    &d.valid_from.to_text(),
                    &d.valid_to.to_text(),
                    d.is_current,
                    &sk_text(Some(d.sk), &self.sk_map),
                    self.loads[d.run],
                    &show_vals(&d.vals),
                )
            })
            .collect();
        let mut actual_dim = Vec::new();
        let mut hashed: Vec<(String, Option<String>)> = log
            .iter()
            .filter(|a| !a.deleted)
            .map(|a| (a.vals.clone(), a.hash.clone()))
            .collect();
        for r in dim_dump.records() {
            let vals = render_vals(&[r["email"].clone(), r["tier"].clone(), r["country"].clone()]);
            actual_dim.push(dim_line(
                int(&r, "customer_id").expect("a key"),
                r["valid_from"].as_deref().unwrap_or("NULL"),
                r["valid_to"].as_deref().unwrap_or("NULL"),
                r["is_current"].as_deref() == Some("true"),
                r["customer_sk"].as_deref().unwrap_or("NULL"),
                int(&r, "load_id").unwrap_or(-1),
                &vals,
            ));
            hashed.push((vals, r["row_hash"].clone()));
        }
        same_lines("dimension", expected_dim, actual_dim)?;

        // row_hash is a function of the tracked values, and tells different values apart.
        for (vals, hash) in hashed {
            let hash = hash.ok_or_else(|| format!("a version of {vals} has no row_hash"))?;
            if let Some(known) = self.hashes.get(&vals) {
                if *known != hash {
                    return Err(format!("{vals} hashed to {known} and to {hash}"));
                }
            }
            if let Some(owner) = self.hash_owner.get(&hash) {
                if *owner != vals {
                    return Err(format!("{owner} and {vals} have the same row_hash {hash}"));
                }
            }
            self.hashes.insert(vals.clone(), hash.clone());
            self.hash_owner.insert(hash, vals);
        }
        Ok(())
    }

    /// `verify` finds nothing wrong with the dimension.
    async fn verify(&mut self) -> Check {
        let plan = self.fx.plan();
        let mut session = Session::open(&plan).await.map_err(|e| e.to_string())?;
        let report = dimlog::verify::verify(&mut session, &plan, false, &Quiet)
            .await
            .map_err(|e| format!("verify failed: {e}"))?;
        if !report.ok {
            return Err(format!("verify found discrepancies: {:?}", report.checks));
        }
        Ok(())
    }

    /// Loads the final source in one full refresh into a second dimension and compares
    /// it with the declarative derivation; the model must agree with that too.
    async fn one_shot(&mut self) -> Check {
        let upper = self.clock.plus(24 * 60 * MINUTE);
        let declared: Vec<String> = derive_from_history(&self.source.rows, self.source.feed)
            .iter()
            .map(|(key, vals, from, to, current)| {
                dim_line(*key, &from.to_text(), &to.to_text(), *current, "*", 0, &show_vals(vals))
            })
            .collect();

        let mut fresh = Model::new(self.source.feed);
        let planned = fresh.plan(
            &self.source,
            &RunSpec {
                upper,
                lookback: 0,
                full_refresh: true,
                reconcile: false,
            },
        );
        fresh.commit(planned);
        let modelled: Vec<String> = fresh
            .dimension()
            .iter()
            .map(|d| {
                dim_line(
                    d.key,
                    &d.valid_from.to_text(),
                    &d.valid_to.to_text(),
                    d.is_current,
                    "*",
                    0,
                    &show_vals(&d.vals),
                )
            })
            .collect();
        same_lines(
            "oracle's one-shot load (vs the declarative derivation)",
            declared.clone(),
            modelled,
        )?;

        self.fx.set_setting("name", "\"oneshot\"");
        self.fx.set_setting("log", "\"oneshot_versions\"");
        self.fx.set_setting("dimension", "\"dim_oneshot\"");
        self.script.push(format!(
            "-- a one-shot load into dim_oneshot: dimlog run --full-refresh --upper {upper}"
        ));
        let report = self
            .fx
            .try_run_with(RunOptions {
                kind: RunKind::FullRefresh,
                upper: Some(upper),
                reconcile_deletes: false,
                ..RunOptions::incremental()
            })
            .await
            .map_err(|e| format!("the one-shot load failed: {e}"))?;
        let dim = self.fx.dimension().await;
        let sks = dim.values("customer_sk");
        let mut unique = sks.clone();
        unique.sort();
        unique.dedup();
        if unique.len() != sks.len() || sks.iter().any(Option::is_none) {
            return Err(format!(
                "the one-shot dimension's surrogate keys are not unique: {sks:?}"
            ));
        }
        let loads = dim.values("load_id");
        let want = report.run_id.map(|id| id.to_string());
        if loads.iter().any(|l| *l != want) {
            return Err(format!("the one-shot rows carry load ids {loads:?}, not {want:?}"));
        }
        let actual: Vec<String> = dim
            .records()
            .iter()
            .map(|r| {
                dim_line(
                    int(r, "customer_id").expect("a key"),
                    r["valid_from"].as_deref().unwrap_or("NULL"),
                    r["valid_to"].as_deref().unwrap_or("NULL"),
                    r["is_current"].as_deref() == Some("true"),
                    "*",
                    0,
                    &render_vals(&[r["email"].clone(), r["tier"].clone(), r["country"].clone()]),
                )
            })
            .collect();
        same_lines("one-shot dimension (vs the declarative derivation)", declared, actual)
    }
}

async fn run_case(backend: Backend, database: Option<&str>, case: &Case, stats: &Mutex<Stats>) -> Check {
    let mut h = Harness::new(backend, database, case).await;
    let last = Step::Run(RunStep {
        advance: 60,
        lookback: 15,
        full_refresh: false,
        reconcile: false,
        crash: None,
        dry_run: false,
    });
    let mut result = Ok(());
    for step in case.steps.iter().chain([&last]) {
        result = h.step(step).await;
        if result.is_err() {
            break;
        }
    }
    if result.is_ok() {
        result = h.verify().await;
    }
    if result.is_ok() {
        result = h.one_shot().await;
    }
    if result.is_ok() {
        let mut total = stats.lock().expect("stats");
        let s = &h.stats;
        total.cases += s.cases;
        total.composite += usize::from(case.composite);
        total.runs += s.runs;
        total.crashes += s.crashes;
        total.dry_runs += s.dry_runs;
        total.full_refreshes += s.full_refreshes;
        total.versions += s.versions;
        total.late_versions += s.late_versions;
        total.corrections += s.corrections;
        total.tombstones += s.tombstones;
        total.reconciled += s.reconciled;
        total.reconciled_after_upper += s.reconciled_after_upper;
    }
    result.map_err(|e| format!("{e}\nscript so far:\n  {}", h.script.join("\n  ")))
}

/// The database the cases of `backend` share (emptied before each case), and on Citus the
/// lease that keeps it the test's own.
#[cfg(feature = "citus-tests")]
type Lease = Option<crate::support::citus::Lease>;
#[cfg(not(feature = "citus-tests"))]
type Lease = ();

async fn database_for(backend: Backend) -> (Option<String>, Lease) {
    match backend {
        Backend::Postgres => (Some(crate::support::pg::fresh_database().await), Lease::default()),
        #[cfg(feature = "citus-tests")]
        Backend::Citus => {
            let lease = crate::support::citus::lease().await;
            (Some(lease.url.clone()), Some(lease))
        }
        #[cfg(not(feature = "citus-tests"))]
        Backend::Citus => panic!("the Citus cases need the feature citus-tests"),
        Backend::Sqlite => (None, Lease::default()),
    }
}

fn check_property(backend: Backend, default_cases: u32) {
    let config = crate::support::property::config(default_cases, SEED, 400);
    let cases = config.cases;
    let mut runner = TestRunner::new(config);
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    };
    // PostgreSQL cases share one database, emptied before each case: creating a
    // database costs more than most cases.
    let (database, _lease) = runtime().block_on(database_for(backend));
    let started = Instant::now();
    let stats = Mutex::new(Stats::default());
    let result = runner.run(&case(backend == Backend::Citus), |case| {
        runtime()
            .block_on(run_case(backend, database.as_deref(), &case, &stats))
            .map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => eprintln!(
            "reliability::property on {backend:?}: {cases} cases passed in {:.1?}: {}",
            started.elapsed(),
            stats.lock().expect("stats")
        ),
        Err(TestError::Fail(reason, case)) => {
            panic!("the oracle and dimlog disagree on {backend:?}.\nminimal failing case:\n{case:?}\n\n{reason}")
        }
        Err(TestError::Abort(reason)) => panic!("the property test aborted: {reason}"),
    }
}

/// Cases the generator rarely reaches, through the same oracle.
fn directed_cases() -> Vec<Case> {
    let run = |advance: i64, reconcile: bool| {
        Step::Run(RunStep {
            advance,
            lookback: 15,
            full_refresh: false,
            reconcile,
            crash: None,
            dry_run: false,
        })
    };
    let write = |key: i64, offset: i64, what: What| Step::Write {
        key,
        offset,
        what,
        shifted: false,
    };
    let a = What::Live([Some("a"), None, Some("FR")]);
    let b = What::Live([Some("b"), Some(""), Some("FR")]);
    let mut cases = Vec::new();
    for feed in [false, true] {
        // Keys whose newest version sits at the upper bound are hard-deleted: a rerun at
        // that upper closes them 1 µs after the version (k2, older, at the upper bound).
        // Then k1 comes back with a row stamped before its tombstone, and again after it.
        cases.push(Case {
            composite: false,
            feed,
            reconcile_config: false,
            steps: vec![
                write(1, 5, a),
                write(2, 0, b),
                write(3, 5, b),
                run(5, false),
                Step::HardDelete { key: 1 },
                Step::HardDelete { key: 2 },
                Step::HardDelete { key: 3 },
                run(0, true),
                write(1, -1, b),
                run(10, true),
                write(1, 0, a),
                run(0, true),
            ],
        });
        // A late version equal to the version after it stays a version of its own, and a
        // correction of it keeps its surrogate key.
        cases.push(Case {
            composite: false,
            feed,
            reconcile_config: true,
            steps: vec![
                write(1, -10, a),
                write(1, 0, b),
                run(1, false),
                Step::Late {
                    key: 1,
                    back: 5,
                    what: b,
                },
                run(1, false),
                Step::Correct { key: 1, what: a },
                run(1, false),
            ],
        });
    }
    cases
}

fn check_directed(backend: Backend) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (database, _lease) = runtime.block_on(database_for(backend));
    let stats = Mutex::new(Stats::default());
    for case in directed_cases() {
        if let Err(e) = runtime.block_on(run_case(backend, database.as_deref(), &case, &stats)) {
            panic!("the oracle and dimlog disagree on {backend:?}.\n{case:?}\n\n{e}");
        }
    }
    let stats = stats.lock().expect("stats");
    assert_eq!((stats.reconciled, stats.reconciled_after_upper), (6, 4), "{stats}");
    assert!(stats.late_versions >= 2 && stats.corrections >= 2, "{stats}");
}

#[test]
fn directed_sqlite() {
    check_directed(Backend::Sqlite);
}

#[test]
fn directed_postgres() {
    check_directed(Backend::Postgres);
}

#[test]
fn sqlite() {
    check_property(Backend::Sqlite, SQLITE_CASES);
}

#[test]
fn postgres() {
    check_property(Backend::Postgres, POSTGRES_CASES);
}

/// The oracle on Citus: the PostgreSQL fixture's statements, the dimension distributed.
#[cfg(feature = "citus-tests")]
#[test]
fn citus() {
    check_property(Backend::Citus, CITUS_CASES);
}

#[cfg(feature = "citus-tests")]
#[test]
fn directed_citus() {
    check_directed(Backend::Citus);
}
