//! Database URLs: which engine a URL names, and a URL whose secrets never reach a
//! message, a log or a file.

use std::fmt;
use std::path::{Path, PathBuf};

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};

/// What a SQLite URL's path may not hold as it is: sqlx cuts the URL at `?` and decodes
/// `%xx` when it opens the file, and `#` begins a fragment for URL parsers.
const SQLITE_PATH_ESCAPES: &AsciiSet = &CONTROLS.add(b'%').add(b'?').add(b'#');

/// The file a SQLite URL's path names: its `%xx` escapes decoded, as sqlx decodes them
/// when it opens the file, so that dimlog and SQLite mean one file by it.
pub fn sqlite_file_of(path: &str) -> Result<PathBuf, std::str::Utf8Error> {
    Ok(PathBuf::from(percent_decode_str(path).decode_utf8()?.into_owned()))
}

/// The `sqlite://` URL of `file` (and `query`), escaped so that sqlx opens that very file.
pub fn sqlite_url_of(file: &Path, query: Option<&str>) -> String {
    let mut url = format!(
        "sqlite://{}",
        utf8_percent_encode(&file.to_string_lossy(), SQLITE_PATH_ESCAPES)
    );
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// Why a SQLite URL's path and parameters cannot serve `setting`, if they cannot: a
/// database kept in memory (a run into it would succeed and leave nothing), a VFS without
/// locks (two runs would write one file at once and corrupt it), a read-only target
/// (dimlog writes it, and opens it read-only itself for the commands that only read), or
/// a parameter sqlx does not take (often a `?` meant in a file name).
fn sqlite_params_refusal(setting: &str, path: &str, params: &[(String, String)]) -> Option<String> {
    if path == ":memory:" || params.iter().any(|(k, v)| k == "mode" && v == "memory") {
        return Some(
            "an in-memory SQLite database keeps nothing once the command ends (and holds nothing another process wrote): give a file path, e.g. sqlite://warehouse.db".into(),
        );
    }
    if let Some((_, vfs)) = params
        .iter()
        .find(|(k, v)| k == "vfs" && matches!(v.as_str(), "unix-none" | "win32-none" | "memdb"))
    {
        return Some(format!(
            "the SQLite VFS `{vfs}` {}: leave `vfs` out (or use unix, unix-excl or unix-dotfile)",
            if vfs == "memdb" {
                "keeps the database in memory, and nothing once the command ends"
            } else {
                "takes no locks, so two runs (or a run and a reader) could write the file at once and corrupt it"
            }
        ));
    }
    // The target's setting, however it was given (the config or its override).
    if setting.starts_with("target.url") {
        if let Some((k, v)) = params
            .iter()
            .find(|(k, v)| (k == "mode" && v == "ro") || (k == "immutable" && v != "0"))
        {
            return Some(format!(
                "`{k}={v}` makes the target read-only, and dimlog writes it: leave it out (dimlog opens the target read-only itself for status, history, lookup and verify)"
            ));
        }
    }
    params.iter().find(|(k, _)| !["mode", "cache", "immutable", "vfs"].contains(&k.as_str())).map(|(k, _)| {
        format!(
            "unknown SQLite URL parameter `{k}` (after the `?`): SQLite URLs take mode, cache, immutable and vfs; a `?` in a file name is written %3F"
        )
    })
}

/// A URL that cannot be used, naming the setting it came from and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("setting `{setting}`: {message}")]
pub struct UrlError {
    /// The setting or flag that gave the URL, e.g. `target.url`.
    pub setting: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl UrlError {
    fn new(setting: impl Into<String>, message: impl Into<String>) -> UrlError {
        UrlError {
            setting: setting.into(),
            message: message.into(),
        }
    }
}

/// A database URL whose password never reaches `Debug`, `Display` or a log.
#[derive(Clone, PartialEq, Eq)]
pub struct DbUrl {
    /// As the driver gets it (see [`crate::secret::for_driver`]).
    url: String,
    /// As the user wrote it (the path made absolute), secrets redacted: for messages.
    shown: String,
    /// Which backend the scheme names.
    pub backend: Backend,
    /// How long a PostgreSQL connection may take to open (`?connect_timeout=N` seconds, as
    /// libpq reads it; [`DEFAULT_CONNECT_TIMEOUT`] without it; `None` for `0`, waiting
    /// as long as the network does).
    pub connect_timeout: Option<std::time::Duration>,
    /// `?application_name=…` when the URL gives one, else the name dimlog shows in
    /// `pg_stat_activity` (see [`DbUrl::with_application_name`]).
    pub application_name: Option<String>,
    /// Whether the URL names the application itself (then it is never replaced).
    application_name_given: bool,
}

/// How long a PostgreSQL connection may take to open when the URL does not say: a
/// listener that never answers fails the command instead of hanging it.
pub const DEFAULT_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The engines: SQLite and PostgreSQL chosen from the URL scheme, Citus found on a
/// PostgreSQL server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Embedded, the default.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
    /// A Citus coordinator (PostgreSQL with the `citus` extension): never a URL's
    /// scheme, found on the server when a PostgreSQL connection opens.
    Citus,
}

impl DbUrl {
    /// Checks the scheme; a relative SQLite path is taken relative to `base`.
    pub fn parse(setting: &str, raw: &str, base: Option<&Path>) -> Result<DbUrl, UrlError> {
        if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            url::Url::parse(raw)
                .map_err(|e| UrlError::new(setting, format!("cannot parse the PostgreSQL URL: {e}")))?;
            let (url, dropped) = crate::secret::for_driver(raw);
            for name in dropped {
                tracing::warn!(
                    "{setting}: the parameter `{name}` is not used by dimlog's PostgreSQL driver and is ignored"
                );
            }
            // dimlog applies connect_timeout itself (the driver does not read it).
            let (url, timeout) = take_query_param(&url, "connect_timeout");
            let connect_timeout = match timeout.as_deref().map(str::trim) {
                None => Some(DEFAULT_CONNECT_TIMEOUT),
                Some(t) => match t.parse::<u64>() {
                    Ok(0) => None,
                    // libpq waits at least 2 seconds.
                    Ok(n) => Some(std::time::Duration::from_secs(n.max(2))),
                    Err(_) => {
                        return Err(UrlError::new(
                            setting,
                            format!(
                                "connect_timeout={t:?} is not a whole number of seconds; write e.g. connect_timeout=10"
                            ),
                        ))
                    }
                },
            };
            // What the driver cannot read (a misspelt `sslmode`, a port that is no number)
            // is the config's mistake, said before anything connects.
            if let Err(e) = <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(&url) {
                let why = e.to_string();
                let mut why = why.as_str();
                while let Some(rest) = why.strip_prefix("error with configuration: ") {
                    why = rest;
                }
                return Err(UrlError::new(
                    setting,
                    format!("the PostgreSQL URL has a parameter the driver cannot read: {why}"),
                ));
            }
            let application_name = url::Url::parse(&url).ok().and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "application_name")
                    .map(|(_, v)| v.into_owned())
            });
            return Ok(DbUrl {
                url,
                shown: redact(raw),
                backend: Backend::Postgres,
                connect_timeout,
                application_name_given: application_name.is_some(),
                application_name,
            });
        }
        if let Some(rest) = raw.strip_prefix("sqlite://").or_else(|| raw.strip_prefix("sqlite:")) {
            let (path, query) = match rest.split_once('?') {
                Some((p, q)) => (p, Some(q)),
                None => (rest, None),
            };
            if path.is_empty() {
                return Err(UrlError::new(
                    setting,
                    "the SQLite URL has no file path, e.g. sqlite://warehouse.db",
                ));
            }
            let params: Vec<(String, String)> = query
                .map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect())
                .unwrap_or_default();
            if let Some(refusal) = sqlite_params_refusal(setting, path, &params) {
                return Err(UrlError::new(setting, refusal));
            }
            let file = sqlite_file_of(path).map_err(|_| {
                UrlError::new(
                    setting,
                    "the SQLite file path is not UTF-8 once its %-escapes are decoded: write the path as it is, with %25 for a % sign",
                )
            })?;
            if file.as_os_str().as_encoded_bytes().contains(&0) {
                return Err(UrlError::new(
                    setting,
                    "the SQLite file path holds a NUL byte (%00), which no file name can: remove it",
                ));
            }
            let full = if file.is_absolute() {
                file
            } else {
                match base {
                    Some(b) => b.join(&file),
                    None => file,
                }
            };
            let url = sqlite_url_of(&full, query);
            return Ok(DbUrl {
                shown: redact(&url),
                url,
                backend: Backend::Sqlite,
                connect_timeout: None,
                application_name: None,
                application_name_given: false,
            });
        }
        Err(UrlError::new(
            setting,
            format!(
                "unsupported URL {:?}: use postgres://user@host/db or sqlite://path/to/file.db",
                redact(raw)
            ),
        ))
    }

    /// The same URL showing `name` in `pg_stat_activity`, unless the URL names its
    /// application itself: `dimlog:<dimension>`, so a DBA sees which job holds a lock.
    pub fn with_application_name(mut self, name: &str) -> DbUrl {
        if !self.application_name_given && self.backend == Backend::Postgres {
            self.application_name = Some(name.to_string());
        }
        self
    }

    /// The URL with its password, only for the driver.
    pub fn expose(&self) -> &str {
        &self.url
    }

    /// The URL with any password replaced by `***`, for messages.
    pub fn redacted(&self) -> String {
        self.shown.clone()
    }

    /// `text` (a driver's message about this URL) with every secret of the URL replaced
    /// by `***`, wherever the driver echoed it.
    pub fn scrub(&self, text: &str) -> String {
        crate::secret::scrub(text, &crate::secret::secrets(&self.url))
    }

    /// The driver's error `e` about this URL, as it may be shown: unchanged unless its
    /// text or `Debug` form echoes a secret of the URL, then replaced by its scrubbed text.
    pub fn scrub_error(&self, e: sqlx::Error) -> sqlx::Error {
        let secrets = crate::secret::secrets(&self.url);
        let (text, debug) = (e.to_string(), format!("{e:?}"));
        let shown = crate::secret::scrub(&text, &secrets);
        if shown == text && crate::secret::scrub(&debug, &secrets) == debug {
            return e;
        }
        sqlx::Error::Configuration(shown.into())
    }

    /// The SQLite file path, for `sqlite://` URLs: the file sqlx opens for this URL.
    pub fn sqlite_path(&self) -> Option<PathBuf> {
        let rest = self.url.strip_prefix("sqlite://")?;
        let path = rest.split('?').next().unwrap_or(rest);
        Some(PathBuf::from(percent_decode_str(path).decode_utf8_lossy().into_owned()))
    }
}

