//! SQLite's answers to [`Dialect`]: affinity rules, one schema, names without case, the
//! write transaction as the lock.

use crate::db::dialect::{ChangeTime, Dialect};
use crate::db::types::ColumnKind;
use crate::db::Param;

crate::db::sql::engine_templates!("sqlite");

/// The SQLite engine (bundled with dimlog).
pub struct Sqlite;

impl Dialect for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn name_for_people(&self) -> &'static str {
        "SQLite"
    }

    fn template(&self, family: &str) -> Option<&'static str> {
        template(family)
    }

    fn default_schema(&self) -> &'static str {
        "main"
    }

    fn single_schema(&self) -> bool {
        true
    }

    fn reserved_table_prefix(&self) -> Option<&'static str> {
        Some("sqlite_")
    }

    fn folds_name_case(&self) -> bool {
        true
    }

    /// SQLite's own affinity rules, refined for the names people use for booleans,
    /// dates and timestamps.
    fn kind_of_type(&self, declared: &str) -> ColumnKind {
        let t = declared.to_ascii_uppercase();
        if t.contains("INT") {
            ColumnKind::Int
        } else if t.contains("BOOL") {
            ColumnKind::Bool
        } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
            ColumnKind::Text
        } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
            ColumnKind::Float
        } else if t.contains("TIMESTAMP") || t.contains("DATETIME") {
            ColumnKind::Timestamp
        } else if t.starts_with("DATE") {
            ColumnKind::Date
        } else if t.contains("UUID") {
            ColumnKind::Uuid
        } else if t.contains("JSON") {
            ColumnKind::Json
        } else if t.contains("BLOB") {
            ColumnKind::Bytes
        } else if t.contains("NUM") || t.contains("DEC") {
            ColumnKind::Numeric
        } else {
            ColumnKind::Text
        }
    }

    /// Exact decimals stay text so no digit is lost to REAL affinity.
    fn type_of_kind(&self, kind: ColumnKind) -> &'static str {
        match kind {
            ColumnKind::Int => "INTEGER",
            ColumnKind::Float => "REAL",
            ColumnKind::Bool => "BOOLEAN",
            ColumnKind::Bytes => "BLOB",
            ColumnKind::Date => "DATE",
            ColumnKind::Timestamp | ColumnKind::TimestampTz => "TIMESTAMP",
            ColumnKind::Numeric | ColumnKind::Text | ColumnKind::Uuid | ColumnKind::Json => "TEXT",
        }
    }

    /// A SQLite source keeps its declared type, when it has one.
    fn carried_type(&self, type_name: &str, _kind: ColumnKind) -> Option<String> {
        let plain = type_name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || " (),_".contains(ch));
        (plain && !type_name.is_empty()).then(|| type_name.to_string())
    }

    /// SQLite's rule for INTEGER affinity.
    fn integer_type(&self, type_name: &str) -> bool {
        type_name.to_ascii_uppercase().contains("INT")
    }

    fn has_boolean_type(&self) -> bool {
        false
    }

    fn values_have_declared_types(&self) -> bool {
        false
    }

    fn alters_tables(&self) -> bool {
        false
    }

    fn change_time(&self, _kind: ColumnKind) -> ChangeTime {
        ChangeTime::ByValue
    }

    /// The catalog statements take the bare name and the schema (`pragma_table_info`).
    fn table_params(&self, name: &str, schema: Option<&str>, _quoted: &str) -> Vec<Param> {
        vec![
            Param::Text(name.to_string()),
            Param::Text(schema.unwrap_or("main").to_string()),
        ]
    }

    fn key_order(&self, column: &str, _kind: ColumnKind) -> String {
        column.to_string()
    }

    fn timestamp_literal(&self, text: &str) -> String {
        format!("'{text}'")
    }

    fn has_roles(&self) -> bool {
        false
    }

    fn rights_recipe(&self) -> Option<&'static str> {
        None
    }

    fn has_state_schema(&self) -> bool {
        false
    }

    fn init_makes_assigned_table(&self) -> bool {
        false
    }

    fn system_columns(&self) -> &'static [&'static str] {
        &[]
    }

    fn names_lock_holders(&self) -> bool {
        false
    }

    fn lock_is_a_transaction(&self) -> bool {
        true
    }

    fn passes_copy_text(&self) -> bool {
        false
    }
}
