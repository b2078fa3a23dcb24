//! `lode setup --nli/--reranker/--embedder` against a model hub on loopback that serves the
//! Hugging Face layout (`<repo>/resolve/<commit>/<file>`, LFS files redirected to a CDN path that
//! honours ranges) with the tiny models the tests generate — and misbehaves on request: a
//! truncated body, altered bytes, a missing file, a slow answer, a token it insists on. The
//! catalogue pins every file's SHA-256; the hub's listing is never asked. Nothing here reaches
//! beyond the machine.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use lode_testing::web::{Reply, Request, Site};
use sha2::Digest;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const TOKEN: &str = "hf_loopback_token";

#[derive(Default)]
struct Faults {
    /// Close the connection after this many bytes of the model's body (once).
    truncate_at: Option<usize>,
    /// Serve the model with one byte changed (same length).
    tamper: bool,
    /// Wait this long before answering each request.
    delay_ms: u64,
    /// Answer a ranged request with the whole body (200), as a server without ranges does.
    ignore_range: bool,
    /// Send 100 bytes more than the listing says.
    extra_bytes: bool,
}

struct Hub {
    endpoint: String,
    faults: Arc<Mutex<Faults>>,
    /// Each request's path and its Range header, if any.
    log: Arc<Mutex<Vec<(String, Option<String>)>>>,
}

fn sha256_hex(b: &[u8]) -> String {
    sha2::Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

/// A hub holding `lode-tests/tiny-nli` at [`COMMIT`]: `onnx/model.onnx` (LFS) and
/// `tokenizer.json` (a plain git blob), the tiny NLI model's files.
fn start_hub() -> Hub {
    let src = lode_testing::models().join("tiny-nli");
    let model = std::fs::read(src.join("model.onnx")).expect("the tiny NLI model (scripts/setup-models.sh makes it)");
    let tokenizer = std::fs::read(src.join("tokenizer.json")).unwrap();
    let faults: Arc<Mutex<Faults>> = Arc::default();
    let log: Arc<Mutex<Vec<(String, Option<String>)>>> = Arc::default();
    let (f, l) = (faults.clone(), log.clone());
    let site = Site::start_with_requests(Box::new(move |req: &Request| {
        let (path, range) = (req.path.as_str(), req.headers.get("range").cloned());
        l.lock().unwrap().push((path.to_owned(), range.clone()));
        let mut f = f.lock().unwrap();
        let delay = Duration::from_millis(f.delay_ms);
        let reply = |status: u16, headers: Vec<(&str, String)>, body: &[u8]| Reply {
            status,
            headers: headers.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            body: body.to_vec(),
            delay,
            stream_bytes: None,
            cut_after: None,
        };
        // The CDN's URLs are signed: the token is asked for by the hub, not by the CDN (and
        // a client drops it on a redirect to another place).
        if !path.starts_with("/cdn/") && req.headers.get("authorization").map(String::as_str) != Some(&format!("Bearer {TOKEN}")) {
            return reply(401, vec![], b"{\"error\":\"Invalid credentials\"}");
        }
        let route = path.split('?').next().unwrap_or("");
        if route == format!("/lode-tests/tiny-nli/resolve/{COMMIT}/onnx/model.onnx") {
            // LFS: redirected to the CDN, as the hub does.
            let sha = sha256_hex(&model);
            reply(302, vec![("Location", format!("/cdn/{sha}")), ("X-Linked-Etag", format!("\"{sha}\""))], b"")
        } else if route == format!("/lode-tests/tiny-nli/resolve/{COMMIT}/tokenizer.json") {
            reply(200, vec![], &tokenizer)
        } else if route.starts_with("/cdn/") {
            let asked: usize = range.as_deref().and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse().ok()).unwrap_or(0);
            let from = if f.ignore_range { 0 } else { asked };
            let mut body = model.clone();
            if f.tamper {
                body[100] ^= 0x55;
            }
            if f.extra_bytes {
                body.extend_from_slice(&[7u8; 100]);
            }
            let (status, headers) = if from > 0 {
                (206, vec![("Content-Range", format!("bytes {from}-{}/{}", body.len() - 1, body.len()))])
            } else {
                (200, vec![])
            };
            // A cut body announces its whole length, sends part of it, and hangs up (once).
            Reply { cut_after: f.truncate_at.take(), ..reply(status, headers, &body[from.min(body.len())..]) }
        } else {
            reply(404, vec![], b"{\"error\":\"Entry not found\"}")
        }
    }));
    Hub { endpoint: site.base, faults, log }
}

