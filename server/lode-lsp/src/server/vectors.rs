//! The vector thread: loads the embedder, keeps vectors fresh after saves and scans.

use super::*;

/// The embedder and vector index, shared by the vector thread (which keeps vectors fresh after
/// saves) and readers (which embed questions).
pub(super) type Dense = Arc<Mutex<Option<(lode_models::Embedder, lode_retrieval::VectorIndex)>>>;

/// Starts the thread that embeds passages lacking a vector whenever it is kicked; returns the
/// kick sender and the shared models (empty until loaded, or if loading failed).
pub(super) fn start_vectors(db: PathBuf, opts: StoreOptions, vs: VectorSettings) -> (std::sync::mpsc::Sender<()>, Dense) {
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

