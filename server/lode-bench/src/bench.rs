//! `lode-bench lexical`: the foundation's performance figures on a BEIR corpus written out as a
//! vault — cold index (separate processes), re-save latency by note size, in-process search
//! latency, whole `lode search` processes, empty answers, and lexical nDCG@10. Medians first.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use lode_store::{SearchOptions, Store};

use lode::cmd::eval::{default_work_dir, evaluate_lexical, load_beir, percentile, write_vault, Shape};
use lode::config::Config;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Index, re-save and search figures on a BEIR corpus (e.g. ../shared/eval/scifact)
    Lexical(LexicalArgs),
    /// Embedding throughput (and its ratio to ONNX Runtime's Python API), time to embed the
    /// vault, RSS with the model loaded, and hybrid retrieval latency
    Dense(DenseArgs),
    /// The language server: initialize, cold scan, restart to searchable, didSave, hover, RSS
    Lsp(LspArgs),
    /// The cold index's cost per note from 5k notes up, beside plain SQLite FTS5 on the same
    /// paragraphs (the floor)
    Scale(crate::bench_scale::ScaleArgs),
    /// The language server's RSS with the embedder: peak while embedding a generated vault,
    /// serving questions after a restart, and with no embedder
    Memory(crate::bench_memory::MemoryArgs),
    /// Snapshot ingest (100 KB pages from loopback) and snapshot diagnostics on 10,000 links
    Externals(crate::bench_externals::ExternalsArgs),
    /// Dense queries at scale: a vector table of synthetic embeddings searched flat, then with
    /// its IVF-PQ index (latency, build time, recall@10)
    Ann(crate::bench_ann::AnnArgs),
}

#[derive(Args)]
pub struct LspArgs {
    /// A BEIR corpus to write out as the vault (or use --notes)
    #[arg(required_unless_present = "notes")]
    pub beir_dir: Option<PathBuf>,
    /// A generated vault of this many notes instead (e.g. 100000)
    #[arg(long, conflicts_with = "beir_dir")]
    pub notes: Option<usize>,
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// didSave round trips timed
    #[arg(long, default_value_t = 200)]
    pub saves: usize,
    /// Headings typed into workspace/symbol, one request per keystroke
    #[arg(long, default_value_t = 40)]
    pub symbols: usize,
    /// Reuse the index of a previous run (skips the cold scan; the other figures only)
    #[arg(long)]
    pub keep_index: bool,
}

