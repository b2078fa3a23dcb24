//! Cited answers end to end on a real store: the extractive synthesizer on the example vault, and
//! an LLM synthesizer against a scripted OpenAI-compatible server on loopback — the four failure
//! modes, egress rules, redaction, retries and malformed answers.

use std::path::{Path, PathBuf};

use crate::support::{completion, label_of, user_message, FakeLlm};
use lode_answer::egress::EgressRules;
use lode_answer::llm::LlmConfig;
use lode_answer::{ask, Answer, AskConfig, AskError, Rung, Synthesizer};
use lode_core::gate::{ScorerSlot, Step};
use lode_retrieval::Models;
use lode_store::vault::{index_vault, IndexOptions};
use lode_store::{Store, StoreOptions};

const ROTATION: &str = "Let's Encrypt certificates are valid for 90 days, but staging certificates are rotated every 60 days so that we always have a 30-day safety margin.";
const LAST: &str = "The last rotation was done on 2026-02-19.";
const FAILOVER: &str = "The failover did not complete automatically.";

use lode_testing::copy_dir;

struct Vault {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    store: Store,
}

fn vault(extra: &[(&str, &str)]) -> Vault {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vault");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vault"), &root);
    for (path, body) in extra {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    let mut store = Store::open(&tmp.path().join("lode.db"), StoreOptions::default()).unwrap();
    index_vault(&mut store, &root, &IndexOptions::default(), |_| {}).unwrap();
    Vault { _tmp: tmp, root, store }
}

fn extractive(v: &Vault, q: &str, pinned: Option<&str>) -> Answer {
    let rules = EgressRules::default();
    ask(&v.store, q, pinned, &AskConfig::default(), &rules, &Synthesizer::Extractive, Models::default(), &mut ScorerSlot::None).unwrap()
}

fn llm(endpoint: &str, remote: bool) -> Synthesizer {
    Synthesizer::Llm(LlmConfig {
        endpoint: endpoint.to_owned(),
        model: "scripted".into(),
        remote: Some(remote),
        retries: 2,
        timeout_secs: 10,
        ..Default::default()
    })
}

/// Asks through a scripted model that builds its reply from the prompt it receives.
fn ask_llm(
    v: &Vault,
    q: &str,
    pinned: Option<&str>,
    remote: bool,
    rules: &EgressRules,
    reply: impl Fn(&str) -> String + Send + 'static,
) -> (Result<Answer, AskError>, Vec<String>) {
    ask_llm_with(v, &AskConfig::default(), q, pinned, remote, rules, reply)
}

fn ask_llm_with(
    v: &Vault,
    cfg: &AskConfig,
    q: &str,
    pinned: Option<&str>,
    remote: bool,
    rules: &EgressRules,
    reply: impl Fn(&str) -> String + Send + 'static,
) -> (Result<Answer, AskError>, Vec<String>) {
    let fake = FakeLlm::start(Box::new(move |body| (200, completion(&reply(body)))));
    let a = ask(&v.store, q, pinned, cfg, rules, &llm(&fake.endpoint, remote), Models::default(), &mut ScorerSlot::None);
    let requests = fake.requests.lock().unwrap().clone();
    (a, requests)
}

fn claims_json(claims: &[(&str, &[(&str, &str)])]) -> String {
    let list: Vec<serde_json::Value> = claims
        .iter()
        .map(|(text, support)| {
            serde_json::json!({"text": text, "support": support.iter().map(|(s, q)| serde_json::json!({"source": s, "quote": q})).collect::<Vec<_>>()})
        })
        .collect();
    serde_json::json!({ "claims": list }).to_string()
}

#[test]
fn extractive_answer_cites_the_exact_span() {
    let v = vault(&[]);
    let a = extractive(&v, "How often are staging certificates rotated?", None);
    assert!(!a.abstained, "{a:?}");
    let first = &a.claims[0];
    assert!(first.text.contains("every 60 days"), "{first:?}");
    assert_eq!(first.label, "verified");
    let c = &first.citations[0];
    assert_eq!(c.path, "runbooks/rotate-staging-certs.md");
    let body = std::fs::read_to_string(v.root.join(&c.path)).unwrap();
    assert_eq!(&body[c.start..c.end], c.quoted_span);
    assert_eq!(c.line, 1 + body[..c.start].matches('\n').count());
    assert_eq!(Some(c.version_id.clone()), v.store.head_of(&c.path).unwrap());
}

