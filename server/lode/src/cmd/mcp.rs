//! `lode mcp`: the MCP server over stdio (the official Rust SDK, `rmcp`), a door onto the same
//! engine as `lode serve` and the CLI. Read-only tools for agents — `search`, `ask`, `verify`,
//! `read`, `status` — and the notes and versions as resources (`lode://note/<path>`,
//! `lode://version/<id>`).
//!
//! Invariant: an MCP client is a reader off the machine (it usually forwards what it gets to a
//! remote model) unless the user's own config says otherwise (`[trust] mcp_local = true`): every
//! result is judged by the vault's egress rules as a remote model's context is, and logged as
//! egress. Only stderr carries logs: stdout is the protocol.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use lode_engine::lookup::{Audience, ReadRequest, SearchRequest, VerifyRequest};
use lode_engine::queries::AskRequest;
use lode_engine::Engine;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

#[derive(Args)]
pub struct McpArgs {
    /// A vault to serve (repeat for several; the first is the default) [default: the current folder]
    #[arg(long, value_name = "DIR")]
    pub vault: Vec<PathBuf>,
    /// Serve MCP's streamable HTTP at http://ADDR/mcp instead of stdio; loopback only
    /// (127.0.0.1:PORT or [::1]:PORT; port 0 picks a free one, said on stderr)
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
}

/// How long a call waits for a vault's first scan before answering from what is indexed.
const FIRST_SCAN_WAIT: std::time::Duration = std::time::Duration::from_secs(60);
/// Most resources listed (the rest are still readable by URI).
const MAX_LISTED: usize = 5000;

pub fn run(args: McpArgs) -> Result<ExitCode> {
    super::serve::init_log();
    let roots: Vec<PathBuf> = if args.vault.is_empty() { vec![std::env::current_dir()?] } else { args.vault };
    let mut canonical = Vec::new();
    for r in roots {
        let c = r.canonicalize().with_context(|| format!("vault {}", r.display()))?;
        if !c.is_dir() {
            bail!("{} is not a folder", r.display());
        }
        canonical.push(c);
    }
    // Only the user's own config says an MCP client is local (`[trust]` is user-only).
    let local = crate::config::Config::load(&canonical[0]).map(|c| c.trust.mcp_local).unwrap_or(false);
    let audience = if local { Audience::Local } else { Audience::Remote { destination: "mcp client".into() } };
    if let Some(addr) = args.http.filter(|a| !a.ip().is_loopback()) {
        bail!("--http {addr}: lode serves MCP over HTTP on a loopback address only (127.0.0.1 or ::1): anything else would open your notes to the network");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let http = args.http;
    let code = rt.block_on(async move {
        let settings = super::serve::engine_settings();
        let mut vaults = Vec::new();
        for root in canonical {
            let engine = open(&settings, root.clone()).await?;
            let _ = engine.start(Arc::new(LogReporter), true);
            vaults.push(engine);
        }
        let server = LodeMcp { vaults: Arc::new(vaults), audience };
        if let Some(addr) = http {
            return serve_http(server, addr).await;
        }
        let vaults = server.vaults.clone();
        let running = server.serve(guarded_stdio()).await.context("starting the MCP session")?;
        let _ = running.waiting().await;
        // The client has gone: the vector thread's round in progress ends and the models are
        // dropped before the process exits (ONNX Runtime torn down under an inference fails it
        // with a garbage error). Bounded, as for `lode serve`.
        let release = tokio::task::spawn_blocking(move || vaults.iter().for_each(|e| e.release_models()));
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), release).await;
        anyhow::Ok(ExitCode::SUCCESS)
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    code
}

/// Longest message line read from the client: a bigger one is answered with an error, not read.
const MAX_LINE: usize = 16 << 20;

/// stdin and stdout for the MCP session, with a guard between: a line that is not valid UTF-8
/// or not JSON is answered with a JSON-RPC parse error (-32700) carrying the request's id when it
/// can be read, instead of being dropped while the client waits for ever; everything else passes
/// through. One task writes stdout, the session's lines and the guard's whole, never mixed.
fn guarded_stdio() -> (tokio::io::DuplexStream, tokio::io::DuplexStream) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let (session_in, mut to_session) = tokio::io::duplex(1 << 20);
    let (from_session, session_out) = tokio::io::duplex(1 << 20);
    let (errors, mut error_lines) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut stdin).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line.len() > MAX_LINE && !line.ends_with(b"\n") {
                // Skip the rest of the line, then say why.
                let mut rest = Vec::new();
                let _ = stdin.read_until(b'\n', &mut rest).await;
                let _ = errors.send(parse_error(&line, "the message is over 16 MiB"));
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            if text.trim().is_empty() {
                continue;
            }
            let why = match std::str::from_utf8(&line) {
                Err(_) => Some("the message is not valid UTF-8".to_owned()),
                Ok(t) => serde_json::from_str::<Value>(t).err().map(|e| format!("the message is not valid JSON ({e})")),
            };
            match why {
                Some(why) => {
                    let _ = errors.send(parse_error(&line, &why));
                }
                None => {
                    if to_session.write_all(&line).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        let mut lines = tokio::io::BufReader::new(from_session);
        let mut line = Vec::new();
        loop {
            tokio::select! {
                read = lines.read_until(b'\n', &mut line) => {
                    if !matches!(read, Ok(n) if n > 0) {
                        return;
                    }
                    if out.write_all(&line).await.is_err() {
                        return;
                    }
                    line.clear();
                }
                Some(e) = error_lines.recv() => {
                    if out.write_all(&e).await.is_err() {
                        return;
                    }
                }
            }
            let _ = out.flush().await;
        }
    });
    (session_in, session_out)
}

