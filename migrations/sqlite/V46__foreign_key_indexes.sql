-- Every foreign key's referencing column now leads an index (issue #16; docs/storage.md,
-- "Foreign keys and their indexes"). Deleting a parent row makes SQLite run the key's action
-- (`CASCADE` or `SET NULL`) as a query on the referencing table by that column, and without an
-- index the query reads the whole table: a lead's delete read every lead for
-- `primary_lead_id` (278 ms a delete at 1,000,000 leads, 35 ms at 100,000), holding the one
-- writer meanwhile. A genie's delete read every QR code and marketplace row, a user's every
-- test run, note, install and team of every user.
--
-- The nullable ones are partial: `primary_lead_id` is unset on a typical lead, so its index
-- costs such a lead nothing (the key's query `primary_lead_id = ?` implies IS NOT NULL, which
-- lets SQLite use the partial index).
CREATE INDEX IF NOT EXISTS leads_primary_lead ON leads(primary_lead_id) WHERE primary_lead_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS lead_notes_user ON lead_notes(user_id) WHERE user_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS marketplace_listings_source ON marketplace_listings(source_genie_id) WHERE source_genie_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS marketplace_installs_genie ON marketplace_installs(genie_id) WHERE genie_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS marketplace_installs_user ON marketplace_installs(user_id);
CREATE INDEX IF NOT EXISTS qr_codes_genie ON qr_codes(genie_id);
CREATE INDEX IF NOT EXISTS teams_owner ON teams(owner_id);
CREATE INDEX IF NOT EXISTS genie_tests_user ON genie_tests(user_id);
CREATE INDEX IF NOT EXISTS genie_test_runs_user ON genie_test_runs(user_id);
