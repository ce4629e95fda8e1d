//! Leads and their activity log. Leads keep the integer ids of the spec. Every listing is
//! one SQL statement with its filters in the WHERE clause (never rows filtered in memory),
//! and `stats` is a single GROUP BY, so both stay fast with millions of rows.

use crate::db::sql::types::Value as SqlValue;
use crate::db::sql::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde::Serialize;
use serde_json::{Value, json};

use super::keys::{self, Key};
use super::{json_col, ms_text, now_ms, text_ms};

/// The four standard statuses, in their lifecycle order.
pub const STATUSES: &[&str] = &["new", "contacted", "qualified", "converted"];
pub const PRIORITIES: &[&str] = &["low", "medium", "high"];
pub const CONTACT_METHODS: &[&str] = &["email", "phone", "sms"];

/// The full lead object of the spec, plus `conversation_ref` (the UUID of the conversation
/// an analysis linked it to).
#[derive(Debug, Clone, Serialize)]
pub struct Lead {
    pub id: i64,
    pub agent_id: String,
    pub user_id: String,
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub status: Option<String>,
    pub priority: Option<String>,
    pub budget: Option<String>,
    pub timeline: Option<String>,
    pub address: Option<Value>,
    pub notes: Option<String>,
    pub assigned_to: Option<String>,
    pub conversation_id: Option<i64>,
    pub primary_lead_id: Option<i64>,
    pub is_decision_maker: Option<bool>,
    pub preferred_contact_method: Option<String>,
    pub preferred_contact_time: Option<String>,
    pub metadata: Option<Value>,
    pub created_at: String,
    pub updated_at: Option<String>,
    pub conversation_ref: Option<String>,
    /// Never called by genied (genie `call`, campaigns).
    pub do_not_call: bool,
    pub agent: Value,
    /// The agent's owner; decides access, never serialized.
    #[serde(skip)]
    pub agent_owner: Option<String>,
}

impl Lead {
    /// The summary `list` returns.
    pub fn summary(&self) -> Value {
        json!({
            "id": self.id,
            "agent_id": self.agent_id,
            "name": self.name,
            "email": self.email,
            "phone": self.phone,
            "status": self.status,
            "priority": self.priority,
            "created_at": self.created_at,
        })
    }
}

const COLS: &str = "l.id, l.agent_id, l.user_id, l.name, l.email, l.phone, l.status, l.priority, l.budget,
    l.timeline, l.address, l.notes, l.assigned_to, l.conversation_id, l.primary_lead_id, l.is_decision_maker,
    l.preferred_contact_method, l.preferred_contact_time, l.metadata, l.created_at, l.updated_at,
    l.conversation_ref, g.name, g.user_id, l.do_not_call";

fn obj_col(s: Option<String>) -> Option<Value> {
    s.map(|s| json_col(Some(s), Value::Null))
        .filter(|v| !v.is_null())
}

fn from_row(r: &Row) -> rusqlite::Result<Lead> {
    // The genie's and user's ids are stored as keys (V41).
    let agent_id = keys::text(&r.get::<_, Vec<u8>>(1)?);
    let agent_name: Option<String> = r.get(22)?;
    Ok(Lead {
        id: r.get(0)?,
        user_id: keys::text(&r.get::<_, Vec<u8>>(2)?),
        name: r.get(3)?,
        email: r.get(4)?,
        phone: r.get(5)?,
        status: r.get(6)?,
        priority: r.get(7)?,
        budget: r.get(8)?,
        timeline: r.get(9)?,
        address: obj_col(r.get(10)?),
        notes: r.get(11)?,
        assigned_to: r.get(12)?,
        conversation_id: r.get(13)?,
        primary_lead_id: r.get(14)?,
        is_decision_maker: r.get::<_, Option<i64>>(15)?.map(|v| v != 0),
        preferred_contact_method: r.get(16)?,
        preferred_contact_time: r.get(17)?,
        metadata: obj_col(r.get(18)?),
        created_at: ms_text(r.get(19)?),
        updated_at: r.get::<_, Option<i64>>(20)?.map(ms_text),
        conversation_ref: r.get(21)?,
        agent: json!({"id": agent_id, "name": agent_name}),
        agent_id,
        agent_owner: r.get(23)?,
        do_not_call: r.get(24)?,
    })
}

