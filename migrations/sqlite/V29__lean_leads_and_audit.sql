-- Fewer bytes per lead create (issue #16, round three; docs/storage.md).
--
-- leads_agent_status_time (agent_id, status, created_at), about 84 bytes a lead, served only
-- `leads all` with both data.filters.agentId and status. Without it that listing walks the
-- genie's leads in time order (leads_agent_time) and checks each row's status: status has
-- four values, so a page of 50 is found after about 200 rows, as for priority since V11.
-- Counts and stats by status come from lead_status_counts, not from an index.
DROP INDEX leads_agent_status_time;

-- The audit log's rows were keyed by their id (TEXT PRIMARY KEY), an index of about 50 bytes
-- a row that no query reads: the log is listed by user and time (activities_user_time) or by
-- time (activities_time), never fetched by id. The table is rebuilt without it; ids stay as
-- they were (UUID v7, made by the service).
CREATE TABLE activities_new (
    id         TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    resource   TEXT NOT NULL,
    action     TEXT NOT NULL,
    record_id  TEXT,
    summary    TEXT NOT NULL,
    ip         TEXT,
    created_at TEXT NOT NULL
);
INSERT INTO activities_new (id, user_id, resource, action, record_id, summary, ip, created_at)
    SELECT id, user_id, resource, action, record_id, summary, ip, created_at FROM activities ORDER BY created_at, id;
DROP TABLE activities;
ALTER TABLE activities_new RENAME TO activities;
CREATE INDEX activities_user_time ON activities(user_id, created_at);
CREATE INDEX activities_time ON activities(created_at);
