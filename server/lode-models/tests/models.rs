//! Real models through the real ONNX Runtime (installed by scripts/setup-models.sh): MiniLM
//! against a reference computed with ONNX Runtime's Python API, prefixes, bad inputs, and the
//! generated tiny cross-encoder.

use std::path::{Path, PathBuf};

use lode_core::gate::EntailmentScorer;
use lode_models::{CrossEncoder, Embedder, ModelError, NliModel};

use lode_testing::models;

fn minilm() -> Embedder {
    Embedder::load(&models().join("all-MiniLM-L6-v2"), None, 2).unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

#[test]
fn minilm_matches_the_onnx_runtime_python_reference() {
    let reference: serde_json::Value = serde_json::from_str(include_str!("../../../fixtures/embeddings/minilm-reference.json")).unwrap();
    let mut e = minilm();
    assert_eq!(e.dimensions(), 384);
    for s in reference["sentences"].as_array().unwrap() {
        let text = s["text"].as_str().unwrap();
        let want: Vec<f32> = s["vector"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let got = e.embed_passages(&[text]).unwrap().pop().unwrap();
        let c = cosine(&got, &want);
        assert!(c >= 1.0 - 1e-4, "{text:?}: cosine {c}");
        let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "normalised");
    }
}

#[test]
fn a_question_is_close_to_its_answer() {
    let mut e = minilm();
    let q = e.embed_query("How often are staging certificates rotated?").unwrap();
    let v = e
        .embed_passages(&[
            "Staging certificates are rotated every 60 days so that we always have a 30-day safety margin.",
            "The incident postmortem lists a timeline of the Redis outage.",
        ])
        .unwrap();
    assert!(cosine(&q, &v[0]) > 0.7 && cosine(&q, &v[0]) > cosine(&q, &v[1]) + 0.2);
}

#[test]
fn batches_empty_and_enormous_inputs() {
    let mut e = minilm();
    let huge = "word ".repeat(50_000);
    let texts: Vec<String> = (0..37).map(|i| format!("passage number {i}")).collect();
    let mut all: Vec<&str> = texts.iter().map(String::as_str).collect();
    all.push("");
    all.push(&huge);
    let v = e.embed_passages(&all).unwrap();
    assert_eq!(v.len(), 39);
    assert!(v.iter().all(|x| x.len() == 384 && x.iter().all(|f| f.is_finite())));
    // Batching does not change results.
    let alone = e.embed_passages(&["passage number 5"]).unwrap();
    assert!(cosine(&alone[0], &v[5]) > 1.0 - 1e-5);
}

fn model_copy(tmp: &Path, manifest: &str) -> PathBuf {
    let dir = tmp.join("m");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["model.onnx", "tokenizer.json"] {
        std::fs::copy(models().join("all-MiniLM-L6-v2").join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("lode-model.toml"), manifest).unwrap();
    dir
}

#[test]
fn asymmetric_prefixes_apply_to_the_right_side() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = model_copy(
        tmp.path(),
        "id = \"prefixed\"\nkind = \"embedder\"\nmax_length = 256\ndimensions = 384\nquery_prefix = \"search_query: \"\npassage_prefix = \"search_document: \"\n",
    );
    let mut p = Embedder::load(&dir, None, 1).unwrap();
    let mut plain = minilm();
    let q = p.embed_query("rotate certs").unwrap();
    let want = plain.embed_passages(&["search_query: rotate certs"]).unwrap();
    assert!(cosine(&q, &want[0]) > 1.0 - 1e-5);
    let d = p.embed_passages(&["rotate certs"]).unwrap();
    let want = plain.embed_passages(&["search_document: rotate certs"]).unwrap();
    assert!(cosine(&d[0], &want[0]) > 1.0 - 1e-5);
    assert!(cosine(&q, &d[0]) < 0.999, "the two sides differ");
}

#[test]
fn bad_models_give_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let err = |r: Result<Embedder, ModelError>| r.err().expect("must fail").to_string();

    let dir = model_copy(tmp.path(), "id = \"x\"\nkind = \"embedder\"\nmax_length = 256\ndimensions = 768\n");
    let e = err(Embedder::load(&dir, None, 1));
    assert!(e.contains("384-dimensional") && e.contains("768"), "{e}");

    std::fs::write(dir.join("lode-model.toml"), "id = \"x\"\nkind = \"embedder\"\nmax_length = 256\ndimensions = 384\n").unwrap();
    std::fs::write(dir.join("model.onnx"), b"this is not an onnx file").unwrap();
    let e = err(Embedder::load(&dir, None, 1));
    assert!(e.contains("ONNX Runtime cannot load it"), "{e}");

    std::fs::remove_file(dir.join("model.onnx")).unwrap();
    let e = err(Embedder::load(&dir, None, 1));
    assert!(e.contains("model.onnx is missing"), "{e}");

    std::fs::write(dir.join("lode-model.toml"), "id = 1").unwrap();
    assert!(err(Embedder::load(&dir, None, 1)).contains("invalid manifest"));

    let e = err(Embedder::load(&models().join("bad-inputs"), None, 1));
    assert!(e.contains("no `input_ids` input"), "{e}");

    let e = err(Embedder::load(&models().join("tiny-cross-encoder"), None, 1));
    assert!(e.contains("not an embedder"), "{e}");
}

