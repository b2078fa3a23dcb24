//! The store proper: the [`Store`] handle and its options, the plain data it hands out, and
//! the small helpers its parts share. Each part lives in its own module, with its invariants:
//! - `open`: opening (migrations, clear refusals), the write-ahead log, batches, health checks;
//! - `versions`: notes and their immutable versions (save, delete, rename, history);
//! - `passages`: a head's write path (passages, sections, their full-text rows, then links and
//!   navigation) and the store's counts;
//! - `indexed`: rows of the full-text-indexed tables in and out, with their full-text rows;
//! - `navigation`: links, tags, aliases and headings, and the lookups over them;
//! - `symbols`: `workspace/symbol` over titles and headings;
//! - `deferred`: the random-key indexes a cold index builds at its end.
//!
//! Invariants kept here:
//! - a `Store` is one SQLite connection to one file, made only by [`Store::open`]; a SQLite
//!   error becomes a `StoreError` about that file (`err`: locked, corrupt, disk full, …);
//! - the other public types here are plain owned data: holding one holds no transaction, lock
//!   or borrow of the store;
//! - every time the store records is in unix milliseconds ([`now_ms`]);
//! - a note's stem is its file name without extension, lowercased (`stem_of`): the key a wiki
//!   link resolves by.

mod deferred;
mod indexed;
mod navigation;
mod open;
mod passages;
mod symbols;
mod versions;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lode_core::chunk::ChunkConfig;
use rusqlite::Connection;

use crate::error::StoreError;

pub use open::{log_frames, Verification};
pub(crate) use passages::write_note;

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
    /// Where the bytes of shared-tier versions that answers cited are kept. `None`: beside the
    /// database (`<folder>/shared-versions`). The `lode` binary puts them in the user's cache:
    /// files in a vault's folder may have come with it, and are never taken as the team's.
    pub shared_cache: Option<PathBuf>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            chunk: ChunkConfig::default(),
            busy_timeout: Duration::from_secs(5),
            read_only: false,
            immutable: false,
            cache_kib: 16 * 1024,
            shared_cache: None,
        }
    }
}

pub struct Store {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    pub(crate) opts: StoreOptions,
    /// Chunkings prepared ahead of saves (the language server's open buffers).
    prechunked: Option<crate::Prechunked>,
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

impl Store {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Saves look up chunkings prepared by `p` before parsing (see [`crate::Prechunked`]).
    pub fn set_prechunked(&mut self, p: crate::Prechunked) {
        self.prechunked = Some(p);
    }

    /// Puts `p` in place of the prepared chunkings this store uses; returns what it used.
    pub fn replace_prechunked(&mut self, p: Option<crate::Prechunked>) -> Option<crate::Prechunked> {
        std::mem::replace(&mut self.prechunked, p)
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
}
