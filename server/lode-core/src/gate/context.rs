//! The gate's structural step: whether the note, as its structure presents a quote, asserts it.
//! A quote can be verbatim and its sentence clean, yet stand under a "Myths" heading, after a
//! "Don't:" lead-in, in an open task, in a quote the next paragraph disputes, beside a footnote
//! that narrows it, in a table column headed "Rejected", or continue a sentence that attributes
//! it ("Bob thinks the cache is the culprit. It …"). Each such context is a [`Blocker`]; a claim
//! that restates a blocker's own text (the heading, the lead-in, the header) carries it and is
//! not blocked by it ([`compose`]).
//!
//! Invariants: like every gate step this only removes verifications, never adds one — except
//! [`compose`], which verifies a claim only along the note's structure (a heading over the line,
//! the lead-in of its list, its parent item, its own row's cells and column header), each
//! context unit restated whole, in the note's order, and the line itself coupled by step 2.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use super::couple::{self, lex, Kind, Tok};
use super::lexicon::{ANAPHORS, FALSITY, SENTENCE_MARKERS};
use crate::structure::{Context, LeadInKind, Structure, TaskState};

const BUILT_IN: &str = include_str!("../../data/context-words.txt");

/// Words that mark context as non-assertive, by where they are read. Phrases are stored as
/// their normalised tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextWords {
    pub headings: Vec<Vec<String>>,
    pub heading_openers: Vec<Vec<String>>,
    pub lead_ins: Vec<Vec<String>>,
    pub callouts: Vec<Vec<String>>,
    pub disputes: Vec<Vec<String>>,
    pub footnotes: Vec<Vec<String>>,
    /// Words that say a note or a section is not current (`rejected`, `draft`, `outdated`).
    pub status: Vec<Vec<String>>,
}

pub(crate) fn norm_tokens(s: &str) -> Vec<String> {
    lex(s, &[]).into_iter().filter(|t| t.kind != Kind::Symbol).map(|t| t.norm).collect()
}

impl ContextWords {
    /// The built-in lists (`server/lode-core/data/context-words.txt`).
    pub fn built_in() -> Arc<ContextWords> {
        static WORDS: OnceLock<Arc<ContextWords>> = OnceLock::new();
        WORDS.get_or_init(|| Arc::new(ContextWords::parse(BUILT_IN).expect("the built-in context words parse; a test checks"))).clone()
    }

    /// Parses the data file's format: `[section]` lines, then one word or phrase per line, `#`
    /// comments.
    pub fn parse(text: &str) -> Result<ContextWords, String> {
        let mut w = ContextWords::default();
        let mut section: Option<&str> = None;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = Some(name.trim());
                continue;
            }
            let Some(s) = section else { return Err(format!("line {}: a word before any [section]", n + 1)) };
            w.add(s, line)?;
        }
        Ok(w)
    }

    /// Adds a word or phrase to a list by its name (`headings`, `heading-openers`, `lead-ins`,
    /// `callouts`, `disputes`, `footnotes`; `_` may stand for `-`).
    pub fn add(&mut self, list: &str, phrase: &str) -> Result<(), String> {
        let toks = norm_tokens(phrase);
        if toks.is_empty() {
            return Ok(());
        }
        let target = match list.replace('_', "-").as_str() {
            "headings" => &mut self.headings,
            "heading-openers" => &mut self.heading_openers,
            "lead-ins" => &mut self.lead_ins,
            "callouts" => &mut self.callouts,
            "disputes" => &mut self.disputes,
            "footnotes" => &mut self.footnotes,
            "status" => &mut self.status,
            other => return Err(format!("unknown list of context words [{other}]")),
        };
        if !target.contains(&toks) {
            target.push(toks);
        }
        Ok(())
    }

    /// The built-in lists plus a user's own words.
    pub fn with_user(extra: &[(String, Vec<String>)]) -> Result<Arc<ContextWords>, String> {
        if extra.is_empty() {
            return Ok(ContextWords::built_in());
        }
        let mut w = (*ContextWords::built_in()).clone();
        for (list, words) in extra {
            for p in words {
                w.add(list, p)?;
            }
        }
        Ok(Arc::new(w))
    }
}

/// Whether `phrase` occurs in `toks` as whole consecutive tokens.
fn has_phrase(toks: &[String], phrase: &[String]) -> bool {
    !phrase.is_empty() && toks.windows(phrase.len()).any(|w| w == phrase)
}

fn any_phrase(toks: &[String], list: &[Vec<String>]) -> Option<String> {
    list.iter().find(|p| has_phrase(toks, p)).map(|p| p.join(" "))
}

/// Verbs that report a fact as true ("confirmed", "stated") do not make what follows less so.
/// The verbs of [`FACTIVE`]: a lead-in holding one ("Confirmed by the technician:") asserts.
const FACTIVE_VERBS: &[&str] = &["confirmed", "announced", "mentioned", "stated", "states", "wrote", "writes"];
/// Words by which a lead-in confirms what it introduces ("Hypothesis (confirmed):").
const CONFIRMED: &[&str] = &["confirmed", "verified", "proven", "validated", "supported"];
/// First words of a sentence that states a result.
const RESULT_OPENERS: &[&str] = &["result", "results", "outcome", "finding", "findings", "conclusion", "verdict"];
const FACTIVE: &[&str] = &["confirmed", "announced", "mentioned", "stated", "states", "wrote", "writes", "per", "once", "when", "whenever"];

