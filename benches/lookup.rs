//! Surrogate-key lookup at scale (issue 4): `dimlog assign-keys` on 1M staged facts
//! against a 1M-row dimension (~3 versions per key), next to a plain key-only join
//! (the floor), and the in-memory `dimlog::lookup::Index` on one core.
//!
//! ```text
//! cargo bench --bench lookup                      # 1M versions, 1M facts
//! cargo bench --bench lookup -- --versions 1000000 --facts 1000000
//! ```

#[path = "../tests/support/pg.rs"]
mod pg;

mod common;

use common::{count, customer_config, print_table, run_child, timed, Job};
use dimlog::config::{Overrides, Plan};
use dimlog::lookup::Index;
use dimlog::pipeline::Session;
use dimlog::ts::Micros;
use sqlx::{Connection, Executor, PgConnection};
use std::time::Instant;

fn main() {
    common::child_main_if_requested();
    let mut versions: u64 = 1_000_000;
    let mut facts: u64 = 1_000_000;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--versions" => {
                versions = it
                    .next()
                    .and_then(|v| v.replace('_', "").parse().ok())
                    .expect("--versions N")
            }
            "--facts" => {
                facts = it
                    .next()
                    .and_then(|v| v.replace('_', "").parse().ok())
                    .expect("--facts N")
            }
            "--synthetic" => {
                // Only the in-memory index, on generated versions: no database.
                synthetic(versions, facts);
                return;
            }
            "--bench" => {}
            other => panic!("unknown argument {other}; use --versions N --facts N"),
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(bench(versions, facts));
}

