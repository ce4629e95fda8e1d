//! The full genie object (`get`, `all`, and every action that returns `{genie}`), with the
//! snake_case member list pinned in contract.md.

use crate::db::sql::Connection;
use serde_json::{Value, json};

use super::settings::effective_settings;
use crate::db::genie_groups;
use crate::db::genies::{self as repo, GenieRow};

/// What the page of a genie can do on this service: its text chat answers only with a
/// language model; with the `elevenlabs` provider a genie with an external agent gets the
/// provider's voice widget instead.
#[derive(Debug, Clone, Copy)]
pub struct PageChat {
    llm: bool,
    widget_provider: bool,
}

impl PageChat {
    pub fn of(app: &crate::state::AppState) -> PageChat {
        PageChat {
            llm: app.llm.is_some(),
            widget_provider: app.voice.get("elevenlabs").is_some(),
        }
    }

    /// Adds `page.status` (`ready`, or `chat_unavailable` when the page's text chat cannot
    /// answer) and `page.warning` (why, and what the operator can do; `null` when ready) to
    /// a rendered genie. Visitors of the page are only told the assistant can't chat.
    pub fn apply(self, g: &GenieRow, genie: &mut Value) {
        let widget = self.widget_provider
            && genie["provider"] == json!("elevenlabs")
            && g.external_agent_id
                .as_deref()
                .is_some_and(|a| !a.is_empty());
        if let Some(page) = genie.get_mut("page").and_then(Value::as_object_mut) {
            let (status, warning) = if self.llm || widget {
                ("ready", Value::Null)
            } else {
                (
                    "chat_unavailable",
                    json!(crate::service::page_chat::UNAVAILABLE_WARNING),
                )
            };
            page.insert("status".into(), json!(status));
            page.insert("warning".into(), warning);
        }
    }
}

/// Renders `g` with its phone, page, group, documents and (when `with_owner`, i.e. an admin
/// in admin mode) its owner. `base` is the service's public base URL.
pub fn full_genie(
    c: &Connection,
    g: &GenieRow,
    with_owner: bool,
    base: &str,
) -> rusqlite::Result<Value> {
    let phone = repo::phones(c, &g.id)?
        .into_iter()
        .next()
        .map(|p| json!({"number": p.number, "status": p.status}));
    let page = g.page_slug.as_ref().map(|slug| {
        json!({"slug": slug, "welcome_message": g.web_welcome_message, "url": format!("{base}/g/{slug}")})
    });
    let group = match &g.group_id {
        Some(gid) => genie_groups::find(c, gid)?
            .map(|gr| json!({"id": gr.id, "name": gr.name, "sort_order": gr.sort_order})),
        None => None,
    };
    let documents: Vec<Value> = repo::documents(c, &g.id)?
        .into_iter()
        .map(|d| json!({"id": d.id, "name": d.name, "type": d.doc_type, "status": d.status, "external_id": d.external_id, "is_active": d.is_active}))
        .collect();
    let owner = if with_owner {
        repo::owner(c, &g.user_id)?
    } else {
        None
    };
    let provider = crate::db::genie_providers::get(c, &g.id)?;
    let mut genie = json!({
        "id": g.id,
        "name": g.name,
        "description": g.description,
        "use_case": g.use_case,
        "category": g.category,
        "brand": g.brand,
        "system_prompt": g.system_prompt,
        "first_message": g.first_message,
        "voice_id": g.voice_id,
        "llm_model": g.llm_model,
        "temperature": g.temperature,
        "max_tokens": g.max_tokens,
        "is_active": g.is_active,
        "setup_completed": g.setup_completed,
        "send_conversation_reports": g.send_conversation_reports,
        "voice_disabled": g.voice_disabled,
        "multilingual": g.multilingual,
        "max_duration_seconds": g.max_duration_seconds,
        "turn_timeout_seconds": g.turn_timeout_seconds,
        "silence_end_seconds": g.silence_end_seconds,
        "turn_mode": g.turn_mode,
        "max_calls": g.max_calls,
        "max_calls_per_minute": g.max_calls_per_minute,
        "settings": effective_settings(g),
        "branding": g.branding,
        "support_emails": g.support_emails,
        "tools": g.tools,
        "allowed_origins": g.allowed_origins,
        "phone": phone,
        "page": page,
        "group": group,
        "documents": documents,
        "owner": owner,
        "sort_order": g.sort_order,
        "created_at": g.created_at,
        "updated_at": g.updated_at,
    });
    genie["provider"] = json!(provider.provider);
    genie["provider_state"] = json!(provider.state);
    genie["provider_error"] = json!(provider.error);
    let (drift, checked) = crate::db::genie_moves::drift(c, &g.id)?;
    genie["provider_drift"] = json!({"changes": drift, "checked_at": checked});
    Ok(genie)
}
