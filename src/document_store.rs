//! Where document files live: the one boundary every read, write, listing and removal of a
//! stored document file goes through (`knowledge::store` adds the database-aware rules on
//! top: when a file may be removed, what a sweep keeps). Two backends, chosen by
//! `--document-store`:
//!
//! - `file` (the default): `data-dir/documents/<h[..2]>/<h>`, each file named by the SHA-256
//!   of its bytes, written temp-file + fsync + rename + directory fsync.
//! - `s3://bucket/prefix`: the same names as object keys (`prefix/<h[..2]>/<h>`) in an
//!   S3-compatible store, through `object_store` (request signing, retries, path-style
//!   addressing for a custom endpoint).
//!
//! Writes come in two halves so that neither backend makes the single database writer wait
//! on a network upload: `stage` runs before the write transaction (S3: the upload; file:
//! only the hash), `commit` runs inside it (file: the durable write, as before; S3: a HEAD
//! that re-uploads the object if a concurrent removal took it since `stage`). Removals run
//! inside write transactions too (`knowledge::store::Store::collect`), so a `commit` and a
//! removal of the same content are ordered by the writer and a committed record never names
//! a missing object.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use sha2::{Digest, Sha256};

use crate::config::{Config, DocumentStoreUrl, S3Credentials};
use crate::error::{ApiError, ApiResult, Kind};

/// The message a client gets when the object store cannot be reached; the detail (endpoint,
/// key, the client's error) goes to the log only.
const UNAVAILABLE: &str =
    "the document store is not reachable right now; nothing was saved, try again later";

#[derive(Clone)]
pub struct DocumentStore(Arc<Backend>);

enum Backend {
    File(PathBuf),
    S3 {
        client: AmazonS3,
        prefix: String,
        url: DocumentStoreUrl,
        rt: StoreRuntime,
    },
}

/// The S3 client's own small runtime. Every request runs on it, whoever asks: the database
/// writer waits for a HEAD or DELETE from inside a transaction, and a caller's runtime cannot
/// be relied on to drive that I/O meanwhile (a current-thread runtime whose only thread is
/// the one waiting for the writer would deadlock; tests run on such runtimes). Its
/// connections live on it too, so no request depends on another runtime staying up.
struct StoreRuntime(Option<tokio::runtime::Runtime>);

impl StoreRuntime {
    fn new() -> std::io::Result<StoreRuntime> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("genied-s3")
            .enable_all()
            .build()
            .map(|rt| StoreRuntime(Some(rt)))
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        self.0.as_ref().expect("present until dropped").handle()
    }

    /// Runs `f` on the store's runtime and awaits it from any runtime.
    async fn run<T: Send + 'static>(
        &self,
        f: impl Future<Output = T> + Send + 'static,
    ) -> ApiResult<T> {
        self.handle().spawn(f).await.map_err(ApiError::internal)
    }

    /// Runs `f` on the store's runtime and waits for it on this thread (which needs no
    /// runtime of its own).
    fn block<T: Send + 'static>(
        &self,
        f: impl Future<Output = T> + Send + 'static,
    ) -> ApiResult<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle().spawn(async move {
            let _ = tx.send(f.await);
        });
        rx.recv()
            .map_err(|_| ApiError::internal("the object store's runtime stopped"))
    }
}

impl Drop for StoreRuntime {
    fn drop(&mut self) {
        // The last handle may go on an async thread, where a blocking shutdown panics.
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for DocumentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DocumentStore({})", self.describe())
    }
}

/// Bytes hashed (and, on S3, uploaded) before the write transaction; `commit` finishes them
/// inside it.
pub struct Staged {
    pub hash: String,
    bytes: Bytes,
}

/// One stored file or object, as a listing sees it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The content hash, or the temp file's name for a write in progress.
    pub name: String,
    /// Where it is, relative to the store's root (`ab/abcd…`).
    pub key: String,
    /// A file-store temp file (a write that never finished).
    pub temp: bool,
}

/// Why a stored file could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The store answered: there is no such file.
    Missing,
    /// The store could not be asked (unreachable, refused, timed out); may work later.
    Unavailable(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Missing => f.write_str("the stored file is missing"),
            ReadError::Unavailable(m) => f.write_str(m),
        }
    }
}

fn unavailable(op: &str, key: &str, e: impl std::fmt::Display) -> ApiError {
    tracing::warn!(operation = op, key, error = %e, "document store request failed");
    ApiError::new(Kind::Unavailable, UNAVAILABLE)
}

