//! The command line: `serve`, `migrate` and the operator's `admin` commands. Results go to
//! stdout alone (so scripts can capture them); logs and messages go to stderr, except for
//! `serve`, whose stdout is its log.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::json;

use crate::auth::{passwords, sessions};
use crate::config::{Config, DatabaseUrl, DocumentStoreUrl, S3Credentials};
use crate::db::{self, Db, users::Role};
use crate::document_store::DocumentStore;
use crate::error::ApiError;
use crate::secrets::Secrets;
use crate::service;

#[derive(Parser, Debug)]
#[command(
    name = "genied",
    version,
    about = "Self-hosted platform for managing voice AI agents"
)]
pub struct Cli {
    /// Directory holding the database, documents and secrets.
    #[arg(
        long,
        global = true,
        env = "GENIED_DATA_DIR",
        default_value = "./genied-data"
    )]
    pub data_dir: PathBuf,

    /// Where the records live: `sqlite://` (the default: genied.db in the data directory;
    /// `sqlite:///path` for another file) or `postgres://user:password@host:port/database`
    /// for PostgreSQL, which several instances can share. `serve`, `migrate` and the admin
    /// commands all take it.
    #[arg(
        long,
        global = true,
        env = "GENIED_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<DatabaseUrl>,

    /// Let `admin` commands create the data directory (and an empty database) when there is
    /// none; without it they refuse, so that a command run from the wrong directory cannot
    /// write to a new, empty one. `serve` and `migrate` always create it.
    #[arg(long, global = true, env = "GENIED_CREATE_DATA_DIR")]
    pub create_data_dir: bool,

    /// Log line format.
    #[arg(long, global = true, env = "GENIED_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter: a level, or `target=level` pairs, e.g. `info` or
    /// `genied=debug,tower_http=info`. Defaults to `info` for `serve` and `warn` for the other
    /// commands, whose stderr is for errors.
    #[arg(long, global = true, env = "GENIED_LOG_LEVEL")]
    pub log_level: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line, for log collectors.
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the HTTP service (applies pending migrations first).
    Serve(Box<Config>),
    /// Apply pending migrations and print the applied versions, one a line.
    Migrate,
    /// Operator commands; they work while `serve` runs on the same data directory.
    #[command(subcommand)]
    Admin(AdminCmd),
    /// Internal: extract the text of the file on stdin (the service runs this in a child
    /// process; see `knowledge::extract::sandbox`).
    #[command(name = "extract-worker", hide = true)]
    ExtractWorker {
        /// Name of the uploaded file; its extension picks the format.
        #[arg(long)]
        filename: String,
        /// Address-space limit the child sets on itself, in MiB.
        #[arg(long)]
        memory_mb: u64,
        /// CPU-time limit the child sets on itself, in seconds.
        #[arg(long)]
        cpu_seconds: u64,
    },
    /// Internal: rebuild the documents search index and index its queue (the service runs
    /// this in a child process at a start; see `knowledge::index_build`).
    #[command(name = "index-worker", hide = true)]
    IndexWorker {
        /// The SQLite database file.
        #[arg(long)]
        database: PathBuf,
        /// The index's directory.
        #[arg(long)]
        index: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminCmd {
    /// Create a user; prints `{"id", "email", "role"}`.
    CreateUser {
        /// The new user's email address, unique (case-insensitive).
        #[arg(long, env = "GENIED_EMAIL")]
        email: String,
        /// The user's full name.
        #[arg(long, env = "GENIED_NAME")]
        name: Option<String>,
        /// What the user may do: internal_admin (everything, `adminMode`), standard_user
        /// (their own records), consumer (read-only).
        #[arg(long, env = "GENIED_ROLE", value_enum, default_value_t = Role::StandardUser)]
        role: Role,
        /// Password for `POST /v1/auth/login`; without one the user signs in with tokens
        /// from `issue-token`, single sign-on, or a link from `reset-password`. It must pass
        /// the password policy (see `--password-min-length`).
        #[arg(long, env = "GENIED_PASSWORD", hide_env_values = true)]
        password: Option<String>,
        /// Shortest password accepted (as `serve --password-min-length`).
        #[arg(long, env = "GENIED_PASSWORD_MIN_LENGTH", default_value_t = 12, value_parser = clap::value_parser!(u16).range(8..=128))]
        password_min_length: u16,
    },
    /// Print a one-time link with which a user sets a new password (forgotten password, a
    /// user created without one, the first admin). Earlier links of the user stop working.
    ResetPassword {
        /// Email of the user.
        #[arg(long, env = "GENIED_EMAIL")]
        email: String,
        /// The service's public base URL, which the link starts with (as `serve --public-url`).
        #[arg(
            long,
            env = "GENIED_PUBLIC_URL",
            default_value = "http://127.0.0.1:8080"
        )]
        public_url: String,
        /// Minutes the link stays valid.
        #[arg(long, env = "GENIED_PASSWORD_RESET_TTL_MINUTES", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=10080))]
        ttl_minutes: u64,
        /// Print `{"link", "token", "expires_in_minutes"}` as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
    },
    /// Open a session for a user and print its access token.
    IssueToken {
        /// Email of the user the session is for.
        #[arg(long, env = "GENIED_EMAIL")]
        email: String,
        /// Lifetime of the access token, in seconds.
        #[arg(long, env = "GENIED_TTL_SECONDS", default_value_t = 3600)]
        ttl_seconds: u64,
    },
    /// Create an API key for a user and print the full key (shown only this once).
    CreateKey {
        /// Email of the user who will own the key.
        #[arg(long, env = "GENIED_EMAIL")]
        email: String,
        /// A label for the key, shown in key listings.
        #[arg(long, env = "GENIED_NAME")]
        name: String,
        /// Issue an `svc_admin_` key; the user must be an internal_admin.
        #[arg(long, env = "GENIED_ADMIN")]
        admin: bool,
    },
    /// List users.
    ListUsers {
        /// Print the result as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
    },
    /// List a user's API keys (never the secrets).
    ListKeys {
        /// Email of the user whose keys to list.
        #[arg(long, env = "GENIED_EMAIL")]
        email: String,
        /// Print the result as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
    },
    /// Change a user's role; a running `serve` applies it from its next request on.
    SetRole {
        /// Email of the user to change.
        #[arg(long, env = "GENIED_EMAIL")]
        email: String,
        /// The new role: internal_admin, standard_user or consumer.
        #[arg(long, env = "GENIED_ROLE", value_enum)]
        role: Role,
        /// Print the result as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
    },
    /// Revoke an API key by its id; a running `serve` refuses the key from its next request on.
    RevokeKey {
        /// The key's id (a UUID, from `list-keys`), not the key itself.
        #[arg(long, env = "GENIED_KEY_ID")]
        id: String,
        /// Print the result as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
    },
    /// Check the data directory: database integrity and writability, stuck or dead jobs, a
    /// stalled job worker. Exits 1 when a problem is found.
    Check {
        /// Print the result as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
        /// Seconds after which the job worker of a running `serve` counts as stalled (the
        /// same rule and setting as `serve --job-stall-seconds`).
        #[arg(long, env = "GENIED_JOB_STALL_SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
        job_stall_seconds: u64,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Copy a stopped data directory's storage somewhere else. `--to-database-url
    /// postgres://…` copies every table into an empty PostgreSQL database (its migrations
    /// applied first) in one transaction, then compares each table's row count and checksum
    /// on both sides and sets the sequences; `--to-document-store s3://bucket/prefix` (with
    /// `--s3-endpoint`, `--s3-region` and the AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
    /// environment) copies every document file into an S3-compatible object store, each read
    /// back and checked against its SHA-256 (files already there and intact are not sent
    /// again). Give both to move everything. It switches nothing: start `serve` with the new
    /// storage afterwards. Prints tables, rows, bytes, time, files, missing files and
    /// mismatches; exits 1 when anything is missing or does not match.
    MigrateStorage {
        #[command(flatten)]
        to: MigrateTo,
        /// Endpoint of the target S3-compatible service (as `serve --s3-endpoint`).
        #[arg(long, env = "GENIED_S3_ENDPOINT")]
        s3_endpoint: Option<String>,
        /// Region of the target bucket (as `serve --s3-region`).
        #[arg(long, env = "GENIED_S3_REGION", default_value = "us-east-1")]
        s3_region: String,
        /// Copy nothing: compare an earlier copy's tables with the data directory again
        /// (row counts and checksums), e.g. just before switching over.
        #[arg(long, requires = "to_database_url")]
        verify_only: bool,
        /// Print the result as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
    },
    /// Generate a new credential master key, re-encrypt every stored credential with it in one
    /// transaction, then replace the key file atomically (crash-safe; see docs/api.md).
    RotateMasterKey {
        /// The key file `serve` uses (default `<data-dir>/secrets/master.key`).
        #[arg(long, env = "GENIED_MASTER_KEY_FILE")]
        master_key_file: Option<PathBuf>,
        /// Print the result as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
    },
    /// Rewrite the SQLite database without the space that deleted rows and upgrades left
    /// unused inside it, and give that space back to the disk. With the service stopped:
    /// it holds the write lock throughout, and needs free disk (and temporary space) about
    /// the size of the database. Prints the sizes before and after.
    Vacuum {
        /// Print the result as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
    },
    /// Copy the database to FILE with SQLite's online backup (safe while `serve` runs).
    Backup {
        /// The file to write; must not exist yet.
        #[arg(long, env = "GENIED_OUT")]
        out: PathBuf,
        /// Print the result as JSON.
        #[arg(long, env = "GENIED_JSON")]
        json: bool,
    },
}

