//! Lexical search: BM25 over head passages through FTS5. AND-mode over all content terms first;
//! when that finds fewer hits than asked for, OR-mode over the few most selective terms fills the
//! rest (a natural-language question rarely has every word in one passage).
//!
//! Sections rank, passages are cited: with `sections` on, the candidates of both modes are
//! grouped by section (note and heading path) and sections are ordered by how many of the
//! question's terms all their candidate passages hold together, then by the sum of their best
//! passages' BM25. A note written one sentence per paragraph then ranks like the same note
//! written as one paragraph, while each hit is still one exact passage.

use lode_core::query;
use rusqlite::params;

use crate::error::StoreError;
use crate::store::Store;

#[derive(Debug, Clone)]
pub struct SearchOptions {
    pub limit: usize,
    /// How many of the most selective terms OR-mode uses.
    pub or_terms: usize,
    /// BM25 weight of the heading column (note title + heading path) against the text column.
    pub heading_weight: f64,
    /// Fill up to `limit` with OR-mode hits after AND-mode ones (else OR only when AND is empty).
    pub fill: bool,
    /// Build snippets (costs a tokenization of every hit; evaluation turns it off).
    pub snippets: bool,
    /// Rank sections from all their passages (see the module comment); off: passages alone.
    pub sections: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { limit: 10, or_terms: 12, heading_weight: 2.0, fill: true, snippets: true, sections: true }
    }
}

