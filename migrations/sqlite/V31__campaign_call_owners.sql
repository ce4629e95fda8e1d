-- Several instances on one database: a campaign call that an instance is placing or
-- simulating names that instance (`owner`) and until when it holds the call (`lease_until`,
-- renewed while the instance lives). A starting instance closes only the open calls of a
-- previous life of its own or of an instance whose lease ran out, never those another live
-- instance is placing (src/service/campaigns/dialing.rs). SQLite has one instance, which
-- closes every open call at start, as before.
ALTER TABLE campaign_calls ADD COLUMN owner TEXT;
ALTER TABLE campaign_calls ADD COLUMN lease_until TEXT;
CREATE INDEX campaign_calls_held ON campaign_calls (owner, lease_until) WHERE status <> 'ended';
