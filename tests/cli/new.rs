//! `dimlog new` on SQLite and PostgreSQL tables: the generated config is snapshotted, and a
//! config without TODOs runs unedited (and a second run appends nothing).

use super::{assert_code, dimlog, dimlog_env, json, text};
use crate::support::fixture::{assert_snapshot, on_both_backends, Fixture};
use dimlog::config::Backend;

on_both_backends!(
    new_with_a_primary_key_runs_unedited,
    new_without_a_primary_key_uses_a_unique_id,
    new_without_a_key_leaves_a_todo,
    new_with_several_timestamps_asks_to_pick,
    new_with_other_change_and_creation_times_says_what_it_did_with_them,
    new_on_a_timestamp_without_time_zone_asks_for_the_zone,
    new_picks_only_a_key_that_is_unique_in_the_data,
    new_with_odd_names_reads_them_renamed,
);

const UPPER: &str = "2026-11-01T00:00:00Z";

fn backend_name(fx: &Fixture) -> &'static str {
    match fx.backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres | Backend::Citus => "postgres",
    }
}

/// The `--source-url` to pass: SQLite relative to the fixture's dir (the test runs there,
/// so the config gets a relative path too), PostgreSQL as is.
fn source_url(fx: &Fixture) -> String {
    match fx.backend {
        Backend::Sqlite => "sqlite://source.db".into(),
        Backend::Postgres | Backend::Citus => fx.source_url.clone(),
    }
}

/// A timestamp-with-zone type on each backend.
fn tstz(fx: &Fixture) -> &'static str {
    match fx.backend {
        Backend::Sqlite => "TEXT",
        Backend::Postgres | Backend::Citus => "timestamptz",
    }
}

