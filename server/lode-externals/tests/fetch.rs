//! Fetching from a real HTTP server on loopback: pages that change between fetches, redirects
//! (also to private addresses), timeouts, error statuses, binary and huge bodies, non-UTF-8
//! text; and what the store keeps of each.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lode_externals::{fetch, mirror, FetchError, FetchOptions, Recorded};
use lode_store::{Store, StoreOptions, Via};
use lode_testing::web::{Reply, Site};

fn loopback() -> FetchOptions {
    FetchOptions { allow_loopback: true, timeout: Duration::from_secs(3), ..FetchOptions::default() }
}

fn site() -> Site {
    let version = Arc::new(AtomicUsize::new(0));
    Site::start(Box::new(move |path: &str| match path {
        "/page" => Reply::html("<html><head><title>Pooling</title></head><body><h1>Pooling</h1><p>Pool size is 40.</p></body></html>"),
        "/changing" => {
            let n = version.fetch_add(1, Ordering::SeqCst);
            let size = if n < 2 { 40 } else { 60 };
            Reply::html(&format!("<h1>Limits</h1><p>Pool size is {size}.</p>"))
        }
        "/hop1" => Reply::redirect("/hop2"),
        "/hop2" => Reply::redirect("/page"),
        "/loop" => Reply::redirect("/loop"),
        "/to-metadata" => Reply::redirect("http://169.254.169.254/latest/meta-data/"),
        "/slow" => Reply { delay: Duration::from_secs(10), ..Reply::html("<p>late</p>") },
        "/missing" => Reply::typed(404, "text/html", b"<h1>Not found</h1>"),
        "/broken" => Reply::typed(500, "text/html", b"oops"),
        "/binary" => Reply::typed(200, "application/octet-stream", &[0, 1, 2, 255]),
        "/binary-as-text" => Reply::typed(200, "text/plain", b"PK\x03\x04\x00\x00binary"),
        "/no-type" => Reply { headers: vec![], ..Reply::html("<h1>Untyped</h1><p>Still a page.</p>") },
        "/huge" => Reply { body: vec![b'a'; 50 * 1024 * 1024], ..Reply::typed(200, "text/plain", b"") },
        "/huge-unannounced" => Reply { stream_bytes: Some(50 * 1024 * 1024), ..Reply::typed(200, "text/plain", b"") },
        "/latin1" => Reply::typed(200, "text/html; charset=iso-8859-1", b"<h1>Caf\xe9</h1><p>Cr\xe8me br\xfbl\xe9e.</p>"),
        "/bad-utf8" => Reply::typed(200, "text/html; charset=utf-8", b"<h1>Bad</h1><p>ok \xff\xfe end</p>"),
        "/malformed" => Reply::html("<h2>Unclosed <b>bold<p>para<li>item</table></html><p>after"),
        "/plain" => Reply::typed(200, "text/plain", b"# not a heading\nplain text\n"),
        "/markdown" => Reply::typed(200, "text/markdown", b"# Real heading\n\nBody.\n"),
        _ => Reply::typed(404, "text/plain", b"no route"),
    }))
}

#[test]
fn pages_redirects_and_content_types() {
    let s = site();
    let page = fetch(&s.url("/page"), &loopback()).unwrap();
    assert_eq!((page.status, page.content_type.as_str(), page.title.as_deref()), (200, "text/html", Some("Pooling")));
    assert_eq!(page.text, "# Pooling\n\nPool size is 40.\n");
    let hopped = fetch(&s.url("/hop1"), &loopback()).unwrap();
    assert_eq!(hopped.final_url, s.url("/page"));
    assert_eq!(hopped.url, s.url("/hop1"));
    assert_eq!(fetch(&s.url("/loop"), &loopback()), Err(FetchError::Redirects(5)));
    let few = FetchOptions { max_redirects: 1, ..loopback() };
    assert_eq!(fetch(&s.url("/hop1"), &few), Err(FetchError::Redirects(1)));
    assert_eq!(fetch(&s.url("/missing"), &loopback()), Err(FetchError::Status(404)));
    assert_eq!(fetch(&s.url("/broken"), &loopback()), Err(FetchError::Status(500)));
    assert_eq!(fetch(&s.url("/binary"), &loopback()), Err(FetchError::NotText("application/octet-stream".into())));
    // Binary bytes served as text: said as such, not "text/… is not text".
    let e = fetch(&s.url("/binary-as-text"), &loopback()).unwrap_err();
    assert!(matches!(&e, FetchError::Binary(t) if t.starts_with("text/")), "{e:?}");
    assert!(e.to_string().starts_with("the page's bytes are binary, not text, though it is served as \"text/"), "{e}");
    assert_eq!(fetch(&s.url("/no-type"), &loopback()).unwrap().text, "# Untyped\n\nStill a page.\n");
    assert_eq!(fetch(&s.url("/latin1"), &loopback()).unwrap().text, "# Café\n\nCrème brûlée.\n");
    assert_eq!(fetch(&s.url("/bad-utf8"), &loopback()).unwrap().text, "# Bad\n\nok \u{fffd}\u{fffd} end\n");
    assert!(fetch(&s.url("/malformed"), &loopback()).unwrap().text.contains("after"));
    assert_eq!(fetch(&s.url("/plain"), &loopback()).unwrap().text, "\\# not a heading\nplain text\n");
    assert_eq!(fetch(&s.url("/markdown"), &loopback()).unwrap().text, "# Real heading\n\nBody.\n");
}

