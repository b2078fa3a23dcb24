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
}

pub fn run(args: StatsArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&args.vault)?;
    let store = vault.open_existing()?;
    let s = store.stats()?;
    if args.vault.json {
        let mut v = serde_json::to_value(&s)?;
        v["db"] = serde_json::json!(vault.db);
        v["vault"] = serde_json::json!(vault.root);
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
        println!("vectors          none (lexical index only)");
    }
    Ok(ExitCode::SUCCESS)
}
