//! Bookkeeping for the dense index: which head passages are covered by a vector for which model,
//! grouped in embedding windows (runs of consecutive passages embedded as one input), which
//! vectors must go, and how fresh the index is. The vectors themselves live in LanceDB, one row
//! per window, keyed by the window's first passage (its leader).

use rusqlite::params;

use crate::error::StoreError;
use crate::store::Store;

/// A passage that needs a vector.
#[derive(Debug, Clone)]
pub struct PendingPassage {
    pub id: i64,
    pub note_id: i64,
    pub version_id: String,
    /// Position in its note (passages of a note are numbered 0, 1, … in document order).
    pub ordinal: i64,
    /// The note title and heading path: the section the passage is in.
    pub heading: String,
    /// The passage's own text.
    pub passage: String,
    /// What is embedded when the passage is a window of its own: heading, then the text.
    pub text: String,
    /// Where `passage` is in its version: exactly those bytes.
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Freshness {
    pub passages: i64,
    /// Passages covered by a vector of the model.
    pub with_vectors: i64,
    /// Vectors (windows) the model's LanceDB table should hold.
    pub windows: i64,
}

/// A row of `id, note_id, version_id, ordinal, heading, text`.
fn pending_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PendingPassage> {
    let heading: String = r.get(4)?;
    let passage: String = r.get(5)?;
    Ok(PendingPassage {
        id: r.get(0)?,
        note_id: r.get(1)?,
        version_id: r.get(2)?,
        ordinal: r.get(3)?,
        text: if heading.is_empty() { passage.clone() } else { format!("{heading}\n{passage}") },
        heading,
        passage,
        start: r.get::<_, i64>(6)? as usize,
        end: r.get::<_, i64>(7)? as usize,
    })
}

impl Store {
    /// Up to `limit` head passages without a vector for `model`, of notes from `from_note` on,
    /// in note and document order (so consecutive passages of a section arrive together).
    pub fn pending_vectors(&self, model: &str, from_note: i64, limit: usize) -> Result<Vec<PendingPassage>, StoreError> {
        self.rows(
            "SELECT p.id, p.note_id, p.version_id, p.ordinal, p.heading, p.text, p.start, p.end FROM passages p
             WHERE p.note_id >= ?3
               AND NOT EXISTS (SELECT 1 FROM passage_vectors v WHERE v.passage_id = p.id AND v.model = ?1)
             ORDER BY p.note_id, p.ordinal LIMIT ?2",
            params![model, limit as i64, from_note],
            pending_row,
        )
    }

    /// Like [`Store::pending_vectors`], for the passages of the notes at `paths` only (the notes a
    /// user just saved or opened: embedded before the backlog).
    pub fn pending_vectors_of(&self, model: &str, paths: &[String], limit: usize) -> Result<Vec<PendingPassage>, StoreError> {
        let mut out = Vec::new();
        for path in paths {
            if out.len() >= limit {
                break;
            }
            out.extend(self.rows(
                "SELECT p.id, p.note_id, p.version_id, p.ordinal, p.heading, p.text, p.start, p.end FROM passages p JOIN notes n ON n.id = p.note_id
                 WHERE n.path = ?2 AND NOT EXISTS (SELECT 1 FROM passage_vectors v WHERE v.passage_id = p.id AND v.model = ?1)
                 ORDER BY p.ordinal LIMIT ?3",
                params![model, path, (limit - out.len()) as i64],
                pending_row,
            )?);
        }
        Ok(out)
    }

    /// Of these window leaders, the ones queued for deletion: their old LanceDB rows must go
    /// before new rows with the same key are added.
    pub fn queued_deletions(&self, model: &str, leaders: &[i64]) -> Result<Vec<i64>, StoreError> {
        self.ids_where("SELECT 1 FROM vector_deletions WHERE passage_id = ?1 AND model = ?2", model, leaders, true)
    }

