//! The first load pumped straight into the log, SQLite to SQLite, proven against the
//! general path.
//!
//! A first load into an empty SQLite log, from a SQLite table whose primary key lies
//! within the natural key, reads the source in its key's order and writes each row into
//! the log as it arrives, numbered in that order (`pipeline::first_load_pumped_into_log`).
//! Those numbers are the general path's only when the rows arrive in the order the log's
//! columns sort them, which the source's order need not be: a `COLLATE NOCASE` key, or a
//! key column without a type whose numbers and text the source sorts apart but the log
//! stores as text. So each row's key is checked to rise over the one before it, and a
//! row that does not sends the load back to its savepoint and through the general path.
//!
//! Nothing downstream may be able to tell which path loaded a dimension: each key layout
//! here loads the same rows from a table with the primary key and from one without (the
//! general path), and the logs, dimensions and run counts must be equal, also after a
//! second load on top. Which path each took is read from the phases it reported.

use std::sync::Mutex;

use dimlog::pipeline::{self, Observer, RunOptions, RunReport, Session};
use proptest::prelude::*;

use crate::support::fixture::{ts, Dump, Fixture};

/// The phases a run reports: the outside sign of its path.
#[derive(Default)]
struct Phases(Mutex<Vec<String>>);

impl Observer for Phases {
    fn phase(&self, name: &str) {
        self.0.lock().expect("phases").push(name.to_string());
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// Straight into the log.
    Direct,
    /// Began straight into the log, found a row out of the log's order, went on through
    /// staging.
    FellBack,
    /// Staging from the start.
    General,
}

/// The path from the phases: both read in a phase "reading", only staging deduplicates
/// after it, and a load that fell back read twice.
fn path_of(phases: &[String]) -> Path {
    let reads = phases.iter().filter(|p| *p == "reading").count();
    let staged = phases.iter().any(|p| p == "deduplicating");
    match (reads, staged) {
        (1, false) => Path::Direct,
        (2, true) => Path::FellBack,
        (1, true) => Path::General,
        _ => panic!("cannot tell the path from the phases {phases:?}"),
    }
}

/// A key layout: the key columns' declarations, the config's key, and the path a table
/// with that primary key takes.
struct Layout {
    name: &'static str,
    key_columns: &'static str,
    key: &'static [&'static str],
    /// A table clause after the columns (`WITHOUT ROWID`).
    suffix: &'static str,
    with_primary_key: Path,
}

const LAYOUTS: &[Layout] = &[
    Layout {
        name: "INTEGER PRIMARY KEY (the rowid)",
        key_columns: "customer_id INTEGER",
        key: &["customer_id"],
        suffix: "",
        with_primary_key: Path::Direct,
    },
    Layout {
        name: "BIGINT key (an index of its own)",
        key_columns: "customer_id BIGINT",
        key: &["customer_id"],
        suffix: "",
        with_primary_key: Path::Direct,
    },
    Layout {
        name: "text key",
        key_columns: "code TEXT",
        key: &["code"],
        suffix: "",
        with_primary_key: Path::Direct,
    },
    Layout {
        name: "text key WITHOUT ROWID",
        key_columns: "code TEXT",
        key: &["code"],
        suffix: " WITHOUT ROWID",
        with_primary_key: Path::Direct,
    },
    Layout {
        name: "composite key",
        key_columns: "region INTEGER, code TEXT",
        key: &["region", "code"],
        suffix: "",
        with_primary_key: Path::Direct,
    },
    Layout {
        name: "text key COLLATE NOCASE",
        key_columns: "code TEXT COLLATE NOCASE",
        key: &["code"],
        suffix: "",
        with_primary_key: Path::FellBack,
    },
    Layout {
        name: "key without a type, numbers and text",
        key_columns: "code",
        key: &["code"],
        suffix: "",
        with_primary_key: Path::FellBack,
    },
];

/// Text keys that sort differently bytewise, case-blind, and by number: distinct even
/// case-blind, so that a `COLLATE NOCASE` primary key takes them all.
const TEXT_KEYS: &[&str] = &[
    "b", "A", "c", "É", "é?", "z", "10", "9", "🙂", "ß", " lead", "O'Hara", "\"dq\"", "a b", "Zed",
];

/// One source row: key values as SQL literals, then the attributes and flags.
struct Row {
    key: Vec<String>,
    email: Option<String>,
    deleted: bool,
    updated_at: &'static str,
}

fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The rows of a layout: every key once, some with NULL attributes, some deleted, one
/// stamped after the upper bound, stamps in several offsets.
fn rows(layout: &Layout) -> Vec<Row> {
    const STAMPS: &[&str] = &[
        "2026-03-01T09:00:00Z",
        "2026-03-01T10:30:00+01:00",
        "2026-03-01 08:15:00.123456Z",
        "2026-03-01T09:00:00.5-02:00",
        "2026-03-05T00:00:00Z",
    ];
    let keys: Vec<Vec<String>> = match layout.key_columns {
        "customer_id INTEGER" | "customer_id BIGINT" => [7, 3, 1000, -4, 12, 9, 2, 250, 11, 1]
            .iter()
            .map(|k: &i64| vec![k.to_string()])
            .collect(),
        "region INTEGER, code TEXT" => TEXT_KEYS
            .iter()
            .enumerate()
            .map(|(i, k)| vec![(i % 3).to_string(), lit(k)])
            .collect(),
        "code" => ["10", "9", "'8'", "'a'", "'10a'", "-1", "'B'"]
            .iter()
            .map(|k| vec![k.to_string()])
            .collect(),
        _ => TEXT_KEYS.iter().map(|k| vec![lit(k)]).collect(),
    };
    keys.into_iter()
        .enumerate()
        .map(|(i, key)| Row {
            key,
            email: (i % 4 != 1).then(|| format!("user{i}@example.com")),
            deleted: i % 5 == 3,
            updated_at: STAMPS[i % STAMPS.len()],
        })
        .collect()
}

/// A config for `key` over `src_customers`, with a soft-delete flag.
fn config(key: &[&str], url: &str) -> String {
    let key = key.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ");
    format!(
        r#"name = "customer"

[source]
url = "{url}/source.db"
table = "src_customers"
key = [{key}]
updated_at = "updated_at"
deleted_flag = "is_deleted"
lookback = "15m"
safety_lag = "0s"

[target]
url = "{url}/warehouse.db"
log = "customer_versions"
dimension = "dim_customer"
surrogate_key = "customer_sk"

[track]
columns = ["email", "tier"]
"#
    )
}

/// A SQLite fixture whose source holds `rows` in a table of `key_columns`, with or
/// without the primary key over `key`.
async fn fixture(layout: &Layout, key_columns: &str, primary_key: bool, rows: &[Row]) -> Fixture {
    let mut fx = Fixture::sqlite().await;
    fx.exec("DROP TABLE src_customers").await;
    let pk = if primary_key {
        format!(", PRIMARY KEY ({})", layout.key.join(", "))
    } else {
        String::new()
    };
    let suffix = if primary_key { layout.suffix } else { "" };
    fx.exec(&format!(
        "CREATE TABLE src_customers ({key_columns}, email TEXT, tier TEXT, \
         is_deleted BOOLEAN NOT NULL DEFAULT 0, updated_at TEXT NOT NULL{pk}){suffix}"
    ))
    .await;
    let columns = layout.key.join(", ");
    for (i, row) in rows.iter().enumerate() {
        fx.exec(&format!(
            "INSERT INTO src_customers ({columns}, email, tier, is_deleted, updated_at) VALUES ({}, {}, {}, {}, {})",
            row.key.join(", "),
            row.email.as_deref().map_or("NULL".into(), lit),
            lit(["gold", "silver", "gold ", "GOLD"][i % 4]),
            i64::from(row.deleted),
            lit(row.updated_at),
        ))
        .await;
    }
    let url = format!("sqlite://{}", fx.dir().display());
    fx.set_config(config(layout.key, &url));
    fx
}

/// One run through the library with a fixed upper bound: its report and path.
async fn run(fx: &Fixture, upper: &str) -> (RunReport, Path) {
    let plan = fx.plan();
    let mut session = Session::open(&plan)
        .await
        .unwrap_or_else(|e| panic!("cannot open a session: {e}"));
    let phases = Phases::default();
    let opts = RunOptions {
        upper: Some(ts(upper)),
        ..RunOptions::incremental()
    };
    let report = pipeline::run(&mut session, &plan, &opts, &phases)
        .await
        .unwrap_or_else(|e| panic!("the run failed: {e}"));
    let phases = phases.0.into_inner().expect("phases");
    (report, path_of(&phases))
}

/// Everything a load wrote that does not depend on the wall clock.
#[derive(Debug, PartialEq)]
struct Written {
    log: Dump,
    dimension: Dump,
    counts: String,
}

async fn written(fx: &mut Fixture, report: &RunReport) -> Written {
    Written {
        log: fx.log().await.redact("loaded_at"),
        dimension: fx.dimension().await,
        counts: format!("{:?} unseen_deletes={}", report.counts, report.unseen_deletes),
    }
}

