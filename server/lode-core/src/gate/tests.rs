//! Gate tests: a table of claim/span cases with the verdict a careful reader would give, the
//! negation-cue rules, span location, fail-closed entailment, and the pinned fail-open exposure.

use std::cell::Cell;
use std::rc::Rc;

use super::*;

const NOTE: &str = "# Certs\n\nStaging certificates are rotated every 60 days.\nThe   last rotation\nwas on 2026-02-19.\n\nThe failover did not complete automatically.\nThe cache isn't invalidated on deploy.\nWe set `maxmemory-policy allkeys-lru` and use the DNS-01 challenge.\nDon won the award.\n";
const OTHER: &str = "PgBouncer runs in transaction mode with a pool size of 40.\n";

fn eligible() -> Eligible<'static> {
    HashMap::from([
        ("v1".to_owned(), NOTE),
        ("v2".to_owned(), OTHER),
        ("v3".to_owned(), "Certificates are valid for 90 days, but rotated every 60 days.\n"),
    ])
}

fn claim(text: &str, spans: &[(&str, &str)]) -> Claim {
    Claim {
        text: text.to_owned(),
        support: spans.iter().map(|(v, q)| Support { version_id: v.to_string(), quoted_span: q.to_string() }).collect(),
    }
}

/// "coupled", "entailed", "evidence" (evidence only) or "dropped@step".
fn verdict(c: Claim, scorer: &mut ScorerSlot<'_>) -> String {
    match check_one(c, &eligible(), scorer, &GateConfig::default()) {
        Outcome::Verified(v) => match v.verification {
            Verification::Coupled { .. } => "coupled".into(),
            Verification::Entailed { .. } => "entailed".into(),
        },
        Outcome::EvidenceOnly(_) => "evidence".into(),
        Outcome::Dropped(d) => format!("dropped@{:?}", d.step),
    }
}

struct Fixed(f32, Rc<Cell<usize>>);

impl EntailmentScorer for Fixed {
    fn entailment(&mut self, _premise: &str, _hypothesis: &str) -> Result<f32, String> {
        self.1.set(self.1.get() + 1);
        Ok(self.0)
    }
}

#[test]
fn verdict_table_without_a_model() {
    let cases: &[(&str, &[(&str, &str)], &str)] = &[
        // valid extractive answers pass
        ("Staging certificates are rotated every 60 days.", &[("v1", "Staging certificates are rotated every 60 days.")], "coupled"),
        ("Certificates are rotated every 60 days", &[("v1", "Staging certificates are rotated every 60 days.")], "coupled"),
        ("The last rotation was on 2026-02-19.", &[("v1", "The last rotation was on 2026-02-19.")], "coupled"),
        ("The failover did not complete automatically", &[("v1", "The failover did not complete automatically.")], "coupled"),
        // fabricated quote
        ("Certificates are rotated every 30 days", &[("v1", "Staging certificates are rotated every 30 days.")], "dropped@SpanCheck"),
        // a version the synthesizer was never given
        (
            "Staging certificates are rotated every 60 days.",
            &[("v9", "Staging certificates are rotated every 60 days.")],
            "dropped@SpanCheck",
        ),
        // real quote, contradicting claim: changed number, changed date, dropped negation
        ("Staging certificates are rotated every 90 days.", &[("v1", "Staging certificates are rotated every 60 days.")], "evidence"),
        ("The last rotation was on 2026-03-19.", &[("v1", "The last rotation\nwas on 2026-02-19.")], "evidence"),
        ("The failover did complete automatically", &[("v1", "The failover did not complete automatically.")], "evidence"),
        ("The cache is invalidated on deploy", &[("v1", "The cache isn't invalidated on deploy.")], "evidence"),
        // a number that the span has, but bound to something else
        ("Certificates are rotated every 90 days", &[("v3", "Certificates are valid for 90 days, but rotated every 60 days.")], "evidence"),
        ("Certificates are valid for 90 days", &[("v3", "Certificates are valid for 90 days, but rotated every 60 days.")], "coupled"),
        // "pool size of 40" says "of": a paraphrase, not the source's words in order
        ("The pool size is 40", &[("v2", "PgBouncer runs in transaction mode with a pool size of 40.")], "evidence"),
        ("a pool size of 40", &[("v2", "PgBouncer runs in transaction mode with a pool size of 40.")], "coupled"),
        // a reordered claim is not coupled; it needs the entailment step
        ("On 2026-02-19 the last rotation was done", &[("v1", "The   last rotation\nwas on 2026-02-19.")], "evidence"),
        // paraphrase that drifts a number
        (
            "The pool holds 50 connections in transaction mode",
            &[("v2", "PgBouncer runs in transaction mode with a pool size of 40.")],
            "evidence",
        ),
        // synthesis across two notes: no single span carries it
        (
            "PgBouncer runs in transaction mode and the failover did not complete",
            &[("v2", "PgBouncer runs in transaction mode"), ("v1", "The failover did not complete automatically.")],
            "evidence",
        ),
        // a claim with nothing to check
        ("Is the", &[("v1", "Don won the award.")], "dropped@Content"),
        ("Nothing cited", &[], "dropped@SpanCheck"),
        // real words that look like contraction stems are not negations
        ("Don won the award", &[("v1", "Don won the award.")], "coupled"),
    ];
    for (text, spans, want) in cases {
        let got = verdict(claim(text, spans), &mut ScorerSlot::None);
        assert_eq!(&got, want, "claim {text:?}");
    }
}

