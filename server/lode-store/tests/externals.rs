//! Externals and snapshots in the store: identity, dedup of identical fetches, history, and
//! that a snapshot never passes for a note.

use std::path::Path;

use lode_store::{NewSnapshot, SearchOptions, Store, StoreOptions, Via};

fn open(dir: &Path) -> Store {
    Store::open(&dir.join("lode.db"), StoreOptions::default()).unwrap()
}

fn snap<'a>(url: &'a str, text: &'a [u8]) -> NewSnapshot<'a> {
    NewSnapshot { url, final_url: url, status: 200, content_type: "text/html", text, via: Via::Link }
}

const URL: &str = "https://docs.example.com/pooling";

#[test]
fn a_refetch_of_identical_text_makes_no_new_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    store.save_note("n.md", format!("# N\n\nSee [pooling]({URL}#sizing).\n").as_bytes()).unwrap();
    assert_eq!(store.linked_urls().unwrap(), [URL], "the fragment is not part of the URL");
    let never = store.external(URL).unwrap();
    assert_eq!((never.snapshot_id.as_deref(), never.linked_from.as_slice()), (None, &["n.md".to_owned()][..]));

    let body = b"# Pooling\n\nPgBouncer runs in transaction mode with 40 server connections.\n";
    let first = store.save_snapshot(&snap(URL, body)).unwrap();
    assert!(first.changed);
    let seen1 = store.external(URL).unwrap().seen_at.unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let again = store.save_snapshot(&snap(URL, body)).unwrap();
    assert_eq!(again.snapshot_id, first.snapshot_id);
    assert!(!again.changed);
    let info = store.external(URL).unwrap();
    assert_eq!(info.snapshots, 1);
    assert!(info.seen_at.unwrap() > seen1, "only the seen time moves");
    assert_eq!(info.fetched_at.unwrap(), seen1);
    assert_eq!(store.history(URL).unwrap().len(), 1);

    // Changed text: a new snapshot at the head, the old one kept as history.
    let changed = store.save_snapshot(&snap(URL, b"# Pooling\n\nPgBouncer runs in session mode.\n")).unwrap();
    assert!(changed.changed);
    let info = store.external(URL).unwrap();
    assert_eq!((info.snapshots, info.snapshot_id.as_deref()), (2, Some(changed.snapshot_id.as_str())));
    assert_eq!(store.history(URL).unwrap(), [first.snapshot_id.clone(), changed.snapshot_id.clone()]);
    assert_eq!(store.version_body(&first.snapshot_id).unwrap().unwrap(), body);
    // Only the head is indexed.
    let hits = store.search("pgbouncer mode", &SearchOptions::default()).unwrap().hits;
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].path.as_str(), hits[0].version_id.as_str()), (URL, changed.snapshot_id.as_str()));
    assert!(store.verify().unwrap().problems.is_empty());
}

#[test]
fn a_failed_fetch_keeps_the_snapshot_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let saved = store.save_snapshot(&snap(URL, b"# Pooling\n\ntext\n")).unwrap();
    store.record_fetch_failure(URL, Via::Link, Some(503), "HTTP 503 Service Unavailable").unwrap();
    let info = store.external(URL).unwrap();
    assert_eq!(info.snapshot_id.as_deref(), Some(saved.snapshot_id.as_str()));
    assert_eq!((info.last_status, info.last_error.as_deref()), (Some(503), Some("HTTP 503 Service Unavailable")));
    assert!(info.failed());
    store.save_snapshot(&snap(URL, b"# Pooling\n\ntext\n")).unwrap();
    assert!(!store.external(URL).unwrap().failed(), "a later success clears the failure");
    // Never fetched successfully: known, with no snapshot.
    store.record_fetch_failure("https://gone.example.com/", Via::Link, Some(404), "HTTP 404 Not Found").unwrap();
    let gone = store.external("https://gone.example.com/").unwrap();
    assert_eq!((gone.snapshot_id, gone.last_status), (None, Some(404)));
}

#[test]
fn snapshots_are_searchable_but_never_notes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    store.save_note("pooling.md", b"# Pooling\n\nOur notes on pooling.\n").unwrap();
    // A page titled like a note, with its own links, tags and headings.
    let page = b"# Pooling\n\n## Sizing guide\n\nSee [[pooling]] and [x](pooling.md) #pooltag.\n";
    store.save_snapshot(&snap(URL, page)).unwrap();
    store.save_note("links.md", b"# L\n\n[[Pooling]] and [p](pooling.md)\n").unwrap();
    assert_eq!(store.notes().unwrap().iter().map(|n| n.path.as_str()).collect::<Vec<_>>(), ["links.md", "pooling.md"]);
    assert_eq!(store.heads_with_stat().unwrap().len(), 2, "a scan never sees a snapshot as a vanished file");
    let cands: Vec<String> = store.wiki_candidates("pooling").unwrap().into_iter().map(|c| c.0).collect();
    assert_eq!(cands, ["pooling.md"]);
    assert!(store.symbols("sizing", 10).unwrap().is_empty(), "no symbols from a page");
    assert!(store.symbols("pooling", 10).unwrap().iter().all(|s| s.0 == "pooling.md"));
    assert!(store.tagged("pooltag", 10).unwrap().is_empty());
    assert!(store.complete_notes("pool", 10).unwrap().iter().all(|c| c.0 == "pooling.md"));
    assert!(store.linked_urls().unwrap().is_empty(), "a page's links are not the vault's");
    let st = store.stats().unwrap();
    assert_eq!((st.notes, st.snapshots), (2, 1));
    let hits = store.search("sizing guide", &SearchOptions::default()).unwrap().hits;
    assert_eq!(hits[0].path, URL);
    let of = store.snapshots_of(&[hits[0].note_id]).unwrap();
    assert_eq!(of[&hits[0].note_id].url, URL);
    // Re-chunking covers snapshots too.
    store.rechunk_heads(|_, _| {}).unwrap();
    assert_eq!(store.search("sizing guide", &SearchOptions::default()).unwrap().hits[0].path, URL);
    assert!(store.verify().unwrap().problems.is_empty());
}

#[test]
fn an_answer_fetch_becomes_linked_once_a_note_links_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let ask = NewSnapshot { via: Via::Ask, ..snap(URL, b"# P\n\ntext\n") };
    store.save_snapshot(&ask).unwrap();
    assert_eq!(store.external(URL).unwrap().discovered_via.as_deref(), Some("ask"));
    assert_eq!(store.externals().unwrap().len(), 1);
    store.save_snapshot(&snap(URL, b"# P\n\ntext\n")).unwrap();
    assert_eq!(store.external(URL).unwrap().discovered_via.as_deref(), Some("link"));
    store.save_snapshot(&ask).unwrap();
    assert_eq!(store.external(URL).unwrap().discovered_via.as_deref(), Some("link"), "never back to ask");
}
