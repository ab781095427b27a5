//! A lookup-only program needs the target alone (issue 21 item 4): `Index::open` loads
//! the index from the target named by the config, never connecting to the source, so a
//! source URL that points at nothing reachable does not matter (while `Session::open`,
//! made for loads, does connect to it).

use dimlog::config::Backend;
use dimlog::lookup::{Index, UNKNOWN};
use dimlog::pipeline::Session;

use crate::support::fixture::{on_both_backends, ts, Fixture};

async fn index_from_the_target_alone(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) \
         VALUES (42, 'a@x', 'pro', 'FR', '2026-10-01T06:00:00Z')",
    )
    .await;
    fx.run("2026-10-01T08:00:00Z").await;
    let unreachable = match fx.backend {
        Backend::Postgres | Backend::Citus => "postgres://nobody@127.0.0.1:1/nothing?connect_timeout=2".to_string(),
        Backend::Sqlite => format!("sqlite://{}", fx.dir().join("no/such/dir/source.db").display()),
    };
    let old = format!("url = \"{}\"", fx.source_url);
    fx.edit_config(&old, &format!("url = \"{unreachable}\""));
    let plan = fx.plan();
    assert!(
        Session::open(&plan).await.is_err(),
        "a load's session connects to the source, which is not there"
    );
    let index = Index::open(&plan)
        .await
        .unwrap_or_else(|e| panic!("Index::open needs the target alone, but: {e}"));
    assert_eq!(index.len(), 1);
    let sk = index.lookup(&["42"], ts("2026-10-01T07:00:00Z")).expect("one key part");
    assert_ne!(sk, UNKNOWN);
    assert_eq!(index.lookup(&["042"], ts("2026-10-01T07:00:00Z")), Ok(sk));
    assert_eq!(index.lookup(&["42"], ts("2026-10-01T05:00:00Z")), Ok(UNKNOWN));
}

on_both_backends!(index_from_the_target_alone);
