//! The single writer: every mutation (a save, a file changed or deleted outside the editor, the
//! steps of a vault scan) goes through one thread that owns the write connection.
//!
//! Ordering invariant (tower-lsp runs handlers concurrently, tower-lsp issue #284): a handler
//! takes its ticket synchronously, before its first `.await`. Handlers are first polled in message
//! order, so a save's ticket is taken before any later request starts; a read waits until every
//! ticket taken before it has been committed. A question asked right after a save sees the save.
//!
//! Editor jobs come first: scan work is queued separately, in small batches, and the writer
//! takes an editor job between any two scan steps. A scan step re-reads the file when it is
//! applied, so it never commits bytes older than a save that landed meanwhile.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lode_store::vault::{self, Applied, IndexOptions, IndexReport, Step};
use lode_store::{SaveOutcome, Store, StoreError};
use parking_lot::{Condvar, Mutex};
use tokio::sync::{oneshot, watch};

pub enum Job {
    /// The editor's text of a buffer that has no file on disk (an unsaved or virtual document).
    Save { path: String, bytes: Vec<u8> },
    /// Re-read a note's file from disk: changed → saved, gone → deleted.
    Refresh { path: String },
    /// A file that is no note any more (now gitignored, a symlink, too large): out of the index.
    Forget { path: String },
    /// What a fetch of an external returned: a new snapshot, or the failure.
    Snapshot { url: String, via: lode_store::Via, fetched: Result<lode_externals::Fetched, lode_externals::FetchError> },
}

/// Scan work, queued behind editor jobs.
pub enum Background {
    /// Re-chunk every head (the chunker settings changed).
    Rechunk,
    Steps(Vec<Step>),
    /// Links, chunker settings, full-text merge after a scan.
    Finish(IndexReport),
}

#[derive(Debug, Clone)]
pub enum Done {
    Saved(SaveOutcome),
    Applied(Applied),
    Steps(Vec<Applied>),
    Recorded(lode_externals::Recorded),
    /// Notes re-chunked.
    Rechunked(usize),
    Finished,
    Failed(String),
}

type Reply = oneshot::Sender<Done>;

#[derive(Default)]
struct Queues {
    editor: VecDeque<(u64, Job, Reply)>,
    background: VecDeque<(Background, Reply)>,
    closed: bool,
}

struct Shared {
    queues: Mutex<Queues>,
    ready: Condvar,
}

pub struct Writer {
    shared: Arc<Shared>,
    taken: AtomicU64,
    committed: watch::Receiver<u64>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shared.queues.lock().closed = true;
        self.shared.ready.notify_all();
    }
}

impl Writer {
    /// Starts the writer thread on `store` for the vault at `root`. `after` runs on the writer
    /// thread after each editor job and scan batch (e.g. to wake the embedding worker).
    pub fn start(mut store: Store, root: PathBuf, opts: IndexOptions, after: impl Fn(&Done) + Send + 'static) -> Writer {
        // Checkpoint every 200 pages of log instead of SQLite's 1,000: the commit that pays
        // for a checkpoint copies 0.8 MB instead of 4 MB. On the 100k-note vault this took
        // save p99 from 14–24 ms to 8–14 ms (docs/benchmarks.md).
        if let Err(e) = store.set_wal_autocheckpoint(200) {
            tracing::warn!("WAL checkpoint interval: {e}");
        }
        let shared = Arc::new(Shared { queues: Mutex::new(Queues::default()), ready: Condvar::new() });
        let (done_tx, done_rx) = watch::channel(0u64);
        let queue = shared.clone();
        std::thread::Builder::new()
            .name("lode-writer".into())
            .spawn(move || {
                let editor_job = |store: &mut Store, ticket: u64, job: Job, reply: Reply| {
                    let result = guarded(|| run(store, &root, &opts, job));
                    after(&result);
                    let _ = done_tx.send(ticket);
                    let _ = reply.send(result);
                };
                // Every queued editor job, in order (called between scan steps too).
                let drain_editor = |store: &mut Store| loop {
                    let next = queue.queues.lock().editor.pop_front();
                    match next {
                        Some((ticket, job, reply)) => editor_job(store, ticket, job, reply),
                        None => break,
                    }
                };
                loop {
                    let background = {
                        let mut q = queue.queues.lock();
                        while q.editor.is_empty() && q.background.is_empty() && !q.closed {
                            queue.ready.wait(&mut q);
                        }
                        if q.editor.is_empty() && q.background.is_empty() {
                            return; // closed and drained
                        }
                        if !q.editor.is_empty() {
                            None
                        } else {
                            q.background.pop_front()
                        }
                    };
                    let Some((work, reply)) = background else {
                        drain_editor(&mut store);
                        continue;
                    };
                    let result = match work {
                        Background::Steps(steps) => {
                            // The steps commit in one batch (one commit, one full-text flush). A
                            // waiting editor job ends the batch early: what came before commits,
                            // the job runs on its own, and the rest continue in a new batch. So
                            // a save is never held back by the scan.
                            let mut applied: Vec<Applied> = Vec::with_capacity(steps.len());
                            while applied.len() < steps.len() {
                                let results = vault::apply_batch(
                                    &mut store,
                                    &steps[applied.len()..],
                                    |store, step| {
                                        guarded(|| {
                                            crate::isolation::fault("scan-step");
                                            match retrying_busy(|| vault::apply(store, &root, &opts, step)) {
                                                Ok(a) => Done::Applied(a),
                                                Err(e) => Done::Failed(e.to_string()),
                                            }
                                        })
                                    },
                                    || !queue.queues.lock().editor.is_empty(),
                                );
                                applied.extend(results.into_iter().map(|r| match r {
                                    Done::Applied(a) => a,
                                    Done::Failed(e) => Applied::Skipped(e),
                                    _ => Applied::Nothing,
                                }));
                                drain_editor(&mut store);
                            }
                            Done::Steps(applied)
                        }
                        Background::Rechunk => guarded(|| match retrying_busy(|| store.rechunk_heads(|_, _| {})) {
                            Ok(n) => Done::Rechunked(n),
                            Err(e) => Done::Failed(e.to_string()),
                        }),
                        Background::Finish(report) => guarded(|| match retrying_busy(|| vault::finish(&mut store, &report)) {
                            Ok(()) => Done::Finished,
                            Err(e) => Done::Failed(e.to_string()),
                        }),
                    };
                    after(&result);
                    let _ = reply.send(result);
                }
            })
            .expect("spawn the writer thread");
        Writer { shared, taken: AtomicU64::new(0), committed: done_rx }
    }

