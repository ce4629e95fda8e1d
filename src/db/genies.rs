//! Genie records, their phone numbers, assignments and document links. Access rules live
//! here once (`can_read_genie`, `can_manage_genie`, `Scope`) so every resource that points
//! at a genie checks it the same way: owners manage their genies, internal admins manage
//! all, users a genie is assigned to (consumers) may read it, and members of a team the genie
//! belongs to may read it (team owners and admins manage it).

use crate::db::sql::types::Value as Sql;
use crate::db::sql::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde_json::{Value, json};
use std::sync::LazyLock;

use super::json_col;
use crate::db::users::Role;

/// One row of `genies`, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct GenieRow {
    pub id: String,
    pub user_id: String,
    pub external_agent_id: Option<String>,
    pub name: String,
    pub description: Option<String>,
    pub use_case: Option<String>,
    pub category: Option<String>,
    pub brand: Option<String>,
    pub system_prompt: Option<String>,
    pub first_message: Option<String>,
    pub voice_id: Option<String>,
    pub llm_model: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
    pub is_active: bool,
    pub setup_completed: bool,
    pub send_conversation_reports: bool,
    pub voice_disabled: bool,
    pub multilingual: bool,
    pub max_duration_seconds: Option<i64>,
    pub turn_timeout_seconds: Option<f64>,
    pub silence_end_seconds: Option<f64>,
    pub turn_mode: String,
    pub max_calls: Option<i64>,
    /// Calls the genie may start in any 60 s, across its campaigns and `call` (None: any).
    pub max_calls_per_minute: Option<i64>,
    pub settings: Value,
    pub branding: Value,
    pub support_emails: Value,
    /// The conversation tools (JSON array, checked by `service::genie_tools`).
    pub tools: Value,
    /// Origins allowed to embed the chat widget (JSON array of strings).
    pub allowed_origins: Value,
    pub page_slug: Option<String>,
    pub web_welcome_message: Option<String>,
    pub group_id: Option<String>,
    pub sort_order: i64,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str = "id, user_id, external_agent_id, name, description, use_case, category, brand, system_prompt, \
    first_message, voice_id, llm_model, temperature, max_tokens, is_active, setup_completed, send_conversation_reports, \
    voice_disabled, multilingual, max_duration_seconds, turn_timeout_seconds, silence_end_seconds, turn_mode, max_calls, \
    settings, branding, support_emails, page_slug, web_welcome_message, group_id, sort_order, created_at, updated_at, tools, allowed_origins, max_calls_per_minute";

fn from_row(r: &Row) -> rusqlite::Result<GenieRow> {
    Ok(GenieRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        external_agent_id: r.get(2)?,
        name: r.get(3)?,
        description: r.get(4)?,
        use_case: r.get(5)?,
        category: r.get(6)?,
        brand: r.get(7)?,
        system_prompt: r.get(8)?,
        first_message: r.get(9)?,
        voice_id: r.get(10)?,
        llm_model: r.get(11)?,
        temperature: r.get(12)?,
        max_tokens: r.get(13)?,
        is_active: r.get(14)?,
        setup_completed: r.get(15)?,
        send_conversation_reports: r.get(16)?,
        voice_disabled: r.get(17)?,
        multilingual: r.get(18)?,
        max_duration_seconds: r.get(19)?,
        turn_timeout_seconds: r.get(20)?,
        silence_end_seconds: r.get(21)?,
        turn_mode: r.get(22)?,
        max_calls: r.get(23)?,
        settings: json_col(r.get(24)?, json!({})),
        branding: json_col(r.get(25)?, json!({})),
        support_emails: json_col(r.get(26)?, json!([])),
        page_slug: r.get(27)?,
        web_welcome_message: r.get(28)?,
        group_id: r.get(29)?,
        sort_order: r.get(30)?,
        created_at: r.get(31)?,
        updated_at: r.get(32)?,
        tools: json_col(r.get(33)?, json!([])),
        allowed_origins: json_col(r.get(34)?, json!([])),
        max_calls_per_minute: r.get(35)?,
    })
}

/// The columns `insert` and `save` both write, in the order of `written_values`: every
/// column but `id`, `user_id` and `created_at`, which never change after the insert.
const WRITTEN: [&str; 34] = [
    "external_agent_id",
    "name",
    "name_lower",
    "description",
    "use_case",
    "category",
    "brand",
    "system_prompt",
    "first_message",
    "voice_id",
    "llm_model",
    "temperature",
    "max_tokens",
    "is_active",
    "setup_completed",
    "send_conversation_reports",
    "voice_disabled",
    "multilingual",
    "max_duration_seconds",
    "turn_timeout_seconds",
    "silence_end_seconds",
    "turn_mode",
    "max_calls",
    "settings",
    "branding",
    "support_emails",
    "page_slug",
    "web_welcome_message",
    "group_id",
    "sort_order",
    "updated_at",
    "tools",
    "allowed_origins",
    "max_calls_per_minute",
];

