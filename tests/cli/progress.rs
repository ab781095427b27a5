//! What a long run says while it works (issue 17), off a terminal: with `-v`, one log line
//! per step once it is done, with its duration and the rows read during it; without
//! `-v`, nothing but the result.

use super::{assert_code, dimlog, text};
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(each_step_of_a_run_is_one_line_with_v);

async fn each_step_of_a_run_is_one_line_with_v(mut fx: Fixture) {
    fifty_customers(&mut fx).await;
    fx.run("2026-03-01T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-01T11:00:00Z' WHERE customer_id <= 20")
        .await;
    let config = fx.config_path();
    let config = config.to_str().unwrap();

    let quiet = dimlog(
        fx.dir(),
        &[
            "--config",
            config,
            "run",
            "--dry-run",
            "--upper",
            "2026-03-01T12:00:00Z",
        ],
    );
    assert_code(&quiet, 0, "run --dry-run");
    assert!(!text(&quiet.stderr).contains("reading:"), "{}", text(&quiet.stderr));

    let out = dimlog(
        fx.dir(),
        &["--config", config, "-v", "run", "--upper", "2026-03-01T12:00:00Z"],
    );
    assert_code(&out, 0, "-v run");
    let stderr = text(&out.stderr);
    let steps = [
        "reading: ",
        "detecting changes: ",
        "appending to the log: ",
        "committing: ",
    ];
    let mut at = 0;
    for step in steps {
        let line = stderr[at..]
            .lines()
            .find(|l| l.contains(step))
            .unwrap_or_else(|| panic!("no line for {step:?} (in order) in:\n{stderr}"));
        let seconds = line
            .split(step)
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .unwrap_or_default();
        assert!(seconds.parse::<f64>().is_ok(), "{step:?} without a duration: {line}");
        at += stderr[at..].find(line).expect("found") + line.len();
    }
    let reading = stderr.lines().find(|l| l.contains("reading: ")).expect("reading");
    // The rows it names are the rows the run read.
    let read = stderr
        .split("rows_read=")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .expect("the run's summary line");
    assert!(
        reading.contains(&format!(" {read} rows (")) && reading.contains("rows/s)"),
        "{reading}\n{stderr}"
    );
}

on_both_backends!(a_full_refresh_that_logs_late_versions_says_why);

/// A source row whose `updated_at` moved backwards, read by a full refresh, becomes a
/// late version: the run says so, and how to find such keys (found by an outside trial:
/// it was silent).
async fn a_full_refresh_that_logs_late_versions_says_why(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-01T09:00:00Z'),
             (2, 'bob@example.com', 'free', 'FR', '2026-03-01T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-01T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-02-01T09:00:00Z' WHERE customer_id = 1")
        .await;
    let config = fx.config_path();
    let config = config.to_str().unwrap();
    let out = dimlog(
        fx.dir(),
        &["--config", config, "run", "--upper", "2026-03-01T11:00:00Z"],
    );
    assert_code(&out, 0, "an incremental run");
    assert!(!text(&out.stderr).contains("late versions"), "{}", text(&out.stderr));
    let out = dimlog(
        fx.dir(),
        &[
            "--config",
            config,
            "run",
            "--full-refresh",
            "--upper",
            "2026-03-01T11:00:00Z",
        ],
    );
    assert_code(&out, 0, "a full refresh");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("warning: 1 source row(s) are stamped before their key's current version")
            && stderr.contains("source_behind"),
        "{stderr}"
    );
}

/// On a terminal (a pseudo-terminal made by `script`), a run shows a progress line: the
/// step under way with rows and rows/s, redrawn and cleared when the run ends.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn on_a_terminal_a_run_shows_a_progress_line() {
    let mut fx = Fixture::sqlite().await;
    fifty_customers(&mut fx).await;
    let command = format!(
        "{} --config {} run --upper 2026-03-01T10:00:00Z",
        env!("CARGO_BIN_EXE_dimlog"),
        fx.config_path().display()
    );
    // A step made slow (300 ms) so that the line is drawn before the run ends.
    let out = std::process::Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env("DIMLOG_FAILPOINT", "after_append:delay")
        .env_remove("NO_COLOR")
        .current_dir(fx.dir())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script (util-linux) runs the command on a pseudo-terminal");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{screen}");
    assert!(
        screen.contains(" rows ("),
        "no progress line on a terminal:\n{screen:?}"
    );
    assert!(
        ["reading", "detecting changes", "appending to the log", "rebuilding"]
            .iter()
            .any(|s| screen.contains(s)),
        "the progress line names no step:\n{screen:?}"
    );
    assert!(screen.contains("run 1 succeeded"), "{screen:?}");
    // The rate in whole rows a second (it read `41,475.6362/s`: an outside trial).
    let rates: Vec<&str> = screen
        .split(" rows (")
        .skip(1)
        .map(|after| after.split(',').next().unwrap_or_default())
        .collect();
    assert!(
        !rates.is_empty() && rates.iter().all(|r| r.ends_with(" rows/s") && !r.contains('.')),
        "{rates:?} in {screen:?}"
    );

    // Off a terminal, no such line.
    let plain = super::dimlog(
        fx.dir(),
        &[
            "--config",
            fx.config_path().to_str().unwrap(),
            "run",
            "--upper",
            "2026-03-01T10:00:00Z",
        ],
    );
    assert!(!text(&plain.stderr).contains(" rows ("), "{}", text(&plain.stderr));
}

/// Customers 1 to 50, stamped 2026-03-01T09:00:00Z.
async fn fifty_customers(fx: &mut Fixture) {
    let values: Vec<String> = (1..=50)
        .map(|i| format!("({i}, 'user{i}@example.com', 'free', 'FR', '2026-03-01T09:00:00Z')"))
        .collect();
    fx.exec(&format!(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES {}",
        values.join(", ")
    ))
    .await;
}
