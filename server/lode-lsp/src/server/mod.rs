//! The LSP server: its state (stores, writer, readers, documents), lifecycle and document sync;
//! each feature's handlers live in their own module and are thin — convert params (positions →
//! bytes), call the store / answer pipeline off the message loop (`spawn_blocking`), convert
//! the result back. Files → index is `crate::files`.

mod ask;
mod citations;
mod externals;
mod models;
mod nav;
mod status;
mod symbols;
mod vectors;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::str::FromStr;
use std::sync::Arc;

// parking_lot locks do not poison: a panic in one request cannot make every later request fail.
use parking_lot::{Mutex, RwLock};

use lode_answer::egress::EgressRules;
use lode_answer::{AskConfig, Synthesizer};
use lode_core::gate::ScorerSlot;
use lode_store::vault::IndexOptions;
use lode_store::{Store, StoreOptions};
use ropey::Rope;
use serde::Deserialize;
use serde_json::{json, Value};
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer, LspService};

use crate::position::{self, Encoding};
use crate::writer::{Done, Job, Writer};
use vectors::{start_vectors, Dense};

pub use externals::ExternalSettings;
pub use models::ModelSettings;

/// What the server needs from the vault's configuration (built by the `lode` binary).
pub struct Settings {
    pub db: PathBuf,
    pub store: StoreOptions,
    pub index: IndexOptions,
    pub ask: AskConfig,
    pub rules: EgressRules,
    /// Where the rules come from, to read them again when that file changes (`None`: fixed).
    pub rules_source: Option<RulesSource>,
    pub synthesizer: Synthesizer,
    /// Dense retrieval: the embedder to load (lazily, on the vector thread) and where vectors live.
    pub vectors: Option<VectorSettings>,
    /// The cross-encoder that reranks the fused candidates (`[models] reranker`), loaded on the
    /// first ask.
    pub reranker: Option<ModelSettings>,
    /// The entailment model of the gate's third step (`[models] nli`), loaded on the first
    /// claim that reaches it.
    pub nli: Option<ModelSettings>,
    /// Fetching linked pages, and when their snapshots are stale.
    pub externals: ExternalSettings,
    /// Models unused this long are released (loaded again on next use); `None`: kept loaded.
    pub unload_after: Option<std::time::Duration>,
    /// What the user must be told about this vault beyond its config's own trust notice (which
    /// [`RulesSource`] reads): a store that came with the folder moved aside. `lode/status`
    /// shows it, and the server says it when the vault starts.
    pub notices: Vec<String>,
}

#[derive(Clone)]
pub struct VectorSettings {
    pub embedder: PathBuf,
    pub runtime: Option<PathBuf>,
    pub threads: usize,
    /// Embedding window size in model tokens.
    pub window_tokens: usize,
    pub dir: PathBuf,
}

pub type SettingsFn = Arc<dyn Fn(&Path) -> anyhow::Result<Settings> + Send + Sync>;

/// The file the egress rules and the synthesizer come from, and how to read them from its bytes
/// (`None`: no file): they follow the file's current bytes, checked before every question, so
/// an edited config holds for the next question at once.
#[derive(Clone)]
pub struct RulesSource {
    pub file: PathBuf,
    /// Other files what `load` makes of the config depends on (the user's own config, the
    /// record of the folder's approval): a change to any of them is read at the next question.
    pub also: Vec<PathBuf>,
    pub load: Arc<dyn Fn(Option<&[u8]>) -> std::result::Result<Reloaded, String> + Send + Sync>,
}

/// What the vault's config says now, read from its bytes.
pub struct Reloaded {
    pub rules: EgressRules,
    pub synthesizer: Synthesizer,
    /// Settings of the folder's config that are ignored until the user approves the folder
    /// (docs/security.md), in one line with the command that approves them.
    pub notice: Option<String>,
}

/// The egress rules and synthesizer in force, and the config bytes they were read from.
struct RulesNow {
    bytes: Option<Vec<u8>>,
    rules: Arc<EgressRules>,
    synthesizer: Arc<Synthesizer>,
    /// The config no longer reads: nothing goes to a remote model until it does.
    blocked: Option<String>,
    /// The trust notice of the config as last read.
    notice: Option<String>,
    /// The bytes of [`RulesSource::also`] when the config was last read.
    also: Vec<Option<Vec<u8>>>,
    /// The notice as it was when the vault started: the settings loaded then (models, runtime,
    /// `[shared]`, fetch limits) hold until a restart, whatever was approved since.
    started_with: Option<String>,
}

/// The bytes of each of the rules' other files now (`None`: absent or unreadable).
fn also_bytes(src: &RulesSource) -> Vec<Option<Vec<u8>>> {
    src.also.iter().map(|p| lode_answer::egress::read_config_file(p).ok()).collect()
}

/// How long a changed config must stay the same before it is believed: an editor's save
/// (truncate then write, or write elsewhere then rename) passes through an empty or missing file.
const CONFIG_SETTLE: std::time::Duration = std::time::Duration::from_millis(30);

struct Doc {
    rope: Rope,
    /// The editor's version of the buffer (from didOpen / didChange).
    version: i32,
    /// Bumped on every open and change, unlike `version`, which a client may reuse after a
    /// close and reopen: work done for one text is attached to that text only.
    generation: u64,
    /// A chunking ahead of the save is running for this buffer (one at a time).
    preparing: bool,
    /// The buffer's links, parsed once per version: diagnostics are published again after
    /// every save in the vault, and the parse is most of their cost.
    links: Option<Arc<Vec<lode_core::nav::NavLink>>>,
}

/// A buffer is chunked ahead of its save once it has not changed for this long: a pause in
/// typing, shorter than any editor's autosave delay.
const PRECHUNK_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// Quiet time after the last write before open documents' diagnostics are published again.
const DIAGNOSTICS_AFTER: std::time::Duration = std::time::Duration::from_millis(30);