/// The values of the `WRITTEN` columns, in the same order, so one list serves both the insert
/// and the update.
fn written_values(g: &GenieRow) -> [Sql; 34] {
    [
        g.external_agent_id.clone().into(),
        g.name.clone().into(),
        g.name.to_lowercase().into(),
        g.description.clone().into(),
        g.use_case.clone().into(),
        g.category.clone().into(),
        g.brand.clone().into(),
        g.system_prompt.clone().into(),
        g.first_message.clone().into(),
        g.voice_id.clone().into(),
        g.llm_model.clone().into(),
        g.temperature.into(),
        g.max_tokens.into(),
        g.is_active.into(),
        g.setup_completed.into(),
        g.send_conversation_reports.into(),
        g.voice_disabled.into(),
        g.multilingual.into(),
        g.max_duration_seconds.into(),
        g.turn_timeout_seconds.into(),
        g.silence_end_seconds.into(),
        g.turn_mode.clone().into(),
        g.max_calls.into(),
        g.settings.to_string().into(),
        g.branding.to_string().into(),
        g.support_emails.to_string().into(),
        g.page_slug.clone().into(),
        g.web_welcome_message.clone().into(),
        g.group_id.clone().into(),
        g.sort_order.into(),
        g.updated_at.clone().into(),
        g.tools.to_string().into(),
        g.allowed_origins.to_string().into(),
        g.max_calls_per_minute.into(),
    ]
}

pub fn insert(c: &Connection, g: &GenieRow) -> rusqlite::Result<()> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        let holes: Vec<String> = (1..=WRITTEN.len() + 3).map(|i| format!("?{i}")).collect();
        format!(
            "INSERT INTO genies (id, user_id, created_at, {}) VALUES ({})",
            WRITTEN.join(", "),
            holes.join(", ")
        )
    });
    let fixed = [
        Sql::from(g.id.clone()),
        g.user_id.clone().into(),
        g.created_at.clone().into(),
    ];
    c.prepare_cached(&SQL)?
        .execute(params_from_iter(fixed.into_iter().chain(written_values(g))))?;
    Ok(())
}

/// Writes every mutable column of `g` (identified by `g.id`).
pub fn save(c: &Connection, g: &GenieRow) -> rusqlite::Result<bool> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        let set: Vec<String> = WRITTEN
            .iter()
            .enumerate()
            .map(|(i, col)| format!("{col} = ?{}", i + 2))
            .collect();
        format!("UPDATE genies SET {} WHERE id = ?1", set.join(", "))
    });
    let id = std::iter::once(Sql::from(g.id.clone()));
    // Cached: compiling this 34-column UPDATE cost more than running it.
    let n = c
        .prepare_cached(&SQL)?
        .execute(params_from_iter(id.chain(written_values(g))))?;
    Ok(n == 1)
}

/// Any genie by id, without access checks (internal use: jobs, providers).
pub fn find(c: &Connection, id: &str) -> rusqlite::Result<Option<GenieRow>> {
    static SQL: LazyLock<String> =
        LazyLock::new(|| format!("SELECT {COLS} FROM genies WHERE id = ?1"));
    c.prepare_cached(&SQL)?.query_row([id], from_row).optional()
}

/// True when `user_id` (with `role`) may read the genie: its owner, an internal admin, a
/// user it is assigned to, or a member of a team it belongs to.
pub fn can_read_genie(
    c: &Connection,
    user_id: &str,
    role: Role,
    genie_id: &str,
) -> rusqlite::Result<bool> {
    Ok(get_readable(c, user_id, role, genie_id)?.is_some())
}

/// True when `user_id` (with `role`) may change the genie: its owner, an internal admin, or an
/// owner or admin of a team it belongs to.
/// Consumers never manage genies.
pub fn can_manage_genie(
    c: &Connection,
    user_id: &str,
    role: Role,
    genie_id: &str,
) -> rusqlite::Result<bool> {
    Ok(get_manageable(c, user_id, role, genie_id)?.is_some())
}

pub fn get_readable(
    c: &Connection,
    user_id: &str,
    role: Role,
    id: &str,
) -> rusqlite::Result<Option<GenieRow>> {
    // Built once and cached as a statement: this runs on every genie request, and formatting
    // the column list each time showed up in profiles.
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {COLS} FROM genies g WHERE id = ?1 AND (?3 OR user_id = ?2
             OR EXISTS (SELECT 1 FROM genie_assignments a WHERE a.genie_id = g.id AND a.user_id = ?2)
             OR EXISTS (SELECT 1 FROM team_genies tg JOIN team_members m ON m.team_id = tg.team_id
                        WHERE tg.genie_id = g.id AND m.user_id = ?2))"
        )
    });
    c.prepare_cached(&SQL)?
        .query_row(params![id, user_id, role == Role::InternalAdmin], from_row)
        .optional()
}

