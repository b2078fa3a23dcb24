//! Lexical search: BM25 over head passages through FTS5. AND-mode over all content terms first;
//! when that finds fewer hits than asked for, OR-mode over the few most selective terms fills the
//! rest (a natural-language question rarely has every word in one passage).
//!
//! Sections rank, passages are cited. A second leg ranks sections (runs of consecutive passages
//! under one heading path, indexed whole in `sections_fts`) by BM25 over all the question's
//! terms; the two legs are fused by reciprocal rank at section level, and each section is
//! represented by its passages the passage leg found, else by the one of its passages holding
//! most of the question's terms. A note written one sentence per paragraph then ranks like the
//! same note written as one paragraph, while every hit is still one exact passage.

use lode_core::query;
use rusqlite::{params, OptionalExtension};

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
    /// Weight of the section leg against the passage leg in their fusion (see the module
    /// comment); 0 ranks passages alone.
    pub section_weight: f64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { limit: 10, or_terms: 12, heading_weight: 2.0, fill: true, snippets: true, section_weight: SECTION_WEIGHT }
    }
}

/// Default weight of the section leg (SciFact training split, lexical nDCG@10 one paragraph per
/// abstract / one per sentence: 0 → 0.7076 / 0.6525, 1 → 0.7081 / 0.6739, 4 → 0.7049 / 0.6971,
/// 8 → 0.7041 / 0.7024; whole-note BM25: 0.7041 on both). The passage leg still orders the
/// sections the section leg ties on and picks the passages cited.
pub const SECTION_WEIGHT: f64 = 8.0;

/// Reciprocal rank fusion constant of the two lexical legs.
const FUSION_K: f64 = 60.0;

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
    /// Relevance, higher is better: with the section leg on, its section's score divided by
    /// `1 +` its depth in the section (results are in this order; see `fuse_sections`); with it
    /// off, BM25, comparable only within one mode of one query.
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
    /// A passage of the team's shared tier: where it is in the published vault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<SharedOrigin>,
}

/// Where a shared passage comes from: its note's path in the published vault and the note's
/// frontmatter (the member's egress rules judge both).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SharedOrigin {
    pub rel: String,
    #[serde(skip)]
    pub meta: serde_json::Map<String, serde_json::Value>,
}

