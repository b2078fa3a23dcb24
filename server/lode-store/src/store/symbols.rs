//! Workspace symbols: `workspace/symbol` lookups over note titles and section headings, and
//! the trigram statistics that choose which trigrams a substring lookup asks the index for.
//!
//! Invariants:
//! - nothing here writes to the store;
//! - every result contains the query, case-insensitively (starts with it, for a query under
//!   three characters): the indexes only narrow the candidates, and each is checked again;
//! - a lookup's cost grows with `limit` (the names read per index and casing are capped), not
//!   with the vault's size;
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
    /// scan: cheap whatever the vault's size). A query of three or more characters also matches
    /// anywhere in a name, through the trigram indexes — unless the names starting with it
    /// already fill `limit`: a long query's trigram lookup (at most four posting lists, the
    /// rarest of its words and word boundaries) is the slow part on a large vault, while typing
    /// a name from its start is the common case. A short non-ASCII query (SQL's `lower()` folds
    /// ASCII only) is looked up once per casing of its non-ASCII letters. Cost grows with the
    /// names read — about 1.5 × `limit` per kind, index and casing —, not with the vault.
    pub fn symbols(&self, query: &str, limit: usize) -> Result<Vec<(String, String, usize, bool)>, StoreError> {
        let folded = query.to_lowercase();
        let short = folded.chars().count() < 3;
        let matches = |s: &str| {
            let name = s.to_lowercase();
            if short {
                name.starts_with(&folded)
            } else {
                name.contains(&folded)
            }
        };
        // Names read per index (and casing): a little over the limit, since every name a prefix
        // or trigram lookup returns contains the query, bar Unicode folding differences.
        let cap = ((limit + limit / 2).max(limit + 16)).min(SYMBOL_CANDIDATES.max(limit)) as i64;
        type Titles = Vec<(String, String)>;
        type Sections = Vec<(String, String, i64)>;
        let by_prefix = |prefix: &str| -> Result<(Titles, Sections), StoreError> {
            let titles = self.rows(
                "SELECT path, title FROM notes WHERE lower(title) >= ?1 AND lower(title) < ?1 || char(1114111)
                   AND head_version IS NOT NULL AND kind = 'note' LIMIT ?2",
                params![prefix, cap],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )?;
            let sections = self.rows(
                "SELECT n.path, h.name, h.line FROM headings h JOIN notes n ON n.id = h.note_id
                  WHERE lower(h.name) >= ?1 AND lower(h.name) < ?1 || char(1114111) LIMIT ?2",
                params![prefix, cap],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)),
            )?;
            Ok((titles, sections))
        };
        let by_trigram = || -> Result<(Titles, Sections), StoreError> {
            let (fts, exact) = trigram_match(query, || self.trigram_counts())?;
            let titles = self.rows(
                "SELECT n.path, n.title FROM titles_tri t JOIN notes n ON n.id = t.rowid
                  WHERE titles_tri MATCH ?1 AND n.head_version IS NOT NULL AND n.kind = 'note'
                    AND (?3 IS NULL OR instr(lower(n.title), ?3) > 0) LIMIT ?2",
                params![fts, cap, exact],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )?;
            let sections = self.rows(
                "SELECT n.path, h.name, h.line FROM headings_tri t JOIN headings h ON h.id = t.rowid
                   JOIN notes n ON n.id = h.note_id WHERE headings_tri MATCH ?1
                    AND (?3 IS NULL OR instr(lower(h.name), ?3) > 0) LIMIT ?2",
                params![fts, cap, exact],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)),
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
        let (titles, sections) = if folded.is_ascii() {
            let (mut titles, mut sections) = by_prefix(&folded)?;
            if !short && distinct(&titles, &sections) < limit {
                let (t, s) = by_trigram()?;
                titles.extend(t);
                sections.extend(s);
            }
            (titles, sections)
        } else if !short {
            by_trigram()?
        } else {
            // SQL's lower() folds ASCII only, so a name's non-ASCII letters keep their case in
            // the folded-name indexes: a short query is looked up once per casing of its
            // non-ASCII letters ("é" as "é" and "É"), each a range scan.
            let (mut titles, mut sections) = (Vec::new(), Vec::new());
            for prefix in casings(query) {
                let (t, s) = by_prefix(&prefix)?;
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

/// The spellings of a short query as SQL's `lower()` leaves names: ASCII letters lowercase,
/// each other character as typed, in lowercase and in uppercase ("é" → "é", "É"; "İ" → "İ",
/// "i̇"): at most 3ⁿ strings for n such characters, and a query here has at most two.
fn casings(query: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for c in query.chars() {
        let mut forms: Vec<String> = if c.is_ascii() {
            vec![c.to_ascii_lowercase().to_string()]
        } else {
            [c.to_string(), c.to_lowercase().collect(), c.to_uppercase().collect()].into_iter().map(|f: String| f.to_ascii_lowercase()).collect()
        };
        forms.sort();
        forms.dedup();
        out = out.iter().flat_map(|p| forms.iter().map(move |f| format!("{p}{f}"))).collect();
    }
    out.sort();
    out.dedup();
    out
}

/// The trigram-index query for a substring lookup of `query` (at least 3 characters), and the
/// folded needle the rows must then contain, if the index query alone does not guarantee it.
///
/// A phrase of every trigram costs one doclist per trigram: a 20-character query reads 18,
/// most of them common. An ASCII query instead asks for at most [`TRIGRAM_PICKS`] trigrams, the
/// rarest (by `counts`, a sample of names) of its words and word boundaries, and checks the
/// substring on the candidate rows with `instr`, which keeps `LIMIT` exact: the candidates are at most the names holding the
/// rarest trigram. Trigrams picked by position instead (first, last, evenly between) cost up
/// to 25 ms on the 100k-note vault when a query repeats a word ("onboarding onb": its picks
/// were four common trigrams matching every "Onboarding …" heading). Non-ASCII queries keep
/// the phrase: `lower()` folds ASCII only, while the trigram tokenizer folds all of Unicode.
fn trigram_match<C: std::ops::Deref<Target = TrigramCounts>>(
    query: &str,
    counts: impl FnOnce() -> Result<C, StoreError>,
) -> Result<(String, Option<String>), StoreError> {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let folded = query.to_lowercase();
    if !folded.is_ascii() || folded.len() <= 6 {
        return Ok((quote(query), None));
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
    let fts = picks.iter().map(|t| quote(t)).collect::<Vec<_>>().join(" AND ");
    Ok((fts, Some(folded)))
}

/// Trigrams a long substring lookup asks the index for.
const TRIGRAM_PICKS: usize = 4;

/// Matches read per kind (titles, sections) for one `workspace/symbol` query.
pub const SYMBOL_CANDIDATES: usize = 2000;

#[cfg(test)]
mod tests {
    use super::TrigramCounts;

    #[test]
    fn a_substring_lookup_asks_for_the_rarest_trigram_of_each_word_and_of_the_boundaries() {
        // A sample where "ing", "ng " and " on" are common, and the rest of "onboarding" rare.
        let mut names = vec!["onboarding"; 50];
        names.extend(["sing now"; 250]);
        names.extend(["turn on"; 250]);
        names.extend(["big old"; 30]);
        let counts = TrigramCounts::of(names);
        let trigram_match = |q: &str, c: &TrigramCounts| super::trigram_match(q, || Ok(c)).unwrap();
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
        // Short and non-ASCII queries: the phrase, nothing to check after.
        assert_eq!(trigram_match("abcdef", &counts), ("\"abcdef\"".to_owned(), None));
        assert_eq!(trigram_match("straße und", &counts), ("\"straße und\"".to_owned(), None));
    }
}
