//! End-to-end runs of the real `lode` binary: index, search, stats, and what a user sees when
//! things go wrong (no index, corrupt database, huge files, a crash in the middle of indexing).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The user approves the vault's settings (`lode trust`), as they would a folder of their own.
fn approve(v: &std::path::Path) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lode")).args(["trust", "--vault"]).arg(v).output().unwrap();
    assert!(o.status.success(), "lode trust: {}", String::from_utf8_lossy(&o.stderr));
}

fn lode(args: &[&str], vault: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lode")).args(args).arg("--vault").arg(vault).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

use lode_testing::copy_dir;

fn example_vault(tmp: &Path) -> PathBuf {
    let v = tmp.join("vault");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vault"), &v);
    v
}

#[test]
fn index_then_search_json_gives_exact_ranked_spans() {
    let tmp = tempfile::tempdir().unwrap();
    let v = example_vault(tmp.path());
    let o = lode(&["index", "--json"], &v);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(report["created"], 13);
    assert!(v.join(".lode/lode.db").exists(), "database lives in <vault>/.lode/");

    let o = lode(&["search", "--json", "--limit", "4", "redis eviction policy"], &v);
    assert!(o.status.success(), "{}", stderr(&o));
    let hits: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!hits.is_empty() && hits.len() <= 4);
    assert!(hits.iter().any(|h| h["path"] == "decisions/adr-008-cache-eviction.md"), "{hits:?}");
    let mut last = f64::INFINITY;
    for (i, h) in hits.iter().enumerate() {
        for key in ["path", "note_id", "version_id", "start", "end", "score", "text"] {
            assert!(!h[key].is_null(), "hit lacks {key}: {h}");
        }
        assert_eq!(h["rank"], i + 1);
        let body = std::fs::read(v.join(h["path"].as_str().unwrap())).unwrap();
        let (s, e) = (h["start"].as_u64().unwrap() as usize, h["end"].as_u64().unwrap() as usize);
        assert_eq!(String::from_utf8_lossy(&body[s..e]), h["text"].as_str().unwrap());
        if h["mode"] == hits[0]["mode"] {
            assert!(h["score"].as_f64().unwrap() <= last, "rank order");
            last = h["score"].as_f64().unwrap();
        }
    }

    let o = lode(&["search", "--limit", "2", "Combien de requêtes ont échoué ?"], &v);
    let text = stdout(&o);
    assert!(text.contains("notes/reunion-equipe-2026-02.md:"), "{text}");
    assert!(text.lines().count() <= 4, "--limit 2 gives two hits of two lines: {text}");

    let o = lode(&["stats", "--check"], &v);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(stdout(&o).contains("check            ok"));
}

#[test]
fn search_before_index_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let o = lode(&["search", "anything"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("run `lode index"), "{}", stderr(&o));
    assert!(!tmp.path().join(".lode").exists(), "searching creates nothing");
}

#[test]
fn hostile_query_is_plain_text() {
    let tmp = tempfile::tempdir().unwrap();
    let v = example_vault(tmp.path());
    assert!(lode(&["index", "-q"], &v).status.success());
    for q in ["\"unclosed AND (", "NEAR(a b) OR *", "body:redis", "🚀"] {
        let o = lode(&["search", q], &v);
        assert!(o.status.success(), "{q}: {}", stderr(&o));
    }
}

#[test]
fn corrupt_database_is_named_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let v = example_vault(tmp.path());
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    let junk = vec![0x5au8; 8192];
    std::fs::write(v.join(".lode/lode.db"), &junk).unwrap();
    let o = lode(&["index"], &v);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("lode.db") && err.contains("corrupt"), "{err}");
    assert_eq!(std::fs::read(v.join(".lode/lode.db")).unwrap(), junk);
}

