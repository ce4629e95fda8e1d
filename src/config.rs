//! Runtime configuration: one struct, built once from flags (each flag also reads
//! `GENIED_<FLAG>`), passed down through `AppState`. Secrets are redacted in `Debug`.

use std::path::PathBuf;

use clap::Args;

/// A configuration value that must never reach a log line.
#[derive(Clone, Default)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "\"\""
        } else {
            "\"<redacted>\""
        })
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}

/// Where the records live (`--database-url`): SQLite (the default, `genied.db` in the data
/// directory, or `sqlite:///absolute/path`) or PostgreSQL (`postgres://user:password@host/db`).
/// The password never reaches `Debug`, logs or errors.
#[derive(Clone, PartialEq)]
pub enum DatabaseUrl {
    Sqlite(Option<PathBuf>),
    Postgres(String),
}

impl std::str::FromStr for DatabaseUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(rest) = s.strip_prefix("sqlite://") {
            return Ok(DatabaseUrl::Sqlite(
                (!rest.is_empty()).then(|| PathBuf::from(rest)),
            ));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(DatabaseUrl::Postgres(s.to_string()));
        }
        Err("expected sqlite://[path] or postgres://user:password@host[:port]/database".into())
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DatabaseUrl::Sqlite(None) => f.write_str("sqlite://"),
            DatabaseUrl::Sqlite(Some(p)) => write!(f, "sqlite://{}", p.display()),
            DatabaseUrl::Postgres(u) => f.write_str(&DatabaseUrl::redact(u)),
        }
    }
}

