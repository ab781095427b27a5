//! What `dimlog_dimensions` remembers about a dimension: the column sets and types it was
//! built with, read back to take a layout from (commands that only read create nothing:
//! a target where it was never loaded is [`NotLoaded`]) and compared with the config, so
//! that a config change is noticed instead of silently re-versioning history.

use crate::config::{Backend, ConfigError, NextStep, Plan};
use crate::context::quoted_name;
use crate::db::types::ColumnKind;
use crate::db::{sql, Conn, DbError, Param};
use crate::hash::HASH_VERSION;
use crate::ident::Ident;
use crate::layout::{Col, CurrentCol, Layout};
use serde::Serialize;

/// What `dimlog_dimensions` remembers about a dimension.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DimensionRecord {
    /// Key column names.
    pub key_columns: Vec<String>,
    /// Type 2 column names, in hash order.
    pub tracked_columns: Vec<String>,
    /// Type 1 column names.
    pub type1_columns: Vec<String>,
    /// Type 6 twins (Type 2 columns shown with their current value).
    pub current_columns: Vec<String>,
    /// Column name → target type of every column the log has ever held (a column
    /// dropped from tracking keeps its history, so it stays here).
    pub column_types: Vec<(String, String)>,
    /// Row-hash encoding version.
    pub hash_version: i64,
}

