//! An OpenAI-compatible chat-completions client (Ollama, llama.cpp's server, vLLM, hosted APIs)
//! and the defensive parsing of its answer into claims. Errors are for the user to read.

use std::time::Duration;

use lode_models::remote::clip;

use lode_core::gate::{Claim, Support};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Base URL of the API, e.g. `http://localhost:11434/v1` or `https://api.openai.com/v1`.
    pub endpoint: String,
    pub model: String,
    /// Name of the environment variable holding the API key (none: no Authorization header).
    pub api_key_env: Option<String>,
    pub timeout_secs: u64,
    /// Further attempts after a failed one (connection errors, 429 and 5xx only).
    pub retries: u32,
    /// `true`: treat the endpoint as off-machine even when it is on loopback (e.g. a local proxy
    /// to a hosted API), so egress rules, redaction and the egress log apply. `false` only counts
    /// for a loopback endpoint: any other host is remote whatever this says. `None`: decide by host.
    pub remote: Option<bool>,
    pub max_tokens: u32,
    /// The model supports OpenAI-style tool calls: it may call `fetch_url` during an answer.
    /// Every page it fetches is stored as a snapshot before it sees it, and cited like any other.
    pub tools: bool,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            endpoint: String::new(),
            model: String::new(),
            api_key_env: None,
            timeout_secs: 60,
            retries: 2,
            remote: None,
            max_tokens: 1024,
            tools: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("LLM settings: {0}")]
    Config(String),
    #[error("LLM endpoint {endpoint} unreachable after {attempts} attempts: {detail}")]
    Unreachable { endpoint: String, attempts: u32, detail: String },
    #[error("LLM endpoint {endpoint} answered HTTP {status}: {body}")]
    Status { endpoint: String, status: u16, body: String },
    #[error("LLM answer could not be used: {0}")]
    Malformed(String),
    #[error("cancelled")]
    Cancelled,
}

