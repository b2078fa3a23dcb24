//! `lode ask`: a verified answer with its citations, or an honest abstention.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use lode_answer::{ask, Answer, Synthesizer};
use lode_core::gate::ScorerSlot;

use super::Vault;
use crate::VaultArgs;

#[derive(Args)]
pub struct AskArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
    /// Ask about this note (vault-relative path): all its passages come first
    #[arg(long, value_name = "PATH")]
    pub pinned: Option<String>,
    /// Use the LLM configured in [llm] instead of the extractive synthesizer
    #[arg(long)]
    pub llm: bool,
    /// Also list the claims the gate dropped, with the reason
    #[arg(long)]
    pub show_dropped: bool,
    /// The question
    #[arg(required = true, num_args = 1..)]
    pub question: Vec<String>,
}

pub fn run(args: AskArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&args.vault)?;
    let store = vault.open_existing()?;
    let question = args.question.join(" ");
    let synth = if args.llm {
        let Some(llm) = vault.config.llm.clone() else {
            anyhow::bail!("--llm needs an [llm] section (endpoint, model) in {}", vault.config_path().display());
        };
        Synthesizer::Llm(llm)
    } else {
        Synthesizer::Extractive
    };
    let rules = vault.config.egress_rules()?;
    // A no-egress pattern that matches no note withholds nothing: most likely a typo.
    if !rules.patterns().is_empty() {
        let notes = store.notes()?;
        let paths: Vec<&str> = notes.iter().map(|n| n.path.as_str()).collect();
        for p in rules.unmatched_patterns(&paths) {
            eprintln!("warning: [egress] no_egress pattern {p:?} matches no note in this vault; it withholds nothing");
        }
    }
    let mut loaded = crate::models::load(&vault, true, vault.config.models.reranker.is_some());
    for p in &loaded.problems {
        eprintln!("note: {p}");
    }
    let models =
        lode_retrieval::Models { embedder: loaded.embedder.as_mut(), index: loaded.index.as_ref(), reranker: loaded.reranker.as_mut() };
    let mut scorer = nli_scorer(&vault);
    let mut cfg = vault.config.ask_config();
    cfg.vault_root = Some(vault.root.clone());
    cfg.fetcher = Some(std::sync::Arc::new(CliFetcher {
        db: vault.db.clone(),
        store: vault.config.store_options(),
        // A model's fetch never reaches loopback or private networks, whatever the settings say.
        fetch: vault.config.externals.fetch_options().for_model(),
    }));
    let answer = ask(&store, &question, args.pinned.as_deref(), &cfg, &rules, &synth, models, &mut scorer)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.vault.json {
        writeln!(out, "{}", serde_json::to_string(&answer)?)?;
    } else {
        print_answer(&mut out, &answer, args.show_dropped)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The `fetch_url` tool of `lode ask --llm`: fetches within the `[externals]` limits and stores
/// the page on a connection of its own before the model sees it.
#[derive(Debug)]
struct CliFetcher {
    db: std::path::PathBuf,
    store: lode_store::StoreOptions,
    fetch: lode_externals::FetchOptions,
}

impl lode_answer::Fetcher for CliFetcher {
    fn fetch_snapshot(
        &self,
        url: &str,
        cancel: Option<&std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> Result<lode_answer::StoredPage, String> {
        let opts = lode_externals::FetchOptions { cancel: cancel.cloned(), ..self.fetch.clone() };
        let fetched = lode_externals::fetch(url, &opts);
        if matches!(fetched, Err(lode_externals::FetchError::Cancelled)) {
            return Err("cancelled".into());
        }
        let mut store = lode_store::Store::open(&self.db, self.store.clone()).map_err(|e| e.to_string())?;
        let (final_url, s) = lode_externals::store_for_ask(&mut store, url, fetched)?;
        Ok(lode_answer::StoredPage { final_url, note_id: s.note_id, version_id: s.snapshot_id })
    }
}

/// The gate's entailment scorer: the configured NLI / cross-encoder model, loaded only when a
/// claim reaches step 3. None configured: such claims are dropped (fail-closed).
pub fn nli_scorer(vault: &Vault) -> ScorerSlot<'static> {
    let m = vault.config.models.clone();
    match m.nli.clone() {
        Some(name) => ScorerSlot::lazy(move || {
            lode_models::NliModel::load(&m.resolve(&name), m.runtime.as_deref(), m.threads)
                .map(|ce| Box::new(ce) as Box<dyn lode_core::gate::EntailmentScorer>)
                .map_err(|e| e.to_string())
        }),
        None => ScorerSlot::None,
    }
}

fn print_answer(out: &mut impl Write, a: &Answer, show_dropped: bool) -> Result<()> {
    if let Some(n) = &a.notice {
        writeln!(out, "note: {n}")?;
    }
    if a.abstained {
        writeln!(out, "{}", a.abstain_reason.as_deref().unwrap_or("your notes don't answer this"))?;
        if !a.related.is_empty() {
            writeln!(out, "\nrelated passages (not an answer):")?;
            for r in &a.related {
                let text = lode_core::text::normalize_whitespace(&r.text);
                let short: String = text.chars().take(160).collect();
                writeln!(out, "  {}:{}  {}{}", r.path, r.line, short, if short.len() < text.len() { "…" } else { "" })?;
            }
        }
    }
    for (i, c) in a.claims.iter().enumerate() {
        // Terminal control characters in model or note text are not passed to the terminal.
        let text: String = c.text.chars().filter(|ch| !ch.is_control()).collect();
        match c.rung {
            lode_answer::Rung::Verified => writeln!(out, "{}. {}", i + 1, text)?,
            lode_answer::Rung::EvidenceOnly => writeln!(out, "{}. “{}”  ({})", i + 1, text, c.label)?,
        }
        for cit in &c.citations {
            // The id a citation link carries: 12 hex digits, longer where two versions share them.
            writeln!(
                out,
                "   [{}] {}:{} @{}  \"{}\"",
                c.label,
                cit.path,
                cit.line,
                cit.short_id,
                lode_core::text::normalize_whitespace(&cit.quoted_span)
            )?;
            if !cit.context.is_empty() {
                let ctx: String = cit.context.chars().filter(|ch| !ch.is_control()).collect();
                writeln!(out, "      in: {ctx}")?;
            }
        }
    }
    for w in &a.withheld {
        writeln!(out, "withheld from remote synthesis: {} ({})", w.path, w.reason)?;
    }
    if !a.dropped.is_empty() {
        if show_dropped {
            writeln!(out, "\ndropped by the gate:")?;
            for d in &a.dropped {
                writeln!(out, "  - {} [{:?}: {}]", d.text, d.step, d.reason)?;
            }
        } else {
            writeln!(out, "({} claims dropped by the gate; --show-dropped lists them)", a.dropped.len())?;
        }
    }
    Ok(())
}
