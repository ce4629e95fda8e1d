//! Checks of single genie fields, shared by the request decoding (`input`) and the settings
//! mapping (`settings`); each names the member it refuses.

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

pub const DEFAULT_LLM: &str = "gemini-3-flash-preview";
const TURN_MODES: &[&str] = &["silence", "turn"];

pub(super) fn range(field: &str, v: f64, lo: f64, hi: f64) -> ApiResult<f64> {
    if !v.is_finite() || v < lo || v > hi {
        return Err(ApiError::validation(format!(
            "{field} must be between {lo} and {hi}"
        )));
    }
    Ok(v)
}

pub(super) fn positive_i(field: &str, v: i64) -> ApiResult<i64> {
    if v <= 0 {
        return Err(ApiError::validation(format!(
            "{field} must be a positive integer"
        )));
    }
    Ok(v)
}

pub(super) fn positive_f(field: &str, v: f64) -> ApiResult<f64> {
    if !v.is_finite() || v <= 0.0 {
        return Err(ApiError::validation(format!(
            "{field} must be a positive number"
        )));
    }
    Ok(v)
}

pub(super) fn non_empty(field: &str, v: &str) -> ApiResult<String> {
    let t = v.trim();
    if t.is_empty() {
        return Err(ApiError::validation(format!("{field} must not be empty")));
    }
    Ok(t.to_string())
}

pub(super) fn turn_mode(field: &str, v: &str) -> ApiResult<String> {
    if !TURN_MODES.contains(&v) {
        return Err(ApiError::validation(format!(
            "{field} must be one of: {}",
            TURN_MODES.join(", ")
        )));
    }
    Ok(v.to_string())
}

pub(super) fn object(field: &str, v: &Value) -> ApiResult<()> {
    if !v.is_object() {
        return Err(ApiError::validation(format!("{field} must be an object")));
    }
    Ok(())
}
