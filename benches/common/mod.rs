//! Shared by the benchmarks: running one dimlog operation in a child process (so its
//! peak RSS can be read on its own), timing the pipeline's phases, and printing tables.
//!
//! The bench binary re-executes itself with `DIMLOG_BENCH_JOB` set to a JSON [`Job`]; the
//! child does that one job through the library, then prints one JSON line
//! ([`ChildResult`]) with its wall time, its phases and its `VmHWM` (peak resident set).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use dimlog::backfill::{self, BackfillObserver, BackfillOptions, Selection};
use dimlog::config::{Overrides, Plan};
use dimlog::pipeline::{self, Observer, RunOptions, Session};
use dimlog::state::RunKind;
use dimlog::ts::Micros;
use serde::{Deserialize, Serialize};

/// The environment variable that turns the bench binary into a child.
const JOB_VAR: &str = "DIMLOG_BENCH_JOB";

/// One operation a child performs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "job", rename_all = "kebab-case")]
pub enum Job {
    /// `dimlog run`.
    Run {
        config: PathBuf,
        upper: String,
        reconcile_deletes: bool,
        full_refresh: bool,
        /// Do everything, then roll back (measures a variant on the same state).
        #[serde(default)]
        dry_run: bool,
    },
    /// `dimlog verify [--against-source]`.
    Verify { config: PathBuf, against_source: bool },
    /// `dimlog backfill --from --to --chunk`.
    Backfill {
        config: PathBuf,
        from: String,
        to: String,
        chunk_seconds: i64,
    },
    /// `dimlog rebuild`.
    Rebuild { config: PathBuf },
    /// `dimlog assign-keys`.
    AssignKeys {
        config: PathBuf,
        facts: String,
        key_column: String,
        at_column: String,
        sk_column: String,
    },
}

/// What a child reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChildResult {
    /// Seconds from before connecting to after the operation returned.
    pub wall: f64,
    /// Seconds per phase, in first-seen order (repeated phases are summed).
    pub phases: Vec<(String, f64)>,
    /// Peak resident set size of the child, KiB (`VmHWM`).
    pub peak_rss_kb: u64,
    /// The operation's own report, as JSON.
    pub report: serde_json::Value,
}

impl ChildResult {
    /// Seconds spent in the phases whose name starts with `prefix`.
    pub fn phase(&self, prefix: &str) -> f64 {
        self.phases
            .iter()
            .filter(|(n, _)| n.starts_with(prefix))
            .map(|(_, s)| s)
            .sum()
    }

    /// Peak RSS in MB (10^6 bytes).
    pub fn rss_mb(&self) -> f64 {
        self.peak_rss_kb as f64 * 1024.0 / 1e6
    }

