//! Sealing secrets at rest with AES-256-GCM under the master key: a fresh random 96-bit
//! nonce per encryption (stored in front of the ciphertext) and the record id as associated
//! data, so a sealed value copied onto another record does not open.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use rand::RngCore;

const NONCE_LEN: usize = 12;

pub fn seal(key: &[u8; 32], record_id: &str, plaintext: &[u8]) -> Vec<u8> {
    let cipher = Aes256Gcm::new(key.into());
    let mut nonce = [0u8; NONCE_LEN];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let ct = cipher
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: plaintext,
                aad: record_id.as_bytes(),
            },
        )
        .expect("AES-GCM encryption of an in-memory buffer cannot fail");
    let mut out = nonce.to_vec();
    out.extend_from_slice(&ct);
    out
}

/// `None` when the value was sealed under another key or for another record, or was altered.
pub fn open(key: &[u8; 32], record_id: &str, sealed: &[u8]) -> Option<Vec<u8>> {
    if sealed.len() < NONCE_LEN {
        return None;
    }
    let (nonce, ct) = sealed.split_at(NONCE_LEN);
    Aes256Gcm::new(key.into())
        .decrypt(
            Nonce::from_slice(nonce),
            Payload {
                msg: ct,
                aad: record_id.as_bytes(),
            },
        )
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_binding() {
        let key = [7u8; 32];
        let a = seal(&key, "rec-1", b"hunter2");
        let b = seal(&key, "rec-1", b"hunter2");
        assert_ne!(a, b, "nonces must differ");
        assert_eq!(open(&key, "rec-1", &a).as_deref(), Some(&b"hunter2"[..]));
        assert_eq!(open(&key, "rec-2", &a), None);
        assert_eq!(open(&[8u8; 32], "rec-1", &a), None);
        let mut tampered = a.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(open(&key, "rec-1", &tampered), None);
    }
}