/// A catalogue holding the loopback model, pinned to [`COMMIT`] and the files' SHA-256; `file`:
/// the model's path in the repository; `pinned: false` leaves the model's checksum out.
fn catalogue_pinned(dir: &Path, file: &str, pinned: bool) -> PathBuf {
    let src = lode_testing::models().join("tiny-nli");
    let model = std::fs::read(src.join("model.onnx")).unwrap();
    let tokenizer = std::fs::read(src.join("tokenizer.json")).unwrap();
    let p = dir.join(format!("catalogue-{}-{pinned}.toml", file.replace('/', "-")));
    let model_sha = if pinned { sha256_hex(&model) } else { String::new() };
    let text = format!(
        "[[model]]\nname = \"tiny-nli-hub\"\nabout = \"the tests' NLI model, from the loopback hub\"\nrepo = \"lode-tests/tiny-nli\"\n\
         commit = \"{COMMIT}\"\nsize_mb = 1\nmemory_mb = 1\nspeed = 1.0\n\
         [model.files]\n\"model.onnx\" = {{ path = \"{file}\", sha256 = \"{model_sha}\", size = {} }}\n\
         \"tokenizer.json\" = {{ path = \"tokenizer.json\", sha256 = \"{}\" }}\n\
         [model.manifest]\nid = \"tiny-nli\"\nkind = \"nli\"\nmax_length = 32\nlabels = [\"contradiction\", \"entailment\", \"neutral\"]\n",
        model.len(),
        sha256_hex(&tokenizer)
    );
    std::fs::write(&p, text).unwrap();
    p
}

fn catalogue(dir: &Path, file: &str) -> PathBuf {
    catalogue_pinned(dir, file, true)
}

/// `lode setup --nli tiny-nli-hub` with the given environment; models go to `models`.
fn setup(catalogue: &Path, models: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
    let home = catalogue.parent().unwrap();
    c.args(["setup", "--nli", "tiny-nli-hub", "--catalogue"])
        .arg(catalogue)
        .env("LODE_MODELS", models)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("HF_TOKEN")
        .env_remove("HF_ENDPOINT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.current_dir(catalogue.parent().unwrap()).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The installed model works: the gate entails with it (the tiny NLI model reads "banana").
fn entails(models: &Path) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lode"))
        .args(["gate", "--nli"])
        .arg(models.join("tiny-nli-hub"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let line = serde_json::json!({"claim": "the stand sells banana after banana", "spans": ["a banana stand", "another banana"],
        "source": "We saw a banana stand and another banana."});
    child.stdin.take().unwrap().write_all(format!("{line}\n").as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    serde_json::from_slice::<serde_json::Value>(o.stdout.trim_ascii()).is_ok_and(|v| v["verdict"] == "entailed")
}

#[test]
fn a_model_is_fetched_checked_recorded_and_installed_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = start_hub();
    let cat = catalogue(tmp.path(), "onnx/model.onnx");
    let models = tmp.path().join("models");
    let env = [("HF_ENDPOINT", hub.endpoint.as_str()), ("HF_TOKEN", TOKEN)];
    // Slow answers are waited for.
    hub.faults.lock().unwrap().delay_ms = 700;
    let o = setup(&cat, &models, &env);
    assert!(o.status.success(), "{}", text(&o));
    hub.faults.lock().unwrap().delay_ms = 0;
    assert!(text(&o).contains("nli = \"tiny-nli-hub\""), "says what to configure: {}", text(&o));
    let installed = models.join("tiny-nli-hub");
    let source = std::fs::read_to_string(installed.join("lode-source.toml")).unwrap();
    assert!(source.contains(COMMIT) && source.contains("lode-tests/tiny-nli") && source.contains("sha256"), "{source}");
    assert!(std::fs::read_to_string(installed.join("lode-model.toml")).unwrap().contains("kind = \"nli\""));
    assert!(entails(&models), "the installed model does not work");
    assert!(!models.join(".partial-tiny-nli-hub").exists(), "the staging folder is gone");
    // The LFS file came through the redirect; the hub's listing was never asked.
    let log = hub.log.lock().unwrap().clone();
    assert!(log.iter().any(|(p, _)| p.starts_with("/cdn/")), "{log:?}");
    assert!(!log.iter().any(|(p, _)| p.starts_with("/api/")), "the listing is no checksum: {log:?}");
    // Again: the recorded commit is the pinned one, so nothing is asked at all.
    let n = hub.log.lock().unwrap().len();
    let o = setup(&cat, &models, &env);
    assert!(o.status.success() && text(&o).contains("is installed"), "{}", text(&o));
    assert_eq!(hub.log.lock().unwrap().len(), n, "nothing is asked: {:?}", &hub.log.lock().unwrap()[n..]);
    // `lode doctor` reports it, with where it came from.
    let vault = tmp.path().join("vault");
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), "[models]\nembedder = \"\"\nnli = \"tiny-nli-hub\"\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_lode")).args(["doctor", "--vault"]).arg(&vault).env("LODE_MODELS", &models).output().unwrap();
    let t = text(&o);
    assert!(t.contains("tiny-nli from") && t.contains(&format!("lode-tests/tiny-nli@{}", &COMMIT[..12])), "{t}");
    assert!(t.contains("installed in") && t.contains("tiny-nli-hub"), "{t}");
    // `--list` says it is installed.
    let o = Command::new(env!("CARGO_BIN_EXE_lode"))
        .args(["setup", "--list", "--catalogue"])
        .arg(&cat)
        .env("LODE_MODELS", &models)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).lines().any(|l| l.starts_with("tiny-nli-hub") && l.contains("yes")), "{}", text(&o));
}