#[test]
fn extractive_answers_from_the_fixtures() {
    let v = vault(&[]);
    let cases = [
        ("Which Redis eviction policy was chosen?", "allkeys-lru"),
        ("What pool size does PgBouncer use?", "40"),
        ("When is the next staging rotation due?", "2026-04-20"),
        ("Did the failover complete automatically during the incident?", "did not complete automatically"),
        ("Combien de temps a duré la panne ?", "47 minutes"),
    ];
    for (q, want) in cases {
        let a = extractive(&v, q, None);
        let texts: Vec<&str> = a.claims.iter().map(|c| c.text.as_str()).collect();
        assert!(texts.iter().any(|t| t.contains(want)), "{q}: {want:?} not in {texts:?}");
    }
}

#[test]
fn unanswerable_question_abstains_with_related_passages() {
    let v = vault(&[]);
    let a = extractive(&v, "What is the boiling point of liquid nitrogen on Mars?", None);
    assert!(a.abstained);
    assert!(a.claims.is_empty());
    assert!(a.abstain_reason.unwrap().contains("don't answer"));
}

#[test]
fn pinned_note_comes_first_and_whole() {
    let v = vault(&[]);
    let a = extractive(&v, "What does the rollback step say?", Some("runbooks/rotate-staging-certs.md"));
    assert!(a.claims.iter().all(|c| c.citations[0].path == "runbooks/rotate-staging-certs.md"), "{a:?}");
    let rules = EgressRules::default();
    let items = lode_answer::gather(
        &v.store,
        "anything at all",
        Some("runbooks/rotate-staging-certs.md"),
        &AskConfig::default(),
        &rules,
        Models::default(),
    )
    .unwrap();
    let pinned = v.store.passages_of("runbooks/rotate-staging-certs.md").unwrap().len();
    assert!(pinned > 8, "more passages than the retrieval limit");
    assert!(items[..pinned].iter().all(|i| i.pinned), "every passage of the pinned note, first");
    assert!(matches!(
        lode_answer::gather(&v.store, "x", Some("nope.md"), &AskConfig::default(), &rules, Models::default()),
        Err(AskError::UnknownNote(_))
    ));
}

#[test]
fn the_four_failure_modes_are_dropped_and_valid_claims_pass() {
    let v = vault(&[]);
    let (a, requests) = ask_llm_with(
        &v,
        &AskConfig { context_limit: 40, ..AskConfig::default() },
        "When was the last staging certificate rotation and did the Redis failover complete automatically?",
        Some("runbooks/rotate-staging-certs.md"),
        false,
        &EgressRules::default(),
        |body| {
            let certs = label_of(body, "runbooks/rotate-staging-certs.md").expect("runbook in the prompt");
            let inc = label_of(body, "notes/incident-2026-02-14.md").expect("incident note in the prompt");
            claims_json(&[
                // valid: coupled quotes
                ("Staging certificates are rotated every 60 days", &[(&certs, ROTATION)]),
                ("The last rotation was done on 2026-02-19", &[(&certs, LAST)]),
                // 1. fabricated quote
                ("Staging certificates are rotated every 45 days", &[(&certs, "Staging certificates are rotated every 45 days.")]),
                // 2. real quote, contradicting claim: negation, changed number, changed date
                ("The failover completed automatically", &[(&inc, FAILOVER)]),
                ("Staging certificates are rotated every 90 days", &[(&certs, ROTATION)]),
                ("The last rotation was done on 2026-03-19", &[(&certs, LAST)]),
                // 3. paraphrase that drifts a number
                ("Certificates get a 20-day safety margin", &[(&certs, ROTATION)]),
                // 4. synthesis of two notes that neither supports
                ("The failed failover delayed the certificate rotation", &[(&certs, LAST), (&inc, FAILOVER)]),
                // a label that was never given
                ("Certificates are rotated every 60 days", &[("S99", ROTATION)]),
            ])
        },
    );
    let a = a.unwrap();
    assert_eq!(requests.len(), 1);
    let kept: Vec<&str> = a.claims.iter().filter(|c| c.rung == Rung::Verified).map(|c| c.text.as_str()).collect();
    assert_eq!(kept, ["Staging certificates are rotated every 60 days", "The last rotation was done on 2026-02-19"]);
    // Fabricated quotes and unknown labels are dropped.
    let steps: Vec<Step> = a.dropped.iter().map(|d| d.step).collect();
    assert_eq!(steps, [Step::SpanCheck, Step::SpanCheck]);
    // Real quotes under unverifiable wording: shown as evidence only — the cited sentences,
    // never the model's sentence — after the verified claims.
    let evidence: Vec<&lode_answer::AnswerClaim> = a.claims.iter().filter(|c| c.rung == Rung::EvidenceOnly).collect();
    assert_eq!(evidence.len(), 5);
    assert!(a.claims[..2].iter().all(|c| c.rung == Rung::Verified), "verified first");
    let shown: Vec<&str> = evidence.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(shown, [FAILOVER, ROTATION, LAST, ROTATION, &format!("{LAST} … {FAILOVER}")[..],]);
    for c in &evidence {
        let model = c.unverified_text.as_deref().unwrap();
        assert_ne!(c.text, model);
        assert!(c.verification.is_none() && c.label.starts_with("evidence only"));
        assert!(c.reason.as_deref().unwrap().contains("no entailment model"), "fail-closed: {:?}", c.reason);
        for cit in &c.citations {
            assert!(c.text.contains(lode_core::text::normalize_whitespace(&cit.quoted_span).as_str()), "cited at the sentence shown");
        }
    }
    assert!(!a.abstained);
    assert_eq!(a.synthesizer, "llm:scripted");
}