/// The JSON-RPC parse error for a message `line` that could not be read, with its `"id"` when
/// one can be picked out of it (so the client's request is answered, not left waiting).
fn parse_error(line: &[u8], why: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(line);
    let id = id_of(&text).unwrap_or(Value::Null);
    let mut out = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32700, "message": format!("lode: {why}")}}))
        .unwrap_or_default();
    out.push(b'\n');
    out
}

/// The id of a JSON-RPC message that does not parse: `"id": 7` or `"id": "abc"`.
fn id_of(text: &str) -> Option<Value> {
    let at = text.find("\"id\"")? + 4;
    let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        let end = s.find('"')?;
        return Some(Value::String(s[..end].to_owned()));
    }
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    digits.parse::<i64>().ok().map(Value::from)
}

/// MCP's streamable HTTP on a loopback address, until the process is stopped. Requests whose
/// `Host` is not a loopback name are refused (DNS rebinding), and so is any request a browser
/// sends on a page's behalf (it carries an `Origin`): a web page the user visits must not be
/// able to ask the notes.
async fn serve_http(server: LodeMcp, addr: std::net::SocketAddr) -> Result<ExitCode> {
    use rmcp::transport::streamable_http_server::{session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService};
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))?;
    let bound = listener.local_addr()?;
    let config =
        StreamableHttpServerConfig::default().with_allowed_hosts(["localhost", "127.0.0.1", "::1", "[::1]"]).enforce_origin_validation();
    let service = StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), config);
    eprintln!("lode mcp: listening on http://{bound}/mcp");
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let service = service.clone();
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            // Only /mcp is MCP; anything else is not found.
            let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let mut service = service.clone();
                async move {
                    use tower_service::Service as _;
                    if req.uri().path() != "/mcp" {
                        let body = http_body_util::Full::new(bytes::Bytes::from_static(b"not found: lode serves MCP at /mcp\n"));
                        let mut r = hyper::Response::new(http_body_util::BodyExt::boxed(body));
                        *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                        return Ok::<_, std::convert::Infallible>(r);
                    }
                    service.call(req).await
                }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await {
                tracing::debug!("an HTTP connection ended: {e}");
            }
        });
    }
}

