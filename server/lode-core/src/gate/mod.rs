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

use crate::structure;
use crate::text::{floor_char_boundary, normalize_whitespace};

pub mod assertion;
pub mod context;
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
    /// What a reader sees around the quote (headings, lead-in, task, callout, table, footnotes):
    /// `Hiking kit › Myths`. Empty at the top of a plain note.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub context: String,
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
    /// The label a reader sees after the claim: a word they understand; the gate step that
    /// verified it is in the hover ([`Verification::step`]). Entailment keeps its score, which
    /// the reader may want to weigh.
    pub fn label(&self) -> String {
        match self {
            Verification::Coupled { .. } => VERIFIED_LABEL.to_owned(),
            Verification::Entailed { score } => format!("{VERIFIED_LABEL} (entailed {score:.2})"),
        }
    }

    /// How the claim was verified, in a sentence (for the hover).
    pub fn step(&self) -> String {
        match self {
            Verification::Coupled { .. } => COUPLED_STEP.to_owned(),
            Verification::Entailed { score } => format!("entailed: an entailment model judged the quote to entail the claim ({score:.2})"),
        }
    }
}

/// The label of a verified claim.
pub const VERIFIED_LABEL: &str = "verified";
/// The gate step of a claim verified by its quote alone.
pub const COUPLED_STEP: &str = "quoted & coupled: the quote is in the cited version word for word, and it holds every content word of the claim, with no negation or scope the claim leaves out";

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
    /// The same in one plain phrase for a reader: "listed under “Myths”", "an open task", "the
    /// model's wording differs from the note".
    pub why: String,
}

pub const EVIDENCE_ONLY_LABEL: &str = "evidence only — the model's wording could not be verified";
/// How every evidence-only label starts, whatever its reason.
pub const EVIDENCE_ONLY_PREFIX: &str = "evidence only — ";

/// The label of an evidence-only item: the generic one when only the wording failed, else the
/// plain reason the note gives ("evidence only — listed under “Myths”").
pub fn evidence_only_label(why: &str) -> String {
    if why.is_empty() || why == WORDING_NOT_VERIFIED {
        EVIDENCE_ONLY_LABEL.to_owned()
    } else {
        format!("{EVIDENCE_ONLY_PREFIX}{why}")
    }
}

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
    /// Words that mark headings, lead-ins, callouts and footnotes as non-assertive.
    pub words: std::sync::Arc<context::ContextWords>,
}

impl Default for GateConfig {
    fn default() -> Self {
        // Conservative and untuned: see docs/gate.md.
        GateConfig { entailment_threshold: 0.9, words: context::ContextWords::built_in() }
    }
}

/// Plain phrase for a claim whose quotes are real but whose wording was not verified.
pub const WORDING_NOT_VERIFIED: &str = "the model's wording differs from the note";

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
    let exact: Vec<(Range<usize>, bool)> = body.match_indices(quote).take(MAX).map(|(i, _)| (i..i + quote.len(), false)).collect();
    if !exact.is_empty() {
        return exact;
    }
    let (want, _) = as_read(quote);
    if want.is_empty() {
        return Vec::new();
    }
    let (text, from) = as_read(body);
    text.match_indices(want.as_str()).take(MAX).map(|(at, _)| (from[at].start..from[at + want.len() - 1].end, true)).collect()
}

