//! The config's text: the decisions, put into the one template `dimlog.toml.j2`.

use super::guess::{ChangeColumn, Key, Renaming, TargetNames, Timezone, Tracking};
use crate::config::PLACEHOLDER_PREFIX;
use crate::extract::SourceColumn;
use crate::Error;
use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use serde::Serialize;
use std::sync::OnceLock;

const TEMPLATE_NAME: &str = "dimlog.toml.j2";
const TEMPLATE: &str = include_str!("dimlog.toml.j2");

/// Everything the template shows.
#[derive(Serialize)]
pub struct Context<'a> {
    /// The source table as the config names it (`name` or `schema.name`).
    pub table: String,
    /// Comment lines for the top of the file.
    pub header_notes: &'a [String],
    /// Whether every decision was made (no TODO).
    pub ready: bool,
    /// `source.url` as the file holds it.
    pub source_url: &'a str,
    /// `target.url` as the file holds it.
    pub target_url: &'a str,
    /// `source.query` instead of `source.table`, when names are not plain.
    pub renaming: &'a Renaming,
    /// `source.key`.
    pub key: &'a Key<'a>,
    /// `source.updated_at`.
    pub change: &'a ChangeColumn<'a>,
    /// `source.timezone`.
    pub timezone: &'a Timezone<'a>,
    /// `source.deleted_flag`.
    pub deleted_flag: Option<&'a SourceColumn>,
    /// `name` and the `[target]` names.
    pub names: &'a TargetNames,
    /// `track.columns`.
    pub tracking: &'a Tracking<'a>,
}

/// A TOML string literal, quoted and escaped by the `toml` crate.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The environment with the template compiled, once; a template that does not compile
/// is kept as its error message.
fn environment() -> &'static Result<Environment<'static>, String> {
    static ENV: OnceLock<Result<Environment<'static>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(true);
        // `toml`: a value as a TOML string; `pad(n)`: a line padded to n characters, so
        // that the comments after values line up.
        env.add_filter("toml", |s: String| toml_string(&s));
        env.add_filter("pad", |s: String, width: usize| format!("{s:<width$}"));
        // The value of an undecided setting starts with it, so that validation refuses it.
        env.add_global("placeholder", PLACEHOLDER_PREFIX);
        env.add_template(TEMPLATE_NAME, TEMPLATE)
            .map(|()| env)
            .map_err(|e| format!("{e:#}"))
    })
}

/// Renders the config. The template is compiled in, so an error here is a bug.
pub fn render(context: &Context) -> Result<String, Error> {
    let internal = |message: String| Error::Internal(format!("{TEMPLATE_NAME}: {message}"));
    let env = environment().as_ref().map_err(|e| internal(e.clone()))?;
    env.get_template(TEMPLATE_NAME)
        .and_then(|t| t.render(context))
        .map_err(|e| internal(format!("{e:#}")))
}
