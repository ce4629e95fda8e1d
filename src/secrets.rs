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
    if !path.exists() {
        let mut key = vec![0u8; len];
        rand::rngs::OsRng.fill_bytes(&mut key);
        create_private_once(path, hex::encode(&key).as_bytes())?;
    }
    // Read back, not returned from above: another instance may have created it first.
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    hex::decode(text.trim()).with_context(|| format!("{} is not hex", path.display()))
}

/// Creates `path` with `contents`, readable only by the owner, unless it exists. Several
/// instances starting at once on one shared data directory all end up with the one file the
/// first of them made: it is written whole under a name of its own and linked into place,
/// and a link never replaces a file, so none reads a half-written key and none overwrites
/// another's.
pub fn create_private_once(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.{}.new", uuid::Uuid::new_v4().simple()));
    write_private(&tmp, contents)?;
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            if let Some(dir) = path.parent()
                && let Ok(d) = fs::File::open(dir)
            {
                let _ = d.sync_all();
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight starts at once on a fresh directory agree on one key, and leave no stray files.
    #[test]
    fn instances_starting_together_share_the_first_key() {
        let dir = tempfile::tempdir().unwrap();
        let keys: Vec<Secrets> = std::thread::scope(|s| {
            let starts: Vec<_> = (0..8)
                .map(|_| s.spawn(|| Secrets::load_or_create(dir.path()).unwrap()))
                .collect();
            starts.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for k in &keys[1..] {
            assert_eq!(k.master_key, keys[0].master_key);
            assert_eq!(k.jwt_key, keys[0].jwt_key);
        }
        assert_eq!(keys[0].jwt_key.len(), 64);
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["jwt.key", "master.key"]);
        let mode = fs::metadata(dir.path().join("master.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
