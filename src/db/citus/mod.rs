//! Citus: PostgreSQL with the `citus` extension, a coordinator that shards tables across
//! workers. The same wire protocol and SQL as PostgreSQL, so a Citus target is a
//! PostgreSQL connection that knows two things more:
//!
//! - its templates are PostgreSQL's with a few statements replaced (`sql/citus/`, see
//!   [`dialect::Citus`]): the log and the dimension are created distributed and colocated
//!   by the key, with primary keys that include it;
//! - the staging tables a load works in cannot be temporary: a temporary table lives on
//!   the coordinator only, and every statement joining it with a distributed table is
//!   pulled to the coordinator (a `MERGE` from it is refused). So, for a load, the names of
//!   the session tables (`dimlog_stage`, `dimlog_changes`, …) are mapped to unlogged
//!   distributed tables of the dimension, colocated with its log ([`Staging`]), made once
//!   and truncated per load, and the `CREATE TEMP TABLE … AS` of the PostgreSQL templates
//!   becomes an `INSERT … SELECT` into them, which Citus runs on the shards;
//! - a key of several columns is distributed by its hash ([`KEY_HASH`]), which Citus
//!   cannot compute as rows are copied in (a distribution column may not be generated):
//!   rows copied into a working table enter through a temporary table on the coordinator
//!   that computes it ([`Staging::enter`]), and move on to the working table when the
//!   copy ends.

pub mod dialect;

use crate::db::{postgres, DbError, Param};
use sqlx::PgConnection;
use std::collections::HashMap;

/// The session tables of a load, by their names in the PostgreSQL templates.
pub const SESSION_TABLES: [&str; 15] = [
    "dimlog_raw",
    "dimlog_stage",
    "dimlog_source_keys",
    // PostgreSQL's reconciliation only (Citus's `missing` and `unseen` read the tables).
    "dimlog_key_diff",
    "dimlog_missing",
    "dimlog_unseen",
    "dimlog_appended",
    "dimlog_history",
    "dimlog_restored",
    "dimlog_changes",
    "dimlog_rehashed",
    "dimlog_stale",
    "dimlog_touched",
    "dimlog_derived",
    "dimlog_rebuilt",
];

/// The column a key of several columns is distributed by on Citus: a 64-bit hash of the
/// key's values, computed by the database from the typed values ([`key_hash_of`]), so
/// that keys equal by their type's equality (`1.0` and `1.00`) hash alike, whatever text
/// brought them.
pub const KEY_HASH: &str = "dimlog_key_hash";

/// The working tables rows are copied into from outside the cluster (the source's rows,
/// its key list): with a hashed key they enter through a temporary table.
const COPIED_INTO: [&str; 2] = ["dimlog_raw", "dimlog_source_keys"];

/// The column a dimension with key columns `keys` (quoted) is distributed by: the key
/// column, or the hash of a key of several.
pub fn distribution_column(keys: &[String]) -> String {
    match keys {
        [one] => one.clone(),
        _ => KEY_HASH.to_string(),
    }
}

/// The hash of a key of several columns (quoted names, or expressions of their types):
/// PostgreSQL's hash of a row of their values, which hashes values equal by their type
/// alike (`1.0` and `1.00`), and is the same on every node.
pub fn key_hash_of(keys: &[String]) -> String {
    format!("hash_record_extended(ROW({}), 0)", keys.join(", "))
}

/// A quoted identifier as its name (`"a""b"` → `a"b`): Citus's functions take a column
/// by its name, not quoted.
pub fn bare(quoted: &str) -> String {
    match quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
        Some(inner) => inner.replace("\"\"", "\""),
        None => quoted.to_string(),
    }
}

/// What a PostgreSQL connection knows of Citus on its server.
#[derive(Debug, Default)]
pub struct Cluster {
    /// Whether this connection speaks Citus (templates and staging); false on a
    /// coordinator whose dimension tables are local ones (see `Conn::scope_to_dimension`).
    pub active: bool,
    /// The distributed session tables of the dimension a load works on; None for
    /// commands that only read (their session tables stay temporary).
    pub staging: Option<Box<Staging>>,
    /// Whether this connection has said that its dimension stays in local tables (said
    /// once: the layout is looked at again under the lock, and `distribute` speaks
    /// Citus to local tables meanwhile).
    pub said_local: bool,
    /// The session's role: each role loads in working tables of its own ([`Staging::new`]).
    pub role: String,
}

/// What [`detect`] finds.
pub struct Detected {
    /// Whether the server has the `citus` extension.
    pub citus: bool,
    /// The session's process id.
    pub pid: Option<i32>,
    /// The session's role.
    pub role: String,
}

