//! Changes of the tracked column sets (spec section 3, `dimlog_dimensions`): dimlog never
//! silently re-versions a dimension because its config changed. A run refuses a changed
//! column set (exit 2) until it is given `--accept-config-change`; then it carries the
//! current versions over to the new set (no new version, no new surrogate key). A
//! retyped source column is refused with the migration to run.

use dimlog::config::Backend;
use dimlog::pipeline::{RunOptions, RunReport};
use dimlog::state::RunKind;

use super::assert_verified;
use crate::support::fixture::{on_both_backends, ts, Fixture};

on_both_backends!(
    adding_a_tracked_column_to_a_loaded_dimension,
    removing_a_tracked_column_keeps_its_history,
    retyping_a_source_column_names_the_migration,
);

const KEYS: i64 = 10_000;
const COUNTRIES: [&str; 4] = ["FR", "DE", "NL", "JP"];

fn upper(text: &str) -> RunOptions {
    RunOptions {
        upper: Some(ts(text)),
        ..RunOptions::incremental()
    }
}

fn accepting(text: &str) -> RunOptions {
    RunOptions {
        accept_config_change: true,
        ..upper(text)
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `(versions, late, corrections, tombstones)`.
fn appended(r: &RunReport) -> (i64, i64, i64, i64) {
    (
        r.counts.versions,
        r.counts.late_versions,
        r.counts.corrections,
        r.counts.tombstones,
    )
}

/// A run that must be refused as a config error (exit 2); returns its message.
async fn refused(fx: &mut Fixture, opts: RunOptions) -> String {
    match fx.try_run_with(opts).await {
        Err(e @ dimlog::Error::Config(_)) => {
            assert_eq!(e.exit_code(), 2);
            e.to_string()
        }
        Err(e) => panic!("expected a config error, got {e:?}"),
        Ok(r) => panic!("expected a config error, the run succeeded: {r:?}"),
    }
}

/// The columns of a target table, in order.
async fn target_columns(fx: &mut Fixture, table: &str) -> Vec<String> {
    let sql = match fx.backend {
        Backend::Postgres | Backend::Citus => format!(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = '{table}' ORDER BY ordinal_position"
        ),
        Backend::Sqlite => format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
    };
    fx.target_query(&sql)
        .await
        .into_iter()
        .map(|r| r[0].clone().expect("a column name"))
        .collect()
}

/// One text column of a target query, top to bottom.
async fn column(fx: &mut Fixture, sql: &str) -> Vec<Option<String>> {
    fx.target_query(sql)
        .await
        .into_iter()
        .map(|mut r| r.remove(0))
        .collect()
}

/// Adding `country` to the Type 2 columns of a loaded 10k-key dimension: refused without
/// `--accept-config-change` (exit 2, explaining); accepted, it appends no version,
/// carries every current version over (`rehashed`), leaves NULL in the earlier versions
/// and the source's value in the current rows; afterwards a real change of the new column
/// opens exactly one version.
async fn adding_a_tracked_column_to_a_loaded_dimension(mut fx: Fixture) {
    fx.set_setting("columns", r#"["email", "tier"]"#);
    let rows = "SELECT i, 'c' || i || '@example.com',
                CASE i % 3 WHEN 0 THEN 'free' WHEN 1 THEN 'pro' ELSE 'gold' END,
                CASE i % 4 WHEN 0 THEN 'FR' WHEN 1 THEN 'DE' WHEN 2 THEN 'NL' ELSE 'JP' END,
                '2026-03-02T09:00:00Z'";
    let insert = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at)";
    fx.exec(&match fx.backend {
        Backend::Postgres | Backend::Citus => {
            format!("{insert} {rows}::timestamptz FROM generate_series(1, {KEYS}) AS i")
        }
        Backend::Sqlite => format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {KEYS})
             {insert} {rows} FROM n"
        ),
    })
    .await;
    assert_eq!(fx.run("2026-03-02T10:00:00Z").await.counts.versions, KEYS);
    fx.exec("UPDATE src_customers SET tier = 'vip', updated_at = '2026-03-02T11:00:00Z' WHERE customer_id <= 100")
        .await;
    assert_eq!(fx.run("2026-03-02T12:00:00Z").await.counts.versions, 100);
    let before = fx.dimension().await;
    assert_eq!(before.rows.len(), 10_100);
    let runs = fx.count("dimlog_runs").await;

    fx.set_setting("columns", r#"["email", "tier", "country"]"#);
    let message = refused(&mut fx, upper("2026-03-02T13:00:00Z")).await;
    for needle in ["track.columns", "country", "a run that accepts the change"] {
        assert!(message.contains(needle), "{needle:?} missing from: {message}");
    }
    let out = fx.cli(&["run", "--upper", "2026-03-02T13:00:00Z"]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("country")
            && stderr.contains("hint: to migrate, rerun with `dimlog run --accept-config-change`"),
        "{stderr}"
    );
    assert_eq!(
        fx.count("customer_versions").await,
        10_100,
        "the refusal wrote no log row"
    );
    assert_eq!(fx.count("dimlog_runs").await, runs, "the refusal recorded no run");
    assert_eq!(fx.count("dim_customer").await, 10_100);

    let r = fx.run_with(accepting("2026-03-02T13:00:00Z")).await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
    assert_eq!(r.rehashed, KEYS, "every current version is carried over");
    assert_eq!(r.counts.rows_read, KEYS, "a migration reads the whole source");
    assert!(
        r.config_change.as_deref().is_some_and(|c| c.contains("country")),
        "{:?}",
        r.config_change
    );
    assert_eq!(fx.count("customer_versions").await, 10_100 + KEYS);

    let after = fx.dimension().await;
    for c in [
        "customer_sk",
        "customer_id",
        "email",
        "tier",
        "valid_from",
        "valid_to",
        "is_current",
    ] {
        assert!(after.values(c) == before.values(c), "{c} changed");
    }
    let mut closed = 0;
    for r in after.records() {
        let id: usize = r["customer_id"].as_deref().expect("a key").parse().expect("a number");
        if r["is_current"].as_deref() == Some("true") {
            assert_eq!(r["country"].as_deref(), Some(COUNTRIES[id % 4]), "{r:?}");
        } else {
            closed += 1;
            assert_eq!(r["country"], None, "an earlier version holds NULL: {r:?}");
        }
    }
    assert_eq!(closed, 100);

    // A real change of the new column opens exactly one version.
    fx.exec("UPDATE src_customers SET country = 'BR', updated_at = '2026-03-02T14:00:00Z' WHERE customer_id = 4242")
        .await;
    let r = fx.run("2026-03-02T15:00:00Z").await;
    assert_eq!(appended(&r), (1, 0, 0, 0), "{r:?}");
    assert_eq!((r.rehashed, r.config_change.clone()), (0, None));
    let countries = column(
        &mut fx,
        "SELECT country FROM dim_customer WHERE customer_id = 4242 ORDER BY valid_from",
    )
    .await;
    assert_eq!(countries, [Some("NL".to_string()), Some("BR".to_string())]);
    assert_eq!(fx.dimension().await.rows.len(), 10_101);

    let out = fx.cli(&["verify", "--against-source"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Removing `country` from the Type 2 columns: accepted, it appends no version; the log
/// keeps the column and its history, the dimension drops it, and later changes of it open
/// no version.
async fn removing_a_tracked_column_keeps_its_history(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
             (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET country = 'BE', updated_at = '2026-03-02T11:00:00Z' WHERE customer_id = 1")
        .await;
    assert_eq!(fx.run("2026-03-02T12:00:00Z").await.counts.versions, 1);
    let before = fx.dimension().await;

    fx.set_setting("columns", r#"["email", "tier"]"#);
    let message = refused(&mut fx, upper("2026-03-02T13:00:00Z")).await;
    assert!(
        message.contains("removed: country") && message.contains("a run that accepts the change"),
        "{message}"
    );
    let r = fx.run_with(accepting("2026-03-02T13:00:00Z")).await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
    assert_eq!(r.rehashed, 3);

    let after = fx.dimension().await;
    for c in ["customer_sk", "customer_id", "valid_from", "valid_to", "is_current"] {
        assert_eq!(after.values(c), before.values(c), "{c} changed");
    }
    assert!(
        target_columns(&mut fx, "customer_versions")
            .await
            .contains(&"country".to_string()),
        "the log keeps the column"
    );
    assert!(
        !target_columns(&mut fx, "dim_customer")
            .await
            .contains(&"country".to_string()),
        "the dimension shows the tracked columns only"
    );
    let history = column(
        &mut fx,
        "SELECT country FROM customer_versions WHERE customer_id = 1 AND country IS NOT NULL ORDER BY log_id",
    )
    .await;
    assert_eq!(
        history,
        [Some("FR".to_string()), Some("BE".to_string()), Some("BE".to_string())],
        "the carried-over row keeps the version's logged value of the removed column (issue 21)"
    );

    let log_rows = fx.count("customer_versions").await;
    fx.exec("UPDATE src_customers SET country = 'AT', updated_at = '2026-03-02T14:00:00Z' WHERE customer_id = 2")
        .await;
    let r = fx.run("2026-03-02T15:00:00Z").await;
    assert_eq!(r.counts.rows_read, 2, "customer 2, and customer 1 within the lookback");
    assert_eq!(appended(&r), (0, 0, 0, 0), "a removed column opens no version");
    assert_eq!(fx.count("customer_versions").await, log_rows);

    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T16:00:00Z' WHERE customer_id = 3")
        .await;
    let r = fx.run("2026-03-02T17:00:00Z").await;
    assert_eq!(appended(&r), (1, 0, 0, 0), "a kept column still versions");
    assert_verified(&fx, true).await;
}

/// A source column whose type changed is refused (exit 2, with or without
/// `--accept-config-change`), naming the column and the migration, and nothing is
/// committed. Both ways out the message names work: reading the old type through a view,
/// or migrating the target and re-hashing the current versions with a full refresh.
async fn retyping_a_source_column_names_the_migration(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', '1', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', '2', 'DE', '2026-03-02T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    let (old, new) = match fx.backend {
        Backend::Postgres | Backend::Citus => {
            fx.exec("ALTER TABLE src_customers ALTER COLUMN tier TYPE integer USING tier::integer")
                .await;
            ("text", "integer")
        }
        Backend::Sqlite => {
            fx.exec(
                "CREATE TABLE src_new (customer_id INTEGER PRIMARY KEY, email TEXT, tier INTEGER, country TEXT,
                                       is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL);
                 INSERT INTO src_new SELECT customer_id, email, tier, country, is_deleted, updated_at FROM src_customers;
                 DROP TABLE src_customers;
                 ALTER TABLE src_new RENAME TO src_customers",
            )
            .await;
            ("TEXT", "INTEGER")
        }
    };
    let log = fx.log().await;
    let dimension = fx.dimension().await;
    let record_sql = "SELECT column_types FROM dimlog_dimensions WHERE dimension = 'customer'";
    let record = fx.target_query(record_sql).await;
    let runs = fx.count("dimlog_runs").await;

    for opts in [upper("2026-03-02T11:00:00Z"), accepting("2026-03-02T11:00:00Z")] {
        let message = refused(&mut fx, opts).await;
        let expected = [
            "track.columns".to_string(),
            format!("source column `tier` changed type from {old} to {new}"),
            format!(
                "UPDATE dimlog_dimensions SET column_types = replace(column_types, '[\"tier\",\"{old}\"]', '[\"tier\",\"{new}\"]') WHERE dimension = 'customer'"
            ),
            "rebuild the dimension from the log and load with a full refresh".to_string(),
        ];
        for needle in expected {
            assert!(message.contains(&needle), "{needle:?} missing from: {message}");
        }
        if fx.backend == Backend::Postgres {
            let alter = "ALTER TABLE \"customer_versions\" ALTER COLUMN \"tier\" TYPE integer USING \"tier\"::integer";
            assert!(message.contains(alter), "{message}");
        }
    }
    let out = fx.cli(&["run", "--upper", "2026-03-02T11:00:00Z"]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("`tier`"), "{}", text(&out.stderr));
    // The library says what to do; the command line names the commands that do it.
    let hint = "hint: `dimlog migrate --column tier` makes the migration above; then `dimlog rebuild`, then `dimlog run --full-refresh`";
    assert!(text(&out.stderr).contains(hint), "{}", text(&out.stderr));
    assert_eq!(fx.log().await, log, "nothing was committed");
    assert_eq!(fx.dimension().await, dimension, "nothing was committed");
    assert_eq!(fx.target_query(record_sql).await, record, "nothing was committed");
    assert_eq!(fx.count("dimlog_runs").await, runs, "nothing was committed");

    // Way out 1: keep the old type by reading the source through a casting view.
    fx.exec(
        "CREATE VIEW src_customers_text AS
         SELECT customer_id, email, CAST(tier AS TEXT) AS tier, country, is_deleted, updated_at FROM src_customers",
    )
    .await;
    fx.set_setting("table", "\"src_customers_text\"");
    let r = fx
        .run_with(RunOptions {
            kind: RunKind::FullRefresh,
            ..upper("2026-03-02T11:00:00Z")
        })
        .await;
    assert_eq!((r.counts.rows_read, appended(&r)), (2, (0, 0, 0, 0)), "{r:?}");

    // Way out 2: the migration the message names (`dimlog migrate`), then rebuild and a
    // full refresh.
    fx.set_setting("table", "\"src_customers\"");
    let out = fx.cli(&["migrate", "--column", "tier"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("column tier migrated from {old} to {new}")),
        "{}",
        text(&out.stdout)
    );
    assert!(
        fx.target_query(record_sql).await[0][0]
            .as_deref()
            .is_some_and(|t| t.contains(&format!("[\"tier\",\"{new}\"]"))),
        "the new type is recorded"
    );
    if fx.backend == Backend::Postgres {
        // The log's column and the dimension's (a rebuild in place keeps the dimension's
        // columns as they are: found by an outside trial).
        for table in ["customer_versions", "dim_customer"] {
            let declared = fx
                .target_query(&format!(
                    "SELECT data_type FROM information_schema.columns WHERE table_name = '{table}' AND column_name = 'tier'"
                ))
                .await;
            assert_eq!(
                declared[0][0].as_deref(),
                Some("integer"),
                "{table}'s column is altered"
            );
        }
    }
    // Nothing left to migrate.
    assert_eq!(fx.cli(&["migrate", "--column", "tier"]).status.code(), Some(2));
    let out = fx.cli(&["rebuild"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let r = fx
        .run_with(RunOptions {
            kind: RunKind::FullRefresh,
            ..upper("2026-03-02T12:00:00Z")
        })
        .await;
    assert_eq!(
        appended(&r),
        (0, 0, 2, 0),
        "each current version is re-hashed by a correction"
    );
    let after = fx.dimension().await;
    for c in [
        "customer_sk",
        "customer_id",
        "tier",
        "valid_from",
        "valid_to",
        "is_current",
    ] {
        assert_eq!(after.values(c), dimension.values(c), "{c} changed");
    }
    let r = fx.run("2026-03-02T12:05:00Z").await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
    assert_verified(&fx, true).await;
}

/// A migration the logged values refuse (the log holds `gold` for a column now integer)
/// changes nothing, exits 1 with its own kind, and says how to keep the old type instead
/// (it was the database's bare error: found by an outside trial).
#[tokio::test]
async fn a_migration_the_logged_values_refuse_changes_nothing_and_says_what_else() {
    let mut fx = Fixture::postgres().await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES \
         (1, 'a@example.com', 'gold', 'NL', '2026-03-02T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET tier = '3'; ALTER TABLE src_customers ALTER COLUMN tier TYPE integer USING tier::integer")
        .await;
    let record_sql = "SELECT column_types FROM dimlog_dimensions WHERE dimension = 'customer'";
    let before = (fx.log().await, fx.dimension().await, fx.target_query(record_sql).await);
    let out = fx.cli(&["--json", "migrate", "--column", "tier"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["error"]["kind"], "not-convertible", "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("column `tier` do not all convert from text to integer")
            && message.contains("gold")
            && message.contains("point source.table at a view that casts `tier` back to text"),
        "{message}"
    );
    assert_eq!(
        (fx.log().await, fx.dimension().await, fx.target_query(record_sql).await),
        before,
        "nothing changed"
    );
}
