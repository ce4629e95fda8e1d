//! `attach-phone` (a number from the provider, or one the team owns imported with its
//! Twilio or SIP-trunk credentials) and `release-phone`.

use serde::Deserialize;
use serde_json::json;

use super::{load_manageable, phones_of, renderer};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::config::Secret;
use crate::db;
use crate::db::genies::{self as repo, PhoneRow};
use crate::error::{ApiError, ApiResult};
use crate::knowledge::agents::{lock_genie, voice_for};
use crate::service::genies::{self, cleanup_or_queue, phone_unsupported};
use crate::voice::{ImportedNumber, NumberSource};

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieAttachPhone")]
pub(crate) struct AttachReq {
    /// Import this number (E.164) the team owns instead of taking one from the provider;
    /// give `twilio` or `sip` with it.
    number: Option<String>,
    twilio: Option<TwilioIn>,
    sip: Option<SipIn>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieAttachPhoneTwilio")]
pub(crate) struct TwilioIn {
    /// `AC` and 32 hexadecimal digits.
    account_sid: String,
    /// Stored sealed; never returned.
    auth_token: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieAttachPhoneSip")]
pub(crate) struct SipIn {
    /// Where the platform sends calls, e.g. `example.pstn.twilio.com`.
    termination_uri: String,
    username: Option<String>,
    /// Stored sealed; never returned.
    password: Option<String>,
}

/// The number to import, checked; `None` when the request asks for a provider's number.
fn imported(body: AttachReq) -> ApiResult<Option<ImportedNumber>> {
    let source = match (body.twilio, body.sip) {
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(ApiError::validation("data: give twilio or sip, not both"));
        }
        (Some(t), None) => {
            let sid_ok = t.account_sid.len() == 34
                && t.account_sid.starts_with("AC")
                && t.account_sid[2..].bytes().all(|b| b.is_ascii_hexdigit());
            if !sid_ok {
                return Err(ApiError::validation(
                    "data.twilio.account_sid must be AC followed by 32 hexadecimal digits",
                ));
            }
            if t.auth_token.trim().is_empty() || t.auth_token.len() > 200 {
                return Err(ApiError::validation(
                    "data.twilio.auth_token is required (at most 200 characters)",
                ));
            }
            Some(NumberSource::Twilio {
                account_sid: t.account_sid,
                auth_token: Secret(t.auth_token),
            })
        }
        (None, Some(s)) => {
            let uri = s.termination_uri.trim();
            if uri.is_empty()
                || uri.len() > 500
                || uri.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(ApiError::validation(
                    "data.sip.termination_uri is required: a SIP host such as example.pstn.twilio.com",
                ));
            }
            if s.username
                .as_ref()
                .is_some_and(|u| u.is_empty() || u.len() > 200)
                || s.password
                    .as_ref()
                    .is_some_and(|p| p.is_empty() || p.len() > 200)
            {
                return Err(ApiError::validation(
                    "data.sip.username and data.sip.password must be 1-200 characters when given",
                ));
            }
            Some(NumberSource::Sip {
                termination_uri: uri.to_string(),
                username: s.username,
                password: s.password.map(Secret),
            })
        }
    };
    match (body.number, source) {
        (None, None) => Ok(None),
        (Some(n), Some(source)) => {
            if !super::call::is_e164(&n) {
                return Err(ApiError::validation(
                    "data.number must be an E.164 phone number such as +14155550123",
                ));
            }
            Ok(Some(ImportedNumber { number: n, source }))
        }
        (Some(_), None) => Err(ApiError::validation(
            "data.number is imported with its credentials: give data.twilio or data.sip",
        )),
        (None, Some(_)) => Err(ApiError::validation(
            "data.number is required to import a number",
        )),
    }
}

/// What is stored of an imported number's credentials: the public part, and the secret part
/// to seal.
fn credentials(n: &ImportedNumber) -> (String, String) {
    match &n.source {
        NumberSource::Twilio {
            account_sid,
            auth_token,
        } => (
            json!({"account_sid": account_sid}).to_string(),
            json!({"auth_token": auth_token.0}).to_string(),
        ),
        NumberSource::Sip {
            termination_uri,
            username,
            password,
        } => (
            json!({"termination_uri": termination_uri, "username": username}).to_string(),
            json!({"password": password.as_ref().map(|p| p.0.clone())}).to_string(),
        ),
    }
}

