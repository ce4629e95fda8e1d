-- The counterpart of SQLite's V38 (issue #16, round ten; docs/storage.md): a lead's creator
-- is stored only when it is not the lead's own user; NULL means the lead's user.
UPDATE leads SET created_by = NULL WHERE created_by = user_id;
