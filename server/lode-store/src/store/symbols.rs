//! Workspace symbols: `workspace/symbol` lookups over note titles and section headings, and
//! the trigram statistics that choose which trigrams a substring lookup asks the index for.
//!
//! Invariants:
//! - nothing here writes to the store;
//! - every result contains the query, case-insensitively (starts with it, for a query under
//!   three characters): the indexes only narrow the candidates, and each is checked again;
//! - a lookup's cost grows with `limit` (the names read per index and casing are capped), not
//!   with the vault's size — bar the rows a lookup turns down: a name repeated in one note, and
//!   a name holding a query's trigrams but not the query, cost reads (never answers);
//! - results are titles first, then sections by path and line, each symbol once;
//! - the trigram sample guides which trigrams are asked for, never what is returned, so a
//!   stale one costs time, not correctness; a process keeps only full samples, of at most eight
//!   databases.

use std::path::PathBuf;

use rusqlite::params;

use super::Store;
use crate::error::StoreError;

impl Store {
    /// Note titles and section headings whose text contains `query` (case-insensitive, with
    /// Unicode case folding; `%`, `_`, `\\` and `"` are literal), for `workspace/symbol`:
    /// `(path, name, line, is_title)`, titles first, then by path.
    ///
    /// Names that start with the query are read first, through the folded-name indexes (a range
    /// scan: cheap whatever the vault's size). A query of three or more characters (its own
    /// characters, before folding) also matches anywhere in a name, through the trigram indexes
    /// — unless the names starting with it already fill `limit`: a long query's trigram lookup
    /// (a few doclists: see [`trigram_match`]) is the slow part on a large vault, while typing a
    /// name from its start is the common case. A short query (SQL's `lower()` folds ASCII only)
    /// is looked up once per spelling of its letters (see [`casings`]). Rows are read until
    /// about 1.5 × `limit` distinct symbols per kind, index and spelling are kept; the rows a
    /// lookup turns down (repeats, decoys) are the only reads beyond that.
    pub fn symbols(&self, query: &str, limit: usize) -> Result<Vec<(String, String, usize, bool)>, StoreError> {
        // One snapshot for every lookup: the substring lookup skips rows by the ids the prefix
        // lookup read, and a save committed between the two may give a new heading a freed id.
        let _snapshot = if self.conn.is_autocommit() { Some(self.conn.unchecked_transaction().map_err(|e| self.err(e))?) } else { None };
        let folded = query.to_lowercase();
        let short = query.chars().count() < 3;
        let matches = |s: &str| {
            let name = s.to_lowercase();
            if short {
                name.starts_with(&folded)
            } else {
                name.contains(&folded)
            }
        };
        // Symbols kept per index (and spelling): a little over the limit, since every name a
        // prefix or trigram lookup keeps holds the query, bar Unicode folding differences.
        let cap = ((limit + limit / 2).max(limit + 16)).min(SYMBOL_CANDIDATES.max(limit)) as i64;
        type Titles = Vec<(String, String)>;
        type Sections = Vec<(String, String, i64)>;
        // The rows a prefix lookup read (notes' ids for titles, headings' for sections): each
        // is among the answers already (a repeat's name and note are), so a substring lookup,
        // which finds them again, skips them before reading a row of theirs.
        #[derive(Default)]
        struct Read {
            titles: Vec<i64>,
            sections: Vec<i64>,
        }
        let by_prefix = |prefix: &str| -> Result<(Titles, Sections, Read), StoreError> {
            let titles: Vec<(String, String, i64)> = self.rows(
                "SELECT path, title, id FROM notes WHERE lower(title) >= ?1 AND lower(title) < ?1 || char(1114111)
                   AND head_version IS NOT NULL AND kind = 'note' LIMIT ?2",
                params![prefix, cap],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            // A note may repeat a name any number of times: the rows are read until `cap`
            // distinct symbols are, so the repeats of one note never hide another note's.
            let mut seen = std::collections::HashSet::new();
            let mut ids = Vec::new();
            let sections = self.kept_rows(
                SECTIONS_BY_PREFIX,
                params![prefix, -1i64],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?)),
                |(p, n, _, id)| {
                    ids.push(*id);
                    seen.insert((p.clone(), n.clone()))
                },
                cap,
            )?;
            let read = Read { titles: titles.iter().map(|t| t.2).collect(), sections: ids };
            Ok((titles.into_iter().map(|(p, t, _)| (p, t)).collect(), sections.into_iter().map(|(p, n, l, _)| (p, n, l)).collect(), read))
        };
        let by_trigram = |read: &Read| -> Result<(Titles, Sections), StoreError> {
            let Some((fts, exact)) = trigram_match(query, || self.trigram_counts())? else {
                return Ok((Vec::new(), Vec::new()));
            };
            let titles = self.titles_matching(&fts, exact.as_deref(), &folded, &read.titles, cap)?;
            // Checked where SQL could not (see `trigram_match`), and each symbol once.
            let mut seen = std::collections::HashSet::new();
            let sections = self.kept_rows(
                "SELECT h.path, h.name, h.line FROM headings_tri t JOIN headings h ON h.id = t.rowid
                   WHERE headings_tri MATCH ?1
                    AND t.rowid NOT IN (SELECT value FROM json_each(?4))
                    AND (?3 IS NULL OR instr(lower(replace(h.name, char(8490), 'k')), ?3) > 0) LIMIT ?2",
                params![fts, -1i64, exact, id_list(&read.sections)],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)),
                |(p, n, _)| (exact.is_some() || n.to_lowercase().contains(&folded)) && seen.insert((p.clone(), n.clone())),
                cap,
            )?;
            Ok((titles, sections))
        };
        // Distinct symbols among candidates (a name may repeat within a note).
        let distinct = |t: &Titles, s: &Sections| {
            let mut seen: std::collections::HashSet<(&str, &str)> = std::collections::HashSet::new();
            t.iter().filter(|(_, n)| matches(n)).for_each(|(p, n)| {
                seen.insert((p, n));
            });
            s.iter().filter(|(_, n, _)| matches(n)).for_each(|(p, n, _)| {
                seen.insert((p, n));
            });
            seen.len()
        };
        let (titles, sections) = if folded.is_ascii() && !short {
            let (mut titles, mut sections, read) = by_prefix(&folded)?;
            if distinct(&titles, &sections) < limit {
                let (t, s) = by_trigram(&read)?;
                titles.extend(t);
                sections.extend(s);
            }
            (titles, sections)
        } else if !short {
            by_trigram(&Read::default())?
        } else {
            // SQL's lower() folds ASCII only, so a name's non-ASCII letters keep their case in
            // the folded-name indexes: a short query is looked up once per spelling of its
            // letters ("é" as "é" and "É", "k" as "k" and the Kelvin sign), each a range scan.
            let (mut titles, mut sections) = (Vec::new(), Vec::new());
            for prefix in casings(query) {
                let (t, s, _) = by_prefix(&prefix)?;
                titles.extend(t);
                sections.extend(s);
            }
            (titles, sections)
        };
        let mut out: Vec<(String, String, usize, bool)> =
            titles.into_iter().filter(|(_, t)| matches(t)).map(|(p, t)| (p, t, 1, true)).collect();
        out.sort();
        out.dedup();
        out.truncate(limit);
        // A heading's symbol sits at its line (a name repeated in a note: its first line).
        let mut first: std::collections::BTreeMap<(String, String), i64> = std::collections::BTreeMap::new();
        for (path, name, line) in sections.into_iter().filter(|(_, n, _)| matches(n)) {
            let e = first.entry((path, name)).or_insert(line);
            *e = (*e).min(line);
        }
        let mut rest: Vec<(String, String, i64)> = first.into_iter().map(|((p, n), l)| (p, n, l)).collect();
        rest.sort_by(|a, b| (&a.0, a.2).cmp(&(&b.0, b.2)));
        for (path, name, line) in rest {
            if out.len() >= limit {
                break;
            }
            if !out.iter().any(|(p, n, _, _)| *p == path && *n == name) {
                out.push((path, name, line.max(1) as usize, false));
            }
        }
        Ok(out)
    }
}

