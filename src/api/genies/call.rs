//! `call`: an outbound phone call from the genie's number through the genie's provider.
//! A lead marked `do_not_call` is never called, named or not: the number is checked against
//! every lead of the genie's owner.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::json;

use super::{load_manageable, phones_of};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::db::leads;
use crate::error::{ApiError, ApiResult};
use crate::knowledge::agents::voice_for;
use crate::voice::OutboundCall;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "GenieCall")]
pub(crate) struct CallReq {
    /// The callee in E.164 (`+14155550123`).
    to: String,
    /// The lead being called; its activity log records the call.
    #[serde(alias = "lead_id")]
    lead_id: Option<i64>,
    /// Values for `{{name}}` placeholders in the prompt and first message.
    #[serde(default)]
    variables: BTreeMap<String, String>,
}

/// `+` and 7 to 15 digits, the first not 0 (ITU-T E.164).
pub fn is_e164(s: &str) -> bool {
    let digits = s.strip_prefix('+').unwrap_or("");
    (7..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0')
}

pub(super) async fn call(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: CallReq = req.data()?;
    if !is_e164(&body.to) {
        return Err(ApiError::validation(
            "data.to must be an E.164 phone number such as +14155550123",
        ));
    }
    if body.variables.len() > 50
        || body
            .variables
            .iter()
            .any(|(k, v)| k.is_empty() || k.len() > 100 || v.len() > 2000)
    {
        return Err(ApiError::validation(
            "data.variables: at most 50 names of 1-100 characters with values of at most 2000",
        ));
    }
    let genie = load_manageable(ctx, &id).await?;
    let (owner, lead_id, to) = (genie.user_id.clone(), body.lead_id, body.to.clone());
    let lead_ok = ctx
        .db()
        .read(move |c| {
            if let Some(l) = lead_id {
                let lead = leads::get(c, l)?
                    .filter(|lead| {
                        lead.user_id == owner || lead.agent_owner.as_deref() == Some(&owner)
                    })
                    .ok_or_else(|| ApiError::not_found("lead"))?;
                if lead.do_not_call {
                    return Ok(Err(format!("lead {l} is marked do_not_call")));
                }
            }
            if leads::phone_is_do_not_call(c, &owner, &to)? {
                return Ok(Err(format!("{to} belongs to a lead marked do_not_call")));
            }
            Ok(Ok(()))
        })
        .await?;
    if let Err(why) = lead_ok {
        return Err(ApiError::conflict(format!("not calling: {why}")));
    }
    let voice = voice_for(&ctx.app, &id).await?;
    if !voice.supports_calls() {
        return Err(ApiError::validation(format!(
            "the genie's voice provider '{}' cannot place outbound calls",
            voice.name()
        )));
    }
    let phone = phones_of(ctx, &id)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| {
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
        to: body.to.clone(),
        variables: body.variables.clone(),
        metadata: json!({"genie_id": id, "lead_id": body.lead_id}),
    };
    let call_id = voice.start_call(&out).await?;
    if let Some(l) = body.lead_id {
        let (uid, meta) = (
            ctx.user_id().to_string(),
            json!({"call_id": call_id, "provider": voice.name(), "genie_id": id, "to": body.to}),
        );
        let desc = format!(
            "outbound call to {} started by genie '{}'",
            body.to, genie.name
        );
        ctx.db()
            .write(move |c| {
                leads::log(c, l, Some(&uid), "call", Some(&desc), Some(&meta))?;
                Ok(())
            })
            .await?;
    }
    Ok(Reply::ok(json!({"call": {
        "id": call_id,
        "provider": voice.name(),
        "from": phone.number,
        "to": body.to,
        "lead_id": body.lead_id,
        "status": "queued",
    }}))
    .record(&id)
    .summary(format!(
        "started a call from genie '{}' to {}",
        genie.name, body.to
    )))
}

#[cfg(test)]
mod tests {
    #[test]
    fn e164() {
        assert!(super::is_e164("+14155550123"));
        assert!(!super::is_e164("14155550123"));
        assert!(!super::is_e164("+0123456789"));
        assert!(!super::is_e164("+1415-555"));
        assert!(!super::is_e164("+1234567890123456"));
    }
}