/// Whose leads a listing covers.
#[derive(Debug, Clone)]
pub enum Scope {
    /// Every lead (admin with `adminMode`).
    All,
    /// Leads whose `user_id` is this user (admin with `userId`).
    User(String),
    /// Leads of the agents this user owns or is assigned to.
    AgentsOf(String),
}

#[derive(Debug, Clone)]
pub struct Filter {
    pub scope: Scope,
    pub agent_ids: Vec<String>,
    pub status: Option<String>,
    pub priority: Option<String>,
    pub search: Option<String>,
    /// Lower bound on `created_at` (from `dateRange`).
    pub since: Option<String>,
    /// Keyset position: only leads listed after this `(created_at, id)`, i.e. older, or as
    /// old with a smaller id (a cursor). Applies to `list`, not to counts.
    pub after: Option<(String, i64)>,
}

/// Genies a user owns above which their listing asks each row whether its genie is theirs
/// instead of building the set of their genies first (see [`where_clause`]).
const GENIE_SET_MAX: i64 = 500;

/// Whether `user` owns more than [`GENIE_SET_MAX`] genies (counted no further).
fn many_genies(c: &Connection, user: &str) -> rusqlite::Result<bool> {
    c.prepare_cached(
        "SELECT COUNT(*) > ?2 FROM (SELECT 1 FROM genies WHERE user_id = ?1 LIMIT ?2 + 1) x",
    )?
    .query_row(params![user, GENIE_SET_MAX], |r| r.get(0))
}

/// The WHERE clause of a filter, with its parameters. On PostgreSQL a trigram index
/// (pg_trgm) serves `ILIKE` itself.
fn where_clause(
    c: &Connection,
    f: &Filter,
    with_status: bool,
) -> rusqlite::Result<(String, Vec<SqlValue>)> {
    let pg = c.is_postgres();
    let mut w: Vec<String> = Vec::new();
    let mut p: Vec<SqlValue> = Vec::new();
    match &f.scope {
        Scope::All => {}
        Scope::User(u) => {
            w.push("l.user_id = ?".into());
            p.push(keys::value(u));
        }
        // Both forms walk a time-ordered index and test each lead's genie. The set of the
        // user's genies is cheaper to test against, but is built for every page: with 10,000
        // genies that took 9 ms where the walk of one page took 0.1. So a user with many
        // genies has each row asked instead (two key lookups), and everyone else the set,
        // which keeps the long walks (a status the user has few leads in, among many users'
        // leads) two to five times cheaper.
        Scope::AgentsOf(u) if many_genies(c, u)? => {
            w.push(
                "EXISTS (SELECT 1 FROM genies g WHERE g.key = l.agent_id AND (g.user_id = ? \
                  OR EXISTS (SELECT 1 FROM genie_assignments a WHERE a.genie_id = g.id AND a.user_id = ?)))"
                    .into(),
            );
            p.push(u.clone().into());
            p.push(u.clone().into());
        }
        Scope::AgentsOf(u) => {
            w.push(
                "l.agent_id IN (SELECT key FROM genies WHERE user_id = ? \
                 UNION SELECT g.key FROM genie_assignments a JOIN genies g ON g.id = a.genie_id WHERE a.user_id = ?)"
                    .into(),
            );
            p.push(u.clone().into());
            p.push(u.clone().into());
        }
    }
    if !f.agent_ids.is_empty() {
        w.push(format!(
            "l.agent_id IN ({})",
            vec!["?"; f.agent_ids.len()].join(", ")
        ));
        p.extend(f.agent_ids.iter().map(|a| keys::value(a)));
    }
    if with_status && let Some(s) = &f.status {
        w.push("l.status = ?".into());
        p.push(s.clone().into());
    }
    if let Some(s) = &f.priority {
        w.push("l.priority = ?".into());
        p.push(s.clone().into());
    }
    if let Some(term) = &f.search {
        if term.chars().count() >= 3 && !pg {
            // The trigram index keeps which trigrams a lead has, not where (detail=none): it
            // finds the leads that have every trigram of the term, and the row is then checked
            // for the term itself, case-insensitively as the index folds case. Leads not
            // indexed yet are checked row by row (SEARCH_CANDIDATES).
            w.push(format!(
                "{SEARCH_CANDIDATES} AND (genied_icontains(l.name, ?) \
                 OR genied_icontains(l.email, ?) OR genied_icontains(l.phone, ?))"
            ));
            p.push(trigram_query(term).into());
            for _ in 0..3 {
                p.push(term.clone().into());
            }
        } else {
            let pat = format!(
                "%{}%",
                term.replace('\\', "\\\\")
                    .replace('%', "\\%")
                    .replace('_', "\\_")
            );
            w.push("(l.name LIKE ? ESCAPE '\\' OR l.email LIKE ? ESCAPE '\\' OR l.phone LIKE ? ESCAPE '\\')".into());
            p.push(pat.clone().into());
            p.push(pat.clone().into());
            p.push(pat.into());
        }
    }
    if let Some(since) = &f.since {
        w.push("l.created_at >= ?".into());
        p.push(text_ms(since)?.into());
    }
    if with_status && let Some((at, id)) = &f.after {
        // The `<=` bound lets the time index start the walk at the cursor instead of at the
        // newest lead; the rest breaks ties between leads of the same millisecond.
        w.push("l.created_at <= ? AND (l.created_at < ? OR l.id < ?)".into());
        let at = text_ms(at)?;
        p.push(at.into());
        p.push(at.into());
        p.push((*id).into());
    }
    let sql = if w.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", w.join(" AND "))
    };
    Ok((sql, p))
}