/// Section headings whose folded name starts with `?1`: `(path, name, line, id)`. The
/// folded-name index carries the name, line and note path (schema v11), so no row of
/// `headings` or `notes` is read: on a large vault whose pages are not cached, those were two
/// scattered reads per answer.
const SECTIONS_BY_PREFIX: &str = "SELECT h.path, h.name, h.line, h.id FROM headings h
  WHERE lower(h.name) >= ?1 AND lower(h.name) < ?1 || char(1114111) LIMIT ?2";

/// Row ids as a JSON array, for `NOT IN (SELECT value FROM json_each(?))`.
fn id_list(ids: &[i64]) -> String {
    serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_owned())
}

/// How often each trigram occurs in a sample of folded names: letters and digits each count
/// on their own, space is one class and every other byte another (a heuristic: which of a
/// query's trigrams are rare).
pub(crate) struct TrigramCounts(Vec<u32>);

impl TrigramCounts {
    fn class(b: u8) -> usize {
        match b {
            b'a'..=b'z' => (b - b'a') as usize,
            b'0'..=b'9' => 26 + (b - b'0') as usize,
            b' ' => 36,
            _ => 37,
        }
    }

    fn slot(t: &[u8]) -> usize {
        (Self::class(t[0]) * 38 + Self::class(t[1])) * 38 + Self::class(t[2])
    }

    fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> TrigramCounts {
        let mut counts = TrigramCounts(vec![0; 38 * 38 * 38]);
        let mut seen: Vec<usize> = Vec::new();
        for name in names {
            seen.clear();
            seen.extend(name.as_bytes().windows(3).map(Self::slot));
            seen.sort_unstable();
            seen.dedup();
            for &s in &seen {
                counts.0[s] += 1;
            }
        }
        counts
    }

    fn get(&self, t: &[u8]) -> u32 {
        self.0[Self::slot(t)]
    }
}

/// Names sampled for [`TrigramCounts`]: the most recent headings and titles.
const TRIGRAM_SAMPLE: i64 = 2000;

/// Each database's sample, read once per process (by the first of its connections to need it):
/// it guides which trigrams a lookup asks for, never what it returns, so it may be old.
static TRIGRAM_SAMPLES: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<PathBuf, std::sync::Arc<TrigramCounts>>>> =
    std::sync::LazyLock::new(Default::default);

impl Store {
    /// Live notes whose title holds `query` (3 characters or more) anywhere, case-insensitively:
    /// `(path, title)`, at most `cap`; for link completion. See [`Store::symbols`].
    pub(crate) fn titles_containing(&self, query: &str, cap: i64) -> Result<Vec<(String, String)>, StoreError> {
        let Some((fts, exact)) = trigram_match(query, || self.trigram_counts())? else {
            return Ok(Vec::new());
        };
        self.titles_matching(&fts, exact.as_deref(), &query.to_lowercase(), &[], cap)
    }

    /// Live notes whose title matches the trigram-index query `fts` and holds `exact` (checked
    /// in SQL) or, when there is none, `folded` (checked here), bar the notes `skip` names:
    /// `(path, title)`, at most `cap`.
    fn titles_matching(
        &self,
        fts: &str,
        exact: Option<&str>,
        folded: &str,
        skip: &[i64],
        cap: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let sql = "SELECT n.path, n.title FROM titles_tri t JOIN notes n ON n.id = t.rowid
              WHERE titles_tri MATCH ?1 AND t.rowid NOT IN (SELECT value FROM json_each(?4))
                AND n.head_version IS NOT NULL AND n.kind = 'note'
                AND (?3 IS NULL OR instr(lower(replace(n.title, char(8490), 'k')), ?3) > 0) LIMIT ?2";
        self.kept_rows(
            sql,
            params![fts, -1i64, exact, id_list(skip)],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            |(_, t)| exact.is_some() || t.to_lowercase().contains(folded),
            cap,
        )
    }

    /// The rows of `sql` as they come, keeping those `keep` accepts, until `cap` are kept (the
    /// query's own `LIMIT` should be none). What is read is bounded by the rows the query
    /// matches, not by `cap`: rows `keep` turns down — a name repeated in a note, a name holding
    /// a query's trigrams but not the query — cost reads, never answers.
    fn kept_rows<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
        mut keep: impl FnMut(&T) -> bool,
        cap: i64,
    ) -> Result<Vec<T>, StoreError> {
        let mut st = self.conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        if cap <= 0 {
            return Ok(out);
        }
        for row in st.query_map(params, map).map_err(|e| self.err(e))? {
            let row = row.map_err(|e| self.err(e))?;
            if keep(&row) {
                out.push(row);
                if out.len() as i64 >= cap {
                    break;
                }
            }
        }
        Ok(out)
    }
}

