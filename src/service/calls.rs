//! `genies call`: one outbound call a genie places on request. On a platform (Vapi, Retell)
//! the call is the platform's and its end comes through the provider webhook; on the local
//! provider it is simulated as campaign calls are (`campaign_calls::simulate_call`): the
//! number's last digit decides who picks up, and an answered call becomes a conversation
//! stored under the call's id. Either way a lead marked `do_not_call` is never called.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::db::call_starts;
use crate::db::genies::GenieRow;
use crate::db::sql::Connection;
use crate::db::{self, leads};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::knowledge::agents::voice_for;
use crate::service::campaign_calls::{SimCall, simulate_call};
use crate::state::AppState;
use crate::voice::OutboundCall;

/// The window a genie's `max_calls_per_minute` counts starts in.
const RATE_WINDOW: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// Where a genie stands against its call rate at `now`.
pub(crate) struct Rate {
    /// The genie's `max_calls_per_minute`; None: no limit.
    pub limit: Option<i64>,
    /// Calls it may start now (`i64::MAX` without a limit).
    pub room: i64,
    /// When the oldest start in the window leaves it, freeing a start.
    pub frees_at: Option<DateTime<Utc>>,
}

/// Reads the genie's call rate and the starts in its window.
pub(crate) fn rate(c: &Connection, genie_id: &str, now: DateTime<Utc>) -> rusqlite::Result<Rate> {
    let limit = db::genies::find(c, genie_id)?.and_then(|g| g.max_calls_per_minute);
    let Some(limit) = limit else {
        return Ok(Rate {
            limit: None,
            room: i64::MAX,
            frees_at: None,
        });
    };
    let starts = call_starts::since(c, genie_id, &db::fmt_time(now - RATE_WINDOW))?;
    let frees_at = starts
        .first()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc) + RATE_WINDOW);
    Ok(Rate {
        limit: Some(limit),
        room: limit - starts.len() as i64,
        frees_at,
    })
}

/// Counts a call the genie starts now against its rate (`id`: the call's own id).
pub(crate) fn record_start(
    c: &Connection,
    id: &str,
    genie_id: &str,
    campaign_id: Option<&str>,
    now: DateTime<Utc>,
) -> rusqlite::Result<()> {
    call_starts::record(
        c,
        id,
        genie_id,
        campaign_id,
        &db::fmt_time(now),
        &db::fmt_time(now - RATE_WINDOW * 2),
    )
}

/// Takes one start of the genie's call rate, in the transaction that checks it, or refuses
/// with 429 `CALL_RATE_LIMIT_EXCEEDED` and the seconds until a start frees up.
async fn take_start(app: &AppState, genie_id: &str) -> ApiResult<()> {
    let gid = genie_id.to_string();
    app.db
        .write(move |c| {
            let now = Utc::now();
            let r = rate(c, &gid, now)?;
            if r.room <= 0 {
                let wait = r
                    .frees_at
                    .map(|t| (t - now).num_milliseconds())
                    .unwrap_or(0);
                let secs = ((wait + 999) / 1000).max(1) as u64;
                return Err(ApiError::call_rate_limited(
                    format!(
                        "the genie's limit of {} calls a minute (max_calls_per_minute) is reached; the next call may start in {secs} s",
                        r.limit.unwrap_or_default()
                    ),
                    secs,
                ));
            }
            record_start(c, &db::new_id(), &gid, None, now)?;
            Ok(())
        })
        .await
}

/// What the caller asked for.
pub struct CallInput {
    pub to: String,
    pub lead_id: Option<i64>,
    pub variables: BTreeMap<String, String>,
}

