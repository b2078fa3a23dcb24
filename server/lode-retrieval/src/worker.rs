//! The embedding worker: brings the vector index in line with the head passages — deletes
//! vectors of passages that left, embeds passages that lack one, in batches. Everything it needs
//! to resume is in SQLite, so a crash or restart only means running it again.

use std::time::Instant;

use lode_models::Embedder;
use lode_store::Store;

use crate::index::{VectorIndex, VectorRow};
use crate::RetrievalError;

/// Passages fetched and embedded per round.
const ROUND: usize = 64;

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SyncReport {
    pub embedded: usize,
    pub deleted: usize,
    /// The index had lost vectors the bookkeeping recorded (folder deleted or damaged): they
    /// were rebuilt from the passages.
    pub rebuilt: bool,
    pub seconds: f64,
}

/// Runs until every head passage has a vector for the embedder's model. `progress(done, total)`
/// is called after every round; returning `false` from `keep_going` stops between rounds.
pub fn sync_vectors(
    store: &mut Store,
    index: &VectorIndex,
    embedder: &mut Embedder,
    mut progress: impl FnMut(usize, usize),
    mut keep_going: impl FnMut() -> bool,
) -> Result<SyncReport, RetrievalError> {
    let started = Instant::now();
    let model = embedder.id().to_owned();
    let mut report = SyncReport::default();

    let fresh = store.vector_freshness(&model)?;
    if (index.count()? as i64) < fresh.with_vectors {
        store.reset_vectors(Some(&model))?;
        report.rebuilt = true;
    }
    let gone = store.vector_deletions()?;
    if !gone.is_empty() {
        index.delete(&gone)?;
        store.clear_vector_deletions(&gone)?;
        report.deleted = gone.len();
    }

    let fresh = store.vector_freshness(&model)?;
    let total = (fresh.passages - fresh.with_vectors).max(0) as usize;
    progress(0, total);
    while keep_going() {
        let batch = store.pending_vectors(&model, ROUND)?;
        if batch.is_empty() {
            break;
        }
        let texts: Vec<&str> = batch.iter().map(|p| p.text.as_str()).collect();
        let vectors = embedder.embed_passages(&texts)?;
        let rows: Vec<VectorRow> = batch
            .iter()
            .zip(vectors)
            .map(|(p, v)| VectorRow { passage_id: p.id, note_id: p.note_id, version_id: p.version_id.clone(), vector: v })
            .collect();
        index.upsert(&rows)?;
        let ids: Vec<i64> = batch.iter().map(|p| p.id).collect();
        store.mark_vectors(&model, &ids)?;
        report.embedded += ids.len();
        progress(report.embedded.min(total), total);
    }
    if store.vector_freshness(&model)?.with_vectors == store.vector_freshness(&model)?.passages {
        // Complete for this model: vectors of any other model are dropped, never mixed.
        if store.drop_other_models(&model)? > 0 {
            index.drop_other_tables()?;
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
