//! `assign-keys` writes fact tables only, and only surrogate-key columns that are its own
//! (issue 14, items 2 and 3).
//!
//! Item 2: `--facts` naming a table dimlog owns — this dimension's log or dimension,
//! another registered dimension's, in any spelling that names the same table (SQLite:
//! any case, `main.`; PostgreSQL: `public.`) — is refused (exit 2), and nothing is
//! written.
//!
//! Trial item 3: when source and target are one database, `--facts` naming the source
//! table (any spelling) is refused (exit 2, usage): dimlog never writes a source. Trial
//! item 4: on SQLite, `--facts` with a schema other than `main` or a name SQLite keeps
//! (`sqlite_…`) is a usage error, not a database error.
//!
//! Item 3: without `--overwrite`, the surrogate-key column must be empty (NULL or -1
//! only), new, or filled earlier by `assign-keys` for this dimension (recorded in the
//! target, `dimlog_assigned`): an integer column whose values merely happen to be
//! surrogate keys (quantities, ids 1..N) is refused (exit 2, fact table untouched).

use dimlog::config::Backend;

use super::boundaries::two_keys;
use crate::cli::{assert_code, json, text};
use crate::support::fixture::{on_both_backends, Dump, Fixture};

on_both_backends!(
    assign_keys_refuses_dimlog_owned_tables,
    assign_keys_fills_only_columns_it_owns,
    assign_keys_refuses_the_source_table,
);

/// Every row of a target table, every column as text, in a stable order.
async fn snapshot(fx: &mut Fixture, table: &str) -> Dump {
    let cols: Vec<String> = match fx.backend {
        Backend::Postgres | Backend::Citus => fx
            .target_query(&format!(
                "SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass('{table}') AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
            ))
            .await,
        Backend::Sqlite => fx
            .target_query(&format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"))
            .await,
    }
    .into_iter()
    .map(|r| r[0].clone().expect("a column name"))
    .collect();
    let exprs: Vec<String> = cols
        .iter()
        .map(|c| match fx.backend {
            Backend::Postgres | Backend::Citus => format!("\"{c}\"::text"),
            Backend::Sqlite => format!("quote(\"{c}\")"),
        })
        .collect();
    let rows = fx
        .target_query(&format!(
            "SELECT {} FROM {table} ORDER BY {}",
            exprs.join(", "),
            (1..=cols.len()).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
        ))
        .await;
    Dump { headers: cols, rows }
}

/// The spellings of `table` that name the same table in `backend`: case variants and the
/// default schema on SQLite, the default schema on PostgreSQL (whose quoted names keep
/// their case, so another case is another table).
fn spellings(backend: Backend, table: &str) -> Vec<String> {
    let mut out = vec![table.to_string()];
    match backend {
        Backend::Sqlite => {
            out.push(table.to_uppercase());
            out.push(
                table
                    .chars()
                    .enumerate()
                    .map(|(i, c)| if i % 2 == 0 { c.to_ascii_uppercase() } else { c })
                    .collect(),
            );
            out.push(format!("main.{table}"));
            out.push(format!("MAIN.{}", table.to_uppercase()));
            out.push(format!("Main.{table}"));
        }
        Backend::Postgres | Backend::Citus => out.push(format!("public.{table}")),
    }
    out
}

/// The log and the dimension of this dimension, and those of another registered
/// dimension, under every spelling, with a column that exists (`load_id`, the surrogate
/// key, `valid_from`) or a new one as `--sk-column`: exit 2 naming the table and whose
/// it is, `usage` in JSON, and every dimlog table exactly as before.
async fn assign_keys_refuses_dimlog_owned_tables(mut fx: Fixture) {
    two_keys(&mut fx).await;
    // Another dimension registered in the same target.
    let mut other = fx.config().to_string();
    other = other
        .replace("name = \"customer\"", "name = \"account\"")
        .replace("customer_versions", "account_versions")
        .replace("dim_customer", "dim_account");
    let first = fx.config().to_string();
    fx.set_config(other);
    let out = fx.cli(&["run", "--upper", "2026-03-04T00:00:00Z"]);
    assert_code(&out, 0, "loading the second dimension");
    fx.set_config(first);

    let watched = [
        "customer_versions",
        "dim_customer",
        "account_versions",
        "dim_account",
        "dimlog_runs",
        "dimlog_state",
        "dimlog_dimensions",
    ];
    let mut before = Vec::new();
    for t in watched {
        before.push(snapshot(&mut fx, t).await);
    }
    let owned = [
        ("customer_versions", "log", "customer"),
        ("dim_customer", "dimension", "customer"),
        ("account_versions", "log", "account"),
        ("dim_account", "dimension", "account"),
        ("dim_customer_dimlog_new", "rebuild table", "customer"),
        ("dim_account_dimlog_new", "rebuild table", "account"),
    ];
    let mut cases = 0;
    for (table, role, owner) in owned {
        for spelled in spellings(fx.backend, table) {
            for sk in ["load_id", "customer_sk", "fresh_sk"] {
                let args = [
                    "assign-keys",
                    "--facts",
                    &spelled,
                    "--key-column",
                    "customer_id",
                    "--at-column",
                    "valid_from",
                    "--sk-column",
                    sk,
                ];
                let what = args.join(" ");
                let out = fx.cli(&args);
                assert_code(&out, 2, &what);
                let stderr = text(&out.stderr);
                for s in [
                    spelled.as_str(),
                    &format!("the {role} of dimension `{owner}`"),
                    "nothing was written",
                    "--facts",
                ] {
                    assert!(stderr.contains(s), "{what}: the message does not say {s:?}: {stderr}");
                }
                let mut with_json = args.to_vec();
                with_json.push("--json");
                let out = fx.cli(&with_json);
                assert_code(&out, 2, &format!("{what} --json"));
                assert_eq!(json(&out, &what)["error"]["kind"], "usage", "{what}");
                cases += 1;
            }
        }
    }
    assert!(cases >= 36, "{cases} cases");
    // dimlog's own tables, whatever the spelling (refused by their prefix).
    for table in ["dimlog_runs", "dimlog_state", "dimlog_dimensions"] {
        for spelled in spellings(fx.backend, table) {
            let out = fx.cli(&[
                "assign-keys",
                "--facts",
                &spelled,
                "--key-column",
                "customer_id",
                "--at-column",
                "updated_at",
                "--sk-column",
                "run_id",
            ]);
            assert_code(&out, 2, &spelled);
        }
    }
    for (t, b) in watched.iter().zip(&before) {
        assert_eq!(&snapshot(&mut fx, t).await, b, "{t} changed");
    }
}

fn assign<'a>(facts: &'a str, sk: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "assign-keys",
        "--facts",
        facts,
        "--key-column",
        "customer_id",
        "--at-column",
        "ordered_at",
        "--sk-column",
        sk,
    ];
    args.extend_from_slice(extra);
    args
}