/// Empty and half-made files: a zero-byte `lode.db` is a missing index (same message, nothing
/// written to it); another program's SQLite file and a lode index missing a core table are named
/// and left untouched, by the reading commands and by `lode index` alike.
#[test]
fn empty_foreign_and_half_made_databases_are_named_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let v = example_vault(tmp.path());
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    let db = v.join(".lode/lode.db");
    std::fs::write(&db, b"").unwrap();
    for args in [&["search", "rotation"][..], &["ask", "How often are certificates rotated?"], &["stats"]] {
        let o = lode(args, &v);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains("no index at") && stderr(&o).contains("the file is empty"), "{args:?}: {}", stderr(&o));
        assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "{args:?} gave the empty file a schema");
    }
    // `lode index` makes the index it was asked for.
    assert!(lode(&["index", "-q", "--no-vectors"], &v).status.success());
    assert!(lode(&["search", "rotation"], &v).status.success());

    // Some other program's database.
    std::fs::remove_file(&db).unwrap();
    let _ = std::fs::remove_file(v.join(".lode/lode.db-wal"));
    let _ = std::fs::remove_file(v.join(".lode/lode.db-shm"));
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);").unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    for args in [&["index", "-q", "--no-vectors"][..], &["search", "rotation"]] {
        let o = lode(args, &v);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains("is not a lode index") && stderr(&o).contains("invoices"), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(std::fs::read(&db).unwrap(), before, "a foreign database was written to");

    // A lode index missing a core table.
    std::fs::remove_file(&db).unwrap();
    assert!(lode(&["index", "-q", "--no-vectors"], &v).status.success());
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("DROP TABLE links;").unwrap();
    }
    for args in [&["index", "-q", "--no-vectors"][..], &["search", "rotation"]] {
        let o = lode(args, &v);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains("half-made lode index") && stderr(&o).contains("links"), "{args:?}: {}", stderr(&o));
    }
}

/// The vector table deleted, then damaged, between runs: reading commands say so and answer
/// lexically without creating anything; `lode doctor` fails on it; `lode index` moves a damaged
/// table aside and rebuilds both from the passages.
#[test]
fn a_deleted_or_damaged_vector_table_is_said_and_mended() {
    let tmp = tempfile::tempdir().unwrap();
    let v = example_vault(tmp.path());
    let o = lode(&["index", "-q"], &v);
    assert!(o.status.success(), "{}", stderr(&o));
    let vectors = v.join(".lode/vectors");
    let dense = |v: &Path| lode(&["search", "--json", "--mode", "dense", "--limit", "3", "switch to the standby cache server"], v);
    assert!(dense(&v).status.success());

    std::fs::remove_dir_all(&vectors).unwrap();
    let o = dense(&v);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("no vector table") && stderr(&o).contains("answering lexically"), "{}", stderr(&o));
    assert!(!stdout(&o).trim().is_empty(), "lexical results still come");
    assert!(!vectors.exists(), "a search created an empty vector table");
    let d: serde_json::Value = serde_json::from_str(stdout(&lode(&["doctor", "--json"], &v)).trim()).unwrap();
    assert!(d["problems"].to_string().contains("vector table is missing"), "{d:#}");
    let o = lode(&["stats", "--check"], &v);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("PROBLEM: the vector table is missing"), "{}", stdout(&o));
    let o = lode(&["index", "--json"], &v);
    let r: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!((r["vectors"]["rebuilt"].as_bool(), r["vectors"]["with_vectors"] == r["vectors"]["passages"]), (Some(true), true), "{r}");

    // Damage every data file of the table.
    assert!(lode_testing::damage_vector_tables(&vectors) > 0);
    let o = dense(&v);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("answering lexically"), "{}", stderr(&o));
    let d: serde_json::Value = serde_json::from_str(stdout(&lode(&["doctor", "--json"], &v)).trim()).unwrap();
    assert!(d["problems"].to_string().contains("rebuilds it from the passages"), "{d:#}");
    let o = lode(&["stats", "--check"], &v);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let o = lode(&["index", "--json"], &v);
    let r: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(r["vectors"]["mended"].as_str().is_some_and(|m| m.contains("moved aside")), "{r}");
    assert_eq!(r["vectors"]["with_vectors"], r["vectors"]["passages"], "{r}");
    let o = dense(&v);
    assert!(o.status.success() && !stderr(&o).contains("answering lexically"), "{}", stderr(&o));

    // Damage the data region (not the footer): LanceDB's decoder panics on a worker thread. The
    // search still answers lexically and says why, in a line, not a panic report.
    let damaged = lode_testing::damage_vector_data_regions(&vectors);
    assert!(damaged > 0);
    let o = dense(&v);
    let err = stderr(&o);
    assert!(o.status.success() && err.contains("answering lexically") && !stdout(&o).trim().is_empty(), "{err}");
    assert!(!err.contains("panicked at") && !err.contains("RUST_BACKTRACE"), "a library's panic is said in one line: {err}");
    let o = lode(&["index", "--json"], &v);
    let r: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(r["vectors"]["mended"].as_str().is_some_and(|m| m.contains("moved aside")), "{r}");
    let o = dense(&v);
    assert!(o.status.success() && !stderr(&o).contains("answering lexically"), "{}", stderr(&o));
}