/// Whether the server has the `citus` extension, the session's process id and role.
pub async fn detect(c: &mut PgConnection) -> Result<Detected, sqlx::Error> {
    // The session's process id comes in the same round trip: a run cancels its running
    // statement by it when interrupted (`postgres::cancel`).
    let sql = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')::text, pg_backend_pid()::text, \
               current_user::text";
    let rows = postgres::query_text(c, sql, &[]).await?;
    let cell = |i: usize| rows.first().and_then(|r| r.get(i).cloned().flatten());
    Ok(Detected {
        citus: cell(0).as_deref() == Some("true"),
        pid: cell(1).and_then(|p| p.parse().ok()),
        role: cell(2).unwrap_or_default(),
    })
}

/// Whether the session may finish other sessions' commits (a superuser's right, by default).
const MAY_RECOVER: &str =
    "SELECT has_function_privilege('pg_catalog.recover_prepared_transactions()', 'EXECUTE')::text";

/// Finishes the commits of this database that the coordinator decided and a worker has
/// not done (Citus's own recovery, which its maintenance daemon runs every
/// `citus.recover_2pc_interval`).
const RECOVER: &str = "SELECT pg_catalog.recover_prepared_transactions()::text";

/// The workers (`host:port`) that still hold, prepared, a transaction of this database
/// that the coordinator committed: its record is in `pg_dist_transaction` (the
/// coordinator writes it in the transaction it commits, so a record this session sees
/// was committed; `outer_xid` is 0 but for Citus's own management transactions, whose
/// outer transaction must have committed) and its name is among the worker's prepared
/// transactions. A record alone says nothing: records stay until recovery clears them.
const UNSETTLED: &str = "WITH prepared AS ( \
        SELECT w.nodename, w.nodeport, unnest(string_to_array(w.result, ',')) AS gid \
        FROM run_command_on_workers($$SELECT coalesce(string_agg(gid, ','), '') FROM pg_prepared_xacts \
                                      WHERE database = current_database()$$) w \
        WHERE w.success) \
    SELECT DISTINCT p.nodename || ':' || p.nodeport::text \
    FROM pg_dist_transaction t \
    JOIN pg_dist_node n ON n.groupid = t.groupid \
    JOIN prepared p ON p.nodename = n.nodename AND p.nodeport = n.nodeport AND p.gid = t.gid \
    WHERE COALESCE(t.outer_xid, '0'::xid8) = '0'::xid8 OR pg_xact_status(t.outer_xid) = 'committed' \
    ORDER BY 1";

/// Makes sure no commit of an earlier transaction is left half done on the workers
/// before a writing command reads the dimension, and returns the workers where one
/// still is. A worker that fails between Citus's two commit phases leaves the
/// transaction committed on the coordinator and prepared on the worker until Citus
/// recovers it: a run reading meanwhile would find the versions of that worker's keys
/// missing and append them again, and a command that only reads would see half a load.
/// A writing session (`recover`) whose role may run Citus's recovery runs it; every
/// session then looks for what is left, a few times, since a commit of another session
/// may be between its phases just then.
pub async fn settle_commits(c: &mut postgres::PgConn, recover: bool) -> Result<Vec<String>, DbError> {
    let failed = |what: &str| {
        let what = what.to_string();
        move |source| DbError::Query { what, source }
    };
    let may_recover = recover
        && postgres::query_text(c, MAY_RECOVER, &[])
            .await
            .map_err(failed("asking whether this role may finish Citus's unfinished commits"))?
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .as_deref()
            == Some("true");
    let mut nodes = Vec::new();
    for attempt in 0..5u64 {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(100 * attempt)).await;
        }
        if may_recover {
            postgres::query_text(c, RECOVER, &[])
                .await
                .map_err(failed("finishing commits Citus left unfinished on a worker"))?;
        }
        nodes = postgres::query_text(c, UNSETTLED, &[])
            .await
            .map_err(failed("looking for commits Citus left unfinished on a worker"))?
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .collect();
        if nodes.is_empty() {
            break;
        }
    }
    Ok(nodes)
}

/// The session tables of one dimension on a Citus coordinator.
#[derive(Debug)]
pub struct Staging {
    /// `"schema".` or empty: where the tables are (the log's schema).
    prefix: String,
    /// Schema as a text literal for the catalog, or None for `current_schema()`.
    schema_literal: Option<String>,
    /// `_` and 8 hex digits of the dimension's name and the session's role: one set of
    /// tables per dimension, so that dimensions of one target load at once (one load per
    /// dimension: its lock), and per role, so that each role owns the tables it empties,
    /// drops and makes again (only a table's owner may drop it, or analyse it).
    suffix: String,
    /// The log, quoted: the tables are colocated with it.
    log: String,
    /// The distribution column, quoted.
    key: String,
    /// The key columns (quoted) of a key distributed by its hash, None for a one-column key.
    hashed: Option<Vec<String>>,
    /// The temporary tables rows enter through, by working table, each with the
    /// signature it was made for (see [`Staging::enter`]); forgotten after a
    /// rollback, which may have undone one made.
    entries: HashMap<String, String>,
    /// The working tables whose entry holds rows copied in and not moved on yet.
    entered: std::collections::BTreeSet<String>,
    /// Each existing table's signature (its comment): the columns it was made for. Read
    /// from the catalog again after a rollback, which may have undone a table made.
    made: Option<HashMap<String, String>>,
    /// Tables that may hold rows written on this connection: emptied before they are
    /// filled again, and after a load commits. The others were emptied together when
    /// the connection first used them (one round trip for all, see [`empty`]).
    dirty: std::collections::BTreeSet<String>,
    /// Rows the fills of this connection wrote, since the tables were last emptied.
    rows_written: u64,
}

