-- The counterpart of SQLite's V34 (issue #16, round three; docs/storage.md): no index on
-- leads (agent_id, status, created_at), which served only the agentId-and-status listing
-- (leads_agent_time serves it, checking status), and no primary key on the audit log's id,
-- which no query reads (the log is listed by user and time, or by time).
DROP INDEX leads_agent_status_time;
ALTER TABLE activities DROP CONSTRAINT activities_pkey;
