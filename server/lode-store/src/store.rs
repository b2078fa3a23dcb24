//! The store proper: open (with migrations and clear errors), save a note as a new head version
//! with its passages, FTS5 rows and links in one transaction, delete, rename, read back.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lode_core::chunk::{chunk_note, ChunkConfig, ChunkedNote};
use lode_core::links::LinkKind;
use lode_core::text::line_of;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::error::StoreError;
use crate::migrate::{self, Outcome};

thread_local! {
    /// Frames in the write-ahead log after the last commit on this thread (see
    /// [`Store::watch_log`]).
    static LOG_FRAMES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Frames at which a commit on a watched connection checkpoints itself.
static LOG_BACKSTOP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1000);

/// Frames the write-ahead log held right after this thread's last commit on a connection set up
/// with [`Store::watch_log`] (0 before any). The log starts over once a checkpoint has copied
/// it all back and no reader needs it, so the count falls again.
pub fn log_frames() -> u32 {
    LOG_FRAMES.with(|f| f.get())
}

/// SQLite's WAL hook: runs inside each commit, on the committing thread.
fn on_commit(wal: &rusqlite::hooks::Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
    let frames = frames.max(0) as u32;
    LOG_FRAMES.with(|f| f.set(frames));
    if frames >= LOG_BACKSTOP.load(std::sync::atomic::Ordering::Relaxed) {
        // A busy or incomplete checkpoint is no failure of the commit (nor is it in SQLite's
        // own hook): the next commit tries again.
        let _ = wal.checkpoint();
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub chunk: ChunkConfig,
    /// How long a write waits for another process's lock before failing with `Locked`.
    pub busy_timeout: Duration,
    /// Open without creating or migrating; writes fail.
    pub read_only: bool,
    /// With `read_only`: read the file as it is, taking no locks and making no shared-memory
    /// file (SQLite's `immutable`), for a disk too full to make one. Only while nothing can
    /// write to it (a full disk), since changes made meanwhile are not seen.
    pub immutable: bool,
    /// SQLite page cache per connection, in KiB.
    pub cache_kib: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { chunk: ChunkConfig::default(), busy_timeout: Duration::from_secs(5), read_only: false, immutable: false, cache_kib: 16 * 1024 }
    }
}

pub struct Store {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    pub(crate) opts: StoreOptions,
    /// Chunkings prepared ahead of saves (the language server's open buffers).
    prechunked: Option<crate::Prechunked>,
}

/// One write: its own IMMEDIATE transaction, or a part of the open batch. Not a savepoint:
/// FTS5 flushes its pending terms to a new segment at every savepoint, which is the very cost a
/// batch exists to avoid. So a write that fails (or panics) inside a batch rolls the whole batch
/// back, and whoever runs the batch applies its steps again one at a time
/// ([`crate::vault::apply_batch`]).
pub(crate) enum WriteTx<'a> {
    Own(rusqlite::Transaction<'a>),
    Batch(BatchWrite<'a>),
}

pub(crate) struct BatchWrite<'a> {
    conn: &'a Connection,
    done: bool,
}

impl Drop for BatchWrite<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

impl std::ops::Deref for WriteTx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        match self {
            WriteTx::Own(t) => t,
            WriteTx::Batch(b) => b.conn,
        }
    }
}

