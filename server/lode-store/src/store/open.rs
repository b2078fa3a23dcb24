//! Opening and health: [`Store::open`] with its migrations and refusals, the write-ahead log
//! (the commit hook behind [`log_frames`], checkpoints, the log's size limit), batches and
//! `write_tx` (the transaction a note's writes go through), and the on-demand
//! [`Store::verify`] and [`Store::optimize`].
//!
//! Invariants:
//! - nothing is written to a file before it is known to be a lode index whose schema this build
//!   supports: a newer schema, another program's database or a file missing a core table is
//!   refused with an error naming it, and no file is ever re-created over an existing one;
//! - a read-only store never creates, migrates or writes, and refuses a schema older than this
//!   build's;
//! - a writable store runs in WAL mode with `synchronous=NORMAL`; temporary tables and sorts
//!   stay in memory once it is open (they may spill to disk only while migrating);
//! - an opened store is complete at the current schema: the backfills a migration needs
//!   (sections before v4, tags and aliases before v5, headings before v6) finish inside `open`,
//!   each in one transaction;
//! - a batch is one IMMEDIATE transaction: readers see none of it until [`Store::end_batch`]
//!   commits it, and a `write_tx` dropped uncommitted inside it rolls all of it back (no
//!   savepoints: FTS5 flushes a segment at each). Beginning a batch while one is open, or
//!   ending one when none is, does nothing;
//! - outside a batch a `write_tx` is its own IMMEDIATE transaction;
//! - the log hook never fails a commit: its checkpoint is passive, and one that cannot finish is
//!   tried again at the next commit. The frame count is per thread, the backstop per process;
//! - a full consistency check reads the whole file, so it runs on demand, never at open.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use super::navigation::backfill_from_heads;
use super::passages::backfill_sections;
use super::{Store, StoreOptions};
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
            batch_over(self.conn);
        }
    }
}

