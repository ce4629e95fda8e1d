//! Placing one campaign call: through the genie's platform (Vapi, Retell), whose
//! end-of-call webhook later says how it ended, or simulated by the local provider, where the
//! genie's language model talks with a second role of the same model playing the callee.
//! A simulated call that is answered becomes a conversation like any other phone call
//! (stored, reported, analysed, its lead filled in), so campaigns work end to end with no
//! platform at all.

use serde_json::json;

use crate::db::campaigns::{self as repo, Call, Campaign};
use crate::db::{self, leads};
use crate::error::{ApiError, ApiResult};
use crate::llm::{ChatRequest, Llm, Message};
use crate::service::conversations::{self, By};
use crate::state::AppState;
use crate::voice::local::{Pickup, simulated_pickup};
use crate::voice::{ConversationDetail, OutboundCall, Turn};

/// One call to place.
#[derive(Clone)]
pub(crate) struct Dial {
    pub call: Call,
    pub campaign: Campaign,
}

/// How a call ended.
#[derive(Debug, Clone)]
pub struct CallEnd {
    pub outcome: String,
    pub conversation_id: Option<String>,
    pub error: Option<String>,
}

/// The system prompt of the simulated callee; the fake endpoint of the tests and anyone
/// reading the model's logs can tell its requests by it.
pub const CALLEE_PROMPT: &str = "You play the person who answers an outbound phone call from an AI agent. \
Stay in character, answer as that person would, in one or two short sentences, and say goodbye when you want the call to end. \
Reply with what you say next only.";
/// Exchanges (the callee speaks, the genie answers) in one simulated call.
const SIM_ROUNDS: usize = 4;

fn end(outcome: &str, conversation_id: Option<String>, error: Option<String>) -> CallEnd {
    CallEnd {
        outcome: outcome.into(),
        conversation_id,
        error,
    }
}

/// What a campaign needs before it can start on its genie's provider: a language model for
/// the local simulation; a provider that places calls and a number to call from otherwise.
pub async fn preflight(app: &AppState, k: &Campaign) -> ApiResult<()> {
    let voice = crate::knowledge::agents::voice_for(app, &k.genie_id).await?;
    if voice.name() == "local" {
        if app.llm.is_none() {
            return Err(ApiError::validation(
                "the local provider simulates campaign calls with the language model, and none is configured: the operator sets --llm-base-url",
            ));
        }
        return Ok(());
    }
    if !voice.supports_calls() {
        return Err(ApiError::validation(format!(
            "the genie's voice provider '{}' cannot place outbound calls",
            voice.name()
        )));
    }
    let gid = k.genie_id.clone();
    let phones = app
        .db
        .read(move |c| Ok(db::genies::phones(c, &gid)?))
        .await?;
    if phones.is_empty() {
        return Err(ApiError::validation(
            "the genie has no phone number to call from; attach or import one first",
        ));
    }
    Ok(())
}

/// `{{name}}` values: the campaign's, and `lead_name`.
pub(crate) fn variables(
    k: &Campaign,
    lead: Option<&leads::Lead>,
) -> std::collections::BTreeMap<String, String> {
    let mut vars: std::collections::BTreeMap<String, String> = k
        .variables
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(n, v)| v.as_str().map(|v| (n.clone(), v.to_string())))
        .collect();
    if let Some(name) = lead.and_then(|l| l.name.clone()) {
        vars.entry("lead_name".into()).or_insert(name);
    }
    vars
}

fn fill_in(text: &str, vars: &std::collections::BTreeMap<String, String>) -> String {
    vars.iter().fold(text.to_string(), |t, (k, v)| {
        t.replace(&format!("{{{{{k}}}}}"), v)
            .replace(&format!("{{{{ {k} }}}}"), v)
    })
}

/// Places a call at the genie's platform. `None` once the platform took it (its webhook
/// ends it); the end at once when it could not be placed, or when its end-of-call event came
/// before the platform's answer. A refused or failed create is not repeated here: the
/// platform may have rung the phone.
pub(crate) async fn place(app: &AppState, d: &Dial) -> Option<CallEnd> {
    match place_inner(app, d).await {
        Ok(early) => early,
        Err(e) => Some(end("failed", None, Some(e.message))),
    }
}

