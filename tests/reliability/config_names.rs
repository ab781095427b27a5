//! Config mistakes are config errors (issue 14, item 9): exit 2 with a message naming the
//! setting, never exit 1 with a raw database error, and nothing written.
//!
//! - the log and the dimension naming one table (SQLite: in any case, or with `main.`;
//!   PostgreSQL: with `public.`);
//! - a SQLite table qualified by a schema: `main.` is the same table (accepted), any other
//!   schema is refused;
//! - the log or the dimension naming the source table when source and target are one
//!   database (the same SQLite file however its URL is spelled; PostgreSQL: the same
//!   database, even under another spelling of the server's address), in any spelling
//!   naming the same table;
//! - a SQLite log or dimension named `sqlite_…` (in any case): SQLite keeps those names;
//! - a change column without a time zone (SQLite text without an offset, PostgreSQL
//!   `timestamp`) and no `source.timezone`: the same config error on both backends.

use std::path::Path;

use dimlog::config::Backend;

use super::cli;
use super::target_only::set_url;
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(
    tables_named_alike_are_config_errors,
    a_zone_less_change_column_is_a_config_error_on_both_backends,
);

const UPPER: &str = "2026-03-02T10:00:00Z";

async fn seed(fx: &mut Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')",
    )
    .await;
}

/// What the target holds, to show a refusal wrote nothing: SQLite the table names of
/// both files, PostgreSQL every relation of `public`; and the source's rows.
async fn state(fx: &mut Fixture) -> (Vec<Option<String>>, Vec<Vec<Option<String>>>) {
    let tables = match fx.backend {
        Backend::Sqlite => fx.target_query("SELECT name FROM sqlite_master ORDER BY name").await,
        Backend::Postgres | Backend::Citus => {
            fx.target_query("SELECT relname::text FROM pg_class WHERE relnamespace = 'public'::regnamespace ORDER BY 1")
                .await
        }
    };
    let mut tables: Vec<Option<String>> = tables.into_iter().map(|r| r[0].clone()).collect();
    if fx.backend == Backend::Sqlite {
        tables.extend(
            fx.source_query("SELECT 'source:' || name FROM sqlite_master ORDER BY name")
                .await
                .into_iter()
                .map(|r| r[0].clone()),
        );
    }
    let rows = fx
        .source_query("SELECT CAST(customer_id AS TEXT), email, tier, CAST(updated_at AS TEXT) FROM src_customers ORDER BY customer_id")
        .await;
    (tables, rows)
}

/// `target.log` / `target.dimension` / `source.table` set to the given names.
fn with_names(base: &str, log: &str, dim: &str, source: &str) -> String {
    base.replace("log = \"customer_versions\"", &format!("log = \"{log}\""))
        .replace("dimension = \"dim_customer\"", &format!("dimension = \"{dim}\""))
        .replace("table = \"src_customers\"", &format!("table = \"{source}\""))
}

fn assert_refused(fx: &Fixture, what: &str, setting: &str, says: &[&str]) {
    for args in [
        &["run", "--upper", UPPER][..],
        &["init"][..],
        &["run", "--upper", UPPER, "--json"][..],
    ] {
        let out = cli::run(&fx.config_path(), args);
        assert_eq!(out.code, Some(2), "{what}: {}: {out:?}", args.join(" "));
        if args.contains(&"--json") {
            let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
            assert_eq!(v["error"]["kind"], "config", "{what}: {v}");
        } else {
            assert!(
                out.stderr.contains(&format!("`{setting}`")),
                "{what}: the message does not name {setting}: {}",
                out.stderr
            );
            for s in says {
                assert!(
                    out.stderr.contains(s),
                    "{what}: the message does not say {s:?}: {}",
                    out.stderr
                );
            }
            assert!(
                !out.stderr.contains("error returned from database"),
                "{what}: a raw database error: {}",
                out.stderr
            );
        }
    }
}

fn case_variants(name: &str) -> Vec<String> {
    vec![
        name.to_uppercase(),
        name.chars()
            .enumerate()
            .map(|(i, c)| if i % 2 == 0 { c.to_ascii_uppercase() } else { c })
            .collect(),
    ]
}

