-- Conversation counts per user and status (issue #16, a million records). The `count` of a
-- user's `conversations all` page counted every conversation they own, from the index:
-- 9 ms at 100,000 and in proportion beyond. Kept by triggers on conversations (its user is
-- on the row), so an unfiltered or status-filtered count reads a row or a few.
CREATE TABLE conversation_counts (
    user_id TEXT NOT NULL,
    status  TEXT NOT NULL,
    n       INTEGER NOT NULL,
    PRIMARY KEY (user_id, status)
) WITHOUT ROWID;

CREATE TRIGGER conversation_counts_ai AFTER INSERT ON conversations BEGIN
    INSERT INTO conversation_counts (user_id, status, n) VALUES (new.user_id, new.status, 1)
        ON CONFLICT (user_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER conversation_counts_ad AFTER DELETE ON conversations BEGIN
    UPDATE conversation_counts SET n = n - 1 WHERE user_id = old.user_id AND status = old.status;
END;
CREATE TRIGGER conversation_counts_au AFTER UPDATE OF user_id, status ON conversations BEGIN
    UPDATE conversation_counts SET n = n - 1 WHERE user_id = old.user_id AND status = old.status;
    INSERT INTO conversation_counts (user_id, status, n) VALUES (new.user_id, new.status, 1)
        ON CONFLICT (user_id, status) DO UPDATE SET n = n + 1;
END;

INSERT INTO conversation_counts (user_id, status, n)
    SELECT user_id, status, COUNT(*) FROM conversations WHERE true GROUP BY 1, 2;
