//! The database layer: one connection type over both backends, bound parameters, and
//! the SQL templates of `sql/<backend>/`.
//!
//! Every stage talks to a database through [`Conn`]: it renders a template from
//! [`sql`] (identifiers are already validated and quoted by [`crate::ident`]) and binds
//! every value as a [`Param`]. Backend differences live in `sqlite.rs` / `postgres.rs`
//! (connecting, binding timestamps, bulk staging) and in the SQL files themselves.
//! dimlog's own tables are made and upgraded by schema version in [`migrate`].
//!
//! A connection is opened for an [`Access`]: what it may do to its database is decided
//! when it connects and enforced by the database itself, so a command that only reads
//! cannot write by mistake, and a database that does not exist is never created except
//! where a target is meant to be created (a first `run` or `init`).

pub mod citus;
pub mod dialect;
pub mod migrate;
pub mod postgres;
pub mod sql;
pub mod sqlite;
pub use sqlite::new_file::NewFile;
pub use sqlite::pump::{PumpError, PumpInto, RisingKey, RowOut};
pub mod types;
pub mod url;

use crate::db::types::ColumnKind;
use crate::ts::Micros;
pub use url::{Backend, DbUrl};

/// What a connection may do to its database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Never writes the database, not even SQLite's own housekeeping (for sources, which
    /// dimlog only reads): a SQLite file is opened read-only (SQLite still gives a WAL-mode
    /// file its `-wal` and `-shm` companions, as it does for every reader, unless this user
    /// may not write the file: see [`DbError::WouldCreateFiles`]); a PostgreSQL session is
    /// read-only. A missing SQLite file is [`DbError::NoDatabase`].
    ReadOnly,
    /// Runs only statements that read (for a target that a command only reads): the
    /// database refuses every write, temporary tables included (SQLite's `query_only`,
    /// a read-only PostgreSQL session), and works with read rights alone. A SQLite file is
    /// opened for writing where its permissions allow it (read-only otherwise), so that
    /// SQLite removes its `-wal` and `-shm` files when the last connection leaves, as it
    /// does after a run; a user who may not write it never creates them
    /// ([`DbError::WouldCreateFiles`]). A missing SQLite file is [`DbError::NoDatabase`].
    QueryOnly,
    /// Reads and writes a database that exists; a missing SQLite file is
    /// [`DbError::NoDatabase`].
    ReadWrite,
    /// Reads and writes, creating a missing SQLite file (the target of a first load).
    Create,
}

impl Access {
    /// True when the database refuses every write on this connection.
    pub fn is_read_only(self) -> bool {
        matches!(self, Access::ReadOnly | Access::QueryOnly)
    }
}

