//! Knowledge-base documents, their genie links and their retrieval chunks. Every lookup a
//! user can reach takes a `Scope` that filters by owner (plus public documents) in SQL.

use crate::db::sql::types::Value as SqlValue;
use crate::db::sql::{Connection, OptionalExtension, Row, ToSql, params, params_from_iter};
use serde::Serialize;
use serde_json::{Value, json};

use super::{new_id, now};
use crate::doc_index::{DocIndex, Indexed};

/// Who is asking and what they may see.
#[derive(Debug, Clone)]
pub struct Scope {
    pub user_id: String,
    /// Admin with `adminMode`: every document, with owner information.
    pub all: bool,
}

/// Who may read a document (the `d` alias): its owner, and everyone when it is public. Its
/// one parameter is the reader's id.
const READABLE_BY: &str = "(d.user_id = ? OR d.is_public = 1)";

impl Scope {
    /// SQL condition on the `d` alias and its parameters, for reading.
    fn visible(&self) -> (String, Vec<SqlValue>) {
        if self.all {
            ("1 = 1".into(), vec![])
        } else {
            (
                READABLE_BY.into(),
                vec![SqlValue::Text(self.user_id.clone())],
            )
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Document {
    pub id: String,
    pub user_id: String,
    pub external_id: Option<String>,
    pub name: String,
    #[serde(rename = "type")]
    pub doc_type: String,
    pub status: String,
    pub error: Option<String>,
    pub is_active: bool,
    pub is_public: bool,
    pub folder_id: Option<String>,
    pub folder_name: Option<String>,
    pub size_bytes: i64,
    pub source_url: Option<String>,
    pub original_hash: Option<String>,
    pub content_hash: Option<String>,
    pub filename: Option<String>,
    pub options: Value,
    pub created_at: String,
    pub updated_at: String,
    pub owner: Option<Value>,
}

const COLS: &str = "d.id, d.user_id, d.external_id, d.name, d.type, d.status, d.error, d.is_active, d.is_public,
    d.folder_id, f.name, d.size_bytes, d.source_url, d.original_hash, d.content_hash, d.filename, d.options,
    d.created_at, d.updated_at, u.full_name, u.email";
const FROM: &str = "documents d LEFT JOIN document_folders f ON f.id = d.folder_id LEFT JOIN users u ON u.id = d.user_id";

fn from_row(r: &Row) -> rusqlite::Result<Document> {
    let user_id: String = r.get(1)?;
    let owner = json!({"id": user_id, "full_name": r.get::<_, Option<String>>(19)?, "email": r.get::<_, Option<String>>(20)?});
    Ok(Document {
        id: r.get(0)?,
        user_id,
        external_id: r.get(2)?,
        name: r.get(3)?,
        doc_type: r.get(4)?,
        status: r.get(5)?,
        error: r.get(6)?,
        is_active: r.get(7)?,
        is_public: r.get(8)?,
        folder_id: r.get(9)?,
        folder_name: r.get(10)?,
        size_bytes: r.get(11)?,
        source_url: r.get(12)?,
        original_hash: r.get(13)?,
        content_hash: r.get(14)?,
        filename: r.get(15)?,
        options: super::json_col(r.get(16)?, json!({})),
        created_at: r.get(17)?,
        updated_at: r.get(18)?,
        owner: Some(owner),
    })
}

pub struct NewDocument<'a> {
    pub user_id: &'a str,
    pub name: &'a str,
    pub doc_type: &'a str,
    pub status: &'a str,
    pub folder_id: Option<&'a str>,
    pub is_public: bool,
    pub size_bytes: i64,
    pub source_url: Option<&'a str>,
    pub original_hash: Option<&'a str>,
    pub filename: Option<&'a str>,
    pub options: &'a Value,
}

pub fn insert(c: &Connection, new: &NewDocument) -> rusqlite::Result<String> {
    let id = new_id();
    let ts = now();
    c.execute(
        "INSERT INTO documents (id, user_id, name, type, status, is_public, folder_id, size_bytes, source_url,
            original_hash, filename, options, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)",
        params![
            id,
            new.user_id,
            new.name,
            new.doc_type,
            new.status,
            new.is_public,
            new.folder_id,
            new.size_bytes,
            new.source_url,
            new.original_hash,
            new.filename,
            new.options.to_string(),
            ts
        ],
    )?;
    Ok(id)
}

/// Any document by id, unscoped: for the pipeline only.
pub fn get_any(c: &Connection, id: &str) -> rusqlite::Result<Option<Document>> {
    c.query_row(
        &format!("SELECT {COLS} FROM {FROM} WHERE d.id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

/// A document the scope may read, by UUID or by external id.
pub fn find(
    c: &Connection,
    scope: &Scope,
    id_or_external: &str,
) -> rusqlite::Result<Option<Document>> {
    let (cond, mut p) = scope.visible();
    p.insert(0, SqlValue::Text(id_or_external.to_string()));
    c.query_row(
        &format!("SELECT {COLS} FROM {FROM} WHERE (d.id = ?1 OR d.external_id = ?1) AND {cond}"),
        params_from_iter(p),
        from_row,
    )
    .optional()
}

#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub search: Option<String>,
    /// `Some(true)` public only, `Some(false)` private only.
    pub public: Option<bool>,
    pub doc_type: Option<String>,
    pub folder_id: Option<Option<String>>,
    pub owner_id: Option<String>,
}

/// Turns free text into an FTS5 query: every word quoted, all required, the last one a prefix.
pub fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|ch: char| !ch.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{}\"", w.replace('"', "")))
        .collect();
    if words.is_empty() {
        return None;
    }
    Some(words.join(" "))
}

