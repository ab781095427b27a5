//! The SQL templates: every statement dimlog runs, one file per statement family and
//! backend under `sql/`, rendered with minijinja.
//!
//! Templates receive only identifiers that [`crate::ident`] validated and quoted, and
//! literals dimlog itself formats (the sentinel); values are bound parameters. The
//! filters `cols` (a prefixed column list) and `eqs` (a key join) keep composite keys
//! readable in the files.

use crate::db::Backend;
use crate::db::DbError;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use std::sync::OnceLock;

/// The statement families, one file each in every engine's `sql/<engine>/` folder.
pub const FAMILIES: [&str; 14] = [
    "init",
    "tables",
    "stage",
    "dedupe",
    "classify",
    "append",
    "rebuild",
    "state",
    "reconcile",
    "extract",
    "inspect",
    "lookup",
    "verify",
    "scaffold",
];

/// Defines `template(family)` for an engine folder `sql/<engine>/`: every family of
/// [`FAMILIES`] is compiled in, so a family missing from an engine's folder does not
/// compile.
macro_rules! engine_templates {
    ($engine:literal) => {
        /// The text of the SQL template family `family` of this engine.
        fn template(family: &str) -> Option<&'static str> {
            macro_rules! file {
                ($family:literal) => {
                    include_str!(concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/sql/",
                        $engine,
                        "/",
                        $family,
                        ".sql"
                    ))
                };
            }
            Some(match family {
                "init" => file!("init"),
                "tables" => file!("tables"),
                "stage" => file!("stage"),
                "dedupe" => file!("dedupe"),
                "classify" => file!("classify"),
                "append" => file!("append"),
                "rebuild" => file!("rebuild"),
                "state" => file!("state"),
                "reconcile" => file!("reconcile"),
                "extract" => file!("extract"),
                "inspect" => file!("inspect"),
                "lookup" => file!("lookup"),
                "verify" => file!("verify"),
                "scaffold" => file!("scaffold"),
                _ => return None,
            })
        }
    };
}
pub(crate) use engine_templates;

/// Returns the template text of the family `name` for `backend`.
pub fn template(backend: Backend, name: &str) -> &'static str {
    backend
        .dialect()
        .template(name)
        .unwrap_or_else(|| panic!("no sql template {name}"))
}

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        // `cols(list, prefix)`: `p."a", p."b"`.
        env.add_filter("cols", |list: Vec<String>, prefix: Option<String>| -> String {
            list.iter()
                .map(|c| match &prefix {
                    Some(p) if !p.is_empty() => format!("{p}.{c}"),
                    _ => c.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        });
        // `eqs(list, a, b)`: `a."k" = b."k" AND …`.
        env.add_filter("eqs", |list: Vec<String>, a: String, b: String| -> String {
            list.iter()
                .map(|c| format!("{a}.{c} = {b}.{c}"))
                .collect::<Vec<_>>()
                .join(" AND ")
        });
        // `text`: a SQLite value as text; a double (storage class REAL) in the fewest
        // digits, 15 to 17, that give the same double back (SQLite's own text has 15,
        // and would make `0.30000000000000004` the key `0.3`).
        env.add_filter("text", |expr: String| -> String {
            format!(
                "CASE WHEN typeof({expr}) <> 'real' OR CAST(CAST({expr} AS TEXT) AS REAL) = {expr} THEN CAST({expr} AS TEXT) \
                 WHEN CAST(printf('%!.16g', {expr}) AS REAL) = {expr} THEN printf('%!.16g', {expr}) \
                 ELSE printf('%!.17g', {expr}) END"
            )
        });
        // `pgts`: a PostgreSQL timestamptz expression as dimlog's fixed-width UTC text.
        env.add_filter("pgts", |expr: String| -> String {
            format!("to_char(({expr}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
        });
        env
    })
}

/// Renders one statement of a template: the template's preamble (comments, macros)
/// plus that statement's text, so values other statements need may be absent. A
/// template holds several statements, each after a line `-- statement: NAME`.
pub fn statement<C: Serialize>(backend: Backend, name: &str, statement: &str, ctx: &C) -> Result<String, DbError> {
    let text = template(backend, name);
    let marker = format!("-- statement: {statement}\n");
    let start = text.find(&marker).ok_or_else(|| DbError::Template {
        name: format!("{name}/{statement}"),
        message: "no such statement".into(),
    })?;
    let preamble_end = text.find("-- statement:").unwrap_or(0);
    let body_start = start + marker.len();
    let body_end = text[body_start..]
        .find("-- statement:")
        .map_or(text.len(), |e| body_start + e);
    let source = format!("{}{}", &text[..preamble_end], &text[body_start..body_end]);
    environment()
        .render_str(&source, ctx)
        .map(|s| s.trim().to_string())
        .map_err(|e| DbError::Template {
            name: format!("{name}/{statement}"),
            message: format!("{e:#}"),
        })
}
