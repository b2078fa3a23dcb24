//! A minimal LSP client over a child process's stdio: what `lode-bench lsp` and the end-to-end
//! tests use to drive the real `lode serve`. It answers the server's own requests
//! (`workspace/applyEdit` with `applied: true`, anything else with `null`) and records every
//! message it sees.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub struct StdioClient {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next: i64,
    /// How long to wait for any one answer.
    pub timeout: Duration,
    /// Notifications and server requests seen while waiting, oldest first.
    pub seen: Vec<Value>,
}

fn timed_out() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "the server did not answer in time")
}

impl StdioClient {
    /// Starts `exe` with `args` (e.g. `serve --vault DIR`); its stderr is discarded, unless
    /// `LODE_LOG` is set (then the server logs to ours: a failing test's server is readable).
    pub fn spawn<I: AsRef<OsStr>>(exe: impl AsRef<OsStr>, args: impl IntoIterator<Item = I>) -> std::io::Result<StdioClient> {
        Self::spawn_env(exe, args, std::iter::empty::<(String, String)>())
    }

    /// [`StdioClient::spawn`] with extra environment variables for the server.
    pub fn spawn_env<I: AsRef<OsStr>, K: AsRef<OsStr>, V: AsRef<OsStr>>(
        exe: impl AsRef<OsStr>,
        args: impl IntoIterator<Item = I>,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> std::io::Result<StdioClient> {
        let log = if std::env::var_os("LODE_LOG").is_some() { Stdio::inherit() } else { Stdio::null() };
        Self::spawn_with(exe, args, env, log)
    }

    /// [`StdioClient::spawn_env`], with the server's stderr (its log) going to `stderr`.
    pub fn spawn_with<I: AsRef<OsStr>, K: AsRef<OsStr>, V: AsRef<OsStr>>(
        exe: impl AsRef<OsStr>,
        args: impl IntoIterator<Item = I>,
        env: impl IntoIterator<Item = (K, V)>,
        stderr: Stdio,
    ) -> std::io::Result<StdioClient> {
        let mut child = Command::new(exe).args(args).envs(env).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(stderr).spawn()?;
        let stdin = child.stdin.take();
        let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
        let (tx, rx) = channel();
        std::thread::spawn(move || loop {
            let mut len = 0usize;
            let mut line = String::new();
            loop {
                line.clear();
                if out.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut buf = vec![0; len];
            if out.read_exact(&mut buf).is_err() {
                return;
            }
            let Ok(v) = serde_json::from_slice(&buf) else { return };
            if tx.send(v).is_err() {
                return;
            }
        });
        Ok(StdioClient { child, stdin, rx, next: 1, timeout: Duration::from_secs(60), seen: Vec::new() })
    }

    /// Sends a frame with this body as it is (valid JSON or not).
    pub fn raw(&mut self, body: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| std::io::Error::other("stdin is closed"))?;
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len())?;
        stdin.flush()
    }

    pub fn send(&mut self, v: &Value) -> std::io::Result<()> {
        self.raw(&v.to_string())
    }

    pub fn notify(&mut self, method: &str, params: Value) -> std::io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Sends a request and waits for its response.
    pub fn request(&mut self, method: &str, params: Value) -> std::io::Result<Value> {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        self.response(json!(id))
    }

    /// Waits for the response with this id (responses may come in any order: one that arrived
    /// while waiting for another is found among those already seen).
    pub fn response(&mut self, id: Value) -> std::io::Result<Value> {
        if let Some(i) = self.seen.iter().position(|m| m.get("method").is_none() && m["id"] == id) {
            return Ok(self.seen.remove(i));
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            let msg = self.rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).map_err(|_| timed_out())?;
            if msg.get("method").is_none() && msg["id"] == id {
                return Ok(msg);
            }
            self.handle(&msg)?;
        }
    }

    /// Waits for a message matching `pred` (looking at those already seen first), and takes it
    /// out of `seen`.
    pub fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> std::io::Result<Value> {
        if let Some(i) = self.seen.iter().position(&pred) {
            return Ok(self.seen.remove(i));
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            let msg = self.rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).map_err(|_| timed_out())?;
            self.handle(&msg)?;
            if pred(&msg) {
                self.seen.pop();
                return Ok(msg);
            }
        }
    }

    fn handle(&mut self, msg: &Value) -> std::io::Result<()> {
        if msg.get("method").is_some() && msg.get("id").is_some() {
            let result = if msg["method"] == "workspace/applyEdit" { json!({"applied": true}) } else { Value::Null };
            self.send(&json!({"jsonrpc": "2.0", "id": msg["id"].clone(), "result": result}))?;
        }
        self.seen.push(msg.clone());
        Ok(())
    }

    /// Closes the server's stdin, as a client that goes away does.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Resident memory of the server process in MiB (Linux).
    pub fn rss_mib(&self) -> Option<f64> {
        self.status_mib("VmRSS:")
    }

    /// Peak resident memory of the server process so far in MiB (Linux).
    pub fn peak_rss_mib(&self) -> Option<f64> {
        self.status_mib("VmHWM:")
    }

    /// Resident memory in MiB by where it is mapped from (Linux `/proc/<pid>/smaps`): the
    /// server's own binary, each shared library by file name, `[heap]`, and anonymous mappings
    /// (thread stacks and arenas, large blocks); largest first.
    pub fn rss_by_mapping(&self) -> Vec<(String, f64)> {
        let Ok(s) = std::fs::read_to_string(format!("/proc/{}/smaps", self.child.id())) else {
            return Vec::new();
        };
        let exe = std::fs::read_link(format!("/proc/{}/exe", self.child.id())).ok();
        let mut by: std::collections::BTreeMap<String, f64> = Default::default();
        let mut current = String::from("anonymous");
        for l in s.lines() {
            let mut words = l.split_whitespace();
            let first = words.next().unwrap_or("");
            if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                let path = words.nth(4).unwrap_or("");
                current = if path.is_empty() {
                    "anonymous".into()
                } else if exe.as_deref().is_some_and(|e| Path::new(path) == e) {
                    "the binary".into()
                } else if path.starts_with('[') {
                    path.into()
                } else {
                    Path::new(path).file_name().map_or(path.into(), |f| f.to_string_lossy().into_owned())
                };
            } else if first == "Rss:" {
                let kb = words.next().and_then(|w| w.parse::<f64>().ok()).unwrap_or(0.0);
                *by.entry(current.clone()).or_default() += kb / 1024.0;
            }
        }
        let mut v: Vec<(String, f64)> = by.into_iter().filter(|(_, m)| *m >= 0.5).collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v
    }

    fn status_mib(&self, field: &str) -> Option<f64> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let l = s.lines().find(|l| l.starts_with(field))?;
        l.split_whitespace().nth(1)?.parse::<f64>().ok().map(|kb| kb / 1024.0)
    }

    /// Shuts the server down politely and waits for it to exit.
    pub fn stop(mut self) -> std::io::Result<std::process::ExitStatus> {
        let _ = self.request("shutdown", Value::Null);
        let _ = self.notify("exit", Value::Null);
        self.child.wait()
    }
}
