//! The window is checked before anything is read (spec section 1), and rows stamped after
//! the upper bound are counted, never silently skipped (issue 14, items 6 and 7).
//!
//! A matrix of clocks: `--upper` ahead of the source's clock by a microsecond to ten
//! years, `--upper` behind `watermark - lookback` by the same steps, a `safety_lag` that
//! puts the upper bound behind the window, and a watermark already in the future (as an
//! older dimlog could leave it). Each is refused with exit 2 naming both times, and commits
//! nothing, not even a run record. Boundaries pass.

use chrono::{Duration, Utc};
use dimlog::pipeline::RunOptions;
use dimlog::ts::Micros;

use super::cli;
use crate::support::fixture::{on_both_backends, ts, Fixture};

on_both_backends!(
    upper_after_the_source_clock_is_refused,
    upper_before_the_window_is_refused,
    upper_at_the_low_end_of_the_window_passes,
    a_safety_lag_that_empties_the_window_is_refused,
    a_watermark_in_the_future_is_refused_not_read_past,
    rows_after_the_upper_bound_are_counted_and_warned,
    a_first_load_before_the_oldest_row_is_refused,
    a_backfill_after_the_source_clock_is_refused,
    a_change_column_without_an_instant_fails_naming_the_key,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";
const FIRST: &str = "2026-03-02T10:00:00Z";

fn at(upper: Micros) -> RunOptions {
    RunOptions {
        upper: Some(upper),
        ..RunOptions::incremental()
    }
}

/// A dimension with one version and the watermark at 09:00 (lookback 15 m).
async fn loaded(fx: &mut Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run(FIRST).await;
}

/// What a refused run must leave: the same log, dimension, watermark and run records.
struct Unchanged {
    log: String,
    dimension: String,
    state: String,
    runs: String,
}

async fn snapshot(fx: &mut Fixture) -> Unchanged {
    Unchanged {
        log: fx.log().await.to_string(),
        dimension: fx.dimension().await.to_string(),
        state: fx.state().await.to_string(),
        runs: fx.runs().await.to_string(),
    }
}

async fn assert_unchanged(fx: &mut Fixture, before: &Unchanged) {
    let after = snapshot(fx).await;
    assert_eq!(after.log, before.log, "the log changed");
    assert_eq!(after.dimension, before.dimension, "the dimension changed");
    assert_eq!(after.state, before.state, "the watermark changed");
    assert_eq!(after.runs, before.runs, "a run record was written");
}

/// Refused by the library (exit code 2) and by the binary (exit 2, `--json` kind), with a
/// message that names each of `times`.
async fn assert_refused(fx: &mut Fixture, upper: Option<&str>, times: &[&str]) {
    let before = snapshot(fx).await;
    let opts = RunOptions {
        upper: upper.map(ts),
        ..RunOptions::incremental()
    };
    let e = fx.try_run_with(opts).await.expect_err("the window is refused");
    assert_eq!(e.exit_code(), 2, "{e}");
    let message = e.to_string();
    for t in times {
        assert!(message.contains(t), "{t:?} missing from: {message}");
    }
    assert_unchanged(fx, &before).await;

    let mut args = vec!["run", "--json"];
    if let Some(u) = upper {
        args.extend(["--upper", u]);
    }
    let out = cli::run(&fx.config_path(), &args);
    assert_eq!(out.code, Some(2), "{out:?}");
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(json["error"]["kind"], "window", "{json}");
    assert_unchanged(fx, &before).await;
}

fn text(t: Micros) -> String {
    t.to_text()
}

/// Steps from a microsecond to ten years.
fn steps() -> Vec<Duration> {
    vec![
        Duration::microseconds(1),
        Duration::seconds(1),
        Duration::hours(1),
        Duration::days(400),
        Duration::days(3653),
    ]
}

async fn upper_after_the_source_clock_is_refused(mut fx: Fixture) {
    loaded(&mut fx).await;
    for step in steps() {
        // The source's clock is this machine's: an upper a minute ahead is ahead of it
        // however long the test takes; one a microsecond ahead of the first read only if the
        // check reads the clock after the bound was taken — so start a minute ahead.
        let upper = Micros::from_utc(Utc::now() + Duration::minutes(1) + step);
        let upper = text(upper);
        assert_refused(&mut fx, Some(&upper), &[&upper, "source's clock"]).await;
    }
}

async fn upper_before_the_window_is_refused(mut fx: Fixture) {
    loaded(&mut fx).await;
    // Watermark 09:00, lookback 15 m: the window starts at 08:45.
    let low = ts("2026-03-02T08:45:00Z");
    for step in steps() {
        let upper = text(Micros::from_utc(low.to_utc() - step));
        assert_refused(
            &mut fx,
            Some(&upper),
            &[
                &upper,
                "2026-03-02T09:00:00.000000Z",
                "2026-03-02T08:45:00.000000Z",
                "backfill",
            ],
        )
        .await;
    }
}

async fn upper_at_the_low_end_of_the_window_passes(mut fx: Fixture) {
    loaded(&mut fx).await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2026-03-02T08:45:00Z')"
    ))
    .await;
    let report = fx.run_with(at(ts("2026-03-02T08:45:00Z"))).await;
    assert_eq!(report.counts.rows_read, 1, "{report:?}");
    assert_eq!(fx.watermark().await.as_deref(), Some("2026-03-02T09:00:00.000000Z"));
}