/// The cue phrases that mark a heading's section as non-assertive (none: it does not block).
pub fn heading_cues(words: &ContextWords, heading: &str) -> Vec<Vec<String>> {
    let toks = norm_tokens(heading);
    let mut out: Vec<Vec<String>> = words.headings.iter().filter(|p| has_phrase(&toks, p)).cloned().collect();
    // "Old Town restaurants", "Before you start": a place name, a prerequisite, not a past state.
    let next = toks.get(1).map_or("", String::as_str);
    let exempt = match toks.first().map_or("", String::as_str) {
        "old" if toks.iter().any(|w| matches!(w.as_str(), "vs" | "versus" | "compared")) => true,
        // "When is the review?" asks; "When the extension is built" conditions.
        "when" | "if" | "once" | "unless" | "assuming" | "in" if heading.trim_end().ends_with('?') => true,
        "when" | "how" => next == "to",
        "old" => matches!(
            next,
            "town"
                | "city"
                | "quarter"
                | "street"
                | "road"
                | "bridge"
                | "market"
                | "school"
                | "testament"
                | "english"
                | "norse"
                | "world"
                | "port"
                | "harbour"
                | "harbor"
        ),
        "tried" => next == "and",
        "before" => matches!(
            next,
            "you"
                | "starting"
                | "beginning"
                | "installing"
                | "using"
                | "running"
                | "deploying"
                | "release"
                | "releasing"
                | "launch"
                | "launching"
        ),
        _ => false,
    };
    if !exempt {
        out.extend(words.heading_openers.iter().filter(|p| toks.starts_with(p)).cloned());
    }
    out
}

/// The cue words by which a lead-in negates, conditions, attributes or hedges what it
/// introduces (none: it does not block).
pub fn lead_in_cues(words: &ContextWords, lead_in: &str) -> Vec<Vec<String>> {
    let toks = norm_tokens(lead_in);
    let mut out: Vec<Vec<String>> = words.lead_ins.iter().filter(|p| has_phrase(&toks, p)).cloned().collect();
    out.extend(
        toks.iter()
            .filter(|t| {
                super::lexicon::is_negation(t)
                    || (SENTENCE_MARKERS.contains(&t.as_str()) && !FACTIVE_VERBS.contains(&t.as_str()))
                    || FALSITY.contains(&t.as_str())
            })
            .map(|t| vec![t.clone()]),
    );
    out.extend(heading_cues(words, lead_in));
    out
}

pub fn heading_blocks(words: &ContextWords, heading: &str) -> bool {
    !heading_cues(words, heading).is_empty()
}

pub fn lead_in_blocks(words: &ContextWords, lead_in: &str) -> bool {
    !lead_in_cues(words, lead_in).is_empty()
}

/// Whether the claim states a cue of its context itself ("It is a myth that …" under "Myths",
/// "Avoid running it on Fridays" after "Avoid:"): then it does not present the line as plain
/// fact. Plural and singular are one word here.
/// A word without a plural `s`: "myths" and "myth" are one cue.
fn stem(w: &str) -> String {
    w.strip_suffix('s').filter(|s| s.len() >= 3).unwrap_or(w).to_owned()
}

fn claim_states(claim: &[String], cues: &[Vec<String>]) -> bool {
    // Only words that say what the line is ("a myth", "unverified") qualify a claim by
    // themselves; "alternative" or "not" in the line's own words say nothing about its section.
    const SELF_QUALIFYING: &[&str] = &[
        "myth",
        "misconception",
        "rumor",
        "rumour",
        "debunked",
        "hypothesi",
        "speculation",
        "unverified",
        "unconfirmed",
        "deprecated",
        "obsolete",
    ];
    let cues: Vec<Vec<String>> =
        cues.iter().filter(|c| c.len() == 1 && SELF_QUALIFYING.iter().any(|q| c[0].starts_with(q))).cloned().collect();
    let cues = cues.as_slice();
    let claim: Vec<String> = claim.iter().map(|w| stem(w)).collect();
    cues.iter().any(|c| {
        let c: Vec<String> = c.iter().map(|w| stem(w)).collect();
        has_phrase(&claim, &c)
    })
}

/// Why the note does not present a quote as an assertion, and which text of the note says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    /// One plain phrase for the reader: "listed under Myths", "an open task".
    pub why: String,
    /// The note's own text that carries this context, when a claim may restate it (a heading, a
    /// lead-in, a column header); `None` when no restatement lifts it.
    pub carrier: Option<Range<usize>>,
}

fn quoted(s: &str) -> String {
    format!("“{}”", crate::structure::clip(s, 60))
}

