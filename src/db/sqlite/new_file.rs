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

/// A file dropped before it was put in place (a run stopped while it began, say) is
/// removed: only a process that ends outright leaves one behind.
impl Drop for NewFile {
    fn drop(&mut self) {
        // Once it was removed (put in place), the name may be another process's file.
        if same_file(&self.claim, &self.building) {
            let _ = std::fs::remove_file(&self.building);
        }
    }
}

/// How often a claim that another process holds is tried again.
const CLAIM_RETRY: Duration = Duration::from_millis(100);

impl NewFile {
    /// Claims the building file of `url`'s target, waiting for another process that
    /// builds it when `wait` (else that is [`DbError::NewFileBusy`]). `None`
    /// when the target is to be created in place: it exists by the time the claim is held
    /// (another process put it in place meanwhile), `url` names no file, the target's
    /// name is a link, or the building file cannot be made or locked. Anything but a
    /// regular file under the building name (a link planted there) is removed first.
    pub async fn claim(url: &DbUrl, wait: bool) -> Result<Option<NewFile>, DbError> {
        let Some(target) = url.sqlite_path() else {
            return Ok(None);
        };
        // A link to a file that does not exist yet: SQLite creates that file, where
        // the link points (a name cannot be linked over the link).
        if std::fs::symlink_metadata(&target).is_ok() {
            return Ok(None);
        }
        let Some(building) = building_path(&target) else {
            return Ok(None);
        };
        let since = Instant::now();
        let mut said_so = false;
        let claim = loop {
            // Anything but a regular file under that name (a link planted there, to a
            // file it would overwrite) is removed, never opened through.
            if std::fs::symlink_metadata(&building).is_ok_and(|m| !m.file_type().is_file())
                && std::fs::remove_file(&building).is_err()
            {
                return Ok(None);
            }
            let file = {
                use std::os::unix::fs::OpenOptionsExt;
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    // What SQLite gives a file it creates.
                    .mode(0o644)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&building)
            };
            // (A link planted since the look above; a folder this user may not write.)
            // Built in place, as files that exist are written: whatever stops this user
            // creating files there is said then.
            let Ok(file) = file else {
                return Ok(None);
            };
            if !file.metadata().is_ok_and(|m| m.file_type().is_file()) {
                return Ok(None);
            }
            match file.try_lock() {
                // No longer the file under that name: a process that held it may have
                // removed it (or put it in place) meanwhile, and another may have made a
                // new one.
                Ok(()) if !same_file(&file, &building) => {}
                // A second name of a file put in place by a process that ended between
                // linking and unlinking it (the target may have been moved since): the
                // name goes, the file is never emptied, and a new one is made.
                Ok(())
                    if file
                        .metadata()
                        .is_ok_and(|m| std::os::unix::fs::MetadataExt::nlink(&m) > 1) =>
                {
                    let _ = std::fs::remove_file(&building);
                }
                Ok(()) => break file,
                Err(std::fs::TryLockError::WouldBlock) if wait && since.elapsed() < LOCK_WAIT => {
                    if !said_so {
                        tracing::warn!(
                            "waiting for another dimlog run that is creating {} (a first load into the new file)",
                            target.display()
                        );
                        said_so = true;
                    }
                    tokio::time::sleep(CLAIM_RETRY).await;
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(DbError::NewFileBusy {
                        path: std::path::absolute(&target).unwrap_or_else(|_| target.clone()),
                    })
                }
                // A file system without locks: built in place, as files that exist are.
                Err(std::fs::TryLockError::Error(_)) => {
                    if file.metadata().is_ok_and(|m| m.len() == 0) {
                        let _ = std::fs::remove_file(&building);
                    }
                    return Ok(None);
                }
            }
        };
        // Another process put the target in place while this one waited.
        if target.try_exists().unwrap_or(true) {
            let _ = std::fs::remove_file(&building);
            return Ok(None);
        }
        // Left by a process that ended before putting it in place: started again.
        claim.set_len(0).map_err(|source| DbError::NewFile {
            path: building.clone(),
            doing: "emptying",
            source,
        })?;
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

    /// The building file of `url`'s target, if there is one: its path, its size in bytes,
    /// and whether a process builds it now (else a process that ended outright left it,
    /// and the next first load starts it again). Looks only: takes the claim and gives it
    /// back at once.
    pub fn look(url: &DbUrl) -> Option<(PathBuf, u64, bool)> {
        let building = building_path(&url.sqlite_path()?)?;
        // (A link there is not followed: a run removes it.)
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&building)
                .ok()?
        };
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let in_use = matches!(file.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock));
        Some((building, size, in_use))
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
        let conn = SqliteConn::new(opts.connect().await.map_err(err)?, url).await?;
        // SQLite opened the file by its name: still this claim's file, not a link put
        // there meanwhile (it has written nothing yet).
        if !same_file(&self.claim, &self.building) {
            let _ = sqlx::Connection::close(conn.into_inner()).await;
            return Err(DbError::NewFile {
                path: self.building.clone(),
                doing: "opening",
                source: std::io::Error::other("another file was put under its name while it was opened"),
            });
        }
        Ok(conn)
    }

    /// Puts the file in place under the target's name: synced, and named at once and
    /// whole (a hard link, which fails rather than replace a file another process created
    /// there meanwhile: [`DbError::TargetAppeared`], and this file is dropped). `conn` is
    /// [`NewFile::connect`]'s, put in WAL mode (as every file dimlog writes) by
    /// [`crate::db::Conn::put_in_place`], and closed here.
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
        drop(self);
    }

    /// Where the file is built, for messages.
    pub fn building(&self) -> &Path {
        &self.building
    }
}

