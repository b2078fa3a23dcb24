//! lode's language server: open buffers (ropey, incremental sync), the ordered save path,
//! `lode/ask`, answer code actions, citation hover / goto / drift diagnostics, workspace symbols.
//! The only crate that knows LSP types: it converts at the edge (`position`) and calls the core.

mod framing;
mod isolation;
mod position;
mod server;

pub use lode_engine::{ExternalSettings, ModelSettings, Reloaded, RulesSource, Settings, SettingsFn, VectorSettings};
pub use position::Encoding;
pub use server::{build, Backend};

/// How long the exit waits for the embedding thread's round in progress.
const EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves the LSP over stdin/stdout until the client exits (or disconnects).
pub async fn run_stdio(settings: SettingsFn, vault: Option<std::path::PathBuf>) {
    let (service, socket) = build(settings, vault);
    let on_exit = service.inner().on_exit();
    let (lib_in, guard_out) = tokio::io::duplex(1 << 20);
    let (guard_in, lib_out) = tokio::io::duplex(1 << 20);
    let guard = tokio::spawn(framing::guard(tokio::io::stdin(), tokio::io::stdout(), guard_out, guard_in));
    // Many requests in flight at once (a slow ask must not hold up hovers), each isolated. The
    // library acts on `$/cancelRequest` as it reads it; it stops reading only when all slots
    // and its queue of 100 are taken, which slow requests cannot do (asks are capped at 16).
    tower_lsp_server::Server::new(lib_in, lib_out, socket).concurrency_level(256).serve(isolation::CatchPanic(service)).await;
    guard.abort();
    // Bounded: a round of embedding takes well under a second in a release build (several in a
    // debug build, with the vector index's compaction); the process ends regardless.
    let started = std::time::Instant::now();
    match tokio::time::timeout(EXIT_WAIT, tokio::task::spawn_blocking(on_exit)).await {
        Ok(_) => tracing::debug!("models released in {:.1} ms", started.elapsed().as_secs_f64() * 1000.0),
        Err(_) => tracing::warn!("exiting while the embedding thread is still busy after {EXIT_WAIT:?}"),
    }
}
