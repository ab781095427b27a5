//! The direct first load, proven against the general path on a real PostgreSQL.
//!
//! A first load into an empty log, from a PostgreSQL table whose primary key lies within
//! the natural key (`Layout::unique_key`) into a PostgreSQL target, with a key order both
//! sides agree on (`Layout::key_order_is_portable`: every key column is of a kind that
//! sorts alike in every database, `ColumnKind::sorts_alike_everywhere` — integers,
//! numerics, dates, timestamps, UUIDs — or of kind text — text in any collation, varchar,
//! char, citext, domains, enums — which both paths number bytewise), skips staging,
//! dedupe and classification: the source's `COPY (… ORDER BY key)` text, text keys
//! ordered by `(key)::text COLLATE "C"`, is rewritten row by row into the log's COPY text
//! and numbered as it arrives (`pipeline::first_load_into_log`,
//! `dedupe::CopyStager::into_log`). Every other source goes the general path (staging
//! table, dedupe, `append_first` / classify, numbered by `key COLLATE "C"` for text
//! keys): no primary key, a primary key outside the natural key, a plain table with
//! inheriting children (its primary key does not cover their rows, so it does not count),
//! a view, `source.query`, a SQLite side, and any key column of a kind the source and
//! the target may sort differently (booleans, floats, JSON, bytes). So does every later
//! load.
//!
//! Nothing downstream may be able to tell which path loaded a dimension, so these tests
//! load the same tricky rows both ways (COPY escapes, non-ASCII text, NULLs, tombstones,
//! a composite numeric key whose numeric and text orders disagree, a Type 1 column, a
//! Type 6 twin, a tiebreak column; the tricky text in attributes) and compare the logs,
//! dimensions, counters and run records; check the direct load's values, numbers and
//! hashes against the rows inserted (hashes computed in Rust); compare with a PostgreSQL
//! → SQLite load, which parses and hashes rows by other code; and load a second change on
//! top, which shows that the surrogate keys and log ids the direct load reserved continue
//! correctly. The same rows on a text key, with the tricky text in the key, go the
//! direct path too and load alike. One-column keys of every kind, in a collation other
//! than bytewise and in a database whose default collation is ICU's, show that both paths
//! number text keys bytewise and the other portable kinds in their type's order, and that
//! the kinds left to the general path load the same with or without a primary key; a
//! parent table with an inheriting child goes the general path.

use std::collections::BTreeMap;
use std::sync::Mutex;

use dimlog::detect::{row_hash, ColumnKind};
use dimlog::pipeline::{self, Observer, Quiet, RunOptions, RunReport, Session};

use crate::support::fixture::{ts, Dump, Fixture};

/// The dimension under test, on a composite numeric key, with every column role the
/// direct path has to handle; the tricky text, `region` included, is in attributes.
/// `{source_url}` and `{target_url}` are filled in.
const FULL: &str = r#"name = "customer"

[source]
url = "{source_url}"
table = "src_customers"
key = ["region_no", "customer_id"]
updated_at = "updated_at"
deleted_flag = "is_deleted"
tiebreak = "seq"
lookback = "15m"
safety_lag = "0s"

[target]
url = "{target_url}"
log = "customer_versions"
dimension = "dim_customer"
surrogate_key = "customer_sk"

[track]
columns = ["region", "email", "tier", "country", "score", "seen_at"]
type1 = ["name"]
current_columns = ["tier"]

[deletes]
hard = "reconcile"
"#;

/// The same source read the plainest way: one key column, one tracked column, no
/// soft-delete flag, no tiebreak, no Type 1 or Type 6 columns.
const PLAIN: &str = r#"name = "customer"

[source]
url = "{source_url}"
table = "src_customers"
key = ["customer_id"]
updated_at = "updated_at"
lookback = "15m"
safety_lag = "0s"

[target]
url = "{target_url}"
log = "customer_versions"
dimension = "dim_customer"
surrogate_key = "customer_sk"

[track]
columns = ["email"]

[deletes]
hard = "reconcile"
"#;

const TABLE_LINE: &str = "table = \"src_customers\"";

/// [`FULL`] with `region` and `region_no` trading places: the key is `(region text,
/// customer_id)`, `region_no` a tracked column.
fn text_keyed(template: &str) -> String {
    let swapped = template
        .replacen(
            "key = [\"region_no\", \"customer_id\"]",
            "key = [\"region\", \"customer_id\"]",
            1,
        )
        .replacen("columns = [\"region\", ", "columns = [\"region_no\", ", 1);
    assert_ne!(swapped, template, "the template has the composite numeric key");
    swapped
}

/// The source's columns; `src_row` only serves as a primary key outside the natural key.
const COLUMNS: &str = "src_row bigserial, region_no integer NOT NULL, region text NOT NULL, \
     customer_id bigint NOT NULL, email text, \
     tier text, country text, name text, score numeric(8,2), seen_at timestamptz, seq bigint, \
     is_deleted boolean NOT NULL DEFAULT false, updated_at timestamptz NOT NULL";

const FIRST_UPPER: &str = "2026-03-02T10:00:00Z";
const SECOND_UPPER: &str = "2026-03-02T11:00:00Z";

/// How the config reads the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reads {
    Table,
    View,
    Query,
}

/// One way to hold the same rows in the source.
#[derive(Clone, Copy, Debug)]
struct Variant {
    name: &'static str,
    primary_key: &'static [&'static str],
    partitioned: bool,
    reads: Reads,
}

impl Variant {
    fn ddl(&self) -> String {
        let pk = if self.primary_key.is_empty() {
            String::new()
        } else {
            format!(", PRIMARY KEY ({})", self.primary_key.join(", "))
        };
        let mut ddl = format!("CREATE TABLE src_customers ({COLUMNS}{pk})");
        if self.partitioned {
            ddl += " PARTITION BY HASH (customer_id);
                CREATE TABLE src_customers_0 PARTITION OF src_customers FOR VALUES WITH (MODULUS 2, REMAINDER 0);
                CREATE TABLE src_customers_1 PARTITION OF src_customers FOR VALUES WITH (MODULUS 2, REMAINDER 1)";
        }
        if self.reads == Reads::View {
            ddl += "; CREATE VIEW src_view AS SELECT * FROM src_customers";
        }
        ddl
    }

    fn config(&self, template: &str, url: &str) -> String {
        let text = template.replace("{source_url}", url).replace("{target_url}", url);
        match self.reads {
            Reads::Table => text,
            Reads::View => text.replacen(TABLE_LINE, "table = \"src_view\"", 1),
            Reads::Query => text.replacen(TABLE_LINE, "query = \"SELECT * FROM src_customers\"", 1),
        }
    }

    /// Whether a read of this source holds one row per key (`Layout::unique_key`): a
    /// table whose primary key lies within the natural key.
    fn unique_key(&self, key: &[String]) -> bool {
        self.reads == Reads::Table
            && !self.primary_key.is_empty()
            && self.primary_key.iter().all(|c| key.iter().any(|k| k == c))
    }

    /// Whether a first load of this source goes the direct path: a unique key whose
    /// order both sides agree on.
    fn direct(&self, key: &[String]) -> bool {
        self.unique_key(key) && key_order_is_portable(key)
    }
}

/// The kind of a source column, as the library classifies its declared type.
fn column_kind(column: &str) -> ColumnKind {
    match column {
        "src_row" | "region_no" | "customer_id" | "seq" => ColumnKind::Int,
        "score" => ColumnKind::Numeric,
        "seen_at" | "updated_at" => ColumnKind::TimestampTz,
        "is_deleted" => ColumnKind::Bool,
        "region" | "email" | "tier" | "country" | "name" => ColumnKind::Text,
        other => panic!("no column {other}"),
    }
}

/// Whether the source and the target agree on the order of the key
/// (`Layout::key_order_is_portable`, which `run` checks this against): every key column
/// is text, which both paths order bytewise, or of a kind that sorts alike everywhere.
fn key_order_is_portable(key: &[String]) -> bool {
    key.iter().all(|k| {
        let kind = column_kind(k);
        kind == ColumnKind::Text || kind.sorts_alike_everywhere()
    })
}

