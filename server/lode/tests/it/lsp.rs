//! End-to-end runs of the real `lode serve` over stdio, driven by a small JSON-RPC client:
//! initialize → open → edit → save → ask → code action → hover → goto → drift diagnostic, and
//! the protocol errors a broken client gets.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lode_testing::copy_dir;
use lode_testing::stdio_client::StdioClient;
use serde_json::{json, Value};

/// The user approves the vault's settings (`lode trust`), as they would a folder of their own.
fn approve(v: &std::path::Path) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lode")).args(["trust", "--vault"]).arg(v).output().unwrap();
    assert!(o.status.success(), "lode trust: {}", String::from_utf8_lossy(&o.stderr));
}

fn uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// The shared stdio client (`lode_testing::stdio_client`), failing the test on I/O errors.
struct Lsp(StdioClient);

impl Lsp {
    fn start() -> Lsp {
        Lsp(StdioClient::spawn(env!("CARGO_BIN_EXE_lode"), ["serve"]).unwrap())
    }

    fn raw(&mut self, body: &str) {
        self.0.raw(body).unwrap()
    }

    fn send(&mut self, v: &Value) {
        self.0.send(v).unwrap()
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.0.notify(method, params).unwrap()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.0.request(method, params).expect("server answered in time")
    }

    fn response(&mut self, id: Value) -> Value {
        self.0.response(id).expect("server answered in time")
    }

    fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        self.0.wait_for(pred).expect("notification in time")
    }
}

/// A copy of the example vault in `dir`.
fn example_vault(dir: &Path) -> PathBuf {
    let vault = dir.join("vault");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vault"), &vault);
    vault
}

/// Indexes `vault` with `lode index --no-vectors` (before a server starts).
fn index_lexical(vault: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["index", "--no-vectors", "--vault"]).arg(vault).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn setup() -> (tempfile::TempDir, PathBuf, Lsp) {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let mut lsp = Lsp::start();
    let t = Instant::now();
    let init = lsp.request(
        "initialize",
        json!({"processId": null, "rootUri": uri(&vault), "capabilities": {"general": {"positionEncodings": ["utf-16"]}},
               "workspaceFolders": [{"uri": uri(&vault), "name": "vault"}]}),
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(init["result"]["capabilities"]["positionEncoding"], "utf-16");
    lsp.notify("initialized", json!({}));
    // The scan reports progress and ends.
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    (tmp, vault, lsp)
}

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

#[test]
fn files_that_are_not_notes_are_never_indexed() {
    let (tmp, vault, mut lsp) = setup();
    // A materialized old version, a gitignored draft, a path climbing out of the vault and a
    // symlink: saves and watched-file events for them index nothing.
    let versions = vault.join(".lode/versions");
    std::fs::create_dir_all(&versions).unwrap();
    let old = versions.join("old.md");
    std::fs::write(&old, "The quokka policy allows 99 days.\n").unwrap();
    std::fs::write(vault.join(".gitignore"), "drafts/\n").unwrap();
    std::fs::create_dir_all(vault.join("drafts")).unwrap();
    let draft = vault.join("drafts/d.md");
    std::fs::write(&draft, "The quokka policy allows 98 days.\n").unwrap();
    let outside = tmp.path().join("outside.md");
    std::fs::write(&outside, "The quokka policy allows 97 days.\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, vault.join("link.md")).unwrap();
    let climbing = format!("{}/notes/../../outside.md", uri(&vault));
    let changes: Vec<Value> =
        [uri(&old), uri(&draft), climbing.clone(), uri(&vault.join("link.md"))].iter().map(|u| json!({"uri": u, "type": 1})).collect();
    lsp.notify("workspace/didChangeWatchedFiles", json!({"changes": changes}));
    for u in [uri(&old), uri(&draft), climbing] {
        lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": u}, "text": "The quokka policy allows 96 days.\n"}));
    }
    // A buffer with no file whose text (sent with didSave) is binary passes the same checks.
    let binary = uri(&vault.join("unsaved.md"));
    lsp.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": binary}, "text": "The quokka policy allows 95 days.\n\u{0}\u{1}\u{2}"}),
    );
    let warned =
        lsp.wait_for(|m| m["method"] == "window/showMessage" && m["params"]["message"].as_str().is_some_and(|t| t.contains("unsaved.md")));
    assert!(warned["params"]["message"].as_str().unwrap().contains("binary"), "{warned}");
    let a = lsp.request("lode/ask", json!({"question": "How many days does the quokka policy allow?"}));
    assert_eq!(a["result"]["abstained"], true, "{a}");
    let s = lsp.request("workspace/symbol", json!({"query": "old"}));
    assert!(s["result"].as_array().unwrap().iter().all(|x| !x["location"]["uri"].as_str().unwrap_or("").contains(".lode")), "{s}");
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["notes"], 13, "only the example vault's 13 notes: {st}");
}

/// An OpenAI-style endpoint on loopback that takes `delay` to answer every request with no
/// claims; counts the connections the client closed before the answer was ready.
fn slow_llm(delay: Duration) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let (endpoint, closed, _) = slow_llm_counted(delay);
    (endpoint, closed)
}

/// A loopback model that answers each request after `delay`, unless the client goes away first.
/// Returns its endpoint, how many clients went away mid-answer, and how many requests arrived.
type Counter = std::sync::Arc<std::sync::atomic::AtomicUsize>;
fn slow_llm_counted(delay: Duration) -> (String, Counter, Counter) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1", listener.local_addr().unwrap());
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    let arrived = received.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let count = count.clone();
            let arrived = arrived.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                let _ = r.read_exact(&mut body);
                arrived.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // "Generating": watch for the client going away meanwhile.
                let _ = conn.set_read_timeout(Some(Duration::from_millis(20)));
                let until = Instant::now() + delay;
                while Instant::now() < until {
                    if let Ok(0) = conn.read(&mut [0u8; 1]) {
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                }
                let content = serde_json::json!({"choices": [{"message": {"content": "{\"claims\": []}"}}]}).to_string();
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{content}",
                    content.len()
                );
            });
        }
    });
    (endpoint, served, received)
}

#[test]
fn a_slow_llm_answer_does_not_hold_up_hovers() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let (endpoint, _) = slow_llm(Duration::from_secs(5));
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), format!("[llm]\nendpoint = \"{endpoint}\"\nmodel = \"slow\"\nretries = 0\n")).unwrap();
    approve(&vault);
    index_lexical(&vault);
    // A citation to the runbook sentence, as an inserted answer would have it.
    let o = Command::new(env!("CARGO_BIN_EXE_lode"))
        .args(["search", "--json", "-n", "1", "--vault"])
        .arg(&vault)
        .arg("staging certificates rotated every 60 days")
        .output()
        .unwrap();
    let hit: Value = serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap()).unwrap();
    let link = lode_core::citation::render(
        "answers.md",
        hit["path"].as_str().unwrap(),
        hit["line"].as_u64().unwrap() as usize,
        hit["version_id"].as_str().unwrap(),
        hit["start"].as_u64().unwrap() as usize..hit["end"].as_u64().unwrap() as usize,
    );
    let doc = format!("- Certificates rotate every 60 days {link}\n");

    let mut lsp = Lsp::start();
    let _ = lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}}));
    lsp.notify("initialized", json!({}));
    let d_uri = uri(&vault.join("answers.md"));
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": d_uri, "languageId": "markdown", "version": 1, "text": doc}}));
    let at = json!({"textDocument": {"uri": d_uri}, "position": {"line": 0, "character": doc.find("](").unwrap()}});
    let h = lsp.request("textDocument/hover", at.clone());
    assert!(h["result"]["contents"]["value"].as_str().is_some_and(|v| v.contains("every 60 days")), "{h}");

    // One ask waits 5 s on the model; meanwhile 20 hovers answer at once.
    let started = Instant::now();
    lsp.send(
        &json!({"jsonrpc": "2.0", "id": 4242, "method": "lode/ask", "params": {"question": "How often are staging certificates rotated?"}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..20 {
        let t = Instant::now();
        let h = lsp.request("textDocument/hover", at.clone());
        assert!(h["result"]["contents"]["value"].as_str().is_some_and(|v| v.contains("every 60 days")), "{h}");
        assert!(t.elapsed() < Duration::from_secs(2), "a hover waited {:?} behind the ask", t.elapsed());
    }
    assert!(started.elapsed() < Duration::from_secs(5), "the hovers finished before the model answered");
    let a = lsp.response(json!(4242));
    assert!(started.elapsed() >= Duration::from_secs(5), "{a}");
    assert_eq!(a["result"]["abstained"], true, "the slow model proposed nothing: {a}");
}

#[test]
fn cancelling_an_ask_closes_the_model_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let (endpoint, closed, received) = slow_llm_counted(Duration::from_secs(30));
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), format!("[llm]\nendpoint = \"{endpoint}\"\nmodel = \"slow\"\nretries = 0\n")).unwrap();
    approve(&vault);
    index_lexical(&vault);
    let mut lsp = start_on(&vault, json!({}));
    lsp.send(
        &json!({"jsonrpc": "2.0", "id": 77, "method": "lode/ask", "params": {"question": "How often are staging certificates rotated?"}}),
    );
    let t = Instant::now();
    while received.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "the question never reached the model");
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    lsp.notify("$/cancelRequest", json!({"id": 77}));
    let r = lsp.response(json!(77));
    assert_eq!(r["error"]["code"], -32800, "{r}");
    while closed.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(t.elapsed() < Duration::from_secs(5), "the model connection stayed open after the cancel");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Nothing is held: a save and a question right after go through.
    let n = vault.join("ibis.md");
    std::fs::write(&n, "# Ibis\n\nThe ibis count runs every 19 days.\n").unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&n)}}));
    let s = lsp.request("workspace/symbol", json!({"query": "Ibis"}));
    assert_eq!(s["result"][0]["name"], "Ibis", "{s}");
}