/// A database operation that failed, naming what was being done.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// The server or file could not be reached (the URL is shown without its password).
    #[error("cannot connect to {url}: {source}")]
    Connect {
        /// Redacted URL.
        url: String,
        /// Driver error.
        source: sqlx::Error,
    },
    /// The server did not answer within the connect timeout.
    #[error("cannot connect to {url}: no answer within {seconds} s (connect_timeout); check the host, port and firewall, or give the URL ?connect_timeout=N (seconds, 0 = wait as long as the network does)")]
    ConnectTimeout {
        /// Redacted URL.
        url: String,
        /// The limit that passed.
        seconds: u64,
    },
    /// A SQLite file that does not exist, for a connection not allowed to create it.
    #[error("no SQLite database at {}", path.display())]
    NoDatabase {
        /// The file's path.
        path: std::path::PathBuf,
    },
    /// A statement failed. Said in the user's terms (which step of the work); the
    /// statement itself is [`DbError::failed_step`].
    #[error("{} failed: {}", step_for_people(what), without_aliases(&with_detail(source)))]
    Query {
        /// What was being done, or the statement (`family/name`, e.g. `log/append`).
        what: String,
        /// Driver error.
        source: sqlx::Error,
    },
    /// A statement run through SQLite's own interface failed (rows moved between two
    /// SQLite databases, see [`sqlite::pump`]).
    #[error("{} failed: {message}", step_for_people(what))]
    Sqlite {
        /// What was being done.
        what: String,
        /// SQLite's message.
        message: String,
    },
    /// A SQL template did not render (a bug, not a user error).
    #[error("sql template {name} did not render: {message}")]
    Template {
        /// Template name.
        name: String,
        /// Why.
        message: String,
    },
    /// A SQLite file in WAL mode that this OS user may read but not write, without its
    /// `-wal` or `-shm` file: reading it would create them, owned by this user, and the
    /// file's owner could then no longer write it.
    #[error("cannot read {} as this user without creating {}: the file is in WAL mode and SQLite reads it through these files, which would then belong to this user, and the file's owner could no longer write it. Read it as a user who may write the file (dimlog's read-only commands still write nothing to it), or while its owner has it open", path.display(), missing.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" and "))]
    WouldCreateFiles {
        /// The database file.
        path: std::path::PathBuf,
        /// The companions that do not exist.
        missing: Vec<std::path::PathBuf>,
    },
    /// A SQLite file that this OS user may not read, or that sits in a folder it may not
    /// enter: SQLite would say only that it is "unable to open database file".
    #[error("cannot read {} as this user: it may not read the file, or may not enter a folder above it; run dimlog as a user who may, or give this user read access to the file (and search access to its folders)", path.display())]
    NotReadable {
        /// The database file.
        path: std::path::PathBuf,
    },
    /// A SQLite file to write (or, not there yet, to create) on a file system mounted
    /// read-only: no user may write it, so the user's rights are not the cause.
    #[error("cannot write {}: the file system it is on is mounted read-only, and dimlog writes the target there (SQLite also writes its -wal and -shm files beside it); put the target on a writable file system, or mount this one read-write (the commands that only read, status, history, lookup and verify, read it where it is)", path.display())]
    ReadOnlyMedium {
        /// The database file.
        path: std::path::PathBuf,
    },
    /// A SQLite file on a file system mounted read-only, to read, whose `-wal` file holds
    /// changes not yet in the file: SQLite reads those through a `-shm` file it cannot
    /// create there.
    #[error("cannot read {}: it is on a file system mounted read-only, and {} holds changes not yet folded into it, which SQLite reads through a -shm file it cannot create there; mount it read-write once and open it with a program that writes it (sqlite3, or for a target a dimlog run), which folds them in when it closes the file (dimlog only reads a source, and leaves them), or copy the file with its -wal to a writable place", path.display(), wal.display())]
    WalOnReadOnlyMedium {
        /// The database file.
        path: std::path::PathBuf,
        /// Its `-wal` file.
        wal: std::path::PathBuf,
    },
    /// A SQLite file that this OS user may not write (or, for a file not there yet, a
    /// folder it may not create files in), for a connection that would write it: SQLite
    /// would fail part-way, after creating `-wal` and `-shm` files owned by this user
    /// that the file's owner could then no longer write.
    #[error("cannot write {} as this user: {}; run dimlog as a user who may write it", path.display(), match (folder, path.exists()) {
        (Some(f), false) => format!("the file does not exist and this user may not create files in {}", f.display()),
        (Some(f), true) => format!(
            "SQLite writes its -wal and -shm files beside it while it writes the file, and this user may not create or write them in {} \
             (let the user create files in that folder, or create the two files as the file's owner)",
            f.display()
        ),
        (None, _) => "this user may not write the file".to_string(),
    })]
    NotWritable {
        /// The database file.
        path: std::path::PathBuf,
        /// The folder where the file, or the companions SQLite writes beside it, would be
        /// created.
        folder: Option<std::path::PathBuf>,
    },
    /// A SQLite file to create in a folder that does not exist: SQLite would say only
    /// that it is "unable to open database file".
    #[error("cannot create {}: its folder {} does not exist; create the folder, or correct the file's path in the URL", path.display(), folder.display())]
    NoFolder {
        /// The database file.
        path: std::path::PathBuf,
        /// Its folder, missing.
        folder: std::path::PathBuf,
    },
    /// The file a first load builds beside a SQLite target that does not exist yet
    /// ([`sqlite::new_file`]) could not be made or put in place.
    #[error("{doing} {} failed: {source}; the target file was not created: check that its folder still exists and that this user may create and write files in it, and run again", path.display())]
    NewFile {
        /// The file.
        path: std::path::PathBuf,
        /// What was being done to it.
        doing: &'static str,
        /// The OS's error.
        source: std::io::Error,
    },
    /// Another dimlog run is building the SQLite target file (a first load into a file
    /// that does not exist yet, [`sqlite::new_file`]), and the caller would not wait.
    #[error("another dimlog run is creating {} (a first load into the new file), and holds it until that load ends", path.display())]
    NewFileBusy {
        /// The target file.
        path: std::path::PathBuf,
    },
    /// A SQLite file name too long for the files SQLite writes beside it.
    #[error("the file name of {} is {bytes} bytes long: SQLite writes files named like it plus `-journal` or `-wal` beside it, and a file name may have at most {max} bytes here; choose a name of at most {} bytes", path.display(), max - 8)]
    NameTooLong {
        /// The file.
        path: std::path::PathBuf,
        /// Its name's length in bytes.
        bytes: usize,
        /// The longest name the file system allows.
        max: usize,
    },
    /// Another process created the SQLite target file while a first load built it aside.
    #[error("{} was created by another process while this run loaded the dimension into a new file beside it; nothing of this run was kept (its source is unchanged): run again to load into that file", path.display())]
    TargetAppeared {
        /// The target file.
        path: std::path::PathBuf,
    },
    /// Another run of the dimension holds its lock, and the caller would not wait.
    #[error("another run of dimension {dimension:?} holds its lock{holder}")]
    Locked {
        /// The dimension.
        dimension: String,
        /// Who holds the lock, as ` (session …)`, when the database says (else empty).
        holder: String,
    },
    /// Another session holds a lock on one of the dimension's tables that conflicts with
    /// writing it, and the caller would not wait.
    #[error("another session holds a lock on {table} that conflicts with writing it{holders}")]
    TableLocked {
        /// The table.
        table: String,
        /// Who holds it, as ` (held by …)`, when the database says (else empty).
        holders: String,
    },
    /// The log no longer holds versions the dimension has (rows deleted from it): which,
    /// and what to do. Found before a rebuild would drop them.
    #[error("{0}")]
    LogLostVersions(String),
    /// The PostgreSQL role lacks rights the command needs (found before anything is
    /// written): which, on what, and the `GRANT`s that give them.
    #[error("{0}")]
    MissingRights(String),
    /// A change to the dimension's column sets that alters the log's or the dimension's
    /// columns (DDL, which only a table's owner may run), asked of a role that does not
    /// own them: refused before anything is written, rather than failing half-way.
    #[error("{0}")]
    ChangeNeedsOwner(Box<ChangeNeedsOwner>),
    /// On Citus, a transaction the coordinator committed has not been committed on
    /// every worker yet (a worker failed or restarted while it committed): its rows are
    /// visible on some shards and not on others, and a command refuses to read that half
    /// (a run would load the missing half again, with new surrogate keys; `verify` would
    /// take it for rows deleted from the log).
    #[error(
        "dimension {dimension}: a transaction committed on the Citus coordinator has not been committed yet on \
         {} (the worker failed or restarted while it committed): its rows are visible on some shards and not on \
         others, so nothing was read or written. Citus finishes that commit once the worker is reachable: its \
         maintenance daemon does every citus.recover_2pc_interval, or a superuser runs \
         `SELECT recover_prepared_transactions()` on the coordinator; then run again",
        nodes.join(", ")
    )]
    UnsettledCommit {
        dimension: String,
        /// The workers (`host:port`) that hold the unfinished commit.
        nodes: Vec<String>,
    },
    /// On Citus, a dimension's log and dimension are not laid out alike (one distributed
    /// and the other not, or both distributed but not colocated): the statements that
    /// join them cannot run on the shards (exit 2). `way_out` says how to make them
    /// alike ([`DbError::way_out`]).
    #[error(
        "dimension {dimension}: {fault} on the Citus coordinator, and dimlog's statements that join the log and the \
         dimension cannot run on the shards"
    )]
    MixedLayout {
        dimension: String,
        /// What is wrong, naming the tables (quoted as in SQL).
        fault: String,
        /// The statements and command that make the two tables alike.
        way_out: String,
    },
    /// dimlog's own tables are at a schema version newer than this dimlog knows (a newer
    /// dimlog upgraded them): a command that writes the target refuses, before writing
    /// anything; commands that only read still read ([`migrate`]).
    #[error("target {target}: dimlog's own tables are at schema version {found}, newer than this dimlog ({dimlog}) knows (up to {known}): a newer dimlog has upgraded them. To write to this target, upgrade dimlog (to the version that upgraded them, or later); nothing was written. Commands that only read (status, history, lookup, verify) still work")]
    SchemaTooNew {
        /// The target: its URL without a password (and the schema of dimlog's tables on
        /// PostgreSQL).
        target: String,
        /// The version in `dimlog_schema`.
        found: i64,
        /// The newest version this dimlog knows ([`migrate::CURRENT_VERSION`]).
        known: i64,
        /// This dimlog, `dimlog <version>`.
        dimlog: String,
    },
    /// dimlog's own tables must be created or upgraded to this dimlog's schema version,
    /// and the PostgreSQL role may not (it does not own them, or may not create tables in
    /// their schema); nothing was written: the tables' owner runs `dimlog init` once.
    #[error("{}", migrate::needs_owner_message(.target, .role, .schema, .found, .needed, .tables_exist, .may_create))]
    SchemaNeedsOwner {
        /// The target: its URL without a password.
        target: String,
        /// The session's role, quoted where needed.
        role: String,
        /// The schema of dimlog's tables, quoted where needed.
        schema: String,
        /// The version in `dimlog_schema` (`None`: there is none).
        found: Option<i64>,
        /// The version this dimlog needs.
        needed: i64,
        /// Whether dimlog's tables exist (else they are to be created).
        tables_exist: bool,
        /// Whether the role may create tables in the schema.
        may_create: bool,
    },
}

/// What [`DbError::ChangeNeedsOwner`] names.
#[derive(Debug, thiserror::Error)]
#[error(
    "dimension {dimension}: the config changed ({change}), and accepting it alters the columns of {tables}, which only \
     the owner may do; the PostgreSQL role {role} of target.url does not own them ({owner} does). \
     Nothing was written. Have {owner} load once with the change accepted; this role then loads as before"
)]
pub struct ChangeNeedsOwner {
    pub dimension: String,
    /// The change, described.
    pub change: String,
    /// The session's role, quoted where needed.
    pub role: String,
    /// The log's owner, quoted where needed.
    pub owner: String,
    /// The tables it alters (the dimension, and the log if it gains columns), as SQL
    /// names them.
    pub tables: String,
}

impl DbError {
    /// The statement that failed (`family/name`, e.g. `rebuild/merge_touched`), for logs
    /// and machine-readable output; its message says the step in words.
    pub fn failed_step(&self) -> Option<&str> {
        match self {
            DbError::Query { what, .. } if is_statement_name(what) => Some(what),
            _ => None,
        }
    }

    /// The database's own code for a refused statement (PostgreSQL's SQLSTATE, SQLite's
    /// result code), if it gave one.
    pub fn database_code(&self) -> Option<String> {
        match self {
            DbError::Query {
                source: sqlx::Error::Database(d),
                ..
            } => d.code().map(|c| c.into_owned()),
            _ => None,
        }
    }

    /// Whether PostgreSQL refused a statement for want of a right (SQLSTATE 42501: not the
    /// owner of a table, no CREATE on a schema, no right on a table or a column).
    pub fn is_denied(&self) -> bool {
        self.database_code().as_deref() == Some("42501")
    }

    /// Whether the database refused because another connection holds a lock it would
    /// need: SQLite's `SQLITE_BUSY` (primary code 5, from the driver's code). Only a
    /// SQLite error is read so: a PostgreSQL SQLSTATE such as `42501` is no number to
    /// take bits of (42501 & 0xff is 5: a missing right read as a held lock).
    pub fn is_busy(&self) -> bool {
        match self {
            DbError::Query {
                source: sqlx::Error::Database(d),
                ..
            } => {
                d.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some()
                    && d.code()
                        .and_then(|c| c.parse::<i64>().ok())
                        .is_some_and(|c| c & 0xff == 5)
            }
            _ => false,
        }
    }

