//! Cross-encoders: the reranker scores (query, passage) pairs jointly; the NLI model classifies
//! (premise, hypothesis) pairs and serves the gate as its entailment step. A reranker's relevance
//! is not entailment ("every 90 days" is highly relevant to "every 60 days"), so only an NLI
//! model can be the gate's scorer.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use ort::session::{RunOptions, Session, SessionInputValue};
use ort::value::Tensor;
use tokenizers::{EncodeInput, PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::manifest::{Manifest, ModelKind};
use crate::ModelError;

const BATCH: usize = 8;

/// A loaded ONNX model with its tokenizer: tokenizes, builds the inputs the model declares, runs.
pub(crate) struct OnnxModel {
    pub manifest: Manifest,
    session: Session,
    /// Truncates to the model's input length and pads a batch to its longest input. Counts of
    /// tokens before truncation read the truncated-off pieces (`overflowing`) rather than a
    /// second, untruncated copy: a copy of the vocabulary is ~4 MB held for the model's life.
    tokenizer: Tokenizer,
    inputs: Vec<String>,
    output: String,
    path: PathBuf,
    /// The next run hands the arena's unused memory back (see [`OnnxModel::release_scratch`]).
    shrink: bool,
}

impl OnnxModel {
    pub fn load(dir: &Path, manifest: Manifest, runtime: Option<&Path>, threads: usize) -> Result<OnnxModel, ModelError> {
        let model_path = dir.join("model.onnx");
        let tok_path = dir.join("tokenizer.json");
        for p in [&model_path, &tok_path] {
            if !p.is_file() {
                return Err(ModelError::model(dir, format!("{} is missing", p.display())));
            }
        }
        let env = crate::environment(runtime)?;
        let mut file = std::fs::read(&model_path).map_err(|e| ModelError::model(&model_path, format!("cannot read it: {e}")))?;
        let mut prepared = crate::graph::prepare(&file);
        // Large weights load mapped from a file beside the model (`graph::externalize`) when
        // the model's folder takes one; otherwise from memory, as the model is.
        let mapped = derived_model(dir, prepared.bytes.as_deref().unwrap_or(&file));
        if mapped.is_some() {
            (file, prepared.bytes) = (Vec::new(), None);
        }
        // ONNX Runtime's arena with small batches (`embedder::BATCH_TOKENS`): the arena stays
        // small because the largest batch is, and reusing it is faster than allocating per call
        // (600 SciFact notes: arena off, 16 inputs per batch, 63 s and 906 MB peak; arena on, at
        // most 256 padded tokens per batch, 34 s and 323 MB). Memory patterns are off: they plan
        // per input shape, and every batch has its own. An int8 model that dequantizes by `Cast`
        // is loaded without constant folding, which would keep an fp32 copy of every weight
        // (4x the model) for the session's life; its lookups are rewritten to dequantize only
        // the rows a batch uses (`graph`). docs/benchmarks.md, "Memory with models loaded".
        let folding_off = prepared.cast_dequantized > 0;
        let build = |from: Source| {
            Session::builder(env)
                .and_then(|b| Ok(b.with_intra_threads(threads.max(1))?))
                .and_then(|b| Ok(b.with_memory_pattern(false)?))
                .and_then(|b| Ok(if folding_off { b.with_disabled_optimizers("ConstantFolding")? } else { b }))
                .and_then(|mut b| match from {
                    Source::File(p) => b.commit_from_file(p),
                    Source::Memory(bytes) => b.commit_from_memory(bytes),
                })
        };
        // Not rewritten: loaded from its file, so weights kept beside it (external data) are
        // found. A derived copy ONNX Runtime refuses is passed over for the model itself.
        let from_model = |rewritten: Option<&[u8]>| match rewritten {
            Some(r) => build(Source::Memory(r)),
            None => build(Source::File(&model_path)),
        };
        let session = match &mapped {
            Some(derived) => build(Source::File(derived)).or_else(|_| {
                let file = std::fs::read(&model_path).map_err(|e| ort::Error::new(format!("reading it again: {e}")))?;
                from_model(crate::graph::prepare(&file).bytes.as_deref())
            }),
            None => from_model(prepared.bytes.as_deref()),
        }
        .map_err(|e| ModelError::model(&model_path, format!("ONNX Runtime cannot load it: {e}")))?;
        drop((file, prepared.bytes));
        let inputs: Vec<String> = session.inputs().iter().map(|i| i.name().to_owned()).collect();
        for required in ["input_ids", "attention_mask"] {
            if !inputs.iter().any(|i| i == required) {
                return Err(ModelError::model(&model_path, format!("the model has no `{required}` input (it has: {})", inputs.join(", "))));
            }
        }
        if let Some(other) = inputs.iter().find(|i| !matches!(i.as_str(), "input_ids" | "attention_mask" | "token_type_ids")) {
            return Err(ModelError::model(&model_path, format!("unsupported model input `{other}`")));
        }
        let outputs: Vec<String> = session.outputs().iter().map(|o| o.name().to_owned()).collect();
        let output = match &manifest.output {
            Some(o) if outputs.contains(o) => o.clone(),
            Some(o) => return Err(ModelError::model(&model_path, format!("no output `{o}` (it has: {})", outputs.join(", ")))),
            None => outputs.first().cloned().ok_or_else(|| ModelError::model(&model_path, "the model has no outputs"))?,
        };
        let mut tokenizer =
            Tokenizer::from_file(&tok_path).map_err(|e| ModelError::model(&tok_path, format!("cannot read the tokenizer: {e}")))?;
        // Stride 0: the pieces truncation cuts off do not overlap, so they add up to the
        // untruncated input (`token_counts`).
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: manifest.max_length, ..Default::default() }))
            .map_err(|e| ModelError::model(&tok_path, e))?;
        tokenizer.with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..Default::default() }));
        Ok(OnnxModel { manifest, session, tokenizer, inputs, output, path: model_path, shrink: false })
    }

    /// Tokens of each text, special tokens excluded, before truncation: what the model kept
    /// plus what truncation cut off, padding excluded.
    pub fn token_counts(&self, texts: &[&str]) -> Result<Vec<usize>, ModelError> {
        let inputs: Vec<EncodeInput> = texts.iter().map(|t| (*t).into()).collect();
        let enc = self
            .tokenizer
            .encode_batch(inputs, false)
            .map_err(|e| ModelError::Inference { model: self.manifest.id.clone(), detail: format!("tokenizing: {e}") })?;
        let real = |e: &tokenizers::Encoding| e.get_attention_mask().iter().filter(|&&m| m != 0).count();
        Ok(enc.iter().map(|e| real(e) + e.get_overflowing().iter().map(real).sum::<usize>()).collect())
    }

    /// Tokens of a (first, second) pair before truncation, special tokens included: each
    /// side's tokens (a pair is tokenized side by side) and what the post-processor adds.
    pub fn untruncated_len(&self, first: &str, second: &str) -> Result<usize, ModelError> {
        use tokenizers::PostProcessor;
        let sides: usize = self.token_counts(&[first, second])?.into_iter().sum();
        Ok(sides + self.tokenizer.get_post_processor().map_or(0, |p| p.added_tokens(true)))
    }

    /// Hands the memory ONNX Runtime's arena holds beyond what one small input needs back to the
    /// allocator: after a bulk pass, whose largest batch grew the arena, it would otherwise stay
    /// that size for the session's life. Runs a one-word input (the arena shrinks at the end of a
    /// run that asks for it).
    pub fn release_scratch(&mut self) -> Result<(), ModelError> {
        self.shrink = true;
        self.run(vec!["lode".into()]).map(|_| ())
    }

    /// The next run hands its arena back at its end (see [`OnnxModel::release_scratch`]).
    pub(crate) fn shrink_after_next_run(&mut self) {
        self.shrink = true;
    }

    /// Runs a batch; returns the output's shape and data and each row's attention mask.
    #[allow(clippy::type_complexity)]
    pub fn run(&mut self, batch: Vec<EncodeInput>) -> Result<(Vec<i64>, Vec<f32>, Vec<Vec<u32>>), ModelError> {
        let err = |d: String| ModelError::Inference { model: self.manifest.id.clone(), detail: d };
        if batch.is_empty() {
            return Ok((Vec::new(), Vec::new(), Vec::new()));
        }
        let enc = self.tokenizer.encode_batch(batch, true).map_err(|e| err(format!("tokenizing: {e}")))?;
        let (b, s) = (enc.len(), enc.iter().map(|e| e.get_ids().len()).max().unwrap_or(0));
        let gather = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Vec<i64> {
            let mut v = Vec::with_capacity(b * s);
            for e in &enc {
                let row = f(e);
                v.extend(row.iter().map(|&x| x as i64));
                v.extend(std::iter::repeat_n(0, s - row.len()));
            }
            v
        };
        let mut feeds: Vec<(Cow<str>, SessionInputValue)> = Vec::new();
        for name in &self.inputs {
            let data = match name.as_str() {
                "input_ids" => gather(&|e| e.get_ids()),
                "attention_mask" => gather(&|e| e.get_attention_mask()),
                _ => gather(&|e| e.get_type_ids()),
            };
            let t = Tensor::from_array((vec![b as i64, s as i64], data)).map_err(|e| err(e.to_string()))?;
            feeds.push((Cow::Owned(name.clone()), t.into()));
        }
        let masks: Vec<Vec<u32>> = enc.iter().map(|e| e.get_attention_mask().to_vec()).collect();
        let id = self.manifest.id.clone();
        let shrink_options;
        let outputs = if std::mem::take(&mut self.shrink) {
            let mut o = RunOptions::new().map_err(|e| err(e.to_string()))?;
            o.set("memory.enable_memory_arena_shrinkage", "cpu:0").map_err(|e| err(e.to_string()))?;
            shrink_options = o;
            self.session.run_with_options(feeds, &shrink_options)
        } else {
            self.session.run(feeds)
        };
        let outputs =
            outputs.map_err(|e| ModelError::Inference { model: id.clone(), detail: format!("{} ({})", e, self.path.display()) })?;
        let value = outputs
            .get(&self.output)
            .ok_or_else(|| ModelError::Inference { model: id.clone(), detail: format!("no output `{}`", self.output) })?;
        let (shape, data) = value
            .try_extract_tensor::<f32>()
            .map_err(|e| ModelError::Inference { model: id, detail: format!("output is not a float tensor: {e}") })?;
        Ok((shape.to_vec(), data.to_vec(), masks))
    }
}

