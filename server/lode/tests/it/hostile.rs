//! Hostile folders through the real binary: every case under `fixtures/hostile/` (format and
//! sandbox in its README) is a folder built to make lode run its code, send a secret or notes to
//! a host it chose, cite its own text as verified, or write outside itself. Each runs with its own
//! HOME and a loopback canary that records every request; a case fails on any expectation.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "canary-secret-7f3a9c2e51d84b06";

/// What the canary's model says: the first POST's whole assistant message (tool calls), if
/// given, and the content of every other answer.
#[derive(Default, Clone)]
struct Script {
    first: Option<serde_json::Value>,
    chat: String,
}

/// A loopback server that records each request whole (head and body) and answers every POST
/// with a chat completion as `script` says, anything else with `200 {}`.
fn canary(script: Arc<Mutex<Script>>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let l = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (l, script) = (l.clone(), script.clone());
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                }
                if head.is_empty() {
                    return;
                }
                let mut body = vec![0; len.min(64 << 20)];
                let _ = reader.read_exact(&mut body);
                let post = head.starts_with("POST");
                l.lock().unwrap().push(format!("{head}\n{}", String::from_utf8_lossy(&body)));
                let reply = if post {
                    let mut sc = script.lock().unwrap();
                    let message = sc.first.take().unwrap_or_else(|| serde_json::json!({"role": "assistant", "content": sc.chat}));
                    serde_json::json!({"choices": [{"message": message}]}).to_string()
                } else {
                    "{}".to_owned()
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            });
        }
    });
    (base, log)
}

/// Every file and link under `dir`: relative path → what it is and holds.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
            if m.file_type().is_symlink() {
                out.insert(rel, format!("link -> {}", std::fs::read_link(&p).map(|t| t.display().to_string()).unwrap_or_default()));
            } else if m.is_dir() {
                out.insert(rel, "dir".into());
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap_or_default();
                out.insert(
                    rel,
                    format!("file {} {:x}", bytes.len(), bytes.iter().fold(0u64, |h, b| h.wrapping_mul(1099511628211) ^ *b as u64)),
                );
            }
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path) {
    let m = std::fs::symlink_metadata(from).unwrap_or_else(|e| panic!("copy from {}: {e}", from.display()));
    if m.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        }
    } else if m.file_type().is_symlink() {
        let _ = std::os::unix::fs::symlink(std::fs::read_link(from).unwrap(), to);
    } else {
        if let Some(p) = to.parent() {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::copy(from, to).unwrap();
    }
}

const NATIVE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void lode_hostile_ran(void) {
    const char *p = getenv("LODE_HOSTILE_MARK");
    if (p) { FILE *f = fopen(p, "w"); if (f) { fputs("ran\n", f); fclose(f); } }
}
int lode_hostile_symbol(void) { return 42; }
"#;

struct Sandbox {
    vault: PathBuf,
    outside: PathBuf,
    home: PathBuf,
    canary: String,
    cc_lib: PathBuf,
}

impl Sandbox {
    fn expand(&self, s: &str) -> String {
        s.replace("{vault}", &self.vault.display().to_string())
            .replace("{outside}", &self.outside.display().to_string())
            .replace("{home}", &self.home.display().to_string())
            .replace("{canary}", &self.canary)
            .replace("{secret}", SECRET)
            .replace("{cc_lib}", &self.cc_lib.display().to_string())
            .replace("{models}", &std::env::var("LODE_MODELS").unwrap_or_default())
    }

    fn path(&self, s: &str) -> PathBuf {
        let p = PathBuf::from(self.expand(s));
        if p.is_absolute() {
            p
        } else {
            self.vault.join(p)
        }
    }
}