#[test]
fn model_that_only_hallucinates_makes_the_answer_abstain() {
    let v = vault(&[]);
    let (a, _) = ask_llm(&v, "How often are staging certificates rotated?", None, false, &EgressRules::default(), |body| {
        let certs = label_of(body, "runbooks/rotate-staging-certs.md").unwrap();
        claims_json(&[("Certificates rotate weekly", &[(&certs, "Certificates rotate weekly.")])])
    });
    let a = a.unwrap();
    assert!(a.abstained && a.claims.is_empty());
    assert_eq!(a.dropped.len(), 1);
    assert!(!a.related.is_empty(), "related passages are offered instead");
}

#[test]
fn no_egress_notes_are_withheld_logged_and_uncitable() {
    let secret_note = "---\ntitle: Salary review\nno_egress: true\n---\n# Salary review\n\nThe staging certificates budget for Mei Lin is 12000 euros per year.\n";
    let v = vault(&[
        ("private/salary.md", secret_note),
        ("people/vendor.md", "# Vendor\n\nThe staging certificates vendor contact is in the vault.\n"),
    ]);
    let rules = EgressRules::new(&["people/vendor.md".to_owned()]).unwrap();
    let (a, requests) = ask_llm(&v, "staging certificates budget vendor", None, true, &rules, |body| {
        // The adversarial model cites withheld text under a label it was given for another note.
        let any = user_message(body).lines().find_map(|l| l.strip_prefix("[S1]").map(|_| "S1".to_owned())).unwrap();
        claims_json(&[
            ("The certificates budget is 12000 euros", &[(&any, "The staging certificates budget for Mei Lin is 12000 euros per year.")]),
            ("The budget is 12000 euros", &[("S42", "The staging certificates budget for Mei Lin is 12000 euros per year.")]),
        ])
    });
    let a = a.unwrap();
    assert!(a.claims.is_empty(), "{a:?}");
    assert!(a.dropped.iter().all(|d| d.step == Step::SpanCheck));
    let withheld: Vec<&str> = a.withheld.iter().map(|w| w.path.as_str()).collect();
    assert!(withheld.contains(&"private/salary.md") && withheld.contains(&"people/vendor.md"), "{withheld:?}");
    assert!(a.withheld.iter().any(|w| w.reason.contains("no_egress")));

    let sent = &requests[0];
    assert!(!sent.contains("12000"), "withheld text left the machine");
    assert!(!sent.contains("vendor contact"));
    let log = v.store.egress_log().unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].bytes, sent.len() as u64);
    assert_eq!(log[0].purpose, "synthesis");
    assert!(log[0].destination.starts_with("127.0.0.1:"));
    let withheld_ids: Vec<i64> = a.withheld.iter().map(|w| w.passage_id).collect();
    assert!(!log[0].passages.is_empty());
    assert!(log[0].passages.iter().all(|p| !withheld_ids.contains(p)), "the log lists only what was sent");
}

