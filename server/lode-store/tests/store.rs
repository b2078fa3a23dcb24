//! Store tests against real SQLite files: versioning, head-only passages, FTS5 search safety,
//! renames and deletes, links, and refusal of locked, corrupt or newer databases.

use std::path::{Path, PathBuf};

use lode_store::vault::{index_vault, IndexOptions};
use lode_store::{SaveStatus, SearchOptions, Store, StoreError, StoreOptions};

fn vault() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vault")
}

fn open(dir: &Path) -> Store {
    Store::open(&dir.join("lode.db"), StoreOptions::default()).unwrap()
}

fn paths(store: &Store, q: &str) -> Vec<String> {
    store.search(q, &SearchOptions::default()).unwrap().hits.into_iter().map(|h| h.path).collect()
}

#[test]
fn indexes_example_vault_with_exact_ranges() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let report = index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    assert_eq!(report.created, 13, "{report:?}");
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    // drafts/ is in the vault's .gitignore
    assert!(store.notes().unwrap().iter().all(|n| !n.path.starts_with("drafts/")));
    assert!(paths(&store, "zanzibarquux").is_empty());

    for note in store.notes().unwrap() {
        let body = store.version_body(note.head_version.as_deref().unwrap()).unwrap().unwrap();
        assert_eq!(std::fs::read(vault().join(&note.path)).unwrap(), body, "version holds the exact bytes");
        for p in store.passages_of(&note.path).unwrap() {
            assert_eq!(&body[p.start..p.end], p.text.as_bytes(), "{}: body[range] is the passage text", note.path);
            assert_eq!(p.version_id, note.head_version.clone().unwrap());
            let line = 1 + body[..p.start].iter().filter(|&&b| b == b'\n').count();
            assert_eq!(p.line, line);
        }
    }

    // Second run: nothing changed, nothing written.
    let again = index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    assert_eq!((again.created, again.updated, again.unchanged), (0, 0, 13));

    let stats = store.stats().unwrap();
    assert_eq!(stats.notes, 13);
    assert_eq!(stats.versions, 13);
    assert_eq!(stats.unresolved_links, 0, "every internal link in the example vault resolves");
}

#[test]
fn finds_answers_in_the_example_vault() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    let cases = [
        ("How often are staging certificates rotated?", "runbooks/rotate-staging-certs.md"),
        ("Which Redis eviction policy was chosen?", "decisions/adr-008-cache-eviction.md"),
        ("what pool size for pgbouncer", "decisions/adr-007-postgres-connection-pooling.md"),
        ("Combien de requêtes ont échoué pendant la panne ?", "notes/reunion-equipe-2026-02.md"),
        ("日本語", "notes/reading-list.md"),
    ];
    for (q, want) in cases {
        let got = paths(&store, q);
        assert!(got.iter().take(3).any(|p| p == want), "{q}: {want} not in top 3 of {got:?}");
    }
    let r = store.search("How often are staging certificates rotated?", &SearchOptions::default()).unwrap();
    assert!(r.hits[0].snippet.contains('«'), "snippet marks matched terms: {}", r.hits[0].snippet);
}

#[test]
fn hostile_queries_never_error_or_change_meaning() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    let hostile = [
        "\"unbalanced quote",
        "redis*",
        "NEAR(redis failover)",
        "redis AND NOT failover",
        "a OR b",
        "text:redis",
        "heading:runbook",
        "((((",
        ")))",
        "^redis",
        "redis + -failover",
        "🚀🔥 redis 🚀",
        "",
        "   ",
        "*",
        "\"\"",
        "NOT",
        "AND OR NOT NEAR",
        "{redis failover}",
        "col:",
        "'; DROP TABLE notes; --",
        "\u{0301}\u{0301}",
        "redis\u{0000}failover",
    ];
    for q in hostile {
        let r = store.search(q, &SearchOptions::default());
        assert!(r.is_ok(), "{q:?}: {r:?}");
    }
    // Operators are words, not syntax: "redis AND NOT failover" must not exclude failover notes.
    let got = paths(&store, "redis AND NOT failover");
    assert!(got.contains(&"runbooks/redis-failover.md".to_string()), "{got:?}");
    assert_eq!(store.stats().unwrap().notes, 13, "the injection attempt did nothing");
}

#[test]
fn natural_questions_fall_back_to_or_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    // No single passage has all of these words.
    let r = store
        .search(
            "why did the certificate rotation at kestrel involve zebras and Route 53",
            &SearchOptions { or_terms: 3, ..Default::default() },
        )
        .unwrap();
    assert!(!r.hits.is_empty());
    assert_eq!(r.or_terms.len(), 3, "{:?}", r.or_terms);
    assert!(!r.or_terms.contains(&"zebras".to_string()), "a term found nowhere is not selective, it is absent");
}

#[test]
fn save_versions_heads_and_history() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let a = store.save_note("n.md", b"# N\n\nThe quorum is seven nodes.\n").unwrap();
    assert_eq!(a.status, SaveStatus::Created);
    assert_eq!(paths(&store, "quorum"), ["n.md"]);

    let same = store.save_note("n.md", b"# N\n\nThe quorum is seven nodes.\n").unwrap();
    assert_eq!(same.status, SaveStatus::Unchanged);
    assert_eq!(store.history("n.md").unwrap().len(), 1, "unchanged bytes make no version");

    let b = store.save_note("n.md", b"# N\n\nThe majority is five replicas.\n").unwrap();
    assert_eq!(b.status, SaveStatus::Updated);
    assert_eq!(b.note_id, a.note_id);
    assert!(paths(&store, "quorum").is_empty(), "only heads are indexed");
    assert_eq!(paths(&store, "replicas"), ["n.md"], "a just-saved note is findable at once");
    let history = store.history("n.md").unwrap();
    assert_eq!(history, [a.version_id.clone(), b.version_id.clone()]);
    assert_eq!(store.version_body(&a.version_id).unwrap().unwrap(), b"# N\n\nThe quorum is seven nodes.\n");

    // Reverting to old bytes reuses the version but records the revert in history.
    store.save_note("n.md", b"# N\n\nThe quorum is seven nodes.\n").unwrap();
    assert_eq!(store.history("n.md").unwrap().len(), 3);
    assert_eq!(store.stats().unwrap().versions, 2);
}

#[test]
fn delete_and_rename_keep_history_and_fix_links() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    store.save_note("a.md", b"Alpha links to [[b]] and [c](sub/c.md).\n").unwrap();
    store.save_note("b.md", b"Bravo body.\n").unwrap();
    store.save_note("sub/c.md", b"Charlie body, see [a](../a.md).\n").unwrap();
    store.resolve_links().unwrap();
    let links = store.links_of("a.md").unwrap();
    assert_eq!(links[0].2.as_deref(), Some("b.md"));
    assert_eq!(links[1].2.as_deref(), Some("sub/c.md"));
    assert_eq!(store.links_of("sub/c.md").unwrap()[0].2.as_deref(), Some("a.md"));

    assert!(store.delete_note("b.md").unwrap());
    assert!(paths(&store, "bravo").is_empty());
    assert_eq!(store.history("b.md").unwrap().len(), 1, "a deleted note keeps its versions");
    assert_eq!(store.links_of("a.md").unwrap()[0].2, None);
    store.save_note("b.md", b"Bravo is back.\n").unwrap();
    assert_eq!(store.links_of("a.md").unwrap()[0].2.as_deref(), Some("b.md"), "revived note is linked again");
    assert_eq!(store.history("b.md").unwrap().len(), 2);

    store.rename_note("sub/c.md", "other/c2.md").unwrap();
    assert_eq!(paths(&store, "charlie"), ["other/c2.md"]);
    assert_eq!(store.links_of("a.md").unwrap()[1].2, None, "[c](sub/c.md) no longer names it");
    assert_eq!(store.history("other/c2.md").unwrap().len(), 1);
    assert!(matches!(store.rename_note("a.md", "b.md"), Err(StoreError::PathTaken(_))));
}

#[test]
fn vault_rename_and_delete_are_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("v");
    std::fs::create_dir_all(v.join("d")).unwrap();
    std::fs::write(v.join("one.md"), "First note about walruses.\n").unwrap();
    std::fs::write(v.join("d/two.md"), "Second note about narwhals.\n").unwrap();
    let mut store = open(tmp.path());
    index_vault(&mut store, &v, &IndexOptions::default(), |_| {}).unwrap();
    let id = store.notes().unwrap().into_iter().find(|n| n.path == "one.md").unwrap().id;

    std::fs::rename(v.join("one.md"), v.join("d/uno.md")).unwrap();
    std::fs::remove_file(v.join("d/two.md")).unwrap();
    let r = index_vault(&mut store, &v, &IndexOptions::default(), |_| {}).unwrap();
    assert_eq!((r.renamed, r.deleted, r.created), (1, 1, 0), "{r:?}");
    let uno = store.notes().unwrap().into_iter().find(|n| n.path == "d/uno.md").unwrap();
    assert_eq!(uno.id, id, "a rename keeps the note id");
    assert!(paths(&store, "narwhals").is_empty());
    assert_eq!(store.history("d/two.md").unwrap().len(), 1);
}

#[test]
fn bad_files_are_skipped_or_indexed_lossily() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("v");
    std::fs::create_dir_all(&v).unwrap();
    std::fs::write(v.join("latin1.md"), b"Caf\xe9 cr\xe8me notes about espresso.\n").unwrap();
    std::fs::write(v.join("empty.md"), b"").unwrap();
    std::fs::write(v.join("image.md"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    std::fs::write(v.join("big.md"), vec![b'a'; 2_000_000]).unwrap();
    std::fs::write(v.join("ok.md"), "fine\n").unwrap();
    let mut store = open(tmp.path());
    let opts = IndexOptions { max_file_bytes: 1_000_000, ..Default::default() };
    let r = index_vault(&mut store, &v, &opts, |_| {}).unwrap();
    let skipped: Vec<_> = r.skipped.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(skipped, ["big.md", "image.md"], "{:?}", r.skipped);
    assert!(r.skipped[0].reason.contains("MB"));
    assert_eq!(r.lossy, ["latin1.md"]);
    assert_eq!(r.created, 3);
    assert_eq!(paths(&store, "espresso"), ["latin1.md"]);
    let head = store.head_of("latin1.md").unwrap().unwrap();
    assert_eq!(store.version_body(&head).unwrap().unwrap(), b"Caf\xe9 cr\xe8me notes about espresso.\n", "raw bytes kept");
}

#[test]
fn corrupt_database_is_refused_and_left_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    let junk: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&db, &junk).unwrap();
    let err = Store::open(&db, StoreOptions::default()).err().expect("corrupt file must be refused");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains(&db.display().to_string()), "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), junk, "nothing was re-created over it");
}