/// Where a session's model comes from.
enum Source<'a> {
    File(&'a Path),
    Memory(&'a [u8]),
}

/// Weights this large or larger are mapped from the derived model's data file.
const MAPPED_WEIGHT_BYTES: usize = 64 << 10;

/// The model as ONNX Runtime should load it (`bytes`: rewritten by `graph::prepare`, or the
/// file as it is) with its large weights in a data file beside it, written once into
/// `<dir>/.lode-derived/` under a name that is a hash of `bytes`: the path of the derived
/// model, or `None` when no weight is large enough or the folder cannot take the files (the
/// model then loads from memory, as before).
///
/// Invariant: a derived pair is used only when both files hold exactly the bytes made from
/// `bytes` now (compared in full, not trusted by name), so a damaged or half-written copy is
/// written again, never loaded; each file is written beside and renamed into place, so a
/// reader never sees half of one, and two processes deriving at once write the same bytes.
fn derived_model(dir: &Path, bytes: &[u8]) -> Option<PathBuf> {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    h.write(b"lode-external-weights-1");
    h.write(bytes);
    let key = format!("{:016x}", h.finish());
    let ext = crate::graph::externalize(bytes, MAPPED_WEIGHT_BYTES, &format!("{key}.data"))?;
    let folder = dir.join(".lode-derived");
    let model = folder.join(format!("{key}.onnx"));
    let data = folder.join(format!("{key}.data"));
    let holds = |p: &Path, want: &[u8]| same_bytes(p, want).unwrap_or(false);
    if holds(&data, &ext.data) && holds(&model, &ext.model) {
        return Some(model);
    }
    let write = |p: &Path, bytes: &[u8]| -> std::io::Result<()> {
        use std::io::Write;
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = p.with_extension(format!("tmp{}-{n}", std::process::id()));
        // Created new (a planted link is refused, not written through), then renamed over the
        // name (which replaces a link rather than following it).
        let r = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| std::fs::rename(&tmp, p));
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    };
    std::fs::create_dir_all(&folder).ok()?;
    // The model's folder may be a vault's: a `.lode-derived` that is a link would have lode
    // write, and clear old files, wherever it points. No copy then; the model loads from memory.
    if !std::fs::symlink_metadata(&folder).is_ok_and(|m| m.file_type().is_dir()) {
        return None;
    }
    // Data first: a model file never names data that is not complete.
    write(&data, &ext.data).ok()?;
    write(&model, &ext.model).ok()?;
    // Copies made from an earlier version of the model: gone once nobody can be loading them
    // (a process that maps one keeps its pages after the unlink).
    if let Ok(entries) = std::fs::read_dir(&folder) {
        for e in entries.flatten() {
            let name = e.file_name();
            let old = e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|a| a.as_secs() > 600));
            if old && !name.to_string_lossy().starts_with(&key) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Some(model)
}

