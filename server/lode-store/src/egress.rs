//! The egress log: what note text left the machine, when, to where, and why.

use rusqlite::{params, OptionalExtension};

use crate::error::StoreError;
use crate::store::{now_ms, Store};

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct EgressRecord {
    pub at: i64,
    pub destination: String,
    pub purpose: String,
    pub passages: Vec<i64>,
    pub bytes: u64,
    pub redactions: u64,
}

impl Store {
    /// Records a call that sent text off the machine. Written before the call is made, so a
    /// crash mid-call still leaves the record.
    pub fn log_egress(&self, destination: &str, purpose: &str, passages: &[i64], bytes: u64, redactions: u64) -> Result<(), StoreError> {
        let ids = serde_json::to_string(passages).unwrap_or_else(|_| "[]".into());
        self.conn
            .execute(
                "INSERT INTO egress_log (at, destination, purpose, passages, bytes, redactions) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![now_ms(), destination, purpose, ids, bytes as i64, redactions as i64],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Every egress record, oldest first.
    pub fn egress_log(&self) -> Result<Vec<EgressRecord>, StoreError> {
        let rows = self.rows("SELECT at, destination, purpose, passages, bytes, redactions FROM egress_log ORDER BY id", [], |r| {
            let ids: String = r.get(3)?;
            Ok(EgressRecord {
                at: r.get(0)?,
                destination: r.get(1)?,
                purpose: r.get(2)?,
                passages: serde_json::from_str(&ids).unwrap_or_default(),
                bytes: r.get::<_, i64>(4)? as u64,
                redactions: r.get::<_, i64>(5)? as u64,
            })
        })?;
        Ok(rows)
    }

    /// Frontmatter metadata of a note (an object of strings).
    /// The id of the note at `path`, if the index has one (one lookup, not a list of notes).
    pub fn note_id(&self, path: &str) -> Result<Option<i64>, StoreError> {
        self.conn.query_row("SELECT id FROM notes WHERE path = ?1", [path], |r| r.get(0)).optional().map_err(|e| self.err(e))
    }

    /// The path of note `note_id`, if the index has it.
    pub fn note_path(&self, note_id: i64) -> Result<Option<String>, StoreError> {
        self.conn.query_row("SELECT path FROM notes WHERE id = ?1", [note_id], |r| r.get(0)).optional().map_err(|e| self.err(e))
    }

    pub fn note_meta(&self, note_id: i64) -> Result<serde_json::Map<String, serde_json::Value>, StoreError> {
        use rusqlite::OptionalExtension;
        // Egress decisions rest on this: an error is an error, never "no metadata".
        let meta: Option<Option<String>> =
            self.conn.query_row("SELECT meta FROM notes WHERE id = ?1", [note_id], |r| r.get(0)).optional().map_err(|e| self.err(e))?;
        match meta.flatten() {
            None => Ok(serde_json::Map::new()),
            Some(m) => serde_json::from_str(&m).map_err(|e| StoreError::Corrupt {
                path: self.path().to_path_buf(),
                detail: format!("metadata of note {note_id} is not a JSON object: {e}"),
            }),
        }
    }

    /// Inverse document frequency of each term over head passages (BM25's formula), for ranking
    /// sentences by how informative the question words they contain are.
    pub fn term_weights(&self, terms: &[String]) -> Result<std::collections::HashMap<String, f64>, StoreError> {
        let n: f64 = self.conn.query_row("SELECT count(*) FROM passages", [], |r| r.get::<_, i64>(0)).map_err(|e| self.err(e))? as f64;
        let mut st = self.conn.prepare_cached("SELECT count(*) FROM passages_fts WHERE passages_fts MATCH ?1").map_err(|e| self.err(e))?;
        let mut out = std::collections::HashMap::new();
        for t in terms {
            let Some(q) = lode_core::query::and_query(std::slice::from_ref(t)) else { continue };
            let df: f64 = st.query_row([q], |r| r.get::<_, i64>(0)).map_err(|e| self.err(e))? as f64;
            out.insert(t.clone(), (1.0 + (n - df + 0.5) / (df + 0.5)).ln());
        }
        Ok(out)
    }
}
