//! The config file: parsed with serde, then resolved once into a [`Plan`].
//!
//! Everything a run needs is decided here, before any database is touched: names are
//! validated ([`crate::ident`]), durations parsed, URLs checked and made absolute. The
//! library never reads the environment; the CLI passes URL overrides in
//! [`Overrides`]. Checks that need the source's schema happen in
//! [`crate::extract::SourceSchema`].

use crate::ident::Ident;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[doc(hidden)]
pub use crate::db::url::{redact, same_database};
pub use crate::db::url::{Backend, DbUrl, UrlError, DEFAULT_CONNECT_TIMEOUT};

/// A config that cannot be used, naming the setting and the fix. Exit code 2.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The path tried.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax, a missing or unknown key, a wrong type.
    #[error("config file {path}:\n{message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What toml said.
        message: String,
    },
    /// One setting has a bad value.
    #[error("setting `{setting}`: {message}")]
    Invalid {
        /// Dotted name of the setting, e.g. `source.lookback`.
        setting: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A configured column the source does not have (misspelt, or dropped or renamed at
    /// the source).
    #[error("setting `{setting}`: column `{column}` is not in the source{}; it has: {}", spelt_otherwise(column, has), has.join(", "))]
    NotInSource {
        /// Dotted name of the setting, e.g. `track.columns`.
        setting: String,
        /// The column named there.
        column: String,
        /// The source's columns.
        has: Vec<String>,
    },
    /// The config no longer matches what the dimension was built with, and going on
    /// needs a step the user takes on purpose (a command or option, see [`NextStep`]).
    #[error("setting `{setting}`: {message}")]
    NeedsStep {
        /// Dotted name of the setting, e.g. `track.columns`.
        setting: String,
        /// What changed, why nothing was loaded, and the ways out.
        message: String,
        /// The deliberate step that lets loading go on.
        step: NextStep,
    },
}

/// A note for [`ConfigError::NotInSource`] when the source has the column under another
/// case: names are matched exactly, as PostgreSQL's quoted names are, so `Email` and `email`
/// are two names even where the engine would fold them.
fn spelt_otherwise(column: &str, has: &[String]) -> String {
    has.iter()
        .find(|h| h.as_str() != column && h.eq_ignore_ascii_case(column))
        .map(|h| format!(" (it has `{h}`: names are matched exactly, case included)"))
        .unwrap_or_default()
}

/// The deliberate step a [`ConfigError::NeedsStep`] waits for; a front end names it in
/// its own terms (the CLI as a command line).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NextStep {
    /// One run that accepts the changed column lists
    /// ([`RunOptions::accept_config_change`](crate::pipeline::RunOptions)).
    AcceptConfigChange,
    /// A retyped source column: the printed migration (which
    /// [`migrate_column`](crate::pipeline::migrate_column) performs), then a rebuild, then
    /// a full refresh.
    MigrateColumn {
        /// The column.
        column: String,
    },
    /// One load that reads the whole source ([`RunKind::FullRefresh`](crate::state::RunKind)).
    FullRefresh,
}

impl From<UrlError> for ConfigError {
    fn from(e: UrlError) -> ConfigError {
        ConfigError::Invalid {
            setting: e.setting,
            message: e.message,
        }
    }
}

impl ConfigError {
    /// Shorthand for an invalid setting.
    pub fn invalid(setting: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            setting: setting.into(),
            message: message.into(),
        }
    }

    /// The setting at fault.
    pub fn setting(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { setting, .. } | ConfigError::NeedsStep { setting, .. } => Some(setting),
            _ => None,
        }
    }
}

#[doc(hidden)]
/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Names this dimension's state rows.
    pub name: String,
    /// Where changes come from.
    pub source: RawSource,
    /// Where the log and the dimension live.
    pub target: RawTarget,
    /// Which columns are versioned.
    pub track: RawTrack,
    /// How deletes are seen.
    #[serde(default)]
    pub deletes: RawDeletes,
}

#[doc(hidden)]
/// `[source]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSource {
    /// Source database URL.
    pub url: String,
    /// A table name, or…
    pub table: Option<String>,
    /// …a query.
    pub query: Option<String>,
    /// The natural key columns.
    pub key: Vec<String>,
    /// The change column.
    pub updated_at: String,
    /// Optional soft-delete flag column.
    pub deleted_flag: Option<String>,
    /// Re-read window behind the watermark.
    #[serde(default = "default_lookback")]
    pub lookback: String,
    /// upper = source clock - safety_lag.
    #[serde(default = "default_zero")]
    pub safety_lag: String,
    /// Zone of a change column without one.
    pub timezone: Option<String>,
    /// `latest` or `all`.
    #[serde(default)]
    pub history: History,
    /// Column that decides ties of key and timestamp.
    pub tiebreak: Option<String>,
}

fn default_lookback() -> String {
    "15m".into()
}
fn default_zero() -> String {
    "0s".into()
}

