//! Rows moved from one SQLite database into another through SQLite's own interface
//! (rusqlite on the handles sqlx lends out), not row by row through the driver.
//!
//! The driver runs each connection on a worker thread of its own and hands every row over
//! a channel, and a staging write goes back the same way: at a million rows the thread
//! hand-offs, wake-ups and per-row allocations cost more than SQLite's own work. Here both
//! handles are locked out of their workers (`lock_handle`: no statement of theirs runs
//! meanwhile); the read is stepped on a thread of its own, which hands kept rows over in
//! batches, and each is inserted with one prepared statement on the caller's thread, so
//! that reading and writing overlap. What a row becomes is the caller's (`each`), so the
//! rules of a read stay in one place, whichever way its rows travel.

use super::Cell;
use crate::db::{BindKind, DbError, Param, StreamError, TextRow};
use rusqlite::types::ValueRef;
use sqlx::SqliteConnection;

/// Why [`pump`] stopped early.
#[derive(Debug)]
pub enum PumpError<E> {
    /// Reading the source failed.
    Stream(StreamError),
    /// Writing the target failed (its disk full, say): the target's error, not the
    /// source's.
    Write(DbError),
    /// The caller refused a row.
    Row(E),
    /// `stop` said so.
    Stopped,
    /// A row's key did not rise over the row's before it (see [`RisingKey`]).
    OutOfOrder,
}

/// Where [`pump`] writes: `table`, its `columns` bound as `kinds` say (as
/// [`super::bulk_insert`] binds them), and the key that must rise from row to row, if any.
pub struct PumpInto<'a> {
    /// The table, quoted.
    pub table: &'a str,
    /// Its columns written, quoted.
    pub columns: &'a [String],
    /// How each column binds.
    pub kinds: &'a [BindKind],
    /// The key the rows must arrive in the order of.
    pub rising: Option<&'a RisingKey>,
}

/// Columns of the rows [`pump`] writes whose values must rise from row to row, as SQLite
/// orders them once stored in the target's columns (a first load numbers rows as they
/// arrive, which is right only if they arrive in the order the target would sort them).
pub struct RisingKey {
    /// The place of the first such column in a written row; the others follow it.
    first: usize,
    /// Each column's affinity in the target: it decides what a bound value is stored as.
    affinities: Vec<Affinity>,
}

impl RisingKey {
    /// The key whose columns begin at `first` in a written row and are declared in the
    /// target with the types `declared`.
    pub fn new(first: usize, declared: &[String]) -> RisingKey {
        RisingKey {
            first,
            affinities: declared.iter().map(|d| Affinity::of(d)).collect(),
        }
    }

    /// Whether `next` sorts after `prev` in the target, by their stored values (compared
    /// as SQLite compares them: numbers, then text bytewise, then blobs). A value whose
    /// stored form this cannot tell for sure (text a numeric column may convert, a
    /// number a text column turns into text, any real) counts as not rising.
    fn rises(&self, kinds: &[BindKind], prev: &TextRow, next: &TextRow) -> bool {
        for (i, affinity) in self.affinities.iter().enumerate() {
            let at = self.first + i;
            let a = affinity.stored(Cell::of(prev[at].as_deref(), kinds[at]));
            let b = affinity.stored(Cell::of(next[at].as_deref(), kinds[at]));
            let (Some(a), Some(b)) = (a, b) else {
                return false;
            };
            match a.partial_cmp(&b) {
                Some(std::cmp::Ordering::Less) => return true,
                Some(std::cmp::Ordering::Equal) => {}
                _ => return false,
            }
        }
        false
    }

    /// Whether the first row's key has a stored form this can tell (see [`RisingKey::rises`]).
    fn known(&self, kinds: &[BindKind], row: &TextRow) -> bool {
        self.affinities.iter().enumerate().all(|(i, affinity)| {
            let at = self.first + i;
            affinity.stored(Cell::of(row[at].as_deref(), kinds[at])).is_some()
        })
    }
}

/// A column's type affinity, by SQLite's rules on its declared type
/// (<https://sqlite.org/datatype3.html#determination_of_column_affinity>).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Affinity {
    Integer,
    Text,
    Blob,
    Real,
    Numeric,
}

impl Affinity {
    fn of(declared: &str) -> Affinity {
        let t = declared.to_ascii_uppercase();
        if t.contains("INT") {
            Affinity::Integer
        } else if ["CHAR", "CLOB", "TEXT"].iter().any(|w| t.contains(w)) {
            Affinity::Text
        } else if t.contains("BLOB") || t.trim().is_empty() {
            Affinity::Blob
        } else if ["REAL", "FLOA", "DOUB"].iter().any(|w| t.contains(w)) {
            Affinity::Real
        } else {
            Affinity::Numeric
        }
    }

