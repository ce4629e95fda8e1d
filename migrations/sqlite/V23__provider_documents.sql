-- Copies of documents at voice platforms other than the default one (a genie living at
-- another platform, or moved there): the platform's id of the copy, and the content it was
-- made from, so a document whose text changed gets a fresh copy.
CREATE TABLE provider_documents (
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    external_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (document_id, provider)
);