#[doc(hidden)]
/// `[target]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    /// Target database URL.
    pub url: String,
    /// The version log table.
    pub log: String,
    /// The dimension table.
    pub dimension: String,
    /// The surrogate key column.
    pub surrogate_key: String,
    /// The schema of dimlog's own tables (PostgreSQL).
    #[serde(default)]
    pub state_schema: Option<String>,
}

#[doc(hidden)]
/// `[track]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTrack {
    /// Type 2 columns.
    pub columns: Vec<String>,
    /// Type 1 columns.
    #[serde(default)]
    pub type1: Vec<String>,
    /// Type 2 columns whose current value is also shown on every row (Type 6).
    #[serde(default)]
    pub current_columns: Vec<String>,
}

#[doc(hidden)]
/// `[deletes]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDeletes {
    /// `ignore` or `reconcile`.
    #[serde(default)]
    pub hard: HardDeletes,
    /// Largest share of live keys one run may tombstone.
    #[serde(default = "default_fraction")]
    pub max_fraction: f64,
}

fn default_fraction() -> f64 {
    0.10
}

impl Default for RawDeletes {
    fn default() -> Self {
        RawDeletes {
            hard: HardDeletes::Ignore,
            max_fraction: default_fraction(),
        }
    }
}

/// How many rows per key one load keeps.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum History {
    /// One row per key per load: the newest.
    #[default]
    Latest,
    /// One row per key and timestamp (change feeds, landing tables).
    All,
}

/// What to do about keys that vanish from the source.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HardDeletes {
    /// Leave them current.
    #[default]
    Ignore,
    /// Compare the full key list every run and tombstone missing keys.
    Reconcile,
}

/// What the source reads from.
#[derive(Clone, Debug)]
pub enum Relation {
    /// A table or view.
    Table(Ident),
    /// A query, wrapped as a subquery.
    Query(String),
}

/// The resolved `[source]`.
#[derive(Clone, Debug)]
pub struct SourcePlan {
    /// Where to read.
    pub url: DbUrl,
    /// What to read.
    pub relation: Relation,
    /// Natural key columns, in order.
    pub key: Vec<Ident>,
    /// The change column.
    pub updated_at: Ident,
    /// Soft-delete flag.
    pub deleted_flag: Option<Ident>,
    /// Re-read window, µs.
    pub lookback_micros: i64,
    /// Clock safety lag, µs.
    pub safety_lag_micros: i64,
    /// Zone for a change column without one.
    pub timezone: Option<chrono_tz::Tz>,
    /// Rows kept per key per load.
    pub history: History,
    /// Tie breaker.
    pub tiebreak: Option<Ident>,
}

/// The resolved `[target]`.
#[derive(Clone, Debug)]
pub struct TargetPlan {
    /// Where to write.
    pub url: DbUrl,
    /// The version log.
    pub log: Ident,
    /// The dimension.
    pub dimension: Ident,
    /// The surrogate key column.
    pub surrogate_key: Ident,
    /// `target.state_schema` as written (PostgreSQL only); see [`TargetPlan::state_schema`].
    pub explicit_state_schema: Option<Ident>,
}

impl TargetPlan {
    /// The schema dimlog's own tables (`dimlog_state`, `dimlog_runs`, `dimlog_dimensions`,
    /// `dimlog_assigned`) belong in on a PostgreSQL target: `target.state_schema`, else the
    /// schema of `target.log`, else `public`. Never the `search_path`'s (two sessions
    /// with different ones would make two sets). A target made by an older dimlog, which
    /// put them where `search_path` pointed, is found where they are (see
    /// `pipeline::resolve_state_schema`).
    pub fn state_schema(&self) -> String {
        match (&self.explicit_state_schema, self.log.schema()) {
            (Some(s), _) => s.name().to_string(),
            (None, Some(s)) => s.to_string(),
            (None, None) => "public".to_string(),
        }
    }
}

/// Everything a command needs, validated.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The dimension's name in dimlog's own tables.
    pub name: String,
    /// Source side.
    pub source: SourcePlan,
    /// Target side.
    pub target: TargetPlan,
    /// Type 2 columns, in hash order.
    pub tracked: Vec<Ident>,
    /// Type 1 columns.
    pub type1: Vec<Ident>,
    /// Type 2 columns shown with their current value as `current_<col>` (Type 6).
    pub current: Vec<Ident>,
    /// Hard-delete handling.
    pub hard_deletes: HardDeletes,
    /// Mass-delete guard.
    pub max_fraction: f64,
}

/// Values that override the file (from flags or the environment, read by the CLI).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// Replaces `source.url`; relative paths are taken from the working directory.
    pub source_url: Option<String>,
    /// Replaces `target.url`.
    pub target_url: Option<String>,
}

