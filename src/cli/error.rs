//! How the command line reports a library error: the hint that says what to do in terms
//! of its flags and commands, printed after the message and as `hint` in `--json`
//! errors. The library's messages say what is wrong; only this module names a flag.
//! (Exit codes and JSON kinds are the library's classification, [`Error::exit_code`]
//! and [`Error::kind`], shared with programs that use it.)

use crate::config::{ConfigError, NextStep};
use crate::db::DbError;
use crate::Error;

/// What to do about an error, in terms of the command line (the library's messages
/// never name a flag): printed after the message, and as `hint` in `--json` errors.
pub fn hint(e: &Error) -> Option<String> {
    use crate::lookup::{AssignError as A, FactColumn};
    if let Some(h) = privilege_hint(e) {
        return Some(h);
    }
    if let Some(way_out) = match e {
        Error::Db(db) => db.way_out(),
        _ => None,
    } {
        return Some(way_out.to_string());
    }
    if let Error::Db(DbError::ChangeNeedsOwner(_)) = e {
        return Some(
            "run `dimlog run --accept-config-change` once as the tables' owner (the same config, with the owner's URL in \
             target.url); or restore the old column lists"
                .into(),
        );
    }
    if let Error::Db(DbError::Locked { .. } | DbError::TableLocked { .. } | DbError::NewFileBusy { .. }) = e {
        return Some("try again later, or drop --no-wait to wait for it".into());
    }
    if let Error::Config(ConfigError::NotInSource { setting, .. }) = e {
        return Some(if setting.starts_with("track.") {
            format!(
                "misspelt? fix the name in {setting}. Dropped at the source? remove it from {setting} and rerun with \
                 `dimlog run --accept-config-change` (its history stays in the log)"
            )
        } else {
            format!("fix the name in {setting}: the source has the columns listed")
        });
    }
    if let Error::Config(ConfigError::Read { source, .. }) = e {
        if source.kind() == std::io::ErrorKind::NotFound {
            return Some("write one with `dimlog new`, or point --config at yours".into());
        }
    }
    // A column of dimlog's tables (not of the source, whose errors are the extract's).
    if !matches!(e, Error::Extract(_)) && names_a_missing_column(e) {
        return Some(
            "a column dimlog reads or writes is missing (dropped or renamed by hand?): `dimlog verify` names what differs \
             from what dimlog made. The dimension's: `dimlog rebuild` makes it again from the log (columns you added stay). \
             The log's: rename it back, or restore the log from a backup"
                .into(),
        );
    }
    if database_error(e)
        .is_some_and(|db| db.code().as_deref() == Some("0A000") && db.message().contains("used by a view or rule"))
    {
        return Some(
            "PostgreSQL cannot change the type of a column a view reads (named above): drop the view, rerun, then create \
             it again"
                .into(),
        );
    }
    if let Error::MassDelete { .. } = e {
        return Some("if the source really lost them, rerun with --allow-mass-delete".into());
    }
    // The source's database failed a read it accepted (a division by zero, a bad cast in
    // a view or in source.query): the fault is in what it runs, not in dimlog's settings.
    if let Error::Extract(crate::extract::ExtractError::Db(DbError::Query { .. })) = e {
        // SQLSTATE class 22: data exceptions, which only the rows' values raise.
        if let Some(db) = database_error(e).filter(|db| db.code().is_some_and(|c| c.starts_with("22"))) {
            return Some(format!(
                "the source's database failed on a row's value while dimlog read from it (SQLSTATE {}): with source.query, run that \
                 query on its own to see the row at fault (dimlog reads it as SELECT … FROM (query) AS dimlog_source); \
                 with source.table, the table or view it names",
                db.code().as_deref().unwrap_or("unknown")
            ));
        }
    }
    if let Error::Config(ConfigError::NeedsStep { step, .. }) = e {
        return Some(match step {
            NextStep::AcceptConfigChange => "to migrate, rerun with `dimlog run --accept-config-change`".into(),
            NextStep::FullRefresh => "if it is the right column, run `dimlog run --full-refresh` once".into(),
            NextStep::MigrateColumn { column } => format!(
                "`dimlog migrate --column {column}` makes the migration above; then `dimlog rebuild`, then `dimlog run --full-refresh`"
            ),
        });
    }
    let Error::Assign(e) = e else { return None };
    Some(
        match e.as_ref() {
            A::KeyColumnCount { .. } => "repeat --key-column once per column of source.key, in that order",
            A::NoFactTable { .. } | A::ReservedFactTable { .. } => "--facts names a table in the target database",
            A::NoSuchColumn { role: FactColumn::At, .. } => "check --at-column",
            A::NoSuchColumn { .. } => "check --key-column",
            A::SkIsInput { .. } | A::SkNotInteger { .. } => {
                "--sk-column names the column to fill: give it an integer column of its own, or a new name (it is created)"
            }
            A::SkNotAssigned { .. } | A::SkForeign { .. } => {
                "if this column really is dimlog's surrogate-key column for this dimension and its values may be replaced, rerun with --overwrite"
            }
            A::FactTableSchema { .. } | A::SqliteReservedFactTable { .. } => {
                "--facts names your staged fact table, a lasting table of the target database"
            }
            A::SourceFactTable { .. } => {
                "--facts names your staged fact table, never the source table: copy the facts to a table of their own"
            }
            A::OwnedFactTable { .. } => "--facts names your staged fact table, never one of dimlog's tables",
            A::AtNotTimestamp { .. } => "--at-column names the facts' timestamp column",
            A::KeyTypeMismatch { .. } => "--key-column names fact columns of the key's types",
            A::KeyColumnOrder { .. } => "repeat --key-column once per column of source.key, in that order",
            A::BadTimestamps { .. } => {
                "fix those facts, or rerun with --unknown -1 to give them the unknown member -1 (they are counted)"
            }
            A::Unknown { .. } => "or rerun with --unknown -1 to give such facts the unknown member -1",
            _ => return None,
        }
        .to_string(),
    )
}

