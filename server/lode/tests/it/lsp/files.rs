//! Files → index: what is a note, folder renames and checkouts, the server's own watcher, and a
//! vault with no watcher at all.

use super::*;

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