/// Runs `;`-separated statements one by one (VACUUM refuses a multi-statement string).
async fn exec(c: &mut PgConnection, sql: &str) {
    for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        c.execute(sqlx::raw_sql(statement))
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

/// The in-memory index alone, on `versions` generated versions (3 per key) and `facts`
/// pseudo-random probes.
fn synthetic(versions: u64, facts: u64) {
    let keys = (versions / 3) as i64;
    let day = 86_400_000_000i64;
    let mut index = Index::default();
    for k in 1..=keys {
        let key = k.to_string();
        for j in 0..3 {
            let from = j * 100 * day + k * 1_000_000;
            let to = if j == 2 {
                dimlog::ts::FAR_FUTURE.0
            } else {
                from + 100 * day
            };
            index.insert(&[&key], Micros(from), Micros(to), k * 3 + j);
        }
    }
    index.seal();
    let probes: Vec<(String, Micros)> = (1..=facts as i64)
        .map(|f| {
            (
                (1 + (f * 7919) % (keys * 102 / 100)).to_string(),
                Micros((f * 104_729) % (330 * day)),
            )
        })
        .collect();
    let rounds = 5;
    let started = Instant::now();
    let mut hits = 0u64;
    for _ in 0..rounds {
        for (k, t) in &probes {
            if std::hint::black_box(index.lookup_joined(std::hint::black_box(k), *t)) != dimlog::lookup::UNKNOWN {
                hits += 1;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "synthetic index: {} versions, {} lookups in {secs:.2}s: {:.1}M lookups/s ({} hits per round)",
        index.len(),
        rounds * probes.len(),
        (rounds * probes.len()) as f64 / secs / 1e6,
        hits / rounds as u64
    );
}

async fn bench(versions: u64, facts: u64) {
    let dir = tempfile::tempdir().unwrap();
    let source = pg::fresh_database().await;
    let target = pg::fresh_database().await;
    let keys = versions / 3;
    let mut src = PgConnection::connect(&source).await.unwrap();
    // A change feed: 3 rows per key, 100 days apart, each with other values.
    exec(
        &mut src,
        &format!(
            "CREATE TABLE src_changes (customer_id bigint, email text, tier text, country text, updated_at timestamptz);
             INSERT INTO src_changes
             SELECT 1 + i % {keys}, 'user' || (1 + i % {keys}) || '@example.com', 'tier' || (i / {keys}), 'NL',
                    timestamptz '2025-01-01 00:00:00+00' + (i / {keys}) * interval '100 days' + (i % {keys}) * interval '1 second'
             FROM generate_series(0, {versions} - 1) i;
             VACUUM ANALYZE src_changes;"
        ),
    )
    .await;
    let config = customer_config(dir.path(), "lookup.toml", &source, &target, "src_changes", "all");
    let load = run_child(&Job::Run {
        config: config.clone(),
        upper: "2026-11-01T00:00:00Z".into(),
        reconcile_deletes: false,
        full_refresh: false,
        dry_run: false,
    });
    eprintln!("dimension loaded in {:.1}s: {}", load.wall, load.report["versions"]);

    // Facts: keys 1..1.02×keys (2% unknown), times over the dimension's 300-day span
    // and a little before it (those get the unknown member).
    let mut tgt = PgConnection::connect(&target).await.unwrap();
    let span = 330 * 86_400;
    exec(
        &mut tgt,
        &format!(
            "CREATE TABLE facts_a (fact_id bigint, customer_id bigint, sold_at timestamptz);
             INSERT INTO facts_a
             SELECT f, 1 + (f * 7919) % ({keys} * 102 / 100),
                    timestamptz '2024-12-01 00:00:00+00' + ((f * 104729) % {span}) * interval '1 second'
             FROM generate_series(1::bigint, {facts}) f;
             CREATE TABLE facts_f AS SELECT * FROM facts_a;
             ALTER TABLE facts_f ADD COLUMN sk bigint;
             VACUUM ANALYZE facts_a; VACUUM ANALYZE facts_f; VACUUM ANALYZE dim_customer;"
        ),
    )
    .await;
    let (floor, _) = timed(exec(
        &mut tgt,
        "UPDATE facts_f f SET sk = d.customer_sk FROM dim_customer d WHERE d.customer_id = f.customer_id AND d.is_current",
    ))
    .await;
    let assign_job = Job::AssignKeys {
        config: config.clone(),
        facts: "facts_a".into(),
        key_column: "customer_id".into(),
        at_column: "sold_at".into(),
        sk_column: "customer_sk".into(),
    };
    let assign = run_child(&assign_job);
    let again = run_child(&assign_job);

    // The in-memory index, on this process's one thread.
    let plan = Plan::load(&config, &Overrides::default()).unwrap();
    let mut session = Session::open(&plan).await.unwrap();
    let (load_secs, index) = timed(Index::load(&mut session.target, &session.ctx)).await;
    let index = index.unwrap();
    let probes: Vec<(String, Micros)> = sqlx::query_as::<_, (i64, i64)>(
        "SELECT customer_id, (extract(epoch FROM sold_at) * 1000000)::bigint FROM facts_a ORDER BY fact_id",
    )
    .fetch_all(&mut tgt)
    .await
    .unwrap()
    .into_iter()
    .map(|(k, t)| (k.to_string(), Micros(t)))
    .collect();
    let rounds = 5;
    let started = Instant::now();
    let mut hits = 0u64;
    for _ in 0..rounds {
        for (k, t) in &probes {
            if std::hint::black_box(index.lookup_joined(std::hint::black_box(k), *t)) != dimlog::lookup::UNKNOWN {
                hits += 1;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let per_sec = (rounds * probes.len()) as f64 / secs;
    // The same lookups agree with assign-keys.
    let assigned: Vec<i64> = sqlx::query_scalar("SELECT customer_sk FROM facts_a ORDER BY fact_id")
        .fetch_all(&mut tgt)
        .await
        .unwrap();
    let disagree = probes
        .iter()
        .zip(&assigned)
        .filter(|((k, t), sk)| index.lookup_joined(k, *t) != **sk)
        .count();

    println!("# dimlog lookup benchmark");
    println!(
        "dimension: {} versions, {} keys; facts: {} ({} matched, {} unknown)",
        count(versions),
        count(keys),
        count(facts),
        assign.report["facts_matched"],
        assign.report["facts_unknown"]
    );
    println!();
    let mut table = vec![vec![
        "what".to_string(),
        "seconds".into(),
        "peak RSS MB".into(),
        "note".into(),
    ]];
    table.push(vec![
        "floor: UPDATE … FROM dim d WHERE key = key AND d.is_current".into(),
        format!("{floor:.2}"),
        "".into(),
        "join on the key alone".into(),
    ]);
    table.push(vec![
        "dimlog assign-keys (fresh column)".into(),
        format!("{:.2}", assign.wall),
        format!("{:.0}", assign.rss_mb()),
        format!("{:.2}x floor (goal <= 3x)", assign.wall / floor),
    ]);
    table.push(vec![
        "dimlog assign-keys again (nothing changes)".into(),
        format!("{:.2}", again.wall),
        format!("{:.0}", again.rss_mb()),
        "".into(),
    ]);
    table.push(vec![
        "Index::load".into(),
        format!("{load_secs:.2}"),
        "".into(),
        format!("{} versions", index.len()),
    ]);
    table.push(vec![
        format!("Index lookups, one core ({} lookups)", rounds * probes.len()),
        format!("{secs:.2}"),
        "".into(),
        format!(
            "{:.1}M lookups/s (goal >= 5M/s); {} hits; {} disagreements with assign-keys",
            per_sec / 1e6,
            hits / rounds as u64,
            disagree
        ),
    ]);
    print_table(&table);
}
