//! The ceiling genied is measured against: a bare axum handler, and a bare SQLite primary-key
//! `SELECT` on the same database file (a cached statement on an r2d2 pool, through
//! `spawn_blocking`, as genied reads), with no auth, envelope or JSON shaping.
//!
//! ```sh
//! cargo run --release --example ceiling -- --listen 127.0.0.1:8090 --db genied-data/genied.db
//! # GET /hello           -> "hello"
//! # GET /select/{id}     -> the lead row with that id as JSON
//! ```

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::get;
use clap::Parser;
use r2d2_sqlite::SqliteConnectionManager;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: String,
    /// A genied database to read leads from.
    #[arg(long)]
    db: std::path::PathBuf,
}

type Pool = Arc<r2d2::Pool<SqliteConnectionManager>>;

async fn select(State(pool): State<Pool>, Path(id): Path<i64>) -> String {
    tokio::task::spawn_blocking(move || {
        let c = pool.get().expect("pooled connection");
        let mut st = c
            .prepare_cached("SELECT id, name, email, status FROM leads WHERE id = ?1")
            .expect("statement");
        st.query_row([id], |r| {
            Ok(serde_json::json!({"id": r.get::<_, i64>(0)?, "name": r.get::<_, Option<String>>(1)?,
                "email": r.get::<_, Option<String>>(2)?, "status": r.get::<_, Option<String>>(3)?})
            .to_string())
        })
        .unwrap_or_else(|_| "null".into())
    })
    .await
    .expect("blocking task")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let manager = SqliteConnectionManager::file(&args.db)
        .with_flags(rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY);
    let pool: Pool = Arc::new(r2d2::Pool::builder().max_size(8).build(manager)?);
    let app = axum::Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route("/select/{id}", get(select))
        .with_state(pool);
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