async fn a_safety_lag_that_empties_the_window_is_refused(mut fx: Fixture) {
    loaded(&mut fx).await;
    fx.set_setting("safety_lag", "\"3650days\"");
    assert_refused(&mut fx, None, &["2026-03-02T08:45:00.000000Z", "source.safety_lag"]).await;
}

/// A watermark in the future (left by an older dimlog, or set by hand) puts every later
/// window after the source's clock: refused, saying so, instead of "0 read" for ever.
async fn a_watermark_in_the_future_is_refused_not_read_past(mut fx: Fixture) {
    loaded(&mut fx).await;
    let future = "2030-01-01T00:00:00.000000Z";
    let set = match fx.backend {
        dimlog::config::Backend::Postgres | dimlog::config::Backend::Citus => {
            format!("UPDATE dimlog_state SET high_watermark = '{future}'")
        }
        dimlog::config::Backend::Sqlite => format!("UPDATE dimlog_state SET high_watermark = '{future}'"),
    };
    fx.target_exec(&set).await;
    assert_refused(
        &mut fx,
        None,
        &[future, "source's clock", "restored from a backup", "full refresh"],
    )
    .await;
    // `doctor` says the same at its clocks check (it said every check was fine).
    let (code, report, clocks) = doctor_clocks(&fx);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(clocks["outcome"], "fail", "{report}");
    assert!(
        clocks["detail"].as_str().unwrap_or_default().contains(future),
        "{report}"
    );
    // Ahead by less than the lookback: runs go on (their window starts before the
    // clock), and doctor does not say they are refused.
    let near = dimlog::ts::Micros(dimlog::ts::Micros::from_utc(chrono::Utc::now()).0 + 5 * 60_000_000).to_text();
    fx.target_exec(&set.replace(future, &near)).await;
    let (_, report, clocks) = doctor_clocks(&fx);
    assert_eq!(clocks["outcome"], "ok", "{report}");
    let out = fx.cli(&["run"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `doctor --json`'s exit code, report and its "clocks" check.
fn doctor_clocks(fx: &Fixture) -> (Option<i32>, serde_json::Value, serde_json::Value) {
    let out = fx.cli(&["doctor", "--json"]);
    let report = crate::cli::json(&out, "doctor --json");
    let clocks = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "clocks")
        .cloned()
        .expect("a clocks check");
    (out.status.code(), report, clocks)
}

/// Rows stamped after the upper bound are not read; the run counts them
/// (`future_rows`, in the report, `run --json`, `dimlog_runs` and `status`) and warns.
async fn rows_after_the_upper_bound_are_counted_and_warned(mut fx: Fixture) {
    loaded(&mut fx).await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'free', 'DE', '2030-01-01T00:00:00Z'),
                  (3, 'cyd@example.com', 'pro', 'NL', '2029-06-01T00:00:00Z'),
                  (4, 'dee@example.com', 'pro', 'NL', '2026-03-02T11:00:00Z')"
    ))
    .await;
    if fx.backend == dimlog::config::Backend::Sqlite {
        // Offsets the loose SQLite window reads and then drops in Rust: still counted.
        fx.exec(&format!(
            "{INSERT} (5, 'eve@example.com', 'pro', 'NL', '2026-03-02T12:00:00.5+00:00'),
                      (6, 'fay@example.com', 'pro', 'NL', '2026-03-02T13:00:00+01:00')"
        ))
        .await;
    }
    let extra = if fx.backend == dimlog::config::Backend::Sqlite {
        1
    } else {
        0
    };
    let report = fx.run_with(at(ts("2026-03-02T12:00:00Z"))).await;
    assert_eq!(report.counts.rows_read, 2 + extra, "{report:?}");
    assert_eq!(report.counts.future_rows, 2 + extra, "{report:?}");
    let runs = fx.runs().await;
    let last = runs.records().pop().expect("a run record");
    assert_eq!(
        last["future_rows"].as_deref(),
        Some(&*(2 + extra).to_string()),
        "{runs:?}"
    );
    assert_eq!(
        fx.watermark().await.as_deref(),
        Some(if extra == 1 {
            "2026-03-02T12:00:00.000000Z"
        } else {
            "2026-03-02T11:00:00.000000Z"
        })
    );

    // Through the binary: a warning naming the count and the newest such stamp, and the
    // count in --json and in status.
    let out = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-02T12:30:00Z"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("2 source rows") && out.stderr.contains("2030-01-01T00:00:00.000000Z"),
        "{out:?}"
    );
    let out = cli::run(&fx.config_path(), &["run", "--json", "--upper", "2026-03-02T12:40:00Z"]);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(json["future_rows"], 2, "{json}");
    let out = cli::run(&fx.config_path(), &["status", "--json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(json["runs"][0]["future_rows"], 2, "{json}");
    let out = cli::run(&fx.config_path(), &["status"]);
    assert!(out.stdout.contains("future"), "{out:?}");
}

/// A first load (no watermark yet) whose upper bound is before the source's oldest row
/// would read nothing and "succeed": refused (exit 2, kind `window`), naming the bound and
/// the oldest row's time, whether the bound was given or came from `safety_lag`. At the
/// oldest row's time it passes, and an empty source is no error.
async fn a_first_load_before_the_oldest_row_is_refused(mut fx: Fixture) {
    let oldest = "2026-03-02T09:00:00.000000Z";
    let report = fx.run_with(at(ts("2026-03-01T00:00:00Z"))).await;
    assert_eq!(report.counts.rows_read, 0, "an empty source");
    // That run read nothing: still no watermark.
    fx.target_exec("DELETE FROM dimlog_runs").await;
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T10:00:00Z')"
    ))
    .await;
    assert_eq!(fx.watermark().await, None);
    for step in steps() {
        let upper = text(Micros::from_utc(ts(oldest).to_utc() - step));
        assert_refused(&mut fx, Some(&upper), &[&upper, oldest, "oldest"]).await;
    }
    let good = fx.config().to_string();
    fx.set_setting("safety_lag", "\"3650days\"");
    assert_refused(&mut fx, None, &[oldest, "source.safety_lag"]).await;
    fx.set_config(good);
    let report = fx.run_with(at(ts(oldest))).await;
    assert_eq!(report.counts.rows_read, 1, "{report:?}");
}

