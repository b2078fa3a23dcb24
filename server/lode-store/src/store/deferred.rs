//! Secondary indexes a cold index builds at its end instead of row by row: the indexes whose
//! keys arrive in random order (version ids, folded titles, headings and tags, link targets).
//!
//! Why: a commit writes every page it touched to the log, and a checkpoint copies it back. While
//! such an index is small, a batch's inserts share its few pages; once it has more leaf pages
//! than a batch has rows, every insert lands on a page of its own, so the bytes written per note
//! grow with the vault (a million notes: about 11 such pages a note, twice each). Built at the
//! end, an index is one sort and one sequential write.
//!
//! Invariants:
//! - only indexes that no write reads are deferred: the writer itself still finds notes by path
//!   and stem, and unresolved links by key (`links_key`, named by `INDEXED BY`), so those stay;
//!   a query that would have used a deferred index still answers, from a full scan;
//! - the definition of each dropped index is kept in `meta` (`deferred_index:<name>`) in the
//!   transaction that drops it, so a scan killed midway loses nothing: the next scan's end
//!   ([`Store::end_bulk`]) or the next upgrade ([`restore`] before migrating) creates it again.

use rusqlite::{params, Connection, OptionalExtension};

use super::Store;
use crate::error::StoreError;

/// The indexes a cold index may build at its end (see the module doc for why these).
pub(super) const DEFERRABLE: [&str; 6] =
    ["note_versions_version", "notes_title_folded", "headings_folded", "tags_folded", "aliases_folded", "links_target"];

const KEY_PREFIX: &str = "deferred_index:";

impl Store {
    /// Drops the deferrable indexes until [`Store::end_bulk`] builds them again, when a scan is
    /// about to save `writes` notes and that is at least as many as the store holds (building an
    /// index whole then costs at most a sort of twice what the scan adds). Returns how many were
    /// dropped: none for a smaller scan, or while another process holds the write lock (the
    /// scan is then only slower).
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
        for name in DEFERRABLE {
            let sql: Option<String> = tx
                .query_row("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1", [name], |r| r.get(0))
                .optional()
                .map_err(err)?;
            let Some(sql) = sql else { continue };
            tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", params![format!("{KEY_PREFIX}{name}"), sql])
                .map_err(err)?;
            tx.execute_batch(&format!("DROP INDEX \"{name}\"")).map_err(err)?;
            dropped += 1;
        }
        tx.commit().map_err(err)?;
        Ok(dropped)
    }

    /// The indexes a scan deferred and has not built yet (one killed midway leaves them so).
    pub fn deferred_indexes(&self) -> Result<Vec<String>, StoreError> {
        pending(&self.conn).map(|p| p.into_iter().map(|(name, _)| name).collect()).map_err(|e| self.err(e))
    }

    /// Builds every deferred index (see [`Store::defer_indexes`]); returns how many.
    pub fn restore_indexes(&mut self) -> Result<usize, StoreError> {
        if self.opts.read_only {
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
        let built = (|| -> rusqlite::Result<usize> {
            let tx = self.write_tx()?;
            let n = restore(&tx)?;
            tx.commit()?;
            Ok(n)
        })();
        let _ = self.conn.execute_batch("PRAGMA temp_store=MEMORY");
        built.map_err(err)
    }
}

fn pending(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut st = conn.prepare("SELECT substr(key, ?1), value FROM meta WHERE key >= ?2 AND key < ?2 || char(1114111) ORDER BY key")?;
    let rows = st.query_map(params![KEY_PREFIX.len() as i64 + 1, KEY_PREFIX], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Creates each deferred index that does not exist and forgets its definition, on `conn` (in
/// the caller's transaction). Returns how many were created.
pub(super) fn restore(conn: &Connection) -> rusqlite::Result<usize> {
    let mut created = 0;
    for (name, sql) in pending(conn)? {
        // Only a definition this module wrote is run: a row that is not one is dropped.
        let ours = DEFERRABLE.contains(&name.as_str()) && sql.starts_with("CREATE INDEX");
        let exists: bool =
            conn.query_row("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?1)", [&name], |r| r.get(0))?;
        if ours && !exists {
            conn.execute_batch(&sql)?;
            created += 1;
        }
        conn.execute("DELETE FROM meta WHERE key = ?1", [format!("{KEY_PREFIX}{name}")])?;
    }
    Ok(created)
}
