//! An embedder the user already runs: any server answering OpenAI's `POST /v1/embeddings`
//! (Ollama, LM Studio, llama.cpp's server, vLLM, a hosted API), in batches, with retries.
//!
//! Invariants: the endpoint and the key's variable come from the user's own config (the `lode`
//! binary enforces it); the key is read from the environment at each request and goes to the
//! endpoint named, never through a redirect; when the endpoint is off the machine no text
//! leaves without going through [`HttpConfig::scrub`] (fail closed: none set, nothing sent).

use std::sync::Arc;
use std::time::Duration;

use crate::ModelError;

/// Masks what must not leave the machine (secrets) in a text about to be sent; returns the text
/// and how many spans it masked.
pub type Scrub = Arc<dyn Fn(&str) -> (String, usize) + Send + Sync>;

/// Inputs per request unless the config says otherwise.
pub const DEFAULT_BATCH: usize = 32;
/// Longest response body read (a batch of 32 vectors of 4,096 floats as JSON is about 3 MB).
const MAX_RESPONSE: u64 = 64 << 20;
/// Most characters of an input sent: servers reject or truncate past their context anyway, and a
/// passage window is far shorter (this only bounds a pathological one).
const MAX_INPUT_CHARS: usize = 32_000;

#[derive(Clone)]
pub struct HttpConfig {
    /// The model name the server knows (`nomic-embed-text`, `text-embedding-3-small`).
    pub model: String,
    /// The API base, e.g. `http://127.0.0.1:11434/v1`; requests go to `{url}/embeddings`.
    pub url: String,
    /// Environment variable holding the bearer token, if the server wants one.
    pub api_key_env: Option<String>,
    pub batch: usize,
    pub timeout: Duration,
    /// Attempts after the first for a failure worth retrying (no answer, HTTP 429 or 5xx).
    pub retries: u32,
    /// Whatever is sent leaves this machine (the endpoint is not loopback, or the user said it is
    /// a tunnel): every text goes through `scrub` first.
    pub off_machine: bool,
    pub scrub: Option<Scrub>,
    /// Prefixes some models want (`search_query: `, `search_document: `).
    pub query_prefix: String,
    pub passage_prefix: String,
    /// Model tokens one input may hold (windows are planned within it).
    pub max_tokens: usize,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("model", &self.model)
            .field("url", &self.url)
            .field("api_key_env", &self.api_key_env)
            .field("batch", &self.batch)
            .field("off_machine", &self.off_machine)
            .finish_non_exhaustive()
    }
}

impl HttpConfig {
    pub fn new(model: &str, url: &str) -> HttpConfig {
        HttpConfig {
            model: model.trim().to_owned(),
            url: url.trim().trim_end_matches('/').to_owned(),
            api_key_env: None,
            batch: DEFAULT_BATCH,
            timeout: Duration::from_secs(60),
            retries: 3,
            off_machine: true,
            scrub: None,
            query_prefix: String::new(),
            passage_prefix: String::new(),
            max_tokens: 512,
        }
    }

    /// The id vectors are recorded under: the model and the endpoint that made them, so another
    /// server (or another model behind the same one) is a switch, never a silent mix.
    pub fn id(&self) -> String {
        format!("openai:{}@{}", self.model, self.url)
    }

    fn endpoint(&self) -> String {
        format!("{}/embeddings", self.url)
    }
}

pub(crate) struct HttpEmbedder {
    pub(crate) config: HttpConfig,
    agent: ureq::Agent,
    pub(crate) dims: usize,
}

