-- The counterpart of SQLite's V46 (issue #16; docs/storage.md, "Foreign keys and their
-- indexes"): every foreign key's referencing column leads an index. PostgreSQL makes none
-- for a foreign key by itself, and deleting a parent row runs the key's action (`CASCADE` or
-- `SET NULL`) as a query on the referencing table by that column: without an index, a lead's
-- delete read every lead for `primary_lead_id`, a genie's every QR code and marketplace row,
-- a user's every test run, note, install and team of every user.
--
-- The nullable ones are partial (the key's query `primary_lead_id = $1` implies IS NOT NULL):
-- `primary_lead_id` is unset on a typical lead, whose size the index then leaves alone.
CREATE INDEX IF NOT EXISTS leads_primary_lead ON leads (primary_lead_id) WHERE primary_lead_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS lead_notes_user ON lead_notes (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS marketplace_listings_source ON marketplace_listings (source_genie_id) WHERE source_genie_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS marketplace_installs_genie ON marketplace_installs (genie_id) WHERE genie_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS marketplace_installs_user ON marketplace_installs (user_id);
CREATE INDEX IF NOT EXISTS qr_codes_genie ON qr_codes (genie_id);
CREATE INDEX IF NOT EXISTS teams_owner ON teams (owner_id);
CREATE INDEX IF NOT EXISTS genie_tests_user ON genie_tests (user_id);
CREATE INDEX IF NOT EXISTS genie_test_runs_user ON genie_test_runs (user_id);
