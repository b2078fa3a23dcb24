//! `lode mcp` driven by a real MCP client, the official Python SDK (PyPI `mcp`, `mcp_client.py`):
//! the tools (`search`, `ask`, `verify`, `read`, `status`) and resources on the example vault;
//! egress, where the client is a reader off the machine unless the user's own config says it is
//! local; and a vault being written by `lode serve` meanwhile.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use lode_testing::stdio_client::StdioClient;
use serde_json::{json, Value};

const PRIVATE: &str = "---\nno_egress: true\n---\n# Salary\n\nMy Zorblax salary is 91,000 a year.\n";
const KEYS: &str = "# Deploy keys\n\nThe Quillfeather deploy key is AKIAIOSFODNN7QUILLFX for the staging bucket.\n";
const MYTHS: &str = "# Redis lore\n\n## Myths\n\n- Redis Sentinel needs five nodes to fail over.\n";

fn user_env(home: &Path) -> Vec<(String, String)> {
    let mut env = super::support::user_home(home);
    env.push(("LODE_LOG".into(), "warn".into()));
    env
}

fn python_path() -> PathBuf {
    std::env::var_os("LODE_TEST_MCP_PYTHONPATH").map(PathBuf::from).unwrap_or_else(|| lode_testing::repo().join(".lode-tools/py-mcp"))
}

/// The example vault with a no-egress note, a note holding a key, and a myths list; indexed
/// lexically, its settings approved by the user (a test HOME of its own).
fn vault(dir: &Path) -> (PathBuf, PathBuf) {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let v = dir.join("vault");
    lode_testing::copy_dir(&lode_testing::repo().join("fixtures/vault"), &v);
    std::fs::create_dir_all(v.join("private")).unwrap();
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::write(v.join("private/salary.md"), PRIVATE).unwrap();
    std::fs::write(v.join("notes/deploy-keys.md"), KEYS).unwrap();
    std::fs::write(v.join("notes/redis-lore.md"), MYTHS).unwrap();
    // A folder may not make its MCP clients local: `[trust]` is the user's own config's.
    std::fs::write(v.join(".lode/config.toml"), "[models]\nembedder = \"\"\n\n[trust]\nmcp_local = true\n").unwrap();
    let run = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
        c.args(args).arg("--vault").arg(&v);
        for (k, val) in user_env(&home) {
            c.env(k, val);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "lode {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    run(&["trust"]);
    run(&["index", "--no-vectors"]);
    (v, home)
}

/// Runs `plan` in one MCP session against `lode mcp --vault <v>`; one JSON value per step
/// (after the first line, the session's `initialize` result).
fn session(v: &Path, home: &Path, plan: &Value) -> (Value, Vec<Value>) {
    let mut args = vec![env!("CARGO_BIN_EXE_lode").into(), "mcp".into(), "--vault".into()];
    args.push(v.as_os_str().to_owned());
    session_with(&args, home, plan)
}

/// [`session`] with the client's own arguments: the server's command line, or the URL of a
/// server already listening.
fn session_with(client_args: &[std::ffi::OsString], home: &Path, plan: &Value) -> (Value, Vec<Value>) {
    let mut c = Command::new("python3");
    c.arg(lode_testing::repo().join("server/lode/tests/it/mcp_client.py")).args(client_args);
    c.env("PYTHONPATH", python_path());
    for (k, val) in user_env(home) {
        c.env(k, val);
    }
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().expect("python3");
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(plan.to_string().as_bytes()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "the MCP client failed:\n{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let mut lines = stdout.lines().map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")));
    let init = lines.next().expect("initialize");
    let out: Vec<Value> = lines.collect();
    assert_eq!(out.len(), plan.as_array().unwrap().len(), "{stdout}");
    (init, out)
}

fn tool(name: &str, args: Value) -> Value {
    json!({"op": "tool", "name": name, "args": args})
}

fn ok(step: &Value) -> &Value {
    assert_eq!(step["is_error"], json!(false), "{step:#}");
    &step["structured"]
}

