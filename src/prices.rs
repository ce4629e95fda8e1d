//! The operator's LLM price table (`--llm-prices FILE`), from which each conversation's
//! estimated cost is computed. No price is built in: prices change, and a stale built-in
//! figure would be wrong without anyone noticing. A model the table does not name has no
//! cost (the conversation's figures say how many turns were not priced).
//!
//! The file is JSON:
//!
//! ```json
//! {"currency": "USD",
//!  "models": {"gpt-4o-mini": {"input_per_million": 0.15, "output_per_million": 0.60}}}
//! ```
//!
//! `currency` (default `USD`) is a label only. Prices are per million tokens, at least 0.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    pub input_per_million: f64,
    pub output_per_million: f64,
}

#[derive(Debug, Clone, Default)]
pub struct Prices {
    pub currency: String,
    models: BTreeMap<String, ModelPrice>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    currency: Option<String>,
    models: BTreeMap<String, ModelPrice>,
}

impl Prices {
    /// Reads and checks the price file; the error names the file and the problem.
    pub fn load(path: &Path) -> anyhow::Result<Prices> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--llm-prices {}: cannot read it: {e}", path.display()))?;
        Prices::parse(&text).map_err(|e| anyhow::anyhow!("--llm-prices {}: {e}", path.display()))
    }

    /// Parses the JSON of a price file (see the module's documentation).
    pub fn parse(text: &str) -> Result<Prices, String> {
        let file: File = serde_json::from_str(text).map_err(|e| {
            format!(
                "not a price table ({e}); expected {{\"currency\": \"USD\", \"models\": \
                 {{\"<model>\": {{\"input_per_million\": <number>, \"output_per_million\": <number>}}}}}}"
            )
        })?;
        if file.models.is_empty() {
            return Err("models is empty: name at least one model".into());
        }
        for (name, p) in &file.models {
            if name.trim().is_empty() {
                return Err("a model name is empty".into());
            }
            for (field, v) in [
                ("input_per_million", p.input_per_million),
                ("output_per_million", p.output_per_million),
            ] {
                if !v.is_finite() || v < 0.0 {
                    return Err(format!(
                        "models.{name}.{field} must be a number of at least 0, not {v}"
                    ));
                }
            }
        }
        let currency = file.currency.unwrap_or_else(|| "USD".into());
        let currency = currency.trim().to_string();
        if currency.is_empty() || currency.len() > 10 {
            return Err("currency must be 1 to 10 characters, e.g. \"USD\"".into());
        }
        Ok(Prices {
            currency,
            models: file.models,
        })
    }

    /// The models the table names.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// The cost of one call in millionths of the currency, or `None` when the model has no
    /// price. Tokens × price per million tokens / 1e6 currency = tokens × price millionths.
    pub fn cost_micros(&self, model: &str, tokens_in: i64, tokens_out: i64) -> Option<i64> {
        let p = self.models.get(model)?;
        let micros = tokens_in.max(0) as f64 * p.input_per_million
            + tokens_out.max(0) as f64 * p.output_per_million;
        Some(micros.round() as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_per_million_tokens() {
        let p = Prices::parse(
            r#"{"models": {"m": {"input_per_million": 0.15, "output_per_million": 0.6}}}"#,
        )
        .unwrap();
        assert_eq!(p.currency, "USD");
        // 1000 × 0.15 + 500 × 0.6 = 450 millionths.
        assert_eq!(p.cost_micros("m", 1000, 500), Some(450));
        assert_eq!(p.cost_micros("other", 1000, 500), None);
    }

    #[test]
    fn bad_tables_say_what_is_wrong() {
        let err = |t: &str| Prices::parse(t).unwrap_err();
        assert!(err("{").contains("not a price table"));
        assert!(err(r#"{"models": {}}"#).contains("models is empty"));
        assert!(
            err(r#"{"models": {"m": {"input_per_million": -1, "output_per_million": 1}}}"#)
                .contains("models.m.input_per_million must be a number of at least 0")
        );
        assert!(
            err(r#"{"models": {"m": {"input_per_million": 1}}}"#)
                .contains("missing field `output_per_million`")
        );
        assert!(
            err(r#"{"models": {"m": {"input": 1, "output_per_million": 1}}}"#)
                .contains("unknown field `input`")
        );
    }
}