/// Source of [`Doc::generation`].
static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(crate) struct State {
    pub(crate) root: PathBuf,
    pub(crate) settings: Settings,
    pub(crate) writer: Writer,
    pub(crate) readers: Arc<crate::readers::Readers>,
    /// A scan is running; `scan_again`: run one more when it ends (see `files::request_scan`).
    pub(crate) scanning: Arc<AtomicBool>,
    pub(crate) scan_again: AtomicBool,
    /// Scans started, for unique progress tokens.
    pub(crate) scans: std::sync::atomic::AtomicU64,
    /// Set by the one [`start_opened`] that starts this vault (a folder added twice starts once).
    started: AtomicBool,
    dense: Dense,
    /// The loaded model's id, or why dense retrieval is off (for `lode/status`).
    dense_off: vectors::DenseOff,
    /// Told once how loading the embedder ended; taken by whoever tells the user.
    dense_loaded: Mutex<Option<tokio::sync::oneshot::Receiver<vectors::Loaded>>>,
    kick: Option<Mutex<std::sync::mpsc::Sender<vectors::Kick>>>,
    /// The client, for the vector thread's progress (set when the vault starts).
    reporter: vectors::Reporter,
    /// Open buffers chunked while the user pauses, and the scan's next batch chunked while the
    /// writer applies the one before, for the writer's next save of those bytes.
    pub(crate) prechunked: lode_store::Prechunked,
    /// The vault is going (the client exited, or its folder was removed): the vector thread
    /// installs no model and starts no round (see [`State::release_models`]).
    closing: Arc<AtomicBool>,
    rules: Mutex<RulesNow>,
    pub(crate) reranker: Option<models::Pool<lode_models::CrossEncoder>>,
    pub(crate) nli: Option<models::Pool<lode_models::NliModel>>,
    /// Deferred saves that landed (their paths), for the task that clears their diagnostic;
    /// taken when the vault starts.
    landed: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
}

impl State {
    /// The egress rules and synthesizer as the config on disk says now, and why nothing may
    /// leave the machine, if so: a config that no longer parses, or is being written, keeps the
    /// rules it replaced *and* blocks every remote request. Reads the config file (a few hundred
    /// bytes, twice when it changed): blocking, off the loop.
    pub(crate) fn rules_now(&self) -> (Arc<EgressRules>, Arc<Synthesizer>, Option<String>) {
        let mut now = self.rules.lock();
        if let Some(src) = &self.settings.rules_source {
            let read = || match lode_answer::egress::read_config_file(&src.file) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(format!("{} cannot be read: {e}", src.file.display())),
            };
            let bytes = match read() {
                Ok(b) => b,
                Err(e) => return (now.rules.clone(), now.synthesizer.clone(), Some(e)),
            };
            let also = also_bytes(src);
            if bytes == now.bytes && now.blocked.is_none() && also != now.also {
                // The same config reads differently now: the user approved the folder (`lode
                // trust`) or changed their own config since.
                if let Ok(r) = (src.load)(bytes.as_deref()) {
                    now.rules = Arc::new(r.rules);
                    now.synthesizer = Arc::new(r.synthesizer);
                    now.notice = r.notice;
                    now.also = also;
                }
            } else if bytes != now.bytes {
                std::thread::sleep(CONFIG_SETTLE);
                if read().ok().as_ref() != Some(&bytes) {
                    let why = format!("{} is being written", src.file.display());
                    return (now.rules.clone(), now.synthesizer.clone(), Some(why));
                }
                match (src.load)(bytes.as_deref()) {
                    Ok(r) => {
                        now.rules = Arc::new(r.rules);
                        now.synthesizer = Arc::new(r.synthesizer);
                        now.notice = r.notice;
                        now.also = also;
                        now.blocked = None;
                    }
                    Err(e) => now.blocked = Some(format!("{} no longer reads: {e}", src.file.display())),
                }
                now.bytes = bytes;
            }
        }
        (now.rules.clone(), now.synthesizer.clone(), now.blocked.clone())
    }

    /// What the user must be told about this vault's trust, as of the config last read: the
    /// settings it ignores until `lode trust`, and what happened to a store that came with the
    /// folder.
    pub(crate) fn trust_notices(&self) -> Vec<String> {
        let now = self.rules.lock();
        let changed = (now.notice != now.started_with).then(|| {
            "lode: this folder's approval changed since lode started: [llm] and the egress rules follow it now; \
             models, the runtime, [shared] and fetch settings follow it when lode restarts"
                .to_owned()
        });
        now.notice.iter().cloned().chain(changed).chain(self.settings.notices.iter().cloned()).collect()
    }

    /// Whether an open buffer's note may not leave the machine: its own marks, the path rules,
    /// a nested vault's rules. Blocking (reads the config and nested configs).
    pub(crate) fn buffer_withheld(&self, key: &str, marks: &lode_answer::egress::marks::Marks) -> bool {
        let (rules, _, _) = self.rules_now();
        marks.local.is_some()
            || (!key.contains("://") && (rules.path_withheld(key).is_some() || lode_answer::egress::NestedRules::new(&self.root).withheld(key).is_some()))
    }

    /// Releases the models unused for `after` (the embedder, idle copies of the cross-encoder
    /// and the entailment model): they are loaded again on next use. Never waits for a model
    /// in use. Blocking (dropping an ONNX session frees its memory).
    pub(crate) fn release_idle_models(&self, after: std::time::Duration) {
        let mut released = false;
        if let Some(mut guard) = self.dense.try_lock() {
            if let Some((resident, _)) = guard.as_mut() {
                released |= resident.release_if_idle(after);
            }
        }
        for pool in self.reranker.iter() {
            released |= pool.release_idle(after);
        }
        for pool in self.nli.iter() {
            released |= pool.release_idle(after);
        }
        if released {
            crate::memory::trim();
        }
    }

    /// Stops the vector thread's work and drops the embedding model: the round in progress
    /// ends (taking the models' lock waits for it), and no other begins. ONNX Runtime torn
    /// down by the process's exit under an inference in progress failed it with a garbage
    /// error ("GetElementType is not implemented", in the log of every soak). Blocking.
    fn release_models(&self) {
        self.closing.store(true, Ordering::SeqCst);
        *self.reporter.lock() = None;
        drop(self.dense.lock().take());
        self.reranker.iter().for_each(models::Pool::release);
        self.nli.iter().for_each(models::Pool::release);
    }

    /// Wakes the vector thread (after saves and scans): embedding is only queued, never awaited.
    pub(crate) fn kick(&self) {
        if let Some(k) = &self.kick {
            let _ = k.lock().send(None);
        }
    }

    /// Wakes the vector thread with a note the user is looking at (just saved or opened): its
    /// passages are embedded before the backlog.
    pub(crate) fn kick_first(&self, rel: &str) {
        if let Some(k) = &self.kick {
            let _ = k.lock().send(Some(rel.to_owned()));
        }
    }
}

