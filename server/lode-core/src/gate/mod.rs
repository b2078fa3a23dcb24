//! The faithfulness gate: decides, for every claim a synthesizer returns, whether its cited
//! evidence really supports it — and drops it when it cannot tell. Steps, in order:
//!
//! 1. **Span check.** Every quoted span must occur in the stored bytes of the version it cites,
//!    exactly or after whitespace normalisation, in a version the synthesizer was allowed to see;
//!    start and end on word boundaries; stay under a length cap; and not lie in markup that asserts
//!    nothing (HTML comments, struck-through text, code blocks unless the claim quotes the code,
//!    answers lode inserted earlier). Anything else is not evidence: the claim is dropped.
//! 2. **Extractive coupling** ([`couple`]): one quote carries the claim as the source says it —
//!    same words, same order, one sentence, and nothing in scope (negation, modality, condition,
//!    attribution, contrast, units, retraction) that the claim leaves out → verified.
//! 3. **Entailment.** Otherwise an NLI model judges whether the cited sentences entail the claim;
//!    above the threshold → verified. No model, or below it → the claim is shown as *evidence
//!    only* (its verbatim quotes, in their sentences, never the model's wording).

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::text::{floor_char_boundary, normalize_whitespace};

pub mod couple;
pub mod lexicon;
pub mod markup;

/// One piece of evidence: verbatim text from one version of one note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Support {
    pub version_id: String,
    pub quoted_span: String,
}

/// One factual statement and the evidence it rests on. This is all a synthesizer returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub text: String,
    pub support: Vec<Support>,
}

/// A span located in the cited version: its exact byte range there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocatedSpan {
    pub version_id: String,
    pub range: Range<usize>,
    pub quoted_span: String,
    /// The quote matched only after whitespace normalisation.
    pub normalized: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Content,
    SpanCheck,
    Coupling,
    Entailment,
}

/// How a surviving claim was verified: the strength the editor shows next to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verification {
    /// The claim's payload lies inside one quoted span.
    Coupled { span: usize },
    /// An NLI model judged the spans to entail the claim with this probability.
    Entailed { score: f32 },
}