/// The leads a trigram search looks at (`?`: the FTS5 query): those the index matches, and
/// those it does not hold yet, new ones past the watermark and renamed ones (V39). Each is an
/// `IN` list, so that a listing of every lead can look the candidates up by id (`MULTI-INDEX
/// OR`): as `l.id > (SELECT indexed_to …)` the range made SQLite walk every lead in time order
/// instead (`perf::the_search_indexer_looks_leads_up_by_id_instead_of_walking_the_table`).
pub const SEARCH_CANDIDATES: &str = "(l.id IN (SELECT rowid FROM leads_search WHERE leads_search MATCH ?) \
      OR l.id IN (SELECT id FROM leads \
                  WHERE id > (SELECT indexed_to FROM leads_search_state WHERE id = 1)) \
      OR l.id IN (SELECT lead_id FROM leads_search_pending))";

/// An FTS5 query that requires every distinct trigram of `term`, each as a quoted string.
fn trigram_query(term: &str) -> String {
    let chars: Vec<char> = term.chars().collect();
    let mut seen = std::collections::HashSet::new();
    let mut parts = Vec::new();
    for w in chars.windows(3) {
        let t: String = w.iter().collect::<String>().to_lowercase();
        if seen.insert(t.clone()) {
            parts.push(format!("\"{}\"", t.replace('"', "\"\"")));
        }
    }
    parts.join(" AND ")
}

/// Whether some lead waits to be indexed for search: past the watermark, or renamed (V39).
/// Never on PostgreSQL, whose trigram indexes follow each write.
pub fn search_pending(c: &Connection) -> rusqlite::Result<bool> {
    if c.is_postgres() {
        return Ok(false);
    }
    c.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM leads_search_pending)
             OR EXISTS (SELECT 1 FROM leads
                        WHERE id > (SELECT indexed_to FROM leads_search_state WHERE id = 1))",
    )?
    .query_row([], |r| r.get(0))
}

/// How many leads wait to be indexed for search (see [`search_pending`]).
pub fn search_backlog(c: &Connection) -> rusqlite::Result<i64> {
    if c.is_postgres() {
        return Ok(0);
    }
    c.prepare_cached(
        "SELECT (SELECT COUNT(*) FROM leads_search_pending)
              + (SELECT COUNT(*) FROM leads
                 WHERE id > (SELECT indexed_to FROM leads_search_state WHERE id = 1))",
    )?
    .query_row([], |r| r.get(0))
}

