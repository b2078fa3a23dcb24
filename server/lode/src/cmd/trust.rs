//! `lode trust`: the user approves a folder's guarded settings (docs/security.md), shows what
//! is approved and ignored, or withdraws an approval.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::cmd::Vault;
use crate::trust::Approval;
use crate::VaultArgs;

#[derive(Args)]
pub struct TrustArgs {
    /// The folder to approve (the same as --vault) [default: the current directory]
    #[arg(value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub vault: VaultArgs,
    /// Say what is approved and what is ignored; change nothing (exit 3 when settings wait for approval)
    #[arg(long, conflicts_with = "revoke")]
    pub status: bool,
    /// Withdraw the approval of this folder
    #[arg(long)]
    pub revoke: bool,
    /// Bind the existing index to you as one lode made for you: only for an index you built
    /// yourself with a lode older than store binding (docs/security.md), never one that came
    /// with a folder
    #[arg(long, conflicts_with_all = ["status", "revoke"])]
    pub adopt_index: bool,
    /// Approve only if the guarded settings still hash to this (`--status --json` prints it):
    /// what an editor showed the user is what is approved
    #[arg(long, value_name = "SHA256", conflicts_with_all = ["status", "revoke"])]
    pub expect: Option<String>,
}

pub fn run(mut args: TrustArgs) -> Result<ExitCode> {
    if let Some(dir) = args.dir.take() {
        if args.vault.vault.as_ref().is_some_and(|v| v != &dir) {
            anyhow::bail!(
                "two folders given ({} and --vault {}): name one",
                dir.display(),
                args.vault.vault.as_ref().map(|v| v.display().to_string()).unwrap_or_default()
            );
        }
        args.vault.vault = Some(dir);
    }
    let vault = Vault::resolve_quiet(&args.vault)?;
    let r = &vault.config.report;
    let state = |a: &Option<Approval>| match a {
        None => "nothing to approve",
        Some(Approval::Current) => "approved",
        Some(Approval::Changed) => "changed since approved",
        Some(Approval::Never) => "not approved",
    };
    if args.status {
        if args.vault.json {
            println!(
                "{}",
                serde_json::json!({"folder": vault.root, "config": r.file, "approval": state(&r.approval), "guarded": r.guarded, "hash": r.hash,
                    "ignored": r.ignored, "user_only": r.user_only, "notice": r.notice(), "user_config": r.user_file})
            );
        } else {
            println!("folder: {}", vault.root.display());
            println!("config: {}{}", r.file.display(), if r.file.exists() { "" } else { " (none)" });
            println!("user config: {}", r.user_file.as_ref().map_or("(none)".to_owned(), |p| p.display().to_string()));
            println!("approval: {}", state(&r.approval));
            for g in &r.guarded {
                println!("  guarded: {g}");
            }
            for i in &r.ignored {
                println!("  ignored until approved: {i}");
            }
            for i in &r.user_only {
                println!("  ignored (only your user config may give it): {i}");
            }
        }
        return Ok(if r.ignored.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(3) });
    }
    if args.revoke {
        let had = crate::trust::revoke(&vault.root)?;
        println!("lode trust: {} {}", if had { "withdrew the approval of" } else { "there was no approval of" }, vault.root.display());
        if had {
            println!(
                "lode trust: a running language server drops an approved [llm] at its next question, the other settings when it restarts"
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.adopt_index {
        match crate::trust::owner(&vault.db) {
            crate::trust::Owner::Missing => anyhow::bail!("there is no index at {} to adopt", vault.db.display()),
            crate::trust::Owner::Ours => println!("lode trust: {} is already yours", vault.db.display()),
            _ => {
                if let Some(dir) = vault.db.parent() {
                    crate::trust::check_state_dir(dir)?;
                }
                // It must open as a lode store first; its errors say what it is otherwise.
                drop(lode_store::Store::open(&vault.db, vault.config.store_options())?);
                crate::trust::bind(&vault.db)?;
                println!(
                    "lode trust: {} is now bound to you; lode cites from it (adopt only an index you built yourself)",
                    vault.db.display()
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(want) = &args.expect {
        if r.hash.as_deref() != Some(want.as_str()) {
            anyhow::bail!(
                "the settings of {} changed since they were shown (their hash is {}); nothing approved",
                r.file.display(),
                r.hash.as_deref().unwrap_or("none")
            );
        }
    }
    let hash = r.hash.clone().unwrap_or_else(|| "none".into());
    if !r.file.exists() {
        println!("lode trust: {} has no .lode/config.toml: nothing needs approval now", vault.root.display());
    } else if r.guarded.is_empty() {
        println!("lode trust: {} sets nothing that needs approval", r.file.display());
    } else {
        println!("lode trust: approving these settings of {}:", r.file.display());
        for g in &r.guarded {
            println!("    {g}");
        }
    }
    let record = crate::trust::approve(&vault.root, &hash)?;
    println!("lode trust: approved {} (recorded in {}); a change to these settings asks again", vault.root.display(), record.display());
    // What still does not hold after approval: a key variable the user config does not allow.
    let after = crate::config::Config::load(&vault.root)?;
    if let Some(line) = after.report.notice() {
        eprintln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
