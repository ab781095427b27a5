//! End-to-end tests of the `dimlog` binary for data engineers' everyday use: `new` writes a
//! config that runs, `--json` output agrees with the tables, `history --format svg` draws
//! one bar per version, and every command's `--help` is pinned by a snapshot.

mod config_errors;
mod docs;
mod doctor;
mod escapes;
mod help;
mod json;
mod new;
mod progress;
mod quiet;
mod svg;
mod typed;
mod wide;

use std::path::Path;
use std::process::{Command, Output};

/// Runs the built binary in `dir` with a fixed help width and none of dimlog's
/// environment variables, so results do not depend on the caller's shell.
pub fn dimlog(dir: &Path, args: &[&str]) -> Output {
    dimlog_env(dir, args, &[])
}

/// [`dimlog`] with extra environment variables.
pub fn dimlog_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dimlog"));
    cmd.args(args)
        .current_dir(dir)
        .env("COLUMNS", "100")
        .env_remove("DIMLOG_SOURCE_URL")
        .env_remove("DIMLOG_TARGET_URL")
        .env_remove("DIMLOG_FAILPOINT")
        .env_remove("RUST_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the dimlog binary")
}

/// Lossy UTF-8.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts the exit code, showing both streams when it differs.
pub fn assert_code(out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Parses stdout as exactly one JSON object (one line).
pub fn json(out: &Output, what: &str) -> serde_json::Value {
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout.trim_end().lines().count(),
        1,
        "{what}: --json must print one line:\n{stdout}"
    );
    let value: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{stdout}"));
    assert!(value.is_object(), "{what}: not an object: {value}");
    value
}
