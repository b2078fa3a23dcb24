//! Models and vectors in the running server: rerank and entailment, release when idle, an
//! embedder switch, a missing model, saves embedded first, vector tables damaged or lost.

use super::*;

/// With `[models] reranker` and `nli` configured, the language server uses both, as `lode ask`
/// does: a cross-encoder that prefers another passage changes the order of the answer (and `lode
/// ask` gives the same one), a claim that only the entailment model can verify is verified over
/// LSP, and `lode/status` says which models are loaded. Without them, neither happens.
#[test]
fn the_server_reranks_and_runs_the_entailment_step_when_configured() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("vault");
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    // Lexically, `a.md` is the better match (the question's words twice); the tiny cross-encoder
    // scores by "banana" and "cherry" only, so it puts `b.md` first. The two sentences answer
    // equally well (the same words of the question, both long), so the rank decides the order.
    std::fs::write(v.join("a.md"), "# Orchard report\n\nThe orchard report is due in May, and the orchard report lists apples.\n").unwrap();
    std::fs::write(v.join("b.md"), "# Orchard notes\n\nThe orchard report counts the banana and cherry trees along the north wall.\n")
        .unwrap();
    std::fs::write(v.join("fruit.md"), "# Market\n\nWe saw a banana stand and another banana.\n").unwrap();
    index_lexical(&v);
    let models = lode_testing::models();
    let (rerank, nli) = (models.join("tiny-cross-encoder"), models.join("tiny-nli"));
    // The model proposes a paraphrase no quote contains: only entailment can verify it.
    let fake = lode_testing::llm::FakeLlm::start(Box::new(|body: &str| {
        let content = match lode_testing::llm::label_of(body, "fruit.md") {
            Some(s) => json!({"claims": [{"text": "the stand sells banana after banana",
                "support": [{"source": s, "quote": "a banana stand"}, {"source": s, "quote": "another banana"}]}]})
            .to_string(),
            None => "{\"claims\": []}".to_owned(),
        };
        (200, lode_testing::llm::completion(&content))
    }));
    let config = |models: &str, llm: bool| {
        let llm = if llm {
            format!("\n[llm]\nendpoint = \"{}\"\nmodel = \"scripted\"\nremote = false\nretries = 0\n", fake.endpoint)
        } else {
            String::new()
        };
        std::fs::write(v.join(".lode/config.toml"), format!("[models]\nembedder = \"\"\n{models}{llm}")).unwrap();
        approve(&v);
    };
    let orchard = "What does the orchard report say?";
    let market = "What did we see at the market stand?";
    let first_path = |a: &Value| a["result"]["claims"][0]["citations"][0]["path"].as_str().unwrap_or_default().to_owned();
    let configured = format!("reranker = {:?}\nnli = {:?}\n", rerank.display().to_string(), nli.display().to_string());

    // Without the models: the lexical order, and the paraphrase is evidence only.
    config("", false);
    let mut lsp = start_on(&v, json!({}));
    let a = lsp.request("lode/ask", json!({"question": orchard}));
    assert_eq!(first_path(&a), "a.md", "{a}");
    let st = lsp.request("lode/status", json!(null));
    assert!(st["result"]["reranker"].as_str().is_some_and(|s| s.starts_with("off")), "{st}");
    drop(lsp);
    config("", true);
    let mut lsp = start_on(&v, json!({}));
    let a = lsp.request("lode/ask", json!({"question": market}));
    assert_eq!(a["result"]["claims"][0]["rung"], "evidence_only", "no entailment model, no verified paraphrase: {a}");
    drop(lsp);

    // With them: the reranker's order, the same in `lode ask`, and the paraphrase entailed.
    config(&configured, false);
    let mut lsp = start_on(&v, json!({}));
    let st = lsp.request("lode/status", json!(null));
    assert!(st["result"]["reranker"]["state"].as_str().is_some_and(|s| s.contains("first use")), "not loaded before it is needed: {st}");
    let a = lsp.request("lode/ask", json!({"question": orchard}));
    assert_eq!(first_path(&a), "b.md", "the reranker's order: {a}");
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["ask", "--json", "--vault"]).arg(&v).arg(orchard).output().unwrap();
    let cli: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
    let texts = |claims: &Value| claims.as_array().map(|c| c.iter().map(|c| c["text"].clone()).collect::<Vec<_>>()).unwrap_or_default();
    assert_eq!(texts(&a["result"]["claims"]), texts(&cli["claims"]), "lode ask and lode/ask differ: {cli}");
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["reranker"]["id"], "tiny-cross-encoder", "{st}");
    assert!(st["result"]["reranker"]["state"].as_str().is_some_and(|s| s.starts_with("loaded")), "{st}");
    drop(lsp);
    config(&configured, true);
    let mut lsp = start_on(&v, json!({}));
    let a = lsp.request("lode/ask", json!({"question": market}));
    let c = &a["result"]["claims"][0];
    assert_eq!((c["rung"].as_str(), c["verification"]["kind"].as_str()), (Some("verified"), Some("entailed")), "{a}");
    assert!(c["label"].as_str().is_some_and(|l| l.contains("0.99")), "{a}");
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["nli"]["id"], "tiny-nli", "{st}");
}

