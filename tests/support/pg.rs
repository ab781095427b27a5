//! A PostgreSQL server for tests and benchmarks, shared by the whole process.
//!
//! Every test asks for its own brand-new database ([`fresh_database`]), so tests can run in
//! parallel without seeing each other's tables, while paying for a server only once. The
//! server is chosen once per process, lazily, in this order:
//!
//! 1. `TEST_DATABASE_URL`, if set: a server the caller owns, used as the admin URL (its role
//!    must be allowed to `CREATE DATABASE`). A fixture's database is dropped when the
//!    fixture is ([`OwnedDatabase`]); the few others are not. All are named `dimlog_test_*`
//!    so leftovers are easy to clean up by hand.
//! 2. a Docker engine, if `docker info` answers: a `postgres` container via testcontainers.
//! 3. local server binaries (`initdb`, `pg_ctl`): a throwaway cluster in a temp dir.
//!
//! Statics are never dropped, so a container or cluster we start is torn down by a small
//! watchdog shell process that outlives us: it polls our pid and cleans up once it is gone.
//!
//! This file must stay self-contained: benchmarks include it with
//! `#[path = "../tests/support/pg.rs"] mod pg;`.
#![allow(dead_code)]

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx::{Connection as _, Executor as _, PgConnection};

/// Prefix of every database we create, so leftovers on a shared server are recognisable.
const DB_PREFIX: &str = "dimlog_test";

/// Server settings for throwaway servers: durability is pointless for test data, and the
/// test binary opens many pools at once.
const SERVER_SETTINGS: &[(&str, &str)] = &[
    ("max_connections", "200"),
    ("shared_buffers", "256MB"),
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    // Checkpoints are cheap without fsync; a small WAL keeps the suite's disk use down.
    ("max_wal_size", "128MB"),
    ("min_wal_size", "32MB"),
];

/// The admin URL of the shared server, or why none could be had. Only a string lives here:
/// every `#[tokio::test]` has its own runtime, so a pool kept in a static would outlive the
/// runtime that drives it. The error is kept too, so a failed start is not retried (and its
/// cleanup not repeated) by every test.
static SERVER: OnceLock<Result<String, String>> = OnceLock::new();

/// The admin URL of the shared server, starting it on first use.
///
/// Panics with instructions when no server can be had: a test that needs PostgreSQL must
/// never pass by silently skipping.
pub fn server_url() -> String {
    match SERVER.get_or_init(start_server) {
        Ok(url) => url.clone(),
        Err(message) => panic!("{message}"),
    }
}

/// The URL of a brand-new, empty database with a unique name on the shared server.
pub async fn fresh_database() -> String {
    create_database().await.0
}

/// A brand-new database that is dropped again when this is dropped, so a suite of hundreds
/// of tests holds only the databases of the tests running at the moment (each new database
/// costs about 8 MB of disk, and a CI machine's disk may be small).
pub struct OwnedDatabase {
    pub url: String,
    admin: String,
    name: String,
}

/// A fresh database (see [`fresh_database`]) that is dropped with the value returned.
pub async fn owned_database() -> OwnedDatabase {
    let (url, admin, name) = create_database().await;
    OwnedDatabase { url, admin, name }
}

