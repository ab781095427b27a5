//! `dimlog new`: a commented starter config, guessed from the source table.
//!
//! Writing a first config by hand means looking up the table's key, its change column and
//! every other column, then picking names for the log and the dimension. This module
//! reads the table's catalog ([`SourceSchema::load`]) plus a small profile of a few
//! candidate columns ([`profile`]) and renders TOML text ([`generate`]) that `dimlog run`
//! accepts unedited on a typical table. Where a guess would be a coin toss (no primary
//! key and no unique `id`, several timestamp columns and none named like a change
//! column) it picks nothing: the text says what to decide, the value is a `TODO_…`
//! placeholder that config validation refuses with a pointer to the comment, and
//! [`Scaffold::todo`] lists the decisions so the CLI can exit 2.
//!
//! It never writes files and never reads the environment: the CLI decides the URLs as
//! they should appear in the file, writes it, and refuses to overwrite one.

use crate::config::{Backend, Relation};
use crate::db::dialect::ChangeTime;
use crate::db::types::ColumnKind;
use crate::db::{sql, Conn};
use crate::extract::{SourceColumn, SourceSchema};
use crate::ident::Ident;
use crate::ts::Micros;
use crate::Error;
use serde::Serialize;

pub use crate::config::PLACEHOLDER_PREFIX;

/// What the user asked for, with the URLs already in the form the file should hold.
#[derive(Clone, Debug)]
pub struct Request {
    /// The source table (`name` or `schema.name`).
    pub table: Ident,
    /// `source.url` as it should appear in the file (relative SQLite paths are relative to
    /// the file's folder; no password).
    pub source_url: String,
    /// `target.url` as it should appear in the file.
    pub target_url: String,
    /// The natural key, when the user chose it (`--key`).
    pub key: Vec<String>,
    /// The change column, when the user chose it (`--updated-at`).
    pub updated_at: Option<String>,
    /// The zone of a change column without one, when the user said it (`--timezone`).
    pub timezone: Option<String>,
    /// Extra comment lines for the top of the file (e.g. where the password went).
    pub header_notes: Vec<String>,
}

/// Row counts of one column: enough to tell whether an `id` column looks unique.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KeyStats {
    /// Rows in the table.
    pub rows: i64,
    /// Rows where the column is not NULL.
    pub non_null: i64,
    /// Distinct non-NULL values.
    pub distinct: i64,
}

impl KeyStats {
    /// Every row has a value and no value repeats (an empty table qualifies: the name is
    /// all there is to go on).
    pub fn unique(&self) -> bool {
        self.rows == self.non_null && self.non_null == self.distinct
    }
}

/// The newest value and the NULL count of one timestamp candidate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TimeStats {
    /// The greatest value, as text; none when the table is empty or all NULL.
    pub newest: Option<String>,
    /// Rows where the column is NULL (`dimlog run` refuses them).
    pub nulls: i64,
}

/// The table as `new` sees it: its catalog and the profile of a few candidate columns.
#[derive(Clone, Debug)]
pub struct Profile {
    /// The source backend.
    pub backend: Backend,
    /// Columns in table order, with kinds and primary-key positions.
    pub columns: Vec<SourceColumn>,
    /// Counts of the `id`-like columns, when the table has no primary key (or one the
    /// data does not bear out).
    pub key_stats: Vec<(String, KeyStats)>,
    /// Counts of the primary key's columns together, when the table has one: SQLite
    /// allows NULLs in any primary key but an INTEGER PRIMARY KEY, so a declared key is
    /// only taken when the data agrees.
    pub pk_stats: Option<KeyStats>,
    /// Newest value and NULLs of each timestamp-like column (and of `--updated-at`).
    pub time_stats: Vec<(String, TimeStats)>,
    /// PostgreSQL: the tables inheriting from the table when it is a plain table with a
    /// primary key (which does not cover their rows), comma-separated.
    pub inheriting: Option<String>,
}

/// A decision `new` could not make.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Todo {
    /// The setting to fill in, e.g. `source.updated_at`.
    pub setting: &'static str,
    /// What to decide and how.
    pub message: String,
    /// The columns to choose from.
    pub candidates: Vec<String>,
    /// The flag of `dimlog new` that makes the choice.
    pub flag: &'static str,
}