/// `[models] unload_after_secs`: the embedder, the cross-encoder and the entailment model are
/// released once unused that long (their memory goes back to the system, `lode/status` says so)
/// and loaded again by the next question, which is answered exactly as before (dense, reranked).
#[test]
fn models_unused_for_a_while_are_released_and_loaded_again_on_use() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("vault");
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::write(v.join("a.md"), "# Orchard report\n\nThe orchard report is due in May, and the orchard report lists apples.\n").unwrap();
    std::fs::write(v.join("b.md"), "# Orchard notes\n\nThe orchard report counts the banana and cherry trees along the north wall.\n")
        .unwrap();
    let models = lode_testing::models();
    let (embedder, rerank) = (models.join("all-MiniLM-L6-v2"), models.join("tiny-cross-encoder"));
    std::fs::write(
        v.join(".lode/config.toml"),
        format!(
            "[models]\nembedder = {:?}\nreranker = {:?}\nunload_after_secs = 3\n",
            embedder.display().to_string(),
            rerank.display().to_string()
        ),
    )
    .unwrap();
    approve(&v);
    let mut lsp = start_on(&v, json!({}));
    let orchard = "What does the orchard report say?";
    let status_until = |lsp: &mut Lsp, what: &str, ok: &dyn Fn(&Value) -> bool| -> Value {
        let t = Instant::now();
        loop {
            let st = lsp.request("lode/status", json!(null));
            if ok(&st["result"]) {
                return st["result"].clone();
            }
            assert!(t.elapsed() < Duration::from_secs(60), "{what}: {st}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    status_until(&mut lsp, "vectors complete", &|r| {
        r["dense"]["with_vectors"].as_u64().is_some() && r["dense"]["with_vectors"] == r["passages"]
    });
    let first = lsp.request("lode/ask", json!({"question": orchard}));
    assert!(first["result"]["notice"].is_null(), "dense and reranked, nothing to say: {first}");
    let st = status_until(&mut lsp, "loaded", &|r| r["reranker"]["state"].as_str().is_some_and(|s| s.starts_with("loaded")));
    assert_eq!(st["dense"]["resident"], true, "{st}");
    let loaded_mib = lsp.0.rss_mib().unwrap();

    // Unused for 3 s: both released, and the memory is given back.
    let st = status_until(&mut lsp, "released", &|r| {
        r["dense"]["resident"] == false && r["reranker"]["state"].as_str().is_some_and(|s| s.starts_with("released"))
    });
    assert!(st["dense"]["with_vectors"] == st["passages"], "the vectors stay: {st}");
    // The int8 MiniLM holds ~22 MB of weights (kept int8), its tokenizer ~12 MB: most of it
    // must go (before the weights were kept int8, a loaded copy was ~100 MB more). The heap is
    // handed back just after the status says released (under a loaded machine, a little
    // later): it is read again for a few seconds.
    let t = Instant::now();
    let released_mib = loop {
        let rss = lsp.0.rss_mib().unwrap();
        if rss < loaded_mib - 20.0 || t.elapsed() > Duration::from_secs(10) {
            break rss;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(released_mib < loaded_mib - 20.0, "{loaded_mib:.0} MiB loaded, {released_mib:.0} MiB released");

    // The next question loads them again and is answered as the first was.
    let again = lsp.request("lode/ask", json!({"question": orchard}));
    assert_eq!(again["result"]["claims"], first["result"]["claims"], "{again}");
    assert!(again["result"]["notice"].is_null(), "{again}");
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["dense"]["resident"], true, "{st}");
    assert!(st["result"]["reranker"]["state"].as_str().is_some_and(|s| s.starts_with("loaded")), "{st}");
}

/// `[models] embedder` changed to another model: the server embeds every passage again into the
/// new model's own table in the background while the old model and its vectors go on answering
/// (dense answers, not lexical ones), says so in `lode/status`, resumes after a kill -9 where it
/// was, and swaps once the new table is complete — then the old table is gone.
#[test]
fn switching_the_embedder_keeps_the_old_vectors_answering_until_the_new_ones_are_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("vault");
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    for i in 0..150 {
        let body = format!(
            "# Note {i}\n\n## Planning\n\nThe planning of project {i} covers budgets and dates for the quarter.\n\n\
             ## Staffing\n\nProject {i} needs two engineers and one designer until spring.\n\n\
             ## Risks\n\nThe main risk of project {i} is a late vendor delivery.\n"
        );
        std::fs::write(v.join(format!("project-{i:03}.md")), body).unwrap();
    }
    // The same weights under another id: its vectors go to a table of their own.
    let a = lode_testing::models().join("all-MiniLM-L6-v2");
    let b = tmp.path().join("models/minilm-b");
    lode_testing::copy_dir(&a, &b);
    let manifest = std::fs::read_to_string(b.join("lode-model.toml")).unwrap().replace("id = \"all-MiniLM-L6-v2\"", "id = \"minilm-b\"");
    std::fs::write(b.join("lode-model.toml"), manifest).unwrap();
    let config = |m: &Path| {
        std::fs::write(v.join(".lode/config.toml"), format!("[models]\nembedder = {:?}\n", m.display().to_string())).unwrap();
        approve(&v);
    };
    config(&a);
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["index", "-q", "--vault"]).arg(&v).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    config(&b);
    let dense = |lsp: &mut Lsp| lsp.request("lode/status", json!(null))["result"]["dense"].clone();
    let wait = |lsp: &mut Lsp, what: &str, pred: &dyn Fn(&Value) -> bool| {
        let t = Instant::now();
        loop {
            let d = dense(lsp);
            if pred(&d) {
                return d;
            }
            assert!(t.elapsed() < Duration::from_secs(180), "{what}: {d}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let mut lsp = start_on(&v, json!({}));
    let d = wait(&mut lsp, "the models never loaded", &|d| d.is_object());
    assert_eq!(d["model"], "all-MiniLM-L6-v2", "the old model answers meanwhile: {d}");
    assert_eq!(d["switching"]["to"], "minilm-b", "{d}");
    let a1 = lsp.request("lode/ask", json!({"question": "Which vendor risk does project 42 have?"}));
    assert!(a1["result"]["notice"].as_str().is_none_or(|n| !n.contains("lexical")), "dense answers during the switch: {a1}");
    assert!(a1["result"]["claims"].as_array().is_some_and(|c| !c.is_empty()), "{a1}");
    // Killed mid-switch, then started again: it goes on from where it was.
    let d = wait(&mut lsp, "no progress", &|d| d["switching"]["with_vectors"].as_i64().is_some_and(|n| n > 0));
    let before = d["switching"]["with_vectors"].as_i64().unwrap();
    lsp.0.child.kill().unwrap();
    let _ = lsp.0.child.wait();
    let mut lsp = start_on(&v, json!({}));
    let d = wait(&mut lsp, "the models never loaded again", &|d| d.is_object());
    if d["model"] == "all-MiniLM-L6-v2" {
        let resumed = d["switching"]["with_vectors"].as_i64().unwrap_or(0);
        assert!(resumed >= before / 2, "resumed from {resumed}, had {before}: {d}");
    }
    let d = wait(&mut lsp, "the switch never completed", &|d| d["model"] == "minilm-b" && d.get("switching").is_none());
    assert!(d["with_vectors"].as_i64() > Some(0), "{d}");
    // The swap comes first, then the pass ends and drops the old table.
    let t = Instant::now();
    loop {
        let tables: Vec<String> =
            std::fs::read_dir(v.join(".lode/vectors")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        if !tables.iter().any(|t| t.contains("all_minilm")) {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "the old table is dropped after the swap: {tables:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let rec = std::fs::read_to_string(v.join(".lode/vectors/serving.json")).unwrap();
    assert!(rec.contains("minilm-b"), "{rec}");
    let a2 = lsp.request("lode/ask", json!({"question": "Which vendor risk does project 42 have?"}));
    assert!(a2["result"]["notice"].as_str().is_none_or(|n| !n.contains("lexical")), "{a2}");
}

#[test]
fn a_missing_model_is_told_and_status_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), "[models]\nembedder = \"no-such-model\"\n").unwrap();
    approve(&vault);
    let mut lsp = start_on(&vault, json!({}));
    let m = lsp.wait_for(|m| m["method"] == "window/showMessage");
    let text = m["params"]["message"].as_str().unwrap_or_default();
    assert_eq!(m["params"]["type"], 2, "a warning: {m}");
    assert!(text.contains("no-such-model") && text.contains("lexical search only"), "{text}");
    // The fix comes first: a collapsed toast shows one line, and the model path is long.
    assert!(text.starts_with("lode: run `lode setup`"), "{text}");
    // `lode/status` with no params member at all (as docs/lsp-extensions.md allows).
    lsp.raw(r#"{"jsonrpc":"2.0","id":991,"method":"lode/status"}"#);
    let st = lsp.response(json!(991));
    assert_eq!(st["result"]["notes"], 13, "{st}");
    let dense = st["result"]["dense"].as_str().unwrap_or_default();
    assert!(dense.starts_with("off:") && dense.contains("lode setup"), "{st}");
    // Still answers, lexically.
    assert!(answers_with(&mut lsp, "How often are staging certificates rotated?", "60 days"));
    drop(lsp);

    // A client that prompts for `lode setup` itself (the VS Code extension, with a button) is not
    // sent the server's warning as well; `lode/status` still says why.
    let mut lsp = Lsp::start();
    lsp.request(
        "initialize",
        json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}, "initializationOptions": {"setupPrompt": "client"}}),
    );
    lsp.notify("initialized", json!({}));
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    let st = lsp.request("lode/status", json!({}));
    assert!(st["result"]["dense"].as_str().unwrap_or_default().starts_with("off:"), "{st}");
    std::thread::sleep(Duration::from_millis(500));
    let told: Vec<&Value> = lsp.0.seen.iter().filter(|m| m["method"] == "window/showMessage").collect();
    assert!(told.is_empty(), "{told:?}");
}