async fn place_inner(app: &AppState, d: &Dial) -> ApiResult<Option<CallEnd>> {
    let k = &d.campaign;
    let voice = crate::knowledge::agents::voice_for(app, &k.genie_id).await?;
    let (gid, lid) = (k.genie_id.clone(), d.call.lead_id);
    let (genie, phones, lead) = app
        .db
        .read(move |c| {
            Ok((
                db::genies::find(c, &gid)?,
                db::genies::phones(c, &gid)?,
                leads::get(c, lid)?,
            ))
        })
        .await?;
    let genie = genie.ok_or_else(ApiError::agent_not_found)?;
    let phone = phones
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::validation("the genie has no phone number to call from"))?;
    let agent = genie
        .external_agent_id
        .ok_or_else(|| ApiError::upstream("the genie has no agent at the voice provider"))?;
    let out = OutboundCall {
        agent_id: agent,
        from_number: phone.number,
        from_external_id: phone.external_id.unwrap_or_default(),
        to: d.call.phone.clone(),
        variables: variables(k, lead.as_ref()),
        metadata: json!({
            "genie_id": k.genie_id,
            "lead_id": d.call.lead_id,
            "campaign_id": k.id,
            "campaign_call_id": d.call.id,
        }),
    };
    let pid = voice.start_call(&out).await?;
    let cid = d.call.id.clone();
    // In the transaction that gives the call its platform id, so an end-of-call event is
    // either kept before it (and taken here) or finds the call after it, never neither.
    let early = app
        .db
        .write(move |c| {
            repo::call_placed(c, &cid, &pid)?;
            Ok(repo::take_early_outcome(c, &pid)?)
        })
        .await?;
    Ok(early.map(|(outcome, conversation_id, error)| CallEnd {
        outcome,
        conversation_id,
        error,
    }))
}

/// A call the local provider simulates: a campaign's, or one `genies call` placed.
pub(crate) struct SimCall {
    /// The conversation of an answered call is stored under this platform-style id.
    pub conversation_id: String,
    pub genie_id: String,
    pub lead_id: Option<i64>,
    pub phone: String,
    pub attempt: i64,
    /// The campaign's name and persona, for a campaign call.
    pub campaign: Option<(String, Option<String>)>,
    pub variables: std::collections::BTreeMap<String, String>,
    /// What the stored conversation's metadata says of where the call came from.
    pub metadata: serde_json::Value,
}

/// Simulates a campaign call of the local provider: who picks up is decided by the number
/// (see `voice::local::simulated_pickup`); an answered call is a conversation between the
/// genie and the simulated callee, stored and analysed like a platform's.
pub(crate) async fn simulate(app: &AppState, d: &Dial) -> CallEnd {
    let k = &d.campaign;
    let lid = d.call.lead_id;
    let lead = app
        .db
        .read(move |c| Ok(leads::get(c, lid)?))
        .await
        .ok()
        .flatten();
    let sim = SimCall {
        conversation_id: format!("sim_{}", d.call.id),
        genie_id: k.genie_id.clone(),
        lead_id: Some(d.call.lead_id),
        phone: d.call.phone.clone(),
        attempt: d.call.attempt,
        campaign: Some((k.name.clone(), k.persona.clone())),
        variables: variables(k, lead.as_ref()),
        metadata: json!({"campaign_id": k.id, "campaign_call_id": d.call.id}),
    };
    simulate_call(app, &sim).await
}

/// Simulates one call of the local provider (see [`simulate`]).
pub(crate) async fn simulate_call(app: &AppState, sim: &SimCall) -> CallEnd {
    match simulated_pickup(&sim.phone, sim.attempt) {
        Pickup::NoAnswer => end("no_answer", None, None),
        Pickup::Busy => end("busy", None, None),
        Pickup::Answered => match converse(app, sim).await {
            Ok(conv) => end("completed", Some(conv), None),
            Err(e) => end("failed", None, Some(e)),
        },
    }
}