#[test]
fn an_agent_searches_asks_verifies_and_reads_with_checked_citations() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, home) = vault(tmp.path());
    let plan = json!([
        {"op": "list_tools"},
        tool("search", json!({"query": "quorum failover automatically", "limit": 3})),
        tool("ask", json!({"question": "How often are staging certificates rotated?"})),
        tool("verify", json!({"claim": "Since 2026-02-27 the quorum is 2.", "quotes": ["Since 2026-02-27 the quorum is 2"]})),
        tool("verify", json!({"claim": "The quorum is 7.", "quotes": ["the quorum is 7"]})),
        tool("verify", json!({"claim": "The failover happened automatically during the incident.", "quotes": ["the failover did not happen automatically"]})),
        tool("verify", json!({"claim": "Redis Sentinel needs five nodes to fail over.", "quotes": ["Redis Sentinel needs five nodes to fail over."]})),
        tool("verify", json!({"claim": "Since 2026-02-27 the quorum is 2.", "quotes": ["Since 2026-02-27 the quorum is 2"], "paths": ["notes/reading-list.md"]})),
        tool("read", json!({"path": "runbooks/redis-failover.md", "start_line": 1, "end_line": 3})),
        tool("status", json!({})),
        tool("search", json!({"query": "   "})),
        tool("read", json!({"path": "no/such.md"})),
        tool("verify", json!({"claim": "x", "quotes": "not a list", "bogus": 1})),
        tool("teleport", json!({})),
        tool("search", json!({"query": "quorum AND (NOT \"", "mode": "lexical"})),
        tool("read", json!({"path": "x".repeat(200_000)})),
        tool("ask", json!({"question": "What?", "note": " "})),
        {"op": "list_templates"},
        {"op": "read_resource", "uri": "lode://note/runbooks/redis-failover.md"},
        {"op": "read_resource", "uri": "lode://elsewhere/x"},
    ]);
    let (init, out) = session(&v, &home, &plan);
    assert_eq!(init["server"], "lode");
    assert!(init["instructions"].as_str().unwrap().contains("verify"), "{init}");

    // Tools, each with a description and a schema an agent can follow.
    let tools = out[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["search", "ask", "verify", "read", "status"]);
    for t in tools {
        assert!(t["description"].as_str().unwrap().len() > 60, "{t}");
        assert_eq!(t["schema"]["type"], "object", "{t}");
    }

    // search: passages with where they are and which version; no embedder, so lexical, and said.
    let found = ok(&out[1]);
    let first = &found["items"][0];
    assert_eq!(first["path"], "runbooks/redis-failover.md", "{found:#}");
    assert!(first["line_start"].as_u64().unwrap() >= 1 && first["line_end"].as_u64() >= first["line_start"].as_u64(), "{first}");
    assert_eq!(first["version_id"].as_str().unwrap().len(), 64, "{first}");
    assert_eq!(first["trust"], "note");
    assert!(first["breadcrumb"].as_str().unwrap().contains("Redis failover"), "{first}");
    assert!(found["notices"].to_string().contains("lexical search only"), "{found}");

    // ask: claims whose citations carry path, line, version and the quoted span.
    let answer = ok(&out[2]);
    assert_eq!(answer["abstained"], json!(false), "{answer:#}");
    let claim = answer["claims"].as_array().unwrap().iter().find(|c| c["rung"] == "verified").unwrap_or_else(|| panic!("{answer:#}"));
    let cit = &claim["citations"][0];
    assert_eq!(cit["path"], "runbooks/rotate-staging-certs.md", "{answer:#}");
    assert!(cit["line"].as_u64().unwrap() >= 1 && cit["version_id"].as_str().unwrap().len() == 64, "{cit}");
    assert!(!cit["quoted_span"].as_str().unwrap().is_empty());
    assert!(answer["markdown"].as_str().unwrap().contains("rotate-staging-certs.md"), "{answer}");

    // verify: faithful, fabricated, negated, a myth, and the right words in the wrong note.
    let faithful = ok(&out[3]);
    assert_eq!(faithful["verdict"], "verified", "{faithful:#}");
    let q = &faithful["quotes"][0];
    assert_eq!(q["path"], "runbooks/redis-failover.md");
    assert!(q["line_start"].as_u64().unwrap() > 1 && q["version_id"].as_str().unwrap().len() == 64, "{q}");
    assert!(faithful["step"].as_str().unwrap().starts_with("quoted & coupled"), "{faithful}");
    let fabricated = ok(&out[4]);
    assert_eq!(fabricated["verdict"], "not_found", "{fabricated:#}");
    assert_eq!(fabricated["quotes"][0]["found"], json!(false));
    let negated = ok(&out[5]);
    assert!(negated["verdict"] == "not_verified" || negated["verdict"] == "evidence_only", "{negated:#}");
    assert_eq!(negated["quotes"][0]["found"], json!(true), "{negated:#}");
    let myth = ok(&out[6]);
    assert_eq!(myth["verdict"], "evidence_only", "{myth:#}");
    assert!(myth["reason"].as_str().unwrap().contains("Myths"), "{myth}");
    assert_eq!(ok(&out[7])["verdict"], "not_found", "{}", out[7]);

    // read: numbered lines of the note's current version.
    let read = ok(&out[8]);
    assert_eq!(read["head"], json!(true));
    assert_eq!(read["line_start"], 1);
    assert_eq!(read["line_end"], 3);
    assert!(read["text"].as_str().unwrap().starts_with("1│ # Runbook: Redis failover\n"), "{read}");

    // status: what the index holds, and who the client is.
    let status = ok(&out[9]);
    assert!(status.get("notes").is_none() && status.get("unsaved").is_none(), "no counts for a remote client: {status}");
    assert_eq!(status["scanning"], json!(false));
    assert!(status["client"].as_str().unwrap().starts_with("remote"), "{status}");

    // Bad input: a clear tool error the agent can act on, and the session goes on.
    for (i, says) in
        [(10, "`query` is required"), (11, "no note no/such.md"), (12, "unknown argument `bogus`"), (13, "no tool \"teleport\"")]
    {
        assert_eq!(out[i]["is_error"], json!(true), "{}", out[i]);
        assert!(out[i]["text"].as_str().unwrap().contains(says), "{}: {}", says, out[i]);
    }
    // FTS5 syntax in a query is plain text.
    assert_eq!(out[14]["is_error"], json!(false), "{}", out[14]);

    // Resources: templates, a note by URI, a clear error for an address that is not lode's.
    // A huge argument is not sent back whole; an empty note is said to be empty.
    let huge = out[15]["text"].as_str().unwrap();
    assert!(
        out[15]["is_error"] == json!(true) && huge.len() < 2000 && huge.contains("characters in all"),
        "{}",
        &huge[..huge.len().min(300)]
    );
    assert!(out[16]["text"].as_str().unwrap().contains("`note` is empty"), "{}", out[16]);
    assert_eq!(out[17]["templates"], json!(["lode://note/{path}", "lode://version/{id}"]));
    assert!(out[18]["text"].as_str().unwrap().starts_with("# Runbook: Redis failover"), "{}", out[18]);
    assert!(out[19]["error"].as_str().unwrap().contains("not a lode resource"), "{}", out[19]);
}

