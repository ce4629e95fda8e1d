//! Per-conversation figures: each LLM turn appended to `conversations.llm_turns`, its sums
//! kept in the conversation's columns, and the `figures` object `get` shows.

use crate::db::sql::{Connection, Row, params};
use serde_json::{Value, json};

/// Appends one LLM turn (already shaped as JSON) and adds it to the sums, in the caller's
/// transaction. `cost_micros` `None`: the model had no price. Returns whether the
/// conversation exists.
pub fn record_turn(
    c: &Connection,
    conversation_id: &str,
    turn: &Value,
    tokens_in: i64,
    tokens_out: i64,
    tool_calls: i64,
    cost_micros: Option<i64>,
) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE conversations SET llm_turns = json_insert(llm_turns, '$[#]', json(?2)),
             tokens_in = tokens_in + ?3, tokens_out = tokens_out + ?4,
             tool_calls = tool_calls + ?5, cost_micros = cost_micros + ?6,
             unpriced_turns = unpriced_turns + ?7
         WHERE id = ?1",
        params![
            conversation_id,
            turn.to_string(),
            tokens_in,
            tokens_out,
            tool_calls,
            cost_micros.unwrap_or(0),
            i64::from(cost_micros.is_none())
        ],
    )?;
    Ok(n == 1)
}

/// The columns [`figures`] reads, after the ones it is given.
pub const COLS: &str =
    "c.llm_turns, c.tokens_in, c.tokens_out, c.tool_calls, c.cost_micros, c.unpriced_turns";

/// The `figures` of a conversation from the row's [`COLS`] starting at `at`: turns,
/// duration, the LLM's per-turn latency (first token and full), tokens, tool calls and the
/// estimated cost (null when no turn was priced).
pub fn figures(r: &Row, at: usize, turns: i64, duration_seconds: i64) -> rusqlite::Result<Value> {
    let per_turn: Vec<Value> = serde_json::from_str(&r.get::<_, String>(at)?).unwrap_or_default();
    let (tokens_in, tokens_out, tool_calls, cost, unpriced): (i64, i64, i64, i64, i64) = (
        r.get(at + 1)?,
        r.get(at + 2)?,
        r.get(at + 3)?,
        r.get(at + 4)?,
        r.get(at + 5)?,
    );
    let stat = |key: &str| {
        let v: Vec<i64> = per_turn.iter().filter_map(|t| t[key].as_i64()).collect();
        if v.is_empty() {
            return Value::Null;
        }
        let avg = v.iter().sum::<i64>() as f64 / v.len() as f64;
        json!({"avg": (avg * 10.0).round() / 10.0, "max": v.iter().max()})
    };
    let priced = per_turn.len() as i64 - unpriced;
    let currency = per_turn
        .iter()
        .rev()
        .find_map(|t| t["currency"].as_str())
        .unwrap_or("USD");
    Ok(json!({
        "turns": turns,
        "duration_seconds": duration_seconds,
        "llm": {
            "calls": per_turn.len(),
            "first_token_ms": stat("first_token_ms"),
            "total_ms": stat("total_ms"),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "tool_calls": tool_calls,
            "per_turn": per_turn,
        },
        "estimated_cost": if priced > 0 {
            json!({"amount": cost as f64 / 1e6, "currency": currency,
                   "priced_turns": priced, "unpriced_turns": unpriced})
        } else {
            Value::Null
        },
    }))
}
