//! The retrieval pipeline on a real SQLite store, a real LanceDB table and the real MiniLM
//! model: paraphrase recall, fusion, rerank with the generated cross-encoder, link expansion,
//! and the worker keeping vectors fresh through edits, deletions, lost indexes and model changes.

use std::path::{Path, PathBuf};

use lode_models::{CrossEncoder, Embedder};
use lode_retrieval::{retrieve, sync_vectors, Mode, Models, RetrievalConfig, VectorIndex};
use lode_store::vault::{index_vault, IndexOptions};
use lode_store::{Store, StoreOptions};

use lode_testing::models;

struct Setup {
    _tmp: tempfile::TempDir,
    vectors: PathBuf,
    store: Store,
    embedder: Embedder,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("lode.db"), StoreOptions::default()).unwrap();
    let vault = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vault");
    index_vault(&mut store, &vault, &IndexOptions::default(), |_| {}).unwrap();
    let embedder = Embedder::load(&models().join("all-MiniLM-L6-v2"), None, 2).unwrap();
    Setup { vectors: tmp.path().join("vectors"), _tmp: tmp, store, embedder }
}

fn index(s: &Setup) -> VectorIndex {
    VectorIndex::open(&s.vectors, s.embedder.id(), s.embedder.dimensions()).unwrap()
}

fn paths(s: &mut Setup, idx: &VectorIndex, q: &str, mode: Mode, n: usize) -> Vec<String> {
    let cfg = RetrievalConfig { limit: n, graph_limit: 0, ..Default::default() };
    let models = Models { embedder: Some(&mut s.embedder), index: Some(idx), reranker: None };
    retrieve(&s.store, q, mode, models, &cfg).unwrap().hits.into_iter().map(|h| h.hit.path).collect()
}

#[test]
fn a_paraphrase_is_found_by_dense_retrieval_that_lexical_misses() {
    let mut s = setup();
    let idx = index(&s);
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || true).unwrap();
    assert_eq!(r.embedded, s.store.stats().unwrap().passages as usize);
    let q = "swap to the standby datastore after an outage";
    let lexical = paths(&mut s, &idx, q, Mode::Lexical, 3);
    assert!(!lexical.iter().any(|p| p == "runbooks/redis-failover.md"), "lexical should miss it: {lexical:?}");
    let dense = paths(&mut s, &idx, q, Mode::Dense, 3);
    assert!(dense.iter().any(|p| p == "runbooks/redis-failover.md"), "dense finds it: {dense:?}");
}

#[test]
fn the_worker_follows_edits_deletions_and_a_lost_index() {
    let mut s = setup();
    let idx = index(&s);
    let model = s.embedder.id().to_owned();
    sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || true).unwrap();
    let total = s.store.stats().unwrap().passages;
    assert_eq!(idx.count().unwrap() as i64, total);

    // An edit: only the new passage needs a vector; the replaced one's vector goes.
    let path = "reference/glossary.md";
    let head = s.store.head_of(path).unwrap().unwrap();
    let mut body = String::from_utf8(s.store.version_body(&head).unwrap().unwrap()).unwrap();
    body.push_str("\n\nA zebra crossing is where the on-call engineer hands over the pager.\n");
    s.store.save_note(path, body.as_bytes()).unwrap();
    let fresh = s.store.vector_freshness(&model).unwrap();
    assert_eq!(fresh.passages - fresh.with_vectors, 1, "one new passage lacks a vector");
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || true).unwrap();
    assert_eq!((r.embedded, r.deleted), (1, 0));
    let dense = paths(&mut s, &idx, "where is the pager handed over", Mode::Dense, 1);
    assert_eq!(dense, [path]);

    // A deletion: its vectors leave the index.
    let before = idx.count().unwrap();
    let n = s.store.passages_of("notes/reading-list.md").unwrap().len();
    s.store.delete_note("notes/reading-list.md").unwrap();
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || true).unwrap();
    assert_eq!(r.deleted, n);
    assert_eq!(idx.count().unwrap(), before - n);

    // Interrupted: stop after the first round; the next run picks up the rest.
    s.store.reset_vectors(None).unwrap();
    let mut rounds = 0;
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || { rounds += 1; rounds == 1 }).unwrap();
    assert!(r.embedded > 0 && (r.embedded as i64) < s.store.stats().unwrap().passages);
    let r2 = sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || true).unwrap();
    assert_eq!((r.embedded + r2.embedded) as i64, s.store.stats().unwrap().passages);
    assert_eq!(idx.count().unwrap() as i64, s.store.stats().unwrap().passages, "re-adding replaced rows, no duplicates");
    drop(idx);

    // The vector folder disappears: search falls back to lexical with a warning, and the next
    // sync rebuilds everything from the passages.
    std::fs::remove_dir_all(&s.vectors).unwrap();
    let idx = index(&s);
    let cfg = RetrievalConfig { limit: 3, graph_limit: 0, ..Default::default() };
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let r = retrieve(&s.store, "redis failover", Mode::Hybrid, models, &cfg).unwrap();
    assert!(!r.hits.is_empty(), "lexical still answers");
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || true).unwrap();
    assert!(r.rebuilt, "lost vectors are detected");
    assert_eq!(idx.count().unwrap() as i64, s.store.stats().unwrap().passages);
}