#[test]
fn tiny_cross_encoder_loads_batches_and_reorders() {
    let mut ce = CrossEncoder::load(&models().join("tiny-cross-encoder"), None, 1).unwrap();
    let passages: Vec<String> = (0..19)
        .map(|i| match i {
            3 => "a banana and a cherry".to_owned(),
            11 => "banana".to_owned(),
            15 => "rotten fruit".to_owned(),
            _ => format!("plain passage {i}"),
        })
        .collect();
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    let scores = ce.score("which fruit", &refs).unwrap();
    assert_eq!(scores.len(), 19, "more passages than one batch");
    assert_eq!((scores[3], scores[11], scores[15], scores[0]), (3.0, 2.0, -3.0, 0.0));
    // Only the passage slot counts: the query's own words do not.
    assert_eq!(ce.score("banana banana", &["plain"]).unwrap(), [0.0]);
}

#[test]
fn nli_model_honours_its_label_order_and_premise_first() {
    // tiny-nli's labels are [contradiction, entailment, neutral]; its logits come from the
    // hypothesis (second segment) only: banana → entailment, rotten → contradiction.
    let mut nli = NliModel::load(&models().join("tiny-nli"), None, 1).unwrap();
    let probs = nli.classify("premise text", "banana").unwrap();
    let (e3, one) = (3.0f32.exp(), 1.0f32.exp());
    let want = [1.0 / (1.0 + e3 + one), e3 / (1.0 + e3 + one), one / (1.0 + e3 + one)];
    assert!((probs[1] - want[1]).abs() < 1e-5 && (probs[0] - want[0]).abs() < 1e-2, "{probs:?}");
    let p = nli.entailment("premise text", "banana").unwrap();
    assert!(p > 0.8, "entailment is the second label, not the first or last: {p}");
    assert!(nli.entailment("premise text", "rotten").unwrap() < 0.1);
    // The premise goes first: its words do not count as the hypothesis.
    // (logits [0, 0, 1]: 1 / (2 + e) = 0.21; had the premise been read, 0.99.)
    assert!(nli.entailment("banana banana", "plain claim").unwrap() < 0.25);
    // A pair too long for the model (max_length 32) is refused, not truncated.
    let long = "word ".repeat(40);
    let e = nli.entailment("premise", &format!("banana {long}")).unwrap_err();
    assert!(e.contains("truncated"), "{e}");
}

