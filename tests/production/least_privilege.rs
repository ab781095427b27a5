//! Issue 20, item 7: least privilege on PostgreSQL. An owner role runs `dimlog init` once;
//! a `dimlog_loader` role that owns nothing, with only the GRANTs of
//! `docs/recipes/postgres-to-postgres.md`, runs every load (a first load, an incremental
//! run with changes, a hard-delete reconcile) and every other command; no DDL on dimlog's
//! tables is left on that path. A role missing one of those grants is told which table
//! and which GRANT, before anything is written.

use super::{cli_exits, database, text};
use crate::support::fixture::Fixture;

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

/// `fx`'s URL with `role` as its user (the test cluster trusts local roles).
pub(crate) fn url_as(fx: &Fixture, role: &str) -> String {
    let mut url = url::Url::parse(&fx.target_url).expect("url");
    url.set_username(role).expect("user");
    url.set_password(None).expect("password");
    url.into()
}

/// Points both the source and the target of the config at `url`.
pub(crate) fn connect_as(fx: &mut Fixture, url: &str) {
    let text = fx.config().to_string();
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("url = ") {
            out.push(format!("url = \"{url}\""));
        } else {
            out.push(line.to_string());
        }
    }
    fx.set_config(out.join("\n") + "\n");
}

/// The grants of the recipe for the loader, as the owner (or a superuser) runs them.
pub(crate) fn documented_grants(loader: &str) -> String {
    format!(
        "GRANT USAGE ON SCHEMA dimlog, marts TO \"{loader}\";
         GRANT SELECT ON public.src_customers TO \"{loader}\";
         GRANT SELECT, INSERT ON dimlog.customer_versions TO \"{loader}\";
         GRANT SELECT, INSERT, UPDATE, DELETE ON marts.dim_customer TO \"{loader}\";
         GRANT SELECT, INSERT, UPDATE ON dimlog.dimlog_state, dimlog.dimlog_runs TO \"{loader}\";
         GRANT SELECT, UPDATE ON dimlog.dimlog_dimensions TO \"{loader}\";
         GRANT SELECT, INSERT, UPDATE ON dimlog.dimlog_assigned TO \"{loader}\""
    )
}

/// An owner role (owning the schemas `dimlog` and `marts`) and a loader role that owns
/// nothing; the owner has run `init` with the config pointing at `dimlog.customer_versions`
/// and `marts.dim_customer`. Returns (owner, loader) role names.
async fn initialised(fx: &mut Fixture) -> (String, String) {
    let db = database(fx);
    let (owner, loader) = (format!("{db}_owner"), format!("{db}_loader"));
    fx.target_exec(&format!(
        "CREATE ROLE \"{owner}\" LOGIN; CREATE ROLE \"{loader}\" LOGIN;
         CREATE SCHEMA dimlog AUTHORIZATION \"{owner}\"; CREATE SCHEMA marts AUTHORIZATION \"{owner}\";
         GRANT SELECT ON src_customers TO \"{owner}\""
    ))
    .await;
    fx.set_setting("log", "\"dimlog.customer_versions\"");
    fx.set_setting("dimension", "\"marts.dim_customer\"");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cy@example.com', 'pro', 'IT', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let owner_url = url_as(fx, &owner);
    connect_as(fx, &owner_url);
    cli_exits(fx, &["init"], 0);
    (owner, loader)
}

/// The tables of the target that `role` owns (temporary ones included).
async fn owned_by(fx: &mut Fixture, role: &str) -> i64 {
    let rows = fx
        .target_query(&format!(
            "SELECT count(*)::text FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles WHERE rolname = '{role}')"
        ))
        .await;
    rows[0][0].as_deref().unwrap_or("0").parse().expect("a count")
}

