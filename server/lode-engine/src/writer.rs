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

/// How long the writer waits with nothing to do before it checkpoints: longer than the gap
/// between two jobs of a burst, far shorter than a pause in typing.
const IDLE: std::time::Duration = std::time::Duration::from_millis(50);
/// Frames of log after which the writer asks for a checkpoint without waiting to be idle: a
/// writer that is never idle (a burst of saves, a checkout storm, a scan) keeps the log short
/// all the same, and the checkpoint's fsyncs run beside it, not inside a save.
const KICK_FRAMES: u32 = 100;
/// Frames of log after which a commit checkpoints itself: only when the checkpointer cannot
/// keep up (a stalled disk). It used to be 200, with no kick: in a burst the writer never idled,
/// so saves paid 8-24 ms fsyncs of their own (docs/benchmarks.md, "A syscall trace").
const BACKSTOP_FRAMES: u32 = 2000;
/// Size the log file is cut back to after a checkpoint (a cold scan grows it to hundreds of MB).
const LOG_LIMIT_BYTES: i64 = 64 << 20;
/// While a scan writes in bulk (`Background::Bulk` to `EndBulk` or `Finish`): the kick and the
/// backstop, in frames. A checkpoint after every batch of a scan, on a second thread of a
/// two-core machine, took CPU from the scan's reader and writer (the 100k cold scan: 115.9 s,
/// 100.7 s with these); a save in the meantime still never checkpoints itself.
const BULK_KICK_FRAMES: u32 = 16_384;
const BULK_BACKSTOP_FRAMES: u32 = 65_536;

/// Sets the kick and the backstop for bulk writing or back to their defaults.
fn bulk_log(store: &Store, kick: &LogKick, bulk: bool) {
    let (at, backstop) = if bulk { (BULK_KICK_FRAMES, BULK_BACKSTOP_FRAMES) } else { (KICK_FRAMES, BACKSTOP_FRAMES) };
    kick.at.store(at, std::sync::atomic::Ordering::Relaxed);
    store.watch_log(backstop);
}

/// A save the store has not taken yet, as `lode/status` and the note's diagnostic show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Unsaved {
    pub path: String,
    pub error: String,
    /// When it first failed (ms since the epoch).
    pub since_ms: i64,
    pub attempts: u32,
}

/// The saves the writer is holding, shared with readers (status, diagnostics, answers).
pub type UnsavedList = Arc<Mutex<Vec<Unsaved>>>;

/// First pause before a deferred save is tried again; it doubles up to [`RETRY_MAX`], and any
/// write that succeeds meanwhile tries it at once (the cause is likely gone).
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(500);
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Clone)]
pub enum Job {
    /// The editor's text of a buffer that has no file on disk (an unsaved or virtual document).
    Save { path: String, bytes: Vec<u8> },
    /// Re-read a note's file from disk: changed → saved, gone → deleted.
    /// Index the file at `path`; `saved`: the text the editor saved there (see
    /// `vault::refresh_saved`), when the job comes from a `didSave` that carried it.
    Refresh { path: String, saved: Option<String> },
    /// File events (the client's watcher or the server's): each path classified by
    /// [`crate::scan::classify`] and applied, in order.
    Paths { paths: Vec<PathBuf> },
    /// What a fetch of an external returned: a new snapshot, or the failure.
    Snapshot { url: String, via: lode_store::Via, fetched: Result<lode_externals::Fetched, lode_externals::FetchError> },
}

/// Scan work, queued behind editor jobs.
pub enum Background {
    /// Re-chunk every head (the chunker settings changed).
    Rechunk,
    /// A scan that writes most of the vault begins ([`lode_store::Store::begin_bulk`]).
    Bulk,
    /// A scan that began bulk work stopped before its `Finish`: merge and put FTS5's own
    /// settings back, so the editor's saves do not go on with bulk merging.
    EndBulk,
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
    /// A save the store could not take (disk full, locked past the busy timeout, I/O): the
    /// writer keeps it and retries it until it lands ([`Done::Landed`]); never dropped.
    Deferred(String),
    /// A deferred save landed at last (the note's vault-relative path).
    Landed(String),
    /// File events applied: whether one asks for a rescan, and what could not be applied.
    Paths {
        rescan: bool,
        failed: Vec<String>,
    },
}

type Reply = oneshot::Sender<Done>;

