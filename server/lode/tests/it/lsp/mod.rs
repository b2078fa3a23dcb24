//! End-to-end runs of the real `lode serve` over stdio, driven by the stdio client of
//! `lode-testing`, one module per concern (protocol, slow work, the save path, files, models,
//! citations); the helpers they share are here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lode_testing::copy_dir;
use lode_testing::stdio_client::StdioClient;
use serde_json::{json, Value};

mod citations;
mod files;
mod models;
mod protocol;
mod saves;
mod slow;

/// The user approves the vault's settings (`lode trust`), as they would a folder of their own.
fn approve(v: &std::path::Path) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lode")).args(["trust", "--vault"]).arg(v).output().unwrap();
    assert!(o.status.success(), "lode trust: {}", String::from_utf8_lossy(&o.stderr));
}

fn uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// The shared stdio client (`lode_testing::stdio_client`), failing the test on I/O errors.
struct Lsp(StdioClient);

impl Lsp {
    fn start() -> Lsp {
        Lsp(StdioClient::spawn(env!("CARGO_BIN_EXE_lode"), ["serve"]).unwrap())
    }

    fn raw(&mut self, body: &str) {
        self.0.raw(body).unwrap()
    }

    fn send(&mut self, v: &Value) {
        self.0.send(v).unwrap()
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.0.notify(method, params).unwrap()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.0.request(method, params).expect("server answered in time")
    }

    fn response(&mut self, id: Value) -> Value {
        self.0.response(id).expect("server answered in time")
    }

    fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        self.0.wait_for(pred).expect("notification in time")
    }
}

/// A copy of the example vault in `dir`.
fn example_vault(dir: &Path) -> PathBuf {
    let vault = dir.join("vault");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vault"), &vault);
    vault
}

/// Indexes `vault` with `lode index --no-vectors` (before a server starts).
fn index_lexical(vault: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["index", "--no-vectors", "--vault"]).arg(vault).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn setup() -> (tempfile::TempDir, PathBuf, Lsp) {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let mut lsp = Lsp::start();
    let t = Instant::now();
    let init = lsp.request(
        "initialize",
        json!({"processId": null, "rootUri": uri(&vault), "capabilities": {"general": {"positionEncodings": ["utf-16"]}},
               "workspaceFolders": [{"uri": uri(&vault), "name": "vault"}]}),
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(init["result"]["capabilities"]["positionEncoding"], "utf-16");
    lsp.notify("initialized", json!({}));
    // The scan reports progress and ends.
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    (tmp, vault, lsp)
}

/// An OpenAI-style endpoint on loopback that takes `delay` to answer every request with no
/// claims; counts the connections the client closed before the answer was ready.
fn slow_llm(delay: Duration) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let (endpoint, closed, _) = slow_llm_counted(delay);
    (endpoint, closed)
}

/// A loopback model that answers each request after `delay`, unless the client goes away first.
/// Returns its endpoint, how many clients went away mid-answer, and how many requests arrived.
type Counter = std::sync::Arc<std::sync::atomic::AtomicUsize>;

fn slow_llm_counted(delay: Duration) -> (String, Counter, Counter) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1", listener.local_addr().unwrap());
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    let arrived = received.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let count = count.clone();
            let arrived = arrived.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                let _ = r.read_exact(&mut body);
                arrived.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // "Generating": watch for the client going away meanwhile.
                let _ = conn.set_read_timeout(Some(Duration::from_millis(20)));
                let until = Instant::now() + delay;
                while Instant::now() < until {
                    if let Ok(0) = conn.read(&mut [0u8; 1]) {
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                }
                let content = serde_json::json!({"choices": [{"message": {"content": "{\"claims\": []}"}}]}).to_string();
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{content}",
                    content.len()
                );
            });
        }
    });
    (endpoint, served, received)
}

/// A server on a copy of the example vault, its log in a file (warnings and up; `LODE_TEST_LOG`
/// takes a `LODE_LOG` filter, e.g. `lode_lsp=debug,lode_engine=debug,warn`); after the first scan.
fn logged_server() -> (tempfile::TempDir, PathBuf, PathBuf, Lsp) {
    logged_server_with(&std::env::var("LODE_TEST_LOG").unwrap_or("warn".into()))
}

