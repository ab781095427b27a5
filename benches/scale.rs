//! Speed at scale (issues 3, 5 and 9): dimlog on N-row PostgreSQL dimensions next to the
//! floor PostgreSQL itself sets on the same rows, plus SQLite and a chunked backfill.
//!
//! ```text
//! cargo bench --bench scale                              # N = 100k and 1M
//! cargo bench --bench scale -- --rows 100000,1000000,10000000
//! cargo bench --bench scale -- --sections pg             # pg | sqlite | backfill | citus
//! cargo bench --bench scale -- --sections citus --citus-shards 32   # needs DIMLOG_TEST_CITUS_URL
//! ```
//!
//! It starts its own PostgreSQL like the tests do (`TEST_DATABASE_URL`, Docker, or local
//! server binaries; see tests/support/pg.rs). Each dimlog operation runs in a child
//! process (this binary again, see benches/common), so wall time and peak RSS are
//! per scenario. Results and their interpretation: docs/performance.md.

#[path = "../tests/support/pg.rs"]
mod pg;

mod common;

#[path = "scale/citus.rs"]
mod citus;

use common::{count, customer_config, print_table, run_child, timed, ChildResult, Job};
use futures::StreamExt;
use sqlx::{Connection, Executor, PgConnection};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// S1 reads everything up to here.
const U1: &str = "2026-10-31T00:00:00Z";
/// S2's changes land in the hour after this.
const S2_AT: &str = "2026-11-02T00:00:00Z";
const U2: &str = "2026-11-02T02:00:00Z";
const U3: &str = "2026-11-02T03:00:00Z";
const U4: &str = "2026-11-02T04:00:00Z";
const UR: &str = "2026-11-04T00:00:00Z";

struct Args {
    rows: Vec<u64>,
    sections: Vec<String>,
    sqlite_rows: u64,
    backfill_rows: u64,
    /// Shards per distributed table in the Citus section (Citus's own default: 32).
    citus_shards: u32,
}

fn parse_args() -> Args {
    let mut args = Args {
        rows: vec![100_000, 1_000_000],
        sections: vec!["pg".into(), "sqlite".into(), "backfill".into()],
        sqlite_rows: 1_000_000,
        backfill_rows: 1_000_000,
        citus_shards: 32,
    };
    let list = |v: Option<String>| -> Vec<String> {
        v.unwrap_or_default()
            .split(',')
            .map(|s| s.trim().replace('_', ""))
            .filter(|s| !s.is_empty())
            .collect()
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rows" => args.rows = list(it.next()).iter().map(|s| s.parse().expect("--rows N,N")).collect(),
            "--sections" => args.sections = list(it.next()),
            "--sqlite-rows" => args.sqlite_rows = list(it.next())[0].parse().expect("--sqlite-rows N"),
            "--backfill-rows" => args.backfill_rows = list(it.next())[0].parse().expect("--backfill-rows N"),
            "--citus-shards" => args.citus_shards = list(it.next())[0].parse().expect("--citus-shards N"),
            "--bench" => {}
            other => {
                panic!("unknown argument {other}; use --rows N,N --sections pg,sqlite,backfill,citus --citus-shards N")
            }
        }
    }
    args
}

fn main() {
    common::child_main_if_requested();
    let args = parse_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("a temp dir");
        println!("# dimlog scale benchmark");
        println!("machine: {} cores, {}", cores(), pg_version().await);
        let sqlite = if args.sections.iter().any(|s| s == "sqlite") {
            Some(prepare_sqlite(args.sqlite_rows, dir.path()).await)
        } else {
            None
        };
        if args.sections.iter().any(|s| s == "pg") {
            pg_section(&args.rows, dir.path(), sqlite.as_ref()).await;
        }
        if let Some(sqlite) = &sqlite {
            sqlite_section(sqlite).await;
        }
        if args.sections.iter().any(|s| s == "backfill") {
            backfill_section(args.backfill_rows, dir.path()).await;
        }
        if args.sections.iter().any(|s| s == "citus") {
            citus::citus_section(&args.rows, args.citus_shards, dir.path()).await;
        }
    });
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

async fn pg_version() -> String {
    let url = pg::fresh_database().await;
    let mut c = connect(&url).await;
    let v: String = sqlx::query_scalar("SELECT version()").fetch_one(&mut c).await.unwrap();
    v.split(" on ").next().unwrap_or(&v).to_string()
}

async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

/// Runs `;`-separated statements one by one (VACUUM refuses a multi-statement string).
async fn exec(c: &mut PgConnection, sql: &str) -> u64 {
    let mut rows = 0;
    for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        rows += c
            .execute(sqlx::raw_sql(statement))
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"))
            .rows_affected();
    }
    rows
}

