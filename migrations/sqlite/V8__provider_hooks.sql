-- Signatures of provider webhook calls already accepted, so an exact replay is refused.
-- Rows older than the signature's validity window are pruned on insert.
CREATE TABLE provider_hook_receipts (
    signature_hash TEXT PRIMARY KEY,
    received_at    TEXT NOT NULL
);
CREATE INDEX provider_hook_receipts_time ON provider_hook_receipts(received_at);
