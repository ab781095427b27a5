//! The library's facade (issue 15): a program that only has a config drives a dimension
//! through `dimlog::Dimension` and the types it exposes, on SQLite and PostgreSQL, and
//! gets what the commands get. The fixture only makes source rows and fact tables and
//! reads the target back; every dimlog call here goes through the facade.

use std::time::Duration;

use dimlog::config::Backend;
use dimlog::dimension::{RunOptions, UNKNOWN};
use dimlog::ident::Ident;
use dimlog::ts::Micros;
use dimlog::{Dimension, Error};

use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(
    init_run_change_run_then_status_lookup_and_verify_agree,
    backfill_over_a_range,
    rebuild_repairs_the_dimension,
    assign_keys_fills_a_fact_table,
    a_dimension_never_loaded_is_not_loaded,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

fn at(text: &str) -> Micros {
    Micros::parse(text, None).unwrap_or_else(|e| panic!("bad timestamp {text:?}: {e}"))
}

/// An incremental run with a fixed upper bound.
fn upto(upper: &str) -> RunOptions {
    RunOptions {
        upper: Some(at(upper)),
        ..RunOptions::incremental()
    }
}

fn dimension(fx: &Fixture) -> Dimension {
    Dimension::load(fx.config_path()).unwrap_or_else(|e| panic!("the config does not load: {e}"))
}

/// Two customers on 1 and 2 March; customer 1 turns gold on 3 March. Returns the
/// dimension, loaded by two runs.
async fn two_runs(fx: &mut Fixture) -> Dimension {
    let dim = dimension(fx);
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-01T10:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T10:00:00Z')"
    ))
    .await;
    let first = dim.run(&upto("2026-03-02T12:00:00Z")).await.expect("the first run");
    assert_eq!((first.counts.rows_read, first.counts.versions), (2, 2), "{first:?}");
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-03T09:00:00Z' WHERE customer_id = 1")
        .await;
    let second = dim.run(&upto("2026-03-03T12:00:00Z")).await.expect("the second run");
    assert_eq!(
        (
            second.counts.versions,
            second.counts.corrections,
            second.counts.tombstones
        ),
        (1, 0, 0),
        "{second:?}"
    );
    assert_eq!(second.high_watermark, Some(at("2026-03-03T09:00:00Z")));
    assert_eq!(second.watermark_before, first.high_watermark);
    dim
}

/// `lookup` of one key at one time; panics on failure.
async fn sk(dim: &Dimension, key: &str, when: &str) -> Option<i64> {
    dim.lookup(&[key], at(when))
        .await
        .unwrap_or_else(|e| panic!("lookup {key} at {when}: {e}"))
}

