//! Cited answers: gathers context for a question (pinned note first, then retrieval), applies the
//! egress rules, asks a synthesizer (extractive by default, or an OpenAI-compatible LLM) for
//! claims, and passes every claim through the faithfulness gate. What is shown is what survived;
//! what was dropped is listed with the reason; when nothing survives, the answer abstains.

pub mod egress;
pub mod llm;
pub mod render;
pub mod window;

use std::collections::{BTreeMap, HashMap};

use lode_core::extractive::{self, ExtractConfig, Source};
use lode_core::gate::{self, Eligible, GateConfig, Outcome, ScorerSlot, Verification};
use lode_core::text::{floor_char_boundary, line_of};
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
    /// "quoted & coupled", "entailed (0.93)", "evidence only — …".
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
    let mode = if models.embedder.is_some() && models.index.is_some() {
        if models.reranker.is_some() { Mode::Rerank } else { Mode::Hybrid }
    } else {
        Mode::Lexical
    };
    let rcfg = RetrievalConfig {
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
    for h in retrieved.hits.into_iter().map(|r| r.hit) {
        if items.iter().any(|i| i.passage_id == h.passage_id) {
            continue;
        }
        let w = withheld(store, h.note_id, &h.path)?;
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
    Ok(items)
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
            let Some(j) = (0..last).find(|&j| out[j].0 == out[last].0 && out[j].1.start <= out[last].1.end && out[last].1.start <= out[j].1.end) else {
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
    let args: serde_json::Value = serde_json::from_str(&call.arguments).map_err(|_| "arguments must be JSON: {\"url\": \"https://…\"}".to_owned())?;
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
    let items = gather(store, question, pinned, cfg, rules, models)?;
    answer_gathered(store, question, origin, cfg, rules, synth, items, scorer)
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
    let mut origin_notice = None;
    let local = Synthesizer::Extractive;
    let mut synth = synth;
    if synth.is_remote() {
        if let Some(path) = origin {
            if let Some(why) = withheld_note(store, rules, cfg, path) {
                origin_notice = Some(format!(
                    "the question comes from {path}, which may not leave this machine ({why}): answered locally with the extractive synthesizer"
                ));
                synth = &local;
            }
        }
    }
    // The rest: context, egress, synthesis, the gate.
    let cancelled = || is_cancelled(cfg);
    if cancelled() {
        return Err(AskError::Cancelled);
    }
    let remote = synth.is_remote();

    // Bodies of every version in context; only those the synthesizer may see are eligible.
    let mut bodies: BTreeMap<String, String> = BTreeMap::new();
    for it in &items {
        if !bodies.contains_key(&it.version_id) {
            if let Some(b) = store.version_body(&it.version_id)? {
                bodies.insert(it.version_id.clone(), String::from_utf8_lossy(&b).into_owned());
            }
        }
    }
    if remote {
        // The index's metadata may be stale: the flags in the exact bytes about to be sent, and
        // in the note on disk now, count too.
        let mut fresh: HashMap<(String, String), Option<String>> = HashMap::new();
        for it in items.iter_mut().filter(|i| i.withheld.is_none()) {
            let key = (it.path.clone(), it.version_id.clone());
            if !fresh.contains_key(&key) {
                let w = bodies
                    .get(&it.version_id)
                    .and_then(|b| rules.withheld_because(&it.path, &frontmatter_of(b)))
                    .or_else(|| on_disk_withheld(cfg.vault_root.as_deref(), rules, &it.path));
                fresh.insert(key.clone(), w);
            }
            it.withheld = fresh[&key].clone();
        }
    }
    let visible: Vec<&ContextItem> = items.iter().filter(|i| !(remote && i.withheld.is_some())).collect();
    let withheld: Vec<Withheld> = if remote {
        items
            .iter()
            .filter_map(|i| {
                i.withheld.as_ref().map(|r| Withheld { path: i.path.clone(), passage_id: i.passage_id, reason: r.clone() })
            })
            .collect()
    } else {
        Vec::new()
    };
    let extract = |visible: &[&ContextItem]| -> Result<Vec<gate::Claim>, AskError> {
        let sources: Vec<Source> = visible
            .iter()
            .map(|i| Source {
                version_id: &i.version_id,
                text: &i.text,
                heading: &i.heading,
                prose: matches!(i.kind.as_str(), "paragraph" | "quote"),
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
        Synthesizer::Extractive => extract(&visible)?,
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
            for it in &visible {
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
            for (n, (vid, range, its)) in blocks.iter().enumerate() {
                let label = format!("S{}", n + 1);
                labels.insert(label.clone(), vid.clone());
                let redacted = &sendable[vid];
                let text = redacted.window(range.clone());
                if counted.insert(vid) {
                    redactions += redacted.count;
                }
                let it = its[0];
                let (title, r1) = if remote { egress::redact(&format!("{} › {}", it.path, it.heading)) } else { (format!("{} › {}", it.path, it.heading), 0) };
                redactions += r1;
                user.push_str(&format!("\n[{label}] {title}\n{text}\n"));
                sent.extend(its.iter().map(|i| i.passage_id));
            }
            let tools = cfg.fetcher.as_ref().filter(|_| llm.tools);
            if blocks.is_empty() && tools.is_none() {
                Vec::new()
            } else {
                let system = if tools.is_some() { format!("{SYSTEM_PROMPT} {TOOL_PROMPT}") } else { SYSTEM_PROMPT.to_owned() };
                let mut messages = vec![
                    serde_json::json!({"role": "system", "content": system}),
                    serde_json::json!({"role": "user", "content": user}),
                ];
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
                        store.log_egress(&egress::destination(&llm.endpoint), "synthesis", passages, body.len() as u64, if logged_synthesis { 0 } else { redactions as u64 })?;
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
                        final_content = turn.content.ok_or_else(|| LlmError::Malformed("the model called a tool after its last turn".into()));
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
                        extract(&visible)?
                    }
                    Err(LlmError::Cancelled) => return Err(AskError::Cancelled),
                    Err(e) => return Err(e.into()),
                }
            }
        }
    };
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
        let snapshot = path.contains("://");
        Citation {
            path: path.to_owned(),
            kind: if snapshot { lode_store::Source::Snapshot } else { lode_store::Source::Note },
            url: snapshot.then(|| path.to_owned()),
            fetched_at: if snapshot { fetched_at } else { None },
            note_id,
            version_id: s.version_id.clone(),
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
                start: i.start,
                end: i.end,
                line: i.line,
                text: i.text.clone(),
            })
            .collect();
    }
    Ok(answer)
}