fn run_job(config: &Path, upper: &str, reconcile: bool) -> Job {
    Job::Run {
        config: config.to_path_buf(),
        upper: upper.into(),
        reconcile_deletes: reconcile,
        full_refresh: false,
        dry_run: false,
    }
}

/// The run twice as a dry run, then for real: three measurements of the same load on the
/// same state (a dry run does everything but commit), for a median.
fn load_twice_dry_then_commit(config: &Path, upper: &str) -> [Job; 3] {
    let dry = Job::Run {
        config: config.to_path_buf(),
        upper: upper.into(),
        reconcile_deletes: false,
        full_refresh: false,
        dry_run: true,
    };
    [dry.clone(), dry, run_job(config, upper, false)]
}

/// Runs each job in turn and keeps the result with the median wall time: the ratio
/// targets compare small runs whose single timings vary by ±30% on shared cores. After a
/// dry run the target's log and dimension are vacuumed: a rolled-back run leaves its rows
/// behind as dead tuples and index entries that no real run would meet.
async fn median_of(jobs: &[Job], target: &str) -> ChildResult {
    let mut results = Vec::with_capacity(jobs.len());
    for job in jobs {
        results.push(run_measured(job, target).await);
    }
    median(results)
}

/// The jobs of `a` and of `b` (see [`median_of`]) in alternation, a's first, b's first,
/// a's second…: a stretch of a slower machine slows both sides of a ratio, not one.
/// Returns each side's median.
async fn alternating_medians(a: (&[Job], &str), b: (&[Job], &str)) -> (ChildResult, ChildResult) {
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for (ja, jb) in a.0.iter().zip(b.0) {
        ra.push(run_measured(ja, a.1).await);
        rb.push(run_measured(jb, b.1).await);
    }
    (median(ra), median(rb))
}

/// Runs `job`; after a dry run, vacuums `target`.
async fn run_measured(job: &Job, target: &str) -> ChildResult {
    let result = run_child(job);
    if matches!(job, Job::Run { dry_run: true, .. }) {
        vacuum_target(target).await;
    }
    result
}

/// The result with the median wall time.
fn median(mut results: Vec<ChildResult>) -> ChildResult {
    results.sort_by(|a, b| a.wall.total_cmp(&b.wall));
    results.swap_remove(results.len() / 2)
}

/// Vacuums the log and the dimension where they exist (a rolled-back first load may
/// have rolled back their creation too).
async fn vacuum_target(target: &str) {
    let mut t = connect(target).await;
    for table in ["customer_versions", "dim_customer"] {
        let present: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
            .bind(table)
            .fetch_one(&mut t)
            .await
            .expect("to_regclass");
        if present.is_some() {
            exec(&mut t, &format!("VACUUM {table}")).await;
        }
    }
}

/// The same run with `--reconcile-deletes`, three times, rolled back: the reconciled
/// variant measured on the same state as the default run that follows it.
fn reconciled_dry_run(config: &Path, upper: &str) -> [Job; 3] {
    let dry = Job::Run {
        config: config.to_path_buf(),
        upper: upper.into(),
        reconcile_deletes: true,
        full_refresh: false,
        dry_run: true,
    };
    [dry.clone(), dry.clone(), dry]
}

/// The source table: N customers with distinct `updated_at` spread 2 s apart from
/// 2025-01-01 (N = 1M spans 23 days, 10M 231: all before the runs' upper bounds, which
/// must not be later than the source's clock), with a primary key and an index on the change
/// column (a watermark read needs one, or every incremental read scans the table).
async fn generate_source(c: &mut PgConnection, n: u64) {
    exec(
        c,
        &format!(
            "CREATE TABLE src_customers (customer_id bigint, email text, tier text, country text, updated_at timestamptz);
             INSERT INTO src_customers
             SELECT i, 'user' || i || '@example.com',
                    (ARRAY['bronze','silver','gold','platinum'])[1 + i % 4],
                    (ARRAY['NL','DE','FR','US','GB','JP','BR'])[1 + i % 7],
                    timestamptz '2025-01-01 00:00:00+00' + ((i * 37) % {n}) * interval '2 seconds'
             FROM generate_series(1, {n}) i;
             ALTER TABLE src_customers ADD PRIMARY KEY (customer_id);
             CREATE INDEX src_customers_updated_at ON src_customers (updated_at);
             VACUUM ANALYZE src_customers;"
        ),
    )
    .await;
}