#[test]
fn a_cut_download_resumes_with_a_range_request() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = start_hub();
    let cat = catalogue(tmp.path(), "onnx/model.onnx");
    let models = tmp.path().join("models");
    let env = [("HF_ENDPOINT", hub.endpoint.as_str()), ("HF_TOKEN", TOKEN)];
    hub.faults.lock().unwrap().truncate_at = Some(300);
    let o = setup(&cat, &models, &env);
    assert!(!o.status.success(), "a cut download is not installed: {}", text(&o));
    assert!(text(&o).contains("run `lode setup` again to resume"), "{}", text(&o));
    assert!(!models.join("tiny-nli-hub").exists(), "nothing installed from a cut download");
    assert!(!models.join(".partial-tiny-nli-hub").exists(), "a failed install leaves no staging folder");
    let model_sha = sha256_hex(&std::fs::read(lode_testing::models().join("tiny-nli/model.onnx")).unwrap());
    let partial = tmp.path().join(format!("cache/lode/downloads/{model_sha}.partial"));
    assert_eq!(std::fs::metadata(&partial).map(|m| m.len()).ok(), Some(300), "the part that came is kept, in the user's cache");
    let o = setup(&cat, &models, &env);
    assert!(o.status.success(), "{}", text(&o));
    let ranged = hub.log.lock().unwrap().iter().any(|(p, r)| p.starts_with("/cdn/") && r.as_deref() == Some("bytes=300-"));
    assert!(ranged, "resumed from byte 300: {:?}", hub.log.lock().unwrap());
    assert!(entails(&models), "the resumed model is whole");
}

