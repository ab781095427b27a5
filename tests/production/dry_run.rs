//! Issue 20, item 9: `run --dry-run` computes its counts with reads alone. It used to run
//! the load and roll it back (hundreds of MB of WAL and dead tuples for a large change)
//! while saying "nothing written".

use super::{cli_exits, database, loaded, text};
use crate::support::fixture::Fixture;

/// Statement triggers on the log and the dimension call `nextval` of a sequence, which no
/// rollback undoes: a dry run that wrote to either table, even in a transaction it rolled
/// back, leaves the sequence advanced. The dry run's counts are those of the real run that
/// follows (an update, a correction, a hard delete and two new keys), which
/// does advance the sequence.
#[tokio::test]
async fn a_dry_run_writes_nothing_not_even_rolled_back() {
    let mut fx = Fixture::postgres().await;
    loaded(&mut fx).await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at)
           VALUES (5, 'eve@example.com', 'pro', 'IT', '2026-03-02T11:05:00Z'),
                  (6, 'fay@example.com', 'pro', 'IT', '2026-03-02T11:05:00Z')",
    )
    .await;
    fx.run("2026-03-02T11:10:00Z").await;
    fx.exec(
        "UPDATE src_customers SET country = 'ES', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 1;
         UPDATE src_customers SET email = 'eve@example.org' WHERE customer_id = 5;
         INSERT INTO src_customers (customer_id, email, tier, country, updated_at)
           VALUES (3, 'cyd@example.com', 'free', 'BE', '2026-03-02T11:40:00Z'),
                  (4, 'dee@example.com', 'free', 'NL', '2026-03-02T11:45:00Z');
         DELETE FROM src_customers WHERE customer_id = 6;",
    )
    .await;
    fx.target_exec(
        "CREATE SEQUENCE dimlog_test_writes;
         CREATE FUNCTION dimlog_test_note_write() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN PERFORM nextval('dimlog_test_writes'); RETURN NULL; END $$;
         CREATE TRIGGER note_log AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON customer_versions
           FOR EACH STATEMENT EXECUTE FUNCTION dimlog_test_note_write();
         CREATE TRIGGER note_dim AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dim_customer
           FOR EACH STATEMENT EXECUTE FUNCTION dimlog_test_note_write();
         CREATE TRIGGER note_state AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dimlog_state
           FOR EACH STATEMENT EXECUTE FUNCTION dimlog_test_note_write();
         CREATE TRIGGER note_runs AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dimlog_runs
           FOR EACH STATEMENT EXECUTE FUNCTION dimlog_test_note_write();
         CREATE TRIGGER note_dimensions AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dimlog_dimensions
           FOR EACH STATEMENT EXECUTE FUNCTION dimlog_test_note_write();",
    )
    .await;
    let writes = "SELECT (CASE WHEN is_called THEN last_value ELSE 0 END)::text FROM dimlog_test_writes";
    let args = [
        "run",
        "--upper",
        "2026-03-02T12:00:00Z",
        "--reconcile-deletes",
        "--allow-mass-delete",
        "--json",
    ];
    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let out = fx.cli(&dry);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let planned: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(planned["status"], "dry-run", "{planned}");
    let after_dry = fx.target_query(writes).await;
    assert_eq!(
        after_dry[0][0].as_deref(),
        Some("0"),
        "the dry run wrote to dimlog's tables (and rolled back): {planned}"
    );

    let out = fx.cli(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_ne!(
        fx.target_query(writes).await[0][0].as_deref(),
        Some("0"),
        "the triggers see writes"
    );
    for count in [
        "rows_read",
        "rows_after_dedupe",
        "versions",
        "late_versions",
        "corrections",
        "tombstones",
        "unseen_deletes",
        "revived",
        "type1_updates",
        "reconciled_deletes",
        "high_watermark",
    ] {
        assert_eq!(
            planned[count], done[count],
            "{count}: dry run {planned}\nreal run {done}"
        );
    }
    assert_eq!(done["versions"], 3, "{done}");
    assert_eq!(done["corrections"], 1, "{done}");
    assert_eq!(done["reconciled_deletes"], 1, "{done}");
    cli_exits(&fx, &["verify"], 0);
}

/// A role that may only read dimlog's tables (and the source) can dry-run a load: it
/// needs no right to write.
#[tokio::test]
async fn a_read_only_role_may_dry_run() {
    let mut fx = Fixture::postgres().await;
    loaded(&mut fx).await;
    let db = database(&fx);
    let role = format!("{db}_reader");
    fx.target_exec(&format!(
        "CREATE ROLE \"{role}\" LOGIN PASSWORD 'pw';
         GRANT USAGE ON SCHEMA public TO \"{role}\";
         GRANT SELECT ON ALL TABLES IN SCHEMA public TO \"{role}\";"
    ))
    .await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 2")
        .await;
    let mut url = url::Url::parse(&fx.target_url).expect("url");
    url.set_username(&role).expect("user");
    url.set_password(Some("pw")).expect("password");
    let config = fx
        .config()
        .replace(&format!("url = \"{}\"", fx.target_url), &format!("url = \"{url}\""));
    fx.set_config(config);
    let out = fx.cli(&["run", "--dry-run", "--upper", "2026-03-02T12:00:00Z", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["versions"], 1, "{v}");
}