/// A full disk (a 4 MB tmpfs in a mount namespace of its own, filled up): `lode index` says the
/// disk is full and how much is free, `lode search` answers read-only and says so, and both
/// work again once space is freed.
#[test]
fn a_full_disk_is_named_searched_read_only_and_recovered_from() {
    if !Command::new("unshare").args(["-m", "true"]).status().is_ok_and(|s| s.success()) {
        eprintln!("skipped: needs `unshare -m` (root, or user namespaces) to mount a small disk");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("disk");
    std::fs::create_dir_all(&mnt).unwrap();
    let vault = lode_testing::repo().join("fixtures/vault");
    let lode = env!("CARGO_BIN_EXE_lode");
    let m = mnt.display();
    let script = format!(
        "set -e\nmount -t tmpfs -o size=4m tmpfs {m}\ncp -r {} {m}/v\n{lode} index -q --no-vectors --vault {m}/v\n\
         dd if=/dev/zero of={m}/fill bs=64k 2>/dev/null || true\nrm -f {m}/v/.lode/lode.db-shm\nset +e\n\
         {lode} index --no-vectors --vault {m}/v; echo \"index rc=$?\"\n\
         {lode} search --vault {m}/v staging certificates rotated; echo \"search rc=$?\"\n\
         rm {m}/fill\n{lode} index -q --no-vectors --vault {m}/v; echo \"after rc=$?\"\n",
        vault.display()
    );
    let o = Command::new("unshare").args(["-m", "sh", "-c", &script]).output().unwrap();
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(all.contains("index rc=1") && all.contains("is full (") && all.contains("bytes free"), "{all}");
    assert!(!all.contains("xShmMap"), "SQLite's words, not the user's: {all}");
    assert!(all.contains("search rc=0") && all.contains("read-only") && all.contains("runbooks/"), "{all}");
    assert!(all.contains("after rc=0"), "{all}");
}

#[test]
fn huge_note_is_skipped_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("v");
    std::fs::create_dir_all(&v).unwrap();
    std::fs::write(v.join("small.md"), "a small note about otters\n").unwrap();
    let line = "a line of a very large note that nobody should index in full\n";
    std::fs::write(v.join("huge.md"), line.repeat(50_000_000 / line.len() + 1)).unwrap();
    let o = lode(&["index"], &v);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("skipped huge.md"), "{}", stderr(&o));
    assert!(stdout(&lode(&["search", "otters"], &v)).contains("small.md"));
}

