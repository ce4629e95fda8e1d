-- An account's delete is recorded before its records go (docs/api.md, `users`). The delete
-- runs in batches, each a transaction of its own, and an account with a million leads takes
-- minutes; `deleting_at` says one was asked for, so `users get` can say so meanwhile and a
-- start finishes a delete that a crash or a stop cut short.
--
-- The index is partial: no account has the mark but while its delete runs, so the index is
-- empty in the normal course, and the start's `deleting_at IS NOT NULL` reads only marked
-- accounts however many there are.
ALTER TABLE users ADD COLUMN deleting_at TEXT;
CREATE INDEX IF NOT EXISTS users_deleting ON users(deleting_at) WHERE deleting_at IS NOT NULL;
