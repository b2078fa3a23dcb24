//! In-process protocol tests: the real service (`lode_lsp::build`) driven through tower, with
//! markdown fixtures in `fixtures/lsp/`. `$0` marks the cursor; `{{cite:PATH|QUOTE}}` becomes a
//! real citation link to the current version of PATH at QUOTE. Expectations are snapshots.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use expect_test::{expect, Expect};
use futures::{SinkExt, StreamExt};
use lode_answer::egress::EgressRules;
use lode_answer::{AskConfig, Synthesizer};
use lode_lsp::Settings;
use lode_store::vault::{index_vault, IndexOptions};
use lode_store::{Store, StoreOptions};
use serde_json::{json, Value};
use tower::{Service, ServiceExt};
use tower_lsp_server::jsonrpc::{Request, Response};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

use lode_testing::copy_dir;

struct Harness {
    _tmp: tempfile::TempDir,
    vault: PathBuf,
    service: tower_lsp_server::LspService<lode_lsp::Backend>,
    next: i64,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Harness {
    async fn new() -> Harness {
        let tmp = tempfile::tempdir().unwrap();
        let vault = tmp.path().join("vault");
        copy_dir(&root().join("fixtures/vault"), &vault);
        let db = vault.join(".lode/lode.db");
        // Index before the server starts, so the fixtures' citations resolve.
        let mut store = Store::open(&db, StoreOptions::default()).unwrap();
        index_vault(&mut store, &vault, &IndexOptions::default(), |_| {}).unwrap();
        drop(store);
        let settings: lode_lsp::SettingsFn = Arc::new(move |root: &Path| {
            Ok(Settings {
                db: root.join(".lode/lode.db"),
                store: StoreOptions::default(),
                index: IndexOptions::default(),
                ask: AskConfig::default(),
                rules: EgressRules::default(),
                synthesizer: Synthesizer::Extractive,
                vectors: None,
            })
        });
        let (service, socket) = lode_lsp::build(settings, Some(vault.clone()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            let (mut rx, mut tx) = socket.split();
            while let Some(req) = rx.next().await {
                log.lock().unwrap().push(serde_json::to_value(&req).unwrap());
                if let Some(id) = req.id().cloned() {
                    let _ = tx.send(Response::from_ok(id, Value::Null)).await;
                }
            }
        });
        let mut h = Harness { _tmp: tmp, vault, service, next: 1, seen };
        h.request("initialize", json!({"processId": null, "capabilities": {}})).await;
        h.notify("initialized", json!({})).await;
        h
    }

    async fn request(&mut self, method: &'static str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let req = Request::build(method).id(id).params(params).finish();
        let resp = self.service.ready().await.unwrap().call(req).await.unwrap().expect("a response");
        serde_json::to_value(resp).unwrap()
    }

    async fn notify(&mut self, method: &'static str, params: Value) {
        let req = Request::build(method).params(params).finish();
        let _ = self.service.ready().await.unwrap().call(req).await.unwrap();
    }

    fn uri(&self, rel: &str) -> String {
        format!("file://{}", self.vault.join(rel).display())
    }

    /// Opens a fixture as `rel`: expands citations, returns the cursor position.
    async fn open_fixture(&mut self, name: &str, rel: &str) -> Value {
        let raw = std::fs::read_to_string(root().join("fixtures/lsp").join(name)).unwrap();
        let store = Store::open(&self.vault.join(".lode/lode.db"), StoreOptions::default()).unwrap();
        let mut text = String::new();
        let mut rest = raw.as_str();
        while let Some(i) = rest.find("{{cite:") {
            text.push_str(&rest[..i]);
            let end = rest[i..].find("}}").unwrap() + i;
            let (path, quote) = rest[i + 7..end].split_once('|').unwrap();
            let head = store.head_of(path).unwrap().unwrap();
            let body = String::from_utf8(store.version_body(&head).unwrap().unwrap()).unwrap();
            let (r, _) = lode_core::gate::locate(&body, quote).unwrap();
            let line = lode_core::text::line_of(body.as_bytes(), r.start);
            text.push_str(&lode_core::citation::render(rel, path, line, &head, r));
            rest = &rest[end + 2..];
        }
        text.push_str(rest);
        let cursor = text.find("$0").map(|at| {
            let before = &text[..at];
            let line = before.matches('\n').count();
            let col = before.rsplit('\n').next().unwrap().encode_utf16().count();
            json!({"line": line, "character": col})
        });
        let text = text.replace("$0", "");
        let uri = self.uri(rel);
        self.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}})).await;
        cursor.unwrap_or(json!({"line": 0, "character": 0}))
    }
}