const COMPOSITE_PK: Variant = Variant {
    name: "table with PRIMARY KEY (region_no, customer_id)",
    primary_key: &["region_no", "customer_id"],
    partitioned: false,
    reads: Reads::Table,
};
const ID_PK: Variant = Variant {
    name: "table with PRIMARY KEY (customer_id)",
    primary_key: &["customer_id"],
    partitioned: false,
    reads: Reads::Table,
};
/// The primary key of [`text_keyed`]'s natural key.
const TEXT_PK: Variant = Variant {
    name: "table with PRIMARY KEY (region, customer_id)",
    primary_key: &["region", "customer_id"],
    partitioned: false,
    reads: Reads::Table,
};
const NO_PK: Variant = Variant {
    name: "table without a primary key",
    primary_key: &[],
    partitioned: false,
    reads: Reads::Table,
};

const VARIANTS: &[Variant] = &[
    COMPOSITE_PK,
    ID_PK,
    Variant {
        name: "hash-partitioned table with PRIMARY KEY (region_no, customer_id)",
        primary_key: &["region_no", "customer_id"],
        partitioned: true,
        reads: Reads::Table,
    },
    NO_PK,
    Variant {
        name: "table with PRIMARY KEY (src_row), outside the natural key",
        primary_key: &["src_row"],
        partitioned: false,
        reads: Reads::Table,
    },
    Variant {
        name: "view over a table with PRIMARY KEY (region_no, customer_id)",
        primary_key: &["region_no", "customer_id"],
        partitioned: false,
        reads: Reads::View,
    },
    Variant {
        name: "source.query over a table with PRIMARY KEY (region_no, customer_id)",
        primary_key: &["region_no", "customer_id"],
        partitioned: false,
        reads: Reads::Query,
    },
];

/// Values that COPY text escapes or that read like something else.
const TRICKY: &[&str] = &[
    "tab\there",
    "new\nline",
    "cr\r\nlf",
    "back\\slash",
    "trailing\\",
    "\\N",
    "\\\\N",
    "NULL",
    "",
    "  spaces  ",
    "quote'single",
    "double\"quote",
    "Zoë Ñandú ✓ 🦀",
    "日本語テキスト",
    "e\u{301} combining",
    "bs\u{8} ff\u{c} vt\u{b} bell\u{7}",
    "\\t is not a tab",
    "semi;colon|pipe",
    "\\.",
];

/// Region numbers, the first half of the key: numeric and text order disagree.
const REGION_NOS: &[i32] = &[7, -3, 12, 0, 100, -40, 5, 9, 1000, 2, -1, 33];

/// Region texts (an attribute, or the key in [`text_keyed`]), byte order (= the
/// databases' C.UTF-8 order) mixed up on purpose.
const REGIONS: &[&str] = &[
    "Süd",
    "",
    "eu",
    " pad ",
    "a\tb",
    "EU",
    "x\\y",
    "it's",
    "line\nbreak",
    "日本",
    "\\N",
    "NULL",
];

/// One source row, as inserted (timestamps and numbers in their canonical text).
#[derive(Clone, Debug)]
struct Row {
    region_no: i32,
    region: String,
    id: i64,
    email: Option<String>,
    tier: Option<String>,
    country: Option<String>,
    name: Option<String>,
    score: Option<String>,
    seen_at: Option<String>,
    seq: Option<i64>,
    deleted: bool,
    updated_at: String,
}

impl Row {
    /// A key, tracked or Type 1 column's kind and canonical text.
    fn value(&self, column: &str) -> (ColumnKind, Option<String>) {
        let text = match column {
            "region_no" => Some(self.region_no.to_string()),
            "region" => Some(self.region.clone()),
            "customer_id" => Some(self.id.to_string()),
            "email" => self.email.clone(),
            "tier" => self.tier.clone(),
            "country" => self.country.clone(),
            "name" => self.name.clone(),
            "score" => self.score.clone(),
            "seen_at" => self.seen_at.clone(),
            other => panic!("no value for {other}"),
        };
        (column_kind(column), text)
    }
}

/// Scrambled, unique, some negative: numeric and text order disagree.
fn customer_id(i: usize) -> i64 {
    ((i * 37) % 101) as i64 - 20
}

/// 40 rows; every 8th from the 4th is soft-deleted. Rows 35 to 38 fall in the second
/// run's lookback, row 39 after the first run's upper bound.
fn tricky_rows() -> Vec<Row> {
    let n = TRICKY.len();
    (0..40)
        .map(|i| Row {
            region_no: REGION_NOS[(i * 5) % REGION_NOS.len()],
            region: REGIONS[i % REGIONS.len()].to_string(),
            id: customer_id(i),
            email: (i % 9 != 4).then(|| TRICKY[i % n].to_string()),
            tier: match i % 5 {
                0 => None,
                1 => Some("gold"),
                2 => Some("silver"),
                3 => Some("Bronze ✓"),
                _ => Some(""),
            }
            .map(String::from),
            country: (i % 4 != 0).then(|| TRICKY[(i * 7) % n].to_string()),
            name: (i % 6 != 0).then(|| format!("{} #{i}", TRICKY[(i * 5) % n])),
            score: (i % 7 != 0).then(|| {
                let sign = if i % 10 == 3 { "-" } else { "" };
                format!("{sign}{}.{:02}", (i * 13) % 1000, i % 100)
            }),
            seen_at: (i % 8 != 1).then(|| {
                format!(
                    "2025-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
                    1 + i % 12,
                    1 + i % 28,
                    i % 24,
                    i % 60,
                    (i * 7) % 60,
                    (i * 12_345) % 1_000_000
                )
            }),
            seq: (i % 3 != 0).then_some(i as i64 * 1000),
            deleted: i % 8 == 3,
            updated_at: match i {
                35 => "2026-03-02T09:47:00.000000Z".into(),
                36 => "2026-03-02T09:45:00.000000Z".into(),
                37 => "2026-03-02T09:50:00.500000Z".into(),
                38 => "2026-03-02T09:58:00.000000Z".into(),
                39 => "2026-03-02T10:20:00.000000Z".into(),
                _ => format!(
                    "2026-03-02T{:02}:{:02}:{:02}.{:06}Z",
                    8 + i % 2,
                    (i * 11) % 30,
                    (i * 7) % 60,
                    if i % 5 == 0 { 0 } else { i * 321 }
                ),
            },
        })
        .collect()
}

/// A SQL literal (standard strings: backslashes are themselves).
fn lit(v: Option<&str>) -> String {
    v.map_or_else(|| "NULL".to_string(), |s| format!("'{}'", s.replace('\'', "''")))
}

fn insert_sql(rows: &[Row]) -> String {
    let values: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {})",
                r.region_no,
                lit(Some(&r.region)),
                r.id,
                lit(r.email.as_deref()),
                lit(r.tier.as_deref()),
                lit(r.country.as_deref()),
                lit(r.name.as_deref()),
                r.score.as_deref().unwrap_or("NULL"),
                lit(r.seen_at.as_deref()),
                r.seq.map_or_else(|| "NULL".to_string(), |s| s.to_string()),
                r.deleted,
                lit(Some(&r.updated_at)),
            )
        })
        .collect();
    format!(
        "INSERT INTO src_customers (region_no, region, customer_id, email, tier, country, name, score, seen_at, seq, \
         is_deleted, updated_at) VALUES\n{}",
        values.join(",\n")
    )
}

/// The second change, on top of [`tricky_rows`]: Type 2 changes (one to NULL), a Type 1
/// change, a soft delete, a tombstoned key coming back, a correction inside the lookback,
/// a hard delete (reconciled) and a new key.
fn second_change() -> String {
    let id = customer_id;
    format!(
        "UPDATE src_customers SET tier = {}, email = {}, updated_at = '2026-03-02T10:30:00Z' WHERE customer_id = {};
         UPDATE src_customers SET email = NULL, updated_at = '2026-03-02T10:30:00.000001Z' WHERE customer_id = {};
         UPDATE src_customers SET name = {}, updated_at = '2026-03-02T10:31:00Z' WHERE customer_id = {};
         UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T10:32:00Z' WHERE customer_id = {};
         UPDATE src_customers SET is_deleted = false, email = 'back', updated_at = '2026-03-02T10:33:00Z' WHERE customer_id = {};
         UPDATE src_customers SET email = {} WHERE customer_id = {};
         DELETE FROM src_customers WHERE customer_id = {};
         INSERT INTO src_customers (region_no, region, customer_id, email, updated_at)
             VALUES (-3, {}, 500, 'fresh', '2026-03-02T10:34:00Z')",
        lit(Some("platinum\t✓")),
        lit(Some("changed\\ ünïcode\n")),
        id(1),
        id(2),
        lit(Some("renamed\ttab")),
        id(4),
        id(5),
        id(3),
        lit(Some("corrected \\.")),
        id(38),
        id(6),
        lit(Some("new\tregion ✓")),
    )
}