/// Whether the file at `p` holds exactly `want`, read a megabyte at a time (a model's weights
/// can be hundreds of MB: a whole copy in memory at each load would be that much more peak).
fn same_bytes(p: &Path, want: &[u8]) -> std::io::Result<bool> {
    use std::io::Read;
    let mut f = std::fs::File::open(p)?;
    if f.metadata()?.len() != want.len() as u64 {
        return Ok(false);
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(at == want.len());
        }
        if at + n > want.len() || buf[..n] != want[at..at + n] {
            return Ok(false);
        }
        at += n;
    }
}

pub struct CrossEncoder {
    model: OnnxModel,
}

impl CrossEncoder {
    pub fn load(dir: &Path, runtime: Option<&Path>, threads: usize) -> Result<CrossEncoder, ModelError> {
        let manifest = Manifest::load(dir)?;
        if manifest.kind != ModelKind::CrossEncoder {
            return Err(ModelError::model(dir, format!("{} is a {:?}, not a cross-encoder", manifest.id, manifest.kind)));
        }
        Ok(CrossEncoder { model: OnnxModel::load(dir, manifest, runtime, threads)? })
    }

    pub fn id(&self) -> &str {
        &self.model.manifest.id
    }

    /// Raw logits of (query, passage) pairs, in batches; one score per passage. The last
    /// batch hands the arena back at its end: a rerank's batches of long pairs grow it by
    /// about a hundred MB (attention over 512 tokens), which would otherwise stay between
    /// questions (docs/benchmarks.md, "Memory").
    pub fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        let idx = self.model.manifest.logit_index;
        let mut scores = Vec::with_capacity(passages.len());
        let batches = passages.len().div_ceil(BATCH);
        for (i, chunk) in passages.chunks(BATCH).enumerate() {
            if i + 1 == batches {
                self.model.shrink_after_next_run();
            }
            let pairs: Vec<EncodeInput> = chunk.iter().map(|p| (query.to_owned(), (*p).to_owned()).into()).collect();
            let (shape, data, _) = self.model.run(pairs)?;
            let per_row = match shape.as_slice() {
                [b, n] if *b as usize == chunk.len() => *n as usize,
                [b] if *b as usize == chunk.len() => 1,
                other => {
                    return Err(ModelError::Inference {
                        model: self.model.manifest.id.clone(),
                        detail: format!("unexpected output shape {other:?}; expected [batch, logits]"),
                    })
                }
            };
            if idx >= per_row {
                return Err(ModelError::Inference {
                    model: self.model.manifest.id.clone(),
                    detail: format!("logit_index {idx} but the model gives {per_row} logits per pair"),
                });
            }
            scores.extend((0..chunk.len()).map(|r| data[r * per_row + idx]));
        }
        Ok(scores)
    }
}

