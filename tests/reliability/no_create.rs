//! Commands that must not create anything (issue 14, item 7): a `run` refused by the
//! window check (exit 2: an upper bound after the source's clock, or a first load's before
//! its oldest row), `run --dry-run` (with every option that changes what it reads)
//! and `backfill --dry-run`, on a target where the dimension was never loaded, leave the
//! target exactly as it was: on SQLite no file appears where there was none, and a file
//! without dimlog's tables keeps its bytes; on PostgreSQL no table (or schema) appears,
//! in `public` or in the schema of a schema-qualified log and dimension.

use std::path::PathBuf;

use dimlog::config::Backend;

use super::cli;
use crate::support::files;
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(refusals_and_dry_runs_leave_a_never_loaded_target_as_it_was);

const LATER_THAN_ANY_CLOCK: &str = "2999-01-01T00:00:00Z";
/// A first load's upper bound before the source's oldest row (refused, exit 2).
const BEFORE_ANY_ROW: &str = "2000-01-01T00:00:00Z";

/// Every command that must not create anything, with its exit code.
fn cases() -> Vec<(Vec<&'static str>, i32)> {
    let mut out = Vec::new();
    let refused: [&[&str]; 6] = [
        &["run", "--upper", LATER_THAN_ANY_CLOCK],
        &["run", "--full-refresh", "--upper", LATER_THAN_ANY_CLOCK],
        &["run", "--dry-run", "--upper", LATER_THAN_ANY_CLOCK],
        &["run", "--upper", BEFORE_ANY_ROW],
        &["run", "--full-refresh", "--upper", BEFORE_ANY_ROW],
        &["run", "--dry-run", "--upper", BEFORE_ANY_ROW],
    ];
    let dry: [&[&str]; 6] = [
        &["run", "--dry-run"],
        &["run", "--dry-run", "--upper", "2026-03-02T10:00:00Z"],
        &["run", "--dry-run", "--full-refresh"],
        &["run", "--dry-run", "--reconcile-deletes"],
        &["run", "--dry-run", "--no-wait"],
        &[
            "backfill",
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-03T00:00:00Z",
            "--dry-run",
        ],
    ];
    for (args, code) in refused.iter().map(|a| (a, 2)).chain(dry.iter().map(|a| (a, 0))) {
        for json in [false, true] {
            let mut a = args.to_vec();
            if json {
                a.push("--json");
            }
            out.push((a, code));
        }
    }
    out
}

/// Every relation and schema of the database outside the system's.
async fn pg_objects(fx: &mut Fixture) -> Vec<Option<String>> {
    fx.target_query(
        "SELECT n.nspname::text || '.' || coalesce(c.relname::text, '') FROM pg_namespace n
         LEFT JOIN pg_class c ON c.relnamespace = n.oid
         WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND n.nspname NOT LIKE 'pg_temp%'
           AND n.nspname NOT LIKE 'pg_toast_temp%'
         ORDER BY 1",
    )
    .await
    .into_iter()
    .map(|r| r[0].clone())
    .collect()
}

fn check(fx: &Fixture, what: &str) {
    for (args, code) in cases() {
        let out = cli::run(&fx.config_path(), &args);
        assert_eq!(out.code, Some(code), "{what}: {}: {out:?}", args.join(" "));
        if args.contains(&"--dry-run") && code == 0 && args[0] == "run" {
            // What it would do is what a first load does: both keys are new versions.
            if args.contains(&"--json") {
                let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("one JSON object");
                assert_eq!(
                    (&v["dry_run"], &v["versions"]),
                    (&true.into(), &2.into()),
                    "{what}: {v}"
                );
            } else {
                assert!(out.stdout.contains("dry run (nothing written)"), "{what}: {out:?}");
                assert!(out.stdout.contains("2 versions"), "{what}: {out:?}");
            }
        }
    }
}

async fn refusals_and_dry_runs_leave_a_never_loaded_target_as_it_was(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')",
    )
    .await;
    let target_line = format!("url = \"{}\"", fx.target_url);
    match fx.backend {
        Backend::Sqlite => {
            // No file at target.url.
            let never: PathBuf = fx.dir().join("never.db");
            let line = format!("url = \"sqlite://{}\"", never.display());
            let good = fx.config().to_string();
            let at = good.rfind(&target_line).expect("the target url line");
            fx.set_config(format!("{}{line}{}", &good[..at], &good[at + target_line.len()..]));
            let before = files(fx.dir());
            check(&fx, "no target file");
            assert_eq!(files(fx.dir()), before, "a file appeared beside the config");
            assert!(!never.exists());
            fx.set_config(good);
            // A file without dimlog's tables (the fixture's own): its bytes stay.
            let path = fx.dir().join("warehouse.db");
            let bytes = std::fs::read(&path).expect("the target file");
            check(&fx, "a target file without dimlog tables");
            assert_eq!(
                std::fs::read(&path).expect("the target file"),
                bytes,
                "the target file changed"
            );
            let tables = fx.target_query("SELECT name FROM sqlite_master").await;
            assert!(tables.is_empty(), "tables appeared: {tables:?}");
        }
        Backend::Postgres | Backend::Citus => {
            let before = pg_objects(&mut fx).await;
            check(&fx, "a database without dimlog tables");
            assert_eq!(pg_objects(&mut fx).await, before);
            // Log and dimension in a schema of their own, existing but empty.
            fx.target_exec("CREATE SCHEMA wh").await;
            fx.edit_config("log = \"customer_versions\"", "log = \"wh.customer_versions\"");
            fx.edit_config("dimension = \"dim_customer\"", "dimension = \"wh.dim_customer\"");
            let before = pg_objects(&mut fx).await;
            check(&fx, "schema-qualified tables");
            assert_eq!(pg_objects(&mut fx).await, before);
        }
    }
}
