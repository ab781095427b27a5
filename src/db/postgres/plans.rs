//! Where each statement runs: with `DIMLOG_EXPLAIN_TO` set to a file, every query and
//! data statement dimlog sends to a PostgreSQL or Citus target is first explained (with
//! its parameters, on the same connection, so the tables are as the statement meets
//! them) and the plan appended to that file, one JSON object per line:
//! `{"what": "rebuild/merge_touched", "sql": "…", "plan": "…"}` (or `"error"` when the
//! server cannot plan it). A diagnostic for a cluster's operator, and the evidence of the
//! Citus tests that each heavy statement is pushed down to every shard; it changes
//! nothing the run does, but costs a round trip per statement.

use crate::db::postgres::{execute, query_text};
use crate::db::Param;
use sqlx::PgConnection;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// The environment variable naming the file plans are appended to.
pub const VARIABLE: &str = "DIMLOG_EXPLAIN_TO";

fn sink() -> &'static Option<Mutex<std::fs::File>> {
    static SINK: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    SINK.get_or_init(|| {
        let path = std::env::var_os(VARIABLE).filter(|p| !p.is_empty())?;
        match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            Ok(file) => Some(Mutex::new(file)),
            Err(e) => {
                tracing::warn!(
                    "{VARIABLE}: cannot open {}: {e}; no plans are written",
                    path.to_string_lossy()
                );
                None
            }
        }
    })
}

/// Whether plans are being written.
pub fn enabled() -> bool {
    sink().is_some()
}

/// Statements EXPLAIN takes (not DDL, COPY or transaction control).
fn explainable(sql: &str) -> bool {
    let head: String = sql
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_uppercase();
    matches!(
        head.as_str(),
        "SELECT" | "INSERT" | "UPDATE" | "DELETE" | "WITH" | "MERGE"
    )
}

/// Explains `sql` with `params` and appends the plan, labelled `what`. Inside a
/// transaction the EXPLAIN runs under a savepoint, so that a statement the server cannot
/// plan leaves the transaction as it was (the statement itself then fails as it would
/// have).
pub async fn record(c: &mut PgConnection, in_transaction: bool, what: &str, sql: &str, params: &[Param]) {
    let Some(file) = sink() else { return };
    if !explainable(sql) {
        return;
    }
    if in_transaction && execute(c, "SAVEPOINT dimlog_explain", &[]).await.is_err() {
        return;
    }
    let explained = query_text(c, &format!("EXPLAIN {sql}"), params).await;
    if in_transaction {
        // Citus can answer an EXPLAIN whose task failed on a worker with a plan (that says
        // "Could not get remote plan"), leaving the transaction aborted: roll it back to
        // the savepoint then, as after an EXPLAIN that failed outright.
        let planned = explained.as_ref().is_ok_and(|rows| {
            !rows
                .iter()
                .flatten()
                .flatten()
                .any(|l| l.contains("Could not get remote plan"))
        });
        if !planned || execute(c, "RELEASE SAVEPOINT dimlog_explain", &[]).await.is_err() {
            let _ = execute(c, "ROLLBACK TO SAVEPOINT dimlog_explain", &[]).await;
        }
    }
    let mut line = serde_json::json!({ "what": what, "sql": sql });
    match explained {
        Ok(rows) => {
            let plan: Vec<String> = rows
                .into_iter()
                .filter_map(|r| r.into_iter().next().flatten())
                .collect();
            line["plan"] = plan.join("\n").into();
        }
        Err(e) => line["error"] = e.to_string().into(),
    }
    if let Ok(mut f) = file.lock() {
        let _ = writeln!(f, "{line}");
    }
}
