-- PostgreSQL side of sqlite V35: conversation counts per user and status, kept by triggers,
-- so that the count of a user's `conversations all` page reads a row or a few.
CREATE TABLE conversation_counts (
    user_id TEXT NOT NULL,
    status  TEXT NOT NULL,
    n       BIGINT NOT NULL,
    PRIMARY KEY (user_id, status)
);

CREATE FUNCTION genied_conversation_status_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE conversation_counts SET n = n - 1
            WHERE user_id = OLD.user_id AND status = OLD.status;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO conversation_counts (user_id, status, n) VALUES (NEW.user_id, NEW.status, 1)
            ON CONFLICT (user_id, status) DO UPDATE SET n = conversation_counts.n + 1;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER conversation_counts_aid AFTER INSERT OR DELETE ON conversations
    FOR EACH ROW EXECUTE FUNCTION genied_conversation_status_counted();
CREATE TRIGGER conversation_counts_au AFTER UPDATE OF user_id, status ON conversations
    FOR EACH ROW EXECUTE FUNCTION genied_conversation_status_counted();

INSERT INTO conversation_counts (user_id, status, n)
    SELECT user_id, status, COUNT(*) FROM conversations GROUP BY 1, 2;
