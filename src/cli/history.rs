//! `dimlog history`.

use super::{load_plan, output::table, GlobalArgs, Output};
use crate::inspect;
use crate::pipeline::Session;
use crate::Error;

/// Show every version of one key (and its tombstones), oldest first.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// The natural key: VALUE for a one-column key, else COLUMN=VALUE once per column.
    #[arg(long = "key", value_name = "K[=V]", required = true, num_args = 1..)]
    pub key: Vec<String>,
}

/// Runs `history`.
pub async fn run(global: &GlobalArgs, args: HistoryArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let mut session = Session::open(&plan).await?;
    let key = inspect::key_values(&session.layout, &args.key)?;
    let rows = inspect::history(&mut session.target, &session.ctx, &session.layout, &key).await?;
    if out.json {
        out.print_json(&serde_json::json!({"dimension": plan.name, "key": key, "versions": rows}));
        return Ok(0);
    }
    if rows.is_empty() {
        out.line(format!("no versions of key {key:?} in {}", plan.target.dimension));
        return Ok(0);
    }
    out.line(render(&rows));
    Ok(0)
}

/// The history as a text table.
pub fn render(rows: &[inspect::HistoryRow]) -> String {
    let names: Vec<String> = rows
        .first()
        .map(|r| r.values.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default();
    let mut headers: Vec<&str> = vec!["sk"];
    headers.extend(names.iter().map(String::as_str));
    headers.extend(["valid_from", "valid_to", "current", "load"]);
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells = vec![r.surrogate_key.map(|s| s.to_string()).unwrap_or_else(|| "-".into())];
            if r.is_deleted {
                cells.extend(names.iter().map(|_| "(deleted)".to_string()));
            } else {
                cells.extend(r.values.iter().map(|(_, v)| v.clone().unwrap_or_else(|| "NULL".into())));
            }
            cells.push(r.valid_from.clone());
            cells.push(r.valid_to.clone().unwrap_or_else(|| "-".into()));
            cells.push(if r.is_current { "yes".into() } else { "".into() });
            cells.push(r.load_id.to_string());
            cells
        })
        .collect();
    table(&headers, &body)
}