/// A vault's state, opened once, by a task of its own (see [`Backend::state_of`]).
#[derive(Default)]
struct StateCell {
    cell: tokio::sync::OnceCell<std::result::Result<Arc<State>, String>>,
    /// The opening task was started.
    started: AtomicBool,
}

impl StateCell {
    fn get(&self) -> Option<&std::result::Result<Arc<State>, String>> {
        self.cell.get()
    }
}

/// Why a vault did not open.
enum Unopened {
    /// Another process holds its database locked: tried again until it lets go.
    Locked(String),
    Failed(String),
}

/// Longest a request waits for the saves sent before it: past this it answers from what is
/// committed (a save held up by a lock or a full disk), and `lode/ask` says so.
const SETTLE_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Pauses between attempts to open a vault whose database another process holds locked (each
/// attempt also waits out SQLite's busy timeout).
const OPEN_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(500);
const OPEN_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(10);

pub struct Backend {
    client: Client,
    settings_fn: SettingsFn,
    vault_override: Option<PathBuf>,
    enc: RwLock<Encoding>,
    /// Whether the client applies versioned `documentChanges` (else plain `changes`).
    document_changes: std::sync::atomic::AtomicBool,
    docs: Arc<Mutex<HashMap<String, Doc>>>,
    /// The workspace folders, in the client's order (the first is the primary vault); `None`
    /// until `initialize`. Each folder is a vault with its own state (stores, writer), opened on
    /// first use, so `initialize` itself answers at once.
    folders: Mutex<Option<Vec<PathBuf>>>,
    states: Arc<Mutex<HashMap<PathBuf, Arc<StateCell>>>>,
    /// Whether the client registers file watchers for us (else the server watches the vault).
    client_watches: AtomicBool,
    /// Whether the client tells the user itself how to turn dense retrieval on
    /// (`initializationOptions.setupPrompt = "client"`), so the server's warning is not sent.
    client_prompts_setup: AtomicBool,
    /// Writes that asked for the open documents' diagnostics again (see `diagnostics_after_write`).
    writes_seen: std::sync::atomic::AtomicU64,
    /// Questions being answered; one more than [`MAX_ASKS`] is refused at once (see `answer`).
    asks: Arc<tokio::sync::Semaphore>,
    /// The diagnostics last published for each open document, with its version: what a
    /// background task (a deferred save that landed) edits and publishes again.
    published: Published,
    /// Vaults whose database another process holds locked while they open: why, said at once
    /// to requests rather than making them wait for the lock.
    waiting: Arc<Mutex<HashMap<PathBuf, String>>>,
}

type Published = Arc<Mutex<HashMap<String, (i32, Vec<Diagnostic>)>>>;

/// Questions answered at once. Each may wait seconds on a model; a client that sends more is
/// told so at once, rather than its requests filling the protocol library's in-flight slots
/// (behind which edits and other requests would queue).
pub(crate) const MAX_ASKS: usize = 16;

pub fn build(settings: SettingsFn, vault: Option<PathBuf>) -> (LspService<Backend>, tower_lsp_server::ClientSocket) {
    LspService::build(|client| Backend {
        client,
        settings_fn: settings,
        vault_override: vault,
        enc: RwLock::new(Encoding::Utf16),
        document_changes: std::sync::atomic::AtomicBool::new(false),
        docs: Arc::new(Mutex::new(HashMap::new())),
        folders: Mutex::new(None),
        states: Arc::new(Mutex::new(HashMap::new())),
        client_watches: AtomicBool::new(false),
        client_prompts_setup: AtomicBool::new(false),
        writes_seen: std::sync::atomic::AtomicU64::new(0),
        asks: Arc::new(tokio::sync::Semaphore::new(MAX_ASKS)),
        published: Arc::default(),
        waiting: Arc::default(),
    })
    .custom_method("lode/ask", Backend::lode_ask)
    .custom_method("lode/status", Backend::lode_status)
    .finish()
}

fn internal(msg: impl std::fmt::Display) -> Error {
    Error { code: ErrorCode::InternalError, message: msg.to_string().into(), data: None }
}

fn invalid(msg: impl std::fmt::Display) -> Error {
    Error { code: ErrorCode::InvalidParams, message: msg.to_string().into(), data: None }
}

/// Opens the stores and starts the writer for the workspace `initialize` named (blocking: it runs
/// migrations; called off the message loop).
fn open_state(settings_fn: &SettingsFn, root: Option<PathBuf>) -> std::result::Result<Arc<State>, Unopened> {
    let store_err = |e: lode_store::StoreError| match e {
        lode_store::StoreError::Locked { .. } => Unopened::Locked(e.to_string()),
        e => Unopened::Failed(e.to_string()),
    };
    match root {
        None => Err(Unopened::Failed("no workspace folder: open a folder of notes".to_owned())),
        Some(root) => (|| {
            let settings = settings_fn(&root).map_err(|e| Unopened::Failed(format!("{e:#}")))?;
            // The bytes the rules are read from, read from those very bytes (an edit between
            // two reads must not leave its rules unapplied).
            let rules_bytes = settings.rules_source.as_ref().and_then(|s| lode_answer::egress::read_config_file(&s.file).ok());
            let also = settings.rules_source.as_ref().map(also_bytes).unwrap_or_default();
            let (rules, synthesizer, notice) = match &settings.rules_source {
                Some(src) => {
                    let r = (src.load)(rules_bytes.as_deref()).map_err(Unopened::Failed)?;
                    (r.rules, r.synthesizer, r.notice)
                }
                None => (settings.rules.clone(), settings.synthesizer.clone(), None),
            };
            let mut write = Store::open(&settings.db, settings.store.clone()).map_err(store_err)?;
            // The editor's buffers, plus two batches of a scan.
            let prechunked = lode_store::Prechunked::with_capacity(16 + 2 * lode_store::vault::BATCH);
            write.set_prechunked(prechunked.clone());
            let read = Store::open(&settings.db, settings.store.clone()).map_err(store_err)?;
            let (settings_db, settings_store) = (settings.db.clone(), settings.store.clone());
            let (settings_reranker, settings_nli) = (settings.reranker.clone(), settings.nli.clone());
            let reporter: vectors::Reporter = Arc::default();
            let log_kick: Arc<std::sync::OnceLock<crate::writer::LogKick>> = Arc::default();
            let closing: Arc<AtomicBool> = Arc::default();
            let (kick, dense, dense_off, dense_loaded) = match settings.vectors.clone() {
                Some(vs) => {
                    let (k, d, off, loaded) =
                        start_vectors(settings.db.clone(), settings.store.clone(), vs, reporter.clone(), log_kick.clone(), closing.clone());
                    (Some(Mutex::new(k)), d, off, Some(loaded))
                }
                None => (None, Arc::new(Mutex::new(None)), Arc::default(), None),
            };
            let kick_writer = kick.as_ref().map(|k| k.lock().clone());
            let (landed_tx, landed_rx) = tokio::sync::mpsc::unbounded_channel();
            let writer = Writer::start(write, root.clone(), settings.index.clone(), move |d| {
                match d {
                    Done::Failed(e) => tracing::warn!("write failed: {e}"),
                    Done::Deferred(e) => tracing::warn!("a save is kept and retried: {e}"),
                    Done::Landed(path) => {
                        tracing::info!("the deferred save of {path} landed");
                        let _ = landed_tx.send(path.clone());
                    }
                    Done::Paths { failed, .. } if !failed.is_empty() => tracing::warn!("file events not applied: {}", failed.join("; ")),
                    Done::Saved(o) => tracing::debug!("saved note {} ({} passages)", o.note_id, o.passages),
                    other => tracing::debug!("written: {other:?}"),
                }
                if let Some(k) = &kick_writer {
                    let _ = k.send(None);
                }
            });
            let _ = log_kick.set(writer.log_kick());
            Ok(Arc::new(State {
                root,
                settings,
                writer,
                readers: crate::readers::Readers::new(settings_db, settings_store, read),
                // Until its first scan ends (see `files::first_scan`).
                scanning: Arc::new(AtomicBool::new(true)),
                scan_again: AtomicBool::new(false),
                scans: std::sync::atomic::AtomicU64::new(0),
                started: AtomicBool::new(false),
                dense,
                dense_off,
                dense_loaded: Mutex::new(dense_loaded),
                kick,
                reporter,
                prechunked,
                closing,
                rules: Mutex::new(RulesNow { bytes: rules_bytes, rules: Arc::new(rules), synthesizer: Arc::new(synthesizer), blocked: None, started_with: notice.clone(), notice, also }),
                landed: Mutex::new(Some(landed_rx)),
                reranker: settings_reranker.map(models::Pool::new),
                nli: settings_nli.map(models::Pool::new),
            }))
        })(),
    }
}

/// What the client does for itself, from `initialize`.
#[derive(Clone, Copy)]
struct ClientPrefs {
    /// It registers file watchers for us.
    watches: bool,
    /// It tells the user how to turn dense retrieval on (its own prompt, with a button).
    prompts_setup: bool,
}

/// Starts an open vault: progress and messages go to `client`, the vault is watched (unless the
/// client watches for us: `client_watches`) and scanned, and deferred saves that land have their
/// diagnostic cleared in `published`.
async fn start_opened(client: Client, prefs: ClientPrefs, published: Published, state: Arc<State>) {
    if state.started.swap(true, Ordering::SeqCst) {
        return;
    }
    *state.reporter.lock() = Some((client.clone(), tokio::runtime::Handle::current()));
    if let Some(mut landed) = state.landed.lock().take() {
        let (client, published, st) = (client.clone(), published.clone(), state.clone());
        tokio::spawn(async move {
            while let Some(rel) = landed.recv().await {
                st.kick_first(&rel);
                let Some(uri) = Uri::from_file_path(st.root.join(&rel)) else { continue };
                let again = {
                    let mut p = published.lock();
                    p.get_mut(uri.as_str()).map(|(version, diags)| {
                        diags.retain(|d| !matches!(&d.code, Some(NumberOrString::String(c)) if c == citations::UNSAVED));
                        (*version, diags.clone())
                    })
                };
                if let Some((version, diags)) = again {
                    client.publish_diagnostics(uri, diags, Some(version)).await;
                }
            }
        });
    }
    if !prefs.watches {
        crate::files::watch_vault(client.clone(), state.clone());
    }
    for notice in state.trust_notices() {
        client.show_message(MessageType::WARNING, notice).await;
    }
    // Lexical-only answers are a silent downgrade unless the user is told, once.
    if let Some(loaded) = state.dense_loaded.lock().take() {
        let client = client.clone();
        let root = state.root.clone();
        tokio::spawn(async move {
            let reason = match loaded.await {
                Ok(vectors::Loaded::Off(_)) if prefs.prompts_setup => return,
                Ok(vectors::Loaded::Off(reason)) => reason,
                Ok(vectors::Loaded::Ready { mended: Some(why) }) => {
                    let msg = format!("lode: {why}; until it is rebuilt, answers in {} lean on lexical search.", root.display());
                    client.show_message(MessageType::WARNING, msg).await;
                    return;
                }
                _ => return,
            };
            {
                client
                    .show_message(
                        MessageType::WARNING,
                        // The fix first: a collapsed toast shows one line.
                        format!(
                            "lode: run `lode setup`, then restart the server, to turn on semantic search. \
                             Until then answers in {} use lexical search only: {reason} (`lode doctor` shows what lode finds).",
                            root.display()
                        ),
                    )
                    .await;
            }
        });
    }
    // Models unused for a while are released; checked every few seconds, on a thread that
    // ends with the vault (it holds no reference to it).
    if let Some(after) = state.settings.unload_after {
        let weak = Arc::downgrade(&state);
        let every = (after / 4).clamp(std::time::Duration::from_millis(250), std::time::Duration::from_secs(15));
        let spawned = std::thread::Builder::new().name("lode-idle".into()).spawn(move || loop {
            std::thread::sleep(every);
            let Some(st) = weak.upgrade() else { return };
            if st.closing.load(Ordering::SeqCst) {
                return;
            }
            st.release_idle_models(after);
        });
        if let Err(e) = spawned {
            tracing::warn!("models will stay loaded: cannot start the idle thread: {e}");
        }
    }
    crate::files::first_scan(client.clone(), state);
}

/// Sets its flag when dropped: a handler's future is dropped when its request is cancelled.
struct CancelOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Runs blocking work off the message loop; a panic becomes an error answer, not a dead server.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> std::result::Result<T, String> + Send + 'static) -> Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(internal(e)),
        Err(e) if e.is_panic() => {
            tracing::error!("a request panicked: {e}");
            Err(internal("internal error: the request panicked (logged); the server keeps serving"))
        }
        Err(e) => Err(internal(e)),
    }
}

