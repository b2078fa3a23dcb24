//! lode's engine: one vault's state and everything that keeps it: the store and its one writer,
//! read connections, the scan and file watching, the models' and vectors' lifecycle, the egress
//! rules as the config says now; and the questions every door asks of it (`ask`, `search`,
//! `verify`, `read`), answered as plain data. The language server (`lode-lsp`), the MCP server
//! and the CLI are doors onto it; none of them writes, scans or loads a model itself.
//!
//! Invariants: every write goes through the vault's one [`writer::Writer`]; reads take a
//! connection of their own ([`readers`]); everything here blocks, so an async door calls it in
//! `spawn_blocking`; nothing here knows a protocol: ranges are bytes (and lines where a door
//! shows them), messages go through [`report::Reporter`].

pub mod citations;
pub mod faults;
pub mod links;
pub mod lookup;
pub mod memory;
pub mod models;
pub mod queries;
pub mod readers;
pub mod report;
pub mod scan;
pub mod vectors;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use lode_answer::egress::EgressRules;
use lode_answer::{AskConfig, Synthesizer};
use lode_store::vault::IndexOptions;
use lode_store::{Store, StoreOptions};
use parking_lot::Mutex;

pub use models::ModelSettings;
pub use report::{Bar, Level, Reporter};
use vectors::{start_vectors, Dense};
use writer::{Done, Writer};

/// What the engine needs to fetch pages and judge snapshots.
#[derive(Debug, Clone, Default)]
pub struct ExternalSettings {
    pub fetch: lode_externals::FetchOptions,
    pub freshness: lode_externals::Freshness,
}

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
    /// The model folder or server, or why the config names none that can be used.
    pub embedder: std::result::Result<lode_models::EmbedderSource, String>,
    /// For a model folder recorded as serving before a switch (see `vectors::previous`).
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

/// One vault, open: its stores, writer, readers, models and rules. Made by [`Engine::open`]
/// (blocking), started by [`Engine::start`] (scan, watch), shared by every request.
pub struct Engine {
    pub root: PathBuf,
    pub settings: Settings,
    pub writer: Writer,
    pub readers: Arc<crate::readers::Readers>,
    /// A scan is running; `scan_again`: run one more when it ends (see [`scan::request_scan`]).
    pub scanning: Arc<AtomicBool>,
    pub scan_again: AtomicBool,
    /// Scans started, for unique progress tokens.
    pub scans: std::sync::atomic::AtomicU64,
    /// Set by the one [`Engine::start`] that starts this vault (a folder added twice starts once).
    started: AtomicBool,
    dense: Dense,
    /// The loaded model's id, or why dense retrieval is off (for `lode/status`).
    dense_off: vectors::DenseOff,
    /// Told once how loading the embedder ended; taken by whoever tells the user.
    dense_loaded: Mutex<Option<tokio::sync::oneshot::Receiver<vectors::Loaded>>>,
    kick: Option<Mutex<std::sync::mpsc::Sender<vectors::Kick>>>,
    /// The door that started the vault, for the scan's and the vector thread's progress and
    /// warnings (set when the vault starts).
    pub(crate) reporter: report::Slot,
    /// Open buffers chunked while the user pauses, and the scan's next batch chunked while the
    /// writer applies the one before, for the writer's next save of those bytes.
    pub prechunked: lode_store::Prechunked,
    /// The vault is going (the client exited, or its folder was removed): the vector thread
    /// installs no model and starts no round (see [`Engine::release_models`]).
    closing: Arc<AtomicBool>,
    rules: Mutex<RulesNow>,
    pub reranker: Option<models::Pool<lode_models::CrossEncoder>>,
    pub nli: Option<models::Pool<lode_models::NliModel>>,
    /// Deferred saves that landed (their paths), for the task that clears their diagnostic;
    /// taken when the vault starts.
    landed: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
}

