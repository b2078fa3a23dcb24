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

/// "coupled", "entailed" or "dropped@step".
fn verdict(c: Claim, scorer: &mut ScorerSlot<'_>) -> String {
    match check_one(c, &eligible(), scorer, &GateConfig::default()) {
        Outcome::Verified(v) => match v.verification {
            Verification::Coupled { .. } => "coupled".into(),
            Verification::Entailed { .. } => "entailed".into(),
        },
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
        ("Staging certificates are rotated every 60 days.", &[("v9", "Staging certificates are rotated every 60 days.")], "dropped@SpanCheck"),
        // real quote, contradicting claim: changed number, changed date, dropped negation
        ("Staging certificates are rotated every 90 days.", &[("v1", "Staging certificates are rotated every 60 days.")], "dropped@Entailment"),
        ("The last rotation was on 2026-03-19.", &[("v1", "The last rotation\nwas on 2026-02-19.")], "dropped@Entailment"),
        ("The failover did complete automatically", &[("v1", "The failover did not complete automatically.")], "dropped@Entailment"),
        ("The cache is invalidated on deploy", &[("v1", "The cache isn't invalidated on deploy.")], "dropped@Entailment"),
        // a number that the span has, but bound to something else
        ("Certificates are rotated every 90 days", &[("v3", "Certificates are valid for 90 days, but rotated every 60 days.")], "dropped@Entailment"),
        ("Certificates are valid for 90 days", &[("v3", "Certificates are valid for 90 days, but rotated every 60 days.")], "coupled"),
        ("The pool size is 40", &[("v2", "PgBouncer runs in transaction mode with a pool size of 40.")], "coupled"),
        // a reordered claim is not coupled; it needs the entailment step
        ("On 2026-02-19 the last rotation was done", &[("v1", "The   last rotation\nwas on 2026-02-19.")], "dropped@Entailment"),
        // paraphrase that drifts a number
        ("The pool holds 50 connections in transaction mode", &[("v2", "PgBouncer runs in transaction mode with a pool size of 40.")], "dropped@Entailment"),
        // synthesis across two notes: no single span carries it
        ("PgBouncer runs in transaction mode and the failover did not complete", &[("v2", "PgBouncer runs in transaction mode"), ("v1", "The failover did not complete automatically.")], "dropped@Entailment"),
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
fn known_fail_open_exposure_of_fragment_containment() {
    // Tokens are maximal letter/digit runs, so "maxmemory-policy" yields a bare "policy" and
    // "DNS-01" a bare "dns": a claim naming only a fragment of a hyphenated identifier couples.
    // This is accepted (docs/gate.md). If tokenization changes, this test must change with it.
    let mut none = ScorerSlot::None;
    let span = "We set `maxmemory-policy allkeys-lru` and use the DNS-01 challenge.";
    assert_eq!(verdict(claim("the policy is allkeys-lru", &[("v1", span)]), &mut none), "coupled");
    assert_eq!(verdict(claim("we use the DNS challenge", &[("v1", span)]), &mut none), "coupled");
}

#[test]
fn negation_cue_rules() {
    let cues = |s: &str| negation_cues(s).into_iter().collect::<Vec<_>>();
    assert_eq!(cues("It isn't here and we don’t know"), ["don't", "isn't"]);
    assert_eq!(cues("Don won; nothing without a plan"), ["nothing", "without"]);
    assert_eq!(cues("WON'T stop, can't stop, cannot"), ["can't", "cannot", "won't"]);
    assert!(cues("the n't alone, donut, n'tx").is_empty());
    // A cue the claim states itself does not block coupling; one it lacks does.
    assert!(couples("the cache isn't invalidated", "The cache isn't invalidated on deploy."));
    assert!(!couples("the cache invalidated on deploy", "The cache isn't invalidated on deploy."));
    assert!(!couples("we have a plan", "we have no plan"));
}

#[test]
fn spans_are_located_exactly_or_after_whitespace_normalisation() {
    let (r, norm) = locate(NOTE, "Staging certificates are rotated every 60 days.").unwrap();
    assert!(!norm);
    assert_eq!(&NOTE[r], "Staging certificates are rotated every 60 days.");
    let (r, norm) = locate(NOTE, "The last rotation was on 2026-02-19.").unwrap();
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
    assert_eq!(verdict(synthesis.clone(), &mut low), "dropped@Entailment");
    let mut at = ScorerSlot::Loaded(Box::new(Fixed(0.9, Rc::new(Cell::new(0)))));
    assert_eq!(verdict(synthesis.clone(), &mut at), "dropped@Entailment", "the threshold must be exceeded");

    let mut broken = ScorerSlot::lazy(|| Err("model.onnx: no such file".to_owned()));
    match check_one(synthesis, &eligible(), &mut broken, &GateConfig::default()) {
        Outcome::Dropped(d) => assert!(d.reason.contains("no such file"), "{}", d.reason),
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
