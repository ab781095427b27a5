//! What a role needs on the target (on engines with roles: PostgreSQL), checked from the catalogs before anything
//! is written, so that a right it lacks is named with the `GRANT` that gives it instead
//! of failing half-way with "permission denied".
//!
//! `dimlog init` is run once by a role that may create tables (the owner); every other
//! command works with rights on the tables alone (see
//! `docs/recipes/postgres-to-postgres.md`): no command but `init`, a migration
//! (`run --accept-config-change`) or a rebuild that must repair the dimension's columns
//! runs DDL on dimlog's tables.

use crate::config::Plan;
use crate::db::{sql, Conn, DbError, Param};

/// What a command does to the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// `run`, `backfill`, `init`: reads and appends to the log, writes the dimension and
    /// dimlog's records, uses temporary tables.
    Load,
    /// `status`, `history`, `lookup`, `verify` (and the start of `rebuild` and
    /// `assign-keys`): reads.
    Read,
    /// `rebuild`: reads the log, rewrites the dimension, uses temporary tables.
    Rebuild,
    /// A dry run, `verify` against the source: reads, and compares in temporary tables.
    Compare,
}

impl Need {
    /// What a command opening the target with `access` needs: a command that may write
    /// loads; one that only reads, reads.
    pub fn for_access(access: crate::db::Access) -> Need {
        match access {
            crate::db::Access::Create => Need::Load,
            _ => Need::Read,
        }
    }
}

impl Need {
    fn command(self) -> &'static str {
        match self {
            Need::Load => "loading (run, backfill)",
            Need::Read => "reading the dimension (every command)",
            Need::Rebuild => "rebuilding the dimension (rebuild)",
            Need::Compare => "a dry run or verify against the source",
        }
    }
}

/// A name as SQL text: each part quoted only when it must be.
pub fn sql_name(name: &str) -> String {
    name.split('.').map(sql_ident).collect::<Vec<_>>().join(".")
}

/// PostgreSQL's keywords that cannot name a table unquoted (reserved, and reserved but
/// allowed as a function or type name: PostgreSQL's documentation, appendix C).
const RESERVED: [&str; 101] = [
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "binary",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "group",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "natural",
    "not",
    "notnull",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "outer",
    "overlaps",
    "placing",
    "primary",
    "references",
    "returning",
    "right",
    "select",
    "session_user",
    "similar",
    "some",
    "symmetric",
    "system_user",
    "table",
    "tablesample",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
];

/// One identifier (a table's name as PostgreSQL's messages give it, dots and all) as SQL
/// text, quoted only when it must be: for capitals, other characters, or a keyword.
pub fn sql_ident(part: &str) -> String {
    let plain = part.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && part
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !RESERVED.contains(&part);
    if plain {
        part.to_string()
    } else {
        format!("\"{}\"", part.replace('"', "\"\""))
    }
}

pub(crate) fn unquote(quoted: &str) -> String {
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(quoted)
        .replace("\"\"", "\"")
}

/// The session's role and database, quoted where needed.
async fn role(conn: &mut Conn) -> Result<(String, String), DbError> {
    let sql = sql::statement(conn.backend(), "state", "role_name", &serde_json::json!({}))?;
    let row = conn
        .query_text("reading the session's role", &sql, &[])
        .await?
        .into_iter()
        .next()
        .unwrap_or_default();
    let get = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
    Ok((get(0), get(1)))
}

fn first_text(rows: Vec<crate::db::TextRow>) -> Option<String> {
    rows.into_iter().next().and_then(|r| r.into_iter().next().flatten())
}

