//! lode's local models through ONNX Runtime (loaded dynamically, so lode runs lexical-only when
//! no runtime is installed): the embedder (passages and queries, asymmetric prefixes) and the
//! cross-encoder (reranking, and repurposed as the gate's entailment scorer). The embedder may
//! also be a server the user runs (`remote`).
//!
//! A model directory holds `model.onnx`, `tokenizer.json` and `lode-model.toml` (see
//! [`Manifest`]); `models/*.toml` in the repository has manifests for common models.

mod cross;
mod embedder;
mod graph;
mod manifest;
pub mod remote;
mod runtime;

use std::path::PathBuf;

pub use cross::{CrossEncoder, NliModel};
pub use embedder::{Embedder, EmbedderSource, BATCH as EMBED_BATCH, BATCH_TOKENS as EMBED_BATCH_TOKENS};
pub use graph::{externalize as externalize_weights, prepare as prepare_graph, Externalized, Prepared as PreparedGraph};
pub use manifest::{Manifest, ModelKind, Pooling};
pub use runtime::{environment, loaded_runtime, runtime_candidates, user_cache_dir, user_data_dir, xdg_dir};

#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    #[error("ONNX Runtime library not found (looked for {}); run scripts/setup-models.sh or set ORT_DYLIB_PATH / [models] runtime", .searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    RuntimeMissing { searched: Vec<PathBuf> },
    #[error("cannot use ONNX Runtime from {path}: {detail} (lode needs ONNX Runtime 1.31 or newer)")]
    RuntimeLoad { path: PathBuf, detail: String },
    #[error("model at {path}: {detail}")]
    Model { path: PathBuf, detail: String },
    #[error("embedding server {endpoint}: {detail}")]
    Remote { endpoint: String, detail: String },
    #[error("model {model}: inference failed: {detail}")]
    Inference { model: String, detail: String },
}

impl ModelError {
    pub(crate) fn model(path: &std::path::Path, detail: impl std::fmt::Display) -> ModelError {
        ModelError::Model { path: path.to_path_buf(), detail: detail.to_string() }
    }
}

/// Number of intra-op threads for inference (the machine's cores, at most 4).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get().min(4)).unwrap_or(2)
}