#[derive(Args)]
pub struct DenseArgs {
    pub beir_dir: PathBuf,
    /// How each document is written as a note
    #[arg(long, value_enum, default_value_t = Shape::Paragraph)]
    pub shape: Shape,
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// Passages whose windows are timed in the throughput comparison
    #[arg(long, default_value_t = 640)]
    pub sample: usize,
    /// Questions timed through the hybrid pipeline
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// Skip indexing and embedding the whole vault from scratch (reuse what there is)
    #[arg(long)]
    pub keep_vectors: bool,
    /// Embedding window size in tokens [default: the vault's config, 128]
    #[arg(long, value_name = "N")]
    pub window_tokens: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct LexicalArgs {
    pub beir_dir: PathBuf,
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// Cold index runs (each a fresh database, in a separate process)
    #[arg(long, default_value_t = 3)]
    pub index_runs: usize,
    /// Saves timed per note size
    #[arg(long, default_value_t = 300)]
    pub saves: usize,
    /// Whole `lode search` processes timed
    #[arg(long, default_value_t = 60)]
    pub processes: usize,
    /// Which parts to run (comma-separated): index, resave, search, process, quality
    #[arg(long, value_delimiter = ',', default_value = "index,resave,search,process,quality")]
    pub parts: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn stats(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    serde_json::json!({"n": v.len(), "p50": percentile(&v, 50.0), "p99": percentile(&v, 99.0),
                       "min": v.first(), "max": v.last()})
}

fn run_index_process(exe: &Path, vault: &Path) -> Result<(f64, serde_json::Value)> {
    let t = Instant::now();
    let out = Command::new(exe).args(["index", "--quiet", "--json", "--no-vectors", "--vault"]).arg(vault).output()?;
    let wall = t.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("lode index failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok((wall, serde_json::from_slice(&out.stdout).context("lode index --json printed no JSON")?))
}

/// A note of about `size` bytes made of corpus text under headings.
fn note_of_size(docs: &[(String, String, String)], size: usize, salt: usize) -> String {
    let mut s = format!("# Bench note {salt}\n\n");
    let mut i = salt;
    while s.len() < size {
        let (_, title, text) = &docs[i % docs.len()];
        s.push_str(&format!("## {title}\n\n{text}\n\n"));
        i += 1;
    }
    s.truncate(lode_core::text::floor_char_boundary(&s, size));
    s
}

pub fn run(cmd: BenchCommand) -> Result<ExitCode> {
    let args = match cmd {
        BenchCommand::Lexical(a) => a,
        BenchCommand::Dense(a) => return dense(a),
        BenchCommand::Lsp(a) => return lsp(a),
        BenchCommand::Externals(a) => return crate::bench_externals::run(a),
        BenchCommand::Memory(a) => return crate::bench_memory::run(a),
        BenchCommand::Scale(a) => return crate::bench_scale::run(a),
        BenchCommand::Ann(a) => return crate::bench_ann::run(a),
    };
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; build with --release for representative figures");
    }
    let exe = crate::lode_exe()?;
    let beir = load_beir(&args.beir_dir)?;
    let work = args.work.clone().unwrap_or_else(|| default_work_dir(&args.beir_dir, Shape::Paragraph).with_extension("bench"));
    let vault = work.join("vault");
    let doc_of_path = write_vault(&beir, &vault, Shape::Paragraph)?;
    let state = vault.join(".lode");
    let part = |name: &str| args.parts.iter().any(|p| p == name);

    // 1. Cold index, each run from an empty database in a new process.
    let mut walls = Vec::new();
    let mut inner = Vec::new();
    let mut rss = Vec::new();
    let runs = if part("index") || !state.join("lode.db").exists() { args.index_runs.max(1) } else { 0 };
    for _ in 0..runs {
        if state.exists() {
            std::fs::remove_dir_all(&state)?;
        }
        let (wall, report) = run_index_process(&exe, &vault)?;
        walls.push(wall);
        inner.push(report["seconds"].as_f64().unwrap_or(f64::NAN));
        rss.push(report["peak_rss_mib"].as_f64().unwrap_or(f64::NAN));
    }
    let config = Config::load(&vault)?;
    let db = state.join("lode.db");

    // 2. Re-save latency by note size: each save changes the bytes (chunk + passages + FTS5 + commit).
    let mut resave = serde_json::Map::new();
    {
        let mut store = Store::open(&db, config.store_options())?;
        let sizes: &[usize] = if part("resave") { &[1_000, 10_000, 100_000] } else { &[] };
        for &size in sizes {
            let a = note_of_size(&beir.docs, size, 1);
            let b = note_of_size(&beir.docs, size, 2);
            let n = if size >= 100_000 { (args.saves / 3).max(10) } else { args.saves };
            let mut times = Vec::with_capacity(n);
            for i in 0..n + 5 {
                let body = format!("{}\n{i}\n", if i % 2 == 0 { &a } else { &b });
                let t = Instant::now();
                store.save_note(&format!("bench/resave-{size}.md"), body.as_bytes())?;
                if i >= 5 {
                    times.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
            resave.insert(format!("{}KB", size / 1000), stats(times));
            // An edit: one sentence in the middle changes, the rest of the note stays.
            let mut edit_times = Vec::with_capacity(n);
            let mid = lode_core::text::floor_char_boundary(&a, a.len() / 2);
            for i in 0..n + 5 {
                let body = format!("{}edited {i} times. {}", &a[..mid], &a[mid..]);
                let t = Instant::now();
                store.save_note(&format!("bench/resave-{size}.md"), body.as_bytes())?;
                if i >= 5 {
                    edit_times.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
            resave.insert(format!("{}KB_edit", size / 1000), stats(edit_times));
            store.delete_note(&format!("bench/resave-{size}.md"))?;
            // The chunker's share of a save, for the same notes.
            let mut chunk_times = Vec::with_capacity(n);
            for i in 0..n {
                let body = if i % 2 == 0 { &a } else { &b };
                let t = Instant::now();
                std::hint::black_box(lode_core::chunk_note(body.as_bytes(), &config.store_options().chunk));
                chunk_times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            resave.insert(format!("{}KB_chunk_only", size / 1000), stats(chunk_times));
        }
    }

    // 3. In-process search over every query, and empties among the first 300 questions.
    let store = Store::open(&db, config.store_options())?;
    let opts = SearchOptions { limit: 10, ..config.search_options() };
    let mut times = Vec::new();
    let mut empty_300 = 0;
    let mut empty_all = 0;
    let queries = if part("search") { beir.queries.len() } else { 0 };
    for (i, (_, q)) in beir.queries.iter().take(queries).enumerate() {
        let t = Instant::now();
        let r = store.search(q, &opts)?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        if r.hits.is_empty() {
            empty_all += 1;
            if i < 300 {
                empty_300 += 1;
            }
        }
    }
    let search_in_process = stats(times);

    // 4. Whole processes: start, open, query, print.
    let mut proc_times = Vec::new();
    let processes = if part("process") { args.processes } else { 0 };
    for (_, q) in beir.queries.iter().take(processes) {
        let t = Instant::now();
        let out = Command::new(&exe).args(["search", "--json", "--limit", "10", "--vault"]).arg(&vault).arg(q).output()?;
        proc_times.push(t.elapsed().as_secs_f64() * 1000.0);
        if !out.status.success() {
            bail!("lode search failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }

    // 5. Quality.
    let m = if part("quality") { Some(evaluate_lexical(&store, &beir, &doc_of_path, &config.search_options(), None)?) } else { None };

    let v = serde_json::json!({
        "corpus": args.beir_dir, "notes": beir.docs.len(), "queries": beir.queries.len(),
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "cold_index_s": stats(walls), "cold_index_inner_s": stats(inner), "index_peak_rss_mib": stats(rss),
        "resave_ms": resave, "search_in_process_ms": search_in_process,
        "search_process_ms": stats(proc_times),
        "empty_results": {"first_300": empty_300, "all": empty_all},
        "lexical": m,
    });
    if args.json {
        println!("{v}");
    } else {
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn lsp(a: LspArgs) -> Result<ExitCode> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; build with --release for representative figures");
    }
    let mut rng = crate::synth::Rng::new(42);
    let (vault, symbol_headings, nav_notes) = match (&a.beir_dir, a.notes) {
        (_, Some(n)) => {
            let work = a.work.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("lode-bench-lsp-{n}")));
            let vault = crate::bench_lsp::vault_of(&work);
            let mut progress = lode::progress::Progress::new(true);
            let bytes = crate::synth::write_vault(&vault, n, 1, |d, t| progress.update("writing notes", d, t, ""))?;
            drop(progress);
            eprintln!("{n} generated notes, {:.0} MB, in {}", bytes as f64 / 1e6, vault.display());
            // Headings that are in the vault: the first section heading of random notes, read
            // from the files (a vault written by an older generator is reused as it is).
            let mut headings = Vec::new();
            let mut tries = 0;
            while headings.len() < a.symbols && tries < a.symbols * 50 {
                tries += 1;
                let body = std::fs::read_to_string(vault.join(crate::synth::note_path(rng.below(n)))).unwrap_or_default();
                if let Some(h) = body.lines().find_map(|l| l.strip_prefix("## ")) {
                    headings.push(h.to_owned());
                }
            }
            let nav = (0..30).map(|_| crate::synth::note_path(rng.below(n))).collect();
            (vault, headings, nav)
        }
        (Some(dir), None) => {
            let beir = load_beir(dir)?;
            let work = a.work.clone().unwrap_or_else(|| default_work_dir(dir, Shape::Paragraph).with_extension("lsp"));
            let vault = crate::bench_lsp::vault_of(&work);
            write_vault(&beir, &vault, Shape::Paragraph)?;
            let headings = (0..a.symbols).map(|_| beir.docs[rng.below(beir.docs.len())].1.clone()).collect();
            let nav = crate::bench_lsp::some_notes(&vault, 30)?;
            drop(beir);
            (vault, headings, nav)
        }
        (None, None) => bail!("give a BEIR corpus folder or --notes N"),
    };
    let opts = crate::bench_lsp::Options { saves: a.saves, symbol_headings, nav_notes, keep_index: a.keep_index };
    let v = crate::bench_lsp::run(&crate::lode_exe()?, &vault.canonicalize()?, &opts)?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}

fn rss_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse::<f64>().ok().map(|kb| kb / 1024.0)
}

fn dense(args: DenseArgs) -> Result<ExitCode> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; build with --release for representative figures");
    }
    let beir = load_beir(&args.beir_dir)?;
    let work = args.work.clone().unwrap_or_else(|| default_work_dir(&args.beir_dir, args.shape).with_extension("bench"));
    let vault_dir = work.join("vault");
    let doc_of_path = write_vault(&beir, &vault_dir, args.shape)?;
    let mut config = Config::load(&vault_dir)?;
    if let Some(w) = args.window_tokens {
        config.models.window_tokens = w;
    }
    let vault = lode::cmd::Vault { root: vault_dir.clone(), config: config.clone(), db: vault_dir.join(".lode/lode.db") };
    let window_tokens = config.models.window_tokens;

    // 1. The lexical index from nothing: the first half of "hybrid-ready".
    if !args.keep_vectors && vault_dir.join(".lode").exists() {
        std::fs::remove_dir_all(vault_dir.join(".lode"))?;
    }
    let t = Instant::now();
    let mut store = Store::open(&vault.db, config.store_options())?;
    let scan = lode_store::vault::index_vault(&mut store, &vault_dir, &Default::default(), |_| {})?;
    let lexical_s = t.elapsed().as_secs_f64();
    let passages = store.stats()?.passages;

    let rss_before = rss_mib("VmRSS:");
    let m = &config.models;
    let t = Instant::now();
    let mut embedder = lode_models::Embedder::load(&m.resolve(&m.embedder), m.runtime.as_deref(), m.threads)?;
    let load_s = t.elapsed().as_secs_f64();
    let rss_model = rss_mib("VmRSS:");

    // 2. Throughput on the same windows as ONNX Runtime's Python API.
    let pending = store.pending_vectors("bench-sample-never-marked", 0, args.sample)?;
    let sample: Vec<String> = lode_retrieval::plan_windows(&embedder, &pending, window_tokens)?
        .iter()
        .map(|(w, _)| lode_retrieval::window_text(&pending, w))
        .collect();
    let refs: Vec<&str> = sample.iter().map(String::as_str).collect();
    let sample_tokens: usize = embedder.token_counts(&refs)?.iter().map(|n| (n + 2).min(embedder.max_length())).sum();
    embedder.embed_passages(&refs[..refs.len().min(16)])?; // warm-up
    let t = Instant::now();
    embedder.embed_passages(&refs)?;
    let lode_secs = t.elapsed().as_secs_f64();
    let lode_rate = sample.len() as f64 / lode_secs;
    let texts = work.join("bench-texts.jsonl");
    std::fs::write(&texts, sample.iter().map(|t| serde_json::json!({"text": t}).to_string() + "\n").collect::<String>())?;
    let py = std::env::var("LODE_PYTHONPATH").ok().map(PathBuf::from).unwrap_or_else(|| m.models_dir().join("../py"));
    let script = crate::lode_exe()?
        .ancestors()
        .nth(3)
        .map(|r| r.join("scripts/bench_python_embed.py"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("scripts/bench_python_embed.py"));
    let out = Command::new("python3")
        .env("PYTHONPATH", &py)
        .arg(&script)
        .arg(m.resolve(&m.embedder))
        .arg(&texts)
        .arg(m.threads.to_string())
        .arg(lode_models::EMBED_BATCH.to_string())
        .arg(embedder.manifest().max_length.to_string())
        .arg(lode_models::EMBED_BATCH_TOKENS.to_string())
        .output();
    let python: Option<serde_json::Value> = match out {
        Ok(o) if o.status.success() => serde_json::from_slice(&o.stdout).ok(),
        Ok(o) => {
            eprintln!("warning: python comparison failed: {}", String::from_utf8_lossy(&o.stderr));
            None
        }
        Err(e) => {
            eprintln!("warning: python comparison not run: {e}");
            None
        }
    };
    let py_rate = python.as_ref().and_then(|p| p["per_second"].as_f64());
    let py_tokens_rate = python.as_ref().and_then(|p| p["tokens_per_second"].as_f64());

    // 3. The whole vault, from an empty vector index: the second half of "hybrid-ready".
    let vectors_dir = vault.vectors_dir();
    if !args.keep_vectors {
        if vectors_dir.exists() {
            std::fs::remove_dir_all(&vectors_dir)?;
        }
        store.reset_vectors(None)?;
    }
    let index = lode_retrieval::VectorIndex::open(&vectors_dir, embedder.id(), embedder.dimensions())?;
    let mut progress = lode::progress::Progress::new(!args.json);
    let sync = lode_retrieval::sync_vectors(
        &mut store,
        &index,
        &mut embedder,
        window_tokens,
        None,
        |d, t| progress.update("embedding", d, t, ""),
        || true,
    )?;
    progress.finish();
    let rss_after_embed = rss_mib("VmHWM:");
    let vault_tokens = sync.tokens + 2 * sync.windows;
    let floor_s = py_tokens_rate.map(|r| vault_tokens as f64 / r);
    let ready_s = lexical_s + sync.seconds;

    // 4. Quality on this shape, and retrieval latency for one question.
    let lex_opts = SearchOptions { snippets: false, ..config.search_options() };
    let lexical = evaluate_lexical(&store, &beir, &doc_of_path, &lex_opts, None)?;
    let cfg =
        lode_retrieval::RetrievalConfig { limit: 100, candidates: 100, graph_limit: 0, search: lex_opts.clone(), ..Default::default() };
    let mut quality = serde_json::Map::new();
    quality.insert("lexical".into(), serde_json::json!(lexical.ndcg_at_10));
    for mode in [lode_retrieval::Mode::Dense, lode_retrieval::Mode::Hybrid] {
        let r = lode::cmd::eval::evaluate(&beir, &doc_of_path, None, |q| {
            let models = lode_retrieval::Models { embedder: Some(&mut embedder), index: Some(&index), reranker: None };
            Ok(lode_retrieval::retrieve(&store, q, mode, models, &cfg)?.hits.into_iter().map(|h| h.hit.path).collect())
        })?;
        quality.insert(format!("{mode:?}").to_lowercase(), serde_json::json!(r.ndcg_at_10));
    }
    let cfg = lode_retrieval::RetrievalConfig { limit: 10, graph_limit: 0, ..Default::default() };
    let mut times = Vec::new();
    let mut embed_times = Vec::new();
    for (_, q) in beir.queries.iter().take(args.queries) {
        let t = Instant::now();
        let models = lode_retrieval::Models { embedder: Some(&mut embedder), index: Some(&index), reranker: None };
        let r = lode_retrieval::retrieve(&store, q, lode_retrieval::Mode::Hybrid, models, &cfg)?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        if let Some(s) = r.stages.iter().find(|s| s.name == "embed_query") {
            embed_times.push(s.ms);
        }
    }
    let v = serde_json::json!({
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "shape": args.shape, "notes": scan.scanned, "passages": passages, "window_tokens": window_tokens,
        "model": embedder.id(), "threads": m.threads, "model_load_s": load_s,
        "lexical_index_s": lexical_s,
        "rss_mib": {"before_model": rss_before, "model_loaded": rss_model, "peak_after_embedding": rss_after_embed},
        "throughput": {"windows": sample.len(), "from_passages": pending.len(), "tokens": sample_tokens,
                       "lode_windows_per_s": lode_rate, "lode_tokens_per_s": sample_tokens as f64 / lode_secs,
                       "python_ort_windows_per_s": py_rate, "python_ort_tokens_per_s": py_tokens_rate,
                       "ratio": py_rate.map(|p| lode_rate / p)},
        "vault_embedding": {"passages": sync.embedded, "windows": sync.windows, "tokens": vault_tokens,
                            "seconds": sync.seconds, "model_seconds": sync.model_seconds,
                            "windows_per_s": sync.windows as f64 / sync.seconds.max(1e-9),
                            "tokens_per_s": vault_tokens as f64 / sync.seconds.max(1e-9),
                            "rounds": sync.rounds, "round_seconds_max": sync.round_seconds_max},
        "hybrid_ready_s": ready_s, "one_pass_floor_s": floor_s, "ready_over_floor": floor_s.map(|f| ready_s / f),
        "ndcg_at_10": quality,
        "hybrid_query_ms": stats(times), "embed_query_ms": stats(embed_times),
    });
    if args.json {
        println!("{v}");
    } else {
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(ExitCode::SUCCESS)
}
