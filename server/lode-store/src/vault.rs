//! Vault indexing: walks a folder of markdown notes (respecting `.gitignore`), saves what changed,
//! detects renames by content, marks vanished notes deleted, and reports what it skipped and why.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::store::{DiskStat, SaveStatus, Store};

pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Notes written in one scan from which it is bulk work (see [`is_bulk`]).
const BULK_MIN_NOTES: usize = 200;

/// Whether a scan writing `writes` notes of a vault of `scanned` is bulk work: full-text
/// segments merged sixteen at a time while it runs ([`Store::begin_bulk`]), every full-text
/// index merged whole when it ends. Only when it writes a tenth of the vault or more: merging
/// whole rewrites the index, which for 200 changed notes of a million would cost more than
/// the notes.
pub fn is_bulk(writes: usize, scanned: usize) -> bool {
    writes >= BULK_MIN_NOTES && writes.saturating_mul(10) >= scanned
}

#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// Files larger than this are skipped with a warning.
    pub max_file_bytes: u64,
    /// Whether vanished notes are marked deleted (off when indexing a subset).
    pub delete_missing: bool,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions { max_file_bytes: DEFAULT_MAX_FILE_BYTES, delete_missing: true }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct IndexReport {
    pub scanned: usize,
    pub created: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub renamed: usize,
    pub deleted: usize,
    pub passages_written: usize,
    /// Notes whose head was re-chunked because the chunker settings changed.
    pub rechunked: usize,
    /// Notes that were not valid UTF-8 and were indexed lossily (raw bytes kept as the version).
    pub lossy: Vec<String>,
    pub skipped: Vec<Skipped>,
}

/// Progress of a vault scan: `done` of `total` files in the current phase ("reading" the
/// folder, then "indexing" what changed), and the file just handled.
pub struct Progress<'a> {
    pub phase: &'static str,
    pub done: usize,
    pub total: usize,
    pub path: &'a str,
}

pub fn is_markdown(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("md") || e.eq_ignore_ascii_case("markdown"))
}

/// A file looks binary when it holds a NUL byte anywhere (not only in its first 8 KiB, as git
/// looks: 10 KB of text before binary junk is still no note). The bytes are read whole anyway.
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes.contains(&0)
}

/// Workspace-relative, '/'-separated path of `abs` under `root`.
pub fn relative_path(root: &Path, abs: &Path) -> Option<String> {
    let rel = abs.strip_prefix(root).ok()?;
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Why a path is not a note of the vault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotANote {
    #[error("{0} is not a markdown file (.md, .markdown)")]
    NotMarkdown(String),
    #[error("{0} is outside the vault")]
    Outside(String),
    #[error("{0} is under a hidden folder (.lode, .git, .obsidian, .trash, …)")]
    Hidden(String),
    #[error("{0} is ignored by .gitignore/.ignore")]
    Ignored(String),
    #[error("{0} is a symbolic link; only the files themselves are notes")]
    Symlink(String),
    #[error("{0} is over the size limit ({1} bytes)")]
    TooLarge(String, u64),
    #[error("{0} looks binary")]
    Binary(String),
    #[error("{0} is UTF-16 text; lode reads UTF-8 (or Latin-1) notes: save it as UTF-8")]
    Utf16(String),
}

/// Whether `bytes` start with a UTF-16 byte-order mark (such a file is full of NUL bytes, and
/// would otherwise only be called binary).
pub fn is_utf16(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF])
}

/// The one rule for which files are notes, used by the scan, saves, watched-file events and
/// anything that writes files into the vault: a markdown file inside the vault after `..` and
/// symlinks are resolved, not under a hidden folder, not gitignored, not itself a symlink.
/// Returns the note's vault-relative path: its real one when `path` goes through a folder link
/// inside the vault. (Size and binary checks need the bytes:
/// [`check_bytes`].)
pub fn indexable(root: &Path, path: &Path) -> Result<String, NotANote> {
    let shown = path.display().to_string();
    let abs = if path.is_absolute() { path.to_path_buf() } else { root.join(path) };
    // Lexical normalisation first: `a/../../x.md` must not escape.
    let mut norm = PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::ParentDir => {
                if !norm.pop() {
                    return Err(NotANote::Outside(shown));
                }
            }
            std::path::Component::CurDir => {}
            other => norm.push(other.as_os_str()),
        }
    }
    let canon_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let rel_path = norm.strip_prefix(root).or_else(|_| norm.strip_prefix(&canon_root)).map_err(|_| NotANote::Outside(shown.clone()))?;
    let rel = relative_path(Path::new(""), rel_path).unwrap_or_default();
    if rel.is_empty() {
        return Err(NotANote::Outside(shown));
    }
    if !is_markdown(&norm) {
        return Err(NotANote::NotMarkdown(rel));
    }
    if rel.split('/').any(|part| part.starts_with('.')) {
        return Err(NotANote::Hidden(rel));
    }
    let on_disk = canon_root.join(rel_path);
    match std::fs::symlink_metadata(&on_disk) {
        Ok(m) if m.file_type().is_symlink() => return Err(NotANote::Symlink(rel)),
        // A folder named like a note (`ideas.md/`): its files are the notes, and a file event
        // on it is a folder's (a rescan), not a note's.
        Ok(m) if m.is_dir() => return Err(NotANote::NotMarkdown(rel)),
        _ => {}
    }
    // A folder on the way may be a link (each folder is looked at itself: comparing spellings
    // would take a folder the editor spells in another case or Unicode form for a link). Out
    // of the vault: no note. Within it: the note is the file at its real path (the scan does
    // not follow folder links, so it finds it there, once).
    let linked = rel_path.parent().is_some_and(|dirs| {
        let mut d = canon_root.clone();
        dirs.components().any(|c| {
            d.push(c);
            std::fs::symlink_metadata(&d).is_ok_and(|m| m.file_type().is_symlink())
        })
    });
    if linked {
        let real = on_disk.parent().and_then(|p| p.canonicalize().ok()).zip(on_disk.file_name());
        return match real {
            Some((dir, name)) if dir.starts_with(&canon_root) => indexable(root, &dir.join(name)),
            _ => Err(NotANote::Outside(rel)),
        };
    }
    if gitignored(&canon_root, &on_disk) {
        return Err(NotANote::Ignored(rel));
    }
    Ok(rel)
}

/// The checks that need a file's bytes: the size cap and the binary test.
/// The bytes of the note at `rel` under `root` as it is on disk now, for a check that reads
/// notes outside the scan (egress marks before a remote question, `lode doctor`): a link or
/// anything but a regular file is refused (a pull can turn a note into a link to a device),
/// and at most `max` bytes are read (a larger file is an error, as the scan skips it).
pub fn read_note_file(root: &Path, rel: &str, max: u64) -> std::io::Result<Vec<u8>> {
    read_small_file(&root.join(rel), max, false)
}

/// The bytes of the regular file at `path`, at most `max` of them (a larger file is an error,
/// read or not). `follow_links`: a link is followed, but only to a regular file; else a link is
/// refused too. For every file a folder could turn into a link to a device or a huge file.
pub fn read_small_file(path: &Path, max: u64, follow_links: bool) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
    if !follow_links && std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(invalid("not a regular file (a link)".into()));
    }
    // Not opened unless it is a regular file: opening a named pipe waits for a writer (a
    // folder's `.lode/config.toml` made a FIFO hung every read of it). Opened without waiting
    // all the same, for a file swapped for a pipe between the check and the open.
    if !std::fs::metadata(path)?.is_file() {
        return Err(invalid("not a regular file (a folder, a pipe or a device)".into()));
    }
    let f = {
        let mut o = std::fs::OpenOptions::new();
        o.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NONBLOCK);
        o.open(path)?
    };
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(invalid("not a regular file (a folder or a device)".into()));
    }
    if meta.len() > max {
        return Err(invalid(format!("{} bytes, over the {max}-byte limit", meta.len())));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(invalid(format!("over the {max}-byte limit")));
    }
    Ok(bytes)
}

