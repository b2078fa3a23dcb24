//! Bookkeeping for the dense index: which head passages have a vector for which model, which
//! vectors must go, and how fresh the index is. The vectors themselves live in LanceDB.

use rusqlite::params;

use crate::error::StoreError;
use crate::store::Store;

/// A passage that needs a vector.
#[derive(Debug, Clone)]
pub struct PendingPassage {
    pub id: i64,
    pub note_id: i64,
    pub version_id: String,
    /// What is embedded: heading context, then the passage text.
    pub text: String,
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Freshness {
    pub passages: i64,
    pub with_vectors: i64,
}

/// A row of `id, note_id, version_id, heading, text`: what the embedder reads (heading first).
fn pending_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PendingPassage> {
    let heading: String = r.get(3)?;
    let text: String = r.get(4)?;
    Ok(PendingPassage {
        id: r.get(0)?,
        note_id: r.get(1)?,
        version_id: r.get(2)?,
        text: if heading.is_empty() { text } else { format!("{heading}\n{text}") },
    })
}

impl Store {
    /// Up to `limit` head passages without a vector for `model`, in id order.
    pub fn pending_vectors(&self, model: &str, limit: usize) -> Result<Vec<PendingPassage>, StoreError> {
        self.rows(
            "SELECT p.id, p.note_id, p.version_id, p.heading, p.text FROM passages p
             WHERE NOT EXISTS (SELECT 1 FROM passage_vectors v WHERE v.passage_id = p.id AND v.model = ?1)
             ORDER BY p.id LIMIT ?2",
            params![model, limit as i64],
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
                "SELECT p.id, p.note_id, p.version_id, p.heading, p.text FROM passages p JOIN notes n ON n.id = p.note_id
                 WHERE n.path = ?2 AND NOT EXISTS (SELECT 1 FROM passage_vectors v WHERE v.passage_id = p.id AND v.model = ?1)
                 ORDER BY p.id LIMIT ?3",
                params![model, path, (limit - out.len()) as i64],
                pending_row,
            )?);
        }
        Ok(out)
    }

    /// Records that these passages now have a vector for `model` (ids that left meanwhile are
    /// ignored: their vectors are queued for deletion instead).
    pub fn mark_vectors(&mut self, model: &str, ids: &[i64]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path, e);
        let tx = self.conn.transaction().map_err(e)?;
        {
            let mut ins = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO passage_vectors (passage_id, model)
                     SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM passages WHERE id = ?1)",
                )
                .map_err(e)?;
            let mut gone = tx.prepare_cached("INSERT OR IGNORE INTO vector_deletions (passage_id) SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM passages WHERE id = ?1)").map_err(e)?;
            for id in ids {
                ins.execute(params![id, model]).map_err(e)?;
                gone.execute([id]).map_err(e)?;
            }
        }
        tx.commit().map_err(e)
    }

    /// Passage ids whose vectors must be deleted.
    pub fn vector_deletions(&self) -> Result<Vec<i64>, StoreError> {
        self.rows("SELECT passage_id FROM vector_deletions ORDER BY passage_id", [], |r| r.get(0))
    }

    /// Forgets deletions that were carried out.
    pub fn clear_vector_deletions(&mut self, ids: &[i64]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |e| StoreError::from_sqlite(&path, e);
        let tx = self.conn.transaction().map_err(e)?;
        {
            let mut del = tx.prepare_cached("DELETE FROM vector_deletions WHERE passage_id = ?1").map_err(e)?;
            for id in ids {
                del.execute([id]).map_err(e)?;
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
        self.conn.execute("DELETE FROM vector_deletions", []).map(|_| ()).map_err(|e| self.err(e))
    }

    /// Forgets vectors of every model but `model`.
    pub fn drop_other_models(&mut self, model: &str) -> Result<usize, StoreError> {
        self.conn.execute("DELETE FROM passage_vectors WHERE model != ?1", [model]).map_err(|e| self.err(e))
    }

    /// Head passages in all, and how many have a vector for `model`.
    pub fn vector_freshness(&self, model: &str) -> Result<Freshness, StoreError> {
        let passages: i64 = self.conn.query_row("SELECT count(*) FROM passages", [], |r| r.get(0)).map_err(|e| self.err(e))?;
        let with_vectors: i64 = self
            .conn
            .query_row("SELECT count(*) FROM passage_vectors WHERE model = ?1", [model], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        Ok(Freshness { passages, with_vectors })
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
