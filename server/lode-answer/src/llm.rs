//! An OpenAI-compatible chat-completions client (Ollama, llama.cpp's server, vLLM, hosted APIs)
//! and the defensive parsing of its answer into claims. Errors are for the user to read.

use std::time::Duration;

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
    /// Treat the endpoint as off-machine even when it is on loopback (e.g. a local proxy to a
    /// hosted API): egress rules, redaction and the egress log then apply. `None`: decide by host.
    pub remote: Option<bool>,
    pub max_tokens: u32,
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
}

impl LlmConfig {
    pub fn is_remote(&self) -> bool {
        self.remote.unwrap_or_else(|| !crate::egress::is_loopback(&self.endpoint))
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.endpoint.trim_end_matches('/'))
    }

    pub fn validate(&self) -> Result<(), LlmError> {
        if !(self.endpoint.starts_with("http://") || self.endpoint.starts_with("https://")) {
            return Err(LlmError::Config(format!("endpoint {:?} must start with http:// or https://", self.endpoint)));
        }
        if self.model.trim().is_empty() {
            return Err(LlmError::Config("model is empty".into()));
        }
        if let Some(var) = &self.api_key_env {
            if std::env::var(var).map(|v| v.trim().is_empty()).unwrap_or(true) {
                return Err(LlmError::Config(format!("environment variable {var} (api_key_env) is not set")));
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

    /// Posts a request body and returns the assistant message content.
    pub fn complete(&self, body: &str) -> Result<String, LlmError> {
        self.validate()?;
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(self.timeout_secs.max(1))))
                .http_status_as_error(false)
                .build(),
        );
        let key = self.api_key_env.as_ref().and_then(|v| std::env::var(v).ok());
        let attempts = self.retries + 1;
        let mut last = String::new();
        for attempt in 0..attempts {
            if attempt > 0 {
                // 0.5 s, 1 s, 2 s, … between attempts.
                std::thread::sleep(Duration::from_millis(500u64 << (attempt - 1).min(5)));
            }
            let mut req = agent.post(&self.url()).header("Content-Type", "application/json");
            if let Some(k) = &key {
                req = req.header("Authorization", &format!("Bearer {k}"));
            }
            let resp = match req.send(body) {
                Ok(r) => r,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let status = resp.status().as_u16();
            let text = match resp.into_body().with_config().limit(16 << 20).read_to_string() {
                Ok(t) => t,
                Err(e) => {
                    last = format!("reading the response: {e}");
                    continue;
                }
            };
            if status == 429 || status >= 500 {
                last = format!("HTTP {status}: {}", clip(&text));
                continue;
            }
            if status != 200 {
                return Err(LlmError::Status { endpoint: self.endpoint.clone(), status, body: clip(&text) });
            }
            return message_content(&text);
        }
        Err(LlmError::Unreachable { endpoint: self.endpoint.clone(), attempts, detail: last })
    }
}

fn clip(s: &str) -> String {
    let c: String = s.chars().take(300).collect();
    if c.len() < s.len() {
        format!("{c}…")
    } else {
        c
    }
}

/// The assistant's content from a chat-completions response.
pub fn message_content(response: &str) -> Result<String, LlmError> {
    let v: serde_json::Value = serde_json::from_str(response)
        .map_err(|e| LlmError::Malformed(format!("response is not JSON ({e}): {}", clip(response))))?;
    if let Some(err) = v.get("error") {
        return Err(LlmError::Malformed(format!("endpoint returned an error: {}", clip(&err.to_string()))));
    }
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

/// Parses the model's JSON into claims, mapping source labels (`S1`, …) to version ids with
/// `resolve`. Tolerates code fences, prose around the JSON and common key spellings; anything
/// else is an error. An unknown label is kept as written, so the gate drops that claim.
pub fn parse_claims(content: &str, resolve: impl Fn(&str) -> Option<String>) -> Result<Vec<Claim>, LlmError> {
    let start = content.find('{');
    let end = content.rfind('}');
    let json = match (start, end) {
        (Some(s), Some(e)) if s < e => &content[s..=e],
        _ => return Err(LlmError::Malformed(format!("no JSON object in the answer: {}", clip(content)))),
    };
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| LlmError::Malformed(format!("the answer's JSON does not parse ({e}): {}", clip(json))))?;
    let list = v
        .get("claims")
        .or_else(|| v.get("answer"))
        .and_then(|c| c.as_array())
        .ok_or_else(|| LlmError::Malformed(format!("the answer has no \"claims\" list: {}", clip(json))))?;
    let str_of = |o: &serde_json::Value, keys: &[&str]| {
        keys.iter().find_map(|k| o.get(*k).and_then(|x| x.as_str())).map(str::to_owned)
    };
    let mut claims = Vec::with_capacity(list.len());
    for item in list {
        let Some(text) = str_of(item, &["text", "claim", "statement"]) else {
            return Err(LlmError::Malformed(format!("a claim has no text: {}", clip(&item.to_string()))));
        };
        let mut support = Vec::new();
        let evidence = item.get("support").or_else(|| item.get("citations")).or_else(|| item.get("evidence"));
        for s in evidence.and_then(|e| e.as_array()).into_iter().flatten() {
            let label = str_of(s, &["source", "version_id", "id", "source_id"]).unwrap_or_default();
            let quote = str_of(s, &["quote", "quoted_span", "span", "text"]).unwrap_or_default();
            let version_id = resolve(label.trim()).unwrap_or(label);
            support.push(Support { version_id, quoted_span: quote });
        }
        claims.push(Claim { text, support });
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_defensively() {
        let resolve = |l: &str| (l == "S1").then(|| "v1".to_owned());
        let c = parse_claims("```json\n{\"claims\":[{\"claim\":\"X is 5\",\"citations\":[{\"source\":\"S1\",\"quote\":\"X is 5.\"}]}]}\n```", resolve).unwrap();
        assert_eq!(c[0].support[0].version_id, "v1");
        let c = parse_claims("{\"claims\":[{\"text\":\"Y\",\"support\":[{\"source\":\"S7\",\"quote\":\"q\"}]}]}", resolve).unwrap();
        assert_eq!(c[0].support[0].version_id, "S7", "unknown labels stay, and fail the span check");
        assert!(parse_claims("Sorry, I cannot help.", resolve).is_err());
        assert!(parse_claims("{\"claims\": [{\"text\": \"a\"", resolve).is_err());
        assert!(parse_claims("{\"result\": 1}", resolve).is_err());
        assert_eq!(parse_claims("{\"claims\": []}", resolve).unwrap(), vec![]);
    }

    #[test]
    fn response_envelope() {
        assert!(message_content("{\"choices\":[{\"finish_reason\":\"length\",\"message\":{\"content\":\"{\"}}]}").unwrap_err().to_string().contains("cut off"));
        assert_eq!(message_content("{\"choices\":[{\"message\":{\"content\":\"hi\"}}]}").unwrap(), "hi");
        assert!(message_content("<html>").is_err());
        assert!(message_content("{\"error\":{\"message\":\"bad key\"}}").unwrap_err().to_string().contains("bad key"));
    }
}
