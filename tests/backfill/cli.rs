//! `dimlog backfill` through the binary: a failed chunk, `--only-failed`, `--fail-fast`,
//! `--dry-run`.

use crate::cli::{assert_code, json, text};
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(
    a_failed_chunk_is_reported_and_rerun_alone,
    fail_fast_stops_after_the_failed_chunk,
    a_dry_run_prints_the_plan_and_writes_nothing,
);

const FEED_INSERT: &str = "INSERT INTO src_feed (customer_id, email, tier, country, is_deleted, updated_at) VALUES";

const FROM: &str = "2026-03-01T00:00:00Z";
const TO: &str = "2026-03-04T00:00:00Z";

/// Three days of a landing table; day 2 holds a row without a natural key, so the chunk
/// of day 2 fails. Day 3 changes key 1 again, repeats key 2 and deletes key 3, whose only
/// version is on day 2.
const THREE_DAYS: &str = "
    (1, 'ann@example.com', 'free', 'FR', false, '2026-03-01T09:00:00Z'),
    (2, 'bob@example.com', 'pro', 'DE', false, '2026-03-01T10:00:00Z'),
    (1, 'ann@example.com', 'pro', 'FR', false, '2026-03-02T09:00:00Z'),
    (NULL, 'nokey@example.com', 'free', 'NL', false, '2026-03-02T11:00:00Z'),
    (3, 'cyd@example.com', 'free', 'BE', false, '2026-03-02T12:00:00Z'),
    (1, 'ann@example.com', 'gold', 'FR', false, '2026-03-03T09:00:00Z'),
    (2, 'bob@example.com', 'pro', 'DE', false, '2026-03-03T13:00:00Z'),
    (3, NULL, NULL, NULL, true, '2026-03-03T14:00:00Z')";

const FIX: &str = "UPDATE src_feed SET customer_id = 9 WHERE customer_id IS NULL";

async fn three_days(fx: &mut Fixture) {
    fx.use_feed().await;
    fx.exec(&format!("{FEED_INSERT} {THREE_DAYS}")).await;
}

fn backfill_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["backfill", "--from", FROM, "--to", TO, "--chunk", "1d"];
    args.extend_from_slice(extra);
    args
}

/// The outcome of every chunk in a `backfill --json` output.
fn json_outcomes(v: &serde_json::Value) -> Vec<String> {
    v["chunks"]
        .as_array()
        .expect("a chunks array")
        .iter()
        .map(|c| c["outcome"].as_str().expect("an outcome").to_string())
        .collect()
}

