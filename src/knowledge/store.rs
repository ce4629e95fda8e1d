//! The content-addressed document files (originals: uploads, typed text; extracted text),
//! each named by the SHA-256 of its bytes, in the configured [`DocumentStore`] (the
//! `documents/` directory of the data directory, or an S3 bucket). This module holds the
//! rules that tie the files to the records naming them.
//!
//! Crash safety. A record must never name a file that is not there, and a file nobody names
//! must not stay forever:
//! - A file is written before the record that names it commits: `stage` before the write
//!   transaction (the S3 upload), `commit` inside it (the file store's temp file, fsync,
//!   rename and directory fsync; S3's check that the object is still there). So once the
//!   record is committed its file is complete and its name durable (a reader never sees half
//!   a file either).
//! - A file is removed only after the transaction that dropped its last use has committed
//!   (`collect`). Removing it inside that transaction, as this store once did, loses the file
//!   of a record that survives when the process dies (or the commit fails) before the commit.
//! - The price of both orders is that a crash between them leaves a file no record names: a
//!   write whose record never committed, or a `collect` that never ran. The SIGKILL test of
//!   `tests/it/durability.rs` produced such orphans in every run. `sweep` removes them, with
//!   leftover temp files, beside each start of the service.

use std::collections::HashSet;

use crate::db::{self, Db};
use crate::document_store::{DocumentStore, ReadError, Staged};
use crate::error::ApiResult;

/// Objects of an S3 store younger than this are left to the next sweep: an upload whose
/// record has not committed yet (another process's, or one in flight when this one starts)
/// looks exactly like an orphan.
const S3_SWEEP_GRACE: chrono::TimeDelta = chrono::TimeDelta::hours(1);

#[derive(Debug, Clone)]
pub struct Store {
    files: DocumentStore,
}

impl Store {
    pub fn new(files: DocumentStore) -> Store {
        Store { files }
    }

    pub fn hash(bytes: &[u8]) -> String {
        DocumentStore::hash(bytes)
    }

    /// Before the write transaction that will name the bytes (see the module comment).
    pub async fn stage(&self, bytes: Vec<u8>) -> ApiResult<Staged> {
        self.files.stage(bytes).await
    }

    /// Inside that transaction; returns the hash to record.
    pub fn commit(&self, staged: &Staged) -> ApiResult<String> {
        self.files.commit(staged)
    }

    pub async fn read(&self, hash: &str) -> Result<Vec<u8>, ReadError> {
        self.files.read(hash).await
    }

    /// From a blocking thread (inside a write transaction).
    pub fn exists(&self, hash: &str) -> ApiResult<bool> {
        self.files.exists_blocking(hash)
    }

    /// Removes the files of `hashes` that no document record uses any more. Call after the
    /// transaction that dropped their last use has committed (see the module comment). The
    /// check and the removal run as a write on the single writer, so they cannot interleave
    /// with the `commit` of the same bytes for a new record: that `commit` either ran before
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
                        this.files.remove_blocking(&DocumentStore::key_of(h));
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

    /// Removes every file no document record names, and every leftover temp file of the
    /// file store; returns how many. Run beside each start, not before it: at 10,000
    /// documents, listing their files and reading every record's hashes took a start from
    /// 30 to 150 ms (docs/performance.md, round twenty-five), and the work grows with the
    /// store. So reading the records' hashes and listing the files run outside the database's
    /// write lock, and only the files that look unused are looked at again, and removed,
    /// inside one write transaction (none at all when nothing looks unused):
    /// - a record committed since its hashes were read names its file by then, and the file
    ///   stays;
    /// - the file store writes a file only inside the write transaction of the record naming
    ///   it (`commit`, in any process on the data directory: the lock is SQLite's), so while
    ///   the sweep holds that lock no write is half done, and a temp file it still finds is
    ///   one a crash left (one whose write has finished since the listing is gone, and its
    ///   removal does nothing);
    /// - an S3 object is uploaded before that transaction (`stage`), so a young one may be an
    ///   upload whose record has not committed yet: only objects older than
    ///   [`S3_SWEEP_GRACE`] go (an upload refreshes an object's age).
    pub async fn sweep(&self, db: &Db) -> ApiResult<usize> {
        // The hashes as the 32 bytes they spell, not as strings, and the listing filtered as
        // it goes: at 20,000 files the strings and the whole listing left each start some
        // 6 MB bigger (docs/performance.md, round twenty-seven). A name that is not a hash
        // is not in the set, so it looks unused and is asked about by name below.
        let used = db
            .read(|c| {
                let mut used = HashSet::new();
                db::documents::each_stored_hash(c, |h| {
                    used.extend(hash_bytes(h));
                })?;
                db::documents::release_cache(c)?;
                Ok(used)
            })
            .await?;
        let unused = self
            .files
            .list_where(move |name, temp| {
                temp || hash_bytes(name).is_none_or(|h| !used.contains(&h))
            })
            .await?;
        if unused.is_empty() {
            return Ok(0);
        }
        let this = self.clone();
        db.write(move |c| {
            let older_than = (!this.files.is_file()).then(|| chrono::Utc::now() - S3_SWEEP_GRACE);
            let mut removed = 0;
            for e in &unused {
                if !e.temp && db::documents::hash_uses(c, &e.name)? > 0 {
                    continue;
                }
                if let Some(cutoff) = older_than {
                    // Asked again now, under the write lock: the listing may be stale.
                    match this.files.modified_blocking(&e.key) {
                        Ok(Some(m)) if m < cutoff => {}
                        _ => continue,
                    }
                }
                this.files.remove_blocking(&e.key);
                removed += 1;
            }
            Ok(removed)
        })
        .await
    }
}

/// The 32 bytes a stored file's name spells, `None` for a name that is not a SHA-256 in hex.
fn hash_bytes(name: &str) -> Option<[u8; 32]> {
    let mut out = [0; 32];
    hex::decode_to_slice(name, &mut out).ok()?;
    Some(out)
}
