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
    /// The question or keywords (FTS5 syntax is treated as plain text)
    #[arg(required = true, num_args = 1..)]
    pub query: Vec<String>,
}

pub fn run(args: SearchArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&args.vault)?;
    let store = vault.open_existing()?;
    let mut opts = vault.config.search_options();
    if let Some(n) = args.limit {
        opts.limit = n;
    }
    let question = args.query.join(" ");
    let result = store.search(&question, &opts)?;
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
            let snippet = lode_core::text::normalize_whitespace(&h.snippet);
            writeln!(out, "    {snippet}")?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