/// After a batch's transaction ends: foreign keys are enforced again (see [`Store::begin_batch`]).
fn batch_over(conn: &Connection) {
    let _ = conn.execute_batch("PRAGMA foreign_keys = ON");
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

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    /// A locked, corrupt or newer-schema file is refused with an error naming it; nothing is
    /// ever re-created over an existing file.
    pub fn open(path: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        if !opts.read_only {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|source| StoreError::Open { path: path.to_path_buf(), source })?;
            }
        }
        let flags = if opts.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let err = |e| StoreError::from_sqlite(path, e);
        let mut conn = if opts.read_only && opts.immutable {
            let uri =
                format!("file:{}?immutable=1", path.display().to_string().replace('%', "%25").replace('?', "%3f").replace('#', "%23"));
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
            // An upgrade rewrites indexes (v10 rebuilds the trigram indexes: a minute at a
            // million notes), so a person waiting on a large index is told what is happening.
            let started = std::time::Instant::now();
            if (1..migrate::SCHEMA_VERSION).contains(&found) {
                // A migration may name an index a killed scan left deferred.
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
                super::deferred::restore(&tx, found).map_err(err)?;
                tx.commit().map_err(err)?;
            }
            let mut upgrading = false;
            let outcome = migrate::migrate(&mut conn, |from| {
                if from >= 1 {
                    upgrading = true;
                    eprintln!(
                        "lode: upgrading {} from schema v{from} to v{}, once (a large index takes a minute or more)",
                        path.display(),
                        migrate::SCHEMA_VERSION
                    );
                }
            })
            .map_err(err)?;
            match outcome {
                Outcome::TooNew { found } => {
                    return Err(StoreError::TooNew { path: path.to_path_buf(), found, supported: migrate::SCHEMA_VERSION })
                }
                Outcome::UpToDate => {}
                Outcome::Migrated => {
                    if (1..4).contains(&found) {
                        backfill_sections(&mut conn).map_err(err)?;
                    }
                    if (1..6).contains(&found) {
                        backfill_from_heads(&mut conn, &opts.chunk, found < 5).map_err(err)?;
                    }
                }
            }
            if upgrading {
                eprintln!("lode: upgraded {} in {:.1} s", path.display(), started.elapsed().as_secs_f64());
            }
            conn.execute_batch("PRAGMA temp_store=MEMORY").map_err(err)?;
        } else if found < migrate::SCHEMA_VERSION {
            return Err(StoreError::Outdated { path: path.to_path_buf(), found, supported: migrate::SCHEMA_VERSION });
        }
        // Damaged pages surface as SQLITE_CORRUPT on first use (mapped to `Corrupt`); a full
        // check reads the whole file, so it is `verify` (`lode stats --check`), not every open.
        // A save runs some thirty distinct statements; the default cache (16) would prepare
        // most of them again on every note.
        conn.set_prepared_statement_cache_capacity(64);
        Ok(Store { conn, path: path.to_path_buf(), opts, prechunked: None })
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

    /// Puts SQLite's own automatic checkpoint back on this connection (after
    /// [`Store::watch_log`]): a commit that leaves 1000 frames or more checkpoints itself.
    pub fn default_checkpoints(&self) {
        // Installs SQLite's default WAL hook in place of `on_commit`.
        let _ = self.conn.execute_batch("PRAGMA wal_autocheckpoint = 1000");
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
    ///
    /// A batch writes with foreign keys off (they are enforced per statement, and SQLite opens
    /// a statement journal for each write they check, which flushes every full-text index into
    /// a new segment: see `indexed`); [`Store::verify`] checks them.
    pub fn begin_batch(&mut self) -> Result<(), StoreError> {
        if !self.conn.is_autocommit() {
            return Ok(());
        }
        let begun = self.conn.execute_batch("PRAGMA foreign_keys = OFF; BEGIN IMMEDIATE");
        if begun.is_err() {
            batch_over(&self.conn);
        }
        begun.map_err(|e| self.err(e))
    }

    /// Commits the open batch, if any. On failure the whole batch is rolled back.
    pub fn end_batch(&mut self) -> Result<(), StoreError> {
        if self.conn.is_autocommit() {
            return Ok(());
        }
        let committed = self.conn.execute_batch("COMMIT");
        if committed.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        batch_over(&self.conn);
        committed.map_err(|e| self.err(e))
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

    /// Merges each full-text index into one segment (after bulk indexing).
    pub fn optimize(&mut self) -> Result<(), StoreError> {
        self.optimize_tables(&FTS_TABLES)
    }

    fn optimize_tables(&mut self, tables: &[&str]) -> Result<(), StoreError> {
        for t in tables {
            self.conn.execute(&format!("INSERT INTO {t}({t}) VALUES ('optimize')"), []).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Bulk writing (a scan that writes most of the vault): each full-text index merges its
    /// segments sixteen at a time instead of four until [`Store::end_bulk`]. A commit adds a
    /// segment, and FTS5 rewrites every row once per level of merging: with four-way merges a
    /// million notes make about seven levels against three for five thousand, with sixteen-way
    /// about three against two, so a row's cost stays near flat as the vault grows (queries
    /// meanwhile read up to four times as many segments). The setting is kept in the database,
    /// so it holds for every connection (the server's saves too, while a `lode index` runs),
    /// and a scan killed midway leaves it on until the next scan ends it.
    pub fn begin_bulk(&mut self) -> Result<(), StoreError> {
        if self.opts.read_only || no_bulk() {
            return Ok(());
        }
        self.set_merging(BULK_AUTOMERGE, BULK_CRISISMERGE)
    }

    /// Ends bulk writing (see [`Store::begin_bulk`]), also one a killed process left on:
    /// builds the indexes a scan deferred ([`Store::defer_indexes`]), merges every full-text
    /// index whole when `merge` (the scan was bulk work) or the merging was bulk, then puts
    /// FTS5's own settings back.
    pub fn end_bulk(&mut self, merge: bool) -> Result<(), StoreError> {
        // A failed build (the disk full, the lock held elsewhere) leaves the index deferred for
        // the next scan's end and still puts the merge settings back.
        let built = self.restore_indexes();
        self.end_merging(merge)?;
        built.map(|_| ())
    }

    fn end_merging(&mut self, merge: bool) -> Result<(), StoreError> {
        let automerge: Option<rusqlite::types::Value> = self
            .conn
            .query_row("SELECT v FROM sections_fts_config WHERE k = 'automerge'", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        let bulk = automerge.is_some_and(|v| v != rusqlite::types::Value::Integer(DEFAULT_AUTOMERGE));
        if no_bulk() {
            // The behaviour before bulk merging, for benchmarks' A/B runs.
            return if merge { self.optimize_tables(&["passages_fts"]) } else { Ok(()) };
        }
        if merge || bulk {
            self.optimize()?;
        }
        if bulk {
            self.set_merging(DEFAULT_AUTOMERGE, DEFAULT_CRISISMERGE)?;
        }
        Ok(())
    }

    /// Sets the merge settings of every full-text index in one transaction (they are rows of
    /// each index's `_config` table): a failure leaves all of them as they were, so the one
    /// [`Store::end_bulk`] reads stands for all.
    fn set_merging(&mut self, automerge: i64, crisismerge: i64) -> Result<(), StoreError> {
        let path = self.path.clone();
        let err = |e| StoreError::from_sqlite(&path, e);
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
        for t in FTS_TABLES {
            for (k, v) in [("automerge", automerge), ("crisismerge", crisismerge)] {
                tx.execute(&format!("INSERT INTO {t}({t}, rank) VALUES (?1, ?2)"), rusqlite::params![k, v]).map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }
}

/// `LODE_BENCH_NO_BULK` set: scans write with FTS5's own merge settings and merge only the
/// passages index at the end, as before bulk merging (for benchmarks' A/B runs only).
fn no_bulk() -> bool {
    std::env::var_os("LODE_BENCH_NO_BULK").is_some()
}

/// Every full-text index of the schema. Bulk settings are read back from `sections_fts`, the
/// last one written.
const FTS_TABLES: [&str; 4] = ["passages_fts", "headings_tri", "titles_tri", "sections_fts"];
/// FTS5's own merge settings, and bulk writing's.
const DEFAULT_AUTOMERGE: i64 = 4;
const DEFAULT_CRISISMERGE: i64 = 16;
const BULK_AUTOMERGE: i64 = 16;
const BULK_CRISISMERGE: i64 = 64;

fn tracing_free_warn(msg: &str) {
    eprintln!("warning: {msg}");
}

/// Tables every lode index has from schema version 1 on: a file claiming a version but missing
/// one of them was not made by a finished migration.
const CORE_TABLES: &[&str] = &["notes", "versions", "passages", "passages_fts", "links"];

/// Refuses a file that is not a lode index, or only half of one, before anything is written to
/// it: a version-0 file with tables of its own (some other program's database), or a versioned
/// one missing a core table. A fresh (empty) file is a new index.
fn check_schema(conn: &Connection, path: &Path, found: i64) -> Result<(), StoreError> {
    let err = |e| StoreError::from_sqlite(path, e);
    let mut st =
        conn.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'").map_err(err)?;
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

/// What `Store::verify` found; empty `problems` means consistent.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Verification {
    pub problems: Vec<String>,
}

/// The heading rows whose copy of their note's path is not their note's path (schema v11).
const MISPLACED_HEADINGS: &str = "FROM headings h JOIN notes n ON n.id = h.note_id WHERE h.path != n.path";

impl Store {
    /// Sets each heading's path to its note's where they differ: only a writer that predates
    /// schema v11 (an older lode still running when a newer one upgraded the store) leaves them
    /// so. Reads every heading; returns how many were mended. Symbol lookups read the path
    /// from the heading.
    pub fn mend_heading_paths(&mut self) -> Result<usize, StoreError> {
        if self.opts.read_only {
            return Ok(0);
        }
        let wrong: Vec<(i64, String)> =
            self.rows(&format!("SELECT h.id, n.path {MISPLACED_HEADINGS}"), [], |r| Ok((r.get(0)?, r.get(1)?)))?;
        if wrong.is_empty() {
            return Ok(0);
        }
        let path = self.path.clone();
        let err = |e| StoreError::from_sqlite(&path, e);
        let tx = self.write_tx().map_err(err)?;
        for (id, note_path) in &wrong {
            super::indexed::set_heading_path(&tx, *id, note_path).map_err(err)?;
        }
        tx.commit().map_err(err)?;
        Ok(wrong.len())
    }

    /// Full consistency check: SQLite integrity, each full-text index against its table, and that every
    /// passage belongs to its note's current head version (never a half-indexed one).
    pub fn verify(&self) -> Result<Verification, StoreError> {
        let mut problems = Vec::new();
        let integrity: String = self.conn.query_row("PRAGMA integrity_check(1)", [], |r| r.get(0)).map_err(|e| self.err(e))?;
        if integrity != "ok" {
            problems.push(format!("sqlite integrity: {integrity}"));
        }
        // External-content indexes are checked against their tables (rank 1); the contentless
        // sections index against itself.
        for (table, rank, of) in [
            ("passages_fts", 1, "passages"),
            ("titles_tri", 1, "note titles"),
            ("headings_tri", 1, "headings"),
            ("sections_fts", 0, "sections"),
        ] {
            if let Err(e) = self.conn.execute(&format!("INSERT INTO {table}({table}, rank) VALUES ('integrity-check', {rank})"), []) {
                problems.push(format!("full-text index {table} does not match {of}: {e}"));
            }
        }
        let orphans: Vec<String> = {
            let mut st = self.conn.prepare("PRAGMA foreign_key_check").map_err(|e| self.err(e))?;
            let it = st
                .query_map([], |r| {
                    let rowid = r.get::<_, Option<i64>>(1)?.map_or_else(|| "?".to_owned(), |n| n.to_string());
                    Ok(format!("{} row {rowid} names a missing {} row", r.get::<_, String>(0)?, r.get::<_, String>(2)?))
                })
                .map_err(|e| self.err(e))?;
            it.take(5).collect::<Result<_, _>>().map_err(|e| self.err(e))?
        };
        problems.extend(orphans);
        let deferred = self.deferred_indexes()?;
        if !deferred.is_empty() {
            problems.push(format!(
                "indexes a cold index builds at its end are not built yet ({}): lookups by them scan whole tables until a scan ends (`lode index`, or the server's)",
                deferred.join(", ")
            ));
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
        // A heading row repeats its note's path for symbol lookups (schema v11).
        let misplaced: i64 =
            self.conn.query_row(&format!("SELECT count(*) {MISPLACED_HEADINGS}"), [], |r| r.get(0)).map_err(|e| self.err(e))?;
        if misplaced > 0 {
            problems.push(format!(
                "{misplaced} headings name another path than their note's (written by an older lode beside this one): `lode index` mends them"
            ));
        }
        Ok(Verification { problems })
    }
}
