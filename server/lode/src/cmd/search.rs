//! `lode search`: ranked passages with path:line and a snippet, or JSON lines.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::Vault;
use crate::VaultArgs;

#[derive(Args)]
pub struct SearchArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
    /// How many passages to return
    #[arg(long, short = 'n', value_name = "N")]
    pub limit: Option<usize>,
    /// lexical (BM25), dense (embeddings), hybrid (both, fused) or rerank (hybrid + cross-encoder)
    #[arg(long, default_value = "lexical")]
    pub mode: lode_retrieval::Mode,
    /// Print how long each retrieval stage took, on stderr
    #[arg(long)]
    pub timings: bool,
    /// The question or keywords (FTS5 syntax is treated as plain text)
    #[arg(required = true, num_args = 1..)]
    pub query: Vec<String>,
}

pub fn run(args: SearchArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&args.vault)?;
    let store = vault.open_for_reading()?;
    let mut opts = vault.config.search_options();
    if let Some(n) = args.limit {
        opts.limit = n;
    }
    let question = args.query.join(" ");
    // Every mode goes through the retrieval pipeline, so `lode search` ranks in the trust order
    // `lode ask` and the editor use (the user's notes, then annotations, then snapshots).
    let lexical = args.mode == lode_retrieval::Mode::Lexical;
    let mut loaded = if lexical {
        crate::models::Loaded::default()
    } else {
        crate::models::load(&vault, true, args.mode == lode_retrieval::Mode::Rerank)
    };
    let models =
        lode_retrieval::Models { embedder: loaded.embedder.as_mut(), index: loaded.index.as_ref(), reranker: loaded.reranker.as_mut() };
    // The team's shared tier, when the config names one; unreachable, the vault's own notes answer.
    let shared = match vault.config.shared.as_ref().map(|s| lode_retrieval::shared::SharedTier::new(s.config()).get()) {
        Some(Ok(ix)) => Some(ix),
        Some(Err(why)) => {
            eprintln!("warning: the shared index could not be read ({why}): searching your own notes only");
            None
        }
        None => None,
    };
    let cfg = lode_retrieval::RetrievalConfig {
        shared,
        limit: opts.limit,
        graph_limit: 0,
        search: opts.clone(),
        stale_days: vault.config.externals.stale_days,
        ..Default::default()
    };
    let r = lode_retrieval::retrieve(&store, &question, args.mode, models, &cfg)?;
    if args.timings {
        // Model loading is not a stage: it happens once per process (the server keeps them).
        for st in &r.stages {
            match &st.note {
                Some(n) => eprintln!("{}: {:.2} ms ({n})", st.name, st.ms),
                None => eprintln!("{}: {:.2} ms", st.name, st.ms),
            }
        }
    }
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    for p in loaded.problems.iter().take(1) {
        eprintln!("warning: {p}");
    }
    let hits: Vec<lode_store::Hit> =
        r.hits.into_iter().map(|h| lode_store::Hit { score: h.rerank.map(f64::from).unwrap_or(h.fused), ..h.hit }).collect();
    let result = lode_store::SearchResult { terms: Vec::new(), or_terms: Vec::new(), hits };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.vault.json {
        for (rank, h) in result.hits.iter().enumerate() {
            let mut v = serde_json::to_value(h)?;
            v["rank"] = serde_json::json!(rank + 1);
            writeln!(out, "{v}")?;
        }
    } else if result.hits.is_empty() {
        writeln!(out, "no passage matches {:?}", question)?;
    } else {
        for (rank, h) in result.hits.iter().enumerate() {
            writeln!(out, "{:>2}. {}:{}  {}  ({:.2})", rank + 1, h.path, h.line, h.heading, h.score)?;
            let shown = if h.snippet.is_empty() { h.text.chars().take(200).collect::<String>() } else { h.snippet.clone() };
            let snippet = lode_core::text::normalize_whitespace(&shown);
            writeln!(out, "    {snippet}")?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
