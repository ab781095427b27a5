//! Property: for random dimension histories (a few keys, random versions, repeats and
//! tombstones, loaded through the pipeline in two runs) and random facts (known and
//! unknown keys; random instants, exact version boundaries and a microsecond either side,
//! the far-future sentinel; RFC 3339 spellings with `Z` or an offset, with or without a
//! fraction), the in-memory `Index`,
//! `lookup_one` and `assign-keys` give every fact the same surrogate key.
//!
//! Cases come from a fixed seed; `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override the
//! count and the seed.

use std::fmt;

use chrono::FixedOffset;
use dimlog::config::Backend;
use dimlog::ident::Ident;
use dimlog::lookup::{assign_keys, lookup_one, AssignSpec, Index, UNKNOWN};
use dimlog::pipeline::Session;
use dimlog::ts::{Micros, FAR_FUTURE};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestError, TestRunner};

use super::{create_facts, facts, ints, FactCol};
use crate::support::fixture::{ts, Fixture};

/// Cases per backend when `PROPTEST_CASES` is not set.
const CASES: u32 = 24;
const SEED: u64 = 0x10c4_0b5e_a551_9e75;
const MINUTE: i64 = 60_000_000;
const BASE: &str = "2026-03-01T00:00:00Z";
/// Events fall in the first 600 minutes after [`BASE`].
const SPAN_MINUTES: i64 = 600;
const EMAILS: [&str; 2] = ["a@example.com", "b@example.com"];
const TIERS: [Option<&str>; 3] = [Some("free"), Some("pro"), None];

/// One row of the landing table: a version (values by index) or a delete.
#[derive(Clone, Copy, Debug)]
struct Event {
    key: i64,
    at: i64,
    /// `None`: a soft delete (a tombstone).
    values: Option<(usize, usize)>,
}

/// When a fact happened.
#[derive(Clone, Copy, Debug)]
enum When {
    /// Any instant in and around the events' span.
    Free(i64),
    /// An event's instant (and key) plus -1, 0 or +1 µs.
    Boundary(proptest::sample::Index, i64),
    /// The far-future sentinel plus -1, 0 or +1 µs.
    Sentinel(i64),
}

#[derive(Clone, Copy, Debug)]
struct FactSpec {
    /// 1..=4 may exist; 0 and 5 never do.
    key: i64,
    when: When,
    /// Which RFC 3339 spelling the fact table holds (SQLite stores text).
    form: u8,
}

#[derive(Clone)]
struct Case {
    events: Vec<Event>,
    /// The first run's upper bound, in minutes after [`BASE`].
    first_upper: i64,
    facts: Vec<FactSpec>,
    /// The fact table already has the surrogate-key column.
    sk_column: bool,
}

impl Case {
    /// Each fact's key and instant.
    fn resolved(&self) -> Vec<(i64, Micros)> {
        let base = ts(BASE).0;
        self.facts
            .iter()
            .map(|f| match f.when {
                When::Free(us) => (f.key, Micros(base + us)),
                When::Boundary(i, delta) if !self.events.is_empty() => {
                    let e = self.events[i.index(self.events.len())];
                    (e.key, Micros(base + e.at + delta))
                }
                When::Boundary(_, delta) => (f.key, Micros(base + delta)),
                When::Sentinel(delta) => (f.key, FAR_FUTURE.plus(delta)),
            })
            .collect()
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = ts(BASE).0;
        writeln!(f, "landing table (first run at +{}m):", self.first_upper)?;
        for e in &self.events {
            let at = Micros(base + e.at).to_text();
            match e.values {
                Some((email, tier)) => writeln!(f, "  key {} at {at}: {} {:?}", e.key, EMAILS[email], TIERS[tier])?,
                None => writeln!(f, "  key {} at {at}: deleted", e.key)?,
            }
        }
        writeln!(f, "facts (sk column present: {}):", self.sk_column)?;
        for ((key, at), spec) in self.resolved().iter().zip(&self.facts) {
            writeln!(f, "  key {key} at {}", fact_text(*at, spec.form))?;
        }
        Ok(())
    }
}

