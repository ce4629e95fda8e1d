//! `genied_bm25(table, weights…)`: FTS5's own `bm25`, except that a phrase's inverse
//! document frequency is counted only when a row first gives the phrase a weight.
//!
//! Why: `bm25` counts, at the first row of every query, how many rows of the whole index hold
//! each phrase of the query, by walking the phrase's whole list. A user's search asks for
//! `readers : ("u<owner>" OR "pub") AND content : (<words>)` (`db::documents`), and the
//! reader tokens carry weight 0: they never add to a score, but `bm25` still walked the
//! owner's list, one entry for every chunk the user has. With real text, where the words are
//! rarer than the owner's token, that walk was a third to a half of the database's time for
//! a search of one user's 10,000 documents (docs/performance.md, round twenty-three).
//!
//! This function computes exactly what `bm25` computes (the same sums in the same order; a
//! phrase with no weight in a row adds 0 to its score either way) and leaves out the counts
//! nothing uses.
//!
//! FTS5 takes ranking functions only through its C interface, so this module is the second
//! place in genied with `unsafe` code (the first is `main`'s SQLite configuration).
#![allow(unsafe_code)]

use rusqlite::ffi;
use std::ffi::{CStr, c_int, c_void};
use std::ptr;

/// The name SQL calls the function by.
pub const NAME: &CStr = c"genied_bm25";

/// Adds [`NAME`] to a connection's FTS5. Every connection that searches needs it: FTS5's
/// functions belong to one connection.
pub fn register(c: &rusqlite::Connection) -> rusqlite::Result<()> {
    // SAFETY: the handle is the open connection's and is used only while `c` is borrowed,
    // on this thread. `fts5(?1)` is FTS5's documented way to hand out its `fts5_api`: the
    // statement writes the pointer through the bound pointer, tagged "fts5_api_ptr".
    // `xCreateFunction` copies the name; the function has no user data to free.
    unsafe {
        let db = c.handle();
        let mut api: *mut ffi::fts5_api = ptr::null_mut();
        let mut st: *mut ffi::sqlite3_stmt = ptr::null_mut();
        let mut rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut st,
            ptr::null_mut(),
        );
        if rc == ffi::SQLITE_OK {
            rc = ffi::sqlite3_bind_pointer(
                st,
                1,
                (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(),
                c"fts5_api_ptr".as_ptr(),
                None,
            );
        }
        if rc == ffi::SQLITE_OK {
            rc = ffi::sqlite3_step(st);
            if rc == ffi::SQLITE_ROW || rc == ffi::SQLITE_DONE {
                rc = ffi::SQLITE_OK;
            }
        }
        ffi::sqlite3_finalize(st);
        let failed =
            |rc, what: &str| rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(what.into()));
        check(rc).map_err(|rc| failed(rc, "fts5_api"))?;
        let Some(create) = api.as_ref().and_then(|a| a.xCreateFunction) else {
            return Err(failed(
                ffi::SQLITE_ERROR,
                "this SQLite has no FTS5 function interface",
            ));
        };
        let rc = create(api, NAME.as_ptr(), ptr::null_mut(), Some(bm25), None);
        check(rc).map_err(|rc| failed(rc, "genied_bm25"))?;
    }
    Ok(())
}

/// What one query keeps between its rows (FTS5's auxiliary data): the index's rows and
/// their mean length, each phrase's IDF once counted, and room for a row's phrase frequencies.
struct Query {
    rows: f64,
    avgdl: f64,
    idf: Vec<Option<f64>>,
    freq: Vec<f64>,
}

unsafe extern "C" fn drop_query(p: *mut c_void) {
    // SAFETY: FTS5 calls this once, with the pointer `score` gave it from `Box::into_raw`.
    drop(unsafe { Box::from_raw(p.cast::<Query>()) });
}

