//! The vector thread: loads the embedder, keeps vectors fresh after saves and scans.

use super::*;

/// The embedder and vector index, shared by the vector thread (which keeps vectors fresh after
/// saves) and readers (which embed questions).
pub(super) type Dense = Arc<Mutex<Option<(lode_models::Embedder, lode_retrieval::VectorIndex)>>>;

/// What `lode/status` says of dense retrieval without waiting for the vector thread (which
/// holds the models while it embeds): the loaded model's id, or why loading failed.
#[derive(Default, Clone)]
pub(super) struct DenseStatus {
    pub(super) model: Option<String>,
    pub(super) off: Option<String>,
    /// The vector table was replaced on open (it could not be read): why, while it is rebuilt.
    pub(super) mended: Option<String>,
}

pub(super) type DenseOff = Arc<Mutex<DenseStatus>>;

/// How loading the embedder and the vector table ended, told once to the user.
pub(super) enum Loaded {
    /// Dense retrieval is on; `mended`: the table could not be read and is being rebuilt.
    Ready { mended: Option<String> },
    /// Dense retrieval is off, and why.
    Off(String),
}

/// Where the vector thread reports its progress: the client, once the vault has started.
pub(super) type Reporter = Arc<Mutex<Option<(Client, tokio::runtime::Handle)>>>;

/// A kick of the vector thread: `None` after any write (embed the backlog), `Some(path)` for a
/// note the user just saved or opened (embedded before the backlog).
pub(crate) type Kick = Option<String>;

/// Work this big gets a `$/progress` bar (a single save's few passages do not).
const PROGRESS_FROM: usize = 64;

/// Starts the thread that embeds passages lacking a vector whenever it is kicked; returns the
/// kick sender, the shared models (empty until loaded, or if loading failed), why they failed,
/// and a receiver told once how loading ended (`Some(reason)` when dense retrieval is off).
///
/// The models are locked one round at a time (a few dozen passages), never for a whole pass:
/// between rounds a question can embed itself, and notes kicked as `Some(path)` meanwhile go
/// first in the next round.
/// `log_kick` is the writer's checkpoint kick, set once the writer runs: called after each
/// round. `closing` set (the client has gone, or the vault's folder was removed): the thread
/// installs no model and starts no round.
pub(super) fn start_vectors(
    db: PathBuf,
    opts: StoreOptions,
    vs: VectorSettings,
    reporter: Reporter,
    log_kick: Arc<std::sync::OnceLock<crate::writer::LogKick>>,
    closing: Arc<std::sync::atomic::AtomicBool>,
) -> (std::sync::mpsc::Sender<Kick>, Dense, DenseOff, tokio::sync::oneshot::Receiver<Loaded>) {
    use std::sync::atomic::Ordering::SeqCst;
    let (tx, rx) = std::sync::mpsc::channel::<Kick>();
    let (loaded_tx, loaded_rx) = tokio::sync::oneshot::channel();
    let dense: Dense = Arc::new(Mutex::new(None));
    let off: DenseOff = Arc::new(Mutex::new(DenseStatus::default()));
    let shared = dense.clone();
    let shared_off = off.clone();
    std::thread::Builder::new()
        .name("lode-vectors".into())
        .spawn(move || {
            // A panic while loading (a broken runtime library, a malformed model) turns dense
            // retrieval off with a reason, as an error does: the status never says "loading"
            // for ever.
            let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                lode_models::Embedder::load(&vs.embedder, vs.runtime.as_deref(), vs.threads).and_then(|e| {
                    lode_retrieval::VectorIndex::open(&vs.dir, e.id(), e.dimensions())
                        .map(|i| (e, i))
                        .map_err(|err| lode_models::ModelError::Model { path: vs.dir.clone(), detail: err.to_string() })
                })
            }))
            .map_err(|_| "loading the embedding model panicked".to_owned())
            .and_then(|r| r.map_err(|e| e.to_string()));
            let model = match loaded {
                Ok(_) if closing.load(SeqCst) => return,
                Ok(m) => {
                    let id = m.0.id().to_owned();
                    let m_mended = m.1.mended().map(str::to_owned);
                    if let Some(why) = m.1.mended() {
                        tracing::warn!("{why}");
                        shared_off.lock().mended = Some(why.to_owned());
                    }
                    shared_off.lock().model = Some(id.clone());
                    *shared.lock() = Some(m);
                    let _ = loaded_tx.send(Loaded::Ready { mended: m_mended });
                    id
                }
                Err(e) => {
                    tracing::warn!("dense retrieval off: {e}");
                    shared_off.lock().off = Some(e.clone());
                    let _ = loaded_tx.send(Loaded::Off(e));
                    return;
                }
            };
            let Ok(mut store) = Store::open(&db, opts) else { return };
            // Its commits grow the same log: the same backstop and file limit as the writer's,
            // and after each round the same kick of the checkpointer (`log_kick`).
            if let Err(e) = crate::writer::log_settings(&store) {
                tracing::warn!("WAL settings: {e}");
            }
            let mut first: Vec<String> = Vec::new();
            let take = |k: Kick, first: &mut Vec<String>| {
                if let Some(p) = k {
                    if !first.contains(&p) {
                        first.push(p);
                    }
                }
            };
            let mut passes = 0u64;
            while let Ok(k) = rx.recv() {
                if closing.load(SeqCst) {
                    return;
                }
                take(k, &mut first);
                while let Ok(k) = rx.try_recv() {
                    take(k, &mut first);
                }
                passes += 1;
                let mut bar = Bar::new(&reporter, format!("lode/embed/{passes}"));
                // A panic while embedding ends this pass only; the next kick retries.
                let pass = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> std::result::Result<(), String> {
                    let mut sync = {
                        let guard = shared.lock();
                        let Some((_, index)) = guard.as_ref() else { return Ok(()) };
                        let mut sync = lode_retrieval::Sync::start(&mut store, index, &model).map_err(|e| e.to_string())?;
                        sync.window_tokens = vs.window_tokens;
                        sync
                    };
                    loop {
                        // Kicks that came in meanwhile: their notes go first; any kick means
                        // the pass goes on until nothing is pending (so none is lost).
                        while let Ok(k) = rx.try_recv() {
                            take(k, &mut first);
                        }
                        let more = {
                            let mut guard = shared.lock();
                            let Some((embedder, index)) = guard.as_mut().filter(|_| !closing.load(SeqCst)) else { return Ok(()) };
                            crate::isolation::fault("vectors");
                            sync.round(&mut store, index, embedder, &first).map_err(|e| e.to_string())?
                        };
                        if let Some(k) = log_kick.get() {
                            k.kick_if_long();
                        }
                        // A note stays first until it has nothing left to embed.
                        first.retain(|p| store.pending_vectors_of(&model, std::slice::from_ref(p), 1).is_ok_and(|v| !v.is_empty()));
                        bar.update(sync.done(), sync.total);
                        if !more {
                            break;
                        }
                    }
                    let guard = shared.lock();
                    if let Some((_, index)) = guard.as_ref() {
                        sync.finish(&mut store, index).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                }));
                let message = match pass {
                    Ok(Ok(())) => "vectors up to date".to_owned(),
                    Ok(Err(err)) => {
                        tracing::warn!("embedding failed: {err}");
                        format!("embedding failed: {err}")
                    }
                    Err(_) => {
                        tracing::error!("embedding panicked; vectors will be retried after the next save");
                        "embedding stopped (logged); it resumes after the next save".to_owned()
                    }
                };
                bar.end(message);
            }
        })
        .expect("spawn the vector thread");
    let _ = tx.send(None);
    (tx, dense, off, loaded_rx)
}