#[test]
fn an_mcp_client_is_a_reader_off_the_machine_unless_the_user_says_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, home) = vault(tmp.path());
    let db = || rusqlite::Connection::open_with_flags(v.join(".lode/lode.db"), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let version: String = db().query_row("SELECT head_version FROM notes WHERE path = 'private/salary.md'", [], |r| r.get(0)).unwrap();
    let mut plan = vec![
        tool("search", json!({"query": "Zorblax salary", "mode": "lexical"})),
        tool("ask", json!({"question": "What is my Zorblax salary?"})),
        tool("verify", json!({"claim": "My Zorblax salary is 91,000 a year.", "quotes": ["My Zorblax salary is 91,000 a year."]})),
        tool(
            "verify",
            json!({"claim": "My Zorblax salary is 91,000 a year.", "quotes": ["My Zorblax salary is 91,000 a year."], "paths": ["private/salary.md"]}),
        ),
        tool("read", json!({"path": "private/salary.md"})),
        json!({"op": "read_resource", "uri": "lode://note/private/salary.md"}),
        tool("read", json!({"path": "private/wages.md"})),
        json!({"op": "list_resources"}),
        tool("search", json!({"query": "Quillfeather deploy key", "mode": "lexical"})),
        tool("read", json!({"path": "notes/deploy-keys.md"})),
        tool("verify", json!({"claim": "Redis Sentinel needs five nodes to fail over.", "quotes": ["Redis Sentinel needs five nodes"]})),
        tool("search", json!({"query": "Zorblax salary 91,000", "mode": "lexical"})),
        tool("search", json!({"query": "Zorblax salary 92,000", "mode": "lexical"})),
    ];
    // A version of the no-egress note, by the id a citation would carry: step 13.
    plan.push(tool("read", json!({"version": &version[..12]})));
    let plan = Value::Array(plan);
    let (_, out) = session(&v, &home, &plan);
    // Nothing of the no-egress note reaches the client, not even that its words are there (only
    // the agent's own words come back: its quotes, the path it asked for): what is withheld is
    // neither listed nor counted, and a withheld note reads as one that is not there.
    let all = serde_json::to_string(&out).unwrap();
    for i in [0, 1, 5, 7, 13] {
        let said = out[i].to_string();
        assert!(
            !said.contains("91,000") && (i == 5 || !said.contains("salary.md")) && (i == 13 || !said.contains(&version[..12])),
            "{said}"
        );
    }
    assert_eq!(ok(&out[0]), &json!({"items": [], "redacted": 0, "notices": []}), "{}", out[0]);
    let answer = ok(&out[1]);
    assert_eq!(answer["abstained"], json!(true), "{answer:#}");
    assert!(!answer.to_string().contains("withheld from"), "{answer}");
    assert_eq!(ok(&out[2])["verdict"], "not_found");
    assert_eq!(ok(&out[3])["verdict"], "not_found");
    let (withheld, missing) = (out[4]["text"].as_str().unwrap(), out[6]["text"].as_str().unwrap());
    assert_eq!(withheld.replace("salary", "wages"), missing, "a withheld note reads as a missing one");
    assert!(out[5]["error"].is_string(), "{}", out[5]);
    assert!(!out[7]["uris"].as_array().unwrap().is_empty());
    // The same answer whether a guess at the withheld text is right or wrong.
    assert_eq!(out[11]["structured"], out[12]["structured"]);
    // A secret in an ordinary note is redacted, and counted.
    let keys = ok(&out[8]);
    assert!(keys["items"][0]["text"].as_str().unwrap().contains("Quillfeather"), "{keys}");
    assert!(!all.contains("AKIAIOSFODNN7QUILLFX"), "{all}");
    assert!(keys["redacted"].as_u64().unwrap() >= 1, "{keys}");
    assert!(ok(&out[9])["redacted"].as_u64().unwrap() >= 1);
    assert_eq!(out[13]["is_error"], json!(true), "{}", out[13]);
    assert!(out[13]["text"].as_str().unwrap().contains("this client may read"), "{}", out[13]);
    // Each call that sent text is in the egress log, under the MCP client.
    let log: Vec<String> = {
        let c = db();
        let mut st = c.prepare("SELECT destination || '|' || purpose FROM egress_log").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    for want in ["mcp client|search", "mcp client|read", "mcp client|answer", "mcp client|verify"] {
        assert!(log.iter().any(|l| l == want), "{want} not in {log:?}");
    }

    // The user's own config makes the client local; the folder's `[trust]` above did not.
    let cfg = home.join(".config/lode");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[trust]\nmcp_local = true\n").unwrap();
    let plan = json!([tool("read", json!({"path": "private/salary.md"})), tool("status", json!({}))]);
    let (_, out) = session(&v, &home, &plan);
    assert!(ok(&out[0])["text"].as_str().unwrap().contains("91,000"), "{}", out[0]);
    assert!(ok(&out[1])["client"].as_str().unwrap().starts_with("local"), "{}", out[1]);
}

#[test]
fn the_mcp_server_answers_while_lode_serve_writes_the_same_vault() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, home) = vault(tmp.path());
    let (inside, saved) = (tmp.path().join("inside"), tmp.path().join("saved"));
    let plan = json!([
        tool("search", json!({"query": "quorum failover automatically", "mode": "lexical"})),
        {"op": "signal", "path": inside},
        {"op": "wait", "path": saved, "secs": 120},
        tool("search", json!({"query": "Brambleworth espresso", "mode": "lexical"})),
        tool("verify", json!({"claim": "The Brambleworth espresso machine descales every 30 days.", "quotes": ["The Brambleworth espresso machine descales every 30 days."]})),
    ]);
    let client = {
        let (v, home, plan) = (v.clone(), home.clone(), plan.clone());
        std::thread::spawn(move || session(&v, &home, &plan))
    };
    // The editor's server writes the vault while the MCP session is open.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !inside.exists() {
        assert!(std::time::Instant::now() < deadline, "the MCP session never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let env = user_env(&home);
    let mut lsp = StdioClient::spawn_env(env!("CARGO_BIN_EXE_lode"), ["serve"], env.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    let uri = format!("file://{}", v.display());
    lsp.request(
        "initialize",
        json!({"processId": null, "rootUri": uri, "capabilities": {}, "workspaceFolders": [{"uri": uri, "name": "v"}]}),
    )
    .unwrap();
    lsp.notify("initialized", json!({})).unwrap();
    let note = v.join("notes/kitchen.md");
    let text = "# Kitchen\n\nThe Brambleworth espresso machine descales every 30 days.\n";
    std::fs::write(&note, text).unwrap();
    let doc = format!("file://{}", note.display());
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": doc, "languageId": "markdown", "version": 1, "text": text}}))
        .unwrap();
    lsp.notify("textDocument/didSave", json!({"textDocument": {"uri": doc}, "text": text})).unwrap();
    // Answered after the save is committed (reads wait for the saves before them).
    let status = lsp.request("lode/status", json!({})).unwrap();
    assert!(status["result"]["notes"].as_u64().unwrap() >= 15, "{status}");
    std::fs::write(&saved, "1").unwrap();
    let (_, out) = client.join().unwrap();
    assert_eq!(ok(&out[0])["items"][0]["path"], "runbooks/redis-failover.md");
    assert_eq!(out[2]["waited"], json!(true));
    let found = ok(&out[3]);
    assert_eq!(found["items"][0]["path"], "notes/kitchen.md", "{found:#}");
    assert_eq!(ok(&out[4])["verdict"], "verified", "{}", out[4]);
    lsp.request("shutdown", Value::Null).unwrap();
    lsp.notify("exit", Value::Null).unwrap();
}

/// The vector table damaged under a running `lode mcp` (its data region: LanceDB's decoder
/// fails inside the read): the dense search that hits it still answers, lexically, and says so;
/// the engine's one health check moves the table aside and rebuilds it in the background, and
/// dense search answers again.
#[test]
fn a_vector_table_damaged_under_the_running_server_is_said_answered_around_and_mended() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let v = tmp.path().join("vault");
    lode_testing::copy_dir(&lode_testing::repo().join("fixtures/vault"), &v);
    let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
    c.args(["index", "-q", "--vault"]).arg(&v);
    for (k, val) in user_env(&home) {
        c.env(k, val);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (damaged, go) = (tmp.path().join("damaged"), tmp.path().join("go"));
    let dense = json!({"query": "switch to the standby cache server", "mode": "dense", "limit": 3});
    let plan = json!([
        {"op": "tool_until", "name": "status", "args": {}, "has": "dense.model", "secs": 120},
        tool("search", dense.clone()),
        {"op": "signal", "path": go},
        {"op": "wait", "path": damaged, "secs": 60},
        tool("search", dense.clone()),
        {"op": "tool_until", "name": "status", "args": {}, "has": "dense.mended", "secs": 120},
        {"op": "tool_until", "name": "status", "args": {}, "has": "dense.complete", "secs": 300},
        // Between rounds of the vector thread (a question that finds it embedding is answered
        // lexically, and says so).
        {"op": "tool_until", "name": "search", "args": dense, "empty": "notices", "secs": 60},
    ]);
    let client = {
        let (v, home, plan) = (v.clone(), home.clone(), plan.clone());
        std::thread::spawn(move || session(&v, &home, &plan))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while !go.exists() {
        assert!(std::time::Instant::now() < deadline, "the MCP session never got going");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(lode_testing::damage_vector_data_regions(&v.join(".lode/vectors")) > 0);
    std::fs::write(&damaged, "1").unwrap();
    let (_, out) = client.join().unwrap();
    assert_eq!(out[0]["found"], json!(true), "{}", out[0]);
    let before = ok(&out[1]);
    assert!(!before["items"].as_array().unwrap().is_empty() && before["notices"] == json!([]), "{before:#}");
    // The damaged read: results all the same, lexical, and said.
    let hit = ok(&out[4]);
    assert!(!hit["items"].as_array().unwrap().is_empty(), "{hit:#}");
    assert!(hit["notices"].to_string().contains("lexical search only"), "{hit:#}");
    // Found by the one health check, moved aside, rebuilt.
    assert_eq!(out[5]["found"], json!(true), "{}", out[5]);
    assert!(out[5]["structured"]["dense"]["mended"].as_str().unwrap().contains("moved aside"), "{}", out[5]);
    assert_eq!(out[6]["found"], json!(true), "the vectors never came back: {}", out[6]);
    assert_eq!(out[7]["found"], json!(true), "dense search never answered again: {}", out[7]);
    assert!(!out[7]["structured"]["items"].as_array().unwrap().is_empty(), "{}", out[7]);
}

/// `lode mcp --http`: MCP's streamable HTTP on loopback, driven by the Python SDK's HTTP client;
/// a request a browser sends for a web page (it carries an `Origin`), a `Host` that is not
/// loopback (DNS rebinding) and any other path are refused, and no other address is served.
#[test]
fn the_mcp_server_speaks_streamable_http_on_loopback_only() {
    use std::io::{BufRead, Read, Write};
    let tmp = tempfile::tempdir().unwrap();
    let (v, home) = vault(tmp.path());
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["mcp", "--http", "0.0.0.0:0", "--vault"]).arg(&v).output().unwrap();
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("loopback address only"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
    c.args(["mcp", "--http", "127.0.0.1:0", "--vault"]).arg(&v).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    for (k, val) in user_env(&home) {
        c.env(k, val);
    }
    let mut server = c.spawn().unwrap();
    let mut lines = std::io::BufReader::new(server.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("the server said where it listens").unwrap();
        if let Some(u) = line.strip_prefix("lode mcp: listening on ") {
            break u.to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let plan = json!([
        tool("search", json!({"query": "quorum failover automatically", "mode": "lexical"})),
        tool("verify", json!({"claim": "Since 2026-02-27 the quorum is 2.", "quotes": ["Since 2026-02-27 the quorum is 2"]})),
        tool("read", json!({"path": "private/salary.md"})),
    ]);
    let (init, out) = session_with(&[url.clone().into()], &home, &plan);
    assert_eq!(init["server"], "lode");
    assert_eq!(ok(&out[0])["items"][0]["path"], "runbooks/redis-failover.md", "{}", out[0]);
    assert_eq!(ok(&out[1])["verdict"], "verified", "{}", out[1]);
    assert_eq!(out[2]["is_error"], json!(true), "the egress rules hold over HTTP too: {}", out[2]);

    let raw = |host: &str, path: &str, extra: &str| -> String {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut r = String::new();
        let _ = s.read_to_string(&mut r);
        r.lines().next().unwrap_or_default().to_owned()
    };
    assert!(raw(&addr, "/mcp", "").contains(" 200"), "a plain client is served");
    assert!(!raw(&addr, "/mcp", "Origin: https://evil.example\r\n").contains(" 200"), "a web page's request is refused");
    assert!(!raw("attacker.example", "/mcp", "").contains(" 200"), "a rebinding host is refused");
    assert!(raw(&addr, "/elsewhere", "").contains(" 404"));
    server.kill().unwrap();
    let _ = server.wait();
}

/// One row of `fixtures/mcp/*.jsonl`: a vault built to make `lode mcp` leak what it must
/// withhold, the calls an agent makes, and what must never come back.
struct Attack {
    id: String,
    row: Value,
}

/// Builds a row's vault under `dir` (files, links, configs; trusted and indexed as the user
/// would), then applies its changes made after indexing. Returns the vault and the test HOME.
fn attack_vault(dir: &Path, row: &Value) -> (PathBuf, PathBuf) {
    let home = dir.join("home");
    let v = dir.join("vault");
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let write_files = |files: &Value| {
        for (rel, text) in files.as_object().into_iter().flatten() {
            let p = v.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text.as_str().unwrap_or_default()).unwrap();
        }
    };
    let make_links = |links: &Value| {
        for (rel, target) in links.as_object().into_iter().flatten() {
            let p = v.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&p);
            #[cfg(unix)]
            std::os::unix::fs::symlink(target.as_str().unwrap(), &p).unwrap();
        }
    };
    write_files(&row["files"]);
    make_links(&row["links"]);
    let vault_config = row["vault_config"].as_str().unwrap_or("[models]\nembedder = \"\"\n");
    std::fs::write(v.join(".lode/config.toml"), vault_config).unwrap();
    if let Some(user) = row["user_config"].as_str() {
        std::fs::create_dir_all(home.join(".config/lode")).unwrap();
        std::fs::write(home.join(".config/lode/config.toml"), user).unwrap();
    }
    let run = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
        c.args(args).arg("--vault").arg(&v);
        for (k, val) in user_env(&home) {
            c.env(k, val);
        }
        c.output().unwrap()
    };
    run(&["trust"]);
    let o = run(&["index", "--no-vectors"]);
    assert!(o.status.success(), "{}: lode index: {}", row["id"], String::from_utf8_lossy(&o.stderr));
    let after = &row["after_index"];
    write_files(&after["files"]);
    for rel in after["remove"].as_array().into_iter().flatten() {
        let p = v.join(rel.as_str().unwrap());
        let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
    }
    make_links(&after["links"]);
    (v, home)
}

/// Replays one attack; `Err` says what leaked.
fn replay(a: &Attack) -> Result<(), String> {
    let tmp = tempfile::tempdir().unwrap();
    let (v, home) = attack_vault(tmp.path(), &a.row);
    let calls = a.row["calls"].clone();
    let (_, out) = session(&v, &home, &calls);
    let markers: Vec<&str> = a.row["secret"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    for (i, (call, got)) in calls.as_array().unwrap().iter().zip(&out).enumerate() {
        let asked = call.to_string();
        let said = got.to_string();
        for m in &markers {
            // The agent's own words may come back (its quotes, the path it asked for).
            if said.contains(m) && !asked.contains(m) {
                return Err(format!("call {i} ({asked}) leaked {m:?}: {}", said.chars().take(600).collect::<String>()));
            }
        }
    }
    for e in a.row["expect"].as_array().into_iter().flatten() {
        let i = e["call"].as_u64().unwrap() as usize;
        let mut v = &out[i]["structured"];
        for k in e["path"].as_str().unwrap().split('.') {
            v = match k.parse::<usize>() {
                Ok(n) => &v[n],
                Err(_) => &v[k],
            };
        }
        if *v != e["eq"] {
            return Err(format!("call {i}: {} is {v}, not {}: {}", e["path"], e["eq"], out[i]));
        }
    }
    for pair in a.row["same"].as_array().into_iter().flatten() {
        let (i, j) = (pair[0].as_u64().unwrap() as usize, pair[1].as_u64().unwrap() as usize);
        // A result may echo the call's own words (a quote, a path it asked for): those are
        // read as the same placeholder in both.
        let strip = |k: usize| {
            let mut said = out[k].to_string();
            let mut words = Vec::new();
            fn strings(v: &Value, out: &mut Vec<String>) {
                match v {
                    Value::String(s) if !s.is_empty() => out.push(serde_json::to_string(s).unwrap().trim_matches('"').to_owned()),
                    Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
                    Value::Object(o) => o.values().for_each(|x| strings(x, out)),
                    _ => {}
                }
            }
            strings(&calls[k]["args"], &mut words);
            words.sort_by_key(|w| std::cmp::Reverse(w.len()));
            for w in words {
                said = said.replace(&w, "<ARG>");
            }
            said
        };
        if strip(i) != strip(j) {
            return Err(format!("calls {i} and {j} differ, so a guess is confirmed:\n{}\n{}", out[i], out[j]));
        }
    }
    Ok(())
}

/// Every row of `fixtures/mcp/ours.jsonl`: our attacks on what `lode mcp` withholds from a
/// remote client, by class (scope, oracles, paths, versions, secrets, config, malformed input).
#[test]
fn attacks_on_what_mcp_withholds_leak_nothing() {
    let dir = lode_testing::repo().join("fixtures/mcp");
    let mut attacks = Vec::new();
    // ours.jsonl (gen_ours.py); the blind set has a runner of its own (see below).
    for e in std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "jsonl")) {
        for (n, line) in std::fs::read_to_string(e.path()).unwrap().lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let row: Value = serde_json::from_str(line).unwrap_or_else(|err| panic!("{}:{}: {err}", e.path().display(), n + 1));
            attacks.push(Attack { id: format!("{}:{}", e.file_name().to_string_lossy(), row["id"].as_str().unwrap_or("?")), row });
        }
    }
    assert!(attacks.len() >= 20, "{} rows", attacks.len());
    // Two at a time: each row is a vault, an index and a session of its own.
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(a) = attacks.get(i) else { return };
                if let Err(why) = replay(a) {
                    failures.lock().unwrap().push(format!("{}: {why}", a.id));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} attacks leaked:\n{}", failures.len(), attacks.len(), failures.join("\n\n"));
}

