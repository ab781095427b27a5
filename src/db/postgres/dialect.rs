//! PostgreSQL's answers to [`Dialect`]: its type names, exact quoted names, roles, COPY.

use crate::db::dialect::{ChangeTime, Dialect};
use crate::db::types::ColumnKind;
use crate::db::Param;

crate::db::sql::engine_templates!("postgres");

/// The PostgreSQL engine (15 and later; MERGE where the server has it).
pub struct Postgres;

/// Columns every PostgreSQL table has.
const SYSTEM_COLUMNS: [&str; 6] = ["tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"];

impl Dialect for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn name_for_people(&self) -> &'static str {
        "PostgreSQL"
    }

    fn template(&self, family: &str) -> Option<&'static str> {
        template(family)
    }

    fn default_schema(&self) -> &'static str {
        "public"
    }

    fn single_schema(&self) -> bool {
        false
    }

    fn reserved_table_prefix(&self) -> Option<&'static str> {
        None
    }

    fn folds_name_case(&self) -> bool {
        false
    }

    /// Classifies a type name as `format_type` prints it.
    fn kind_of_type(&self, type_name: &str) -> ColumnKind {
        let t = type_name.to_ascii_lowercase();
        let base = t.split('(').next().unwrap_or("").trim();
        match base {
            "smallint" | "integer" | "bigint" | "int2" | "int4" | "int8" => ColumnKind::Int,
            "real" | "double precision" | "float4" | "float8" => ColumnKind::Float,
            "numeric" | "decimal" | "money" => ColumnKind::Numeric,
            "boolean" | "bool" => ColumnKind::Bool,
            "date" => ColumnKind::Date,
            "timestamp without time zone" | "timestamp" => ColumnKind::Timestamp,
            "timestamp with time zone" | "timestamptz" => ColumnKind::TimestampTz,
            "uuid" => ColumnKind::Uuid,
            "json" | "jsonb" => ColumnKind::Json,
            "bytea" => ColumnKind::Bytes,
            _ => ColumnKind::Text,
        }
    }

    /// A source of another engine maps through the kind (SQLite timestamps are free
    /// text: kept as written).
    fn type_of_kind(&self, kind: ColumnKind) -> &'static str {
        match kind {
            ColumnKind::Int => "bigint",
            ColumnKind::Float => "double precision",
            ColumnKind::Numeric => "numeric",
            ColumnKind::Bool => "boolean",
            ColumnKind::Date => "date",
            ColumnKind::Uuid => "uuid",
            ColumnKind::Json => "jsonb",
            ColumnKind::Bytes => "bytea",
            // SQLite timestamps are free text; keep them as written.
            ColumnKind::Text | ColumnKind::Timestamp | ColumnKind::TimestampTz => "text",
        }
    }

    /// A PostgreSQL source keeps its declared type (types of other schemas, like enums,
    /// become text).
    fn carried_type(&self, type_name: &str, kind: ColumnKind) -> Option<String> {
        let plain = type_name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || " (),_".contains(ch));
        if !plain {
            return None;
        }
        let base = type_name.split('(').next().unwrap_or("").trim().to_ascii_lowercase();
        let builtin_text = matches!(
            base.as_str(),
            "text" | "character varying" | "character" | "varchar" | "char" | "bpchar"
        );
        Some(if kind != ColumnKind::Text || builtin_text {
            type_name.to_string()
        } else {
            "text".into()
        })
    }

    fn integer_type(&self, type_name: &str) -> bool {
        matches!(type_name, "bigint" | "integer" | "smallint")
    }

    fn has_boolean_type(&self) -> bool {
        true
    }

    fn values_have_declared_types(&self) -> bool {
        true
    }

    fn alters_tables(&self) -> bool {
        true
    }

    fn change_time(&self, kind: ColumnKind) -> ChangeTime {
        match kind {
            ColumnKind::TimestampTz => ChangeTime::Instant,
            ColumnKind::Timestamp | ColumnKind::Date => ChangeTime::Local,
            _ => ChangeTime::NotATime,
        }
    }

    /// The catalog statements take the quoted name (`::regclass`).
    fn table_params(&self, _name: &str, _schema: Option<&str>, quoted: &str) -> Vec<Param> {
        vec![Param::Text(quoted.to_string())]
    }

    fn key_order(&self, column: &str, kind: ColumnKind) -> String {
        match kind {
            ColumnKind::Text => format!("{column} COLLATE \"C\""),
            _ => column.to_string(),
        }
    }

    fn timestamp_literal(&self, text: &str) -> String {
        format!("'{text}'::timestamptz")
    }

    fn has_roles(&self) -> bool {
        true
    }

    fn rights_recipe(&self) -> Option<&'static str> {
        Some("docs/recipes/postgres-to-postgres.md")
    }

    fn has_state_schema(&self) -> bool {
        true
    }

    fn init_makes_assigned_table(&self) -> bool {
        true
    }

    fn system_columns(&self) -> &'static [&'static str] {
        &SYSTEM_COLUMNS
    }

    fn names_lock_holders(&self) -> bool {
        true
    }

    fn lock_is_a_transaction(&self) -> bool {
        false
    }

    fn passes_copy_text(&self) -> bool {
        true
    }
}