/// Creates a database with a unique name on the shared server: its URL, the server's
/// admin URL and its name.
async fn create_database() -> (String, String, String) {
    // Starting a server blocks for seconds; keep that off the caller's runtime threads.
    let admin = match tokio::task::spawn_blocking(server_url).await {
        Ok(url) => url,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => panic!("the postgres start-up task failed: {err}"),
    };
    let name = unique_database_name();
    let mut conn = PgConnection::connect(&admin).await.unwrap_or_else(|err| {
        panic!(
            "could not connect to the test postgres server at {}: {err}",
            redacted(&admin)
        )
    });
    // template0 is never connected to, so concurrent creations cannot trip over a session
    // on the template, and it is empty even if someone has customised template1.
    let create = format!(r#"CREATE DATABASE "{name}" TEMPLATE template0"#);
    conn.execute(create.as_str())
        .await
        .unwrap_or_else(|err| panic!("could not create database {name} on {}: {err}", redacted(&admin)));
    let _ = conn.close().await;
    (database_url(&admin, &name), admin, name)
}

impl Drop for OwnedDatabase {
    /// Drops the database on a thread of its own: a `Drop` cannot await, and the test's
    /// runtime may be the current-thread kind. `WITH (FORCE)` ends sessions a test left
    /// open (pools, or a child process it killed). Failures are ignored: a leftover
    /// database costs disk, not correctness.
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let dropping = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            runtime.block_on(async {
                if let Ok(mut conn) = PgConnection::connect(&admin).await {
                    let _ = conn
                        .execute(format!(r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#).as_str())
                        .await;
                    let _ = conn.close().await;
                }
            });
        });
        let _ = dropping.join();
    }
}

/// A database name unique across concurrent tests, processes and earlier runs on a shared
/// server.
fn unique_database_name() -> String {
    static STAMP: OnceLock<String> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let stamp = STAMP.get_or_init(|| {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        format!("{}_{:x}", std::process::id(), nanos as u64)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{DB_PREFIX}_{stamp}_{n}")
}

/// `admin` with its database replaced by `name`; user, password and query parameters stay.
fn database_url(admin: &str, name: &str) -> String {
    let mut url =
        url::Url::parse(admin).unwrap_or_else(|err| panic!("invalid postgres url {}: {err}", redacted(admin)));
    url.set_path(&format!("/{name}"));
    url.into()
}

/// `url` without its password, for messages.
fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.into()
        }
        Ok(_) => url.to_owned(),
        Err(_) => "<unparsable url>".to_owned(),
    }
}

/// Picks the server, in the order described in the module docs.
fn start_server() -> Result<String, String> {
    if let Some(url) = std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
    {
        return Ok(url);
    }
    let mut failures = vec!["TEST_DATABASE_URL: not set".to_owned()];
    match docker_engine_answers().and_then(|()| start_container()) {
        Ok(url) => return Ok(url),
        Err(err) => failures.push(format!("docker: {err}")),
    }
    match start_local_cluster() {
        Ok(url) => return Ok(url),
        Err(err) => failures.push(format!("local postgres binaries: {err}")),
    }
    Err(no_server_message(&failures))
}

fn no_server_message(failures: &[String]) -> String {
    let tried: String = failures.iter().map(|f| format!("\n  - {f}")).collect();
    format!(
        "\n\n==================== NO POSTGRESQL SERVER FOR THE TESTS ====================\n\
         tried, in order:{tried}\n\n\
         the postgres tests need one of:\n  \
         1. TEST_DATABASE_URL=postgres://user:password@host:port/db, a server where that\n     \
            role may CREATE DATABASE (a fresh database is created per test);\n  \
         2. a running Docker engine (`docker info` must succeed), used via testcontainers;\n  \
         3. postgresql server binaries (initdb, pg_ctl) on PATH or under\n     \
            /usr/lib/postgresql/<version>/bin, e.g. `apt-get install postgresql`; when\n     \
            running as root the `postgres` OS user must exist or be creatable.\n\
         ============================================================================\n"
    )
}

/// Whether a Docker engine answers, asked with a deadline: a client pointed at a dead
/// remote engine can hang for a long time.
fn docker_engine_answers() -> Result<(), String> {
    let mut child = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| format!("no docker client ({err})"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(_)) => return Err("no engine answers `docker info`".to_owned()),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("`docker info` did not answer within 10s".to_owned());
            }
            Err(err) => return Err(format!("could not wait for `docker info`: {err}")),
        }
    }
}