/// The `$/progress` bar of one embedding pass: begun only once the pass has enough to do,
/// ended whenever it was begun.
struct Bar<'a> {
    reporter: &'a Reporter,
    token: ProgressToken,
    begun: bool,
    /// The client refused the token: no bar this pass.
    refused: bool,
}

impl<'a> Bar<'a> {
    fn new(reporter: &'a Reporter, token: String) -> Bar<'a> {
        Bar { reporter, token: ProgressToken::String(token), begun: false, refused: false }
    }

    fn send(&self, value: WorkDoneProgress) {
        let Some((client, handle)) = self.reporter.lock().clone() else { return };
        let token = self.token.clone();
        handle.block_on(async move {
            client.send_notification::<notification::Progress>(ProgressParams { token, value: ProgressParamsValue::WorkDone(value) }).await
        });
    }

    fn update(&mut self, done: usize, total: usize) {
        if !self.begun {
            if total < PROGRESS_FROM || self.refused {
                return;
            }
            let Some((client, handle)) = self.reporter.lock().clone() else { return };
            let token = self.token.clone();
            let created = handle.block_on(async move {
                tokio::time::timeout(std::time::Duration::from_secs(2), client.create_work_done_progress(token)).await
            });
            // A client that refuses the token gets no bar; one that does not answer within the
            // wait gets it anyway (embedding never waits on the client for longer).
            if matches!(created, Ok(Err(_))) {
                self.refused = true;
                return;
            }
            self.begun = true;
            self.send(WorkDoneProgress::Begin(WorkDoneProgressBegin {
                title: "lode: embedding passages".into(),
                message: Some(format!("0/{total} passages")),
                percentage: Some(0),
                ..Default::default()
            }));
        }
        self.send(WorkDoneProgress::Report(WorkDoneProgressReport {
            message: Some(format!("{done}/{total} passages")),
            percentage: Some((done * 100 / total.max(1)).min(100) as u32),
            ..Default::default()
        }));
    }

    fn end(self, message: String) {
        if self.begun {
            self.send(WorkDoneProgress::End(WorkDoneProgressEnd { message: Some(message) }));
        }
    }
}
