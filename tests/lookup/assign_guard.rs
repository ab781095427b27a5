//! `assign-keys` only writes what it was made for (issue 14, items 2 and 3): it refuses a
//! `--sk-column` that is one of the facts' own inputs, not an integer column, or holds
//! values other than NULL and -1 without `assign-keys` having filled it before (exit 2,
//! nothing written; the last unless `--overwrite`), and it counts the facts whose timestamp it cannot read (NULL,
//! text that is no timestamp, a number), warns about them, and with `--unknown error` fails
//! naming the first; times without a zone when `source.timezone` does not say which are
//! refused (exit 2).

use dimlog::config::Backend;
use dimlog::lookup::UNKNOWN;

use super::boundaries::two_keys;
use crate::cli::{assert_code, json, text};
use crate::support::fixture::{on_both_backends, Dump, Fixture};

on_both_backends!(
    a_sk_column_that_is_not_for_surrogate_keys_is_refused,
    bad_fact_timestamps_are_counted_and_named,
    zone_less_fact_times_are_read_in_source_timezone,
);

/// Every column of a target table, as text, ordered by `order_id`.
async fn dump(fx: &mut Fixture, table: &str) -> Dump {
    let columns: Vec<String> = columns_of(fx, table).await;
    let exprs: Vec<String> = columns
        .iter()
        .map(|c| match fx.backend {
            Backend::Postgres | Backend::Citus => format!("{table}.\"{c}\"::text"),
            Backend::Sqlite => format!("CAST({table}.\"{c}\" AS TEXT) || ':' || typeof({table}.\"{c}\")"),
        })
        .collect();
    let rows = fx
        .target_query(&format!(
            "SELECT {} FROM {table} ORDER BY {table}.order_id",
            exprs.join(", ")
        ))
        .await;
    Dump { headers: columns, rows }
}

async fn columns_of(fx: &mut Fixture, table: &str) -> Vec<String> {
    let sql = match fx.backend {
        Backend::Postgres | Backend::Citus => format!(
            "SELECT column_name::text FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position"
        ),
        Backend::Sqlite => format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
    };
    fx.target_query(&sql)
        .await
        .into_iter()
        .map(|r| r[0].clone().expect("a column name"))
        .collect()
}

fn assign<'a>(sk: &'a str, at: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "assign-keys",
        "--facts",
        "facts",
        "--key-column",
        "customer_id",
        "--at-column",
        at,
        "--sk-column",
        sk,
    ];
    args.extend_from_slice(extra);
    args
}

/// The fact table of the guard test: amounts, a note, a price, an empty column made for
/// surrogate keys, one holding keys of an earlier assignment, one with a stray value.
async fn guarded_facts(fx: &mut Fixture) {
    let (int, text, real, at) = match fx.backend {
        Backend::Postgres | Backend::Citus => ("bigint", "text", "double precision", "timestamptz"),
        Backend::Sqlite => ("INTEGER", "TEXT", "REAL", "TEXT"),
    };
    fx.target_exec(&format!(
        "CREATE TABLE facts (order_id {int}, customer_id {int}, ordered_at {at}, amount {int}, note {text},
             price {real}, customer_sk {int}, earlier_sk {int}, stray_sk {int}, small_sk smallint);
         INSERT INTO facts VALUES
             (1, 1, '2026-03-01T12:00:00Z', 100, 'a', 1.5, NULL, 1, 1, NULL),
             (2, 1, '2026-03-02T13:00:00Z', 200, 'b', 2.5, NULL, 2, 2, NULL),
             (3, 2, '2026-03-02T00:00:00Z', 300, 'c', 3.5, NULL, 3, 999, NULL),
             (4, 42, '2026-03-02T00:00:00Z', 400, 'd', 4.5, NULL, -1, NULL, NULL),
             (5, 2, '2026-03-05T00:00:00Z', 500, 'e', 5.5, NULL, NULL, -1, NULL)"
    ))
    .await;
}

