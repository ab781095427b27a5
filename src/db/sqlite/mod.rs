//! SQLite specifics: connecting (WAL, a busy timeout, read-only modes), binding, batched
//! inserts.

pub mod dialect;
pub mod new_file;
pub mod pump;
use crate::db::DbUrl;
use crate::db::{Access, BindKind, DbError, Param, TextRow};
use sqlx::sqlite::{SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqliteRow};
use sqlx::{Arguments, ConnectOptions, Row, SqliteConnection, ValueRef};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a run waits for another run's write lock before giving up.
pub const LOCK_WAIT: Duration = Duration::from_secs(3600);

/// The page cache of a connection that writes, in KiB (SQLite's default is 2 MiB): a
/// load's sorts, index builds and transaction spill to disk well before they end with the
/// default. Pages are taken as used, so a small run stays small.
const LOAD_CACHE: &str = "-16384";

/// The page size of a file dimlog creates, in bytes (SQLite's default is 4096; a file
/// keeps the size it was created with). Each page costs a b-tree cell split, a cache
/// entry and, in WAL mode, a frame written twice: at a million rows, 16 KiB pages build
/// the log, its indexes and the dimension, and commit them, about a second sooner than
/// 4 KiB ones, and a few changed rows still touch a few pages.
pub(crate) const NEW_FILE_PAGE_SIZE: u32 = 16384;

/// The longest file name, in bytes, on the file systems dimlog meets (Linux's `NAME_MAX`).
pub(crate) const NAME_MAX: usize = 255;

/// Opens a SQLite file for `access` (see [`Access`]). A file that is written is put in
/// WAL mode, so readers never block the run; a file that is only read keeps its journal
/// mode (changing it is a write). Only [`Access::Create`] creates a missing file.
///
/// A WAL-mode file is read through its `-wal` and `-shm` files. A reader that may write
/// the file's folder but not the file would create them itself, owned by its OS user with
/// the file's permissions, and the file's owner could then no longer write it. So a
/// read-only connection ([`Access::is_read_only`]) of a user who may not write the file
/// uses the companions that exist (an open connection of the owner's, or a run that did
/// not get to close, leaves them), and when one is missing it refuses with
/// [`DbError::WouldCreateFiles`] instead of creating it. A user who may write the file
/// (its owner, root) opens it for writing, so the last connection to close removes the
/// companions, and SQLite gives any it creates the file's permissions (and, for root,
/// its owner).
pub async fn connect(url: &DbUrl, access: Access) -> Result<SqliteConn, DbError> {
    let err = |source| DbError::Connect {
        url: url.redacted(),
        source,
    };
    let opts = SqliteConnectOptions::from_str(url.expose())
        .map_err(err)?
        .busy_timeout(LOCK_WAIT)
        .disable_statement_logging();
    refuse_unwritable(url, access)?;
    if let Some(path) = url.sqlite_path().filter(|p| !is_in_memory(url, p)) {
        // Named as an absolute path: where dimlog looked.
        let absolute = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
        match path.try_exists() {
            Ok(false) if access != Access::Create => return Err(DbError::NoDatabase { path: absolute }),
            // A folder on the way this user may not enter.
            Err(_) => return Err(DbError::NotReadable { path: absolute }),
            Ok(true) if !may_read(&path) => return Err(DbError::NotReadable { path: absolute }),
            _ => {}
        }
    }
    if access.is_read_only() {
        if let Some(path) = url.sqlite_path().filter(|p| !is_in_memory(url, p)) {
            refuse_foreign_companions(&path)?;
        }
    }
    // A file on a read-only file system (a snapshot, a read-only export) cannot change
    // while nothing may write there, and SQLite cannot make the `-shm` file it reads a WAL
    // file through: it is read as immutable, once no `-wal` holds changes not yet in it.
    // (With its `-shm` there as well, SQLite reads both read-only, as usual.)
    let read_only_medium = url
        .sqlite_path()
        .filter(|p| !is_in_memory(url, p) && access.is_read_only() && on_read_only_medium(p));
    let mut immutable = false;
    if let Some(path) = &read_only_medium {
        let companion = |suffix: &str| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            std::path::PathBuf::from(p)
        };
        let (wal, shm) = (companion("-wal"), companion("-shm"));
        let changes_in_wal = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
        immutable = !changes_in_wal;
        if changes_in_wal && !shm.exists() {
            let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
            return Err(DbError::WalOnReadOnlyMedium {
                path: absolute(path),
                wal: absolute(&wal),
            });
        }
    }
    let opts = match access {
        Access::ReadOnly | Access::QueryOnly if read_only_medium.is_some() => {
            opts.read_only(true).immutable(immutable).pragma("query_only", "ON")
        }
        Access::ReadOnly => opts.read_only(true).pragma("query_only", "ON"),
        Access::QueryOnly => opts
            .read_only(false)
            .create_if_missing(false)
            .pragma("query_only", "ON"),
        Access::ReadWrite => opts
            .read_only(false)
            .create_if_missing(false)
            .journal_mode(SqliteJournalMode::Wal)
            .pragma("cache_size", LOAD_CACHE),
        Access::Create => opts
            .read_only(false)
            .create_if_missing(true)
            .page_size(NEW_FILE_PAGE_SIZE)
            .journal_mode(SqliteJournalMode::Wal)
            .pragma("cache_size", LOAD_CACHE),
    };
    SqliteConn::new(opts.connect().await.map_err(err)?, url).await
}