/// Records the phases a run reports: the only outside sign of which path it took.
#[derive(Default)]
struct Phases(Mutex<Vec<String>>);

impl Observer for Phases {
    fn phase(&self, name: &str) {
        self.0.lock().expect("phases").push(name.to_string());
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// Straight from the source's COPY into the log (phase "reading into the log").
    Direct,
    /// Staging table and dedupe (phase "deduplicating").
    General,
}

/// What one run did, and what the session saw before it.
struct Ran {
    report: RunReport,
    /// The path the run took.
    path: Path,
    /// `Layout::unique_key`.
    unique_key: bool,
    /// `Layout::key_order_is_portable`.
    portable: bool,
}

/// One run through the library with a fixed upper bound.
async fn run(fx: &Fixture, upper: &str) -> Ran {
    let plan = fx.plan();
    let mut session = Session::open(&plan)
        .await
        .unwrap_or_else(|e| panic!("cannot open a session: {e}"));
    let unique_key = session.layout.unique_key;
    let portable = session.layout.key_order_is_portable();
    assert_eq!(session.ctx.unique_key, unique_key);
    let phases = Phases::default();
    let opts = RunOptions {
        upper: Some(ts(upper)),
        ..RunOptions::incremental()
    };
    let report = pipeline::run(&mut session, &plan, &opts, &phases)
        .await
        .unwrap_or_else(|e| panic!("the run failed: {e}"));
    let phases = phases.0.into_inner().expect("phases");
    let direct = phases.iter().any(|p| p == "reading into the log");
    let general = phases.iter().any(|p| p == "deduplicating");
    assert!(direct != general, "cannot tell the path from the phases {phases:?}");
    Ran {
        report,
        path: if direct { Path::Direct } else { Path::General },
        unique_key,
        portable,
    }
}

fn key_names(fx: &Fixture) -> Vec<String> {
    fx.plan().source.key.iter().map(|k| k.name().to_string()).collect()
}

/// A fresh PostgreSQL database holding `rows` the variant's way, with the config read
/// through it.
async fn fixture(template: &str, variant: &Variant, rows: &[Row]) -> Fixture {
    let mut fx = Fixture::postgres().await;
    fx.exec("DROP TABLE src_customers").await;
    fx.exec(&variant.ddl()).await;
    if !rows.is_empty() {
        fx.exec(&insert_sql(rows)).await;
    }
    let url = fx.target_url.clone();
    fx.set_config(variant.config(template, &url));
    fx
}

async fn fixtures(template: &str, variants: &[Variant], rows: &[Row]) -> Vec<(Variant, Fixture)> {
    let mut out = Vec::new();
    for v in variants {
        out.push((*v, fixture(template, v, rows).await));
    }
    out
}

/// The counts a test states for a run.
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    rows_read: i64,
    versions: i64,
    corrections: i64,
    tombstones: i64,
    /// Deletes of keys never seen (issue 21): logged, counted apart from tombstones.
    unseen_deletes: i64,
    type1_updates: i64,
}

fn counts(r: &RunReport) -> Counts {
    assert_eq!(
        r.counts.rows_after_dedupe, r.counts.rows_read,
        "no key repeats in these sources"
    );
    assert_eq!((r.counts.duplicates_dropped, r.counts.late_versions), (0, 0));
    Counts {
        rows_read: r.counts.rows_read,
        versions: r.counts.versions,
        corrections: r.counts.corrections,
        tombstones: r.counts.tombstones,
        unseen_deletes: r.unseen_deletes,
        type1_updates: r.type1_updates,
    }
}

/// Runs every fixture once; asserts the path each took (direct only for a first load of a
/// table whose primary key lies within the natural key, on a key whose order both sides
/// agree on) and the counts. A first load on such a key must compare both paths.
async fn run_all(fxs: &mut [(Variant, Fixture)], upper: &str, first_load: bool, expected: &Counts) {
    let mut paths = Vec::new();
    let mut portable = true;
    for (v, fx) in fxs.iter_mut() {
        let key = key_names(fx);
        portable &= key_order_is_portable(&key);
        let ran = run(fx, upper).await;
        assert_eq!(ran.unique_key, v.unique_key(&key), "{}: unique key", v.name);
        assert_eq!(
            ran.portable,
            key_order_is_portable(&key),
            "{}: key order portable, key {key:?}",
            v.name
        );
        let want = if first_load && v.direct(&key) {
            Path::Direct
        } else {
            Path::General
        };
        assert_eq!(ran.path, want, "{}: the path taken", v.name);
        assert_eq!(&counts(&ran.report), expected, "{}: the run's counts", v.name);
        paths.push(ran.path);
    }
    if first_load && portable {
        assert!(
            paths.contains(&Path::Direct) && paths.contains(&Path::General),
            "the comparison needs both paths: {paths:?}"
        );
    }
}

/// Everything dimlog wrote, without wall-clock times.
#[derive(Debug, PartialEq, Eq)]
struct Written {
    log: Dump,
    dimension: Dump,
    with_current: Dump,
    counters: Vec<Vec<Option<String>>>,
    /// Column defaults of the log (a load must leave none behind that it set itself).
    log_defaults: Vec<Vec<Option<String>>>,
    runs: Dump,
    state: Dump,
}

async fn written(fx: &mut Fixture) -> Written {
    let log_table = fx.plan().target.log.quoted().replace('\'', "''");
    Written {
        log_defaults: fx
            .target_query(&format!(
                "SELECT a.attname::text, pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d \
                 JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum \
                 WHERE d.adrelid = to_regclass('{log_table}') ORDER BY 1"
            ))
            .await,
        log: fx.log().await.redact("loaded_at"),
        dimension: fx.dimension().await,
        with_current: fx.dimension_with_current().await,
        counters: fx
            .target_query(
                "SELECT dimension, next_surrogate_key::text, next_log_id::text, built_through_load::text \
                 FROM dimlog_dimensions ORDER BY dimension",
            )
            .await,
        runs: fx.runs().await.redact("started_at").redact("finished_at"),
        state: fx.state().await.redact("updated_at"),
    }
}

fn max_of(dump: &Dump, column: &str) -> i64 {
    dump.values(column)
        .into_iter()
        .flatten()
        .map(|v| v.parse::<i64>().expect("an integer"))
        .max()
        .unwrap_or(0)
}

/// The counters continue right after the greatest log id and surrogate key logged.
fn assert_counters_follow_the_log(w: &Written, sk: &str, what: &str) {
    let next_sk = (max_of(&w.log, sk) + 1).to_string();
    let next_log_id = (max_of(&w.log, "log_id") + 1).to_string();
    assert_eq!(w.counters.len(), 1, "{what}: {:?}", w.counters);
    assert_eq!(
        (w.counters[0][1].as_deref(), w.counters[0][2].as_deref()),
        (Some(next_sk.as_str()), Some(next_log_id.as_str())),
        "{what}: next surrogate key and next log id{:?}",
        w.log
    );
}

/// Every fixture wrote exactly what the first one wrote; each one's counters follow its
/// log and its dimension is the one derived from its log.
async fn assert_all_alike(fxs: &mut [(Variant, Fixture)], step: &str) {
    let mut all = Vec::new();
    for (v, fx) in fxs.iter_mut() {
        let w = written(fx).await;
        let sk = fx.plan().target.surrogate_key.name().to_string();
        assert_counters_follow_the_log(&w, &sk, &format!("{step}, {}", v.name));
        // The fixture's re-derivation does not know Type 1 observations (log rows with
        // no surrogate key that are no tombstones); verify's rebuild_diff covers them.
        let observations = w
            .log
            .records()
            .iter()
            .any(|r| r[&sk].is_none() && r["is_deleted"].as_deref() == Some("false"));
        if !observations {
            fx.assert_dimension_derives_from_log().await;
        }
        all.push((v.name, w));
    }
    let (first_name, first) = &all[0];
    for (name, w) in &all[1..] {
        assert_eq!(
            w.log, first.log,
            "{step}: the log of `{name}` differs from `{first_name}`'s"
        );
        assert_eq!(
            w.dimension, first.dimension,
            "{step}: the dimension of `{name}` differs from `{first_name}`'s"
        );
        assert_eq!(w, first, "{step}: what `{name}` wrote differs from `{first_name}`'s");
    }
}

