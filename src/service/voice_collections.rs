//! Voice collections: a user's named, ordered lists of voices. A voice must be one the
//! provider or the catalog offers when it is added; a collection's voices are reordered
//! only as a whole.

use crate::db::{self, voice_collections::Collection};
use crate::error::{ApiError, ApiResult};
use crate::service::voices::all_voices;
use crate::state::AppState;

/// A voice id a collection may hold: 1 to 200 characters, offered by the provider or the
/// catalog.
pub async fn check_voice(app: &AppState, id: &str) -> ApiResult<()> {
    if id.trim().is_empty() || id.chars().count() > 200 {
        return Err(ApiError::validation(
            "data.voice_id must be 1 to 200 characters",
        ));
    }
    if all_voices(app).await.iter().any(|(v, _)| v.voice_id == id) {
        Ok(())
    } else {
        Err(ApiError::not_found("voice"))
    }
}

/// Adds a known voice to the end of `owner_id`'s collection (no change if it is there).
pub async fn add_voice(
    app: &AppState,
    owner_id: &str,
    id: &str,
    voice_id: &str,
) -> ApiResult<Collection> {
    check_voice(app, voice_id).await?;
    change(app, owner_id, id, voice_id, true).await
}

pub async fn remove_voice(
    app: &AppState,
    owner_id: &str,
    id: &str,
    voice_id: &str,
) -> ApiResult<Collection> {
    change(app, owner_id, id, voice_id, false).await
}

async fn change(
    app: &AppState,
    owner_id: &str,
    id: &str,
    voice_id: &str,
    adding: bool,
) -> ApiResult<Collection> {
    let (uid, id, vid) = (owner_id.to_string(), id.to_string(), voice_id.to_string());
    app.db
        .write(move |c| {
            db::voice_collections::get(c, &uid, &id)?
                .ok_or_else(|| ApiError::not_found("voice collection"))?;
            if adding {
                db::voice_collections::add_voice(c, &id, &vid)?;
            } else if !db::voice_collections::remove_voice(c, &id, &vid)? {
                return Err(ApiError::not_found("voice in this collection"));
            }
            db::voice_collections::touch(c, &id)?;
            Ok(db::voice_collections::get(c, &uid, &id)?.expect("checked above"))
        })
        .await
}

/// Puts a collection's voices in `order`, which must list each of them exactly once.
pub async fn reorder_voices(
    app: &AppState,
    owner_id: &str,
    id: &str,
    order: Vec<String>,
) -> ApiResult<Collection> {
    let (uid, id) = (owner_id.to_string(), id.to_string());
    app.db
        .write(move |c| {
            let col = db::voice_collections::get(c, &uid, &id)?
                .ok_or_else(|| ApiError::not_found("voice collection"))?;
            let mut a = order.clone();
            let mut b = col.voice_ids.clone();
            a.sort();
            b.sort();
            if a != b {
                return Err(ApiError::validation(
                    "data.voice_ids must list every voice of the collection exactly once",
                ));
            }
            db::voice_collections::set_voice_order(c, &id, &order)?;
            db::voice_collections::touch(c, &id)?;
            Ok(db::voice_collections::get(c, &uid, &id)?.expect("checked above"))
        })
        .await
}

/// Sets the position of each of `owner_id`'s collections named; all or none (one unknown id
/// undoes the rest).
pub async fn sort(app: &AppState, owner_id: &str, items: Vec<(String, i64)>) -> ApiResult<()> {
    let uid = owner_id.to_string();
    app.db
        .write(move |c| {
            for (id, pos) in &items {
                if !db::voice_collections::set_sort_order(c, &uid, id, *pos)? {
                    return Err(ApiError::not_found("voice collection"));
                }
            }
            Ok(())
        })
        .await
}
