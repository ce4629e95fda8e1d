-- Tools a genie may call during a conversation (JSON array, see service::genie_tools) and
-- the sites allowed to embed its chat widget (JSON array of origins; empty: genied's own
-- page only). Marketplace listings carry the tools too, without credential references.
ALTER TABLE genies ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';
ALTER TABLE genies ADD COLUMN allowed_origins TEXT NOT NULL DEFAULT '[]';
ALTER TABLE marketplace_listings ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';