/// A natural-language-inference model: the softmax probability of the `entailment` label for
/// (premise, hypothesis), premise first, as NLI models are trained.
pub struct NliModel {
    model: OnnxModel,
    entailment: usize,
}

impl NliModel {
    pub fn load(dir: &Path, runtime: Option<&Path>, threads: usize) -> Result<NliModel, ModelError> {
        let manifest = Manifest::load(dir)?;
        if manifest.kind != ModelKind::Nli {
            return Err(ModelError::model(
                dir,
                format!(
                    "{} is a {:?}, not an NLI model: a reranker's relevance score is not entailment. [models] nli needs a model \
                     whose lode-model.toml says kind = \"nli\" and lists its `labels` (see docs/gate.md)",
                    manifest.id, manifest.kind
                ),
            ));
        }
        let entailment = manifest.labels.iter().position(|l| l.eq_ignore_ascii_case("entailment")).unwrap_or(0);
        Ok(NliModel { model: OnnxModel::load(dir, manifest, runtime, threads)?, entailment })
    }

    pub fn id(&self) -> &str {
        &self.model.manifest.id
    }

    /// Label probabilities for (premise, hypothesis), in the manifest's label order. Errors when
    /// the pair does not fit the model: a truncated claim could hide a false clause at its end.
    pub fn classify(&mut self, premise: &str, hypothesis: &str) -> Result<Vec<f32>, ModelError> {
        let id = self.model.manifest.id.clone();
        let max = self.model.manifest.max_length;
        let tokens = self.model.untruncated_len(premise, hypothesis)?;
        if tokens > max {
            return Err(ModelError::Inference {
                model: id,
                detail: format!(
                    "the cited sentences and the claim are {tokens} tokens; the model reads {max}, and a truncated claim is not checked"
                ),
            });
        }
        let (shape, data, _) = self.model.run(vec![(premise.to_owned(), hypothesis.to_owned()).into()])?;
        let n = self.model.manifest.labels.len();
        if shape.as_slice() != [1, n as i64] {
            return Err(ModelError::Inference { model: id, detail: format!("output shape {shape:?}, but the manifest lists {n} labels") });
        }
        let m = data.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let exp: Vec<f32> = data.iter().map(|x| (x - m).exp()).collect();
        let sum: f32 = exp.iter().sum();
        Ok(exp.into_iter().map(|e| e / sum).collect())
    }
}

