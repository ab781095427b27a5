//! Property (issue 21 item 4): one canonical form per key kind, applied by every way in.
//! For generated key kinds (integer, numeric, text, uuid, date, and a composite of text
//! and numeric), keys stored in the source in one spelling and looked up in another
//! spelling of the same value, the CLI's `lookup`, `assign-keys` (facts holding the
//! other spelling, in a text column or one of the key's own type) and the in-memory
//! `Index` all give the key's surrogate key, and `-1` for a value that is not a key;
//! `history --key` shows that key's version.
//!
//! Cases come from a fixed seed; `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override the
//! count and the seed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use dimlog::config::Backend;
use dimlog::lookup::{Index, UNKNOWN};
use dimlog::pipeline::Session;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestError, TestRunner};

use crate::support::fixture::{ts, Fixture};

/// Cases per backend when `PROPTEST_CASES` is not set.
const CASES: u32 = 10;
const SEED: u64 = 0x6b65_795f_666f_726d;
const LOADED: &str = "2026-03-01T00:00:00Z";
const UPPER: &str = "2026-03-01T01:00:00Z";
const AT: &str = "2026-03-01T00:30:00Z";

/// A key column's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Int,
    Numeric,
    Text,
    Uuid,
    Date,
    /// An exact decimal without a scale (PostgreSQL `numeric`, SQLite `DECIMAL`): it may
    /// hold `Infinity`, `-Infinity` and `NaN`, which `numeric(10,2)` refuses.
    Decimal,
}

const TEXTS: [&str; 8] = ["a", "A", "a b", "07", "x=y", "é", "-1", "1.0"];

/// One value of a kind (spelling-free).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Value {
    Int(i64),
    /// Hundredths.
    Numeric(i64),
    Text(usize),
    Uuid(u128),
    /// Days after 2026-01-01.
    Date(i64),
    /// A value outside the ordinary forms of its kind: see [`SPECIALS`].
    Special(usize),
}

/// Values of date and decimal keys beyond ordinary numbers and days, each with the
/// spellings PostgreSQL reads as it: dates `infinity`, `-infinity`, a date before the
/// common era and one after year 9999; decimals `Infinity`, `-Infinity` and `NaN`.
const SPECIALS: [(Kind, &[&str]); 7] = [
    (Kind::Date, &["infinity", "Infinity", "INFINITY"]),
    (Kind::Date, &["-infinity", "-Infinity", "-INFINITY"]),
    (Kind::Date, &["0044-03-15 BC", "0044-3-15 BC", "0044-03-15 bc"]),
    (Kind::Date, &["12026-01-01", "12026-1-1", "12026-01-1"]),
    (Kind::Decimal, &["Infinity", "infinity", "inf", "+Infinity", "INF"]),
    (Kind::Decimal, &["-Infinity", "-inf", "-INFINITY"]),
    (Kind::Decimal, &["NaN", "nan", "NAN"]),
];

impl Value {
    /// The value in one of its spellings (`form` picks one; every form reads as the same
    /// value in PostgreSQL).
    fn spell(self, form: u8) -> String {
        match self {
            Value::Int(v) => match form % 3 {
                0 => v.to_string(),
                1 if v < 0 => format!("-00{}", -v),
                1 => format!("00{v}"),
                _ if v >= 0 => format!("+{v}"),
                _ => v.to_string(),
            },
            Value::Numeric(c) => {
                let sign = if c < 0 { "-" } else { "" };
                let (int, frac) = (c.abs() / 100, c.abs() % 100);
                let minimal = {
                    let f = format!("{frac:02}");
                    let f = f.trim_end_matches('0');
                    if f.is_empty() {
                        format!("{sign}{int}")
                    } else {
                        format!("{sign}{int}.{f}")
                    }
                };
                match form % 5 {
                    0 => format!("{sign}{int}.{frac:02}"),
                    1 => minimal,
                    2 if int == 0 => format!("{sign}.{frac:02}"),
                    2 => format!("{sign}{int}.{frac:02}0"),
                    3 if c >= 0 => format!("+0{int}.{frac:02}"),
                    3 => format!("-0{int}.{frac:02}"),
                    _ => format!("{c}e-2"),
                }
            }
            Value::Text(i) => TEXTS[i].to_string(),
            Value::Special(i) => {
                let spellings = SPECIALS[i].1;
                spellings[form as usize % spellings.len()].to_string()
            }
            Value::Uuid(u) => {
                let hex = format!("{u:032x}");
                let hyphens = format!(
                    "{}-{}-{}-{}-{}",
                    &hex[..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..]
                );
                match form % 4 {
                    0 => hyphens,
                    1 => hyphens.to_ascii_uppercase(),
                    2 => format!("{{{hyphens}}}"),
                    _ => hex,
                }
            }
            Value::Date(d) => {
                let day = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).expect("a date") + chrono::Days::new(d as u64);
                match form % 3 {
                    0 => day.format("%Y-%m-%d").to_string(),
                    1 => day.format("%Y-%-m-%-d").to_string(),
                    _ => day.format("%Y-%m-%-d").to_string(),
                }
            }
        }
    }

    /// A spelling to store in the source: SQLite would read a bare run of 32 hex digits
    /// that happen to be decimal digits as a number.
    fn stored_form(self, form: u8) -> u8 {
        match self {
            Value::Uuid(_) => form % 3,
            _ => form,
        }
    }
}

