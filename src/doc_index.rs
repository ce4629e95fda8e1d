//! The documents' search index on SQLite: a tantivy index of every searchable chunk (a
//! completed, active document's), beside the database file (`genied.db-search/`,
//! `Config::doc_index_dir`).
//!
//! Why a second index beside FTS5's: FTS5 ranks every chunk that matches a query with
//! `bm25` and walks each word's whole list for its IDF, so a search's cost grows with the
//! corpus; tantivy keeps each term's document count in its dictionary, skips through its
//! postings, and for any-word queries skips blocks that cannot enter the best few
//! (block-max WAND). For one user's 10,000 documents the search went from 2.03–2.33× its
//! cost at 1,000 to 1.04–1.33× (docs/performance.md, round thirty-six).
//!
//! SQLite stays the truth. A change to a document's chunks or to who may search them
//! queues the document (`document_search_queue`, migration V49, by triggers), and the
//! indexer (`knowledge::search_index`) re-indexes queued documents whole, then deletes the
//! rows it did. The index's commit carries the last queue row it covers, so a start can
//! tell an index that is behind or ahead of its database (a restored backup) and rebuild
//! it. A search reads this index only when nothing is queued and the index was checked at
//! this start ([`DocIndex::ready`]); otherwise FTS5 answers, so a search always sees every
//! committed change. Every chunk it answers is read and checked against `documents` in
//! SQLite, so an index that were ever wrong could hide a chunk, never show one.
//!
//! Nothing here is stored but what a search needs: the chunk's id (a fast field), its
//! document (a term, to replace and filter a document's chunks), its readers (the owner's
//! token and `pub`, as in FTS5's `readers` column) and its words. The text a snippet is cut
//! from is the chunk's, read from SQLite.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RawTokenizer, RemoveLongFilter, SimpleTokenizer,
    Stemmer, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// The analyzer of the chunks' words, close to FTS5's `porter unicode61 remove_diacritics 2`
/// (V3): split at anything not a letter or digit, lower case, diacritics off, English
/// stems (Snowball's English, Porter's successor: a few words stem differently).
const ANALYZER: &str = "genied_en";

/// Memory the writer may fill before it writes a segment: tantivy's least. A batch of the
/// indexer is far smaller, and the writer lives only while there is work (RSS).
const WRITER_BYTES: usize = 15_000_000;

/// Characters of a chunk's beginning that stand for its snippet when none of the query's
/// words is found in it.
const SNIPPET_CHARS: usize = 100;

pub struct DocIndex {
    dir: PathBuf,
    index: Index,
    reader: IndexReader,
    writer: Mutex<Option<IndexWriter>>,
    ready: AtomicBool,
    content: Field,
    readers: Field,
    document: Field,
}

/// A document's chunks as the index holds them: none when it may not be searched.
pub struct Indexed {
    pub document_id: String,
    /// Chunk id and text.
    pub chunks: Vec<(i64, String)>,
    /// The owner's reader token and `pub` for a public document (`db::documents`).
    pub readers: Vec<String>,
}

/// What a search asks: its words (as the user typed them), all of them or any, among the
/// chunks whose readers include one of `readers`, optionally of these documents only.
pub struct Asked<'a> {
    pub words: &'a [String],
    pub any: bool,
    pub readers: &'a [String],
    pub documents: Option<&'a [String]>,
    pub limit: usize,
}

/// The best chunks for a search, best first, with the query's terms for their snippets.
pub struct Found {
    pub hits: Vec<(i64, f32)>,
    /// The query's words as the index holds them (stemmed).
    stems: Vec<String>,
}

