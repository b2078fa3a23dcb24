//! The protocol: an editor's round trip, broken and fuzzing clients, cancellation, panics kept
//! in their request, answers landing where the question is, several folders, status.

use super::*;

#[test]
fn editor_round_trip_over_stdio() {
    let (tmp, vault, mut lsp) = setup();
    let q = vault.join("questions.md");
    let q_uri = uri(&q);
    let text = "# Questions\n\nHow often are staging certificates rotated?\n";
    std::fs::write(&q, text).unwrap();
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": q_uri, "languageId": "markdown", "version": 1, "text": text}}));

    // Edit (incremental, with a CJK character and an emoji before the insertion point) and save:
    // the new text is answerable by the very next request.
    let added = "\nThe zebra drill 🦓 (日本) runs every 17 days.\n";
    lsp.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": q_uri, "version": 2},
               "contentChanges": [{"range": {"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 0}}, "text": added}]}),
    );
    let saved = format!("{text}{added}");
    std::fs::write(&q, &saved).unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": q_uri}, "text": saved}));
    let a = lsp.request("lode/ask", json!({"question": "How often does the zebra drill run?"}));
    let claims = &a["result"]["claims"];
    assert!(claims[0]["text"].as_str().unwrap().contains("every 17 days"), "{a}");
    let cit = &claims[0]["citations"][0];
    assert_eq!(cit["uri"], q_uri);
    assert_eq!(cit["range"]["start"]["line"], 4);

    // Code action on the question line, then the command inserts a verified answer.
    let actions = lsp.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": q_uri}, "range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}},
               "context": {"diagnostics": []}}),
    );
    let titles: Vec<&str> = actions["result"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["Ask lode", "Ask lode about this note"]);
    let cmd = actions["result"][0]["command"].clone();
    let r = lsp.request("workspace/executeCommand", json!({"command": cmd["command"], "arguments": cmd["arguments"]}));
    assert_eq!(r["result"]["applied"], true, "{r}");
    let edit = lsp.0.seen.iter().rev().find(|m| m["method"] == "workspace/applyEdit").cloned().expect("an edit was applied");
    let change = &edit["params"]["edit"]["changes"][q_uri.as_str()][0];
    let inserted = change["newText"].as_str().unwrap();
    assert!(inserted.contains("every 60 days") && inserted.contains("\"lode "), "{inserted}");
    // Short ids keep a citation on one line: 12 hex digits, not 64.
    let ids: Vec<&str> = inserted.split("\"lode ").skip(1).map(|t| t.split(':').next().unwrap()).collect();
    assert!(!ids.is_empty() && ids.iter().all(|i| i.len() == 12 && i.bytes().all(|b| b.is_ascii_hexdigit())), "{inserted}");
    assert_eq!(change["range"]["start"]["line"], 3);

    // Apply it to our copy, as an editor would, and save.
    let mut lines: Vec<&str> = saved.split_inclusive('\n').collect();
    lines.insert(3, inserted);
    let with_answer: String = lines.concat();
    lsp.notify("textDocument/didChange", json!({"textDocument": {"uri": q_uri, "version": 3}, "contentChanges": [{"text": with_answer}]}));
    std::fs::write(&q, &with_answer).unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": q_uri}, "text": with_answer}));

    // Hover on the citation shows the quoted span from the cited version.
    let (line_no, line) = with_answer.lines().enumerate().find(|(_, l)| l.contains("\"lode ")).unwrap();
    let col = line.find("](").unwrap() as u32;
    let h = lsp.request("textDocument/hover", json!({"textDocument": {"uri": q_uri}, "position": {"line": line_no, "character": col}}));
    let md = h["result"]["contents"]["value"].as_str().unwrap_or_default().to_owned();
    assert!(md.contains("every 60 days") && md.contains("runbooks/rotate-staging-certs.md"), "{h}");
    assert!(md.contains("current version"), "{md}");
    assert!(
        md.contains("labelled verified") && md.contains("not checked again here"),
        "hover names the rung, as a label of the note: {md}"
    );
    assert!(md.contains("quoted & coupled: the quote is in the cited version word for word"), "and the gate step: {md}");
    assert!(inserted.contains("*(verified)*") && !inserted.contains("coupled"), "the note says a word a reader knows: {inserted}");

    // Goto resolves it to the span in the current head.
    let g =
        lsp.request("textDocument/definition", json!({"textDocument": {"uri": q_uri}, "position": {"line": line_no, "character": col}}));
    let runbook = vault.join("runbooks/rotate-staging-certs.md");
    assert_eq!(g["result"]["uri"], uri(&runbook), "{g}");
    assert_eq!(g["result"]["range"]["start"]["line"], 4);

    // The cited note changes elsewhere: the quote is still there, so the citation gets a hint
    // and a quick fix that re-pins it to the current version.
    let runbook_text = std::fs::read_to_string(&runbook).unwrap();
    std::fs::write(&runbook, runbook_text.replace("Owner: Mei Lin Chen.", "Owner: Dario Fontana.")).unwrap();
    lsp.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": uri(&runbook), "type": 2}]}));
    let d = lsp.wait_for(|m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == q_uri
            && m["params"]["diagnostics"].as_array().is_some_and(|d| d.iter().any(|x| x["code"] == "lode.older-version"))
    });
    assert_eq!(d["params"]["version"], 3, "diagnostics name the buffer version they were computed on: {d}");
    let hint = d["params"]["diagnostics"].as_array().unwrap().iter().find(|x| x["code"] == "lode.older-version").unwrap().clone();
    let fixes = lsp.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": q_uri}, "range": hint["range"], "context": {"diagnostics": [hint]}}),
    );
    let repin = fixes["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"].as_str().unwrap().starts_with("Re-pin"))
        .expect("a re-pin fix")
        .clone();
    let new_link = repin["edit"]["changes"][q_uri.as_str()][0]["newText"].as_str().unwrap().to_owned();
    let head_o = Command::new(env!("CARGO_BIN_EXE_lode"))
        .args(["search", "--json", "--limit", "1", "Dario Fontana owner", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    let head_hit: Value = serde_json::from_str(String::from_utf8_lossy(&head_o.stdout).lines().next().unwrap()).unwrap();
    assert!(new_link.contains(&format!("\"lode {}:", &head_hit["version_id"].as_str().unwrap()[..12])), "{new_link}");

    // The cited note changes so that the quote drifts: a warning on the citation.
    let body = std::fs::read_to_string(&runbook).unwrap().replace("rotated every 60 days", "rotated every 45 days");
    std::fs::write(&runbook, &body).unwrap();
    lsp.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": uri(&runbook), "type": 2}]}));
    let d = lsp.wait_for(|m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == q_uri
            && m["params"]["diagnostics"].as_array().is_some_and(|d| d.iter().any(|x| x["code"] == "lode.drifted"))
    });
    let diags = d["params"]["diagnostics"].as_array().unwrap();
    assert!(diags.iter().any(|x| x["message"].as_str().unwrap().contains("drifted")), "{d}");
    // The citation link (`…md#L5 "lode …"`) is not also a broken link or heading.
    assert!(diags.iter().all(|x| x["code"] != "lode.broken-heading" && x["code"] != "lode.broken-link"), "{d}");

    // Goto now opens the cited version, materialized read-only in the user's cache, never in the
    // vault: a link planted where older lodes wrote it (`.lode/versions/<id>.md`, the id known in
    // advance) is not written through.
    let cited = head_hit["version_id"].as_str().unwrap().to_owned();
    let outside = tmp.path().join("outside.txt");
    std::fs::write(&outside, "keep me\n").unwrap();
    std::fs::create_dir_all(vault.join(".lode/versions")).unwrap();
    std::os::unix::fs::symlink(&outside, vault.join(format!(".lode/versions/{cited}.md"))).unwrap();
    let g =
        lsp.request("textDocument/definition", json!({"textDocument": {"uri": q_uri}, "position": {"line": line_no, "character": col}}));
    let target = g["result"]["uri"].as_str().unwrap();
    assert!(target.contains("/lode/versions/") && !target.contains("/.lode/"), "{g}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me\n", "goto wrote through a planted link");

    // Vectors follow saves asynchronously: every head passage gets one.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["stats", "--json", "--vault"]).arg(&vault).output().unwrap();
        let s: Value = serde_json::from_slice(&o.stdout).unwrap();
        if s["vectors"]["with_vectors"] == s["passages"] && s["passages"].as_i64() > Some(0) {
            break;
        }
        assert!(Instant::now() < deadline, "vectors did not catch up: {s}");
        std::thread::sleep(Duration::from_millis(200));
    }

    let s = lsp.request("shutdown", Value::Null);
    assert!(s.get("error").is_none());
    lsp.notify("exit", Value::Null);
    let status = lsp.0.child.wait().unwrap();
    assert!(status.success());
}