#[test]
fn a_saved_note_is_embedded_before_the_backlog() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    std::fs::create_dir_all(vault.join("bulk")).unwrap();
    // A backlog of 3,000 passages for the vector thread.
    for i in 0..600 {
        let body: String = (0..5).map(|j| format!("Item {i}.{j} records routine figures for ledger batch {}.\n\n", i * 5 + j)).collect();
        std::fs::write(vault.join(format!("bulk/n{i:03}.md")), format!("# Bulk {i}\n\n{body}")).unwrap();
    }
    let mut lsp = start_on(&vault, json!({"window": {"workDoneProgress": true}}));
    let note = vault.join("fresh.md");
    std::fs::write(&note, "# Fresh\n\nThe heron migration starts in early March.\n").unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&note)}}));
    // The model loads beside the scan; under load it can still be loading when the scan ends.
    let loading = Instant::now();
    let model = loop {
        let status = lsp.request("lode/status", json!(null));
        if let Some(m) = status["result"]["dense"]["model"].as_str() {
            break m.to_owned();
        }
        assert!(
            status["result"]["dense"] == "loading the embedding model" && loading.elapsed() < Duration::from_secs(60),
            "dense retrieval must be on: {status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };

    let store =
        lode_store::Store::open(&vault.join(".lode/lode.db"), lode_store::StoreOptions { read_only: true, ..Default::default() }).unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let mine_pending = store.pending_vectors_of(&model, &["fresh.md".to_owned()], 10).unwrap();
        let fresh = store.vector_freshness(&model).unwrap();
        if fresh.passages > 0 && mine_pending.is_empty() && store.note_exists("fresh.md").unwrap() {
            assert!(fresh.with_vectors < fresh.passages, "the saved note waited for the whole backlog ({fresh:?})");
            break;
        }
        assert!(Instant::now() < deadline, "the saved note was never embedded");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The backlog shows as a progress bar of its own.
    let begin = lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["title"] == "lode: embedding passages");
    assert!(begin["params"]["token"].as_str().is_some_and(|t| t.starts_with("lode/embed/")), "{begin}");
}

