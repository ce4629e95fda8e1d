//! Response schemas: the records the API answers with (contract.md's shapes) and which
//! `data` each action returns with which success status. A typed client needs these to
//! decode answers; `tests/it/openapi.rs` checks them against real responses.

use serde_json::{Map, Value, json};

fn t(ty: &str) -> Value {
    json!({"type": ty})
}
/// `ty` or null.
fn n(ty: &str) -> Value {
    json!({"type": [ty, "null"]})
}
fn arr(items: Value) -> Value {
    json!({"type": "array", "items": items})
}
fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}
/// Any JSON value (free-form members such as `settings` or `metadata`).
fn any() -> Value {
    json!({})
}
fn object(required: &[&str], props: Value) -> Value {
    json!({"type": "object", "required": required, "properties": props})
}

/// The record schemas, by component name.
pub fn records() -> Map<String, Value> {
    let s = || t("string");
    let ns = || n("string");
    let b = || t("boolean");
    // Outside the `json!` below, whose nesting is at the macro's recursion limit.
    let drift = object(
        &["changes", "checked_at"],
        json!({"changes": {"type": ["array", "null"], "items": t("object")}, "checked_at": ns()}),
    );
    let time = || json!({"type": "string", "description": "RFC 3339 UTC, milliseconds"});
    let mut m = Map::new();
    m.insert(
        "ApiKey".into(),
        object(
            &["id", "name", "key_prefix", "status", "created_at"],
            json!({
                "id": s(), "name": s(), "key_prefix": s(),
                "status": {"enum": ["active", "revoked"]},
                "created_at": time(), "last_used_at": ns(), "revoked_at": ns(),
                "key": {"type": "string", "description": "The full secret; only in the create answer"},
            }),
        ),
    );
    m.insert(
        "GenieSummary".into(),
        object(
            &["id", "name", "is_active", "created_at"],
            json!({
                "id": s(), "name": s(), "description": ns(), "use_case": ns(), "category": ns(),
                "is_active": b(), "setup_completed": b(), "created_at": time(),
            }),
        ),
    );
    m.insert(
        "Genie".into(),
        object(
            &[
                "id",
                "name",
                "is_active",
                "setup_completed",
                "settings",
                "phone",
                "page",
                "group",
                "documents",
                "owner",
                "created_at",
                "updated_at",
            ],
            json!({
                "id": s(), "name": s(), "description": ns(), "use_case": ns(), "category": ns(),
                "brand": ns(), "system_prompt": ns(), "first_message": ns(), "voice_id": ns(),
                "llm_model": ns(), "temperature": n("number"), "max_tokens": n("integer"),
                "is_active": b(), "setup_completed": b(), "send_conversation_reports": b(),
                "voice_disabled": b(), "max_duration_seconds": n("integer"),
                "turn_timeout_seconds": n("number"), "silence_end_seconds": n("number"),
                "turn_mode": ns(), "max_calls": n("integer"), "max_calls_per_minute": n("integer"), "settings": t("object"),
                "branding": any(), "support_emails": any(),
                "tools": arr(t("object")), "allowed_origins": arr(s()),
                "phone": n("object"), "page": n("object"), "group": n("object"),
                "documents": arr(t("object")), "owner": n("object"),
                "sort_order": t("integer"), "created_at": time(), "updated_at": time(),
                "provider": ns(), "provider_state": {"enum": ["in_sync", "pending", "failed"]},
                "provider_error": ns(),
                "provider_drift": drift,
            }),
        ),
    );
    m.insert(
        "SyncRun".into(),
        object(
            &["id", "status", "genies", "created", "updated", "unchanged", "errors"],
            json!({
                "id": s(), "genie_id": ns(), "status": {"enum": ["queued", "running", "succeeded", "failed"]},
                "genies": t("integer"), "genies_done": t("integer"), "created": t("integer"),
                "updated": t("integer"), "unchanged": t("integer"), "errors": arr(t("object")),
                "started_at": ns(), "finished_at": ns(), "created_at": time(), "updated_at": time(),
            }),
        ),
    );
    m.insert(
        "Document".into(),
        object(
            &[
                "id",
                "name",
                "type",
                "status",
                "is_active",
                "is_public",
                "dependent_agents",
                "created_at",
            ],
            json!({
                "id": s(), "external_id": ns(), "el_doc_id": ns(), "name": s(),
                "type": {"enum": ["text", "url", "website", "youtube", "pdf_upload", "file_upload"]},
                "status": {"enum": ["pending_extraction", "pending_optimization", "completed", "failed"]},
                "error": ns(), "is_active": b(), "is_public": b(), "folder_id": ns(),
                "folder": n("object"), "size_bytes": n("integer"), "source_url": ns(),
                "dependent_agents": arr(r("AgentRef")),
                "created_at": time(), "updated_at": time(),
            }),
        ),
    );
    m.insert(
        "AgentRef".into(),
        object(&["id"], json!({"id": s(), "name": ns()})),
    );
    let lead_enum = |values: &[&str]| {
        let mut v: Vec<Value> = values.iter().map(|s| json!(s)).collect();
        v.push(Value::Null);
        json!({"enum": v})
    };
    let status = lead_enum(&["new", "contacted", "qualified", "converted"]);
    let priority = lead_enum(&["low", "medium", "high"]);
    m.insert(
        "Lead".into(),
        object(
            &["id", "agent_id", "user_id", "created_at"],
            json!({
                "id": t("integer"), "agent_id": s(), "user_id": s(),
                "name": ns(), "email": ns(), "phone": ns(),
                "status": status, "priority": priority,
                "budget": ns(), "timeline": ns(), "address": n("object"), "notes": ns(),
                "assigned_to": ns(), "conversation_id": n("integer"),
                "primary_lead_id": n("integer"), "is_decision_maker": n("boolean"), "do_not_call": b(),
                "preferred_contact_method": lead_enum(&["email", "phone", "sms"]),
                "preferred_contact_time": ns(), "metadata": n("object"),
                "created_at": time(), "updated_at": ns(), "agent": n("object"),
            }),
        ),
    );
    m.insert(
        "LeadSummary".into(),
        object(
            &["id", "agent_id", "created_at"],
            json!({
                "id": t("integer"), "agent_id": s(), "name": ns(), "email": ns(), "phone": ns(),
                "status": ns(), "priority": ns(), "created_at": time(),
            }),
        ),
    );
    m.insert(
        "LeadActivity".into(),
        object(
            &["type"],
            json!({"type": s(), "description": ns(), "metadata": any(), "created_at": time()}),
        ),
    );
    m.insert(
        "LeadStats".into(),
        object(
            &["total", "by_status"],
            json!({
                "total": t("integer"),
                "by_status": object(&["new", "contacted", "qualified", "converted"], json!({
                    "new": t("integer"), "contacted": t("integer"),
                    "qualified": t("integer"), "converted": t("integer"),
                })),
            }),
        ),
    );
    m.insert(
        "GenieVersion".into(),
        object(
            &["version", "created_at", "summary", "live"],
            json!({
                "version": {"type": ["integer", "string"], "description": "a number, or \"draft\""},
                "created_at": time(), "created_by": ns(), "summary": s(), "live": b(),
                "base_version": n("integer"),
                "config": {"type": "object", "description": "Only in get-version: what the genie says and does"},
            }),
        ),
    );
    m.insert(
        "GenieTest".into(),
        object(
            &["id", "genie_id", "name", "criteria", "created_at"],
            json!({
                "id": s(), "genie_id": s(), "user_id": s(), "name": s(),
                "turns": {"type": ["array", "null"], "items": s()},
                "simulated_user": n("object"), "criteria": arr(n("object")),
                "created_at": time(), "updated_at": time(),
            }),
        ),
    );
    m.insert(
        "GenieTestRun".into(),
        object(
            &[
                "id",
                "test_id",
                "genie_id",
                "target",
                "status",
                "created_at",
            ],
            json!({
                "id": s(), "test_id": s(), "genie_id": s(), "user_id": s(),
                "target": {"type": "string", "description": "draft, live, or the version number"},
                "status": {"enum": ["queued", "running", "passed", "failed", "error"]},
                "passed": n("boolean"), "transcript": arr(any()),
                "results": arr(object(&["type", "passed", "reason"], json!({
                    "type": s(), "value": any(), "passed": b(), "reason": s(),
                }))),
                "tokens": t("integer"), "error": ns(), "created_at": time(), "finished_at": ns(),
            }),
        ),
    );
    m.insert(
        "ConfigChange".into(),
        object(
            &["path", "from", "to"],
            json!({"path": s(), "from": any(), "to": any()}),
        ),
    );
    m.insert(
        "DriftChange".into(),
        object(
            &["path", "genied", "platform"],
            json!({"path": s(), "genied": any(), "platform": any()}),
        ),
    );
    m.insert(
        "GenieVersionStats".into(),
        object(
            &["version", "conversations", "analysed"],
            json!({
                "version": n("integer"), "conversations": t("integer"),
                "average_duration_seconds": n("number"), "analysed": t("integer"),
                "successful_share": n("number"),
            }),
        ),
    );
    m.insert(
        "Conversation".into(),
        object(
            &["id", "channel", "status", "started_at", "created_at"],
            json!({
                "id": s(), "user_id": s(), "genie_id": ns(), "genie": n("object"),
                "external_id": ns(), "channel": s(), "status": s(), "started_at": time(),
                "duration_seconds": t("integer"), "turn_count": t("integer"), "summary": ns(),
                "analysis": any(), "metadata": any(), "tags": any(),
                "created_at": time(), "updated_at": time(),
                "version": {"type": ["integer", "null"], "description": "The genie version that served it (public page chats)"},
                "transcript": {"description": "Only in get, create, update and analyze answers"},
                "figures": {
                    "description": "With the transcript: turns, duration_seconds, llm {calls, first_token_ms {avg, max}, total_ms {avg, max}, tokens_in, tokens_out, tool_calls, per_turn}, estimated_cost {amount, currency, priced_turns, unpriced_turns} or null",
                    "type": "object",
                    "required": ["turns", "duration_seconds", "llm", "estimated_cost"],
                },
            }),
        ),
    );
    m.insert(
        "WorkerGenie".into(),
        object(
            &[
                "id",
                "name",
                "soul_prompt",
                "trigger_type",
                "is_active",
                "created_at",
            ],
            json!({
                "id": s(), "name": s(), "soul_prompt": s(),
                "trigger_type": {"enum": ["manual", "schedule", "event"]},
                "schedule": ns(), "timezone": s(), "event_type": ns(),
                "credential_refs": arr(s()), "is_active": b(), "llm_model": ns(),
                "max_steps": t("integer"), "created_at": time(), "updated_at": time(),
            }),
        ),
    );
    m.insert(
        "WorkerRun".into(),
        object(
            &["id", "worker_genie_id", "status", "created_at"],
            json!({
                "id": s(), "worker_genie_id": s(),
                "status": {"enum": ["queued", "running", "succeeded", "failed", "cancelled"]},
                "trigger": s(), "input": any(), "output": ns(), "error": ns(),
                "steps": any(), "usage": any(), "created_at": time(),
                "started_at": ns(), "finished_at": ns(), "duration_ms": n("integer"),
            }),
        ),
    );
    m.insert(
        "Credential".into(),
        object(
            &["id", "name", "credential_type", "created_at"],
            json!({
                "id": s(), "name": s(), "credential_type": s(), "url_prefix": ns(),
                "header_name": ns(), "created_at": time(), "updated_at": time(),
            }),
        ),
    );
    m.insert(
        "QrCode".into(),
        object(
            &[
                "id",
                "genie_id",
                "download_count",
                "is_deleted",
                "created_at",
            ],
            json!({
                "id": s(), "genie_id": s(), "label": ns(), "url": s(),
                "download_count": t("integer"), "is_deleted": b(), "created_at": time(),
            }),
        ),
    );
    m.insert(
        "Account".into(),
        object(
            &[
                "id",
                "email",
                "role",
                "status",
                "has_password",
                "identities",
                "created_at",
            ],
            json!({
                "id": s(), "email": s(), "full_name": ns(),
                "role": {"enum": ["internal_admin", "standard_user", "consumer"]},
                "avatar_url": ns(), "timezone": ns(), "preferences": any(),
                "created_at": time(), "updated_at": time(),
                "status": {"enum": ["active", "disabled", "deleting"]}, "disabled_at": ns(),
                "deleting_at": ns(),
                "has_password": b(),
                "identities": arr(object(&["issuer", "subject", "created_at"], json!({
                    "issuer": s(), "subject": s(), "email": ns(), "created_at": time(),
                    "last_login_at": ns(),
                }))),
            }),
        ),
    );
    m.insert(
        "AccountInvitation".into(),
        object(
            &["id", "email", "role", "status", "expires_at", "created_at"],
            json!({
                "id": s(), "email": s(), "full_name": ns(),
                "role": {"enum": ["internal_admin", "standard_user", "consumer"]},
                "status": {"enum": ["pending", "accepted", "revoked"]},
                "invited_by": s(), "expires_at": time(), "created_at": time(),
                "responded_at": ns(), "user_id": ns(),
            }),
        ),
    );
    m.insert(
        "Campaign".into(),
        object(
            &[
                "id",
                "name",
                "genie_id",
                "status",
                "filters",
                "concurrency",
                "calls_per_minute",
                "calling_hours",
                "retry",
                "counts",
                "created_at",
            ],
            json!({
                "id": s(), "name": s(), "genie_id": s(), "user_id": s(),
                "status": {"enum": ["draft", "running", "paused", "completed", "cancelled"]},
                "filters": t("object"), "concurrency": t("integer"), "calls_per_minute": t("integer"),
                "calling_hours": object(&["start", "end", "timezone"], json!({"start": s(), "end": s(), "timezone": s()})),
                "retry": object(&["max_attempts", "delay_seconds"], json!({"max_attempts": t("integer"), "delay_seconds": t("integer")})),
                "persona": ns(), "variables": t("object"),
                "waiting": {"type": ["string", "null"], "description": "Why a running campaign places no call now (calling hours, retry spacing, the call rate)"},
                "calls_in_progress": t("integer"),
                "counts": {"type": "object", "description": "Targets by state (targets, pending, calling, done) and finished ones by outcome (completed, no_answer, busy, failed, do_not_call, no_phone, cancelled, lead_deleted)"},
                "created_at": time(), "updated_at": time(), "started_at": ns(), "finished_at": ns(),
            }),
        ),
    );
    m.insert(
        "CampaignCall".into(),
        object(
            &["id", "campaign_id", "lead_id", "phone", "attempt", "status", "started_at"],
            json!({
                "id": s(), "campaign_id": s(), "lead_id": t("integer"), "lead_name": ns(), "phone": s(),
                "attempt": t("integer"),
                "status": {"enum": ["dialing", "in_progress", "ended"]},
                "outcome": {"enum": ["completed", "no_answer", "busy", "failed", null]},
                "provider": s(), "provider_call_id": ns(), "conversation_id": ns(), "error": ns(),
                "started_at": time(), "ended_at": ns(),
            }),
        ),
    );
    m.insert(
        "Deleted".into(),
        object(
            &["id", "deleted"],
            json!({"id": s(), "deleted": {"const": true}}),
        ),
    );
    m
}