#[test]
fn hyphenated_identifiers_are_whole_tokens() {
    // Once an accepted exposure: "DNS" coupled with "DNS-01". Compounds are one token now.
    let mut none = ScorerSlot::None;
    let span = "We set `maxmemory-policy allkeys-lru` and use the DNS-01 challenge.";
    assert_eq!(verdict(claim("the policy is allkeys-lru", &[("v1", span)]), &mut none), "evidence");
    assert_eq!(verdict(claim("we use the DNS challenge", &[("v1", span)]), &mut none), "evidence");
    assert_eq!(verdict(claim("use the DNS-01 challenge", &[("v1", span)]), &mut none), "coupled");
}

#[test]
fn negation_cue_rules() {
    let body = "The cache isn't invalidated on deploy. We have no plan.\nDon won; the job doesʼnt retry.\n";
    assert!(couples_in("the cache isn't invalidated", body, "The cache isn't invalidated on deploy."));
    assert!(couples_in("the cache isn’t invalidated", body, "The cache isn't invalidated on deploy."), "apostrophe look-alikes are one");
    assert!(!couples_in("the cache invalidated on deploy", body, "The cache isn't invalidated on deploy."));
    assert!(!couples_in("cache invalidated on deploy", body, "invalidated on deploy"));
    assert!(!couples_in("we have a plan", body, "We have no plan."));
    assert!(!couples_in("the job retries", body, "the job doesʼnt retry"));
    assert!(couples_in("the job doesn't retry", body, "the job doesʼnt retry"));
}

#[test]
fn spans_are_located_exactly_or_after_whitespace_normalisation() {
    let (r, norm) = locate(NOTE, "Staging certificates are rotated every 60 days.").unwrap();
    assert!(!norm);
    assert_eq!(&NOTE[r], "Staging certificates are rotated every 60 days.");
    let (r, norm) = locate(NOTE, "The last rotation was on 2026-02-19.").unwrap();
    assert_eq!(locate_all("ab ab", "ab").len(), 2);
    assert!(norm);
    assert_eq!(&NOTE[r], "The   last rotation\nwas on 2026-02-19.");
    assert_eq!(locate(NOTE, "   "), None);
    assert_eq!(locate(NOTE, "rotated every 61 days"), None);
    let cjk = "日本語の  テキスト。";
    let (r, _) = locate(cjk, "の テキスト").unwrap();
    assert_eq!(&cjk[r], "の  テキスト");
}

