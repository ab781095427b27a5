//! PostgreSQL specifics: connecting (UTC session), binding, COPY in and out.

pub mod dialect;
pub mod lock;
pub mod plans;
use crate::db::{Access, DbError, Param, TextRow};

pub mod pgpass;
use crate::db::DbUrl;
use sqlx::postgres::{PgArguments, PgConnectOptions};
use sqlx::{Arguments, ConnectOptions, Executor, PgConnection, Row};
use std::str::FromStr;

/// A PostgreSQL connection and the schema of dimlog's own tables on it (see
/// [`crate::db::Conn::set_state_schema`]).
pub struct PgConn {
    conn: PgConnection,
    /// Quoted schema of dimlog's own tables; `None`: as `search_path` finds them (a
    /// source connection, which never names them).
    pub state_schema: Option<String>,
    /// Whether [`crate::db::Conn::begin`] opened a transaction that was not ended yet: a
    /// `ROLLBACK` outside one only draws the server's warning.
    pub in_transaction: bool,
    /// Citus on this server, if it has the extension.
    pub citus: Option<crate::db::citus::Cluster>,
    /// The server session's process id, to cancel its running statement by.
    pub backend_pid: Option<i32>,
    /// A COPY into a Citus load's working table runs in Citus's sequential mode until
    /// [`PgConn::copy_ended`] (see [`PgConn::copy_starts`]).
    pub copy_sequential: bool,
}

impl PgConn {
    /// Wraps a connection with no state schema.
    pub fn new(conn: PgConnection) -> PgConn {
        PgConn {
            conn,
            state_schema: None,
            in_transaction: false,
            citus: None,
            backend_pid: None,
            copy_sequential: false,
        }
    }

    /// The connection itself.
    pub fn into_inner(self) -> PgConnection {
        self.conn
    }

    /// `sql` with dimlog's own tables qualified by the state schema, and a load's session
    /// tables named by their distributed stand-ins on Citus.
    pub fn qualify<'a>(&self, sql: &'a str) -> std::borrow::Cow<'a, str> {
        let sql = match &self.state_schema {
            Some(schema) => std::borrow::Cow::Owned(qualify_state(sql, schema)),
            None => std::borrow::Cow::Borrowed(sql),
        };
        match self.staging() {
            Some(staging) => std::borrow::Cow::Owned(staging.rename(&sql)),
            None => sql,
        }
    }

    /// Before a COPY: a load's rows copied into a distributed working table outside the
    /// load's transaction go over one connection per worker (Citus's sequential mode),
    /// not one per shard. Opening 32 connections cost 0.4 s for a 451-row COPY, against
    /// 12–40 ms sequentially; a million rows took 1.3 s against 1.8 s (measured on the
    /// three-node loopback cluster, 32 shards). Inside a transaction the mode is left as
    /// it is: Citus refuses to mix modes on placements a transaction has written.
    pub async fn copy_starts(&mut self) -> Result<(), sqlx::Error> {
        if self.staging().is_some() && !self.in_transaction && !self.copy_sequential {
            execute(&mut self.conn, "SET citus.multi_shard_modify_mode TO 'sequential'", &[]).await?;
            self.copy_sequential = true;
        }
        Ok(())
    }

    /// The table a `COPY` into `table` (a session table's name, or a user's quoted
    /// table) writes to: on Citus, a session table's stand-in, or the temporary table its
    /// rows enter through when the key is hashed ([`crate::db::citus::Staging::enter`]).
    pub fn copy_table(&mut self, table: &str) -> String {
        let qualified = self.qualify(table).into_owned();
        let staging = self
            .citus
            .as_mut()
            .filter(|c| c.active)
            .and_then(|c| c.staging.as_mut());
        staging.and_then(|s| s.enter(table)).unwrap_or(qualified)
    }

    /// After a COPY (finished or cancelled): rows that entered through a temporary table
    /// move on to their working table (see [`PgConn::copy_table`]), and the statements
    /// that follow run in Citus's parallel mode again.
    pub async fn copy_ended(&mut self) -> Result<(), sqlx::Error> {
        let moved = match self.citus.as_mut().and_then(|c| c.staging.as_mut()) {
            Some(staging) if staging.has_entered() => {
                crate::db::citus::move_entered(&mut self.conn, staging).await.map(drop)
            }
            _ => Ok(()),
        };
        if std::mem::take(&mut self.copy_sequential) {
            execute(&mut self.conn, "RESET citus.multi_shard_modify_mode", &[]).await?;
        }
        moved?;
        Ok(())
    }

    /// The distributed session tables of a load on Citus, if this is one.
    pub fn staging(&self) -> Option<&crate::db::citus::Staging> {
        self.citus
            .as_ref()
            .filter(|c| c.active)
            .and_then(|c| c.staging.as_deref())
    }

    /// Runs a statement: one that makes or empties a session table on the distributed
    /// stand-ins of a Citus load, any other with dimlog's names qualified.
    /// `what` labels the statement in the plans of [`plans`].
    pub async fn execute(&mut self, what: &str, sql: &str, params: &[Param]) -> Result<u64, sqlx::Error> {
        use crate::db::citus;
        if self.staging().is_some() {
            let sql = match &self.state_schema {
                Some(schema) => qualify_state(sql, schema),
                None => sql.to_string(),
            };
            if let Some(ddl) = citus::session_ddl(&sql) {
                let mut staging = self
                    .citus
                    .as_mut()
                    .and_then(|c| c.staging.take())
                    .expect("checked above");
                let result =
                    citus::run_session_ddl(&mut self.conn, &mut staging, ddl, params, (what, self.in_transaction))
                        .await;
                if let Some(c) = self.citus.as_mut() {
                    c.staging = Some(staging);
                }
                return result;
            }
        }
        let sql = self.qualify(sql).into_owned();
        if plans::enabled() {
            plans::record(&mut self.conn, self.in_transaction, what, &sql, params).await;
        }
        execute(&mut self.conn, &sql, params).await
    }

    /// Runs a query whose columns are all text (or NULL), named: see [`query_named`].
    pub async fn query_named(
        &mut self,
        what: &str,
        sql: &str,
        params: &[Param],
    ) -> Result<(Vec<String>, Vec<TextRow>), sqlx::Error> {
        let sql = self.qualify(sql).into_owned();
        if plans::enabled() {
            plans::record(&mut self.conn, self.in_transaction, what, &sql, params).await;
        }
        query_named(&mut self.conn, &sql, params).await
    }
}

