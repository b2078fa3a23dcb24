//! The LSP server: its state (stores, writer, readers, documents), lifecycle and document sync;
//! each feature's handlers live in their own module and are thin — convert params (positions →
//! bytes), call the store / answer pipeline off the message loop (`spawn_blocking`), convert
//! the result back. Files → index is `crate::files`.

mod ask;
mod citations;
mod externals;
mod nav;
mod status;
mod symbols;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

// parking_lot locks do not poison: a panic in one request cannot make every later request fail.
use parking_lot::{Mutex, RwLock};

use lode_store::Store;
use ropey::Rope;
use serde::Deserialize;
use serde_json::{json, Value};
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer, LspService};

use crate::position::{self, Encoding};
use lode_engine::vectors::Loaded;
use lode_engine::writer::{Done, Job};
use lode_engine::{Engine as State, SettingsFn, Unopened};

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
    let reporter = Arc::new(ClientReporter { client: client.clone(), handle: tokio::runtime::Handle::current() });
    let Some(started) = state.start(reporter, !prefs.watches) else { return };
    if let Some(mut landed) = started.landed {
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
    for notice in state.trust_notices() {
        client.show_message(MessageType::WARNING, notice).await;
    }
    // Lexical-only answers are a silent downgrade unless the user is told, once.
    if let Some(loaded) = started.loaded {
        let client = client.clone();
        let root = state.root.clone();
        tokio::spawn(async move {
            let reason = match loaded.await {
                Ok(Loaded::Off(_)) if prefs.prompts_setup => return,
                Ok(Loaded::Off(reason)) => reason,
                Ok(Loaded::Ready { mended: Some(why) }) => {
                    let msg = format!("lode: {why}; until it is rebuilt, answers in {} lean on lexical search.", root.display());
                    client.show_message(MessageType::WARNING, msg).await;
                    return;
                }
                _ => return,
            };
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
        });
    }
}

/// The engine's messages and progress, as `window/showMessage` and `$/progress` to the client.
/// Called from the engine's own threads (never a runtime worker), so it may block on the client
/// briefly: a progress token waits at most 2 s for the client's answer.
struct ClientReporter {
    client: Client,
    handle: tokio::runtime::Handle,
}

impl lode_engine::Reporter for ClientReporter {
    fn say(&self, level: lode_engine::Level, message: String) {
        let kind = match level {
            lode_engine::Level::Warning => MessageType::WARNING,
            lode_engine::Level::Error => MessageType::ERROR,
        };
        let c = self.client.clone();
        self.handle.spawn(async move { c.show_message(kind, message).await });
    }

    fn begin(&self, token: &str, title: &str, message: String) -> Option<Box<dyn lode_engine::Bar>> {
        let token = ProgressToken::String(token.to_owned());
        let (c, t) = (self.client.clone(), token.clone());
        // Waits for the client's answer, but not forever: a client that never answers must not
        // hold up indexing (the progress then goes out unacknowledged); one that refuses the
        // token gets no bar.
        let created = self
            .handle
            .block_on(async move { tokio::time::timeout(std::time::Duration::from_secs(2), c.create_work_done_progress(t)).await });
        if matches!(created, Ok(Err(_))) {
            return None;
        }
        let bar = ClientBar { client: self.client.clone(), handle: self.handle.clone(), token };
        bar.send(WorkDoneProgress::Begin(WorkDoneProgressBegin {
            title: title.to_owned(),
            message: Some(message),
            percentage: Some(0),
            ..Default::default()
        }));
        Some(Box::new(bar))
    }
}

struct ClientBar {
    client: Client,
    handle: tokio::runtime::Handle,
    token: ProgressToken,
}

impl ClientBar {
    fn send(&self, value: WorkDoneProgress) {
        let (c, token) = (self.client.clone(), self.token.clone());
        self.handle.block_on(async move {
            c.send_notification::<notification::Progress>(ProgressParams { token, value: ProgressParamsValue::WorkDone(value) }).await
        });
    }
}

impl lode_engine::Bar for ClientBar {
    fn report(&mut self, message: String, percent: u32) {
        self.send(WorkDoneProgress::Report(WorkDoneProgressReport {
            message: Some(message),
            percentage: Some(percent),
            ..Default::default()
        }));
    }

    fn end(self: Box<Self>, message: String) {
        self.send(WorkDoneProgress::End(WorkDoneProgressEnd { message: Some(message) }));
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
        let cell = self.states.lock().entry(root.clone()).or_default().clone();
        if cell.get().is_none() && !cell.started.swap(true, Ordering::SeqCst) {
            let (settings_fn, waiting, client, task_cell, root) =
                (self.settings_fn.clone(), self.waiting.clone(), self.client.clone(), cell.clone(), root.clone());
            tokio::spawn(async move {
                task_cell
                    .cell
                    .get_or_init(|| async move {
                        let mut pause = OPEN_RETRY_FIRST;
                        loop {
                            let (f, r) = (settings_fn.clone(), root.clone());
                            let opened = tokio::task::spawn_blocking(move || State::open(&f, Some(r)))
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
                            Some(Err(e)) => {
                                return client
                                    .show_message(MessageType::ERROR, format!("lode is not available in this workspace: {e}"))
                                    .await
                            }
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
                let listed: Vec<PathBuf> =
                    params.workspace_folders.iter().flatten().filter_map(|f| f.uri.to_file_path().map(|p| p.into_owned())).collect();
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
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: vec!["lode.ask".into(), externals::MIRROR.into()],
                    ..Default::default()
                }),
                workspace_symbol_provider: Some(OneOf::Left(true)),
                references_provider: Some(OneOf::Left(true)),
                document_symbol_provider: Some(OneOf::Left(true)),
                folding_range_provider: Some(FoldingRangeProviderCapability::Simple(true)),
                document_link_provider: Some(DocumentLinkOptions {
                    resolve_provider: Some(false),
                    work_done_progress_options: Default::default(),
                }),
                completion_provider: Some(CompletionOptions {
                    trigger_characters: Some(vec!["[".into(), "#".into(), "(".into(), "/".into()]),
                    ..Default::default()
                }),
                rename_provider: Some(OneOf::Right(RenameOptions {
                    prepare_provider: Some(true),
                    work_done_progress_options: Default::default(),
                })),
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
            let gone =
                states.iter().filter(|(root, _)| removed.contains(root)).filter_map(|(_, c)| c.get()?.as_ref().ok().cloned()).collect();
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
                    Some(doc)
                        if doc.generation == generation && !doc.preparing && doc.rope.len_bytes() <= lode_store::PRECHUNK_MAX_BYTES =>
                    {
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
        let pending: Vec<_> = by_vault
            .into_iter()
            .filter_map(|(state, paths)| lode_engine::scan::on_paths(&state, paths).map(|done| (state, done)))
            .collect();
        if !pending.is_empty() {
            for (state, done) in pending {
                if let Ok(done) = done.await {
                    lode_engine::scan::after_paths(&state, &done);
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