/// Where a migration copies to; at least one target is required.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = true)]
pub struct MigrateTo {
    /// The PostgreSQL database to copy the records into:
    /// `postgres://user:password@host:port/database`, empty (or only migrated). Prefer the
    /// environment variable to keep the password off the process list.
    #[arg(long, env = "GENIED_TO_DATABASE_URL", hide_env_values = true)]
    pub to_database_url: Option<String>,
    /// The object store to copy the document files into: `s3://bucket/prefix`.
    #[arg(long)]
    pub to_document_store: Option<DocumentStoreUrl>,
}

/// The document store a command looks at: the one `serve` is configured with (same flags,
/// same environment variables, credentials from the AWS environment).
#[derive(clap::Args, Debug, Clone)]
pub struct StoreArgs {
    /// The document store `serve` uses: `file` or `s3://bucket/prefix` (as `serve
    /// --document-store`).
    #[arg(long, env = "GENIED_DOCUMENT_STORE", default_value = "file")]
    pub document_store: DocumentStoreUrl,
    /// Endpoint of the S3-compatible service (as `serve --s3-endpoint`).
    #[arg(long, env = "GENIED_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// Region of the bucket (as `serve --s3-region`).
    #[arg(long, env = "GENIED_S3_REGION", default_value = "us-east-1")]
    pub s3_region: String,
}