/// The spellings of `name` that name the same table as `name` in `backend`, `name`
/// itself included.
fn same_table_spellings(backend: Backend, name: &str) -> Vec<String> {
    let mut out = vec![name.to_string()];
    match backend {
        Backend::Sqlite => {
            out.extend(case_variants(name));
            out.push(format!("main.{name}"));
            out.push(format!("MAIN.{}", name.to_uppercase()));
        }
        Backend::Postgres | Backend::Citus => out.push(format!("public.{name}")),
    }
    out
}

async fn tables_named_alike_are_config_errors(mut fx: Fixture) {
    seed(&mut fx).await;
    let base = fx.config().to_string();
    let before = state(&mut fx).await;

    // The log and the dimension naming one table.
    for spelled in same_table_spellings(fx.backend, "dim_customer") {
        fx.set_config(with_names(&base, &spelled, "dim_customer", "src_customers"));
        assert_refused(&fx, &format!("log {spelled}"), "target.dimension", &["same table"]);
        assert_eq!(state(&mut fx).await, before, "log {spelled}: something was written");
    }

    // SQLite: a schema other than main.
    if fx.backend == Backend::Sqlite {
        for (log, dim, source, setting) in [
            (
                "public.customer_versions",
                "dim_customer",
                "src_customers",
                "target.log",
            ),
            (
                "customer_versions",
                "wh.dim_customer",
                "src_customers",
                "target.dimension",
            ),
            ("temp.customer_versions", "dim_customer", "src_customers", "target.log"),
            (
                "customer_versions",
                "dim_customer",
                "public.src_customers",
                "source.table",
            ),
        ] {
            fx.set_config(with_names(&base, log, dim, source));
            assert_refused(&fx, &format!("{log} {dim} {source}"), setting, &["schema", "main"]);
            assert_eq!(
                state(&mut fx).await,
                before,
                "{log} {dim} {source}: something was written"
            );
        }
    }

    // SQLite: names SQLite keeps for itself (`sqlite_` in any case, with or without
    // `main.`), for the log and for the dimension.
    if fx.backend == Backend::Sqlite {
        for reserved in ["sqlite_stat1", "sqlite_master", "sqlite_sequence", "sqlite_mine"] {
            let mut spellings = same_table_spellings(fx.backend, reserved);
            spellings.push(format!("Sqlite_{}", &reserved["sqlite_".len()..]));
            for spelled in spellings {
                for (as_log, setting) in [(true, "target.log"), (false, "target.dimension")] {
                    let (log, dim) = if as_log {
                        (spelled.as_str(), "dim_customer")
                    } else {
                        ("customer_versions", spelled.as_str())
                    };
                    fx.set_config(with_names(&base, log, dim, "src_customers"));
                    let what = format!("log {log}, dimension {dim}");
                    assert_refused(&fx, &what, setting, &["sqlite_", "reserved"]);
                    assert_eq!(state(&mut fx).await, before, "{what}: something was written");
                }
            }
        }
    }

    // Source and target one database: the log or the dimension naming the source table.
    let source_path = fx.dir().join("source.db");
    let same_db: Vec<String> = match fx.backend {
        Backend::Sqlite => vec![
            format!("sqlite://{}", source_path.display()),
            "sqlite://source.db".into(),
            "sqlite://./source.db".into(),
            format!("sqlite://{}/../{}/source.db", fx.dir().display(), dir_name(fx.dir())),
        ],
        Backend::Postgres | Backend::Citus => {
            // The same database under another spelling of its server's address: only the
            // servers can tell.
            let mut urls = vec![fx.target_url.clone()];
            for (from, to) in [("@127.0.0.1:", "@127.1:"), ("@localhost:", "@127.0.0.1:")] {
                if fx.target_url.contains(from) {
                    urls.push(fx.target_url.replace(from, to));
                }
            }
            urls
        }
    };
    for url in &same_db {
        for spelled in same_table_spellings(fx.backend, "src_customers") {
            for (as_log, setting) in [(true, "target.log"), (false, "target.dimension")] {
                let (log, dim) = if as_log {
                    (spelled.as_str(), "dim_customer")
                } else {
                    ("customer_versions", spelled.as_str())
                };
                fx.set_config(with_names(&base, log, dim, "src_customers"));
                set_url(&mut fx, true, url);
                let what = format!("{url}: log {log}, dimension {dim}");
                assert_refused(&fx, &what, setting, &["source table"]);
                assert_eq!(state(&mut fx).await, before, "{what}: something was written");
            }
        }
    }

    // SQLite: `main.` is the same table as the bare name, for the target and the source:
    // a load with one spelling is continued by a run with the other.
    if fx.backend == Backend::Sqlite {
        fx.set_config(with_names(
            &base,
            "main.customer_versions",
            "MAIN.dim_customer",
            "main.src_customers",
        ));
        let out = cli::run(&fx.config_path(), &["run", "--upper", UPPER]);
        assert_eq!(out.code, Some(0), "{out:?}");
        assert!(fx.target_has_table("customer_versions").await);
        fx.set_config(base.clone());
        let out = cli::run(&fx.config_path(), &["verify"]);
        assert_eq!(out.code, Some(0), "{out:?}");
        let out = cli::run(&fx.config_path(), &["run", "--upper", UPPER]);
        assert_eq!(out.code, Some(0), "{out:?}");
        assert_eq!(fx.count("customer_versions").await, 2);
    }
}

