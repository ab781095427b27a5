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
    if try_lock(conn, dimension).await? {
        return Ok(());
    }
    let holder = lock_holder(conn, dimension).await;
    if !wait {
        return Err(DbError::Locked {
            dimension: dimension.to_string(),
            holder,
        });
    }
    // Waited for by asking again, not in one blocking call, so that a long wait is
    // reported while it lasts (a run that seems to hang is waiting for another).
    tracing::warn!("waiting for the lock of dimension {dimension}, held by another run{holder}");
    let started = std::time::Instant::now();
    let mut next_report = REPORT_EVERY;
    loop {
        tokio::time::sleep(POLL).await;
        if try_lock(conn, dimension).await? {
            tracing::info!(
                "took the lock of dimension {dimension} after waiting {}",
                crate::ts::for_people(started.elapsed())
            );
            return Ok(());
        }
        if started.elapsed() >= next_report {
            let holder = lock_holder(conn, dimension).await;
            tracing::warn!(
                "still waiting for the lock of dimension {dimension} ({} so far), held by another run{holder}",
                crate::ts::for_people(started.elapsed())
            );
            next_report += REPORT_EVERY;
        }
    }
}

/// How often a waiting run asks for the lock again.
const POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// How often a waiting run says it still waits.
const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Takes the lock if it is free; false if another session holds it.
async fn try_lock(conn: &mut Conn, dimension: &str) -> Result<bool, DbError> {
    let sql = sql::statement(Backend::Postgres, "state", "try_lock", &empty())?;
    let got = conn
        .query_text("taking the dimension's lock", &sql, &[Param::I64(lock_id(dimension))])
        .await?;
    Ok(got.first().and_then(|r| r.first().cloned().flatten()).as_deref() == Some("true"))
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
/// gone and it stays (a killed dimlog's session ends on its own within a second on
/// PostgreSQL 14 and later, after its rollback; before 14, and with a client that hangs
/// rather than dies, it lives on). Empty when the database does not say.
pub async fn lock_holder(conn: &mut Conn, dimension: &str) -> String {
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
    // PostgreSQL shows another role's session times to its members only.
    let since = if v(4).is_empty() {
        String::new()
    } else {
        format!(", connected since {}", v(4))
    };
    format!(
        " (session {pid}: application {app:?}, user {user:?}{since}{state}; if the dimlog that opened it is gone \
         and the session stays after its rollback, end it with SELECT pg_terminate_backend({pid}))",
        pid = v(0),
        app = v(1),
        user = v(2),
    )
}
