//! Marketplace listings (template copies of genies) and their installs.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::{json_col, new_id, now};

#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    pub id: String,
    #[serde(skip)]
    pub user_id: String,
    pub source_genie_id: Option<String>,
    pub name: String,
    pub description: Option<String>,
    pub category: Option<String>,
    pub tags: Value,
    pub system_prompt: Option<String>,
    pub first_message: Option<String>,
    pub web_welcome_message: Option<String>,
    pub voice_id: Option<String>,
    pub llm_model: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
    pub settings: Value,
    /// The genie's tools, without credential references.
    pub tools: Value,
    pub status: String,
    pub is_hidden: bool,
    pub is_featured: bool,
    pub install_count: i64,
    pub publisher: Value,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str = "l.id, l.user_id, l.source_genie_id, l.name, l.description, l.category, l.tags, l.system_prompt,
    l.first_message, l.web_welcome_message, l.voice_id, l.llm_model, l.temperature, l.max_tokens, l.settings,
    l.status, l.is_hidden, l.is_featured, l.install_count, l.created_at, l.updated_at, u.full_name, l.tools";

fn from_row(r: &Row) -> rusqlite::Result<Listing> {
    let user_id: String = r.get(1)?;
    Ok(Listing {
        id: r.get(0)?,
        publisher: serde_json::json!({"id": user_id, "full_name": r.get::<_, Option<String>>(21)?}),
        user_id,
        source_genie_id: r.get(2)?,
        name: r.get(3)?,
        description: r.get(4)?,
        category: r.get(5)?,
        tags: json_col(r.get(6)?, serde_json::json!([])),
        system_prompt: r.get(7)?,
        first_message: r.get(8)?,
        web_welcome_message: r.get(9)?,
        voice_id: r.get(10)?,
        llm_model: r.get(11)?,
        temperature: r.get(12)?,
        max_tokens: r.get(13)?,
        settings: json_col(r.get(14)?, serde_json::json!({})),
        tools: json_col(r.get(22)?, serde_json::json!([])),
        status: r.get(15)?,
        is_hidden: r.get(16)?,
        is_featured: r.get(17)?,
        install_count: r.get(18)?,
        created_at: r.get(19)?,
        updated_at: r.get(20)?,
    })
}

/// The genie fields a template copies. Never the phone number, leads or documents.
#[derive(Debug, Clone)]
pub struct GenieTemplate {
    pub name: String,
    pub description: Option<String>,
    pub category: Option<String>,
    pub use_case: Option<String>,
    pub system_prompt: Option<String>,
    pub first_message: Option<String>,
    pub web_welcome_message: Option<String>,
    pub voice_id: Option<String>,
    pub llm_model: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
    pub settings: Value,
    pub tools: Value,
}

pub fn genie_template(
    c: &Connection,
    user_id: &str,
    genie_id: &str,
) -> rusqlite::Result<Option<GenieTemplate>> {
    c.query_row(
        "SELECT name, description, category, use_case, system_prompt, first_message, web_welcome_message, voice_id,
                llm_model, temperature, max_tokens, settings, tools
         FROM genies WHERE id = ?1 AND user_id = ?2",
        [genie_id, user_id],
        |r| {
            Ok(GenieTemplate {
                name: r.get(0)?,
                description: r.get(1)?,
                category: r.get(2)?,
                use_case: r.get(3)?,
                system_prompt: r.get(4)?,
                first_message: r.get(5)?,
                web_welcome_message: r.get(6)?,
                voice_id: r.get(7)?,
                llm_model: r.get(8)?,
                temperature: r.get(9)?,
                max_tokens: r.get(10)?,
                settings: json_col(r.get(11)?, serde_json::json!({})),
                tools: json_col(r.get(12)?, serde_json::json!([])),
            })
        },
    )
    .optional()
}

pub fn insert(
    c: &Connection,
    user_id: &str,
    genie_id: &str,
    t: &GenieTemplate,
    tags: &Value,
) -> rusqlite::Result<Listing> {
    let id = new_id();
    let at = now();
    c.execute(
        "INSERT INTO marketplace_listings (id, user_id, source_genie_id, name, description, category, tags, system_prompt,
             first_message, web_welcome_message, voice_id, llm_model, temperature, max_tokens, settings, status,
             created_at, updated_at, tools)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, 'published', ?16, ?16, ?17)",
        params![
            id, user_id, genie_id, t.name, t.description, t.category, tags.to_string(), t.system_prompt, t.first_message,
            t.web_welcome_message, t.voice_id, t.llm_model, t.temperature, t.max_tokens, t.settings.to_string(), at,
            t.tools.to_string()
        ],
    )?;
    Ok(get_any(c, &id)?.expect("row just inserted"))
}