#[test]
fn entailment_is_fail_closed_lazy_and_thresholded() {
    let loads = Rc::new(Cell::new(0));
    let calls = Rc::new(Cell::new(0));
    let synthesis = claim(
        "PgBouncer runs in transaction mode and the failover did not complete",
        &[("v2", "PgBouncer runs in transaction mode"), ("v1", "The failover did not complete automatically.")],
    );
    let coupled = claim("Certificates are rotated every 60 days", &[("v1", "Staging certificates are rotated every 60 days.")]);

    let (l, c) = (loads.clone(), calls.clone());
    let mut slot = ScorerSlot::lazy(move || {
        l.set(l.get() + 1);
        Ok(Box::new(Fixed(0.97, c)) as Box<dyn EntailmentScorer>)
    });
    assert_eq!(verdict(coupled.clone(), &mut slot), "coupled");
    assert_eq!(loads.get(), 0, "no model is loaded while claims couple");
    assert_eq!(verdict(synthesis.clone(), &mut slot), "entailed");
    assert_eq!(verdict(synthesis.clone(), &mut slot), "entailed");
    assert_eq!((loads.get(), calls.get()), (1, 2), "loaded once, scored per claim");

    let mut low = ScorerSlot::Loaded(Box::new(Fixed(0.5, Rc::new(Cell::new(0)))));
    assert_eq!(verdict(synthesis.clone(), &mut low), "evidence");
    let mut at = ScorerSlot::Loaded(Box::new(Fixed(0.9, Rc::new(Cell::new(0)))));
    assert_eq!(verdict(synthesis.clone(), &mut at), "evidence", "the threshold must be exceeded");

    let mut broken = ScorerSlot::lazy(|| Err("model.onnx: no such file".to_owned()));
    match check_one(synthesis, &eligible(), &mut broken, &GateConfig::default()) {
        Outcome::EvidenceOnly(e) => assert!(e.reason.contains("no such file"), "{}", e.reason),
        other => panic!("{other:?}"),
    }
}

#[test]
fn fabricated_span_never_reaches_the_model() {
    let calls = Rc::new(Cell::new(0));
    let mut slot = ScorerSlot::Loaded(Box::new(Fixed(1.0, calls.clone())));
    let c = claim("Certificates last 10 years", &[("v1", "Certificates last 10 years.")]);
    assert_eq!(verdict(c, &mut slot), "dropped@SpanCheck");
    assert_eq!(calls.get(), 0);
}

#[test]
fn markup_is_not_evidence() {
    let body = "Certs rotate every 60 days.\n<!-- Certs rotate every 30 days. -->\nOld: ~~certs rotate every 90 days~~.\n\n```\ncerts rotate every 7 days\n```\n\n> **lode** — how often?\n>\n> - Certs rotate every 45 days [x](a.md) *(quoted & coupled)*\n";
    let el: Eligible = HashMap::from([("v".to_owned(), body)]);
    let run = |text: &str, quote: &str| match check_one(claim(text, &[("v", quote)]), &el, &mut ScorerSlot::None, &GateConfig::default()) {
        Outcome::Verified(_) => "coupled".to_owned(),
        Outcome::EvidenceOnly(_) => "evidence".to_owned(),
        Outcome::Dropped(d) => format!("dropped@{:?}: {}", d.step, d.reason),
    };
    assert_eq!(run("Certs rotate every 60 days", "Certs rotate every 60 days."), "coupled");
    assert!(run("Certs rotate every 30 days", "Certs rotate every 30 days.").contains("HTML comment"));
    assert!(run("certs rotate every 90 days", "certs rotate every 90 days").contains("struck through"));
    assert!(run("certs rotate every 7 days", "certs rotate every 7 days").contains("code block"), "code stated as prose");
    assert!(
        !run("The script runs `certs rotate every 7 days`", "certs rotate every 7 days").starts_with("dropped"),
        "a claim quoting the code may cite it"
    );
    assert!(run("Certs rotate every 45 days", "Certs rotate every 45 days").contains("answer lode inserted"));
}

#[test]
fn quotes_must_be_whole_words_and_short() {
    let body = "Unencrypted backups are kept for 140 days at -5 C.\n";
    let el: Eligible = HashMap::from([("v".to_owned(), body)]);
    let step = |text: &str, quote: &str| match check_one(claim(text, &[("v", quote)]), &el, &mut ScorerSlot::None, &GateConfig::default()) {
        Outcome::Dropped(d) => format!("{:?}", d.step),
        Outcome::Verified(_) => "coupled".into(),
        Outcome::EvidenceOnly(_) => "evidence".into(),
    };
    assert_eq!(step("encrypted backups are kept", "encrypted backups are kept"), "SpanCheck");
    assert_eq!(step("backups are kept for 40 days", "40 days"), "SpanCheck");
    assert_eq!(step("it is 5 C", "5 C"), "SpanCheck");
    assert_eq!(step("Unencrypted backups are kept for 140 days", "Unencrypted backups are kept for 140 days"), "coupled");
    let long = "word ".repeat(400);
    let el: Eligible = HashMap::from([("v".to_owned(), long.as_str())]);
    match check_one(claim("word word", &[("v", long.trim())]), &el, &mut ScorerSlot::None, &GateConfig::default()) {
        Outcome::Dropped(d) => assert!(d.reason.contains("at most"), "{}", d.reason),
        other => panic!("{other:?}"),
    }
}

