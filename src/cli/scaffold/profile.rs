//! Reading the source: its catalog, and a few scans of the columns the guesses have to
//! judge. The only part of `dimlog new` that talks to a database.

use super::guess::{key_name_candidates, time_like};
use super::{quote_any, KeyStats, Profile, Request, TimeStats};
use crate::config::{Backend, Relation};
use crate::db::{sql, Conn};
use crate::extract::{SourceColumn, SourceSchema};
use crate::ident::Ident;
use crate::Error;

fn stat_statement(backend: Backend, statement: &str, table: &Ident, column: &str) -> Result<String, Error> {
    Ok(sql::statement(
        backend,
        "scaffold",
        statement,
        &serde_json::json!({"relation": table.quoted(), "column": quote_any(column)}),
    )?)
}

fn count(v: Option<&Option<String>>) -> i64 {
    v.and_then(|v| v.as_deref()).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Reads the table's catalog and profiles the few columns `generate` has to judge: the
/// `id`-like columns when there is no primary key (one scan each, for a distinct count)
/// and the timestamp-like columns (one scan each, for the newest value and NULLs).
pub async fn profile(conn: &mut Conn, request: &Request) -> Result<Profile, Error> {
    let backend = conn.backend();
    let schema = SourceSchema::load(conn, &Relation::Table(request.table.clone())).await?;
    let columns = schema.columns;
    let mut key_stats = Vec::new();
    let mut pk: Vec<&SourceColumn> = columns.iter().filter(|c| c.pk_position.is_some()).collect();
    pk.sort_by_key(|c| c.pk_position);
    let mut pk_stats = None;
    if request.key.is_empty() && !pk.is_empty() {
        let names: Vec<String> = pk.iter().map(|c| quote_any(&c.name)).collect();
        let sql = sql::statement(
            backend,
            "scaffold",
            "tuple_counts",
            &serde_json::json!({"relation": request.table.quoted(), "columns": names}),
        )?;
        let rows = conn.query_text("profiling the primary key", &sql, &[]).await?;
        let row = rows.into_iter().next().unwrap_or_default();
        pk_stats = Some(KeyStats {
            rows: count(row.first()),
            non_null: count(row.get(1)),
            distinct: count(row.get(2)),
        });
    }
    let pk_holds = pk_stats.as_ref().is_some_and(KeyStats::unique);
    if request.key.is_empty() && !pk_holds {
        for c in key_name_candidates(request.table.name(), &columns) {
            let sql = stat_statement(backend, "counts", &request.table, &c.name)?;
            let rows = conn.query_text("profiling a key candidate", &sql, &[]).await?;
            let row = rows.into_iter().next().unwrap_or_default();
            let stats = KeyStats {
                rows: count(row.first()),
                non_null: count(row.get(1)),
                distinct: count(row.get(2)),
            };
            key_stats.push((c.name.clone(), stats));
        }
    }
    let mut time_stats = Vec::new();
    for c in &columns {
        let chosen = request.updated_at.as_deref() == Some(c.name.as_str());
        if !(chosen || time_like(backend, c)) {
            continue;
        }
        let sql = stat_statement(backend, "newest", &request.table, &c.name)?;
        let rows = conn
            .query_text("profiling a change-column candidate", &sql, &[])
            .await?;
        let row = rows.into_iter().next().unwrap_or_default();
        let stats = TimeStats {
            newest: row.first().cloned().flatten(),
            nulls: count(row.get(1)),
        };
        time_stats.push((c.name.clone(), stats));
    }
    let inheriting = {
        let sql = sql::statement(backend, "scaffold", "inheriting", &serde_json::json!({}))?;
        conn.query_text(
            "finding tables that inherit from it",
            &sql,
            &[crate::db::Param::Text(request.table.quoted())],
        )
        .await?
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten())
    };
    Ok(Profile {
        backend,
        columns,
        key_stats,
        pk_stats,
        time_stats,
        inheriting,
    })
}