fn value(kind: Kind) -> BoxedStrategy<Value> {
    match kind {
        Kind::Int => (-120..120i64).prop_map(Value::Int).boxed(),
        Kind::Numeric => prop_oneof![(-300..300i64), (-10_000_000..10_000_000i64)]
            .prop_map(Value::Numeric)
            .boxed(),
        Kind::Text => (0..TEXTS.len()).prop_map(Value::Text).boxed(),
        Kind::Uuid => any::<u128>().prop_map(Value::Uuid).boxed(),
        Kind::Date => {
            prop_oneof![4 => (0..800i64).prop_map(Value::Date), 1 => (0..4usize).prop_map(Value::Special)].boxed()
        }
        Kind::Decimal => prop_oneof![
            (-300..300i64).prop_map(Value::Numeric),
            (4..7usize).prop_map(Value::Special)
        ]
        .boxed(),
    }
}

/// One key: a value per key column, the spelling stored and the spelling looked up.
#[derive(Clone, Debug)]
struct Key {
    values: Vec<Value>,
    stored: u8,
    looked_up: u8,
}

impl Key {
    fn spelled(&self, form: u8) -> Vec<String> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let f = form.wrapping_add(i as u8 * 3);
                v.spell(f)
            })
            .collect()
    }

    fn stored_spelling(&self) -> Vec<String> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| v.spell(v.stored_form(self.stored.wrapping_add(i as u8 * 3))))
            .collect()
    }
}

#[derive(Clone)]
struct Case {
    kinds: Vec<Kind>,
    /// The loaded keys; the last one is never loaded (a value that is no key).
    keys: Vec<Key>,
    /// SQLite: the facts' key columns are TEXT (else of the key's declared type).
    text_facts: bool,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "key kinds {:?}, facts' key columns text: {}",
            self.kinds, self.text_facts
        )?;
        for (i, k) in self.keys.iter().enumerate() {
            let loaded = if i + 1 == self.keys.len() {
                "not loaded"
            } else {
                "loaded"
            };
            writeln!(
                f,
                "  {:?}: stored {:?}, looked up as {:?} ({loaded})",
                k.values,
                k.stored_spelling(),
                k.spelled(k.looked_up)
            )?;
        }
        Ok(())
    }
}

fn case() -> impl Strategy<Value = Case> {
    let kinds = prop_oneof![
        Just(vec![Kind::Int]),
        Just(vec![Kind::Numeric]),
        Just(vec![Kind::Text]),
        Just(vec![Kind::Uuid]),
        Just(vec![Kind::Date]),
        Just(vec![Kind::Decimal]),
        Just(vec![Kind::Text, Kind::Numeric]),
    ];
    kinds
        .prop_flat_map(|kinds| {
            let one = kinds.iter().map(|k| value(*k)).collect::<Vec<_>>();
            let key = (one, any::<u8>(), any::<u8>()).prop_map(|(values, stored, looked_up)| Key {
                values,
                stored,
                looked_up,
            });
            (Just(kinds), prop::collection::vec(key, 2..6), any::<bool>()).prop_map(|(kinds, keys, text_facts)| {
                // Distinct values only.
                let mut seen = BTreeSet::new();
                let keys = keys.into_iter().filter(|k| seen.insert(k.values.clone())).collect();
                Case {
                    kinds,
                    keys,
                    text_facts,
                }
            })
        })
        .prop_filter("two distinct keys", |c| c.keys.len() >= 2)
}