impl LlmConfig {
    /// Whether requests to this endpoint leave the machine. Only loopback is on the machine, and
    /// `remote` can only make things stricter: `remote = false` cannot declare a LAN or hosted
    /// endpoint local, since its text would leave the machine all the same.
    pub fn is_remote(&self) -> bool {
        self.remote == Some(true) || !crate::egress::is_loopback(&self.endpoint)
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.endpoint.trim_end_matches('/'))
    }

    pub fn validate(&self) -> Result<(), LlmError> {
        if !(self.endpoint.starts_with("http://") || self.endpoint.starts_with("https://")) {
            return Err(LlmError::Config(format!("endpoint {:?} must start with http:// or https://", self.endpoint)));
        }
        // Where such a URL's host ends is up to the parser; egress decisions need one answer.
        if self.endpoint.contains(|c: char| c == '\\' || c.is_whitespace()) {
            return Err(LlmError::Config(format!("endpoint {:?} must not contain spaces or backslashes", self.endpoint)));
        }
        if self.model.trim().is_empty() {
            return Err(LlmError::Config("model is empty".into()));
        }
        if let Some(var) = &self.api_key_env {
            if std::env::var(var).map(|v| v.trim().is_empty()).unwrap_or(true) {
                return Err(LlmError::Config(format!("environment variable {var} (api_key_env) is not set")));
            }
            // A key crosses a network only encrypted: over https, or not at all (loopback).
            if !self.endpoint.to_ascii_lowercase().starts_with("https://") && !crate::egress::is_loopback(&self.endpoint) {
                return Err(LlmError::Config(format!(
                    "endpoint {} is plain http and not on this machine: lode sends the key in {var} only over https or to loopback",
                    self.endpoint
                )));
            }
        }
        Ok(())
    }

    /// The request body for these messages: exactly the bytes that will be sent.
    pub fn request_body(&self, system: &str, user: &str) -> String {
        serde_json::json!({
            "model": self.model,
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        })
        .to_string()
    }

    /// A request body for a conversation (with tool results), offering `tools` when given
    /// (then without `response_format`: servers that take tools often refuse both).
    pub fn request_body_with(&self, messages: &[serde_json::Value], tools: Option<&serde_json::Value>) -> String {
        let mut v = serde_json::json!({
            "model": self.model,
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "messages": messages,
        });
        match tools {
            Some(t) => {
                v["tools"] = t.clone();
                v["tool_choice"] = "auto".into();
            }
            None => v["response_format"] = serde_json::json!({"type": "json_object"}),
        }
        v.to_string()
    }

    /// [`LlmConfig::complete_cancellable`], returning the whole assistant turn: its content and
    /// the tool calls it asks for.
    pub fn turn_cancellable(&self, body: &str, cancel: Option<&std::sync::atomic::AtomicBool>) -> Result<Turn, LlmError> {
        self.raw_cancellable(body, cancel).and_then(|raw| assistant_turn(&raw))
    }

    /// [`LlmConfig::complete`], abandoned as soon as `cancel` is set: the caller gets
    /// [`LlmError::Cancelled`] within 25 ms and frees what it holds; the request itself runs
    /// out on its own thread (bounded by `timeout_secs`).
    pub fn complete_cancellable(&self, body: &str, cancel: Option<&std::sync::atomic::AtomicBool>) -> Result<String, LlmError> {
        self.raw_cancellable(body, cancel).and_then(|raw| message_content(&raw))
    }

    /// Posts `body`; the raw response text.
    fn raw_cancellable(&self, body: &str, cancel: Option<&std::sync::atomic::AtomicBool>) -> Result<String, LlmError> {
        use std::sync::atomic::Ordering;
        let Some(cancel) = cancel else {
            self.validate()?;
            return self.complete_with(&self.agent(), body);
        };
        if cancel.load(Ordering::SeqCst) {
            return Err(LlmError::Cancelled);
        }
        self.validate()?;
        let (tx, rx) = std::sync::mpsc::channel();
        let agent = self.agent();
        let (cfg, body, request_agent) = (self.clone(), body.to_owned(), agent.clone());
        std::thread::Builder::new()
            .name("lode-llm".into())
            .spawn(move || {
                let _ = tx.send(cfg.complete_with(&request_agent, &body));
            })
            .map_err(|e| LlmError::Unreachable { endpoint: self.endpoint.clone(), attempts: 0, detail: e.to_string() })?;
        loop {
            match rx.recv_timeout(Duration::from_millis(25)) {
                Ok(r) => return r,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if cancel.load(Ordering::SeqCst) => {
                    // Closes the connection: the endpoint sees the client go away and can stop
                    // generating; the request thread ends with an I/O error nobody waits for.
                    agent.shutdown();
                    return Err(LlmError::Cancelled);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(LlmError::Unreachable {
                        endpoint: self.endpoint.clone(),
                        attempts: 0,
                        detail: "the request thread ended".into(),
                    })
                }
            }
        }
    }

    /// Posts a request body and returns the assistant message content.
    pub fn complete(&self, body: &str) -> Result<String, LlmError> {
        self.validate()?;
        self.complete_with(&self.agent(), body).and_then(|raw| message_content(&raw))
    }

    /// Whether the endpoint answers at all: `GET {endpoint}/models` (the OpenAI-compatible model
    /// list), one attempt, at most 5 s. Ok with a one-line description of what answered.
    pub fn probe(&self) -> Result<String, LlmError> {
        self.validate()?;
        // No redirects: the key and the notes go to the endpoint named, never on to another host.
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(5))).http_status_as_error(false).max_redirects(0).build(),
        );
        let url = format!("{}/models", self.endpoint.trim_end_matches('/'));
        let mut req = agent.get(&url);
        if let Some(k) = self.api_key_env.as_ref().and_then(|v| std::env::var(v).ok()) {
            req = req.header("Authorization", &format!("Bearer {k}"));
        }
        let resp = req.call().map_err(|e| LlmError::Unreachable { endpoint: self.endpoint.clone(), attempts: 1, detail: e.to_string() })?;
        let status = resp.status().as_u16();
        let text = resp.into_body().with_config().limit(1 << 20).read_to_string().unwrap_or_default();
        match status {
            200 => Ok(format!("HTTP 200 from {url}")),
            // Some servers have no model list; an HTTP answer still shows the endpoint is up.
            404 | 405 => Ok(format!("HTTP {status} from {url} (no model list; the endpoint answers)")),
            _ => Err(LlmError::Status { endpoint: self.endpoint.clone(), status, body: clip(&text) }),
        }
    }

    fn agent(&self) -> ureq::Agent {
        ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(self.timeout_secs.max(1))))
                .http_status_as_error(false)
                // No redirects: the key and the notes go to the endpoint named, never on to
                // another host (a 307 would resend the body there).
                .max_redirects(0)
                .build(),
        )
    }

    fn complete_with(&self, agent: &ureq::Agent, body: &str) -> Result<String, LlmError> {
        let key = self.api_key_env.as_ref().and_then(|v| std::env::var(v).ok());
        let attempts = self.retries + 1;
        match lode_models::remote::post_retrying(agent, &self.url(), key.as_deref(), body, attempts, 16 << 20) {
            Ok((200, text)) => Ok(text),
            Ok((status, text)) => Err(LlmError::Status { endpoint: self.endpoint.clone(), status, body: clip(&text) }),
            Err(last) => Err(LlmError::Unreachable { endpoint: self.endpoint.clone(), attempts, detail: last.to_string() }),
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text, not trusted to parse).
    pub arguments: String,
}

