//! The guesses: which columns take which role in the config, decided from a [`Profile`]
//! alone. Each decision says what it chose and why, in the terms the config's comments
//! use, and carries the [`Todo`] when it could not choose.

use super::{quote_any, KeyStats, Profile, Request, Todo};
use crate::config::{Backend, RESERVED_PREFIX, WRITTEN_COLUMNS};
use crate::db::dialect::ChangeTime;
use crate::db::types::ColumnKind;
use crate::extract::SourceColumn;
use crate::ident::Ident;
use crate::ts::Micros;
use crate::Error;
use serde::Serialize;

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
pub fn time_like(backend: Backend, c: &SourceColumn) -> bool {
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
pub fn key_name_candidates<'a>(table: &str, columns: &'a [SourceColumn]) -> Vec<&'a SourceColumn> {
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

/// A plain name (letters, digits, `_`) for a column whose own name is not one, unique
/// among `taken` (compared without case): `Cust No` becomes `cust_no`.
fn plain_name(name: &str, taken: &[String]) -> String {
    let mut out = String::new();
    // Letters of other scripts as their ASCII spelling, not dropped (`Ünïcode`: `unicode`).
    for c in deunicode::deunicode(name).chars() {
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

/// One column read under a plain name.
#[derive(Clone, Debug, Serialize)]
pub struct Rename {
    /// The name in the table.
    pub from: String,
    /// The plain name the config uses.
    pub to: String,
}

/// Columns whose names are not plain (`Cust No`, `Last Modified`), or that differ from an
/// earlier column's only in case, are read renamed through `source.query`, so that every
/// column can take a role and the config runs as written; every other guess sees the
/// plain names.
#[derive(Clone, Debug, Serialize)]
pub struct Renaming {
    /// The renamed columns, in table order; none when every name is plain.
    pub renames: Vec<Rename>,
    /// `source.query`, when there is a column to rename.
    pub query: Option<String>,
}

impl Renaming {
    /// The renames `profile`'s columns need.
    pub fn of(request: &Request, profile: &Profile) -> Renaming {
        let mut renames = Vec::new();
        let mut taken: Vec<String> = profile.columns.iter().map(|c| c.name.clone()).collect();
        for (i, c) in profile.columns.iter().enumerate() {
            // dimlog compares column names regardless of case (SQLite does): of `Email`
            // and `email`, the later one is read renamed.
            let clashes = profile.columns[..i]
                .iter()
                .any(|e| e.name.eq_ignore_ascii_case(&c.name));
            if clashes || Ident::column(&c.name).is_err() {
                let plain = plain_name(&c.name, &taken);
                taken.push(plain.clone());
                renames.push(Rename {
                    from: c.name.clone(),
                    to: plain,
                });
            }
        }
        let query = (!renames.is_empty()).then(|| {
            let list: Vec<String> = profile
                .columns
                .iter()
                .map(|c| match renames.iter().find(|r| r.from == c.name) {
                    Some(r) => format!("{} AS {}", quote_any(&r.from), r.to),
                    None => quote_any(&c.name),
                })
                .collect();
            format!("SELECT {} FROM {}", list.join(", "), request.table.quoted())
        });
        Renaming { renames, query }
    }

    fn rename(&self, name: &str) -> String {
        self.renames
            .iter()
            .find(|r| r.from == name)
            .map_or_else(|| name.to_string(), |r| r.to.clone())
    }

    /// The request with the columns it names under their plain names.
    pub fn request(&self, request: &Request) -> Request {
        let mut request = request.clone();
        request.key = request.key.iter().map(|k| self.rename(k)).collect();
        request.updated_at = request.updated_at.as_deref().map(|u| self.rename(u));
        request
    }

    /// The profile with every column under its plain name.
    pub fn profile(&self, profile: &Profile) -> Profile {
        let mut profile = profile.clone();
        for c in &mut profile.columns {
            c.name = self.rename(&c.name);
        }
        for (n, _) in &mut profile.key_stats {
            *n = self.rename(n);
        }
        for (n, _) in &mut profile.time_stats {
            *n = self.rename(n);
        }
        profile
    }
}

/// The column the user named with `flag`, or a usage error listing the columns.
fn find<'a>(profile: &'a Profile, setting: &str, flag: &str, name: &str) -> Result<&'a SourceColumn, Error> {
    profile.columns.iter().find(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = profile.columns.iter().map(|c| c.name.as_str()).collect();
        Error::Usage(format!(
            "{flag} {name}: the table has no column `{name}` (for {setting}); it has: {}",
            names.join(", ")
        ))
    })
}