impl WriteTx<'_> {
    pub(crate) fn commit(self) -> rusqlite::Result<()> {
        match self {
            WriteTx::Own(t) => t.commit(),
            WriteTx::Batch(mut b) => {
                b.done = true;
                Ok(())
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SaveStatus {
    Created,
    Updated,
    Unchanged,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SaveOutcome {
    pub note_id: i64,
    pub version_id: String,
    pub status: SaveStatus,
    pub passages: usize,
    /// The bytes were not valid UTF-8 and were indexed with replacement characters.
    pub lossy: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct NoteInfo {
    pub id: i64,
    pub path: String,
    pub title: String,
    pub head_version: Option<String>,
}

/// A file's size and modification time, as the scan compares them to skip unchanged files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskStat {
    pub size: u64,
    pub mtime_ns: i64,
}

impl DiskStat {
    pub fn of(meta: &std::fs::Metadata) -> Option<DiskStat> {
        let mtime = meta.modified().ok()?;
        let ns = match mtime.duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_nanos()).ok()?,
            Err(e) => -i64::try_from(e.duration().as_nanos()).ok()?,
        };
        Some(DiskStat { size: meta.len(), mtime_ns: ns })
    }

    /// Whether the mtime is old enough, at `read_at`, that a write after the read would show as a new mtime:
    /// filesystems keep mtimes at a granularity of up to 2 s (FAT), often 1–10 ms, so a file
    /// modified within that window of being read could change again without its mtime moving.
    pub fn settled(&self, read_at: std::time::SystemTime) -> bool {
        let Ok(now) = read_at.duration_since(std::time::UNIX_EPOCH) else { return false };
        (now.as_nanos() as i64).saturating_sub(self.mtime_ns) > 2_000_000_000
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct PassageRow {
    pub id: i64,
    pub note_id: i64,
    pub version_id: String,
    pub ordinal: i64,
    pub start: usize,
    pub end: usize,
    pub line: usize,
    pub kind: String,
    pub heading: String,
    pub parent_start: usize,
    pub parent_end: usize,
    pub text: String,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Stats {
    pub notes: i64,
    /// Externals with a snapshot (their heads are indexed like notes).
    pub snapshots: i64,
    pub deleted_notes: i64,
    pub versions: i64,
    pub passages: i64,
    pub links: i64,
    pub unresolved_links: i64,
    pub lossy_notes: i64,
    pub db_bytes: u64,
    pub schema_version: i64,
}

/// Now, in unix milliseconds (the unit of every time the store records).
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn stem_of(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    stem.to_lowercase()
}

/// The key a link is resolved by: see `links.target_key` in the schema.
fn link_key(src_path: &str, kind: LinkKind, target: &str) -> String {
    if target.contains("://") || target.starts_with("mailto:") {
        return target.to_owned();
    }
    match kind {
        // The navigation rule, so the index and goto agree (percent escapes decoded too).
        LinkKind::Markdown => lode_core::nav::resolve_markdown(src_path, target, false),
        LinkKind::Wiki => target.trim().trim_end_matches(".md").to_lowercase(),
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    /// A locked, corrupt or newer-schema file is refused with an error naming it; nothing is
    /// ever re-created over an existing file.
    pub fn open(path: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        if !opts.read_only {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|source| StoreError::Open { path: path.to_path_buf(), source })?;
            }
        }
        let flags = if opts.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let err = |e| StoreError::from_sqlite(path, e);
        let mut conn = if opts.read_only && opts.immutable {
            let uri = format!("file:{}?immutable=1", path.display().to_string().replace('%', "%25").replace('?', "%3f").replace('#', "%23"));
            Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI).map_err(err)?
        } else {
            Connection::open_with_flags(path, flags).map_err(err)?
        };
        conn.busy_timeout(opts.busy_timeout).map_err(err)?;
        // Reading the schema version is the first touch of the file: a corrupt or foreign file
        // fails here, before anything is written.
        let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(err)?;
        if found > migrate::SCHEMA_VERSION {
            return Err(StoreError::TooNew { path: path.to_path_buf(), found, supported: migrate::SCHEMA_VERSION });
        }
        check_schema(&conn, path, found)?;
        if !opts.read_only {
            let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(err)?;
            if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
                tracing_free_warn(&format!("{}: journal mode is {mode}, not WAL", path.display()));
            }
            // Temporary tables and sorts stay in memory, except while migrating: with
            // `temp_store=MEMORY` SQLite never spills a sort to disk, and the v8 sections
            // backfill sorted 1.85M passages of a 100k-note vault in memory (peak 205 MB).
            conn.execute_batch(&format!("PRAGMA synchronous=NORMAL; PRAGMA temp_store=FILE; PRAGMA cache_size=-{};", opts.cache_kib))
                .map_err(err)?;
            match migrate::migrate(&mut conn).map_err(err)? {
                Outcome::TooNew { found } => {
                    return Err(StoreError::TooNew { path: path.to_path_buf(), found, supported: migrate::SCHEMA_VERSION })
                }
                Outcome::UpToDate => {}
                Outcome::Migrated => {
                    if found >= 1 && found < 4 {
                        backfill_sections(&mut conn).map_err(err)?;
                    }
                    if found >= 1 && found < 6 {
                        backfill_from_heads(&mut conn, &opts.chunk, found < 5).map_err(err)?;
                    }
                }
            }
            conn.execute_batch("PRAGMA temp_store=MEMORY").map_err(err)?;
        } else if found < migrate::SCHEMA_VERSION {
            return Err(StoreError::Outdated { path: path.to_path_buf(), found, supported: migrate::SCHEMA_VERSION });
        }
        // Damaged pages surface as SQLITE_CORRUPT on first use (mapped to `Corrupt`); a full
        // check reads the whole file, so it is `verify` (`lode stats --check`), not every open.
        Ok(Store { conn, path: path.to_path_buf(), opts, prechunked: None })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Saves look up chunkings prepared by `p` before parsing (see [`crate::Prechunked`]).
    pub fn set_prechunked(&mut self, p: crate::Prechunked) {
        self.prechunked = Some(p);
    }

    /// Replaces SQLite's automatic checkpoint on this connection with one that also reports the
    /// log's size. After each commit on this connection, [`log_frames`] on the committing
    /// thread says how many frames the log holds, so the caller can ask another connection to
    /// copy them back before the log is long. A commit that leaves `backstop` frames or more
    /// checkpoints itself (passive, as SQLite's own does at 1000): the bound for a caller that
    /// never gets round to it. `backstop` is process-wide: the last value set holds.
    pub fn watch_log(&self, backstop: u32) {
        LOG_BACKSTOP.store(backstop.max(1), std::sync::atomic::Ordering::Relaxed);
        self.conn.wal_hook(Some(on_commit));
    }

    /// Copies committed pages from the log back into the database, as far as no reader still
    /// needs them (`PASSIVE`: it waits for no one). Returns (pages in the log, pages copied).
    pub fn checkpoint(&self) -> Result<(i64, i64), StoreError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)))
            .map_err(|e| self.err(e))
    }

    /// Keeps the log file at most this size once a checkpoint has emptied it (a cold scan
    /// grows it to hundreds of MB; SQLite otherwise keeps the file at its largest).
    pub fn set_journal_size_limit(&self, bytes: i64) -> Result<(), StoreError> {
        self.conn.pragma_update(None, "journal_size_limit", bytes).map_err(|e| self.err(e))
    }

    /// Starts a batch: the writes until [`Store::end_batch`] commit together. Bulk indexing pays
    /// one commit, and one full-text segment flush, per batch instead of per note. Readers see
    /// none of a batch until it ends. A write that fails inside rolls the whole batch back
    /// ([`Store::in_batch`] turns false): use [`crate::vault::apply_batch`].
    pub fn begin_batch(&mut self) -> Result<(), StoreError> {
        if !self.conn.is_autocommit() {
            return Ok(());
        }
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| self.err(e))
    }

    /// Commits the open batch, if any. On failure the whole batch is rolled back.
    pub fn end_batch(&mut self) -> Result<(), StoreError> {
        if self.conn.is_autocommit() {
            return Ok(());
        }
        if let Err(e) = self.conn.execute_batch("COMMIT") {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(self.err(e));
        }
        Ok(())
    }

    /// Whether a batch is open.
    pub fn in_batch(&self) -> bool {
        !self.conn.is_autocommit()
    }

    pub(crate) fn write_tx(&mut self) -> rusqlite::Result<WriteTx<'_>> {
        if self.conn.is_autocommit() {
            self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map(WriteTx::Own)
        } else {
            Ok(WriteTx::Batch(BatchWrite { conn: &self.conn, done: false }))
        }
    }

    pub fn options(&self) -> &StoreOptions {
        &self.opts
    }

    pub(crate) fn err(&self, e: rusqlite::Error) -> StoreError {
        StoreError::from_sqlite(&self.path, e)
    }

    /// Runs a (cached) query and collects its rows.
    pub(crate) fn rows<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        let mut st = self.conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let rows = st.query_map(params, map).and_then(|it| it.collect::<Result<Vec<_>, _>>()).map_err(|e| self.err(e));
        rows
    }

    /// Head version id of the note at `path`, if it exists and is not deleted.
    pub fn head_of(&self, path: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row("SELECT head_version FROM notes WHERE path = ?1", [path], |r| r.get::<_, Option<String>>(0))
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.err(e))
    }

    /// Saves `bytes` as the new head of the note at `path` (creating the note if needed), and
    /// replaces its passages, FTS5 rows and links — all in one transaction. Unchanged bytes
    /// make no new version.
    pub fn save_note(&mut self, path: &str, bytes: &[u8]) -> Result<SaveOutcome, StoreError> {
        let vid = crate::version_id(bytes);
        let existing: Option<(i64, Option<String>)> = self
            .conn
            .query_row("SELECT id, head_version FROM notes WHERE path = ?1", [path], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(|e| self.err(e))?;
        if let Some((id, Some(head))) = &existing {
            if *head == vid {
                let passages: i64 = self
                    .conn
                    .query_row("SELECT count(*) FROM passages WHERE note_id = ?1", [id], |r| r.get(0))
                    .map_err(|e| self.err(e))?;
                return Ok(SaveOutcome {
                    note_id: *id,
                    version_id: vid,
                    status: SaveStatus::Unchanged,
                    passages: passages as usize,
                    lossy: std::str::from_utf8(bytes).is_err(),
                });
            }
        }
        let chunked = match self.prechunked.as_ref().and_then(|p| p.take(&vid, &self.opts.chunk)) {
            Some(c) => c,
            None => std::sync::Arc::new(chunk_note(bytes, &self.opts.chunk)),
        };
        let path_buf = self.path.clone();
        let tx = self.write_tx().map_err(|e| StoreError::from_sqlite(&path_buf, e))?;
        let out = write_note(&tx, path, bytes, &vid, &chunked, true, false)
            .and_then(|o| tx.commit().map(|_| o))
            .map_err(|e| StoreError::from_sqlite(&path_buf, e))?;
        Ok(out)
    }

    /// Marks the note deleted: its passages and outgoing links leave the index, its versions stay.
    pub fn delete_note(&mut self, path: &str) -> Result<bool, StoreError> {
        let path_buf = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path_buf, e);
        let tx = self.write_tx().map_err(e)?;
        let id: Option<i64> = tx
            .query_row("SELECT id FROM notes WHERE path = ?1 AND head_version IS NOT NULL", [path], |r| r.get(0))
            .optional()
            .map_err(e)?;
        let Some(id) = id else {
            tx.commit().map_err(e)?;
            return Ok(false);
        };
        tx.execute(
            "UPDATE notes SET head_version = NULL, updated_at = ?2, disk_size = NULL, disk_mtime = NULL WHERE id = ?1",
            params![id, now_ms()],
        )
        .map_err(e)?;
        tx.execute("DELETE FROM passages WHERE note_id = ?1", [id]).map_err(e)?;
        tx.execute("DELETE FROM sections WHERE note_id = ?1", [id]).map_err(e)?;
        tx.execute("DELETE FROM links WHERE src_note = ?1", [id]).map_err(e)?;
        tx.execute("DELETE FROM tags WHERE note_id = ?1", [id]).map_err(e)?;
        tx.execute("DELETE FROM aliases WHERE note_id = ?1", [id]).map_err(e)?;
        tx.execute("DELETE FROM headings WHERE note_id = ?1", [id]).map_err(e)?;
        tx.execute("UPDATE links SET target_note = NULL WHERE target_note = ?1", [id]).map_err(e)?;
        tx.commit().map_err(e)?;
        Ok(true)
    }

    /// Moves a note to a new path, keeping its id, history and passages.
    pub fn rename_note(&mut self, from: &str, to: &str) -> Result<(), StoreError> {
        let path_buf = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path_buf, e);
        let tx = self.write_tx().map_err(e)?;
        let id: i64 = tx
            .query_row("SELECT id FROM notes WHERE path = ?1", [from], |r| r.get(0))
            .optional()
            .map_err(e)?
            .ok_or_else(|| StoreError::UnknownNote(from.to_owned()))?;
        let taken: Option<(i64, Option<String>)> = tx
            .query_row("SELECT id, head_version FROM notes WHERE path = ?1", [to], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(e)?;
        match taken {
            Some((_, Some(_))) => return Err(StoreError::PathTaken(to.to_owned())),
            // A deleted note's old path is reused: give that history row a tombstone path.
            Some((old, None)) => {
                tx.execute("UPDATE notes SET path = path || '#deleted-' || id WHERE id = ?1", [old]).map_err(e)?;
            }
            None => {}
        }
        tx.execute(
            "UPDATE notes SET path = ?2, stem = ?3, updated_at = ?4 WHERE id = ?1",
            params![id, to, stem_of(to), now_ms()],
        )
        .map_err(e)?;
        // Links written against the old path no longer name this note; links naming the new one do.
        tx.execute("UPDATE links SET target_note = NULL WHERE target_note = ?1", [id]).map_err(e)?;
        resolve_incoming(&tx, id, to).map_err(e)?;
        // Outgoing markdown links are relative to the note's folder: re-key them.
        let mut rows: Vec<(i64, String, String)> = Vec::new();
        {
            let mut st = tx.prepare("SELECT rowid, kind, target FROM links WHERE src_note = ?1").map_err(e)?;
            let it = st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(e)?;
            for row in it {
                rows.push(row.map_err(e)?);
            }
        }
        for (rowid, kind, target) in rows {
            let kind = if kind == "wiki" { LinkKind::Wiki } else { LinkKind::Markdown };
            let key = link_key(to, kind, &target);
            let resolved = resolve_key(&tx, kind, &key).map_err(e)?;
            tx.execute("UPDATE links SET target_key = ?2, target_note = ?3 WHERE rowid = ?1", params![rowid, key, resolved])
                .map_err(e)?;
        }
        tx.commit().map_err(e)?;
        Ok(())
    }

    /// Live notes (with a head version), by path.
    pub fn notes(&self) -> Result<Vec<NoteInfo>, StoreError> {
        let rows = self.rows("SELECT id, path, title, head_version FROM notes WHERE head_version IS NOT NULL AND kind = 'note' ORDER BY path", [], |r| Ok(NoteInfo { id: r.get(0)?, path: r.get(1)?, title: r.get(2)?, head_version: r.get(3)? }))?;
        Ok(rows)
    }

    /// Live notes with their head version and the file's size and mtime when that head was read
    /// from disk (`None`: not known to match the file), by path.
    pub fn heads_with_stat(&self) -> Result<Vec<(String, String, Option<DiskStat>)>, StoreError> {
        self.rows(
            "SELECT path, head_version, disk_size, disk_mtime FROM notes WHERE head_version IS NOT NULL AND kind = 'note' ORDER BY path",
            [],
            |r| {
                let stat = match (r.get::<_, Option<i64>>(2)?, r.get::<_, Option<i64>>(3)?) {
                    (Some(size), Some(mtime_ns)) => Some(DiskStat { size: size as u64, mtime_ns }),
                    _ => None,
                };
                Ok((r.get(0)?, r.get(1)?, stat))
            },
        )
    }

    /// Records that the head `version_id` of the note at `path` is exactly the file with `stat`
    /// (taken at `read_at`, before its bytes were read). A no-op when the head has changed
    /// meanwhile, or when the mtime is too close to the read to tell a later write in the same
    /// clock tick apart (the file is then re-read on the next scan).
    pub fn record_stat(&self, path: &str, version_id: &str, stat: DiskStat, read_at: std::time::SystemTime) -> Result<bool, StoreError> {
        if !stat.settled(read_at) {
            return Ok(false);
        }
        let n = self
            .conn
            .prepare_cached("UPDATE notes SET disk_size = ?3, disk_mtime = ?4 WHERE path = ?1 AND head_version = ?2")
            .and_then(|mut st| st.execute(params![path, version_id, stat.size as i64, stat.mtime_ns]))
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    /// Whether any live note's path lies under the folder `prefix` (vault-relative, no slash at
    /// either end).
    pub fn any_note_under(&self, prefix: &str) -> Result<bool, StoreError> {
        // Paths under `p/` sort between `p/` and `p0` ('0' follows '/').
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM notes WHERE head_version IS NOT NULL AND kind = 'note' AND path >= ?1 || '/' AND path < ?1 || '0')",
                [prefix],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// Live notes carrying a tag (case-insensitive): `(path, head version, start, end)` of every
    /// occurrence, by path.
    pub fn tagged(&self, tag: &str, limit: usize) -> Result<Vec<(String, String, usize, usize)>, StoreError> {
        self.rows(
            "SELECT n.path, n.head_version, t.start, t.end FROM tags t JOIN notes n ON n.id = t.note_id
              WHERE t.folded = ?1 AND n.head_version IS NOT NULL ORDER BY n.path, t.start LIMIT ?2",
            params![tag.to_lowercase(), limit as i64],
            |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as usize, r.get::<_, i64>(3)? as usize)),
        )
    }

    /// Live notes carrying `tag` or a tag nested under it (`tag/…`), case-insensitive, by path.
    pub fn notes_tagged_under(&self, tag: &str) -> Result<Vec<String>, StoreError> {
        self.rows(
            "SELECT DISTINCT n.path FROM tags t JOIN notes n ON n.id = t.note_id
              WHERE (t.folded = ?1 OR (t.folded >= ?1 || '/' AND t.folded < ?1 || '0')) AND n.head_version IS NOT NULL
              ORDER BY n.path",
            [tag.to_lowercase()],
            |r| r.get(0),
        )
    }

    /// Tags in use that start with `prefix` (case-insensitive), most used first: `(tag, notes)`.
    pub fn tags_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<(String, usize)>, StoreError> {
        self.rows(
            "SELECT min(tag), count(DISTINCT note_id) AS n FROM tags
              WHERE folded >= ?1 AND folded < ?1 || char(1114111) GROUP BY folded ORDER BY n DESC, folded LIMIT ?2",
            params![prefix.to_lowercase(), limit as i64],
            |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize)),
        )
    }

    /// Candidates for a wiki-link target: live notes whose file stem, title or an alias equals
    /// `name` (case-insensitive): `(path, title, aliases)`.
    pub fn wiki_candidates(&self, name: &str) -> Result<Vec<(String, String, Vec<String>)>, StoreError> {
        let folded = name.trim().to_lowercase();
        let stem = folded.rsplit('/').next().unwrap_or(&folded).trim_end_matches(".md").to_owned();
        let rows: Vec<(i64, String, String)> = self.rows(
            "SELECT id, path, title FROM notes WHERE head_version IS NOT NULL AND kind = 'note' AND (stem = ?1 OR lower(title) = ?2
                 OR id IN (SELECT note_id FROM aliases WHERE folded = ?2)) ORDER BY length(path), path LIMIT 200",
            params![stem, folded],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, path, title) in rows {
            let aliases = self.rows("SELECT alias FROM aliases WHERE note_id = ?1", [id], |r| r.get(0))?;
            out.push((path, title, aliases));
        }
        Ok(out)
    }

    /// Notes for link completion: whose stem, title or an alias starts with `prefix`, or (three
    /// characters or more) whose title contains it; `(path, title, matched alias)`, best first.
    pub fn complete_notes(&self, prefix: &str, limit: usize) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        let folded = prefix.trim().to_lowercase();
        let mut out: Vec<(String, String, Option<String>)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let cap = limit as i64;
        let mut push = |out: &mut Vec<_>, path: String, title: String, alias: Option<String>| {
            if seen.insert(path.clone()) {
                out.push((path, title, alias));
            }
        };
        for (p, t) in self.rows(
            "SELECT path, title FROM notes WHERE head_version IS NOT NULL AND kind = 'note' AND stem >= ?1 AND stem < ?1 || char(1114111)
              ORDER BY stem, length(path) LIMIT ?2",
            params![folded, cap],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )? {
            push(&mut out, p, t, None);
        }
        for (p, t) in self.rows(
            "SELECT path, title FROM notes WHERE head_version IS NOT NULL AND kind = 'note' AND lower(title) >= ?1
                AND lower(title) < ?1 || char(1114111) ORDER BY lower(title) LIMIT ?2",
            params![folded, cap],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )? {
            push(&mut out, p, t, None);
        }
        for (p, t, a) in self.rows(
            "SELECT n.path, n.title, a.alias FROM aliases a JOIN notes n ON n.id = a.note_id
              WHERE a.folded >= ?1 AND a.folded < ?1 || char(1114111) AND n.head_version IS NOT NULL LIMIT ?2",
            params![folded, cap],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)),
        )? {
            push(&mut out, p, t, Some(a));
        }
        if folded.chars().count() >= 3 && out.len() < limit {
            let phrase = format!("\"{}\"", prefix.trim().replace('"', "\"\""));
            for (p, t) in self.rows(
                "SELECT n.path, n.title FROM titles_tri x JOIN notes n ON n.id = x.rowid
                  WHERE titles_tri MATCH ?1 AND n.head_version IS NOT NULL AND n.kind = 'note' LIMIT ?2",
                params![phrase, cap],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )? {
                push(&mut out, p, t, None);
            }
        }
        out.truncate(limit);
        Ok(out)
    }

    /// Live notes with a link to the note at `path` (resolved by the store): `(path, head version)`.
    pub fn linking_notes(&self, path: &str) -> Result<Vec<(String, String)>, StoreError> {
        self.rows(
            "SELECT DISTINCT s.path, s.head_version FROM notes t JOIN links l ON l.target_note = t.id
               JOIN notes s ON s.id = l.src_note
              WHERE t.path = ?1 AND s.head_version IS NOT NULL ORDER BY s.path",
            [path],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// Whether a live note exists at `path`.
    pub fn note_exists(&self, path: &str) -> Result<bool, StoreError> {
        Ok(self.head_of(path)?.is_some())
    }

    /// The stored bytes of a version.
    pub fn version_body(&self, version_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.conn
            .query_row("SELECT body FROM versions WHERE id = ?1", [version_id], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Version ids of a note, oldest first.
    pub fn history(&self, path: &str) -> Result<Vec<String>, StoreError> {
        let rows = self.rows("SELECT v.version_id FROM note_versions v JOIN notes n ON n.id = v.note_id WHERE n.path = ?1 ORDER BY v.seq", [path], |r| r.get(0))?;
        Ok(rows)
    }

    /// Passages of the head version of the note at `path`, in order.
    pub fn passages_of(&self, path: &str) -> Result<Vec<PassageRow>, StoreError> {
        let rows = self.rows("SELECT p.id, p.note_id, p.version_id, p.ordinal, p.start, p.end, p.line, p.kind, p.heading,
                        p.parent_start, p.parent_end, p.text
                 FROM passages p JOIN notes n ON n.id = p.note_id WHERE n.path = ?1 ORDER BY p.ordinal", [path], |r| {
                Ok(PassageRow {
                    id: r.get(0)?,
                    note_id: r.get(1)?,
                    version_id: r.get(2)?,
                    ordinal: r.get(3)?,
                    start: r.get::<_, i64>(4)? as usize,
                    end: r.get::<_, i64>(5)? as usize,
                    line: r.get::<_, i64>(6)? as usize,
                    kind: r.get(7)?,
                    heading: r.get(8)?,
                    parent_start: r.get::<_, i64>(9)? as usize,
                    parent_end: r.get::<_, i64>(10)? as usize,
                    text: r.get(11)?,
                })
            })?;
        Ok(rows)
    }

    /// Outgoing links of the note at `path`: `(kind, target, resolved target path)`.
    pub fn links_of(&self, path: &str) -> Result<Vec<(String, String, Option<String>)>, StoreError> {
        let rows = self.rows("SELECT l.kind, l.target, t.path FROM links l JOIN notes n ON n.id = l.src_note
                 LEFT JOIN notes t ON t.id = l.target_note WHERE n.path = ?1 ORDER BY l.start", [path], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows)
    }

    /// Resolves links whose target did not exist when they were written.
    pub fn resolve_links(&mut self) -> Result<usize, StoreError> {
        let path_buf = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path_buf, e);
        let tx = self.write_tx().map_err(e)?;
        let mut pending: Vec<(i64, String, String)> = Vec::new();
        {
            let mut st = tx.prepare("SELECT rowid, kind, target_key FROM links WHERE target_note IS NULL").map_err(e)?;
            let it = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(e)?;
            for row in it {
                pending.push(row.map_err(e)?);
            }
        }
        let mut n = 0;
        for (rowid, kind, key) in pending {
            let kind = if kind == "wiki" { LinkKind::Wiki } else { LinkKind::Markdown };
            if let Some(id) = resolve_key(&tx, kind, &key).map_err(e)? {
                tx.execute("UPDATE links SET target_note = ?2 WHERE rowid = ?1", params![rowid, id]).map_err(e)?;
                n += 1;
            }
        }
        tx.commit().map_err(e)?;
        Ok(n)
    }

    pub fn stats(&self) -> Result<Stats, StoreError> {
        let q = |sql: &str| self.conn.query_row(sql, [], |r| r.get::<_, i64>(0)).map_err(|e| self.err(e));
        let page_count = q("PRAGMA page_count")?;
        let page_size = q("PRAGMA page_size")?;
        let wal = std::fs::metadata(self.path.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0);
        Ok(Stats {
            notes: q("SELECT count(*) FROM notes WHERE head_version IS NOT NULL AND kind = 'note'")?,
            snapshots: q("SELECT count(*) FROM notes WHERE head_version IS NOT NULL AND kind = 'snapshot'")?,
            deleted_notes: q("SELECT count(*) FROM notes WHERE head_version IS NULL")?,
            versions: q("SELECT count(*) FROM versions")?,
            passages: q("SELECT count(*) FROM passages")?,
            links: q("SELECT count(*) FROM links")?,
            unresolved_links: q("SELECT count(*) FROM links WHERE target_note IS NULL AND target_key NOT LIKE '%://%' AND target NOT LIKE 'mailto:%'")?,
            lossy_notes: q("SELECT count(*) FROM notes n JOIN versions v ON v.id = n.head_version WHERE v.lossy = 1")?,
            db_bytes: (page_count * page_size) as u64 + wal,
            schema_version: q("PRAGMA user_version")?,
        })
    }
}

fn tracing_free_warn(msg: &str) {
    eprintln!("warning: {msg}");
}

fn resolve_key(conn: &Connection, kind: LinkKind, key: &str) -> rusqlite::Result<Option<i64>> {
    match kind {
        LinkKind::Markdown => conn
            .query_row(
                "SELECT id FROM notes WHERE path IN (?1, ?1 || '.md') AND head_version IS NOT NULL AND kind = 'note' LIMIT 1",
                [key],
                |r| r.get(0),
            )
            .optional(),
        LinkKind::Wiki => {
            let stem = key.rsplit('/').next().unwrap_or(key);
            conn.query_row(
                "SELECT id FROM notes WHERE stem = ?2 AND head_version IS NOT NULL AND kind = 'note'
                   AND (lower(path) IN (?1, ?1 || '.md') OR instr(?1, '/') = 0)
                 ORDER BY lower(path) IN (?1, ?1 || '.md') DESC, length(path), path LIMIT 1",
                params![key, stem],
                |r| r.get(0),
            )
            .optional()
        }
    }
}

/// Points unresolved links that name the note now at `path` to it.
fn resolve_incoming(conn: &Connection, id: i64, path: &str) -> rusqlite::Result<()> {
    let no_ext = path.strip_suffix(".md").unwrap_or(path);
    let lower = path.to_lowercase();
    let lower_no_ext = no_ext.to_lowercase();
    // Through the partial index on unresolved keys: left to itself the planner picks
    // `links_target` for `target_note IS NULL` and walks every unresolved link in the vault for
    // each new note (quadratic on a cold scan: 100k notes slowed to ~50 notes/s).
    conn.execute(
        "UPDATE links INDEXED BY links_key SET target_note = ?1
         WHERE target_note IS NULL AND target_key IN (?2, ?3, ?4, ?5, ?6) AND (
            (kind = 'markdown' AND target_key IN (?2, ?3)) OR
            (kind = 'wiki' AND target_key IN (?4, ?5, ?6)))",
        params![id, path, no_ext, stem_of(path), lower, lower_no_ext],
    )?;
    Ok(())
}

/// FNV-1a: a stable 64-bit hash (stored, so it must not change between builds).
fn fnv1a(parts: &[&str]) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0xff)) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h as i64
}