/// `s` as a reader sees it, for locating a quote: whitespace runs as one space (none at the
/// ends), and [`crate::text::fold_for_reader`] (compatibility and canonical equivalence,
/// invisible code points, curly quotes). With it, for each byte, the range of `s` it came from.
fn as_read(s: &str) -> (String, Vec<Range<usize>>) {
    let mut out = String::with_capacity(s.len());
    let mut from: Vec<Range<usize>> = Vec::with_capacity(s.len());
    let mut pending: Option<Range<usize>> = None;
    let mut push = |piece: &str, at: Range<usize>, out: &mut String, from: &mut Vec<Range<usize>>| {
        if piece.is_empty() {
            return;
        }
        if piece.chars().all(char::is_whitespace) {
            if !out.is_empty() && pending.is_none() {
                pending = Some(at);
            }
            return;
        }
        if let Some(sp) = pending.take() {
            out.push(' ');
            from.push(sp);
        }
        out.push_str(piece);
        from.extend(std::iter::repeat_n(at, piece.len()));
    };
    for run in crate::text::reader_runs(s) {
        // ASCII (no mark after it) reads as itself.
        if run.len() == 1 {
            let (i, piece) = (run.start, &s[run.clone()]);
            push(piece, i..i + 1, &mut out, &mut from);
        } else {
            push(&crate::text::fold_run(&s[run.clone()]), run, &mut out, &mut from);
        }
    }
    (out, from)
}

/// The versions a synthesizer was allowed to see, by id: only these can be cited.
pub type Eligible<'a> = HashMap<String, &'a str>;