impl Found {
    /// The [`SNIPPET_WORDS`] words of `text` around the most of the query's words, each of
    /// them in `[` `]`, with `…` where the text goes on: the form FTS5's
    /// `snippet(…, '[', ']', '…', 16)` answers.
    ///
    /// Only a word that could stem to a query term is stemmed ([`may_stem_to`]): tantivy's
    /// `SnippetGenerator` stems every word of the chunk, some 32 µs for 130 words, which was
    /// most of what an answered chunk cost (round thirty-six); stemming each word that began
    /// with a term's first letter still took 8% of the server's CPU in a search answering
    /// five chunks (round thirty-seven).
    pub fn snippet(&self, text: &str) -> String {
        let mut words = words_analyzer();
        let mut stemmer = TextAnalyzer::builder(RawTokenizer::default())
            .filter(Stemmer::new(Language::English))
            .build();
        // Each word's place in `text`, and which query term it is, if one.
        let mut found: Vec<(usize, usize, Option<usize>)> = Vec::new();
        let mut stream = words.token_stream(text);
        while let Some(t) = stream.next() {
            let term = if self.stems.iter().any(|s| may_stem_to(&t.text, s)) {
                let mut stemmed = stemmer.token_stream(&t.text);
                stemmed
                    .next()
                    .and_then(|st| self.stems.iter().position(|s| *s == st.text))
            } else {
                None
            };
            found.push((t.offset_from, t.offset_to, term));
        }
        let Some((from, to)) = best_window(&found) else {
            return lead_in(text);
        };
        // The window's text, the brackets and the ellipses.
        let mut out = String::with_capacity(found[to - 1].1 - found[from].0 + 32);
        if from > 0 {
            out.push('…');
        }
        // The text before the first word and after the last, too, when the snippet reaches
        // the chunk's ends (as FTS5's does).
        let mut at = if from == 0 { 0 } else { found[from].0 };
        for &(start, end, term) in &found[from..to] {
            if term.is_some() {
                out.push_str(&text[at..start]);
                out.push('[');
                out.push_str(&text[start..end]);
                out.push(']');
                at = end;
            }
        }
        if to < found.len() {
            out.push_str(&text[at..found[to - 1].1]);
            out.push('…');
        } else {
            out.push_str(&text[at..]);
        }
        out
    }
}

/// Whether `word` (lower case, folded, as [`words_analyzer`] gives it) could stem to
/// `stem` in the English stemmer. Snowball's English cuts a word's end and changes at most
/// the last letter it keeps ("happy" → "happi", "hoping" → "hope"), so such a word begins
/// with the stem but for its last letter, save three words it rewrites whole ("dying",
/// "lying", "tying"). The unit test checks this against the stemmer over the project's own
/// prose; were it ever wrong, a word would go unmarked in a snippet, and nothing else.
fn may_stem_to(word: &str, stem: &str) -> bool {
    let kept = stem.char_indices().last().map_or(0, |(i, _)| i);
    word.starts_with(&stem[..kept]) || matches!(word, "dying" | "lying" | "tying")
}

/// Words shown in a snippet, as FTS5's `snippet(…, 16)`.
const SNIPPET_WORDS: usize = 16;

/// The words `[from, to)` of a snippet: the [`SNIPPET_WORDS`] that hold the most different
/// query terms (then the most of them, then the earliest), moved back so that the matches
/// sit in the middle; `None` when no word is a query term.
fn best_window(found: &[(usize, usize, Option<usize>)]) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize, usize, usize)> = None; // (distinct, count, start, span)
    for (i, w) in found.iter().enumerate() {
        if w.2.is_none() {
            continue;
        }
        let end = (i + SNIPPET_WORDS).min(found.len());
        let mut terms: Vec<usize> = Vec::new();
        let mut count = 0;
        let mut last = i;
        for (j, w) in found[i..end].iter().enumerate() {
            if let Some(t) = w.2 {
                count += 1;
                last = i + j;
                if !terms.contains(&t) {
                    terms.push(t);
                }
            }
        }
        let better = match best {
            None => true,
            Some((d, c, _, _)) => (terms.len(), count) > (d, c),
        };
        if better {
            best = Some((terms.len(), count, i, last - i + 1));
        }
    }
    let (_, _, start, span) = best?;
    let slack = (SNIPPET_WORDS - span) / 2;
    let from = start
        .saturating_sub(slack)
        .min(found.len().saturating_sub(SNIPPET_WORDS));
    Some((from, (from + SNIPPET_WORDS).min(found.len())))
}