/// Every context around `quote` that keeps the note from asserting what `claim` says.
pub fn blockers(st: &Structure<'_>, ctx: &Context, quote: &Range<usize>, claim: &str, words: &ContextWords) -> Vec<Blocker> {
    let body = st.text();
    let claim_toks = norm_tokens(claim);
    let mut out = Vec::new();
    let reading = st.reading(words);
    let sentence_opening = first_sentence_tokens(&body[quote_sentence(body, ctx, quote)]);
    // "Result: …", "Turned out …": the answer to a question or hypothesis above it.
    let states_a_result = sentence_opening.first().is_some_and(|w| RESULT_OPENERS.contains(&w.as_str()))
        || sentence_opening.starts_with(&["turned".to_owned(), "out".to_owned()])
        || sentence_opening.starts_with(&["turns".to_owned(), "out".to_owned()]);
    // A line the note's legend confirms ("**bold** = confirmed") is asserted under a "Rumours"
    // heading or lead-in.
    let confirmed = reading.confirmed(st, quote);
    let in_banner = reading.banner.as_ref().is_some_and(|b| b.start <= quote.start && quote.start < b.end);
    for h in &ctx.headings {
        // The banner under a title says the status; the title's status does not block it.
        if in_banner {
            continue;
        }
        // "## Is Redis faster? (no)": the lines under a question answered no restate what it
        // asked, unless they state the result.
        let ht = norm_tokens(&h.text);
        let answered_no = h.text.contains('?')
            && ht.last().is_some_and(|w| matches!(w.as_str(), "no" | "nope" | "false" | "disproved" | "disproven" | "refuted" | "wrong"));
        // A field line ("Benchmark on staging: …", "Setup: …") reports what was found.
        // A measurement reported under it ("Benchmark on staging: …", "Setup: …"), not any label.
        let field_line =
            body[quote_sentence(body, ctx, quote)].trim_start_matches(['*', '_', '-', ' ']).split_once(':').is_some_and(|(l, rest)| {
                let first = norm_tokens(l).into_iter().next().unwrap_or_default();
                rest.starts_with([' ', '*', '_'])
                    && l.split_whitespace().count() <= 4
                    && matches!(
                        first.as_str(),
                        "result"
                            | "results"
                            | "outcome"
                            | "finding"
                            | "findings"
                            | "benchmark"
                            | "benchmarks"
                            | "measured"
                            | "measurement"
                            | "measurements"
                            | "setup"
                            | "method"
                            | "data"
                            | "test"
                            | "tested"
                            | "observed"
                            | "numbers"
                            | "run"
                    )
            });
        if answered_no && !states_a_result && !confirmed && !field_line {
            out.push(Blocker { why: format!("under the question {}", quoted(&h.text)), carrier: Some(h.range.clone()) });
            continue;
        }
        let mut cues = heading_cues(words, &h.text);
        if confirmed {
            continue;
        }
        // A note's title names its subject: "Genetic variation in IL28B", "Alternative lengthening
        // of telomeres" is not a section of variants or alternatives.
        let is_title = st.heading_list().first().is_some_and(|(level, _, u)| *level == 1 && u.range == h.range);
        if is_title {
            cues.retain(|c| {
                !(c.len() == 1
                    && matches!(c[0].as_str(), "variant" | "variants" | "variation" | "variations" | "alternative" | "alternatives"))
            });
        }
        let only = |set: &[&str]| cues.iter().all(|c| c.len() == 1 && set.contains(&c[0].as_str()));
        // An accepted proposal is what was decided; a result answers the question it is under.
        // Only the one proposal of an accepted note, not "Proposal B (not chosen)" beside another.
        let unrejected = !ht.iter().any(|w| super::lexicon::is_negation(w) || matches!(w.as_str(), "rejected" | "declined" | "dropped"));
        if reading.accepted && only(&["proposal", "proposals", "proposed"]) && unrejected && reading.decided(&h.text) {
            continue;
        }
        if states_a_result
            && only(&[
                "maybe",
                "possible",
                "possibly",
                "hypothesis",
                "hypotheses",
                "idea",
                "ideas",
                "speculation",
                "to check",
                "to verify",
                "to investigate",
                "open questions",
                "unanswered",
                "unresolved",
            ])
        {
            continue;
        }
        if !cues.is_empty() && !claim_states(&claim_toks, &cues) {
            out.push(Blocker { why: format!("listed under {}", quoted(&h.text)), carrier: Some(h.range.clone()) });
        }
    }
    // "- Chosen:\n  - Option A\n    - …": an option under a choice is the one chosen.
    let chosen_above = |k: usize| {
        ctx.lead_ins[..k].iter().any(|o| {
            let t = norm_tokens(&o.unit.text);
            t.len() <= 3
                && t.iter().any(|w| matches!(w.as_str(), "chosen" | "selected" | "picked" | "winner" | "adopted"))
                && !t.iter().any(|w| super::lexicon::is_negation(w))
        })
    };
    for (k, l) in ctx.lead_ins.iter().enumerate() {
        // "This turned out to be false: …" judges what came before, not what follows.
        // "This turned out to be false: …", "I doubt it: …" judge what came before.
        let lt = norm_tokens(&l.unit.text);
        let anaphoric = |w: Option<&String>| w.is_some_and(|w| matches!(w.as_str(), "this" | "that" | "thats" | "it" | "its" | "which"));
        let verdict =
            lt.iter().any(|t| FALSITY.contains(&t.as_str()) || matches!(t.as_str(), "doubt" | "disagree" | "disagrees" | "wrong"));
        if l.kind == LeadInKind::Label && verdict && (anaphoric(lt.first()) || anaphoric(lt.last())) {
            continue;
        }
        let cues = lead_in_cues(words, &l.unit.text);
        // "Hypothesis (confirmed):" states the finding.
        // Only as a verdict on what it introduces: not "If the rumour is true:", "To be verified:".
        let confirmed = lt.iter().any(|t| CONFIRMED.contains(&t.as_str()))
            && !lt.iter().any(|t| {
                super::lexicon::is_negation(t)
                    || matches!(t.as_str(), "if" | "unless" | "whether" | "to" | "be" | "still" | "yet" | "pending" | "until")
            })
            && !l.unit.text.contains('?');
        let option_only = cues.iter().all(|c| {
            c.len() == 1
                && matches!(c[0].as_str(), "option" | "options" | "candidates" | "alternatives" | "considered" | "proposed" | "suggested")
        });
        let lifted = confirmed || reading.confirmed(st, quote) || (option_only && chosen_above(k));
        if !cues.is_empty() && !claim_states(&claim_toks, &cues) && !lifted {
            let why = match l.kind {
                LeadInKind::LeadIn => format!("under the lead-in {}", quoted(&l.unit.text)),
                LeadInKind::ParentItem => format!("under the item {}", quoted(&l.unit.text)),
                LeadInKind::Label => format!("after {}", quoted(&l.unit.text)),
            };
            out.push(Blocker { why, carrier: Some(l.unit.range.clone()) });
        }
    }
    if let Some(t) = ctx.task.filter(|t| !t.asserts()) {
        let why = match t {
            TaskState::Open => "an open task",
            TaskState::InProgress => "a task still in progress",
            TaskState::Cancelled => "a cancelled task",
            TaskState::Deferred => "a deferred task",
            TaskState::Question => "an open question",
            TaskState::Done | TaskState::Marked(_) => "",
        };
        out.push(Blocker { why: why.to_owned(), carrier: None });
    }
    if let Some(q) = &ctx.quote {
        if let Some(c) = q.callout.as_deref().filter(|c| any_phrase(&norm_tokens(c), &words.callouts).is_some()) {
            out.push(Blocker { why: format!("in a [!{c}] callout"), carrier: None });
        }
        // After a quotation the next paragraph's first sentence is the note's verdict on it; after
        // the note's own callout (a tip, a warning) only a paragraph that opens by answering it
        // ("But only for …", "Actually, …") is.
        let quotes_someone = q.callout.as_deref().is_none_or(|c| matches!(c, "quote" | "cite"));
        if let Some(next) = &q.followed_by {
            let toks = norm_tokens(&next.text);
            let first = first_sentence_tokens(&next.text);
            let opens = first.first().is_some_and(|w| {
                matches!(
                    w.as_str(),
                    "but"
                        | "however"
                        | "actually"
                        | "not"
                        | "no"
                        | "nope"
                        | "only"
                        | "except"
                        | "wrong"
                        | "false"
                        | "untrue"
                        | "correction"
                )
            });
            let disputed = if quotes_someone {
                any_phrase(&first, &words.disputes).is_some() || toks.iter().any(|t| FALSITY.contains(&t.as_str()) && t != "thought")
            } else {
                opens
            };
            if disputed {
                out.push(Blocker { why: format!("quoted, then disputed: {}", quoted(&next.text)), carrier: None });
            }
        }
    }
    let sentence = quote_sentence(body, ctx, quote);
    for f in ctx.footnotes.iter().filter(|f| f.refs.iter().any(|r| sentence.start <= r.start && r.start <= sentence.end)) {
        let toks = norm_tokens(&f.unit.text);
        let qualifies = toks.iter().any(|t| {
            let t = t.as_str();
            super::lexicon::is_negation(t)
                || FALSITY.contains(&t)
                || super::lexicon::REVERSALS.contains(&t)
                || (SENTENCE_MARKERS.contains(&t) && !matches!(t, "according" | "per") && !FACTIVE_VERBS.contains(&t))
        });
        if qualifies || any_phrase(&toks, &words.footnotes).is_some() {
            out.push(Blocker { why: format!("footnote {} narrows it: {}", f.label, quoted(&f.unit.text)), carrier: None });
        }
    }
    if let Some(t) = &ctx.table {
        // A Status column says whether the row is real yet ("planned", "rejected"): it qualifies
        // the row's other cells. A Verdict column judges an option, whose facts still hold.
        if !t.in_header {
            for (c, h) in t.header.iter().enumerate().filter(|(c, _)| *c != t.column) {
                let ht = norm_tokens(&h.text);
                if !matches!(ht.as_slice(), [w] if matches!(w.as_str(), "status" | "state" | "stage")) {
                    continue;
                }
                let Some(cell) = t.row.get(c) else { continue };
                let vt = norm_tokens(&cell.text);
                let marks = ["❌", "✗", "✘", "🚫", "⛔"].iter().any(|m| cell.text.contains(m));
                let not_current = marks
                    || vt.iter().any(|w| {
                        super::lexicon::is_negation(w)
                            || matches!(
                                w.as_str(),
                                "planned"
                                    | "proposed"
                                    | "todo"
                                    | "pending"
                                    | "idea"
                                    | "wip"
                                    | "backlog"
                                    | "later"
                                    | "maybe"
                                    | "considering"
                                    | "evaluating"
                                    | "blocked"
                                    | "paused"
                                    | "cancelled"
                                    | "canceled"
                                    | "dropped"
                                    | "failed"
                                    | "rejected"
                                    | "declined"
                                    | "deprecated"
                                    | "draft"
                            )
                    })
                    || heading_blocks(words, &cell.text);
                if not_current && !vt.is_empty() || marks {
                    out.push(Blocker {
                        why: format!("in a row marked {} in the column {}", quoted(&cell.text), quoted(&h.text)),
                        carrier: Some(cell.range.clone()),
                    });
                }
            }
        }
        // A row whose Status says it was accepted is what was decided: a "Proposal" column holds it.
        let row_accepted = t.header.iter().enumerate().any(|(c, h)| {
            matches!(norm_tokens(&h.text).as_slice(), [w] if matches!(w.as_str(), "status" | "state" | "stage" | "decision" | "outcome"))
                && t.row.get(c).is_some_and(|cell| {
                    let v = norm_tokens(&cell.text);
                    // The cell is the verdict ("accepted", "done ✅"), not a sentence that mentions one.
                    let positive =
                        |w: &str| matches!(w, "accepted" | "approved" | "adopted" | "done" | "agreed" | "yes" | "shipped" | "implemented");
                    let first_positive = v.first().is_some_and(|w| positive(w)) || (v.is_empty() && cell.text.trim() == "✅");
                    first_positive
                        && v.len() <= 3
                        && !v.iter().any(|w| {
                            super::lexicon::is_negation(w)
                                || matches!(w.as_str(), "deferred" | "postponed" | "revisit" | "later" | "pending")
                        })
                })
        });
        let proposal_like = |h: &str| {
            let c: Vec<Vec<String>> = heading_cues(words, h).into_iter().chain(lead_in_cues(words, h)).collect();
            !c.is_empty()
                && c.iter().all(|c| {
                    c.len() == 1
                        && matches!(
                            c[0].as_str(),
                            "proposal"
                                | "proposals"
                                | "proposed"
                                | "idea"
                                | "ideas"
                                | "option"
                                | "options"
                                | "suggested"
                                | "candidates"
                                | "considered"
                        )
                })
        };
        if let Some(h) = t
            .column_header()
            .filter(|h| heading_blocks(words, &h.text) || lead_in_blocks(words, &h.text))
            .filter(|h| !(row_accepted && proposal_like(&h.text)))
        {
            out.push(Blocker { why: format!("in the table column {}", quoted(&h.text)), carrier: Some(h.range.clone()) });
        }
        if t.in_header {
            out.push(Blocker { why: "a table header, not a value".into(), carrier: None });
        }
    }
    if let Some(prev) = attributing_previous_sentence(body, ctx, quote) {
        out.push(Blocker { why: format!("continues the sentence before it: {}", quoted(&body[prev])), carrier: None });
    }
    // What the note says about the line as a whole: its status, a section's scope, a legend, a
    // speaker, a later correction (`gate::assertion`).
    out.extend(st.reading(words).blockers(st, ctx, quote, claim));
    out
}