pub fn check_bytes(rel: &str, bytes: &[u8], max: u64) -> Result<(), NotANote> {
    if bytes.len() as u64 > max {
        return Err(NotANote::TooLarge(rel.to_owned(), bytes.len() as u64));
    }
    if is_utf16(bytes) {
        return Err(NotANote::Utf16(rel.to_owned()));
    }
    if looks_binary(bytes) {
        return Err(NotANote::Binary(rel.to_owned()));
    }
    Ok(())
}

/// Whether `.gitignore`/`.ignore` files from the vault root down to the file's folder (and
/// `.git/info/exclude`) ignore it; deeper files override shallower ones, as git does.
fn gitignored(root: &Path, file: &Path) -> bool {
    use ignore::gitignore::GitignoreBuilder;
    let mut dirs = vec![root.to_path_buf()];
    if let Ok(rel) = file.parent().unwrap_or(root).strip_prefix(root) {
        let mut d = root.to_path_buf();
        for c in rel.components() {
            d.push(c);
            dirs.push(d.clone());
        }
    }
    let mut ignored = false;
    for (i, dir) in dirs.iter().enumerate() {
        let mut b = GitignoreBuilder::new(dir);
        let mut any = false;
        let mut files = vec![dir.join(".gitignore"), dir.join(".ignore")];
        if i == 0 {
            files.push(dir.join(".git/info/exclude"));
        }
        for f in files {
            if f.is_file() && b.add(&f).is_none() {
                any = true;
            }
        }
        if !any {
            continue;
        }
        let Ok(gi) = b.build() else { continue };
        let m = gi.matched_path_or_any_parents(file, false);
        if m.is_ignore() {
            ignored = true;
        } else if m.is_whitelist() {
            ignored = false;
        }
    }
    ignored
}

/// Markdown files of the vault, sorted, honouring `.gitignore`/`.ignore` files (also outside a
/// git repository) and skipping hidden folders such as `.git` and `.lode`. Only ignore files
/// from the vault root down count, as in [`indexable`]: not a parent folder's, not the user's
/// global excludes (one vault, one answer, whoever's machine it is on).
pub fn walk(root: &Path) -> (Vec<PathBuf>, Vec<Skipped>) {
    let mut files = Vec::new();
    let problems = walk_with(root, |path| files.push(path));
    files.sort();
    (files, problems)
}

/// [`walk`]'s notes as vault-relative paths (as the index names them), in byte order (the
/// index's), each once.
pub fn walk_notes(root: &Path) -> (Vec<String>, Vec<Skipped>) {
    let mut files = Vec::new();
    let problems = walk_with(root, |path| files.extend(relative_path(root, &path)));
    files.sort_unstable();
    files.dedup();
    (files, problems)
}

/// Walks the vault as [`walk`] describes, giving each note's path to `found`; returns what
/// could not be read.
fn walk_with(root: &Path, mut found: impl FnMut(PathBuf)) -> Vec<Skipped> {
    let mut problems = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .parents(false)
        .git_global(false)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .build();
    for entry in walker {
        match entry {
            Ok(e) if e.file_type().is_some_and(|t| t.is_file()) && is_markdown(e.path()) => found(e.into_path()),
            Ok(_) => {}
            Err(err) => problems.push(Skipped { path: String::new(), reason: err.to_string() }),
        }
    }
    problems
}

/// One change the scan found, applied later (through the caller's writer) against the disk as
/// it is *then*: a step never commits bytes older than the file, whatever was saved meanwhile.
#[derive(Debug, Clone)]
pub enum Step {
    /// The file is new or changed (or only its mtime moved): read it and save it.
    Save { rel: String },
    /// A new path whose bytes are the head of a note whose file vanished: keep the note's id
    /// and history (if both files still look that way when applied).
    Rename(Box<Rename>),
    /// A note whose file is gone.
    Delete { rel: String },
}

/// A [`Step::Rename`] (boxed: a plan holds a step per changed note, a million in a first scan,
/// and renames are rare).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rename {
    pub from: String,
    pub to: String,
    pub version_id: String,
}

/// What a scan found to do, plus what it counted on the way (scanned, unchanged, skipped).
#[derive(Debug, Default)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub report: IndexReport,
    /// Paths with a `Save` step whose bytes are their head's already: the step only records
    /// their size and mtime (not trusted, or not recorded, when they were last read).
    pub same_bytes: HashSet<String>,
}

impl Plan {
    /// The notes this plan writes: its saves, bar those whose bytes are their head's already (a
    /// file whose stat alone moved: copied, touched, or read within two seconds of its last
    /// change), which only record their stat.
    pub fn writes(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Step::Save { rel } if !self.same_bytes.contains(rel))).count()
    }
}

