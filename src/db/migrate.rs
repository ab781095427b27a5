//! The schema version of dimlog's own tables (`dimlog_state`, `dimlog_runs`,
//! `dimlog_dimensions`, and on PostgreSQL `dimlog_assigned`), and the migrations that
//! bring a target's tables to the version this dimlog writes.
//!
//! The version is kept in `dimlog_schema` (one row: `version`, `applied_at`, `applied_by`),
//! beside dimlog's other tables (on PostgreSQL in their schema: the connection qualifies
//! it as it does them). [`MIGRATIONS`] lists every version in order, each as statement
//! names of `sql/<backend>/migrations.sql`; version 1 is the baseline, the tables as
//! dimlog made them before versions were kept. A target without `dimlog_schema` (new, or
//! made by an older dimlog) is brought to the baseline the way dimlog always did it (only
//! what is missing is made, counters an older `dimlog_runs` lacks are added), then to the
//! current version, and stamped.
//!
//! [`migrate`] runs inside the caller's transaction (`init`'s), so a migration that fails
//! commits nothing. A target at the current version costs one read (`SELECT` on
//! `dimlog_schema`, which `init` grants to `PUBLIC`: a loading role needs no GRANT for it)
//! and no DDL, so a role that may not change dimlog's tables loads as before. One that
//! finds work to do and may not do it is sent to the tables' owner
//! ([`DbError::SchemaNeedsOwner`]) — except on a target an older dimlog made whose tables
//! are already as the baseline has them: it loads on unstamped, and the owner's next `init`
//! stamps it. A target at a version newer than this dimlog knows is never written
//! ([`DbError::SchemaTooNew`]); commands that only read do not look at the version.

use super::{sql, Conn, DbError, Param};
use crate::ts::Micros;

/// One schema version of dimlog's own tables: the steps (statement names of
/// `sql/<backend>/migrations.sql`) that bring the tables from the version before to it.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    /// The version it brings the tables to.
    pub version: i64,
    /// What changes, for people.
    pub description: &'static str,
    /// Its statements, in order. A step `NAME` is skipped when `NAME_done` exists in the
    /// backend's file and counts more than 0, and does nothing when its SQL is empty.
    pub steps: &'static [&'static str],
}

/// Every version, in order. Released entries never change: a change is a new entry
/// (and new statements in both `migrations.sql` files).
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "the baseline: dimlog_state, dimlog_runs (with its revived and future_rows counters) and its \
                  index on (dimension, run_id), dimlog_dimensions, and on PostgreSQL dimlog_assigned",
        steps: &[
            "v1_state",
            "v1_runs",
            "v1_runs_revived",
            "v1_runs_future_rows",
            "v1_runs_index",
            "v1_dimensions",
            "v1_assigned",
        ],
    },
    Migration {
        version: 2,
        description:
            "dimlog_dimensions.change_column: the source column the incremental watermark is kept on, so that \
                  a config naming another one is noticed",
        steps: &["v2_dimensions_change_column"],
    },
];

/// The schema version of dimlog's own tables that this dimlog writes.
pub const CURRENT_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].version;

const FAMILY: &str = "migrations";

/// What [`migrate`] found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The tables were at the current version already; nothing was done.
    Current,
    /// The tables were created or upgraded and stamped with the current version.
    Upgraded {
        /// The version found (`None`: no `dimlog_schema`, a new target or one an older
        /// dimlog made).
        from: Option<i64>,
    },
    /// At the current version, tables or indexes that were dropped were made again.
    Repaired,
    /// A target an older dimlog made, already as the baseline has it, that this role may
    /// not stamp (it may not create `dimlog_schema`): left as it is.
    Unstamped,
}

/// This dimlog, as `dimlog_schema.applied_by` and messages name it.
pub fn this_dimlog() -> String {
    format!("dimlog {}", env!("CARGO_PKG_VERSION"))
}

