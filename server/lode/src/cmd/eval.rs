//! `lode eval retrieval`: nDCG@10, Recall@100 and MRR@10 on a BEIR-format folder
//! (corpus.jsonl, queries.jsonl, qrels.tsv), one note per document (`# title`, then the text as
//! one paragraph), ranking notes by their best passage.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use lode_store::vault::{index_vault, IndexOptions};
use lode_store::{SearchOptions, Store};
use serde::Deserialize;

use crate::config::Config;
use crate::progress::Progress;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Retrieval quality (and latency) on a BEIR folder
    Retrieval(RetrievalArgs),
    /// The gate's deterministic steps on SciFact-style claims (claim + verbatim rationale)
    Gate(GateEvalArgs),
    /// The extractive synthesizer: does the first claim come from a relevant document?
    Answers(AnswersArgs),
}

#[derive(Args)]
pub struct GateEvalArgs {
    /// claims.jsonl: {claim, doc_id, label: SUPPORT|REFUTE, rationale: [sentences]}
    pub claims: PathBuf,
    /// Adversarial files ({class, expect: accept|reject, claim, spans, source} per line, e.g.
    /// fixtures/gate/adversarial.jsonl): accepted distortions and lost faithful claims per class
    #[arg(long, value_name = "FILE")]
    pub adversarial: Vec<PathBuf>,
    /// corpus.jsonl holding the documents [default: beside the claims file]
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// An NLI model (a name under the models directory, or a path) for the adversarial files'
    /// entailment step; without one only the deterministic steps run
    #[arg(long, value_name = "MODEL")]
    pub nli: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct AnswersArgs {
    pub beir_dir: PathBuf,
    /// Answer with an OpenAI-compatible LLM at this base URL (e.g. llama.cpp's server at
    /// http://127.0.0.1:8080/v1) instead of the extractive synthesizer; reports which rung of
    /// the display ladder its claims land on
    #[arg(long, value_name = "URL")]
    pub llm: Option<String>,
    /// Model name sent to the LLM endpoint
    #[arg(long, value_name = "NAME", default_value = "local")]
    pub llm_model: String,
    /// Seconds to wait for one LLM answer
    #[arg(long, value_name = "S", default_value_t = 120)]
    pub llm_timeout: u64,
    /// Most tokens the LLM may write per answer
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub llm_max_tokens: u32,
    /// Passages retrieved as context for each answer [default: the vault's config]
    #[arg(long, value_name = "N")]
    pub context: Option<usize>,
    /// Retrieve with the hybrid pipeline (needs the embedding model) instead of lexical only
    #[arg(long)]
    pub hybrid: bool,
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    #[arg(long, value_name = "N")]
    pub max_queries: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Clone)]
pub struct RetrievalArgs {
    /// Folder with corpus.jsonl, queries.jsonl and qrels.tsv
    pub beir_dir: PathBuf,
    /// How each document is written as a note
    #[arg(long, value_enum, default_value_t = Shape::Paragraph)]
    pub shape: Shape,
    /// Where the generated vault and its index live (reused across runs)
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// Evaluate only the first N judged queries
    #[arg(long, value_name = "N")]
    pub max_queries: Option<usize>,
    #[arg(long)]
    pub heading_weight: Option<f64>,
    #[arg(long)]
    pub or_terms: Option<usize>,
    /// Only use OR-mode when AND-mode finds nothing (instead of filling up to the limit)
    #[arg(long)]
    pub no_fill: bool,
    /// Rank passages alone, without ranking their sections from all their passages (the
    /// behaviour before section ranking, for comparison)
    #[arg(long)]
    pub passages_only: bool,
    /// Weight of the dense leg against the lexical leg in hybrid fusion [default: 1.0]
    #[arg(long, value_name = "W")]
    pub dense_weight: Option<f64>,
    /// Weight of the section leg in the lexical fusion [default: the vault's config, 8.0]
    #[arg(long, value_name = "W")]
    pub section_weight: Option<f64>,
    #[arg(long)]
    pub max_tokens: Option<usize>,
    /// Embedding window size in tokens [default: the vault's config, 128]
    #[arg(long, value_name = "N")]
    pub window_tokens: Option<usize>,
    /// Modes to evaluate (comma-separated): lexical, dense, hybrid, rerank [default: every mode
    /// the configured models allow]
    #[arg(long, value_delimiter = ',')]
    pub modes: Vec<lode_retrieval::Mode>,
    /// Cross-encoder for the rerank mode (a folder under the models dir, or a path)
    #[arg(long)]
    pub reranker: Option<String>,
    /// Also score a whole-note BM25 baseline (one FTS5 row per note, every question term ORed):
    /// the peer design passage-level ranking is compared against
    #[arg(long)]
    pub baseline: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Deserialize)]
