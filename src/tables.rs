//! The target's tables: dimlog's own (made and upgraded by [`crate::db::migrate`]), the
//! version log and the dimension, their indexes, and the checks that they are what dimlog
//! made.
//!
//! `init` is idempotent and runs before every load, so `dimlog run` on an empty target
//! just works. It registers the dimension's column sets ([`crate::record`]), so a later
//! config change is noticed instead of silently re-versioning history.

use crate::config::{ConfigError, Plan};
use crate::db::{sql, Conn, DbError, Param};
use crate::ident::Ident;
use crate::layout::Layout;
use crate::ts::Micros;
use serde::Serialize;

pub use crate::context::{run_named, SqlContext};
use crate::record::{check_compatible, to_json};
pub use crate::record::{
    check_registered, existing_record, not_loaded_file, read_record, ConfigChange, DimensionRecord, Missing, NotLoaded,
    RecordError,
};

/// The indexes [`drop_indexes_for_first_load`] took off, for [`restore_indexes`].
#[derive(Debug, Default)]
pub struct DroppedIndexes {
    /// (table, constraint, column) of each primary key dropped (PostgreSQL only).
    primary_keys: Vec<(String, String, String)>,
    /// Nothing was dropped ([`DroppedIndexes::kept`]): nothing to build.
    kept: bool,
}

impl DroppedIndexes {
    /// A first load by a role that does not own the tables: their indexes stay, and are
    /// kept up to date row by row (DROP INDEX, CREATE INDEX and ANALYZE need the owner).
    pub fn kept() -> DroppedIndexes {
        DroppedIndexes {
            primary_keys: Vec::new(),
            kept: true,
        }
    }
}

/// Drops the log's and the dimension's indexes inside the caller's transaction, before
/// a first load fills both empty tables: building an index once over a million rows
/// costs a fraction of updating it row by row. Readers of the two tables wait for the
/// commit; a rollback brings the indexes back. [`restore_indexes`] must follow in the
/// same transaction. SQLite keeps its primary keys (the log's is its rowid).
pub async fn drop_indexes_for_first_load(conn: &mut Conn, ctx: &SqlContext) -> Result<DroppedIndexes, DbError> {
    let backend = conn.backend();
    for index in &ctx.secondary_indexes {
        let sql = sql::statement(backend, "tables", "drop_index", &serde_json::json!({ "index": index }))?;
        conn.execute("tables/drop_index", &sql, &[]).await?;
    }
    let mut dropped = DroppedIndexes::default();
    if conn.dialect().alters_tables() {
        // A foreign key of another table (facts) to the dimension needs its primary key.
        let referencing = sql::statement(backend, "tables", "referencing_keys", &serde_json::json!({}))?;
        let referenced = conn
            .query_i64s(
                "finding foreign keys to the dimension",
                &referencing,
                &[Param::Text(ctx.dim.clone())],
            )
            .await?
            .first()
            .is_some_and(|n| n.is_some_and(|n| n > 0));
        let mut keyed = vec![(&ctx.log, "log_id".to_string())];
        if !referenced {
            keyed.push((&ctx.dim, ctx.sk.clone()));
        }
        for (table, column) in keyed {
            let find = sql::statement(backend, "tables", "primary_key_name", &serde_json::json!({}))?;
            let rows = conn
                .query_text("finding a primary key", &find, &[Param::Text(table.clone())])
                .await?;
            let Some(name) = rows.into_iter().next().and_then(|r| r.into_iter().next().flatten()) else {
                continue;
            };
            let pk = (table.clone(), format!("\"{}\"", name.replace('"', "\"\"")), column);
            let sql = sql::statement(backend, "tables", "drop_primary_key", &pk_context(&pk, &ctx.keys))?;
            conn.execute("tables/drop_primary_key", &sql, &[]).await?;
            dropped.primary_keys.push(pk);
        }
    }
    Ok(dropped)
}

fn pk_context((table, name, column): &(String, String, String), keys: &[String]) -> serde_json::Value {
    serde_json::json!({ "table": table, "name": name, "column": column, "keys": keys })
}

/// Builds the indexes [`drop_indexes_for_first_load`] dropped (the secondary ones with
/// the same statements as [`init`]).
pub async fn restore_indexes(conn: &mut Conn, ctx: &SqlContext, dropped: DroppedIndexes) -> Result<(), DbError> {
    if dropped.kept {
        return Ok(());
    }
    for pk in &dropped.primary_keys {
        let sql = sql::statement(conn.backend(), "tables", "add_primary_key", &pk_context(pk, &ctx.keys))?;
        conn.execute("tables/add_primary_key", &sql, &[]).await?;
    }
    run_named(conn, "tables", &["log_index", "log_load_index", "dimension_index"], ctx).await?;
    // The next run's joins of a few touched keys with these tables need statistics to
    // pick the indexes (where the engine's planner uses them); autovacuum would only
    // gather them some time later.
    run_named(conn, "tables", &["analyze_log", "analyze_dimension"], ctx).await?;
    Ok(())
}

/// Sets (`Some((load_id, loaded_at))`) or drops (`None`) the log's defaults for the two
/// columns a first load's COPY leaves out, inside the run's transaction.
pub async fn set_load_defaults(conn: &mut Conn, ctx: &SqlContext, load: Option<(i64, Micros)>) -> Result<(), DbError> {
    #[derive(Serialize)]
    struct Defaults<'a> {
        #[serde(flatten)]
        ctx: &'a SqlContext,
        load_id: i64,
        loaded_at: String,
    }
    match load {
        Some((load_id, loaded_at)) => {
            let with = Defaults {
                ctx,
                load_id,
                loaded_at: loaded_at.to_text(),
            };
            run_named(conn, "tables", &["log_load_defaults"], &with).await
        }
        None => run_named(conn, "tables", &["log_drop_load_defaults"], ctx).await,
    }
}

