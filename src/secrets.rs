//! Key material kept in `data-dir/secrets/`: the JWT signing key and the credential master
//! key. Created on first start with mode 0600 inside a 0700 directory.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use rand::RngCore;

#[derive(Clone)]
pub struct Secrets {
    pub jwt_key: Vec<u8>,
    pub master_key: [u8; 32],
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(<redacted>)")
    }
}

impl Secrets {
    pub fn load_or_create(dir: &Path) -> anyhow::Result<Secrets> {
        ensure_private_dir(dir)?;
        let jwt_key = load_or_create_key(&dir.join("jwt.key"), 64)?;
        let master = load_or_create_key(&dir.join("master.key"), 32)?;
        let master_key: [u8; 32] = master
            .as_slice()
            .try_into()
            .context("master.key must hold 32 bytes")?;
        Ok(Secrets {
            jwt_key,
            master_key,
        })
    }
}

pub fn ensure_private_dir(dir: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// Keys are stored hex-encoded so an operator can inspect or replace them with a text editor.
fn load_or_create_key(path: &PathBuf, len: usize) -> anyhow::Result<Vec<u8>> {
    if path.exists() {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        return hex::decode(text.trim()).with_context(|| format!("{} is not hex", path.display()));
    }
    let mut key = vec![0u8; len];
    rand::rngs::OsRng.fill_bytes(&mut key);
    write_private(path, hex::encode(&key).as_bytes())?;
    Ok(key)
}

/// Writes a new file readable only by the owner; fails if it already exists.
pub fn write_private(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(contents)?;
    f.sync_all()?;
    Ok(())
}