pub fn get_manageable(
    c: &Connection,
    user_id: &str,
    role: Role,
    id: &str,
) -> rusqlite::Result<Option<GenieRow>> {
    if role == Role::Consumer {
        return Ok(None);
    }
    // Built once: see `get_readable`.
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {COLS} FROM genies g WHERE id = ?1 AND (?3 OR user_id = ?2
             OR EXISTS (SELECT 1 FROM team_genies tg JOIN team_members m ON m.team_id = tg.team_id
                        WHERE tg.genie_id = g.id AND m.user_id = ?2 AND m.role IN ('owner', 'admin')))"
        )
    });
    c.prepare_cached(&SQL)?
        .query_row(params![id, user_id, role == Role::InternalAdmin], from_row)
        .optional()
}

/// Which genies a listing covers.
#[derive(Debug, Clone)]
pub enum Scope {
    /// The genies a user owns.
    Owned(String),
    /// The genies assigned to a user (consumers).
    Assigned(String),
    /// Every genie (admins in admin mode).
    All,
}

impl Scope {
    fn sql(&self, args: &mut Vec<Sql>) -> &'static str {
        match self {
            Scope::Owned(u) => {
                args.push(Sql::Text(u.clone()));
                "g.user_id = ?"
            }
            Scope::Assigned(u) => {
                args.push(Sql::Text(u.clone()));
                "g.id IN (SELECT genie_id FROM genie_assignments WHERE user_id = ?)"
            }
            Scope::All => "1 = 1",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Lower-cased substring of the name.
    pub search: Option<String>,
    pub category: Option<String>,
    pub group_id: Option<String>,
    pub is_active: Option<bool>,
}

fn filter_sql(scope: &Scope, f: &ListFilter, args: &mut Vec<Sql>) -> String {
    let mut w = vec![scope.sql(args).to_string()];
    if let Some(s) = &f.search {
        // `instr` on the (user_id, name_lower) index: no LIKE wildcards to escape.
        w.push("instr(g.name_lower, ?) > 0".into());
        args.push(Sql::Text(s.clone()));
    }
    if let Some(cat) = &f.category {
        w.push("lower(g.category) = lower(?)".into());
        args.push(Sql::Text(cat.clone()));
    }
    if let Some(gid) = &f.group_id {
        w.push("g.group_id = ?".into());
        args.push(Sql::Text(gid.clone()));
    }
    if let Some(a) = f.is_active {
        w.push("g.is_active = ?".into());
        args.push(Sql::Integer(a as i64));
    }
    w.join(" AND ")
}

/// A page of genies in the user's order (`sort_order`, then id), with the total match count.
pub fn list(
    c: &Connection,
    scope: &Scope,
    f: &ListFilter,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<(Vec<GenieRow>, i64)> {
    let mut args = Vec::new();
    let w = filter_sql(scope, f, &mut args);
    let total: i64 = c.query_row(
        &format!("SELECT COUNT(*) FROM genies g WHERE {w}"),
        params_from_iter(args.iter()),
        |r| r.get(0),
    )?;
    args.push(Sql::Integer(limit));
    args.push(Sql::Integer(offset));
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLS} FROM genies g WHERE {w} ORDER BY g.sort_order, g.id LIMIT ? OFFSET ?"
    ))?;
    let rows = st
        .query_map(params_from_iter(args.iter()), from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((rows, total))
}

/// A keyset page: genies with id greater than `after`, in id order (UUID v7, so creation
/// order). Returns up to `limit + 1` rows so the caller can tell whether more exist.
pub fn page_after(
    c: &Connection,
    scope: &Scope,
    f: &ListFilter,
    after: Option<&str>,
    limit: i64,
) -> rusqlite::Result<Vec<GenieRow>> {
    let mut args = Vec::new();
    let mut w = filter_sql(scope, f, &mut args);
    if let Some(a) = after {
        w.push_str(" AND g.id > ?");
        args.push(Sql::Text(a.to_string()));
    }
    args.push(Sql::Integer(limit + 1));
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLS} FROM genies g WHERE {w} ORDER BY g.id LIMIT ?"
    ))?;
    st.query_map(params_from_iter(args.iter()), from_row)?
        .collect()
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM genies WHERE id = ?1", [id])? == 1)
}

/// The next `sort_order` for a new genie of `user_id` (after all existing ones).
pub fn next_sort_order(c: &Connection, user_id: &str) -> rusqlite::Result<i64> {
    c.query_row(
        "SELECT COALESCE(MAX(sort_order) + 1, 0) FROM genies WHERE user_id = ?1",
        [user_id],
        |r| r.get(0),
    )
}

