-- The counterpart of SQLite's V37 (issue #16, round ten; docs/storage.md): the audit log's
-- ids as the 16 bytes of their UUID, its time as milliseconds since the Unix epoch, so that
-- db::activities reads and writes the same values on both engines and a move between them
-- copies the rows as they are. The two indexes are rebuilt by the type change.
ALTER TABLE activities
    ALTER COLUMN id TYPE bytea USING (
        CASE WHEN id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
             THEN decode(replace(id, '-', ''), 'hex')
             ELSE convert_to(id, 'UTF8') END),
    ALTER COLUMN user_id TYPE bytea USING (
        CASE WHEN user_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
             THEN decode(replace(user_id, '-', ''), 'hex')
             ELSE convert_to(user_id, 'UTF8') END),
    ALTER COLUMN created_at TYPE bigint USING (
        floor(extract(epoch FROM created_at::timestamptz) * 1000)::bigint);