/// Where the file of `target` is built: `.<name>.dimlog-new` beside it.
///
/// A name too long for that (the building file's own name, with SQLite's `-journal`
/// after it, must fit in a file name) keeps its first bytes and a hash of the whole.
fn building_path(target: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    const SUFFIX: &[u8] = b".dimlog-new";
    let name = target.file_name()?.as_bytes();
    let longest = super::NAME_MAX - "-journal".len() - 1 - SUFFIX.len();
    let mut hidden = vec![b'.'];
    if name.len() <= longest {
        hidden.extend_from_slice(name);
    } else {
        let hash = blake3::hash(name).to_hex();
        let tag = format!("-{}", &hash[..16]);
        hidden.extend_from_slice(&name[..longest - tag.len()]);
        hidden.extend_from_slice(tag.as_bytes());
    }
    hidden.extend_from_slice(SUFFIX);
    Some(target.with_file_name(std::ffi::OsString::from_vec(hidden)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn url_of(path: &Path) -> DbUrl {
        DbUrl::parse("target.url", &format!("sqlite://{}", path.display()), None).expect("a URL")
    }

    #[tokio::test]
    async fn a_claim_dropped_before_it_is_put_in_place_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let url = url_of(&dir.path().join("t.db"));
        let claimed = NewFile::claim(&url, false).await.unwrap().expect("claimed");
        let building = claimed.building().to_path_buf();
        assert!(building.exists());
        assert!(NewFile::look(&url).expect("seen").2, "not seen as in use");
        drop(claimed);
        assert!(!building.exists(), "left behind");
        assert!(NewFile::look(&url).is_none());
    }

    #[tokio::test]
    async fn a_second_claim_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let url = url_of(&dir.path().join("t.db"));
        let first = NewFile::claim(&url, false).await.unwrap().expect("claimed");
        assert!(matches!(
            NewFile::claim(&url, false).await,
            Err(DbError::NewFileBusy { .. })
        ));
        drop(first);
        assert!(NewFile::claim(&url, false).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_file_left_by_a_killed_process_is_seen_and_started_over() {
        let dir = tempfile::tempdir().unwrap();
        let url = url_of(&dir.path().join("t.db"));
        // What a process killed outright leaves: the file, with no claim on it.
        let building = dir.path().join(".t.db.dimlog-new");
        std::fs::write(&building, b"half a database").unwrap();
        assert_eq!(NewFile::look(&url).map(|l| (l.1, l.2)), Some((15, false)));
        let again = NewFile::claim(&url, false).await.unwrap().expect("claimed");
        assert_eq!(std::fs::metadata(&building).unwrap().len(), 0, "not started over");
        drop(again);
    }

    #[tokio::test]
    async fn a_second_name_of_a_placed_file_is_never_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t.db");
        std::fs::write(&target, b"a whole database").unwrap();
        // Killed between linking the file to its name and removing the building name;
        // then the target was moved away.
        std::fs::hard_link(&target, dir.path().join(".t.db.dimlog-new")).unwrap();
        let moved = dir.path().join("moved.db");
        std::fs::rename(&target, &moved).unwrap();
        let claimed = NewFile::claim(&url_of(&target), false).await.unwrap().expect("claimed");
        assert_eq!(std::fs::read(&moved).unwrap(), b"a whole database");
        assert_eq!(std::fs::metadata(claimed.building()).unwrap().len(), 0);
    }

    #[tokio::test]
    async fn a_link_at_the_building_name_is_removed_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let precious = dir.path().join("precious.db");
        std::fs::write(&precious, b"someone's data").unwrap();
        let building = dir.path().join(".t.db.dimlog-new");
        std::os::unix::fs::symlink(&precious, &building).unwrap();
        assert!(NewFile::look(&url_of(&dir.path().join("t.db"))).is_none());
        let claimed = NewFile::claim(&url_of(&dir.path().join("t.db")), false)
            .await
            .unwrap()
            .expect("claimed");
        assert_eq!(std::fs::read(&precious).unwrap(), b"someone's data");
        let placed = std::fs::symlink_metadata(claimed.building()).unwrap();
        assert!(placed.file_type().is_file(), "still a link");
        assert_eq!(placed.len(), 0);
    }

    #[test]
    fn every_building_name_leaves_room_for_sqlites_own_files() {
        use std::os::unix::ffi::OsStrExt;
        let dir = Path::new("/some/folder");
        // Names of every length a target may have, in one-, two- and three-byte
        // characters (cut at a character's end).
        let mut names = std::collections::BTreeSet::new();
        for length in 1..=(super::super::NAME_MAX - "-journal".len()) {
            for fill in ["a", "é", "日"] {
                let whole = fill.repeat(length);
                let end = whole
                    .char_indices()
                    .map(|(i, c)| i + c.len_utf8())
                    .take_while(|&e| e <= length)
                    .last()
                    .unwrap_or(0);
                names.insert(whole[..end].to_string());
            }
        }
        names.remove("");
        let mut buildings = std::collections::HashSet::new();
        for name in &names {
            let building = building_path(&dir.join(name)).unwrap();
            let bytes = building.file_name().unwrap().as_bytes().len();
            assert!(
                bytes + "-journal".len() <= super::super::NAME_MAX,
                "{name}: {bytes} bytes"
            );
            assert_eq!(building.parent(), Some(dir));
            assert!(buildings.insert(building), "two names share a building file");
        }
        assert_eq!(
            building_path(Path::new("/f/t.db")).unwrap(),
            Path::new("/f/.t.db.dimlog-new")
        );
    }

    #[tokio::test]
    async fn a_target_that_exists_is_created_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        std::fs::write(&path, b"").unwrap();
        assert!(NewFile::claim(&url_of(&path), false).await.unwrap().is_none());
        assert!(!dir.path().join(".t.db.dimlog-new").exists());
    }
}