/// Every command of a nightly job, as a role that owns nothing and has the documented
/// grants only.
#[tokio::test]
async fn a_role_with_the_documented_grants_runs_every_command() {
    let mut fx = Fixture::postgres().await;
    let (_, loader) = initialised(&mut fx).await;
    fx.target_exec(&documented_grants(&loader)).await;
    fx.target_exec(&format!(
        "CREATE TABLE public.facts (customer_id bigint, sold_at timestamptz, customer_sk bigint);
         INSERT INTO public.facts VALUES (1, '2026-03-02T09:30:00Z', NULL), (9, '2026-03-02T09:30:00Z', NULL);
         GRANT SELECT, UPDATE ON public.facts TO \"{loader}\""
    ))
    .await;
    let loader_url = url_as(&fx, &loader);
    connect_as(&mut fx, &loader_url);

    // The first load (straight into the log, PostgreSQL to PostgreSQL).
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    assert_eq!(fx.count("marts.dim_customer").await, 3);
    // An incremental run with a change and a new key.
    fx.exec(&format!(
        "UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T10:30:00Z' WHERE customer_id = 1;
         {INSERT} (4, 'dee@example.com', 'free', 'ES', '2026-03-02T10:30:00Z')"
    ))
    .await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 0);
    assert_eq!(fx.count("marts.dim_customer").await, 5);
    // A hard delete, reconciled.
    fx.exec("DELETE FROM src_customers WHERE customer_id = 2").await;
    cli_exits(
        &fx,
        &[
            "run",
            "--upper",
            "2026-03-02T12:00:00Z",
            "--reconcile-deletes",
            "--allow-mass-delete",
        ],
        0,
    );
    let current = fx
        .target_query("SELECT count(*)::text FROM marts.dim_customer WHERE is_current")
        .await;
    assert_eq!(current[0][0].as_deref(), Some("3"), "key 2 closed");

    cli_exits(&fx, &["status"], 0);
    cli_exits(&fx, &["verify"], 0);
    cli_exits(&fx, &["verify", "--against-source"], 0);
    cli_exits(&fx, &["history", "--key", "1"], 0);
    let out = fx.cli(&["lookup", "--key", "1", "--at", "2026-03-02T10:45:00Z"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    cli_exits(
        &fx,
        &[
            "assign-keys",
            "--facts",
            "public.facts",
            "--key-column",
            "customer_id",
            "--at-column",
            "sold_at",
            "--sk-column",
            "customer_sk",
        ],
        0,
    );
    let assigned = fx
        .target_query("SELECT customer_id::text, customer_sk::text FROM public.facts ORDER BY 1")
        .await;
    assert_eq!(assigned[0][1].as_deref(), Some("1"));
    assert_eq!(assigned[1][1].as_deref(), Some("-1"));
    cli_exits(&fx, &["rebuild"], 0);
    cli_exits(&fx, &["verify"], 0);
    assert_eq!(owned_by(&mut fx, &loader).await, 0, "the loader owns nothing");
}

/// A loader without INSERT on the log, or without USAGE on the dimension's schema, is
/// told which table or schema and the GRANT to run; nothing is written.
#[tokio::test]
async fn a_missing_grant_names_the_table_and_the_grant() {
    let mut fx = Fixture::postgres().await;
    let (_, loader) = initialised(&mut fx).await;
    fx.target_exec(&documented_grants(&loader)).await;
    fx.target_exec(&format!("REVOKE INSERT ON dimlog.customer_versions FROM \"{loader}\""))
        .await;
    let loader_url = url_as(&fx, &loader);
    connect_as(&mut fx, &loader_url);
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 1);
    assert!(
        stderr.contains(&format!("GRANT INSERT ON dimlog.customer_versions TO {loader}")),
        "{stderr}"
    );
    assert_eq!(fx.count("dimlog.dimlog_runs").await, 0, "nothing written");
    assert!(!stderr.contains("must be owner"), "{stderr}");

    fx.target_exec(&format!(
        "GRANT INSERT ON dimlog.customer_versions TO \"{loader}\"; REVOKE USAGE ON SCHEMA marts FROM \"{loader}\""
    ))
    .await;
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 1);
    assert!(
        stderr.contains(&format!("GRANT USAGE ON SCHEMA marts TO {loader}")),
        "{stderr}"
    );
    let stderr = cli_exits(&fx, &["status"], 1);
    assert!(
        stderr.contains(&format!("GRANT USAGE ON SCHEMA marts TO {loader}")),
        "{stderr}"
    );
}