/// Rows of the blind set (`fixtures/mcp/blind/`) that still get through, each with why it is
/// left: the exposures lode knows of and says in docs/mcp.md.
const BLIND_KNOWN: &[(&str, &str)] = &[
    ("oracle-status-counts", "status leaves the counts out for a remote client rather than recounting what it may see; the row expects a recount"),
    ("secrets-cards", "a card number broken across a line is not recognised as one (secret shapes are matched within a line)"),
    ("secrets-obfuscated", "a key with a soft hyphen inside it, or in full-width letters, is not recognised (secret shapes are matched on the text as written)"),
    ("config-served-nested", "a folder the user serves as a vault of its own (`--vault V/team`) follows its own rules, not those of a vault around it"),
];

/// The set written blind by a helper who saw only docs/mcp.md and docs/security.md (112 rows,
/// by class; its own runner, `fixtures/mcp/blind/run.py`, with the Python MCP SDK): every row
/// holds, or is a known exposure above, or the server refuses to start on it.
#[test]
fn the_blind_set_of_attacks_on_what_mcp_withholds_holds() {
    let dir = lode_testing::repo().join("fixtures/mcp/blind");
    let work = tempfile::tempdir().unwrap();
    let o = Command::new("python3")
        .arg(dir.join("run.py"))
        .env("PYTHONPATH", python_path())
        .env("LODE_BIN", env!("CARGO_BIN_EXE_lode"))
        .env("LODE_ATTACK_WORK", work.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "the blind runner failed:\n{report}\n{}", String::from_utf8_lossy(&o.stderr));
    let mut rows = 0;
    let mut through = Vec::new();
    for line in report.lines() {
        let mut words = line.split_whitespace();
        let (Some(id), Some(status)) = (words.next(), words.next()) else { continue };
        if !matches!(status, "PASS" | "LEAK" | "REFUSED" | "ERROR") || line.starts_with(' ') {
            continue;
        }
        rows += 1;
        if matches!(status, "LEAK" | "ERROR") && !BLIND_KNOWN.iter().any(|(k, _)| *k == id) {
            through.push(id.to_owned());
        }
    }
    assert!(rows >= 112, "{rows} rows reported:\n{report}");
    assert!(through.is_empty(), "{} rows got through: {through:?}\n{report}", through.len());
}