/// Naming a key column, the timestamp column (in SQLite in any case), a text or real
/// column, or a column of amounts or with one stray value as `--sk-column` exits 2 with
/// the column and the reason, and leaves the fact table as it was; so does one holding
/// values that happen to be surrogate keys but that assign-keys did not fill; an empty
/// integer column, a rerun on one assign-keys filled, and a new column are fine;
/// `--overwrite` replaces the amounts.
async fn a_sk_column_that_is_not_for_surrogate_keys_is_refused(mut fx: Fixture) {
    two_keys(&mut fx).await;
    guarded_facts(&mut fx).await;
    let before = dump(&mut fx, "facts").await;
    let sqlite = fx.backend == Backend::Sqlite;
    let mut refusals: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            assign("customer_id", "ordered_at", &[]),
            vec!["`customer_id`", "key column"],
        ),
        (
            assign("ordered_at", "ordered_at", &[]),
            vec!["`ordered_at`", "timestamp column"],
        ),
        (assign("note", "ordered_at", &[]), vec!["`note`", "not an integer type"]),
        (
            assign("price", "ordered_at", &[]),
            vec!["`price`", "not an integer type"],
        ),
        (
            assign("amount", "ordered_at", &[]),
            vec![
                "`amount`",
                "5 values other than NULL and -1",
                "assign-keys has not filled it for dimension `customer`",
                "100",
                "--overwrite",
            ],
        ),
        (
            assign("stray_sk", "ordered_at", &[]),
            vec!["`stray_sk`", "3 values", "--overwrite"],
        ),
        // Values that are all surrogate keys of the dimension (and -1, NULL) are no proof
        // that the column is dimlog's: only an earlier assign-keys is.
        (
            assign("earlier_sk", "ordered_at", &[]),
            vec!["`earlier_sk`", "3 values", "--overwrite"],
        ),
        // --overwrite does not lift the other refusals.
        (
            assign("customer_id", "ordered_at", &["--overwrite"]),
            vec!["key column"],
        ),
        (
            assign("note", "ordered_at", &["--overwrite"]),
            vec!["not an integer type"],
        ),
    ];
    if sqlite {
        // SQLite names are case-insensitive: these are the same columns.
        refusals.push((assign("CUSTOMER_ID", "ordered_at", &[]), vec!["key column"]));
        refusals.push((assign("Ordered_At", "ordered_at", &[]), vec!["timestamp column"]));
        refusals.push((assign("ordered_at", "ORDERED_AT", &[]), vec!["timestamp column"]));
    }
    for (args, says) in &refusals {
        let what = args.join(" ");
        let out = fx.cli(args);
        assert_code(&out, 2, &what);
        let stderr = text(&out.stderr);
        for s in says {
            assert!(stderr.contains(s), "{what}: the message does not say {s:?}: {stderr}");
        }
        let mut with_json = args.clone();
        with_json.push("--json");
        let out = fx.cli(&with_json);
        assert_code(&out, 2, &format!("{what} --json"));
        assert_eq!(json(&out, &what)["error"]["kind"], "usage");
        assert_eq!(dump(&mut fx, "facts").await, before, "{what}: the fact table changed");
    }

    // Made for the purpose: empty, a smallint; then a rerun of an earlier assignment
    // (keys, -1, NULL).
    for sk in ["customer_sk", "small_sk", "customer_sk"] {
        let out = fx.cli(&assign(sk, "ordered_at", &["--json"]));
        assert_code(&out, 0, sk);
        let v = json(&out, sk);
        assert_eq!(
            (&v["facts_matched"], &v["facts_unknown"]),
            (&3.into(), &2.into()),
            "{sk}: {v}"
        );
    }
    let after = dump(&mut fx, "facts").await;
    let sks = |d: &Dump, c: &str| -> Vec<Option<i64>> {
        d.values(c)
            .into_iter()
            .map(|v| v.and_then(|s| s.split(':').next().and_then(|n| n.parse().ok())))
            .collect()
    };
    let expected = [1, 2, 3, UNKNOWN, UNKNOWN].map(Some).to_vec();
    for sk in ["customer_sk", "small_sk"] {
        assert_eq!(sks(&after, sk), expected, "{sk}: {after:?}");
    }
    assert_eq!(sks(&after, "earlier_sk"), sks(&before, "earlier_sk"));
    assert_eq!(sks(&after, "amount"), sks(&before, "amount"));
    // A new column, in SQLite named in another case than an existing one: the same one.
    if sqlite {
        let out = fx.cli(&assign("Customer_SK", "Ordered_At", &[]));
        assert_code(&out, 0, "Customer_SK");
        assert_eq!(columns_of(&mut fx, "facts").await, before.headers);
    }
    let out = fx.cli(&assign("fresh_sk", "ordered_at", &[]));
    assert_code(&out, 0, "fresh_sk");
    assert_eq!(sks(&dump(&mut fx, "facts").await, "fresh_sk"), expected);

    // --overwrite: the user says the amounts may go.
    let out = fx.cli(&assign("amount", "ordered_at", &["--overwrite"]));
    assert_code(&out, 0, "amount --overwrite");
    assert_eq!(sks(&dump(&mut fx, "facts").await, "amount"), expected);
}