unsafe extern "C" fn count_row(
    _api: *const ffi::Fts5ExtensionApi,
    _fts: *mut ffi::Fts5Context,
    n: *mut c_void,
) -> c_int {
    // SAFETY: `n` is the `i64` that `score` passes to `xQueryPhrase`, alive for its call.
    unsafe { *n.cast::<i64>() += 1 };
    ffi::SQLITE_OK
}

/// The ranking function FTS5 calls for each row (see the module's doc). Scores and
/// constants as SQLite's `fts5Bm25Function` (k1 = 1.2, b = 0.75; a negated score, so
/// that better is lower).
unsafe extern "C" fn bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    vals: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls this with its own, valid API table and context, and `n_val` values
    // at `vals`, for the time of the call.
    let result = unsafe { score(&*api, fts, n_val, vals) };
    match result {
        Ok(s) => unsafe { ffi::sqlite3_result_double(ctx, -s) },
        Err(rc) => unsafe { ffi::sqlite3_result_error_code(ctx, rc) },
    }
}

/// FTS5's interface functions are all present in any version that calls this one; a
/// missing one is reported as an error rather than trusted.
macro_rules! call {
    ($api:expr, $f:ident ( $($arg:expr),* )) => {
        match $api.$f {
            Some(f) => f($($arg),*),
            None => return Err(ffi::SQLITE_MISUSE),
        }
    };
}

unsafe fn score(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    n_val: c_int,
    vals: *mut *mut ffi::sqlite3_value,
) -> Result<f64, c_int> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    // SAFETY (the whole body): every pointer passed on is FTS5's own (`fts`) or points into
    // a local or into `Query`, which FTS5 owns between rows and frees with `drop_query`.
    unsafe {
        let mut q = call!(api, xGetAuxdata(fts, 0)).cast::<Query>();
        if q.is_null() {
            let phrases = call!(api, xPhraseCount(fts)).max(0) as usize;
            let (mut rows, mut tokens) = (0i64, 0i64);
            check(call!(api, xRowCount(fts, &mut rows)))?;
            check(call!(api, xColumnTotalSize(fts, -1, &mut tokens)))?;
            let fresh = Box::into_raw(Box::new(Query {
                rows: rows as f64,
                avgdl: tokens as f64 / rows as f64,
                idf: vec![None; phrases],
                freq: vec![0.0; phrases],
            }));
            check(call!(api, xSetAuxdata(fts, fresh.cast(), Some(drop_query))))?;
            q = fresh;
        }
        let q = &mut *q;
        q.freq.iter_mut().for_each(|f| *f = 0.0);
        let mut instances = 0;
        check(call!(api, xInstCount(fts, &mut instances)))?;
        for i in 0..instances {
            let (mut phrase, mut col, mut off) = (0, 0, 0);
            check(call!(api, xInst(fts, i, &mut phrase, &mut col, &mut off)))?;
            let weight = if n_val > col && col >= 0 {
                ffi::sqlite3_value_double(*vals.add(col as usize))
            } else {
                1.0
            };
            if let Some(f) = q.freq.get_mut(phrase as usize) {
                *f += weight;
            }
        }
        let mut row_tokens = 0;
        check(call!(api, xColumnSize(fts, -1, &mut row_tokens)))?;
        let d = row_tokens as f64;
        let mut score = 0.0;
        for i in 0..q.freq.len() {
            let f = q.freq[i];
            if f == 0.0 {
                // 0 × (k1 + 1) / (0 + k1 × …) is 0 whatever the IDF: bm25 adds nothing.
                continue;
            }
            let idf = match q.idf[i] {
                Some(idf) => idf,
                None => {
                    let mut hits = 0i64;
                    let counted = call!(
                        api,
                        xQueryPhrase(
                            fts,
                            i as c_int,
                            (&mut hits as *mut i64).cast(),
                            Some(count_row)
                        )
                    );
                    check(counted)?;
                    let idf = ((q.rows - hits as f64 + 0.5) / (hits as f64 + 0.5)).ln();
                    // As SQLite's: a phrase in more than half the rows would score negative.
                    let idf = if idf <= 0.0 { 1e-6 } else { idf };
                    q.idf[i] = Some(idf);
                    idf
                }
            };
            score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * d / q.avgdl)));
        }
        Ok(score)
    }
}