/// Why `init` refused to go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// A database error.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The config no longer matches what the dimension was built with.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Creates dimlog's tables, the log and the dimension (idempotent), and registers the
/// dimension; refuses a config whose columns differ from what the dimension was built
/// with, because loading it would silently re-version history.
pub async fn init(conn: &mut Conn, plan: &Plan, layout: &Layout) -> Result<DimensionRecord, InitError> {
    let (stored, change) = init_allowing_change(conn, plan, layout).await?;
    match change {
        None => Ok(stored),
        Some(c) => Err(c.refusal().into()),
    }
}

/// Like [`init`], but returns a pending change of the column sets instead of refusing
/// it, so `dimlog run --accept-config-change` can migrate.
pub async fn init_allowing_change(
    conn: &mut Conn,
    plan: &Plan,
    layout: &Layout,
) -> Result<(DimensionRecord, Option<ConfigChange>), InitError> {
    init_allowing_change_in(conn, plan, layout, true).await
}

/// Like [`init_allowing_change`]; with `own_transaction` false it runs inside the
/// caller's open transaction and neither commits nor rolls back, so a dry run that rolls
/// back leaves an empty target empty.
pub async fn init_allowing_change_in(
    conn: &mut Conn,
    plan: &Plan,
    layout: &Layout,
    own_transaction: bool,
) -> Result<(DimensionRecord, Option<ConfigChange>), InitError> {
    init_with(conn, plan, layout, own_transaction, false).await
}

/// [`init`] before `dimlog rebuild`: a registered dimension that is missing is created
/// again, empty, for the rebuild to fill whole from the log (a registered log that is
/// missing is still an error).
pub async fn init_for_rebuild(conn: &mut Conn, plan: &Plan, layout: &Layout) -> Result<DimensionRecord, InitError> {
    let (stored, change) = init_with(conn, plan, layout, true, true).await?;
    match change {
        None => Ok(stored),
        Some(c) => Err(c.refusal().into()),
    }
}

async fn init_with(
    conn: &mut Conn,
    plan: &Plan,
    layout: &Layout,
    own_transaction: bool,
    dimension_may_be_missing: bool,
) -> Result<(DimensionRecord, Option<ConfigChange>), InitError> {
    let ctx = SqlContext::new(plan, layout, conn.backend());
    let backend = conn.backend();
    if own_transaction {
        conn.begin().await?;
    }
    let result: Result<(DimensionRecord, Option<ConfigChange>), InitError> = async {
        // Only what is missing is created (CREATE TABLE IF NOT EXISTS needs CREATE on the
        // schema even when the table exists): once `init` has run, a run needs no right
        // beyond reading and writing the tables.
        run_named(conn, "init", &["lock"], &ctx).await?;
        // A schema named by the config that the target lacks is the config's fault (and
        // dimlog's own tables would go there too, without `state_schema`).
        let named = [
            ("target.log", plan.target.log.schema(), plan.target.log.to_string()),
            (
                "target.dimension",
                plan.target.dimension.schema(),
                plan.target.dimension.to_string(),
            ),
            (
                "target.state_schema",
                plan.target.explicit_state_schema.as_ref().map(|s| s.name()),
                plan.target
                    .explicit_state_schema
                    .as_ref()
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
            ),
        ];
        for (setting, schema, written) in named {
            if let Some(schema) = schema {
                if crate::rights::schema_missing(conn, schema).await? {
                    return Err(InitError::Config(ConfigError::invalid(
                        setting,
                        format!(
                            "`{written}` names schema `{schema}`, which the target database does not have; \
                             create it (CREATE SCHEMA), or name a schema it has"
                        ),
                    )));
                }
            }
        }
        // dimlog's own tables, made or upgraded to this dimlog's schema version; a target
        // a newer dimlog upgraded is refused (src/db/migrate.rs).
        crate::db::migrate::migrate(conn, &plan.target.url.redacted()).await?;
        check_tables_unowned(conn, plan).await?;
        let registered = read_record(conn, plan).await?.is_some();
        if registered {
            if let Some(refusal) = crate::record::surrogate_key_refusal(conn, plan).await? {
                return Err(refusal.into());
            }
        }
        check_tables_present(conn, plan, registered, dimension_may_be_missing).await?;
        if registered && !dimension_may_be_missing {
            // A load allocates surrogate keys: its counter must be past every one held.
            // (`rebuild` allocates none, and repairs a dimension edited by hand.)
            check_key_counter(conn, plan).await?;
        }
        let (log, dim) = (plan.target.log.name(), plan.target.dimension.name());
        let log_table = plan.target.log.to_string();
        let log_made = ("tables", &["log", "distribute_log"][..]);
        create_table_if_missing(conn, &log_table, plan.target.log.schema(), log_made, &ctx).await?;
        let log_index = (ctx.log.as_str(), log, ctx.log_index.as_str());
        create_index_if_missing(conn, ("tables", "log_index"), log_index, &ctx).await?;
        let log_load_index = (ctx.log.as_str(), log, ctx.log_load_index.as_str());
        create_index_if_missing(conn, ("tables", "log_load_index"), log_load_index, &ctx).await?;
        let dim_table = plan.target.dimension.to_string();
        let dim_schema = plan.target.dimension.schema();
        let dim_made = ("tables", &["dimension", "distribute_dimension"][..]);
        create_table_if_missing(conn, &dim_table, dim_schema, dim_made, &ctx).await?;
        let dim_index = (ctx.dim.as_str(), dim, ctx.dim_index.as_str());
        create_index_if_missing(conn, ("tables", "dimension_index"), dim_index, &ctx).await?;
        let wanted = DimensionRecord::from_layout(layout);
        if !registered {
            let register = sql::statement(backend, "state", "dimension_register", &ctx)?;
            conn.execute(
                "registering the dimension",
                &register,
                &[
                    Param::Text(plan.name.clone()),
                    Param::Text(plan.target.log.to_string()),
                    Param::Text(plan.target.dimension.to_string()),
                    Param::Text(plan.target.surrogate_key.name().to_string()),
                    Param::Text(to_json(&wanted.key_columns)),
                    Param::Text(to_json(&wanted.tracked_columns)),
                    Param::Text(to_json(&wanted.type1_with_current())),
                    Param::Text(to_json(&wanted.column_types)),
                    Param::I64(wanted.hash_version),
                    Param::Ts(Micros::from_utc(chrono::Utc::now())),
                ],
            )
            .await?;
        }
        let mut stored = read_record(conn, plan).await?.expect("registered above");
        check_compatible(&stored, &wanted, plan, backend)?;
        widen_columns(conn, plan, &mut stored, &wanted).await?;
        Ok((stored.clone(), ConfigChange::between(&stored, &wanted)))
    }
    .await;
    if !own_transaction {
        return result;
    }
    conn.finish(result).await
}