/// Places (or, on the local provider, starts simulating) a call from `genie` to `input.to`;
/// `by` is the user asking. Returns the `call` object of the answer.
pub async fn call(
    app: &AppState,
    genie: &GenieRow,
    by: &str,
    input: CallInput,
) -> ApiResult<Value> {
    let (owner, lead_id, to) = (genie.user_id.clone(), input.lead_id, input.to.clone());
    let lead_ok = app
        .db
        .read(move |c| {
            let mut name = None;
            if let Some(l) = lead_id {
                let lead = leads::get(c, l)?
                    .filter(|lead| {
                        lead.user_id == owner || lead.agent_owner.as_deref() == Some(&owner)
                    })
                    .ok_or_else(|| ApiError::not_found("lead"))?;
                if lead.do_not_call {
                    return Ok(Err(format!("lead {l} is marked do_not_call")));
                }
                name = lead.name;
            }
            if leads::phone_is_do_not_call(c, &owner, &to)? {
                return Ok(Err(format!("{to} belongs to a lead marked do_not_call")));
            }
            Ok(Ok(name))
        })
        .await?;
    let lead_name = match lead_ok {
        Ok(name) => name,
        Err(why) => return Err(ApiError::conflict(format!("not calling: {why}"))),
    };
    let voice = voice_for(app, &genie.id).await?;
    let local = voice.name() == "local";
    if local && app.llm.is_none() {
        return Err(ApiError::validation(
            "the local provider simulates calls with the language model, and none is configured: the operator sets --llm-base-url",
        ));
    }
    if !local && !voice.supports_calls() {
        return Err(ApiError::validation(format!(
            "the genie's voice provider '{}' cannot place outbound calls",
            voice.name()
        )));
    }
    let gid = genie.id.clone();
    let phone = app
        .db
        .read(move |c| Ok(db::genies::phones(c, &gid)?))
        .await?
        .into_iter()
        .next();
    if !local && phone.is_none() {
        return Err(ApiError::validation(
            "the genie has no phone number to call from; attach one first",
        ));
    }
    // Counted before the call is placed and kept whatever happens next: a platform that
    // failed to answer may still have dialled.
    take_start(app, &genie.id).await?;
    let call_id = if local {
        // A simulated call rings no phone, so it needs no number to call from.
        let id = format!("sim_{}", uuid::Uuid::now_v7().simple());
        // As in a campaign, the simulated genie greets the lead by name.
        let mut variables = input.variables.clone();
        if let Some(n) = lead_name {
            variables.entry("lead_name".into()).or_insert(n);
        }
        let sim = SimCall {
            conversation_id: id.clone(),
            genie_id: genie.id.clone(),
            lead_id: input.lead_id,
            phone: input.to.clone(),
            attempt: 1,
            campaign: None,
            variables,
            metadata: json!({"call_id": id}),
        };
        let (app2, name, from) = (
            app.clone(),
            genie.name.clone(),
            phone.as_ref().map(|p| p.number.clone()),
        );
        let owner = genie.user_id.clone();
        app.tasks.spawn(async move {
            let end = simulate_call(&app2, &sim).await;
            ended(&app2, &owner, &name, &sim, from.as_deref(), end).await;
        });
        id
    } else {
        let phone = phone.as_ref().ok_or_else(|| {
            ApiError::validation("the genie has no phone number to call from; attach one first")
        })?;
        let agent = genie
            .external_agent_id
            .clone()
            .ok_or_else(|| ApiError::upstream("the genie has no agent at the voice provider"))?;
        let out = OutboundCall {
            agent_id: agent,
            from_number: phone.number.clone(),
            from_external_id: phone.external_id.clone().unwrap_or_default(),
            to: input.to.clone(),
            variables: input.variables.clone(),
            metadata: json!({"genie_id": genie.id, "lead_id": input.lead_id}),
        };
        voice.start_call(&out).await?
    };
    if let Some(l) = input.lead_id {
        let (uid, meta) = (
            by.to_string(),
            json!({"call_id": call_id, "provider": voice.name(), "genie_id": genie.id, "to": input.to}),
        );
        let desc = format!(
            "outbound call to {} started by genie '{}'",
            input.to, genie.name
        );
        app.db
            .write(move |c| {
                leads::log(c, l, Some(&uid), "call", Some(&desc), Some(&meta))?;
                Ok(())
            })
            .await?;
    }
    Ok(json!({
        "id": call_id,
        "provider": voice.name(),
        "from": phone.map(|p| p.number),
        "to": input.to,
        "lead_id": input.lead_id,
        "status": "queued",
    }))
}

/// Records how a simulated call ended: the lead's activity log (when a lead was named) and
/// `call.completed` to the genie's owner.
async fn ended(
    app: &AppState,
    owner: &str,
    genie_name: &str,
    sim: &SimCall,
    from: Option<&str>,
    end: crate::service::campaign_calls::CallEnd,
) {
    let call = json!({
        "id": sim.conversation_id,
        "genie_id": sim.genie_id,
        "provider": "local",
        "from": from,
        "to": sim.phone,
        "lead_id": sim.lead_id,
        "status": "ended",
        "outcome": end.outcome,
        "conversation_id": end.conversation_id,
        "error": end.error,
    });
    let mut log = None;
    if let Some(l) = sim.lead_id {
        let mut desc = format!(
            "call to {} by genie '{genie_name}' ended: {}",
            sim.phone,
            end.outcome.replace('_', " ")
        );
        if let Some(e) = &end.error {
            desc.push_str(&format!(" ({e})"));
        }
        let meta = json!({
            "call_id": sim.conversation_id,
            "provider": "local",
            "genie_id": sim.genie_id,
            "outcome": end.outcome,
            "conversation_id": end.conversation_id,
        });
        log = Some((l, desc, meta));
    }
    let uid = owner.to_string();
    let event = Event::new(
        "call.completed",
        owner,
        json!({"call": call, "campaign_id": null}),
    );
    match app
        .db
        .write(move |c| {
            if let Some((l, desc, meta)) = log {
                leads::log(c, l, Some(&uid), "call", Some(&desc), Some(&meta))?;
            }
            Ok(crate::events::record(c, event)?)
        })
        .await
    {
        Ok(recorded) => app.bus.emit(recorded),
        Err(e) => {
            tracing::error!(error = %e, call = %sim.conversation_id, "could not record a simulated call's outcome")
        }
    }
}