fn check(rc: c_int) -> Result<(), c_int> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rc)
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    /// The search's index in small: words, and reader tokens that score nothing.
    fn index(rows: &[(&str, &str)]) -> Connection {
        let c = Connection::open_in_memory().unwrap();
        super::register(&c).unwrap();
        c.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(content, readers,
                 tokenize = 'porter unicode61 remove_diacritics 2')",
        )
        .unwrap();
        for (content, readers) in rows {
            c.execute(
                "INSERT INTO t (content, readers) VALUES (?1, ?2)",
                [content, readers],
            )
            .unwrap();
        }
        c
    }

    fn ranks(c: &Connection, function: &str, args: &str, query: &str) -> Vec<(i64, f64)> {
        c.prepare(&format!(
            "SELECT rowid, {function}(t{args}) AS r FROM t WHERE t MATCH ?1 ORDER BY r, rowid"
        ))
        .unwrap()
        .query_map([query], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }

    #[test]
    fn scores_are_fts5s_bm25_to_the_last_bit() {
        let c = index(&[
            (
                "refunds are issued within thirty days of the purchase",
                "ua pub",
            ),
            (
                "a refund needs the receipt; refunds by card take a week",
                "ua",
            ),
            ("the warranty covers parts and labour for two years", "ub"),
            (
                "refund or repair under warranty, the customer decides",
                "ua",
            ),
            (
                "opening hours: weekdays nine to five, weekends closed",
                "ub pub",
            ),
            (
                "warranty claims: send the receipt and a photo of the fault",
                "ua",
            ),
        ]);
        let queries = [
            "readers : (\"ua\" OR \"pub\") AND content : (refund)",
            "readers : (\"ua\" OR \"pub\") AND content : (\"refund\" \"warranty\")",
            "readers : (\"ub\" OR \"pub\") AND content : (\"refund\" OR \"warranty\" OR \"hours\")",
            "content : (receipt)",
            "refund OR receipt OR ua",
        ];
        let mut compared = 0;
        for q in queries {
            for args in [", 1.0, 0.0", "", ", 2.0, 0.5", ", 1.0"] {
                let ours = ranks(&c, "genied_bm25", args, q);
                let theirs = ranks(&c, "bm25", args, q);
                assert!(!theirs.is_empty(), "{q} matches nothing");
                assert_eq!(ours.len(), theirs.len(), "{q} {args}");
                for ((id, a), (id2, b)) in ours.iter().zip(&theirs) {
                    assert_eq!(id, id2, "{q} {args}: the order differs");
                    assert_eq!(a.to_bits(), b.to_bits(), "{q} {args}: row {id}: {a} vs {b}");
                    compared += 1;
                }
            }
        }
        assert!(compared > 40, "{compared}");
        // The words decide: the better match of "refund" ranks first among the owner's.
        let best = ranks(&c, "genied_bm25", ", 1.0, 0.0", queries[0]);
        assert_eq!(best[0].0, 2, "{best:?}");
        assert!(best.iter().all(|(_, s)| *s < 0.0), "{best:?}");
    }

    #[test]
    fn outside_a_full_text_query_it_is_an_error_not_a_crash() {
        let c = index(&[("some words", "ua")]);
        let err = c
            .query_row("SELECT genied_bm25(1, 2)", [], |r| r.get::<_, f64>(0))
            .unwrap_err();
        assert!(err.to_string().contains("genied_bm25"), "{err}");
        // Registering again on the same connection is harmless: the newer one answers.
        super::register(&c).unwrap();
        assert_eq!(ranks(&c, "genied_bm25", "", "words").len(), 1);
    }
}
