//! A first load into a SQLite target file that does not exist is built beside it, as
//! `.<name>.dimlog-new`, and appears under its name whole, when the run ends (issue 18:
//! written without a WAL it loads a second sooner at a million rows). Before that no one
//! sees it; an interrupted or failed first load is recorded in it as any run is; a killed
//! one leaves no target, and the next run starts over; a second first load waits for the
//! first or says it is locked; a file someone else created meanwhile is never replaced.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::{ConnectOptions, Connection};

use super::cli;
use crate::support::fixture::Fixture;

const UPPER: &str = "2026-03-02T10:00:00Z";

/// A SQLite fixture whose config names a target file that does not exist (the fixture
/// keeps its own target open), with the three source rows of the interrupt tests; the
/// file's path.
async fn new_target() -> (Fixture, PathBuf) {
    let mut fx = Fixture::sqlite().await;
    let own = fx.dir().join("own.db");
    let target = fx.target_url.clone();
    fx.edit_config(&target, &format!("sqlite://{}", own.display()));
    super::interrupt::prepare_source(&mut fx).await;
    (fx, own)
}

/// Where the first load builds `file`.
fn building(file: &Path) -> PathBuf {
    let name = file.file_name().unwrap().to_string_lossy();
    file.with_file_name(format!(".{name}.dimlog-new"))
}

/// The first value of `sql` on the SQLite file `file`, as text.
async fn value(file: &Path, sql: &str) -> Option<String> {
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(file)
        .connect()
        .await
        .expect("open the file");
    let v: Option<String> = sqlx::query_scalar(sql).fetch_one(&mut conn).await.expect(sql);
    conn.close().await.expect("close");
    v
}

/// What a first load that ended left in `file`: its journal mode, its log's rows and its
/// last run's status.
async fn outcome(file: &Path) -> (String, i64, String) {
    let mode = value(file, "PRAGMA journal_mode").await.unwrap_or_default();
    let rows = value(file, "SELECT CAST(count(*) AS TEXT) FROM customer_versions")
        .await
        .unwrap_or_default()
        .parse()
        .unwrap();
    let status = value(file, "SELECT status FROM dimlog_runs ORDER BY run_id DESC LIMIT 1")
        .await
        .unwrap_or_default();
    (mode, rows, status)
}

#[tokio::test]
async fn a_new_file_appears_only_when_the_first_load_ends() {
    let (fx, own) = new_target().await;
    let config = fx.config_path();
    let held = cli::hold(&config, &["run", "--upper", UPPER], "after_append").await;
    assert!(!own.exists(), "the half-built target is visible under its name");
    assert!(building(&own).exists(), "no file is being built beside the target");
    let status = cli::run(&config, &["status"]);
    assert_eq!(status.code, Some(2), "a target not there yet is not loaded: {status:?}");
    // Interrupted, the run is recorded in the file, which is put in place.
    let (exit, stderr) = held.signal("INT", Duration::from_secs(30));
    assert_eq!(exit.code(), Some(130), "{stderr}");
    assert!(!building(&own).exists(), "the building file is left behind");
    assert_eq!(outcome(&own).await, ("wal".to_string(), 0, "interrupted".to_string()));
    // Stopped after its read, it records the rows it read and kept (one per key).
    let counted = value(
        &own,
        "SELECT rows_read || '/' || rows_after_dedupe FROM dimlog_runs ORDER BY run_id DESC LIMIT 1",
    )
    .await;
    assert_eq!(counted.as_deref(), Some("3/3"));
    let again = cli::run(&config, &["run", "--upper", UPPER]);
    assert_eq!(again.code, Some(0), "{again:?}");
    assert_eq!(outcome(&own).await, ("wal".to_string(), 3, "succeeded".to_string()));
}

#[tokio::test]
async fn a_failed_first_load_is_recorded_in_the_new_file() {
    let (fx, own) = new_target().await;
    let mut failing = cli::command(&fx.config_path());
    failing.env("DIMLOG_FAILPOINT", "after_append");
    let failed = cli::run_with(failing, &["run", "--upper", UPPER]);
    assert_ne!(failed.code, Some(0), "{failed:?}");
    assert!(!building(&own).exists(), "the building file is left behind");
    assert_eq!(outcome(&own).await, ("wal".to_string(), 0, "failed".to_string()));
}