/// `init` creates the tables and says which columns it tracks; two runs load a change;
/// then `status`, `lookup`, the in-memory index and `verify` all describe the same
/// dimension, on the target alone and against the source.
async fn init_run_change_run_then_status_lookup_and_verify_agree(mut fx: Fixture) {
    let dim = dimension(&fx);
    assert_eq!(dim.name(), "customer");
    let record = dim.init().await.expect("init");
    assert_eq!(record.tracked_columns, ["email", "tier", "country"]);
    assert_eq!(record.key_columns, ["customer_id"]);
    assert!(record.type1_columns.is_empty());
    // Idempotent.
    assert_eq!(
        dim.init().await.expect("init again").tracked_columns,
        record.tracked_columns
    );
    let empty = dim.status(10, false).await.expect("status before any run");
    assert!(empty.watermarks.is_empty() && empty.runs.is_empty(), "{empty:?}");

    let dim = two_runs(&mut fx).await;

    let status = dim.status(10, false).await.expect("status");
    assert_eq!(status.dimension, "customer");
    let marks: Vec<(&str, Option<&str>)> = status
        .watermarks
        .iter()
        .map(|w| (w.role.as_str(), w.high_watermark.as_deref()))
        .collect();
    assert_eq!(marks, [("incremental", Some("2026-03-03T09:00:00.000000Z"))]);
    let runs: Vec<(&str, i64)> = status
        .runs
        .iter()
        .map(|r| (r.status.as_str(), r.counts.versions))
        .collect();
    assert_eq!(runs, [("succeeded", 1), ("succeeded", 2)], "newest first");
    assert_eq!((status.source_newest.as_deref(), status.lag_seconds), (None, None));
    let columns = status.columns.as_ref().expect("the column sets");
    assert_eq!(columns.tracked_columns, record.tracked_columns);
    assert_eq!(status.pending_config_change, None);
    assert_eq!(dim.status(1, false).await.expect("one run").runs.len(), 1);
    let against = dim.status(10, true).await.expect("status against the source");
    assert_eq!(against.source_newest.as_deref(), Some("2026-03-03T09:00:00.000000Z"));
    assert_eq!(against.lag_seconds, Some(0.0));
    assert!(against.source_clock.is_some(), "{against:?}");
    // A row stamped after the source's clock (a wrong clock): the lag a run can close
    // ends at the source's clock, not at that row (it said the watermark lagged by the
    // time to a stamp no run could read yet; found by an outside trial).
    fx.exec("INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES (77, 'f@x', 'free', 'DE', '2099-01-01T00:00:00Z')")
        .await;
    let ahead = dim.status(10, true).await.expect("status against the source");
    let clock = dimlog::ts::Micros::parse(ahead.source_clock.as_deref().expect("a clock"), None).expect("a time");
    let expected = (clock.0
        - dimlog::ts::Micros::parse("2026-03-03T09:00:00Z", None)
            .expect("a time")
            .0) as f64
        / 1e6;
    let lag = ahead.lag_seconds.expect("a lag");
    assert!((lag - expected).abs() < 60.0, "{lag} vs {expected}: {ahead:?}");
    fx.exec("DELETE FROM src_customers WHERE customer_id = 77").await;

    // Customer 1's two versions have two surrogate keys; intervals are half-open.
    let free = sk(&dim, "1", "2026-03-01T10:00:00Z").await.expect("the first version");
    let gold = sk(&dim, "1", "2026-03-03T09:00:00Z").await.expect("the second version");
    assert_ne!(free, gold);
    assert_eq!(sk(&dim, "1", "2026-03-03T08:59:59.999999Z").await, Some(free));
    assert_eq!(
        sk(&dim, "1", "2026-03-01T09:59:59.999999Z").await,
        None,
        "before the first version"
    );
    let bob = sk(&dim, "2", "2026-04-01T00:00:00Z").await.expect("customer 2");
    assert!(![free, gold].contains(&bob));
    assert_eq!(sk(&dim, "3", "2026-03-03T00:00:00Z").await, None, "an unknown key");
    // A key spelled another way is the same key (07 is the integer 7).
    assert_eq!(sk(&dim, "01", "2026-03-03T09:00:00Z").await, Some(gold));
    match dim.lookup(&["1", "2"], at("2026-03-03T09:00:00Z")).await {
        Err(e @ Error::Lookup(dimlog::LookupError::KeyParts { expected: 1, given: 2 })) => {
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains("source.key"), "{e}");
        }
        other => panic!("a key of two parts for a one-column key: {other:?}"),
    }

    // The in-memory index gives every fact the same key as `lookup`.
    let index = dim.index().await.expect("the index");
    assert_eq!(index.len(), 3);
    for (key, when) in [
        ("1", "2026-03-01T09:59:59.999999Z"),
        ("1", "2026-03-01T10:00:00Z"),
        ("1", "2026-03-03T08:59:59.999999Z"),
        ("1", "2026-03-03T09:00:00Z"),
        ("2", "2026-03-02T10:00:00Z"),
        ("2", "2026-03-02T09:00:00Z"),
        ("3", "2026-03-03T00:00:00Z"),
    ] {
        let looked_up = sk(&dim, key, when).await.unwrap_or(UNKNOWN);
        assert_eq!(index.lookup(&[key], at(when)), Ok(looked_up), "{key} at {when}");
    }

    // The invariants hold, and the dimension matches the source.
    for against_source in [false, true] {
        let report = dim.verify(against_source).await.expect("verify");
        assert!(report.ok, "verify (against the source: {against_source}): {report:?}");
        assert!(report.checks.iter().all(|c| c.count == 0), "{report:?}");
        let names: Vec<&str> = report.checks.iter().map(|c| c.name).collect();
        assert!(names.contains(&"rebuild_diff"), "{names:?}");
        assert_eq!(names.contains(&"source_different"), against_source, "{names:?}");
    }
    fx.assert_dimension_derives_from_log().await;
}