/// The longest duration a setting may hold: a hundred years (any window longer than that
/// reaches before the first instant dimlog can write).
const LONGEST_DURATION_MICROS: i64 = 36_525 * 86_400 * 1_000_000;

/// Parses a duration such as `15m`, `1h 30m`, `0s`, `2d`. Months are refused: humantime
/// reads `M` as months (of 30.44 days), where `15M` was almost surely meant as minutes.
pub fn parse_duration(setting: &str, text: &str) -> Result<i64, ConfigError> {
    let months = text
        .split(|c: char| c.is_ascii_digit() || c.is_whitespace())
        .any(|unit| matches!(unit, "M" | "month" | "months"));
    if months {
        return Err(ConfigError::invalid(
            setting,
            format!("{text:?}: months have no fixed length (and `M` is not minutes); write minutes as \"15m\", or days as \"30d\""),
        ));
    }
    if text.trim().starts_with('-') {
        return Err(ConfigError::invalid(
            setting,
            format!("{text:?} is negative; a duration is zero or more, e.g. \"0s\", \"15m\""),
        ));
    }
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        ConfigError::invalid(
            setting,
            format!("{text:?} is not a duration ({e}); write e.g. \"15m\", \"2h\", \"1d\""),
        )
    })?;
    match i64::try_from(d.as_micros()) {
        Ok(micros) if micros <= LONGEST_DURATION_MICROS => Ok(micros),
        _ => Err(ConfigError::invalid(
            setting,
            format!(
                "{text:?} is longer than a hundred years; a window that long reaches before any time dimlog can hold"
            ),
        )),
    }
}

fn table_ident(setting: &str, s: &str) -> Result<Ident, ConfigError> {
    Ident::table(s).map_err(|e| ConfigError::invalid(setting, e.to_string()))
}

#[doc(hidden)]
/// The prefix of every name dimlog itself gives in SQL: its tables, aliases, CTEs and
/// internal columns. Config names may not start with it (see `check_reserved_prefix`).
pub const RESERVED_PREFIX: &str = "dimlog_";

/// A table of an engine with one lasting schema (SQLite's `main`): `main.x` is `x`, any
/// other schema is refused, naming the setting.
fn single_schema_table(backend: Backend, setting: &'static str, table: Ident) -> Result<Ident, ConfigError> {
    let dialect = backend.dialect();
    match table.schema() {
        Some(schema) if dialect.single_schema() && schema.eq_ignore_ascii_case(dialect.default_schema()) => {
            Ok(Ident::table(table.name()).expect("the name part of a valid table name is valid"))
        }
        Some(schema) if dialect.single_schema() => Err(ConfigError::invalid(
            setting,
            format!(
                "`{table}` names the schema `{schema}`, but a {engine} database has one schema, `{main}`; write `{name}` (or `{main}.{name}`)",
                engine = dialect.name_for_people(),
                main = dialect.default_schema(),
                name = table.name(),
            ),
        )),
        _ => Ok(table),
    }
}

#[doc(hidden)]
/// Whether `name` starts with `prefix`, a prefix an engine keeps for its own tables, in
/// any case (SQLite's `sqlite_`: it refuses to create a table so named).
pub fn reserved_by_engine(prefix: &str, name: &str) -> bool {
    name.get(..prefix.len()).is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

/// Refuses, naming the setting, a table dimlog would create with a name the target's
/// engine keeps for itself.
fn check_engine_reserved(backend: Backend, setting: &'static str, table: &Ident) -> Result<(), ConfigError> {
    let dialect = backend.dialect();
    match dialect.reserved_table_prefix() {
        Some(prefix) if reserved_by_engine(prefix, table.name()) => Err(ConfigError::invalid(
            setting,
            format!(
                "`{table}` starts with `{prefix}`, a prefix reserved for {}'s own tables (in any case); give the table another name",
                dialect.name_for_people()
            ),
        )),
        _ => Ok(()),
    }
}

#[doc(hidden)]
/// The config error of a log or dimension that names the source table, for when source
/// and target are one database (the caller knows: [`same_database`] from the URLs, or the
/// servers themselves when the URLs differ).
pub fn source_table_collision(source: &SourcePlan, target: &TargetPlan) -> Option<ConfigError> {
    let Relation::Table(source_table) = &source.relation else {
        return None;
    };
    let backend = target.url.backend;
    [
        ("target.log", "log", &target.log),
        ("target.dimension", "dimension", &target.dimension),
    ]
    .into_iter()
    .find(|(_, _, table)| crate::db::same_table(backend, &table.to_string(), &source_table.to_string()))
    .map(|(setting, role, table)| {
        ConfigError::invalid(
            setting,
            format!(
                "`{table}` is the source table (source.table `{source_table}`): source.url and target.url are one database, \
                 and dimlog never writes the table it reads; give the {role} a name of its own"
            ),
        )
    })
}

#[doc(hidden)]
/// Columns of the log and the dimension that dimlog writes itself: no key, tracked or
/// Type 1 column, nor the surrogate key, may be named so (in any case).
pub const WRITTEN_COLUMNS: [&str; 8] = [
    "valid_from",
    "valid_to",
    "is_current",
    "is_deleted",
    "row_hash",
    "load_id",
    "loaded_at",
    "log_id",
];

#[doc(hidden)]
/// The prefix of the placeholders `dimlog new` writes where it cannot guess: a config
/// that still holds one is refused, naming the setting.
pub const PLACEHOLDER_PREFIX: &str = "TODO_";

fn column_ident(setting: &str, s: &str) -> Result<Ident, ConfigError> {
    if s.starts_with(PLACEHOLDER_PREFIX) {
        return Err(ConfigError::invalid(
            setting,
            format!("{s:?} is a placeholder left by `dimlog new`; replace it with a column of the source (the comment above it says how to choose)"),
        ));
    }
    Ident::column(s).map_err(|e| {
        // A source column named so (a space, a dash) is read under a name dimlog can use.
        let rename = if setting.starts_with("source.") || setting.starts_with("track.") {
            format!(
                "; a source column of that name is read under another with `source.query`, e.g. SELECT \"{}\" AS {}, … FROM …",
                s.replace('"', "\"\""),
                usable_name(s)
            )
        } else {
            String::new()
        };
        ConfigError::invalid(setting, format!("{e}{rename}"))
    })
}

/// A name like `name` that dimlog can use: lower-case ASCII letters, digits and `_`, not
/// starting with a digit (`Cust No` → `cust_no`).
fn usable_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    let out = out.trim_matches('_');
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("c_{out}")
    } else {
        out.to_string()
    }
}