/// The owner's reader token of the index's `readers` column (migrations V36, V43, V44):
/// `u` and the hex of the owner's id, one token whatever characters the id has.
fn owner_token(user_id: &str) -> String {
    format!("u{}", hex::encode_upper(user_id))
}

/// The SQLite FTS5 query of a search for `words` (an FTS5 expression) among the chunks
/// `user_id` may search. While a chunk's document is completed and active, the index's
/// `readers` column holds its owner's token and `pub` for a public document, so FTS5 leaves
/// out other users' chunks and those no one may search before anything is ranked; the
/// answered rows are still checked against `documents` ([`search_row_sql`]). `content :`
/// keeps the words from matching the tokens.
fn searched_match(user_id: &str, words: &str) -> String {
    let owner = owner_token(user_id);
    format!("readers : (\"{owner}\" OR \"pub\") AND content : ({words})")
}

/// The SQLite FTS5 query of a list's content search for `words` among the chunks `scope`
/// lists: a user's own and public documents' whether searchable or not (a chunk that may
/// not be searched has the same tokens with an `x` in front, V44), everything for an admin.
fn listed_match(scope: &Scope, words: &str) -> String {
    if scope.all {
        return format!("content : ({words})");
    }
    let owner = owner_token(&scope.user_id);
    format!(
        "readers : (\"{owner}\" OR \"pub\" OR \"x{owner}\" OR \"xpub\") AND content : ({words})"
    )
}

/// An FTS5 query of quoted words (`"a" "b"` all, `"a" OR "b"` any) as a PostgreSQL
/// `to_tsquery` text: the same words, joined by `&` or `|`.
fn pg_tsquery(fts: &str) -> String {
    let mut out = String::new();
    let mut op = "";
    for (i, part) in fts.split('"').enumerate() {
        if i % 2 == 0 {
            if !out.is_empty() {
                op = if part.trim() == "OR" { " | " } else { " & " };
            }
            continue;
        }
        let word: String = part.chars().filter(|ch| ch.is_alphanumeric()).collect();
        if word.is_empty() {
            continue;
        }
        out.push_str(op);
        out.push_str(&word);
    }
    out
}

