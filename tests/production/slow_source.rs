//! Issue 20, item 10: the target's transaction never waits idle on the source. A server
//! with `idle_in_transaction_session_timeout` kills a session that sits in a transaction
//! without a statement; a run whose source answers slowly must read it before it opens
//! the target's transaction (or keep that transaction busy while it reads).

use super::{cli_exits, database, text};
use crate::support::fixture::Fixture;

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

/// Every statement on the source takes 1.5 s (a `source.query` that sleeps first), and
/// the database ends any session idle in a transaction for 1 s. A first load, a run with
/// changes, and a run that reconciles hard deletes and reads a key stamped behind its
/// window (restored from a backup) all commit, and the dimension is the log's.
#[tokio::test]
async fn a_slow_source_does_not_leave_the_target_idle_in_a_transaction() {
    let mut fx = Fixture::postgres().await;
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'BE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.set_setting(
        "table",
        "\"src_customers\"\nquery = \"SELECT c.* FROM src_customers c CROSS JOIN (SELECT pg_sleep(1.5)) AS slow\"",
    );
    let config = fx.config().replacen("table = \"src_customers\"\n", "", 1);
    fx.set_config(config);
    let db = database(&fx);
    fx.exec(&format!(
        "ALTER DATABASE \"{db}\" SET idle_in_transaction_session_timeout = '1s'"
    ))
    .await;

    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T10:30:00Z' WHERE customer_id = 1")
        .await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 0);

    // Key 2 is deleted at the source; key 4 arrives with a stamp behind every window.
    fx.exec("DELETE FROM src_customers WHERE customer_id = 2").await;
    fx.exec(&format!(
        "{INSERT} (4, 'dee@example.com', 'free', 'NL', '2026-03-01T08:00:00Z')"
    ))
    .await;
    let out = fx.cli(&[
        "run",
        "--upper",
        "2026-03-02T12:00:00Z",
        "--reconcile-deletes",
        "--allow-mass-delete",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["reconciled_deletes"], 1, "{v}");
    let current: Vec<String> = fx
        .target_query("SELECT customer_id::text FROM dim_customer WHERE is_current ORDER BY 1")
        .await
        .into_iter()
        .map(|r| r[0].clone().expect("a key"))
        .collect();
    assert_eq!(current, ["1", "3", "4"]);
    fx.assert_dimension_derives_from_log().await;
}
