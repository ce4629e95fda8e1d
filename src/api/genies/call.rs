//! `call`: an outbound phone call from the genie's number through the genie's provider, or
//! simulated on the local provider (`service::calls`). A lead marked `do_not_call` is never
//! called, named or not: the number is checked against every lead of the genie's owner.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::json;

use super::load_manageable;
use crate::api::{ActionRequest, Ctx, Reply};
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "GenieCall")]
pub(crate) struct CallReq {
    /// The callee in E.164 (`+14155550123`).
    to: String,
    /// The lead being called; its activity log records the call.
    #[serde(alias = "lead_id")]
    lead_id: Option<i64>,
    /// Values for `{{name}}` placeholders in the prompt and first message.
    #[serde(default)]
    variables: BTreeMap<String, String>,
}

/// `+` and 7 to 15 digits, the first not 0 (ITU-T E.164).
pub fn is_e164(s: &str) -> bool {
    let digits = s.strip_prefix('+').unwrap_or("");
    (7..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0')
}

pub(super) async fn call(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: CallReq = req.data()?;
    if !is_e164(&body.to) {
        return Err(ApiError::validation(
            "data.to must be an E.164 phone number such as +14155550123",
        ));
    }
    if body.variables.len() > 50
        || body
            .variables
            .iter()
            .any(|(k, v)| k.is_empty() || k.len() > 100 || v.len() > 2000)
    {
        return Err(ApiError::validation(
            "data.variables: at most 50 names of 1-100 characters with values of at most 2000",
        ));
    }
    let genie = load_manageable(ctx, &id).await?;
    let call = crate::service::calls::call(
        &ctx.app,
        &genie,
        ctx.user_id(),
        crate::service::calls::CallInput {
            to: body.to.clone(),
            lead_id: body.lead_id,
            variables: body.variables,
        },
    )
    .await?;
    Ok(Reply::ok(json!({ "call": call }))
        .record(&id)
        .summary(format!(
            "started a call from genie '{}' to {}",
            genie.name, body.to
        )))
}

#[cfg(test)]
mod tests {
    #[test]
    fn e164() {
        assert!(super::is_e164("+14155550123"));
        assert!(!super::is_e164("14155550123"));
        assert!(!super::is_e164("+0123456789"));
        assert!(!super::is_e164("+1415-555"));
        assert!(!super::is_e164("+1234567890123456"));
    }
}
