-- The counterpart of SQLite's V47 (docs/api.md, `users`): an account's delete is recorded
-- before its records go in batches, so `users get` says so meanwhile and a start finishes a
-- delete that a crash or a stop cut short. The index is partial, empty in the normal course.
ALTER TABLE users ADD COLUMN deleting_at TEXT;
CREATE INDEX IF NOT EXISTS users_deleting ON users(deleting_at) WHERE deleting_at IS NOT NULL;
