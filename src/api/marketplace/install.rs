//! Making a new genie of the caller's from a listing.

use serde::Deserialize;
use serde_json::json;

use super::text;
use crate::api::{ActionRequest, Ctx, Reply, genies};
use crate::error::ApiResult;
use crate::service::marketplace as service;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "MarketplaceInstall")]
pub(crate) struct Install {
    name: Option<String>,
}

pub(super) async fn install(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: Install = req.data()?;
    let name = text("name", body.name, 100)?;
    let uid = ctx.user_id();
    let done = service::install(&ctx.app, uid, &id, name, |input| {
        genies::create_genie_for(&ctx.app, uid, input)
    })
    .await?;
    let gid = done.genie["id"].as_str().unwrap_or_default().to_string();
    let s = format!(
        "installed genie '{}' from marketplace listing '{}'",
        done.name, done.listing.name
    );
    Ok(Reply::created(
        json!({"genie": done.genie, "listing_id": done.listing.id, "install_count": done.install_count}),
    )
    .record(&gid)
    .summary(s))
}
