//! Credential encryption: AES-256-GCM with a random 96-bit nonce for every encryption and
//! the credential's record id as associated data (a ciphertext copied to another row does
//! not open). The 32-byte master key is hex text in `data-dir/secrets/master.key`, or in
//! `--master-key-file`.
//!
//! Key rotation (`genied admin rotate-master-key`) runs in this order, so that a crash at
//! any point loses nothing:
//! 1. the new key is written to `<key file>.new` (0600, fsynced);
//! 2. every credential is re-encrypted with it in ONE database transaction;
//! 3. `<key file>.new` is renamed over the key file (atomic), and the directory fsynced.
//!
//! A crash before 2 commits leaves the database on the old key (the stale `.new` is removed
//! at the next start); a crash between 2 and 3 leaves the database on the new key and the
//! new key in `.new`: at the next start `apply_master_key` sees that a credential opens with
//! the `.new` key and completes the rename. A running service that meets a ciphertext its
//! key cannot open re-reads the key file and the `.new` file (read-only), so rotating while
//! serving works too.

use std::path::{Path, PathBuf};

use crate::db::sql::Connection;
use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use anyhow::Context;
use rand::RngCore;

use crate::config::Config;
use crate::db::{self, Db, webhooks::SealedSecret, workers::Sealed};
use crate::secrets::{self, Secrets};
use crate::state::AppState;

/// Encrypts `plain` for record `id`; returns (nonce, ciphertext).
pub fn seal(key: &[u8; 32], id: &str, plain: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let cipher = Aes256Gcm::new_from_slice(key).expect("32-byte key");
    let mut nonce = [0u8; 12];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let ct = cipher
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: plain,
                aad: id.as_bytes(),
            },
        )
        .expect("AES-GCM encryption does not fail for short inputs");
    (nonce.to_vec(), ct)
}

/// Decrypts; `None` when the key, nonce, id or ciphertext do not match.
pub fn open(key: &[u8; 32], id: &str, nonce: &[u8], ct: &[u8]) -> Option<Vec<u8>> {
    if nonce.len() != 12 {
        return None;
    }
    let cipher = Aes256Gcm::new_from_slice(key).ok()?;
    cipher
        .decrypt(
            Nonce::from_slice(nonce),
            Payload {
                msg: ct,
                aad: id.as_bytes(),
            },
        )
        .ok()
}

/// Where a value sealed with the master key lives: worker credentials and webhook signing
/// secrets share the key, so they are probed and rotated together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Credential,
    Webhook,
    PhoneImport,
}

struct SealedValue {
    table: Table,
    id: String,
    nonce: Vec<u8>,
    ct: Vec<u8>,
}

impl SealedValue {
    fn credential(s: Sealed) -> SealedValue {
        SealedValue {
            table: Table::Credential,
            id: s.meta.id,
            nonce: s.nonce,
            ct: s.ciphertext,
        }
    }

    /// A webhook's or phone import's sealed secret, as its table stores it.
    fn secret(table: Table, (id, nonce, ct): SealedSecret) -> SealedValue {
        SealedValue {
            table,
            id,
            nonce,
            ct,
        }
    }

    fn opens_with(&self, key: &[u8; 32]) -> bool {
        open(key, &self.id, &self.nonce, &self.ct).is_some()
    }
}

fn sealed_values(c: &Connection) -> rusqlite::Result<Vec<SealedValue>> {
    let mut out: Vec<SealedValue> = db::workers::all_sealed(c)?
        .into_iter()
        .map(SealedValue::credential)
        .collect();
    out.extend(
        db::webhooks::all_sealed(c)?
            .into_iter()
            .map(|s| SealedValue::secret(Table::Webhook, s)),
    );
    out.extend(
        db::phone_imports::all_sealed(c)?
            .into_iter()
            .map(|s| SealedValue::secret(Table::PhoneImport, s)),
    );
    Ok(out)
}

/// One stored sealed value, enough to tell which key the stored values open with: a rotation
/// re-encrypts them all in one transaction, so one answers for all. Reads at most one row a
/// table, so a start or a credential write costs the same however many are stored.
fn first_sealed(c: &Connection) -> rusqlite::Result<Option<SealedValue>> {
    if let Some(s) = db::workers::first_sealed(c)? {
        return Ok(Some(SealedValue::credential(s)));
    }
    if let Some(s) = db::webhooks::first_sealed(c)? {
        return Ok(Some(SealedValue::secret(Table::Webhook, s)));
    }
    Ok(db::phone_imports::first_sealed(c)?.map(|s| SealedValue::secret(Table::PhoneImport, s)))
}

fn store_value(c: &Connection, v: &SealedValue, nonce: &[u8], ct: &[u8]) -> rusqlite::Result<()> {
    match v.table {
        Table::Credential => db::workers::set_ciphertext(c, &v.id, nonce, ct),
        Table::Webhook => db::webhooks::set_sealed(c, &v.id, nonce, ct),
        Table::PhoneImport => db::phone_imports::set_sealed(c, &v.id, nonce, ct),
    }
}

/// Where the master key lives for this configuration.
pub fn key_path(config: &Config) -> PathBuf {
    config
        .master_key_file
        .clone()
        .unwrap_or_else(|| config.secrets_dir().join("master.key"))
}

fn pending_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".new");
    PathBuf::from(s)
}

pub fn read_key(path: &Path) -> anyhow::Result<[u8; 32]> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let bytes =
        hex::decode(text.trim()).with_context(|| format!("{} is not hex", path.display()))?;
    bytes
        .as_slice()
        .try_into()
        .with_context(|| format!("{} must hold a 32-byte key (64 hex digits)", path.display()))
}