/// The generated config and the choices behind it.
#[derive(Clone, Debug, Serialize)]
pub struct Scaffold {
    /// The TOML text, comments included.
    pub toml: String,
    /// `name`.
    pub name: String,
    /// `source.key` (empty when undecided).
    pub key: Vec<String>,
    /// `source.updated_at` (none when undecided).
    pub updated_at: Option<String>,
    /// `source.deleted_flag`.
    pub deleted_flag: Option<String>,
    /// `source.timezone`, when the change column has no zone.
    pub timezone: Option<String>,
    /// `track.columns`.
    pub tracked: Vec<String>,
    /// Columns left out of tracking, with why.
    pub skipped: Vec<(String, String)>,
    /// Decisions left to the user; the config does not validate until they are made.
    pub todo: Vec<Todo>,
}

/// `s` with its first letter in upper case.
fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

/// Names like `updated_at`, `last_modified`, `changed_ts`, `last_update`.
fn change_named(name: &str) -> bool {
    let n = lower(name);
    ["update", "modif", "change", "mtime"].iter().any(|p| n.contains(p))
}

/// Names of columns that are stamped once and never move on an update.
fn created_named(name: &str) -> bool {
    let n = lower(name);
    ["creat", "insert"].iter().any(|p| n.contains(p))
}

/// Names that suggest a time in a column SQLite declares as text.
fn time_named(name: &str) -> bool {
    let n = lower(name);
    change_named(name)
        || n.ends_with("_at")
        || n.ends_with("_ts")
        || n.ends_with("_on")
        || n.contains("time")
        || n.contains("date")
}

/// A column that could be the change column, judged by its catalog entry alone.
fn time_like(backend: Backend, c: &SourceColumn) -> bool {
    match c.kind {
        ColumnKind::Timestamp | ColumnKind::TimestampTz => true,
        // An engine whose columns hold times as text: the name says.
        ColumnKind::Text | ColumnKind::Numeric => {
            backend.dialect().change_time(c.kind) == ChangeTime::ByValue && time_named(&c.name)
        }
        _ => false,
    }
}

fn deleted_named(name: &str) -> bool {
    matches!(
        lower(name).as_str(),
        "deleted" | "is_deleted" | "isdeleted" | "deleted_flag" | "is_removed" | "removed"
    )
}

/// `customers` → `customer`, `src_customers` → `customer`: the stems an id column of
/// the table is likely named after.
fn table_stems(table: &str) -> Vec<String> {
    let t = lower(table);
    let mut stems = vec![t.clone()];
    for prefix in ["src_", "stg_", "raw_", "source_", "tbl_"] {
        if let Some(rest) = t.strip_prefix(prefix) {
            stems.push(rest.to_string());
        }
    }
    // Change feeds and logs are named after what they describe.
    for suffix in ["_changes", "_history", "_log", "_feed", "_events", "_versions", "_cdc"] {
        let bare: Vec<String> = stems
            .iter()
            .filter_map(|s| s.strip_suffix(suffix))
            .map(str::to_string)
            .collect();
        stems.extend(bare);
    }
    let singular: Vec<String> = stems
        .iter()
        .filter_map(|s| {
            s.strip_suffix("ies")
                .map(|b| format!("{b}y"))
                .or_else(|| s.strip_suffix('s').map(str::to_string))
        })
        .collect();
    stems.extend(singular);
    stems.dedup();
    stems
}

/// The columns that could be the key of a table without a primary key, best first.
fn key_name_candidates<'a>(table: &str, columns: &'a [SourceColumn]) -> Vec<&'a SourceColumn> {
    let mut names = vec!["id".to_string()];
    names.extend(table_stems(table).into_iter().map(|s| format!("{s}_id")));
    let mut out = Vec::new();
    for n in names {
        if let Some(c) = columns.iter().find(|c| lower(&c.name) == n) {
            if !out.iter().any(|o: &&SourceColumn| o.name == c.name) {
                out.push(c);
            }
        }
    }
    out
}

/// Any column name as a quoted SQL identifier (both backends quote with `"`): the
/// catalog's names, odd ones included (`Last Modified`), are profiled as they are.
fn quote_any(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A plain name (letters, digits, `_`) for a column whose own name is not one, unique
/// among `taken` (compared without case): `Cust No` becomes `cust_no`.
fn plain_name(name: &str, taken: &[String]) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let mut base = out.trim_matches('_').to_string();
    if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
        base = format!("c_{base}");
    }
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.iter().any(|t| t.eq_ignore_ascii_case(&candidate)) {
        candidate = format!("{base}_{n}");
        n += 1;
    }
    candidate
}

fn stat_statement(backend: Backend, statement: &str, table: &Ident, column: &str) -> Result<String, Error> {
    Ok(sql::statement(
        backend,
        "scaffold",
        statement,
        &serde_json::json!({"relation": table.quoted(), "column": quote_any(column)}),
    )?)
}