/// The sentence holding the quote's start (with a footnote reference right after its stop), or
/// the quote itself outside any block.
fn quote_sentence(body: &str, ctx: &Context, quote: &Range<usize>) -> Range<usize> {
    let Some(block) = ctx.block.clone().filter(|b| b.start <= quote.start && quote.start <= b.end) else { return quote.clone() };
    let sents = couple::sentences(body, block);
    let first = sents.iter().find(|s| s.start <= quote.start && quote.start < s.end.max(s.start + 1));
    let last = sents.iter().rev().find(|s| s.start < quote.end.max(quote.start + 1) && quote.start < s.end.max(s.start + 1));
    match (first, last) {
        (Some(f), Some(l)) => f.start..l.end.max(quote.end),
        _ => quote.clone(),
    }
}

fn first_sentence_tokens(text: &str) -> Vec<String> {
    let sents = couple::sentences(text, 0..text.len());
    sents.first().map(|r| norm_tokens(&text[r.clone()])).unwrap_or_default()
}

/// The sentence before the quote's, when the quote's sentence opens with an anaphor ("It",
/// "This", "They", "The former") and that sentence attributes, conditions or hedges what it says.
fn attributing_previous_sentence(body: &str, ctx: &Context, quote: &Range<usize>) -> Option<Range<usize>> {
    let block = ctx.block.clone()?;
    if !(block.start <= quote.start && quote.start <= block.end) {
        return None;
    }
    let sents = couple::sentences(body, block);
    let i = sents.iter().position(|s| s.start <= quote.start && quote.start < s.end.max(s.start + 1))?;
    let prev = sents.get(i.checked_sub(1)?)?.clone();
    let toks: Vec<Tok> = lex(&body[sents[i].clone()], &[]);
    let w = |k: usize| toks.get(k).map_or("", |t| t.norm.as_str());
    // "He"/"She" after "The dermatologist suspects X" is the person, not what they suspect.
    // A demonstrative is a pronoun before a verb ("This happens", "That adds", "These are"),
    // a determiner before a noun ("These findings suggest …": a new subject).
    const AUX: &[&str] = &[
        "is", "was", "are", "were", "has", "had", "have", "will", "would", "can", "could", "may", "might", "must", "should", "means",
        "meant", "show", "suggest", "mean", "cause", "make", "keep", "add", "happen", "seem", "appear",
    ];
    let demonstrative = matches!(w(0), "this" | "that" | "these" | "those");
    let pronoun_use = match w(0) {
        "this" | "that" => AUX.contains(&w(1)) || (w(1).len() > 3 && w(1).ends_with('s') && !w(1).ends_with("ss")),
        "these" | "those" => AUX.contains(&w(1)),
        _ => true,
    };
    let opens_with_anaphor = (ANAPHORS.contains(&w(0)) && w(0) != "which" && (!demonstrative || pronoun_use))
        || w(0) == "they"
        || (w(0) == "such" && AUX.contains(&w(1)))
        || (w(0) == "the" && matches!(w(1), "former" | "latter"));
    if !opens_with_anaphor {
        return None;
    }
    let p: Vec<Tok> = lex(&body[prev.clone()], &[]);
    let carries = p.iter().enumerate().any(|(k, t)| {
        let n = t.norm.as_str();
        (SENTENCE_MARKERS.contains(&n) && !FACTIVE.contains(&n))
            || FALSITY.contains(&n)
            // "May" capitalised mid-sentence is the month.
            || matches!(n, "reported" | "ideally" | "hopefully")
            || (n == "report" && k > 0 && matches!(p[k - 1].norm.as_str(), "users" | "people" | "customers" | "some" | "many" | "they" | "we"))
            || (matches!(n, "may" | "might" | "could" | "would" | "should" | "scenario") && !(k > 0 && body[prev.clone()][t.range.clone()].starts_with(char::is_uppercase)))
            || (matches!(n, "worst" | "best") && p.get(k + 1).is_some_and(|c| c.norm == "case"))
    });
    carries.then_some(prev)
}

