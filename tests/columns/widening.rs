//! A benign change of a source column's type (issue 17): wider whole numbers, a longer
//! or no length limit, more decimal digits at the same scale, is taken without a
//! migration (PostgreSQL widens the log's and the dimension's columns in the run's
//! transaction); a change that can alter values' text or hash is still refused, naming
//! `dimlog migrate`.

use dimlog::config::Backend;

use super::assert_verified;
use crate::support::fixture::{on_every_engine, Fixture};

on_every_engine!(a_widened_column_loads_without_a_migration);

/// The declared type of `table.column` in the target.
async fn declared(fx: &mut Fixture, table: &str, column: &str) -> String {
    let sql = match fx.backend {
        Backend::Sqlite => format!("SELECT type FROM pragma_table_info('{table}') WHERE name = '{column}'"),
        _ => format!(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = '{table}'::regclass AND attname = '{column}'"
        ),
    };
    fx.target_query(&sql).await[0][0].clone().unwrap_or_default()
}

async fn a_widened_column_loads_without_a_migration(mut fx: Fixture) {
    let pg = fx.backend != Backend::Sqlite;
    let make = |qty: &str, name: &str, amount: &str| {
        let (id, at) = if pg {
            ("bigint", "timestamptz")
        } else {
            ("INTEGER", "TEXT")
        };
        format!(
            "CREATE TABLE src_w (id {id} PRIMARY KEY, qty {qty}, name {name}, amount {amount}, updated_at {at} NOT NULL)"
        )
    };
    let (narrow, wide) = if pg {
        (
            ("integer", "varchar(20)", "numeric(10,2)"),
            ("bigint", "varchar(50)", "numeric(12,2)"),
        )
    } else {
        (("INT", "VARCHAR(20)", "NUMERIC"), ("BIGINT", "VARCHAR(50)", "NUMERIC"))
    };
    fx.exec(&make(narrow.0, narrow.1, narrow.2)).await;
    fx.exec("INSERT INTO src_w VALUES (1, 5, 'ann', 1.50, '2026-03-02T09:00:00Z')")
        .await;
    fx.set_setting("table", "\"src_w\"");
    fx.set_setting("key", "[\"id\"]");
    fx.edit_config("deleted_flag = \"is_deleted\"\n", "");
    fx.set_setting("columns", "[\"qty\", \"name\", \"amount\"]");
    fx.run("2026-03-02T10:00:00Z").await;

    // The source's columns widened (SQLite: the table made again with wider names).
    if pg {
        fx.exec(
            "ALTER TABLE src_w ALTER COLUMN qty TYPE bigint, ALTER COLUMN name TYPE varchar(50), \
             ALTER COLUMN amount TYPE numeric(12,2)",
        )
        .await;
    } else {
        fx.exec(&format!(
            "ALTER TABLE src_w RENAME TO src_old; {}; INSERT INTO src_w SELECT * FROM src_old; DROP TABLE src_old",
            make(wide.0, wide.1, wide.2)
        ))
        .await;
    }
    // Values only the wider types hold.
    let long_name = "a name longer than twenty characters";
    fx.exec(&format!(
        "INSERT INTO src_w VALUES (2, 5000000000, '{long_name}', 1234567890.25, '2026-03-02T11:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!(
        (r.counts.versions, r.counts.corrections),
        (1, 0),
        "only the new key: {r:?}"
    );
    if pg {
        for table in ["customer_versions", "dim_customer"] {
            assert_eq!(declared(&mut fx, table, "qty").await, "bigint", "{table}");
            assert_eq!(
                declared(&mut fx, table, "name").await,
                "character varying(50)",
                "{table}"
            );
            assert_eq!(declared(&mut fx, table, "amount").await, "numeric(12,2)", "{table}");
        }
    }
    let record = fx
        .target_query("SELECT column_types FROM dimlog_dimensions WHERE dimension = 'customer'")
        .await;
    // PostgreSQL records the wider type; SQLite, whose columns hold any type, keeps the
    // one the dimension was built with (the same kind of value: nothing to record).
    let recorded = if pg { wide.0 } else { narrow.0 };
    assert!(
        record[0][0]
            .as_deref()
            .is_some_and(|t| t.contains(&format!("[\"qty\",\"{recorded}\"]"))),
        "{record:?}"
    );
    assert_eq!(fx.run("2026-03-02T12:05:00Z").await.counts.versions, 0);
    assert_verified(&fx, true).await;

    // A change that can alter a value's text (another scale; text to a number) is no
    // widening: refused, naming the migration.
    if pg {
        fx.exec("ALTER TABLE src_w ALTER COLUMN amount TYPE numeric(14,3)")
            .await;
    } else {
        fx.exec(&format!(
            "ALTER TABLE src_w RENAME TO src_old; {}; INSERT INTO src_w SELECT * FROM src_old; DROP TABLE src_old",
            make(wide.0, "INTEGER", wide.2)
        ))
        .await;
    }
    let column = if pg { "amount" } else { "name" };
    match fx
        .try_run_with(dimlog::pipeline::RunOptions {
            upper: Some(crate::support::fixture::ts("2026-03-02T12:10:00Z")),
            ..dimlog::pipeline::RunOptions::incremental()
        })
        .await
    {
        Err(dimlog::Error::Config(dimlog::config::ConfigError::NeedsStep {
            step: dimlog::config::NextStep::MigrateColumn { column: c },
            ..
        })) => assert_eq!(c, column),
        other => panic!("expected a refusal naming the migration of {column}, got {other:?}"),
    }
}

/// A view of the user's over the dimension's column keeps PostgreSQL from widening it:
/// the run fails, commits nothing, and says which view and what to do (found by an
/// outside trial for `dimlog migrate`; a widening takes the same path).
#[tokio::test]
async fn a_view_over_a_widened_column_is_named() {
    let mut fx = Fixture::postgres().await;
    fx.exec("CREATE TABLE src_w (id bigint PRIMARY KEY, name varchar(20), updated_at timestamptz NOT NULL)")
        .await;
    fx.exec("INSERT INTO src_w VALUES (1, 'ann', '2026-03-02T09:00:00Z')")
        .await;
    fx.set_setting("table", "\"src_w\"");
    fx.set_setting("key", "[\"id\"]");
    fx.edit_config("deleted_flag = \"is_deleted\"\n", "");
    fx.set_setting("columns", "[\"name\"]");
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("CREATE VIEW report_names AS SELECT id, name FROM dim_customer")
        .await;
    fx.exec("ALTER TABLE src_w ALTER COLUMN name TYPE varchar(50)").await;
    fx.exec("INSERT INTO src_w VALUES (2, 'a name longer than twenty characters', '2026-03-02T11:00:00Z')")
        .await;
    let before = (fx.log().await, fx.dimension().await);
    let out = fx.cli(&["run", "--upper", "2026-03-02T12:00:00Z"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("report_names"), "the view is named: {stderr}");
    assert!(
        stderr.contains("hint: ") && stderr.contains("drop"),
        "what to do: {stderr}"
    );
    assert_eq!((fx.log().await, fx.dimension().await), before, "nothing committed");
}