#[test]
fn local_endpoint_sees_everything_and_logs_nothing() {
    let v = vault(&[("private/salary.md", "---\nno_egress: true\n---\nThe staging certificates budget is 12000 euros.\n")]);
    let (a, requests) = ask_llm(&v, "staging certificates budget", None, false, &EgressRules::default(), |body| {
        let l = label_of(body, "private/salary.md").expect("a loopback model may see no-egress notes");
        claims_json(&[("The staging certificates budget is 12000 euros", &[(&l, "The staging certificates budget is 12000 euros.")])])
    });
    let a = a.unwrap();
    assert_eq!(a.claims.len(), 1);
    assert!(a.withheld.is_empty());
    assert!(requests[0].contains("12000"));
    assert!(v.store.egress_log().unwrap().is_empty(), "nothing left the machine");
}

#[test]
fn secrets_are_redacted_before_leaving() {
    let v = vault(&[(
        "notes/keys.md",
        "# Deploy keys\n\nThe staging deploy key is AKIAIOSFODNN7EXAMPLE and the token: supersecretvalue123.\n",
    )]);
    let (a, requests) = ask_llm(&v, "staging deploy key", None, true, &EgressRules::default(), |_| claims_json(&[]));
    assert!(a.unwrap().abstained);
    assert!(!requests[0].contains("AKIAIOSFODNN7EXAMPLE") && !requests[0].contains("supersecretvalue123"));
    assert!(requests[0].contains("[REDACTED:aws-access-key]"));
    assert_eq!(v.store.egress_log().unwrap()[0].redactions, 2);
}

#[test]
fn passages_sharing_a_parent_send_it_once() {
    let v = vault(&[]);
    let (_, requests) =
        ask_llm(&v, "rotate", Some("runbooks/rotate-staging-certs.md"), false, &EgressRules::default(), |_| claims_json(&[]));
    let prompt = user_message(&requests[0]);
    let step_blocks = prompt.matches("3. Announce the rotation").count();
    assert_eq!(step_blocks, 1, "the steps list is one parent block for nine passages:\n{prompt}");
}

#[test]
fn broken_endpoints_give_clear_errors() {
    let v = vault(&[]);
    let q = "How often are staging certificates rotated?";
    let rules = EgressRules::default();
    // Truncated JSON in the message: an unusable reply is not an error; the extractive answer
    // is given instead, labelled as such.
    let (a, _) = ask_llm(&v, q, None, false, &rules, |_| "{\"claims\": [{\"text\": \"Cert".to_owned());
    let a = a.unwrap();
    assert!(a.synthesizer.starts_with("extractive (fallback from llm:scripted)"), "{}", a.synthesizer);
    assert!(a.notice.as_deref().unwrap().contains("could not be used"), "{:?}", a.notice);
    assert!(a.claims.iter().any(|c| c.text.contains("every 60 days")));
    // Not JSON at all, with HTTP 200: the same.
    let fake = FakeLlm::start(Box::new(|_| (200, "<html>502 Bad Gateway</html>".to_owned())));
    let a = ask(&v.store, q, None, &AskConfig::default(), &rules, &llm(&fake.endpoint, false), Models::default(), &mut ScorerSlot::None)
        .unwrap();
    assert!(a.notice.as_deref().unwrap().contains("not JSON"), "{:?}", a.notice);
    // 401: no retry, the body is shown.
    let fake = FakeLlm::start(Box::new(|_| (401, "{\"error\":\"invalid api key\"}".to_owned())));
    let e = ask(&v.store, q, None, &AskConfig::default(), &rules, &llm(&fake.endpoint, false), Models::default(), &mut ScorerSlot::None)
        .unwrap_err();
    assert!(e.to_string().contains("401") && e.to_string().contains("invalid api key"), "{e}");
    assert_eq!(fake.requests.lock().unwrap().len(), 1);
    // 503 twice, then an answer: retried with backoff.
    let mut n = 0;
    let fake = FakeLlm::start(Box::new(move |_| {
        n += 1;
        if n < 3 {
            (503, "busy".to_owned())
        } else {
            (200, completion("{\"claims\": []}"))
        }
    }));
    let a = ask(&v.store, q, None, &AskConfig::default(), &rules, &llm(&fake.endpoint, false), Models::default(), &mut ScorerSlot::None)
        .unwrap();
    assert!(a.abstained);
    assert_eq!(fake.requests.lock().unwrap().len(), 3);
    // Nothing listening.
    let dead = llm("http://127.0.0.1:9/v1", false);
    let e = ask(&v.store, q, None, &AskConfig::default(), &rules, &dead, Models::default(), &mut ScorerSlot::None).unwrap_err();
    assert!(e.to_string().contains("unreachable"), "{e}");
}

