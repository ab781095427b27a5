//! Issue 20, item 11: a backfill whose connection is killed in one chunk goes on with the
//! next chunks on a new connection, and records the killed chunk as failed, so that
//! `--only-failed` reruns exactly that chunk.

use crate::cli::{assert_code, json, text};
use crate::support::fixture::Fixture;

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

fn outcomes(v: &serde_json::Value) -> Vec<String> {
    v["chunks"]
        .as_array()
        .unwrap_or_else(|| panic!("no chunks in {v}"))
        .iter()
        .map(|c| c["outcome"].as_str().expect("an outcome").to_string())
        .collect()
}

/// One key per day over four days; a trigger on the log ends the session that appends the
/// row of day 2 (`pg_terminate_backend` of itself: a killed connection, as an operator or
/// a failover would kill it). Chunks 1, 3 and 4 commit, chunk 2 is recorded as failed;
/// without the trigger, `--only-failed` runs chunk 2 alone and every key is loaded.
#[tokio::test]
async fn a_killed_connection_fails_one_chunk_and_is_recorded() {
    let mut fx = Fixture::postgres().await;
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-01T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'BE', '2026-03-03T09:00:00Z'),
                  (4, 'dee@example.com', 'free', 'NL', '2026-03-04T09:00:00Z')"
    ))
    .await;
    let backfill = [
        "backfill",
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-05T00:00:00Z",
        "--chunk",
        "1d",
        "--json",
    ];
    // A first backfill of day 1 creates the tables; the trigger goes on the log after
    // it. (The backfill of four days reads day 1 again: its chunks are its own.)
    let first = [
        "backfill",
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z",
        "--chunk",
        "1d",
    ];
    let out = fx.cli(&first);
    assert_code(&out, 0, "the first day");
    fx.target_exec(
        "CREATE FUNCTION dimlog_test_kill() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END $$;
         CREATE TRIGGER kill_day_2 AFTER INSERT ON customer_versions FOR EACH ROW
           WHEN (NEW.valid_from >= '2026-03-02T00:00:00Z' AND NEW.valid_from < '2026-03-03T00:00:00Z')
           EXECUTE FUNCTION dimlog_test_kill();",
    )
    .await;
    let out = fx.cli(&backfill);
    assert_code(&out, 1, "a backfill with a killed chunk");
    let v = json(&out, "backfill --json");
    assert_eq!(
        outcomes(&v),
        ["committed", "failed", "committed", "committed"],
        "{v}\n{}",
        text(&out.stderr)
    );
    let failed = fx
        .target_query("SELECT count(*)::text FROM dimlog_runs WHERE kind = 'backfill' AND status = 'failed'")
        .await;
    assert_eq!(
        failed[0][0].as_deref(),
        Some("1"),
        "the killed chunk is recorded as failed"
    );

    fx.target_exec("DROP TRIGGER kill_day_2 ON customer_versions").await;
    let mut only_failed = backfill.to_vec();
    only_failed.push("--only-failed");
    let out = fx.cli(&only_failed);
    assert_code(&out, 0, "rerunning the failed chunk");
    let v = json(&out, "backfill --json");
    assert_eq!(
        outcomes(&v),
        [
            "skipped (committed earlier)",
            "committed",
            "skipped (committed earlier)",
            "skipped (committed earlier)"
        ],
        "{v}"
    );
    let keys = fx
        .target_query(
            "SELECT string_agg(customer_id::text, ',' ORDER BY customer_id) FROM dim_customer WHERE is_current",
        )
        .await;
    assert_eq!(keys[0][0].as_deref(), Some("1,2,3,4"));
    fx.assert_dimension_derives_from_log().await;
}
