//! The `lode` command as a library: its subcommands (`cmd`), the configuration and its trust
//! boundary (`config`, `trust`), the models a command loads, progress lines. `main.rs` parses
//! the command line; `lode-bench` (a dev crate) reuses the evaluation code.

pub mod cmd;
pub mod config;
pub mod models;
pub mod progress;
pub mod trust;

use std::path::PathBuf;

use clap::Args;

#[derive(Args, Clone)]
pub struct VaultArgs {
    /// The vault: a folder of markdown notes [default: the current directory]
    #[arg(long, global = true, value_name = "DIR")]
    pub vault: Option<PathBuf>,
    /// The database [default: <vault>/.lode/lode.db]
    #[arg(long, global = true, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Print JSON for scripts instead of text
    #[arg(long, global = true)]
    pub json: bool,
}

/// A panic inside a library lode uses (a damaged vector file makes LanceDB's decoder panic on
/// a worker thread) is caught where lode calls it and answered with a clear warning and a
/// fallback; the default report (a thread name, a source path in the library, a backtrace) only
/// alarms. It is said in one line instead; `LODE_DEBUG_PANICS=1` restores the full report. A
/// panic in lode's own code is reported as always.
pub fn quiet_library_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let file = info.location().map(|l| l.file().replace('\\', "/")).unwrap_or_default();
        let library = file.split("/registry/src/").nth(1).and_then(|rest| rest.split('/').nth(1)).map(str::to_owned);
        match library {
            Some(krate) if std::env::var_os("LODE_DEBUG_PANICS").is_none() => {
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                eprintln!("lode: the library {krate} failed inside lode ({msg}); lode goes on without it where it can (LODE_DEBUG_PANICS=1 shows the full report)");
            }
            _ => default(info),
        }
    }));
}
