//! Commands that only read the target (spec section 4: `status`, `history`, `lookup`,
//! `verify` without `--against-source`), through the binary, on SQLite and PostgreSQL.
//! They never connect to the source, so a source that is down, deleted or reshaped does
//! not matter to them; they work with read-only rights on the target; and on a target
//! where the dimension was never loaded they say so and create nothing. `assign-keys`
//! writes a fact table of the target and does not need the source either.
//!
//! Every command runs plain and with `--json`; under each condition its exit code and
//! stdout must be exactly what they were with a healthy source and a writable target.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use dimlog::config::Backend;
use dimlog::db::{Access, Conn};

use super::cli::{self, CliOutput};
use crate::support::files;
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(
    target_only_commands_never_touch_the_source,
    target_only_commands_work_with_read_only_rights,
    target_only_commands_on_a_never_loaded_dimension_create_nothing,
    assign_keys_and_rebuild_do_not_need_the_source,
    read_only_connections_refuse_every_write,
);

const FIRST: &str = "2026-03-02T09:30:00Z";

/// Every target-only command, plain and with `--json`.
const COMMANDS: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["history", "--key", "1"],
    &["history", "--key", "1", "--json"],
    &["lookup", "--key", "1", "--at", "2026-03-02T09:10:00Z"],
    &[
        "lookup",
        "--key",
        "customer_id=1",
        "--at",
        "2026-03-02T09:10:00Z",
        "--json",
    ],
    &["verify"],
    &["verify", "--json"],
];

/// Loads two versions of key 1 (surrogate keys 1 and 3, the second from 09:05) and one
/// of key 2 (surrogate key 2) with the binary.
async fn load(fx: &mut Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')",
    )
    .await;
    let out = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-02T09:00:00Z"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T09:05:00Z' WHERE customer_id = 1")
        .await;
    let out = cli::run(&fx.config_path(), &["run", "--upper", FIRST]);
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// Runs every command against `config`.
fn run_all(config: &Path) -> Vec<CliOutput> {
    COMMANDS.iter().map(|args| cli::run(config, args)).collect()
}

/// Each command exits as in `baseline` and prints exactly the same stdout.
fn assert_unchanged(baseline: &[CliOutput], got: &[CliOutput], condition: &str) {
    for ((args, want), got) in COMMANDS.iter().zip(baseline).zip(got) {
        assert_eq!(
            (got.code, &got.stdout),
            (want.code, &want.stdout),
            "`dimlog {}` with {condition}:\n{got:?}\nbaseline:\n{want:?}",
            args.join(" ")
        );
    }
}

/// A PostgreSQL URL where nothing listens.
fn unreachable_url() -> String {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    format!("postgres://dimlog@127.0.0.1:{port}/warehouse")
}

/// Replaces the `url = …` line of `[source]` (or `[target]`) in the fixture's config.
pub fn set_url(fx: &mut Fixture, target: bool, url: &str) {
    let text = fx.config().to_string();
    let section = if target { "[target]" } else { "[source]" };
    let at = text.find(section).expect("section");
    let pos = at + text[at..].find("\nurl = ").expect("url line") + 1;
    let end = pos + text[pos..].find('\n').expect("end of line");
    let mut new = text.clone();
    new.replace_range(pos..end, &format!("url = \"{url}\""));
    fx.set_config(new);
}