/// `verify`: every invariant holds (a fresh rebuild, Type 1 and Type 6 columns included,
/// equals the dimension), and with `against_source` the current rows match the source.
async fn assert_verified(fx: &Fixture, against_source: bool, what: &str) {
    let plan = fx.plan();
    let mut session = Session::open(&plan).await.expect("open a session");
    let report = dimlog::verify::verify(&mut session, &plan, against_source, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("{what}: verify failed to run: {e}"));
    let failing: Vec<_> = report.checks.iter().filter(|c| c.count > 0).collect();
    assert!(report.ok && failing.is_empty(), "{what}: verify found {failing:#?}");
}

/// `dimlog rebuild` (the general rebuild, a window over the whole log) gives back the
/// dimension the load wrote.
async fn assert_rebuild_changes_nothing(fx: &mut Fixture, what: &str) {
    let before = (fx.dimension().await, fx.dimension_with_current().await);
    let plan = fx.plan();
    let mut session = Session::open(&plan).await.expect("open a session");
    pipeline::rebuild_all(&mut session, &plan, true)
        .await
        .unwrap_or_else(|e| panic!("{what}: rebuild failed: {e}"));
    let after = (fx.dimension().await, fx.dimension_with_current().await);
    assert_eq!(after, before, "{what}: a full rebuild changed the dimension");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first load's log, row by row, against the rows inserted: one row per key read, in
/// key order (numeric order for numbers, byte order for text, whatever its collation),
/// log ids from 1,
/// surrogate keys from 1 on the live rows only, values byte for byte, tombstones without
/// surrogate key, attributes or hash, and the row hash computed here in Rust.
async fn assert_log_holds_the_rows(fx: &mut Fixture, rows: &[Row], upper: &str, load_id: &str) {
    let plan = fx.plan();
    let keys = key_names(fx);
    let sk = plan.target.surrogate_key.name().to_string();
    let tracked: Vec<String> = plan.tracked.iter().map(|c| c.name().to_string()).collect();
    let type1: Vec<String> = plan.type1.iter().map(|c| c.name().to_string()).collect();
    let soft_deletes = plan.source.deleted_flag.is_some();
    let upper = ts(upper).to_text();
    let mut expected: Vec<&Row> = rows.iter().filter(|r| r.updated_at <= upper).collect();
    let keys_as: Vec<&str> = keys.iter().map(String::as_str).collect();
    expected.sort_by_key(|r| match keys_as.as_slice() {
        ["region_no", "customer_id"] => (r.region_no, Vec::new(), r.id),
        ["region", "customer_id"] => (0, r.region.as_bytes().to_vec(), r.id),
        ["customer_id"] => (0, Vec::new(), r.id),
        other => panic!("no order for the key {other:?}"),
    });
    let log = fx.log().await.records();
    assert_eq!(log.len(), expected.len(), "one log row per key read");
    let mut next_sk = 1;
    for (i, (got, row)) in log.iter().zip(&expected).enumerate() {
        let deleted = soft_deletes && row.deleted;
        let mut want: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut put = |k: &str, v: Option<String>| {
            want.insert(k.to_string(), v);
        };
        put("log_id", Some((i + 1).to_string()));
        put(&sk, (!deleted).then(|| next_sk.to_string()));
        next_sk += i64::from(!deleted);
        for k in &keys {
            put(k, row.value(k).1);
        }
        // score and seen_at render in PostgreSQL's own text here; the hash covers them.
        for c in tracked
            .iter()
            .chain(&type1)
            .filter(|c| !matches!(c.as_str(), "score" | "seen_at"))
        {
            put(c, if deleted { None } else { row.value(c).1 });
        }
        put("valid_from", Some(row.updated_at.clone()));
        put("is_deleted", Some(deleted.to_string()));
        let values: Vec<(ColumnKind, Option<String>)> = tracked.iter().map(|c| row.value(c)).collect();
        let hash = row_hash(values.iter().map(|(kind, v)| (*kind, v.as_deref())));
        put("row_hash", (!deleted).then(|| hex(&hash)));
        put("load_id", Some(load_id.into()));
        for (column, value) in &want {
            assert_eq!(
                &got[column],
                value,
                "log row {} ({}, {:?}, {}), column {column}",
                i + 1,
                row.region_no,
                row.region,
                row.id
            );
        }
    }
}

fn project(d: &Dump, columns: &[&str]) -> Dump {
    let at: Vec<usize> = columns
        .iter()
        .map(|c| {
            d.headers
                .iter()
                .position(|h| h == c)
                .unwrap_or_else(|| panic!("no column {c} in {:?}", d.headers))
        })
        .collect();
    Dump {
        headers: columns.iter().map(|c| c.to_string()).collect(),
        rows: d
            .rows
            .iter()
            .map(|r| at.iter().map(|&i| r[i].clone()).collect())
            .collect(),
    }
}

/// What a PostgreSQL and a SQLite target render alike (numbers and timestamps of
/// attributes aside, whose hash is compared).
async fn comparable(fx: &mut Fixture) -> (Dump, Dump) {
    let log = fx.log().await.redact("loaded_at");
    let dimension = fx.dimension_with_current().await;
    let log_columns: Vec<String> = log
        .headers
        .iter()
        .filter(|h| !matches!(h.as_str(), "score" | "seen_at"))
        .cloned()
        .collect();
    let dimension_columns: Vec<String> = dimension
        .headers
        .iter()
        .filter(|h| !matches!(h.as_str(), "score" | "seen_at"))
        .cloned()
        .collect();
    let log_columns: Vec<&str> = log_columns.iter().map(String::as_str).collect();
    let dimension_columns: Vec<&str> = dimension_columns.iter().map(String::as_str).collect();
    let hashes = fx.dimension().await;
    let mut dimension = project(&dimension, &dimension_columns);
    // dimension_with_current has no row_hash: take it from the plain dump (same order).
    dimension.headers.push("row_hash".into());
    for (row, h) in dimension.rows.iter_mut().zip(hashes.values("row_hash")) {
        row.push(h);
    }
    (project(&log, &log_columns), dimension)
}

/// The direct first load and the general path write the same log, dimension, counters,
/// run records and watermark for tricky rows on a composite numeric key with soft deletes, a
/// Type 1 column, a Type 6 twin and a tiebreak column; so does a PostgreSQL → SQLite
/// load (row parser, hashes in Rust); and a second change on top continues the numbering.
#[tokio::test]
async fn direct_first_load_writes_what_the_general_path_writes() {
    let rows = tricky_rows();
    let mut fxs = fixtures(FULL, VARIANTS, &rows).await;
    let direct_url = fxs[0].1.source_url.clone();
    let mut reference = Fixture::sqlite().await;
    let sqlite_url = reference.target_url.clone();
    reference.set_config(
        FULL.replace("{source_url}", &direct_url)
            .replace("{target_url}", &sqlite_url),
    );

    let first = Counts {
        rows_read: 39,
        versions: 34,
        corrections: 0,
        tombstones: 0,
        unseen_deletes: 5,
        type1_updates: 0,
    };
    run_all(&mut fxs, FIRST_UPPER, true, &first).await;
    assert_all_alike(&mut fxs, "first load").await;
    assert_log_holds_the_rows(&mut fxs[0].1, &rows, FIRST_UPPER, "1").await;
    let ran = run(&reference, FIRST_UPPER).await;
    assert_eq!(
        (ran.path, counts(&ran.report)),
        (Path::General, first),
        "PostgreSQL → SQLite"
    );
    assert_eq!(
        comparable(&mut reference).await,
        comparable(&mut fxs[0].1).await,
        "first load: PostgreSQL → SQLite (left) against the direct path (right)"
    );
    for (v, fx) in fxs.iter_mut() {
        // Row 39 is after the upper bound, so the source is not compared yet.
        assert_verified(fx, false, v.name).await;
        assert_rebuild_changes_nothing(fx, v.name).await;
    }

    for (_, fx) in fxs.iter_mut() {
        fx.exec(&second_change()).await;
    }
    let second = Counts {
        rows_read: 11,
        versions: 5,
        corrections: 1,
        tombstones: 2,
        unseen_deletes: 0,
        type1_updates: 1,
    };
    run_all(&mut fxs, SECOND_UPPER, false, &second).await;
    assert_all_alike(&mut fxs, "second load").await;
    for (v, fx) in fxs.iter_mut() {
        assert_verified(fx, true, v.name).await;
        assert_rebuild_changes_nothing(fx, v.name).await;
    }
    let ran = run(&reference, SECOND_UPPER).await;
    assert_eq!(
        (ran.path, counts(&ran.report)),
        (Path::General, second),
        "PostgreSQL → SQLite"
    );
    assert_eq!(
        comparable(&mut reference).await,
        comparable(&mut fxs[0].1).await,
        "second load: PostgreSQL → SQLite (left) against the direct path (right)"
    );

    // The second load's versions took the surrogate keys right after the first load's.
    let log = fxs[0].1.log().await;
    let second_sks: Vec<i64> = log
        .records()
        .iter()
        .filter(|r| r["load_id"].as_deref() == Some("2") && r["is_deleted"].as_deref() == Some("false"))
        .filter_map(|r| r["customer_sk"].as_deref().map(|v| v.parse().expect("an integer")))
        .collect();
    let mut sorted = second_sks.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let corrected = customer_id(38).to_string();
    let correction = log
        .records()
        .iter()
        .filter(|r| r["load_id"].as_deref() == Some("2") && r["customer_id"].as_deref() == Some(&corrected))
        .map(|r| r["customer_sk"].clone())
        .collect::<Vec<_>>();
    assert_eq!(correction.len(), 1, "one correction of customer {corrected}");
    let corrected_sk: i64 = correction[0]
        .as_deref()
        .expect("a surrogate key")
        .parse()
        .expect("an integer");
    assert!(corrected_sk <= 34, "the correction keeps its first-load surrogate key");
    let new: Vec<i64> = sorted.into_iter().filter(|&sk| sk != corrected_sk).collect();
    assert_eq!(new, (35..=39).collect::<Vec<_>>(), "new versions continue at 35");
    let log_ids = log.values("log_id");
    assert_eq!(
        log_ids,
        (1..=log_ids.len()).map(|i| Some(i.to_string())).collect::<Vec<_>>(),
        "log ids continue without a gap"
    );
}

/// The same with one key column, one tracked column and no soft-delete flag, Type 1,
/// Type 6 or tiebreak column (the direct path writes fewer fields); a primary key over
/// `(region_no, customer_id)` is then wider than the natural key and goes the general path.
#[tokio::test]
async fn direct_first_load_of_a_plain_config_writes_what_the_general_path_writes() {
    let rows = tricky_rows();
    let mut fxs = fixtures(PLAIN, &[ID_PK, COMPOSITE_PK, NO_PK], &rows).await;
    let first = Counts {
        rows_read: 39,
        versions: 39,
        corrections: 0,
        tombstones: 0,
        unseen_deletes: 0,
        type1_updates: 0,
    };
    // The soft delete and the Type 1 change are no changes here.
    let second = Counts {
        rows_read: 11,
        versions: 5,
        corrections: 1,
        tombstones: 1,
        unseen_deletes: 0,
        type1_updates: 0,
    };
    two_loads_alike(&mut fxs, &rows, &first, &second, false).await;
}

/// Loads `rows` (already in every fixture's source) and then `second_change()` into
/// every fixture; after each load asserts the counts, the path, that all fixtures wrote
/// the same, and that `verify` passes (and, with `rebuild_check`, that a full rebuild
/// changes nothing after the second).
async fn two_loads_alike(
    fxs: &mut [(Variant, Fixture)],
    rows: &[Row],
    first: &Counts,
    second: &Counts,
    rebuild_check: bool,
) {
    run_all(fxs, FIRST_UPPER, true, first).await;
    assert_all_alike(fxs, "first load").await;
    assert_log_holds_the_rows(&mut fxs[0].1, rows, FIRST_UPPER, "1").await;
    for (v, fx) in fxs.iter_mut() {
        assert_verified(fx, false, v.name).await;
    }
    for (_, fx) in fxs.iter_mut() {
        fx.exec(&second_change()).await;
    }
    run_all(fxs, SECOND_UPPER, false, second).await;
    assert_all_alike(fxs, "second load").await;
    for (v, fx) in fxs.iter_mut() {
        assert_verified(fx, true, v.name).await;
        if rebuild_check {
            assert_rebuild_changes_nothing(fx, v.name).await;
        }
    }
}

/// The same rows on a text key `(region, customer_id)`, the tricky text (COPY escapes,
/// non-ASCII, empty) in the key: a table whose primary key is the natural key reads one
/// row per key, and both paths number text keys bytewise, so its first load goes the
/// direct path and writes what a table without a primary key writes, log ids in the
/// keys' byte order; so does the load after it.
#[tokio::test]
async fn direct_first_load_on_a_text_key_writes_what_the_general_path_writes() {
    let rows = tricky_rows();
    let config = text_keyed(FULL);
    let mut fxs = fixtures(&config, &[TEXT_PK, NO_PK], &rows).await;
    let key = key_names(&fxs[0].1);
    assert_eq!(key, ["region", "customer_id"]);
    assert!(TEXT_PK.direct(&key) && !NO_PK.direct(&key));
    let first = Counts {
        rows_read: 39,
        versions: 34,
        corrections: 0,
        tombstones: 0,
        unseen_deletes: 5,
        type1_updates: 0,
    };
    let second = Counts {
        rows_read: 11,
        versions: 5,
        corrections: 1,
        tombstones: 2,
        unseen_deletes: 0,
        type1_updates: 1,
    };
    // Asserts the direct path for TEXT_PK and the general path for NO_PK on the first
    // load, the general path for both on the second, the log in byte order of the key.
    two_loads_alike(&mut fxs, &rows, &first, &second, true).await;
}

/// A first load of tombstones only: no version, no surrogate key used, an empty
/// dimension; the keys that come back later get surrogate keys from 1.
#[tokio::test]
async fn direct_first_load_of_tombstones_only() {
    let rows: Vec<Row> = tricky_rows()
        .into_iter()
        .take(12)
        .map(|r| Row { deleted: true, ..r })
        .collect();
    let mut fxs = fixtures(FULL, &[COMPOSITE_PK, NO_PK], &rows).await;
    let first = Counts {
        rows_read: 12,
        versions: 0,
        corrections: 0,
        tombstones: 0,
        unseen_deletes: 12,
        type1_updates: 0,
    };
    run_all(&mut fxs, FIRST_UPPER, true, &first).await;
    assert_all_alike(&mut fxs, "first load").await;
    assert_log_holds_the_rows(&mut fxs[0].1, &rows, FIRST_UPPER, "1").await;
    assert_eq!(fxs[0].1.count("dim_customer").await, 0);
    for (_, fx) in fxs.iter_mut() {
        fx.exec(&format!(
            "UPDATE src_customers SET is_deleted = false, updated_at = '2026-03-02T10:30:00Z' \
             WHERE customer_id IN ({}, {})",
            customer_id(7),
            customer_id(2)
        ))
        .await;
    }
    // Rows 1 and 5 are re-read within the lookback: tombstones again, nothing to do.
    let second = Counts {
        rows_read: 4,
        versions: 2,
        corrections: 0,
        tombstones: 0,
        unseen_deletes: 0,
        type1_updates: 0,
    };
    run_all(&mut fxs, SECOND_UPPER, false, &second).await;
    assert_all_alike(&mut fxs, "second load").await;
    let sks = fxs[0].1.dimension().await.values("customer_sk");
    assert_eq!(sks.len(), 2);
    let mut sks: Vec<String> = sks.into_iter().flatten().collect();
    sks.sort();
    assert_eq!(sks, ["1", "2"]);
    for (v, fx) in fxs.iter_mut() {
        assert_verified(fx, true, v.name).await;
    }
}

/// A first load whose window holds no row appends nothing, so the next run is a first
/// load again, and takes the direct path again.
#[tokio::test]
async fn direct_first_load_after_an_empty_one() {
    let rows: Vec<Row> = tricky_rows()
        .into_iter()
        .take(20)
        .map(|r| Row {
            updated_at: r.updated_at.replace("2026-03-02T0", "2026-03-02T1"),
            ..r
        })
        .collect();
    // The empty first load runs on an empty source (one whose rows are all after its
    // upper bound is refused: it could read nothing); the rows arrive after it.
    let mut fxs = fixtures(FULL, &[COMPOSITE_PK, NO_PK], &[]).await;
    let nothing = Counts {
        rows_read: 0,
        versions: 0,
        corrections: 0,
        tombstones: 0,
        unseen_deletes: 0,
        type1_updates: 0,
    };
    run_all(&mut fxs, "2026-03-02T09:00:00Z", true, &nothing).await;
    assert_all_alike(&mut fxs, "empty first load").await;
    assert_eq!(fxs[0].1.count("customer_versions").await, 0);
    for (_, fx) in fxs.iter_mut() {
        fx.exec(&insert_sql(&rows)).await;
    }
    let first = Counts {
        rows_read: 20,
        versions: 17,
        corrections: 0,
        tombstones: 0,
        unseen_deletes: 3,
        type1_updates: 0,
    };
    run_all(&mut fxs, "2026-03-02T20:00:00Z", true, &first).await;
    assert_all_alike(&mut fxs, "first load").await;
    assert_log_holds_the_rows(&mut fxs[0].1, &rows, "2026-03-02T20:00:00Z", "2").await;
    let runs = fxs[0].1.log().await.values("load_id");
    assert!(runs.iter().all(|r| r.as_deref() == Some("2")), "{runs:?}");
    for (v, fx) in fxs.iter_mut() {
        assert_verified(fx, true, v.name).await;
    }
}

/// A first load that reads nothing appends nothing: both paths leave
/// `dimlog_dimensions.built_through_load` NULL (it only moves when a load appends).
#[tokio::test]
async fn empty_direct_first_load_leaves_built_through_load_like_the_general_path() {
    let mut fxs = fixtures(FULL, &[COMPOSITE_PK, NO_PK], &[]).await;
    let nothing = Counts {
        rows_read: 0,
        versions: 0,
        corrections: 0,
        tombstones: 0,
        unseen_deletes: 0,
        type1_updates: 0,
    };
    run_all(&mut fxs, FIRST_UPPER, true, &nothing).await;
    assert_all_alike(&mut fxs, "empty first load").await;
    let counters = written(&mut fxs[0].1).await.counters;
    assert_eq!(counters[0][3], None, "built_through_load: {counters:?}");
}

/// A direct first load that fails at any later failpoint leaves no log row, no dimension
/// row, no counter moved and every index in place; the retry loads what the general
/// path loads.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn failed_direct_first_load_leaves_no_trace() {
    let rows = tricky_rows();
    let mut general = fixture(FULL, &NO_PK, &rows).await;
    assert_eq!(run(&general, FIRST_UPPER).await.path, Path::General);
    let expected = written(&mut general).await;
    let indexes = "SELECT tablename::text, indexname::text, indexdef FROM pg_indexes \
                   WHERE tablename IN ('customer_versions', 'dim_customer') ORDER BY 1, 2";
    let general_indexes = general.target_query(indexes).await;
    for failpoint in ["after_extract", "after_append", "after_rebuild", "before_commit"] {
        let mut fx = fixture(FULL, &COMPOSITE_PK, &rows).await;
        let failed = fx
            .try_run_with(RunOptions {
                upper: Some(ts(FIRST_UPPER)),
                failpoint: Some(failpoint.into()),
                ..RunOptions::incremental()
            })
            .await;
        assert!(
            matches!(failed, Err(dimlog::Error::Failpoint(p)) if p == failpoint),
            "{failpoint}: {failed:?}"
        );
        assert_eq!(fx.count("customer_versions").await, 0, "{failpoint}");
        assert_eq!(fx.count("dim_customer").await, 0, "{failpoint}");
        let counters = fx
            .target_query("SELECT next_surrogate_key::text, next_log_id::text FROM dimlog_dimensions")
            .await;
        assert_eq!(
            counters,
            [[Some("1".to_string()), Some("1".to_string())]],
            "{failpoint}"
        );
        assert_eq!(fx.target_query(indexes).await, general_indexes, "{failpoint}: indexes");
        assert_eq!(
            written(&mut fx).await.log_defaults,
            expected.log_defaults,
            "{failpoint}: column defaults of the log"
        );
        assert_eq!(fx.watermark().await, None, "{failpoint}");

        assert_eq!(run(&fx, FIRST_UPPER).await.path, Path::Direct, "{failpoint}: the retry");
        let got = written(&mut fx).await;
        assert_eq!(
            got.log.clone().redact("load_id"),
            expected.log.clone().redact("load_id"),
            "{failpoint}: the retry's log"
        );
        assert_eq!(
            got.dimension.clone().redact("load_id"),
            expected.dimension.clone().redact("load_id"),
            "{failpoint}: the retry's dimension"
        );
        assert_eq!(
            got.counters.iter().map(|r| r[1..3].to_vec()).collect::<Vec<_>>(),
            expected.counters.iter().map(|r| r[1..3].to_vec()).collect::<Vec<_>>(),
            "{failpoint}: counters after the retry"
        );
        assert_eq!(fx.target_query(indexes).await, general_indexes, "{failpoint}: indexes");
        assert_eq!(
            got.log_defaults, expected.log_defaults,
            "{failpoint}: column defaults of the log"
        );
    }
}