impl std::ops::Deref for PgConn {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for PgConn {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.conn
    }
}

/// dimlog's own tables, shared by the dimensions of a target.
pub const STATE_TABLES: [&str; 5] = [
    "dimlog_state",
    "dimlog_runs",
    "dimlog_dimensions",
    "dimlog_assigned",
    "dimlog_schema",
];

/// Qualifies every mention of one of [`STATE_TABLES`] in `sql` with `schema` (quoted):
/// a whole word (not part of a longer name such as `dimlog_runs_dimension_idx`) that is
/// not already qualified or quoted. Names starting with `dimlog_` are dimlog's alone (the
/// config refuses them for users' tables, columns and aliases), so nothing else matches;
/// inside `to_regclass('dimlog_runs')` the qualified name is what is wanted too.
pub fn qualify_state(sql: &str, schema: &str) -> String {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 64);
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let hit = (bytes[i] == b'd')
            .then(|| {
                STATE_TABLES.iter().find(|name| {
                    let end = i + name.len();
                    sql[i..].starts_with(*name)
                        && (i == 0 || !(word(bytes[i - 1]) || bytes[i - 1] == b'.' || bytes[i - 1] == b'"'))
                        && (end == bytes.len() || !(word(bytes[end]) || bytes[end] == b'"'))
                })
            })
            .flatten();
        match hit {
            Some(name) => {
                out.push_str(&sql[copied..i]);
                out.push_str(schema);
                out.push('.');
                out.push_str(name);
                i += name.len();
                copied = i;
            }
            None => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    out
}

