//! The content-addressed file store under `data-dir/documents/`: originals (uploads, typed
//! text) and extracted text, each named by the SHA-256 of its bytes. Writes go to a temp file
//! that is renamed into place, so a reader never sees half a file. A file is removed when the
//! last document record using it is gone; callers do that inside the writer's transaction,
//! so a concurrent `put` of the same bytes cannot race the removal.

use std::io::Write;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use sha2::{Digest, Sha256};

use crate::db;

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
        std::fs::create_dir_all(parent)?;
        let tmp = parent.join(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
        let res = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
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

    /// Removes the file when no document record uses it any more. Call inside the write
    /// transaction that dropped the last use.
    pub fn release(&self, c: &Connection, hash: Option<&str>) -> rusqlite::Result<()> {
        let Some(hash) = hash else { return Ok(()) };
        if db::documents::hash_uses(c, hash)? == 0 {
            remove_quietly(&self.path(hash));
        }
        Ok(())
    }
}

fn remove_quietly(p: &Path) {
    if let Err(e) = std::fs::remove_file(p)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %p.display(), error = %e, "could not remove a stored document file");
    }
}