fn strings(v: Option<&toml::Value>) -> Vec<String> {
    v.and_then(|v| v.as_array()).map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

/// Every key a case may use, by place: a key misspelt would silently drop an assertion.
fn check_keys(file: &Path, case: &toml::Table) {
    let known = |what: &str, t: &toml::Table, keys: &[&str]| {
        for k in t.keys() {
            assert!(keys.contains(&k.as_str()), "{}: unknown key {k:?} in {what} (fixtures/hostile/README.md lists them)", file.display());
        }
    };
    known(
        "the case",
        case,
        &["class", "about", "user_config", "canary_chat", "canary_first_message", "native_library", "env", "step", "expect"],
    );
    for step in case.get("step").and_then(|s| s.as_array()).into_iter().flatten() {
        let t = step.as_table().unwrap_or_else(|| panic!("{}: a step is not a table", file.display()));
        known(
            "a step",
            t,
            &[
                "write",
                "symlink",
                "copy",
                "lode",
                "vault",
                "cwd",
                "exit",
                "stdout_has",
                "stdout_lacks",
                "stderr_has",
                "stderr_lacks",
                "timeout_secs",
            ],
        );
    }
    if let Some(e) = case.get("expect").and_then(|e| e.as_table()) {
        known(
            "[expect]",
            e,
            &["canary_requests", "canary_requests_min", "secret_not_sent", "outside_untouched", "no_native_code", "native_code_ran"],
        );
    }
}

/// Runs one case; the problems found (empty: it passed).
fn run_case(file: &Path) -> Vec<String> {
    let case: toml::Table = std::fs::read_to_string(file).unwrap().parse().unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    check_keys(file, &case);
    let tmp = tempfile::tempdir().unwrap();
    let script: Arc<Mutex<Script>> = Arc::default();
    let (base, log) = canary(script.clone());
    let sb = Sandbox {
        vault: tmp.path().join("vault"),
        outside: tmp.path().join("outside"),
        home: tmp.path().join("home"),
        canary: base,
        cc_lib: tmp.path().join("libhostile.so"),
    };
    for d in [&sb.vault, &sb.outside, &sb.home] {
        std::fs::create_dir_all(d).unwrap();
    }
    {
        let mut sc = script.lock().unwrap();
        sc.chat = sb.expand(case.get("canary_chat").and_then(|v| v.as_str()).unwrap_or("{\"claims\": []}"));
        sc.first = case.get("canary_first_message").and_then(|v| v.as_str()).map(|m| {
            serde_json::from_str(&sb.expand(m)).unwrap_or_else(|e| panic!("{}: canary_first_message is not JSON: {e}", file.display()))
        });
    }
    if let Some(u) = case.get("user_config").and_then(|v| v.as_str()) {
        let p = sb.home.join(".config/lode/config.toml");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, sb.expand(u)).unwrap();
    }
    let mark = sb.outside.join("native-code-ran");
    if case.get("native_library").and_then(|v| v.as_bool()) == Some(true) {
        let src = tmp.path().join("hostile.c");
        std::fs::write(&src, NATIVE).unwrap();
        let o = Command::new("gcc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&sb.cc_lib)
            .arg(&src)
            .output()
            .expect("gcc (the test suite's C compiler)");
        assert!(o.status.success(), "gcc: {}", String::from_utf8_lossy(&o.stderr));
    }
    let env: Vec<(String, String)> = case
        .get("env")
        .and_then(|v| v.as_table())
        .map(|t| t.iter().filter_map(|(k, v)| Some((k.clone(), sb.expand(v.as_str()?)))).collect())
        .unwrap_or_default();

    let mut problems = Vec::new();
    let mut baseline = snapshot(&sb.outside);
    for (i, step) in case.get("step").and_then(|v| v.as_array()).cloned().unwrap_or_default().iter().enumerate() {
        let step = step.as_table().unwrap_or_else(|| panic!("{}: step {i} is not a table", file.display()));
        if let Some(w) = step.get("write").and_then(|v| v.as_table()) {
            let p = sb.path(w["path"].as_str().unwrap());
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, sb.expand(w.get("content").and_then(|c| c.as_str()).unwrap_or(""))).unwrap();
        } else if let Some(l) = step.get("symlink").and_then(|v| v.as_table()) {
            let p = sb.path(l["path"].as_str().unwrap());
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&p);
            std::os::unix::fs::symlink(sb.expand(l["target"].as_str().unwrap()), &p).unwrap();
        } else if let Some(c) = step.get("copy").and_then(|v| v.as_table()) {
            copy_tree(&sb.path(c["from"].as_str().unwrap()), &sb.path(c["to"].as_str().unwrap()));
        } else if let Some(args) = step.get("lode").and_then(|v| v.as_array()) {
            let args: Vec<String> = args.iter().filter_map(|a| a.as_str()).map(|a| sb.expand(a)).collect();
            let vault = step.get("vault").and_then(|v| v.as_str()).map(|v| sb.expand(v)).unwrap_or_else(|| sb.vault.display().to_string());
            let cwd = step.get("cwd").and_then(|v| v.as_str()).map(|v| sb.path(v)).unwrap_or_else(|| sb.vault.clone());
            // LODE_HOSTILE_BIN: another build to hold the cases against (an older lode, to see
            // them fail where the boundary was missing).
            let bin = std::env::var_os("LODE_HOSTILE_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_lode")));
            let mut c = Command::new(bin);
            c.args(&args);
            if !vault.is_empty() {
                c.arg("--vault").arg(&vault);
            }
            c.current_dir(&cwd)
                .env("HOME", &sb.home)
                .env("XDG_CONFIG_HOME", sb.home.join(".config"))
                .env("XDG_DATA_HOME", sb.home.join(".local/share"))
                .env("XDG_CACHE_HOME", sb.home.join(".cache"))
                .env("LODE_CANARY_SECRET", SECRET)
                .env("LODE_HOSTILE_MARK", &mark)
                .env("AWS_EC2_METADATA_DISABLED", "true")
                .env_remove("HF_TOKEN")
                .env_remove("HF_ENDPOINT")
                .env_remove("APPDATA")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (k, v) in &env {
                c.env(k, v);
            }
            let timeout = Duration::from_secs(step.get("timeout_secs").and_then(|v| v.as_integer()).unwrap_or(120) as u64);
            let mut child = c.spawn().unwrap();
            let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
            let t_out = std::thread::spawn(move || {
                let mut s = String::new();
                let _ = out.read_to_string(&mut s);
                s
            });
            let t_err = std::thread::spawn(move || {
                let mut s = String::new();
                let _ = err.read_to_string(&mut s);
                s
            });
            let started = Instant::now();
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break Some(s);
                }
                if started.elapsed() > timeout {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            let (stdout, stderr) = (t_out.join().unwrap(), t_err.join().unwrap());
            let what = format!("step {i} `lode {}`", args.join(" "));
            let Some(status) = status else {
                problems.push(format!("{what}: still running after {timeout:?}"));
                continue;
            };
            if let Some(want) = step.get("exit").and_then(|v| v.as_integer()) {
                if status.code() != Some(want as i32) {
                    problems.push(format!("{what}: exit {:?}, want {want}\nstdout: {stdout}\nstderr: {stderr}", status.code()));
                }
            }
            // A crash is never a pass: a lode that died also sent nothing and wrote nothing.
            if status.code().is_none() || status.code() == Some(101) || stderr.contains("panicked at") {
                problems.push(format!("{what}: crashed ({status})\nstderr: {stderr}"));
            }
            // (key, the stream's name, its text, whether each string must be in it)
            for (key, stream, text, want) in [
                ("stdout_has", "stdout", &stdout, true),
                ("stdout_lacks", "stdout", &stdout, false),
                ("stderr_has", "stderr", &stderr, true),
                ("stderr_lacks", "stderr", &stderr, false),
            ] {
                for s in strings(step.get(key)) {
                    if text.contains(&sb.expand(&s)) != want {
                        let verb = if want { "lacks" } else { "has" };
                        problems.push(format!("{what}: {stream} {verb} {s:?}\nstdout: {stdout}\nstderr: {stderr}"));
                    }
                }
            }
            let now = snapshot(&sb.outside);
            let own = Path::new(&vault).starts_with(&sb.outside);
            if now != baseline
                && !own
                && case.get("expect").and_then(|e| e.get("outside_untouched")).and_then(|v| v.as_bool()) != Some(false)
            {
                let changed: Vec<String> = now
                    .iter()
                    .filter(|(k, v)| baseline.get(*k) != Some(*v))
                    .map(|(k, v)| format!("{} ({v})", k.display()))
                    .chain(baseline.keys().filter(|k| !now.contains_key(*k)).map(|k| format!("{} (removed)", k.display())))
                    .collect();
                problems.push(format!("{what}: lode changed {}: {}", sb.outside.display(), changed.join(", ")));
            }
            baseline = now;
            continue;
        } else {
            panic!("{}: step {i} has none of write, symlink, copy, lode", file.display());
        }
        baseline = snapshot(&sb.outside);
    }

    let expect = case.get("expect").and_then(|v| v.as_table()).cloned().unwrap_or_default();
    let requests = log.lock().unwrap().clone();
    if let Some(n) = expect.get("canary_requests").and_then(|v| v.as_integer()) {
        if requests.len() as i64 != n {
            problems.push(format!(
                "the canary got {} requests, want {n}: {:?}",
                requests.len(),
                requests.iter().map(|r| r.lines().next().unwrap_or("")).collect::<Vec<_>>()
            ));
        }
    }
    if expect.get("secret_not_sent").and_then(|v| v.as_bool()) != Some(false) {
        if let Some(r) = requests.iter().find(|r| r.contains(SECRET)) {
            problems.push(format!("the secret reached the canary: {}", r.lines().next().unwrap_or("")));
        }
    }
    if let Some(n) = expect.get("canary_requests_min").and_then(|v| v.as_integer()) {
        if (requests.len() as i64) < n {
            problems.push(format!("the canary got {} requests, want at least {n}", requests.len()));
        }
    }
    if expect.get("no_native_code").and_then(|v| v.as_bool()) != Some(false) && mark.exists() {
        problems.push("the folder's native library ran in lode's process".into());
    }
    if expect.get("native_code_ran").and_then(|v| v.as_bool()) == Some(true) && !mark.exists() {
        problems.push("the library never ran: the control shows the harness cannot see native code".into());
    }
    problems
}

