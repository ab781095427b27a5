//! A `dimlog run` stopped by SIGINT (Ctrl-C) or SIGTERM (issue 17): it rolls back, records
//! the run as `interrupted`, says "interrupted: nothing committed" and exits 130; its lock
//! is free at once, and the next run loads everything. A statement the run is waiting in
//! is cancelled rather than waited for (PostgreSQL's cancel; SQLite's progress handler);
//! a backfill keeps the chunks it committed before.

use std::time::Duration;

use dimlog::config::Backend;

use super::cli;
use crate::support::fixture::{on_both_backends, on_every_engine, Fixture};

on_every_engine!(an_interrupted_run_rolls_back_and_says_so);
on_both_backends!(an_interrupted_backfill_keeps_the_chunks_before_it);
on_both_backends!(an_interrupt_after_the_commit_began_keeps_the_run_and_says_so);
on_both_backends!(a_second_interrupt_while_committing_waits_for_the_commit);

/// A second signal exits at once, but not while a run commits: exiting there left the
/// outcome to chance behind an exit code that said nothing was committed (a trial saw
/// 130 with the whole load committed, and 130 with nothing kept after "the run is kept").
async fn a_second_interrupt_while_committing_waits_for_the_commit(mut fx: Fixture) {
    let held = lingering_after_the_commit(&mut fx).await;
    let first = std::process::Command::new("kill")
        .args(["-s", "TERM", &held.pid().to_string()])
        .status()
        .expect("kill");
    assert!(first.success());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, stderr) = held.signal("INT", Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("interrupted again while committing"), "{stderr}");
    assert!(!stderr.contains("exiting without waiting"), "{stderr}");
    assert_eq!(fx.log().await.rows.len(), 3, "the run's versions are kept");
    let (status, _) = last_run(&mut fx).await;
    assert_eq!(status.as_deref(), Some("succeeded"));
}

/// From the commit on a run finishes (SIGTERM cannot undo a commit under way): it exits
/// 0 with its versions kept, and the log line says so instead of promising a rollback
/// (a trial saw "interrupted: rolling back" from a run that then committed).
async fn an_interrupt_after_the_commit_began_keeps_the_run_and_says_so(mut fx: Fixture) {
    let held = lingering_after_the_commit(&mut fx).await;
    let (status, stderr) = held.signal("TERM", Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("interrupted while committing: the commit finishes and the run is kept"),
        "{stderr}"
    );
    assert!(!stderr.contains("rolling back"), "{stderr}");
    assert_eq!(fx.log().await.rows.len(), 3, "the run's versions are kept");
    let (status, _) = last_run(&mut fx).await;
    assert_eq!(status.as_deref(), Some("succeeded"));
}

/// A first load (`run -v`) that has committed and lingers 3 s before it returns.
async fn lingering_after_the_commit(fx: &mut Fixture) -> cli::Held {
    prepare_source(fx).await;
    let config = fx.config_path();
    cli::hold_at(
        &config,
        &["-v", "run", "--upper", UPPER],
        "after_commit",
        "linger",
        "lingering 3 s",
    )
    .await
}