impl StoreArgs {
    fn open(&self, data_dir: &std::path::Path) -> anyhow::Result<DocumentStore> {
        match &self.document_store {
            DocumentStoreUrl::File => Ok(DocumentStore::file(data_dir.join("documents"))),
            url => DocumentStore::s3(
                url,
                self.s3_endpoint.as_deref(),
                &self.s3_region,
                &S3Credentials::from_env(),
            ),
        }
    }
}

fn api(e: ApiError) -> anyhow::Error {
    anyhow::anyhow!("{}", e.message)
}

/// Opens the data directory's database for an admin command. Without `create`, a directory
/// with no database is refused rather than created: run from the wrong place with the default
/// `./genied-data`, a command would otherwise make a new, empty data directory and report
/// success about it.
fn open(data_dir: &std::path::Path, create: bool, url: Option<&DatabaseUrl>) -> anyhow::Result<Db> {
    if let Some(DatabaseUrl::Postgres(u)) = url {
        // The records are elsewhere, but the secrets (token signing key, master key) and
        // the document files are still the data directory's.
        if !create && !data_dir.is_dir() {
            let shown = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
            bail!(
                "no genied data directory at {}; pass --data-dir (or set GENIED_DATA_DIR) to \
                 the directory `genied serve` uses, or add --create-data-dir to create one",
                shown.display()
            );
        }
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("creating {}", data_dir.display()))?;
        return Db::open_postgres(u, Some(2));
    }
    let db = sqlite_path(data_dir, url);
    if !create && !db.is_file() {
        let shown = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
        bail!(
            "no genied data directory at {} (no genied.db there); pass --data-dir (or set \
             GENIED_DATA_DIR) to the directory `genied serve` uses, or add --create-data-dir to \
             create one",
            shown.display()
        );
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    Db::open(&db)
}

fn user_by_email(db: &Db, email: &str) -> anyhow::Result<db::users::User> {
    let e = email.to_string();
    db.read_blocking(move |c| Ok(db::users::by_email(c, &e)?))
        .map_err(api)?
        .with_context(|| format!("no user with email {email}"))
}

fn print(out: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}")?;
    stdout.flush()?;
    Ok(())
}

