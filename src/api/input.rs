//! Decoding helpers every resource's requests share: typed `data`, ids, paging, search
//! terms, date ranges, `null` versus absent members, and `sort` maps. Each rule lives here
//! once, so a member is checked the same way in every resource.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::db;
use crate::error::{ApiError, ApiResult};

/// Decodes any JSON value into `T`, naming the failing member under `root`.
pub fn parse_value<T: DeserializeOwned>(v: &Value, root: &str) -> ApiResult<T> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            root.to_string()
        } else {
            format!("{root}.{path}")
        };
        ApiError::validation(format!("{at}: {}", e.inner()))
    })
}

/// Refuses a request whose JSON holds a NUL (U+0000) in any string or member name, naming
/// the member (`root` and the path below it). PostgreSQL's text cannot hold NUL, and no
/// value the API takes has a use for one, so both engines answer the same 400 rather than
/// SQLite storing what PostgreSQL would fail on.
pub fn refuse_nul(v: &Value, root: &str) -> ApiResult<()> {
    fn walk(v: &Value, at: &mut String) -> Result<(), String> {
        let refused = |at: &str| format!("{at} must not contain NUL (U+0000)");
        match v {
            Value::String(s) if s.contains('\0') => Err(refused(at)),
            Value::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| {
                let len = at.len();
                at.push_str(&format!("[{i}]"));
                walk(item, at)?;
                at.truncate(len);
                Ok(())
            }),
            Value::Object(m) => m.iter().try_for_each(|(k, item)| {
                let len = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(&k.replace('\0', "\\0"));
                if k.contains('\0') {
                    return Err(refused(at));
                }
                walk(item, at)?;
                at.truncate(len);
                Ok(())
            }),
            _ => Ok(()),
        }
    }
    let mut at = root.to_string();
    walk(v, &mut at).map_err(ApiError::validation)
}

/// Removes every NUL (U+0000) from the strings of `v`: for text from other services (the
/// voice platforms' webhooks), which is not the caller's to correct, but which PostgreSQL's
/// text could not store (see [`refuse_nul`]).
pub fn strip_nul(v: &mut Value) {
    match v {
        Value::String(s) if s.contains('\0') => s.retain(|c| c != '\0'),
        Value::Array(items) => items.iter_mut().for_each(strip_nul),
        Value::Object(m) => {
            if m.keys().any(|k| k.contains('\0')) {
                *m = std::mem::take(m)
                    .into_iter()
                    .map(|(k, v)| (k.replace('\0', ""), v))
                    .collect();
            }
            m.values_mut().for_each(strip_nul);
        }
        _ => {}
    }
}

pub fn parse_uuid(s: &str, field: &str) -> ApiResult<String> {
    uuid::Uuid::parse_str(s.trim())
        .map(|u| u.to_string())
        .map_err(|_| ApiError::validation(format!("{field} must be a UUID")))
}

/// Longest free-text search term accepted (characters); longer terms are a client bug or an
/// attempt to make the database work hard.
pub const SEARCH_TERM_MAX: usize = 200;

/// A free-text search term, matched as literal text everywhere (FTS5 syntax, LIKE wildcards
/// and quotes have no special meaning): trimmed, empty means no filter. Control characters
/// (NUL included) cannot be typed into a search box and make FTS5 fail, so they are refused,
/// as are terms over `max` characters; the error names `field`.
pub fn search_term(v: Option<String>, field: &str, max: usize) -> ApiResult<Option<String>> {
    let Some(t) = v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if t.chars().any(char::is_control) {
        return Err(ApiError::validation(format!(
            "{field} must not contain control characters"
        )));
    }
    if t.chars().count() > max {
        return Err(ApiError::validation(format!(
            "{field} must be at most {max} characters"
        )));
    }
    Ok(Some(t))
}

/// Validates `limit`/`offset`: `limit` in 1..=max (default `default`), `offset` ≥ 0.
pub fn page(
    limit: Option<i64>,
    offset: Option<i64>,
    default: i64,
    max: i64,
) -> ApiResult<(i64, i64)> {
    let limit = limit.unwrap_or(default);
    if !(1..=max).contains(&limit) {
        return Err(ApiError::validation(format!(
            "limit must be between 1 and {max}"
        )));
    }
    let offset = offset.unwrap_or(0);
    if offset < 0 {
        return Err(ApiError::validation("offset must be 0 or more"));
    }
    Ok((limit, offset))
}

/// The lower time bound a `dateRange` filter (`7d`, `30d`, `90d`, `all`) stands for;
/// `None` for `all` or no filter. `field` names the member in the error.
pub fn date_range_since(v: Option<&str>, field: &str) -> ApiResult<Option<String>> {
    let days = match v {
        None | Some("all") => return Ok(None),
        Some("7d") => 7,
        Some("30d") => 30,
        Some("90d") => 90,
        Some(other) => {
            return Err(ApiError::validation(format!(
                "{field} must be one of 7d, 30d, 90d, all (got '{other}')"
            )));
        }
    };
    Ok(Some(db::fmt_time(
        chrono::Utc::now() - chrono::Duration::days(days),
    )))
}

/// `data.sort`: `{uuid: position}` with zero-based integer positions.
pub fn parse_sort(data: &Value) -> ApiResult<Vec<(String, i64)>> {
    let Some(sort) = data.get("sort") else {
        return Err(ApiError::validation("data.sort is required"));
    };
    let Some(m) = sort.as_object() else {
        return Err(ApiError::validation(
            "data.sort must be an object of id: position",
        ));
    };
    let mut out = Vec::with_capacity(m.len());
    for (k, v) in m {
        let id = parse_uuid(k, &format!("data.sort key '{k}'"))?;
        let pos = v.as_i64().filter(|p| *p >= 0).ok_or_else(|| {
            ApiError::validation(format!(
                "data.sort.{k} must be a zero-based integer position"
            ))
        })?;
        out.push((id, pos));
    }
    Ok(out)
}

/// `null` versus absent: `Some(None)` for an explicit `null`, `None` when the member is
/// absent (with `#[serde(default, deserialize_with = "double_option::deserialize")]`).
pub mod double_option {
    use serde::{Deserialize, Deserializer};
    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}