#[test]
fn broken_clients_get_json_rpc_errors() {
    let (_tmp, vault, mut lsp) = setup();
    lsp.raw("{this is not json");
    let e = lsp.response(Value::Null);
    assert_eq!(e["error"]["code"], -32700, "{e}");
    let e = lsp.request("lode/nonexistent", json!({}));
    assert_eq!(e["error"]["code"], -32601, "{e}");
    let e = lsp.request("lode/ask", json!({"question": ""}));
    assert_eq!(e["error"]["code"], -32602, "{e}");
    let e = lsp.request("lode/ask", json!({"question": "x".repeat(100_000)}));
    assert!(e["error"]["message"].as_str().unwrap().contains("at most"), "{e}");
    let e = lsp.request("lode/ask", json!({"wrong": 1}));
    assert_eq!(e["error"]["code"], -32602);
    let e = lsp.request("lode/ask", json!({"question": "redis?", "pinned": "file:///not/in/vault.md"}));
    assert_eq!(e["error"]["code"], -32602, "{e}");
    // Unknown documents and positions past the end are answered, not crashed on.
    let h = lsp.request("textDocument/hover", json!({"textDocument": {"uri": "file:///nope.md"}, "position": {"line": 9, "character": 9}}));
    assert!(h["result"].is_null() && h.get("error").is_none(), "{h}");
    let n = uri(&vault.join("notes/reading-list.md"));
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": n, "languageId": "markdown", "version": 1, "text": "short"}}));
    let h = lsp.request("textDocument/hover", json!({"textDocument": {"uri": n}, "position": {"line": 999, "character": 999}}));
    assert!(h.get("error").is_none(), "{h}");
    // Still serving.
    let a = lsp.request("lode/ask", json!({"question": "Which Redis eviction policy was chosen?"}));
    assert!(a["result"]["claims"].as_array().is_some_and(|c| !c.is_empty()), "{a}");
    let s = lsp.request("workspace/symbol", json!({"query": "runbook"}));
    let names: Vec<&str> = s["result"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert!(names.iter().any(|n| n.contains("Runbook")), "{names:?}");
}

#[test]
fn cancel_disconnect_and_a_vanishing_vault() {
    let (_tmp, vault, mut lsp) = setup();
    // Cancel mid-ask: the answer is either the result or RequestCancelled, and serving goes on.
    let id = 900;
    lsp.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "lode/ask", "params": {"question": "How often are staging certificates rotated?"}}),
    );
    lsp.notify("$/cancelRequest", json!({"id": id}));
    let r = lsp.response(json!(id));
    assert!(r.get("result").is_some() || r["error"]["code"] == -32800, "{r}");
    let a = lsp.request("lode/ask", json!({"question": "Which Redis eviction policy was chosen?"}));
    assert!(a["result"]["claims"].as_array().is_some_and(|c| !c.is_empty()));

    // A save, then the client disconnects without shutdown: the server exits, the save is kept.
    let n = vault.join("late.md");
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&n)}, "text": "The okapi migration finished on Tuesday.\n"}));
    let _ = lsp.request("workspace/symbol", json!({"query": "zzz"}));
    lsp.0.close_stdin();
    let child = &mut lsp.0.child;
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "server did not exit after the client went away");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["search", "--json", "okapi", "--vault"]).arg(&vault).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("late.md"), "{}", String::from_utf8_lossy(&o.stderr));

    // The vault folder disappears while the server runs: errors, not a crash.
    let mut lsp = Lsp::start();
    lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}}));
    lsp.notify("initialized", json!({}));
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    std::fs::remove_dir_all(&vault).unwrap();
    lsp.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": uri(&vault.join("notes/incident-2026-02-14.md")), "type": 3}]}),
    );
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&vault.join("gone.md"))}, "text": "text"}));
    let a = lsp.request("lode/ask", json!({"question": "redis failover"}));
    assert!(a.get("result").is_some() || a.get("error").is_some(), "{a}");
    let s = lsp.request("shutdown", Value::Null);
    assert!(s.get("error").is_none(), "still serving: {s}");
}