/// Runs the gate over every claim, in order.
pub fn check(claims: Vec<Claim>, eligible: &Eligible<'_>, scorer: &mut ScorerSlot<'_>, cfg: &GateConfig) -> Vec<Outcome> {
    // Each cited version's structure is parsed once for the whole answer, not once per claim.
    let mut parsed: Parsed<'_> = HashMap::new();
    claims
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            if i >= MAX_CLAIMS {
                drop(c, Step::Content, format!("the answer has more than {MAX_CLAIMS} claims; the rest are not read"))
            } else {
                check_with(c, eligible, scorer, cfg, &mut parsed)
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
    check_with(claim, eligible, scorer, cfg, &mut HashMap::new())
}

/// [`check_one`] with the structures of versions already parsed (filled in as needed).
fn check_with<'a>(
    claim: Claim,
    eligible: &Eligible<'a>,
    scorer: &mut ScorerSlot<'_>,
    cfg: &GateConfig,
    parsed: &mut Parsed<'a>,
) -> Outcome {
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
            let problem =
                couple::malformed_quote(body, &range).or_else(|| not_evidence_problem(&claim.text, &s.quoted_span, body, &regions, &range));
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
        spans.push(LocatedSpan {
            version_id: s.version_id.clone(),
            range,
            quoted_span: s.quoted_span.clone(),
            normalized,
            context: String::new(),
        });
        places.push(ok.into_iter().map(|(r, _)| r).collect());
    }
    // The note's structure, parsed once per cited version.
    for sp in &spans {
        let body: &'a str = eligible[&sp.version_id];
        parsed.entry(sp.version_id.clone()).or_insert_with(|| structure::Structure::parse(body));
    }
    let parsed: &Parsed<'a> = parsed;
    let blockers_at = |version: &str, r: &Range<usize>| {
        let st = &parsed[version];
        context::blockers(st, &st.context(r.clone()), r, &claim.text, &cfg.words)
    };
    // Addresses and look-alike words are compared whole: coupling does not read URLs as words
    // (a link's destination is not prose), so a claim's URL, and a word it spells with letters of
    // two scripts, must be in a cited quote as written (as a reader sees it).
    let quoted: Vec<String> = spans.iter().map(|sp| crate::text::fold_for_reader(&eligible[&sp.version_id][sp.range.clone()])).collect();
    let in_quotes = |w: &str| {
        let w = crate::text::fold_for_reader(w);
        quoted.iter().any(|q| q.contains(w.as_str()))
    };
    // Compared as a reader sees them, each whole.
    let claim_addresses = addresses(&claim.text);
    let quoted_addresses: Vec<String> = spans.iter().flat_map(|sp| addresses(&eligible[&sp.version_id][sp.range.clone()])).collect();
    if let Some(url) = claim_addresses.iter().find(|u| !quoted_addresses.contains(u)) {
        let reason = format!("the claim gives the address {url:?}, which the quotes do not");
        return evidence_only(claim, spans, eligible, reason, format!("the address “{url}” is not in the quotes"), parsed, &cfg.words);
    }
    if let Some(word) = mixed_script_word(&claim.text).filter(|w| !in_quotes(w)) {
        let reason = format!("the claim writes “{word}” with letters of two scripts that look alike; the note does not say that");
        let why = format!("the claim's “{word}” mixes letters of two scripts");
        return evidence_only(claim, spans, eligible, reason, why, parsed, &cfg.words);
    }
    // Step 2: one quote carries the claim as its sentence says it, and the note presents that
    // sentence as an assertion (not under "Myths", not an open task, …).
    let mut why_not = String::new();
    let mut structural: Option<(usize, Range<usize>, Vec<context::Blocker>)> = None;
    // A claim's web address is compared whole with the addresses of the quote that carries it
    // (coupling does not read URLs: a link's destination is not prose).
    let addresses_held = |carrier: &str| {
        let held = addresses(carrier);
        claim_addresses.iter().all(|a| held.contains(a))
    };
    for i in 0..spans.len() {
        for r in &places[i] {
            let body = eligible[&spans[i].version_id];
            match couple_claim(&claim.text, body, r) {
                Ok(_) if !addresses_held(&body[r.clone()]) => {
                    if why_not.is_empty() {
                        why_not = "the claim gives a web address the quote does not".into();
                    }
                }
                Ok(pieces) => {
                    let blocked: Vec<context::Blocker> = pieces.iter().flat_map(|p| blockers_at(&spans[i].version_id, p)).collect();
                    if blocked.is_empty() {
                        spans[i].range = r.clone();
                        return verified(claim, spans, Verification::Coupled { span: i }, parsed, &cfg.words);
                    }
                    structural.get_or_insert((i, r.clone(), blocked));
                }
                Err(e) if why_not.is_empty() => why_not = e,
                Err(_) => {}
            }
        }
    }
    // Quotes that follow one another in the note with nothing readable between them (a link's
    // label and the words after it, a speaker's name and the turn) read as one quote.
    if let Some(chain) = adjacent_chain(&spans, &places, eligible) {
        let version = spans[0].version_id.clone();
        let union = chain[0].start..chain[chain.len() - 1].end;
        match couple_claim(&claim.text, eligible[&version], &union) {
            Ok(_) if !addresses_held(&eligible[&version][union.clone()]) => {
                if why_not.is_empty() {
                    why_not = "the claim gives a web address the quotes do not".into();
                }
            }
            Ok(pieces) => {
                for (sp, r) in spans.iter_mut().zip(&chain) {
                    sp.range = r.clone();
                }
                // Each piece is read where it stands; a context the chain itself restates (the
                // speaker's name before the turn) is carried.
                let carried = |c: &Range<usize>| chain.iter().any(|u| u.start < c.end && c.start < u.end);
                let blocked: Vec<context::Blocker> = pieces
                    .iter()
                    .chain(chain.iter())
                    .flat_map(|p| blockers_at(&version, p))
                    .filter(|b| b.carrier.as_ref().is_none_or(|c| !carried(c)))
                    .collect();
                if blocked.is_empty() {
                    return verified(claim, spans, Verification::Coupled { span: 0 }, parsed, &cfg.words);
                }
                structural.get_or_insert((0, chain[0].clone(), blocked));
            }
            Err(e) if why_not.is_empty() => why_not = e,
            Err(_) => {}
        }
    }
    // A claim that restates the line's context with it: "If the cache is cold: expect …",
    // "billing-api (Payments): p99 latency is 180 ms", along the note's structure only.
    let same_version = spans.windows(2).all(|w| w[0].version_id == w[1].version_id);
    if spans.len() >= 2 && same_version {
        match context::compose(&claim.text, &parsed[&spans[0].version_id], &places, &cfg.words) {
            Ok((_, r)) if !addresses_held(&eligible[&spans[0].version_id][r.clone()]) => {
                if why_not.is_empty() {
                    why_not = "the claim gives a web address its line does not".into();
                }
            }
            Ok((i, r)) => {
                spans[i].range = r;
                return verified(claim, spans, Verification::Coupled { span: i }, parsed, &cfg.words);
            }
            Err(e) => {
                if why_not.is_empty() {
                    why_not = e;
                }
            }
        }
    }
    if let Some((i, r, blocked)) = structural {
        // The sentence says it, the note does not: no model can see that, so no step 3.
        spans[i].range = r;
        let why = context::why_of(&blocked);
        let reason = format!("the quote couples, but the note does not assert it: {why}");
        return evidence_only(claim, spans, eligible, reason, why, parsed, &cfg.words);
    }
    // A claim that spells a word with letters of two scripts ("pаypal.com" with a Cyrillic "а")
    // names something the note does not; no model is asked to judge it.
    if let Some(word) = mixed_script_word(&claim.text) {
        let reason = format!("the claim writes “{word}” with letters of two scripts that look alike; the note does not say that");
        let why = format!("the claim's “{word}” mixes letters of two scripts");
        return evidence_only(claim, spans, eligible, reason, why, parsed, &cfg.words);
    }
    // Step 3: entailment of the claim by the cited sentences (not the bare quotes: a quote cut
    // out of "Not all X" must be judged with its "Not"), read as a reader reads them: without
    // comments and struck-through text.
    let context: Vec<Range<usize>> = spans.iter().map(|s| couple::evidence_context(eligible[&s.version_id], &s.range)).collect();
    let premise = spans
        .iter()
        .zip(&context)
        .map(|(s, r)| couple::readable(&eligible[&s.version_id][r.clone()]).split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(" ");
    let scored = scorer.get().and_then(|s| s.entailment(&premise, &claim.text));
    let reason = match scored {
        Ok(score) if score > cfg.entailment_threshold => {
            let blocked: Vec<context::Blocker> = spans.iter().flat_map(|s| blockers_at(&s.version_id, &s.range)).collect();
            if blocked.is_empty() {
                return verified(claim, spans, Verification::Entailed { score }, parsed, &cfg.words);
            }
            let why = context::why_of(&blocked);
            let reason = format!("entailed ({score:.2}) by the sentences, but the note does not assert them: {why}");
            return evidence_only(claim, spans, eligible, reason, why, parsed, &cfg.words);
        }
        Ok(score) => {
            format!("not carried by one quote ({why_not}), and entailment {score:.2} is not above {:.2}", cfg.entailment_threshold)
        }
        Err(e) => format!("not carried by one quote ({why_not}), and {e}"),
    };
    evidence_only(claim, spans, eligible, reason, WORDING_NOT_VERIFIED.to_owned(), parsed, &cfg.words)
}

