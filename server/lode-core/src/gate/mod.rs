//! The faithfulness gate: decides, for every claim a synthesizer returns, whether its cited
//! evidence really supports it — and drops it when it cannot tell. Steps, in order:
//!
//! 1. **Span check.** Every quoted span must occur in the stored bytes of the version it cites,
//!    exactly or after whitespace normalisation, and that version must be one the synthesizer was
//!    allowed to see. Anything else is a fabricated quote: the claim is dropped.
//! 2. **Extractive coupling.** The claim's payload (case-folded word tokens minus a tiny set of
//!    glue words) is contained in the tokens of one cited span, and that span carries no negation
//!    cue the claim lacks → verified.
//! 3. **Entailment.** Otherwise an NLI scorer judges whether the joined spans entail the claim;
//!    above the threshold → verified, else dropped. No scorer → dropped (fail-closed).
//!
//! Known, accepted exposure (pinned by a test): tokens are maximal runs of letters and digits, so
//! a claim naming a fragment of a hyphenated identifier ("DNS" where the span says "DNS-01")
//! couples. Finer splitting only ever makes coupling more permissive; see `docs/gate.md`.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::text::normalize_whitespace;

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

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Outcome {
    Verified(Verified),
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

/// Grammatical glue left out of a claim's payload: articles and forms of "to be". Deliberately
/// tiny — leaving a word out only makes coupling stricter. Never numbers, entities, negations or
/// quantity words.
pub const GLUE: &[&str] = &["a", "am", "an", "are", "be", "been", "being", "is", "the", "was", "were"];

/// Standalone negation cues, matched as whole tokens.
pub const NEGATION_WORDS: &[&str] =
    &["cannot", "neither", "never", "no", "nobody", "none", "nor", "not", "nothing", "without"];

/// Maximal runs of letters and digits, case-folded.
pub fn tokens(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase).collect()
}

/// The claim's load-bearing tokens.
pub fn payload(claim: &str) -> BTreeSet<String> {
    tokens(claim).into_iter().filter(|t| !GLUE.contains(&t.as_str())).collect()
}

/// Negation cues in `s`: standalone words, and `n't` contractions (ASCII or typographic
/// apostrophe) matched on the raw text so "don" or "won" alone are not cues.
pub fn negation_cues(s: &str) -> BTreeSet<String> {
    let mut cues: BTreeSet<String> =
        tokens(s).into_iter().filter(|t| NEGATION_WORDS.contains(&t.as_str())).collect();
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    for (i, &(_, c)) in chars.iter().enumerate() {
        if !(c == 'n' || c == 'N') || i == 0 {
            continue;
        }
        let apostrophe = chars.get(i + 1).is_some_and(|&(_, a)| a == '\'' || a == '’');
        let t = chars.get(i + 2).is_some_and(|&(_, t)| t == 't' || t == 'T');
        let word_before = chars[i - 1].1.is_alphanumeric();
        let ends = chars.get(i + 3).is_none_or(|&(_, n)| !n.is_alphanumeric());
        if apostrophe && t && word_before && ends {
            let start = chars[..i].iter().rev().take_while(|(_, c)| c.is_alphanumeric()).count();
            let word: String = chars[i - start..i + 3].iter().map(|&(_, c)| c).collect();
            cues.insert(word.to_lowercase().replace('’', "'"));
        }
    }
    cues
}

/// Whether one span couples with the claim (step 2): payload containment, no negation cue the
/// claim lacks, and every number bound as in the claim (see [`numbers_bound`]).
pub fn couples(claim: &str, span: &str) -> bool {
    let need = payload(claim);
    if need.is_empty() {
        return false;
    }
    let span_tokens = tokens(span);
    let have: BTreeSet<&str> = span_tokens.iter().map(String::as_str).collect();
    if !need.iter().all(|t| have.contains(t.as_str())) {
        return false;
    }
    let claim_cues = negation_cues(claim);
    if !negation_cues(span).is_subset(&claim_cues) {
        return false;
    }
    numbers_bound(&tokens(claim), &span_tokens)
}

fn is_numeric(t: &str) -> bool {
    t.bytes().any(|b| b.is_ascii_digit())
}