impl Backend {
    /// The primary vault's stores and writer (the first workspace folder): for requests that
    /// name no document. See [`Backend::state_of`].
    async fn state(&self) -> Result<Arc<State>> {
        let Some(folders) = self.folders.lock().clone() else {
            return Err(Error { code: ErrorCode::ServerError(-32002), message: "not initialized".into(), data: None });
        };
        match folders.first() {
            Some(root) => self.state_of(root.clone()).await,
            None => Err(internal("lode is not available in this workspace: no workspace folder: open a folder of notes")),
        }
    }

    /// The state of the vault holding `uri` (the deepest workspace folder that contains it), else
    /// the primary one.
    async fn state_for(&self, uri: &Uri) -> Result<Arc<State>> {
        match self.folder_of(uri) {
            Some(f) => self.state_of(f).await,
            None => self.state().await,
        }
    }

    /// Publishes the open documents' diagnostics again after a write, once the writes stop for
    /// [`DIAGNOSTICS_AFTER`]: the requests that follow a save are answered first (on two cores
    /// the refresh delayed them by ~3 ms, and a 100-ms tail), and a burst of saves or file
    /// events refreshes once, not once per write.
    async fn diagnostics_after_write(&self) {
        use std::sync::atomic::Ordering;
        let n = self.writes_seen.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(DIAGNOSTICS_AFTER).await;
        if self.writes_seen.load(Ordering::SeqCst) == n {
            self.refresh_open_diagnostics().await;
        }
    }