/// Success status and `data` schema of an action, where the document describes it; other
/// actions answer the generic `Success` envelope with 200 (201/202 where noted in the table
/// of `success_status`).
pub fn response(resource: &str, action: &str) -> Option<(&'static str, Value)> {
    let count = || t("integer");
    let page = |key: &str, item: Value, total: &str| {
        object(
            &[key, total, "limit", "offset"],
            json!({key: arr(item), total: count(), "limit": count(), "offset": count()}),
        )
    };
    let one = |key: &str, rec: &str| object(&[key], json!({key: r(rec)}));
    let items = |rec: &str| {
        object(
            &["items", "count"],
            json!({"items": arr(r(rec)), "count": count()}),
        )
    };
    let data = match (resource, action) {
        ("api-keys", "all" | "list") => object(
            &["api_keys", "count"],
            json!({"api_keys": arr(r("ApiKey")), "count": count()}),
        ),
        ("api-keys", "create" | "revoke") => one("api_key", "ApiKey"),
        ("genies", "list") => page("genies", r("GenieSummary"), "total"),
        ("genies", "all") => object(
            &["genies", "nextCursor", "hasMore"],
            json!({"genies": arr(r("Genie")), "nextCursor": n("string"), "hasMore": t("boolean")}),
        ),
        ("genies", "get" | "create" | "clone") => one("genie", "Genie"),
        ("genies", "update") => json!({"anyOf": [
            one("genie", "Genie"),
            object(&["draft", "changes"], json!({
                "draft": r("GenieVersion"), "changes": arr(r("ConfigChange")),
            })),
        ], "description": "`{genie}`, or `{draft, changes}` with `data.draft: true`"}),
        ("genies", "versions") => object(
            &["versions", "count"],
            json!({"versions": arr(r("GenieVersion")), "count": count(),
                   "draft": n("object"), "traffic": any()}),
        ),
        ("genies", "get-version") => one("version", "GenieVersion"),
        ("genies", "diff") => object(
            &["changes"],
            json!({"changes": arr(r("ConfigChange")), "from": t("string"), "to": t("string")}),
        ),
        ("genies", "rollback" | "publish") => object(
            &["genie", "version"],
            json!({"genie": r("Genie"), "version": n("integer")}),
        ),
        ("genies", "discard-draft") => object(
            &["id", "discarded"],
            json!({"id": t("string"), "discarded": t("boolean")}),
        ),
        ("genies", "set-traffic") => object(
            &["traffic"],
            json!({"traffic": arr(r("TrafficShare")), "provider_split": any()}),
        ),
        ("genies", "version-stats") => {
            object(&["stats"], json!({"stats": arr(r("GenieVersionStats"))}))
        }
        ("genies", "check-drift") => object(
            &["drift", "provider", "agent_id", "changes", "checked_at"],
            json!({"drift": t("boolean"), "provider": t("string"), "agent_id": t("string"),
                   "changes": arr(r("DriftChange")), "checked_at": t("string")}),
        ),
        ("genies", "pull") => object(
            &["genie", "version", "adopted", "changes"],
            json!({"genie": r("Genie"), "version": n("integer"), "adopted": arr(t("string")),
                   "changes": arr(r("DriftChange"))}),
        ),
        ("genies", "push") => object(
            &["genie_id", "provider", "pushed", "changes"],
            json!({"genie_id": t("string"), "provider": t("string"), "pushed": t("boolean"),
                   "changes": arr(r("DriftChange"))}),
        ),
        ("genies", "move") => object(
            &["genie", "move"],
            json!({"genie": r("Genie"), "move": object(
                &["from", "to", "agent_id", "numbers"],
                json!({"from": t("string"), "to": t("string"), "agent_id": t("string"),
                       "numbers": arr(t("string"))}),
            )}),
        ),
        ("genies", "reorder") => object(&["updated"], json!({"updated": count()})),
        ("knowledge-base", "all" | "list") => page("documents", r("Document"), "total"),
        ("knowledge-base", "get" | "create" | "update") => one("document", "Document"),
        ("knowledge-base", "bulk-update") => counted("updatedCount"),
        ("knowledge-base", "attach") => counted("attachedCount"),
        ("knowledge-base", "detach") => counted("detachedCount"),
        ("knowledge-base", "replace") => counted("replacedCount"),
        ("leads", "stats") => one("stats", "LeadStats"),
        ("leads", "all") => object(
            &["leads", "count", "limit", "offset", "nextCursor"],
            json!({"leads": arr(r("Lead")), "count": count(), "limit": count(),
                "offset": count(), "nextCursor": n("string")}),
        ),
        ("leads", "list") => object(
            &["leads", "count"],
            json!({"leads": arr(r("LeadSummary")), "count": count()}),
        ),
        ("leads", "get" | "create" | "update") => one("lead", "Lead"),
        ("leads", "delete") => object(&["message"], json!({"message": t("string")})),
        ("leads", "log") => one("activity", "LeadActivity"),
        ("leads", "getLogs") => object(
            &["activities"],
            json!({"activities": arr(r("LeadActivity"))}),
        ),
        ("conversations", "all" | "list") => object(
            &["conversations", "count", "limit", "offset", "nextCursor"],
            json!({"conversations": arr(r("Conversation")), "count": count(), "limit": count(),
                "offset": count(), "nextCursor": n("string")}),
        ),
        ("conversations", "get" | "create" | "update") => one("conversation", "Conversation"),
        ("conversations", "sync") => object(
            &["sync", "progress"],
            json!({"sync": r("SyncRun"), "progress": t("object")}),
        ),
        ("conversations", "sync-status") => one("sync", "SyncRun"),
        ("analytics", "overview") => object(
            &["overview"],
            json!({"overview": object(
                &["from", "to", "conversations", "average_duration_seconds", "analyzed", "successes", "success_rate", "leads", "llm"],
                json!({
                    "from": t("string"), "to": t("string"), "genie_id": n("string"),
                    "conversations": t("integer"), "average_duration_seconds": n("number"),
                    "analyzed": t("integer"), "successes": t("integer"), "success_rate": n("number"),
                    "leads": object(&["total", "by_status", "converted", "conversion_rate"], json!({
                        "total": t("integer"), "by_status": t("object"), "converted": t("integer"),
                        "conversion_rate": n("number"),
                    })),
                    "llm": object(&["tokens_in", "tokens_out", "estimated_cost"], json!({
                        "tokens_in": t("integer"), "tokens_out": t("integer"),
                        "estimated_cost": object(&["amount", "currency"], json!({"amount": t("number"), "currency": t("string")})),
                    })),
                }),
            )}),
        ),
        ("analytics", "timeseries") => object(
            &["timeseries"],
            json!({"timeseries": object(
                &["metric", "interval", "from", "to", "points"],
                json!({
                    "metric": t("string"), "interval": {"enum": ["hour", "day"]},
                    "from": t("string"), "to": t("string"), "genie_id": n("string"),
                    "points": arr(object(&["t", "value"], json!({"t": t("string"), "value": n("number")}))),
                }),
            )}),
        ),
        ("worker-genies", "all" | "list") => items("WorkerGenie"),
        ("worker-genies", "get" | "create" | "update") => one("worker_genie", "WorkerGenie"),
        ("worker-genies", "run") => one("run", "WorkerRun"),
        ("worker-genies", "runs") => items("WorkerRun"),
        ("worker-genies", "store-credential") => one("credential", "Credential"),
        ("worker-genies", "list-credentials") => items("Credential"),
        ("qr-code", "all" | "list") => object(&["qr_codes"], json!({"qr_codes": arr(r("QrCode"))})),
        ("qr-code", "create" | "increment-download") => one("qr_code", "QrCode"),
        ("users", "all" | "list") => page("users", r("Account"), "count"),
        ("users", "get" | "disable" | "enable" | "set-role") => one("user", "Account"),
        ("users", "invite") => object(
            &["invitation", "token", "link", "mail"],
            json!({"invitation": r("AccountInvitation"),
                   "token": {"type": "string", "description": "Shown this once"},
                   "link": t("string"),
                   "mail": {"enum": ["sent", "failed", "not_configured"]}}),
        ),
        ("users", "invitations") => object(
            &["invitations", "count"],
            json!({"invitations": arr(r("AccountInvitation")), "count": count()}),
        ),
        ("users", "revoke-invitation") => one("invitation", "AccountInvitation"),
        // 200 when done, 202 while the delete goes on (`openapi::action_responses`).
        ("users", "delete") => object(
            &["id", "deleted", "status"],
            json!({"id": t("string"), "deleted": t("boolean"),
                   "status": {"enum": ["deleted", "deleting"]}}),
        ),
        ("campaigns", "all") => page("campaigns", r("Campaign"), "count"),
        ("campaigns", "get" | "create" | "update" | "start" | "pause" | "resume" | "cancel") => {
            one("campaign", "Campaign")
        }
        ("campaigns", "calls") => page("calls", r("CampaignCall"), "count"),
        (
            "api-keys" | "genies" | "knowledge-base" | "worker-genies" | "conversations"
            | "qr-code" | "genie-tests" | "campaigns",
            "delete",
        )
        | ("worker-genies", "delete-credential") => r("Deleted"),
        _ => return None,
    };
    Some((success_status(resource, action), data))
}

fn counted(key: &str) -> Value {
    object(
        &["message", key],
        json!({"message": t("string"), key: t("integer")}),
    )
}

/// The success status of an action: 201 for a `create` that makes a record (and the other
/// actions that make one), 202 for work queued to run later, else 200.
pub fn success_status(resource: &str, action: &str) -> &'static str {
    match (resource, action) {
        ("worker-genies", "run") | ("webhooks", "redeliver") | ("conversations", "sync") => "202",
        ("genie-tests", "run" | "run-all") => "202",
        ("genies", "clone")
        | ("marketplace", "publish" | "install")
        | ("teams", "invite")
        | ("users", "invite")
        | ("leads", "log")
        | ("worker-genies", "store-credential") => "201",
        (_, "create") => "201",
        _ => "200",
    }
}