/// Environment for runs: the config never holds a password, so hand it over as libpq does.
fn password_env(fx: &Fixture) -> Vec<(&'static str, String)> {
    match url::Url::parse(&fx.source_url) {
        Ok(u) if fx.backend == Backend::Postgres => u
            .password()
            .map(|p| vec![("PGPASSWORD", p.to_string())])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn run_generated(fx: &Fixture, config: &str, extra: &[&str]) -> std::process::Output {
    let env = password_env(fx);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut args = vec!["--config", config];
    args.extend_from_slice(extra);
    dimlog_env(fx.dir(), &args, &env)
}

/// Reads the generated file with the PostgreSQL URL (port, database name) redacted.
fn generated(fx: &Fixture, name: &str) -> String {
    let text = std::fs::read_to_string(fx.dir().join(name)).expect("the generated config");
    text.lines()
        .map(|l| {
            if l.starts_with("url = \"postgres") {
                let end = l[7..].find('"').map_or(l.len(), |e| e + 8);
                format!("url = \"<test database>\"{}", &l[end..])
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// `dimlog new` with the given table and extra flags, writing `out`.
fn new(fx: &Fixture, table: &str, out: &str, extra: &[&str]) -> std::process::Output {
    let url = source_url(fx);
    let mut args = vec!["new", "--source-url", url.as_str(), "--table", table, "--out", out];
    args.extend_from_slice(extra);
    dimlog(fx.dir(), &args)
}

/// Runs the generated config twice with the same upper bound: the first loads `rows`
/// versions, the second appends nothing.
fn runs_twice(fx: &Fixture, config: &str, rows: i64) {
    let first = run_generated(fx, config, &["run", "--json", "--upper", UPPER]);
    assert_code(&first, 0, "first run of the generated config");
    let first = json(&first, "run --json");
    assert_eq!(first["versions"], rows, "{first}");
    assert_eq!(first["status"], "succeeded", "{first}");
    let second = run_generated(fx, config, &["run", "--json", "--upper", UPPER]);
    assert_code(&second, 0, "second run of the generated config");
    let second = json(&second, "run --json");
    for count in ["versions", "corrections", "tombstones"] {
        assert_eq!(second[count], 0, "a rerun appended {count}: {second}");
    }
    let verify = run_generated(fx, config, &["verify"]);
    assert_code(&verify, 0, "verify after the generated config ran");
}

async fn new_with_a_primary_key_runs_unedited(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'pro', 'FR', '2026-10-01T09:00:00Z'),
             (2, 'bob@example.com', NULL, 'DE', '2026-10-01T10:00:00Z')",
    )
    .await;
    let out = new(&fx, "src_customers", "new.toml", &["--json"]);
    assert_code(&out, 0, "new");
    let report = json(&out, "new --json");
    assert_eq!(report["key"], serde_json::json!(["customer_id"]), "{report}");
    assert_eq!(report["updated_at"], "updated_at");
    assert_eq!(report["deleted_flag"], "is_deleted");
    assert_eq!(
        report["tracked_columns"],
        serde_json::json!(["email", "tier", "country"])
    );
    assert_eq!(report["ready"], true);
    let toml = generated(&fx, "new.toml");
    assert_snapshot(
        &format!("new__primary_key__{}", backend_name(&fx)),
        "dimlog new on a table with a primary key",
        &toml,
    );
    runs_twice(&fx, "new.toml", 2);

    // An existing file is never overwritten without --force.
    std::fs::write(fx.dir().join("new.toml"), "# mine\n").expect("write");
    let again = new(&fx, "src_customers", "new.toml", &[]);
    assert_code(&again, 2, "new over an existing file");
    assert!(text(&again.stderr).contains("--force"), "{}", text(&again.stderr));
    assert_eq!(std::fs::read_to_string(fx.dir().join("new.toml")).unwrap(), "# mine\n");
    let forced = new(&fx, "src_customers", "new.toml", &["--force"]);
    assert_code(&forced, 0, "new --force");
    assert!(text(&forced.stdout).contains("dimlog --config new.toml run"));
}

async fn new_without_a_primary_key_uses_a_unique_id(mut fx: Fixture) {
    let ddl = format!(
        "CREATE TABLE src_products (product_id bigint, name text, price numeric(10,2), updated_at {} NOT NULL)",
        tstz(&fx)
    );
    fx.exec(&ddl).await;
    fx.exec(
        "INSERT INTO src_products VALUES
             (1, 'lamp', 10.50, '2026-10-01T09:00:00Z'),
             (2, 'desk', 99.00, '2026-10-01T09:30:00Z'),
             (3, 'chair', NULL, '2026-10-02T09:30:00Z')",
    )
    .await;
    let out = new(&fx, "src_products", "products.toml", &[]);
    assert_code(&out, 0, "new");
    let toml = generated(&fx, "products.toml");
    assert!(toml.contains("key = [\"product_id\"]"), "{toml}");
    assert!(
        toml.contains("`product_id` looks unique (3 rows, 3 distinct values)"),
        "{toml}"
    );
    assert_snapshot(
        &format!("new__unique_id__{}", backend_name(&fx)),
        "dimlog new on a table without a primary key but with a unique product_id",
        &toml,
    );
    runs_twice(&fx, "products.toml", 3);
}

async fn new_without_a_key_leaves_a_todo(mut fx: Fixture) {
    let ddl = format!(
        "CREATE TABLE readings (sensor text, reading double precision, updated_at {} NOT NULL)",
        tstz(&fx)
    );
    fx.exec(&ddl).await;
    let out = new(&fx, "readings", "readings.toml", &[]);
    assert_code(&out, 2, "new without any key");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("source.key") && stderr.contains("--key"), "{stderr}");
    let toml = generated(&fx, "readings.toml");
    assert!(toml.contains("TODO_natural_key"), "{toml}");
    assert_snapshot(
        &format!("new__no_key__{}", backend_name(&fx)),
        "dimlog new on a table with no primary key and no id column",
        &toml,
    );
    // The placeholder fails validation, pointing back at the comment.
    let run = run_generated(&fx, "readings.toml", &["run", "--upper", UPPER]);
    assert_code(&run, 2, "run with the placeholder key");
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("`source.key`") && stderr.contains("dimlog new"),
        "{stderr}"
    );
    // Choosing the key on the command line makes it ready.
    let out = new(&fx, "readings", "readings.toml", &["--key", "sensor", "--force"]);
    assert_code(&out, 0, "new --key");
    let run = run_generated(&fx, "readings.toml", &["run", "--upper", UPPER]);
    assert_code(&run, 0, "run with the chosen key");
}

async fn new_with_several_timestamps_asks_to_pick(mut fx: Fixture) {
    let t = tstz(&fx);
    let ddl = format!(
        "CREATE TABLE orders (order_id bigint PRIMARY KEY, status text, created_at {t}, shipped_at {t}, delivered_at {t})"
    );
    fx.exec(&ddl).await;
    fx.exec(
        "INSERT INTO orders VALUES
             (1, 'shipped', '2026-10-01T09:00:00Z', '2026-10-02T09:00:00Z', NULL),
             (2, 'delivered', '2026-10-01T10:00:00Z', '2026-10-02T10:00:00Z', '2026-10-03T10:00:00Z')",
    )
    .await;
    let out = new(&fx, "orders", "orders.toml", &[]);
    assert_code(&out, 2, "new with several timestamps");
    let stderr = text(&out.stderr);
    for c in ["shipped_at", "delivered_at", "--updated-at"] {
        assert!(stderr.contains(c), "the message must name {c}: {stderr}");
    }
    let toml = generated(&fx, "orders.toml");
    assert!(toml.contains("updated_at = \"TODO_change_column\""), "{toml}");
    assert_snapshot(
        &format!("new__several_timestamps__{}", backend_name(&fx)),
        "dimlog new on a table with several timestamps and none named like a change column",
        &toml,
    );
    let out = new(&fx, "orders", "orders.toml", &["--json", "--force"]);
    assert_code(&out, 2, "new --json with several timestamps");
    let report = json(&out, "new --json");
    assert_eq!(report["ready"], false);
    assert_eq!(report["todo"][0]["setting"], "source.updated_at", "{report}");
    assert_eq!(
        report["todo"][0]["candidates"],
        serde_json::json!(["created_at", "shipped_at", "delivered_at"]),
        "{report}"
    );
    let out = new(&fx, "orders", "orders.toml", &["--updated-at", "shipped_at", "--force"]);
    assert_code(&out, 0, "new --updated-at");
    let toml = generated(&fx, "orders.toml");
    assert!(toml.contains("updated_at = \"shipped_at\""), "{toml}");
    runs_twice(&fx, "orders.toml", 2);
}

/// `updated_at`, `modified_at` and `created_at` (issue 17): the change column is picked,
/// and the others are not tracked silently: the other change time is carried as Type 1
/// (so a touch opens no version), the creation time stays tracked with a comment, and
/// both are said in the file and in the output.
async fn new_with_other_change_and_creation_times_says_what_it_did_with_them(mut fx: Fixture) {
    let t = tstz(&fx);
    let ddl = format!(
        "CREATE TABLE accounts (account_id bigint PRIMARY KEY, plan text, updated_at {t} NOT NULL, modified_at {t}, created_at {t})"
    );
    fx.exec(&ddl).await;
    fx.exec(
        "INSERT INTO accounts VALUES
             (1, 'free', '2026-10-01T09:00:00Z', '2026-10-01T09:00:00Z', '2026-09-01T09:00:00Z'),
             (2, 'pro', '2026-10-01T10:00:00Z', '2026-10-01T10:00:00Z', '2026-09-02T09:00:00Z')",
    )
    .await;
    let out = new(&fx, "accounts", "accounts.toml", &["--json"]);
    assert_code(&out, 0, "new");
    let report = json(&out, "new --json");
    assert_eq!(report["updated_at"], "updated_at", "{report}");
    assert_eq!(
        report["tracked_columns"],
        serde_json::json!(["plan", "created_at"]),
        "{report}"
    );
    assert_eq!(report["type1_columns"], serde_json::json!(["modified_at"]), "{report}");
    let toml = generated(&fx, "accounts.toml");
    for said in [
        "\"created_at\",",
        "a creation time, it never changes",
        "modified_at: named like change times too",
        "type1 = [",
    ] {
        assert!(toml.contains(said), "{said:?} missing from:\n{toml}");
    }
    let out = new(&fx, "accounts", "accounts.toml", &["--force"]);
    assert_code(&out, 0, "new");
    assert!(
        text(&out.stderr).contains("`modified_at` look like change times too"),
        "{}",
        text(&out.stderr)
    );
    runs_twice(&fx, "accounts.toml", 2);
    // A touch moves the change times and nothing else: no version.
    fx.exec("UPDATE accounts SET updated_at = '2026-10-05T09:00:00Z', modified_at = '2026-10-05T09:00:00Z' WHERE account_id = 1")
        .await;
    let run = run_generated(&fx, "accounts.toml", &["run", "--json", "--upper", UPPER]);
    assert_code(&run, 0, "a run after a touch");
    let run = json(&run, "run --json");
    assert_eq!(run["versions"], 0, "{run}");
}

async fn new_on_a_timestamp_without_time_zone_asks_for_the_zone(mut fx: Fixture) {
    let t = match fx.backend {
        Backend::Sqlite => "TEXT",
        Backend::Postgres | Backend::Citus => "timestamp",
    };
    let ddl = format!("CREATE TABLE accounts (id integer PRIMARY KEY, plan text, last_modified {t} NOT NULL)");
    fx.exec(&ddl).await;
    fx.exec("INSERT INTO accounts VALUES (1, 'free', '2026-10-01 09:00:00'), (2, 'team', '2026-10-01 10:00:00')")
        .await;
    // No guess: the zone is a decision (exit 2, a TODO naming --timezone).
    let out = new(&fx, "accounts", "accounts.toml", &[]);
    assert_code(&out, 2, "new without --timezone");
    let toml = generated(&fx, "accounts.toml");
    assert!(toml.contains("timezone = \"TODO_zone\""), "{toml}");
    // With a placeholder that reads as one, not a letter that reads as a value.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("rerun with --timezone ZONE --force"),
        "{out:?}"
    );
    let out = new(&fx, "accounts", "accounts.toml", &["--timezone", "UTC", "--force"]);
    assert_code(&out, 0, "new --timezone UTC");
    let toml = generated(&fx, "accounts.toml");
    assert!(toml.contains("updated_at = \"last_modified\""), "{toml}");
    assert!(toml.contains("timezone = \"UTC\""), "{toml}");
    assert_snapshot(
        &format!("new__no_time_zone__{}", backend_name(&fx)),
        "dimlog new on a change column without a time zone",
        &toml,
    );
    runs_twice(&fx, "accounts.toml", 2);
}

/// The PostgreSQL-to-PostgreSQL recipe: `new --target-url`, then schema-qualified log and
/// dimension names; run, rebuild, verify and history all work on them.
#[tokio::test]
async fn new_with_a_postgres_target_and_schema_qualified_tables() {
    let mut fx = Fixture::postgres().await;
    fx.exec(
        "CREATE SCHEMA marts; CREATE SCHEMA dl;
         INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'pro', 'FR', '2026-10-01T09:00:00Z')",
    )
    .await;
    let url = fx.source_url.clone();
    let out = new(&fx, "public.src_customers", "pg.toml", &["--target-url", url.as_str()]);
    assert_code(&out, 0, "new --target-url");
    let path = fx.dir().join("pg.toml");
    let toml = std::fs::read_to_string(&path).expect("the generated config");
    assert!(toml.contains("table = \"public.src_customers\""), "{toml}");
    assert!(toml.contains("name = \"src_customers\""), "{toml}");
    let toml = toml
        .replace("log = \"src_customers_versions\"", "log = \"dl.customer_versions\"")
        .replace(
            "dimension = \"dim_src_customers\"",
            "dimension = \"marts.dim_customer\"",
        );
    std::fs::write(&path, toml).expect("write");
    runs_twice(&fx, "pg.toml", 1);
    fx.exec("UPDATE src_customers SET tier = 'basic', updated_at = '2026-10-02T09:00:00Z'")
        .await;
    let run = run_generated(&fx, "pg.toml", &["run", "--upper", UPPER]);
    assert_code(&run, 0, "run");
    for args in [&["rebuild"][..], &["verify", "--against-source"][..]] {
        let out = run_generated(&fx, "pg.toml", args);
        assert_code(&out, 0, &args.join(" "));
    }
    let history = run_generated(&fx, "pg.toml", &["--json", "history", "--key", "1"]);
    assert_code(&history, 0, "history");
    assert_eq!(json(&history, "history")["versions"].as_array().map(Vec::len), Some(2));
    let rows = fx
        .target_query("SELECT count(*)::text FROM marts.dim_customer WHERE is_current")
        .await;
    assert_eq!(rows[0][0].as_deref(), Some("1"));
}