/// Refuses, as a run would, a role that gets read-only transactions, or may not create
/// the tables a first run makes where they are missing (dimlog's own, the log, the
/// dimension): for `doctor`, whose
/// check of the rights on tables that exist says nothing of tables to come.
pub async fn check_may_create_missing(conn: &mut Conn, plan: &Plan) -> Result<(), DbError> {
    if !conn.dialect().has_roles() {
        return Ok(());
    }
    let state_schema = conn
        .state_schema()
        .map(|s| crate::rights::unquote(&s))
        .unwrap_or_else(|| plan.target.state_schema());
    let sql = sql::statement(conn.backend(), "state", "read_only_by_default", &serde_json::json!({}))?;
    let read_only = conn
        .query_text("checking whether writes are allowed", &sql, &[])
        .await?;
    if read_only.first().and_then(|r| r.first().cloned().flatten()).as_deref() == Some("true") {
        return Err(DbError::MissingRights(
            "the PostgreSQL role of target.url gets read-only transactions there (default_transaction_read_only is \
             on for the role or the database, or the server is a standby): run, backfill and rebuild cannot write. \
             Point target.url at the primary, or have an administrator ALTER ROLE ... SET \
             default_transaction_read_only = off"
                .to_string(),
        ));
    }
    let t = &plan.target;
    let (log, dim) = (t.log.to_string(), t.dimension.to_string());
    let tables = [
        ("dimlog_state", Some(state_schema.as_str())),
        (log.as_str(), t.log.schema()),
        (dim.as_str(), t.dimension.schema()),
    ];
    for (name, schema) in tables {
        if table_missing(conn, name).await? {
            crate::rights::check_may_create(conn, &shown_in(name, schema), schema).await?;
        }
    }
    Ok(())
}

/// Table `name` as a message names it: one of dimlog's own with the `schema` it is made
/// in (the connection qualifies it), a config's table as the config writes it.
fn shown_in(name: &str, schema: Option<&str>) -> String {
    match (name.starts_with("dimlog_"), schema) {
        (true, Some(s)) => format!("{s}.{name}"),
        _ => name.to_string(),
    }
}

/// Whether table `name` (a config's table name, or one of dimlog's own, which the
/// connection qualifies) is missing.
pub(crate) async fn table_missing(conn: &mut Conn, name: &str) -> Result<bool, DbError> {
    let (quoted, plain) = match Ident::table(name) {
        Ok(i) if !name.starts_with("dimlog_") => (i.quoted(), i.name().to_string()),
        _ => (name.to_string(), name.to_string()),
    };
    let names = serde_json::json!({ "table": quoted, "plain": plain });
    let exists = sql::statement(conn.backend(), "tables", "table_exists", &names)?;
    Ok(conn.query_count("looking for dimlog's tables", &exists, &[]).await? == 0)
}

/// Runs the `CREATE TABLE IF NOT EXISTS` statement `family/statements[0]`, and the
/// statements after it (distributing the table, on an engine that does), only when the table
/// (`name`: a config's table name, or one of dimlog's own, which the connection qualifies)
/// is missing; on PostgreSQL a role that may not create it in `schema` (None: the
/// session's current schema) is refused naming the GRANT and `dimlog init`.
async fn create_table_if_missing(
    conn: &mut Conn,
    name: &str,
    schema: Option<&str>,
    (family, statements): (&str, &[&str]),
    ctx: &SqlContext,
) -> Result<(), DbError> {
    if !table_missing(conn, name).await? {
        return Ok(());
    }
    crate::rights::check_may_create(conn, &shown_in(name, schema), schema).await?;
    run_named(conn, family, statements, ctx).await
}