    /// Of `ids`, in order, those for which `sql` (bound to an id and `model`) finds a row, or
    /// (`found` false) finds none.
    fn ids_where(&self, sql: &str, model: &str, ids: &[i64], found: bool) -> Result<Vec<i64>, StoreError> {
        let mut st = self.conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for &id in ids {
            if st.exists(params![id, model]).map_err(|e| self.err(e))? == found {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Queues window leaders for deletion before their rows are added to LanceDB: if the process
    /// dies before [`Store::mark_windows`] records them, the next pass deletes the orphan rows.
    pub fn queue_vector_deletions(&mut self, model: &str, leaders: &[i64]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path, e);
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(e)?;
        {
            let mut ins = tx.prepare_cached("INSERT OR IGNORE INTO vector_deletions (passage_id, model) VALUES (?1, ?2)").map_err(e)?;
            for id in leaders {
                ins.execute(params![id, model]).map_err(e)?;
            }
        }
        tx.commit().map_err(e)
    }

    /// Records that each window (its member passage ids, leader first) now has a vector for
    /// `model`. A window one of whose members left meanwhile is not recorded: its vector covers
    /// text that is gone, so it stays queued for deletion and the remaining members stay
    /// pending. Returns how many windows were recorded.
    pub fn mark_windows(&mut self, model: &str, windows: &[Vec<i64>]) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path, e);
        // Immediate: the first statement reads, and a deferred transaction whose snapshot another
        // connection's commit outdated fails with SQLITE_BUSY_SNAPSHOT, which no timeout retries.
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(e)?;
        let mut marked = 0;
        {
            let mut exists = tx.prepare_cached("SELECT 1 FROM passages WHERE id = ?1").map_err(e)?;
            let mut ins = tx
                .prepare_cached("INSERT OR REPLACE INTO passage_vectors (passage_id, model, window_id) VALUES (?1, ?2, ?3)")
                .map_err(e)?;
            let mut done = tx.prepare_cached("DELETE FROM vector_deletions WHERE passage_id = ?1 AND model = ?2").map_err(e)?;
            let mut queue = tx.prepare_cached("INSERT OR IGNORE INTO vector_deletions (passage_id, model) VALUES (?1, ?2)").map_err(e)?;
            for w in windows {
                let Some(&leader) = w.first() else { continue };
                let mut whole = true;
                for id in w {
                    whole &= exists.exists([id]).map_err(e)?;
                }
                if !whole {
                    queue.execute(params![leader, model]).map_err(e)?;
                    continue;
                }
                for id in w {
                    ins.execute(params![id, model, leader]).map_err(e)?;
                }
                done.execute(params![leader, model]).map_err(e)?;
                marked += 1;
            }
        }
        tx.commit().map_err(e)?;
        Ok(marked)
    }

