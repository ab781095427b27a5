//! A value read as a boolean must spell one. The soft-delete flag, read as "not true",
//! turned `'deleted'`, `'maybe'` or `2` into a live row, and a SQLite BOOLEAN column read
//! `'maybe'` as false: facts the source does not state, loaded without a word. A kept row
//! whose flag (or boolean column) spells neither true nor false now fails the run (exit 1,
//! kind `source`), naming the column, its setting, the value and the key; nothing is
//! written. NULL stays live; rows the window does not keep are not looked at. Every path
//! a row travels: PostgreSQL's COPY text, SQLite's pump, and the parsed rows of
//! PostgreSQL to SQLite.

use dimlog::config::Backend;

use super::text;
use crate::support::fixture::{on_every_engine, Fixture};

on_every_engine!(a_flag_that_spells_neither_fails_the_run_naming_it);

/// Values that spell neither true nor false, as SQL literals.
const NEITHER: &[&str] = &["'deleted'", "'maybe'", "'2'", "'-1'", "'oui'", "'tru'"];

/// `(log rows, dimension rows, watermark)`: what a refused run must leave as it was (its
/// own record of failure aside).
async fn trace(fx: &mut Fixture) -> (i64, i64, Option<String>) {
    (
        fx.count("customer_versions").await,
        fx.count("dim_customer").await,
        fx.watermark().await,
    )
}

async fn a_flag_that_spells_neither_fails_the_run_naming_it(mut fx: Fixture) {
    if fx.backend == Backend::Sqlite {
        // A flag that may be NULL.
        fx.exec("DROP TABLE src_customers").await;
        fx.exec(
            "CREATE TABLE src_customers (customer_id INTEGER PRIMARY KEY, email TEXT, tier TEXT, country TEXT, \
             is_deleted BOOLEAN, updated_at TEXT NOT NULL)",
        )
        .await;
    } else {
        // A flag of any type: here text, as a status column often is.
        fx.exec("ALTER TABLE src_customers ALTER COLUMN is_deleted DROP DEFAULT")
            .await;
        fx.exec("ALTER TABLE src_customers ALTER COLUMN is_deleted TYPE text USING is_deleted::text")
            .await;
        fx.exec("ALTER TABLE src_customers ALTER COLUMN is_deleted DROP NOT NULL")
            .await;
    }
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, is_deleted, updated_at) VALUES
         (1, 'a@x', 'free', 'FR', 'no', '2026-03-02T09:00:00Z'),
         (2, 'b@x', 'free', 'DE', ' Yes ', '2026-03-02T09:00:00Z'),
         (3, 'c@x', 'free', 'NL', '0', '2026-03-02T09:00:00Z'),
         (4, 'd@x', 'free', 'BE', 'n', '2026-03-01T09:00:00Z'),
         (5, 'e@x', 'free', 'IT', NULL, '2026-03-02T09:00:00Z')",
    )
    .await;
    let report = fx.run("2026-03-02T10:00:00Z").await;
    assert_eq!(report.counts.rows_read, 5);
    assert_eq!(
        report.unseen_deletes + report.counts.tombstones,
        1,
        "key 2 only: {report:?}"
    );
    let live = fx.dimension().await.values("customer_id");
    assert_eq!(live.len(), 4, "keys 1, 3, 4 and 5 live: {live:?}");

    // A value outside every later window is not looked at: key 4 keeps an odd flag, stamped
    // long before the watermark.
    fx.exec("UPDATE src_customers SET is_deleted = 'unknown' WHERE customer_id = 4")
        .await;
    for (i, neither) in NEITHER.iter().enumerate() {
        let at = format!("2026-03-02T10:{:02}:00Z", 10 + i);
        fx.exec(&format!(
            "UPDATE src_customers SET is_deleted = {neither}, tier = 'pro', updated_at = '{at}' WHERE customer_id = 1"
        ))
        .await;
        let before = trace(&mut fx).await;
        let upper = format!("2026-03-02T11:{:02}:00Z", i);
        let err = fx
            .try_run_with(dimlog::pipeline::RunOptions {
                upper: Some(crate::support::fixture::ts(&upper)),
                ..dimlog::pipeline::RunOptions::incremental()
            })
            .await
            .expect_err("a flag that is neither true nor false");
        let message = err.to_string();
        let value = neither.trim_matches('\'');
        for needle in [
            "`is_deleted`",
            "source.deleted_flag",
            &format!("{value:?}"),
            "key (1)",
            "nothing was written",
        ] {
            assert!(message.contains(needle), "{needle:?} not in: {message}");
        }
        assert_eq!(err.kind(), "source");
        assert_eq!(trace(&mut fx).await, before, "{neither}: nothing written");
    }
    // Through the CLI: exit 1, kind `source`.
    let out = fx.cli(&["run", "--upper", "2026-03-02T11:30:00Z", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\"source\""), "{}", text(&out.stdout));

    // Fixed at the source, key 1 would load; reconciling deletes reads every row's flag,
    // key 4's too: refused, naming it.
    fx.exec("UPDATE src_customers SET is_deleted = 'N', updated_at = '2026-03-02T11:40:00Z' WHERE customer_id = 1")
        .await;
    let before = trace(&mut fx).await;
    let err = fx
        .try_run_with(dimlog::pipeline::RunOptions {
            upper: Some(crate::support::fixture::ts("2026-03-02T11:45:00Z")),
            reconcile_deletes: true,
            ..dimlog::pipeline::RunOptions::incremental()
        })
        .await
        .expect_err("a flag that spells neither, read by reconciliation");
    let message = err.to_string();
    for needle in ["`is_deleted`", "source.deleted_flag", "key (4)"] {
        assert!(message.contains(needle), "{needle:?} not in: {message}");
    }
    assert_eq!(trace(&mut fx).await, before, "reconciliation: nothing written");
    fx.exec("UPDATE src_customers SET is_deleted = ' no ' WHERE customer_id = 4")
        .await;
    // Both fixed: the change loads.
    let report = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!(report.counts.versions, 1, "{report:?}");
    fx.assert_dimension_derives_from_log().await;
}

/// A SQLite BOOLEAN column tracked: a value that spells neither true nor false fails the
/// run naming the column and its setting (it loaded as false before).
#[tokio::test]
async fn a_sqlite_boolean_column_that_spells_neither_fails_the_run() {
    let mut fx = Fixture::sqlite().await;
    fx.exec("ALTER TABLE src_customers ADD COLUMN vip BOOLEAN").await;
    fx.edit_config(
        "columns = [\"email\", \"tier\", \"country\"]",
        "columns = [\"email\", \"tier\", \"country\", \"vip\"]",
    );
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, vip, updated_at) VALUES
         (1, 'a@x', 'free', 'FR', 'yes', '2026-03-02T09:00:00Z'),
         (2, 'b@x', 'free', 'DE', 'perhaps', '2026-03-02T09:00:00Z')",
    )
    .await;
    let err = fx
        .try_run_with(dimlog::pipeline::RunOptions {
            upper: Some(crate::support::fixture::ts("2026-03-02T10:00:00Z")),
            ..dimlog::pipeline::RunOptions::incremental()
        })
        .await
        .expect_err("a boolean column holding 'perhaps'");
    let message = err.to_string();
    for needle in ["`vip`", "track.columns", "\"perhaps\"", "key (2)"] {
        assert!(message.contains(needle), "{needle:?} not in: {message}");
    }
    assert!(!fx.target_has_table("customer_versions").await || fx.count("customer_versions").await == 0);
}
