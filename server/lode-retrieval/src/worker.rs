//! The embedding worker: brings the vector index in line with the head passages — deletes
//! vectors of passages that left, embeds passages that lack one, in batches. Everything it needs
//! to resume is in SQLite, so a crash or restart only means running it again.

use std::time::Instant;

use lode_models::Embedder;
use lode_store::Store;

use crate::index::{VectorIndex, VectorRow};
use crate::RetrievalError;

/// Passages fetched and embedded per round: a round is what a just-saved note waits behind
/// (and what a question waits for before it can embed itself). Each round also pays a LanceDB
/// delete + append, so rounds are not made smaller than this.
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

/// One pass of bringing the vector index in line, in rounds a caller can interleave with other
/// work (the language server releases the models between rounds so questions can embed).
pub struct Sync {
    model: String,
    started: Instant,
    /// Passages lacking a vector when the pass started (progress is out of this).
    pub total: usize,
    pub report: SyncReport,
}

impl Sync {
    /// Rebuilds a lost index's bookkeeping, applies queued deletions, and counts the work.
    pub fn start(store: &mut Store, index: &VectorIndex, model: &str) -> Result<Sync, RetrievalError> {
        let started = Instant::now();
        let mut report = SyncReport::default();
        let fresh = store.vector_freshness(model)?;
        if (index.count()? as i64) < fresh.with_vectors {
            store.reset_vectors(Some(model))?;
            report.rebuilt = true;
        }
        let gone = store.vector_deletions()?;
        if !gone.is_empty() {
            index.delete(&gone)?;
            store.clear_vector_deletions(&gone)?;
            report.deleted = gone.len();
        }
        let fresh = store.vector_freshness(model)?;
        let total = (fresh.passages - fresh.with_vectors).max(0) as usize;
        Ok(Sync { model: model.to_owned(), started, total, report })
    }

    /// Embeds one round: passages of the notes at `first` before any other. Returns whether it
    /// found anything to do (`false`: every head passage has a vector).
    pub fn round(&mut self, store: &mut Store, index: &VectorIndex, embedder: &mut Embedder, first: &[String]) -> Result<bool, RetrievalError> {
        let mut batch = if first.is_empty() { Vec::new() } else { store.pending_vectors_of(&self.model, first, ROUND)? };
        if batch.is_empty() {
            batch = store.pending_vectors(&self.model, ROUND)?;
        }
        if batch.is_empty() {
            return Ok(false);
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
        store.mark_vectors(&self.model, &ids)?;
        self.report.embedded += ids.len();
        Ok(true)
    }

    /// Passages embedded so far out of [`Sync::total`] (saves during the pass may add more).
    pub fn done(&self) -> usize {
        self.report.embedded.min(self.total)
    }

    /// Ends the pass: once this model is complete, vectors of any other model are dropped.
    pub fn finish(mut self, store: &mut Store, index: &VectorIndex) -> Result<SyncReport, RetrievalError> {
        let fresh = store.vector_freshness(&self.model)?;
        if fresh.with_vectors == fresh.passages && store.drop_other_models(&self.model)? > 0 {
            index.drop_other_tables()?;
        }
        self.report.seconds = self.started.elapsed().as_secs_f64();
        Ok(self.report)
    }
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
    let model = embedder.id().to_owned();
    let mut sync = Sync::start(store, index, &model)?;
    progress(0, sync.total);
    while keep_going() {
        if !sync.round(store, index, embedder, &[])? {
            break;
        }
        progress(sync.done(), sync.total);
    }
    sync.finish(store, index)
}