/// The SQLite file `--database-url` names (as `Config::db_path`).
fn sqlite_path(data_dir: &std::path::Path, url: Option<&DatabaseUrl>) -> PathBuf {
    match url {
        Some(DatabaseUrl::Sqlite(Some(p))) => data_dir.join(p),
        _ => data_dir.join("genied.db"),
    }
}

pub fn migrate(data_dir: &std::path::Path, url: Option<&DatabaseUrl>) -> anyhow::Result<()> {
    let applied = match url {
        Some(DatabaseUrl::Postgres(u)) => Db::migrate_postgres(u)?,
        _ => {
            std::fs::create_dir_all(data_dir)?;
            Db::migrate(&sqlite_path(data_dir, url))?
        }
    };
    for v in applied {
        print(&v.to_string())?;
    }
    Ok(())
}

/// Runs an admin command; `create_data_dir` is `--create-data-dir` (see [`open`]).
pub fn admin(
    data_dir: &std::path::Path,
    create_data_dir: bool,
    database_url: Option<&DatabaseUrl>,
    cmd: AdminCmd,
) -> anyhow::Result<()> {
    let db = open(data_dir, create_data_dir, database_url)?;
    match cmd {
        AdminCmd::CreateUser {
            email,
            name,
            role,
            password,
            password_min_length,
        } => {
            let email = email.trim().to_string();
            if !email.contains('@') || email.len() > 254 {
                bail!("'{email}' is not an email address");
            }
            if let Some(p) = &password {
                let context = [email.as_str(), name.as_deref().unwrap_or("")];
                passwords::check_policy(p, usize::from(password_min_length), &context)
                    .map_err(|why| anyhow::anyhow!("--password: {why}"))?;
            }
            let hash = password.as_deref().map(passwords::hash).transpose()?;
            let e2 = email.clone();
            let user = db
                .write_blocking(move |c| {
                    if db::users::by_email(c, &e2)?.is_some() {
                        return Err(ApiError::conflict(format!(
                            "a user with email {e2} already exists"
                        )));
                    }
                    Ok(db::users::insert(
                        c,
                        &e2,
                        name.as_deref(),
                        role,
                        hash.as_deref(),
                    )?)
                })
                .map_err(api)?;
            print(&json!({"id": user.id, "email": user.email, "role": user.role}).to_string())
        }
        AdminCmd::ResetPassword {
            email,
            public_url,
            ttl_minutes,
            json,
        } => {
            let user = user_by_email(&db, &email)?;
            let uid = user.id.clone();
            let token = db
                .write_blocking(move |c| {
                    let t = service::accounts::create_token(
                        c,
                        &uid,
                        db::accounts::PASSWORD_RESET,
                        None,
                        ttl_minutes,
                    )?;
                    db::activities::insert(
                        c,
                        &db::activities::NewActivity {
                            user_id: &uid,
                            resource: "auth",
                            action: "admin-reset-password",
                            record_id: Some(&uid),
                            summary: "an operator printed a password reset link",
                            ip: None,
                        },
                    )?;
                    Ok(t)
                })
                .map_err(api)?;
            let link = service::accounts::console_link(&public_url, "reset-password", &token);
            if json {
                print(
                    &json!({"link": link, "token": token, "expires_in_minutes": ttl_minutes})
                        .to_string(),
                )
            } else {
                print(&link)
            }
        }
        AdminCmd::IssueToken { email, ttl_seconds } => {
            if ttl_seconds == 0 {
                bail!("--ttl-seconds must be positive");
            }
            let user = user_by_email(&db, &email)?;
            let secrets = Secrets::load_or_create(&data_dir.join("secrets"))?;
            let sid = db::new_id();
            let (s2, u2) = (sid.clone(), user.id.clone());
            db.write_blocking(move |c| Ok(db::sessions::insert(c, &s2, &u2, None, None)?))
                .map_err(api)?;
            print(&sessions::access_token(
                &secrets.jwt_key,
                &user.id,
                &sid,
                user.role,
                ttl_seconds,
            ))
        }
        AdminCmd::CreateKey { email, name, admin } => {
            let user = user_by_email(&db, &email)?;
            if admin && user.role != Role::InternalAdmin {
                bail!(
                    "--admin keys are only for internal_admin users; {email} is {}",
                    user.role.as_str()
                );
            }
            let new =
                service::api_keys::create_blocking(&db, &user.id, &name, admin).map_err(api)?;
            print(&new.secret)
        }
        AdminCmd::ListUsers { json } => {
            let users = db
                .read_blocking(|c| Ok(db::users::list(c, i64::MAX, 0)?))
                .map_err(api)?;
            if json {
                return print(&serde_json::to_string(&users)?);
            }
            print(&format!(
                "{:<36}  {:<15}  {:<32}  NAME",
                "ID", "ROLE", "EMAIL"
            ))?;
            for u in users {
                print(&format!(
                    "{:<36}  {:<15}  {:<32}  {}",
                    u.id,
                    u.role.as_str(),
                    u.email,
                    u.full_name.unwrap_or_default()
                ))?;
            }
            Ok(())
        }
        AdminCmd::ListKeys { email, json } => {
            let e = email.clone();
            let keys = db
                .read_blocking(move |c| Ok(db::api_keys::list_for_user_email(c, &e)?))
                .map_err(api)?;
            if json {
                return print(&serde_json::to_string(&keys)?);
            }
            print(&format!(
                "{:<36}  {:<8}  {:<16}  NAME",
                "ID", "STATUS", "PREFIX"
            ))?;
            for k in keys {
                print(&format!(
                    "{:<36}  {:<8}  {:<16}  {}",
                    k.id, k.status, k.key_prefix, k.name
                ))?;
            }
            Ok(())
        }
        AdminCmd::SetRole { email, role, json } => {
            let user = user_by_email(&db, &email)?;
            let uid = user.id.clone();
            db.write_blocking(move |c| Ok(db::users::set_role(c, &uid, role)?))
                .map_err(api)?;
            if json {
                print(&json!({"id": user.id, "email": user.email, "role": role}).to_string())
            } else {
                print(&format!("{} is now {}", user.email, role.as_str()))
            }
        }
        AdminCmd::RevokeKey { id, json } => {
            let id = uuid::Uuid::parse_str(&id)
                .with_context(|| format!("'{id}' is not a key id (a UUID)"))?
                .to_string();
            let i2 = id.clone();
            let done = db
                .write_blocking(move |c| Ok(db::api_keys::revoke_any(c, &i2)?))
                .map_err(api)?;
            if !done {
                bail!("no active API key with id {id}");
            }
            if json {
                print(&json!({"id": id, "status": "revoked"}).to_string())
            } else {
                print(&format!("revoked {id}"))
            }
        }
        AdminCmd::Check {
            json,
            job_stall_seconds,
            store,
        } => {
            let stall = std::time::Duration::from_secs(job_stall_seconds);
            let report = check(&db, &store.open(data_dir)?, stall)?;
            if json {
                print(&report.to_string())?;
            } else {
                print(&format!(
                    "integrity: {}",
                    report["integrity"].as_str().unwrap_or("?")
                ))?;
                print(&format!(
                    "database writable: {}",
                    report["database_writable"]
                ))?;
                let w = &report["worker"];
                print(&format!(
                    "job worker: {} (last beat {}, oldest due job waiting {} s)",
                    w["state"].as_str().unwrap_or("?"),
                    w["heartbeat_at"].as_str().unwrap_or("never"),
                    w["oldest_due_age_seconds"]
                ))?;
                print(&format!("stuck jobs: {}", report["stuck_jobs"]))?;
                print(&format!(
                    "dead jobs: {} ({} after the service stopped while running them)",
                    report["dead_jobs"], report["crash_dead_jobs"]
                ))?;
                print(&format!(
                    "jobs run again after the service stopped while running them: {}",
                    report["crash_retried_jobs"]
                ))?;
                for j in report["jobs"].as_array().into_iter().flatten() {
                    print(&format!(
                        "  job {} {} {} (attempts {}, service stops {}){}: {}",
                        j["id"],
                        j["kind"].as_str().unwrap_or(""),
                        j["status"].as_str().unwrap_or(""),
                        j["attempts"],
                        j["crash_retries"],
                        j["document_id"]
                            .as_str()
                            .map(|d| format!(" document {d}"))
                            .unwrap_or_default(),
                        j["last_error"].as_str().unwrap_or("")
                    ))?;
                }
                print(&format!(
                    "missing document files: {}",
                    report["missing_files"]
                ))?;
                print(&format!(
                    "orphaned document files: {}",
                    report["orphaned_files"]
                ))?;
            }
            if report["problems"].as_array().is_some_and(|p| !p.is_empty()) {
                bail!("problems found: {}", report["problems"]);
            }
            Ok(())
        }
        AdminCmd::RotateMasterKey {
            master_key_file,
            json,
        } => {
            let path =
                master_key_file.unwrap_or_else(|| data_dir.join("secrets").join("master.key"));
            if !path.exists() {
                bail!(
                    "{} does not exist; start the service once to create it",
                    path.display()
                );
            }
            let n = crate::workers::credentials::rotate_master_key(&db, &path)?;
            if json {
                print(&json!({"key_file": path, "credentials_reencrypted": n}).to_string())
            } else {
                print(&format!(
                    "rotated the master key in {}; re-encrypted {n} credentials",
                    path.display()
                ))
            }
        }
        AdminCmd::MigrateStorage {
            to,
            s3_endpoint,
            s3_region,
            verify_only,
            json,
        } => {
            refuse_while_serving(&db, "the copy must see every record and file")?;
            // Checked by hand, not by clap: clap's error would repeat the value, password
            // and all.
            if let Some(u) = &to.to_database_url
                && !matches!(u.parse::<DatabaseUrl>(), Ok(DatabaseUrl::Postgres(_)))
            {
                bail!(
                    "--to-database-url must be a PostgreSQL URL: \
                     postgres://user:password@host:port/database"
                );
            }
            let mut report = serde_json::Map::new();
            let mut problems = None;
            if let Some(url) = to.to_document_store.as_ref().filter(|_| !verify_only) {
                if *url == DocumentStoreUrl::File {
                    bail!(
                        "--to-document-store must name an object store (s3://bucket/prefix); the files are in the file store already"
                    );
                }
                let target = DocumentStore::s3(
                    url,
                    s3_endpoint.as_deref(),
                    &s3_region,
                    &S3Credentials::from_env(),
                )?;
                let r = migrate_documents(&db, &data_dir.join("documents"), &target)?;
                if !r.missing.is_empty() || !r.mismatches.is_empty() {
                    problems =
                        Some("the copy is incomplete: see the missing and mismatched files above");
                }
                if !json {
                    print(&r.text(&target.describe()))?;
                }
                report.insert("documents".into(), serde_json::to_value(&r)?);
            }
            // Records after files, and not at all when files are missing: records in the
            // new database must never name a file the new store lacks.
            if let Some(url) = to.to_database_url.as_deref().filter(|_| problems.is_none()) {
                drop(db);
                let r = crate::storage_migration::copy_database(
                    &data_dir.join("genied.db"),
                    url,
                    verify_only,
                )?;
                if !r.mismatches.is_empty() {
                    problems =
                        Some("the copy does not match its source: see the mismatched tables above");
                }
                if !json {
                    print(&r.text())?;
                }
                report.insert("database".into(), serde_json::to_value(&r)?);
            }
            if json {
                print(&serde_json::Value::Object(report).to_string())?;
            }
            if let Some(why) = problems {
                bail!("{why}");
            }
            Ok(())
        }
        AdminCmd::Vacuum { json } => {
            refuse_while_serving(&db, "vacuum holds the database's write lock throughout")?;
            let started = std::time::Instant::now();
            let v = db.vacuum()?;
            let seconds = started.elapsed().as_secs_f64();
            if json {
                let mut out = serde_json::to_value(v)?;
                out["seconds"] = json!(seconds);
                print(&out.to_string())
            } else {
                print(&format!(
                    "vacuumed in {seconds:.1} s: {} bytes before ({} of them free pages), {} after",
                    v.bytes_before, v.free_bytes_before, v.bytes_after
                ))
            }
        }
        AdminCmd::Backup { out, json } => {
            if out.exists() {
                bail!("{} already exists; choose a new file", out.display());
            }
            db.backup_to(&out)?;
            let size = std::fs::metadata(&out)?.len();
            if json {
                print(&json!({"out": out, "bytes": size}).to_string())
            } else {
                print(&format!("backed up to {} ({size} bytes)", out.display()))
            }
        }
    }
}