impl DimensionRecord {
    /// What the current config and source say the record should be.
    #[doc(hidden)]
    pub fn from_layout(layout: &Layout) -> DimensionRecord {
        let names = |cols: &[Col]| cols.iter().map(|c| c.bare.clone()).collect::<Vec<_>>();
        DimensionRecord {
            key_columns: names(&layout.keys),
            tracked_columns: names(&layout.tracked),
            type1_columns: names(&layout.type1),
            current_columns: layout
                .current
                .iter()
                .map(|c| c.bare.trim_start_matches("current_").to_string())
                .collect(),
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

/// A dimension the target has no record of: it was never loaded there (or the config
/// names another dimension or target).
#[derive(Debug, thiserror::Error)]
#[error("dimension `{dimension}` has not been loaded yet: {missing}")]
pub struct NotLoaded {
    /// The config's `name`.
    pub dimension: String,
    /// What the target lacks.
    pub missing: Missing,
}

/// What a target without the dimension lacks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Missing {
    /// The SQLite file of `target.url` does not exist.
    #[error("there is no SQLite database at {} (target.url)", .0.display())]
    Database(std::path::PathBuf),
    /// The target has none of dimlog's tables.
    #[error("the target {0} has no dimlog tables")]
    Tables(String),
    /// dimlog's tables hold other dimensions only.
    #[error("the target {target} holds {}", others_text(.others))]
    Dimension {
        /// The target's URL, without its password.
        target: String,
        /// The dimensions it does hold.
        others: Vec<String>,
    },
}

fn others_text(others: &[String]) -> String {
    if others.is_empty() {
        "no dimension yet".into()
    } else {
        format!("only dimension(s) {}", others.join(", "))
    }
}

/// Why the stored record of a dimension could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// A database error.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The dimension was never loaded into this target.
    #[error(transparent)]
    NotLoaded(#[from] NotLoaded),
    /// The config does not fit the tables the dimension was built with.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The stored record of the plan's dimension, read without creating or writing anything;
/// [`NotLoaded`] when the target has none, saying what it lacks.
pub async fn existing_record(conn: &mut Conn, plan: &Plan) -> Result<DimensionRecord, RecordError> {
    let not_loaded = |missing| NotLoaded {
        dimension: plan.name.clone(),
        missing,
    };
    let backend = conn.backend();
    let exists = sql::statement(backend, "state", "tables_exist", &serde_json::json!({}))?;
    let found = conn.query_count("looking for dimlog's tables", &exists, &[]).await?;
    if found == 0 {
        return Err(not_loaded(Missing::Tables(plan.target.url.redacted())).into());
    }
    if let Some(record) = read_record(conn, plan).await? {
        return Ok(record);
    }
    let names = sql::statement(backend, "state", "dimension_names", &serde_json::json!({}))?;
    let others = conn
        .query_text("listing the target's dimensions", &names, &[])
        .await?
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect();
    Err(not_loaded(Missing::Dimension {
        target: plan.target.url.redacted(),
        others,
    })
    .into())
}

/// The config's `target.surrogate_key` against the column the dimension was built with
/// (its tables have that one; a renamed setting would be read as a column that does not
/// exist, by SQLite as a string): the refusal, when they differ.
pub async fn surrogate_key_refusal(conn: &mut Conn, plan: &Plan) -> Result<Option<ConfigError>, DbError> {
    let sql = sql::statement(
        conn.backend(),
        "state",
        "dimension_surrogate_key",
        &serde_json::json!({}),
    )?;
    let built_with = conn
        .query_text("reading dimlog_dimensions", &sql, &[Param::Text(plan.name.clone())])
        .await?
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten());
    let configured = plan.target.surrogate_key.name();
    Ok(built_with.filter(|built| !built.eq_ignore_ascii_case(configured)).map(|built| {
        ConfigError::invalid(
            "target.surrogate_key",
            format!(
                "is `{configured}`, but dimension `{}` was built with surrogate key column `{built}`, which its log and \
                 dimension hold (and facts may hold its values): set surrogate_key = \"{built}\" again; a surrogate key \
                 column is not renamed",
                plan.name
            ),
        )
    }))
}

/// The source column the dimension's incremental watermark is kept on, as
/// `dimlog_dimensions` records it (`None`: not recorded yet, a dimension registered before
/// schema version 2). Only after `init`'s migration: a command that only reads never asks.
pub async fn recorded_change_column(conn: &mut Conn, plan: &Plan) -> Result<Option<String>, DbError> {
    let sql = sql::statement(
        conn.backend(),
        "state",
        "dimension_change_column",
        &serde_json::json!({}),
    )?;
    Ok(conn
        .query_text("reading dimlog_dimensions", &sql, &[Param::Text(plan.name.clone())])
        .await?
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten()))
}

/// [`recorded_change_column`] for the commands that only read, on a target at any schema
/// version: `None` where the tables predate the column (asked only at version 2 or later,
/// so no failed statement spoils a transaction) or it cannot be read.
pub async fn change_column_if_recorded(conn: &mut Conn, plan: &Plan) -> Option<String> {
    let version = crate::db::migrate::read_version(conn).await.ok().flatten()?;
    if version < 2 {
        return None;
    }
    recorded_change_column(conn, plan).await.ok().flatten()
}

/// Records `source.updated_at` as the column the dimension is stamped by, where none is recorded yet.
pub async fn record_change_column(conn: &mut Conn, plan: &Plan) -> Result<(), DbError> {
    let sql = sql::statement(
        conn.backend(),
        "state",
        "dimension_record_change_column",
        &serde_json::json!({}),
    )?;
    conn.execute(
        "recording the change column",
        &sql,
        &[
            Param::Text(plan.name.clone()),
            Param::Text(plan.source.updated_at.name().to_string()),
        ],
    )
    .await
    .map(drop)
}

/// Whether `source.updated_at` names another column than `recorded`, the one the
/// watermark was kept on (column names compare regardless of case, as everywhere).
pub fn change_column_switched(plan: &Plan, recorded: Option<&str>) -> bool {
    recorded.is_some_and(|r| !r.eq_ignore_ascii_case(plan.source.updated_at.name()))
}

/// The refusal of a run whose `source.updated_at` names another column than `recorded`,
/// the one the dimension was built with. Its versions' `valid_from` and its watermark are
/// times of that column: versions stamped by another clock would slot among them by a
/// different time (a change read later may land before the current version, as a late
/// one, and never become current), and a window from the watermark would miss rows. No
/// run mends that, so none is let through: a column only renamed at the source is read
/// under the recorded name, and another clock is another dimension.
pub fn change_column_refusal(plan: &Plan, recorded: &str) -> ConfigError {
    let configured = plan.source.updated_at.name();
    ConfigError::invalid(
        "source.updated_at",
        format!(
            "is `{configured}`, but dimension `{}` was built with versions stamped by column `{recorded}`: its \
             valid_from times and its watermark are times of `{recorded}`, and versions stamped by another column \
             would be placed among them by another clock (a change read later could land before the current \
             version and never become current), so no run is made. If the source only renamed `{recorded}` to \
             `{configured}` (the same values), read it under the name the dimension knows: \
             source.query = \"SELECT …, {configured} AS {recorded} FROM …\" with updated_at = \"{recorded}\". \
             Otherwise it is another dimension: give it another `name` and target tables, or set \
             updated_at = \"{recorded}\" again",
            plan.name
        ),
    )
}

/// The refusal of a run of a dimension loaded by a dimlog that did not record its change
/// column (before schema version 2), whose watermark is later than every value of the
/// configured one (`newest`): the watermark was kept on another column.
pub fn unrecorded_change_column_refusal(
    plan: &Plan,
    watermark: crate::ts::Micros,
    newest: Option<crate::ts::Micros>,
) -> ConfigError {
    let configured = plan.source.updated_at.name();
    ConfigError::NeedsStep {
        setting: "source.updated_at".into(),
        message: format!(
            "is `{configured}`, whose newest value in the source is {}, but the watermark of dimension `{}` is {}: it \
             was kept on another column (an older dimlog did not record which), and a window from it would read none \
             of the rows that changed; nothing was read or written. Set updated_at to the column the dimension was \
             loaded with; if it is `{configured}` (its newest rows were deleted, say), load once reading the whole \
             source, which records it",
            newest.map_or_else(|| "none".to_string(), |n| n.to_text()),
            plan.name,
            watermark.to_text()
        ),
        step: NextStep::FullRefresh,
    }
}

/// [`NotLoaded`] for a target whose SQLite file does not exist.
pub fn not_loaded_file(plan: &Plan, path: std::path::PathBuf) -> NotLoaded {
    NotLoaded {
        dimension: plan.name.clone(),
        missing: Missing::Database(path),
    }
}

/// Checks, without creating or writing anything, that the dimension is registered and
/// that a layout read from the source fits the record: same key, same column types, and
/// no change of the column sets (which only `run` may migrate).
pub async fn check_registered(conn: &mut Conn, plan: &Plan, layout: &Layout) -> Result<DimensionRecord, RecordError> {
    let stored = existing_record(conn, plan).await?;
    if let Some(refusal) = surrogate_key_refusal(conn, plan).await? {
        return Err(refusal.into());
    }
    let wanted = DimensionRecord::from_layout(layout);
    check_compatible(&stored, &wanted, plan, conn.backend())?;
    if let Some(c) = ConfigChange::between(&stored, &wanted) {
        return Err(c.refusal().into());
    }
    Ok(stored)
}

impl DimensionRecord {
    /// The layout of the dimension's tables as this record describes them (the key,
    /// Type 2, Type 1 and `current_<col>` columns with their target types), for commands
    /// that read the target without the source. The config must name the same key; its
    /// column lists may have changed since (see [`DimensionRecord::pending_change`]): the
    /// tables keep the recorded ones until a run migrates them. A layout made here has no
    /// tie-break column and does not know the change column's kind: it cannot stage rows.
    #[doc(hidden)]
    pub fn layout(&self, plan: &Plan, backend: Backend) -> Result<Layout, ConfigError> {
        let configured: Vec<String> = plan.source.key.iter().map(|k| k.name().to_string()).collect();
        if configured != self.key_columns {
            return Err(ConfigError::invalid(
                "source.key",
                key_refusal(&self.key_columns, &configured),
            ));
        }
        let col = |name: &String| -> Result<Col, ConfigError> {
            let ident = Ident::column(name).map_err(|e| {
                ConfigError::invalid(
                    "target.dimension",
                    format!("dimlog_dimensions records a column `{name}` that is not a valid name ({e})"),
                )
            })?;
            let target_type = self
                .column_types
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.clone())
                .unwrap_or_else(|| crate::db::type_of_kind(backend, ColumnKind::Text).to_string());
            Ok(Col {
                name: ident.quoted(),
                bare: name.clone(),
                kind: crate::db::kind_of_type(backend, &target_type),
                target_type,
            })
        };
        let cols = |names: &[String]| names.iter().map(col).collect::<Result<Vec<_>, _>>();
        let tracked = cols(&self.tracked_columns)?;
        let current = self
            .current_columns
            .iter()
            .filter_map(|c| tracked.iter().find(|t| &t.bare == c))
            .map(|t| {
                let bare = format!("current_{}", t.bare);
                CurrentCol {
                    source: t.name.clone(),
                    name: quoted_name(bare.clone()),
                    bare,
                    target_type: t.target_type.clone(),
                }
            })
            .collect();
        Ok(Layout {
            keys: cols(&self.key_columns)?,
            tracked,
            type1: cols(&self.type1_columns)?,
            current,
            tiebreak: None,
            updated_at_kind: ColumnKind::TimestampTz,
            unique_key: false,
            unique_as_read: false,
        })
    }

