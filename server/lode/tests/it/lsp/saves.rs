//! The save path: nothing acknowledged is lost or overtaken (locks, a full disk, kill -9, a
//! concurrent `lode index`, chunking ahead, scans racing saves).

use super::*;

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