#[test]
fn a_reranker_is_not_an_nli_model() {
    let e = match NliModel::load(&models().join("tiny-cross-encoder"), None, 1) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a reranker loaded as NLI"),
    };
    assert!(e.contains("not an NLI model") && e.contains("kind = \"nli\""), "{e}");
}

/// The int8 MiniLM's embedding lookups, rewritten to dequantize only the rows a batch uses
/// (`lode_models::prepare_graph`), give the very same token states as the model as published,
/// run the way ONNX Runtime runs it by default (constant folding on): bit for bit on the
/// lookups, and within float rounding overall (no folding changes the order of a few sums).
#[test]
fn minilm_gathers_rows_before_dequantizing_and_answers_the_same() {
    use ort::session::Session;
    use ort::value::Tensor;
    let path = models().join("all-MiniLM-L6-v2/model.onnx");
    let bytes = std::fs::read(&path).unwrap();
    let prepared = lode_models::prepare_graph(&bytes);
    assert_eq!(prepared.lookups, 2, "word and position embeddings");
    assert!(prepared.cast_dequantized >= 36, "every weight is dequantized by a Cast: {}", prepared.cast_dequantized);
    let rewritten = prepared.bytes.expect("rewritten");
    // Rewriting again finds nothing more: the lookups are already gathered first.
    assert_eq!(lode_models::prepare_graph(&rewritten).lookups, 0);

    let env = lode_models::environment(None).unwrap();
    let session = |model: &[u8], fold: bool| {
        let b = Session::builder(env).unwrap();
        let mut b = if fold { b } else { b.with_disabled_optimizers("ConstantFolding").unwrap() };
        b.commit_from_memory(model).unwrap()
    };
    let run = |s: &mut Session| -> Vec<f32> {
        // Two rows of 7 tokens, the second padded: [CLS] ... [SEP] ids from the vocabulary.
        let ids: Vec<i64> = vec![101, 7025, 1997, 1996, 3056, 2003, 102, 101, 2054, 102, 0, 0, 0, 0];
        let mask: Vec<i64> = ids.iter().map(|&i| i64::from(i != 0)).collect();
        let mut feeds: Vec<(String, ort::session::SessionInputValue)> = Vec::new();
        for i in s.inputs().iter().map(|i| i.name().to_owned()).collect::<Vec<_>>() {
            let data = match i.as_str() {
                "input_ids" => ids.clone(),
                "attention_mask" => mask.clone(),
                _ => vec![0; ids.len()],
            };
            feeds.push((i, Tensor::from_array((vec![2i64, 7], data)).unwrap().into()));
        }
        let out = s.run(feeds).unwrap();
        out[0].try_extract_tensor::<f32>().unwrap().1.to_vec()
    };
    let unfolded = run(&mut session(&bytes, false));
    let gathered = run(&mut session(&rewritten, false));
    assert_eq!(gathered.len(), 2 * 7 * 384);
    assert!(unfolded == gathered, "the rewrite changed the output");
    let stock = run(&mut session(&bytes, true));
    let worst = stock.iter().zip(&gathered).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-4, "differs from the stock session by {worst}");
}

/// Counts before truncation come from one tokenizer (what it kept plus the pieces it cut off):
/// they equal a plain untruncated tokenization for short, empty, padded-in-batch and far too
/// long texts.
#[test]
fn token_counts_see_past_truncation() {
    let e = minilm();
    let long = "The certificate rotation happens every ninety days, unless audited. ".repeat(120);
    let texts = ["", "one", "Rotate the keys.", long.as_str(), &long[..700], "naïve café — 東京 ✓"];
    let mut plain = tokenizers::Tokenizer::from_file(models().join("all-MiniLM-L6-v2").join("tokenizer.json")).unwrap();
    plain.with_truncation(None).unwrap();
    plain.with_padding(None);
    let want: Vec<usize> = texts.iter().map(|t| plain.encode(*t, false).unwrap().get_ids().len()).collect();
    assert!(want[3] > 4 * e.max_length(), "the long text is far over the model's input length: {}", want[3]);
    assert_eq!(e.token_counts(&texts).unwrap(), want);
}