impl Store {
    /// The sample of this database, kept for the process once it is full: a sample of a
    /// database still being filled (a first scan) is read again at each lookup, which costs
    /// little while the names are few.
    fn trigram_counts(&self) -> Result<std::sync::Arc<TrigramCounts>, StoreError> {
        if let Some(c) = TRIGRAM_SAMPLES.lock().unwrap_or_else(|e| e.into_inner()).get(&self.path) {
            return Ok(c.clone());
        }
        let names = self.rows(
            "SELECT * FROM (SELECT lower(name) FROM headings ORDER BY id DESC LIMIT ?1)
             UNION ALL SELECT * FROM (SELECT lower(title) FROM notes ORDER BY id DESC LIMIT ?2)",
            params![TRIGRAM_SAMPLE, TRIGRAM_SAMPLE / 4],
            |r| r.get::<_, String>(0),
        )?;
        let full = names.len() as i64 >= TRIGRAM_SAMPLE;
        let c = std::sync::Arc::new(TrigramCounts::of(names.iter().map(String::as_str)));
        if full {
            let mut samples = TRIGRAM_SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
            // A process that opens many databases (tests) keeps a few.
            if samples.len() >= 8 {
                samples.clear();
            }
            samples.insert(self.path.clone(), c.clone());
        }
        Ok(c)
    }
}

/// The spellings of a short query as SQL's `lower()` leaves names (ASCII letters lowercase,
/// every other character as written): each character in every form whose lowercase is its
/// lowercase ("é" → "é", "É"; "ß" → "ß", "ẞ"; "k" → "k", the Kelvin sign "K"). "İ" is the one
/// character whose lowercase is two ("i̇"), so it also spells an "i" that ends the query and an
/// "i" followed by U+0307. A query here has at most two characters, so a few strings.
fn casings(query: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = query.chars().peekable();
    while let Some(c) = chars.next() {
        let lower: Vec<char> = c.to_lowercase().collect();
        let mut forms: Vec<String> = vec![c.to_string()];
        if let [l] = lower[..] {
            forms.push(l.to_string());
            forms.extend(same_lowercase(l).iter().map(char::to_string));
        } else {
            forms.push(lower.iter().collect());
        }
        if lower == ['i'] && chars.peek().is_none() {
            forms.push("\u{130}".to_owned());
        }
        // A name's "Σ" lowercases to "ς" where it ends a word (Rust's final-sigma rule).
        if c == 'ς' {
            forms.push("Σ".to_owned());
        }
        let mut forms: Vec<String> = forms.into_iter().map(|f| f.to_ascii_lowercase()).collect();
        if lower == ['i'] && chars.peek() == Some(&'\u{307}') {
            chars.next();
            forms = forms.into_iter().map(|f| f + "\u{307}").chain(["\u{130}".to_owned()]).collect();
        }
        forms.sort();
        forms.dedup();
        out = out.iter().flat_map(|p| forms.iter().map(move |f| format!("{p}{f}"))).collect();
    }
    out.sort();
    out.dedup();
    out
}

/// The characters other than `lower` whose lowercase is `lower` alone ('k': 'K' and the Kelvin
/// sign; 'ß': 'ẞ'), from every character's lowercase, computed once per process.
fn same_lowercase(lower: char) -> &'static [char] {
    static BY_LOWER: std::sync::LazyLock<std::collections::HashMap<char, Vec<char>>> = std::sync::LazyLock::new(|| {
        let mut map: std::collections::HashMap<char, Vec<char>> = std::collections::HashMap::new();
        // Every cased letter is in the first two planes.
        for u in (0..0x20000).filter_map(char::from_u32) {
            let mut l = u.to_lowercase();
            if let (Some(l), None) = (l.next(), l.next()) {
                if l != u {
                    map.entry(l).or_default().push(u);
                }
            }
        }
        map
    });
    BY_LOWER.get(&lower).map_or(&[], Vec::as_slice)
}