/// `dimlog new` takes a key only when the data agrees that it is one (issue 14, item 11):
/// an `id` (or `<table>_id`) column with a repeated or a NULL value is no key, nor on
/// SQLite a primary key holding NULLs (SQLite allows them in any primary key but an
/// INTEGER PRIMARY KEY). Each case either names the unique column it picked or leaves a
/// TODO naming what was not unique, and exits 2; what it picks loads.
async fn new_picks_only_a_key_that_is_unique_in_the_data(mut fx: Fixture) {
    let ts = tstz(&fx);
    // (columns, rows, the key it may pick, or None)
    let mut cases: Vec<(String, &str, Option<&str>)> = vec![
        (
            format!("id bigint, name text, updated_at {ts}"),
            "(1, 'a', '2026-10-01T09:00:00Z'), (1, 'b', '2026-10-01T09:30:00Z')",
            None,
        ),
        (
            format!("id bigint, name text, updated_at {ts}"),
            "(1, 'a', '2026-10-01T09:00:00Z'), (NULL, 'b', '2026-10-01T09:30:00Z')",
            None,
        ),
        (
            format!("id bigint, t_id bigint, name text, updated_at {ts}"),
            "(1, 7, 'a', '2026-10-01T09:00:00Z'), (1, 8, 'b', '2026-10-01T09:30:00Z')",
            Some("t_id"),
        ),
        (
            format!("id bigint, name text, updated_at {ts}"),
            "(1, 'a', '2026-10-01T09:00:00Z'), (2, 'b', '2026-10-01T09:30:00Z')",
            Some("id"),
        ),
    ];
    if fx.backend == Backend::Sqlite {
        cases.extend([
            (
                format!("id text PRIMARY KEY, name text, updated_at {ts}"),
                "(NULL, 'a', '2026-10-01T09:00:00Z'), (NULL, 'b', '2026-10-01T09:30:00Z')",
                None,
            ),
            (
                format!("a text, b text, name text, updated_at {ts}, PRIMARY KEY (a, b)"),
                "('x', NULL, 'a', '2026-10-01T09:00:00Z'), ('x', NULL, 'b', '2026-10-01T09:30:00Z')",
                None,
            ),
            (
                format!("code text PRIMARY KEY, t_id bigint, name text, updated_at {ts}"),
                "(NULL, 1, 'a', '2026-10-01T09:00:00Z'), (NULL, 2, 'b', '2026-10-01T09:30:00Z')",
                Some("t_id"),
            ),
            (
                format!("code text PRIMARY KEY, name text, updated_at {ts}"),
                "('p', 'a', '2026-10-01T09:00:00Z'), ('q', 'b', '2026-10-01T09:30:00Z')",
                Some("code"),
            ),
        ]);
    }
    for (i, (columns, rows, want)) in cases.into_iter().enumerate() {
        fx.exec(&format!(
            "DROP TABLE IF EXISTS t; CREATE TABLE t ({columns}); INSERT INTO t VALUES {rows}"
        ))
        .await;
        let out_name = format!("t{i}.toml");
        let out = new(&fx, "t", &out_name, &["--json"]);
        let report = json(&out, "new --json");
        let toml = generated(&fx, &out_name);
        match want {
            Some(key) => {
                assert_code(&out, 0, &columns);
                assert_eq!(report["key"], serde_json::json!([key]), "{columns}: {toml}");
                let run = run_generated(&fx, &out_name, &["run", "--json", "--upper", UPPER]);
                assert_code(&run, 0, &columns);
                assert_eq!(json(&run, "run")["versions"], 2, "{columns}");
                let _ = std::fs::remove_file(fx.dir().join("warehouse.db"));
                if fx.backend == Backend::Postgres {
                    fx.exec("DROP TABLE IF EXISTS t_versions, dim_t, dimlog_state, dimlog_runs, dimlog_dimensions")
                        .await;
                }
            }
            None => {
                assert_code(&out, 2, &columns);
                assert!(toml.contains("key = [\"TODO_natural_key\"]"), "{columns}: {toml}");
                assert!(toml.contains("not unique"), "{columns}: {toml}");
            }
        }
    }
}

