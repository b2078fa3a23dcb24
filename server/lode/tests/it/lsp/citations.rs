//! Citations and links in open notes: per-citation diagnostics, renames that keep links whole,
//! external links with snapshots.

use super::*;

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