/// The first [`SNIPPET_CHARS`] of `text` (at a character boundary), for a chunk in which
/// the snippet finds none of the query's words (an any-word query's chunk always has one;
/// this is for safety, should the analyzers ever disagree).
fn lead_in(text: &str) -> String {
    match text.char_indices().nth(SNIPPET_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

impl DocIndex {
    /// Opens the index under `dir`, or makes an empty one. An index that cannot be opened
    /// (another version's, or damaged) is removed and made again: it is rebuilt from
    /// SQLite like a new one.
    pub fn open(dir: &Path) -> tantivy::Result<DocIndex> {
        std::fs::create_dir_all(dir)?;
        let index = match Self::open_or_create(dir) {
            Ok(index) => index,
            Err(e) => {
                tracing::warn!(error = %e, dir = %dir.display(), "documents search index unreadable; made again");
                std::fs::remove_dir_all(dir)?;
                std::fs::create_dir_all(dir)?;
                Self::open_or_create(dir)?
            }
        };
        index.tokenizers().register(ANALYZER, analyzer());
        let schema = index.schema();
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(DocIndex {
            dir: dir.to_path_buf(),
            content: schema.get_field("content")?,
            readers: schema.get_field("readers")?,
            document: schema.get_field("document")?,
            index,
            reader,
            writer: Mutex::new(None),
            ready: AtomicBool::new(false),
        })
    }

    fn open_or_create(dir: &Path) -> tantivy::Result<Index> {
        let index = Index::open_or_create(MmapDirectory::open(dir)?, schema())?;
        // An index of another schema opens too (open_or_create checks it, but only for
        // equality of what it was given): the fields this module reads must be there.
        let s = index.schema();
        for f in ["content", "readers", "document", "chunk"] {
            s.get_field(f)?;
        }
        Ok(index)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True once the indexer has checked the index against the database at this start
    /// (and rebuilt it if it had to): from then on an empty queue means it is up to date.
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// The last queue row the index's newest commit covers; `None` for an index that never
    /// committed (new, or made again).
    pub fn through(&self) -> tantivy::Result<Option<i64>> {
        let metas = self.index.load_metas()?;
        Ok(metas.payload.and_then(|p| p.parse().ok()))
    }

    /// Replaces each document's chunks with `docs`' and commits, covering the queue through
    /// `through`; the searches after it see the commit. The writer is opened for it if it
    /// is not open (the indexer closes it after each batch: [`DocIndex::close_writer`]).
    pub fn apply(&self, docs: &[Indexed], through: i64, all: bool) -> tantivy::Result<()> {
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(self.index.writer_with_num_threads(1, WRITER_BYTES)?);
        }
        let Some(w) = guard.as_mut() else {
            unreachable!("opened above")
        };
        if all {
            w.delete_all_documents()?;
        }
        let chunk = self.index.schema().get_field("chunk")?;
        for d in docs {
            w.delete_term(Term::from_field_text(self.document, &d.document_id));
            for (id, text) in &d.chunks {
                let mut doc = TantivyDocument::default();
                doc.add_text(self.content, text);
                doc.add_text(self.document, &d.document_id);
                for r in &d.readers {
                    doc.add_text(self.readers, r);
                }
                doc.add_u64(chunk, *id as u64);
                w.add_document(doc)?;
            }
        }
        let mut commit = w.prepare_commit()?;
        commit.set_payload(&through.to_string());
        commit.commit()?;
        self.reader.reload()
    }

    /// Closes the writer, if open, once its merges are done, and gives the memory it used
    /// back to the system.
    pub fn close_writer(&self) -> tantivy::Result<()> {
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        match w {
            Some(w) => {
                let done = w.wait_merging_threads();
                crate::malloc::release_free_memory();
                done
            }
            None => Ok(()),
        }
    }

    /// The best `asked.limit` chunks, bm25-ranked (tantivy's: k1 1.2, b 0.75, as FTS5's;
    /// its IDF has no floor and never goes below zero, so common words order differently).
    pub fn search(&self, asked: &Asked<'_>) -> tantivy::Result<Found> {
        let stems = stems(asked.words);
        let terms: Vec<Term> = stems
            .iter()
            .map(|s| Term::from_field_text(self.content, s))
            .collect();
        if terms.is_empty() || asked.readers.is_empty() || asked.limit == 0 {
            return Ok(Found {
                hits: Vec::new(),
                stems: Vec::new(),
            });
        }
        let occur = if asked.any {
            Occur::Should
        } else {
            Occur::Must
        };
        let words: Vec<(Occur, Box<dyn Query>)> = terms
            .into_iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
                (occur, q)
            })
            .collect();
        let mut clauses: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, Box::new(BooleanQuery::new(words)))];
        // Who may search a chunk, and the genie's documents: conditions that score nothing.
        clauses.push((Occur::Must, any_of(self.readers, asked.readers)));
        if let Some(docs) = asked.documents {
            if docs.is_empty() {
                return Ok(Found {
                    hits: Vec::new(),
                    stems: Vec::new(),
                });
            }
            clauses.push((Occur::Must, any_of(self.document, docs)));
        }
        let query = BooleanQuery::new(clauses);
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(asked.limit).order_by_score())?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let col = searcher
                .segment_reader(addr.segment_ord)
                .fast_fields()
                .u64("chunk")?;
            if let Some(id) = col.first(addr.doc_id) {
                hits.push((id as i64, score));
            }
        }
        Ok(Found { hits, stems })
    }

    /// Makes searches see the newest commit, one made by another process (the build of
    /// `knowledge::index_build`); this process's own commits reload it themselves.
    pub fn reload(&self) -> tantivy::Result<()> {
        self.reader.reload()
    }

    /// How many chunks the index holds (the tests read it).
    pub fn chunks(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}