/// A key named `Cust No` and a change column named `Last Modified` (issue 20, item 13):
/// `new` reads the table through `source.query`, renaming them to plain names, says
/// ready, and the config runs unedited.
async fn new_with_odd_names_reads_them_renamed(mut fx: Fixture) {
    fx.exec(&format!(
        "CREATE TABLE odd_customers (\"Cust No\" integer PRIMARY KEY, email text, \"Last Modified\" {} NOT NULL);
         INSERT INTO odd_customers VALUES (1, 'ann@example.com', '2026-10-01T09:00:00Z'), (2, 'bob@example.com', '2026-10-01T10:00:00Z')",
        tstz(&fx)
    ))
    .await;
    let out = new(&fx, "odd_customers", "odd.toml", &["--json"]);
    assert_code(&out, 0, "new on odd names");
    let report = json(&out, "new --json");
    assert_eq!(report["key"], serde_json::json!(["cust_no"]), "{report}");
    assert_eq!(report["updated_at"], "last_modified", "{report}");
    assert_eq!(report["ready"], true, "{report}");
    let toml = generated(&fx, "odd.toml");
    assert!(toml.contains("query = "), "{toml}");
    runs_twice(&fx, "odd.toml", 2);
}

/// A parent table of plain inheritance with a primary key (issue 20, item 13): its key
/// does not cover the rows of the tables inheriting from it, which a read includes, and
/// `new` says so (naming them) instead of reporting that the table has no primary key.
#[tokio::test]
async fn new_on_an_inheritance_parent_names_the_children() {
    let mut fx = Fixture::postgres().await;
    fx.exec(
        "CREATE TABLE inh_parent (customer_id integer PRIMARY KEY, email text, updated_at timestamptz NOT NULL);
         CREATE TABLE inh_archive () INHERITS (inh_parent);
         INSERT INTO inh_parent VALUES (1, 'ann@example.com', '2026-10-01T09:00:00Z');
         INSERT INTO inh_archive VALUES (1, 'old@example.com', '2026-09-01T09:00:00Z')",
    )
    .await;
    let out = new(&fx, "inh_parent", "inh.toml", &["--json"]);
    assert_code(&out, 2, "new on an inheritance parent");
    let report = json(&out, "new --json");
    let message = report["todo"][0]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("inh_archive"), "{report}");
    assert!(message.contains("inherit"), "{report}");
    assert!(!message.contains("has no primary key"), "{report}");
    assert!(message.contains("ONLY"), "{report}");
}

