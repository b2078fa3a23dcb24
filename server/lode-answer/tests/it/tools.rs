//! Tool-augmented answers: a scripted model on loopback calls `fetch_url`; every page it gets
//! is stored as a snapshot before it sees it, then cited and checked like a note. Adversarial
//! models cite what the page never said, fetch no-egress domains, smuggle secrets into URLs,
//! call unknown tools and never stop calling.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::support::FakeLlm;
use lode_answer::egress::EgressRules;
use lode_answer::llm::LlmConfig;
use lode_answer::{ask, Answer, AskConfig, AskError, Fetcher, StoredPage, Synthesizer};
use lode_core::gate::{ScorerSlot, Step};
use lode_retrieval::Models;
use lode_store::{Source, Store, StoreOptions};
use lode_testing::web::{Reply, Site};

const PAGE: &str = "<html><head><title>Pool limits</title></head><body><h1>Pool limits</h1><p>The shared pool allows 40 server connections.</p><p>Bursts are capped at 60.</p></body></html>";

/// The host side of the tool, as `lode ask` has it: fetch (loopback allowed), store through a
/// connection of its own, say where.
#[derive(Debug)]
struct TestFetcher {
    db: PathBuf,
    calls: Arc<AtomicUsize>,
}

impl Fetcher for TestFetcher {
    fn fetch_snapshot(&self, url: &str, cancel: Option<&Arc<std::sync::atomic::AtomicBool>>) -> Result<StoredPage, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let opts = lode_externals::FetchOptions { allow_loopback: true, cancel: cancel.cloned(), ..Default::default() };
        let mut store = Store::open(&self.db, StoreOptions::default()).map_err(|e| e.to_string())?;
        let (final_url, s) = lode_externals::store_for_ask(&mut store, url, lode_externals::fetch(url, &opts))?;
        Ok(StoredPage { final_url, note_id: s.note_id, version_id: s.snapshot_id })
    }
}

struct Setup {
    _tmp: tempfile::TempDir,
    store: Store,
    site: Site,
    cfg: AskConfig,
    calls: Arc<AtomicUsize>,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("lode.db");
    let mut store = Store::open(&db, StoreOptions::default()).unwrap();
    let site = Site::start(Box::new(|path: &str| match path {
        "/limits" => Reply::html(PAGE),
        "/slow" => Reply { delay: std::time::Duration::from_secs(10), ..Reply::html(PAGE) },
        _ => Reply::typed(404, "text/plain", b"none"),
    }));
    let note = format!("# Pool\n\nWe use the shared pool described [upstream]({}).\n", site.url("/limits"));
    store.save_note("notes/pool.md", note.as_bytes()).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let cfg = AskConfig { fetcher: Some(Arc::new(TestFetcher { db, calls: calls.clone() })), ..AskConfig::default() };
    Setup { _tmp: tmp, store, site, cfg, calls }
}

fn llm(endpoint: &str) -> Synthesizer {
    Synthesizer::Llm(LlmConfig {
        endpoint: endpoint.to_owned(),
        model: "scripted".into(),
        remote: Some(true),
        tools: true,
        retries: 0,
        timeout_secs: 10,
        ..Default::default()
    })
}

fn tool_call(url: &str) -> String {
    serde_json::json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "fetch_url", "arguments": serde_json::json!({"url": url}).to_string()}}]}}]
    })
    .to_string()
}

fn answer(content: &str) -> String {
    crate::support::completion(content)
}

/// The label the tool result gave the fetched page, from the last tool message of a request.
fn tool_label(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let msgs = v["messages"].as_array()?;
    let tool = msgs.iter().rev().find(|m| m["role"] == "tool")?;
    let text = tool["content"].as_str()?;
    text.strip_prefix('[')?.split_once(']').map(|(l, _)| l.to_owned())
}

fn tool_reply(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v["messages"].as_array()?.iter().rev().find(|m| m["role"] == "tool").and_then(|m| m["content"].as_str().map(str::to_owned))
}