/// Where [`assert_key_order_alike`] makes its databases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Database {
    /// A fresh database of the test server (default collation C.UTF-8, or whatever the
    /// server's is).
    Fresh,
    /// A fresh database whose default collation is ICU's English one, in which
    /// `ORDER BY` on text is not bytewise.
    Icu,
}

impl Database {
    async fn fixture(self) -> Fixture {
        let mut fx = Fixture::postgres().await;
        if self == Database::Fresh {
            return fx;
        }
        let mut url = url::Url::parse(&fx.target_url).expect("a database url");
        let name = format!("{}_icu", url.path().trim_start_matches('/'));
        fx.exec(&format!(
            "CREATE DATABASE \"{name}\" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en' \
             LOCALE 'C.UTF-8'"
        ))
        .await;
        drop(fx);
        url.set_path(&format!("/{name}"));
        let mut fx = Fixture::postgres_reset(url.to_string()).await;
        let order = fx
            .target_query("SELECT string_agg(k, ' ' ORDER BY k) FROM (VALUES ('a'), ('B'), ('é'), ('E')) t (k)")
            .await;
        assert_eq!(
            order,
            [[Some("a B E é".to_string())]],
            "the default collation of {name} is not ICU's English one"
        );
        fx
    }
}

/// What [`assert_key_order_alike`] saw.
struct KeyOrder {
    /// The keys in the order the log numbered them (log ids and surrogate keys 1, 2, …).
    numbered: Vec<String>,
    /// The keys in the order the source sorts them (`ORDER BY k`).
    source_order: Vec<String>,
}