#[test]
fn limits_hold() {
    let s = site();
    let t = Instant::now();
    assert_eq!(fetch(&s.url("/slow"), &FetchOptions { timeout: Duration::from_secs(1), ..loopback() }), Err(FetchError::Timeout(1)));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let t = Instant::now();
    assert_eq!(fetch(&s.url("/huge"), &loopback()), Err(FetchError::TooLarge(10 * 1024 * 1024)));
    assert_eq!(fetch(&s.url("/huge-unannounced"), &loopback()), Err(FetchError::TooLarge(10 * 1024 * 1024)));
    // Named as the user sets it: `max_mb`, in MB.
    assert_eq!(FetchError::TooLarge(10 * 1024 * 1024).to_string(), "the page is larger than the 10 MB limit (`max_mb` under [externals])");
    assert!(t.elapsed() < Duration::from_secs(5), "a refused body is not read to its end: {:?}", t.elapsed());
}

/// A question cancelled while its model's `fetch_url` waits on a slow page: the fetch stops at
/// once, not at its timeout, and says so (nothing is recorded against the page).
#[test]
fn a_cancelled_fetch_stops_at_once() {
    let s = site();
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opts = FetchOptions { timeout: Duration::from_secs(8), cancel: Some(flag.clone()), ..loopback() };
    // The cancel comes once the site has the request (not after a fixed sleep: under load the
    // request may not have reached the site 0.3 s in, and then nothing was under way).
    let setter = {
        let flag = flag.clone();
        let requests = s.requests.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            while !requests.lock().unwrap().iter().any(|p| p == "/slow") && t.elapsed() < Duration::from_secs(6) {
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::SeqCst);
            Instant::now()
        })
    };
    assert_eq!(fetch(&s.url("/slow"), &opts), Err(FetchError::Cancelled));
    let stopped = Instant::now();
    let cancelled = setter.join().unwrap();
    assert!(
        stopped.saturating_duration_since(cancelled) < Duration::from_millis(1500),
        "stopped {:?} after the cancel (the page answers after 10 s, the timeout is 8 s)",
        stopped.saturating_duration_since(cancelled)
    );
    assert_eq!(s.hits("/slow"), 1, "the request was under way when it was cancelled");
    // Already cancelled: nothing is sent.
    assert_eq!(fetch(&s.url("/page"), &opts), Err(FetchError::Cancelled));
    assert_eq!(s.hits("/page"), 0);
}