/// A client that sends far more questions than the server answers at once gets a clear refusal
/// for the extra ones, at once; cancellation, edits and hovers are not held back meanwhile.
#[test]
fn a_flood_of_asks_holds_back_neither_cancels_nor_edits_nor_hovers() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    // The model takes 12 s: what follows must be done well before (10 s, with room for a
    // loaded machine running the other tests).
    let (endpoint, closed, received) = slow_llm_counted(Duration::from_secs(12));
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(
        vault.join(".lode/config.toml"),
        format!("[models]\nembedder = \"\"\n\n[llm]\nendpoint = \"{endpoint}\"\nmodel = \"slow\"\nretries = 0\n"),
    )
    .unwrap();
    approve(&vault);
    index_lexical(&vault);
    let mut lsp = start_on(&vault, json!({}));
    let doc = vault.join("scratch.md");
    let d_uri = uri(&doc);
    lsp.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": d_uri, "languageId": "markdown", "version": 1, "text": "# Scratch\n"}}),
    );

    let started = Instant::now();
    for id in 9000..9060 {
        lsp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "lode/ask", "params": {"question": "How often are staging certificates rotated?"}}));
    }
    // The extra questions are refused at once, saying why.
    let mut refused = std::collections::HashSet::new();
    for _ in 0..44 {
        let r = lsp.wait_for(|m| m.get("method").is_none() && m["error"]["code"] == -32803);
        assert!(r["error"]["message"].as_str().unwrap().contains("questions already"), "{r}");
        refused.insert(r["id"].as_i64().unwrap());
    }
    // An edit, a hover and a cancel all go through while the accepted ones wait on the model
    // (all sixteen of them: one cancelled before it asked would leave no connection to close).
    while received.load(std::sync::atomic::Ordering::SeqCst) < 16 {
        assert!(started.elapsed() < Duration::from_secs(8), "only {received:?} of 16 asks reached the model");
        std::thread::sleep(Duration::from_millis(10));
    }
    lsp.notify("textDocument/didChange", json!({"textDocument": {"uri": d_uri, "version": 2}, "contentChanges": [{"text": "# Scratch\n\nHow often are staging certificates rotated?\n"}]}));
    let actions = lsp.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": d_uri},
        "range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}, "context": {"diagnostics": []}}),
    );
    assert!(actions["result"].as_array().is_some_and(|a| !a.is_empty()), "the edit arrived: the question line has actions: {actions}");
    let h = lsp.request("textDocument/hover", json!({"textDocument": {"uri": d_uri}, "position": {"line": 0, "character": 2}}));
    assert!(h.get("error").is_none(), "{h}");
    // One that was taken: cancel it.
    let taken = (9000..9060).find(|id| !refused.contains(id)).unwrap();
    lsp.notify("$/cancelRequest", json!({"id": taken}));
    let c = lsp.response(json!(taken));
    assert_eq!(c["error"]["code"], -32800, "{c}");
    assert!(started.elapsed() < Duration::from_secs(10), "all this waited {:?} for the model", started.elapsed());
    let mut answered = 0;
    for id in (9000..9060).filter(|id| *id != taken && !refused.contains(id)) {
        let r = lsp.response(json!(id));
        assert_eq!(r["result"]["abstained"], true, "{r}");
        answered += 1;
    }
    assert_eq!(answered, 15, "sixteen were taken, one of them cancelled");
    while closed.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the cancelled ask's model connection stayed open");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The embedder is lent to an ask for retrieval only: while a slow model writes the answer, the
/// vector thread goes on embedding (it used to wait for the whole ask, model call included).
#[test]
fn a_slow_llm_answer_does_not_hold_up_embedding() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let (endpoint, _) = slow_llm(Duration::from_secs(8));
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), format!("[llm]\nendpoint = \"{endpoint}\"\nmodel = \"slow\"\nretries = 0\n")).unwrap();
    approve(&vault);
    let mut lsp = start_on(&vault, json!({}));
    let deadline = Instant::now() + Duration::from_secs(300);
    let model = loop {
        let status = lsp.request("lode/status", json!(null));
        if let Some(m) = status["result"]["dense"]["model"].as_str() {
            break m.to_owned();
        }
        assert!(
            status["result"]["dense"] == "loading the embedding model" && Instant::now() < deadline,
            "dense retrieval must be on: {status}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let store =
        lode_store::Store::open(&vault.join(".lode/lode.db"), lode_store::StoreOptions { read_only: true, ..Default::default() }).unwrap();
    while store.vector_freshness(&model).map_or(true, |f| f.passages == 0 || f.with_vectors < f.passages) {
        assert!(Instant::now() < deadline, "the example vault was never embedded");
        std::thread::sleep(Duration::from_millis(100));
    }

    let started = Instant::now();
    lsp.send(
        &json!({"jsonrpc": "2.0", "id": 4343, "method": "lode/ask", "params": {"question": "How often are staging certificates rotated?"}}),
    );
    std::thread::sleep(Duration::from_millis(800)); // the ask is with the model
    let note = vault.join("fresh.md");
    std::fs::write(&note, "# Fresh\n\nThe heron migration starts in early March.\n").unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&note)}}));
    loop {
        let pending = store.pending_vectors_of(&model, &["fresh.md".to_owned()], 10).unwrap();
        if store.note_exists("fresh.md").unwrap() && pending.is_empty() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(7), "the saved note waited for the model's answer to be embedded");
        std::thread::sleep(Duration::from_millis(50));
    }
    let a = lsp.response(json!(4343));
    assert!(started.elapsed() >= Duration::from_secs(8), "{a}");
    assert_eq!(a["result"]["abstained"], true, "the slow model proposed nothing: {a}");
}

/// A server on a copy of the example vault, its log in a file (warnings and up; `LODE_TEST_LOG`
/// takes a `LODE_LOG` filter, e.g. `lode_lsp=debug,lode_engine=debug,warn`); after the first scan.
fn logged_server() -> (tempfile::TempDir, PathBuf, PathBuf, Lsp) {
    logged_server_with(&std::env::var("LODE_TEST_LOG").unwrap_or("warn".into()))
}

/// [`logged_server`] with the `LODE_LOG` filter `filter`.
fn logged_server_with(filter: &str) -> (tempfile::TempDir, PathBuf, PathBuf, Lsp) {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let log = tmp.path().join("server.log");
    let mut lsp = Lsp(StdioClient::spawn_with(
        env!("CARGO_BIN_EXE_lode"),
        ["serve"],
        [("LODE_LOG", filter)],
        std::process::Stdio::from(std::fs::File::create(&log).unwrap()),
    )
    .unwrap());
    lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}}));
    lsp.notify("initialized", json!({}));
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    (tmp, vault, log, lsp)
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

/// An indexed copy of the example vault in `dir`, and a connection of "another process" that
/// holds its database exclusively (not even readers get in) until it rolls back and closes.
fn locked_vault(dir: &Path) -> (PathBuf, rusqlite::Connection) {
    let vault = example_vault(dir);
    index_lexical(&vault);
    let holder = rusqlite::Connection::open(vault.join(".lode/lode.db")).unwrap();
    holder
        .execute_batch("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS held(x); INSERT INTO held VALUES (1);")
        .unwrap();
    (vault, holder)
}

