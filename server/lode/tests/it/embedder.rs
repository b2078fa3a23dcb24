//! `[models] embedder = "openai:<model>"`: the example vault indexed and answered through an
//! OpenAI-compatible embedding server on loopback (one that embeds by hashing words, so texts
//! sharing words are near), one that fails now and then, one that fails for good mid-pass, and
//! one standing for a server off the machine (no-egress notes and secrets never reach it).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use crate::support::user_home;

/// How the server answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Good,
    /// Every other request gets a 503 (so each one succeeds on its retry).
    Flaky,
    /// From the n-th embeddings request on, HTTP 500.
    FailFrom(usize),
    /// Every request is sent on to port n of loopback (307: the body and headers would follow).
    Redirect(u16),
}

struct Seen {
    inputs: Vec<Vec<String>>,
    auth: Vec<Option<String>>,
    models: Vec<String>,
}

struct Server {
    url: String,
    seen: Arc<Mutex<Seen>>,
    mode: Arc<Mutex<Mode>>,
}

const DIMS: usize = 96;

/// A vector from the words of `text`: each word (and its first five letters) adds to one axis
/// chosen by its hash, so texts that share words point the same way.
fn embed(text: &str) -> Vec<f64> {
    let mut v = vec![0f64; DIMS];
    let h = |s: &str| s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
    for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2) {
        let w = w.to_lowercase();
        v[(h(&w) % DIMS as u64) as usize] += 1.0;
        let stem: String = w.chars().take(5).collect();
        v[(h(&format!("stem:{stem}")) % DIMS as u64) as usize] += 0.5;
    }
    // Never all-zero: a constant axis.
    v[0] += 0.05;
    v
}

impl Server {
    fn start(mode: Mode) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen { inputs: Vec::new(), auth: Vec::new(), models: Vec::new() }));
        let mode = Arc::new(Mutex::new(mode));
        let (s, m) = (seen.clone(), mode.clone());
        std::thread::spawn(move || {
            let mut attempts = 0usize;
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                attempts += 1;
                handle(conn, &s, *m.lock().unwrap(), attempts);
            }
        });
        Server { url, seen, mode }
    }

    fn requests(&self) -> Vec<Vec<String>> {
        self.seen.lock().unwrap().inputs.clone()
    }

    fn sent_text(&self) -> String {
        self.requests().concat().join("\n")
    }
}