/// The search index's batch: the pending leads up to `?1`, looked up by id. Written as
/// `IN` so that the walk is over the pending rows: as a join on `l.id = p.lead_id` with
/// `p.lead_id <= ?1`, SQLite carried the range over to `leads` and walked every lead up to
/// the newest pending one (`SEARCH l USING INTEGER PRIMARY KEY (rowid<?)`), a scan of the
/// whole table per batch: 70 ms at 290,000 leads, a fifth of a create's CPU at one
/// connection (docs/performance.md, round nine).
pub const INDEX_PENDING: &str = "INSERT INTO leads_search (rowid, name, email, phone)
     SELECT l.id, l.name, l.email, l.phone FROM leads l
     WHERE l.id IN (SELECT lead_id FROM leads_search_pending WHERE lead_id <= ?1)";

/// The search index's batch of new leads: those past the watermark up to `?2`, a range of
/// rowids.
pub const INDEX_NEW: &str = "INSERT INTO leads_search (rowid, name, email, phone)
     SELECT id, name, email, phone FROM leads WHERE id > ?1 AND id <= ?2";

/// Indexes up to `limit` leads for search in the caller's transaction (one FTS5 segment for
/// the batch): the renamed ones first, then the new ones past the watermark, which moves on.
/// Returns how many; fewer than `limit` means none is left. Nothing on PostgreSQL.
pub fn index_pending(c: &Connection, limit: i64) -> rusqlite::Result<usize> {
    if c.is_postgres() {
        return Ok(0);
    }
    let ids: Vec<i64> = c
        .prepare_cached("SELECT lead_id FROM leads_search_pending ORDER BY lead_id LIMIT ?1")?
        .query_map([limit], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if let Some(last) = ids.last() {
        // A pending lead always exists: deleting a lead removes its pending row.
        c.prepare_cached(INDEX_PENDING)?.execute([last])?;
        c.prepare_cached("DELETE FROM leads_search_pending WHERE lead_id <= ?1")?
            .execute([last])?;
    }
    let room = limit - ids.len() as i64;
    if room <= 0 {
        return Ok(ids.len());
    }
    let from: i64 = c
        .prepare_cached("SELECT indexed_to FROM leads_search_state WHERE id = 1")?
        .query_row([], |r| r.get(0))?;
    let (to, new): (Option<i64>, i64) = c
        .prepare_cached(
            "SELECT MAX(id), COUNT(*) FROM
               (SELECT id FROM leads WHERE id > ?1 ORDER BY id LIMIT ?2)",
        )?
        .query_row(params![from, room], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if let Some(to) = to {
        c.prepare_cached(INDEX_NEW)?.execute(params![from, to])?;
        c.prepare_cached("UPDATE leads_search_state SET indexed_to = ?1 WHERE id = 1")?
            .execute([to])?;
    }
    Ok(ids.len() + new as usize)
}

/// One bounded step of merging the lead search index's segments, which FTS5 no longer does
/// by itself (migration V48): at most `pages` pages of merged output, on a level holding at
/// least four segments or one already being merged. Returns whether it did any work, which
/// FTS5 says by changing at least two rows (its documentation of the `merge` command).
/// Nothing on PostgreSQL.
pub fn merge_search_step(c: &Connection, pages: i64) -> rusqlite::Result<bool> {
    if c.is_postgres() {
        return Ok(false);
    }
    let changes = |c: &Connection| -> rusqlite::Result<i64> {
        c.prepare_cached("SELECT total_changes()")?
            .query_row([], |r| r.get(0))
    };
    let before = changes(c)?;
    c.prepare_cached("INSERT INTO leads_search (leads_search, rank) VALUES ('merge', ?1)")?
        .execute([pages])?;
    Ok(changes(c)? - before >= 2)
}

/// The SQL functions lead queries use: [`super::keys`]' two, and
/// `genied_icontains(haystack, needle)`: whether `needle` occurs in `haystack`, ignoring
/// case as the trigram index does (Unicode lower case, not only ASCII as `LIKE`). NULL
/// haystacks contain nothing.
pub fn register_functions(c: &rusqlite::Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    c.create_scalar_function(
        "genied_icontains",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let hay: Option<String> = ctx.get(0)?;
            let needle: String = ctx.get(1)?;
            Ok(hay.is_some_and(|h| h.to_lowercase().contains(&needle.to_lowercase())))
        },
    )?;
    super::keys::register_functions(c)
}

/// `(total, counts of the four standard statuses)`. Filtered by scope and agents only, it
/// sums the trigger-maintained `lead_status_counts` (a few rows per agent); with priority,
/// search or date filters it is one aggregate pass over the matching index entries (no rows
/// loaded, no sort). The status filter does not apply to stats.
pub fn stats(c: &Connection, f: &Filter) -> rusqlite::Result<(i64, [i64; 4])> {
    let (table, n, w, p) = if let Some((owned, params)) = owner_counts(f) {
        (owned, "l.n", String::new(), params)
    } else if counters_apply(f) {
        let (w, p) = where_clause(c, f, false)?;
        ("lead_status_counts".to_string(), "l.n", w, p)
    } else {
        let (w, p) = where_clause(c, f, false)?;
        ("leads".to_string(), "1", w, p)
    };
    c.prepare_cached(&format!(
        "SELECT TOTAL({n}), TOTAL(CASE l.status WHEN 'new' THEN {n} END), TOTAL(CASE l.status WHEN 'contacted' THEN {n} END),
             TOTAL(CASE l.status WHEN 'qualified' THEN {n} END), TOTAL(CASE l.status WHEN 'converted' THEN {n} END)
         FROM {table} l {w}"
    ))?
    .query_row(
        params_from_iter(p),
        |r| {
            let n = |i: usize| r.get::<_, f64>(i).map(|v| v as i64);
            Ok((n(0)?, [n(1)?, n(2)?, n(3)?, n(4)?]))
        },
    )
}

/// Matching leads; from `lead_status_counts` when only scope, agent and status filters apply.
/// A cursor (`after`) does not change the count: it is of every match, as with an offset.
pub fn count(c: &Connection, f: &Filter) -> rusqlite::Result<i64> {
    let f = &Filter {
        after: None,
        ..f.clone()
    };
    if let Some((owned, mut p)) = owner_counts(f) {
        let mut sql = format!("SELECT TOTAL(l.n) FROM {owned} l");
        if let Some(s) = &f.status {
            sql.push_str(" WHERE l.status = ?");
            p.push(s.clone().into());
        }
        return c.prepare_cached(&sql)?.query_row(params_from_iter(p), |r| {
            r.get::<_, f64>(0).map(|v| v as i64)
        });
    }
    let (w, p) = where_clause(c, f, true)?;
    if counters_apply(f) {
        let sql = format!("SELECT TOTAL(l.n) FROM lead_status_counts l {w}");
        return c.prepare_cached(&sql)?.query_row(params_from_iter(p), |r| {
            r.get::<_, f64>(0).map(|v| v as i64)
        });
    }
    c.prepare_cached(&format!("SELECT COUNT(*) FROM leads l {w}"))?
        .query_row(params_from_iter(p), |r| r.get(0))
}

/// Whether `lead_status_counts` can answer for this filter (it has agent, owner and status).
fn counters_apply(f: &Filter) -> bool {
    f.priority.is_none() && f.search.is_none() && f.since.is_none()
}

/// For a user's own scope with no agent filter, the `(status, n)` rows that count it: the
/// user's row per status in `lead_owner_counts` (every genie they own, in a few rows), and
/// `lead_status_counts`' rows of the genies assigned to them that they do not own. `None`
/// when the counters cannot answer the filter.
fn owner_counts(f: &Filter) -> Option<(String, Vec<SqlValue>)> {
    let Scope::AgentsOf(u) = &f.scope else {
        return None;
    };
    if !f.agent_ids.is_empty() || !counters_apply(f) {
        return None;
    }
    let sql = "(SELECT o.status, o.n FROM lead_owner_counts o WHERE o.owner_id = ? \
         UNION ALL SELECT s.status, s.n FROM genie_assignments a \
           JOIN genies g ON g.id = a.genie_id AND g.user_id <> a.user_id \
           JOIN lead_status_counts s ON s.agent_id = g.key \
         WHERE a.user_id = ?)";
    Some((sql.to_string(), vec![u.clone().into(), u.clone().into()]))
}

/// One page, most recent first.
pub fn list(c: &Connection, f: &Filter, limit: i64, offset: i64) -> rusqlite::Result<Vec<Lead>> {
    let (sql, p) = list_statement(c, f, limit, offset)?;
    let mut st = c.prepare_cached(&sql)?;
    st.query_map(params_from_iter(p), from_row)?.collect()
}

/// The statement of [`list`] and its parameters. The page's ids come from the indexes
/// alone (a user's walk by status tests each lead's genie in `leads_status_time`, V45);
/// only those rows are read.
pub fn list_statement(
    c: &Connection,
    f: &Filter,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<(String, Vec<SqlValue>)> {
    let (w, mut p) = where_clause(c, f, true)?;
    p.push(limit.into());
    p.push(offset.into());
    let sql = format!(
        "SELECT {COLS} FROM leads l LEFT JOIN genies g ON g.key = l.agent_id
         WHERE l.id IN (SELECT l.id FROM leads l {w} ORDER BY l.created_at DESC, l.id DESC LIMIT ? OFFSET ?)
         ORDER BY l.created_at DESC, l.id DESC"
    );
    Ok((sql, p))
}

pub fn get(c: &Connection, id: i64) -> rusqlite::Result<Option<Lead>> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT {COLS} FROM leads l LEFT JOIN genies g ON g.key = l.agent_id WHERE l.id = ?1"
        )
    });
    c.prepare_cached(&SQL)?.query_row([id], from_row).optional()
}