impl Engine {
    /// The egress rules and synthesizer as the config on disk says now, and why nothing may
    /// leave the machine, if so: a config that no longer parses, or is being written, keeps the
    /// rules it replaced *and* blocks every remote request. Reads the config file (a few hundred
    /// bytes, twice when it changed): blocking, off the loop.
    pub fn rules_now(&self) -> (Arc<EgressRules>, Arc<Synthesizer>, Option<String>) {
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
    pub fn trust_notices(&self) -> Vec<String> {
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
    pub fn buffer_withheld(&self, key: &str, marks: &lode_answer::egress::marks::Marks) -> bool {
        let (rules, _, _) = self.rules_now();
        marks.local.is_some()
            || (!key.contains("://")
                && (rules.path_withheld(key).is_some() || lode_answer::egress::NestedRules::new(&self.root).withheld(key).is_some()))
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
    pub fn release_models(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.reporter.set(None);
        drop(self.dense.lock().take());
        self.reranker.iter().for_each(models::Pool::release);
        self.nli.iter().for_each(models::Pool::release);
    }

    /// Wakes the vector thread (after saves and scans): embedding is only queued, never awaited.
    pub fn kick(&self) {
        if let Some(k) = &self.kick {
            let _ = k.lock().send(None);
        }
    }

    /// Wakes the vector thread with a note the user is looking at (just saved or opened): its
    /// passages are embedded before the backlog.
    pub fn kick_first(&self, rel: &str) {
        if let Some(k) = &self.kick {
            let _ = k.lock().send(Some(rel.to_owned()));
        }
    }
}

/// Why a vault did not open.
pub enum Unopened {
    /// Another process holds its database locked: tried again until it lets go.
    Locked(String),
    Failed(String),
}

impl Engine {
    /// Opens the vault at `root`: its stores (running migrations) and its writer, and starts the
    /// vector thread. Blocking: call it off any message loop.
    pub fn open(settings_fn: &SettingsFn, root: Option<PathBuf>) -> std::result::Result<Arc<Engine>, Unopened> {
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
                let reporter = report::Slot::default();
                let log_kick: Arc<std::sync::OnceLock<crate::writer::LogKick>> = Arc::default();
                let closing: Arc<AtomicBool> = Arc::default();
                let this: Arc<std::sync::OnceLock<std::sync::Weak<Engine>>> = Arc::default();
                let (kick, dense, dense_off, dense_loaded) = match settings.vectors.clone() {
                    Some(vs) => {
                        let mut cfg = settings.ask.clone();
                        cfg.vault_root = Some(root.clone());
                        let outbound = Arc::new(vectors::EngineOutbound { engine: this.clone(), cfg, secrets: Default::default() });
                        let (k, d, off, loaded) = start_vectors(
                            settings.db.clone(),
                            settings.store.clone(),
                            vs,
                            outbound,
                            reporter.clone(),
                            log_kick.clone(),
                            closing.clone(),
                        );
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
                        Done::Paths { failed, .. } if !failed.is_empty() => {
                            tracing::warn!("file events not applied: {}", failed.join("; "))
                        }
                        Done::Saved(o) => tracing::debug!("saved note {} ({} passages)", o.note_id, o.passages),
                        other => tracing::debug!("written: {other:?}"),
                    }
                    if let Some(k) = &kick_writer {
                        let _ = k.send(None);
                    }
                });
                let _ = log_kick.set(writer.log_kick());
                let engine = Arc::new(Engine {
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
                    rules: Mutex::new(RulesNow {
                        bytes: rules_bytes,
                        rules: Arc::new(rules),
                        synthesizer: Arc::new(synthesizer),
                        blocked: None,
                        started_with: notice.clone(),
                        notice,
                        also,
                    }),
                    landed: Mutex::new(Some(landed_rx)),
                    reranker: settings_reranker.map(models::Pool::new),
                    nli: settings_nli.map(models::Pool::new),
                });
                let _ = this.set(Arc::downgrade(&engine));
                Ok(engine)
            })(),
        }
    }
}

/// Tells blocking work its request was withdrawn when dropped: a door holds one while it waits
/// on an engine call, so `$/cancelRequest` (or a client that goes away) stops the work.
pub struct CancelOnDrop(pub Arc<std::sync::atomic::AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// What a door reacts to once a vault has started.
pub struct Started {
    /// Deferred saves that landed, by path (the language server clears their diagnostic).
    pub landed: Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
    /// Told once how loading the embedder ended.
    pub loaded: Option<tokio::sync::oneshot::Receiver<vectors::Loaded>>,
}

impl Engine {
    /// Starts an open vault for a door: its messages and progress go to `reporter`, the vault
    /// is watched (unless the door's client watches for it: `watch` false), models unused for
    /// `[models] unload_after_secs` are released, and the first scan begins. `None`: the vault
    /// was started already (a folder added twice starts once). Call from a tokio runtime.
    pub fn start(self: &Arc<Self>, reporter: Arc<dyn Reporter>, watch: bool) -> Option<Started> {
        if self.started.swap(true, Ordering::SeqCst) {
            return None;
        }
        self.reporter.set(Some(reporter));
        let started = Started { landed: self.landed.lock().take(), loaded: self.dense_loaded.lock().take() };
        if watch {
            scan::watch_vault(self.clone());
        }
        // Models unused for a while are released; checked every few seconds, on a thread that
        // ends with the vault (it holds no reference to it).
        if let Some(after) = self.settings.unload_after {
            let weak = Arc::downgrade(self);
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
        scan::first_scan(self.clone());
        Some(started)
    }

    /// Whether the first scan (or a rescan) is running: answers may miss notes not read yet.
    pub fn scanning(&self) -> bool {
        self.scanning.load(Ordering::SeqCst)
    }
}
