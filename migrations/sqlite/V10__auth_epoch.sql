-- One counter that every change to who may do what bumps, inside the transaction that makes
-- the change, whoever commits it: the service, `genied admin` in another process, or a
-- sqlite3 shell. The service's authentication cache tags each entry with the epoch it was
-- read at and trusts it only while the epoch is unchanged (src/auth/mod.rs), so such a change
-- reaches the very next request.
--
-- Only what a cached authentication depends on bumps it: a user's role or removal, an API
-- key's status, owner or hash, a session's revocation or removal. Sign-ins, new keys, key
-- use (`last_used_at`) and refresh-token rotation leave it alone, so they do not empty the
-- cache.
CREATE TABLE auth_epoch (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch INTEGER NOT NULL
);
INSERT INTO auth_epoch (id, epoch) VALUES (1, 0);

CREATE TRIGGER auth_epoch_users_au AFTER UPDATE OF id, role ON users BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_users_ad AFTER DELETE ON users BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_api_keys_au AFTER UPDATE OF id, user_id, key_hash, status ON api_keys BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_api_keys_ad AFTER DELETE ON api_keys BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_sessions_au AFTER UPDATE OF id, user_id, revoked_at ON sessions BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_sessions_ad AFTER DELETE ON sessions BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
