//! `query_data`, the worker genies' read-only window on the owner's data: a table from a
//! fixed list, equality filters on listed columns, a time window and a limit. Never raw
//! SQL: table and column names come from the lists below, values are bound parameters, and
//! every query carries the owner condition.

use crate::db::sql::Connection;
use crate::db::sql::types::{Value as Sql, ValueRef};
use serde_json::{Map, Value};

pub struct Table {
    pub name: &'static str,
    pub from: &'static str,
    pub columns: &'static [&'static str],
    /// Columns holding JSON text, returned parsed.
    pub json_columns: &'static [&'static str],
    /// SQL condition limiting rows to the owner `?1`.
    pub owner: &'static str,
    /// Time columns stored as milliseconds since the epoch (leads, since V40): answered and
    /// compared in the RFC 3339 text every other table stores.
    pub ms_columns: &'static [&'static str],
    /// Id columns stored as keys (a lead's genie, since V41; db::keys): answered and compared
    /// as the ids' text.
    pub key_columns: &'static [&'static str],
}

impl Table {
    /// A filter's value as the column compares with it: an RFC 3339 text as milliseconds
    /// for a time column stored so.
    pub fn bind(&self, col: &str, v: Sql) -> Result<Sql, String> {
        match v {
            Sql::Text(s) if self.ms_columns.contains(&col) => super::text_ms(&s)
                .map(Sql::Integer)
                .map_err(|_| format!("'{col}' must be an RFC 3339 timestamp")),
            Sql::Text(s) if self.key_columns.contains(&col) => Ok(super::keys::value(&s)),
            v => Ok(v),
        }
    }
}

/// A lead's genie and user are stored as keys (V41; db::keys): the owner's id is compared
/// in that form.
const LEAD_OWNER: &str =
    "(user_id = genied_key(?1) OR agent_id IN (SELECT key FROM genies WHERE user_id = ?1))";

pub const TABLES: &[Table] = &[
    Table {
        name: "conversations",
        from: "conversations",
        columns: &[
            "id",
            "genie_id",
            "external_id",
            "channel",
            "status",
            "started_at",
            "duration_seconds",
            "summary",
            "analysis",
            "metadata",
            "tags",
            "created_at",
            "updated_at",
        ],
        json_columns: &["analysis", "metadata", "tags"],
        owner: "user_id = ?1",
        ms_columns: &[],
        key_columns: &[],
    },
    Table {
        name: "call_logs",
        from: "call_logs",
        columns: &[
            "id",
            "genie_id",
            "external_id",
            "status",
            "started_at",
            "duration_seconds",
            "summary",
            "created_at",
        ],
        json_columns: &[],
        owner: "user_id = ?1",
        ms_columns: &[],
        key_columns: &[],
    },
    Table {
        name: "leads",
        from: "leads",
        columns: &[
            "id",
            "agent_id",
            "name",
            "email",
            "phone",
            "status",
            "priority",
            "budget",
            "timeline",
            "address",
            "notes",
            "assigned_to",
            "conversation_id",
            "preferred_contact_method",
            "preferred_contact_time",
            "metadata",
            "created_at",
            "updated_at",
        ],
        json_columns: &["address", "metadata"],
        owner: LEAD_OWNER,
        ms_columns: &["created_at", "updated_at"],
        key_columns: &["agent_id"],
    },
    Table {
        name: "agents",
        from: "genies",
        columns: &[
            "id",
            "name",
            "description",
            "use_case",
            "category",
            "brand",
            "is_active",
            "llm_model",
            "voice_id",
            "created_at",
            "updated_at",
        ],
        json_columns: &[],
        owner: "user_id = ?1",
        ms_columns: &[],
        key_columns: &[],
    },
    Table {
        name: "lead_activities",
        // The stored entries and each lead's "created" entry, kept on the lead row. Each arm
        // is limited to the owner's leads too: SQLite does not push the outer `IN (SELECT ..)`
        // into a UNION ALL, and would read every lead and every entry of every user.
        from: concat!(
            "(SELECT id, lead_id, user_id, type, description, metadata, created_at
              FROM lead_activities WHERE lead_id IN (SELECT id FROM leads WHERE
                (user_id = genied_key(?1) OR agent_id IN (SELECT key FROM genies WHERE user_id = ?1)))
              UNION ALL ",
            crate::db::leads::created_entry_sql!(),
            " AND ce.id IN (SELECT id FROM leads WHERE
                (user_id = genied_key(?1) OR agent_id IN (SELECT key FROM genies WHERE user_id = ?1)))
             ) lead_activities"
        ),
        columns: &[
            "id",
            "lead_id",
            "type",
            "description",
            "metadata",
            "created_at",
        ],
        json_columns: &["metadata"],
        owner: "lead_id IN (SELECT id FROM leads WHERE (user_id = genied_key(?1) OR agent_id IN (SELECT key FROM genies WHERE user_id = ?1)))",
        ms_columns: &["created_at"],
        key_columns: &[],
    },
    Table {
        name: "documents",
        from: "documents",
        columns: &[
            "id",
            "name",
            "type",
            "status",
            "error",
            "is_active",
            "is_public",
            "folder_id",
            "size_bytes",
            "source_url",
            "created_at",
            "updated_at",
        ],
        json_columns: &[],
        owner: "user_id = ?1",
        ms_columns: &[],
        key_columns: &[],
    },
    Table {
        name: "email_logs",
        from: "email_logs",
        columns: &[
            "id",
            "recipient",
            "subject",
            "body",
            "status",
            "error",
            "created_at",
        ],
        json_columns: &[],
        owner: "user_id = ?1",
        ms_columns: &[],
        key_columns: &[],
    },
];

pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

/// A validated query (the tool checks names and values before building one).
pub struct Query {
    pub table: &'static Table,
    pub filters: Vec<(&'static str, Sql)>,
    pub created_after: Option<String>,
    pub created_before: Option<String>,
    pub limit: i64,
    pub offset: i64,
}

/// Runs the query for owner `user_id`; returns the rows and the number of matches.
pub fn run(c: &Connection, user_id: &str, q: &Query) -> rusqlite::Result<(Vec<Value>, i64)> {
    let t = q.table;
    let mut cond = vec![t.owner.to_string()];
    let mut args: Vec<Sql> = vec![Sql::Text(user_id.to_string())];
    for (col, v) in &q.filters {
        args.push(v.clone());
        cond.push(format!("{col} = ?{}", args.len()));
    }
    let bound = |s: &String| match t.bind("created_at", Sql::Text(s.clone())) {
        Ok(v) => Ok(v),
        Err(e) => Err(rusqlite::Error::ToSqlConversionFailure(e.into())),
    };
    if let Some(a) = &q.created_after {
        args.push(bound(a)?);
        cond.push(format!("created_at >= ?{}", args.len()));
    }
    if let Some(b) = &q.created_before {
        args.push(bound(b)?);
        cond.push(format!("created_at < ?{}", args.len()));
    }
    let cond = cond.join(" AND ");
    let total: i64 = c.query_row(
        &format!("SELECT COUNT(*) FROM {} WHERE {cond}", t.from),
        crate::db::sql::params_from_iter(args.iter()),
        |r| r.get(0),
    )?;
    let sql = format!(
        "SELECT {} FROM {} WHERE {cond} ORDER BY created_at DESC LIMIT {} OFFSET {}",
        t.columns.join(", "),
        t.from,
        q.limit,
        q.offset
    );
    let mut st = c.prepare(&sql)?;
    let rows = st
        .query_map(crate::db::sql::params_from_iter(args.iter()), |r| {
            let mut obj = Map::new();
            for (i, col) in t.columns.iter().enumerate() {
                let v = match r.get_ref(i)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(n) if t.ms_columns.contains(col) => {
                        Value::String(super::ms_text(n))
                    }
                    ValueRef::Integer(n) => Value::from(n),
                    ValueRef::Real(f) => Value::from(f),
                    ValueRef::Text(s) => {
                        let s = String::from_utf8_lossy(s).into_owned();
                        if t.json_columns.contains(col) {
                            serde_json::from_str(&s).unwrap_or(Value::String(s))
                        } else {
                            Value::String(s)
                        }
                    }
                    ValueRef::Blob(b) if t.key_columns.contains(col) => {
                        Value::String(super::keys::text(b))
                    }
                    ValueRef::Blob(_) => Value::Null,
                };
                obj.insert(col.to_string(), v);
            }
            Ok(Value::Object(obj))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((rows, total))
}