/// Compares the vault folder with the store. Files whose size and mtime match what was recorded
/// when their head was read are not opened; others are read (and hashed, when a note holds
/// that path, or when a new path could be a vanished note's). Writes nothing.
///
/// Memory: the folder's paths, sorted, are walked beside the index's notes read in the same
/// order a page at a time (a merge), so a plan holds each path once and the steps. A plan of a
/// million-note vault once held every path four or five times (the folder's, the index's with
/// each head in hex, a "seen" set, the changed list, the steps): 495 MB at the peak of a first
/// scan, 540 MB of a restart's.
pub fn plan(store: &Store, root: &Path, opts: &IndexOptions, progress: impl FnMut(Progress<'_>)) -> Result<Plan, StoreError> {
    plan_paged(store, root, opts, progress, HEADS_PAGE)
}

fn plan_paged(
    store: &Store,
    root: &Path,
    opts: &IndexOptions,
    mut progress: impl FnMut(Progress<'_>),
    page: i64,
) -> Result<Plan, StoreError> {
    let mut report = IndexReport::default();
    let (files, problems) = walk_notes(root);
    report.skipped.extend(problems);
    report.scanned = files.len();
    let total = files.len();
    let mut heads = Heads { store, page: Default::default(), size: page.max(1), after: String::new(), done: false };
    let mut steps: Vec<Step> = Vec::with_capacity(total);
    let mut same_bytes: HashSet<String> = HashSet::new();
    // Indexed notes whose file is gone: (path, head), in path order.
    let mut gone: Vec<(String, String)> = Vec::new();
    // Indexed notes whose file is there but no note (too large, binary): deleted from the
    // index, never taken for the source of a rename (their file did not vanish).
    let mut rejected: Vec<String> = Vec::new();
    // The steps that save a path the index does not hold (candidates for renames).
    let mut new_paths: Vec<usize> = Vec::new();
    let mut last = std::time::Instant::now();
    for (i, rel) in files.into_iter().enumerate() {
        if last.elapsed().as_millis() >= 100 {
            last = std::time::Instant::now();
            progress(Progress { phase: "reading", done: i, total, path: &rel });
        }
        while heads.peek()?.is_some_and(|h| h.0 < rel) {
            let (path, head, _) = heads.next().expect("peeked");
            gone.push((path, head));
        }
        let known = match heads.peek()? {
            Some(h) if h.0 == rel => heads.next().map(|(_, head, stat)| (head, stat)),
            _ => None,
        };
        let abs = root.join(&rel);
        let meta = match std::fs::metadata(&abs) {
            Ok(m) => m,
            Err(e) => {
                report.skipped.push(Skipped { path: rel, reason: format!("cannot read: {e}") });
                continue;
            }
        };
        // Too large or binary: no note (an indexed one is deleted below); unreadable: kept.
        if meta.len() > opts.max_file_bytes {
            if known.is_some() {
                rejected.push(rel.clone());
            }
            report.skipped.push(Skipped {
                path: rel,
                reason: format!("{:.1} MB is over the {} MB limit", meta.len() as f64 / 1e6, opts.max_file_bytes / 1_000_000),
            });
            continue;
        }
        if let (Some((_, Some(stat))), Some(now)) = (&known, DiskStat::of(&meta)) {
            if *stat == now {
                report.unchanged += 1;
                continue;
            }
        }
        let bytes = match std::fs::read(&abs) {
            Ok(b) => b,
            Err(e) => {
                report.skipped.push(Skipped { path: rel, reason: format!("cannot read: {e}") });
                continue;
            }
        };
        if let Err(why @ (NotANote::Binary(_) | NotANote::Utf16(_))) = check_bytes(&rel, &bytes, u64::MAX) {
            if known.is_some() {
                rejected.push(rel.clone());
            }
            let reason = match why {
                NotANote::Utf16(_) => "UTF-16 text: save it as UTF-8 to index it".into(),
                _ => "binary content (NUL bytes)".into(),
            };
            report.skipped.push(Skipped { path: rel, reason });
            continue;
        }
        match &known {
            Some((head, _)) if *head == crate::version_id(&bytes) => {
                same_bytes.insert(rel.clone());
            }
            Some(_) => {}
            None => new_paths.push(steps.len()),
        }
        steps.push(Step::Save { rel });
    }
    while let Some((path, head, _)) = heads.next_filled()? {
        gone.push((path, head));
    }
    if !opts.delete_missing {
        return Ok(Plan { steps, report, same_bytes });
    }
    // Renames: a new path whose bytes are the head of a note whose path vanished. Only then
    // are new paths hashed (read again: rare, and never in a first scan).
    let mut vanished: HashMap<&str, usize> = HashMap::new();
    for (i, (_, head)) in gone.iter().enumerate() {
        vanished.entry(head.as_str()).or_insert(i);
    }
    let mut renamed = vec![false; gone.len()];
    for &i in &new_paths {
        if vanished.is_empty() {
            break;
        }
        let Step::Save { rel } = &mut steps[i] else { continue };
        let Ok(bytes) = std::fs::read(root.join(rel.as_str())) else { continue };
        let vid = crate::version_id(&bytes);
        if let Some(g) = vanished.remove(vid.as_str()) {
            renamed[g] = true;
            steps[i] = Step::Rename(Box::new(Rename { from: gone[g].0.clone(), to: std::mem::take(rel), version_id: vid }));
        }
    }
    let mut deletes: Vec<String> = gone.into_iter().zip(renamed).filter(|(_, r)| !r).map(|((path, _), _)| path).chain(rejected).collect();
    deletes.sort();
    steps.extend(deletes.into_iter().map(|rel| Step::Delete { rel }));
    Ok(Plan { steps, report, same_bytes })
}

/// The index's notes in path order, read a page at a time (for [`plan`]).
struct Heads<'a> {
    store: &'a Store,
    page: std::collections::VecDeque<(String, String, Option<DiskStat>)>,
    /// Notes per page.
    size: i64,
    /// The last path read.
    after: String,
    done: bool,
}

/// Notes per page of [`Heads`] in a [`plan`].
const HEADS_PAGE: i64 = 4096;

impl Heads<'_> {
    fn peek(&mut self) -> Result<Option<&(String, String, Option<DiskStat>)>, StoreError> {
        if self.page.is_empty() && !self.done {
            let page = self.store.heads_after(&self.after, self.size)?;
            self.done = (page.len() as i64) < self.size;
            if let Some((last, ..)) = page.last() {
                self.after.clone_from(last);
            }
            self.page.extend(page);
        }
        Ok(self.page.front())
    }

    /// The note [`Heads::peek`] showed.
    fn next(&mut self) -> Option<(String, String, Option<DiskStat>)> {
        self.page.pop_front()
    }

    fn next_filled(&mut self) -> Result<Option<(String, String, Option<DiskStat>)>, StoreError> {
        self.peek()?;
        Ok(self.next())
    }
}

/// What applying one step did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Saved(SaveStatus, usize),
    Renamed,
    Deleted,
    /// Nothing to do (e.g. a note to delete that was already gone).
    Nothing,
    Skipped(String),
    Lossy(SaveStatus, usize),
}

/// Reads the file at `rel` as it is now and saves it (recording its size and mtime), or marks
/// the note deleted when the file is gone — or is no note any more (over the size cap, binary,
/// UTF-16: then `Skipped` says why). The one way disk bytes enter the store, for scans,
/// saves and watched-file events alike.
/// [`refresh`] for a save the editor acknowledged, with the text it saved: when the file
/// already holds other (UTF-8) bytes — a later save overwrote it before this one was indexed —
/// that text is kept as a version of its own first (with the file's byte-order mark, if it has
/// one), so every acknowledged save is in the history; then the file's bytes, as always. A file
/// that is not UTF-8 is indexed as it is (the editor's decoded text would not be its bytes).
pub fn refresh_saved(store: &mut Store, root: &Path, opts: &IndexOptions, rel: &str, saved: &str) -> Result<Applied, StoreError> {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    if let Ok(bytes) = std::fs::read(root.join(rel)) {
        let bom = bytes.starts_with(BOM);
        let disk = if bom { &bytes[BOM.len()..] } else { &bytes[..] };
        if std::str::from_utf8(disk).is_ok_and(|d| d != saved) {
            let mut acknowledged = if bom { BOM.to_vec() } else { Vec::new() };
            acknowledged.extend_from_slice(saved.as_bytes());
            if check_bytes(rel, &acknowledged, opts.max_file_bytes).is_ok() {
                store.save_note(rel, &acknowledged)?;
            }
        }
    }
    refresh(store, root, opts, rel)
}

pub fn refresh(store: &mut Store, root: &Path, opts: &IndexOptions, rel: &str) -> Result<Applied, StoreError> {
    let abs = root.join(rel);
    // The stat is taken before the read: if the file changes in between, the recorded stat is
    // older than the bytes, and the next scan re-reads the file (never the other way round).
    let read_at = std::time::SystemTime::now();
    let meta = match std::fs::metadata(&abs) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(if store.delete_note(rel)? { Applied::Deleted } else { Applied::Nothing });
        }
        Err(e) => return Ok(Applied::Skipped(format!("{rel}: cannot read: {e}"))),
    };
    if !meta.is_file() {
        return Ok(if store.delete_note(rel)? { Applied::Deleted } else { Applied::Nothing });
    }
    if meta.len() > opts.max_file_bytes {
        // Not read at all (it may be huge); stale entries go, as below.
        store.delete_note(rel)?;
        return Ok(Applied::Skipped(NotANote::TooLarge(rel.to_owned(), meta.len()).to_string()));
    }
    let bytes = match std::fs::read(&abs) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(if store.delete_note(rel)? { Applied::Deleted } else { Applied::Nothing });
        }
        Err(e) => return Ok(Applied::Skipped(format!("{rel}: cannot read: {e}"))),
    };
    if let Err(why) = check_bytes(rel, &bytes, opts.max_file_bytes) {
        // No note any more (it grew past the cap, or turned binary): what the index held of it
        // is stale, and goes; its history stays.
        store.delete_note(rel)?;
        return Ok(Applied::Skipped(why.to_string()));
    }
    let out = store.save_note(rel, &bytes)?;
    if let Some(stat) = DiskStat::of(&meta).filter(|s| s.size == bytes.len() as u64) {
        store.record_stat(rel, &out.version_id, stat, read_at)?;
    }
    let n = if out.status == SaveStatus::Unchanged { 0 } else { out.passages };
    Ok(if out.lossy { Applied::Lossy(out.status, n) } else { Applied::Saved(out.status, n) })
}