/// Loads the layout's rows through a table with its primary key and one without,
/// checks the path each took and that both wrote the same, then (with `then_change`)
/// loads a change on top of both and compares again.
async fn load_both_ways(layout: &Layout, key_columns: &str, rows: &[Row], expect: Path, then_change: bool) {
    let mut keyed = fixture(layout, key_columns, true, rows).await;
    let mut plain = fixture(layout, key_columns, false, rows).await;
    let upper = "2026-03-02T00:00:00Z";
    let (keyed_report, keyed_path) = run(&keyed, upper).await;
    let (plain_report, plain_path) = run(&plain, upper).await;
    assert_eq!(keyed_path, expect, "{}: the keyed table's path", layout.name);
    assert_eq!(plain_path, Path::General, "{}: the plain table's path", layout.name);
    assert!(keyed_report.counts.rows_read > 0, "{}: nothing read", layout.name);
    let keyed_written = written(&mut keyed, &keyed_report).await;
    assert_eq!(
        keyed_written,
        written(&mut plain, &plain_report).await,
        "{}: the first loads differ",
        layout.name
    );
    keyed.assert_dimension_derives_from_log().await;
    if !then_change {
        return;
    }

    // A change on top: the numbers the first load reserved go on alike.
    for fx in [&mut keyed, &mut plain] {
        fx.exec(
            "UPDATE src_customers SET tier = 'platinum', updated_at = '2026-03-02T10:00:00Z' \
             WHERE email IN (SELECT email FROM src_customers WHERE NOT is_deleted ORDER BY email DESC LIMIT 3)",
        )
        .await;
    }
    let upper = "2026-03-03T00:00:00Z";
    let (keyed_report, keyed_path) = run(&keyed, upper).await;
    let (plain_report, _) = run(&plain, upper).await;
    assert_eq!(keyed_path, Path::General, "{}: a later load's path", layout.name);
    assert!(keyed_report.counts.versions > 0, "{}: the change", layout.name);
    assert_eq!(
        written(&mut keyed, &keyed_report).await,
        written(&mut plain, &plain_report).await,
        "{}: the second loads differ",
        layout.name
    );
}

#[tokio::test]
async fn every_key_layout_loads_straight_into_the_log_as_through_staging() {
    for layout in LAYOUTS {
        load_both_ways(layout, layout.key_columns, &rows(layout), layout.with_primary_key, true).await;
    }
}

/// Two source keys that SQLite keeps apart and the log stores as one (`1` and `'1'` in
/// a column without a type, read as the text `1`): the direct path does not write the
/// key twice, it goes back and loads through staging, deduplicated as from a table
/// without the primary key. (A later load that reads both still takes them as two keys:
/// a known limit of such columns, not of the first load.)
#[tokio::test]
async fn keys_the_log_stores_alike_go_back_to_staging() {
    let layout = &LAYOUTS[6];
    let rows: Vec<Row> = ["1", "'1'", "2"]
        .iter()
        .enumerate()
        .map(|(i, k)| Row {
            key: vec![k.to_string()],
            email: Some(format!("user{i}@example.com")),
            deleted: false,
            updated_at: ["2026-03-01T09:00:00Z", "2026-03-01T09:30:00Z", "2026-03-01T09:00:00Z"][i],
        })
        .collect();
    load_both_ways(layout, layout.key_columns, &rows, Path::FellBack, false).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any text keys, in any collation SQLite has: the path is direct exactly when the
    /// source's order is the log's (bytewise), and the load is the general path's.
    #[test]
    fn any_text_keys_in_any_collation_load_as_through_staging(
        keys in proptest::collection::btree_set("[a-cA-C0-9 é_🙂]{0,4}", 2..12),
        collation in prop::sample::select(vec!["BINARY", "NOCASE", "RTRIM"]),
    ) {
        let key_columns = format!("code TEXT COLLATE {collation}");
        // Keys the collation holds equal cannot share the primary key: keep the first.
        let fold = |k: &str| match collation {
            "NOCASE" => k.to_ascii_lowercase(),
            "RTRIM" => k.trim_end_matches(' ').to_string(),
            _ => k.to_string(),
        };
        let mut seen = std::collections::BTreeSet::new();
        let keys: Vec<&String> = keys.iter().filter(|k| seen.insert(fold(k))).collect();
        let mut by_source: Vec<&&String> = keys.iter().collect();
        by_source.sort_by(|a, b| fold(a).cmp(&fold(b)).then_with(|| a.cmp(b)));
        let in_log_order = by_source.windows(2).all(|w| w[0] < w[1]);
        let rows: Vec<Row> = keys
            .iter()
            .map(|k| Row {
                key: vec![lit(k)],
                email: Some(format!("{k}@example.com")),
                deleted: false,
                updated_at: "2026-03-01T09:00:00Z",
            })
            .collect();
        let layout = Layout {
            name: "generated text keys",
            key_columns: "",
            key: &["code"],
            suffix: "",
            with_primary_key: Path::Direct,
        };
        let expect = if in_log_order { Path::Direct } else { Path::FellBack };
        tokio::runtime::Runtime::new()
            .expect("runtime")
            .block_on(load_both_ways(&layout, &key_columns, &rows, expect, true));
    }
}