/// Connects and pins every setting that changes how a value prints (the zone, dates,
/// float digits, bytes, intervals, money, quoted names), whatever the database, the role or the URL's
/// `options` set: a load hashes and stores the text it reads, so text that followed a
/// session's settings would make corrections and new versions of unchanged rows; a
/// run's temporary tables (a million staged rows or keys) get 128 MB of session memory
/// before they spill to disk (only what is used is allocated; it can only be set before
/// a session's first temporary table). A session for [`Access::ReadOnly`] or
/// [`Access::QueryOnly`] is read-only (`default_transaction_read_only`): the server
/// refuses every write, and it works on a hot standby and for a role that may only read.
pub async fn connect(url: &DbUrl, access: Access) -> Result<PgConnection, DbError> {
    let err = |source| DbError::Connect {
        url: url.redacted(),
        source,
    };
    let mut options = vec![
        ("TimeZone", "UTC"),
        ("DateStyle", "ISO"),
        ("extra_float_digits", "1"),
        ("bytea_output", "hex"),
        ("IntervalStyle", "postgres"),
        // `money` prints by it; C is the one locale every server has.
        ("lc_monetary", "C"),
        // The catalog's type names (format_type) would come quoted, and every type read
        // as one dimlog does not know.
        ("quote_all_identifiers", "off"),
        ("temp_buffers", "128MB"),
    ];
    if access.is_read_only() {
        options.push(("default_transaction_read_only", "on"));
    }
    let mut opts = PgConnectOptions::from_str(url.expose())
        .map_err(err)?
        .options(options)
        .application_name(url.application_name.as_deref().unwrap_or("dimlog"))
        .disable_statement_logging();
    // The password file as libpq reads it (the driver keeps escapes in the password),
    // when neither the URL nor PGPASSWORD gives one: libpq's order.
    if !url_has_password(url.expose()) && std::env::var_os("PGPASSWORD").is_none() {
        let database = opts.get_database().unwrap_or(opts.get_username()).to_string();
        if let Some(password) = pgpass::lookup(opts.get_host(), opts.get_port(), &database, opts.get_username()) {
            opts = opts.password(&password);
        }
    }
    let open = |opts: PgConnectOptions| async move {
        match url.connect_timeout {
            Some(limit) => tokio::time::timeout(limit, opts.connect())
                .await
                .map_err(|_| DbError::ConnectTimeout {
                    url: url.redacted(),
                    seconds: limit.as_secs(),
                })?
                .map_err(err),
            None => opts.connect().await.map_err(err),
        }
    };
    let mut c = match open(opts.clone()).await {
        // `sslmode=prefer` (the default) asks for TLS without verifying anything: where the
        // handshake fails (a certificate the TLS library cannot even read, such as the
        // X.509 v1 one a Citus node makes for itself), libpq goes on without TLS, and so
        // does dimlog. `require` and stricter modes fail as they should.
        Err(DbError::Connect { source, .. }) if tls_failed(&source) && tls_only_preferred(url.expose()) => {
            tracing::debug!("TLS to the server failed ({source}); connecting without it, as sslmode=prefer does");
            open(opts.ssl_mode(sqlx::postgres::PgSslMode::Disable)).await?
        }
        other => other?,
    };
    // A process killed without closing its connection (SIGKILL, a lost machine) leaves
    // its session to run or wait on, holding the dimension's lock, until the statement
    // ends: with this the server looks every second whether the client is still there
    // and ends the session when it is not (PostgreSQL 14 and later).
    let check_client = if c.server_version_num().is_some_and(|v| v >= 140_000) {
        "; SET client_connection_check_interval = 1000"
    } else {
        ""
    };
    c.execute(format!("SET client_min_messages = warning{check_client}").as_str())
        .await
        .map_err(err)?;
    Ok(c)
}

/// Asks the server to cancel the statement session `pid` runs (errors only logged: at
/// worst the rollback that follows waits for the statement to end).
pub async fn cancel(url: &DbUrl, pid: i32) {
    let cancelled = async {
        let mut c = connect(url, Access::ReadOnly).await?;
        let sql = "SELECT pg_cancel_backend($1::int)";
        query_text(&mut c, sql, &[Param::I64(pid.into())])
            .await
            .map_err(|source| DbError::Query {
                what: "cancelling the running statement".into(),
                source,
            })?;
        let _ = sqlx::Connection::close(c).await;
        Ok::<_, DbError>(())
    };
    if let Err(e) = cancelled.await {
        tracing::debug!("could not cancel the running statement of session {pid}: {e}");
    }
}

/// Whether connecting failed in the TLS handshake (the driver reports a certificate it
/// cannot read as invalid data on the socket).
fn tls_failed(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Tls(_) => true,
        sqlx::Error::Io(io) => io.kind() == std::io::ErrorKind::InvalidData,
        _ => false,
    }
}