/// One assistant turn: what it said, the tools it asked to call, and the message itself (sent
/// back with the tool results).
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub message: serde_json::Value,
}

/// Most tool calls read from one turn.
pub const MAX_TOOL_CALLS: usize = 4;

/// The assistant turn of a chat-completions response. Tool calls with no name are dropped;
/// at most [`MAX_TOOL_CALLS`] are kept; a turn with neither content nor tool calls is malformed.
pub fn assistant_turn(response: &str) -> Result<Turn, LlmError> {
    let v = response_json(response)?;
    let received = v
        .get("choices")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("message"))
        .ok_or_else(|| LlmError::Malformed(format!("no message in response: {}", clip(response))))?;
    let content = received.get("content").and_then(|c| c.as_str()).map(str::to_owned);
    let mut tool_calls = Vec::new();
    for (i, call) in received.get("tool_calls").and_then(|t| t.as_array()).into_iter().flatten().enumerate() {
        let f = call.get("function").unwrap_or(call);
        let Some(name) = f.get("name").and_then(|n| n.as_str()) else { continue };
        let arguments = match f.get("arguments") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let id = call.get("id").and_then(|x| x.as_str()).map(str::to_owned).unwrap_or_else(|| format!("call_{i}"));
        tool_calls.push(ToolCall { id, name: name.to_owned(), arguments });
        if tool_calls.len() == MAX_TOOL_CALLS {
            break;
        }
    }
    // Sent back with the tool results: only the calls kept, with the ids they are answered by
    // (a server refuses a conversation whose tool calls and results do not pair up).
    let message = serde_json::json!({
        "role": "assistant",
        "content": content,
        "tool_calls": tool_calls.iter().map(|c| serde_json::json!({
            "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}
        })).collect::<Vec<_>>(),
    });
    if content.is_none() && tool_calls.is_empty() {
        if v["choices"][0]["finish_reason"].as_str() == Some("length") {
            return Err(LlmError::Malformed("the answer was cut off (finish_reason: length); raise max_tokens".into()));
        }
        return Err(LlmError::Malformed("the response has no message content".into()));
    }
    Ok(Turn { content, tool_calls, message })
}

/// A chat-completions response as JSON, unless it is not JSON or reports an error.
fn response_json(response: &str) -> Result<serde_json::Value, LlmError> {
    let v: serde_json::Value =
        serde_json::from_str(response).map_err(|e| LlmError::Malformed(format!("response is not JSON ({e}): {}", clip(response))))?;
    if let Some(err) = v.get("error") {
        return Err(LlmError::Malformed(format!("endpoint returned an error: {}", clip(&err.to_string()))));
    }
    Ok(v)
}

/// The assistant's content from a chat-completions response.
pub fn message_content(response: &str) -> Result<String, LlmError> {
    let v = response_json(response)?;
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| LlmError::Malformed(format!("no choices in response: {}", clip(response))))?;
    if choice.get("finish_reason").and_then(|f| f.as_str()) == Some("length") {
        return Err(LlmError::Malformed("the answer was cut off (finish_reason: length); raise max_tokens".into()));
    }
    choice
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(|c| c.as_str())
        .map(str::to_owned)
        .ok_or_else(|| LlmError::Malformed("the response has no message content".into()))
}

/// Claims read from a model's answer, and the items that could not be read as claims (their
/// text, or a description, and why), so one malformed item drops itself, not the answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub claims: Vec<Claim>,
    pub problems: Vec<(String, String)>,
}

/// Most items read from one answer; the gate reads fewer still.
const MAX_ITEMS: usize = 64;
/// Longest quote kept from a model's answer, in bytes (the gate refuses long quotes anyway).
const MAX_QUOTE: usize = 4096;