/// A SQLite connection whose running statement another task can stop.
///
/// SQLite runs a statement to its end inside one call on the driver's worker thread, so
/// dropping the future that waits for it stops nothing: an interrupted run would wait for
/// a statement of minutes, holding the file's write lock. Every connection has a progress
/// handler that SQLite calls every few thousand instructions; it ends the statement with
/// `SQLITE_INTERRUPT` once [`SqliteConn::stop_running`] raises the connection's flag.
pub struct SqliteConn {
    conn: SqliteConnection,
    stop: Arc<AtomicBool>,
}

/// Virtual machine instructions between two looks at the stop flag: well under a
/// millisecond, at the cost of a load of one atomic.
const INSTRUCTIONS_BETWEEN_LOOKS: i32 = 4096;

/// How long [`SqliteConn::stop_running`] waits for the statement to end.
const STOP_WAIT: Duration = Duration::from_secs(5);

impl SqliteConn {
    async fn new(mut conn: SqliteConnection, url: &DbUrl) -> Result<SqliteConn, DbError> {
        let stop = Arc::new(AtomicBool::new(false));
        let raised = Arc::clone(&stop);
        let mut handle = conn.lock_handle().await.map_err(|source| DbError::Connect {
            url: url.redacted(),
            source,
        })?;
        // (Returning false ends the statement.)
        handle.set_progress_handler(INSTRUCTIONS_BETWEEN_LOOKS, move || !raised.load(Ordering::Relaxed));
        // A double-quoted name that names no column is an error, not the string of its
        // letters (SQLite's legacy fallback): a `source.query` column renamed at the
        // source would otherwise load its own name as every row's value.
        // SAFETY: the locked handle is an open connection that no statement uses while the
        // lock is held, and this option takes an int and a (null) int pointer.
        let raw = handle.as_raw_handle().as_ptr();
        unsafe {
            rusqlite::ffi::sqlite3_db_config(
                raw,
                rusqlite::ffi::SQLITE_DBCONFIG_DQS_DML,
                0 as std::ffi::c_int,
                std::ptr::null_mut::<std::ffi::c_int>(),
            );
        }
        drop(handle);
        Ok(SqliteConn { conn, stop })
    }

    /// Ends the statement the connection runs, if any, and waits (a few seconds at most)
    /// until it has; statements after it run as usual.
    pub async fn stop_running(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The handle is lent once the worker is done with the statement it runs.
        let _ = tokio::time::timeout(STOP_WAIT, self.conn.lock_handle()).await;
        self.stop.store(false, Ordering::Relaxed);
    }

    /// The connection itself, to close it.
    pub fn into_inner(self) -> SqliteConnection {
        self.conn
    }
}

impl std::ops::Deref for SqliteConn {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for SqliteConn {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }
}

/// Whether `url` names a SQLite file that does not exist (an in-memory database is never
/// missing).
pub fn file_missing(url: &DbUrl) -> bool {
    url.sqlite_path()
        .filter(|p| !is_in_memory(url, p))
        .is_some_and(|p| !p.exists())
}