/// Whether a PostgreSQL URL leaves TLS to `prefer` (no `sslmode`, or `prefer`/`allow`).
fn tls_only_preferred(raw: &str) -> bool {
    let mode = url::Url::parse(raw).ok().and_then(|u| {
        u.query_pairs()
            .find(|(k, _)| k == "sslmode")
            .map(|(_, v)| v.into_owned())
    });
    matches!(mode.as_deref(), None | Some("prefer") | Some("allow"))
}

/// Whether a PostgreSQL URL carries a password (`user:pw@` or `?password=`).
fn url_has_password(raw: &str) -> bool {
    url::Url::parse(raw).is_ok_and(|u| u.password().is_some() || u.query_pairs().any(|(k, _)| k == "password"))
}

fn bind_all(params: &[Param]) -> Result<PgArguments, sqlx::Error> {
    let mut args = PgArguments::default();
    for p in params {
        let r = match p {
            Param::Null => args.add(Option::<String>::None),
            Param::I64(v) => args.add(*v),
            Param::F64(v) => args.add(*v),
            Param::Bool(v) => args.add(*v),
            Param::Text(v) => args.add(v.clone()),
            Param::Bytes(v) => args.add(v.clone()),
            Param::Ts(t) => args.add(t.to_utc()),
            Param::OptTs(t) => args.add(t.map(|t| t.to_utc())),
            Param::TextArray(v) => args.add(v.clone()),
            Param::I64Array(v) => args.add(v.clone()),
        };
        r.map_err(sqlx::Error::Encode)?;
    }
    Ok(args)
}

/// Executes one statement.
pub async fn execute(c: &mut PgConnection, sql: &str, params: &[Param]) -> Result<u64, sqlx::Error> {
    let args = bind_all(params)?;
    Ok(sqlx::query_with(sql, args).execute(c).await?.rows_affected())
}

/// Runs a query whose columns are all text (or NULL): the columns' names and every row.
pub async fn query_named(
    c: &mut PgConnection,
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
        .map(|r| (0..r.len()).map(|i| r.try_get::<Option<String>, _>(i)).collect())
        .collect::<Result<_, _>>()?;
    Ok((names, values))
}

/// Runs a query whose columns are all text (or NULL) and returns every row.
pub async fn query_text(c: &mut PgConnection, sql: &str, params: &[Param]) -> Result<Vec<TextRow>, sqlx::Error> {
    let args = bind_all(params)?;
    let rows = sqlx::query_with(sql, args).fetch_all(c).await?;
    rows.iter()
        .map(|r| (0..r.len()).map(|i| r.try_get::<Option<String>, _>(i)).collect())
        .collect()
}

/// Appends one value in COPY text format (tab-separated, `\N` for NULL).
pub fn copy_escape(out: &mut Vec<u8>, value: Option<&str>) {
    match value {
        None => out.extend_from_slice(b"\\N"),
        Some(s) => {
            for b in s.bytes() {
                match b {
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    _ => out.push(b),
                }
            }
        }
    }
}

/// Streams rows into a table with `COPY … FROM STDIN`, in pieces of about 1 MiB.
pub async fn copy_in(
    c: &mut PgConnection,
    table: &str,
    columns: &[String],
    rows: &[Vec<Option<String>>],
) -> Result<(), sqlx::Error> {
    let sql = format!("COPY {table} ({}) FROM STDIN", columns.join(", "));
    let mut copy = c.copy_in_raw(&sql).await?;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    for row in rows {
        for (i, v) in row.iter().enumerate() {
            if i > 0 {
                buf.push(b'\t');
            }
            copy_escape(&mut buf, v.as_deref());
        }
        buf.push(b'\n');
        if buf.len() >= 1 << 20 {
            copy.send(std::mem::take(&mut buf)).await?;
        }
    }
    if !buf.is_empty() {
        copy.send(buf).await?;
    }
    copy.finish().await?;
    Ok(())
}

/// Splits COPY text-format output into rows of values, undoing its escapes. Keeps a
/// partial line between chunks.
#[derive(Default)]
pub struct CopyTextParser {
    pending: Vec<u8>,
}