/// Brings a note's sections (runs of consecutive passages under one heading path) in line with
/// its head passages: sections whose heading and text are unchanged keep their row (and their
/// full-text entry); the rest are replaced.
fn write_sections(tx: &Connection, note_id: i64) -> rusqlite::Result<()> {
    struct Run {
        heading: String,
        first: i64,
        last: i64,
        body: String,
    }
    let mut runs: Vec<Run> = Vec::new();
    {
        let mut st = tx.prepare_cached("SELECT heading, body, ordinal FROM passages WHERE note_id = ?1 ORDER BY ordinal")?;
        let mut rows = st.query([note_id])?;
        while let Some(r) = rows.next()? {
            let heading: String = r.get(0)?;
            let body = r.get_ref(1)?.as_str().unwrap_or_default();
            let ordinal: i64 = r.get(2)?;
            match runs.last_mut() {
                Some(run) if run.heading == heading && run.last + 1 == ordinal => {
                    run.body.push('\n');
                    run.body.push_str(body);
                    run.last = ordinal;
                }
                _ => runs.push(Run { heading, first: ordinal, last: ordinal, body: body.to_owned() }),
            }
        }
    }
    let mut old: std::collections::HashMap<i64, Vec<i64>> = std::collections::HashMap::new();
    {
        let mut st = tx.prepare_cached("SELECT id, hash FROM sections WHERE note_id = ?1")?;
        let rows = st.query_map([note_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
        for row in rows {
            let (sid, hash) = row?;
            old.entry(hash).or_default().push(sid);
        }
    }
    let mut mv = tx.prepare_cached("UPDATE sections SET first_ordinal = ?2, last_ordinal = ?3 WHERE id = ?1")?;
    let mut ins = tx.prepare_cached(
        "INSERT INTO sections (note_id, heading, first_ordinal, last_ordinal, hash) VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
    )?;
    let mut fts = tx.prepare_cached("INSERT INTO sections_fts (rowid, heading, body) VALUES (?1, ?2, ?3)")?;
    for run in &runs {
        let hash = fnv1a(&[&run.heading, &run.body]);
        if let Some(sid) = old.get_mut(&hash).and_then(Vec::pop) {
            mv.execute(params![sid, run.first, run.last])?;
            continue;
        }
        let sid: i64 = ins.query_row(params![note_id, run.heading, run.first, run.last, hash], |r| r.get(0))?;
        fts.execute(params![sid, run.heading, run.body])?;
    }
    let mut del = tx.prepare_cached("DELETE FROM sections WHERE id = ?1")?;
    for sid in old.into_values().flatten() {
        del.execute([sid])?;
    }
    Ok(())
}

/// The last segment of a heading path (`Title › Section › Subsection`): a symbol's name.
fn section_of(heading: &str) -> &str {
    heading.rsplit(" › ").next().unwrap_or(heading)
}

/// Fills `passages.section` for rows written before schema v4 (one transaction; the trigger
/// puts each into the symbol index).
fn backfill_sections(conn: &mut Connection) -> rusqlite::Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let rows: Vec<(i64, String)> = {
        let mut st = tx.prepare("SELECT id, heading FROM passages WHERE section IS NULL")?;
        let it = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        it.collect::<Result<_, _>>()?
    };
    {
        let mut up = tx.prepare("UPDATE passages SET section = ?2 WHERE id = ?1")?;
        for (id, heading) in &rows {
            up.execute(params![id, section_of(heading)])?;
        }
    }
    tx.commit()?;
    Ok(rows.len())
}

/// Tags and aliases of a note's head (replacing what it had). Tags need the text's own byte
/// ranges, so a note that is not valid UTF-8 has none.
fn write_nav(tx: &Connection, id: i64, bytes: &[u8], note: &ChunkedNote) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM tags WHERE note_id = ?1")?.execute([id])?;
    tx.prepare_cached("DELETE FROM aliases WHERE note_id = ?1")?.execute([id])?;
    if let Ok(text) = std::str::from_utf8(bytes) {
        // The full parse only where a tag may be: most notes' only `#` starts a heading.
        if lode_core::nav::may_have_tags(text) {
            let mut ins = tx.prepare_cached("INSERT INTO tags (note_id, tag, folded, start, end) VALUES (?1, ?2, ?3, ?4, ?5)")?;
            for l in lode_core::nav::links(text) {
                if !matches!(l.kind, lode_core::nav::NavKind::Tag | lode_core::nav::NavKind::FrontmatterTag) {
                    continue;
                }
                let Some(label) = &l.label else { continue };
                ins.execute(params![id, label.text, label.text.to_lowercase(), l.range.start as i64, l.range.end as i64])?;
            }
        }
    }
    let mut ins = tx.prepare_cached("INSERT INTO aliases (note_id, alias, folded) VALUES (?1, ?2, ?3)")?;
    for (k, v) in &note.meta {
        if k == "aliases" || k == "alias" {
            for a in meta_list(v) {
                ins.execute(params![id, a, a.to_lowercase()])?;
            }
        }
    }
    Ok(())
}