/// Brings dimlog's own tables to [`CURRENT_VERSION`] inside the caller's open transaction
/// (creating them on a new target), or refuses: a version newer than this dimlog knows
/// ([`DbError::SchemaTooNew`]), work that this PostgreSQL role may not do
/// ([`DbError::SchemaNeedsOwner`]), a `dimlog_schema` it may not read
/// ([`DbError::MissingRights`]). `target` names the target in messages (its URL, without
/// a password).
pub async fn migrate(conn: &mut Conn, target: &str) -> Result<Outcome, DbError> {
    let found = read_version(conn).await?;
    // At the current version a table or index dropped by hand since is made again, as
    // `init` always did (every step of every version is checked: cheap catalog probes);
    // the stamp stays as it is.
    let repair = found == Some(CURRENT_VERSION);
    match found {
        Some(v) if v > CURRENT_VERSION => return Err(too_new(shown_target(conn, target), v)),
        _ if repair => {
            let every: Vec<&Migration> = MIGRATIONS.iter().collect();
            if all_done(conn, &every).await? {
                return Ok(Outcome::Current);
            }
        }
        _ => {}
    }
    let pending: Vec<&Migration> = MIGRATIONS
        .iter()
        .filter(|m| repair || m.version > found.unwrap_or(0))
        .collect();
    let rights = match conn {
        Conn::Postgres(_) => Some(pg_rights(conn).await?),
        Conn::Sqlite(_) => None,
    };
    let needs_owner = |rights: &PgRights| DbError::SchemaNeedsOwner {
        target: target.to_string(),
        role: rights.role.clone(),
        schema: rights.schema.clone(),
        found,
        needed: CURRENT_VERSION,
        tables_exist: found.is_some() || rights.tables > 0,
        may_create: rights.may_create,
    };
    if let Some(rights) = rights.as_ref().filter(|r| found.is_none() && !r.may_create) {
        // `dimlog_schema` cannot be made by this role: fine on a target an older dimlog
        // left as the baseline has it (a loading role goes on as before), not otherwise.
        if rights.tables > 0 && all_done(conn, &pending).await? {
            tracing::info!(
                "{target}: dimlog's tables are as the baseline has them but not stamped with a schema version \
                 (made by an older dimlog); the tables' owner's next `dimlog init` stamps them"
            );
            return Ok(Outcome::Unstamped);
        }
        return Err(needs_owner(rights));
    }
    let result = async {
        for migration in &pending {
            for step in migration.steps {
                run_step(conn, migration, step).await?;
            }
        }
        if repair {
            return Ok(());
        }
        stamp(conn, found.is_none()).await
    }
    .await;
    match (result, &rights) {
        (Ok(()), _) if repair => {
            tracing::info!("{target}: dimlog's tables that were missing were made again");
            Ok(Outcome::Repaired)
        }
        (Ok(()), _) => {
            tracing::info!(
                "{target}: dimlog's tables brought from schema version {} to {CURRENT_VERSION}",
                found.map_or_else(
                    || "none (new, or made by an older dimlog)".to_string(),
                    |v| v.to_string()
                )
            );
            Ok(Outcome::Upgraded { from: found })
        }
        // A step or the stamp refused for want of a right (not the owner of a table it
        // alters, no CREATE on the schema, no write on dimlog_schema).
        (Err(e), Some(rights)) if e.is_denied() => Err(needs_owner(rights)),
        (Err(e), _) => Err(e),
    }
}

/// Refuses a target whose dimlog tables are at a version newer than this dimlog knows
/// ([`DbError::SchemaTooNew`]), for a command that writes the target without `init`
/// (`assign-keys`); changes nothing and upgrades nothing.
pub async fn refuse_newer(conn: &mut Conn, target: &str) -> Result<(), DbError> {
    match read_version(conn).await? {
        Some(v) if v > CURRENT_VERSION => Err(too_new(shown_target(conn, target), v)),
        _ => Ok(()),
    }
}