/// Step 2 for one quote: the claim couples (the quote is returned), or, when it says several
/// sentences, they couple with consecutive sentences of the quote, in order (those sentences are
/// returned: each is read where it stands, so one under "## Myths" is not carried by a clean
/// one before it).
fn couple_claim(claim: &str, body: &str, quote: &Range<usize>) -> Result<Vec<Range<usize>>, String> {
    let first = couple::couple(claim, body, quote);
    if first.is_ok() {
        return Ok(vec![quote.clone()]);
    }
    let mut parts = couple::sentences(claim, 0..claim.len());
    if parts.len() < 2 {
        // "Superseded by v3; do not use for flight." for two sentences of the note.
        let mut at = 0;
        parts = claim
            .split("; ")
            .map(|p| {
                let r = at..at + p.len();
                at += p.len() + 2;
                r
            })
            .collect();
        if parts.len() < 2 {
            return first.map(|_| vec![quote.clone()]);
        }
    }
    let source: Vec<Range<usize>> = couple::sentences(body, quote.clone());
    for start in 0..source.len().saturating_sub(parts.len() - 1) {
        let pieces = &source[start..start + parts.len()];
        if parts.iter().zip(pieces).all(|(p, r)| couple::couple(&claim[p.clone()], body, r).is_ok()) {
            return Ok(pieces.to_vec());
        }
    }
    first.map(|_| vec![quote.clone()])
}