/// What the writer thread does next.
enum Next {
    Editor,
    Background(Background, Reply),
    /// Nothing queued for [`IDLE`] since the last commit: checkpoint.
    Idle,
    /// Deferred saves are due another try.
    Retry,
}

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
    unsaved: UnsavedList,
    log_kick: LogKick,
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
    pub fn start(store: Store, root: PathBuf, opts: IndexOptions, after: impl Fn(&Done) + Send + 'static) -> Writer {
        Writer::start_with_idle(store, root, opts, IDLE, after)
    }

    /// [`Writer::start`], checkpointing after `idle` without work.
    fn start_with_idle(
        mut store: Store,
        root: PathBuf,
        opts: IndexOptions,
        idle: std::time::Duration,
        after: impl Fn(&Done) + Send + 'static,
    ) -> Writer {
        // Checkpoints start while the writer is idle, or once the log is long, on the
        // checkpointer's connection, not inside a save (retries of an incomplete one may
        // overlap later saves: they run beside the writer, never in its way). A save that paid
        // for one took 15-30 ms instead of 4-6 on the 100k-note vault (docs/benchmarks.md); a
        // checkpoint on commit stays, far out, as a backstop for a checkpointer that cannot
        // keep up.
        if let Err(e) = log_settings(&store) {
            tracing::warn!("WAL settings: {e}");
        }
        let checkpointer = Checkpointer::start(&store, idle);
        let log_kick = LogKick { to: checkpointer.kick.clone(), at: std::sync::Arc::new(std::sync::atomic::AtomicU32::new(KICK_FRAMES)) };
        let own_kick = log_kick.clone();
        let shared = Arc::new(Shared { queues: Mutex::new(Queues::default()), ready: Condvar::new() });
        let (done_tx, done_rx) = watch::channel(0u64);
        let queue = shared.clone();
        let unsaved: UnsavedList = Arc::default();
        let unsaved_list = unsaved.clone();
        std::thread::Builder::new()
            .name("lode-writer".into())
            .spawn(move || {
                // Saves the store could not take, with the jobs that retry them (in order), and
                // when they are next tried.
                let deferred: std::cell::RefCell<Vec<Job>> = std::cell::RefCell::default();
                let retry = std::cell::Cell::new((std::time::Instant::now(), RETRY_FIRST));
                // Every deferred save tried once more, in order; what lands is reported through
                // `after`. A retry that fails again stays, with its new error.
                let retry_deferred = |store: &mut Store| {
                    let jobs = std::mem::take(&mut *deferred.borrow_mut());
                    if jobs.is_empty() {
                        return;
                    }
                    let mut kept = Vec::new();
                    let mut landed = false;
                    for job in jobs {
                        let result = guarded(|| run(store, &root, &opts, job.clone()));
                        let mut list = unsaved_list.lock();
                        match result {
                            Done::Deferred(e) => {
                                if let Some(u) = list.get_mut(kept.len()) {
                                    u.error = e;
                                    u.attempts += 1;
                                }
                                kept.push(job);
                            }
                            other => {
                                landed = true;
                                let path = list.remove(kept.len()).path;
                                drop(list);
                                if let Done::Failed(e) = other {
                                    // No longer a note (made binary or too big meanwhile): the
                                    // file's own state decided it; nothing is held back.
                                    tracing::warn!("a deferred save of {path} ended: {e}");
                                }
                                after_guarded(&after, &Done::Landed(path));
                            }
                        }
                    }
                    *deferred.borrow_mut() = kept;
                    let pause = if landed { RETRY_FIRST } else { (retry.get().1 * 2).min(RETRY_MAX) };
                    retry.set((std::time::Instant::now() + pause, pause));
                };
                let editor_job = |store: &mut Store, ticket: u64, job: Job, reply: Reply| {
                    let start = std::time::Instant::now();
                    let sched = schedstat();
                    let kept = matches!(job, Job::Save { .. } | Job::Refresh { .. }).then(|| job.clone());
                    let result = guarded(|| run(store, &root, &opts, job));
                    if let (Done::Deferred(e), Some(job)) = (&result, kept) {
                        let path = match &job {
                            Job::Save { path, .. } | Job::Refresh { path, .. } => path.clone(),
                            _ => String::new(),
                        };
                        tracing::warn!("the save of {path} is kept and retried: {e}");
                        unsaved_list.lock().push(Unsaved { path, error: e.clone(), since_ms: lode_store::now_ms(), attempts: 1 });
                        deferred.borrow_mut().push(job);
                        if deferred.borrow().len() == 1 {
                            retry.set((std::time::Instant::now() + RETRY_FIRST, RETRY_FIRST));
                        }
                    }
                    let (ran, waited) = match (sched, schedstat()) {
                        (Some(a), Some(b)) => ((b.0 - a.0) as f64 / 1e6, (b.1 - a.1) as f64 / 1e6),
                        _ => (f64::NAN, f64::NAN),
                    };
                    tracing::debug!(target: "lode_engine::writer", "job {ticket}: {:.2} ms (on CPU {ran:.2} ms, runnable but waiting {waited:.2} ms)", start.elapsed().as_secs_f64() * 1000.0);
                    // Readers wait for this ticket: it is marked done whatever `after` does.
                    let _ = done_tx.send(ticket);
                    own_kick.kick_if_long();
                    let wrote = wrote(&result);
                    after_guarded(&after, &result);
                    let _ = reply.send(result);
                    // A write that succeeded: whatever stopped the deferred saves is likely gone.
                    if wrote {
                        retry_deferred(store);
                    }
                };
                // Every queued editor job, in order (called between scan steps too).
                let drain_editor = |store: &mut Store| loop {
                    let next = queue.queues.lock().editor.pop_front();
                    match next {
                        Some((ticket, job, reply)) => editor_job(store, ticket, job, reply),
                        None => break,
                    }
                };
                // Whether work ran since the checkpointer was last asked to copy the log back.
                let mut unflushed = false;
                loop {
                    let next = {
                        let mut q = queue.queues.lock();
                        loop {
                            if !q.editor.is_empty() {
                                break Next::Editor;
                            }
                            if let Some((work, reply)) = q.background.pop_front() {
                                break Next::Background(work, reply);
                            }
                            if q.closed {
                                return; // closed and drained
                            }
                            let due = (!deferred.borrow().is_empty()).then(|| retry.get().0);
                            if due.is_some_and(|d| d <= std::time::Instant::now()) {
                                break Next::Retry;
                            }
                            let until_due = due.map(|d| d.saturating_duration_since(std::time::Instant::now()));
                            let wait = match (unflushed, until_due) {
                                (false, None) => None,
                                (true, None) => Some(idle),
                                (false, Some(d)) => Some(d),
                                (true, Some(d)) => Some(d.min(idle)),
                            };
                            match wait {
                                None => queue.ready.wait(&mut q),
                                Some(w) => {
                                    if queue.ready.wait_for(&mut q, w).timed_out() && q.editor.is_empty() && q.background.is_empty() {
                                        if due.is_some_and(|d| d <= std::time::Instant::now()) {
                                            break Next::Retry;
                                        }
                                        if unflushed && w == idle {
                                            break Next::Idle;
                                        }
                                    }
                                }
                            }
                        }
                    };
                    let (work, reply) = match next {
                        Next::Idle => {
                            unflushed = !checkpointer.kick(&store);
                            continue;
                        }
                        Next::Retry => {
                            unflushed = true;
                            retry_deferred(&mut store);
                            continue;
                        }
                        Next::Editor => {
                            unflushed = true;
                            drain_editor(&mut store);
                            continue;
                        }
                        Next::Background(work, reply) => {
                            unflushed = true;
                            (work, reply)
                        }
                    };
                    // Whatever panics in here (the batch's own begin and end included) fails
                    // this piece of scan work only; the writer thread lives on.
                    let result = guarded(|| match work {
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
                                            crate::faults::fault("scan-step");
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
                        Background::Bulk => guarded(|| match retrying_busy(|| store.begin_bulk()) {
                            Ok(()) => {
                                bulk_log(&store, &own_kick, true);
                                Done::Finished
                            }
                            Err(e) => Done::Failed(e.to_string()),
                        }),
                        Background::EndBulk => guarded(|| {
                            bulk_log(&store, &own_kick, false);
                            match retrying_busy(|| store.end_bulk(false)) {
                                Ok(()) => Done::Finished,
                                Err(e) => Done::Failed(e.to_string()),
                            }
                        }),
                        Background::Finish(report) => guarded(|| {
                            bulk_log(&store, &own_kick, false);
                            match retrying_busy(|| vault::finish(&mut store, &report)) {
                                Ok(()) => Done::Finished,
                                Err(e) => Done::Failed(e.to_string()),
                            }
                        }),
                    });
                    // A job that panicked inside a batch never ended it, and every later write
                    // would join that batch: what it wrote commits, as a failed re-chunk's does.
                    if store.in_batch() {
                        tracing::warn!("a background job left its batch open; committing it");
                        if let Err(e) = store.end_batch() {
                            tracing::warn!("ending the batch: {e}");
                        }
                    }
                    own_kick.kick_if_long();
                    let wrote = wrote(&result);
                    after_guarded(&after, &result);
                    let _ = reply.send(result);
                    if wrote {
                        retry_deferred(&mut store);
                    }
                }
            })
            .expect("spawn the writer thread");
        Writer { shared, unsaved, log_kick, taken: AtomicU64::new(0), committed: done_rx }
    }

    /// The saves the store has not taken yet (kept and retried by the writer).
    pub fn unsaved(&self) -> Vec<Unsaved> {
        self.unsaved.lock().clone()
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

    /// What another connection that writes (the vector thread's) calls after its commits, so
    /// its log is checkpointed beside it too (see [`LogKick`]).
    pub fn log_kick(&self) -> LogKick {
        self.log_kick.clone()
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

/// Copies the log back into the database on a connection of its own, so that a save arriving
/// meanwhile is not queued behind it: a checkpoint takes 1-10 ms on the 100k-note vault, and
/// 20-550 ms when the disk stalls on its fsync (docs/benchmarks.md). SQLite lets a checkpoint
/// run beside a writer; the writer's own checkpoint on commit (the backstop) then finds the
/// checkpoint lock taken and skips, instead of making the save wait.
struct Checkpointer {
    kick: Option<std::sync::mpsc::Sender<()>>,
}

impl Checkpointer {
    fn start(store: &Store, idle: std::time::Duration) -> Checkpointer {
        let opts = lode_store::StoreOptions { cache_kib: 256, ..Default::default() };
        let own = match Store::open(store.path(), opts) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("checkpoints run on the writer: {e}");
                return Checkpointer { kick: None };
            }
        };
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new().name("lode-checkpoint".into()).spawn(move || {
            while rx.recv().is_ok() {
                // Kicks that came before this pass are answered by it; one that comes during it
                // stays queued and asks for another (the pass copies only what was logged when
                // it started).
                while rx.try_recv().is_ok() {}
                // A reader still on an older snapshot holds pages back: again after a pause that
                // doubles up to 2 s (or at the next kick), until the whole log is copied.
                let mut pause = idle;
                while !checkpoint(&own) {
                    match rx.recv_timeout(pause) {
                        Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                    pause = (pause * 2).min(std::time::Duration::from_secs(2));
                }
            }
        });
        match spawned {
            Ok(_) => Checkpointer { kick: Some(tx) },
            Err(e) => {
                tracing::warn!("checkpoints run on the writer: {e}");
                Checkpointer { kick: None }
            }
        }
    }

    /// Asks for a checkpoint; without a checkpointer thread, the writer's own connection runs
    /// one. False when that one was incomplete: the writer tries again at its next idle spell.
    fn kick(&self, store: &Store) -> bool {
        let sent = self.kick.as_ref().is_some_and(|k| k.send(()).is_ok());
        sent || checkpoint(store)
    }
}

/// Asks the checkpointer thread for a checkpoint when this thread's last commit left the log
/// at [`KICK_FRAMES`] or more (never runs one itself: that is the backstop's job). The writer
/// calls it after each job, the vector thread after each round: without it, the vector
/// thread's commits would grow the log to the backstop while the writer idles.
#[derive(Clone)]
pub struct LogKick {
    to: Option<std::sync::mpsc::Sender<()>>,
    /// Frames at which to kick: [`KICK_FRAMES`], or [`BULK_KICK_FRAMES`] while a scan writes
    /// in bulk (shared by the writer and the vector thread).
    at: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl LogKick {
    pub fn kick_if_long(&self) {
        if lode_store::log_frames() >= self.at.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(k) = &self.to {
                let _ = k.send(());
            }
        }
    }
}

/// Whether the log was copied back whole (a panic or an error counts as done: the next idle
/// spell tries again).
fn checkpoint(store: &Store) -> bool {
    let start = std::time::Instant::now();
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match store.checkpoint() {
        Ok((log, copied)) => copied >= log,
        Err(e) => {
            tracing::debug!("checkpoint: {e}");
            true
        }
    }))
    .unwrap_or(true);
    tracing::debug!(target: "lode_engine::writer", "checkpoint: {:.2} ms", start.elapsed().as_secs_f64() * 1000.0);
    done
}

