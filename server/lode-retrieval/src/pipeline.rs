//! The hybrid retrieval pipeline. Each stage is a seam that can be switched off:
//!
//! lexical (FTS5) ∥ dense (LanceDB, question through `embed_query`)
//!   → reciprocal rank fusion over passages (k = 60, equal weights)
//!   → cross-encoder rerank of the fused top-N (when a reranker is loaded)
//!   → link-graph expansion (passages of notes linked from/to the seeds, lower priority)
//!   → trust order (pinned first; the user's notes before anything less trusted).
//!
//! Small-to-big expansion is carried as data: every hit keeps its own passage range (what a
//! citation points to) and its parent block's range (what a synthesizer reads).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use lode_core::fusion::{context_order, rrf, Origin, Trust};
use lode_models::{CrossEncoder, Embedder};
use lode_store::{Hit, SearchOptions, Store};

use crate::index::VectorIndex;
use crate::RetrievalError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Lexical,
    Dense,
    Hybrid,
    /// Hybrid, then the cross-encoder reorders the fused top-N.
    Rerank,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "lexical" => Ok(Mode::Lexical),
            "dense" => Ok(Mode::Dense),
            "hybrid" => Ok(Mode::Hybrid),
            "rerank" => Ok(Mode::Rerank),
            _ => Err(format!("unknown mode {s:?}: lexical, dense, hybrid or rerank")),
        }
    }
}

/// The models and index the dense and rerank stages use; any may be absent.
#[derive(Default)]
pub struct Models<'a> {
    pub embedder: Option<&'a mut Embedder>,
    pub index: Option<&'a VectorIndex>,
    pub reranker: Option<&'a mut CrossEncoder>,
}

#[derive(Debug, Clone)]
pub struct RetrievalConfig {
    pub limit: usize,
    /// Passages each leg contributes to fusion.
    pub candidates: usize,
    pub rrf_k: f64,
    pub lexical_weight: f64,
    pub dense_weight: f64,
    /// Fused passages the cross-encoder re-scores.
    pub rerank_top: usize,
    /// Link-graph expansion: at most this many passages from linked notes (0 = off).
    pub graph_limit: usize,
    pub search: SearchOptions,
    /// A snapshot not confirmed by a fetch for this many days ranks as stale.
    pub stale_days: f64,
    /// Of the best lexical candidates, this many are looked at for a missing vector; those
    /// without one are embedded at query time (0 = off). See [`catch_up`].
    pub catch_up: usize,
    /// Once set, retrieval stops at the next stage boundary with [`RetrievalError::Cancelled`]
    /// (before the catch-up embedding, the rerank and the link graph).
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The team's shared tier (`[shared] index`): searched beside the user's notes and fused
    /// with them; a tier that cannot be reached leaves the user's own notes answering.
    pub shared: Option<std::sync::Arc<crate::shared::SharedIndex>>,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        RetrievalConfig {
            limit: 10,
            candidates: 50,
            rrf_k: 60.0,
            lexical_weight: 1.0,
            dense_weight: 1.0,
            rerank_top: 30,
            graph_limit: 3,
            search: SearchOptions::default(),
            stale_days: 30.0,
            // Each costs a model input at query time: about 8 ms for one passage, 100 ms for
            // eight (release build, two cores; docs/benchmarks.md).
            catch_up: 4,
            cancel: None,
            shared: None,
        }
    }
}

/// One retrieved passage and how it got here.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RetrievedHit {
    #[serde(flatten)]
    pub hit: Hit,
    pub origin: Origin,
    pub trust: Trust,
    /// Fused (RRF) score; for lexical-only runs, the BM25 score.
    pub fused: f64,
    pub rerank: Option<f32>,
    pub lexical_rank: Option<usize>,
    pub dense_rank: Option<usize>,
}

/// Time spent in each stage, and what a stage could not do.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Stage {
    pub name: &'static str,
    pub ms: f64,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Retrieved {
    pub hits: Vec<RetrievedHit>,
    pub stages: Vec<Stage>,
    /// Problems that made a stage fall back (e.g. no vectors yet): the results are still valid.
    pub warnings: Vec<String>,
    /// The dense leg failed (the vector table could not be read, the model failed): why. The
    /// results are lexical; a caller that owns the table checks and mends it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dense_failed: Option<String>,
    /// The shared tier could not be searched: why. The results are the user's own notes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_failed: Option<String>,
    /// The shared tier's search itself failed (not one version's text): the tier is taken to
    /// be unreachable for now.
    #[serde(skip)]
    pub shared_down: bool,
}