#[tokio::test]
async fn a_killed_first_load_leaves_no_target_and_the_next_run_starts_over() {
    let (fx, own) = new_target().await;
    let config = fx.config_path();
    let held = cli::hold(&config, &["run", "--upper", UPPER], "after_append").await;
    held.kill();
    assert!(!own.exists(), "a killed first load left a target");
    assert!(building(&own).exists());
    let again = cli::run(&config, &["run", "--upper", UPPER]);
    assert_eq!(again.code, Some(0), "{again:?}");
    assert!(!building(&own).exists(), "the building file is left behind");
    assert_eq!(outcome(&own).await, ("wal".to_string(), 3, "succeeded".to_string()));
}

#[tokio::test]
async fn a_second_first_load_waits_for_the_first_or_says_it_is_locked() {
    let (fx, own) = new_target().await;
    let config = fx.config_path();
    let held = cli::hold(&config, &["run", "--upper", UPPER], "after_append").await;
    let refused = cli::run(&config, &["run", "--no-wait", "--upper", UPPER]);
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains("another dimlog run is creating"), "{refused:?}");
    let waiting = cli::command(&config)
        .args(["run", "--upper", UPPER])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start dimlog");
    tokio::time::sleep(Duration::from_millis(500)).await;
    held.kill();
    let waited = tokio::task::spawn_blocking(move || waiting.wait_with_output())
        .await
        .unwrap()
        .expect("wait");
    let said = String::from_utf8_lossy(&waited.stderr);
    assert_eq!(waited.status.code(), Some(0), "{said}");
    assert!(
        said.contains("waiting for another dimlog run that is creating"),
        "the wait was silent: {said}"
    );
    assert!(!building(&own).exists(), "the building file is left behind");
    assert_eq!(outcome(&own).await, ("wal".to_string(), 3, "succeeded".to_string()));
}

#[tokio::test]
async fn a_target_file_created_meanwhile_is_not_replaced() {
    let (fx, own) = new_target().await;
    let config = fx.config_path();
    let held = cli::hold_at(
        &config,
        &["run", "--upper", UPPER],
        "after_append",
        "linger",
        "lingering 3 s",
    )
    .await;
    let mut other = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&own)
        .create_if_missing(true)
        .connect()
        .await
        .expect("create the file");
    sqlx::query("CREATE TABLE someone_elses (x)")
        .execute(&mut other)
        .await
        .unwrap();
    other.close().await.unwrap();
    let (exit, stderr) = held.wait(Duration::from_secs(60));
    assert_eq!(exit.code(), Some(1), "{stderr}");
    assert!(stderr.contains("was created by another process"), "{stderr}");
    assert!(!building(&own).exists(), "the building file is left behind");
    assert_eq!(
        value(&own, "SELECT group_concat(name) FROM sqlite_schema")
            .await
            .as_deref(),
        Some("someone_elses"),
        "the file created meanwhile was changed"
    );
}

/// A file name that leaves no room for the files SQLite writes beside it (`-journal`) is
/// refused before anything is created, whatever its length past the limit.
#[tokio::test]
async fn a_target_name_too_long_for_sqlites_own_files_is_refused_up_front() {
    let (mut fx, own) = new_target().await;
    let config = fx.config_path();
    let mut previous = own.clone();
    for length in [248, 250, 255] {
        let long = fx.dir().join(format!("{}.db", "n".repeat(length - 3)));
        fx.edit_config(
            &format!("sqlite://{}", previous.display()),
            &format!("sqlite://{}", long.display()),
        );
        previous = long.clone();
        let refused = cli::run(&config, &["run", "--json", "--upper", UPPER]);
        assert_eq!(refused.code, Some(1), "{length} bytes: {refused:?}");
        assert!(refused.all().contains("\"kind\":\"connect\""), "{refused:?}");
        assert!(refused.all().contains("at most 247 bytes"), "{refused:?}");
        let left: Vec<_> = std::fs::read_dir(fx.dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("nnnn"))
            .collect();
        assert!(left.is_empty(), "{length} bytes: left {left:?}");
    }
    // The longest name that leaves that room loads.
    let fits = fx.dir().join(format!("{}.db", "m".repeat(247 - 3)));
    fx.edit_config(
        &format!("sqlite://{}", previous.display()),
        &format!("sqlite://{}", fits.display()),
    );
    let loaded = cli::run(&config, &["run", "--upper", UPPER]);
    assert_eq!(loaded.code, Some(0), "{loaded:?}");
    assert_eq!(outcome(&fits).await, ("wal".to_string(), 3, "succeeded".to_string()));
}

