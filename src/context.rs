//! The template context every target statement renders with ([`SqlContext`]: quoted
//! identifiers and dimlog's literals, resolved once per run from the config and the
//! layout), and the runner of named statements.

use crate::config::{Backend, History, Plan};
pub use crate::db::citus::KEY_HASH;
use crate::db::{sql, Conn, DbError};
use crate::ident::Ident;
use crate::layout::{Col, Layout};
use crate::ts::FAR_FUTURE;
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
    /// The dimension's bare name, unquoted (SQLite's `pragma_table_info`).
    pub dim_plain: String,
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
    /// Unique index on (key, valid_from).
    pub dim_index: String,
    /// The surrogate key column.
    pub sk: String,
    /// The columns a key is matched, grouped and laid out by, quoted: the key columns,
    /// after [`KEY_HASH`] where the key is hashed ([`SqlContext::key_hash`]). Statements
    /// join, partition and copy rows by these; what is shown of a key is
    /// [`SqlContext::key_names`].
    pub keys: Vec<String>,
    /// The key columns alone, quoted (parameters, fact tables, what people read).
    pub key_names: Vec<String>,
    /// The log, the dimension and a load's working tables carry [`KEY_HASH`], a hash of
    /// the key's values that they are distributed by: a key of several columns on a Citus
    /// coordinator, which shards a table by one column. Every row of a key has the same
    /// hash, so joining on it too changes no match, and Citus runs the join on each shard.
    pub key_hash: bool,
    /// The keys as log ids and surrogate keys are numbered: text keys bytewise
    /// (`COLLATE "C"` on PostgreSQL, SQLite's default), others by their type's order.
    pub key_order: Vec<String>,
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
    /// Attribute and current_<col> columns whose target type has no equality operator
    /// (PostgreSQL `json`), quoted: statements compare them as text.
    pub text_compared: Vec<String>,
    /// Type 6 twins shown only in the dimension.
    pub current_defs: Vec<crate::layout::CurrentCol>,
    /// Type 2 columns tracked both before and after a config change (rehash match).
    pub retained: Vec<String>,
    /// Log columns no longer tracked (removed from the config), quoted: a config
    /// change's carried-over row keeps the version's logged values in them.
    pub carried: Vec<String>,
    /// Type 2 columns added back after a removal (the log holds their history), quoted.
    pub readded: Vec<String>,
    /// Of [`SqlContext::readded`], the columns that were Type 1 before: their last
    /// logged value may be a Type 1 observation's.
    pub readded_observed: Vec<String>,
    /// The column an `add_log_column` statement adds.
    pub column: Option<Col>,
    /// `source.history = "all"`.
    pub history_all: bool,
    /// A soft-delete column is configured (the source key list carries a live flag).
    pub deleted_flag: bool,
    /// One read holds at most one row per key (see [`Layout::unique_key`]).
    pub unique_key: bool,
    /// One read holds at most one row per key as dimlog reads keys (see
    /// [`Layout::unique_as_read`]).
    pub unique_as_read: bool,
    /// The log's and the dimension's indexes other than their primary keys, qualified
    /// (see [`crate::tables::drop_indexes_for_first_load`]).
    pub secondary_indexes: Vec<String>,
    /// The far-future `valid_to` literal.
    pub sentinel: String,
}

pub(crate) fn quoted_name(name: String) -> String {
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
        let key_hash = backend.dialect().distributes_composite_keys_by_hash() && layout.keys.len() > 1;
        let qualified = |table: &Ident, index: String| match table.schema() {
            Some(s) => Ident::table(&format!("{s}.{index}"))
                .map(|i| i.quoted())
                .unwrap_or_else(|_| quoted_name(index)),
            None => quoted_name(index),
        };
        let secondary_indexes = vec![
            qualified(&t.log, format!("{log_bare}_key_idx")),
            qualified(&t.log, format!("{log_bare}_load_idx")),
            qualified(&t.dimension, format!("{bare}_key_idx")),
            // Targets made by earlier builds kept a partial current-row index; a first load
            // drops it too, and the unique key index now does its work.
            qualified(&t.dimension, format!("{bare}_current_idx")),
        ];
        SqlContext {
            log: t.log.quoted(),
            dim: t.dimension.quoted(),
            dim_bare: quoted_name(bare.clone()),
            dim_plain: bare.clone(),
            dim_new: dim_new.quoted(),
            dim_pk: quoted_name(format!("{bare}_pkey")),
            dim_new_pk: quoted_name(new_pk.clone()),
            dim_new_pk_qualified: new_pk_ident.map(|i| i.quoted()).unwrap_or_default(),
            log_index: quoted_name(format!("{log_bare}_key_idx")),
            log_load_index: quoted_name(format!("{log_bare}_load_idx")),
            dim_index: quoted_name(format!("{bare}_key_idx")),
            sk: t.surrogate_key.quoted(),
            keys: key_hash
                .then(|| KEY_HASH.to_string())
                .into_iter()
                .chain(layout.keys.iter().map(q))
                .collect(),
            key_names: layout.keys.iter().map(q).collect(),
            key_hash,
            key_order: layout
                .keys
                .iter()
                .map(|c| backend.dialect().key_order(&c.name, c.kind))
                .collect(),
            cols: layout.tracked.iter().map(q).collect(),
            t1: layout.type1.iter().map(q).collect(),
            attrs: layout.attrs().into_iter().map(q).collect(),
            key_defs: layout.keys.clone(),
            attr_defs: layout.attrs().into_iter().cloned().collect(),
            tiebreak: layout.tiebreak.clone(),
            current_defs: layout.current.clone(),
            text_compared: layout
                .attrs()
                .into_iter()
                .map(|c| (&c.name, &c.target_type))
                .chain(layout.current.iter().map(|c| (&c.name, &c.target_type)))
                .filter(|(_, target_type)| target_type.eq_ignore_ascii_case("json"))
                .map(|(name, _)| name.clone())
                .collect(),
            retained: Vec::new(),
            carried: Vec::new(),
            readded: Vec::new(),
            readded_observed: Vec::new(),
            column: None,
            history_all: plan.source.history == History::All,
            deleted_flag: plan.source.deleted_flag.is_some(),
            unique_key: layout.unique_key,
            unique_as_read: layout.unique_as_read,
            secondary_indexes,
            sentinel: backend.dialect().timestamp_literal(&FAR_FUTURE.to_text()),
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

/// Runs the named statements of a template, in the given order.
pub async fn run_named<C: Serialize>(conn: &mut Conn, family: &str, names: &[&str], ctx: &C) -> Result<(), DbError> {
    for name in names {
        let body = sql::statement(conn.backend(), family, name, ctx)?;
        if body.is_empty() {
            // A step this engine does not need (its SQL file says why).
            continue;
        }
        conn.execute(&format!("{family}/{name}"), &body, &[]).await?;
    }
    Ok(())
}
