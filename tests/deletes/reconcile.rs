//! Hard deletes (spec 1.4, `[deletes]`): reconciliation closes live keys missing from the
//! source with a tombstone at the run's upper bound, never more than
//! `deletes.max_fraction` of them without `--allow-mass-delete`.

use dimlog::pipeline::RunOptions;

use super::{assert_verify_passes, text, verify_cli};
use crate::support::fixture::{assert_snapshot, on_every_engine, summary, ts, Fixture};

on_every_engine!(
    emptied_source_trips_the_mass_delete_guard,
    the_mass_delete_guard_decides_at_its_boundary,
    hard_deletes_and_the_revenue_figure,
    deleted_key_returns_with_a_new_surrogate_key,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

fn upper(text: &str) -> RunOptions {
    RunOptions {
        upper: Some(ts(text)),
        ..RunOptions::incremental()
    }
}

/// The surrogate keys of one customer's dimension rows, in valid_from order.
async fn surrogate_keys(fx: &mut Fixture, customer: &str) -> Vec<String> {
    fx.dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some(customer))
        .map(|r| r["customer_sk"].clone().expect("a surrogate key"))
        .collect()
}

/// Revenue in cents: the orders of current customers.
async fn revenue(fx: &mut Fixture) -> i64 {
    let sql = "SELECT CAST(SUM(f.amount_cents) AS TEXT) FROM orders_fact f \
               JOIN dim_customer d ON d.customer_id = f.customer_id AND d.is_current";
    let rows = fx.target_query(sql).await;
    rows[0][0].as_deref().expect("a sum").parse().expect("cents")
}