/// Runs the `CREATE INDEX IF NOT EXISTS` statement `family/statement` only when the
/// index (`table` quoted, `plain` its bare name, `index` quoted) is missing: the
/// statement locks the table (SHARE) before it looks, so on every run it would wait for
/// any transaction writing the table — a run of another dimension writing `dimlog_runs`.
async fn create_index_if_missing(
    conn: &mut Conn,
    (family, statement): (&str, &str),
    (table, plain, index): (&str, &str, &str),
    ctx: &SqlContext,
) -> Result<(), DbError> {
    let names = serde_json::json!({ "table": table, "plain": plain, "index": index });
    let exists = sql::statement(conn.backend(), "tables", "index_exists", &names)?;
    let found = conn.query_count("looking for an index", &exists, &[]).await?;
    if found == 0 {
        run_named(conn, family, &[statement], ctx).await?;
    }
    Ok(())
}

/// Refuses to create the log or the dimension where dimlog would lose data or fail
/// obscurely: a table that was renamed away (an index dimlog names after it belongs to
/// another table now) is named as the cause, whether or not the dimension is registered;
/// a registered log that is missing is an error naming it, never created again empty (a
/// new log would give every key a second current version); so is a registered dimension
/// that is missing, unless `dimension_may_be_missing` (`dimlog rebuild`, which builds it
/// again whole from the log — a run would write only the keys it touches). All exit 2.
pub async fn check_tables_present(
    conn: &mut Conn,
    plan: &Plan,
    registered: bool,
    dimension_may_be_missing: bool,
) -> Result<(), InitError> {
    let backend = conn.backend();
    for (setting, role, table) in [
        ("target.log", "log", &plan.target.log),
        ("target.dimension", "dimension", &plan.target.dimension),
    ] {
        let bare = table.name();
        let names = serde_json::json!({
            "table": table.quoted(),
            "plain": bare,
            "schema": table.schema(),
            "indexes": [format!("{bare}_pkey"), format!("{bare}_key_idx"), format!("{bare}_load_idx")],
        });
        let exists = sql::statement(backend, "tables", "table_exists", &names)?;
        let found = conn.query_count("looking for dimlog's tables", &exists, &[]).await?;
        if found > 0 {
            if !registered {
                // A table no dimension is recorded with: its rows would be taken for
                // dimlog's (a dimension's rows with surrogate keys it never issued, a
                // log's versions numbered over by a counter that starts again).
                let any = sql::statement(backend, "tables", "table_has_rows", &names)?;
                if conn.query_count("looking into an existing table", &any, &[]).await? > 0 {
                    return Err(ConfigError::invalid(
                        setting,
                        format!(
                            "{table} already exists and holds rows, but dimension `{name}` is not recorded in this target \
                             (dimlog_dimensions), so they are not rows dimlog made for it: name a new table in {setting}, \
                             or drop that one if it is a leftover; a dimension whose `name` changed keeps its old name",
                            name = plan.name,
                        ),
                    )
                    .into());
                }
            }
            continue;
        }
        let owner = sql::statement(backend, "tables", "index_owner", &names)?;
        let owner = conn
            .query_text("looking for a table renamed away", &owner, &[])
            .await?
            .into_iter()
            .next();
        if let Some([Some(index), Some(other)]) = owner.as_deref() {
            // Pointing the config at the new name is a way out only for a name the
            // config takes (not one with spaces: an outside trial was sent there).
            let or_set = if crate::ident::Ident::table(other.trim_matches('"')).is_ok() {
                format!(", or set {setting} to {other}")
            } else {
                String::new()
            };
            return Err(ConfigError::invalid(
                setting,
                format!(
                    "the {role} table {table} of dimension `{name}` does not exist, and its index {index} belongs to table {other}: \
                     it looks renamed to {other}. Rename it back (ALTER TABLE {other} RENAME TO {bare}){or_set}; \
                     dimlog creates no new {role} beside it",
                    name = plan.name,
                ),
            )
            .into());
        }
        if !registered {
            continue;
        }
        // The config names another table than the one the dimension was built with.
        let own = sql::statement(backend, "state", "dimension_own_tables", &serde_json::json!({}))?;
        let built_with = conn
            .query_text("reading dimlog_dimensions", &own, &[Param::Text(plan.name.clone())])
            .await?
            .into_iter()
            .next()
            .and_then(|r| r.get(usize::from(role == "dimension")).cloned().flatten());
        if let Some(built_with) = built_with.filter(|b| *b != table.to_string()) {
            return Err(ConfigError::invalid(
                setting,
                format!(
                    "{setting} is {table}, which does not exist, but dimension `{name}` was built with {role} {built_with} \
                     (dimlog_dimensions): set {setting} back to {built_with}. To move the {role}, rename the table \
                     (ALTER TABLE {built_with} RENAME TO …) and set log_table/dimension_table in its dimlog_dimensions row to match; \
                     dimlog creates no new {role} beside it",
                    name = plan.name,
                ),
            )
            .into());
        }
        // The table is elsewhere: moved to another schema, or found only through another
        // role's search_path (an unqualified name).
        let named = sql::statement(backend, "tables", "tables_named", &names)?;
        let elsewhere: Vec<String> = conn
            .query_text(
                "looking for the table in other schemas",
                &named,
                &[Param::Text(bare.to_string())],
            )
            .await?
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .collect();
        if !elsewhere.is_empty() {
            let path = sql::statement(backend, "tables", "search_path", &names)?;
            let path = conn
                .query_text("reading the search_path", &path, &[])
                .await?
                .into_iter()
                .next()
                .and_then(|r| r.into_iter().next().flatten())
                .unwrap_or_default();
            let found: Vec<String> = elsewhere.iter().map(|schema| format!("{schema}.{bare}")).collect();
            let why = if table.schema().is_some() {
                "it looks moved (ALTER TABLE … SET SCHEMA): move it back, or".to_string()
            } else {
                format!(
                    "{setting} names no schema, so each session finds it through its own search_path (here: {path}), \
                     and the session that built the dimension had another one: qualify the name, that is"
                )
            };
            return Err(ConfigError::invalid(
                setting,
                format!(
                    "the {role} table {table} of dimension `{name}` is not where this session looks for it (search_path: {path}), \
                     but {} exists; {why} set {setting} = \"{}\". dimlog creates no new {role} beside it",
                    found.join(", "),
                    found[0],
                    name = plan.name,
                ),
            )
            .into());
        }
        if role == "dimension" && dimension_may_be_missing {
            continue;
        }
        let advice = if role == "log" {
            format!(
                "dimlog does not create an empty log in its place, which would give every key a second current version and lose its history. \
                 Restore it (from a backup, or rename it back), or set target.log to where it is now; to start dimension `{name}` over instead, \
                 drop its dimension and delete its rows from dimlog_dimensions, dimlog_state and dimlog_runs (surrogate keys then start \
                 again at 1: facts holding the old ones must be assigned again)",
                name = plan.name
            )
        } else {
            "a run would write only the keys it touches: run `dimlog rebuild` to build it again, whole, from the log \
             (or set target.dimension to where it is now)"
                .to_string()
        };
        return Err(ConfigError::invalid(
            setting,
            format!(
                "table {table} is registered in dimlog_dimensions as the {role} of dimension `{}` but does not exist; {advice}",
                plan.name
            ),
        )
        .into());
    }
    if registered {
        check_log_complete(conn, plan, false).await?;
    }
    Ok(())
}