/// Updates `updated` rows (ids ≡ `off_u` mod step), inserts `inserted` new ids from
/// `next_id`, hard-deletes `deleted` rows (ids ≡ `off_d` mod dstep), all with
/// `updated_at` in the hour after `at`. With `late_candidates`, every tenth updated row
/// lands in the last ten minutes of that hour, so S4 can slot a late version before it.
#[allow(clippy::too_many_arguments)]
async fn apply_change(
    c: &mut PgConnection,
    n: u64,
    next_id: &mut u64,
    (updated, inserted, deleted): (u64, u64, u64),
    at: &str,
    off_u: u64,
    off_d: u64,
    late_candidates: bool,
) {
    let step = n / updated;
    let late = if late_candidates {
        format!("WHEN customer_id % {} = 0 THEN timestamptz '{at}' + interval '50 minutes' + ((customer_id / {step}) % 59) * interval '1 second'", step * 10)
    } else {
        "WHEN false THEN NULL".to_string()
    };
    exec(
        c,
        &format!(
            "UPDATE src_customers SET tier = tier || '+',
                    updated_at = CASE {late} ELSE timestamptz '{at}' + ((customer_id / {step}) % 3000) * interval '1 second' END
             WHERE customer_id <= {n} AND customer_id % {step} = {off_u}"
        ),
    )
    .await;
    let first = *next_id;
    *next_id += inserted;
    exec(
        c,
        &format!(
            "INSERT INTO src_customers
             SELECT i, 'new' || i || '@example.com', 'new', 'NL', timestamptz '{at}' + (i % 3000) * interval '1 second'
             FROM generate_series({first}, {}) i",
            *next_id - 1
        ),
    )
    .await;
    let dstep = n / deleted;
    exec(
        c,
        &format!("DELETE FROM src_customers WHERE customer_id <= {n} AND customer_id % {dstep} = {off_d}"),
    )
    .await;
    exec(c, "ANALYZE src_customers").await;
}

/// What a bench run measured for one N.
#[derive(Default)]
struct Measured {
    floor_out: f64,
    floor_in: f64,
    floor_lead: f64,
    floor_count: f64,
    /// Issue 18's floor for hard deletes: the source's key list streamed out, plus one
    /// hash anti-join of the dimension's current keys against it (median of 3).
    floor_reconcile: (f64, f64),
    runs: BTreeMap<&'static str, ChildResult>,
}

impl Measured {
    fn floor(&self) -> f64 {
        self.floor_out + self.floor_in + self.floor_lead
    }
}

/// The floor: what PostgreSQL needs to move and derive the same N rows without dimlog,
/// measured three times; the run with the median sum is kept (the floor varies by ±10%
/// between runs on shared cores, like everything else).
async fn measure_floor(source: &str, target: &str, m: &mut Measured) {
    let mut runs = Vec::with_capacity(3);
    for _ in 0..3 {
        runs.push(floor_once(source, target).await);
    }
    runs.sort_by(|a, b| (a.0 + a.1 + a.2).total_cmp(&(b.0 + b.1 + b.2)));
    (m.floor_out, m.floor_in, m.floor_lead) = runs[1];
    let mut s = connect(source).await;
    let (secs, _) = timed(exec(&mut s, "SELECT count(*) FROM src_customers")).await;
    m.floor_count = secs;
}

/// Seconds to stream the source's key list (`COPY (SELECT customer_id …) TO STDOUT`) and
/// for one hash anti-join of the dimension's current keys against that list held in the
/// target (loaded and analysed beforehand, untimed): reconciliation without dimlog.
async fn reconcile_floor(source: &str, target: &str) -> (f64, f64) {
    let mut runs = Vec::with_capacity(3);
    for _ in 0..3 {
        let mut s = connect(source).await;
        let mut t = connect(target).await;
        let (out, chunks) = timed(async {
            let mut stream = s
                .copy_out_raw("COPY (SELECT customer_id FROM src_customers) TO STDOUT")
                .await
                .unwrap();
            let mut chunks = Vec::new();
            while let Some(chunk) = stream.next().await {
                chunks.push(chunk.unwrap());
            }
            chunks
        })
        .await;
        exec(&mut t, "CREATE TEMP TABLE floor_keys (customer_id bigint)").await;
        let mut copy = t.copy_in_raw("COPY floor_keys FROM STDIN").await.unwrap();
        for chunk in chunks {
            copy.send(chunk).await.unwrap();
        }
        copy.finish().await.unwrap();
        exec(&mut t, "ANALYZE floor_keys").await;
        let (join, _) = timed(exec(
            &mut t,
            "SELECT count(*) FROM dim_customer d WHERE d.is_current \
             AND NOT EXISTS (SELECT 1 FROM floor_keys k WHERE k.customer_id = d.customer_id)",
        ))
        .await;
        runs.push((out, join));
    }
    runs.sort_by(|a, b| (a.0 + a.1).total_cmp(&(b.0 + b.1)));
    runs[1]
}