/// `source.key`.
#[derive(Debug, Serialize)]
pub struct Key<'a> {
    /// The key columns; none when undecided.
    pub columns: Vec<&'a SourceColumn>,
    /// How they were chosen.
    pub reason: KeyReason,
}

impl Key<'_> {
    /// The decision left to the user, if any.
    pub fn todo(&self) -> Option<&Todo> {
        match &self.reason {
            KeyReason::Undecided { todo } => Some(todo),
            _ => None,
        }
    }
}

/// How the natural key was chosen.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KeyReason {
    /// `--key`.
    Flag,
    /// The table's primary key, which the data bears out.
    PrimaryKey,
    /// An `id`-like column whose values are unique.
    LooksUnique {
        /// Why the primary key is not the key, as a sentence.
        why: String,
        /// The column's counts.
        stats: KeyStats,
    },
    /// Nothing fits.
    Undecided {
        /// The decision left to the user.
        todo: Todo,
    },
}

/// The natural key: `--key`, else the primary key if the data bears it out, else an
/// `id`-like column whose values are unique, else a [`Todo`].
pub fn key<'a>(request: &Request, profile: &'a Profile) -> Result<Key<'a>, Error> {
    let mut pk: Vec<&SourceColumn> = profile.columns.iter().filter(|c| c.pk_position.is_some()).collect();
    pk.sort_by_key(|c| c.pk_position);
    if !request.key.is_empty() {
        let columns = request
            .key
            .iter()
            .map(|k| find(profile, "source.key", "--key", k))
            .collect::<Result<_, _>>()?;
        return Ok(Key {
            columns,
            reason: KeyReason::Flag,
        });
    }
    if !pk.is_empty() && profile.pk_stats.as_ref().is_none_or(KeyStats::unique) {
        return Ok(Key {
            columns: pk,
            reason: KeyReason::PrimaryKey,
        });
    }
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
    let no_pk = pk_note.unwrap_or_else(|| match &profile.inheriting {
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
    if let Some((c, s)) = unique {
        return Ok(Key {
            columns: vec![c],
            reason: KeyReason::LooksUnique {
                why: capitalized(&no_pk),
                stats: s.clone(),
            },
        });
    }
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
    Ok(Key {
        columns: Vec::new(),
        reason: KeyReason::Undecided {
            todo: Todo {
                setting: "source.key",
                message: format!("choose the natural key: {why}"),
                candidates: profile.columns.iter().map(|c| c.name.clone()).collect(),
                flag: "--key",
            },
        },
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

/// `source.updated_at`.
#[derive(Debug, Serialize)]
pub struct ChangeColumn<'a> {
    /// The change column; none when undecided.
    pub column: Option<&'a SourceColumn>,
    /// How it was chosen.
    pub reason: ChangeReason<'a>,
    /// Its rows with a NULL value, which `dimlog run` refuses.
    pub null_rows: i64,
}

impl ChangeColumn<'_> {
    /// The decision left to the user, if any.
    pub fn todo(&self) -> Option<&Todo> {
        match &self.reason {
            ChangeReason::Undecided { todo, .. } => Some(todo),
            _ => None,
        }
    }
}

/// How the change column was chosen.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChangeReason<'a> {
    /// `--updated-at`.
    Flag,
    /// Named `updated_at`, or the only timestamp named like a change column.
    Named,
    /// The only timestamp that is not a creation time.
    OnlyNonCreation,
    /// No single candidate.
    Undecided {
        /// The decision left to the user.
        todo: Todo,
        /// The columns to choose from.
        pool: Vec<&'a SourceColumn>,
    },
}

/// The change column: `--updated-at`, else `updated_at` or the one timestamp named like
/// a change column, else the one timestamp that is not a creation time, else a [`Todo`].
pub fn change_column<'a>(
    request: &Request,
    profile: &'a Profile,
    key: &[&SourceColumn],
) -> Result<ChangeColumn<'a>, Error> {
    let is_key = |c: &SourceColumn| key.iter().any(|k| k.name == c.name);
    let candidates: Vec<&SourceColumn> = profile
        .columns
        .iter()
        .filter(|c| !is_key(c) && time_like(profile.backend, c) && zone_of(profile, c) != Zone::NotTime)
        .collect();
    let names = |cs: &[&SourceColumn]| cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    let (column, reason) = if let Some(u) = &request.updated_at {
        let column = find(profile, "source.updated_at", "--updated-at", u)?;
        if profile.backend.dialect().change_time(column.kind) == ChangeTime::NotATime {
            return Err(Error::Usage(format!(
                "--updated-at {u}: column `{u}` is `{}`, not a timestamp, so `dimlog run` would refuse it (for source.updated_at); {}",
                column.type_name,
                cast_advice(u)
            )));
        }
        (Some(column), ChangeReason::Flag)
    } else {
        let named: Vec<&SourceColumn> = candidates.iter().copied().filter(|c| change_named(&c.name)).collect();
        let exact = named.iter().copied().find(|c| lower(&c.name) == "updated_at");
        let others: Vec<&SourceColumn> = candidates.iter().copied().filter(|c| !created_named(&c.name)).collect();
        if named.len() == 1 || exact.is_some() {
            (Some(exact.unwrap_or(named[0])), ChangeReason::Named)
        } else if named.is_empty() && others.len() == 1 {
            (Some(others[0]), ChangeReason::OnlyNonCreation)
        } else {
            let pool = if named.len() > 1 { named } else { candidates.clone() };
            let message = if pool.is_empty() {
                // A change column kept as text (or a number) is the usual cause: say which.
                let untyped = profile.columns.iter().find(|c| !is_key(c) && change_named(&c.name));
                match untyped {
                    Some(c) => format!(
                        "choose the change column: the table has no timestamp column, and `{}` is `{}`; {}",
                        c.name,
                        c.type_name,
                        cast_advice(&c.name)
                    ),
                    None => "choose the change column: the table has no timestamp column; dimlog needs one that every change moves (add one, or read through source.query)".to_string(),
                }
            } else {
                format!(
                    "choose the change column, the timestamp every change to a row moves: candidates {}",
                    names(&pool).join(", ")
                )
            };
            let todo = Todo {
                setting: "source.updated_at",
                message,
                candidates: names(&pool),
                flag: "--updated-at",
            };
            (None, ChangeReason::Undecided { todo, pool })
        }
    };
    let null_rows = column
        .and_then(|c| profile.time_stats.iter().find(|(n, _)| *n == c.name))
        .map_or(0, |(_, s)| s.nulls);
    Ok(ChangeColumn {
        column,
        reason,
        null_rows,
    })
}