impl DatabaseUrl {
    /// A PostgreSQL URL with its password (if any) replaced by `***`.
    pub fn redact(u: &str) -> String {
        match url::Url::parse(u) {
            Ok(mut parsed) if parsed.password().is_some() => {
                let _ = parsed.set_password(Some("***"));
                parsed.to_string()
            }
            Ok(parsed) => parsed.to_string(),
            Err(_) => "postgres://<unparsable>".into(),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct Config {
    /// Where the records live (the global `--database-url`, which `migrate` and the admin
    /// commands take too).
    #[arg(skip)]
    pub database_url: Option<DatabaseUrl>,

    /// Directory holding the database, the document store and the secrets.
    #[arg(skip)]
    pub data_dir: PathBuf,

    /// Address to listen on.
    #[arg(long, env = "GENIED_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,

    /// Public base URL of this service, used in links (genie pages, QR codes). Defaults to
    /// `http://<listen>`.
    #[arg(long, env = "GENIED_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Requests a minute allowed per API key; 0 turns the limit off.
    #[arg(long, env = "GENIED_RATE_LIMIT_PER_MINUTE", default_value_t = 60)]
    pub rate_limit_per_minute: u32,

    /// Requests a minute allowed per user signed in with a session token; 0 turns it off.
    #[arg(
        long,
        env = "GENIED_SESSION_RATE_LIMIT_PER_MINUTE",
        default_value_t = 6000
    )]
    pub session_rate_limit_per_minute: u32,

    /// Sign-in attempts a minute allowed per client address; 0 turns it off.
    #[arg(long, env = "GENIED_LOGIN_RATE_LIMIT_PER_MINUTE", default_value_t = 30)]
    pub login_rate_limit_per_minute: u32,

    /// Largest accepted request body, in bytes.
    #[arg(long, env = "GENIED_MAX_BODY_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Seconds after which a request is answered with 408.
    #[arg(long, env = "GENIED_REQUEST_TIMEOUT_SECONDS", default_value_t = 60)]
    pub request_timeout_seconds: u64,

    /// Client connections served at once; further connections wait in the listen backlog
    /// until one closes. Unset: the open-file limit (which the service raises to its hard
    /// limit at start) less 256 descriptors for the database, files and outbound requests
    /// (half of it when the limit is small), at most 65536.
    #[arg(long, env = "GENIED_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,

    /// Seconds a client has, from the first byte of a request, to send the whole request
    /// head (request line and headers); a connection that takes longer is closed.
    #[arg(long, env = "GENIED_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_seconds: u64,

    /// Seconds a connection may stay open with no request running and no bytes moving:
    /// before its first request, between keep-alive requests, or while a response waits
    /// for the client to read it. Then it is closed.
    #[arg(long, env = "GENIED_IDLE_TIMEOUT_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_seconds: u64,

    /// Lifetime of access tokens, in seconds.
    #[arg(long, env = "GENIED_SESSION_TTL_SECONDS", default_value_t = 3600)]
    pub session_ttl_seconds: u64,

    /// Lifetime of refresh tokens, in seconds.
    #[arg(long, env = "GENIED_REFRESH_TTL_SECONDS", default_value_t = 30 * 24 * 3600)]
    pub refresh_ttl_seconds: u64,

    /// How often the job worker looks for due jobs, in milliseconds (it is also woken on
    /// every enqueue).
    #[arg(long, env = "GENIED_JOB_POLL_MS", default_value_t = 1000)]
    pub job_poll_ms: u64,

    /// Seconds after which the job worker counts as stalled: a job has been due that long
    /// and the worker has not looked for work or finished a job for that long either. A
    /// stalled worker makes `/readyz` answer 503 (and `admin check` report it). Keep it
    /// above the longest a single job may run (e.g. --extract-timeout-seconds).
    #[arg(long, env = "GENIED_JOB_STALL_SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub job_stall_seconds: u64,

    /// Seconds a claimed job is held by the instance running it; renewed every third of it
    /// while the job runs. When several instances share a PostgreSQL database, a job whose
    /// instance died is taken over by another once its lease has run out (counted as a crash
    /// retry). With SQLite (one instance) jobs left running are taken back at start.
    #[arg(long, env = "GENIED_JOB_LEASE_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub job_lease_seconds: u64,

    /// This instance's name in the jobs it claims (`jobs.owner`) and in its logs. Unset: the
    /// host name, the process id and a random suffix, new at every start. Give each instance
    /// sharing a database its own.
    #[arg(long, env = "GENIED_INSTANCE_ID")]
    pub instance_id: Option<String>,

    /// Base of the retry backoff for background jobs, in milliseconds: the n-th retry waits
    /// base × 2^n, at most an hour.
    #[arg(long, env = "GENIED_JOB_BACKOFF_BASE_MS", default_value_t = 1000)]
    pub job_backoff_base_ms: u64,

    /// Threads that run database reads (each with its own read connection). Unset: one per
    /// CPU, at least 2 and at most 8. More threads than cores only adds wake-ups: a few
    /// busy threads draining a queue of reads beat dozens woken one request at a time.
    #[arg(long, env = "GENIED_READ_THREADS", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub read_threads: Option<u16>,

    /// Seconds a webhook receiver has to answer one delivery.
    #[arg(long, env = "GENIED_WEBHOOK_TIMEOUT_SECONDS", default_value_t = 10)]
    pub webhook_timeout_seconds: u64,

    /// Attempts per webhook delivery before it counts as failed (and the endpoint is
    /// disabled); with the default backoff, 12 attempts span about three hours.
    #[arg(long, env = "GENIED_WEBHOOK_MAX_ATTEMPTS", default_value_t = 12)]
    pub webhook_max_attempts: i64,

    /// Base URL of an OpenAI-compatible API (e.g. `http://127.0.0.1:11434/v1`); the
    /// service calls `{base}/chat/completions`. Without it, LLM features say how to enable them.
    #[arg(long, env = "GENIED_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,

    /// Bearer key for the LLM endpoint.
    #[arg(long, env = "GENIED_LLM_API_KEY", hide_env_values = true)]
    pub llm_api_key: Option<Secret>,

    /// Model used when a genie or worker does not name one.
    #[arg(long, env = "GENIED_LLM_MODEL", default_value = "gpt-4o-mini")]
    pub llm_model: String,

    /// JSON file of LLM prices per model, per million tokens:
    /// `{"currency": "USD", "models": {"<model>": {"input_per_million": 0.15,
    /// "output_per_million": 0.6}}}`. Conversations record an estimated cost for models it
    /// names; none is built in. Its models also become `model` label values of the metrics.
    #[arg(long, env = "GENIED_LLM_PRICES")]
    pub llm_prices: Option<PathBuf>,

    /// Seconds one LLM call may take.
    #[arg(long, env = "GENIED_LLM_TIMEOUT_SECONDS", default_value_t = 60)]
    pub llm_timeout_seconds: u64,

    /// Seconds without a message after which a web conversation of a genie's page ends
    /// (it then gets its duration, analysis, `conversation.completed` and report).
    #[arg(long, env = "GENIED_CONVERSATION_IDLE_TIMEOUT_SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub conversation_idle_timeout_seconds: u64,

    /// Allow outbound requests to loopback and private addresses. For tests and closed
    /// networks only: it disables the SSRF guard.
    #[arg(long, env = "GENIED_ALLOW_PRIVATE_OUTBOUND", default_value_t = false)]
    pub allow_private_outbound: bool,

    /// Nameserver (`ip:port`, asked over UDP and TCP) that resolves the hosts of user-supplied
    /// URLs (website import, webhooks, worker `web_fetch`), e.g. a split-horizon resolver;
    /// default: the system's resolver configuration. Answers still pass the SSRF guard.
    #[arg(long, env = "GENIED_DNS_SERVER")]
    pub dns_server: Option<std::net::SocketAddr>,

    /// Messages a minute one client address may send to public genie page chats; 0 turns
    /// the limit off.
    #[arg(
        long,
        env = "GENIED_PUBLIC_CHAT_RATE_LIMIT_PER_MINUTE",
        default_value_t = 20
    )]
    pub public_chat_rate_limit_per_minute: u32,

    /// Hours a team or account invitation stays valid.
    #[arg(long, env = "GENIED_TEAM_INVITE_TTL_HOURS", default_value_t = 168)]
    pub team_invite_ttl_hours: u64,

    /// Seconds `users delete` waits for the account's records to go before it answers 202
    /// with the delete still running (`users get` then says `deleting` until it is done);
    /// at most half of `--request-timeout-seconds`. 0 answers at once.
    #[arg(long, env = "GENIED_ACCOUNT_DELETE_WAIT_SECONDS", default_value_t = 10)]
    pub account_delete_wait_seconds: u64,

    /// Largest accepted document upload (decoded file or typed text), in bytes; the
    /// multipart route `POST /v1/knowledge-base/upload` accepts up to this much.
    #[arg(long, env = "GENIED_MAX_UPLOAD_BYTES", default_value_t = 50 * 1024 * 1024)]
    pub max_upload_bytes: usize,

    /// Where YouTube transcripts are fetched from; `{video_id}` is replaced by the video id.
    /// The answer must be timed-text XML (`<transcript><text>…</text></transcript>`).
    #[arg(
        long,
        env = "GENIED_YOUTUBE_TRANSCRIPT_URL",
        default_value = "https://www.youtube.com/api/timedtext?lang=en&v={video_id}"
    )]
    pub youtube_transcript_url: String,

    /// Seconds the text extraction of one uploaded file may take; past it the extraction
    /// process is killed and the document fails.
    #[arg(long, env = "GENIED_EXTRACT_TIMEOUT_SECONDS", default_value_t = 120)]
    pub extract_timeout_seconds: u64,

    /// Memory (address space, MiB) the extraction process of one uploaded file may use;
    /// a file that needs more fails.
    #[arg(long, env = "GENIED_EXTRACT_MEMORY_MB", default_value_t = 2048)]
    pub extract_memory_mb: u64,

    /// The genied executable run as the extraction process (`<exe> extract-worker`).
    /// `serve` uses its own binary when unset; set it only when genied runs embedded in
    /// another program.
    #[arg(long, env = "GENIED_EXTRACT_EXE")]
    pub extract_exe: Option<PathBuf>,

    /// The genied executable run to rebuild the documents search index at a start
    /// (`<exe> index-worker`, SQLite only), so the build's memory is not the server's.
    /// `serve` uses its own binary when unset; set it only when genied runs embedded in
    /// another program.
    #[arg(long, env = "GENIED_INDEX_EXE")]
    pub index_exe: Option<PathBuf>,

    /// Voice-agent platform genies are provisioned in: `local` (embedded, no external
    /// service), `elevenlabs` (needs --elevenlabs-api-key), `vapi` (needs --vapi-api-key) or
    /// `retell` (needs --retell-api-key).
    #[arg(long, env = "GENIED_VOICE_PROVIDER", default_value = "local", value_parser = ["local", "elevenlabs", "vapi", "retell"])]
    pub voice_provider: String,

    /// API key of the ElevenLabs account (sent as `xi-api-key`); required with `--voice-provider elevenlabs`.
    #[arg(long, env = "GENIED_ELEVENLABS_API_KEY", hide_env_values = true)]
    pub elevenlabs_api_key: Option<Secret>,

    /// Base URL of the ElevenLabs API (regional endpoints exist).
    #[arg(
        long,
        env = "GENIED_ELEVENLABS_BASE_URL",
        default_value = "https://api.elevenlabs.io"
    )]
    pub elevenlabs_base_url: String,

    /// Secret of the ElevenLabs post-call webhook; enables `POST /v1/hooks/elevenlabs`.
    #[arg(long, env = "GENIED_ELEVENLABS_WEBHOOK_SECRET", hide_env_values = true)]
    pub elevenlabs_webhook_secret: Option<Secret>,

    /// Private API key of the Vapi organization (sent as `Authorization: Bearer`); required
    /// with `--voice-provider vapi`.
    #[arg(long, env = "GENIED_VAPI_API_KEY", hide_env_values = true)]
    pub vapi_api_key: Option<Secret>,

    /// Base URL of the Vapi API.
    #[arg(
        long,
        env = "GENIED_VAPI_BASE_URL",
        default_value = "https://api.vapi.ai"
    )]
    pub vapi_base_url: String,

    /// Shared secret Vapi sends back as `X-Vapi-Secret` on its server-URL events; enables
    /// `POST /v1/hooks/vapi` and is set on every assistant genied provisions (with --public-url).
    #[arg(long, env = "GENIED_VAPI_WEBHOOK_SECRET", hide_env_values = true)]
    pub vapi_webhook_secret: Option<Secret>,

    /// API key of the Retell AI account (sent as `Authorization: Bearer`); required with
    /// `--voice-provider retell`.
    #[arg(long, env = "GENIED_RETELL_API_KEY", hide_env_values = true)]
    pub retell_api_key: Option<Secret>,

    /// Base URL of the Retell AI API.
    #[arg(
        long,
        env = "GENIED_RETELL_BASE_URL",
        default_value = "https://api.retellai.com"
    )]
    pub retell_base_url: String,

    /// The Retell API key that signs webhooks (the one with the "webhook" badge, which may
    /// differ from --retell-api-key); enables `POST /v1/hooks/retell`.
    #[arg(long, env = "GENIED_RETELL_WEBHOOK_SECRET", hide_env_values = true)]
    pub retell_webhook_secret: Option<Secret>,

    /// First delay of the backoff between retries of a voice-platform call that failed
    /// transiently (429, 5xx, network); it doubles on each of the 4 retries.
    #[arg(long, env = "GENIED_PROVIDER_RETRY_BASE_MS", default_value_t = 500)]
    pub provider_retry_base_ms: u64,

    /// Seconds between the scheduled drift checks, which compare every genie's agent at
    /// Vapi, Retell or ElevenLabs with its live version and record what was changed in the
    /// platform's dashboard (0 turns the schedule off; `check-drift` still works).
    #[arg(
        long,
        env = "GENIED_DRIFT_CHECK_INTERVAL_SECONDS",
        default_value_t = 3600
    )]
    pub drift_check_interval_seconds: u64,

    /// E.164 numbers the local provider hands out: comma-separated numbers or ranges
    /// `FIRST-LAST`. The default is the fictional NANP 555-0100..0199 block, which never rings a real phone.
    #[arg(
        long,
        env = "GENIED_PHONE_POOL",
        default_value = "+15555550100-+15555550199"
    )]
    pub phone_pool: String,
    /// File holding the credential master key (64 hex digits); default
    /// `<data-dir>/secrets/master.key`. Created with a new key when missing.
    #[arg(long, env = "GENIED_MASTER_KEY_FILE")]
    pub master_key_file: Option<PathBuf>,

    /// Worker genie runs executed at the same time; further runs wait in the queue.
    #[arg(long, env = "GENIED_WORKER_CONCURRENCY", default_value_t = 4)]
    pub worker_concurrency: usize,

    /// Seconds one worker genie run may take before it is failed.
    #[arg(long, env = "GENIED_WORKER_RUN_TIMEOUT_SECONDS", default_value_t = 300)]
    pub worker_run_timeout_seconds: u64,

    /// Also accept 6-field cron schedules whose first field is seconds (for tests; normal
    /// schedules have 5 fields).
    #[arg(
        long,
        env = "GENIED_WORKER_ALLOW_SECONDS_CRON",
        default_value_t = false
    )]
    pub worker_allow_seconds_cron: bool,
    /// SMTP server for outgoing mail (conversation reports): `smtp://user:pass@host:587?tls=required`,
    /// `smtps://user:pass@host`, or `smtp://host:25` (plain). Without it, mail is recorded as
    /// dashboard notifications.
    #[arg(long, env = "GENIED_SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<Secret>,

    /// Shortest password accepted wherever a password is set (sign-up by invitation, change,
    /// reset, `admin create-user`); passwords are also refused when zxcvbn finds them common
    /// or guessable.
    #[arg(long, env = "GENIED_PASSWORD_MIN_LENGTH", default_value_t = 12, value_parser = clap::value_parser!(u16).range(8..=128))]
    pub password_min_length: u16,

    /// Minutes a password-reset or email-change link stays valid.
    #[arg(long, env = "GENIED_PASSWORD_RESET_TTL_MINUTES", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=10080))]
    pub password_reset_ttl_minutes: u64,

    /// Sign-in attempts, forgot-password and reset requests an hour allowed per email
    /// address (whether or not it has an account) and per account; 0 turns it off. The
    /// per-address limit of `--login-rate-limit-per-minute` applies as well.
    #[arg(long, env = "GENIED_ACCOUNT_RATE_LIMIT_PER_HOUR", default_value_t = 20)]
    pub account_rate_limit_per_hour: u32,

    /// OpenID Connect sign-in: the provider's issuer URL (its discovery document is at
    /// `<issuer>/.well-known/openid-configuration`). With it, `--oidc-client-id` is required.
    #[arg(long, env = "GENIED_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,

    /// The client id genied is registered under at the OpenID provider.
    #[arg(long, env = "GENIED_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,

    /// The client secret at the OpenID provider. Prefer the environment variable or
    /// `--oidc-client-secret-file` to the flag: command lines are visible to other users.
    #[arg(long, env = "GENIED_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<Secret>,

    /// A file holding the OpenID client secret (surrounding whitespace ignored).
    #[arg(
        long,
        env = "GENIED_OIDC_CLIENT_SECRET_FILE",
        conflicts_with = "oidc_client_secret"
    )]
    pub oidc_client_secret_file: Option<PathBuf>,

    /// Scopes requested besides `openid`, space- or comma-separated.
    #[arg(long, env = "GENIED_OIDC_SCOPES", default_value = "email profile")]
    pub oidc_scopes: String,

    /// The ID-token claim the role mapping reads (a string or an array of strings).
    #[arg(long, env = "GENIED_OIDC_ROLE_CLAIM", default_value = "groups")]
    pub oidc_role_claim: String,

    /// Claim values to roles, e.g. `genied-admins=internal_admin,staff=standard_user`; the
    /// highest role matched wins and is applied at every sign-in. A user no value maps gets
    /// `--oidc-default-role` when created and keeps their role otherwise.
    #[arg(long, env = "GENIED_OIDC_ROLE_MAP", default_value = "")]
    pub oidc_role_map: String,

    /// Role of users created at their first OpenID sign-in when no claim value maps.
    #[arg(long, env = "GENIED_OIDC_DEFAULT_ROLE", default_value = "standard_user", value_parser = ["internal_admin", "standard_user", "consumer"])]
    pub oidc_default_role: String,

    /// Create an account at the first OpenID sign-in of someone genied does not know;
    /// without it they are refused (an admin invites them, or links them by email).
    #[arg(long, env = "GENIED_OIDC_CREATE_USERS", default_value_t = false)]
    pub oidc_create_users: bool,

    /// Link a first OpenID sign-in to the existing account with the same email, when the
    /// provider says the email is verified. Off by default: a provider that lets users set
    /// any email would let them take over accounts.
    #[arg(long, env = "GENIED_OIDC_LINK_BY_EMAIL", default_value_t = false)]
    pub oidc_link_by_email: bool,
    /// Address (`host:port`) of a second listener that serves only `GET /metrics`, the
    /// Prometheus text exposition of the service's metrics. Off when unset; metrics are then
    /// not recorded at all.
    #[arg(long, env = "GENIED_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,

    /// Base URL of an OpenTelemetry collector's OTLP/HTTP endpoint (e.g.
    /// `http://127.0.0.1:4318`); traces are sent to `{url}/v1/traces` as protobuf. Off when
    /// unset, and then tracing costs nothing beyond the log.
    #[arg(long, env = "GENIED_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,

    /// Where document files (uploaded originals, extracted text) are kept: `file`, the
    /// `documents/` directory of the data directory, or `s3://bucket/prefix`, an
    /// S3-compatible object store (AWS S3, MinIO, Cloudflare R2, …; see --s3-endpoint).
    /// Credentials come from the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment
    /// variables (and AWS_SESSION_TOKEN when set), never from a flag.
    #[arg(long, env = "GENIED_DOCUMENT_STORE", default_value = "file")]
    pub document_store: DocumentStoreUrl,

    /// Endpoint of the S3-compatible service, e.g. `http://127.0.0.1:9000` for MinIO; it is
    /// addressed path-style (`<endpoint>/<bucket>/<key>`). Unset: AWS S3 of --s3-region,
    /// addressed virtual-hosted style.
    #[arg(long, env = "GENIED_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,

    /// Region of the bucket (signing region; MinIO and most others accept `us-east-1`).
    #[arg(long, env = "GENIED_S3_REGION", default_value = "us-east-1")]
    pub s3_region: String,

    /// The object store's credentials, read from the standard AWS environment variables only
    /// (so they never show in `--help`, a command line or `Debug` output).
    #[arg(skip = S3Credentials::from_env())]
    pub s3_credentials: S3Credentials,

    /// Sender address of outgoing mail.
    #[arg(
        long,
        env = "GENIED_SMTP_FROM",
        default_value = "genied <genied@localhost>"
    )]
    pub smtp_from: String,
}