/// Fact timestamps assign-keys cannot read: counted (`bad_timestamps` in `--json`, a
/// warning in text), given -1; with `--unknown error`, exit 1 naming the first such fact
/// and what is wrong with its value, and nothing written. PostgreSQL: NULL and
/// infinity in a timestamptz column; a `timestamp` column without `source.timezone`, or
/// a text column, is refused before anything is written (exit 2). SQLite: a time without
/// a zone when `source.timezone` is not set is refused the same way, even with `-q` and
/// one such fact among good ones (it was given -1 with exit 0: a whole table of local
/// times got the unknown member silently).
async fn bad_fact_timestamps_are_counted_and_named(mut fx: Fixture) {
    two_keys(&mut fx).await;
    let rows = match fx.backend {
        Backend::Sqlite => {
            fx.target_exec("CREATE TABLE facts (order_id INTEGER, customer_id INTEGER, ordered_at TEXT)")
                .await;
            "(1, 1, '2026-03-01T12:00:00Z'), (2, 1, '2026-03-02T14:00:00+0100'),
             (3, 5, 'garbage'), (4, 6, NULL), (5, 7, 1772442000),
             (7, 9, '2026-02-30T00:00:00Z'), (8, 42, '2026-03-02T00:00:00Z')"
        }
        Backend::Postgres | Backend::Citus => {
            fx.target_exec("CREATE TABLE facts (order_id bigint, customer_id bigint, ordered_at timestamptz)")
                .await;
            "(1, 1, '2026-03-01T12:00:00Z'), (2, 1, '2026-03-02T14:00:00+0100'),
             (3, 5, 'infinity'), (4, 6, NULL), (8, 42, '2026-03-02T00:00:00Z')"
        }
    };
    fx.target_exec(&format!(
        "INSERT INTO facts (order_id, customer_id, ordered_at) VALUES {rows}"
    ))
    .await;
    let bad = match fx.backend {
        Backend::Sqlite => 4,
        Backend::Postgres | Backend::Citus => 2,
    };
    let before = dump(&mut fx, "facts").await;

    // --unknown error: the first bad fact (by key) is named with its value; nothing written.
    let out = fx.cli(&assign("customer_sk", "ordered_at", &["--unknown", "error"]));
    assert_code(&out, 1, "--unknown error");
    let stderr = text(&out.stderr);
    let first = match fx.backend {
        Backend::Sqlite => "first: key (5) at 'garbage'",
        Backend::Postgres | Backend::Citus => "first: key (5) at 'infinity'",
    };
    for s in [
        &format!("{bad} facts in facts have no usable timestamp in `ordered_at`"),
        first,
        "nothing was written",
    ] {
        assert!(stderr.contains(s), "the message does not say {s:?}: {stderr}");
    }
    assert_eq!(dump(&mut fx, "facts").await, before, "something was written");
    let out = fx.cli(&assign("customer_sk", "ordered_at", &["--unknown", "error", "--json"]));
    assert_code(&out, 1, "--unknown error --json");
    let v = json(&out, "--unknown error --json");
    assert_eq!(v["error"]["kind"], "bad-timestamp", "{v}");
    assert_eq!(dump(&mut fx, "facts").await, before, "something was written");

    // --unknown -1: counted, warned about, -1.
    let out = fx.cli(&assign("customer_sk", "ordered_at", &["--json"]));
    assert_code(&out, 0, "--json");
    let v = json(&out, "--json");
    assert_eq!(v["bad_timestamps"], bad, "{v}");
    assert_eq!(v["facts_matched"], 2, "{v}");
    assert_eq!(v["facts_unknown"], bad + 1, "{v}");
    let out = fx.cli(&assign("customer_sk", "ordered_at", &[]));
    assert_code(&out, 0, "text");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        stdout.contains(&format!("{bad} of them have no usable timestamp")),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!(
            "warning: {bad} facts in facts have no usable timestamp in `ordered_at`"
        )),
        "{stderr}"
    );
    let sks: Vec<Option<String>> = fx
        .target_query("SELECT CAST(customer_sk AS TEXT) FROM facts ORDER BY order_id")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    let mut expected = vec![Some("1".to_string()), Some("2".to_string())];
    expected.extend(std::iter::repeat_n(Some("-1".to_string()), bad as usize + 1));
    assert_eq!(sks, expected);

    if fx.backend == Backend::Sqlite {
        fx.target_exec(
            "CREATE TABLE local_facts (order_id INTEGER, customer_id INTEGER, ordered_at TEXT, customer_sk INTEGER);
             INSERT INTO local_facts VALUES (1, 1, '2026-03-01T12:00:00Z', NULL), (2, 1, '2026-03-02 13:00:00', NULL),
                                            (3, 2, '2026-03-02T13:00:00', NULL), (4, 2, 'garbage', NULL)",
        )
        .await;
        let before = dump(&mut fx, "local_facts").await;
        for extra in [&["--json"][..], &["-q"], &["--unknown", "error"]] {
            let mut args = assign("customer_sk", "ordered_at", extra);
            args[2] = "local_facts";
            let out = fx.cli(&args);
            assert_code(&out, 2, &format!("{extra:?}"));
            let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
            for s in [
                "2 distinct fact times in `ordered_at` of local_facts carry no zone",
                "e.g. '2026-03-02 13:00:00'",
                "source.timezone",
                "nothing was written",
            ] {
                assert!(said.contains(s), "{extra:?}: the message does not say {s:?}: {said}");
            }
            if extra == ["--json"] {
                assert_eq!(json(&out, "--json")["error"]["kind"], "config");
            }
            assert_eq!(dump(&mut fx, "local_facts").await, before, "something was written");
        }
    }

    if fx.backend == Backend::Postgres {
        // A column of another type is refused before anything is written.
        fx.target_exec(
            "CREATE TABLE naive_facts (order_id bigint, customer_id bigint, ordered_at timestamp);
             INSERT INTO naive_facts VALUES (1, 1, '2026-03-02 13:00:00');
             CREATE TABLE text_facts (order_id bigint, customer_id bigint, ordered_at text);
             INSERT INTO text_facts VALUES (1, 1, '2026-03-02T13:00:00Z')",
        )
        .await;
        for (table, says, kind) in [
            (
                "naive_facts",
                vec!["`ordered_at`", "timestamp without time zone", "source.timezone"],
                "config",
            ),
            ("text_facts", vec!["`ordered_at`", "text", "not a timestamp"], "usage"),
        ] {
            let mut args = assign("customer_sk", "ordered_at", &["--json"]);
            args[2] = table;
            let out = fx.cli(&args);
            assert_code(&out, 2, table);
            let v = json(&out, table);
            assert_eq!(v["error"]["kind"], kind, "{v}");
            let message = v["error"]["message"].as_str().unwrap_or_default();
            for s in says {
                assert!(
                    message.contains(s),
                    "{table}: the message does not say {s:?}: {message}"
                );
            }
            assert_eq!(
                columns_of(&mut fx, table).await,
                ["order_id", "customer_id", "ordered_at"]
            );
        }
    }
}

