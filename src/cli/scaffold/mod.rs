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
//!
//! `profile.rs` reads the source; `guess.rs` decides, from the profile alone, which
//! column takes which role and why; `render.rs` puts the decisions into the one
//! template of the file, `dimlog.toml.j2`.
//!
//! [`SourceSchema::load`]: crate::extract::SourceSchema::load

mod guess;
mod profile;
mod render;

use crate::config::Backend;
use crate::extract::SourceColumn;
use crate::ident::Ident;
use crate::Error;
use serde::Serialize;

pub use profile::profile;

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
    /// `track.type1`: other change times, besides the change column.
    pub type1: Vec<String>,
    /// Columns left out of tracking, with why.
    pub skipped: Vec<(String, String)>,
    /// Decisions left to the user; the config does not validate until they are made.
    pub todo: Vec<Todo>,
}

/// Any column name as a quoted SQL identifier (both backends quote with `"`): the
/// catalog's names, odd ones included (`Last Modified`), are read as they are.
fn quote_any(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Renders the starter config for `profile`. Pure: the same profile gives the same text.
pub fn generate(request: &Request, profile: &Profile) -> Result<Scaffold, Error> {
    // Odd names are read renamed through source.query; the guesses see the plain ones.
    let renaming = guess::Renaming::of(request, profile);
    let request = &renaming.request(request);
    let profile = &renaming.profile(profile);

    let key = guess::key(request, profile)?;
    let change = guess::change_column(request, profile, &key.columns)?;
    let timezone = guess::timezone(request, profile, change.column);
    let deleted_flag = guess::deleted_flag(profile, &key.columns);
    let mut roles = key.columns.clone();
    roles.extend(change.column);
    roles.extend(deleted_flag);
    let tracking = guess::tracking(profile, &roles, change.column.is_some());
    let names = guess::target_names(request.table.name(), profile);

    let todo: Vec<Todo> = [key.todo(), change.todo(), timezone.todo(), tracking.todo.as_ref()]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let toml = render::render(&render::Context {
        table: request.table.to_string(),
        header_notes: &request.header_notes,
        ready: todo.is_empty(),
        source_url: &request.source_url,
        target_url: &request.target_url,
        renaming: &renaming,
        key: &key,
        change: &change,
        timezone: &timezone,
        deleted_flag,
        names: &names,
        tracking: &tracking,
    })?;
    Ok(Scaffold {
        toml,
        name: names.name.clone(),
        key: key.columns.iter().map(|c| c.name.clone()).collect(),
        updated_at: change.column.map(|c| c.name.clone()),
        deleted_flag: deleted_flag.map(|c| c.name.clone()),
        timezone: timezone.zone().map(str::to_string),
        tracked: tracking.tracked.iter().map(|c| c.name.clone()).collect(),
        type1: tracking.type1.iter().map(|c| c.name.clone()).collect(),
        skipped: tracking.skipped.clone(),
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

    /// Every branch of the template renders: a value it names that a decision lacks is an
    /// error only when that branch runs.
    #[test]
    fn every_branch_of_the_template_renders() {
        let b = engine("sqlite://warehouse.db");
        let long = "a".repeat(70);
        let profile = Profile {
            backend: b,
            columns: vec![
                col("Cust No", "TEXT", b, None),
                col("order_id", "INTEGER", b, None),
                col("created_at", "TEXT", b, None),
                col("shipped_at", "TEXT", b, None),
                col("valid_from", "TEXT", b, None),
                col("dimlog_x", "TEXT", b, None),
                col(&long, "TEXT", b, None),
            ],
            key_stats: vec![("order_id".into(), KeyStats::default())],
            pk_stats: None,
            time_stats: vec![],
            inheriting: None,
        };
        let s = generate(&request("orders"), &profile).unwrap();
        for expected in [
            "`Cust No` as cust_no",
            "query = ",
            "looks unique",
            "`shipped_at` is the only timestamp",
            "The table is empty",
            "not tracked: `valid_from`",
            "not tracked: `dimlog_x`",
            "not a plain name",
        ] {
            assert!(s.toml.contains(expected), "{expected}:\n{}", s.toml);
        }

        let profile = Profile {
            backend: b,
            columns: vec![
                col("id", "INTEGER", b, None),
                col("changed", "TEXT", b, None),
                col("is_deleted", "INTEGER", b, None),
            ],
            key_stats: vec![],
            pk_stats: None,
            time_stats: vec![(
                "changed".into(),
                TimeStats {
                    newest: Some("2026-10-01 00:00:00".into()),
                    nulls: 2,
                },
            )],
            inheriting: None,
        };
        let mut chosen = request("t");
        chosen.key = vec!["id".into()];
        chosen.updated_at = Some("changed".into());
        chosen.timezone = Some("UTC".into());
        chosen.header_notes = vec!["a note".into()];
        let s = generate(&chosen, &profile).unwrap();
        for expected in [
            "# a note\n",
            "as chosen with --key",
            "chosen with --updated-at",
            "WARNING: 2 rows",
            "timezone = \"UTC\"",
            "deleted_flag = \"is_deleted\"",
            "columns = [\"TODO_tracked_column\"]",
        ] {
            assert!(s.toml.contains(expected), "{expected}:\n{}", s.toml);
        }
    }
}
