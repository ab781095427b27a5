//! Surrogate-key lookup for fact loaders (issue 4), on SQLite and PostgreSQL: `lookup` at
//! the boundaries of half-open intervals, `assign-keys` on staged fact tables in the
//! target (simple and composite keys, reruns, `--unknown error`, history rewritten by a
//! late version), and a property: the in-memory `Index`, `lookup` and `assign-keys`
//! agree on every fact.

mod assign;
mod assign_guard;
mod assign_owned;
mod boundaries;
mod key_forms;
mod property;
mod target_only;

use dimlog::config::Backend;
use dimlog::ts::Micros;

use crate::support::fixture::{Dump, Fixture};

/// A column of a staged fact table.
#[derive(Clone, Copy)]
enum FactCol {
    /// A whole number (ids, keys, surrogate keys).
    Int(&'static str),
    /// Text.
    Text(&'static str),
    /// The fact's timestamp: `timestamptz` in PostgreSQL, RFC 3339 text in SQLite.
    At(&'static str),
}

impl FactCol {
    fn name(self) -> &'static str {
        match self {
            FactCol::Int(n) | FactCol::Text(n) | FactCol::At(n) => n,
        }
    }
}

/// Creates a fact table in the target database.
async fn create_facts(fx: &mut Fixture, table: &str, columns: &[FactCol]) {
    let defs: Vec<String> = columns
        .iter()
        .map(|c| {
            let ty = match (fx.backend, c) {
                (Backend::Postgres | Backend::Citus, FactCol::Int(_)) => "bigint",
                (Backend::Postgres | Backend::Citus, FactCol::Text(_)) => "text",
                (Backend::Postgres | Backend::Citus, FactCol::At(_)) => "timestamptz",
                (Backend::Sqlite, FactCol::Int(_)) => "INTEGER",
                (Backend::Sqlite, _) => "TEXT",
            };
            format!("{} {ty}", c.name())
        })
        .collect();
    fx.target_exec(&format!("CREATE TABLE {table} ({})", defs.join(", ")))
        .await;
}

/// A fact table of the target, ordered by its first column, rendered alike on both
/// backends (timestamps as fixed-width UTC text).
async fn facts(fx: &mut Fixture, table: &str, columns: &[FactCol]) -> Dump {
    let exprs: Vec<String> = columns
        .iter()
        .map(|c| match (fx.backend, c) {
            (Backend::Postgres, FactCol::At(n)) => {
                format!("to_char({n} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
            }
            (Backend::Postgres | Backend::Citus, c) => format!("{}::text", c.name()),
            (Backend::Sqlite, c) => format!("CAST({} AS TEXT)", c.name()),
        })
        .collect();
    let mut rows = fx
        .target_query(&format!(
            // Qualified: PostgreSQL would order by the text output column of that name.
            "SELECT {} FROM {table} ORDER BY {table}.{}",
            exprs.join(", "),
            columns[0].name()
        ))
        .await;
    for row in &mut rows {
        for (value, c) in row.iter_mut().zip(columns) {
            if let (FactCol::At(_), Some(v)) = (c, value.as_ref()) {
                let t = Micros::parse(v, None).unwrap_or_else(|e| panic!("fact timestamp {v:?}: {e}"));
                *value = Some(t.to_text());
            }
        }
    }
    Dump {
        headers: columns.iter().map(|c| c.name().to_string()).collect(),
        rows,
    }
}

/// One column of a fact table as integers (NULL as `None`).
fn ints(dump: &Dump, column: &str) -> Vec<Option<i64>> {
    dump.values(column)
        .into_iter()
        .map(|v| {
            v.map(|s| {
                s.parse()
                    .unwrap_or_else(|_| panic!("{column}: {s:?} is not an integer"))
            })
        })
        .collect()
}