/// The items of a frontmatter value: `[a, "b c"]` or a single scalar.
fn meta_list(v: &str) -> Vec<String> {
    let v = v.trim();
    let inner = v.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap_or(v);
    inner
        .split(',')
        .map(|a| a.trim().trim_matches(|c| c == '"' || c == '\'').trim().to_owned())
        .filter(|a| !a.is_empty())
        .collect()
}

/// Fills what is derived from each head by the chunker for heads written before it existed:
/// headings (schema v6) and, when `nav`, tags and aliases (schema v5). One transaction.
fn backfill_from_heads(conn: &mut Connection, chunk: &lode_core::chunk::ChunkConfig, nav: bool) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let heads: Vec<(i64, Vec<u8>)> = {
        let mut st = tx.prepare("SELECT n.id, v.body FROM notes n JOIN versions v ON v.id = n.head_version")?;
        let it = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        it.collect::<Result<_, _>>()?
    };
    for (id, body) in heads {
        let note = chunk_note(&body, chunk);
        if nav {
            write_nav(&tx, id, &body, &note)?;
        }
        write_headings(&tx, id, &body, &note)?;
    }
    tx.commit()
}

/// The headings of a note's head (replacing what it had): `workspace/symbol`'s section names.
fn write_headings(tx: &Connection, id: i64, bytes: &[u8], note: &ChunkedNote) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM headings WHERE note_id = ?1")?.execute([id])?;
    let mut ins = tx.prepare_cached("INSERT INTO headings (note_id, name, line, level) VALUES (?1, ?2, ?3, ?4)")?;
    for h in note.headings.iter().filter(|h| !h.text.is_empty()) {
        // Heading ranges are in the decoded text: the same bytes unless the note is lossy, where
        // the line is the nearest the raw bytes give.
        let at = h.range.start.min(bytes.len());
        ins.execute(params![id, h.text, line_of(bytes, at) as i64, h.level as i64])?;
    }
    Ok(())
}