/// Why the note at `path` may not leave the machine: its rules, its indexed metadata, and its
/// frontmatter on disk now. Fails closed: metadata that cannot be read withholds the note.
fn withheld_note(store: &Store, rules: &EgressRules, cfg: &AskConfig, path: &str) -> Option<String> {
    let indexed = store.notes().map(|ns| ns.into_iter().find(|n| n.path == path).map(|n| n.id));
    let meta = match indexed {
        Ok(Some(id)) => match store.note_meta(id) {
            Ok(m) => m,
            Err(e) => return Some(format!("its metadata could not be read ({e}); withheld to be safe")),
        },
        Ok(None) => serde_json::Map::new(),
        Err(e) => return Some(format!("its metadata could not be read ({e}); withheld to be safe")),
    };
    rules.withheld_because(path, &meta).or_else(|| on_disk_withheld(cfg.vault_root.as_deref(), rules, path))
}

/// The egress rule the note's frontmatter *on disk* triggers, if the vault root is known.
/// Reading it fails closed.
fn on_disk_withheld(root: Option<&std::path::Path>, rules: &EgressRules, path: &str) -> Option<String> {
    let root = root?;
    if path.contains("://") {
        return None; // a snapshot has no file; its rules were read from the index
    }
    match std::fs::read(root.join(path)) {
        Ok(bytes) => rules.withheld_because(path, &frontmatter_of(&String::from_utf8_lossy(&bytes))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(format!("its frontmatter on disk could not be read ({e}); withheld to be safe")),
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