async fn converse(app: &AppState, sim: &SimCall) -> Result<String, String> {
    let llm = app.llm.as_ref().ok_or(
        "no language model is configured (--llm-base-url): the local provider cannot simulate the conversation",
    )?;
    let (gid, lid) = (sim.genie_id.clone(), sim.lead_id);
    let (genie, gref, lead) = app
        .db
        .read(move |c| {
            Ok((
                db::genies::find(c, &gid)?,
                db::conversations::genie(c, &gid)?,
                match lid {
                    Some(l) => leads::get(c, l)?,
                    None => None,
                },
            ))
        })
        .await
        .map_err(|e| e.message)?;
    let (Some(genie), Some(gref)) = (genie, gref) else {
        return Err("the genie no longer exists".into());
    };
    let vars = &sim.variables;
    let callee = lead
        .as_ref()
        .and_then(|l| l.name.clone())
        .unwrap_or_else(|| "the person called".into());
    let model = Some(genie.llm_model.trim())
        .filter(|m| !m.is_empty())
        .unwrap_or(&llm.default_model)
        .to_string();
    let purpose = match &sim.campaign {
        Some((name, _)) => format!(" for the campaign '{name}'"),
        None => String::new(),
    };
    let genie_system = format!(
        "{}\n\nYou placed this outbound phone call to {callee} ({}){purpose}. Keep each reply short, as on the phone.",
        fill_in(
            genie
                .system_prompt
                .as_deref()
                .filter(|p| !p.trim().is_empty())
                .unwrap_or("You are a helpful assistant."),
            vars
        ),
        sim.phone,
    );
    let persona = sim.campaign.as_ref().and_then(|(_, p)| p.as_deref());
    let callee_system = format!(
        "{CALLEE_PROMPT}\n\nYou are {callee}, answering your phone ({}).{}",
        sim.phone,
        persona.map(|p| format!(" {p}")).unwrap_or_default()
    );
    let first = genie
        .first_message
        .as_deref()
        .filter(|m| !m.trim().is_empty())
        .map(|m| fill_in(m, vars))
        .unwrap_or_else(|| format!("Hello, this is {}. Do you have a moment?", genie.name));
    let mut clock = 0.0;
    let mut transcript = vec![Turn {
        role: "agent".into(),
        message: first.clone(),
        time_in_call_secs: clock,
    }];
    let speak = |t: &str| 1.0 + t.split_whitespace().count() as f64 / 2.5;
    clock += speak(&first);
    for _ in 0..SIM_ROUNDS {
        let said = say(
            llm,
            &callee_system,
            &transcript,
            "user",
            &llm.default_model,
            Some(0.7),
            Some(200),
        )
        .await?;
        if said.is_empty() {
            break;
        }
        transcript.push(Turn {
            role: "user".into(),
            message: said.clone(),
            time_in_call_secs: clock,
        });
        clock += speak(&said);
        if said.to_lowercase().contains("goodbye") {
            break;
        }
        let reply = say(
            llm,
            &genie_system,
            &transcript,
            "agent",
            &model,
            genie.temperature,
            genie.max_tokens,
        )
        .await?;
        transcript.push(Turn {
            role: "agent".into(),
            message: reply.clone(),
            time_in_call_secs: clock,
        });
        clock += speak(&reply);
    }
    let duration = clock.ceil() as i64;
    let detail = ConversationDetail {
        conversation_id: sim.conversation_id.clone(),
        agent_id: genie.external_agent_id.clone().unwrap_or_default(),
        status: "done".into(),
        start_time_unix_secs: chrono::Utc::now().timestamp() - duration,
        call_duration_secs: duration,
        transcript,
        summary: None,
        metadata: {
            let mut m = json!({
                "simulated": true,
                "lead_id": sim.lead_id,
                "to": sim.phone,
                "direction": "outbound",
            });
            for (k, v) in sim.metadata.as_object().into_iter().flatten() {
                m[k] = v.clone();
            }
            m
        },
    };
    let stored = conversations::store_provider_conversation(app, &gref, detail)
        .await
        .map_err(|e| e.message)?;
    let conv_id = stored.conversation.id.clone();
    app.wake_jobs();
    // The lead called is the lead of this conversation when it has none yet, so the
    // analysis fills in what it lacks instead of capturing a second lead.
    let (cid, lid) = (conv_id.clone(), sim.lead_id);
    let linked = app
        .db
        .write(move |c| {
            let Some(lid) = lid else {
                return Ok(false);
            };
            let Some(l) = leads::get(c, lid)? else {
                return Ok(false);
            };
            if l.conversation_ref.is_some() {
                return Ok(false);
            }
            leads::update(c, lid, &vec![("conversation_ref", cid.into())])?;
            Ok(true)
        })
        .await
        .map_err(|e| e.message)?;
    if let Err(e) =
        conversations::analyze(app, By::Owner(gref.user_id.clone()), &conv_id, linked).await
    {
        tracing::warn!(error = %e, conversation = %conv_id, "analysis of a simulated call failed");
    }
    conversations::emit_completed(app, &conv_id)
        .await
        .map_err(|e| e.message)?;
    Ok(conv_id)
}

