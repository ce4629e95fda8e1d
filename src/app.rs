//! The composition root: startup (`build_app`) and the server loop (`serve`), split so that
//! `main`, the tests and the examples start the service the same way. It is the one module
//! that sees every layer; the state it builds lives in `state`, the routes in `http`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

use crate::config::Config;
use crate::db::{self, Db, users::Role};
use crate::events::Bus;
use crate::limits::{ChatLimiter, RateLimits};
use crate::llm::Llm;
use crate::net::Guarded;
use crate::secrets::{self, Secrets};
use crate::voice::DynVoice;
use crate::{auth, dispatch, http};

// Re-exported: the state's old home, still used by tests and examples.
pub use crate::state::{AppInner, AppState};

pub struct App {
    pub state: AppState,
    pub router: Router,
}

/// Prepares the data directory (created if missing), secrets and database (migrated), and
/// builds the router. Nothing listens yet.
pub fn build_app(config: Config) -> anyhow::Result<App> {
    build(config, None)
}

/// `build_app` with another voice provider (tests inject fakes of the voice platform).
pub fn build_app_with_voice(config: Config, voice: DynVoice) -> anyhow::Result<App> {
    build(config, Some(voice))
}

fn build(config: Config, voice: Option<DynVoice>) -> anyhow::Result<App> {
    // Before anything records: the recorder is process-wide, and without it nothing is.
    if config.metrics_listen.is_some() {
        crate::telemetry::prom::install()?;
    }
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data directory {}", config.data_dir.display()))?;
    secrets::ensure_private_dir(&config.data_dir)?;
    std::fs::create_dir_all(config.documents_dir())?;
    let documents = crate::document_store::DocumentStore::open(&config)?;
    let secrets = Secrets::load_or_create(&config.secrets_dir())?;
    let threads = config.read_threads.map(usize::from);
    let db = match config.postgres_url() {
        Some(url) => Db::open_postgres(url, threads.map(|t| t * 2))
            .with_context(|| format!("opening {}", crate::config::DatabaseUrl::redact(url)))?,
        None => Db::open_with(&config.db_path(), threads)
            .with_context(|| format!("opening {}", config.db_path().display()))?,
    };
    let secrets = crate::workers::credentials::apply_master_key(&config, &db, secrets)?;
    let jobs_lease = crate::jobs::Lease::from_config(&config);
    tracing::info!(instance = %jobs_lease.owner, "instance id");
    crate::workers::recover(&db, &config, &jobs_lease.owner)?;
    let recovered = db
        .write_blocking(|c| Ok(dispatch::recover(c, &jobs_lease)?))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if recovered > 0 {
        tracing::warn!(
            count = recovered,
            "requeued jobs left running by a previous process"
        );
    }
    // Document files a crash left without a record (`knowledge::store::Store::sweep`): swept
    // beside the start, as the work grows with the store (and a bucket's listing can take a
    // while); a store that cannot be listed costs a log line.
    let files = crate::knowledge::store::Store::new(documents.clone());
    let sweep = {
        let (db, store) = (db.clone(), documents.describe());
        async move {
            match files.sweep(&db).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    count = n,
                    store = %store,
                    "removed document files no record names (left by a crash)"
                ),
                Err(e) => {
                    tracing::warn!(error = %e.message, store = %store, "could not sweep the document store")
                }
            }
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn(sweep)),
        // Built outside a runtime (no caller does so today): swept here and now.
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(sweep),
    }
    if !documents.is_file() {
        tracing::info!(store = %documents.describe(), "document files are kept in an object store");
    }
    let prices = match &config.llm_prices {
        Some(path) => crate::prices::Prices::load(path)?,
        None => crate::prices::Prices::default(),
    };
    let voice = crate::voice::Voices::from_config(&config, &db, voice)?;
    // Genies stored before provider rows existed are pinned to this start's default
    // provider. It scans every genie (15 ms cold at 10,000), so it runs beside the start
    // rather than before it: until it is done such a genie already answers as the default
    // provider, which is what it gets pinned to, and every genie made since has its row.
    let default_provider = voice.default().name();
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            let db = db.clone();
            rt.spawn_blocking(move || adopt_unassigned(&db, default_provider));
        }
        Err(_) => adopt_unassigned(&db, default_provider),
    }
    // The documents' search index (SQLite only): checked against the database and kept in
    // step by `knowledge::search_index::run` under `serve`. One that cannot be opened costs a
    // log line; FTS5 answers every search then.
    let doc_index = if db.is_postgres() {
        None
    } else {
        match crate::doc_index::DocIndex::open(&config.doc_index_dir()) {
            Ok(ix) => Some(Arc::new(ix)),
            Err(e) => {
                tracing::warn!(error = %e, dir = %config.doc_index_dir().display(), "cannot open the documents search index; full-text search answers from FTS5");
                None
            }
        }
    };
    let state = Arc::new(AppInner {
        doc_index,
        limits: RateLimits::new(&config, db.is_postgres().then(|| db.clone())),
        voice,
        net: Guarded::from_config(&config),
        llm: Llm::from_config(&config).map(|l| l.label_models(prices.models())),
        prices,
        public_chat: ChatLimiter::new(config.public_chat_rate_limit_per_minute),
        workers: crate::worker_pool::Workers::new(
            &config,
            &secrets,
            crate::workers::credentials::key_path(&config),
        ),
        mail: crate::mail::Mailer::from_config(&config, db.clone())?,
        oidc: auth::oidc::Oidc::from_config(&config)?,
        config,
        db,
        secrets,
        bus: Bus::default(),
        jobs_notify: Notify::new(),
        auth_cache: auth::AuthCache::default(),
        worker_beat: crate::jobs::Heartbeat::new(),
        documents,
        tasks: crate::tasks::Tasks::default(),
        jobs_lease,
    });
    let router = http::router(state.clone(), Router::new());
    Ok(App { state, router })
}

