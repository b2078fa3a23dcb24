//! The trust boundary through the real `lode serve` over stdio (docs/security.md): a folder the
//! user has not approved is served on defaults and says so once, its `[llm]` gets nothing until
//! `lode trust` (read at the next question, no restart), a key variable the user config does not
//! name is never sent, and a store that came with the folder is moved aside and rebuilt.

use std::path::{Path, PathBuf};
use std::process::Command;

use lode_testing::llm::{completion, FakeLlm};
use lode_testing::stdio_client::StdioClient;
use serde_json::{json, Value};

const SECRET: &str = "trust-test-secret-5be1c09d";

fn uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// The user's environment for one test: its own HOME and XDG folders (approvals, store records
/// and the user config live there), and a secret in a variable a folder may name.
fn user_env(home: &Path) -> Vec<(String, String)> {
    let mut env = super::support::user_home(home);
    env.push(("LODE_T_SECRET".into(), SECRET.into()));
    env
}

fn lode(args: &[&str], vault: &Path, home: &Path) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
    c.args(args).arg("--vault").arg(vault);
    for (k, v) in user_env(home) {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn example_vault(dir: &Path, name: &str) -> PathBuf {
    let v = dir.join(name);
    lode_testing::copy_dir(&lode_testing::repo().join("fixtures/vault"), &v);
    v
}

fn serve(vault: &Path, home: &Path) -> StdioClient {
    let env: Vec<(String, String)> = user_env(home);
    let mut c = StdioClient::spawn_env(env!("CARGO_BIN_EXE_lode"), ["serve"], env.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    c.request(
        "initialize",
        json!({"processId": null, "rootUri": uri(vault), "capabilities": {}, "workspaceFolders": [{"uri": uri(vault), "name": "v"}]}),
    )
    .unwrap();
    c.notify("initialized", json!({})).unwrap();
    c
}

fn ask(c: &mut StdioClient, q: &str) -> Value {
    c.request("lode/ask", json!({"question": q})).unwrap()
}

#[test]
fn an_unapproved_folder_is_served_on_defaults_says_so_and_gets_its_llm_only_once_approved() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let v = example_vault(tmp.path(), "vault");
    let fake = FakeLlm::start(Box::new(|_| (200, completion("{\"claims\": []}"))));
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::write(
        v.join(".lode/config.toml"),
        format!(
            "[models]\nembedder = \"\"\nunload_after_secs = inf\nruntime = \"{}\"\n\n[llm]\nendpoint = \"{}\"\nmodel = \"m\"\nremote = true\nretries = 0\napi_key_env = \"LODE_T_SECRET\"\n",
            tmp.path().join("planted/libonnxruntime.so").display(),
            fake.endpoint
        ),
    )
    .unwrap();
    let mut c = serve(&v, &home);
    // Said once, when the vault starts, with the command that approves it.
    let m = c
        .wait_for(|m| m["method"] == "window/showMessage" && m["params"]["message"].as_str().is_some_and(|t| t.contains("lode trust")))
        .unwrap();
    let said = m["params"]["message"].as_str().unwrap();
    assert!(said.contains("[llm]") && said.contains("[models] runtime"), "{said}");
    c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end").unwrap();
    let status = c.request("lode/status", json!({})).unwrap();
    assert!(
        status["result"]["trust"]
            .as_str()
            .is_some_and(|t| t.contains(&format!("lode trust --vault {}", v.canonicalize().unwrap().display()))),
        "{status}"
    );
    // Served on defaults: an extractive answer, nothing sent to the folder's host.
    let a = ask(&mut c, "How often are staging certificates rotated?");
    assert_eq!(a["result"]["synthesizer"], "extractive", "{a}");
    assert!(a.to_string().contains("60 days"), "{a}");
    assert_eq!(fake.requests.lock().unwrap().len(), 0, "the unapproved folder's model was asked");
    // The user approves it: the next question goes to the model (no restart), but without the
    // key, which the user's config does not name.
    // `lode trust DIR`, as the docs write it (the same as --vault DIR).
    let mut c2 = Command::new(env!("CARGO_BIN_EXE_lode"));
    c2.arg("trust").arg(&v);
    for (k, val) in user_env(&home) {
        c2.env(k, val);
    }
    let o = c2.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("api_key_env"), "lode trust says the key is still not sent");
    let status = c.request("lode/status", json!({})).unwrap();
    // The approval shows at once; what approval cannot give (a key variable the user's config
    // does not list) is still said, with where to allow it.
    let t = status["result"]["trust"].as_str().unwrap_or_default();
    assert!(!t.contains("lode trust --vault") && t.contains("api_key_env") && t.contains("user config"), "{status}");
    assert!(t.contains("when lode restarts"), "what an approval changes only after a restart is said: {status}");
    let _ = ask(&mut c, "How often are staging certificates rotated?");
    let sent = fake.requests.lock().unwrap().clone();
    assert!(!sent.is_empty(), "the approved folder's model was not asked");
    assert!(sent.iter().all(|b| !b.contains(SECRET)), "the key went along");
    // A pull that changes the endpoint asks again: nothing more reaches the old host's model.
    let n = fake.requests.lock().unwrap().len();
    let other = FakeLlm::start(Box::new(|_| (200, completion("{\"claims\": []}"))));
    std::fs::write(
        v.join(".lode/config.toml"),
        format!("[models]\nembedder = \"\"\n\n[llm]\nendpoint = \"{}\"\nmodel = \"m\"\nretries = 0\n", other.endpoint),
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let a = ask(&mut c, "How often are staging certificates rotated?");
    assert_eq!(a["result"]["synthesizer"], "extractive", "{a}");
    assert_eq!(other.requests.lock().unwrap().len(), 0, "a changed endpoint was used without approval");
    assert_eq!(fake.requests.lock().unwrap().len(), n);
    let _ = c.stop();
}

#[test]
fn a_store_that_came_with_the_folder_is_moved_aside_and_the_server_answers_from_the_notes() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    // The forger's copy says 999 days; their index of it ships in the victim's folder.
    let forge = example_vault(tmp.path(), "forge");
    let runbook = "runbooks/rotate-staging-certs.md";
    let text = std::fs::read_to_string(forge.join(runbook)).unwrap();
    assert!(text.contains("60 days"));
    std::fs::write(forge.join(runbook), text.replace("60 days", "999 days")).unwrap();
    assert!(lode(&["index", "--no-vectors"], &forge, &home).status.success());
    let v = example_vault(tmp.path(), "vault");
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::copy(forge.join(".lode/lode.db"), v.join(".lode/lode.db")).unwrap();
    std::fs::write(v.join(".lode/config.toml"), "[models]\nembedder = \"\"\n").unwrap();
    // The CLI will not cite from it.
    let o = lode(&["ask", "How often are staging certificates rotated?"], &v, &home);
    assert!(!o.status.success() && !String::from_utf8_lossy(&o.stdout).contains("999"), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stderr).contains("lode index"), "{}", String::from_utf8_lossy(&o.stderr));
    // The server moves it aside, says so, and answers from the notes.
    let mut c = serve(&v, &home);
    c.wait_for(|m| m["method"] == "window/showMessage" && m["params"]["message"].as_str().is_some_and(|t| t.contains("moved it aside")))
        .unwrap();
    c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end").unwrap();
    let a = ask(&mut c, "How often are staging certificates rotated?");
    assert!(a.to_string().contains("60 days") && !a.to_string().contains("999"), "{a}");
    let _ = c.stop();
    let aside: Vec<String> =
        std::fs::read_dir(v.join(".lode")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert!(aside.iter().any(|n| n.starts_with("lode.db.foreign-")), "every byte kept, aside: {aside:?}");
    // The store lode made keeps itself out of version control, the config excepted.
    let ignore = std::fs::read_to_string(v.join(".lode/.gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "*") && ignore.lines().any(|l| l == "!config.toml"), "{ignore}");
    // The store the server made is the user's now: the CLI reads it.
    let o = lode(&["ask", "How often are staging certificates rotated?"], &v, &home);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("60 days"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Forged stores whose owner cannot be read at all (no `meta` table, an owner row that is not
/// text): lode opens neither as the user's. The CLI refuses to cite from them; `lode index`
/// moves them aside and rebuilds.
#[test]
fn a_store_whose_owner_cannot_be_read_is_not_the_users() {
    for forge_it in
        ["DROP TABLE meta", "UPDATE meta SET value = x'00ff' WHERE key = 'owner_token'", "DELETE FROM meta WHERE key = 'owner_token'"]
    {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let forge = example_vault(tmp.path(), "forge");
        let runbook = "runbooks/rotate-staging-certs.md";
        let text = std::fs::read_to_string(forge.join(runbook)).unwrap();
        std::fs::write(forge.join(runbook), text.replace("60 days", "999 days")).unwrap();
        assert!(lode(&["index", "--no-vectors"], &forge, &home).status.success());
        let v = example_vault(tmp.path(), "vault");
        std::fs::create_dir_all(v.join(".lode")).unwrap();
        std::fs::copy(forge.join(".lode/lode.db"), v.join(".lode/lode.db")).unwrap();
        {
            let c = rusqlite::Connection::open(v.join(".lode/lode.db")).unwrap();
            c.execute_batch(forge_it).unwrap();
        }
        // Bound to the victim's path as if lode had made it there: only the token's form is off.
        let o = lode(&["ask", "How often are staging certificates rotated?"], &v, &home);
        assert!(
            !o.status.success() && !String::from_utf8_lossy(&o.stdout).contains("999"),
            "{forge_it}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        let o = lode(&["index", "--no-vectors"], &v, &home);
        assert!(
            o.status.success() && String::from_utf8_lossy(&o.stderr).contains("moved it aside"),
            "{forge_it}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let o = lode(&["ask", "How often are staging certificates rotated?"], &v, &home);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && out.contains("60 days") && !out.contains("999"), "{forge_it}: {out}");
    }
}

/// Links a clone plants where lode writes inside `.lode/` (the vector tables, their pointer
/// file, the shared versions): lode refuses to write, names the link, and the target is untouched.
#[test]
fn links_planted_where_lode_writes_are_refused() {
    for planted in ["vectors", "shared-versions", "vectors/serving.json.tmp", "vectors/x.lance"] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let v = example_vault(tmp.path(), "vault");
        let target = tmp.path().join("victim");
        std::fs::write(&target, "keep me\n").unwrap();
        let link = v.join(".lode").join(planted);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let o = lode(&["index"], &v, &home);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("is a link"), "{planted}: {err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n", "{planted}");
        // The server says so instead of opening the vault.
        let mut c = serve(&v, &home);
        let m = c.wait_for(|m| m["method"] == "window/showMessage").unwrap();
        assert!(m["params"]["message"].as_str().unwrap().contains("is a link"), "{planted}: {m}");
        let _ = c.stop();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n", "{planted}");
    }
}

/// An index the user built with a lode older than store binding is theirs once they say so:
/// `lode trust --adopt-index` binds it in place, history kept.
#[test]
fn the_user_adopts_an_index_built_before_binding() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let v = example_vault(tmp.path(), "vault");
    assert!(lode(&["index", "--no-vectors"], &v, &home).status.success());
    // As an older lode left it: no owner row, no record.
    {
        let c = rusqlite::Connection::open(v.join(".lode/lode.db")).unwrap();
        c.execute_batch("DELETE FROM meta WHERE key = 'owner_token'").unwrap();
    }
    let o = lode(&["ask", "How often are staging certificates rotated?"], &v, &home);
    assert!(!o.status.success());
    let o = lode(&["trust", "--adopt-index"], &v, &home);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = lode(&["ask", "How often are staging certificates rotated?"], &v, &home);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("60 days"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = lode(&["index", "--no-vectors"], &v, &home);
    assert!(o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("moved it aside"), "kept, not rebuilt");
}

/// The model's tools through the language server: an approved folder allows loopback fetches
/// for the user's own mirroring, but the model's `fetch_url` never reaches loopback; and a
/// local model whose context holds a no-egress note is offered no tool at all.
#[test]
fn the_models_fetch_never_reaches_loopback_and_is_not_offered_beside_withheld_notes() {
    use lode_testing::web::{Reply, Site};
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let site = Site::start(Box::new(|_| Reply::html("<h1>Admin</h1><p>internal secrets</p>")));
    let internal = site.url("/internal/admin");
    let v = tmp.path().join("vault");
    std::fs::create_dir_all(v.join("private")).unwrap();
    std::fs::write(v.join("admin.md"), format!("# Admin\n\nThe kestrel admin console is at {internal} for staging.\n")).unwrap();
    std::fs::write(v.join("private/door.md"), "# Door\n\nThe quokka door PIN is 4821, see https://example.org/pin.\n").unwrap();
    let tool_call = |url: &str| {
        json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "fetch_url", "arguments": json!({"url": url}).to_string()}}]}}]})
        .to_string()
    };
    let (call, offered) = (tool_call(&internal), std::sync::Arc::new(std::sync::Mutex::new(Vec::<bool>::new())));
    let seen = offered.clone();
    let fake = FakeLlm::start(Box::new(move |body| {
        let v: Value = serde_json::from_str(body).unwrap();
        let has_tools = v.get("tools").is_some();
        seen.lock().unwrap().push(has_tools);
        if has_tools {
            (200, call.clone())
        } else {
            (200, completion("{\"claims\": []}"))
        }
    }));
    std::fs::create_dir_all(v.join(".lode")).unwrap();
    std::fs::write(
        v.join(".lode/config.toml"),
        format!(
            "[models]\nembedder = \"\"\n\n[llm]\nendpoint = \"{}\"\nmodel = \"m\"\ntools = true\nremote = false\nretries = 0\n\n[externals]\nallow_loopback = true\n\n[egress]\nno_egress = [\"private/\"]\n",
            fake.endpoint
        ),
    )
    .unwrap();
    assert!(lode(&["trust"], &v, &home).status.success());
    let mut c = serve(&v, &home);
    c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end").unwrap();
    // The model asks for the loopback page it was shown: refused, nothing fetched.
    let _ = ask(&mut c, "Where is the kestrel admin console?");
    assert!(
        offered.lock().unwrap().first() == Some(&true),
        "the tool was offered for a context with nothing withheld: {:?}",
        offered.lock().unwrap()
    );
    assert_eq!(site.hits("/internal/admin"), 0, "the model's fetch reached loopback");
    // The door note may not leave the machine: the local model that reads it gets no tool.
    offered.lock().unwrap().clear();
    let a = ask(&mut c, "What is the quokka door PIN?");
    let calls = offered.lock().unwrap().clone();
    assert!(!calls.is_empty() && calls.iter().all(|t| !t), "a tool was offered beside a withheld note: {calls:?} {a}");
    assert!(a.to_string().contains("no web tool"), "the answer says why: {a}");
    let _ = c.stop();
}