fn event() -> impl Strategy<Value = Event> {
    (
        1..=4i64,
        0..SPAN_MINUTES,
        prop_oneof![3 => Just(0i64), 1 => 0..1_000_000i64],
        prop::option::weighted(0.8, (0..EMAILS.len(), 0..TIERS.len())),
    )
        .prop_map(|(key, minute, micro, values)| Event {
            key,
            at: minute * MINUTE + micro,
            values,
        })
}

fn fact() -> impl Strategy<Value = FactSpec> {
    let when = prop_oneof![
        3 => (-60 * MINUTE..(SPAN_MINUTES + 60) * MINUTE).prop_map(When::Free),
        4 => (any::<proptest::sample::Index>(), -1..=1i64).prop_map(|(i, d)| When::Boundary(i, d)),
        1 => (-1..=1i64).prop_map(When::Sentinel),
    ];
    (0..=5i64, when, 0..4u8).prop_map(|(key, when, form)| FactSpec { key, when, form })
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(event(), 0..16),
        0..=SPAN_MINUTES,
        prop::collection::vec(fact(), 1..32),
        any::<bool>(),
    )
        .prop_map(|(events, first_upper, facts, sk_column)| Case {
            events,
            first_upper,
            facts,
            sk_column,
        })
}

/// A fact's timestamp as the fact table holds it: fixed-width UTC text, or RFC 3339 with
/// the fraction's trailing zeros trimmed (none at whole seconds), at `Z`, `+02:00` or
/// `-03:30`.
fn fact_text(at: Micros, form: u8) -> String {
    if form == 0 {
        return at.to_text();
    }
    let (seconds, suffix) = match form {
        1 => (0, "Z"),
        2 => (2 * 3600, "+02:00"),
        _ => (-(3 * 3600 + 1800), "-03:30"),
    };
    let local = at
        .to_utc()
        .with_timezone(&FixedOffset::east_opt(seconds).expect("an offset"));
    let micros = at.0.rem_euclid(1_000_000);
    let fraction = if micros == 0 {
        String::new()
    } else {
        format!(".{micros:06}").trim_end_matches('0').to_string()
    };
    format!("{}{fraction}{suffix}", local.format("%Y-%m-%dT%H:%M:%S"))
}

fn check(cond: bool, message: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if cond {
        Ok(())
    } else {
        Err(TestCaseError::fail(message()))
    }
}

