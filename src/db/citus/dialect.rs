//! Citus's answers to [`Dialect`]: PostgreSQL's in everything but its name and the few
//! statements `sql/citus/` replaces (the rest of its templates are PostgreSQL's).

use crate::db::dialect::{ChangeTime, Dialect};
use crate::db::postgres::dialect::Postgres;
use crate::db::types::ColumnKind;
use crate::db::Param;

/// Citus (13 and later) on PostgreSQL 15 and later: a coordinator and its workers.
pub struct Citus;

/// The statements Citus replaces, by family; every other statement is PostgreSQL's.
fn template(family: &str) -> Option<&'static str> {
    macro_rules! file {
        ($family:literal) => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/sql/citus/",
                $family,
                ".sql"
            ))
        };
    }
    Some(match family {
        "append" => file!("append"),
        "classify" => file!("classify"),
        "reconcile" => file!("reconcile"),
        "tables" => file!("tables"),
        "rebuild" => file!("rebuild"),
        "verify" => file!("verify"),
        "lookup" => file!("lookup"),
        "stage" => file!("stage"),
        "state" => file!("state"),
        _ => return None,
    })
}

impl Dialect for Citus {
    fn name(&self) -> &'static str {
        "citus"
    }

    fn name_for_people(&self) -> &'static str {
        "Citus"
    }

    fn base(&self) -> Option<&'static dyn Dialect> {
        Some(&Postgres)
    }

    fn template(&self, family: &str) -> Option<&'static str> {
        template(family)
    }

    fn default_schema(&self) -> &'static str {
        Postgres.default_schema()
    }

    fn single_schema(&self) -> bool {
        Postgres.single_schema()
    }

    fn reserved_table_prefix(&self) -> Option<&'static str> {
        Postgres.reserved_table_prefix()
    }

    fn folds_name_case(&self) -> bool {
        Postgres.folds_name_case()
    }

    fn kind_of_type(&self, type_name: &str) -> ColumnKind {
        Postgres.kind_of_type(type_name)
    }

    fn type_of_kind(&self, kind: ColumnKind) -> &'static str {
        Postgres.type_of_kind(kind)
    }

    fn carried_type(&self, type_name: &str, kind: ColumnKind) -> Option<String> {
        Postgres.carried_type(type_name, kind)
    }

    fn integer_type(&self, type_name: &str) -> bool {
        Postgres.integer_type(type_name)
    }

    fn has_boolean_type(&self) -> bool {
        Postgres.has_boolean_type()
    }

    fn values_have_declared_types(&self) -> bool {
        Postgres.values_have_declared_types()
    }

    fn alters_tables(&self) -> bool {
        Postgres.alters_tables()
    }

    fn change_time(&self, kind: ColumnKind) -> ChangeTime {
        Postgres.change_time(kind)
    }

    fn table_params(&self, name: &str, schema: Option<&str>, quoted: &str) -> Vec<Param> {
        Postgres.table_params(name, schema, quoted)
    }

    fn key_order(&self, column: &str, kind: ColumnKind) -> String {
        Postgres.key_order(column, kind)
    }

    fn timestamp_literal(&self, text: &str) -> String {
        Postgres.timestamp_literal(text)
    }

    fn has_roles(&self) -> bool {
        Postgres.has_roles()
    }

    /// Citus's recipe adds `CREATE` on the log's schema, where loads make working tables.
    fn rights_recipe(&self) -> Option<&'static str> {
        Some("docs/recipes/citus.md")
    }

    fn distributes_composite_keys_by_hash(&self) -> bool {
        true
    }

    fn has_state_schema(&self) -> bool {
        Postgres.has_state_schema()
    }

    fn init_makes_assigned_table(&self) -> bool {
        Postgres.init_makes_assigned_table()
    }

    fn system_columns(&self) -> &'static [&'static str] {
        Postgres.system_columns()
    }

    fn names_lock_holders(&self) -> bool {
        Postgres.names_lock_holders()
    }

    fn lock_is_a_transaction(&self) -> bool {
        Postgres.lock_is_a_transaction()
    }

    fn passes_copy_text(&self) -> bool {
        Postgres.passes_copy_text()
    }
}

#[cfg(test)]
mod tests {
    use crate::db::sql;
    use crate::db::Backend;

    /// Citus's own macros replace PostgreSQL's in PostgreSQL's statements: verify pairs
    /// rows by surrogate key and key, on the distribution column.
    #[test]
    fn its_macros_replace_the_base_ones() {
        let ctx = serde_json::json!({
            "keys": ["\"id\""], "key_names": ["\"id\""], "sk": "\"sk\"", "dim": "\"d\"", "log": "\"l\"",
        });
        let pg = sql::statement(Backend::Postgres, "verify", "sk_missing", &ctx).expect("renders");
        let citus = sql::statement(Backend::Citus, "verify", "sk_missing", &ctx).expect("renders");
        assert!(!pg.contains("dimlog_d.\"id\" = dimlog_l.\"id\""), "{pg}");
        assert!(citus.contains("dimlog_d.\"id\" = dimlog_l.\"id\""), "{citus}");
    }
}