/// With `source.timezone`, a fact time without a zone is a local time of that zone, as
/// the source's change column is: 13:00 in Paris is 12:00 UTC (key 1's first version;
/// read as UTC it would be the second), and a time in the spring-forward gap is a bad
/// timestamp.
async fn zone_less_fact_times_are_read_in_source_timezone(mut fx: Fixture) {
    two_keys(&mut fx).await;
    fx.edit_config(
        "safety_lag = \"0s\"",
        "safety_lag = \"0s\"\ntimezone = \"Europe/Paris\"",
    );
    let rows = match fx.backend {
        Backend::Sqlite => {
            fx.target_exec("CREATE TABLE facts (order_id INTEGER, customer_id INTEGER, ordered_at TEXT)")
                .await;
            "(1, 1, '2026-03-02 13:00:00'), (2, 1, '2026-03-02T13:30:00.5'), (3, 1, '2026-03-02T12:00:00Z'),
             (4, 1, '2026-03-29 02:30:00'), (5, 1, '2026-03-02')"
        }
        Backend::Postgres | Backend::Citus => {
            fx.target_exec("CREATE TABLE facts (order_id bigint, customer_id bigint, ordered_at timestamp)")
                .await;
            "(1, 1, '2026-03-02 13:00:00'), (2, 1, '2026-03-02T13:30:00.5'), (3, 1, '2026-03-02 13:00:00'),
             (4, 1, '2026-03-29 02:30:00'), (5, 1, '2026-03-02')"
        }
    };
    fx.target_exec(&format!(
        "INSERT INTO facts (order_id, customer_id, ordered_at) VALUES {rows}"
    ))
    .await;
    let out = fx.cli(&assign("customer_sk", "ordered_at", &["--json"]));
    assert_code(&out, 0, "assign-keys with source.timezone");
    let v = json(&out, "assign-keys with source.timezone");
    let sks: Vec<Option<String>> = fx
        .target_query("SELECT CAST(customer_sk AS TEXT) FROM facts ORDER BY order_id")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    // 13:00 Paris = 12:00Z: version 1; 13:30:00.5 Paris = 12:30:00.5Z: version 2 (from
    // 12:30:00.25Z); midnight of 2 March in Paris: version 1.
    // A local time the clocks skip names no instant on either backend (PostgreSQL's
    // own rule would move it forward an hour).
    assert_eq!(sks, ["1", "2", "1", "-1", "1"].map(|s| Some(s.to_string())));
    assert_eq!(v["bad_timestamps"], 1, "the local time in the DST gap: {v}");
}

