//! `genie_providers`: the voice platform each genie lives in and its provider state
//! (`in_sync`, `pending`, `failed` with the reason).

use crate::db::sql::{Connection, OptionalExtension};

#[derive(Debug, Clone, PartialEq)]
pub struct GenieProvider {
    /// `None` for a genie made before providers could be chosen: the service's default.
    pub provider: Option<String>,
    pub state: String,
    pub error: Option<String>,
}

pub fn get(c: &Connection, genie_id: &str) -> rusqlite::Result<GenieProvider> {
    Ok(
        c.prepare_cached("SELECT provider, state, error FROM genie_providers WHERE genie_id = ?1")?
            .query_row([genie_id], |r| {
                Ok(GenieProvider {
                    provider: Some(r.get(0)?),
                    state: r.get(1)?,
                    error: r.get(2)?,
                })
            })
            .optional()?
            .unwrap_or(GenieProvider {
                provider: None,
                state: "in_sync".into(),
                error: None,
            }),
    )
}

/// Records the genie's provider (at creation), in sync.
pub fn set_provider(
    c: &Connection,
    genie_id: &str,
    provider: &str,
    now: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO genie_providers (genie_id, provider, state, error, updated_at) VALUES (?1, ?2, 'in_sync', NULL, ?3)
         ON CONFLICT(genie_id) DO UPDATE SET provider = excluded.provider, updated_at = excluded.updated_at",
        [genie_id, provider, now],
    )?;
    Ok(())
}

/// Records the provider state of a genie that has a provider row; `default` names the
/// provider of a genie without one. A genie deleted meanwhile is left alone.
pub fn set_state(
    c: &Connection,
    genie_id: &str,
    default: &str,
    state: &str,
    error: Option<&str>,
    now: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO genie_providers (genie_id, provider, state, error, updated_at)
         SELECT id, ?2, ?3, ?4, ?5 FROM genies WHERE id = ?1
         ON CONFLICT(genie_id) DO UPDATE SET state = excluded.state, error = excluded.error,
             updated_at = excluded.updated_at",
        crate::db::sql::params![genie_id, default, state, error, now],
    )?;
    Ok(())
}

/// Whether any genie has no provider row (what [`adopt_unassigned`] would pin), asked on a
/// read connection: once every genie has its row, as it does after the first start since
/// provider rows exist, a start need not take the writer for it.
pub fn any_unassigned(c: &Connection) -> rusqlite::Result<bool> {
    let n: i64 = c.query_row(
        "SELECT COUNT(*) FROM (SELECT 1 FROM genies
             WHERE id NOT IN (SELECT genie_id FROM genie_providers) LIMIT 1) AS unassigned",
        [],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

/// Pins every genie without a provider row to `default`: the provider it was made in, before
/// genies could name one. Run at start-up, so a later change of `--voice-provider` does not
/// move existing genies' agents out from under them.
pub fn adopt_unassigned(c: &Connection, default: &str, now: &str) -> rusqlite::Result<usize> {
    c.execute(
        "INSERT INTO genie_providers (genie_id, provider, state, error, updated_at)
         SELECT id, ?1, 'in_sync', NULL, ?2 FROM genies
         WHERE id NOT IN (SELECT genie_id FROM genie_providers)",
        [default, now],
    )
}
