-- Analytics (#20): hourly and daily rollups of conversations and leads, kept by triggers in the same
-- transaction as every write to the rows they sum, so `analytics overview` and `timeseries`
-- add up at most one row per (owner, hour, genie) instead of reading every conversation.
-- Hours are the first 13 characters of the RFC 3339 UTC timestamps ('2026-11-23T02').
-- A conversation is a success when it was analysed and its analysis is neither negative in
-- sentiment nor a complaint.
CREATE TABLE conversation_rollup (
    user_id       TEXT NOT NULL,
    hour          TEXT NOT NULL,
    genie_id      TEXT NOT NULL,
    conversations INTEGER NOT NULL,
    duration_sum  INTEGER NOT NULL,
    analyzed      INTEGER NOT NULL,
    successes     INTEGER NOT NULL,
    tokens_in     INTEGER NOT NULL,
    tokens_out    INTEGER NOT NULL,
    cost_micros   INTEGER NOT NULL,
    PRIMARY KEY (user_id, hour, genie_id)
) WITHOUT ROWID;
-- Admins' all-users view reads by hour alone.
CREATE INDEX conversation_rollup_hour ON conversation_rollup(hour);
-- The same by day: a range of whole days reads one row per (day, genie) instead of 24, so a
-- year is a few thousand rows (analytics reads partial first and last days by the hour).
CREATE TABLE conversation_rollup_daily (
    user_id       TEXT NOT NULL,
    day           TEXT NOT NULL,
    genie_id      TEXT NOT NULL,
    conversations INTEGER NOT NULL,
    duration_sum  INTEGER NOT NULL,
    analyzed      INTEGER NOT NULL,
    successes     INTEGER NOT NULL,
    tokens_in     INTEGER NOT NULL,
    tokens_out    INTEGER NOT NULL,
    cost_micros   INTEGER NOT NULL,
    PRIMARY KEY (user_id, day, genie_id)
) WITHOUT ROWID;
CREATE INDEX conversation_rollup_daily_day ON conversation_rollup_daily(day);

CREATE TRIGGER conversation_rollup_ai AFTER INSERT ON conversations BEGIN
    INSERT INTO conversation_rollup (user_id, hour, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (new.user_id, substr(new.started_at, 1, 13), COALESCE(new.genie_id, ''), 1, new.duration_seconds,
            (new.analysis IS NOT NULL), (new.analysis IS NOT NULL AND json_valid(new.analysis) AND COALESCE(json_extract(new.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(new.analysis, '$.intent'), '') <> 'complaint'), new.tokens_in, new.tokens_out, new.cost_micros)
    ON CONFLICT (user_id, hour, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup_daily (user_id, day, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (new.user_id, substr(new.started_at, 1, 10), COALESCE(new.genie_id, ''), 1, new.duration_seconds,
            (new.analysis IS NOT NULL), (new.analysis IS NOT NULL AND json_valid(new.analysis) AND COALESCE(json_extract(new.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(new.analysis, '$.intent'), '') <> 'complaint'), new.tokens_in, new.tokens_out, new.cost_micros)
    ON CONFLICT (user_id, day, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
END;
CREATE TRIGGER conversation_rollup_ad AFTER DELETE ON conversations BEGIN
    INSERT INTO conversation_rollup (user_id, hour, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (old.user_id, substr(old.started_at, 1, 13), COALESCE(old.genie_id, ''), -1, -old.duration_seconds,
            -(old.analysis IS NOT NULL), -(old.analysis IS NOT NULL AND json_valid(old.analysis) AND COALESCE(json_extract(old.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(old.analysis, '$.intent'), '') <> 'complaint'), -old.tokens_in, -old.tokens_out, -old.cost_micros)
    ON CONFLICT (user_id, hour, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup_daily (user_id, day, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (old.user_id, substr(old.started_at, 1, 10), COALESCE(old.genie_id, ''), -1, -old.duration_seconds,
            -(old.analysis IS NOT NULL), -(old.analysis IS NOT NULL AND json_valid(old.analysis) AND COALESCE(json_extract(old.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(old.analysis, '$.intent'), '') <> 'complaint'), -old.tokens_in, -old.tokens_out, -old.cost_micros)
    ON CONFLICT (user_id, day, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
END;
CREATE TRIGGER conversation_rollup_au AFTER UPDATE OF user_id, genie_id, started_at, duration_seconds, analysis, tokens_in, tokens_out, cost_micros ON conversations BEGIN
    INSERT INTO conversation_rollup (user_id, hour, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (old.user_id, substr(old.started_at, 1, 13), COALESCE(old.genie_id, ''), -1, -old.duration_seconds,
            -(old.analysis IS NOT NULL), -(old.analysis IS NOT NULL AND json_valid(old.analysis) AND COALESCE(json_extract(old.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(old.analysis, '$.intent'), '') <> 'complaint'), -old.tokens_in, -old.tokens_out, -old.cost_micros)
    ON CONFLICT (user_id, hour, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup_daily (user_id, day, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (old.user_id, substr(old.started_at, 1, 10), COALESCE(old.genie_id, ''), -1, -old.duration_seconds,
            -(old.analysis IS NOT NULL), -(old.analysis IS NOT NULL AND json_valid(old.analysis) AND COALESCE(json_extract(old.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(old.analysis, '$.intent'), '') <> 'complaint'), -old.tokens_in, -old.tokens_out, -old.cost_micros)
    ON CONFLICT (user_id, day, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup (user_id, hour, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (new.user_id, substr(new.started_at, 1, 13), COALESCE(new.genie_id, ''), 1, new.duration_seconds,
            (new.analysis IS NOT NULL), (new.analysis IS NOT NULL AND json_valid(new.analysis) AND COALESCE(json_extract(new.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(new.analysis, '$.intent'), '') <> 'complaint'), new.tokens_in, new.tokens_out, new.cost_micros)
    ON CONFLICT (user_id, hour, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup_daily (user_id, day, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (new.user_id, substr(new.started_at, 1, 10), COALESCE(new.genie_id, ''), 1, new.duration_seconds,
            (new.analysis IS NOT NULL), (new.analysis IS NOT NULL AND json_valid(new.analysis) AND COALESCE(json_extract(new.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(new.analysis, '$.intent'), '') <> 'complaint'), new.tokens_in, new.tokens_out, new.cost_micros)
    ON CONFLICT (user_id, day, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
END;

INSERT INTO conversation_rollup
SELECT user_id, substr(started_at, 1, 13), COALESCE(genie_id, ''), COUNT(*), SUM(duration_seconds),
       SUM(analysis IS NOT NULL), SUM((conversations.analysis IS NOT NULL AND json_valid(conversations.analysis) AND COALESCE(json_extract(conversations.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(conversations.analysis, '$.intent'), '') <> 'complaint')), SUM(tokens_in), SUM(tokens_out), SUM(cost_micros)
FROM conversations GROUP BY 1, 2, 3;
INSERT INTO conversation_rollup_daily
SELECT user_id, substr(hour, 1, 10), genie_id, SUM(conversations), SUM(duration_sum), SUM(analyzed),
       SUM(successes), SUM(tokens_in), SUM(tokens_out), SUM(cost_micros)
FROM conversation_rollup GROUP BY 1, 2, 3;

-- Leads by the hour they were created and their current status ('' for none).
CREATE TABLE lead_rollup (
    user_id  TEXT NOT NULL,
    hour     TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    status   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (user_id, hour, agent_id, status)
) WITHOUT ROWID;
CREATE INDEX lead_rollup_hour ON lead_rollup(hour);
CREATE TABLE lead_rollup_daily (
    user_id  TEXT NOT NULL,
    day      TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    status   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (user_id, day, agent_id, status)
) WITHOUT ROWID;
CREATE INDEX lead_rollup_daily_day ON lead_rollup_daily(day);

CREATE TRIGGER lead_rollup_ai AFTER INSERT ON leads BEGIN
    INSERT INTO lead_rollup (user_id, hour, agent_id, status, n)
    VALUES (new.user_id, substr(new.created_at, 1, 13), new.agent_id, COALESCE(new.status, ''), 1)
    ON CONFLICT (user_id, hour, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup_daily (user_id, day, agent_id, status, n)
    VALUES (new.user_id, substr(new.created_at, 1, 10), new.agent_id, COALESCE(new.status, ''), 1)
    ON CONFLICT (user_id, day, agent_id, status) DO UPDATE SET n = n + excluded.n;
END;
CREATE TRIGGER lead_rollup_ad AFTER DELETE ON leads BEGIN
    INSERT INTO lead_rollup (user_id, hour, agent_id, status, n)
    VALUES (old.user_id, substr(old.created_at, 1, 13), old.agent_id, COALESCE(old.status, ''), -1)
    ON CONFLICT (user_id, hour, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup_daily (user_id, day, agent_id, status, n)
    VALUES (old.user_id, substr(old.created_at, 1, 10), old.agent_id, COALESCE(old.status, ''), -1)
    ON CONFLICT (user_id, day, agent_id, status) DO UPDATE SET n = n + excluded.n;
END;
CREATE TRIGGER lead_rollup_au AFTER UPDATE OF user_id, agent_id, status, created_at ON leads BEGIN
    INSERT INTO lead_rollup (user_id, hour, agent_id, status, n)
    VALUES (old.user_id, substr(old.created_at, 1, 13), old.agent_id, COALESCE(old.status, ''), -1)
    ON CONFLICT (user_id, hour, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup_daily (user_id, day, agent_id, status, n)
    VALUES (old.user_id, substr(old.created_at, 1, 10), old.agent_id, COALESCE(old.status, ''), -1)
    ON CONFLICT (user_id, day, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup (user_id, hour, agent_id, status, n)
    VALUES (new.user_id, substr(new.created_at, 1, 13), new.agent_id, COALESCE(new.status, ''), 1)
    ON CONFLICT (user_id, hour, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup_daily (user_id, day, agent_id, status, n)
    VALUES (new.user_id, substr(new.created_at, 1, 10), new.agent_id, COALESCE(new.status, ''), 1)
    ON CONFLICT (user_id, day, agent_id, status) DO UPDATE SET n = n + excluded.n;
END;

INSERT INTO lead_rollup
SELECT user_id, substr(created_at, 1, 13), agent_id, COALESCE(status, ''), COUNT(*)
FROM leads GROUP BY 1, 2, 3, 4;
INSERT INTO lead_rollup_daily
SELECT user_id, substr(hour, 1, 10), agent_id, status, SUM(n) FROM lead_rollup GROUP BY 1, 2, 3, 4;