/// With `deletes.hard = "reconcile"`, an emptied source table would close every key: the
/// guard refuses (exit 1, `Error::MassDelete`, saying how many keys and how to go on)
/// and nothing is committed but the failed run's record; with `--allow-mass-delete` every
/// key is closed by a tombstone at the run's upper bound.
async fn emptied_source_trips_the_mass_delete_guard(mut fx: Fixture) {
    fx.set_setting("hard", "\"reconcile\"");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:00:00Z'),
                  (4, 'dee@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (5, 'eve@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    assert_eq!(fx.run("2026-03-02T10:00:00Z").await.counts.versions, 5);
    let (log, dimension, watermark) = (fx.log().await, fx.dimension().await, fx.watermark().await);

    fx.exec("DELETE FROM src_customers").await;
    let e = fx
        .try_run_with(upper("2026-03-02T11:00:00Z"))
        .await
        .expect_err("the mass-delete guard trips");
    let dimlog::Error::MassDelete { would_close, live, .. } = &e else {
        panic!("expected Error::MassDelete, got {e:?}");
    };
    assert_eq!((*would_close, *live), (5, 5));
    assert_eq!(e.exit_code(), 1);
    let message = e.to_string();
    for needle in [
        "close 5 of 5 live keys",
        "allow the mass delete for one run",
        "nothing was committed",
    ] {
        assert!(message.contains(needle), "{needle:?} missing from: {message}");
    }
    let out = fx.cli(&["run", "--upper", "2026-03-02T11:00:00Z"]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("5 of 5")
            && stderr.contains("hint: if the source really lost them, rerun with --allow-mass-delete"),
        "{stderr}"
    );
    assert_eq!(fx.log().await, log, "nothing was committed");
    assert_eq!(fx.dimension().await, dimension, "nothing was committed");
    assert_eq!(fx.watermark().await, watermark, "nothing was committed");
    let runs = fx.runs().await.records();
    assert_eq!(runs.len(), 3, "the first run and two failed records: {runs:?}");
    for r in &runs[1..] {
        assert_eq!(r["status"].as_deref(), Some("failed"));
        assert!(
            r["error"]
                .as_deref()
                .is_some_and(|e| e.contains("allow the mass delete")),
            "{r:?}"
        );
    }

    let r = fx
        .run_with(RunOptions {
            allow_mass_delete: true,
            ..upper("2026-03-02T11:00:00Z")
        })
        .await;
    assert_eq!(
        (r.counts.versions, r.counts.tombstones, r.reconciled_deletes),
        (0, 5, 5)
    );
    let dim = fx.dimension().await;
    assert_eq!(dim.rows.len(), 5);
    assert!(dim.values("is_current").iter().all(|c| c.as_deref() == Some("false")));
    assert!(
        dim.values("valid_to")
            .iter()
            .all(|t| t.as_deref() == Some("2026-03-02T11:00:00.000000Z")),
        "every key closes at the run's upper bound: {dim:?}"
    );
    let tombstones: Vec<_> = fx
        .log()
        .await
        .records()
        .into_iter()
        .filter(|r| r["is_deleted"].as_deref() == Some("true"))
        .collect();
    assert_eq!(tombstones.len(), 5);
    for t in &tombstones {
        assert_eq!(t["customer_sk"], None, "a tombstone has no surrogate key: {t:?}");
        assert_eq!(t["valid_from"].as_deref(), Some("2026-03-02T11:00:00.000000Z"));
    }
    fx.assert_dimension_derives_from_log().await;

    // Nothing is live any more: the next run closes nothing and appends nothing.
    let log = fx.log().await;
    let r = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!((r.counts.tombstones, r.reconciled_deletes), (0, 0));
    assert_eq!(fx.log().await, log);
    assert_verify_passes(&fx, true);
}

/// The guard trips when more than `max_fraction` of the live keys would close, and not at
/// exactly that share. Live keys are counted only as far as the guard needs (a run
/// closing one key of 30 stops counting at 11), yet a tripped guard reports the exact
/// number of live keys.
async fn the_mass_delete_guard_decides_at_its_boundary(mut fx: Fixture) {
    fx.set_setting("hard", "\"reconcile\"");
    fx.set_setting("max_fraction", "0.1");
    let values: Vec<String> = (1..=30)
        .map(|i| format!("({i}, 'c{i}@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')"))
        .collect();
    fx.exec(&format!("{INSERT} {}", values.join(", "))).await;
    assert_eq!(fx.run("2026-03-02T10:00:00Z").await.counts.versions, 30);

    let guard = |e: dimlog::Error| match e {
        dimlog::Error::MassDelete { would_close, live, .. } => (would_close, live),
        other => panic!("expected Error::MassDelete, got {other:?}"),
    };
    // 4 of 30 > 10%: refused, with the exact count of live keys.
    fx.exec("DELETE FROM src_customers WHERE customer_id IN (1, 2, 3, 4)")
        .await;
    let e = fx
        .try_run_with(upper("2026-03-02T11:00:00Z"))
        .await
        .expect_err("4 of 30");
    assert_eq!(guard(e), (4, 30));

    // 1 of 30: closed.
    fx.exec(&format!(
        "{INSERT} (2, 'c2@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (3, 'c3@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (4, 'c4@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T11:00:00Z").await;
    assert_eq!((r.counts.tombstones, r.reconciled_deletes), (1, 1));

    // 3 of 29 live (10.3%): refused, 29 counted exactly.
    fx.exec("DELETE FROM src_customers WHERE customer_id IN (5, 6, 7)")
        .await;
    let e = fx
        .try_run_with(upper("2026-03-02T12:00:00Z"))
        .await
        .expect_err("3 of 29");
    assert_eq!(guard(e), (3, 29));

    // 2 of 29 (6.9%): closed; then 2 of 27 would be 7.4%: closed too.
    fx.exec(&format!(
        "{INSERT} (7, 'c7@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!(r.reconciled_deletes, 2);
    fx.exec("DELETE FROM src_customers WHERE customer_id IN (8, 9)").await;
    let r = fx.run("2026-03-02T13:00:00Z").await;
    assert_eq!(r.reconciled_deletes, 2);
    assert_verify_passes(&fx, true);
}

/// The revenue example (seed 000): orders 5001–5005 sit in a fact table; the customers
/// who placed 5003 and 5005 (test accounts) are hard-deleted from the source at 03:10,
/// and customer 2 changed at 02:00. Revenue is summed over the facts of current customers.
/// With `hard = "ignore"` the 04:00 run loads customer 2 and leaves 3 and 5 current, so
/// the figure is 135.01 too high; reconciliation closes them and the figure is right.
async fn hard_deletes_and_the_revenue_figure(mut fx: Fixture) {
    // Two of five customers is 40 % of the live keys: above the default guard of 10 %.
    fx.set_setting("max_fraction", "0.5");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-09-13T08:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-09-13T09:00:00Z'),
                  (3, 'test-3@example.com', 'free', 'NL', '2026-09-13T10:00:00Z'),
                  (4, 'dee@example.com', 'pro', 'FR', '2026-09-13T11:00:00Z'),
                  (5, 'test-5@example.com', 'free', 'DE', '2026-09-13T12:00:00Z')"
    ))
    .await;
    assert_eq!(fx.run("2026-09-14T04:00:00Z").await.counts.versions, 5);
    fx.target_exec(
        "CREATE TABLE orders_fact (order_id integer PRIMARY KEY, customer_id integer NOT NULL, amount_cents integer NOT NULL);
         INSERT INTO orders_fact VALUES (5001, 1, 4990), (5002, 2, 12000), (5003, 3, 8502), (5004, 4, 6000), (5005, 5, 4999)",
    )
    .await;
    assert_eq!(revenue(&mut fx).await, 36491);

    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-09-15T02:00:00Z' WHERE customer_id = 2")
        .await;
    fx.exec("DELETE FROM src_customers WHERE customer_id IN (3, 5)").await;
    let r = fx.run("2026-09-15T04:00:00Z").await;
    assert_eq!((r.counts.versions, r.counts.tombstones), (1, 0));
    let right = 4990 + 12000 + 6000;
    assert_eq!(
        revenue(&mut fx).await - right,
        13501,
        "hard = \"ignore\": 135.01 too high"
    );
    let (code, failing) = verify_cli(&fx, true);
    assert_eq!(code, 3);
    assert_eq!(failing.keys().collect::<Vec<_>>(), ["source_extra"], "{failing:#?}");
    let extra: Vec<&str> = failing["source_extra"]
        .iter()
        .map(|e| e.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(extra, ["3", "5"], "{failing:#?}");
    let mut snap = format!(
        "== 04:00, hard = \"ignore\"\n{}\n\n{}\n",
        summary(&r),
        fx.dump_dimension().await
    );

    fx.set_setting("hard", "\"reconcile\"");
    let r = fx.run("2026-09-15T04:15:00Z").await;
    assert_eq!(
        (r.counts.versions, r.counts.tombstones, r.reconciled_deletes),
        (0, 2, 2)
    );
    assert_eq!(revenue(&mut fx).await, right, "revenue over current customers is right");
    assert_eq!(surrogate_keys(&mut fx, "3").await, ["3"]);
    fx.assert_dimension_derives_from_log().await;
    snap += &format!(
        "== 04:15, hard = \"reconcile\"\n{}\n\n{}\n{}\n",
        summary(&r),
        fx.dump_dimension().await,
        fx.dump_log().await
    );
    assert_verify_passes(&fx, true);
    assert_snapshot(
        "hard_deletes_and_the_revenue_figure",
        "Customers 3 and 5 hard-deleted at 03:10: current before and closed after reconciliation",
        &snap,
    );
}

/// A key deleted from the source is closed by reconciliation; when it comes back (even
/// with the same values) it opens a new version with a new surrogate key, and the gap
/// between the tombstone and its return is the only gap `verify` accepts.
async fn deleted_key_returns_with_a_new_surrogate_key(mut fx: Fixture) {
    fx.set_setting("hard", "\"reconcile\"");
    fx.set_setting("max_fraction", "0.5");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let (r, mut snap) = fx.step("2026-03-02T10:00:00Z").await;
    assert_eq!(r.counts.versions, 3);

    fx.exec("DELETE FROM src_customers WHERE customer_id = 2").await;
    let (r, s) = fx.step("2026-03-02T11:00:00Z").await;
    snap += &s;
    assert_eq!((r.counts.tombstones, r.reconciled_deletes), (1, 1));
    assert!(fx
        .dimension()
        .await
        .records()
        .iter()
        .filter(|r| r["customer_id"].as_deref() == Some("2"))
        .all(|r| r["is_current"].as_deref() == Some("false")));

    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-02T11:30:00Z')"
    ))
    .await;
    let (r, s) = fx.step("2026-03-02T12:00:00Z").await;
    snap += &s;
    assert_eq!(
        (r.counts.versions, r.counts.tombstones, r.reconciled_deletes),
        (1, 0, 0)
    );
    assert_eq!(surrogate_keys(&mut fx, "2").await, ["2", "4"]);
    let rows: Vec<_> = fx
        .dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some("2"))
        .map(|r| (r["valid_from"].clone(), r["valid_to"].clone(), r["is_current"].clone()))
        .collect();
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        rows,
        [
            (
                s("2026-03-02T09:00:00.000000Z"),
                s("2026-03-02T11:00:00.000000Z"),
                s("false")
            ),
            (
                s("2026-03-02T11:30:00.000000Z"),
                s("9999-12-31T00:00:00.000000Z"),
                s("true")
            ),
        ]
    );
    assert_verify_passes(&fx, true);
    assert_snapshot(
        "deleted_key_returns_with_a_new_surrogate_key",
        "Customer 2 is hard-deleted (tombstone at upper), then returns with a new surrogate key",
        &snap,
    );
}
