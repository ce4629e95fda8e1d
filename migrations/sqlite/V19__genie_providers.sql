-- Which voice platform runs each genie, and whether the platform holds what genied holds.
-- A genie without a row (made before providers could be chosen) lives in the service's
-- default provider and is taken as in sync.
CREATE TABLE genie_providers (
    genie_id   TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    provider   TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'in_sync' CHECK (state IN ('in_sync', 'pending', 'failed')),
    error      TEXT,
    updated_at TEXT NOT NULL
);
CREATE INDEX genie_providers_provider ON genie_providers(provider);
