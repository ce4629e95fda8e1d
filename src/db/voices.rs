//! Voice favorites and voice usage by a user's genies. Voices themselves come from the
//! provider and the shipped catalog, not from the database.

use crate::db::sql::{Connection, params};
use serde::Serialize;

use super::now;

pub fn favorite(c: &Connection, user_id: &str, voice_id: &str) -> rusqlite::Result<String> {
    c.execute(
        "INSERT INTO voice_favorites (user_id, voice_id, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (user_id, voice_id) DO NOTHING",
        params![user_id, voice_id, now()],
    )?;
    c.query_row(
        "SELECT created_at FROM voice_favorites WHERE user_id = ?1 AND voice_id = ?2",
        [user_id, voice_id],
        |r| r.get(0),
    )
}

pub fn unfavorite(c: &Connection, user_id: &str, voice_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM voice_favorites WHERE user_id = ?1 AND voice_id = ?2",
        [user_id, voice_id],
    )? == 1)
}

/// `(voice_id, favorited_at)`, newest first.
pub fn favorites(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<(String, String)>> {
    let mut st = c.prepare_cached(
        "SELECT voice_id, created_at FROM voice_favorites WHERE user_id = ?1 ORDER BY created_at DESC, voice_id",
    )?;
    st.query_map([user_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct GenieRef {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VoiceUsage {
    pub voice_id: String,
    pub genie_count: i64,
    pub genies: Vec<GenieRef>,
    pub conversation_count: i64,
    /// The start of the latest conversation of any of these genies.
    pub last_used_at: Option<String>,
}

/// How the user's genies use voices; one voice when `voice_id` is given.
pub fn usage(
    c: &Connection,
    user_id: &str,
    voice_id: Option<&str>,
) -> rusqlite::Result<Vec<VoiceUsage>> {
    let mut st = c.prepare_cached(
        "SELECT g.voice_id, g.id, g.name,
                (SELECT COUNT(*) FROM conversations v WHERE v.genie_id = g.id),
                (SELECT MAX(v.started_at) FROM conversations v WHERE v.genie_id = g.id)
         FROM genies g
         WHERE g.user_id = ?1 AND g.voice_id IS NOT NULL AND g.voice_id <> ''
           AND (?2 IS NULL OR g.voice_id = ?2)
         ORDER BY g.voice_id, g.name_lower, g.id",
    )?;
    let rows = st.query_map(params![user_id, voice_id], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, Option<String>>(4)?,
        ))
    })?;
    let mut out: Vec<VoiceUsage> = Vec::new();
    for row in rows {
        let (vid, gid, gname, convs, last) = row?;
        if out.last().is_none_or(|u| u.voice_id != vid) {
            out.push(VoiceUsage {
                voice_id: vid,
                genie_count: 0,
                genies: vec![],
                conversation_count: 0,
                last_used_at: None,
            });
        }
        let u = out.last_mut().expect("pushed above");
        u.genie_count += 1;
        u.genies.push(GenieRef {
            id: gid,
            name: gname,
        });
        u.conversation_count += convs;
        if last.is_some() && last > u.last_used_at {
            u.last_used_at = last;
        }
    }
    Ok(out)
}
