//! Egress through the real binary, on the bytes a recording "remote" model on loopback receives:
//! `lode ask --llm` after a move, and `lode serve` right after an unsaved edit, a config edit, a
//! config that no longer parses and a folder rename; near-miss spellings in the editor's
//! diagnostics and in `lode doctor`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use lode_testing::llm::{completion, FakeLlm};
use lode_testing::stdio_client::StdioClient;
use serde_json::{json, Value};

const BUDGET: &str = "# Budget\n\nThe Zq staging budget is 12000 euros.\n";
const QUESTION: &str = "What is the Zq staging budget in euros?";

/// The user approves the vault's settings (`lode trust`), as they would a folder of their own.
fn approve(v: &std::path::Path) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lode")).args(["trust", "--vault"]).arg(v).output().unwrap();
    assert!(o.status.success(), "lode trust: {}", String::from_utf8_lossy(&o.stderr));
}

fn uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// A model on loopback that records every request body and proposes nothing.
fn recorder() -> (String, Arc<Mutex<Vec<String>>>) {
    let fake = FakeLlm::start(Box::new(|_| (200, completion("{\"claims\": []}"))));
    (fake.endpoint, fake.requests)
}

fn config(endpoint: &str, no_egress: &[&str]) -> String {
    format!(
        "[models]\nembedder = \"\"\n\n[llm]\nendpoint = \"{endpoint}\"\nmodel = \"recorder\"\nremote = true\nretries = 0\n\n[egress]\nno_egress = {}\n",
        serde_json::to_string(no_egress).unwrap()
    )
}

fn vault(dir: &Path, endpoint: &str) -> PathBuf {
    let v = dir.join("vault");
    std::fs::create_dir_all(v.join("notes")).unwrap();
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::write(v.join("notes/budget.md"), BUDGET).unwrap();
    std::fs::write(v.join("notes/other.md"), "# Other\n\nNothing about money here.\n").unwrap();
    std::fs::write(v.join(".lode/config.toml"), config(endpoint, &[])).unwrap();
    approve(&v);
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["index", "--no-vectors", "--vault"]).arg(&v).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    v
}

/// What the model received since `from` requests, concatenated.
fn since(log: &Arc<Mutex<Vec<String>>>, from: usize) -> String {
    log.lock().unwrap()[from..].concat()
}

#[test]
fn the_cli_judges_each_note_where_it_is_now() {
    let tmp = tempfile::tempdir().unwrap();
    let (endpoint, log) = recorder();
    let v = vault(tmp.path(), &endpoint);
    let ask = |v: &Path| Command::new(env!("CARGO_BIN_EXE_lode")).args(["ask", "--llm", "--vault"]).arg(v).arg(QUESTION).output().unwrap();
    let o = ask(&v);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(since(&log, 0).contains("12000"), "the plain note is sent");
    // Moved into a no-egress folder, not indexed again.
    std::fs::create_dir_all(v.join("private")).unwrap();
    std::fs::rename(v.join("notes/budget.md"), v.join("private/budget.md")).unwrap();
    std::fs::write(v.join(".lode/config.toml"), config(&endpoint, &["private/"])).unwrap();
    approve(&v);
    let n = log.lock().unwrap().len();
    let o = ask(&v);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!since(&log, n).contains("12000"), "a note moved into a no-egress folder left the machine");
}

struct Server {
    c: StdioClient,
    vault: PathBuf,
}

impl Server {
    fn start(vault: &Path) -> Server {
        let mut c = StdioClient::spawn(env!("CARGO_BIN_EXE_lode"), ["serve"]).unwrap();
        let caps = json!({"workspace": {"workspaceEdit": {"documentChanges": true}}});
        let _ = c.request("initialize", json!({"processId": null, "rootUri": uri(vault), "capabilities": caps})).unwrap();
        c.notify("initialized", json!({})).unwrap();
        c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end").unwrap();
        Server { c, vault: vault.to_owned() }
    }

    fn ask(&mut self) -> Value {
        let r = self.c.request("lode/ask", json!({"question": QUESTION})).unwrap();
        assert!(r["error"].is_null(), "{r}");
        r["result"].clone()
    }

    fn open(&mut self, rel: &str, text: &str) {
        let u = uri(&self.vault.join(rel));
        self.c
            .notify("textDocument/didOpen", json!({"textDocument": {"uri": u, "languageId": "markdown", "version": 1, "text": text}}))
            .unwrap();
    }

    fn close(&mut self, rel: &str) {
        let u = uri(&self.vault.join(rel));
        self.c.notify("textDocument/didClose", json!({"textDocument": {"uri": u}})).unwrap();
    }
}