    /// The change of column sets the config asks for and a run has not applied yet
    /// (`dimlog run --accept-config-change` applies it), from the config's names alone.
    #[doc(hidden)]
    pub fn pending_change(&self, plan: &Plan) -> Option<ConfigChange> {
        let names = |ids: &[Ident]| ids.iter().map(|c| c.name().to_string()).collect::<Vec<_>>();
        let wanted = DimensionRecord {
            key_columns: names(&plan.source.key),
            tracked_columns: names(&plan.tracked),
            type1_columns: names(&plan.type1),
            current_columns: names(&plan.current),
            column_types: self.column_types.clone(),
            hash_version: self.hash_version,
        };
        ConfigChange::between(self, &wanted)
    }
}

fn key_refusal(stored: &[String], configured: &[String]) -> String {
    format!(
        "the dimension was built with key {stored:?}, the config says {configured:?}; a new key needs a new dimension (change `name` and the target tables)"
    )
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("plain data serialises")
}

/// Reads the stored record of the plan's dimension.
pub async fn read_record(conn: &mut Conn, plan: &Plan) -> Result<Option<DimensionRecord>, DbError> {
    let sql = sql::statement(conn.backend(), "state", "dimension_get", &serde_json::json!({}))?;
    let what = "reading dimlog_dimensions";
    let rows = conn
        .query_records(what, &sql, &[Param::Text(plan.name.clone())])
        .await?;
    let Some(r) = rows.into_iter().next() else {
        return Ok(None);
    };
    // The column lists are JSON written by dimlog; text it cannot read is named.
    let json = |column: &str| -> Result<serde_json::Value, DbError> {
        let text = r.text(column)?;
        serde_json::from_str(&text).map_err(|e| DbError::Query {
            what: what.into(),
            source: sqlx::Error::Decode(format!("column {column}: {e}").into()),
        })
    };
    let list = |column: &str| -> Result<Vec<String>, DbError> {
        serde_json::from_value(json(column)?).map_err(|e| DbError::Query {
            what: what.into(),
            source: sqlx::Error::Decode(format!("column {column}: {e}").into()),
        })
    };
    let type1 = list("type1_columns")?;
    Ok(Some(DimensionRecord {
        key_columns: list("key_columns")?,
        tracked_columns: list("tracked_columns")?,
        type1_columns: type1.iter().filter(|c| !c.starts_with("current:")).cloned().collect(),
        current_columns: type1
            .iter()
            .filter_map(|c| c.strip_prefix("current:").map(String::from))
            .collect(),
        column_types: serde_json::from_value(json("column_types")?).map_err(|e| DbError::Query {
            what: what.into(),
            source: sqlx::Error::Decode(format!("column column_types: {e}").into()),
        })?,
        hash_version: r.int("hash_version")?,
    }))
}

