//! The SQL templates: every statement dimlog runs, one file per statement family and
//! backend under `sql/`, rendered with minijinja.
//!
//! Templates receive only identifiers that [`crate::ident`] validated and quoted, and
//! literals dimlog itself formats (the sentinel); values are bound parameters. The
//! filters `cols` (a prefixed column list) and `eqs` (a key join) keep composite keys
//! readable in the files.

use crate::config::Backend;
use crate::db::DbError;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use std::sync::OnceLock;

macro_rules! templates {
    ($($name:literal),* $(,)?) => {
        /// Returns the template text of `name` for `backend`.
        pub fn template(backend: Backend, name: &str) -> &'static str {
            match backend {
                Backend::Sqlite => match name {
                    $($name => include_str!(concat!("../../sql/sqlite/", $name, ".sql")),)*
                    _ => panic!("no sql template {name}"),
                },
                Backend::Postgres => match name {
                    $($name => include_str!(concat!("../../sql/postgres/", $name, ".sql")),)*
                    _ => panic!("no sql template {name}"),
                },
            }
        }
    };
}

templates!(
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
);

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