/// Integer columns whose values are all surrogate keys of the dimension (or those and
/// -1 and NULL) but that `assign-keys` never filled are refused without `--overwrite`,
/// naming the table and column; empty columns, new ones and ones it filled before (in
/// any spelling of table and column) are filled; the record is per fact table and
/// dimension; a failed assignment records nothing.
async fn assign_keys_fills_only_columns_it_owns(mut fx: Fixture) {
    two_keys(&mut fx).await;
    let (int, at) = match fx.backend {
        Backend::Postgres | Backend::Citus => ("bigint", "timestamptz"),
        Backend::Sqlite => ("INTEGER", "TEXT"),
    };
    // Surrogate keys of the dimension are 1, 2, 3: the column values below are all
    // among them (or -1, NULL), so the old rule took them for surrogate-key columns.
    let lookalikes = ["qty", "order_id", "line_no", "ref_id", "one_sk", "unknown_and_sk"];
    let empties = ["nulls_sk", "minus_sk", "mixed_sk"];
    let mut cols: Vec<String> = lookalikes
        .iter()
        .chain(&empties)
        .map(|c| format!("{c} {int}"))
        .collect();
    cols.insert(0, format!("customer_id {int}, ordered_at {at}"));
    for facts in ["facts", "facts2"] {
        fx.target_exec(&format!("CREATE TABLE {facts} ({})", cols.join(", ")))
            .await;
        fx.target_exec(&format!(
            "INSERT INTO {facts} VALUES
                 (1, '2026-03-01T12:00:00Z', 1, 1, 1, 3, 2, -1, NULL, -1, NULL),
                 (1, '2026-03-02T13:00:00Z', 2, 2, 2, 3, 2, 2, NULL, -1, -1),
                 (2, '2026-03-02T00:00:00Z', 3, 3, 1, 3, 2, NULL, NULL, -1, NULL),
                 (42, '2026-03-02T00:00:00Z', 1, 1, 2, 3, 2, 3, NULL, -1, -1)"
        ))
        .await;
    }
    let before = snapshot(&mut fx, "facts").await;
    for facts in ["facts", "facts2"] {
        for c in lookalikes {
            for extra in [&[][..], &["--unknown", "error"][..]] {
                let args = assign(facts, c, extra);
                let what = args.join(" ");
                let out = fx.cli(&args);
                assert_code(&out, 2, &what);
                let stderr = text(&out.stderr);
                for s in [
                    format!("`{c}`"),
                    format!("of {facts}"),
                    "nothing was written".into(),
                    "--overwrite".into(),
                ] {
                    assert!(stderr.contains(&s), "{what}: the message does not say {s:?}: {stderr}");
                }
                let mut with_json = args.clone();
                with_json.push("--json");
                let out = fx.cli(&with_json);
                assert_code(&out, 2, &what);
                assert_eq!(json(&out, &what)["error"]["kind"], "usage", "{what}");
            }
        }
    }
    assert_eq!(snapshot(&mut fx, "facts").await, before, "a refusal wrote to the facts");

    // Empty columns and a new one are fine; the expected keys.
    let expected = ["1", "2", "3", "-1"].map(|s| Some(s.to_string())).to_vec();
    let sks = |rows: Vec<Vec<Option<String>>>| rows.into_iter().map(|r| r[0].clone()).collect::<Vec<_>>();
    for c in empties.iter().copied().chain(["fresh_sk"]) {
        let out = fx.cli(&assign("facts", c, &[]));
        assert_code(&out, 0, c);
        let got = sks(fx
            .target_query(&format!(
                "SELECT CAST({c} AS TEXT) FROM facts ORDER BY customer_id, ordered_at"
            ))
            .await);
        assert_eq!(got, expected, "{c}");
    }
    // Filled by assign-keys: a rerun is fine, in any spelling of table and column.
    let mut reruns = vec![("facts".to_string(), "nulls_sk".to_string())];
    if fx.backend == Backend::Sqlite {
        reruns.push(("FACTS".into(), "NULLS_SK".into()));
        reruns.push(("main.Facts".into(), "Fresh_Sk".into()));
    } else {
        reruns.push(("public.facts".into(), "fresh_sk".into()));
    }
    for (t, c) in &reruns {
        let out = fx.cli(&assign(t, c, &[]));
        assert_code(&out, 0, &format!("rerun {t}.{c}"));
    }
    // The record is per fact table: facts2's columns of the same names are not dimlog's.
    let out = fx.cli(&assign("facts2", "qty", &[]));
    assert_code(&out, 2, "facts2.qty");
    // ... and per dimension: another dimension's record does not count.
    fx.target_exec("UPDATE dimlog_assigned SET dimension = 'account' WHERE sk_column = 'fresh_sk'")
        .await;
    let out = fx.cli(&assign("facts", "fresh_sk", &[]));
    assert_code(&out, 2, "fresh_sk recorded for another dimension");
    assert!(text(&out.stderr).contains("`fresh_sk`"), "{}", text(&out.stderr));

    // A failed assignment (an unknown fact with --unknown error) records nothing.
    let out = fx.cli(&assign("facts2", "minus_sk", &["--unknown", "error"]));
    assert_code(&out, 1, "--unknown error");
    fx.target_exec("UPDATE facts2 SET minus_sk = 1").await;
    let out = fx.cli(&assign("facts2", "minus_sk", &[]));
    assert_code(&out, 2, "minus_sk after a failed assignment");

    // --overwrite: the user says qty is dimlog's; from then on it is.
    let out = fx.cli(&assign("facts", "qty", &["--overwrite"]));
    assert_code(&out, 0, "qty --overwrite");
    let out = fx.cli(&assign("facts", "qty", &[]));
    assert_code(&out, 0, "qty after --overwrite");
    let got = sks(fx
        .target_query("SELECT CAST(qty AS TEXT) FROM facts ORDER BY customer_id, ordered_at")
        .await);
    assert_eq!(got, expected);

    // The record names the table: one dropped and made again under that name, its
    // column now holding other data (no surrogate key of the dimension), is refused.
    fx.target_exec(&format!(
        "DROP TABLE facts; CREATE TABLE facts (customer_id {int}, ordered_at {at}, nulls_sk {int});
         INSERT INTO facts VALUES (1, '2026-03-01T12:00:00Z', 12345), (2, '2026-03-02T00:00:00Z', 999),
                                  (1, '2026-03-02T13:00:00Z', 2), (42, '2026-03-02T00:00:00Z', -1)"
    ))
    .await;
    let before = snapshot(&mut fx, "facts").await;
    let out = fx.cli(&assign("facts", "nulls_sk", &[]));
    assert_code(&out, 2, "nulls_sk of a table made again");
    let stderr = text(&out.stderr);
    for s in [
        "`nulls_sk`",
        "2 values",
        "no surrogate key",
        "e.g. 999",
        "made again",
        "--overwrite",
    ] {
        assert!(stderr.contains(s), "the message does not say {s:?}: {stderr}");
    }
    assert_eq!(snapshot(&mut fx, "facts").await, before, "a refusal wrote to the facts");
}

