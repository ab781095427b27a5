//! A worker that fails between Citus's two commit phases leaves a transaction committed
//! on the coordinator and still prepared on the worker, until Citus recovers it (its
//! maintenance daemon, once a minute by default). Whatever that transaction wrote is
//! invisible on that worker's shards meanwhile: a run reading then would miss it (a
//! source change, or versions of an earlier run, which it would append again with new
//! surrogate keys; seen in a new-user trial with a worker killed mid-commit).

use crate::support::fixture::Fixture;

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

/// Leaves, on the worker that holds customer `id`'s shard of the (distributed)
/// `src_customers`, a prepared transaction inserting that customer, which the coordinator
/// records as committed: the state a worker failing during the commit leaves. Returns
/// the worker as `host:port`.
async fn half_commit_a_new_customer(fx: &mut Fixture, id: i64, updated_at: &str) -> String {
    let placement = fx
        .target_query(&format!(
            "SELECT s.nodename::text, s.nodeport::text, shard_name('src_customers'::regclass, s.shardid)::text, \
                    n.groupid::text \
             FROM citus_shards s JOIN pg_dist_node n ON n.nodename = s.nodename AND n.nodeport = s.nodeport \
             WHERE s.shardid = get_shard_id_for_distribution_column('src_customers', {id})"
        ))
        .await;
    let cell = |i: usize| placement[0][i].clone().expect("a placement");
    let (host, port, shard, group) = (cell(0), cell(1), cell(2), cell(3));
    let mut worker_url = url::Url::parse(&fx.target_url).expect("url");
    worker_url.set_host(Some(&host)).expect("host");
    worker_url.set_port(Some(port.parse().expect("port"))).expect("port");
    let mut worker = crate::support::fixture::connect("worker", worker_url.as_str()).await;
    // Citus's name for a transaction it prepared for the coordinator (group 0).
    let gid = format!("citus_0_{}_{id}_1", std::process::id());
    worker
        .execute_script(
            "half a commit",
            &format!(
                "BEGIN; INSERT INTO {shard} (customer_id, email, tier, country, updated_at) \
                 VALUES ({id}, 'late@x', 'pro', 'NL', '{updated_at}'); PREPARE TRANSACTION '{gid}'"
            ),
        )
        .await
        .expect("a prepared transaction on the worker");
    // The coordinator's record of the decision, as Citus writes it: in the transaction
    // it commits, with no outer transaction (0).
    fx.target_exec(&format!(
        "INSERT INTO pg_dist_transaction (groupid, gid, outer_xid) VALUES ({group}, '{gid}', '0')"
    ))
    .await;
    let _ = worker.close().await;
    format!("{host}:{port}")
}

/// A role that may not run Citus's recovery is refused, naming the worker, and nothing
/// is read or written, by a run and by commands that only read; a role that may (a
/// superuser here) finishes the commit first, and its run loads the customer that
/// commit inserted.
#[tokio::test]
async fn a_run_finishes_or_refuses_a_commit_left_prepared_on_a_worker() {
    use crate::production::least_privilege::{connect_as, url_as};
    let mut fx = Fixture::citus().await;
    let unique = format!("{}_{}", crate::production::database(&fx), std::process::id());
    let loader = format!("{unique}_unsettled");
    fx.exec(&format!(
        "{INSERT} (1, 'a@x', 'free', 'DE', '2026-03-01T09:00:00Z'), (2, 'b@x', 'pro', 'FR', '2026-03-01T09:00:00Z')"
    ))
    .await;
    fx.target_exec("SELECT create_distributed_table('src_customers', 'customer_id')")
        .await;
    fx.run("2026-03-01T10:00:00Z").await;
    fx.target_exec(&format!(
        "CREATE ROLE \"{loader}\" LOGIN;
         GRANT USAGE, CREATE ON SCHEMA public TO \"{loader}\";
         GRANT SELECT ON src_customers TO \"{loader}\";
         GRANT SELECT, INSERT ON customer_versions TO \"{loader}\";
         GRANT SELECT, INSERT, UPDATE, DELETE ON dim_customer TO \"{loader}\";
         GRANT SELECT, INSERT, UPDATE ON dimlog_state, dimlog_runs, dimlog_assigned TO \"{loader}\";
         GRANT SELECT, UPDATE ON dimlog_dimensions TO \"{loader}\""
    ))
    .await;
    let worker = half_commit_a_new_customer(&mut fx, 3, "2026-03-01T10:30:00Z").await;
    assert_eq!(fx.count("src_customers").await, 2, "the half commit is visible");
    let owner_url = fx.target_url.clone();
    let shown = |out: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };

    let loader_url = url_as(&fx, &loader);
    connect_as(&mut fx, &loader_url);
    let runs_before = fx.count("dimlog_runs").await;
    let out = fx.cli(&["--json", "run", "--upper", "2026-03-01T11:00:00Z"]);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    assert!(
        shown(&out).contains(&format!("has not been committed yet on {worker}"))
            && shown(&out).contains("\"kind\":\"unsettled-commit\"")
            && shown(&out).contains("recover_prepared_transactions()"),
        "{}",
        shown(&out)
    );
    assert_eq!(fx.count("dimlog_runs").await, runs_before, "a refused run wrote");
    assert_eq!(fx.count("customer_versions").await, 2);
    // Commands that only read are refused too (verify took the missing half for rows
    // deleted from the log, and advised starting the dimension over).
    for args in [
        &["--json", "verify"][..],
        &["--json", "lookup", "--key", "1", "--at", "2026-03-01T09:30:00Z"],
    ] {
        let out = fx.cli(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", shown(&out));
        assert!(
            shown(&out).contains("\"kind\":\"unsettled-commit\"") && shown(&out).contains(&worker),
            "{args:?}: {}",
            shown(&out)
        );
    }

    connect_as(&mut fx, &owner_url);
    let out = fx.cli(&["--json", "run", "--upper", "2026-03-01T11:00:00Z"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert_eq!(fx.count("src_customers").await, 3, "the commit was not finished");
    let loaded = fx
        .target_query("SELECT customer_id::text, tier FROM dim_customer WHERE customer_id = 3")
        .await;
    assert_eq!(
        loaded,
        vec![vec![Some("3".to_string()), Some("pro".to_string())]],
        "the customer the half commit inserted was not loaded"
    );
}
