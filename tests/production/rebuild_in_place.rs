//! Issue 20, items 1 and 2: `dimlog rebuild`, `run --accept-config-change` and a first
//! load write the dimension in place, so what users added to it survives (grants, extra
//! indexes, comments, views, foreign keys from fact tables, columns of their own with
//! their values), and a reader that began before the rebuild sees the old rows or the
//! new ones, never none, without making the rebuild wait.

use std::time::Duration;

use dimlog::config::Backend;
use dimlog::pipeline::RunOptions;

use super::{cli_exits, database, loaded};
use crate::support::fixture::{on_both_backends, ts, Fixture};

on_both_backends!(
    rebuild_keeps_what_users_added,
    accepted_config_change_keeps_what_users_added,
    first_load_keeps_a_fact_foreign_key,
);

/// Adds to the dimension what users add: an index, a column of their own with a value, a
/// view, a fact table with a foreign key to the surrogate key and one fact per row; on
/// PostgreSQL also a grant and a comment. Returns the reporting role (PostgreSQL).
async fn add_user_objects(fx: &mut Fixture) -> String {
    let role = format!("{}_reporting", database(fx));
    fx.target_exec(
        "CREATE INDEX dim_customer_email_idx ON dim_customer (email);
         ALTER TABLE dim_customer ADD COLUMN note TEXT;
         UPDATE dim_customer SET note = 'vip' WHERE customer_id = 2;
         CREATE VIEW current_customers AS SELECT customer_sk, customer_id, tier FROM dim_customer WHERE is_current;
         CREATE TABLE facts (sale_id INTEGER PRIMARY KEY, customer_sk BIGINT NOT NULL REFERENCES dim_customer (customer_sk));
         INSERT INTO facts (sale_id, customer_sk) SELECT customer_sk, customer_sk FROM dim_customer",
    )
    .await;
    if fx.backend == Backend::Postgres {
        fx.target_exec(&format!(
            "CREATE ROLE \"{role}\";
             GRANT SELECT ON dim_customer TO \"{role}\";
             COMMENT ON TABLE dim_customer IS 'one row per customer version'"
        ))
        .await;
    }
    role
}

/// Asserts that everything [`add_user_objects`] added is still there.
async fn assert_user_objects(fx: &mut Fixture, role: &str, what: &str) {
    let facts = fx.count("facts").await;
    assert!(facts >= 3, "{what}: facts lost: {facts}");
    let notes = fx
        .target_query("SELECT CAST(customer_id AS TEXT), note FROM dim_customer WHERE note IS NOT NULL")
        .await;
    assert_eq!(
        notes,
        vec![vec![Some("2".to_string()), Some("vip".to_string())]],
        "{what}: the user's column lost its value"
    );
    let view = fx
        .target_query("SELECT CAST(customer_id AS TEXT), tier FROM current_customers ORDER BY customer_id")
        .await;
    assert_eq!(view.len(), 2, "{what}: the view: {view:?}");
    assert!(
        view.iter().all(|r| r[1].as_deref() != Some("hacked")),
        "{what}: the view shows the hand edit: {view:?}"
    );
    match fx.backend {
        Backend::Postgres | Backend::Citus => {
            let rows = fx
                .target_query(&format!(
                    "SELECT to_regclass('dim_customer_email_idx')::text,
                            obj_description('dim_customer'::regclass, 'pg_class'),
                            has_table_privilege('{role}', 'dim_customer', 'SELECT')::text,
                            (SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND confrelid = 'dim_customer'::regclass)::text"
                ))
                .await;
            assert_eq!(
                rows[0],
                vec![
                    Some("dim_customer_email_idx".to_string()),
                    Some("one row per customer version".to_string()),
                    Some("true".to_string()),
                    Some("1".to_string()),
                ],
                "{what}: index, comment, grant, foreign key"
            );
        }
        Backend::Sqlite => {
            let rows = fx
                .target_query(
                    "SELECT name FROM sqlite_master WHERE name = 'dim_customer_email_idx'
                     UNION ALL SELECT \"table\" FROM pragma_foreign_key_list('facts')",
                )
                .await;
            assert_eq!(rows.len(), 2, "{what}: index and foreign key: {rows:?}");
            let broken = fx.target_query("PRAGMA foreign_key_check").await;
            assert!(broken.is_empty(), "{what}: facts point at missing rows: {broken:?}");
        }
    }
}

