-- A move of a genie to another voice platform under way: what it has created there so far,
-- so that a move cut short by a crash is undone on restart (job `genie.move_resolve`).
-- The row goes in the transaction that switches the genie over, or once a failed move is
-- cleaned up.
CREATE TABLE genie_moves (
    genie_id TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    from_provider TEXT NOT NULL,
    to_provider TEXT NOT NULL,
    new_agent_id TEXT,
    created_documents TEXT NOT NULL DEFAULT '[]',
    created_numbers TEXT NOT NULL DEFAULT '[]',
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
