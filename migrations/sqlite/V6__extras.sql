-- Voices (favorites, collections), the template marketplace, teams and QR codes.

CREATE TABLE voice_favorites (
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    voice_id   TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, voice_id)
);

CREATE TABLE voice_collections (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    description TEXT,
    sort_order  INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX voice_collections_user ON voice_collections(user_id, sort_order);

CREATE TABLE voice_collection_items (
    collection_id TEXT NOT NULL REFERENCES voice_collections(id) ON DELETE CASCADE,
    voice_id      TEXT NOT NULL,
    position      INTEGER NOT NULL,
    added_at      TEXT NOT NULL,
    PRIMARY KEY (collection_id, voice_id)
);

-- A listing is a copy of a genie's configuration at publish time (never its phone
-- number, leads or documents); installs create new genies from it.
CREATE TABLE marketplace_listings (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    source_genie_id TEXT REFERENCES genies(id) ON DELETE SET NULL,
    name            TEXT NOT NULL,
    description     TEXT,
    category        TEXT,
    tags            TEXT NOT NULL DEFAULT '[]',
    system_prompt   TEXT,
    first_message   TEXT,
    web_welcome_message TEXT,
    voice_id        TEXT,
    llm_model       TEXT NOT NULL,
    temperature     REAL,
    max_tokens      INTEGER,
    settings        TEXT NOT NULL DEFAULT '{}',
    status          TEXT NOT NULL DEFAULT 'published' CHECK (status IN ('published', 'unpublished')),
    is_hidden       INTEGER NOT NULL DEFAULT 0,
    is_featured     INTEGER NOT NULL DEFAULT 0,
    install_count   INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX marketplace_public ON marketplace_listings(status, is_hidden, install_count);
CREATE INDEX marketplace_user ON marketplace_listings(user_id);
CREATE INDEX marketplace_category ON marketplace_listings(category);

CREATE TABLE marketplace_installs (
    id         TEXT PRIMARY KEY,
    listing_id TEXT NOT NULL REFERENCES marketplace_listings(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id   TEXT REFERENCES genies(id) ON DELETE SET NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX marketplace_installs_listing ON marketplace_installs(listing_id);

CREATE TABLE teams (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    owner_id   TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE team_members (
    team_id   TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    user_id   TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role      TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    joined_at TEXT NOT NULL,
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user ON team_members(user_id);

-- Only a SHA-256 hash of each invitation token is stored.
CREATE TABLE team_invitations (
    id           TEXT PRIMARY KEY,
    team_id      TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    email        TEXT NOT NULL COLLATE NOCASE,
    role         TEXT NOT NULL CHECK (role IN ('admin', 'member')),
    token_hash   TEXT NOT NULL UNIQUE,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'declined', 'revoked')),
    invited_by   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    responded_at TEXT
);
CREATE INDEX team_invitations_team ON team_invitations(team_id, status);

-- A genie belongs to at most one team.
CREATE TABLE team_genies (
    genie_id   TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    team_id    TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    added_by   TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX team_genies_team ON team_genies(team_id);

CREATE TABLE qr_codes (
    id             TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id       TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    label          TEXT,
    url            TEXT NOT NULL,
    download_count INTEGER NOT NULL DEFAULT 0,
    is_deleted     INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);
CREATE INDEX qr_codes_user ON qr_codes(user_id, is_deleted, created_at);
