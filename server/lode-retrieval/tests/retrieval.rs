//! The retrieval pipeline on a real SQLite store, a real LanceDB table and the real MiniLM
//! model: paraphrase recall, fusion, rerank with the generated cross-encoder, link expansion,
//! and the worker keeping vectors fresh through edits, deletions, lost indexes and model changes.

use std::path::{Path, PathBuf};

use lode_models::{CrossEncoder, Embedder};
use lode_retrieval::{retrieve, sync_vectors, Mode, Models, RetrievalConfig, VectorIndex, VectorRow, WINDOW_TOKENS};
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
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
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
    sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    let windows = |s: &Setup| s.store.vector_freshness(&model).unwrap().windows;
    let total = s.store.stats().unwrap().passages;
    assert_eq!(s.store.vector_freshness(&model).unwrap().with_vectors, total, "every passage is covered");
    assert_eq!(idx.count().unwrap() as i64, windows(&s), "one row per window");
    assert!(windows(&s) < total, "consecutive passages of a section share a window");

    // An edit: only the new passage needs a vector; the replaced one's vector goes.
    let path = "reference/glossary.md";
    let head = s.store.head_of(path).unwrap().unwrap();
    let mut body = String::from_utf8(s.store.version_body(&head).unwrap().unwrap()).unwrap();
    body.push_str("\n\nA zebra crossing is where the on-call engineer hands over the pager.\n");
    s.store.save_note(path, body.as_bytes()).unwrap();
    let fresh = s.store.vector_freshness(&model).unwrap();
    assert_eq!(fresh.passages - fresh.with_vectors, 1, "one new passage lacks a vector");
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    assert_eq!((r.embedded, r.deleted), (1, 0));
    let dense = paths(&mut s, &idx, "where is the pager handed over", Mode::Dense, 1);
    assert_eq!(dense, [path]);

    // A deletion: its vectors leave the index.
    let before = idx.count().unwrap() as i64;
    let windows_before = windows(&s);
    s.store.delete_note("notes/reading-list.md").unwrap();
    let n = windows_before - windows(&s);
    assert!(n > 0);
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    assert_eq!(r.deleted as i64, n);
    assert_eq!(idx.count().unwrap() as i64, before - n);

    // Interrupted: stop after the first round; the next run picks up the rest.
    s.store.reset_vectors(None).unwrap();
    let mut rounds = 0;
    let r = sync_vectors(
        &mut s.store,
        &idx,
        &mut s.embedder,
        WINDOW_TOKENS,
        None,
        |_, _| {},
        || {
            rounds += 1;
            rounds == 1
        },
    )
    .unwrap();
    assert!(r.embedded > 0 && (r.embedded as i64) < s.store.stats().unwrap().passages);
    let r2 = sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    assert_eq!((r.embedded + r2.embedded) as i64, s.store.stats().unwrap().passages);
    assert_eq!(idx.count().unwrap() as i64, windows(&s), "re-adding replaced rows, no duplicates");
    drop(idx);

    // The vector folder disappears: search falls back to lexical with a warning, and the next
    // sync rebuilds everything from the passages.
    std::fs::remove_dir_all(&s.vectors).unwrap();
    let idx = index(&s);
    let cfg = RetrievalConfig { limit: 3, graph_limit: 0, ..Default::default() };
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let r = retrieve(&s.store, "redis failover", Mode::Hybrid, models, &cfg).unwrap();
    assert!(!r.hits.is_empty(), "lexical still answers");
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    assert!(r.rebuilt, "lost vectors are detected");
    assert_eq!(idx.count().unwrap() as i64, windows(&s));
}