/// A chunk that fails is reported with its error while the other chunks commit, and
/// the exit status is 1. Once the source is fixed, `--only-failed` runs that chunk
/// alone; the backfill is then complete, and its dimension equals a one-shot load of the
/// fixed source (surrogate keys and load ids aside: the chunks ran in another order).
async fn a_failed_chunk_is_reported_and_rerun_alone(mut fx: Fixture) {
    three_days(&mut fx).await;
    let out = fx.cli(&backfill_args(&[]));
    assert_code(&out, 1, "a backfill with a failed chunk");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(
        lines[0].starts_with("chunk 1/3 [2026-03-01T00:00:00.000000Z .. 2026-03-02T00:00:00.000000Z) committed"),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("chunk 2/3 [2026-03-02T00:00:00.000000Z .. 2026-03-03T00:00:00.000000Z) failed: "),
        "{stdout}"
    );
    assert!(
        lines[1].contains("1 source rows read have a NULL natural key `customer_id`"),
        "the failed chunk must say why: {stdout}"
    );
    assert!(
        lines[2].starts_with("chunk 3/3 ") && lines[2].contains(") committed"),
        "{stdout}"
    );
    assert!(text(&out.stderr).contains("--only-failed"), "{}", text(&out.stderr));

    let runs = fx.runs().await;
    assert_eq!(
        runs.values("status"),
        ["succeeded", "failed", "succeeded"].map(|s| Some(s.to_string()))
    );
    let error = runs.values("error")[1].clone().unwrap_or_default();
    assert!(error.contains("`customer_id`"), "{error}");
    // Day 1 and day 3 committed; nothing of day 2.
    let froms = fx.dimension().await.values("valid_from");
    assert!(
        froms
            .iter()
            .all(|f| !f.as_deref().unwrap_or("").starts_with("2026-03-02")),
        "{froms:?}"
    );

    // Rerunning without a fix fails the same chunk again, and only it.
    let out = fx.cli(&backfill_args(&["--only-failed", "--json"]));
    assert_code(&out, 1, "--only-failed before the fix");
    let v = json(&out, "--only-failed before the fix");
    assert_eq!(
        json_outcomes(&v),
        ["skipped (committed earlier)", "failed", "skipped (committed earlier)"]
    );
    assert_eq!(v["failed"], 1);

    fx.exec(FIX).await;
    let log_before = fx.count("customer_versions").await;
    let out = fx.cli(&backfill_args(&["--only-failed", "--json"]));
    assert_code(&out, 0, "--only-failed after the fix");
    let v = json(&out, "--only-failed after the fix");
    assert_eq!(
        json_outcomes(&v),
        [
            "skipped (committed earlier)",
            "committed",
            "skipped (committed earlier)"
        ]
    );
    assert_eq!(v["failed"], 0);
    let chunk = &v["chunks"][1];
    assert_eq!(chunk["report"]["rows_read"], 3, "{chunk}");
    assert_eq!(chunk["report"]["versions"], 3, "{chunk}");
    assert_eq!(
        chunk["report"]["late_versions"], 2,
        "key 1 and key 3 already had later rows: {chunk}"
    );
    assert_eq!(fx.count("customer_versions").await, log_before + 3);
    fx.assert_dimension_derives_from_log().await;

    // Complete: a plain rerun skips everything.
    let out = fx.cli(&backfill_args(&["--json"]));
    assert_code(&out, 0, "a rerun of the completed backfill");
    assert_eq!(json_outcomes(&json(&out, "rerun")), ["skipped (committed earlier)"; 3]);
    assert_code(&fx.cli(&["verify"]), 0, "verify after the backfill");

    // The same fixed source loaded in one run.
    let mut one_shot = Fixture::on(fx.backend).await;
    three_days(&mut one_shot).await;
    one_shot.exec(FIX).await;
    one_shot.run(TO).await;
    let redact = |d: crate::support::fixture::Dump| d.redact("customer_sk").redact("load_id");
    let backfilled = fx.dimension().await;
    assert_eq!(redact(backfilled.clone()), redact(one_shot.dimension().await));
    assert_eq!(backfilled.rows.len(), 6, "{backfilled:?}");
}

/// With `--fail-fast` the chunks after the failed one are not run (exit 1); a plain
/// rerun after the fix runs the failed chunk and the ones never run, and skips the rest.
async fn fail_fast_stops_after_the_failed_chunk(mut fx: Fixture) {
    three_days(&mut fx).await;
    let out = fx.cli(&backfill_args(&["--fail-fast", "--json"]));
    assert_code(&out, 1, "--fail-fast");
    let v = json(&out, "--fail-fast");
    assert_eq!(
        json_outcomes(&v),
        ["committed", "failed", "not run (stopped after a failure)"]
    );
    assert!(
        v["chunks"][1]["error"]
            .as_str()
            .unwrap_or("")
            .contains("NULL natural key"),
        "{v}"
    );
    assert_eq!(
        fx.runs().await.values("status"),
        ["succeeded", "failed"].map(|s| Some(s.to_string())),
        "no chunk ran after the failure"
    );
    let froms = fx.dimension().await.values("valid_from");
    assert!(
        froms
            .iter()
            .all(|f| f.as_deref().unwrap_or("").starts_with("2026-03-01")),
        "only day 1 is loaded: {froms:?}"
    );

    fx.exec(FIX).await;
    // --only-failed reruns the failed chunk, not the one never run: the range is not
    // loaded, and it says so (exit 1), naming the way to load the rest.
    let out = fx.cli(&backfill_args(&["--only-failed", "--json"]));
    assert_code(&out, 1, "--only-failed with a chunk never run");
    let v = json(&out, "--only-failed with a chunk never run");
    assert_eq!(
        json_outcomes(&v),
        ["skipped (committed earlier)", "committed", "not selected"]
    );
    assert_eq!(
        (v["failed"].as_i64(), v["not_loaded"].as_i64()),
        (Some(0), Some(1)),
        "{v}"
    );
    let out = fx.cli(&backfill_args(&["--only-failed"]));
    assert_code(&out, 1, "--only-failed again");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 chunk(s) of the range are not loaded") && stderr.contains("without --only-failed"),
        "{stderr}"
    );
    let out = fx.cli(&backfill_args(&["--json"]));
    assert_code(&out, 0, "the rerun after the fix");
    let v = json(&out, "the rerun after the fix");
    assert_eq!(
        json_outcomes(&v),
        [
            "skipped (committed earlier)",
            "skipped (committed earlier)",
            "committed"
        ]
    );
    assert_eq!(v["not_loaded"], 0, "{v}");
    assert_eq!(fx.dimension().await.rows.len(), 6);
    fx.assert_dimension_derives_from_log().await;
}

