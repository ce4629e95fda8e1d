-- Mirrors migrations/sqlite/V32: the instance holding an open campaign call, and its lease.
ALTER TABLE campaign_calls ADD COLUMN owner TEXT;
ALTER TABLE campaign_calls ADD COLUMN lease_until TEXT;
CREATE INDEX campaign_calls_held ON campaign_calls (owner, lease_until) WHERE status <> 'ended';