/// [`logged_server`] with the `LODE_LOG` filter `filter`.
fn logged_server_with(filter: &str) -> (tempfile::TempDir, PathBuf, PathBuf, Lsp) {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault(tmp.path());
    let log = tmp.path().join("server.log");
    let mut lsp = Lsp(StdioClient::spawn_with(
        env!("CARGO_BIN_EXE_lode"),
        ["serve"],
        [("LODE_LOG", filter)],
        std::process::Stdio::from(std::fs::File::create(&log).unwrap()),
    )
    .unwrap());
    lsp.request("initialize", json!({"processId": null, "rootUri": uri(&vault), "capabilities": {}}));
    lsp.notify("initialized", json!({}));
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    (tmp, vault, log, lsp)
}

/// An indexed copy of the example vault in `dir`, and a connection of "another process" that
/// holds its database exclusively (not even readers get in) until it rolls back and closes.
fn locked_vault(dir: &Path) -> (PathBuf, rusqlite::Connection) {
    let vault = example_vault(dir);
    index_lexical(&vault);
    let holder = rusqlite::Connection::open(vault.join(".lode/lode.db")).unwrap();
    holder
        .execute_batch("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS held(x); INSERT INTO held VALUES (1);")
        .unwrap();
    (vault, holder)
}

/// Markdown files under `dir`, outside hidden folders.
fn walk_md(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let p = e.path();
            let hidden = e.file_name().to_string_lossy().starts_with('.');
            if hidden {
                0
            } else if p.is_dir() {
                walk_md(&p)
            } else {
                usize::from(p.extension().is_some_and(|x| x == "md"))
            }
        })
        .sum()
}

/// Starts a server on `vault` with the given client capabilities; waits for the first scan.
fn start_on(vault: &Path, capabilities: Value) -> Lsp {
    let mut lsp = Lsp::start();
    lsp.request("initialize", json!({"processId": null, "rootUri": uri(vault), "capabilities": capabilities}));
    lsp.notify("initialized", json!({}));
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end");
    lsp
}

/// Asks again every 200 ms until whether an answer contains `needle` is `expected` (20 s at most).
fn answers_within(lsp: &mut Lsp, question: &str, needle: &str, expected: bool, otherwise: &str) {
    let t = Instant::now();
    while answers_with(lsp, question, needle) != expected {
        assert!(t.elapsed() < Duration::from_secs(20), "{otherwise}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn answers_with(lsp: &mut Lsp, question: &str, needle: &str) -> bool {
    let a = lsp.request("lode/ask", json!({"question": question}));
    a["result"]["claims"].as_array().is_some_and(|c| c.iter().any(|c| c["text"].as_str().is_some_and(|t| t.contains(needle))))
}

/// A vault holding one note, and a server on it that has scanned it.
fn one_note_vault(name: &str, text: &str) -> (tempfile::TempDir, PathBuf, PathBuf, Lsp) {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    let note = vault.join(name);
    std::fs::write(&note, text).unwrap();
    let lsp = start_on(&vault, json!({}));
    (tmp, vault, note, lsp)
}

/// A `file://` URI with everything but unreserved characters and `/` percent-encoded, as
/// editors send them.
fn encoded_uri(p: &Path) -> String {
    let mut out = String::from("file://");
    for b in p.display().to_string().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Applies LSP text edits (UTF-16 positions) to a text, as a client does.
fn apply_edits(text: &str, edits: &[Value]) -> String {
    let offset = |pos: &Value| {
        let (line, ch) = (pos["line"].as_u64().unwrap() as usize, pos["character"].as_u64().unwrap() as usize);
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        let mut units = 0;
        for (i, c) in text[start..].char_indices() {
            if units >= ch || c == '\n' {
                return start + i;
            }
            units += c.len_utf16();
        }
        text.len()
    };
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| (offset(&e["range"]["start"]), offset(&e["range"]["end"]), e["newText"].as_str().unwrap().to_owned()))
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_owned();
    for (s, e, t) in spans {
        out.replace_range(s..e, &t);
    }
    out
}

/// Runs `lode` with `args` on `vault`; stdout, and whether it succeeded.
fn lode_cli(vault: &Path, args: &[&str]) -> (String, bool) {
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(args).arg("--vault").arg(vault).output().unwrap();
    (String::from_utf8_lossy(&o.stdout).into_owned(), o.status.success())
}

fn diagnostics_of(lsp: &mut Lsp, doc: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let m = lsp.wait_for(|m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == doc
            && m["params"]["diagnostics"].as_array().is_some_and(|d| pred(d))
    });
    m["params"]["diagnostics"].as_array().unwrap().clone()
}

fn code(d: &Value) -> &str {
    d["code"].as_str().unwrap_or("")
}
