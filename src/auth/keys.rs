//! API key strings: `svc_live_` (or `svc_admin_`) followed by 256 random bits,
//! base64url-encoded. Only the SHA-256 of the whole key is stored.

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

pub const LIVE_PREFIX: &str = "svc_live_";
pub const ADMIN_PREFIX: &str = "svc_admin_";

/// A freshly generated key: the secret (shown once), its hash and its display prefix.
pub struct NewKey {
    pub secret: String,
    pub hash: String,
    pub display_prefix: String,
}

pub fn generate(admin: bool) -> NewKey {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let prefix = if admin { ADMIN_PREFIX } else { LIVE_PREFIX };
    let secret = format!("{prefix}{body}");
    let display_prefix = format!("{prefix}{}", &body[..6]);
    NewKey {
        hash: hash(&secret),
        secret,
        display_prefix,
    }
}

/// Keys carry 256 bits of entropy, so a plain SHA-256 is a sound at-rest form: there is
/// nothing to brute-force.
pub fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

pub fn has_valid_prefix(key: &str) -> bool {
    key.starts_with(LIVE_PREFIX) || key.starts_with(ADMIN_PREFIX)
}
