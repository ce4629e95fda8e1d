//! `attach-phone` and `release-phone`.

use serde_json::json;

use super::{load_manageable, phones_of, reload_updated};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::db;
use crate::db::genies::{self as repo, PhoneRow};
use crate::error::{ApiError, ApiResult};
use crate::knowledge::agents::{lock_genie, voice_for};
use crate::service::genies::{cleanup_or_queue, phone_unsupported};

pub(super) async fn attach_phone(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let _guard = lock_genie(&id).await;
    let row = load_manageable(ctx, &id).await?;
    let voice = voice_for(&ctx.app, &id).await?;
    if !voice.supports_phone_provisioning() {
        return Err(phone_unsupported(voice.name()));
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
    let p = voice.provision_number(&agent, &row.name).await?;
    let (gid, pnum) = (id.clone(), p.clone());
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
            repo::insert_phone(
                c,
                &PhoneRow {
                    id: db::new_id(),
                    genie_id: gid,
                    number: pnum.number,
                    external_id: Some(pnum.external_id),
                    status: "active".into(),
                    created_at: db::now(),
                },
            )?;
            Ok(())
        })
        .await;
    if let Err(e) = stored {
        cleanup_or_queue(&ctx.app, voice.name(), None, vec![p.external_id]).await;
        return Err(e);
    }
    let genie = reload_updated(&ctx.app, &id, &row.user_id).await?;
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
    ctx.db()
        .write(move |c| {
            for pid in &ids {
                repo::delete_phone(c, pid)?;
            }
            Ok(())
        })
        .await?;
    let genie = reload_updated(&ctx.app, &id, &row.user_id).await?;
    let numbers: Vec<&str> = phones.iter().map(|p| p.number.as_str()).collect();
    Ok(Reply::ok(json!({"genie": genie}))
        .record(&id)
        .summary(format!(
            "released {} from genie '{}'",
            numbers.join(", "),
            row.name
        )))
}