/// Serves until `shutdown` resolves, then stops accepting, lets in-flight requests finish,
/// and stops the background tasks. Connections are bounded and timed out as configured
/// (see [`http::server`]).
pub async fn serve(
    app: App,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let metrics = match &app.state.config.metrics_listen {
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (--metrics-listen)"))?;
            tracing::info!(addr = %l.local_addr()?, "serving metrics");
            Some(tokio::spawn(http::prometheus::serve(
                app.state.clone(),
                l,
                stop_rx.clone(),
            )))
        }
        None => None,
    };
    let worker = tokio::spawn(dispatch::worker(app.state.clone(), stop_rx.clone()));
    // Events recorded but not dispatched when the last process stopped (or died) go out now.
    let outbox = tokio::spawn(crate::outbox::run(app.state.clone(), stop_rx.clone()));
    let workers = tokio::spawn(crate::workers::run(app.state.clone(), stop_rx.clone()));
    let indexer = tokio::spawn(crate::service::leads::search_indexer(
        app.state.clone(),
        stop_rx.clone(),
    ));
    let doc_indexer = tokio::spawn(crate::knowledge::search_index::run(
        app.state.clone(),
        stop_rx.clone(),
    ));
    let drift = tokio::spawn(crate::service::drift::run(
        app.state.clone(),
        stop_rx.clone(),
    ));
    let housekeeping = tokio::spawn(housekeeping(app.state.clone(), stop_rx));
    // Account deletes a crash or a stop cut short finish now (on `state.tasks`, which the
    // stop below aborts; the mark they leave resumes them at the next start).
    tokio::spawn(crate::service::accounts::resume_deletes(app.state.clone()));
    if let Some(w) = app.state.config.public_url_warning(listener.local_addr()?) {
        tracing::warn!("{w}");
    }
    tracing::info!(addr = %listener.local_addr()?, "listening");
    let limits = http::server::Limits::from_config(&app.state.config);
    http::server::run(app.router, listener, limits, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = tokio::join!(worker, outbox, housekeeping, indexer, doc_indexer, drift);
    // After the job worker: a tick it was running may have started calls.
    app.state.tasks.abort_all();
    if let Some(m) = metrics {
        let _ = m.await;
    }
    let _ = workers.await;
    Ok(())
}

/// Pins every genie without a provider row to `provider` (see `build`); a failure is
/// logged, and the next start tries again.
fn adopt_unassigned(db: &Db, provider: &'static str) {
    // Looked for on a read connection first: the scan takes milliseconds at 10,000 genies,
    // and on the writer the readiness probe's first write would wait for it.
    match db.read_blocking(|c| Ok(crate::db::genie_providers::any_unassigned(c)?)) {
        Ok(false) => return,
        Ok(true) => {}
        Err(e) => {
            tracing::warn!(error = %e.message, "could not look for genies without a provider row")
        }
    }
    let adopted = db.write_blocking(move |c| {
        Ok(crate::db::genie_providers::adopt_unassigned(
            c,
            provider,
            &crate::db::now(),
        )?)
    });
    match adopted {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            count = n,
            provider,
            "pinned genies without a provider row to the default provider"
        ),
        Err(e) => tracing::warn!(
            error = %e.message,
            "could not pin genies without a provider row (tried again at the next start)"
        ),
    }
}