    /// The phases as `name 1.23s, …`, largest first, the small ones left out.
    pub fn phase_summary(&self) -> String {
        let mut p = self.phases.clone();
        p.sort_by(|a, b| b.1.total_cmp(&a.1));
        p.iter()
            .filter(|(_, s)| *s >= 0.005)
            .take(6)
            .map(|(n, s)| format!("{n} {s:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Records the start of each phase the pipeline announces.
pub struct Phases {
    marks: Mutex<Vec<(String, Instant)>>,
}

impl Phases {
    pub fn new(first: &str) -> Phases {
        Phases {
            marks: Mutex::new(vec![(first.to_string(), Instant::now())]),
        }
    }

    pub fn mark(&self, name: &str) {
        self.marks.lock().unwrap().push((name.to_string(), Instant::now()));
    }

    /// Durations per phase name, summed, in first-seen order.
    pub fn finish(&self) -> Vec<(String, f64)> {
        let marks = self.marks.lock().unwrap();
        let end = Instant::now();
        let mut out: Vec<(String, f64)> = Vec::new();
        for (i, (name, start)) in marks.iter().enumerate() {
            let stop = marks.get(i + 1).map_or(end, |m| m.1);
            let secs = stop.duration_since(*start).as_secs_f64();
            match out.iter_mut().find(|(n, _)| n == name) {
                Some((_, s)) => *s += secs,
                None => out.push((name.clone(), secs)),
            }
        }
        out
    }
}

impl Observer for Phases {
    fn phase(&self, name: &str) {
        self.mark(name);
    }
}

impl BackfillObserver for Phases {}

fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn ts(text: &str) -> Micros {
    Micros::parse(text, None).unwrap_or_else(|e| panic!("bad timestamp {text}: {e}"))
}

fn plan(config: &Path) -> Plan {
    Plan::load(config, &Overrides::default()).unwrap_or_else(|e| panic!("config {}: {e}", config.display()))
}

/// If this process is a child, does its job, prints the result and exits.
pub fn child_main_if_requested() {
    let Ok(job) = std::env::var(JOB_VAR) else { return };
    let job: Job = serde_json::from_str(&job).expect("a job as JSON");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let result = runtime.block_on(do_job(job));
    println!("{}", serde_json::to_string(&result).expect("json"));
    std::process::exit(0);
}

async fn do_job(job: Job) -> ChildResult {
    let started = Instant::now();
    let phases = Phases::new("connect");
    let report = match job {
        Job::Run {
            config,
            upper,
            reconcile_deletes,
            full_refresh,
            dry_run,
        } => {
            let plan = plan(&config);
            let mut session = Session::open(&plan).await.expect("open");
            phases.mark("start (lock, init, watermark)");
            let opts = RunOptions {
                kind: if full_refresh {
                    RunKind::FullRefresh
                } else {
                    RunKind::Incremental
                },
                upper: Some(ts(&upper)),
                reconcile_deletes,
                dry_run,
                ..RunOptions::incremental()
            };
            let report = pipeline::run(&mut session, &plan, &opts, &phases)
                .await
                .unwrap_or_else(|e| panic!("run failed: {e}"));
            serde_json::to_value(&report).unwrap()
        }
        Job::Verify { config, against_source } => {
            let plan = plan(&config);
            let mut session = Session::open(&plan).await.expect("open");
            phases.mark("init");
            let report = dimlog::verify::verify(&mut session, &plan, against_source, &phases)
                .await
                .unwrap_or_else(|e| panic!("verify failed: {e}"));
            serde_json::to_value(&report).unwrap()
        }
        Job::Backfill {
            config,
            from,
            to,
            chunk_seconds,
        } => {
            let plan = plan(&config);
            let mut session = Session::open(&plan).await.expect("open");
            phases.mark("start (lock, init, watermark)");
            let opts = BackfillOptions {
                from: ts(&from),
                to: ts(&to),
                chunk_micros: chunk_seconds * 1_000_000,
                selection: Selection::NotCommitted,
                fail_fast: true,
                wait: true,
                failpoint: None,
                interrupt: None,
            };
            let outcomes = backfill::run(&mut session, &plan, &opts, &phases)
                .await
                .unwrap_or_else(|e| panic!("backfill failed: {e}"));
            for o in &outcomes {
                assert_eq!(o.outcome, "committed", "chunk {} {:?}", o.index, o.error);
            }
            serde_json::json!({ "chunks": outcomes.len() })
        }
        Job::Rebuild { config } => {
            let plan = plan(&config);
            let mut session = Session::open(&plan).await.expect("open");
            phases.mark("rebuild");
            pipeline::rebuild_all(&mut session, &plan, true)
                .await
                .unwrap_or_else(|e| panic!("rebuild failed: {e}"));
            serde_json::json!({})
        }
        Job::AssignKeys {
            config,
            facts,
            key_column,
            at_column,
            sk_column,
        } => {
            use dimlog::ident::Ident;
            let plan = plan(&config);
            let mut session = Session::open(&plan).await.expect("open");
            phases.mark("assign");
            let spec = dimlog::lookup::AssignSpec {
                dimension: plan.name.clone(),
                facts: Ident::table(&facts).unwrap(),
                key_columns: vec![Ident::column(&key_column).unwrap()],
                at_column: Ident::column(&at_column).unwrap(),
                sk_column: Ident::column(&sk_column).unwrap(),
                unknown_is_error: false,
                overwrite: false,
                timezone: None,
            };
            let report = dimlog::lookup::assign_keys(&mut session.target, &session.ctx, &spec)
                .await
                .unwrap_or_else(|e| panic!("assign-keys failed: {e}"));
            serde_json::to_value(&report).unwrap()
        }
    };
    let wall = started.elapsed().as_secs_f64();
    ChildResult {
        wall,
        phases: phases.finish(),
        peak_rss_kb: peak_rss_kb(),
        report,
    }
}

/// Runs `job` in a child process and returns what it reported.
pub fn run_child(job: &Job) -> ChildResult {
    run_child_with(job, &[])
}

/// [`run_child`] with environment variables set for the child.
pub fn run_child_with(job: &Job, env: &[(&str, &std::path::Path)]) -> ChildResult {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let output = Command::new(exe)
        .env(JOB_VAR, serde_json::to_string(job).unwrap())
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .expect("start a child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        panic!(
            "child {job:?} failed ({}):\n{}\n{}",
            output.status,
            stdout,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let line = stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("child printed {line:?}: {e}"))
}

/// Seconds `f` took.
pub async fn timed<T>(f: impl std::future::Future<Output = T>) -> (f64, T) {
    let t = Instant::now();
    let v = f.await;
    (t.elapsed().as_secs_f64(), v)
}

/// Prints an aligned table; the first row is the header.
pub fn print_table(rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (k, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i + 1 == r.len() {
                    c.clone()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        println!("| {} |", line.join(" | "));
        if k == 0 {
            let sep: Vec<String> = widths.iter().take(r.len()).map(|w| "-".repeat(*w)).collect();
            println!("|-{}-|", sep.join("-|-"));
        }
    }
}

/// `12345678` as `12.3M`, `100000` as `100k`.
pub fn count(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

/// A config file for a dimension on PostgreSQL or SQLite, written into `dir`.
pub fn write_config(dir: &Path, file: &str, body: &str) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, body).expect("write the config");
    path
}

/// The benchmarks' customer dimension (key `customer_id`, tracking email, tier and
/// country) over `table` of `source`, written to `dir/file`.
pub fn customer_config(dir: &Path, file: &str, source: &str, target: &str, table: &str, history: &str) -> PathBuf {
    write_config(
        dir,
        file,
        &format!(
            r#"name = "customer"

[source]
url = "{source}"
table = "{table}"
key = ["customer_id"]
updated_at = "updated_at"
lookback = "15m"
history = "{history}"

[target]
url = "{target}"
log = "customer_versions"
dimension = "dim_customer"
surrogate_key = "customer_sk"

[track]
columns = ["email", "tier", "country"]
"#
        ),
    )
}