/// The trust tier of each hit's note: the user's notes, annotations (notes whose frontmatter
/// says `annotates:`), current snapshots, stale snapshots.
fn trust_of<'a>(
    store: &Store,
    hits: impl Iterator<Item = &'a Hit> + Clone,
    stale_days: f64,
) -> Result<HashMap<i64, Trust>, RetrievalError> {
    let now = lode_store::now_ms();
    let notes: Vec<i64> = hits.clone().filter(|h| h.source == lode_store::Source::Note).map(|h| h.note_id).collect();
    let annotations = store.annotation_notes(&notes)?;
    let mut out = HashMap::new();
    for h in hits {
        let t = match (h.source, h.seen_at) {
            (lode_store::Source::Snapshot, Some(seen)) if (now - seen) as f64 > stale_days * 86_400_000.0 => Trust::StaleSnapshot,
            (lode_store::Source::Snapshot, _) => Trust::ExternalSnapshot,
            (lode_store::Source::Shared, _) => Trust::Shared,
            (lode_store::Source::Note, _) if annotations.contains(&h.note_id) => Trust::Annotation,
            (lode_store::Source::Note, _) => Trust::Note,
        };
        out.insert(h.note_id, t);
    }
    Ok(out)
}

/// What the dense leg found: window leaders with their cosine distance to the question, nearest
/// first, and the question's vector.
struct Dense {
    near: Vec<(i64, f32)>,
    query: Vec<f32>,
    embed_ms: f64,
    search_ms: f64,
}

fn dense_leg(embedder: &mut Embedder, index: &VectorIndex, question: &str, k: usize) -> Result<Dense, RetrievalError> {
    let t = Instant::now();
    let query = embedder.embed_query(question)?;
    let embed_ms = t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    let near = index.nearest(&query, k)?;
    Ok(Dense { near, query, embed_ms, search_ms: t.elapsed().as_secs_f64() * 1000.0 })
}

/// Cosine distance, as LanceDB computes it for the index (`1 - cos`).
fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 1.0;
    }
    1.0 - dot / (na.sqrt() * nb.sqrt())
}

/// The dense leg for passages the vector worker has not reached yet. A note saved a moment ago
/// is in the full-text index at once and in the vector index only later; absent from the dense
/// leg, its passages lose the fusion to passages both legs found (a passage holding every word
/// of the question fell behind older notes sharing two of them). So the best `cfg.catch_up`
/// lexical candidates without a vector are embedded now, each as a window of its own, and
/// placed among the dense hits by their distance to the question. `dense` holds passage ids
/// with their distances, nearest first, and stays at most `k` long. Returns how many were
/// embedded.
fn catch_up(
    store: &Store,
    embedder: &mut Embedder,
    query: &[f32],
    lexical: &[Hit],
    dense: &mut Vec<(i64, f32)>,
    k: usize,
    cfg: &RetrievalConfig,
) -> Result<usize, RetrievalError> {
    // Passages go to an embedder off the machine only through the worker, which screens them.
    if embedder.sends_off_machine() {
        return Ok(0);
    }
    let shortlist: Vec<i64> =
        lexical.iter().take(cfg.catch_up).map(|h| h.passage_id).filter(|id| !dense.iter().any(|(d, _)| d == id)).collect();
    if shortlist.is_empty() {
        return Ok(0);
    }
    let missing = store.without_vectors(embedder.id(), &shortlist)?;
    if missing.is_empty() {
        return Ok(0);
    }
    // Each as the worker would embed a window of that one passage.
    let texts: Vec<String> = missing
        .iter()
        .filter_map(|id| lexical.iter().find(|h| h.passage_id == *id))
        .map(|h| crate::worker::embedded_text(&h.heading, [h.text.as_str()]))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed_passages(&refs)?;
    for (id, v) in missing.iter().zip(&vectors) {
        dense.push((*id, cosine_distance(query, v)));
    }
    dense.sort_by(|a, b| a.1.total_cmp(&b.1));
    dense.truncate(k);
    Ok(missing.len())
}