/// Up to how many rows a load reads for its statements to be run over the connections a
/// session has (see [`pool_for_load`]).
const SMALL_LOAD_ROWS: u64 = 100_000;

/// The setting a load of `rows` read rows runs its statements under, if any. Citus's
/// executor opens more connections to a worker while shard tasks wait (up to 16 per
/// worker per statement) and closes them when the transaction ends: for a small load's
/// statements, whose tasks take milliseconds, the connections cost more than the
/// parallelism gives. With one connection per worker, an incremental load of 11k rows
/// into a 1M-key dimension on 32 shards took 0.51 s instead of 0.78 s (three-node
/// loopback cluster). A bigger load keeps Citus's default.
pub fn pool_for_load(rows: u64) -> Option<&'static str> {
    (rows <= SMALL_LOAD_ROWS).then_some("SET citus.max_adaptive_executor_pool_size = 1")
}

/// From how many rows a fill of a working table analyses it. A working table outlives the
/// load, and with it its statistics: emptied by `DELETE`, a table that autovacuum (or an
/// operator's `ANALYZE`) then finds empty keeps its pages and says it holds no rows, so
/// the next load's planner, scaling that density to the pages it has, takes a table of
/// 100k rows for one row and joins two working tables (which have no index) by nested
/// loop: a run that took 8 s ran for minutes (a trial's 60k-key dimension on 2 shards,
/// every key changed). A fill's own `ANALYZE` (24 ms for 11k rows on 2 shards) makes the
/// statistics the rows'; below this many rows a misjudged join costs little.
const ANALYSE_FROM_ROWS: u64 = 10_000;

/// Up to how many rows a committed load leaves in its working tables for the next
/// load's emptying (which runs anyway), saving a round of every shard: a big load's
/// rows (a first load's copy of the source) are emptied at once.
const ROWS_LEFT_FOR_THE_NEXT_LOAD: u64 = 200_000;

impl Staging {
    /// The session tables of `dimension` for a session of role `role`, in `schema`
    /// (quoted; None: the session's current schema), colocated with `log` (quoted) by
    /// the dimension's key columns `keys` (quoted; see [`distribution_column`]).
    pub fn new(dimension: &str, role: &str, schema: Option<&str>, log: &str, keys: &[String]) -> Staging {
        let hash = blake3::hash(format!("{dimension}\0{role}").as_bytes()).to_hex();
        Staging {
            prefix: schema.map(|s| format!("{s}.")).unwrap_or_default(),
            schema_literal: schema.map(|s| {
                let bare = s.trim_matches('"').replace("\"\"", "\"");
                format!("'{}'", bare.replace('\'', "''"))
            }),
            suffix: format!("_{}", &hash[..8]),
            log: log.to_string(),
            key: distribution_column(keys),
            hashed: (keys.len() > 1).then(|| keys.to_vec()),
            entries: HashMap::new(),
            entered: Default::default(),
            made: None,
            dirty: Default::default(),
            rows_written: 0,
        }
    }

    /// The statement that empties every table this connection wrote to, after a load
    /// commits, when it wrote many rows (the source's rows are not kept until the next
    /// load, which empties the tables first anyway); forgets them as written.
    pub fn empty_written(&mut self) -> Option<String> {
        if std::mem::take(&mut self.rows_written) < ROWS_LEFT_FOR_THE_NEXT_LOAD {
            return None;
        }
        let tables: Vec<String> = std::mem::take(&mut self.dirty)
            .into_iter()
            .map(|bare| format!("{}{bare}", self.prefix))
            .collect();
        (!tables.is_empty()).then(|| format!("TRUNCATE {}", tables.join(", ")))
    }

    /// Forgets what it knows of the tables, after a rollback.
    pub fn forget(&mut self) {
        self.made = None;
        self.entries.clear();
        self.entered.clear();
    }

    /// The temporary table a `COPY` into session table `table` goes to instead, with a
    /// hashed key: its rows move on when the copy ends ([`move_entered`]).
    pub fn enter(&mut self, table: &str) -> Option<String> {
        self.entries.contains_key(table).then(|| {
            self.entered.insert(table.to_string());
            entry(table)
        })
    }

    /// Whether rows copied in wait in an entry, to be moved on ([`move_entered`]).
    pub fn has_entered(&self) -> bool {
        !self.entered.is_empty()
    }

    /// The bare name of a session table's distributed stand-in.
    fn bare(&self, name: &str) -> String {
        format!("{name}{}", self.suffix)
    }