#[test]
fn labels_and_ids_with_multibyte_chars_do_not_panic() {
    // Version ids come from model output: a label like "S1 — S2" must not be sliced mid-char.
    let c = claim("Staging certificates rotate", &[("S1 — S2 ééééé", "x")]);
    assert_eq!(verdict(c, &mut ScorerSlot::None), "dropped@SpanCheck");
}

/// One row of `fixtures/gate/adversarial.jsonl`.
struct Row {
    class: String,
    expect: String,
    claim: String,
    spans: Vec<String>,
    source: String,
    /// A faithful claim in other words: only an entailment model can verify it.
    paraphrase: bool,
}

/// Rows of one adversarial file: `adversarial.jsonl` (written first, tuned on) or
/// `adversarial-heldout.jsonl` (written blind by another author; see docs/gate.md for its
/// first, untuned result).
fn adversarial_rows(file: &str) -> Vec<Row> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gate").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            let s = |k: &str| v[k].as_str().unwrap_or_else(|| panic!("{k} in {l}")).to_owned();
            Row {
                class: s("class"),
                expect: s("expect"),
                claim: s("claim"),
                spans: v["spans"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_owned()).collect(),
                source: s("source"),
                paraphrase: v["paraphrase"].as_bool().unwrap_or(false),
            }
        })
        .collect()
}

/// Faithful claims of the held-out files that the deterministic steps knowingly lose, with why:
/// the gate fails closed on these shapes (docs/gate.md, "Remaining exposure").
const KNOWN_LOSSES: &[(&str, &str)] = &[
    // An irony mark at the end of a line marks its last sentence, literal clause included.
    ("It arrived broken.", "irony"),
    // A quotation the author then endorses ("Agreed, …") across a retraction-like attribution.
    ("Rinse rice before cooking to remove excess starch.", "clipped source, endorsed"),
    // "EDIT:" as the next sentence takes a sentence back, whatever the edit is about.
    ("Bake at 230 °C for 15 min, then 200 °C for 20 min.", "an edit about something else"),
    // A title that scopes the note ("Pricing — EU region only") scopes every line of it.
    ("US pricing is in a separate note.", "a line outside the title's scope"),
    // A claim restating a scope that comes after the line, in the note's order.
    (
        "Falls per person-year dropped from 1.8 to 1.1; all figures above are from the 2022 pilot at Riverside only.",
        "a scope after the line",
    ),
];

#[test]
fn adversarial_fixture_distortions_rejected_and_faithful_claims_kept() {
    let files = [
        "adversarial.jsonl",
        "adversarial-heldout.jsonl",
        "structure.jsonl",
        "structure-heldout.jsonl",
        "structure-heldout-2.jsonl",
        "note-itself.jsonl",
        "note-later.jsonl",
        "note-voices.jsonl",
        "note-elsewhere.jsonl",
        "note-unicode.jsonl",
        "note-heldout.jsonl",
        "note-heldout-2.jsonl",
        "note-review.jsonl",
    ];
    let rows: Vec<Row> = files.into_iter().flat_map(adversarial_rows).collect();
    assert!(rows.len() >= 2130, "the adversarial files have {} rows", rows.len());
    let mut failures = Vec::new();
    for r in &rows {
        let el: Eligible = HashMap::from([("source".to_owned(), r.source.as_str())]);
        let c = Claim {
            text: r.claim.clone(),
            support: r.spans.iter().map(|q| Support { version_id: "source".into(), quoted_span: q.clone() }).collect(),
        };
        let outcome = check_one(c, &el, &mut ScorerSlot::None, &GateConfig::default());
        let accepted = matches!(outcome, Outcome::Verified(_));
        // A known loss still shows its evidence; when it verifies, the list is out of date.
        if KNOWN_LOSSES.iter().any(|(c, _)| *c == r.claim) {
            if !matches!(outcome, Outcome::EvidenceOnly(_)) {
                failures.push(format!("[{}] known loss no longer evidence only (update KNOWN_LOSSES): {:?}", r.class, r.claim));
            }
            continue;
        }
        // A faithful paraphrase is the entailment step's: without a model its evidence is shown.
        if r.paraphrase {
            if !matches!(outcome, Outcome::EvidenceOnly(_)) {
                failures.push(format!("[{}] paraphrase not shown as evidence: {:?}", r.class, r.claim));
            }
            continue;
        }
        if accepted != (r.expect == "accept") {
            let why = match &outcome {
                Outcome::Dropped(d) => d.reason.clone(),
                Outcome::EvidenceOnly(e) => e.reason.clone(),
                Outcome::Verified(_) => "coupled".into(),
            };
            failures.push(format!("[{}] expect {}: {:?} ← {:?}: {why}", r.class, r.expect, r.claim, r.spans));
        }
    }
    assert!(failures.is_empty(), "{} of {} rows wrong:\n{}", failures.len(), rows.len(), failures.join("\n"));
}