/// Refuses a `next_surrogate_key` in `dimlog_dimensions` at or below a surrogate key the
/// dimension holds (an edit by hand): the next load would give new versions keys that
/// belong to other versions. Read through the dimension's primary key, which
/// [`check_tables_present`] has found (a registered dimension that is missing is refused
/// there, for every command but `rebuild`, which allocates no keys).
async fn check_key_counter(conn: &mut Conn, plan: &Plan) -> Result<(), InitError> {
    let dim = &plan.target.dimension;
    let Some((next, _)) = counters(conn, plan).await? else {
        return Ok(());
    };
    let last = serde_json::json!({ "dim": dim.quoted(), "sk": plan.target.surrogate_key.quoted() });
    let held = number(conn, "dimension_last_sk", &last, "checking the surrogate keys").await?;
    if held < next {
        return Ok(());
    }
    // The dimension may have been edited instead: the log (read whole, only in this rare
    // case) says which.
    let in_log = serde_json::json!({ "log": plan.target.log.quoted(), "sk": plan.target.surrogate_key.quoted() });
    let logged = number(conn, "log_last_sk", &in_log, "checking the log's surrogate keys").await?;
    if logged < next {
        return Err(ConfigError::invalid(
            "target.dimension",
            format!(
                "the dimension {} holds surrogate key {held}, which the log {} never gave (its greatest is {logged}): the dimension \
                 was edited by hand. Nothing was done; run `dimlog rebuild` to derive it from the log again",
                plan.target.dimension, plan.target.log
            ),
        )
        .into());
    }
    let held = logged;
    Err(ConfigError::invalid(
        "target.dimension",
        format!(
            "the dimension {} holds surrogate keys up to {held}, but dimlog_dimensions says the next one for dimension `{}` is {next}: \
             the record was changed by hand. The next load would give new versions surrogate keys that other versions hold, so \
             nothing was done: set next_surrogate_key = {} in its dimlog_dimensions row",
            plan.target.dimension,
            plan.name,
            held + 1
        ),
    )
    .into())
}

/// Refuses a log that holds fewer rows than dimlog appended to it: emptied (`TRUNCATE`),
/// replaced by an empty copy, or cut short. Log ids run from 1 without gaps and the
/// record keeps the next one, so the log's newest id says whether its newest rows are
/// there. Loading into such a log would give keys second current versions, and a
/// rebuild from it would empty the dimension, which then holds the only copy of the
/// history: neither is done, and the error says to restore the log.
///
/// Every command checks the newest log id (read through the primary key); `verify` and
/// `rebuild`, which read the whole log anyway, also count its rows (`count_rows`), so
/// rows deleted from the middle are found too.
pub async fn check_log_complete(conn: &mut Conn, plan: &Plan, count_rows: bool) -> Result<(), InitError> {
    let Some((_, next_log_id)) = counters(conn, plan).await? else {
        return Ok(());
    };
    let appended = next_log_id - 1;
    let log = serde_json::json!({ "log": plan.target.log.quoted() });
    let held = number(conn, "log_last_id", &log, "checking the log's newest rows").await?;
    if held > appended {
        return Err(ConfigError::invalid(
            "target.log",
            format!(
                "the log {} holds log ids up to {held}, but dimlog_dimensions says dimension `{}` appended only up to {appended} \
                 (next_log_id {}): the record was changed by hand, or another program wrote the log. The next load would reuse \
                 log ids, so nothing was done: set next_log_id = {} in its dimlog_dimensions row if the log is right",
                plan.target.log,
                plan.name,
                appended + 1,
                held + 1
            ),
        )
        .into());
    }
    let what = if held == 0 && appended > 0 {
        "it is empty (truncated, or replaced by an empty table)".to_string()
    } else if held < appended {
        format!(
            "its newest log id is {held}: rows were deleted (or next_log_id in dimlog_dimensions was raised by hand)"
        )
    } else if count_rows {
        let rows = number(conn, "log_row_count", &log, "counting the log's rows").await?;
        if rows >= appended {
            return Ok(());
        }
        format!("it holds {rows} rows: {} were deleted", appended - rows)
    } else {
        return Ok(());
    };
    Err(ConfigError::invalid(
        "target.log",
        format!(
            "the log {} of dimension `{}` is missing rows: dimlog appended log ids 1 to {appended}, and {what}. \
             The log is the dimension's history: dimlog does not rebuild the dimension from it (a rebuild would drop \
             the dimension's rows that the log lost), and a run stops at a key whose versions it lost (runs do not count \
             the log's rows, so until then other keys still load into it: restore it soon). Restore the log from a backup \
             (the dimension still holds its rows; `dimlog verify` checks them once the log is back), \
             or, to start dimension `{}` over, drop its log and its dimension and delete its rows from dimlog_dimensions, \
             dimlog_state and dimlog_runs (surrogate keys then start again at 1: facts holding the old ones must be assigned again)",
            plan.target.log, plan.name, plan.name
        ),
    )
    .into())
}

