//! `lode-model.toml`: what lode needs to know about a model that the ONNX file does not say.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ModelError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    Embedder,
    /// A reranker: one relevance logit per (query, passage) pair.
    CrossEncoder,
    /// A natural-language-inference classifier: one logit per label for (premise, hypothesis).
    Nli,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// Mean over the non-padding tokens.
    Mean,
    /// The first ([CLS]) token.
    Cls,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Identifies the model; vectors of different ids are never mixed.
    pub id: String,
    pub kind: ModelKind,
    #[serde(default = "default_pooling")]
    pub pooling: Pooling,
    #[serde(default = "yes")]
    pub normalize: bool,
    /// Tokens; longer inputs are truncated.
    pub max_length: usize,
    /// Embedding size (embedders).
    #[serde(default)]
    pub dimensions: usize,
    /// Prepended to questions (`embed_query`), e.g. nomic's `search_query: `.
    #[serde(default)]
    pub query_prefix: String,
    /// Prepended to passages (`embed_passages`), e.g. nomic's `search_document: `.
    #[serde(default)]
    pub passage_prefix: String,
    /// Cross-encoders: which logit is the score (0 for single-logit rerankers; the entailment
    /// class for a 3-way NLI model).
    #[serde(default)]
    pub logit_index: usize,
    /// Output tensor to read (default: the model's first output).
    #[serde(default)]
    pub output: Option<String>,
    /// NLI models: the label of each output logit, in order (e.g. `["contradiction",
    /// "entailment", "neutral"]`); one must be `entailment`.
    #[serde(default)]
    pub labels: Vec<String>,
}

fn default_pooling() -> Pooling {
    Pooling::Mean
}

fn yes() -> bool {
    true
}

impl Manifest {
    pub fn load(dir: &Path) -> Result<Manifest, ModelError> {
        let path = dir.join("lode-model.toml");
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::model(&path, format!("cannot read the manifest: {e}")))?;
        let m: Manifest = toml::from_str(&text).map_err(|e| ModelError::model(&path, format!("invalid manifest: {e}")))?;
        if m.max_length == 0 {
            return Err(ModelError::model(&path, "max_length must be positive"));
        }
        if m.kind == ModelKind::Embedder && m.dimensions == 0 {
            return Err(ModelError::model(&path, "an embedder needs `dimensions`"));
        }
        if m.kind == ModelKind::Nli && !m.labels.iter().any(|l| l.eq_ignore_ascii_case("entailment")) {
            return Err(ModelError::model(
                &path,
                format!("an NLI model needs `labels` naming each logit, one of them \"entailment\" (has: {:?})", m.labels),
            ));
        }
        Ok(m)
    }
}