#[test]
fn newer_schema_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    drop(Store::open(&db, StoreOptions::default()).unwrap());
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = Store::open(&db, StoreOptions::default()).err().unwrap();
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err:?}");
    assert!(err.to_string().contains("upgrade lode"));
}

#[test]
fn locked_database_gives_a_clear_error_and_keeps_data() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    let opts = StoreOptions { busy_timeout: std::time::Duration::from_millis(100), ..Default::default() };
    let mut store = Store::open(&db, opts.clone()).unwrap();
    store.save_note("a.md", b"kept text\n").unwrap();
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE; INSERT INTO versions VALUES ('x', x'00', 1, 0, 0);").unwrap();
    let err = store.save_note("b.md", b"blocked\n").unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    assert!(err.to_string().contains("locked by another process"));
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(paths(&store, "kept"), ["a.md"]);
    store.save_note("b.md", b"now it goes through\n").unwrap();
}

#[test]
fn changed_chunk_settings_rechunk_heads_without_new_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    let mut store = Store::open(&db, StoreOptions::default()).unwrap();
    index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    let before = store.stats().unwrap();
    drop(store);
    let small = StoreOptions { chunk: lode_core::ChunkConfig { max_tokens: 12, overlap_tokens: 2, max_depth: 48 }, ..Default::default() };
    let mut store = Store::open(&db, small).unwrap();
    let r = index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    assert_eq!(r.rechunked, 13);
    let after = store.stats().unwrap();
    assert!(after.passages > before.passages, "{} -> {}", before.passages, after.passages);
    assert_eq!(after.versions, before.versions);
    assert_eq!(store.history("reference/glossary.md").unwrap().len(), 1);
}

#[test]
fn an_edit_keeps_unchanged_passages_and_the_index_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let v1 = "# Log\n\nFirst paragraph mentions albatross.\n\nSecond paragraph mentions badger.\n\nFirst paragraph mentions albatross.\n";
    store.save_note("log.md", v1.as_bytes()).unwrap();
    let before = store.passages_of("log.md").unwrap();
    let v2 = "# Log\n\nFirst paragraph mentions albatross.\n\nSecond paragraph mentions cormorant.\n\nFirst paragraph mentions albatross.\n\nNew tail.\n";
    store.save_note("log.md", v2.as_bytes()).unwrap();
    let after = store.passages_of("log.md").unwrap();
    assert_eq!(after.len(), 4);
    assert_eq!(after[0].id, before[0].id, "an unchanged passage keeps its row");
    assert_eq!(after[2].id, before[2].id, "duplicates are matched one to one");
    assert_ne!(after[1].id, before[1].id);
    let head = store.head_of("log.md").unwrap().unwrap();
    for p in &after {
        assert_eq!(p.version_id, head);
        assert_eq!(&v2[p.start..p.end], p.text);
    }
    assert!(paths(&store, "badger").is_empty());
    assert_eq!(paths(&store, "cormorant"), ["log.md"]);
    assert_eq!(store.search("albatross", &SearchOptions::default()).unwrap().hits.len(), 2);
    assert!(store.verify().unwrap().problems.is_empty(), "{:?}", store.verify().unwrap());
}

#[test]
fn an_older_schema_is_migrated_forward_keeping_data() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(include_str!("../../../migrations/0001_init.sql")).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        // A scan killed midway had deferred an index: the upgrade builds it first.
        conn.execute_batch(
            "DROP INDEX note_versions_version;
             INSERT INTO meta VALUES ('deferred_index:note_versions_version', 'CREATE INDEX note_versions_version ON note_versions(version_id)');",
        )
        .unwrap();
        let body = "# A\n\n## Sub part\n\nText #topic here.\n";
        conn.execute("INSERT INTO versions VALUES ('v', ?1, 1, 0, 0)", [body.as_bytes()]).unwrap();
        conn.execute(
            "INSERT INTO notes (path, stem, title, head_version, created_at, updated_at) VALUES ('a.md', 'a', 'A', 'v', 0, 0)",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO passages (note_id, version_id, ordinal, start, end, line, kind, heading, parent_id, parent_start, parent_end, text, body)
             VALUES (1, 'v', 0, 16, 33, 5, 'paragraph', 'A › Sub part', 'v:0-33', 0, 33, 'Text #topic here.', 'Text #topic here.')",
            [],
        )
        .unwrap();
    }
    let store = Store::open(&db, StoreOptions::default()).unwrap();
    assert_eq!(store.stats().unwrap().schema_version, lode_store::SCHEMA_VERSION);
    assert!(store.deferred_indexes().unwrap().is_empty());
    assert_eq!(indexes(&db).0.iter().filter(|(n, _)| n == "note_versions_version").count(), 1);
    // Every index as a new store defines it (v11 redefines headings_folded).
    let fresh = tmp.path().join("fresh");
    drop(open(&fresh));
    assert_eq!(indexes(&db), indexes(&fresh.join("lode.db")));
    assert_eq!(store.notes().unwrap()[0].path, "a.md");
    // Filled by the upgrade: section names (symbols) and tags of existing heads.
    let names: Vec<String> = store.symbols("sub p", 10).unwrap().into_iter().map(|s| s.1).collect();
    assert_eq!(names, ["Sub part"]);
    assert_eq!(store.tagged("TOPIC", 10).unwrap().len(), 1);
    // Sections of existing notes (v8) rank them: the hit is still the exact passage.
    let hits = store.search("topic", &SearchOptions::default()).unwrap().hits;
    assert_eq!((hits.len(), hits[0].text.as_str(), hits[0].start), (1, "Text #topic here.", 16));
    store.log_egress("api.example.com:443", "synthesis", &[1, 2], 10, 0).unwrap();
    assert_eq!(store.egress_log().unwrap()[0].passages, [1, 2]);
}

#[test]
fn symbols_fold_unicode_case_and_take_wildcards_literally() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    for (path, body) in [
        ("a.md", "# Ärger im Büro\n\n## Straße und ÉCOLE\n\ntext\n"),
        ("b.md", "# 100% done\n\ntext\n"),
        ("c.md", "# snake_case notes\n\ntext\n"),
        ("d.md", "# Plain title\n\n## Back\\slash\n\ntext\n"),
    ] {
        store.save_note(path, body.as_bytes()).unwrap();
    }
    let names = |q: &str| store.symbols(q, 50).unwrap().into_iter().map(|(_, n, _, _)| n).collect::<Vec<_>>();
    assert_eq!(names("ärger"), ["Ärger im Büro"]);
    assert_eq!(names("ÄRGER"), ["Ärger im Büro"]);
    assert_eq!(names("école"), ["Straße und ÉCOLE"]);
    assert_eq!(names("100%"), ["100% done"], "% is a character, not a wildcard");
    assert_eq!(names("e_c"), ["snake_case notes"], "_ is a character, not a wildcard");
    assert_eq!(names("_"), Vec::<String>::new(), "one or two characters match the start of a name");
    assert_eq!(names("sn"), ["snake_case notes"]);
    assert_eq!(names("ÄR"), ["Ärger im Büro"], "short non-ASCII queries fold too");
    assert_eq!(names("ca"), Vec::<String>::new());
    assert_eq!(names("k\\s"), ["Back\\slash"]);
    assert_eq!(names("PLAIN"), ["Plain title"]);
    assert!(names("zzz").is_empty());
    assert_eq!(store.symbols("", 2).unwrap().len(), 2, "the limit holds");
    // A short non-ASCII query is an index lookup, not a read of the first rows: a match behind
    // 3,000 other names is found.
    let mut many = String::from("# Many\n\n");
    for i in 0..3000 {
        many.push_str(&format!("## Aaa {i}\n\ntext\n\n"));
    }
    store.save_note("many.md", many.as_bytes()).unwrap();
    store.save_note("z.md", "# Zebra\n\n## Élan vital\n\ntext\n".as_bytes()).unwrap();
    let names = |q: &str| store.symbols(q, 50).unwrap().into_iter().map(|(_, n, _, _)| n).collect::<Vec<_>>();
    assert_eq!(names("él"), ["Élan vital"]);
    assert_eq!(names("É"), ["Élan vital"]);
    store.save_note("i.md", "# İzmir notes\n\ntext\n".as_bytes()).unwrap();
    let names = |q: &str| store.symbols(q, 50).unwrap().into_iter().map(|(_, n, _, _)| n).collect::<Vec<_>>();
    assert_eq!(names("İ"), ["İzmir notes"], "a letter whose lowercase is two characters");
    // Two characters typed are a prefix, even when their lowercase is three ("i̇z"); a query
    // with no trigram never reaches the trigram index (an empty FTS5 query is an error).
    assert_eq!(names("İz"), ["İzmir notes"]);
    assert_eq!(names("İİ"), Vec::<String>::new());
    assert!(store.complete_notes("İz", 5).is_ok());
    // A name's final "Σ" lowercases to "ς".
    store.save_note("g.md", "# ΑΣ\n\ntext\n".as_bytes()).unwrap();
    let names = |q: &str| store.symbols(q, 50).unwrap().into_iter().map(|(_, n, _, _)| n).collect::<Vec<_>>();
    assert_eq!(names("ας"), ["ΑΣ"]);
    assert_eq!(names("ΑΣ"), ["ΑΣ"]);
}