/// The database's own error, the first anywhere in the error's chain.
fn database_error(e: &Error) -> Option<&dyn sqlx::error::DatabaseError> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(sqlx::Error::Database(db)) = c.downcast_ref::<sqlx::Error>() {
            return Some(db.as_ref());
        }
        cur = c.source();
    }
    None
}

/// Whether the database said a column does not exist (PostgreSQL's SQLSTATE 42703,
/// SQLite's "no such column").
fn names_a_missing_column(e: &Error) -> bool {
    database_error(e)
        .is_some_and(|db| db.code().as_deref() == Some("42703") || db.message().starts_with("no such column"))
}

/// The right a PostgreSQL role lacks, in user terms, when a statement was refused for
/// want of it (SQLSTATE 42501, "permission denied for …"): which right, on what, and the
/// `GRANT` that gives it.
fn privilege_hint(e: &Error) -> Option<String> {
    let message = database_error(e)
        .filter(|db| db.code().as_deref() == Some("42501"))?
        .message()
        .to_string();
    let role = "the role of target.url";
    let on = |what: &str| {
        message
            .strip_prefix(&format!("permission denied for {what} "))
            .map(|s| s.trim().to_string())
    };
    // PostgreSQL names a table bare and unquoted: as SQL it may need quotes (`"Accounts"`).
    let on = |what: &str| on(what).map(|name| crate::rights::sql_ident(&name));
    Some(if let (Some(schema), Error::Extract(_)) = (on("schema"), e) {
        // Read on the source's connection: a schema it may not look into.
        format!(
            "the PostgreSQL role of source.url may not use schema {schema} of the source: GRANT USAGE ON SCHEMA {schema} TO \
             the role of source.url, and SELECT on the source table (dimlog only reads the source)"
        )
    } else if let Some(schema) = on("schema") {
        format!(
            "the PostgreSQL role lacks CREATE on schema {schema}, which dimlog needs to create its tables (and TEMPORARY on the database, for its work tables), \
             even for a dry run: GRANT CREATE ON SCHEMA {schema} TO {role}, or run as a role that has it; a role that may only read can run status, history, lookup and verify"
        )
    } else if let (Some(table), Error::Extract(_)) = (on("table"), e) {
        // Read on the source's connection: its role needs SELECT, nothing more.
        format!(
            "the PostgreSQL role of source.url may not read table {table}: GRANT SELECT ON {table} TO the role of source.url \
             (dimlog only reads the source; PostgreSQL names the table without its schema: write it schema.{table} if \
             it is not in the public schema)"
        )
    } else if let (Some(table), Error::Assign(_)) = (on("table"), e) {
        format!(
            "the PostgreSQL role lacks a right on table {table}: assign-keys needs SELECT and UPDATE on the fact table \
             (and SELECT, INSERT, UPDATE on dimlog_assigned): GRANT SELECT, UPDATE ON {table} TO {role}, or the rights \
             docs/recipes/postgres-to-postgres.md lists"
        )
    } else if let Some(table) = on("table") {
        format!(
            "the PostgreSQL role lacks a right on table {table}: the target's role needs the rights docs/recipes/postgres-to-postgres.md \
             lists on dimlog's tables (GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {role} covers them all), the source's role \
             SELECT on the source table"
        )
    } else if let Some(database) = on("database").or_else(|| {
        message
            .strip_prefix("permission denied to create temporary tables in database ")
            .map(str::to_string)
    }) {
        format!(
            "the PostgreSQL role lacks TEMPORARY on database {database}, which dimlog needs for its work tables: GRANT TEMPORARY ON DATABASE {database} TO {role}"
        )
    } else if let Some(sequence) = on("sequence") {
        format!(
            "the PostgreSQL role lacks USAGE on sequence {sequence}: GRANT USAGE, SELECT ON SEQUENCE {sequence} TO {role}"
        )
    } else if let Some(what) = message.strip_prefix("must be owner of ") {
        format!(
            "the PostgreSQL role lacks ownership of {what}, which changing its columns needs: run as its owner, or GRANT the owner's role to {role}"
        )
    } else {
        format!("the PostgreSQL role lacks a right ({message}): GRANT it to {role}, or run as a role that has it")
    })
}