/// Refuses when a `genied serve` runs on this database, by its job worker's heartbeat: a
/// live worker beats every `BEAT_EVERY`, and six missed beats mean a `serve` that was killed
/// rather than stopped (its last beat never says "stopped"). `why` says what needs it stopped.
fn refuse_while_serving(db: &Db, why: &str) -> anyhow::Result<()> {
    let (_, worker, _) = check_health(db, std::time::Duration::from_secs(300))?;
    let beat_age = worker["heartbeat_at"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| chrono::Utc::now() - t.with_timezone(&chrono::Utc));
    let gone = beat_age.is_some_and(|a| {
        a > chrono::Duration::from_std(crate::jobs::BEAT_EVERY * 6).unwrap_or_default()
    });
    if worker["state"] == "running" && !gone {
        bail!(
            "a `genied serve` is running on this data directory (its job worker beat at {}); \
             stop it first ({why})",
            worker["heartbeat_at"].as_str().unwrap_or("?")
        );
    }
    Ok(())
}

/// What `admin check` looks at. A job `running` for over ten minutes belongs to a process that
/// died (a live one finishes or fails its jobs well within that); dead jobs gave up retrying.
/// A job dead because the service stopped every time it ran it (`dispatch::recover`) is a
/// problem: some input kills the process. One run again after such a stop is listed, not a
/// problem (a deploy or an OOM kill of the whole host stops jobs too).
/// Whether the database takes a write (`BEGIN IMMEDIATE` and a commit; it waits out a
/// lock for the busy timeout), and the job worker's state by the rule `/readyz` applies
/// (`jobs::stalled`) on the heartbeat the service records: `running`, `stalled`, `stopped`
/// (the last `serve` stopped cleanly) or `never` (no `serve` ever ran the worker here).
fn check_health(
    db: &Db,
    stall: std::time::Duration,
) -> anyhow::Result<(Option<String>, serde_json::Value, Option<String>)> {
    let writable = db.write_blocking(|_| Ok(())).err().map(|e| e.message);
    let now = chrono::Utc::now();
    let stamp = db::fmt_time(now);
    let (beat, due) = db
        .read_blocking(move |c| {
            Ok((
                db::telemetry::heartbeat(c)?,
                db::telemetry::oldest_due(c, &stamp)?,
            ))
        })
        .map_err(api)?;
    let parse = |t: &str| {
        chrono::DateTime::parse_from_rfc3339(t)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc))
    };
    let due_at = due.as_deref().and_then(parse);
    let age = due_at.map_or(0, |d| (now - d).num_seconds().max(0));
    let (state, stalled) = match &beat {
        None => ("never", None),
        Some(b) if b.stopped => ("stopped", None),
        Some(b) => match crate::jobs::stalled(due_at, parse(&b.beat_at), now, stall) {
            Some(why) => ("stalled", Some(why)),
            None => ("running", None),
        },
    };
    let worker = json!({"state": state, "heartbeat_at": beat.as_ref().map(|b| b.beat_at.clone()),
        "oldest_due_age_seconds": age, "stall_seconds": stall.as_secs()});
    Ok((writable, worker, stalled))
}

