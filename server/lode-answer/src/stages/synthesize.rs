//! Answer stage 2, *synthesize* (and *parse*): claims from the visible context. The extractive
//! synthesizer quotes sentences (restated with their note's context where the structure needs
//! it); an LLM gets redacted windows of the visible passages, may fetch pages it was shown, and
//! its reply is parsed into claims (`llm::parse_claims`) — an unusable reply falls back to the
//! extractive answer and says so.

use std::collections::{BTreeMap, HashMap};

use lode_core::extractive::{self, Source};
use lode_core::gate;
use lode_core::text::floor_char_boundary;
use lode_store::Store;

use crate::egress::{self, EgressRules};
use crate::llm::{self, LlmError};
use crate::{
    fetch_tool_schema, is_cancelled, merge_blocks, parent_window, run_tool, urls_in, window, AskConfig, AskError, ContextItem,
    DroppedClaim, FetchedSnapshot, Synthesizer, MAX_TOOL_ROUNDS, SYSTEM_PROMPT, TOOL_PROMPT, TOOL_TEXT,
};

pub(crate) struct Synthesized {
    pub claims: Vec<gate::Claim>,
    /// Items of the model's reply that were not claims, with why.
    pub problems: Vec<DroppedClaim>,
    /// Pages the model fetched with its tool, stored before it saw them: sources like the rest.
    pub fetched: Vec<FetchedSnapshot>,
    pub notice: Option<String>,
    /// The synthesizer's name as the answer reports it (with a fallback, if one happened).
    pub synthesizer: String,
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn synthesize(
    store: &Store,
    question: &str,
    cfg: &AskConfig,
    rules: &EgressRules,
    synth: &Synthesizer,
    items: &[ContextItem],
    visible: &[&ContextItem],
    bodies: &BTreeMap<String, String>,
    remote: bool,
    origin_notice: Option<String>,
) -> Result<Synthesized, AskError> {
    let cancelled = || is_cancelled(cfg);
    let extract = |visible: &[&ContextItem]| -> Result<Vec<gate::Claim>, AskError> {
        let sources: Vec<Source> = visible
            .iter()
            .map(|i| Source {
                version_id: &i.version_id,
                text: &i.text,
                heading: &i.heading,
                prose: matches!(i.kind.as_str(), "paragraph" | "quote"),
                is_heading: i.kind == "heading",
            })
            .collect();
        let weights = store.term_weights(&lode_core::query::terms(question))?;
        let claims = extractive::extract(question, &sources, &weights, &cfg.extract);
        Ok(extractive::with_context(question, claims, |vid| bodies.get(vid).map(String::as_str), &cfg.gate))
    };
    let mut notice = origin_notice;
    let mut synthesizer = synth.name();
    let mut problems: Vec<DroppedClaim> = Vec::new();
    // Pages the model fetched with its tool, stored before it saw them: sources like the rest.
    let mut fetched: Vec<FetchedSnapshot> = Vec::new();
    let claims = match synth {
        Synthesizer::Extractive => extract(visible)?,
        Synthesizer::Llm(llm) => {
            // Secrets are redacted in whole note bodies before any window is cut, so a window
            // cannot split a secret into halves that no pattern recognises.
            let sendable: BTreeMap<&String, window::Redacted> = bodies
                .iter()
                .map(|(vid, body)| (vid, if remote { window::Redacted::new(body) } else { window::Redacted::unchanged(body) }))
                .collect();
            // Passages sharing a parent send it once: windows of one version that overlap are
            // merged into one block (each item still cites its own range).
            let mut blocks: Vec<(String, std::ops::Range<usize>, Vec<&ContextItem>)> = Vec::new();
            for it in visible {
                let Some(body) = bodies.get(&it.version_id) else { continue };
                let w = parent_window(body, it, cfg.parent_window);
                blocks.push((it.version_id.clone(), w, vec![*it]));
            }
            blocks = merge_blocks(blocks);
            let mut labels: HashMap<String, String> = HashMap::new();
            // The question is egress too.
            let (q, mut redactions) = if remote { egress::redact_question(question) } else { (question.to_owned(), 0) };
            let mut user = format!("Question: {q}\n\nSources:\n");
            let mut sent: Vec<i64> = Vec::new();
            let mut counted: std::collections::HashSet<&String> = std::collections::HashSet::new();
            // What the model reads that may not leave the machine: a model that read it gets no
            // network tool, or its choice of URLs could carry it out (docs/security.md). Only a
            // local model sees such text (a remote one gets neither withheld notes nor secrets).
            let mut holds_withheld = visible.iter().any(|i| i.withheld.is_some()) || (!remote && egress::redact_question(question).1 > 0);
            for (n, (vid, range, its)) in blocks.iter().enumerate() {
                let label = format!("S{}", n + 1);
                labels.insert(label.clone(), vid.clone());
                let redacted = &sendable[vid];
                let text = redacted.window(range.clone());
                if !remote && !holds_withheld && egress::redact(text).1 > 0 {
                    holds_withheld = true;
                }
                if counted.insert(vid) {
                    redactions += redacted.count;
                }
                let it = its[0];
                let (title, r1) = if remote {
                    egress::redact(&format!("{} › {}", it.path, it.heading))
                } else {
                    (format!("{} › {}", it.path, it.heading), 0)
                };
                redactions += r1;
                user.push_str(&format!("\n[{label}] {title}\n{text}\n"));
                sent.extend(its.iter().map(|i| i.passage_id));
            }
            let tools = cfg.fetcher.as_ref().filter(|_| llm.tools && !holds_withheld);
            if llm.tools && cfg.fetcher.is_some() && holds_withheld {
                let why =
                    "the model was offered no web tool: its context holds text withheld from remote models (a no-egress note or a secret)";
                notice = Some(match notice.take() {
                    Some(n) => format!("{n}; {why}"),
                    None => why.to_owned(),
                });
            }
            if blocks.is_empty() && tools.is_none() {
                Vec::new()
            } else {
                let system = if tools.is_some() { format!("{SYSTEM_PROMPT} {TOOL_PROMPT}") } else { SYSTEM_PROMPT.to_owned() };
                let mut messages =
                    vec![serde_json::json!({"role": "system", "content": system}), serde_json::json!({"role": "user", "content": user})];
                let mut next_label = blocks.len() + 1;
                // The model may fetch only URLs it was shown: in the question, in sources that
                // may leave the machine, or in pages it fetched. A URL it composes itself could
                // carry note text out in its path or query.
                let mut allowed: std::collections::HashSet<String> = urls_in(question);
                for it in items.iter().filter(|i| i.withheld.is_none()) {
                    allowed.extend(urls_in(&it.text));
                }
                let mut logged_synthesis = false;
                // An unreachable endpoint is an error; an unusable answer is not: the extractive
                // synthesizer answers instead, and the answer says so.
                let mut final_content: Result<String, LlmError> = Err(LlmError::Malformed("no answer".into()));
                for round in 0..=MAX_TOOL_ROUNDS {
                    // The last round offers no tools: the model has to answer.
                    let offer = tools.filter(|_| round < MAX_TOOL_ROUNDS).map(|_| fetch_tool_schema());
                    let body = if offer.is_none() && round == 0 {
                        llm.request_body(&system, &user)
                    } else {
                        llm.request_body_with(&messages, offer.as_ref())
                    };
                    if remote {
                        let passages: &[i64] = if logged_synthesis { &[] } else { &sent };
                        store.log_egress(
                            &egress::destination(&llm.endpoint),
                            "synthesis",
                            passages,
                            body.len() as u64,
                            if logged_synthesis { 0 } else { redactions as u64 },
                        )?;
                        logged_synthesis = true;
                    }
                    let turn = match llm.turn_cancellable(&body, cfg.cancel.as_deref()) {
                        Ok(t) => t,
                        Err(e) => {
                            final_content = Err(e);
                            break;
                        }
                    };
                    let (Some(fetcher), Some(_), false) = (tools, &offer, turn.tool_calls.is_empty()) else {
                        final_content =
                            turn.content.ok_or_else(|| LlmError::Malformed("the model called a tool after its last turn".into()));
                        break;
                    };
                    messages.push(turn.message.clone());
                    for call in &turn.tool_calls {
                        if cancelled() {
                            return Err(AskError::Cancelled);
                        }
                        let reply = run_tool(store, rules, fetcher.as_ref(), call, &allowed, cfg.cancel.as_ref()).map(|snap| {
                            let label = format!("S{next_label}");
                            next_label += 1;
                            labels.insert(label.clone(), snap.version_id.clone());
                            let text = &snap.body[..floor_char_boundary(&snap.body, TOOL_TEXT.min(snap.body.len()))];
                            let reply = format!("[{label}] {}\n{text}", snap.url);
                            allowed.extend(urls_in(&snap.body));
                            fetched.push(snap);
                            reply
                        });
                        let content = reply.unwrap_or_else(|why| format!("fetch_url refused: {why}"));
                        messages.push(serde_json::json!({"role": "tool", "tool_call_id": call.id, "content": content}));
                    }
                }
                match final_content.and_then(|content| llm::parse_claims(&content, |l| labels.get(l).cloned())) {
                    Ok(parsed) => {
                        problems = parsed
                            .problems
                            .into_iter()
                            .map(|(text, reason)| DroppedClaim { text, step: gate::Step::Content, reason })
                            .collect();
                        parsed.claims
                    }
                    Err(LlmError::Malformed(why)) => {
                        notice = Some(format!("the model's answer could not be used ({why}); this is the extractive answer instead"));
                        synthesizer = format!("extractive (fallback from {})", synth.name());
                        extract(visible)?
                    }
                    Err(LlmError::Cancelled) => return Err(AskError::Cancelled),
                    Err(e) => return Err(e.into()),
                }
            }
        }
    };
    Ok(Synthesized { claims, problems, fetched, notice, synthesizer })
}
