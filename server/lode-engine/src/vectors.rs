//! The vector thread: loads the embedder, keeps vectors fresh after saves and scans.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lode_store::{Store, StoreOptions};
use parking_lot::Mutex;

use lode_models::EmbedderSource;

use crate::report::{Level, Slot as Reporter};
use crate::VectorSettings;

/// The egress rules in force now, as the vector thread's embedder off this machine must follow
/// them ([`lode_retrieval::Outbound`]): the same verdicts an MCP client gets.
pub(crate) struct EngineOutbound {
    /// The engine, once made (the vector thread starts before it exists); gone: it closes, and
    /// nothing is sent.
    pub(crate) engine: Arc<std::sync::OnceLock<std::sync::Weak<crate::Engine>>>,
    pub(crate) cfg: lode_answer::AskConfig,
    pub(crate) secrets: VersionSecrets,
}

/// The secrets of the version last masked: a round's passages come version by version.
#[derive(Default)]
pub struct VersionSecrets(Mutex<Option<(String, Arc<Vec<(std::ops::Range<usize>, &'static str)>>)>>);

impl VersionSecrets {
    fn mask(&self, store: &Store, version_id: &str, range: std::ops::Range<usize>, text: &str) -> (String, usize) {
        let spans = {
            let mut last = self.0.lock();
            match last.as_ref().filter(|(v, _)| v == version_id) {
                Some((_, spans)) => spans.clone(),
                None => {
                    let body = store.version_body(version_id).ok().flatten().map(|b| String::from_utf8_lossy(&b).into_owned());
                    let spans = Arc::new(body.map(|b| lode_answer::egress::secrets::secret_spans(&b)).unwrap_or_default());
                    *last = Some((version_id.to_owned(), spans.clone()));
                    spans
                }
            }
        };
        lode_answer::egress::secrets::mask_spans(text, range, &spans)
    }
}

impl lode_retrieval::Outbound for EngineOutbound {
    fn note_withheld(&self, store: &Store, path: &str) -> Option<String> {
        let Some(engine) = self.engine.get().and_then(std::sync::Weak::upgrade) else {
            return Some("the vault is closing".into());
        };
        let (rules, _, blocked) = engine.rules_now();
        if let Some(why) = blocked {
            return Some(format!("nothing may leave this machine now ({why})"));
        }
        lode_answer::withheld_for_remote(store, &rules, &self.cfg, path, None)
    }

    fn blocked(&self) -> Option<String> {
        let Some(engine) = self.engine.get().and_then(std::sync::Weak::upgrade) else {
            return Some("the vault is closing".into());
        };
        engine.rules_now().2
    }

    fn passage_withheld(&self, _path: &str, text: &str) -> Option<String> {
        lode_answer::egress::marks::read(text).local
    }

    fn mask(&self, store: &Store, version_id: &str, range: std::ops::Range<usize>, text: &str) -> (String, usize) {
        self.secrets.mask(store, version_id, range, text)
    }
}

/// The egress rules read once, for a command that embeds and ends (`lode index`).
pub struct FixedOutbound {
    pub rules: lode_answer::egress::EgressRules,
    pub cfg: lode_answer::AskConfig,
    pub secrets: VersionSecrets,
}

impl lode_retrieval::Outbound for FixedOutbound {
    fn note_withheld(&self, store: &Store, path: &str) -> Option<String> {
        lode_answer::withheld_for_remote(store, &self.rules, &self.cfg, path, None)
    }

    fn passage_withheld(&self, _path: &str, text: &str) -> Option<String> {
        lode_answer::egress::marks::read(text).local
    }

    fn mask(&self, store: &Store, version_id: &str, range: std::ops::Range<usize>, text: &str) -> (String, usize) {
        self.secrets.mask(store, version_id, range, text)
    }
}

/// The embedder and vector index, shared by the vector thread (which keeps vectors fresh after
/// saves) and readers (which embed questions).
pub(crate) type Dense = Arc<Mutex<Option<(Resident, lode_retrieval::VectorIndex)>>>;

/// The embedding model, loaded while it is used and released after `[models] unload_after_secs`
/// without use (its ONNX session is most of the server's memory): the next question or
/// embedding pass loads it again. Its id and dimensions are known throughout.
pub(crate) struct Resident {
    source: EmbedderSource,
    id: String,
    dims: usize,
    model: Option<lode_models::Embedder>,
    used: std::time::Instant,
}

impl Resident {
    pub(crate) fn new(model: lode_models::Embedder, source: EmbedderSource) -> Resident {
        Resident { source, id: model.id().to_owned(), dims: model.dimensions(), model: Some(model), used: std::time::Instant::now() }
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn dimensions(&self) -> usize {
        self.dims
    }

    pub(crate) fn is_loaded(&self) -> bool {
        self.model.is_some()
    }

    /// The model, loaded again if it was released (blocking: off the message loop). A model
    /// that no longer loads, or is another model now (its folder replaced), is an error: the
    /// caller goes on lexically, as with any failed dense leg.
    pub(crate) fn get(&mut self) -> std::result::Result<&mut lode_models::Embedder, String> {
        self.used = std::time::Instant::now();
        if self.model.is_none() {
            let m = lode_models::Embedder::open(&self.source).map_err(|e| format!("loading the embedder again: {e}"))?;
            if m.id() != self.id || m.dimensions() != self.dims {
                return Err(format!(
                    "{} is now {} ({} dimensions), not {}: restart the server",
                    self.source.describe(),
                    m.id(),
                    m.dimensions(),
                    self.id
                ));
            }
            tracing::info!("embedder {} loaded again", self.id);
            self.model = Some(m);
        }
        Ok(self.model.as_mut().expect("loaded above"))
    }

    /// After a bulk pass: the loaded model hands back the inference memory its largest batch
    /// grew (a released model has none to give).
    pub(crate) fn release_scratch(&mut self) {
        if let Some(m) = self.model.as_mut() {
            if let Err(e) = m.release_scratch() {
                tracing::warn!("releasing the embedder's scratch memory: {e}");
            }
        }
    }

    /// Releases the model if it has not been used for `after`: whether it did.
    pub(crate) fn release_if_idle(&mut self, after: std::time::Duration) -> bool {
        if self.model.is_some() && self.used.elapsed() >= after {
            self.model = None;
            tracing::info!("embedder {} released after {} s unused", self.id, after.as_secs());
            return true;
        }
        false
    }
}

/// What `lode/status` says of dense retrieval without waiting for the vector thread (which
/// holds the models while it embeds): the loaded model's id, or why loading failed.
#[derive(Default, Clone)]
pub(crate) struct DenseStatus {
    pub(crate) model: Option<String>,
    pub(crate) off: Option<String>,
    /// The vector table was replaced (it could not be read, at open or later): why.
    pub(crate) mended: Option<String>,
    /// The table was replaced and its vectors are not all back yet: answers are lexical.
    pub(crate) rebuilding: bool,
    /// The table's folder (`<dir>/<name>.lance`), once the model is loaded: a folder gone under
    /// the running server is seen at once, without reading the table.
    pub(crate) table: Option<PathBuf>,
    /// A read of the table failed (a question's dense leg): the vector thread checks the whole
    /// table before its next round and mends it if it cannot be read.
    pub(crate) check_asked: bool,
    /// `[models] embedder` names a model whose table is not complete yet: its id. Meanwhile
    /// `model` (the one recorded as serving) embeds questions and its table answers them.
    pub(crate) switching_to: Option<String>,
}

impl DenseStatus {
    /// Why answers may not use the vector table now, if they may not: it is being rebuilt, or
    /// its folder is gone (the vector thread is asked to check it).
    pub(crate) fn unusable(&mut self) -> Option<String> {
        if self.table.as_ref().is_some_and(|t| !t.is_dir()) {
            self.check_asked = true;
            return Some("the vector table is missing and is being rebuilt".into());
        }
        self.rebuilding.then(|| "the vector table is being rebuilt from the passages".into())
    }
}

pub(crate) type DenseOff = Arc<Mutex<DenseStatus>>;

/// How loading the embedder and the vector table ended, told once to the user.
pub enum Loaded {
    /// Dense retrieval is on; `mended`: the table could not be read and is being rebuilt.
    Ready { mended: Option<String> },
    /// Dense retrieval is off, and why.
    Off(String),
}

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
pub(crate) fn start_vectors(
    db: PathBuf,
    opts: StoreOptions,
    vs: VectorSettings,
    outbound: Arc<dyn lode_retrieval::Outbound>,
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
    let again = tx.clone();
    std::thread::Builder::new()
        .name("lode-vectors".into())
        .spawn(move || {
            // A panic while loading (a broken runtime library, a malformed model) turns dense
            // retrieval off with a reason, as an error does: the status never says "loading"
            // for ever.
            let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let source = vs.embedder.clone()?;
                lode_models::Embedder::open(&source)
                    .and_then(|e| {
                        lode_retrieval::VectorIndex::open(&vs.dir, e.id(), e.dimensions())
                            .map(|i| (e, i))
                            .map_err(|err| lode_models::ModelError::Model { path: vs.dir.clone(), detail: err.to_string() })
                    })
                    .map_err(|e| e.to_string())
            }))
            .map_err(|_| "loading the embedding model panicked".to_owned())
            .and_then(|r| r);
            // The configured model while its table is filled after a switch (see `previous`);
            // `None` when it is the one serving.
            let mut switching: Option<(lode_models::Embedder, lode_retrieval::VectorIndex)> = None;
            let model = match loaded {
                Ok(_) if closing.load(SeqCst) => return,
                Ok(m) => {
                    let id = m.0.id().to_owned();
                    let m_mended = m.1.mended().map(str::to_owned);
                    let serving = match previous(&vs, &db, &opts, &id) {
                        Some(old) => {
                            tracing::info!("embedder changed to {id}: {} answers until its table is complete", old.0.id());
                            shared_off.lock().switching_to = Some(id.clone());
                            switching = Some(m);
                            old
                        }
                        None => m,
                    };
                    {
                        let mut st = shared_off.lock();
                        if let Some(why) = m_mended.as_deref() {
                            tracing::warn!("{why}");
                            st.mended = Some(why.to_owned());
                            st.rebuilding = true;
                        }
                        st.table = Some(serving.1.table_dir());
                        st.model = Some(serving.0.id().to_owned());
                    }
                    let configured = vs.embedder.clone().expect("loaded above");
                    let source = if serving.0.id() == id { configured } else { previous_source(&vs).unwrap_or(configured) };
                    *shared.lock() = Some((Resident::new(serving.0, source), serving.1));
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
            let mut released = false;
            while let Ok(k) = rx.recv() {
                if closing.load(SeqCst) {
                    return;
                }
                take(k, &mut first);
                while let Ok(k) = rx.try_recv() {
                    take(k, &mut first);
                }
                passes += 1;
                // A table deleted or damaged under the running server: found before this pass
                // writes into it (its writes would succeed, and only reads fail), moved aside,
                // emptied, its bookkeeping reset, and the user told once.
                let must_check = {
                    let mut st = shared_off.lock();
                    std::mem::take(&mut st.check_asked) || st.table.as_ref().is_some_and(|t| !t.is_dir())
                };
                if must_check {
                    check_and_mend(&shared, &shared_off, &mut store, &model, &reporter);
                }
                let mut bar = Bar::new(&reporter, format!("lode/embed/{passes}"));
                // A panic while embedding ends this pass only; the next kick retries.
                // Whether the configured model's vectors are complete at the end of the pass.
                let pass = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> std::result::Result<bool, String> {
                    let mut sync = match switching.as_ref() {
                        Some((_, index)) => lode_retrieval::Sync::start(&mut store, index, &model).map_err(|e| e.to_string())?,
                        None => {
                            let guard = shared.lock();
                            let Some((_, index)) = guard.as_ref() else { return Ok(false) };
                            lode_retrieval::Sync::start(&mut store, index, &model).map_err(|e| e.to_string())?
                        }
                    };
                    sync.window_tokens = vs.window_tokens;
                    sync.outbound = Some(outbound.clone());
                    // Once per server: windows withheld before that may leave the machine now.
                    if !released {
                        released = true;
                        let released_now = match switching.as_ref() {
                            Some((embedder, index)) => sync.release_withheld(&mut store, index, embedder),
                            None => {
                                let mut guard = shared.lock();
                                match guard.as_mut() {
                                    Some((resident, index)) => match resident.get() {
                                        Ok(e) => sync.release_withheld(&mut store, index, e),
                                        Err(_) => Ok(0),
                                    },
                                    None => Ok(0),
                                }
                            }
                        };
                        match released_now {
                            Ok(0) => {}
                            Ok(n) => tracing::info!("{n} withheld windows may leave the machine now: embedded again"),
                            Err(e) => tracing::warn!("looking for withheld windows to embed again: {e}"),
                        }
                    }
                    loop {
                        // Kicks that came in meanwhile: their notes go first; any kick means
                        // the pass goes on until nothing is pending (so none is lost).
                        while let Ok(k) = rx.try_recv() {
                            take(k, &mut first);
                        }
                        let more = match switching.as_mut() {
                            // The new model's own pair: questions go on with the serving one.
                            Some((embedder, index)) => {
                                if closing.load(SeqCst) {
                                    return Ok(false);
                                }
                                sync.round(&mut store, index, embedder, &first).map_err(|e| e.to_string())?
                            }
                            None => {
                                let mut guard = shared.lock();
                                let Some((resident, index)) = guard.as_mut().filter(|_| !closing.load(SeqCst)) else { return Ok(false) };
                                crate::faults::fault("vectors");
                                let embedder = resident.get()?;
                                sync.round(&mut store, index, embedder, &first).map_err(|e| e.to_string())?
                            }
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
                    // Complete: the configured model serves from now on (one swap under the
                    // lock, before the old table is dropped), and is recorded as serving.
                    let complete = store.vector_freshness(&model).is_ok_and(|f| f.with_vectors >= f.passages);
                    if complete {
                        if let Some(new) = switching.take() {
                            let table = new.1.table_dir();
                            let new = (Resident::new(new.0, vs.embedder.clone().expect("loaded above")), new.1);
                            let old = shared.lock().replace(new);
                            let mut st = shared_off.lock();
                            st.model = Some(model.clone());
                            st.table = Some(table);
                            st.switching_to = None;
                            drop(st);
                            tracing::info!("embedder switched to {model}");
                            drop(old);
                        }
                    }
                    if let Some((_, index)) = switching.as_ref() {
                        // Still filling the new table: the pass ends on it, not on the serving one.
                        sync.finish(&mut store, index).map_err(|e| e.to_string())?;
                        return Ok(false);
                    }
                    let mut guard = shared.lock();
                    if let Some((embedder, index)) = guard.as_mut() {
                        // Recorded before `finish` drops the old model's table: a kill between
                        // the two leaves a record naming a complete table, never a missing one.
                        if complete && embedder.id() == model {
                            let path = match vs.embedder.as_ref() {
                                Ok(EmbedderSource::Onnx { dir, .. }) => dir.clone(),
                                // A server has no folder: its id names the model and the server.
                                _ => PathBuf::new(),
                            };
                            let rec = lode_retrieval::Serving { id: model.clone(), path, dims: embedder.dimensions() };
                            if lode_retrieval::Serving::read(&vs.dir).as_ref() != Some(&rec) {
                                if let Err(e) = rec.write(&vs.dir) {
                                    tracing::warn!("recording the serving model: {e}");
                                }
                            }
                        }
                        let report = sync.finish(&mut store, index).map_err(|e| e.to_string())?;
                        // A pass of more than one round grew the inference arena past what a
                        // question needs: handed back now, while the pass still holds the model
                        // (a question never finds it busy for this).
                        if report.rounds > 1 {
                            embedder.release_scratch();
                        }
                    }
                    Ok(complete)
                }));
                let message = match pass {
                    Ok(Ok(complete)) => {
                        if complete {
                            shared_off.lock().rebuilding = false;
                        }
                        "vectors up to date".to_owned()
                    }
                    Ok(Err(err)) => {
                        tracing::warn!("embedding failed: {err}");
                        // The table may be what failed: checked now; once mended, a new pass
                        // rebuilds it.
                        if check_and_mend(&shared, &shared_off, &mut store, &model, &reporter) {
                            let _ = again.send(None);
                        }
                        format!("embedding failed: {err}")
                    }
                    Err(_) => {
                        tracing::error!("embedding panicked; vectors will be retried after the next save");
                        "embedding stopped (logged); it resumes after the next save".to_owned()
                    }
                };
                bar.end(message);
                crate::memory::trim();
                // A check asked for during this pass (its kick was taken by the pass): the next
                // pass runs it.
                if shared_off.lock().check_asked {
                    let _ = again.send(None);
                }
            }
        })
        .expect("spawn the vector thread");
    let _ = tx.send(None);
    (tx, dense, off, loaded_rx)
}

/// After `[models] embedder` changed: the model recorded as serving (`serving.json`), loaded
/// with its table, if the configured model `id`'s table is not complete while that one's is —
/// it answers questions until the new table is complete. `None` when there is no switch to
/// bridge (no record, the same model, the new table complete, the old model or table gone).
/// The folder of the model recorded as serving (`serving.json`), to load it again after an idle
/// release while it bridges a switch.
fn previous_source(vs: &VectorSettings) -> Option<EmbedderSource> {
    lode_retrieval::Serving::read(&vs.dir).and_then(|r| source_of(vs, &r))
}

/// How to load the model a record names: its folder, with the configured runtime and threads;
/// a server's model only behind the server the user's config names now (the record, a file in
/// the vault, never chooses where text is sent).
fn source_of(vs: &VectorSettings, rec: &lode_retrieval::Serving) -> Option<EmbedderSource> {
    if let Some(rest) = rec.id.strip_prefix("openai:") {
        let Ok(EmbedderSource::Http(h)) = vs.embedder.as_ref() else { return None };
        let mut old = h.clone();
        old.model = rest.strip_suffix(&format!("@{}", h.url))?.to_owned();
        return Some(EmbedderSource::Http(old));
    }
    rec.path.is_absolute().then(|| EmbedderSource::Onnx { dir: rec.path.clone(), runtime: vs.runtime.clone(), threads: vs.threads })
}

fn previous(vs: &VectorSettings, db: &Path, opts: &StoreOptions, id: &str) -> Option<(lode_models::Embedder, lode_retrieval::VectorIndex)> {
    let rec = lode_retrieval::Serving::read(&vs.dir).filter(|r| r.id != id)?;
    let store = Store::open(db, StoreOptions { read_only: true, ..opts.clone() }).ok()?;
    let complete = |m: &str| store.vector_freshness(m).is_ok_and(|f| f.passages > 0 && f.with_vectors >= f.passages);
    if complete(id) || !complete(&rec.id) {
        return None;
    }
    let old = lode_models::Embedder::open(&source_of(vs, &rec)?)
        .map_err(|e| {
            tracing::warn!("the model that served before ({}) cannot be loaded: {e}; answering lexically until {id} is ready", rec.id)
        })
        .ok()?;
    let index = lode_retrieval::VectorIndex::open_existing(&vs.dir, &rec.id, rec.dims).ok()??;
    (old.id() == rec.id).then_some((old, index))
}

/// Reads the whole vector table; one that cannot be read is moved aside and replaced by an empty
/// one, its bookkeeping reset (so the passes that follow rebuild it), and the user told once.
/// Whether it was replaced.
fn check_and_mend(shared: &Dense, status: &DenseOff, store: &mut Store, model: &str, reporter: &Reporter) -> bool {
    let mended = {
        let mut guard = shared.lock();
        match guard.as_mut() {
            Some((_, index)) => match index.check() {
                Ok(()) => {
                    tracing::info!("the vector table was checked and reads whole");
                    None
                }
                Err(e) => Some(index.mend(&e.to_string()).map_err(|m| format!("{e}; mending it failed: {m}"))),
            },
            None => None,
        }
    };
    match mended {
        None => false,
        Some(Ok(why)) => {
            tracing::warn!("{why}");
            if let Err(e) = store.reset_vectors(Some(model)) {
                tracing::warn!("resetting the vector bookkeeping: {e}");
            }
            {
                let mut st = status.lock();
                st.mended = Some(why.clone());
                st.rebuilding = true;
            }
            tell(reporter, format!("lode: {why}; until it is rebuilt, answers lean on lexical search."));
            true
        }
        Some(Err(why)) => {
            tracing::warn!("{why}");
            let told = {
                let mut st = status.lock();
                st.rebuilding = true;
                st.mended.replace(why.clone()).as_ref() == Some(&why)
            };
            if !told {
                tell(reporter, format!("lode: {why}. Answers use lexical search; `lode doctor` says more."));
            }
            false
        }
    }
}

/// Tells the user something about the vector table (a warning), once a door has started the vault.
fn tell(reporter: &Reporter, message: String) {
    reporter.say(Level::Warning, message);
}

/// The progress bar of one embedding pass: begun only once the pass has enough to do, ended
/// whenever it was begun.
struct Bar<'a> {
    reporter: &'a Reporter,
    token: String,
    bar: Option<Box<dyn crate::report::Bar>>,
    /// The door refused a bar: none this pass.
    refused: bool,
}

impl<'a> Bar<'a> {
    fn new(reporter: &'a Reporter, token: String) -> Bar<'a> {
        Bar { reporter, token, bar: None, refused: false }
    }

    fn update(&mut self, done: usize, total: usize) {
        if self.bar.is_none() {
            if total < PROGRESS_FROM || self.refused {
                return;
            }
            self.bar = self.reporter.begin(&self.token, "lode: embedding passages", format!("0/{total} passages"));
            if self.bar.is_none() {
                self.refused = true;
                return;
            }
        }
        if let Some(b) = self.bar.as_mut() {
            b.report(format!("{done}/{total} passages"), (done * 100 / total.max(1)).min(100) as u32);
        }
    }

    fn end(self, message: String) {
        if let Some(b) = self.bar {
            b.end(message);
        }
    }
}