    /// The member passages of each window (by leader) of `model`, in document order.
    pub fn window_members(&self, model: &str, leaders: &[i64]) -> Result<std::collections::HashMap<i64, Vec<i64>>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT v.passage_id FROM passage_vectors v JOIN passages p ON p.id = v.passage_id
                 WHERE v.window_id = ?1 AND v.model = ?2 ORDER BY p.ordinal",
            )
            .map_err(|e| self.err(e))?;
        let mut out = std::collections::HashMap::new();
        for &leader in leaders {
            let ids = st
                .query_map(params![leader, model], |r| r.get::<_, i64>(0))
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| self.err(e))?;
            if !ids.is_empty() {
                out.insert(leader, ids);
            }
        }
        Ok(out)
    }

    /// Of these passages, the ones without a vector for `model`, in the order given: what the
    /// worker has not reached yet (a note saved a moment ago).
    pub fn without_vectors(&self, model: &str, ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        self.ids_where("SELECT 1 FROM passage_vectors WHERE passage_id = ?1 AND model = ?2", model, ids, false)
    }

    /// Window leaders whose vectors must be deleted.
    pub fn vector_deletions(&self, model: &str) -> Result<Vec<i64>, StoreError> {
        self.rows("SELECT passage_id FROM vector_deletions WHERE model = ?1 ORDER BY passage_id", [model], |r| r.get(0))
    }

    /// Forgets deletions that were carried out.
    pub fn clear_vector_deletions(&mut self, model: &str, ids: &[i64]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path, e);
        let tx = self.conn.transaction().map_err(e)?;
        {
            let mut del = tx.prepare_cached("DELETE FROM vector_deletions WHERE passage_id = ?1 AND model = ?2").map_err(e)?;
            for id in ids {
                del.execute(params![id, model]).map_err(e)?;
            }
        }
        tx.commit().map_err(e)
    }

    /// Makes the windows led by `leaders` pending again: their bookkeeping goes and their rows
    /// are queued for deletion (the caller deletes them from the table, then clears the queue;
    /// a crash between the two leaves the queue for the next pass).
    pub fn release_windows(&mut self, model: &str, leaders: &[i64]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path, e);
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(e)?;
        {
            let mut del = tx.prepare_cached("DELETE FROM passage_vectors WHERE model = ?1 AND window_id = ?2").map_err(e)?;
            let mut ins = tx.prepare_cached("INSERT OR IGNORE INTO vector_deletions (passage_id, model) VALUES (?1, ?2)").map_err(e)?;
            for id in leaders {
                del.execute(params![model, id]).map_err(e)?;
                ins.execute(params![id, model]).map_err(e)?;
            }
        }
        tx.commit().map_err(e)
    }

    /// Forgets every vector of `model` (the LanceDB table was lost: they will be rebuilt), and
    /// every vector of other models (the model changed: they are not mixed).
    pub fn reset_vectors(&mut self, model: Option<&str>) -> Result<(), StoreError> {
        let n = match model {
            Some(m) => self.conn.execute("DELETE FROM passage_vectors WHERE model = ?1", [m]),
            None => self.conn.execute("DELETE FROM passage_vectors", []),
        };
        n.map(|_| ()).map_err(|e| self.err(e))?;
        let d = match model {
            Some(m) => self.conn.execute("DELETE FROM vector_deletions WHERE model = ?1", [m]),
            None => self.conn.execute("DELETE FROM vector_deletions", []),
        };
        d.map(|_| ()).map_err(|e| self.err(e))
    }

    /// Forgets vectors of every model but `model`.
    pub fn drop_other_models(&mut self, model: &str) -> Result<usize, StoreError> {
        self.conn.execute("DELETE FROM vector_deletions WHERE model != ?1", [model]).map_err(|e| self.err(e))?;
        self.conn.execute("DELETE FROM passage_vectors WHERE model != ?1", [model]).map_err(|e| self.err(e))
    }

    /// Head passages in all, and how many have a vector for `model`.
    pub fn vector_freshness(&self, model: &str) -> Result<Freshness, StoreError> {
        let passages: i64 = self.conn.query_row("SELECT count(*) FROM passages", [], |r| r.get(0)).map_err(|e| self.err(e))?;
        let (with_vectors, windows): (i64, i64) = self
            .conn
            .query_row("SELECT count(*), count(DISTINCT window_id) FROM passage_vectors WHERE model = ?1", [model], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(|e| self.err(e))?;
        Ok(Freshness { passages, with_vectors, windows })
    }

    /// Passage rows by id (for hits from the dense index), skipping ids no longer present.
    pub fn passages_by_id(&self, ids: &[i64]) -> Result<Vec<crate::Hit>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT p.id, p.note_id, n.path, n.title, p.version_id, p.start, p.end, p.line, p.kind, p.heading,
                        0.0, p.text, p.parent_start, p.parent_end, n.kind
                 FROM passages p JOIN notes n ON n.id = p.note_id WHERE p.id = ?1",
            )
            .map_err(|e| self.err(e))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let hit = st.query_row([id], |r| crate::search::hit_from_row(r, crate::MatchMode::Any));
            match hit {
                Ok(h) => out.push(h),
                Err(rusqlite::Error::QueryReturnedNoRows) => {}
                Err(e) => return Err(self.err(e)),
            }
        }
        drop(st);
        self.add_sources(&mut out)?;
        Ok(out)
    }

    /// Notes linked from or to `note_id` (resolved links only), and the snapshots of the web
    /// pages it links to, without duplicates.
    pub fn linked_notes(&self, note_id: i64) -> Result<Vec<i64>, StoreError> {
        let rows: Vec<i64> = self.rows(
            "SELECT target_note FROM links WHERE src_note = ?1 AND target_note IS NOT NULL
             UNION SELECT src_note FROM links WHERE target_note = ?1
             UNION SELECT e.note_id FROM links l JOIN externals e ON e.url = l.target
                    WHERE l.src_note = ?1 AND l.target LIKE 'http%' AND e.note_id IS NOT NULL",
            [note_id],
            |r| r.get(0),
        )?;
        Ok(rows.into_iter().filter(|&n| n != note_id).collect())
    }
}