#[test]
fn wrong_checksums_missing_files_refusals_and_no_hub_are_said_and_install_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = start_hub();
    let models = tmp.path().join("models");
    let env = [("HF_ENDPOINT", hub.endpoint.as_str()), ("HF_TOKEN", TOKEN)];
    let cat = catalogue(tmp.path(), "onnx/model.onnx");
    // A body that does not match the catalogue's SHA-256 (the hub's own word is not asked).
    hub.faults.lock().unwrap().tamper = true;
    let o = setup(&cat, &models, &env);
    assert!(!o.status.success() && text(&o).contains("SHA-256") && text(&o).contains("nothing was installed"), "{}", text(&o));
    assert!(!models.join("tiny-nli-hub").exists());
    assert!(!models.join(".partial-tiny-nli-hub").exists(), "a failed install leaves no staging folder");
    assert!(
        std::fs::read_dir(tmp.path().join("cache/lode/downloads")).map_or(true, |d| d.count() == 0),
        "a bad download is not kept to resume"
    );
    hub.faults.lock().unwrap().tamper = false;
    // A file the repository lacks: named.
    let missing = catalogue(tmp.path(), "onnx/model_quantized.onnx");
    let o = setup(&missing, &models, &env);
    assert!(!o.status.success() && text(&o).contains("has no onnx/model_quantized.onnx"), "{}", text(&o));
    // No token: the refusal names HF_TOKEN.
    let o = setup(&cat, &models, &[("HF_ENDPOINT", hub.endpoint.as_str())]);
    assert!(!o.status.success() && text(&o).contains("HF_TOKEN"), "{}", text(&o));
    // No hub at all: says what to copy where, and of the mirror setting.
    let o = setup(&cat, &models, &[("HF_ENDPOINT", "http://127.0.0.1:1"), ("HF_TOKEN", TOKEN)]);
    let t = text(&o);
    assert!(!o.status.success() && t.contains("cannot reach the model hub") && t.contains("Copy onnx/model.onnx as model.onnx"), "{t}");
    assert!(t.contains("[models] mirror") && t.contains(&models.join("tiny-nli-hub").display().to_string()), "{t}");
    assert!(!models.join("tiny-nli-hub").exists());
    // A vault's `[models] mirror` is used once the folder is approved, but gets no token: the
    // hub refuses, and lode says why it sent none.
    let vault = tmp.path().join("vault");
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), format!("[models]\nmirror = \"{}\"\n", hub.endpoint)).unwrap();
    let run = |extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lode"));
        c.args(extra)
            .arg("--vault")
            .arg(&vault)
            .env("LODE_MODELS", &models)
            .env("XDG_CACHE_HOME", tmp.path().join("cache"))
            .env("XDG_CONFIG_HOME", tmp.path().join("config"))
            .env("XDG_DATA_HOME", tmp.path().join("data"))
            .env("HF_TOKEN", TOKEN)
            .env_remove("HF_ENDPOINT");
        c.output().unwrap()
    };
    let install = ["setup", "--nli", "tiny-nli-hub", "--catalogue", cat.to_str().unwrap()];
    let before = hub.log.lock().unwrap().len();
    let o = run(&install);
    assert!(text(&o).contains("lode trust"), "unapproved, the folder's mirror is ignored: {}", text(&o));
    assert_eq!(hub.log.lock().unwrap().len(), before, "an unapproved folder's mirror is never asked");
    assert!(run(&["trust"]).status.success());
    let o = run(&install);
    assert!(!o.status.success() && text(&o).contains("HF_TOKEN is not sent"), "{}", text(&o));
    // The same mirror named in the user's own config gets the token, and installs.
    std::fs::create_dir_all(tmp.path().join("config/lode")).unwrap();
    std::fs::write(tmp.path().join("config/lode/config.toml"), format!("[models]\nmirror = \"{}\"\n", hub.endpoint)).unwrap();
    std::fs::write(vault.join(".lode/config.toml"), "").unwrap();
    let o = run(&install);
    assert!(o.status.success(), "{}", text(&o));
    assert!(entails(&models));
}

/// What a hub or a proxy in front of it may do besides the faults above, and a catalogue entry
/// without a pin: ignore ranges (the download starts over and still installs), send more bytes
/// than pinned (refused), an unpinned file (refused before anything is fetched).
#[test]
fn hubs_without_ranges_or_checksums_and_oversized_or_non_json_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = start_hub();
    let cat = catalogue(tmp.path(), "onnx/model.onnx");
    let models = tmp.path().join("models");
    let env = [("HF_ENDPOINT", hub.endpoint.as_str()), ("HF_TOKEN", TOKEN)];
    let set = |f: &dyn Fn(&mut Faults)| f(&mut hub.faults.lock().unwrap());
    // An entry the catalogue does not pin is not installed at all.
    let unpinned = catalogue_pinned(tmp.path(), "onnx/model.onnx", false);
    let before = hub.log.lock().unwrap().len();
    let o = setup(&unpinned, &models, &env);
    assert!(!o.status.success() && text(&o).contains("no SHA-256 pin"), "{}", text(&o));
    assert_eq!(hub.log.lock().unwrap().len(), before, "nothing is fetched for an unpinned entry");
    set(&|f| *f = Faults { extra_bytes: true, ..Faults::default() });
    let o = setup(&cat, &models, &env);
    assert!(!o.status.success() && text(&o).contains("nothing was installed"), "{}", text(&o));
    assert!(!models.join("tiny-nli-hub").exists(), "nothing installed by any of them");
    // A cut download, then a server that ignores the range: it starts over, and installs.
    set(&|f| *f = Faults { truncate_at: Some(300), ..Faults::default() });
    assert!(!setup(&cat, &models, &env).status.success());
    set(&|f| *f = Faults { ignore_range: true, ..Faults::default() });
    let o = setup(&cat, &models, &env);
    assert!(o.status.success(), "{}", text(&o));
    assert!(entails(&models), "the model restarted from the first byte is whole");
}