/// Containment ignores order, so a span saying "valid for 90 days, rotated every 60 days" would
/// carry the claim "rotated every 90 days". This check binds each run of number tokens in the claim
/// to the word before it (or, at the start, the word after it), glue skipped: the span must have
/// the same run with that word among the 3 tokens on the same side. It only ever removes
/// couplings (a reordered claim falls through to entailment), never adds one.
pub fn numbers_bound(claim_tokens: &[String], span_tokens: &[String]) -> bool {
    let content = |ts: &[String]| -> Vec<String> { ts.iter().filter(|t| !GLUE.contains(&t.as_str())).cloned().collect() };
    let (c, s) = (content(claim_tokens), content(span_tokens));
    let mut i = 0;
    while i < c.len() {
        if !is_numeric(&c[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < c.len() && is_numeric(&c[i]) {
            i += 1;
        }
        let run = &c[start..i];
        let left = start.checked_sub(1).map(|j| &c[j]);
        let right = c.get(i);
        let bound = (0..s.len().saturating_sub(run.len() - 1)).any(|k| {
            if s[k..k + run.len()] != *run {
                return false;
            }
            match (left, right) {
                (Some(l), _) => s[k.saturating_sub(3)..k].contains(l),
                (None, Some(r)) => s[k + run.len()..(k + run.len() + 3).min(s.len())].contains(r),
                (None, None) => true,
            }
        });
        if !bound {
            return false;
        }
    }
    true
}

/// Finds `quote` in `body`: exactly, else after collapsing whitespace on both sides. Returns the
/// byte range in `body` and whether normalisation was needed.
pub fn locate(body: &str, quote: &str) -> Option<(Range<usize>, bool)> {
    if quote.trim().is_empty() {
        return None;
    }
    if let Some(i) = body.find(quote) {
        return Some((i..i + quote.len(), false));
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
    let at = norm.find(&want)?;
    let last = at + want.len() - 1;
    // `map` maps every byte (not only char starts), so the last byte maps to the last byte.
    Some((map[at]..map[last] + 1, true))
}

/// The versions a synthesizer was allowed to see, by id: only these can be cited.
pub type Eligible<'a> = HashMap<String, &'a str>;

/// Runs the gate over every claim, in order.
pub fn check(claims: Vec<Claim>, eligible: &Eligible<'_>, scorer: &mut ScorerSlot<'_>, cfg: &GateConfig) -> Vec<Outcome> {
    claims.into_iter().map(|c| check_one(c, eligible, scorer, cfg)).collect()
}

fn drop(claim: Claim, step: Step, reason: impl Into<String>) -> Outcome {
    Outcome::Dropped(Dropped { claim, step, reason: reason.into() })
}

pub fn check_one(claim: Claim, eligible: &Eligible<'_>, scorer: &mut ScorerSlot<'_>, cfg: &GateConfig) -> Outcome {
    if payload(&claim.text).is_empty() {
        return drop(claim, Step::Content, "the claim states nothing checkable");
    }
    if claim.support.is_empty() {
        return drop(claim, Step::SpanCheck, "the claim cites no evidence");
    }
    // Step 1: every span exists verbatim in an eligible version.
    let mut spans = Vec::with_capacity(claim.support.len());
    for s in &claim.support {
        let Some(body) = eligible.get(&s.version_id) else {
            let reason = format!("cites version {} which was not among the sources it was given", short(&s.version_id));
            return drop(claim, Step::SpanCheck, reason);
        };
        match locate(body, &s.quoted_span) {
            Some((range, normalized)) => spans.push(LocatedSpan {
                version_id: s.version_id.clone(),
                range,
                quoted_span: s.quoted_span.clone(),
                normalized,
            }),
            None => {
                let reason = format!("quote {:?} does not occur in version {}", clip(&s.quoted_span), short(&s.version_id));
                return drop(claim, Step::SpanCheck, reason);
            }
        }
    }
    // Step 2: one span carries the whole payload, and no negation the claim lacks.
    if let Some(i) = claim.support.iter().position(|s| couples(&claim.text, &s.quoted_span)) {
        let verification = Verification::Coupled { span: i };
        let label = verification.label();
        return Outcome::Verified(Verified { claim, spans, verification, label });
    }
    // Step 3: entailment, fail-closed.
    let premise = claim.support.iter().map(|s| s.quoted_span.as_str()).collect::<Vec<_>>().join(" ");
    let scored = scorer.get().and_then(|s| s.entailment(&premise, &claim.text));
    match scored {
        Ok(score) if score > cfg.entailment_threshold => {
            let verification = Verification::Entailed { score };
            let label = verification.label();
            Outcome::Verified(Verified { claim, spans, verification, label })
        }
        Ok(score) => {
            let reason = format!(
                "not contained in one quote, and entailment {score:.2} is not above {:.2}",
                cfg.entailment_threshold
            );
            drop(claim, Step::Entailment, reason)
        }
        Err(e) => drop(claim, Step::Entailment, format!("not contained in one quote, and {e}")),
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
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