    /// The deepest workspace folder holding `uri`.
    fn folder_of(&self, uri: &Uri) -> Option<PathBuf> {
        let path = uri.to_file_path()?.into_owned();
        let folders = self.folders.lock().clone().unwrap_or_default();
        folders.into_iter().filter(|f| path.starts_with(f)).max_by_key(|f| f.components().count())
    }

    /// What to run once the client has gone (exit or end of input), before the process ends:
    /// each open vault's embedding model is released ([`State::release_models`]).
    pub fn on_exit(&self) -> impl FnOnce() + Send + 'static {
        let states = self.states.clone();
        move || {
            let open: Vec<Arc<State>> = states.lock().values().filter_map(|c| c.get()?.as_ref().ok().cloned()).collect();
            for state in open {
                state.release_models();
            }
        }
    }

    /// [`Backend::state_for`], if that vault is open already: never waits, never opens one.
    fn state_if_open(&self, uri: &Uri) -> Option<Arc<State>> {
        let folder = self.folder_of(uri).or_else(|| self.folders.lock().as_ref()?.first().cloned())?;
        let cell = self.states.lock().get(&folder).cloned()?;
        let state = cell.get()?.as_ref().ok()?.clone();
        Some(state)
    }

    /// The vault of `uri` (the primary one without a document), once every save sent before this
    /// request is committed. The ticket is read before the first real await (the state is open
    /// by then): see writer.rs.
    async fn settled(&self, uri: Option<&Uri>) -> Result<Arc<State>> {
        self.settled_noting(uri).await.map(|(s, _)| s)
    }

    /// [`Backend::settled`], waiting at most [`SETTLE_MAX`]: also whether every earlier save was
    /// committed by then (if not, the request answers from what is, and may say so).
    async fn settled_noting(&self, uri: Option<&Uri>) -> Result<(Arc<State>, bool)> {
        let state = match uri {
            Some(u) => self.state_for(u).await,
            None => self.state().await,
        };
        let barrier = state.as_ref().ok().map(|s| s.writer.barrier());
        let state = state?;
        let all = tokio::time::timeout(SETTLE_MAX, state.writer.wait(barrier.unwrap_or(0))).await.is_ok();
        Ok((state, all))
    }

    /// The stores and writer of the vault at `root`, opened on first use — off the message loop
    /// (`spawn_blocking`: opening runs migrations). Once open this returns without suspending,
    /// so a handler that takes a writer ticket right after it still takes it before its first
    /// real await.
    ///
    /// Opening runs in a task of its own. A database another process holds locked is said once
    /// (`window/showMessage`) and tried again with a growing pause until the lock goes; then the
    /// vault opens, and is scanned and served, without a restart. Meanwhile requests for it are
    /// answered at once with why, rather than waiting for the lock.
    async fn state_of(&self, root: PathBuf) -> Result<Arc<State>> {
        let cell = self.states.lock().entry(root.clone()).or_insert_with(Arc::default).clone();
        if cell.get().is_none() && !cell.started.swap(true, Ordering::SeqCst) {
            let (settings_fn, waiting, client, task_cell, root) = (self.settings_fn.clone(), self.waiting.clone(), self.client.clone(), cell.clone(), root.clone());
            tokio::spawn(async move {
                task_cell
                    .cell
                    .get_or_init(|| async move {
                        let mut pause = OPEN_RETRY_FIRST;
                        loop {
                            let (f, r) = (settings_fn.clone(), root.clone());
                            let opened = tokio::task::spawn_blocking(move || open_state(&f, Some(r)))
                                .await
                                .unwrap_or_else(|e| Err(Unopened::Failed(format!("opening the vault failed: {e}"))));
                            match opened {
                                Err(Unopened::Locked(why)) => {
                                    let said = format!("lode is waiting for {}: {why}; it starts on its own once the lock is released", root.display());
                                    if waiting.lock().insert(root.clone(), said).is_none() {
                                        let msg = format!("lode: {why}. lode waits and tries again; it scans and serves {} once the lock is released, without a restart.", root.display());
                                        client.show_message(MessageType::WARNING, msg).await;
                                    }
                                    tokio::time::sleep(pause).await;
                                    pause = (pause * 2).min(OPEN_RETRY_MAX);
                                }
                                other => {
                                    if waiting.lock().remove(&root).is_some() {
                                        tracing::info!("{}: the lock was released; the vault is open", root.display());
                                    }
                                    return other.map_err(|e| match e {
                                        Unopened::Locked(e) | Unopened::Failed(e) => e,
                                    });
                                }
                            }
                        }
                    })
                    .await;
            });
        }
        // Waits for the opening task, but not for a lock: a vault waiting for one answers why.
        let mut pause = std::time::Duration::from_millis(1);
        let opened = loop {
            if let Some(r) = cell.get() {
                break r;
            }
            if let Some(why) = self.waiting.lock().get(&root).cloned() {
                return Err(Error { code: ErrorCode::ServerError(-32803), message: why.into(), data: None });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(50));
        };
        match opened {
            Ok(s) => Ok(s.clone()),
            Err(e) => Err(internal(format!("lode is not available in this workspace: {e}"))),
        }
    }

    /// Opens a vault, watches it (unless the client watches for us) and scans it. A vault
    /// waiting for another process's lock starts once it opens (see [`Backend::state_of`]).
    async fn start_vault(&self, root: PathBuf) {
        let watches = ClientPrefs {
            watches: self.client_watches.load(Ordering::SeqCst),
            prompts_setup: self.client_prompts_setup.load(Ordering::SeqCst),
        };
        let (client, published) = (self.client.clone(), self.published.clone());
        match self.state_of(root.clone()).await {
            Ok(state) => start_opened(client, watches, published, state).await,
            Err(_) if self.waiting.lock().contains_key(&root) => {
                let Some(cell) = self.states.lock().get(&root).cloned() else { return };
                tokio::spawn(async move {
                    loop {
                        match cell.get() {
                            Some(Ok(state)) => return start_opened(client, watches, published, state.clone()).await,
                            Some(Err(e)) => return client.show_message(MessageType::ERROR, format!("lode is not available in this workspace: {e}")).await,
                            None => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                        }
                    }
                });
            }
            Err(e) => self.client.show_message(MessageType::ERROR, e.message).await,
        }
    }

    fn enc(&self) -> Encoding {
        *self.enc.read()
    }

    /// The vault-relative path of a document, if it is a markdown file inside the vault.
    /// The vault-relative path of a note URI, if it is a note at all: the one
    /// [`lode_store::vault::indexable`] rule the scan uses too (markdown, inside the vault, not
    /// hidden — so never `.lode/versions/` —, not gitignored, not a symlink).
    fn rel(state: &State, uri: &Uri) -> Option<String> {
        let path = uri.to_file_path()?;
        match lode_store::vault::indexable(&state.root, &path) {
            Ok(rel) => Some(rel),
            Err(why) => {
                tracing::debug!("not a note: {why}");
                None
            }
        }
    }

    fn doc_version(&self, uri: &Uri) -> Option<i32> {
        self.docs.lock().get(uri.as_str()).map(|d| d.version)
    }

    /// The buffer, its version and generation, and its links if they were parsed for that text:
    /// one look, so they belong together.
    #[allow(clippy::type_complexity)]
    fn doc_with_links(&self, uri: &Uri) -> Option<(Rope, String, i32, u64, Option<Arc<Vec<lode_core::nav::NavLink>>>)> {
        let docs = self.docs.lock();
        docs.get(uri.as_str()).map(|d| (d.rope.clone(), d.rope.to_string(), d.version, d.generation, d.links.clone()))
    }

    fn doc_text(&self, uri: &Uri) -> Option<(Rope, String)> {
        let docs = self.docs.lock();
        docs.get(uri.as_str()).map(|d| (d.rope.clone(), d.rope.to_string()))
    }

}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let utf8 = params
            .capabilities
            .general
            .as_ref()
            .and_then(|g| g.position_encodings.as_ref())
            .is_some_and(|e| e.contains(&PositionEncodingKind::UTF8));
        *self.enc.write() = if utf8 { Encoding::Utf8 } else { Encoding::Utf16 };
        let versioned = params
            .capabilities
            .workspace
            .as_ref()
            .and_then(|w| w.workspace_edit.as_ref())
            .and_then(|e| e.document_changes)
            .unwrap_or(false);
        self.document_changes.store(versioned, Ordering::SeqCst);
        let watches = params
            .capabilities
            .workspace
            .as_ref()
            .and_then(|w| w.did_change_watched_files.as_ref())
            .and_then(|d| d.dynamic_registration)
            .unwrap_or(false);
        self.client_watches.store(watches, Ordering::SeqCst);
        let prompts = params.initialization_options.as_ref().is_some_and(|o| o["setupPrompt"] == "client");
        self.client_prompts_setup.store(prompts, Ordering::SeqCst);
        #[allow(deprecated)]
        let folders: Vec<PathBuf> = match &self.vault_override {
            Some(v) => vec![v.clone()],
            None => {
                let listed: Vec<PathBuf> = params
                    .workspace_folders
                    .iter()
                    .flatten()
                    .filter_map(|f| f.uri.to_file_path().map(|p| p.into_owned()))
                    .collect();
                if listed.is_empty() {
                    params.root_uri.as_ref().and_then(|u| u.to_file_path().map(|p| p.into_owned())).into_iter().collect()
                } else {
                    listed
                }
            }
        };
        *self.folders.lock() = Some(folders);

        Ok(InitializeResult {
            server_info: Some(ServerInfo { name: "lode".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
            capabilities: ServerCapabilities {
                position_encoding: Some(if utf8 { PositionEncodingKind::UTF8 } else { PositionEncodingKind::UTF16 }),
                text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
                    open_close: Some(true),
                    change: Some(TextDocumentSyncKind::INCREMENTAL),
                    save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions { include_text: Some(true) })),
                    ..Default::default()
                })),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                definition_provider: Some(OneOf::Left(true)),
                code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                    code_action_kinds: Some(vec![
                        CodeActionKind::QUICKFIX,
                        CodeActionKind::new(ask::ASK_KIND),
                        CodeActionKind::new(externals::MIRROR_KIND),
                    ]),
                    ..Default::default()
                })),
                execute_command_provider: Some(ExecuteCommandOptions { commands: vec!["lode.ask".into(), externals::MIRROR.into()], ..Default::default() }),
                workspace_symbol_provider: Some(OneOf::Left(true)),
                references_provider: Some(OneOf::Left(true)),
                document_symbol_provider: Some(OneOf::Left(true)),
                folding_range_provider: Some(FoldingRangeProviderCapability::Simple(true)),
                document_link_provider: Some(DocumentLinkOptions { resolve_provider: Some(false), work_done_progress_options: Default::default() }),
                completion_provider: Some(CompletionOptions {
                    trigger_characters: Some(vec!["[".into(), "#".into(), "(".into(), "/".into()]),
                    ..Default::default()
                }),
                rename_provider: Some(OneOf::Right(RenameOptions { prepare_provider: Some(true), work_done_progress_options: Default::default() })),
                workspace: Some(WorkspaceServerCapabilities {
                    workspace_folders: Some(WorkspaceFoldersServerCapabilities {
                        supported: Some(true),
                        change_notifications: Some(OneOf::Left(true)),
                    }),
                    file_operations: Some(WorkspaceFileOperationsServerCapabilities {
                        will_rename: Some(FileOperationRegistrationOptions {
                            filters: vec![FileOperationFilter {
                                scheme: Some("file".into()),
                                pattern: FileOperationPattern { glob: "**/*.{md,markdown}".into(), matches: None, options: None },
                            }],
                        }),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            },
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        // A vault waiting for another process's lock has said so already, and starts later.
        if let Err(e) = self.state().await {
            if self.waiting.lock().is_empty() {
                self.client.show_message(MessageType::ERROR, e.message).await;
                return;
            }
        }
        if self.client_watches.load(Ordering::SeqCst) {
            // Notes (all changes), and what single-file events cannot describe: folders created
            // or deleted (renames), ignore files.
            let watch = Registration {
                id: "lode-watch".into(),
                method: "workspace/didChangeWatchedFiles".into(),
                register_options: Some(json!({"watchers": [
                    {"globPattern": "**/*.{md,markdown}"},
                    {"globPattern": "**/{.gitignore,.ignore}"},
                    {"globPattern": "**/*", "kind": 5},
                ]})),
            };
            if let Err(e) = self.client.register_capability(vec![watch]).await {
                tracing::warn!("the client refused file watchers ({e}); lode watches the vaults itself");
                self.client_watches.store(false, Ordering::SeqCst);
            }
        }
        let roots = self.folders.lock().clone().unwrap_or_default();
        for root in roots {
            self.start_vault(root).await;
        }
    }

    async fn did_change_workspace_folders(&self, params: DidChangeWorkspaceFoldersParams) {
        if self.vault_override.is_some() {
            return; // `--vault` pins one vault
        }
        let path = |f: &WorkspaceFolder| f.uri.to_file_path().map(|p| p.into_owned());
        let removed: Vec<PathBuf> = params.event.removed.iter().filter_map(path).collect();
        let added: Vec<PathBuf> = params.event.added.iter().filter_map(path).collect();
        {
            let mut folders = self.folders.lock();
            let list = folders.get_or_insert_with(Vec::new);
            list.retain(|f| !removed.contains(f));
            for a in &added {
                if !list.contains(a) {
                    list.push(a.clone());
                }
            }
        }
        // No request reaches a removed vault any more; its embedding stops (its writer and
        // checkpoint threads idle until the process ends).
        let gone: Vec<Arc<State>> = {
            let mut states = self.states.lock();
            let gone = states.iter().filter(|(root, _)| removed.contains(root)).filter_map(|(_, c)| c.get()?.as_ref().ok().cloned()).collect();
            states.retain(|root, _| !removed.contains(root));
            gone
        };
        if !gone.is_empty() {
            tokio::task::spawn_blocking(move || gone.iter().for_each(|s| s.release_models()));
        }
        for root in added {
            self.start_vault(root).await;
        }
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let uri = params.text_document.uri;
        let doc = Doc {
            rope: Rope::from_str(&params.text_document.text),
            version: params.text_document.version,
            generation: GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            preparing: false,
            links: None,
        };
        self.docs.lock().insert(uri.as_str().to_owned(), doc);
        self.publish_citation_diagnostics(uri.clone()).await;
        // A note the user opens is likely what they ask about next: its vectors first.
        if let Ok(state) = self.state_for(&uri).await {
            if let Some(rel) = Self::rel(&state, &uri) {
                state.kick_first(&rel);
            }
        }
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        // No index work per keystroke: the buffer is applied here, before any await.
        let enc = self.enc();
        let uri = params.text_document.uri;
        let generation = GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        {
            let mut docs = self.docs.lock();
            let Some(doc) = docs.get_mut(uri.as_str()) else { return };
            doc.version = params.text_document.version;
            doc.generation = generation;
            doc.links = None;
            position::apply_changes(&mut doc.rope, params.content_changes.into_iter().map(|c| (c.range, c.text)), enc);
        }
        // Once the user pauses, the buffer is chunked ahead of its save (`Prechunked`): a save
        // of the same bytes then skips the parse. Nothing is indexed from the buffer. Its links
        // are parsed then too, for the diagnostics published after the save. Only in a vault
        // that is open already (this never waits for one), one buffer at a time.
        let Some(state) = self.state_if_open(&uri) else { return };
        let docs = self.docs.clone();
        tokio::spawn(async move {
            tokio::time::sleep(PRECHUNK_AFTER).await;
            let text = {
                let mut docs = docs.lock();
                match docs.get_mut(uri.as_str()) {
                    Some(doc) if doc.generation == generation && !doc.preparing && doc.rope.len_bytes() <= lode_store::PRECHUNK_MAX_BYTES => {
                        doc.preparing = true;
                        doc.rope.to_string()
                    }
                    _ => return, // typed on, closed, busy or large
                }
            };
            let key = uri.as_str().to_owned();
            let (docs_after, key_after) = (docs.clone(), key.clone());
            let _ = tokio::task::spawn_blocking(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if Backend::rel(&state, &uri).is_some() {
                        state.prechunked.prepare(&key, text.as_bytes(), &state.settings.store.chunk);
                    }
                    let links = Arc::new(lode_core::nav::links(&text));
                    if let Some(doc) = docs.lock().get_mut(&key).filter(|d| d.generation == generation) {
                        doc.links = Some(links);
                    }
                }));
            })
            .await;
            if let Some(doc) = docs_after.lock().get_mut(&key_after) {
                doc.preparing = false;
            };
        });
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        // The ticket is taken before the first await: see writer.rs.
        let uri = params.text_document.uri;
        let Ok(state) = self.state_for(&uri).await else { return };
        let Some(rel) = Self::rel(&state, &uri) else { return };
        let rel_for_kick = rel.clone();
        // Disk is the truth: the saved file's bytes (BOM, encoding and all) are indexed, not the
        // editor's decoded text — unless there is no such file (an unsaved or virtual buffer).
        // The text the editor says it saved goes along: if a later save has overwritten the file
        // by the time the writer gets here, that text is kept as a version of its own, so every
        // acknowledged save is in the history (`vault::refresh_saved`).
        let (_, done) = if state.root.join(&rel).is_file() {
            state.writer.submit(Job::Refresh { path: rel, saved: params.text })
        } else {
            match params.text.or_else(|| self.doc_text(&uri).map(|(_, t)| t)) {
                Some(t) => state.writer.submit(Job::Save { path: rel, bytes: t.into_bytes() }),
                None => state.writer.submit(Job::Refresh { path: rel, saved: None }),
            }
        };
        match done.await {
            Ok(Done::Failed(e)) => {
                self.client.show_message(MessageType::WARNING, format!("lode: could not index {}: {e}", uri.as_str())).await;
            }
            Ok(Done::Deferred(e)) => {
                let msg = format!(
                    "lode: this save of {} is not indexed yet: {e}. The saved text is kept and retried until it lands (the note shows it meanwhile).",
                    rel_for_kick
                );
                self.client.show_message(MessageType::WARNING, msg).await;
            }
            // Its vectors before the backlog's: the note the user just wrote is what they ask about.
            Ok(_) => state.kick_first(&rel_for_kick),
            Err(_) => {}
        }
        self.diagnostics_after_write().await;
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        self.docs.lock().remove(params.text_document.uri.as_str());
        self.published.lock().remove(params.text_document.uri.as_str());
        if let Some(state) = self.state_if_open(&params.text_document.uri) {
            state.prechunked.forget(params.text_document.uri.as_str());
        }
        self.client.publish_diagnostics(params.text_document.uri, Vec::new(), None).await;
    }

    async fn did_change_watched_files(&self, params: DidChangeWatchedFilesParams) {
        // Jobs are queued before the first real await (the state is open by now): see writer.rs.
        // Open documents too: disk is the truth for the index (a checkout changes the file
        // under the buffer; the buffer itself is the editor's). Each change goes to its vault.
        let mut by_vault: Vec<(Arc<State>, Vec<PathBuf>)> = Vec::new();
        for c in params.changes {
            let Ok(state) = self.state_for(&c.uri).await else { continue };
            let Some(path) = c.uri.to_file_path().map(|p| p.into_owned()) else { continue };
            match by_vault.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &state)) {
                Some((_, paths)) => paths.push(path),
                None => by_vault.push((state, vec![path])),
            }
        }
        let pending: Vec<_> =
            by_vault.into_iter().filter_map(|(state, paths)| crate::files::on_paths(&state, paths).map(|done| (state, done))).collect();
        if !pending.is_empty() {
            for (state, done) in pending {
                if let Ok(done) = done.await {
                    crate::files::after_paths(&self.client, &state, &done);
                }
            }
            self.diagnostics_after_write().await;
        }
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        self.on_hover(params).await
    }

    async fn goto_definition(&self, params: GotoDefinitionParams) -> Result<Option<GotoDefinitionResponse>> {
        self.on_goto_definition(params).await
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        self.on_code_action(params).await
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        self.on_execute_command(params).await
    }

    async fn references(&self, params: ReferenceParams) -> Result<Option<Vec<Location>>> {
        self.on_references(params).await
    }

    async fn document_symbol(&self, params: DocumentSymbolParams) -> Result<Option<DocumentSymbolResponse>> {
        self.on_document_symbol(params).await
    }

    async fn folding_range(&self, params: FoldingRangeParams) -> Result<Option<Vec<FoldingRange>>> {
        self.on_folding_range(params).await
    }

    async fn document_link(&self, params: DocumentLinkParams) -> Result<Option<Vec<DocumentLink>>> {
        self.on_document_link(params).await
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        self.on_completion(params).await
    }

    async fn prepare_rename(&self, params: TextDocumentPositionParams) -> Result<Option<PrepareRenameResponse>> {
        self.on_prepare_rename(params).await
    }

    async fn rename(&self, params: RenameParams) -> Result<Option<WorkspaceEdit>> {
        self.on_rename(params).await
    }

    async fn will_rename_files(&self, params: RenameFilesParams) -> Result<Option<WorkspaceEdit>> {
        self.on_will_rename_files(params).await
    }

    async fn symbol(&self, params: WorkspaceSymbolParams) -> Result<Option<WorkspaceSymbolResponse>> {
        self.on_symbol(params).await
    }
}
