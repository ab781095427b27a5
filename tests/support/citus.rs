//! A real Citus cluster for the Citus group of tests (cargo feature `citus-tests`): a
//! coordinator and its workers, reached at `DIMLOG_TEST_CITUS_URL` (start one with
//! `../shared/citus/cluster.sh start`, which prints the URL; `.ci/run` does). Without it
//! the group fails, naming the variable: it never skips.
//!
//! Each test leases a database of its own (`dimlog_citus_<n>`, made on every node with
//! the extension, the coordinator knowing the workers, 2 shards per distributed table, one per worker), emptied at the start of the lease and given back when the fixture
//! is dropped: so many tests need as many databases as run at once, not one each.

use std::sync::{Mutex, OnceLock};

use sqlx::{Connection as _, Executor as _, PgConnection};

/// The coordinator's URL, or a panic saying how to get one.
pub fn coordinator_url() -> String {
    match std::env::var("DIMLOG_TEST_CITUS_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "the Citus tests (feature `citus-tests`) need a Citus cluster: set DIMLOG_TEST_CITUS_URL to its \
             coordinator's URL (`../shared/citus/cluster.sh start` starts one on loopback and prints it)"
        ),
    }
}

/// `url` with database `name` (and no TLS: Citus's self-signed certificate is not one
/// the driver takes, and the cluster is on loopback).
fn with_database(url: &str, name: &str) -> String {
    let mut u = url::Url::parse(url).unwrap_or_else(|e| panic!("DIMLOG_TEST_CITUS_URL is not a URL: {e}"));
    u.set_path(&format!("/{name}"));
    let kept: Vec<(String, String)> = u
        .query_pairs()
        .filter(|(k, _)| k != "sslmode")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    u.query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .append_pair("sslmode", "disable");
    u.into()
}

async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the Citus cluster at {url}: {e}"))
}

/// The URLs of every node (coordinator first), database `name`.
async fn nodes(name: &str) -> Vec<String> {
    let coordinator = with_database(&coordinator_url(), "postgres");
    let mut c = connect(&coordinator).await;
    let workers: Vec<(String, i32)> =
        sqlx::query_as("SELECT nodename::text, nodeport FROM pg_dist_node WHERE groupid <> 0 ORDER BY nodeid")
            .fetch_all(&mut c)
            .await
            .unwrap_or_else(|e| panic!("{coordinator} is not a Citus coordinator with workers: {e}"));
    assert!(
        !workers.is_empty(),
        "the Citus coordinator {coordinator} has no workers"
    );
    let mut out = vec![with_database(&coordinator_url(), name)];
    for (host, port) in workers {
        let mut u = url::Url::parse(&with_database(&coordinator_url(), name)).expect("a URL");
        u.set_host(Some(&host)).expect("a host");
        u.set_port(Some(port as u16)).expect("a port");
        out.push(u.into());
    }
    out
}

/// Makes database `name` on every node, with the extension, and on the coordinator
/// registers the workers (Citus keeps its nodes per database). A copy of a template
/// database would be faster, but Citus's metadata does not survive being copied.
async fn make_database(name: &str) {
    forget_prepared(name).await;
    let urls = nodes(name).await;
    for url in &urls {
        let mut admin = connect(&url.replace(&format!("/{name}"), "/postgres")).await;
        admin
            .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
            .await
            .unwrap_or_else(|e| panic!("cannot drop an old database {name} at {url}: {e}"));
        admin
            .execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .unwrap_or_else(|e| panic!("cannot make database {name} at {url}: {e}"));
        let mut t = connect(url).await;
        t.execute("CREATE EXTENSION citus")
            .await
            .unwrap_or_else(|e| panic!("cannot create extension citus at {url}: {e}"));
    }
    let mut t = connect(&urls[0]).await;
    let port = url::Url::parse(&urls[0]).expect("url").port().unwrap_or(5432);
    t.execute(format!("SELECT citus_set_coordinator_host('127.0.0.1', {port})").as_str())
        .await
        .expect("set the coordinator");
    for w in &urls[1..] {
        let u = url::Url::parse(w).expect("url");
        let add = format!(
            "SELECT citus_add_node('{}', {})",
            u.host_str().expect("host"),
            u.port().unwrap_or(5432)
        );
        // Databases are made for tests running in parallel, and adding a node takes
        // cluster-wide locks: a concurrent add can fail (seen once in a hundred runs);
        // it is tried again, and the last error is shown if it keeps failing.
        let mut tries = 0;
        loop {
            match t.execute(add.as_str()).await {
                Ok(_) => break,
                Err(e) if tries < 5 => {
                    tries += 1;
                    eprintln!("adding worker {w} to {name} failed ({e}); trying again");
                    tokio::time::sleep(std::time::Duration::from_millis(200 * tries)).await;
                }
                Err(e) => panic!("cannot add worker {w} to database {name}: {e}"),
            }
        }
    }
    t.execute(format!("ALTER DATABASE {name} SET citus.shard_count = 2").as_str())
        .await
        .expect("shard count");
}