async fn target_only_commands_never_touch_the_source(mut fx: Fixture) {
    load(&mut fx).await;
    let baseline = run_all(&fx.config_path());
    for (i, out) in baseline.iter().enumerate() {
        assert_eq!(out.code, Some(0), "`{}`: {out:?}", COMMANDS[i].join(" "));
    }
    let good = fx.config().to_string();

    // A server that is down.
    set_url(&mut fx, false, &unreachable_url());
    assert_unchanged(&baseline, &run_all(&fx.config_path()), "an unreachable source host");
    fx.set_config(good.clone());

    // A SQLite source file that does not exist: not created either.
    let missing = fx.dir().join("none.db");
    set_url(&mut fx, false, &format!("sqlite://{}", missing.display()));
    assert_unchanged(&baseline, &run_all(&fx.config_path()), "a missing source file");
    let made: Vec<String> = files(fx.dir())
        .into_iter()
        .filter(|f| f.starts_with("none.db"))
        .collect();
    assert!(made.is_empty(), "created {made:?}");
    fx.set_config(good.clone());

    // A tracked column dropped at the source, then the whole table.
    fx.exec("ALTER TABLE src_customers DROP COLUMN country").await;
    assert_unchanged(&baseline, &run_all(&fx.config_path()), "a dropped tracked column");
    fx.exec("DROP TABLE src_customers").await;
    assert_unchanged(&baseline, &run_all(&fx.config_path()), "a dropped source table");
}

/// On SQLite: a copy of the loaded target, chmod 0444 (root ignores it, so the test
/// checks instead that the file's bytes and mtime are unchanged and that no `-wal`,
/// `-shm` or `-journal` file is left beside it). On PostgreSQL: a role with only
/// CONNECT, USAGE on the schema and SELECT on the tables (no TEMP either). The source is
/// unreachable meanwhile.
async fn target_only_commands_work_with_read_only_rights(mut fx: Fixture) {
    load(&mut fx).await;
    let baseline = run_all(&fx.config_path());
    set_url(&mut fx, false, &unreachable_url());
    match fx.backend {
        Backend::Sqlite => {
            fx.target_exec("PRAGMA wal_checkpoint(TRUNCATE)").await;
            let dir = fx.dir().join("read-only");
            std::fs::create_dir(&dir).expect("mkdir");
            let copy = dir.join("warehouse.db");
            std::fs::copy(fx.dir().join("warehouse.db"), &copy).expect("copy the target");
            let mut perms = std::fs::metadata(&copy).expect("stat").permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o444);
            std::fs::set_permissions(&copy, perms).expect("chmod 0444");
            let bytes = std::fs::read(&copy).expect("read");
            let mtime = std::fs::metadata(&copy).expect("stat").modified().expect("mtime");
            set_url(&mut fx, true, &format!("sqlite://{}", copy.display()));
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_unchanged(&baseline, &run_all(&fx.config_path()), "a read-only target file");
            assert_eq!(std::fs::read(&copy).expect("read"), bytes, "the target's bytes changed");
            assert_eq!(
                std::fs::metadata(&copy).expect("stat").modified().expect("mtime"),
                mtime,
                "the target's mtime changed"
            );
            // Where the file's permissions let SQLite write (root ignores 0444), the last
            // reader removes SQLite's -wal and -shm as it leaves; a reader that really
            // may only read leaves them (SQLite's way of reading a WAL-mode file).
            let tidy = std::fs::OpenOptions::new().write(true).open(&copy).is_ok();
            if tidy {
                assert_eq!(files(&dir), ["warehouse.db"], "files appeared beside the target");
            }
        }
        Backend::Postgres | Backend::Citus => {
            let reader = read_only_role(&mut fx).await;
            let tables = user_tables(&mut fx).await;
            set_url(&mut fx, true, &reader);
            assert_unchanged(&baseline, &run_all(&fx.config_path()), "a SELECT-only role");
            assert_eq!(user_tables(&mut fx).await, tables, "tables appeared or vanished");
        }
    }
}

