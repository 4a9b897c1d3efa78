//! The two migration sets must define the same tables and columns.

use std::collections::BTreeSet;

use latch::store::Db;
use sqlx::Row;

use crate::harness::{create_pg_database, drop_pg_database};

async fn columns(db: &Db, sql: &str) -> BTreeSet<(String, String)> {
    let mut c = db.conn().await.unwrap();
    let rows = sqlx::query(sql).fetch_all(&mut *c).await.unwrap();
    rows.iter()
        .map(|r| (r.get::<String, _>(0), r.get::<String, _>(1)))
        .filter(|(t, _)| !t.starts_with("_sqlx") && !t.starts_with("sqlite_"))
        .collect()
}

#[tokio::test]
async fn both_migration_sets_define_the_same_tables_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Db::connect(&format!("sqlite://{}/s.db", dir.path().display()), 1).await.unwrap();
    sqlite.migrate().await.unwrap();
    let (url, name) = create_pg_database().await;
    let pg = Db::connect(&url, 1).await.unwrap();
    pg.migrate().await.unwrap();

    let lite = columns(
        &sqlite,
        "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p WHERE m.type = 'table'",
    )
    .await;
    let post = columns(
        &pg,
        "SELECT table_name::text, column_name::text FROM information_schema.columns WHERE table_schema = 'public'",
    )
    .await;
    pg.close().await;
    drop_pg_database(&name).await;

    assert!(lite.len() > 50, "the schema has its tables: {lite:?}");
    let only_lite: Vec<_> = lite.difference(&post).collect();
    let only_pg: Vec<_> = post.difference(&lite).collect();
    assert!(
        only_lite.is_empty() && only_pg.is_empty(),
        "only in SQLite: {only_lite:?}; only in PostgreSQL: {only_pg:?}"
    );
    // Migrating again is a no-op.
    sqlite.migrate().await.unwrap();
    assert!(sqlite.is_ready().await);
}

/// A rolling upgrade or a rollback: a newer build applied a migration this one does not know.
/// This build still migrates (nothing to do), is ready and serves, on both stores.
#[tokio::test]
async fn a_migration_of_a_newer_build_keeps_an_older_one_starting() {
    let dir = tempfile::tempdir().unwrap();
    let (url, name) = create_pg_database().await;
    for url in [format!("sqlite://{}/s.db", dir.path().display()), url] {
        let db = Db::connect(&url, 1).await.unwrap();
        db.migrate().await.unwrap();
        let mut c = db.conn().await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(99_990_101_i64)
        .bind("of a newer build")
        .bind(true)
        .bind(vec![0u8; 48])
        .bind(0_i64)
        .execute(&mut *c)
        .await
        .unwrap();
        drop(c);
        db.migrate().await.expect("a migration this build does not know is no error");
        assert!(db.is_ready().await);
        db.close().await;
    }
    drop_pg_database(&name).await;
}
