-- The audit log in fewer bytes (issue #16, round ten; docs/storage.md): ids as the 16 bytes
-- of their UUID instead of 36 characters, the time as milliseconds since the Unix epoch
-- instead of 24 characters. Both shrink the row and the two time indexes (by user and time,
-- by time), which carry them as keys. db::activities makes the API's text forms.
--
-- Written so that a second run changes nothing: a value already converted is kept as it is.
-- A text id that is not a UUID in canonical form keeps its UTF-8 bytes (db::activities::Key).
CREATE TABLE activities_new (
    id         BLOB NOT NULL,
    user_id    BLOB NOT NULL,
    resource   TEXT NOT NULL,
    action     TEXT NOT NULL,
    record_id  TEXT,
    summary    TEXT NOT NULL,
    ip         TEXT,
    created_at INTEGER NOT NULL
);
INSERT INTO activities_new (id, user_id, resource, action, record_id, summary, ip, created_at)
    SELECT
        CASE WHEN typeof(id) <> 'text' THEN id
             WHEN id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
                  THEN unhex(replace(id, '-', ''))
             ELSE CAST(id AS BLOB) END,
        CASE WHEN typeof(user_id) <> 'text' THEN user_id
             WHEN user_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
                  THEN unhex(replace(user_id, '-', ''))
             ELSE CAST(user_id AS BLOB) END,
        resource, action, record_id, summary, ip,
        -- The service wrote 'YYYY-MM-DDTHH:MM:SS.mmmZ': whole seconds, then the milliseconds.
        CASE WHEN typeof(created_at) = 'integer' THEN created_at
             ELSE unixepoch(substr(created_at, 1, 19)) * 1000 + CAST(substr(created_at, 21, 3) AS INTEGER) END
    FROM activities ORDER BY rowid;
DROP TABLE activities;
ALTER TABLE activities_new RENAME TO activities;
CREATE INDEX activities_user_time ON activities(user_id, created_at);
CREATE INDEX activities_time ON activities(created_at);