#[test]
fn opening_the_stores_never_blocks_the_message_loop() {
    let tmp = tempfile::tempdir().unwrap();
    // Another process holds the database exclusively: opening it waits for the busy timeout.
    let (vault, holder) = locked_vault(tmp.path());
    let mut lsp = Lsp::start();
    let _ = lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}}));
    lsp.notify("initialized", json!({}));
    // The stores are opening (and waiting) now; messages that need no store answer at once.
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let r = lsp.request("shutdown", json!(null));
    assert!(r.get("error").is_none(), "{r}");
    assert!(t.elapsed() < Duration::from_secs(2), "shutdown waited {:?} for the stores to open", t.elapsed());
    drop(holder);
}

/// A save while another process holds the database for writing longer than SQLite's busy
/// timeout: the save is not dropped but kept, shown on the note and in `lode/status`; a question
/// asked meanwhile is answered at once from what is committed and says which save it lacks; once
/// the lock goes the save lands by itself, and its diagnostic goes.
#[test]
fn a_save_while_another_process_locks_the_database_is_kept_shown_and_lands() {
    let (_tmp, vault, mut lsp) = setup();
    let _ = lsp.request("lode/status", json!(null)); // the stores are open
    let holder = rusqlite::Connection::open(vault.join(".lode/lode.db")).unwrap();
    holder.busy_timeout(Duration::from_secs(60)).unwrap(); // the vector thread may be writing
                                                           // A writer in another process (in WAL mode, readers go on; writers wait).
    holder.execute_batch("BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS held(x); INSERT INTO held VALUES (1);").unwrap();
    let n = vault.join("lemur.md");
    let u = uri(&n);
    let text = "# Lemur\n\nThe lemur audit runs every 23 days.\n";
    std::fs::write(&n, text).unwrap();
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": u, "languageId": "markdown", "version": 1, "text": text}}));
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": u}, "text": text}));
    // Past SQLite's busy timeout (5 s) the save is held, and the note says so.
    let d = diagnostics_of(&mut lsp, &u, |d| d.iter().any(|x| code(x) == "lode.save-not-indexed"));
    let msg = d.iter().find(|x| code(x) == "lode.save-not-indexed").unwrap()["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("locked") && msg.contains("retried"), "{msg}");
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["unsaved"][0]["path"], "lemur.md", "{st}");
    let t = Instant::now();
    let a = lsp.request("lode/ask", json!({"question": "How often does the lemur audit run?"}));
    assert!(t.elapsed() < Duration::from_secs(4), "the question waited {:?} for the lock", t.elapsed());
    let notice = a["result"]["notice"].as_str().unwrap_or_default();
    assert!(notice.contains("lemur.md") && notice.contains("not indexed yet"), "{a}");
    holder.execute_batch("ROLLBACK;").unwrap();
    drop(holder);
    // It lands by itself, and the note's diagnostic goes.
    answers_within(&mut lsp, "How often does the lemur audit run?", "every 23 days", true, "the held save never landed");
    diagnostics_of(&mut lsp, &u, |d| !d.iter().any(|x| code(x) == "lode.save-not-indexed"));
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["unsaved"], json!([]), "{st}");
}

/// A server started while another process holds the database locked (exclusively: not even
/// readers get in) says so once, answers requests meanwhile at once with why, and once the lock
/// goes scans and serves without a restart.
#[test]
fn a_server_started_under_another_process_lock_waits_says_so_and_starts_once_it_goes() {
    let tmp = tempfile::tempdir().unwrap();
    let (vault, holder) = locked_vault(tmp.path());
    let mut lsp = Lsp::start();
    lsp.request(
        "initialize",
        json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}, "workspaceFolders": [{"uri": uri(&vault), "name": "vault"}]}),
    );
    lsp.notify("initialized", json!({}));
    let locked = |m: &Value| m["method"] == "window/showMessage" && m["params"]["message"].as_str().is_some_and(|t| t.contains("locked"));
    let m = lsp.wait_for(locked);
    assert_eq!(m["params"]["type"], 2, "a warning, not an error: {m}");
    let t = Instant::now();
    let st = lsp.request("lode/status", json!(null));
    assert!(t.elapsed() < Duration::from_secs(2), "status waited {:?} for the lock", t.elapsed());
    assert!(st["error"]["message"].as_str().is_some_and(|m| m.contains("waiting") && m.contains("lock")), "{st}");
    std::thread::sleep(Duration::from_secs(3)); // a retry or two
    holder.execute_batch("ROLLBACK;").unwrap();
    drop(holder);
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    assert!(answers_with(&mut lsp, "How often are staging certificates rotated?", "60 days"));
    assert_eq!(lsp.0.seen.iter().filter(|m| locked(m)).count(), 0, "said once: {:?}", lsp.0.seen);
    let errors: Vec<&Value> = lsp.0.seen.iter().filter(|m| m["method"] == "window/showMessage" && m["params"]["type"] == 1).collect();
    assert!(errors.is_empty(), "no error was shown: {errors:?}");
}

/// The disk holding the vault and its index fills up under a running server (a small tmpfs in
/// this test's own mount namespace): a save is kept and shown as not indexed (the disk named
/// full), questions say so, and once space is freed the save lands by itself.
#[test]
fn a_save_on_a_full_disk_is_kept_shown_and_lands_once_space_is_freed() {
    let Some(disk) = lode_testing::private_tmpfs(12 << 20) else {
        eprintln!("skipped: mounting a small disk needs root (CAP_SYS_ADMIN)");
        return;
    };
    let vault = example_vault(&disk);
    index_lexical(&vault);
    let mut lsp = start_on(&vault, json!({}));
    let n = vault.join("okapi.md");
    let u = uri(&n);
    let text = "# Okapi\n\nThe okapi census is taken every 17 weeks.\n";
    std::fs::write(&n, text).unwrap();
    let filler = lode_testing::fill_disk(&disk);
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": u, "languageId": "markdown", "version": 1, "text": text}}));
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": u}, "text": text}));
    let d = diagnostics_of(&mut lsp, &u, |d| d.iter().any(|x| code(x) == "lode.save-not-indexed"));
    let msg = d.iter().find(|x| code(x) == "lode.save-not-indexed").unwrap()["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("is full") && msg.contains("bytes free"), "{msg}");
    let a = lsp.request("lode/ask", json!({"question": "How often is the okapi census taken?"}));
    assert!(a["result"]["notice"].as_str().is_some_and(|n| n.contains("okapi.md") && n.contains("not indexed yet")), "{a}");
    std::fs::remove_file(&filler).unwrap();
    answers_within(
        &mut lsp,
        "How often is the okapi census taken?",
        "every 17 weeks",
        true,
        "the held save never landed after space was freed",
    );
    diagnostics_of(&mut lsp, &u, |d| !d.iter().any(|x| code(x) == "lode.save-not-indexed"));
}

/// `lode index` running beside `lode serve` on one vault, both writing new notes at once (the
/// CLI a bulk import, the editor saves): neither fails a write (no "UNIQUE constraint failed",
/// no lock error), and every note of both is found afterwards.
#[test]
fn lode_index_beside_lode_serve_fails_no_write_of_either() {
    let (_tmp, vault, mut lsp) = setup();
    for i in 0..1500 {
        let body = format!("# Import {i}\n\nImported paragraph about quokka{i} and shared words.\n\n- item {i}\n");
        std::fs::write(vault.join(format!("import-{i:04}.md")), body).unwrap();
    }
    let cli = Command::new(env!("CARGO_BIN_EXE_lode"))
        .args(["index", "-q", "--no-vectors", "--vault"])
        .arg(&vault)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The editor saves new notes while the import runs, some of them notes the import also
    // writes (the same path claimed by both).
    for i in 0..60 {
        let (rel, text) = if i % 3 == 0 {
            let rel = format!("import-{:04}.md", 1499 - i);
            let text = format!("# Import {}\n\nEdited in the editor: wombat{i} paragraph.\n", 1499 - i);
            (rel, text)
        } else {
            (format!("saved-{i}.md"), format!("# Saved {i}\n\nA note about numbat{i} saved from the editor.\n"))
        };
        let n = vault.join(&rel);
        std::fs::write(&n, &text).unwrap();
        lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&n)}, "text": text}));
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = cli.wait_with_output().unwrap();
    assert!(out.status.success(), "lode index failed beside the server: {}", String::from_utf8_lossy(&out.stderr));
    let _ = lsp.request("lode/status", json!(null));
    let warned: Vec<&Value> = lsp.0.seen.iter().filter(|m| m["method"] == "window/showMessage" && m["params"]["type"] != 3).collect();
    assert!(warned.is_empty(), "the server failed a save: {warned:?}");
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["unsaved"], json!([]), "{st}");
    let search = |q: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["search", "--vault"]).arg(&vault).arg(q).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // The server may still be working through the saves it was sent.
    let t = Instant::now();
    while !search("numbat59").contains("saved-59.md") {
        assert!(t.elapsed() < Duration::from_secs(20), "an editor save is missing");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(search("quokka7").contains("import-0007.md"), "an imported note is missing");
    assert!(search("wombat57").contains("import-1442.md"), "an editor edit of an imported note is missing");
    let warned: Vec<&Value> = lsp.0.seen.iter().filter(|m| m["method"] == "window/showMessage" && m["params"]["type"] != 3).collect();
    assert!(warned.is_empty(), "the server failed a save: {warned:?}");
}

