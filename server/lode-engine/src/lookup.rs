//! The vault looked up by an outside reader (an agent through MCP, a script): `search` (ranked
//! passages), `verify` (does the gate accept this claim on these quotes?) and `read` (a note or
//! a version, with line numbers). Plain data, bytes and lines; each result says what was held
//! back from its reader.
//!
//! Invariant: for a reader off the machine ([`Audience::Remote`]) nothing of a note the egress
//! rules withhold leaves, not even whether a quote occurs in it, and secrets are redacted from
//! every text that does; each call that sends text is logged as egress.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use lode_core::gate::{self, Claim, Outcome, ScorerSlot, Support};
use lode_store::Store;
use serde::Serialize;

use crate::Engine;

/// Who reads a result.
#[derive(Clone, Debug, Default)]
pub enum Audience {
    /// The user, on this machine (the editor, the terminal).
    #[default]
    Local,
    /// A reader that may forward what it gets off the machine (an MCP client, unless the
    /// user's own config says it is local): judged as a remote model is. `destination` names it
    /// in the egress log.
    Remote { destination: String },
}

impl Audience {
    fn is_remote(&self) -> bool {
        matches!(self, Audience::Remote { .. })
    }
}

/// One passage found: where it is, which version, what a reader sees around it.
#[derive(Debug, Clone, Serialize)]
pub struct Passage {
    pub path: String,
    /// First and last line of the passage in its version (1-based, inclusive).
    pub line_start: usize,
    pub line_end: usize,
    /// Bytes of the passage in its version.
    pub start: usize,
    pub end: usize,
    pub version_id: String,
    /// Heading path (`Note › Section`).
    pub breadcrumb: String,
    /// `note`, `annotation`, `shared`, `snapshot` or `stale_snapshot`: how far to trust it.
    pub trust: String,
    /// Relevance, for a local reader only: a remote one's scores would follow the notes it may
    /// not see (their terms' weights and ranks count in every score).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    pub text: String,
}

/// What a lookup found, and what it held back.
#[derive(Debug, Clone, Serialize)]
pub struct Found<T> {
    pub items: Vec<T>,
    /// Passages (or notes) withheld from this reader by the egress rules: for the door's log,
    /// never for the reader (a count that follows the query would tell a remote reader which
    /// words the withheld notes hold).
    #[serde(skip)]
    pub withheld: usize,
    /// Secrets redacted from the text sent.
    pub redacted: usize,
    /// What the reader should know about the result (a dense leg that failed, a scan running).
    pub notices: Vec<String>,
}

impl<T> Default for Found<T> {
    fn default() -> Self {
        Found { items: Vec::new(), withheld: 0, redacted: 0, notices: Vec::new() }
    }
}

pub struct SearchRequest {
    pub query: String,
    pub limit: usize,
    pub mode: lode_retrieval::Mode,
    pub audience: Audience,
}

/// Where a quote occurs, or that it does not.
#[derive(Debug, Clone, Serialize)]
pub struct QuoteAt {
    pub quote: String,
    pub found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_start: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_end: Option<usize>,
    /// Bytes of the quote in its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<Range<usize>>,
    /// Matched only with whitespace and Unicode folded as a reader sees them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub normalized: bool,
    /// What a reader sees around it (`Note › Myths`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub context: String,
}

/// The gate's verdict on one claim.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// `verified`: the quotes are in the notes and assert the claim. `evidence_only`: the
    /// quotes are there but do not assert the claim as worded (or the note does not assert
    /// them). `not_verified`: the gate refused the claim. `not_found`: a quote is not in the
    /// notes this reader may see.
    pub verdict: &'static str,
    pub reason: String,
    /// How it was verified (`quoted & coupled: …`, `entailed: …`), when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    pub quotes: Vec<QuoteAt>,
}

pub struct VerifyRequest {
    pub claim: String,
    pub quotes: Vec<String>,
    /// Look for the quotes in these notes only (vault-relative paths); else anywhere.
    pub paths: Vec<String>,
    pub audience: Audience,
}

/// A note or version, or part of it, with line numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Read {
    pub path: String,
    pub version_id: String,
    /// Whether this version is the note's current one.
    pub head: bool,
    pub line_start: usize,
    pub line_end: usize,
    pub total_lines: usize,
    /// The lines, each prefixed with its number (`  12│ `).
    pub text: String,
    pub redacted: usize,
}

