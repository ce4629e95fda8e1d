//! Ids stored as bytes: a canonical UUID as its 16 bytes instead of 36 characters of text,
//! anything else as its UTF-8 bytes. The audit log keeps its ids so since V37; a lead keeps
//! its genie's and user's so since V41 (PostgreSQL V18), in the row and in every index that
//! carries them (docs/storage.md, round fourteen).
//!
//! `users` and `genies` have a generated column `key` (this form of their `id`, unique) that
//! the lead's foreign keys point at. In SQL, `genied_key(text)` makes the form from an id and
//! `genied_key_text(bytes)` the id from the form, on both engines: PostgreSQL functions of
//! migration V18, and on SQLite the scalar functions [`register_functions`] adds to every
//! connection (the schema itself uses only built-in SQL, so a `sqlite3` shell of 3.41 or
//! later, which has `unhex`, can read and write the database).

use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};

/// How an id is stored. Anything not a UUID in canonical form keeps its UTF-8 bytes and reads
/// back as the text it was, unless it is 16 bytes long (read as a UUID then). No id the
/// service makes is anything else: row ids and user ids are UUIDs (`db::new_id`).
pub enum Key<'a> {
    Uuid([u8; 16]),
    Text(&'a str),
}

impl<'a> Key<'a> {
    pub fn of(id: &'a str) -> Key<'a> {
        match uuid::Uuid::try_parse(id) {
            Ok(u)
                if u.hyphenated()
                    .encode_lower(&mut uuid::Uuid::encode_buffer())
                    == id =>
            {
                Key::Uuid(u.into_bytes())
            }
            // Not in the canonical form (upper case, braces): stored as given, so it reads back
            // as given.
            _ => Key::Text(id),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        match self {
            Key::Uuid(b) => b,
            Key::Text(s) => s.as_bytes(),
        }
    }
}

impl ToSql for Key<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Blob(self.bytes())))
    }
}

/// The stored form of `id` as an owned SQL value, for parameter lists built at run time.
pub fn value(id: &str) -> Value {
    Value::Blob(Key::of(id).bytes().to_vec())
}

/// The id of a stored form (see [`Key`]).
pub fn text(b: &[u8]) -> String {
    match <[u8; 16]>::try_from(b) {
        // Encoded into a buffer, then copied once: `to_string` goes through `Display`,
        // growing its string as it writes (this runs for every id of every row read).
        Ok(u) => {
            let mut buf = uuid::Uuid::encode_buffer();
            (*uuid::Uuid::from_bytes(u)
                .hyphenated()
                .encode_lower(&mut buf))
            .to_owned()
        }
        Err(_) => String::from_utf8_lossy(b).into_owned(),
    }
}

/// `genied_key(id)` and `genied_key_text(bytes)` (see the module's doc). NULL gives NULL; a
/// value already in the other form is passed through, as the migrations' SQL does.
pub fn register_functions(c: &rusqlite::Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    c.create_scalar_function("genied_key", 1, flags, |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Text(t) => match std::str::from_utf8(t) {
                Ok(id) => value(id),
                Err(_) => Value::Blob(t.to_vec()),
            },
            ValueRef::Null => Value::Null,
            v => Value::from(v),
        })
    })?;
    c.create_scalar_function("genied_key_text", 1, flags, |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Blob(b) => Value::Text(text(b)),
            ValueRef::Null => Value::Null,
            v => Value::from(v),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canonical_uuid_is_its_16_bytes_and_anything_else_its_text() {
        let id = "0190f5c4-7a4b-7c3d-8e9f-0a1b2c3d4e5f";
        assert_eq!(Key::of(id).bytes().len(), 16);
        assert_eq!(text(Key::of(id).bytes()), id);
        for other in [
            "0190F5C4-7A4B-7C3D-8E9F-0A1B2C3D4E5F",
            "admin",
            "ünïcode\\id",
        ] {
            assert_eq!(Key::of(other).bytes(), other.as_bytes());
            assert_eq!(text(Key::of(other).bytes()), other);
        }
    }

    #[test]
    fn the_sql_functions_agree_with_the_rust_forms() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        register_functions(&c).unwrap();
        let id = "0190f5c4-7a4b-7c3d-8e9f-0a1b2c3d4e5f";
        let (k, back, null): (Vec<u8>, String, Option<Vec<u8>>) = c
            .query_row(
                "SELECT genied_key(?1), genied_key_text(genied_key(?1)), genied_key(NULL)",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(k, Key::of(id).bytes());
        assert_eq!(back, id);
        assert_eq!(null, None);
    }
}