/// What to do with a change column whose type holds no time: cast it in `source.query`.
fn cast_advice(column: &str) -> String {
    let quoted = quote_any(column);
    format!(
        "read the table through source.query with the column cast, e.g. `SELECT …, {quoted}::timestamptz AS {quoted} FROM …` (or add a timestamptz column that every change moves)"
    )
}

/// `source.timezone`.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Timezone<'a> {
    /// The change column's values name instants (or there is no change column).
    NotNeeded,
    /// Local times, in the zone of `--timezone`.
    Given {
        /// The change column.
        column: &'a SourceColumn,
        /// The zone.
        zone: String,
    },
    /// Local times in a zone nobody said: no guess, since a wrong zone moves every stamp
    /// by hours and changing it after loads cannot move the stamps already in the log.
    Undecided {
        /// The decision left to the user.
        todo: Todo,
    },
    /// An empty table: nothing tells whether the values will carry an offset.
    Unknown {
        /// The change column.
        column: &'a SourceColumn,
    },
}

impl Timezone<'_> {
    /// The decision left to the user, if any.
    pub fn todo(&self) -> Option<&Todo> {
        match self {
            Timezone::Undecided { todo } => Some(todo),
            _ => None,
        }
    }

    /// `source.timezone`, when the file sets it.
    pub fn zone(&self) -> Option<&str> {
        match self {
            Timezone::Given { zone, .. } => Some(zone),
            _ => None,
        }
    }
}

/// Whether the change column needs `source.timezone`, and which.
pub fn timezone<'a>(request: &Request, profile: &Profile, change_column: Option<&'a SourceColumn>) -> Timezone<'a> {
    let Some(c) = change_column else {
        return Timezone::NotNeeded;
    };
    match zone_of(profile, c) {
        Zone::Missing => match &request.timezone {
            Some(zone) => Timezone::Given {
                column: c,
                zone: zone.clone(),
            },
            None => Timezone::Undecided {
                todo: Todo {
                    setting: "source.timezone",
                    message: format!(
                        "`{}` ({}) has no time zone: say which zone the application writes it in, e.g. Europe/Paris or UTC",
                        c.name, c.type_name
                    ),
                    candidates: Vec::new(),
                    flag: "--timezone",
                },
            },
        },
        Zone::Unknown => Timezone::Unknown { column: c },
        Zone::Known | Zone::NotTime => Timezone::NotNeeded,
    }
}