/// A source role without SELECT on the source table is told to GRANT SELECT to the role
/// of `source.url`, not write rights to the target's role.
#[tokio::test]
async fn a_source_without_select_names_the_source_grant() {
    let mut fx = Fixture::postgres().await;
    let (_, loader) = initialised(&mut fx).await;
    fx.target_exec(&documented_grants(&loader)).await;
    fx.target_exec(&format!("REVOKE SELECT ON public.src_customers FROM \"{loader}\""))
        .await;
    let loader_url = url_as(&fx, &loader);
    connect_as(&mut fx, &loader_url);
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 1);
    assert!(
        stderr.contains("GRANT SELECT ON src_customers TO the role of source.url"),
        "{stderr}"
    );
    assert!(!stderr.contains("INSERT"), "{stderr}");
    // `doctor` says so at the source table (the catalog shows its columns to the role
    // all the same), not at a later check that happens to read rows.
    let out = fx.cli(&["doctor"]);
    assert_ne!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("FAIL  source table: ") && stdout.contains("permission denied for table src_customers"),
        "{stdout}"
    );
    // The same through `source.query` (as `dimlog new` writes for names that need
    // quoting): a missing right, exit 1 with the GRANT, not a config error (exit 2) that
    // tells a scheduler retries cannot help (found by an outside trial).
    fx.edit_config(
        "table = \"src_customers\"\n",
        "query = \"SELECT customer_id, email, tier, country, is_deleted, updated_at FROM src_customers\"\n",
    );
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 1);
    assert!(
        stderr.contains("GRANT SELECT ON src_customers TO the role of source.url"),
        "{stderr}"
    );
    // The GRANT the hint gives runs as it is, whatever the table's name needs (quotes for
    // capitals, spaces, a quote: an outside trial was given `GRANT SELECT ON Accounts`,
    // which names another table).
    for (i, name) in ["Accounts", "my customers", "we\"ird", "select"]
        .into_iter()
        .enumerate()
    {
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        fx.exec(&format!("CREATE TABLE {quoted} AS SELECT * FROM src_customers"))
            .await;
        read_through_query(&mut fx, &quoted);
        let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 1);
        let grant = stderr
            .split("GRANT SELECT ON ")
            .nth(1)
            .and_then(|rest| rest.split(" TO the role of source.url").next())
            .unwrap_or_else(|| panic!("{name:?}: no GRANT in {stderr}"));
        assert_eq!(grant, quoted, "{name:?}: {stderr}");
        fx.exec(&format!("GRANT SELECT ON {grant} TO \"{loader}\"")).await;
        let upper = format!("2026-03-02T1{}:00:00Z", i + 1);
        cli_exits(&fx, &["run", "--upper", &upper], 0);
    }
    // A source schema the role may not use is the source's USAGE to grant, not the
    // target's CREATE (found by a trial), whatever the schema's name.
    for schema in ["crm", "Sales Data"] {
        let quoted = format!("\"{schema}\"");
        fx.exec(&format!(
            "CREATE SCHEMA {quoted}; CREATE TABLE {quoted}.items AS SELECT * FROM src_customers"
        ))
        .await;
        read_through_query(&mut fx, &format!("{quoted}.items"));
        let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T16:00:00Z"], 1);
        let grant = format!(
            "GRANT USAGE ON SCHEMA {} TO the role of source.url",
            if schema == "crm" { "crm" } else { quoted.as_str() }
        );
        assert!(stderr.contains(&grant), "{schema}: {stderr}");
        assert!(!stderr.contains("CREATE"), "{schema}: {stderr}");
    }
}

