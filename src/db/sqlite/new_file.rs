//! A SQLite target file that a first load builds under a hidden name beside where it
//! belongs, and that appears under its own name, whole and in WAL mode, only once the
//! load is done with it.
//!
//! Why not build it in place: a file in WAL mode is written twice, to the WAL and again
//! at the checkpoint that follows the commit, and a first load writes every page of it
//! (at a million rows that second write is most of a second). A file in place in another
//! journal mode would be seen by readers half-built, block them while it commits, and
//! could be left in that mode. Built aside, no one sees it until it is complete: it needs
//! no WAL (its rollback journal stays in memory, and it is synced once, whole, before it
//! is put in place), and an interrupted or killed load leaves nothing under the target's
//! name.
//!
//! One process at a time builds a given file: the hidden file is claimed with an OS lock
//! (`flock`), which the OS lets go when the process ends however it ends; whoever claims
//! a file left by a killed process starts it again from nothing.

use super::{SqliteConn, LOCK_WAIT, NEW_FILE_PAGE_SIZE};
use crate::db::{DbError, DbUrl};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::ConnectOptions;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

/// A target file being built aside (see the module's doc), claimed by this process.
#[derive(Debug)]
pub struct NewFile {
    /// Where it is built: `.<name>.dimlog-new` in the target's folder.
    building: PathBuf,
    /// The target's own path.
    target: PathBuf,
    /// The building file, open and locked (`flock`) for as long as this process builds it.
    claim: std::fs::File,
}

/// How often a claim that another process holds is tried again.
const CLAIM_RETRY: Duration = Duration::from_millis(100);

impl NewFile {
    /// Claims the building file of `url`'s target, waiting for another process that
    /// builds it when `wait` (else that is [`DbError::Locked`] for `dimension`). `None`
    /// when the target is to be created in place: it exists by the time the claim is held
    /// (another process put it in place meanwhile), `url` names no file, the name is a
    /// link, or the building file cannot be made.
    pub async fn claim(url: &DbUrl, dimension: &str, wait: bool) -> Result<Option<NewFile>, DbError> {
        let Some(target) = url.sqlite_path() else {
            return Ok(None);
        };
        let Some(name) = target.file_name() else {
            return Ok(None);
        };
        // A link to a file that does not exist yet: SQLite creates that file, where
        // the link points (a name cannot be linked over the link).
        if std::fs::symlink_metadata(&target).is_ok() {
            return Ok(None);
        }
        let mut hidden = std::ffi::OsString::from(".");
        hidden.push(name);
        hidden.push(".dimlog-new");
        let building = target.with_file_name(hidden);
        let since = Instant::now();
        let claim = loop {
            let file = {
                use std::os::unix::fs::OpenOptionsExt;
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    // What SQLite gives a file it creates.
                    .mode(0o644)
                    .open(&building)
            };
            // (A name too long with the prefix, say.) Built in place, as files that exist
            // are written: whatever stops this user creating files there is said then.
            let Ok(file) = file else {
                return Ok(None);
            };
            match file.try_lock() {
                // Still the file under that name: a process that held it may have removed
                // it (or put it in place) meanwhile, and another may have made a new one.
                Ok(()) if same_file(&file, &building) => break file,
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) if wait && since.elapsed() < LOCK_WAIT => {
                    tokio::time::sleep(CLAIM_RETRY).await;
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(DbError::Locked {
                        dimension: dimension.into(),
                        holder: format!(" (a first load creating {})", target.display()),
                    })
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io_error(&building, "locking", e)),
            }
        };
        // Another process put the target in place while this one waited.
        if target.try_exists().unwrap_or(true) {
            let _ = std::fs::remove_file(&building);
            return Ok(None);
        }
        // Left by a process that ended before putting it in place: started again.
        claim
            .set_len(0)
            .map_err(|source| io_error(&building, "emptying", source))?;
        for suffix in ["-journal", "-wal", "-shm"] {
            let mut companion = building.clone().into_os_string();
            companion.push(suffix);
            let _ = std::fs::remove_file(companion);
        }
        Ok(Some(NewFile {
            building,
            target,
            claim,
        }))
    }

    /// A connection that builds the file: as [`super::connect`] opens a target for
    /// [`crate::db::Access::Create`], with the rollback journal in memory and no syncs
    /// (see the module's doc; [`NewFile::put_in_place`] syncs the file once).
    pub async fn connect(&self, url: &DbUrl) -> Result<SqliteConn, DbError> {
        let err = |source| DbError::Connect {
            url: url.redacted(),
            source,
        };
        let opts = SqliteConnectOptions::from_str(url.expose())
            .map_err(err)?
            .filename(&self.building)
            .busy_timeout(LOCK_WAIT)
            .disable_statement_logging()
            .read_only(false)
            .create_if_missing(false)
            .page_size(NEW_FILE_PAGE_SIZE)
            .journal_mode(SqliteJournalMode::Memory)
            .synchronous(SqliteSynchronous::Off)
            .pragma("cache_size", super::LOAD_CACHE);
        SqliteConn::new(opts.connect().await.map_err(err)?, url).await
    }

    /// Puts the file in place under the target's name: synced, and named at once and whole (a hard link, which fails rather than
    /// replace a file another process created there meanwhile: [`DbError::TargetAppeared`],
    /// and this file is dropped). `conn` is [`NewFile::connect`]'s, put in WAL mode
    /// (as every file dimlog writes) by [`crate::db::Conn::put_in_place`], and closed here.
    pub async fn put_in_place(self, conn: SqliteConn) -> Result<(), DbError> {
        // The last connection to close removes the -wal and -shm files.
        let closed = sqlx::Connection::close(conn.into_inner()).await;
        if let Err(source) = closed {
            self.discard();
            return Err(DbError::Query {
                what: "closing the new target file".into(),
                source,
            });
        }
        if let Err(e) = self.claim.sync_all() {
            let path = self.building.clone();
            self.discard();
            return Err(DbError::NewFile {
                path,
                doing: "syncing",
                source: e,
            });
        }
        let placed = match std::fs::hard_link(&self.building, &self.target) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(DbError::TargetAppeared {
                path: std::path::absolute(&self.target).unwrap_or_else(|_| self.target.clone()),
            }),
            // A file system without hard links: renamed, unless the target appeared.
            Err(_) if !self.target.exists() => {
                std::fs::rename(&self.building, &self.target).map_err(|source| DbError::NewFile {
                    path: self.target.clone(),
                    doing: "renaming into place",
                    source,
                })
            }
            Err(source) => Err(DbError::NewFile {
                path: self.target.clone(),
                doing: "linking into place",
                source,
            }),
            Ok(()) => Ok(()),
        };
        let _ = std::fs::remove_file(&self.building);
        if placed.is_ok() {
            sync_folder(&self.target);
        }
        placed
    }

    /// Drops the file (a run that put nothing in place); the claim goes with it.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.building);
    }

    /// Where the file is built, for messages.
    pub fn building(&self) -> &Path {
        &self.building
    }
}

fn io_error(path: &Path, doing: &'static str, source: std::io::Error) -> DbError {
    DbError::NewFile {
        path: path.to_path_buf(),
        doing,
        source,
    }
}

/// Whether `file` is the file at `path` now.
fn same_file(file: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Syncs the folder of `file`, so that its new name survives a power loss (best effort:
/// the file itself is synced already).
fn sync_folder(file: &Path) {
    let folder = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(f) = std::fs::File::open(folder) {
        let _ = f.sync_all();
    }
}