#[test]
fn long_substring_queries_return_exactly_the_names_containing_them() {
    // A long ASCII query looks up a few of its trigrams and checks the substring on each row:
    // decoys hold every trigram of the query, or all of the picked ones, out of order.
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let mut body = String::from("# Decoys\n\n");
    for i in 0..30 {
        body.push_str(&format!("## gateway cache layer {i}\n\ntext\n\n"));
        body.push_str(&format!("## cache layer of the gateway {i}\n\ntext\n\n"));
    }
    body.push_str("## The Cache Gateway Layer\n\ntext\n\n## say \"cache gateway\" twice\n\ntext\n");
    store.save_note("d.md", body.as_bytes()).unwrap();
    store.save_note("t.md", b"# Old cache gateway layer notes\n\ntext\n").unwrap();
    let names = |q: &str, limit: usize| store.symbols(q, limit).unwrap().into_iter().map(|(_, n, _, _)| n).collect::<Vec<_>>();
    assert_eq!(names("cache gateway layer", 50), ["Old cache gateway layer notes", "The Cache Gateway Layer"]);
    assert_eq!(names("CACHE GATEWAY LAYER", 50).len(), 2, "case folds");
    assert_eq!(names("\"cache gateway\" tw", 50), ["say \"cache gateway\" twice"], "quotes are characters");
    assert_eq!(names("e gateway cache l", 50), Vec::<String>::new(), "every trigram present, never in this order");
    // The limit counts names that match, not rows the index returned.
    assert_eq!(names("cache layer of the", 3).len(), 3);
    assert_eq!(names("layer of the gateway 7", 50), ["cache layer of the gateway 7"]);
    assert_eq!(names("layer of the gateway 2", 50).len(), 11, "2 and 20-29");
}

#[test]
fn substring_lookups_check_every_candidate_the_trigram_index_returns() {
    // The trigram indexes keep no positions (schema v10): a lookup finds the names holding the
    // query's trigrams in any order and checks the substring on each. Here decoys hold every
    // trigram of the query out of order, and come before the one real match (lower rowids).
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let mut body = String::from("# Decoys\n\n");
    for i in 0..200 {
        body.push_str(&format!("## cab abc bca {i}\n\ntext\n\n## GER rge ärg {i}\n\ntext\n\n"));
    }
    store.save_note("decoys.md", body.as_bytes()).unwrap();
    for i in 0..60 {
        store.save_note(&format!("t{i:02}.md"), format!("# ger RGE Ärg {i}\n\ntext\n").as_bytes()).unwrap();
    }
    store.save_note("z.md", b"# Der grosse \xc3\x84rger\n\n## xabcaby\n\ntext\n\n## Noch mehr \xc3\xa4rger hier\n\ntext\n").unwrap();
    let names = |q: &str, limit: usize| store.symbols(q, limit).unwrap().into_iter().map(|(_, n, _, _)| n).collect::<Vec<_>>();
    // A short ASCII query: SQL checks the substring, so the limit counts real matches only.
    assert_eq!(names("abcab", 1), ["xabcaby"]);
    assert_eq!(names("ABCAB", 5), ["xabcaby"]);
    // A non-ASCII query: checked in Rust, as the rows come.
    assert_eq!(names("ärger", 5), ["Der grosse Ärger", "Noch mehr ärger hier"]);
    assert_eq!(names("ÄRGER", 1), ["Der grosse Ärger"]);
    assert_eq!(names("ärge", 5), ["Der grosse Ärger", "Noch mehr ärger hier"], "each decoy holds \"ärg\" and \"rge\"");
    // Link completion reads titles the same way.
    let titles: Vec<String> = store.complete_notes("ärger", 3).unwrap().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(titles, ["Der grosse Ärger"]);
    let titles: Vec<String> = store.complete_notes("ärge", 3).unwrap().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(titles, ["Der grosse Ärger"]);
    assert!(store.verify().unwrap().problems.is_empty());
}

#[test]
fn symbols_starting_with_the_query_come_from_the_name_index_and_substrings_fill_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    store.save_note("p.md", b"# Replica plan\n\n## Replica quorum\n\ntext\n\nmore text\n\n## Replica lag\n\ntext\n").unwrap();
    store.save_note("s.md", b"# Notes\n\n## About the replica set\n\ntext\n").unwrap();
    let names_in =
        |store: &Store, q: &str, limit: usize| store.symbols(q, limit).unwrap().into_iter().map(|(_, n, _, _)| n).collect::<Vec<_>>();
    // Fewer names start with it than the limit: substring matches join, each name once (a
    // section of two passages is one symbol).
    assert_eq!(names_in(&store, "replica", 10), ["Replica plan", "Replica quorum", "Replica lag", "About the replica set"]);
    let quorum = store.symbols("replica q", 10).unwrap();
    assert_eq!(quorum, [("p.md".to_owned(), "Replica quorum".to_owned(), 3, false)], "at the heading's line");
    assert_eq!(names_in(&store, "set", 10), ["About the replica set"], "a match inside a name");
    // A heading with nothing under it is a symbol too; a deleted note's are gone.
    store.save_note("e.md", b"# Empty sections\n\n## Replica placeholder\n\n## Next\n\nbody\n").unwrap();
    assert_eq!(names_in(&store, "placeholder", 10), ["Replica placeholder"]);
    store.delete_note("e.md").unwrap();
    assert!(names_in(&store, "placeholder", 10).is_empty());
    assert!(store.verify().unwrap().problems.is_empty());
    // Names that start with it fill the limit: those are the answer.
    let two = names_in(&store, "replica", 2);
    assert_eq!(two.len(), 2);
    assert!(two.iter().all(|n| n.starts_with("Replica")), "{two:?}");
    // A name twice in a note is one symbol at its first line, whichever lookup finds it.
    store.save_note("t.md", b"# T\n\n## Replica twice\n\ntext\n\n## Replica twice\n\ntext\n").unwrap();
    for q in ["replica tw", "lica twi"] {
        assert_eq!(store.symbols(q, 10).unwrap(), [("t.md".to_owned(), "Replica twice".to_owned(), 3, false)], "{q}");
    }
    // A renamed note's sections are at its new path, by prefix and by substring; so are those
    // of a note renamed onto a deleted note's old path.
    store.rename_note("p.md", "q/p2.md").unwrap();
    store.delete_note("s.md").unwrap();
    store.rename_note("t.md", "s.md").unwrap();
    for q in ["replica q", "ica quo"] {
        assert_eq!(store.symbols(q, 10).unwrap(), [("q/p2.md".to_owned(), "Replica quorum".to_owned(), 3, false)], "{q}");
    }
    assert_eq!(store.symbols("lica twi", 10).unwrap()[0].0, "s.md");
    assert!(store.verify().unwrap().problems.is_empty(), "{:?}", store.verify().unwrap());
}

/// Schema v11 keeps each heading's note path in its row: a v10 store is upgraded with its
/// headings' paths filled in, and a folded-name index a killed scan had deferred under its v10
/// definition is made by the upgrade under the new one.
#[test]
fn a_v10_store_gets_its_headings_paths_and_the_new_name_index() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    {
        let mut store = open(tmp.path());
        store.save_note("dir/a.md", b"# Alpha note\n\n## Quorum rules\n\ntext\n").unwrap();
        store.save_note("b.md", b"# Beta\n\n## Quorum size\n\ntext\n").unwrap();
    }
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "DROP INDEX headings_folded;
             DROP INDEX versions_lossy;
             ALTER TABLE headings DROP COLUMN path;
             INSERT INTO meta VALUES ('deferred_index:headings_folded', 'CREATE INDEX headings_folded ON headings(lower(name))');
             PRAGMA foreign_keys = OFF;
             INSERT INTO headings (note_id, name, line, level) VALUES (999, 'Orphan', 1, 2);
             PRAGMA user_version = 10;",
        )
        .unwrap();
    }
    // A heading whose note is gone (written around the store) neither stops the upgrade nor
    // goes unsaid.
    let mut store = open(tmp.path());
    let problems = store.verify().unwrap().problems;
    assert!(problems.iter().any(|p| p.contains("headings row") && p.contains("missing notes row")), "{problems:?}");
    rusqlite::Connection::open(&db).unwrap().execute("DELETE FROM headings WHERE note_id = 999", []).unwrap();
    assert_eq!(store.stats().unwrap().schema_version, lode_store::SCHEMA_VERSION);
    assert!(store.deferred_indexes().unwrap().is_empty());
    let fresh = tmp.path().join("fresh");
    drop(open(&fresh));
    assert_eq!(indexes(&db), indexes(&fresh.join("lode.db")));
    let found: Vec<(String, String)> = store.symbols("quorum", 10).unwrap().into_iter().map(|(p, n, _, _)| (p, n)).collect();
    assert_eq!(found, [("b.md".to_owned(), "Quorum size".to_owned()), ("dir/a.md".to_owned(), "Quorum rules".to_owned())]);
    assert!(store.verify().unwrap().problems.is_empty(), "{:?}", store.verify().unwrap());

    // An older lode still running beside the upgraded store writes headings without a path:
    // the check says so and what mends it, and mending gives symbols their note's path again.
    rusqlite::Connection::open(&db).unwrap().execute("UPDATE headings SET path = '' WHERE name = 'Quorum rules'", []).unwrap();
    let problems = store.verify().unwrap().problems;
    assert!(problems.iter().any(|p| p.contains("1 headings name another path") && p.contains("lode index")), "{problems:?}");
    assert_eq!(store.mend_heading_paths().unwrap(), 1);
    assert_eq!(store.mend_heading_paths().unwrap(), 0);
    assert_eq!(store.symbols("quorum r", 10).unwrap()[0].0, "dir/a.md");
    assert!(store.verify().unwrap().problems.is_empty(), "{:?}", store.verify().unwrap());
}

#[test]
fn a_batch_commits_together_and_a_failed_write_rolls_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let reader = Store::open(&tmp.path().join("lode.db"), StoreOptions { read_only: true, ..StoreOptions::default() }).unwrap();
    store.begin_batch().unwrap();
    assert!(store.in_batch());
    store.save_note("a.md", b"# A\n\nThe quorum is seven nodes.\n").unwrap();
    store.save_note("b.md", b"# B\n\nThe majority is five replicas.\n").unwrap();
    assert!(!store.delete_note("never.md").unwrap(), "a no-op inside a batch keeps the batch");
    store.delete_note("b.md").unwrap();
    store.save_note("c.md", b"# C\n\nA witness breaks ties.\n").unwrap();
    assert_eq!(paths(&store, "quorum"), ["a.md"], "the writer sees its own batch");
    assert!(paths(&reader, "quorum").is_empty(), "readers see none of a batch before it ends");
    store.end_batch().unwrap();
    assert!(!store.in_batch());
    assert_eq!(paths(&reader, "quorum"), ["a.md"]);
    assert_eq!(paths(&reader, "witness"), ["c.md"]);
    assert!(paths(&reader, "replicas").is_empty());

    // A refused rename writes nothing and keeps the batch, as a no-op delete does.
    store.begin_batch().unwrap();
    assert!(matches!(store.rename_note("a.md", "c.md"), Err(StoreError::PathTaken(_))));
    assert!(matches!(store.rename_note("never.md", "z.md"), Err(StoreError::UnknownNote(_))));
    assert!(store.in_batch(), "a refused rename ended the batch");
    store.end_batch().unwrap();

    // A failing write inside a batch takes the whole batch with it (no half-written note).
    fail_saves_of(&tmp.path().join("lode.db"), "e.md");
    store.begin_batch().unwrap();
    store.save_note("d.md", b"# D\n\nLeases expire.\n").unwrap();
    assert!(store.save_note("e.md", b"# E\n\nNever written.\n").is_err());
    assert!(!store.in_batch(), "the batch was rolled back");
    assert!(paths(&reader, "leases").is_empty());
    assert!(store.verify().unwrap().problems.is_empty());
    // Ending with no batch open is a no-op; writes outside a batch commit on their own.
    store.end_batch().unwrap();
    store.save_note("d.md", b"# D\n\nLeases expire.\n").unwrap();
    assert_eq!(paths(&reader, "leases"), ["d.md"]);
}