#[test]
fn crash_mid_index_leaves_no_half_indexed_note() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("v");
    std::fs::create_dir_all(&v).unwrap();
    for i in 0..4000 {
        let body = format!("# Note {i}\n\nParagraph about topic{i} and shared words.\n\n- item {i} one\n- item {i} two\n");
        std::fs::write(v.join(format!("n{i:05}.md")), body).unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_lode")).args(["index", "-q", "--vault"]).arg(&v).spawn().unwrap();
    // Kill it once a batch of notes is committed (the schema alone writes a log of 200 KB, so
    // the count of notes is what is waited for).
    let db = v.join(".lode/lode.db");
    let committed = || -> i64 {
        let Ok(conn) = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else { return 0 };
        conn.query_row("SELECT count(*) FROM notes", [], |r| r.get(0)).unwrap_or(0)
    };
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(60) && committed() == 0 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL: no clean-up runs
    let status = child.wait().unwrap();

    let o = lode(&["stats", "--check", "--json"], &v);
    let s: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap_or_default();
    let notes_after_crash = s["notes"].as_i64().unwrap();
    if status.success() {
        assert!(o.status.success(), "consistent: {}", stdout(&o));
    } else {
        assert!((1..=4000).contains(&notes_after_crash), "killed after a batch: {notes_after_crash}");
        // Consistent, bar the indexes a cold index builds at its end (until then, or killed
        // while it built them at the end): the check names them and what builds them, and says
        // nothing else; lookups answer meanwhile.
        let problems: Vec<&str> = s["problems"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
        if notes_after_crash < 4000 {
            assert!(!o.status.success(), "the check hid the unbuilt indexes: {}", stdout(&o));
            assert_eq!(problems.len(), 1, "{problems:?}");
        }
        assert!(problems.len() <= 1, "{problems:?}");
        if let Some(p) = problems.first() {
            assert!(p.contains("headings_folded") && p.contains("`lode index`"), "{problems:?}");
        }
        assert!(stdout(&lode(&["search", "topic0"], &v)).contains("n00000.md"));
    }

    let o = lode(&["index", "--json"], &v);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = lode(&["stats", "--check", "--json"], &v);
    assert!(o.status.success(), "consistent once indexed again: {}", stdout(&o));
    let s: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(s["problems"], serde_json::json!([]));
    assert_eq!(s["notes"], 4000);
    assert_eq!(s["passages"], 4000 * 3);
    assert!(stdout(&lode(&["search", "topic3999"], &v)).contains("n03999.md"));
}

#[test]
fn ask_prints_a_verified_answer_with_exact_citations() {
    let tmp = tempfile::tempdir().unwrap();
    let v = example_vault(tmp.path());
    assert!(lode(&["index", "-q"], &v).status.success());
    let o = lode(&["ask", "--json", "How often are staging certificates rotated?"], &v);
    assert!(o.status.success(), "{}", stderr(&o));
    let a: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(a["abstained"], false);
    let c = &a["claims"][0]["citations"][0];
    let body = std::fs::read(v.join(c["path"].as_str().unwrap())).unwrap();
    let (s, e) = (c["start"].as_u64().unwrap() as usize, c["end"].as_u64().unwrap() as usize);
    assert_eq!(String::from_utf8_lossy(&body[s..e]), c["quoted_span"].as_str().unwrap());
    assert!(a["claims"][0]["text"].as_str().unwrap().contains("60 days"));
    assert_eq!(c["context"], "Runbook: rotate staging TLS certificates", "each citation carries its breadcrumb");

    // The terminal shows the same context under each citation; a user's own heading words
    // (`[gate] headings`) keep a line under such a heading from being stated as fact.
    let o = lode(&["ask", "How often are staging certificates rotated?"], &v);
    assert!(stdout(&o).contains("      in: Runbook: rotate staging TLS certificates"), "{}", stdout(&o));
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::write(v.join("mythen.md"), "# Zertifikate\n\n## Irrtümer\n\nStaging certificates are rotated every 7 days.\n").unwrap();
    std::fs::write(v.join(".lode/config.toml"), "[gate]\nheadings = [\"Irrtümer\"]\n").unwrap();
    approve(&v);
    assert!(lode(&["index", "-q"], &v).status.success());
    let o = lode(&["ask", "--json", "Are staging certificates rotated every 7 days?"], &v);
    let a: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let seven =
        a["claims"].as_array().unwrap().iter().find(|c| c["text"].as_str().unwrap().contains("7 days")).unwrap_or_else(|| panic!("{a}"));
    assert_eq!(seven["rung"], "verified", "{seven}");
    assert_eq!(seven["text"], "Irrtümer: Staging certificates are rotated every 7 days.", "restated with the heading: {seven}");
    std::fs::remove_file(v.join(".lode/config.toml")).unwrap();

    let o = lode(&["ask", "What is the airspeed of an unladen swallow?"], &v);
    assert!(o.status.success());
    assert!(stdout(&o).contains("your notes don't answer this"), "{}", stdout(&o));

    let o = lode(&["ask", "--llm", "anything"], &v);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("[llm]"), "{}", stderr(&o));
}

