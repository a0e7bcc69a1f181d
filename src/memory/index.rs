//! One user's entries as an inverted index, ranked by Okapi BM25. Pure and synchronous: every
//! memory store keeps its entries however it likes and ranks them through this.

use std::collections::{HashMap, HashSet};

use super::{MemoryEntry, MemoryHit, MAX_ENTRIES_PER_USER, MAX_QUERY_TERMS};
use crate::key::SessionKey;
use crate::state::Seq;

/// BM25's term-frequency saturation: the usual value; a word said three times counts for less
/// than three times a word said once.
const K1: f32 = 1.2;
/// BM25's length normalisation: the usual value; a long answer that mentions a word once ranks
/// below a short message that is about it.
const B: f32 = 0.75;
/// Words longer than this are not indexed: they are hashes, base64 or noise, never what a
/// person searches for, and they would bloat the index.
const MAX_TERM_BYTES: usize = 64;
/// Bytes of text a snippet shows around its first matching word: about two lines.
const SNIPPET_BYTES: usize = 200;

/// The words of a text as the index sees them: lowercase runs of letters and digits.
pub fn tokenize(text: &str) -> impl Iterator<Item = String> + '_ {
    words(text).map(|(_, word)| word)
}

/// Words with their byte offset in `text`.
fn words(text: &str) -> impl Iterator<Item = (usize, String)> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && w.len() <= MAX_TERM_BYTES)
        .map(move |w| {
            // `split` hands out subslices of `text`, so the offset is their distance.
            let offset = w.as_ptr() as usize - text.as_ptr() as usize;
            (offset, w.to_lowercase())
        })
}

/// A query's distinct words, in order, at most [`MAX_QUERY_TERMS`].
pub(crate) fn query_terms(query: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    tokenize(query)
        .filter(|w| seen.insert(w.clone()))
        .take(MAX_QUERY_TERMS)
        .collect()
}

/// One user's entries, searchable. Entries are kept in the order they were added; the oldest
/// are forgotten first when the index outgrows [`MAX_ENTRIES_PER_USER`].
#[derive(Debug, Default, Clone)]
pub struct UserIndex {
    docs: Vec<Doc>,
    /// `(session, seq)` → position in `docs`: ingestion is idempotent.
    ids: HashMap<(SessionKey, Seq), u32>,
    /// word → (position in `docs`, occurrences), positions ascending.
    postings: HashMap<Box<str>, Vec<(u32, u32)>>,
    /// Sum of every doc's length in words, for the average BM25 normalises by.
    total_words: u64,
    /// Highest seq ever added per session; it outlives forgotten entries, so that a session is
    /// never ingested again from before what was forgotten.
    marks: HashMap<SessionKey, Seq>,
}

#[derive(Debug, Clone)]
struct Doc {
    entry: MemoryEntry,
    words: u32,
}

