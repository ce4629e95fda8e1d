-- The counterpart of SQLite's V41 (issue #16, round fourteen; docs/storage.md): a lead's genie
-- and user as keys, a canonical UUID as its 16 bytes and any other id as its UTF-8 bytes
-- (db::keys), in `leads` and in the tables its triggers keep, so that db::leads binds and
-- reads the same values on both engines and a move between them copies the rows as they are.
-- `users.key` and `genies.key` (generated, unique) are what the lead's foreign keys reference.
-- `genied_key(id)` and `genied_key_text(key)` are the two forms' conversions, for queries that
-- compare an id given as text with a stored key (SQLite has them as functions of the
-- connection).
--
-- Written so that a second run changes nothing (tests unapply a migration before this one and
-- run every later one again): the columns are converted only while they are still text.
CREATE OR REPLACE FUNCTION genied_key(id text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                THEN decode(replace(id, '-', ''), 'hex')
                -- The UTF-8 bytes: `escape` reads every character as itself but a backslash,
                -- which is doubled first. (`convert_to` is not immutable.)
                ELSE decode(replace(id, '\', '\\'), 'escape') END
$$;
CREATE OR REPLACE FUNCTION genied_key_text(k bytea) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN length(k) = 16 THEN encode(k, 'hex')::uuid::text
                ELSE convert_from(k, 'UTF8') END
$$;

ALTER TABLE users ADD COLUMN IF NOT EXISTS key bytea GENERATED ALWAYS AS (genied_key(id)) STORED;
CREATE UNIQUE INDEX IF NOT EXISTS users_key ON users(key);
ALTER TABLE genies ADD COLUMN IF NOT EXISTS key bytea GENERATED ALWAYS AS (genied_key(id)) STORED;
CREATE UNIQUE INDEX IF NOT EXISTS genies_key ON genies(key);

DO $$
DECLARE fk name;
BEGIN
    IF (SELECT atttypid FROM pg_attribute WHERE attrelid = 'leads'::regclass AND attname = 'user_id')
       = 'text'::regtype THEN
        -- PostgreSQL refuses to change the type of a column a trigger's `UPDATE OF` names.
        DROP TRIGGER leads_counted_au ON leads;
        DROP TRIGGER leads_owner_counted_au ON leads;
        FOR fk IN SELECT conname FROM pg_constraint
                  WHERE conrelid = 'leads'::regclass AND contype = 'f'
                    AND confrelid IN ('users'::regclass, 'genies'::regclass)
        LOOP
            EXECUTE format('ALTER TABLE leads DROP CONSTRAINT %I', fk);
        END LOOP;
        ALTER TABLE leads
            ALTER COLUMN agent_id TYPE bytea USING genied_key(agent_id),
            ALTER COLUMN user_id TYPE bytea USING genied_key(user_id);
        ALTER TABLE leads
            ADD CONSTRAINT leads_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES genies(key) ON DELETE CASCADE,
            ADD CONSTRAINT leads_user_id_fkey FOREIGN KEY (user_id) REFERENCES users(key) ON DELETE CASCADE;
        CREATE TRIGGER leads_counted_au AFTER UPDATE OF agent_id, user_id, status, created_at ON leads
            FOR EACH ROW EXECUTE FUNCTION genied_leads_counted();
        CREATE TRIGGER leads_owner_counted_au AFTER UPDATE OF agent_id, status ON leads
            FOR EACH ROW EXECUTE FUNCTION genied_lead_owner_counted();
    END IF;
    IF (SELECT atttypid FROM pg_attribute WHERE attrelid = 'lead_status_counts'::regclass AND attname = 'user_id')
       = 'text'::regtype THEN
        ALTER TABLE lead_status_counts
            ALTER COLUMN agent_id TYPE bytea USING genied_key(agent_id),
            ALTER COLUMN user_id TYPE bytea USING genied_key(user_id);
        ALTER TABLE lead_rollup
            ALTER COLUMN agent_id TYPE bytea USING genied_key(agent_id),
            ALTER COLUMN user_id TYPE bytea USING genied_key(user_id);
        ALTER TABLE lead_rollup_daily
            ALTER COLUMN agent_id TYPE bytea USING genied_key(agent_id),
            ALTER COLUMN user_id TYPE bytea USING genied_key(user_id);
    END IF;
END $$;

-- The counters' functions take and look up the keys.
DROP FUNCTION IF EXISTS genied_lead_count(text, text, text, text, bigint);
CREATE OR REPLACE FUNCTION genied_lead_count(agent bytea, usr bytea, st TEXT, created TEXT, d BIGINT)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF d > 0 THEN
        INSERT INTO lead_status_counts (agent_id, user_id, status, n)
            VALUES (agent, usr, COALESCE(st, ''), 1)
            ON CONFLICT (agent_id, user_id, status) DO UPDATE SET n = lead_status_counts.n + 1;
    ELSE
        UPDATE lead_status_counts SET n = n - 1
            WHERE agent_id = agent AND user_id = usr AND status = COALESCE(st, '');
    END IF;
    INSERT INTO lead_rollup (user_id, hour, agent_id, status, n)
        VALUES (usr, substr(created, 1, 13), agent, COALESCE(st, ''), d)
        ON CONFLICT (user_id, hour, agent_id, status) DO UPDATE SET n = lead_rollup.n + excluded.n;
    INSERT INTO lead_rollup_daily (user_id, day, agent_id, status, n)
        VALUES (usr, substr(created, 1, 10), agent, COALESCE(st, ''), d)
        ON CONFLICT (user_id, day, agent_id, status) DO UPDATE SET n = lead_rollup_daily.n + excluded.n;
END $$;

CREATE OR REPLACE FUNCTION genied_lead_owner_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE lead_owner_counts SET n = n - 1
            WHERE owner_id = (SELECT g.user_id FROM genies g WHERE g.key = OLD.agent_id)
              AND status = COALESCE(OLD.status, '');
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO lead_owner_counts (owner_id, status, n)
            SELECT g.user_id, COALESCE(NEW.status, ''), 1 FROM genies g WHERE g.key = NEW.agent_id
            ON CONFLICT (owner_id, status) DO UPDATE SET n = lead_owner_counts.n + 1;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION genied_genie_delete_leads() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM leads WHERE agent_id = OLD.key;
    RETURN OLD;
END $$;

-- Made again from the genies' counts, as V12 made it: a re-run of V12 over this schema (which
-- the tests do) finds no genie by the text of a key and leaves it short.
DELETE FROM lead_owner_counts;
INSERT INTO lead_owner_counts (owner_id, status, n)
    SELECT g.user_id, s.status, SUM(s.n) FROM lead_status_counts s JOIN genies g ON g.key = s.agent_id
    GROUP BY 1, 2;
