//! `dimlog history`.

use super::{load_plan, output, output::table, GlobalArgs, Output};
use crate::db::Access;
use crate::inspect;
use crate::pipeline::Session;
use crate::Error;
use std::path::{Path, PathBuf};

/// Show every version of one key (and its tombstones), oldest first: as a table, or as
/// an SVG timeline with one bar per version labelled with what changed. Reads the target
/// only, with read rights alone; never connects to the source.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// The natural key: VALUE for a one-column key, else COLUMN=VALUE once per column.
    #[arg(long = "key", value_name = "K[=V]", required = true, num_args = 1.., allow_negative_numbers = true)]
    pub key: Vec<String>,
    /// table (text on stdout) or svg (a timeline, to --out or stdout).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// The file the SVG is written to (default: stdout; required with --json).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// How `history` shows the versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An aligned text table.
    Table,
    /// An SVG timeline.
    Svg,
}

/// Runs `history`.
pub async fn run(global: &GlobalArgs, args: HistoryArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let mut session = Session::open_target(&plan, Access::QueryOnly).await?;
    let layout_keys: Vec<crate::db::types::ColumnKind> =
        crate::lookup::key_cols(session.target.backend(), &session.ctx)
            .iter()
            .map(|c| c.kind)
            .collect();
    let session_layout = session.layout.clone();
    let read = async {
        let key = super::key::key_values(&session.layout, &args.key)?;
        let rows = inspect::history(&mut session.target, &session.ctx, &session.layout, &key).await?;
        if rows.is_empty() {
            if let Some(typo) = crate::lookup::not_a_value(session.target.backend(), &session.ctx, &key) {
                return Err(typo.into());
            }
        }
        Ok::<_, Error>((key, rows))
    }
    .await;
    session.close().await;
    let (key, rows) = read?;
    // Shown (and in JSON) in its canonical form: the key that was looked up.
    let key: Vec<String> = key
        .iter()
        .zip(&layout_keys)
        .map(|(k, kind)| crate::lookup::canonical_key(*kind, k).into_owned())
        .collect();
    if args.format == Format::Svg {
        return write_svg(&plan, &key, &rows, args.out.as_deref(), out);
    }
    if out.json {
        // Typed as the values are (an integer key is a number).
        let key_json: Vec<serde_json::Value> = key
            .iter()
            .zip(&layout_keys)
            .map(|(k, kind)| inspect::typed(*kind, Some(k)))
            .collect();
        out.print_json(&serde_json::json!({"dimension": plan.name, "key": key_json, "versions": rows}));
        return Ok(0);
    }
    if rows.is_empty() {
        out.line(format!("no versions of key {key:?} in {}", plan.target.dimension));
        if let Some(hint) = super::key::unfound_hint(&session_layout, &args.key) {
            out.note("hint", &hint);
        }
        return Ok(0);
    }
    out.line(render(&rows));
    Ok(0)
}

/// The history as a text table; values wider than [`output::MAX_CELL`] characters are
/// cut, and a last line says so.
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
                cells.extend((0..r.values.len()).map(|i| r.shown(i)));
            }
            cells.push(r.valid_from.clone());
            cells.push(r.valid_to.clone().unwrap_or_else(|| "-".into()));
            cells.push(r.is_current.to_string());
            cells.push(r.load_id.to_string());
            cells
        })
        .collect();
    let mut text = table(&headers, &body);
    if output::any_cut(&body) {
        text.push_str(&format!(
            "\n(values longer than {} characters are cut short with …; `--json` shows them in full)",
            output::MAX_CELL
        ));
    }
    text
}

/// Draws the timeline and writes it to `path` (or stdout).
fn write_svg(
    plan: &crate::config::Plan,
    key: &[String],
    rows: &[inspect::HistoryRow],
    path: Option<&Path>,
    out: &Output,
) -> Result<i32, Error> {
    if out.json && path.is_none() {
        return Err(Error::Usage(
            "--format svg --json: give --out FILE for the SVG (stdout carries the JSON)".into(),
        ));
    }
    let versions = rows.iter().filter(|r| !r.is_deleted).count();
    let tombstones = rows.len() - versions;
    let title = format!(
        "{} {}: {versions} version(s), {tombstones} tombstone(s)",
        plan.name,
        key.join(", ")
    );
    let svg = crate::timeline::render_svg(&title, rows).map_err(|e| match e {
        crate::timeline::TimelineError::Empty => Error::Unknown(format!(
            "key {key:?} has no versions in {}; no SVG written",
            plan.target.dimension
        )),
        other => Error::Internal(other.to_string()),
    })?;
    match path {
        Some(p) => std::fs::write(p, &svg).map_err(|e| Error::Usage(format!("cannot write {}: {e}", p.display())))?,
        None => {
            use std::io::Write;
            let _ = std::io::stdout().lock().write_all(svg.as_bytes());
        }
    }
    if out.json {
        out.print_json(&serde_json::json!({
            "dimension": plan.name,
            "key": key,
            "svg": path,
            "versions": versions,
            "tombstones": tombstones,
        }));
    } else if let Some(p) = path {
        out.line(format!(
            "wrote {}: {versions} version(s), {tombstones} tombstone(s)",
            p.display()
        ));
    }
    Ok(0)
}