pub(crate) fn check_compatible(
    stored: &DimensionRecord,
    wanted: &DimensionRecord,
    plan: &Plan,
    backend: Backend,
) -> Result<(), ConfigError> {
    if stored.key_columns != wanted.key_columns {
        return Err(ConfigError::invalid(
            "source.key",
            key_refusal(&stored.key_columns, &wanted.key_columns),
        ));
    }
    for (name, ty) in &wanted.column_types {
        if let Some((_, old)) = stored.column_types.iter().find(|(n, _)| n == name) {
            let benign = !wanted.key_columns.contains(name) && widening(backend, old, ty) != Widening::NotBenign;
            if !same_type(backend, old, ty) && !benign {
                let setting = if wanted.key_columns.contains(name) {
                    "source.key"
                } else if wanted.type1_columns.contains(name) {
                    "track.type1"
                } else {
                    "track.columns"
                };
                return Err(ConfigError::NeedsStep {
                    setting: setting.to_string(),
                    message: retype_refusal(plan, backend, name, old, ty),
                    step: NextStep::MigrateColumn { column: name.clone() },
                });
            }
        }
    }
    Ok(())
}

/// Whether two names of a column's type name one type: PostgreSQL's aliases (`int8` and
/// `bigint`, as a `source.query`'s driver and a `source.table`'s catalog name them), in
/// any case.
pub(crate) fn same_type(backend: Backend, a: &str, b: &str) -> bool {
    if !backend.dialect().alters_tables() {
        return a.eq_ignore_ascii_case(b);
    }
    fn canonical(t: &str) -> String {
        let t = t.trim().to_ascii_lowercase();
        let alias = |name: &str| {
            match name {
                "int8" => "bigint",
                "int4" | "int" => "integer",
                "int2" => "smallint",
                "float8" => "double precision",
                "float4" => "real",
                "bool" => "boolean",
                "varchar" => "character varying",
                "bpchar" | "char" => "character",
                "decimal" => "numeric",
                "timestamptz" => "timestamp with time zone",
                "timestamp" => "timestamp without time zone",
                "timetz" => "time with time zone",
                "time" => "time without time zone",
                "varbit" => "bit varying",
                other => other,
            }
            .to_string()
        };
        // A modifier stays: `varchar(20)` is `character varying(20)`.
        match t.split_once('(') {
            Some((name, rest)) => format!("{}({rest}", alias(name.trim())),
            None => alias(&t),
        }
    }
    canonical(a) == canonical(b)
}