/// `snapshot`: a new note row is a snapshot note (an external's URL as path, no stem), whose
/// head gets passages only. An existing row keeps its kind.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_note(
    tx: &Connection,
    path: &str,
    bytes: &[u8],
    vid: &str,
    note: &ChunkedNote,
    new_version: bool,
    snapshot: bool,
) -> rusqlite::Result<SaveOutcome> {
    let now = now_ms();
    tx.prepare_cached("INSERT OR IGNORE INTO versions (id, body, size, lossy, created_at) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(params![vid, bytes, bytes.len() as i64, note.lossy, now])?;

    let title = note.title.clone().unwrap_or_else(|| {
        let name = path.rsplit('/').next().unwrap_or(path);
        name.rsplit_once('.').map_or(name, |(s, _)| s).to_owned()
    });
    let meta = serde_json::Value::Object(
        note.meta.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect(),
    )
    .to_string();
    // Whether the note exists is decided here, inside the write transaction: what the caller
    // read before taking the write lock may be stale (another process — `lode index` beside
    // `lode serve` — created or removed the row meanwhile).
    let existed: bool = tx.query_row("SELECT EXISTS (SELECT 1 FROM notes WHERE path = ?1)", [path], |r| r.get(0))?;
    let (id, created, snapshot) = if existed {
        let (id, kind): (i64, String) = tx.query_row(
            "UPDATE notes SET head_version = ?2, title = ?3, meta = ?4, updated_at = ?5,
                    disk_size = CASE WHEN ?6 THEN NULL ELSE disk_size END,
                    disk_mtime = CASE WHEN ?6 THEN NULL ELSE disk_mtime END
             WHERE path = ?1 RETURNING id, kind",
            params![path, vid, title, meta, now, new_version],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let was_deleted: bool = tx.query_row(
            "SELECT NOT EXISTS (SELECT 1 FROM passages WHERE note_id = ?1) AND NOT EXISTS (SELECT 1 FROM links WHERE src_note = ?1)",
            [id],
            |r| r.get(0),
        )?;
        (id, was_deleted, kind == "snapshot")
    } else {
        let (stem, kind) = if snapshot { (String::new(), "snapshot") } else { (stem_of(path), "note") };
        let id: i64 = tx.query_row(
            "INSERT INTO notes (path, stem, title, head_version, meta, created_at, updated_at, kind)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7) RETURNING id",
            params![path, stem, title, vid, meta, now, kind],
            |r| r.get(0),
        )?;
        (id, true, snapshot)
    };
    if new_version {
        tx.prepare_cached(
            "INSERT INTO note_versions (note_id, seq, version_id, path, created_at)
             VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM note_versions WHERE note_id = ?1), ?2, ?3, ?4)",
        )?
        .execute(params![id, vid, path, now])?;
    }

    // Passages whose heading and text are unchanged keep their row (and so their FTS5 entry) and
    // only move: an edit re-tokenizes just the passages it touched.
    let mut old: std::collections::HashMap<(String, String), Vec<i64>> = std::collections::HashMap::new();
    {
        let mut st = tx.prepare_cached("SELECT id, heading, text FROM passages WHERE note_id = ?1 ORDER BY id DESC")?;
        let rows = st.query_map([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))?;
        for row in rows {
            let (pid, heading, text) = row?;
            old.entry((heading, text)).or_default().push(pid);
        }
    }
    let mut ins = tx.prepare_cached(
        "INSERT INTO passages (note_id, version_id, ordinal, start, end, line, kind, heading, parent_id,
                               parent_start, parent_end, text, body, section)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?;
    let mut mv = tx.prepare_cached(
        "UPDATE passages SET version_id = ?2, ordinal = ?3, start = ?4, end = ?5, line = ?6, kind = ?7,
                             parent_id = ?8, parent_start = ?9, parent_end = ?10
         WHERE id = ?1",
    )?;
    // Line numbers are computed incrementally: passages are in document order.
    let (mut line, mut at) = (1usize, 0usize);
    for (ordinal, p) in note.passages.iter().enumerate() {
        line += line_of(&bytes[at..p.range.start], p.range.start - at) - 1;
        at = p.range.start;
        let mut heading_parts: Vec<&str> = Vec::with_capacity(p.heading_path.len() + 1);
        if p.heading_path.first().map(String::as_str) != Some(title.as_str()) {
            heading_parts.push(&title);
        }
        heading_parts.extend(p.heading_path.iter().map(String::as_str));
        let heading = heading_parts.join(" › ");
        let text = String::from_utf8_lossy(&bytes[p.range.clone()]).into_owned();
        let parent_id = format!("{vid}:{}-{}", p.parent.start, p.parent.end);
        let key = (heading, text);
        if let Some(pid) = old.get_mut(&key).and_then(Vec::pop) {
            mv.execute(params![
                pid,
                vid,
                ordinal as i64,
                p.range.start as i64,
                p.range.end as i64,
                line as i64,
                p.kind.as_str(),
                parent_id,
                p.parent.start as i64,
                p.parent.end as i64,
            ])?;
            continue;
        }
        let (heading, text) = key;
        let body = lode_core::text::index_text(&text);
        let section = section_of(&heading);
        ins.execute(params![
            id,
            vid,
            ordinal as i64,
            p.range.start as i64,
            p.range.end as i64,
            line as i64,
            p.kind.as_str(),
            heading,
            parent_id,
            p.parent.start as i64,
            p.parent.end as i64,
            text,
            body,
            section,
        ])?;
    }
    let mut del = tx.prepare_cached("DELETE FROM passages WHERE id = ?1")?;
    for pid in old.into_values().flatten() {
        del.execute([pid])?;
    }
    write_sections(tx, id)?;

    tx.prepare_cached("DELETE FROM links WHERE src_note = ?1")?.execute([id])?;
    if snapshot {
        // A page's own links, tags and headings are not the user's: nothing links, completes
        // or navigates through a snapshot.
        return Ok(SaveOutcome {
            note_id: id,
            version_id: vid.to_owned(),
            status: if existed { SaveStatus::Updated } else { SaveStatus::Created },
            passages: note.passages.len(),
            lossy: note.lossy,
        });
    }
    let mut ins = tx.prepare_cached(
        "INSERT INTO links (src_note, kind, target, target_key, target_note, start, end) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for l in &note.links {
        let key = link_key(path, l.kind, &l.target);
        let target = if l.is_external() { None } else { resolve_key(tx, l.kind, &key)? };
        ins.execute(params![id, l.kind.as_str(), l.target, key, target, l.range.start as i64, l.range.end as i64])?;
    }
    write_nav(tx, id, bytes, note)?;
    write_headings(tx, id, bytes, note)?;
    if created {
        resolve_incoming(tx, id, path)?;
    }
    Ok(SaveOutcome {
        note_id: id,
        version_id: vid.to_owned(),
        status: if existed { SaveStatus::Updated } else { SaveStatus::Created },
        passages: note.passages.len(),
        lossy: note.lossy,
    })
}

