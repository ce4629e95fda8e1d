-- Accounts (#21): disabled users, one-time account tokens (password reset, email change),
-- invitations that create an account on acceptance, and identities at OpenID providers.

-- A disabled user keeps their records but can neither sign in nor use a session or API key.
-- Disabling bumps the authentication epoch (V10) so cached authentications stop at once.
ALTER TABLE users ADD COLUMN disabled_at TEXT;
CREATE TRIGGER auth_epoch_users_disabled_au AFTER UPDATE OF disabled_at ON users BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

-- Only the SHA-256 of a token is kept: the token itself is mailed or printed once.
CREATE TABLE account_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('password_reset', 'email_change')),
    new_email  TEXT,
    expires_at TEXT NOT NULL,
    used_at    TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX account_tokens_user ON account_tokens(user_id, purpose);

CREATE TABLE account_invitations (
    id           TEXT PRIMARY KEY,
    email        TEXT NOT NULL COLLATE NOCASE,
    role         TEXT NOT NULL CHECK (role IN ('internal_admin', 'standard_user', 'consumer')),
    full_name    TEXT,
    token_hash   TEXT NOT NULL UNIQUE,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'revoked')),
    invited_by   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    responded_at TEXT,
    user_id      TEXT
);
CREATE INDEX account_invitations_email ON account_invitations(email, status);

-- An account at an OpenID provider, by the provider's (issuer, subject): never by email alone.
CREATE TABLE user_identities (
    issuer        TEXT NOT NULL,
    subject       TEXT NOT NULL,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    email         TEXT,
    created_at    TEXT NOT NULL,
    last_login_at TEXT,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_identities_user ON user_identities(user_id);