/// One measurement of the floor: seconds for COPY out, COPY in and CTAS LEAD.
async fn floor_once(source: &str, target: &str) -> (f64, f64, f64) {
    let mut s = connect(source).await;
    let mut t = connect(target).await;
    // The same SELECT dimlog's extract renders for this table.
    let select = "COPY (SELECT customer_id::text, email::text, tier::text, country::text, \
                  (updated_at) \
                  FROM src_customers) TO STDOUT";
    let (secs, chunks) = timed(async {
        let mut stream = s.copy_out_raw(select).await.unwrap();
        let mut chunks = Vec::new();
        while let Some(chunk) = stream.next().await {
            chunks.push(chunk.unwrap());
        }
        chunks
    })
    .await;
    let floor_out = secs;
    exec(
        &mut t,
        "CREATE TEMP TABLE floor_in (customer_id bigint, email text, tier text, country text, updated_at timestamptz)",
    )
    .await;
    let (secs, ()) = timed(async {
        let mut copy = t.copy_in_raw("COPY floor_in FROM STDIN").await.unwrap();
        for chunk in chunks {
            copy.send(chunk).await.unwrap();
        }
        copy.finish().await.unwrap();
    })
    .await;
    let floor_in = secs;
    let (secs, _) = timed(exec(
        &mut t,
        "CREATE TABLE floor_lead AS
         SELECT f.*, LEAD(updated_at) OVER (PARTITION BY customer_id ORDER BY updated_at) AS next_from
         FROM floor_in f",
    ))
    .await;
    exec(&mut t, "DROP TABLE floor_lead; DROP TABLE floor_in").await;
    (floor_out, floor_in, secs)
}

/// The scenarios at `n` rows. With `s2x` (another size's S2x, waiting for its default
/// runs), S2's runs alternate with S2x's, whose median is returned too.
/// With `sqlite` of the same size, its first loads alternate with S1's runs.
async fn pg_for(
    n: u64,
    dir: &Path,
    s2x: Option<&S2x>,
    sqlite: Option<&SqliteBench>,
) -> (Measured, Option<ChildResult>) {
    let source = pg::fresh_database().await;
    let target = pg::fresh_database().await;
    let mut src = connect(&source).await;
    let (gen, _) = timed(generate_source(&mut src, n)).await;
    eprintln!("[{}] source generated in {gen:.1}s", count(n));
    let mut m = Measured::default();
    measure_floor(&source, &target, &mut m).await;
    let config = customer_config(
        dir,
        &format!("pg-{n}.toml"),
        &source,
        &target,
        "src_customers",
        "latest",
    );
    let step = |name: &'static str, r: ChildResult, m: &mut Measured| {
        eprintln!(
            "[{}] {name}: {:.2}s, {:.0} MB peak; {}",
            count(n),
            r.wall,
            r.rss_mb(),
            r.phase_summary()
        );
        m.runs.insert(name, r);
    };
    let s1_jobs = load_twice_dry_then_commit(&config, U1);
    let s1 = match sqlite.filter(|b| b.n == n) {
        Some(b) => {
            let mut results = Vec::new();
            for job in &s1_jobs {
                results.push(run_measured(job, &target).await);
                let first = b.first_load();
                b.first_loads.lock().unwrap().push(first);
            }
            median(results)
        }
        None => median_of(&s1_jobs, &target).await,
    };
    step("S1", s1, &mut m);
    let mut next_id = n + 1;
    apply_change(
        &mut src,
        n,
        &mut next_id,
        (n / 100, n / 1000, n / 2000),
        S2_AT,
        0,
        1,
        true,
    )
    .await;
    step(
        "S2r",
        median_of(&reconciled_dry_run(&config, U2), &target).await,
        &mut m,
    );
    let s2_jobs = load_twice_dry_then_commit(&config, U2);
    let s2x_default = match s2x {
        Some(x) => {
            let x_jobs = load_twice_dry_then_commit(&x.config, U2);
            let (s2, s2x) = alternating_medians((&s2_jobs, &target), (&x_jobs, &x.target)).await;
            step("S2", s2, &mut m);
            Some(s2x)
        }
        None => {
            step("S2", median_of(&s2_jobs, &target).await, &mut m);
            None
        }
    };
    let s3 = run_job(&config, U3, false);
    step("S3", median_of(&[s3.clone(), s3.clone(), s3], &target).await, &mut m);
    // S4: every tenth key updated in S2 moves back 5-14 minutes before its S2 change,
    // with new values: a version between the original and the S2 one, inside the lookback.
    exec(
        &mut src,
        &format!(
            "UPDATE src_customers SET country = 'ZZ',
                    updated_at = timestamptz '{S2_AT}' + interval '45 minutes' + ((customer_id / {}) % 59) * interval '1 second'
             WHERE customer_id <= {n} AND customer_id % {} = 0",
            n / (n / 100),
            n / (n / 1000)
        ),
    )
    .await;
    step("S4", run_child(&run_job(&config, U4, false)), &mut m);
    // Issue 9: 0.05% more hard-deleted (S2's deletes were ignored: deletes.hard is
    // "ignore" by default), reconciled; then verify against the source.
    exec(
        &mut src,
        &format!("DELETE FROM src_customers WHERE customer_id <= {n} AND customer_id % 2000 = 7"),
    )
    .await;
    m.floor_reconcile = reconcile_floor(&source, &target).await;
    step("R", run_child(&run_job(&config, UR, true)), &mut m);
    step(
        "V",
        run_child(&Job::Verify {
            config: config.clone(),
            against_source: true,
        }),
        &mut m,
    );
    step("RB", run_child(&Job::Rebuild { config: config.clone() }), &mut m);
    (m, s2x_default)
}