/// Checks that the role of a PostgreSQL target has what `need` takes on the plan's tables
/// (those that exist: a missing one is `init`'s business); a no-op on SQLite. Every right
/// missing is named in one [`DbError::MissingRights`], with the `GRANT`s to run.
pub async fn check(conn: &mut Conn, plan: &Plan, need: Need) -> Result<(), DbError> {
    if !conn.dialect().has_roles() {
        return Ok(());
    }
    let (role, database) = role(conn).await?;
    let state_schema = conn
        .state_schema()
        .map(|s| unquote(&s))
        .unwrap_or_else(|| plan.target.state_schema());
    let t = &plan.target;
    let mut schemas: Vec<String> = vec![state_schema.clone()];
    for s in [t.log.schema(), t.dimension.schema()].into_iter().flatten() {
        if !schemas.iter().any(|x| x == s) {
            schemas.push(s.to_string());
        }
    }
    let mut grants = Vec::new();
    let mut unusable = Vec::new();
    let schema_sql = sql::statement(conn.backend(), "state", "schema_unusable", &serde_json::json!({}))?;
    for s in &schemas {
        let rows = conn
            .query_text("checking the role's rights", &schema_sql, &[Param::Text(s.clone())])
            .await?;
        if first_text(rows).as_deref() == Some("true") {
            grants.push(format!("GRANT USAGE ON SCHEMA {} TO {role}", sql_name(s)));
            unusable.push(s.clone());
        }
    }
    let state = |name: &str| {
        (
            format!("{}.{name}", sql_name(&state_schema)),
            format!("\"{}\".{name}", state_schema.replace('"', "\"\"")),
        )
    };
    let table = |id: &crate::ident::Ident| (sql_name(&id.to_string()), id.quoted());
    let (log, dim) = (table(&t.log), table(&t.dimension));
    let mut tables: Vec<((String, String), &[&str])> = match need {
        Need::Load => vec![
            (log, &["SELECT", "INSERT"]),
            (dim, &["SELECT", "INSERT", "UPDATE", "DELETE"]),
            (state("dimlog_state"), &["SELECT", "INSERT", "UPDATE"]),
            (state("dimlog_runs"), &["SELECT", "INSERT", "UPDATE"]),
            (state("dimlog_dimensions"), &["SELECT", "UPDATE"]),
        ],
        Need::Read | Need::Compare => vec![
            (log, &["SELECT"]),
            (dim, &["SELECT"]),
            (state("dimlog_state"), &["SELECT"]),
            (state("dimlog_runs"), &["SELECT"]),
            (state("dimlog_dimensions"), &["SELECT"]),
        ],
        Need::Rebuild => vec![
            (log, &["SELECT"]),
            (dim, &["SELECT", "INSERT", "UPDATE", "DELETE"]),
            (state("dimlog_dimensions"), &["SELECT"]),
        ],
    };
    if need != Need::Read {
        // `init`, which a load, a dry run and a rebuild begin with, reads the schema
        // version of dimlog's tables (`init` grants SELECT on it to PUBLIC).
        tables.push((state("dimlog_schema"), &["SELECT"]));
    }
    if need == Need::Load && !registered(conn, plan).await {
        // The first load of a dimension registers it (an owner's `dimlog init` does, for
        // a role that owns nothing).
        for (table, privileges) in tables.iter_mut() {
            if table.1.ends_with(".dimlog_dimensions") {
                *privileges = &["SELECT", "INSERT", "UPDATE"];
            }
        }
    }
    let table_sql = sql::statement(conn.backend(), "state", "table_rights_missing", &serde_json::json!({}))?;
    for ((shown, regclass), privileges) in tables {
        let schema = shown.rsplit_once('.').map(|(s, _)| unquote(s));
        if schema.is_some_and(|s| unusable.contains(&s)) {
            // to_regclass would fail on the schema; its USAGE is asked for above, and the
            // table's rights are checked once it is granted.
            continue;
        }
        let rows = conn
            .query_text(
                "checking the role's rights",
                &table_sql,
                &[Param::Text(regclass), Param::Text(privileges.join(","))],
            )
            .await?;
        let row = rows.into_iter().next().unwrap_or_default();
        if let Some(missing) = row.first().cloned().flatten() {
            let qualified = row.get(1).cloned().flatten().unwrap_or(shown);
            grants.push(format!("GRANT {missing} ON {qualified} TO {role}"));
        }
    }
    if matches!(need, Need::Load | Need::Rebuild | Need::Compare) {
        // On Citus a load (a dry run and a comparison with the source too) makes its
        // working tables in the log's schema as it needs them.
        let sql = sql::statement(
            conn.backend(),
            "state",
            "working_tables_uncreatable",
            &serde_json::json!({}),
        )?;
        if !sql.is_empty() {
            let schema = t.log.schema().map(str::to_string);
            let params = [
                Param::Text(t.log.name().to_string()),
                schema.clone().map_or(Param::Null, Param::Text),
            ];
            let rows = conn.query_text("checking the role's rights", &sql, &params).await?;
            if first_text(rows).as_deref() == Some("true") {
                let schema = match schema {
                    Some(s) => sql_name(&s),
                    None => {
                        let current =
                            sql::statement(conn.backend(), "state", "current_schema", &serde_json::json!({}))?;
                        sql_name(
                            &first_text(conn.query_text("finding the current schema", &current, &[]).await?)
                                .unwrap_or_else(|| "public".into()),
                        )
                    }
                };
                grants.push(format!(
                    "GRANT CREATE ON SCHEMA {schema} TO {role} (on Citus {} makes its working tables there as it needs them)",
                    need.command()
                ));
            }
        }
    }
    if need != Need::Read {
        let temp_sql = sql::statement(conn.backend(), "state", "temp_missing", &serde_json::json!({}))?;
        let rows = conn.query_text("checking the role's rights", &temp_sql, &[]).await?;
        if first_text(rows).as_deref() == Some("true") {
            grants.push(format!("GRANT TEMPORARY ON DATABASE {database} TO {role}"));
        }
    }
    if grants.is_empty() {
        return Ok(());
    }
    Err(DbError::MissingRights(format!(
        "the PostgreSQL role {role} of target.url lacks rights that {} needs{}; nothing was written. \
         Have the tables' owner run: {}. ({} lists every GRANT {})",
        need.command(),
        if need == Need::Load {
            " (a role that owns nothing loads with rights on the tables alone, once an owner has run `dimlog init`)"
        } else {
            ""
        },
        grants.join("; "),
        conn.dialect()
            .rights_recipe()
            .unwrap_or("docs/recipes/postgres-to-postgres.md"),
        if need == Need::Load {
            "a loading role needs"
        } else {
            "a role needs, for loading and for only reading"
        }
    )))
}