/// The embedder loads its large weights mapped from a derived copy beside the model: the
/// vectors are bit-identical to a load from memory (a folder that cannot take the copy), a
/// second load reuses the copy, and a damaged copy (one byte changed, or cut short) is written
/// again rather than loaded.
#[test]
fn weights_mapped_from_a_derived_copy_give_the_same_vectors_and_a_damaged_copy_is_remade() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = std::fs::read_to_string(models().join("all-MiniLM-L6-v2/lode-model.toml")).unwrap();
    let texts = ["Rotate the signing keys every ninety days.", "naïve café — 東京", "x"];

    // A folder where `.lode-derived` is a file: no copy can be made, the model loads from memory.
    let in_memory = model_copy(&tmp.path().join("a"), &manifest);
    std::fs::write(in_memory.join(".lode-derived"), "not a folder").unwrap();
    let vectors = |dir: &Path| Embedder::load(dir, None, 2).unwrap().embed_passages(&texts).unwrap();
    let want = vectors(&in_memory);

    let dir = model_copy(&tmp.path().join("b"), &manifest);
    let derived = |ext: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join(".lode-derived"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        v.sort();
        v
    };
    assert!(vectors(&dir) == want, "mapped weights changed the vectors");
    let (model, data) = (derived("onnx"), derived("data"));
    assert_eq!((model.len(), data.len()), (1, 1), "one derived model and its data");
    let data = &data[0];
    let size = std::fs::metadata(data).unwrap().len();
    assert!(size > 20 << 20, "the int8 weights are in the data file: {size} bytes");
    assert!(std::fs::metadata(&model[0]).unwrap().len() < 1 << 20, "the derived model keeps only the small weights");

    let written = std::fs::metadata(data).unwrap().modified().unwrap();
    assert!(vectors(&dir) == want, "the vectors changed");
    assert_eq!(std::fs::metadata(data).unwrap().modified().unwrap(), written, "a sound copy is reused, not written again");

    // One byte changed in every page, so in every weight: loaded, the copy would change every
    // vector silently (same length, same name).
    let mut bytes = std::fs::read(data).unwrap();
    for i in (100..bytes.len()).step_by(4096) {
        bytes[i] ^= 0x55;
    }
    std::fs::write(data, &bytes).unwrap();
    assert!(vectors(&dir) == want, "a damaged copy was loaded");
    assert_eq!(std::fs::metadata(data).unwrap().len(), size);
    // Cut short.
    std::fs::write(data, &bytes[..bytes.len() / 2]).unwrap();
    assert!(vectors(&dir) == want, "the vectors changed");
    assert_eq!(std::fs::metadata(data).unwrap().len(), size, "the copy was made whole again");
}

/// A model folder a clone could hold, with `.lode-derived` planted as a link to a folder of the
/// user's: lode writes no copy there and clears nothing there; the model loads from memory.
#[test]
fn a_derived_folder_that_is_a_link_is_neither_written_nor_cleared() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = std::fs::read_to_string(models().join("all-MiniLM-L6-v2/lode-model.toml")).unwrap();
    let dir = model_copy(&tmp.path().join("a"), &manifest);
    let victim = tmp.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let old = victim.join("old-notes.txt");
    std::fs::write(&old, "keep me").unwrap();
    // Older than the ten minutes after which derived copies are cleared.
    let f = std::fs::File::options().write(true).open(&old).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600)).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join(".lode-derived")).unwrap();
    let v = Embedder::load(&dir, None, 2).unwrap().embed_passages(&["Rotate the signing keys."]).unwrap();
    assert_eq!(v.len(), 1);
    let left: Vec<String> = std::fs::read_dir(&victim).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, ["old-notes.txt"], "lode wrote or cleared through the link");
}