impl CopyTextParser {
    /// Feeds a chunk; returns the complete rows it finished.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Vec<Option<String>>>) -> Result<(), String> {
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(pos) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let line = &self.pending[start..start + pos];
            out.push(parse_line(line)?);
            start += pos + 1;
        }
        self.pending.drain(..start);
        Ok(())
    }

    /// True when no partial row is left.
    pub fn is_done(&self) -> bool {
        self.pending.is_empty()
    }
}

fn parse_line(line: &[u8]) -> Result<Vec<Option<String>>, String> {
    let mut fields = Vec::new();
    for raw in line.split(|&b| b == b'\t') {
        if raw == b"\\N" {
            fields.push(None);
            continue;
        }
        let mut v = Vec::with_capacity(raw.len());
        copy_unescape(raw, &mut v);
        fields.push(Some(
            String::from_utf8(v).map_err(|e| format!("copy output is not utf-8: {e}"))?,
        ));
    }
    Ok(fields)
}

/// Undoes the escapes of one COPY text field (not `\N`, which is NULL), appending the
/// value's bytes to `out`.
pub fn copy_unescape(raw: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'\\' && i + 1 < raw.len() {
            i += 1;
            match raw[i] {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'b' => out.push(8),
                b'f' => out.push(12),
                b'v' => out.push(11),
                d @ b'0'..=b'7' => {
                    let mut n = u32::from(d - b'0');
                    let mut k = 1;
                    while k < 3 && i + 1 < raw.len() && (b'0'..=b'7').contains(&raw[i + 1]) {
                        i += 1;
                        k += 1;
                        n = n * 8 + u32::from(raw[i] - b'0');
                    }
                    out.push(n as u8);
                }
                other => out.push(other),
            }
        } else {
            out.push(b);
        }
        i += 1;
    }
}

/// An open `COPY … FROM STDIN` that takes COPY text as it comes (see
/// [`crate::db::Conn::copy_in_raw`]).
pub struct CopyIn<'c>(pub(super) sqlx::postgres::PgCopyIn<&'c mut PgConnection>);

impl CopyIn<'_> {
    /// Sends a piece of COPY text (whole rows or not).
    pub async fn send(&mut self, data: Vec<u8>) -> Result<(), sqlx::Error> {
        self.0.send(data).await.map(drop)
    }

    /// Ends the COPY; the rows are in the table.
    pub async fn finish(self) -> Result<u64, sqlx::Error> {
        self.0.finish().await
    }

    /// Cancels the COPY; nothing of it stays.
    pub async fn abort(self, why: &str) {
        let _ = self.0.abort(why).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_tables_are_qualified_as_whole_words() {
        let s = "\"ops\"";
        assert_eq!(
            qualify_state("INSERT INTO dimlog_runs (x) SELECT 1 FROM dimlog_state", s),
            "INSERT INTO \"ops\".dimlog_runs (x) SELECT 1 FROM \"ops\".dimlog_state"
        );
        assert_eq!(
            qualify_state("CREATE INDEX dimlog_runs_dimension_idx ON dimlog_runs (dimension)", s),
            "CREATE INDEX dimlog_runs_dimension_idx ON \"ops\".dimlog_runs (dimension)"
        );
        assert_eq!(
            qualify_state(
                "SELECT to_regclass('dimlog_dimensions'), x.dimlog_state, \"dimlog_runs\", my_dimlog_runs",
                s
            ),
            "SELECT to_regclass('\"ops\".dimlog_dimensions'), x.dimlog_state, \"dimlog_runs\", my_dimlog_runs"
        );
    }

    #[test]
    fn copy_round_trip() {
        let mut buf = Vec::new();
        let values = [Some("a\tb\\c\nd"), None, Some(""), Some("\\N")];
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                buf.push(b'\t');
            }
            copy_escape(&mut buf, *v);
        }
        buf.push(b'\n');
        let mut p = CopyTextParser::default();
        let mut rows = Vec::new();
        p.feed(&buf[..5], &mut rows).unwrap();
        assert!(rows.is_empty());
        p.feed(&buf[5..], &mut rows).unwrap();
        assert!(p.is_done());
        let got: Vec<Option<&str>> = rows[0].iter().map(|v| v.as_deref()).collect();
        assert_eq!(got, values.to_vec());
    }
}