/// The one number a `tables` statement returns; 0 when it returns none or NULL (the
/// greatest id of an empty table).
async fn number(conn: &mut Conn, statement: &str, ctx: &serde_json::Value, what: &str) -> Result<i64, DbError> {
    let sql = sql::statement(conn.backend(), "tables", statement, ctx)?;
    Ok(conn
        .query_i64s(what, &sql, &[])
        .await?
        .first()
        .copied()
        .flatten()
        .unwrap_or(0))
}

/// The dimension's counters in `dimlog_dimensions`: the next surrogate key and the next
/// log id (none for a dimension not registered).
async fn counters(conn: &mut Conn, plan: &Plan) -> Result<Option<(i64, i64)>, DbError> {
    let record = sql::statement(conn.backend(), "state", "dimension_get", &serde_json::json!({}))?;
    let rows = conn
        .query_text("reading dimlog_dimensions", &record, &[Param::Text(plan.name.clone())])
        .await?;
    let at = |i: usize| {
        rows.first()
            .and_then(|r| r.get(i).cloned().flatten())
            .and_then(|v| v.parse::<i64>().ok())
    };
    Ok(at(5).zip(at(6)))
}

/// Refuses tables registered to another dimension name: two names on one log would
/// number the same surrogate keys twice and each rebuild would drop the other's rows.
async fn check_tables_unowned(conn: &mut Conn, plan: &Plan) -> Result<(), InitError> {
    let backend = conn.backend();
    let owners = conn
        .query_text(
            "reading which dimension owns which tables",
            &sql::statement(backend, "state", "dimension_tables", &serde_json::json!({}))?,
            &[Param::Text(plan.name.clone())],
        )
        .await?;
    let ours = [
        ("target.log", "log", plan.target.log.to_string()),
        ("target.dimension", "dimension", plan.target.dimension.to_string()),
    ];
    for row in owners {
        let [Some(owner), Some(log), Some(dim)] = &row[..] else {
            continue;
        };
        for (setting, role, table) in &ours {
            for (their_role, theirs) in [("log", log), ("dimension", dim)] {
                if crate::db::same_table(backend, table, theirs) {
                    return Err(ConfigError::invalid(
                        *setting,
                        format!(
                            "table {table} is the {their_role} of dimension `{owner}`, so it cannot also be the {role} of `{}`; \
                             a log or dimension table belongs to one dimension: set `name = \"{owner}\"` to load that dimension, \
                             or give `{}` tables of its own in target.log and target.dimension",
                            plan.name, plan.name
                        ),
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

/// Applies an accepted change inside the run's transaction: adds the new columns to the
/// log and records the new column sets. The dimension is rebuilt afterwards.
pub async fn apply_change(
    conn: &mut Conn,
    plan: &Plan,
    ctx: &SqlContext,
    stored: &DimensionRecord,
    wanted: &DimensionRecord,
    change: &ConfigChange,
) -> Result<(), DbError> {
    for (name, _) in &change.new_log_columns {
        let col = ctx.attr_defs.iter().find(|c| &c.bare == name).cloned();
        let Some(col) = col else { continue };
        let mut c = ctx.clone();
        c.column = Some(col);
        run_named(conn, "tables", &["add_log_column"], &c).await?;
    }
    let mut types = stored.column_types.clone();
    for (n, t) in &wanted.column_types {
        if !types.iter().any(|(s, _)| s == n) {
            types.push((n.clone(), t.clone()));
        }
    }
    let sql = sql::statement(conn.backend(), "tables", "dimension_update", ctx)?;
    conn.execute(
        "recording the new column sets",
        &sql,
        &[
            Param::Text(to_json(&wanted.tracked_columns)),
            Param::Text(to_json(&wanted.type1_with_current())),
            Param::Text(to_json(&types)),
            Param::I64(wanted.hash_version),
            Param::Ts(Micros::from_utc(chrono::Utc::now())),
            Param::Text(plan.name.clone()),
        ],
    )
    .await?;
    Ok(())
}

/// Widens the log's and the dimension's columns whose source type now holds more values
/// with the same text (`int` → `bigint`, `varchar(20)` → `varchar(50)`; see
/// [`crate::record::widening`]), and records the new types, in the caller's transaction:
/// a benign change of type needs no migration. Key columns are never changed here.
async fn widen_columns(
    conn: &mut Conn,
    plan: &Plan,
    stored: &mut DimensionRecord,
    wanted: &DimensionRecord,
) -> Result<(), DbError> {
    use crate::record::{widening, Widening};
    let backend = conn.backend();
    for (name, new) in &wanted.column_types {
        let Some(old) = stored
            .column_types
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
        else {
            continue;
        };
        if wanted.key_columns.contains(name) || widening(backend, &old, new) != Widening::Widens {
            continue;
        }
        tracing::info!("source column `{name}` widened from {old} to {new}: widening it in the log and the dimension");
        retype_column(conn, plan, stored, name, new).await?;
        for (n, t) in stored.column_types.iter_mut() {
            if n == name {
                *t = new.clone();
            }
        }
    }
    Ok(())
}

/// Moves the dimension's column `column` (and its Type 6 twin `current_<column>`, when
/// `current_twin`) to `new_type`, where the engine can change a declared type (SQLite's
/// columns hold any type: nothing to do), in the caller's transaction. A rebuild in
/// place keeps the dimension's columns as they are, so a retype must reach them here.
async fn retype_dimension_column(
    conn: &mut Conn,
    plan: &Plan,
    column: &str,
    new_type: &str,
    current_twin: bool,
) -> Result<(), DbError> {
    if !conn.dialect().alters_tables() {
        return Ok(());
    }
    let mut columns = vec![column.to_string()];
    if current_twin {
        columns.push(format!("current_{column}"));
    }
    for c in columns {
        let ctx = serde_json::json!({
            "dim": plan.target.dimension.quoted(),
            "column": { "name": crate::context::quoted_name(c.clone()), "target_type": new_type },
        });
        let alter = sql::statement(conn.backend(), "tables", "retype_dimension_column", &ctx)?;
        conn.execute_script(&format!("changing the type of the dimension's column {c}"), &alter)
            .await?;
    }
    Ok(())
}

/// Moves the log's and the dimension's column `column` (and its Type 6 twin) to the
/// source's new type `new_type` and records that type in `dimlog_dimensions`, in the
/// caller's transaction: the migration a retyped source column asks for. An engine that
/// cannot change a declared type (SQLite) only records it: its columns hold values of any
/// type. Returns whether the log was altered.
pub async fn retype_column(
    conn: &mut Conn,
    plan: &Plan,
    stored: &DimensionRecord,
    column: &str,
    new_type: &str,
) -> Result<bool, DbError> {
    let retype = serde_json::json!({
        "log": plan.target.log.quoted(),
        "column": crate::context::quoted_name(column.to_string()),
        "new_type": new_type,
    });
    retype_dimension_column(
        conn,
        plan,
        column,
        new_type,
        stored.current_columns.iter().any(|c| c == column),
    )
    .await?;
    let alter = sql::statement(conn.backend(), "tables", "retype_log_column", &retype)?;
    let altered = !alter.trim().is_empty();
    if altered {
        conn.execute_script(&format!("changing the type of the log's column {column}"), &alter)
            .await?;
    }
    let types: Vec<(String, String)> = stored
        .column_types
        .iter()
        .map(|(n, t)| (n.clone(), if n == column { new_type.to_string() } else { t.clone() }))
        .collect();
    let sql = sql::statement(conn.backend(), "tables", "dimension_update", &serde_json::json!({}))?;
    conn.execute(
        "recording the column's new type",
        &sql,
        &[
            Param::Text(to_json(&stored.tracked_columns)),
            Param::Text(to_json(&stored.type1_with_current())),
            Param::Text(to_json(&types)),
            Param::I64(stored.hash_version),
            Param::Ts(Micros::from_utc(chrono::Utc::now())),
            Param::Text(plan.name.clone()),
        ],
    )
    .await?;
    Ok(altered)
}

/// Why a dimension's tables cannot be distributed ([`distribute`]), in the user's terms.
#[derive(Debug, thiserror::Error)]
#[error("dimension `{dimension}` cannot be distributed: {reason}")]
pub struct NotDistributable {
    /// The config's `name`.
    pub dimension: String,
    /// What stands in the way, and what to do about it.
    pub reason: String,
}

/// A failed [`distribute`].
#[derive(Debug, thiserror::Error)]
pub enum DistributeError {
    /// A database error.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Something about the tables stands in the way.
    #[error(transparent)]
    Not(#[from] NotDistributable),
}

/// What [`distribute`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Distribution {
    /// False when both tables were distributed already (nothing was done).
    pub converted: bool,
    /// The distribution column.
    pub column: String,
    /// Shards per table.
    pub shards: i64,
}

/// Turns a dimension's log and dimension, local tables on a Citus coordinator (loaded
/// before Citus was there, or before dimlog distributed tables), into distributed tables
/// colocated by the key, as a first run on Citus would have made them: primary keys that
/// include the key, then `create_distributed_table`, which moves the rows to the shards.
/// Runs in the caller's transaction, on a connection speaking Citus
/// ([`Conn::speak_citus`]). A key of several columns is distributed by its hash, which
/// both tables get first. Refuses, changing nothing, what Citus would refuse: a foreign
/// key to or from either table, a unique index without the key, one table distributed
/// and not the other.
pub async fn distribute(conn: &mut Conn, plan: &Plan, ctx: &SqlContext) -> Result<Distribution, DistributeError> {
    let backend = conn.backend();
    let refuse = |reason: String| {
        DistributeError::Not(NotDistributable {
            dimension: plan.name.clone(),
            reason,
        })
    };
    let (log, dim) = (plan.target.log.to_string(), plan.target.dimension.to_string());
    let tables = [Param::Text(ctx.log.clone()), Param::Text(ctx.dim.clone())];
    let statement = |name: &str| sql::statement(backend, "tables", name, ctx);
    let flags = conn
        .query_i64s(
            "finding whether the tables are distributed",
            &statement("distributed_tables")?,
            &tables,
        )
        .await?;
    let flag = |i: usize| flags.get(i).copied().flatten().unwrap_or(0) > 0;
    // The key column, or the hash of a key of several (`keys[0]`, see SqlContext::keys).
    let column = crate::db::citus::bare(&ctx.keys[0]);
    let shard_count = async |conn: &mut Conn| -> Result<i64, DbError> {
        conn.query_count(
            "counting the log's shards",
            &sql::statement(backend, "tables", "shard_count", ctx)?,
            &tables[..1],
        )
        .await
    };
    match (flag(0), flag(1)) {
        (true, true) => {
            // Distributed alike, or not: then named with the way out, not "nothing to do".
            conn.check_layout(&plan.name, (&ctx.log, &ctx.dim), &ctx.key_names)
                .await?;
            let shards = shard_count(conn).await?;
            return Ok(Distribution {
                converted: false,
                column,
                shards,
            });
        }
        (false, false) => {}
        (log_done, _) => {
            let (done, not) = if log_done { (&log, &dim) } else { (&dim, &log) };
            return Err(refuse(format!(
                "{done} is a distributed table and {not} is not; dimlog distributes both or neither. \
                 Undo it with SELECT undistribute_table('{done}'), then distribute again"
            )));
        }
    }
    if !crate::rights::owns_tables(conn, &ctx.log, &ctx.dim).await? {
        return Err(refuse(format!(
            "the role of the target's URL does not own {log} and {dim}, and only their owner may make their primary keys \
             again and distribute them; run it as their owner"
        )));
    }
    let foreign = conn
        .query_text(
            "finding foreign keys of the tables",
            &statement("foreign_keys")?,
            &tables,
        )
        .await?;
    if !foreign.is_empty() {
        let names: Vec<String> = foreign
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|v| v.unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        return Err(refuse(format!(
            "foreign keys tie the tables to others ({}); Citus keeps a foreign key only between colocated distributed \
             tables or to a reference table: drop them, distribute, and add them back between tables distributed alike",
            names.join("; ")
        )));
    }
    if ctx.key_hash {
        // Both tables get the key's hash, as a first run on Citus makes them, and dimlog's
        // key indexes are made again with it (a distributed table's unique index holds
        // its distribution column); the refusals below undo it with the transaction.
        let hash = serde_json::json!({
            "log": ctx.log, "dim": ctx.dim, "column": ctx.keys[0],
            "hash": crate::db::citus::key_hash_of(&ctx.key_names),
            "indexes": [&ctx.secondary_indexes[0], &ctx.secondary_indexes[2]],
        });
        let sql = sql::statement(backend, "tables", "add_key_hash", &hash)?;
        conn.execute_script("adding the key's hash to the log and the dimension", &sql)
            .await?;
    }
    let mut unique_params = tables.to_vec();
    unique_params.push(Param::Text(column.clone()));
    let unique = conn
        .query_text(
            "finding unique indexes without the key",
            &statement("unique_without_key")?,
            &unique_params,
        )
        .await?;
    if !unique.is_empty() {
        let names: Vec<String> = unique
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .collect();
        return Err(refuse(format!(
            "unique indexes without the key column {column} ({}): a distributed table's unique indexes must include \
             its distribution column; drop them or add {column} to them, then distribute",
            names.join(", ")
        )));
    }
    for (table, column) in [(&ctx.log, "log_id".to_string()), (&ctx.dim, ctx.sk.clone())] {
        let find = sql::statement(backend, "tables", "primary_key_name", &serde_json::json!({}))?;
        let rows = conn
            .query_text("finding a primary key", &find, &[Param::Text(table.clone())])
            .await?;
        let pk_name = rows.into_iter().next().and_then(|r| r.into_iter().next().flatten());
        let name = match pk_name {
            Some(name) => {
                let quoted = format!("\"{}\"", name.replace('"', "\"\""));
                let pk = (table.clone(), quoted.clone(), column.clone());
                let sql = sql::statement(backend, "tables", "drop_primary_key", &pk_context(&pk, &ctx.keys))?;
                conn.execute("tables/drop_primary_key", &sql, &[]).await?;
                quoted
            }
            None if table == &ctx.log => format!("\"{}_pkey\"", plan.target.log.name().replace('"', "\"\"")),
            None => ctx.dim_pk.clone(),
        };
        let pk = (table.clone(), name, column);
        let sql = sql::statement(backend, "tables", "add_primary_key", &pk_context(&pk, &ctx.keys))?;
        conn.execute("tables/add_primary_key", &sql, &[]).await?;
    }
    run_named(conn, "tables", &["distribute_log", "distribute_dimension"], ctx).await?;
    if ctx.key_hash {
        run_named(conn, "tables", &["log_index", "dimension_index"], ctx).await?;
    }
    let shards = shard_count(conn).await?;
    Ok(Distribution {
        converted: true,
        column,
        shards,
    })
}