/// A claim that restates context units and then couples with a line, along the structure: the
/// leaf quote's index and range when it holds.
pub fn compose(
    claim: &str,
    st: &Structure<'_>,
    places: &[Vec<Range<usize>>],
    words: &ContextWords,
) -> Result<(usize, Range<usize>), String> {
    let body = st.text();
    let claim_skip = super::markup::unread(claim);
    let claim_toks: Vec<Tok> =
        lex(claim, &claim_skip).into_iter().filter(|t| !(t.kind == Kind::Word && super::GLUE.contains(&t.norm.as_str()))).collect();
    let mut why = "the quotes are not a line and the context it sits in".to_owned();
    for (i, leaf_places) in places.iter().enumerate() {
        for leaf in leaf_places {
            let ctx = st.context(leaf.clone());
            // Context units, in the order a claim restates them.
            // The note's own status, a section's scope line, a speaker's name, its headings and
            // lead-ins, in the note's order.
            let mut units: Vec<Range<usize>> = st.reading(words).carriers(leaf);
            units.extend(ctx.headings.iter().map(|h| h.range.clone()));
            units.extend(ctx.lead_ins.iter().map(|l| l.unit.range.clone()));
            units.sort_by_key(|u| (u.start, u.end));
            units.dedup();
            let mut leaf_cell = None;
            if let Some(t) = &ctx.table {
                if !t.in_header {
                    units.extend(t.row.iter().enumerate().filter(|(c, _)| *c != t.column).map(|(_, u)| u.range.clone()));
                    units.extend(t.column_header().map(|h| h.range.clone()));
                    leaf_cell = t.row.get(t.column).map(|u| u.range.clone());
                }
            }
            // A unit counts only when another quote (or the leaf's own, for a row) covers it whole.
            let covered = |u: &Range<usize>| {
                let toks = unit_tokens(body, u);
                let (Some(first), Some(last)) = (toks.first(), toks.last()) else { return false };
                places.iter().enumerate().any(|(j, ps)| {
                    ps.iter().any(|p| (j != i || ctx.table.is_some()) && p.start <= first.range.start && last.range.end <= p.end)
                })
            };
            let mut k = 0;
            let mut carried: Vec<Range<usize>> = Vec::new();
            // Overlapping units (a speaker's name inside the line's label "[09:05] oskar:"): the
            // one a quote covers counts, once.
            for u in units.iter().filter(|u| covered(u)) {
                if carried.iter().any(|c| c.start < u.end && u.start < c.end) {
                    continue;
                }
                let toks = unit_tokens(body, u);
                let matches = k + toks.len() <= claim_toks.len() && toks.iter().zip(&claim_toks[k..]).all(|(a, b)| a.norm == b.norm);
                if matches {
                    k += toks.len();
                    carried.push(u.clone());
                }
            }
            // "It is a myth that X" citing the "Myths" heading: a frame of the heading's own cue
            // word and function words only, in place of the heading's text.
            if carried.is_empty() {
                const FRAME: &[&str] =
                    &["it", "that", "listed", "under", "as", "one", "of", "among", "in", "section", "this", "note", "says"];
                // Cue phrases of each covered unit, stemmed; the frame must hold a whole one.
                let cued: Vec<(Range<usize>, Vec<Vec<String>>)> = units
                    .iter()
                    .filter(|u| covered(u))
                    .map(|u| {
                        let phrases = heading_cues(words, &body[u.clone()]).into_iter().chain(lead_in_cues(words, &body[u.clone()]));
                        (u.clone(), phrases.map(|p| p.iter().map(|w| stem(w)).collect()).collect::<Vec<Vec<String>>>())
                    })
                    .filter(|(_, c)| !c.is_empty())
                    .collect();
                let frame_len = claim_toks
                    .iter()
                    .take_while(|t| {
                        FRAME.contains(&t.norm.as_str()) || cued.iter().any(|(_, c)| c.iter().flatten().any(|w| *w == stem(&t.norm)))
                    })
                    .count();
                let frame: Vec<String> = claim_toks[..frame_len].iter().map(|t| stem(&t.norm)).collect();
                for (u, c) in &cued {
                    if c.iter().any(|p| has_phrase(&frame, p)) {
                        carried.push(u.clone());
                    }
                }
                k = frame_len;
            }
            if carried.is_empty() || k >= claim_toks.len() {
                continue;
            }
            // A value pairs with its own row: the row key is restated.
            if let (Some(t), Some(_)) = (&ctx.table, &leaf_cell) {
                if t.column > 0 && !t.row.first().is_some_and(|key| carried.contains(&key.range)) {
                    why = "the claim names a table value without its row".into();
                    continue;
                }
            }
            // A heading restated as the claim's subject ("Redis restarts nightly", no ":" after
            // it) must be the innermost heading, with nothing between it and the line.
            let heading_carried = ctx.headings.iter().any(|h| carried.contains(&h.range));
            let as_label =
                k > 0 && claim[claim_toks[k - 1].range.end..claim_toks[k].range.start].contains([':', '—', '–', '(', ',', '|', '-']);
            if heading_carried && !as_label && leaf_cell.is_none() {
                let innermost = ctx.headings.last().is_some_and(|h| carried.contains(&h.range));
                let after = ctx.headings.last().map_or(0, |h| h.range.end);
                let sentence = quote_sentence(body, &ctx, leaf);
                let between = &body[after.min(sentence.start)..sentence.start];
                let clear = !between.chars().any(char::is_alphanumeric) || ctx.lead_ins.iter().any(|l| carried.contains(&l.unit.range));
                if !innermost || !clear {
                    why = "the claim makes a heading the subject of a line that is not the first under it".into();
                    continue;
                }
            }
            let rest = &claim[claim_toks[k].range.start..];
            // "Redis: it restarts nightly" holds only when nothing stands between the restated
            // context and the sentence the pronoun opens: the context is its nearest antecedent.
            let pronoun = |w: &str| matches!(w, "it" | "its" | "they" | "this" | "these" | "those" | "he" | "she" | "that");
            // What the leaf's sentence says before the quote: its own subject, when the quote is
            // only the predicate ("It sits in the utility room" quoted from "sits").
            let sentence = quote_sentence(body, &ctx, leaf);
            let lead = sentence.start.min(leaf.start);
            let read = couple::readable(&body[lead..leaf.start]);
            // The line's own label counts as carried when a carried unit is in it: "Hale
            // (claimant):" when the claim restates "Hale".
            let labels: Vec<Range<usize>> = ctx
                .lead_ins
                .iter()
                .filter(|l| {
                    l.kind == LeadInKind::Label && carried.iter().any(|c| l.unit.range.start <= c.start && c.end <= l.unit.range.end)
                })
                .map(|l| l.unit.range.start..l.unit.range.end + 1)
                .collect();
            let before: Vec<Tok> = lex(&read, &[])
                .into_iter()
                .filter(|t| {
                    t.kind != Kind::Symbol
                        && !carried.iter().chain(&labels).any(|u| u.start <= lead + t.range.start && lead + t.range.end <= u.end)
                })
                .collect();
            // Table cells are units of their own: the row before a cell is not its subject.
            let before = if leaf_cell.is_some() { Vec::new() } else { before };
            if before.len() > 1 || before.first().is_some_and(|t| !pronoun(&t.norm)) {
                why = "the claim puts the context in place of the subject its sentence has".into();
                continue;
            }
            if pronoun(&claim_toks[k].norm) || !before.is_empty() {
                let last_unit = carried.iter().map(|u| u.end).max().unwrap_or(0);
                let between = &body[last_unit.min(sentence.start)..sentence.start.min(leaf.start)];
                if between.chars().any(char::is_alphanumeric) {
                    why = "the claim names a subject the quote only refers to, and the note puts another between them".into();
                    continue;
                }
            }
            let coupled = match &leaf_cell {
                // A cell is restated whole: its words are the rest of the claim, nothing more.
                Some(cell) => {
                    let toks = unit_tokens(body, cell);
                    let inside = toks.first().zip(toks.last()).is_some_and(|(f, l)| leaf.start <= f.range.start && l.range.end <= leaf.end);
                    // Cells to the right of it may follow, each whole and cited: "Dark mode: follows
                    // the system theme (done)".
                    let mut tail: Vec<&Tok> = Vec::new();
                    if let Some(t) = &ctx.table {
                        let mut at = k + toks.len();
                        for u in t.row.iter().skip(t.column + 1).filter(|u| covered(&u.range)) {
                            let ut = unit_tokens(body, &u.range);
                            // Set apart in the claim ("(done)", ", done"): not run into the number before it.
                            let set_apart = at > 0
                                && at < claim_toks.len()
                                && claim[claim_toks[at - 1].range.end..claim_toks[at].range.start].contains(['(', ',', ';', '—', '–', '|']);
                            if set_apart
                                && at + ut.len() <= claim_toks.len()
                                && !ut.is_empty()
                                && ut.iter().zip(&claim_toks[at..]).all(|(a, b)| a.norm == b.norm)
                            {
                                tail.extend(claim_toks[at..at + ut.len()].iter());
                                at += ut.len();
                            }
                        }
                    }
                    let ok = inside
                        && toks.len() + tail.len() == claim_toks.len() - k
                        && toks.iter().zip(&claim_toks[k..]).all(|(a, b)| a.norm == b.norm);
                    if ok {
                        Ok(())
                    } else {
                        Err("the claim's value is not the whole cell of that row and column".to_owned())
                    }
                }
                None => couple::couple(rest, body, leaf),
            };
            if let Err(e) = coupled {
                why = e;
                continue;
            }
            let left: Vec<Blocker> = blockers(st, &ctx, leaf, claim, words)
                .into_iter()
                .filter(|b| {
                    let overlaps = |c: &Range<usize>| carried.iter().any(|u| u.start < c.end && c.start < u.end);
                    let family = st.reading(words).note_carriers_like(b.carrier.as_ref());
                    b.carrier.as_ref().is_none_or(|c| !(overlaps(c) || family.iter().any(overlaps)))
                })
                .collect();
            if let Some(b) = left.first() {
                why = format!("the line is {}", b.why);
                continue;
            }
            return Ok((i, leaf.clone()));
        }
    }
    Err(why)
}

