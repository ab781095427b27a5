//! Two loads of one dimension at once (spec 1.6): a run takes the dimension's lock before
//! it reads the watermark and holds it until commit, so runs never interleave; a second
//! run waits for the lock, or with `--no-wait` exits 1 with a clear message.

use std::sync::Arc;
use std::time::Duration;

use dimlog::backfill::{self, BackfillObserver, BackfillOptions, Selection};
use dimlog::config::Plan;
use dimlog::pipeline::{self, Observer, Quiet, RunOptions, RunReport, Session};
use tokio::sync::Barrier;

use super::cli;
use crate::support::fixture::{on_both_backends, ts, Fixture};

on_both_backends!(
    two_runs_at_once_append_each_version_once,
    a_run_waits_for_the_lock,
    a_waiting_run_says_what_it_waits_for,
    no_wait_exits_1_while_the_lock_is_held,
    a_backfill_with_no_wait_exits_1_while_the_lock_is_held,
);

const UPPER: &str = "2026-04-01T12:00:00Z";

/// `rows` keys, one version each, stamped a second apart before [`UPPER`].
async fn load_source(fx: &mut Fixture, rows: i64) {
    let base = ts("2026-04-01T00:00:00Z");
    let values: Vec<String> = (1..=rows)
        .map(|i| {
            let at = base.plus(i * 1_000_000).to_text();
            let tier = if i % 2 == 0 { "pro" } else { "free" };
            format!("({i}, 'user{i}@example.com', '{tier}', 'FR', '{at}')")
        })
        .collect();
    for chunk in values.chunks(500) {
        fx.exec(&format!(
            "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES {}",
            chunk.join(", ")
        ))
        .await;
    }
}

fn at(upper: &str) -> RunOptions {
    RunOptions {
        upper: Some(ts(upper)),
        ..RunOptions::incremental()
    }
}

/// A library run on its own connections, started once `start` lets it.
fn spawn_run(
    plan: Plan,
    upper: &'static str,
    start: Arc<Barrier>,
) -> tokio::task::JoinHandle<Result<RunReport, dimlog::Error>> {
    tokio::spawn(async move {
        let mut session = Session::open(&plan).await?;
        start.wait().await;
        pipeline::run(&mut session, &plan, &at(upper), &Quiet).await
    })
}

/// Log rows per (key, valid_from) that occur more than once.
async fn duplicate_versions(fx: &mut Fixture) -> i64 {
    let rows = fx
        .target_query(
            "SELECT CAST(count(*) AS TEXT) FROM (SELECT customer_id, valid_from FROM customer_versions \
             GROUP BY customer_id, valid_from HAVING count(*) > 1) d",
        )
        .await;
    rows[0][0].as_deref().expect("a count").parse().expect("an integer")
}

async fn two_runs_at_once_append_each_version_once(mut fx: Fixture) {
    const ROWS: i64 = 2000;
    load_source(&mut fx, ROWS).await;
    let start = Arc::new(Barrier::new(2));
    let a = spawn_run(fx.plan(), UPPER, start.clone());
    let b = spawn_run(fx.plan(), UPPER, start);
    let (a, b) = (a.await.expect("task"), b.await.expect("task"));
    let (a, b) = (
        a.unwrap_or_else(|e| panic!("the first run failed: {e}")),
        b.unwrap_or_else(|e| panic!("the second run failed: {e}")),
    );
    assert_eq!((a.status.as_str(), b.status.as_str()), ("succeeded", "succeeded"));
    assert_ne!(a.run_id, b.run_id);
    // One of them loaded everything; the other, after waiting, found it all loaded.
    let mut versions = [a.counts.versions, b.counts.versions];
    versions.sort();
    assert_eq!(versions, [0, ROWS], "{a:?}\n{b:?}");
    assert_eq!(fx.count("customer_versions").await, ROWS);
    assert_eq!(duplicate_versions(&mut fx).await, 0);

    // The same as one run after the other.
    let mut twin = Fixture::on(fx.backend).await;
    load_source(&mut twin, ROWS).await;
    twin.run(UPPER).await;
    twin.run(UPPER).await;
    assert_eq!(
        fx.dimension().await.redact("load_id"),
        twin.dimension().await.redact("load_id")
    );
    assert_eq!(fx.watermark().await, twin.watermark().await);
    let statuses = fx.runs().await.values("status");
    assert_eq!(statuses, [Some("succeeded".to_string()), Some("succeeded".to_string())]);
}