impl Plan {
    /// Reads and resolves a config file.
    pub fn load(path: &Path, overrides: &Overrides) -> Result<Plan, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Plan::from_toml(&text, path, &base, overrides)
    }

    /// Resolves config text; `base` anchors relative SQLite paths.
    pub fn from_toml(text: &str, path: &Path, base: &Path, overrides: &Overrides) -> Result<Plan, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            // toml's snippet (the line, a caret under the place) on lines of its own.
            message: e.to_string().trim_end().to_string(),
        })?;
        Plan::resolve(raw, base, overrides)
    }

    /// Validates a parsed config.
    pub fn resolve(raw: RawConfig, base: &Path, overrides: &Overrides) -> Result<Plan, ConfigError> {
        let name = raw.name.trim().to_string();
        if name.is_empty() || name.len() > 200 {
            return Err(ConfigError::invalid(
                "name",
                "give the dimension a short name, e.g. \"customer\"",
            ));
        }
        // The name is the dimension's identity in dimlog's tables: `a ` read as `a` would
        // load another config's dimension, and a control character cannot travel in a
        // connection's application name.
        if name != raw.name || name.chars().any(char::is_control) {
            return Err(ConfigError::invalid(
                "name",
                format!(
                    "{:?} has spaces around it or a control character; write the name plainly, e.g. {:?}",
                    raw.name,
                    name.chars().filter(|c| !c.is_control()).collect::<String>()
                ),
            ));
        }
        let s = raw.source;
        let application_name = format!("dimlog:{name}");
        let source_url = match &overrides.source_url {
            Some(u) => DbUrl::parse("source.url (as overridden)", u, None)?,
            None => DbUrl::parse("source.url", &s.url, Some(base))?,
        }
        .with_application_name(&application_name);
        let relation = match (&s.table, &s.query) {
            (Some(t), None) => Relation::Table(single_schema_table(
                source_url.backend,
                "source.table",
                table_ident("source.table", t)?,
            )?),
            (None, Some(q)) if !q.trim().is_empty() => Relation::Query(q.trim().trim_end_matches(';').to_string()),
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    "source.table",
                    "set either `table` or `query`, not both",
                ))
            }
            _ => {
                return Err(ConfigError::invalid(
                    "source.table",
                    "set `table = \"src_customers\"` or `query = \"SELECT …\"`",
                ))
            }
        };
        if s.key.is_empty() {
            return Err(ConfigError::invalid(
                "source.key",
                "name at least one natural key column, e.g. key = [\"customer_id\"]",
            ));
        }
        let key = s
            .key
            .iter()
            .map(|k| column_ident("source.key", k))
            .collect::<Result<Vec<_>, _>>()?;
        let updated_at = column_ident("source.updated_at", &s.updated_at)?;
        let deleted_flag = s
            .deleted_flag
            .as_deref()
            .map(|c| column_ident("source.deleted_flag", c))
            .transpose()?;
        let tiebreak = s
            .tiebreak
            .as_deref()
            .map(|c| column_ident("source.tiebreak", c))
            .transpose()?;
        let timezone = s
            .timezone
            .as_deref()
            .map(|z| {
                z.parse::<chrono_tz::Tz>().map_err(|_| {
                    ConfigError::invalid(
                        "source.timezone",
                        format!("unknown time zone {z:?}; use an IANA name such as \"UTC\" or \"Europe/Paris\""),
                    )
                })
            })
            .transpose()?;
        let source = SourcePlan {
            url: source_url,
            relation,
            key,
            updated_at,
            deleted_flag,
            lookback_micros: parse_duration("source.lookback", &s.lookback)?,
            safety_lag_micros: parse_duration("source.safety_lag", &s.safety_lag)?,
            timezone,
            history: s.history,
            tiebreak,
        };
        let t = raw.target;
        let mut target = TargetPlan {
            url: match &overrides.target_url {
                Some(u) => DbUrl::parse("target.url (as overridden)", u, None)?,
                None => DbUrl::parse("target.url", &t.url, Some(base))?,
            }
            .with_application_name(&application_name),
            log: table_ident("target.log", &t.log)?,
            dimension: table_ident("target.dimension", &t.dimension)?,
            surrogate_key: column_ident("target.surrogate_key", &t.surrogate_key)?,
            explicit_state_schema: t
                .state_schema
                .as_deref()
                .map(|s| {
                    Ident::column(s).map_err(|e| {
                        ConfigError::invalid("target.state_schema", format!("{e} (a schema name, without a dot)"))
                    })
                })
                .transpose()?,
        };
        if !target.url.backend.dialect().has_state_schema() && target.explicit_state_schema.is_some() {
            return Err(ConfigError::invalid(
                "target.state_schema",
                format!(
                    "is for PostgreSQL targets: a {} database has one schema, where dimlog's tables are; remove the setting",
                    target.url.backend.dialect().name_for_people()
                ),
            ));
        }
        let backend = target.url.backend;
        target.log = single_schema_table(backend, "target.log", target.log)?;
        target.dimension = single_schema_table(backend, "target.dimension", target.dimension)?;
        check_engine_reserved(backend, "target.log", &target.log)?;
        check_engine_reserved(backend, "target.dimension", &target.dimension)?;
        if crate::db::same_table(backend, &target.log.to_string(), &target.dimension.to_string()) {
            let case = if backend.dialect().folds_name_case() && target.log != target.dimension {
                format!(
                    " ({} compares table names without regard to case)",
                    backend.dialect().name_for_people()
                )
            } else {
                String::new()
            };
            return Err(ConfigError::invalid(
                "target.dimension",
                format!(
                    "`{}` and target.log `{}` name the same table{case}: the dimension and the log need different tables",
                    target.dimension, target.log
                ),
            ));
        }
        if same_database(&source.url, &target.url) {
            if let Some(e) = source_table_collision(&source, &target) {
                return Err(e);
            }
        }
        let tracked = raw
            .track
            .columns
            .iter()
            .map(|c| column_ident("track.columns", c))
            .collect::<Result<Vec<_>, _>>()?;
        let type1 = raw
            .track
            .type1
            .iter()
            .map(|c| column_ident("track.type1", c))
            .collect::<Result<Vec<_>, _>>()?;
        let current = raw
            .track
            .current_columns
            .iter()
            .map(|c| column_ident("track.current_columns", c))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, c) in current.iter().enumerate() {
            if current[..i].iter().any(|e| e.name().eq_ignore_ascii_case(c.name())) {
                return Err(ConfigError::invalid(
                    "track.current_columns",
                    format!("column `{}` is listed twice; list it once", c.name()),
                ));
            }
            if !tracked.contains(c) {
                return Err(ConfigError::invalid(
                    "track.current_columns",
                    format!(
                        "`{}` is not in track.columns; only Type 2 columns can have a current_ twin",
                        c.name()
                    ),
                ));
            }
            if c.name().len() > 55 {
                return Err(ConfigError::invalid(
                    "track.current_columns",
                    format!("`{}` is too long for a current_ twin", c.name()),
                ));
            }
        }
        if tracked.is_empty() {
            return Err(ConfigError::invalid(
                "track.columns",
                "track at least one column, e.g. columns = [\"email\"]",
            ));
        }
        let plan = Plan {
            name,
            source,
            target,
            tracked,
            type1,
            current,
            hard_deletes: raw.deletes.hard,
            max_fraction: raw.deletes.max_fraction,
        };
        plan.check_overlaps()?;
        Ok(plan)
    }

    fn check_overlaps(&self) -> Result<(), ConfigError> {
        if !(0.0..=1.0).contains(&self.max_fraction) {
            return Err(ConfigError::invalid(
                "deletes.max_fraction",
                "give a share between 0 and 1, e.g. 0.10",
            ));
        }
        self.check_reserved_prefix()?;
        let mut seen: Vec<(&Ident, &'static str)> = Vec::new();
        let mut roles: Vec<(&Ident, &'static str)> = Vec::new();
        for k in &self.source.key {
            roles.push((k, "source.key"));
        }
        roles.push((&self.source.updated_at, "source.updated_at"));
        if let Some(d) = &self.source.deleted_flag {
            roles.push((d, "source.deleted_flag"));
        }
        for c in &self.tracked {
            roles.push((c, "track.columns"));
        }
        for c in &self.type1 {
            roles.push((c, "track.type1"));
        }
        for (c, setting) in roles {
            if let Some((earlier, other)) = seen.iter().find(|(s, _)| s.name().eq_ignore_ascii_case(c.name())) {
                let message = if earlier.name() == c.name() && *other == setting {
                    format!("column `{}` is listed twice; list it once", c.name())
                } else if earlier.name() == c.name() {
                    format!(
                        "column `{}` is already used by `{other}`; a column can play one role only",
                        c.name()
                    )
                } else {
                    // Two columns of the source, one name to the target (SQLite's columns,
                    // and the dimension's, are named regardless of case).
                    format!(
                        "columns `{}` ({other}) and `{}` differ only in case, and dimlog compares column names regardless of case; read one under another name with `source.query`, e.g. SELECT …, \"{}\" AS {}_2 FROM …",
                        earlier.name(),
                        c.name(),
                        c.name(),
                        c.name().to_ascii_lowercase()
                    )
                };
                return Err(ConfigError::invalid(setting, message));
            }
            seen.push((c, setting));
        }
        let system_columns = self.target.url.backend.dialect().system_columns();
        for (c, setting) in seen
            .iter()
            .filter(|(_, s)| !matches!(*s, "source.updated_at" | "source.deleted_flag"))
        {
            if WRITTEN_COLUMNS.contains(&c.name().to_ascii_lowercase().as_str()) {
                return Err(ConfigError::invalid(*setting, format!("column `{}` clashes with a column dimlog writes; track it under another name with `source.query`", c.name())));
            }
            if system_columns.contains(&c.name()) {
                return Err(ConfigError::invalid(
                    *setting,
                    format!(
                        "column `{0}` has the name of a PostgreSQL system column, which no table of the PostgreSQL target can have; track it under another name with `source.query`, e.g. SELECT …, {0} AS {0}_1 FROM …",
                        c.name()
                    ),
                ));
            }
            if c.name().eq_ignore_ascii_case(self.target.surrogate_key.name()) {
                return Err(ConfigError::invalid(
                    "target.surrogate_key",
                    format!(
                        "`{}` is also a source column; choose another surrogate key name",
                        c.name()
                    ),
                ));
            }
        }
        let sk = self.target.surrogate_key.name();
        if WRITTEN_COLUMNS.contains(&sk.to_ascii_lowercase().as_str()) {
            return Err(ConfigError::invalid(
                "target.surrogate_key",
                format!(
                    "`{sk}` is a column dimlog writes in the log and the dimension; choose another surrogate key name"
                ),
            ));
        }
        if system_columns.contains(&sk) {
            return Err(ConfigError::invalid(
                "target.surrogate_key",
                format!("`{sk}` is the name of a PostgreSQL system column, which no table of the PostgreSQL target can have; choose another surrogate key name"),
            ));
        }
        // Type 6 twins are columns of the dimension too.
        let mut twins: Vec<String> = Vec::new();
        for c in &self.current {
            let twin = format!("current_{}", c.name());
            let clash = self
                .source
                .key
                .iter()
                .chain(&self.tracked)
                .chain(&self.type1)
                .chain([&self.target.surrogate_key])
                .map(|i| i.name().to_string())
                .chain(twins.iter().cloned())
                .find(|n| n.eq_ignore_ascii_case(&twin));
            if let Some(other) = clash {
                return Err(ConfigError::invalid(
                    "track.current_columns",
                    format!(
                        "the twin column `{twin}` of `{}` would clash with the column `{other}` of the dimension; track that column under another name with `source.query`",
                        c.name()
                    ),
                ));
            }
            twins.push(twin);
        }
        Ok(())
    }

    /// `dimlog_…` names (in any case: SQLite compares names without it) are dimlog's
    /// own: its staging tables and every alias, CTE, window and internal column of its
    /// SQL. No name a config gives may start so, so none can collide with them.
    fn check_reserved_prefix(&self) -> Result<(), ConfigError> {
        let reserved = |name: &str| {
            name.get(..RESERVED_PREFIX.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(RESERVED_PREFIX))
        };
        let mut columns: Vec<(&Ident, &'static str)> = Vec::new();
        columns.extend(self.source.key.iter().map(|k| (k, "source.key")));
        columns.push((&self.source.updated_at, "source.updated_at"));
        columns.extend(self.source.deleted_flag.iter().map(|d| (d, "source.deleted_flag")));
        columns.extend(self.source.tiebreak.iter().map(|t| (t, "source.tiebreak")));
        columns.extend(self.tracked.iter().map(|c| (c, "track.columns")));
        columns.extend(self.type1.iter().map(|c| (c, "track.type1")));
        for (c, setting) in columns {
            if reserved(c.name()) {
                let plain = match &c.name()[RESERVED_PREFIX.len()..] {
                    "" => "col",
                    rest => rest,
                };
                return Err(ConfigError::invalid(
                    setting,
                    format!(
                        "column `{}` starts with `{RESERVED_PREFIX}`, which dimlog keeps for the names of its own SQL; give the column another name with `source.query`, e.g. SELECT …, {} AS {plain} FROM …",
                        c.name(),
                        c.name()
                    ),
                ));
            }
        }
        let sk = self.target.surrogate_key.name();
        if reserved(sk) {
            return Err(ConfigError::invalid(
                "target.surrogate_key",
                format!("`{sk}` starts with `{RESERVED_PREFIX}`, which dimlog keeps for the names of its own SQL; choose another surrogate key name"),
            ));
        }
        // `dimlog rebuild` builds the dimension anew beside it, as `<dimension>_dimlog_new`.
        let swap = format!("{}_dimlog_new", self.target.dimension.name());
        if self.target.log.name().eq_ignore_ascii_case(&swap) {
            return Err(ConfigError::invalid(
                "target.log",
                format!(
                    "table `{}` is the name of the table `dimlog rebuild` builds the dimension in before it replaces it; choose another name",
                    self.target.log.name()
                ),
            ));
        }
        for (table, setting) in [
            (&self.target.log, "target.log"),
            (&self.target.dimension, "target.dimension"),
        ] {
            if reserved(table.name()) {
                return Err(ConfigError::invalid(
                    setting,
                    format!(
                        "table `{}` starts with `{RESERVED_PREFIX}`, which dimlog keeps for its own tables and the names of its SQL; choose another name",
                        table.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Every source column the extract reads, in the staging order: keys, Type 2, Type 1.
    pub fn attribute_columns(&self) -> Vec<&Ident> {
        self.tracked.iter().chain(self.type1.iter()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column the source spells in another case is named in the refusal, so the user
    /// does not have to spot it in the list.
    #[test]
    fn a_column_spelt_in_another_case_is_pointed_out() {
        let has = vec!["id".to_string(), "Email".to_string()];
        let e = ConfigError::NotInSource {
            setting: "track.columns".into(),
            column: "email".into(),
            has: has.clone(),
        };
        assert!(
            e.to_string().contains("(it has `Email`: names are matched exactly"),
            "{e}"
        );
        let e = ConfigError::NotInSource {
            setting: "track.columns".into(),
            column: "mail".into(),
            has,
        };
        assert!(!e.to_string().contains("it has `"), "{e}");
    }

    /// Durations a person writes load; months (`M` reads as months, not minutes) and
    /// lengths past a hundred years are errors naming the setting, never a crash.
    #[test]
    fn durations_are_read_as_written_or_refused() {
        assert_eq!(parse_duration("source.lookback", "15m").unwrap(), 15 * 60 * 1_000_000);
        assert_eq!(
            parse_duration("source.lookback", "1h 30m").unwrap(),
            90 * 60 * 1_000_000
        );
        assert_eq!(
            parse_duration("source.lookback", "3650days").unwrap(),
            3650 * 86_400 * 1_000_000
        );
        for text in [
            "15M",
            "1month",
            "2 months",
            "99999999d",
            "9999999d",
            "200y",
            "18446744073709551615s",
        ] {
            let e = parse_duration("source.lookback", text).expect_err(text).to_string();
            assert!(e.contains("source.lookback"), "{text}: {e}");
        }
        // A negative one says so, not the parser's "expected number at 0".
        let e = parse_duration("source.lookback", "-5m")
            .expect_err("negative")
            .to_string();
        assert!(e.contains("is negative") && !e.contains("expected number"), "{e}");
    }

    const GOOD: &str = r#"
name = "customer"
[source]
url = "sqlite://source.db"
table = "src_customers"
key = ["customer_id"]
updated_at = "updated_at"
deleted_flag = "is_deleted"
lookback = "15m"
[target]
url = "sqlite://warehouse.db"
log = "customer_versions"
dimension = "dim_customer"
surrogate_key = "customer_sk"
[track]
columns = ["email", "tier", "country"]
"#;

    fn load(text: &str) -> Result<Plan, ConfigError> {
        Plan::from_toml(text, Path::new("dimlog.toml"), Path::new("/cfg"), &Overrides::default())
    }

    #[test]
    fn resolves_the_spec_example() {
        let p = load(GOOD).unwrap();
        assert_eq!(p.source.lookback_micros, 15 * 60 * 1_000_000);
        assert_eq!(p.source.url.expose(), "sqlite:///cfg/source.db");
        assert_eq!(p.tracked.len(), 3);
    }

    #[test]
    fn tracked_key_is_refused() {
        let e = load(&GOOD.replace("[\"email\",", "[\"customer_id\", \"email\",")).unwrap_err();
        assert!(e.to_string().contains("track.columns"), "{e}");
    }

    #[test]
    fn bad_duration_names_the_setting() {
        let e = load(&GOOD.replace("\"15m\"", "\"fifteen\"")).unwrap_err();
        assert!(e.to_string().contains("source.lookback"), "{e}");
    }

    #[test]
    fn injection_is_refused() {
        let e = load(&GOOD.replace("\"src_customers\"", "'x\"; DROP TABLE y; --'")).unwrap_err();
        assert!(e.to_string().contains("source.table"), "{e}");
    }

    #[test]
    fn unknown_scheme_is_refused_without_password() {
        let e = load(&GOOD.replace("sqlite://source.db", "mysql://u:secret@h/db")).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("source.url") && !m.contains("secret"), "{m}");
    }

    /// docs/reference.toml documents every setting; it must stay a config dimlog accepts.
    #[test]
    fn reference_toml_is_a_valid_config() {
        let text = include_str!("../docs/reference.toml");
        let p = load(text).unwrap_or_else(|e| panic!("docs/reference.toml: {e}"));
        assert_eq!(p.type1.len(), 1);
        assert!(p.source.tiebreak.is_some() && p.source.timezone.is_some());
        // Every key it sets (and `query`, which excludes `table`) is described in the
        // config reference page.
        let doc = include_str!("../docs/config.md");
        let value: toml::Value = toml::from_str(text).unwrap();
        let mut keys = vec!["source.query".to_string()];
        for (k, v) in value.as_table().unwrap() {
            match v.as_table() {
                Some(t) => keys.extend(t.keys().map(|s| format!("{k}.{s}"))),
                None => keys.push(k.clone()),
            }
        }
        for k in keys {
            assert!(
                doc.contains(&format!("`{k}`")),
                "docs/config.md does not describe `{k}`"
            );
        }
    }

    /// A name with spaces around it (it was trimmed: another config's dimension) or a
    /// control character (it broke the connection) is refused.
    #[test]
    fn a_name_with_spaces_around_it_or_controls_is_refused() {
        for bad in ["customer ", " customer", "cust\u{0}omer", "cust\tomer"] {
            let text = GOOD.replacen("name = \"customer\"", &format!("name = {}", toml_quote(bad)), 1);
            assert_ne!(text, GOOD, "the fixture's name line");
            let e = load(&text).unwrap_err().to_string();
            assert!(e.contains("setting `name`"), "{bad:?}: {e}");
        }
    }

    fn toml_quote(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// A column listed twice in one list is said to be listed twice (it was "already used
    /// by" its own setting, or a twin clashing with itself).
    #[test]
    fn a_column_listed_twice_is_said_to_be() {
        for (from, to, setting) in [
            ("\"country\"]", "\"country\", \"tier\"]", "track.columns"),
            (
                "\"country\"]",
                "\"country\"]\ncurrent_columns = [\"tier\", \"tier\"]",
                "track.current_columns",
            ),
        ] {
            let e = load(&GOOD.replace(from, to)).unwrap_err().to_string();
            assert!(e.contains(setting) && e.contains("`tier` is listed twice"), "{e}");
        }
    }

    #[test]
    fn a_twin_that_clashes_with_a_column_is_refused() {
        let text = GOOD.replace("\"country\"]", "\"current_tier\"]\ncurrent_columns = [\"tier\"]");
        let e = load(&text).unwrap_err();
        assert!(
            e.to_string().contains("track.current_columns") && e.to_string().contains("`current_tier`"),
            "{e}"
        );
        let text = GOOD.replace("\"country\"]", "\"country\"]\ncurrent_columns = [\"tier\"]");
        let e = load(&text.replace("\"customer_sk\"", "\"CURRENT_TIER\"")).unwrap_err();
        assert!(e.to_string().contains("track.current_columns"), "{e}");
        assert!(load(&text).is_ok());
    }

    #[test]
    fn the_rebuild_swap_table_cannot_be_the_log() {
        let e = load(&GOOD.replace("\"customer_versions\"", "\"Dim_Customer_Dimlog_New\"")).unwrap_err();
        assert!(
            e.to_string().contains("target.log") && e.to_string().contains("choose another"),
            "{e}"
        );
    }

    #[test]
    fn placeholders_of_dimlog_new_are_refused() {
        let e = load(&GOOD.replace("\"updated_at\"\n", "\"TODO_change_column\"\n")).unwrap_err();
        assert!(e.to_string().contains("dimlog new"), "{e}");
    }

    #[test]
    fn password_is_redacted() {
        let u = DbUrl::parse("target.url", "postgres://me:hunter2@localhost/db", None).unwrap();
        assert!(!format!("{u:?} {u}").contains("hunter2"));
    }
}
