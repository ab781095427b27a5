//! What differs between engines, asked of the engine instead of tested by name.
//!
//! A stage never matches on which engine it talks to: it asks the target's or the
//! source's [`Dialect`] a question named for the difference (does a column hold only
//! values of its declared type? may a column's type be altered in place?), and renders
//! the statements of its step from the engine's own `sql/<engine>/` files, where a step
//! an engine does not need is an empty statement. A new engine is a new folder under
//! `db/` with an implementation of this trait and its SQL files.

use crate::db::types::ColumnKind;
use crate::db::Param;

/// How an engine reads a change column of a kind (see `docs/concepts/time-zones.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeTime {
    /// Instants (`timestamptz`): read as they are.
    Instant,
    /// Local times or dates: need `source.timezone` to name instants.
    Local,
    /// Not a time at all: refused.
    NotATime,
    /// Any declared type may hold text in any form (SQLite): the values decide, each
    /// read by dimlog's own rule.
    ByValue,
}

/// One engine's answers: type names, naming rules, and what it can and cannot do.
pub trait Dialect: Sync {
    /// The engine's name in messages and `--json` (`sqlite`, `postgres`).
    fn name(&self) -> &'static str;

    /// The engine's name in sentences (`SQLite`, `PostgreSQL`).
    fn name_for_people(&self) -> &'static str;

    /// The text of the SQL template family `family` (one file of `sql/<engine>/`).
    fn template(&self, family: &str) -> Option<&'static str>;

    /// The engine this one extends, if any (Citus extends PostgreSQL): a statement this
    /// engine's files do not have is the base engine's, and rows pass between the two as
    /// the base's COPY text.
    fn base(&self) -> Option<&'static dyn Dialect> {
        None
    }

    /// The engine at the root of [`Dialect::base`] (itself if it extends none).
    fn root(&self) -> &'static str {
        self.base().map_or(self.name(), |b| b.root())
    }

    /// The schema an unqualified table name is in.
    fn default_schema(&self) -> &'static str;

    /// Whether the engine has one lasting schema only (SQLite's `main`): a table
    /// name naming another schema is refused.
    fn single_schema(&self) -> bool;

    /// A prefix of table names the engine keeps for itself (in any case), if any.
    fn reserved_table_prefix(&self) -> Option<&'static str>;

    /// Whether names compare without regard to (ASCII) case (SQLite), rather than
    /// exactly as dimlog quotes them (PostgreSQL).
    fn folds_name_case(&self) -> bool;

    /// Whether two names (of columns, or tables as configs write them) name the same.
    fn same_name(&self, a: &str, b: &str) -> bool {
        if self.folds_name_case() {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    }

    /// The kind of a column from its declared type (as the engine's catalog prints it).
    fn kind_of_type(&self, type_name: &str) -> ColumnKind;

    /// The type a target column of `kind` gets when nothing else decides.
    fn type_of_kind(&self, kind: ColumnKind) -> &'static str;

    /// The type a target column keeps when the source is this same engine and declared
    /// it `type_name` (of kind `kind`); None: the kind's type ([`Dialect::type_of_kind`]).
    fn carried_type(&self, type_name: &str, kind: ColumnKind) -> Option<String>;

    /// Whether a fact-table column of this declared type holds integers.
    fn integer_type(&self, type_name: &str) -> bool;

    /// Whether the engine has a boolean type (SQLite keeps flags as integers 0/1).
    fn has_boolean_type(&self) -> bool;

    /// Whether every value of a column has its declared type (PostgreSQL), so that
    /// keys compare as typed values in SQL; false where a column may hold a value in
    /// any spelling (SQLite), so keys are compared in canonical form by dimlog.
    fn values_have_declared_types(&self) -> bool;

    /// Whether a table's column types and constraints (NOT NULL, primary key) can be
    /// altered in place (SQLite cannot: such a table is created again).
    fn alters_tables(&self) -> bool;

    /// How a change column of `kind` is read.
    fn change_time(&self, kind: ColumnKind) -> ChangeTime;

    /// The parameters of a catalog statement that names one table (`name`, `schema` as
    /// the config wrote them, `quoted` the quoted full name).
    fn table_params(&self, name: &str, schema: Option<&str>, quoted: &str) -> Vec<Param>;

    /// A key column in ORDER BY: in an order that is the same on every engine where the
    /// kind allows (PostgreSQL's text compares bytewise with `COLLATE "C"`).
    fn key_order(&self, column: &str, kind: ColumnKind) -> String;

    /// The open-version sentinel `far_future` (fixed-width UTC text) as a SQL literal.
    fn timestamp_literal(&self, text: &str) -> String;

    /// Whether the engine has roles with rights on tables, which dimlog checks from the
    /// catalogs before it writes (PostgreSQL); false where the file's permissions decide.
    fn has_roles(&self) -> bool;

    /// The recipe that lists every right a role needs on this engine, for refusals that
    /// name a missing one (None where the engine has no roles).
    fn rights_recipe(&self) -> Option<&'static str>;

    /// Whether dimlog's own tables may live in a schema of their own
    /// (`target.state_schema`).
    fn has_state_schema(&self) -> bool;

    /// Whether a key of several columns is distributed by a hash of its values
    /// (`dimlog_key_hash`, Citus: a distribution column is one column); false where the
    /// tables are not distributed.
    fn distributes_composite_keys_by_hash(&self) -> bool {
        false
    }

    /// Whether `dimlog_assigned` is made by `init` (so a role that may not create
    /// tables can assign keys), rather than by the first `assign-keys`.
    fn init_makes_assigned_table(&self) -> bool;

    /// Column names the engine keeps for itself in every table.
    fn system_columns(&self) -> &'static [&'static str];

    /// Whether a lock another session holds on a table can be waited for with a limit
    /// and named (PostgreSQL's `lock_timeout` and `pg_locks`).
    fn names_lock_holders(&self) -> bool;

    /// Whether a dimension's lock is the write transaction itself (SQLite's `BEGIN
    /// IMMEDIATE`), so a load reads its source inside that transaction; false where the
    /// lock belongs to the session (an advisory lock) and a load opens its transaction
    /// only once it has read the source.
    fn lock_is_a_transaction(&self) -> bool;

    /// Whether rows move between two databases of this engine as the engine's own COPY
    /// text, passed through without being parsed.
    fn passes_copy_text(&self) -> bool;
}

/// The engines dimlog speaks, chosen from the URL scheme.
impl crate::db::Backend {
    /// This engine's answers.
    #[doc(hidden)]
    pub fn dialect(self) -> &'static dyn Dialect {
        match self {
            crate::db::Backend::Sqlite => &crate::db::sqlite::dialect::Sqlite,
            crate::db::Backend::Postgres => &crate::db::postgres::dialect::Postgres,
            crate::db::Backend::Citus => &crate::db::citus::dialect::Citus,
        }
    }
}
