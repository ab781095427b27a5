//! Staging: the window's rows stream into the target's staging table as they are read
//! (COPY on PostgreSQL, batched INSERTs on SQLite), each with its change time, delete
//! flag and row hash, so memory does not grow with the load; a first load of one row per
//! key may go straight into the log instead, numbered as `append` would.

use crate::config::Plan;
use crate::context::{run_named, SqlContext};
use crate::db::postgres::copy_unescape;
use crate::db::types::ColumnKind;
use crate::db::{bytea_hex, push_hex, sql, BindKind, Conn, DbError, RowOut};
use crate::extract::{Admission, ExtractError, Layout, RawChunks, Window};
use crate::hash::{canonical, RowHasher, StagedRef, StagedRow};
use crate::ts::Micros;

/// Creates the session-temporary staging table of a load.
pub async fn create_staging(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    // The staging tables live as long as the session: drop what an earlier load left.
    let drop = sql::statement(conn.backend(), "stage", "drop", ctx)?;
    conn.execute_script("stage/drop", &drop).await?;
    run_named(conn, "stage", &["raw"], ctx).await
}

/// Drops the raw staging table if a load left one and creates it empty, for a second
/// read in the same load (see [`add_unseen`]).
pub async fn recreate_raw(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    run_named(conn, "stage", &["drop_raw", "raw"], ctx).await
}

/// Adds to the staged rows those raw rows whose key reconciliation listed in
/// `dimlog_unseen`, deduplicated by the same rule as [`crate::dedupe::dedupe`].
pub async fn add_unseen(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    run_named(conn, "dedupe", &["unseen"], ctx).await
}

/// The staging table's columns and how each binds.
pub struct Stager {
    columns: Vec<String>,
    kinds: Vec<BindKind>,
}

impl Stager {
    /// Derives the staging columns from the context (keys, attributes, tiebreak, then
    /// valid_from, is_deleted, row_hash).
    pub fn new(ctx: &SqlContext) -> Stager {
        let mut columns = Vec::new();
        let mut kinds = Vec::new();
        for c in ctx.key_defs.iter().chain(&ctx.attr_defs) {
            columns.push(c.name.clone());
            kinds.push(BindKind::from(c.kind));
        }
        if let Some(t) = &ctx.tiebreak {
            columns.push("dimlog_tiebreak".into());
            kinds.push(BindKind::from(t.kind));
        }
        columns.extend(["valid_from".into(), "is_deleted".into(), "row_hash".into()]);
        kinds.extend([BindKind::Text, BindKind::Bool, BindKind::Bytes]);
        Stager { columns, kinds }
    }

    /// Writes one batch of rows to the staging table.
    pub async fn write(&self, conn: &mut Conn, rows: Vec<StagedRow>) -> Result<(), DbError> {
        let cells: Vec<Vec<Option<String>>> = rows.into_iter().map(Stager::cells).collect();
        conn.bulk_insert("staging source rows", "dimlog_raw", &self.columns, &self.kinds, &cells)
            .await
    }

    /// Writes a staged row as the staging table's values (the same as [`Stager::cells`]).
    pub fn write_row(row: &StagedRef<'_, '_>, out: &mut RowOut<'_>) {
        for value in row.values {
            out.text(*value);
        }
        out.time(row.valid_from);
        out.int(i64::from(row.is_deleted));
        out.blob(&row.row_hash);
    }

    /// A staged row as the staging table's values, as [`Stager::kinds`] binds them.
    pub fn cells(row: StagedRow) -> Vec<Option<String>> {
        let mut v = row.values;
        v.push(Some(row.valid_from.to_text()));
        v.push(Some(if row.is_deleted { "true" } else { "false" }.into()));
        v.push(Some(bytea_hex(&row.row_hash)));
        v
    }

    /// How each staging column binds on SQLite.
    pub fn kinds(&self) -> &[BindKind] {
        &self.kinds
    }
}

impl Stager {
    /// The staging table's columns, in COPY order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }
}

/// Turns the source's COPY text rows into COPY text rows of `dimlog_raw` (PostgreSQL to
/// PostgreSQL) without taking them apart: key, attribute and tiebreak fields pass through
/// byte for byte (both sides speak the same COPY text format and the target columns have
/// the source's types), only the tracked fields are unescaped to be hashed, and
/// `valid_from`, `is_deleted` and `row_hash` are appended. The same rules as the row path
/// of [`crate::pipeline::stage_window`]: rows outside the window or with a NULL change
/// column are skipped, rows with a NULL key are counted, booleans hash canonically.
pub struct CopyStager<'p> {
    plan: &'p Plan,
    kinds: Vec<ColumnKind>,
    key_count: usize,
    tracked: std::ops::Range<usize>,
    /// Index of the first field after the attributes (the tiebreak, or the change time).
    attrs_end: usize,
    pending: Vec<u8>,
    fields: Vec<(usize, usize)>,
    scratch: Vec<u8>,
    hasher: RowHasher,
    /// Set when the rows go straight into the log (see [`CopyStager::into_log`]).
    log: Option<LogNumbering>,
    /// Which rows were staged, and the counts of those that were not.
    pub admission: Admission,
}

