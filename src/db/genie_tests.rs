//! Test conversations of genies and their runs. Access follows the genie (checked by the
//! caller with `db::genies`); listings here filter by genie or by the genie's owner.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::{Value, json};

use super::json_col;

#[derive(Debug, Clone, Serialize)]
pub struct TestRow {
    pub id: String,
    pub genie_id: String,
    pub user_id: String,
    pub name: String,
    pub turns: Option<Value>,
    pub simulated_user: Option<Value>,
    pub criteria: Value,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str = "t.id, t.genie_id, t.user_id, t.name, t.turns, t.simulated_user, t.criteria, t.created_at, t.updated_at";

fn opt_json(s: Option<String>) -> Option<Value> {
    s.map(|s| json_col(Some(s), Value::Null))
        .filter(|v| !v.is_null())
}

fn from_row(r: &Row) -> rusqlite::Result<TestRow> {
    Ok(TestRow {
        id: r.get(0)?,
        genie_id: r.get(1)?,
        user_id: r.get(2)?,
        name: r.get(3)?,
        turns: opt_json(r.get(4)?),
        simulated_user: opt_json(r.get(5)?),
        criteria: json_col(r.get(6)?, json!([])),
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

fn text(v: &Option<Value>) -> Option<String> {
    v.as_ref().map(Value::to_string)
}

pub fn insert(c: &Connection, t: &TestRow) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO genie_tests (id, genie_id, user_id, name, turns, simulated_user, criteria, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            t.id,
            t.genie_id,
            t.user_id,
            t.name,
            text(&t.turns),
            text(&t.simulated_user),
            t.criteria.to_string(),
            t.created_at,
            t.updated_at
        ],
    )?;
    Ok(())
}

pub fn save(c: &Connection, t: &TestRow) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE genie_tests SET name = ?2, turns = ?3, simulated_user = ?4, criteria = ?5, updated_at = ?6
         WHERE id = ?1",
        params![
            t.id,
            t.name,
            text(&t.turns),
            text(&t.simulated_user),
            t.criteria.to_string(),
            t.updated_at
        ],
    )? == 1)
}

pub fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<TestRow>> {
    c.query_row(
        &format!("SELECT {COLS} FROM genie_tests t WHERE t.id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM genie_tests WHERE id = ?1", [id])? == 1)
}

/// The tests of one genie, oldest first.
pub fn of_genie(c: &Connection, genie_id: &str) -> rusqlite::Result<Vec<TestRow>> {
    c.prepare_cached(&format!(
        "SELECT {COLS} FROM genie_tests t WHERE t.genie_id = ?1 ORDER BY t.created_at, t.id"
    ))?
    .query_map([genie_id], from_row)?
    .collect()
}

/// The tests of every genie `owner` owns (or every genie's, `all`), oldest first.
pub fn of_owner(c: &Connection, owner: &str, all: bool) -> rusqlite::Result<Vec<TestRow>> {
    c.prepare_cached(&format!(
        "SELECT {COLS} FROM genie_tests t JOIN genies g ON g.id = t.genie_id
         WHERE ?2 OR g.user_id = ?1 ORDER BY t.created_at, t.id"
    ))?
    .query_map(params![owner, all], from_row)?
    .collect()
}

// ---- runs ------------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub id: String,
    pub test_id: String,
    pub genie_id: String,
    pub user_id: String,
    /// `draft`, `live`, or a version number as text.
    pub target: String,
    #[serde(skip)]
    pub config: Value,
    /// `queued`, `running`, `passed`, `failed` or `error`.
    pub status: String,
    pub passed: Option<bool>,
    pub transcript: Value,
    pub results: Value,
    pub tokens: i64,
    pub error: Option<String>,
    pub created_at: String,
    pub finished_at: Option<String>,
}

const RUN_COLS: &str = "id, test_id, genie_id, user_id, target, config, status, passed, transcript, results, \
    tokens, error, created_at, finished_at";

fn run_from_row(r: &Row) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: r.get(0)?,
        test_id: r.get(1)?,
        genie_id: r.get(2)?,
        user_id: r.get(3)?,
        target: r.get(4)?,
        config: json_col(r.get(5)?, json!({})),
        status: r.get(6)?,
        passed: r.get(7)?,
        transcript: json_col(r.get(8)?, json!([])),
        results: json_col(r.get(9)?, json!([])),
        tokens: r.get(10)?,
        error: r.get(11)?,
        created_at: r.get(12)?,
        finished_at: r.get(13)?,
    })
}

pub fn insert_run(c: &Connection, r: &RunRow) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO genie_test_runs (id, test_id, genie_id, user_id, target, config, status, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            r.id,
            r.test_id,
            r.genie_id,
            r.user_id,
            r.target,
            r.config.to_string(),
            r.status,
            r.created_at
        ],
    )?;
    Ok(())
}

pub fn get_run(c: &Connection, id: &str) -> rusqlite::Result<Option<RunRow>> {
    c.query_row(
        &format!("SELECT {RUN_COLS} FROM genie_test_runs WHERE id = ?1"),
        [id],
        run_from_row,
    )
    .optional()
}

pub fn set_status(c: &Connection, id: &str, status: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE genie_test_runs SET status = ?2 WHERE id = ?1",
        params![id, status],
    )?;
    Ok(())
}

/// What a finished run found.
pub struct Finish<'a> {
    pub status: &'a str,
    pub passed: Option<bool>,
    pub transcript: &'a Value,
    pub results: &'a Value,
    pub tokens: i64,
    pub error: Option<&'a str>,
    pub at: &'a str,
}

pub fn finish(c: &Connection, id: &str, f: &Finish) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE genie_test_runs SET status = ?2, passed = ?3, transcript = ?4, results = ?5, tokens = ?6,
             error = ?7, finished_at = ?8 WHERE id = ?1",
        params![
            id,
            f.status,
            f.passed,
            f.transcript.to_string(),
            f.results.to_string(),
            f.tokens,
            f.error,
            f.at
        ],
    )?;
    Ok(())
}

/// Runs of one test or one genie, newest first.
pub fn runs(
    c: &Connection,
    test_id: Option<&str>,
    genie_id: Option<&str>,
    limit: i64,
) -> rusqlite::Result<Vec<RunRow>> {
    c.prepare_cached(&format!(
        "SELECT {RUN_COLS} FROM genie_test_runs WHERE (?1 IS NULL OR test_id = ?1) AND (?2 IS NULL OR genie_id = ?2)
         ORDER BY created_at DESC, id DESC LIMIT ?3"
    ))?
    .query_map(params![test_id, genie_id, limit], run_from_row)?
    .collect()
}
