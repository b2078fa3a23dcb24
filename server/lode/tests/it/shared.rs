//! The team tier end to end, through the real binary, on a real S3 server on loopback (moto,
//! installed by `ensure_test_tools` in scripts/lib.sh): `lode publish` of the example vault, a
//! member's `[shared] index` searched in place, cited answers whose quotes are the published bytes,
//! incremental publishes, a citation that still resolves after the team's docs changed (hover
//! over the real language server), and the faults: the bucket gone mid-session, a publish
//! killed before it is recorded, and a reader asking while a publish is half-way.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use lode_testing::stdio_client::StdioClient;
use serde_json::{json, Value};

/// The user approves the vault's settings (`lode trust`), as they would a folder of their own.
fn approve(v: &std::path::Path) {
    // These tests run lode with HOME at the vault (`lode` below): the approval is kept there.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lode")).args(["trust", "--vault"]).arg(v).env("HOME", v).output().unwrap();
    assert!(o.status.success(), "lode trust: {}", String::from_utf8_lossy(&o.stderr));
}

/// A moto S3 server on 127.0.0.1, stopped on drop.
struct S3 {
    child: Child,
    port: u16,
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pythonpath() -> PathBuf {
    std::env::var_os("LODE_TEST_PYTHONPATH").map(PathBuf::from).unwrap_or_else(|| lode_testing::repo().join(".lode-tools/py-test"))
}

impl S3 {
    fn start() -> S3 {
        let py = pythonpath();
        assert!(py.join("moto").is_dir(), "moto missing in {}: run scripts/test.sh (it installs it)", py.display());
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .env("PYTHONPATH", &py)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs moto");
        let s3 = S3 { child, port };
        let t = Instant::now();
        while s3.request("GET", "/").is_none() {
            assert!(t.elapsed() < Duration::from_secs(60), "moto did not start on port {port}");
            std::thread::sleep(Duration::from_millis(200));
        }
        s3
    }