/// Passages of a section whose BM25 scores add up to the section's score.
const SECTION_BEST: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchMode {
    /// Every content term is in the passage.
    All,
    /// Some of the most selective terms are.
    Any,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Hit {
    pub passage_id: i64,
    pub note_id: i64,
    pub path: String,
    pub title: String,
    pub version_id: String,
    pub start: usize,
    pub end: usize,
    pub line: usize,
    /// The passage's block kind (`paragraph`, `list_item`, …).
    #[serde(rename = "block")]
    pub kind: String,
    pub heading: String,
    /// BM25 relevance (higher is better); comparable only within one mode of one query.
    pub score: f64,
    pub mode: MatchMode,
    /// The passage text around the matched terms, which are wrapped in « ».
    pub snippet: String,
    pub text: String,
    pub parent_start: usize,
    pub parent_end: usize,
    /// A note of the vault, or the snapshot of an external (then `url` and `fetched_at`).
    #[serde(rename = "kind")]
    pub source: Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// When the snapshot's text was first fetched (unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<i64>,
    /// When a fetch last confirmed it (unix ms): its age counts from here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen_at: Option<i64>,
}

/// Where a passage comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    #[default]
    Note,
    Snapshot,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SearchResult {
    pub terms: Vec<String>,
    /// Terms used by OR-mode, when it ran.
    pub or_terms: Vec<String>,
    pub hits: Vec<Hit>,
}

impl Store {
    pub fn search(&self, question: &str, opts: &SearchOptions) -> Result<SearchResult, StoreError> {
        let terms = query::terms(question);
        let mut result = SearchResult { terms: terms.clone(), or_terms: Vec::new(), hits: Vec::new() };
        if opts.limit == 0 {
            return Ok(result);
        }
        // AND-mode: every term in the passage or its headings, and at least one in the passage
        // itself (a note title carrying the question's words would otherwise qualify every passage
        // of that note). Ranked by how many terms the passage text itself holds, then BM25, from
        // a wider BM25 shortlist: short passages win BM25 even when they hold fewer of the terms.
        let (Some(all), Some(any)) = (query::and_query(&terms), query::or_query(&terms)) else { return Ok(result) };
        let and = format!("({all}) AND {{body}} : ({any})");
        if opts.sections {
            return self.search_sections(result, &and, opts);
        }
        let mut hits = self.run(&and, (opts.limit * 4).max(40), &SearchOptions { snippets: false, ..opts.clone() }, MatchMode::All)?;
        rank_by_coverage(&mut hits, &terms);
        hits.truncate(opts.limit);
        if opts.snippets {
            self.add_snippets(&and, &mut hits)?;
        }
        result.hits = hits;
        let want_or = if opts.fill { result.hits.len() < opts.limit } else { result.hits.is_empty() };
        if want_or && terms.len() > 1 {
            let selective = self.most_selective(&terms, opts.or_terms)?;
            if let Some(or) = query::or_query(&selective) {
                let seen: std::collections::HashSet<i64> = result.hits.iter().map(|h| h.passage_id).collect();
                let extra = self.run(&or, opts.limit + seen.len(), opts, MatchMode::Any)?;
                let room = opts.limit - result.hits.len();
                result.hits.extend(extra.into_iter().filter(|h| !seen.contains(&h.passage_id)).take(room));
            }
            result.or_terms = selective;
        }
        Ok(result)
    }

    /// Section-ranked search: AND-mode and OR-mode candidates pooled, grouped by section, ranked
    /// by the terms the section holds and its best passages' BM25; within a section, passages by
    /// the terms each holds, then BM25.
    fn search_sections(&self, mut result: SearchResult, and: &str, opts: &SearchOptions) -> Result<SearchResult, StoreError> {
        let terms = result.terms.clone();
        let quiet = SearchOptions { snippets: false, ..opts.clone() };
        let pool = (opts.limit * 4).max(40);
        let mut hits = self.run(and, pool, &quiet, MatchMode::All)?;
        if terms.len() > 1 {
            let selective = self.most_selective(&terms, opts.or_terms)?;
            if let Some(or) = query::or_query(&selective) {
                let seen: std::collections::HashSet<i64> = hits.iter().map(|h| h.passage_id).collect();
                let extra = self.run(&or, pool, &quiet, MatchMode::Any)?;
                hits.extend(extra.into_iter().filter(|h| !seen.contains(&h.passage_id)));
            }
            result.or_terms = selective;
        }
        // Which terms each passage holds, as a bit set (questions have few terms; beyond 64 the
        // rest only count through BM25).
        let held = |h: &Hit| -> u64 {
            let words = lode_core::gate::tokens(&lode_core::text::index_text(&h.text));
            terms.iter().take(64).enumerate().filter(|(_, t)| words.iter().any(|w| query::stem_match(w, t))).fold(0u64, |m, (i, _)| m | 1 << i)
        };
        struct Section {
            terms: u64,
            best: Vec<f64>,
            first: usize,
        }
        let mut sections: Vec<Section> = Vec::new();
        let mut key_of: std::collections::HashMap<(i64, &str), usize> = std::collections::HashMap::new();
        let mut keyed: Vec<(usize, u32, Hit)> = Vec::with_capacity(hits.len());
        for (i, h) in hits.iter().enumerate() {
            let m = held(h);
            let k = *key_of.entry((h.note_id, h.heading.as_str())).or_insert_with(|| {
                sections.push(Section { terms: 0, best: Vec::new(), first: i });
                sections.len() - 1
            });
            sections[k].terms |= m;
            sections[k].best.push(h.score);
            keyed.push((k, m.count_ones(), h.clone()));
        }
        let score: Vec<(u32, f64, usize)> = sections
            .iter_mut()
            .map(|s| {
                s.best.sort_by(|a, b| b.total_cmp(a));
                (s.terms.count_ones(), s.best.iter().take(SECTION_BEST).sum::<f64>(), s.first)
            })
            .collect();
        keyed.sort_by(|a, b| {
            let (sa, sb) = (&score[a.0], &score[b.0]);
            sb.0.cmp(&sa.0)
                .then(sb.1.total_cmp(&sa.1))
                .then(sa.2.cmp(&sb.2))
                .then(b.1.cmp(&a.1))
                .then(b.2.score.total_cmp(&a.2.score))
        });
        let mut hits: Vec<Hit> = keyed.into_iter().map(|(_, _, h)| h).take(opts.limit).collect();
        if opts.snippets {
            let or = query::or_query(&terms).unwrap_or_default();
            self.add_snippets(&or, &mut hits)?;
        }
        result.hits = hits;
        Ok(result)
    }

    /// The `k` terms that occur in the fewest passages (terms occurring nowhere are dropped).
    /// Counting costs a query per term, so a question with at most `k` terms is used whole.
    fn most_selective(&self, terms: &[String], k: usize) -> Result<Vec<String>, StoreError> {
        if terms.len() <= k {
            return Ok(terms.to_vec());
        }
        let mut st = self
            .conn
            .prepare_cached("SELECT count(*) FROM passages_fts WHERE passages_fts MATCH ?1")
            .map_err(|e| self.err(e))?;
        let mut counted = Vec::with_capacity(terms.len());
        for (i, t) in terms.iter().enumerate() {
            let Some(q) = query::and_query(std::slice::from_ref(t)) else { continue };
            let n: i64 = st.query_row([q], |r| r.get(0)).map_err(|e| self.err(e))?;
            if n > 0 {
                counted.push((n, i, t.clone()));
            }
        }
        counted.sort();
        counted.truncate(k.max(1));
        counted.sort_by_key(|(_, i, _)| *i);
        Ok(counted.into_iter().map(|(_, _, t)| t).collect())
    }

    fn run(&self, fts_query: &str, limit: usize, opts: &SearchOptions, mode: MatchMode) -> Result<Vec<Hit>, StoreError> {
        // Rank inside FTS5 (ORDER BY rank LIMIT n sorts only rowids and scores), then fetch the
        // few winners' rows: joining before the sort would read every matching passage.
        let sql = format!(
            "WITH top AS (
                SELECT rowid AS id, rank AS s FROM passages_fts
                WHERE passages_fts MATCH ?1 AND rank MATCH 'bm25({hw:.3}, 1.0)'
                ORDER BY rank LIMIT ?2)
             SELECT p.id, p.note_id, n.path, n.title, p.version_id, p.start, p.end, p.line, p.kind, p.heading,
                    top.s, p.text, p.parent_start, p.parent_end, n.kind
             FROM top JOIN passages p ON p.id = top.id JOIN notes n ON n.id = p.note_id
             ORDER BY top.s, p.id",
            hw = opts.heading_weight,
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let mut hits = st
            .query_map(params![fts_query, limit as i64], |r| hit_from_row(r, mode))
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err(e))?;
        if opts.snippets {
            self.add_snippets(fts_query, &mut hits)?;
        }
        self.add_sources(&mut hits)?;
        Ok(hits)
    }

    fn add_snippets(&self, fts_query: &str, hits: &mut [Hit]) -> Result<(), StoreError> {
        {
            let mut st = self
                .conn
                .prepare_cached(
                    "SELECT snippet(passages_fts, 1, '«', '»', '…', 24) FROM passages_fts
                     WHERE passages_fts MATCH ?1 AND rowid = ?2",
                )
                .map_err(|e| self.err(e))?;
            for h in hits.iter_mut() {
                h.snippet = st.query_row(params![fts_query, h.passage_id], |r| r.get(0)).map_err(|e| self.err(e))?;
            }
        }
        Ok(())
    }
}