/// Whether a connection holds a write transaction on the SQLite file of `url` now (a
/// run's lock): a probe that asks for the write lock without waiting and gives it back
/// at once, writing nothing. `None` when it cannot tell: no file, or one this process
/// may not write (a reader cannot ask for the write lock).
pub async fn writer_active(url: &DbUrl) -> Option<bool> {
    if file_missing(url) || refuse_unwritable(url, Access::ReadWrite).is_err() {
        return None;
    }
    let mut conn = SqliteConnectOptions::from_str(url.expose())
        .ok()?
        .read_only(false)
        .create_if_missing(false)
        .busy_timeout(Duration::ZERO)
        .disable_statement_logging()
        .connect()
        .await
        .ok()?;
    let busy = match sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut conn).await {
        Ok(_) => {
            let _ = sqlx::raw_sql("ROLLBACK").execute(&mut conn).await;
            Some(false)
        }
        Err(source) => Some(
            DbError::Query {
                what: "probing the write lock".into(),
                source,
            }
            .is_busy(),
        )
        .filter(|&busy| busy),
    };
    let _ = sqlx::Connection::close(conn).await;
    busy
}

/// A private, empty in-memory database: what a target file that does not exist yet holds,
/// for the commands that must not create it (see [`crate::pipeline::Session::open`]).
pub async fn connect_empty(url: &DbUrl) -> Result<SqliteConn, DbError> {
    let conn = SqliteConnectOptions::from_str("sqlite::memory:")
        .map(|o| o.busy_timeout(LOCK_WAIT).disable_statement_logging())
        .map_err(|source| DbError::Connect {
            url: url.redacted(),
            source,
        })?
        .connect()
        .await
        .map_err(|source| DbError::Connect {
            url: url.redacted(),
            source,
        })?;
    SqliteConn::new(conn, url).await
}

/// [`DbError::NotWritable`] when `access` writes (neither [`Access::ReadOnly`] nor
/// [`Access::QueryOnly`]) and this process may not write the SQLite file of `url`, or,
/// when the file does not exist and `access` is [`Access::Create`], its folder. Checked
/// before anything is opened, so a refused command leaves no file behind (an in-memory
/// database, and a missing file for an access that does not create it, pass).
pub fn refuse_unwritable(url: &DbUrl, access: Access) -> Result<(), DbError> {
    if access.is_read_only() {
        return Ok(());
    }
    let Some(path) = url.sqlite_path().filter(|p| !is_in_memory(url, p)) else {
        return Ok(());
    };
    let path = std::path::absolute(&path).unwrap_or(path);
    if on_read_only_medium(&path) {
        return Err(DbError::ReadOnlyMedium { path });
    }
    // A file to create: SQLite names the files it writes beside it after it (`-journal`
    // the longest), and one it cannot create fails the run part-way with "unable to open
    // database file", after creating the file itself.
    let longest_name = NAME_MAX - "-journal".len();
    if let Some(bytes) = path.file_name().map(|n| n.len()).filter(|&b| b > longest_name) {
        if !path.exists() {
            return Err(DbError::NameTooLong {
                path,
                bytes,
                max: NAME_MAX,
            });
        }
    }
    if path.exists() {
        if !may_write(&path) {
            return Err(DbError::NotWritable { path, folder: None });
        }
        // A connection that writes keeps the file in WAL mode, with `-wal` and `-shm`
        // files beside it: in a folder this user may not write, both must be there
        // already, writable (else SQLite fails with "attempt to write a readonly database").
        let folder = path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
        let companion = |suffix: &str| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            std::path::PathBuf::from(p)
        };
        let companions_ready = ["-wal", "-shm"].iter().all(|s| {
            let c = companion(s);
            c.exists() && may_write(&c)
        });
        if folder.is_dir() && !may_write(&folder) && !companions_ready {
            return Err(DbError::NotWritable {
                path,
                folder: Some(folder),
            });
        }
    } else if access == Access::Create {
        let folder = path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
        if !folder.as_os_str().is_empty() && folder.try_exists().is_ok_and(|there| !there) {
            return Err(DbError::NoFolder { path, folder });
        }
        if folder.is_dir() && !may_write(&folder) {
            return Err(DbError::NotWritable {
                path,
                folder: Some(folder),
            });
        }
    }
    Ok(())
}