impl<'p> CopyStager<'p> {
    /// A stager for one window of one dimension.
    pub fn new(plan: &'p Plan, layout: &Layout, window: Window) -> CopyStager<'p> {
        let key_count = layout.keys.len();
        CopyStager {
            plan,
            kinds: layout.read_columns().iter().map(|c| c.kind).collect(),
            key_count,
            tracked: key_count..key_count + layout.tracked.len(),
            attrs_end: key_count + layout.attrs().len(),
            pending: Vec::new(),
            fields: Vec::new(),
            scratch: Vec::new(),
            hasher: RowHasher::default(),
            log: None,
            admission: Admission::new(window, key_count),
        }
    }

    /// Writes log rows instead of staging rows, for a first load into an empty log whose
    /// source sends one row per key, in key order: each row gets the next log id, each
    /// live row the next surrogate key (a tombstone none, and no attributes or hash), so
    /// the numbers are the ones `append` would give the same rows. Columns in
    /// [`log_columns`] order.
    pub fn into_log(mut self, numbering: LogNumbering) -> CopyStager<'p> {
        self.log = Some(numbering);
        self
    }

    /// Feeds a piece of the source's COPY text; appends staging rows to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), ExtractError> {
        let mut rest = chunk;
        if !self.pending.is_empty() {
            let Some(end) = rest.iter().position(|&b| b == b'\n') else {
                self.pending.extend_from_slice(rest);
                return Ok(());
            };
            let mut line = std::mem::take(&mut self.pending);
            line.extend_from_slice(&rest[..end]);
            self.row(&line, out)?;
            line.clear();
            self.pending = line;
            rest = &rest[end + 1..];
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.row(&rest[..end], out)?;
            rest = &rest[end + 1..];
        }
        self.pending.extend_from_slice(rest);
        Ok(())
    }

    /// Checks that the source's output ended with a whole row.
    pub fn finish(&self) -> Result<(), ExtractError> {
        if self.pending.is_empty() {
            Ok(())
        } else {
            Err(protocol("the source's COPY output ended inside a row"))
        }
    }

    fn row(&mut self, line: &[u8], out: &mut Vec<u8>) -> Result<(), ExtractError> {
        let n = self.kinds.len();
        self.fields.clear();
        let mut start = 0;
        for (i, &b) in line.iter().enumerate() {
            if b == b'\t' {
                self.fields.push((start, i));
                start = i + 1;
            }
        }
        self.fields.push((start, line.len()));
        let with_flag = self.plan.source.deleted_flag.is_some();
        if self.fields.len() != n + 1 + usize::from(with_flag) {
            return Err(protocol("the source's COPY output has an unexpected number of columns"));
        }
        let field = |i: usize| &line[self.fields[i].0..self.fields[i].1];
        let key_count = self.key_count;
        let key_text = || {
            (0..key_count)
                .map(|i| {
                    let mut v = Vec::new();
                    copy_unescape(field(i), &mut v);
                    String::from_utf8_lossy(&v).into_owned()
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let ts_field = field(n);
        // A form parse_fixed reads is also valid timestamptz input: it passes through.
        let fixed = (ts_field != NULL)
            .then(|| Micros::parse_fixed(ts_field).filter(|t| t.check_change("").is_ok()))
            .flatten();
        let canonical_ts = fixed.is_some();
        let change = if ts_field == NULL {
            None
        } else if fixed.is_some() {
            fixed
        } else {
            self.scratch.clear();
            copy_unescape(ts_field, &mut self.scratch);
            let text =
                std::str::from_utf8(&self.scratch).map_err(|_| protocol("the source sent text that is not UTF-8"))?;
            Some(crate::extract::change_time(self.plan, text, key_text)?)
        };
        // (`None`: a flag that spells neither true nor false, refused once the row is kept.)
        let flag = match with_flag.then(|| field(n + 1)).filter(|f| *f != NULL) {
            None => Some(false),
            Some(f) => {
                self.scratch.clear();
                copy_unescape(f, &mut self.scratch);
                crate::extract::flagged_deleted(Some(&String::from_utf8_lossy(&self.scratch)))
            }
        };
        if !self
            .admission
            .admit(change, |i| field(i) == NULL, flag.unwrap_or(false))
        {
            return Ok(());
        }
        if flag.is_none() {
            let value = String::from_utf8_lossy(&self.scratch).into_owned();
            return Err(crate::extract::not_a_flag(self.plan, &value, key_text()));
        }
        let is_deleted = flag == Some(true);
        let ts = change.expect("admitted");
        self.hasher.start();
        for i in self.tracked.clone() {
            let kind = self.kinds[i];
            let f = field(i);
            if f == NULL {
                self.hasher.push(kind, None);
                continue;
            }
            let bytes = if f.contains(&b'\\') {
                self.scratch.clear();
                copy_unescape(f, &mut self.scratch);
                &self.scratch[..]
            } else {
                f
            };
            let text = std::str::from_utf8(bytes).map_err(|_| protocol("the source sent text that is not UTF-8"))?;
            self.hasher.push(kind, Some(canonical(kind, text).as_ref()));
        }
        if let Some(log) = &mut self.log {
            let (log_id, sk) = log.next(is_deleted);
            push_int(out, log_id);
            out.push(b'\t');
            match sk {
                Some(sk) => push_int(out, sk),
                None => out.extend_from_slice(NULL),
            }
            out.push(b'\t');
        }
        // Fields as they came, each with the tab after it: a staging row keeps the
        // tiebreak, a log row stops after the attributes, a tombstone after its keys
        // (it carries no attributes and no hash).
        let tombstone_in_log = self.log.is_some() && is_deleted;
        let (end, null_attrs) = match (&self.log, is_deleted) {
            (None, _) => (n, 0),
            (Some(_), false) => (self.attrs_end, 0),
            (Some(_), true) => (self.key_count, self.attrs_end - self.key_count),
        };
        out.extend_from_slice(&line[..self.fields[end].0]);
        for _ in 0..null_attrs {
            out.extend_from_slice(NULL);
            out.push(b'\t');
        }
        if canonical_ts {
            out.extend_from_slice(ts_field);
        } else {
            out.extend_from_slice(ts.to_text().as_bytes());
        }
        out.extend_from_slice(if is_deleted { b"\ttrue\t" } else { b"\tfalse\t" });
        if tombstone_in_log {
            out.extend_from_slice(NULL);
        } else {
            out.extend_from_slice(b"\\\\x");
            push_hex(out, &self.hasher.finish());
        }
        out.push(b'\n');
        Ok(())
    }
}

/// COPY text's NULL.
const NULL: &[u8] = b"\\N";

/// Where a first load's numbering starts.
pub struct LogNumbering {
    next_log_id: i64,
    next_sk: i64,
}

impl LogNumbering {
    /// Numbering from the reserved log id and surrogate key.
    pub fn new(next_log_id: i64, next_sk: i64) -> LogNumbering {
        LogNumbering { next_log_id, next_sk }
    }

    /// The next row's log id, and its surrogate key unless it is a tombstone.
    fn next(&mut self, tombstone: bool) -> (i64, Option<i64>) {
        let log_id = self.next_log_id;
        self.next_log_id += 1;
        let sk = (!tombstone).then(|| {
            self.next_sk += 1;
            self.next_sk - 1
        });
        (log_id, sk)
    }
}

/// Log rows of a first load written straight from the source's rows (SQLite to SQLite,
/// rows in key order): each staged row, numbered as [`CopyStager::into_log`] numbers
/// them, with the load's id and time. A tombstone keeps only its key (no attributes, no
/// hash, no surrogate key), as `append_first` writes one (sql/sqlite/append.sql).
pub struct LogRows {
    numbering: LogNumbering,
    load_id: i64,
    loaded_at: String,
    key_count: usize,
    attr_count: usize,
}

impl LogRows {
    /// Rows numbered from `numbering`, of the load `load_id` made at `loaded_at`.
    pub fn new(ctx: &SqlContext, numbering: LogNumbering, load_id: i64, loaded_at: Micros) -> LogRows {
        LogRows {
            numbering,
            load_id,
            loaded_at: loaded_at.to_text(),
            key_count: ctx.key_defs.len(),
            attr_count: ctx.attr_defs.len(),
        }
    }

    /// The log's columns these rows fill, and how each binds: [`log_columns`], then
    /// `load_id` and `loaded_at`.
    pub fn columns(ctx: &SqlContext) -> (Vec<String>, Vec<BindKind>) {
        let mut columns = log_columns(ctx);
        columns.extend(["load_id", "loaded_at"].map(String::from));
        let mut kinds = vec![BindKind::Int, BindKind::Int];
        kinds.extend(
            ctx.key_defs
                .iter()
                .chain(&ctx.attr_defs)
                .map(|c| BindKind::from(c.kind)),
        );
        kinds.extend([
            BindKind::Text,
            BindKind::Bool,
            BindKind::Bytes,
            BindKind::Int,
            BindKind::Text,
        ]);
        (columns, kinds)
    }

    /// Where the key's columns begin in a row.
    pub const KEY_AT: usize = 2;

    /// Writes the log row of one staged row.
    pub fn write(&mut self, staged: &StagedRef<'_, '_>, out: &mut RowOut<'_>) {
        let (log_id, sk) = self.numbering.next(staged.is_deleted);
        out.int(log_id);
        match sk {
            Some(sk) => out.int(sk),
            None => out.null(),
        }
        let (keys, attrs) = staged.values.split_at(self.key_count);
        for key in keys {
            out.text(*key);
        }
        for attr in &attrs[..self.attr_count] {
            out.text(if staged.is_deleted { None } else { *attr });
        }
        out.time(staged.valid_from);
        out.int(i64::from(staged.is_deleted));
        if staged.is_deleted {
            out.null();
        } else {
            out.blob(&staged.row_hash);
        }
        out.int(self.load_id);
        out.text(Some(&self.loaded_at));
    }
}

/// The log's columns in the order [`CopyStager::into_log`] writes them: all but
/// `load_id` and `loaded_at`, the same on every row of a load (column defaults fill
/// them, see `log_load_defaults` in sql/postgres/tables.sql).
pub fn log_columns(ctx: &SqlContext) -> Vec<String> {
    let mut columns = vec!["log_id".to_string(), ctx.sk.clone()];
    columns.extend(ctx.keys.iter().cloned());
    columns.extend(ctx.attrs.iter().cloned());
    columns.extend(["valid_from", "is_deleted", "row_hash"].map(String::from));
    columns
}

fn push_int(out: &mut Vec<u8>, v: i64) {
    use std::io::Write;
    let _ = write!(out, "{v}");
}

fn protocol(message: &str) -> ExtractError {
    ExtractError::Db(DbError::Query {
        what: "reading the source".into(),
        source: sqlx::Error::Protocol(message.into()),
    })
}

/// Pipes COPY text pieces from the source into `table` of a PostgreSQL target, through
/// `transform` (which appends what to send for each piece); one `COPY … FROM STDIN` for
/// the whole stream, sent in pieces of about 1 MiB. On any error the COPY is cancelled.
pub async fn copy_into<E: From<DbError> + From<ExtractError>>(
    target: &mut Conn,
    what: &str,
    table: &str,
    columns: &[String],
    chunks: &mut RawChunks,
    mut transform: impl FnMut(&[u8], &mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    const PIECE: usize = 1 << 20;
    let mut copy = target.copy_in_raw(what, table, columns).await?;
    let err = |source| DbError::Query {
        what: what.into(),
        source,
    };
    let mut out: Vec<u8> = Vec::with_capacity(PIECE + (64 << 10));
    let mut failure: Option<E> = None;
    while let Some(chunk) = chunks.recv().await {
        let step = match chunk {
            Ok(bytes) => transform(&bytes, &mut out),
            Err(e) => Err(e.into()),
        };
        if let Err(e) = step {
            failure = Some(e);
            break;
        }
        if out.len() >= PIECE {
            if let Err(e) = copy.send(std::mem::take(&mut out)).await {
                failure = Some(err(e).into());
                break;
            }
            out.reserve(PIECE + (64 << 10));
        }
    }
    if failure.is_none() && !out.is_empty() {
        if let Err(e) = copy.send(out).await {
            failure = Some(err(e).into());
        }
    }
    let copied = match failure {
        Some(e) => {
            copy.abort("dimlog stopped the load").await;
            Err(e)
        }
        None => copy.finish().await.map(drop).map_err(|e| err(e).into()),
    };
    let ended = target.copy_ended(what).await;
    copied?;
    ended.map_err(E::from)
}

#[cfg(test)]
mod tests {
    use super::LogNumbering;

    /// The numbers `append` gives the same rows (append.sql): log ids in row order from
    /// the reserved id; surrogate keys in row order for live rows only, tombstones none.
    #[test]
    fn numbering_gives_every_row_a_log_id_and_live_rows_a_surrogate_key() {
        let mut n = LogNumbering::new(100, 7);
        let got: Vec<(i64, Option<i64>)> = [false, true, false, false, true]
            .into_iter()
            .map(|tombstone| n.next(tombstone))
            .collect();
        assert_eq!(
            got,
            [(100, Some(7)), (101, None), (102, Some(8)), (103, Some(9)), (104, None)]
        );
    }
}