/// `dimlog rebuild` repairs a hand edit and keeps the grant, index, comment, view,
/// foreign key and the user's column with its values.
async fn rebuild_keeps_what_users_added(mut fx: Fixture) {
    loaded(&mut fx).await;
    let role = add_user_objects(&mut fx).await;
    let good = fx.dimension().await;
    fx.target_exec("UPDATE dim_customer SET tier = 'hacked' WHERE customer_id = 1 AND is_current")
        .await;
    cli_exits(&fx, &["rebuild"], 0);
    assert_eq!(fx.dimension().await, good, "the rebuild repairs the hand edit");
    fx.assert_dimension_derives_from_log().await;
    assert_user_objects(&mut fx, &role, "after rebuild").await;
    // Twice: nothing to change the second time.
    cli_exits(&fx, &["rebuild"], 0);
    assert_eq!(fx.dimension().await, good);
    assert_user_objects(&mut fx, &role, "after a second rebuild").await;
    // A load that closes a version facts point at (SQLite and PostgreSQL before 15
    // used to delete and insert the touched keys' rows).
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 1")
        .await;
    assert_eq!(fx.run("2026-03-02T12:00:00Z").await.counts.versions, 1);
    fx.assert_dimension_derives_from_log().await;
    assert_user_objects(&mut fx, &role, "after a load").await;
    // The user's column is theirs: verify finds no fault in it (a daily check would
    // otherwise fail every day, advising a rebuild that changes nothing).
    cli_exits(&fx, &["verify"], 0);
}