/// `backfill --to` later than the source's clock is refused like `run --upper` (exit 2,
/// kind `window`, naming both times), dry run or not, and writes nothing.
async fn a_backfill_after_the_source_clock_is_refused(mut fx: Fixture) {
    loaded(&mut fx).await;
    for step in steps() {
        let to = text(Micros::from_utc(Utc::now() + Duration::minutes(1) + step));
        let before = snapshot(&mut fx).await;
        for dry in [false, true] {
            let mut args = vec![
                "backfill",
                "--json",
                "--from",
                "2026-03-01T00:00:00Z",
                "--to",
                &to,
                "--chunk",
                "3650d",
            ];
            if dry {
                args.push("--dry-run");
            }
            let out = cli::run(&fx.config_path(), &args);
            assert_eq!(out.code, Some(2), "{out:?}");
            let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
            assert_eq!(json["error"]["kind"], "window", "{json}");
            let message = json["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(&to) && message.contains("source's clock"), "{message}");
            assert_unchanged(&mut fx, &before).await;
        }
    }
    let to = text(Micros::from_utc(Utc::now() - Duration::minutes(1)));
    let out = cli::run(
        &fx.config_path(),
        &[
            "backfill",
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            &to,
            "--chunk",
            "3650d",
        ],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// A change-column value with no instant (PostgreSQL's `infinity` and `-infinity`,
/// SQLite text that is no time) fails the run like a NULL one (exit 1, nothing committed),
/// naming the column, the key and the value, instead of being counted as a future row or
/// skipped.
async fn a_change_column_without_an_instant_fails_naming_the_key(mut fx: Fixture) {
    loaded(&mut fx).await;
    let mut values = vec!["infinity", "-infinity"];
    if fx.backend == dimlog::config::Backend::Sqlite {
        values.extend(["Infinity", "garbage", "", "2026-13-45T99:00:00Z"]);
    }
    for value in values {
        fx.exec(&format!(
            "DELETE FROM src_customers WHERE customer_id = 77;
             {INSERT} (77, 'zed@example.com', 'free', 'FR', '{value}')"
        ))
        .await;
        let before = snapshot(&mut fx).await;
        let out = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-02T10:30:00Z"]);
        assert_eq!(out.code, Some(1), "{value:?}: {out:?}");
        for part in ["updated_at", "77", value] {
            assert!(out.stderr.contains(part), "{value:?}: {part:?} missing: {out:?}");
        }
        let after = snapshot(&mut fx).await;
        assert_eq!(
            (after.log, after.dimension, after.state),
            (before.log, before.dimension, before.state),
            "{value:?}"
        );
    }
}