impl UserIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Whether `(key, seq)` is held.
    pub fn contains(&self, key: &SessionKey, seq: Seq) -> bool {
        self.ids.contains_key(&(key.clone(), seq))
    }

    /// The highest seq ever added for the session (0 when none).
    pub fn mark(&self, key: &SessionKey) -> Seq {
        self.marks.get(key).copied().unwrap_or(0)
    }

    /// Every session's mark.
    pub fn marks(&self) -> impl Iterator<Item = (&SessionKey, Seq)> {
        self.marks.iter().map(|(k, s)| (k, *s))
    }

    /// Raises a session's mark to `seq` (used when reloading a mark whose entries were
    /// forgotten).
    pub fn raise_mark(&mut self, key: &SessionKey, seq: Seq) {
        let mark = self.marks.entry(key.clone()).or_insert(0);
        *mark = (*mark).max(seq);
    }

    /// Entries held, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &MemoryEntry> {
        self.docs.iter().map(|d| &d.entry)
    }

    /// Adds an entry unless `(key, seq)` is held. Returns whether it was added. Does not
    /// enforce the bound: call [`UserIndex::forget_oldest`] after a batch.
    pub fn insert(&mut self, entry: MemoryEntry) -> bool {
        let id = (entry.key.clone(), entry.seq);
        if self.ids.contains_key(&id) {
            return false;
        }
        let position =
            u32::try_from(self.docs.len()).expect("an index holds far fewer than 2^32 entries");
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut words = 0u32;
        for word in tokenize(&entry.text) {
            *counts.entry(word).or_insert(0) += 1;
            words += 1;
        }
        for (word, count) in counts {
            self.postings
                .entry(word.into_boxed_str())
                .or_default()
                .push((position, count));
        }
        self.total_words += u64::from(words);
        self.raise_mark(&entry.key, entry.seq);
        self.ids.insert(id, position);
        self.docs.push(Doc { entry, words });
        true
    }

    /// When over [`MAX_ENTRIES_PER_USER`], forgets the oldest tenth (at least the excess) in one
    /// rebuild. Returns the entries forgotten.
    pub fn forget_oldest(&mut self) -> Vec<MemoryEntry> {
        if self.docs.len() <= MAX_ENTRIES_PER_USER {
            return Vec::new();
        }
        let excess = self.docs.len() - MAX_ENTRIES_PER_USER;
        let drop = excess.max(MAX_ENTRIES_PER_USER / 10).min(self.docs.len());
        let docs = std::mem::take(&mut self.docs);
        let (gone, kept): (Vec<_>, Vec<_>) =
            docs.into_iter().enumerate().partition(|(i, _)| *i < drop);
        self.rebuild(kept.into_iter().map(|(_, d)| d.entry));
        gone.into_iter().map(|(_, d)| d.entry).collect()
    }

    /// Removes a session's entries and its mark. Returns how many entries were removed.
    pub fn remove_session(&mut self, key: &SessionKey) -> u64 {
        self.marks.remove(key);
        let before = self.docs.len();
        if !self.docs.iter().any(|d| &d.entry.key == key) {
            return 0;
        }
        let docs = std::mem::take(&mut self.docs);
        self.rebuild(docs.into_iter().map(|d| d.entry).filter(|e| &e.key != key));
        (before - self.docs.len()) as u64
    }

    /// Re-indexes `entries`, keeping the marks.
    fn rebuild(&mut self, entries: impl Iterator<Item = MemoryEntry>) {
        let marks = std::mem::take(&mut self.marks);
        *self = Self::default();
        for entry in entries {
            self.insert(entry);
        }
        for (key, seq) in marks {
            self.raise_mark(&key, seq);
        }
    }

    /// The best `k` entries for `terms` (distinct, from [`query_terms`]), best first; ties go
    /// to the newer entry. Entries sharing no term with the query are not returned.
    pub(crate) fn search(&self, terms: &[String], k: usize) -> Vec<MemoryHit> {
        if self.docs.is_empty() || k == 0 {
            return Vec::new();
        }
        let n = self.docs.len() as f32;
        let average = (self.total_words as f32 / n).max(1.0);
        let mut scores = vec![0f32; self.docs.len()];
        let mut touched = Vec::new();
        for term in terms {
            let Some(postings) = self.postings.get(term.as_str()) else {
                continue;
            };
            let df = postings.len() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(position, count) in postings {
                let slot = position as usize;
                let tf = count as f32;
                let norm = 1.0 - B + B * self.docs[slot].words as f32 / average;
                if scores[slot] == 0.0 {
                    touched.push(position);
                }
                scores[slot] += idf * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
        }
        let better = |a: &u32, b: &u32| {
            scores[*b as usize]
                .total_cmp(&scores[*a as usize])
                .then(b.cmp(a))
        };
        if touched.len() > k {
            touched.select_nth_unstable_by(k - 1, better);
            touched.truncate(k);
        }
        touched.sort_unstable_by(better);
        touched
            .into_iter()
            .map(|position| {
                let doc = &self.docs[position as usize];
                MemoryHit {
                    snippet: snippet(&doc.entry.text, terms),
                    entry: doc.entry.clone(),
                    score: scores[position as usize],
                }
            })
            .collect()
    }
}