#[test]
fn a_question_from_a_no_egress_note_never_reaches_a_remote_model() {
    let diary = "---\nno_egress: true  # private\n---\n# Diary\n\nHow often are staging certificates rotated, and what is Mei's salary?\n";
    let v = vault(&[("private/diary.md", diary)]);
    let fake = FakeLlm::start(Box::new(|_| (200, completion("{\"claims\": []}"))));
    let q = "How often are staging certificates rotated, and what is Mei's salary?";
    let a = lode_answer::ask_from(
        &v.store,
        q,
        Some("private/diary.md"),
        None,
        &AskConfig::default(),
        &EgressRules::default(),
        &llm(&fake.endpoint, true),
        Models::default(),
        &mut ScorerSlot::None,
    )
    .unwrap();
    assert!(fake.requests.lock().unwrap().is_empty(), "the question left the machine");
    assert_eq!(a.synthesizer, "extractive");
    assert!(a.notice.as_deref().unwrap().contains("private/diary.md"), "{:?}", a.notice);
    assert!(v.store.egress_log().unwrap().is_empty());
}

#[test]
fn frontmatter_changed_on_disk_since_indexing_withholds_the_note() {
    let v = vault(&[("notes/budget.md", "# Budget\n\nThe staging certificates budget is 12000 euros.\n")]);
    // The user marks the note private; the index has not seen the change yet.
    std::fs::write(
        v.root.join("notes/budget.md"),
        "---\nno-egress: yes # changed today\n---\n# Budget\n\nThe staging certificates budget is 12000 euros.\n",
    )
    .unwrap();
    let fake = FakeLlm::start(Box::new(|_| (200, completion("{\"claims\": []}"))));
    let cfg = AskConfig { vault_root: Some(v.root.clone()), ..AskConfig::default() };
    let a = ask(
        &v.store,
        "staging certificates budget",
        None,
        &cfg,
        &EgressRules::default(),
        &llm(&fake.endpoint, true),
        Models::default(),
        &mut ScorerSlot::None,
    )
    .unwrap();
    let sent = fake.requests.lock().unwrap().concat();
    assert!(!sent.contains("12000"), "stale metadata let a private note leave");
    assert!(a.withheld.iter().any(|w| w.path == "notes/budget.md"), "{:?}", a.withheld);
}

#[test]
fn secrets_split_by_the_window_and_in_the_question_are_redacted() {
    let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDs1Vb2gvZ3JpZGRlcGxveWtleWV4YW1wbGVleGFtcGxlZXhh\n-----END OPENSSH PRIVATE KEY-----";
    let note = format!("# Deploy key rotation\n\nThe staging deploy key rotation happens yearly and the key is:\n{key}\nAfter rotation, update the deploy key rotation checklist.\n");
    let v = vault(&[("notes/deploy.md", &note)]);
    let fake = FakeLlm::start(Box::new(|_| (200, completion("{\"claims\": []}"))));
    // A small window cuts the key in half around the passage.
    let cfg = AskConfig { parent_window: 120, ..AskConfig::default() };
    let a = ask(
        &v.store,
        "deploy key rotation? my password: hunter2x",
        None,
        &cfg,
        &EgressRules::default(),
        &llm(&fake.endpoint, true),
        Models::default(),
        &mut ScorerSlot::None,
    );
    assert!(a.is_ok(), "{a:?}");
    let sent = fake.requests.lock().unwrap().concat();
    assert!(!sent.is_empty());
    for part in ["b3BlbnNzaC1rZXkt", "QyNTUxOQAAACDs1Vb2", "BEGIN OPENSSH", "hunter2x"] {
        assert!(!sent.contains(part), "{part} left the machine:\n{sent}");
    }
}