#[test]
fn gate_reads_json_lines_and_reports_each() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lode"))
        .args(["gate", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let source = "Certificates are valid for 90 days, but rotated every 60 days. The cache isn't flushed.";
    let lines = [
        serde_json::json!({"claim": "Certificates are valid for 90 days", "spans": ["Certificates are valid for 90 days, but rotated every 60 days."], "source": source}),
        serde_json::json!({"claim": "Certificates are rotated every 90 days", "spans": ["Certificates are valid for 90 days, but rotated every 60 days."], "source": source}),
        serde_json::json!({"claim": "The cache is flushed", "spans": ["The cache isn't flushed."], "source": source}),
        serde_json::json!({"claim": "made up", "spans": ["a quote from nowhere"], "source": source}),
    ];
    let mut input = String::new();
    for l in &lines {
        input.push_str(&format!("{l}\n"));
    }
    input.push_str("{not json}\n");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let out: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let verdicts: Vec<(&str, &str)> = out.iter().map(|v| (v["verdict"].as_str().unwrap(), v["step"].as_str().unwrap_or(""))).collect();
    assert_eq!(
        verdicts,
        [("coupled", "coupling"), ("dropped", "entailment"), ("dropped", "entailment"), ("dropped", "span_check"), ("error", "")]
    );
    assert_eq!(o.status.code(), Some(1), "a bad line makes the exit code say so");
}

fn lode_env(args: &[&str], vault: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
    c.args(args).arg("--vault").arg(vault);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn vectors_dense_search_and_clear_fallbacks() {
    let tmp = tempfile::tempdir().unwrap();
    let v = example_vault(tmp.path());

    // No runtime: indexing and search still work, and say why they are lexical-only.
    let missing = [("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so")];
    let o = lode_env(&["index"], &v, &missing);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("lexical only") && stderr(&o).contains("not found"), "{}", stderr(&o));
    let o = lode_env(&["search", "--mode", "hybrid", "redis failover"], &v, &missing);
    assert!(o.status.success() && stdout(&o).contains("redis-failover.md"), "{}", stderr(&o));
    assert!(stderr(&o).contains("lexical results only"), "{}", stderr(&o));

    // A library that is not ONNX Runtime: a clear message naming it, lexical keeps working.
    let wrong = "/lib/x86_64-linux-gnu/libz.so.1";
    if Path::new(wrong).exists() {
        let o = lode_env(&["search", "--mode", "dense", "redis failover"], &v, &[("ORT_DYLIB_PATH", wrong)]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stderr(&o).contains("cannot use ONNX Runtime from") && stderr(&o).contains("libz"), "{}", stderr(&o));
    }

    // With the runtime: index embeds, stats reports freshness, dense search returns the JSON hits.
    let o = lode(&["index", "--json"], &v);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(r["vectors"]["status"], "ok", "{r}");
    assert_eq!(r["vectors"]["with_vectors"], r["vectors"]["passages"]);
    let o = lode(&["stats", "--json"], &v);
    let s: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(s["vectors"]["with_vectors"], s["passages"]);
    for mode in ["dense", "hybrid", "rerank"] {
        let o = lode(&["search", "--json", "--mode", mode, "--limit", "3", "switch to the standby cache server"], &v);
        assert!(o.status.success(), "{mode}: {}", stderr(&o));
        let hits: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(hits.len(), 3, "{mode}");
        for key in ["path", "note_id", "version_id", "start", "end", "score", "text"] {
            assert!(!hits[0][key].is_null(), "{mode}: no {key}");
        }
    }
    // A note indexed without its vectors yet (as right after a save) is found by the dense leg
    // too: embedded at query time, which `--timings` shows as its own stage.
    std::fs::write(
        v.join("notes/quokka.md"),
        "# Quokka census

The quokka census on the island counted 412 animals.
",
    )
    .unwrap();
    let o = lode(&["index", "--no-vectors", "--json"], &v);
    let r: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(r["vectors"]["status"].as_str().unwrap().contains("--no-vectors"));
    let o =
        lode(&["search", "--json", "--timings", "--mode", "hybrid", "--limit", "3", "how many quokkas did the island census count"], &v);
    assert!(o.status.success(), "{}", stderr(&o));
    let top: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert_eq!(top["path"], "notes/quokka.md", "{}", stdout(&o));
    let timings = stderr(&o);
    for stage in ["lexical:", "embed_query:", "dense:", "catch_up:", "fusion:"] {
        assert!(timings.contains(stage), "no {stage} in {timings}");
    }
    assert!(timings.contains("1 passage without a vector yet"), "{timings}");
}

#[test]
fn the_gate_uses_a_configured_entailment_model() {
    use std::io::Write;
    let run = |extra: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lode"))
            .arg("gate")
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Not contained in either span (synthesis), so only entailment can keep it. The tiny NLI
        // model reads the hypothesis: two "banana" tokens → entailment logit 6 → p = 0.991.
        let line = serde_json::json!({"claim": "the stand sells banana after banana",
            "spans": ["a banana stand", "another banana"], "source": "We saw a banana stand and another banana."});
        child.stdin.take().unwrap().write_all(format!("{line}\n").as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        serde_json::from_str::<serde_json::Value>(stdout(&o).trim()).unwrap()
    };
    let without = run(&[]);
    assert_eq!((without["verdict"].as_str(), without["step"].as_str()), (Some("dropped"), Some("entailment")));
    assert_eq!(without["rung"], "evidence_only", "{without}");
    assert!(without["reason"].as_str().unwrap().contains("no entailment model"));
    let with = run(&["--nli", "tiny-nli"]);
    assert_eq!(with["verdict"], "entailed", "{with}");
    assert!((with["score"].as_f64().unwrap() - 0.9909).abs() < 0.001, "{with}");
    assert_eq!(with["label"], "verified (entailed 0.99)");
    // A reranker cannot serve as the entailment step: relevance is not entailment.
    let reranker = run(&["--nli", "tiny-cross-encoder"]);
    assert_eq!(reranker["verdict"], "dropped");
    assert!(reranker["reason"].as_str().unwrap().contains("not an NLI model"), "{reranker}");
    let strict = run(&["--nli", "tiny-nli", "--threshold", "0.995"]);
    assert_eq!(strict["verdict"], "dropped");
}

#[test]
fn a_no_egress_pattern_that_matches_nothing_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let v = example_vault(tmp.path());
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::write(v.join(".lode/config.toml"), "[egress]\nno_egress = [\"runbooks/\", \"privte/**\"]\n").unwrap();
    approve(&v);
    assert!(lode(&["index", "--no-vectors"], &v).status.success());
    let o = lode(&["ask", "How often are staging certificates rotated?"], &v);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("\"privte/**\" matches no note"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("\"runbooks/\""), "a pattern that matches is not warned about: {}", stderr(&o));
}