/// Two sources holding the same rows of a one-column key `k` of type `key_type`: one with
/// `PRIMARY KEY (k)` (a unique key: the direct path if `portable`, that is if the key is
/// text or of a kind that sorts alike everywhere, else the general path), one without
/// (general path). Asserts the library's `key_order_is_portable`, the paths, that both
/// write the same log and dimension, and that log ids and surrogate keys count from 1 in
/// one order; returns that order.
async fn assert_key_order_alike(setup: &str, key_type: &str, portable: bool, keys: &[&str]) -> KeyOrder {
    assert_key_order_alike_in(Database::Fresh, setup, key_type, portable, keys).await
}

async fn assert_key_order_alike_in(
    database: Database,
    setup: &str,
    key_type: &str,
    portable: bool,
    keys: &[&str],
) -> KeyOrder {
    const CONFIG: &str = r#"name = "keyed"

[source]
url = "{url}"
table = "src_keyed"
key = ["k"]
updated_at = "updated_at"

[target]
url = "{url}"
log = "keyed_versions"
dimension = "dim_keyed"
surrogate_key = "keyed_sk"

[track]
columns = ["v"]
"#;
    let values: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("({k}, 'v{i}', '2026-03-02T09:00:00Z')"))
        .collect();
    let with_pk = if portable { Path::Direct } else { Path::General };
    let what = format!("key type {key_type} ({database:?} database)");
    let mut out = Vec::new();
    let mut source_order = Vec::new();
    for (pk, want) in [(" PRIMARY KEY", with_pk), ("", Path::General)] {
        let mut fx = database.fixture().await;
        fx.exec(setup).await;
        fx.exec(&format!(
            "CREATE TABLE src_keyed (k {key_type}{pk}, v text, updated_at timestamptz NOT NULL);
             INSERT INTO src_keyed VALUES {}",
            values.join(", ")
        ))
        .await;
        let url = fx.target_url.clone();
        fx.set_config(CONFIG.replace("{url}", &url));
        let ran = run(&fx, FIRST_UPPER).await;
        assert_eq!(ran.unique_key, !pk.is_empty(), "{what}{pk}: unique key");
        assert_eq!(ran.portable, portable, "{what}{pk}: key order portable");
        assert_eq!(ran.path, want, "{what}{pk}: the path taken");
        assert_eq!(ran.report.counts.versions, keys.len() as i64, "{what}{pk}");
        source_order = fx
            .source_query("SELECT k::text AS key_text FROM src_keyed ORDER BY src_keyed.k")
            .await
            .into_iter()
            .map(|r| r[0].clone().expect("a key"))
            .collect();
        out.push((fx.log().await.redact("loaded_at"), fx.dimension().await));
    }
    assert_eq!(
        out[0].0, out[1].0,
        "{what}: the log with a primary key (left) against the one without (right)"
    );
    assert_eq!(
        out[0].1, out[1].1,
        "{what}: the dimension with a primary key (left) against the one without (right)"
    );
    let log = &out[0].0;
    let counted: Vec<Option<String>> = (1..=keys.len()).map(|i| Some(i.to_string())).collect();
    assert_eq!(log.values("log_id"), counted, "{what}: log ids");
    assert_eq!(log.values("keyed_sk"), counted, "{what}: surrogate keys");
    KeyOrder {
        numbered: log.values("k").into_iter().map(|k| k.expect("a key")).collect(),
        source_order,
    }
}

