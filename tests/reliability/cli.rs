//! Running the `dimlog` binary: to completion, or held at a failpoint until killed.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The outcome of one `dimlog` invocation.
pub struct CliOutput {
    /// The exit code (none when killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl CliOutput {
    /// Both streams.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

impl std::fmt::Debug for CliOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// `dimlog --config <config> …`, run from the config's folder, with none of the
/// caller's dimlog settings in its environment.
pub fn command(config: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dimlog"));
    cmd.arg("--config").arg(config);
    if let Some(dir) = config.parent() {
        cmd.current_dir(dir);
    }
    for var in ["DIMLOG_FAILPOINT", "DIMLOG_SOURCE_URL", "DIMLOG_TARGET_URL", "RUST_LOG"] {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// Runs `dimlog --config <config> <args>` to completion.
pub fn run(config: &Path, args: &[&str]) -> CliOutput {
    run_with(command(config), args)
}

/// Runs a prepared command with more arguments to completion.
pub fn run_with(mut cmd: Command, args: &[&str]) -> CliOutput {
    let out = cmd
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run dimlog: {e}"));
    let output = CliOutput {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    // Shown with --nocapture, and with a failing test.
    eprintln!("$ dimlog {}\n{output:?}", args.join(" "));
    output
}

/// A `dimlog` process parked at a failpoint (`DIMLOG_FAILPOINT=<name>:sleep`), holding
/// whatever it holds there (the dimension's lock, an open transaction) until killed.
/// Dropping it kills it.
pub struct Held {
    child: Option<Child>,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

/// Starts `dimlog --config <config> <args>` with `DIMLOG_FAILPOINT=<failpoint>:sleep`
/// and waits (polling its stderr, at most 60 s) until it says it sleeps there.
pub async fn hold(config: &Path, args: &[&str], failpoint: &str) -> Held {
    hold_at(config, args, failpoint, "sleep", "sleeping until killed").await
}

/// Like [`hold`], with the failpoint's `action` (`linger`: it goes on after 3 s), waiting
/// for its line `failpoint <name>: <says>`.
pub async fn hold_at(config: &Path, args: &[&str], failpoint: &str, action: &str, says: &str) -> Held {
    let dir = tempfile::tempdir().expect("temp dir");
    let stderr = dir.path().join("stderr");
    let mut cmd = command(config);
    cmd.args(args)
        .env("DIMLOG_FAILPOINT", format!("{failpoint}:{action}"))
        .stdout(Stdio::null())
        .stderr(File::create(&stderr).expect("stderr file"));
    let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start dimlog: {e}"));
    let mut held = Held {
        child: Some(child),
        stderr,
        _dir: dir,
    };
    let signal = format!("failpoint {failpoint}: {says}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if held.stderr_text().contains(&signal) {
            return held;
        }
        let child = held.child.as_mut().expect("running");
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!(
                "dimlog {} exited ({status}) before reaching failpoint {failpoint}:\n{}",
                args.join(" "),
                held.stderr_text()
            );
        }
        assert!(
            Instant::now() < deadline,
            "dimlog {} did not reach failpoint {failpoint} within 60 s:\n{}",
            args.join(" "),
            held.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Held {
    /// What the process wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Whether it still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Sends `signal` (`INT`, `TERM`, …) and waits (at most `limit`) for the process to
    /// exit; its status and all it wrote to stderr. Panics if it is still running then.
    pub fn signal(self, signal: &str, limit: Duration) -> (ExitStatus, String) {
        let pid = self.pid().to_string();
        let sent = Command::new("kill").args(["-s", signal, &pid]).status().expect("kill");
        assert!(sent.success(), "kill -s {signal} {pid} failed");
        self.exited_within(limit, &format!("{limit:?} after SIG{signal}"))
    }

    /// Waits (at most `limit`) for the process to exit by itself; its status and all it
    /// wrote to stderr. Panics if it is still running then.
    pub fn wait(self, limit: Duration) -> (ExitStatus, String) {
        self.exited_within(limit, &format!("after {limit:?}"))
    }

    /// The exit within `limit`, else a panic saying the process is still running `when`.
    fn exited_within(mut self, limit: Duration, when: &str) -> (ExitStatus, String) {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return (status, self.stderr_text());
            }
            assert!(
                Instant::now() < deadline,
                "still running {when}:\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, then reap it.
    pub fn kill(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        child.kill().expect("SIGKILL");
        child.wait().expect("wait")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