fn new_key() -> [u8; 32] {
    let mut k = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut k);
    k
}

/// Startup: completes or discards an interrupted rotation, honours `--master-key-file`
/// (created with a new key if missing), and returns the secrets with the key in use.
pub fn apply_master_key(config: &Config, db: &Db, mut secrets: Secrets) -> anyhow::Result<Secrets> {
    let path = key_path(config);
    if !path.exists() {
        let stored = db
            .read_blocking(|c| Ok(first_sealed(c)?.is_some()))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if stored {
            anyhow::bail!(
                "the master key file {} does not exist, but the database holds credentials encrypted with a key; \
                 restore the key file (or point --master-key-file at it) instead of starting with a new key",
                path.display()
            );
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        secrets::create_private_once(&path, hex::encode(new_key()).as_bytes())?;
    }
    finish_pending_rotation(&path, db)?;
    secrets.master_key = read_key(&path)?;
    // A wrong key would make every stored credential unreadable and encrypt new ones with a
    // key the old ones do not share: refuse to start instead.
    let first = db
        .read_blocking(|c| Ok(first_sealed(c)?))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(s) = first
        && !s.opens_with(&secrets.master_key)
    {
        anyhow::bail!(
            "the master key in {} does not open the stored credentials; put the original key file back \
             (it may have been replaced by a new one if it was missing)",
            path.display()
        );
    }
    Ok(secrets)
}

fn finish_pending_rotation(path: &Path, db: &Db) -> anyhow::Result<()> {
    let pending = pending_path(path);
    if !pending.exists() {
        return Ok(());
    }
    let first = db
        .read_blocking(|c| Ok(first_sealed(c)?))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let committed = match read_key(&pending) {
        Ok(k) => first.as_ref().is_none_or(|s| s.opens_with(&k)),
        Err(_) => false,
    };
    if committed {
        std::fs::rename(&pending, path)?;
        sync_dir(path);
        tracing::warn!("completed an interrupted master key rotation");
    } else {
        std::fs::remove_file(&pending)?;
        tracing::warn!("discarded the new key of a master key rotation that did not commit");
    }
    Ok(())
}

fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
}

/// Re-encrypts every credential with a new master key (see the module notes for the order).
/// Returns the number of credentials re-encrypted.
pub fn rotate_master_key(db: &Db, path: &Path) -> anyhow::Result<usize> {
    finish_pending_rotation(path, db)?;
    let old = read_key(path)?;
    let new = new_key();
    let pending = pending_path(path);
    secrets::write_private(&pending, hex::encode(new).as_bytes())?;
    sync_dir(&pending);
    let result = db.write_blocking(move |c| {
        let all = sealed_values(c)?;
        for v in &all {
            let plain = open(&old, &v.id, &v.nonce, &v.ct).ok_or_else(|| {
                crate::error::ApiError::validation(format!(
                    "sealed value {} does not open with the current master key; nothing was changed",
                    v.id
                ))
            })?;
            let (nonce, ct) = seal(&new, &v.id, &plain);
            store_value(c, v, &nonce, &ct)?;
        }
        Ok(all.len())
    });
    match result {
        Ok(n) => {
            std::fs::rename(&pending, path)
                .with_context(|| format!("replacing {}", path.display()))?;
            sync_dir(path);
            Ok(n)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&pending);
            Err(anyhow::anyhow!("{}", e.message))
        }
    }
}

/// The key to encrypt a new credential with, decided inside the writer's transaction (so a
/// concurrent rotation either re-encrypts it afterwards or has already committed).
pub fn key_for_write(app: &AppState, c: &Connection) -> anyhow::Result<[u8; 32]> {
    let first = first_sealed(c)?;
    let current = *app
        .workers
        .master_key
        .read()
        .unwrap_or_else(|p| p.into_inner());
    let probe = |k: &[u8; 32]| first.as_ref().is_none_or(|s| s.opens_with(k));
    let path = &app.workers.key_path;
    let pending = pending_path(path);
    if pending.exists()
        && let Ok(k) = read_key(&pending)
        && probe(&k)
        && (first.is_none() || !probe(&current))
    {
        return Ok(k);
    }
    if probe(&current) {
        return Ok(current);
    }
    let k = read_key(path)?;
    *app.workers
        .master_key
        .write()
        .unwrap_or_else(|p| p.into_inner()) = k;
    Ok(k)
}

/// Opens a stored credential: with the key in memory, else with the key file or a pending
/// rotation's key (adopted when it works). `None` when nothing opens it.
pub fn reveal(app: &AppState, s: &Sealed) -> Option<String> {
    open_live(app, &s.meta.id, &s.nonce, &s.ciphertext).and_then(|p| String::from_utf8(p).ok())
}

/// Opens any value sealed with the master key (credentials, webhook secrets): with the key in
/// memory, else with the key file or a pending rotation's key (adopted when it works).
pub fn open_live(app: &AppState, id: &str, nonce: &[u8], ct: &[u8]) -> Option<Vec<u8>> {
    let current = *app
        .workers
        .master_key
        .read()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(p) = open(&current, id, nonce, ct) {
        return Some(p);
    }
    let path = &app.workers.key_path;
    for candidate in [path.clone(), pending_path(path)] {
        if let Ok(k) = read_key(&candidate)
            && let Some(p) = open(&k, id, nonce, ct)
        {
            *app.workers
                .master_key
                .write()
                .unwrap_or_else(|p| p.into_inner()) = k;
            return Some(p);
        }
    }
    None
}