    /// The qualified name of a session table's distributed stand-in.
    fn table(&self, name: &str) -> String {
        format!("{}{}", self.prefix, self.bare(name))
    }

    /// `sql` with every session table named by its stand-in: a whole word, not already
    /// qualified or quoted (the names start with `dimlog_`, which is dimlog's alone). A
    /// name the statement defines as a CTE (`dimlog_rebuilt (…) AS (…)` in `verify`) is
    /// the CTE's, and stays as it is, definition and uses alike: a CTE's name takes no
    /// schema.
    pub fn rename(&self, sql: &str) -> String {
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let ctes = cte_names(sql);
        let bytes = sql.as_bytes();
        let mut out = String::with_capacity(sql.len() + 64);
        let (mut i, mut copied) = (0, 0);
        while i < bytes.len() {
            let hit = (bytes[i] == b'd'
                && (i == 0 || !(word(bytes[i - 1]) || bytes[i - 1] == b'.' || bytes[i - 1] == b'"')))
                .then(|| {
                    SESSION_TABLES.iter().filter(|name| !ctes.contains(name)).find(|name| {
                        let end = i + name.len();
                        sql[i..].starts_with(*name) && (end == bytes.len() || !(word(bytes[end]) || bytes[end] == b'"'))
                    })
                })
                .flatten();
            match hit {
                Some(name) => {
                    out.push_str(&sql[copied..i]);
                    out.push_str(&self.table(name));
                    i += name.len();
                    copied = i;
                }
                None => i += 1,
            }
        }
        out.push_str(&sql[copied..]);
        out
    }
}

/// The temporary table rows of session table `table` enter through.
fn entry(table: &str) -> String {
    format!("pg_temp.{}", table.replacen("dimlog_", "dimlog_entry_", 1))
}

/// Moves the rows copied into entries ([`Staging::enter`]) on to their working
/// tables, and empties the entries; returns the rows moved. Citus reads the temporary
/// table on the coordinator and copies its rows to the shards by their hash.
pub async fn move_entered(c: &mut PgConnection, staging: &mut Staging) -> Result<u64, sqlx::Error> {
    let mut moved = 0;
    for table in std::mem::take(&mut staging.entered) {
        let sql = format!("INSERT INTO {} SELECT * FROM {}", staging.table(&table), entry(&table));
        let rows = postgres::execute(c, &sql, &[]).await?;
        postgres::execute(c, &format!("TRUNCATE {}", entry(&table)), &[]).await?;
        analyse_if_big(c, staging, &table, rows).await?;
        moved += rows;
    }
    staging.rows_written += moved;
    Ok(moved)
}

/// Analyses working table `table` after a fill of `rows` rows, when that many could be
/// misjudged at a cost ([`ANALYSE_FROM_ROWS`]). (Every role loads in tables it owns, so it
/// may.) A table copied into straight from the source is only read whole, by dedupe, and
/// is not analysed: its fill's count is not known.
async fn analyse_if_big(c: &mut PgConnection, staging: &Staging, table: &str, rows: u64) -> Result<(), sqlx::Error> {
    if rows >= ANALYSE_FROM_ROWS {
        postgres::execute(c, &format!("ANALYZE {}", staging.table(table)), &[]).await?;
    }
    Ok(())
}

/// The session-table names `sql` defines as CTEs: `name [(columns)] AS [[NOT]
/// MATERIALIZED] (`.
fn cte_names(sql: &str) -> Vec<&'static str> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    SESSION_TABLES
        .iter()
        .copied()
        .filter(|name| {
            sql.match_indices(name).any(|(at, _)| {
                let before = sql[..at].bytes().next_back();
                if before.is_some_and(|b| word(b) || b == b'.' || b == b'"') {
                    return false;
                }
                let mut rest = &sql[at + name.len()..];
                if rest.bytes().next().is_some_and(word) {
                    return false;
                }
                rest = rest.trim_start();
                if rest.starts_with('(') {
                    match matching_paren(rest) {
                        Some(close) => rest = rest[close + 1..].trim_start(),
                        None => return false,
                    }
                }
                let Some(r) = rest.strip_prefix("AS") else { return false };
                let mut r = r.trim_start();
                for kw in ["NOT MATERIALIZED", "MATERIALIZED"] {
                    if let Some(x) = r.strip_prefix(kw) {
                        r = x.trim_start();
                        break;
                    }
                }
                r.starts_with('(')
            })
        })
        .collect()
}

/// A statement of the PostgreSQL templates that makes or drops session tables, as the
/// Citus staging runs it instead.
#[derive(Debug, PartialEq)]
pub enum SessionDdl<'a> {
    /// `DROP TABLE IF EXISTS pg_temp.a, pg_temp.b`: empty them.
    Drop(Vec<&'a str>),
    /// `CREATE TEMP TABLE t (column definitions)`.
    Define { table: &'a str, columns: &'a str },
    /// `CREATE TEMP TABLE t [(names)] [ON COMMIT DROP] AS query [WITH NO DATA]`.
    Fill {
        table: &'a str,
        names: Option<&'a str>,
        query: &'a str,
        no_data: bool,
    },
    /// `ALTER TABLE a RENAME TO b`: b gets a's rows.
    Rename { from: &'a str, to: &'a str },
}