/// Applies one step of a [`plan`], re-checking the disk first.
pub fn apply(store: &mut Store, root: &Path, opts: &IndexOptions, step: &Step) -> Result<Applied, StoreError> {
    match step {
        Step::Save { rel } => refresh(store, root, opts, rel),
        // Gone from the scan: deleted, unless the file is back as a note meanwhile. (A file that
        // became gitignored, hidden or a symlink still exists, and is no note any more.)
        Step::Delete { rel } if indexable(root, &root.join(rel)).is_ok() => match refresh(store, root, opts, rel)? {
            // Still there but no note (too large, binary): the plan reported why, and the
            // refresh took it out of the index.
            Applied::Skipped(_) if !store.note_exists(rel)? => Ok(Applied::Deleted),
            other => Ok(other),
        },
        Step::Delete { rel } => Ok(if store.delete_note(rel)? { Applied::Deleted } else { Applied::Nothing }),
        Step::Rename(r) => {
            let Rename { from, to, version_id } = &**r;
            let from_gone = !root.join(from).exists();
            let still = from_gone
                && store.head_of(to)?.is_none()
                && store.head_of(from)?.as_deref() == Some(version_id.as_str())
                && std::fs::read(root.join(to)).is_ok_and(|b| crate::version_id(&b) == *version_id);
            if !still {
                // Things moved on since the plan: take each path as it is now.
                let r = refresh(store, root, opts, to)?;
                if from_gone {
                    store.delete_note(from)?;
                }
                return Ok(r);
            }
            store.rename_note(from, to)?;
            let read_at = std::time::SystemTime::now();
            if let Some(stat) = std::fs::metadata(root.join(to)).ok().and_then(|m| DiskStat::of(&m)) {
                store.record_stat(to, version_id, stat, read_at)?;
            }
            Ok(Applied::Renamed)
        }
    }
}

/// Counts one applied step into `report`.
pub fn tally(report: &mut IndexReport, step: &Step, applied: Applied) {
    let path = match step {
        Step::Save { rel } | Step::Delete { rel } => rel,
        Step::Rename(r) => &r.to,
    };
    let saved = |status: SaveStatus, n: usize, report: &mut IndexReport| {
        match status {
            SaveStatus::Created => report.created += 1,
            SaveStatus::Updated => report.updated += 1,
            SaveStatus::Unchanged => report.unchanged += 1,
        }
        report.passages_written += n;
    };
    match applied {
        Applied::Saved(s, n) => saved(s, n, report),
        Applied::Lossy(s, n) => {
            saved(s, n, report);
            report.lossy.push(path.clone());
        }
        Applied::Renamed => report.renamed += 1,
        Applied::Deleted => report.deleted += 1,
        Applied::Nothing => {}
        Applied::Skipped(reason) => report.skipped.push(Skipped { path: path.clone(), reason }),
    }
}

/// After the steps of a scan: resolve links, record the chunker settings, and end bulk work
/// (merging the full-text indexes whole, so queries read one b-tree per term instead of
/// dozens).
pub fn finish(store: &mut Store, report: &IndexReport) -> Result<(), StoreError> {
    store.resolve_links()?;
    store.record_chunking()?;
    store.end_bulk(is_bulk(report.created + report.updated + report.rechunked, report.scanned))
}

/// Steps committed together in a bulk scan: one commit (and one full-text segment flush) per
/// batch instead of per note.
pub const BATCH: usize = 64;

/// Steps per commit of [`index_vault`] (`lode index`), which has no editor to make room for:
/// the random-key indexes (version ids, folded titles and headings) take an insert on a page of
/// their own, written to the log at every commit, so fewer, larger commits write each such page
/// once for several notes. 100k notes: 61.1 s at 64 a commit, 56.3 s at 512, 53.3 s at 1,024
/// (medians), for 11 MB more of chunkings waiting (two batches' worth).
const INDEX_BATCH: usize = 1024;

/// Frames of log at which a scan's commit checkpoints (128 MB of 4 KB pages).
const SCAN_BACKSTOP_FRAMES: u32 = 32_768;

/// Applies a prefix of `steps` (at least one) as one batch and returns each applied step's
/// result, in order; the caller goes on with the rest. The prefix ends early when `stop` (asked
/// before each step after the first) says to yield to other work. When a write fails inside
/// the batch the store rolls the batch back, and its steps up to the failed one are applied
/// again one at a time, each committing alone: one bad file costs the batch its speed, never
/// its other notes. Without a batch (the database is locked), one step alone.
pub fn apply_batch<R>(
    store: &mut Store,
    steps: &[Step],
    mut apply_one: impl FnMut(&mut Store, &Step) -> R,
    mut stop: impl FnMut() -> bool,
) -> Vec<R> {
    let mut out = Vec::with_capacity(steps.len());
    if steps.is_empty() {
        return out;
    }
    if store.begin_batch().is_err() {
        out.push(apply_one(store, &steps[0]));
        return out;
    }
    for (i, step) in steps.iter().enumerate() {
        if i > 0 && stop() {
            break;
        }
        let r = apply_one(store, step);
        if !store.in_batch() {
            // Rolled back: nothing of this batch is in the store.
            return steps[..=i].iter().map(|s| apply_one(store, s)).collect();
        }
        out.push(r);
    }
    if store.end_batch().is_err() {
        let n = out.len();
        return steps[..n].iter().map(|s| apply_one(store, s)).collect();
    }
    out
}