/// kill -9 of the server in bursts, each in the middle of a burst of saves (and its own scan):
/// after each restart the database checks whole, and once a server has scanned, every note on
/// disk is in the index — nothing an editor saved is lost.
#[test]
fn kill_9_in_bursts_loses_no_saved_note() {
    let (_tmp, vault, lsp) = setup();
    drop(lsp);
    let mut written = 0usize;
    for burst in 0..4 {
        let mut lsp = Lsp::start();
        lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}}));
        lsp.notify("initialized", json!({}));
        for i in 0..40 {
            let n = vault.join(format!("burst-{burst}-{i}.md"));
            let text = format!("# Burst {burst} note {i}\n\nSaved before a crash: capybara{burst}x{i}.\n");
            std::fs::write(&n, &text).unwrap();
            written += 1;
            lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&n)}, "text": text}));
            if i == 25 {
                lsp.0.child.kill().unwrap(); // SIGKILL, mid-burst: no clean-up runs
                break;
            }
        }
        let _ = lsp.0.child.wait();
        let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["stats", "--check", "--vault"]).arg(&vault).output().unwrap();
        assert!(o.status.success(), "burst {burst}: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    }
    let mut lsp = start_on(&vault, json!({}));
    let files = walk_md(&vault);
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(
        st["result"]["notes"].as_u64(),
        Some(files as u64),
        "every note on disk is indexed after the crashes ({written} written): {st}"
    );
    for (burst, i) in [(0, 0), (1, 13), (2, 25), (3, 7)] {
        let q = format!("capybara{burst}x{i}");
        let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["search", "--vault"]).arg(&vault).arg(&q).output().unwrap();
        assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("burst-{burst}-{i}.md")), "{q} lost");
    }
}

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

/// Markdown files under `dir`, outside hidden folders.
fn walk_md(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let p = e.path();
            let hidden = e.file_name().to_string_lossy().starts_with('.');
            if hidden {
                0
            } else if p.is_dir() {
                walk_md(&p)
            } else {
                usize::from(p.extension().is_some_and(|x| x == "md"))
            }
        })
        .sum()
}

/// Starts a server on `vault` with the given client capabilities; waits for the first scan.
fn start_on(vault: &Path, capabilities: Value) -> Lsp {
    let mut lsp = Lsp::start();
    lsp.request("initialize", json!({"processId": null, "rootUri": uri(vault), "capabilities": capabilities}));
    lsp.notify("initialized", json!({}));
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    lsp
}

/// Asks again every 200 ms until whether an answer contains `needle` is `expected` (20 s at most).
fn answers_within(lsp: &mut Lsp, question: &str, needle: &str, expected: bool, otherwise: &str) {
    let t = Instant::now();
    while answers_with(lsp, question, needle) != expected {
        assert!(t.elapsed() < Duration::from_secs(20), "{otherwise}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn answers_with(lsp: &mut Lsp, question: &str, needle: &str) -> bool {
    let a = lsp.request("lode/ask", json!({"question": question}));
    a["result"]["claims"].as_array().is_some_and(|c| c.iter().any(|c| c["text"].as_str().is_some_and(|t| t.contains(needle))))
}

#[test]
fn the_scan_never_commits_bytes_older_than_a_save() {
    // A vault big enough that the scan is still writing when the save lands; the saved note
    // sorts last, so a scan that read its bytes up front would write the old ones after the save.
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    for i in 0..3000 {
        std::fs::write(vault.join(format!("n{i:04}.md")), format!("# Note {i}\n\nFiller paragraph number {i} about nothing much.\n"))
            .unwrap();
    }
    let last = vault.join("zz-last.md");
    std::fs::write(&last, "# Last\n\nThe okapi census runs every 41 days.\n").unwrap();
    let mut lsp = Lsp::start();
    lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}}));
    lsp.notify("initialized", json!({}));
    // Once the scan writes (it has read every file, the last one's old bytes too).
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["message"].as_str().is_some_and(|t| t.starts_with("indexing")));
    let text = "# Last\n\nThe okapi census runs every 43 days.\n";
    std::fs::write(&last, text).unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&last)}, "text": text}));
    // Readers wait for the save only, not for the scan.
    let st = lsp.request("lode/status", json!(null));
    assert_eq!(st["result"]["scanning"], true, "the save was answered before the scan ended: {st}");
    let end = lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    let msg = end["params"]["value"]["message"].as_str().unwrap().to_owned();
    assert!(msg.starts_with("3001 notes"), "{msg}");
    assert!(answers_with(&mut lsp, "How often does the okapi census run?", "every 43 days"));
    assert!(!answers_with(&mut lsp, "How often does the okapi census run?", "every 41 days"));
    lsp.0.stop().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["stats", "--check", "--vault"]).arg(&vault).output().unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}

/// A vault holding one note, and a server on it that has scanned it.
fn one_note_vault(name: &str, text: &str) -> (tempfile::TempDir, PathBuf, PathBuf, Lsp) {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    let note = vault.join(name);
    std::fs::write(&note, text).unwrap();
    let lsp = start_on(&vault, json!({}));
    (tmp, vault, note, lsp)
}

#[test]
fn a_buffer_chunked_ahead_never_overrides_the_saved_bytes() {
    // The server chunks an open buffer while the user pauses. A save indexes the file's bytes:
    // the prepared chunking when they are the buffer's, else their own — never the buffer's.
    let (_tmp, vault, note, mut lsp) = one_note_vault("herd.md", "# Herd\n\nThe ibex count runs every 11 days.\n");
    let u = uri(&note);
    lsp.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": u, "languageId": "markdown", "version": 1,
        "text": "# Herd\n\nThe ibex count runs every 11 days.\n"}}),
    );
    // The editor's buffer becomes `typed` (version `v`); after a pause (chunked ahead), the file
    // holds `on_disk` and is saved.
    let type_and_save = |lsp: &mut Lsp, v: i32, typed: &str, on_disk: &str| {
        lsp.notify("textDocument/didChange", json!({"textDocument": {"uri": u, "version": v}, "contentChanges": [{"text": typed}]}));
        std::thread::sleep(Duration::from_millis(400));
        std::fs::write(&note, on_disk).unwrap();
        lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": u}}));
    };
    // 1. Saved as typed.
    let typed = "# Herd\n\nThe ibex count runs every 12 days.\n\n## Notes\n\nThe yak count runs every 5 days.\n";
    type_and_save(&mut lsp, 2, typed, typed);
    assert!(answers_with(&mut lsp, "How often does the yak count run?", "every 5 days"));
    // 2. The file on disk holds other bytes than the buffer (another program wrote it, or the
    //    editor saved with another encoding): those are indexed.
    let typed = "# Herd\n\nThe ibex count runs every 13 days.\n";
    type_and_save(&mut lsp, 3, typed, "\u{feff}# Herd\r\n\r\nThe ibex count runs every 14 days.\r\n");
    assert!(answers_with(&mut lsp, "How often does the ibex count run?", "every 14 days"));
    assert!(!answers_with(&mut lsp, "How often does the ibex count run?", "every 13 days"));
    // 3. Closed and reopened with the version numbers starting over: nothing of the old
    //    buffer is used for the new one.
    lsp.notify("textDocument/didClose", json!({"textDocument": {"uri": u}}));
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": u, "languageId": "markdown", "version": 1, "text": typed}}));
    let reopened = "# Herd\n\nThe ibex count runs every 15 days.\n";
    type_and_save(&mut lsp, 3, reopened, reopened);
    assert!(answers_with(&mut lsp, "How often does the ibex count run?", "every 15 days"));
    lsp.0.stop().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["stats", "--check", "--vault"]).arg(&vault).output().unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    // A fresh index of the files agrees with what the saves left.
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["index", "--no-vectors", "--json", "--vault"]).arg(&vault).output().unwrap();
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((report["created"].as_u64(), report["updated"].as_u64()), (Some(0), Some(0)), "{report}");
}