    /// One plain HTTP request (moto accepts any credentials); the status code.
    fn request(&self, method: &str, path: &str) -> Option<u16> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(s, "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", self.port).ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        out.split_whitespace().nth(1)?.parse().ok()
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn lode(args: &[&str], vault: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
    c.args(args).arg("--vault").arg(vault);
    // Credentials from the environment, as a CI job or a member's shell has them.
    c.env("AWS_ACCESS_KEY_ID", "lode-test").env("AWS_SECRET_ACCESS_KEY", "lode-test-secret").env("AWS_REGION", "us-east-1");
    c.env_remove("AWS_PROFILE").env("HOME", vault);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn publish(team: &Path, s3: &S3, env: &[(&str, &str)]) -> Output {
    publish_to(team, &s3.endpoint(), env)
}

fn publish_to(team: &Path, endpoint: &str, env: &[(&str, &str)]) -> Output {
    let endpoint = format!("endpoint={endpoint}");
    lode(&["publish", "--json", "--to", "s3://team-docs/handbook", "--option", &endpoint, "--option", "allow_http=true"], team, env)
}

/// A running S3 server with the team's bucket, and a copy of the example vault as the team's.
fn team_on_s3(tmp: &Path) -> (S3, PathBuf) {
    let s3 = S3::start();
    assert_eq!(s3.request("PUT", "/team-docs"), Some(200));
    (s3, lode_testing::example_vault(tmp))
}

fn published(o: &Output) -> Value {
    assert!(o.status.success(), "publish failed: {}", text(&o.stderr));
    serde_json::from_str(text(&o.stdout).trim()).unwrap()
}

/// A member's vault: one note of their own, and the team's tier in the config.
fn member(dir: &Path, s3: &S3, extra: &str) -> PathBuf {
    let m = dir.join("member");
    std::fs::create_dir_all(m.join(".lode")).unwrap();
    std::fs::write(m.join("tea.md"), "# Mornings\n\nI drink green tea in the morning, never coffee.\n").unwrap();
    std::fs::write(
        m.join(".lode/config.toml"),
        format!("{extra}\n[shared]\nindex = \"s3://team-docs/handbook\"\ntimeout_secs = 8\noptions = {{ endpoint = \"{}\", allow_http = \"true\" }}\n", s3.endpoint()),
    )
    .unwrap();
    approve(&m);
    let o = lode(&["index", "-q"], &m, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    m
}

fn ask(vault: &Path, q: &str) -> Value {
    let o = lode(&["ask", "--json", q], vault, &[]);
    assert!(o.status.success(), "ask failed: {}", text(&o.stderr));
    serde_json::from_str(text(&o.stdout).trim()).unwrap()
}

fn citations(a: &Value) -> Vec<Value> {
    a["claims"].as_array().unwrap().iter().flat_map(|c| c["citations"].as_array().unwrap().clone()).collect()
}

/// Every citation of `a` to the shared tier quotes exactly the bytes of `team`'s file `rel` as
/// it was when published (`body`), at the cited range.
fn assert_quotes(a: &Value, rel: &str, body: &str) -> usize {
    let mut n = 0;
    for c in citations(a).iter().filter(|c| c["path"] == format!("s3://team-docs/handbook/{rel}")) {
        assert_eq!(c["kind"], "shared", "{c}");
        let (s, e) = (c["start"].as_u64().unwrap() as usize, c["end"].as_u64().unwrap() as usize);
        assert_eq!(&body[s..e], c["quoted_span"].as_str().unwrap(), "a shared citation's quote is the published bytes");
        n += 1;
    }
    n
}

/// [`assert_quotes`] for every shared citation of `a`, against the files of `team` now.
fn assert_all_quotes(a: &Value, team: &Path) -> usize {
    let mut n = 0;
    for c in citations(a).iter().filter(|c| c["kind"] == "shared") {
        let rel = c["path"].as_str().unwrap().strip_prefix("s3://team-docs/handbook/").expect("addressed in the tier");
        n += assert_quotes(&json!({"claims": [{"citations": [c]}]}), rel, &std::fs::read_to_string(team.join(rel)).unwrap());
    }
    n
}

const RUNBOOK: &str = "runbooks/redis-failover.md";
const QUORUM: &str = "What is the Sentinel quorum since 2026-02-27?";

#[test]
fn a_team_index_on_loopback_s3_answers_with_citations_that_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let (s3, team) = team_on_s3(tmp.path());
    lode_testing::models();

    // A member whose tier has never been published is told so, and answered from their notes.
    let m = member(tmp.path(), &s3, "");
    let a = ask(&m, "What do I drink in the morning?");
    assert!(a["notice"].as_str().unwrap_or("").contains("nothing has been published there yet"), "{a}");
    assert_eq!(citations(&a)[0]["path"], "tea.md", "{a}");

    // First publish: every note, with vectors (the default embedder).
    let r = published(&publish(&team, &s3, &[]));
    assert_eq!((r["seq"].as_i64(), r["notes"].as_u64(), r["changed"].as_u64()), (Some(1), Some(13), Some(13)), "{r}");
    assert_eq!(r["embedder"], "all-MiniLM-L6-v2", "{r}");
    assert!(r["passages_added"].as_u64().unwrap() > 100, "{r}");

    // The member's question about the team's runbook is answered from the shared tier, quoting
    // its published bytes; both legs ran over it in place.
    let runbook = std::fs::read_to_string(team.join(RUNBOOK)).unwrap();
    let a = ask(&m, QUORUM);
    assert!(a["notice"].is_null(), "{a}");
    assert!(assert_all_quotes(&a, &team) > 0, "the team's notes are cited: {a}");
    let o = lode(&["search", "--json", "--timings", "--mode", "hybrid", "Sentinel quorum"], &m, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stages = text(&o.stderr);
    let shared_stage = stages.lines().find(|l| l.starts_with("shared:")).unwrap_or_else(|| panic!("no shared stage: {stages}"));
    assert!(!shared_stage.contains(" 0 dense"), "the dense leg ran over the tier: {shared_stage}");
    let hits: Vec<Value> = text(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(hits.iter().any(|h| h["kind"] == "shared" && h["path"] == format!("s3://team-docs/handbook/{RUNBOOK}")), "{hits:?}");

    // The member's own words come first for a question both tiers touch.
    let a = ask(&m, "What do I drink in the morning?");
    assert_eq!(citations(&a)[0]["path"], "tea.md", "{a}");
    let first_cite = citations(&ask(&m, QUORUM)).into_iter().find(|c| c["kind"] == "shared").unwrap();

    // An unchanged vault publishes nothing new; one changed note is all a second publish writes.
    let r = published(&publish(&team, &s3, &[]));
    assert_eq!((r["seq"].as_i64(), r["changed"].as_u64(), r["passages_added"].as_u64()), (Some(2), Some(0), Some(0)), "{r}");
    let changed = runbook.replace("Since 2026-02-27 the quorum is 2", "Since 2026-03-09 the quorum is 4");
    std::fs::write(team.join(RUNBOOK), &changed).unwrap();
    let r = published(&publish(&team, &s3, &[]));
    assert_eq!(
        (r["seq"].as_i64(), r["changed"].as_u64(), r["unchanged"].as_u64(), r["versions_added"].as_u64()),
        (Some(3), Some(1), Some(12), Some(1)),
        "{r}"
    );
    // Members see the new publish within the refresh interval (each CLI run opens it afresh).
    let a = ask(&m, "What has the Sentinel quorum been since 2026-03-09?");
    assert!(assert_quotes(&a, RUNBOOK, &changed) > 0, "{a}");
    assert!(citations(&a).iter().any(|c| c["quoted_span"].as_str().unwrap().contains("quorum is 4")), "{a}");

    // A citation written before the change still resolves to the bytes it pinned: hover over
    // the real language server, with nothing of the tier kept locally.
    // Kept in the member's cache (HOME is the vault in these tests), never in the vault.
    let _ = std::fs::remove_dir_all(m.join(".cache/lode/shared-versions"));
    let link = lode_core::citation::render(
        "answers.md",
        first_cite["path"].as_str().unwrap(),
        first_cite["line"].as_u64().unwrap() as usize,
        first_cite["short_id"].as_str().unwrap(),
        first_cite["start"].as_u64().unwrap() as usize..first_cite["end"].as_u64().unwrap() as usize,
    );
    // And two citations of the runbook as published before the change: of the line that changed
    // (drifted since) and of one that did not (moved to a newer version: re-pin).
    let old_id = lode_store::version_id(runbook.as_bytes());
    let cite_runbook = |needle: &str| {
        let at = runbook.find(needle).unwrap_or_else(|| panic!("{needle:?} in the runbook"));
        let line = runbook[..at].matches('\n').count() + 1;
        lode_core::citation::render("answers.md", &format!("s3://team-docs/handbook/{RUNBOOK}"), line, &old_id[..12], at..at + needle.len())
    };
    let kept_line = runbook
        .lines()
        .find(|l| l.len() > 30 && !l.contains("quorum") && changed.contains(*l))
        .expect("an unchanged line")
        .trim()
        .to_owned();
    let (drifted_link, moved_link) = (cite_runbook("Since 2026-02-27 the quorum is 2"), cite_runbook(&kept_line));
    let note = format!("# Answers\n\nThe quorum {link}\n\nThe runbook said {drifted_link}\n\nIt also says {moved_link}\n");
    std::fs::write(m.join("answers.md"), &note).unwrap();
    let env = [("AWS_ACCESS_KEY_ID", "lode-test"), ("AWS_SECRET_ACCESS_KEY", "lode-test-secret"), ("AWS_REGION", "us-east-1")];
    // HOME at the vault, as for `lode` above: the approval and the store's binding are there.
    let serve_env = [env[0], env[1], env[2], ("HOME", m.to_str().unwrap())];
    let mut c = StdioClient::spawn_env(env!("CARGO_BIN_EXE_lode"), ["serve"], serve_env).unwrap();
    let root = format!("file://{}", m.display());
    let _ = c.request("initialize", json!({"processId": null, "rootUri": root, "capabilities": {}})).unwrap();
    c.notify("initialized", json!({})).unwrap();
    c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end").unwrap();
    let uri = format!("file://{}", m.join("answers.md").display());
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": note}})).unwrap();
    // Not kept here yet, the citation is said to be unchecked (diagnostics never reach the
    // network), not unknown.
    let diags = c
        .wait_for(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && m["params"]["diagnostics"].as_array().is_some_and(|d| !d.is_empty())
        })
        .unwrap();
    let codes: Vec<&str> = diags["params"]["diagnostics"].as_array().unwrap().iter().filter_map(|d| d["code"].as_str()).collect();
    assert_eq!(codes, ["lode.shared-unchecked"; 3], "{diags}");
    let col = note.lines().nth(2).unwrap().find("lode ").unwrap();
    let hover = c.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 2, "character": col}})).unwrap();
    let shown = hover["result"]["contents"]["value"].as_str().unwrap_or_default().to_owned();
    let quote = first_cite["quoted_span"].as_str().unwrap();
    assert!(
        shown.contains(quote.split_whitespace().take(6).collect::<Vec<_>>().join(" ").as_str()),
        "hover shows the pinned quote {quote:?}: {hover}"
    );
    let kept = std::fs::read_dir(m.join(".cache/lode/shared-versions"))
        .unwrap()
        .flatten()
        .any(|d| d.path().join(first_cite["version_id"].as_str().unwrap()).is_file());
    assert!(kept && !m.join(".lode/shared-versions").exists(), "the cited bytes are kept, in the user's cache");
    assert!(shown.contains("`s3://team-docs/handbook/"), "hover names the tier: {shown}");
    assert!(!shown.contains("deleted"), "{shown}");
    // Hovering the runbook's citations asks the tier which version of the runbook it holds now
    // (publish 3, the quorum changed): each is checked against it as a local citation is against
    // its note's head, in the hover and in diagnostics published right after it — and again after
    // the note is closed and reopened (what the tier held is remembered: no request on that path).
    let code_of = |m: &Value| {
        m["params"]["diagnostics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["code"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    let address = format!("s3://team-docs/handbook/{RUNBOOK}");
    for (line, want) in [
        (4, format!("**drifted**: no longer in the current version of {address}")),
        (6, format!("still in the current version of {address}")),
    ] {
        let col = note.lines().nth(line).unwrap().find("lode ").unwrap();
        let hover =
            c.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": col}})).unwrap();
        let shown = hover["result"]["contents"]["value"].as_str().unwrap_or_default();
        assert!(shown.contains(&want), "hover checks the tier's current version ({want}): {shown}");
    }
    let after = c
        .wait_for(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && code_of(m).contains(&"lode.drifted".to_owned())
                && code_of(m).contains(&"lode.older-version".to_owned())
        })
        .unwrap();
    let hint = after["params"]["diagnostics"].as_array().unwrap().iter().find(|d| d["code"] == "lode.older-version").unwrap().clone();
    assert_eq!(hint["data"]["path"].as_str(), Some(address.as_str()), "{hint}");
    c.notify("textDocument/didClose", json!({"textDocument": {"uri": uri}})).unwrap();
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "markdown", "version": 2, "text": note}})).unwrap();
    let reopened = c
        .wait_for(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri && m["params"]["version"] == 2)
        .unwrap();
    let mut codes = code_of(&reopened);
    codes.sort();
    assert_eq!(codes, ["lode.drifted", "lode.older-version"], "after a reopen: {reopened}");
    // The hint offers to re-pin the citation to the tier's current version.
    let hint = reopened["params"]["diagnostics"].as_array().unwrap().iter().find(|d| d["code"] == "lode.older-version").unwrap().clone();
    let actions = c
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": hint["range"], "context": {"diagnostics": [hint]}}),
        )
        .unwrap();
    let titles: Vec<&str> = actions["result"].as_array().into_iter().flatten().filter_map(|a| a["title"].as_str()).collect();
    assert!(titles.iter().any(|t| t.starts_with("Re-pin")), "{actions}");
    // The editor's status shows the tier the hover opened: its newest publish.
    let status = c.request("lode/status", json!({})).unwrap();
    let shared = &status["result"]["shared"];
    assert_eq!(
        (shared["state"].as_str(), shared["publish"]["seq"].as_i64(), shared["publish"]["notes"].as_i64()),
        (Some("open"), Some(3), Some(13)),
        "{status}"
    );
    assert!(shared["index"].as_str().unwrap().starts_with("s3://"), "{status}");
    let _ = c.stop();

    // The publisher reading its own tier: every note it holds unchanged comes from its own
    // index, under its own path, not a second time as the team's.
    std::fs::write(
        team.join(".lode/config.toml"),
        format!("[shared]\nindex = \"s3://team-docs/handbook\"\noptions = {{ endpoint = \"{}\", allow_http = \"true\" }}\n", s3.endpoint()),
    )
    .unwrap();
    approve(&team);
    let o = lode(&["search", "--json", "--timings", "--mode", "hybrid", "Sentinel quorum"], &team, &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let hits: Vec<Value> = text(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(hits.iter().any(|h| h["path"] == RUNBOOK && h["kind"] == "note"), "{hits:?}");
    assert!(hits.iter().all(|h| h["kind"] != "shared"), "a note held unchanged came back as the team's: {hits:?}");
    assert!(text(&o.stderr).lines().any(|l| l.starts_with("shared:") && l.contains("left to your own copy")), "{}", text(&o.stderr));
    let a = ask(&team, "What has the Sentinel quorum been since 2026-03-09?");
    assert!(!citations(&a).is_empty() && citations(&a).iter().all(|c| c["kind"] == "note"), "{a}");
    // Once the publisher's copy differs from what was published (an edit not yet published),
    // the published version is the team's again, not theirs.
    let local = std::fs::read_to_string(team.join(RUNBOOK)).unwrap();
    std::fs::write(
        team.join(RUNBOOK),
        format!(
            "{local}
Draft: the Sentinel quorum is under review.
"
        ),
    )
    .unwrap();
    let o = lode(&["index"], &team, &env);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = lode(&["search", "--json", "--timings", "--mode", "hybrid", "Sentinel quorum"], &team, &env);
    let hits: Vec<Value> = text(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(hits.iter().any(|h| h["kind"] == "shared"), "an edited note's published version was taken for the member's own: {hits:?}");
}

#[test]
fn the_bucket_gone_a_publish_killed_and_a_reader_mid_publish() {
    let tmp = tempfile::tempdir().unwrap();
    let (s3, team) = team_on_s3(tmp.path());
    std::fs::create_dir_all(team.join(".lode")).unwrap();
    std::fs::write(team.join(".lode/config.toml"), "[models]\nembedder = \"\"\n").unwrap();
    approve(&team);
    let runbook = std::fs::read_to_string(team.join(RUNBOOK)).unwrap();
    let r = published(&publish(&team, &s3, &[]));
    assert!(r["embedder"].is_null(), "full text only without an embedder: {r}");
    let m = member(tmp.path(), &s3, "[models]\nembedder = \"\"\n");
    assert!(assert_quotes(&ask(&m, QUORUM), RUNBOOK, &runbook) > 0);

    // A publish killed after writing, before its record: readers keep seeing the last publish;
    // the next publish rolls the half-written commits back and completes.
    let changed = runbook.replace("Since 2026-02-27 the quorum is 2", "Since 2026-03-09 the quorum is 4");
    std::fs::write(team.join(RUNBOOK), &changed).unwrap();
    let o = publish(&team, &s3, &[("LODE_FAULT_PUBLISH", "before-record")]);
    assert!(!o.status.success(), "the injected fault kills the publish");
    let a = ask(&m, QUORUM);
    assert!(assert_quotes(&a, RUNBOOK, &runbook) > 0, "readers see the last complete publish: {a}");
    assert!(!a.to_string().contains("quorum is 4"), "{a}");
    let r = published(&publish(&team, &s3, &[]));
    assert_eq!((r["seq"].as_i64(), r["restored"].as_bool(), r["changed"].as_u64()), (Some(2), Some(true), Some(1)), "{r}");
    assert!(assert_quotes(&ask(&m, "What has the Sentinel quorum been since 2026-03-09?"), RUNBOOK, &changed) > 0);

    // A reader asking while a publish has deleted the changed note's passages and not yet
    // written the new ones sees the last complete publish, whole.
    let again = changed.replace("quorum is 4", "quorum is 5");
    std::fs::write(team.join(RUNBOOK), &again).unwrap();
    let (team2, endpoint) = (team.clone(), s3.endpoint());
    let publishing = std::thread::spawn(move || publish_to(&team2, &endpoint, &[("LODE_FAULT_PUBLISH", "pause-after-delete")]));
    std::thread::sleep(Duration::from_secs(3));
    let a = ask(&m, "What has the Sentinel quorum been since 2026-03-09?");
    assert!(!publishing.is_finished(), "the reader asked during the publish's pause");
    assert!(assert_quotes(&a, RUNBOOK, &changed) > 0, "mid-publish, the runbook is still there as last published: {a}");
    let r = published(&publishing.join().unwrap());
    assert_eq!(r["seq"].as_i64(), Some(3), "{r}");
    assert!(assert_quotes(&ask(&m, "What has the Sentinel quorum been since 2026-03-09?"), RUNBOOK, &again) > 0);

    // The member's editor has the tier open when the bucket goes away: the question that finds
    // it gone answers from their own notes and says so, and the server then says the tier is
    // down (and skips it until it retries) instead of reporting it open.
    let env = [("AWS_ACCESS_KEY_ID", "lode-test"), ("AWS_SECRET_ACCESS_KEY", "lode-test-secret"), ("AWS_REGION", "us-east-1")];
    // HOME at the vault, as for `lode` above: the approval and the store's binding are there.
    let serve_env = [env[0], env[1], env[2], ("HOME", m.to_str().unwrap())];
    let mut c = StdioClient::spawn_env(env!("CARGO_BIN_EXE_lode"), ["serve"], serve_env).unwrap();
    let _ = c.request("initialize", json!({"processId": null, "rootUri": format!("file://{}", m.display()), "capabilities": {}})).unwrap();
    c.notify("initialized", json!({})).unwrap();
    c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end").unwrap();
    let a = c.request("lode/ask", json!({"question": QUORUM})).unwrap();
    assert!(a.to_string().contains("s3://team-docs/handbook/"), "the tier answered while up: {a}");
    assert_eq!(c.request("lode/status", json!({})).unwrap()["result"]["shared"]["state"], "open");

    // The bucket unreachable: a question whose passages the tier must read (none of this one's
    // were read before, so no cache holds them) answers without it, and says so.
    drop(s3);
    let a = c.request("lode/ask", json!({"question": "Which Redis eviction policy was chosen?"})).unwrap();
    assert!(a.to_string().contains("could not be searched"), "{a}");
    let status = c.request("lode/status", json!({})).unwrap();
    let state = status["result"]["shared"]["state"].as_str().unwrap_or_default().to_owned();
    assert!(state.starts_with("failed: ") && state.contains("cannot connect"), "{status}");
    let _ = c.stop();
    let t = Instant::now();
    let a = ask(&m, "What do I drink in the morning?");
    let notice = a["notice"].as_str().unwrap_or_default();
    assert!(notice.contains("shared index could not be searched") && notice.contains("cannot connect"), "{a}");
    assert_eq!(citations(&a)[0]["path"], "tea.md", "{a}");
    assert!(t.elapsed() < Duration::from_secs(30), "an unreachable bucket costs seconds, not minutes: {:?}", t.elapsed());
    // A publish to it fails with a clear error and no stack of library layers.
    let o = lode(
        &["publish", "--to", "s3://team-docs/handbook", "--option", "endpoint=http://127.0.0.1:9", "--option", "allow_http=true"],
        &team,
        &[],
    );
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(e.contains("cannot connect to 127.0.0.1:9") && e.lines().count() <= 3, "{e}");
}

#[test]
fn notes_the_publisher_keeps_local_are_not_published_and_secrets_stay_out_of_the_config() {
    let tmp = tempfile::tempdir().unwrap();
    let team = lode_testing::example_vault(tmp.path());
    std::fs::create_dir_all(team.join(".lode")).unwrap();
    std::fs::write(team.join(".lode/config.toml"), "[models]\nembedder = \"\"\n[egress]\nno_egress = [\"people/**\"]\n").unwrap();
    approve(&team);
    std::fs::write(team.join("notes/private.md"), "---\negress: local\n---\n# Private\n\nThe vault passphrase hint is heliotrope.\n")
        .unwrap();
    // A folder tier: the same code, no server.
    let tier = tmp.path().join("tier");
    let o = lode(&["publish", "--json", "--to", tier.to_str().unwrap()], &team, &[]);
    let r = published(&o);
    let kept: Vec<&str> = r["kept_back"].as_array().unwrap().iter().map(|k| k["path"].as_str().unwrap()).collect();
    assert!(kept.contains(&"notes/private.md") && kept.iter().any(|p| p.starts_with("people/")), "{r}");
    let m = tmp.path().join("member");
    std::fs::create_dir_all(m.join(".lode")).unwrap();
    std::fs::write(m.join("x.md"), "# X\n\nNothing.\n").unwrap();
    std::fs::write(m.join(".lode/config.toml"), format!("[models]\nembedder = \"\"\n[shared]\nindex = {:?}\n", tier.to_str().unwrap()))
        .unwrap();
    approve(&m);
    assert!(lode(&["index", "-q"], &m, &[]).status.success());
    let o = lode(&["search", "--json", "vault passphrase hint heliotrope"], &m, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stdout).contains("heliotrope"), "a keep-local note was published: {}", text(&o.stdout));
    let o = lode(&["search", "--json", "Redis failover"], &m, &[]);
    assert!(text(&o.stdout).contains("\"kind\":\"shared\""), "the rest is: {}", text(&o.stdout));

    // Paths that break a naive filter (quotes, SQL, Unicode) are changed and removed exactly.
    let odd = ["notes/it's ünïcode.md", "notes/x') OR ('1'='1.md"];
    for (i, p) in odd.iter().enumerate() {
        std::fs::write(team.join(p), format!("# Odd {i}\n\nThe zanzibar lighthouse keeper number {i} logs every ship.\n")).unwrap();
    }
    let r = published(&lode(&["publish", "--json", "--to", tier.to_str().unwrap()], &team, &[]));
    assert_eq!(r["changed"].as_u64(), Some(2), "{r}");
    std::fs::write(team.join(odd[0]), "# Odd 0\n\nThe kestrel lighthouse keeper logs every ship.\n").unwrap();
    std::fs::remove_file(team.join(odd[1])).unwrap();
    let r = published(&lode(&["publish", "--json", "--to", tier.to_str().unwrap()], &team, &[]));
    assert_eq!((r["changed"].as_u64(), r["removed"].as_u64()), (Some(1), Some(1)), "{r}");
    let found = |q: &str| -> Vec<Value> {
        let o = lode(&["search", "--json", q], &m, &[]);
        text(&o.stdout).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).filter(|h| h["kind"] == "shared").collect()
    };
    assert!(
        found("zanzibar lighthouse keeper").iter().all(|h| !h["text"].as_str().unwrap().contains("zanzibar")),
        "old passages were left behind"
    );
    let now = found("kestrel lighthouse keeper");
    assert_eq!(now.iter().filter(|h| h["text"].as_str().unwrap().contains("kestrel lighthouse")).count(), 1, "{now:?}");
    assert!(now[0]["path"].as_str().unwrap().ends_with("notes/it's ünïcode.md"), "{now:?}");

    // `lode doctor` reports the tier and its newest publish.
    let o = lode(&["doctor"], &m, &[]);
    let d = text(&o.stdout);
    let line = d.lines().find(|l| l.contains("shared")).unwrap_or_else(|| panic!("{d}"));
    assert!(line.starts_with("ok") && line.contains("publish 3") && line.contains("full text only"), "{line}");

    // A secret in [shared] options is refused by name, before anything is sent.
    std::fs::write(
        m.join(".lode/config.toml"),
        "[models]\nembedder = \"\"\n[shared]\nindex = \"s3://b/p\"\noptions = { aws_secret_access_key = \"x\" }\n",
    )
    .unwrap();
    approve(&m);
    let a = ask(&m, "Nothing?");
    assert!(a["notice"].as_str().unwrap_or_default().contains("must not hold aws_secret_access_key"), "{a}");
    let o = lode(&["doctor"], &m, &[]);
    assert!(!o.status.success() && text(&o.stdout).contains("FAIL  shared"), "{}", text(&o.stdout));
}