pub fn list(
    c: &Connection,
    scope: &Scope,
    f: &ListFilter,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<(Vec<Document>, i64)> {
    let (cond, mut p) = scope.visible();
    let mut wh = vec![cond];
    if let Some(term) = f.search.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        let like = format!(
            "%{}%",
            term.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        match fts_query(term) {
            Some(q) if c.is_postgres() => {
                wh.push(
                    "(d.name LIKE ? ESCAPE '\\' OR d.id IN (SELECT ch.document_id FROM document_chunks ch
                       WHERE ch.tsv @@ to_tsquery('english', ?)))"
                        .into(),
                );
                p.push(SqlValue::Text(like));
                p.push(SqlValue::Text(pg_tsquery(&q)));
            }
            Some(q) => {
                wh.push(
                    "(d.name LIKE ? ESCAPE '\\' OR d.id IN (SELECT ch.document_id FROM document_chunks_fts
                       JOIN document_chunks ch ON ch.id = document_chunks_fts.rowid WHERE document_chunks_fts MATCH ?))"
                        .into(),
                );
                p.push(SqlValue::Text(like));
                p.push(SqlValue::Text(listed_match(scope, &q)));
            }
            None => {
                wh.push("d.name LIKE ? ESCAPE '\\'".into());
                p.push(SqlValue::Text(like));
            }
        }
    }
    if let Some(public) = f.public {
        wh.push("d.is_public = ?".into());
        p.push(SqlValue::Integer(public as i64));
        if !public && !scope.all {
            // Private documents of others are never visible anyway; say it explicitly.
            wh.push("d.user_id = ?".into());
            p.push(SqlValue::Text(scope.user_id.clone()));
        }
    }
    if let Some(t) = &f.doc_type {
        wh.push("d.type = ?".into());
        p.push(SqlValue::Text(t.clone()));
    }
    match &f.folder_id {
        Some(Some(folder)) => {
            wh.push("d.folder_id = ?".into());
            p.push(SqlValue::Text(folder.clone()));
        }
        Some(None) => wh.push("d.folder_id IS NULL".into()),
        None => {}
    }
    if let Some(owner) = &f.owner_id {
        wh.push("d.user_id = ?".into());
        p.push(SqlValue::Text(owner.clone()));
    }
    let wh = wh.join(" AND ");
    let total: i64 = c.query_row(
        &format!("SELECT COUNT(*) FROM {FROM} WHERE {wh}"),
        params_from_iter(p.iter()),
        |r| r.get(0),
    )?;
    let mut p2 = p.clone();
    p2.push(SqlValue::Integer(limit));
    p2.push(SqlValue::Integer(offset));
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM {FROM} WHERE {wh} ORDER BY d.created_at DESC, d.id DESC LIMIT ? OFFSET ?"
    ))?;
    let docs = st
        .query_map(params_from_iter(p2), from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((docs, total))
}

/// Genies linked to a document, `{id, name}`; only the caller's genies unless `all`.
pub fn dependent_agents(
    c: &Connection,
    doc_id: &str,
    scope: &Scope,
) -> rusqlite::Result<Vec<Value>> {
    let mut st = c.prepare_cached(
        "SELECT g.id, g.name FROM genie_documents gd JOIN genies g ON g.id = gd.genie_id
         WHERE gd.document_id = ?1 AND (?2 OR g.user_id = ?3) ORDER BY gd.created_at, g.id",
    )?;
    st.query_map(params![doc_id, scope.all, scope.user_id], |r| {
        Ok(json!({"id": r.get::<_, String>(0)?, "name": r.get::<_, String>(1)?}))
    })?
    .collect()
}

/// Every genie linked to the document, whoever owns it (for provider sync).
pub fn linked_genies(c: &Connection, doc_id: &str) -> rusqlite::Result<Vec<String>> {
    let mut st = c.prepare_cached("SELECT genie_id FROM genie_documents WHERE document_id = ?1")?;
    st.query_map([doc_id], |r| r.get(0))?.collect()
}

/// A genie the user may attach documents to: `(id, external_agent_id)`.
pub fn owned_genie(
    c: &Connection,
    user_id: &str,
    any_owner: bool,
    genie_id: &str,
) -> rusqlite::Result<Option<(String, Option<String>)>> {
    c.query_row(
        "SELECT id, external_agent_id FROM genies WHERE id = ?1 AND (?2 OR user_id = ?3)",
        params![genie_id, any_owner, user_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// Links; returns false when the link already existed.
pub fn link(c: &Connection, genie_id: &str, doc_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "INSERT INTO genie_documents (genie_id, document_id, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT DO NOTHING",
        params![genie_id, doc_id, now()],
    )? == 1)
}

pub fn unlink(c: &Connection, genie_id: &str, doc_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM genie_documents WHERE genie_id = ?1 AND document_id = ?2",
        params![genie_id, doc_id],
    )? == 1)
}

/// The document linked to the genie whose id or external id is `doc_ref`, whoever may read
/// it now (a linked document may have become private to its owner since).
pub fn linked_document(
    c: &Connection,
    genie_id: &str,
    doc_ref: &str,
) -> rusqlite::Result<Option<String>> {
    c.query_row(
        "SELECT d.id FROM genie_documents gd JOIN documents d ON d.id = gd.document_id
         WHERE gd.genie_id = ?1 AND (d.id = ?2 OR d.external_id = ?2)",
        params![genie_id, doc_ref],
        |row| row.get(0),
    )
    .optional()
}

