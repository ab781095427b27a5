//! Rows moved from one SQLite database into another in this thread, through SQLite's own
//! interface (rusqlite on the handles sqlx lends out), not row by row through the driver.
//!
//! The driver runs each connection on a worker thread of its own and hands every row over
//! a channel, and a staging write goes back the same way: at a million rows the thread
//! hand-offs, wake-ups and per-row allocations cost more than SQLite's own work. Here both
//! handles are locked out of their workers (`lock_handle`: no statement of theirs runs
//! meanwhile), the read is stepped and each kept row is inserted with one prepared
//! statement. What a row becomes is the caller's (`each`), so the rules of a read stay in
//! one place, whichever way its rows travel.

use super::Cell;
use crate::db::{BindKind, DbError, Param, StreamError, TextRow};
use rusqlite::types::ValueRef;
use sqlx::SqliteConnection;

/// Why [`pump`] stopped early.
#[derive(Debug)]
pub enum PumpError<E> {
    /// Reading the source, or writing the target, failed.
    Stream(StreamError),
    /// The caller refused a row.
    Row(E),
    /// `stop` said so.
    Stopped,
}

/// Rows checked between two calls of `stop`: often enough to answer an interrupt at once,
/// rarely enough to cost nothing.
const STOP_EVERY: u64 = 4096;

/// Steps `select` (its `params` bound in order: SQLite numbers plain `?` the same way) on
/// `source`, hands each row, its values as text, to `each`, and inserts what `each` keeps
/// into `table` (`columns`, bound as `kinds` say, as [`super::bulk_insert`] binds them) on
/// `target`. A value that is not UTF-8 text ends it with [`StreamError::NotText`] and the
/// row's first `key_count` values. Returns the number of rows read.
///
/// It blocks its thread for the whole read (on a runtime of several threads it says so,
/// and the others go on), and checks `stop` every few thousand rows.
#[allow(clippy::too_many_arguments)]
pub async fn pump<E>(
    source: &mut SqliteConnection,
    target: &mut SqliteConnection,
    (select, params): (&str, &[Param]),
    key_count: usize,
    (table, columns, kinds): (&str, &[String], &[BindKind]),
    stop: &(dyn Fn() -> bool + Sync),
    each: impl FnMut(TextRow) -> Result<Option<TextRow>, E> + Send,
) -> Result<u64, PumpError<E>>
where
    E: Send,
{
    let locked = |what: &str, source: sqlx::Error| {
        PumpError::Stream(StreamError::Db(DbError::Query {
            what: what.into(),
            source,
        }))
    };
    let mut from_lock = source
        .lock_handle()
        .await
        .map_err(|e| locked("reading the source", e))?;
    let mut into_lock = target
        .lock_handle()
        .await
        .map_err(|e| locked("staging source rows", e))?;
    let from = Handle(from_lock.as_raw_handle().as_ptr());
    let into = Handle(into_lock.as_raw_handle().as_ptr());
    let insert = format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        columns.join(", "),
        vec!["?"; columns.len()].join(", ")
    );
    let work = move || {
        // SAFETY: both handles are open connections that their locks keep away from their
        // workers until this returns; `from_handle` borrows them (it never closes them),
        // and every statement made here is finalized before it returns.
        let (from, into) = unsafe {
            (
                rusqlite::Connection::from_handle(from.0),
                rusqlite::Connection::from_handle(into.0),
            )
        };
        let (from, into) = (
            from.map_err(|e| failed("reading the source", &e))?,
            into.map_err(|e| failed("staging source rows", &e))?,
        );
        step(&from, &into, (select, params), key_count, (&insert, kinds), stop, each)
    };
    let on_many_threads = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    let pumped = if on_many_threads {
        tokio::task::block_in_place(work)
    } else {
        work()
    };
    drop((from_lock, into_lock));
    pumped
}

/// A raw connection handle, lent by its lock.
struct Handle(*mut rusqlite::ffi::sqlite3);

fn failed<E>(what: &str, e: &rusqlite::Error) -> PumpError<E> {
    PumpError::Stream(StreamError::Db(DbError::Sqlite {
        what: what.into(),
        message: e.to_string(),
    }))
}

fn step<E>(
    from: &rusqlite::Connection,
    into: &rusqlite::Connection,
    (select, params): (&str, &[Param]),
    key_count: usize,
    (insert, kinds): (&str, &[BindKind]),
    stop: &(dyn Fn() -> bool + Sync),
    mut each: impl FnMut(TextRow) -> Result<Option<TextRow>, E>,
) -> Result<u64, PumpError<E>> {
    let reading = |e: rusqlite::Error| failed::<E>("reading the source", &e);
    let writing = |e: rusqlite::Error| failed::<E>("staging source rows", &e);
    let mut read = from.prepare(select).map_err(reading)?;
    let bound = read.parameter_count().min(params.len());
    for (i, p) in params.iter().take(bound).enumerate() {
        let value = match p {
            Param::Ts(t) => rusqlite::types::Value::Text(t.to_text()),
            Param::Text(s) => rusqlite::types::Value::Text(s.clone()),
            Param::I64(v) => rusqlite::types::Value::Integer(*v),
            other => {
                return Err(PumpError::Stream(StreamError::Db(DbError::Sqlite {
                    what: "reading the source".into(),
                    message: format!("a parameter of this read binds no value: {other:?}"),
                })))
            }
        };
        read.raw_bind_parameter(i + 1, value).map_err(reading)?;
    }
    let mut write = into.prepare(insert).map_err(writing)?;
    let width = read.column_count();
    let mut rows = read.raw_query();
    let mut count: u64 = 0;
    while let Some(row) = rows.next().map_err(reading)? {
        let mut values: TextRow = Vec::with_capacity(width);
        for i in 0..width {
            match text(row.get_ref(i).map_err(reading)?) {
                Ok(v) => values.push(v),
                Err(bytes) => {
                    let key = (0..key_count.min(width))
                        .map(|k| row.get_ref(k).map(text))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(reading)?;
                    return Err(PumpError::Stream(StreamError::NotText { key, column: i, bytes }));
                }
            }
        }
        count += 1;
        if let Some(cells) = each(values).map_err(PumpError::Row)? {
            for (i, (v, kind)) in cells.iter().zip(kinds).enumerate() {
                let at = i + 1;
                match Cell::of(v.as_deref(), *kind) {
                    Cell::Null => write.raw_bind_parameter(at, rusqlite::types::Null),
                    Cell::Int(n) => write.raw_bind_parameter(at, n),
                    Cell::Float(f) => write.raw_bind_parameter(at, f),
                    Cell::Text(s) => write.raw_bind_parameter(at, s),
                    Cell::Blob(b) => write.raw_bind_parameter(at, b),
                }
                .map_err(writing)?;
            }
            write.raw_execute().map_err(writing)?;
        }
        if count % STOP_EVERY == 0 && stop() {
            return Err(PumpError::Stopped);
        }
    }
    Ok(count)
}

/// A value as the read's text: NULL, or its bytes as UTF-8 (`Err` with the bytes when
/// they are not), as [`super::source_text`] reads one through the driver.
/// (The read casts every value to text, so numbers do not arrive.)
fn text(value: ValueRef<'_>) -> Result<Option<String>, Vec<u8>> {
    let bytes = match value {
        ValueRef::Null => return Ok(None),
        ValueRef::Integer(n) => return Ok(Some(n.to_string())),
        ValueRef::Real(f) => return Ok(Some(f.to_string())),
        ValueRef::Text(b) | ValueRef::Blob(b) => b,
    };
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(Some(s.to_string())),
        Err(_) => Err(bytes.to_vec()),
    }
}
