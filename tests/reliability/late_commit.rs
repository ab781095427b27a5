//! A real late commit on PostgreSQL: a transaction that inserted a row stamped a minute
//! before a run's upper bound is still open while the run reads the source, so the run
//! cannot see it, and the watermark moves past its stamp. After the commit, the next run
//! loads it when `source.lookback` reaches back over the delay; with `lookback = "0s"` it
//! is missed for good, and `verify --against-source` names the key (exit 3).
//!
//! The runs use fixed upper bounds; `verify --against-source` reads up to the source's
//! clock, so the rows are stamped in the past.

use dimlog::config::{Overrides, Plan};
use dimlog::pipeline::{self, Quiet, RunOptions, RunReport, Session};
use sqlx::{Connection as _, Executor as _, PgConnection};

use super::cli;
use crate::support::fixture::{ts, Fixture};

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";
const FIRST_UPPER: &str = "2020-05-04T10:00:00Z";
const NEXT_UPPER: &str = "2020-05-04T10:05:00Z";

async fn run(plan: &Plan, upper: &str) -> RunReport {
    let mut session = Session::open(plan).await.expect("session");
    let opts = RunOptions {
        upper: Some(ts(upper)),
        ..RunOptions::incremental()
    };
    pipeline::run(&mut session, plan, &opts, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("the run failed: {e}"))
}

fn keys(dump: &crate::support::fixture::Dump) -> Vec<String> {
    dump.values("customer_id").into_iter().flatten().collect()
}

#[tokio::test]
async fn a_late_commit_is_loaded_by_a_lookback_longer_than_its_delay() {
    let mut fx = Fixture::postgres().await;
    fx.set_setting("lookback", "\"5m\"");
    // A second dimension over the same source, without lookback.
    let strict = fx.dir().join("strict.toml");
    std::fs::write(
        &strict,
        fx.config()
            .replace("name = \"customer\"", "name = \"customer_strict\"")
            .replace("log = \"customer_versions\"", "log = \"strict_versions\"")
            .replace("dimension = \"dim_customer\"", "dimension = \"dim_strict\"")
            .replace("lookback = \"5m\"", "lookback = \"0s\""),
    )
    .expect("write config");
    let strict_plan = Plan::load(&strict, &Overrides::default()).expect("strict config");
    let plan = fx.plan();

    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2020-05-04T09:30:00Z')"
    ))
    .await;
    // The late writer: its row is stamped 09:59, a minute before the run's upper bound...
    let mut late = PgConnection::connect(&fx.source_url).await.expect("connect");
    late.execute("BEGIN").await.expect("begin");
    late.execute(format!("{INSERT} (2, 'bob@example.com', 'pro', 'DE', '2020-05-04T09:59:00Z')").as_str())
        .await
        .expect("insert");
    // ...and a row stamped after it commits first.
    fx.exec(&format!(
        "{INSERT} (3, 'cyd@example.com', 'pro', 'NL', '2020-05-04T09:59:50Z')"
    ))
    .await;

    // Both runs read the source while the late transaction is open.
    for p in [&plan, &strict_plan] {
        let r = run(p, FIRST_UPPER).await;
        assert_eq!((r.counts.rows_read, r.counts.versions), (2, 2), "{}", p.name);
        assert_eq!(
            r.high_watermark.map(|t| t.to_text()).as_deref(),
            Some("2020-05-04T09:59:50.000000Z"),
            "the watermark passed the late row's stamp"
        );
    }
    assert_eq!(keys(&fx.dimension().await), ["1", "3"]);

    late.execute("COMMIT").await.expect("commit");
    late.close().await.expect("close");

    // A lookback of 5m reaches back over the 50 s between the stamp and the watermark.
    let r = run(&plan, NEXT_UPPER).await;
    assert_eq!(
        r.low_watermark.map(|t| t.to_text()).as_deref(),
        Some("2020-05-04T09:54:50.000000Z")
    );
    assert_eq!(
        (r.counts.rows_read, r.counts.versions, r.counts.late_versions),
        (2, 1, 0)
    );
    assert_eq!(keys(&fx.dimension().await), ["1", "2", "3"]);

    // Without lookback the row is behind the window, and stays missed.
    let r = run(&strict_plan, NEXT_UPPER).await;
    assert_eq!(
        r.low_watermark.map(|t| t.to_text()).as_deref(),
        Some("2020-05-04T09:59:50.000000Z")
    );
    assert_eq!((r.counts.rows_read, r.counts.versions), (1, 0));

    let ok = cli::run(&fx.config_path(), &["verify", "--against-source"]);
    assert_eq!(ok.code, Some(0), "{ok:?}");
    let missed = cli::run(&strict, &["verify", "--against-source"]);
    assert_eq!(missed.code, Some(3), "{missed:?}");
    assert!(
        missed.stdout.contains(
            "FAIL  keys live in the source but not current in the dimension: 1 found\n        2: in the source, not current in the dimension"
        ),
        "{missed:?}"
    );
    let json = cli::run(&strict, &["verify", "--against-source", "--json"]);
    assert_eq!(json.code, Some(3), "{json:?}");
    let v: serde_json::Value = serde_json::from_str(json.stdout.trim()).expect("one JSON object");
    let failed: Vec<(String, Vec<String>)> = v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["count"] != 0)
        .map(|c| {
            let examples = c["examples"].as_array().expect("examples");
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                examples
                    .iter()
                    .map(|e| e.as_str().unwrap_or_default().to_string())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        failed,
        [(
            "source_missing".to_string(),
            vec!["2: in the source, not current in the dimension".to_string()]
        )]
    );
}