/// The lead an analysis of this conversation made, if any.
pub fn get_by_conversation(
    c: &Connection,
    conversation_ref: &str,
) -> rusqlite::Result<Option<Lead>> {
    c.query_row(
        &format!(
            "SELECT {COLS} FROM leads l LEFT JOIN genies g ON g.key = l.agent_id
             WHERE l.conversation_ref = ?1 ORDER BY l.id LIMIT 1"
        ),
        [conversation_ref],
        from_row,
    )
    .optional()
}

/// A genie as leads see it: its owner, and whether `user` is assigned to it.
pub struct AgentRef {
    pub id: String,
    pub owner: String,
    pub assigned: bool,
    pub name: Option<String>,
}

pub fn agent(c: &Connection, agent_id: &str, user: &str) -> rusqlite::Result<Option<AgentRef>> {
    c.prepare_cached(
        "SELECT g.id, g.user_id, EXISTS (SELECT 1 FROM genie_assignments a WHERE a.genie_id = g.id AND a.user_id = ?2), g.name
         FROM genies g WHERE g.id = ?1",
    )?
    .query_row(params![agent_id, user], |r| {
        Ok(AgentRef {
            id: r.get(0)?,
            owner: r.get(1)?,
            assigned: r.get(2)?,
            name: r.get(3)?,
        })
    })
    .optional()
}

