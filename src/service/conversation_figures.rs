//! Recording one LLM turn's figures on its conversation: latency to the first token and to
//! the full answer, tokens in and out (the endpoint's `usage`), tool calls, the model, and
//! the estimated cost from the operator's price table (`--llm-prices`). The public page's
//! chat calls it for each answer; any other conversation an LLM answers in calls it too.

use crate::db::sql::Connection;
use serde_json::json;

use crate::error::{ApiError, ApiResult};
use crate::prices::Prices;
use crate::state::AppState;

/// One LLM turn as measured by its caller. A non-streaming call has `first_token_ms ==
/// total_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFigures {
    pub model: String,
    pub first_token_ms: i64,
    pub total_ms: i64,
    pub tokens_in: i64,
    pub tokens_out: i64,
    pub tool_calls: i64,
}

/// Records `f` on the conversation, in its own transaction.
pub async fn record_turn_figures(
    app: &AppState,
    conversation_id: &str,
    f: TurnFigures,
) -> ApiResult<()> {
    let (id, app2) = (conversation_id.to_string(), app.clone());
    let found = app
        .db
        .write(move |c| Ok(record_in(c, &app2.prices, &id, &f)?))
        .await?;
    if found {
        Ok(())
    } else {
        Err(ApiError::not_found("conversation"))
    }
}

/// Records `f` inside the caller's transaction (so a turn and its figures commit together);
/// returns whether the conversation exists.
pub fn record_in(
    c: &Connection,
    prices: &Prices,
    conversation_id: &str,
    f: &TurnFigures,
) -> rusqlite::Result<bool> {
    let cost = prices.cost_micros(&f.model, f.tokens_in, f.tokens_out);
    let turn = json!({
        "model": f.model,
        "first_token_ms": f.first_token_ms.max(0),
        "total_ms": f.total_ms.max(0),
        "tokens_in": f.tokens_in.max(0),
        "tokens_out": f.tokens_out.max(0),
        "tool_calls": f.tool_calls.max(0),
        "cost": cost.map(|m| m as f64 / 1e6),
        "currency": cost.map(|_| prices.currency.clone()),
    });
    crate::db::conversation_figures::record_turn(
        c,
        conversation_id,
        &turn,
        f.tokens_in.max(0),
        f.tokens_out.max(0),
        f.tool_calls.max(0),
        cost,
    )
}
