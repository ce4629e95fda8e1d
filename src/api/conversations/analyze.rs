//! `analyze`: summary, intent, sentiment and contact details, and the conversation's lead.

use serde::Deserialize;
use serde_json::json;

use crate::api::{ActionRequest, Ctx, Reply};
use crate::error::ApiResult;
use crate::service::conversations as service;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "ConversationAnalyze")]
pub(crate) struct AnalyzeReq {
    #[serde(rename = "createLead", alias = "create_lead")]
    create_lead: Option<bool>,
}

pub(super) async fn analyze(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let q: AnalyzeReq = req.data()?;
    let by = service::By::Caller(ctx.principal.clone());
    let a = service::analyze(&ctx.app, by, &id, q.create_lead.unwrap_or(true)).await?;
    let conv = a.conversation;
    Ok(Reply::ok(json!({
        "conversation": conv,
        "analysis": conv.analysis,
        "method": a.method,
        "lead": a.lead,
        "lead_action": a.lead_action,
    }))
    .record(conv.id.clone())
    .summary(format!("analyzed a conversation ({})", a.method)))
}