async fn a_run_waits_for_the_lock(mut fx: Fixture) {
    load_source(&mut fx, 50).await;
    let held = cli::hold(&fx.config_path(), &["run", "--upper", UPPER], "after_extract").await;

    let plan = fx.plan();
    let waiting = tokio::spawn(async move {
        let mut session = Session::open(&plan).await?;
        pipeline::run(&mut session, &plan, &at(UPPER), &Quiet).await
    });
    // While the other process holds the lock, this run gets nowhere.
    for _ in 0..25 {
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(
            !waiting.is_finished(),
            "the run did not wait for the lock: {:?}",
            waiting.await
        );
    }
    let status = held.kill();
    assert!(!status.success());
    let report = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the run still waits after the lock was freed")
        .expect("task")
        .unwrap_or_else(|e| panic!("the waiting run failed: {e}"));
    // The killed run committed nothing, so the waiting one loaded everything.
    assert_eq!((report.counts.rows_read, report.counts.versions), (50, 50));
    assert_eq!(fx.count("customer_versions").await, 50);
    let loads = fx.log().await.values("load_id");
    assert!(
        loads.iter().all(|l| *l == report.run_id.map(|id| id.to_string())),
        "{loads:?}"
    );
}

/// A run that waits for another's lock says so on stderr at once (on PostgreSQL, whose
/// session holds it), instead of seeming to hang; it goes on when the lock is freed.
async fn a_waiting_run_says_what_it_waits_for(mut fx: Fixture) {
    load_source(&mut fx, 20).await;
    let config = fx.config_path();
    let held = cli::hold(&config, &["run", "--upper", UPPER], "after_extract").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let stderr_path = dir.path().join("stderr");
    let mut waiting = cli::command(&config)
        .args(["run", "--upper", UPPER])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("start dimlog");
    let expected = if fx.backend == dimlog::config::Backend::Postgres {
        "waiting for the lock of dimension customer, held by another run (session "
    } else {
        "waiting for the lock of the target database file: another process is writing it"
    };
    let stderr = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !stderr().contains(expected) {
        assert!(
            waiting.try_wait().expect("try_wait").is_none(),
            "the run ended without waiting:\n{}",
            stderr()
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no word of the wait:\n{}",
            stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    held.kill();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = waiting.try_wait().expect("try_wait") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "still waiting:\n{}", stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}:\n{}", stderr());
    assert_eq!(fx.count("customer_versions").await, 20);
}

async fn no_wait_exits_1_while_the_lock_is_held(mut fx: Fixture) {
    load_source(&mut fx, 20).await;
    let config = fx.config_path();
    let mut held = cli::hold(&config, &["run", "--upper", UPPER], "after_extract").await;

    let out = cli::run(&config, &["run", "--no-wait", "--upper", UPPER]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr
            .starts_with("error: another run of dimension \"customer\" holds its lock")
            && out.stderr.contains("--no-wait"),
        "{out:?}"
    );
    if fx.backend == dimlog::config::Backend::Postgres {
        // Whose lock it is, and how to end a session whose dimlog is gone.
        assert!(
            out.stderr.contains("application \"dimlog:customer\"") && out.stderr.contains("pg_terminate_backend("),
            "{out:?}"
        );
    }
    let json = cli::run(&config, &["run", "--no-wait", "--json", "--upper", UPPER]);
    assert_eq!(json.code, Some(1), "{json:?}");
    let v: serde_json::Value = serde_json::from_str(json.stdout.trim()).expect("one JSON object");
    assert_eq!(v["error"]["kind"], "locked", "{json:?}");
    assert!(held.is_running(), "the lock holder exited:\n{}", held.stderr_text());

    held.kill();
    // The lock died with its process, and so did its uncommitted work.
    assert_eq!(fx.count("customer_versions").await, 0);
    let out = cli::run(&config, &["run", "--no-wait", "--upper", UPPER]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(fx.count("customer_versions").await, 20);
    // Refused runs leave no record; the killed run's was never committed.
    let statuses = fx.runs().await.values("status");
    assert_eq!(statuses, [Some("succeeded".to_string())]);
}

/// `backfill --no-wait` does not wait either, not even for the tables' check before its
/// first chunk (on SQLite that check is a write transaction, which waited for the lock).
async fn a_backfill_with_no_wait_exits_1_while_the_lock_is_held(mut fx: Fixture) {
    load_source(&mut fx, 20).await;
    let config = fx.config_path();
    let held = cli::hold(&config, &["run", "--upper", UPPER], "after_extract").await;
    let backfill = {
        let config = config.clone();
        std::thread::spawn(move || {
            cli::run(
                &config,
                &[
                    "backfill",
                    "--from",
                    "2026-04-01T00:00:00Z",
                    "--to",
                    "2026-04-01T06:00:00Z",
                    "--no-wait",
                ],
            )
        })
    };
    let started = std::time::Instant::now();
    while !backfill.is_finished() && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waited = !backfill.is_finished();
    held.kill();
    let out = backfill.join().expect("the backfill's thread");
    assert!(!waited, "backfill --no-wait waited for the lock: {out:?}");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("holds its lock"), "{out:?}");
}

/// The upper bound of the run that meets a backfill: after all three days.
const AFTER_THREE_DAYS: &str = "2026-04-05T00:00:00Z";

struct NoProgress;
impl Observer for NoProgress {}
impl BackfillObserver for NoProgress {}

/// Three keys changing once a day for three days, in a landing table.
async fn three_days(fx: &mut Fixture) {
    fx.use_feed().await;
    let mut values = Vec::new();
    for day in 1..=3 {
        for key in 1..=3 {
            values.push(format!(
                "({key}, 'k{key}@example.com', 'tier{day}', 'FR', '2026-04-0{day}T0{key}:00:00Z')"
            ));
        }
    }
    fx.exec(&format!(
        "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES {}",
        values.join(", ")
    ))
    .await;
}

fn backfill_options() -> BackfillOptions {
    BackfillOptions {
        from: ts("2026-04-01T00:00:00Z"),
        to: ts("2026-04-04T00:00:00Z"),
        chunk_micros: 24 * 3600 * 1_000_000,
        selection: Selection::NotCommitted,
        fail_fast: false,
        wait: true,
        failpoint: None,
        interrupt: None,
    }
}

async fn backfill(plan: &Plan) -> Vec<backfill::ChunkOutcome> {
    let mut session = Session::open(plan).await.expect("session");
    backfill::run(&mut session, plan, &backfill_options(), &NoProgress)
        .await
        .expect("backfill")
}

/// On PostgreSQL, a run and a backfill of the same dimension started together end where
/// the run followed by the backfill ends (surrogate keys and load ids aside, which depend
/// on who took the lock first).
#[tokio::test]
async fn a_run_and_a_backfill_at_once_equal_them_in_sequence() {
    let mut twin = Fixture::postgres().await;
    three_days(&mut twin).await;
    let twin_run = twin.run(AFTER_THREE_DAYS).await;
    assert_eq!(twin_run.counts.versions, 9);
    let outcomes = backfill(&twin.plan()).await;
    assert!(outcomes.iter().all(|o| o.outcome == "committed"), "{outcomes:?}");
    let expected_dimension = twin.dimension().await.redact("customer_sk").redact("load_id");
    let expected_watermark = twin.watermark().await;
    assert_eq!(expected_watermark.as_deref(), Some("2026-04-03T03:00:00.000000Z"));

    // A few rounds, so the two meet at the lock in more than one order.
    for round in 0..3 {
        let mut fx = Fixture::postgres().await;
        three_days(&mut fx).await;
        let plan = fx.plan();
        let start = Arc::new(Barrier::new(2));
        let run = spawn_run(plan.clone(), AFTER_THREE_DAYS, start.clone());
        let fill = tokio::spawn(async move {
            start.wait().await;
            backfill(&plan).await
        });
        let report = run.await.expect("task").expect("the run failed");
        let outcomes = fill.await.expect("task");
        assert!(
            outcomes.iter().all(|o| o.outcome == "committed"),
            "round {round}: {outcomes:?}"
        );
        let backfilled: i64 = outcomes
            .iter()
            .filter_map(|o| o.report.as_ref())
            .map(|r| r.counts.versions)
            .sum();
        assert_eq!(
            report.counts.versions + backfilled,
            9,
            "round {round}: each version once"
        );
        assert_eq!(fx.count("customer_versions").await, 9, "round {round}");
        assert_eq!(duplicate_versions(&mut fx).await, 0);
        let dimension = fx.dimension().await;
        let mut sks = dimension.values("customer_sk");
        sks.sort();
        sks.dedup();
        assert_eq!(sks.len(), 9, "round {round}: surrogate keys are unique");
        assert_eq!(
            dimension.redact("customer_sk").redact("load_id"),
            expected_dimension,
            "round {round}"
        );
        assert_eq!(fx.watermark().await, expected_watermark, "round {round}");
    }
}

/// A SQLite dimension loaded once, and a second connection to its target file (a
/// `sqlite3` shell's, say) holding a write transaction open.
async fn loaded_with_a_foreign_writer() -> (Fixture, sqlx::SqliteConnection) {
    use sqlx::{ConnectOptions, Executor};
    let mut fx = Fixture::sqlite().await;
    load_source(&mut fx, 20).await;
    assert_eq!(cli::run(&fx.config_path(), &["run", "--upper", UPPER]).code, Some(0));
    let mut shell = fx
        .target_url
        .parse::<sqlx::sqlite::SqliteConnectOptions>()
        .expect("target URL")
        .connect()
        .await
        .expect("a second connection to the target");
    shell.execute("BEGIN IMMEDIATE").await.expect("a write transaction");
    (fx, shell)
}

/// On SQLite, the lock is the file's write transaction, anyone's: a `sqlite3` shell with a
/// transaction open on the target makes `--no-wait` exit 1 with a message that says it
/// may be such a process, not only "another run" (a trial looked for a run that was not
/// there). Once the shell commits, the run loads.
#[tokio::test]
async fn no_wait_names_a_foreign_write_transaction_on_a_sqlite_target() {
    use sqlx::{Connection, Executor};
    let (fx, mut shell) = loaded_with_a_foreign_writer().await;
    let config = fx.config_path();
    let out = cli::run(&config, &["run", "--no-wait", "--upper", UPPER]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("another process has a write transaction open on the target file"),
        "{out:?}"
    );
    shell.execute("COMMIT").await.expect("commit");
    shell.close().await.expect("close");
    assert_eq!(cli::run(&config, &["run", "--no-wait", "--upper", UPPER]).code, Some(0));
}

/// `verify --against-source` stages the source in temporary tables only: on SQLite it
/// takes no write lock on the target, so a writer holding one (a run, a sqlite3 shell)
/// neither holds it up nor is held up by it (a trial's verify waited 34 s, silently
/// with -q, behind a writer).
#[tokio::test]
async fn verify_against_the_source_waits_for_no_writer_on_a_sqlite_target() {
    use sqlx::Executor;
    let (fx, mut shell) = loaded_with_a_foreign_writer().await;
    let config = fx.config_path();
    let mut verify = cli::command(&config)
        .args(["verify", "--against-source", "-q"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start dimlog");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = verify.try_wait().expect("try_wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = verify.kill();
            panic!("verify --against-source waited for the writer");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(0), "verify against the source");
    shell.execute("ROLLBACK").await.expect("rollback");
}