pub(super) async fn attach_phone(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let import = imported(req.data()?)?;
    let _guard = lock_genie(&id).await;
    let row = load_manageable(ctx, &id).await?;
    let voice = voice_for(&ctx.app, &id).await?;
    match &import {
        None if !voice.supports_phone_provisioning() => {
            return Err(phone_unsupported(voice.name()));
        }
        Some(n) if !voice.number_import_kinds().contains(&n.source.kind()) => {
            let kinds = voice.number_import_kinds();
            return Err(ApiError::validation(if kinds.is_empty() {
                format!(
                    "the genie's voice provider '{}' cannot import phone numbers",
                    voice.name()
                )
            } else {
                format!(
                    "the genie's voice provider '{}' imports {} numbers, not {}",
                    voice.name(),
                    kinds.join(" and "),
                    n.source.kind()
                )
            }));
        }
        _ => {}
    }
    let existing = phones_of(ctx, &id).await?;
    if !existing.is_empty() {
        return Err(ApiError::conflict(
            "the genie already has a phone number; release it first",
        ));
    }
    let agent = row
        .external_agent_id
        .clone()
        .ok_or_else(|| ApiError::upstream("the genie has no agent at the voice provider"))?;
    let p = match &import {
        None => voice.provision_number(&agent, &row.name).await?,
        Some(n) => voice.import_number(&agent, &row.name, n).await?,
    };
    let (gid, pnum) = (id.clone(), p.clone());
    let sealed = import.as_ref().map(|n| (n.source.kind(), credentials(n)));
    let app = ctx.app.clone();
    let render = renderer(&ctx.app);
    let stored = ctx
        .db()
        .write(move |c| {
            if repo::find(c, &gid)?.is_none() {
                return Err(ApiError::agent_not_found());
            }
            // A concurrent attach-phone may have won the race since the check above.
            if !repo::phones(c, &gid)?.is_empty() {
                return Err(ApiError::conflict(
                    "the genie already has a phone number; release it first",
                ));
            }
            let phone_id = db::new_id();
            repo::insert_phone(
                c,
                &PhoneRow {
                    id: phone_id.clone(),
                    genie_id: gid.clone(),
                    number: pnum.number,
                    external_id: Some(pnum.external_id),
                    status: "active".into(),
                    created_at: db::now(),
                },
            )?;
            if let Some((kind, (account, secret))) = sealed {
                let key = crate::workers::credentials::key_for_write(&app, c)
                    .map_err(ApiError::internal)?;
                let (nonce, ct) =
                    crate::workers::credentials::seal(&key, &phone_id, secret.as_bytes());
                db::phone_imports::insert(c, &phone_id, kind, &account, &nonce, &ct, &db::now())?;
            }
            genies::announce_updated(c, &gid, render)
        })
        .await;
    let genie = match stored {
        Ok((genie, updated)) => {
            ctx.app.bus.emit(updated);
            genie
        }
        Err(e) => {
            cleanup_or_queue(&ctx.app, voice.name(), None, vec![p.external_id]).await;
            return Err(e);
        }
    };
    Ok(Reply::ok(json!({"genie": genie}))
        .record(&id)
        .summary(format!(
            "attached phone number {} to genie '{}'",
            p.number, row.name
        )))
}

pub(super) async fn release_phone(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let _guard = lock_genie(&id).await;
    let row = load_manageable(ctx, &id).await?;
    let phones = phones_of(ctx, &id).await?;
    if phones.is_empty() {
        return Err(ApiError::not_found("phone number"));
    }
    let voice = voice_for(&ctx.app, &id).await?;
    for p in &phones {
        if let Some(ext) = &p.external_id {
            voice.release_number(ext).await?;
        }
    }
    let ids: Vec<String> = phones.iter().map(|p| p.id.clone()).collect();
    let (gid, render) = (id.clone(), renderer(&ctx.app));
    let (genie, updated) = ctx
        .db()
        .write(move |c| {
            for pid in &ids {
                repo::delete_phone(c, pid)?;
            }
            genies::announce_updated(c, &gid, render)
        })
        .await?;
    ctx.app.bus.emit(updated);
    let numbers: Vec<&str> = phones.iter().map(|p| p.number.as_str()).collect();
    Ok(Reply::ok(json!({"genie": genie}))
        .record(&id)
        .summary(format!(
            "released {} from genie '{}'",
            numbers.join(", "),
            row.name
        )))
}