/// Recognises the session-table statements of the PostgreSQL templates.
pub fn session_ddl(sql: &str) -> Option<SessionDdl<'_>> {
    let sql = sql.trim();
    if let Some(rest) = sql.strip_prefix("DROP TABLE IF EXISTS pg_temp.") {
        let names = std::iter::once(rest)
            .flat_map(|r| r.split(','))
            .map(|n| n.trim().trim_start_matches("pg_temp.").trim())
            .collect::<Vec<_>>();
        return names
            .iter()
            .all(|n| SESSION_TABLES.contains(n))
            .then_some(SessionDdl::Drop(names));
    }
    if let Some(rest) = sql.strip_prefix("ALTER TABLE ") {
        let (from, to) = rest.split_once(" RENAME TO ")?;
        let (from, to) = (from.trim(), to.trim());
        return (SESSION_TABLES.contains(&from) && SESSION_TABLES.contains(&to))
            .then_some(SessionDdl::Rename { from, to });
    }
    let rest = sql.strip_prefix("CREATE TEMP TABLE ")?;
    let end = rest.find(|c: char| c.is_whitespace() || c == '(').unwrap_or(rest.len());
    let table = &rest[..end];
    if !SESSION_TABLES.contains(&table) {
        return None;
    }
    let mut rest = rest[end..].trim_start();
    let mut list = None;
    if rest.starts_with('(') {
        let close = matching_paren(rest)?;
        list = Some(&rest[1..close]);
        rest = rest[close + 1..].trim_start();
    }
    if let Some(r) = rest.strip_prefix("ON COMMIT DROP") {
        rest = r.trim_start();
    }
    match rest.strip_prefix("AS") {
        Some(query) if query.starts_with(char::is_whitespace) => {
            let query = query.trim();
            let (query, no_data) = match query.strip_suffix("WITH NO DATA") {
                Some(q) => (q.trim_end(), true),
                None => (query, false),
            };
            Some(SessionDdl::Fill {
                table,
                names: list,
                query,
                no_data,
            })
        }
        _ if rest.is_empty() => Some(SessionDdl::Define { table, columns: list? }),
        _ => None,
    }
}