fn count(v: Option<&Option<String>>) -> i64 {
    v.and_then(|v| v.as_deref()).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Reads the table's catalog and profiles the few columns `generate` has to judge: the
/// `id`-like columns when there is no primary key (one scan each, for a distinct count)
/// and the timestamp-like columns (one scan each, for the newest value and NULLs).
pub async fn profile(conn: &mut Conn, request: &Request) -> Result<Profile, Error> {
    let backend = conn.backend();
    let schema = SourceSchema::load(conn, &Relation::Table(request.table.clone())).await?;
    let columns = schema.columns;
    let mut key_stats = Vec::new();
    let mut pk: Vec<&SourceColumn> = columns.iter().filter(|c| c.pk_position.is_some()).collect();
    pk.sort_by_key(|c| c.pk_position);
    let mut pk_stats = None;
    if request.key.is_empty() && !pk.is_empty() {
        let names: Vec<String> = pk.iter().map(|c| quote_any(&c.name)).collect();
        let sql = sql::statement(
            backend,
            "scaffold",
            "tuple_counts",
            &serde_json::json!({"relation": request.table.quoted(), "columns": names}),
        )?;
        let rows = conn.query_text("profiling the primary key", &sql, &[]).await?;
        let row = rows.into_iter().next().unwrap_or_default();
        pk_stats = Some(KeyStats {
            rows: count(row.first()),
            non_null: count(row.get(1)),
            distinct: count(row.get(2)),
        });
    }
    let pk_holds = pk_stats.as_ref().is_some_and(KeyStats::unique);
    if request.key.is_empty() && !pk_holds {
        for c in key_name_candidates(request.table.name(), &columns) {
            let sql = stat_statement(backend, "counts", &request.table, &c.name)?;
            let rows = conn.query_text("profiling a key candidate", &sql, &[]).await?;
            let row = rows.into_iter().next().unwrap_or_default();
            let stats = KeyStats {
                rows: count(row.first()),
                non_null: count(row.get(1)),
                distinct: count(row.get(2)),
            };
            key_stats.push((c.name.clone(), stats));
        }
    }
    let mut time_stats = Vec::new();
    for c in &columns {
        let chosen = request.updated_at.as_deref() == Some(c.name.as_str());
        if !(chosen || time_like(backend, c)) {
            continue;
        }
        let sql = stat_statement(backend, "newest", &request.table, &c.name)?;
        let rows = conn
            .query_text("profiling a change-column candidate", &sql, &[])
            .await?;
        let row = rows.into_iter().next().unwrap_or_default();
        let stats = TimeStats {
            newest: row.first().cloned().flatten(),
            nulls: count(row.get(1)),
        };
        time_stats.push((c.name.clone(), stats));
    }
    let inheriting = {
        let sql = sql::statement(backend, "scaffold", "inheriting", &serde_json::json!({}))?;
        conn.query_text(
            "finding tables that inherit from it",
            &sql,
            &[crate::db::Param::Text(request.table.quoted())],
        )
        .await?
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten())
    };
    Ok(Profile {
        backend,
        columns,
        key_stats,
        pk_stats,
        time_stats,
        inheriting,
    })
}

/// How a change-column candidate's values read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Zone {
    /// Values carry an offset (or the type has a zone).
    Known,
    /// Values have no zone: `source.timezone` is needed.
    Missing,
    /// No value to look at.
    Unknown,
    /// The values are not timestamps at all.
    NotTime,
}

fn zone_of(profile: &Profile, c: &SourceColumn) -> Zone {
    let stats = profile.time_stats.iter().find(|(n, _)| *n == c.name).map(|(_, s)| s);
    match profile.backend.dialect().change_time(c.kind) {
        ChangeTime::Instant => Zone::Known,
        ChangeTime::Local => Zone::Missing,
        ChangeTime::NotATime => Zone::NotTime,
        ChangeTime::ByValue => match stats.and_then(|s| s.newest.as_deref()) {
            None => Zone::Unknown,
            Some(v) if Micros::parse(v, None).is_ok() => Zone::Known,
            Some(v) if Micros::parse(v, Some(&chrono_tz::UTC)).is_ok() => Zone::Missing,
            Some(_) => Zone::NotTime,
        },
    }
}

/// Quotes a TOML string.
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Pads `line` to a column and appends a comment.
fn commented(line: String, comment: &str) -> String {
    format!("{line:<40} # {comment}")
}

/// A multi-line TOML array of column names, each with its type as a comment.
fn column_array(key: &str, columns: &[&SourceColumn]) -> String {
    if columns.is_empty() {
        return format!("{key} = []");
    }
    let mut s = format!("{key} = [\n");
    for c in columns {
        s.push_str(&commented(format!("  {},", q(&c.name)), &c.type_name));
        s.push('\n');
    }
    s.push(']');
    s
}