struct Doc {
    #[serde(rename = "_id")]
    id: String,
    #[serde(default)]
    title: String,
    text: String,
    /// The abstract split into sentences (SciFact's corpus has it; other BEIR sets may not).
    #[serde(default)]
    sentences: Vec<String>,
}

/// How a corpus document is written as a note: the abstract as one paragraph, or one paragraph
/// per sentence (the shape of notes written as many short paragraphs or list items).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    #[default]
    Paragraph,
    Sentence,
}

#[derive(Deserialize)]
struct Query {
    #[serde(rename = "_id")]
    id: String,
    text: String,
}

pub struct Beir {
    pub docs: Vec<(String, String, String)>,
    /// Each document's sentences, parallel to `docs` (empty when the corpus has none).
    pub sentences: Vec<Vec<String>>,
    /// (query id, text), only queries with judgements, in file order.
    pub queries: Vec<(String, String)>,
    pub qrels: HashMap<String, HashMap<String, f64>>,
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{}:{}: bad JSON line", path.display(), i + 1)))
        .collect()
}

pub fn load_beir(dir: &Path) -> Result<Beir> {
    let docs: Vec<Doc> = read_jsonl(&dir.join("corpus.jsonl"))?;
    let queries: Vec<Query> = read_jsonl(&dir.join("queries.jsonl"))?;
    let qrels_path = dir.join("qrels.tsv");
    let qrels_text = std::fs::read_to_string(&qrels_path).with_context(|| format!("cannot read {}", qrels_path.display()))?;
    let mut qrels: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for (i, line) in qrels_text.lines().enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 3 {
            continue;
        }
        let Ok(score) = f[2].trim().parse::<f64>() else {
            if i == 0 {
                continue; // header
            }
            bail!("{}:{}: bad score {:?}", qrels_path.display(), i + 1, f[2]);
        };
        if score > 0.0 {
            qrels.entry(f[0].to_owned()).or_default().insert(f[1].to_owned(), score);
        }
    }
    let queries = queries.into_iter().filter(|q| qrels.contains_key(&q.id)).map(|q| (q.id, q.text)).collect();
    let sentences = docs.iter().map(|d| d.sentences.clone()).collect();
    Ok(Beir { docs: docs.into_iter().map(|d| (d.id, d.title, d.text)).collect(), sentences, queries, qrels })
}