/// [`DbError::WouldCreateFiles`] when opening `path` would create a `-wal` or `-shm`
/// file that its owner could not write: this process may not write the file, the file
/// is in WAL mode, and a companion is missing. (Only then is the file's header read, with
/// a file handle of its own: closing it drops POSIX locks this process holds on the file,
/// and without companions no connection of WAL mode is open on it.)
fn refuse_foreign_companions(path: &std::path::Path) -> Result<(), DbError> {
    // On a read-only file system nobody's companions can be created: SQLite reads the
    // file without them (a WAL file whose `-wal` is gone, as a closed one's is).
    if may_write(path) || on_read_only_medium(path) {
        return Ok(());
    }
    let companion = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        std::path::PathBuf::from(p)
    };
    let missing: Vec<std::path::PathBuf> = ["-wal", "-shm"]
        .iter()
        .map(|s| companion(s))
        .filter(|p| !p.exists())
        .collect();
    if missing.is_empty() || !is_wal_file(path) {
        return Ok(());
    }
    let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    Err(DbError::WouldCreateFiles {
        path: absolute(path),
        missing: missing.iter().map(|p| absolute(p)).collect(),
    })
}

/// Whether `path`, or for a file not there yet the nearest folder above it that is, lies
/// on a file system mounted read-only (where every write fails, whoever the user).
fn on_read_only_medium(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Some(there) = path.ancestors().find(|p| !p.as_os_str().is_empty() && p.exists()) else {
        return false;
    };
    let Ok(c) = std::ffi::CString::new(there.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call, and `stat` a
    // plain struct statvfs fills in.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    let filled = unsafe { libc::statvfs(c.as_ptr(), &mut stat) } == 0;
    filled && stat.f_flag & libc::ST_RDONLY != 0
}

/// Whether this process (its effective user and groups) may read `path`.
fn may_read(path: &std::path::Path) -> bool {
    may(path, libc::R_OK)
}

/// Whether this process (its effective user and groups) may write `path`.
fn may_write(path: &std::path::Path) -> bool {
    may(path, libc::W_OK)
}

/// Whether this process (its effective user and groups) may access `path` for `mode`.
fn may(path: &std::path::Path, mode: libc::c_int) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; faccessat only
    // reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mode, libc::AT_EACCESS) == 0 }
}

/// Whether the SQLite file at `path` is in WAL mode (file format numbers 2 at offsets 18
/// and 19 of its header); false for anything unreadable or too short.
fn is_wal_file(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok()
        && header.starts_with(b"SQLite format 3\0")
        && (header[18] == 2 || header[19] == 2)
}

/// An in-memory database has no file to find.
fn is_in_memory(url: &DbUrl, path: &std::path::Path) -> bool {
    path.as_os_str().is_empty() || path.as_os_str() == ":memory:" || url.expose().contains("mode=memory")
}

fn bind_all<'q>(params: &'q [Param]) -> Result<SqliteArguments<'q>, sqlx::Error> {
    let mut args = SqliteArguments::default();
    for p in params {
        let r = match p {
            Param::Null => args.add(Option::<String>::None),
            Param::I64(v) => args.add(*v),
            Param::F64(v) => args.add(*v),
            Param::Bool(v) => args.add(*v),
            Param::Text(v) => args.add(v.as_str()),
            Param::Bytes(v) => args.add(v.as_slice()),
            Param::Ts(t) => args.add(t.to_text()),
            Param::OptTs(t) => args.add(t.map(|t| t.to_text())),
            Param::TextArray(_) | Param::I64Array(_) => {
                return Err(sqlx::Error::Protocol("SQLite has no arrays to bind".into()))
            }
        };
        r.map_err(sqlx::Error::Encode)?;
    }
    Ok(args)
}

/// Executes one statement.
pub async fn execute(c: &mut SqliteConnection, sql: &str, params: &[Param]) -> Result<u64, sqlx::Error> {
    let args = bind_all(params)?;
    Ok(sqlx::query_with(sql, args).execute(c).await?.rows_affected())
}

/// Reads a value of any storage class as text; a BLOB as `\x` and lowercase hex (as
/// PostgreSQL shows bytea), whether or not its bytes happen to be UTF-8.
pub fn cell_text(row: &SqliteRow, i: usize) -> Result<Option<String>, sqlx::Error> {
    use sqlx::TypeInfo;
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(None);
    }
    if raw.type_info().name() == "BLOB" {
        let b: Vec<u8> = row.try_get_unchecked(i)?;
        return Ok(Some(crate::db::bytea_hex(&b)));
    }
    if let Ok(s) = row.try_get::<String, _>(i) {
        return Ok(Some(s));
    }
    if let Ok(v) = row.try_get::<i64, _>(i) {
        return Ok(Some(v.to_string()));
    }
    if let Ok(v) = row.try_get::<f64, _>(i) {
        return Ok(Some(v.to_string()));
    }
    let b: Vec<u8> = row.try_get(i)?;
    Ok(Some(crate::db::bytea_hex(&b)))
}