/// The version in `dimlog_schema`, `None` where there is none (a new target, or one an
/// older dimlog made); an empty `dimlog_schema` is version 0.
pub async fn read_version(conn: &mut Conn) -> Result<Option<i64>, DbError> {
    let probe = statement(conn, "schema_probe")?;
    let row = conn
        .query_text("looking for dimlog_schema", &probe, &[])
        .await?
        .into_iter()
        .next()
        .unwrap_or_default();
    let flag = |i: usize| row.get(i).cloned().flatten().is_some_and(|v| v != "0");
    if !flag(0) {
        return Ok(None);
    }
    if !flag(1) {
        let rights = pg_rights(conn).await?;
        return Err(DbError::MissingRights(format!(
            "the PostgreSQL role {role} of target.url may not read {schema}.dimlog_schema, which holds the schema \
             version of dimlog's tables (`dimlog init` grants SELECT on it to PUBLIC; that was revoked); nothing \
             was written. Have the tables' owner run: GRANT SELECT ON {schema}.dimlog_schema TO {role}",
            role = rights.role,
            schema = rights.schema
        )));
    }
    let read = statement(conn, "schema_version")?;
    let version = conn
        .query_i64s("reading the schema version of dimlog's tables", &read, &[])
        .await?;
    // A table without its row holds no version yet: 0, below every migration.
    Ok(Some(version.first().copied().flatten().unwrap_or(0)))
}

fn statement(conn: &Conn, name: &str) -> Result<String, DbError> {
    sql::statement(conn.backend(), FAMILY, name, &serde_json::json!({}))
}

/// Whether `migrations.sql` of this backend has statement `name`.
fn has_statement(conn: &Conn, name: &str) -> bool {
    sql::template(conn.backend(), FAMILY).contains(&format!("-- statement: {name}\n"))
}

/// The target as messages name it: its URL, and on PostgreSQL the schema of dimlog's
/// tables.
fn shown_target(conn: &Conn, target: &str) -> String {
    match conn.state_schema() {
        Some(schema) => format!("{target} (schema {})", unquote(&schema)),
        None => target.to_string(),
    }
}

fn too_new(target: String, found: i64) -> DbError {
    DbError::SchemaTooNew {
        target,
        found,
        known: CURRENT_VERSION,
        dimlog: this_dimlog(),
    }
}

/// Whether a step's work is there already: its SQL is empty on this backend, or its
/// `_done` statement counts more than 0.
async fn step_done(conn: &mut Conn, step: &str) -> Result<bool, DbError> {
    if statement(conn, step)?.is_empty() {
        return Ok(true);
    }
    let guard = format!("{step}_done");
    if !has_statement(conn, &guard) {
        return Ok(false);
    }
    let sql = statement(conn, &guard)?;
    Ok(conn.query_count("looking at dimlog's tables", &sql, &[]).await? > 0)
}