#[test]
fn a_homoglyph_claim_is_not_verified_even_by_a_model() {
    let note = "Phishing report\n\nThe real login page is paypal.com.\n";
    let el: Eligible = HashMap::from([("v".to_owned(), note)]);
    let c = |text: &str| Claim {
        text: text.into(),
        support: vec![Support { version_id: "v".into(), quoted_span: "The real login page is paypal.com.".into() }],
    };
    let calls = Rc::new(Cell::new(0));
    // A model that entails everything is never asked about a claim with a Cyrillic "а".
    let mut scorer = ScorerSlot::Loaded(Box::new(Fixed(0.99, calls.clone())));
    let out = check_one(c("The real login page is p\u{0430}ypal.com"), &el, &mut scorer, &GateConfig::default());
    let Outcome::EvidenceOnly(e) = out else { panic!("{out:?}") };
    assert!(e.why.contains("two scripts"), "{}", e.why);
    assert_eq!(calls.get(), 0);
    // The same claim in Latin letters couples; Greek used as Greek does not trip the check.
    assert!(matches!(check_one(c("The real login page is paypal.com"), &el, &mut scorer, &GateConfig::default()), Outcome::Verified(_)));
    assert_eq!(mixed_script_word("α-synuclein at 5 μs and 10 μM"), None);
    assert_eq!(mixed_script_word("g\u{03BF}\u{03BF}gle.com").as_deref(), Some("g\u{03BF}\u{03BF}gle"));
}

/// The last two blind files (written against the finished step): every distortion is refused;
/// the faithful claims each loses (shown by `lode eval gate --adversarial FILE`) may only become
/// fewer. The fourth's faithful twins mostly reword their line ("Rent is £1,450" for "Rent:
/// £1,450"), which the deterministic steps leave to entailment.
#[test]
fn later_blind_files_no_distortion_and_no_more_lost() {
    for (file, most_lost) in [("note-heldout-3.jsonl", 18), ("note-heldout-4.jsonl", 19)] {
        let rows = adversarial_rows(file);
        assert!(rows.len() >= 90, "{file}: {} rows", rows.len());
        let (mut accepted, mut lost, mut faithful) = (Vec::new(), 0, 0);
        for r in &rows {
            let el: Eligible = HashMap::from([("source".to_owned(), r.source.as_str())]);
            let c = Claim {
                text: r.claim.clone(),
                support: r.spans.iter().map(|q| Support { version_id: "source".into(), quoted_span: q.clone() }).collect(),
            };
            let verified = matches!(check_one(c, &el, &mut ScorerSlot::None, &GateConfig::default()), Outcome::Verified(_));
            match (r.expect.as_str(), r.paraphrase) {
                ("reject", _) if verified => accepted.push(r.claim.clone()),
                ("accept", false) => {
                    faithful += 1;
                    lost += usize::from(!verified);
                }
                _ => {}
            }
        }
        assert!(accepted.is_empty(), "{file}: distortions verified: {accepted:?}");
        assert!(lost <= most_lost, "{file}: {lost} of {faithful} faithful claims lost (was {most_lost})");
    }
}