impl Store {
    /// Merges the full-text index into one segment (after bulk indexing).
    pub fn optimize(&mut self) -> Result<(), StoreError> {
        self.conn
            .execute("INSERT INTO passages_fts(passages_fts) VALUES ('optimize')", [])
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    fn chunk_fingerprint(&self) -> String {
        serde_json::to_string(&self.opts.chunk).unwrap_or_default()
    }

    /// Whether passages were made with other chunker settings than this store's.
    pub fn chunking_changed(&self) -> Result<bool, StoreError> {
        let stored: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'chunk_config'", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(stored.is_some_and(|s| s != self.chunk_fingerprint()))
    }

    /// Records the chunker settings the passages were made with.
    pub fn record_chunking(&self) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO meta (key, value) VALUES ('chunk_config', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [self.chunk_fingerprint()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Re-chunks the head version of every live note (after a change of chunker settings),
    /// without making new versions. Committed in batches.
    pub fn rechunk_heads(&mut self, mut progress: impl FnMut(usize, usize)) -> Result<usize, StoreError> {
        // Snapshots too: their passages come from the same chunker.
        let notes = self.rows("SELECT id, path, title, head_version FROM notes WHERE head_version IS NOT NULL ORDER BY path", [], |r| Ok(NoteInfo { id: r.get(0)?, path: r.get(1)?, title: r.get(2)?, head_version: r.get(3)? }))?;
        let total = notes.len();
        let result = self.rechunk_notes(&notes, &mut progress);
        // Never leave a batch open: what was re-chunked before a failure stays.
        let ended = self.end_batch();
        result?;
        ended?;
        self.record_chunking()?;
        Ok(total)
    }

    fn rechunk_notes(&mut self, notes: &[NoteInfo], progress: &mut impl FnMut(usize, usize)) -> Result<(), StoreError> {
        for (i, n) in notes.iter().enumerate() {
            if i % crate::vault::BATCH == 0 {
                self.end_batch()?;
                self.begin_batch()?;
            }
            let Some(vid) = &n.head_version else { continue };
            let Some(body) = self.version_body(vid)? else { continue };
            let chunked = chunk_note(&body, &self.opts.chunk);
            let path_buf = self.path.clone();
            let e = |e| StoreError::from_sqlite(&path_buf, e);
            let tx = self.write_tx().map_err(e)?;
            write_note(&tx, &n.path, &body, vid, &chunked, false, false).map_err(e)?;
            tx.commit().map_err(e)?;
            progress(i + 1, notes.len());
        }
        Ok(())
    }
}

/// What `Store::verify` found; empty `problems` means consistent.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Verification {
    pub problems: Vec<String>,
}

impl Store {
    /// Full consistency check: SQLite integrity, FTS5 index against passages, and that every
    /// passage belongs to its note's current head version (never a half-indexed one).
    pub fn verify(&self) -> Result<Verification, StoreError> {
        let mut problems = Vec::new();
        let integrity: String = self.conn.query_row("PRAGMA integrity_check(1)", [], |r| r.get(0)).map_err(|e| self.err(e))?;
        if integrity != "ok" {
            problems.push(format!("sqlite integrity: {integrity}"));
        }
        if let Err(e) = self.conn.execute("INSERT INTO passages_fts(passages_fts, rank) VALUES ('integrity-check', 1)", []) {
            problems.push(format!("full-text index does not match passages: {e}"));
        }
        let stale: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM passages p JOIN notes n ON n.id = p.note_id
                 WHERE n.head_version IS NULL OR p.version_id != n.head_version",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        if stale > 0 {
            problems.push(format!("{stale} passages do not belong to their note's head version"));
        }
        let missing: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM notes n WHERE n.head_version IS NOT NULL
                   AND NOT EXISTS (SELECT 1 FROM versions v WHERE v.id = n.head_version)",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        if missing > 0 {
            problems.push(format!("{missing} notes point at a missing version"));
        }
        Ok(Verification { problems })
    }
}