static FREE: Mutex<Vec<String>> = Mutex::new(Vec::new());
static MADE: OnceLock<Mutex<u32>> = OnceLock::new();

/// A database of the cluster, the test's own until dropped.
pub struct Lease {
    name: String,
    /// Its URL on the coordinator.
    pub url: String,
}

impl Drop for Lease {
    fn drop(&mut self) {
        FREE.lock().expect("free list").push(self.name.clone());
    }
}

/// Rolls back the prepared transactions left in database `name` on every node
/// (`citus::commits` makes one on a worker, which a failed test leaves): they hold
/// locks, and keep the database from being dropped. A database not there is skipped.
async fn forget_prepared(name: &str) {
    for url in nodes(name).await {
        let Ok(mut c) = PgConnection::connect(&url).await else {
            continue;
        };
        let gids: Vec<(String,)> =
            sqlx::query_as("SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
                .fetch_all(&mut c)
                .await
                .unwrap_or_default();
        for (gid,) in gids {
            let _ = c
                .execute(format!("ROLLBACK PREPARED '{}'", gid.replace('\'', "''")).as_str())
                .await;
        }
        let _ = c.close().await;
    }
}

/// Leases a database with no tables of an earlier test.
pub async fn lease() -> Lease {
    let reused = FREE.lock().expect("free list").pop();
    let name = match reused {
        Some(name) => {
            forget_prepared(&name).await;
            name
        }
        None => {
            let n = {
                let mut made = MADE.get_or_init(|| Mutex::new(0)).lock().expect("counter");
                *made += 1;
                *made
            };
            let name = format!("dimlog_citus_{n}");
            make_database(&name).await;
            name
        }
    };
    // Settings a test gave its database (auto_explain, say) end with the test.
    let mut admin = connect(&with_database(&coordinator_url(), "postgres")).await;
    admin
        .execute(format!("ALTER DATABASE {name} RESET ALL; ALTER DATABASE {name} SET citus.shard_count = 2").as_str())
        .await
        .unwrap_or_else(|e| panic!("cannot reset the settings of database {name}: {e}"));
    let _ = admin.close().await;
    let url = with_database(&coordinator_url(), &name);
    let mut c = connect(&url).await;
    if let Err(first) = empty(&mut c).await {
        // Made again rather than left behind: a lease never given back would cost a
        // database (and a maintenance process of Citus on every node) per test.
        let _ = c.close().await;
        eprintln!("database {name} could not be emptied ({first}); making it again");
        make_database(&name).await;
        c = connect(&url).await;
    }
    let _ = c.close().await;
    Lease { name, url }
}

/// Drops what earlier tests made in a database of the cluster: every table, view,
/// sequence, type and function of `public` but the extension's own (Citus keeps some
/// there, so `public` cannot be dropped), and every other schema but the system's and
/// the extension's.
pub async fn empty(c: &mut PgConnection) -> Result<(), sqlx::Error> {
    c.execute(EMPTY).await.map(|_| ())
}

const EMPTY: &str = r#"
DO $$
DECLARE
  doomed text[];
  item text;
BEGIN
  -- Names are collected before anything is dropped (a CASCADE may take some with it,
  -- hence IF EXISTS), in an order where a dependent goes first.
  doomed := ARRAY(
    SELECT format('DROP SCHEMA IF EXISTS %I CASCADE', n.nspname) FROM pg_namespace n
    WHERE n.nspname NOT IN ('public', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
      AND n.nspname NOT LIKE 'citus%' AND n.nspname <> 'columnar' AND n.nspname NOT LIKE 'columnar\_%'
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_namespace'::regclass AND d.objid = n.oid AND d.deptype = 'e'));
  doomed := doomed || ARRAY(
    SELECT format('DROP %s IF EXISTS public.%I CASCADE',
             CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
             c.relname)
    FROM pg_class c
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
    ORDER BY CASE c.relkind WHEN 'v' THEN 0 WHEN 'm' THEN 0 WHEN 'S' THEN 2 ELSE 1 END);
  doomed := doomed || ARRAY(
    SELECT format('DROP TYPE IF EXISTS public.%I CASCADE', t.typname) FROM pg_type t
    WHERE t.typnamespace = 'public'::regnamespace AND t.typtype IN ('e', 'd', 'r') 
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e'));
  doomed := doomed || ARRAY(
    SELECT format('DROP ROUTINE IF EXISTS public.%I(%s) CASCADE', p.proname, pg_get_function_identity_arguments(p.oid)) FROM pg_proc p
    WHERE p.pronamespace = 'public'::regnamespace AND p.prokind IN ('f', 'p')
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'));
  FOREACH item IN ARRAY doomed LOOP
    EXECUTE item;
  END LOOP;
END $$
"#;