/// A backfill reads `[from, to)` chunk by chunk under its own watermark role, finds a
/// change the incremental lookback cannot see, leaves the incremental watermark alone, and
/// skips its committed chunks when run again.
async fn backfill_over_a_range(mut fx: Fixture) {
    let dim = dimension(&fx);
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-01T10:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T10:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-03T10:00:00Z')"
    ))
    .await;
    dim.run(&upto("2026-03-03T12:00:00Z")).await.expect("the run");
    let before = dim.status(10, false).await.expect("status").watermarks;

    // Far behind the watermark: only a backfill of old dates reads it.
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-01T15:00:00Z' WHERE customer_id = 1")
        .await;
    let day = Duration::from_secs(24 * 3600);
    let (from, to) = (at("2026-03-01T00:00:00Z"), at("2026-03-03T00:00:00Z"));
    let report = dim.backfill(from, to, day).await.expect("the backfill");
    let role = "backfill:2026-03-01T00:00:00.000000Z/2026-03-03T00:00:00.000000Z";
    assert_eq!((report.dimension.as_str(), report.role.as_str()), ("customer", role));
    assert_eq!(report.failed, 0);
    let outcomes: Vec<(&str, Micros, Micros)> = report
        .chunks
        .iter()
        .map(|c| (c.outcome.as_str(), c.chunk.from, c.chunk.to))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("committed", from, at("2026-03-02T00:00:00Z")),
            ("committed", at("2026-03-02T00:00:00Z"), to),
        ]
    );
    let counts: Vec<(i64, i64)> = report
        .chunks
        .iter()
        .map(|c| c.report.as_ref().expect("a chunk's report"))
        .map(|r| (r.counts.rows_read, r.counts.versions))
        .collect();
    assert_eq!(counts, [(1, 1), (1, 0)]);

    let after = dim.status(10, false).await.expect("status").watermarks;
    let incremental = |w: &[dimlog::dimension::WatermarkRow]| {
        w.iter()
            .find(|w| w.role == "incremental")
            .map(|w| (w.high_watermark.clone(), w.run_id))
    };
    assert_eq!(
        incremental(&after),
        incremental(&before),
        "the backfill moved the watermark"
    );
    let own = after
        .iter()
        .find(|w| w.role == role)
        .expect("the backfill's own watermark");
    assert_eq!(own.high_watermark.as_deref(), Some("2026-03-02T10:00:00.000000Z"));
    let gold = sk(&dim, "1", "2026-03-01T15:00:00Z").await;
    assert!(gold.is_some() && gold != sk(&dim, "1", "2026-03-01T14:59:59Z").await);

    // Run again: every chunk was committed, so nothing is read.
    let again = dim.backfill(from, to, day).await.expect("the backfill again");
    let outcomes: Vec<&str> = again.chunks.iter().map(|c| c.outcome.as_str()).collect();
    assert_eq!(outcomes, ["skipped (committed earlier)", "skipped (committed earlier)"]);
    assert!(dim.verify(true).await.expect("verify").ok);
    fx.assert_dimension_derives_from_log().await;
}

/// Rows of the dimension edited or deleted by hand are findings of `verify`; `rebuild`
/// derives the dimension from the log again, and the surrogate keys are the same.
async fn rebuild_repairs_the_dimension(mut fx: Fixture) {
    let dim = two_runs(&mut fx).await;
    let bob = sk(&dim, "2", "2026-03-03T00:00:00Z").await;
    let free = sk(&dim, "1", "2026-03-02T00:00:00Z").await;
    fx.target_exec("UPDATE dim_customer SET tier = 'tampered' WHERE customer_id = 2")
        .await;
    fx.target_exec("DELETE FROM dim_customer WHERE customer_id = 1 AND tier = 'free'")
        .await;
    let report = dim.verify(false).await.expect("verify");
    assert!(!report.ok, "{report:?}");
    let found: Vec<&str> = report.checks.iter().filter(|c| c.count > 0).map(|c| c.name).collect();
    assert!(
        found.contains(&"rebuild_diff") && found.contains(&"sk_missing"),
        "{found:?}"
    );
    assert_eq!(sk(&dim, "1", "2026-03-02T00:00:00Z").await, None, "the deleted row");

    dim.rebuild().await.expect("rebuild");
    let report = dim.verify(false).await.expect("verify after the rebuild");
    assert!(report.ok, "{report:?}");
    assert_eq!(sk(&dim, "2", "2026-03-03T00:00:00Z").await, bob);
    assert_eq!(sk(&dim, "1", "2026-03-02T00:00:00Z").await, free);
    let tiers = fx
        .target_query("SELECT tier FROM dim_customer WHERE customer_id = 2")
        .await;
    assert_eq!(tiers, [[Some("pro".to_string())]]);
    fx.assert_dimension_derives_from_log().await;
}