#[test]
fn a_burst_of_saves_refreshes_open_diagnostics_once_it_ends() {
    // Diagnostics of open documents are published again after writes, once the writes pause:
    // the requests that follow a save are answered first, and a burst costs one refresh.
    let (_tmp, vault, note, mut lsp) = one_note_vault("tapir.md", "# Tapir\n\nThe tapir feeds at dawn.\n");
    let a = lsp.request("lode/ask", json!({"question": "When does the tapir feed?"}));
    let c = &a["result"]["claims"][0]["citations"][0];
    let (vid, s, e) = (c["version_id"].as_str().unwrap().to_owned(), c["start"].as_u64().unwrap(), c["end"].as_u64().unwrap());
    let citing = vault.join("citing.md");
    let d = uri(&citing);
    lsp.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": d, "languageId": "markdown", "version": 1,
        "text": format!("- The tapir feeds at dawn [tapir.md:3](tapir.md#L3 \"lode {vid}:{s}-{e}\")\n")}}),
    );
    let first = diagnostics_of(&mut lsp, &d, |_| true);
    assert!(first.iter().all(|x| code(x) != "lode.drifted"), "{first:?}");
    lsp.0.seen.clear();
    // Ten saves back to back; the last one drops the quoted sentence.
    for i in 0..10 {
        let text = if i < 9 {
            format!("# Tapir\n\nThe tapir feeds at dawn.\n\nSeen {i} times.\n")
        } else {
            "# Tapir\n\nThe tapir feeds at dusk.\n".to_owned()
        };
        std::fs::write(&note, text).unwrap();
        lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&note)}}));
    }
    let after = diagnostics_of(&mut lsp, &d, |ds| ds.iter().any(|x| code(x) == "lode.drifted"));
    assert_eq!(after.iter().filter(|x| code(x) == "lode.drifted").count(), 1, "{after:?}");
    std::thread::sleep(Duration::from_millis(500));
    lsp.request("lode/status", json!(null));
    let refreshes =
        1 + lsp.0.seen.iter().filter(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == d.as_str()).count();
    assert!(refreshes <= 5, "{refreshes} refreshes for a burst of 10 saves");
}

#[test]
fn each_citation_gets_its_own_diagnostic_when_several_cite_one_version() {
    // Citations of one span, of two spans of one version, and of an unknown version, each
    // twice or more: every one is judged and reported at its own line (the server judges a
    // span once per publication and reads each version once).
    let text = "# Tapir\n\nThe tapir feeds at dawn.\n\nIt sleeps in mud.\n";
    let (_tmp, vault, note, mut lsp) = one_note_vault("tapir.md", text);
    let a = lsp.request("lode/ask", json!({"question": "When does the tapir feed?"}));
    let c = &a["result"]["claims"][0]["citations"][0];
    let (vid, s, e) = (c["version_id"].as_str().unwrap().to_owned(), c["start"].as_u64().unwrap(), c["end"].as_u64().unwrap());
    assert_eq!(&text[s as usize..e as usize], "The tapir feeds at dawn.", "{a}");
    let mud = text.find("It sleeps in mud.").unwrap();
    let unknown = "0".repeat(64);
    let link = |v: &str, a: usize, b: usize| format!("[tapir.md:3](tapir.md#L3 \"lode {v}:{a}-{b}\")");
    let cited = [
        link(&vid, s as usize, e as usize),
        link(&vid, s as usize, e as usize),
        link(&vid, mud, mud + "It sleeps in mud.".len()),
        link(&unknown, 0, 5),
        link(&unknown, 0, 5),
    ];
    let doc: String = cited.iter().enumerate().map(|(i, l)| format!("- claim {i} {l}\n")).collect();
    let d = uri(&vault.join("citing.md"));
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": d, "languageId": "markdown", "version": 1, "text": doc}}));
    // The note changes: the first quote drifts, the second is still there.
    std::fs::write(&note, "# Tapir\n\nThe tapir feeds at dusk.\n\nIt sleeps in mud.\n").unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&note)}}));
    let ds = diagnostics_of(&mut lsp, &d, |ds| ds.iter().any(|x| code(x) == "lode.drifted"));
    let mut by_line: Vec<(u64, String)> = ds.iter().map(|x| (x["range"]["start"]["line"].as_u64().unwrap(), code(x).to_owned())).collect();
    by_line.sort();
    let want: Vec<(u64, String)> =
        [(0, "lode.drifted"), (1, "lode.drifted"), (2, "lode.older-version"), (3, "lode.unknown-version"), (4, "lode.unknown-version")]
            .into_iter()
            .map(|(l, c)| (l, c.to_owned()))
            .collect();
    assert_eq!(by_line, want, "{ds:?}");
    // Each range is its own link's, not the first one's.
    for x in &ds {
        let line = x["range"]["start"]["line"].as_u64().unwrap() as usize;
        let col = x["range"]["start"]["character"].as_u64().unwrap() as usize;
        assert_eq!(col, format!("- claim {line} ").len(), "{x}");
    }
}

#[test]
fn folder_renames_deletes_and_checkouts_reach_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    std::fs::create_dir_all(vault.join("zoo")).unwrap();
    std::fs::write(vault.join("zoo/tapir.md"), "# Tapir\n\nThe tapir survey runs every 29 days.\n").unwrap();
    std::fs::create_dir_all(vault.join("attic")).unwrap();
    std::fs::write(vault.join("attic/dodo.md"), "# Dodo\n\nThe dodo review runs every 31 days.\n").unwrap();
    let caps = json!({"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": true}}});
    let mut lsp = start_on(&vault, caps);
    let reg = lsp.0.seen.iter().find(|m| m["method"] == "client/registerCapability").cloned().expect("watchers registered");
    let globs = reg["params"]["registrations"][0]["registerOptions"]["watchers"].to_string();
    assert!(globs.contains("**/*.{md,markdown}") && globs.contains(".gitignore"), "{globs}");
    let notes = |lsp: &mut Lsp| lsp.request("lode/status", json!(null))["result"]["notes"].as_u64().unwrap();
    let before = notes(&mut lsp);

    // A folder renamed: the editor reports the folders only. The note keeps its history.
    std::fs::rename(vault.join("zoo"), vault.join("park")).unwrap();
    lsp.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [
        {"uri": uri(&vault.join("zoo")), "type": 3}, {"uri": uri(&vault.join("park")), "type": 1}]}),
    );
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["token"] != "lode/scan/0" && m["params"]["value"]["kind"] == "end");
    let a = lsp.request("lode/ask", json!({"question": "How often does the tapir survey run?"}));
    assert_eq!(a["result"]["claims"][0]["citations"][0]["path"], "park/tapir.md", "{a}");
    assert_eq!(notes(&mut lsp), before);

    // A folder deleted.
    std::fs::remove_dir_all(vault.join("attic")).unwrap();
    lsp.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": uri(&vault.join("attic")), "type": 3}]}));
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["token"] == "lode/scan/2" && m["params"]["value"]["kind"] == "end");
    assert!(!answers_with(&mut lsp, "How often does the dodo review run?", "every 31 days"));
    assert_eq!(notes(&mut lsp), before - 1);

    // An open note changed on disk (a checkout): the index follows the disk, not the buffer.
    let n = vault.join("park/tapir.md");
    lsp.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri(&n), "languageId": "markdown", "version": 1,
        "text": "# Tapir\n\nThe tapir survey runs every 29 days.\n"}}),
    );
    std::fs::write(&n, "# Tapir\n\nThe tapir survey runs every 37 days.\n").unwrap();
    lsp.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": uri(&n), "type": 2}]}));
    assert!(answers_with(&mut lsp, "How often does the tapir survey run?", "every 37 days"));

    // A folder newly gitignored: its notes leave the index.
    std::fs::write(vault.join(".gitignore"), "park/\n").unwrap();
    lsp.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": uri(&vault.join(".gitignore")), "type": 1}]}));
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["token"] == "lode/scan/3" && m["params"]["value"]["kind"] == "end");
    assert!(!answers_with(&mut lsp, "How often does the tapir survey run?", "every 37 days"));
    let store = lode_store::Store::open(&vault.join(".lode/lode.db"), Default::default()).unwrap();
    assert_eq!(store.history("park/tapir.md").unwrap().len(), 2, "the renamed note kept its first version");
}

