//! The credentials of imported phone numbers, sealed (see `workers::credentials`): the
//! non-secret part (`account`: the Twilio account SID or the SIP trunk's URI and user) in
//! clear, the secret part only as ciphertext.

use crate::db::sql::{Connection, OptionalExtension, params};

pub fn insert(
    c: &Connection,
    phone_id: &str,
    kind: &str,
    account: &str,
    nonce: &[u8],
    ct: &[u8],
    now: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO phone_imports (phone_id, kind, account, nonce, ciphertext, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![phone_id, kind, account, nonce, ct, now],
    )?;
    Ok(())
}

/// Every sealed value: (phone id, nonce, ciphertext), for a master-key rotation.
pub fn all_sealed(c: &Connection) -> rusqlite::Result<Vec<super::webhooks::SealedSecret>> {
    c.prepare("SELECT phone_id, nonce, ciphertext FROM phone_imports ORDER BY phone_id")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}

/// One stored credential, the first by phone: a probe of which key the stored values open with.
pub fn first_sealed(c: &Connection) -> rusqlite::Result<Option<super::webhooks::SealedSecret>> {
    c.query_row(
        "SELECT phone_id, nonce, ciphertext FROM phone_imports ORDER BY phone_id LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .optional()
}

pub fn set_sealed(c: &Connection, phone_id: &str, nonce: &[u8], ct: &[u8]) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE phone_imports SET nonce = ?2, ciphertext = ?3 WHERE phone_id = ?1",
        params![phone_id, nonce, ct],
    )?;
    Ok(())
}
