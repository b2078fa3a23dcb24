//! The embedder: text → unit vectors, with distinct entry points for passages and questions.

use std::path::Path;

use crate::cross::OnnxModel;
use crate::manifest::{Manifest, ModelKind, Pooling};
use crate::ModelError;

/// Inputs per inference call; larger batches only add padding waste on 2 cores.
const BATCH: usize = 16;

pub struct Embedder {
    model: OnnxModel,
}

impl Embedder {
    /// Loads `dir` (model.onnx, tokenizer.json, lode-model.toml) and checks it really produces
    /// vectors of the manifest's dimensions.
    pub fn load(dir: &Path, runtime: Option<&Path>, threads: usize) -> Result<Embedder, ModelError> {
        let manifest = Manifest::load(dir)?;
        if manifest.kind != ModelKind::Embedder {
            return Err(ModelError::model(dir, format!("{} is a {:?}, not an embedder", manifest.id, manifest.kind)));
        }
        let mut e = Embedder { model: OnnxModel::load(dir, manifest, runtime, threads)? };
        let probe = e.embed(vec!["lode".to_owned()])?;
        let dims = probe.first().map_or(0, Vec::len);
        if dims != e.model.manifest.dimensions {
            return Err(ModelError::model(
                dir,
                format!("the model produces {dims}-dimensional vectors, the manifest says {}", e.model.manifest.dimensions),
            ));
        }
        Ok(e)
    }

    pub fn manifest(&self) -> &Manifest {
        &self.model.manifest
    }

    pub fn id(&self) -> &str {
        &self.model.manifest.id
    }

    pub fn dimensions(&self) -> usize {
        self.model.manifest.dimensions
    }

    /// Document side: passages get the manifest's `passage_prefix`.
    pub fn embed_passages(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.model.manifest.passage_prefix.clone();
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(self.embed(chunk.iter().map(|t| format!("{prefix}{t}")).collect())?);
        }
        Ok(out)
    }

    /// Query side: questions get the manifest's `query_prefix` (asymmetric models lose recall
    /// when a question is embedded like a document).
    pub fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, ModelError> {
        let q = format!("{}{text}", self.model.manifest.query_prefix);
        Ok(self.embed(vec![q])?.pop().unwrap_or_default())
    }

    fn embed(&mut self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        let inputs: Vec<tokenizers::EncodeInput> = texts.into_iter().map(Into::into).collect();
        let (shape, data, mask) = self.model.run(inputs)?;
        let m = &self.model.manifest;
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