/// What `migrate-storage --to-document-store` did.
#[derive(serde::Serialize, Default)]
struct DocumentCopy {
    to: String,
    /// Files the records name.
    files: usize,
    /// Sent to the target and read back intact.
    copied: usize,
    /// Found in the target already, read back intact, not sent again.
    already_present: usize,
    /// Bytes of the files verified in the target (copied or already there).
    bytes: u64,
    /// Hashes of files the records name that are not in the data directory.
    missing: Vec<String>,
    /// Hashes whose bytes (in the data directory, or read back from the target) do not
    /// hash to their name.
    mismatches: Vec<String>,
    /// Files in the data directory no record names (left by a crash; not copied).
    unreferenced_skipped: usize,
}

impl DocumentCopy {
    fn text(&self, to: &str) -> String {
        let mut out = format!(
            "document files: {} named by records; {} copied, {} already in {to}; {} bytes verified by SHA-256\n\
             missing in the data directory: {}\n\
             checksum mismatches: {}\n\
             unreferenced files not copied: {}",
            self.files,
            self.copied,
            self.already_present,
            self.bytes,
            self.missing.len(),
            self.mismatches.len(),
            self.unreferenced_skipped,
        );
        for h in &self.missing {
            out.push_str(&format!("\n  missing {h}"));
        }
        for h in &self.mismatches {
            out.push_str(&format!("\n  mismatch {h}"));
        }
        out.push_str(&format!(
            "\nnothing was switched: start `genied serve --document-store {to}` (with the same \
             --s3-endpoint and --s3-region) to use it"
        ));
        out
    }
}

