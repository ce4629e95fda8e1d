-- Numbers the team owns elsewhere (a Twilio account, a SIP trunk) and imported into a voice
-- platform. The secret half of the credentials (Twilio auth token, SIP password) is sealed
-- with the master key (AES-256-GCM, the record id as associated data), like worker
-- credentials; it is never returned.
CREATE TABLE phone_imports (
    phone_id    TEXT PRIMARY KEY REFERENCES genie_phone_numbers(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    account     TEXT NOT NULL,
    nonce       BLOB NOT NULL,
    ciphertext  BLOB NOT NULL,
    created_at  TEXT NOT NULL
);