/// S2x: S2's change size at 1M (10k updated, 1k inserted, 500 deleted, the same pattern
/// and times) on a fresh N-row dimension of its own, first-loaded and nothing else: the
/// state S2 meets at 1M, so S2@1M / S2x@N compares one change on two sizes and nothing
/// else. Its default runs are left to alternate with S2@1M's ([`pg_for`]).
struct S2x {
    config: PathBuf,
    target: String,
    /// The reconciled dry runs' median.
    reconciled: ChildResult,
}

async fn prepare_s2x(n: u64, dir: &Path) -> S2x {
    let source = pg::fresh_database().await;
    let target = pg::fresh_database().await;
    let mut src = connect(&source).await;
    generate_source(&mut src, n).await;
    let config = customer_config(
        dir,
        &format!("pg-{n}-s2x.toml"),
        &source,
        &target,
        "src_customers",
        "latest",
    );
    run_child(&run_job(&config, U1, false));
    let mut next_id = n + 1;
    apply_change(&mut src, n, &mut next_id, (10_000, 1_000, 500), S2_AT, 0, 1, true).await;
    let reconciled = median_of(&reconciled_dry_run(&config, U2), &target).await;
    S2x {
        config,
        target,
        reconciled,
    }
}

/// PostgreSQL's S1 per size, for the SQLite section's ratio (when both sections run).
static PG_S1: std::sync::Mutex<Vec<(u64, f64)>> = std::sync::Mutex::new(Vec::new());

