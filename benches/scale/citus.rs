//! The cost of distribution (issue 16): the same dimension loaded into single-node
//! PostgreSQL and into a Citus cluster (`DIMLOG_TEST_CITUS_URL`, e.g. the three-node
//! loopback cluster of `../shared/citus/cluster.sh`), from one source table on the
//! PostgreSQL server, runs alternating so that noise hits both sides. On one machine's
//! cores Citus cannot be faster than one server; the goals bound what distribution costs:
//! S2 and S3 at most 2x PostgreSQL, S1 at most 2.5x, peak RSS flat.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{count, customer_config, print_table, run_child, run_child_with, ChildResult, Job};
use crate::{apply_change, connect, exec, generate_source, load_twice_dry_then_commit, pg, run_job, vacuum_target};
use crate::{S2_AT, U1, U2, U3};

#[path = "../../tests/support/citus.rs"]
#[allow(dead_code)]
mod cluster;

/// The medians of running `a[i]` and `b[i]` in turn (a, b, a, b, …), vacuuming each
/// target after its dry runs.
async fn alternating(a: &[Job], a_target: &str, b: &[Job], b_target: &str) -> (ChildResult, ChildResult) {
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for (ja, jb) in a.iter().zip(b) {
        for (job, target, out) in [(ja, a_target, &mut ra), (jb, b_target, &mut rb)] {
            out.push(run_child(job));
            if matches!(job, Job::Run { dry_run: true, .. }) {
                vacuum_target(target).await;
            }
        }
    }
    let median = |mut v: Vec<ChildResult>| {
        v.sort_by(|x, y| x.wall.total_cmp(&y.wall));
        v.swap_remove(v.len() / 2)
    };
    (median(ra), median(rb))
}

/// Per statement label: the most tasks (shards) one of its distributed steps ran on, and
/// whether its plan passes rows through the coordinator.
fn tasks_per_statement(plans: &Path) -> BTreeMap<String, (usize, bool)> {
    let mut out = BTreeMap::new();
    let Ok(text) = std::fs::read_to_string(plans) else {
        return out;
    };
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(what), Some(plan)) = (v["what"].as_str(), v["plan"].as_str()) else {
            continue;
        };
        if !plan.contains("Citus Adaptive") {
            continue;
        }
        let tasks = plan
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Task Count: "))
            .filter_map(|n| n.trim().parse::<usize>().ok())
            .max()
            .unwrap_or(0);
        let lower = plan.to_lowercase();
        let through = ["distributed subplan", "pull to coordinator", "repartition"]
            .iter()
            .any(|s| lower.contains(s));
        let e = out.entry(what.to_string()).or_insert((0, false));
        e.0 = e.0.max(tasks);
        e.1 |= through;
    }
    out
}

pub async fn citus_section(rows: &[u64], shards: u32, dir: &Path) {
    let mut table = vec![vec![
        "N".to_string(),
        "scenario".into(),
        "PostgreSQL s".into(),
        "Citus s".into(),
        "ratio".into(),
        "goal".into(),
        "met".into(),
        "RSS MB PG / Citus".into(),
    ]];
    let mut statements = BTreeMap::new();
    for &n in rows {
        let source = pg::fresh_database().await;
        let pg_target = pg::fresh_database().await;
        let lease = cluster::lease().await;
        let coordinator = url::Url::parse(&lease.url).expect("a URL");
        let database = coordinator.path().trim_start_matches('/').to_string();
        {
            let mut admin = coordinator.clone();
            admin.set_path("/postgres");
            let mut c = connect(admin.as_str()).await;
            exec(
                &mut c,
                &format!("ALTER DATABASE {database} SET citus.shard_count = {shards}"),
            )
            .await;
        }
        let mut src = connect(&source).await;
        generate_source(&mut src, n).await;
        eprintln!("[citus {}] source generated", count(n));
        let pg_config = customer_config(
            dir,
            &format!("citus-pg-{n}.toml"),
            &source,
            &pg_target,
            "src_customers",
            "latest",
        );
        let ci_config = customer_config(
            dir,
            &format!("citus-{n}.toml"),
            &source,
            &lease.url,
            "src_customers",
            "latest",
        );
        let mut row = |name: &str, goal: f64, (p, c): (ChildResult, ChildResult)| {
            let ratio = c.wall / p.wall;
            eprintln!(
                "[citus {}] {name}: PostgreSQL {:.2}s, Citus {:.2}s ({ratio:.2}x)",
                count(n),
                p.wall,
                c.wall
            );
            table.push(vec![
                count(n),
                name.into(),
                format!("{:.2}", p.wall),
                format!("{:.2}", c.wall),
                format!("{ratio:.2}x"),
                format!("<= {goal}x"),
                if ratio <= goal { "yes" } else { "NO" }.into(),
                format!("{:.0} / {:.0}", p.rss_mb(), c.rss_mb()),
            ]);
        };
        row(
            "S1 initial load (median of 3)",
            2.5,
            alternating(
                &load_twice_dry_then_commit(&pg_config, U1),
                &pg_target,
                &load_twice_dry_then_commit(&ci_config, U1),
                &lease.url,
            )
            .await,
        );
        let mut next_id = n + 1;
        apply_change(
            &mut src,
            n,
            &mut next_id,
            (n / 100, n / 1000, n / 2000),
            S2_AT,
            0,
            1,
            false,
        )
        .await;
        row(
            "S2 1%/0.1%/0.05% upd/ins/del (median of 3)",
            2.0,
            alternating(
                &load_twice_dry_then_commit(&pg_config, U2),
                &pg_target,
                &load_twice_dry_then_commit(&ci_config, U2),
                &lease.url,
            )
            .await,
        );
        let no_change = |config: &Path| -> Vec<Job> {
            ["00", "05", "10"]
                .iter()
                .map(|m| run_job(config, &U3.replace(":00:00Z", &format!(":{m}:00Z")), false))
                .collect()
        };
        row(
            "S3 no change (median of 3)",
            2.0,
            alternating(&no_change(&pg_config), &pg_target, &no_change(&ci_config), &lease.url).await,
        );
        // Where each statement of a load runs: one more, smaller change (0.1%/0.01%/
        // 0.005%), loaded on Citus with its plans written (not timed: explaining costs a
        // round trip per statement).
        apply_change(
            &mut src,
            n,
            &mut next_id,
            (n / 1000, n / 10_000, n / 20_000),
            "2026-11-02T03:10:00Z",
            3,
            5,
            false,
        )
        .await;
        let plans = dir.join(format!("citus-{n}-plans.jsonl"));
        run_child_with(
            &run_job(&ci_config, "2026-11-02T04:05:00Z", false),
            &[("DIMLOG_EXPLAIN_TO", &plans)],
        );
        statements = tasks_per_statement(&plans);
    }
    println!();
    println!(
        "## Citus: the cost of distribution ({shards} shards per table; wall seconds, medians of 3 alternating runs)"
    );
    println!();
    print_table(&table);
    println!();
    println!("## Citus: where each statement of an incremental load ran (most tasks of one step; shards = {shards})");
    println!();
    let mut rows = vec![vec![
        "statement".to_string(),
        "tasks".into(),
        "rows through the coordinator".into(),
    ]];
    for (what, (tasks, through)) in &statements {
        rows.push(vec![
            what.clone(),
            tasks.to_string(),
            if *through { "yes" } else { "no" }.into(),
        ]);
    }
    print_table(&rows);
}