/// Opens a vault's engine, waiting out a database another process holds locked (the editor's
/// language server mid-write) for a while.
async fn open(settings: &lode_engine::SettingsFn, root: PathBuf) -> Result<Arc<Engine>> {
    let mut pause = std::time::Duration::from_millis(250);
    for _ in 0..8 {
        let (s, r) = (settings.clone(), root.clone());
        match tokio::task::spawn_blocking(move || Engine::open(&s, Some(r))).await? {
            Ok(e) => return Ok(e),
            Err(lode_engine::Unopened::Failed(why)) => bail!("{}: {why}", root.display()),
            Err(lode_engine::Unopened::Locked(why)) => {
                tracing::warn!("{}: {why}; trying again", root.display());
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(5));
            }
        }
    }
    bail!("{}: the database stays locked by another process", root.display())
}

/// The engine's messages go to the log (stderr): an MCP client shows its server's stderr.
struct LogReporter;

impl lode_engine::Reporter for LogReporter {
    fn say(&self, level: lode_engine::Level, message: String) {
        match level {
            lode_engine::Level::Warning => tracing::warn!("{message}"),
            lode_engine::Level::Error => tracing::error!("{message}"),
        }
    }
    fn begin(&self, _: &str, _: &str, _: String) -> Option<Box<dyn lode_engine::Bar>> {
        None
    }
}

#[derive(Clone)]
struct LodeMcp {
    vaults: Arc<Vec<Arc<Engine>>>,
    audience: Audience,
}

const INSTRUCTIONS: &str = "lode answers from the user's own markdown notes and checks every citation against the exact text it quotes. \
Use `search` to find passages, `ask` for an answer whose claims are verified against the notes, `verify` to check a claim you \
want to make (with the exact words you quote) before you state it, and `read` to see a note or a cited version with line numbers. \
Quote notes word for word; a claim `verify` does not return as `verified` should not be presented as what the notes say.";

fn tools() -> Vec<Tool> {
    let vault =
        json!({"type": "string", "description": "Which vault (its folder name or path), when lode serves several; default: the first."});
    let schema = |v: Value| Arc::new(v.as_object().cloned().unwrap_or_default());
    let ro = || ToolAnnotations::new().read_only(true);
    vec![
        Tool::new(
            "search",
            "Find passages in the user's notes. Returns ranked passages with path, line range, version id, heading breadcrumb and trust kind \
             (note, annotation, shared, snapshot). Use for looking things up; use `ask` for an answer with verified citations.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Keywords or a question.", "examples": ["boiler pressure"]},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 8},
                    "mode": {"type": "string", "enum": ["hybrid", "lexical", "dense", "rerank"], "default": "hybrid",
                             "description": "hybrid: keywords and meaning, fused; lexical: keywords only; dense: meaning only; rerank: hybrid reordered by a cross-encoder."},
                    "vault": vault,
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        )
        .annotate(ro()),
        Tool::new(
            "ask",
            "Answer a question from the user's notes. Every claim comes with citations (path:line, version id, the exact quoted span) \
             that lode's gate verified against the note; items it could not verify come as evidence only, with why; when nothing \
             survives it abstains (`abstained: true`) rather than guess. Prefer this over composing an answer from `search` results.",
            schema(json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "examples": ["What pressure should the boiler run at?"]},
                    "note": {"type": "string", "description": "Answer from this note only (vault-relative path)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Passages of context."},
                    "vault": vault,
                },
                "required": ["question"],
                "additionalProperties": false
            })),
        )
        .annotate(ro()),
        Tool::new(
            "verify",
            "Check a claim against the notes before you state it: give the claim and the exact words from the notes it rests on. \
             Returns the gate's verdict — verified, evidence_only (the words are there but do not assert the claim as worded, e.g. \
             listed under Myths, negated, a rejected proposal), not_verified, or not_found (a quote is not in the notes) — with the \
             reason and where each quote is (path, lines, version id).",
            schema(json!({
                "type": "object",
                "properties": {
                    "claim": {"type": "string", "examples": ["The boiler runs at 1.5 bar."]},
                    "quotes": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 6,
                               "description": "Exact words from the notes, as they appear there.", "examples": [["Boiler pressure: 1.5 bar"]]},
                    "paths": {"type": "array", "items": {"type": "string"}, "description": "Look in these notes only (vault-relative paths)."},
                    "vault": vault,
                },
                "required": ["claim", "quotes"],
                "additionalProperties": false
            })),
        )
        .annotate(ro()),
        Tool::new(
            "read",
            "Read a note (its current version) or any stored version by id (a citation's version id or a prefix of it), whole or \
             some lines, with line numbers.",
            schema(json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Vault-relative path.", "examples": ["home/boiler.md"]},
                    "version": {"type": "string", "description": "A version id or prefix (hex).", "examples": ["3f9a1c0b2e7d"]},
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                    "vault": vault,
                },
                "additionalProperties": false
            })),
        )
        .annotate(ro()),
        Tool::new(
            "status",
            "What lode holds: notes and passages indexed, whether indexing is running, semantic search and models, trust notices.",
            schema(json!({"type": "object", "properties": {"vault": vault}, "additionalProperties": false})),
        )
        .annotate(ro()),
    ]
}