#[test]
fn private_addresses_are_refused_unless_allowed_at_every_hop() {
    let s = site();
    let strict = FetchOptions { timeout: Duration::from_secs(3), ..FetchOptions::default() };
    let err = fetch(&s.url("/page"), &strict).unwrap_err();
    assert!(matches!(&err, FetchError::Private(m) if m.contains("127.0.0.1")), "{err:?}");
    assert!(err.to_string().contains("allow_loopback"), "the fix is named: {err}");
    assert_eq!(s.hits("/page"), 0, "refused before connecting");
    let localhost = s.url("/page").replace("127.0.0.1", "localhost");
    assert!(matches!(fetch(&localhost, &strict), Err(FetchError::Private(_))));
    // Every spelling of a private address a URL parser accepts (data: fixtures/externals).
    let list = std::fs::read_to_string(lode_testing::repo().join("fixtures/externals/private-urls.txt")).unwrap();
    let literals: Vec<&str> = list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert!(literals.len() >= 13);
    for literal in literals {
        assert!(matches!(fetch(literal, &strict), Err(FetchError::Private(_))), "{literal}");
    }
    // Loopback allowed, but the redirect leads to link-local metadata: refused at that hop.
    let err = fetch(&s.url("/to-metadata"), &loopback()).unwrap_err();
    assert!(matches!(&err, FetchError::Private(m) if m.contains("169.254.169.254")), "{err:?}");
    for bad in ["file:///etc/passwd", "ftp://example.com/", "data:text/html,<h1>x</h1>"] {
        assert!(matches!(fetch(bad, &loopback()), Err(FetchError::NotWeb(_))), "{bad}");
    }
}

#[test]
fn the_store_keeps_each_distinct_text_once_and_every_failure() {
    let s = site();
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("lode.db"), StoreOptions::default()).unwrap();
    let url = s.url("/changing");
    let first = mirror(&mut store, &url, Via::Link, &loopback()).unwrap();
    let Recorded::Saved(a) = first else { panic!("{first:?}") };
    let Recorded::Saved(b) = mirror(&mut store, &url, Via::Link, &loopback()).unwrap() else { panic!() };
    assert_eq!(a.snapshot_id, b.snapshot_id);
    assert!(!b.changed, "identical body: no new snapshot");
    let Recorded::Saved(c) = mirror(&mut store, &url, Via::Link, &loopback()).unwrap() else { panic!() };
    assert!(c.changed);
    let info = store.external(&url).unwrap();
    assert_eq!((info.snapshots, info.snapshot_id.as_deref()), (2, Some(c.snapshot_id.as_str())));
    assert_eq!(store.version_body(&a.snapshot_id).unwrap().unwrap(), b"# Limits\n\nPool size is 40.\n");

    let gone = s.url("/missing");
    assert_eq!(mirror(&mut store, &gone, Via::Link, &loopback()).unwrap(), Recorded::Failed(FetchError::Status(404)));
    let info = store.external(&gone).unwrap();
    assert_eq!((info.snapshot_id, info.last_status, info.last_error.as_deref()), (None, Some(404), Some("HTTP 404")));
}

/// Every redirect case of `fixtures/externals/redirects*.jsonl` (ours, and a set written blind
/// from the rule alone): the server answers `from` with a 302 to `location` and every other path
/// with a page. A followed redirect must request exactly `expect` next (RFC 3986 resolution
/// against the page that sent it, the fragment not sent); a refused one must fail as a refused
/// redirect with nothing requested after it.
#[test]
fn redirect_references_resolve_by_rfc_3986_and_non_web_targets_are_refused() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/externals");
    let mut failures = Vec::new();
    let mut cases = 0;
    for file in ["redirects.jsonl", "redirects-blind.jsonl"] {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else { continue };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            cases += 1;
            let case: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{file}: {e}: {line}"));
            let (from, location, expect) = (
                case["from"].as_str().unwrap().to_owned(),
                case["location"].as_str().unwrap().to_owned(),
                case["expect"].as_str().unwrap(),
            );
            let (f, l) = (from.clone(), location.clone());
            let s = Site::start(Box::new(move |path: &str| if path == f { Reply::redirect(&l) } else { Reply::html("<h1>Landed</h1>") }));
            let got = fetch(&s.url(&from), &loopback());
            // What the server was asked next (the fragment is never sent; a target equal to
            // `from` loops, and is cut at the redirect limit).
            let next = s.requests.lock().unwrap().get(1).cloned();
            let ok = match (expect, &got) {
                ("refused", Err(FetchError::BadRedirect(_))) => next.is_none(),
                ("refused", _) => false,
                (e, Err(FetchError::Redirects(_))) if e == from => next.as_deref() == Some(e),
                (e, Ok(_)) => next.as_deref() == Some(e),
                _ => false,
            };
            if !ok {
                failures.push(format!("{file} [{}] {from} -> {location:?}: expected {expect}, got {got:?}", case["class"]));
            }
        }
    }
    assert!(cases >= 20, "only {cases} cases");
    assert!(failures.is_empty(), "{} of {cases} redirect cases failed:\n{}", failures.len(), failures.join("\n"));
}