/// A condition that a field holds one of `values`, scoring 0.
fn any_of(field: Field, values: &[String]) -> Box<dyn Query> {
    let terms: Vec<(Occur, Box<dyn Query>)> = values
        .iter()
        .map(|v| {
            let q: Box<dyn Query> = Box::new(TermQuery::new(
                Term::from_field_text(field, v),
                IndexRecordOption::Basic,
            ));
            (Occur::Should, q)
        })
        .collect();
    Box::new(ConstScoreQuery::new(
        Box::new(BooleanQuery::new(terms)),
        0.0,
    ))
}

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// [`analyzer`] without its stemmer: the words of a chunk as a snippet looks at them.
fn words_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

/// The index's terms for what the user typed: each word through the chunks' analyzer,
/// each term once.
fn stems(words: &[String]) -> Vec<String> {
    let mut a = analyzer();
    let mut out: Vec<String> = Vec::new();
    for w in words {
        let mut stream = a.token_stream(w);
        while let Some(t) = stream.next() {
            if !out.contains(&t.text) {
                out.push(t.text.clone());
            }
        }
    }
    out
}

fn schema() -> Schema {
    let mut s = Schema::builder();
    // Frequencies for bm25; no positions (every word of a search is a term of its own).
    s.add_text_field(
        "content",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        ),
    );
    s.add_text_field("readers", STRING);
    s.add_text_field("document", STRING);
    s.add_u64_field("chunk", NumericOptions::default().set_fast());
    s.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, chunks: &[(i64, &str)], readers: &[&str]) -> Indexed {
        Indexed {
            document_id: id.into(),
            chunks: chunks.iter().map(|(i, t)| (*i, t.to_string())).collect(),
            readers: readers.iter().map(|r| r.to_string()).collect(),
        }
    }

    fn ask<'a>(words: &'a [String], readers: &'a [String]) -> Asked<'a> {
        Asked {
            words,
            any: false,
            readers,
            documents: None,
            limit: 5,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finds_stems_ranks_by_bm25_and_keeps_to_readers() {
        let dir = tempfile::tempdir().unwrap();
        let ix = DocIndex::open(dir.path()).unwrap();
        ix.apply(
            &[
                doc(
                    "a",
                    &[(1, "Pruning roses keeps roses healthy; prune roses hard.")],
                    &["uA"],
                ),
                doc(
                    "b",
                    &[(
                        2,
                        "Tulips are bulbs; roses are mentioned once in passing here.",
                    )],
                    &["uA", "pub"],
                ),
                doc("c", &[(3, "roses roses roses")], &["uB"]),
            ],
            7,
            false,
        )
        .unwrap();
        assert_eq!(ix.through().unwrap(), Some(7));
        let words = strings(&["Rosé"]);
        let a = ix.search(&ask(&words, &strings(&["uA"]))).unwrap();
        assert_eq!(a.hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1, 2]);
        assert!(a.hits[0].1 > a.hits[1].1);
        // Another user sees the public one only; the words of an unknown user nothing.
        let b = ix.search(&ask(&words, &strings(&["uC", "pub"]))).unwrap();
        assert_eq!(b.hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2]);
        // All words, or any.
        let both = strings(&["roses", "pruned"]);
        let all = ix.search(&ask(&both, &strings(&["uA", "uB"]))).unwrap();
        assert_eq!(all.hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1]);
        let both_users = strings(&["uA", "uB"]);
        let mut any = ask(&both, &both_users);
        any.any = true;
        assert_eq!(ix.search(&any).unwrap().hits.len(), 3);
        // One document's chunks only.
        let only = strings(&["b"]);
        let a_only = strings(&["uA"]);
        let mut of_b = ask(&words, &a_only);
        of_b.documents = Some(&only);
        assert_eq!(
            ix.search(&of_b)
                .unwrap()
                .hits
                .iter()
                .map(|h| h.0)
                .collect::<Vec<_>>(),
            vec![2]
        );
    }

    #[test]
    fn a_document_is_replaced_whole_and_a_rebuild_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let ix = DocIndex::open(dir.path()).unwrap();
        ix.apply(
            &[doc("a", &[(1, "kayak one"), (2, "kayak two")], &["uA"])],
            1,
            false,
        )
        .unwrap();
        ix.apply(&[doc("a", &[(3, "kayak three")], &["uA"])], 2, false)
            .unwrap();
        let words = strings(&["kayak"]);
        let found = ix.search(&ask(&words, &strings(&["uA"]))).unwrap();
        assert_eq!(found.hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![3]);
        // No chunks: the document is gone from the index.
        ix.apply(&[doc("a", &[], &["uA"])], 3, false).unwrap();
        assert_eq!(ix.chunks(), 0);
        ix.apply(&[doc("b", &[(4, "canoe")], &["uA"])], 4, false)
            .unwrap();
        ix.apply(&[doc("c", &[(5, "raft")], &["uA"])], 9, true)
            .unwrap();
        assert_eq!(ix.chunks(), 1);
        ix.close_writer().unwrap();
        // Opened again, it is as it was committed.
        drop(ix);
        let ix = DocIndex::open(dir.path()).unwrap();
        assert_eq!((ix.chunks(), ix.through().unwrap()), (1, Some(9)));
        assert!(!ix.ready());
    }

    #[test]
    fn an_unreadable_index_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("meta.json"), b"{ not an index").unwrap();
        let ix = DocIndex::open(dir.path()).unwrap();
        assert_eq!((ix.chunks(), ix.through().unwrap()), (0, None));
    }

    #[test]
    fn snippets_mark_the_words_as_fts5s_do() {
        let dir = tempfile::tempdir().unwrap();
        let ix = DocIndex::open(dir.path()).unwrap();
        let long = format!(
            "{}The refund policy covers a warranty claim. {}",
            "Opening words of a long chunk. ".repeat(8),
            "Closing words of it. ".repeat(8)
        );
        ix.apply(&[doc("a", &[(1, &long)], &["uA"])], 1, false)
            .unwrap();
        let words = strings(&["refunds", "warranty"]);
        let found = ix.search(&ask(&words, &strings(&["uA"]))).unwrap();
        let s = found.snippet(&long);
        assert!(s.contains("[refund]") && s.contains("[warranty]"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert_eq!(s.split_whitespace().count(), SNIPPET_WORDS, "{s}");
        // The words around the matches on both sides.
        assert!(
            s.contains("chunk. The [refund]") && s.contains("claim. Closing"),
            "{s}"
        );
        // A whole short chunk, the words in its own spelling; a stem that is no prefix of
        // its word ("dying" → "die") is found too.
        assert_eq!(
            found.snippet("Refunds, and Warranty!"),
            "[Refunds], and [Warranty]!"
        );
        let die = strings(&["die"]);
        ix.apply(&[doc("b", &[(2, "Dying roses")], &["uA"])], 2, false)
            .unwrap();
        let found = ix.search(&ask(&die, &strings(&["uA"]))).unwrap();
        assert_eq!(found.hits.len(), 1);
        assert_eq!(found.snippet("Dying roses"), "[Dying] roses");
        // Text that holds none of the words (another spelling of a stem): its beginning.
        assert_eq!(found.snippet("short"), "short");
    }

    /// [`may_stem_to`] against the stemmer itself, over every word of the project's guides
    /// (some 140,000 words of prose) and the stemmer's own rewritten words.
    #[test]
    fn a_word_stems_only_to_what_it_begins_with() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut text = std::fs::read_to_string(root.join("README.md")).unwrap();
        for entry in std::fs::read_dir(root.join("docs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                text.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
        text.push_str(" skies skis dying lying tying idly gently ugly early only singly news");
        text.push_str(" happy hoping hopping possibility visibility generously sensitivity");
        let mut words = words_analyzer();
        let mut stream = words.token_stream(&text);
        let mut checked = std::collections::HashSet::new();
        while let Some(t) = stream.next() {
            if checked.insert(t.text.clone()) {
                let stem = stems(std::slice::from_ref(&t.text));
                for s in &stem {
                    assert!(may_stem_to(&t.text, s), "{} stems to {s}", t.text);
                }
            }
        }
        assert!(checked.len() > 5_000, "{} words", checked.len());
        assert!(!may_stem_to("session", "token") && !may_stem_to("the", "token"));
    }
}