/// Starts a postgres container. testcontainers is async, so it runs on a private runtime on
/// a plain thread: the caller may be inside a runtime, where a nested `block_on` panics.
fn start_container() -> Result<String, String> {
    std::thread::spawn(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("could not build a runtime: {err}"))?;
        runtime.block_on(async {
            use testcontainers_modules::postgres::Postgres;
            use testcontainers_modules::testcontainers::runners::AsyncRunner as _;
            use testcontainers_modules::testcontainers::ImageExt as _;

            let mut cmd = vec!["postgres".to_owned()];
            for (key, value) in SERVER_SETTINGS {
                cmd.extend(["-c".to_owned(), format!("{key}={value}")]);
            }
            let container = Postgres::default()
                .with_host_auth()
                .with_tag("15-alpine")
                .with_cmd(cmd)
                // Docker's default 64MB /dev/shm is too small for parallel query workers.
                .with_shm_size(512 << 20)
                .start()
                .await
                .map_err(|err| format!("could not start a postgres container: {err}"))?;
            spawn_watchdog(&format!("docker rm -f -v {} >/dev/null 2>&1", sh_quote(container.id())))?;
            let host = container
                .get_host()
                .await
                .map_err(|err| format!("no host for the postgres container: {err}"))?;
            let port = container
                .get_host_port_ipv4(5432)
                .await
                .map_err(|err| format!("no port for the postgres container: {err}"))?;
            // Dropping the handle would remove the container when this thread ends; removal
            // is the watchdog's job, at process exit.
            std::mem::forget(container);
            let url = format!("postgres://postgres:postgres@{host}:{port}/postgres");
            // The image's entrypoint runs a temporary server first, so its readiness
            // message can come before the real server listens.
            wait_until_connectable(&url, Duration::from_secs(60)).await?;
            Ok(url)
        })
    })
    .join()
    .map_err(|_| "the container start-up thread panicked".to_owned())?
}