/// A loopback endpoint answering every request with `status` and a tiny JSON body; returns its
/// base URL (`http://127.0.0.1:PORT/v1`).
fn loopback_endpoint(status: u16) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                line.clear();
            }
            let body = r#"{"data": [{"id": "tiny"}]}"#;
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[test]
fn doctor_reports_the_llm_endpoint_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let v = example_vault(tmp.path());
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    let config = |endpoint: &str| format!("[models]\nembedder = \"\"\n[llm]\nendpoint = \"{endpoint}\"\nmodel = \"tiny\"\n");
    std::fs::write(v.join(".lode/config.toml"), config(&loopback_endpoint(200))).unwrap();
    approve(&v);
    let o = lode(&["doctor", "--json"], &v);
    let d: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(o.status.success(), "{d:#}");
    assert!(d["llm"].is_null(), "not probed without --llm: {d:#}");
    let o = lode(&["doctor", "--json", "--llm"], &v);
    let d: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(o.status.success(), "{d:#}");
    assert_eq!(d["llm"]["reachable"], true, "{d:#}");
    // An endpoint that errors, and one where nothing listens.
    std::fs::write(v.join(".lode/config.toml"), config(&loopback_endpoint(500))).unwrap();
    approve(&v);
    let o = lode(&["doctor", "--json", "--llm"], &v);
    assert!(!o.status.success());
    let d: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(d["problems"].to_string().contains("500"), "{d:#}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    std::fs::write(v.join(".lode/config.toml"), config(&format!("http://{closed}/v1"))).unwrap();
    approve(&v);
    let o = lode(&["doctor", "--llm"], &v);
    assert!(!o.status.success());
    assert!(stdout(&o).contains("FAIL  llm"), "{}", stdout(&o));
}