impl Store {
    /// The note a version belongs to (its current path) and that note's head version, if the
    /// note still exists.
    pub fn head_for_version(&self, version_id: &str) -> Result<Option<(String, String)>, StoreError> {
        self.conn
            .query_row(
                "SELECT n.path, n.head_version FROM note_versions v JOIN notes n ON n.id = v.note_id
                 WHERE v.version_id = ?1 AND n.head_version IS NOT NULL ORDER BY v.seq DESC LIMIT 1",
                [version_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Path (when saved), note title and save time (UTC, `YYYY-MM-DD HH:MM`) of a version.
    pub fn version_info(&self, version_id: &str) -> Result<Option<(String, String, String)>, StoreError> {
        let row: Option<(String, String, i64)> = self
            .conn
            .query_row(
                "SELECT v.path, n.title, v.created_at FROM note_versions v JOIN notes n ON n.id = v.note_id
                 WHERE v.version_id = ?1 ORDER BY v.seq LIMIT 1",
                [version_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(row.map(|(p, t, ms)| (p, t, format_utc(ms))))
    }

    /// Note titles and section headings whose text contains `query` (case-insensitive, with
    /// Unicode case folding; `%`, `_`, `\\` and `"` are literal), for `workspace/symbol`:
    /// `(path, name, line, is_title)`, titles first, then by path.
    ///
    /// Names that start with the query are read first, through the folded-name indexes (a range
    /// scan: cheap whatever the vault's size). A query of three or more characters also matches
    /// anywhere in a name, through the trigram indexes — unless the names starting with it
    /// already fill `limit`: a long query's trigram lookup (at most four posting lists, the
    /// rarest of its words and word boundaries) is the slow part on a large vault, while typing
    /// a name from its start is the common case. A short non-ASCII query (SQL's `lower()` folds
    /// ASCII only) is looked up once per casing of its non-ASCII letters. Cost grows with the
    /// names read — about 1.5 × `limit` per kind, index and casing —, not with the vault.
    pub fn symbols(&self, query: &str, limit: usize) -> Result<Vec<(String, String, usize, bool)>, StoreError> {
        let folded = query.to_lowercase();
        let short = folded.chars().count() < 3;
        let matches = |s: &str| {
            let name = s.to_lowercase();
            if short {
                name.starts_with(&folded)
            } else {
                name.contains(&folded)
            }
        };
        // Names read per index (and casing): a little over the limit, since every name a prefix
        // or trigram lookup returns contains the query, bar Unicode folding differences.
        let cap = ((limit + limit / 2).max(limit + 16)).min(SYMBOL_CANDIDATES.max(limit)) as i64;
        type Titles = Vec<(String, String)>;
        type Sections = Vec<(String, String, i64)>;
        let by_prefix = |prefix: &str| -> Result<(Titles, Sections), StoreError> {
            let titles = self.rows(
                "SELECT path, title FROM notes WHERE lower(title) >= ?1 AND lower(title) < ?1 || char(1114111)
                   AND head_version IS NOT NULL AND kind = 'note' LIMIT ?2",
                params![prefix, cap],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )?;
            let sections = self.rows(
                "SELECT n.path, h.name, h.line FROM headings h JOIN notes n ON n.id = h.note_id
                  WHERE lower(h.name) >= ?1 AND lower(h.name) < ?1 || char(1114111) LIMIT ?2",
                params![prefix, cap],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)),
            )?;
            Ok((titles, sections))
        };
        let by_trigram = || -> Result<(Titles, Sections), StoreError> {
            let (fts, exact) = trigram_match(query, || self.trigram_counts())?;
            let titles = self.rows(
                "SELECT n.path, n.title FROM titles_tri t JOIN notes n ON n.id = t.rowid
                  WHERE titles_tri MATCH ?1 AND n.head_version IS NOT NULL AND n.kind = 'note'
                    AND (?3 IS NULL OR instr(lower(n.title), ?3) > 0) LIMIT ?2",
                params![fts, cap, exact],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )?;
            let sections = self.rows(
                "SELECT n.path, h.name, h.line FROM headings_tri t JOIN headings h ON h.id = t.rowid
                   JOIN notes n ON n.id = h.note_id WHERE headings_tri MATCH ?1
                    AND (?3 IS NULL OR instr(lower(h.name), ?3) > 0) LIMIT ?2",
                params![fts, cap, exact],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)),
            )?;
            Ok((titles, sections))
        };
        // Distinct symbols among candidates (a name may repeat within a note).
        let distinct = |t: &Titles, s: &Sections| {
            let mut seen: std::collections::HashSet<(&str, &str)> = std::collections::HashSet::new();
            t.iter().filter(|(_, n)| matches(n)).for_each(|(p, n)| {
                seen.insert((p, n));
            });
            s.iter().filter(|(_, n, _)| matches(n)).for_each(|(p, n, _)| {
                seen.insert((p, n));
            });
            seen.len()
        };
        let (titles, sections) = if folded.is_ascii() {
            let (mut titles, mut sections) = by_prefix(&folded)?;
            if !short && distinct(&titles, &sections) < limit {
                let (t, s) = by_trigram()?;
                titles.extend(t);
                sections.extend(s);
            }
            (titles, sections)
        } else if !short {
            by_trigram()?
        } else {
            // SQL's lower() folds ASCII only, so a name's non-ASCII letters keep their case in
            // the folded-name indexes: a short query is looked up once per casing of its
            // non-ASCII letters ("é" as "é" and "É"), each a range scan.
            let (mut titles, mut sections) = (Vec::new(), Vec::new());
            for prefix in casings(query) {
                let (t, s) = by_prefix(&prefix)?;
                titles.extend(t);
                sections.extend(s);
            }
            (titles, sections)
        };
        let mut out: Vec<(String, String, usize, bool)> =
            titles.into_iter().filter(|(_, t)| matches(t)).map(|(p, t)| (p, t, 1, true)).collect();
        out.sort();
        out.dedup();
        out.truncate(limit);
        // A heading's symbol sits at its line (a name repeated in a note: its first line).
        let mut first: std::collections::BTreeMap<(String, String), i64> = std::collections::BTreeMap::new();
        for (path, name, line) in sections.into_iter().filter(|(_, n, _)| matches(n)) {
            let e = first.entry((path, name)).or_insert(line);
            *e = (*e).min(line);
        }
        let mut rest: Vec<(String, String, i64)> = first.into_iter().map(|((p, n), l)| (p, n, l)).collect();
        rest.sort_by(|a, b| (&a.0, a.2).cmp(&(&b.0, b.2)));
        for (path, name, line) in rest {
            if out.len() >= limit {
                break;
            }
            if !out.iter().any(|(p, n, _, _)| *p == path && *n == name) {
                out.push((path, name, line.max(1) as usize, false));
            }
        }
        Ok(out)
    }
}

/// How often each trigram occurs in a sample of folded names: letters and digits each count
/// on their own, space is one class and every other byte another (a heuristic: which of a
/// query's trigrams are rare).
pub(crate) struct TrigramCounts(Vec<u32>);

impl TrigramCounts {
    fn class(b: u8) -> usize {
        match b {
            b'a'..=b'z' => (b - b'a') as usize,
            b'0'..=b'9' => 26 + (b - b'0') as usize,
            b' ' => 36,
            _ => 37,
        }
    }

    fn slot(t: &[u8]) -> usize {
        (Self::class(t[0]) * 38 + Self::class(t[1])) * 38 + Self::class(t[2])
    }

    fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> TrigramCounts {
        let mut counts = TrigramCounts(vec![0; 38 * 38 * 38]);
        let mut seen: Vec<usize> = Vec::new();
        for name in names {
            seen.clear();
            seen.extend(name.as_bytes().windows(3).map(Self::slot));
            seen.sort_unstable();
            seen.dedup();
            for &s in &seen {
                counts.0[s] += 1;
            }
        }
        counts
    }