pub struct ReadRequest {
    pub path: Option<String>,
    /// A version id or a prefix of one (a citation's short id).
    pub version: Option<String>,
    /// First and last line wanted (1-based, inclusive).
    pub lines: Option<(usize, usize)>,
    pub audience: Audience,
}

/// Candidates a remote reader's search and quote lookup rank before withheld ones are dropped.
const REMOTE_CANDIDATES: usize = 400;
/// Notes a quote is looked for in.
const QUOTE_NOTES: usize = 20;

/// The words of a query, lower case, for telling how a passage matched.
fn query_terms(q: &str) -> Vec<String> {
    q.split(|c: char| !c.is_alphanumeric()).filter(|w| w.chars().count() >= 2).map(str::to_lowercase).collect()
}

/// Whether a passage holds some of the query's words, but none once its secrets are masked: it
/// was found through a secret. A passage holding none of them (found by meaning) is not.
fn matched_only_inside_secrets(terms: &[String], raw: &str, masked: &str) -> bool {
    if raw == masked {
        return false;
    }
    let (raw, masked) = (raw.to_lowercase(), masked.to_lowercase());
    terms.iter().any(|t| raw.contains(t.as_str())) && !terms.iter().any(|t| masked.contains(t.as_str()))
}

/// The secrets of each version read, by id: found in the whole text, so a secret that runs past
/// the edge of a window (a passage, some lines) is masked in it all the same.
#[derive(Default)]
struct SecretSpans(HashMap<String, Vec<(Range<usize>, &'static str)>>);

/// Most quotes one verify call may carry, and most places a quote is looked for.
const MAX_QUOTES: usize = gate::MAX_QUOTES;
const PLACES_PER_QUOTE: usize = 5;
/// Longest query, claim or quote, in bytes.
const MAX_TEXT: usize = 4096;
/// Most lines one read returns.
pub const MAX_READ_LINES: usize = 2000;

fn trust_name(t: lode_core::fusion::Trust) -> &'static str {
    use lode_core::fusion::Trust::*;
    match t {
        Note => "note",
        Annotation => "annotation",
        Shared => "shared",
        ExternalSnapshot => "snapshot",
        StaleSnapshot => "stale_snapshot",
        InferredEdge => "linked",
    }
}

impl Engine {
    /// The egress judge for one reader: `None` for the user; for a remote reader, why a note
    /// (with the bytes about to be sent) is withheld.
    fn judge<'a>(&'a self, audience: &'a Audience) -> Result<Judge<'a>, String> {
        let (rules, _, blocked) = self.rules_now();
        let mut cfg = self.settings.ask.clone();
        cfg.vault_root = Some(self.root.clone());
        cfg.egress_blocked = blocked;
        Ok(Judge { audience, rules, cfg, by_path: Default::default() })
    }

    /// Ranked passages for a query, as `lode search` ranks them (the vault's trust order).
    pub fn search(&self, req: SearchRequest) -> Result<Found<Passage>, String> {
        if req.query.trim().is_empty() {
            return Err("the query is empty".into());
        }
        if req.query.len() > MAX_TEXT {
            return Err(format!("the query is {} bytes; at most {MAX_TEXT}", req.query.len()));
        }
        let store = self.readers.get()?;
        let judge = self.judge(&req.audience)?;
        let mut out = Found::default();
        let limit = req.limit.clamp(1, 50);
        let mut cfg = lode_retrieval::RetrievalConfig {
            // Withheld passages are dropped after ranking: enough candidates that they do not
            // crowd out what this reader may see (a crowded-out result told which words the
            // withheld notes hold).
            limit: if req.audience.is_remote() { (limit * 8).max(REMOTE_CANDIDATES) } else { limit },
            graph_limit: 0,
            search: self.settings.ask.search.clone(),
            stale_days: self.settings.ask.stale_days,
            ..Default::default()
        };
        cfg.search.limit = cfg.limit;
        let wants_dense = req.mode != lode_retrieval::Mode::Lexical;
        let unusable = if wants_dense { self.dense_off.lock().unusable() } else { None };
        let retrieved = {
            let mut dense = if wants_dense && unusable.is_none() { self.dense.try_lock() } else { None };
            let mut reranker = (req.mode == lode_retrieval::Mode::Rerank).then(|| self.reranker.as_ref().map(|p| p.take())).flatten();
            let mut models = lode_retrieval::Models::default();
            let mut reload_failed = None;
            if let Some((r, i)) = dense.as_mut().and_then(|g| g.as_mut()) {
                match r.get() {
                    Ok(e) => {
                        models.embedder = Some(e);
                        models.index = Some(&*i);
                    }
                    Err(why) => reload_failed = Some(why),
                }
            }
            if let Some(Ok(lease)) = reranker.as_mut() {
                models.reranker = Some(&mut **lease);
            }
            let mode = if models.embedder.is_some() { req.mode } else { lode_retrieval::Mode::Lexical };
            if wants_dense && mode == lode_retrieval::Mode::Lexical {
                let why = unusable
                    .clone()
                    .or(reload_failed)
                    .or_else(|| self.settings.vectors.is_none().then(|| "no embedder is configured".to_owned()))
                    .unwrap_or_else(|| "the embedding model is busy or not loaded yet".to_owned());
                out.notices.push(format!("{why}; these results come from lexical search only"));
            }
            let r = lode_retrieval::retrieve(&store, &req.query, mode, models, &cfg).map_err(|e| e.to_string())?;
            if let Some(Err(e)) = reranker {
                out.notices.push(format!("rerank skipped: {e}"));
            }
            r
        };
        if let Some(e) = self.dense_failed(retrieved.dense_failed.clone(), unusable.is_some()) {
            out.notices.push(format!("dense retrieval failed ({e}); these results come from lexical search only"));
        }
        out.notices.extend(retrieved.warnings.iter().cloned());
        if self.scanning() {
            out.notices.push("the vault is still being indexed; notes not read yet are missing".into());
        }
        let mut sent_ids = Vec::new();
        let mut bytes = 0u64;
        let mut spans = SecretSpans::default();
        let terms = query_terms(&req.query);
        for h in retrieved.hits {
            if out.items.len() >= limit {
                break;
            }
            let hit = h.hit;
            if judge.withheld(&store, &hit.path, &hit.text).is_some() {
                out.withheld += 1;
                continue;
            }
            // Masked where the whole version holds a secret (a key block or a token that runs
            // across passages is masked in each), then checked once more.
            let (text, redacted) = judge.mask(&store, &mut spans, &hit.version_id, hit.start..hit.end, &hit.text);
            // A passage found only through the words of a secret it holds is not a result: it
            // would confirm a guess at the secret.
            if judge.audience.is_remote() && matched_only_inside_secrets(&terms, &hit.text, &text) {
                out.withheld += 1;
                continue;
            }
            // The heading path is text of the note too (a secret in a heading, a title), and
            // so is the path (a token in a file name).
            let (breadcrumb, in_heading) = judge.redact(&hit.heading);
            let (path, in_path) = judge.redact(&hit.path);
            out.redacted += redacted + in_heading + in_path;
            bytes += (text.len() + breadcrumb.len()) as u64;
            sent_ids.push(hit.passage_id);
            let line_end = hit.line + hit.text.trim_end_matches('\n').matches('\n').count();
            out.items.push(Passage {
                path,
                line_start: hit.line,
                line_end,
                start: hit.start,
                end: hit.end,
                version_id: hit.version_id,
                breadcrumb,
                trust: trust_name(h.trust).to_owned(),
                score: (!judge.audience.is_remote()).then(|| h.rerank.map(f64::from).unwrap_or(h.fused)),
                text,
            });
        }
        judge.log(&store, "search", &sent_ids, bytes, out.redacted);
        Ok(out)
    }

    /// The gate's verdict on a claim resting on `quotes`, each looked for in the notes' current
    /// versions (in `paths` when given): the check lode runs on its own answers, for anyone's.
    pub fn verify(&self, req: VerifyRequest) -> Result<Verdict, String> {
        if req.claim.trim().is_empty() {
            return Err("the claim is empty".into());
        }
        if req.quotes.is_empty() || req.quotes.iter().all(|q| q.trim().is_empty()) {
            return Err("give at least one quote: the exact words from the notes the claim rests on".into());
        }
        if req.quotes.len() > MAX_QUOTES {
            return Err(format!("{} quotes; at most {MAX_QUOTES} per claim", req.quotes.len()));
        }
        if let Some(t) = std::iter::once(&req.claim).chain(&req.quotes).find(|t| t.len() > MAX_TEXT) {
            return Err(format!("a claim or quote is {} bytes; at most {MAX_TEXT}", t.len()));
        }
        let store = self.readers.get()?;
        let judge = self.judge(&req.audience)?;
        // Candidate versions: the named notes' heads, else the heads of notes a lexical search
        // for each quote finds. Withheld notes are no candidates: for a remote reader, whether
        // a quote occurs in one is itself withheld.
        let mut bodies: HashMap<String, (String, String)> = HashMap::new(); // version → (path, body)
        let candidates_of = |paths: Vec<String>, bodies: &mut HashMap<String, (String, String)>| -> Result<Vec<String>, String> {
            let mut out = Vec::new();
            for p in paths {
                let Some(v) = store.head_of(&p).map_err(|e| e.to_string())? else { continue };
                if !bodies.contains_key(&v) {
                    let Some(b) = store.version_body(&v).map_err(|e| e.to_string())? else { continue };
                    let b = String::from_utf8_lossy(&b).into_owned();
                    if judge.withheld(&store, &p, &b).is_some() {
                        continue;
                    }
                    bodies.insert(v.clone(), (p.clone(), b));
                }
                if !out.contains(&v) {
                    out.push(v);
                }
            }
            Ok(out)
        };
        let mut places: Vec<Vec<(String, Range<usize>, bool)>> = Vec::new();
        for q in &req.quotes {
            let paths = if req.paths.is_empty() {
                // Withheld notes are skipped before the candidates are cut, so they cannot crowd
                // out a note this reader may see.
                let fetch = if req.audience.is_remote() { REMOTE_CANDIDATES } else { QUOTE_NOTES };
                let opts = lode_store::SearchOptions { limit: fetch, snippets: false, ..self.settings.ask.search.clone() };
                let found = store.search(q, &opts).map_err(|e| e.to_string())?;
                let mut seen = Vec::new();
                for h in found.hits {
                    if seen.len() >= QUOTE_NOTES {
                        break;
                    }
                    if !seen.contains(&h.path) && !h.path.contains("://") && judge.withheld_path(&store, &h.path).is_none() {
                        seen.push(h.path);
                    }
                }
                seen
            } else {
                req.paths.clone()
            };
            let versions = candidates_of(paths, &mut bodies)?;
            let mut at = Vec::new();
            for v in versions {
                // A quote that falls on a secret is not found: finding it would confirm a guess.
                let secrets = if req.audience.is_remote() { lode_answer::egress::secrets::secret_spans(&bodies[&v].1) } else { Vec::new() };
                for (r, normalized) in gate::locate_all(&bodies[&v].1, q) {
                    if secrets.iter().any(|(s, _)| s.start < r.end && r.start < s.end) {
                        continue;
                    }
                    if at.len() < PLACES_PER_QUOTE {
                        at.push((v.clone(), r, normalized));
                    }
                }
            }
            places.push(at);
        }
        let quote_at = |q: &str, place: Option<&(String, Range<usize>, bool)>| match place {
            Some((v, r, normalized)) => {
                let (path, body) = &bodies[v];
                QuoteAt {
                    quote: q.to_owned(),
                    found: true,
                    path: Some(path.clone()),
                    version_id: Some(v.clone()),
                    line_start: Some(lode_core::text::line_of(body.as_bytes(), r.start)),
                    line_end: Some(lode_core::text::line_of(body.as_bytes(), r.end.saturating_sub(1).max(r.start))),
                    range: Some(r.clone()),
                    normalized: *normalized,
                    context: String::new(),
                }
            }
            None => QuoteAt {
                quote: q.to_owned(),
                found: false,
                path: None,
                version_id: None,
                line_start: None,
                line_end: None,
                range: None,
                normalized: false,
                context: String::new(),
            },
        };
        if places.iter().any(Vec::is_empty) {
            let missing = places.iter().filter(|p| p.is_empty()).count();
            let quotes = req.quotes.iter().zip(&places).map(|(q, p)| quote_at(q, p.first())).collect();
            let scope = if req.paths.is_empty() { "the notes".to_owned() } else { req.paths.join(", ") };
            let reason = format!(
                "{missing} of {} quote{} {} not in {scope}{}: a citation must quote the note word for word",
                req.quotes.len(),
                if req.quotes.len() == 1 { "" } else { "s" },
                if missing == 1 { "is" } else { "are" },
                if req.audience.is_remote() { " this client may read" } else { "" }
            );
            return Ok(Verdict { verdict: "not_found", reason, step: None, quotes });
        }
        // Each combination of places, first places first, until one verifies (a quote that
        // occurs in several notes may be asserted in one and listed as a myth in another).
        let eligible: gate::Eligible<'_> = bodies.iter().map(|(v, (_, b))| (v.clone(), b.as_str())).collect();
        let mut scorer = match &self.nli {
            Some(pool) => ScorerSlot::lazy(|| pool.take().map(|lease| Box::new(lease) as Box<dyn gate::EntailmentScorer + '_>)),
            None => ScorerSlot::None,
        };
        let mut best: Option<(u8, Outcome, Vec<usize>)> = None;
        let tries = places.iter().map(Vec::len).max().unwrap_or(1);
        for t in 0..tries {
            let pick: Vec<usize> = places.iter().map(|p| t.min(p.len() - 1)).collect();
            let support = req
                .quotes
                .iter()
                .zip(&places)
                .zip(&pick)
                .map(|((q, p), &i)| Support { version_id: p[i].0.clone(), quoted_span: q.clone() })
                .collect();
            let outcome = gate::check_one(Claim { text: req.claim.clone(), support }, &eligible, &mut scorer, &self.settings.ask.gate);
            let rank = match &outcome {
                Outcome::Verified(_) => 3,
                Outcome::EvidenceOnly(_) => 2,
                Outcome::Dropped(_) => 1,
            };
            if best.as_ref().is_none_or(|(r, _, _)| rank > *r) {
                best = Some((rank, outcome, pick));
            }
            if rank == 3 {
                break;
            }
        }
        let (_, outcome, pick) = best.expect("at least one try");
        let mut quotes: Vec<QuoteAt> = req.quotes.iter().zip(&places).zip(&pick).map(|((q, p), &i)| quote_at(q, p.get(i))).collect();
        let spans = match &outcome {
            Outcome::Verified(v) => v.spans.clone(),
            Outcome::EvidenceOnly(e) => e.spans.clone(),
            Outcome::Dropped(_) => Vec::new(),
        };
        for (q, s) in quotes.iter_mut().zip(&spans) {
            if q.version_id.as_deref() == Some(s.version_id.as_str()) {
                q.context = s.context.clone();
                q.range = Some(s.range.clone());
            }
        }
        let mut redacted = 0;
        for q in &mut quotes {
            let (text, n) = judge.redact(&q.quote);
            let (context, m) = judge.redact(&q.context);
            (q.quote, q.context) = (text, context);
            redacted += n + m;
            if let Some(p) = q.path.as_mut() {
                let (masked, k) = judge.redact(p);
                *p = masked;
                redacted += k;
            }
        }
        judge.log(&store, "verify", &[], quotes.iter().map(|q| q.quote.len() as u64).sum(), redacted);
        Ok(match outcome {
            Outcome::Verified(v) => Verdict { verdict: "verified", reason: v.label.clone(), step: Some(v.verification.step()), quotes },
            Outcome::EvidenceOnly(e) => Verdict { verdict: "evidence_only", reason: gate::evidence_only_label(&e.why), step: None, quotes },
            Outcome::Dropped(d) => Verdict { verdict: "not_verified", reason: d.reason, step: None, quotes },
        })
    }

    /// The note at `path` (its current version) or the version `version` (an id or a prefix of
    /// one), if this reader may have it: its path, version id and text.
    fn resolve_read(
        &self,
        store: &Store,
        judge: &Judge<'_>,
        path: Option<&str>,
        version: Option<&str>,
    ) -> Result<(String, String, String), String> {
        let (path_of, version_id) = match (path, version) {
            (_, Some(v)) => {
                let v = v.trim();
                if v.len() < 4 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!("{v:?} is not a version id (hex digits, at least 4)"));
                }
                // Only versions this reader may read count: a prefix two withheld versions share
                // must read as one no version has, or the ids of withheld versions could be spelt
                // out digit by digit.
                let mut ids = store.versions_with_prefix(v, if judge.audience.is_remote() { 64 } else { 2 }).map_err(|e| e.to_string())?;
                if judge.audience.is_remote() {
                    ids.retain(|id| {
                        let path = store.version_info(id).ok().flatten().map(|(p, _, _)| p).unwrap_or_default();
                        let body = store.version_body(id).ok().flatten().map(|b| String::from_utf8_lossy(&b).into_owned());
                        body.is_some_and(|b| judge.withheld(store, &path, &b).is_none())
                    });
                }
                let id = match ids.as_slice() {
                    [one] => one.clone(),
                    [] => return Err(format!("no version {v} in this vault{}", judge.may_read())),
                    _ => return Err(format!("{v} names more than one version: give more of its digits")),
                };
                let path = store.version_info(&id).map_err(|e| e.to_string())?.map(|(p, _, _)| p).unwrap_or_default();
                (path, id)
            }
            (Some(p), None) => {
                let p = p.trim().trim_start_matches("./").to_owned();
                match store.head_of(&p).map_err(|e| e.to_string())? {
                    Some(v) => (p, v),
                    None => {
                        return Err(format!(
                            "no note {p} in this vault{} (paths are relative to the vault, e.g. `notes/boiler.md`)",
                            judge.may_read()
                        ))
                    }
                }
            }
            (None, None) => return Err("give a path or a version id".into()),
        };
        let body =
            store.version_body(&version_id).map_err(|e| e.to_string())?.ok_or_else(|| format!("version {version_id} could not be read"))?;
        let body = String::from_utf8_lossy(&body).into_owned();
        // Said as a note or version that is not there: that a withheld note exists at a path
        // the reader guessed is itself withheld.
        if judge.withheld(store, &path_of, &body).is_some() {
            return Err(match version {
                Some(v) => format!("no version {} in this vault that this client may read", v.trim()),
                None => format!(
                    "no note {path_of} in this vault that this client may read (paths are relative to the vault, e.g. `notes/boiler.md`)"
                ),
            });
        }
        Ok((path_of, version_id, body))
    }

    /// A note or version whole, as its text (secrets redacted for a remote reader).
    pub fn read_whole(&self, path: Option<String>, version: Option<String>, audience: Audience) -> Result<String, String> {
        let store = self.readers.get()?;
        let judge = self.judge(&audience)?;
        let (_, _, body) = self.resolve_read(&store, &judge, path.as_deref(), version.as_deref())?;
        let (text, redacted) = judge.redact(&body);
        judge.log(&store, "read", &[], text.len() as u64, redacted);
        Ok(text)
    }

    /// A note's current version, or any version by id, or some of its lines.
    pub fn read(&self, req: ReadRequest) -> Result<Read, String> {
        let store = self.readers.get()?;
        let judge = self.judge(&req.audience)?;
        let (path, version_id, body) = self.resolve_read(&store, &judge, req.path.as_deref(), req.version.as_deref())?;
        let head = store.head_for_version(&version_id).map_err(|e| e.to_string())?.is_some_and(|(_, h)| h == version_id);
        // Each line with where it starts in the version.
        let mut lines: Vec<(usize, &str)> = Vec::new();
        let mut at = 0;
        for piece in body.split_inclusive('\n') {
            lines.push((at, piece.trim_end_matches('\n').trim_end_matches('\r')));
            at += piece.len();
        }
        let total = lines.len();
        let (from, to) = req.lines.unwrap_or((1, total.max(1)));
        if from == 0 || to < from {
            return Err(format!("lines {from}-{to}: give first and last line, 1-based, first ≤ last"));
        }
        if from > total.max(1) {
            return Err(format!("line {from} is past the end: the version has {total} lines"));
        }
        let to = to.min(total).min(from + MAX_READ_LINES - 1);
        // The secrets of the whole version, masked line by line: a window that starts inside
        // a key block masks its lines too.
        let secrets = if judge.audience.is_remote() { lode_answer::egress::secrets::secret_spans(&body) } else { Vec::new() };
        let width = to.to_string().len();
        let mut text = String::new();
        let mut masked = 0;
        for (i, (start, l)) in lines.iter().enumerate().take(to).skip(from - 1) {
            let (l, n) = lode_answer::egress::secrets::mask_spans(l, *start..*start + l.len(), &secrets);
            masked += n;
            text.push_str(&format!("{:>width$}│ {l}\n", i + 1));
        }
        let (text, redacted) = judge.redact(&text);
        let redacted = redacted + masked;
        judge.log(&store, "read", &[], text.len() as u64, redacted);
        Ok(Read { path, version_id, head, line_start: from, line_end: to.max(from), total_lines: total, text, redacted })
    }

    /// Notes this reader may read, by path (for an MCP client's resource list).
    pub fn notes_for(&self, audience: &Audience) -> Result<Found<String>, String> {
        let store = self.readers.get()?;
        let judge = self.judge(audience)?;
        let mut out = Found::default();
        for n in store.notes().map_err(|e| e.to_string())? {
            // A path holding a secret (a token in a file name) is not listed either.
            if audience.is_remote() && (judge.withheld_path(&store, &n.path).is_some() || judge.redact(&n.path).1 > 0) {
                out.withheld += 1;
            } else {
                out.items.push(n.path);
            }
        }
        Ok(out)
    }
}

/// The egress rules as one reader sees them.
struct Judge<'a> {
    audience: &'a Audience,
    rules: Arc<lode_answer::egress::EgressRules>,
    cfg: lode_answer::AskConfig,
    /// The verdict on each note's path (its rules, the index's metadata, the file on disk now),
    /// read once per call: a search weighs many passages of the same note.
    by_path: std::cell::RefCell<HashMap<String, Option<String>>>,
}