impl HttpEmbedder {
    /// Checks the config and asks the server for one vector, which gives the dimensions.
    pub(crate) fn connect(config: HttpConfig) -> Result<HttpEmbedder, ModelError> {
        let bad = |detail: String| ModelError::Remote { endpoint: config.url.clone(), detail };
        if config.model.is_empty() {
            return Err(bad("no model named: write `[models] embedder = \"openai:<model>\"`".into()));
        }
        let scheme_ok = config.url.starts_with("http://") || config.url.starts_with("https://");
        if !scheme_ok {
            return Err(bad("the endpoint must be an http:// or https:// URL, e.g. http://127.0.0.1:11434/v1".into()));
        }
        if config.off_machine && config.scrub.is_none() {
            return Err(bad("the endpoint is off this machine and no egress filter is set: nothing is sent".into()));
        }
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .timeout_global(Some(config.timeout.max(Duration::from_secs(1))))
                .http_status_as_error(false)
                // The key and the notes go to the endpoint named, never on to another host.
                .max_redirects(0)
                .build(),
        );
        // One retry for the probe: a server that is not there is said at once, not after the
        // back-off a busy one gets.
        let retries = config.retries;
        let mut e = HttpEmbedder { config: HttpConfig { retries: retries.min(1), ..config }, agent, dims: 0 };
        let probe = e.embed(&["lode".to_owned()])?;
        e.dims = probe.first().map_or(0, Vec::len);
        e.config.retries = retries;
        Ok(e)
    }

    /// Vectors for `texts`, in order, in requests of at most `batch` inputs; each unit length.
    pub(crate) fn embed(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let batch = self.config.batch.max(1);
        let batches = texts.len().div_ceil(batch);
        let mut out = Vec::with_capacity(texts.len());
        for (n, chunk) in texts.chunks(batch).enumerate() {
            let sent: Vec<String> = chunk.iter().map(|t| self.outgoing(t)).collect::<Result<_, _>>()?;
            let vectors = self.request(&sent).map_err(|detail| ModelError::Remote {
                endpoint: self.config.url.clone(),
                detail: if batches > 1 { format!("batch {} of {batches} ({} inputs): {detail}", n + 1, chunk.len()) } else { detail },
            })?;
            out.extend(vectors);
        }
        Ok(out)
    }

    /// The text as it may be sent: scrubbed when it leaves the machine, bounded in length.
    fn outgoing(&self, text: &str) -> Result<String, ModelError> {
        let text = if self.config.off_machine {
            match &self.config.scrub {
                Some(s) => s(text).0,
                None => {
                    return Err(ModelError::Remote {
                        endpoint: self.config.url.clone(),
                        detail: "no egress filter set: nothing is sent".into(),
                    })
                }
            }
        } else {
            text.to_owned()
        };
        Ok(match text.char_indices().nth(MAX_INPUT_CHARS) {
            Some((cut, _)) => text[..cut].to_owned(),
            None => text,
        })
    }

    /// One batch, with retries: the vectors, or why not (said once per batch).
    fn request(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, String> {
        // Empty inputs are refused by some servers: a single space embeds as "nothing".
        let input: Vec<&str> = inputs.iter().map(|s| if s.trim().is_empty() { " " } else { s.as_str() }).collect();
        let body = serde_json::json!({ "model": self.config.model, "input": input, "encoding_format": "float" }).to_string();
        let key = self.config.api_key_env.as_ref().and_then(|v| std::env::var(v).ok());
        let attempts = self.config.retries + 1;
        match post_retrying(&self.agent, &self.config.endpoint(), key.as_deref(), &body, attempts, MAX_RESPONSE) {
            Ok((200, text)) => parse(&text, inputs.len(), self.dims),
            Ok((status, text)) => {
                let hint = match status {
                    401 | 403 => " (check the key: [models] embedder_api_key_env names the variable that holds it)",
                    404 => " (is the URL the API base, ending in /v1, and is the model pulled on that server?)",
                    _ => "",
                };
                Err(format!("HTTP {status}{hint}: {}", clip(&text)))
            }
            Err(Failed::NoAnswer(e)) => Err(format!("no answer: {e} (after {attempts} attempts)")),
            Err(last) => Err(format!("{last} (after {attempts} attempts)")),
        }
    }
}

/// The vectors of an embeddings response, in input order, unit length. Refused: a count that is
/// not the number of inputs, an index out of range or repeated, vectors of different lengths or
/// of a length other than `dims` (once known), non-finite or all-zero values.
pub(crate) fn parse(text: &str, n: usize, dims: usize) -> Result<Vec<Vec<f32>>, String> {
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(default)]
        index: Option<usize>,
        embedding: Vec<f64>,
    }
    #[derive(serde::Deserialize)]
    struct Body {
        data: Vec<Item>,
    }
    let body: Body = serde_json::from_str(text).map_err(|e| format!("not an embeddings response ({e}): {}", clip(text)))?;
    if body.data.len() != n {
        return Err(format!("{} vectors for {n} inputs", body.data.len()));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (pos, item) in body.data.into_iter().enumerate() {
        let i = item.index.unwrap_or(pos);
        if i >= n || out[i].is_some() {
            return Err(format!("vector index {i} is out of range or repeated"));
        }
        let want = if dims > 0 { dims } else { out.iter().flatten().next().map_or(item.embedding.len(), Vec::len) };
        if item.embedding.is_empty() || item.embedding.len() != want {
            return Err(format!("a vector of {} dimensions where {want} were expected", item.embedding.len()));
        }
        let mut v: Vec<f32> = item.embedding.iter().map(|&x| x as f32).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if !norm.is_finite() {
            return Err("a vector holds a value that is not a finite 32-bit number".into());
        }
        if norm == 0.0 {
            return Err("an all-zero vector".into());
        }
        v.iter_mut().for_each(|x| *x /= norm);
        out[i] = Some(v);
    }
    Ok(out.into_iter().map(|v| v.expect("every index filled: n items, none repeated")).collect())
}