    /// Who may hold the lock of a busy database ([`DbError::is_busy`]), as a message's
    /// tail: SQLite's lock is the file's write transaction, and it does not say whose.
    pub fn busy_holder(&self) -> Option<&'static str> {
        self.is_busy().then_some(
            " (or another process has a write transaction open on the target file, a sqlite3 shell say: SQLite does not \
             tell which)",
        )
    }
}

/// A bound value; timestamps bind as `timestamptz` on PostgreSQL and as fixed-width UTC
/// text on SQLite.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    /// SQL NULL of any type.
    Null,
    /// bigint.
    I64(i64),
    /// double precision.
    F64(f64),
    /// boolean.
    Bool(bool),
    /// text.
    Text(String),
    /// bytea / blob.
    Bytes(Vec<u8>),
    /// A timestamp.
    Ts(Micros),
    /// A nullable timestamp.
    OptTs(Option<Micros>),
    /// text[] (PostgreSQL only: SQLite has no arrays).
    TextArray(Vec<String>),
    /// bigint[] (PostgreSQL only).
    I64Array(Vec<i64>),
}

/// Refuses, before anything is opened, a connection with `access` that would write a
/// SQLite file this process may not write ([`DbError::NotWritable`]); PostgreSQL checks
/// rights itself.
pub fn refuse_unwritable(url: &DbUrl, access: Access) -> Result<(), DbError> {
    match url.backend {
        Backend::Sqlite => sqlite::refuse_unwritable(url, access),
        Backend::Postgres | Backend::Citus => Ok(()),
    }
}

/// Whether a run holds the write lock of the database of `url` now, where only a probe
/// can tell (SQLite, whose lock is a write transaction); `None` where it cannot, and on
/// servers, which name the holder instead ([`Conn::lock_holder`]).
pub async fn writer_active(url: &DbUrl) -> Option<bool> {
    match url.backend {
        Backend::Sqlite => sqlite::writer_active(url).await,
        Backend::Postgres | Backend::Citus => None,
    }
}

/// Whether `url` names a database file that does not exist yet (a SQLite target before
/// its first load); a server's database is never "not there yet".
pub fn file_not_there_yet(url: &DbUrl) -> bool {
    url.backend == Backend::Sqlite && sqlite::file_missing(url)
}

/// One connection to either backend.
pub enum Conn {
    /// SQLite file.
    Sqlite(sqlite::SqliteConn),
    /// PostgreSQL server.
    Postgres(postgres::PgConn),
}

/// Whether `what` names a statement (`family/name`) rather than saying what was done.
fn is_statement_name(what: &str) -> bool {
    what.split_once('/')
        .is_some_and(|(f, n)| !f.is_empty() && !n.is_empty() && !what.contains(' '))
}

/// A statement's step in the user's terms: the work its family does (the statement
/// itself is kept apart, see [`DbError::failed_step`]); any other `what` as it is.
fn step_for_people(what: &str) -> &str {
    if !is_statement_name(what) {
        return what;
    }
    match what.split('/').next().unwrap_or_default() {
        "classify" => "comparing the load's rows with the log",
        "log" => "appending to the log",
        "rebuild" => "rebuilding the dimension",
        "stage" => "staging the source's rows",
        "dedupe" => "keeping one row per key and instant",
        "reconcile" => "comparing the source's keys with the dimension's",
        "verify" => "checking the dimension",
        "tables" => "creating or checking the log and the dimension",
        "init" => "creating dimlog's tables",
        "state" => "reading or writing dimlog's state",
        "extract" => "reading the source",
        "lookup" => "looking up surrogate keys",
        "inspect" => "reading the dimension's history",
        "migrations" => "upgrading dimlog's tables",
        _ => "a step of the work",
    }
}

/// A database message without dimlog's table aliases (`dimlog_l.email` is the column
/// `email`): the user named the column, not the alias.
/// The driver's message, with PostgreSQL's DETAIL where it names what is at fault (the
/// view that depends on a column, the row that breaks a constraint).
fn with_detail(e: &sqlx::Error) -> String {
    let detail = match e {
        sqlx::Error::Database(d) => d
            .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
            .and_then(|pg| pg.detail()),
        _ => None,
    };
    match detail {
        Some(detail) => format!("{e} ({})", detail.trim_end_matches('.')),
        None => e.to_string(),
    }
}