/// One place per quote, in the quotes' order, each right after the one before with nothing a
/// reader reads between them (markup, punctuation, a link's destination) on one line, and not
/// across table cells, all in one version.
fn adjacent_chain(spans: &[LocatedSpan], places: &[Vec<Range<usize>>], eligible: &Eligible<'_>) -> Option<Vec<Range<usize>>> {
    if spans.len() < 2 || !spans.windows(2).all(|w| w[0].version_id == w[1].version_id) {
        return None;
    }
    let body = eligible[&spans[0].version_id];
    for start in &places[0] {
        let mut chain = vec![start.clone()];
        for ps in &places[1..] {
            let prev = chain[chain.len() - 1].end;
            let next = ps.iter().find(|r| r.start >= prev && r.start - prev <= 200 && body.get(prev..r.start).is_some_and(quiet_gap));
            match next {
                Some(r) => chain.push(r.clone()),
                None => break,
            }
        }
        if chain.len() == places.len() {
            return Some(chain);
        }
    }
    None
}

/// Whether a reader reads nothing between two quotes: spaces, emphasis and punctuation marks,
/// and a link's destination (`](…)`, no spaces in it). Not an arrow, a `≠`, a table cell's
/// `|` or a line break.
fn quiet_gap(gap: &str) -> bool {
    // Struck-through text and comments are not read ("count so far: ~~47~~ 27").
    let mut bytes = gap.as_bytes().to_vec();
    for (r, kind) in markup::not_evidence(gap) {
        if matches!(kind, markup::NotEvidence::HtmlComment | markup::NotEvidence::Strikethrough) {
            bytes[r].fill(b' ');
        }
    }
    let unstruck = String::from_utf8(bytes).unwrap_or_else(|_| gap.to_owned());
    let gap = unstruck.as_str();
    let mut rest = gap;
    while let Some(open) = rest.find("](") {
        let Some(close) = rest[open + 2..].find(')') else { return false };
        let dest = &rest[open + 2..open + 2 + close];
        if dest.contains(char::is_whitespace) {
            return false;
        }
        rest = &rest[open + 2 + close + 1..];
    }
    let outside: String = {
        let mut out = String::new();
        let mut r = gap;
        while let Some(open) = r.find("](") {
            out.push_str(&r[..open + 1]);
            let close = r[open + 2..].find(')').map_or(r.len(), |c| open + 2 + c + 1);
            r = &r[close..];
        }
        out.push_str(r);
        out
    };
    outside.chars().all(|c| {
        matches!(c, ' ' | '\t' | '*' | '_' | ':' | '"' | '\'' | '“' | '”' | '‘' | '’' | '`' | '[' | ']' | '.' | ',' | ';' | '—' | '–' | '-')
    })
}

/// The parsed structure of each cited version, by version id.
type Parsed<'t> = HashMap<String, structure::Structure<'t>>;

fn with_breadcrumbs(spans: &mut [LocatedSpan], parsed: &Parsed<'_>, words: &context::ContextWords) {
    for s in spans {
        if let Some(st) = parsed.get(&s.version_id) {
            s.context = breadcrumb(st, &s.range, words);
        }
    }
}

/// What a reader sees around `range` in one line: the structure (`Hiking kit › Myths`) and what
/// the note as a whole says of it (`the note's status is “rejected”`, `Ana, in the meeting`).
pub fn breadcrumb(st: &structure::Structure<'_>, range: &Range<usize>, words: &context::ContextWords) -> String {
    let mut parts = vec![st.context(range.clone()).breadcrumb()];
    parts.extend(st.reading(words).describe(range));
    parts.retain(|p| !p.is_empty());
    parts.join(" › ")
}

fn verified(
    claim: Claim,
    mut spans: Vec<LocatedSpan>,
    verification: Verification,
    parsed: &Parsed<'_>,
    words: &context::ContextWords,
) -> Outcome {
    with_breadcrumbs(&mut spans, parsed, words);
    let label = verification.label();
    Outcome::Verified(Verified { claim, spans, verification, label })
}

