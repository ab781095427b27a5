//! The target's tables: dimlog's own (state, runs, dimensions), the version log and the
//! dimension, and the template context every target statement renders with.
//!
//! `init` is idempotent and runs before every load, so `dimlog run` on an empty target
//! just works. It records the column sets a dimension was built with, so a later config
//! change is noticed instead of silently re-versioning history.

use crate::config::{Backend, ConfigError, History, Plan};
use crate::db::{sql, Conn, DbError, Param};
use crate::detect::HASH_VERSION;
use crate::extract::{Col, Layout};
use crate::ident::Ident;
use crate::ts::{Micros, FAR_FUTURE};
use serde::Serialize;

/// Everything a target template may refer to: quoted identifiers and dimlog's literals.
#[derive(Clone, Debug, Serialize)]
pub struct SqlContext {
    /// The version log.
    pub log: String,
    /// The dimension.
    pub dim: String,
    /// The dimension's bare name (for `RENAME TO`).
    pub dim_bare: String,
    /// The swap table of a full rebuild.
    pub dim_new: String,
    /// The dimension's primary-key constraint.
    pub dim_pk: String,
    /// The swap table's primary-key constraint.
    pub dim_new_pk: String,
    /// Schema-qualified form of `dim_new_pk`, for `ALTER INDEX`.
    pub dim_new_pk_qualified: String,
    /// Index names.
    pub log_index: String,
    /// Index on load_id ("what changed since load N").
    pub log_load_index: String,
    /// Index on (key, valid_from).
    pub dim_index: String,
    /// Partial index on current rows.
    pub dim_current_index: String,
    /// The surrogate key column.
    pub sk: String,
    /// Key columns, quoted.
    pub keys: Vec<String>,
    /// Type 2 columns, quoted.
    pub cols: Vec<String>,
    /// Type 1 columns, quoted.
    pub t1: Vec<String>,
    /// Type 2 then Type 1.
    pub attrs: Vec<String>,
    /// Key columns with target types.
    pub key_defs: Vec<Col>,
    /// Attribute columns with target types.
    pub attr_defs: Vec<Col>,
    /// Tie-break column.
    pub tiebreak: Option<Col>,
    /// `source.history = "all"`.
    pub history_all: bool,
    /// The far-future `valid_to` literal.
    pub sentinel: String,
}

fn quoted_name(name: String) -> String {
    Ident::column(&name)
        .map(|i| i.quoted())
        .unwrap_or_else(|_| format!("\"{name}\""))
}

impl SqlContext {
    /// Builds the context of one dimension on one backend.
    pub fn new(plan: &Plan, layout: &Layout, backend: Backend) -> SqlContext {
        let t = &plan.target;
        let bare = t.dimension.name().to_string();
        let log_bare = t.log.name().to_string();
        let dim_new = t.dimension.with_suffix("_dimlog_new");
        let new_pk = format!("{bare}_dimlog_new_pkey");
        let new_pk_ident = match t.dimension.schema() {
            Some(s) => Ident::table(&format!("{s}.{new_pk}")),
            None => Ident::table(&new_pk),
        };
        let q = |c: &Col| c.name.clone();
        SqlContext {
            log: t.log.quoted(),
            dim: t.dimension.quoted(),
            dim_bare: quoted_name(bare.clone()),
            dim_new: dim_new.quoted(),
            dim_pk: quoted_name(format!("{bare}_pkey")),
            dim_new_pk: quoted_name(new_pk.clone()),
            dim_new_pk_qualified: new_pk_ident.map(|i| i.quoted()).unwrap_or_default(),
            log_index: quoted_name(format!("{log_bare}_key_idx")),
            log_load_index: quoted_name(format!("{log_bare}_load_idx")),
            dim_index: quoted_name(format!("{bare}_key_idx")),
            dim_current_index: quoted_name(format!("{bare}_current_idx")),
            sk: t.surrogate_key.quoted(),
            keys: layout.keys.iter().map(q).collect(),
            cols: layout.tracked.iter().map(q).collect(),
            t1: layout.type1.iter().map(q).collect(),
            attrs: layout.attrs().into_iter().map(q).collect(),
            key_defs: layout.keys.clone(),
            attr_defs: layout.attrs().into_iter().cloned().collect(),
            tiebreak: layout.tiebreak.clone(),
            history_all: plan.source.history == History::All,
            sentinel: match backend {
                Backend::Postgres => format!("'{}'::timestamptz", FAR_FUTURE.to_text()),
                Backend::Sqlite => format!("'{}'", FAR_FUTURE.to_text()),
            },
        }
    }

    /// The same context with the dimension replaced by its swap table (full rebuild).
    pub fn for_swap_table(&self) -> SqlContext {
        let mut c = self.clone();
        c.dim = self.dim_new.clone();
        c.dim_pk = self.dim_new_pk.clone();
        c
    }
}

/// Runs every statement of a template, in order.
pub async fn run_all<C: Serialize>(conn: &mut Conn, family: &str, ctx: &C) -> Result<(), DbError> {
    let rendered = sql::render(conn.backend(), family, ctx)?;
    for (name, body) in sql::split(&rendered) {
        conn.execute(&format!("{family}/{name}"), &body, &[]).await?;
    }
    Ok(())
}