#[test]
fn every_secret_class_is_redacted_in_the_bytes_sent() {
    let note = "# Staging deploy secrets\n\n\
        The staging deploy uses these settings.\n\n\
        DB_PASSWORD=hunter2\n\
        AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n\
        export API_TOKEN=\"abc123xyz\"\n\n\
        The staging deploy database is postgres://deploy:s3cr3tpw@db.internal:5432/app for now.\n\n\
        staging_deploy:\n  private_key: |\n    MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n    BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n  region: eu\n\n\
        | service | password |\n|---|---|\n| staging deploy db | Tr0ub4dor |\n\n\
        The staging deploy Stripe key is sk_live_51HxQabcdefghijklmnopqrstu.\n\n\
        password: abc\n";
    let v = vault(&[("notes/deploy-secrets.md", note)]);
    let fake = FakeLlm::start(Box::new(|_| (200, completion("{\"claims\": []}"))));
    let cfg = AskConfig { context_limit: 40, ..AskConfig::default() };
    let a = ask(
        &v.store,
        "staging deploy settings",
        Some("notes/deploy-secrets.md"),
        &cfg,
        &EgressRules::default(),
        &llm(&fake.endpoint, true),
        Models::default(),
        &mut ScorerSlot::None,
    );
    assert!(a.is_ok(), "{a:?}");
    let sent = fake.requests.lock().unwrap().concat();
    assert!(sent.contains("staging deploy"), "the note was sent: {sent}");
    for secret in [
        "hunter2",
        "wJalrXUtnFEMI",
        "abc123xyz",
        "s3cr3tpw",
        "MIIEvQIBADANBgkqhkiG9w0",
        "BKcwggSjAgEAAoIBAQC7",
        "Tr0ub4dor",
        "sk_live_51HxQ",
        "password: abc",
    ] {
        assert!(!sent.contains(secret), "{secret} left the machine:\n{sent}");
    }
    assert!(sent.contains("db.internal"), "the host is kept, only the password goes");
}

#[test]
fn cancelling_stops_waiting_for_a_slow_model() {
    let v = vault(&[]);
    let fake = FakeLlm::start(Box::new(|_| {
        std::thread::sleep(std::time::Duration::from_secs(5));
        (200, completion("{\"claims\": []}"))
    }));
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cfg = AskConfig { cancel: Some(cancel.clone()), ..AskConfig::default() };
    let flag = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let t = std::time::Instant::now();
    let r = ask(
        &v.store,
        "How often are staging certificates rotated?",
        None,
        &cfg,
        &EgressRules::default(),
        &llm(&fake.endpoint, false),
        Models::default(),
        &mut ScorerSlot::None,
    );
    assert!(matches!(r, Err(AskError::Cancelled)), "{r:?}");
    assert!(t.elapsed() < std::time::Duration::from_secs(2), "returned {:?} after the cancel, not when the model answered", t.elapsed());
    assert_eq!(fake.requests.lock().unwrap().len(), 1, "the request had been sent");
    // A flag set before the ask starts: nothing is retrieved or sent.
    let cfg = AskConfig { cancel: Some(std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true))), ..AskConfig::default() };
    let r = ask(
        &v.store,
        "How often?",
        None,
        &cfg,
        &EgressRules::default(),
        &llm(&fake.endpoint, false),
        Models::default(),
        &mut ScorerSlot::None,
    );
    assert!(matches!(r, Err(AskError::Cancelled)));
    assert_eq!(fake.requests.lock().unwrap().len(), 1);
}

#[test]
fn gitignore_style_patterns_withhold_in_the_bytes_sent() {
    let v = vault(&[
        ("private/x/salary.md", "# Salary\n\nThe staging certificates budget is 12000 euros.\n"),
        ("journal/journal-2026.md", "# Journal\n\nThe staging certificates budget worries me: 11000 euros.\n"),
    ]);
    for pattern in ["private/", "/private/**", "private", "**/salary.md"] {
        let rules = EgressRules::new(&[pattern.to_owned(), "**/journal-*.md".to_owned()]).unwrap();
        let fake = FakeLlm::start(Box::new(|_| (200, completion("{\"claims\": []}"))));
        let cfg = AskConfig { context_limit: 40, ..AskConfig::default() };
        let a = ask(
            &v.store,
            "staging certificates budget euros",
            None,
            &cfg,
            &rules,
            &llm(&fake.endpoint, true),
            Models::default(),
            &mut ScorerSlot::None,
        )
        .unwrap();
        let sent = fake.requests.lock().unwrap().concat();
        assert!(!sent.contains("12000") && !sent.contains("11000"), "{pattern}: withheld text left the machine");
        for path in ["private/x/salary.md", "journal/journal-2026.md"] {
            assert!(a.withheld.iter().any(|w| w.path == path), "{pattern}: {path} not withheld: {:?}", a.withheld);
        }
    }
}