/// Brings the store in line with the vault folder, in this process: [`plan`], then every step
/// through [`apply`], then [`finish`]. A failure on one file is reported and the rest go on; a
/// failure of the database itself stops the scan (what was committed stays).
pub fn index_vault(
    store: &mut Store,
    root: &Path,
    opts: &IndexOptions,
    progress: impl FnMut(Progress<'_>),
) -> Result<IndexReport, StoreError> {
    // The log is copied back into the database (a checkpoint, with two fsyncs) every 32,768
    // frames instead of SQLite's 1,000: a page that several batches write is copied once, and
    // the fsyncs that took a quarter of the writer's time at 100k notes come 30 times less
    // often. (A checkpointer thread, as the server has for its saves' latency, was slower here:
    // on two cores it takes the CPU the reader and writer use.)
    store.watch_log(SCAN_BACKSTOP_FRAMES);
    let report = scan(store, root, opts, progress);
    store.default_checkpoints();
    report
}

fn scan(store: &mut Store, root: &Path, opts: &IndexOptions, mut progress: impl FnMut(Progress<'_>)) -> Result<IndexReport, StoreError> {
    // Bulk merging only speeds writing up: a store that cannot take it says what is wrong on
    // its first write.
    let mut rechunked = 0;
    if store.chunking_changed()? {
        // Every head is written again.
        let _ = store.begin_bulk();
        rechunked = store.rechunk_heads(|done, total| progress(Progress { phase: "re-chunking", done, total, path: "" }))?;
    }
    let planned = plan(store, root, opts, &mut progress)?;
    let writes = planned.writes();
    let Plan { steps, mut report, .. } = planned;
    report.rechunked = rechunked;
    if is_bulk(writes + rechunked, report.scanned) {
        let _ = store.begin_bulk();
        // A cold index: the random-key indexes are built at the end, by sort.
        let _ = store.defer_indexes(writes);
    }
    // The notes to save are read and chunked on a thread of their own, a batch or two ahead of
    // the writer (parsing is about half of a save): the writer takes a chunking only for
    // exactly the bytes it saves (keyed by version id), so what is indexed is the same.
    let ahead = crate::Prechunked::with_capacity(2 * INDEX_BATCH);
    let before = store.replace_prechunked(Some(ahead.clone()));
    let cfg = store.options().chunk;
    let result = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Option<Prepared>>(2 * INDEX_BATCH);
        let saves: Vec<&str> = steps.iter().filter_map(|s| if let Step::Save { rel } = s { Some(rel.as_str()) } else { None }).collect();
        let max = opts.max_file_bytes;
        scope.spawn(move || {
            // A panic here costs only the head start: the writer chunks what it is not given.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                for rel in saves {
                    if tx.send(prepare(root, rel, max, &cfg)).is_err() {
                        return;
                    }
                }
            }));
        });
        // Steps up to here have had their chunking handed over (a batch cut short by a failed
        // write starts the next batch at a step already handed over).
        let mut fed = 0;
        apply_steps(store, root, opts, &steps, INDEX_BATCH, &mut report, &mut progress, |start, batch| {
            for (i, step) in batch.iter().enumerate() {
                if start + i < fed {
                    continue;
                }
                fed = start + i + 1;
                if matches!(step, Step::Save { .. }) {
                    match rx.recv() {
                        Ok(Some(p)) => p.hand_over(&ahead, &cfg),
                        Ok(None) => {}
                        Err(_) => return,
                    }
                }
            }
        })
    });
    store.replace_prechunked(before);
    result?;
    // The end of a large scan takes a while (a million notes: links, six indexes and four
    // full-text merges, a minute or more): said, so a finished count is not read as a hang.
    progress(Progress { phase: "finishing: links, indexes, full-text merges", done: 0, total: 0, path: "" });
    finish(store, &report)?;
    Ok(report)
}

/// Reads and chunks the notes `steps` will save, for a writer that applies them later (the
/// language server's scan prepares on a thread of its own, ahead of its writer): hand the
/// result to the writer's [`crate::Prechunked`] with [`Prepared::hand_over`] just before the
/// steps are applied. A note that cannot be read, or whose chunking panics, is left out (its
/// save reads and chunks it itself).
pub fn prepare_steps(root: &Path, opts: &IndexOptions, cfg: &lode_core::chunk::ChunkConfig, steps: &[Step]) -> Vec<Prepared> {
    steps
        .iter()
        .filter_map(|step| match step {
            Step::Save { rel } => {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(root, rel, opts.max_file_bytes, cfg))).ok().flatten()
            }
            _ => None,
        })
        .collect()
}

/// A note read and chunked ahead of its save.
pub struct Prepared {
    rel: String,
    version_id: String,
    chunked: std::sync::Arc<lode_core::chunk::ChunkedNote>,
}

impl Prepared {
    /// Keeps this chunking in `into`, where a save of exactly the bytes it was made from (with
    /// `cfg`) takes it.
    pub fn hand_over(self, into: &crate::Prechunked, cfg: &lode_core::chunk::ChunkConfig) {
        into.insert(&self.rel, self.version_id, cfg, self.chunked);
    }
}

/// Reads and chunks the note at `rel` for [`index_vault`]'s writer; `None` when it cannot be
/// read or is larger than a prepared chunking is kept for (the save chunks it itself).
fn prepare(root: &Path, rel: &str, max: u64, cfg: &lode_core::chunk::ChunkConfig) -> Option<Prepared> {
    let limit = max.min(crate::PRECHUNK_MAX_BYTES as u64);
    let abs = root.join(rel);
    if std::fs::metadata(&abs).ok()?.len() > limit {
        return None;
    }
    let bytes = std::fs::read(&abs).ok()?;
    Some(Prepared {
        rel: rel.to_owned(),
        version_id: crate::version_id(&bytes),
        chunked: std::sync::Arc::new(lode_core::chunk::chunk_note(&bytes, cfg)),
    })
}