/// A change column kept as text or as a number on PostgreSQL (a trial's table): `new`
/// names it and its type and says to cast it in `source.query`, instead of "no timestamp
/// column", and `--updated-at` naming it is refused before a config `run` would refuse
/// is written.
#[tokio::test]
async fn new_names_a_change_column_that_is_not_a_timestamp() {
    let mut fx = Fixture::postgres().await;
    for (table, kind, value) in [
        ("text_stamped", "text", "'2026-10-01T09:00:00Z'"),
        ("epoch_stamped", "bigint", "1790000000"),
    ] {
        fx.exec(&format!(
            "CREATE TABLE {table} (id integer PRIMARY KEY, email text, updated_at {kind});
             INSERT INTO {table} VALUES (1, 'ann@example.com', {value})"
        ))
        .await;
        let out = new(&fx, table, &format!("{table}.toml"), &["--json"]);
        assert_code(&out, 2, "new on a table whose change column is not a timestamp");
        let report = json(&out, "new --json");
        let message = report["todo"][0]["message"].as_str().unwrap_or_default().to_string();
        for words in ["`updated_at`", kind, "source.query", "\"updated_at\"::timestamptz"] {
            assert!(message.contains(words), "the message must say {words}: {report}");
        }

        let out_file = format!("{table}_flag.toml");
        let out = new(&fx, table, &out_file, &["--updated-at", "updated_at"]);
        assert_code(&out, 2, "new --updated-at naming a column that is not a timestamp");
        let stderr = text(&out.stderr);
        for words in ["--updated-at updated_at", kind, "not a timestamp", "source.query"] {
            assert!(stderr.contains(words), "the error must say {words}: {stderr}");
        }
        assert!(
            !fx.dir().join(&out_file).exists(),
            "a config run would refuse was written"
        );
    }
}

