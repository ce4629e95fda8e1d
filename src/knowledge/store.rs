//! The content-addressed file store under `data-dir/documents/`: originals (uploads, typed
//! text) and extracted text, each named by the SHA-256 of its bytes.
//!
//! Crash safety. A record must never name a file that is not there, and a file nobody names
//! must not stay forever:
//! - `put` runs inside the write transaction, before the record that names the file commits.
//!   It writes a temp file, fsyncs it, renames it into place and fsyncs the directory, so once
//!   the record is committed its file is complete and its name durable (a reader never sees
//!   half a file either).
//! - A file is removed only after the transaction that dropped its last use has committed
//!   (`collect`). Removing it inside that transaction, as this store once did, loses the file
//!   of a record that survives when the process dies (or the commit fails) before the commit.
//! - The price of both orders is that a crash between them leaves a file no record names: a
//!   `put` whose record never committed, or a `collect` that never ran. The SIGKILL test of
//!   `tests/it/durability.rs` produced such orphans in every run. `sweep` removes them, with
//!   leftover temp files, when the service starts.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::db::{self, Db};
use crate::error::ApiResult;

#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    pub fn hash(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    pub fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(&hash[..2]).join(hash)
    }

    /// Stores `bytes` (once per content) and returns its hash.
    pub fn put(&self, bytes: &[u8]) -> std::io::Result<String> {
        let hash = Self::hash(bytes);
        let path = self.path(&hash);
        if path.exists() {
            return Ok(hash);
        }
        let parent = path.parent().expect("hash path has a parent");
        if !parent.exists() {
            std::fs::create_dir_all(parent)?;
            sync_dir(&self.dir)?;
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
        res.map(|_| hash)
    }

    pub fn read(&self, hash: &str) -> std::io::Result<Vec<u8>> {
        std::fs::read(self.path(hash))
    }

    pub fn exists(&self, hash: &str) -> bool {
        self.path(hash).exists()
    }

    /// Removes the files of `hashes` that no document record uses any more. Call after the
    /// transaction that dropped their last use has committed (see the module comment). The
    /// check and the removal run as a write on the single writer, so they cannot interleave
    /// with a `put` of the same bytes for a new record: that `put` either committed before
    /// (the file is in use and stays) or runs after (it finds no file and writes it again).
    pub async fn collect(&self, db: &Db, hashes: Vec<String>) {
        if hashes.is_empty() {
            return;
        }
        let this = self.clone();
        let res = db
            .write(move |c| {
                for h in &hashes {
                    if db::documents::hash_uses(c, h)? == 0 {
                        remove_quietly(&this.path(h));
                    }
                }
                Ok(())
            })
            .await;
        if let Err(e) = res {
            // Left for the sweep at the next start.
            tracing::warn!(error = %e.message, "could not remove unused document files");
        }
    }

    /// Removes every file no document record names and every leftover temp file; returns how
    /// many. Run at startup. It looks and removes while holding the database's write lock
    /// (inside a write transaction): every `put` happens inside a write transaction too, so no
    /// file whose record is about to commit can be taken for an orphan, even one written by
    /// another process on the same data directory.
    pub fn sweep(&self, db: &Db) -> ApiResult<usize> {
        db.write_blocking(|c| {
            let used = db::documents::stored_hashes(c)?;
            let mut removed = 0;
            let Ok(dirs) = std::fs::read_dir(&self.dir) else {
                return Ok(0);
            };
            for d in dirs.flatten().filter(|d| d.path().is_dir()) {
                let Ok(files) = std::fs::read_dir(d.path()) else {
                    continue;
                };
                for f in files.flatten() {
                    let name = f.file_name().to_string_lossy().into_owned();
                    if name.starts_with(".tmp-") || !used.contains(&name) {
                        remove_quietly(&f.path());
                        removed += 1;
                    }
                }
            }
            Ok(removed)
        })
    }
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