async fn pg_section(rows: &[u64], dir: &Path, sqlite: Option<&SqliteBench>) {
    let mut all: Vec<(u64, Measured)> = Vec::new();
    let has_1m = rows.contains(&1_000_000);
    // S2x at each other size, measured alternately with S2@1M where it was prepared
    // before it, else on its own.
    let mut waiting: Vec<(u64, S2x)> = Vec::new();
    for &n in rows {
        let alternate = (n == 1_000_000).then(|| waiting.first()).flatten();
        let (m, alternated) = pg_for(n, dir, alternate.map(|(_, x)| x), sqlite).await;
        if let (Some(result), Some((small, _))) = (alternated, alternate) {
            let small = *small;
            let x = waiting.remove(0).1;
            let at = all.iter_mut().find(|(k, _)| *k == small).expect("measured");
            at.1.runs.insert("S2xr", x.reconciled);
            at.1.runs.insert("S2x", result);
        }
        if has_1m && n != 1_000_000 {
            waiting.push((n, prepare_s2x(n, dir).await));
        }
        PG_S1.lock().unwrap().push((n, m.runs["S1"].wall));
        all.push((n, m));
    }
    // Sizes after 1M in the list: on their own.
    for (n, x) in waiting {
        let default = median_of(&load_twice_dry_then_commit(&x.config, U2), &x.target).await;
        let at = all.iter_mut().find(|(k, _)| *k == n).expect("measured");
        at.1.runs.insert("S2xr", x.reconciled);
        at.1.runs.insert("S2x", default);
    }
    println!();
    println!("## PostgreSQL: dimlog runs next to the floor (wall seconds; peak RSS of the run's process)");
    println!();
    let mut table = vec![vec![
        "N".to_string(),
        "scenario".into(),
        "seconds".into(),
        "peak RSS MB".into(),
        "where the time goes (s)".into(),
    ]];
    for (n, m) in &all {
        let f = |name: &str, secs: f64, what: &str| {
            vec![count(*n), name.into(), format!("{secs:.2}"), "".into(), what.into()]
        };
        table.push(f(
            "floor: COPY out",
            m.floor_out,
            "COPY (SELECT … same columns as dimlog's extract) TO STDOUT, streamed, discarded",
        ));
        table.push(f(
            "floor: COPY in",
            m.floor_in,
            "COPY … FROM STDIN of those bytes into a TEMP table (not WAL-logged)",
        ));
        table.push(f(
            "floor: CTAS LEAD",
            m.floor_lead,
            "CREATE TABLE AS … LEAD(updated_at) OVER (PARTITION BY customer_id ORDER BY updated_at)",
        ));
        table.push(f("floor: sum", m.floor(), "the three above"));
        table.push(f(
            "floor: count(*)",
            m.floor_count,
            "SELECT count(*) FROM src_customers",
        ));
        let label = |k: &str| match k {
            "S1" => "S1 initial load (median of 3; at the SQLite section's size alternating with its first loads)",
            "S2" => "S2 1%/0.1%/0.05% upd/ins/del (median of 3; at 1M alternating with S2x)",
            "S2r" => "S2r the same, reconciled (median of 3 dry runs)",
            "S2x" => "S2x 10k/1k/500 upd/ins/del (median of 3, alternating with S2@1M)",
            "S2xr" => "S2xr the same, reconciled (median of 3 dry runs)",
            "S3" => "S3 no change (median of 3)",
            "S4" => "S4 late versions (0.1%)",
            "R" => "R reconcile 0.05% deleted",
            "V" => "V verify --against-source",
            "RB" => "RB dimlog rebuild",
            _ => "?",
        };
        for k in ["S1", "S2r", "S2", "S2xr", "S2x", "S3", "S4", "R", "V", "RB"] {
            if let Some(r) = m.runs.get(k) {
                let counts = &r.report;
                let detail = match k {
                    "V" => r.phase_summary(),
                    "RB" => String::new(),
                    _ => format!(
                        "read {}, versions {}, late {}, tombstones {}; {}",
                        counts["rows_read"],
                        counts["versions"],
                        counts["late_versions"],
                        counts["tombstones"],
                        r.phase_summary()
                    ),
                };
                table.push(vec![
                    count(*n),
                    label(k).into(),
                    format!("{:.2}", r.wall),
                    format!("{:.0}", r.rss_mb()),
                    detail,
                ]);
            }
        }
    }
    print_table(&table);
    println!();
    println!("## Targets");
    println!();
    let find = |n: u64| all.iter().find(|(k, _)| *k == n).map(|(_, m)| m);
    let mut targets = vec![vec![
        "target".to_string(),
        "measured".into(),
        "goal".into(),
        "met".into(),
    ]];
    // (A figure shown beside the targets, with no goal of its own, has `-` for `met`.)
    let mut push = |what: String, v: f64, goal: &str, ok: bool, unit: &str| {
        let met = if goal.starts_with('(') {
            "-"
        } else if ok {
            "yes"
        } else {
            "NO"
        };
        targets.push(vec![what, format!("{v:.2}{unit}"), goal.into(), met.into()]);
    };
    if let Some(m) = find(1_000_000) {
        let s1 = m.runs["S1"].wall;
        push(
            "S1@1M / floor@1M".into(),
            s1 / m.floor(),
            "<= 1.5",
            s1 / m.floor() <= 1.5,
            "",
        );
        let s3 = m.runs["S3"].wall;
        push("S3@1M / S1@1M".into(), 100.0 * s3 / s1, "< 5%", s3 / s1 < 0.05, "%");
        push(
            "peak RSS S1@1M".into(),
            m.runs["S1"].rss_mb(),
            "< 100 MB",
            m.runs["S1"].rss_mb() < 100.0,
            " MB",
        );
        let s2 = m.runs["S2"].wall;
        push(
            "S2@1M 10k/1k/500 upd/ins/del (issue 18)".into(),
            s2,
            "<= 0.25 s",
            s2 <= 0.25,
            " s",
        );
        if let Some(small) = find(100_000) {
            let r = m.runs["S2"].wall / small.runs["S2x"].wall;
            push(
                "S2@1M / S2x@100k (same 10k/1k/500 change)".into(),
                r,
                "<= 1.3",
                r <= 1.3,
                "",
            );
            let r2 = m.runs["S2r"].wall / small.runs["S2xr"].wall;
            push(
                "  the same with --reconcile-deletes".into(),
                r2,
                "(no goal: reads every key)",
                r2 <= 1.3,
                "",
            );
        }
        let rr = &m.runs["R"];
        let (keys_out, anti_join) = m.floor_reconcile;
        let r = rr.phase("reconciling") / (keys_out + anti_join);
        push(
            format!("R@1M reconcile phase / (keys COPY out {keys_out:.2} s + anti-join {anti_join:.2} s)"),
            r,
            "<= 2",
            r <= 2.0,
            "",
        );
        push(
            "R@1M reconcile phase / count(*)".into(),
            rr.phase("reconciling") / m.floor_count,
            "(issue 9)",
            true,
            "x",
        );
        let v = &m.runs["V"];
        push(
            "V@1M verify --against-source / count(*)".into(),
            v.wall / m.floor_count,
            "(issue 9)",
            true,
            "x",
        );
    }
    print_table(&targets);
}