pub fn user_exists(c: &Connection, user_id: &str) -> rusqlite::Result<bool> {
    c.prepare_cached("SELECT EXISTS (SELECT 1 FROM users WHERE id = ?1)")?
        .query_row([user_id], |r| r.get(0))
}

pub fn is_assigned(c: &Connection, agent_id: &str, user: &str) -> rusqlite::Result<bool> {
    c.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM genie_assignments WHERE genie_id = ?1 AND user_id = ?2)",
    )?
    .query_row([agent_id, user], |r| r.get(0))
}

/// Column values for insert and update; `Null` stores SQL NULL.
pub type Fields = Vec<(&'static str, SqlValue)>;

/// Every column a client may set (`id`, `created_at` and `conversation_ref` excluded).
pub const WRITABLE: &[&str] = &[
    "agent_id",
    "user_id",
    "name",
    "email",
    "phone",
    "status",
    "priority",
    "budget",
    "timeline",
    "address",
    "notes",
    "assigned_to",
    "conversation_id",
    "primary_lead_id",
    "is_decision_maker",
    "preferred_contact_method",
    "preferred_contact_time",
    "metadata",
    "do_not_call",
];

pub fn insert(c: &Connection, fields: &Fields) -> rusqlite::Result<i64> {
    if c.is_postgres() {
        // No rowid there: the key comes back with the row.
        return Ok(insert_with(c, fields, &RETURNING)?
            .ok_or(rusqlite::Error::QueryReturnedNoRows)?
            .id);
    }
    insert_with(c, fields, "")?;
    Ok(c.last_insert_rowid())
}

/// Inserts a lead under `agent` and returns it as stored, without the genie's row: `fields`
/// hold `agent_id`, which must be `agent.id`.
///
/// On SQLite the row is read back by its rowid rather than with `RETURNING`, which makes
/// SQLite build, fill and drop a temporary table for every statement (its b-tree, pager and
/// page cache): more work than one lookup of the page the insert just wrote.
pub fn insert_returning(
    c: &Connection,
    fields: &Fields,
    agent: &AgentRef,
) -> rusqlite::Result<Lead> {
    let mut lead = if c.is_postgres() {
        insert_with(c, fields, &RETURNING)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?
    } else {
        insert_with(c, fields, "")?;
        c.prepare_cached(&READ_BACK)?
            .query_row([c.last_insert_rowid()], from_row)?
    };
    lead.agent = json!({"id": agent.id, "name": agent.name});
    lead.agent_owner = Some(agent.owner.clone());
    Ok(lead)
}

/// The columns of `COLS` that live on the row; the genie's name and owner come from the
/// caller.
const STORED_COLS: &str = "id, agent_id, user_id, name, email, phone, status, priority, budget,
        timeline, address, notes, assigned_to, conversation_id, primary_lead_id, is_decision_maker,
        preferred_contact_method, preferred_contact_time, metadata, created_at, updated_at,
        conversation_ref, NULL, NULL, do_not_call";
/// How PostgreSQL gets the stored lead back from its insert.
static RETURNING: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!(" RETURNING {STORED_COLS}"));
/// How SQLite reads it back instead (see `insert_returning`).
static READ_BACK: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("SELECT {STORED_COLS} FROM leads WHERE id = ?1"));