impl Verification {
    pub fn label(&self) -> String {
        match self {
            Verification::Coupled { .. } => "quoted & coupled".to_owned(),
            Verification::Entailed { score } => format!("entailed ({score:.2})"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verified {
    pub claim: Claim,
    pub spans: Vec<LocatedSpan>,
    pub verification: Verification,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dropped {
    pub claim: Claim,
    pub step: Step,
    pub reason: String,
}

/// A claim whose quotes are real evidence but whose wording could not be verified: shown as its
/// verbatim evidence (each span widened to its whole sentence), never as the model's sentence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceOnly {
    pub claim: Claim,
    pub spans: Vec<LocatedSpan>,
    /// Per span: the sentence(s) around it, as a byte range of the cited version.
    pub context: Vec<Range<usize>>,
    /// Why the wording was not verified.
    pub reason: String,
}

pub const EVIDENCE_ONLY_LABEL: &str = "evidence only — the model's wording could not be verified";

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Outcome {
    Verified(Verified),
    EvidenceOnly(EvidenceOnly),
    Dropped(Dropped),
}

/// Scores how strongly `premise` entails `hypothesis`, as a probability in [0, 1].
pub trait EntailmentScorer {
    fn entailment(&mut self, premise: &str, hypothesis: &str) -> Result<f32, String>;
}

/// Where the gate gets its scorer: loaded on first use only, so a gate whose claims all couple
/// never loads a model.
pub enum ScorerSlot<'a> {
    /// No model configured: step 3 drops every claim that reaches it.
    None,
    Lazy(Box<dyn FnOnce() -> Result<Box<dyn EntailmentScorer + 'a>, String> + 'a>),
    Loaded(Box<dyn EntailmentScorer + 'a>),
    Failed(String),
}

impl<'a> ScorerSlot<'a> {
    pub fn lazy(load: impl FnOnce() -> Result<Box<dyn EntailmentScorer + 'a>, String> + 'a) -> Self {
        ScorerSlot::Lazy(Box::new(load))
    }

    fn get(&mut self) -> Result<&mut (dyn EntailmentScorer + 'a), String> {
        if let ScorerSlot::Lazy(_) = self {
            let ScorerSlot::Lazy(load) = std::mem::replace(self, ScorerSlot::None) else { unreachable!() };
            *self = match load() {
                Ok(s) => ScorerSlot::Loaded(s),
                Err(e) => ScorerSlot::Failed(e),
            };
        }
        match self {
            ScorerSlot::Loaded(s) => Ok(s.as_mut()),
            ScorerSlot::Failed(e) => Err(format!("entailment model failed to load: {e}")),
            _ => Err("no entailment model is configured".to_owned()),
        }
    }

    pub fn was_loaded(&self) -> bool {
        matches!(self, ScorerSlot::Loaded(_) | ScorerSlot::Failed(_))
    }
}

#[derive(Debug, Clone)]
pub struct GateConfig {
    /// Entailment probability a claim must exceed to survive step 3.
    pub entailment_threshold: f32,
}

impl Default for GateConfig {
    fn default() -> Self {
        // Conservative and untuned: see docs/gate.md.
        GateConfig { entailment_threshold: 0.9 }
    }
}

pub use lexicon::GLUE;

/// Maximal runs of letters and digits, case-folded (retrieval and the extractive synthesizer use
/// these; coupling has its own tokenizer, [`couple::lex`]).
pub fn tokens(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase).collect()
}

/// The claim's load-bearing tokens.
pub fn payload(claim: &str) -> BTreeSet<String> {
    tokens(claim).into_iter().filter(|t| !GLUE.contains(&t.as_str())).collect()
}

/// Whether `claim` couples with `quote` in `body` (located exactly or after whitespace
/// normalisation): step 2 alone, for callers that check one pair.
pub fn couples_in(claim: &str, body: &str, quote: &str) -> bool {
    locate(body, quote).is_some_and(|(r, _)| couple::couple(claim, body, &r).is_ok())
}

/// Finds `quote` in `body`: exactly, else after collapsing whitespace on both sides. Returns the
/// byte range in `body` and whether normalisation was needed.
pub fn locate(body: &str, quote: &str) -> Option<(Range<usize>, bool)> {
    locate_all(body, quote).into_iter().next()
}

/// Every place `quote` occurs in `body` (at most 16, in order): exact matches, else matches after
/// collapsing whitespace on both sides, with whether normalisation was needed.
pub fn locate_all(body: &str, quote: &str) -> Vec<(Range<usize>, bool)> {
    const MAX: usize = 16;
    if quote.trim().is_empty() {
        return Vec::new();
    }
    let exact: Vec<(Range<usize>, bool)> =
        body.match_indices(quote).take(MAX).map(|(i, _)| (i..i + quote.len(), false)).collect();
    if !exact.is_empty() {
        return exact;
    }
    let want = normalize_whitespace(quote);
    // Normalised body with a map from each of its bytes back to the body.
    let mut norm = String::with_capacity(body.len());
    let mut map: Vec<usize> = Vec::with_capacity(body.len());
    let mut pending_space: Option<usize> = None;
    for (i, c) in body.char_indices() {
        if c.is_whitespace() {
            if !norm.is_empty() && pending_space.is_none() {
                pending_space = Some(i);
            }
            continue;
        }
        if let Some(sp) = pending_space.take() {
            norm.push(' ');
            map.push(sp);
        }
        let before = norm.len();
        norm.push(c);
        for k in 0..norm.len() - before {
            map.push(i + k);
        }
    }
    // `map` maps every byte (not only char starts), so the last byte maps to the last byte.
    norm.match_indices(want.as_str())
        .take(MAX)
        .map(|(at, _)| (map[at]..map[at + want.len() - 1] + 1, true))
        .collect()
}

/// The versions a synthesizer was allowed to see, by id: only these can be cited.
pub type Eligible<'a> = HashMap<String, &'a str>;

/// Runs the gate over every claim, in order.
pub fn check(claims: Vec<Claim>, eligible: &Eligible<'_>, scorer: &mut ScorerSlot<'_>, cfg: &GateConfig) -> Vec<Outcome> {
    claims
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            if i >= MAX_CLAIMS {
                drop(c, Step::Content, format!("the answer has more than {MAX_CLAIMS} claims; the rest are not read"))
            } else {
                check_one(c, eligible, scorer, cfg)
            }
        })
        .collect()
}

fn drop(claim: Claim, step: Step, reason: impl Into<String>) -> Outcome {
    Outcome::Dropped(Dropped { claim, step, reason: reason.into() })
}

/// Most claims one answer may carry, and most quotes per claim: more is not an answer.
pub const MAX_CLAIMS: usize = 24;
pub const MAX_QUOTES: usize = 6;
/// Longest claim text, in bytes.
pub const MAX_CLAIM_BYTES: usize = 2000;

pub fn check_one(claim: Claim, eligible: &Eligible<'_>, scorer: &mut ScorerSlot<'_>, cfg: &GateConfig) -> Outcome {
    if claim.text.len() > MAX_CLAIM_BYTES {
        let reason = format!("the claim is {} bytes long; a claim is one statement (at most {MAX_CLAIM_BYTES} bytes)", claim.text.len());
        return drop(claim, Step::Content, reason);
    }
    if payload(&claim.text).is_empty() {
        return drop(claim, Step::Content, "the claim states nothing checkable");
    }
    if claim.support.is_empty() {
        return drop(claim, Step::SpanCheck, "the claim cites no evidence");
    }
    if claim.support.len() > MAX_QUOTES {
        let reason = format!("the claim cites {} quotes; at most {MAX_QUOTES} are read", claim.support.len());
        return drop(claim, Step::SpanCheck, reason);
    }
    // Step 1: every span exists verbatim in an eligible version, and is evidence there. A quote
    // that occurs more than once is evidence wherever one of its occurrences is.
    let mut spans = Vec::with_capacity(claim.support.len());
    let mut places: Vec<Vec<Range<usize>>> = Vec::with_capacity(claim.support.len());
    for s in &claim.support {
        let Some(body) = eligible.get(&s.version_id) else {
            let reason = format!("cites version {} which was not among the sources it was given", short(&s.version_id));
            return drop(claim, Step::SpanCheck, reason);
        };
        let found = locate_all(body, &s.quoted_span);
        if found.is_empty() {
            let reason = format!("quote {:?} does not occur in version {}", clip(&s.quoted_span), short(&s.version_id));
            return drop(claim, Step::SpanCheck, reason);
        }
        let regions = markup::not_evidence(body);
        let mut ok: Vec<(Range<usize>, bool)> = Vec::new();
        let mut first_problem = None;
        for (range, normalized) in found {
            let problem = couple::malformed_quote(body, &range).or_else(|| {
                let (_, kind) = markup::overlapping(&regions, &range)?;
                let quotes_code = kind == markup::NotEvidence::CodeBlock && claim_quotes_code(&claim.text, &s.quoted_span);
                (!quotes_code).then(|| format!("quote {:?} is {}, which the note does not assert", clip(&s.quoted_span), kind.describe()))
            });
            match problem {
                None => ok.push((range, normalized)),
                Some(p) => {
                    first_problem.get_or_insert(p);
                }
            }
        }
        let Some((range, normalized)) = ok.first().cloned() else {
            return drop(claim, Step::SpanCheck, first_problem.unwrap_or_default());
        };
        spans.push(LocatedSpan { version_id: s.version_id.clone(), range, quoted_span: s.quoted_span.clone(), normalized });
        places.push(ok.into_iter().map(|(r, _)| r).collect());
    }
    // Step 2: one quote carries the claim as its sentence says it.
    let mut why_not = String::new();
    for (i, span) in spans.iter_mut().enumerate() {
        for r in &places[i] {
            match couple::couple(&claim.text, eligible[&span.version_id], r) {
                Ok(()) => {
                    span.range = r.clone();
                    let verification = Verification::Coupled { span: i };
                    let label = verification.label();
                    return Outcome::Verified(Verified { claim, spans, verification, label });
                }
                Err(e) if why_not.is_empty() => why_not = e,
                Err(_) => {}
            }
        }
    }
    // Step 3: entailment of the claim by the cited sentences (not the bare quotes: a quote cut
    // out of "Not all X" must be judged with its "Not").
    let context: Vec<Range<usize>> =
        spans.iter().map(|s| couple::evidence_context(eligible[&s.version_id], &s.range)).collect();
    let premise = spans
        .iter()
        .zip(&context)
        .map(|(s, r)| eligible[&s.version_id][r.clone()].trim())
        .collect::<Vec<_>>()
        .join(" ");
    let scored = scorer.get().and_then(|s| s.entailment(&premise, &claim.text));
    let reason = match scored {
        Ok(score) if score > cfg.entailment_threshold => {
            let verification = Verification::Entailed { score };
            let label = verification.label();
            return Outcome::Verified(Verified { claim, spans, verification, label });
        }
        Ok(score) => format!(
            "not carried by one quote ({why_not}), and entailment {score:.2} is not above {:.2}",
            cfg.entailment_threshold
        ),
        Err(e) => format!("not carried by one quote ({why_not}), and {e}"),
    };
    Outcome::EvidenceOnly(EvidenceOnly { claim, spans, context, reason })
}

/// Whether the claim presents the quote as code: a backtick span of the claim holds (part of) it.
fn claim_quotes_code(claim: &str, quote: &str) -> bool {
    let quote = normalize_whitespace(quote);
    claim.split('`').skip(1).step_by(2).map(normalize_whitespace).any(|c| c.len() >= 2 && quote.contains(&c))
}

fn short(id: &str) -> &str {
    &id[..floor_char_boundary(id, 12)]
}

fn clip(s: &str) -> String {
    let n: String = s.chars().take(80).collect();
    if n.len() < s.len() {
        format!("{n}…")
    } else {
        n
    }
}

#[cfg(test)]
mod tests;
