//! The embedder: text → unit vectors, with distinct entry points for passages and questions;
//! run here by ONNX Runtime, or by an OpenAI-compatible server the user runs ([`crate::remote`]).

use std::path::{Path, PathBuf};

use crate::cross::OnnxModel;
use crate::manifest::{Manifest, ModelKind, Pooling};
use crate::remote::{HttpConfig, HttpEmbedder};
use crate::ModelError;

/// Inputs per inference call. On two cores very big batches are slower, not faster: the int8
/// MiniLM ran 913 SciFact windows in 34 s at ≤ 4 inputs and ≤ 256 padded tokens per call, in
/// 52 s at ≤ 32 inputs and ≤ 4,096 tokens. Since the model keeps its int8 weights (no constant
/// folding, `graph`), each call dequantizes them once, which small calls pay for most: at 512
/// tokens per call it ran 3,300-3,400 tokens/s against 2,500 at 256 (ONNX Runtime's Python API,
/// windows of 64-128 tokens), faster than the folded model at 256.
pub const BATCH: usize = 8;
/// Bound on a batch's padded size (inputs × longest input, in estimated tokens): it bounds the
/// activations ONNX Runtime allocates for one call, whatever the texts, and so its arena.
pub const BATCH_TOKENS: usize = 512;

/// Groups inputs into inference batches: sorted by length, so each batch pads to a length close
/// to all of its inputs, at most `max_inputs` per batch and at most `max_tokens` padded tokens
/// (`len(i)` estimates input `i`'s tokens). Every index appears in exactly one batch; a single
/// input over `max_tokens` is a batch of its own.
pub fn length_batches(n: usize, len: impl Fn(usize) -> usize, max_inputs: usize, max_tokens: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (len(i), i));
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    for i in order {
        // Sorted ascending: the newest input is the batch's longest.
        let padded = (cur.len() + 1) * len(i).max(1);
        if !cur.is_empty() && (cur.len() >= max_inputs.max(1) || padded > max_tokens) {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(i);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A token estimate good enough to sort and bound batches by: about four bytes per token,
/// capped at the model's input length (longer texts are truncated to it).
fn estimated_tokens(text: &str, max_length: usize) -> usize {
    (text.len() / 4 + 2).min(max_length.max(1))
}

/// Where an embedder comes from.
#[derive(Debug, Clone)]
pub enum EmbedderSource {
    /// A model folder run here by ONNX Runtime.
    Onnx { dir: PathBuf, runtime: Option<PathBuf>, threads: usize },
    /// An OpenAI-compatible `/v1/embeddings` server.
    Http(HttpConfig),
}

impl EmbedderSource {
    /// What the user reads: the folder, or the model and the server.
    pub fn describe(&self) -> String {
        match self {
            EmbedderSource::Onnx { dir, .. } => dir.display().to_string(),
            EmbedderSource::Http(h) => format!("{} at {}", h.model, h.url),
        }
    }

    /// Whether what it embeds leaves this machine.
    pub fn off_machine(&self) -> bool {
        matches!(self, EmbedderSource::Http(h) if h.off_machine)
    }
}

pub struct Embedder {
    backend: Backend,
}

enum Backend {
    Onnx(Box<OnnxModel>),
    Http { server: Box<HttpEmbedder>, manifest: Manifest },
}

impl Embedder {
    /// Loads the model, or connects to the server (asking it for one vector).
    pub fn open(source: &EmbedderSource) -> Result<Embedder, ModelError> {
        match source {
            EmbedderSource::Onnx { dir, runtime, threads } => Embedder::load(dir, runtime.as_deref(), *threads),
            EmbedderSource::Http(config) => {
                let server = HttpEmbedder::connect(config.clone())?;
                let c = &server.config;
                let manifest = Manifest {
                    id: c.id(),
                    kind: ModelKind::Embedder,
                    pooling: Pooling::Mean,
                    normalize: true,
                    max_length: c.max_tokens.max(16),
                    dimensions: server.dims,
                    query_prefix: c.query_prefix.clone(),
                    passage_prefix: c.passage_prefix.clone(),
                    logit_index: 0,
                    output: None,
                    labels: Vec::new(),
                };
                Ok(Embedder { backend: Backend::Http { server: Box::new(server), manifest } })
            }
        }
    }

    /// Whether the texts it embeds leave this machine (an embedding server elsewhere): they are
    /// scrubbed of secrets on the way, and callers keep no-egress notes from it.
    pub fn sends_off_machine(&self) -> bool {
        matches!(&self.backend, Backend::Http { server, .. } if server.config.off_machine)
    }

    /// The text as this embedder sends it, and how many secrets were masked in it: as given
    /// when it stays on the machine.
    pub fn scrub(&self, text: &str) -> (String, usize) {
        match &self.backend {
            Backend::Http { server, .. } if server.config.off_machine => match &server.config.scrub {
                Some(s) => s(text),
                // `connect` refuses this: nothing is what may be sent.
                None => (String::new(), 0),
            },
            _ => (text.to_owned(), 0),
        }
    }

    /// Where the texts go, for the egress log (`None`: nowhere, they are embedded here).
    pub fn destination(&self) -> Option<&str> {
        match &self.backend {
            Backend::Http { server, .. } => Some(&server.config.url),
            Backend::Onnx(_) => None,
        }
    }

    /// Loads `dir` (model.onnx, tokenizer.json, lode-model.toml) and checks it really produces
    /// vectors of the manifest's dimensions.
    pub fn load(dir: &Path, runtime: Option<&Path>, threads: usize) -> Result<Embedder, ModelError> {
        let manifest = Manifest::load(dir)?;
        if manifest.kind != ModelKind::Embedder {
            return Err(ModelError::model(dir, format!("{} is a {:?}, not an embedder", manifest.id, manifest.kind)));
        }
        let model = OnnxModel::load(dir, manifest, runtime, threads)?;
        let mut e = Embedder { backend: Backend::Onnx(Box::new(model)) };
        let probe = e.embed(vec!["lode".to_owned()])?;
        let dims = probe.first().map_or(0, Vec::len);
        if dims != e.manifest().dimensions {
            return Err(ModelError::model(
                dir,
                format!("the model produces {dims}-dimensional vectors, the manifest says {}", e.manifest().dimensions),
            ));
        }
        Ok(e)
    }

    pub fn manifest(&self) -> &Manifest {
        match &self.backend {
            Backend::Onnx(m) => &m.manifest,
            Backend::Http { manifest, .. } => manifest,
        }
    }

    pub fn id(&self) -> &str {
        &self.manifest().id
    }

    pub fn dimensions(&self) -> usize {
        self.manifest().dimensions
    }

    /// The model's input length in tokens (longer inputs are truncated to it).
    pub fn max_length(&self) -> usize {
        self.manifest().max_length
    }

    /// After a bulk pass: hands back the inference arena the pass's largest batch grew (see
    /// `OnnxModel::release_scratch`); queries then run in a small one.
    pub fn release_scratch(&mut self) -> Result<(), ModelError> {
        match &mut self.backend {
            Backend::Onnx(m) => m.release_scratch(),
            Backend::Http { .. } => Ok(()),
        }
    }

    /// Tokens of each text as the model sees it (special tokens and prefix excluded). A server's
    /// tokenizer is not known here: about four bytes a token, as its windows are planned.
    pub fn token_counts(&self, texts: &[&str]) -> Result<Vec<usize>, ModelError> {
        match &self.backend {
            Backend::Onnx(m) => m.token_counts(texts),
            Backend::Http { .. } => Ok(texts.iter().map(|t| t.len().div_ceil(4)).collect()),
        }
    }

    /// Document side: passages get the manifest's `passage_prefix`.
    /// Inputs are batched by length ([`length_batches`]); vectors come back in input order.
    pub fn embed_passages(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.manifest().passage_prefix.clone();
        let max_length = self.manifest().max_length;
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        if let Backend::Http { server, .. } = &mut self.backend {
            // The server batches its own way; requests of `batch` inputs each, in order.
            return server.embed(&inputs);
        }
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for batch in length_batches(inputs.len(), |i| estimated_tokens(&inputs[i], max_length), BATCH, BATCH_TOKENS) {
            let vectors = self.embed(batch.iter().map(|&i| inputs[i].clone()).collect())?;
            for (i, v) in batch.into_iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// Query side: questions get the manifest's `query_prefix` (asymmetric models lose recall
    /// when a question is embedded like a document).
    pub fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, ModelError> {
        let q = format!("{}{text}", self.manifest().query_prefix);
        match &mut self.backend {
            Backend::Http { server, .. } => return Ok(server.embed(&[q])?.pop().unwrap_or_default()),
            // A question comes now and then: the arena its run grows is handed back at the run's
            // end rather than held between questions (the next one grows it again, ~1 ms).
            Backend::Onnx(m) => m.shrink_after_next_run(),
        }
        Ok(self.embed(vec![q])?.pop().unwrap_or_default())
    }

    fn embed(&mut self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        let model = match &mut self.backend {
            Backend::Onnx(m) => m,
            Backend::Http { server, .. } => return server.embed(&texts),
        };
        let inputs: Vec<tokenizers::EncodeInput> = texts.into_iter().map(Into::into).collect();
        let (shape, data, mask) = model.run(inputs)?;
        let m = &model.manifest;
        let (batch, seq) = (mask.len(), mask.first().map_or(0, Vec::len));
        let mut out = Vec::with_capacity(batch);
        match shape.len() {
            // [batch, seq, dim]: token states, pooled here.
            3 => {
                let dim = shape[2] as usize;
                for (b, row_mask) in mask.iter().enumerate() {
                    let mut v = vec![0f32; dim];
                    match m.pooling {
                        Pooling::Cls => v.copy_from_slice(&data[b * seq * dim..b * seq * dim + dim]),
                        Pooling::Mean => {
                            let mut n = 0f32;
                            for (t, &keep) in row_mask.iter().enumerate() {
                                if keep == 0 {
                                    continue;
                                }
                                n += 1.0;
                                let base = (b * seq + t) * dim;
                                for (acc, x) in v.iter_mut().zip(&data[base..base + dim]) {
                                    *acc += x;
                                }
                            }
                            v.iter_mut().for_each(|x| *x /= n.max(1.0));
                        }
                    }
                    out.push(v);
                }
            }
            // [batch, dim]: already pooled (a sentence_embedding output).
            2 => {
                let dim = shape[1] as usize;
                out.extend((0..batch).map(|b| data[b * dim..(b + 1) * dim].to_vec()));
            }
            _ => {
                return Err(ModelError::Inference {
                    model: m.id.clone(),
                    detail: format!("unexpected output shape {shape:?}; expected [batch, seq, dim] or [batch, dim]"),
                })
            }
        }
        if m.normalize {
            for v in &mut out {
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm > 0.0 {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_batches_cover_every_input_once_within_their_bounds() {
        let lens = [300, 5, 40, 41, 7, 200, 6, 1, 128, 129, 3, 90, 2, 64, 64, 64, 8, 1000];
        let batches = length_batches(lens.len(), |i| lens[i], 4, 256);
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort();
        assert_eq!(seen, (0..lens.len()).collect::<Vec<_>>());
        for b in &batches {
            assert!(!b.is_empty() && b.len() <= 4, "{b:?}");
            let longest = b.iter().map(|&i| lens[i]).max().unwrap();
            assert!(b.len() == 1 || b.len() * longest <= 256, "{b:?} pads to {}", b.len() * longest);
        }
        // Sorted by length: no batch's shortest is shorter than the previous batch's longest.
        for w in batches.windows(2) {
            let prev = w[0].iter().map(|&i| lens[i]).max().unwrap();
            let next = w[1].iter().map(|&i| lens[i]).min().unwrap();
            assert!(next >= prev, "{batches:?}");
        }
        // An input over the bound is alone; nothing at all is no batch.
        assert!(batches.iter().any(|b| b == &vec![17]));
        assert!(length_batches(0, |_| 1, 4, 256).is_empty());
    }
}