/// The value of `--document-store`: `file` or `s3://bucket[/prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentStoreUrl {
    File,
    S3 { bucket: String, prefix: String },
}

impl std::str::FromStr for DocumentStoreUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "file" {
            return Ok(DocumentStoreUrl::File);
        }
        let Some(rest) = s.strip_prefix("s3://") else {
            return Err(format!(
                "'{s}' is neither `file` nor an `s3://bucket/prefix` URL"
            ));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        // S3's bucket naming rule (3 to 63 of a-z 0-9 . -, starting and ending alphanumeric);
        // it also keeps credentials (`user:pass@`) and queries out of the value.
        let ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
            && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !ok {
            return Err(format!(
                "'{bucket}' is not an S3 bucket name (3 to 63 characters: a-z, 0-9, '.', '-')"
            ));
        }
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty()
            && prefix
                .split('/')
                .any(|p| p.is_empty() || p == "." || p == "..")
        {
            return Err(format!("'{prefix}' is not a usable key prefix"));
        }
        Ok(DocumentStoreUrl::S3 {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }
}

impl std::fmt::Display for DocumentStoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DocumentStoreUrl::File => f.write_str("file"),
            DocumentStoreUrl::S3 { bucket, prefix } if prefix.is_empty() => {
                write!(f, "s3://{bucket}")
            }
            DocumentStoreUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

/// Object-store credentials: from the environment only, redacted in `Debug`.
#[derive(Clone, Default)]
pub struct S3Credentials {
    pub access_key_id: Option<Secret>,
    pub secret_access_key: Option<Secret>,
    pub session_token: Option<Secret>,
}

impl S3Credentials {
    pub fn from_env() -> S3Credentials {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty()).map(Secret);
        S3Credentials {
            access_key_id: var("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY"),
            session_token: var("AWS_SESSION_TOKEN"),
        }
    }
}