/// The trigram-index query for a substring lookup of `query`, and the ASCII-folded needle SQL
/// checks each candidate for, when it can (`instr(lower(name), needle)`, the Kelvin sign read
/// as "k": SQL's `lower()` leaves it, the tokenizer and Rust fold it to "k"); `None` for a query
/// of fewer than 3 characters, which has no trigram.
///
/// Known gap: the trigram tokenizer does not fold "İ" (U+0130), whose lowercase in Rust is "i"
/// followed by U+0307, so a lookup of 3 or more characters whose trigrams cross such a letter of a name
/// ("kadi" in "KADİR") does not find it; prefix lookups of 1-2 characters do (see [`casings`]).
///
/// The trigram indexes keep no positions (`detail=none`, schema v10): a query is trigrams joined
/// by AND, which finds the names holding all of them in any order, and the substring is checked
/// on each candidate. Checked in SQL, `LIMIT` stays exact. An ASCII query of up to six
/// characters asks for each of its (at most four) trigrams. A longer one asks for at most
/// [`TRIGRAM_PICKS`], the rarest (by `counts`, a sample of names) of its words and word
/// boundaries: every trigram costs a doclist (a 20-character query has 18, most of them
/// common), and the candidates are at most the names holding the rarest one. Trigrams picked
/// by position instead (first, last, evenly between) cost up to 25 ms on the 100k-note vault
/// when a query repeats a word ("onboarding onb": its picks were four common trigrams matching
/// every "Onboarding …" heading). A non-ASCII query asks for its trigrams by character (at
/// most [`UNCHECKED_PICKS`], spread over it) with no needle: `lower()` folds ASCII only, while
/// the trigram tokenizer folds all of Unicode, so its candidates are checked by the caller.
fn trigram_match<C: std::ops::Deref<Target = TrigramCounts>>(
    query: &str,
    counts: impl FnOnce() -> Result<C, StoreError>,
) -> Result<Option<(String, Option<String>)>, StoreError> {
    if query.chars().count() < 3 {
        // No trigram: FTS5 reads an empty query as a syntax error.
        return Ok(None);
    }
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let and = |picks: &[&str]| picks.iter().map(|t| quote(t)).collect::<Vec<_>>().join(" AND ");
    let folded = query.to_lowercase();
    if !folded.is_ascii() {
        let bounds: Vec<usize> = query.char_indices().map(|(i, _)| i).chain([query.len()]).collect();
        let all: Vec<&str> = (0..bounds.len().saturating_sub(3)).map(|k| &query[bounds[k]..bounds[k + 3]]).collect();
        let mut picks: Vec<&str> = Vec::new();
        let n = all.len();
        let spread = UNCHECKED_PICKS.min(n);
        for k in 0..spread {
            let t = all[if spread == 1 { 0 } else { k * (n - 1) / (spread - 1) }];
            if !picks.contains(&t) {
                picks.push(t);
            }
        }
        return Ok(Some((and(&picks), None)));
    }
    if folded.len() <= 6 {
        let mut picks: Vec<&str> = Vec::new();
        for i in 0..folded.len() - 2 {
            let t = &folded[i..i + 3];
            if !picks.contains(&t) {
                picks.push(t);
            }
        }
        return Ok(Some((and(&picks), Some(folded))));
    }
    let counts = counts()?;
    // Trigrams of one word occur together (every "invoice" holds "nvo" and "ice"): asking for
    // two of them narrows nothing. So each word gives its rarest trigram, the trigrams across
    // word boundaries give theirs (they carry the words' order), and the rarest of those go
    // to the index; among equals the later one, as what was typed last narrows most.
    let bytes = folded.as_bytes();
    let count = |i: usize| counts.get(&bytes[i..i + 3]);
    let word = |b: u8| b.is_ascii_alphanumeric();
    let mut best: Vec<(u32, std::cmp::Reverse<usize>)> = Vec::new();
    let mut group: Option<(u32, std::cmp::Reverse<usize>)> = None;
    let mut boundary: Option<(u32, std::cmp::Reverse<usize>)> = None;
    for i in 0..bytes.len() - 2 {
        let inside = bytes[i..i + 3].iter().all(|&b| word(b));
        let slot = if inside { &mut group } else { &mut boundary };
        let key = (count(i), std::cmp::Reverse(i));
        if slot.is_none_or(|k| key < k) {
            *slot = Some(key);
        }
        // A word ends where the next trigram leaves it.
        if inside && !bytes.get(i + 3).is_some_and(|&b| word(b)) {
            best.extend(group.take());
        }
    }
    best.extend(group);
    best.extend(boundary);
    best.sort();
    let mut picks: Vec<&str> = Vec::new();
    for (_, std::cmp::Reverse(i)) in best {
        let t = &folded[i..i + 3];
        if picks.len() < TRIGRAM_PICKS && !picks.contains(&t) {
            picks.push(t);
        }
    }
    Ok(Some((and(&picks), Some(folded))))
}

/// Trigrams a non-ASCII substring lookup asks the index for.
const UNCHECKED_PICKS: usize = 6;