pub fn genie_document_ids(c: &Connection, genie_id: &str) -> rusqlite::Result<Vec<String>> {
    let mut st = c.prepare_cached("SELECT document_id FROM genie_documents WHERE genie_id = ?1")?;
    st.query_map([genie_id], |r| r.get(0))?.collect()
}

pub fn set_status(
    c: &Connection,
    id: &str,
    status: &str,
    error: Option<&str>,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE documents SET status = ?2, error = ?3, updated_at = ?4 WHERE id = ?1",
        params![id, status, error, now()],
    )?;
    Ok(())
}

pub fn set_content_hash(c: &Connection, id: &str, hash: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE documents SET content_hash = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, hash, now()],
    )?;
    Ok(())
}

pub fn set_external_id(c: &Connection, id: &str, external: Option<&str>) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE documents SET external_id = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, external, now()],
    )?;
    Ok(())
}

pub fn set_size(c: &Connection, id: &str, size: i64) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE documents SET size_bytes = ?2 WHERE id = ?1",
        params![id, size],
    )?;
    Ok(())
}

/// Metadata fields of `update` (mode data) and `bulk-update`.
#[derive(Debug, Default, Clone)]
pub struct MetaUpdate {
    pub name: Option<String>,
    pub is_active: Option<bool>,
    pub is_public: Option<bool>,
    pub folder_id: Option<Option<String>>,
}

impl MetaUpdate {
    pub fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.is_active.is_none()
            && self.is_public.is_none()
            && self.folder_id.is_none()
    }
}

pub fn update_meta(c: &Connection, id: &str, m: &MetaUpdate) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE documents SET name = COALESCE(?2, name), is_active = COALESCE(?3, is_active),
            is_public = COALESCE(?4, is_public),
            folder_id = CASE WHEN ?5 THEN ?6 ELSE folder_id END, updated_at = ?7
         WHERE id = ?1",
        params![
            id,
            m.name,
            m.is_active,
            m.is_public,
            m.folder_id.is_some(),
            m.folder_id.clone().flatten(),
            now()
        ],
    )?;
    Ok(n == 1)
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM documents WHERE id = ?1", [id])? == 1)
}

/// How many records still use a stored file.
pub fn hash_uses(c: &Connection, hash: &str) -> rusqlite::Result<i64> {
    c.query_row(
        "SELECT COUNT(*) FROM documents WHERE original_hash = ?1 OR content_hash = ?1",
        [hash],
        |r| r.get(0),
    )
}

pub fn replace_chunks(c: &Connection, doc_id: &str, chunks: &[String]) -> rusqlite::Result<()> {
    c.execute(
        "DELETE FROM document_chunks WHERE document_id = ?1",
        [doc_id],
    )?;
    // Many rows a statement: a large document has tens of thousands of chunks, and on
    // PostgreSQL each statement is a round trip to the server.
    let mut seq = 0i64;
    for batch in chunks.chunks(CHUNK_BATCH) {
        let rows: Vec<String> = (0..batch.len())
            .map(|i| format!("(?1, ?{}, ?{})", 2 * i + 2, 2 * i + 3))
            .collect();
        let sql = format!(
            "INSERT INTO document_chunks (document_id, seq, content) VALUES {}",
            rows.join(", ")
        );
        let seqs: Vec<i64> = (seq..seq + batch.len() as i64).collect();
        let mut p: Vec<&dyn ToSql> = vec![&doc_id];
        for (s, ch) in seqs.iter().zip(batch) {
            p.push(s);
            p.push(ch);
        }
        // The full batch's statement is the same every time; the last, shorter one is not.
        let mut st = if batch.len() == CHUNK_BATCH {
            c.prepare_cached(&sql)?
        } else {
            c.prepare(&sql)?
        };
        st.execute(p.as_slice())?;
        seq += batch.len() as i64;
    }
    Ok(())
}

/// Chunk rows one INSERT writes (two parameters each, well under SQLite's 32,766).
const CHUNK_BATCH: usize = 200;

#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub document_id: String,
    pub document_name: String,
    pub chunk_index: i64,
    pub snippet: String,
    pub content: String,
    pub score: f64,
}

