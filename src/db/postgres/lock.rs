//! A dimension's lock on PostgreSQL: a session advisory lock, released by
//! [`unlock`] or when the connection ends, so a killed run never leaves it behind.

use crate::db::{sql, Backend, Conn, DbError, Param};

fn empty() -> serde_json::Value {
    serde_json::json!({})
}

/// The advisory-lock number of a dimension: derived from its name.
fn lock_id(dimension: &str) -> i64 {
    let h = blake3::hash(format!("dimlog:{dimension}").as_bytes());
    i64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// Takes the lock, waiting for it when `wait`; else [`DbError::Locked`] naming who
/// holds it.
pub async fn lock(conn: &mut Conn, dimension: &str, wait: bool) -> Result<(), DbError> {
    let id = Param::I64(lock_id(dimension));
    if wait {
        let sql = sql::statement(Backend::Postgres, "state", "lock", &empty())?;
        conn.execute("waiting for the dimension's lock", &sql, &[id]).await?;
        return Ok(());
    }
    let sql = sql::statement(Backend::Postgres, "state", "try_lock", &empty())?;
    let got = conn.query_text("taking the dimension's lock", &sql, &[id]).await?;
    if got.first().and_then(|r| r.first().cloned().flatten()).as_deref() != Some("true") {
        let holder = lock_holder(conn, dimension).await;
        return Err(DbError::Locked {
            dimension: dimension.to_string(),
            holder,
        });
    }
    Ok(())
}

/// Releases the lock (errors ignored: the session's end releases it too).
pub async fn unlock(conn: &mut Conn, dimension: &str) {
    if let Ok(sql) = sql::statement(Backend::Postgres, "state", "unlock", &empty()) {
        let _ = conn
            .execute(
                "releasing the dimension's lock",
                &sql,
                &[Param::I64(lock_id(dimension))],
            )
            .await;
    }
}

/// Who holds the lock, as ` (session …)` for [`DbError::Locked`]: the session's pid,
/// application, user and since when, and how to end it if the dimlog that opened it is
/// gone (a killed client's session lives on until its statement ends). Empty when the
/// database does not say.
async fn lock_holder(conn: &mut Conn, dimension: &str) -> String {
    let Ok(sql) = sql::statement(Backend::Postgres, "state", "lock_holder", &empty()) else {
        return String::new();
    };
    let rows = conn
        .query_text(
            "finding who holds the dimension's lock",
            &sql,
            &[Param::I64(lock_id(dimension))],
        )
        .await
        .unwrap_or_default();
    let Some(r) = rows.first() else {
        return String::new();
    };
    let v = |i: usize| r.get(i).cloned().flatten().unwrap_or_default();
    let state = if v(3).is_empty() {
        String::new()
    } else {
        format!(", {}", v(3))
    };
    format!(
        " (session {pid}: application {app:?}, user {user:?}, connected since {since}{state}; if the dimlog that opened it is gone, \
         end it with SELECT pg_terminate_backend({pid}))",
        pid = v(0),
        app = v(1),
        user = v(2),
        since = v(4),
    )
}
