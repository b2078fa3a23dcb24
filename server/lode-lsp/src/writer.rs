//! The single writer: every mutation from the editor (a save, a file changed or deleted outside
//! it) goes through one thread that owns the write connection, in the order messages arrived.
//!
//! Ordering invariant (tower-lsp runs handlers concurrently, tower-lsp issue #284): a handler
//! takes its ticket synchronously, before its first `.await`. Handlers are first polled in message
//! order, so a save's ticket is taken before any later request starts; a read waits until every
//! ticket taken before it has been committed. A question asked right after a save sees the save.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use lode_store::{SaveOutcome, Store, StoreError};
use tokio::sync::watch;

pub enum Job {
    Save { path: String, bytes: Vec<u8> },
    /// Re-read a file from disk (changed outside the editor); gone → deleted.
    Refresh { path: String, abs: PathBuf },
}

#[derive(Debug, Clone)]
pub enum Done {
    Saved(SaveOutcome),
    Deleted(bool),
    Failed(String),
}

pub struct Writer {
    tx: mpsc::Sender<(u64, Job, Option<tokio::sync::oneshot::Sender<Done>>)>,
    taken: AtomicU64,
    committed: watch::Receiver<u64>,
}

impl Writer {
    /// Starts the writer thread on `store`. `after` runs on the writer thread after each job
    /// (e.g. to wake the embedding worker).
    pub fn start(mut store: Store, after: impl Fn(&Done) + Send + 'static) -> Writer {
        let (tx, rx) = mpsc::channel::<(u64, Job, Option<tokio::sync::oneshot::Sender<Done>>)>();
        let (done_tx, done_rx) = watch::channel(0u64);
        std::thread::Builder::new()
            .name("lode-writer".into())
            .spawn(move || {
                for (ticket, job, reply) in rx {
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut store, job)))
                        .unwrap_or_else(|_| Done::Failed("the writer panicked on this job".into()));
                    after(&result);
                    let _ = done_tx.send(ticket);
                    if let Some(r) = reply {
                        let _ = r.send(result);
                    }
                }
            })
            .expect("spawn the writer thread");
        Writer { tx, taken: AtomicU64::new(0), committed: done_rx }
    }

    /// Queues a job; synchronous, so call it before the handler's first await.
    pub fn submit(&self, job: Job) -> (u64, tokio::sync::oneshot::Receiver<Done>) {
        let ticket = self.taken.fetch_add(1, Ordering::SeqCst) + 1;
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send((ticket, job, Some(tx))).is_err() {
            tracing::error!("the writer thread is gone");
        }
        (ticket, rx)
    }

    /// The last ticket taken: a reader waits for it (synchronous; call before the first await).
    pub fn barrier(&self) -> u64 {
        self.taken.load(Ordering::SeqCst)
    }

    /// Waits until every job up to `ticket` is committed.
    pub async fn wait(&self, ticket: u64) {
        let mut rx = self.committed.clone();
        let _ = rx.wait_for(|&done| done >= ticket).await;
    }
}

/// Runs `f`, and again after a pause while the database is locked by another process (a
/// `lode index` in a terminal, a backup): a busy database delays a save, it does not drop it.
/// Each attempt already waits out SQLite's busy timeout first.
fn retrying_busy<T>(mut f: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let mut pause = std::time::Duration::from_millis(250);
    for _ in 0..4 {
        match f() {
            Err(StoreError::Locked { path }) => {
                tracing::warn!("{} is locked; retrying the save in {pause:?}", path.display());
                std::thread::sleep(pause);
                pause *= 2;
            }
            other => return other,
        }
    }
    f()
}

fn run(store: &mut Store, job: Job) -> Done {
    crate::isolation::fault("writer");
    match job {
        Job::Save { path, bytes } => match retrying_busy(|| store.save_note(&path, &bytes)) {
            Ok(o) => Done::Saved(o),
            Err(e) => Done::Failed(e.to_string()),
        },
        Job::Refresh { path, abs } => match std::fs::read(&abs) {
            Ok(bytes) if bytes.len() as u64 > lode_store::vault::DEFAULT_MAX_FILE_BYTES => {
                Done::Failed(format!("{path} is over the size limit; not indexed"))
            }
            Ok(bytes) if lode_store::vault::looks_binary(&bytes) => Done::Failed(format!("{path} looks binary; not indexed")),
            Ok(bytes) => match retrying_busy(|| store.save_note(&path, &bytes)) {
                Ok(o) => Done::Saved(o),
                Err(e) => Done::Failed(e.to_string()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match retrying_busy(|| store.delete_note(&path)) {
                Ok(d) => Done::Deleted(d),
                Err(e) => Done::Failed(e.to_string()),
            },
            Err(e) => Done::Failed(format!("cannot read {}: {e}", abs.display())),
        },
    }
}