impl Judge<'_> {
    /// Why `path`'s text `body` may not reach this reader.
    fn withheld(&self, store: &Store, path: &str, body: &str) -> Option<String> {
        match self.audience {
            Audience::Local => None,
            // The marks in the bytes about to be sent, then what holds for the whole note.
            Audience::Remote { .. } => self.rules.note_withheld(path, body).or_else(|| self.withheld_path(store, path)),
        }
    }

    /// [`Judge::withheld`] without the bytes (the index's metadata, the file on disk now).
    fn withheld_path(&self, store: &Store, path: &str) -> Option<String> {
        match self.audience {
            Audience::Local => None,
            Audience::Remote { .. } => {
                if let Some(v) = self.by_path.borrow().get(path) {
                    return v.clone();
                }
                let v = lode_answer::withheld_for_remote(store, &self.rules, &self.cfg, path, None);
                self.by_path.borrow_mut().insert(path.to_owned(), v.clone());
                v
            }
        }
    }

    /// How "not found" ends for this reader: the same whether a note is missing or withheld.
    fn may_read(&self) -> &'static str {
        if self.audience.is_remote() {
            " that this client may read"
        } else {
            ""
        }
    }

    /// The text of `range` of version `version_id` (`window`) for this reader: the secrets of
    /// the whole version masked in it, then [`Judge::redact`] for anything left.
    fn mask(&self, store: &Store, spans: &mut SecretSpans, version_id: &str, range: Range<usize>, window: &str) -> (String, usize) {
        if !self.audience.is_remote() {
            return (window.to_owned(), 0);
        }
        let found = spans.0.entry(version_id.to_owned()).or_insert_with(|| {
            let body = store.version_body(version_id).ok().flatten().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            lode_answer::egress::secrets::secret_spans(&body)
        });
        let (masked, n) = lode_answer::egress::secrets::mask_spans(window, range, found);
        let (text, m) = self.redact(&masked);
        (text, n + m)
    }

    fn redact(&self, text: &str) -> (String, usize) {
        match self.audience {
            Audience::Local => (text.to_owned(), 0),
            Audience::Remote { .. } => lode_answer::egress::secrets::redact(text),
        }
    }

    /// Records what was sent to a remote reader in the egress log (`lode egress`).
    fn log(&self, store: &Store, purpose: &str, passages: &[i64], bytes: u64, redactions: usize) {
        if let Audience::Remote { destination } = self.audience {
            if let Err(e) = store.log_egress(destination, purpose, passages, bytes, redactions as u64) {
                tracing::warn!("the egress log could not be written: {e}");
            }
        }
    }
}