/// The SQLite section's source and config, and its first loads when PostgreSQL's S1
/// measured them alternately with its own ([`pg_for`]).
struct SqliteBench {
    n: u64,
    src_path: PathBuf,
    tgt_path: PathBuf,
    config: PathBuf,
    first_loads: std::sync::Mutex<Vec<ChildResult>>,
}

impl SqliteBench {
    /// One first load, into a new file (the last one's stays for S3).
    fn first_load(&self) -> ChildResult {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut path = self.tgt_path.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
        run_child(&run_job(&self.config, U1, false))
    }
}

async fn prepare_sqlite(n: u64, dir: &Path) -> SqliteBench {
    let src_path = dir.join(format!("source-{n}.db"));
    let tgt_path = dir.join(format!("warehouse-{n}.db"));
    let _ = std::fs::remove_file(&src_path);
    let _ = std::fs::remove_file(&tgt_path);
    let (gen, _) = timed(async {
        use sqlx::sqlite::SqliteConnectOptions;
        use sqlx::ConnectOptions;
        let mut c = SqliteConnectOptions::new()
            .filename(&src_path)
            .create_if_missing(true)
            .connect()
            .await
            .unwrap();
        c.execute(sqlx::raw_sql(&format!(
            "CREATE TABLE src_customers (customer_id INTEGER PRIMARY KEY, email TEXT, tier TEXT, country TEXT, updated_at TEXT);
             WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {n})
             INSERT INTO src_customers
             SELECT i, 'user' || i || '@example.com',
                    CASE i % 4 WHEN 0 THEN 'bronze' WHEN 1 THEN 'silver' WHEN 2 THEN 'gold' ELSE 'platinum' END,
                    CASE i % 7 WHEN 0 THEN 'NL' WHEN 1 THEN 'DE' WHEN 2 THEN 'FR' WHEN 3 THEN 'US' WHEN 4 THEN 'GB' WHEN 5 THEN 'JP' ELSE 'BR' END,
                    strftime('%Y-%m-%dT%H:%M:%SZ', 1735689600 + ((i * 37) % {n}) * 10, 'unixepoch')
             FROM c;
             CREATE INDEX src_customers_updated_at ON src_customers (updated_at);"
        )))
        .await
        .unwrap();
    })
    .await;
    eprintln!("[sqlite {}] source generated in {gen:.1}s", count(n));
    let config = customer_config(
        dir,
        "sqlite.toml",
        &format!("sqlite://{}", src_path.display()),
        &format!("sqlite://{}", tgt_path.display()),
        "src_customers",
        "latest",
    );
    SqliteBench {
        n,
        src_path,
        tgt_path,
        config,
        first_loads: std::sync::Mutex::new(Vec::new()),
    }
}

