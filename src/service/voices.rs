//! Voice discovery: the active provider's voices merged with the shipped catalog
//! (`assets/voice_catalog.json`). Voice ids are provider ids (strings), not UUIDs.

use std::sync::LazyLock;

use crate::state::AppState;
use crate::voice::Voice;

static CATALOG: LazyLock<Vec<Voice>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../assets/voice_catalog.json"))
        .expect("assets/voice_catalog.json is valid")
});

/// The shipped catalog.
pub fn catalog() -> &'static [Voice] {
    &CATALOG
}

/// Provider voices first, then catalog voices the provider does not already list, each with
/// where it came from (`provider` or `catalog`). A provider failure falls back to the catalog
/// alone (logged), so discovery keeps working.
pub async fn all_voices(app: &AppState) -> Vec<(Voice, &'static str)> {
    let provider = match app.voice.default().list_voices().await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "voice provider could not list voices; showing the catalog only");
            vec![]
        }
    };
    let mut out: Vec<(Voice, &'static str)> =
        provider.into_iter().map(|v| (v, "provider")).collect();
    for v in catalog() {
        if !out.iter().any(|(p, _)| p.voice_id == v.voice_id) {
            out.push((v.clone(), "catalog"));
        }
    }
    out
}

pub async fn find_voice(app: &AppState, voice_id: &str) -> Option<(Voice, &'static str)> {
    all_voices(app)
        .await
        .into_iter()
        .find(|(v, _)| v.voice_id == voice_id)
}