fn run(s: &Setup, rules: &EgressRules, respond: impl Fn(&str) -> String + Send + 'static) -> (Answer, Vec<String>) {
    let fake = FakeLlm::start(Box::new(move |body| (200, respond(body))));
    let a = ask(
        &s.store,
        "What is the upstream pool limit?",
        None,
        &s.cfg,
        rules,
        &llm(&fake.endpoint),
        Models::default(),
        &mut ScorerSlot::None,
    )
    .unwrap();
    let reqs = fake.requests.lock().unwrap().clone();
    (a, reqs)
}

fn claims(label: &str, quote: &str, claim: &str) -> String {
    serde_json::json!({"claims": [{"text": claim, "support": [{"source": label, "quote": quote}]}]}).to_string()
}

#[test]
fn a_fetched_page_is_stored_first_then_cited_and_checked() {
    let s = setup();
    let url = s.site.url("/limits");
    let u = url.clone();
    let (a, reqs) = run(&s, &EgressRules::default(), move |body| match tool_label(body) {
        None => tool_call(&u),
        Some(label) => {
            answer(&claims(&label, "The shared pool allows 40 server connections.", "The shared pool allows 40 server connections"))
        }
    });
    assert_eq!(a.claims.len(), 1, "{a:#?}");
    let c = &a.claims[0].citations[0];
    assert_eq!((c.kind, c.url.as_deref(), c.path.as_str()), (Source::Snapshot, Some(url.as_str()), url.as_str()));
    assert_eq!(c.quoted_span, "The shared pool allows 40 server connections.");
    assert!(c.fetched_at.is_some());
    // Stored before the model saw it: the version it cites is the stored snapshot.
    let info = s.store.external(&url).unwrap();
    assert_eq!(info.snapshot_id.as_deref(), Some(c.version_id.as_str()));
    assert_eq!(info.discovered_via.as_deref(), Some("ask"), "fetched by the answer, not mirrored");
    assert_eq!(info.linked_from, ["notes/pool.md"], "the only URL it could fetch is one the sources name");
    let body = s.store.version_body(&c.version_id).unwrap().unwrap();
    assert_eq!(&body[c.start..c.end], c.quoted_span.as_bytes());
    // Offered the tool first, then shown the page as a new source.
    assert!(reqs[0].contains("\"fetch_url\""));
    assert!(tool_reply(&reqs[1]).unwrap().contains("allows 40 server connections"));
    // Each tool call is an egress event of its own.
    let log = s.store.egress_log().unwrap();
    let tool: Vec<_> = log.iter().filter(|r| r.purpose == "tool").collect();
    assert_eq!(tool.len(), 1, "{log:?}");
    assert_eq!(tool[0].destination, "127.0.0.1");
    assert_eq!(log.iter().filter(|r| r.purpose == "synthesis").count(), 2, "both requests left the machine");
}

/// A question cancelled while the model's fetch waits on a slow page: the fetch stops at once
/// (not at its timeout), the ask ends cancelled, and nothing is recorded against the page.
#[test]
fn a_cancel_stops_the_tools_fetch_at_once() {
    let s = setup();
    let slow = s.site.url("/slow");
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cfg = AskConfig { cancel: Some(flag.clone()), ..s.cfg.clone() };
    let u = slow.clone();
    let fake = FakeLlm::start(Box::new(move |_| (200, tool_call(&u))));
    let setter = {
        let flag = flag.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(500));
            flag.store(true, Ordering::SeqCst);
        })
    };
    let t = std::time::Instant::now();
    let question = format!("What does {slow} say about the pool limit?");
    let r = ask(&s.store, &question, None, &cfg, &EgressRules::default(), &llm(&fake.endpoint), Models::default(), &mut ScorerSlot::None);
    assert!(matches!(r, Err(AskError::Cancelled)), "{r:?}");
    assert!(t.elapsed() < std::time::Duration::from_secs(3), "ended {:?} after the start, 0.5 s after the cancel", t.elapsed());
    setter.join().unwrap();
    assert_eq!((s.calls.load(Ordering::SeqCst), s.site.hits("/slow")), (1, 1), "the fetch was under way when the ask was cancelled");
    let info = s.store.external(&slow).unwrap();
    assert_eq!((info.last_attempt_at, info.last_error), (None, None), "a cancelled fetch says nothing about the page");
}