/// File name of a corpus document's note.
pub fn note_file(id: &str) -> String {
    let safe: String = id.chars().map(|c| if c.is_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    format!("{safe}.md")
}

/// Writes one note per document in `shape` (only files whose content changed are rewritten).
/// A document without sentences is written as one paragraph whatever the shape.
pub fn write_vault(beir: &Beir, vault: &Path, shape: Shape) -> Result<HashMap<String, String>> {
    std::fs::create_dir_all(vault).with_context(|| format!("cannot create {}", vault.display()))?;
    let mut by_path = HashMap::new();
    for (i, (id, title, text)) in beir.docs.iter().enumerate() {
        let file = note_file(id);
        let sentences = beir.sentences.get(i).filter(|s| !s.is_empty());
        let text = match (shape, sentences) {
            (Shape::Sentence, Some(s)) => s.iter().map(|x| x.trim()).filter(|x| !x.is_empty()).collect::<Vec<_>>().join("\n\n"),
            _ => text.clone(),
        };
        let body = if title.trim().is_empty() { format!("{text}\n") } else { format!("# {}\n\n{text}\n", title.trim()) };
        let path = vault.join(&file);
        if std::fs::read(&path).ok().as_deref() != Some(body.as_bytes()) {
            std::fs::write(&path, body).with_context(|| format!("cannot write {}", path.display()))?;
        }
        by_path.insert(file, id.clone());
    }
    Ok(by_path)
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Metrics {
    pub queries: usize,
    pub ndcg_at_10: f64,
    pub recall_at_100: f64,
    pub mrr_at_10: f64,
    /// Queries for which nothing was returned.
    pub empty: usize,
    pub latency_ms_p50: f64,
    pub latency_ms_p95: f64,
    pub latency_ms_p99: f64,
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ndcg(ranked: &[String], rel: &HashMap<String, f64>, k: usize) -> f64 {
    let dcg: f64 = ranked.iter().take(k).enumerate().map(|(i, d)| rel.get(d).copied().unwrap_or(0.0) / ((i + 2) as f64).log2()).sum();
    let mut ideal: Vec<f64> = rel.values().copied().collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal.iter().take(k).enumerate().map(|(i, r)| r / ((i + 2) as f64).log2()).sum();
    if idcg == 0.0 {
        0.0
    } else {
        dcg / idcg
    }
}

/// Ranks notes for every judged query with lexical search and scores the rankings.
pub fn evaluate_lexical(
    store: &Store,
    beir: &Beir,
    doc_of_path: &HashMap<String, String>,
    opts: &SearchOptions,
    max_queries: Option<usize>,
) -> Result<Metrics> {
    // Enough passages to rank 100 distinct notes in nearly every case.
    let passage_opts = SearchOptions { limit: 300, snippets: false, ..opts.clone() };
    evaluate(beir, doc_of_path, max_queries, |q| Ok(store.search(q, &passage_opts)?.hits.into_iter().map(|h| h.path).collect()))
}

/// Scores a ranker (question → passage paths, best first) on every judged query; notes are
/// ranked by their best passage.
pub fn evaluate(
    beir: &Beir,
    doc_of_path: &HashMap<String, String>,
    max_queries: Option<usize>,
    mut rank: impl FnMut(&str) -> Result<Vec<String>>,
) -> Result<Metrics> {
    let queries: Vec<_> = beir.queries.iter().take(max_queries.unwrap_or(usize::MAX)).collect();
    let mut latencies = Vec::with_capacity(queries.len());
    let (mut ndcg_sum, mut recall_sum, mut mrr_sum, mut empty) = (0.0, 0.0, 0.0, 0);
    for (qid, text) in &queries {
        let t = Instant::now();
        let paths = rank(text)?;
        latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        let mut seen = HashSet::new();
        let ranked: Vec<String> = paths.iter().filter_map(|p| doc_of_path.get(p)).filter(|d| seen.insert((*d).clone())).cloned().collect();
        if ranked.is_empty() {
            empty += 1;
        }
        let rel = &beir.qrels[qid];
        ndcg_sum += ndcg(&ranked, rel, 10);
        let found = ranked.iter().take(100).filter(|d| rel.contains_key(*d)).count();
        recall_sum += found as f64 / rel.len() as f64;
        if let Some(pos) = ranked.iter().take(10).position(|d| rel.contains_key(d)) {
            mrr_sum += 1.0 / (pos + 1) as f64;
        }
    }
    latencies.sort_by(f64::total_cmp);
    let n = queries.len().max(1) as f64;
    Ok(Metrics {
        queries: queries.len(),
        ndcg_at_10: ndcg_sum / n,
        recall_at_100: recall_sum / n,
        mrr_at_10: mrr_sum / n,
        empty,
        latency_ms_p50: percentile(&latencies, 50.0),
        latency_ms_p95: percentile(&latencies, 95.0),
        latency_ms_p99: percentile(&latencies, 99.0),
    })
}

/// Where a corpus's generated vault and index live by default: one folder per corpus and shape
/// (the paragraph shape keeps the name it always had).
pub fn default_work_dir(beir_dir: &Path, shape: Shape) -> PathBuf {
    let name = beir_dir.canonicalize().ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let suffix = if shape == Shape::Sentence { "-sentence" } else { "" };
    std::env::temp_dir().join(format!("lode-eval-{}{suffix}", name.unwrap_or_else(|| "beir".into())))
}

pub fn run(cmd: EvalCommand) -> Result<ExitCode> {
    let args = match cmd {
        EvalCommand::Retrieval(a) => a,
        EvalCommand::Gate(a) => return eval_gate(a),
        EvalCommand::Answers(a) => return eval_answers(a),
    };
    let beir = load_beir(&args.beir_dir)?;
    let work = args.work.clone().unwrap_or_else(|| default_work_dir(&args.beir_dir, args.shape));
    let vault = work.join("vault");
    let doc_of_path = write_vault(&beir, &vault, args.shape)?;

    let mut config = Config::load(&vault)?;
    if let Some(t) = args.max_tokens {
        config.chunk.max_tokens = t;
    }
    if let Some(w) = args.window_tokens {
        config.models.window_tokens = w;
    }
    let mut store = Store::open(&work.join("lode.db"), config.store_options())?;
    let mut progress = Progress::new(!args.json);
    let report = index_vault(&mut store, &vault, &IndexOptions::default(), |p| progress.update(p.phase, p.done, p.total, p.path))?;
    progress.finish();
    let mut opts = config.search_options();
    if let Some(w) = args.heading_weight {
        opts.heading_weight = w;
    }
    if let Some(k) = args.or_terms {
        opts.or_terms = k;
    }
    opts.fill = !args.no_fill;
    if args.passages_only {
        opts.section_weight = 0.0;
    }
    if let Some(w) = args.section_weight {
        opts.section_weight = w;
    }

    let want = |m: lode_retrieval::Mode| args.modes.is_empty() || args.modes.contains(&m);
    let needs_dense = [lode_retrieval::Mode::Dense, lode_retrieval::Mode::Hybrid, lode_retrieval::Mode::Rerank].into_iter().any(want);
    let mut vault_cfg = super::Vault { root: vault.clone(), config: config.clone(), db: work.join("lode.db") };
    if let Some(r) = &args.reranker {
        vault_cfg.config.models.reranker = Some(r.clone());
    }
    // The evaluation embeds what lacks a vector (below): a work folder without a vector table
    // yet gets one, as `lode index` makes it, rather than its dense modes skipped.
    let mut loaded = crate::models::load_for(&vault_cfg, needs_dense, want(lode_retrieval::Mode::Rerank), true);
    let mut embed_seconds = None;
    if let (Some(e), Some(i)) = (loaded.embedder.as_mut(), loaded.index.as_ref()) {
        let mut progress = Progress::new(!args.json);
        let r = lode_retrieval::sync_vectors(
            &mut store,
            i,
            e,
            config.models.window_tokens,
            None,
            |d, t| progress.update("embedding", d, t, ""),
            || true,
        )?;
        progress.finish();
        if r.embedded > 0 {
            embed_seconds = Some(r.seconds);
        }
    }
    let passages = store.stats()?.passages;
    let baseline = if args.baseline { Some(note_bm25(&beir, &vault, &doc_of_path, args.max_queries)?) } else { None };
    let mut results: Vec<(lode_retrieval::Mode, Metrics)> = Vec::new();
    if want(lode_retrieval::Mode::Lexical) {
        results.push((lode_retrieval::Mode::Lexical, evaluate_lexical(&store, &beir, &doc_of_path, &opts, args.max_queries)?));
    }
    for mode in [lode_retrieval::Mode::Dense, lode_retrieval::Mode::Hybrid, lode_retrieval::Mode::Rerank] {
        if !want(mode) {
            continue;
        }
        let available =
            loaded.embedder.is_some() && loaded.index.is_some() && (mode != lode_retrieval::Mode::Rerank || loaded.reranker.is_some());
        if !available {
            if !args.json {
                eprintln!("skipping {mode:?}: {}", loaded.problems.join("; "));
            }
            continue;
        }
        let defaults = lode_retrieval::RetrievalConfig::default();
        let cfg = lode_retrieval::RetrievalConfig {
            limit: 100,
            candidates: 100,
            graph_limit: 0,
            search: SearchOptions { snippets: false, ..opts.clone() },
            dense_weight: args.dense_weight.unwrap_or(defaults.dense_weight),
            ..defaults
        };
        let m = evaluate(&beir, &doc_of_path, args.max_queries, |q| {
            let models = lode_retrieval::Models {
                embedder: loaded.embedder.as_mut(),
                index: loaded.index.as_ref(),
                reranker: loaded.reranker.as_mut(),
            };
            Ok(lode_retrieval::retrieve(&store, q, mode, models, &cfg)?.hits.into_iter().map(|h| h.hit.path).collect())
        })?;
        results.push((mode, m));
    }
    if args.json {
        let v = serde_json::json!({
            "data": args.beir_dir, "shape": args.shape, "notes": report.scanned, "passages": passages, "embed_seconds": embed_seconds,
            "modes": results.iter().map(|(m, x)| serde_json::json!({"mode": m, "metrics": x})).collect::<Vec<_>>(),
            "note_bm25_baseline": baseline,
            "settings": {"heading_weight": opts.heading_weight, "or_terms": opts.or_terms, "fill": opts.fill, "section_weight": opts.section_weight,
                         "window_tokens": config.models.window_tokens,
                         "max_tokens": config.chunk.max_tokens},
        });
        println!("{v}");
    } else {
        println!(
            "{} notes ({}), {passages} passages, {} judged queries ({})",
            report.scanned,
            if args.shape == Shape::Sentence { "one paragraph per sentence" } else { "one paragraph per abstract" },
            results.first().map_or(0, |r| r.1.queries),
            args.beir_dir.display()
        );
        println!("mode      nDCG@10  Recall@100  MRR@10  empty  p50 ms  p95 ms");
        for (mode, m) in &results {
            println!(
                "{:<9} {:.4}   {:.4}      {:.4}  {:>5}  {:>6.2}  {:>6.2}",
                format!("{mode:?}").to_lowercase(),
                m.ndcg_at_10,
                m.recall_at_100,
                m.mrr_at_10,
                m.empty,
                m.latency_ms_p50,
                m.latency_ms_p95
            );
        }
        if let Some(m) = &baseline {
            println!(
                "{:<9} {:.4}   {:.4}      {:.4}  {:>5}  {:>6.2}  {:>6.2}   (baseline: whole-note BM25, not lode)",
                "note-bm25", m.ndcg_at_10, m.recall_at_100, m.mrr_at_10, m.empty, m.latency_ms_p50, m.latency_ms_p95
            );
        }
        if cfg!(debug_assertions) {
            println!("(debug build: latencies are not representative; use a release build)");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The whole-note BM25 baseline: every note of the vault as one row of an in-memory FTS5 table
/// (same tokenizer as lode's index, title weighted like lode's headings), each question's terms
/// ORed, notes ranked by BM25. What a note-level peer does; lode's passage-level ranking is
/// measured against it on every vault shape.
fn note_bm25(beir: &Beir, vault: &Path, doc_of_path: &HashMap<String, String>, max_queries: Option<usize>) -> Result<Metrics> {
    let db = rusqlite::Connection::open_in_memory()?;
    db.execute_batch(
        "CREATE VIRTUAL TABLE notes USING fts5(path UNINDEXED, title, body, tokenize = 'porter unicode61 remove_diacritics 2')",
    )?;
    {
        let mut ins = db.prepare("INSERT INTO notes (path, title, body) VALUES (?1, ?2, ?3)")?;
        for path in doc_of_path.keys() {
            let text = std::fs::read_to_string(vault.join(path)).with_context(|| format!("cannot read {path}"))?;
            let (title, body) = match text.strip_prefix("# ").and_then(|t| t.split_once('\n')) {
                Some((t, b)) => (t.to_owned(), b.to_owned()),
                None => (String::new(), text),
            };
            ins.execute(rusqlite::params![path, title, body])?;
        }
    }
    let mut st = db.prepare("SELECT path FROM notes WHERE notes MATCH ?1 AND rank MATCH 'bm25(0.0, 2.0, 1.0)' ORDER BY rank LIMIT 100")?;
    evaluate(beir, doc_of_path, max_queries, |q| {
        let Some(fts) = lode_core::query::or_query(&lode_core::query::terms(q)) else { return Ok(Vec::new()) };
        Ok(st.query_map([fts], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?)
    })
}

#[derive(Deserialize)]
struct ClaimRow {
    claim: String,
    doc_id: String,
    label: String,
    rationale: Vec<String>,
}

/// Changes one word of a sentence: the first number gets its first digit changed, else the
/// longest word is replaced. The result is not a quote of anything.
pub fn perturb(sentence: &str) -> String {
    if let Some(pos) = sentence.find(|c: char| c.is_ascii_digit()) {
        let d = sentence.as_bytes()[pos] - b'0';
        let mut s = sentence.to_owned();
        s.replace_range(pos..pos + 1, &((d + 1) % 10).to_string());
        return s;
    }
    let longest = sentence.split(|c: char| !c.is_alphanumeric()).max_by_key(|w| w.len()).unwrap_or("");
    if longest.is_empty() {
        return format!("{sentence} not");
    }
    sentence.replacen(longest, "unrelated", 1)
}

#[derive(Deserialize)]
struct AdversarialRow {
    class: String,
    expect: String,
    claim: String,
    spans: Vec<String>,
    source: String,
    /// A faithful claim in other words: only an entailment model can verify it.
    #[serde(default)]
    paraphrase: bool,
}

/// Per class of an adversarial file: distortions accepted, by the step that accepted them
/// (deterministic: coupling or composition; entailment), and faithful claims lost, by why
/// (the note's structure or status, the claim's wording, the span check). Faithful paraphrases
/// are counted apart: only an entailment model can verify them.
fn adversarial_report(path: &Path, scorer: &mut lode_core::gate::ScorerSlot<'_>) -> Result<serde_json::Value> {
    use lode_core::gate::GateConfig;
    #[derive(Default)]
    struct Count {
        distortions: usize,
        accepted_deterministic: usize,
        accepted_entailment: usize,
        faithful: usize,
        lost_structure: usize,
        lost_wording: usize,
        lost_span: usize,
        paraphrases: usize,
        paraphrases_entailed: usize,
    }
    impl Count {
        fn json(&self) -> serde_json::Value {
            serde_json::json!({
                "distortions": self.distortions,
                "distortions_accepted": self.accepted_deterministic + self.accepted_entailment,
                "distortions_accepted_by_step": {"deterministic": self.accepted_deterministic, "entailment": self.accepted_entailment},
                "faithful": self.faithful,
                "faithful_lost": self.lost_structure + self.lost_wording + self.lost_span,
                "faithful_lost_by_cause": {"structure": self.lost_structure, "wording": self.lost_wording, "span_check": self.lost_span},
                "paraphrases": self.paraphrases,
                "paraphrases_verified_by_entailment": self.paraphrases_entailed,
            })
        }
        fn add(&mut self, o: &Count) {
            self.distortions += o.distortions;
            self.accepted_deterministic += o.accepted_deterministic;
            self.accepted_entailment += o.accepted_entailment;
            self.faithful += o.faithful;
            self.lost_structure += o.lost_structure;
            self.lost_wording += o.lost_wording;
            self.lost_span += o.lost_span;
            self.paraphrases += o.paraphrases;
            self.paraphrases_entailed += o.paraphrases_entailed;
        }
    }
    let rows: Vec<AdversarialRow> = read_jsonl(path)?;
    let cfg = GateConfig::default();
    let mut by_class: std::collections::BTreeMap<String, Count> = std::collections::BTreeMap::new();
    let mut wrong = Vec::new();
    for r in &rows {
        let v = super::gate::verdict(&r.claim, &r.spans, &r.source, scorer, &cfg);
        let (coupled, entailed) = (v["verdict"] == "coupled", v["verdict"] == "entailed");
        let accepted = coupled || entailed;
        let e = by_class.entry(r.class.clone()).or_default();
        match (r.expect.as_str(), r.paraphrase) {
            ("reject", _) => {
                e.distortions += 1;
                e.accepted_deterministic += usize::from(coupled);
                e.accepted_entailment += usize::from(entailed);
            }
            ("accept", true) => {
                e.paraphrases += 1;
                e.paraphrases_entailed += usize::from(entailed);
                continue;
            }
            ("accept", false) => {
                e.faithful += 1;
                if !accepted {
                    let structural =
                        v["rung"] == "evidence_only" && v["why"].as_str().is_some_and(|w| w != lode_core::gate::WORDING_NOT_VERIFIED);
                    match (v["rung"] == "evidence_only", structural) {
                        (_, true) => e.lost_structure += 1,
                        (true, false) => e.lost_wording += 1,
                        (false, _) => e.lost_span += 1,
                    }
                }
            }
            (other, _) => bail!("{}: expect must be accept or reject, not {other:?}", path.display()),
        }
        if accepted != (r.expect == "accept") {
            wrong.push(serde_json::json!({"class": r.class, "expect": r.expect, "claim": r.claim, "verdict": v}));
        }
    }
    let classes: serde_json::Map<String, serde_json::Value> = by_class.iter().map(|(c, n)| (c.clone(), n.json())).collect();
    let mut total = Count::default();
    for n in by_class.values() {
        total.add(n);
    }
    let mut out = serde_json::json!({"file": path.display().to_string(), "rows": rows.len()});
    if let (Some(o), serde_json::Value::Object(t)) = (out.as_object_mut(), total.json()) {
        o.extend(t);
        o.insert("classes".into(), classes.into());
        o.insert("wrong".into(), wrong.into());
    }
    Ok(out)
}

fn eval_gate(args: GateEvalArgs) -> Result<ExitCode> {
    use lode_core::gate::{GateConfig, ScorerSlot};
    // The entailment step runs only when a model is named: the deterministic steps are what
    // this measures by default.
    let mut nli = super::gate::nli_slot(args.nli.clone());
    let adversarial: Vec<serde_json::Value> = args.adversarial.iter().map(|p| adversarial_report(p, &mut nli)).collect::<Result<_>>()?;
    let rows: Vec<ClaimRow> = read_jsonl(&args.claims)?;
    let corpus_path = args.corpus.clone().unwrap_or_else(|| args.claims.parent().unwrap_or(Path::new(".")).join("corpus.jsonl"));
    let docs: HashMap<String, String> = read_jsonl::<Doc>(&corpus_path)?.into_iter().map(|d| (d.id, d.text)).collect();
    let cfg = GateConfig::default();
    let mut scorer = ScorerSlot::None;
    let (mut support, mut support_ok, mut refute, mut refute_ok, mut perturbed, mut perturbed_rejected) = (0, 0, 0, 0, 0, 0);
    let mut missing = 0;
    let (mut clauses, mut clauses_lost, mut clause_examples) = (0usize, 0usize, Vec::new());
    let mut refute_examples = Vec::new();
    let mut steps: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for r in &rows {
        let Some(source) = docs.get(&r.doc_id) else {
            missing += 1;
            continue;
        };
        let v = super::gate::verdict(&r.claim, &r.rationale, source, &mut scorer, &cfg);
        let accepted = v["verdict"] == "coupled";
        *steps.entry(format!("{}:{}", v["verdict"].as_str().unwrap_or(""), v["step"].as_str().unwrap_or(""))).or_insert(0usize) += 1;
        match r.label.as_str() {
            "SUPPORT" => {
                support += 1;
                support_ok += usize::from(accepted);
            }
            "REFUTE" => {
                refute += 1;
                refute_ok += usize::from(accepted);
                if accepted && refute_examples.len() < 5 {
                    refute_examples.push(serde_json::json!({"claim": r.claim, "rationale": r.rationale}));
                }
            }
            _ => {}
        }
        // A faithful first clause of each rationale sentence ("X, likely facilitating Y" → "X")
        // must not be lost to a cue of another clause: counted when the clause alone couples
        // but not inside its sentence.
        for sentence in &r.rationale {
            let Some(comma) = sentence.find(", ") else { continue };
            let clause = sentence[..comma].trim();
            let dangling = clause.ends_with(" that") || clause.ends_with(" than");
            if dangling || lode_core::gate::payload(clause).len() < 4 || clause.contains(['(', ')', '[', ']', ';', ':']) {
                continue;
            }
            let alone = format!("{clause}.");
            let standalone = super::gate::verdict(clause, &[clause.to_owned()], &alone, &mut scorer, &cfg);
            if standalone["verdict"] != "coupled" {
                continue;
            }
            clauses += 1;
            let inside = super::gate::verdict(clause, &[clause.to_owned()], source, &mut scorer, &cfg);
            if inside["verdict"] != "coupled" {
                clauses_lost += 1;
                if clause_examples.len() < 40 {
                    clause_examples.push(serde_json::json!({"sentence": sentence, "reason": inside["reason"]}));
                }
            }
        }
        // Perturb one rationale sentence; the span check must reject it.
        let mut spans = r.rationale.clone();
        if let Some(first) = spans.first_mut() {
            *first = perturb(first);
            perturbed += 1;
            let pv = super::gate::verdict(&r.claim, &spans, source, &mut scorer, &cfg);
            if pv["verdict"] == "dropped" && pv["step"] == "span_check" {
                perturbed_rejected += 1;
            }
        }
    }
    let v = serde_json::json!({
        "claims": rows.len(), "missing_documents": missing,
        "refute": refute, "refute_accepted_deterministically": refute_ok,
        "support": support, "support_accepted_deterministically": support_ok,
        "support_accepted_share": support_ok as f64 / support.max(1) as f64,
        "perturbed": perturbed, "perturbed_rejected_by_span_check": perturbed_rejected,
        "perturbed_rejected_share": perturbed_rejected as f64 / perturbed.max(1) as f64,
        "refute_accepted_examples": refute_examples,
        "first_clauses": clauses, "first_clauses_lost_to_another_clause": clauses_lost,
        "first_clauses_lost_examples": clause_examples,
        "verdicts_by_step": steps,
        "adversarial": adversarial,
    });
    if args.json {
        println!("{v}");
    } else {
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn eval_answers(args: AnswersArgs) -> Result<ExitCode> {
    use lode_answer::{ask, Synthesizer};
    use lode_core::gate::ScorerSlot;
    let beir = load_beir(&args.beir_dir)?;
    let work = args.work.clone().unwrap_or_else(|| default_work_dir(&args.beir_dir, Shape::Paragraph));
    let vault = work.join("vault");
    let doc_of_path = write_vault(&beir, &vault, Shape::Paragraph)?;
    let config = Config::load(&vault)?;
    let mut store = Store::open(&work.join("lode.db"), config.store_options())?;
    let mut progress = Progress::new(!args.json);
    index_vault(&mut store, &vault, &IndexOptions::default(), |p| progress.update(p.phase, p.done, p.total, p.path))?;
    progress.finish();
    let rules = config.egress_rules()?;
    let mut ask_cfg = config.ask_config();
    if let Some(n) = args.context {
        ask_cfg.context_limit = n.clamp(1, 50);
    }
    let vault_cfg = super::Vault { root: vault.clone(), config: config.clone(), db: work.join("lode.db") };
    let mut loaded = crate::models::load(&vault_cfg, args.hybrid, false);
    if let (Some(e), Some(i)) = (loaded.embedder.as_mut(), loaded.index.as_ref()) {
        lode_retrieval::sync_vectors(&mut store, i, e, config.models.window_tokens, None, |_, _| {}, || true)?;
    }
    let synth = match &args.llm {
        Some(endpoint) => Synthesizer::Llm(lode_answer::llm::LlmConfig {
            endpoint: endpoint.clone(),
            model: args.llm_model.clone(),
            timeout_secs: args.llm_timeout,
            max_tokens: args.llm_max_tokens,
            retries: 0,
            ..Default::default()
        }),
        None => Synthesizer::Extractive,
    };
    let (mut answered, mut relevant_first, mut abstained, mut n) = (0, 0, 0, 0);
    // Ladder counts: items shown verified / evidence only, claims dropped (by step), replies
    // that could not be used (fallback to extractive), endpoint errors.
    let (mut verified, mut evidence, mut fallbacks, mut errors) = (0usize, 0usize, 0usize, 0usize);
    let mut dropped: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    let mut examples: Vec<serde_json::Value> = Vec::new();
    let mut times = Vec::new();
    let (mut citations, mut inexact) = (0usize, 0usize);
    for (qid, text) in beir.queries.iter().take(args.max_queries.unwrap_or(usize::MAX)) {
        n += 1;
        let t = Instant::now();
        let models = lode_retrieval::Models { embedder: loaded.embedder.as_mut(), index: loaded.index.as_ref(), reranker: None };
        let a = match ask(&store, text, None, &ask_cfg, &rules, &synth, models, &mut ScorerSlot::None) {
            Ok(a) => a,
            Err(e) if args.llm.is_some() => {
                errors += 1;
                eprintln!("query {qid}: {e}");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        fallbacks += usize::from(a.notice.is_some());
        for c in &a.claims {
            match c.rung {
                lode_answer::Rung::Verified => verified += 1,
                lode_answer::Rung::EvidenceOnly => evidence += 1,
            }
            // A citation is exact when the cited version's bytes at its range are its quote.
            for cit in &c.citations {
                citations += 1;
                let body = store.version_body(&cit.version_id)?.unwrap_or_default();
                if body.get(cit.start..cit.end) != Some(cit.quoted_span.as_bytes()) {
                    inexact += 1;
                }
            }
        }
        for d in &a.dropped {
            *dropped.entry(format!("{:?}", d.step)).or_default() += 1;
        }
        let unverified_extract = a.claims.iter().any(|c| c.rung == lode_answer::Rung::EvidenceOnly);
        if (args.llm.is_some() || unverified_extract) && examples.len() < 8 {
            examples.push(serde_json::json!({"question": text, "synthesizer": a.synthesizer, "notice": a.notice,
                "shown": a.claims.iter().map(|c| serde_json::json!({"rung": c.rung, "text": c.text, "model": c.unverified_text})).collect::<Vec<_>>(),
                "dropped": a.dropped.iter().map(|d| serde_json::json!({"text": d.text, "reason": d.reason})).collect::<Vec<_>>()}));
        }
        let Some(first) = a.claims.first() else {
            abstained += 1;
            continue;
        };
        answered += 1;
        let doc = first.citations.first().and_then(|c| doc_of_path.get(&c.path));
        if doc.is_some_and(|d| beir.qrels[qid].contains_key(d)) {
            relevant_first += 1;
        }
    }
    times.sort_by(f64::total_cmp);
    let v = serde_json::json!({
        "queries": n, "answered": answered, "abstained": abstained,
        "first_claim_from_relevant_doc": relevant_first,
        "share_of_answers": relevant_first as f64 / answered.max(1) as f64,
        "share_of_queries": relevant_first as f64 / n.max(1) as f64,
        "latency_ms_p50": percentile(&times, 50.0),
        "synthesizer": synth.name(),
        "items_verified": verified, "items_evidence_only": evidence, "claims_dropped_by_step": dropped,
        "citations": citations, "inexact_citations": inexact,
        "replies_unusable_fell_back_to_extractive": fallbacks, "endpoint_errors": errors,
        "examples": examples,
    });
    if args.json {
        println!("{v}");
    } else {
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(ExitCode::SUCCESS)
}