#[test]
fn without_client_watchers_the_server_watches_the_vault_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let mut lsp = start_on(&vault, json!({}));
    assert!(!lsp.0.seen.iter().any(|m| m["method"] == "client/registerCapability"));
    // Changed outside the editor, no event from the client.
    std::fs::write(vault.join("gnu.md"), "# Gnu\n\nThe gnu migration count runs every 53 days.\n").unwrap();
    answers_within(
        &mut lsp,
        "How often does the gnu migration count run?",
        "every 53 days",
        true,
        "the server did not pick up the new note",
    );
    std::fs::remove_file(vault.join("gnu.md")).unwrap();
    answers_within(
        &mut lsp,
        "How often does the gnu migration count run?",
        "every 53 days",
        false,
        "the server did not notice the deletion",
    );
}

/// The server's own watcher leaves lode's own folder alone: the store's log is written many
/// times a second while a scan or a burst of saves runs, and each write came back as a file
/// event, and each burst of them as a writer job that cut the scan's batch short.
#[test]
fn the_servers_own_watcher_ignores_the_stores_writes() {
    let (_tmp, vault, log, mut lsp) = logged_server_with("lode_lsp=debug,lode_engine=debug,warn");
    // Saves write the store (and its log) while the watcher runs; each is seen by the next ask.
    let buffer = vault.join("okapi.md");
    for i in 0..20 {
        lsp.notify(
            "textDocument/didSave",
            json!({"textDocument": {"uri": uri(&buffer)}, "text": format!("# Okapi\n\nThe okapi census counted {i} calves.\n")}),
        );
        lsp.request("lode/status", json!(null));
    }
    assert!(answers_with(&mut lsp, "How many calves did the okapi census count?", "19 calves"));
    // A note written on disk still arrives through the same watcher.
    std::fs::write(vault.join("gnu.md"), "# Gnu\n\nThe gnu migration count runs every 53 days.\n").unwrap();
    answers_within(
        &mut lsp,
        "How often does the gnu migration count run?",
        "every 53 days",
        true,
        "the server did not pick up the new note",
    );
    std::thread::sleep(Duration::from_millis(500));
    let logged = std::fs::read_to_string(&log).unwrap();
    let events: Vec<&str> = logged.lines().filter(|l| l.contains("file event: ")).collect();
    assert!(events.iter().any(|l| l.ends_with("gnu.md")), "the note's event is logged:\n{logged}");
    let own: Vec<&&str> = events.iter().filter(|l| l.contains("/.lode")).collect();
    assert!(own.is_empty(), "events for the store's own files:\n{}", own.iter().map(|l| **l).collect::<Vec<_>>().join("\n"));
}

/// No watcher at all (the client registers none, and the server's own cannot start, as at
/// Linux's inotify limit): the user is told, and changes on disk still arrive by rescans.
#[test]
fn without_any_watcher_the_vault_is_rescanned_and_the_user_told() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let env = [("LODE_FAULT", "watch"), ("LODE_RESCAN_SECS", "1")];
    let mut lsp = Lsp(StdioClient::spawn_env(env!("CARGO_BIN_EXE_lode"), ["serve"], env).unwrap());
    let _ = lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}}));
    lsp.notify("initialized", json!({}));
    let told = lsp
        .wait_for(|m| m["method"] == "window/showMessage" && m["params"]["message"].as_str().is_some_and(|t| t.contains("cannot watch")));
    assert!(told["params"]["message"].as_str().unwrap().contains("scan every 1 s"), "{told}");
    std::fs::write(vault.join("gnu.md"), "# Gnu\n\nThe gnu migration count runs every 53 days.\n").unwrap();
    answers_within(&mut lsp, "How often does the gnu migration count run?", "every 53 days", true, "no rescan picked up the new note");
}

