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
//! `genied_bm25_best(table, k, match, weights…)` is the same for a statement that orders by
//! it and keeps the first `k` rows (`ORDER BY rank LIMIT k`, with nothing after the ranking
//! that drops a row): a search. The size of each matching row (a lookup in FTS5's `docsize`
//! table) was a fifth of a search over a thousand matches. bm25 only falls as a row grows,
//! and a row is at least as long as the offsets of its matched phrases say. So the function
//! keeps the `k` best exact scores so far, and a row whose score with that least size
//! cannot beat the worst of them is answered with that bound, without its size: `k` rows
//! already seen rank strictly before it, so it is never among the `k` kept, and every row
//! that is has its exact score. A row asked for twice (the same rowid twice in a row)
//! counts once.
//!
//! It also keeps each phrase's document count, the walk over the phrase's whole list that
//! gives its IDF (a fifth of a search of 10,000 documents, nearly half of one user's among
//! 100), for the next statement on the same connection with the same `MATCH` text (its
//! second value; the text decides the phrases, their columns and prefixes). The counts
//! hold while the index is as it was: each statement reads the index's structure record
//! and averages in its own snapshot, and FTS5 writes a new structure, with a higher write
//! counter, for every change to the index (with its automerge on and `secure-delete` off,
//! as genied leaves them). In a write transaction, where FTS5 may hold changes its records
//! do not show yet, it counts as `genied_bm25` does. It reads `document_chunks_fts`'s
//! records, so it ranks that table only, and says so (an error) if the records' row count
//! is not the ranked table's.
//!
//! FTS5 takes ranking functions only through its C interface, so this module is the second
//! place in genied with `unsafe` code (the first is `main`'s SQLite configuration).
#![allow(unsafe_code)]

use rusqlite::ffi;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, c_int, c_void};
use std::ptr;

/// The name SQL calls the function by.
pub const NAME: &CStr = c"genied_bm25";

/// `genied_bm25_best(document_chunks_fts, k, match, weights…)`: [`NAME`] for a query that
/// keeps only the best `k` rows, with its `MATCH` text (see the module's doc).
pub const BEST: &CStr = c"genied_bm25_best";

/// Adds [`NAME`] and [`BEST`] to a connection's FTS5. Every connection that searches needs
/// them: FTS5's functions belong to one connection.
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
        let counts = Box::into_raw(Box::<RefCell<Counts>>::default());
        let rc = create(
            api,
            BEST.as_ptr(),
            counts.cast(),
            Some(bm25_best),
            Some(drop_counts),
        );
        if rc != ffi::SQLITE_OK {
            // FTS5 took the counts only if it took the function.
            drop(Box::from_raw(counts));
        }
        check(rc).map_err(|rc| failed(rc, "genied_bm25_best"))?;
    }
    Ok(())
}

/// What one query keeps between its rows (FTS5's auxiliary data): the index's rows and
/// their mean length, each phrase's IDF once counted, room for a row's phrase frequencies
/// and its columns' least sizes, and for [`BEST`] the best scores so far.
struct Query {
    rows: f64,
    avgdl: f64,
    idf: Vec<Option<f64>>,
    freq: Vec<f64>,
    least: Vec<i64>,
    best: Best,
    counts: Option<Kept>,
}

/// For [`BEST`]: the connection's counts, the statement's match text, and the generation
/// of the counts that holds for this statement's snapshot of the index.
struct Kept {
    cell: *const RefCell<Counts>,
    key: Box<[u8]>,
    generation: u64,
}

/// One connection's phrase counts (the user data of [`BEST`]): how many rows hold phrase
/// `i` of a match text, as `xQueryPhrase` counted them, while the index is as `version`
/// says (its structure record and its averages, FTS5's own: every change to the index
/// writes a new structure with a higher write counter, and the averages give its rows and
/// tokens). A search reads the two records in its own snapshot; when they differ from
/// `version`, the counts are dropped and `generation` moves on.
#[derive(Default)]
struct Counts {
    version: Vec<u8>,
    generation: u64,
    by_match: HashMap<Box<[u8]>, Vec<(c_int, i64)>>,
}

/// The match texts one connection keeps counts for; past it, it starts over. A search's
/// text is at most a couple of kilobytes (a query of up to 1,000 characters, quoted), so
/// this bounds a connection's counts to a few hundred kilobytes.
const COUNTS_KEPT: usize = 256;