/// Makes every save of `path` fail inside SQLite (a trigger that aborts the note's insert): a
/// write that fails half-way through a batch.
fn fail_saves_of(db: &Path, path: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(&format!(
        "CREATE TRIGGER fail_saves BEFORE INSERT ON notes WHEN new.path = '{path}' BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
    ))
    .unwrap();
}

#[test]
fn apply_batch_redoes_a_rolled_back_batch_one_step_at_a_time() {
    use lode_store::vault::{apply_batch, Step};
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    fail_saves_of(&tmp.path().join("lode.db"), "bad.md");
    let steps: Vec<Step> = ["one", "two", "bad", "three", "four"].iter().map(|n| Step::Save { rel: format!("{n}.md") }).collect();
    let mut calls = 0;
    let results = apply_batch(
        &mut store,
        &steps,
        |store, step| {
            calls += 1;
            let Step::Save { rel } = step else { unreachable!() };
            if rel == "bad.md" {
                // A write that fails half-way: one note is saved, then the next save fails.
                store.save_note("half.md", b"# Half\n\nhalf written\n")?;
                return store.save_note(rel, b"# Bad\n\nnever written\n").map(|_| 0);
            }
            store.save_note(rel, format!("# {rel}\n\nbody of {rel}\n").as_bytes()).map(|o| o.passages)
        },
        || false,
    );
    assert_eq!(results.len(), 3, "the batch ends at the failed step");
    assert!(results[2].is_err());
    assert!(results[..2].iter().all(|r| r.is_ok()), "{results:?}");
    assert_eq!(calls, 3 + 3, "three steps in the batch, then those three again one at a time");
    let rest = apply_batch(
        &mut store,
        &steps[3..],
        |store, step| {
            let Step::Save { rel } = step else { unreachable!() };
            store.save_note(rel, format!("# {rel}\n\nbody of {rel}\n").as_bytes()).map(|o| o.passages)
        },
        || false,
    );
    assert_eq!(rest.len(), 2);
    for n in ["one", "two", "three", "four"] {
        assert_eq!(paths(&store, n), [format!("{n}.md")], "{n}");
    }
    assert!(!store.in_batch());
    assert!(store.verify().unwrap().problems.is_empty());

    // `stop` ends a batch early, committed: the caller goes on with the rest.
    let more: Vec<Step> = ["five", "six", "seven"].iter().map(|n| Step::Save { rel: format!("{n}.md") }).collect();
    let mut asked = 0;
    let done = apply_batch(
        &mut store,
        &more,
        |store, step| {
            let Step::Save { rel } = step else { unreachable!() };
            store.save_note(rel, format!("# {rel}\n\nbody of {rel}\n").as_bytes()).map(|o| o.passages)
        },
        || {
            asked += 1;
            asked == 2
        },
    );
    assert_eq!(done.len(), 2);
    assert!(!store.in_batch());
    assert_eq!(paths(&store, "six"), ["six.md"]);
    assert!(paths(&store, "seven").is_empty());
}

#[test]
fn upgrading_from_v5_fills_headings_of_existing_heads() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        for sql in [
            include_str!("../../../migrations/0001_init.sql"),
            include_str!("../../../migrations/0002_egress_log.sql"),
            include_str!("../../../migrations/0003_vectors.sql"),
            include_str!("../../../migrations/0004_stat_symbols.sql"),
            include_str!("../../../migrations/0005_nav.sql"),
        ] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 5).unwrap();
        let body = "# Plan\n\n## Empty section\n\n## Rollout\n\nShip it.\n";
        conn.execute("INSERT INTO versions VALUES ('v', ?1, 1, 0, 0)", [body.as_bytes()]).unwrap();
        conn.execute(
            "INSERT INTO notes (path, stem, title, head_version, created_at, updated_at) VALUES ('p.md', 'p', 'Plan', 'v', 0, 0)",
            [],
        )
        .unwrap();
    }
    let store = Store::open(&db, StoreOptions::default()).unwrap();
    let syms = store.symbols("section", 10).unwrap();
    assert_eq!(syms, [("p.md".to_owned(), "Empty section".to_owned(), 3, false)]);
    assert_eq!(store.symbols("rollout", 10).unwrap()[0].2, 5);
}

/// The same note written one sentence per paragraph ranks as it does written as one paragraph:
/// a section holding all the question's words across its passages beats a passage that repeats
/// one of them, and the hit is still one exact passage of it.
#[test]
fn sections_rank_from_all_their_passages() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    // A vault around them, so BM25's term rarity means something.
    index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    let sentences = [
        "The heater switches on below eight degrees in the greenhouse.",
        "Seedlings stay on the north bench until May.",
        "Tomato plants fruit in July.",
    ];
    let one_paragraph = format!("# Garden log\n\n{}\n", sentences.join(" "));
    let one_per_line = format!("# Garden log\n\n{}\n", sentences.join("\n\n"));
    let decoy = "# Glazing\n\nEach bench uses greenhouse glass; the bench by the greenhouse door uses it too.\n";
    store.save_note("decoy.md", decoy.as_bytes()).unwrap();
    let q = "which bench do the greenhouse tomato seedlings use";
    for (shape, body) in [("paragraph", &one_paragraph), ("sentence", &one_per_line)] {
        store.save_note("garden.md", body.as_bytes()).unwrap();
        let hits = store.search(q, &SearchOptions::default()).unwrap().hits;
        assert_eq!(hits[0].path, "garden.md", "{shape} shape: {:?}", hits.iter().map(|h| (&h.path, &h.text)).collect::<Vec<_>>());
        assert_eq!(&body[hits[0].start..hits[0].end], hits[0].text, "{shape} shape: the hit is an exact passage");
        // Passages alone: in the one-per-line shape the decoy's passage wins.
        let alone = store.search(q, &SearchOptions { section_weight: 0.0, ..Default::default() }).unwrap().hits;
        if shape == "sentence" {
            assert_eq!(alone[0].path, "decoy.md", "the fixture must defeat passage-only ranking, else it proves nothing");
        }
    }
}

/// Deletions are queued per model: a leader survives its window, so one model's queued leader
/// can be another model's live row, and neither may delete or clear the other's.
#[test]
fn vector_deletions_are_kept_per_model() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let body = "# Log\n\nFirst line of the log.\n\nSecond line of the log.\n\nThird line of the log.\n";
    store.save_note("log.md", body.as_bytes()).unwrap();
    let ids: Vec<i64> = store.passages_of("log.md").unwrap().iter().map(|p| p.id).collect();
    assert_eq!(ids.len(), 3);
    // Model a: one window of all three; model b: [first] and [second, third].
    assert_eq!(store.mark_windows("a", std::slice::from_ref(&ids)).unwrap(), 1);
    assert_eq!(store.mark_windows("b", &[vec![ids[0]], vec![ids[1], ids[2]]]).unwrap(), 2);
    // The third line changes: a's window (leader ids[0]) and b's second (leader ids[1]) go.
    store.save_note("log.md", body.replace("Third line", "Last line").as_bytes()).unwrap();
    assert_eq!(store.vector_deletions("a").unwrap(), vec![ids[0]]);
    assert_eq!(store.vector_deletions("b").unwrap(), vec![ids[1]]);
    assert_eq!(store.vector_freshness("b").unwrap().with_vectors, 1, "b's first window is intact");
    // Clearing one model's queue leaves the other's.
    store.clear_vector_deletions("a", &[ids[0]]).unwrap();
    assert_eq!(store.vector_deletions("b").unwrap(), vec![ids[1]]);
}

/// Sections found by the section leg alone stand in with one of their passages; whatever the
/// question's spelling (diacritics the index folds and Rust does not, a term only the heading
/// holds, a term split over two passages), the search answers with exact passages and snippets
/// never fail it.
#[test]
fn section_only_hits_answer_with_exact_passages() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    let body = "# Café notes\n\n## Opening\n\nHours.\n\nThe café opens at eight.\n\nCrème brûlée on Fridays.\n";
    store.save_note("cafe.md", body.as_bytes()).unwrap();
    for q in ["cafe opening", "CAFÉ OPENS", "creme brulee fridays", "opening", "cafe eight creme", "café\u{301} opens"] {
        let hits = store.search(q, &SearchOptions::default()).unwrap_or_else(|e| panic!("{q:?}: {e}")).hits;
        assert!(hits.iter().any(|h| h.path == "cafe.md"), "{q:?}: {:?}", hits.iter().map(|h| &h.path).collect::<Vec<_>>());
        for h in hits.iter().filter(|h| h.path == "cafe.md") {
            assert_eq!(&body[h.start..h.end], h.text, "{q:?}");
        }
    }
}

/// Two writers (a `lode index` beside a `lode serve`) creating the same new notes at once: every
/// save succeeds — the one that comes second finds the note the other created, inside its own
/// write transaction — and no save fails with "UNIQUE constraint failed: notes.path".
#[test]
fn two_writers_creating_the_same_notes_never_collide() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lode.db");
    drop(Store::open(&db, StoreOptions::default()).unwrap());
    let paths: Vec<String> = (0..300).map(|i| format!("race/n{i}.md")).collect();
    let run = |who: &'static str| {
        let db = db.clone();
        let paths = paths.clone();
        std::thread::spawn(move || {
            let mut store = Store::open(&db, StoreOptions::default()).unwrap();
            let mut failures = Vec::new();
            for p in &paths {
                if let Err(e) = store.save_note(p, format!("# {p}\n\nWritten by {who}.\n").as_bytes()) {
                    failures.push(format!("{p}: {e}"));
                }
            }
            failures
        })
    };
    let (a, b) = (run("the server"), run("lode index"));
    let failures: Vec<String> = a.join().unwrap().into_iter().chain(b.join().unwrap()).collect();
    assert!(failures.is_empty(), "{} saves failed, e.g. {:?}", failures.len(), failures.first());
    let store = Store::open(&db, StoreOptions::default()).unwrap();
    assert_eq!(store.notes().unwrap().len(), 300);
}