/// Runs the named statements of a template, in the given order.
pub async fn run_named<C: Serialize>(conn: &mut Conn, family: &str, names: &[&str], ctx: &C) -> Result<(), DbError> {
    for name in names {
        let body = sql::statement(conn.backend(), family, name, ctx)?;
        conn.execute(&format!("{family}/{name}"), &body, &[]).await?;
    }
    Ok(())
}

/// What `dimlog_dimensions` remembers about a dimension.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DimensionRecord {
    /// Key column names.
    pub key_columns: Vec<String>,
    /// Type 2 column names, in hash order.
    pub tracked_columns: Vec<String>,
    /// Type 1 column names.
    pub type1_columns: Vec<String>,
    /// Column name → target type.
    pub column_types: Vec<(String, String)>,
    /// Row-hash encoding version.
    pub hash_version: i64,
}

impl DimensionRecord {
    /// What the current config and source say the record should be.
    pub fn from_layout(layout: &Layout) -> DimensionRecord {
        let names = |cols: &[Col]| cols.iter().map(|c| c.bare.clone()).collect::<Vec<_>>();
        DimensionRecord {
            key_columns: names(&layout.keys),
            tracked_columns: names(&layout.tracked),
            type1_columns: names(&layout.type1),
            column_types: layout
                .keys
                .iter()
                .chain(layout.attrs())
                .map(|c| (c.bare.clone(), c.target_type.clone()))
                .collect(),
            hash_version: HASH_VERSION,
        }
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
    let ctx = SqlContext::new(plan, layout, conn.backend());
    let backend = conn.backend();
    conn.begin().await?;
    let result: Result<DimensionRecord, InitError> = async {
        run_all(conn, "init", &ctx).await?;
        run_named(
            conn,
            "tables",
            &[
                "log",
                "log_index",
                "log_load_index",
                "dimension",
                "dimension_index",
                "dimension_current_index",
            ],
            &ctx,
        )
        .await?;
        let wanted = DimensionRecord::from_layout(layout);
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
                Param::Text(to_json(&wanted.type1_columns)),
                Param::Text(to_json(&wanted.column_types)),
                Param::I64(wanted.hash_version),
                Param::Ts(Micros::from_utc(chrono::Utc::now())),
            ],
        )
        .await?;
        let stored = read_record(conn, plan).await?.expect("registered above");
        check_compatible(&stored, &wanted)?;
        Ok(stored)
    }
    .await;
    match result {
        Ok(r) => {
            conn.commit().await?;
            Ok(r)
        }
        Err(e) => {
            conn.rollback().await;
            Err(e)
        }
    }
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("plain data serialises")
}

/// Reads the stored record of the plan's dimension.
pub async fn read_record(conn: &mut Conn, plan: &Plan) -> Result<Option<DimensionRecord>, DbError> {
    let sql = sql::statement(conn.backend(), "state", "dimension_get", &serde_json::json!({}))?;
    let rows = conn
        .query_text("reading dimlog_dimensions", &sql, &[Param::Text(plan.name.clone())])
        .await?;
    let Some(r) = rows.into_iter().next() else {
        return Ok(None);
    };
    let parse = |v: &Option<String>| serde_json::from_str(v.as_deref().unwrap_or("[]")).unwrap_or_default();
    Ok(Some(DimensionRecord {
        key_columns: parse(&r[0]),
        tracked_columns: parse(&r[1]),
        type1_columns: parse(&r[2]),
        column_types: serde_json::from_str(r[3].as_deref().unwrap_or("[]")).unwrap_or_default(),
        hash_version: r[4].as_deref().and_then(|v| v.parse().ok()).unwrap_or(0),
    }))
}

fn check_compatible(stored: &DimensionRecord, wanted: &DimensionRecord) -> Result<(), ConfigError> {
    if stored.key_columns != wanted.key_columns {
        return Err(ConfigError::invalid(
            "source.key",
            format!(
                "the dimension was built with key {:?}, the config says {:?}; a new key needs a new dimension (change `name` and the target tables)",
                stored.key_columns, wanted.key_columns
            ),
        ));
    }
    if stored.tracked_columns != wanted.tracked_columns || stored.type1_columns != wanted.type1_columns {
        return Err(ConfigError::invalid(
            "track.columns",
            format!(
                "the dimension was built tracking {:?} (type1 {:?}), the config says {:?} (type1 {:?}); restore the old column lists, or load into a new dimension",
                stored.tracked_columns, stored.type1_columns, wanted.tracked_columns, wanted.type1_columns
            ),
        ));
    }
    for (name, ty) in &wanted.column_types {
        if let Some((_, old)) = stored.column_types.iter().find(|(n, _)| n == name) {
            if !old.eq_ignore_ascii_case(ty) {
                return Err(ConfigError::invalid(
                    "track.columns",
                    format!("source column `{name}` changed type from {old} to {ty}; alter the log and dimension columns to {ty} (ALTER TABLE … ALTER COLUMN {name} TYPE {ty}), then update dimlog_dimensions.column_types"),
                ));
            }
        }
    }
    Ok(())
}