/// The table whose records version [`Counts`]: the shadow table of the one index
/// [`BEST`] ranks, `document_chunks_fts`.
const DATA_TABLE: &CStr = c"document_chunks_fts_data";

impl Counts {
    fn get(&self, generation: u64, key: &[u8], phrase: c_int) -> Option<i64> {
        if generation != self.generation {
            return None;
        }
        let phrases = self.by_match.get(key)?;
        phrases.iter().find(|(p, _)| *p == phrase).map(|(_, n)| *n)
    }

    fn put(&mut self, generation: u64, key: &[u8], phrase: c_int, rows: i64) {
        if generation != self.generation {
            return;
        }
        if self.by_match.len() >= COUNTS_KEPT && !self.by_match.contains_key(key) {
            self.by_match.clear();
        }
        self.by_match
            .entry(key.into())
            .or_default()
            .push((phrase, rows));
    }

    /// The generation whose counts hold for an index at `version`.
    fn at(&mut self, version: Vec<u8>) -> u64 {
        if version != self.version {
            self.version = version;
            self.by_match.clear();
            self.generation += 1;
        }
        self.generation
    }
}

unsafe extern "C" fn drop_counts(p: *mut c_void) {
    // SAFETY: FTS5 calls this once, when the function is dropped with its connection, with
    // the pointer `register` gave it from `Box::into_raw`.
    drop(unsafe { Box::from_raw(p.cast::<RefCell<Counts>>()) });
}

/// The index's version for [`Counts`]: its structure record (id 10) and its averages
/// (id 1), read in the calling statement's snapshot; and the rows the averages count.
unsafe fn index_version(db: *mut ffi::sqlite3) -> Result<(Vec<u8>, i64), c_int> {
    let mut version = Vec::with_capacity(256);
    for rowid in [10, 1] {
        // SAFETY: `db` is the calling statement's connection, open for the call; the handle
        // is closed before returning, and reads stay within the bytes it reports.
        unsafe {
            let mut blob: *mut ffi::sqlite3_blob = ptr::null_mut();
            let rc = ffi::sqlite3_blob_open(
                db,
                c"main".as_ptr(),
                DATA_TABLE.as_ptr(),
                c"block".as_ptr(),
                rowid,
                0,
                &mut blob,
            );
            if rc != ffi::SQLITE_OK {
                ffi::sqlite3_blob_close(blob);
                return Err(rc);
            }
            let n = ffi::sqlite3_blob_bytes(blob).max(0);
            let at = version.len();
            version.resize(at + n as usize, 0);
            let rc = ffi::sqlite3_blob_read(blob, version[at..].as_mut_ptr().cast(), n, 0);
            ffi::sqlite3_blob_close(blob);
            check(rc)?;
            if rowid == 1 {
                let rows = varint(&version[at..]);
                return Ok((version, rows));
            }
        }
    }
    unreachable!("the loop returns with the averages")
}

/// SQLite's variable-length integer (1 to 9 bytes, big-endian, 7 bits a byte but the
/// ninth's 8), as FTS5 writes the averages record's row count; -1 if cut short.
fn varint(b: &[u8]) -> i64 {
    let mut v: u64 = 0;
    for (i, &byte) in b.iter().enumerate().take(9) {
        if i == 8 {
            return ((v << 8) | u64::from(byte)) as i64;
        }
        v = (v << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return v as i64;
        }
    }
    -1
}

/// [`BEST`]'s running top-k: the `k` best exact scores among the rows scored so far (as
/// bm25's positive scores, better is higher), and the last row's answer, so that a row that
/// is asked for twice is counted once.
struct Best {
    k: usize,
    scores: Vec<f64>,
    last: Option<(i64, f64)>,
}

impl Best {
    /// The score a row must beat to be among the best `k` so far; none until `k` are in.
    fn bar(&self) -> Option<f64> {
        (self.k > 0 && self.scores.len() == self.k)
            .then(|| self.scores.iter().copied().fold(f64::INFINITY, f64::min))
    }