fn insert_with(c: &Connection, fields: &Fields, returning: &str) -> rusqlite::Result<Option<Lead>> {
    let ts = now_ms();
    let mut cols: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
    let mut vals: Vec<SqlValue> = fields.iter().map(stored).collect();
    cols.push("created_at");
    vals.push(ts.into());
    cols.push("updated_at");
    vals.push(ts.into());
    // Cached: compiling an insert also compiles the search and counter triggers.
    let mut st = c.prepare_cached(&format!(
        "INSERT INTO leads ({}) VALUES ({}){returning}",
        cols.join(", "),
        vec!["?"; cols.len()].join(", ")
    ))?;
    if returning.is_empty() {
        st.execute(params_from_iter(vals))?;
        return Ok(None);
    }
    st.query_row(params_from_iter(vals), from_row).map(Some)
}

/// A field's value as the column stores it: the genie's and user's ids as keys (V41).
fn stored((k, v): &(&'static str, SqlValue)) -> SqlValue {
    match v {
        SqlValue::Text(id) if matches!(*k, "agent_id" | "user_id") => keys::value(id),
        v => v.clone(),
    }
}

pub fn update(c: &Connection, id: i64, fields: &Fields) -> rusqlite::Result<()> {
    let mut sets: Vec<String> = fields.iter().map(|(k, _)| format!("{k} = ?")).collect();
    let mut vals: Vec<SqlValue> = fields.iter().map(stored).collect();
    if fields.iter().any(|(k, _)| *k == "user_id") {
        // A NULL `created_by` means "the lead's user" (V38): keep naming the user who
        // created it when the lead moves to another. The right side reads the row as it was.
        sets.push("created_by = COALESCE(created_by, genied_key_text(user_id))".into());
    }
    sets.push("updated_at = ?".into());
    vals.push(now_ms().into());
    vals.push(id.into());
    c.prepare_cached(&format!(
        "UPDATE leads SET {} WHERE id = ?",
        sets.join(", ")
    ))?
    .execute(params_from_iter(vals))?;
    Ok(())
}

pub fn delete(c: &Connection, id: i64) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM leads WHERE id = ?1", [id])? == 1)
}

/// A row of `lead_activities`.
#[derive(Debug, Clone, Serialize)]
pub struct Activity {
    pub id: i64,
    pub lead_id: i64,
    pub user_id: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub description: Option<String>,
    pub metadata: Option<Value>,
    pub created_at: String,
}

