//! The `qr-code` resource: saved QR codes linking to a genie's public page
//! (`{public_url}/g/{slug}`). Owner-only, no admin mode; delete is soft. The images are
//! served by `http::public_page` at `GET /v1/qr-code/{id}/image.svg|png`.

use super::action::{Action, Resource, handler, schema};
use serde::Deserialize;
use serde_json::json;

use super::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::service;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "QrCodeListRequest")]
pub(crate) struct All {
    #[serde(alias = "genieId")]
    genie_id: Option<String>,
    /// REST query strings also copy members under `filters`.
    #[serde(default)]
    filters: Option<serde_json::Value>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "QrCodeCreate")]
pub(crate) struct Create {
    #[serde(alias = "genieId")]
    genie_id: String,
    label: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "QrCodeIncrement")]
pub(crate) struct Increment {
    count: Option<i64>,
}

async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let (uid, base) = (ctx.user_id().to_string(), ctx.app.config.public_base());
    let body: All = req.data()?;
    let _ = body.filters;
    let genie = body
        .genie_id
        .map(|g| parse_uuid(&g, "data.genie_id"))
        .transpose()?;
    let codes = ctx
        .db()
        .read(move |c| Ok(db::qr_codes::list(c, &uid, genie.as_deref())?))
        .await?;
    let codes: Vec<_> = codes.into_iter().map(|q| q.at(&base)).collect();
    Ok(Reply::ok(json!({"qr_codes": codes})))
}

async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let (uid, base) = (ctx.user_id().to_string(), ctx.app.config.public_base());
    let id = req.uuid()?;
    let code = ctx
        .db()
        .read(move |c| Ok(db::qr_codes::get(c, &uid, &id)?))
        .await?;
    Ok(Reply::ok(
        json!({"qr_code": code.ok_or_else(|| ApiError::not_found("QR code"))?.at(&base)}),
    ))
}

async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: Create = req.data()?;
    let genie_id = parse_uuid(&body.genie_id, "data.genie_id")?;
    let label = body
        .label
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty());
    if label.as_ref().is_some_and(|l| l.chars().count() > 200) {
        return Err(ApiError::validation(
            "data.label must be at most 200 characters",
        ));
    }
    let code = service::qr_codes::create(&ctx.app, ctx.user_id(), &genie_id, label).await?;
    let summary = format!("created QR code for {}", code.url);
    Ok(Reply::created(json!({"qr_code": code}))
        .record(&code.id)
        .summary(summary))
}

async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let id2 = id.clone();
    if !ctx
        .db()
        .write(move |c| Ok(db::qr_codes::soft_delete(c, &uid, &id2)?))
        .await?
    {
        return Err(ApiError::not_found("QR code"));
    }
    Ok(Reply::deleted(&id).summary("deleted a QR code"))
}

async fn increment_download(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let (uid, base) = (ctx.user_id().to_string(), ctx.app.config.public_base());
    let id = req.uuid()?;
    let body: Increment = req.data()?;
    let n = body.count.unwrap_or(1);
    if !(1..=1000).contains(&n) {
        return Err(ApiError::validation(
            "data.count must be between 1 and 1000",
        ));
    }
    let code = ctx
        .db()
        .write(move |c| {
            db::qr_codes::add_downloads(c, &uid, &id, n)?
                .ok_or_else(|| ApiError::not_found("QR code"))
        })
        .await?
        .at(&base);
    Ok(Reply::ok(json!({"qr_code": code})).summary(format!("counted {n} QR code download(s)")))
}

/// Every `qr-code` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "qr-code",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(list)).data(schema::<All>),
        Action::read("list", handler!(list)).data(schema::<All>),
        Action::read("get", handler!(get)).id(),
        Action::write("create", handler!(create))
            .data(schema::<Create>)
            .conflict(),
        Action::write("delete", handler!(delete)).id(),
        Action::write("increment-download", handler!(increment_download))
            .id()
            .data(schema::<Increment>),
    ],
};