fn find<'a>(profile: &'a Profile, setting: &str, flag: &str, name: &str) -> Result<&'a SourceColumn, Error> {
    profile.columns.iter().find(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = profile.columns.iter().map(|c| c.name.as_str()).collect();
        Error::Usage(format!(
            "{flag} {name}: the table has no column `{name}` (for {setting}); it has: {}",
            names.join(", ")
        ))
    })
}

/// Renders the starter config for `profile`. Pure: the same profile gives the same text.
pub fn generate(request: &Request, profile: &Profile) -> Result<Scaffold, Error> {
    // Columns whose names are not plain (`Cust No`, `Last Modified`) are read renamed
    // through source.query, so every column can take a role and the config runs as
    // written; the rest of the scaffold sees the plain names.
    let mut renames: Vec<(String, String)> = Vec::new();
    let mut taken: Vec<String> = profile.columns.iter().map(|c| c.name.clone()).collect();
    for c in &profile.columns {
        if Ident::column(&c.name).is_err() {
            let plain = plain_name(&c.name, &taken);
            taken.push(plain.clone());
            renames.push((c.name.clone(), plain));
        }
    }
    if !renames.is_empty() {
        let rename = |n: &String| {
            renames
                .iter()
                .find(|(from, _)| from == n)
                .map_or_else(|| n.clone(), |(_, to)| to.clone())
        };
        let mut renamed = profile.clone();
        for c in &mut renamed.columns {
            c.name = rename(&c.name);
        }
        for (n, _) in &mut renamed.key_stats {
            *n = rename(n);
        }
        for (n, _) in &mut renamed.time_stats {
            *n = rename(n);
        }
        let mut request = request.clone();
        request.key = request.key.iter().map(rename).collect();
        request.updated_at = request.updated_at.as_ref().map(rename);
        let mut scaffold = generate_plain(&request, &renamed)?;
        let list: Vec<String> = profile
            .columns
            .iter()
            .map(|c| match renames.iter().find(|(from, _)| *from == c.name) {
                Some((from, to)) => format!("{} AS {to}", quote_any(from)),
                None => quote_any(&c.name),
            })
            .collect();
        let query = format!("SELECT {} FROM {}", list.join(", "), request.table.quoted());
        let table_line = format!("table = {}\n", q(&request.table.to_string()));
        let names: Vec<String> = renames.iter().map(|(f, t)| format!("`{f}` as {t}")).collect();
        let query_lines = format!(
            "# Read through a query that renames the columns whose names are not plain: {}.\n# (source.table would be {}.)\nquery = {}\n",
            names.join(", "),
            q(&request.table.to_string()),
            q(&query)
        );
        scaffold.toml = scaffold.toml.replacen(&table_line, &query_lines, 1);
        return Ok(scaffold);
    }
    generate_plain(request, profile)
}