/// About [`SNIPPET_BYTES`] of `text` around its first word in `terms`, with `…` where cut.
fn snippet(text: &str, terms: &[String]) -> String {
    if text.len() <= SNIPPET_BYTES {
        return text.to_owned();
    }
    let hit = words(text)
        .find(|(_, w)| terms.contains(w))
        .map_or(0, |(offset, _)| offset);
    let mut start = hit.saturating_sub(SNIPPET_BYTES / 4);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + SNIPPET_BYTES).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end - start + 8);
    if start > 0 {
        out.push('…');
    }
    out.push_str(&text[start..end]);
    if end < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Speaker;

    fn entry(session: &str, seq: Seq, text: &str) -> MemoryEntry {
        MemoryEntry {
            key: SessionKey::new("ada", session).expect("valid key"),
            seq,
            speaker: Speaker::User,
            text: text.into(),
            at_ms: seq,
        }
    }

    #[test]
    fn words_are_lowercase_runs_of_letters_and_digits() {
        let words: Vec<_> = tokenize("Order #A-1234, café!").collect();
        assert_eq!(words, ["order", "a", "1234", "café"]);
        assert_eq!(query_terms("the The the cat"), ["the", "cat"]);
        assert!(query_terms(" ,.!? ").is_empty());
    }

    #[test]
    fn rarer_words_and_shorter_texts_rank_higher() {
        let mut index = UserIndex::new();
        index.insert(entry("a", 1, "my order number is 4471"));
        index.insert(entry(
            "a",
            2,
            "the weather is nice and the order of things is fine today",
        ));
        index.insert(entry("b", 1, "is it raining"));
        let hits = index.search(&query_terms("order number"), 5);
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].entry.seq, 1);
        assert!(hits[0].score > hits[1].score);
        assert!(index.search(&query_terms("volcano"), 5).is_empty());
        assert_eq!(index.search(&query_terms("is"), 2).len(), 2);
    }

    #[test]
    fn the_same_entry_is_added_once() {
        let mut index = UserIndex::new();
        assert!(index.insert(entry("a", 1, "hello")));
        assert!(!index.insert(entry("a", 1, "hello again")));
        assert_eq!(index.len(), 1);
        assert_eq!(index.mark(&entry("a", 0, "").key), 1);
    }

    #[test]
    fn removing_a_session_keeps_the_others_searchable() {
        let mut index = UserIndex::new();
        index.insert(entry("a", 1, "apple pie"));
        index.insert(entry("b", 1, "apple tart"));
        assert_eq!(index.remove_session(&entry("a", 0, "").key), 1);
        let hits = index.search(&query_terms("apple"), 5);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].entry.key.session_id(), "b");
        assert_eq!(index.mark(&entry("a", 0, "").key), 0);
    }

    #[test]
    fn snippets_show_the_first_match_and_mark_cuts() {
        let text = format!("{} needle {}", "x ".repeat(300), "y ".repeat(300));
        let cut = snippet(&text, &["needle".into()]);
        assert!(cut.contains("needle"));
        assert!(cut.starts_with('…') && cut.ends_with('…'));
        assert!(cut.len() <= SNIPPET_BYTES + 8);
    }

    #[test]
    fn the_oldest_tenth_is_forgotten_past_the_bound() {
        let mut index = UserIndex::new();
        for seq in 1..=(MAX_ENTRIES_PER_USER as Seq + 1) {
            index.insert(entry("a", seq, "w"));
        }
        let gone = index.forget_oldest();
        assert_eq!(gone.len(), MAX_ENTRIES_PER_USER / 10);
        assert_eq!(gone[0].seq, 1);
        assert_eq!(index.len(), MAX_ENTRIES_PER_USER + 1 - gone.len());
        assert_eq!(
            index.mark(&entry("a", 0, "").key),
            MAX_ENTRIES_PER_USER as Seq + 1
        );
    }
}