pub fn set_sort_order(c: &Connection, id: &str, pos: i64, at: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE genies SET sort_order = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, pos, at],
    )? == 1)
}

pub fn slug_taken(c: &Connection, slug: &str, except_id: &str) -> rusqlite::Result<bool> {
    c.prepare_cached("SELECT EXISTS(SELECT 1 FROM genies WHERE page_slug = ?1 AND id <> ?2)")?
        .query_row([slug, except_id], |r| r.get(0))
}

// ---- phone numbers -------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
pub struct PhoneRow {
    pub id: String,
    pub genie_id: String,
    pub number: String,
    pub external_id: Option<String>,
    pub status: String,
    pub created_at: String,
}

pub fn phones(c: &Connection, genie_id: &str) -> rusqlite::Result<Vec<PhoneRow>> {
    let mut st = c.prepare_cached(
        "SELECT id, genie_id, number, external_id, status, created_at FROM genie_phone_numbers WHERE genie_id = ?1 ORDER BY created_at, id",
    )?;
    st.query_map([genie_id], |r| {
        Ok(PhoneRow {
            id: r.get(0)?,
            genie_id: r.get(1)?,
            number: r.get(2)?,
            external_id: r.get(3)?,
            status: r.get(4)?,
            created_at: r.get(5)?,
        })
    })?
    .collect()
}

pub fn insert_phone(c: &Connection, p: &PhoneRow) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO genie_phone_numbers (id, genie_id, number, external_id, status, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![p.id, p.genie_id, p.number, p.external_id, p.status, p.created_at],
    )?;
    Ok(())
}

pub fn delete_phone(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM genie_phone_numbers WHERE id = ?1", [id])? == 1)
}

// ---- assignments -----------------------------------------------------------------------

pub fn assign(c: &Connection, genie_id: &str, user_id: &str, at: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "INSERT INTO genie_assignments (genie_id, user_id, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT DO NOTHING",
        params![genie_id, user_id, at],
    )? == 1)
}

pub fn unassign(c: &Connection, genie_id: &str, user_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM genie_assignments WHERE genie_id = ?1 AND user_id = ?2",
        [genie_id, user_id],
    )? == 1)
}

// ---- documents -----------------------------------------------------------------------

/// A document attached to a genie, as the genie object lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AttachedDoc {
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub doc_type: String,
    pub status: String,
    pub external_id: Option<String>,
    pub is_active: bool,
}

pub fn documents(c: &Connection, genie_id: &str) -> rusqlite::Result<Vec<AttachedDoc>> {
    let mut st = c.prepare_cached(
        "SELECT d.id, d.name, d.type, d.status, d.external_id, d.is_active FROM genie_documents gd
         JOIN documents d ON d.id = gd.document_id WHERE gd.genie_id = ?1 ORDER BY gd.created_at, d.id",
    )?;
    st.query_map([genie_id], |r| {
        Ok(AttachedDoc {
            id: r.get(0)?,
            name: r.get(1)?,
            doc_type: r.get(2)?,
            status: r.get(3)?,
            external_id: r.get(4)?,
            is_active: r.get(5)?,
        })
    })?
    .collect()
}

/// Copies the document links of `from` to `to` (clone).
pub fn copy_documents(c: &Connection, from: &str, to: &str, at: &str) -> rusqlite::Result<usize> {
    c.execute(
        "INSERT INTO genie_documents (genie_id, document_id, created_at)
         SELECT ?2, document_id, ?3 FROM genie_documents WHERE genie_id = ?1
         ON CONFLICT DO NOTHING",
        params![from, to, at],
    )
}

/// `{id, full_name, email}` of a user, for the admin view's `owner`.
pub fn owner(c: &Connection, user_id: &str) -> rusqlite::Result<Option<Value>> {
    c.query_row("SELECT id, full_name, email FROM users WHERE id = ?1", [user_id], |r| {
        Ok(json!({"id": r.get::<_, String>(0)?, "full_name": r.get::<_, Option<String>>(1)?, "email": r.get::<_, String>(2)?}))
    })
    .optional()
}

/// A slug for a new genie page: the name's letters and digits, and a random suffix.
pub fn new_slug(name: &str) -> String {
    let mut base = String::new();
    for ch in name.to_lowercase().chars() {
        if ch.is_ascii_alphanumeric() {
            base.push(ch);
        } else if !base.ends_with('-') && !base.is_empty() {
            base.push('-');
        }
        if base.len() >= 40 {
            break;
        }
    }
    let base = base.trim_matches('-');
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    if base.is_empty() {
        format!("genie-{suffix}")
    } else {
        format!("{base}-{suffix}")
    }
}