/// How to go on loading a retyped source column in the type the dimension was built with.
pub(crate) fn keep_old_type(plan: &Plan, name: &str, old: &str) -> String {
    match &plan.source.relation {
        crate::config::Relation::Table(_) => format!("point source.table at a view that casts `{name}` back to {old}"),
        // A query's columns are described by their type alone: a cast keeps no length or
        // precision.
        crate::config::Relation::Query(_) if old.contains('(') => format!(
            "make source.query a view and point source.table at it (a query's columns are described without length or \
             precision, so a cast to {old} in the query is not seen)"
        ),
        crate::config::Relation::Query(_) => format!("cast `{name}` back to {old} in source.query"),
    }
}

/// What a source column's new type means for the dimension's columns of the old one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Widening {
    /// Values of the new type may read, hash or fit otherwise: a retype (migrate).
    NotBenign,
    /// Every value of the new type is one of the old, with the same text and hash
    /// (`varchar(20)` for a `text` column, `int` for a `bigint` one): nothing to do.
    Fits,
    /// Every value of the old type is one of the new, with the same text and hash, but
    /// the new holds more (`int` → `bigint`, `varchar(20)` → `varchar(50)` or `text`): the
    /// log's and the dimension's columns are widened, where the engine can.
    Widens,
}

/// Whether a change of a column's type from `old` to `new` loses nothing: whole numbers
/// of another width, text of another length limit, decimals of another precision at the
/// same scale. On an engine whose columns hold any type (SQLite), the same kind of
/// value (whole numbers, text) fits whatever the declared name.
pub(crate) fn widening(backend: Backend, old: &str, new: &str) -> Widening {
    use crate::db::types::ColumnKind;
    let (old, new) = (old.to_ascii_lowercase(), new.to_ascii_lowercase());
    if !backend.dialect().alters_tables() {
        let kind = |t: &str| backend.dialect().kind_of_type(t);
        return match (kind(&old), kind(&new)) {
            (ColumnKind::Int, ColumnKind::Int) | (ColumnKind::Text, ColumnKind::Text) => Widening::Fits,
            _ => Widening::NotBenign,
        };
    }
    let int_rank = |t: &str| match t {
        "smallint" | "int2" => Some(1),
        "integer" | "int" | "int4" => Some(2),
        "bigint" | "int8" => Some(3),
        _ => None,
    };
    // Text: its length limit (None: unlimited).
    let text_limit = |t: &str| -> Option<Option<u64>> {
        if t == "text" || t == "character varying" || t == "varchar" {
            return Some(None);
        }
        let inner = t
            .strip_prefix("character varying(")
            .or_else(|| t.strip_prefix("varchar("))?
            .strip_suffix(')')?;
        inner.parse().ok().map(Some)
    };
    // Decimals: (precision, scale), None for unconstrained `numeric`.
    let decimal = |t: &str| -> Option<Option<(u32, u32)>> {
        if t == "numeric" || t == "decimal" {
            return Some(None);
        }
        let inner = t
            .strip_prefix("numeric(")
            .or_else(|| t.strip_prefix("decimal("))?
            .strip_suffix(')')?;
        let (p, s) = inner.split_once(',').unwrap_or((inner, "0"));
        Some(Some((p.trim().parse().ok()?, s.trim().parse().ok()?)))
    };
    if let (Some(a), Some(b)) = (int_rank(&old), int_rank(&new)) {
        return if b > a { Widening::Widens } else { Widening::Fits };
    }
    if let (Some(a), Some(b)) = (text_limit(&old), text_limit(&new)) {
        return match (a, b) {
            (None, _) => Widening::Fits,
            (Some(_), None) => Widening::Widens,
            (Some(a), Some(b)) if b > a => Widening::Widens,
            _ => Widening::Fits,
        };
    }
    if let (Some(a), Some(b)) = (decimal(&old), decimal(&new)) {
        return match (a, b) {
            // Unconstrained `numeric` keeps each value's own scale: not the same text.
            (None, _) | (_, None) => Widening::NotBenign,
            (Some((pa, sa)), Some((pb, sb))) if sa == sb => {
                if pb > pa {
                    Widening::Widens
                } else {
                    Widening::Fits
                }
            }
            _ => Widening::NotBenign,
        };
    }
    Widening::NotBenign
}

