//! `create` and `delete`; provisioning and the clean-up that keeps the provider free of
//! orphans are `service::genies`'.

use serde_json::{Value, json};

use super::input::{self, CreateGenie};
use super::settings;
use super::{check_group, load_manageable, renderer};
use crate::api::{ActionRequest, Ctx, Reply, parse_uuid, parse_value};
use crate::db;
use crate::db::genies::GenieRow;
use crate::error::{ApiError, ApiResult};
use crate::service::genies;
use crate::state::AppState;

pub(super) async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: CreateGenie = req.data()?;
    let owner = match body.impersonated_user_id.as_deref() {
        None => ctx.user_id().to_string(),
        Some(u) => {
            ctx.principal.admin_option("impersonatedUserId", true)?;
            let uid = parse_uuid(u, "data.impersonatedUserId")?;
            let u2 = uid.clone();
            if ctx
                .db()
                .read(move |c| Ok(db::users::get(c, &u2)?))
                .await?
                .is_none()
            {
                return Err(ApiError::validation(
                    "data.impersonatedUserId: no such user",
                ));
            }
            uid
        }
    };
    let (row, genie) = create_row(&ctx.app, &owner, &body).await?;
    Ok(Reply::created(json!({"genie": genie}))
        .record(&row.id)
        .summary(format!("created genie '{}'", row.name)))
}

/// Creates a genie owned by `owner_id` from `create` data (the same members as the API's
/// `create`; `impersonatedUserId` is ignored) and returns the full genie object. The
/// marketplace's install uses this. Emits `genie.created`; not audited (the caller's own
/// action is).
pub async fn create_genie_for(app: &AppState, owner_id: &str, input: Value) -> ApiResult<Value> {
    let body: CreateGenie = parse_value(&input, "data")?;
    Ok(create_row(app, owner_id, &body).await?.1)
}

/// The stored row and the full genie (which `genie.created` carries).
async fn create_row(
    app: &AppState,
    owner: &str,
    body: &CreateGenie,
) -> ApiResult<(GenieRow, Value)> {
    let mut row = input::new_row(body, db::new_id(), owner.to_string(), db::now())?;
    crate::service::genie_tools::check_addresses(&app.net, "data.tools", &row.tools)?;
    crate::service::genie_tools::check_credentials(app, owner, "data.tools", &row.tools).await?;
    if let Some(g) = &body.group_id {
        row.group_id = Some(check_group(app, owner, g, "data.groupId").await?);
    }
    let spec = settings::agent_spec(&row, vec![]);
    let want_phone = body.attach_phone_number.unwrap_or(false);
    let provider = match body.provider.as_deref() {
        None => app.voice.default().name(),
        Some(p) => app.voice.get(p).map(|v| v.name()).ok_or_else(|| {
            ApiError::validation(format!(
                "data.provider: '{p}' is not a voice provider configured on this service (configured: {})",
                app.voice.names().join(", ")
            ))
        })?,
    };
    genies::provision(app, row, &spec, want_phone, provider, renderer(app)).await
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let _guard = crate::knowledge::agents::lock_genie(&id).await;
    let row = load_manageable(ctx, &id).await?;
    genies::delete(&ctx.app, &row).await?;
    Ok(Reply::deleted(&id).summary(format!("deleted genie '{}'", row.name)))
}