async fn run_case(backend: Backend, database: Option<&str>, case: &Case) -> Result<(), TestCaseError> {
    let mut fx = match database {
        Some(url) => Fixture::postgres_reset(url.to_string()).await,
        None => Fixture::on(backend).await,
    };
    fx.use_feed().await;
    let base = ts(BASE);
    if !case.events.is_empty() {
        let rows: Vec<String> = case
            .events
            .iter()
            .map(|e| {
                let at = Micros(base.0 + e.at).to_text();
                match e.values {
                    Some((email, tier)) => format!(
                        "({}, '{}', {}, 'FR', false, '{at}')",
                        e.key,
                        EMAILS[email],
                        TIERS[tier].map_or("NULL".to_string(), |t| format!("'{t}'"))
                    ),
                    None => format!("({}, NULL, NULL, NULL, true, '{at}')", e.key),
                }
            })
            .collect();
        fx.exec(&format!(
            "INSERT INTO src_feed (customer_id, email, tier, country, is_deleted, updated_at) VALUES {}",
            rows.join(", ")
        ))
        .await;
    }
    // Two runs: the first sees the events up to its upper bound, the second the rest. A
    // first load whose upper bound is before every event is refused (it could read
    // nothing), so then there is one run.
    let first_upper = case.first_upper * MINUTE;
    if case.events.is_empty() || case.events.iter().any(|e| e.at <= first_upper) {
        fx.run(&base.plus(first_upper).to_text()).await;
    }
    fx.run(&base.plus((SPAN_MINUTES + 1) * MINUTE).to_text()).await;

    let resolved = case.resolved();
    let mut columns = vec![
        FactCol::Int("fact_id"),
        FactCol::Int("customer_id"),
        FactCol::At("ordered_at"),
    ];
    if case.sk_column {
        columns.push(FactCol::Int("customer_sk"));
    }
    create_facts(&mut fx, "facts", &columns).await;
    let values: Vec<String> = resolved
        .iter()
        .zip(&case.facts)
        .enumerate()
        .map(|(i, ((key, at), spec))| format!("({i}, {key}, '{}')", fact_text(*at, spec.form)))
        .collect();
    fx.target_exec(&format!(
        "INSERT INTO facts (fact_id, customer_id, ordered_at) VALUES {}",
        values.join(", ")
    ))
    .await;

    let plan = fx.plan();
    let mut session = Session::open(&plan)
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let index = Index::load(&mut session.target, &session.ctx)
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let spec = AssignSpec {
        dimension: plan.name.clone(),
        facts: Ident::table("facts").expect("an identifier"),
        key_columns: vec![Ident::column("customer_id").expect("an identifier")],
        at_column: Ident::column("ordered_at").expect("an identifier"),
        sk_column: Ident::column("customer_sk").expect("an identifier"),
        unknown_is_error: false,
        overwrite: false,
        timezone: None,
    };
    let report = assign_keys(&mut session.target, &session.ctx, &spec)
        .await
        .map_err(|e| TestCaseError::fail(format!("assign-keys failed: {e}")))?;

    if !case.sk_column {
        columns.push(FactCol::Int("customer_sk"));
    }
    let table = facts(&mut fx, "facts", &columns).await;
    let assigned = ints(&table, "customer_sk");
    let dimension = fx.dimension().await;
    let mut matched = 0;
    for (i, (key, at)) in resolved.iter().enumerate() {
        let from_index = index
            .lookup(&[key.to_string().as_str()], *at)
            .expect("one value per key column");
        let one = lookup_one(&mut session.target, &session.ctx, &[key.to_string()], *at)
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .unwrap_or(UNKNOWN);
        let fact = || {
            format!(
                "fact {i}: key {key} at {} (stored as {:?})\ndimension:{dimension:?}",
                at.to_text(),
                fact_text(*at, case.facts[i].form)
            )
        };
        check(assigned[i] == Some(from_index), || {
            format!("assign-keys gave {:?}, the index {from_index}; {}", assigned[i], fact())
        })?;
        check(one == from_index, || {
            format!("lookup gave {one}, the index {from_index}; {}", fact())
        })?;
        if from_index != UNKNOWN {
            matched += 1;
        }
    }
    check(
        report.facts_matched == matched && report.facts_unknown == resolved.len() as i64 - matched,
        || format!("assign-keys counted {report:?}, the index {matched} matched"),
    )?;
    Ok(())
}

fn check_property(backend: Backend) {
    let config = crate::support::property::config(CASES, SEED, 200);
    let mut runner = TestRunner::new(config);
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    };
    // PostgreSQL cases share one database, emptied before each case.
    let database = match backend {
        Backend::Postgres | Backend::Citus => Some(runtime().block_on(crate::support::pg::fresh_database())),
        Backend::Sqlite => None,
    };
    let result = runner.run(&case(), |case| {
        runtime().block_on(run_case(backend, database.as_deref(), &case))
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, case)) => {
            panic!("the index and assign-keys disagree on {backend:?}.\nminimal failing case:\n{case:?}\n{reason}")
        }
        Err(TestError::Abort(reason)) => panic!("the property test aborted: {reason}"),
    }
}

#[test]
fn index_and_assign_keys_agree_sqlite() {
    check_property(Backend::Sqlite);
}

#[test]
fn index_and_assign_keys_agree_postgres() {
    check_property(Backend::Postgres);
}