/// The dense leg ranks embedding windows; citations point at passages. Each window (by its
/// leader) is represented by one member: the one the lexical leg ranked best, else the one
/// holding most of the question's words, else the first. Windows no longer recorded (the worker
/// has not caught up with an edit) are skipped. Returns the chosen passage ids, in window order,
/// and the rows it had to read on the way (so they are not read again).
fn window_representatives(
    store: &Store,
    model: &str,
    near: &[(i64, f32)],
    lexical: &[Hit],
    question: &str,
) -> Result<(Vec<(i64, f32)>, HashMap<i64, Hit>), RetrievalError> {
    let leaders: Vec<i64> = near.iter().map(|&(id, _)| id).collect();
    let members = store.window_members(model, &leaders)?;
    let lex_rank: HashMap<i64, usize> = lexical.iter().enumerate().map(|(i, h)| (h.passage_id, i)).collect();
    let asked = lode_core::query::terms(question);
    let need: Vec<i64> =
        members.values().filter(|m| m.len() > 1 && !m.iter().any(|id| lex_rank.contains_key(id))).flatten().copied().collect();
    let read: HashMap<i64, Hit> = store.passages_by_id(&need)?.into_iter().map(|h| (h.passage_id, h)).collect();
    let held: HashMap<i64, usize> = read.iter().map(|(&id, h)| (id, lode_core::query::terms_held(&h.text, &asked))).collect();
    let mut out = Vec::with_capacity(leaders.len());
    for (leader, distance) in near {
        let Some(m) = members.get(leader) else { continue };
        let best = m
            .iter()
            .enumerate()
            .min_by_key(|&(pos, id)| {
                (lex_rank.get(id).copied().unwrap_or(usize::MAX), std::cmp::Reverse(held.get(id).copied().unwrap_or(0)), pos)
            })
            .map(|(_, &id)| (id, *distance));
        out.extend(best);
    }
    Ok((out, read))
}

