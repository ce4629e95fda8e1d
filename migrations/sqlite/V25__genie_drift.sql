-- The last drift check of a genie's agent at its platform: the fields changed there (a JSON
-- list of {path, genied, platform}; NULL when the platform matched) and when it ran.
ALTER TABLE genie_providers ADD COLUMN drift TEXT;
ALTER TABLE genie_providers ADD COLUMN drift_checked_at TEXT;
