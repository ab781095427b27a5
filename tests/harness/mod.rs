//! Smoke tests for the PostgreSQL test harness itself: if these fail, every other
//! postgres test fails for the same reason, so they say so first.

use sqlx::{Connection as _, Executor as _, PgConnection};

use crate::support::pg;

async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url)
        .await
        .unwrap_or_else(|err| panic!("could not connect to {url}: {err}"))
}

#[tokio::test]
async fn fresh_databases_are_distinct_empty_and_usable() {
    let (a, b) = tokio::join!(pg::fresh_database(), pg::fresh_database());
    assert_ne!(a, b);

    for url in [&a, &b] {
        let mut conn = connect(url).await;
        let one: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&mut conn)
            .await
            .expect("select 1");
        assert_eq!(one, 1);

        let name: String = sqlx::query_scalar("SELECT current_database()")
            .fetch_one(&mut conn)
            .await
            .expect("current_database()");
        assert!(url.ends_with(&format!("/{name}")), "{url} is not {name}");

        let tables: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_tables \
             WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
        )
        .fetch_one(&mut conn)
        .await
        .expect("count tables");
        assert_eq!(tables, 0, "{url} is not empty");
        conn.close().await.expect("close");
    }
}

#[tokio::test]
async fn fresh_databases_do_not_share_tables() {
    let a = pg::fresh_database().await;
    let b = pg::fresh_database().await;

    let mut conn_a = connect(&a).await;
    conn_a
        .execute("CREATE TABLE only_in_a (id int)")
        .await
        .expect("create table");

    let mut conn_b = connect(&b).await;
    let visible: Option<String> = sqlx::query_scalar("SELECT to_regclass('only_in_a')::text")
        .fetch_one(&mut conn_b)
        .await
        .expect("to_regclass");
    assert_eq!(visible, None);
}

#[test]
fn the_server_is_shared_by_the_process() {
    assert_eq!(pg::server_url(), pg::server_url());
}
