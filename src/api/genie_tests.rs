//! The `genie-tests` resource: test conversations of a genie (scripted turns or a simulated
//! user, and criteria) and their runs. A test is read by whoever may read its genie and
//! changed or run by whoever may manage it; the rules and the playing are
//! `service::genie_tests`'.

use serde::Deserialize;
use serde_json::{Value, json};

use super::action::{Action, Resource, handler, schema};
use super::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::db::genie_tests as store;
use crate::db::genies as repo;
use crate::error::{ApiError, ApiResult};
use crate::service::genie_tests as tests;
use crate::service::genie_versions::Which;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "GenieTestListRequest")]
pub(crate) struct ListReq {
    #[serde(alias = "genieId")]
    genie_id: Option<String>,
    #[serde(default, alias = "adminMode")]
    admin_mode: bool,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieTestCreate")]
pub(crate) struct CreateReq {
    #[serde(alias = "genieId")]
    genie_id: String,
    name: String,
    /// Scripted user turns.
    turns: Option<Vec<String>>,
    /// `{prompt, max_turns}`: the LLM plays the user.
    #[schemars(with = "Option<serde_json::Value>")]
    simulated_user: Option<Value>,
    /// `[{type: contains | not_contains | tool_called | lead_captured | llm_judge, value}]`.
    #[schemars(with = "Vec<serde_json::Value>")]
    criteria: Value,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieTestUpdate")]
pub(crate) struct UpdateReq {
    name: Option<String>,
    turns: Option<Vec<String>>,
    #[schemars(with = "Option<serde_json::Value>")]
    simulated_user: Option<Value>,
    #[schemars(with = "Option<Vec<serde_json::Value>>")]
    criteria: Option<Value>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieTestRunRequest")]
pub(crate) struct RunReq {
    /// A version number or `"draft"`; default the draft if any, else live.
    #[schemars(with = "Option<serde_json::Value>")]
    version: Option<Value>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieTestRunAllRequest")]
pub(crate) struct RunAllReq {
    #[serde(alias = "genieId")]
    genie_id: String,
    #[schemars(with = "Option<serde_json::Value>")]
    version: Option<Value>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "GenieTestRunsRequest")]
pub(crate) struct RunsReq {
    #[serde(alias = "genieId")]
    genie_id: Option<String>,
    limit: Option<i64>,
}

/// The genie when the caller may read it (`manage`: manage it).
async fn genie(ctx: &Ctx, id: &str, manage: bool) -> ApiResult<repo::GenieRow> {
    let (uid, role, id) = (
        ctx.user_id().to_string(),
        ctx.principal.role,
        id.to_string(),
    );
    ctx.db()
        .read(move |c| {
            let g = if manage {
                repo::get_manageable(c, &uid, role, &id)?
            } else {
                repo::get_readable(c, &uid, role, &id)?
            };
            g.ok_or_else(ApiError::agent_not_found)
        })
        .await
}

fn which(v: &Option<Value>) -> ApiResult<Option<Which>> {
    v.as_ref()
        .filter(|v| !v.is_null())
        .map(|v| Which::parse(v, "data.version"))
        .transpose()
}

async fn all(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: ListReq = req.data()?;
    let admin = ctx.principal.admin_option("adminMode", body.admin_mode)?;
    let list = match body.genie_id {
        Some(g) => {
            let g = genie(ctx, &parse_uuid(&g, "data.genie_id")?, false).await?;
            ctx.db()
                .read(move |c| Ok(store::of_genie(c, &g.id)?))
                .await?
        }
        None => {
            let uid = ctx.user_id().to_string();
            ctx.db()
                .read(move |c| Ok(store::of_owner(c, &uid, admin)?))
                .await?
        }
    };
    let items: Vec<Value> = list.iter().map(tests::view).collect();
    Ok(Reply::ok(json!({"count": items.len(), "tests": items})))
}

async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let t = tests::load(&ctx.app, ctx.user_id(), ctx.principal.role, &id, false).await?;
    Ok(Reply::ok(json!({"test": tests::view(&t)})))
}

async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: CreateReq = req.data()?;
    let gid = parse_uuid(&body.genie_id, "data.genie_id")?;
    let turns = body.turns.map(|t| json!(t));
    let def = tests::check(
        &body.name,
        turns.as_ref(),
        body.simulated_user.as_ref(),
        &body.criteria,
    )?;
    let g = genie(ctx, &gid, true).await?;
    let now = crate::db::now();
    let t = store::TestRow {
        id: crate::db::new_id(),
        genie_id: g.id,
        user_id: ctx.user_id().to_string(),
        name: def.name,
        turns: def.turns,
        simulated_user: def.simulated_user,
        criteria: def.criteria,
        created_at: now.clone(),
        updated_at: now,
    };
    let t2 = t.clone();
    ctx.db().write(move |c| Ok(store::insert(c, &t2)?)).await?;
    Ok(Reply::created(json!({"test": tests::view(&t)}))
        .record(&t.id)
        .summary(format!("created genie test '{}'", t.name)))
}

async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: UpdateReq = req.data()?;
    let mut t = tests::load(&ctx.app, ctx.user_id(), ctx.principal.role, &id, true).await?;
    // Giving one kind of user turns replaces the other.
    let (turns, sim) = match (body.turns, body.simulated_user) {
        (Some(t), s) => (Some(json!(t)), s),
        (None, Some(s)) => (None, Some(s)),
        (None, None) => (t.turns.clone(), t.simulated_user.clone()),
    };
    let def = tests::check(
        body.name.as_deref().unwrap_or(&t.name),
        turns.as_ref(),
        sim.as_ref(),
        body.criteria.as_ref().unwrap_or(&t.criteria),
    )?;
    t.name = def.name;
    t.turns = def.turns;
    t.simulated_user = def.simulated_user;
    t.criteria = def.criteria;
    t.updated_at = crate::db::now();
    let t2 = t.clone();
    ctx.db()
        .write(move |c| {
            if !store::save(c, &t2)? {
                return Err(ApiError::not_found("genie test"));
            }
            Ok(())
        })
        .await?;
    Ok(Reply::ok(json!({"test": tests::view(&t)}))
        .record(&t.id)
        .summary(format!("updated genie test '{}'", t.name)))
}