#[test]
fn a_new_model_re_embeds_instead_of_mixing() {
    let mut s = setup();
    let idx = index(&s);
    sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || true).unwrap();
    // The same weights under another id and prefixes: a different model as far as vectors go.
    let tmp = tempfile::tempdir().unwrap();
    for f in ["model.onnx", "tokenizer.json"] {
        std::fs::copy(models().join("all-MiniLM-L6-v2").join(f), tmp.path().join(f)).unwrap();
    }
    std::fs::write(
        tmp.path().join("lode-model.toml"),
        "id = \"minilm-prefixed\"\nkind = \"embedder\"\nmax_length = 128\ndimensions = 384\nquery_prefix = \"query: \"\npassage_prefix = \"passage: \"\n",
    )
    .unwrap();
    let mut other = Embedder::load(tmp.path(), None, 2).unwrap();
    assert_eq!(s.store.vector_freshness("minilm-prefixed").unwrap().with_vectors, 0);
    let idx2 = VectorIndex::open(&s.vectors, other.id(), other.dimensions()).unwrap();
    assert_ne!(idx.name(), idx2.name());
    let r = sync_vectors(&mut s.store, &idx2, &mut other, |_, _| {}, || true).unwrap();
    assert_eq!(r.embedded as i64, s.store.stats().unwrap().passages, "everything re-embedded");
    assert_eq!(s.store.vector_freshness(s.embedder.id()).unwrap().with_vectors, 0, "old model's vectors forgotten");
}

#[test]
fn rerank_reorders_and_links_expand() {
    let mut s = setup();
    let idx = index(&s);
    sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || true).unwrap();
    let mut ce = CrossEncoder::load(&models().join("tiny-cross-encoder"), None, 1).unwrap();
    // The tiny cross-encoder scores passages by marker words: put "cherry" in one passage.
    let path = "runbooks/redis-failover.md";
    let head = s.store.head_of(path).unwrap().unwrap();
    let body = String::from_utf8(s.store.version_body(&head).unwrap().unwrap()).unwrap();
    s.store.save_note(path, format!("{body}\nThe failover drill ends with cherry pie for the on-call team.\n").as_bytes()).unwrap();
    sync_vectors(&mut s.store, &idx, &mut s.embedder, |_, _| {}, || true).unwrap();
    let cfg = RetrievalConfig { limit: 5, graph_limit: 0, ..Default::default() };
    let q = "redis failover";
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let hybrid = retrieve(&s.store, q, Mode::Hybrid, models, &cfg).unwrap();
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: Some(&mut ce) };
    let reranked = retrieve(&s.store, q, Mode::Rerank, models, &cfg).unwrap();
    assert!(reranked.hits[0].hit.text.contains("cherry pie"), "{:?}", reranked.hits[0].hit.text);
    assert!(!hybrid.hits[0].hit.text.contains("cherry pie"), "the reorder is the reranker's doing");
    assert!(reranked.stages.iter().any(|st| st.name == "rerank"));

    // Without a reranker, rerank mode keeps the fused order and says so.
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let r = retrieve(&s.store, q, Mode::Rerank, models, &cfg).unwrap();
    assert!(r.warnings.iter().any(|w| w.contains("no cross-encoder")));

    // Link expansion: notes linked to the results join after them, marked as linked.
    let cfg = RetrievalConfig { limit: 2, graph_limit: 3, ..Default::default() };
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let r = retrieve(&s.store, "PgBouncer transaction mode pool size", Mode::Hybrid, models, &cfg).unwrap();
    let linked: Vec<&str> = r.hits.iter().filter(|h| h.origin == lode_core::fusion::Origin::Linked).map(|h| h.hit.path.as_str()).collect();
    assert!(!linked.is_empty(), "{:?}", r.hits.iter().map(|h| (&h.hit.path, h.origin)).collect::<Vec<_>>());
    let first_linked = r.hits.iter().position(|h| h.origin == lode_core::fusion::Origin::Linked).unwrap();
    assert!(r.hits[..first_linked].iter().all(|h| h.origin == lode_core::fusion::Origin::Retrieved));
}

#[test]
fn without_models_dense_modes_fall_back_to_lexical() {
    let mut s = setup();
    let cfg = RetrievalConfig { limit: 3, graph_limit: 0, ..Default::default() };
    let r = retrieve(&s.store, "redis failover", Mode::Hybrid, Models::default(), &cfg).unwrap();
    assert!(!r.hits.is_empty());
    assert!(r.warnings[0].contains("lexical results only"));
    let _ = &mut s;
}
