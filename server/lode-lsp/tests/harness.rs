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
        Harness::on("fixtures/vault").await.0
    }

    /// A server on a copy of the fixture vault `dir`, whose `‸N` cursor markers are taken out of
    /// the notes (before indexing) and returned as `N → (path, LSP position)`.
    async fn on(dir: &str) -> (Harness, std::collections::BTreeMap<u32, (String, Value)>) {
        let tmp = tempfile::tempdir().unwrap();
        let vault = tmp.path().join("vault");
        copy_dir(&root().join(dir), &vault);
        let mut markers = std::collections::BTreeMap::new();
        let (files, _) = lode_store::vault::walk(&vault);
        for f in files {
            let mut text = std::fs::read_to_string(&f).unwrap();
            let rel = lode_store::vault::relative_path(&vault, &f).unwrap();
            while let Some(at) = text.find('‸') {
                let digits: String = text[at + '‸'.len_utf8()..].chars().take_while(char::is_ascii_digit).collect();
                let before = &text[..at];
                let pos =
                    json!({"line": before.matches('\n').count(), "character": before.rsplit('\n').next().unwrap().encode_utf16().count()});
                markers.insert(digits.parse::<u32>().unwrap(), (rel.clone(), pos));
                text.replace_range(at..at + '‸'.len_utf8() + digits.len(), "");
            }
            std::fs::write(&f, text).unwrap();
        }
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
                rules_source: None,
                synthesizer: Synthesizer::Extractive,
                vectors: None,
                reranker: None,
                nli: None,
                externals: lode_lsp::ExternalSettings::default(),
                unload_after: None,
                notices: Vec::new(),
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
        (h, markers)
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
        self.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}}))
            .await;
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
    let md = md.split(" indexed ").next().unwrap().to_owned() + " indexed …";
    check(
        &md,
        expect![[r#"
            **Runbook: rotate staging TLS certificates** — `runbooks/rotate-staging-certs.md`

            in: Runbook: rotate staging TLS certificates

            > staging certificates are rotated every 60 days

            version `6f28d94244f8`, first indexed …"#]],
    );

    // An ordinary link (the `$0` cursor) is not a citation: it gets a link hover.
    let hover = h.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 3, "character": 40}})).await;
    let md = hover["result"]["contents"]["value"].as_str().unwrap_or_default();
    assert!(md.contains("adr-007") && !md.contains("version `"), "{hover}");

    let def = h.request("textDocument/definition", json!({"textDocument": {"uri": uri}, "position": {"line": 2, "character": 60}})).await;
    let target = def["result"]["uri"].as_str().unwrap().replace(&vault, "<vault>");
    check(
        &format!("{target} {}", def["result"]["range"]),
        expect![[
            r#"file://<vault>/runbooks/rotate-staging-certs.md {"start":{"line":4,"character":202},"end":{"line":4,"character":248}}"#
        ]],
    );

    // Code actions: on a question line, none elsewhere.
    h.notify("textDocument/didOpen", json!({"textDocument": {"uri": h.uri("q.md"), "languageId": "markdown", "version": 1, "text": "# Q\n\nWhy did the failover not complete?\n"}})).await;
    let q_uri = h.uri("q.md");
    let actions = |line: u32| json!({"textDocument": {"uri": q_uri}, "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}, "context": {"diagnostics": []}});
    let on_question = h.request("textDocument/codeAction", actions(2)).await;
    let titles: Vec<&str> = on_question["result"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap()).collect();
    check(&format!("{titles:?}"), expect![[r#"["Ask lode", "Ask lode about this note"]"#]]);
    let kinds: Vec<&str> = on_question["result"].as_array().unwrap().iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["refactor.rewrite.lode.ask"; 2], "standard kinds, so clients group them under Rewrite");
    let on_heading = h.request("textDocument/codeAction", actions(0)).await;
    assert!(on_heading["result"].is_null(), "{on_heading}");
    // `only` is honoured: VS Code asks for `quickfix` on a diagnostic and drops (with a log line)
    // any action of another kind; a parent kind covers its children.
    for (only, n) in [
        (json!(["quickfix"]), 0),
        (json!(["refactor"]), 2),
        (json!(["refactor.rewrite.lode.ask"]), 2),
        (json!(["refactor.extract"]), 0),
        (json!(["refactor.rewrite.lode.a"]), 0),
    ] {
        let mut p = actions(2);
        p["context"]["only"] = only.clone();
        let r = h.request("textDocument/codeAction", p).await;
        assert_eq!(r["result"].as_array().map_or(0, |a| a.len()), n, "only {only}: {r}");
    }

    let syms = h.request("workspace/symbol", json!({"query": "failover"})).await;
    let names: Vec<String> = syms["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{} @{}", s["name"].as_str().unwrap(), s["containerName"].as_str().unwrap()))
        .collect();
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

/// Shows a workspace edit's `changes` as `path:line:col→text`, sorted.
fn edits(v: &Value, vault: &Path) -> String {
    let mut all = Vec::new();
    for (uri, list) in v["changes"].as_object().into_iter().flatten() {
        let path = uri.replace(&format!("file://{}/", vault.display()), "");
        for e in list.as_array().unwrap() {
            all.push(format!(
                "{path}:{}:{}→{}",
                e["range"]["start"]["line"],
                e["range"]["start"]["character"],
                e["newText"].as_str().unwrap()
            ));
        }
    }
    all.sort();
    all.join(" ")
}

/// Shows locations as `path:line:col` (0-based, as LSP), vault-relative, sorted.
fn locations(v: &Value, vault: &Path) -> String {
    let one = |l: &Value| {
        let path = l["uri"].as_str().unwrap_or("?").replace(&format!("file://{}/", vault.display()), "");
        format!("{path}:{}:{}", l["range"]["start"]["line"], l["range"]["start"]["character"])
    };
    let mut all: Vec<String> = match v {
        Value::Array(a) => a.iter().map(one).collect(),
        Value::Null => vec!["(none)".into()],
        l => vec![one(l)],
    };
    all.sort();
    all.join(" ")
}

/// Navigation over a vault with every link form (`fixtures/nav-vault`, `‸N` markers): each
/// request at a marker, and what it answers, as one snapshot.
#[tokio::test]
async fn navigation_from_fixtures() {
    let (mut h, m) = Harness::on("fixtures/nav-vault").await;
    let vault = h.vault.clone();
    for rel in ["index.md", "garden.md"] {
        let text = std::fs::read_to_string(vault.join(rel)).unwrap();
        let uri = h.uri(rel);
        h.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}})).await;
    }
    let at = |h: &Harness, n: u32| {
        let (rel, pos) = &m[&n];
        json!({"textDocument": {"uri": h.uri(rel)}, "position": pos})
    };
    let mut out = String::new();
    for n in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13] {
        let r = h.request("textDocument/definition", at(&h, n)).await;
        out += &format!("definition ‸{n}: {}\n", locations(&r["result"], &vault));
    }
    // ‸14: `#project` reaches the tags nested under it (`#project/alpha`).
    for n in [11, 12, 10, 7, 14] {
        let mut p = at(&h, n);
        p["context"] = json!({"includeDeclaration": false});
        let r = h.request("textDocument/references", p).await;
        out += &format!("references ‸{n}: {}\n", locations(&r["result"], &vault));
    }
    // With the declaration: a link to a heading lists the heading (first); to a note, its title.
    for n in [2, 1, 7] {
        let mut p = at(&h, n);
        p["context"] = json!({"includeDeclaration": true});
        let r = h.request("textDocument/references", p).await;
        out += &format!("references with declaration ‸{n}: {}\n", locations(&r["result"], &vault));
    }
    for n in [1, 8, 9, 10] {
        let r = h.request("textDocument/hover", at(&h, n)).await;
        let md = r["result"]["contents"]["value"].as_str().unwrap_or("(none)").lines().next().unwrap_or("").to_owned();
        out += &format!("hover ‸{n}: {md}\n");
    }
    // Diagnostics published on open: broken and ambiguous links, duplicate headings.
    let index_uri = h.uri("index.md");
    let diags = h
        .seen
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == index_uri)
        .cloned()
        .expect("diagnostics for index.md");
    for d in diags["params"]["diagnostics"].as_array().unwrap() {
        out += &format!(
            "diagnostic {}:{} {} {}\n",
            d["range"]["start"]["line"],
            d["range"]["start"]["character"],
            d["code"].as_str().unwrap(),
            d["message"].as_str().unwrap()
        );
    }
    // The broken link's quick fix creates the note.
    let broken: Vec<Value> =
        diags["params"]["diagnostics"].as_array().unwrap().iter().filter(|d| d["code"] == "lode.broken-link").cloned().collect();
    let fix = h
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": index_uri}, "range": broken[0]["range"], "context": {"diagnostics": broken}}),
        )
        .await;
    let create = fix["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"].as_str().is_some_and(|t| t.starts_with("Create note")))
        .cloned()
        .unwrap_or_else(|| panic!("{fix}"));
    let ops = &create["edit"]["documentChanges"];
    out += &format!(
        "quick fix: {} → create {} with {:?}\n",
        create["title"].as_str().unwrap(),
        ops[0]["uri"].as_str().unwrap().rsplit('/').next().unwrap(),
        ops[1]["edits"][0]["newText"].as_str().unwrap()
    );

    // Completion while typing in a new note.
    let scratch = h.uri("scratch.md");
    for (i, typed) in ["See [[gar", "See [[garden#", "See [[Ho", "Tag #pro", "Tag #ta", "A [link](gui", "See [[#Lo"].iter().enumerate() {
        let text = format!("# Scratch\n\n{typed}\n\n## Local one\n");
        h.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": scratch, "languageId": "markdown", "version": i + 1, "text": text}}),
        )
        .await;
        let r = h
            .request(
                "textDocument/completion",
                json!({"textDocument": {"uri": scratch}, "position": {"line": 2, "character": typed.chars().count()}}),
            )
            .await;
        let items: Vec<String> = r["result"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|it| format!("{}→{}", it["label"].as_str().unwrap(), it["textEdit"]["newText"].as_str().unwrap()))
            .collect();
        out += &format!("complete {typed:?}: {}\n", items.join(", "));
        h.notify("textDocument/didClose", json!({"textDocument": {"uri": scratch}})).await;
    }

    // Outline, folding and document links of index.md.
    let syms = h.request("textDocument/documentSymbol", json!({"textDocument": {"uri": index_uri}})).await;
    let mut names = Vec::new();
    fn walk(v: &Value, depth: usize, out: &mut Vec<String>) {
        for s in v.as_array().unwrap() {
            out.push(format!("{}{}", "  ".repeat(depth), s["name"].as_str().unwrap()));
            if let Some(c) = s.get("children") {
                walk(c, depth + 1, out);
            }
        }
    }
    walk(&syms["result"], 0, &mut names);
    out += &format!("outline: {}\n", names.join(" | "));
    let folds = h.request("textDocument/foldingRange", json!({"textDocument": {"uri": index_uri}})).await;
    let f: Vec<String> = folds["result"].as_array().unwrap().iter().map(|f| format!("{}-{}", f["startLine"], f["endLine"])).collect();
    out += &format!("folds: {}\n", f.join(" "));
    let links = h.request("textDocument/documentLink", json!({"textDocument": {"uri": index_uri}})).await;
    let l: Vec<String> =
        links["result"].as_array().unwrap().iter().map(|l| l["target"].as_str().unwrap().rsplit('/').next().unwrap().to_owned()).collect();
    out += &format!("document links: {}\n", l.join(" "));

    // Renames: a heading (every link to it follows), then a note file.
    let prep = h.request("textDocument/prepareRename", at(&h, 11)).await;
    out += &format!("prepare rename ‸11: {}\n", prep["result"]["placeholder"]);
    let refused = h.request("textDocument/prepareRename", at(&h, 7)).await;
    out += &format!("prepare rename ‸7: {}\n", refused["error"]["message"]);
    let mut p = at(&h, 11);
    p["newName"] = json!("Red tomatoes");
    let edit = h.request("textDocument/rename", p).await;
    out += &format!("rename heading: {}\n", edits(&edit["result"], &vault));
    let mut p = at(&h, 10);
    p["newName"] = json!("programme");
    let edit = h.request("textDocument/rename", p).await;
    out += &format!("rename tag ‸10 → programme: {}\n", edits(&edit["result"], &vault));
    let edit = h
        .request(
            "workspace/willRenameFiles",
            json!({"files": [{"oldUri": h.uri("guides/Guide%20One.md"), "newUri": h.uri("guides/Guide%20Two.md")}]}),
        )
        .await;
    out += &format!("rename file: {}\n", edits(&edit["result"], &vault));
    check(
        &out,
        expect![[r##"
            definition ‸1: garden.md:0:0
            definition ‸2: garden.md:2:0
            definition ‸3: index.md:11:0
            definition ‸4: guides/Guide%20One.md:2:0
            definition ‸5: guides/Guide%20One.md:2:0
            definition ‸6: index.md:23:0
            definition ‸7: index.md:24:0
            definition ‸8: (none)
            definition ‸9: garden.md:0:0
            definition ‸10: garden.md:4:26 index.md:9:7
            definition ‸13: index.md:0:0
            references ‸11: guides/Guide%20One.md:4:32 index.md:6:19
            references ‸12: guides/Guide%20One.md:4:32 index.md:6:19 index.md:6:4 index.md:8:29
            references ‸10: garden.md:4:26 index.md:9:7
            references ‸7: index.md:7:88
            references ‸14: garden.md:4:26 garden.md:8:19 index.md:9:7
            references with declaration ‸2: garden.md:2:0 guides/Guide%20One.md:4:32 index.md:6:19
            references with declaration ‸1: garden.md:0:0 guides/Guide%20One.md:4:32 index.md:6:19 index.md:6:4 index.md:8:29
            references with declaration ‸7: index.md:24:0 index.md:7:88
            hover ‸1: `garden.md`
            hover ‸8: **Unresolved link**: no note `No Such Note` in this vault
            hover ‸9: `garden.md` — **no heading** `No Such Heading` in this note
            hover ‸10: **#project/alpha** — 2 notes
            diagnostic 6:4 lode.ambiguous-link several notes match: garden.md (chosen), notes/garden.md
            diagnostic 6:19 lode.ambiguous-link several notes match: garden.md (chosen), notes/garden.md
            diagnostic 8:8 lode.broken-link no note `No Such Note` in this vault
            diagnostic 8:29 lode.ambiguous-link several notes match: garden.md (chosen), notes/garden.md
            diagnostic 8:29 lode.broken-heading no heading `No Such Heading` in garden.md
            diagnostic 19:3 lode.duplicate-heading same heading as line 12: links to it reach the first one
            quick fix: Create note “No Such Note” → create No%20Such%20Note.md with "# No Such Note\n\n"
            complete "See [[gar": garden→garden]], notes/garden→notes/garden]]
            complete "See [[garden#": Garden→Garden]], Tomatoes→Tomatoes]], Beans→Beans]]
            complete "See [[Ho": Home→index|Home]]
            complete "Tag #pro": project/alpha→project/alpha, project→project
            complete "Tag #ta": project/alpha→project/alpha, anotherTag→anotherTag
            complete "A [link](gui": guides/Guide%20One.md→guides/Guide%20One.md
            complete "See [[#Lo": Local one→Local one]]
            outline: Index |   Local part |   Local part
            folds: 0-3 4-24 11-17 15-17 19-24
            document links: garden.md garden.md Guide%20One.md garden.md index.md
            prepare rename ‸11: "Tomatoes"
            prepare rename ‸7: "only a heading or a tag can be renamed here (rename a note by renaming its file)"
            rename heading: garden.md:2:3→Red tomatoes guides/Guide%20One.md:4:58→red-tomatoes index.md:6:28→Red tomatoes
            rename tag ‸10 → programme: garden.md:4:27→programme index.md:9:8→programme
            rename file: caf%C3%A9.md:2:33→Guide Two index.md:23:9→guides/Guide%20Two.md index.md:7:17→guides/Guide%20Two.md
        "##]],
    );
}