/// Runs the pipeline for `question` in `mode`. Stages whose models are missing are skipped with a
/// warning (dense → lexical only; rerank → fused order), never an error.
pub fn retrieve(store: &Store, question: &str, mode: Mode, models: Models<'_>, cfg: &RetrievalConfig) -> Result<Retrieved, RetrievalError> {
    let mut out = Retrieved::default();
    let cancelled = || cfg.cancel.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst));
    if cancelled() {
        return Err(RetrievalError::Cancelled);
    }
    let Models { embedder, index, reranker } = models;
    let want_lexical = mode != Mode::Dense;
    let want_dense = mode != Mode::Lexical;
    let k = if mode == Mode::Lexical { cfg.limit } else { cfg.candidates.max(cfg.limit) };

    let model_id = embedder.as_ref().map(|e| e.id().to_owned());
    let dense_models = match (want_dense, embedder, index) {
        (true, Some(e), Some(i)) => Some((e, i)),
        (true, _, _) => {
            out.warnings.push("dense retrieval unavailable (no embedding model or vector index): lexical results only".into());
            None
        }
        _ => None,
    };

    // The two legs run in parallel: the dense leg needs no SQLite until its ids are joined.
    let lex_opts = SearchOptions { limit: k, snippets: false, ..cfg.search.clone() };
    // The embedder comes back from the dense leg's thread for the catch-up below.
    let (lexical, dense) = std::thread::scope(|s| {
        let dense = dense_models.map(|(e, i)| {
            s.spawn(move || {
                let r = dense_leg(e, i, question, k);
                (e, r)
            })
        });
        let t = Instant::now();
        let lexical = if want_lexical || dense.is_none() { Some(store.search(question, &lex_opts)) } else { None };
        let lex_ms = t.elapsed().as_secs_f64() * 1000.0;
        let dense = dense.map(|h| h.join().map_err(|_| RetrievalError::Unavailable("the dense leg panicked".into())));
        (lexical.map(|l| (l, lex_ms)), dense)
    });
    let mut lexical_hits = Vec::new();
    if let Some((l, ms)) = lexical {
        lexical_hits = l?.hits;
        out.stages.push(Stage { name: "lexical", ms, note: None });
    }
    if cancelled() {
        return Err(RetrievalError::Cancelled);
    }
    let mut dense_ids: Vec<i64> = Vec::new();
    let mut dense_read: HashMap<i64, Hit> = HashMap::new();
    let mut query_vector: Option<Vec<f32>> = None;
    match dense.map(|joined| joined.and_then(|(e, r)| r.map(|d| (e, d)))) {
        Some(Ok((embedder, d))) => {
            out.stages.push(Stage { name: "embed_query", ms: d.embed_ms, note: None });
            out.stages.push(Stage { name: "dense", ms: d.search_ms, note: None });
            query_vector = Some(d.query.clone());
            let mut near;
            (near, dense_read) = window_representatives(store, model_id.as_deref().unwrap_or_default(), &d.near, &lexical_hits, question)?;
            if cfg.catch_up > 0 && !lexical_hits.is_empty() {
                let t = Instant::now();
                match catch_up(store, embedder, &d.query, &lexical_hits, &mut near, k, cfg) {
                    Ok(0) => {}
                    Ok(n) => out.stages.push(Stage {
                        name: "catch_up",
                        ms: t.elapsed().as_secs_f64() * 1000.0,
                        note: Some(format!("{n} passage{} without a vector yet, embedded now", if n == 1 { "" } else { "s" })),
                    }),
                    Err(e) => out.warnings.push(format!("passages without a vector yet were not embedded: {e}")),
                }
            }
            dense_ids = near.into_iter().map(|(id, _)| id).collect();
        }
        Some(Err(e)) => {
            out.warnings.push(format!("dense retrieval failed, lexical results only: {e}"));
            out.dense_failed = Some(e.to_string());
            if lexical_hits.is_empty() && !want_lexical {
                lexical_hits = store.search(question, &lex_opts)?.hits;
            }
        }
        None => {}
    }

    // The shared tier's two legs, with the question vector of the model it was embedded with.
    let (mut shared_lex, mut shared_dense): (Vec<Hit>, Vec<Hit>) = (Vec::new(), Vec::new());
    if let Some(sh) = &cfg.shared {
        let q = query_vector.as_deref().filter(|q| sh.dense_with(model_id.as_deref().unwrap_or_default(), q.len()));
        match sh.search(question, k, if want_dense { q } else { None }) {
            Ok(mut found) => {
                // A note the member holds unchanged (their vault is, or copies, the published
                // one) is theirs: its passages come from their own index, cited under their own
                // path, not a second time as the team's.
                let (mut mine, mut asked) = (HashSet::new(), HashSet::new());
                for id in found.lexical.iter().chain(&found.dense).map(|h| &h.version_id) {
                    if asked.insert(id) && store.head_for_version(id)?.is_some_and(|(_, head)| &head == id) {
                        mine.insert(id.clone());
                    }
                }
                let before = found.lexical.len() + found.dense.len();
                found.lexical.retain(|h| !mine.contains(&h.version_id));
                found.dense.retain(|h| !mine.contains(&h.version_id));
                let held = before - found.lexical.len() - found.dense.len();
                let also = if held > 0 { format!(" ({held} left to your own copy)") } else { String::new() };
                out.stages.push(Stage {
                    name: "shared",
                    ms: found.ms,
                    note: Some(format!("{} lexical, {} dense from {}{also}", found.lexical.len(), found.dense.len(), sh.config().uri)),
                });
                (shared_lex, shared_dense) = (found.lexical, found.dense);
            }
            Err(e) => {
                out.warnings.push(format!("the shared index could not be searched ({e}): answered from your own notes only"));
                out.shared_failed = Some(e.to_string());
                out.shared_down = true;
            }
        }
    }
    if cancelled() {
        return Err(RetrievalError::Cancelled);
    }

    // Fusion over passage ids (the same unit on both legs).
    let t = Instant::now();
    let lex_ids: Vec<i64> = lexical_hits.iter().map(|h| h.passage_id).collect();
    let mut by_id: HashMap<i64, Hit> = lexical_hits.into_iter().map(|h| (h.passage_id, h)).collect();
    let shared_lex_ids: Vec<i64> = shared_lex.iter().map(|h| h.passage_id).collect();
    let shared_dense_ids: Vec<i64> = shared_dense.iter().map(|h| h.passage_id).collect();
    for h in shared_lex.into_iter().chain(shared_dense) {
        by_id.entry(h.passage_id).or_insert(h);
    }
    for id in &dense_ids {
        if let Some(h) = dense_read.remove(id) {
            by_id.entry(*id).or_insert(h);
        }
    }
    let missing: Vec<i64> = dense_ids.iter().copied().filter(|id| !by_id.contains_key(id)).collect();
    for h in store.passages_by_id(&missing)? {
        by_id.insert(h.passage_id, h);
    }
    // Vectors of passages that left the index since (the worker has not caught up) are skipped.
    dense_ids.retain(|id| by_id.contains_key(id));
    let fused: Vec<(i64, f64)> = if dense_ids.is_empty() && shared_lex_ids.is_empty() && shared_dense_ids.is_empty() {
        lex_ids.iter().map(|&id| (id, by_id[&id].score)).collect()
    } else {
        // BM25 scores of two indexes are not comparable: the tiers meet by rank.
        let lists: Vec<(&[i64], f64)> = [
            (&lex_ids[..], cfg.lexical_weight),
            (&dense_ids[..], cfg.dense_weight),
            (&shared_lex_ids[..], cfg.lexical_weight),
            (&shared_dense_ids[..], cfg.dense_weight),
        ]
        .into_iter()
        .filter(|(l, _)| !l.is_empty())
        .collect();
        rrf(&lists, cfg.rrf_k)
    };
    out.stages.push(Stage { name: "fusion", ms: t.elapsed().as_secs_f64() * 1000.0, note: None });
    let rank = |ids: &[i64]| ids.iter().enumerate().map(|(i, &id)| (id, i + 1)).collect::<Vec<_>>();
    let lex_rank: HashMap<i64, usize> = rank(&lex_ids).into_iter().chain(rank(&shared_lex_ids)).collect();
    let dense_rank: HashMap<i64, usize> = rank(&dense_ids).into_iter().chain(rank(&shared_dense_ids)).collect();
    let trust = trust_of(store, by_id.values(), cfg.stale_days)?;
    let mut ranked: Vec<RetrievedHit> = fused
        .iter()
        .filter_map(|&(id, score)| {
            by_id.get(&id).map(|h| RetrievedHit {
                hit: h.clone(),
                origin: Origin::Retrieved,
                trust: trust.get(&h.note_id).copied().unwrap_or(Trust::Note),
                fused: score,
                rerank: None,
                lexical_rank: lex_rank.get(&id).copied(),
                dense_rank: dense_rank.get(&id).copied(),
            })
        })
        .collect();

    if cancelled() {
        return Err(RetrievalError::Cancelled);
    }
    // Rerank the fused top-N with the cross-encoder.
    if mode == Mode::Rerank {
        match reranker {
            Some(ce) => {
                let t = Instant::now();
                let n = cfg.rerank_top.min(ranked.len());
                let texts: Vec<String> = ranked[..n].iter().map(|r| format!("{}\n{}", r.hit.heading, r.hit.text)).collect();
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                match ce.score(question, &refs) {
                    Ok(scores) => {
                        for (r, s) in ranked[..n].iter_mut().zip(scores) {
                            r.rerank = Some(s);
                        }
                        ranked[..n].sort_by(|a, b| b.rerank.unwrap_or(f32::MIN).total_cmp(&a.rerank.unwrap_or(f32::MIN)));
                    }
                    Err(e) => out.warnings.push(format!("rerank failed, fused order kept: {e}")),
                }
                out.stages.push(Stage { name: "rerank", ms: t.elapsed().as_secs_f64() * 1000.0, note: Some(ce.id().to_owned()) });
            }
            None => out.warnings.push("rerank unavailable (no cross-encoder configured): fused order kept".into()),
        }
    }

    // Link-graph expansion: from the notes of the results, passages of linked notes that were
    // candidates too (so they bear on the question), after the retrieved ones.
    let mut hits: Vec<RetrievedHit> = ranked.iter().take(cfg.limit).cloned().collect();
    if cfg.graph_limit > 0 && !hits.is_empty() {
        let t = Instant::now();
        let in_results: HashSet<i64> = hits.iter().map(|h| h.hit.note_id).collect();
        // The notes linked to or from the results, each once: in the order of the results that
        // link them, then of the links (one link lookup per result note).
        let mut order: Vec<i64> = Vec::new();
        let mut linked: HashSet<i64> = HashSet::new();
        let mut asked: HashSet<i64> = HashSet::new();
        for h in &hits {
            if !asked.insert(h.hit.note_id) {
                continue;
            }
            let mut of = store.linked_notes(h.hit.note_id)?;
            of.sort_unstable();
            for n in of {
                if !in_results.contains(&n) && linked.insert(n) {
                    order.push(n);
                }
            }
        }
        let mut added = 0;
        let mut seen_notes: HashSet<i64> = HashSet::new();
        for r in ranked.iter().skip(cfg.limit) {
            if added >= cfg.graph_limit {
                break;
            }
            let note = r.hit.note_id;
            if linked.contains(&note) && seen_notes.insert(note) {
                let mut r = r.clone();
                r.origin = Origin::Linked;
                hits.push(r);
                added += 1;
            }
        }
        // Linked notes that were no candidate (in lexical mode no candidate lies below the cut):
        // each joins with its own best passage for this question, if any holds a term of it.
        order.retain(|n| !seen_notes.contains(n));
        for note in order {
            if added >= cfg.graph_limit {
                break;
            }
            if let Some(hit) = store.best_passage_in_note(question, note, cfg.search.heading_weight)? {
                seen_notes.insert(note);
                let trust = trust_of(store, std::iter::once(&hit), cfg.stale_days)?.get(&note).copied().unwrap_or(Trust::Note);
                let fused = hit.score;
                hits.push(RetrievedHit { hit, origin: Origin::Linked, trust, fused, rerank: None, lexical_rank: None, dense_rank: None });
                added += 1;
            }
        }
        out.stages.push(Stage { name: "graph", ms: t.elapsed().as_secs_f64() * 1000.0, note: Some(format!("{added} linked")) });
    }

    // Trust order, stable within a tier (so retrieval order is kept among the user's notes).
    // The gradient orders evidence of comparable relevance: a passage holding every word of
    // the question (AND-mode) is not put behind notes that hold only some of them because a
    // page or an annotation said it.
    // Passages promoted for holding every word keep their retrieval slots, but take them in
    // trust order: an annotation quoting a page's sentence before the page's snapshot holding
    // it, whichever BM25 put first.
    let all_words = |h: &RetrievedHit| h.hit.mode == lode_store::MatchMode::All && h.lexical_rank.is_some();
    let mut position: HashMap<i64, usize> = hits.iter().enumerate().map(|(i, h)| (h.hit.passage_id, i)).collect();
    let slots: Vec<usize> = (0..hits.len()).filter(|&i| all_words(&hits[i])).collect();
    let mut promoted = slots.clone();
    promoted.sort_by_key(|&i| (hits[i].trust, i));
    for (slot, i) in slots.iter().zip(promoted) {
        position.insert(hits[i].hit.passage_id, *slot);
    }
    context_order(&mut hits, |h| {
        let tier = if all_words(h) { Trust::Note } else { h.trust };
        (h.origin, tier, -(position[&h.hit.passage_id] as f64))
    });
    // Shared passages are read from here on like the user's own versions: their bodies are
    // kept beside the store (checked against their ids). One that cannot be fetched is left out.
    if let Some(sh) = &cfg.shared {
        let ids: Vec<String> =
            hits.iter().filter(|h| h.hit.source == lode_store::Source::Shared).map(|h| h.hit.version_id.clone()).collect();
        if !ids.is_empty() {
            let t = Instant::now();
            // What the tier holds now for these notes: what a citation into it is checked against.
            let heads: Vec<(String, Option<String>)> = hits
                .iter()
                .filter(|h| h.hit.source == lode_store::Source::Shared)
                .filter_map(|h| sh.rel_of(&h.hit.path).map(|rel| (rel, Some(h.hit.version_id.clone()))))
                .collect();
            let _ = store.remember_shared_heads(&sh.config().uri, sh.publish().seq, &heads);
            let failed = sh.keep_bodies(store, &ids);
            if let Some((_, e)) = failed.first() {
                let gone: HashSet<&str> = failed.iter().map(|(id, _)| id.as_str()).collect();
                let before = hits.len();
                hits.retain(|h| h.hit.source != lode_store::Source::Shared || !gone.contains(h.hit.version_id.as_str()));
                let n = before - hits.len();
                out.warnings.push(format!(
                    "the shared index's text could not be read ({e}): {n} of its passage{} left out",
                    if n == 1 { " was" } else { "s were" }
                ));
                out.shared_failed = Some(e.to_string());
            }
            out.stages.push(Stage { name: "shared_bodies", ms: t.elapsed().as_secs_f64() * 1000.0, note: None });
        }
    }
    out.hits = hits;
    Ok(out)
}
