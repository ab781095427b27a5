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
use crate::ts::Micros;
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
    fn rises(&self, kinds: &[BindKind], prev: (&Batch, usize), next: (&Batch, usize)) -> bool {
        for (i, affinity) in self.affinities.iter().enumerate() {
            let at = self.first + i;
            let a = affinity.stored(prev.0.cell(prev.1, at, kinds[at]));
            let b = affinity.stored(next.0.cell(next.1, at, kinds[at]));
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
    fn known(&self, kinds: &[BindKind], (batch, row): (&Batch, usize)) -> bool {
        self.affinities.iter().enumerate().all(|(i, affinity)| {
            let at = self.first + i;
            affinity.stored(batch.cell(row, at, kinds[at])).is_some()
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

/// A batch of rows under way from the reading thread to the writing one: their values
/// one after another in `cells`, `width` to a row, the bytes of text and blobs in one
/// buffer. Refilled, never reallocated once grown, so a row costs no allocation.
pub struct Batch {
    width: usize,
    cells: Vec<Out>,
    bytes: Vec<u8>,
    /// Where a time is spelled before it is copied in.
    spelled: String,
}

/// One value of a [`Batch`]: text and blobs are spans of its buffer.
#[derive(Clone, Copy)]
enum Out {
    Null,
    Int(i64),
    Text(usize, usize),
    Blob(usize, usize),
}

impl Batch {
    fn new(width: usize) -> Batch {
        Batch {
            width,
            cells: Vec::with_capacity(width * BATCH),
            bytes: Vec::with_capacity(64 * BATCH),
            spelled: String::new(),
        }
    }

    fn rows(&self) -> usize {
        self.cells.len() / self.width
    }

    fn clear(&mut self) {
        self.cells.clear();
        self.bytes.clear();
    }

    /// The value of column `at` of row `row` as it binds to a column of `kind`: text by
    /// [`Cell::of`], the one rule of every SQLite write; numbers and blobs as they are.
    fn cell(&self, row: usize, at: usize, kind: BindKind) -> Cell<'_> {
        match self.cells[row * self.width + at] {
            Out::Null => Cell::Null,
            Out::Int(n) => Cell::Int(n),
            Out::Text(start, end) => Cell::of(Some(self.text(start, end)), kind),
            Out::Blob(start, end) => Cell::Blob(self.bytes[start..end].to_vec()),
        }
    }

    fn text(&self, start: usize, end: usize) -> &str {
        // SAFETY: a text span is only ever made of a `&str`'s bytes (see `RowOut::text`).
        unsafe { std::str::from_utf8_unchecked(&self.bytes[start..end]) }
    }

    /// Binds row `row`'s values, as `kinds` say, to `write` and inserts it.
    fn insert(&self, row: usize, write: &mut rusqlite::Statement<'_>, kinds: &[BindKind]) -> rusqlite::Result<()> {
        let cells = &self.cells[row * self.width..(row + 1) * self.width];
        for (i, (out, kind)) in cells.iter().zip(kinds).enumerate() {
            let at = i + 1;
            match *out {
                Out::Null => write.raw_bind_parameter(at, rusqlite::types::Null),
                Out::Int(n) => write.raw_bind_parameter(at, n),
                Out::Blob(start, end) => write.raw_bind_parameter(at, &self.bytes[start..end]),
                Out::Text(start, end) => match Cell::of(Some(self.text(start, end)), *kind) {
                    Cell::Null => write.raw_bind_parameter(at, rusqlite::types::Null),
                    Cell::Int(n) => write.raw_bind_parameter(at, n),
                    Cell::Float(f) => write.raw_bind_parameter(at, f),
                    Cell::Text(s) => write.raw_bind_parameter(at, s),
                    Cell::Blob(b) => write.raw_bind_parameter(at, b),
                },
            }?;
        }
        write.raw_execute().map(drop)
    }
}

/// The row being written into a [`Batch`]: its values, in the written columns' order.
/// A text value binds by its column's [`BindKind`] (as [`super::bulk_insert`] binds
/// text); a number or blob binds as it is.
pub struct RowOut<'b> {
    batch: &'b mut Batch,
}

impl RowOut<'_> {
    /// NULL.
    pub fn null(&mut self) {
        self.batch.cells.push(Out::Null);
    }

    /// An integer.
    pub fn int(&mut self, n: i64) {
        self.batch.cells.push(Out::Int(n));
    }

    /// Text, or NULL.
    pub fn text(&mut self, value: Option<&str>) {
        match value {
            None => self.null(),
            Some(s) => {
                let start = self.batch.bytes.len();
                self.batch.bytes.extend_from_slice(s.as_bytes());
                let end = self.batch.bytes.len();
                self.batch.cells.push(Out::Text(start, end));
            }
        }
    }

    /// A time, as text ([`Micros::to_text`]).
    pub fn time(&mut self, t: Micros) {
        let mut spelled = std::mem::take(&mut self.batch.spelled);
        spelled.clear();
        t.push_text(&mut spelled);
        self.text(Some(&spelled));
        self.batch.spelled = spelled;
    }

    /// A blob.
    pub fn blob(&mut self, bytes: &[u8]) {
        let start = self.batch.bytes.len();
        self.batch.bytes.extend_from_slice(bytes);
        let end = self.batch.bytes.len();
        self.batch.cells.push(Out::Blob(start, end));
    }
}

/// Steps `select` (its `params` bound in order: SQLite numbers plain `?` the same way) on
/// `source`, hands each row, its values as text, to `each`, which writes the row to keep
/// (all of `into`'s columns) or nothing, and inserts those rows into `into` on `target`.
/// A value that is not UTF-8 text ends it with [`StreamError::NotText`] and the row's
/// first `key_count` values; with a rising key, a written row whose key does not rise
/// over the one before it ends it with [`PumpError::OutOfOrder`]. Returns the number of
/// rows read.
///
/// The source is stepped, and `each` run, on a thread of its own while this one writes
/// (the two databases' work overlaps on two cores), in batches of a few hundred rows. The
/// values `each` is handed are borrowed from the read, and what it writes goes into a
/// batch refilled from row to row: a row costs no allocation, which at a million rows is
/// most of what the reading thread would otherwise do. It blocks this thread for the
/// whole read (on a runtime of several threads it says so, and the others go on), and
/// checks `stop` every few thousand rows.
pub async fn pump<E>(
    source: &mut SqliteConnection,
    target: &mut SqliteConnection,
    read: (&str, &[Param]),
    key_count: usize,
    into: PumpInto<'_>,
    stop: &(dyn Fn() -> bool + Sync),
    mut each: impl FnMut(&mut [Option<&str>], &mut RowOut<'_>) -> Result<(), E> + Send,
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
    let width = columns.len();
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
            let (batches, arriving) = std::sync::mpsc::sync_channel::<Batch>(BATCHES_IN_FLIGHT);
            // Written batches go back to be filled again.
            let (spent, written_back) = std::sync::mpsc::channel::<Batch>();
            let reader = scope.spawn(move || {
                let from = borrow(&from, "reading the source")?;
                let mut batch = Batch::new(width);
                let read = each_row_borrowed(&from, read, key_count, stop, |values| {
                    let before = batch.cells.len();
                    each(values, &mut RowOut { batch: &mut batch }).map_err(PumpError::Row)?;
                    let written = batch.cells.len() - before;
                    assert!(
                        written == 0 || written == width,
                        "a pumped row of {written} values for {width} columns"
                    );
                    if batch.rows() == BATCH {
                        let next = match written_back.try_recv() {
                            Ok(mut spare) => {
                                spare.clear();
                                spare
                            }
                            Err(_) => Batch::new(width),
                        };
                        let full = std::mem::replace(&mut batch, next);
                        // The writer stopped (and says why): so does the read.
                        batches.send(full).map_err(|_| PumpError::Stopped)?;
                    }
                    Ok(())
                })?;
                if batch.rows() > 0 {
                    batches.send(batch).map_err(|_| PumpError::Stopped)?;
                }
                Ok(read)
            });
            // The batch before, kept for its last row: the order check's first.
            let mut before: Option<Batch> = None;
            let mut written = Ok(());
            'batches: for batch in arriving.iter() {
                for row in 0..batch.rows() {
                    if let Some(rising) = rising {
                        let prev = match (row, &before) {
                            (0, None) => None,
                            (0, Some(b)) => Some((b, b.rows() - 1)),
                            (_, _) => Some((&batch, row - 1)),
                        };
                        let in_order = match prev {
                            None => rising.known(kinds, (&batch, row)),
                            Some(prev) => rising.rises(kinds, prev, (&batch, row)),
                        };
                        if !in_order {
                            written = Err(PumpError::OutOfOrder);
                            break 'batches;
                        }
                    }
                    if let Err(e) = batch.insert(row, &mut write, kinds) {
                        written = Err(writing(&e));
                        break 'batches;
                    }
                }
                if let Some(done) = before.replace(batch) {
                    let _ = spent.send(done);
                }
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
    read: (&str, &[Param]),
    key_count: usize,
    stop: &(dyn Fn() -> bool + Sync),
    mut each: impl FnMut(TextRow) -> Result<(), PumpError<E>>,
) -> Result<u64, PumpError<E>> {
    each_row_borrowed(from, read, key_count, stop, |values| {
        each(values.iter().map(|v| v.map(str::to_string)).collect())
    })
}

/// [`each_row`] with each row's values borrowed from the read, in a buffer reused from
/// row to row (see [`recycled`]).
fn each_row_borrowed<E>(
    from: &rusqlite::Connection,
    (select, params): (&str, &[Param]),
    key_count: usize,
    stop: &(dyn Fn() -> bool + Sync),
    mut each: impl FnMut(&mut [Option<&str>]) -> Result<(), PumpError<E>>,
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
    // Numbers as text, for the few reads that do not cast them (see `text`).
    let mut numbers: Vec<String> = Vec::new();
    let mut spare: Vec<Option<&str>> = Vec::with_capacity(width);
    while let Some(row) = rows.next().map_err(reading)? {
        numbers.clear();
        for i in 0..width {
            match row.get_ref(i).map_err(reading)? {
                ValueRef::Integer(n) => numbers.push(n.to_string()),
                ValueRef::Real(f) => numbers.push(f.to_string()),
                _ => {}
            }
        }
        let mut values = recycled(std::mem::take(&mut spare));
        let mut number = numbers.iter();
        for i in 0..width {
            let bytes = match row.get_ref(i).map_err(reading)? {
                ValueRef::Null => {
                    values.push(None);
                    continue;
                }
                ValueRef::Integer(_) | ValueRef::Real(_) => {
                    values.push(number.next().map(String::as_str));
                    continue;
                }
                ValueRef::Text(b) | ValueRef::Blob(b) => b,
            };
            match std::str::from_utf8(bytes) {
                Ok(s) => values.push(Some(s)),
                Err(_) => {
                    let key = (0..key_count.min(width))
                        .map(|k| row.get_ref(k).map(text))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(reading)?;
                    return Err(PumpError::Stream(StreamError::NotText {
                        key,
                        column: i,
                        bytes: bytes.to_vec(),
                    }));
                }
            }
        }
        count += 1;
        each(&mut values)?;
        spare = recycled(values);
        if count.is_multiple_of(STOP_EVERY) && stop() {
            return Err(PumpError::Stopped);
        }
    }
    Ok(count)
}

/// `values` emptied, to hold values of another lifetime (a row read after them) in the
/// same allocation: collecting a vector's own iterator into one of a type of the same
/// layout reuses its buffer.
fn recycled<'b>(mut values: Vec<Option<&str>>) -> Vec<Option<&'b str>> {
    values.clear();
    values.into_iter().map(|_| None).collect()
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

#[cfg(test)]
mod tests {
    use super::recycled;

    /// The reading thread's per-row buffer stays one allocation from row to row.
    #[test]
    fn a_recycled_buffer_keeps_its_allocation() {
        let first = String::from("first row");
        let mut values: Vec<Option<&str>> = Vec::with_capacity(12);
        values.extend([Some(first.as_str()), None]);
        let (at, capacity) = (values.as_ptr() as usize, values.capacity());
        let second = String::from("second row");
        let mut again = recycled(values);
        drop(first);
        assert!(again.is_empty());
        assert_eq!((again.as_ptr() as usize, again.capacity()), (at, capacity));
        again.push(Some(second.as_str()));
        assert_eq!(again, [Some("second row")]);
    }
}
