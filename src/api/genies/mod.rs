//! The `genies` resource: voice agents. Every genie exists in the configured voice provider
//! too: create provisions it there first and stores the row only when the provider accepted
//! it; delete removes it there and, when the provider fails, leaves a durable
//! `genie.cleanup` job that retries until the provider agrees, so neither side keeps an
//! orphan. The clean-up, the per-genie lock and the knowledge-base push are domain
//! operations in `service::genies`, shared with the job dispatcher and the document
//! pipeline. Other resources use `create_genie_for` (marketplace install) and check access
//! with `db::genies::can_read_genie` / `can_manage_genie`.

pub(crate) mod assign;
mod call;
mod checks;
mod clone;
mod drift;
pub mod input;
mod lifecycle;
pub(crate) mod list;
mod phone;
mod settings;
mod update;
mod versions;
mod view;

use super::action::{Action, Resource, handler, schema};
use serde_json::Value;

use super::{Ctx, parse_uuid};
use crate::db::genies::{self as repo, GenieRow};
use crate::db::{self, users::Role};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub use lifecycle::create_genie_for;
pub use view::full_genie;

fn role(ctx: &Ctx) -> Role {
    ctx.principal.role
}

/// Reads the full object of a genie the caller just changed.
async fn reload(app: &AppState, id: &str, with_owner: bool) -> ApiResult<Value> {
    let (id, base) = (id.to_string(), app.config.public_base());
    let chat = view::PageChat::of(app);
    app.db
        .read_snapshot(move |c| match repo::find(c, &id)? {
            Some(g) => {
                let mut v = full_genie(c, &g, with_owner, &base)?;
                chat.apply(&g, &mut v);
                Ok(v)
            }
            None => Err(ApiError::agent_not_found()),
        })
        .await
}

/// Renders a genie as the API shows it to its owner, inside the transaction of the change
/// that the event carrying it (`genie.created`, `genie.updated`) is recorded in.
fn renderer(app: &AppState) -> crate::service::genies::Render {
    let (base, chat) = (app.config.public_base(), view::PageChat::of(app));
    Box::new(move |c, g| {
        let mut v = full_genie(c, g, false, &base)?;
        chat.apply(g, &mut v);
        Ok(v)
    })
}

/// The genie's phone numbers.
async fn phones_of(ctx: &Ctx, id: &str) -> ApiResult<Vec<repo::PhoneRow>> {
    let id = id.to_string();
    ctx.db().read(move |c| Ok(repo::phones(c, &id)?)).await
}

async fn load_manageable(ctx: &Ctx, id: &str) -> ApiResult<GenieRow> {
    let (uid, role, id) = (ctx.user_id().to_string(), role(ctx), id.to_string());
    ctx.db()
        .read_point(move |c| {
            repo::get_manageable(c, &uid, role, &id)?.ok_or_else(ApiError::agent_not_found)
        })
        .await
}

/// Checks that `group_id` names a group of `owner`.
async fn check_group(
    app: &AppState,
    owner: &str,
    group_id: &str,
    field: &str,
) -> ApiResult<String> {
    let gid = parse_uuid(group_id, field)?;
    let (o, g) = (owner.to_string(), gid.clone());
    let found = app
        .db
        .read_point(move |c| Ok(db::genie_groups::get(c, &o, &g)?))
        .await?;
    if found.is_none() {
        return Err(ApiError::validation(format!(
            "{field}: genie group not found"
        )));
    }
    Ok(gid)
}

/// Every `genies` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "genies",
    list_action: "list",
    actions: &[
        Action::read("all", handler!(list::all)).data(schema::<list::ListReq>),
        Action::read("list", handler!(list::list)).data(schema::<list::ListReq>),
        Action::read("get", handler!(list::get))
            .id()
            .data(schema::<list::AdminModeReq>),
        Action::write("create", handler!(lifecycle::create))
            .data(schema::<input::CreateGenie>)
            .conflict()
            .upstream(),
        Action::write("update", handler!(update::update))
            .id()
            .data(schema::<input::UpdateGenie>)
            .conflict()
            .upstream(),
        Action::write("delete", handler!(lifecycle::delete))
            .id()
            .upstream(),
        Action::write("clone", handler!(clone::clone))
            .id()
            .data(schema::<input::CloneGenie>)
            .upstream(),
        Action::write("assign", handler!(assign::assign))
            .id()
            .data(schema::<assign::AssignReq>),
        Action::write("unassign", handler!(assign::unassign))
            .id()
            .data(schema::<assign::AssignReq>),
        Action::write("attach-phone", handler!(phone::attach_phone))
            .id()
            .data(schema::<phone::AttachReq>)
            .conflict()
            .upstream(),
        Action::write("release-phone", handler!(phone::release_phone))
            .id()
            .conflict()
            .upstream(),
        Action::write("reorder", handler!(clone::reorder)).data(super::action::sort_request),
        Action::read("versions", handler!(versions::list)).id(),
        Action::read("get-version", handler!(versions::get_version))
            .id()
            .data(schema::<versions::VersionReq>),
        Action::read("diff", handler!(versions::diff))
            .id()
            .data(schema::<versions::DiffReq>),
        Action::write("rollback", handler!(versions::rollback))
            .id()
            .data(schema::<versions::RollbackReq>)
            .conflict()
            .upstream(),
        Action::write("publish", handler!(versions::publish))
            .id()
            .data(schema::<versions::PublishReq>)
            .conflict()
            .upstream(),
        Action::write("discard-draft", handler!(versions::discard_draft))
            .id()
            .conflict(),
        Action::write("set-traffic", handler!(versions::set_traffic))
            .id()
            .data(schema::<versions::TrafficReq>),
        Action::read("version-stats", handler!(versions::stats)).id(),
        Action::write("call", handler!(call::call))
            .id()
            .data(schema::<call::CallReq>)
            .conflict()
            .upstream(),
        Action::write("check-drift", handler!(drift::check_drift))
            .id()
            .conflict()
            .upstream(),
        Action::write("pull", handler!(drift::pull))
            .id()
            .conflict()
            .upstream(),
        Action::write("push", handler!(drift::push))
            .id()
            .conflict()
            .upstream(),
        Action::write("move", handler!(drift::move_genie))
            .id()
            .data(schema::<drift::MoveReq>)
            .conflict()
            .upstream(),
    ],
};