/// A text key in a collation other than bytewise (ICU's English, in which `a < B < c`):
/// the source sorts it by that collation, but both paths number text keys bytewise (the
/// direct path's source query orders by `(k)::text COLLATE "C"`, the general path's
/// append by `k COLLATE "C"`), so its first load goes the direct path with a primary
/// key and numbers B, D, E, a, c, é as 1 to 6 either way.
#[tokio::test]
async fn direct_first_load_numbers_a_collated_key_like_the_general_path() {
    let order = assert_key_order_alike(
        "SELECT 1",
        "text COLLATE \"en-x-icu\"",
        true,
        &["'a'", "'B'", "'c'", "'D'", "'é'", "'E'"],
    )
    .await;
    assert_eq!(order.numbered, ["B", "D", "E", "a", "c", "é"], "numbered bytewise");
    assert_eq!(
        order.source_order,
        ["a", "B", "c", "D", "E", "é"],
        "the source's own order is ICU's"
    );
}

/// The same with a plain text key in a database whose default collation is ICU's (the
/// target's `ORDER BY k` would not be bytewise either): numbered bytewise on both paths.
#[tokio::test]
async fn direct_first_load_numbers_a_text_key_bytewise_in_an_icu_database() {
    let order = assert_key_order_alike_in(
        Database::Icu,
        "SELECT 1",
        "text",
        true,
        &["'a'", "'B'", "'c'", "'D'", "'é'", "'E'"],
    )
    .await;
    assert_eq!(order.numbered, ["B", "D", "E", "a", "c", "é"], "numbered bytewise");
    assert_eq!(order.source_order, ["a", "B", "c", "D", "E", "é"]);
}

/// The same with a domain over bigint, which the source sorts as a number and the target
/// stores as text: its kind is text, so it goes the direct path with a primary key and
/// is numbered by its text, bytewise.
#[tokio::test]
async fn direct_first_load_numbers_a_domain_key_like_the_general_path() {
    let order = assert_key_order_alike(
        "CREATE DOMAIN customer_number AS bigint",
        "customer_number",
        true,
        &["9", "10", "100", "-5"],
    )
    .await;
    assert_eq!(order.numbered, ["-5", "10", "100", "9"], "numbered bytewise");
    assert_eq!(order.source_order, ["-5", "9", "10", "100"]);
}

/// The same with an enum, which the source sorts in declaration order and the target
/// stores as text: its kind is text, so it goes the direct path with a primary key and
/// is numbered by its labels, bytewise.
#[tokio::test]
async fn direct_first_load_numbers_an_enum_key_like_the_general_path() {
    let order = assert_key_order_alike(
        "CREATE TYPE grade AS ENUM ('zeta', 'alpha', 'mid')",
        "grade",
        true,
        &["'zeta'", "'alpha'", "'mid'"],
    )
    .await;
    assert_eq!(order.numbered, ["alpha", "mid", "zeta"], "numbered bytewise");
    assert_eq!(order.source_order, ["zeta", "alpha", "mid"]);
}

/// The same with citext, which the source sorts case-insensitively.
#[tokio::test]
async fn direct_first_load_numbers_a_citext_key_like_the_general_path() {
    let order = assert_key_order_alike(
        "CREATE EXTENSION IF NOT EXISTS citext",
        "citext",
        true,
        &["'b'", "'A'", "'C'", "'d'"],
    )
    .await;
    assert_eq!(order.numbered, ["A", "C", "b", "d"], "numbered bytewise");
    assert_eq!(order.source_order, ["A", "b", "C", "d"]);
}

/// Keys of the kinds that sort alike everywhere (integers, numerics, UUIDs, dates,
/// timestamps) and text keys in the database's default collation (text, varchar, char)
/// go the direct path with a primary key and number alike; booleans and floats go the
/// general path either way.
#[tokio::test]
async fn direct_first_load_numbers_plain_keys_like_the_general_path() {
    let order = assert_key_order_alike("SELECT 1", "bigint", true, &["10", "9", "-1", "100", "-20"]).await;
    assert_eq!(order.numbered, ["-20", "-1", "9", "10", "100"], "bigint");
    assert_key_order_alike("SELECT 1", "integer", true, &["10", "9", "-1", "100"]).await;
    assert_key_order_alike("SELECT 1", "numeric", true, &["10", "9.5", "-1", "100.000"]).await;
    assert_key_order_alike(
        "SELECT 1",
        "uuid",
        true,
        &[
            "'ffffffff-0000-0000-0000-000000000000'",
            "'00000000-0000-0000-0000-00000000000a'",
        ],
    )
    .await;
    assert_key_order_alike(
        "SELECT 1",
        "date",
        true,
        &["'2026-01-10'", "'2025-12-31'", "'2026-01-09'"],
    )
    .await;
    assert_key_order_alike(
        "SELECT 1",
        "timestamp",
        true,
        &[
            "'2026-01-02T00:00:00'",
            "'2026-01-01T23:00:00.5'",
            "'2025-01-01T00:00:00'",
        ],
    )
    .await;
    assert_key_order_alike(
        "SELECT 1",
        "timestamptz",
        true,
        &["'2026-01-02T00:00:00+05'", "'2026-01-01T23:00:00Z'"],
    )
    .await;
    let order = assert_key_order_alike(
        "SELECT 1",
        "text",
        true,
        &["'b'", "'B'", "'a b'", "'a\tb'", "'é'", "''"],
    )
    .await;
    assert_eq!(order.numbered, ["", "B", "a\tb", "a b", "b", "é"], "text");
    let order = assert_key_order_alike("SELECT 1", "varchar(10)", true, &["'b'", "'é'", "'B'", "'a'"]).await;
    assert_eq!(order.numbered, ["B", "a", "b", "é"], "varchar");
    let order = assert_key_order_alike("SELECT 1", "char(3)", true, &["'b'", "'Bc'", "' z'", "'é'", "'a'"]).await;
    assert_eq!(order.numbered, [" z", "Bc", "a", "b", "é"], "char");
    assert_key_order_alike("SELECT 1", "boolean", false, &["true", "false"]).await;
    assert_key_order_alike("SELECT 1", "double precision", false, &["1.5", "-2", "10", "0.25"]).await;
}