fn generate_plain(request: &Request, profile: &Profile) -> Result<Scaffold, Error> {
    let table = request.table.name();
    let mut todo = Vec::new();
    let mut source_lines: Vec<String> = Vec::new();

    // The natural key.
    let mut pk: Vec<&SourceColumn> = profile.columns.iter().filter(|c| c.pk_position.is_some()).collect();
    pk.sort_by_key(|c| c.pk_position);
    let key: Vec<&SourceColumn> = if !request.key.is_empty() {
        source_lines.push("# The natural key, as chosen with --key.".into());
        request
            .key
            .iter()
            .map(|k| find(profile, "source.key", "--key", k))
            .collect::<Result<_, _>>()?
    } else if !pk.is_empty() && profile.pk_stats.as_ref().is_none_or(KeyStats::unique) {
        source_lines.push("# The natural key: the table's primary key.".into());
        pk
    } else {
        // No primary key, or one the data does not bear out (SQLite lets NULLs into a
        // primary key that is not an INTEGER PRIMARY KEY).
        let pk_note = profile.pk_stats.as_ref().filter(|_| !pk.is_empty()).map(|s| {
            format!(
                "the primary key ({}) is not unique in the data ({} rows, {} with every key column set, {} distinct)",
                pk.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
                s.rows,
                s.non_null,
                s.distinct
            )
        });
        let no_pk = pk_note.clone().unwrap_or_else(|| match &profile.inheriting {
            Some(children) => format!(
                "the primary key of {} does not cover the tables that inherit from it ({children}), whose rows a read of it includes; \
                 to read the parent's own rows only, with its primary key, set source.query = \"SELECT * FROM ONLY {}\" (and --key its key columns)",
                request.table,
                request.table
            ),
            None => "the table has no primary key".to_string(),
        });
        let unique = profile
            .key_stats
            .iter()
            .find(|(_, s)| s.unique())
            .and_then(|(n, s)| profile.columns.iter().find(|c| c.name == *n).map(|c| (c, s)));
        match unique {
            Some((c, s)) => {
                source_lines.push(format!(
                    "# The natural key. {}; `{}` looks unique ({} rows, {} distinct values).",
                    capitalized(&no_pk),
                    c.name,
                    s.rows,
                    s.distinct
                ));
                source_lines.push("# Check that it identifies the thing the dimension describes.".into());
                vec![c]
            }
            None => {
                let names: Vec<String> = profile.columns.iter().map(|c| c.name.clone()).collect();
                let tried: Vec<String> = profile
                    .key_stats
                    .iter()
                    .map(|(n, s)| {
                        format!(
                            "`{n}` is not unique ({} rows, {} non-NULL, {} distinct)",
                            s.rows, s.non_null, s.distinct
                        )
                    })
                    .collect();
                let why = if tried.is_empty() {
                    format!("{no_pk} and no column named id")
                } else {
                    format!(
                        "{no_pk} and {} (a change feed with several rows per key? then use that column with history = \"all\")",
                        tried.join("; ")
                    )
                };
                source_lines.push(format!("# TODO: choose the natural key: {why}."));
                source_lines
                    .push("# Name the column(s) that identify one row of the thing the dimension describes.".into());
                source_lines.push(format!("# Columns: {}", names.join(", ")));
                todo.push(Todo {
                    setting: "source.key",
                    message: format!("choose the natural key: {why}"),
                    candidates: names,
                    flag: "--key",
                });
                Vec::new()
            }
        }
    };
    if key.is_empty() {
        source_lines.push(format!("key = [{}]", q(&format!("{PLACEHOLDER_PREFIX}natural_key"))));
    } else {
        let names: Vec<String> = key.iter().map(|c| q(&c.name)).collect();
        source_lines.push(format!("key = [{}]", names.join(", ")));
    }

    // The change column.
    let is_key = |c: &SourceColumn| key.iter().any(|k| k.name == c.name);
    let candidates: Vec<&SourceColumn> = profile
        .columns
        .iter()
        .filter(|c| !is_key(c) && time_like(profile.backend, c) && zone_of(profile, c) != Zone::NotTime)
        .collect();
    let names = |cs: &[&SourceColumn]| cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    let updated_at: Option<&SourceColumn> = if let Some(u) = &request.updated_at {
        let c = find(profile, "source.updated_at", "--updated-at", u)?;
        source_lines.push("# The change column (chosen with --updated-at): it becomes valid_from.".into());
        Some(c)
    } else {
        let named: Vec<&SourceColumn> = candidates.iter().copied().filter(|c| change_named(&c.name)).collect();
        let exact = named.iter().copied().find(|c| lower(&c.name) == "updated_at");
        let others: Vec<&SourceColumn> = candidates.iter().copied().filter(|c| !created_named(&c.name)).collect();
        if named.len() == 1 || exact.is_some() {
            let c = exact.unwrap_or(named[0]);
            source_lines.push("# The change column: every change to a row must move it. It becomes valid_from.".into());
            Some(c)
        } else if named.is_empty() && others.len() == 1 {
            let c = others[0];
            source_lines.push(format!(
                "# The change column: `{}` is the only timestamp that is not a creation time.",
                c.name
            ));
            source_lines
                .push("# Check that every change to a row moves it: a change that does not is never loaded.".into());
            Some(c)
        } else {
            let pool = if named.len() > 1 { named } else { candidates.clone() };
            let message = if pool.is_empty() {
                "choose the change column: the table has no timestamp column; dimlog needs one that every change moves (add one, or read through source.query)".to_string()
            } else {
                format!(
                    "choose the change column, the timestamp every change to a row moves: candidates {}",
                    names(&pool).join(", ")
                )
            };
            source_lines.push(format!("# TODO: {message}."));
            if !pool.is_empty() {
                for c in &pool {
                    source_lines.push(format!("#   {:<30} {}", c.name, c.type_name));
                }
            }
            todo.push(Todo {
                setting: "source.updated_at",
                message,
                candidates: names(&pool),
                flag: "--updated-at",
            });
            None
        }
    };
    match updated_at {
        Some(c) => {
            source_lines.push(format!("updated_at = {}", q(&c.name)));
            if let Some((_, s)) = profile.time_stats.iter().find(|(n, _)| *n == c.name) {
                if s.nulls > 0 {
                    source_lines.push(format!(
                        "# WARNING: {} rows have a NULL `{}`; `dimlog run` refuses them until they are fixed at the source",
                        s.nulls, c.name
                    ));
                    source_lines.push("# (or excluded/coalesced through source.query).".into());
                }
            }
        }
        None => source_lines.push(format!(
            "updated_at = {}",
            q(&format!("{PLACEHOLDER_PREFIX}change_column"))
        )),
    }
    let mut timezone = None;
    if let Some(c) = updated_at {
        match zone_of(profile, c) {
            Zone::Missing => match &request.timezone {
                Some(zone) => {
                    source_lines.push(format!(
                        "# `{}` ({}) has no time zone: its values are local times of this zone (--timezone).",
                        c.name, c.type_name
                    ));
                    source_lines.push(format!("timezone = {}", q(zone)));
                    timezone = Some(zone.clone());
                }
                // No guess: a wrong zone moves every stamp by hours, and changing it
                // after loads cannot move the stamps already in the log.
                None => {
                    let message = format!(
                        "`{}` ({}) has no time zone: say which zone the application writes it in, e.g. Europe/Paris or UTC",
                        c.name, c.type_name
                    );
                    source_lines.push(format!("# TODO: {message}."));
                    source_lines.push(format!("timezone = {}", q(&format!("{PLACEHOLDER_PREFIX}zone"))));
                    todo.push(Todo {
                        setting: "source.timezone",
                        message,
                        candidates: Vec::new(),
                        flag: "--timezone",
                    });
                }
            },
            Zone::Unknown => {
                source_lines.push(format!(
                    "# The table is empty, so the zone of `{}` is unknown. If its values carry no offset",
                    c.name
                ));
                source_lines.push("# (e.g. 2026-10-05 09:30:00), say which zone they are in:".into());
                source_lines.push("# timezone = \"UTC\"".into());
            }
            Zone::Known | Zone::NotTime => {}
        }
    }

    // The soft-delete flag.
    let deleted_flag = profile.columns.iter().find(|c| {
        !is_key(c)
            && deleted_named(&c.name)
            && (c.kind == ColumnKind::Bool
                || (!profile.backend.dialect().has_boolean_type() && c.kind == ColumnKind::Int))
    });
    match deleted_flag {
        Some(c) => {
            source_lines.push(
                "# Soft deletes: a row whose flag is true closes the key's current version (a tombstone).".into(),
            );
            source_lines.push(format!("deleted_flag = {}", q(&c.name)));
        }
        None => {
            source_lines.push("# Soft deletes: name a boolean column whose true value means \"deleted\".".into());
            source_lines.push("# deleted_flag = \"is_deleted\"".into());
        }
    }
    source_lines.push("# Re-read this much behind the watermark, for rows that commit late.".into());
    source_lines.push(format!("lookback = {}", q("15m")));
    source_lines.push("# A run reads up to the source's clock minus this.".into());
    source_lines.push(format!("safety_lag = {}", q("0s")));
    source_lines.push(commented(
        "# history = \"all\"".into(),
        "change feeds: keep every row, not only the newest per key",
    ));

    // Target names.
    let taken = |n: &str| profile.columns.iter().any(|c| c.name.eq_ignore_ascii_case(n));
    let mut surrogate_key = format!("{table}_sk");
    if taken(&surrogate_key) {
        surrogate_key = format!("dim_{table}_sk");
    }

    // Tracked columns: everything else.
    let mut tracked: Vec<&SourceColumn> = Vec::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    for c in &profile.columns {
        let role =
            is_key(c) || updated_at.is_some_and(|u| u.name == c.name) || deleted_flag.is_some_and(|d| d.name == c.name);
        if role {
            continue;
        }
        if crate::config::WRITTEN_COLUMNS.contains(&lower(&c.name).as_str()) {
            skipped.push((
                c.name.clone(),
                "dimlog writes a column of that name; track it renamed through source.query".into(),
            ));
        } else if lower(&c.name).starts_with(crate::config::RESERVED_PREFIX) {
            skipped.push((
                c.name.clone(),
                "dimlog keeps names starting with dimlog_ for its own SQL; track it renamed through source.query"
                    .into(),
            ));
        } else if Ident::column(&c.name).is_err() {
            skipped.push((
                c.name.clone(),
                "not a plain name (letters, digits, _); track it renamed through source.query".into(),
            ));
        } else {
            tracked.push(c);
        }
    }
    if tracked.is_empty() {
        todo.push(Todo {
            setting: "track.columns",
            message: "the table has no column left to track besides the key and the change column".into(),
            candidates: Vec::new(),
            flag: "",
        });
    }

    let mut out = String::new();
    out.push_str(&format!(
        "# dimlog config for {}, written by `dimlog new`.\n",
        request.table
    ));
    if todo.is_empty() {
        out.push_str("# Review the guesses below, then load with `dimlog run`.\n");
    } else {
        out.push_str("# Fill in the TODOs below, then load with `dimlog run`.\n");
    }
    out.push_str("# Every setting is described in docs/config.md.\n");
    for n in &request.header_notes {
        out.push_str(&format!("# {n}\n"));
    }
    out.push('\n');
    out.push_str(&commented(
        format!("name = {}", q(table)),
        "names this dimension in dimlog's own tables",
    ));
    out.push_str("\n\n[source]\n");
    out.push_str(&commented(
        format!("url = {}", q(&request.source_url)),
        "DIMLOG_SOURCE_URL overrides",
    ));
    out.push('\n');
    out.push_str(&format!("table = {}\n", q(&request.table.to_string())));
    for l in &source_lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str("\n[target]\n");
    out.push_str("# The version log and the dimension; a relative SQLite path is beside this file.\n");
    out.push_str(&commented(
        format!("url = {}", q(&request.target_url)),
        "DIMLOG_TARGET_URL overrides",
    ));
    out.push('\n');
    out.push_str(&commented(
        format!("log = {}", q(&format!("{table}_versions"))),
        "append-only: every version, correction and tombstone",
    ));
    out.push('\n');
    out.push_str(&commented(
        format!("dimension = {}", q(&format!("dim_{table}"))),
        "rebuilt from the log: valid_from, valid_to, is_current",
    ));
    out.push('\n');
    out.push_str(&commented(
        format!("surrogate_key = {}", q(&surrogate_key)),
        "one per version; facts join on it",
    ));
    out.push_str("\n\n[track]\n");
    out.push_str("# Type 2: a change to any of these opens a new version. Drop the ones nobody\n");
    out.push_str("# reports on; move the ones that should just be overwritten to type1.\n");
    if tracked.is_empty() {
        out.push_str(&format!(
            "columns = [{}]\n",
            q(&format!("{PLACEHOLDER_PREFIX}tracked_column"))
        ));
    } else {
        out.push_str(&column_array("columns", &tracked));
        out.push('\n');
    }
    for (name, why) in &skipped {
        out.push_str(&format!("# not tracked: `{name}`: {why}\n"));
    }
    out.push_str("# Type 1: carried on every version, corrected everywhere, never opens a version.\n");
    out.push_str("# type1 = []\n");
    out.push_str("\n[deletes]\n");
    out.push_str("# Rows deleted outright (not flagged): \"ignore\", or \"reconcile\" to compare the source's\n");
    out.push_str("# full key list every run and close the keys that disappeared.\n");
    out.push_str(&format!("hard = {}\n", q("ignore")));
    out.push_str("# A reconciliation refuses to close more than this share of the live keys in one run.\n");
    out.push_str("max_fraction = 0.10\n");

    Ok(Scaffold {
        toml: out,
        name: table.to_string(),
        key: key.iter().map(|c| c.name.clone()).collect(),
        updated_at: updated_at.map(|c| c.name.clone()),
        deleted_flag: deleted_flag.map(|c| c.name.clone()),
        timezone,
        tracked: tracked.iter().map(|c| c.name.clone()).collect(),
        skipped,
        todo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, Plan};
    use std::path::Path;

    /// The engine a URL names.
    fn engine(url: &str) -> Backend {
        crate::config::DbUrl::parse("source.url", url, None)
            .expect("a URL")
            .backend
    }

    fn col(name: &str, type_name: &str, backend: Backend, pk: Option<i64>) -> SourceColumn {
        SourceColumn {
            name: name.into(),
            type_name: type_name.into(),
            kind: backend.dialect().kind_of_type(type_name),
            pk_position: pk,
        }
    }

    fn request(table: &str) -> Request {
        Request {
            table: Ident::table(table).unwrap(),
            source_url: "sqlite://source.db".into(),
            target_url: "sqlite://warehouse.db".into(),
            key: Vec::new(),
            updated_at: None,
            timezone: None,
            header_notes: Vec::new(),
        }
    }

    fn parses(s: &Scaffold) -> Result<Plan, crate::config::ConfigError> {
        Plan::from_toml(
            &s.toml,
            Path::new("dimlog.toml"),
            Path::new("/cfg"),
            &Overrides::default(),
        )
    }

    #[test]
    fn a_typical_table_gives_a_valid_config() {
        let b = engine("postgres://localhost/db");
        let profile = Profile {
            backend: b,
            columns: vec![
                col("customer_id", "bigint", b, Some(1)),
                col("email", "text", b, None),
                col("is_deleted", "boolean", b, None),
                col("created_at", "timestamp with time zone", b, None),
                col("updated_at", "timestamp with time zone", b, None),
            ],
            key_stats: vec![],
            pk_stats: None,
            time_stats: vec![],
            inheriting: None,
        };
        let s = generate(&request("customers"), &profile).unwrap();
        assert!(s.todo.is_empty(), "{:?}", s.todo);
        assert_eq!(s.key, ["customer_id"]);
        assert_eq!(s.updated_at.as_deref(), Some("updated_at"));
        assert_eq!(s.deleted_flag.as_deref(), Some("is_deleted"));
        assert_eq!(s.tracked, ["email", "created_at"]);
        let plan = parses(&s).unwrap();
        assert_eq!(plan.target.dimension.to_string(), "dim_customers");
        assert_eq!(plan.target.surrogate_key.to_string(), "customers_sk");
    }

    #[test]
    fn timestamp_without_zone_is_a_todo_unless_given() {
        let b = engine("postgres://localhost/db");
        let profile = Profile {
            backend: b,
            columns: vec![
                col("id", "integer", b, Some(1)),
                col("name", "text", b, None),
                col("modified", "timestamp without time zone", b, None),
            ],
            key_stats: vec![],
            pk_stats: None,
            time_stats: vec![],
            inheriting: None,
        };
        let s = generate(&request("t"), &profile).unwrap();
        assert_eq!(s.timezone, None);
        assert_eq!(
            s.todo.iter().map(|t| t.setting).collect::<Vec<_>>(),
            ["source.timezone"]
        );
        assert!(parses(&s).is_err(), "the placeholder zone must not validate");
        let mut given = request("t");
        given.timezone = Some("Europe/Paris".into());
        let s = generate(&given, &profile).unwrap();
        assert!(s.todo.is_empty(), "{:?}", s.todo);
        assert!(s.toml.contains("timezone = \"Europe/Paris\""));
        parses(&s).unwrap();
    }

    #[test]
    fn several_timestamps_and_no_key_leave_todos_that_fail_validation() {
        let b = engine("sqlite://warehouse.db");
        let profile = Profile {
            backend: b,
            columns: vec![
                col("code", "TEXT", b, None),
                col("shipped_at", "TIMESTAMP", b, None),
                col("delivered_at", "TIMESTAMP", b, None),
            ],
            key_stats: vec![],
            pk_stats: None,
            time_stats: vec![],
            inheriting: None,
        };
        let s = generate(&request("orders"), &profile).unwrap();
        let settings: Vec<&str> = s.todo.iter().map(|t| t.setting).collect();
        assert_eq!(settings, ["source.key", "source.updated_at"]);
        assert_eq!(s.todo[1].candidates, ["shipped_at", "delivered_at"]);
        let e = parses(&s).unwrap_err().to_string();
        assert!(e.contains("source.key") && e.contains("dimlog new"), "{e}");
    }

    #[test]
    fn an_id_column_that_looks_unique_becomes_the_key() {
        let b = engine("sqlite://warehouse.db");
        let mut profile = Profile {
            backend: b,
            columns: vec![
                col("order_id", "INTEGER", b, None),
                col("status", "TEXT", b, None),
                col("updated_at", "TEXT", b, None),
            ],
            key_stats: vec![(
                "order_id".into(),
                KeyStats {
                    rows: 3,
                    non_null: 3,
                    distinct: 3,
                },
            )],
            pk_stats: None,
            time_stats: vec![(
                "updated_at".into(),
                TimeStats {
                    newest: Some("2026-10-01T00:00:00Z".into()),
                    nulls: 0,
                },
            )],
            inheriting: None,
        };
        let s = generate(&request("src_orders"), &profile).unwrap();
        assert_eq!(s.key, ["order_id"]);
        assert!(s.todo.is_empty());
        assert_eq!(s.timezone, None);
        profile.key_stats[0].1.distinct = 2;
        profile.time_stats[0].1.newest = Some("2026-10-01 00:00:00".into());
        let s = generate(&request("src_orders"), &profile).unwrap();
        assert!(s.key.is_empty());
        assert!(s.todo.iter().any(|t| t.setting == "source.timezone"), "{:?}", s.todo);
    }

    #[test]
    fn stems() {
        assert_eq!(
            table_stems("src_categories"),
            ["src_categories", "categories", "src_category", "category"]
        );
    }
}