/// An interrupted run on SQLite closes its connection as a finished run does: the last
/// connection to go removes the `-wal` and `-shm` files. (The trial that found them left
/// behind interrupted a statement of a 2M-row load; here the run is parked between
/// statements, so this guards the close, not that race.)
#[tokio::test]
async fn an_interrupted_sqlite_run_leaves_no_side_files() {
    let mut fx = Fixture::sqlite().await;
    // A target file of the command's own (the fixture keeps its target open).
    let own = fx.dir().join("own.db");
    let target = fx.target_url.clone();
    fx.edit_config(&target, &format!("sqlite://{}", own.display()));
    prepare_source(&mut fx).await;
    let config = fx.config_path();
    let first = cli::run(&config, &["run", "--upper", "2026-03-02T09:30:00Z"]);
    assert_eq!(first.code, Some(0), "{first:?}");
    let dir = fx.dir().to_path_buf();
    let side_files = || {
        ["own.db-wal", "own.db-shm"]
            .into_iter()
            .filter(|f| dir.join(f).exists())
            .collect::<Vec<_>>()
    };
    assert!(
        side_files().is_empty(),
        "a finished run leaves none: {:?}",
        side_files()
    );
    changes(&mut fx).await;
    let held = cli::hold(&config, &["run", "--upper", UPPER], "after_append").await;
    let (status, stderr) = held.signal("INT", Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(side_files().is_empty(), "left behind: {:?}", side_files());
}

/// SQLite to SQLite, a window's rows go from the source into the target in one thread,
/// outside the driver (rusqlite on its handles): an interrupt stops that read within
/// seconds, as it stops any step, and nothing is committed.
#[tokio::test]
async fn an_interrupt_stops_a_sqlite_read_in_its_rows() {
    use std::io::{BufRead, BufReader};
    let mut fx = Fixture::sqlite().await;
    // Enough rows that reading them takes seconds in a debug build.
    fx.insert_customers(600_000).await;
    let mut child = cli::command(&fx.config_path())
        .args(["run", "-v", "--upper", UPPER])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start dimlog");
    // The step before the read logs its end: the read has begun.
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = Vec::new();
    while let Some(Ok(line)) = lines.next() {
        let begun = line.contains("checking the source: ");
        seen.push(line);
        if begun {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.contains("checking the source: ")),
        "the run ended before its read: {seen:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = std::time::Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-s", "INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(10),
            "the read went on after the interrupt"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let stderr = [seen, rest].concat().join("\n");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted: nothing committed"), "{stderr}");
    // Stopped in the read itself, not after it.
    assert!(stderr.contains("reading: stopped after"), "{stderr}");
    assert!(
        fx.log().await.rows.is_empty(),
        "an interrupted first load left rows in the log"
    );
    let (status, _) = last_run(&mut fx).await;
    assert_eq!(status.as_deref(), Some("interrupted"));
}

/// A SQLite statement runs to its end inside one call on the driver's thread: an
/// interrupt in the middle of a long one (comparing 100k changed rows and 20k deletes with
/// the log, about 3 s here) ends it within a second rather than after it (a trial waited 84 s for "detecting changes"), and
/// nothing is committed.
#[tokio::test]
async fn an_interrupt_ends_a_long_sqlite_statement_at_once() {
    use std::io::{BufRead, BufReader};
    let mut fx = Fixture::sqlite().await;
    fx.insert_customers(200_000).await;
    fx.run("2026-03-02T09:30:00Z").await;
    fx.exec(
        "DELETE FROM src_customers WHERE customer_id % 10 = 0;
         UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T09:40:00Z' WHERE customer_id % 2 = 1",
    )
    .await;
    let logged = fx.count("customer_versions").await;
    let mut child = cli::command(&fx.config_path())
        .args([
            "run",
            "-v",
            "--upper",
            UPPER,
            "--reconcile-deletes",
            "--allow-mass-delete",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start dimlog");
    // The step before the comparison logs its end: the comparison has begun.
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = Vec::new();
    while let Some(Ok(line)) = lines.next() {
        let begun = line.contains("reconciling deletes: ");
        seen.push(line);
        if begun {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.contains("reconciling deletes: ")),
        "the run ended before its comparison: {seen:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = std::time::Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-s", "INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("wait");
    let answered = sent.elapsed();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let stderr = [seen, rest].concat().join("\n");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("detecting changes: stopped after"), "{stderr}");
    assert!(
        answered < Duration::from_secs(1),
        "the statement went on for {answered:?} after the interrupt:\n{stderr}"
    );
    assert_eq!(fx.count("customer_versions").await, logged, "something was committed");
    let (status, _) = last_run(&mut fx).await;
    assert_eq!(status.as_deref(), Some("interrupted"));
}

#[tokio::test]
async fn an_interrupted_rebuild_leaves_no_session_behind() {
    interrupted_rebuild(Fixture::postgres().await).await;
}

const UPPER: &str = "2026-03-02T10:00:00Z";

/// A loaded dimension, then changes of every kind for the next run.
async fn prepare(fx: &mut Fixture) {
    prepare_source(fx).await;
    fx.run("2026-03-02T09:30:00Z").await;
    changes(fx).await;
}

/// The source's first rows.
pub(super) async fn prepare_source(fx: &mut Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z'),
             (3, 'cyd@example.com', 'pro', 'NL', '2026-03-02T09:20:00Z')",
    )
    .await;
}

/// Changes of every kind, for the run after the first.
async fn changes(fx: &mut Fixture) {
    fx.exec(
        "UPDATE src_customers SET tier = NULL, updated_at = '2026-03-02T09:40:00Z' WHERE customer_id = 1;
         UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T09:45:00Z' WHERE customer_id = 2;
         INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (4, 'dee@example.com', '', 'LU', '2026-03-02T09:50:00Z')",
    )
    .await;
}

/// The status and error of the newest run record.
async fn last_run(fx: &mut Fixture) -> (Option<String>, Option<String>) {
    let runs = fx.runs().await.records();
    let last = runs.last().expect("a run record").clone();
    (last["status"].clone(), last["error"].clone())
}

async fn an_interrupted_run_rolls_back_and_says_so(mut fx: Fixture) {
    prepare(&mut fx).await;
    let before = (fx.log().await, fx.dimension().await, fx.state().await);
    let config = fx.config_path();

    // Interrupted while parked after the append (in its open transaction), by either signal.
    let mut interrupted_read = Vec::new();
    for signal in ["INT", "TERM"] {
        let held = cli::hold(&config, &["run", "-v", "--upper", UPPER], "after_append").await;
        let (status, stderr) = held.signal(signal, Duration::from_secs(30));
        assert_eq!(status.code(), Some(130), "SIG{signal}: {stderr}");
        assert!(
            stderr.contains("interrupted: nothing committed"),
            "SIG{signal}: {stderr}"
        );
        // The step it was in is logged as stopped, not as done.
        let stopped: Vec<&str> = stderr
            .lines()
            .filter_map(|l| l.split_once(": stopped after ").map(|(head, _)| head))
            .collect();
        assert_eq!(stopped.len(), 1, "SIG{signal}: {stderr}");
        let step = stopped[0].rsplit("INFO ").next().unwrap_or(stopped[0]);
        let done = format!("{step}: ");
        assert!(
            !stderr.lines().any(|l| l.contains(&done)
                && l.split(&done)
                    .nth(1)
                    .is_some_and(|t| t.starts_with(|c: char| c.is_ascii_digit()))),
            "SIG{signal}: step {step:?} logged as done: {stderr}"
        );

        assert_eq!(
            (fx.log().await, fx.dimension().await, fx.state().await),
            before,
            "SIG{signal}: an interrupted run changed the target"
        );
        let (status, error) = last_run(&mut fx).await;
        assert_eq!(status.as_deref(), Some("interrupted"), "SIG{signal}");
        assert!(error.is_some_and(|e| e.contains("interrupted")), "SIG{signal}");
        let runs = fx.runs().await;
        interrupted_read.push(["rows_read", "rows_after_dedupe"].map(|c| runs.values(c).last().cloned().flatten()));
        // Its lock went with it: a run that refuses to wait gets it.
        let out = cli::run(&config, &["run", "--no-wait", "--dry-run", "--upper", UPPER]);
        assert_eq!(
            out.code,
            Some(0),
            "SIG{signal}: the lock outlived the interrupted run: {out:?}"
        );
    }

    if fx.backend != Backend::Sqlite {
        // Waiting in a statement (for a lock another session holds on the log), the run
        // has its statement cancelled: it does not wait for that session to finish.
        interrupted_in_a_statement(&mut fx).await;
        assert_eq!(
            (fx.log().await, fx.dimension().await, fx.state().await),
            before,
            "an interrupted run changed the target"
        );
    }

    // The next run loads everything the interrupted ones had read.
    let out = cli::run(&config, &["run", "--json", "--upper", UPPER]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
    assert_eq!(
        (report["versions"].as_i64(), report["tombstones"].as_i64()),
        (Some(2), Some(1)),
        "{out:?}"
    );
    // The interrupted runs are recorded with the rows they had read and kept after
    // dedupe: the same window.
    let reached = ["rows_read", "rows_after_dedupe"].map(|c| report[c].as_i64().map(|n| n.to_string()));
    assert!(
        reached.iter().all(|n| n.as_deref().is_some_and(|n| n != "0")),
        "{out:?}"
    );
    assert_eq!(interrupted_read, vec![reached.clone(); 2], "{out:?}");
    let statuses = fx.runs().await.values("status");
    assert_eq!(
        statuses.iter().filter(|s| s.as_deref() == Some("interrupted")).count(),
        if fx.backend == Backend::Sqlite { 2 } else { 3 },
        "{statuses:?}"
    );
    assert!(
        !statuses.iter().any(|s| s.as_deref() == Some("running")),
        "{statuses:?}"
    );
}

/// A run blocked in its append (another session holds the log in EXCLUSIVE mode: reads
/// go on, writes wait), then SIGINT: it exits 130 within seconds while that session still
/// holds its lock, and records itself as interrupted.
async fn interrupted_in_a_statement(fx: &mut Fixture) {
    use sqlx::{Connection, Executor};
    let runs_before = fx.runs().await.rows.len();
    let mut blocker = locked_by_another_session(&fx.target_url, "customer_versions").await;
    let child = start_until_it_waits(
        fx,
        &["run", "--upper", UPPER],
        "the run never waited for the log's lock",
    )
    .await;
    let (status, stderr) = interrupt(
        child,
        Duration::from_secs(20),
        "the interrupted run waited for the statement it was in",
    )
    .await;
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted: nothing committed"), "{stderr}");
    assert_eq!(fx.runs().await.rows.len(), runs_before + 1, "{stderr}");
    let (status, _) = last_run(fx).await;
    assert_eq!(status.as_deref(), Some("interrupted"), "{stderr}");
    blocker.execute("ROLLBACK").await.expect("rollback");
    blocker.close().await.expect("close");
}

async fn an_interrupted_backfill_keeps_the_chunks_before_it(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-01T09:00:00Z'),
             (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z'),
             (3, 'cyd@example.com', 'pro', 'NL', '2026-03-03T09:00:00Z')",
    )
    .await;
    let config = fx.config_path();
    let args = [
        "backfill",
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-04T00:00:00Z",
        "--chunk",
        "1d",
    ];
    // Every chunk parks at after_append; the first is interrupted there.
    let held = cli::hold(&config, &args, "after_append").await;
    let (status, stderr) = held.signal("INT", Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted: nothing committed"), "{stderr}");
    assert_eq!(fx.count("customer_versions").await, 0);
    let (status, _) = last_run(&mut fx).await;
    assert_eq!(status.as_deref(), Some("interrupted"));

    // `--only-failed` reruns the interrupted chunk, and only it: the chunks that never
    // ran are still not loaded, and it says so (exit 1).
    let out = cli::run(&config, &[&args[..], &["--only-failed"]].concat());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("2 chunk(s) of the range are not loaded"), "{out:?}");
    assert_eq!(fx.count("customer_versions").await, 1, "{out:?}");
    // The rest, then: all three days, each once.
    let out = cli::run(&config, &args);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(fx.count("customer_versions").await, 3, "{out:?}");
}

/// `rebuild` waiting in a statement (a lock another session holds on the dimension),
/// then SIGINT: it exits 130 and its server session is gone at once (its statement
/// cancelled), though the other session still holds its lock: no lock of dimlog's is
/// left behind for the next run to wait on (found by an outside trial: it lingered).
async fn interrupted_rebuild(mut fx: Fixture) {
    use sqlx::{Connection, Executor};
    prepare(&mut fx).await;
    // A dimension that differs from the log, so the rebuild has rows to write.
    fx.target_exec("UPDATE dim_customer SET tier = 'edited'").await;
    let mut blocker = locked_by_another_session(&fx.target_url, "dim_customer").await;
    let child = start_until_it_waits(
        &mut fx,
        &["rebuild"],
        "the rebuild never waited for the dimension's lock",
    )
    .await;
    let (status, stderr) = interrupt(child, Duration::from_secs(60), "the interrupted rebuild did not exit").await;
    assert_eq!(status.code(), Some(130), "{stderr}");
    // Its session ends while the blocker still holds the lock it waited for.
    let mut gone = false;
    // (Within a second: left alone, such a session lives on until its lock wait ends.)
    for _ in 0..50 {
        if fx.target_query(DIMLOG_SESSIONS).await[0][0].as_deref() == Some("0") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = fx
        .target_query("SELECT pid::text, state, wait_event_type, left(query, 80), application_name FROM pg_stat_activity WHERE application_name LIKE 'dimlog:%' AND datname = current_database()")
        .await;
    assert!(
        gone,
        "the interrupted rebuild's session is still there: {left:?}\n{stderr}"
    );
    blocker.execute("ROLLBACK").await.expect("rollback");
    blocker.close().await.expect("close");
    let out = cli::run(&fx.config_path(), &["run", "--no-wait", "--upper", UPPER]);
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// The command's sessions (the fixture's own are named plain `dimlog`).
/// This test's dimlog sessions: those of its own database (tests run side by side on one
/// server, and another test's run is no session this one left).
const DIMLOG_SESSIONS: &str =
    "SELECT count(*)::text FROM pg_stat_activity WHERE application_name LIKE 'dimlog:%' AND datname = current_database()";

/// Starts `dimlog <args>` and returns once one of its sessions waits for a lock (at most
/// 30 s; else fails with `never`).
async fn start_until_it_waits(fx: &mut Fixture, args: &[&str], never: &str) -> std::process::Child {
    let mut child = cli::command(&fx.config_path())
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start dimlog");
    for _ in 0..1500 {
        let rows = fx
            .target_query(&format!("{DIMLOG_SESSIONS} AND wait_event_type = 'Lock'"))
            .await;
        if rows[0][0].as_deref() != Some("0") {
            return child;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{never}");
}

/// Sends SIGINT and waits for the exit (failing with `slow` after `limit`): its status
/// and all it wrote to stderr.
async fn interrupt(mut child: std::process::Child, limit: Duration, slow: &str) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let started = std::time::Instant::now();
    let sent = std::process::Command::new("kill")
        .args(["-s", "INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(started.elapsed() < limit, "{slow}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read");
    (status, stderr)
}

/// A session holding `table` in EXCLUSIVE mode (reads go on, writes wait) until it rolls
/// back.
async fn locked_by_another_session(url: &str, table: &str) -> sqlx::PgConnection {
    use sqlx::{Connection, Executor};
    let mut blocker = sqlx::PgConnection::connect(url).await.expect("connect");
    blocker.execute("BEGIN").await.expect("begin");
    blocker
        .execute(format!("LOCK TABLE {table} IN EXCLUSIVE MODE").as_str())
        .await
        .unwrap_or_else(|e| panic!("lock {table}: {e}"));
    blocker
}

/// A run killed (SIGKILL: no rollback of its own) while its statement waits in the
/// server leaves no session behind holding the dimension's lock: the server notices
/// within seconds that the client is gone (`client_connection_check_interval`), not when
/// the statement ends (a trial saw a killed run's session hold the lock for 2.5 minutes).
#[tokio::test]
async fn a_run_killed_in_a_statement_frees_its_lock_within_seconds() {
    use sqlx::{Connection, Executor};
    let mut fx = Fixture::postgres().await;
    prepare(&mut fx).await;
    let mut blocker = locked_by_another_session(&fx.target_url, "customer_versions").await;
    let mut child = start_until_it_waits(
        &mut fx,
        &["run", "--upper", UPPER],
        "the run never waited for the log's lock",
    )
    .await;
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let killed = std::time::Instant::now();
    let mut left = Some("?".to_string());
    while killed.elapsed() < Duration::from_secs(10) {
        left = fx.target_query(DIMLOG_SESSIONS).await[0][0].clone();
        if left.as_deref() == Some("0") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        left.as_deref(),
        Some("0"),
        "the killed run's session still waits in the server 10 s later"
    );
    // Its lock went with it, while the other session still holds the log.
    let out = cli::run(&fx.config_path(), &["run", "--no-wait", "--dry-run", "--upper", UPPER]);
    assert_eq!(out.code, Some(0), "{out:?}");
    blocker.execute("ROLLBACK").await.expect("rollback");
    blocker.close().await.expect("close");
}