fn run_dir(dir: &str) {
    let root = lode_testing::repo().join("fixtures/hostile").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= if dir == "controls" { 2 } else { 8 }, "{}: only {} cases", root.display(), files.len());
    // Two at a time: each case runs several real `lode` processes.
    let queue = Arc::new(Mutex::new(files.clone()));
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (queue, failures) = (queue.clone(), failures.clone());
            std::thread::spawn(move || loop {
                let Some(f) = queue.lock().unwrap().pop() else { return };
                let problems = run_case(&f);
                if !problems.is_empty() {
                    failures.lock().unwrap().push(format!("{}:\n  {}", f.display(), problems.join("\n  ")));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let failures = failures.lock().unwrap();
    assert!(failures.is_empty(), "{} of {} hostile folders got through:\n{}", failures.len(), files.len(), failures.join("\n\n"));
}

#[test]
fn hostile_folders_written_with_the_code() {
    run_dir("ours");
}

/// The harness can see what the cases say did not happen: the same library and endpoint,
/// named by the user, do run and are asked (so a case passing is the boundary holding, not a
/// path never reached).
#[test]
fn the_harness_sees_native_code_and_requests_when_the_user_allows_them() {
    run_dir("controls");
}

#[test]
fn hostile_folders_written_blind() {
    run_dir("blind");
}
