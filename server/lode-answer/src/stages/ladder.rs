//! Answer stages 3 and 4, *gate* and *ladder*: every claim through the faithfulness gate
//! (`lode_core::gate`) over the versions the synthesizer was allowed to see, and each outcome
//! onto its rung — verified, evidence only (the cited sentences, never the model's wording), or
//! dropped — with citations pinned to exact byte ranges and their breadcrumbs; an abstention
//! with related passages when nothing survives. Rendering is `render.rs`.

use std::collections::{BTreeMap, HashMap};

use lode_core::gate::{self, Eligible, Outcome, ScorerSlot};
use lode_core::text::line_of;

use super::synthesize::Synthesized;
use crate::{is_cancelled, Answer, AnswerClaim, AskConfig, AskError, Citation, ContextItem, DroppedClaim, Related, Rung, Withheld};

#[allow(clippy::too_many_arguments)]
pub(crate) fn gate_and_ladder(
    question: &str,
    cfg: &AskConfig,
    items: &[ContextItem],
    visible: &[&ContextItem],
    mut bodies: BTreeMap<String, String>,
    withheld: Vec<Withheld>,
    remote: bool,
    synthesized: Synthesized,
    scorer: &mut ScorerSlot<'_>,
) -> Result<Answer, AskError> {
    let cancelled = || is_cancelled(cfg);
    let Synthesized { claims, problems, fetched, notice, synthesizer } = synthesized;
    for f in &fetched {
        bodies.entry(f.version_id.clone()).or_insert_with(|| f.body.clone());
    }
    let mut eligible: Eligible<'_> = HashMap::new();
    for vid in visible.iter().map(|it| &it.version_id).chain(fetched.iter().map(|f| &f.version_id)) {
        if let Some(b) = bodies.get(vid) {
            eligible.insert(vid.clone(), b.as_str());
        }
    }

    let mut path_of: HashMap<&str, (&str, i64, Option<i64>)> =
        items.iter().map(|i| (i.version_id.as_str(), (i.path.as_str(), i.note_id, i.fetched_at))).collect();
    for f in &fetched {
        path_of.insert(f.version_id.as_str(), (f.url.as_str(), f.note_id, Some(f.fetched_at)));
    }
    let shared: std::collections::HashSet<&str> =
        items.iter().filter(|i| i.source == lode_store::Source::Shared).map(|i| i.version_id.as_str()).collect();
    let mut answer = Answer {
        question: question.to_owned(),
        synthesizer,
        claims: Vec::new(),
        dropped: problems,
        abstained: false,
        abstain_reason: None,
        related: Vec::new(),
        withheld,
        notice,
    };
    let cite = |s: &gate::LocatedSpan, range: std::ops::Range<usize>| {
        let (path, note_id, fetched_at) = path_of.get(s.version_id.as_str()).copied().unwrap_or(("", 0, None));
        let body = bodies.get(&s.version_id).map(String::as_str).unwrap_or("");
        let is_shared = shared.contains(s.version_id.as_str());
        let snapshot = path.contains("://") && !is_shared;
        Citation {
            path: path.to_owned(),
            kind: if is_shared {
                lode_store::Source::Shared
            } else if snapshot {
                lode_store::Source::Snapshot
            } else {
                lode_store::Source::Note
            },
            url: snapshot.then(|| path.to_owned()),
            fetched_at: if snapshot { fetched_at } else { None },
            note_id,
            version_id: s.version_id.clone(),
            // Set by `answer_gathered`, which has the store.
            short_id: s.version_id.clone(),
            start: range.start,
            end: range.end,
            line: line_of(body.as_bytes(), range.start),
            quoted_span: body.get(range).unwrap_or(&s.quoted_span).to_owned(),
            context: s.context.clone(),
        }
    };
    if cancelled() {
        return Err(AskError::Cancelled);
    }
    for outcome in gate::check(claims, &eligible, scorer, &cfg.gate) {
        match outcome {
            Outcome::Verified(v) => {
                let citations = v.spans.iter().map(|s| cite(s, s.range.clone())).collect();
                answer.claims.push(AnswerClaim {
                    rung: Rung::Verified,
                    text: v.claim.text,
                    citations,
                    verification: Some(v.verification),
                    label: v.label,
                    unverified_text: None,
                    reason: None,
                    why: None,
                });
            }
            Outcome::EvidenceOnly(e) => {
                // Shown: each cited sentence verbatim (the quote widened to its sentence), cited
                // at that sentence; never the model's wording.
                let citations: Vec<Citation> = e.spans.iter().zip(&e.context).map(|(s, r)| cite(s, r.clone())).collect();
                let mut shown: Vec<String> = Vec::new();
                for c in &citations {
                    let t = lode_core::text::normalize_whitespace(&c.quoted_span);
                    if !shown.contains(&t) {
                        shown.push(t);
                    }
                }
                answer.claims.push(AnswerClaim {
                    rung: Rung::EvidenceOnly,
                    text: shown.join(" … "),
                    citations,
                    verification: None,
                    label: gate::evidence_only_label(&e.why),
                    unverified_text: Some(e.claim.text),
                    reason: Some(e.reason),
                    why: Some(e.why),
                });
            }
            Outcome::Dropped(d) => answer.dropped.push(DroppedClaim { text: d.claim.text, step: d.step, reason: d.reason }),
        }
    }
    // Verified claims first; evidence-only items after them, never mixed in between.
    answer.claims.sort_by_key(|c| c.rung != Rung::Verified);
    if answer.claims.is_empty() {
        answer.abstained = true;
        answer.abstain_reason = Some(if items.is_empty() {
            "your notes don't answer this: nothing matched the question".to_owned()
        } else if visible.is_empty() {
            "your notes may answer this, but every matching passage is withheld from remote synthesis".to_owned()
        } else if answer.dropped.is_empty() {
            "your notes don't answer this: no passage states an answer".to_owned()
        } else {
            format!("your notes don't answer this: {} proposed claims failed verification", answer.dropped.len())
        });
        answer.related = items
            .iter()
            .filter(|i| !(remote && i.withheld.is_some()))
            .take(3)
            .map(|i| Related {
                path: i.path.clone(),
                version_id: i.version_id.clone(),
                short_id: i.version_id.clone(),
                start: i.start,
                end: i.end,
                line: i.line,
                text: i.text.clone(),
            })
            .collect();
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lode_core::gate::{Claim, Support};

    const NOTE: &str = "# Kit\n\n## Myths\n\n- Cotton keeps you warm when wet.\n\n## Layers\n\nMerino wool keeps you warm when wet.\n";

    fn item(text: &str) -> ContextItem {
        let start = NOTE.find(text).unwrap();
        ContextItem {
            passage_id: 1,
            note_id: 1,
            path: "kit.md".into(),
            title: "Kit".into(),
            heading: "Kit".into(),
            version_id: "v1".into(),
            start,
            end: start + text.len(),
            line: 1,
            kind: "paragraph".into(),
            text: text.into(),
            parent_start: 0,
            parent_end: NOTE.len(),
            rank: 0,
            pinned: false,
            withheld: None,
            source: lode_store::Source::Note,
            fetched_at: None,
        }
    }

    fn claim(text: &str, quote: &str) -> Claim {
        Claim { text: text.into(), support: vec![Support { version_id: "v1".into(), quoted_span: quote.into() }] }
    }

    fn run(claims: Vec<Claim>) -> Answer {
        let items = vec![item("Merino wool keeps you warm when wet."), item("Cotton keeps you warm when wet.")];
        let visible: Vec<&ContextItem> = items.iter().collect();
        let bodies = BTreeMap::from([("v1".to_owned(), NOTE.to_owned())]);
        let s = Synthesized { claims, problems: Vec::new(), fetched: Vec::new(), notice: None, synthesizer: "test".into() };
        gate_and_ladder(
            "what keeps you warm?",
            &AskConfig::default(),
            &items,
            &visible,
            bodies,
            Vec::new(),
            false,
            s,
            &mut ScorerSlot::None,
        )
        .unwrap()
    }

    #[test]
    fn outcomes_land_on_their_rungs_verified_first() {
        let a = run(vec![
            claim("Cotton keeps you warm when wet", "Cotton keeps you warm when wet."),
            claim("Merino wool keeps you warm when wet", "Merino wool keeps you warm when wet."),
            claim("Silk keeps you warm", "Silk keeps you warm"),
        ]);
        let rungs: Vec<(Rung, &str)> = a.claims.iter().map(|c| (c.rung, c.text.as_str())).collect();
        assert_eq!(
            rungs,
            [(Rung::Verified, "Merino wool keeps you warm when wet"), (Rung::EvidenceOnly, "Cotton keeps you warm when wet.")]
        );
        assert_eq!(a.claims[1].why.as_deref(), Some("listed under “Myths”"));
        assert_eq!(a.claims[0].citations[0].context, "Kit › Layers");
        assert_eq!(a.dropped.len(), 1, "the fabricated quote is dropped at the span check");
        assert!(!a.abstained);
    }

    #[test]
    fn nothing_surviving_abstains_with_related_passages() {
        let a = run(vec![claim("Silk keeps you warm", "Silk keeps you warm")]);
        assert!(a.abstained && a.claims.is_empty());
        assert_eq!(a.related.len(), 2);
        assert!(a.abstain_reason.unwrap().contains("1 proposed claims failed verification"));
    }
}