/// `source.deleted_flag`: a boolean (or, where the engine has no boolean type, integer)
/// column named like a soft-delete flag.
pub fn deleted_flag<'a>(profile: &'a Profile, key: &[&SourceColumn]) -> Option<&'a SourceColumn> {
    profile.columns.iter().find(|c| {
        !key.iter().any(|k| k.name == c.name)
            && deleted_named(&c.name)
            && (c.kind == ColumnKind::Bool
                || (!profile.backend.dialect().has_boolean_type() && c.kind == ColumnKind::Int))
    })
}

/// `name` and the `[target]` names, all from the table's name.
#[derive(Debug, Serialize)]
pub struct TargetNames {
    /// `name`.
    pub name: String,
    /// `target.log`.
    pub log: String,
    /// `target.dimension`.
    pub dimension: String,
    /// `target.surrogate_key`, unless a source column has the name.
    pub surrogate_key: String,
}

/// The names of the dimension, its log and its surrogate key.
pub fn target_names(table: &str, profile: &Profile) -> TargetNames {
    let taken = |n: &str| profile.columns.iter().any(|c| c.name.eq_ignore_ascii_case(n));
    let mut surrogate_key = format!("{table}_sk");
    if taken(&surrogate_key) {
        surrogate_key = format!("dim_{table}_sk");
    }
    TargetNames {
        name: table.to_string(),
        log: format!("{table}_versions"),
        dimension: format!("dim_{table}"),
        surrogate_key,
    }
}

/// `track.columns`.
#[derive(Debug, Serialize)]
pub struct Tracking<'a> {
    /// The tracked columns, in table order.
    pub tracked: Vec<&'a SourceColumn>,
    /// Columns left out, with why.
    pub skipped: Vec<(String, String)>,
    /// Other timestamps named like change times, besides the change column: carried as
    /// Type 1 (as Type 2 columns, a touch that moved only them would open a version).
    pub type1: Vec<&'a SourceColumn>,
    /// Tracked timestamps named like creation times (said in a comment: they never move).
    pub creation: Vec<String>,
    /// When nothing is left to track.
    pub todo: Option<Todo>,
}

/// Every column without a role is tracked, unless dimlog cannot take it by its name;
/// once a change column is chosen, other timestamps named like change times are carried
/// as Type 1 instead (while another column is left to track).
pub fn tracking<'a>(profile: &'a Profile, roles: &[&SourceColumn], change_chosen: bool) -> Tracking<'a> {
    let mut tracked: Vec<&SourceColumn> = Vec::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    for c in &profile.columns {
        if roles.iter().any(|r| r.name == c.name) {
            continue;
        }
        if WRITTEN_COLUMNS.contains(&lower(&c.name).as_str()) {
            skipped.push((
                c.name.clone(),
                "dimlog writes a column of that name; track it renamed through source.query".into(),
            ));
        } else if lower(&c.name).starts_with(RESERVED_PREFIX) {
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
    let other_change_time = |c: &SourceColumn| {
        change_chosen && time_like(profile.backend, c) && change_named(&c.name) && !created_named(&c.name)
    };
    let mut type1 = Vec::new();
    if tracked.iter().any(|c| !other_change_time(c)) {
        type1 = tracked.iter().copied().filter(|c| other_change_time(c)).collect();
        tracked.retain(|c| !other_change_time(c));
    }
    let creation = tracked
        .iter()
        .filter(|c| time_like(profile.backend, c) && created_named(&c.name))
        .map(|c| c.name.clone())
        .collect();
    let todo = tracked.is_empty().then(|| Todo {
        setting: "track.columns",
        message: "the table has no column left to track besides the key and the change column".into(),
        candidates: Vec::new(),
        flag: "",
    });
    Tracking {
        tracked,
        skipped,
        type1,
        creation,
        todo,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name in another script keeps its letters, spelt in ASCII (a trial's `Ünïcode`
    /// became `n_code`), and names stay apart without regard to case.
    #[test]
    fn plain_names_spell_other_scripts_in_ascii() {
        let taken = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        for (name, plain) in [
            ("Ünïcode", "unicode"),
            ("Cust No", "cust_no"),
            ("Straße", "strasse"),
            ("Имя", "imia"),
            ("ÉTÉ 2026", "ete_2026"),
            ("2026 Ümsatz", "c_2026_umsatz"),
            ("???", "c_"),
        ] {
            assert_eq!(plain_name(name, &[]), plain, "{name}");
        }
        assert_eq!(plain_name("Ünïcode", &taken(&["UNICODE"])), "unicode_2");
    }

    #[test]
    fn stems() {
        assert_eq!(
            table_stems("src_categories"),
            ["src_categories", "categories", "src_category", "category"]
        );
    }
}