/// A tool's arguments, with errors an agent can act on.
struct ArgsOf<'a>(&'a serde_json::Map<String, Value>);

impl ArgsOf<'_> {
    fn str(&self, key: &str) -> Result<Option<String>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(format!("`{key}` must be a string, not {v}")),
        }
    }
    fn required(&self, key: &str) -> Result<String, String> {
        self.str(key)?.filter(|s| !s.trim().is_empty()).ok_or_else(|| format!("`{key}` is required"))
    }
    fn usize(&self, key: &str) -> Result<Option<usize>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(|n| Some(n as usize)).ok_or_else(|| format!("`{key}` must be a positive integer, not {v}")),
        }
    }
    fn strings(&self, key: &str) -> Result<Vec<String>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => {
                a.iter().map(|v| v.as_str().map(str::to_owned).ok_or_else(|| format!("`{key}` must be a list of strings"))).collect()
            }
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(v) => Err(format!("`{key}` must be a list of strings, not {v}")),
        }
    }
    fn known(&self, keys: &[&str]) -> Result<(), String> {
        match self.0.keys().find(|k| !keys.contains(&k.as_str())) {
            Some(k) => Err(format!("unknown argument `{k}` (this tool takes {})", keys.join(", "))),
            None => Ok(()),
        }
    }
}

impl LodeMcp {
    fn vault(&self, which: Option<&str>) -> Result<Arc<Engine>, String> {
        let Some(w) = which.filter(|w| !w.trim().is_empty()) else { return Ok(self.vaults[0].clone()) };
        let wanted = std::path::Path::new(w);
        self.vaults
            .iter()
            .find(|e| e.root == wanted || e.root.file_name().is_some_and(|n| n == w) || wanted.canonicalize().is_ok_and(|c| c == e.root))
            .cloned()
            .ok_or_else(|| {
                let names: Vec<String> = self.vaults.iter().map(|e| e.root.display().to_string()).collect();
                format!("no vault {w:?}; lode serves {}", names.join(", "))
            })
    }