    fn add(&mut self, score: f64) {
        if self.scores.len() < self.k {
            self.scores.push(score);
        } else if let Some(worst) = self
            .scores
            .iter_mut()
            .min_by(|a, b| a.total_cmp(b))
            .filter(|w| score > **w)
        {
            *worst = score;
        }
    }
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

/// [`NAME`], the ranking function FTS5 calls for each row (see the module's doc). Scores
/// and constants as SQLite's `fts5Bm25Function` (k1 = 1.2, b = 0.75; a negated score, so
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
    let result = unsafe { score(&*api, fts, None, n_val, vals) };
    // SAFETY: `ctx` is FTS5's, for the time of this call.
    unsafe { answer(ctx, result) }
}

/// Sets a ranking function's result: the negated score (better is lower, as for `bm25`),
/// or the error.
unsafe fn answer(ctx: *mut ffi::sqlite3_context, result: Result<f64, c_int>) {
    // SAFETY: the caller's `ctx` is the calling function's own, valid for its call.
    match result {
        Ok(s) => unsafe { ffi::sqlite3_result_double(ctx, -s) },
        Err(rc) => unsafe { ffi::sqlite3_result_error_code(ctx, rc) },
    }
}

/// [`BEST`]: its values are `k`, the statement's `MATCH` text, then the weights.
unsafe extern "C" fn bm25_best(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    vals: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: as `bm25`'s; the weights are the values after the first two. The match text
    // is copied out of its value before anything else runs on the connection.
    let result = unsafe {
        if n_val < 2 {
            Err(ffi::SQLITE_MISUSE)
        } else {
            let k = ffi::sqlite3_value_int64(*vals).clamp(0, 1 << 16) as usize;
            let text = ffi::sqlite3_value_blob(*vals.add(1)).cast::<u8>();
            let len = ffi::sqlite3_value_bytes(*vals.add(1)).max(0) as usize;
            let key = if text.is_null() {
                &[][..]
            } else {
                std::slice::from_raw_parts(text, len)
            };
            let best = Ranked {
                k,
                key,
                db: ffi::sqlite3_context_db_handle(ctx),
            };
            score(&*api, fts, Some(best), n_val - 2, vals.add(2))
        }
    };
    // SAFETY: as above.
    unsafe { answer(ctx, result) }
}