/// A tracked boolean spelled every way SQLite may hold one, through both pumped paths
/// (the first load straight into the log, then a run staged by the pump): each log row
/// stores the flag as 1/0 and hashes it as `true`/`false` (the hash computed here, by
/// the published encoding, from the canonical text), and a later row that only spells
/// the same flag otherwise opens no version.
#[tokio::test]
async fn booleans_in_every_spelling_store_and_hash_as_one_value_through_the_pump() {
    // (literal, means true); `NULL` is its own value.
    const SPELLINGS: &[(&str, Option<bool>)] = &[
        ("1", Some(true)),
        ("'1'", Some(true)),
        ("'t'", Some(true)),
        ("'TRUE'", Some(true)),
        ("' yes '", Some(true)),
        ("'Y'", Some(true)),
        ("0", Some(false)),
        ("'0'", Some(false)),
        ("'f'", Some(false)),
        ("'False'", Some(false)),
        ("'no'", Some(false)),
        ("''", Some(false)),
        ("NULL", None),
    ];
    let mut fx = Fixture::sqlite().await;
    fx.exec("DROP TABLE src_customers").await;
    fx.exec(
        "CREATE TABLE src_customers (customer_id INTEGER PRIMARY KEY, email TEXT, active BOOLEAN, \
         updated_at TEXT NOT NULL)",
    )
    .await;
    for (i, (literal, _)) in SPELLINGS.iter().enumerate() {
        fx.exec(&format!(
            "INSERT INTO src_customers VALUES ({i}, 'user{i}@example.com', {literal}, '2026-03-01T09:00:00Z')"
        ))
        .await;
    }
    let url = format!("sqlite://{}", fx.dir().display());
    fx.set_config(
        config(&["customer_id"], &url)
            .replace("deleted_flag = \"is_deleted\"\n", "")
            .replace("columns = [\"email\", \"tier\"]", "columns = [\"email\", \"active\"]"),
    );
    let (first, path) = run(&fx, "2026-03-02T00:00:00Z").await;
    assert_eq!(path, Path::Direct, "the first load's path");
    assert_eq!(first.counts.versions, SPELLINGS.len() as i64);
    let expected_hash = |i: usize, truth: Option<bool>| {
        let email = format!("user{i}@example.com");
        let flag = truth.map(|t| if t { "true" } else { "false" });
        dimlog::hash::row_hash([
            (dimlog::hash::ColumnKind::Text, Some(email.as_str())),
            (dimlog::hash::ColumnKind::Bool, flag),
        ])
    };
    let check = |rows: Vec<dimlog::db::TextRow>, what: &str| {
        assert_eq!(rows.len(), SPELLINGS.len(), "{what}: rows");
        for row in rows {
            let i: usize = row[0].as_deref().expect("key").parse().expect("a number");
            let truth = SPELLINGS[i].1;
            let stored = truth.map(|t| if t { "1" } else { "0" }.to_string());
            assert_eq!(row[1], stored, "{what}: key {i} ({}) stored", SPELLINGS[i].0);
            let hex: String = expected_hash(i, truth).iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(
                row[2].as_deref(),
                Some(hex.as_str()),
                "{what}: key {i} ({}) hashed",
                SPELLINGS[i].0
            );
        }
    };
    let log_rows = "SELECT CAST(customer_id AS TEXT), CAST(active AS TEXT), lower(hex(row_hash)) \
                    FROM customer_versions ORDER BY log_id";
    check(fx.target_query(log_rows).await, "first load");

    // Each flag spelled another way that means the same, stamped later: no version.
    for (i, (_, truth)) in SPELLINGS.iter().enumerate() {
        let respelled = match truth {
            Some(true) => ["'true'", "'t'", "1"][i % 3],
            Some(false) => ["'false'", "'F'", "0"][i % 3],
            None => "NULL",
        };
        fx.exec(&format!(
            "UPDATE src_customers SET active = {respelled}, updated_at = '2026-03-02T10:00:00Z' WHERE customer_id = {i}"
        ))
        .await;
    }
    let (second, path) = run(&fx, "2026-03-03T00:00:00Z").await;
    assert_eq!(path, Path::General, "the second run's path");
    assert_eq!(
        second.counts.rows_read,
        SPELLINGS.len() as i64,
        "the second run read every row"
    );
    assert_eq!(second.counts.versions, 0, "a respelled flag is no change");
    check(fx.target_query(log_rows).await, "after the respelled run");
    fx.assert_dimension_derives_from_log().await;
}