/// The best chunks for an FTS query, bm25-ranked, among the completed active documents
/// `user_id` reads (theirs and public ones), optionally only those linked to one genie.
/// Every search is a user's: the API's and page chat's, an admin's included.
///
/// On SQLite the documents' search index ([`DocIndex`]) answers when it is up to date (it
/// was checked at this start and nothing is queued for it); FTS5 otherwise, and when the
/// index fails (logged). Either way each answered chunk is checked here ([`answered_rows`]).
pub fn search(
    c: &Connection,
    index: Option<&DocIndex>,
    user_id: &str,
    fts: &str,
    genie_id: Option<&str>,
    limit: i64,
) -> rusqlite::Result<Vec<Hit>> {
    let postgres = c.is_postgres();
    if !postgres
        && let Some(ix) = index
        && ix.ready()
        && !search_queued(c)?
        && let Some(hits) = search_indexed(c, ix, user_id, fts, genie_id, limit)?
    {
        return Ok(hits);
    }
    let mut p: Vec<SqlValue> = if postgres {
        vec![
            SqlValue::Text(pg_tsquery(fts)),
            SqlValue::Text(user_id.to_string()),
        ]
    } else {
        vec![SqlValue::Text(searched_match(user_id, fts))]
    };
    if let Some(g) = genie_id {
        p.push(SqlValue::Text(g.to_string()));
    }
    p.push(SqlValue::Integer(limit));
    let mut st = c.prepare_cached(&search_sql(postgres, genie_id.is_some()))?;
    if !postgres {
        let ranked = st
            .query_map(params_from_iter(p), |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<rusqlite::Result<Vec<(i64, f64, String)>>>()?;
        return answered_rows(c, user_id, ranked);
    }
    st.query_map(params_from_iter(p), |r| {
        Ok(Hit {
            document_id: r.get(0)?,
            document_name: r.get(1)?,
            chunk_index: r.get(2)?,
            snippet: r.get(3)?,
            content: r.get(4)?,
            score: -r.get::<_, f64>(5)?,
        })
    })?
    .collect()
}

/// The second step of [`search`] on SQLite, after the ranking on the full-text index alone
/// ([`search_sql`]: the reader tokens say which chunks the user may search): each answered
/// chunk's row and its document's, checked as every search's are ([`search_row_sql`]), so
/// that a token that were ever wrong could hide a chunk but never show one. Two statements:
/// as a subquery of one, the ranking step took every match's snippet before its sort, not
/// only the best few's (ten times slower at 10,000 documents).
fn answered_rows(
    c: &Connection,
    user_id: &str,
    ranked: Vec<(i64, f64, String)>,
) -> rusqlite::Result<Vec<Hit>> {
    let mut row = c.prepare_cached(search_row_sql())?;
    let mut hits = Vec::with_capacity(ranked.len());
    for (chunk, rank, snippet) in ranked {
        let found = row
            .query_row(rusqlite::params![chunk, user_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()?;
        if let Some((document_id, document_name, chunk_index, content)) = found {
            hits.push(Hit {
                document_id,
                document_name,
                chunk_index,
                snippet,
                content,
                score: -rank,
            });
        }
    }
    Ok(hits)
}

/// [`search`] in the documents' search index; `None` when the index failed (FTS5 answers).
fn search_indexed(
    c: &Connection,
    ix: &DocIndex,
    user_id: &str,
    fts: &str,
    genie_id: Option<&str>,
    limit: i64,
) -> rusqlite::Result<Option<Vec<Hit>>> {
    let (words, any) = fts_words(fts);
    let readers = [owner_token(user_id), "pub".to_string()];
    let documents = match genie_id {
        Some(g) => {
            let mut st =
                c.prepare_cached("SELECT document_id FROM genie_documents WHERE genie_id = ?1")?;
            Some(
                st.query_map([g], |r| r.get::<_, String>(0))?
                    .collect::<rusqlite::Result<Vec<_>>>()?,
            )
        }
        None => None,
    };
    let asked = crate::doc_index::Asked {
        words: &words,
        any,
        readers: &readers,
        documents: documents.as_deref(),
        limit: limit.clamp(0, 1000) as usize,
    };
    let found = match ix.search(&asked) {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "documents search index failed; FTS5 answers");
            return Ok(None);
        }
    };
    let ranked = found
        .hits
        .iter()
        .map(|(chunk, score)| (*chunk, -f64::from(*score), String::new()))
        .collect();
    let mut hits = answered_rows(c, user_id, ranked)?;
    for h in &mut hits {
        h.snippet = found.snippet(&h.content);
    }
    Ok(Some(hits))
}

/// The words of an FTS5 query of quoted words ([`fts_query`], `page_chat`'s any-word
/// query), and whether any of them is enough (`OR`) rather than all.
fn fts_words(fts: &str) -> (Vec<String>, bool) {
    let mut words = Vec::new();
    let mut any = false;
    for (i, part) in fts.split('"').enumerate() {
        if i % 2 == 0 {
            any |= part.trim() == "OR";
        } else if !part.is_empty() {
            words.push(part.to_string());
        }
    }
    (words, any)
}

/// Whether a change waits for the documents' search index (V49).
pub fn search_queued(c: &Connection) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS (SELECT 1 FROM document_search_queue)",
        [],
        |r| r.get(0),
    )
}