#[test]
fn a_panic_in_any_path_breaks_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    // Indexed beforehand, so the notes are there although the server's own scan panics.
    index_lexical(&vault);
    // Every path panics the first time it is reached (debug builds honour LODE_FAULT).
    let faults = "scan,vectors,writer,ask,ask-async,hover,hover-async";
    let mut lsp = Lsp(StdioClient::spawn_env(env!("CARGO_BIN_EXE_lode"), ["serve"], [("LODE_FAULT", faults)]).unwrap());
    let _ = lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}}));
    lsp.notify("initialized", json!({}));

    // The panicking scan still ends its progress, and status no longer says it is scanning.
    let end = lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    assert!(end["params"]["value"]["message"].as_str().unwrap().contains("panicked"), "{end}");
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["scanning"], false, "{st}");

    // An ask whose async handler panics, then one whose blocking part panics: each gets an
    // error; the next one answers.
    let q = json!({"question": "How often are staging certificates rotated?"});
    for _ in 0..2 {
        let e = lsp.request("lode/ask", q.clone());
        assert!(e["error"]["message"].as_str().is_some_and(|m| m.contains("panicked")), "{e}");
    }
    let a = lsp.request("lode/ask", q.clone());
    let claim = &a["result"]["claims"][0];
    assert!(claim["text"].as_str().unwrap().contains("every 60 days"), "{a}");

    // The writer panics on the first save; the next save indexes, and the note is answerable.
    let n = vault.join("zebra.md");
    let n_uri = uri(&n);
    let text = "# Zebra\n\nThe zebra drill runs every 17 days.\n";
    std::fs::write(&n, text).unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": n_uri}, "text": text}));
    let failed =
        lsp.wait_for(|m| m["method"] == "window/showMessage" && m["params"]["message"].as_str().is_some_and(|t| t.contains("zebra.md")));
    assert!(failed["params"]["message"].as_str().unwrap().contains("panicked"), "the injected writer panic fired: {failed}");
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": n_uri}, "text": text}));
    let z = lsp.request("lode/ask", json!({"question": "How often does the zebra drill run?"}));
    assert!(z["result"]["claims"][0]["text"].as_str().is_some_and(|t| t.contains("every 17 days")), "{z}");

    // Hover panics twice (async, then blocking), then answers; goto, symbols and status answer.
    let c = &claim["citations"][0];
    let link = lode_core::citation::render(
        "answers.md",
        c["path"].as_str().unwrap(),
        c["line"].as_u64().unwrap() as usize,
        c["version_id"].as_str().unwrap(),
        c["start"].as_u64().unwrap() as usize..c["end"].as_u64().unwrap() as usize,
    );
    let doc = format!("- Certificates rotate every 60 days {link} *(quoted & coupled)*\n");
    let d_uri = uri(&vault.join("answers.md"));
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": d_uri, "languageId": "markdown", "version": 1, "text": doc}}));
    let col = doc.find("](").unwrap() as u32;
    let at = json!({"textDocument": {"uri": d_uri}, "position": {"line": 0, "character": col}});
    for _ in 0..2 {
        let e = lsp.request("textDocument/hover", at.clone());
        assert!(e["error"]["message"].as_str().is_some_and(|m| m.contains("panicked")), "{e}");
    }
    let h = lsp.request("textDocument/hover", at.clone());
    assert!(h["result"]["contents"]["value"].as_str().unwrap().contains("every 60 days"), "{h}");
    let g = lsp.request("textDocument/definition", at);
    assert_eq!(g["result"]["uri"], uri(&vault.join("runbooks/rotate-staging-certs.md")), "{g}");
    let s = lsp.request("workspace/symbol", json!({"query": "zebra"}));
    assert!(s["result"].as_array().is_some_and(|a| !a.is_empty()), "{s}");
    let st = lsp.request("lode/status", json!(null));
    assert!(st["result"]["notes"].as_u64().unwrap() >= 14, "{st}");
}