/// A first load refused for its change column (a time without a zone, a value that is no
/// instant or not UTF-8, a NULL, wherever the row lies among many) or because its upper bound is before every
/// row leaves no file, dry run or not, and says what it says on a target that exists: a
/// zone is a config error (exit 2) found before any other fault of the column; a value
/// with no instant names its key (exit 1). A load that reads one row among many after its
/// upper bound is no refusal. Then the fixed source loads. (The first load's
/// read makes these checks as it goes, into a file it drops when they refuse it.)
#[tokio::test]
async fn a_first_load_refused_for_its_change_column_leaves_no_file() {
    let (mut fx, own) = new_target().await;
    let config = fx.config_path();
    fx.create_source_table("src_checked", true, false).await;
    fx.set_setting("table", "\"src_checked\"");
    const ROWS: i64 = 300;
    let good = "2026-03-02T09:00:00Z";
    // (The faults: key and value; the exit code, JSON kind and words the refusal has.)
    type Case = (Vec<(i64, Option<&'static str>)>, i32, &'static str, Vec<&'static str>);
    let mut cases: Vec<Case> = Vec::new();
    for at in [1, ROWS / 2, ROWS] {
        for zone_less in ["2026-03-02 09:00:00", "2026-03-02T09:00:00", "2026-03-02"] {
            cases.push((
                vec![(at, Some(zone_less))],
                2,
                "config",
                vec!["source.timezone", zone_less],
            ));
        }
        for no_instant in [
            "garbage",
            "",
            "2026-13-45T99:00:00Z",
            "2026-02-30T09:00:00Z",
            "Infinity",
        ] {
            let key: &'static str = Box::leak(at.to_string().into_boxed_str());
            cases.push((vec![(at, Some(no_instant))], 1, "source", vec!["updated_at", key]));
        }
        // A NULL alone (found before the read).
        let key: &'static str = Box::leak(at.to_string().into_boxed_str());
        cases.push((vec![(at, None)], 1, "source", vec!["NULL", "source.updated_at", key]));
        // Text that is not UTF-8 (written as SQL, not quoted).
        cases.push((
            vec![(at, Some("CAST(X'FF00FE' AS TEXT)"))],
            1,
            "source",
            vec!["not valid UTF-8", "must hold a time", key],
        ));
        // A value with no instant before a time without a zone, or a NULL: the zone first.
        let before = if at == 1 { ROWS } else { 1 };
        for other in [Some("garbage"), None] {
            cases.push((
                vec![(before, other), (at, Some("2026-03-02 09:00:00"))],
                2,
                "config",
                vec!["source.timezone"],
            ));
        }
        // One row in the window, the others after the upper bound: no refusal.
        cases.push((vec![(at, Some(good))], 0, "", vec![]));
    }
    // Every row after the upper bound: the first load would read nothing.
    cases.push((vec![], 2, "window", vec!["oldest", "2026-03-02T11:00:00"]));
    for (faults, code, kind, words) in cases {
        let late = code == 0 || faults.is_empty();
        let stamp = if late { "2026-03-02T11:00:00Z" } else { good };
        fx.exec(&format!(
            "DELETE FROM src_checked;
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS})
             INSERT INTO src_checked (customer_id, email, tier, country, updated_at)
             SELECT i, 'user' || i || '@example.com', 'pro', 'FR', '{stamp}' FROM n"
        ))
        .await;
        for (key, value) in &faults {
            let value = match value {
                None => "NULL".to_string(),
                Some(sql) if sql.starts_with("CAST(") => sql.to_string(),
                Some(v) => format!("'{v}'"),
            };
            fx.exec(&format!(
                "UPDATE src_checked SET updated_at = {value} WHERE customer_id = {key}"
            ))
            .await;
        }
        for dry in [false, true] {
            let mut args = vec!["run", "--json", "--upper", UPPER];
            if dry {
                args.push("--dry-run");
            }
            let out = cli::run(&config, &args);
            let what = format!("{faults:?}{}", if dry { " (dry run)" } else { "" });
            assert!(!building(&own).exists(), "{what}: the building file is left behind");
            if code == 0 {
                assert_eq!(out.code, Some(0), "{what}: {out:?}");
                continue;
            }
            assert_eq!(out.code, Some(code), "{what}: {out:?}");
            assert!(!own.exists(), "{what}: the refused first load left a target: {out:?}");
            let json: serde_json::Value =
                serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{what}: {e}: {out:?}"));
            assert_eq!(json["error"]["kind"], kind, "{what}: {json}");
            let message = json["error"]["message"].as_str().unwrap_or_default();
            for word in &words {
                assert!(message.contains(word), "{what}: {word:?} missing: {message}");
            }
        }
        if code == 0 {
            // A load that read the one row in the window: the file is there (and goes).
            assert_eq!(outcome(&own).await, ("wal".to_string(), 1, "succeeded".to_string()));
            std::fs::remove_file(&own).unwrap();
        }
    }
    fx.exec(&format!("UPDATE src_checked SET updated_at = '{good}'")).await;
    let loaded = cli::run(&config, &["run", "--upper", UPPER]);
    assert_eq!(loaded.code, Some(0), "{loaded:?}");
    assert_eq!(outcome(&own).await, ("wal".to_string(), ROWS, "succeeded".to_string()));
}

