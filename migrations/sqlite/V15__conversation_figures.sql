-- Per-conversation figures (#20): each LLM turn's latency, tokens, tool calls and model
-- (`llm_turns`, a JSON array), and their sums, kept with the conversation so `get` shows
-- them and analytics can add them up. Costs are in millionths of the price table's currency,
-- computed when the turn is recorded; `unpriced_turns` counts turns whose model had no price.
ALTER TABLE conversations ADD COLUMN llm_turns TEXT NOT NULL DEFAULT '[]';
ALTER TABLE conversations ADD COLUMN tokens_in INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN tokens_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN tool_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN unpriced_turns INTEGER NOT NULL DEFAULT 0;
