//! The `document-folders` resource: a user's folder tree for documents. Create, rename and
//! move (`update` with `name` and/or `parent_id`; cycles refused), delete (its documents and
//! sub-folders move to the root, nothing else is deleted), and list with document counts.

use super::action::{Action, Resource, handler, schema};
use serde::Deserialize;
use serde_json::json;

use super::double_option;
use super::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::db::document_folders as folders;
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "FolderCreate")]
pub(crate) struct CreateReq {
    name: String,
    #[serde(alias = "parentId")]
    parent_id: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "FolderUpdate")]
pub(crate) struct UpdateReq {
    name: Option<String>,
    #[serde(
        default,
        alias = "parentId",
        deserialize_with = "double_option::deserialize"
    )]
    #[schemars(with = "Option<String>")]
    parent_id: Option<Option<String>>,
}

fn clean_name(n: &str) -> ApiResult<String> {
    let n = n.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(ApiError::validation(
            "data.name must be 1 to 100 characters",
        ));
    }
    Ok(n.to_string())
}

fn parent(c: &crate::db::Connection, user: &str, p: Option<&str>) -> ApiResult<()> {
    if let Some(p) = p
        && folders::get(c, user, p)?.is_none()
    {
        return Err(ApiError::new(
            crate::error::Kind::NotFound,
            "parent folder not found",
        ));
    }
    Ok(())
}

/// `all`/`list` (the same action under two names).
async fn list(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let list = ctx.db().read(move |c| Ok(folders::list(c, &uid)?)).await?;
    Ok(Reply::ok(json!({"count": list.len(), "folders": list})))
}

async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let f = ctx
        .db()
        .read(move |c| folders::get(c, &uid, &id)?.ok_or_else(|| ApiError::not_found("folder")))
        .await?;
    Ok(Reply::ok(json!({"folder": f})))
}

async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let r: CreateReq = req.data()?;
    let name = clean_name(&r.name)?;
    let p = r
        .parent_id
        .as_deref()
        .filter(|p| !p.trim().is_empty())
        .map(|p| parse_uuid(p, "data.parent_id"))
        .transpose()?;
    let f = ctx
        .db()
        .write(move |c| {
            parent(c, &uid, p.as_deref())?;
            Ok(folders::insert(c, &uid, &name, p.as_deref())?)
        })
        .await?;
    let summary = format!("created folder '{}'", f.name);
    Ok(Reply::created(json!({"folder": f}))
        .record(f.id.clone())
        .summary(summary))
}

async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let r: UpdateReq = req.data()?;
    let name = r.name.as_deref().map(clean_name).transpose()?;
    let p = match r.parent_id {
        Some(Some(p)) if !p.trim().is_empty() => Some(Some(parse_uuid(&p, "data.parent_id")?)),
        Some(_) => Some(None),
        None => None,
    };
    if name.is_none() && p.is_none() {
        return Err(ApiError::validation(
            "data must carry name and/or parent_id",
        ));
    }
    let f = ctx
        .db()
        .write(move |c| {
            folders::get(c, &uid, &id)?.ok_or_else(|| ApiError::not_found("folder"))?;
            if let Some(Some(p)) = &p {
                parent(c, &uid, Some(p))?;
                if folders::ancestors(c, p)?.contains(&id) {
                    return Err(ApiError::validation(
                        "data.parent_id would put the folder inside itself",
                    ));
                }
            }
            folders::update(
                c,
                &uid,
                &id,
                name.as_deref(),
                p.as_ref().map(|x| x.as_deref()),
            )?;
            Ok(folders::get(c, &uid, &id)?.expect("present"))
        })
        .await?;
    let summary = format!("updated folder '{}'", f.name);
    Ok(Reply::ok(json!({"folder": f})).summary(summary))
}

async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let id2 = id.clone();
    let moved = ctx
        .db()
        .write(move |c| {
            folders::delete(c, &uid, &id2)?.ok_or_else(|| ApiError::not_found("folder"))
        })
        .await?;
    let mut reply = Reply::deleted(&id);
    reply.data["documents_moved_to_root"] = json!(moved);
    Ok(reply.summary("deleted a folder"))
}

/// Every `document-folders` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "document-folders",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(list)),
        Action::read("list", handler!(list)),
        Action::read("get", handler!(get)).id(),
        Action::write("create", handler!(create))
            .data(schema::<CreateReq>)
            .conflict(),
        Action::write("update", handler!(update))
            .id()
            .data(schema::<UpdateReq>)
            .conflict(),
        Action::write("delete", handler!(delete)).id(),
    ],
};