/// The queue of the documents' search index as a start finds it: the highest row number
/// ever given (SQLite keeps it in `sqlite_sequence`), and the lowest still queued.
pub fn search_queue_state(c: &Connection) -> rusqlite::Result<(i64, Option<i64>)> {
    let given: Option<i64> = c
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'document_search_queue'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    let first: Option<i64> =
        c.query_row("SELECT MIN(seq) FROM document_search_queue", [], |r| {
            r.get(0)
        })?;
    Ok((given.unwrap_or(0), first))
}

/// Whether any document may be searched: a rebuild of the documents' search index with
/// none has nothing to index (a new data directory).
pub fn any_searchable(c: &Connection) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS (SELECT 1 FROM documents WHERE status = 'completed' AND is_active = 1)",
        [],
        |r| r.get(0),
    )
}

/// Queues every document that may be searched, for an index made again; returns the
/// highest row number given before them, which the emptied index then covers.
pub fn search_queue_all(c: &Connection) -> rusqlite::Result<i64> {
    let (before, _) = search_queue_state(c)?;
    c.execute(
        "INSERT INTO document_search_queue(document_id)
         SELECT id FROM documents WHERE status = 'completed' AND is_active = 1",
        [],
    )?;
    Ok(before)
}

/// The next queued changes for the documents' search index, at most `rows` of them: the
/// last row number taken, and each queued document as the index should hold it now.
/// Read in one snapshot (`read_snapshot`), so the chunks are those of the rows taken or
/// newer.
pub fn search_queue_next(
    c: &Connection,
    rows: i64,
) -> rusqlite::Result<Option<(i64, Vec<Indexed>)>> {
    let mut st = c.prepare_cached(
        "SELECT seq, document_id FROM document_search_queue ORDER BY seq LIMIT ?1",
    )?;
    let queued = st
        .query_map([rows], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let Some(through) = queued.last().map(|q| q.0) else {
        return Ok(None);
    };
    let mut ids: Vec<String> = queued.into_iter().map(|q| q.1).collect();
    ids.sort();
    ids.dedup();
    let mut doc = c.prepare_cached(
        "SELECT user_id, is_public FROM documents
         WHERE id = ?1 AND status = 'completed' AND is_active = 1",
    )?;
    let mut chunks =
        c.prepare_cached("SELECT id, content FROM document_chunks WHERE document_id = ?1")?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let searchable = doc
            .query_row([&id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?))
            })
            .optional()?;
        let (chunks, readers) = match searchable {
            Some((owner, public)) => {
                let mut readers = vec![owner_token(&owner)];
                if public {
                    readers.push("pub".into());
                }
                let rows = chunks
                    .query_map([&id], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<Vec<(i64, String)>>>()?;
                (rows, readers)
            }
            None => (Vec::new(), Vec::new()),
        };
        out.push(Indexed {
            document_id: id,
            chunks,
            readers,
        });
    }
    Ok(Some((through, out)))
}

/// Drops the queued changes the documents' search index has committed.
pub fn search_queue_done(c: &Connection, through: i64) -> rusqlite::Result<usize> {
    c.execute(
        "DELETE FROM document_search_queue WHERE seq <= ?1",
        [through],
    )
}

