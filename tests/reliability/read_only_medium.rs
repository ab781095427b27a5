//! SQLite files on a file system mounted read-only (a snapshot, a read-only export or
//! bind mount): no user may write there, whoever owns the files, so a command that writes
//! names the read-only file system (not the user's rights, which are not the cause), and
//! the commands that only read read the target where it is, as they read a file another
//! user owns. A `-wal` holding changes that SQLite could only read through a `-shm` it
//! cannot create there is refused, naming it. Real mounts: the tests run as root.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::cli::{self, CliOutput};
use crate::support::fixture::Fixture;

/// The commands that only read the target, plain and with `--json`.
const READ_ONLY: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["history", "--key", "1"],
    &["lookup", "--key", "1", "--at", "2026-03-02T09:10:00Z"],
    &["verify"],
    &["verify", "--json"],
];

/// `dir` bind-mounted on itself read-only, until dropped (also when a test fails).
struct ReadOnlyMount(PathBuf);

impl ReadOnlyMount {
    fn new(dir: &Path) -> ReadOnlyMount {
        let mount = |args: &[&str]| {
            let status = Command::new("mount")
                .args(args)
                .arg(dir)
                .arg(dir)
                .status()
                .expect("mount");
            assert!(
                status.success(),
                "mount {args:?} {} (the tests run as root)",
                dir.display()
            );
        };
        mount(&["--bind"]);
        let guard = ReadOnlyMount(dir.to_path_buf());
        let status = Command::new("mount")
            .args(["-o", "remount,ro,bind"])
            .arg(dir)
            .status()
            .expect("mount");
        assert!(status.success(), "remount {} read-only", dir.display());
        guard
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A loaded SQLite fixture whose target sits, with a config, in a folder of its own
/// (`shelf`), and whose source stays outside it; returns the fixture, the config, the
/// folder.
async fn loaded_on_a_shelf() -> (Fixture, PathBuf, PathBuf) {
    let mut fx = Fixture::sqlite().await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')",
    )
    .await;
    let shelf = fx.dir().join("shelf");
    std::fs::create_dir(&shelf).expect("mkdir");
    let config = shelf.join("dimlog.toml");
    let text = fx.config().replace(
        &fx.target_url,
        &format!("sqlite://{}", shelf.join("warehouse.db").display()),
    );
    std::fs::write(&config, text).expect("config");
    let out = cli::run(&config, &["run", "--upper", "2026-03-02T09:30:00Z"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    (fx, config, shelf)
}

fn assert_names_the_read_only_file_system(out: &CliOutput, what: &str) {
    assert_eq!(out.code, Some(1), "{what}: {out:?}");
    let all = out.all();
    assert!(all.contains("mounted read-only"), "{what}: {all}");
    assert!(!all.contains("as this user"), "{what} blames the user: {all}");
}

#[tokio::test]
async fn a_target_on_a_read_only_file_system_is_read_and_never_blamed_on_the_user() {
    let (_fx, config, shelf) = loaded_on_a_shelf().await;
    let before = crate::support::files(&shelf);
    let target = shelf.join("warehouse.db");
    let bytes = std::fs::read(&target).expect("read");
    let _mounted = ReadOnlyMount::new(&shelf);
    for args in [
        &["run", "--upper", "2026-03-02T10:00:00Z"][..],
        &["run", "--upper", "2026-03-02T10:00:00Z", "--dry-run"],
        &["run", "--upper", "2026-03-02T10:00:00Z", "--json"],
        &["rebuild"],
    ] {
        let out = cli::run(&config, args);
        assert_names_the_read_only_file_system(&out, &format!("{args:?}"));
        if args.contains(&"--json") {
            assert!(out.stdout.contains("\"connect\""), "{out:?}");
        }
    }
    for args in READ_ONLY {
        let out = cli::run(&config, args);
        assert_eq!(
            out.code,
            Some(0),
            "{args:?} reads a target on a read-only file system: {out:?}"
        );
    }
    let lookup = cli::run(&config, &["lookup", "--key", "2", "--at", "2026-03-02T09:10:00Z"]);
    assert_eq!(lookup.stdout.trim(), "2", "{lookup:?}");
    assert_eq!(crate::support::files(&shelf), before);
    assert_eq!(std::fs::read(&target).expect("read"), bytes);
}

#[tokio::test]
async fn a_first_load_into_a_read_only_folder_names_the_file_system_and_leaves_nothing() {
    let (_fx, config, shelf) = loaded_on_a_shelf().await;
    std::fs::remove_file(shelf.join("warehouse.db")).expect("rm");
    let before = crate::support::files(&shelf);
    let _mounted = ReadOnlyMount::new(&shelf);
    let out = cli::run(&config, &["run", "--upper", "2026-03-02T09:30:00Z"]);
    assert_names_the_read_only_file_system(&out, "a first load");
    assert_eq!(crate::support::files(&shelf), before);
}

#[tokio::test]
async fn changes_left_in_a_wal_without_its_shm_are_refused_by_name() {
    let (_fx, config, shelf) = loaded_on_a_shelf().await;
    let target = shelf.join("warehouse.db");
    // A writer that stopped without folding its changes in: a `-wal` with content, its
    // `-shm` gone (as a copy of the two files leaves it).
    let wal = {
        let db = rusqlite::Connection::open(&target).expect("open");
        db.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
             CREATE TABLE late_notes (note TEXT); INSERT INTO late_notes VALUES ('x');",
        )
        .expect("write");
        let mut wal = target.as_os_str().to_owned();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        std::fs::copy(&wal, shelf.join("kept-wal")).expect("keep the wal");
        drop(db);
        wal
    };
    std::fs::copy(shelf.join("kept-wal"), &wal).expect("put the wal back");
    let mut shm = target.as_os_str().to_owned();
    shm.push("-shm");
    let _ = std::fs::remove_file(PathBuf::from(shm));
    assert!(std::fs::metadata(&wal).expect("wal").len() > 0);
    let _mounted = ReadOnlyMount::new(&shelf);
    let out = cli::run(&config, &["status"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let all = out.all();
    for needle in ["mounted read-only", "warehouse.db-wal", "holds changes", "read-write"] {
        assert!(all.contains(needle), "{needle:?} not in: {all}");
    }
}

#[tokio::test]
async fn a_wal_mode_source_on_a_read_only_file_system_loads() {
    let (fx, config, shelf) = loaded_on_a_shelf().await;
    let archive = fx.dir().join("archive");
    std::fs::create_dir(&archive).expect("mkdir");
    let source = archive.join("source.db");
    {
        let db = rusqlite::Connection::open(&source).expect("open");
        db.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE src_customers (customer_id INTEGER PRIMARY KEY, email TEXT, tier TEXT, country TEXT,
                                         is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT);
             INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
                 (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:40:00Z'),
                 (3, 'cy@example.com', 'free', 'NL', '2026-03-02T09:45:00Z');",
        )
        .expect("write");
    }
    let text = std::fs::read_to_string(&config)
        .expect("config")
        .replace(&fx.source_url, &format!("sqlite://{}", source.display()));
    std::fs::write(&config, text).expect("config");
    let _mounted = ReadOnlyMount::new(&archive);
    let out = cli::run(&config, &["run", "--upper", "2026-03-02T10:00:00Z"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.all().contains("2 versions"), "{out:?}");
    assert_eq!(crate::support::files(&archive), ["source.db"]);
    let _ = shelf;
}
