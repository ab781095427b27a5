//! SQLite sources are opened read-only, always: dimlog never writes the source. A missing
//! file is a config error naming the path and the setting (exit 2), and nothing is
//! created in its place; an existing file is never modified by any command that reads
//! it — its bytes and mtime stay, and no `-wal`, `-shm` or `-journal` file appears beside
//! a rollback-journal database.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sqlx::{ConnectOptions as _, Connection as _, Executor as _};

use super::cli::{self, CliOutput};
use crate::support::files;
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(
    a_missing_sqlite_source_is_named_and_not_created,
    an_existing_sqlite_source_is_never_modified,
);

const FROM: &str = "2026-03-01T00:00:00Z";
const UPPER: &str = "2026-03-02T09:30:00Z";

fn set_source_url(fx: &mut Fixture, url: &str) {
    super::target_only::set_url(fx, false, url);
}

/// Every command that reads the source, as `(args, setting the message names)`.
fn reading_commands(source_url: &str, out: &Path) -> Vec<(Vec<String>, &'static str)> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        (s(&["run", "--upper", UPPER]), "source.url"),
        (s(&["run", "--dry-run", "--upper", UPPER]), "source.url"),
        (
            s(&["run", "--full-refresh", "--reconcile-deletes", "--upper", UPPER]),
            "source.url",
        ),
        (s(&["init"]), "source.url"),
        (s(&["backfill", "--from", FROM, "--to", UPPER]), "source.url"),
        (s(&["verify", "--against-source"]), "source.url"),
        (s(&["status", "--against-source"]), "source.url"),
        (
            s(&[
                "new",
                "--source-url",
                source_url,
                "--table",
                "src_customers",
                "--out",
                &out.display().to_string(),
                "--force",
            ]),
            "--source-url",
        ),
    ]
}

fn run(config: &Path, args: &[String]) -> CliOutput {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cli::run(config, &args)
}

async fn a_missing_sqlite_source_is_named_and_not_created(mut fx: Fixture) {
    // Loaded first, so that commands that read the target get as far as the source.
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) \
         VALUES (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')",
    )
    .await;
    let out = cli::run(&fx.config_path(), &["run", "--upper", UPPER]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let (log, runs) = (fx.log().await, fx.runs().await);
    let dir = fx.dir().join("nowhere");
    std::fs::create_dir(&dir).expect("mkdir");
    let missing = dir.join("none.db");
    let url = format!("sqlite://{}", missing.display());
    set_source_url(&mut fx, &url);
    for (args, setting) in reading_commands(&url, &fx.dir().join("new.toml")) {
        for json in [false, true] {
            let mut args = args.clone();
            if json {
                args.push("--json".into());
            }
            let out = run(&fx.config_path(), &args);
            assert_eq!(out.code, Some(2), "`dimlog {}`: {out:?}", args.join(" "));
            let message = if json {
                let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
                // A setting of the config is a config error; a flag of `new`, a usage error.
                let kind = if setting == "source.url" { "config" } else { "usage" };
                assert_eq!(v["error"]["kind"], kind, "{out:?}");
                v["error"]["message"].as_str().expect("message").to_string()
            } else {
                out.stderr.trim().to_string()
            };
            for part in [setting, &missing.display().to_string(), "no SQLite database"] {
                assert!(
                    message.contains(part),
                    "`dimlog {}` does not say {part:?}: {out:?}",
                    args.join(" ")
                );
            }
            assert!(
                files(&dir).is_empty(),
                "`dimlog {}` created {:?}",
                args.join(" "),
                files(&dir)
            );
        }
    }
    assert!(!fx.dir().join("new.toml").exists(), "`new` wrote a config");
    assert_eq!(fx.log().await, log, "the log changed");
    assert_eq!(fx.runs().await, runs, "a run record was written");
}

/// A SQLite source file made by another program, in rollback-journal mode (SQLite's
/// default) or in WAL mode, with one row.
async fn source_file(path: &Path, wal: bool) {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
    let mode = if wal {
        SqliteJournalMode::Wal
    } else {
        SqliteJournalMode::Delete
    };
    let mut c = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(mode)
        .connect()
        .await
        .expect("create the source file");
    c.execute(sqlx::raw_sql(
        "CREATE TABLE src_customers (customer_id INTEGER PRIMARY KEY, email TEXT, tier TEXT, country TEXT, \
             is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL);
         INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:10:00Z')",
    ))
    .await
    .expect("fill the source file");
    c.close().await.expect("close");
}

fn stamp(path: &Path) -> (Vec<u8>, SystemTime) {
    let bytes = std::fs::read(path).expect("read");
    let mtime = std::fs::metadata(path).expect("stat").modified().expect("mtime");
    (bytes, mtime)
}

async fn an_existing_sqlite_source_is_never_modified(mut fx: Fixture) {
    for wal in [false, true] {
        let dir: PathBuf = fx.dir().join(if wal { "wal" } else { "rollback" });
        std::fs::create_dir(&dir).expect("mkdir");
        let path = dir.join("app.db");
        source_file(&path, wal).await;
        let url = format!("sqlite://{}", path.display());
        let good = fx.config().to_string();
        set_source_url(&mut fx, &url);
        let before = stamp(&path);
        let listing = files(&dir);
        std::thread::sleep(std::time::Duration::from_millis(20));
        for (args, _) in reading_commands(&url, &fx.dir().join("new.toml")) {
            let out = run(&fx.config_path(), &args);
            // `new` exits 2 when it leaves a choice to the user (here: the zone of the
            // text change column); everything else succeeds.
            let ok = out.code == Some(0) || (args[0] == "new" && out.code == Some(2));
            assert!(ok, "`dimlog {}`: {out:?}", args.join(" "));
            let after = stamp(&path);
            assert!(
                after.0 == before.0,
                "`dimlog {}` changed the source's bytes",
                args.join(" ")
            );
            assert_eq!(
                after.1,
                before.1,
                "`dimlog {}` changed the source's mtime",
                args.join(" ")
            );
            if !wal {
                // A rollback-journal database is read with a shared lock only. (SQLite's
                // readers of a WAL database create its -wal and -shm files themselves.)
                assert_eq!(
                    files(&dir),
                    listing,
                    "`dimlog {}` left files beside the source",
                    args.join(" ")
                );
            }
        }
        fx.set_config(good);
        // The next round loads its own copy from scratch.
        fx.target_exec("DROP TABLE customer_versions; DROP TABLE dim_customer; DELETE FROM dimlog_dimensions; DELETE FROM dimlog_state; DELETE FROM dimlog_runs")
            .await;
    }
}
