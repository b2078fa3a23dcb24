//! `lode-bench`: lode's performance benchmarks, a dev tool beside the product (as ruff's
//! `ruff_benchmark`): each drives the real `lode` binary (found beside this one, or at
//! `$LODE_BIN`) or lode's crates, and prints its figures as JSON. Build both in release:
//! `cargo build --release -p lode -p lode-bench`, then `target/release/lode-bench <bench>`.
//! docs/benchmarks.md has every command and its results.

mod bench;
mod bench_ann;
mod bench_externals;
mod bench_lsp;
mod bench_memory;
mod bench_scale;
mod synth;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(name = "lode-bench", about = "lode's performance benchmarks (build with --release)")]
struct Cli {
    #[command(subcommand)]
    bench: bench::BenchCommand,
}

/// The `lode` binary the benchmarks run: `$LODE_BIN`, else the one beside this binary (cargo
/// puts both in `target/<profile>/`).
pub fn lode_exe() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("LODE_BIN") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe()?;
    let dir = me.parent().ok_or_else(|| anyhow::anyhow!("{} has no folder", me.display()))?;
    // Test binaries live one level down, in `deps/`.
    for d in [dir, dir.parent().unwrap_or(dir)] {
        let lode = d.join(format!("lode{}", std::env::consts::EXE_SUFFIX));
        if lode.is_file() {
            return Ok(lode);
        }
    }
    anyhow::bail!("no `lode` binary beside {}: build it (`cargo build --release -p lode`) or set LODE_BIN", me.display())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match bench::run(cli.bench) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