async fn sqlite_section(b: &SqliteBench) {
    let (n, src_path, config) = (b.n, &b.src_path, &b.config);
    // The first load, median of three, each into a new file: measured alternately with
    // PostgreSQL's S1 where that ran at this size, else here.
    let mut first_loads = std::mem::take(&mut *b.first_loads.lock().unwrap());
    let alternated = !first_loads.is_empty();
    if !alternated {
        first_loads = (0..3).map(|_| b.first_load()).collect();
    }
    let r = median(first_loads);
    // A no-change run, medians of three: with the change column's plain index (the window
    // read by a scan), then with the indexes `dimlog doctor` advises (read by index).
    let median3 = |config: &Path| median((0..3).map(|_| run_child(&run_job(config, U3, false))).collect());
    let r3 = median3(config);
    let report = dimlog::Dimension::load(config).expect("the config").doctor().await;
    let advice: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.name == "window read")
        .flat_map(|c| {
            c.detail
                .lines()
                .filter(|l| l.starts_with("CREATE INDEX"))
                .map(str::to_string)
        })
        .collect();
    assert_eq!(advice.len(), 2, "doctor advises two indexes: {report:?}");
    {
        use sqlx::sqlite::SqliteConnectOptions;
        use sqlx::ConnectOptions;
        let mut c = SqliteConnectOptions::new().filename(src_path).connect().await.unwrap();
        for statement in &advice {
            c.execute(sqlx::raw_sql(statement)).await.unwrap();
        }
    }
    let r3i = median3(config);
    println!();
    println!("## SQLite (source and target SQLite files): S1 at {}", count(n));
    println!();
    let mut table = vec![vec![
        "scenario".to_string(),
        "seconds".into(),
        "peak RSS MB".into(),
        "where the time goes (s)".into(),
    ]];
    table.push(vec![
        if alternated {
            "S1 initial load (median of 3, each into a new file, alternating with PostgreSQL's S1)"
        } else {
            "S1 initial load (median of 3, each into a new file)"
        }
        .into(),
        format!("{:.2}", r.wall),
        format!("{:.0}", r.rss_mb()),
        r.phase_summary(),
    ]);
    table.push(vec![
        "S3 no change (median of 3)".into(),
        format!("{:.2}", r3.wall),
        format!("{:.0}", r3.rss_mb()),
        r3.phase_summary(),
    ]);
    table.push(vec![
        "S3 with doctor's indexes (median of 3)".into(),
        format!("{:.2}", r3i.wall),
        format!("{:.0}", r3i.rss_mb()),
        r3i.phase_summary(),
    ]);
    print_table(&table);
    println!();
    println!("SQLite targets (issue 18):");
    println!();
    let mut targets = vec![vec![
        "target".to_string(),
        "measured".into(),
        "goal".into(),
        "met".into(),
    ]];
    targets.push(vec![
        format!("S3@{} with the change column indexed", count(n)),
        format!("{:.3} s", r3i.wall),
        "<= 0.1 s".into(),
        if r3i.wall <= 0.1 { "yes" } else { "NO" }.into(),
    ]);
    let pg_s1 = PG_S1.lock().unwrap().iter().find(|(k, _)| *k == n).map(|(_, w)| *w);
    if let Some(pg_s1) = pg_s1 {
        let ratio = r.wall / pg_s1;
        targets.push(vec![
            format!("S1@{} SQLite / PostgreSQL ({:.2} s)", count(n), pg_s1),
            format!("{ratio:.2}"),
            "<= 2".into(),
            if ratio <= 2.0 { "yes" } else { "NO" }.into(),
        ]);
    }
    print_table(&targets);
    println!();
    println!("S1 phases:");
    println!();
    let mut phases = vec![vec!["phase".to_string(), "seconds".into(), "share".into()]];
    for (name, secs) in &r.phases {
        phases.push(vec![
            name.clone(),
            format!("{secs:.2}"),
            format!("{:.0}%", 100.0 * secs / r.wall),
        ]);
    }
    print_table(&phases);
}

/// Issue 3: a 30-chunk backfill over a landing table (history = "all").
async fn backfill_section(n: u64, dir: &Path) {
    let source = pg::fresh_database().await;
    let target = pg::fresh_database().await;
    let mut src = connect(&source).await;
    let keys = n / 4;
    exec(
        &mut src,
        &format!(
            "CREATE TABLE landing_customers (customer_id bigint, email text, tier text, country text, updated_at timestamptz);
             INSERT INTO landing_customers
             SELECT 1 + i % {keys}, 'user' || (1 + i % {keys}) || '@example.com',
                    'tier' || (i / {keys}), 'NL',
                    timestamptz '2026-01-01 00:00:00+00' + (i::float8 / {n} * 30 * 86400) * interval '1 second'
             FROM generate_series(0, {n} - 1) i;
             CREATE INDEX ON landing_customers (updated_at);
             VACUUM ANALYZE landing_customers;"
        ),
    )
    .await;
    let config = customer_config(dir, "backfill.toml", &source, &target, "landing_customers", "all");
    let r = run_child(&Job::Backfill {
        config,
        from: "2026-01-01T00:00:00Z".into(),
        to: "2026-01-31T00:00:00Z".into(),
        chunk_seconds: 86_400,
    });
    let mut s = connect(&source).await;
    let (out, _) = timed(async {
        let mut stream = s
            .copy_out_raw(
                "COPY (SELECT customer_id::text, email, tier, country, updated_at FROM landing_customers) TO STDOUT",
            )
            .await
            .unwrap();
        while let Some(c) = stream.next().await {
            c.unwrap();
        }
    })
    .await;
    println!();
    println!(
        "## Backfill (issue 3): {} landing rows, {} keys, history = \"all\", 30 chunks of 1 day",
        count(n),
        count(keys)
    );
    println!();
    let mut table = vec![vec![
        "what".to_string(),
        "seconds".into(),
        "peak RSS MB".into(),
        "detail".into(),
    ]];
    table.push(vec![
        "dimlog backfill (30 chunks)".into(),
        format!("{:.2}", r.wall),
        format!("{:.0}", r.rss_mb()),
        format!("{:.2} s per chunk; {}", r.wall / 30.0, r.phase_summary()),
    ]);
    table.push(vec![
        "floor: COPY out of the whole landing table".into(),
        format!("{out:.2}"),
        "".into(),
        "".into(),
    ]);
    print_table(&table);
}