async fn wait_until_connectable(url: &str, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let attempt = async {
            let mut conn = PgConnection::connect(url).await?;
            conn.execute("SELECT 1").await?;
            conn.close().await
        };
        match attempt.await {
            Ok(()) => return Ok(()),
            Err(err) if Instant::now() >= deadline => {
                return Err(format!("server at {url} not ready after {limit:?}: {err}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Starts a throwaway cluster from local binaries, listening on 127.0.0.1 only.
fn start_local_cluster() -> Result<String, String> {
    start_cluster(None)
}

/// A server of its own that accepts only TLS connections (`hostssl`; plain ones are
/// rejected), with a certificate for `127.0.0.1` and `localhost` signed by a CA generated
/// here: its admin URL (without `sslmode`) and the CA certificate's path. Needs the local
/// server binaries and `openssl`, whatever serves the other tests.
pub fn start_tls_cluster() -> Result<(String, PathBuf), String> {
    let ca = std::sync::Mutex::new(None);
    let url = start_cluster(Some(&|dir: &Path, data: &Path| {
        let certs = dir.join("certs");
        fs::create_dir(&certs).map_err(|e| format!("could not create {}: {e}", certs.display()))?;
        let openssl = |args: &[&str], what: &str| run(Command::new("openssl").args(args).current_dir(&certs), what);
        openssl(
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=dimlog test CA",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
            "openssl (CA)",
        )?;
        openssl(
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
            "openssl (server key)",
        )?;
        fs::write(
            certs.join("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .map_err(|e| format!("could not write server.ext: {e}"))?;
        openssl(
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                "server.crt",
                "-extfile",
                "server.ext",
            ],
            "openssl (server certificate)",
        )?;
        for file in ["server.key", "server.crt", "ca.crt"] {
            fs::copy(certs.join(file), data.join(file)).map_err(|e| format!("could not copy {file}: {e}"))?;
        }
        *ca.lock().unwrap() = Some(certs.join("ca.crt"));
        fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
        )
        .map_err(|e| format!("could not write pg_hba.conf: {e}"))?;
        Ok("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n".to_string())
    }))?;
    let ca = ca.into_inner().unwrap().expect("the CA was made");
    Ok((url, ca))
}

/// A server of its own where every role but `postgres` logs in over TCP with a password
/// (SCRAM), for tests of how dimlog finds passwords: its admin URL (`postgres`, trusted).
pub fn start_password_cluster() -> Result<String, String> {
    start_cluster(Some(&|_dir: &Path, data: &Path| {
        fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n",
        )
        .map_err(|e| format!("could not write pg_hba.conf: {e}"))?;
        Ok("password_encryption = 'scram-sha-256'\n".to_string())
    }))
}

/// What a cluster needs beyond the defaults: given the cluster's dir and its data dir
/// (after initdb), writes its files and returns lines for postgresql.conf.
type ClusterSetup<'a> = &'a dyn Fn(&Path, &Path) -> Result<String, String>;

fn start_cluster(setup: Option<ClusterSetup>) -> Result<String, String> {
    let bin = find_pg_bin()?;
    // initdb and postgres refuse to run as root.
    let as_root = current_uid()? == 0;
    let owner = if as_root { Some(ensure_postgres_user()?) } else { None };
    let dir = make_cluster_dir(as_root)?;
    let data = dir.join("data");
    let pg_ctl = bin.join("pg_ctl");

    // Armed before anything runs, so a half-started cluster is cleaned up as well.
    let stop = shell_command(
        as_root,
        &pg_ctl,
        &["stop", "-m", "immediate", "-D", &data.to_string_lossy()],
    );
    spawn_watchdog(&format!(
        "{stop} >/dev/null 2>&1; rm -rf {}",
        sh_quote(&dir.to_string_lossy())
    ))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
            .map_err(|err| format!("could not chown {} to postgres: {err}", dir.display()))?;
    }

    run(
        pg_command(as_root, &bin.join("initdb"), &dir)
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "--encoding=UTF8"])
            .args(["--locale=C", "--no-sync"]),
        "initdb",
    )?;
    let mut conf = format!(
        "\n# dimlog test harness\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n",
        dir.display()
    );
    for (key, value) in SERVER_SETTINGS {
        conf.push_str(&format!("{key} = '{value}'\n"));
    }
    if let Some(setup) = setup {
        conf.push_str(&setup(&dir, &data)?);
        if let Some((uid, gid)) = owner {
            // The server reads its key and certificates as the postgres user, and refuses
            // a key others may read.
            for entry in fs::read_dir(&data).map_err(|e| format!("could not list {}: {e}", data.display()))? {
                let path = entry.map_err(|e| e.to_string())?.path();
                std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
            }
        }
        use std::os::unix::fs::PermissionsExt as _;
        let key = data.join("server.key");
        if key.exists() {
            fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
        }
    }
    OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .and_then(|mut file| file.write_all(conf.as_bytes()))
        .map_err(|err| format!("could not write postgresql.conf: {err}"))?;

    // The port is only free until someone else takes it, so retry a few times.
    let log = dir.join("server.log");
    let mut last_error = String::new();
    for _ in 0..3 {
        let port = free_port()?;
        let started = run(
            pg_command(as_root, &pg_ctl, &dir)
                .args(["start", "-w", "-t", "60", "-D"])
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-o", &format!("-p {port}")]),
            "pg_ctl start",
        );
        match started {
            Ok(()) => return Ok(format!("postgres://postgres@127.0.0.1:{port}/postgres")),
            Err(err) => {
                let log_text = fs::read_to_string(&log).unwrap_or_default();
                last_error = format!("{err}\nserver log:\n{}", tail(&log_text, 20));
                if !log_text.contains("could not bind") {
                    break;
                }
            }
        }
    }
    Err(last_error)
}

/// The directory holding `initdb` and `pg_ctl`: PATH first (whoever set it chose the
/// version), then Debian's versioned dirs, which are not on PATH, highest version first.
fn find_pg_bin() -> Result<PathBuf, String> {
    let has_tools = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(dir) = std::env::split_paths(&path).find(|dir| has_tools(dir)) {
            return Ok(dir);
        }
    }
    let mut best: Option<(u32, PathBuf)> = None;
    for entry in fs::read_dir("/usr/lib/postgresql").into_iter().flatten().flatten() {
        let Some(version) = entry.file_name().to_str().and_then(|v| v.parse::<u32>().ok()) else {
            continue;
        };
        let bin = entry.path().join("bin");
        if has_tools(&bin) && best.as_ref().is_none_or(|(v, _)| version > *v) {
            best = Some((version, bin));
        }
    }
    best.map(|(_, bin)| bin)
        .ok_or_else(|| "no initdb/pg_ctl on PATH or under /usr/lib/postgresql/*/bin".to_owned())
}

