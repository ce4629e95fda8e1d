//! QR codes: a saved code points at its genie's public page, so creating one gives the
//! genie a page slug if it has none yet.

use crate::db::{self, qr_codes::QrCode};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Saves a QR code for `owner_id`'s genie; the genie must be theirs. The URL is fixed at
/// creation from the configured public base.
pub async fn create(
    app: &AppState,
    owner_id: &str,
    genie_id: &str,
    label: Option<String>,
) -> ApiResult<QrCode> {
    let base = app.config.public_base();
    let (uid, genie_id, page_base) = (owner_id.to_string(), genie_id.to_string(), base.clone());
    Ok(app
        .db
        .write(move |c| {
            if !db::qr_codes::owns_genie(c, &uid, &genie_id)? {
                return Err(ApiError::agent_not_found());
            }
            let slug = db::qr_codes::ensure_page_slug(c, &genie_id)?
                .ok_or_else(ApiError::agent_not_found)?;
            let url = format!("{page_base}/g/{slug}");
            Ok(db::qr_codes::insert(
                c,
                &uid,
                &genie_id,
                label.as_deref(),
                &url,
            )?)
        })
        .await?
        .at(&base))
}