/// Copies every document file the records name from the file store under `documents_dir`
/// into `target`, checking each by its SHA-256 (its name) before sending and after reading
/// it back.
fn migrate_documents(
    db: &Db,
    documents_dir: &std::path::Path,
    target: &DocumentStore,
) -> anyhow::Result<DocumentCopy> {
    use crate::document_store::ReadError;
    let mut hashes: Vec<String> = db
        .read_blocking(|c| Ok(db::documents::stored_hashes(c)?))
        .map_err(api)?
        .into_iter()
        .collect();
    hashes.sort();
    let source = DocumentStore::file(documents_dir);
    let on_disk = source.list_blocking()?;
    let mut r = DocumentCopy {
        to: target.describe(),
        files: hashes.len(),
        unreferenced_skipped: on_disk
            .iter()
            .filter(|e| !e.temp && hashes.binary_search(&e.name).is_err())
            .count(),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for h in &hashes {
        // Already there and intact: not sent again (a rerun after an interruption is cheap).
        match rt.block_on(target.read(h)) {
            Ok(b) if DocumentStore::hash(&b) == *h => {
                r.already_present += 1;
                r.bytes += b.len() as u64;
                continue;
            }
            Ok(_) | Err(ReadError::Missing) => {}
            Err(ReadError::Unavailable(m)) => bail!("{m} ({})", target.describe()),
        }
        let bytes = match rt.block_on(source.read(h)) {
            Ok(b) => b,
            Err(ReadError::Missing) => {
                r.missing.push(h.clone());
                continue;
            }
            Err(ReadError::Unavailable(m)) => bail!("reading {h}: {m}"),
        };
        if DocumentStore::hash(&bytes) != *h {
            r.mismatches.push(h.clone());
            continue;
        }
        rt.block_on(target.stage(bytes))
            .map_err(|e| anyhow::anyhow!("uploading {h}: {}", e.message))?;
        match rt.block_on(target.read(h)) {
            Ok(b) if DocumentStore::hash(&b) == *h => {
                r.copied += 1;
                r.bytes += b.len() as u64;
            }
            Ok(_) | Err(ReadError::Missing) => r.mismatches.push(h.clone()),
            Err(ReadError::Unavailable(m)) => bail!("{m} ({})", target.describe()),
        }
    }
    Ok(r)
}

fn check(
    db: &Db,
    store: &DocumentStore,
    stall: std::time::Duration,
) -> anyhow::Result<serde_json::Value> {
    let (unwritable, worker, stalled) = check_health(db, stall)?;
    let stale = db::fmt_time(chrono::Utc::now() - chrono::Duration::minutes(10));
    let troubled = db
        .read_blocking(|c| Ok(crate::jobs::troubled(c, 100)?))
        .map_err(api)?;
    let integrity = db
        .read_blocking(|c| Ok(db::health::integrity(c)?))
        .map_err(api)?;
    let db::health::JobCounts {
        stuck,
        dead,
        crash_dead,
        crash_retried,
    } = db
        .read_blocking(move |c| Ok(db::health::job_counts(c, &stale, crate::jobs::CRASHED)?))
        .map_err(api)?;
    let mut problems = Vec::new();
    if let Some(e) = &unwritable {
        problems.push(format!("the database cannot be written: {e}"));
    }
    problems.extend(stalled);
    if integrity != "ok" {
        problems.push(format!("integrity check: {integrity}"));
    }
    if stuck > 0 {
        problems.push(format!("{stuck} jobs stuck in 'running'"));
    }
    if crash_dead > 0 {
        problems.push(format!(
            "{crash_dead} jobs dead after the service stopped every time it ran them"
        ));
    }
    // Document files: every hash a record names must exist; every stored file must be named
    // by a record (a file left by a crash between writing it and committing the record is an
    // orphan; `.tmp-*` files are writes in progress and not counted).
    let referenced = db
        .read_blocking(|c| Ok(db::health::document_hashes(c)?))
        .map_err(api)?;
    let stored = store.list_blocking()?;
    let names: std::collections::HashSet<&str> = stored
        .iter()
        .filter(|e| !e.temp)
        .map(|e| e.name.as_str())
        .collect();
    let mut missing: Vec<&String> = referenced
        .iter()
        .filter(|h| !names.contains(h.as_str()))
        .collect();
    missing.sort();
    let mut orphaned: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !referenced.contains(*n))
        .collect();
    orphaned.sort();
    if !missing.is_empty() {
        problems.push(format!("{} document files missing", missing.len()));
    }
    if !orphaned.is_empty() {
        problems.push(format!("{} orphaned document files", orphaned.len()));
    }
    Ok(
        json!({"integrity": integrity, "database_writable": unwritable.is_none(),
        "worker": worker, "stuck_jobs": stuck, "dead_jobs": dead,
        "crash_dead_jobs": crash_dead, "crash_retried_jobs": crash_retried, "jobs": troubled,
        "missing_files": missing, "orphaned_files": orphaned, "problems": problems}),
    )
}