/// SELECT granted on some of the source's columns only (a role that may read the key and
/// the change column, not the rest): whichever column is missing, and on every read (the
/// first load, an incremental run, a reconciliation of hard deletes), the run is told to
/// GRANT SELECT on the missing column, named, to the role of `source.url`, never to grant write
/// rights on the source to the target's role (a trial was, after a column-level REVOKE),
/// and nothing is written. `doctor` fails on it too.
#[tokio::test]
async fn a_source_readable_in_part_names_the_source_grant() {
    let mut fx = Fixture::postgres().await;
    let (_, loader) = initialised(&mut fx).await;
    fx.target_exec(&documented_grants(&loader)).await;
    let loader_url = url_as(&fx, &loader);
    connect_as(&mut fx, &loader_url);
    let columns = ["customer_id", "email", "tier", "country", "is_deleted", "updated_at"];
    let reads: [(&str, &[&str]); 3] = [
        ("a first load", &["run", "--upper", "2026-03-02T10:00:00Z"]),
        ("an incremental run", &["run", "--upper", "2026-03-02T11:00:00Z"]),
        (
            "a reconciliation",
            &["run", "--upper", "2026-03-02T11:00:00Z", "--reconcile-deletes"],
        ),
    ];
    for (i, (what, args)) in reads.into_iter().enumerate() {
        if i == 1 {
            // Loaded once, with every right, for the incremental reads.
            cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
            fx.exec(
                "UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T10:30:00Z' WHERE customer_id = 1",
            )
            .await;
        }
        let log_before = fx.count("dimlog.customer_versions").await;
        for missing in columns {
            let readable: Vec<&str> = columns.iter().copied().filter(|c| *c != missing).collect();
            fx.target_exec(&format!(
                "REVOKE SELECT ON public.src_customers FROM \"{loader}\";
                 GRANT SELECT ({}) ON public.src_customers TO \"{loader}\"",
                readable.join(", ")
            ))
            .await;
            let stderr = cli_exits(&fx, args, 1);
            assert!(
                stderr.contains(&format!(
                    "GRANT SELECT ({missing}) ON src_customers TO the role of source.url"
                )),
                "{what}, SELECT on all but {missing}: {stderr}"
            );
            assert!(
                !stderr.contains("INSERT") && !stderr.contains("target.url"),
                "{what}, SELECT on all but {missing}: {stderr}"
            );
            if i == 0 {
                let out = fx.cli(&["doctor"]);
                assert_eq!(out.status.code(), Some(1), "doctor, SELECT on all but {missing}");
                let stdout = text(&out.stdout);
                assert!(
                    stdout.contains("FAIL  source table: ") && stdout.contains(&format!("column(s) {missing} of")),
                    "doctor, SELECT on all but {missing}: {stdout}"
                );
            }
        }
        assert_eq!(
            fx.count("dimlog.customer_versions").await,
            log_before,
            "{what}: nothing logged"
        );
        fx.target_exec(&format!("GRANT SELECT ON public.src_customers TO \"{loader}\""))
            .await;
    }
    cli_exits(
        &fx,
        &["run", "--upper", "2026-03-02T11:00:00Z", "--reconcile-deletes"],
        0,
    );
}

/// Points the config's `source.query` at the customers' columns of `from` (SQL text).
fn read_through_query(fx: &mut Fixture, from: &str) {
    let text = fx.config().to_string();
    let query = text
        .lines()
        .find(|l| l.starts_with("query = "))
        .expect("a query")
        .to_string();
    let wanted = format!("SELECT customer_id, email, tier, country, is_deleted, updated_at FROM {from}");
    fx.edit_config(&query, &format!("query = {}", toml::Value::String(wanted)));
}

/// Before `init`, a loader that may not create tables is told to have the owner run
/// `dimlog init`, instead of a bare "permission denied".
#[tokio::test]
async fn a_loader_before_init_is_sent_to_init() {
    let mut fx = Fixture::postgres().await;
    let db = database(&fx);
    let loader = format!("{db}_loader");
    fx.target_exec(&format!(
        "CREATE ROLE \"{loader}\" LOGIN; CREATE SCHEMA dimlog; CREATE SCHEMA marts;
         GRANT USAGE ON SCHEMA dimlog, marts TO \"{loader}\"; GRANT SELECT ON src_customers TO \"{loader}\""
    ))
    .await;
    fx.set_setting("log", "\"dimlog.customer_versions\"");
    fx.set_setting("dimension", "\"marts.dim_customer\"");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let loader_url = url_as(&fx, &loader);
    connect_as(&mut fx, &loader_url);
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 1);
    assert!(stderr.contains("dimlog init"), "{stderr}");
    assert!(
        stderr.contains(&format!("GRANT CREATE ON SCHEMA dimlog TO {loader}")),
        "{stderr}"
    );
}

