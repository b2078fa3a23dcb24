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
}

pub(super) type DenseOff = Arc<Mutex<DenseStatus>>;

/// Starts the thread that embeds passages lacking a vector whenever it is kicked; returns the
/// kick sender, the shared models (empty until loaded, or if loading failed), why they failed,
/// and a receiver told once how loading ended (`Some(reason)` when dense retrieval is off).
pub(super) fn start_vectors(
    db: PathBuf,
    opts: StoreOptions,
    vs: VectorSettings,
) -> (std::sync::mpsc::Sender<()>, Dense, DenseOff, tokio::sync::oneshot::Receiver<Option<String>>) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (loaded_tx, loaded_rx) = tokio::sync::oneshot::channel();
    let dense: Dense = Arc::new(Mutex::new(None));
    let off: DenseOff = Arc::new(Mutex::new(DenseStatus::default()));
    let shared = dense.clone();
    let shared_off = off.clone();
    std::thread::Builder::new()
        .name("lode-vectors".into())
        .spawn(move || {
            let loaded = lode_models::Embedder::load(&vs.embedder, vs.runtime.as_deref(), vs.threads).and_then(|e| {
                lode_retrieval::VectorIndex::open(&vs.dir, e.id(), e.dimensions())
                    .map(|i| (e, i))
                    .map_err(|err| lode_models::ModelError::Model { path: vs.dir.clone(), detail: err.to_string() })
            });
            match loaded {
                Ok(m) => {
                    shared_off.lock().model = Some(m.0.id().to_owned());
                    *shared.lock() = Some(m);
                    let _ = loaded_tx.send(None);
                }
                Err(e) => {
                    tracing::warn!("dense retrieval off: {e}");
                    shared_off.lock().off = Some(e.to_string());
                    let _ = loaded_tx.send(Some(e.to_string()));
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
    (tx, dense, off, loaded_rx)
}