async fn all_done(conn: &mut Conn, pending: &[&Migration]) -> Result<bool, DbError> {
    for migration in pending {
        for step in migration.steps {
            if !step_done(conn, step).await? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

async fn run_step(conn: &mut Conn, migration: &Migration, step: &str) -> Result<(), DbError> {
    if step_done(conn, step).await? {
        return Ok(());
    }
    let sql = statement(conn, step)?;
    let what = format!(
        "upgrading dimlog's tables to schema version {} ({step})",
        migration.version
    );
    conn.execute_script(&what, &sql).await
}

/// Creates `dimlog_schema` when `create` (readable by every role on PostgreSQL) and
/// leaves one row in it: the current version, now, this dimlog.
async fn stamp(conn: &mut Conn, create: bool) -> Result<(), DbError> {
    if create {
        for name in ["schema_table", "schema_grant"] {
            let sql = statement(conn, name)?;
            if !sql.is_empty() {
                conn.execute_script("creating dimlog_schema", &sql).await?;
            }
        }
    }
    let clear = statement(conn, "schema_clear")?;
    conn.execute("stamping dimlog's tables with their schema version", &clear, &[])
        .await?;
    let insert = statement(conn, "schema_stamp")?;
    conn.execute(
        "stamping dimlog's tables with their schema version",
        &insert,
        &[
            Param::I64(CURRENT_VERSION),
            Param::Ts(Micros::from_utc(chrono::Utc::now())),
            Param::Text(this_dimlog()),
        ],
    )
    .await?;
    Ok(())
}

/// A PostgreSQL role and what it may do to dimlog's tables.
struct PgRights {
    /// The role, quoted where needed.
    role: String,
    /// The schema of dimlog's tables, quoted where needed.
    schema: String,
    /// Whether it may create tables there.
    may_create: bool,
    /// How many of dimlog_state, dimlog_runs and dimlog_dimensions exist.
    tables: i64,
}

async fn pg_rights(conn: &mut Conn) -> Result<PgRights, DbError> {
    let schema = match conn.state_schema() {
        Some(quoted) => Param::Text(unquote(&quoted)),
        None => Param::Null,
    };
    let sql = statement(conn, "rights")?;
    let row = conn
        .query_text("checking the role's rights on dimlog's tables", &sql, &[schema])
        .await?
        .into_iter()
        .next()
        .unwrap_or_default();
    let get = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
    Ok(PgRights {
        role: get(0),
        schema: get(1),
        may_create: get(2) != "false",
        tables: get(3).parse().unwrap_or(0),
    })
}

fn unquote(quoted: &str) -> String {
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(quoted)
        .replace("\"\"", "\"")
}

/// The message of [`DbError::SchemaNeedsOwner`].
pub(crate) fn needs_owner_message(
    target: &str,
    role: &str,
    schema: &str,
    found: &Option<i64>,
    needed: &i64,
    tables_exist: &bool,
    may_create: &bool,
) -> String {
    let guide =
        "a role that owns nothing then loads as before, with the GRANTs of docs/recipes/postgres-to-postgres.md";
    if !tables_exist {
        let (why, grant) = if *may_create {
            ("was refused a right it needs to create them".to_string(), String::new())
        } else {
            (
                "may not create tables there".to_string(),
                format!(", or GRANT CREATE ON SCHEMA {schema} TO {role}"),
            )
        };
        return format!(
            "target {target}: dimlog's own tables do not exist in schema {schema} yet, and the PostgreSQL role {role} \
             of target.url {why}; nothing was written. Have the tables' owner run `dimlog init` once with this config \
             ({guide}){grant}"
        );
    }
    let state = match found {
        None => "were made by an older dimlog, before schema versions".to_string(),
        Some(v) => format!("are at schema version {v}"),
    };
    format!(
        "target {target}: dimlog's own tables in schema {schema} {state}, and this dimlog ({}) needs version {needed}; \
         upgrading them changes their definitions (DDL), which the PostgreSQL role {role} of target.url may not do \
         (only their owner may); nothing was written. Have the tables' owner run `dimlog init` once with this dimlog; \
         {guide}",
        this_dimlog()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_count_up_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "{}", m.description);
            assert!(!m.steps.is_empty());
        }
        assert_eq!(CURRENT_VERSION, MIGRATIONS.len() as i64);
    }

    #[test]
    fn every_step_is_in_both_files() {
        use super::super::Backend;
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let text = sql::template(backend, FAMILY);
            for m in MIGRATIONS {
                for step in m.steps {
                    assert!(
                        text.contains(&format!("-- statement: {step}\n"))
                            || text.ends_with(&format!("-- statement: {step}")),
                        "{backend:?}: no statement {step}"
                    );
                }
            }
            for name in [
                "schema_probe",
                "schema_version",
                "schema_table",
                "schema_grant",
                "schema_clear",
                "schema_stamp",
            ] {
                assert!(
                    text.contains(&format!("-- statement: {name}\n")),
                    "{backend:?}: no {name}"
                );
            }
        }
    }
}