const ACT_COLS: &str = "id, lead_id, user_id, type, description, metadata, created_at";

fn activity_row(r: &Row) -> rusqlite::Result<Activity> {
    Ok(Activity {
        id: r.get(0)?,
        lead_id: r.get(1)?,
        user_id: r.get(2)?,
        kind: r.get(3)?,
        description: r.get(4)?,
        metadata: obj_col(r.get(5)?),
        created_at: ms_text(r.get(6)?),
    })
}

pub fn log(
    c: &Connection,
    lead_id: i64,
    user_id: Option<&str>,
    kind: &str,
    description: Option<&str>,
    metadata: Option<&Value>,
) -> rusqlite::Result<Activity> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "INSERT INTO lead_activities (lead_id, user_id, type, description, metadata, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING {ACT_COLS}"
        )
    });
    c.prepare_cached(&SQL)?.query_row(
        params![
            lead_id,
            user_id,
            kind,
            description,
            metadata.map(|m| m.to_string()),
            now_ms()
        ],
        activity_row,
    )
}

/// The lead's "created" entry as it reads from the lead row (`created_log_id`, `created_by`;
/// migration V33): the same columns as `ACT_COLS`, so it unions with the stored entries.
/// `created_by` is NULL when the lead's own user created it (V38), the usual case.
macro_rules! created_entry_sql {
    () => {
        "SELECT ce.created_log_id AS id, ce.id AS lead_id,
         COALESCE(ce.created_by, genied_key_text(ce.user_id)) AS user_id,
         'created' AS type, 'Lead created' AS description, NULL AS metadata, ce.created_at
         FROM leads ce WHERE ce.created_log_id IS NOT NULL"
    };
}
pub(crate) use created_entry_sql;
pub const CREATED_ENTRY: &str = created_entry_sql!();

/// The id a lead's "created" entry answers with: the next of `lead_activities`' own ids, so
/// that it orders among the lead's other entries as a stored one would, and no stored entry
/// ever gets it (SQLite's AUTOINCREMENT never hands out an id below `sqlite_sequence`).
pub fn next_activity_id(c: &Connection) -> rusqlite::Result<i64> {
    if c.is_postgres() {
        return c
            .prepare_cached("SELECT nextval(pg_get_serial_sequence('lead_activities', 'id'))")?
            .query_row([], |r| r.get(0));
    }
    // Without `RETURNING`, which would build a temporary table for the one value (see
    // `insert_returning`).
    let bumped = c
        .prepare_cached("UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'lead_activities'")?
        .execute([])?;
    if bumped == 0 {
        // No entry was ever stored: the table's first id.
        c.prepare_cached(
            "INSERT INTO sqlite_sequence (name, seq)
             SELECT 'lead_activities', COALESCE(MAX(id), 0) + 1 FROM lead_activities",
        )?
        .execute([])?;
    }
    c.prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = 'lead_activities'")?
        .query_row([], |r| r.get(0))
}

/// Most recent first: the stored entries and the lead's "created" entry.
pub fn logs(c: &Connection, lead_id: i64, limit: i64) -> rusqlite::Result<Vec<Activity>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {ACT_COLS} FROM lead_activities WHERE lead_id = ?1
         UNION ALL {CREATED_ENTRY} AND ce.id = ?1
         ORDER BY created_at DESC, id DESC LIMIT ?2"
    ))?;
    st.query_map(params![lead_id, limit], activity_row)?
        .collect()
}

/// Whether any lead of `user_id` with this phone number asked not to be called, so a call to
/// the number is refused even when no lead is named.
pub fn phone_is_do_not_call(c: &Connection, user_id: &str, phone: &str) -> rusqlite::Result<bool> {
    c.prepare_cached(
        "SELECT EXISTS(SELECT 1 FROM leads WHERE user_id = ?1 AND do_not_call = 1
           AND replace(replace(replace(replace(phone, ' ', ''), '-', ''), '(', ''), ')', '') = ?2)",
    )?
    .query_row(params![Key::of(user_id), phone], |r| r.get(0))
}
