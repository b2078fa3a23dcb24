//! Files → index: the vault scan (planned on a read connection, applied through the writer),
//! file events (from an editor's watchers, or from our own `notify` watcher when the door has
//! none), and rescans for what single-file events cannot describe (a folder
//! renamed or deleted, an ignore file edited).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use lode_store::vault::{self, IndexReport, NotANote};
use tokio::sync::oneshot;

use crate::report::Level;
use crate::writer::{Background, Done, Job};
use crate::Engine as State;

/// Starts a scan, or — when one is running — asks it to run once more when it ends (so a burst
/// of folder events costs at most one extra scan).
pub fn request_scan(state: Arc<State>) {
    if state.scanning.swap(true, Ordering::SeqCst) {
        state.scan_again.store(true, Ordering::SeqCst);
        return;
    }
    spawn_scan(state);
}

/// The first scan of a vault just opened. A `State` is born `scanning` (so `lode/status` never
/// shows an empty index as finished between the open and the scan's start); this starts the
/// scan that flag promises.
pub(crate) fn first_scan(state: Arc<State>) {
    debug_assert!(state.scanning.load(Ordering::SeqCst));
    spawn_scan(state);
}

/// Runs scans on a thread of their own while `scanning` is set (by the caller) and asked again.
fn spawn_scan(state: Arc<State>) {
    let spawned = std::thread::Builder::new().name("lode-scan".into()).spawn(move || loop {
        state.scan_again.store(false, Ordering::SeqCst);
        // Decided before the progress ends, so a client that sees the end sees `scanning` off.
        let again = scan_once(&state, || {
            if state.scan_again.swap(false, Ordering::SeqCst) {
                return true;
            }
            state.scanning.store(false, Ordering::SeqCst);
            // A request that came in between the check and the store above is not lost.
            state.scan_again.load(Ordering::SeqCst) && !state.scanning.swap(true, Ordering::SeqCst)
        });
        if !again {
            return;
        }
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the scan thread: {e}");
    }
}

/// One scan with its progress; `finish` runs just before the progress ends and says whether to
/// scan again (returned).
fn scan_once(state: &Arc<State>, finish: impl FnOnce() -> bool) -> bool {
    let token = format!("lode/scan/{}", state.scans.fetch_add(1, Ordering::SeqCst));
    let mut bar = state.reporter.begin(&token, "lode: indexing notes", "reading the vault folder".into());
    // A panicking scan still ends its progress and clears `scanning` (the caller's loop).
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::faults::fault("scan");
        // Reading the folder is the first half of the bar, writing what changed the second.
        let bar = std::cell::RefCell::new(bar.as_mut());
        let report = |phase: &str, done: usize, total: usize, base: usize| {
            if let Some(b) = bar.borrow_mut().as_mut() {
                b.report(format!("{phase} {done}/{total} notes"), (base + (done * 50) / total.max(1)) as u32);
            }
        };
        scan_steps(state, |d, t| report("reading", d, t, 0), |d, t| report("indexing", d, t, 50))
    }))
    .unwrap_or_else(|_| Err("the scan panicked (logged); saved notes are still indexed on save".into()));
    // The plan held every note's path and stat twice (the index's and the folder's): at a
    // million notes, hundreds of megabytes freed just now and otherwise kept by the allocator.
    crate::memory::trim();
    state.kick();
    let message = match &outcome {
        Ok(r) => format!(
            "{} notes: {} new, {} updated, {} unchanged, {} renamed, {} deleted",
            r.scanned, r.created, r.updated, r.unchanged, r.renamed, r.deleted
        ),
        Err(e) => format!("indexing failed: {e}"),
    };
    let again = finish();
    if let Some(bar) = bar {
        bar.end(message.clone());
    }
    if outcome.is_err() {
        state.reporter.say(Level::Error, format!("lode: {message}"));
    }
    again
}

/// Plans on a read connection, then applies the steps through the writer in batches. A scan
/// that fails after beginning bulk merging ends it at once (the writer lives on, and so do the
/// editor's saves); ending it is a no-op when none began.
fn scan_steps(state: &State, reading: impl FnMut(usize, usize), progress: impl FnMut(usize, usize)) -> Result<IndexReport, String> {
    let result = scan_steps_writing(state, reading, progress);
    if result.is_err() {
        if let Ok(Done::Failed(e)) = state.writer.background(Background::EndBulk).blocking_recv() {
            tracing::warn!("ending the failed scan's bulk merging: {e}");
        }
    }
    result
}