async fn housekeeping(app: AppState, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(60)) => {
                app.limits.shrink();
                app.limits.prune().await;
                app.public_chat.shrink();
                if let Err(e) = crate::outbox::prune(&app).await {
                    tracing::warn!(error = %e, "pruning dispatched events");
                }
            }
            _ = stop.changed() => return,
        }
    }
}

/// On a database with no user yet, creates an `internal_admin` with a random password and
/// writes how to sign in to a 0600 file under `secrets/`. Returns the text to show the
/// operator, once: where that file is, never the password, which would otherwise live on in
/// logs (journald, container log drivers) readable by more people than the file.
pub fn bootstrap_first_admin(app: &AppState) -> anyhow::Result<Option<String>> {
    bootstrap_first_admin_with(app, FirstAdmin::default())
}

/// The first administrator's password and its hash, made ahead on a thread of its own when
/// the start is on a new SQLite file (which cannot have a user yet): the hash (Argon2, slow
/// on purpose, some 40 ms) then runs while the database is made rather than after it. Later
/// starts make none.
#[derive(Default)]
pub struct FirstAdmin(Option<std::thread::JoinHandle<anyhow::Result<(String, String)>>>);

impl FirstAdmin {
    pub fn hash_early_if_new(config: &Config) -> FirstAdmin {
        let new = config.postgres_url().is_none() && !config.db_path().exists();
        FirstAdmin(new.then(|| std::thread::spawn(first_admin_credentials)))
    }

    fn take(self) -> anyhow::Result<(String, String)> {
        match self.0 {
            Some(early) => early.join().map_err(|_| {
                anyhow::anyhow!("hashing the first administrator's password panicked")
            })?,
            None => first_admin_credentials(),
        }
    }
}

fn first_admin_credentials() -> anyhow::Result<(String, String)> {
    let password = random_password();
    let hash = auth::passwords::hash(&password)?;
    Ok((password, hash))
}

/// [`bootstrap_first_admin`] with the credentials [`FirstAdmin::hash_early_if_new`] began.
pub fn bootstrap_first_admin_with(
    app: &AppState,
    early: FirstAdmin,
) -> anyhow::Result<Option<String>> {
    let any = app
        .db
        .read_blocking(|c| Ok(db::users::any(c)?))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if any {
        return Ok(None);
    }
    let (password, hash) = early.take()?;
    let email = "admin@localhost";
    // Asked again inside the write: instances starting at once on one PostgreSQL database
    // all saw no user above, and their write transactions take turns, so only the first
    // creates the admin and the others start as if they had found it.
    let created = app
        .db
        .write_blocking(|c| {
            if db::users::any(c)? {
                return Ok(false);
            }
            db::users::insert(
                c,
                email,
                Some("Administrator"),
                Role::InternalAdmin,
                Some(&hash),
            )?;
            Ok(true)
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if !created {
        return Ok(None);
    }
    let base = app.config.public_base();
    let text = format!(
        "genied: created the first user, an internal_admin.\n\
         \x20 email:    {email}\n\
         \x20 password: {password}\n\
         Sign in:\n\
         \x20 curl -s {base}/v1/auth/login -H 'content-type: application/json' \\\n\
         \x20   -d '{{\"email\":\"{email}\",\"password\":\"{password}\"}}'\n\
         then send 'Authorization: Bearer <access_token>' with every request.\n\
         Change this password-only account's details with the profiles resource, or make\n\
         more users with 'genied admin create-user'.\n"
    );
    let path = app.config.secrets_dir().join("initial-admin.txt");
    secrets::write_private(&path, text.as_bytes())?;
    Ok(Some(format!(
        "genied: created the first user, an internal_admin ({email}). Its password and how to\n\
         sign in are in {} (readable by this user only): read it with\n\
         \x20 cat {}\n\
         and delete the file once the password is safe elsewhere.\n",
        path.display(),
        path.display()
    )))
}

fn random_password() -> String {
    use rand::Rng;
    rand::thread_rng()
        .sample_iter(rand::distributions::Alphanumeric)
        .take(24)
        .map(char::from)
        .collect()
}