/// Assignments of one fact table started together: each ends (one waits for the other)
/// and every fact gets its key, where PostgreSQL's deadlock detector failed one of them
/// (they updated the rows in different orders: seen by a trial on 1M facts, not reproduced
/// here every time, as it is a race).
#[tokio::test]
async fn assignments_of_one_fact_table_at_once_both_end() {
    let mut fx = Fixture::postgres().await;
    two_keys(&mut fx).await;
    fx.target_exec(
        "CREATE TABLE facts (order_id bigint, customer_id bigint, ordered_at timestamptz, customer_sk bigint);
         INSERT INTO facts SELECT g, 1 + g % 3, '2026-03-01T08:00:00Z'::timestamptz + (g % 200) * interval '30 minutes', NULL
         FROM generate_series(1, 200000) g",
    )
    .await;
    let args = assign("customer_sk", "ordered_at", &[]);
    for round in 0..2 {
        let spawn = || {
            std::process::Command::new(env!("CARGO_BIN_EXE_dimlog"))
                .arg("--config")
                .arg(fx.config_path())
                .args(&args)
                .current_dir(fx.dir())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("dimlog")
        };
        let (a, b) = (spawn(), spawn());
        for child in [a, b] {
            let out = child.wait_with_output().expect("dimlog ends");
            assert_eq!(out.status.code(), Some(0), "round {round}: {}", text(&out.stderr));
        }
        fx.target_exec("UPDATE facts SET customer_sk = NULL").await;
    }
}