impl std::fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &self.secret_access_key)
            .field("session_token", &self.session_token)
            .finish()
    }
}

impl Config {
    /// Defaults as the CLI would give them, on `data_dir`; what tests and examples start from.
    pub fn new(data_dir: impl Into<PathBuf>) -> Config {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            c: Config,
        }
        let mut c = Wrap::parse_from(["genied"]).c;
        c.data_dir = data_dir.into();
        c
    }

    /// The SQLite file (when the records are in SQLite).
    pub fn db_path(&self) -> PathBuf {
        match &self.database_url {
            Some(DatabaseUrl::Sqlite(Some(p))) if p.is_absolute() => p.clone(),
            Some(DatabaseUrl::Sqlite(Some(p))) => self.data_dir.join(p),
            _ => self.data_dir.join("genied.db"),
        }
    }

    /// Where the documents' search index lives on SQLite (`doc_index`): beside the database
    /// file, named after it (`genied.db-search`), as its `-wal` and `-shm` are, so that it
    /// goes with the database it indexes.
    pub fn doc_index_dir(&self) -> PathBuf {
        let mut name = self.db_path().into_os_string();
        name.push("-search");
        PathBuf::from(name)
    }

    /// The PostgreSQL URL, when the records are in PostgreSQL.
    pub fn postgres_url(&self) -> Option<&str> {
        match &self.database_url {
            Some(DatabaseUrl::Postgres(u)) => Some(u),
            _ => None,
        }
    }
    pub fn secrets_dir(&self) -> PathBuf {
        self.data_dir.join("secrets")
    }
    pub fn documents_dir(&self) -> PathBuf {
        self.data_dir.join("documents")
    }
    pub fn public_base(&self) -> String {
        self.public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", self.listen))
            .trim_end_matches('/')
            .to_string()
    }

    /// What to tell the operator when the links the service hands out (genie pages, QR
    /// codes) name this machine only, a loopback host, while it listens where others can
    /// reach it: those links would not open anywhere else.
    pub fn public_url_warning(&self, listening: std::net::SocketAddr) -> Option<String> {
        if listening.ip().is_loopback() {
            return None;
        }
        let base = self.public_base();
        let url = url::Url::parse(&base).ok()?;
        let local = match url.host()? {
            url::Host::Domain(d) => {
                let d = d.trim_end_matches('.').to_ascii_lowercase();
                d == "localhost" || d.ends_with(".localhost")
            }
            url::Host::Ipv4(ip) => ip.is_loopback() || ip.is_unspecified(),
            url::Host::Ipv6(ip) => ip.is_loopback() || ip.is_unspecified(),
        };
        local.then(|| {
            format!(
                "the public URL {base} names this machine only, but genied listens on {listening}: \
                 genie page links and QR codes will not open elsewhere; set --public-url to the \
                 address visitors use"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::DatabaseUrl;

    #[test]
    fn database_urls_parse_and_never_show_the_password() {
        let u: DatabaseUrl = "postgres://genied:s3cret-pw@db.internal:5432/genied"
            .parse()
            .unwrap();
        let shown = format!("{u:?}");
        assert!(!shown.contains("s3cret-pw"), "{shown}");
        assert!(shown.contains("db.internal:5432/genied"), "{shown}");
        assert_eq!(
            "sqlite://".parse::<DatabaseUrl>().unwrap(),
            DatabaseUrl::Sqlite(None)
        );
        assert!("mysql://x".parse::<DatabaseUrl>().is_err());
    }
}