/// Columns whose names differ only in case (`Email`, `email`, `EMAIL`: PostgreSQL keeps
/// them apart, dimlog and SQLite do not): `new` reads all but the first renamed, and the
/// config runs as written, every column tracked (a trial's config was refused by `run`).
/// A config written by hand that names two of them is told why, and how to rename one.
#[tokio::test]
async fn new_renames_columns_that_differ_only_in_case() {
    let mut fx = Fixture::postgres().await;
    fx.exec(
        "CREATE TABLE cased (id integer PRIMARY KEY, \"Email\" text, email text, \"EMAIL\" text, \"Id\" integer, updated_at timestamptz NOT NULL);
         INSERT INTO cased VALUES (1, 'A@x', 'a@x', 'A@X', 10, '2026-10-01T09:00:00Z'), (2, 'B@x', 'b@x', 'B@X', 20, '2026-10-01T10:00:00Z')",
    )
    .await;
    let out = new(&fx, "cased", "cased.toml", &["--json"]);
    assert_code(&out, 0, "new on names that differ only in case");
    let report = json(&out, "new --json");
    assert_eq!(report["ready"], true, "{report}");
    let tracked: Vec<String> = report["tracked_columns"]
        .as_array()
        .expect("tracked columns")
        .iter()
        .map(|c| c.as_str().unwrap_or_default().to_lowercase())
        .collect();
    let mut distinct = tracked.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!((tracked.len(), distinct.len()), (4, 4), "{report}");
    runs_twice(&fx, "cased.toml", 2);

    let by_hand = format!(
        r#"name = "cased"

[source]
url = "{url}"
table = "cased"
key = ["id"]
updated_at = "updated_at"

[target]
url = "{url}"
log = "cased_versions"
dimension = "dim_cased"
surrogate_key = "cased_sk"

[track]
columns = ["Email", "email"]
"#,
        url = fx.source_url
    );
    std::fs::write(fx.dir().join("by_hand.toml"), by_hand).expect("write");
    let out = dimlog(fx.dir(), &["--config", "by_hand.toml", "run", "--upper", UPPER]);
    assert_code(&out, 2, "a config naming two columns that differ only in case");
    let stderr = text(&out.stderr);
    for words in ["`Email`", "`email`", "differ only in case", "source.query"] {
        assert!(stderr.contains(words), "the error must say {words}: {stderr}");
    }
}
