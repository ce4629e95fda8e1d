//! Abuse and isolation, generated from ONE table (`TABLE`): for every resource and every
//! action it accepts, user B aims the action at user A's records and gets the documented
//! 403/404 (or acts only on B's own data), A's view of everything is unchanged afterwards, a
//! consumer is refused every mutating action, and admin-only options are 403 for non-admins.
//!
//! `table_covers_every_action` probes every action name that appears in the source of
//! src/api or in docs/api.md against every resource: an action a resource accepts (anything
//! but `INVALID_ACTION`) that has no row in the table fails the suite, so a new action cannot
//! be forgotten.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::common::*;

/// What B (a standard user who owns nothing of A's) gets.
#[derive(Debug, Clone, Copy)]
enum Exp {
    /// This error status and code.
    Err(u16, &'static str),
    /// Success acting on B's own scope: the response must not mention any of A's records.
    Own(u16),
    /// Success on something A made public (marketplace listings): allowed to be seen.
    Public(u16),
}

/// One row: resource, action, the id (a placeholder or literal), the data template
/// (placeholders `$name` are replaced by A's ids), what B gets, and what a consumer gets
/// when it differs from the default (403 FORBIDDEN for mutating actions, B's outcome for reads).
struct Row {
    resource: &'static str,
    action: &'static str,
    id: Option<&'static str>,
    data: &'static str,
    b: Exp,
    consumer: Option<Exp>,
}

const fn r(
    resource: &'static str,
    action: &'static str,
    id: Option<&'static str>,
    data: &'static str,
    b: Exp,
) -> Row {
    Row {
        resource,
        action,
        id,
        data,
        b,
        consumer: None,
    }
}

const NF: Exp = Exp::Err(404, "NOT_FOUND");
const ANF: Exp = Exp::Err(404, "AGENT_NOT_FOUND");
const FB: Exp = Exp::Err(403, "FORBIDDEN");
const VAL: Exp = Exp::Err(400, "VALIDATION_ERROR");

#[rustfmt::skip]
const TABLE: &[Row] = &[
    // api-keys
    r("api-keys", "all", None, "{}", Exp::Own(200)),
    r("api-keys", "list", None, "{}", Exp::Own(200)),
    r("api-keys", "create", None, r#"{"name":"b key"}"#, Exp::Own(201)),
    r("api-keys", "revoke", Some("$apikey"), "{}", NF),
    r("api-keys", "delete", Some("$apikey"), "{}", NF),
    // profiles
    r("profiles", "get", Some("$userA"), "{}", NF),
    r("profiles", "all", None, "{}", FB),
    r("profiles", "list", None, "{}", FB),
    Row { consumer: Some(Exp::Own(200)), ..r("profiles", "update", None, r#"{"full_name":"B"}"#, Exp::Own(200)) },
    // Test users have no password: B's own change is refused before anything, consumers too.
    Row { consumer: Some(VAL), ..r("profiles", "change-password", None, r#"{"current_password":"x","new_password":"violet-Kettle-93-orbit-Plum"}"#, VAL) },
    Row { consumer: Some(VAL), ..r("profiles", "change-email", None, r#"{"new_email":"not an address"}"#, VAL) },
    // users: internal admins only
    r("users", "all", None, "{}", FB),
    r("users", "list", None, "{}", FB),
    r("users", "get", Some("$userA"), "{}", FB),
    r("users", "invite", None, r#"{"email":"someone@example.test"}"#, FB),
    r("users", "invitations", None, "{}", FB),
    r("users", "revoke-invitation", None, r#"{"invitation_id":"$userA"}"#, FB),
    r("users", "disable", Some("$userA"), "{}", FB),
    r("users", "enable", Some("$userA"), "{}", FB),
    r("users", "set-role", Some("$userA"), r#"{"role":"internal_admin"}"#, FB),
    r("users", "delete", Some("$userA"), "{}", FB),
    // activities
    r("activities", "all", None, "{}", Exp::Own(200)),
    // campaigns: another user's campaign reads as absent; their genie cannot be named.
    r("campaigns", "all", None, "{}", Exp::Own(200)),
    r("campaigns", "all", None, r#"{"adminMode":true}"#, FB),
    r("campaigns", "get", Some("$campaign"), "{}", NF),
    r("campaigns", "create", None, r#"{"genie_id":"$genie","name":"x"}"#, ANF),
    r("campaigns", "update", Some("$campaign"), r#"{"name":"pwned"}"#, NF),
    r("campaigns", "delete", Some("$campaign"), "{}", NF),
    r("campaigns", "start", Some("$campaign"), "{}", NF),
    r("campaigns", "pause", Some("$campaign"), "{}", NF),
    r("campaigns", "resume", Some("$campaign"), "{}", NF),
    r("campaigns", "cancel", Some("$campaign"), "{}", NF),
    r("campaigns", "calls", Some("$campaign"), "{}", NF),
    // analytics: B's own figures; A's genie reads as absent; adminMode is for admins.
    r("analytics", "overview", None, "{}", Exp::Own(200)),
    r("analytics", "overview", None, r#"{"genie_id":"$genie"}"#, ANF),
    r("analytics", "overview", None, r#"{"adminMode":true}"#, FB),
    r("analytics", "timeseries", None, r#"{"metric":"conversations","interval":"day","genie_id":"$genie"}"#, ANF),
    r("analytics", "timeseries", None, r#"{"metric":"conversations","interval":"day","adminMode":true}"#, FB),
    r("activities", "list", None, "{}", Exp::Own(200)),
    r("activities", "list", None, r#"{"adminMode":true}"#, FB),
    r("activities", "list", None, r#"{"userId":"$userA"}"#, FB),
    // genies
    r("genies", "list", None, "{}", Exp::Own(200)),
    r("genies", "list", None, r#"{"adminMode":true}"#, FB),
    r("genies", "list", None, r#"{"ownerId":"$userA"}"#, FB),
    r("genies", "all", None, "{}", Exp::Own(200)),
    r("genies", "all", None, r#"{"adminMode":true}"#, FB),
    r("genies", "get", Some("$genie"), "{}", ANF),
    r("genies", "get", Some("$genie"), r#"{"adminMode":true}"#, FB),
    r("genies", "create", None, r#"{"genieName":"x","impersonatedUserId":"$userA"}"#, FB),
    r("genies", "create", None, r#"{"genieName":"B own"}"#, Exp::Own(201)),
    r("genies", "update", Some("$genie"), r#"{"genieName":"pwned"}"#, ANF),
    r("genies", "delete", Some("$genie"), "{}", ANF),
    r("genies", "clone", Some("$genie"), "{}", ANF),
    r("genies", "reorder", None, r#"{"sort":{"$genie":0}}"#, ANF),
    r("genies", "attach-phone", Some("$genie"), "{}", ANF),
    r("genies", "release-phone", Some("$genie"), "{}", ANF),
    r("genies", "call", Some("$genie"), r#"{"to":"+14155550123"}"#, ANF),
    r("genies", "assign", Some("$genie"), r#"{"userId":"$userB"}"#, ANF),
    r("genies", "unassign", Some("$genie"), r#"{"userId":"$consumer"}"#, ANF),
    r("genies", "versions", Some("$genie"), "{}", ANF),
    r("genies", "get-version", Some("$genie"), r#"{"version":1}"#, ANF),
    r("genies", "diff", Some("$genie"), r#"{"from":1,"to":1}"#, ANF),
    r("genies", "version-stats", Some("$genie"), "{}", ANF),
    r("genies", "rollback", Some("$genie"), r#"{"version":1}"#, ANF),
    r("genies", "publish", Some("$genie"), "{}", ANF),
    r("genies", "discard-draft", Some("$genie"), "{}", ANF),
    r("genies", "set-traffic", Some("$genie"), r#"{"traffic":[]}"#, ANF),
    r("genies", "set-traffic", Some("$genie"), r#"{"traffic":[],"mirror_at_provider":true}"#, ANF),
    r("genies", "check-drift", Some("$genie"), "{}", ANF),
    r("genies", "pull", Some("$genie"), "{}", ANF),
    r("genies", "push", Some("$genie"), "{}", ANF),
    r("genies", "move", Some("$genie"), r#"{"provider":"local"}"#, ANF),
    // genie-groups
    r("genie-groups", "all", None, "{}", Exp::Own(200)),
    r("genie-groups", "list", None, "{}", Exp::Own(200)),
    r("genie-groups", "get", Some("$group"), "{}", NF),
    r("genie-groups", "create", None, r#"{"name":"B group"}"#, Exp::Own(201)),
    r("genie-groups", "update", Some("$group"), r#"{"name":"pwned"}"#, NF),
    r("genie-groups", "delete", Some("$group"), "{}", NF),
    r("genie-groups", "reorder", None, r#"{"sort":{"$group":0}}"#, NF),
    // knowledge-base
    r("knowledge-base", "all", None, "{}", Exp::Own(200)),
    r("knowledge-base", "list", None, r#"{"adminMode":true}"#, FB),
    r("knowledge-base", "get", Some("$doc"), "{}", NF),
    r("knowledge-base", "get", Some("$doc"), r#"{"adminMode":true}"#, FB),
    r("knowledge-base", "create", None, r#"{"title":"t","content":"c","agentId":"$genie"}"#, ANF),
    r("knowledge-base", "create", None, r#"{"title":"t","content":"c","folder_id":"$folder"}"#, NF),
    r("knowledge-base", "update", Some("$doc"), r#"{"name":"pwned"}"#, NF),
    r("knowledge-base", "update", Some("$pubdoc"), r#"{"name":"pwned"}"#, FB),
    r("knowledge-base", "bulk-update", None, r#"{"documentIds":["$doc"],"updates":{"is_active":false}}"#, NF),
    r("knowledge-base", "delete", Some("$doc"), "{}", NF),
    r("knowledge-base", "delete", Some("$pubdoc"), "{}", FB),
    r("knowledge-base", "attach", None, r#"{"agentId":"$genie","documents":[{"id":"$doc","name":"d","type":"text"}]}"#, ANF),
    r("knowledge-base", "attach", None, r#"{"agentId":"$bgenie","documents":[{"id":"$doc","name":"d","type":"text"}]}"#, NF),
    r("knowledge-base", "detach", None, r#"{"agentId":"$genie","documentIds":["$doc"]}"#, ANF),
    r("knowledge-base", "replace", None, r#"{"agentId":"$genie","documents":[]}"#, ANF),
    r("knowledge-base", "sync-with-agent", None, r#"{"oldDocId":"$doc","newDocId":"$doc"}"#, NF),
    r("knowledge-base", "search", None, r#"{"query":"zebracorn","agentId":"$genie"}"#, ANF),
    r("knowledge-base", "search", None, r#"{"query":"zebracorn"}"#, Exp::Own(200)),
    r("knowledge-base", "retry", Some("$doc"), "{}", NF),
    r("knowledge-base", "retry", Some("$pubdoc"), "{}", FB),
    // document-folders
    r("document-folders", "all", None, "{}", Exp::Own(200)),
    r("document-folders", "list", None, "{}", Exp::Own(200)),
    r("document-folders", "get", Some("$folder"), "{}", NF),
    r("document-folders", "create", None, r#"{"name":"x","parent_id":"$folder"}"#, NF),
    r("document-folders", "update", Some("$folder"), r#"{"name":"pwned"}"#, NF),
    r("document-folders", "delete", Some("$folder"), "{}", NF),
    // voices (a catalogue; favourites are per user)
    r("voices", "all", None, "{}", Exp::Own(200)),
    r("voices", "list", None, "{}", Exp::Own(200)),
    r("voices", "get", Some("$voice"), "{}", Exp::Own(200)),
    r("voices", "usage", Some("$voice"), "{}", Exp::Own(200)),
    r("voices", "favorites", None, "{}", Exp::Own(200)),
    r("voices", "favorite", Some("$voice2"), "{}", Exp::Own(200)),
    r("voices", "unfavorite", Some("$voice"), "{}", NF),
    // voice-collections
    r("voice-collections", "all", None, "{}", Exp::Own(200)),
    r("voice-collections", "list", None, "{}", Exp::Own(200)),
    r("voice-collections", "get", Some("$coll"), "{}", NF),
    r("voice-collections", "create", None, r#"{"name":"B coll"}"#, Exp::Own(201)),
    r("voice-collections", "update", Some("$coll"), r#"{"name":"pwned"}"#, NF),
    r("voice-collections", "rename", Some("$coll"), r#"{"name":"pwned"}"#, NF),
    r("voice-collections", "delete", Some("$coll"), "{}", NF),
    r("voice-collections", "add-voice", Some("$coll"), r#"{"voice_id":"$voice2"}"#, NF),
    r("voice-collections", "remove-voice", Some("$coll"), r#"{"voice_id":"$voice"}"#, NF),
    r("voice-collections", "reorder", Some("$coll"), r#"{"voice_ids":["$voice"]}"#, NF),
    r("voice-collections", "reorder", None, r#"{"sort":{"$coll":0}}"#, NF),
    // leads: another user's lead is 403 FORBIDDEN
    r("leads", "stats", None, "{}", Exp::Own(200)),
    r("leads", "stats", None, r#"{"adminMode":true}"#, FB),
    r("leads", "all", None, "{}", Exp::Own(200)),
    r("leads", "all", None, r#"{"adminMode":true}"#, FB),
    r("leads", "list", None, r#"{"userId":"$userA"}"#, FB),
    r("leads", "list", None, r#"{"filters":{"agentId":"$genie"}}"#, FB),
    r("leads", "get", Some("$lead"), "{}", FB),
    r("leads", "create", None, r#"{"agent_id":"$genie","name":"x"}"#, FB),
    r("leads", "create", None, r#"{"agent_id":"$bgenie","name":"x","user_id":"$userA"}"#, FB),
    r("leads", "update", Some("$lead"), r#"{"name":"pwned"}"#, FB),
    r("leads", "delete", Some("$lead"), "{}", FB),
    r("leads", "log", Some("$lead"), r#"{"type":"call"}"#, FB),
    r("leads", "getLogs", Some("$lead"), "{}", FB),
    // lead-notes: as on leads
    r("lead-notes", "all", None, r#"{"leadId":$lead}"#, FB),
    r("lead-notes", "list", None, r#"{"leadId":$lead}"#, FB),
    r("lead-notes", "get", Some("$note"), "{}", FB),
    r("lead-notes", "create", None, r#"{"leadId":$lead,"content":"x"}"#, FB),
    r("lead-notes", "update", Some("$note"), r#"{"content":"pwned"}"#, FB),
    r("lead-notes", "pin", Some("$note"), "{}", FB),
    r("lead-notes", "unpin", Some("$note"), "{}", FB),
    r("lead-notes", "reorder", None, r#"{"leadId":$lead,"sort":{"$note":0}}"#, FB),
    r("lead-notes", "delete", Some("$note"), "{}", FB),
    // conversations
    r("conversations", "all", None, "{}", Exp::Own(200)),
    r("conversations", "list", None, r#"{"adminMode":true}"#, FB),
    r("conversations", "list", None, r#"{"genieId":"$genie"}"#, Exp::Own(200)),
    r("conversations", "get", Some("$conv"), "{}", NF),
    r("conversations", "create", None, r#"{"genieId":"$genie","transcript":[]}"#, ANF),
    r("conversations", "update", Some("$conv"), r#"{"tags":["pwned"]}"#, NF),
    r("conversations", "delete", Some("$conv"), "{}", NF),
    r("conversations", "sync", None, r#"{"genieId":"$genie"}"#, ANF),
    r("conversations", "analyze", Some("$conv"), "{}", NF),
    r("conversations", "sync-status", Some("$syncrun"), "{}", NF),
    // worker-genies
    r("worker-genies", "all", None, "{}", Exp::Own(200)),
    r("worker-genies", "list", None, "{}", Exp::Own(200)),
    r("worker-genies", "get", Some("$worker"), "{}", NF),
    r("worker-genies", "create", None, r#"{"name":"x","soul_prompt":"p","credential_refs":["$credname"]}"#, VAL),
    r("worker-genies", "update", Some("$worker"), r#"{"name":"pwned"}"#, NF),
    r("worker-genies", "delete", Some("$worker"), "{}", NF),
    r("worker-genies", "run", Some("$worker"), "{}", NF),
    r("worker-genies", "runs", Some("$worker"), "{}", NF),
    r("worker-genies", "runs", None, "{}", Exp::Own(200)),
    r("worker-genies", "cancel", Some("$run"), "{}", NF),
    r("worker-genies", "store-credential", None, r#"{"name":"b-own-cred","credential_type":"bearer_token","value":"b-own"}"#, Exp::Own(201)),
    r("worker-genies", "list-credentials", None, "{}", Exp::Own(200)),
    r("worker-genies", "delete-credential", Some("$cred"), "{}", NF),
    r("worker-genies", "test-credential", None, r#"{"name":"a-only-cred"}"#, NF),
    // qr-code
    r("genie-tests", "all", None, "{}", Exp::Own(200)),
    r("genie-tests", "all", None, r#"{"genie_id":"$genie"}"#, ANF),
    r("genie-tests", "all", None, r#"{"adminMode":true}"#, FB),
    r("genie-tests", "get", Some("$gtest"), "{}", NF),
    r("genie-tests", "create", None, r#"{"genie_id":"$genie","name":"t","turns":["hi"],"criteria":[{"type":"contains","value":"x"}]}"#, ANF),
    r("genie-tests", "update", Some("$gtest"), r#"{"name":"pwned"}"#, NF),
    r("genie-tests", "delete", Some("$gtest"), "{}", NF),
    r("genie-tests", "run", Some("$gtest"), "{}", NF),
    r("genie-tests", "run-all", None, r#"{"genie_id":"$genie"}"#, ANF),
    r("genie-tests", "runs", Some("$gtest"), "{}", NF),
    r("genie-tests", "runs", None, r#"{"genie_id":"$genie"}"#, ANF),
    r("qr-code", "all", None, "{}", Exp::Own(200)),
    r("qr-code", "list", None, r#"{"genie_id":"$genie"}"#, Exp::Own(200)),
    r("qr-code", "get", Some("$qr"), "{}", NF),
    r("qr-code", "create", None, r#"{"genie_id":"$genie"}"#, ANF),
    r("qr-code", "delete", Some("$qr"), "{}", NF),
    r("qr-code", "increment-download", Some("$qr"), "{}", NF),
    // webhooks
    r("webhooks", "all", None, "{}", Exp::Own(200)),
    r("webhooks", "list", None, "{}", Exp::Own(200)),
    r("webhooks", "get", Some("$webhook"), "{}", NF),
    r("webhooks", "create", None, r#"{"url":"http://127.0.0.1:9/b","event_types":["conversation.analyzed"]}"#, Exp::Own(201)),
    r("webhooks", "update", Some("$webhook"), r#"{"url":"http://127.0.0.1:9/pwned"}"#, NF),
    r("webhooks", "delete", Some("$webhook"), "{}", NF),
    r("webhooks", "rotate-secret", Some("$webhook"), "{}", NF),
    r("webhooks", "test", Some("$webhook"), "{}", NF),
    r("webhooks", "deliveries", Some("$webhook"), "{}", NF),
    r("webhooks", "redeliver", Some("$delivery"), "{}", NF),
    // notifications
    r("notifications", "all", None, "{}", Exp::Own(200)),
    r("notifications", "list", None, "{}", Exp::Own(200)),
    r("notifications", "unread-count", None, "{}", Exp::Own(200)),
    r("notifications", "mark-read", Some("$notif"), "{}", NF),
    r("notifications", "mark-all-read", None, "{}", Exp::Own(200)),
    // teams: B is not a member of A's team
    r("teams", "all", None, "{}", Exp::Own(200)),
    r("teams", "list", None, "{}", Exp::Own(200)),
    r("teams", "get", Some("$team"), "{}", NF),
    r("teams", "create", None, r#"{"name":"B team"}"#, Exp::Own(201)),
    r("teams", "update", Some("$team"), r#"{"name":"pwned"}"#, NF),
    r("teams", "rename", Some("$team"), r#"{"name":"pwned"}"#, NF),
    r("teams", "delete", Some("$team"), "{}", NF),
    r("teams", "members", Some("$team"), "{}", NF),
    r("teams", "invitations", Some("$team"), "{}", NF),
    r("teams", "invite", Some("$team"), r#"{"email":"b-friend@example.test"}"#, NF),
    r("teams", "accept", None, r#"{"token":"$invtoken"}"#, FB),
    r("teams", "decline", None, r#"{"token":"$invtoken"}"#, FB),
    r("teams", "revoke", Some("$team"), r#"{"invitation_id":"$invitation"}"#, NF),
    r("teams", "leave", Some("$team"), "{}", NF),
    r("teams", "remove-member", Some("$team"), r#"{"user_id":"$userA"}"#, NF),
    r("teams", "update-member", Some("$team"), r#"{"user_id":"$userA","role":"member"}"#, NF),
    r("teams", "add-genie", Some("$team"), r#"{"genie_id":"$bgenie"}"#, NF),
    r("teams", "add-genie", Some("$bteam"), r#"{"genie_id":"$genie"}"#, ANF),
    r("teams", "remove-genie", Some("$team"), r#"{"genie_id":"$genie"}"#, NF),
    // marketplace: published listings are public; changing one is the publisher's
    r("marketplace", "all", None, "{}", Exp::Public(200)),
    r("marketplace", "list", None, r#"{"adminMode":true}"#, FB),
    r("marketplace", "search", None, r#"{"mine":true}"#, Exp::Own(200)),
    r("marketplace", "get", Some("$listing"), "{}", Exp::Public(200)),
    r("marketplace", "publish", None, r#"{"genie_id":"$genie"}"#, ANF),
    r("marketplace", "create", None, r#"{"genieId":"$genie"}"#, ANF),
    r("marketplace", "update", Some("$listing"), r#"{"name":"pwned"}"#, NF),
    r("marketplace", "unpublish", Some("$listing"), "{}", NF),
    r("marketplace", "delete", Some("$listing"), "{}", NF),
    r("marketplace", "hide", Some("$listing"), "{}", FB),
    r("marketplace", "unhide", Some("$listing"), "{}", FB),
    r("marketplace", "feature", Some("$listing"), "{}", FB),
    r("marketplace", "unfeature", Some("$listing"), "{}", FB),
    r("marketplace", "install", Some("$listing"), "{}", Exp::Public(201)),
];

/// Ids of A's records (and a few of B's), by placeholder name.
struct World {
    ids: BTreeMap<&'static str, String>,
    a: User,
    b: User,
    consumer: User,
}

impl World {
    fn fill(&self, template: &str) -> String {
        let mut s = template.to_string();
        // Longest names first, so `$genie` does not eat the prefix of `$genies`.
        let mut keys: Vec<_> = self.ids.keys().collect();
        keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
        for k in keys {
            s = s.replace(&format!("${k}"), &self.ids[k]);
        }
        assert!(!s.contains('$'), "unfilled placeholder in {s}");
        s
    }

    /// A's ids that must never show up in B's or the consumer's responses.
    fn secret_ids(&self) -> Vec<&str> {
        [
            "genie",
            "group",
            "doc",
            "folder",
            "note",
            "conv",
            "worker",
            "run",
            "cred",
            "qr",
            "webhook",
            "delivery",
            "team",
            "invitation",
            "invtoken",
            "apikey",
            "notif",
            "coll",
        ]
        .iter()
        .map(|k| self.ids[k].as_str())
        .collect()
    }
}

async fn ok(
    app: &TestApp,
    u: &User,
    res: &str,
    action: &str,
    id: Option<Value>,
    data: Value,
) -> Value {
    let r = app.call(&u.token, res, action, id, data).await;
    assert!(r.status < 300, "{res} {action}: {}", r.body);
    r.data().clone()
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

async fn world(app: &TestApp) -> World {
    let a = app.standard().await;
    let b = app.standard().await;
    let consumer = app.consumer().await;
    let mut ids: BTreeMap<&'static str, String> = BTreeMap::new();
    ids.insert("userA", a.id.clone());
    ids.insert("userB", b.id.clone());
    ids.insert("consumer", consumer.id.clone());
    // First: starting a sync wakes the job worker, which must find nothing else due yet.
    let d = ok(app, &a, "conversations", "sync", None, json!({})).await;
    ids.insert("syncrun", s(&d["sync"]["id"]));

    let genie = s(&ok(
        app,
        &a,
        "genies",
        "create",
        None,
        json!({"genieName": "A genie"}),
    )
    .await["genie"]["id"]);
    // A assigns the genie to a consumer of their own choosing (not ours).
    let friend = app.consumer().await;
    ok(
        app,
        &a,
        "genies",
        "assign",
        Some(json!(genie)),
        json!({"userId": friend.id}),
    )
    .await;
    ids.insert("genie", genie.clone());
    let bgenie = s(&ok(
        app,
        &b,
        "genies",
        "create",
        None,
        json!({"genieName": "B genie"}),
    )
    .await["genie"]["id"]);
    ids.insert("bgenie", bgenie);
    let d = ok(
        app,
        &a,
        "genie-groups",
        "create",
        None,
        json!({"name": "A group"}),
    )
    .await;
    ids.insert("group", s(&d["group"]["id"]));
    let d = ok(
        app,
        &a,
        "document-folders",
        "create",
        None,
        json!({"name": "A folder"}),
    )
    .await;
    ids.insert("folder", s(&d["folder"]["id"]));
    let d = ok(
        app,
        &a,
        "knowledge-base",
        "create",
        None,
        json!({"title": "A private", "content": "zebracorn secret text", "agentId": genie}),
    )
    .await;
    ids.insert("doc", s(&d["document"]["id"]));
    let d = ok(
        app,
        &a,
        "knowledge-base",
        "create",
        None,
        json!({"title": "A public", "content": "public text", "is_public": true}),
    )
    .await;
    ids.insert("pubdoc", s(&d["document"]["id"]));
    let d = ok(
        app,
        &a,
        "leads",
        "create",
        None,
        json!({"agent_id": genie, "name": "A lead"}),
    )
    .await;
    ids.insert("lead", s(&d["lead"]["id"]));
    let d = ok(
        app,
        &a,
        "lead-notes",
        "create",
        None,
        json!({"leadId": d["lead"]["id"], "content": "A note"}),
    )
    .await;
    ids.insert("note", s(&d["note"]["id"]));
    let d = ok(app, &a, "conversations", "create", None, json!({"genieId": genie, "transcript": [{"role": "user", "message": "hi", "time_in_call_secs": 1}]})).await;
    ids.insert("conv", s(&d["conversation"]["id"]));
    let d = ok(
        app,
        &a,
        "worker-genies",
        "store-credential",
        None,
        json!({"name": "a-only-cred", "credential_type": "bearer_token", "value": "a-secret"}),
    )
    .await;
    ids.insert("cred", s(&d["credential"]["id"]));
    ids.insert("credname", "a-only-cred".into());
    let d = ok(
        app,
        &a,
        "worker-genies",
        "create",
        None,
        json!({"name": "A worker", "soul_prompt": "do things", "credential_refs": ["a-only-cred"]}),
    )
    .await;
    let worker = s(&d["worker_genie"]["id"]);
    ids.insert("worker", worker.clone());
    let d = ok(
        app,
        &a,
        "worker-genies",
        "run",
        Some(json!(worker)),
        json!({}),
    )
    .await;
    ids.insert("run", s(&d["run"]["id"]));
    let d = ok(
        app,
        &a,
        "qr-code",
        "create",
        None,
        json!({"genie_id": genie}),
    )
    .await;
    ids.insert("qr", s(&d["qr_code"]["id"]));
    let d = ok(
        app,
        &a,
        "genie-tests",
        "create",
        None,
        json!({"genie_id": genie, "name": "A's test", "turns": ["hello"],
               "criteria": [{"type": "contains", "value": "hi"}]}),
    )
    .await;
    ids.insert("gtest", s(&d["test"]["id"]));
    let d = ok(
        app,
        &a,
        "campaigns",
        "create",
        None,
        json!({"genie_id": genie, "name": "A's campaign"}),
    )
    .await;
    ids.insert("campaign", s(&d["campaign"]["id"]));
    let d = ok(
        app,
        &a,
        "webhooks",
        "create",
        None,
        json!({"url": "http://127.0.0.1:9/a", "event_types": ["conversation.analyzed"]}),
    )
    .await;
    let webhook = s(&d["webhook"]["id"]);
    ids.insert("webhook", webhook.clone());
    let d = ok(app, &a, "webhooks", "test", Some(json!(webhook)), json!({})).await;
    ids.insert("delivery", s(&d["delivery"]["id"]));
    let d = ok(app, &a, "teams", "create", None, json!({"name": "A team"})).await;
    let team = s(&d["team"]["id"]);
    ids.insert("team", team.clone());
    let d = ok(
        app,
        &a,
        "teams",
        "invite",
        Some(json!(team)),
        json!({"email": "a-friend@example.test"}),
    )
    .await;
    ids.insert("invitation", s(&d["invitation"]["id"]));
    ids.insert("invtoken", s(&d["token"]));
    let d = ok(app, &b, "teams", "create", None, json!({"name": "B team"})).await;
    ids.insert("bteam", s(&d["team"]["id"]));
    let d = ok(
        app,
        &a,
        "api-keys",
        "create",
        None,
        json!({"name": "A key"}),
    )
    .await;
    ids.insert("apikey", s(&d["api_key"]["id"]));
    let aid = a.id.clone();
    let notif = app
        .state
        .db
        .write(move |c| {
            Ok(genied::db::notifications::insert(
                c,
                &aid,
                "info",
                "A only",
                "for A",
                &json!({}),
            )?)
        })
        .await
        .unwrap();
    ids.insert("notif", notif);
    let voices = ok(app, &a, "voices", "all", None, json!({})).await;
    let voice = s(&voices["voices"][0]["voice_id"]);
    let voice2 = s(&voices["voices"][1]["voice_id"]);
    ok(app, &a, "voices", "favorite", Some(json!(voice)), json!({})).await;
    ids.insert("voice", voice.clone());
    ids.insert("voice2", voice2);
    let d = ok(
        app,
        &a,
        "voice-collections",
        "create",
        None,
        json!({"name": "A coll", "voice_ids": [voice]}),
    )
    .await;
    ids.insert("coll", s(&d["collection"]["id"]));
    let d = ok(
        app,
        &a,
        "marketplace",
        "publish",
        None,
        json!({"genie_id": genie}),
    )
    .await;
    ids.insert("listing", s(&d["listing"]["id"]));
    World {
        ids,
        a,
        b,
        consumer,
    }
}

/// Everything A can see of their own records; it must be identical before and after the
/// attacks. Counters that others legitimately move (installs of a public listing) are removed.
async fn a_view(app: &TestApp, w: &World) -> Value {
    let views: &[(&str, &str, Option<&str>, &str)] = &[
        ("genies", "get", Some("$genie"), "{}"),
        ("genies", "list", None, "{}"),
        ("genie-groups", "all", None, "{}"),
        ("document-folders", "all", None, "{}"),
        ("knowledge-base", "all", None, "{}"),
        ("knowledge-base", "get", Some("$doc"), "{}"),
        ("knowledge-base", "get", Some("$pubdoc"), "{}"),
        ("leads", "get", Some("$lead"), "{}"),
        ("leads", "getLogs", Some("$lead"), "{}"),
        ("lead-notes", "list", None, r#"{"leadId":$lead}"#),
        ("conversations", "get", Some("$conv"), "{}"),
        ("worker-genies", "get", Some("$worker"), "{}"),
        ("worker-genies", "runs", None, "{}"),
        ("worker-genies", "list-credentials", None, "{}"),
        ("qr-code", "get", Some("$qr"), "{}"),
        ("genie-tests", "get", Some("$gtest"), "{}"),
        ("campaigns", "get", Some("$campaign"), "{}"),
        ("campaigns", "calls", Some("$campaign"), "{}"),
        ("webhooks", "get", Some("$webhook"), "{}"),
        ("webhooks", "deliveries", Some("$webhook"), "{}"),
        ("teams", "get", Some("$team"), "{}"),
        ("teams", "invitations", Some("$team"), "{}"),
        ("api-keys", "all", None, "{}"),
        ("notifications", "all", None, "{}"),
        ("voices", "favorites", None, "{}"),
        ("voice-collections", "get", Some("$coll"), "{}"),
        ("marketplace", "get", Some("$listing"), "{}"),
        ("activities", "list", None, r#"{"limit":500}"#),
        ("profiles", "get", None, "{}"),
    ];
    let mut out = serde_json::Map::new();
    for (res, action, id, data) in views {
        let id = id.map(|i| json!(w.fill(i)));
        let data: Value = serde_json::from_str(&w.fill(data)).unwrap();
        let mut d = ok(app, &w.a, res, action, id, data).await;
        strip(&mut d, &["install_count"]);
        out.insert(format!("{res} {action}"), d);
    }
    Value::Object(out)
}

fn strip(v: &mut Value, keys: &[&str]) {
    match v {
        Value::Object(m) => {
            for k in keys {
                m.remove(*k);
            }
            m.values_mut().for_each(|x| strip(x, keys));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| strip(x, keys)),
        _ => {}
    }
}

/// Runs one row as `who` and returns a description of the mismatch, if any.
async fn check(app: &TestApp, w: &World, row: &Row, who: &User, exp: Exp) -> Option<String> {
    let id = row.id.map(|i| {
        let v = w.fill(i);
        v.parse::<i64>().map(|n| json!(n)).unwrap_or(json!(v))
    });
    let data: Value = serde_json::from_str(&w.fill(row.data)).expect("row data is JSON");
    let r = app
        .call(&who.token, row.resource, row.action, id, data.clone())
        .await;
    let label = format!(
        "{:?} {} {} id={:?} data={} -> {} {}",
        who.role, row.resource, row.action, row.id, row.data, r.status, r.body
    );
    let body = r.body.to_string();
    match exp {
        Exp::Err(status, code) => {
            if r.status != status || r.code() != code {
                return Some(format!("expected {status} {code}: {label}"));
            }
            // The error message must not echo A's records either.
            if let Some(leak) = w.secret_ids().into_iter().find(|i| {
                body.contains(i)
                    && !data.to_string().contains(i)
                    && row.id.is_none_or(|x| w.fill(x) != *i)
            }) {
                return Some(format!("error leaks {leak}: {label}"));
            }
        }
        Exp::Own(status) | Exp::Public(status) => {
            if r.status != status {
                return Some(format!("expected {status}: {label}"));
            }
            if matches!(exp, Exp::Own(_))
                && let Some(leak) = w.secret_ids().into_iter().find(|i| body.contains(i))
            {
                return Some(format!("response shows A's record {leak}: {label}"));
            }
        }
    }
    None
}

#[tokio::test]
async fn user_b_cannot_touch_user_a_and_consumers_cannot_write() {
    let app = TestApp::spawn_with(|c| {
        c.session_rate_limit_per_minute = 0;
        c.rate_limit_per_minute = 0;
        // No background job runs: the world stays exactly as set up.
        c.job_poll_ms = 3_600_000;
    })
    .await;
    let w = world(&app).await;
    let before = a_view(&app, &w).await;
    let counts_before = table_counts(&app, &w).await;

    let mut failures = Vec::new();
    for row in TABLE {
        if let Some(f) = check(&app, &w, row, &w.b, row.b).await {
            failures.push(f);
        }
        let consumer_exp = row
            .consumer
            .unwrap_or(if is_read(row.resource, row.action) {
                row.b
            } else {
                FB
            });
        if let Some(f) = check(&app, &w, row, &w.consumer, consumer_exp).await {
            failures.push(f);
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );

    let after = a_view(&app, &w).await;
    for (k, v) in before.as_object().unwrap() {
        assert_eq!(&after[k], v, "A's view of `{k}` changed");
    }
    // Nothing of A's went anywhere: A's rows in every owned table are the same count.
    assert_eq!(counts_before, table_counts(&app, &w).await);
}

/// A's rows in the tables B could have tried to change.
async fn table_counts(app: &TestApp, w: &World) -> Vec<i64> {
    let (user, genie) = (w.a.id.clone(), w.ids["genie"].clone());
    app.state
        .db
        .read(move |c| {
            let mut v = Vec::new();
            for q in [
                "SELECT COUNT(*) FROM genies WHERE user_id = ?1 AND ?2 IS NOT NULL",
                "SELECT COUNT(*) FROM documents WHERE user_id = ?1 AND ?2 IS NOT NULL",
                "SELECT COUNT(*) FROM conversations WHERE user_id = ?1 AND ?2 IS NOT NULL",
                "SELECT COUNT(*) FROM notifications WHERE user_id = ?1 AND ?2 IS NOT NULL",
                "SELECT COUNT(*) FROM genie_groups WHERE user_id = ?1 AND ?2 IS NOT NULL",
                "SELECT COUNT(*) FROM document_folders WHERE user_id = ?1 AND ?2 IS NOT NULL",
                // A lead keeps its genie's key (V41).
                "SELECT COUNT(*) FROM leads WHERE agent_id = genied_key(?2) AND ?1 IS NOT NULL",
                "SELECT COUNT(*) FROM lead_activities WHERE lead_id IN (SELECT id FROM leads WHERE agent_id = genied_key(?2)) AND ?1 IS NOT NULL",
                "SELECT COUNT(*) FROM genie_documents WHERE genie_id = ?2 AND ?1 IS NOT NULL",
            ] {
                v.push(c.query_row(q, [&user, &genie], |r| r.get::<_, i64>(0))?);
            }
            // The audit log keeps its user ids as bytes (db::activities::Key).
            v.push(c.query_row(
                "SELECT COUNT(*) FROM activities WHERE user_id = ?1",
                [genied::db::activities::Key::of(&user)],
                |r| r.get::<_, i64>(0),
            )?);
            Ok(v)
        })
        .await
        .unwrap()
}

/// Every action name that appears as a match arm in src/api or as a table row in docs/api.md.
pub(crate) fn candidate_actions() -> BTreeSet<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut names = BTreeSet::new();
    let mut stack = vec![root.join("src/api")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let src = std::fs::read_to_string(&p).unwrap();
                // "name" followed by `=>` or `|`: a match-arm literal.
                let parts: Vec<&str> = src.split('"').collect();
                for i in (1..parts.len()).step_by(2) {
                    let lit = parts[i];
                    let after = parts.get(i + 1).map(|x| x.trim_start()).unwrap_or("");
                    if is_name(lit) && (after.starts_with("=>") || after.starts_with('|')) {
                        names.insert(lit.to_string());
                    }
                }
            }
        }
    }
    let docs = std::fs::read_to_string(root.join("docs/api.md")).unwrap();
    for line in docs.lines() {
        if let Some(rest) = line.strip_prefix("| `") {
            let first_cell = rest.split('|').next().unwrap_or("");
            for part in first_cell.split('`').step_by(2) {
                let part = part.trim();
                if is_name(part) {
                    names.insert(part.to_string());
                }
            }
        }
    }
    names
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() < 40
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[tokio::test]
async fn table_covers_every_action() {
    let app = TestApp::spawn_with(|c| c.job_poll_ms = 3_600_000).await;
    let prober = app.standard().await;
    let principal = genied::auth::Principal {
        user_id: prober.id.clone(),
        role: prober.role,
        via: genied::auth::Via::Session {
            session_id: "probe".into(),
        },
    };
    let ctx = genied::api::Ctx {
        app: app.state.clone(),
        principal,
        ip: None,
    };
    let candidates = candidate_actions();
    assert!(candidates.len() > 40, "too few candidates: {candidates:?}");
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    for resource in genied::api::RESOURCES.iter().map(|r| r.name) {
        let covered: BTreeSet<&str> = TABLE
            .iter()
            .filter(|r| r.resource == resource)
            .map(|r| r.action)
            .collect();
        let mut accepted = BTreeSet::new();
        for action in &candidates {
            let req = genied::api::ActionRequest {
                resource,
                action: action.clone(),
                id: None,
                data: json!({}),
            };
            match genied::api::dispatch(&ctx, &req).await {
                Err(e) if e.code() == "INVALID_ACTION" => {}
                _ => {
                    accepted.insert(action.as_str());
                }
            }
        }
        for a in &accepted {
            if !covered.contains(a) {
                missing.push(format!("{resource} {a}"));
            }
        }
        for c in &covered {
            if !accepted.contains(c) {
                stale.push(format!("{resource} {c}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "actions with no isolation row: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "rows for actions the resource refuses: {stale:?}"
    );
}

/// Whether the resource's action table declares the action read-only (consumers may call it).
fn is_read(resource: &str, action: &str) -> bool {
    genied::api::resource(resource)
        .and_then(|r| r.action(action))
        .is_some_and(|a| !a.access.writes())
}