/// `assign_keys` fills a staged fact table's surrogate-key column with what `lookup`
/// says of each fact (-1 for none), counts them, and changes nothing when run again;
/// with unknown members refused it fails and writes nothing.
async fn assign_keys_fills_a_fact_table(mut fx: Fixture) {
    let dim = two_runs(&mut fx).await;
    let ddl = match fx.backend {
        Backend::Postgres | Backend::Citus => {
            "CREATE TABLE facts (order_id bigint, customer_id bigint, ordered_at timestamptz)"
        }
        Backend::Sqlite => "CREATE TABLE facts (order_id INTEGER, customer_id INTEGER, ordered_at TEXT)",
    };
    fx.target_exec(ddl).await;
    let facts = [
        (1, "1", "2026-03-02T00:00:00Z"),
        (2, "1", "2026-03-03T10:00:00Z"),
        (3, "2", "2026-03-02T10:00:00Z"),
        (4, "9", "2026-03-02T10:00:00Z"),
        (5, "1", "2026-02-01T00:00:00Z"),
    ];
    let values: Vec<String> = facts
        .iter()
        .map(|(id, key, when)| format!("({id}, {key}, '{when}')"))
        .collect();
    fx.target_exec(&format!(
        "INSERT INTO facts (order_id, customer_id, ordered_at) VALUES {}",
        values.join(", ")
    ))
    .await;
    let mut expected = Vec::new();
    for (id, key, when) in facts {
        let key = sk(&dim, key, when).await.unwrap_or(UNKNOWN);
        expected.push(vec![Some(id.to_string()), Some(key.to_string())]);
    }

    let ident = |name: &str| Ident::column(name).expect("a column name");
    let mut spec = dim.assign_spec(
        Ident::table("facts").expect("a table name"),
        vec![ident("customer_id")],
        ident("ordered_at"),
        ident("customer_sk"),
    );
    assert!(!spec.unknown_is_error && !spec.overwrite);
    let read = "SELECT CAST(order_id AS TEXT), CAST(customer_sk AS TEXT) FROM facts ORDER BY order_id";
    for pass in ["first", "again"] {
        let report = dim.assign_keys(&spec).await.expect("assign_keys");
        assert_eq!(
            (report.facts_matched, report.facts_unknown, report.bad_timestamps),
            (3, 2, 0),
            "{pass}: {report:?}"
        );
        assert_eq!(fx.target_query(read).await, expected, "{pass}");
    }

    spec.unknown_is_error = true;
    fx.target_exec("UPDATE facts SET customer_sk = NULL").await;
    match dim.assign_keys(&spec).await {
        Err(e @ Error::Assign(_)) => assert_eq!(e.kind(), "unknown-member", "{e}"),
        other => panic!("unknown members refused: {other:?}"),
    }
    let nulls: Vec<Vec<Option<String>>> = expected.iter().map(|r| vec![r[0].clone(), None]).collect();
    assert_eq!(fx.target_query(read).await, nulls, "a refused assignment wrote nothing");
}

/// Before the first load, the commands that only read the target say the dimension was
/// never loaded, and a dry run leaves it so; a config that is not there is a config error.
async fn a_dimension_never_loaded_is_not_loaded(mut fx: Fixture) {
    let dim = dimension(&fx);
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-01T10:00:00Z')"
    ))
    .await;
    let dry = dim
        .run(&RunOptions {
            dry_run: true,
            ..upto("2026-03-02T00:00:00Z")
        })
        .await
        .expect("a dry run");
    assert!(dry.dry_run && dry.run_id.is_none(), "{dry:?}");
    assert_eq!(dry.counts.versions, 1);

    let not_loaded = |what: &str, r: Result<(), Error>| match r {
        Err(Error::NotLoaded(_)) => {}
        other => panic!("{what} on a dimension never loaded: {other:?}"),
    };
    not_loaded("status", dim.status(10, false).await.map(drop));
    not_loaded("lookup", dim.lookup(&["1"], at("2026-03-01T10:00:00Z")).await.map(drop));
    not_loaded("verify", dim.verify(false).await.map(drop));
    not_loaded("index", dim.index().await.map(drop));
    not_loaded("rebuild", dim.rebuild().await);

    match Dimension::load(fx.dir().join("missing.toml")) {
        Err(e @ Error::Config(_)) => assert!(e.to_string().contains("missing.toml"), "{e}"),
        Err(e) => panic!("a missing config: {e}"),
        Ok(_) => panic!("a missing config loaded"),
    }
}