/// Applies `steps` in batches, counting each into `report`; `before` sees each batch (and the
/// index of its first step) first.
fn apply_steps(
    store: &mut Store,
    root: &Path,
    opts: &IndexOptions,
    steps: &[Step],
    size: usize,
    report: &mut IndexReport,
    progress: &mut impl FnMut(Progress<'_>),
    mut before: impl FnMut(usize, &[Step]),
) -> Result<(), StoreError> {
    let total = steps.len();
    let mut done = 0;
    while done < total {
        let batch = &steps[done..(done + size.max(1)).min(total)];
        before(done, batch);
        let results = apply_batch(store, batch, |store, step| apply(store, root, opts, step), || false);
        for (step, r) in batch.iter().zip(results) {
            tally(report, step, r?);
            done += 1;
            let path = match step {
                Step::Save { rel } | Step::Delete { rel } => rel,
                Step::Rename(r) => &r.to,
            };
            progress(Progress { phase: "indexing", done, total, path });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small file read (a folder's config, a note read outside the scan) is a regular file or
    /// nothing: a named pipe, a folder, a file over the limit and a link (when links are not
    /// followed) are refused at once, never waited on.
    #[cfg(unix)]
    #[test]
    fn read_small_file_refuses_pipes_folders_and_oversize_files_without_waiting() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("config.toml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        let e = read_small_file(&fifo, 1 << 20, true).unwrap_err();
        assert!(e.to_string().contains("not a regular file") && started.elapsed() < std::time::Duration::from_secs(2), "{e}");
        assert!(read_small_file(tmp.path(), 1 << 20, true).is_err());
        let big = tmp.path().join("big.toml");
        std::fs::write(&big, vec![b'a'; 2048]).unwrap();
        assert!(read_small_file(&big, 1024, true).unwrap_err().to_string().contains("limit"));
        let link = tmp.path().join("link.toml");
        std::os::unix::fs::symlink(&big, &link).unwrap();
        assert!(read_small_file(&link, 1 << 20, false).is_err());
        assert_eq!(read_small_file(&link, 1 << 20, true).unwrap().len(), 2048);
    }

    /// The verdict's name in `fixtures/notes-rule/cases.json`.
    fn verdict(r: &Result<(), NotANote>) -> &'static str {
        match r {
            Ok(()) => "ok",
            Err(NotANote::NotMarkdown(_)) => "not-markdown",
            Err(NotANote::Outside(_)) => "outside",
            Err(NotANote::Hidden(_)) => "hidden",
            Err(NotANote::Ignored(_)) => "ignored",
            Err(NotANote::Symlink(_)) => "symlink",
            Err(NotANote::TooLarge(..)) => "too-large",
            Err(NotANote::Binary(_)) => "binary",
            Err(NotANote::Utf16(_)) => "utf-16",
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// Every case of `fixtures/notes-rule/cases.json` (paths and bytes), then the scan against
    /// the rule on the same layout, both ways: every file the scan finds is a note by the rule,
    /// and the rule accepts nothing the scan misses. All failures are reported together.
    #[test]
    fn the_notes_rule_holds_on_every_fixture_case() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/notes-rule/cases.json");
        let cases: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        for item in cases["layout"].as_array().unwrap() {
            if let Some(f) = item["file"].as_str() {
                let f = tmp.path().join(f);
                std::fs::create_dir_all(f.parent().unwrap()).unwrap();
                std::fs::write(f, item["text"].as_str().unwrap_or("x")).unwrap();
            }
        }
        #[cfg(unix)]
        for item in cases["layout"].as_array().unwrap() {
            if let (Some(link), Some(to)) = (item["link"].as_str(), item["to"].as_str()) {
                std::os::unix::fs::symlink(tmp.path().join(to), tmp.path().join(link)).unwrap();
            }
        }
        let mut failed = Vec::new();
        let mut notes = std::collections::BTreeSet::new();
        for c in cases["paths"].as_array().unwrap() {
            let path = match (c["path"].as_str(), c["raw"].as_str(), c["tmp"].as_str()) {
                (Some(p), ..) => root.join(p),
                (_, Some(raw), _) => PathBuf::from(raw),
                (.., Some(t)) => tmp.path().join(t),
                _ => panic!("a case without a path: {c}"),
            };
            if cfg!(not(unix)) && c["why"].as_str().is_some_and(|w| w.contains("link")) {
                continue;
            }
            let got = indexable(&root, &path);
            let ok = match (c["note"].as_str(), c["not"].as_str()) {
                (Some(rel), _) => {
                    if c["path"].is_string() && !path.starts_with(root.join("alias")) {
                        notes.insert(rel.to_owned());
                    }
                    got.as_deref() == Ok(rel)
                }
                (_, Some(not)) => verdict(&got.clone().map(|_| ())) == not,
                _ => panic!("a case without a verdict: {c}"),
            };
            if !ok {
                failed.push(format!("{c}: got {got:?}"));
            }
        }
        for c in cases["bytes"].as_array().unwrap() {
            let mut bytes = match (c["text"].as_str(), c["hex"].as_str()) {
                (Some(t), _) => t.as_bytes().to_vec(),
                (_, Some(h)) => hex(h),
                _ => panic!("a case without bytes: {c}"),
            };
            bytes = bytes.repeat(c["repeat"].as_u64().unwrap_or(1) as usize);
            bytes.extend(hex(c["then_hex"].as_str().unwrap_or("")));
            let got = check_bytes("case.md", &bytes, c["cap"].as_u64().unwrap_or(1 << 20));
            let want = if c["ok"] == true { "ok" } else { c["not"].as_str().unwrap() };
            if verdict(&got) != want {
                failed.push(format!("{c}: got {got:?}"));
            }
        }
        assert!(failed.is_empty(), "{} fixture cases fail:\n{}", failed.len(), failed.join("\n"));

        // The scan agrees with the rule on every file it finds…
        let (files, _) = walk(&root);
        for f in &files {
            assert!(indexable(&root, f).is_ok(), "{}", f.display());
        }
        let found: std::collections::BTreeSet<String> = files.iter().filter_map(|f| relative_path(&root, f)).collect();
        // …and the rule accepts nothing the scan would not find.
        let mut every: Vec<PathBuf> = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                // Folder links are followed too (`escape` leads back up: a cycle).
                if p.is_dir() && !p.ends_with("escape") {
                    dirs.push(p);
                } else {
                    every.push(p);
                }
            }
        }
        for f in &every {
            if let Ok(rel) = indexable(&root, f) {
                assert!(found.contains(&rel), "{} is a note by the rule ({rel}) but the scan misses it", f.display());
            }
        }
        if cfg!(unix) {
            assert_eq!(found, notes, "the scan finds exactly the fixture's notes");
        }
    }

    /// A note that grows past the size cap or turns binary is no note any more: a scan and a
    /// save (refresh) both take it out of the index, instead of leaving its last text findable.
    #[test]
    fn a_note_that_grows_past_the_cap_or_turns_binary_leaves_the_index() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir_all(&root).unwrap();
        let opts = IndexOptions { max_file_bytes: 100, ..Default::default() };
        for p in ["big.md", "bin.md", "saved.md"] {
            std::fs::write(root.join(p), format!("# {p}\n\nsmall and findable\n")).unwrap();
        }
        let mut store = Store::open(&tmp.path().join("db"), Default::default()).unwrap();
        let r = index_vault(&mut store, &root, &opts, |_| {}).unwrap();
        assert_eq!(r.created, 3);

        std::fs::write(root.join("big.md"), "x".repeat(101)).unwrap();
        std::fs::write(root.join("bin.md"), b"# bin\n\0\x01\x02").unwrap();
        let r = index_vault(&mut store, &root, &opts, |_| {}).unwrap();
        assert_eq!(r.deleted, 2, "{r:?}");
        assert_eq!(r.skipped.len(), 2, "{r:?}");
        for p in ["big.md", "bin.md"] {
            assert!(!store.note_exists(p).unwrap(), "{p} is still indexed");
        }
        // A copy of a note, then the original grows past the cap: no rename (the original did
        // not vanish); the copy is a new note, the original leaves the index.
        std::fs::write(root.join("orig.md"), "# orig\n\nsmall\n").unwrap();
        index_vault(&mut store, &root, &opts, |_| {}).unwrap();
        std::fs::copy(root.join("orig.md"), root.join("copy.md")).unwrap();
        std::fs::write(root.join("orig.md"), "z".repeat(200)).unwrap();
        let r = index_vault(&mut store, &root, &opts, |_| {}).unwrap();
        assert_eq!((r.renamed, r.created, r.deleted), (0, 1, 1), "{r:?}");
        assert!(store.note_exists("copy.md").unwrap() && !store.note_exists("orig.md").unwrap());
        // The same through a save.
        std::fs::write(root.join("saved.md"), "y".repeat(500)).unwrap();
        assert!(matches!(refresh(&mut store, &root, &opts, "saved.md").unwrap(), Applied::Skipped(why) if why.contains("size limit")));
        assert!(!store.note_exists("saved.md").unwrap());
        // Back under the cap: a note again.
        std::fs::write(root.join("saved.md"), "# saved\n\nsmall again\n").unwrap();
        assert!(matches!(refresh(&mut store, &root, &opts, "saved.md").unwrap(), Applied::Saved(..)));
        assert!(store.note_exists("saved.md").unwrap());
    }

    #[test]
    fn a_rescan_skips_files_by_size_and_mtime_and_never_trusts_a_fresh_mtime() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir_all(&root).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let write = |p: &str, body: &str, mtime: std::time::SystemTime| {
            std::fs::write(root.join(p), body).unwrap();
            std::fs::File::options().write(true).open(root.join(p)).unwrap().set_modified(mtime).unwrap();
        };
        write("a.md", "alpha one\n", old);
        write("fresh.md", "fresh one\n", std::time::SystemTime::now());
        let mut store = Store::open(&tmp.path().join("db"), Default::default()).unwrap();
        let r = index_vault(&mut store, &root, &IndexOptions::default(), |_| {}).unwrap();
        assert_eq!(r.created, 2);

        // Same size and mtime: not read at all — so an edit that keeps both is not seen (the
        // documented trade-off, as git's); the scan plans nothing for it.
        write("a.md", "alpha two\n", old);
        let p = plan(&store, &root, &IndexOptions::default(), |_| {}).unwrap();
        assert_eq!(p.report.unchanged, 1, "{:?}", p.steps);
        // The fresh file's mtime was too close to its read to be recorded: it is read again.
        assert!(matches!(&p.steps[..], [Step::Save { rel }] if rel == "fresh.md"), "{:?}", p.steps);

        // Any mtime change: read, hashed, saved.
        write("a.md", "alpha two\n", old + std::time::Duration::from_secs(1));
        let r = index_vault(&mut store, &root, &IndexOptions::default(), |_| {}).unwrap();
        assert_eq!((r.updated, r.unchanged), (1, 1), "{r:?}");
        assert_eq!(store.head_of("a.md").unwrap(), Some(crate::version_id(b"alpha two\n")));
        // A touch without a change costs a read, then is recorded again.
        write("a.md", "alpha two\n", old + std::time::Duration::from_secs(2));
        let p = plan(&store, &root, &IndexOptions::default(), |_| {}).unwrap();
        assert_eq!(p.steps.len(), 2, "{:?}", p.steps);
        for s in &p.steps {
            apply(&mut store, &root, &IndexOptions::default(), s).unwrap();
        }
        let p = plan(&store, &root, &IndexOptions::default(), |_| {}).unwrap();
        assert!(matches!(&p.steps[..], [Step::Save { rel }] if rel == "fresh.md"), "{:?}", p.steps);
    }
}