#[test]
fn short_version_ids_grow_only_where_two_versions_share_a_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    index_vault(&mut store, &vault(), &IndexOptions::default(), |_| {}).unwrap();
    let head = store.head_of("runbooks/redis-failover.md").unwrap().unwrap();
    assert_eq!(store.short_version_id(&head).unwrap(), &head[..12]);
    assert_eq!(store.versions_with_prefix(&head[..12], 2).unwrap(), std::slice::from_ref(&head));
    assert_eq!(store.versions_with_prefix(&head[..12].to_uppercase(), 2).unwrap(), std::slice::from_ref(&head), "any case");
    assert!(store.versions_with_prefix("zz", 2).unwrap().is_empty(), "not hex");
    assert!(store.versions_with_prefix("", 2).unwrap().is_empty());
    drop(store);
    // Two versions that share the first 17 hex digits (written by hand: SHA-256 gives none).
    let twin_a = format!("{}0{}", &head[..17], "a".repeat(46));
    let twin_b = format!("{}0{}", &head[..17], "b".repeat(46));
    let conn = rusqlite::Connection::open(tmp.path().join("lode.db")).unwrap();
    for id in [&twin_a, &twin_b] {
        conn.execute("INSERT INTO versions (id, body, size, created_at) VALUES (?1, x'00', 1, 0)", [id]).unwrap();
    }
    drop(conn);
    let store = open(tmp.path());
    // The first 12, 16 and 20 digits are shared by three versions; 20 tell the real one apart
    // when it differs at digit 18 (else 24, 28…).
    let short = store.short_version_id(&head).unwrap();
    assert!(short.len() > 17 && head.starts_with(&short), "{short}");
    assert_eq!(store.versions_with_prefix(&short, 2).unwrap(), std::slice::from_ref(&head));
    assert_eq!(store.versions_with_prefix(&head[..12], 5).unwrap().len(), 3, "a 12-digit prefix is now ambiguous");
    let a = store.short_version_id(&twin_a).unwrap();
    assert!(a.len() >= 20 && store.versions_with_prefix(&a, 2).unwrap() == [twin_a.clone()], "{a}");
}

/// The shared tier's versions kept beside the store: only bytes that hash to their id are kept
/// or read back, and no id, however written, reaches outside the folder or another version.
#[test]
fn shared_versions_are_kept_only_under_their_hash_and_read_back_only_intact() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let body = b"# Team\n\nThe quorum is 2.\n";
    let id = lode_store::version_id(body);
    // Refused: bytes that are not the id's, and ids that are not a hash of the bytes.
    for (bad_id, bytes) in
        [(id.as_str(), &b"# Team\n\nThe quorum is 3.\n"[..]), ("../../../etc/passwd", &body[..]), (&id[..12], &body[..]), ("", &body[..])]
    {
        assert!(store.cache_shared_body(bad_id, bytes).is_err(), "{bad_id:?} kept");
    }
    assert_eq!(store.version_body(&id).unwrap(), None, "nothing kept yet");
    store.cache_shared_body(&id, body).unwrap();
    store.cache_shared_body(&id, body).unwrap(); // twice is once
    assert_eq!(store.version_body(&id).unwrap().as_deref(), Some(&body[..]));
    assert_eq!(store.versions_with_prefix(&id[..12], 2).unwrap(), vec![id.clone()]);
    assert_eq!(store.versions_with_prefix(&id[..12].to_uppercase(), 2).unwrap(), vec![id.clone()], "hex in any case");
    // Lookups by ids that are not 64 hex digits find nothing, whatever files lie around.
    let cache = store.shared_cache_dir().unwrap();
    std::fs::write(cache.join("notes.md"), "x").unwrap();
    std::fs::write(dir.path().join("secret.md"), "x").unwrap();
    for hostile in ["../secret.md", "notes.md", &format!("{id}/.."), "%2e%2e/secret.md", &format!("{id} ")] {
        assert_eq!(store.version_body(hostile).unwrap(), None, "{hostile:?}");
        assert!(store.versions_with_prefix(hostile, 2).unwrap().is_empty(), "{hostile:?}");
    }
    // A kept file damaged afterwards (a flipped byte, cut short, emptied) is no version.
    let file = cache.join(&id);
    for damaged in [b"# Team\n\nThe quorum is 3.\n".to_vec(), body[..10].to_vec(), Vec::new()] {
        std::fs::write(&file, &damaged).unwrap();
        assert_eq!(store.version_body(&id).unwrap(), None, "damaged bytes were read back as the version");
        // Nor does it answer a citation's prefix (else the tier is never asked again) …
        assert!(store.versions_with_prefix(&id[..12], 2).unwrap().is_empty(), "a damaged file answered a prefix");
        // … and keeping the version again repairs it.
        store.cache_shared_body(&id, body).unwrap();
        assert_eq!(store.version_body(&id).unwrap().as_deref(), Some(&body[..]), "a damaged file was not written again");
        assert_eq!(store.versions_with_prefix(&id[..12], 2).unwrap(), vec![id.clone()]);
    }
    // Writers of one version at once (an answer's and a hover's) each leave it whole.
    std::fs::remove_file(&file).unwrap();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| store_path_writer(dir.path(), &id, body));
        }
    });
    assert_eq!(store.version_body(&id).unwrap().as_deref(), Some(&body[..]));
    let left: Vec<_> =
        std::fs::read_dir(&cache).unwrap().flatten().map(|e| e.file_name()).filter(|n| n.to_string_lossy().ends_with(".tmp")).collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// One writer of a shared version through a store of its own (as a reader thread has).
fn store_path_writer(dir: &std::path::Path, id: &str, body: &[u8]) {
    let store = open(dir);
    for _ in 0..20 {
        store.cache_shared_body(id, body).unwrap();
        assert_eq!(store.version_body(id).unwrap().as_deref(), Some(body));
    }
}

/// Indexes the vault at `root`, and what `see` says halfway through its 260 notes (from
/// another connection: what is committed then).
fn index_seeing<T>(store: &mut Store, root: &Path, mut see: impl FnMut() -> T) -> (lode_store::vault::IndexReport, Option<T>) {
    let mut seen = None;
    let report = index_vault(store, root, &IndexOptions::default(), |p| {
        if p.phase == "indexing" && p.done == 130 {
            seen = Some(see());
        }
    })
    .unwrap();
    (report, seen)
}

/// FTS5's `automerge` setting of the passages index as stored in the database (`None`: never
/// set, FTS5's own 4).
fn automerge(db: &Path) -> Option<i64> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT v FROM passages_fts_config WHERE k = 'automerge'", [], |r| r.get(0)).ok()
}

#[test]
fn a_cold_index_merges_sixteen_segments_at_a_time_and_ends_with_fts5s_own_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vault");
    std::fs::create_dir_all(&root).unwrap();
    for i in 0..260 {
        let body = format!("# Note {i}\n\nParagraph about topic{i} and the shared word lighthouse.\n\n## Part\n\n- item {i}\n");
        std::fs::write(root.join(format!("n{i:03}.md")), body).unwrap();
    }
    let db = tmp.path().join("lode.db");
    let mut store = open(tmp.path());
    let (report, seen) = index_seeing(&mut store, &root, || automerge(&db));
    assert_eq!(report.created, 260);
    assert_eq!(seen, Some(Some(16)), "the cold index did not write in bulk");
    assert_eq!(automerge(&db), Some(4), "bulk merging outlived the scan");
    assert_eq!(paths(&store, "topic217"), vec!["n217.md".to_owned()]);
    assert!(!paths(&store, "lighthouse").is_empty());

    // A scan killed while writing in bulk leaves the setting on; the next scan ends it, even
    // one that writes a single note (which is no bulk work of its own).
    store.begin_bulk().unwrap();
    drop(store);
    assert_eq!(automerge(&db), Some(16));
    std::fs::write(root.join("n007.md"), "# Note 7\n\nNow about harbours.\n").unwrap();
    let mut store = open(tmp.path());
    let report = index_vault(&mut store, &root, &IndexOptions::default(), |_| {}).unwrap();
    assert_eq!((report.updated, report.unchanged), (1, 259));
    assert_eq!(automerge(&db), Some(4));
    assert_eq!(paths(&store, "harbours"), vec!["n007.md".to_owned()]);
    assert!(!paths(&store, "topic7").contains(&"n007.md".to_owned()), "the old version's passages are still found");

    // A few notes changed in a large vault are no bulk work: FTS5's settings are not touched.
    assert!(!lode_store::vault::is_bulk(260, 2_601));
    assert!(lode_store::vault::is_bulk(260, 2_600));
    assert!(!lode_store::vault::is_bulk(199, 199), "a small vault's first index");
}

/// The indexes of the database at `db` with their definitions (SQLite's own, for `UNIQUE` and
/// `PRIMARY KEY`, have none and are left out), and the definitions a scan deferred.
fn indexes(db: &Path) -> (Vec<(String, String)>, Vec<String>) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name").unwrap();
    let defs = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().collect::<Result<_, _>>().unwrap();
    let mut st = conn.prepare("SELECT key FROM meta WHERE key LIKE 'deferred_index:%' ORDER BY key").unwrap();
    let deferred = st.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap();
    (defs, deferred)
}

/// What a person gets through the indexes a cold index defers: symbols by prefix (folded
/// headings and titles), notes by tag, a version's note, and the notes linking to one.
fn answers_through_deferred(store: &Store, root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    out.extend(store.symbols("part 21", 20).unwrap().into_iter().map(|s| format!("symbol {} {}", s.0, s.1)));
    out.extend(store.symbols("note 21", 20).unwrap().into_iter().map(|s| format!("symbol {} {}", s.0, s.1)));
    out.extend(store.tagged("TOPIC/B7", 20).unwrap().into_iter().map(|t| format!("tag {} {}", t.0, t.1)));
    let v = store.head_of("n042.md").unwrap().unwrap();
    out.push(format!("version of {:?}", store.head_for_version(&v).unwrap()));
    let body = std::fs::read_to_string(root.join("n042.md")).unwrap();
    out.push(format!("body {}", body.len()));
    let incoming: Vec<String> = store.linking_notes("n003.md").unwrap().into_iter().map(|b| b.0).collect();
    out.push(format!("backlinks of n003 {incoming:?}"));
    out
}