/// One line of `who` (`agent` or `user`) from the model, given the transcript so far as that
/// side sees it (its own lines are the assistant's).
async fn say(
    llm: &Llm,
    system: &str,
    transcript: &[Turn],
    who: &str,
    model: &str,
    temperature: Option<f64>,
    max_tokens: Option<i64>,
) -> Result<String, String> {
    let mut messages = vec![Message::new("system", system)];
    for t in transcript {
        let role = if t.role == who { "assistant" } else { "user" };
        messages.push(Message::new(role, t.message.clone()));
    }
    // Chat models expect the conversation to open with the user; the callee's first turn
    // answers the genie's greeting, which is already the user's from its side.
    let req = ChatRequest {
        model: model.to_string(),
        messages,
        tools: None,
        temperature,
        max_tokens,
    };
    let out = llm.chat(&req).await?;
    Ok(out.message.content.unwrap_or_default().trim().to_string())
}

/// The outcome of a Vapi call from its `endedReason`.
pub fn vapi_outcome(ended_reason: &str) -> (&'static str, Option<String>) {
    let r = ended_reason;
    if r == "customer-did-not-answer" || r == "voicemail" || r.contains("no-answer") {
        ("no_answer", None)
    } else if r == "customer-busy" || r.contains("busy") {
        ("busy", None)
    } else if r.contains("error") || r.contains("failed") || r == "manually-canceled" {
        ("failed", Some(format!("Vapi ended the call: {r}")))
    } else {
        ("completed", None)
    }
}

/// The outcome of a Retell call from its `disconnection_reason`.
pub fn retell_outcome(reason: &str) -> (&'static str, Option<String>) {
    match reason {
        "dial_no_answer" | "voicemail_reached" | "user_declined" => ("no_answer", None),
        "dial_busy" => ("busy", None),
        r if r.starts_with("dial_")
            || r.starts_with("error")
            || matches!(
                r,
                "invalid_destination"
                    | "concurrency_limit_reached"
                    | "no_valid_payment"
                    | "registered_call_timeout"
                    | "manual_stopped"
                    | "telephony_provider_permission_denied"
                    | "telephony_provider_unavailable"
                    | "sip_routing_error"
                    | "marked_as_spam"
            ) =>
        {
            ("failed", Some(format!("Retell ended the call: {r}")))
        }
        _ => ("completed", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes() {
        assert_eq!(vapi_outcome("customer-did-not-answer").0, "no_answer");
        assert_eq!(vapi_outcome("customer-busy").0, "busy");
        assert_eq!(vapi_outcome("customer-ended-call").0, "completed");
        assert_eq!(vapi_outcome("twilio-failed-to-connect-call").0, "failed");
        assert_eq!(retell_outcome("dial_no_answer").0, "no_answer");
        assert_eq!(retell_outcome("dial_busy").0, "busy");
        assert_eq!(retell_outcome("dial_failed").0, "failed");
        assert_eq!(retell_outcome("user_hangup").0, "completed");
    }
}