/// Stable re-rank: more question terms in the passage's own text first, BM25 within a level.
fn rank_by_coverage(hits: &mut [Hit], terms: &[String]) {
    let coverage = |h: &Hit| {
        let words = lode_core::gate::tokens(&lode_core::text::index_text(&h.text));
        terms.iter().filter(|t| words.iter().any(|w| query::stem_match(w, t))).count()
    };
    let mut keyed: Vec<(usize, Hit)> = hits.iter().map(|h| (coverage(h), h.clone())).collect();
    keyed.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.score.total_cmp(&a.1.score)));
    for (slot, (_, h)) in hits.iter_mut().zip(keyed) {
        *slot = h;
    }
}

impl Store {
    /// Fills the URL and fetch times of snapshot hits.
    pub(crate) fn add_sources(&self, hits: &mut [Hit]) -> Result<(), StoreError> {
        let ids: Vec<i64> = hits.iter().filter(|h| h.source == Source::Snapshot).map(|h| h.note_id).collect();
        if ids.is_empty() {
            return Ok(());
        }
        let of = self.snapshots_of(&ids)?;
        for h in hits.iter_mut() {
            if let Some(s) = of.get(&h.note_id) {
                h.url = Some(s.url.clone());
                h.fetched_at = Some(s.fetched_at);
                h.seen_at = Some(s.seen_at);
            }
        }
        Ok(())
    }
}

/// A hit from a row of `id, note_id, path, title, version_id, start, end, line, kind, heading,
/// bm25, text, parent_start, parent_end, note kind` (the order every hit query selects).
pub(crate) fn hit_from_row(r: &rusqlite::Row<'_>, mode: MatchMode) -> rusqlite::Result<Hit> {
    Ok(Hit {
        passage_id: r.get(0)?,
        note_id: r.get(1)?,
        path: r.get(2)?,
        title: r.get(3)?,
        version_id: r.get(4)?,
        start: r.get::<_, i64>(5)? as usize,
        end: r.get::<_, i64>(6)? as usize,
        line: r.get::<_, i64>(7)? as usize,
        kind: r.get(8)?,
        heading: r.get(9)?,
        score: -r.get::<_, f64>(10)?,
        mode,
        snippet: String::new(),
        text: r.get(11)?,
        parent_start: r.get::<_, i64>(12)? as usize,
        parent_end: r.get::<_, i64>(13)? as usize,
        source: if r.get_ref(14)?.as_str().ok() == Some("snapshot") { Source::Snapshot } else { Source::Note },
        url: None,
        fetched_at: None,
        seen_at: None,
    })
}