/// Why a retyped source column stops the load, and the migration that lets it go on:
/// the log (and, through `dimlog rebuild`, the dimension) takes the new type, the stored
/// column types follow, and a full refresh re-hashes the current versions as corrections
/// (same surrogate keys), because the hash encodes each value's kind.
fn retype_refusal(plan: &Plan, backend: Backend, name: &str, old: &str, new: &str) -> String {
    let record = format!(
        "UPDATE dimlog_dimensions SET column_types = replace(column_types, '{}', '{}') WHERE dimension = '{}';",
        to_json(&(name, old)).replace('\'', "''"),
        to_json(&(name, new)).replace('\'', "''"),
        plan.name.replace('\'', "''"),
    );
    let retype = serde_json::json!({
        "log": plan.target.log.quoted(),
        "column": quoted_name(name.to_string()),
        "new_type": new,
    });
    let migration = match sql::statement(backend, "tables", "retype_log_column", &retype) {
        Ok(alter) if !alter.is_empty() => format!(
            "{alter} {record} (the ALTER fails, changing nothing, if a logged value of `{name}` does not convert to {new}: \
             then keep the old type)"
        ),
        _ => format!(
            "{record} ({} cannot change a declared column type; the log's {old} column holds the new values as they are)",
            backend.dialect().name_for_people()
        ),
    };
    let keep = keep_old_type(plan, name, old);
    format!(
        "source column `{name}` changed type from {old} to {new} since the dimension was built; \
         values of another type can hash differently, so loading them could re-version every key, and nothing was loaded. \
         Migrate the target once: {migration} then rebuild the dimension from the log and load with a full refresh \
         (a current version whose hash changes gets a correction: same surrogate key, no new version). \
         Or keep the old type: {keep}"
    )
}

impl DimensionRecord {
    /// Type 1 columns plus the Type 6 twins (stored as `current:<col>`), for the
    /// `type1_columns` field of `dimlog_dimensions`.
    pub fn type1_with_current(&self) -> Vec<String> {
        self.type1_columns
            .iter()
            .cloned()
            .chain(self.current_columns.iter().map(|c| format!("current:{c}")))
            .collect()
    }
}

/// A change of the column sets between the stored record and the config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigChange {
    /// Type 2 columns before.
    pub tracked_before: Vec<String>,
    /// Type 2 columns now.
    pub tracked_after: Vec<String>,
    /// Type 1 columns before.
    pub type1_before: Vec<String>,
    /// Type 1 columns now.
    pub type1_after: Vec<String>,
    /// Type 6 twins before.
    pub current_before: Vec<String>,
    /// Type 6 twins now.
    pub current_after: Vec<String>,
    /// Columns the log does not have yet (name, type).
    pub new_log_columns: Vec<(String, String)>,
}

impl ConfigChange {
    /// The change, if any.
    pub fn between(stored: &DimensionRecord, wanted: &DimensionRecord) -> Option<ConfigChange> {
        if stored.tracked_columns == wanted.tracked_columns
            && stored.type1_columns == wanted.type1_columns
            && stored.current_columns == wanted.current_columns
        {
            return None;
        }
        let new_log_columns = wanted
            .column_types
            .iter()
            .filter(|(n, _)| !stored.column_types.iter().any(|(s, _)| s == n))
            .cloned()
            .collect();
        Some(ConfigChange {
            tracked_before: stored.tracked_columns.clone(),
            tracked_after: wanted.tracked_columns.clone(),
            type1_before: stored.type1_columns.clone(),
            type1_after: wanted.type1_columns.clone(),
            current_before: stored.current_columns.clone(),
            current_after: wanted.current_columns.clone(),
            new_log_columns,
        })
    }

    /// True when the Type 2 set (the hash input) changed.
    pub fn rehash_needed(&self) -> bool {
        self.tracked_before != self.tracked_after
    }

    /// Type 2 columns in both sets: a current version is carried over only when the
    /// source agrees with it on all of them.
    pub fn retained(&self) -> Vec<String> {
        self.tracked_after
            .iter()
            .filter(|c| self.tracked_before.contains(c))
            .cloned()
            .collect()
    }

    /// The dimension's columns of the old column sets that the new ones no longer have
    /// (bare names): a rebuild takes them off the dimension.
    pub fn no_longer_written(&self) -> Vec<String> {
        let before = self
            .tracked_before
            .iter()
            .chain(&self.type1_before)
            .cloned()
            .chain(self.current_before.iter().map(|c| format!("current_{c}")));
        let after: Vec<String> = self
            .tracked_after
            .iter()
            .chain(&self.type1_after)
            .cloned()
            .chain(self.current_after.iter().map(|c| format!("current_{c}")))
            .collect();
        before.filter(|c| !after.contains(c)).collect()
    }