/// A cold index adds to its random-key indexes (version ids, folded names, link targets) on a
/// page of their own per row once they outgrow a batch, so it builds them at its end instead.
/// What must hold: the finished index has exactly the indexes a fresh schema has, and answers
/// through them; a scan killed midway loses none (the next scan, or the next upgrade, builds
/// them from their kept definitions, and meanwhile every lookup still answers); a scan that
/// writes fewer notes than the store holds defers nothing; and only definitions the store
/// wrote itself are ever run.
#[test]
fn a_cold_index_builds_its_random_key_indexes_at_the_end_and_a_killed_scan_loses_none() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vault");
    std::fs::create_dir_all(&root).unwrap();
    for i in 0..260 {
        let body = format!(
            "---\naliases: [Alias {i}]\n---\n# Note {i}\n\nAbout #topic/b{} and [[n{:03}]].\n\n## Part {i}\n\n- item {i}\n",
            i % 10,
            (i * 7 + 3) % 260
        );
        std::fs::write(root.join(format!("n{i:03}.md")), body).unwrap();
    }
    let fresh_dir = tmp.path().join("fresh");
    drop(open(&fresh_dir));
    let (fresh, none) = indexes(&fresh_dir.join("lode.db"));
    assert!(none.is_empty());
    for name in ["headings_folded", "notes_title_folded", "note_versions_version", "tags_folded", "aliases_folded"] {
        assert!(fresh.iter().any(|(n, _)| n == name), "{name} is not in the schema any more: {fresh:?}");
    }

    let db = tmp.path().join("lode.db");
    let mut store = open(tmp.path());
    let (report, midway) = index_seeing(&mut store, &root, || indexes(&db));
    assert_eq!(report.created, 260);
    let (during, deferred) = midway.unwrap();
    assert_eq!(deferred.len(), 5, "the cold index deferred nothing: {deferred:?}");
    assert_eq!(during.len(), fresh.len() - 5);
    // Deletes and renames find a note's incoming links by `links_target`: never deferred.
    assert!(during.iter().any(|(n, _)| n == "links_target"));
    assert_eq!(indexes(&db), (fresh.clone(), vec![]), "the finished index lacks or adds an index");
    assert!(store.deferred_indexes().unwrap().is_empty());
    let expected = answers_through_deferred(&store, &root);
    assert!(expected.iter().any(|a| a.starts_with("symbol n021.md Part 21")), "{expected:?}");
    assert!(expected.iter().any(|a| a.starts_with("symbol n021.md Note 21")), "{expected:?}");
    assert_eq!(expected.iter().filter(|a| a.starts_with("tag ")).count(), 20, "{expected:?}");
    assert!(expected.contains(&"backlinks of n003 [\"n000.md\"]".to_owned()), "{expected:?}");
    assert!(store.verify().unwrap().problems.is_empty());

    // The same files again, read within two seconds of their last change (so their stat was
    // not trusted): every one is a save step that writes nothing, and nothing is deferred.
    let (report, midway) = index_seeing(&mut store, &root, || indexes(&db));
    assert_eq!(report.unchanged, 260);
    assert_eq!(midway, Some((fresh.clone(), vec![])), "a rescan that writes nothing deferred indexes");

    // Killed midway: the definitions are kept, every lookup still answers (by full scans), the
    // check says what is missing, and the next scan's end builds them, even one that saves a
    // single note.
    assert_eq!(store.defer_indexes(usize::MAX).unwrap(), 5);
    drop(store);
    let store = open(tmp.path());
    assert_eq!(store.deferred_indexes().unwrap().len(), 5);
    assert_eq!(answers_through_deferred(&store, &root), expected);
    let problems = store.verify().unwrap().problems;
    assert!(problems.iter().any(|p| p.contains("headings_folded") && p.contains("lode index")), "{problems:?}");
    drop(store);
    std::fs::write(root.join("n200.md"), "# Note 200\n\nNow about harbours.\n").unwrap();
    let mut store = open(tmp.path());
    let report = index_vault(&mut store, &root, &IndexOptions::default(), |_| {}).unwrap();
    assert_eq!((report.updated, report.unchanged), (1, 259));
    assert_eq!(indexes(&db), (fresh.clone(), vec![]));
    assert_eq!(answers_through_deferred(&store, &root), expected);

    // Fewer notes to write than the store holds: nothing is deferred.
    assert_eq!(store.defer_indexes(259).unwrap(), 0);
    assert_eq!(indexes(&db), (fresh.clone(), vec![]));

    // Only the store's own definitions are run: a row's SQL never is (here a second statement
    // after a valid one), and a row naming an index the store does not know is left for the
    // check to report.
    drop(store);
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "DROP INDEX headings_folded;
             INSERT INTO meta VALUES ('deferred_index:headings_folded', 'CREATE INDEX headings_folded ON headings(lower(name)); DROP TABLE notes');
             INSERT INTO meta VALUES ('deferred_index:evil', 'CREATE INDEX evil ON notes(path)');",
        )
        .unwrap();
    }
    let mut store = open(tmp.path());
    assert_eq!(store.restore_indexes().unwrap(), 1);
    assert_eq!(indexes(&db), (fresh.clone(), vec!["deferred_index:evil".to_owned()]));
    assert_eq!(store.notes().unwrap().len(), 260);
    let problems = store.verify().unwrap().problems;
    assert!(problems.iter().any(|p| p.contains("evil")), "{problems:?}");
}

/// Distinct segments of a full-text index (a segment's pages are rows of `<t>_data` whose
/// rowid carries the segment id from bit 37 up; rowids below that are FTS5's own records).
fn segments(db: &Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(&format!("SELECT count(DISTINCT id >> 37) FROM {table}_data WHERE id >> 37 > 0"), [], |r| r.get(0)).unwrap()
}

/// SQLite opens a statement journal for a statement that runs a trigger, has a RETURNING
/// clause, deletes several rows of a table with an expression or partial index, or writes a
/// row whose foreign keys it enforces; opening one makes every FTS5 table in the transaction
/// flush its pending terms into a new segment. With
/// the full-text rows written by triggers, a batch of notes wrote one segment per passage, and
/// FTS5 then spent most of a cold index merging them. A batch of new notes must flush once, at
/// its commit; edited notes (titles, headings, passages and links changed) and deleted ones at
/// most once per note.
#[test]
fn a_batch_of_notes_flushes_each_full_text_index_once() {
    const TABLES: [&str; 4] = ["passages_fts", "headings_tri", "titles_tri", "sections_fts"];
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    drop(open(tmp.path()));
    {
        // No merging: every flush stays a segment of its own.
        let conn = rusqlite::Connection::open(&db).unwrap();
        for t in TABLES {
            conn.execute(&format!("INSERT INTO {t}({t}, rank) VALUES ('automerge', 0)"), []).unwrap();
            conn.execute(&format!("INSERT INTO {t}({t}, rank) VALUES ('crisismerge', 1999)"), []).unwrap();
        }
    }
    let note = |i: usize, v: &str| {
        format!(
            "---\naliases: [alias{i}{v}]\n---\n# Title {v} {i}\n\nFirst paragraph {v}word{i} about ships.\n\n\
             Second paragraph linking [[n{next:03}]] and #tag{v}.\n\n## Heading{v}{i}\n\n- item one {v}\n- item two\n\n\
             Closing text {v}close{i}.\n",
            next = (i + 1) % 120
        )
    };
    let mut store = open(tmp.path());
    // Every note saved in one batch, version `v`.
    let save_all = |store: &mut Store, v: &str| {
        store.begin_batch().unwrap();
        for i in 0..120 {
            store.save_note(&format!("n{i:03}.md"), note(i, v).as_bytes()).unwrap();
        }
        store.end_batch().unwrap();
    };
    save_all(&mut store, "a");
    for t in TABLES {
        let n = segments(&db, t);
        assert!((1..=2).contains(&n), "{t}: {n} segments after one batch of new notes");
    }

    // Every note edited: its title, a heading, three passages and its tag change.
    save_all(&mut store, "b");
    for t in TABLES {
        let n = segments(&db, t);
        // An edited note's old rows leave before its new ones are written, but below the rowids
        // the batch's earlier notes wrote: FTS5 flushes there, once per note (it was once per
        // passage). Titles keep their rowid.
        let most = if t == "titles_tri" { 4 } else { 2 + 120 + 2 };
        assert!(n <= most, "{t}: {n} segments after a batch of edits");
    }
    store.begin_batch().unwrap();
    for i in 0..10 {
        assert!(store.delete_note(&format!("n{i:03}.md")).unwrap());
    }
    store.rename_note("n050.md", "moved/n050.md").unwrap();
    store.end_batch().unwrap();
    for t in TABLES {
        let n = segments(&db, t);
        let most = if t == "titles_tri" { 6 } else { 2 + 120 + 2 + 11 + 2 };
        assert!(n <= most, "{t}: {n} segments after a batch of deletes");
    }
    // New notes and renames of titled notes (only their path moves, in the note's row and its
    // headings' rows) in one batch: the renames flush nothing of the new notes' pending terms.
    let before: Vec<i64> = TABLES.iter().map(|t| segments(&db, t)).collect();
    store.begin_batch().unwrap();
    for i in 60..80 {
        store.save_note(&format!("new{i:03}.md"), note(i, "c").as_bytes()).unwrap();
        store.rename_note(&format!("n{i:03}.md"), &format!("moved/n{i:03}.md")).unwrap();
    }
    store.end_batch().unwrap();
    for (t, b) in TABLES.iter().zip(before) {
        let n = segments(&db, t);
        assert!(n <= b + 2, "{t}: {b} -> {n} segments after a batch of new notes and renames");
    }

    // The full-text rows follow their rows: every index checks out against its content, the
    // edits' words are found and the old ones are not.
    let v = store.verify().unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert_eq!(paths(&store, "bword17"), vec!["n017.md".to_owned()]);
    assert!(paths(&store, "aword17").is_empty(), "an edited passage is still found by its old text");
    assert!(paths(&store, "bword3").is_empty(), "a deleted note's passage is still found");
    assert_eq!(paths(&store, "bclose50"), vec!["moved/n050.md".to_owned()]);
    // Substrings, not prefixes: these are answered by the trigram indexes.
    let names = |q: &str| store.symbols(q, 50).unwrap().into_iter().map(|s| s.1).collect::<Vec<_>>();
    assert!(names("adingb17").contains(&"Headingb17".to_owned()), "{:?}", names("adingb17"));
    assert!(names("adinga17").is_empty(), "an old heading is still a symbol: {:?}", names("adinga17"));
    assert!(names("tle b 17").contains(&"Title b 17".to_owned()), "{:?}", names("tle b 17"));
    assert!(names("tle a 17").is_empty(), "an old title is still a symbol: {:?}", names("tle a 17"));
    assert!(!names("adingb4").contains(&"Headingb4".to_owned()), "a deleted note's heading is still a symbol");

    // What the check reports when something writes around the store: a heading row gone
    // without its full-text row, a tag of a note that does not exist.
    drop(store);
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute("DELETE FROM headings WHERE id = (SELECT max(id) FROM headings)", []).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        conn.execute("INSERT INTO tags (note_id, tag, folded, start, end) VALUES (99999, 'x', 'x', 0, 1)", []).unwrap();
    }
    let problems = open(tmp.path()).verify().unwrap().problems;
    assert!(problems.iter().any(|p| p.contains("headings_tri")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("tags row") && p.contains("missing notes row")), "{problems:?}");
}