#[cfg(test)]
mod plan_tests {
    use super::*;
    use crate::StoreOptions;

    /// What a plan's steps say, comparable: ("same"/"save", path), ("rename", from → to),
    /// ("delete", path), in the plan's order.
    fn said(plan: &Plan) -> Vec<(String, String)> {
        plan.steps
            .iter()
            .map(|s| match s {
                Step::Save { rel } if plan.same_bytes.contains(rel) => ("same".to_owned(), rel.clone()),
                Step::Save { rel } => ("save".to_owned(), rel.clone()),
                Step::Rename(r) => ("rename".to_owned(), format!("{} → {}", r.from, r.to)),
                Step::Delete { rel } => ("delete".to_owned(), rel.clone()),
            })
            .collect()
    }

    /// The plan walks the folder's paths beside the index's notes, a page at a time, both in
    /// byte order: names that sort one way by folder and another by byte ("a/b.md" and
    /// "a-b.md"), around the separator, in other scripts and cases, and every page size, give
    /// the same steps: nothing for notes unchanged, and each change once.
    #[test]
    fn a_plan_pages_through_the_index_in_the_folders_order() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        let names = [
            "a.md",
            "a-b.md",
            "a/b.md",
            "a/b/c.md",
            "a0.md",
            "A.md",
            "b.md",
            "é.md",
            "e.md",
            "z z.md",
            "a.b/c.md",
            "ab.md",
            "a/a.md",
            "zz/é/x.md",
            "É.md",
            "a b.md",
            "a!.md",
            "中.md",
            "~.md",
        ];
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let write = |rel: &str, body: &str| {
            let f = root.join(rel);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(&f, body).unwrap();
            // Old enough that its stat is recorded and trusted.
            std::fs::File::options().write(true).open(&f).unwrap().set_modified(past).unwrap();
        };
        for n in names {
            write(n, &format!("# {n}\n\nThe note called {n}.\n"));
        }
        let opts = IndexOptions::default();
        let mut store = Store::open(&tmp.path().join("lode.db"), StoreOptions::default()).unwrap();
        let report = index_vault(&mut store, &root, &opts, |_| {}).unwrap();
        assert_eq!(report.created, names.len());
        for page in [1, 2, 3, 7, 4096] {
            let plan = plan_paged(&store, &root, &opts, |_| {}, page).unwrap();
            assert_eq!(said(&plan), Vec::<(String, String)>::new(), "page size {page}");
            assert_eq!(plan.report.unchanged, names.len(), "page size {page}");
        }

        // One of each change.
        write("a.md", "# a.md\n\nEdited.\n");
        std::fs::remove_file(root.join("a-b.md")).unwrap();
        std::fs::rename(root.join("a/b.md"), root.join("a/b2.md")).unwrap();
        std::fs::write(root.join("é.md"), b"binary\0now").unwrap();
        write("0.md", "# 0\n\nNew.\n");
        write("a/c.md", "# c\n\nNew too.\n");
        std::fs::remove_file(root.join("~.md")).unwrap();
        // Touched, same bytes.
        std::fs::File::options().write(true).open(root.join("中.md")).unwrap().set_modified(std::time::SystemTime::now()).unwrap();
        let s = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        let want = vec![
            s("save", "0.md"),
            s("save", "a.md"),
            s("rename", "a/b.md → a/b2.md"),
            s("save", "a/c.md"),
            s("same", "中.md"),
            s("delete", "a-b.md"),
            s("delete", "~.md"),
            s("delete", "é.md"),
        ];
        for page in [1, 2, 3, 7, 4096] {
            let plan = plan_paged(&store, &root, &opts, |_| {}, page).unwrap();
            assert_eq!(said(&plan), want, "page size {page}");
            assert_eq!(plan.report.unchanged, names.len() - 6, "page size {page}");
            assert!(plan.report.skipped.iter().any(|k| k.path == "é.md"), "page size {page}");
        }
    }
}

#[cfg(test)]
mod blind_scan_tests {
    use super::*;
    use crate::StoreOptions;
    use serde_json::Value;

