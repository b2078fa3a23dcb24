//! The `lode` command: index a vault, search it, report on it, evaluate and benchmark retrieval.

mod cmd;
mod config;
mod models;
mod progress;
mod trust;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "lode", version, about = "Ask your markdown notes; every citation checked against the text it quotes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

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

#[derive(Subcommand)]
enum Command {
    /// Index the vault: new and changed notes, renames and deletions
    Index(cmd::index::IndexArgs),
    /// Search passages (BM25 over head versions)
    Search(cmd::search::SearchArgs),
    /// Answer a question with verified citations (or abstain)
    Ask(cmd::ask::AskArgs),
    /// Run the faithfulness gate on JSON lines from stdin
    Gate(cmd::gate::GateArgs),
    /// The language server, over stdio (for VS Code, Neovim, Helix)
    Serve(cmd::serve::ServeArgs),
    /// The MCP server, over stdio: agents search, ask, verify and read the notes
    Mcp(cmd::mcp::McpArgs),
    /// Show what the index holds
    Stats(cmd::stats::StatsArgs),
    /// Publish the vault as the team's shared tier (s3://bucket/prefix, or a folder)
    Publish(cmd::publish::PublishArgs),
    /// Install ONNX Runtime and the default model for this user (~/.local/share/lode)
    Setup(cmd::setup::SetupArgs),
    /// Mirror the web pages notes link to, list them and their age, show one
    #[command(subcommand)]
    Externals(cmd::externals::ExternalsCommand),
    /// Approve this folder's guarded settings (an LLM, a runtime library, a bucket; see docs/security.md)
    Trust(cmd::trust::TrustArgs),
    /// Check the binary, runtime, models, settings, index, egress rules (and the LLM with --llm)
    Doctor(cmd::doctor::DoctorArgs),
    /// Measure retrieval quality on a BEIR-format data set
    #[command(subcommand)]
    Eval(cmd::eval::EvalCommand),
    /// Performance benchmarks (run a release build)
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
}

/// A panic inside a library lode uses (a damaged vector file makes LanceDB's decoder panic on
/// a worker thread) is caught where lode calls it and answered with a clear warning and a
/// fallback; the default report (a thread name, a source path in the library, a backtrace) only
/// alarms. It is said in one line instead; `LODE_DEBUG_PANICS=1` restores the full report. A
/// panic in lode's own code is reported as always.
fn quiet_library_panics() {
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

fn main() -> ExitCode {
    lode_engine::memory::limit_arenas();
    quiet_library_panics();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Index(a) => cmd::index::run(a),
        Command::Search(a) => cmd::search::run(a),
        Command::Stats(a) => cmd::stats::run(a),
        Command::Publish(a) => cmd::publish::run(a),
        Command::Setup(a) => cmd::setup::run(a),
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Trust(a) => cmd::trust::run(a),
        Command::Externals(c) => cmd::externals::run(c),
        Command::Ask(a) => cmd::ask::run(a),
        Command::Gate(a) => cmd::gate::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Mcp(a) => cmd::mcp::run(a),
        Command::Eval(c) => cmd::eval::run(c),
        Command::Bench(c) => cmd::bench::run(c),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