fn current_uid() -> Result<u32, String> {
    id(&["-u"])
}

/// The uid and gid of the `postgres` OS user, creating a system user if there is none.
fn ensure_postgres_user() -> Result<(u32, u32), String> {
    if id(&["-u", "postgres"]).is_err() {
        run(
            Command::new("useradd").args([
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/bin/sh",
                "postgres",
            ]),
            "useradd postgres",
        )
        .map_err(|err| {
            format!(
                "running as root, so the cluster must run as the `postgres` OS user, which \
                 does not exist and could not be created: {err}"
            )
        })?;
    }
    Ok((id(&["-u", "postgres"])?, id(&["-g", "postgres"])?))
}

fn id(args: &[&str]) -> Result<u32, String> {
    let output = Command::new("id")
        .args(args)
        .stderr(Stdio::null())
        .output()
        .map_err(|err| format!("could not run `id`: {err}"))?;
    if !output.status.success() {
        return Err(format!("`id {}` failed", args.join(" ")));
    }
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(|err| format!("unexpected output from `id {}`: {err}", args.join(" ")))
}

/// A new directory for the cluster. As root it goes under /tmp rather than `$TMPDIR`, which
/// may sit somewhere the `postgres` user cannot reach.
fn make_cluster_dir(as_root: bool) -> Result<PathBuf, String> {
    let base = if as_root {
        PathBuf::from("/tmp")
    } else {
        std::env::temp_dir()
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = base.join(format!("dimlog-pg-{}-{nanos:x}", std::process::id()));
    fs::create_dir(&dir).map_err(|err| format!("could not create {}: {err}", dir.display()))?;
    Ok(dir)
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|err| format!("could not find a free port: {err}"))
}

/// `program`, run as the `postgres` OS user when we are root, from `cwd` (our own working
/// directory may not be readable by that user).
fn pg_command(as_root: bool, program: &Path, cwd: &Path) -> Command {
    let mut cmd = if as_root {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    };
    cmd.current_dir(cwd).stdin(Stdio::null());
    cmd
}

/// The shell spelling of what [`pg_command`] runs, for the watchdog.
fn shell_command(as_root: bool, program: &Path, args: &[&str]) -> String {
    let mut words = Vec::new();
    if as_root {
        words.extend(["runuser", "-u", "postgres", "--"].map(str::to_owned));
    }
    words.push(sh_quote(&program.to_string_lossy()));
    words.extend(args.iter().map(|arg| sh_quote(arg)));
    words.join(" ")
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let output = cmd.output().map_err(|err| format!("could not run {what}: {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    ))
}

/// Starts a detached shell that waits for this process to exit, then runs `cleanup`.
///
/// It gets its own process group, so a Ctrl-C or `timeout` aimed at the test run does not
/// take it down before it has cleaned up, and no inherited pipes, so it never keeps a
/// caller waiting for our output to end.
fn spawn_watchdog(cleanup: &str) -> Result<(), String> {
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {cleanup}",
        pid = std::process::id()
    );
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(drop)
        .map_err(|err| format!("could not start the cleanup watchdog: {err}"))
}

fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