#[test]
fn the_server_follows_buffers_config_edits_and_renames_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (endpoint, log) = recorder();
    let v = vault(tmp.path(), &endpoint);
    let mut s = Server::start(&v);
    s.ask();
    assert!(since(&log, 0).contains("12000"), "the plain note is sent while nothing says otherwise");

    // An unsaved edit adds the flag: withheld at once.
    let n = log.lock().unwrap().len();
    s.open("notes/budget.md", &format!("---\nno_egress: true\n---\n{BUDGET}"));
    let a = s.ask();
    assert!(!since(&log, n).contains("12000"), "an unsaved no_egress edit let the note leave");
    assert!(a["withheld"].to_string().contains("unsaved buffer"), "{a}");
    s.close("notes/budget.md");

    // The config edited while the server runs: the next question follows it.
    std::fs::write(v.join(".lode/config.toml"), config(&endpoint, &["notes/"])).unwrap();
    approve(&v);
    let n = log.lock().unwrap().len();
    s.ask();
    assert!(!since(&log, n).contains("12000"), "a config edit did not hold for the next question");

    // A config that no longer parses: nothing goes to the remote model, and the answer says why.
    std::fs::write(v.join(".lode/config.toml"), "[egress\nno_egress = [").unwrap();
    let n = log.lock().unwrap().len();
    let a = s.ask();
    assert_eq!(log.lock().unwrap().len(), n, "a request left while the rules could not be read");
    assert!(a["notice"].as_str().is_some_and(|m| m.contains("no longer reads")), "{a}");

    // Rules back, and a folder renamed into a withheld name just before the question.
    std::fs::write(v.join(".lode/config.toml"), config(&endpoint, &["archive/"])).unwrap();
    approve(&v);
    let n = log.lock().unwrap().len();
    s.ask();
    assert!(since(&log, n).contains("12000"), "the repaired config sends the note again");
    std::fs::rename(v.join("notes"), v.join("archive")).unwrap();
    let n = log.lock().unwrap().len();
    s.ask();
    assert!(!since(&log, n).contains("12000"), "an ask racing a folder rename sent the old paths");

    // A never-saved buffer that says no_egress: the question typed in it stays here.
    let text = "---\nno_egress: true\n---\nWhat is the Zq staging budget in euros?\n";
    s.open("draft.md", text);
    let n = log.lock().unwrap().len();
    let u = uri(&v.join("draft.md"));
    let r = s
        .c
        .request(
            "workspace/executeCommand",
            json!({"command": "lode.ask", "arguments": [{"uri": u, "range": {"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 0}}, "pinned": false}]}),
        )
        .unwrap();
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(log.lock().unwrap().len(), n, "the question of a no-egress buffer reached the model");

    // A file under the vault that is no note (ignored) in a no-egress folder: a question typed
    // in it is judged by its path all the same.
    std::fs::write(v.join(".gitignore"), "private/\n").unwrap();
    std::fs::create_dir_all(v.join("private")).unwrap();
    std::fs::write(v.join(".lode/config.toml"), config(&endpoint, &["archive/", "/private/**"])).unwrap();
    approve(&v);
    let text = "What is the Zq staging budget in euros?\n";
    std::fs::write(v.join("private/diary.md"), text).unwrap();
    s.open("private/diary.md", text);
    let n = log.lock().unwrap().len();
    let u = uri(&v.join("private/diary.md"));
    let r = s
        .c
        .request(
            "workspace/executeCommand",
            json!({"command": "lode.ask", "arguments": [{"uri": u, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "pinned": false}]}),
        )
        .unwrap();
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(log.lock().unwrap().len(), n, "a question from an ignored file under a no-egress path reached the model");

    // `[llm] remote` edited while the server runs: the next question follows it too.
    std::fs::rename(v.join("archive"), v.join("notes")).unwrap();
    let local = config(&endpoint, &["notes/"]).replace("remote = true", "remote = false");
    std::fs::write(v.join(".lode/config.toml"), local).unwrap();
    approve(&v);
    let n = log.lock().unwrap().len();
    s.ask();
    assert!(since(&log, n).contains("12000"), "a loopback model marked local sees every note");
    std::fs::write(v.join(".lode/config.toml"), config(&endpoint, &["notes/"])).unwrap();
    approve(&v);
    let n = log.lock().unwrap().len();
    s.ask();
    assert!(!since(&log, n).contains("12000"), "`remote = true` did not hold for the next question");
}

#[test]
fn near_miss_spellings_are_reported_in_the_editor_and_by_doctor() {
    let tmp = tempfile::tempdir().unwrap();
    let (endpoint, _) = recorder();
    let v = vault(tmp.path(), &endpoint);
    let text = "---\negress: never\n---\n# HR case\n\nWarning issued.\n";
    std::fs::write(v.join("notes/hr.md"), text).unwrap();
    let mut s = Server::start(&v);
    s.open("notes/hr.md", text);
    let u = uri(&v.join("notes/hr.md"));
    let d =
        s.c.wait_for(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == u.as_str()
                && m["params"]["diagnostics"].as_array().is_some_and(|ds| ds.iter().any(|d| d["code"] == "lode.egress-spelling"))
        })
        .unwrap();
    let diag = d["params"]["diagnostics"].as_array().unwrap().iter().find(|d| d["code"] == "lode.egress-spelling").unwrap().clone();
    assert_eq!(diag["range"]["start"]["line"], 1, "on the frontmatter line: {diag}");
    assert!(diag["message"].as_str().unwrap().contains("egress: local"), "{diag}");
    drop(s);

    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["doctor", "--json", "--vault"]).arg(&v).output().unwrap();
    let report: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let near = report["egress"]["near_misses"].as_array().unwrap();
    assert!(near.iter().any(|n| n["path"] == "notes/hr.md" && n["line"] == 2 && n["withholds"] == true), "{near:?}");
}

/// Every secret class, a near-miss spelling and a linked note, through both front ends of the
/// real binary: what reaches the model is the same, and holds no secret in any encoding.
#[test]
fn cli_and_server_send_no_secret_no_private_note_and_linked_notes() {
    let tmp = tempfile::tempdir().unwrap();
    let (endpoint, log) = recorder();
    let v = tmp.path().join("vault");
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::write(v.join(".lode/config.toml"), config(&endpoint, &[])).unwrap();
    approve(&v);
    // One note holding a row of every class of our secret fixture.
    let rows: Vec<Value> = std::fs::read_to_string(lode_testing::repo().join("fixtures/egress/secrets.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut seen = std::collections::HashSet::new();
    let picked: Vec<&Value> =
        rows.iter().filter(|r| !r["class"].as_str().unwrap().starts_with("benign") && seen.insert(r["class"].clone())).collect();
    let mut note = String::from("# Zq vault settings\n\nThe Zq vault settings are below.\n\n");
    for r in &picked {
        note.push_str(&format!("{}\n\n", r["text"].as_str().unwrap()));
    }
    std::fs::write(v.join("settings.md"), &note).unwrap();
    std::fs::write(
        v.join("hr.md"),
        "---\negress: never\n---\n# Zq vault settings for HR\n\nThe Zq vault settings for HR hold 77123 records.\n",
    )
    .unwrap();
    std::fs::write(v.join("hub.md"), "# Zq rollout\n\nThe Zq rollout starts Monday; see [[Zq vendor]].\n").unwrap();
    std::fs::write(v.join("Zq vendor.md"), "# Vendor\n\nIntro words.\n\nThe vendor contract for the rollout costs 7000 euros.\n").unwrap();
    // A nested vault keeps its own rules inside this one.
    std::fs::create_dir_all(v.join("team/.lode")).unwrap();
    std::fs::create_dir_all(v.join("team/hr")).unwrap();
    std::fs::write(v.join("team/.lode/config.toml"), "[egress]\nno_egress = [\"hr/\"]\n").unwrap();
    std::fs::write(v.join("team/hr/pay.md"), "# Zq vault settings for pay\n\nThe Zq vault settings for pay hold 66123 records.\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["index", "--no-vectors", "--vault"]).arg(&v).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let check = |bytes: &str, front: &str| {
        assert!(bytes.contains("Zq vault settings are below"), "{front}: the settings note was sent");
        assert!(!bytes.contains("77123"), "{front}: a note marked `egress: never` left the machine");
        assert!(!bytes.contains("66123"), "{front}: a nested vault's no-egress note left the machine");
        for r in &picked {
            for s in r["secrets"].as_array().unwrap().iter().filter_map(Value::as_str) {
                let escaped = serde_json::to_string(s).unwrap();
                for form in [s.to_owned(), escaped[1..escaped.len() - 1].to_owned()] {
                    assert!(!bytes.contains(&form), "{front}: {form:?} ({}) left the machine", r["class"]);
                }
            }
        }
    };
    let ask = |q: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["ask", "--llm", "--vault"]).arg(&v).arg(q).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    ask("What are the Zq vault settings?");
    check(&since(&log, 0), "lode ask");
    let n = log.lock().unwrap().len();
    ask("When does the Zq rollout start and what does it cost?");
    assert!(since(&log, n).contains("7000"), "lode ask: the linked note joined in lexical mode");

    let mut s = Server::start(&v);
    let n = log.lock().unwrap().len();
    let r = s.c.request("lode/ask", json!({"question": "What are the Zq vault settings?"})).unwrap();
    assert!(r["error"].is_null(), "{r}");
    check(&since(&log, n), "lode serve");
    let n = log.lock().unwrap().len();
    let r = s.c.request("lode/ask", json!({"question": "When does the Zq rollout start and what does it cost?"})).unwrap();
    assert!(r["error"].is_null(), "{r}");
    assert!(since(&log, n).contains("7000"), "lode serve: the linked note joined");
}
