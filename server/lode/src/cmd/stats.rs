//! `lode stats`: what the index holds.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::Vault;
use crate::VaultArgs;

#[derive(Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
    /// Also verify the database: SQLite integrity, full-text index, head-only passages
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: StatsArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&args.vault)?;
    let store = vault.open_existing()?;
    let s = store.stats()?;
    let model = vault.config.models.embedder_id();
    let fresh = store.vector_freshness(&model)?;
    let mut check = if args.check { Some(store.verify()?) } else { None };
    // The vector table is checked too: it must read, and hold what the bookkeeping says.
    if let (Some(c), false) = (check.as_mut(), model.trim().is_empty()) {
        let queued = store.vector_deletions(&model)?.len() as i64;
        if let Some((_, why)) = crate::models::check_vector_table(&vault.vectors_dir(), &model, fresh.windows, queued) {
            c.problems.push(why);
        }
    }
    let failed = check.as_ref().is_some_and(|c| !c.problems.is_empty());
    if args.vault.json {
        let mut v = serde_json::to_value(&s)?;
        v["db"] = serde_json::json!(vault.db);
        v["vault"] = serde_json::json!(vault.root);
        v["vectors"] = serde_json::json!({"model": model, "passages": fresh.passages, "with_vectors": fresh.with_vectors});
        if let Some(c) = &check {
            v["problems"] = serde_json::json!(c.problems);
        }
        println!("{v}");
    } else {
        println!("vault            {}", vault.root.display());
        println!("database         {} ({:.1} MB, schema v{})", vault.db.display(), s.db_bytes as f64 / 1e6, s.schema_version);
        println!("notes            {} ({} deleted, history kept)", s.notes, s.deleted_notes);
        println!("versions         {}", s.versions);
        println!("passages         {} (head versions only)", s.passages);
        println!("links            {} ({} unresolved)", s.links, s.unresolved_links);
        if s.lossy_notes > 0 {
            println!("not UTF-8        {} notes indexed with replacement characters", s.lossy_notes);
        }
        if model.is_empty() {
            println!("vectors          none (no embedder configured; lexical only)");
        } else {
            let pct = if fresh.passages > 0 { 100.0 * fresh.with_vectors as f64 / fresh.passages as f64 } else { 100.0 };
            println!(
                "vectors          {}/{} passages ({pct:.0}%, {model}){}",
                fresh.with_vectors,
                fresh.passages,
                if fresh.with_vectors < fresh.passages { "; `lode index` embeds the rest" } else { "" }
            );
        }
        if let Some(c) = &check {
            if c.problems.is_empty() {
                println!("check            ok");
            }
            for p in &c.problems {
                println!("check            PROBLEM: {p}");
            }
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
