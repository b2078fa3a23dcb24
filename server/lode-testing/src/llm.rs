//! A model on loopback: a real HTTP server that answers like an OpenAI-compatible chat-completions API,
//! with answers scripted per test (including adversarial ones). It records every request body.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub type Responder = Box<dyn FnMut(&str) -> (u16, String) + Send>;

pub struct FakeLlm {
    pub endpoint: String,
    pub requests: Arc<Mutex<Vec<String>>>,
}

/// A chat-completions response whose message content is `content`.
pub fn completion(content: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-test", "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
    })
    .to_string()
}

/// The user message of a recorded request body.
pub fn user_message(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    v["messages"][1]["content"].as_str().unwrap().to_owned()
}

/// The label (`S1`, …) the prompt gave to the block of `path`.
pub fn label_of(body: &str, path: &str) -> Option<String> {
    user_message(body).lines().find_map(|l| {
        let rest = l.strip_prefix('[')?;
        let (label, after) = rest.split_once("] ")?;
        after.starts_with(path).then(|| label.to_owned())
    })
}

impl FakeLlm {
    pub fn start(mut respond: Responder) -> FakeLlm {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0usize;
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                if reader.read_exact(&mut body).is_err() {
                    continue;
                }
                let body = String::from_utf8_lossy(&body).into_owned();
                log.lock().unwrap().push(body.clone());
                let (status, reply) = respond(&body);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            }
        });
        FakeLlm { endpoint, requests }
    }
}