/// The full-text rows follow their rows through any mix of writes: a seeded run of saves (new
/// notes, edits that keep, move, duplicate and drop passages, titles and headings that change),
/// deletes, renames and re-creations, alone or several to a batch. After each, every index
/// holds exactly the notes a model of the vault says contain each word, and `verify` (FTS5's
/// own check of each index against its table, foreign keys) is clean.
#[test]
fn full_text_rows_follow_every_mix_of_saves_deletes_and_renames() {
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n as u64) as usize
        }
    }
    let mut rng = Lcg(0x5eed);
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    let mut store = open(tmp.path());
    let paths: Vec<String> = (0..14).map(|i| format!("d{}/n{i}.md", i % 3)).collect();
    let mut model: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let note = |rng: &mut Lcg| {
        let para = |rng: &mut Lcg| (0..3).map(|_| format!("tk{}", rng.next(12))).collect::<Vec<_>>().join(" ") + " words.";
        let first = para(rng);
        let mut s = format!("# tt{}yy\n\n{first}\n\n", rng.next(6));
        for _ in 0..rng.next(3) + 1 {
            s += &format!("## hd{}xx\n\n", rng.next(8));
            for _ in 0..rng.next(3) + 1 {
                // Some paragraphs repeat one written before, word for word.
                let p = if rng.next(4) == 0 { first.clone() } else { para(rng) };
                s += &format!("{p}\n\n");
            }
            if rng.next(2) == 0 {
                s += &format!("- item tk{} and [[n{}]]\n- second tk{}\n\n", rng.next(12), rng.next(10), rng.next(12));
            }
        }
        s
    };
    let words = |text: &str, prefix: &str| -> std::collections::HashSet<String> {
        text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| w.starts_with(prefix)).map(str::to_owned).collect()
    };
    let mut batch_left = 0;
    let (mut batches, mut deletes, mut renames) = (0, 0, 0);
    for step in 0..300 {
        if batch_left == 0 && rng.next(3) == 0 {
            store.begin_batch().unwrap();
            batch_left = rng.next(8) + 1;
            batches += 1;
        }
        let path = paths[rng.next(paths.len())].clone();
        match rng.next(10) {
            0 if model.contains_key(&path) => {
                assert!(store.delete_note(&path).unwrap());
                model.remove(&path);
                deletes += 1;
            }
            1 if model.contains_key(&path) => {
                let start = rng.next(paths.len());
                let free = (0..paths.len()).map(|k| &paths[(start + k) % paths.len()]).find(|p| !model.contains_key(*p)).cloned();
                if let Some(to) = free {
                    store.rename_note(&path, &to).unwrap();
                    let text = model.remove(&path).unwrap();
                    model.insert(to, text);
                    renames += 1;
                }
            }
            _ => {
                let text = note(&mut rng);
                store.save_note(&path, text.as_bytes()).unwrap();
                model.insert(path, text);
            }
        }
        if batch_left > 0 {
            batch_left -= 1;
            if batch_left > 0 {
                continue;
            }
            store.end_batch().unwrap();
        }
        let conn = rusqlite::Connection::open(&db).unwrap();
        let found = |sql: &str, term: &str| -> std::collections::BTreeSet<String> {
            let mut st = conn.prepare(sql).unwrap();
            st.query_map([format!("\"{term}\"")], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
        };
        // The trigram indexes keep no positions: a term is its trigrams, joined by AND.
        let found_tri = |sql: &str, term: &str| -> std::collections::BTreeSet<String> {
            let mut st = conn.prepare(sql).unwrap();
            st.query_map([trigrams_and(term)], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
        };
        let expect = |f: &dyn Fn(&str) -> bool| -> std::collections::BTreeSet<String> {
            model.iter().filter(|(_, t)| f(t)).map(|(p, _)| p.clone()).collect()
        };
        for i in 0..12 {
            let term = format!("tk{i}");
            let want = expect(&|t: &str| words(t, "tk").contains(&term));
            let passages = found("SELECT DISTINCT n.path FROM passages_fts f JOIN passages p ON p.id = f.rowid JOIN notes n ON n.id = p.note_id WHERE passages_fts MATCH 'body:' || ?1", &term);
            assert_eq!(passages, want, "step {step}: passages_fts for {term}");
            let sections = found("SELECT DISTINCT n.path FROM sections_fts f JOIN sections s ON s.id = f.rowid JOIN notes n ON n.id = s.note_id WHERE sections_fts MATCH 'body:' || ?1", &term);
            assert_eq!(sections, want, "step {step}: sections_fts for {term}");
        }
        for i in 0..8 {
            let term = format!("hd{i}xx");
            let want = expect(&|t: &str| t.contains(&format!("## {term}\n")));
            let headings = found_tri("SELECT DISTINCT n.path FROM headings_tri f JOIN headings h ON h.id = f.rowid JOIN notes n ON n.id = h.note_id WHERE headings_tri MATCH ?1", &term);
            assert_eq!(headings, want, "step {step}: headings_tri for {term}");
        }
        for i in 0..6 {
            let term = format!("tt{i}yy");
            let want = expect(&|t: &str| t.starts_with(&format!("# {term}\n")));
            let titles = found_tri(
                "SELECT n.path FROM titles_tri f JOIN notes n ON n.id = f.rowid WHERE titles_tri MATCH ?1 AND n.head_version IS NOT NULL",
                &term,
            );
            assert_eq!(titles, want, "step {step}: titles_tri for {term}");
        }
        let problems = store.verify().unwrap().problems;
        assert!(problems.is_empty(), "step {step}: {problems:?}");
    }
    assert!(
        batches >= 20 && deletes >= 15 && renames >= 5,
        "the run wrote too little of the mix: {batches} batches, {deletes} deletes, {renames} renames"
    );
}

/// A note with no `# title` is titled by its file name: a rename renames it, in
/// `workspace/symbol` and in its passages' heading path, and a titled note keeps its title.
#[test]
fn a_rename_retitles_a_note_titled_by_its_file_name() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    store.save_note("old-name.md", b"Just a paragraph about quimbly.\n").unwrap();
    store.save_note("titled.md", b"# Kept Title\n\nText about zorblat.\n").unwrap();
    store.rename_note("old-name.md", "notes/new-name.md").unwrap();
    store.rename_note("titled.md", "moved.md").unwrap();
    let names = |q: &str| store.symbols(q, 20).unwrap().into_iter().map(|s| (s.0, s.1)).collect::<Vec<_>>();
    assert_eq!(names("new-name"), vec![("notes/new-name.md".to_owned(), "new-name".to_owned())]);
    assert!(names("old-name").is_empty(), "{:?}", names("old-name"));
    assert_eq!(names("Kept Title"), vec![("moved.md".to_owned(), "Kept Title".to_owned())]);
    let heading = &store.passages_of("notes/new-name.md").unwrap()[0].heading;
    assert!(heading.starts_with("new-name"), "{heading}");
    assert_eq!(store.history("notes/new-name.md").unwrap().len(), 1, "a rename makes no new version");
    assert!(store.verify().unwrap().problems.is_empty());
}

/// Cases written blind (by someone who saw neither the store's code nor these tests), in
/// `fixtures/fts-blind/cases.json`: sequences of saves (text or raw bytes), deletes, renames
/// and batches. After each write outside a batch and at each batch's end, `verify` is clean;
/// at the end every full-text index answers each word ever written (in a note or a path)
/// exactly as a fresh index of the same final notes does.
#[test]
fn blind_write_sequences_leave_each_index_as_a_fresh_index_of_the_same_notes() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/fts-blind/cases.json");
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() >= 20, "{} cases", cases.len());
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        run_write_case(name, case["steps"].as_array().unwrap());
    }
}

fn run_write_case(name: &str, steps: &[serde_json::Value]) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("a")).unwrap();
    let mut store = open(&tmp.path().join("a"));
    let mut model: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
    // Paths too: a note with no title of its own is titled by its file name.
    let mut written: Vec<Vec<u8>> = Vec::new();
    for (at, step) in steps.iter().enumerate() {
        let s = |k: &str| step[k].as_str().unwrap_or_default().to_owned();
        for k in ["path", "from", "to"] {
            written.push(s(k).into_bytes());
        }
        match step["op"].as_str().unwrap() {
            "begin" => store.begin_batch().unwrap(),
            "end" => store.end_batch().unwrap(),
            "save" => {
                let bytes = match step.get("hex").and_then(|h| h.as_str()) {
                    Some(h) => (0..h.len() / 2).map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap()).collect(),
                    None => s("text").into_bytes(),
                };
                store.save_note(&s("path"), &bytes).unwrap_or_else(|e| panic!("{name}, step {at}: {e}"));
                model.insert(s("path"), bytes.clone());
                written.push(bytes);
            }
            "delete" => {
                let live = model.remove(&s("path")).is_some();
                assert_eq!(store.delete_note(&s("path")).unwrap(), live, "{name}, step {at}");
            }
            "rename" => {
                let (from, to) = (s("from"), s("to"));
                if model.contains_key(&from) && !model.contains_key(&to) {
                    store.rename_note(&from, &to).unwrap_or_else(|e| panic!("{name}, step {at}: {e}"));
                    let bytes = model.remove(&from).unwrap();
                    model.insert(to, bytes);
                } else {
                    assert!(store.rename_note(&from, &to).is_err(), "{name}, step {at}: a refused rename went through");
                }
            }
            other => panic!("{name}: unknown op {other}"),
        }
        if !store.in_batch() {
            same_as_fresh(&format!("{name}, step {at}"), &store, &tmp.path().join(format!("fresh{at}")), &model, &written);
        }
    }
    store.end_batch().unwrap();
    same_as_fresh(&format!("{name}, at the end"), &store, &tmp.path().join("fresh-end"), &model, &written);
}