/// What [`BEST`] is told besides the weights: how many rows the statement keeps, its
/// `MATCH` text (the key of its phrases' counts) and the connection.
struct Ranked<'a> {
    k: usize,
    key: &'a [u8],
    db: *mut ffi::sqlite3,
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

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// A row's bm25 score (positive, better is higher). As [`BEST`] (`ranked`): a row that
/// cannot be among the best `k` so far gets a bound instead, and the phrases' counts come
/// from the connection's [`Counts`] when they hold (see the module's doc).
unsafe fn score(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ranked: Option<Ranked<'_>>,
    n_val: c_int,
    vals: *mut *mut ffi::sqlite3_value,
) -> Result<f64, c_int> {
    // SAFETY (the whole body): every pointer passed on is FTS5's own (`fts`) or points into
    // a local or into `Query`, which FTS5 owns between rows and frees with `drop_query`.
    unsafe {
        let mut q = call!(api, xGetAuxdata(fts, 0)).cast::<Query>();
        if q.is_null() {
            let phrases = call!(api, xPhraseCount(fts)).max(0) as usize;
            let columns = call!(api, xColumnCount(fts)).max(0) as usize;
            let (mut rows, mut tokens) = (0i64, 0i64);
            check(call!(api, xRowCount(fts, &mut rows)))?;
            check(call!(api, xColumnTotalSize(fts, -1, &mut tokens)))?;
            // The bound holds only while every weight is a plain non-negative number: a
            // longer row then scores no higher.
            let weights_ok = (0..n_val).all(|i| {
                let w = ffi::sqlite3_value_double(*vals.add(i as usize));
                w >= 0.0 && w.is_finite()
            });
            let k = ranked.as_ref().map_or(0, |r| r.k);
            // In a write transaction FTS5 may hold changes that its records do not show
            // yet: there the counts are neither taken nor kept.
            let writing = ranked.as_ref().is_some_and(|r| {
                ffi::sqlite3_txn_state(r.db, c"main".as_ptr()) == ffi::SQLITE_TXN_WRITE
            });
            let counts = match &ranked {
                Some(_) if writing => None,
                Some(r) => {
                    let key: Box<[u8]> = r.key.into();
                    let (version, counted) = index_version(r.db)?;
                    // The records read must be the ranked table's: its rows, as FTS5 says.
                    if counted != rows {
                        return Err(ffi::SQLITE_MISUSE);
                    }
                    let cell = call!(api, xUserData(fts)).cast::<RefCell<Counts>>();
                    let Some(counts) = cell.as_ref() else {
                        return Err(ffi::SQLITE_MISUSE);
                    };
                    let generation = counts.borrow_mut().at(version);
                    Some(Kept {
                        cell: cell.cast_const(),
                        key,
                        generation,
                    })
                }
                None => None,
            };
            let fresh = Box::into_raw(Box::new(Query {
                rows: rows as f64,
                avgdl: tokens as f64 / rows as f64,
                idf: vec![None; phrases],
                freq: vec![0.0; phrases],
                least: vec![0; columns],
                best: Best {
                    k: if weights_ok { k } else { 0 },
                    scores: Vec::with_capacity(k.min(64)),
                    last: None,
                },
                counts,
            }));
            check(call!(api, xSetAuxdata(fts, fresh.cast(), Some(drop_query))))?;
            q = fresh;
        }
        let q = &mut *q;
        let rowid = if q.best.k > 0 {
            let rowid = call!(api, xRowid(fts));
            if let Some((_, s)) = q.best.last.filter(|(last, _)| *last == rowid) {
                return Ok(s);
            }
            Some(rowid)
        } else {
            None
        };
        q.freq.iter_mut().for_each(|f| *f = 0.0);
        q.least.iter_mut().for_each(|n| *n = 0);
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
            // A phrase of n tokens at offset `off` ends at token off + n: its column has at
            // least that many.
            if let Some(n) = q.least.get_mut(col as usize) {
                let end = off as i64 + call!(api, xPhraseSize(fts, phrase)).max(1) as i64;
                *n = (*n).max(end);
            }
        }
        if let (Some(rowid), Some(bar)) = (rowid, q.best.bar()) {
            // The row's size is at least its columns' least sizes, and bm25 falls as a row
            // grows: a bound that cannot reach the bar means the exact score cannot either,
            // and the row's size need not be read.
            let least: i64 = q.least.iter().sum();
            let bound = sum(api, fts, q, least as f64)?;
            if bound < bar {
                #[cfg(test)]
                tests::BOUNDED.with(|n| n.set(n.get() + 1));
                q.best.last = Some((rowid, bound));
                return Ok(bound);
            }
        }
        let mut row_tokens = 0;
        check(call!(api, xColumnSize(fts, -1, &mut row_tokens)))?;
        let s = sum(api, fts, q, row_tokens as f64)?;
        if let Some(rowid) = rowid {
            q.best.add(s);
            q.best.last = Some((rowid, s));
        }
        Ok(s)
    }
}

