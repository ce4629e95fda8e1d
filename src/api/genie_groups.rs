//! The `genie-groups` resource: a user's groups for organising genies, with a manual order
//! and `agent_count`. A genie joins a group through `genies` `update` with `group_id`;
//! deleting a group ungroups its genies.

use super::action::{Action, Resource, handler, schema};
use serde::Deserialize;
use serde_json::json;

use super::{ActionRequest, Ctx, Reply};
use crate::api::double_option;
use crate::api::parse_sort;
use crate::db::{self, genie_groups as repo};
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateGroup {
    name: String,
    description: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateGroup {
    name: Option<String>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    description: Option<Option<String>>,
}

fn check_name(n: &str) -> ApiResult<String> {
    let n = n.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(ApiError::validation(
            "data.name is required and must be at most 100 characters",
        ));
    }
    Ok(n.to_string())
}

/// `all`/`list` (the same action under two names).
async fn list(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    // Consumers own no groups; they see an empty list and nothing else.
    let uid = ctx.user_id().to_string();
    let groups = ctx.db().read(move |c| Ok(repo::list(c, &uid)?)).await?;
    Ok(Reply::ok(json!({"count": groups.len(), "groups": groups})))
}

async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let g = ctx.db().read(move |c| Ok(repo::get(c, &uid, &id)?)).await?;
    Ok(Reply::ok(
        json!({"group": g.ok_or_else(|| ApiError::not_found("genie group"))?}),
    ))
}

async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let b: CreateGroup = req.data()?;
    let name = check_name(&b.name)?;
    let id = db::new_id();
    let id2 = id.clone();
    let g = ctx
        .db()
        .write(move |c| {
            repo::insert(c, &id2, &uid, &name, b.description.as_deref(), &db::now())?;
            Ok(repo::get(c, &uid, &id2)?.expect("row just inserted"))
        })
        .await?;
    Ok(Reply::created(json!({"group": g}))
        .record(&id)
        .summary(format!("created genie group '{}'", g.name)))
}

async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let b: UpdateGroup = req.data()?;
    let name = b.name.as_deref().map(check_name).transpose()?;
    let g = ctx
        .db()
        .write(move |c| {
            let cur = repo::get(c, &uid, &id)?.ok_or_else(|| ApiError::not_found("genie group"))?;
            let name = name.unwrap_or(cur.name);
            let desc = b.description.unwrap_or(cur.description);
            repo::update(c, &uid, &id, &name, desc.as_deref(), &db::now())?;
            Ok(repo::get(c, &uid, &id)?.expect("row exists"))
        })
        .await?;
    Ok(Reply::ok(json!({"group": g})).summary(format!("updated genie group '{}'", g.name)))
}

async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let id2 = id.clone();
    let n = ctx
        .db()
        .write(move |c| {
            repo::delete(c, &uid, &id2, &db::now())?
                .ok_or_else(|| ApiError::not_found("genie group"))
        })
        .await?;
    Ok(
        Reply::ok(json!({"id": id, "deleted": true, "ungrouped": n}))
            .record(&id)
            .summary(format!("deleted genie group, {n} genies ungrouped")),
    )
}

async fn reorder(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let sort = parse_sort(&req.data)?;
    let n = ctx
        .db()
        .write(move |c| {
            let at = db::now();
            for (id, pos) in &sort {
                if !repo::set_sort_order(c, &uid, id, *pos, &at)? {
                    return Err(ApiError::not_found("genie group"));
                }
            }
            Ok(sort.len())
        })
        .await?;
    Ok(Reply::ok(json!({"updated": n})).summary(format!("reordered {n} genie groups")))
}

/// Every `genie-groups` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "genie-groups",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(list)),
        Action::read("list", handler!(list)),
        Action::read("get", handler!(get)).id(),
        Action::write("create", handler!(create))
            .data(schema::<CreateGroup>)
            .conflict(),
        Action::write("update", handler!(update))
            .id()
            .data(schema::<UpdateGroup>)
            .conflict(),
        Action::write("delete", handler!(delete)).id(),
        Action::write("reorder", handler!(reorder)).data(super::action::sort_request),
    ],
};