/// `--dry-run` prints one line per chunk with its state and writes nothing: not even
/// dimlog's tables on a fresh target; later, neither a run record nor a log row.
async fn a_dry_run_prints_the_plan_and_writes_nothing(mut fx: Fixture) {
    fx.use_feed().await;
    fx.exec(&format!(
        "{FEED_INSERT} (1, 'ann@example.com', 'free', 'FR', false, '2026-03-01T09:00:00Z'),
                       (2, 'bob@example.com', 'pro', 'DE', false, '2026-03-01T15:00:00Z'),
                       (NULL, 'nokey@example.com', 'pro', 'DE', false, '2026-03-02T09:00:00Z'),
                       (1, 'ann@example.com', 'pro', 'FR', false, '2026-03-02T15:00:00Z')"
    ))
    .await;
    let args = [
        "backfill",
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-03T00:00:00Z",
        "--chunk",
        "12h",
    ];
    let dry = |fx: &Fixture, json: bool| {
        let mut a = args.to_vec();
        a.push("--dry-run");
        if json {
            a.push("--json");
        }
        let out = fx.cli(&a);
        assert_code(&out, 0, "backfill --dry-run");
        out
    };
    let plan = |states: [&str; 4]| -> String {
        let bounds = [
            "2026-03-01T00:00:00.000000Z",
            "2026-03-01T12:00:00.000000Z",
            "2026-03-02T00:00:00.000000Z",
            "2026-03-02T12:00:00.000000Z",
            "2026-03-03T00:00:00.000000Z",
        ];
        (0..4)
            .map(|i| format!("chunk {}/4 [{} .. {}) {}\n", i + 1, bounds[i], bounds[i + 1], states[i]))
            .collect()
    };

    let out = dry(&fx, false);
    assert_eq!(text(&out.stdout), plan(["pending"; 4]));
    for table in [
        "dimlog_runs",
        "dimlog_state",
        "dimlog_dimensions",
        "customer_versions",
        "dim_customer",
    ] {
        assert!(!fx.target_has_table(table).await, "a dry run created {table}");
    }

    // The real backfill: chunk 3 fails on the row without a key.
    assert_code(&fx.cli(&args), 1, "the backfill");
    let (log, runs, state) = (fx.log().await, fx.runs().await, fx.state().await);
    assert_eq!(runs.rows.len(), 4);

    let out = dry(&fx, false);
    let committed = "committed (will be skipped)";
    assert_eq!(
        text(&out.stdout),
        plan([committed, committed, "failed (will be rerun)", committed])
    );
    let v = json(&dry(&fx, true), "backfill --dry-run --json");
    let states: Vec<&str> = v["chunks"]
        .as_array()
        .expect("chunks")
        .iter()
        .map(|c| c["state"].as_str().expect("a state"))
        .collect();
    assert_eq!(states, ["committed", "committed", "failed", "committed"]);
    assert_eq!(
        v["role"],
        "backfill:2026-03-01T00:00:00.000000Z/2026-03-03T00:00:00.000000Z"
    );
    assert_eq!(fx.log().await, log, "a dry run appended to the log");
    assert_eq!(fx.runs().await, runs, "a dry run recorded a run");
    assert_eq!(fx.state().await, state, "a dry run moved a watermark");
}