/// A child table inherits neither the parent's primary key nor its uniqueness, yet
/// reading the parent reads the child's rows too: a key can come twice. So a plain table
/// with inheriting children has no unique key, with or without a primary key: its first
/// load goes the general path, whose dedupe keeps the newest row of each key; so does a
/// load of it into SQLite (`adopt` would log both rows of a unique key).
#[tokio::test]
async fn direct_first_load_of_a_parent_table_with_an_inheriting_child() {
    const CONFIG: &str = r#"name = "keyed"

[source]
url = "{source_url}"
table = "src_keyed"
key = ["k"]
updated_at = "updated_at"

[target]
url = "{target_url}"
log = "keyed_versions"
dimension = "dim_keyed"
surrogate_key = "keyed_sk"

[track]
columns = ["v"]
"#;
    let mut out = Vec::new();
    let mut sources = Vec::new();
    // Kept to the end: a fixture's database is dropped with it, and SQLite reads the first.
    let mut fixtures = Vec::new();
    for pk in [" PRIMARY KEY", ""] {
        let mut fx = Fixture::postgres().await;
        fx.exec(&format!(
            "CREATE TABLE src_keyed (k bigint{pk}, v text, updated_at timestamptz NOT NULL);
             CREATE TABLE src_keyed_archive () INHERITS (src_keyed);
             INSERT INTO src_keyed VALUES (1, 'new', '2026-03-02T09:00:00Z'), (2, 'two', '2026-03-02T09:00:00Z');
             INSERT INTO src_keyed_archive VALUES (1, 'old', '2026-03-02T08:00:00Z')"
        ))
        .await;
        let url = fx.target_url.clone();
        fx.set_config(CONFIG.replace("{source_url}", &url).replace("{target_url}", &url));
        sources.push(url);
        out.push(assert_one_version_per_key(&mut fx, &format!("PostgreSQL, bigint{pk}")).await);
        fixtures.push(fx);
    }
    assert_eq!(
        out[0].0, out[1].0,
        "the log with a primary key (left) against the one without (right)"
    );
    assert_eq!(
        out[0].1, out[1].1,
        "the dimension with a primary key (left) against the one without (right)"
    );
    let mut sqlite = Fixture::sqlite().await;
    let target = sqlite.target_url.clone();
    sqlite.set_config(
        CONFIG
            .replace("{source_url}", &sources[0])
            .replace("{target_url}", &target),
    );
    assert_one_version_per_key(&mut sqlite, "SQLite, bigint PRIMARY KEY").await;
    drop(fixtures);
}

/// Loads the parent table with an inheriting child; asserts the general path, no unique
/// key, one dropped duplicate, and one version per key, key 1's the newest ('new').
async fn assert_one_version_per_key(fx: &mut Fixture, what: &str) -> (Dump, Dump) {
    let ran = run(fx, FIRST_UPPER).await;
    assert_eq!(
        (ran.path, ran.unique_key, ran.portable),
        (Path::General, false, true),
        "{what}: path, unique key and portable key order"
    );
    let c = &ran.report.counts;
    assert_eq!(
        (c.rows_read, c.duplicates_dropped, c.versions),
        (3, 1, 2),
        "{what}: rows read, duplicates dropped, versions"
    );
    assert_verified(fx, true, what).await;
    let log = fx.log().await.redact("loaded_at");
    let some = |v: &[&str]| v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
    assert_eq!(
        (log.values("k"), log.values("v")),
        (some(&["1", "2"]), some(&["new", "two"])),
        "{what}: the log"
    );
    (log, fx.dimension().await)
}

/// SQLite to SQLite, a first load numbers its staged rows by their place when they
/// arrived in key order (`append_first` checks each row against the one before it) and
/// sorts them otherwise: the same rows in any arrival order (sorted, reversed, sorted but
/// for one swapped pair anywhere, shuffled), on keys of every affinity (INTEGER, TEXT,
/// and none, holding integers and text at once; with and without a primary key), get the
/// same log, numbered in the target's order of the key.
#[tokio::test]
async fn a_sqlite_first_load_numbers_keys_in_order_whatever_order_they_arrive_in() {
    // A fixed pseudo-random sequence (xorshift), so a failure repeats.
    let mut state: u64 = 0x5eed_0018;
    let mut next = |below: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % below as u64) as usize
    };
    const ROWS: usize = 300;
    // A primary key makes the staged rows the read's, in its order (an INTEGER PRIMARY KEY
    // is the rowid, so always in order); without one, dedupe writes them in key order.
    for declared in [
        "INTEGER PRIMARY KEY",
        "INT PRIMARY KEY",
        "TEXT PRIMARY KEY",
        "PRIMARY KEY",
        "INTEGER",
        "",
    ] {
        // Keys whose orders as numbers and as text disagree; text among integers where
        // the column takes both.
        let mut keys: Vec<String> = (1..=ROWS as i64).map(|i| (i * 7 % 1000).to_string()).collect();
        if declared.is_empty() || declared == "PRIMARY KEY" {
            for (i, k) in keys.iter_mut().enumerate().filter(|(i, _)| i % 5 == 0) {
                *k = format!("'k{i}'");
            }
        }
        let mut sorted = keys.clone();
        sorted.sort_by_key(|k| k.trim_matches('\'').parse::<i64>().ok());
        let mut orders: Vec<(String, Vec<String>)> = vec![("sorted".into(), sorted.clone())];
        if declared != "INTEGER PRIMARY KEY" {
            orders.push(("reversed".into(), sorted.iter().rev().cloned().collect()));
            for _ in 0..3 {
                let at = next(ROWS - 1);
                let mut swapped = sorted.clone();
                swapped.swap(at, at + 1);
                orders.push((format!("sorted but rows {at} and {}", at + 1), swapped));
            }
            let mut shuffled = keys.clone();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, next(i + 1));
            }
            orders.push(("shuffled".into(), shuffled));
        }
        let mut logs = Vec::new();
        for (order, arrival) in &orders {
            let what = format!("key `{declared}`, {order}");
            let mut fx = Fixture::sqlite().await;
            fx.exec("DROP TABLE src_customers").await;
            fx.exec(&format!(
                "CREATE TABLE src_customers (customer_id {declared}, email TEXT, tier TEXT, country TEXT, \
                 is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL)"
            ))
            .await;
            let values: Vec<String> = arrival
                .iter()
                .map(|k| format!("({k}, 'e' || {k}, 'pro', 'FR', '2026-03-02T09:00:00Z')"))
                .collect();
            fx.exec(&format!(
                "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES {}",
                values.join(", ")
            ))
            .await;
            fx.run(FIRST_UPPER).await;
            let numbered = fx
                .target_query(
                    "SELECT log_id, customer_sk, CAST(customer_id AS TEXT), typeof(customer_id) \
                     FROM customer_versions ORDER BY log_id",
                )
                .await;
            let in_key_order = fx
                .target_query(
                    "SELECT log_id, customer_sk, CAST(customer_id AS TEXT), typeof(customer_id) \
                     FROM customer_versions ORDER BY customer_id",
                )
                .await;
            assert_eq!(numbered.len(), ROWS, "{what}: one version per key");
            if let Some(at) = (0..ROWS).find(|&i| numbered[i] != in_key_order[i]) {
                panic!(
                    "{what}: not numbered in the target's key order: log id {at} holds {:?}, the key at that place is {:?}",
                    numbered[at], in_key_order[at]
                );
            }
            let first: Vec<_> = numbered.iter().take(2).map(|r| (r[0].clone(), r[1].clone())).collect();
            assert_eq!(
                first,
                vec![
                    (Some("1".into()), Some("1".into())),
                    (Some("2".into()), Some("2".into()))
                ],
                "{what}: numbered from the first log id and surrogate key"
            );
            logs.push((what, fx.log().await.redact("loaded_at")));
        }
        for (what, log) in &logs[1..] {
            assert_eq!(log, &logs[0].1, "{what}: against {}", logs[0].0);
        }
    }
}