    fn get(&self, t: &[u8]) -> u32 {
        self.0[Self::slot(t)]
    }
}

/// Names sampled for [`TrigramCounts`]: the most recent headings and titles.
const TRIGRAM_SAMPLE: i64 = 2000;

/// Each database's sample, read once per process (by the first of its connections to need it):
/// it guides which trigrams a lookup asks for, never what it returns, so it may be old.
static TRIGRAM_SAMPLES: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<PathBuf, std::sync::Arc<TrigramCounts>>>> =
    std::sync::LazyLock::new(Default::default);

impl Store {
    /// The sample of this database, kept for the process once it is full: a sample of a
    /// database still being filled (a first scan) is read again at each lookup, which costs
    /// little while the names are few.
    fn trigram_counts(&self) -> Result<std::sync::Arc<TrigramCounts>, StoreError> {
        if let Some(c) = TRIGRAM_SAMPLES.lock().unwrap_or_else(|e| e.into_inner()).get(&self.path) {
            return Ok(c.clone());
        }
        let names = self.rows(
            "SELECT * FROM (SELECT lower(name) FROM headings ORDER BY id DESC LIMIT ?1)
             UNION ALL SELECT * FROM (SELECT lower(title) FROM notes ORDER BY id DESC LIMIT ?2)",
            params![TRIGRAM_SAMPLE, TRIGRAM_SAMPLE / 4],
            |r| r.get::<_, String>(0),
        )?;
        let full = names.len() as i64 >= TRIGRAM_SAMPLE;
        let c = std::sync::Arc::new(TrigramCounts::of(names.iter().map(String::as_str)));
        if full {
            let mut samples = TRIGRAM_SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
            // A process that opens many databases (tests) keeps a few.
            if samples.len() >= 8 {
                samples.clear();
            }
            samples.insert(self.path.clone(), c.clone());
        }
        Ok(c)
    }
}

/// The spellings of a short query as SQL's `lower()` leaves names: ASCII letters lowercase,
/// each other character as typed, in lowercase and in uppercase ("é" → "é", "É"; "İ" → "İ",
/// "i̇"): at most 3ⁿ strings for n such characters, and a query here has at most two.
fn casings(query: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for c in query.chars() {
        let mut forms: Vec<String> = if c.is_ascii() {
            vec![c.to_ascii_lowercase().to_string()]
        } else {
            [c.to_string(), c.to_lowercase().collect(), c.to_uppercase().collect()].into_iter().map(|f: String| f.to_ascii_lowercase()).collect()
        };
        forms.sort();
        forms.dedup();
        out = out.iter().flat_map(|p| forms.iter().map(move |f| format!("{p}{f}"))).collect();
    }
    out.sort();
    out.dedup();
    out
}

/// The trigram-index query for a substring lookup of `query` (at least 3 characters), and the
/// folded needle the rows must then contain, if the index query alone does not guarantee it.
///
/// A phrase of every trigram costs one doclist per trigram: a 20-character query reads 18,
/// most of them common. An ASCII query instead asks for at most [`TRIGRAM_PICKS`] trigrams, the
/// rarest (by `counts`, a sample of names) of its words and word boundaries, and checks the
/// substring on the candidate rows with `instr`, which keeps `LIMIT` exact: the candidates are at most the names holding the
/// rarest trigram. Trigrams picked by position instead (first, last, evenly between) cost up
/// to 25 ms on the 100k-note vault when a query repeats a word ("onboarding onb": its picks
/// were four common trigrams matching every "Onboarding …" heading). Non-ASCII queries keep
/// the phrase: `lower()` folds ASCII only, while the trigram tokenizer folds all of Unicode.
fn trigram_match<C: std::ops::Deref<Target = TrigramCounts>>(
    query: &str,
    counts: impl FnOnce() -> Result<C, StoreError>,
) -> Result<(String, Option<String>), StoreError> {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let folded = query.to_lowercase();
    if !folded.is_ascii() || folded.len() <= 6 {
        return Ok((quote(query), None));
    }
    let counts = counts()?;
    // Trigrams of one word occur together (every "invoice" holds "nvo" and "ice"): asking for
    // two of them narrows nothing. So each word gives its rarest trigram, the trigrams across
    // word boundaries give theirs (they carry the words' order), and the rarest of those go
    // to the index; among equals the later one, as what was typed last narrows most.
    let bytes = folded.as_bytes();
    let count = |i: usize| counts.get(&bytes[i..i + 3]);
    let word = |b: u8| b.is_ascii_alphanumeric();
    let mut best: Vec<(u32, std::cmp::Reverse<usize>)> = Vec::new();
    let mut group: Option<(u32, std::cmp::Reverse<usize>)> = None;
    let mut boundary: Option<(u32, std::cmp::Reverse<usize>)> = None;
    for i in 0..bytes.len() - 2 {
        let inside = bytes[i..i + 3].iter().all(|&b| word(b));
        let slot = if inside { &mut group } else { &mut boundary };
        let key = (count(i), std::cmp::Reverse(i));
        if slot.is_none_or(|k| key < k) {
            *slot = Some(key);
        }
        // A word ends where the next trigram leaves it.
        if inside && !bytes.get(i + 3).is_some_and(|&b| word(b)) {
            best.extend(group.take());
        }
    }
    best.extend(group);
    best.extend(boundary);
    best.sort();
    let mut picks: Vec<&str> = Vec::new();
    for (_, std::cmp::Reverse(i)) in best {
        let t = &folded[i..i + 3];
        if picks.len() < TRIGRAM_PICKS && !picks.contains(&t) {
            picks.push(t);
        }
    }
    let fts = picks.iter().map(|t| quote(t)).collect::<Vec<_>>().join(" AND ");
    Ok((fts, Some(folded)))
}

/// Trigrams a long substring lookup asks the index for.
const TRIGRAM_PICKS: usize = 4;

/// Matches read per kind (titles, sections) for one `workspace/symbol` query.
pub const SYMBOL_CANDIDATES: usize = 2000;

/// `YYYY-MM-DD HH:MM UTC` of unix milliseconds.
fn format_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// Tables every lode index has from schema version 1 on: a file claiming a version but missing
/// one of them was not made by a finished migration.
const CORE_TABLES: &[&str] = &["notes", "versions", "passages", "passages_fts", "links"];

/// Refuses a file that is not a lode index, or only half of one, before anything is written to
/// it: a version-0 file with tables of its own (some other program's database), or a versioned
/// one missing a core table. A fresh (empty) file is a new index.
fn check_schema(conn: &Connection, path: &Path, found: i64) -> Result<(), StoreError> {
    let err = |e| StoreError::from_sqlite(path, e);
    let mut st = conn.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'").map_err(err)?;
    let tables: Vec<String> = st.query_map([], |r| r.get(0)).map_err(err)?.collect::<Result<_, _>>().map_err(err)?;
    if found == 0 {
        if !tables.is_empty() {
            let mut shown: Vec<&str> = tables.iter().map(String::as_str).take(5).collect();
            if tables.len() > 5 {
                shown.push("…");
            }
            return Err(StoreError::Foreign { path: path.to_path_buf(), tables: shown.join(", ") });
        }
        return Ok(());
    }
    let missing: Vec<&str> = CORE_TABLES.iter().copied().filter(|t| !tables.iter().any(|x| x == t)).collect();
    if !missing.is_empty() {
        return Err(StoreError::Incomplete { path: path.to_path_buf(), found, missing: missing.join(", ") });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::TrigramCounts;

    #[test]
    fn a_substring_lookup_asks_for_the_rarest_trigram_of_each_word_and_of_the_boundaries() {
        // A sample where "ing", "ng " and " on" are common, and the rest of "onboarding" rare.
        let mut names = vec!["onboarding"; 50];
        names.extend(["sing now"; 250]);
        names.extend(["turn on"; 250]);
        names.extend(["big old"; 30]);
        let counts = TrigramCounts::of(names);
        let trigram_match = |q: &str, c: &TrigramCounts| super::trigram_match(q, || Ok(c)).unwrap();
        // "onboarding onb": the word's own trigrams are equally rare, and the later one of
        // the repeated word says nothing new; the boundary gives the rare "g o".
        let (fts, exact) = trigram_match("Onboarding onb", &counts);
        assert_eq!(exact.as_deref(), Some("onboarding onb"));
        let picks: Vec<&str> = fts.split(" AND ").collect();
        assert_eq!(picks.len(), 3, "{fts}");
        assert!(picks.contains(&"\"g o\""), "{fts}");
        assert!(!picks.contains(&"\"ing\"") && !picks.contains(&"\"ng \"") && !picks.contains(&"\" on\""), "{fts}");
        // At most four trigrams are asked for, one per word or boundary.
        let (fts, _) = trigram_match("alpha bravo charlie delta echo", &counts);
        assert_eq!(fts.split(" AND ").count(), 4, "{fts}");
        // A trigram holding a quote is quoted with the quote doubled.
        let (fts, exact) = trigram_match("qq\"rrrr", &counts);
        assert_eq!((fts.as_str(), exact.as_deref()), ("\"rrr\" AND \"\"\"rr\"", Some("qq\"rrrr")));
        // Short and non-ASCII queries: the phrase, nothing to check after.
        assert_eq!(trigram_match("abcdef", &counts), ("\"abcdef\"".to_owned(), None));
        assert_eq!(trigram_match("straße und", &counts), ("\"straße und\"".to_owned(), None));
    }

    #[test]
    fn utc_formatting() {
        assert_eq!(super::format_utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(super::format_utc(1_796_000_000_000), "2026-11-30 00:53 UTC");
    }
}