/// The source table's columns and rows.
async fn source_state(fx: &mut Fixture) -> Vec<Vec<Option<String>>> {
    let columns = match fx.backend {
        Backend::Sqlite => "SELECT group_concat(name, ',') FROM pragma_table_info('src_feed')",
        Backend::Postgres | Backend::Citus => {
            "SELECT string_agg(column_name::text, ',' ORDER BY ordinal_position) FROM information_schema.columns \
             WHERE table_name = 'src_feed'"
        }
    };
    let mut out = fx.source_query(columns).await;
    out.extend(
        fx.source_query(
            "SELECT CAST(customer_id AS TEXT), email, tier, country, CAST(updated_at AS TEXT) FROM src_feed ORDER BY 1",
        )
        .await,
    );
    out
}

/// Source and target one database (PostgreSQL: the fixture's; SQLite: the target URL set
/// to the source's file): `--facts` naming the source table, in every spelling and under
/// every spelling of the URL, is exit 2 (`usage`) naming the table, and the source is
/// untouched. On SQLite, schemas other than `main` and `sqlite_…` names are exit 2 too.
async fn assign_keys_refuses_the_source_table(mut fx: Fixture) {
    let source_path = fx.dir().join("source.db");
    let urls: Vec<String> = match fx.backend {
        Backend::Sqlite => vec![
            format!("sqlite://{}", source_path.display()),
            "sqlite://./source.db".into(),
        ],
        Backend::Postgres | Backend::Citus => {
            let mut urls = vec![fx.target_url.clone()];
            for (from, to) in [("@127.0.0.1:", "@localhost:"), ("@localhost:", "@127.0.0.1:")] {
                if fx.target_url.contains(from) {
                    urls.push(fx.target_url.replace(from, to));
                }
            }
            urls
        }
    };
    two_keys(&mut fx).await;
    // The dimension loaded in the source's database too (SQLite: the fixture's target
    // is another file).
    crate::reliability::target_only::set_url(&mut fx, true, &urls[0]);
    let out = fx.cli(&["run", "--upper", "2026-03-04T00:00:00Z"]);
    assert_code(&out, 0, "loading into the source's database");
    let before = source_state(&mut fx).await;
    let mut cases = 0;
    for url in &urls {
        crate::reliability::target_only::set_url(&mut fx, true, url);
        for spelled in spellings(fx.backend, "src_feed") {
            for sk in ["c_sk2", "tier", "customer_id"] {
                let args = [
                    "assign-keys",
                    "--facts",
                    &spelled,
                    "--key-column",
                    "customer_id",
                    "--at-column",
                    "updated_at",
                    "--sk-column",
                    sk,
                ];
                let what = format!("{url}: {}", args.join(" "));
                let out = fx.cli(&args);
                assert_code(&out, 2, &what);
                let stderr = text(&out.stderr);
                for s in [spelled.as_str(), "source table", "never writes"] {
                    assert!(stderr.contains(s), "{what}: the message does not say {s:?}: {stderr}");
                }
                let mut with_json = args.to_vec();
                with_json.push("--json");
                let out = fx.cli(&with_json);
                assert_code(&out, 2, &format!("{what} --json"));
                assert_eq!(json(&out, &what)["error"]["kind"], "usage", "{what}");
                cases += 1;
            }
        }
    }
    assert!(cases >= 6, "{cases} cases");
    assert_eq!(source_state(&mut fx).await, before, "the source changed");

    if fx.backend == Backend::Sqlite {
        let mut refused = Vec::new();
        for schema in ["temp", "TEMP", "aux", "public"] {
            refused.push((format!("{schema}.facts"), "schema"));
        }
        for name in ["sqlite_stat1", "SQLITE_MASTER", "Sqlite_facts", "main.sqlite_sequence"] {
            refused.push((name.to_string(), "sqlite_"));
        }
        for (facts, says) in &refused {
            let args = [
                "assign-keys",
                "--facts",
                facts,
                "--key-column",
                "customer_id",
                "--at-column",
                "updated_at",
                "--sk-column",
                "c_sk",
            ];
            let what = args.join(" ");
            let out = fx.cli(&args);
            assert_code(&out, 2, &what);
            let stderr = text(&out.stderr);
            assert!(
                stderr.contains(facts.as_str())
                    && stderr.contains(says)
                    && !stderr.contains("error returned from database"),
                "{what}: {stderr}"
            );
            let mut with_json = args.to_vec();
            with_json.push("--json");
            let out = fx.cli(&with_json);
            assert_eq!(json(&out, &what)["error"]["kind"], "usage", "{what}");
        }
    }
}
