//! Marketplace operations: publishing a genie as a template listing (a copy of its prompt,
//! settings, voice, category and description, never its phone, knowledge base, tools or
//! webhooks), who sees and changes a listing, moderation, and installing a listing as a new
//! genie of the caller.

use std::future::Future;

use serde_json::{Value, json};

use crate::db::marketplace::{self as repo, Listing, ListingUpdate};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Settings keys a template never carries (phone, knowledge base, tools and webhooks).
const PRIVATE_KEYS: &[&str] = &[
    "knowledge_base",
    "phone",
    "phone_number",
    "phone_numbers",
    "tools",
    "webhook",
    "webhooks",
    "rag",
    "documents",
];

fn strip_private(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !PRIVATE_KEYS.contains(&k.as_str()));
            m.values_mut().for_each(strip_private);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_private),
        _ => {}
    }
}

/// Everyone sees published listings that are not hidden; publishers see their own, and
/// admins see all.
pub fn visible(l: &Listing, viewer: &str, admin: bool) -> bool {
    (l.status == "published" && !l.is_hidden) || l.user_id == viewer || admin
}

/// Whether `viewer` may install the listing: unpublished or hidden listings install only
/// for their publisher (admins included).
fn installable(l: &Listing, viewer: &str) -> bool {
    (l.status == "published" && !l.is_hidden) || l.user_id == viewer
}

async fn find(app: &AppState, id: &str) -> ApiResult<Option<Listing>> {
    let id = id.to_string();
    app.db.read(move |c| Ok(repo::get_any(c, &id)?)).await
}

/// A listing `viewer` may see (see [`visible`]); anything else reads as absent.
pub async fn get(app: &AppState, viewer: &str, admin: bool, id: &str) -> ApiResult<Listing> {
    find(app, id)
        .await?
        .filter(|l| visible(l, viewer, admin))
        .ok_or_else(|| ApiError::not_found("listing"))
}

/// What a publisher says about a listing instead of the genie's own name, description and
/// category, and its tags (a JSON array).
pub struct Publish {
    pub name: Option<String>,
    pub description: Option<String>,
    pub category: Option<String>,
    pub tags: Value,
}

/// Publishes the caller's genie as a listing.
pub async fn publish(
    app: &AppState,
    user_id: &str,
    genie_id: &str,
    p: Publish,
) -> ApiResult<Listing> {
    let (uid, gid) = (user_id.to_string(), genie_id.to_string());
    app.db
        .write(move |c| {
            let mut t =
                repo::genie_template(c, &uid, &gid)?.ok_or_else(ApiError::agent_not_found)?;
            strip_private(&mut t.settings);
            t.tools = crate::service::genie_tools::without_secrets(&t.tools);
            t.name = p.name.unwrap_or(t.name);
            t.description = p.description.or(t.description);
            t.category = p.category.or(t.category);
            Ok(repo::insert(c, &uid, &gid, &t, &p.tags)?)
        })
        .await
}

/// A listing of the caller's, for a change; anyone else's reads as absent.
fn own(c: &crate::db::Connection, user_id: &str, id: &str) -> ApiResult<Listing> {
    repo::get_any(c, id)?
        .filter(|l| l.user_id == user_id)
        .ok_or_else(|| ApiError::not_found("listing"))
}

/// Changes a listing of the caller's; returns it as it is now.
pub async fn update(
    app: &AppState,
    user_id: &str,
    id: &str,
    u: ListingUpdate,
) -> ApiResult<Listing> {
    let (uid, id) = (user_id.to_string(), id.to_string());
    app.db
        .write(move |c| {
            let l = own(c, &uid, &id)?;
            repo::update(c, &l.id, &u)?;
            Ok(repo::get_any(c, &id)?.expect("exists"))
        })
        .await
}

/// Deletes a listing of the caller's (installed genies stay); returns it as it was.
pub async fn delete(app: &AppState, user_id: &str, id: &str) -> ApiResult<Listing> {
    let (uid, id) = (user_id.to_string(), id.to_string());
    app.db
        .write(move |c| {
            let l = own(c, &uid, &id)?;
            repo::delete(c, &id)?;
            Ok(l)
        })
        .await
}

/// A moderation flag admins set on any listing.
#[derive(Debug, Clone, Copy)]
pub enum Flag {
    Hidden,
    Featured,
}

/// Sets or clears a moderation flag; returns the listing as it is now.
pub async fn moderate(app: &AppState, id: &str, flag: Flag, on: bool) -> ApiResult<Listing> {
    let id = id.to_string();
    let col = match flag {
        Flag::Hidden => "is_hidden",
        Flag::Featured => "is_featured",
    };
    app.db
        .write(move |c| {
            if !repo::set_flag(c, &id, col, on)? {
                return Err(ApiError::not_found("listing"));
            }
            Ok(repo::get_any(c, &id)?.expect("exists"))
        })
        .await
}

/// What an install made.
pub struct Installed {
    /// The new genie, as the genies resource shows it.
    pub genie: Value,
    pub listing: Listing,
    /// The new genie's name.
    pub name: String,
    pub install_count: i64,
}

/// Installs a listing as a new genie of `user_id`, named `name` or after the listing.
///
/// `create` makes the genie from `create` data (the genies resource's own create:
/// provisioned with the voice provider first, nothing left behind when the provider
/// fails, `genie.created` emitted) and returns its full object. It is passed in because
/// genie creation still lives with the genies actions, which this layer may not import.
/// The install is counted only once the genie exists.
pub async fn install<F, Fut>(
    app: &AppState,
    user_id: &str,
    listing_id: &str,
    name: Option<String>,
    create: F,
) -> ApiResult<Installed>
where
    F: FnOnce(Value) -> Fut,
    Fut: Future<Output = ApiResult<Value>>,
{
    let l = find(app, listing_id)
        .await?
        .filter(|l| installable(l, user_id))
        .ok_or_else(|| ApiError::not_found("listing"))?;
    let name = name.unwrap_or_else(|| l.name.clone());
    // Never a phone, leads or documents: the template carries none.
    let genie = create(json!({
        "genieName": name, "description": l.description, "category": l.category,
        "systemPrompt": l.system_prompt, "firstMessage": l.first_message,
        "webWelcomeMessage": l.web_welcome_message, "voiceId": l.voice_id,
        "llmModel": l.llm_model, "temperature": l.temperature, "maxTokens": l.max_tokens,
        "settings": l.settings, "setupCompleted": true,
        "tools": crate::service::genie_tools::without_secrets(&l.tools),
    }))
    .await?;
    let gid = genie["id"].as_str().unwrap_or_default().to_string();
    let (lid, uid) = (l.id.clone(), user_id.to_string());
    let install_count = app
        .db
        .write(move |c| Ok(repo::record_install(c, &lid, &uid, &gid)?))
        .await?;
    Ok(Installed {
        genie,
        listing: l,
        name,
        install_count,
    })
}