    /// What a bound value is stored as in a column of this affinity, where that is sure
    /// and compares as below.
    fn stored<'a>(self, cell: Cell<'a>) -> Option<Stored<'a>> {
        match (self, cell) {
            (_, Cell::Null | Cell::Float(_)) | (Affinity::Real, _) => None,
            (_, Cell::Blob(b)) => Some(Stored::Blob(b)),
            (Affinity::Integer | Affinity::Numeric | Affinity::Blob, Cell::Int(n)) => Some(Stored::Int(n)),
            (Affinity::Text | Affinity::Blob, Cell::Text(s)) => Some(Stored::Text(s)),
            (Affinity::Text, Cell::Int(_)) | (Affinity::Integer | Affinity::Numeric, Cell::Text(_)) => None,
        }
    }
}

/// A stored value, ordered as SQLite orders values of a column with the BINARY collation:
/// integers, then text bytewise, then blobs bytewise (the variants' order).
#[derive(Debug, PartialEq, PartialOrd)]
enum Stored<'a> {
    Int(i64),
    Text(&'a str),
    Blob(Vec<u8>),
}

/// Rows checked between two calls of `stop`: often enough to answer an interrupt at once,
/// rarely enough to cost nothing.
const STOP_EVERY: u64 = 4096;

/// Steps `select` (its `params` bound in order: SQLite numbers plain `?` the same way) on
/// `source`, hands each row, its values as text, to `each`, and inserts what `each` keeps
/// into `into` on `target`. A value that is not UTF-8 text ends it with
/// [`StreamError::NotText`] and the row's first `key_count` values; with a rising key, a
/// written row whose key does not rise over the one before it ends it with
/// [`PumpError::OutOfOrder`]. Returns the number of rows read.
///
/// The source is stepped, and `each` run, on a thread of its own while this one writes
/// (the two databases' work overlaps on two cores), in batches of a few hundred rows. It
/// blocks this thread for the whole read (on a runtime of several threads it says so, and
/// the others go on), and checks `stop` every few thousand rows.
pub async fn pump<E>(
    source: &mut SqliteConnection,
    target: &mut SqliteConnection,
    read: (&str, &[Param]),
    key_count: usize,
    into: PumpInto<'_>,
    stop: &(dyn Fn() -> bool + Sync),
    mut each: impl FnMut(TextRow) -> Result<Option<TextRow>, E> + Send,
) -> Result<u64, PumpError<E>>
where
    E: Send,
{
    let mut from_lock = source
        .lock_handle()
        .await
        .map_err(|e| locked("reading the source", e))?;
    let PumpInto {
        table,
        columns,
        kinds,
        rising,
    } = into;
    let mut into_lock = target.lock_handle().await.map_err(|source| {
        PumpError::Write(DbError::Query {
            what: "writing the target".into(),
            source,
        })
    })?;
    let from = Handle(from_lock.as_raw_handle().as_ptr());
    let into = Handle(into_lock.as_raw_handle().as_ptr());
    let insert = format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        columns.join(", "),
        vec!["?"; columns.len()].join(", ")
    );
    let pumped = blocking(move || {
        let writing = |e: &rusqlite::Error| {
            PumpError::<E>::Write(DbError::Sqlite {
                what: "writing the target".into(),
                message: e.to_string(),
            })
        };
        // SAFETY: see `borrow`.
        let into = unsafe { rusqlite::Connection::from_handle(into.0) }.map_err(|e| writing(&e))?;
        let mut write = into.prepare(&insert).map_err(|e| writing(&e))?;
        std::thread::scope(|scope| {
            let (batches, arriving) = std::sync::mpsc::sync_channel::<Vec<TextRow>>(BATCHES_IN_FLIGHT);
            // Written batches go back to be freed where they were allocated: freeing
            // another thread's allocations would contend for the allocator's locks.
            let (spent, written_back) = std::sync::mpsc::channel::<Vec<TextRow>>();
            let reader = scope.spawn(move || {
                let from = borrow(&from, "reading the source")?;
                let mut batch = Vec::with_capacity(BATCH);
                // Written batches, emptied, to fill again: a new batch's buffer is a large
                // allocation, and glibc's malloc answers one by first merging every small
                // block freed since (the rows of the batch before), a tenth of the read.
                let mut spare: Vec<Vec<TextRow>> = Vec::with_capacity(BATCHES_IN_FLIGHT + 2);
                let read = each_row(&from, read, key_count, stop, |values| {
                    if let Some(cells) = each(values).map_err(PumpError::Row)? {
                        batch.push(cells);
                        if batch.len() == BATCH {
                            for mut written in written_back.try_iter() {
                                written.clear();
                                spare.push(written);
                            }
                            let next = spare.pop().unwrap_or_else(|| Vec::with_capacity(BATCH));
                            let full = std::mem::replace(&mut batch, next);
                            // The writer stopped (and says why): so does the read.
                            batches.send(full).map_err(|_| PumpError::Stopped)?;
                        }
                    }
                    Ok(())
                })?;
                if !batch.is_empty() {
                    batches.send(batch).map_err(|_| PumpError::Stopped)?;
                }
                Ok(read)
            });
            // The last row of the batch before, for the order check.
            let mut carried: Option<TextRow> = None;
            let mut written = Ok(());
            'batches: for batch in arriving.iter() {
                for (i, cells) in batch.iter().enumerate() {
                    if let Some(rising) = rising {
                        let prev = if i == 0 { carried.as_ref() } else { batch.get(i - 1) };
                        let in_order = match prev {
                            None => rising.known(kinds, cells),
                            Some(prev) => rising.rises(kinds, prev, cells),
                        };
                        if !in_order {
                            written = Err(PumpError::OutOfOrder);
                            break 'batches;
                        }
                    }
                    if let Err(e) = insert_row(&mut write, kinds, cells) {
                        written = Err(writing(&e));
                        break 'batches;
                    }
                }
                if rising.is_some() {
                    carried = batch.last().cloned();
                }
                let _ = spent.send(batch);
            }
            // (Dropping the receiving end ends a read still sending.)
            drop(arriving);
            let read = reader.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            written.and(read)
        })
    });
    drop((from_lock, into_lock));
    pumped
}