/// Messages a client library should never send, sent raw: each request is answered with a
/// JSON-RPC error under its own id (a client waiting on it is not left waiting), and the
/// session goes on.
#[test]
fn malformed_messages_get_an_answer_and_the_session_goes_on() {
    use std::io::{BufRead, Write};
    let tmp = tempfile::tempdir().unwrap();
    let (v, home) = vault(tmp.path());
    let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
    c.args(["mcp", "--vault"]).arg(&v).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    for (k, val) in user_env(&home) {
        c.env(k, val);
    }
    let mut server = c.spawn().unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stdout = server.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let answer = |id: Value| -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let m = rx.recv_timeout(left).unwrap_or_else(|_| panic!("no answer to id {id}"));
            if m["id"] == id {
                return m;
            }
        }
    };
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    stdin.write_all(init.as_bytes()).unwrap();
    stdin.write_all(b"\n").unwrap();
    assert!(answer(json!(1))["result"]["serverInfo"]["name"] == "lode");
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").unwrap();
    // Invalid UTF-8, a lone surrogate, JSON cut short, an id that is a string.
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"search\",\"arguments\":{\"query\":\"\xff\xfe\"}}}\n").unwrap();
    stdin
        .write_all(br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"search","arguments":{"query":"\ud800"}}}"#)
        .unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"nine\",\"method\":\"tools/list\"\n").unwrap();
    for id in [json!(7), json!(8), json!("nine")] {
        let m = answer(id.clone());
        assert_eq!(m["error"]["code"], -32700, "{m}");
        assert!(m["error"]["message"].as_str().unwrap().starts_with("lode: the message is not valid"), "{m}");
    }
    // And the session goes on.
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/list\"}\n").unwrap();
    assert_eq!(answer(json!(10))["result"]["tools"].as_array().map(Vec::len), Some(5));
    drop(stdin);
    let _ = server.wait();
}
