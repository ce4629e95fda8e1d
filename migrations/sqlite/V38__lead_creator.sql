-- Who created a lead is stored only when it is not the lead's own user (issue #16, round ten;
-- docs/storage.md): NULL means the lead's user, the usual case, which saves the 36
-- characters of a UUID on nearly every lead. db::leads::CREATED_ENTRY reads
-- COALESCE(created_by, user_id); moving a lead to another user writes the creator first
-- (db::leads::update). No trigger watches this column.
UPDATE leads SET created_by = NULL WHERE created_by = user_id;