/// `url` without its query parameter `name`, and that parameter's decoded value.
fn take_query_param(url: &str, name: &str) -> (String, Option<String>) {
    let mut value = None;
    let out = crate::secret::map_query_pairs(url, |pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k != name {
            return Some(pair.to_string());
        }
        value = url::form_urlencoded::parse(format!("v={v}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned());
        None
    });
    (out, value)
}

/// Replaces every secret of a URL (or of any text holding URLs) with `***`: see
/// [`crate::secret`].
pub fn redact(raw: &str) -> String {
    crate::secret::redact(raw)
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Whether two URLs name one database: the same SQLite file however its path is spelled,
/// or the same PostgreSQL host, port and database.
pub fn same_database(a: &DbUrl, b: &DbUrl) -> bool {
    if a.backend != b.backend {
        return false;
    }
    match a.backend {
        Backend::Sqlite => {
            let (Some(pa), Some(pb)) = (a.sqlite_path(), b.sqlite_path()) else {
                return false;
            };
            let memory = |p: &Path| p.as_os_str().is_empty() || p.as_os_str() == ":memory:";
            if memory(&pa) || memory(&pb) {
                return false;
            }
            let canonical = |p: PathBuf| {
                std::fs::canonicalize(&p).unwrap_or_else(|_| {
                    // A file not there yet: its path without `.` and `..`.
                    let mut out = PathBuf::new();
                    for c in std::path::absolute(&p).unwrap_or(p).components() {
                        match c {
                            std::path::Component::CurDir => {}
                            std::path::Component::ParentDir => {
                                out.pop();
                            }
                            other => out.push(other),
                        }
                    }
                    out
                })
            };
            canonical(pa) == canonical(pb)
        }
        Backend::Postgres | Backend::Citus => {
            let parts = |u: &DbUrl| {
                let parsed = url::Url::parse(u.expose()).ok()?;
                let user = parsed.username().to_string();
                let db = parsed.path().trim_start_matches('/').to_string();
                Some((
                    parsed.host_str().unwrap_or("localhost").to_ascii_lowercase(),
                    parsed.port().unwrap_or(5432),
                    if db.is_empty() { user } else { db },
                ))
            };
            match (parts(a), parts(b)) {
                (Some(x), Some(y)) => x == y,
                _ => a.expose() == b.expose(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{sqlite_url_of, DbUrl};
    use sqlx::sqlite::SqliteConnectOptions;
    use std::path::{Path, PathBuf};
    use std::str::FromStr;

    /// The file sqlx opens for `url`.
    fn sqlx_file(url: &str) -> PathBuf {
        SqliteConnectOptions::from_str(url)
            .expect("sqlx parses the URL")
            .get_filename()
            .to_path_buf()
    }

    /// A SQLite URL that names no file to keep (in memory), or has a parameter sqlx does
    /// not take (often a `?` meant in a file name), is the setting's error.
    #[test]
    fn sqlite_urls_that_keep_nothing_or_mistake_a_name_are_refused() {
        for (raw, words) in [
            ("sqlite::memory:", "in-memory"),
            ("sqlite://:memory:", "in-memory"),
            ("sqlite://w.db?mode=memory", "in-memory"),
            ("sqlite://w.db?mode=memory&cache=shared", "in-memory"),
            ("sqlite://x?y.db", "unknown SQLite URL parameter `y.db`"),
            ("sqlite://w.db?moed=ro", "unknown SQLite URL parameter `moed`"),
            ("sqlite://n%00.db", "NUL byte"),
            ("sqlite://w.db?vfs=unix-none", "takes no locks"),
            ("sqlite://w.db?vfs=memdb", "in memory"),
            ("sqlite://w.db?mode=ro", "read-only"),
            ("sqlite://w.db?immutable=1", "read-only"),
            ("sqlite:///tmp/a%00/b.db", "NUL byte"),
        ] {
            let e = DbUrl::parse("target.url", raw, None).expect_err(raw);
            assert_eq!(e.setting, "target.url", "{raw}");
            assert!(e.message.contains(words), "{raw}: {e}");
        }
        for raw in [
            "sqlite://w.db?mode=rwc&cache=private",
            "sqlite://w.db?vfs=unix-excl",
            "sqlite://x%3Fy.db",
        ] {
            DbUrl::parse("target.url", raw, None).unwrap_or_else(|e| panic!("{raw}: {e}"));
        }
        // A target given another way is written all the same.
        assert!(DbUrl::parse("target.url (as overridden)", "sqlite://w.db?mode=ro", None).is_err());
        // A source may be read-only, but never unlocked.
        for raw in ["sqlite://w.db?mode=ro", "sqlite://w.db?immutable=1"] {
            DbUrl::parse("source.url", raw, None).unwrap_or_else(|e| panic!("{raw}: {e}"));
        }
        assert!(DbUrl::parse("source.url", "sqlite://w.db?vfs=unix-none", None).is_err());
    }

    proptest::proptest! {
        /// Whatever a config's SQLite path holds (escapes, `%` signs that are none, spaces,
        /// `#`, letters of any script), dimlog's file is the one sqlx opens for the URL, as
        /// it was written and as dimlog keeps it.
        #[test]
        fn dimlog_and_sqlx_mean_one_file_by_a_sqlite_url(
            path in "(/[a-z]{0,3})?([a-zA-Z0-9 é#_.-]|%20|%25|%3F|%3f|%23|%zz|%|%2)+",
            query in proptest::option::of("mode=rwc"),
        ) {
            let written = format!("sqlite://{path}{}", query.as_ref().map(|q| format!("?{q}")).unwrap_or_default());
            // Bytes that are not UTF-8, or a NUL, name no file dimlog takes: refused (above).
            let opened = SqliteConnectOptions::from_str(&written).ok().map(|o| o.get_filename().to_path_buf());
            proptest::prop_assume!(opened.is_some_and(|f| !f.as_os_str().as_encoded_bytes().contains(&0)));
            let base = Path::new("/cfg dir%/x?y#");
            let url = DbUrl::parse("target.url", &written, Some(base)).expect("a SQLite URL");
            let kept = url.sqlite_path().expect("a file");
            proptest::prop_assert_eq!(&kept, &sqlx_file(url.expose()));
            let as_written = sqlx_file(&written);
            let expected = if as_written.is_absolute() { as_written } else { base.join(as_written) };
            proptest::prop_assert_eq!(kept, expected);
        }

        /// The URL dimlog writes for a file opens that file.
        #[test]
        fn the_url_of_a_file_opens_it(name in "[a-zA-Z0-9 %?#é_.-]{1,20}") {
            let file = Path::new("/data").join(&name);
            proptest::prop_assert_eq!(sqlx_file(&sqlite_url_of(&file, None)), file);
        }
    }
}