impl DocumentStore {
    /// The store `config` names; an S3 store is only configured here (nothing is sent until
    /// the first request).
    pub fn open(config: &Config) -> anyhow::Result<DocumentStore> {
        match &config.document_store {
            DocumentStoreUrl::File => Ok(DocumentStore::file(config.documents_dir())),
            url => DocumentStore::s3(
                url,
                config.s3_endpoint.as_deref(),
                &config.s3_region,
                &config.s3_credentials,
            ),
        }
    }

    pub fn file(dir: impl Into<PathBuf>) -> DocumentStore {
        DocumentStore(Arc::new(Backend::File(dir.into())))
    }

    pub fn s3(
        url: &DocumentStoreUrl,
        endpoint: Option<&str>,
        region: &str,
        creds: &S3Credentials,
    ) -> anyhow::Result<DocumentStore> {
        let DocumentStoreUrl::S3 { bucket, prefix } = url else {
            anyhow::bail!("not an S3 document store: {url}");
        };
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(region)
            // A store that does not answer should fail a request in seconds (a 503 to the
            // client, a retried job), not hold it for object_store's default three minutes.
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: 3,
                retry_timeout: Duration::from_secs(20),
            })
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_timeout(Duration::from_secs(120)),
            );
        if let Some(ep) = endpoint {
            let u = url::Url::parse(ep)
                .map_err(|e| anyhow::anyhow!("--s3-endpoint is not a URL ({e})"))?;
            if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
                anyhow::bail!("--s3-endpoint must be an http:// or https:// URL with a host");
            }
            // Credentials belong in the environment; one in the URL would reach logs.
            if !u.username().is_empty() || u.password().is_some() {
                anyhow::bail!(
                    "--s3-endpoint must not carry credentials; set AWS_ACCESS_KEY_ID and \
                     AWS_SECRET_ACCESS_KEY instead"
                );
            }
            // MinIO, moto and most self-hosted stores are addressed path-style.
            b = b
                .with_endpoint(ep.trim_end_matches('/'))
                .with_virtual_hosted_style_request(false)
                .with_allow_http(u.scheme() == "http");
        }
        match (&creds.access_key_id, &creds.secret_access_key) {
            (Some(id), Some(secret)) => {
                b = b
                    .with_access_key_id(&id.0)
                    .with_secret_access_key(&secret.0);
                if let Some(t) = &creds.session_token {
                    b = b.with_token(&t.0);
                }
            }
            (None, None) => {} // an instance role (EC2 metadata), as the AWS tools do
            _ => anyhow::bail!(
                "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the S3 document store"
            ),
        }
        // The builder's own errors name the setting, never a credential's value.
        let client = b
            .build()
            .map_err(|e| anyhow::anyhow!("configuring the S3 document store: {e}"))?;
        Ok(DocumentStore(Arc::new(Backend::S3 {
            client,
            prefix: prefix.clone(),
            url: url.clone(),
            rt: StoreRuntime::new()?,
        })))
    }

    /// `file (<dir>)` or the `s3://` URL: what the logs and the CLI call it.
    pub fn describe(&self) -> String {
        match &*self.0 {
            Backend::File(dir) => format!("file ({})", dir.display()),
            Backend::S3 { url, .. } => url.to_string(),
        }
    }

    pub fn is_file(&self) -> bool {
        matches!(&*self.0, Backend::File(_))
    }

    pub fn hash(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    fn rel(hash: &str) -> String {
        format!("{}/{hash}", &hash[..2.min(hash.len())])
    }

    fn key(prefix: &str, rel: &str) -> Key {
        if prefix.is_empty() {
            Key::from(rel)
        } else {
            Key::from(format!("{prefix}/{rel}"))
        }
    }

    /// The first half of a write, before the write transaction: hashes the bytes and, on
    /// S3, uploads them (always: content-addressed, so a second upload of the same bytes is
    /// harmless, and it refreshes the object's age for the startup sweep).
    pub async fn stage(&self, bytes: Vec<u8>) -> ApiResult<Staged> {
        let bytes = Bytes::from(bytes);
        let hash = Self::hash(&bytes);
        if let Backend::S3 {
            client, prefix, rt, ..
        } = &*self.0
        {
            let key = Self::key(prefix, &Self::rel(&hash));
            let (client, body) = (client.clone(), bytes.clone());
            rt.run(async move {
                client
                    .put(&key, body.into())
                    .await
                    .map(|_| ())
                    .map_err(|e| unavailable("put", key.as_ref(), e))
            })
            .await??;
        }
        Ok(Staged { hash, bytes })
    }

    /// The second half, inside the write transaction that commits the record naming the
    /// file; returns the hash. File store: the durable write. S3: makes sure the object is
    /// still there (see the module comment).
    pub fn commit(&self, s: &Staged) -> ApiResult<String> {
        match &*self.0 {
            Backend::File(dir) => put_file(dir, &s.hash, &s.bytes).map_err(ApiError::internal),
            Backend::S3 {
                client, prefix, rt, ..
            } => {
                let key = Self::key(prefix, &Self::rel(&s.hash));
                let (client, body) = (client.clone(), s.bytes.clone());
                rt.block(async move {
                    match client.head(&key).await {
                        Ok(_) => Ok(()),
                        Err(object_store::Error::NotFound { .. }) => client
                            .put(&key, body.into())
                            .await
                            .map(|_| ())
                            .map_err(|e| unavailable("put", key.as_ref(), e)),
                        Err(e) => Err(unavailable("head", key.as_ref(), e)),
                    }
                })??;
                Ok(s.hash.clone())
            }
        }
    }

    /// The whole file. Objects are only ever what `stage` wrote, so their size is bounded
    /// by the upload and extraction limits that applied then.
    pub async fn read(&self, hash: &str) -> Result<Vec<u8>, ReadError> {
        match &*self.0 {
            Backend::File(dir) => {
                let path = dir.join(Self::rel(hash));
                match tokio::task::spawn_blocking(move || std::fs::read(path)).await {
                    Ok(Ok(b)) => Ok(b),
                    Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                        Err(ReadError::Missing)
                    }
                    Ok(Err(e)) => Err(ReadError::Unavailable(e.to_string())),
                    Err(e) => Err(ReadError::Unavailable(e.to_string())),
                }
            }
            Backend::S3 {
                client, prefix, rt, ..
            } => {
                let key = Self::key(prefix, &Self::rel(hash));
                let (client, k) = (client.clone(), key.clone());
                let got = rt
                    .run(async move {
                        match client.get(&k).await {
                            Ok(g) => g.bytes().await,
                            Err(e) => Err(e),
                        }
                    })
                    .await
                    .map_err(|e| ReadError::Unavailable(e.message))?;
                match got {
                    Ok(b) => Ok(b.to_vec()),
                    Err(object_store::Error::NotFound { .. }) => Err(ReadError::Missing),
                    Err(e) => {
                        tracing::warn!(key = %key, error = %e, "document store read failed");
                        Err(ReadError::Unavailable(
                            "the document store is not reachable right now".into(),
                        ))
                    }
                }
            }
        }
    }

    /// Whether the file of `hash` is stored, from a blocking thread (a write transaction).
    pub fn exists_blocking(&self, hash: &str) -> ApiResult<bool> {
        match &*self.0 {
            Backend::File(dir) => Ok(dir.join(Self::rel(hash)).exists()),
            Backend::S3 {
                client, prefix, rt, ..
            } => {
                let key = Self::key(prefix, &Self::rel(hash));
                let client = client.clone();
                rt.block(async move {
                    match client.head(&key).await {
                        Ok(_) => Ok(true),
                        Err(object_store::Error::NotFound { .. }) => Ok(false),
                        Err(e) => Err(unavailable("head", key.as_ref(), e)),
                    }
                })?
            }
        }
    }

    /// The object's last change, from a blocking thread; `None` when it is not there.
    pub fn modified_blocking(&self, key: &str) -> ApiResult<Option<chrono::DateTime<chrono::Utc>>> {
        match &*self.0 {
            Backend::File(dir) => Ok(std::fs::metadata(dir.join(key))
                .and_then(|m| m.modified())
                .ok()
                .map(chrono::DateTime::<chrono::Utc>::from)),
            Backend::S3 {
                client, prefix, rt, ..
            } => {
                let key = Self::key(prefix, key);
                let client = client.clone();
                rt.block(async move {
                    match client.head(&key).await {
                        Ok(m) => Ok(Some(m.last_modified)),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(unavailable("head", key.as_ref(), e)),
                    }
                })?
            }
        }
    }

    /// Removes the file at `key` (an [`Entry::key`], or a hash's place) from a blocking
    /// thread; a file already gone counts as removed, a failure is logged (the next sweep
    /// tries again).
    pub fn remove_blocking(&self, key: &str) {
        match &*self.0 {
            Backend::File(dir) => remove_quietly(&dir.join(key)),
            Backend::S3 {
                client, prefix, rt, ..
            } => {
                let key = Self::key(prefix, key);
                let (client, k) = (client.clone(), key.clone());
                let res = rt.block(async move {
                    match client.delete(&k).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                        Err(e) => Err(e.to_string()),
                    }
                });
                if let Err(e) = res.map_err(|e| e.message).and_then(|r| r) {
                    tracing::warn!(key = %key, error = %e, "could not remove a stored document object");
                }
            }
        }
    }

    /// Where the file of `hash` is, relative to the store's root (for `remove_blocking`).
    pub fn key_of(hash: &str) -> String {
        Self::rel(hash)
    }

    /// Every stored file, temp files of the file store included.
    pub async fn list(&self) -> ApiResult<Vec<Entry>> {
        self.list_where(|_, _| true).await
    }

    /// The stored files for which `keep(name, temp)` holds. It is asked as the listing goes,
    /// so a caller that keeps few of 20,000 files never holds the other entries (a sweep
    /// that held them all left each start some 6 MB bigger; docs/performance.md, round
    /// twenty-seven).
    pub async fn list_where(
        &self,
        keep: impl Fn(&str, bool) -> bool + Send + Sync + 'static,
    ) -> ApiResult<Vec<Entry>> {
        match &*self.0 {
            Backend::File(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || list_files(&dir, keep))
                    .await
                    .map_err(ApiError::internal)?
            }
            Backend::S3 {
                client, prefix, rt, ..
            } => {
                let root = (!prefix.is_empty()).then(|| Key::from(prefix.as_str()));
                let (client, p) = (client.clone(), prefix.clone());
                let strip = if prefix.is_empty() {
                    String::new()
                } else {
                    format!("{prefix}/")
                };
                rt.run(async move {
                    client
                        .list(root.as_ref())
                        .map_err(|e| unavailable("list", &p, e))
                        .try_filter_map(|m| {
                            let entry = m.location.as_ref().strip_prefix(&strip).and_then(|key| {
                                let name = m.location.filename()?;
                                keep(name, false).then(|| Entry {
                                    temp: false,
                                    name: name.to_string(),
                                    key: key.to_string(),
                                })
                            });
                            std::future::ready(Ok(entry))
                        })
                        .try_collect()
                        .await
                })
                .await?
            }
        }
    }

    /// `list` from a thread outside the runtime (the CLI), on a runtime of its own.
    pub fn list_blocking(&self) -> anyhow::Result<Vec<Entry>> {
        if let Backend::File(dir) = &*self.0 {
            return list_files(dir, |_, _| true).map_err(|e| anyhow::anyhow!("{}", e.message));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(self.list())
            .map_err(|e| anyhow::anyhow!("{}", e.message))
    }
}

