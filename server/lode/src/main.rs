//! The `lode` command: index a vault, search it, ask it, serve it to editors and agents, report
//! on it, evaluate retrieval and the gate on one's own data. (Benchmarks: the `lode-bench` crate.)

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lode::cmd;

#[derive(Parser)]
#[command(name = "lode", version, about = "Ask your markdown notes; every citation checked against the text it quotes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
}

fn main() -> ExitCode {
    lode_engine::memory::limit_arenas();
    lode::quiet_library_panics();
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
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