/// Why the last attempt of [`post_retrying`] failed.
#[derive(Debug)]
pub enum Failed {
    /// No answer (connection refused, timeout, TLS): the transport's words.
    NoAnswer(String),
    /// An answer whose body could not be read whole.
    Unreadable(String),
    /// HTTP 429 or 5xx, with the body, clipped.
    Busy(u16, String),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::NoAnswer(e) => write!(f, "{e}"),
            Failed::Unreadable(e) => write!(f, "reading the response: {e}"),
            Failed::Busy(status, body) => write!(f, "HTTP {status}: {body}"),
        }
    }
}

/// POSTs the JSON `body` to `url` (with `key` as a bearer token) up to `attempts` times: again
/// after no answer, an unreadable body, HTTP 429 or 5xx, 0.5 s, 1 s, 2 s, … apart. Returns the
/// first other answer, status and body (at most `limit` bytes), or why the last attempt failed.
/// For every OpenAI-compatible endpoint lode calls (embeddings here, chat in `lode-answer`).
pub fn post_retrying(
    agent: &ureq::Agent,
    url: &str,
    key: Option<&str>,
    body: &str,
    attempts: u32,
    limit: u64,
) -> Result<(u16, String), Failed> {
    let mut last = Failed::NoAnswer("not tried".into());
    for attempt in 0..attempts.max(1) {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(500u64 << (attempt - 1).min(5)));
        }
        let mut req = agent.post(url).header("Content-Type", "application/json");
        if let Some(k) = key {
            req = req.header("Authorization", &format!("Bearer {k}"));
        }
        let resp = match req.send(body) {
            Ok(r) => r,
            Err(e) => {
                last = Failed::NoAnswer(e.to_string());
                continue;
            }
        };
        let status = resp.status().as_u16();
        let text = match resp.into_body().with_config().limit(limit).read_to_string() {
            Ok(t) => t,
            Err(e) => {
                last = Failed::Unreadable(e.to_string());
                continue;
            }
        };
        if status == 429 || status >= 500 {
            last = Failed::Busy(status, clip(&text));
            continue;
        }
        return Ok((status, text));
    }
    Err(last)
}

/// At most 300 characters of `s`, with an ellipsis when cut: a reply quoted in an error.
pub fn clip(s: &str) -> String {
    let c: String = s.chars().take(300).collect();
    if c.len() < s.len() {
        format!("{c}…")
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn responses_that_do_not_hold_one_good_vector_per_input_are_refused() {
        let ok = r#"{"data":[{"index":1,"embedding":[0,2]},{"index":0,"embedding":[3,4]}]}"#;
        let v = parse(ok, 2, 0).unwrap();
        assert_eq!(v, vec![vec![0.6, 0.8], vec![0.0, 1.0]], "ordered by index, unit length");
        let cases = [
            (r#"{"data":[{"embedding":[1,0]}]}"#, 2, 0, "1 vectors for 2 inputs"),
            (r#"{"data":[{"index":0,"embedding":[1,0]},{"index":0,"embedding":[1,0]}]}"#, 2, 0, "repeated"),
            (r#"{"data":[{"index":5,"embedding":[1,0]}]}"#, 1, 0, "out of range"),
            (r#"{"data":[{"embedding":[1,0]},{"embedding":[1,0,0]}]}"#, 2, 0, "3 dimensions where 2"),
            (r#"{"data":[{"embedding":[1,0,0]}]}"#, 1, 2, "3 dimensions where 2"),
            (r#"{"data":[{"embedding":[0,0]}]}"#, 1, 0, "all-zero"),
            (r#"{"data":[{"embedding":[1e39,0]}]}"#, 1, 0, "not a finite"),
            (r#"{"data":[{"embedding":[]}]}"#, 1, 0, "0 dimensions"),
            (r#"{"error":"model not found"}"#, 1, 0, "not an embeddings response"),
            ("<html>502</html>", 1, 0, "not an embeddings response"),
        ];
        for (body, n, dims, want) in cases {
            let err = parse(body, n, dims).unwrap_err();
            assert!(err.contains(want), "{body}: {err}");
        }
    }
}