fn column_type(backend: Backend, kind: Kind) -> &'static str {
    match (backend, kind) {
        (Backend::Postgres | Backend::Citus, Kind::Int) => "bigint",
        (Backend::Postgres | Backend::Citus, Kind::Numeric) => "numeric(10,2)",
        (Backend::Postgres | Backend::Citus, Kind::Text) => "text",
        (Backend::Postgres | Backend::Citus, Kind::Uuid) => "uuid",
        (Backend::Postgres | Backend::Citus, Kind::Date) => "date",
        (Backend::Postgres | Backend::Citus, Kind::Decimal) => "numeric",
        (Backend::Sqlite, Kind::Int) => "INTEGER",
        (Backend::Sqlite, Kind::Numeric) => "DECIMAL(10,2)",
        (Backend::Sqlite, Kind::Text) => "TEXT",
        (Backend::Sqlite, Kind::Uuid) => "UUID",
        (Backend::Sqlite, Kind::Date) => "DATE",
        (Backend::Sqlite, Kind::Decimal) => "DECIMAL",
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn fail(message: impl fmt::Display) -> TestCaseError {
    TestCaseError::fail(message.to_string())
}

async fn run_case(backend: Backend, database: Option<&str>, case: &Case) -> Result<(), TestCaseError> {
    let mut fx = match database {
        Some(url) => Fixture::postgres_reset(url.to_string()).await,
        None => Fixture::on(backend).await,
    };
    let names: Vec<String> = (1..=case.kinds.len()).map(|i| format!("k{i}")).collect();
    let key_defs: Vec<String> = names
        .iter()
        .zip(&case.kinds)
        .map(|(n, k)| format!("{n} {}", column_type(backend, *k)))
        .collect();
    let (flag, at_type) = match backend {
        Backend::Postgres | Backend::Citus => ("boolean NOT NULL DEFAULT false", "timestamptz"),
        Backend::Sqlite => ("BOOLEAN NOT NULL DEFAULT false", "TEXT"),
    };
    fx.exec(&format!(
        "CREATE TABLE src_keys ({}, email TEXT, tier TEXT, country TEXT, is_deleted {flag}, \
         updated_at {at_type} NOT NULL, PRIMARY KEY ({}))",
        key_defs.join(", "),
        names.join(", ")
    ))
    .await;
    fx.set_setting("table", "\"src_keys\"");
    let key_list: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    fx.set_setting("key", &format!("[{}]", key_list.join(", ")));
    let loaded = &case.keys[..case.keys.len() - 1];
    let rows: Vec<String> = loaded
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let values: Vec<String> = k.stored_spelling().iter().map(|v| quote(v)).collect();
            format!("({}, 'e{i}', 'pro', 'FR', false, '{LOADED}')", values.join(", "))
        })
        .collect();
    fx.exec(&format!(
        "INSERT INTO src_keys ({}, email, tier, country, is_deleted, updated_at) VALUES {}",
        names.join(", "),
        rows.join(", ")
    ))
    .await;
    fx.run(UPPER).await;

    // The truth: each loaded key's surrogate key, found by its email.
    let sql = match backend {
        Backend::Postgres | Backend::Citus => "SELECT email, customer_sk::text FROM dim_customer",
        Backend::Sqlite => "SELECT email, CAST(customer_sk AS TEXT) FROM dim_customer",
    };
    let by_email: BTreeMap<String, i64> = fx
        .target_query(sql)
        .await
        .into_iter()
        .map(|r| {
            (
                r[0].clone().expect("an email"),
                r[1].as_deref().and_then(|v| v.parse().ok()).expect("a surrogate key"),
            )
        })
        .collect();
    let expected: Vec<i64> = (0..case.keys.len())
        .map(|i| by_email.get(&format!("e{i}")).copied().unwrap_or(UNKNOWN))
        .collect();
    if expected[..loaded.len()].contains(&UNKNOWN) {
        return Err(fail(format!("not every key was loaded: {by_email:?}")));
    }

    // Facts: every key in its looked-up spelling.
    let fact_defs: Vec<String> = names
        .iter()
        .zip(&case.kinds)
        .map(|(n, k)| match backend {
            Backend::Sqlite if case.text_facts => format!("{n} TEXT"),
            _ => format!("{n} {}", column_type(backend, *k)),
        })
        .collect();
    fx.target_exec(&format!(
        "CREATE TABLE facts (fact_id INTEGER, {}, ordered_at {at_type})",
        fact_defs.join(", ")
    ))
    .await;
    let fact_rows: Vec<String> = case
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let values: Vec<String> = k.spelled(k.looked_up).iter().map(|v| quote(v)).collect();
            format!("({i}, {}, '{AT}')", values.join(", "))
        })
        .collect();
    fx.target_exec(&format!(
        "INSERT INTO facts (fact_id, {}, ordered_at) VALUES {}",
        names.join(", "),
        fact_rows.join(", ")
    ))
    .await;
    let mut args = vec!["assign-keys", "--facts", "facts"];
    for n in &names {
        args.extend(["--key-column", n.as_str()]);
    }
    args.extend(["--at-column", "ordered_at", "--sk-column", "customer_sk", "--json"]);
    let out = fx.cli(&args);
    if !out.status.success() {
        return Err(fail(format!(
            "assign-keys failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let sql = match backend {
        Backend::Postgres | Backend::Citus => "SELECT customer_sk::text FROM facts ORDER BY fact_id",
        Backend::Sqlite => "SELECT CAST(customer_sk AS TEXT) FROM facts ORDER BY fact_id",
    };
    let assigned: Vec<i64> = fx
        .target_query(sql)
        .await
        .into_iter()
        .map(|r| r[0].as_deref().and_then(|v| v.parse().ok()).unwrap_or(i64::MIN))
        .collect();

    let plan = fx.plan();
    let mut session = Session::open(&plan).await.map_err(fail)?;
    let index = Index::load(&mut session.target, &session.ctx).await.map_err(fail)?;
    session.close().await;
    let at = ts(AT);

    for (i, k) in case.keys.iter().enumerate() {
        let spelled = k.spelled(k.looked_up);
        let parts: Vec<&str> = spelled.iter().map(String::as_str).collect();
        let from_index = index.lookup(&parts, at).map_err(fail)?;
        let mut args = vec!["lookup".to_string()];
        for (n, v) in names.iter().zip(&spelled) {
            args.extend(["--key".to_string(), format!("{n}={v}")]);
        }
        args.extend(["--at".to_string(), AT.to_string(), "--json".to_string()]);
        let out = fx.cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            fail(format!(
                "lookup {args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        })?;
        let from_cli = json["surrogate_key"].as_i64().unwrap_or(i64::MIN);
        let want = expected[i];
        let what = format!("key {:?} looked up as {spelled:?}", k.stored_spelling());
        if from_cli != want {
            return Err(fail(format!("{what}: lookup gave {from_cli}, expected {want}")));
        }
        if from_index != want {
            return Err(fail(format!("{what}: the Index gave {from_index}, expected {want}")));
        }
        if assigned[i] != want {
            return Err(fail(format!(
                "{what}: assign-keys gave {}, expected {want}",
                assigned[i]
            )));
        }
        // `history --key` reads the same spellings.
        let mut args = vec!["history".to_string()];
        for (n, v) in names.iter().zip(&spelled) {
            args.extend(["--key".to_string(), format!("{n}={v}")]);
        }
        args.push("--json".to_string());
        let out = fx.cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            fail(format!(
                "history {args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        })?;
        let sks: Vec<i64> = json["versions"]
            .as_array()
            .map(|v| v.iter().filter_map(|r| r["surrogate_key"].as_i64()).collect())
            .unwrap_or_default();
        let history_want = if want == UNKNOWN { vec![] } else { vec![want] };
        if sks != history_want {
            return Err(fail(format!(
                "{what}: history showed {sks:?}, expected {history_want:?}"
            )));
        }
    }
    Ok(())
}

fn check_property(backend: Backend) {
    let config = crate::support::property::config(CASES, SEED, 40);
    let mut runner = TestRunner::new(config);
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    };
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
            panic!("the ways in disagree on {backend:?}.\nminimal failing case:\n{case:?}\n{reason}")
        }
        Err(TestError::Abort(reason)) => panic!("the property test aborted: {reason}"),
    }
}

#[test]
fn every_way_in_reads_every_spelling_sqlite() {
    check_property(Backend::Sqlite);
}

#[test]
fn every_way_in_reads_every_spelling_postgres() {
    check_property(Backend::Postgres);
}

/// The spellings of the issue, on their own: PostgreSQL `numeric(10,2)` keys `1.00` and
/// `-0.01` looked up as `1` and `-.01`, an upper-case uuid, a date written `2026-1-1`
/// and an integer key written `07`.
fn issue_examples() -> Vec<Case> {
    let key = |values: Vec<Value>, stored: u8, looked_up: u8| Key {
        values,
        stored,
        looked_up,
    };
    let uuid = 0x9f3c_1a2b_4d5e_4f60_8a7b_1c2d_3e4f_5a6bu128;
    vec![
        Case {
            kinds: vec![Kind::Numeric],
            keys: vec![
                key(vec![Value::Numeric(100)], 0, 1),
                key(vec![Value::Numeric(-1)], 0, 2),
                key(vec![Value::Numeric(250)], 1, 0),
                key(vec![Value::Numeric(7)], 0, 0),
            ],
            text_facts: true,
        },
        Case {
            kinds: vec![Kind::Uuid],
            keys: vec![
                key(vec![Value::Uuid(uuid)], 0, 1),
                key(vec![Value::Uuid(uuid + 1)], 0, 0),
            ],
            text_facts: true,
        },
        Case {
            kinds: vec![Kind::Date],
            keys: vec![key(vec![Value::Date(0)], 0, 1), key(vec![Value::Date(1)], 0, 0)],
            text_facts: true,
        },
        Case {
            kinds: vec![Kind::Int],
            keys: vec![key(vec![Value::Int(7)], 0, 1), key(vec![Value::Int(8)], 0, 0)],
            text_facts: true,
        },
    ]
}

async fn issue_spellings(backend: Backend) {
    for case in issue_examples() {
        if let Err(e) = run_case(backend, None, &case).await {
            panic!("{case:?}\n{e}");
        }
    }
}

/// Every special value of [`SPECIALS`], stored in one spelling and looked up in each of
/// the others, beside an ordinary key and a special value that is no key.
fn special_cases() -> Vec<Case> {
    let key = |values: Vec<Value>, stored: u8, looked_up: u8| Key {
        values,
        stored,
        looked_up,
    };
    let mut cases = Vec::new();
    for (i, (kind, spellings)) in SPECIALS.iter().enumerate() {
        for looked_up in 0..spellings.len() as u8 {
            let stored = (looked_up + 1) % spellings.len() as u8;
            let ordinary = match kind {
                Kind::Date => Value::Date(3),
                _ => Value::Numeric(250),
            };
            // The last key is no key: another special value of the same kind.
            let other = (0..SPECIALS.len())
                .find(|j| *j != i && SPECIALS[*j].0 == *kind)
                .expect("another special value");
            cases.push(Case {
                kinds: vec![*kind],
                keys: vec![
                    key(vec![Value::Special(i)], stored, looked_up),
                    key(vec![ordinary], 0, 1),
                    key(vec![Value::Special(other)], 0, looked_up),
                ],
                text_facts: looked_up % 2 == 0,
            });
        }
    }
    cases
}

async fn special_values(backend: Backend) {
    let database = match backend {
        Backend::Postgres | Backend::Citus => Some(crate::support::pg::fresh_database().await),
        Backend::Sqlite => None,
    };
    for case in special_cases() {
        if let Err(e) = run_case(backend, database.as_deref(), &case).await {
            panic!("{case:?}\n{e}");
        }
    }
}

/// Issue 21: `lookup` and `history` used to give `-1` (or nothing) for dates `infinity`,
/// `-infinity` and before the common era, decimals `Infinity` and SQLite's `nan` in
/// another letter case, where the Index and `assign-keys` found the key.
#[tokio::test]
async fn special_values_agree_sqlite() {
    special_values(Backend::Sqlite).await;
}

#[tokio::test]
async fn special_values_agree_postgres() {
    special_values(Backend::Postgres).await;
}

#[tokio::test]
async fn the_issues_spellings_sqlite() {
    issue_spellings(Backend::Sqlite).await;
}

#[tokio::test]
async fn the_issues_spellings_postgres() {
    issue_spellings(Backend::Postgres).await;
}

/// A PostgreSQL `numeric(10,2)` key loaded into a SQLite target is held in a TEXT
/// column, as the text PostgreSQL wrote (`1.00`): the key's kind is its type in the
/// target, so it is a text key there, compared byte for byte, and every way in agrees
/// (the Index loaded from the target alone, `lookup` and `assign-keys`; before, facts
/// in a numeric column matched by SQLite's affinity while `lookup --key 1` did not).
#[tokio::test]
async fn numeric_keys_from_postgres_on_a_sqlite_target_are_text() {
    use dimlog::config::DbUrl;
    use dimlog::db::{Access, Conn};

    let mut fx = Fixture::postgres().await;
    fx.exec(
        "CREATE TABLE src_keys (k1 numeric(10,2) PRIMARY KEY, email text, tier text, country text, \
         is_deleted boolean NOT NULL DEFAULT false, updated_at timestamptz NOT NULL)",
    )
    .await;
    fx.set_setting("table", "\"src_keys\"");
    fx.set_setting("key", "[\"k1\"]");
    let target = format!("sqlite://{}", fx.dir().join("warehouse.db").display());
    let text = fx.config().to_string();
    let (head, tail) = text.split_once("[target]").expect("a [target] section");
    let tail = tail.replacen(
        &format!("url = \"{}\"", fx.target_url),
        &format!("url = \"{target}\""),
        1,
    );
    fx.set_config(format!("{head}[target]{tail}"));
    fx.exec(&format!(
        "INSERT INTO src_keys (k1, email, tier, country, updated_at) VALUES \
         ('1', 'e0', 'pro', 'FR', '{LOADED}'), ('-.01', 'e1', 'pro', 'FR', '{LOADED}'), \
         ('2.5', 'e2', 'pro', 'FR', '{LOADED}')"
    ))
    .await;
    fx.run(UPPER).await;

    let url = DbUrl::parse("target.url", &target, None).expect("a URL");
    let mut conn = Conn::open(&url, Access::ReadWrite).await.expect("the SQLite target");
    let stored = conn
        .query_text(
            "test",
            "SELECT CAST(k1 AS TEXT), email, CAST(customer_sk AS TEXT) FROM dim_customer ORDER BY email",
            &[],
        )
        .await
        .expect("the dimension");
    let keys: Vec<Option<String>> = stored.iter().map(|r| r[0].clone()).collect();
    assert_eq!(
        keys,
        [
            Some("1.00".to_string()),
            Some("-0.01".to_string()),
            Some("2.50".to_string())
        ],
        "SQLite holds PostgreSQL's text"
    );
    let sk: Vec<i64> = stored
        .iter()
        .map(|r| r[2].as_deref().and_then(|v| v.parse().ok()).expect("a surrogate key"))
        .collect();

    let index = Index::open(&fx.plan()).await.expect("the index");
    let cases = [
        ("1.00", sk[0]),
        ("-0.01", sk[1]),
        ("2.50", sk[2]),
        ("1", UNKNOWN),
        ("-.01", UNKNOWN),
        ("2.5", UNKNOWN),
        ("3", UNKNOWN),
    ];
    for (spelling, want) in cases {
        let out = fx.cli(&["lookup", "--key", &format!("k1={spelling}"), "--at", AT, "--json"]);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("lookup {spelling}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(json["surrogate_key"].as_i64(), Some(want), "lookup --key {spelling}");
        assert_eq!(index.lookup(&[spelling], ts(AT)), Ok(want), "Index {spelling}");
    }

    let rows: Vec<String> = cases
        .iter()
        .enumerate()
        .map(|(i, (spelling, _))| format!("({i}, '{spelling}', '{AT}')"))
        .collect();
    conn.execute_script(
        "test",
        &format!(
            "CREATE TABLE facts (fact_id INTEGER, k1 TEXT, ordered_at TEXT); \
             INSERT INTO facts (fact_id, k1, ordered_at) VALUES {}",
            rows.join(", ")
        ),
    )
    .await
    .expect("the facts");
    let out = fx.cli(&[
        "assign-keys",
        "--facts",
        "facts",
        "--key-column",
        "k1",
        "--at-column",
        "ordered_at",
        "--sk-column",
        "customer_sk",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let assigned: Vec<i64> = conn
        .query_text(
            "test",
            "SELECT CAST(customer_sk AS TEXT) FROM facts ORDER BY fact_id",
            &[],
        )
        .await
        .expect("the facts")
        .iter()
        .map(|r| r[0].as_deref().and_then(|v| v.parse().ok()).expect("a surrogate key"))
        .collect();
    let want: Vec<i64> = cases.iter().map(|(_, w)| *w).collect();
    assert_eq!(assigned, want, "assign-keys");
    let _ = conn.close().await;
}

/// A key value out of its column's range (`3000000000` for an `integer` key, `99999` for
/// a `smallint` one) is no key: `lookup` gives -1 and `history` no versions, as the Index
/// does, instead of failing with the database's range error.
#[tokio::test]
async fn a_value_out_of_the_columns_range_is_no_key() {
    for (column_type, out_of_range) in [
        ("integer", "3000000000"),
        ("smallint", "99999"),
        ("integer", "-2147483649"),
    ] {
        let mut fx = Fixture::postgres().await;
        fx.exec(&format!(
            "CREATE TABLE src_keys (k1 {column_type} PRIMARY KEY, email text, tier text, country text, \
             is_deleted boolean NOT NULL DEFAULT false, updated_at timestamptz NOT NULL)"
        ))
        .await;
        fx.set_setting("table", "\"src_keys\"");
        fx.set_setting("key", "[\"k1\"]");
        fx.exec(&format!(
            "INSERT INTO src_keys (k1, email, tier, country, updated_at) VALUES (7, 'e0', 'pro', 'FR', '{LOADED}')"
        ))
        .await;
        fx.run(UPPER).await;
        let key = format!("--key=k1={out_of_range}");
        let out = fx.cli(&["lookup", &key, "--at", AT, "--json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{column_type} {out_of_range}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(v["surrogate_key"], UNKNOWN, "{column_type} {out_of_range}: {v}");
        let out = fx.cli(&["history", &key, "--json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{column_type} {out_of_range}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(
            v["versions"],
            serde_json::json!([]),
            "{column_type} {out_of_range}: {v}"
        );
        let index = Index::open(&fx.plan()).await.expect("the index");
        assert_eq!(index.lookup(&[out_of_range], ts(AT)), Ok(UNKNOWN));
        assert_ne!(index.lookup(&["7"], ts(AT)), Ok(UNKNOWN));
    }
}

/// A SQLite dimension may hold one value under several spellings (a `DATE` key written
/// `2026-01-01` by one row and `2026-1-1` by another are two keys to SQLite, one to every
/// way in): `history --key` shows the versions of every spelling, whichever is typed.
#[tokio::test]
async fn history_shows_every_spelling_of_a_sqlite_key() {
    let mut fx = Fixture::sqlite().await;
    fx.exec(
        "CREATE TABLE src_keys (k1 DATE PRIMARY KEY, email TEXT, tier TEXT, country TEXT, \
         is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL)",
    )
    .await;
    fx.set_setting("table", "\"src_keys\"");
    fx.set_setting("key", "[\"k1\"]");
    fx.exec(&format!(
        "INSERT INTO src_keys (k1, email, tier, country, updated_at) VALUES \
         ('2026-01-01', 'e0', 'pro', 'FR', '{LOADED}'), ('2026-1-1', 'e1', 'free', 'DE', '{LOADED}')"
    ))
    .await;
    fx.run(UPPER).await;
    for typed in ["2026-01-01", "2026-1-1", "2026-01-1"] {
        let key = format!("--key=k1={typed}");
        let out = fx.cli(&["history", &key, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let sks: BTreeSet<i64> = v["versions"]
            .as_array()
            .expect("versions")
            .iter()
            .filter_map(|r| r["surrogate_key"].as_i64())
            .collect();
        assert_eq!(sks.len(), 2, "{typed}: {v}");
    }
}

/// `assign-keys` on PostgreSQL compares the facts' key columns with the key's as
/// PostgreSQL compares their types, which may differ from the canonical forms every
/// other way in uses (a `double precision` fact `1.0000000001` and a `bigint` key, a
/// `text` fact `ABC…` and a `uuid` key): a key column of another kind of type is refused
/// up front, naming the column, its type and the key's type, and nothing is written.
#[tokio::test]
async fn assign_keys_refuses_fact_key_columns_of_another_type() {
    let mut fx = Fixture::postgres().await;
    fx.exec(&format!(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES (7, 'e0', 'pro', 'FR', '{LOADED}')"
    ))
    .await;
    fx.run(UPPER).await;
    for (fact_type, refused) in [
        ("double precision", true),
        ("text", true),
        ("numeric(12,0)", true),
        ("integer", false),
        ("bigint", false),
    ] {
        fx.target_exec(&format!(
            "DROP TABLE IF EXISTS facts; CREATE TABLE facts (customer_id {fact_type}, ordered_at timestamptz);
             INSERT INTO facts VALUES ('7', '{AT}')"
        ))
        .await;
        let out = fx.cli(&[
            "assign-keys",
            "--facts",
            "facts",
            "--key-column",
            "customer_id",
            "--at-column",
            "ordered_at",
            "--sk-column",
            "customer_sk",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if refused {
            assert_eq!(out.status.code(), Some(2), "{fact_type}: {stderr}");
            for needle in ["customer_id", fact_type, "bigint"] {
                assert!(
                    stderr.contains(needle),
                    "{fact_type}: does not name {needle:?}: {stderr}"
                );
            }
            let has_sk = fx
                .target_query("SELECT count(*)::text FROM information_schema.columns WHERE table_name = 'facts' AND column_name = 'customer_sk'")
                .await;
            assert_eq!(has_sk[0][0].as_deref(), Some("0"), "{fact_type}: nothing is written");
        } else {
            assert_eq!(out.status.code(), Some(0), "{fact_type}: {stderr}");
        }
    }
}

/// SQLite keeps a `DECIMAL` or `REAL` value as a binary double, and its own text of one
/// has 15 digits: `0.30000000000000004` and `0.3` would read as one key `0.3`, and a
/// change in the 16th or 17th digit would go unseen. dimlog reads such a value in the
/// fewest digits that give the same double back, so two keys stay two keys, each found
/// by every way in, and a change in the last digit is a version.
#[tokio::test]
async fn sqlite_doubles_are_read_to_their_last_digit() {
    let mut fx = Fixture::sqlite().await;
    fx.exec(
        "CREATE TABLE src_keys (k1 DECIMAL(10,2) PRIMARY KEY, email TEXT, tier TEXT, country REAL, \
         is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL)",
    )
    .await;
    fx.set_setting("table", "\"src_keys\"");
    fx.set_setting("key", "[\"k1\"]");
    fx.exec(&format!(
        "INSERT INTO src_keys (k1, email, tier, country, updated_at) VALUES \
         (0.30000000000000004, 'e0', 'pro', 0.1, '{LOADED}'), (0.3, 'e1', 'free', 0.1, '{LOADED}'), \
         (3.141592653589793, 'e2', 'free', 0.1, '{LOADED}')"
    ))
    .await;
    let r = fx.run(UPPER).await;
    assert_eq!((r.counts.rows_after_dedupe, r.counts.versions), (3, 3), "{r:?}");
    let index = Index::open(&fx.plan()).await.expect("the index");
    let mut seen = BTreeSet::new();
    for key in ["0.30000000000000004", "0.3", "3.141592653589793"] {
        let arg = format!("--key=k1={key}");
        let out = fx.cli(&["lookup", &arg, "--at", AT, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let sk = v["surrogate_key"].as_i64().expect("a surrogate key");
        assert_ne!(sk, UNKNOWN, "{key}: {v}");
        assert_eq!(index.lookup(&[key], ts(AT)), Ok(sk), "{key}");
        seen.insert(sk);
    }
    assert_eq!(seen.len(), 3, "three keys, three surrogate keys");
    // A change in the 17th digit of a tracked REAL column is a change.
    fx.exec("UPDATE src_keys SET country = 0.30000000000000004 - 0.2, updated_at = '2026-03-01T00:40:00Z' WHERE email = 'e0'")
        .await;
    let r = fx.run("2026-03-01T01:30:00Z").await;
    assert_eq!(r.counts.versions, 1, "{r:?}");
}

/// Two spellings of one value in a SQLite dimension with versions from the same instant:
/// every way in takes the higher surrogate key (the newer version), so `lookup`,
/// `assign-keys` and the Index agree; and a fact stamped in a leap second
/// (`23:59:60`, read as the next second, as `run` and `lookup --at` read it) gets the
/// same key from `assign-keys` in every spelling.
#[tokio::test]
async fn sqlite_ties_and_leap_seconds_agree() {
    let mut fx = Fixture::sqlite().await;
    fx.exec(
        "CREATE TABLE src_keys (k1 UUID PRIMARY KEY, email TEXT, tier TEXT, country TEXT, \
         is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL)",
    )
    .await;
    fx.set_setting("table", "\"src_keys\"");
    fx.set_setting("key", "[\"k1\"]");
    let (upper, lower) = (
        "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    );
    fx.exec(&format!(
        "INSERT INTO src_keys (k1, email, tier, country, updated_at) VALUES \
         ('{upper}', 'e0', 'pro', 'FR', '2026-01-01T12:00:00Z'), ('{lower}', 'e1', 'free', 'DE', '2026-01-01T12:00:00Z')"
    ))
    .await;
    fx.run("2026-01-02T01:00:00Z").await;
    let index = Index::open(&fx.plan()).await.expect("the index");
    let at = "2026-01-01T23:59:60Z";
    let by_index = index.lookup(&[lower], ts("2026-01-02T00:00:00Z")).expect("one part");
    assert_ne!(by_index, UNKNOWN);
    for spelling in [upper, lower] {
        let arg = format!("--key=k1={spelling}");
        let out = fx.cli(&["lookup", &arg, "--at", at, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(v["surrogate_key"], by_index, "{spelling}: {v}");
    }
    fx.target_exec(&format!(
        "CREATE TABLE facts (fact_id INTEGER, k1 TEXT, ordered_at TEXT);
         INSERT INTO facts VALUES (1, '{upper}', '2026-01-01T23:59:60Z'), (2, '{lower}', '2026-01-01 23:59:60Z'),
                                  (3, '{upper}', '2026-01-01T23:59:60+00:00'), (4, '{lower}', '2026-01-01t23:59:60z')"
    ))
    .await;
    let out = fx.cli(&[
        "assign-keys",
        "--facts",
        "facts",
        "--key-column",
        "k1",
        "--at-column",
        "ordered_at",
        "--sk-column",
        "customer_sk",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let assigned: Vec<Option<String>> = fx
        .target_query("SELECT CAST(customer_sk AS TEXT) FROM facts ORDER BY fact_id")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(assigned, vec![Some(by_index.to_string()); 4]);
}

/// `--key` given twice for one column is a usage error naming the column (it used to
/// look up the last value given), and a negative key needs no `=`.
#[tokio::test]
async fn a_key_column_given_twice_is_refused() {
    let mut fx = Fixture::sqlite().await;
    fx.exec(&format!(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES (-5, 'e0', 'pro', 'FR', '{LOADED}')"
    ))
    .await;
    fx.run(UPPER).await;
    for cmd in ["lookup", "history"] {
        let mut args = vec![cmd, "--key", "7", "--key", "8"];
        if cmd == "lookup" {
            args.extend(["--at", AT]);
        }
        let out = fx.cli(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {stderr}");
        assert!(
            stderr.contains("customer_id") && stderr.contains("2 times"),
            "{cmd}: {stderr}"
        );
        let mut args = vec![cmd, "--key", "customer_id=7", "--key", "customer_id=8"];
        if cmd == "lookup" {
            args.extend(["--at", AT]);
        }
        assert_eq!(fx.cli(&args).status.code(), Some(2), "{cmd}");
    }
    let out = fx.cli(&["lookup", "--key", "-5", "--at", AT]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
}

/// On a one-column key that holds no text, `--key other=1` is a misspelt column, never
/// the value "other=1" (a text key may hold it: `boundaries.rs`):
/// refused (exit 2) naming the key column and how to look up such a value, instead of
/// printing the unknown member as if the key had no version (found by an outside trial).
#[tokio::test]
async fn a_misspelt_key_column_is_refused_not_looked_up() {
    let mut fx = Fixture::sqlite().await;
    fx.exec(&format!(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES (1, 'e1', 'pro', 'FR', '{LOADED}')"
    ))
    .await;
    fx.run(UPPER).await;
    for misspelt in ["custmer_id=1", "id=1", "x=2"] {
        for cmd in ["lookup", "history"] {
            let mut args = vec![cmd, "--key", misspelt];
            if cmd == "lookup" {
                args.extend(["--at", AT]);
            }
            let out = fx.cli(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd} {misspelt}: {stderr}");
            let (column, value) = misspelt.split_once('=').unwrap();
            assert!(
                stderr.contains(&format!("`{column}` is not the key column (the key is `customer_id`)"))
                    && stderr.contains(&format!("--key customer_id={value}")),
                "{cmd} {misspelt}: {stderr}"
            );
            // The spelling offered is one the command takes.
            let mut fixed = vec![cmd.to_string(), "--key".into(), format!("customer_id={value}")];
            if cmd == "lookup" {
                fixed.extend(["--at".to_string(), AT.to_string()]);
            }
            let fixed: Vec<&str> = fixed.iter().map(String::as_str).collect();
            let out = fx.cli(&fixed);
            assert!(
                out.status.success(),
                "{cmd} {fixed:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let out = fx.cli(&["lookup", "--key", "customer_id=1", "--at", AT]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Fact key columns given in another order than `source.key`, whose types match the
/// key's in that other order, are refused with a message that says so (not one that
/// would have the user retype a good column).
#[tokio::test]
async fn fact_key_columns_in_another_order_are_named() {
    let mut fx = Fixture::postgres().await;
    fx.exec(
        "CREATE TABLE src_keys (t text, n bigint, email text, tier text, country text, \
         is_deleted boolean NOT NULL DEFAULT false, updated_at timestamptz NOT NULL, PRIMARY KEY (t, n))",
    )
    .await;
    fx.set_setting("table", "\"src_keys\"");
    fx.set_setting("key", "[\"t\", \"n\"]");
    fx.exec(&format!(
        "INSERT INTO src_keys (t, n, email, tier, country, updated_at) VALUES ('a', 1, 'e0', 'pro', 'FR', '{LOADED}')"
    ))
    .await;
    fx.run(UPPER).await;
    fx.target_exec(&format!(
        "CREATE TABLE facts (t text, n bigint, ordered_at timestamptz); INSERT INTO facts VALUES ('a', 1, '{AT}')"
    ))
    .await;
    let args = |first: &'static str, second: &'static str| {
        vec![
            "assign-keys",
            "--facts",
            "facts",
            "--key-column",
            first,
            "--key-column",
            second,
            "--at-column",
            "ordered_at",
            "--sk-column",
            "customer_sk",
        ]
    };
    let out = fx.cli(&args("n", "t"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("another order") && stderr.contains("(t, n)"),
        "{stderr}"
    );
    assert!(!stderr.contains("ALTER TABLE"), "{stderr}");
    let out = fx.cli(&args("t", "n"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A key value that is no spelling of its column's type (`1x`, `4 2` for an integer
/// key, `not-a-uuid` for a uuid one) is a typo, not a key without a version: `lookup`,
/// `history` and the library refuse it naming the column and its type (exit 2), where
/// they printed the unknown member (found by an outside trial). On SQLite, whose integer
/// column may hold such text, it is refused only when no key is spelled so.
#[tokio::test]
async fn a_key_value_of_another_type_is_refused() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let mut fx = Fixture::on(backend).await;
        fx.exec(&format!(
            "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES (1, 'e1', 'pro', 'FR', '{LOADED}')"
        ))
        .await;
        fx.run(UPPER).await;
        for typo in ["1x", "4 2", "one", "1.5"] {
            for cmd in ["lookup", "history"] {
                let mut args = vec![cmd, "--key", typo];
                if cmd == "lookup" {
                    args.extend(["--at", AT]);
                }
                let out = fx.cli(&args);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(2), "{backend:?} {cmd} {typo}: {stderr}");
                assert!(
                    stderr.contains(&format!("{typo:?} is not a value of the key column customer_id")),
                    "{backend:?} {cmd} {typo}: {stderr}"
                );
            }
            let dim = dimlog::Dimension::load(fx.config_path()).expect("config");
            match dim.lookup(&[typo], ts(AT)).await {
                Err(dimlog::Error::Lookup(dimlog::LookupError::NotAValue { column, value, .. })) => {
                    assert_eq!((column.as_str(), value.as_str()), ("customer_id", typo));
                }
                other => panic!("{backend:?} {typo}: {other:?}"),
            }
        }
        // Spellings of the key are still read as it (`01` is 1), and a key of the right
        // type without a version is still the unknown member.
        for (key, found) in [("01", true), (" 1", true), ("2", false)] {
            let out = fx.cli(&["lookup", "--key", key, "--at", AT]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{backend:?} {key}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                stdout.trim() != UNKNOWN.to_string(),
                found,
                "{backend:?} {key}: {stdout}"
            );
        }
    }
    // SQLite: text held in an integer key column is found as it is.
    let fx = one_row_loaded("src_keys", "k1 int", "'1x'").await;
    let out = fx.cli(&["lookup", "--key", "1x", "--at", AT]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_ne!(String::from_utf8_lossy(&out.stdout).trim(), UNKNOWN.to_string());
}

/// On a one-column text key, `--key other=V` may be a value (a text key holds `a=b`), so
/// it is looked up as given; when nothing is found, a note says the key column's name
/// and the spelling to use, which works (an outside trial's `skuu=SKU-42` found nothing,
/// silently).
#[tokio::test]
async fn an_unfound_text_key_that_names_another_column_says_the_key_column() {
    let fx = one_row_loaded("src_sku", "sku TEXT", "'SKU-42'").await;
    for cmd in ["lookup", "history"] {
        let mut args = vec![cmd, "--key", "skuu=SKU-42"];
        if cmd == "lookup" {
            args.extend(["--at", AT]);
        }
        let out = fx.cli(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {stderr}");
        assert!(stderr.contains("the key is `sku`: --key sku=SKU-42"), "{cmd}: {stderr}");
        let mut fixed = vec![cmd, "--key", "sku=SKU-42"];
        if cmd == "lookup" {
            fixed.extend(["--at", AT]);
        }
        let out = fx.cli(&fixed);
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stderr).is_empty(),
            "{cmd}"
        );
        assert_ne!(
            String::from_utf8_lossy(&out.stdout).trim(),
            UNKNOWN.to_string(),
            "{cmd}"
        );
    }
}

/// A SQLite source `table` of one row, keyed by its first column (`key`: its name and
/// type, holding `value`, an SQL literal), loaded once.
async fn one_row_loaded(table: &str, key: &str, value: &str) -> Fixture {
    let mut fx = Fixture::sqlite().await;
    fx.exec(&format!(
        "CREATE TABLE {table} ({key} PRIMARY KEY, email TEXT, tier TEXT, country TEXT, \
         is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL)"
    ))
    .await;
    let column = key.split_whitespace().next().expect("a key column");
    fx.set_setting("table", &format!("\"{table}\""));
    fx.set_setting("key", &format!("[\"{column}\"]"));
    fx.exec(&format!(
        "INSERT INTO {table} ({column}, email, tier, country, updated_at) VALUES ({value}, 'e', 'pro', 'FR', '{LOADED}')"
    ))
    .await;
    fx.run(UPPER).await;
    fx
}