    /// Queues an editor job; synchronous, so call it before the handler's first await.
    pub fn submit(&self, job: Job) -> (u64, oneshot::Receiver<Done>) {
        let (tx, rx) = oneshot::channel();
        let mut q = self.shared.queues.lock();
        // The ticket is taken under the queue lock: tickets enter the queue in order.
        let ticket = self.taken.fetch_add(1, Ordering::SeqCst) + 1;
        q.editor.push_back((ticket, job, tx));
        drop(q);
        self.shared.ready.notify_one();
        (ticket, rx)
    }

    /// Queues scan work behind editor jobs. Readers do not wait for it.
    pub fn background(&self, work: Background) -> oneshot::Receiver<Done> {
        let (tx, rx) = oneshot::channel();
        self.shared.queues.lock().background.push_back((work, tx));
        self.shared.ready.notify_one();
        rx
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

/// A panic in one job fails that job only.
fn guarded(f: impl FnOnce() -> Done) -> Done {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| Done::Failed("the writer panicked on this job".into()))
}

/// Runs `f`, and again after a pause while the database is locked by another process (a
/// `lode index` in a terminal, a backup): a busy database delays a save, it does not drop it.
/// Each attempt already waits out SQLite's busy timeout first.
fn retrying_busy<T>(mut f: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let mut pause = std::time::Duration::from_millis(250);
    for _ in 0..4 {
        match f() {
            Err(StoreError::Locked { path }) => {
                tracing::warn!("{} is locked; retrying the write in {pause:?}", path.display());
                std::thread::sleep(pause);
                pause *= 2;
            }
            other => return other,
        }
    }
    f()
}

fn run(store: &mut Store, root: &std::path::Path, opts: &IndexOptions, job: Job) -> Done {
    crate::isolation::fault("writer");
    match job {
        Job::Save { path, bytes } => match retrying_busy(|| store.save_note(&path, &bytes)) {
            Ok(o) => Done::Saved(o),
            Err(e) => Done::Failed(e.to_string()),
        },
        Job::Refresh { path } => match retrying_busy(|| vault::refresh(store, root, opts, &path)) {
            Ok(Applied::Skipped(why)) => Done::Failed(why),
            Ok(a) => Done::Applied(a),
            Err(e) => Done::Failed(e.to_string()),
        },
        Job::Snapshot { url, via, fetched } => match retrying_busy(|| lode_externals::record(store, &url, via, fetched.clone())) {
            Ok(r) => Done::Recorded(r),
            Err(e) => Done::Failed(e.to_string()),
        },
        Job::Forget { path } => match retrying_busy(|| store.delete_note(&path)) {
            Ok(true) => Done::Applied(Applied::Deleted),
            Ok(false) => Done::Applied(Applied::Nothing),
            Err(e) => Done::Failed(e.to_string()),
        },
    }
}
