//! One module per subcommand; each parses its flags, calls the store or core, and prints.

pub mod ask;
pub mod doctor;
pub mod eval;
pub mod externals;
pub mod gate;
pub mod index;
pub mod mcp;
pub mod publish;
pub mod search;
pub mod serve;
pub mod setup;
pub mod stats;
pub mod trust;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use lode_store::Store;

use crate::config::{state_dir, Config};
use crate::VaultArgs;

/// A resolved vault: its folder, settings and database path.
pub struct Vault {
    pub root: PathBuf,
    pub config: Config,
    pub db: PathBuf,
}

impl Vault {
    pub fn resolve(args: &VaultArgs) -> Result<Vault> {
        let vault = Vault::resolve_quiet(args)?;
        if let Some(line) = vault.config.report.notice() {
            eprintln!("{line}");
        }
        Ok(vault)
    }

    /// [`Vault::resolve`] for a command that says the trust notice itself (`lode trust`).
    pub fn resolve_quiet(args: &VaultArgs) -> Result<Vault> {
        let root = match &args.vault {
            Some(v) => v.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        if !root.is_dir() {
            bail!("vault {} is not a folder", root.display());
        }
        let root = root.canonicalize().with_context(|| format!("cannot resolve {}", root.display()))?;
        let config = Config::load(&root)?;
        let db = args.db.clone().unwrap_or_else(|| state_dir(&root).join("lode.db"));
        Ok(Vault { root, config, db })
    }

    pub fn vectors_dir(&self) -> PathBuf {
        self.db.parent().map(|d| d.join("vectors")).unwrap_or_else(|| state_dir(&self.root).join("vectors"))
    }

    pub fn config_path(&self) -> PathBuf {
        state_dir(&self.root).join("config.toml")
    }

    /// Opens the index, creating it if needed. A store lode did not make here for this user
    /// (it came with the folder) is moved aside and a new one made: nothing is cited from it.
    pub fn open_for_write(&self) -> Result<Store> {
        if let Some(dir) = self.db.parent() {
            crate::trust::check_state_dir(dir)?;
        }
        let opts = self.config.store_options();
        let verdict = crate::trust::judge(&self.db, &opts)?;
        if let Some(line) = crate::trust::ready_for_writing(&self.db, &self.vectors_dir(), &opts, verdict)? {
            eprintln!("{line}");
        }
        Ok(Store::open(&self.db, opts)?)
    }

    /// [`Vault::open_existing`] for a command that only reads (`lode search`): on a full disk,
    /// where SQLite cannot even grow its shared-memory file, the index is opened read-only and
    /// the command says so, rather than failing.
    pub fn open_for_reading(&self) -> Result<Store> {
        match self.open_existing() {
            Err(e) if matches!(e.downcast_ref::<lode_store::StoreError>(), Some(lode_store::StoreError::DiskFull { .. })) => {
                let ro =
                    Store::open(&self.db, lode_store::StoreOptions { read_only: true, immutable: true, ..self.config.store_options() });
                match ro {
                    Ok(store) => {
                        eprintln!("warning: {e}; searching the index read-only");
                        Ok(store)
                    }
                    Err(_) => Err(e),
                }
            }
            other => other,
        }
    }

    /// Opens an existing index; a missing one is an error that says how to make it.
    pub fn open_existing(&self) -> Result<Store> {
        // An empty file is no index either (a crash before the first write, a `touch`): the
        // same message, and it is not given a fresh schema behind the user's back.
        let empty = std::fs::metadata(&self.db).is_ok_and(|m| m.len() == 0);
        if !self.db.exists() || empty {
            bail!(
                "no index at {}{}; run `lode index --vault {}` first",
                self.db.display(),
                if empty { " (the file is empty)" } else { "" },
                self.root.display()
            );
        }
        if let Some(dir) = self.db.parent() {
            crate::trust::check_state_dir(dir)?;
        }
        if crate::trust::judge(&self.db, &self.config.store_options())? == crate::trust::Verdict::NotOurs {
            return Err(crate::trust::foreign_error(&self.db, &self.root));
        }
        Ok(Store::open(&self.db, self.config.store_options())?)
    }
}

/// Peak resident memory of this process in MiB (Linux), for reports.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