/// The log settings of every connection that writes (the writer's, the vector thread's).
pub(crate) fn log_settings(store: &Store) -> Result<(), StoreError> {
    store.watch_log(BACKSTOP_FRAMES);
    store.set_journal_size_limit(LOG_LIMIT_BYTES)
}

/// This thread's time on CPU and time runnable but waiting for one, in ns (Linux
/// `/proc/thread-self/schedstat`), when the writer's log is on: what a slow job spent its time on.
fn schedstat() -> Option<(u64, u64)> {
    if !tracing::enabled!(target: "lode_engine::writer", tracing::Level::DEBUG) {
        return None;
    }
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut it = s.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// The caller's hook after a job; a panic in it is logged, not the writer's end.
fn after_guarded(after: &impl Fn(&Done), done: &Done) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| after(done))).is_err() {
        tracing::warn!("the writer's after-job hook panicked");
    }
}

/// Whether a job wrote something: the store takes writes again.
fn wrote(done: &Done) -> bool {
    matches!(done, Done::Saved(_) | Done::Applied(_) | Done::Steps(_) | Done::Recorded(_) | Done::Rechunked(_) | Done::Finished)
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
    // The injected writer fault fires on an editor's save, not on whatever job comes first: the
    // server's own watcher may deliver the same file's event before the save arrives.
    if matches!(job, Job::Save { .. } | Job::Refresh { .. }) {
        crate::faults::fault("writer");
    }
    match job {
        // A buffer with no file (its text came with didSave) passes the same size and binary
        // checks as a file; one that fails them is no note, and leaves the index.
        // A save the store cannot take after SQLite's busy timeout is deferred, not retried
        // here: the writer keeps it and tries again later, so the jobs behind it (and the
        // readers waiting for them) are not held up for the whole retry window.
        Job::Save { path, bytes } => match vault::check_bytes(&path, &bytes, opts.max_file_bytes) {
            Err(why) => match store.delete_note(&path) {
                Ok(_) => Done::Failed(why.to_string()),
                Err(e) => Done::Deferred(e.to_string()),
            },
            Ok(()) => match store.save_note(&path, &bytes) {
                Ok(o) => Done::Saved(o),
                Err(e) => Done::Deferred(e.to_string()),
            },
        },
        Job::Refresh { path, saved } => match match &saved {
            Some(text) => vault::refresh_saved(store, root, opts, &path, text),
            None => vault::refresh(store, root, opts, &path),
        } {
            Ok(Applied::Skipped(why)) => Done::Failed(why),
            Ok(a) => Done::Applied(a),
            Err(e) => Done::Deferred(e.to_string()),
        },
        Job::Snapshot { url, via, fetched } => match retrying_busy(|| lode_externals::record(store, &url, via, fetched.clone())) {
            Ok(r) => Done::Recorded(r),
            Err(e) => Done::Failed(e.to_string()),
        },
        Job::Paths { paths } => {
            use crate::scan::{classify, Action};
            let (mut rescan, mut failed) = (false, Vec::new());
            for path in paths {
                tracing::debug!("file event: {}", path.display());
                // One path that panics fails alone; a rescan then puts right what it missed.
                let one = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    match classify(root, &path, |rel| store.any_note_under(rel).unwrap_or(true)) {
                        Action::Refresh(rel) => Some(retrying_busy(|| vault::refresh(store, root, opts, &rel))),
                        Action::Forget(rel) => Some(retrying_busy(|| store.delete_note(&rel)).map(|_| Applied::Nothing)),
                        Action::Rescan => None,
                        Action::Ignore => Some(Ok(Applied::Nothing)),
                    }
                }));
                match one {
                    Ok(None) => rescan = true,
                    Ok(Some(Ok(Applied::Skipped(why)))) => failed.push(why),
                    Ok(Some(Err(e))) => failed.push(e.to_string()),
                    Ok(Some(Ok(_))) => {}
                    Err(_) => {
                        failed.push(format!("{}: applying the file event panicked", path.display()));
                        rescan = true;
                    }
                }
            }
            Done::Paths { rescan, failed }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (frames in the log, frames copied back into the database), read from the WAL index
    /// (`-shm`) the way SQLite lays it out: `mxFrame` at byte 16 of the header, `nBackfill` at
    /// byte 96, native byte order. Reading it checkpoints nothing, unlike `PRAGMA wal_checkpoint`.
    fn log_frames(db: &std::path::Path) -> (u32, u32) {
        let shm = std::fs::read(db.with_extension("db-shm")).expect("the WAL index exists");
        let at = |i: usize| u32::from_ne_bytes(shm[i..i + 4].try_into().unwrap());
        (at(16), at(96))
    }

    /// A writer on a new database whose log starts empty (the schema's pages copied back),
    /// checkpointing after `idle` without work: (its folder, the database, the writer).
    fn writer_idling(idle: std::time::Duration) -> (tempfile::TempDir, PathBuf, Writer) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("lode.db");
        let store = Store::open(&db, lode_store::StoreOptions::default()).unwrap();
        store.checkpoint().unwrap();
        let writer = Writer::start_with_idle(store, dir.path().to_path_buf(), IndexOptions::default(), idle, |_| {});
        (dir, db, writer)
    }

    #[test]
    fn the_log_is_checkpointed_while_the_writer_is_idle_not_inside_a_save() {
        // The save below stays under the backstop; a long idle spell leaves time to look at
        // the log before it is copied.
        let (_dir, db, writer) = writer_idling(std::time::Duration::from_millis(500));
        let body: String = (0..40).map(|i| format!("Paragraph {i} of a note saved twice.\n\n")).collect();
        let (_, rx) = writer.submit(Job::Save { path: "a.md".into(), bytes: format!("# A\n\n{body}").into_bytes() });
        assert!(matches!(rx.blocking_recv(), Ok(Done::Saved(_))));
        // Right after the save, its pages are in the log, not yet in the database: the save did
        // not pay for a checkpoint (a small save stays under the backstop).
        let (frames, copied) = log_frames(&db);
        assert!(frames > 0 && copied < frames, "log after the save: {frames} frames, {copied} copied");
        // Idle: the writer checkpoints on its own.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (frames, copied) = log_frames(&db);
            if frames > 0 && copied == frames {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "idle writer never checkpointed: {frames} frames, {copied} copied");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // The next save starts the log over, and is found.
        let (_, rx) = writer.submit(Job::Save { path: "b.md".into(), bytes: b"# B\n\nAnother note.\n".to_vec() });
        assert!(matches!(rx.blocking_recv(), Ok(Done::Saved(_))));
        let reader = Store::open(&db, lode_store::StoreOptions { read_only: true, ..Default::default() }).unwrap();
        let found = reader.search("another note", &lode_store::SearchOptions::default()).unwrap();
        assert_eq!(found.hits.first().map(|h| h.path.as_str()), Some("b.md"));
    }

    /// A writer that never idles (here: idle spells of an hour) still has its log copied back
    /// once it passes [`KICK_FRAMES`], by the checkpointer, long before the backstop.
    #[test]
    fn a_busy_writer_has_its_log_checkpointed_beside_it() {
        let (_dir, db, writer) = writer_idling(std::time::Duration::from_secs(3600));
        let mut saved = 0;
        // Saves until the log passes the kick (each writes a few dozen frames at most), far
        // below the backstop.
        loop {
            let body: String = (0..20).map(|i| format!("Paragraph {i} of note {saved}.\n\n")).collect();
            let (_, rx) = writer.submit(Job::Save { path: format!("n{saved}.md"), bytes: format!("# N{saved}\n\n{body}").into_bytes() });
            assert!(matches!(rx.blocking_recv(), Ok(Done::Saved(_))));
            saved += 1;
            assert!(saved < 200, "the log never reached {KICK_FRAMES} frames");
            let (frames, _) = log_frames(&db);
            assert!(frames < BACKSTOP_FRAMES / 2, "{frames} frames after {saved} saves");
            if frames >= KICK_FRAMES + 10 {
                break;
            }
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (frames, copied) = log_frames(&db);
            if copied > 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "a busy writer's log was never checkpointed: {frames} frames, {copied} copied");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