fn dir_name(dir: &Path) -> String {
    dir.file_name().expect("a name").to_string_lossy().into_owned()
}

/// A change column without a zone and no `source.timezone`: exit 2, kind `config`, naming
/// `source.timezone`, nothing written — on a never-loaded target and on a loaded one
/// (SQLite: whichever row has no offset, the first or one among many) — and with the
/// zone set the same rows load.
async fn a_zone_less_change_column_is_a_config_error_on_both_backends(mut fx: Fixture) {
    let (ddl, first, later) = match fx.backend {
        Backend::Sqlite => (
            "CREATE TABLE src_naive (customer_id INTEGER PRIMARY KEY, email TEXT, tier TEXT, country TEXT, is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT)",
            vec!["'2026-03-02 09:00:00'", "'2026-03-02T09:00:00'", "'2026-03-02'"],
            "'2026-03-02 09:30:00'",
        ),
        Backend::Postgres | Backend::Citus => (
            "CREATE TABLE src_naive (customer_id bigint PRIMARY KEY, email text, tier text, country text, is_deleted boolean NOT NULL DEFAULT false, updated_at timestamp)",
            vec!["'2026-03-02 09:00:00'"],
            "'2026-03-02 09:30:00'",
        ),
    };
    fx.exec(ddl).await;
    fx.set_setting("table", "\"src_naive\"");
    let before = state(&mut fx).await;
    for (i, zone_less) in first.iter().enumerate() {
        fx.exec("DELETE FROM src_naive").await;
        // Many rows with a zone, one without (SQLite); PostgreSQL: the column's type.
        let zoned = match fx.backend {
            Backend::Sqlite => "'2026-03-02T08:00:00Z'",
            Backend::Postgres | Backend::Citus => "'2026-03-02 08:00:00'",
        };
        let mut values: Vec<String> = (1..=50)
            .map(|k| format!("({k}, 'e{k}', 'free', 'FR', false, {zoned})"))
            .collect();
        values.insert(i * 20, format!("(100, 'z', 'free', 'FR', false, {zone_less})"));
        fx.exec(&format!("INSERT INTO src_naive VALUES {}", values.join(", ")))
            .await;
        assert_refused(
            &fx,
            &format!("updated_at {zone_less}"),
            "source.timezone",
            &["no time zone"],
        );
        assert_eq!(state(&mut fx).await, before, "{zone_less}: something was written");
    }

    // A loaded target: the zone-less row arrives later.
    if fx.backend == Backend::Sqlite {
        fx.exec("DELETE FROM src_naive WHERE customer_id = 100").await;
        let out = cli::run(&fx.config_path(), &["run", "--upper", UPPER]);
        assert_eq!(out.code, Some(0), "{out:?}");
        let log = fx.count("customer_versions").await;
        fx.exec(&format!(
            "INSERT INTO src_naive VALUES (101, 'late', 'free', 'FR', false, {later})"
        ))
        .await;
        let out = cli::run(&fx.config_path(), &["run", "--upper", UPPER, "--json"]);
        assert_eq!(out.code, Some(2), "{out:?}");
        assert!(out.stdout.contains("source.timezone"), "{out:?}");
        assert_eq!(fx.count("customer_versions").await, log);
    }

    // With the zone, the rows load.
    fx.edit_config("safety_lag = \"0s\"", "safety_lag = \"0s\"\ntimezone = \"UTC\"");
    let out = cli::run(&fx.config_path(), &["run", "--upper", UPPER]);
    assert_eq!(out.code, Some(0), "{out:?}");
}
