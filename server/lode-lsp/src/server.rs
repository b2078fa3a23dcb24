//! The LSP handlers. Each is thin: convert params (positions → bytes), call the store / answer
//! pipeline off the message loop (`spawn_blocking`), convert the result back.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
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

/// What the server needs from the vault's configuration (built by the `lode` binary).
pub struct Settings {
    pub db: PathBuf,
    pub store: StoreOptions,
    pub index: IndexOptions,
    pub ask: AskConfig,
    pub rules: EgressRules,
    pub synthesizer: Synthesizer,
    /// Dense retrieval: the embedder to load (lazily, on the vector thread) and where vectors live.
    pub vectors: Option<VectorSettings>,
}

#[derive(Clone)]
pub struct VectorSettings {
    pub embedder: PathBuf,
    pub runtime: Option<PathBuf>,
    pub threads: usize,
    pub dir: PathBuf,
}

/// The embedder and vector index, shared by the vector thread (which keeps vectors fresh after
/// saves) and readers (which embed questions).
type Dense = Arc<Mutex<Option<(lode_models::Embedder, lode_retrieval::VectorIndex)>>>;

/// Starts the thread that embeds passages lacking a vector whenever it is kicked; returns the
/// kick sender and the shared models (empty until loaded, or if loading failed).
fn start_vectors(db: PathBuf, opts: StoreOptions, vs: VectorSettings) -> (std::sync::mpsc::Sender<()>, Dense) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let dense: Dense = Arc::new(Mutex::new(None));
    let shared = dense.clone();
    std::thread::Builder::new()
        .name("lode-vectors".into())
        .spawn(move || {
            let loaded = lode_models::Embedder::load(&vs.embedder, vs.runtime.as_deref(), vs.threads).and_then(|e| {
                lode_retrieval::VectorIndex::open(&vs.dir, e.id(), e.dimensions())
                    .map(|i| (e, i))
                    .map_err(|err| lode_models::ModelError::Model { path: vs.dir.clone(), detail: err.to_string() })
            });
            match loaded {
                Ok(m) => *shared.lock() = Some(m),
                Err(e) => {
                    tracing::warn!("dense retrieval off: {e}");
                    return;
                }
            }
            let Ok(mut store) = Store::open(&db, opts) else { return };
            while rx.recv().is_ok() {
                while rx.try_recv().is_ok() {} // coalesce kicks
                let mut guard = shared.lock();
                let Some((e, i)) = guard.as_mut() else { return };
                // A panic while embedding ends this round only; the next kick retries.
                let round = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    crate::isolation::fault("vectors");
                    lode_retrieval::sync_vectors(&mut store, i, e, |_, _| {}, || true)
                }));
                match round {
                    Ok(Ok(_)) => {}
                    Ok(Err(err)) => tracing::warn!("embedding failed: {err}"),
                    Err(_) => tracing::error!("embedding panicked; vectors will be retried after the next save"),
                }
            }
        })
        .expect("spawn the vector thread");
    let _ = tx.send(());
    (tx, dense)
}

pub type SettingsFn = Arc<dyn Fn(&Path) -> anyhow::Result<Settings> + Send + Sync>;

struct Doc {
    rope: Rope,
    /// The editor's version of the buffer (from didOpen / didChange).
    version: i32,
}

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
    dense: Dense,
    kick: Option<Mutex<std::sync::mpsc::Sender<()>>>,
}

impl State {
    /// Wakes the vector thread (after saves and scans): embedding is only queued, never awaited.
    pub(crate) fn kick(&self) {
        if let Some(k) = &self.kick {
            let _ = k.lock().send(());
        }
    }
}

pub struct Backend {
    client: Client,
    settings_fn: SettingsFn,
    vault_override: Option<PathBuf>,
    enc: RwLock<Encoding>,
    /// Whether the client applies versioned `documentChanges` (else plain `changes`).
    document_changes: std::sync::atomic::AtomicBool,
    docs: Arc<Mutex<HashMap<String, Doc>>>,
    /// The workspace `initialize` named; the state (stores, writer) is opened from it on first
    /// use, so `initialize` itself answers at once.
    root: Mutex<Option<Option<PathBuf>>>,
    state: tokio::sync::OnceCell<std::result::Result<Arc<State>, String>>,
    /// Whether the client registers file watchers for us (else the server watches the vault).
    client_watches: AtomicBool,
}