fn scan_steps_writing(
    state: &State,
    mut reading: impl FnMut(usize, usize),
    mut progress: impl FnMut(usize, usize),
) -> Result<IndexReport, String> {
    let wait = |rx: oneshot::Receiver<Done>| rx.blocking_recv().map_err(|_| "the writer stopped".to_owned());
    let begin_bulk = || -> Result<(), String> {
        if let Done::Failed(e) = wait(state.writer.background(Background::Bulk))? {
            tracing::warn!("the scan writes with FTS5's own merge settings: {e}");
        }
        Ok(())
    };
    let rechunk = state.readers.get()?.chunking_changed().map_err(|e| e.to_string())?;
    let mut rechunked = 0;
    if rechunk {
        // Every head is written again.
        begin_bulk()?;
        match wait(state.writer.background(Background::Rechunk))? {
            Done::Rechunked(n) => rechunked = n,
            Done::Failed(e) => return Err(e),
            _ => {}
        }
    }
    let plan = {
        let reader = state.readers.get()?;
        vault::plan(&reader, &state.root, &state.settings.index, |p| reading(p.done, p.total)).map_err(|e| e.to_string())?
    };
    let writes = plan.writes();
    let mut report = plan.report;
    report.rechunked = rechunked;
    if vault::is_bulk(writes + rechunked, report.scanned) {
        begin_bulk()?;
    }
    let total = plan.steps.len();
    let (mut done, mut last) = (0, Instant::now());
    // A thread of its own reads and chunks the notes a batch or two ahead of the writer, and
    // the writer always has the next batch queued: neither waits on the other's slowest batch
    // (prepared in lockstep, one batch ahead, the 20k-note cold scan took 1.4× `lode index`).
    // A save takes a prepared chunking only for exactly the bytes it saves, so what is indexed
    // is the same. At most two batches are handed over at once, within `state.prechunked`'s
    // capacity.
    let cfg = state.settings.store.chunk;
    // Batches of the one size every scan commits in (`vault::BATCH`, which also sizes the
    // prepared chunkings the writer holds): the writer takes editor jobs between any two steps,
    // so the size only bounds how far the scan runs ahead of the writer.
    let batches: Vec<&[vault::Step]> = plan.steps.chunks(vault::BATCH).collect();
    std::thread::scope(|scope| -> Result<(), String> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<vault::Prepared>>(1);
        let (root, index) = (&state.root, &state.settings.index);
        let producing = batches.clone();
        std::thread::Builder::new()
            .name("lode-prepare".into())
            .spawn_scoped(scope, move || {
                for batch in producing {
                    if tx.send(vault::prepare_steps(root, index, &cfg, batch)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| format!("cannot start the scan's reader thread: {e}"))?;
        let mut in_flight: std::collections::VecDeque<(&[vault::Step], oneshot::Receiver<Done>)> = Default::default();
        let mut failed = None;
        let mut settle = |batch: &[vault::Step], rx: oneshot::Receiver<Done>, failed: &mut Option<String>| -> Result<(), String> {
            match wait(rx)? {
                Done::Steps(applied) => {
                    for (step, a) in batch.iter().zip(applied) {
                        vault::tally(&mut report, step, a);
                    }
                }
                Done::Failed(e) => {
                    failed.get_or_insert(e);
                }
                _ => {}
            }
            done += batch.len();
            if done == total || last.elapsed().as_millis() >= 200 {
                last = Instant::now();
                progress(done, total);
            }
            Ok(())
        };
        for batch in &batches {
            // The reader thread lives as long as this receiver; a batch it could not prepare
            // (it panicked) is chunked by its saves.
            for p in rx.recv().unwrap_or_default() {
                p.hand_over(&state.prechunked, &cfg);
            }
            in_flight.push_back((batch, state.writer.background(Background::Steps(batch.to_vec()))));
            if in_flight.len() >= 2 {
                let (b, r) = in_flight.pop_front().expect("two in flight");
                settle(b, r, &mut failed)?;
                if failed.is_some() {
                    break;
                }
            }
        }
        // A failure ends the scan; the batch already queued behind it is still counted.
        while let Some((b, r)) = in_flight.pop_front() {
            settle(b, r, &mut failed)?;
        }
        drop(rx);
        failed.map_or(Ok(()), Err)
    })?;
    match wait(state.writer.background(Background::Finish(report.clone())))? {
        Done::Failed(e) => Err(e),
        _ => Ok(report),
    }
}

/// What one file event asks of the index.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Re-read the note's file (changed → saved, gone → deleted).
    Refresh(String),
    /// A markdown file that is no note (any more): make sure it is not in the index.
    Forget(String),
    /// A folder appeared or vanished, or an ignore file changed: scan the vault again.
    Rescan,
    Ignore,
}

/// Classifies an event on `path` (`is_note_folder` tells whether live notes lie under a
/// vault-relative folder). Disk is the truth: the same action for created, changed, deleted.
pub(crate) fn classify(root: &Path, path: &Path, is_note_folder: impl Fn(&str) -> bool) -> Action {
    match vault::indexable(root, path) {
        // A vanished folder named like a note (`ideas.md/`), with notes under it.
        Ok(rel) if !root.join(&rel).exists() && is_note_folder(&rel) => Action::Rescan,
        Ok(rel) => Action::Refresh(rel),
        Err(NotANote::Hidden(_) | NotANote::Outside(_)) => Action::Ignore,
        Err(
            NotANote::Ignored(rel) | NotANote::Symlink(rel) | NotANote::TooLarge(rel, _) | NotANote::Binary(rel) | NotANote::Utf16(rel),
        ) => Action::Forget(rel),
        Err(NotANote::NotMarkdown(rel)) => {
            let name = rel.rsplit('/').next().unwrap_or(&rel);
            if name == ".gitignore" || name == ".ignore" {
                return Action::Rescan;
            }
            if rel.split('/').any(|p| p.starts_with('.')) {
                return Action::Ignore;
            }
            // A folder now, or a vanished path under which notes were indexed.
            let abs = root.join(&rel);
            if abs.is_dir() || (!abs.exists() && is_note_folder(&rel)) {
                Action::Rescan
            } else {
                Action::Ignore
            }
        }
    }
}

/// Queues file events as one writer job: each is classified there ([`classify`]) and applied
/// in order. Classifying needs the disk and the index, and the caller may be the message loop;
/// the job's ticket is taken now, so a request that follows the events sees them applied.
/// Returns the receiver, to wait for before refreshing diagnostics; pass what it yields to
/// [`after_paths`].
pub fn on_paths(state: &Arc<State>, paths: impl IntoIterator<Item = PathBuf>) -> Option<oneshot::Receiver<Done>> {
    let mut seen = std::collections::HashSet::new();
    let paths: Vec<PathBuf> = paths.into_iter().filter(|p| seen.insert(p.clone())).collect();
    if paths.is_empty() {
        return None;
    }
    Some(state.writer.submit(Job::Paths { paths }).1)
}

/// What applied file events ask for next: a rescan (a folder appeared or vanished, an ignore
/// file changed).
pub fn after_paths(state: &Arc<State>, done: &Done) {
    if let Done::Paths { rescan: true, .. } = done {
        request_scan(state.clone());
    }
}

/// Without any file watcher (the client registers none and the server's cannot start, e.g. at
/// Linux's inotify watch limit): the user is told once, and the vault is scanned again every
/// [`RESCAN_WITHOUT_WATCHER`] (a scan of unchanged files only stats them: 0.6 s for 100,000
/// notes). Runs on the would-be watcher's thread, for the life of the process.
fn rescan_every(state: &Arc<State>, why: &str) {
    let every = rescan_interval();
    let message = format!(
        "lode cannot watch {} for changes ({why}; on Linux, raising fs.inotify.max_user_watches helps): files changed outside the editor are picked up by a scan every {} s",
        state.root.display(),
        every.as_secs()
    );
    tracing::warn!("{message}");
    state.reporter.say(Level::Warning, message);
    loop {
        std::thread::sleep(every);
        request_scan(state.clone());
    }
}

/// How often a vault without a watcher is scanned. Debug builds read `LODE_RESCAN_SECS` (tests).
const RESCAN_WITHOUT_WATCHER: std::time::Duration = std::time::Duration::from_secs(60);

fn rescan_interval() -> std::time::Duration {
    let from_env = cfg!(debug_assertions).then(|| std::env::var("LODE_RESCAN_SECS").ok()?.parse().ok()).flatten();
    from_env.map_or(RESCAN_WITHOUT_WATCHER, std::time::Duration::from_secs)
}

/// The server's own watcher, for clients that cannot register file watchers: events go through
/// the same [`on_paths`] as the client's. Runs on its own thread (setting up a recursive watch
/// walks the vault) for the life of the process.
pub(crate) fn watch_vault(state: Arc<State>) {
    use notify::{RecursiveMode, Watcher};
    let handle = tokio::runtime::Handle::current();
    let spawned = std::thread::Builder::new().name("lode-watch".into()).spawn(move || {
        let _rt = handle.enter();
        let (tx, rx) = std::sync::mpsc::channel::<notify::Result<notify::Event>>();
        // lode's own folder (the store, its log, materialized versions) holds no notes, and
        // the writer writes its log many times a second while a scan runs: each write was an
        // event, and each burst of them a writer job that cut the scan's batch short (the
        // 20k-note cold scan took 1.6× `lode index`). Its watches go, and an event from it
        // (a watch added again when the folder is created anew) is dropped here.
        let own = state.settings.db.parent().filter(|d| d.starts_with(&state.root) && *d != state.root).map(Path::to_path_buf);
        let watching = if crate::faults::fault_set("watch") {
            Err("injected failure".to_owned())
        } else {
            notify::recommended_watcher(tx).map_err(|e| e.to_string()).and_then(|mut w| {
                w.watch(&state.root, RecursiveMode::Recursive).map_err(|e| e.to_string())?;
                if let Some(own) = &own {
                    // Not watched when it did not exist yet: nothing to take back.
                    let _ = w.unwatch(own);
                }
                Ok(w)
            })
        };
        let watcher = match watching {
            Ok(w) => w,
            Err(e) => return rescan_every(&state, &e),
        };
        while let Ok(first) = rx.recv() {
            // Coalesce a burst (a checkout touches many files at once).
            let mut events = vec![first];
            while let Ok(e) = rx.recv_timeout(std::time::Duration::from_millis(50)) {
                events.push(e);
                if events.len() >= 10_000 {
                    break;
                }
            }
            let mut paths = Vec::new();
            let mut overflow = false;
            for e in events {
                match e {
                    Ok(ev) => {
                        overflow |= ev.need_rescan();
                        if !matches!(ev.kind, notify::EventKind::Access(_)) {
                            paths.extend(ev.paths.into_iter().filter(|p| !own.as_ref().is_some_and(|o| p.starts_with(o))));
                        }
                    }
                    Err(err) => {
                        tracing::warn!("file watcher: {err}");
                        overflow = true;
                    }
                }
            }
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if let Some(done) = on_paths(&state, paths) {
                    if let Ok(done) = done.blocking_recv() {
                        after_paths(&state, &done);
                    }
                }
                if overflow {
                    request_scan(state.clone());
                }
            }));
            if r.is_err() {
                tracing::error!("handling file events panicked; the watcher goes on");
            }
        }
        drop(watcher);
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the watcher thread: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_events_become_the_right_index_work() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for (p, body) in [("a.md", "x"), ("dir/b.md", "x"), ("ignored/c.md", "x"), (".lode/versions/v.md", "x"), ("img.png", "x")] {
            let f = root.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, body).unwrap();
        }
        std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
        let none = |_: &str| false;
        let some = |rel: &str| rel == "old";
        let c = |p: &str, f: &dyn Fn(&str) -> bool| classify(&root, &root.join(p), f);
        assert_eq!(c("a.md", &none), Action::Refresh("a.md".into()));
        assert_eq!(c("gone.md", &none), Action::Refresh("gone.md".into()), "a deleted note is refreshed (→ deleted)");
        assert_eq!(c("ignored/c.md", &none), Action::Forget("ignored/c.md".into()));
        assert_eq!(c(".lode/versions/v.md", &none), Action::Ignore, "materialized versions are never notes");
        assert_eq!(c(".lode/lode.db-wal", &none), Action::Ignore);
        assert_eq!(c("dir", &none), Action::Rescan, "a folder appeared (or was renamed here)");
        assert_eq!(c("old", &some), Action::Rescan, "a folder of notes vanished");
        assert_eq!(c("old", &none), Action::Ignore, "a vanished path with no notes under it");
        assert_eq!(c("img.png", &none), Action::Ignore);
        assert_eq!(c(".gitignore", &none), Action::Rescan);
        assert_eq!(c("dir/.ignore", &none), Action::Rescan);
        // Folders named like notes.
        std::fs::create_dir_all(root.join("ideas.md")).unwrap();
        assert_eq!(c("ideas.md", &none), Action::Rescan, "a folder appeared, whatever its name");
        let under = |rel: &str| rel == "gone.md";
        assert_eq!(c("gone.md", &under), Action::Rescan, "a folder named like a note vanished with notes under it");
    }
}