    /// Applies fixture ops (`fixtures/scan-blind/cases.json`) to the vault at `root`.
    fn run_ops(root: &Path, ops: &Value) {
        let at = |p: &str| {
            let f = root.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            f
        };
        for op in ops.as_array().into_iter().flatten() {
            let s = |k: &str| op[k].as_str().unwrap_or_else(|| panic!("op without {k}: {op}"));
            match s("op") {
                "write" => std::fs::write(at(s("path")), s("text")).unwrap(),
                "write_hex" => {
                    let h = s("hex");
                    let bytes: Vec<u8> = (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect();
                    std::fs::write(at(s("path")), bytes).unwrap()
                }
                "delete" => {
                    let f = root.join(s("path"));
                    if f.is_dir() { std::fs::remove_dir_all(f) } else { std::fs::remove_file(f) }.unwrap()
                }
                "rename" => std::fs::rename(root.join(s("from")), at(s("to"))).unwrap(),
                "bulk" | "bulk_delete" => {
                    let n = op["count"].as_u64().unwrap();
                    let every = op["every"].as_u64().unwrap_or(1).max(1);
                    for i in 0..n {
                        let rel = format!("{}/{}{i}.md", s("dir"), s("prefix"));
                        if s("op") == "bulk" {
                            std::fs::write(at(&rel), s("text").replace("{i}", &i.to_string())).unwrap();
                        } else if i % every == 0 {
                            std::fs::remove_file(root.join(rel)).unwrap();
                        }
                    }
                }
                "oversize" => std::fs::write(at(s("path")), "x".repeat(11 << 20)).unwrap(),
                "symlink" => {
                    #[cfg(unix)]
                    std::os::unix::fs::symlink(s("target"), at(s("path"))).unwrap();
                }
                other => panic!("unknown op {other}"),
            }
        }
    }

    fn heads(store: &Store) -> Vec<(String, String)> {
        store.heads_with_stat().unwrap().into_iter().map(|(p, v, _)| (p, v)).collect()
    }

    /// Scans written blind by a helper who saw neither the plan nor its tests (names that sort
    /// differently by byte and by folder, vaults of several pages, renames, chains, swaps,
    /// notes turning binary, UTF-16, oversize, hidden, ignored, symlinked and back): after the
    /// scan — with pages of 1, 3 and 4,096 notes — the index holds exactly what a fresh index
    /// of the same folder holds, every note is counted once, and each listed rename kept the
    /// note's history. All failures are reported together.
    #[test]
    fn blind_scans_leave_the_index_as_a_fresh_index_of_the_folder() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scan-blind/cases.json");
        let cases: Value = serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
        let opts = IndexOptions::default();
        let mut failed = Vec::new();
        for case in cases["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("vault");
            std::fs::create_dir_all(&root).unwrap();
            run_ops(&root, &case["before"]);
            let first = tmp.path().join("before.db");
            let histories: Vec<(String, Vec<String>)>;
            {
                let mut store = Store::open(&first, StoreOptions::default()).unwrap();
                index_vault(&mut store, &root, &opts, |_| {}).unwrap();
                let renamed = case["renamed"].as_array().cloned().unwrap_or_default();
                histories = renamed
                    .iter()
                    .map(|r| {
                        let from = r[0].as_str().unwrap().to_owned();
                        let h = store.history(&from).unwrap();
                        (from, h)
                    })
                    .collect();
            }
            run_ops(&root, &case["after"]);
            let fresh = {
                let mut store = Store::open(&tmp.path().join("fresh.db"), StoreOptions::default()).unwrap();
                index_vault(&mut store, &root, &opts, |_| {}).unwrap();
                heads(&store)
            };
            for page in [1, 3, HEADS_PAGE] {
                let db = tmp.path().join(format!("page-{page}.db"));
                std::fs::copy(&first, &db).unwrap();
                let mut store = Store::open(&db, StoreOptions::default()).unwrap();
                let Plan { steps, mut report, .. } = plan_paged(&store, &root, &opts, |_| {}, page).unwrap();
                apply_steps(&mut store, &root, &opts, &steps, 7, &mut report, &mut |_| {}, |_, _| {}).unwrap();
                finish(&mut store, &report).unwrap();
                let got = heads(&store);
                if got != fresh {
                    let only = |a: &[(String, String)], b: &[(String, String)]| {
                        a.iter().filter(|x| !b.contains(x)).map(|x| x.0.clone()).collect::<Vec<_>>()
                    };
                    failed.push(format!("{name} (page {page}): index only {:?}; folder only {:?}", only(&got, &fresh), only(&fresh, &got)));
                    continue;
                }
                let counted = report.created + report.updated + report.unchanged + report.renamed;
                if counted != fresh.len() {
                    failed.push(format!("{name} (page {page}): {counted} notes counted, {} in the folder: {report:?}", fresh.len()));
                }
                for (r, (from, before)) in case["renamed"].as_array().into_iter().flatten().zip(&histories) {
                    let to = r[1].as_str().unwrap();
                    let after = store.history(to).unwrap();
                    if before.is_empty() || !after.starts_with(before) {
                        failed.push(format!("{name} (page {page}): {from} → {to} lost its history ({before:?} → {after:?})"));
                    }
                }
                match store.verify() {
                    Ok(v) if v.problems.is_empty() => {}
                    Ok(v) => failed.push(format!("{name} (page {page}): verify: {:?}", v.problems)),
                    Err(e) => failed.push(format!("{name} (page {page}): verify: {e}")),
                }
            }
        }
        assert!(failed.is_empty(), "{} failures:\n{}", failed.len(), failed.join("\n"));
    }
}

#[cfg(test)]
mod ahead_tests {
    use super::*;
    use crate::StoreOptions;

    /// A note read and chunked ahead of its save, then changed on disk before the writer gets to
    /// it: the save indexes the bytes on disk now (with their own chunking), never the prepared
    /// ones; an unchanged note uses its prepared chunking; `index_vault` (which prepares on a
    /// thread of its own) indexes a vault exactly as saving each note alone does.
    #[test]
    fn a_chunking_made_ahead_is_used_only_for_the_bytes_it_was_made_from() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.md"), "# A\n\nThe launch moves to March.\n").unwrap();
        std::fs::write(root.join("b.md"), "# B\n\nThe vendor is late. #risk\n").unwrap();
        let opts = IndexOptions::default();
        let mut store = Store::open(&tmp.path().join("lode.db"), StoreOptions::default()).unwrap();
        let ahead = crate::Prechunked::with_capacity(8);
        store.set_prechunked(ahead.clone());
        let cfg = store.options().chunk;
        let Plan { steps, .. } = plan(&store, &root, &opts, |_| {}).unwrap();
        prepare_steps(&root, &opts, &cfg, &steps).into_iter().for_each(|p| p.hand_over(&ahead, &cfg));
        std::fs::write(root.join("a.md"), "# A\n\nThe launch moves to April.\n\nA second paragraph.\n").unwrap();
        for step in &steps {
            apply(&mut store, &root, &opts, step).unwrap();
        }
        assert_eq!(ahead.used(), 1, "only b.md's prepared chunking matched its bytes");
        let a: Vec<String> = store.passages_of("a.md").unwrap().into_iter().map(|p| p.text).collect();
        assert!(a.iter().any(|t| t.contains("April")) && a.iter().any(|t| t.contains("second")), "{a:?}");
        assert!(!a.iter().any(|t| t.contains("March")), "{a:?}");

        // The whole scan, prepared on its own thread, against notes saved one by one.
        let many = tmp.path().join("many");
        std::fs::create_dir_all(&many).unwrap();
        for i in 0..300 {
            let tag = if i % 3 == 0 { format!(" #t{i}") } else { String::new() };
            std::fs::write(
                many.join(format!("n{i:03}.md")),
                format!("# Note {i}\n\nBody of note {i}{tag}.\n\n- item [[n{:03}]]\n", (i + 1) % 300),
            )
            .unwrap();
        }
        let mut bulk = Store::open(&tmp.path().join("bulk.db"), StoreOptions::default()).unwrap();
        let report = index_vault(&mut bulk, &many, &opts, |_| {}).unwrap();
        assert_eq!(report.created, 300);
        let mut one = Store::open(&tmp.path().join("one.db"), StoreOptions::default()).unwrap();
        for i in 0..300 {
            let rel = format!("n{i:03}.md");
            one.save_note(&rel, &std::fs::read(many.join(&rel)).unwrap()).unwrap();
        }
        one.resolve_links().unwrap();
        let dump = |s: &Store| {
            let c = &s.conn;
            let q = |sql: &str| -> Vec<String> {
                let mut st = c.prepare(sql).unwrap();
                st.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
            };
            (
                q("SELECT n.path || '|' || p.ordinal || '|' || p.heading || '|' || p.text FROM passages p JOIN notes n ON n.id = p.note_id ORDER BY n.path, p.ordinal"),
                q("SELECT n.path || '|' || t.tag || '|' || t.start FROM tags t JOIN notes n ON n.id = t.note_id ORDER BY n.path, t.start"),
                q("SELECT n.path || '|' || l.target || '|' || coalesce(m.path, '-') FROM links l JOIN notes n ON n.id = l.src_note LEFT JOIN notes m ON m.id = l.target_note ORDER BY n.path, l.start"),
            )
        };
        let (bp, bt, bl) = dump(&bulk);
        let (op, ot, ol) = dump(&one);
        assert_eq!(bp.len(), op.len());
        assert_eq!(bp, op);
        assert_eq!(bt.len(), 100);
        assert_eq!(bt, ot);
        assert_eq!(bl, ol);
        assert!(bl.iter().all(|l| !l.ends_with("|-")), "every link resolved: {bl:?}");
    }
}