/// A vector table damaged between runs: the server says so once (a warning naming where the
/// table was moved), `lode/status` says the table is being rebuilt, the vectors come back from
/// the passages, and questions are answered meanwhile.
#[test]
fn a_damaged_vector_table_is_told_moved_aside_and_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["index", "-q", "--vault"]).arg(&vault).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(lode_testing::damage_vector_tables(&vault.join(".lode/vectors")) > 0);
    let mut lsp = start_on(&vault, json!({}));
    let m = lsp.wait_for(|m| m["method"] == "window/showMessage");
    let text = m["params"]["message"].as_str().unwrap_or_default();
    assert_eq!(m["params"]["type"], 2, "a warning: {m}");
    assert!(text.contains("could not be read") && text.contains("moved aside"), "{text}");
    assert!(answers_with(&mut lsp, "How often are staging certificates rotated?", "60 days"));
    let t = Instant::now();
    loop {
        let st = lsp.request("lode/status", json!({}));
        let dense = &st["result"]["dense"];
        assert!(dense["mended"].as_str().is_some_and(|m| m.contains("moved aside")), "{st}");
        if dense["with_vectors"] == st["result"]["passages"] {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(120), "the vectors were not rebuilt: {st}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let aside =
        std::fs::read_dir(vault.join(".lode/vectors")).unwrap().flatten().any(|e| e.file_name().to_string_lossy().contains(".broken-"));
    assert!(aside, "the damaged table was kept aside, not deleted");
}

/// The vector table deleted, then damaged, under a running server: the next question finds it
/// (a deleted folder at once, damaged data on the first read), answers from lexical search and
/// says so, the user is told once per loss, `lode/status` never calls the vectors complete while
/// the table cannot be read, and the vectors come back from the passages.
#[test]
fn a_vector_table_lost_under_a_running_server_is_found_told_and_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["index", "-q", "--vault"]).arg(&vault).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut lsp = start_on(&vault, json!({}));
    let complete = |lsp: &mut Lsp| {
        let st = lsp.request("lode/status", json!({}));
        let d = &st["result"]["dense"];
        (d["with_vectors"] == st["result"]["passages"] && d.get("lexical_only").is_none(), st)
    };
    let wait_complete = |lsp: &mut Lsp, what: &str| {
        let t = Instant::now();
        loop {
            let (done, st) = complete(lsp);
            if done {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(120), "{what}: {st}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    wait_complete(&mut lsp, "the model never loaded");
    let question = "How often are staging certificates rotated?";
    let vectors = vault.join(".lode/vectors");
    // Found by a question (deleted, damaged) or by `lode/status` (deleted): whichever comes
    // first starts the rebuild, which on this small vault may be over before the other looks.
    for loss in ["deleted", "deleted, then status", "damaged"] {
        lsp.0.seen.retain(|m| m["method"] != "$/progress");
        match loss {
            "damaged" => assert!(lode_testing::damage_vector_tables(&vectors) > 0),
            // The server may be writing into it meanwhile: "not empty" until the last file goes.
            _ => {
                let t = Instant::now();
                while let Err(e) = std::fs::remove_dir_all(&vectors) {
                    assert!(e.kind() != std::io::ErrorKind::NotFound || !vectors.exists(), "{e}");
                    if !vectors.exists() {
                        break;
                    }
                    assert!(t.elapsed() < Duration::from_secs(10), "cannot delete {}: {e}", vectors.display());
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        if loss.ends_with("status") {
            let (done, st) = complete(&mut lsp);
            assert!(!done, "status calls the vectors complete with the table deleted: {st}");
        } else {
            let a = lsp.request("lode/ask", json!({"question": question}));
            let claims = a["result"]["claims"].as_array().cloned().unwrap_or_default();
            assert!(claims.iter().any(|c| c["text"].as_str().is_some_and(|t| t.contains("60 days"))), "{loss}: still answered: {a}");
            let notice = a["result"]["notice"].as_str().unwrap_or_default();
            assert!(notice.contains("lexical search only"), "{loss}: the answer says it is lexical: {a}");
        }
        let m = lsp.wait_for(|m| {
            m["method"] == "window/showMessage" && m["params"]["message"].as_str().is_some_and(|t| t.contains("vector table"))
        });
        let text = m["params"]["message"].as_str().unwrap_or_default();
        assert_eq!(m["params"]["type"], 2, "a warning: {m}");
        assert!(text.contains("rebuilt"), "{loss}: {text}");
        wait_complete(&mut lsp, &format!("{loss}: the vectors were not rebuilt"));
        // Complete is not over: the pass that rebuilt the table compacts it before it ends, and
        // a table damaged meanwhile would be rewritten whole (nothing to find).
        lsp.wait_for(|m| {
            m["method"] == "$/progress" && m["params"]["value"]["message"].as_str().is_some_and(|t| t.contains("vectors up to date"))
        });
        let a = lsp.request("lode/ask", json!({"question": question}));
        assert!(a["result"]["notice"].as_str().is_none_or(|n| !n.contains("lexical")), "{loss}: dense again once rebuilt: {a}");
        let again = lsp
            .0
            .seen
            .iter()
            .filter(|m| m["method"] == "window/showMessage" && m["params"]["message"].as_str().is_some_and(|t| t.contains("vector table")))
            .count();
        assert_eq!(again, 0, "{loss}: told once: {:?}", lsp.0.seen);
    }
    drop(lsp);
    // The rebuilt table is whole: `lode stats --check` reads it.
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["stats", "--check", "--vault"]).arg(&vault).output().unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}