/// The soak, short version (the long one: `LODE_SOAK_SECS=600`): rounds of pipelined asks,
/// hovers, symbol queries and status requests in flight at once, edits and saves of an open
/// note, and file storms on disk (notes created, rewritten, deleted, a folder renamed) seen
/// by the server's own watcher and by client events. Every round checks that the note saved
/// in it is answerable; at the end nothing panicked and `lode stats --check` is clean.
#[test]
fn soak_concurrent_requests_saves_and_file_storms() {
    let secs: u64 = std::env::var("LODE_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(15);
    let (_tmp, vault, log, mut lsp) = logged_server();

    // An open note with a citation to hover.
    let hit = lsp.request("lode/ask", json!({"question": "How often are staging certificates rotated?"}));
    let cit = &hit["result"]["claims"][0]["citations"][0];
    let link = lode_core::citation::render(
        "soak.md",
        cit["path"].as_str().unwrap(),
        1,
        cit["version_id"].as_str().unwrap(),
        cit["start"].as_u64().unwrap() as usize..cit["end"].as_u64().unwrap() as usize,
    );
    let open = vault.join("soak.md");
    let mut version = 1;
    let head = format!("# Soak\n\n- rotated {link}\n");
    std::fs::write(&open, &head).unwrap();
    lsp.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri(&open), "languageId": "markdown", "version": version, "text": head}}),
    );
    let hover_at = json!({"textDocument": {"uri": uri(&open)}, "position": {"line": 2, "character": head.lines().nth(2).unwrap().find("](").unwrap()}});

    let words = ["aardvark", "bison", "caracal", "dingo", "eland", "fossa", "gerenuk", "hyrax", "impala", "jerboa"];
    let started = Instant::now();
    let mut round = 0usize;
    let mut next_id = 10_000;
    while started.elapsed() < Duration::from_secs(secs) {
        round += 1;
        let word = words[round % words.len()];
        // File storm: a folder of notes created, rewritten, some deleted, and the folder renamed
        // every few rounds; half of the events are also reported by the client.
        let storm = vault.join(format!("storm-{}", round % 3));
        std::fs::create_dir_all(&storm).unwrap();
        let mut events = Vec::new();
        for i in 0..12 {
            let p = storm.join(format!("s{i}.md"));
            std::fs::write(&p, format!("# Storm {i}\n\nRound {round} wrote note {i} about the {word}.\n")).unwrap();
            events.push(json!({"uri": uri(&p), "type": 2}));
        }
        for i in (0..12).step_by(4) {
            let p = storm.join(format!("s{i}.md"));
            std::fs::remove_file(&p).unwrap();
            events.push(json!({"uri": uri(&p), "type": 3}));
        }
        if round.is_multiple_of(4) {
            let moved = vault.join(format!("moved-{round}"));
            std::fs::rename(&storm, &moved).unwrap();
            events.push(json!({"uri": uri(&storm), "type": 3}));
            events.push(json!({"uri": uri(&moved), "type": 1}));
        }
        if round.is_multiple_of(2) {
            lsp.notify("workspace/didChangeWatchedFiles", json!({"changes": events}));
        }
        // Edit and save the open note with this round's fact.
        version += 1;
        let fact = format!("The {word} tally for round {round} is {} units.\n", round * 7);
        let text = format!("{head}\n{fact}");
        lsp.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri(&open), "version": version}, "contentChanges": [{"text": text}]}),
        );
        std::fs::write(&open, &text).unwrap();
        lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&open)}}));
        // Many requests in flight at once.
        let mut ids = Vec::new();
        for k in 0..16 {
            next_id += 1;
            let query = ["Storm", "Soak", "st", "Incident"][k / 4];
            let (method, params) = match k % 4 {
                0 => ("lode/ask", json!({"question": format!("What is the {word} tally for round {round}?")})),
                1 => ("textDocument/hover", hover_at.clone()),
                2 => ("workspace/symbol", json!({"query": query})),
                _ => ("lode/status", json!(null)),
            };
            lsp.send(&json!({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}));
            ids.push((next_id, method));
        }
        for (id, method) in ids {
            let r = lsp.response(json!(id));
            assert!(r.get("result").is_some(), "round {round}: {method} failed: {r}");
            match method {
                "lode/ask" if !r["result"]["claims"].to_string().contains(&format!("{} units", round * 7)) => {
                    // Told apart for whoever reads the failure: an answer that comes a little
                    // later (ordering or visibility) or never (indexing or ranking). The vault
                    // and the server log are kept.
                    std::thread::sleep(Duration::from_secs(3));
                    let again = lsp.request("lode/ask", json!({"question": format!("What is the {word} tally for round {round}?")}));
                    let later = again["result"]["claims"].to_string().contains(&format!("{} units", round * 7));
                    let kept = _tmp.path().to_path_buf();
                    std::mem::forget(_tmp);
                    panic!(
                        "round {round}: the saved fact is not answerable ({} 3 s later; vault and log kept in {kept:?}): {r}",
                        if later { "but is" } else { "nor" }
                    );
                }
                "textDocument/hover" => {
                    assert!(r["result"]["contents"]["value"].as_str().is_some_and(|v| v.contains("every 60 days")), "{r}")
                }
                _ => {}
            }
        }
    }
    assert!(round >= 3, "only {round} rounds");
    // Quiet again (the watcher's last events handled, no rescan running, the writer drained):
    // the index matches the disk.
    let quiet = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let _ = lsp.request("workspace/symbol", json!({"query": "storm"})); // waits for queued saves
        let st = lsp.request("lode/status", json!(null));
        if st["result"]["scanning"] == false {
            break;
        }
        assert!(quiet.elapsed() < Duration::from_secs(60), "the server never went quiet: {st}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let _ = lsp.request("workspace/symbol", json!({"query": "storm"}));
    let st = lsp.request("lode/status", json!(null));
    assert!(st["result"]["notes"].as_u64().unwrap() > 13, "{st}");
    lsp.0.stop().unwrap();
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(!log_text.contains("panicked"), "{log_text}");
    // Nor did the exit fail an embedding in progress, nor report to a client that had gone.
    assert!(!log_text.contains("embedding failed") && !log_text.contains("failed to send"), "{log_text}");
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["stats", "--check", "--vault"]).arg(&vault).output().unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    // And a fresh scan finds nothing the live index missed.
    let o = Command::new(env!("CARGO_BIN_EXE_lode"))
        .args(["index", "--no-vectors", "--json", "--quiet", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!((r["created"].as_u64(), r["updated"].as_u64(), r["deleted"].as_u64()), (Some(0), Some(0), Some(0)), "{r}");
    eprintln!("soak: {round} rounds in {:?}", started.elapsed());
}

/// A `file://` URI with everything but unreserved characters and `/` percent-encoded, as
/// editors send them.
fn encoded_uri(p: &Path) -> String {
    let mut out = String::from("file://");
    for b in p.display().to_string().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Applies LSP text edits (UTF-16 positions) to a text, as a client does.
fn apply_edits(text: &str, edits: &[Value]) -> String {
    let offset = |pos: &Value| {
        let (line, ch) = (pos["line"].as_u64().unwrap() as usize, pos["character"].as_u64().unwrap() as usize);
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        let mut units = 0;
        for (i, c) in text[start..].char_indices() {
            if units >= ch || c == '\n' {
                return start + i;
            }
            units += c.len_utf16();
        }
        text.len()
    };
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| (offset(&e["range"]["start"]), offset(&e["range"]["end"]), e["newText"].as_str().unwrap().to_owned()))
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_owned();
    for (s, e, t) in spans {
        out.replace_range(s..e, &t);
    }
    out
}

#[test]
fn renames_applied_by_the_client_leave_no_broken_link() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nav-vault"), &vault);
    let (files, _) = lode_store::vault::walk(&vault);
    for f in &files {
        // The fixture's `‸N` cursor markers are not part of the notes.
        let text = std::fs::read_to_string(f).unwrap();
        let clean: String =
            text.split('‸').enumerate().map(|(i, p)| if i == 0 { p } else { p.trim_start_matches(|c: char| c.is_ascii_digit()) }).collect();
        std::fs::write(f, clean).unwrap();
    }
    let mut lsp = start_on(&vault, json!({"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": true}}}));
    let broken = |lsp: &mut Lsp| -> Vec<String> {
        let (files, _) = lode_store::vault::walk(&vault);
        let mut out = Vec::new();
        for f in files {
            let rel = lode_store::vault::relative_path(&vault, &f).unwrap();
            let u = encoded_uri(&f);
            let text = std::fs::read_to_string(&f).unwrap();
            lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": u, "languageId": "markdown", "version": 1, "text": text}}));
            let d = lsp.wait_for(|m| {
                m["method"] == "textDocument/publishDiagnostics"
                    && m["params"]["uri"].as_str().map(lode_core::nav::percent_decode) == Some(uri(&f))
            });
            for x in d["params"]["diagnostics"].as_array().unwrap() {
                let code = x["code"].as_str().unwrap_or("");
                if code == "lode.broken-link" || code == "lode.broken-heading" {
                    out.push(format!("{rel}: {}", x["message"].as_str().unwrap()));
                }
            }
            lsp.notify("textDocument/didClose", json!({"textDocument": {"uri": u}}));
            lsp.0.seen.clear();
        }
        out.sort();
        out
    };
    let before = broken(&mut lsp);
    assert_eq!(before.len(), 2, "the fixture's two deliberate broken links: {before:?}");
    let apply = |lsp: &mut Lsp, edit: &Value| {
        let mut changed = Vec::new();
        for (u, edits) in edit["changes"].as_object().unwrap() {
            let path = PathBuf::from(lode_core::nav::percent_decode(u.strip_prefix("file://").unwrap()));
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, apply_edits(&text, edits.as_array().unwrap())).unwrap();
            changed.push(json!({"uri": u, "type": 2}));
        }
        lsp.notify("workspace/didChangeWatchedFiles", json!({"changes": changed}));
    };

    // A heading renamed: the heading and every link to it.
    let garden = vault.join("garden.md");
    let text = std::fs::read_to_string(&garden).unwrap();
    lsp.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri(&garden), "languageId": "markdown", "version": 1, "text": text}}),
    );
    let at = json!({"textDocument": {"uri": uri(&garden)}, "position": {"line": 2, "character": 5}});
    let prep = lsp.request("textDocument/prepareRename", at.clone());
    assert_eq!(prep["result"]["placeholder"], "Tomatoes", "{prep}");
    let mut p = at.clone();
    p["newName"] = json!("Red tomatoes");
    let edit = lsp.request("textDocument/rename", p);
    lsp.notify("textDocument/didClose", json!({"textDocument": {"uri": uri(&garden)}}));
    apply(&mut lsp, &edit["result"]);
    assert!(std::fs::read_to_string(vault.join("index.md")).unwrap().contains("[[garden#Red tomatoes|the tomatoes]]"));
    assert!(std::fs::read_to_string(vault.join("guides/Guide One.md")).unwrap().contains("(../garden.md#red-tomatoes)"));

    // A note file renamed: every link to it follows.
    let (old, new) = (vault.join("guides/Guide One.md"), vault.join("guides/Guide Two.md"));
    let edit = lsp.request("workspace/willRenameFiles", json!({"files": [{"oldUri": encoded_uri(&old), "newUri": encoded_uri(&new)}]}));
    apply(&mut lsp, &edit["result"]);
    std::fs::rename(&old, &new).unwrap();
    lsp.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [
        {"uri": encoded_uri(&old), "type": 3}, {"uri": encoded_uri(&new), "type": 1}]}),
    );
    let _ = lsp.request("workspace/symbol", json!({"query": "x"})); // waits for the indexing of the events
    assert_eq!(broken(&mut lsp), before, "no link broke");
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["stats", "--check", "--vault"]).arg(&vault).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
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

/// Runs `lode` with `args` on `vault`; stdout, and whether it succeeded.
fn lode_cli(vault: &Path, args: &[&str]) -> (String, bool) {
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(args).arg("--vault").arg(vault).output().unwrap();
    (String::from_utf8_lossy(&o.stdout).into_owned(), o.status.success())
}

fn diagnostics_of(lsp: &mut Lsp, doc: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let m = lsp.wait_for(|m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == doc
            && m["params"]["diagnostics"].as_array().is_some_and(|d| pred(d))
    });
    m["params"]["diagnostics"].as_array().unwrap().clone()
}

fn code(d: &Value) -> &str {
    d["code"].as_str().unwrap_or("")
}