pub fn get_any(c: &Connection, id: &str) -> rusqlite::Result<Option<Listing>> {
    c.query_row(
        &format!("SELECT {COLS} FROM marketplace_listings l JOIN users u ON u.id = l.user_id WHERE l.id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

/// Which listings a browse sees.
pub enum Scope<'a> {
    /// Published and not hidden.
    Public,
    /// The caller's own, in every state.
    Mine(&'a str),
    /// Everything (admins).
    All,
}

pub struct Browse<'a> {
    pub scope: Scope<'a>,
    pub search: Option<String>,
    pub category: Option<String>,
    /// `installs`, `newest`, `name` or `featured` (default).
    pub sort: &'a str,
    pub limit: i64,
    pub offset: i64,
}

pub fn browse(c: &Connection, b: &Browse) -> rusqlite::Result<(Vec<Listing>, i64)> {
    let (scope_sql, owner) = match b.scope {
        Scope::Public => ("l.status = 'published' AND l.is_hidden = 0", None),
        Scope::Mine(u) => ("l.user_id = ?1", Some(u)),
        Scope::All => ("1 = 1", None),
    };
    // LIKE folds ASCII case itself; lower-casing the term in Rust as well would fold
    // non-ASCII letters that SQLite's lower() leaves alone, so `Ä` would never match `Ä`.
    let pattern = b.search.as_ref().map(|s| {
        format!(
            "%{}%",
            s.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        )
    });
    let where_sql = format!(
        "WHERE {scope_sql} AND (?2 IS NULL OR lower(l.name) LIKE ?2 ESCAPE '\\' OR lower(COALESCE(l.description, '')) LIKE ?2 ESCAPE '\\'
                                OR EXISTS (SELECT 1 FROM json_each(l.tags) t WHERE t.value LIKE ?2 ESCAPE '\\'))
           AND (?3 IS NULL OR lower(l.category) = lower(?3)) AND (?1 IS NULL OR ?1 = ?1)"
    );
    let order = match b.sort {
        "installs" => "l.install_count DESC, l.created_at DESC",
        "newest" => "l.created_at DESC",
        "name" => "lower(l.name), l.id",
        _ => "l.is_featured DESC, l.install_count DESC, l.created_at DESC",
    };
    let total: i64 = c.query_row(
        &format!("SELECT COUNT(*) FROM marketplace_listings l {where_sql}"),
        params![owner, pattern, b.category],
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM marketplace_listings l JOIN users u ON u.id = l.user_id {where_sql}
         ORDER BY {order}, l.id LIMIT ?4 OFFSET ?5"
    ))?;
    let items = st
        .query_map(
            params![owner, pattern, b.category, b.limit, b.offset],
            from_row,
        )?
        .collect::<rusqlite::Result<_>>()?;
    Ok((items, total))
}

pub struct ListingUpdate {
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub category: Option<Option<String>>,
    pub tags: Option<Value>,
    pub system_prompt: Option<Option<String>>,
    pub first_message: Option<Option<String>>,
    pub status: Option<String>,
}

pub fn update(c: &Connection, id: &str, u: &ListingUpdate) -> rusqlite::Result<()> {
    let set = |col: &str, v: &dyn rusqlite::ToSql| {
        c.execute(
            &format!("UPDATE marketplace_listings SET {col} = ?2 WHERE id = ?1"),
            params![id, v],
        )
    };
    if let Some(v) = &u.name {
        set("name", v)?;
    }
    if let Some(v) = &u.description {
        set("description", v)?;
    }
    if let Some(v) = &u.category {
        set("category", v)?;
    }
    if let Some(v) = &u.tags {
        set("tags", &v.to_string())?;
    }
    if let Some(v) = &u.system_prompt {
        set("system_prompt", v)?;
    }
    if let Some(v) = &u.first_message {
        set("first_message", v)?;
    }
    if let Some(v) = &u.status {
        set("status", v)?;
    }
    set("updated_at", &now())?;
    Ok(())
}

pub fn set_flag(c: &Connection, id: &str, column: &str, value: bool) -> rusqlite::Result<bool> {
    debug_assert!(column == "is_hidden" || column == "is_featured");
    Ok(c.execute(
        &format!("UPDATE marketplace_listings SET {column} = ?2, updated_at = ?3 WHERE id = ?1"),
        params![id, value, now()],
    )? == 1)
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM marketplace_listings WHERE id = ?1", [id])? == 1)
}

/// Records that `user_id` installed the listing as `genie_id`; returns the new install count.
pub fn record_install(
    c: &Connection,
    listing_id: &str,
    user_id: &str,
    genie_id: &str,
) -> rusqlite::Result<i64> {
    c.execute(
        "INSERT INTO marketplace_installs (id, listing_id, user_id, genie_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![new_id(), listing_id, user_id, genie_id, now()],
    )?;
    c.query_row(
        "UPDATE marketplace_listings SET install_count = install_count + 1 WHERE id = ?1 RETURNING install_count",
        [listing_id],
        |r| r.get(0),
    )
}
