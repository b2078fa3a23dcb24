//! Cited answers: gathers context for a question (pinned note first, then retrieval), applies the
//! egress rules, asks a synthesizer (extractive by default, or an OpenAI-compatible LLM) for
//! claims, and passes every claim through the faithfulness gate. What is shown is what survived;
//! what was dropped is listed with the reason; when nothing survives, the answer abstains.

pub mod egress;
pub mod llm;
pub mod render;
mod stages;
pub mod window;

use std::collections::HashMap;

use lode_core::extractive::ExtractConfig;
use lode_core::gate::{self, GateConfig, ScorerSlot, Verification};
use lode_core::text::floor_char_boundary;
use lode_retrieval::{retrieve, Mode, Models, RetrievalConfig};
use lode_store::{SearchOptions, Store, StoreError};
use serde::Serialize;

use crate::egress::EgressRules;
use crate::llm::{LlmConfig, LlmError};

#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Retrieval(#[from] lode_retrieval::RetrievalError),
    #[error("no note at {0} to ask about")]
    UnknownNote(String),
    #[error("cancelled")]
    Cancelled,
}

/// Who writes the claims.
#[derive(Debug, Clone)]
pub enum Synthesizer {
    /// Verbatim sentences from the best passages (offline, no model).
    Extractive,
    Llm(LlmConfig),
}

impl Synthesizer {
    pub fn name(&self) -> String {
        match self {
            Synthesizer::Extractive => "extractive".into(),
            Synthesizer::Llm(c) => format!("llm:{}", c.model),
        }
    }

    fn is_remote(&self) -> bool {
        matches!(self, Synthesizer::Llm(c) if c.is_remote())
    }
}

#[derive(Debug, Clone)]
pub struct AskConfig {
    /// Passages retrieved for context (a pinned note's passages come on top, uncapped).
    pub context_limit: usize,
    /// Largest parent block sent to an LLM per passage, in bytes (small-to-big context).
    pub parent_window: usize,
    pub search: SearchOptions,
    pub gate: GateConfig,
    pub extract: ExtractConfig,
    /// The vault on disk, when known: egress flags are re-read from the notes about to be sent.
    pub vault_root: Option<std::path::PathBuf>,
    /// Set by the caller to stop the work: checked between retrieval, synthesis and the gate,
    /// and while waiting for an LLM.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Fetches and stores pages for the model's `fetch_url` tool (offered only to an LLM
    /// configured with `tools = true`).
    pub fetcher: Option<std::sync::Arc<dyn Fetcher>>,
    /// Snapshots not confirmed by a fetch for this many days rank as stale.
    pub stale_days: f64,
    /// The editor's open buffers (vault-relative path → text, unsaved edits included): a
    /// buffer's own marks withhold its note at once, before it is saved.
    pub buffers: std::sync::Arc<HashMap<String, String>>,
    /// Why nothing may go to a remote model now (the egress rules could not be read, e.g. a
    /// config edited into something that does not parse): every question is answered locally.
    pub egress_blocked: Option<String>,
    /// The answer's reader is off this machine (an MCP client): every item is judged as for a
    /// remote model, and what is withheld is not evidence at all, whichever model answers.
    pub audience_remote: bool,
    /// The team's shared tier, searched beside the user's notes.
    pub shared: Option<std::sync::Arc<lode_retrieval::shared::SharedTier>>,
}

/// What the `fetch_url` tool needs from its host: fetch a page within the fetch limits and
/// store it as a snapshot (discovered by an ask) *before* the model sees it, so what the model
/// quotes from it is checked against stored bytes like any note. The CLI and the server each
/// implement it through their own writer.
pub trait Fetcher: Send + Sync + std::fmt::Debug {
    /// Fetches `url`, stores it, and says where: committed before this returns, so the ask's
    /// own connection reads it. Once `cancel` is set, the fetch stops (its connection closed)
    /// and nothing is stored.
    fn fetch_snapshot(&self, url: &str, cancel: Option<&std::sync::Arc<std::sync::atomic::AtomicBool>>) -> Result<StoredPage, String>;
}

/// Where a fetched page was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPage {
    /// After redirects.
    pub final_url: String,
    pub note_id: i64,
    pub version_id: String,
}