fn evidence_only(
    claim: Claim,
    mut spans: Vec<LocatedSpan>,
    eligible: &Eligible<'_>,
    reason: String,
    why: String,
    parsed: &Parsed<'_>,
    words: &context::ContextWords,
) -> Outcome {
    with_breadcrumbs(&mut spans, parsed, words);
    let context = spans.iter().map(|s| couple::evidence_context(eligible[&s.version_id], &s.range)).collect();
    Outcome::EvidenceOnly(EvidenceOnly { claim, spans, context, reason, why })
}

/// Why a located quote is not evidence because of the markup it is in, if it is not. Code and
/// earlier lode answers refuse any overlap; comments and struck-through text only when nothing
/// outside them is quoted (a quote may read across "~~Tuesday~~ Thursday": what is struck is
/// not read, by coupling or by step 3).
fn not_evidence_problem(
    claim: &str,
    quote: &str,
    body: &str,
    regions: &[(Range<usize>, markup::NotEvidence)],
    range: &Range<usize>,
) -> Option<String> {
    use markup::NotEvidence as N;
    let hits: Vec<&(Range<usize>, N)> = regions.iter().filter(|(r, _)| r.start < range.end && range.start < r.end).collect();
    let (_, first_kind) = hits.first()?;
    for (_, kind) in &hits {
        if matches!(kind, N::CodeBlock | N::LodeAnswer) {
            let quotes_code = *kind == N::CodeBlock && claim_quotes_code(claim, quote);
            if !quotes_code {
                return Some(format!("quote {:?} is {}, which the note does not assert", clip(quote), kind.describe()));
            }
        }
    }
    let readable_left = body[range.clone()].char_indices().any(|(i, c)| {
        let at = range.start + i;
        c.is_alphanumeric() && !hits.iter().any(|(r, k)| matches!(k, N::HtmlComment | N::Strikethrough) && r.contains(&at))
    });
    (!readable_left).then(|| format!("quote {:?} is {}, which the note does not assert", clip(quote), first_kind.describe()))
}

/// The web addresses a text spells out (`https://…`, `www.…`), without trailing punctuation,
/// as a reader sees them ([`crate::text::fold_for_reader`]).
pub fn addresses(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | '(' | ')' | '[' | ']' | '"' | '`'))
        .filter(|w| w.contains("://") || w.starts_with("www.") || w.starts_with("//") || w.starts_with("mailto:"))
        .map(|w| crate::text::fold_for_reader(w.trim_end_matches(['.', ',', ';', ':', '!', '?', '\'', '*', '_'])))
        .filter(|w| w.len() > 4)
        .collect()
}

/// A word of `text` that mixes Latin letters with Cyrillic ones, or with Greek letters that look
/// like Latin ones (`ο`, `ρ`, `ν`, capitals such as `Α`): a homoglyph, not a spelling. Words are
/// split at hyphens and dots, so `α-synuclein` and `5 μs` are not.
pub fn mixed_script_word(text: &str) -> Option<String> {
    fn script(c: char) -> u8 {
        match c {
            'a'..='z' | 'A'..='Z' | '\u{00C0}'..='\u{024F}' => 1,
            '\u{0400}'..='\u{052F}' => 2,
            'ο' | 'ρ' | 'ν' | 'ι' | 'υ' | 'α' | 'κ' | 'τ' | 'χ' | 'Α' | 'Β' | 'Ε' | 'Ζ' | 'Η' | 'Ι' | 'Κ' | 'Μ' | 'Ν' | 'Ο' | 'Ρ' | 'Τ'
            | 'Υ' | 'Χ' => 3,
            _ => 0,
        }
    }
    text.split(|c: char| !(c.is_alphanumeric() || unicode_normalization::char::is_combining_mark(c)))
        .find(|w| {
            let mut seen = 0u8;
            for c in w.chars() {
                seen |= match script(c) {
                    1 => 1,
                    2 => 2,
                    3 => 4,
                    _ => 0,
                };
            }
            seen & 1 == 1 && seen & 6 != 0
        })
        .map(str::to_owned)
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