/// Content tokens of a unit of the note (glue, symbols and markup left out).
fn unit_tokens(body: &str, u: &Range<usize>) -> Vec<Tok> {
    let text = &body[u.clone()];
    let mut skip = super::markup::unread(text);
    skip.extend(
        super::markup::not_evidence(text)
            .into_iter()
            .filter(|(_, k)| matches!(k, super::markup::NotEvidence::Strikethrough | super::markup::NotEvidence::HtmlComment))
            .map(|(r, _)| r),
    );
    let mut toks: Vec<Tok> = lex(&body[u.clone()], &skip)
        .into_iter()
        .filter(|t| !(t.kind == Kind::Word && super::GLUE.contains(&t.norm.as_str())))
        .map(|mut t| {
            t.range = t.range.start + u.start..t.range.end + u.start;
            t
        })
        .collect();
    // An issue or item number before a title ("#412 Add YAML config support") is its label,
    // not words a claim must restate.
    if toks.len() >= 2 && toks[0].kind == Kind::Number && body[..toks[0].range.start].ends_with('#') {
        toks.remove(0);
    }
    toks
}

/// Distinct plain phrases of blockers, joined for one line of display.
pub fn why_of(blockers: &[Blocker]) -> String {
    let mut seen = HashSet::new();
    blockers.iter().filter(|b| seen.insert(b.why.clone())).map(|b| b.why.clone()).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(body: &str, quotes: &[&str]) -> Vec<Vec<Range<usize>>> {
        quotes.iter().map(|q| super::super::locate_all(body, q).into_iter().map(|(r, _)| r).collect()).collect()
    }

    #[test]
    fn compositions_follow_the_structure() {
        let body = "# Hiking kit\n\n## Myths\n\n- Cotton is fine for hiking.\n- Myth: you lose most of your heat through your head.\n\n## What works\n\n- Merino base layers stay warm in the rain.\n";
        let st = Structure::parse(body);
        let w = ContextWords::built_in();
        let both = places(body, &["Myths", "Cotton is fine for hiking."]);
        for claim in ["Myths: cotton is fine for hiking.", "It is a myth that cotton is fine for hiking"] {
            let r = compose(claim, &st, &both, &w);
            assert!(r.is_ok(), "{claim}: {r:?}");
        }
        // A frame with a negation, or words of its own, is not the heading restated.
        for claim in ["It is not a myth that cotton is fine for hiking", "Experts agree: cotton is fine for hiking"] {
            assert!(compose(claim, &st, &both, &w).is_err(), "{claim}");
        }
        // A table cell composes only with its own row and column.
        let t = "| Service | Team | p99 latency |\n|---|---|---|\n| billing-api | Payments | 180 ms |\n| search | Core | 95 ms |\n";
        let st = Structure::parse(t);
        let ok = compose(
            "billing-api (Payments): p99 latency is 180 ms",
            &st,
            &places(t, &["billing-api", "Payments", "p99 latency", "180 ms"]),
            &w,
        );
        assert!(ok.is_ok(), "{ok:?}");
        let wrong_row = compose("search: p99 latency is 180 ms", &st, &places(t, &["search", "p99 latency", "180 ms"]), &w);
        assert!(wrong_row.is_err());
        let wrong_column = compose("billing-api: Team is 180 ms", &st, &places(t, &["billing-api", "Team", "180 ms"]), &w);
        assert!(wrong_column.is_err());
    }

    #[test]
    fn the_built_in_words_parse_and_user_words_add_to_them() {
        let w = ContextWords::with_user(&[("headings".into(), vec!["Mythen".into()])]).unwrap();
        assert!(heading_blocks(&w, "Mythen und Fakten"));
        assert!(!heading_blocks(&ContextWords::built_in(), "Mythen und Fakten"));
        assert!(heading_blocks(&w, "Myths"));
        assert!(!heading_blocks(&w, "Old Town restaurants") && heading_blocks(&w, "Old setup (pre-2023)"));
        assert!(ContextWords::with_user(&[("nonsense".into(), vec!["x".into()])]).is_err());
    }
}