const KIT: &str = "# Hiking kit\n\n## Myths\n\n- Cotton keeps you warm when wet.\n\n## Layers\n\nMerino wool keeps you warm when wet.\n\nIf the forecast says rain above 10 mm:\n\n- pack the heavy shell\n\n## Weights\n\n| Item | Weight | Price |\n|---|---|---|\n| tent | 1.4 kg | €320 |\n| stove | 80 g | €45 |\n\n## Launch\n\n- [ ] Replace the tent poles\n";

/// The note's structure decides what a quote asserts, in both synthesizers, and every citation
/// carries the context a reader sees around it (JSON, inserted markdown).
#[test]
fn structure_decides_what_a_quote_asserts_and_is_shown_with_it() {
    let v = vault(&[("kit.md", KIT)]);
    // LLM: a Myths line and an open task stated as facts are evidence only, with the reason;
    // a claim that carries the lead-in is verified.
    let (a, _) = ask_llm(&v, "What keeps you warm when wet?", None, false, &EgressRules::default(), |body| {
        let s = label_of(body, "kit.md").expect("kit.md is a source");
        claims_json(&[
            ("Cotton keeps you warm when wet", &[(&s, "Cotton keeps you warm when wet.")]),
            ("Replace the tent poles", &[(&s, "Replace the tent poles")]),
            (
                "If the forecast says rain above 10 mm: pack the heavy shell",
                &[(&s, "If the forecast says rain above 10 mm:"), (&s, "pack the heavy shell")],
            ),
        ])
    });
    let a = a.unwrap();
    let by_text =
        |t: &str| a.claims.iter().find(|c| c.unverified_text.as_deref() == Some(t) || c.text == t).unwrap_or_else(|| panic!("{t}: {a:#?}"));
    let myth = by_text("Cotton keeps you warm when wet");
    assert_eq!(myth.rung, Rung::EvidenceOnly);
    assert_eq!(myth.why.as_deref(), Some("listed under “Myths”"));
    assert_eq!(myth.label, "evidence only — listed under “Myths”");
    assert_eq!(myth.citations[0].context, "Hiking kit › Myths");
    let task = by_text("Replace the tent poles");
    assert_eq!((task.rung, task.why.as_deref()), (Rung::EvidenceOnly, Some("an open task")));
    assert_eq!(task.citations[0].context, "Hiking kit › Launch › [ ] open task");
    let rain = by_text("If the forecast says rain above 10 mm: pack the heavy shell");
    assert_eq!(rain.rung, Rung::Verified, "{rain:?}");
    let json = serde_json::to_value(&a).unwrap();
    assert!(json.to_string().contains("\"context\":\"Hiking kit › Myths\""), "{json}");
    let md = lode_answer::render::markdown(&a, "q.md");
    assert!(md.contains("*(evidence only — listed under “Myths”)* — in Hiking kit › Myths"), "{md}");

    // Extractive: the table row answers with its row key and the column the question asks
    // about; the Myths line is restated with its heading when it is the best sentence.
    let a = extractive(&v, "What does the stove weigh?", None);
    let first = &a.claims[0];
    assert_eq!((first.rung, first.text.as_str()), (Rung::Verified, "stove: Weight: 80 g"), "{a:#?}");
    assert_eq!(first.citations.len(), 3);
    assert!(first.citations.iter().all(|c| c.path == "kit.md"));
    let a = extractive(&v, "Does cotton keep you warm when wet?", None);
    let cotton = a.claims.iter().find(|c| c.text.contains("Cotton")).unwrap_or_else(|| panic!("{a:#?}"));
    assert_eq!((cotton.rung, cotton.text.as_str()), (Rung::Verified, "Myths: Cotton keeps you warm when wet."), "{a:#?}");
}