/// A target file's name written with URL escapes (`%20`), or in a folder whose name has
/// `%`, `#` or `?` in it, names one file for every command: the first load's, the next
/// run's (an incremental one, with the first's history), `status`'s and `doctor`'s.
#[tokio::test]
async fn a_target_path_with_url_escapes_names_one_file() {
    let (mut fx, own) = new_target().await;
    let config = fx.config_path();
    let odd = fx.dir().join("a%b #c?d");
    std::fs::create_dir(&odd).unwrap();
    let escaped = |s: &str| s.replace('%', "%25").replace('#', "%23").replace('?', "%3F");
    // (Written as a config holds them: the escapes decoded, the files named so.)
    let cases = [
        ("w%20h.db".to_string(), fx.dir().join("w h.db")),
        (
            format!("{}/x%2525.db", escaped(&odd.display().to_string())),
            odd.join("x%25.db"),
        ),
    ];
    let mut previous = format!("sqlite://{}", own.display());
    for (written, file) in cases {
        let url = format!("sqlite://{written}");
        fx.edit_config(&previous, &url);
        previous = url;
        let before: Vec<_> = std::fs::read_dir(file.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let first = cli::run(&config, &["run", "--upper", UPPER]);
        assert_eq!(first.code, Some(0), "{written}: {first:?}");
        assert_eq!(
            outcome(&file).await,
            ("wal".to_string(), 3, "succeeded".to_string()),
            "{written}"
        );
        for command in [&["status"][..], &["doctor"][..], &["verify"][..]] {
            let out = cli::run(&config, command);
            assert_eq!(out.code, Some(0), "{written}: {command:?}: {out:?}");
        }
        fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T10:30:00Z' WHERE customer_id = 1")
            .await;
        let next = cli::run(&config, &["run", "--json", "--upper", "2026-03-02T11:00:00Z"]);
        assert_eq!(next.code, Some(0), "{written}: {next:?}");
        let report: serde_json::Value = serde_json::from_str(&next.stdout).unwrap();
        assert_eq!(
            report["watermark_before"], "2026-03-02T09:20:00.000000Z",
            "{written}: not incremental: {report}"
        );
        assert_eq!(report["versions"], 1, "{written}: {report}");
        assert_eq!(
            outcome(&file).await,
            ("wal".to_string(), 4, "succeeded".to_string()),
            "{written}"
        );
        let after: Vec<_> = std::fs::read_dir(file.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let new: Vec<_> = after.iter().filter(|n| !before.contains(n)).collect();
        assert_eq!(new, vec![file.file_name().unwrap()], "{written}: files made: {after:?}");
        fx.exec("UPDATE src_customers SET tier = 'free', updated_at = '2026-03-02T09:00:00Z' WHERE customer_id = 1")
            .await;
    }
}

/// A target file in a folder that does not exist (one level or several missing): the run
/// says so, naming the folder (exit 1, kind `connect`), and creates nothing; with the
/// folder made, it loads.
#[tokio::test]
async fn a_target_in_a_missing_folder_is_named_as_such() {
    let (mut fx, own) = new_target().await;
    let config = fx.config_path();
    let mut previous = format!("sqlite://{}", own.display());
    for missing in ["nosuch", "nosuch/deeper/still"] {
        let folder = fx.dir().join(missing);
        let file = folder.join("w.db");
        let url = format!("sqlite://{}", file.display());
        fx.edit_config(&previous, &url);
        previous = url;
        let out = cli::run(&config, &["run", "--json", "--upper", UPPER]);
        assert_eq!(out.code, Some(1), "{missing}: {out:?}");
        let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        assert_eq!(json["error"]["kind"], "connect", "{json}");
        let message = json["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("does not exist") && message.contains(&folder.display().to_string()),
            "{missing}: {message}"
        );
        assert!(!fx.dir().join("nosuch").exists(), "{missing}: a folder was made");
    }
    std::fs::create_dir_all(fx.dir().join("nosuch/deeper/still")).unwrap();
    let loaded = cli::run(&config, &["run", "--upper", UPPER]);
    assert_eq!(loaded.code, Some(0), "{loaded:?}");
    assert_eq!(
        outcome(&fx.dir().join("nosuch/deeper/still/w.db")).await,
        ("wal".to_string(), 3, "succeeded".to_string())
    );
}