/// Whether the dimension is registered in `dimlog_dimensions`; true when that cannot be
/// read (no table yet, or no right to read it, which is asked for on its own).
async fn registered(conn: &mut Conn, plan: &Plan) -> bool {
    let Ok(sql) = sql::statement(conn.backend(), "state", "dimension_get", &serde_json::json!({})) else {
        return true;
    };
    match conn
        .query_text(
            "checking whether the dimension is registered",
            &sql,
            &[Param::Text(plan.name.clone())],
        )
        .await
    {
        Ok(rows) => !rows.is_empty(),
        Err(_) => true,
    }
}

/// Whether `schema` (as the config names it, unquoted) is missing from the target: a
/// table named in it cannot be made, and the error should name the setting. (An engine
/// with one schema has the config refuse any other.)
pub async fn schema_missing(conn: &mut Conn, schema: &str) -> Result<bool, DbError> {
    if conn.dialect().single_schema() {
        return Ok(false);
    }
    let sql = sql::statement(conn.backend(), "state", "schema_exists", &serde_json::json!({}))?;
    let rows = conn
        .query_text("finding the schema", &sql, &[Param::Text(schema.to_string())])
        .await?;
    Ok(first_text(rows).as_deref() == Some("false"))
}

/// Refuses, naming the GRANT, to create `what` (quoted, for the message `shown`) in
/// `schema` (None: the session's current schema) when the role may not create tables
/// there: a loading role gets its tables from `dimlog init`, run once by their owner.
pub async fn check_may_create(conn: &mut Conn, shown: &str, schema: Option<&str>) -> Result<(), DbError> {
    if !conn.dialect().has_roles() {
        return Ok(());
    }
    let schema = match schema {
        Some(s) => s.to_string(),
        None => {
            let sql = sql::statement(conn.backend(), "state", "current_schema", &serde_json::json!({}))?;
            first_text(conn.query_text("finding the current schema", &sql, &[]).await?)
                .unwrap_or_else(|| "public".into())
        }
    };
    let sql = sql::statement(conn.backend(), "state", "schema_creatable", &serde_json::json!({}))?;
    let rows = conn
        .query_text("checking the role's rights", &sql, &[Param::Text(schema.clone())])
        .await?;
    if first_text(rows).as_deref() != Some("false") {
        return Ok(());
    }
    let (role, _) = role(conn).await?;
    Err(DbError::MissingRights(format!(
        "table {shown} does not exist, and the PostgreSQL role {role} of target.url may not create tables in schema {schema}; \
         nothing was written. Have the tables' owner run `dimlog init` once with this config (a role that owns nothing then \
         loads with the GRANTs of docs/recipes/postgres-to-postgres.md), or GRANT CREATE ON SCHEMA {schema_sql} TO {role}",
        schema_sql = sql_name(&schema)
    )))
}

/// Whether the session's role owns (or is a member of the owner of) both tables: only
/// then may a first load drop their indexes and build them once at the end.
pub async fn owns_tables(conn: &mut Conn, a: &str, b: &str) -> Result<bool, DbError> {
    if !conn.dialect().has_roles() {
        return Ok(true);
    }
    let sql = sql::statement(conn.backend(), "state", "owns_tables", &serde_json::json!({}))?;
    let rows = conn
        .query_text(
            "checking who owns the log and the dimension",
            &sql,
            &[Param::Text(a.to_string()), Param::Text(b.to_string())],
        )
        .await?;
    Ok(first_text(rows).as_deref() == Some("true"))
}

/// Refuses, before anything is written, a change of the column sets (`change`,
/// described) that alters the log's or the dimension's columns when the session's role
/// does not own them: only their owner may alter them ([`DbError::ChangeNeedsOwner`]).
pub async fn check_may_alter(conn: &mut Conn, plan: &Plan, change: &str, alters_log: bool) -> Result<(), DbError> {
    let (log, dim) = (&plan.target.log, &plan.target.dimension);
    if owns_tables(conn, &log.quoted(), &dim.quoted()).await? {
        return Ok(());
    }
    let (role, _) = role(conn).await?;
    let sql = sql::statement(conn.backend(), "state", "table_owner", &serde_json::json!({}))?;
    let owner = first_text(
        conn.query_text("finding who owns the log", &sql, &[Param::Text(log.quoted())])
            .await?,
    )
    .unwrap_or_else(|| "their owner".into());
    Err(DbError::ChangeNeedsOwner(Box::new(crate::db::ChangeNeedsOwner {
        dimension: plan.name.clone(),
        change: change.to_string(),
        role,
        owner,
        tables: if alters_log {
            format!("{} and {}", sql_name(&log.to_string()), sql_name(&dim.to_string()))
        } else {
            sql_name(&dim.to_string())
        },
    })))
}