/// Names only: the directory entries' types come with the listing, and a `stat` of each of
/// 20,000 files was most of a listing's time (docs/performance.md, round twenty-five).
fn list_files(dir: &Path, keep: impl Fn(&str, bool) -> bool) -> ApiResult<Vec<Entry>> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    for d in dirs
        .flatten()
        .filter(|d| d.file_type().is_ok_and(|t| t.is_dir()))
    {
        let Ok(files) = std::fs::read_dir(d.path()) else {
            continue;
        };
        let sub = d.file_name();
        let sub = sub.to_string_lossy();
        for f in files.flatten() {
            let name = f.file_name();
            let name = name.to_string_lossy();
            let temp = name.starts_with(".tmp-");
            if keep(&name, temp) {
                out.push(Entry {
                    temp,
                    key: format!("{sub}/{name}"),
                    name: name.into_owned(),
                });
            }
        }
    }
    Ok(out)
}

/// Stores `bytes` under its hash (once per content): temp file, fsync, rename, directory
/// fsync, so once the record naming it commits the file is complete and its name durable.
fn put_file(dir: &Path, hash: &str, bytes: &[u8]) -> std::io::Result<String> {
    let path = dir.join(DocumentStore::rel(hash));
    if path.exists() {
        return Ok(hash.to_string());
    }
    let parent = path.parent().expect("hash path has a parent");
    if !parent.exists() {
        std::fs::create_dir_all(parent)?;
        sync_dir(dir)?;
    }
    let tmp = parent.join(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        // The rename itself must reach the disk before the record naming the file commits.
        sync_dir(parent)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.map(|_| hash.to_string())
}

/// Makes a directory's entries (a rename, a new subdirectory) durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn remove_quietly(p: &Path) {
    if let Err(e) = std::fs::remove_file(p)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %p.display(), error = %e, "could not remove a stored document file");
    }
}
