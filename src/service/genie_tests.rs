//! Test conversations of a genie (placeholder until the resource lands).

use serde_json::Value;

use crate::error::ApiResult;
use crate::state::AppState;

/// Runs every test of the genie against `config`; returns the names of those that failed.
pub async fn run_for_publish(
    _app: &AppState,
    _by: &str,
    _genie_id: &str,
    _config: &Value,
) -> ApiResult<Vec<String>> {
    Ok(Vec::new())
}