/// Trigrams a long substring lookup asks the index for.
const TRIGRAM_PICKS: usize = 4;

/// Matches read per kind (titles, sections) for one `workspace/symbol` query.
pub const SYMBOL_CANDIDATES: usize = 2000;

#[cfg(test)]
mod tests {
    use super::TrigramCounts;

    #[test]
    fn a_prefix_lookup_of_sections_reads_the_folded_name_index_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let store = crate::Store::open(&tmp.path().join("lode.db"), crate::StoreOptions::default()).unwrap();
        let plan: Vec<String> = store
            .rows(&format!("EXPLAIN QUERY PLAN {}", super::SECTIONS_BY_PREFIX), rusqlite::params!["ab", 10], |r| r.get::<_, String>(3))
            .unwrap();
        assert!(plan.iter().any(|p| p.contains("COVERING INDEX headings_folded")), "{plan:?}");
    }

    #[test]
    fn a_short_query_is_spelled_every_way_a_name_may_hold_it() {
        assert_eq!(super::casings("Ab"), ["ab"]);
        assert_eq!(super::casings("k"), ["k", "\u{212a}"], "the Kelvin sign lowercases to k");
        assert_eq!(super::casings("ß"), ["ß", "ẞ"]);
        assert_eq!(super::casings("é"), ["É", "é"]);
        assert_eq!(super::casings("i"), ["i", "İ"], "İ lowercases to i + U+0307, which starts with i");
        assert_eq!(super::casings("ix"), ["ix"]);
        assert_eq!(super::casings("İ"), ["i\u{307}", "İ"]);
        assert_eq!(super::casings("i\u{307}"), ["i\u{307}", "İ"]);
    }

    #[test]
    fn a_substring_lookup_asks_for_the_rarest_trigram_of_each_word_and_of_the_boundaries() {
        // A sample where "ing", "ng " and " on" are common, and the rest of "onboarding" rare.
        let mut names = vec!["onboarding"; 50];
        names.extend(["sing now"; 250]);
        names.extend(["turn on"; 250]);
        names.extend(["big old"; 30]);
        let counts = TrigramCounts::of(names);
        let trigram_match = |q: &str, c: &TrigramCounts| super::trigram_match(q, || Ok(c)).unwrap().unwrap();
        // "onboarding onb": the word's own trigrams are equally rare, and the later one of
        // the repeated word says nothing new; the boundary gives the rare "g o".
        let (fts, exact) = trigram_match("Onboarding onb", &counts);
        assert_eq!(exact.as_deref(), Some("onboarding onb"));
        let picks: Vec<&str> = fts.split(" AND ").collect();
        assert_eq!(picks.len(), 3, "{fts}");
        assert!(picks.contains(&"\"g o\""), "{fts}");
        assert!(!picks.contains(&"\"ing\"") && !picks.contains(&"\"ng \"") && !picks.contains(&"\" on\""), "{fts}");
        // At most four trigrams are asked for, one per word or boundary.
        let (fts, _) = trigram_match("alpha bravo charlie delta echo", &counts);
        assert_eq!(fts.split(" AND ").count(), 4, "{fts}");
        // A trigram holding a quote is quoted with the quote doubled.
        let (fts, exact) = trigram_match("qq\"rrrr", &counts);
        assert_eq!((fts.as_str(), exact.as_deref()), ("\"rrr\" AND \"\"\"rr\"", Some("qq\"rrrr")));
        // A short ASCII query asks for each of its trigrams, once.
        assert_eq!(trigram_match("Abcabc", &counts), ("\"abc\" AND \"bca\" AND \"cab\"".to_owned(), Some("abcabc".to_owned())));
        assert_eq!(trigram_match("abc", &counts), ("\"abc\"".to_owned(), Some("abc".to_owned())));
        // A non-ASCII query: its trigrams by character, as typed (the tokenizer folds them),
        // at most six spread over it, and nothing SQL could check.
        assert_eq!(trigram_match("Straße", &counts), ("\"Str\" AND \"tra\" AND \"raß\" AND \"aße\"".to_owned(), None));
        let (fts, exact) = trigram_match("straße und weg nach hause", &counts);
        let picks: Vec<&str> = fts.split(" AND ").collect();
        assert_eq!((picks.len(), picks[0], picks[5], exact), (6, "\"str\"", "\"use\"", None), "{fts}");
    }
}