/// Where a passage comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    #[default]
    Note,
    Snapshot,
    /// A note of the team's shared tier (`[shared] index`): `path` is its address there.
    Shared,
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
        if opts.section_weight <= 0.0 || opts.limit == 0 {
            return self.search_passages(question, opts);
        }
        // The passage leg reaches deeper than the answer's length so the fusion has candidates.
        let deep = SearchOptions { limit: opts.limit.max(50), snippets: false, ..opts.clone() };
        let passages = self.search_passages(question, &deep)?;
        let Some(any) = query::or_query(&passages.terms) else { return Ok(passages) };
        let sections = self.section_leg(&any, deep.limit, opts.heading_weight)?;
        let SearchResult { terms, or_terms, hits } = passages;
        let hits = self.fuse_sections(&any, hits, &sections, opts)?;
        let mut result = SearchResult { terms, or_terms, hits };
        if opts.snippets {
            self.add_snippets(&any, &mut result.hits)?;
        }
        Ok(result)
    }

    /// Sections by BM25 over every term: `(note_id, heading, first_ordinal, last_ordinal)`.
    fn section_leg(&self, fts_query: &str, limit: usize, heading_weight: f64) -> Result<Vec<(i64, String, i64, i64)>, StoreError> {
        let sql = format!(
            "WITH top AS (
                SELECT rowid AS id, rank AS s FROM sections_fts
                WHERE sections_fts MATCH ?1 AND rank MATCH 'bm25({heading_weight:.3}, 1.0)'
                ORDER BY rank LIMIT ?2)
             SELECT s.note_id, s.heading, s.first_ordinal, s.last_ordinal
             FROM top JOIN sections s ON s.id = top.id ORDER BY top.s, s.id"
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        st.query_map(params![fts_query, limit as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err(e))
    }

    /// Fuses the passage leg and the section leg at section level (a passage belongs to the
    /// section of its note and heading path) and returns passages by score, best first.
    ///
    /// A section's score: when its best passage holds every term of the question (AND-mode),
    /// `1 + 1 / (1 + that passage's rank)`: one passage saying it all is the strongest evidence
    /// there is, and the passage leg ranked those by how much of the question each holds. Else
    /// the reciprocal-rank fusion of its best passage's rank and its own rank in the section
    /// leg (weighted), always below 1. A passage scores its section's score divided by
    /// `1 + its depth` in the section (0 for the section's best), so the next section's best
    /// passage comes before a section's third.
    fn fuse_sections(
        &self,
        any: &str,
        passages: Vec<Hit>,
        sections: &[(i64, String, i64, i64)],
        opts: &SearchOptions,
    ) -> Result<Vec<Hit>, StoreError> {
        use std::collections::HashMap;
        type Key = (i64, String);
        let mut fused: HashMap<Key, f64> = HashMap::new();
        let mut all_terms: HashMap<Key, usize> = HashMap::new();
        let mut order: Vec<Key> = Vec::new();
        let mut of_section: HashMap<Key, Vec<Hit>> = HashMap::new();
        for (i, h) in passages.into_iter().enumerate() {
            let key = (h.note_id, h.heading.clone());
            let list = of_section.entry(key.clone()).or_default();
            if list.is_empty() {
                *fused.entry(key.clone()).or_default() += 1.0 / (FUSION_K + i as f64 + 1.0);
                if h.mode == MatchMode::All {
                    all_terms.insert(key.clone(), i);
                }
                order.push(key);
            }
            list.push(h);
        }
        let mut range: HashMap<Key, (i64, i64)> = HashMap::new();
        for (i, (note, heading, first, last)) in sections.iter().enumerate() {
            let key = (*note, heading.clone());
            if !fused.contains_key(&key) {
                order.push(key.clone());
            }
            *fused.entry(key.clone()).or_default() += opts.section_weight / (FUSION_K + i as f64 + 1.0);
            range.entry(key).or_insert((*first, *last));
        }
        let section_score = |k: &Key| match all_terms.get(k) {
            Some(&rank) => 1.0 + 1.0 / (1.0 + rank as f64),
            None => fused[k].min(0.99),
        };
        // Sections by score (stable: first found first among equals). Candidates: (score,
        // section position, depth, passage). A section only the section leg found is
        // represented by its passage holding most of the terms, read only if it can make the
        // cut (a section's best passage scores the section's score).
        let scores: Vec<f64> = order.iter().map(section_score).collect();
        let mut ranked: Vec<usize> = (0..order.len()).collect();
        ranked.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        let mut scored: Vec<(f64, usize, usize, Hit)> = Vec::new();
        for (pos, &i) in ranked.iter().enumerate() {
            let key = &order[i];
            let base = scores[i];
            let hits = match of_section.remove(key) {
                Some(hits) => hits,
                None => match range.get(key) {
                    Some(&(first, last)) if pos < opts.limit => {
                        self.best_passage_of(key.0, first, last, any, opts.heading_weight)?.into_iter().collect()
                    }
                    _ => Vec::new(),
                },
            };
            for (depth, mut h) in hits.into_iter().enumerate() {
                h.score = base / (1 + depth) as f64;
                scored.push((h.score, pos, depth, h));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut out: Vec<Hit> = scored.into_iter().take(opts.limit).map(|(_, _, _, h)| h).collect();
        self.add_sources(&mut out)?;
        Ok(out)
    }

    /// The passage of one note that matches the question best by the full-text index (BM25
    /// over every term of the question, any of them), if any passage of the note holds one. For
    /// the link graph: a linked note joins an answer with its passage *for this question*.
    pub fn best_passage_in_note(&self, question: &str, note_id: i64, heading_weight: f64) -> Result<Option<Hit>, StoreError> {
        let terms = query::terms(question);
        let Some(any) = query::or_query(&terms) else { return Ok(None) };
        // Only this note's rowids are probed, not every passage holding a common term.
        let sql = format!(
            "SELECT p.id, p.note_id, n.path, n.title, p.version_id, p.start, p.end, p.line, p.kind, p.heading,
                    f.rank, p.text, p.parent_start, p.parent_end, n.kind
             FROM passages_fts f JOIN passages p ON p.id = f.rowid JOIN notes n ON n.id = p.note_id
             WHERE passages_fts MATCH ?1 AND rank MATCH 'bm25({heading_weight:.3}, 1.0)'
               AND f.rowid IN (SELECT id FROM passages WHERE note_id = ?2)
             ORDER BY f.rank, p.id LIMIT 1"
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let best = st.query_row(params![any, note_id], |r| hit_from_row(r, MatchMode::Any)).optional().map_err(|e| self.err(e))?;
        let mut out: Vec<Hit> = best.into_iter().collect();
        self.add_sources(&mut out)?;
        Ok(out.pop())
    }

    /// The passage of a section that matches the question best by the full-text index (BM25 over
    /// every term), else the section's first passage (a section found by its heading alone).
    fn best_passage_of(
        &self,
        note_id: i64,
        first: i64,
        last: i64,
        fts_query: &str,
        heading_weight: f64,
    ) -> Result<Option<Hit>, StoreError> {
        let select = "p.id, p.note_id, n.path, n.title, p.version_id, p.start, p.end, p.line, p.kind, p.heading,
                      0.0, p.text, p.parent_start, p.parent_end, n.kind";
        let sql = format!(
            "SELECT {select} FROM passages_fts f JOIN passages p ON p.id = f.rowid JOIN notes n ON n.id = p.note_id
             WHERE passages_fts MATCH ?1 AND rank MATCH 'bm25({heading_weight:.3}, 1.0)'
               AND p.note_id = ?2 AND p.ordinal BETWEEN ?3 AND ?4
             ORDER BY rank LIMIT 1"
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let best = st
            .query_row(params![fts_query, note_id, first, last], |r| hit_from_row(r, MatchMode::Any))
            .optional()
            .map_err(|e| self.err(e))?;
        if best.is_some() {
            return Ok(best);
        }
        let sql = format!(
            "SELECT {select} FROM passages p JOIN notes n ON n.id = p.note_id
             WHERE p.note_id = ?1 AND p.ordinal BETWEEN ?2 AND ?3 ORDER BY p.ordinal LIMIT 1"
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        st.query_row(params![note_id, first, last], |r| hit_from_row(r, MatchMode::Any)).optional().map_err(|e| self.err(e))
    }

    /// Passage-level search alone: AND-mode, then OR-mode filling up to the limit.
    fn search_passages(&self, question: &str, opts: &SearchOptions) -> Result<SearchResult, StoreError> {
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

    /// The `k` terms that occur in the fewest passages (terms occurring nowhere are dropped).
    /// Counting costs a query per term, so a question with at most `k` terms is used whole.
    fn most_selective(&self, terms: &[String], k: usize) -> Result<Vec<String>, StoreError> {
        if terms.len() <= k {
            return Ok(terms.to_vec());
        }
        let mut st = self.conn.prepare_cached("SELECT count(*) FROM passages_fts WHERE passages_fts MATCH ?1").map_err(|e| self.err(e))?;
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
            // A passage that does not match the query (a section's first, standing for a section
            // found by its heading) gets no snippet rather than failing the search.
            for h in hits.iter_mut() {
                h.snippet =
                    st.query_row(params![fts_query, h.passage_id], |r| r.get(0)).optional().map_err(|e| self.err(e))?.unwrap_or_default();
            }
        }
        Ok(())
    }
}

/// Stable re-rank: more question terms in the passage's own text first, BM25 within a level.
fn rank_by_coverage(hits: &mut [Hit], terms: &[String]) {
    let coverage = |h: &Hit| query::terms_held(&h.text, terms);
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
        shared: None,
    })
}