/// A second dimension in a target where an owner initialised another: the loader may
/// create its tables (CREATE on both schemas) and has the recipe's grants, but the first
/// load registers the dimension, an INSERT into `dimlog_dimensions` the recipe does not
/// grant (an owner's `dimlog init` does it). `doctor` and the run name that GRANT before
/// anything is written (doctor said the rights were fine, and the run failed registering).
#[tokio::test]
async fn a_loader_registering_a_dimension_is_told_the_grant() {
    let mut fx = Fixture::postgres().await;
    let (_, loader) = initialised(&mut fx).await;
    fx.target_exec(&documented_grants(&loader)).await;
    fx.target_exec(&format!("GRANT CREATE ON SCHEMA dimlog, marts TO \"{loader}\""))
        .await;
    fx.set_setting("name", "\"customer_b\"");
    fx.set_setting("log", "\"dimlog.b_versions\"");
    fx.set_setting("dimension", "\"marts.dim_b\"");
    fx.set_setting("surrogate_key", "\"b_sk\"");
    let loader_url = url_as(&fx, &loader);
    connect_as(&mut fx, &loader_url);
    let grant = format!("GRANT INSERT ON dimlog.dimlog_dimensions TO {loader}");
    let out = fx.cli(&["doctor"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains(&grant), "{}", text(&out.stdout));
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 1);
    assert!(stderr.contains(&grant), "{stderr}");
    assert!(
        !fx.target_has_table("dimlog.b_versions").await,
        "a refused run made tables"
    );
    fx.target_exec(&format!("GRANT INSERT ON dimlog.dimlog_dimensions TO \"{loader}\""))
        .await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
}

