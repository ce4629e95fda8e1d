//! `provider_hook_receipts`: the signatures of provider webhook calls already received, so
//! a replayed call is refused.

use crate::db::sql::Connection;

/// Forgets receipts older than `before` (past the signature's age limit nothing can be
/// replayed), then records `signature_hash`; false when it was already recorded.
pub fn record_receipt(
    c: &Connection,
    signature_hash: &str,
    before: &str,
    now: &str,
) -> rusqlite::Result<bool> {
    c.execute(
        "DELETE FROM provider_hook_receipts WHERE received_at < ?1",
        [before],
    )?;
    let n = c.execute(
        "INSERT INTO provider_hook_receipts (signature_hash, received_at) VALUES (?1, ?2)
         ON CONFLICT DO NOTHING",
        [signature_hash, now],
    )?;
    Ok(n == 1)
}
