//! lode's retrieval: the vector index (LanceDB) and the worker that keeps it fresh, and the
//! hybrid pipeline — lexical ∥ dense → RRF → rerank → small-to-big → link graph → trust order.

mod index;
mod pipeline;
pub mod shared;
mod worker;

use std::path::PathBuf;

pub use index::{placeholder_vector, table_name, Serving, VectorIndex, VectorRow, ANN_MIN_ROWS, ANN_NPROBES, ANN_REFINE, WITHHELD};
pub use pipeline::{retrieve, Mode, Models, RetrievalConfig, Retrieved, Stage};
pub use worker::{plan_windows, sync_vectors, window_text, windows, Outbound, Sync, SyncReport, WINDOW_TOKENS};

#[derive(Debug, thiserror::Error)]
pub enum RetrievalError {
    #[error(transparent)]
    Store(#[from] lode_store::StoreError),
    #[error(transparent)]
    Model(#[from] lode_models::ModelError),
    #[error("vector index {path}: {detail}")]
    Index { path: PathBuf, detail: String },
    #[error("{0}")]
    Unavailable(String),
    /// [`RetrievalConfig::cancel`] was set: the question was withdrawn.
    #[error("cancelled")]
    Cancelled,
}