impl lode_core::gate::EntailmentScorer for NliModel {
    fn entailment(&mut self, premise: &str, hypothesis: &str) -> Result<f32, String> {
        let probs = self.classify(premise, hypothesis).map_err(|e| e.to_string())?;
        Ok(probs[self.entailment])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pair's length before truncation, special tokens included, without a second copy of
    /// the tokenizer: the same as an untruncated tokenizer's pair encoding.
    #[test]
    fn untruncated_pair_length_matches_a_plain_tokenizer() {
        for name in ["tiny-nli", "all-MiniLM-L6-v2"] {
            let dir = lode_testing::models().join(name);
            let m = OnnxModel::load(&dir, Manifest::load(&dir).unwrap(), None, 1).unwrap();
            let mut plain = Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
            plain.with_truncation(None).unwrap();
            plain.with_padding(None);
            let long = "keys rotate every ninety days ".repeat(200);
            for (a, b) in [("", ""), ("Keys rotate.", "Do keys rotate every 60 days?"), (long.as_str(), "short"), ("x", long.as_str())] {
                let want = plain.encode((a.to_owned(), b.to_owned()), true).unwrap().get_ids().len();
                assert_eq!(m.untruncated_len(a, b).unwrap(), want, "{name}: {a:.20} / {b:.20}");
            }
        }
    }
}
