//! `assign` and `unassign`: giving a user (a consumer) read access to a genie.

use serde::Deserialize;
use serde_json::json;

use super::load_manageable;
use crate::api::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::db;
use crate::db::genies as repo;
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "GenieAssign")]
pub(crate) struct AssignReq {
    user_id: String,
}

pub(super) async fn assign(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    set_assigned(ctx, req, true).await
}

pub(super) async fn unassign(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    set_assigned(ctx, req, false).await
}

async fn set_assigned(ctx: &Ctx, req: &ActionRequest, assigning: bool) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: AssignReq = req.data()?;
    let target = parse_uuid(&body.user_id, "data.userId")?;
    let row = load_manageable(ctx, &id).await?;
    if target == row.user_id {
        return Err(ApiError::validation("data.userId is the genie's owner"));
    }
    let (gid, uid) = (id.clone(), target.clone());
    ctx.db()
        .write(move |c| {
            if db::users::get(c, &uid)?.is_none() {
                return Err(ApiError::validation("data.userId: no such user"));
            }
            if assigning {
                repo::assign(c, &gid, &uid, &db::now())?;
            } else if !repo::unassign(c, &gid, &uid)? {
                return Err(ApiError::not_found("assignment"));
            }
            Ok(())
        })
        .await?;
    let verb = if assigning { "assigned" } else { "unassigned" };
    Ok(
        Reply::ok(json!({"genie_id": id, "user_id": target, "assigned": assigning}))
            .record(&id)
            .summary(format!(
                "{verb} genie '{}' {} user {target}",
                row.name,
                if assigning { "to" } else { "from" }
            )),
    )
}