pub fn build(settings: SettingsFn, vault: Option<PathBuf>) -> (LspService<Backend>, tower_lsp_server::ClientSocket) {
    LspService::build(|client| Backend {
        client,
        settings_fn: settings,
        vault_override: vault,
        enc: RwLock::new(Encoding::Utf16),
        document_changes: std::sync::atomic::AtomicBool::new(false),
        docs: Arc::new(Mutex::new(HashMap::new())),
        root: Mutex::new(None),
        state: tokio::sync::OnceCell::new(),
        client_watches: AtomicBool::new(false),
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
fn open_state(settings_fn: &SettingsFn, root: Option<PathBuf>) -> std::result::Result<Arc<State>, String> {
    match root {
        None => Err("no workspace folder: open a folder of notes".to_owned()),
        Some(root) => (|| {
            let settings = settings_fn(&root).map_err(|e| format!("{e:#}"))?;
            let write = Store::open(&settings.db, settings.store.clone()).map_err(|e| e.to_string())?;
            let read = Store::open(&settings.db, settings.store.clone()).map_err(|e| e.to_string())?;
            let (settings_db, settings_store) = (settings.db.clone(), settings.store.clone());
            let (kick, dense) = match settings.vectors.clone() {
                Some(vs) => {
                    let (k, d) = start_vectors(settings.db.clone(), settings.store.clone(), vs);
                    (Some(Mutex::new(k)), d)
                }
                None => (None, Arc::new(Mutex::new(None))),
            };
            let kick_writer = kick.as_ref().map(|k| k.lock().clone());
            let writer = Writer::start(write, root.clone(), settings.index.clone(), move |d| {
                match d {
                    Done::Failed(e) => tracing::warn!("write failed: {e}"),
                    Done::Saved(o) => tracing::debug!("saved note {} ({} passages)", o.note_id, o.passages),
                    other => tracing::debug!("written: {other:?}"),
                }
                if let Some(k) = &kick_writer {
                    let _ = k.send(());
                }
            });
            Ok(Arc::new(State {
                root,
                settings,
                writer,
                readers: crate::readers::Readers::new(settings_db, settings_store, read),
                scanning: Arc::new(AtomicBool::new(false)),
                scan_again: AtomicBool::new(false),
                scans: std::sync::atomic::AtomicU64::new(0),
                dense,
                kick,
            }))
        })(),
    }
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

#[derive(Deserialize)]
struct AskParams {
    question: String,
    pinned: Option<Uri>,
    limit: Option<usize>,
}

impl Backend {
    /// The stores and writer, opened on first use — off the message loop (`spawn_blocking`:
    /// opening runs migrations). Once open this returns without suspending, so a handler that
    /// takes a writer ticket right after it still takes it before its first real await.
    async fn state(&self) -> Result<Arc<State>> {
        let opened = match self.state.get() {
            Some(r) => r,
            None => {
                let Some(root) = self.root.lock().clone() else {
                    return Err(Error { code: ErrorCode::ServerError(-32002), message: "not initialized".into(), data: None });
                };
                let settings_fn = self.settings_fn.clone();
                self.state
                    .get_or_init(|| async move {
                        tokio::task::spawn_blocking(move || open_state(&settings_fn, root))
                            .await
                            .unwrap_or_else(|e| Err(format!("opening the vault failed: {e}")))
                    })
                    .await
            }
        };
        match opened {
            Ok(s) => Ok(s.clone()),
            Err(e) => Err(internal(format!("lode is not available in this workspace: {e}"))),
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

    fn doc_text(&self, uri: &Uri) -> Option<(Rope, String)> {
        let docs = self.docs.lock();
        docs.get(uri.as_str()).map(|d| (d.rope.clone(), d.rope.to_string()))
    }

    /// Waits for earlier saves (the ticket is read before the first await: see writer.rs), then
    /// finds the citation link under the cursor of an open document.
    async fn citation_under(&self, at: &TextDocumentPositionParams) -> Result<Option<(Arc<State>, Rope, lode_core::citation::CitationLink)>> {
        let barrier = self.state().await.map(|s| s.writer.barrier());
        let state = self.state().await?;
        state.writer.wait(barrier.unwrap_or(0)).await;
        let Some((rope, text)) = self.doc_text(&at.text_document.uri) else { return Ok(None) };
        let offset = position::offset(&rope, at.position, self.enc());
        Ok(lode_core::citation::at(&text, offset).map(|c| (state, rope, c)))
    }


    /// What the index holds and how fresh it is: notes, passages, passages with vectors, whether
    /// the first scan is still running and whether dense retrieval is on.
    async fn lode_status(&self, _: Value) -> Result<Value> {
        let state = self.state().await?;
        // `$/cancelRequest` (or a client that goes away) drops this future; the guard then
        // tells the blocking work to stop, and the LLM wait is abandoned at once.
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _guard = CancelOnDrop(cancel.clone());
        let st = state.clone();
        blocking(move || {
            let store = st.readers.get()?;
            let stats = store.stats().map_err(|e| e.to_string())?;
            let model = st.dense.try_lock().and_then(|g| g.as_ref().map(|(e, _)| e.id().to_owned()));
            let fresh = match &model {
                Some(m) => Some(store.vector_freshness(m).map_err(|e| e.to_string())?),
                None => None,
            };
            Ok(json!({
                "vault": st.root, "notes": stats.notes, "passages": stats.passages,
                "scanning": st.scanning.load(Ordering::SeqCst),
                "dense": match (&model, st.settings.vectors.is_some()) {
                    (Some(m), _) => json!({"model": m, "with_vectors": fresh.map(|f| f.with_vectors)}),
                    (None, true) => json!("loading, busy embedding, or unavailable (see the server log)"),
                    (None, false) => json!("off (no embedder configured)"),
                },
            }))
        })
        .await
    }

    async fn lode_ask(&self, params: Value) -> Result<Value> {
        let barrier = self.state().await.map(|s| s.writer.barrier());
        let state = self.state().await?;
        state.writer.wait(barrier.unwrap_or(0)).await;
        let p: AskParams = serde_json::from_value(params).map_err(|e| invalid(format!("lode/ask params: {e}")))?;
        crate::isolation::fault("ask-async");
        if p.question.trim().is_empty() {
            return Err(invalid("lode/ask: the question is empty"));
        }
        if p.question.len() > 4096 {
            return Err(invalid(format!("lode/ask: the question is {} bytes; at most 4096", p.question.len())));
        }
        let pinned = match &p.pinned {
            Some(u) => Some(Self::rel(&state, u).ok_or_else(|| invalid(format!("{} is not a note in this vault", u.as_str())))?),
            None => None,
        };
        let answer = self.answer(&state, p.question, None, pinned, p.limit).await?;
        let enc = self.enc();
        let partial = state.scanning.load(Ordering::SeqCst);
        let readers = state.readers.clone();
        let root = state.root.clone();
        let mut v = serde_json::to_value(&answer).map_err(internal)?;
        // Every citation also gets its note's URI and an LSP range in the cited version.
        let claims = answer.claims.clone();
        let ranges = blocking(move || {
            let store = readers.get()?;
            let mut out = Vec::new();
            for c in &claims {
                let mut per = Vec::new();
                for cit in &c.citations {
                    let body = store.version_body(&cit.version_id).map_err(|e| e.to_string())?.unwrap_or_default();
                    let rope = Rope::from_str(&String::from_utf8_lossy(&body));
                    let r = position::range(&rope, cit.start..cit.end, enc);
                    let uri = Uri::from_file_path(root.join(&cit.path)).map(|u| u.as_str().to_owned());
                    per.push(json!({"uri": uri, "range": r}));
                }
                out.push(per);
            }
            Ok(out)
        })
        .await?;
        if let Some(list) = v["claims"].as_array_mut() {
            for (c, per) in list.iter_mut().zip(ranges) {
                if let Some(cits) = c["citations"].as_array_mut() {
                    for (cit, extra) in cits.iter_mut().zip(per) {
                        cit["uri"] = extra["uri"].clone();
                        cit["range"] = extra["range"].clone();
                    }
                }
            }
        }
        v["index_partial"] = json!(partial);
        Ok(v)
    }

    async fn answer(
        &self,
        state: &Arc<State>,
        question: String,
        origin: Option<String>,
        pinned: Option<String>,
        limit: Option<usize>,
    ) -> Result<lode_answer::Answer> {
        // `$/cancelRequest` (or a client that goes away) drops this future; the guard then
        // tells the blocking work to stop, and the LLM wait is abandoned at once.
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _guard = CancelOnDrop(cancel.clone());
        let st = state.clone();
        blocking(move || {
            let store = st.readers.get()?;
            // Injected while a read connection is held (with one shared, locked connection, this
            // used to poison it for every later request).
            crate::isolation::fault("ask");
            // While the vector thread is embedding, answer lexically rather than wait for it.
            let mut dense = st.dense.try_lock();
            let models = match dense.as_mut().and_then(|g| g.as_mut()) {
                Some((e, i)) => lode_retrieval::Models { embedder: Some(e), index: Some(&*i), reranker: None },
                None => lode_retrieval::Models::default(),
            };
            let mut cfg = st.settings.ask.clone();
            cfg.vault_root = Some(st.root.clone());
            cfg.cancel = Some(cancel);
            if let Some(l) = limit {
                cfg.context_limit = l.clamp(1, 50);
            }
            lode_answer::ask_from(
                &store,
                &question,
                origin.as_deref(),
                pinned.as_deref(),
                &cfg,
                &st.settings.rules,
                &st.settings.synthesizer,
                models,
                &mut ScorerSlot::None,
            )
            .map_err(|e| e.to_string())
        })
        .await
    }

    /// Diagnostics for the citations in an open document: a quote no longer in its note's head
    /// has drifted (warning); one still there but pinned to an older version is noted (hint).
    async fn publish_citation_diagnostics(&self, uri: Uri) {
        let Ok(state) = self.state().await else { return };
        let Some((rope, text)) = self.doc_text(&uri) else { return };
        let version = self.doc_version(&uri);
        let enc = self.enc();
        let readers = state.readers.clone();
        let diags = blocking(move || {
            let store = readers.get()?;
            let mut out = Vec::new();
            for c in lode_core::citation::find_all(&text) {
                let range = position::range(&rope, c.range.clone(), enc);
                let Ok(Some(body)) = store.version_body(&c.version_id) else {
                    out.push(Diagnostic {
                        range,
                        severity: Some(DiagnosticSeverity::WARNING),
                        code: Some(NumberOrString::String("lode.unknown-version".into())),
                        source: Some("lode".into()),
                        message: format!("cited version {} is not in this vault's history", &c.version_id[..12]),
                        ..Default::default()
                    });
                    continue;
                };
                let quote = String::from_utf8_lossy(body.get(c.span.clone()).unwrap_or(&[])).into_owned();
                let Some((path, head)) = store.head_for_version(&c.version_id).map_err(|e| e.to_string())? else {
                    continue;
                };
                if head == c.version_id {
                    continue;
                }
                let head_body = store.version_body(&head).map_err(|e| e.to_string())?.unwrap_or_default();
                let head_text = String::from_utf8_lossy(&head_body);
                match lode_core::gate::locate(&head_text, &quote) {
                    None => out.push(Diagnostic {
                        range,
                        severity: Some(DiagnosticSeverity::WARNING),
                        code: Some(NumberOrString::String("lode.drifted".into())),
                        source: Some("lode".into()),
                        message: format!("drifted: the quoted text is no longer in {path} (cited version {})", &c.version_id[..12]),
                        data: Some(json!({"version_id": c.version_id, "path": path})),
                        ..Default::default()
                    }),
                    Some((r, _)) => out.push(Diagnostic {
                        range,
                        severity: Some(DiagnosticSeverity::HINT),
                        code: Some(NumberOrString::String("lode.older-version".into())),
                        source: Some("lode".into()),
                        message: format!("{path} changed since; the quoted text is still there (bytes {}-{})", r.start, r.end),
                        data: Some(json!({"head": head, "start": r.start, "end": r.end, "path": path,
                                          "line": lode_core::text::line_of(&head_body, r.start)})),
                        ..Default::default()
                    }),
                }
            }
            Ok(out)
        })
        .await
        .unwrap_or_default();
        // Only for the text they were computed on: if the buffer changed meanwhile, the next
        // publication (after the change is saved) replaces them.
        if self.doc_version(&uri) == version {
            self.client.publish_diagnostics(uri, diags, version).await;
        }
    }

    async fn refresh_open_diagnostics(&self) {
        let uris: Vec<String> = self.docs.lock().keys().cloned().collect();
        for u in uris {
            if let Ok(uri) = u.parse::<Uri>() {
                self.publish_citation_diagnostics(uri).await;
            }
        }
    }

    async fn ask_and_insert(&self, uri: Uri, range: Range, pinned: bool) -> Result<Option<LSPAny>> {
        let state = self.state().await?;
        let (rope, _) = self.doc_text(&uri).ok_or_else(|| invalid(format!("{} is not open", uri.as_str())))?;
        let enc = self.enc();
        let bytes = position::byte_range(&rope, range, enc);
        let mut question = rope.byte_slice(bytes.clone()).to_string();
        if question.trim().is_empty() {
            let line = rope.byte_to_line(bytes.start);
            question = rope.line(line).to_string();
        }
        // The whole line the question ends on, to find it again when the answer arrives.
        let question_text = rope.line(rope.byte_to_line(bytes.end.saturating_sub(1).max(bytes.start).min(rope.len_bytes()))).to_string();
        let question = lode_core::extractive::plain(question.trim()).trim_start_matches('#').trim().to_owned();
        if question.is_empty() {
            return Err(invalid("no question on that line"));
        }
        let rel = Self::rel(&state, &uri).unwrap_or_else(|| "untitled.md".into());
        let pinned_path = if pinned { Some(rel.clone()) } else { None };
        // The question is text of this note: egress rules for the note apply to it.
        let answer = self.answer(&state, question, Some(rel.clone()), pinned_path, None).await?;
        let md = lode_answer::render::markdown(&answer, &rel);
        // Insert after the question's line *as the buffer is now*: the user may have typed while
        // the answer was made, so the question is found again (nearest line with its text).
        let (rope, _) = self.doc_text(&uri).ok_or_else(|| invalid(format!("{} was closed", uri.as_str())))?;
        let version = self.doc_version(&uri);
        let asked_line = rope.byte_to_line(bytes.end.saturating_sub(1).max(bytes.start).min(rope.len_bytes()));
        let question_line = question_text.trim();
        let end_line = (0..rope.len_lines())
            .filter(|&l| rope.line(l).to_string().trim() == question_line)
            .min_by_key(|&l| l.abs_diff(asked_line))
            .unwrap_or_else(|| asked_line.min(rope.len_lines().saturating_sub(1)));
        let insert_at = Position { line: end_line as u32 + 1, character: 0 };
        let needs_newline = end_line + 1 >= rope.len_lines() && !rope.to_string().ends_with('\n');
        let text = format!("{}\n{md}\n", if needs_newline { "\n" } else { "" });
        let edit_one = TextEdit { range: Range { start: insert_at, end: insert_at }, new_text: text };
        let edit = if self.document_changes.load(Ordering::SeqCst) {
            WorkspaceEdit {
                document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
                    text_document: OptionalVersionedTextDocumentIdentifier { uri, version },
                    edits: vec![OneOf::Left(edit_one)],
                }])),
                ..Default::default()
            }
        } else {
            WorkspaceEdit { changes: Some(HashMap::from([(uri, vec![edit_one])])), ..Default::default() }
        };
        let applied = self.client.apply_edit(edit).await.map_err(internal)?;
        Ok(Some(json!({"applied": applied.applied, "answer": answer})))
    }
}

fn is_question_line(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.ends_with('?')
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
        #[allow(deprecated)]
        let root = self
            .vault_override
            .clone()
            .or_else(|| params.workspace_folders.as_ref().and_then(|f| f.first()).and_then(|f| f.uri.to_file_path().map(|p| p.into_owned())))
            .or_else(|| params.root_uri.as_ref().and_then(|u| u.to_file_path().map(|p| p.into_owned())));
        *self.root.lock() = Some(root);

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
                code_action_provider: Some(CodeActionProviderCapability::Simple(true)),
                execute_command_provider: Some(ExecuteCommandOptions { commands: vec!["lode.ask".into()], ..Default::default() }),
                workspace_symbol_provider: Some(OneOf::Left(true)),
                ..Default::default()
            },
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        match self.state().await {
            Ok(state) => {
                if self.client_watches.load(Ordering::SeqCst) {
                    // Notes (all changes), and what single-file events cannot describe: folders
                    // created or deleted (renames), ignore files.
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
                        tracing::warn!("the client refused file watchers ({e}); lode watches the vault itself");
                        crate::files::watch_vault(self.client.clone(), state.clone());
                    }
                } else {
                    crate::files::watch_vault(self.client.clone(), state.clone());
                }
                crate::files::request_scan(self.client.clone(), state);
            }
            Err(e) => self.client.show_message(MessageType::ERROR, e.message).await,
        }
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let uri = params.text_document.uri;
        let doc = Doc { rope: Rope::from_str(&params.text_document.text), version: params.text_document.version };
        self.docs.lock().insert(uri.as_str().to_owned(), doc);
        self.publish_citation_diagnostics(uri).await;
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        // Buffers only: no index work per keystroke.
        let enc = self.enc();
        let mut docs = self.docs.lock();
        let Some(doc) = docs.get_mut(params.text_document.uri.as_str()) else { return };
        doc.version = params.text_document.version;
        position::apply_changes(&mut doc.rope, params.content_changes.into_iter().map(|c| (c.range, c.text)), enc);
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        // The ticket is taken before the first await: see writer.rs.
        let Ok(state) = self.state().await else { return };
        let uri = params.text_document.uri;
        let Some(rel) = Self::rel(&state, &uri) else { return };
        // Disk is the truth: the saved file's bytes (BOM, encoding and all) are indexed, not the
        // editor's decoded text — unless there is no such file (an unsaved or virtual buffer).
        let (_, done) = if state.root.join(&rel).is_file() {
            state.writer.submit(Job::Refresh { path: rel })
        } else {
            match params.text.or_else(|| self.doc_text(&uri).map(|(_, t)| t)) {
                Some(t) => state.writer.submit(Job::Save { path: rel, bytes: t.into_bytes() }),
                None => state.writer.submit(Job::Refresh { path: rel }),
            }
        };
        if let Ok(Done::Failed(e)) = done.await {
            self.client.show_message(MessageType::WARNING, format!("lode: could not index {}: {e}", uri.as_str())).await;
        }
        self.refresh_open_diagnostics().await;
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        self.docs.lock().remove(params.text_document.uri.as_str());
        self.client.publish_diagnostics(params.text_document.uri, Vec::new(), None).await;
    }

    async fn did_change_watched_files(&self, params: DidChangeWatchedFilesParams) {
        // Jobs are queued before the first real await (the state is open by now): see writer.rs.
        let Ok(state) = self.state().await else { return };
        // Open documents too: disk is the truth for the index (a checkout changes the file
        // under the buffer; the buffer itself is the editor's).
        let paths = params.changes.into_iter().filter_map(|c| c.uri.to_file_path().map(|p| p.into_owned()));
        if let Some(done) = crate::files::on_paths(&self.client, &state, paths) {
            let _ = done.await;
            self.refresh_open_diagnostics().await;
        }
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let Some((state, rope, c)) = self.citation_under(&params.text_document_position_params).await? else { return Ok(None) };
        let enc = self.enc();
        let range = position::range(&rope, c.range.clone(), enc);
        // The rung of the answer item this citation belongs to, from the label on its line.
        let line = rope.line(rope.byte_to_line(c.range.start.min(rope.len_bytes()))).to_string();
        let rung = if line.contains(lode_core::gate::EVIDENCE_ONLY_LABEL) {
            "evidence only: this quote is shown as evidence; the model's wording could not be verified"
        } else if line.contains("quoted & coupled") || line.contains("*(entailed (") {
            "verified: the claim on this line is carried by this quote"
        } else {
            ""
        };
        let readers = state.readers.clone();
        crate::isolation::fault("hover-async");
        let md = blocking(move || {
            let store = readers.get()?;
            crate::isolation::fault("hover");
            let Some(body) = store.version_body(&c.version_id).map_err(|e| e.to_string())? else {
                return Ok(format!("**lode citation** — version `{}` is not in this vault's history", &c.version_id[..12]));
            };
            let quote = String::from_utf8_lossy(body.get(c.span.clone()).unwrap_or(&[])).into_owned();
            let info = store.version_info(&c.version_id).map_err(|e| e.to_string())?;
            let (path, title, saved) = info.unwrap_or_default();
            let head = store.head_for_version(&c.version_id).map_err(|e| e.to_string())?;
            let status = match head {
                Some((_, h)) if h == c.version_id => "the note's current version".to_owned(),
                Some((p, h)) => {
                    let hb = store.version_body(&h).map_err(|e| e.to_string())?.unwrap_or_default();
                    let ht = String::from_utf8_lossy(&hb);
                    match lode_core::gate::locate(&ht, &quote) {
                        Some((r, _)) => format!("still in the current version of {p}, line {}", lode_core::text::line_of(&hb, r.start)),
                        None => format!("**drifted**: no longer in the current version of {p}"),
                    }
                }
                None => "the note has been deleted".to_owned(),
            };
            let quoted: String = quote.lines().map(|l| format!("> {l}\n")).collect();
            let rung = if rung.is_empty() { String::new() } else { format!("\n\n*{rung}*") };
            Ok(format!(
                "**{title}** — `{path}`\n\n{quoted}\nversion `{}` saved {saved} · {status}{rung}",
                &c.version_id[..12]
            ))
        })
        .await?;
        Ok(Some(Hover { contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: md }), range: Some(range) }))
    }

    async fn goto_definition(&self, params: GotoDefinitionParams) -> Result<Option<GotoDefinitionResponse>> {
        let Some((state, _, c)) = self.citation_under(&params.text_document_position_params).await? else { return Ok(None) };
        let enc = self.enc();
        let readers = state.readers.clone();
        let root = state.root.clone();
        let docs = self.docs.clone();
        let loc = blocking(move || {
            let store = readers.get()?;
            let Some(body) = store.version_body(&c.version_id).map_err(|e| e.to_string())? else {
                return Err(format!("version {} is not in this vault's history", &c.version_id[..12]));
            };
            let quote = String::from_utf8_lossy(body.get(c.span.clone()).unwrap_or(&[])).into_owned();
            // In the current head, when the quote is still there (the open buffer if the note is open).
            if let Some((path, head)) = store.head_for_version(&c.version_id).map_err(|e| e.to_string())? {
                let abs = root.join(&path);
                let target = Uri::from_file_path(&abs).ok_or("bad path")?;
                let open = docs.lock().get(target.as_str()).map(|d| d.rope.clone());
                let (rope, text) = match open {
                    Some(r) => {
                        let t = r.to_string();
                        (r, t)
                    }
                    None => {
                        let hb = store.version_body(&head).map_err(|e| e.to_string())?.unwrap_or_default();
                        let t = String::from_utf8_lossy(&hb).into_owned();
                        (Rope::from_str(&t), t)
                    }
                };
                if let Some((r, _)) = lode_core::gate::locate(&text, &quote) {
                    return Ok(Location { uri: target, range: position::range(&rope, r, enc) });
                }
            }
            // Otherwise the cited version itself, materialized read-only.
            let dir = store.path().parent().map(|d| d.join("versions")).ok_or("no state folder")?;
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let file = dir.join(format!("{}.md", c.version_id));
            if !file.exists() {
                std::fs::write(&file, &body).map_err(|e| e.to_string())?;
                let mut perms = std::fs::metadata(&file).map_err(|e| e.to_string())?.permissions();
                perms.set_readonly(true);
                let _ = std::fs::set_permissions(&file, perms);
            }
            let rope = Rope::from_str(&String::from_utf8_lossy(&body));
            Ok(Location { uri: Uri::from_file_path(&file).ok_or("bad path")?, range: position::range(&rope, c.span.clone(), enc) })
        })
        .await?;
        Ok(Some(GotoDefinitionResponse::Scalar(loc)))
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        let Some((rope, _)) = self.doc_text(&uri) else { return Ok(None) };
        let enc = self.enc();
        let r = position::byte_range(&rope, params.range, enc);
        let selected = rope.byte_slice(r.clone()).to_string();
        let line = rope.line(rope.byte_to_line(r.start)).to_string();
        let mut actions = Vec::new();
        if !selected.trim().is_empty() || is_question_line(&line) {
            for (title, pinned) in [("Ask lode", false), ("Ask lode about this note", true)] {
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: title.into(),
                    kind: Some(CodeActionKind::new("lode.ask")),
                    command: Some(Command {
                        title: title.into(),
                        command: "lode.ask".into(),
                        arguments: Some(vec![json!({"uri": uri.as_str(), "range": params.range, "pinned": pinned})]),
                    }),
                    ..Default::default()
                }));
            }
        }
        let rel = self.state().await.ok().and_then(|st| Self::rel(&st, &uri));
        for d in params.context.diagnostics.iter().filter(|d| d.source.as_deref() == Some("lode")) {
            if let (Some(NumberOrString::String(code)), Some(data), Some(from)) = (&d.code, &d.data, &rel) {
                if code == "lode.older-version" {
                    let (Some(head), Some(path), Some(start), Some(end), Some(line)) = (
                        data["head"].as_str(),
                        data["path"].as_str(),
                        data["start"].as_u64(),
                        data["end"].as_u64(),
                        data["line"].as_u64(),
                    ) else {
                        continue;
                    };
                    let link = lode_core::citation::render(from, path, line as usize, head, start as usize..end as usize);
                    actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                        title: "Re-pin the citation to the note's current version".into(),
                        kind: Some(CodeActionKind::QUICKFIX),
                        diagnostics: Some(vec![d.clone()]),
                        edit: Some(WorkspaceEdit {
                            changes: Some(HashMap::from([(uri.clone(), vec![TextEdit { range: d.range, new_text: link }])])),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }));
                }
            }
            if d.code == Some(NumberOrString::String("lode.drifted".into())) {
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: "Re-ask lode (the quoted text drifted)".into(),
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: Some(vec![d.clone()]),
                    command: Some(Command {
                        title: "Re-ask lode".into(),
                        command: "lode.ask".into(),
                        arguments: Some(vec![json!({"uri": uri.as_str(), "range": d.range, "pinned": false})]),
                    }),
                    ..Default::default()
                }));
            }
        }
        Ok((!actions.is_empty()).then_some(actions))
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        if params.command != "lode.ask" {
            return Err(invalid(format!("unknown command {}", params.command)));
        }
        let barrier = self.state().await.map(|s| s.writer.barrier());
        self.state().await?.writer.wait(barrier.unwrap_or(0)).await;
        #[derive(Deserialize)]
        struct Args {
            uri: Uri,
            range: Range,
            #[serde(default)]
            pinned: bool,
        }
        let arg = params.arguments.into_iter().next().ok_or_else(|| invalid("lode.ask needs {uri, range, pinned?}"))?;
        let a: Args = serde_json::from_value(arg).map_err(|e| invalid(format!("lode.ask arguments: {e}")))?;
        self.ask_and_insert(a.uri, a.range, a.pinned).await
    }

    async fn symbol(&self, params: WorkspaceSymbolParams) -> Result<Option<WorkspaceSymbolResponse>> {
        // A note saved just before is among the symbols (the ticket is read before the first await).
        let barrier = self.state().await.map(|s| s.writer.barrier());
        let state = self.state().await?;
        state.writer.wait(barrier.unwrap_or(0)).await;
        let readers = state.readers.clone();
        let root = state.root.clone();
        let q = params.query.to_lowercase();
        let syms = blocking(move || {
            let store = readers.get()?;
            let mut out = Vec::new();
            for (path, name, line, is_title) in store.symbols(&q, 200).map_err(|e| e.to_string())? {
                let Some(uri) = Uri::from_file_path(root.join(&path)) else { continue };
                let pos = Position { line: line.saturating_sub(1) as u32, character: 0 };
                #[allow(deprecated)]
                out.push(SymbolInformation {
                    name,
                    kind: if is_title { SymbolKind::FILE } else { SymbolKind::STRING },
                    tags: None,
                    deprecated: None,
                    location: Location { uri, range: Range { start: pos, end: pos } },
                    container_name: Some(path),
                });
            }
            Ok(out)
        })
        .await?;
        Ok(Some(WorkspaceSymbolResponse::Flat(syms)))
    }
}