/// Reads a source value that the read cast to text. SQLite stores whatever bytes it is
/// given as TEXT, so the text may not be UTF-8: then its bytes come back as `Err`, for
/// the caller to refuse (rewriting them, e.g. as hex, would load a different value).
pub fn source_text(row: &SqliteRow, i: usize) -> Result<Result<Option<String>, Vec<u8>>, sqlx::Error> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(Ok(None));
    }
    let bytes: &[u8] = row.try_get_unchecked(i)?;
    Ok(match std::str::from_utf8(bytes) {
        Ok(s) => Ok(Some(s.to_string())),
        Err(_) => Err(bytes.to_vec()),
    })
}

/// Runs a query whose columns are all text (or NULL): the columns' names and every row.
pub async fn query_named(
    c: &mut SqliteConnection,
    sql: &str,
    params: &[Param],
) -> Result<(Vec<String>, Vec<TextRow>), sqlx::Error> {
    use sqlx::Column;
    let args = bind_all(params)?;
    let rows = sqlx::query_with(sql, args).fetch_all(c).await?;
    let names = rows
        .first()
        .map(|r| r.columns().iter().map(|c| c.name().to_string()).collect())
        .unwrap_or_default();
    let values = rows
        .iter()
        .map(|r| (0..r.len()).map(|i| cell_text(r, i)).collect())
        .collect::<Result<_, _>>()?;
    Ok((names, values))
}

/// Runs a query and returns every row's values as text.
pub async fn query_text(c: &mut SqliteConnection, sql: &str, params: &[Param]) -> Result<Vec<TextRow>, sqlx::Error> {
    let args = bind_all(params)?;
    let rows = sqlx::query_with(sql, args).fetch_all(c).await?;
    rows.iter()
        .map(|r| (0..r.len()).map(|i| cell_text(r, i)).collect())
        .collect()
}

/// SQLite allows 32766 bound variables per statement; stay well below.
const MAX_VARIABLES: usize = 30_000;

/// Inserts rows with multi-row INSERT statements of a fixed batch size, so the prepared
/// statement is reused for every full batch.
pub async fn bulk_insert(
    c: &mut SqliteConnection,
    table: &str,
    columns: &[String],
    kinds: &[BindKind],
    rows: &[Vec<Option<String>>],
) -> Result<(), sqlx::Error> {
    let per_row = columns.len().max(1);
    let batch = (MAX_VARIABLES / per_row).clamp(1, 500);
    let one = format!("({})", vec!["?"; per_row].join(", "));
    for chunk in rows.chunks(batch) {
        let sql = format!(
            "INSERT INTO {table} ({}) VALUES {}",
            columns.join(", "),
            vec![one.as_str(); chunk.len()].join(", ")
        );
        let mut args = SqliteArguments::default();
        for row in chunk {
            for (v, kind) in row.iter().zip(kinds) {
                let r = match Cell::of(v.as_deref(), *kind) {
                    Cell::Null => args.add(Option::<String>::None),
                    Cell::Int(n) => args.add(n),
                    Cell::Float(f) => args.add(f),
                    Cell::Text(s) => args.add(s),
                    Cell::Blob(b) => args.add(b),
                };
                r.map_err(sqlx::Error::Encode)?;
            }
        }
        sqlx::query_with(&sql, args).execute(&mut *c).await?;
    }
    Ok(())
}

/// How one text value of a row binds to a column of a [`BindKind`]: the one rule of
/// [`bulk_insert`] and [`pump::pump`].
pub(crate) enum Cell<'a> {
    Null,
    Int(i64),
    Float(f64),
    Text(&'a str),
    Blob(Vec<u8>),
}

impl<'a> Cell<'a> {
    /// A number that does not parse, or hex that does not decode, stays text.
    pub(crate) fn of(value: Option<&'a str>, kind: BindKind) -> Cell<'a> {
        let Some(s) = value else {
            return Cell::Null;
        };
        match kind {
            BindKind::Int => s.parse().map_or(Cell::Text(s), Cell::Int),
            BindKind::Float => s.parse().map_or(Cell::Text(s), Cell::Float),
            BindKind::Bool => Cell::Int(i64::from(crate::db::types::is_truthy(s))),
            BindKind::Bytes => crate::db::from_bytea_hex(s).map_or(Cell::Text(s), Cell::Blob),
            BindKind::Text => Cell::Text(s),
        }
    }
}