/// Parses the model's answer into claims, mapping source labels (`S1`, …) to version ids with
/// `resolve`. Tolerant of what real models write: code fences, prose around the JSON, several
/// JSON values (the first with a claims list wins), a bare list, common key spellings, a single
/// support object instead of a list, numeric labels, label markers in the claim text. An unknown
/// label is kept as written, so the gate drops that claim. Only an answer with no claims list at
/// all is an error ([`LlmError::Malformed`]). Never panics, whatever the bytes.
pub fn parse_claims(content: &str, resolve: impl Fn(&str) -> Option<String>) -> Result<Parsed, LlmError> {
    let Some(list) = claims_list(content) else {
        return Err(LlmError::Malformed(format!("no JSON object with a \"claims\" list in the answer: {}", clip(content))));
    };
    let str_of = |o: &serde_json::Value, keys: &[&str]| keys.iter().find_map(|k| o.get(*k).and_then(|x| x.as_str())).map(str::to_owned);
    let mut out = Parsed::default();
    for (n, item) in list.iter().enumerate() {
        if n >= MAX_ITEMS {
            out.problems.push((format!("{} more items", list.len() - n), format!("only the first {MAX_ITEMS} items are read")));
            break;
        }
        let Some(text) = str_of(item, &["text", "claim", "statement"]) else {
            out.problems.push((clip(&item.to_string()), "the item has no claim text".to_owned()));
            continue;
        };
        let text = strip_labels(&text);
        let mut support = Vec::new();
        let evidence = ["support", "citations", "evidence", "sources", "quotes"].iter().find_map(|k| item.get(*k));
        let entries: Vec<&serde_json::Value> = match evidence {
            Some(serde_json::Value::Array(a)) => a.iter().collect(),
            Some(o @ serde_json::Value::Object(_)) => vec![o],
            _ => Vec::new(),
        };
        for s in entries.into_iter().take(8) {
            let label = match ["source", "version_id", "id", "source_id"].iter().find_map(|k| s.get(*k)) {
                Some(serde_json::Value::String(l)) => l.clone(),
                Some(serde_json::Value::Number(n)) => format!("S{n}"),
                _ => String::new(),
            };
            let quote = str_of(s, &["quote", "quoted_span", "span", "text"]).unwrap_or_default();
            let quote =
                if quote.len() > MAX_QUOTE { quote[..lode_core::text::floor_char_boundary(&quote, MAX_QUOTE)].to_owned() } else { quote };
            let version_id = resolve(label.trim()).unwrap_or(label);
            support.push(Support { version_id, quoted_span: quote });
        }
        out.claims.push(Claim { text, support });
    }
    Ok(out)
}

/// The claims list in a model's answer: the first JSON value in it (an object with a claims-like
/// key, or a bare list) that has one.
fn claims_list(content: &str) -> Option<Vec<serde_json::Value>> {
    const KEYS: &[&str] = &["claims", "answer", "answers", "statements"];
    // Try from each `{` or `[` (at most 64 of them): the first complete value there.
    for (i, _) in content.char_indices().filter(|&(_, c)| c == '{' || c == '[').take(64) {
        let mut values = serde_json::Deserializer::from_str(&content[i..]).into_iter::<serde_json::Value>();
        let Some(Ok(v)) = values.next() else { continue };
        match &v {
            serde_json::Value::Object(o) => {
                if let Some(list) = KEYS.iter().find_map(|k| o.get(*k).and_then(|l| l.as_array())) {
                    return Some(list.clone());
                }
            }
            serde_json::Value::Array(a) if a.iter().all(|x| x.is_object()) && !a.is_empty() => return Some(a.clone()),
            _ => {}
        }
    }
    None
}

/// Removes source-label markers a model puts in its claim text ("… [S1]", "(S2, S3)").
fn strip_labels(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['[', '(', '【']) {
        let open = rest[i..].chars().next().unwrap_or('[');
        let close = match open {
            '[' => ']',
            '(' => ')',
            _ => '】',
        };
        let inner_start = i + open.len_utf8();
        match rest[inner_start..].find(close) {
            Some(j) if is_label_list(&rest[inner_start..inner_start + j]) => {
                out.push_str(rest[..i].trim_end());
                rest = &rest[inner_start + j + close.len_utf8()..];
            }
            _ => {
                out.push_str(&rest[..inner_start]);
                rest = &rest[inner_start..];
            }
        }
    }
    out.push_str(rest);
    out.trim().to_owned()
}