/// The index of the parenthesis closing the one `text` starts with.
fn matching_paren(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Runs a session-table statement on the distributed stand-ins; returns rows written.
pub async fn run_session_ddl(
    c: &mut PgConnection,
    staging: &mut Staging,
    ddl: SessionDdl<'_>,
    params: &[Param],
    (what, in_transaction): (&str, bool),
) -> Result<u64, sqlx::Error> {
    load_made(c, staging).await?;
    match ddl {
        SessionDdl::Drop(names) => {
            let written: Vec<&str> = names
                .into_iter()
                .filter(|n| {
                    let bare = staging.bare(n);
                    staging.dirty.remove(&bare)
                })
                .collect();
            let present: Vec<String> = written.iter().map(|n| staging.table(n)).collect();
            if !present.is_empty() {
                empty(c, &present).await?;
            }
            Ok(0)
        }
        SessionDdl::Define { table, columns } => {
            let hashed = staging.hashed.clone().filter(|_| COPIED_INTO.contains(&table));
            let Some(keys) = hashed else {
                let signature = format!("define ({columns})");
                let create = format!("CREATE UNLOGGED TABLE {} ({columns})", staging.table(table));
                ensure(c, staging, table, &signature, &create, &[]).await?;
                return Ok(0);
            };
            // The working table has the hash as a column of its own, filled from the
            // entry, where the coordinator computes it from the key's typed values.
            let columns = columns.trim_end();
            let signature = format!("define ({columns}, {KEY_HASH} bigint)");
            let create = format!(
                "CREATE UNLOGGED TABLE {} ({columns}, {KEY_HASH} bigint)",
                staging.table(table)
            );
            ensure(c, staging, table, &signature, &create, &[]).await?;
            if staging.entries.get(table) != Some(&signature) {
                let entry = entry(table);
                let hash = key_hash_of(&keys);
                postgres::execute(c, &format!("DROP TABLE IF EXISTS {entry}"), &[]).await?;
                postgres::execute(
                    c,
                    &format!(
                        "CREATE TEMP TABLE {entry} ({columns}, {KEY_HASH} bigint GENERATED ALWAYS AS ({hash}) STORED)"
                    ),
                    &[],
                )
                .await?;
                staging.entries.insert(table.to_string(), signature);
            }
            Ok(0)
        }
        SessionDdl::Fill {
            table,
            names,
            query,
            no_data,
        } => {
            let query = staging.rename(query);
            let described = describe(c, &query).await?;
            let signature = format!("fill ({}) {described}", names.unwrap_or(""));
            let create = format!(
                "CREATE UNLOGGED TABLE {}{} AS {query} WITH NO DATA",
                staging.table(table),
                names.map(|n| format!(" ({n})")).unwrap_or_default()
            );
            ensure(c, staging, table, &signature, &create, params).await?;
            if no_data {
                return Ok(0);
            }
            let insert = format!("INSERT INTO {} {query}", staging.table(table));
            postgres::plans::record(c, in_transaction, what, &insert, params).await;
            let rows = postgres::execute(c, &insert, params).await?;
            staging.rows_written += rows;
            analyse_if_big(c, staging, table, rows).await?;
            Ok(rows)
        }
        SessionDdl::Rename { from, to } => {
            let query = format!("SELECT * FROM {}", staging.table(from));
            let described = describe(c, &query).await?;
            let signature = format!("fill () {described}");
            let create = format!("CREATE UNLOGGED TABLE {} AS {query} WITH NO DATA", staging.table(to));
            ensure(c, staging, to, &signature, &create, &[]).await?;
            let rows = postgres::execute(c, &format!("INSERT INTO {} {query}", staging.table(to)), &[]).await?;
            staging.rows_written += rows;
            analyse_if_big(c, staging, to, rows).await?;
            Ok(rows)
        }
    }
}

/// The columns (names and types) a query returns, as one line. (From the prepared
/// statement: `describe` would also EXPLAIN it, to learn which columns may be NULL,
/// which on Citus plans the whole distributed query once more.)
async fn describe(c: &mut PgConnection, query: &str) -> Result<String, sqlx::Error> {
    use sqlx::{Column, Executor, Statement, TypeInfo};
    let d = c.prepare(query).await?;
    Ok(d.columns()
        .iter()
        .map(|col| format!("{} {}", col.name(), col.type_info().name()))
        .collect::<Vec<_>>()
        .join(", "))
}

/// Reads, once per connection, which stand-ins exist and what each was made for.
async fn load_made(c: &mut PgConnection, staging: &mut Staging) -> Result<(), sqlx::Error> {
    if staging.made.is_some() {
        return Ok(());
    }
    let schema = staging
        .schema_literal
        .as_ref()
        .map_or_else(|| "current_schema()".to_string(), |s| s.clone());
    let like = format!("'dimlog\\_%{}'", staging.suffix);
    let sql = format!(
        "SELECT c.relname::text, COALESCE(obj_description(c.oid, 'pg_class'), '') FROM pg_class c \
         WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = {schema}) AND c.relkind = 'r' AND c.relname LIKE {like}"
    );
    let rows = postgres::query_text(c, &sql, &[]).await?;
    let made: HashMap<String, String> = rows
        .into_iter()
        .filter_map(|r| {
            let mut r = r.into_iter();
            Some((r.next()??, r.next()?.unwrap_or_default()))
        })
        .collect();
    // Rows an earlier connection left (a committed small load's, or one that wrote
    // outside a transaction and then failed or was killed) go.
    let mut tables: Vec<String> = made.keys().map(|bare| format!("{}{bare}", staging.prefix)).collect();
    tables.sort();
    empty(c, &tables).await?;
    staging.dirty.clear();
    staging.rows_written = 0;
    staging.made = Some(made);
    Ok(())
}

/// Empties working tables (qualified names) with `DELETE`, all in one round trip.
/// `TRUNCATE` gives each shard of a distributed table a new file and takes its strongest
/// lock, even when the shard is empty: 0.4–0.6 s for a load's 14 tables at 32 shards
/// each, against 10 ms a table for `DELETE` of nothing and 0.3 s of a million rows
/// (measured on the three-node loopback cluster). The dead rows are vacuumed on the
/// workers; a big load's tables are still truncated after it commits
/// ([`Staging::empty_written`]), which gives their space back at once.
async fn empty(c: &mut PgConnection, tables: &[String]) -> Result<(), sqlx::Error> {
    use sqlx::Executor;
    if tables.is_empty() {
        return Ok(());
    }
    let sql: String = tables.iter().map(|t| format!("DELETE FROM {t};")).collect();
    c.execute(sqlx::raw_sql(&sql)).await?;
    Ok(())
}

/// Makes the stand-in of `table` for `signature` (the columns it must have) unless it was
/// made for it already, then sees that it is empty.
async fn ensure(
    c: &mut PgConnection,
    staging: &mut Staging,
    table: &str,
    signature: &str,
    create: &str,
    params: &[Param],
) -> Result<(), sqlx::Error> {
    let bare = staging.bare(table);
    let mark = blake3::hash(signature.as_bytes()).to_hex()[..32].to_string();
    let made = staging.made.get_or_insert_with(HashMap::new);
    if made.get(&bare) == Some(&mark) {
        if staging.dirty.contains(&bare) {
            empty(c, &[staging.table(table)]).await?;
        }
        staging.dirty.insert(bare);
        return Ok(());
    }
    let qualified = staging.table(table);
    postgres::execute(c, &format!("DROP TABLE IF EXISTS {qualified}"), &[]).await?;
    postgres::execute(c, create, params).await?;
    let literal = |s: &str| format!("'{}'", s.replace('\'', "''"));
    postgres::execute(
        c,
        &format!(
            "SELECT create_distributed_table({}, {}, colocate_with => {})",
            literal(&qualified),
            literal(&self::bare(&staging.key)),
            literal(&staging.log)
        ),
        &[],
    )
    .await?;
    postgres::execute(c, &format!("COMMENT ON TABLE {qualified} IS '{mark}'"), &[]).await?;
    staging.made.get_or_insert_with(HashMap::new).insert(bare.clone(), mark);
    staging.dirty.insert(bare);
    Ok(())
}

/// Whether dimension `dimension`'s log is a local table on a Citus coordinator (false:
/// distributed, or not there yet). The log and the dimension not laid out alike is
/// [`DbError::MixedLayout`]: one distributed and the other local, or both distributed
/// but not colocated by `key` (quoted; the one key column, where there is one).
pub async fn layout(
    c: &mut postgres::PgConn,
    dimension: &str,
    (log, dim): (&str, &str),
    key: Option<&str>,
) -> Result<bool, DbError> {
    let sql = "SELECT (to_regclass($1) IS NOT NULL)::text, \
               (SELECT colocationid::text || ':' || COALESCE(column_to_column_name(logicalrelid, partkey), '') \
                FROM pg_dist_partition WHERE logicalrelid = to_regclass($1)), \
               (to_regclass($2) IS NOT NULL)::text, \
               (SELECT colocationid::text || ':' || COALESCE(column_to_column_name(logicalrelid, partkey), '') \
                FROM pg_dist_partition WHERE logicalrelid = to_regclass($2))";
    let sql = c.qualify(sql).into_owned();
    let rows = postgres::query_text(c, &sql, &[Param::Text(log.to_string()), Param::Text(dim.to_string())])
        .await
        .map_err(|source| DbError::Query {
            what: "finding whether the log and the dimension are distributed".into(),
            source,
        })?;
    let row = rows.into_iter().next().unwrap_or_default();
    let at = |i: usize| row.get(i).cloned().flatten();
    let (log_there, log_dist) = (at(0).as_deref() == Some("true"), at(1));
    let (dim_there, dim_dist) = (at(2).as_deref() == Some("true"), at(3));
    let fault = |fault: String, way_out: String| DbError::MixedLayout {
        dimension: dimension.to_string(),
        fault,
        way_out,
    };
    match (&log_dist, &dim_dist) {
        (Some(_), None) | (None, Some(_)) if log_there && dim_there => {
            let (done, not) = if log_dist.is_some() { (log, dim) } else { (dim, log) };
            Err(fault(
                format!("{done} is a distributed table and {not} a local one"),
                format!("SELECT undistribute_table('{done}'), then `dimlog distribute` distributes both, colocated"),
            ))
        }
        (Some(l), Some(d)) => {
            let by = |placement: &str| placement.split_once(':').map(|(_, column)| column.to_string());
            let wanted = key.map(bare);
            let keyed = |placement: &str| wanted.is_none() || by(placement) == wanted;
            let group = |placement: &str| placement.split_once(':').map(|(group, _)| group.to_string());
            if group(l) == group(d) && keyed(l) && keyed(d) {
                return Ok(false);
            }
            let column = |placement: &str| match by(placement).filter(|c| !c.is_empty()) {
                Some(c) => format!("by {c}"),
                None => "as a reference table".to_string(),
            };
            Err(fault(
                format!(
                    "{log} (distributed {}) and {dim} (distributed {}) are not colocated{}",
                    column(l),
                    column(d),
                    wanted.map(|k| format!(" by the key {k}")).unwrap_or_default()
                ),
                format!(
                    "SELECT undistribute_table('{dim}'); SELECT undistribute_table('{log}'); then `dimlog distribute` \
                     distributes both, colocated by the key"
                ),
            ))
        }
        _ => Ok(log_there && log_dist.is_none()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_statements_are_recognised() {
        assert_eq!(
            session_ddl("CREATE TEMP TABLE dimlog_stage AS\nSELECT 1"),
            Some(SessionDdl::Fill {
                table: "dimlog_stage",
                names: None,
                query: "SELECT 1",
                no_data: false
            })
        );
        assert_eq!(
            session_ddl("CREATE TEMP TABLE dimlog_derived (a, b, dimlog_dead) ON COMMIT DROP AS\nSELECT (1), 2, 3"),
            Some(SessionDdl::Fill {
                table: "dimlog_derived",
                names: Some("a, b, dimlog_dead"),
                query: "SELECT (1), 2, 3",
                no_data: false
            })
        );
        assert_eq!(
            session_ddl("CREATE TEMP TABLE dimlog_appended ON COMMIT DROP AS\nSELECT a FROM t WITH NO DATA"),
            Some(SessionDdl::Fill {
                table: "dimlog_appended",
                names: None,
                query: "SELECT a FROM t",
                no_data: true
            })
        );
        assert_eq!(
            session_ddl("CREATE TEMP TABLE dimlog_raw (\n  \"id\" bigint,\n  v numeric(10, 2)\n)"),
            Some(SessionDdl::Define {
                table: "dimlog_raw",
                columns: "\n  \"id\" bigint,\n  v numeric(10, 2)\n"
            })
        );
        assert_eq!(
            session_ddl("DROP TABLE IF EXISTS pg_temp.dimlog_raw, pg_temp.dimlog_stage"),
            Some(SessionDdl::Drop(vec!["dimlog_raw", "dimlog_stage"]))
        );
        assert_eq!(
            session_ddl("ALTER TABLE dimlog_raw RENAME TO dimlog_stage"),
            Some(SessionDdl::Rename {
                from: "dimlog_raw",
                to: "dimlog_stage"
            })
        );
        assert_eq!(session_ddl("CREATE TEMP TABLE users_table AS SELECT 1"), None);
        assert_eq!(session_ddl("SELECT 1 FROM dimlog_stage"), None);
    }

    /// A session table's name is only ever a table's in the PostgreSQL templates: as a
    /// column alias it would be renamed too (and qualified, a syntax error).
    #[test]
    fn session_table_names_are_no_aliases() {
        for family in crate::db::sql::FAMILIES {
            let text = crate::db::Backend::Postgres.dialect().template(family).expect("family");
            let words: Vec<&str> = text.split_whitespace().collect();
            for pair in words.windows(2) {
                let name = pair[1].trim_end_matches([',', ')']);
                assert!(
                    !(pair[0].eq_ignore_ascii_case("AS") && SESSION_TABLES.contains(&name)),
                    "{family}.sql uses {name} as an alias"
                );
            }
        }
    }

    #[test]
    fn session_tables_are_renamed_as_whole_words() {
        let s = Staging::new(
            "customer",
            "loader",
            Some("\"mart\""),
            "\"mart\".\"log\"",
            &["\"id\"".into()],
        );
        let out = s.rename("SELECT * FROM dimlog_stage s JOIN dimlog_stages x ON x.dimlog_stage = \"dimlog_stage\" JOIN pg_temp.dimlog_raw r");
        assert!(out.starts_with("SELECT * FROM \"mart\".dimlog_stage_"), "{out}");
        assert!(
            out.contains("JOIN dimlog_stages x ON x.dimlog_stage = \"dimlog_stage\" JOIN pg_temp.dimlog_raw r"),
            "{out}"
        );
    }

    /// A session table's name defined as a CTE stays the CTE's, in a schema too.
    #[test]
    fn a_cte_named_like_a_session_table_is_not_renamed() {
        let s = Staging::new(
            "customer",
            "loader",
            Some("\"lp\""),
            "\"lp\".\"log\"",
            &["\"id\"".into()],
        );
        let out = s.rename("WITH dimlog_rebuilt (a, b) AS (SELECT 1, 2 FROM dimlog_stage), x AS (SELECT * FROM dimlog_rebuilt) SELECT * FROM x");
        assert!(
            out.starts_with("WITH dimlog_rebuilt (a, b) AS (SELECT 1, 2 FROM \"lp\".dimlog_stage_"),
            "{out}"
        );
        assert!(out.contains("FROM dimlog_rebuilt) SELECT"), "{out}");
        let out = s.rename("INSERT INTO dimlog_rebuilt (a) SELECT 1 FROM dimlog_derived");
        assert!(out.starts_with("INSERT INTO \"lp\".dimlog_rebuilt_"), "{out}");
    }

    /// Every statement of the PostgreSQL templates that makes a session table is one the
    /// Citus staging recognises: a new form would otherwise make a temporary table there.
    #[test]
    fn every_temporary_table_of_the_postgres_templates_is_recognised() {
        for family in crate::db::sql::FAMILIES {
            let text = crate::db::Backend::Postgres.dialect().template(family).expect("family");
            for chunk in text.split("-- statement:").skip(1) {
                let body: String = chunk
                    .lines()
                    .skip(1)
                    .filter(|l| !l.trim_start().starts_with("{#") && !l.trim_start().starts_with("{%"))
                    .collect::<Vec<_>>()
                    .join("\n");
                for (i, _) in body.match_indices("TEMP TABLE") {
                    let from = body[..i].rfind("CREATE").unwrap_or(i);
                    let head: String = body[from..].lines().next().unwrap_or("").to_string();
                    let name = head.split_whitespace().nth(3).unwrap_or("");
                    assert!(
                        SESSION_TABLES.contains(&name),
                        "{family}.sql makes a temporary table {name} that citus::SESSION_TABLES does not list"
                    );
                }
            }
        }
    }
}