#[test]
fn external_links_get_snapshot_diagnostics_a_mirror_action_hover_and_cited_answers() {
    use lode_testing::web::{Reply, Site};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let changes = std::sync::Arc::new(AtomicUsize::new(0));
    let version = changes.clone();
    let site = Site::start(Box::new(move |path: &str| match path {
        "/pool" => {
            let size = if version.load(Ordering::SeqCst) == 0 { 40 } else { 75 };
            Reply::html(&format!("<h1>Heron pool</h1><p>The heron pool allows {size} server connections.</p>"))
        }
        "/old" => Reply::html("<h1>Old page</h1><p>Archived text.</p>"),
        "/later" => Reply::html("<h1>Later</h1><p>The kestrel queue drains nightly.</p>"),
        _ => Reply::typed(404, "text/html", b"<h1>Not found</h1>"),
    }));
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), "[models]\nembedder = \"\"\n\n[externals]\nallow_loopback = true\nstale_days = 30\n")
        .unwrap();
    approve(&vault);
    let (pool, old, later, gone) = (site.url("/pool"), site.url("/old"), site.url("/later"), site.url("/gone"));
    let links = format!("# Links\n\n- [pool]({pool}#limits)\n- [old]({old})\n- [later]({later})\n- [gone]({gone})\n");
    std::fs::write(vault.join("links.md"), &links).unwrap();
    index_lexical(&vault);
    let (out, ok) = lode_cli(&vault, &["externals", "refresh", &pool, &old, &gone]);
    assert!(!ok, "a failed fetch fails the command: {out}");
    // Age the snapshot of /old past the threshold.
    let db = rusqlite::Connection::open(vault.join(".lode/lode.db")).unwrap();
    db.execute("UPDATE snapshots SET seen_at = seen_at - 40 * 86400000, fetched_at = fetched_at - 40 * 86400000 WHERE external_id = (SELECT id FROM externals WHERE url = ?1)", [&old]).unwrap();
    drop(db);

    let mut lsp = start_on(&vault, json!({}));
    let doc = uri(&vault.join("links.md"));
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": doc, "languageId": "markdown", "version": 1, "text": links}}));
    let diags = diagnostics_of(&mut lsp, &doc, |d| d.len() >= 3);
    let by_line: std::collections::BTreeMap<u64, &str> =
        diags.iter().map(|d| (d["range"]["start"]["line"].as_u64().unwrap(), code(d))).collect();
    assert_eq!(
        by_line.into_iter().collect::<Vec<_>>(),
        [(3, "lode.snapshot-stale"), (4, "lode.snapshot-missing"), (5, "lode.snapshot-failed")],
        "fresh /pool has none: {diags:?}"
    );
    let failed = diags.iter().find(|d| code(d) == "lode.snapshot-failed").unwrap();
    assert!(failed["message"].as_str().unwrap().contains("404"), "{failed}");
    assert_eq!(diags.iter().find(|d| code(d) == "lode.snapshot-missing").unwrap()["severity"], 4, "a hint");

    // The hint's quick fix mirrors the link; the hint goes away.
    let missing = diags.iter().find(|d| code(d) == "lode.snapshot-missing").unwrap().clone();
    let actions = lsp.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": doc}, "range": missing["range"], "context": {"diagnostics": [missing]}}),
    );
    let mirror = actions["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"] == "Mirror this link")
        .unwrap_or_else(|| panic!("{actions}"))
        .clone();
    let done = lsp.request("workspace/executeCommand", mirror["command"].clone());
    assert_eq!(done["result"]["ok"], true, "{done}");
    diagnostics_of(&mut lsp, &doc, |d| d.len() == 2 && d.iter().all(|x| code(x) != "lode.snapshot-missing"));
    let stale = diags.iter().find(|d| code(d) == "lode.snapshot-stale").unwrap().clone();
    let actions = lsp.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": doc}, "range": stale["range"], "context": {"diagnostics": [stale]}}),
    );
    assert!(actions["result"].as_array().unwrap().iter().any(|a| a["title"] == "Refresh snapshot" && a["kind"] == "quickfix"), "{actions}");

    // Hover on the fresh link: its age and first lines.
    let h = lsp.request("textDocument/hover", json!({"textDocument": {"uri": doc}, "position": {"line": 2, "character": 4}}));
    let shown = h["result"]["contents"]["value"].as_str().unwrap_or_default();
    assert!(shown.contains("snapshot fetched") && shown.contains("heron pool allows 40"), "{h}");

    // A question answered from the snapshot cites it, pinned to the snapshot's bytes.
    let a = lsp.request("lode/ask", json!({"question": "How many server connections does the heron pool allow?"}));
    let cit = a["result"]["claims"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["citations"].as_array().cloned().unwrap_or_default())
        .find(|c| c["kind"] == "snapshot")
        .unwrap_or_else(|| panic!("no claim cites the snapshot: {a}"));
    assert_eq!((cit["kind"].as_str(), cit["url"].as_str()), (Some("snapshot"), Some(pool.as_str())), "{a}");
    assert!(cit["quoted_span"].as_str().unwrap().contains("40 server connections"));
    let link = lode_core::citation::render(
        "answers.md",
        &pool,
        cit["line"].as_u64().unwrap() as usize,
        cit["version_id"].as_str().unwrap(),
        cit["start"].as_u64().unwrap() as usize..cit["end"].as_u64().unwrap() as usize,
    );
    assert!(link.contains(&format!("]({pool} \"lode ")), "{link}");
    let answers = format!("- The pool allows 40 connections {link}\n");
    let a_uri = uri(&vault.join("answers.md"));
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": a_uri, "languageId": "markdown", "version": 1, "text": answers}}));
    let at = json!({"textDocument": {"uri": a_uri}, "position": {"line": 0, "character": answers.find("](").unwrap()}});
    let h = lsp.request("textDocument/hover", at.clone());
    assert!(
        h["result"]["contents"]["value"]
            .as_str()
            .is_some_and(|v| v.contains("40 server connections") && v.contains("snapshot's current version")),
        "{h}"
    );
    let g = lsp.request("textDocument/definition", at.clone());
    let target = g["result"]["uri"].as_str().unwrap_or_default().to_owned();
    assert!(target.contains("/lode/versions/") && !target.contains("/.lode/"), "a snapshot opens materialized, read-only: {g}");

    // The page changes; refreshed, the old quote has drifted.
    changes.store(1, Ordering::SeqCst);
    let (out, ok) = lode_cli(&vault, &["externals", "refresh", &pool]);
    assert!(ok && out.contains("new snapshot"), "{out}");
    lsp.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": a_uri, "version": 2}, "contentChanges": [{"text": answers.clone()}]}),
    );
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": a_uri}, "text": answers}));
    let d = diagnostics_of(&mut lsp, &a_uri, |d| d.iter().any(|x| code(x) == "lode.drifted"));
    assert!(d[0]["message"].as_str().unwrap().contains(&pool), "{d:?}");
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

/// Two quick saves of one note, the second written to disk before the first `didSave` is
/// handled: both saved texts are versions in the note's history (the first from the text the
/// editor acknowledged), and the head is what the file holds.
#[test]
fn two_quick_saves_keep_both_acknowledged_versions() {
    let (_tmp, vault, note, mut lsp) = one_note_vault("quick.md", "# Quick\n\nFirst draft.\n");
    let u = uri(&note);
    let one = "# Quick\n\nSaved once: the pool size is 40.\n";
    let two = "# Quick\n\nSaved twice: the pool size is 60.\n";
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": u, "languageId": "markdown", "version": 1, "text": one}}));
    // The editor wrote both saves before the server got to the first one.
    std::fs::write(&note, one).unwrap();
    std::fs::write(&note, two).unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": u}, "text": one}));
    lsp.notify("textDocument/didChange", json!({"textDocument": {"uri": u, "version": 2}, "contentChanges": [{"text": two}]}));
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": u}, "text": two}));
    assert!(answers_with(&mut lsp, "What is the pool size?", "60"), "the head is the last save");
    drop(lsp);
    let c = rusqlite::Connection::open(vault.join(".lode/lode.db")).unwrap();
    let bodies: Vec<String> = c
        .prepare("SELECT v.body FROM note_versions nv JOIN versions v ON v.id = nv.version_id WHERE nv.path = 'quick.md' ORDER BY nv.seq")
        .unwrap()
        .query_map([], |r| r.get::<_, Vec<u8>>(0))
        .unwrap()
        .map(|b| String::from_utf8(b.unwrap()).unwrap())
        .collect();
    assert!(bodies.iter().any(|b| b == one), "the first acknowledged save is lost from the history: {bodies:?}");
    assert_eq!(bodies.last().map(String::as_str), Some(two), "{bodies:?}");
}