    /// What changed, in words.
    pub fn describe(&self) -> String {
        let diff = |what: &str, before: &[String], after: &[String]| -> Vec<String> {
            let added: Vec<&String> = after.iter().filter(|c| !before.contains(c)).collect();
            let removed: Vec<&String> = before.iter().filter(|c| !after.contains(c)).collect();
            let mut out = Vec::new();
            if !added.is_empty() {
                out.push(format!(
                    "{what} added: {}",
                    added.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
            if !removed.is_empty() {
                out.push(format!(
                    "{what} removed: {}",
                    removed.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
            if out.is_empty() && before != after {
                out.push(format!(
                    "{what} reordered: {} -> {}",
                    before.join(", "),
                    after.join(", ")
                ));
            }
            out
        };
        let mut parts = diff("track.columns", &self.tracked_before, &self.tracked_after);
        parts.extend(diff("track.type1", &self.type1_before, &self.type1_after));
        parts.extend(diff("track.current_columns", &self.current_before, &self.current_after));
        parts.join("; ")
    }

    /// Whether accepting the change alters the log's or the dimension's columns (DDL,
    /// which only their owner may run): the log gains columns, or the dimension's set of
    /// attribute columns changes. (Reordered columns, or a column moved between Type 2
    /// and Type 1, only rewrite rows.)
    pub fn alters_tables(&self) -> bool {
        self.alters_log() || self.alters_dimension()
    }

    /// Whether accepting the change adds columns to the log.
    pub fn alters_log(&self) -> bool {
        !self.new_log_columns.is_empty()
    }

    /// Whether accepting the change adds or takes off columns of the dimension.
    fn alters_dimension(&self) -> bool {
        use std::collections::BTreeSet;
        fn attributes<'a>(tracked: &'a [String], type1: &'a [String]) -> BTreeSet<&'a String> {
            tracked.iter().chain(type1).collect()
        }
        fn twins(current: &[String]) -> BTreeSet<&String> {
            current.iter().collect()
        }
        attributes(&self.tracked_before, &self.type1_before) != attributes(&self.tracked_after, &self.type1_after)
            || twins(&self.current_before) != twins(&self.current_after)
    }

    /// The refusal of a run that will not migrate without being asked.
    pub fn refusal(&self) -> ConfigError {
        ConfigError::NeedsStep {
            setting: "track.columns".to_string(),
            message: format!(
                "the config changed since the dimension was built ({}). dimlog never silently re-versions history: \
                 a run that accepts the change adds columns the log lacks (earlier versions hold NULL in them; \
                 a column it already holds, such as a Type 1 one, keeps what it logged), \
                 carries each current version over to the new column set when the source agrees with it (no new versions), \
                 and rebuilds the dimension; or restore the old column lists",
                self.describe()
            ),
            step: NextStep::AcceptConfigChange,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver's names of a `source.query`'s columns and the catalog's of a
    /// `source.table`'s are one type, a key's too: no migration is asked for.
    #[test]
    fn aliases_of_a_type_are_the_same_type() {
        for (a, b) in [
            ("bigint", "INT8"),
            ("integer", "INT4"),
            ("smallint", "int2"),
            ("double precision", "FLOAT8"),
            ("boolean", "BOOL"),
            ("character varying(20)", "VARCHAR(20)"),
            ("timestamp with time zone", "TIMESTAMPTZ"),
            ("numeric(12,2)", "decimal(12,2)"),
            ("text", "TEXT"),
        ] {
            assert!(same_type(Backend::Postgres, a, b), "{a} / {b}");
        }
        for (a, b) in [
            ("bigint", "integer"),
            ("character varying(20)", "character varying(30)"),
            ("timestamp with time zone", "timestamp"),
            ("text", "bytea"),
        ] {
            assert!(!same_type(Backend::Postgres, a, b), "{a} / {b}");
        }
    }
    use crate::config::Overrides;
    use std::path::Path;

    fn plan() -> Plan {
        let text = r#"
name = "customer"
[source]
url = "sqlite://source.db"
table = "src_customers"
key = ["customer_id"]
updated_at = "updated_at"
[target]
url = "sqlite://warehouse.db"
log = "customer_versions"
dimension = "dim_customer"
surrogate_key = "customer_sk"
[track]
columns = ["email", "tier"]
"#;
        Plan::from_toml(text, Path::new("dimlog.toml"), Path::new("/tmp"), &Overrides::default()).expect("a plan")
    }

    fn record(tracked: &[&str], type1: &[&str], types: &[(&str, &str)]) -> DimensionRecord {
        let names = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        DimensionRecord {
            key_columns: names(&["customer_id"]),
            tracked_columns: names(tracked),
            type1_columns: names(type1),
            current_columns: Vec::new(),
            column_types: types.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect(),
            hash_version: HASH_VERSION,
        }
    }

    #[test]
    fn the_same_column_sets_are_no_change() {
        let r = record(&["email", "tier"], &["name"], &[("email", "TEXT"), ("tier", "TEXT")]);
        assert_eq!(ConfigChange::between(&r, &r.clone()), None);
    }

    #[test]
    fn a_new_type2_column_is_a_change_that_rehashes_and_adds_a_log_column() {
        let stored = record(&["email"], &[], &[("email", "TEXT")]);
        let wanted = record(&["email", "tier"], &[], &[("email", "TEXT"), ("tier", "TEXT")]);
        let c = ConfigChange::between(&stored, &wanted).expect("a change");
        assert!(c.rehash_needed());
        assert_eq!(c.retained(), ["email"]);
        assert_eq!(c.new_log_columns, [("tier".to_string(), "TEXT".to_string())]);
        assert!(c.no_longer_written().is_empty());
    }

    #[test]
    fn moving_a_column_from_type2_to_type1_keeps_its_log_column_and_rehashes() {
        let types = [("email", "TEXT"), ("tier", "TEXT")];
        let stored = record(&["email", "tier"], &[], &types);
        let wanted = record(&["email"], &["tier"], &types);
        let c = ConfigChange::between(&stored, &wanted).expect("a change");
        assert!(c.rehash_needed());
        assert!(c.new_log_columns.is_empty(), "the log has the column");
        assert!(c.no_longer_written().is_empty(), "still written, as Type 1");
        let dropped = record(&["email"], &[], &types);
        let c = ConfigChange::between(&stored, &dropped).expect("a change");
        assert_eq!(
            c.no_longer_written(),
            ["tier"],
            "taken off the dimension, kept in the log"
        );
    }

    #[test]
    fn a_type1_change_alone_does_not_rehash() {
        let types = [("email", "TEXT"), ("name", "TEXT")];
        let stored = record(&["email"], &[], &types);
        let wanted = record(&["email"], &["name"], &types);
        let c = ConfigChange::between(&stored, &wanted).expect("a change");
        assert!(!c.rehash_needed());
    }

    #[test]
    fn another_key_or_a_retyped_column_is_refused_naming_the_setting() {
        let plan = plan();
        let stored = record(&["email"], &[], &[("customer_id", "INTEGER"), ("email", "TEXT")]);
        let mut other_key = stored.clone();
        other_key.key_columns = vec!["email".into()];
        let e = check_compatible(&stored, &other_key, &plan, plan.target.url.backend).expect_err("another key");
        assert!(e.to_string().contains("source.key"), "{e}");
        let mut retyped = stored.clone();
        retyped.column_types = vec![
            ("customer_id".into(), "INTEGER".into()),
            ("email".into(), "INTEGER".into()),
        ];
        let e = check_compatible(&stored, &retyped, &plan, plan.target.url.backend).expect_err("a retype");
        let text = e.to_string();
        assert!(
            text.contains("track.columns") && text.contains("`email` changed type from TEXT to INTEGER"),
            "{text}"
        );
        let mut case_only = stored.clone();
        case_only.column_types = vec![
            ("customer_id".into(), "integer".into()),
            ("email".into(), "text".into()),
        ];
        check_compatible(&stored, &case_only, &plan, plan.target.url.backend).expect("a type's case is no retype");
    }

    #[test]
    fn widenings_are_told_from_retypes() {
        use super::Widening as W;
        // The engines as their URLs name them.
        let engine = |url: &str| crate::db::DbUrl::parse("target.url", url, None).expect("a URL").backend;
        let (postgres, sqlite) = (engine("postgres://host/db"), engine("sqlite://warehouse.db"));
        let pg = |a, b| widening(postgres, a, b);
        assert_eq!(pg("integer", "bigint"), W::Widens);
        assert_eq!(pg("smallint", "integer"), W::Widens);
        assert_eq!(pg("bigint", "integer"), W::Fits);
        assert_eq!(pg("character varying(20)", "character varying(50)"), W::Widens);
        assert_eq!(pg("character varying(20)", "text"), W::Widens);
        assert_eq!(pg("text", "character varying(20)"), W::Fits);
        assert_eq!(pg("numeric(10,2)", "numeric(12,2)"), W::Widens);
        assert_eq!(pg("numeric(10,2)", "numeric(12,3)"), W::NotBenign);
        assert_eq!(pg("numeric(10,2)", "numeric"), W::NotBenign);
        assert_eq!(pg("text", "integer"), W::NotBenign);
        assert_eq!(pg("real", "double precision"), W::NotBenign, "floats print otherwise");
        assert_eq!(
            pg("integer", "numeric(12,0)"),
            W::NotBenign,
            "another kind hashes otherwise"
        );
        let lite = |a, b| widening(sqlite, a, b);
        assert_eq!(lite("INT", "BIGINT"), W::Fits);
        assert_eq!(lite("TEXT", "VARCHAR(20)"), W::Fits);
        assert_eq!(lite("TEXT", "INTEGER"), W::NotBenign);
    }
}