#[test]
fn a_quote_the_page_never_contained_is_dropped() {
    let s = setup();
    let u = s.site.url("/limits");
    let (a, _) = run(&s, &EgressRules::default(), move |body| match tool_label(body) {
        None => tool_call(&u),
        Some(label) => {
            answer(&claims(&label, "The shared pool allows 400 server connections.", "The shared pool allows 400 server connections"))
        }
    });
    assert!(a.claims.is_empty() && a.abstained, "{a:#?}");
    assert_eq!(a.dropped[0].step, Step::SpanCheck);
}

#[test]
fn refused_calls_fetch_nothing_and_say_why() {
    let s = setup();
    let rules = EgressRules::default().with_domains(&["internal.example.com".to_owned()]).unwrap();
    for (url, why) in [
        ("https://wiki.internal.example.com/page", "no-egress domain"),
        (&*format!("{}?token=ghp_0123456789abcdefghijABCDEFGHIJ012345", s.site.url("/limits")), "secret"),
        ("file:///etc/passwd", "only http and https"),
        ("not a url", "no spaces or control characters"),
        ("mailto:x@example.com", "only http and https"),
        // Composed by the model: note text carried out in the query, or a page it was never shown.
        (&*format!("{}?q=We+use+the+shared+pool", s.site.url("/limits")), "appears in the question, the sources"),
        (&*s.site.url("/other"), "appears in the question, the sources"),
        (&*format!("{}\n/x", s.site.url("/limits")), "no spaces or control characters"),
    ] {
        let u = url.to_owned();
        let (a, reqs) = run(&s, &rules, move |body| match tool_reply(body) {
            None => tool_call(&u),
            Some(_) => answer("{\"claims\": []}"),
        });
        let reply = tool_reply(&reqs[1]).unwrap();
        assert!(reply.starts_with("fetch_url refused:") && reply.contains(why), "{url}: {reply}");
        assert!(a.abstained);
    }
    assert_eq!(s.calls.load(Ordering::SeqCst), 0, "nothing was fetched");
    assert_eq!(s.site.hits("/limits"), 0);
    // A refused call sent nothing: no tool egress.
    assert!(s.store.egress_log().unwrap().iter().all(|r| r.purpose != "tool"));
}

#[test]
fn unknown_tools_and_endless_calls_end() {
    let s = setup();
    let u = s.site.url("/limits");
    let (a, reqs) = run(&s, &EgressRules::default(), move |body| {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        if v.get("tools").is_none() {
            return answer("{\"claims\": []}");
        }
        if body.contains("unknown tool") {
            tool_call(&u)
        } else {
            serde_json::json!({"choices": [{"message": {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "run_shell", "arguments": "{\"cmd\": \"rm -rf /\"}"}}]}}]}).to_string()
        }
    });
    assert!(a.abstained);
    assert_eq!(reqs.len(), 3, "two rounds with tools, then one without");
    assert!(tool_reply(&reqs[1]).unwrap().contains("unknown tool"));
    assert!(serde_json::from_str::<serde_json::Value>(&reqs[2]).unwrap().get("tools").is_none());
}

#[test]
fn snapshots_of_no_egress_domains_never_reach_a_remote_model() {
    let s = setup();
    // The same page under a host name the rules keep local, mirrored as a linked page.
    let url = s.site.url("/limits").replace("127.0.0.1", "localhost");
    let opts = lode_externals::FetchOptions { allow_loopback: true, ..Default::default() };
    let mut w = Store::open(s.store.path(), StoreOptions::default()).unwrap();
    assert!(matches!(lode_externals::mirror(&mut w, &url, lode_store::Via::Link, &opts).unwrap(), lode_externals::Recorded::Saved(_)));
    let rules = EgressRules::default().with_domains(&["localhost".to_owned()]).unwrap();
    let fake = FakeLlm::start(Box::new(|_| (200, answer("{\"claims\": []}"))));
    let cfg = AskConfig { fetcher: None, ..Default::default() };
    let a =
        ask(&s.store, "shared pool server connections", None, &cfg, &rules, &llm(&fake.endpoint), Models::default(), &mut ScorerSlot::None)
            .unwrap();
    assert!(a.withheld.iter().any(|w| w.path == url && w.reason.contains("no-egress domain")), "{:?}", a.withheld);
    let sent = fake.requests.lock().unwrap().clone();
    assert!(sent.iter().all(|b| !b.contains("40 server connections")), "the snapshot's text left the machine");
}