/// `n` notes on nothing any fixture asks about, so the question's terms weigh what they would in
/// a real vault (in a vault of one note, every word of it is in every note).
fn filler_notes(dir: &Path, n: usize) {
    const WORDS: &[&str] = &[
        "heron", "river", "basalt", "violin", "lantern", "orchard", "glacier", "meadow", "compass", "harbor", "quartz", "falcon", "canyon",
        "pebble", "willow", "ember", "tundra", "coral", "saffron", "marble", "otter", "fern", "dune",
    ];
    std::fs::create_dir_all(dir).unwrap();
    let mut x: usize = 7;
    let mut word = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        WORDS[(x >> 33) % WORDS.len()]
    };
    for i in 0..n {
        let mut body = format!("# {} {}\n\n", word(), word());
        for _ in 0..5 {
            let s: Vec<&str> = (0..8).map(|_| word()).collect();
            body.push_str(&format!("The {}.\n\n", s.join(" ")));
        }
        std::fs::write(dir.join(format!("f{i}.md")), body).unwrap();
    }
}

/// "Not an answer" fixtures (`fixtures/answers/*.jsonl`, by class): a heading, a link label, a
/// task title, a sentence that restates the question or only names its topic is never given as
/// the answer, even when it shares the question's words; a real answer beside such decoys is.
/// Each case is one note, indexed alone and asked through the extractive synthesizer.
#[test]
fn labels_headings_and_restatements_are_not_answers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/answers");
    let mut failures = Vec::new();
    let mut count = 0;
    for file in ["not-an-answer.jsonl", "not-an-answer-blind.jsonl"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            count += 1;
            let case: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{file}:{}: {e}", n + 1));
            let question = case["question"].as_str().unwrap();
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("vault");
            filler_notes(&root.join("filler"), 40);
            std::fs::write(root.join("note.md"), case["note"].as_str().unwrap()).unwrap();
            let mut store = Store::open(&tmp.path().join("lode.db"), StoreOptions::default()).unwrap();
            index_vault(&mut store, &root, &IndexOptions::default(), |_| {}).unwrap();
            let v = Vault { _tmp: tmp, root, store };
            let a = extractive(&v, question, None);
            let quotes: Vec<String> = a.claims.iter().flat_map(|c| c.citations.iter().map(|c| c.quoted_span.clone())).collect();
            let shown: Vec<String> = a.claims.iter().map(|c| format!("{} ({})", c.text, c.label)).collect();
            let at = format!("{file}:{} [{}] {question}", n + 1, case["class"].as_str().unwrap_or("?"));
            for decoy in case["must_not_quote"].as_array().into_iter().flatten().filter_map(|d| d.as_str()) {
                if quotes.iter().any(|q| q.to_lowercase().contains(&decoy.to_lowercase())) {
                    failures.push(format!("{at}: quoted the decoy {decoy:?}: {shown:?}"));
                }
            }
            match case["expect"].as_str() {
                Some("abstain") if !a.claims.is_empty() => failures.push(format!("{at}: answered {shown:?}")),
                Some("answer") => {
                    let want = case["answer_contains"].as_str().unwrap();
                    if !quotes.iter().any(|q| q.contains(want)) {
                        failures.push(format!("{at}: no quote holds {want:?}: {shown:?}"));
                    }
                }
                _ => {}
            }
        }
    }
    // Answers the extractive synthesizer misses (recall, not trust: it abstains rather than
    // answering wrongly). Each needs a word the sentence does not hold ("230 °C" for
    // "temperature", "LIS" for "Lisbon", "factory settings" for a reset step).
    const KNOWN_MISSES: &[&str] = &["not-an-answer-blind.jsonl:47 ", "not-an-answer-blind.jsonl:53 ", "not-an-answer-blind.jsonl:70 "];
    let (missed, failed): (Vec<&String>, Vec<&String>) =
        failures.iter().partition(|f| KNOWN_MISSES.iter().any(|k| f.starts_with(k)) && f.contains("no quote holds"));
    assert!(count >= 100, "{count} cases");
    assert!(
        failed.is_empty(),
        "{} of {count} cases fail:\n{}",
        failed.len(),
        failed.iter().map(|f| f.as_str()).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(missed.len(), KNOWN_MISSES.len(), "a known miss now answers: take it off the list: {missed:?}");
}