#[test]
fn externals_refresh_list_show_search_and_annotations() {
    use lode_testing::web::{Reply, Site};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let fetches = std::sync::Arc::new(AtomicUsize::new(0));
    let n = fetches.clone();
    let site = Site::start(Box::new(move |path: &str| match path {
        "/guide" => {
            // The third fetch sees a rewritten page.
            let k = n.fetch_add(1, Ordering::SeqCst);
            let second = if k < 2 { "Replicas lag by at most five seconds." } else { "Replicas lag by at most one second." };
            Reply::html(&format!(
                "<title>Replica guide</title><h1>Replica guide</h1><p>The osprey cluster keeps three replicas.</p><p>{second}</p>"
            ))
        }
        "/moved" => Reply::redirect("/guide"),
        "/private" => Reply::html("<h1>Private</h1><p>Internal text.</p>"),
        _ => Reply::typed(500, "text/plain", b"boom"),
    }));
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(
        vault.join(".lode/config.toml"),
        "[models]\nembedder = \"\"\n\n[externals]\nallow_loopback = true\nno_egress_domains = [\"localhost\"]\n",
    )
    .unwrap();
    approve(&vault);
    let (guide, broken) = (site.url("/guide"), site.url("/broken"));
    let private = site.url("/private").replace("127.0.0.1", "localhost");
    std::fs::write(
        vault.join("replicas.md"),
        format!("# Replicas\n\nSee the [guide]({guide}), the [broken page]({broken}) and [private]({private}).\n"),
    )
    .unwrap();
    std::fs::write(
        vault.join("guide-notes.md"),
        format!("---\nannotates: {guide}\n---\n# Notes on the guide\n\n> Replicas lag by at most five seconds.\n\nWe measured two.\n\n> The osprey cluster keeps three replicas.\n"),
    )
    .unwrap();
    assert!(lode(&["index", "--no-vectors"], &vault).status.success());

    // Every linked page; the failure is reported and fails the command.
    let o = lode(&["externals", "refresh"], &vault);
    let out = stdout(&o);
    assert!(!o.status.success());
    assert!(out.contains(&format!("new snapshot  {guide}")) && out.contains(&format!("failed        {broken}: HTTP 500")), "{out}");
    let o = lode(&["externals", "refresh", "--json"], &vault);
    let lines: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.iter().any(|l| l["url"] == guide.as_str() && l["changed"] == false), "identical text: no new snapshot: {lines:?}");

    let o = lode(&["externals", "list", "--json"], &vault);
    let port = site.base.rsplit(':').next().unwrap().to_owned();
    let mut list: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // The example vault links pages on the internet too (unreachable here: failed fetches).
    assert!(list.iter().any(|e| e["linked_from"] == serde_json::json!(["notes/reading-list.md"]) && e["last_error"].as_str().is_some()));
    list.retain(|e| e["url"].as_str().unwrap().contains(&format!(":{port}/")));
    assert_eq!(list.len(), 3, "{list:?}");
    let g = list.iter().find(|e| e["url"] == guide.as_str()).unwrap();
    for key in ["url", "snapshot_id", "fetched_at", "age_days", "status", "content_type", "linked_from", "no_egress"] {
        assert!(g.get(key).is_some(), "{key} in {g}");
    }
    assert_eq!((g["status"].as_u64(), g["content_type"].as_str(), g["no_egress"].as_bool()), (Some(200), Some("text/html"), Some(false)));
    assert_eq!(g["linked_from"], serde_json::json!(["replicas.md"]));
    assert!(g["age_days"].as_f64().unwrap() < 0.01);
    let b = list.iter().find(|e| e["url"] == broken.as_str()).unwrap();
    assert_eq!((b["snapshot_id"].is_null(), b["last_status"].as_u64()), (true, Some(500)));
    assert_eq!(list.iter().find(|e| e["url"] == private.as_str()).unwrap()["no_egress"], true);

    // Search finds the snapshot, marked as one.
    let o = lode(&["search", "--json", "osprey replicas"], &vault);
    let hit: serde_json::Value =
        serde_json::from_str(stdout(&o).lines().find(|l| l.contains("snapshot")).unwrap_or_else(|| panic!("{}", stdout(&o)))).unwrap();
    assert_eq!(
        (hit["kind"].as_str(), hit["url"].as_str(), hit["path"].as_str()),
        (Some("snapshot"), Some(guide.as_str()), Some(guide.as_str()))
    );
    assert!(hit["fetched_at"].as_i64().is_some());
    // One trust order on every surface: the annotation quoting the page's sentence ranks above
    // the snapshot holding the same sentence, in `lode search` as in `lode ask`.
    let o = lode(&["search", "--json", "The osprey cluster keeps three replicas"], &vault);
    let order: Vec<String> =
        stdout(&o).lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["path"].as_str().unwrap().to_owned()).collect();
    let (note, page) = (order.iter().position(|p| p == "guide-notes.md"), order.iter().position(|p| p == guide.as_str()));
    assert!(note.is_some() && page.is_some() && note < page, "{order:?}");
    let notes: Vec<serde_json::Value> =
        stdout(&lode(&["search", "--json", "measured two"], &vault)).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(notes[0]["kind"], "note");

    // The annotation's quotes are anchored; after the page changes, one is orphaned.
    let o = lode(&["externals", "show", &guide], &vault);
    assert!(stdout(&o).contains("annotation  guide-notes.md: 2 quotes, 0 orphaned"), "{}", stdout(&o));
    let o = lode(&["externals", "refresh", &guide], &vault);
    assert!(stdout(&o).contains("new snapshot"), "{}", stdout(&o));
    let o = lode(&["externals", "show", "--json", &guide], &vault);
    let shown: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(shown["history"].as_array().unwrap().len(), 2);
    let quotes = shown["annotations"][0]["quotes"].as_array().unwrap();
    let orphaned: Vec<&str> = quotes.iter().filter(|q| q["anchored"] == false).map(|q| q["line_text"].as_str().unwrap()).collect();
    assert_eq!(orphaned, ["Replicas lag by at most five seconds."]);
    // A redirect is followed and recorded; unknown URLs are a clear error.
    let o = lode(&["externals", "refresh", &site.url("/moved")], &vault);
    assert!(o.status.success(), "{}", stderr(&o));
    let moved: serde_json::Value =
        serde_json::from_str(&stdout(&lode(&["externals", "show", "--json", &site.url("/moved")], &vault))).unwrap();
    assert_eq!(moved["final_url"], guide.as_str());
    let o = lode(&["externals", "show", "https://nowhere.example/"], &vault);
    assert!(!o.status.success() && stderr(&o).contains("not an external of this vault"), "{}", stderr(&o));
    let o = lode(&["externals", "refresh", "file:///etc/passwd"], &vault);
    assert!(!o.status.success() && stdout(&o).contains("only http and https"), "{}", stdout(&o));
    // URLs that cannot be fetched stop nothing: each is reported, the rest are refreshed.
    let o = lode(&["externals", "refresh", "not a url", guide.as_str(), "ftp://example.com/x"], &vault);
    let out = stdout(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains(&format!("unchanged     {guide}")), "{out}");
    assert!(out.contains("failed        not a url: ") && out.contains("failed        ftp://example.com/x: "), "{out}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("2 failed"), "{}", String::from_utf8_lossy(&o.stderr));
    // Stale under a fractional threshold (0.1 s): the age says so too, never 0.0.
    let cfg = std::fs::read_to_string(vault.join(".lode/config.toml")).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), format!("{cfg}stale_days = 0.000001\n")).unwrap();
    approve(&vault);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = lode(&["externals", "list"], &vault);
    assert!(stdout(&o).contains("stale"), "{}", stdout(&o));
    let o = lode(&["externals", "list", "--json"], &vault);
    let g: serde_json::Value =
        stdout(&o).lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).find(|e| e["url"] == guide.as_str()).unwrap();
    assert!(g["age_days"].as_f64().unwrap() > 0.000001, "{g}");
    assert!(lode(&["stats", "--check"], &vault).status.success());
}