fn without_aliases(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find("dimlog_") {
        let tail = &rest[i + "dimlog_".len()..];
        let alias_len = tail.chars().take_while(|c| c.is_ascii_lowercase()).count();
        let is_alias = alias_len > 0 && alias_len <= 3 && tail[alias_len..].starts_with('.');
        // An alias starts a word: dimlog's own table names are kept.
        let starts_word = rest[..i]
            .chars()
            .last()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_');
        out.push_str(&rest[..i]);
        if is_alias && starts_word {
            rest = &tail[alias_len + 1..];
        } else {
            out.push_str("dimlog_");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// One row of a query over dimlog's own tables ([`Conn::query_records`]), read by
/// column name.
#[derive(Clone, Debug)]
pub struct Record {
    what: String,
    names: std::sync::Arc<[String]>,
    values: TextRow,
}

impl Record {
    fn bad(&self, column: &str, problem: &str) -> DbError {
        DbError::Query {
            what: self.what.clone(),
            source: sqlx::Error::Decode(format!("column {column}: {problem}").into()),
        }
    }

    /// The value of `column` (None: NULL); a column the row does not have is an error.
    pub fn opt_text(&self, column: &str) -> Result<Option<String>, DbError> {
        let i = self
            .names
            .iter()
            .position(|n| n == column)
            .ok_or_else(|| self.bad(column, "not in the row"))?;
        Ok(self.values.get(i).cloned().flatten())
    }

    /// The value of `column`, which may not be NULL.
    pub fn text(&self, column: &str) -> Result<String, DbError> {
        self.opt_text(column)?.ok_or_else(|| self.bad(column, "NULL"))
    }

    /// The whole number in `column` (None: NULL).
    pub fn opt_int(&self, column: &str) -> Result<Option<i64>, DbError> {
        self.opt_text(column)?
            .map(|v| {
                v.trim()
                    .parse()
                    .map_err(|_| self.bad(column, &format!("{v:?} is not a whole number")))
            })
            .transpose()
    }

    /// The whole number in `column`, which may not be NULL.
    pub fn int(&self, column: &str) -> Result<i64, DbError> {
        self.opt_int(column)?.ok_or_else(|| self.bad(column, "NULL"))
    }
}

/// Why streaming a source's rows stopped.
#[derive(Debug)]
pub enum StreamError {
    /// The database failed.
    Db(DbError),
    /// A value is not UTF-8 text: the row's key values, the column's position, its bytes.
    NotText {
        /// The row's first values (its key), as text where they are.
        key: Vec<Result<Option<String>, Vec<u8>>>,
        /// The position of the value in the row.
        column: usize,
        /// The value's bytes.
        bytes: Vec<u8>,
    },
}

/// A row of text values, as every reporting query returns them (`CAST(… AS TEXT)`).
pub type TextRow = Vec<Option<String>>;

impl DbError {
    /// How to get out of the state the error names, where the error says nothing of it
    /// itself (a layout to make alike, see [`DbError::MixedLayout`]).
    pub fn way_out(&self) -> Option<&str> {
        match self {
            DbError::MixedLayout { way_out, .. } => Some(way_out),
            _ => None,
        }
    }
}

impl Conn {
    /// Connects for reading and writing, creating a missing SQLite file
    /// ([`Access::Create`]).
    pub async fn connect(url: &DbUrl) -> Result<Conn, DbError> {
        Conn::open(url, Access::Create).await
    }

    /// Connects with the given access.
    pub async fn open(url: &DbUrl, access: Access) -> Result<Conn, DbError> {
        let conn = match url.backend {
            Backend::Sqlite => sqlite::connect(url, access).await.map(Conn::Sqlite),
            Backend::Postgres | Backend::Citus => match postgres::connect(url, access).await {
                Ok(c) => {
                    let mut c = postgres::PgConn::new(c);
                    match citus::detect(&mut c).await {
                        Ok(found) => {
                            c.backend_pid = found.pid;
                            c.citus = found.citus.then_some(citus::Cluster {
                                active: true,
                                staging: None,
                                said_local: false,
                                role: found.role,
                            });
                            Ok(Conn::Postgres(c))
                        }
                        Err(source) => Err(DbError::Connect {
                            url: url.redacted(),
                            source,
                        }),
                    }
                }
                Err(e) => Err(e),
            },
        };
        // A driver's message may echo what it was given: never a secret of the URL.
        conn.map_err(|e| match e {
            DbError::Connect { url: shown, source } => DbError::Connect {
                url: url::redact(&shown),
                source: url.scrub_error(source),
            },
            other => other,
        })
    }

    /// Closes the connection and waits until it is closed. A SQLite connection that is
    /// the last one to a WAL-mode file and may write it folds the WAL into the file and
    /// removes the `-wal` and `-shm` files, as SQLite does on every clean close (a
    /// connection dropped at process exit may not get to do so).
    pub async fn close(self) -> Result<(), DbError> {
        use sqlx::Connection;
        match self {
            Conn::Sqlite(c) => c.into_inner().close().await,
            Conn::Postgres(c) => c.into_inner().close().await,
        }
        .map_err(|source| DbError::Query {
            what: "closing the connection".into(),
            source,
        })
    }

    /// Lets go of a connection whose state is unknown (work dropped mid-statement): a
    /// PostgreSQL connection is dropped, not closed politely (which would wait for the
    /// statement; the server rolls back when the socket closes); a SQLite connection runs
    /// its statement to the end in this process anyway, so it is closed, which rolls
    /// back and, when it is the file's last connection, removes the `-wal` and `-shm`
    /// files.
    pub async fn abandon(self) {
        match self {
            Conn::Postgres(c) => drop(c),
            sqlite @ Conn::Sqlite(_) => {
                let _ = sqlite.close().await;
            }
        }
    }

    /// Puts dimlog's own tables (`dimlog_state`, `dimlog_runs`, `dimlog_dimensions`,
    /// `dimlog_assigned`, `dimlog_schema`) in `schema` (quoted) on PostgreSQL: every statement this
    /// connection runs names them qualified with it ([`postgres::qualify_state`]), so
    /// the session's `search_path` never decides where they are. A no-op on SQLite.
    pub fn set_state_schema(&mut self, schema: Option<String>) {
        if let Conn::Postgres(c) = self {
            c.state_schema = schema;
        }
    }

    /// The quoted schema of dimlog's own tables on a PostgreSQL target (see
    /// [`Conn::set_state_schema`]).
    pub fn state_schema(&self) -> Option<String> {
        match self {
            Conn::Postgres(c) => c.state_schema.clone(),
            Conn::Sqlite(_) => None,
        }
    }

    /// Tells a connection that will load dimension `dimension` where its tables are:
    /// `log` (quoted) in `schema` (quoted; None: the session's current schema), keyed by
    /// `keys` (quoted). On a Citus coordinator the load's session tables become
    /// distributed tables colocated with the log (by the key column, or the key's hash
    /// where it has several, see [`citus::distribution_column`]); a dimension whose log
    /// is already a local table stays a PostgreSQL one there (its tables are not
    /// distributed). A no-op elsewhere.
    pub async fn scope_to_dimension(
        &mut self,
        dimension: &str,
        schema: Option<&str>,
        (log, dim): (&str, &str),
        keys: &[String],
    ) -> Result<(), DbError> {
        let Conn::Postgres(c) = self else {
            return Ok(());
        };
        if c.citus.is_none() {
            return Ok(());
        }
        let distribution = citus::distribution_column(keys);
        let log_local = citus::layout(c, dimension, (log, dim), Some(&distribution)).await?;
        if !log_local {
            let nodes = citus::settle_commits(c, true).await?;
            if !nodes.is_empty() {
                return Err(DbError::UnsettledCommit {
                    dimension: dimension.to_string(),
                    nodes,
                });
            }
        }
        let reason = log_local.then(|| {
            "its log is a local table on the coordinator (`dimlog distribute` distributes it and the dimension)"
                .to_string()
        });
        let cluster = c.citus.as_mut().expect("checked above");
        match reason {
            Some(reason) => {
                if !std::mem::replace(&mut cluster.said_local, true) {
                    tracing::info!(
                        "the target is a Citus coordinator, but dimension {dimension} stays in local tables there: {reason}"
                    );
                }
                cluster.active = false;
                cluster.staging = None;
            }
            // Already scoped (this is the check again, under the dimension's lock): the
            // working tables it knows stay known.
            None if cluster.active && cluster.staging.is_some() => {}
            None => {
                cluster.active = true;
                let role = cluster.role.clone();
                cluster.staging = Some(Box::new(citus::Staging::new(dimension, &role, schema, log, keys)));
            }
        }
        Ok(())
    }

    /// Refuses a dimension whose log and dimension are not laid out alike on a Citus
    /// coordinator ([`DbError::MixedLayout`]: one distributed and the other local, or not
    /// colocated by the key columns `keys`, quoted), for commands that only read:
    /// [`Conn::scope_to_dimension`] refuses it for those that write. A dimension in local
    /// tables is then read with PostgreSQL's statements (a key of several columns has no
    /// hash there). A no-op elsewhere.
    pub async fn check_layout(
        &mut self,
        dimension: &str,
        tables: (&str, &str),
        keys: &[String],
    ) -> Result<(), DbError> {
        let key = citus::distribution_column(keys);
        match self {
            Conn::Postgres(c) if c.citus.is_some() => {
                let local = citus::layout(c, dimension, tables, Some(&key)).await?;
                if local && c.staging().is_none() {
                    if let Some(cluster) = c.citus.as_mut() {
                        cluster.active = false;
                    }
                }
                if !local {
                    // What a command would read of an unfinished commit is half of it.
                    let nodes = citus::settle_commits(c, false).await?;
                    if !nodes.is_empty() {
                        return Err(DbError::UnsettledCommit {
                            dimension: dimension.to_string(),
                            nodes,
                        });
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Makes a connection to a Citus coordinator speak Citus (its statements, not
    /// PostgreSQL's) whatever its dimension's tables are, without distributed working
    /// tables: for turning local tables into distributed ones. False where the target
    /// has no Citus.
    pub fn speak_citus(&mut self) -> bool {
        match self {
            Conn::Postgres(c) => match c.citus.as_mut() {
                Some(cluster) => {
                    cluster.active = true;
                    cluster.staging = None;
                    true
                }
                None => false,
            },
            Conn::Sqlite(_) => false,
        }
    }

    /// Takes the lock of dimension `dimension` before anything is read. On PostgreSQL
    /// it is a session advisory lock (see [`postgres::lock`]); on SQLite the run's
    /// `BEGIN IMMEDIATE` is the lock, and `wait` sets how long that waits.
    pub async fn lock_dimension(&mut self, dimension: &str, wait: bool) -> Result<(), DbError> {
        match self {
            Conn::Postgres(_) => postgres::lock::lock(self, dimension, wait).await,
            Conn::Sqlite(_) => {
                let ms = if wait { sqlite::LOCK_WAIT.as_millis() } else { 0 };
                self.execute_script("setting the lock wait", &format!("PRAGMA busy_timeout = {ms}"))
                    .await
            }
        }
    }

    /// Who holds the dimension's lock now, as ` (session …: application, user, since)`,
    /// where the engine can say without taking it (PostgreSQL); None when no one does
    /// or the engine cannot tell (SQLite: the lock is a write transaction).
    pub async fn lock_holder(&mut self, dimension: &str) -> Option<String> {
        match self {
            Conn::Postgres(_) => Some(postgres::lock::lock_holder(self, dimension).await).filter(|h| !h.is_empty()),
            Conn::Sqlite(_) => None,
        }
    }

    /// Cancels the statement this connection's server session is running, if any, so
    /// that what follows (a rollback) need not wait for it to end: PostgreSQL's cancel,
    /// sent from a second connection to `url`, as psql's Ctrl-C does; SQLite's from this
    /// process ([`sqlite::SqliteConn::stop_running`]).
    pub async fn cancel_running(&mut self, url: &DbUrl) {
        match self {
            Conn::Postgres(postgres::PgConn {
                backend_pid: Some(pid), ..
            }) => postgres::cancel(url, *pid).await,
            Conn::Sqlite(c) => c.stop_running().await,
            Conn::Postgres(_) => {}
        }
    }

    /// Releases the lock of [`Conn::lock_dimension`] where it belongs to the session
    /// (SQLite's ends with the transaction).
    pub async fn unlock_dimension(&mut self, dimension: &str) {
        if let Conn::Postgres(_) = self {
            postgres::lock::unlock(self, dimension).await;
        }
    }

    /// Opens a private, empty stand-in for a target database file that does not exist
    /// yet ([`file_not_there_yet`]), for commands that must not create it.
    pub async fn open_empty(url: &DbUrl) -> Result<Conn, DbError> {
        match url.backend {
            Backend::Sqlite => sqlite::connect_empty(url).await.map(Conn::Sqlite),
            Backend::Postgres | Backend::Citus => Conn::open(url, Access::ReadWrite).await,
        }
    }

    /// A connection that builds `file`, a SQLite target's new file (see [`NewFile`]).
    pub async fn open_new_file(url: &DbUrl, file: &NewFile) -> Result<Conn, DbError> {
        file.connect(url).await.map(Conn::Sqlite)
    }

    /// Closes this connection, [`Conn::open_new_file`]'s, and puts `file` in place
    /// ([`NewFile::put_in_place`]), unless it holds no table: then it is dropped. Returns
    /// whether it was put in place.
    pub async fn put_in_place(mut self, file: NewFile) -> Result<bool, DbError> {
        // Only a SQLite target is ever built aside.
        if !matches!(self, Conn::Sqlite(_)) {
            let _ = self.close().await;
            file.discard();
            return Ok(false);
        }
        // A run stopped before it made any table (in its first moments) leaves no file.
        let tables = self
            .query_text(
                "looking at the new target file",
                "SELECT count(*) FROM sqlite_schema",
                &[],
            )
            .await;
        if matches!(tables.as_deref(), Ok([row]) if row.first().and_then(|v| v.as_deref()) == Some("0")) {
            let _ = self.close().await;
            file.discard();
            return Ok(false);
        }
        let switched = self
            .execute_script("putting the new target file in WAL mode", "PRAGMA journal_mode = WAL")
            .await;
        match (self, switched) {
            (Conn::Sqlite(c), Ok(())) => file.put_in_place(c).await.map(|()| true),
            (conn, switched) => {
                let _ = conn.close().await;
                file.discard();
                switched.map(|()| false)
            }
        }
    }

    /// What identifies the database this connection is to, where the server can say
    /// (PostgreSQL: its system identifier, database and port); None where the URL alone
    /// decides (a SQLite file).
    pub async fn database_identity(&mut self) -> Result<Option<Vec<TextRow>>, DbError> {
        match self {
            Conn::Sqlite(_) => Ok(None),
            Conn::Postgres(_) => {
                let sql = sql::statement(Backend::Postgres, "extract", "identity", &serde_json::json!({}))?;
                self.query_text("finding which database this is", &sql, &[])
                    .await
                    .map(Some)
            }
        }
    }

    /// Whether rows read from this connection may pass to `target` as the engine's own
    /// COPY text, unparsed ([`dialect::Dialect::passes_copy_text`], both of one engine).
    pub fn passes_copy_text_to(&self, target: &Conn) -> bool {
        let (a, b) = (self.dialect(), target.dialect());
        a.passes_copy_text() && a.root() == b.root()
    }

    /// What this engine can do, and how it names and types things.
    pub fn dialect(&self) -> &'static dyn dialect::Dialect {
        self.backend().dialect()
    }

    /// The columns a query would return, with their type names as the engine reports
    /// them, without running it.
    pub async fn describe_columns(&mut self, sql: &str) -> Result<Vec<(String, String)>, sqlx::Error> {
        use sqlx::{Column, Executor, TypeInfo};
        fn named<C: Column>(columns: &[C]) -> Vec<(String, String)> {
            columns
                .iter()
                .map(|c| (c.name().to_string(), c.type_info().name().to_string()))
                .collect()
        }
        Ok(match self {
            Conn::Postgres(c) => named(c.describe(sql).await?.columns()),
            Conn::Sqlite(c) => named(c.describe(sql).await?.columns()),
        })
    }

    /// Streams the rows of a query whose columns are all text (the source's rows, as
    /// the extract's statement casts them), in batches of `batch_rows`, into `tx`. `Ts`
    /// parameters bind as the engine reads them; PostgreSQL's statement carries its
    /// bounds itself and streams as COPY text. Stops early, without error, when the
    /// receiver is gone. A value that is not UTF-8 text (SQLite stores any bytes in a
    /// text column) is [`StreamError::NotText`], with the row's first `key_count`
    /// values.
    pub async fn stream_text_rows<E: Send>(
        &mut self,
        sql: &str,
        params: &[Param],
        key_count: usize,
        batch_rows: usize,
        tx: &tokio::sync::mpsc::Sender<Result<Vec<TextRow>, E>>,
    ) -> Result<(), StreamError> {
        use futures::StreamExt;
        let err = |source| {
            StreamError::Db(DbError::Query {
                what: "reading the source".into(),
                source,
            })
        };
        let mut batch: Vec<TextRow> = Vec::with_capacity(batch_rows);
        match self {
            Conn::Postgres(c) => {
                let mut stream = c.copy_out_raw(sql).await.map_err(err)?;
                let mut parser = postgres::CopyTextParser::default();
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(err)?;
                    parser
                        .feed(&chunk, &mut batch)
                        .map_err(|m| err(sqlx::Error::Protocol(m)))?;
                    if batch.len() >= batch_rows && tx.send(Ok(std::mem::take(&mut batch))).await.is_err() {
                        return Ok(());
                    }
                }
            }
            Conn::Sqlite(c) => {
                let mut args = sqlx::sqlite::SqliteArguments::default();
                for p in params {
                    if let Param::Ts(t) = p {
                        sqlx::Arguments::add(&mut args, t.to_text()).map_err(|e| err(sqlx::Error::Encode(e)))?;
                    }
                }
                let mut stream = sqlx::query_with(sql, args).fetch(&mut **c);
                while let Some(row) = stream.next().await {
                    let row = row.map_err(err)?;
                    let n = sqlx::Row::len(&row);
                    let mut values = Vec::with_capacity(n);
                    for i in 0..n {
                        match sqlite::source_text(&row, i).map_err(err)? {
                            Ok(v) => values.push(v),
                            Err(bytes) => {
                                let key = (0..key_count.min(n))
                                    .map(|k| sqlite::source_text(&row, k))
                                    .collect::<Result<Vec<_>, _>>()
                                    .map_err(err)?;
                                return Err(StreamError::NotText { key, column: i, bytes });
                            }
                        }
                    }
                    batch.push(values);
                    if batch.len() >= batch_rows && tx.send(Ok(std::mem::take(&mut batch))).await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
        if !batch.is_empty() {
            let _ = tx.send(Ok(batch)).await;
        }
        Ok(())
    }

    /// Streams a query's rows as the engine's COPY text, unparsed, in pieces of about
    /// `piece_bytes`, into `tx` (for an engine that [`dialect::Dialect::passes_copy_text`]
    /// to another of its kind). Stops early when the receiver is gone.
    pub async fn stream_copy_text<E: Send>(
        &mut self,
        sql: &str,
        piece_bytes: usize,
        tx: &tokio::sync::mpsc::Sender<Result<Vec<u8>, E>>,
    ) -> Result<(), DbError> {
        use futures::StreamExt;
        let err = |source| DbError::Query {
            what: "reading the source".into(),
            source,
        };
        let Conn::Postgres(c) = self else {
            return Err(err(sqlx::Error::Protocol("raw COPY needs a PostgreSQL source".into())));
        };
        let mut stream = c.copy_out_raw(sql).await.map_err(err)?;
        let mut piece: Vec<u8> = Vec::with_capacity(piece_bytes + (64 << 10));
        while let Some(chunk) = stream.next().await {
            piece.extend_from_slice(&chunk.map_err(err)?);
            if piece.len() >= piece_bytes && tx.send(Ok(std::mem::take(&mut piece))).await.is_err() {
                return Ok(());
            }
        }
        if !piece.is_empty() {
            let _ = tx.send(Ok(piece)).await;
        }
        Ok(())
    }

    /// Which backend this is.
    pub fn backend(&self) -> Backend {
        match self {
            Conn::Sqlite(_) => Backend::Sqlite,
            Conn::Postgres(c) if c.citus.as_ref().is_some_and(|c| c.active) => Backend::Citus,
            Conn::Postgres(_) => Backend::Postgres,
        }
    }

    /// True where a dimension's lock is the write transaction itself (SQLite's `BEGIN
    /// IMMEDIATE`), so a load reads its source inside that transaction; false where the
    /// lock belongs to the session (PostgreSQL's advisory lock) and a load opens its
    /// transaction only once it has read the source, since a server may end a session
    /// idle in a transaction (`idle_in_transaction_session_timeout`) while a slow source
    /// answers.
    pub fn lock_is_a_transaction(&self) -> bool {
        matches!(self, Conn::Sqlite(_))
    }

    /// Whether the connection still answers (a killed session, a restarted server or a
    /// failover leave a connection that fails every statement).
    pub async fn is_alive(&mut self) -> bool {
        self.execute_script("checking the connection", "SELECT 1").await.is_ok()
    }

    /// Settings for the statements of a load, for the session: the load's reads run
    /// before its transaction opens, and sort and hash as much as its writes do (no JIT
    /// compilation for statements that run once; larger sort and hash memory; random
    /// reads priced as on SSDs). A no-op on SQLite.
    pub async fn tune_for_loads(&mut self) -> Result<(), DbError> {
        match self {
            Conn::Sqlite(_) => Ok(()),
            Conn::Postgres(_) => {
                self.execute_script(
                    "setting the session up for a load",
                    "SET jit = off; SET work_mem = '256MB'; SET maintenance_work_mem = '256MB'; SET random_page_cost = 1.1",
                )
                .await
            }
        }
    }

    /// Whether the server has `MERGE` (PostgreSQL 15 and later), which lets a rebuild
    /// write only the dimension rows that changed instead of deleting and re-inserting
    /// every row of a touched key.
    pub fn has_merge(&self) -> bool {
        match self {
            Conn::Sqlite(_) => false,
            Conn::Postgres(c) => c.server_version_num().is_some_and(|v| v >= 150_000),
        }
    }

    /// Runs one statement with bound parameters; returns rows affected.
    pub async fn execute(&mut self, what: &str, sql: &str, params: &[Param]) -> Result<u64, DbError> {
        match self {
            Conn::Sqlite(c) => sqlite::execute(c, sql, params).await,
            Conn::Postgres(c) => c.execute(what, sql, params).await,
        }
        .map_err(|source| DbError::Query {
            what: what.into(),
            source,
        })
    }

    /// Runs several `;`-separated statements without parameters (DDL scripts).
    pub async fn execute_script(&mut self, what: &str, sql: &str) -> Result<(), DbError> {
        use sqlx::Executor;
        let r = match self {
            Conn::Sqlite(c) => c.execute(sqlx::raw_sql(sql)).await.map(|_| ()),
            Conn::Postgres(c) => {
                let sql = c.qualify(sql).into_owned();
                sqlx::Executor::execute(&mut **c, sqlx::raw_sql(&sql)).await.map(|_| ())
            }
        };
        r.map_err(|source| DbError::Query {
            what: what.into(),
            source,
        })
    }

    /// Runs a query whose columns are all text (or NULL) and returns every row.
    pub async fn query_text(&mut self, what: &str, sql: &str, params: &[Param]) -> Result<Vec<TextRow>, DbError> {
        match self {
            Conn::Sqlite(c) => sqlite::query_text(c, sql, params).await,
            Conn::Postgres(c) => c.query_named(what, sql, params).await.map(|(_, rows)| rows),
        }
        .map_err(|source| DbError::Query {
            what: what.into(),
            source,
        })
    }

    /// Whether the engine would run `sql` through indexes alone, scanning no table
    /// whole: SQLite's query plan, read. `false` on engines that plan for themselves
    /// (PostgreSQL reads a window through whatever index it has).
    pub async fn reads_through_indexes(&mut self, sql: &str, params: &[Param]) -> Result<bool, DbError> {
        match self {
            Conn::Sqlite(c) => {
                let plan = sqlite::query_text(c, &format!("EXPLAIN QUERY PLAN {sql}"), params)
                    .await
                    .map_err(|source| DbError::Query {
                        what: "planning the source's read".into(),
                        source,
                    })?;
                // Each row: id, parent, unused, detail (`SCAN t`, `SEARCH t USING INDEX i (…)`).
                Ok(plan.iter().all(|r| {
                    let detail = r.get(3).cloned().flatten().unwrap_or_default();
                    !detail.starts_with("SCAN ") || detail.contains(" INDEX ")
                }))
            }
            Conn::Postgres(_) => Ok(false),
        }
    }

    /// Runs a query over one of dimlog's own tables, whose columns are all text (or
    /// NULL) and named: each row as a [`Record`] read by column name, with typed getters
    /// that say which column held what instead of reading a default.
    pub async fn query_records(&mut self, what: &str, sql: &str, params: &[Param]) -> Result<Vec<Record>, DbError> {
        let (names, rows) = match self {
            Conn::Sqlite(c) => sqlite::query_named(c, sql, params).await,
            Conn::Postgres(c) => c.query_named(what, sql, params).await,
        }
        .map_err(|source| DbError::Query {
            what: what.into(),
            source,
        })?;
        let names: std::sync::Arc<[String]> = names.into();
        Ok(rows
            .into_iter()
            .map(|values| Record {
                what: what.to_string(),
                names: names.clone(),
                values,
            })
            .collect())
    }

    /// Runs a query returning one row of integers (counts, ids), each read exactly
    /// (never through a float) and NULL as None; no row is an empty list. A value that
    /// is not a whole number is an error naming it.
    pub async fn query_i64s(&mut self, what: &str, sql: &str, params: &[Param]) -> Result<Vec<Option<i64>>, DbError> {
        let rows = self.query_text(what, sql, params).await?;
        let row = rows.into_iter().next().unwrap_or_default();
        row.into_iter()
            .map(|v| {
                v.map(|s| {
                    s.trim().parse::<i64>().map_err(|_| DbError::Query {
                        what: what.into(),
                        source: sqlx::Error::Decode(format!("expected a whole number, got {s:?}").into()),
                    })
                })
                .transpose()
            })
            .collect()
    }

    /// Runs a query returning one count (or another number that is never NULL) and
    /// returns it; no row or NULL is an error naming the statement.
    pub async fn query_count(&mut self, what: &str, sql: &str, params: &[Param]) -> Result<i64, DbError> {
        self.query_i64s(what, sql, params)
            .await?
            .first()
            .copied()
            .flatten()
            .ok_or_else(|| DbError::Query {
                what: what.into(),
                source: sqlx::Error::Decode("expected a number, got no value".into()),
            })
    }

    /// Starts the run's transaction.
    ///
    /// On PostgreSQL the transaction also gets settings for dimlog's few large
    /// statements: no JIT (its compile time costs more than it saves on these plans, and
    /// estimates on fresh temp tables can make the planner think a statement is huge), and
    /// sorts and hashes of a million staged rows done in memory rather than on disk, and
    /// index lookups priced as on a cached or solid-state database, so that a run that
    /// touches 1% of the keys probes the log's key index instead of scanning the log.
    pub async fn begin(&mut self) -> Result<(), DbError> {
        if let Conn::Sqlite(_) = self {
            return self.begin_sqlite_write().await;
        }
        let sql = match self {
            Conn::Sqlite(_) => "BEGIN IMMEDIATE",
            Conn::Postgres(_) => {
                "BEGIN; SET LOCAL jit = off; SET LOCAL work_mem = '256MB'; SET LOCAL maintenance_work_mem = '256MB'; \
                 SET LOCAL random_page_cost = 1.1"
            }
        };
        self.execute_script("begin transaction", sql).await?;
        if let Some(to_workers) = self.to_workers_too() {
            self.execute_script("begin transaction", to_workers).await?;
        }
        self.note_transaction(true);
        Ok(())
    }

    /// SQLite's write transaction, which is the dimension's lock there: tried at once
    /// first, so that a wait for another writer is reported before it starts (the wait
    /// itself is SQLite's busy timeout, set by [`Conn::lock_dimension`]).
    async fn begin_sqlite_write(&mut self) -> Result<(), DbError> {
        let rows = self
            .query_text("reading the lock wait", "PRAGMA busy_timeout", &[])
            .await?;
        let wait_ms: i64 = rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if wait_ms > 0 {
            self.execute_script("setting the lock wait", "PRAGMA busy_timeout = 0")
                .await?;
            let at_once = self.execute_script("begin transaction", "BEGIN IMMEDIATE").await;
            self.execute_script("setting the lock wait", &format!("PRAGMA busy_timeout = {wait_ms}"))
                .await?;
            match at_once {
                Ok(()) => return Ok(()),
                Err(e) if e.is_busy() => tracing::warn!(
                    "waiting for the lock of the target database file: another process is writing it (another dimlog run?)"
                ),
                Err(e) => return Err(e),
            }
        }
        self.execute_script("begin transaction", "BEGIN IMMEDIATE").await
    }

    /// What a transaction on a Citus coordinator adds to its settings so that the
    /// workers' connections, where the shards' statements are planned, run without JIT
    /// too: a worker left to its default compiled each shard's plan of a 100k-row load's
    /// statements once their estimates crossed `jit_above_cost`, 0.3 s per shard. Citus
    /// passes on only the `SET LOCAL`s after `citus.propagate_set_commands`, and passes
    /// each on as the whole text of the query it came in: these are sent on their own,
    /// after the `BEGIN` (which a worker would warn about) and without the coordinator's
    /// memory settings (which would be per shard there). None elsewhere.
    fn to_workers_too(&self) -> Option<&'static str> {
        match self {
            Conn::Postgres(c) if c.citus.is_some() => {
                Some("SET LOCAL citus.propagate_set_commands = 'local'; SET LOCAL jit = off")
            }
            _ => None,
        }
    }

    fn note_transaction(&mut self, open: bool) {
        if let Conn::Postgres(c) = self {
            c.in_transaction = open;
        }
    }

    /// Starts a transaction that reads the database and writes only temporary tables
    /// (`verify --against-source` stages the source in them): on SQLite a deferred one,
    /// which takes no write lock on the file, so it neither waits for a run nor holds one
    /// up (in WAL mode its first read fixes its snapshot); elsewhere [`Conn::begin`]'s.
    /// End it with [`Conn::rollback`].
    pub async fn begin_scratch(&mut self) -> Result<(), DbError> {
        match self {
            Conn::Sqlite(_) => {
                self.execute_script("begin a transaction", "BEGIN").await?;
                self.note_transaction(true);
                Ok(())
            }
            Conn::Postgres(_) => self.begin().await,
        }
    }

    /// Starts a transaction that only reads, on one snapshot of the database, and takes
    /// no lock a run would wait for: a deferred transaction on SQLite (in WAL mode its
    /// first read fixes the snapshot), `REPEATABLE READ READ ONLY` on PostgreSQL (with the
    /// settings of [`Conn::begin`]). End it with [`Conn::rollback`].
    pub async fn begin_read(&mut self) -> Result<(), DbError> {
        let sql = match self {
            Conn::Sqlite(_) => "BEGIN",
            Conn::Postgres(_) => {
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL jit = off; SET LOCAL work_mem = '256MB'; \
                 SET LOCAL random_page_cost = 1.1"
            }
        };
        self.execute_script("begin a read-only transaction", sql).await?;
        if let Some(to_workers) = self.to_workers_too() {
            self.execute_script("begin a read-only transaction", to_workers).await?;
        }
        self.note_transaction(true);
        Ok(())
    }

    /// Commits the run's transaction.
    pub async fn commit(&mut self) -> Result<(), DbError> {
        let committed = self.execute_script("commit", "COMMIT").await;
        self.note_transaction(false);
        if committed.is_ok() {
            // A Citus load's working tables hold source rows: emptied once it committed.
            let empty = match self {
                Conn::Postgres(c) => c
                    .citus
                    .as_mut()
                    .filter(|c| c.active)
                    .and_then(|c| c.staging.as_mut())
                    .and_then(|s| s.empty_written()),
                Conn::Sqlite(_) => None,
            };
            if let Some(sql) = empty {
                if let Err(e) = self.execute_script("emptying the load's working tables", &sql).await {
                    tracing::warn!("{e}");
                }
            }
        }
        committed
    }

    /// Ends the transaction by its outcome: commit on success, roll back on error.
    pub async fn finish<T, E: From<DbError>>(&mut self, result: Result<T, E>) -> Result<T, E> {
        match result {
            Ok(v) => {
                self.commit().await?;
                Ok(v)
            }
            Err(e) => {
                self.rollback().await;
                Err(e)
            }
        }
    }

    /// Rolls back; errors are ignored because the connection is dropped afterwards anyway.
    pub async fn rollback(&mut self) {
        if matches!(self, Conn::Postgres(c) if !c.in_transaction) {
            return;
        }
        let _ = self.execute_script("rollback", "ROLLBACK").await;
        self.note_transaction(false);
        if let Conn::Postgres(c) = self {
            if let Some(staging) = c.citus.as_mut().and_then(|c| c.staging.as_mut()) {
                staging.forget();
            }
        }
    }

    /// Opens `COPY table (columns) FROM STDIN` on PostgreSQL, for COPY text that is
    /// produced elsewhere (the source's own COPY output, passed through); SQLite has no
    /// such thing, use [`Conn::bulk_insert`].
    pub async fn copy_in_raw(
        &mut self,
        what: &str,
        table: &str,
        columns: &[String],
    ) -> Result<postgres::CopyIn<'_>, DbError> {
        let err = |source| DbError::Query {
            what: what.into(),
            source,
        };
        match self {
            Conn::Postgres(c) => {
                let sql = format!("COPY {} ({}) FROM STDIN", c.copy_table(table), columns.join(", "));
                c.copy_starts().await.map_err(err)?;
                c.copy_in_raw(&sql).await.map(postgres::CopyIn).map_err(err)
            }
            Conn::Sqlite(_) => Err(err(sqlx::Error::Protocol("COPY needs a PostgreSQL target".into()))),
        }
    }

    /// Suits the connection to a load that read `rows` rows, before its statements run:
    /// on a Citus coordinator a small load's statements run over fewer connections
    /// ([`citus::pool_for_load`]); a no-op elsewhere.
    pub async fn suit_to_load(&mut self, rows: u64) -> Result<(), DbError> {
        let Conn::Postgres(c) = self else {
            return Ok(());
        };
        match citus::pool_for_load(rows) {
            Some(sql) if c.staging().is_some() => self.execute_script("suiting the connection to the load", sql).await,
            _ => Ok(()),
        }
    }

    /// Sets up a stream of [`Conn::bulk_insert`] batches into a load's working table
    /// as one COPY would be (on Citus, outside the load's transaction: one connection
    /// per worker, set once for the stream, not per batch). End it with
    /// [`Conn::copy_ended`], also when the stream fails.
    pub async fn copies_start(&mut self, what: &str) -> Result<(), DbError> {
        match self {
            Conn::Postgres(c) => c.copy_starts().await.map_err(|source| DbError::Query {
                what: what.into(),
                source,
            }),
            Conn::Sqlite(_) => Ok(()),
        }
    }

    /// Ends what [`Conn::copy_in_raw`] or [`Conn::copies_start`] set up for its COPY,
    /// once the COPY is finished or cancelled.
    pub async fn copy_ended(&mut self, what: &str) -> Result<(), DbError> {
        match self {
            Conn::Postgres(c) => c.copy_ended().await.map_err(|source| DbError::Query {
                what: what.into(),
                source,
            }),
            Conn::Sqlite(_) => Ok(()),
        }
    }

    /// Hands every row of `sql` (its values as text) to `each`, without holding them all:
    /// on SQLite stepped in this thread ([`sqlite::pump::scan`]), on PostgreSQL as
    /// [`Conn::query_text`] reads them (its statements of this kind return a row or two).
    /// `key_count` values, first, name a row whose value is not UTF-8 text.
    pub async fn each_text_row<E: Send>(
        &mut self,
        what: &str,
        sql: &str,
        key_count: usize,
        mut each: impl FnMut(TextRow) -> Result<(), E> + Send,
    ) -> Result<(), PumpError<E>> {
        match self {
            Conn::Sqlite(c) => sqlite::pump::scan(c, (sql, &[]), key_count, each).await.map(|_| ()),
            Conn::Postgres(_) => {
                let rows = self
                    .query_text(what, sql, &[])
                    .await
                    .map_err(|e| PumpError::Stream(StreamError::Db(e)))?;
                for row in rows {
                    each(row).map_err(PumpError::Row)?;
                }
                Ok(())
            }
        }
    }

    /// Whether [`Conn::pump_from`] moves rows from `source` into this connection: both
    /// are SQLite.
    pub fn pumps_from(&self, source: &Conn) -> bool {
        matches!((self, source), (Conn::Sqlite(_), Conn::Sqlite(_)))
    }

    /// Moves the rows of `read` on `source` into `table` of this connection, through
    /// `each`, in this thread ([`sqlite::pump::pump`]; both SQLite, see
    /// [`Conn::pumps_from`]); with a rising key, only while the written rows' key rises.
    pub async fn pump_from<E>(
        &mut self,
        source: &mut Conn,
        read: (&str, &[Param]),
        key_count: usize,
        into: PumpInto<'_>,
        stop: &(dyn Fn() -> bool + Sync),
        each: impl FnMut(&mut [Option<&str>], &mut RowOut<'_>) -> Result<(), E> + Send,
    ) -> Result<u64, PumpError<E>>
    where
        E: Send,
    {
        match (self, source) {
            (Conn::Sqlite(target), Conn::Sqlite(source)) => {
                sqlite::pump::pump(source, target, read, key_count, into, stop, each).await
            }
            _ => Err(sqlite::pump::PumpError::Stream(StreamError::Db(DbError::Sqlite {
                what: "staging source rows".into(),
                message: "rows move this way between two SQLite databases only".into(),
            }))),
        }
    }

    /// Bulk-loads rows into a (staging) table: COPY on PostgreSQL, batched multi-row
    /// INSERTs on SQLite. `kinds` says how each column binds on SQLite.
    pub async fn bulk_insert(
        &mut self,
        what: &str,
        table: &str,
        columns: &[String],
        kinds: &[BindKind],
        rows: &[Vec<Option<String>>],
    ) -> Result<(), DbError> {
        if rows.is_empty() {
            return Ok(());
        }
        match self {
            Conn::Sqlite(c) => sqlite::bulk_insert(c, table, columns, kinds, rows).await,
            Conn::Postgres(c) => {
                let table = c.copy_table(table);
                // Inside a stream of batches ([`Conn::copies_start`]) the stream ends it.
                let alone = !c.copy_sequential;
                if alone {
                    c.copy_starts().await.map_err(|source| DbError::Query {
                        what: what.into(),
                        source,
                    })?;
                }
                let copied = postgres::copy_in(c, &table, columns, rows).await;
                if alone {
                    let ended = c.copy_ended().await;
                    copied.and(ended)
                } else {
                    copied
                }
            }
        }
        .map_err(|source| DbError::Query {
            what: what.into(),
            source,
        })
    }
}

/// Whether two table names from configs (`name` or `schema.name`, as validated by
/// [`crate::ident`]) name the same table: an unqualified name is in the engine's default
/// schema, and SQLite folds case where PostgreSQL's quoted names do not.
pub fn same_table(backend: Backend, a: &str, b: &str) -> bool {
    let dialect = backend.dialect();
    let parts = |t: &str| match t.split_once('.') {
        Some((schema, name)) => (schema.to_string(), name.to_string()),
        None => (dialect.default_schema().to_string(), t.to_string()),
    };
    let (a, b) = (parts(a), parts(b));
    dialect.same_name(&a.0, &b.0) && dialect.same_name(&a.1, &b.1)
}

/// How a text value binds to a SQLite column (PostgreSQL parses the text itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindKind {
    /// Integer if it parses, else text.
    Int,
    /// Real if it parses, else text.
    Float,
    /// 1 / 0.
    Bool,
    /// Hex text in, blob stored (`\x…` form).
    Bytes,
    /// As text.
    Text,
}

impl From<ColumnKind> for BindKind {
    fn from(k: ColumnKind) -> Self {
        use ColumnKind as K;
        match k {
            K::Int => BindKind::Int,
            K::Float => BindKind::Float,
            K::Bool => BindKind::Bool,
            K::Bytes => BindKind::Bytes,
            _ => BindKind::Text,
        }
    }
}

/// The kind of a column of `backend` from its declared type (as the catalog prints it).
pub fn kind_of_type(backend: Backend, type_name: &str) -> ColumnKind {
    backend.dialect().kind_of_type(type_name)
}

/// The type a target column of `kind` gets in `backend` when nothing else decides.
pub fn type_of_kind(backend: Backend, kind: ColumnKind) -> &'static str {
    backend.dialect().type_of_kind(kind)
}

/// Hex text in PostgreSQL's bytea form, `\x0a1b…`.
pub fn bytea_hex(bytes: &[u8]) -> String {
    let mut s = Vec::with_capacity(2 + bytes.len() * 2);
    s.extend_from_slice(b"\\x");
    push_hex(&mut s, bytes);
    String::from_utf8(s).expect("hex digits are ASCII")
}

/// Appends `bytes` as lowercase hex digits.
pub fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 15)]);
    }
}

/// Reads `\x…` hex back into bytes.
/// Pairs of hex digits only: no sign, no odd digit left over. (A first load reads every
/// row's hash back through this, so it works on bytes rather than on string slices.)
pub fn from_bytea_hex(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    let nibble = |d: u8| char::from(d).to_digit(16).map(|n| n as u8);
    hex.chunks_exact(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{bytea_hex, from_bytea_hex, step_for_people, without_aliases, DbError};

    proptest::proptest! {
        /// Whatever bytes are written as hex read back the same; text that is not an even
        /// run of hex digits after `\x` is not bytes.
        #[test]
        fn bytea_hex_reads_back_and_refuses_what_is_not_hex(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            text in "\\\\x[0-9a-fA-F+ g-]{0,9}",
        ) {
            proptest::prop_assert_eq!(from_bytea_hex(&bytea_hex(&bytes)), Some(bytes));
            let digits = &text[2..];
            let is_hex = digits.len() % 2 == 0 && digits.bytes().all(|b| b.is_ascii_hexdigit());
            proptest::prop_assert_eq!(from_bytea_hex(&text).is_some(), is_hex, "{}", text);
        }
    }

    #[test]
    fn a_failed_statement_is_said_in_words_and_kept_apart() {
        let e = DbError::Query {
            what: "rebuild/merge_touched".into(),
            source: sqlx::Error::Protocol("column dimlog_d.tier does not exist".into()),
        };
        let message = e.to_string();
        assert!(message.starts_with("rebuilding the dimension failed: "), "{message}");
        assert!(message.contains("column tier does not exist"), "{message}");
        assert!(!message.contains("merge_touched"), "{message}");
        assert_eq!(e.failed_step(), Some("rebuild/merge_touched"));
        let said = DbError::Query {
            what: "reading the watermark".into(),
            source: sqlx::Error::Protocol("x".into()),
        };
        assert_eq!(said.failed_step(), None);
        assert_eq!(step_for_people("reading the watermark"), "reading the watermark");
    }

    #[test]
    fn only_aliases_are_taken_out_of_messages() {
        assert_eq!(
            without_aliases("column dimlog_l.email does not exist"),
            "column email does not exist"
        );
        assert_eq!(
            without_aliases("relation \"dimlog_runs\" does not exist; dimlog_stage.x"),
            "relation \"dimlog_runs\" does not exist; dimlog_stage.x"
        );
        assert_eq!(without_aliases("my_dimlog_l.x dimlog_"), "my_dimlog_l.x dimlog_");
    }
}
