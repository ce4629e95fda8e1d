//! Page cursors (`data.cursor` in, `nextCursor` out): opaque to clients, base64url of a tag
//! naming the listing and its version (`g1`, `l1`, `c1`) and the listing order's key of a
//! page's last item. One codec, so every listing refuses a foreign cursor with the same 400.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::{ApiError, ApiResult};

/// The 400 for text that is not a cursor this listing made.
pub fn bad() -> ApiError {
    ApiError::validation("data.cursor is not a cursor returned by this service")
}

/// A cursor of the listing `tag` whose order's key is `key`.
pub fn encode(tag: &str, key: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{tag}:{key}"))
}

/// The key of a cursor [`encode`] made for `tag`.
pub fn decode(c: &str, tag: &str) -> ApiResult<String> {
    let raw = URL_SAFE_NO_PAD.decode(c).map_err(|_| bad())?;
    let s = String::from_utf8(raw).map_err(|_| bad())?;
    s.strip_prefix(tag)
        .and_then(|r| r.strip_prefix(':'))
        .map(str::to_string)
        .ok_or_else(bad)
}

/// A cursor of a listing ordered by a time and then an id.
pub fn encode_at(tag: &str, id: impl std::fmt::Display, at: &str) -> String {
    encode(tag, &format!("{id}:{at}"))
}

/// The `(id, time)` of a cursor [`encode_at`] made for `tag`; the time is checked to be
/// RFC 3339, the id is the caller's to parse.
pub fn decode_at(c: &str, tag: &str) -> ApiResult<(String, String)> {
    let key = decode(c, tag)?;
    let (id, at) = key.split_once(':').ok_or_else(bad)?;
    chrono::DateTime::parse_from_rfc3339(at).map_err(|_| bad())?;
    Ok((id.to_string(), at.to_string()))
}
