//! Genie versions: `versions`, `get-version`, `diff`, `rollback`, `publish`,
//! `discard-draft`, `set-traffic`, `version-stats`. The rules are
//! `service::genie_versions`'; a version is read by whoever may read the genie and changed
//! by whoever may manage it.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{load_manageable, reload, renderer, role};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::db::genies as repo;
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::service::genie_versions::{self as versions, Which};
use crate::service::{genie_tests, genies};

/// The genie when the caller may read it (owner, admin, assignee, team member).
async fn load_readable(ctx: &Ctx, id: &str) -> ApiResult<repo::GenieRow> {
    let (uid, role, id) = (ctx.user_id().to_string(), role(ctx), id.to_string());
    ctx.db()
        .read(move |c| {
            repo::get_readable(c, &uid, role, &id)?.ok_or_else(ApiError::agent_not_found)
        })
        .await
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "GenieVersionRequest")]
pub(crate) struct VersionReq {
    /// A version number, or `"draft"`.
    #[schemars(with = "serde_json::Value")]
    version: Value,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "GenieDiffRequest")]
pub(crate) struct DiffReq {
    /// A version number, or `"draft"`.
    #[schemars(with = "serde_json::Value")]
    from: Value,
    /// A version number, or `"draft"`.
    #[schemars(with = "serde_json::Value")]
    to: Value,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieRollbackRequest")]
pub(crate) struct RollbackReq {
    version: i64,
    note: Option<String>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GeniePublishRequest")]
pub(crate) struct PublishReq {
    note: Option<String>,
    #[serde(default)]
    require_tests: bool,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "TrafficShare")]
pub(crate) struct Share {
    version: i64,
    weight: i64,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieTrafficRequest")]
pub(crate) struct TrafficReq {
    traffic: Vec<Share>,
    /// Also split the voice platform's own traffic (ElevenLabs only): turns agent
    /// versioning on there, which ElevenLabs cannot turn off again.
    #[serde(default)]
    mirror_at_provider: bool,
}

pub(super) async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    load_readable(ctx, &id).await?;
    Ok(Reply::ok(versions::list(&ctx.app, &id).await?))
}

pub(super) async fn get_version(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: VersionReq = req.data()?;
    let which = Which::parse(&body.version, "data.version")?;
    load_readable(ctx, &id).await?;
    let v = ctx
        .db()
        .read(move |c| versions::read(c, &id, which))
        .await?;
    Ok(Reply::ok(json!({"version": v})))
}

pub(super) async fn diff(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: DiffReq = req.data()?;
    let from = Which::parse(&body.from, "data.from")?;
    let to = Which::parse(&body.to, "data.to")?;
    load_readable(ctx, &id).await?;
    let changes = ctx
        .db()
        .read(move |c| {
            let a = versions::config(c, &id, from)?;
            let b = versions::config(c, &id, to)?;
            Ok(versions::diff(&a, &b))
        })
        .await?;
    Ok(Reply::ok(
        json!({"from": from.label(), "to": to.label(), "changes": changes}),
    ))
}

pub(super) async fn rollback(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: RollbackReq = req.data()?;
    if body.version < 1 {
        return Err(ApiError::validation(
            "data.version must be a version number (1, 2, ...)",
        ));
    }
    load_manageable(ctx, &id).await?;
    let (gid, n) = (id.clone(), body.version);
    let config = ctx
        .db()
        .read(move |c| versions::config(c, &gid, Which::Number(n)))
        .await?;
    let note = body
        .note
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| format!("rollback to version {n}"));
    let mut changes = genies::Changes::config(config, note);
    changes.render = Some(renderer(&ctx.app));
    let (gid, by) = (id.clone(), ctx.user_id().to_string());
    changes.announce = Some(Box::new(move |g, version| {
        vec![Event::new(
            "genie.rolled_back",
            &g.user_id,
            json!({"genie_id": gid, "to_version": n, "version": version, "by": by}),
        )]
    }));
    let applied = genies::apply(&ctx.app, ctx.user_id(), &id, changes).await?;
    let genie = match applied.rendered {
        Some(genie) => genie,
        None => reload(&ctx.app, &id, false).await?,
    };
    Ok(
        Reply::ok(json!({"genie": genie, "version": applied.version}))
            .record(&id)
            .summary(format!(
                "rolled genie '{}' back to version {n} (now version {})",
                applied.row.name,
                applied.version.unwrap_or_default()
            )),
    )
}

pub(super) async fn publish(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: PublishReq = req.data()?;
    load_manageable(ctx, &id).await?;
    let gid = id.clone();
    let draft = ctx
        .db()
        .read(move |c| {
            versions::config(c, &gid, Which::Draft).map_err(|e| {
                if e.is(crate::error::Kind::NotFound) {
                    ApiError::conflict("this genie has no draft to publish")
                } else {
                    e
                }
            })
        })
        .await?;
    if body.require_tests {
        let failed = genie_tests::run_for_publish(&ctx.app, ctx.user_id(), &id, &draft).await?;
        if !failed.is_empty() {
            return Err(ApiError::conflict(format!(
                "the draft fails these tests, so it was not published: {}",
                failed.join(", ")
            )));
        }
    }
    let note = body
        .note
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| "published the draft".into());
    // The draft carries no documents of its own: the live set stays.
    let mut changes = genies::Changes::config(draft, note);
    changes.documents = None;
    changes.always_record = false;
    changes.clear_draft = true;
    changes.render = Some(renderer(&ctx.app));
    let (gid, by) = (id.clone(), ctx.user_id().to_string());
    changes.announce = Some(Box::new(move |g, version| {
        vec![Event::new(
            "genie.version_published",
            &g.user_id,
            json!({"genie_id": gid, "version": version, "by": by}),
        )]
    }));
    let applied = genies::apply(&ctx.app, ctx.user_id(), &id, changes).await?;
    let genie = match applied.rendered {
        Some(genie) => genie,
        None => reload(&ctx.app, &id, false).await?,
    };
    Ok(
        Reply::ok(json!({"genie": genie, "version": applied.version}))
            .record(&id)
            .summary(format!(
                "published the draft of genie '{}' as version {}",
                applied.row.name,
                applied
                    .version
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "(unchanged)".into())
            )),
    )
}

pub(super) async fn discard_draft(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let g = load_manageable(ctx, &id).await?;
    versions::discard(&ctx.app, &id).await?;
    Ok(Reply::ok(json!({"id": id, "discarded": true}))
        .record(&id)
        .summary(format!("discarded the draft of genie '{}'", g.name)))
}

pub(super) async fn set_traffic(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: TrafficReq = req.data()?;
    let g = load_manageable(ctx, &id).await?;
    let shares: Vec<(i64, i64)> = body.traffic.iter().map(|s| (s.version, s.weight)).collect();
    let out = versions::set_traffic(&ctx.app, &id, shares, body.mirror_at_provider).await?;
    Ok(Reply::ok(out)
        .record(&id)
        .summary(format!("set the traffic split of genie '{}'", g.name)))
}

pub(super) async fn stats(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    load_readable(ctx, &id).await?;
    Ok(Reply::ok(versions::stats(&ctx.app, &id).await?))
}