/// A page the tool fetched and stored.
#[derive(Debug, Clone)]
pub struct FetchedSnapshot {
    pub url: String,
    /// After redirects: the no-egress domains are checked on it too.
    pub final_url: String,
    pub note_id: i64,
    pub version_id: String,
    pub body: String,
    pub fetched_at: i64,
}

impl Default for AskConfig {
    fn default() -> Self {
        AskConfig {
            context_limit: 8,
            parent_window: 1500,
            search: SearchOptions::default(),
            gate: GateConfig::default(),
            extract: ExtractConfig::default(),
            vault_root: None,
            cancel: None,
            fetcher: None,
            stale_days: 30.0,
            buffers: Default::default(),
            egress_blocked: None,
            audience_remote: false,
            shared: None,
        }
    }
}

/// One retrieved passage with what the answer needs to cite it.
#[derive(Debug, Clone, Serialize)]
pub struct ContextItem {
    pub passage_id: i64,
    pub note_id: i64,
    pub path: String,
    pub title: String,
    pub heading: String,
    pub version_id: String,
    pub start: usize,
    pub end: usize,
    pub line: usize,
    pub kind: String,
    pub text: String,
    pub parent_start: usize,
    pub parent_end: usize,
    /// Position in the context, best first (pinned passages lead).
    pub rank: usize,
    /// Part of the note the user pinned ("ask about this note").
    pub pinned: bool,
    /// Why this item may not go to a remote model, if it may not.
    pub withheld: Option<String>,
    /// A note, or an external's snapshot (`path` is then its URL).
    #[serde(rename = "source")]
    pub source: lode_store::Source,
    /// When the snapshot's text was first fetched (unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Citation {
    /// The cited note's path, or the URL of the cited snapshot.
    pub path: String,
    /// `note` or `snapshot`.
    pub kind: lode_store::Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// When the cited snapshot's text was first fetched (unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<i64>,
    pub note_id: i64,
    pub version_id: String,
    /// The id written in citation links: `version_id`'s first 12 hex digits, longer only
    /// where another version shares them (`Store::short_version_id`).
    pub short_id: String,
    pub start: usize,
    pub end: usize,
    pub line: usize,
    pub quoted_span: String,
    /// What a reader sees around the quote in its note: `Hiking kit › Myths`, `Launch
    /// checklist › [ ] open task`, `table: row billing-api, column p99 latency`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub context: String,
}

/// Which rung of the display ladder an item of the answer stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rung {
    /// The claim's wording is verified (coupled with a quote, or entailed by it).
    Verified,
    /// The claim's quotes are real evidence but its wording is not verified: the evidence is
    /// shown verbatim (whole sentences), never the model's sentence.
    EvidenceOnly,
}