fn handle(mut conn: std::net::TcpStream, seen: &Mutex<Seen>, mode: Mode, attempt: usize) {
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let (mut line, mut first, mut len, mut auth) = (String::new(), String::new(), 0usize, None);
    while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
        if first.is_empty() {
            first = line.trim().to_owned();
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("authorization:") {
            auth = Some(line["authorization:".len()..].trim().to_owned());
        }
        line.clear();
    }
    let mut body = vec![0u8; len];
    let _ = r.read_exact(&mut body);
    let reply = |conn: &mut std::net::TcpStream, status: u16, body: &str| {
        let _ = write!(
            conn,
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    };
    if !first.starts_with("POST /v1/embeddings ") {
        return reply(&mut conn, 404, r#"{"error":"not found"}"#);
    }
    let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let inputs: Vec<String> = match &req["input"] {
        serde_json::Value::String(s) => vec![s.clone()],
        serde_json::Value::Array(a) => a.iter().map(|x| x.as_str().unwrap_or_default().to_owned()).collect(),
        _ => return reply(&mut conn, 400, r#"{"error":"input"}"#),
    };
    let n = {
        let mut s = seen.lock().unwrap();
        s.inputs.push(inputs.clone());
        s.auth.push(auth);
        s.models.push(req["model"].as_str().unwrap_or_default().to_owned());
        s.inputs.len()
    };
    match mode {
        Mode::Flaky if attempt % 2 == 1 => return reply(&mut conn, 503, r#"{"error":"busy, try again"}"#),
        Mode::FailFrom(k) if n >= k => return reply(&mut conn, 500, r#"{"error":"the model crashed"}"#),
        Mode::Redirect(port) => {
            let _ = write!(
                conn,
                "HTTP/1.1 307 Moved\r\nLocation: http://127.0.0.1:{port}/v1/embeddings\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            return;
        }
        _ => {}
    }
    let data: Vec<serde_json::Value> =
        inputs.iter().enumerate().map(|(i, t)| serde_json::json!({"object": "embedding", "index": i, "embedding": embed(t)})).collect();
    reply(&mut conn, 200, &serde_json::json!({"object": "list", "data": data, "model": req["model"]}).to_string());
}

/// The example vault, and a home whose user config points `[models]` at `server`.
fn setup(tmp: &Path, server: &Server, extra: &str) -> (PathBuf, Vec<(String, String)>) {
    let (vault, _) = crate::support::question_vault(tmp);
    let env = user_home(&tmp.join("home"));
    let config = tmp.join("home/.config/lode/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!("[models]\nembedder = \"openai:hash-words\"\nembedder_url = \"{}\"\nembedder_batch = 4\n{extra}", server.url),
    )
    .unwrap();
    (vault, env)
}

fn lode(args: &[&str], vault: &Path, env: &[(String, String)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
    c.args(args).arg("--vault").arg(vault);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}\n{}", String::from_utf8_lossy(&o.stderr)))
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn an_embedding_server_on_loopback_indexes_the_example_vault_and_answers_hybrid() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(Mode::Good);
    let (vault, mut env) = setup(tmp.path(), &server, "embedder_api_key_env = \"LODE_TEST_EMBED_KEY\"\n");
    env.push(("LODE_TEST_EMBED_KEY".into(), "sk-test-123".into()));

    let o = lode(&["index", "--json"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    let r = json(&o);
    let id = format!("openai:hash-words@{}", server.url);
    assert_eq!(r["vectors"]["status"], "ok", "{r:#}");
    assert_eq!(r["vectors"]["model"], id.as_str(), "vectors record the model and the server that made them");
    assert_eq!(r["vectors"]["with_vectors"], r["vectors"]["passages"], "{r:#}");
    let requests = server.requests();
    // The probe, then the windows in requests of at most `embedder_batch` inputs.
    assert!(requests.len() > 3 && requests.iter().all(|b| !b.is_empty() && b.len() <= 4), "{requests:?}");
    let seen = server.seen.lock().unwrap();
    assert!(seen.auth.iter().all(|a| a.as_deref() == Some("Bearer sk-test-123")), "the key goes with every request");
    assert!(seen.models.iter().all(|m| m == "hash-words"));
    drop(seen);
    // Loopback is this machine: the notes are sent as they are, and nothing is logged as egress.
    assert!(server.sent_text().contains("staging"), "the certificates runbook was embedded");

    // Dense search alone finds the runbook through the server's vectors; the question is
    // embedded there too.
    let before = server.requests().len();
    let o = lode(&["search", "--json", "--mode", "dense", "--limit", "3", "rotate the staging certificates"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    let top: serde_json::Value = serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(top["path"], "runbooks/rotate-staging-certs.md", "{}", String::from_utf8_lossy(&o.stdout));
    assert!(server.requests().len() > before, "the question went to the server");
    assert!(!err(&o).contains("lexical"), "{}", err(&o));

    // The demo question, answered hybrid with a verified citation.
    let o = lode(&["ask", "--json", "How often are staging certificates rotated?"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    let a = json(&o);
    let text = a.to_string();
    assert!(text.contains("rotate-staging-certs.md"), "{a:#}");
    assert!(!text.contains("lexical only") && !err(&o).contains("lexical only"), "{a:#}\n{}", err(&o));

    // `lode doctor` names the server and the model.
    let o = lode(&["doctor", "--json"], &vault, &env);
    assert!(o.status.success() || String::from_utf8_lossy(&o.stdout).contains(&id), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&id), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn a_server_that_fails_is_retried_and_one_that_fails_for_good_mid_pass_loses_nothing() {
    // Every request fails once: each succeeds on its retry.
    let tmp = tempfile::tempdir().unwrap();
    let flaky = Server::start(Mode::Flaky);
    let (vault, env) = setup(tmp.path(), &flaky, "");
    let o = lode(&["index", "--json"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    let r = json(&o);
    assert_eq!(r["vectors"]["with_vectors"], r["vectors"]["passages"], "{r:#}");

    // Each request was tried twice.
    let requests = flaky.requests().len() / 2;
    assert!(requests > 6, "{requests} requests");

    // A server that fails for good halfway through: the error names the server, the batch and
    // what it said; the vectors of the rounds before it stay, and the next run makes the rest.
    let tmp = tempfile::tempdir().unwrap();
    let broken = Server::start(Mode::FailFrom(requests / 2 + 1));
    let (vault, env) = setup(tmp.path(), &broken, "embedder_timeout_secs = 5\n");
    let o = lode(&["index"], &vault, &env);
    assert!(!o.status.success(), "a failed embedding pass fails the command");
    let e = err(&o);
    assert!(e.contains(&format!("embedding server {}", broken.url)) && e.contains("HTTP 500") && e.contains("the model crashed"), "{e}");
    assert!(e.contains("attempts"), "retried before giving up: {e}");
    let o = lode(&["stats", "--json"], &vault, &env);
    let s = json(&o);
    let (done, all) = (s["vectors"]["with_vectors"].as_i64().unwrap(), s["passages"].as_i64().unwrap());
    assert!(done > 0 && done < all, "the batches before the failure are kept: {s:#}");
    // Meanwhile questions are answered lexically, and say so.
    let o = lode(&["search", "--mode", "hybrid", "staging certificates"], &vault, &env);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("rotate-staging-certs.md"), "{}", err(&o));
    *broken.mode.lock().unwrap() = Mode::Good;
    let o = lode(&["index", "--json"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    let r = json(&o);
    assert_eq!(r["vectors"]["with_vectors"], r["vectors"]["passages"], "{r:#}");
    assert_eq!(r["vectors"]["embedded"].as_i64().unwrap(), all - done, "only what was missing: {r:#}");
}

#[test]
fn a_server_off_the_machine_never_gets_no_egress_notes_or_secrets() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(Mode::Good);
    // Loopback, but the user says it is a tunnel to another machine.
    let (vault, env) = setup(tmp.path(), &server, "embedder_off_machine = true\n");
    std::fs::write(
        vault.join("notes/salaries.md"),
        "---\nno_egress: true\n---\n# Salaries\n\nThe wombat team's salary bands were raised by four percent.\n",
    )
    .unwrap();
    std::fs::write(vault.join("notes/tagged.md"), "# Budget\n\nThe pangolin budget is private. #no-egress\n").unwrap();
    std::fs::write(
        vault.join("notes/deploy-keys.md"),
        "# Deploy keys\n\nThe numbat deploy uses key id AKIAIOSFODNN7EXAMPLE then secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY today.\n",
    )
    .unwrap();
    let o = lode(&["index", "--json"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    let r = json(&o);
    assert_eq!(r["vectors"]["with_vectors"], r["vectors"]["passages"], "withheld passages are accounted for: {r:#}");
    let sent = server.sent_text();
    assert!(sent.contains("staging"), "other notes were embedded");
    for never in ["wombat", "salary", "pangolin", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI"] {
        assert!(!sent.contains(never), "{never} reached the server");
    }
    assert!(sent.contains("numbat"), "the note with a secret was embedded, masked: {sent}");
    // Every batch sent is in the egress log.
    let db = rusqlite::Connection::open(vault.join(".lode/lode.db")).unwrap();
    let logged: i64 = db
        .query_row("SELECT count(*) FROM egress_log WHERE purpose = 'embed passages' AND destination = ?1", [&server.url], |r| r.get(0))
        .unwrap();
    assert!(logged > 0, "no egress log rows");
    // A question holding a secret is masked before it is sent.
    let o = lode(&["search", "--mode", "dense", "which key is AKIAIOSFODNN7EXAMPLE"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!server.sent_text().contains("AKIAIOSFODNN7EXAMPLE"));
    // A withheld note is never a dense hit (its window holds a placeholder), and still a lexical one.
    let o = lode(&["search", "--json", "--mode", "dense", "--limit", "20", "wombat salary bands raised"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("salaries.md"), "{}", String::from_utf8_lossy(&o.stdout));
    let o = lode(&["search", "--json", "--mode", "lexical", "wombat salary bands"], &vault, &env);
    assert!(String::from_utf8_lossy(&o.stdout).contains("salaries.md"), "{}", String::from_utf8_lossy(&o.stdout));

    // A folder kept local by a pattern; the pattern removed later, its notes are embedded at
    // the next `lode index` (their text did not change, their placeholders are released).
    std::fs::create_dir_all(vault.join("hr")).unwrap();
    std::fs::write(
        vault.join("hr/reviews.md"),
        "# Reviews

The capybara review cycle runs twice a year.
",
    )
    .unwrap();
    std::fs::write(vault.join(".lode/config.toml"), "[egress]\nno_egress = [\"hr/\"]\n").unwrap();
    let o = lode(&["index", "--json"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    assert!(!server.sent_text().contains("capybara"), "a note under a no-egress pattern reached the server");
    std::fs::write(vault.join(".lode/config.toml"), "").unwrap();
    let o = lode(&["index", "--json"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    let r = json(&o);
    assert_eq!(r["vectors"]["with_vectors"], r["vectors"]["passages"], "{r:#}");
    assert!(server.sent_text().contains("capybara"), "released when the pattern went");
    assert!(!server.sent_text().contains("four percent"), "the flagged note stays withheld (its words in a question went as a question)");
    let o = lode(&["search", "--json", "--mode", "dense", "--limit", "3", "capybara review cycle"], &vault, &env);
    assert!(String::from_utf8_lossy(&o.stdout).contains("hr/reviews.md"), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn a_vault_cannot_choose_the_embedding_server_or_its_key() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(Mode::Good);
    let (vault, env) = setup(tmp.path(), &server, "");
    // A cloned folder names another server and key, and says loopback is this machine.
    let evil = Server::start(Mode::Good);
    std::fs::write(
        vault.join(".lode/config.toml"),
        format!(
            "[models]\nembedder_url = \"{}\"\nembedder_api_key_env = \"HOME\"\nembedder_off_machine = false\nembedder_timeout_secs = 3600\n",
            evil.url
        ),
    )
    .unwrap();
    let o = lode(&["index", "--json"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    assert!(evil.requests().is_empty(), "the folder's server got requests");
    assert!(!server.requests().is_empty());
    assert!(server.seen.lock().unwrap().auth.iter().all(Option::is_none), "no key was configured by the user");
    let e = err(&o);
    for key in ["embedder_url", "embedder_api_key_env", "embedder_off_machine"] {
        assert!(e.contains(key), "the notice names {key}: {e}");
    }
    // A limit raised by the folder waits for approval, as every limit does.
    assert!(e.contains("embedder_timeout_secs = 3600 (kept at 60)"), "{e}");
    // A server that redirects (its reply is not trusted either): the key and the notes are not
    // sent on, and the failure is said.
    let redirecting = Server::start(Mode::Redirect(evil.url.split(':').nth(2).unwrap().trim_end_matches("/v1").parse().unwrap()));
    let (vault3, mut env3) = setup(&tmp.path().join("third"), &redirecting, "embedder_api_key_env = \"LODE_TEST_EMBED_KEY\"\n");
    env3.push(("LODE_TEST_EMBED_KEY".into(), "sk-test-redirect".into()));
    let before = evil.requests().len();
    let o = lode(&["index"], &vault3, &env3);
    assert_eq!(evil.requests().len(), before, "a redirect carried the request on");
    assert!(err(&o).contains("HTTP 307"), "{}", err(&o));

    // Nor can it switch to a server on its own: `openai:` is a setting that needs approval.
    let (vault2, _) = crate::support::question_vault(&tmp.path().join("second"));
    std::fs::write(vault2.join(".lode/config.toml"), "[models]\nembedder = \"openai:hash-words\"\n").unwrap();
    let plain: Vec<(String, String)> = user_home(&tmp.path().join("home2"));
    let before = server.requests().len();
    let o = lode(&["index", "--json"], &vault2, &plain);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(server.requests().len(), before);
    assert!(err(&o).contains("[models] embedder"), "{}", err(&o));
}

#[test]
fn a_server_named_without_its_address_is_a_clear_error_and_search_goes_on_lexically() {
    let tmp = tempfile::tempdir().unwrap();
    let (vault, _) = crate::support::question_vault(tmp.path());
    let env = user_home(&tmp.path().join("home"));
    let config = tmp.path().join("home/.config/lode/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[models]\nembedder = \"openai:nomic-embed-text\"\n").unwrap();
    let o = lode(&["index"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    assert!(err(&o).contains("embedder_url") && err(&o).contains("11434"), "{}", err(&o));
    // Nothing listens there: said, with the address, and lexical search answers.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    std::fs::write(
        &config,
        format!("[models]\nembedder = \"openai:nomic-embed-text\"\nembedder_url = \"http://{closed}/v1\"\nembedder_timeout_secs = 2\n"),
    )
    .unwrap();
    let o = lode(&["search", "--mode", "hybrid", "staging certificates"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("rotate-staging-certs.md"));
    assert!(err(&o).contains(&format!("http://{closed}/v1")) && err(&o).contains("lexical"), "{}", err(&o));
}

/// The language server, through the engine: a vault indexed with the local model switches to
/// a server off the machine. The local model answers until the server's vectors are complete,
/// then the server's; the no-egress note never reaches it; the status names both.
#[test]
fn the_language_server_switches_to_a_server_off_the_machine_without_losing_answers_or_sending_what_stays() {
    use lode_testing::stdio_client::StdioClient;
    use serde_json::json;
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(Mode::Good);
    let (vault, env) = setup(tmp.path(), &server, "embedder_off_machine = true\n");
    std::fs::write(
        vault.join("notes/salaries.md"),
        "# Salaries\n\nThe wombat team's salary bands were raised by four percent. #no-egress\n",
    )
    .unwrap();
    // Indexed first with the local model (before the user config names the server).
    let config = tmp.path().join("home/.config/lode/config.toml");
    let server_config = std::fs::read_to_string(&config).unwrap();
    std::fs::remove_file(&config).unwrap();
    let o = lode(&["index", "-q"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    assert!(server.requests().is_empty());
    std::fs::write(&config, server_config).unwrap();

    let mut lsp = StdioClient::spawn_env(env!("CARGO_BIN_EXE_lode"), ["serve"], env.clone()).unwrap();
    let uri = format!("file://{}", vault.display());
    lsp.request("initialize", json!({"processId": null, "rootUri": uri, "capabilities": {}})).unwrap();
    lsp.notify("initialized", json!({})).unwrap();
    let id = format!("openai:hash-words@{}", server.url);
    let t = std::time::Instant::now();
    // Meanwhile the local model answers (the switch path of `lode serve`; here it is over in
    // about a second).
    let status = loop {
        let d = lsp.request("lode/status", json!(null)).unwrap()["result"]["dense"].clone();
        if d["model"] == id.as_str() && d.get("switching").is_none() {
            break d;
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(120), "the switch never completed: {d}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status["with_vectors"].as_i64() > Some(0), "{status}");
    let a = lsp.request("lode/ask", json!({"question": "How often are staging certificates rotated?"})).unwrap();
    assert!(a.to_string().contains("rotate-staging-certs.md"), "{a}");
    assert!(a["result"]["notice"].as_str().is_none_or(|n| !n.contains("lexical")), "{a}");
    let sent = server.sent_text();
    assert!(sent.contains("staging") && !sent.contains("wombat"), "the no-egress note reached the server");
    // A save is embedded by the server; a no-egress one is not.
    std::fs::write(vault.join("notes/quokka.md"), "# Quokka census\n\nThe quokka census counted 412 animals.\n").unwrap();
    std::fs::write(vault.join("notes/okapi.md"), "# Okapi\n\nThe okapi sighting stays private. #no-egress\n").unwrap();
    for name in ["quokka", "okapi"] {
        let u = format!("{uri}/notes/{name}.md");
        let text = std::fs::read_to_string(vault.join(format!("notes/{name}.md"))).unwrap();
        lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": u, "languageId": "markdown", "version": 1, "text": text}}))
            .unwrap();
        lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": u}})).unwrap();
    }
    let t = std::time::Instant::now();
    while !server.sent_text().contains("quokka") {
        assert!(t.elapsed() < std::time::Duration::from_secs(60), "the saved note was never embedded");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!server.sent_text().contains("okapi"), "a saved no-egress note reached the server");

    // A question asked from a no-egress note is not sent to embed: answered lexically, said.
    let u = format!("{uri}/notes/private-questions.md");
    let text = "---\nno_egress: true\n---\n# Private questions\n\nHow often does the narwhal rotation of staging certificates happen?\n";
    std::fs::write(vault.join("notes/private-questions.md"), text).unwrap();
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": u, "languageId": "markdown", "version": 1, "text": text}})).unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": u}})).unwrap();
    let range = json!({"start": {"line": 5, "character": 0}, "end": {"line": 5, "character": 0}});
    let done = lsp.request("workspace/executeCommand", json!({"command": "lode.ask", "arguments": [{"uri": u, "range": range}]})).unwrap();
    assert!(done.get("error").is_none(), "{done}");
    assert!(!server.sent_text().contains("narwhal"), "the question of a no-egress note went to the embedding server");
    assert!(done.to_string().contains("not sent to the embedding server"), "the answer says why it is lexical: {done}");
}

fn fixture(name: &str) -> Vec<serde_json::Value> {
    let path = lode_testing::repo().join("fixtures/egress").join(name);
    std::fs::read_to_string(&path).unwrap().lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The egress attack sets (every spelling of "keep this local", and secrets in every shape, both
/// ours and the ones written blind) indexed through a server off the machine: no private note's
/// text and no secret reaches it; shareable notes do.
#[test]
fn every_egress_fixture_row_stays_off_an_embedding_server_off_the_machine() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(Mode::Good);
    let vault = tmp.path().join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    let env = user_home(&tmp.path().join("home"));
    let config = tmp.path().join("home/.config/lode/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "[models]\nembedder = \"openai:hash-words\"\nembedder_url = \"{}\"\nembedder_off_machine = true\nembedder_batch = 64\n",
            server.url
        ),
    )
    .unwrap();
    let mut private = Vec::new();
    let mut shareable = Vec::new();
    for file in ["spellings.jsonl", "spellings-heldout.jsonl"] {
        for (i, r) in fixture(file).iter().enumerate() {
            // Whole words: `…x1 marker` is not a prefix of `…x10 marker`.
            let probe = format!("Zqprobe{}x{i} marker", file.len());
            let note = format!("{}\n\n{probe} line.\n", r["note"].as_str().unwrap().trim_end());
            std::fs::write(vault.join(format!("{}-{i}.md", file.trim_end_matches(".jsonl"))), note).unwrap();
            if r["intent"] == "private" {
                private.push((probe, format!("{file} row {i} ({})", r["class"])));
            } else {
                shareable.push(probe);
            }
        }
    }
    let mut secrets = Vec::new();
    for file in ["secrets.jsonl", "secrets-heldout.jsonl"] {
        for (i, r) in fixture(file).iter().enumerate() {
            let name = format!("{}-{i}.md", file.trim_end_matches(".jsonl"));
            // The title is in every window of the note: a secret is looked for in those only
            // (a short one, a PIN say, may well be in another note's text).
            let title = format!("Zqsecret{}x{i} note", file.len());
            std::fs::write(vault.join(&name), format!("# {title}\n\n{}\n", r["text"].as_str().unwrap())).unwrap();
            // As in lode-answer's egress tests: a secret under six characters (a door code) is
            // not a shape any detector can tell from a number.
            for s in r["secrets"].as_array().unwrap().iter().filter(|s| s.as_str().unwrap().len() >= 6) {
                secrets.push((title.clone(), s.as_str().unwrap().to_owned(), format!("{file} row {i} ({})", r["class"])));
            }
        }
    }
    let o = lode(&["index", "--json"], &vault, &env);
    assert!(o.status.success(), "{}", err(&o));
    let r = json(&o);
    assert_eq!(r["vectors"]["with_vectors"], r["vectors"]["passages"], "{r:#}");
    let sent = server.sent_text();
    let leaked: Vec<&String> = private.iter().filter(|(p, _)| sent.contains(p.as_str())).map(|(_, why)| why).collect();
    assert!(leaked.is_empty(), "private notes reached the server: {leaked:#?}");
    let inputs: Vec<String> = server.requests().concat();
    // A note whose text has headings of its own may have no window under its title: its secret
    // is looked for everywhere.
    let titled = |title: &str| inputs.iter().any(|t| t.contains(title));
    let leaked: Vec<&String> = secrets
        .iter()
        .filter(|(title, secret, _)| inputs.iter().any(|t| (t.contains(title.as_str()) || !titled(title)) && t.contains(secret.as_str())))
        .map(|(_, _, why)| why)
        .collect();
    let untitled = secrets.iter().filter(|(title, _, _)| !titled(title)).count();
    assert!(untitled * 20 <= secrets.len(), "{untitled} of {} notes with a secret were not sent under their title", secrets.len());
    assert!(leaked.is_empty(), "secrets reached the server: {leaked:#?}");
    // Shareable notes are sent, bar the few a near-miss spelling keeps local (and reports).
    let kept = shareable.iter().filter(|p| !sent.contains(p.as_str())).count();
    assert!(kept * 5 <= shareable.len(), "{kept} of {} shareable notes were never sent", shareable.len());
}