/// A widened source column needs its tables' columns widened, which only their owner
/// may do: a loader that owns nothing is told so (kind `database`, the ownership hint),
/// never that another run holds the lock (found by an outside trial: PostgreSQL's
/// SQLSTATE 42501 was read as SQLite's "busy" code, and cron would have retried forever).
#[tokio::test]
async fn a_widening_the_loader_may_not_make_is_named_not_taken_for_a_lock() {
    let mut fx = Fixture::postgres().await;
    fx.exec("ALTER TABLE src_customers ALTER COLUMN email TYPE varchar(40)")
        .await;
    let (_, loader) = initialised(&mut fx).await;
    fx.target_exec(&documented_grants(&loader)).await;
    let loader_url = url_as(&fx, &loader);
    connect_as(&mut fx, &loader_url);
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    fx.exec("ALTER TABLE src_customers ALTER COLUMN email TYPE varchar(80)")
        .await;
    let out = fx.cli(&["run", "--json", "--upper", "2026-03-02T10:00:00Z"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).expect("one JSON object");
    assert_eq!(v["error"]["kind"], "database", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap_or("").contains("must be owner"),
        "{v}"
    );
    assert!(v["error"]["hint"].as_str().unwrap_or("").contains("ownership"), "{v}");
}

/// A change of the `[track]` lists, as the loader accepts it: one that alters the log's
/// or the dimension's columns is refused up front, naming the owner, with nothing
/// written (it used to fail half-way, on the first `ALTER TABLE`); one that only rewrites
/// rows (reordered columns, a column moved between Type 2 and Type 1) goes through; and
/// after the owner has accepted an altering change, the loader loads as before.
#[tokio::test]
async fn a_loader_is_sent_to_the_owner_for_a_change_that_alters_the_tables() {
    let mut fx = Fixture::postgres().await;
    fx.exec("ALTER TABLE src_customers ADD COLUMN segment text, ADD COLUMN name text")
        .await;
    let (owner, loader) = initialised(&mut fx).await;
    fx.target_exec(&documented_grants(&loader)).await;
    let (owner_url, loader_url) = (url_as(&fx, &owner), url_as(&fx, &loader));
    connect_as(&mut fx, &loader_url);
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    let columns_of = async |fx: &mut Fixture, table: &str| {
        fx.target_query(&format!(
            "SELECT string_agg(attname::text, ',' ORDER BY attnum) FROM pg_attribute \
             WHERE attrelid = '{table}'::regclass AND attnum > 0 AND NOT attisdropped"
        ))
        .await[0][0]
            .clone()
            .unwrap_or_default()
    };
    let accept = [
        "run",
        "--json",
        "--accept-config-change",
        "--upper",
        "2026-03-02T10:00:00Z",
    ];
    // (columns, type1, current_columns, whether accepting it alters the tables, the log too)
    let changes = [
        (r#"["tier", "email", "country"]"#, "[]", "[]", false, false),
        (r#"["tier", "email"]"#, r#"["country"]"#, "[]", false, false),
        (r#"["tier", "email", "segment"]"#, r#"["country"]"#, "[]", true, true),
        (r#"["tier", "email"]"#, r#"["country", "name"]"#, "[]", true, true),
        (r#"["tier", "email"]"#, r#"["country"]"#, r#"["tier"]"#, true, false),
        (r#"["tier"]"#, r#"["country"]"#, "[]", true, false),
    ];
    fx.edit_config(
        "columns = [\"email\", \"tier\", \"country\"]",
        "columns = [\"email\", \"tier\", \"country\"]\ntype1 = []\ncurrent_columns = []",
    );
    for (columns, type1, current, alters, alters_log) in changes {
        fx.set_setting("columns", columns);
        fx.set_setting("type1", type1);
        fx.set_setting("current_columns", current);
        let case = format!("columns {columns}, type1 {type1}, current {current}");
        let before = (
            columns_of(&mut fx, "dimlog.customer_versions").await,
            columns_of(&mut fx, "marts.dim_customer").await,
            fx.count("dimlog.dimlog_runs").await,
        );
        // Without accepting it either, the loader is sent to the owner of a change it may
        // not make (rather than told to accept it).
        let refused = fx.cli(&["run", "--json", "--upper", "2026-03-02T10:00:00Z"]);
        let out = fx.cli(&accept);
        if !alters {
            assert_eq!(out.status.code(), Some(0), "{case}: {}", text(&out.stdout));
            continue;
        }
        assert_eq!(out.status.code(), Some(1), "{case}: {}", text(&out.stdout));
        let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).expect("one JSON object");
        let message = v["error"]["message"].as_str().unwrap_or("");
        let owned_by = format!("({owner} does)");
        for needle in [
            "only the owner may",
            &loader,
            &owned_by,
            "marts.dim_customer",
            "Nothing was written",
        ] {
            assert!(message.contains(needle), "{case}: {needle:?} not in {v}");
        }
        assert_eq!(
            message.contains("dimlog.customer_versions"),
            alters_log,
            "{case}: the log is named as altered only if it gains columns: {v}"
        );
        assert!(
            text(&refused.stdout).contains("only the owner may"),
            "{case}, not accepted: {}",
            text(&refused.stdout)
        );
        assert!(
            v["error"]["hint"]
                .as_str()
                .unwrap_or("")
                .contains("as the tables' owner"),
            "{case}: {v}"
        );
        let after = (
            columns_of(&mut fx, "dimlog.customer_versions").await,
            columns_of(&mut fx, "marts.dim_customer").await,
            fx.count("dimlog.dimlog_runs").await,
        );
        assert_eq!(before, after, "{case}: the refused change wrote something");
        connect_as(&mut fx, &owner_url);
        let out = fx.cli(&accept);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{case}, as the owner: {}",
            text(&out.stdout)
        );
        connect_as(&mut fx, &loader_url);
        cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    }
    cli_exits(&fx, &["verify"], 0);
}