/// The tables of the PostgreSQL fixture's `public` schema.
async fn user_tables(fx: &mut Fixture) -> Vec<Option<String>> {
    fx.target_query("SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

/// A login role of the fixture's database that may only connect and read dimlog's
/// tables (PUBLIC's default CONNECT and TEMP on the database are revoked, and CREATE on
/// `public`); returns its URL.
pub async fn read_only_role(fx: &mut Fixture) -> String {
    let url = url::Url::parse(&fx.target_url).expect("url");
    let database = url.path().trim_start_matches('/').to_string();
    let role = format!("{database}_reader");
    fx.target_exec(&format!(
        "CREATE ROLE \"{role}\" LOGIN;
         REVOKE ALL ON DATABASE \"{database}\" FROM PUBLIC;
         REVOKE CREATE ON SCHEMA public FROM PUBLIC;
         GRANT CONNECT ON DATABASE \"{database}\" TO \"{role}\";
         GRANT USAGE ON SCHEMA public TO \"{role}\";
         GRANT SELECT ON ALL TABLES IN SCHEMA public TO \"{role}\""
    ))
    .await;
    let mut reader = url.clone();
    reader.set_username(&role).expect("user");
    reader.set_password(None).expect("password");
    reader.into()
}

/// The error message of a failed command (stderr, or the JSON error with `--json`).
fn error_of(out: &CliOutput, json: bool) -> (String, String) {
    if json {
        let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
        (
            v["error"]["kind"].as_str().unwrap_or_default().to_string(),
            v["error"]["message"].as_str().unwrap_or_default().to_string(),
        )
    } else {
        assert_eq!(out.stdout, "", "{out:?}");
        let line = out.stderr.trim();
        (String::new(), line.strip_prefix("error: ").unwrap_or(line).to_string())
    }
}

/// Every command says the dimension was never loaded (exit 2, kind `not-loaded`), naming
/// what is missing, and that `dimlog run` loads it.
fn assert_not_loaded(config: &Path, what: &str) {
    for args in COMMANDS.iter().copied().chain([&[
        "assign-keys",
        "--facts",
        "facts",
        "--key-column",
        "customer_id",
        "--at-column",
        "at",
        "--sk-column",
        "customer_sk",
    ][..]])
    {
        let out = cli::run(config, args);
        assert_eq!(out.code, Some(2), "`dimlog {}`: {out:?}", args.join(" "));
        let json = args.contains(&"--json");
        let (kind, message) = error_of(&out, json);
        if json {
            assert_eq!(kind, "not-loaded", "{out:?}");
        }
        for part in ["dimension `customer` has not been loaded", what, "`dimlog run`"] {
            assert!(
                message.contains(part),
                "`dimlog {}` does not say {part:?}: {out:?}",
                args.join(" ")
            );
        }
    }
}

async fn target_only_commands_on_a_never_loaded_dimension_create_nothing(mut fx: Fixture) {
    // The source is down as well: it must not even be tried.
    set_url(&mut fx, false, &unreachable_url());
    match fx.backend {
        Backend::Sqlite => {
            // No file at target.url: it stays that way.
            let never: PathBuf = fx.dir().join("never.db");
            set_url(&mut fx, true, &format!("sqlite://{}", never.display()));
            let before = files(fx.dir());
            assert_not_loaded(&fx.config_path(), &never.display().to_string());
            assert_eq!(files(fx.dir()), before, "a file appeared beside the config");
            // An empty file (the fixture's own): no table appears in it.
            let own = fx.target_url.clone();
            set_url(&mut fx, true, &own);
            assert_not_loaded(&fx.config_path(), "no dimlog tables");
            let tables = fx.target_query("SELECT name FROM sqlite_master").await;
            assert!(tables.is_empty(), "tables appeared: {tables:?}");
        }
        Backend::Postgres | Backend::Citus => {
            assert_not_loaded(&fx.config_path(), "no dimlog tables");
            assert_eq!(user_tables(&mut fx).await, [Some("src_customers".to_string())]);
        }
    }
}

/// `assign-keys` and `rebuild` with the source down: the fact table gets its keys, and
/// the dimension is rebuilt from the log.
async fn assign_keys_and_rebuild_do_not_need_the_source(mut fx: Fixture) {
    load(&mut fx).await;
    let (at, int) = match fx.backend {
        Backend::Postgres | Backend::Citus => ("timestamptz", "bigint"),
        Backend::Sqlite => ("TEXT", "INTEGER"),
    };
    fx.target_exec(&format!(
        "CREATE TABLE facts (order_id {int}, customer_id {int}, at {at}, customer_sk {int});
         INSERT INTO facts (order_id, customer_id, at) VALUES
             (1, 1, '2026-03-02T09:01:00Z'), (2, 1, '2026-03-02T09:06:00Z'), (3, 3, '2026-03-02T09:06:00Z')"
    ))
    .await;
    set_url(&mut fx, false, &unreachable_url());
    let out = cli::run(
        &fx.config_path(),
        &[
            "assign-keys",
            "--facts",
            "facts",
            "--key-column",
            "customer_id",
            "--at-column",
            "at",
            "--sk-column",
            "customer_sk",
        ],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let sks = fx
        .target_query("SELECT CAST(customer_sk AS TEXT) FROM facts ORDER BY order_id")
        .await;
    assert_eq!(
        sks,
        [
            [Some("1".to_string())],
            [Some("3".to_string())],
            [Some("-1".to_string())]
        ]
    );
    let dimension = fx.dimension().await;
    fx.target_exec("DELETE FROM dim_customer").await;
    let out = cli::run(&fx.config_path(), &["rebuild"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(fx.dimension().await, dimension);
}

/// The connections of commands that only read refuse every write, whatever the rights
/// of the user: `Access::QueryOnly` (the target of `status`, `history`, `lookup`,
/// `verify`) and `Access::ReadOnly` (sources), temporary tables included.
async fn read_only_connections_refuse_every_write(mut fx: Fixture) {
    load(&mut fx).await;
    let plan = fx.plan();
    for access in [Access::QueryOnly, Access::ReadOnly] {
        let mut conn = Conn::open(&plan.target.url, access).await.expect("connect");
        for statement in [
            "CREATE TABLE dimlog_probe (x integer)",
            "CREATE TEMP TABLE dimlog_probe (x integer)",
            "DELETE FROM dimlog_state",
            "UPDATE dim_customer SET tier = 'x'",
        ] {
            let refused = conn.execute_script("probe", statement).await;
            assert!(refused.is_err(), "{access:?} allowed {statement}");
        }
        let rows = conn
            .query_text("probe", "SELECT CAST(count(*) AS TEXT) FROM dim_customer", &[])
            .await
            .expect("reading works");
        assert_eq!(rows, [[Some("3".to_string())]]);
        conn.close().await.expect("close");
    }
    assert_eq!(fx.count("dimlog_state").await, 1);
}

/// A config error on a target that does not exist yet: `run` and `init` fail (exit 2)
/// before the target's file is created.
#[tokio::test]
async fn a_config_error_creates_no_target_file() {
    let mut fx = Fixture::sqlite().await;
    let never = fx.dir().join("never.db");
    set_url(&mut fx, true, &format!("sqlite://{}", never.display()));
    fx.set_setting("columns", "[\"email\", \"tier\", \"no_such_column\"]");
    let before = files(fx.dir());
    for args in [
        &["run", "--upper", FIRST][..],
        &["init"][..],
        &["run", "--dry-run", "--upper", FIRST][..],
    ] {
        let out = cli::run(&fx.config_path(), args);
        assert_eq!(out.code, Some(2), "{out:?}");
        assert!(out.stderr.contains("setting `track.columns`"), "{out:?}");
        assert_eq!(files(fx.dir()), before, "`dimlog {}` created a file", args.join(" "));
    }
    // The source unreachable: same, and nothing created.
    fx.set_setting("columns", "[\"email\", \"tier\", \"country\"]");
    set_url(&mut fx, false, &unreachable_url());
    let out = cli::run(&fx.config_path(), &["run", "--upper", FIRST]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(files(fx.dir()), before, "a failed run created a file");
}
