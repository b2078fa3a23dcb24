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
}

pub fn run(args: IndexArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&args.vault)?;
    let started = Instant::now();
    let mut store = vault.open_for_write()?;
    let opts = IndexOptions { max_file_bytes: vault.config.index.max_file_mb * 1_000_000, ..Default::default() };
    let mut progress = Progress::new(!args.quiet && !args.vault.json);
    let report = index_vault(&mut store, &vault.root, &opts, |p| progress.update("indexing", p.done, p.total, p.path))?;
    progress.finish();
    let secs = started.elapsed().as_secs_f64();
    let stats = store.stats()?;

    if args.vault.json {
        let mut v = serde_json::to_value(&report)?;
        v["seconds"] = serde_json::json!(secs);
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
            report.scanned, secs, report.created, report.updated, report.unchanged, report.renamed, report.deleted,
            report.skipped.len()
        );
        println!("{} notes, {} passages in {}", stats.notes, stats.passages, vault.db.display());
    }
    Ok(ExitCode::SUCCESS)
}