/// `verify` is clean, and every full-text index of `store` answers each word of `written` as an
/// index made from nothing of the notes in `model` does.
fn same_as_fresh(at: &str, store: &Store, dir: &Path, model: &std::collections::BTreeMap<String, Vec<u8>>, written: &[Vec<u8>]) {
    let problems = store.verify().unwrap().problems;
    assert!(problems.is_empty(), "{at}: {problems:?}");
    std::fs::create_dir_all(dir).unwrap();
    let mut fresh = open(dir);
    for (path, bytes) in model {
        fresh.save_note(path, bytes).unwrap();
    }
    drop(fresh);
    let mut words: std::collections::BTreeSet<String> = Default::default();
    for bytes in written {
        for w in String::from_utf8_lossy(bytes).split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            words.insert(w.to_lowercase());
        }
    }
    let a = rusqlite::Connection::open(store.path()).unwrap();
    let b = rusqlite::Connection::open(dir.join("lode.db")).unwrap();
    let queries = [
        ("passages_fts", "SELECT DISTINCT n.path FROM passages_fts f JOIN passages p ON p.id = f.rowid JOIN notes n ON n.id = p.note_id WHERE passages_fts MATCH ?1 ORDER BY 1", 1),
        ("sections_fts", "SELECT DISTINCT n.path FROM sections_fts f JOIN sections s ON s.id = f.rowid JOIN notes n ON n.id = s.note_id WHERE sections_fts MATCH ?1 ORDER BY 1", 1),
        ("headings_tri", "SELECT DISTINCT n.path FROM headings_tri f JOIN headings h ON h.id = f.rowid JOIN notes n ON n.id = h.note_id WHERE headings_tri MATCH ?1 ORDER BY 1", 3),
        ("titles_tri", "SELECT n.path FROM titles_tri f JOIN notes n ON n.id = f.rowid WHERE titles_tri MATCH ?1 AND n.head_version IS NOT NULL ORDER BY 1", 3),
    ];
    for w in &words {
        for (index, sql, min_chars) in queries {
            if w.chars().count() < min_chars {
                continue;
            }
            // The trigram indexes keep no positions: a word is its trigrams, joined by AND.
            let quoted = if min_chars == 3 { trigrams_and(w) } else { format!("\"{}\"", w.replace('"', "\"\"")) };
            let run = |c: &rusqlite::Connection| -> Vec<String> {
                let mut st = c.prepare_cached(sql).unwrap();
                st.query_map([&quoted], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
            };
            assert_eq!(run(&a), run(&b), "{at}: {index} for {w:?} differs from a fresh index of the same notes");
        }
    }
}

/// A trigram-index query for `term`: each of its trigrams (by character), joined by AND.
fn trigrams_and(term: &str) -> String {
    let chars: Vec<char> = term.chars().collect();
    chars.windows(3).map(|w| format!("\"{}\"", w.iter().collect::<String>().replace('"', "\"\""))).collect::<Vec<_>>().join(" AND ")
}

/// Symbol lookups written blind (by someone who saw neither the store's code nor these tests),
/// in `fixtures/symbols-blind/cases.json`: notes saved and deleted, then queries with a limit.
/// Within the limit the answer is exactly every matching (note, name); past it, `limit`
/// symbols that each match.
#[test]
fn blind_symbol_lookups_find_exactly_the_names_holding_the_query() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/symbols-blind/cases.json");
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let tmp = tempfile::tempdir().unwrap();
        let mut store = open(tmp.path());
        for step in case["steps"].as_array().unwrap() {
            let path = step["path"].as_str().unwrap();
            match step["op"].as_str().unwrap() {
                "save" => {
                    store.save_note(path, step["text"].as_str().unwrap().as_bytes()).map(drop).unwrap_or_else(|e| panic!("{name}: {e}"))
                }
                "delete" => drop(store.delete_note(path).unwrap()),
                op => panic!("{name}: unknown op {op}"),
            }
        }
        for q in case["queries"].as_array().unwrap() {
            let query = q["query"].as_str().unwrap();
            let limit = q["limit"].as_u64().unwrap() as usize;
            let got: Vec<(String, String)> = store.symbols(query, limit).unwrap().into_iter().map(|(p, n, _, _)| (p, n)).collect();
            let folded = query.to_lowercase();
            let short = query.chars().count() < 3;
            let holds = |n: &str| if short { n.to_lowercase().starts_with(&folded) } else { n.to_lowercase().contains(&folded) };
            let unique: std::collections::BTreeSet<&(String, String)> = got.iter().collect();
            let problem = if unique.len() != got.len() {
                Some(format!("a symbol twice: {got:?}"))
            } else if let Some(want) = q.get("expect").and_then(|e| e.as_array()) {
                let want: std::collections::BTreeSet<(String, String)> =
                    want.iter().map(|w| (w[0].as_str().unwrap().to_owned(), w[1].as_str().unwrap().to_owned())).collect();
                let got: std::collections::BTreeSet<(String, String)> = got.iter().cloned().collect();
                (got != want).then(|| {
                    format!(
                        "missing {:?}, extra {:?}",
                        want.difference(&got).collect::<Vec<_>>(),
                        got.difference(&want).collect::<Vec<_>>()
                    )
                })
            } else {
                let count = q["expect_count"].as_u64().unwrap() as usize;
                if got.len() != count {
                    Some(format!("{} symbols, expected {count}", got.len()))
                } else {
                    got.iter().find(|(_, n)| !holds(n)).map(|s| format!("{s:?} does not hold the query"))
                }
            };
            if let Some(p) = problem {
                failures.push(format!("{name}: {query:?} (limit {limit}): {p}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The count of notes indexed with replacement characters (`lode stats`, `lode index`, the
/// server's status) counts heads only: a note made valid again leaves the count, though its
/// old version stays in history.
#[test]
fn notes_whose_head_is_not_utf8_are_counted_by_their_head() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    assert_eq!(store.stats().unwrap().lossy_notes, 0);
    store.save_note("bad.md", b"# Bad\n\ncaf\xe9 au lait\n").unwrap();
    store.save_note("also.md", b"# Also\n\n\xff\xfe text\n").unwrap();
    store.save_note("good.md", b"# Good\n\nfine\n").unwrap();
    assert_eq!(store.stats().unwrap().lossy_notes, 2);
    store.save_note("bad.md", "# Bad\n\ncafé au lait\n".as_bytes()).unwrap();
    assert_eq!(store.stats().unwrap().lossy_notes, 1);
    store.delete_note("also.md").unwrap();
    assert_eq!(store.stats().unwrap().lossy_notes, 0);
}

/// What the team's tier held for each note, remembered beside the kept versions: written by
/// lode from a team bucket's answers, so every value is checked when read back; a later publish
/// wins over an earlier one, a damaged, huge, linked or foreign file reads as nothing learned.
#[test]
fn shared_heads_keep_the_newest_publish_and_refuse_what_is_not_a_head() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let tier = "s3://team/handbook";
    let (a, b) = ("a".repeat(64), "b".repeat(64));
    assert_eq!(store.shared_head(tier, "runbook.md"), None, "nothing learned yet");
    store.remember_shared_heads(tier, 3, &[("runbook.md".into(), Some(a.clone())), ("gone.md".into(), None)]).unwrap();
    assert_eq!(store.shared_head(tier, "runbook.md"), Some((Some(a.clone()), 3)));
    assert_eq!(store.shared_head(tier, "gone.md"), Some((None, 3)), "a note no longer published");
    assert_eq!(store.shared_head("s3://team/other", "runbook.md"), None, "each tier its own");
    // An older publish does not overwrite a newer one; a newer one does.
    store.remember_shared_heads(tier, 2, &[("runbook.md".into(), Some(b.clone()))]).unwrap();
    assert_eq!(store.shared_head(tier, "runbook.md"), Some((Some(a.clone()), 3)));
    store.remember_shared_heads(tier, 4, &[("runbook.md".into(), Some(b.clone()))]).unwrap();
    assert_eq!(store.shared_head(tier, "runbook.md"), Some((Some(b.clone()), 4)));
    // Not a version id: never remembered.
    for bad in ["../../etc/passwd", "", &b[..12], &"g".repeat(64)] {
        store.remember_shared_heads(tier, 9, &[("x.md".into(), Some(bad.to_owned()))]).unwrap();
        assert_eq!(store.shared_head(tier, "x.md"), None, "{bad:?} kept");
    }
    // The file itself: damaged, a folder, or a link read as nothing learned, and are replaced.
    let cache = store.shared_cache_dir().unwrap();
    let file = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("heads-")))
        .unwrap();
    std::fs::write(&file, b"{not json").unwrap();
    assert_eq!(store.shared_head(tier, "runbook.md"), None);
    std::fs::write(&file, br#"{"heads": {"runbook.md": {"head": "../x", "seq": 1}}}"#).unwrap();
    assert_eq!(store.shared_head(tier, "runbook.md"), None, "a head that is no id");
    std::fs::remove_file(&file).unwrap();
    let outside = dir.path().join("outside.json");
    std::fs::write(&outside, format!(r#"{{"heads": {{"runbook.md": {{"head": "{a}", "seq": 9}}}}}}"#)).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&outside, &file).unwrap();
        assert_eq!(store.shared_head(tier, "runbook.md"), None, "a link is not read");
        store.remember_shared_heads(tier, 5, &[("runbook.md".into(), Some(b.clone()))]).unwrap();
        assert_eq!(store.shared_head(tier, "runbook.md"), Some((Some(b.clone()), 5)), "the link is replaced");
        assert!(std::fs::read_to_string(&outside).unwrap().contains(&a), "the link's target is untouched");
    }
}