fn check(actual: &str, expect: Expect) {
    expect.assert_eq(actual);
}

#[tokio::test]
async fn hover_goto_and_actions_from_fixtures() {
    let mut h = Harness::new().await;
    let _ = h.open_fixture("hover-citation.md", "answers.md").await;
    let uri = h.uri("answers.md");
    let vault = h.vault.display().to_string();

    // Hover inside the citation link on line 2 (the link starts after the claim text).
    let hover = h.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 2, "character": 60}})).await;
    let md = hover["result"]["contents"]["value"].as_str().unwrap();
    let md = md.split(" saved ").next().unwrap().to_owned() + " saved …";
    check(
        &md,
        expect![[r#"
            **Runbook: rotate staging TLS certificates** — `runbooks/rotate-staging-certs.md`

            > staging certificates are rotated every 60 days

            version `6f28d94244f8` saved …"#]],
    );

    // An ordinary link (the `$0` cursor) is not a citation.
    let hover = h.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 3, "character": 40}})).await;
    assert!(hover["result"].is_null(), "{hover}");

    let def = h.request("textDocument/definition", json!({"textDocument": {"uri": uri}, "position": {"line": 2, "character": 60}})).await;
    let target = def["result"]["uri"].as_str().unwrap().replace(&vault, "<vault>");
    check(&format!("{target} {}", def["result"]["range"]), expect![[r#"file://<vault>/runbooks/rotate-staging-certs.md {"start":{"line":4,"character":202},"end":{"line":4,"character":248}}"#]]);

    // Code actions: on a question line, none elsewhere.
    h.notify("textDocument/didOpen", json!({"textDocument": {"uri": h.uri("q.md"), "languageId": "markdown", "version": 1, "text": "# Q\n\nWhy did the failover not complete?\n"}})).await;
    let q_uri = h.uri("q.md");
    let actions = |line: u32| json!({"textDocument": {"uri": q_uri}, "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}, "context": {"diagnostics": []}});
    let on_question = h.request("textDocument/codeAction", actions(2)).await;
    let titles: Vec<&str> = on_question["result"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap()).collect();
    check(&format!("{titles:?}"), expect![[r#"["Ask lode", "Ask lode about this note"]"#]]);
    let on_heading = h.request("textDocument/codeAction", actions(0)).await;
    assert!(on_heading["result"].is_null(), "{on_heading}");

    let syms = h.request("workspace/symbol", json!({"query": "failover"})).await;
    let names: Vec<String> = syms["result"].as_array().unwrap().iter().map(|s| format!("{} @{}", s["name"].as_str().unwrap(), s["containerName"].as_str().unwrap())).collect();
    check(
        &names.join("\n"),
        expect![[r#"
            Runbook: Redis failover @runbooks/redis-failover.md
            After the failover @runbooks/redis-failover.md"#]],
    );
    assert!(!h.seen.lock().unwrap().is_empty(), "the server talked to the client (registration, progress)");

    let status = h.request("lode/status", json!({})).await;
    assert_eq!(status["result"]["notes"], 13, "{status}");
    assert_eq!(status["result"]["dense"], "off (no embedder configured)");
}