/// Rows the reading thread hands the writing one at a time, and batches under way: a few
/// thousand rows' worth of memory, enough that neither waits for the other.
const BATCH: usize = 512;
const BATCHES_IN_FLIGHT: usize = 8;

/// Binds one row's values, as `kinds` say, and inserts it.
fn insert_row(write: &mut rusqlite::Statement<'_>, kinds: &[BindKind], cells: &TextRow) -> rusqlite::Result<()> {
    for (i, (v, kind)) in cells.iter().zip(kinds).enumerate() {
        let at = i + 1;
        match Cell::of(v.as_deref(), *kind) {
            Cell::Null => write.raw_bind_parameter(at, rusqlite::types::Null),
            Cell::Int(n) => write.raw_bind_parameter(at, n),
            Cell::Float(f) => write.raw_bind_parameter(at, f),
            Cell::Text(s) => write.raw_bind_parameter(at, s),
            Cell::Blob(b) => write.raw_bind_parameter(at, b),
        }?;
    }
    write.raw_execute().map(drop)
}

/// Steps `read` on `conn` and hands each row, its values as text, to `each`, in this
/// thread (see [`pump`]): a whole-table read of a value or two per row, such as the
/// source's oldest change, costs SQLite's scan and no more.
pub async fn scan<E>(
    conn: &mut SqliteConnection,
    read: (&str, &[Param]),
    key_count: usize,
    mut each: impl FnMut(TextRow) -> Result<(), E> + Send,
) -> Result<u64, PumpError<E>>
where
    E: Send,
{
    let mut lock = conn.lock_handle().await.map_err(|e| locked("reading the source", e))?;
    let handle = Handle(lock.as_raw_handle().as_ptr());
    let scanned = blocking(move || {
        let conn = borrow(&handle, "reading the source")?;
        each_row(&conn, read, key_count, &|| false, |row| {
            each(row).map_err(PumpError::Row)
        })
    });
    drop(lock);
    scanned
}

fn locked<E>(what: &str, source: sqlx::Error) -> PumpError<E> {
    PumpError::Stream(StreamError::Db(DbError::Query {
        what: what.into(),
        source,
    }))
}

/// Runs `work`, telling a runtime of several threads that it blocks this one (the
/// others go on meanwhile).
fn blocking<T>(work: impl FnOnce() -> T) -> T {
    let on_many_threads = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if on_many_threads {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// A raw connection handle, lent by its lock.
struct Handle(*mut rusqlite::ffi::sqlite3);

// SAFETY: a lent handle is used by one thread at a time: [`pump`] moves the source's to
// the thread that reads it, which is joined before the lock is dropped. SQLite lets a
// connection change threads when no two use it at once (its multi-thread mode, the
// least any build of it gives an open connection).
unsafe impl Send for Handle {}

/// The connection of a lent handle, for as long as its lock is held.
fn borrow<E>(handle: &Handle, what: &str) -> Result<rusqlite::Connection, PumpError<E>> {
    // SAFETY: the handle is an open connection that its lock keeps away from its worker
    // until the caller drops the lock, after the returned connection; `from_handle`
    // borrows it (it never closes it), and every statement made on it is finalized
    // before the caller's work returns.
    unsafe { rusqlite::Connection::from_handle(handle.0) }.map_err(|e| failed(what, &e))
}

fn failed<E>(what: &str, e: &rusqlite::Error) -> PumpError<E> {
    PumpError::Stream(StreamError::Db(DbError::Sqlite {
        what: what.into(),
        message: e.to_string(),
    }))
}

/// Steps `select` (its `params` bound in order) on `from` and hands each row, as text,
/// to `each`; checks `stop` every [`STOP_EVERY`] rows. Returns the number of rows read.
fn each_row<E>(
    from: &rusqlite::Connection,
    (select, params): (&str, &[Param]),
    key_count: usize,
    stop: &(dyn Fn() -> bool + Sync),
    mut each: impl FnMut(TextRow) -> Result<(), PumpError<E>>,
) -> Result<u64, PumpError<E>> {
    let reading = |e: rusqlite::Error| failed::<E>("reading the source", &e);
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
        each(values)?;
        if count.is_multiple_of(STOP_EVERY) && stop() {
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