    /// Runs one tool; `Err` is a tool error the agent sees.
    async fn call(&self, name: &str, args: &serde_json::Map<String, Value>) -> Result<Value, String> {
        let a = ArgsOf(args);
        let engine = self.vault(a.str("vault")?.as_deref())?;
        settle(&engine).await;
        let audience = self.audience.clone();
        match name {
            "search" => {
                a.known(&["query", "limit", "mode", "vault"])?;
                let query = a.required("query")?;
                let limit = a.usize("limit")?.unwrap_or(8);
                let m = a.str("mode")?.unwrap_or_else(|| "hybrid".into());
                let mode =
                    m.parse::<lode_retrieval::Mode>().map_err(|_| format!("`mode` is one of hybrid, lexical, dense, rerank, not {m:?}"))?;
                let found = blocking(move || engine.search(SearchRequest { query, limit, mode, audience })).await?;
                if found.withheld > 0 {
                    tracing::info!("search: {} passages withheld from the client by the egress rules", found.withheld);
                }
                serde_json::to_value(found).map_err(|e| e.to_string())
            }
            "ask" => {
                a.known(&["question", "note", "limit", "vault"])?;
                let question = a.required("question")?;
                if question.len() > 4096 {
                    return Err(format!("the question is {} bytes; at most 4096", question.len()));
                }
                let pinned = a.str("note")?;
                if pinned.as_deref().is_some_and(|n| n.trim().is_empty()) {
                    return Err("`note` is empty: give a note's path (vault-relative), or leave it out".into());
                }
                let limit = a.usize("limit")?;
                let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let _guard = lode_engine::CancelOnDrop(cancel.clone());
                let e = engine.clone();
                let answer =
                    blocking(move || e.ask(AskRequest { question, pinned, limit, cancel, audience, ..Default::default() })).await?;
                let mut answer = answer;
                if let Some(n) = engine.unsaved_notice(true) {
                    answer.notice = Some(answer.notice.take().map_or(n.clone(), |before| format!("{before} {n}")));
                }
                let markdown = lode_answer::render::markdown(&answer, "");
                let mut v = serde_json::to_value(&answer).map_err(|e| e.to_string())?;
                v["markdown"] = json!(markdown);
                if engine.scanning() {
                    v["index_partial"] = json!(true);
                }
                Ok(v)
            }
            "verify" => {
                a.known(&["claim", "quotes", "paths", "vault"])?;
                let claim = a.required("claim")?;
                let quotes = a.strings("quotes")?;
                let paths = a.strings("paths")?;
                let verdict = blocking(move || engine.verify(VerifyRequest { claim, quotes, paths, audience })).await?;
                serde_json::to_value(verdict).map_err(|e| e.to_string())
            }
            "read" => {
                a.known(&["path", "version", "start_line", "end_line", "vault"])?;
                let (path, version) = (a.str("path")?, a.str("version")?);
                let lines = match (a.usize("start_line")?, a.usize("end_line")?) {
                    (None, None) => None,
                    (s, e) => Some((s.unwrap_or(1), e.unwrap_or(usize::MAX))),
                };
                let read = blocking(move || engine.read(ReadRequest { path, version, lines, audience })).await?;
                serde_json::to_value(read).map_err(|e| e.to_string())
            }
            "status" => {
                a.known(&["vault"])?;
                let mut v = blocking(move || engine.status()).await?;
                if !matches!(self.audience, Audience::Local) {
                    // Counts that move as withheld notes are edited, and the paths of saves not
                    // indexed yet, are not for a reader off the machine.
                    for k in ["notes", "passages", "unsaved"] {
                        if let Some(o) = v.as_object_mut() {
                            o.remove(k);
                        }
                    }
                    if let Some(d) = v["dense"].as_object_mut() {
                        d.retain(|k, _| matches!(k.as_str(), "model" | "complete" | "lexical_only" | "resident" | "mended" | "switching"));
                    }
                }
                v["vaults"] = json!(self.vaults.iter().map(|e| e.root.clone()).collect::<Vec<_>>());
                v["client"] = json!(if matches!(self.audience, Audience::Local) {
                    "local ([trust] mcp_local)"
                } else {
                    "remote: the egress rules hold"
                });
                Ok(v)
            }
            other => Err(format!("no tool {other:?}; lode's tools are search, ask, verify, read, status")),
        }
    }
}