/// The protocol fuzzer, short version (the long one is `LODE_FUZZ_MESSAGES=20000`): generated
/// and mutated JSON-RPC against the real binary — wrong types, huge and negative positions,
/// unknown URIs, interleaved open/change/save/close of one document, malformed frames, requests
/// after shutdown. Every request is answered, the server then answers correctly, nothing
/// panicked, and `lode stats --check` is clean.
#[test]
fn protocol_fuzz_leaves_the_server_answering() {
    let n: usize = std::env::var("LODE_FUZZ_MESSAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(600);
    let (_tmp, vault, log, mut lsp) = logged_server();

    let mut seed = 0x9E3779B97F4A7C15u64;
    let mut rnd = move |k: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % k.max(1) as u64) as usize
    };
    let doc = uri(&vault.join("fuzz.md"));
    let uris = [
        doc.clone(),
        "file:///nope.md".into(),
        "untitled:Untitled-1".into(),
        "".into(),
        format!("{}/../../etc/passwd", uri(&vault)),
        "http://example.com/x.md".into(),
        uri(&vault.join("runbooks/redis-failover.md")),
    ];
    let texts = ["", "# T\n\nHow often?\n", "a\u{2028}b\u{85}c\r\nd\re 🦓 日本", "x\n", &"long line ".repeat(20_000)];
    let numbers = [json!(-1), json!(0), json!(3), json!(4294967295u64), json!(1e20), json!("7"), json!(null), json!(2.5)];
    let mut pending = Vec::new();
    for i in 0..n {
        let u = json!(uris[rnd(uris.len())]);
        let pos = json!({"line": numbers[rnd(numbers.len())], "character": numbers[rnd(numbers.len())]});
        let range = json!({"start": pos, "end": {"line": numbers[rnd(numbers.len())], "character": 0}});
        let text = texts[rnd(texts.len())];
        match rnd(12) {
            0 => lsp
                .notify("textDocument/didOpen", json!({"textDocument": {"uri": u, "languageId": "markdown", "version": i, "text": text}})),
            1 => lsp.notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": doc, "version": i}, "contentChanges": [{"range": range, "text": text}, {"text": text}]}),
            ),
            2 => {
                lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": if rnd(2) == 0 { json!(doc) } else { u }}, "text": text}))
            }
            3 => lsp.notify("textDocument/didClose", json!({"textDocument": {"uri": doc}})),
            4 => lsp.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": u, "type": numbers[rnd(numbers.len())]}]})),
            5 => lsp.raw(["{not json", "[]", "{\"jsonrpc\": \"2.0\"}", "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":5}", "null"][rnd(5)]),
            k => {
                let (method, params) = match k {
                    6 => ("textDocument/hover", json!({"textDocument": {"uri": u}, "position": pos})),
                    7 => ("textDocument/definition", json!({"textDocument": {"uri": u}, "position": pos})),
                    8 => (
                        "lode/ask",
                        [
                            json!({"question": text}),
                            json!({"question": 5}),
                            json!({"question": "redis?", "pinned": u}),
                            json!([1, 2]),
                            json!({"question": "x", "limit": numbers[rnd(numbers.len())]}),
                        ][rnd(5)]
                        .clone(),
                    ),
                    9 => {
                        let q = ["%", "_", "ÄÖ", "", "runbook", text][rnd(6)];
                        ("workspace/symbol", json!({"query": q}))
                    }
                    10 => (
                        "textDocument/codeAction",
                        json!({"textDocument": {"uri": u}, "range": range, "context": {"diagnostics": numbers[rnd(numbers.len())]}}),
                    ),
                    _ => (
                        ["lode/status", "unknown/method", "workspace/executeCommand"][rnd(3)],
                        [json!(null), json!({"command": "lode.ask", "arguments": [{"uri": u}]}), json!("x")][rnd(3)].clone(),
                    ),
                };
                let id = 100_000 + i;
                let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                lsp.send(&msg);
                pending.push((id, msg));
            }
        }
    }
    for (id, msg) in pending {
        let r = lsp
            .0
            .response(json!(id))
            .unwrap_or_else(|e| panic!("{e}: no answer to {}", &msg.to_string()[..msg.to_string().len().min(400)]));
        assert!(r.get("result").is_some() || r.get("error").is_some(), "{r}");
    }
    // Still answering, and correctly.
    let a = lsp.request("lode/ask", json!({"question": "How often are staging certificates rotated?"}));
    assert!(a["result"]["claims"][0]["text"].as_str().is_some_and(|t| t.contains("every 60 days")), "{a}");
    let s = lsp.request("lode/status", json!(null));
    assert!(s["result"]["notes"].as_u64().is_some(), "{s}");
    // Requests after shutdown are refused, not crashed on.
    let _ = lsp.request("shutdown", json!(null));
    let late = lsp.request("textDocument/hover", json!({"textDocument": {"uri": doc}, "position": {"line": 0, "character": 0}}));
    assert!(late.get("error").is_some(), "{late}");
    lsp.notify("exit", json!(null));
    let _ = lsp.0.stop();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains("panicked"), "the server panicked:\n{logged}");
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["stats", "--check", "--vault"]).arg(&vault).output().unwrap();
    assert!(o.status.success(), "stats --check: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}

#[test]
fn answers_land_under_the_question_where_it_is_when_they_arrive() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let (endpoint, _) = slow_llm(Duration::from_secs(2));
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), format!("[llm]\nendpoint = \"{endpoint}\"\nmodel = \"slow\"\nretries = 0\n")).unwrap();
    approve(&vault);
    let mut lsp = Lsp::start();
    let caps = json!({"workspace": {"workspaceEdit": {"documentChanges": true}}});
    let _ = lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": caps}));
    lsp.notify("initialized", json!({}));
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    let q = vault.join("q.md");
    let q_uri = uri(&q);
    let text = "# Q\n\nHow often are staging certificates rotated?\n\nmore text\n";
    std::fs::write(&q, text).unwrap();
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": q_uri, "languageId": "markdown", "version": 1, "text": text}}));
    let id = 5151;
    lsp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "workspace/executeCommand",
        "params": {"command": "lode.ask", "arguments": [{"uri": q_uri, "range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}, "pinned": false}]}}));
    // While the model thinks, the user adds two lines above the question.
    std::thread::sleep(Duration::from_millis(300));
    lsp.notify("textDocument/didChange", json!({"textDocument": {"uri": q_uri, "version": 2},
        "contentChanges": [{"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}, "text": "typed meanwhile\nand more\n"}]}));
    let edit = lsp.wait_for(|m| m["method"] == "workspace/applyEdit");
    let dc = &edit["params"]["edit"]["documentChanges"][0];
    assert_eq!(dc["textDocument"]["version"], 2, "{edit}");
    assert_eq!(dc["edits"][0]["range"]["start"]["line"], 5, "under the question, now on line 4: {edit}");
    assert!(dc["edits"][0]["newText"].as_str().unwrap().contains("**lode**"), "{edit}");
    let r = lsp.response(json!(id));
    assert_eq!(r["result"]["applied"], true, "{r}");

    // A CRLF note gets its answer in CRLF.
    let crlf = vault.join("crlf.md");
    let crlf_uri = uri(&crlf);
    let text = "# Q\r\n\r\nHow often are staging certificates rotated?\r\n";
    std::fs::write(&crlf, text).unwrap();
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": crlf_uri, "languageId": "markdown", "version": 1, "text": text}}));
    let id = 5152;
    lsp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "workspace/executeCommand",
        "params": {"command": "lode.ask", "arguments": [{"uri": crlf_uri, "range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}, "pinned": false}]}}));
    let edit = lsp
        .wait_for(|m| m["method"] == "workspace/applyEdit" && m["params"]["edit"]["documentChanges"][0]["textDocument"]["uri"] == crlf_uri);
    let inserted = edit["params"]["edit"]["documentChanges"][0]["edits"][0]["newText"].as_str().unwrap().to_owned();
    assert!(inserted.contains("\r\n") && !inserted.replace("\r\n", "").contains('\n'), "{inserted:?}");
    let _ = lsp.response(json!(id));
}

#[test]
fn several_workspace_folders_are_several_vaults() {
    let tmp = tempfile::tempdir().unwrap();
    let a = example_vault(tmp.path());
    let b = tmp.path().join("garden");
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("beds.md"), "# Beds\n\nThe raised beds are watered every 3 days.\n\nSee [[compost]].\n").unwrap();
    std::fs::write(b.join("compost.md"), "# Compost\n\n## Turning\n\nTurn the heap weekly.\n").unwrap();
    let mut lsp = Lsp::start();
    let init = lsp.request(
        "initialize",
        json!({"processId": null, "capabilities": {}, "workspaceFolders": [{"uri": uri(&a), "name": "a"}, {"uri": uri(&b), "name": "b"}]}),
    );
    assert_eq!(init["result"]["capabilities"]["workspace"]["workspaceFolders"]["supported"], true, "{init}");
    lsp.notify("initialized", json!({}));
    for _ in 0..2 {
        lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
        lsp.0.seen.retain(|m| !(m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end"));
    }
    // Each vault has its own store; symbols come from both.
    assert!(b.join(".lode/lode.db").exists() && a.join(".lode/lode.db").exists());
    let s = lsp.request("workspace/symbol", json!({"query": "turning"}));
    assert_eq!(s["result"][0]["name"], "Turning", "{s}");
    let s = lsp.request("workspace/symbol", json!({"query": "redis failover"}));
    assert!(s["result"].as_array().is_some_and(|r| !r.is_empty()), "{s}");
    // A link in vault b resolves in vault b.
    let beds = b.join("beds.md");
    let text = std::fs::read_to_string(&beds).unwrap();
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri(&beds), "languageId": "markdown", "version": 1, "text": text}}));
    let d = lsp.request("textDocument/definition", json!({"textDocument": {"uri": uri(&beds)}, "position": {"line": 4, "character": 7}}));
    assert_eq!(d["result"]["uri"], uri(&b.join("compost.md")), "{d}");
    // A question pinned to a note of vault b is answered from vault b.
    let q = lsp.request("lode/ask", json!({"question": "How often are the raised beds watered?", "pinned": uri(&beds)}));
    assert!(q["result"]["claims"][0]["text"].as_str().is_some_and(|t| t.contains("every 3 days")), "{q}");
    // A save in vault b lands in vault b's store.
    std::fs::write(b.join("seeds.md"), "# Seeds\n\nSeeds are sown in March.\n").unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&b.join("seeds.md"))}}));
    let s = lsp.request("workspace/symbol", json!({"query": "seeds"}));
    assert_eq!(s["result"][0]["location"]["uri"], uri(&b.join("seeds.md")), "{s}");
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["vaults"].as_array().map(Vec::len), Some(2), "{st}");
    // Folders come and go.
    let c = tmp.path().join("kitchen");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(c.join("bread.md"), "# Bread\n\n## Proofing\n\nProof the dough overnight.\n").unwrap();
    lsp.notify(
        "workspace/didChangeWorkspaceFolders",
        json!({"event": {"added": [{"uri": uri(&c), "name": "c"}], "removed": [{"uri": uri(&b), "name": "b"}]}}),
    );
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    let s = lsp.request("workspace/symbol", json!({"query": "proofing"}));
    assert_eq!(s["result"][0]["name"], "Proofing", "{s}");
    let s = lsp.request("workspace/symbol", json!({"query": "turning"}));
    assert_eq!(s["result"].as_array().map(Vec::len), Some(0), "the removed vault is gone: {s}");
}

#[test]
fn status_says_scanning_from_the_first_request() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    for round in 0..5 {
        let _ = std::fs::remove_dir_all(vault.join(".lode"));
        let mut lsp = Lsp::start();
        // A client that registers file watchers (VS Code): the server asks it to, and the vault
        // opens before the answer comes back.
        let caps = json!({"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": true}}});
        lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": caps}));
        lsp.notify("initialized", json!({}));
        // Right after start: either still scanning, or done with every note; never an empty
        // index that looks finished ("0 notes" and no "scanning").
        let st = lsp.request("lode/status", json!({}));
        let (scanning, notes) = (st["result"]["scanning"].as_bool(), st["result"]["notes"].as_u64());
        assert!(scanning == Some(true) || notes == Some(13), "round {round}: {st}");
    }
}
