//! Named failpoints between the steps of a run, for crash tests.
//!
//! Compiled in only with the `failpoints` cargo feature; a release build ignores any
//! setting. The CLI reads `DIMLOG_FAILPOINT` (`after_append`, or `after_append:sleep`
//! to hang there until killed, or `after_append:delay` to go on after 300 ms, for tests
//! of what a slow step looks like, or `after_append:linger` to say so and go on after 3 s,
//! for tests that signal the process there) and passes it in
//! [`crate::pipeline::RunOptions`].

/// Every failpoint, in the order a run passes them.
pub const ALL: &[&str] = &[
    "after_extract",
    "after_dedupe",
    "after_append",
    "after_rebuild",
    "before_commit",
    "after_commit",
];

/// Fails (or hangs) when `setting` names `here`.
pub async fn check(setting: Option<&str>, here: &'static str) -> Result<(), crate::Error> {
    if !cfg!(feature = "failpoints") {
        return Ok(());
    }
    let Some(setting) = setting else { return Ok(()) };
    let (name, action) = setting.split_once(':').unwrap_or((setting, "error"));
    if name != here {
        return Ok(());
    }
    if action == "delay" {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        return Ok(());
    }
    if action == "linger" {
        // Tests wait for this line, then signal the process while it lingers.
        tracing::warn!("failpoint {here}: lingering 3 s");
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        return Ok(());
    }
    if action == "sleep" {
        // Crash tests wait for this line before they kill the process.
        tracing::warn!("failpoint {here}: sleeping until killed");
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
    Err(crate::Error::Failpoint(here))
}