#[test]
fn a_new_model_re_embeds_instead_of_mixing() {
    let mut s = setup();
    let idx = index(&s);
    sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
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
    let r = sync_vectors(&mut s.store, &idx2, &mut other, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    assert_eq!(r.embedded as i64, s.store.stats().unwrap().passages, "everything re-embedded");
    assert_eq!(s.store.vector_freshness(s.embedder.id()).unwrap().with_vectors, 0, "old model's vectors forgotten");
}

#[test]
fn rerank_reorders_and_links_expand() {
    let mut s = setup();
    let idx = index(&s);
    sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    let mut ce = CrossEncoder::load(&models().join("tiny-cross-encoder"), None, 1).unwrap();
    // The tiny cross-encoder scores passages by marker words: put "cherry" in one passage.
    let path = "runbooks/redis-failover.md";
    let head = s.store.head_of(path).unwrap().unwrap();
    let body = String::from_utf8(s.store.version_body(&head).unwrap().unwrap()).unwrap();
    s.store.save_note(path, format!("{body}\nThe failover drill ends with cherry pie for the on-call team.\n").as_bytes()).unwrap();
    sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
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

/// A note saved a moment ago is in the full-text index at once and in the vector index only
/// when the worker gets to it. Meanwhile it must not lose the fusion to older notes that both
/// legs find: here 40 embedded notes share two of the question's words, and the one note
/// holding all of them has no vector yet (found by a soak of the language server).
#[test]
fn a_note_saved_before_its_vectors_is_not_outranked_by_embedded_near_misses() {
    let mut s = setup();
    for r in 0..40 {
        let body = format!("# Storm {r}\n\nRound {} wrote note {r} about the impala.\n", r * 4);
        s.store.save_note(&format!("storm/s{r}.md"), body.as_bytes()).unwrap();
    }
    let idx = index(&s);
    sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    s.store.save_note("soak.md", b"# Soak\n\nThe impala tally for round 308 is 2156 units.\n").unwrap();
    let model = s.embedder.id().to_owned();
    let f = s.store.vector_freshness(&model).unwrap();
    assert_eq!(f.passages - f.with_vectors, 1, "the new note's passage has no vector yet: {f:?}");

    let q = "What is the impala tally for round 308?";
    let cfg = RetrievalConfig { limit: 5, graph_limit: 0, ..Default::default() };
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let r = retrieve(&s.store, q, Mode::Hybrid, models, &cfg).unwrap();
    let top: Vec<&str> = r.hits.iter().map(|h| h.hit.path.as_str()).collect();
    assert_eq!(top[0], "soak.md", "{top:?}");
    assert!(r.hits[0].dense_rank.is_some(), "ranked by the dense leg too: {:?}", r.hits[0]);
    assert!(r.stages.iter().any(|st| st.name == "catch_up"), "{:?}", r.stages);
    // Nothing was written: the worker still owes the passage its vector.
    let f = s.store.vector_freshness(&model).unwrap();
    assert_eq!(f.passages - f.with_vectors, 1, "{f:?}");

    // Once the worker has caught up, the query does not embed anything beyond the question.
    sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let r = retrieve(&s.store, q, Mode::Hybrid, models, &cfg).unwrap();
    assert_eq!(r.hits[0].hit.path, "soak.md");
    assert!(!r.stages.iter().any(|st| st.name == "catch_up"), "{:?}", r.stages);

    // Off (`catch_up: 0`), the near misses win: the defect this guards against.
    s.store.save_note("soak.md", b"# Soak\n\nThe impala tally for round 308 is 2157 units.\n").unwrap();
    let off = RetrievalConfig { catch_up: 0, ..cfg.clone() };
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let r = retrieve(&s.store, q, Mode::Hybrid, models, &off).unwrap();
    assert!(r.hits.iter().all(|h| h.hit.path != "soak.md"), "{:?}", r.hits.iter().map(|h| &h.hit.path).collect::<Vec<_>>());
}

/// A withdrawn question stops retrieval at the next stage boundary.
#[test]
fn a_cancelled_retrieval_stops() {
    let mut s = setup();
    let idx = index(&s);
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cfg = RetrievalConfig { limit: 3, graph_limit: 0, cancel: Some(flag.clone()), ..Default::default() };
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    assert!(retrieve(&s.store, "redis failover", Mode::Hybrid, models, &cfg).is_ok_and(|r| !r.hits.is_empty()));
    flag.store(true, std::sync::atomic::Ordering::SeqCst);
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    assert!(matches!(retrieve(&s.store, "redis failover", Mode::Hybrid, models, &cfg), Err(lode_retrieval::RetrievalError::Cancelled)));
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

/// A note of many one-sentence paragraphs under one heading (the shape that costs one model
/// input per line without windows).
fn many_short_paragraphs() -> String {
    let facts = [
        "The backup job for the billing database starts at 02:15 UTC.",
        "Snapshots are copied to the cold bucket in the eu-west region.",
        "Restores were rehearsed in March and took 41 minutes end to end.",
        "The retention period for nightly snapshots is 35 days.",
        "Weekly snapshots are kept for one year.",
        "The on-call engineer verifies checksums every Monday.",
        "Encryption keys for the snapshots rotate every quarter.",
        "A failed backup pages the storage team, not the database team.",
    ];
    format!("# Billing backups\n\n## Schedule\n\n{}\n", facts.join("\n\n"))
}

/// The example vault plus [`many_short_paragraphs`], every passage embedded.
fn with_short_paragraphs() -> (Setup, VectorIndex, &'static str, String) {
    let mut s = setup();
    let path = "runbooks/billing-backups.md";
    let body = many_short_paragraphs();
    s.store.save_note(path, body.as_bytes()).unwrap();
    let idx = index(&s);
    sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    (s, idx, path, body)
}

#[test]
fn windows_cover_a_section_and_dense_hits_cite_exact_passages() {
    let (mut s, idx, path, body) = with_short_paragraphs();
    let model = s.embedder.id().to_owned();
    let passages = s.store.passages_of(path).unwrap();
    assert!(passages.len() >= 8, "{}", passages.len());
    let leaders: Vec<i64> = passages.iter().map(|p| p.id).collect();
    let members = s.store.window_members(&model, &leaders).unwrap();
    assert!(members.len() < passages.len(), "the note's sentences share windows: {members:?}");
    assert_eq!(members.values().map(Vec::len).sum::<usize>(), passages.len(), "each passage is in exactly one window");

    // A dense hit is a passage of the window, with a byte-exact range into the note.
    let cfg = RetrievalConfig { limit: 5, graph_limit: 0, ..Default::default() };
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let r = retrieve(&s.store, "how long are nightly snapshots retained", Mode::Dense, models, &cfg).unwrap();
    let hit = r.hits.iter().find(|h| h.hit.path == path).expect("the note is found").hit.clone();
    assert_eq!(&body[hit.start..hit.end], hit.text, "the cited range is exactly the passage");
    assert!(hit.text.contains("35 days"), "the window's member holding the question's words is cited: {:?}", hit.text);

    // Hybrid: the lexical leg's passage represents the window.
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let r = retrieve(&s.store, "who verifies checksums", Mode::Hybrid, models, &cfg).unwrap();
    let top = &r.hits[0].hit;
    assert_eq!((top.path.as_str(), &body[top.start..top.end]), (path, top.text.as_str()));
    assert!(top.text.contains("checksums"), "{:?}", top.text);
}

#[test]
fn an_edit_inside_a_window_re_embeds_that_window_only() {
    let (mut s, idx, path, body) = with_short_paragraphs();
    let model = s.embedder.id().to_owned();
    let fresh = s.store.vector_freshness(&model).unwrap();
    let edited = body.replace("35 days", "45 days");
    s.store.save_note(path, edited.as_bytes()).unwrap();
    let after = s.store.vector_freshness(&model).unwrap();
    let reopened = fresh.with_vectors - after.with_vectors;
    assert!(reopened > 0 && reopened < fresh.with_vectors, "only the edited window's members are pending again: {fresh:?} → {after:?}");
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    assert_eq!(r.deleted, 1, "the stale window's vector is deleted");
    assert_eq!(r.embedded as i64, reopened, "its other members and the new passage are embedded again");
    let fresh = s.store.vector_freshness(&model).unwrap();
    assert_eq!(fresh.with_vectors, fresh.passages);
    assert_eq!(idx.count().unwrap() as i64, fresh.windows, "no stale or duplicate rows");
    let models = Models { embedder: Some(&mut s.embedder), index: Some(&idx), reranker: None };
    let cfg = RetrievalConfig { limit: 3, graph_limit: 0, ..Default::default() };
    let r = retrieve(&s.store, "how long are nightly snapshots retained", Mode::Dense, models, &cfg).unwrap();
    let hit = r.hits.iter().find(|h| h.hit.path == path).expect("found after the edit").hit.clone();
    assert_eq!(&edited[hit.start..hit.end], hit.text);
}

#[test]
fn rows_added_before_a_crash_are_not_left_behind() {
    let mut s = setup();
    let idx = index(&s);
    let model = s.embedder.id().to_owned();
    // The worker queues a round's leaders for deletion before adding their rows, and clears
    // them when it records the windows: a crash in between leaves them queued.
    let pending = s.store.pending_vectors(&model, 0, 4).unwrap();
    let rows: Vec<lode_retrieval::VectorRow> = pending
        .iter()
        .map(|p| lode_retrieval::VectorRow {
            passage_id: p.id,
            note_id: p.note_id,
            version_id: p.version_id.clone(),
            vector: vec![0.1; 384],
        })
        .collect();
    let leaders: Vec<i64> = rows.iter().map(|r| r.passage_id).collect();
    s.store.queue_vector_deletions(&model, &leaders).unwrap();
    idx.add(&rows).unwrap();
    drop(idx);
    // "Restart": a new pass deletes the orphans and embeds everything once.
    let idx = index(&s);
    let r = sync_vectors(&mut s.store, &idx, &mut s.embedder, WINDOW_TOKENS, None, |_, _| {}, || true).unwrap();
    assert_eq!(r.deleted, 4);
    let fresh = s.store.vector_freshness(&model).unwrap();
    assert_eq!(idx.count().unwrap() as i64, fresh.windows);
}

/// Unit vectors around a few hundred centres, like sentence embeddings (deterministic).
fn clustered(n: usize, dims: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    let centres: Vec<Vec<f32>> = (0..300).map(|_| (0..dims).map(|_| next()).collect()).collect();
    (0..n)
        .map(|i| {
            let v: Vec<f32> = centres[i % centres.len()].iter().map(|c| c + 0.3 * next()).collect();
            let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
            v.iter().map(|a| a / norm).collect()
        })
        .collect()
}

#[test]
fn a_large_table_gets_an_approximate_index_that_finds_what_a_flat_search_finds() {
    let dir = tempfile::tempdir().unwrap();
    let dims = 32;
    let idx = VectorIndex::open(dir.path(), "synthetic", dims).unwrap();
    let vectors = clustered(3000, dims, 7);
    let rows = |from: usize, vs: &[Vec<f32>]| -> Vec<VectorRow> {
        vs.iter()
            .enumerate()
            .map(|(i, v)| VectorRow { passage_id: (from + i) as i64, note_id: 0, version_id: String::new(), vector: v.clone() })
            .collect()
    };
    idx.add(&rows(0, &vectors)).unwrap();
    assert_eq!(idx.maintain_ann_from(5000).unwrap(), None, "below the threshold a flat search is kept");
    assert!(!idx.has_ann().unwrap());
    let queries: Vec<&Vec<f32>> = vectors.iter().step_by(150).collect();
    let flat: Vec<Vec<i64>> = queries.iter().map(|q| idx.nearest(q, 10).unwrap().into_iter().map(|(id, _)| id).collect()).collect();
    let built = idx.maintain_ann_from(2000).unwrap().expect("an index is built");
    assert!(built.contains("IVF-PQ") && idx.has_ann().unwrap(), "{built}");
    let mut hit = 0;
    for (q, truth) in queries.iter().zip(&flat) {
        let near: Vec<i64> = idx.nearest(q, 10).unwrap().into_iter().map(|(id, _)| id).collect();
        assert_eq!(near[0], truth[0], "a stored vector is its own nearest neighbour, indexed or not");
        hit += near.iter().filter(|id| truth.contains(id)).count();
    }
    assert!(hit * 10 >= flat.len() * 10 * 8, "recall@10 under 0.8: {hit} of {}", flat.len() * 10);
    // Rows added after the build are found at once, and folded into the index by the next call.
    let more = clustered(50, dims, 99);
    idx.add(&rows(10_000, &more)).unwrap();
    assert_eq!(idx.nearest(&more[7], 1).unwrap()[0].0, 10_007);
    assert_eq!(idx.maintain_ann_from(2000).unwrap().as_deref(), Some("vector index updated"));
    assert_eq!(idx.nearest(&more[7], 1).unwrap()[0].0, 10_007);
    assert_eq!(idx.count().unwrap(), 3050);
}

/// `serving.json` lies in `.lode/vectors`, which a clone can ship: a record naming a relative
/// model folder, or one planted as a link, is not read; a write replaces a planted link rather
/// than writing through it.
#[test]
fn the_serving_record_is_read_only_when_lode_could_have_written_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rec = lode_retrieval::Serving { id: "m".into(), path: std::path::PathBuf::from("/models/m"), dims: 3 };
    rec.write(dir).unwrap();
    assert_eq!(lode_retrieval::Serving::read(dir), Some(rec.clone()));
    std::fs::write(dir.join("serving.json"), r#"{"id": "m", "path": "models/evil", "dims": 3}"#).unwrap();
    assert_eq!(lode_retrieval::Serving::read(dir), None, "a relative model folder");
    let outside = tmp.path().join("outside.json");
    std::fs::write(&outside, serde_json::to_vec(&rec).unwrap()).unwrap();
    std::fs::remove_file(dir.join("serving.json")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("serving.json")).unwrap();
    assert_eq!(lode_retrieval::Serving::read(dir), None, "a planted link");
    let other = lode_retrieval::Serving { id: "n".into(), path: std::path::PathBuf::from("/models/n"), dims: 3 };
    other.write(dir).unwrap();
    assert_eq!(std::fs::read(&outside).unwrap(), serde_json::to_vec(&rec).unwrap(), "written through the link");
    assert_eq!(lode_retrieval::Serving::read(dir), Some(other));
}
