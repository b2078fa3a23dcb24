//! `lode index`: bring the index in line with the vault folder.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use lode_store::vault::{index_vault, IndexOptions};

use super::{peak_rss_mib, Vault};
use crate::progress::Progress;
use crate::VaultArgs;

#[derive(Args)]
pub struct IndexArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
    /// No progress line
    #[arg(long, short)]
    pub quiet: bool,
    /// Lexical index only: do not embed passages
    #[arg(long)]
    pub no_vectors: bool,
}

pub fn run(args: IndexArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&args.vault)?;
    let started = Instant::now();
    let mut store = vault.open_for_write()?;
    let opts = IndexOptions { max_file_bytes: vault.config.index.max_file_mb * 1_000_000, ..Default::default() };
    let mut progress = Progress::new(!args.quiet && !args.vault.json);
    // When each phase began (reading the folder, indexing, finishing), for `--json`.
    let mut phases: Vec<(&'static str, Instant)> = Vec::new();
    let report = index_vault(&mut store, &vault.root, &opts, |p| {
        if phases.last().map(|(name, _)| *name) != Some(p.phase) {
            phases.push((p.phase, Instant::now()));
        }
        progress.update(p.phase, p.done, p.total, p.path)
    })?;
    progress.finish();
    let mended = store.mend_heading_paths()?;
    if mended > 0 && !args.vault.json {
        eprintln!("mended {mended} section names whose note path an older lode had left behind");
    }
    let lexical_secs = started.elapsed().as_secs_f64();
    let lexical_end = Instant::now();
    let phase_seconds: serde_json::Map<String, serde_json::Value> = phases
        .iter()
        .enumerate()
        .map(|(i, (name, at))| {
            let end = phases.get(i + 1).map_or(lexical_end, |(_, next)| *next);
            (name.to_string(), serde_json::json!((end - *at).as_secs_f64()))
        })
        .collect();

    // Vectors: embed what lacks one, unless told not to; without a model, say so and go on.
    let mut vectors = serde_json::json!({"status": "skipped (--no-vectors)"});
    if !args.no_vectors {
        let mut loaded = crate::models::load_for_index(&vault);
        match (loaded.embedder.as_mut(), loaded.index.as_ref()) {
            (Some(embedder), Some(index)) => {
                if let Some(why) = index.mended() {
                    if !args.vault.json {
                        eprintln!("warning: {why}");
                    }
                }
                let mut progress = Progress::new(!args.quiet && !args.vault.json);
                let r = lode_retrieval::sync_vectors(
                    &mut store,
                    index,
                    embedder,
                    vault.config.models.window_tokens,
                    Some(crate::models::outbound(&vault)?),
                    |d, t| progress.update("embedding", d, t, ""),
                    || true,
                )?;
                progress.finish();
                let fresh = store.vector_freshness(embedder.id())?;
                // Complete: this model serves, and a server that is switched to another one
                // later answers with it until the new one's vectors are complete.
                if fresh.with_vectors >= fresh.passages {
                    let m = &vault.config.models;
                    // A server's model has no folder: its id names the model and the server.
                    let path = if embedder.destination().is_some() { std::path::PathBuf::new() } else { m.resolve(&m.embedder) };
                    let rec = lode_retrieval::Serving { id: embedder.id().to_owned(), path, dims: embedder.dimensions() };
                    if let Err(e) = rec.write(&vault.vectors_dir()) {
                        eprintln!("warning: cannot record the serving model in {}: {e}", vault.vectors_dir().display());
                    }
                }
                vectors = serde_json::json!({"status": "ok", "model": embedder.id(), "embedded": r.embedded, "deleted": r.deleted,
                    "rebuilt": r.rebuilt, "mended": index.mended(), "seconds": r.seconds, "passages": fresh.passages, "with_vectors": fresh.with_vectors});
                if r.rebuilt && !args.vault.json {
                    eprintln!("warning: the vector index had lost vectors; they were rebuilt from the passages");
                }
            }
            _ => {
                if !args.vault.json {
                    eprintln!("note: {}", loaded.status());
                }
                vectors = serde_json::json!({"status": loaded.status()});
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let stats = store.stats()?;

    if args.vault.json {
        let mut v = serde_json::to_value(&report)?;
        v["seconds"] = serde_json::json!(secs);
        v["lexical_seconds"] = serde_json::json!(lexical_secs);
        v["phase_seconds"] = serde_json::Value::Object(phase_seconds);
        v["vectors"] = vectors;
        v["peak_rss_mib"] = serde_json::json!(peak_rss_mib());
        v["db"] = serde_json::json!(vault.db);
        v["notes"] = serde_json::json!(stats.notes);
        v["passages"] = serde_json::json!(stats.passages);
        println!("{v}");
    } else {
        for s in &report.skipped {
            if s.path.is_empty() {
                eprintln!("warning: {}", s.reason);
            } else {
                eprintln!("warning: skipped {}: {}", s.path, s.reason);
            }
        }
        for p in &report.lossy {
            eprintln!("warning: {p} is not valid UTF-8; indexed with replacement characters (raw bytes kept)");
        }
        println!(
            "indexed {} notes in {:.2} s: {} new, {} updated, {} unchanged, {} renamed, {} deleted, {} skipped",
            report.scanned,
            secs,
            report.created,
            report.updated,
            report.unchanged,
            report.renamed,
            report.deleted,
            report.skipped.len()
        );
        println!("{} notes, {} passages in {}", stats.notes, stats.passages, vault.db.display());
        if vectors["status"] == "ok" {
            println!(
                "vectors: {}/{} passages ({}), {} embedded in {:.1} s",
                vectors["with_vectors"],
                vectors["passages"],
                vectors["model"].as_str().unwrap_or(""),
                vectors["embedded"],
                vectors["seconds"].as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
