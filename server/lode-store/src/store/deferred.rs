//! Secondary indexes a cold index builds at its end instead of row by row: the indexes whose
//! keys arrive in random order (folded titles, headings, tags and aliases; history's version ids).
//!
//! Why: a commit writes every page it touched to the log, and a checkpoint copies it back. While
//! such an index is small, a batch's inserts share its few pages; once it has more leaf pages
//! than a batch has rows, every insert lands on a page of its own, so the bytes written per note
//! grow with the vault (a million notes: about 9 such pages a note, twice each). Built at the
//! end, an index is one sort and one sequential write.
//!
//! Invariants:
//! - only indexes that no write of the store reads are deferred: the writer finds notes by path
//!   and stem, unresolved links by key (`links_key`, named by `INDEXED BY`) and a deleted or
//!   renamed note's incoming links by `links_target`, so those stay; a read that would have used
//!   a deferred index still answers, from a full scan;
//! - a dropped index is named in `meta` (`deferred_index:<name>`) in the transaction that drops
//!   it, so a scan killed midway loses nothing: the next scan's end ([`Store::end_bulk`]) or the
//!   next upgrade ([`restore`] before migrating) creates it again;
//! - what is created is this module's own definition ([`DEFERRABLE`], checked against the
//!   schema before an index is dropped), never SQL read from the database.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::Store;
use crate::error::StoreError;

/// The indexes a cold index may build at its end, with their definitions exactly as the
/// migrations create them (an index whose definition in the schema differs is not deferred),
/// and the schema version whose migration created that definition.
pub(super) const DEFERRABLE: [(&str, &str, i64); 5] = [
    ("note_versions_version", "CREATE INDEX note_versions_version ON note_versions(version_id)", 1),
    ("notes_title_folded", "CREATE INDEX notes_title_folded ON notes(lower(title))", 4),
    ("headings_folded", "CREATE INDEX headings_folded ON headings(lower(name), name, line, path)", 11),
    ("tags_folded", "CREATE INDEX tags_folded ON tags(folded)", 5),
    ("aliases_folded", "CREATE INDEX aliases_folded ON aliases(folded)", 5),
];

const KEY_PREFIX: &str = "deferred_index:";

impl Store {
    /// Drops the deferrable indexes until [`Store::end_bulk`] builds them again, when a scan is
    /// about to write `writes` notes (new or changed bytes) and that is at least as many as the
    /// store holds: a cold index, or nearly one, whose rows the rebuild sorts for the most part
    /// once more. Returns how many were dropped: none for a smaller scan, or while another
    /// process holds the write lock (the scan is then only slower).
    pub fn defer_indexes(&mut self, writes: usize) -> Result<usize, StoreError> {
        if self.opts.read_only || self.in_batch() || std::env::var_os("LODE_BENCH_NO_DEFER").is_some() {
            return Ok(0);
        }
        let held: i64 = self.conn.query_row("SELECT count(*) FROM notes", [], |r| r.get(0)).map_err(|e| self.err(e))?;
        if i64::try_from(writes).unwrap_or(i64::MAX) < held.max(1) {
            return Ok(0);
        }
        let path = self.path.clone();
        let err = |e| StoreError::from_sqlite(&path, e);
        let tx = self.write_tx().map_err(err)?;
        let mut dropped = 0;
        for (name, definition, _) in DEFERRABLE {
            let sql: Option<String> = tx
                .query_row("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1", [name], |r| r.get(0))
                .optional()
                .map_err(err)?;
            if sql.as_deref() != Some(definition) {
                continue;
            }
            tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", params![format!("{KEY_PREFIX}{name}"), definition])
                .map_err(err)?;
            tx.execute_batch(&format!("DROP INDEX \"{name}\"")).map_err(err)?;
            dropped += 1;
        }
        tx.commit().map_err(err)?;
        Ok(dropped)
    }

    /// The indexes a scan deferred and has not built yet (one killed midway leaves them so).
    pub fn deferred_indexes(&self) -> Result<Vec<String>, StoreError> {
        pending(&self.conn).map_err(|e| self.err(e))
    }

    /// Builds every deferred index (see [`Store::defer_indexes`]), each in a transaction of its
    /// own (the write lock is held for one sort at a time); returns how many. A row naming an
    /// index this build does not know is left for [`Store::verify`] to report.
    pub fn restore_indexes(&mut self) -> Result<usize, StoreError> {
        if self.opts.read_only || self.in_batch() {
            return Ok(0);
        }
        // Read first, outside a write transaction: the common case (nothing deferred) takes no
        // write lock.
        if pending(&self.conn).map_err(|e| self.err(e))?.is_empty() {
            return Ok(0);
        }
        let path = self.path.clone();
        let err = |e| StoreError::from_sqlite(&path, e);
        // Each index is built by one sort of its whole table (4.4 million headings at a million
        // notes): sorted in temporary files, not in memory, so the sort does not set the
        // process's peak (as for migrations; see `Store::open`).
        self.conn.execute_batch("PRAGMA temp_store=FILE").map_err(err)?;
        let mut built = Ok(0);
        for index in DEFERRABLE {
            let one = (|| -> rusqlite::Result<usize> {
                let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let n = restore_one(&tx, (index.0, Some(index.1)))?;
                tx.commit()?;
                Ok(n)
            })();
            match one {
                Ok(n) => built = built.map(|b| b + n),
                Err(e) => {
                    built = Err(e);
                    break;
                }
            }
        }
        let _ = self.conn.execute_batch("PRAGMA temp_store=MEMORY");
        built.map_err(err)
    }
}

fn pending(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut st = conn.prepare("SELECT substr(key, ?1) FROM meta WHERE key >= ?2 AND key < ?2 || char(1114111) ORDER BY key")?;
    let rows = st.query_map(params![KEY_PREFIX.len() as i64 + 1, KEY_PREFIX], |r| r.get(0))?;
    rows.collect()
}

/// Creates the index `(name, definition)` if it is deferred and missing, and forgets that it
/// was deferred, on `conn` (in the caller's transaction); with no definition, only forgets it.
/// Returns 1 when it created it.
fn restore_one(conn: &Connection, (name, definition): (&str, Option<&str>)) -> rusqlite::Result<usize> {
    let key = format!("{KEY_PREFIX}{name}");
    if conn.execute("DELETE FROM meta WHERE key = ?1", [key])? == 0 {
        return Ok(0);
    }
    let exists: bool =
        conn.query_row("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?1)", [name], |r| r.get(0))?;
    let Some(definition) = definition.filter(|_| !exists) else {
        return Ok(0);
    };
    conn.execute(definition, [])?;
    Ok(1)
}

/// Before migrating a store of schema `found`, on `conn` (in the caller's transaction): creates
/// every deferred index this build knows, since a migration may name one, bar those whose
/// definition a later schema made (its columns may not exist yet), which are only forgotten:
/// the migration that made the definition creates the index. Returns how many were created.
pub(super) fn restore(conn: &Connection, found: i64) -> rusqlite::Result<usize> {
    DEFERRABLE.into_iter().map(|(name, definition, since)| restore_one(conn, (name, (since <= found).then_some(definition)))).sum()
}