/// bm25's sum over the phrases of the row in `q.freq`, for a row of `d` tokens: each
/// phrase's IDF counted when first needed.
unsafe fn sum(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    q: &mut Query,
    d: f64,
) -> Result<f64, c_int> {
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
                let phrase = i as c_int;
                // SAFETY: the counts live as long as the connection that runs this query.
                let counts = q
                    .counts
                    .as_ref()
                    .map(|k| (unsafe { &*k.cell }, &k.key, k.generation));
                let known = counts.and_then(|(c, key, g)| c.borrow().get(g, key, phrase));
                let hits = match known {
                    Some(hits) => hits,
                    None => {
                        let mut hits = 0i64;
                        // SAFETY: `fts` is the caller's context; `hits` outlives the call.
                        let counted = unsafe {
                            call!(
                                api,
                                xQueryPhrase(
                                    fts,
                                    phrase,
                                    (&mut hits as *mut i64).cast(),
                                    Some(count_row)
                                )
                            )
                        };
                        check(counted)?;
                        if let Some((c, key, g)) = counts {
                            c.borrow_mut().put(g, key, phrase, hits);
                        }
                        hits
                    }
                };
                #[cfg(test)]
                if known.is_some() {
                    tests::COUNTED.with(|n| n.set(n.get() + 1));
                }
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
    use std::cell::Cell;

    thread_local! {
        /// How many rows `genied_bm25_best` answered with a bound on this thread.
        pub(super) static BOUNDED: Cell<u64> = const { Cell::new(0) };
        /// How many phrase counts it took from its connection's counts on this thread.
        pub(super) static COUNTED: Cell<u64> = const { Cell::new(0) };
    }

    /// The search's index in small: words, and reader tokens that score nothing.
    fn index(rows: &[(&str, &str)]) -> Connection {
        let c = Connection::open_in_memory().unwrap();
        super::register(&c).unwrap();
        c.execute_batch(
            "CREATE VIRTUAL TABLE document_chunks_fts USING fts5(content, readers,
                 tokenize = 'porter unicode61 remove_diacritics 2')",
        )
        .unwrap();
        for (content, readers) in rows {
            c.execute(
                "INSERT INTO document_chunks_fts (content, readers) VALUES (?1, ?2)",
                [content, readers],
            )
            .unwrap();
        }
        c
    }

    fn ranks(c: &Connection, function: &str, args: &str, query: &str) -> Vec<(i64, f64)> {
        c.prepare(&format!(
            "SELECT rowid, {function}(document_chunks_fts{args}) AS r FROM document_chunks_fts
             WHERE document_chunks_fts MATCH ?1 ORDER BY r, rowid"
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

    /// Rows of skewed text (a few words in many rows, most in few) of 5 to 60 words, each
    /// row one user's ("ua" or "ub") and some public: enough rows that the best few are
    /// found early and most rows can be bounded.
    fn corpus(rows: usize) -> Vec<(String, String)> {
        let words = [
            "refund", "warranty", "receipt", "repair", "parts", "labour", "claim", "photo",
            "fault", "card", "week", "hours", "store", "order", "return", "damage", "courier",
            "invoice", "credit", "exchange",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        (0..rows)
            .map(|_| {
                let len = 5 + next(56) as usize;
                let text: Vec<&str> = (0..len)
                    // The square skews the draw towards the first words.
                    .map(|_| words[(next(400) as f64).sqrt() as usize % words.len()])
                    .collect();
                let reader = if next(3) == 0 { "ub" } else { "ua" };
                let readers = if next(5) == 0 {
                    format!("{reader} pub")
                } else {
                    reader.to_string()
                };
                (text.join(" "), readers)
            })
            .collect()
    }

    fn best(c: &Connection, function: &str, args: &str, query: &str, k: i64) -> Vec<(i64, f64)> {
        c.prepare(&format!(
            "SELECT rowid, {function}(document_chunks_fts{args}) AS r FROM document_chunks_fts
             WHERE document_chunks_fts MATCH ?1 ORDER BY r, rowid LIMIT ?2"
        ))
        .unwrap()
        .query_map(rusqlite::params![query, k], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }

    #[test]
    fn the_best_k_are_bm25s_best_k_to_the_last_bit() {
        let rows = corpus(2_000);
        let c = index(
            &rows
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect::<Vec<_>>(),
        );
        let queries = [
            "readers : (\"ua\" OR \"pub\") AND content : (\"refund\" \"warranty\")",
            "readers : (\"ub\" OR \"pub\") AND content : (\"fault\" \"card\")",
            "readers : (\"ua\" OR \"pub\") AND content : (\"courier\" OR \"invoice\")",
            "content : (\"refund\")",
            "\"repair parts\" OR labour",
        ];
        let before = BOUNDED.with(Cell::get);
        let mut compared = 0;
        for q in queries {
            // The last weights make a longer row score higher: no row may be bounded then.
            for weights in [", 1.0, 0.0", "", ", 2.0, 0.5", ", 1.0, -1.0"] {
                for k in [1, 2, 5, 10, 50, 5_000] {
                    let bounded = BOUNDED.with(Cell::get);
                    let ours = best(&c, "genied_bm25_best", &format!(", ?2, ?1{weights}"), q, k);
                    let theirs = best(&c, "bm25", weights, q, k);
                    assert!(!theirs.is_empty(), "{q} matches nothing");
                    assert_eq!(ours.len(), theirs.len(), "{q} {weights} {k}");
                    for ((id, a), (id2, b)) in ours.iter().zip(&theirs) {
                        assert_eq!(id, id2, "{q} {weights} {k}: the order differs");
                        assert_eq!(a.to_bits(), b.to_bits(), "{q} {weights} {k}: row {id}");
                        compared += 1;
                    }
                    if weights.contains('-') {
                        assert_eq!(BOUNDED.with(Cell::get), bounded, "{q} {weights}");
                    }
                }
            }
        }
        assert!(compared > 1_000, "{compared}");
        // Most rows of a search for the best few were bounded, not sized.
        let bounded = BOUNDED.with(Cell::get) - before;
        assert!(bounded > 10_000, "{bounded} rows bounded");
    }

    #[test]
    fn outside_a_full_text_query_it_is_an_error_not_a_crash() {
        let c = index(&[("some words", "ua")]);
        for function in ["genied_bm25(1, 2)", "genied_bm25_best(1, 2)"] {
            let err = c
                .query_row(&format!("SELECT {function}"), [], |r| r.get::<_, f64>(0))
                .unwrap_err();
            assert!(err.to_string().contains("genied_bm25"), "{err}");
        }
        // Without its `k` and match text it is an error, not a read past its values.
        let err = c
            .query_row(
                "SELECT genied_bm25_best(document_chunks_fts, 5) FROM document_chunks_fts
                 WHERE document_chunks_fts MATCH 'words'",
                [],
                |r| r.get::<_, f64>(0),
            )
            .unwrap_err();
        assert!(err.to_string().contains("misuse"), "{err}");
        // It ranks the documents' index only: on another table it would read the wrong
        // index's version for its counts.
        c.execute_batch(
            "CREATE VIRTUAL TABLE other USING fts5(content);
             INSERT INTO other VALUES ('some words'), ('more words');",
        )
        .unwrap();
        let err = c
            .query_row(
                "SELECT genied_bm25_best(other, 5, 'words') FROM other WHERE other MATCH 'words'",
                [],
                |r| r.get::<_, f64>(0),
            )
            .unwrap_err();
        assert!(err.to_string().contains("misuse"), "{err}");
        // Registering again on the same connection is harmless: the newer one answers.
        super::register(&c).unwrap();
        assert_eq!(ranks(&c, "genied_bm25", "", "words").len(), 1);
    }

    /// The counts a search keeps are its connection's, and hold only while the index is
    /// as it was: a change that keeps the rows and their tokens the same in number still
    /// makes the next search count again.
    #[test]
    fn kept_counts_follow_the_index() {
        let c = index(&[
            ("refund refund receipt", "ua"),
            ("refund warranty card", "ua"),
            ("warranty parts labour", "ua pub"),
            ("opening hours weekdays", "ub"),
            ("receipt photo fault", "ua"),
        ]);
        let q = "readers : (\"ua\" OR \"pub\") AND content : (\"refund\" OR \"warranty\")";
        let compare = |c: &Connection| {
            let ours = best(c, "genied_bm25_best", ", ?2, ?1, 1.0, 0.0", q, 10);
            let theirs = best(c, "bm25", ", 1.0, 0.0", q, 10);
            assert_eq!(ours.len(), theirs.len());
            for ((id, a), (id2, b)) in ours.iter().zip(&theirs) {
                assert_eq!((id, a.to_bits()), (id2, b.to_bits()), "{ours:?} {theirs:?}");
            }
            ours
        };
        let counted = || COUNTED.with(Cell::get);
        let first = compare(&c);
        let before = counted();
        assert_eq!(compare(&c), first);
        assert_eq!(
            counted() - before,
            2,
            "the second search takes both words' counts"
        );

        // Same rows, same tokens in each column, one more row with "refund".
        c.execute_batch(
            "DELETE FROM document_chunks_fts WHERE rowid = 4;
             INSERT INTO document_chunks_fts (rowid, content, readers)
                 VALUES (4, 'refund opening hours', 'ub');",
        )
        .unwrap();
        let before = counted();
        let after = compare(&c);
        assert_eq!(counted(), before, "counts of the old index were used");
        assert_ne!(
            after, first,
            "the change must move the scores for this test to mean anything"
        );

        // The search after it takes the new counts.
        let before = counted();
        compare(&c);
        assert_eq!(counted() - before, 2);

        // Inside a write transaction that has changed the index, nothing kept is used: the
        // change (one more "warranty") is not in the index's records before the commit.
        c.execute_batch(
            "BEGIN;
             INSERT INTO document_chunks_fts (rowid, content, readers)
                 VALUES (6, 'warranty card week', 'ua');",
        )
        .unwrap();
        let before = counted();
        let pending = compare(&c);
        assert_eq!(
            counted(),
            before,
            "kept counts were used in a write transaction"
        );
        assert_ne!(pending, after);
        c.execute_batch("COMMIT").unwrap();
        assert_eq!(compare(&c), pending);
    }
}