/// The statement that reads and checks one answered chunk of [`search`] on SQLite
/// ([`answered_rows`]): its parameters, the chunk's id and the user's.
pub fn search_row_sql() -> &'static str {
    // Made once: every search prepares it (from the statement cache, keyed by the text).
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT d.id, d.name, ch.seq, ch.content
             FROM document_chunks ch JOIN documents d ON d.id = ch.document_id
             WHERE ch.id = ? AND {READABLE_BY} AND d.status = 'completed' AND d.is_active = 1"
        )
    });
    &SQL
}

/// The SQL of [`search`], with or without the genie's condition. On SQLite the ranking
/// step (chunk id, rank, snippet); its parameters the FTS5 query ([`searched_match`]), the
/// genie's id when asked, the limit. On PostgreSQL the whole search; its parameters the
/// `to_tsquery` text, the user's id, the genie's id when asked, the limit.
pub fn search_sql(postgres: bool, genie: bool) -> String {
    if postgres {
        let genie_cond = if genie {
            " AND d.id IN (SELECT document_id FROM genie_documents WHERE genie_id = ?)"
        } else {
            ""
        };
        // A tsvector column kept by the database, ranked by ts_rank (negated, so that lower
        // is better as bm25's rank is).
        return format!(
            "SELECT d.id, d.name, ch.seq,
                    ts_headline('english', ch.content, q, 'StartSel=[, StopSel=], MaxWords=16, MinWords=4'),
                    ch.content, -ts_rank(ch.tsv, q) AS rank
             FROM document_chunks ch CROSS JOIN to_tsquery('english', ?) q
             JOIN documents d ON d.id = ch.document_id
             WHERE ch.tsv @@ q AND {READABLE_BY} AND d.status = 'completed' AND d.is_active = 1{genie_cond}
             ORDER BY rank, ch.id LIMIT ?"
        );
    }
    // The genie's chunk ids are listed once and each match looked up in the list (the unary
    // `+` keeps SQLite from handing the list to FTS5, which would run the whole query again
    // for each id). SQLite takes the snippet only of a match that enters the best few so
    // far. bm25's weights: the words' column counts, the reader tokens do not, and
    // `genied_bm25_best` (db::fts_rank) does not count the tokens' rows as FTS5's `bm25`
    // would, reads no size of a match that cannot be among the `limit` best (it is told the
    // limit, and nothing after it drops a row), and keeps the words' counts by the match
    // text, on the connection, while the index stays as it was.
    let (genie_cond, limit) = if genie {
        (
            " AND +document_chunks_fts.rowid IN (SELECT ch.id FROM genie_documents gd
              JOIN document_chunks ch ON ch.document_id = gd.document_id WHERE gd.genie_id = ?2)",
            3,
        )
    } else {
        ("", 2)
    };
    format!(
        "SELECT document_chunks_fts.rowid,
                genied_bm25_best(document_chunks_fts, ?{limit}, ?1, 1.0, 0.0) AS rank,
                snippet(document_chunks_fts, 0, '[', ']', '…', 16)
         FROM document_chunks_fts
         WHERE document_chunks_fts MATCH ?1{genie_cond}
         ORDER BY rank, document_chunks_fts.rowid LIMIT ?{limit}"
    )
}

/// Every file hash a document names (original and extracted text): the files that must stay.
pub fn stored_hashes(c: &Connection) -> rusqlite::Result<std::collections::HashSet<String>> {
    let mut out = std::collections::HashSet::new();
    each_stored_hash(c, |h| {
        out.insert(h.to_owned());
    })?;
    Ok(out)
}

/// Gives the pages a one-off scan left in this connection's cache back to the allocator
/// (SQLite; PostgreSQL keeps no cache in this process): the sweep's scan of the two hash
/// indexes fills a read connection's cache with pages no request reads.
pub fn release_cache(c: &Connection) -> rusqlite::Result<()> {
    if c.is_postgres() {
        return Ok(());
    }
    c.execute_batch("PRAGMA shrink_memory")
}

/// [`stored_hashes`] one at a time, for a caller that keeps them in a smaller form.
pub fn each_stored_hash(c: &Connection, mut f: impl FnMut(&str)) -> rusqlite::Result<()> {
    // `UNION ALL`: a set drops the repeats, and `UNION` would sort them out in a temp b-tree.
    let mut st = c.prepare(
        "SELECT original_hash FROM documents WHERE original_hash IS NOT NULL
         UNION ALL SELECT content_hash FROM documents WHERE content_hash IS NOT NULL",
    )?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        f(&r.get::<_, String>(0)?);
    }
    Ok(())
}