fn is_label_list(s: &str) -> bool {
    !s.trim().is_empty()
        && s.split([',', ';', ' ']).filter(|p| !p.is_empty()).all(|p| {
            let p = p.trim();
            p.len() >= 2 && p.starts_with(['S', 's']) && p[1..].bytes().all(|b| b.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_defensively() {
        let resolve = |l: &str| (l == "S1").then(|| "v1".to_owned());
        let c = parse_claims(
            "```json\n{\"claims\":[{\"claim\":\"X is 5 [S1]\",\"citations\":[{\"source\":\"S1\",\"quote\":\"X is 5.\"}]}]}\n```",
            resolve,
        )
        .unwrap()
        .claims;
        assert_eq!(c[0].support[0].version_id, "v1");
        assert_eq!(c[0].text, "X is 5", "label markers are not part of the claim");
        let c = parse_claims("{\"claims\":[{\"text\":\"Y\",\"support\":[{\"source\":\"S7\",\"quote\":\"q\"}]}]}", resolve).unwrap().claims;
        assert_eq!(c[0].support[0].version_id, "S7", "unknown labels stay, and fail the span check");
        assert!(parse_claims("Sorry, I cannot help.", resolve).is_err());
        assert!(parse_claims("{\"claims\": [{\"text\": \"a\"", resolve).is_err());
        assert!(parse_claims("{\"result\": 1}", resolve).is_err());
        assert!(parse_claims("{}", resolve).is_err(), "a real small model answered {{}}");
        assert_eq!(parse_claims("{\"claims\": []}", resolve).unwrap(), Parsed::default());
        // One malformed item drops itself, not the answer; numeric labels and single objects.
        let p = parse_claims(
            "Here: {\"claims\": [{\"text\": 5}, {\"text\": \"Z\", \"support\": {\"source\": 1, \"quote\": \"z\"}}]} and {\"x\": 1}",
            resolve,
        )
        .unwrap();
        assert_eq!(p.claims.len(), 1);
        assert_eq!(p.claims[0].support[0].version_id, "v1");
        assert_eq!(p.problems.len(), 1);
        // A label like "S1 — S2" is kept as written (and fails the span check), never sliced.
        let p =
            parse_claims("{\"claims\": [{\"text\": \"W\", \"support\": [{\"source\": \"S1 — S2\", \"quote\": \"w\"}]}]}", resolve).unwrap();
        assert_eq!(p.claims[0].support[0].version_id, "S1 — S2");
        assert_eq!(strip_labels("A (S1, S2) b [x] c【S3】"), "A b [x] c");
    }

    #[test]
    fn remote_unless_loopback() {
        let cfg = |endpoint: &str, remote| LlmConfig { endpoint: endpoint.into(), remote, ..Default::default() };
        let cases = [
            ("http://127.0.0.1:8080/v1", None, false),
            ("http://127.0.0.1:8080/v1", Some(false), false),
            ("http://localhost:11434/v1", Some(true), true),
            ("http://[::1]:9/v1", Some(true), true),
            ("https://api.openai.com/v1", None, true),
            ("https://api.openai.com/v1", Some(false), true),
            ("http://192.168.1.5:8000/v1", Some(false), true),
            ("http://localhost.evil.com/v1", Some(false), true),
            // A backslash makes the host ambiguous (evil.com for URL parsers), so it is remote.
            ("http://evil.com\\@127.0.0.1/v1", Some(false), true),
            ("http://127.0.0.1\\@evil.com/v1", Some(false), true),
        ];
        for (endpoint, remote, want) in cases {
            assert_eq!(cfg(endpoint, remote).is_remote(), want, "{endpoint} remote={remote:?}");
        }
        let bad = LlmConfig { endpoint: "http://evil.com\\@127.0.0.1/v1".into(), model: "m".into(), ..Default::default() };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "LLM settings: endpoint \"http://evil.com\\\\@127.0.0.1/v1\" must not contain spaces or backslashes"
        );
    }

    #[test]
    fn response_envelope() {
        assert!(message_content("{\"choices\":[{\"finish_reason\":\"length\",\"message\":{\"content\":\"{\"}}]}")
            .unwrap_err()
            .to_string()
            .contains("cut off"));
        assert_eq!(message_content("{\"choices\":[{\"message\":{\"content\":\"hi\"}}]}").unwrap(), "hi");
        assert!(message_content("<html>").is_err());
        assert!(message_content("{\"error\":{\"message\":\"bad key\"}}").unwrap_err().to_string().contains("bad key"));
    }
}

#[cfg(test)]
mod fuzz {
    //! The response parser on 10,000 random and mutated inputs: it never panics, and whatever it
    //! returns is bounded.
    use super::*;

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545F4914F6CDD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    const SEEDS: &[&str] = &[
        r#"{"claims":[{"text":"Certs rotate every 60 days","support":[{"source":"S1","quote":"rotated every 60 days"}]}]}"#,
        r#"```json
{"claims":[{"claim":"A","citations":[{"source":"S2","quote":"B"}]},{"text":"C","support":{"source":2,"quote":"D"}}]}
```"#,
        r#"{"answer":[{"statement":"é ü 日本","evidence":[{"id":"S1 — S2","span":"ß"}]}]}"#,
        r#"[{"text":"x","support":[{"source":"S1","quote":"words copied exactly from that source"}]}]"#,
        "{}",
        "Sorry, I can't help with that.",
    ];
    const NOISE: &[&str] = &[
        "{", "}", "[", "]", "\"", ":", ",", "\\", r"\u0000", "é", "日", "—", "S1", "null", "1e999", "-0", "\n", "claims", "[S1]", "(S2)",
        "【S3】",
    ];

    #[test]
    fn parser_never_panics_on_random_or_mutated_answers() {
        let mut rng = Rng(0x9E3779B97F4A7C15);
        let resolve = |l: &str| (l == "S1").then(|| "v1".to_owned());
        for case in 0..10_000 {
            let mut s: String = if case % 3 == 0 {
                // Random: noise tokens and random chars.
                (0..rng.below(40))
                    .map(|_| {
                        if rng.below(2) == 0 {
                            NOISE[rng.below(NOISE.len())].to_owned()
                        } else {
                            char::from_u32(rng.below(0x3000) as u32).unwrap_or('?').to_string()
                        }
                    })
                    .collect()
            } else {
                SEEDS[rng.below(SEEDS.len())].to_owned()
            };
            // Mutations at char boundaries: insert, delete, duplicate a slice.
            for _ in 0..rng.below(6) {
                let cuts: Vec<usize> = s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
                let a = cuts[rng.below(cuts.len())];
                let b = cuts[rng.below(cuts.len())];
                let (a, b) = (a.min(b), a.max(b));
                match rng.below(3) {
                    0 => s.insert_str(a, NOISE[rng.below(NOISE.len())]),
                    1 => s.replace_range(a..b, ""),
                    _ => {
                        let dup = s[a..b].to_owned();
                        s.insert_str(b, &dup);
                    }
                }
            }
            if let Ok(p) = parse_claims(&s, resolve) {
                assert!(p.claims.len() <= MAX_ITEMS, "{s}");
                assert!(p.claims.iter().all(|c| c.support.len() <= 8 && c.support.iter().all(|q| q.quoted_span.len() <= MAX_QUOTE)));
            }
            let _ = message_content(&s);
            if let Ok(t) = assistant_turn(&s) {
                assert!(t.tool_calls.len() <= MAX_TOOL_CALLS);
            }
        }
    }

    #[test]
    fn tool_calls_are_read_defensively() {
        let call = |calls: serde_json::Value| {
            serde_json::json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": calls}}]}).to_string()
        };
        let t = assistant_turn(&call(serde_json::json!([{"id": "a", "type": "function", "function": {"name": "fetch_url", "arguments": "{\"url\": \"https://x.example/\"}"}}]))).unwrap();
        assert_eq!(
            t.tool_calls,
            [ToolCall { id: "a".into(), name: "fetch_url".into(), arguments: "{\"url\": \"https://x.example/\"}".into() }]
        );
        // Arguments as an object (some servers), no id, no name (dropped), too many calls.
        let t = assistant_turn(&call(
            serde_json::json!([{"function": {"name": "fetch_url", "arguments": {"url": "u"}}}, {"function": {"arguments": "{}"}}]),
        ))
        .unwrap();
        assert_eq!((t.tool_calls.len(), t.tool_calls[0].id.as_str(), t.tool_calls[0].arguments.as_str()), (1, "call_0", "{\"url\":\"u\"}"));
        let many: Vec<serde_json::Value> =
            (0..50).map(|i| serde_json::json!({"id": format!("c{i}"), "function": {"name": "fetch_url", "arguments": "{}"}})).collect();
        assert_eq!(assistant_turn(&call(serde_json::json!(many))).unwrap().tool_calls.len(), MAX_TOOL_CALLS);
        assert!(assistant_turn(&call(serde_json::json!("not a list"))).is_err(), "no content and no calls");
        assert!(assistant_turn(&call(serde_json::json!([{"function": {}}]))).is_err());
    }
}