/// Longest tool error, in characters: an error may quote what it was given (a path, a value), and
/// a huge argument is not sent back whole.
const MAX_ERROR_CHARS: usize = 600;

fn shorten(why: &str) -> String {
    match why.char_indices().nth(MAX_ERROR_CHARS) {
        Some((at, _)) => format!("{}… ({} characters in all)", &why[..at], why.chars().count()),
        None => why.to_owned(),
    }
}

/// Waits (bounded) for a vault's first scan, so a call made as the server starts sees the notes.
async fn settle(engine: &Engine) {
    let started = std::time::Instant::now();
    while engine.scanning() && started.elapsed() < FIRST_SCAN_WAIT {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, String> + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        if e.is_panic() {
            "internal error: the call panicked (logged)".to_owned()
        } else {
            e.to_string()
        }
    })?
}

/// `lode://note/<path>` or `lode://version/<id>`, with `?vault=<name>` for another vault.
fn parse_uri(uri: &str) -> Option<(&'static str, String, Option<String>)> {
    let rest = uri.strip_prefix("lode://")?;
    let (rest, vault) = match rest.split_once("?vault=") {
        Some((r, v)) => (r, Some(lode_core::nav::percent_decode(v))),
        None => (rest, None),
    };
    let (kind, what) = rest.split_once('/')?;
    let kind = match kind {
        "note" => "note",
        "version" => "version",
        _ => return None,
    };
    Some((kind, lode_core::nav::percent_decode(what), vault))
}

fn percent_encode_path(p: &str) -> String {
    let mut out = String::new();
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl ServerHandler for LodeMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("lode", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(&self, _: Option<PaginatedRequestParams>, _: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(&self, request: CallToolRequestParams, _: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = match self.call(&request.name, &args).await {
            Ok(v) => CallToolResult::structured(v),
            Err(why) => CallToolResult::error(vec![ContentBlock::text(format!("lode: {}", shorten(&why)))]),
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut out = Vec::new();
        for (i, engine) in self.vaults.iter().enumerate() {
            settle(engine).await;
            let (e, audience) = (engine.clone(), self.audience.clone());
            let notes = blocking(move || e.notes_for(&audience)).await.map_err(|e| ErrorData::internal_error(e, None))?;
            let suffix = if i == 0 {
                String::new()
            } else {
                format!("?vault={}", engine.root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
            };
            for p in notes.items.into_iter().take(MAX_LISTED.saturating_sub(out.len())) {
                out.push(Resource::new(format!("lode://note/{}{suffix}", percent_encode_path(&p)), p).with_mime_type("text/markdown"));
            }
        }
        Ok(ListResourcesResult::with_all_items(out))
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("lode://note/{path}", "note")
                .with_description("A note's current version (vault-relative path)")
                .with_mime_type("text/markdown"),
            ResourceTemplate::new("lode://version/{id}", "version")
                .with_description("A stored version of a note, by id or prefix (as in a citation)")
                .with_mime_type("text/markdown"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some((kind, what, vault)) = parse_uri(&request.uri) else {
            return Err(ErrorData::invalid_params(
                format!("{} is not a lode resource (lode://note/<path> or lode://version/<id>)", request.uri),
                None,
            ));
        };
        let engine = self.vault(vault.as_deref()).map_err(|e| ErrorData::invalid_params(e, None))?;
        settle(&engine).await;
        let audience = self.audience.clone();
        let (path, version) = if kind == "note" { (Some(what), None) } else { (None, Some(what)) };
        let read =
            blocking(move || engine.read_whole(path, version, audience)).await.map_err(|e| ErrorData::resource_not_found(e, None))?;
        Ok(ReadResourceResult::new(vec![ResourceContents::text(read, request.uri).with_mime_type("text/markdown")]).into())
    }
}