/// `run --accept-config-change` adds a tracked column to the dimension, and takes one
/// that is no longer tracked off it, in place: the user's objects survive.
async fn accepted_config_change_keeps_what_users_added(mut fx: Fixture) {
    loaded(&mut fx).await;
    let role = add_user_objects(&mut fx).await;
    fx.exec("ALTER TABLE src_customers ADD COLUMN segment TEXT; UPDATE src_customers SET segment = 'smb'")
        .await;
    fx.set_setting("columns", r#"["email", "tier", "country", "segment"]"#);
    let accept = |upper: &str| RunOptions {
        upper: Some(ts(upper)),
        accept_config_change: true,
        ..RunOptions::incremental()
    };
    fx.run_with(accept("2026-03-02T12:00:00Z")).await;
    fx.assert_dimension_derives_from_log().await;
    let segments = fx
        .target_query("SELECT DISTINCT segment FROM dim_customer WHERE is_current")
        .await;
    assert_eq!(segments, vec![vec![Some("smb".to_string())]]);
    assert_user_objects(&mut fx, &role, "after adding a tracked column").await;

    fx.set_setting("columns", r#"["email", "tier", "segment"]"#);
    fx.run_with(accept("2026-03-02T13:00:00Z")).await;
    fx.assert_dimension_derives_from_log().await;
    let has_country = match fx.backend {
        Backend::Postgres | Backend::Citus => {
            "SELECT attname::text FROM pg_attribute WHERE attrelid = 'dim_customer'::regclass AND attname = 'country' AND NOT attisdropped"
        }
        Backend::Sqlite => "SELECT name FROM pragma_table_info('dim_customer') WHERE name = 'country'",
    };
    assert!(
        fx.target_query(has_country).await.is_empty(),
        "a column no longer tracked leaves the dimension"
    );
    assert_user_objects(&mut fx, &role, "after removing a tracked column").await;
}

/// A fact table's foreign key to the dimension made after `init` does not stop the first
/// load (which used to drop the dimension's primary key to fill it faster).
async fn first_load_keeps_a_fact_foreign_key(mut fx: Fixture) {
    cli_exits(&fx, &["init"], 0);
    fx.target_exec(
        "CREATE TABLE facts (sale_id INTEGER PRIMARY KEY, customer_sk BIGINT REFERENCES dim_customer (customer_sk))",
    )
    .await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
         (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(fx.count("dim_customer").await, 1);
    fx.target_exec("INSERT INTO facts (sale_id, customer_sk) SELECT 1, customer_sk FROM dim_customer")
        .await;
    fx.assert_dimension_derives_from_log().await;
}

/// A column no longer tracked that a view uses is not dropped with the view: the
/// refusal names the view and the column (exit 2), and nothing is committed.
#[tokio::test]
async fn a_view_over_a_column_no_longer_tracked_is_named() {
    let mut fx = Fixture::postgres().await;
    loaded(&mut fx).await;
    fx.target_exec("CREATE VIEW customer_countries AS SELECT customer_id, country FROM dim_customer")
        .await;
    fx.set_setting("columns", r#"["email", "tier"]"#);
    let stderr = cli_exits(&fx, &["run", "--accept-config-change"], 2);
    for needle in ["customer_countries", "`country`", "dim_customer"] {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
    let view = fx.target_query("SELECT count(*)::text FROM customer_countries").await;
    assert_eq!(view[0][0].as_deref(), Some("3"));
}

/// A REPEATABLE READ reader that read the dimension before a rebuild reads the same rows
/// after the rebuild committed (never none), and holding its transaction open does not
/// make the rebuild wait.
#[tokio::test]
async fn a_repeatable_read_reader_sees_rows_throughout_a_rebuild() {
    let mut fx = Fixture::postgres().await;
    loaded(&mut fx).await;
    let mut reader = dimlog::db::Conn::connect(&fx.plan().target.url).await.expect("reader");
    let count = "SELECT count(*)::text FROM dim_customer";
    reader
        .execute_script("reader", "BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .expect("begin");
    let before = reader.query_text("reader", count, &[]).await.expect("count");
    assert_eq!(before[0][0].as_deref(), Some("3"));
    fx.target_exec("UPDATE dim_customer SET tier = 'hacked' WHERE customer_id = 1 AND is_current")
        .await;
    let config = fx.config_path();
    let dir = fx.dir().to_path_buf();
    let rebuild = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_dimlog"))
            .arg("--config")
            .arg(config)
            .arg("rebuild")
            .current_dir(dir)
            .env_remove("DIMLOG_TARGET_URL")
            .env_remove("DIMLOG_SOURCE_URL")
            .output()
            .expect("run dimlog")
    });
    let mut rebuild = Box::pin(rebuild);
    let finished = tokio::time::timeout(Duration::from_secs(30), &mut rebuild).await;
    let blocked = finished.is_err();
    let during = reader.query_text("reader", count, &[]).await;
    reader.execute_script("reader", "COMMIT").await.expect("commit");
    let out = match finished {
        Ok(out) => out.expect("join"),
        Err(_) => rebuild.await.expect("join"),
    };
    assert!(!blocked, "the rebuild waited for a reader of the dimension");
    assert_eq!(out.status.code(), Some(0), "{}", super::text(&out.stderr));
    assert_eq!(
        during.expect("the reader can still read the dimension")[0][0].as_deref(),
        Some("3"),
        "the reader sees the rows of its snapshot"
    );
    let after = fx
        .target_query("SELECT count(*)::text FROM dim_customer WHERE tier = 'hacked'")
        .await;
    assert_eq!(after[0][0].as_deref(), Some("0"));
}

/// A rebuild that has to wait for a lock on the dimension (another session holds a
/// lock that conflicts with writing it) says on what, and whose, after a few seconds,
/// then goes on once the lock is released.
#[tokio::test]
async fn a_rebuild_waiting_for_a_lock_says_on_what() {
    let mut fx = Fixture::postgres().await;
    loaded(&mut fx).await;
    let mut holder = dimlog::db::Conn::connect(&fx.plan().target.url).await.expect("holder");
    holder
        .execute_script(
            "holder",
            "SET application_name = 'nightly_index_job'; BEGIN; LOCK TABLE dim_customer IN SHARE MODE",
        )
        .await
        .expect("lock");
    let config = fx.config_path();
    let dir = fx.dir().to_path_buf();
    let rebuild = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_dimlog"))
            .arg("--config")
            .arg(config)
            .arg("rebuild")
            .current_dir(dir)
            .env_remove("DIMLOG_TARGET_URL")
            .env_remove("DIMLOG_SOURCE_URL")
            .env_remove("RUST_LOG")
            .output()
            .expect("run dimlog")
    });
    tokio::time::sleep(Duration::from_secs(9)).await;
    holder.execute_script("holder", "COMMIT").await.expect("release");
    let out = tokio::time::timeout(Duration::from_secs(60), rebuild)
        .await
        .expect("the rebuild goes on once the lock is released")
        .expect("join");
    let stderr = super::text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for needle in ["dim_customer", "nightly_index_job", "ShareLock"] {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
}

/// SQLite cannot change a declared column type or add a primary key: a dimension copied
/// by hand (`CREATE TABLE … AS`, which loses both) is created again by `rebuild` only
/// when that loses nothing; with a view over it the refusal names the view (exit 2).
#[tokio::test]
async fn sqlite_recreates_a_hand_copied_dimension_only_when_nothing_is_lost() {
    let mut fx = Fixture::sqlite().await;
    loaded(&mut fx).await;
    let good = fx.dimension().await;
    fx.target_exec(
        "CREATE TABLE dim_copy AS SELECT * FROM dim_customer; DROP TABLE dim_customer;
         ALTER TABLE dim_copy RENAME TO dim_customer;
         CREATE VIEW customer_view AS SELECT customer_id FROM dim_customer",
    )
    .await;
    let stderr = cli_exits(&fx, &["rebuild"], 2);
    for needle in ["view customer_view", "dim_customer", "customer_sk"] {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
    fx.target_exec("DROP VIEW customer_view").await;
    cli_exits(&fx, &["rebuild"], 0);
    assert_eq!(fx.dimension().await, good);
    let pk = fx
        .target_query("SELECT name FROM pragma_table_info('dim_customer') WHERE pk = 1")
        .await;
    assert_eq!(pk, vec![vec![Some("customer_sk".to_string())]]);
    fx.assert_dimension_derives_from_log().await;
}