async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let t = tests::load(&ctx.app, ctx.user_id(), ctx.principal.role, &id, true).await?;
    let i2 = id.clone();
    ctx.db().write(move |c| Ok(store::delete(c, &i2)?)).await?;
    Ok(Reply::deleted(&id).summary(format!("deleted genie test '{}'", t.name)))
}

async fn run(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: RunReq = req.data()?;
    let which = which(&body.version)?;
    let t = tests::load(&ctx.app, ctx.user_id(), ctx.principal.role, &id, true).await?;
    let mut runs = tests::queue(
        &ctx.app,
        ctx.user_id(),
        &t.genie_id,
        vec![t.id.clone()],
        which,
    )
    .await?;
    let run = runs.pop().unwrap_or_default();
    Ok(Reply::accepted(json!({"run": run}))
        .record(&t.id)
        .summary(format!("ran genie test '{}'", t.name)))
}

async fn run_all(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: RunAllReq = req.data()?;
    let which = which(&body.version)?;
    let g = genie(ctx, &parse_uuid(&body.genie_id, "data.genie_id")?, true).await?;
    let gid = g.id.clone();
    let ids: Vec<String> = ctx
        .db()
        .read(move |c| Ok(store::of_genie(c, &gid)?))
        .await?
        .into_iter()
        .map(|t| t.id)
        .collect();
    let runs = if ids.is_empty() {
        Vec::new()
    } else {
        tests::queue(&ctx.app, ctx.user_id(), &g.id, ids, which).await?
    };
    Ok(Reply::accepted(json!({"count": runs.len(), "runs": runs}))
        .record(&g.id)
        .summary(format!("ran every test of genie '{}'", g.name)))
}

async fn runs(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: RunsReq = req.data()?;
    let limit = body.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::validation("data.limit must be from 1 to 500"));
    }
    let (test, genie_id) = match (&req.id, body.genie_id) {
        (Some(v), _) if !v.is_null() => {
            let t = tests::load(
                &ctx.app,
                ctx.user_id(),
                ctx.principal.role,
                &req.uuid()?,
                false,
            )
            .await?;
            (Some(t.id), None)
        }
        (_, Some(g)) => {
            let g = genie(ctx, &parse_uuid(&g, "data.genie_id")?, false).await?;
            (None, Some(g.id))
        }
        _ => {
            return Err(ApiError::validation(
                "runs needs the test's id, or data.genie_id for every run of a genie",
            ));
        }
    };
    let rows = ctx
        .db()
        .read(move |c| Ok(store::runs(c, test.as_deref(), genie_id.as_deref(), limit)?))
        .await?;
    let items: Vec<Value> = rows.iter().map(tests::run_view).collect();
    Ok(Reply::ok(json!({"count": items.len(), "runs": items})))
}

/// Every `genie-tests` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "genie-tests",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(all)).data(schema::<ListReq>),
        Action::read("get", handler!(get)).id(),
        Action::write("create", handler!(create)).data(schema::<CreateReq>),
        Action::write("update", handler!(update))
            .id()
            .data(schema::<UpdateReq>),
        Action::write("delete", handler!(delete)).id(),
        Action::write("run", handler!(run))
            .id()
            .data(schema::<RunReq>),
        Action::write("run-all", handler!(run_all)).data(schema::<RunAllReq>),
        Action::read("runs", handler!(runs))
            .optional_id()
            .data(schema::<RunsReq>),
    ],
};
