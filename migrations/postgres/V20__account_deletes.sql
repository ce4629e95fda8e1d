-- The counterpart of SQLite's V47 (docs/api.md, `users`): an account's delete is recorded
-- before its records go in batches, so `users get` says so meanwhile and a start finishes a
-- delete that a crash or a stop cut short. The index is partial, empty in the normal course.
-- Both statements may run again as no-ops (the upgrade tests replay the migrations after an
-- older one over a newer schema).
ALTER TABLE users ADD COLUMN IF NOT EXISTS deleting_at TEXT;
CREATE INDEX IF NOT EXISTS users_deleting ON users(deleting_at) WHERE deleting_at IS NOT NULL;