#[derive(Debug, Clone, Serialize)]
pub struct AnswerClaim {
    pub rung: Rung,
    /// What is shown: the verified claim, or (evidence only) the cited sentences verbatim.
    pub text: String,
    pub citations: Vec<Citation>,
    /// How the wording was verified; `None` for evidence only.
    pub verification: Option<Verification>,
    /// "verified", "verified (entailed 0.93)", "evidence only — …".
    pub label: String,
    /// Evidence only: what the model wrote, kept for inspection, never displayed as an answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified_text: Option<String>,
    /// Evidence only: why the wording was not verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Evidence only: the same in one plain phrase ("listed under “Myths”", "an open task").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DroppedClaim {
    pub text: String,
    pub step: gate::Step,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Related {
    pub path: String,
    pub version_id: String,
    /// As in [`Citation::short_id`].
    pub short_id: String,
    pub start: usize,
    pub end: usize,
    pub line: usize,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Withheld {
    pub path: String,
    pub passage_id: i64,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub question: String,
    pub synthesizer: String,
    pub claims: Vec<AnswerClaim>,
    pub dropped: Vec<DroppedClaim>,
    pub abstained: bool,
    pub abstain_reason: Option<String>,
    /// On abstention: the best passages found, shown as related, not as an answer.
    pub related: Vec<Related>,
    /// Present in the notes, withheld from remote synthesis.
    pub withheld: Vec<Withheld>,
    /// Something the reader should know about how this answer was made (a fallback, a refusal
    /// to send the question).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// Retrieves context: every passage of the pinned note first (on purpose uncapped), then the
/// best passages for the question — hybrid when an embedder and vector index are given, else
/// lexical — each tagged with the egress rule that withholds it, if any.
pub fn gather(
    store: &Store,
    question: &str,
    pinned: Option<&str>,
    cfg: &AskConfig,
    rules: &EgressRules,
    models: Models<'_>,
) -> Result<Vec<ContextItem>, AskError> {
    gather_noting(store, question, pinned, cfg, rules, models).map(|(items, _)| items)
}

/// What went without while gathering: the dense leg (the context is then lexical: a caller that
/// owns the vector table checks and mends it) and the shared tier (the context is then the
/// user's own notes).
#[derive(Debug, Default, Clone)]
pub struct Shortfalls {
    pub dense_failed: Option<String>,
    pub shared_failed: Option<String>,
}

impl Shortfalls {
    /// Says in `answer` that the shared tier was not searched, when it was not.
    pub fn tell(&self, answer: &mut Answer) {
        if let Some(why) = &self.shared_failed {
            let said = format!("The team's shared index could not be searched ({why}); this answer comes from your own notes only.");
            answer.notice = Some(match answer.notice.take() {
                Some(n) => format!("{n} {said}"),
                None => said,
            });
        }
    }
}

/// [`gather`], and what it had to go without.
pub fn gather_noting(
    store: &Store,
    question: &str,
    pinned: Option<&str>,
    cfg: &AskConfig,
    rules: &EgressRules,
    models: Models<'_>,
) -> Result<(Vec<ContextItem>, Shortfalls), AskError> {
    let mut items: Vec<ContextItem> = Vec::new();
    let mut meta_cache: HashMap<i64, Option<String>> = HashMap::new();
    let mut withheld = |store: &Store, note_id: i64, path: &str| -> Result<Option<String>, AskError> {
        if let Some(w) = meta_cache.get(&note_id) {
            return Ok(w.clone());
        }
        let w = rules.withheld_because(path, &store.note_meta(note_id)?);
        meta_cache.insert(note_id, w.clone());
        Ok(w)
    };
    if let Some(path) = pinned {
        let rows = store.passages_of(path)?;
        if rows.is_empty() && store.head_of(path)?.is_none() {
            return Err(AskError::UnknownNote(path.to_owned()));
        }
        let title = store.notes()?.into_iter().find(|n| n.path == path).map(|n| n.title).unwrap_or_default();
        for p in rows {
            let w = withheld(store, p.note_id, path)?;
            items.push(ContextItem {
                passage_id: p.id,
                note_id: p.note_id,
                path: path.to_owned(),
                title: title.clone(),
                heading: p.heading,
                version_id: p.version_id,
                start: p.start,
                end: p.end,
                line: p.line,
                kind: p.kind,
                text: p.text,
                parent_start: p.parent_start,
                parent_end: p.parent_end,
                rank: items.len(),
                pinned: true,
                withheld: w,
                source: lode_store::Source::Note,
                fetched_at: None,
            });
        }
    }
    // A configured reranker reranks whatever was retrieved, fused or lexical only.
    let mode = match (models.embedder.is_some() && models.index.is_some(), models.reranker.is_some()) {
        (_, true) => Mode::Rerank,
        (true, false) => Mode::Hybrid,
        (false, false) => Mode::Lexical,
    };
    let (shared, shared_unreadable) = match cfg.shared.as_ref().map(|t| t.get()) {
        Some(Ok(ix)) => (Some(ix), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    let rcfg = RetrievalConfig {
        shared,
        limit: cfg.context_limit,
        search: SearchOptions { limit: cfg.context_limit, snippets: false, ..cfg.search.clone() },
        stale_days: cfg.stale_days,
        cancel: cfg.cancel.clone(),
        ..RetrievalConfig::default()
    };
    let retrieved = retrieve(store, question, mode, models, &rcfg).map_err(|e| match e {
        lode_retrieval::RetrievalError::Cancelled => AskError::Cancelled,
        e => AskError::Retrieval(e),
    })?;
    if let (true, Some(tier), Some(why)) = (retrieved.shared_down, &cfg.shared, &retrieved.shared_failed) {
        tier.failed_reading(why);
    }
    let shortfalls = Shortfalls { dense_failed: retrieved.dense_failed, shared_failed: retrieved.shared_failed.or(shared_unreadable) };
    for h in retrieved.hits.into_iter().map(|r| r.hit) {
        if items.iter().any(|i| i.passage_id == h.passage_id) {
            continue;
        }
        // A shared passage: the member's rules on its path in the published vault and on its
        // frontmatter (the publisher's rules kept what they withhold out of the tier).
        let w = match &h.shared {
            Some(o) => rules.withheld_because(&o.rel, &o.meta),
            None => withheld(store, h.note_id, &h.path)?,
        };
        items.push(ContextItem {
            passage_id: h.passage_id,
            note_id: h.note_id,
            path: h.path,
            title: h.title,
            heading: h.heading,
            version_id: h.version_id,
            start: h.start,
            end: h.end,
            line: h.line,
            kind: h.kind,
            text: h.text,
            parent_start: h.parent_start,
            parent_end: h.parent_end,
            rank: items.len(),
            pinned: false,
            withheld: w,
            source: h.source,
            fetched_at: h.fetched_at,
        });
    }
    Ok((items, shortfalls))
}

/// The context block sent for an item: its parent block, cut to `window` bytes around the
/// passage on line boundaries, so the passage is always inside it.
fn parent_window(body: &str, item: &ContextItem, window: usize) -> std::ops::Range<usize> {
    let (ps, pe) = (item.parent_start.min(body.len()), item.parent_end.min(body.len()));
    if pe.saturating_sub(ps) <= window {
        return floor_char_boundary(body, ps)..floor_char_boundary(body, pe);
    }
    let spare = window.saturating_sub(item.end - item.start) / 2;
    let mut s = item.start.saturating_sub(spare).max(ps);
    let mut e = (item.end + spare).min(pe);
    if let Some(nl) = body[..floor_char_boundary(body, s)].rfind('\n') {
        if nl + 1 >= ps && s - (nl + 1) < 200 {
            s = nl + 1;
        }
    }
    if let Some(nl) = body[floor_char_boundary(body, e)..].find('\n') {
        if e + nl <= pe && nl < 200 {
            e += nl;
        }
    }
    floor_char_boundary(body, s)..floor_char_boundary(body, e)
}

/// Merges overlapping windows of the same version, keeping the order in which blocks first
/// appear (the rank of their best passage).
fn merge_blocks<'a>(
    blocks: Vec<(String, std::ops::Range<usize>, Vec<&'a ContextItem>)>,
) -> Vec<(String, std::ops::Range<usize>, Vec<&'a ContextItem>)> {
    let mut out: Vec<(String, std::ops::Range<usize>, Vec<&'a ContextItem>)> = Vec::new();
    for (vid, range, items) in blocks {
        out.push((vid, range, items));
        // Fold the newest block into any earlier one of the same version it touches, repeatedly.
        loop {
            let last = out.len() - 1;
            let Some(j) =
                (0..last).find(|&j| out[j].0 == out[last].0 && out[j].1.start <= out[last].1.end && out[last].1.start <= out[j].1.end)
            else {
                break;
            };
            let (_, r, its) = out.remove(last);
            out[j].1 = out[j].1.start.min(r.start)..out[j].1.end.max(r.end);
            out[j].2.extend(its);
            // The grown block may now touch another one: move it last and check again.
            let grown = out.remove(j);
            out.insert(out.len(), grown);
        }
    }
    out.sort_by_key(|(_, _, its)| its.iter().map(|i| i.rank).min().unwrap_or(usize::MAX));
    out
}

const SYSTEM_PROMPT: &str = "You answer questions using only the numbered sources, which are excerpts of the user's own notes. \
Reply with JSON only, in this shape: {\"claims\": [{\"text\": \"one factual statement\", \"support\": [{\"source\": \"S1\", \"quote\": \"words copied exactly from that source\"}]}]}. \
Each claim is one statement. Each quote must be copied character for character from the source it names: a sentence or a contiguous part of one. \
If the sources do not answer the question, reply {\"claims\": []}. Add nothing else: no confidence, no commentary.";

const TOOL_PROMPT: &str = "When the sources do not answer the question and a web page would, you may call fetch_url with that page's URL; \
its text comes back as a new numbered source, which you cite like the others. Fetch only pages you name exactly; never put note text in a URL.";

/// Tool rounds in one answer (each may hold up to `llm::MAX_TOOL_CALLS` calls).
const MAX_TOOL_ROUNDS: usize = 2;
/// Bytes of a fetched page the model is shown (its whole text is stored and checkable).
const TOOL_TEXT: usize = 6000;

fn fetch_tool_schema() -> serde_json::Value {
    serde_json::json!([{
        "type": "function",
        "function": {
            "name": "fetch_url",
            "description": "Fetch one web page (http or https) by its exact URL. Returns its readable text as a new numbered source.",
            "parameters": {
                "type": "object",
                "properties": {"url": {"type": "string", "description": "The page's http or https URL"}},
                "required": ["url"]
            }
        }
    }])
}

/// Runs one tool call: checks it (a known tool, an http(s) URL with no secret in it, not a
/// no-egress domain; a refused call sends nothing), records the request as an egress event,
/// then has the host fetch and store the page.
fn run_tool(
    store: &Store,
    rules: &EgressRules,
    fetcher: &dyn Fetcher,
    call: &llm::ToolCall,
    allowed: &std::collections::HashSet<String>,
    cancel: Option<&std::sync::Arc<std::sync::atomic::AtomicBool>>,
) -> Result<FetchedSnapshot, String> {
    if call.name != "fetch_url" {
        return Err(format!("unknown tool {:?}; the only tool is fetch_url", call.name.chars().take(40).collect::<String>()));
    }
    let args: serde_json::Value =
        serde_json::from_str(&call.arguments).map_err(|_| "arguments must be JSON: {\"url\": \"https://…\"}".to_owned())?;
    let url = args.get("url").and_then(|u| u.as_str()).map(str::trim).filter(|u| !u.is_empty()).ok_or("arguments must name a url")?;
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a URL has no spaces or control characters".into());
    }
    // The URL is what leaves the machine: a model must not carry note text out in it.
    let (_, secrets) = egress::redact(url);
    let host = url::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .and_then(|u| u.host_str().map(str::to_owned))
        .ok_or("only http and https URLs are fetched")?;
    if secrets > 0 {
        return Err("the URL contains something that looks like a secret; nothing fetched".into());
    }
    if let Some(d) = rules.domain_withheld(url) {
        return Err(format!("{d} is a no-egress domain; nothing fetched"));
    }
    if !allowed.contains(url.split('#').next().unwrap_or(url)) {
        return Err("only a URL that appears in the question, the sources or a fetched page can be fetched".into());
    }
    store
        .log_egress(&host, "tool", &[], url.len() as u64, 0)
        .map_err(|e| format!("the egress log cannot be written ({e}); nothing fetched"))?;
    let page = fetcher.fetch_snapshot(url, cancel)?;
    if let Some(d) = rules.domain_withheld(&page.final_url) {
        return Err(format!("the page redirected to {d}, a no-egress domain; its text is withheld"));
    }
    let body = store.version_body(&page.version_id).map_err(|e| e.to_string())?.ok_or("the stored snapshot is missing")?;
    let info = store.external_brief(url).map_err(|e| e.to_string())?;
    Ok(FetchedSnapshot {
        url: url.to_owned(),
        final_url: page.final_url,
        note_id: page.note_id,
        version_id: page.version_id,
        body: String::from_utf8_lossy(&body).into_owned(),
        fetched_at: info.fetched_at.unwrap_or_default(),
    })
}

/// The http(s) URLs written in `text`, without a `#fragment` or trailing punctuation.
fn urls_in(text: &str) -> std::collections::HashSet<String> {
    static URL: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = URL.get_or_init(|| regex::Regex::new(r#"https?://[^\s<>()\[\]"'`]+"#).expect("a valid pattern"));
    re.find_iter(text)
        .map(|m| {
            let u = m.as_str().split('#').next().unwrap_or_default();
            u.trim_end_matches(['.', ',', ';', ':', '!', '?', '*', '_']).to_owned()
        })
        .collect()
}

/// Answers `question` from the store. The gate runs on whatever the synthesizer says.
#[allow(clippy::too_many_arguments)]
pub fn ask(
    store: &Store,
    question: &str,
    pinned: Option<&str>,
    cfg: &AskConfig,
    rules: &EgressRules,
    synth: &Synthesizer,
    models: Models<'_>,
    scorer: &mut ScorerSlot<'_>,
) -> Result<Answer, AskError> {
    ask_from(store, question, None, pinned, cfg, rules, synth, models, scorer)
}

/// [`ask`], for a question taken from the note at `origin` (a line or a selection of it). The
/// question is egress too: when `origin` may not leave the machine, a remote synthesizer is not
/// used and the extractive one answers instead, with a notice saying so.
#[allow(clippy::too_many_arguments)]
pub fn ask_from(
    store: &Store,
    question: &str,
    origin: Option<&str>,
    pinned: Option<&str>,
    cfg: &AskConfig,
    rules: &EgressRules,
    synth: &Synthesizer,
    models: Models<'_>,
    scorer: &mut ScorerSlot<'_>,
) -> Result<Answer, AskError> {
    if is_cancelled(cfg) {
        return Err(AskError::Cancelled);
    }
    let (items, shortfalls) = gather_noting(store, question, pinned, cfg, rules, models)?;
    let mut answer = answer_gathered(store, question, origin, cfg, rules, synth, items, scorer)?;
    shortfalls.tell(&mut answer);
    Ok(answer)
}

fn is_cancelled(cfg: &AskConfig) -> bool {
    cfg.cancel.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst))
}

/// The second half of [`ask_from`]: egress, synthesis and the gate over context [`gather`]ed
/// already. A caller that lends the models only for retrieval (the language server: the
/// embedder is shared with the vector thread) gathers, gives them back, then calls this, so no
/// lock on a model is held through synthesis and a remote model's answer.
#[allow(clippy::too_many_arguments)]
pub fn answer_gathered(
    store: &Store,
    question: &str,
    origin: Option<&str>,
    cfg: &AskConfig,
    rules: &EgressRules,
    synth: &Synthesizer,
    mut items: Vec<ContextItem>,
    scorer: &mut ScorerSlot<'_>,
) -> Result<Answer, AskError> {
    let mut w = stages::withhold::withhold(store, origin, cfg, rules, synth, &mut items)?;
    // For a reader off the machine what is withheld is no evidence at all, and is neither named
    // nor counted: a count that follows the question would tell the reader which words the
    // withheld notes hold.
    if cfg.audience_remote {
        items.retain(|i| i.withheld.is_none());
        w.withheld.clear();
    }
    let visible: Vec<&ContextItem> = items.iter().filter(|i| !(w.remote && i.withheld.is_some())).collect();
    let synthesized =
        stages::synthesize::synthesize(store, question, cfg, rules, w.synth, &items, &visible, &w.bodies, w.remote, w.notice)?;
    let mut answer = stages::ladder::gate_and_ladder(question, cfg, &items, &visible, w.bodies, w.withheld, w.remote, synthesized, scorer)?;
    for c in answer.claims.iter_mut().flat_map(|c| c.citations.iter_mut()) {
        c.short_id = store.short_version_id(&c.version_id)?;
    }
    for r in &mut answer.related {
        r.short_id = store.short_version_id(&r.version_id)?;
    }
    Ok(answer)
}

/// Why the note at `path` may not leave the machine: its rules, its indexed metadata, its open
/// buffer and its frontmatter on disk now. Fails closed: metadata that cannot be read withholds
/// the note.
fn withheld_note(store: &Store, rules: &EgressRules, cfg: &AskConfig, path: &str) -> Option<String> {
    let indexed = store.note_id(path);
    let meta = match indexed {
        Ok(Some(id)) => match store.note_meta(id) {
            Ok(m) => m,
            Err(e) => return Some(format!("its metadata could not be read ({e}); withheld to be safe")),
        },
        Ok(None) => serde_json::Map::new(),
        Err(e) => return Some(format!("its metadata could not be read ({e}); withheld to be safe")),
    };
    rules.withheld_because(path, &meta).or_else(|| Live::new(cfg, rules).withheld(path, None, false))
}

/// Why the note at `path` (a passage of it, `sent`: the exact bytes about to leave) may not be
/// given to a reader off this machine, if so: the same checks as for a remote model — the
/// path rules, the index's metadata, its open buffer, its file on disk now (gone from its
/// indexed path: withheld), nested vaults' rules, and a page linked only from withheld notes.
/// Fails closed. For doors whose reader is off the machine (an MCP client).
pub fn withheld_for_remote(store: &Store, rules: &EgressRules, cfg: &AskConfig, path: &str, sent: Option<&str>) -> Option<String> {
    if let Some(why) = &cfg.egress_blocked {
        return Some(format!("nothing may leave this machine now ({why})"));
    }
    if let Some(why) = withheld_note(store, rules, cfg, path) {
        return Some(why);
    }
    let mut live = Live::new(cfg, rules);
    if let Some(why) = live.withheld(path, sent, true) {
        return Some(why);
    }
    if path.contains("://") {
        return stages::withhold::linked_only_from_withheld(store, &mut live, path);
    }
    None
}

/// What decides egress *now*, beyond the index: the editor's open buffers, the note's file on
/// disk (where it is now, what its frontmatter says now) and nested vaults' rules. One per
/// question, so nested configs are read once per question and never cached past it.
pub(crate) struct Live<'a> {
    rules: &'a EgressRules,
    root: Option<&'a std::path::Path>,
    buffers: &'a HashMap<String, String>,
    nested: Option<egress::NestedRules>,
}

impl<'a> Live<'a> {
    pub(crate) fn rules(&self) -> &EgressRules {
        self.rules
    }

    pub(crate) fn new(cfg: &'a AskConfig, rules: &'a EgressRules) -> Live<'a> {
        let root = cfg.vault_root.as_deref();
        Live { rules, root, buffers: &cfg.buffers, nested: root.map(egress::NestedRules::new) }
    }

    /// Why the note at `path` may not leave the machine now: the bytes about to be sent
    /// (`sent`), its open buffer, a nested vault's rules, and its file on disk. With
    /// `must_exist`, a note whose file is gone from its indexed path (moved, renamed, deleted
    /// since it was indexed) is withheld: where it went, and so which rules hold for it, is
    /// unknown until the vault is indexed again. Reading fails closed.
    pub(crate) fn withheld(&mut self, path: &str, sent: Option<&str>, must_exist: bool) -> Option<String> {
        if let Some(why) = sent.and_then(|t| self.rules.note_withheld(path, t)) {
            return Some(why);
        }
        if let Some(why) = self.buffers.get(path).and_then(|b| egress::marks::read(b).local) {
            return Some(format!("{why} in the editor's unsaved buffer"));
        }
        if path.contains("://") {
            return None; // a snapshot has no file; its rules were read from the index
        }
        let root = self.root?;
        if let Some(why) = self.nested.as_mut().and_then(|n| n.withheld(path)) {
            return Some(why);
        }
        let file = root.join(path);
        let text = match lode_store::vault::read_note_file(root, path, lode_store::vault::DEFAULT_MAX_FILE_BYTES) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            // An open buffer does not vouch for the file: editors keep a moved file's tab open.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return must_exist.then(|| {
                    format!("its file is no longer at {path} (moved, renamed or deleted since it was indexed); withheld until the vault is indexed again")
                });
            }
            Err(e) => return Some(format!("its file could not be read ({e}); withheld to be safe")),
        };
        if let Some(why) = egress::marks::read(&text).local {
            return Some(format!("{why} (in the file on disk now)"));
        }
        // Through a link, the file may live where other rules hold.
        if let (Ok(real), Ok(real_root)) = (file.canonicalize(), root.canonicalize()) {
            if let Ok(rel) = real.strip_prefix(&real_root) {
                let rel = rel.to_string_lossy().replace('\\', "/");
                if rel != path {
                    if let Some(why) = self.rules.path_withheld(&rel).or_else(|| self.nested.as_mut().and_then(|n| n.withheld(&rel))) {
                        return Some(format!("{why} (it is a link to {rel})"));
                    }
                }
            }
        }
        None
    }
}

/// The frontmatter of a note body as metadata (empty when it has none).
pub fn frontmatter_of(body: &str) -> serde_json::Map<String, serde_json::Value> {
    let body = body.trim_start_matches('\u{feff}');
    let mut map = serde_json::Map::new();
    let Some(fence) = ["---", "+++"].into_iter().find(|f| body.starts_with(f) && body[3..].starts_with(['\n', '\r'])) else {
        return map;
    };
    let mut end = None;
    let mut pos = 0;
    for (n, line) in body.split_inclusive('\n').enumerate() {
        if n > 0 && (line.trim_end() == fence || (fence == "---" && line.trim_end() == "...")) {
            end = Some(pos + line.len());
            break;
        }
        pos += line.len();
    }
    let Some(end) = end else { return map };
    for (k, v) in lode_core::frontmatter::parse(&body[..end]) {
        map.insert(k, serde_json::Value::String(v));
    }
    map
}
