//! Installed as a user installs it: the binary copied out of the build tree, `lode setup` into a
//! fresh home's data directory, then `lode doctor --json` and a dense search run from another
//! folder with a clean environment (no LODE_MODELS, no ORT_DYLIB_PATH) — and what doctor says
//! when the models are missing or a setting is wrong.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lode_testing::{copy_dir, repo};
use serde_json::Value;

/// Runs the installed `lode` with only HOME and PATH (and pip's cache, so `lode setup` reuses
/// downloads already made on this machine: pip's own setting, not lode's).
fn lode(bin: &Path, home: &Path, cwd: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(bin);
    c.args(args).current_dir(cwd).env_clear().env("HOME", home).env("PATH", std::env::var_os("PATH").unwrap_or_default());
    if let Some(real_home) = std::env::var_os("HOME") {
        let cache = std::env::var_os("PIP_CACHE_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(real_home).join(".cache/pip"));
        c.env("PIP_CACHE_DIR", cache);
    }
    c.output().unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn installed_binary_finds_its_models_from_any_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let bin_dir = home.join(".cargo/bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("lode");
    std::fs::copy(env!("CARGO_BIN_EXE_lode"), &bin).unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let vault = tmp.path().join("notes");
    copy_dir(&repo().join("fixtures/vault"), &vault);
    let v = vault.to_str().unwrap();

    // Before setup: lexical only, and doctor says so, with the fix, and fails.
    let before = lode(&bin, &home, &elsewhere, &["doctor", "--json", "--vault", v]);
    assert!(!before.status.success(), "doctor must fail without the embedding model");
    let d = json(&before);
    assert_eq!(d["ok"], false);
    let problems = d["problems"].to_string();
    assert!(problems.contains("embedder") && problems.contains("lode setup"), "{problems}");

    let setup = lode(&bin, &home, &elsewhere, &["setup"]);
    assert!(
        setup.status.success(),
        "lode setup failed:\n{}\n{}",
        String::from_utf8_lossy(&setup.stdout),
        String::from_utf8_lossy(&setup.stderr)
    );
    let data = home.join(".local/share/lode");
    assert!(data.join("models/all-MiniLM-L6-v2/model.onnx").is_file());
    // Idempotent: a second run changes nothing and says so.
    let again = lode(&bin, &home, &elsewhere, &["setup"]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("already set up"), "{}", String::from_utf8_lossy(&again.stdout));

    let after = lode(&bin, &home, &elsewhere, &["doctor", "--json", "--vault", v]);
    let d = json(&after);
    assert!(after.status.success(), "{d:#}");
    assert_eq!(d["ok"], true);
    let runtime = d["runtime"]["path"].as_str().unwrap();
    assert!(Path::new(runtime).starts_with(&data), "the runtime must come from the data directory, not the build tree: {runtime}");
    assert_eq!(d["runtime"]["version"], "1.32.0");
    let embedder = d["models"].as_array().unwrap().iter().find(|m| m["role"] == "embedder").unwrap();
    assert_eq!(embedder["loaded"], true, "{embedder}");
    assert!(Path::new(embedder["path"].as_str().unwrap()).starts_with(&data));
    assert_eq!(d["vault"]["indexed"], false);

    let index = lode(&bin, &home, &elsewhere, &["index", "--vault", v]);
    assert!(index.status.success(), "{}", String::from_utf8_lossy(&index.stderr));
    let hits =
        lode(&bin, &home, &elsewhere, &["search", "--vault", v, "--mode", "dense", "--json", "how often are staging certificates rotated"]);
    assert!(hits.status.success(), "{}", String::from_utf8_lossy(&hits.stderr));
    let stderr = String::from_utf8_lossy(&hits.stderr);
    assert!(!stderr.contains("unavailable"), "dense retrieval must be on: {stderr}");
    let top: Vec<Value> = String::from_utf8_lossy(&hits.stdout).lines().take(3).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(top.iter().any(|h| h["path"] == "runbooks/rotate-staging-certs.md"), "{top:?}");

    let indexed = json(&lode(&bin, &home, &elsewhere, &["doctor", "--json", "--vault", v]));
    let vectors = &indexed["vault"]["vectors"];
    assert!(indexed["vault"]["notes"].as_u64().unwrap() > 0);
    assert_eq!(vectors["with_vectors"], vectors["passages"], "{indexed:#}");
    assert_eq!(indexed["vault"]["pending"]["new"], 0);

    // A broken setting is named, and fails.
    std::fs::write(
        vault.join(".lode/config.toml"),
        "[models]\nembedder = \"no-such-model\"\n[egress]\nno_egress = [\"private/**\", \"typo-folder/\"]\n",
    )
    .unwrap();
    let bad = lode(&bin, &home, &elsewhere, &["doctor", "--json", "--vault", v]);
    assert!(!bad.status.success());
    let d = json(&bad);
    assert!(d["problems"].to_string().contains("no-such-model"), "{d:#}");
    let patterns = d["egress"]["patterns"].as_array().unwrap();
    assert_eq!(patterns.len(), 2);
    assert_eq!(patterns[1]["withholds"], 0, "a pattern matching nothing is reported: {patterns:?}");
    std::fs::write(vault.join(".lode/config.toml"), "[models\n").unwrap();
    let unparsable = json(&lode(&bin, &home, &elsewhere, &["doctor", "--json", "--vault", v]));
    assert_eq!(unparsable["config"]["ok"], false);
    assert!(unparsable["problems"].to_string().contains("config.toml"), "{unparsable:#}");
}

/// The Python wheel (pyproject.toml, maturin `bindings = "bin"`), built by scripts/test.sh into
/// target/wheels: installed with pip into a fresh virtual environment, it puts `lode` on that
/// environment's PATH, which indexes the example vault and answers the demo question with a
/// verified citation.
#[test]
fn the_python_wheel_installs_lode_which_answers_the_demo_question() {
    let wheel = std::env::var_os("LODE_TEST_WHEEL").map(PathBuf::from).or_else(|| {
        let dir = repo().join("target/wheels");
        std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "whl"))
    });
    let wheel = wheel.expect("no wheel: scripts/test.sh builds it (maturin build --profile dev -o target/wheels)");
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let o = Command::new("python3").args(["-m", "venv"]).arg(&venv).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(venv.join("bin/pip")).args(["install", "--quiet", "--no-index"]).arg(&wheel).output().unwrap();
    assert!(o.status.success(), "pip install {}: {}", wheel.display(), String::from_utf8_lossy(&o.stderr));
    let bin = venv.join("bin/lode");
    assert!(bin.is_file(), "the wheel put no lode in {}", venv.join("bin").display());
    let home = tmp.path().join("home");
    let vault = tmp.path().join("notes");
    copy_dir(&repo().join("fixtures/vault"), &vault);
    let _ = std::fs::remove_dir_all(vault.join(".lode"));
    let vault_arg = vault.to_string_lossy().into_owned();
    let o = lode(&bin, &home, tmp.path(), &["--version"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), format!("lode {}", env!("CARGO_PKG_VERSION")));
    let o = lode(&bin, &home, tmp.path(), &["index", "-q", "--no-vectors", "--vault", &vault_arg]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = lode(&bin, &home, tmp.path(), &["ask", "--json", "--vault", &vault_arg, "How often are staging certificates rotated?"]);
    let answer = json(&o);
    let claim = answer["claims"].as_array().unwrap().iter().find(|c| c["rung"] == "verified").unwrap_or_else(|| panic!("{answer:#}"));
    assert!(claim["text"].as_str().unwrap().contains("every 60 days"), "{claim}");
    assert_eq!(claim["citations"][0]["path"], "runbooks/rotate-staging-certs.md", "{claim}");
}

/// The platform `.vsix` (`editors/vscode/scripts/package-platform.sh`, built by scripts/test.sh
/// around the dev build into target/vsix), installed as `code --install-extension` installs it:
/// its `extension/` folder unpacked under the extensions folder with each file's mode. With no
/// `lode` on PATH and no `lode.path`, the extension's own choice (`chooseBinary`, the code the
/// bundle runs) is the binary inside; that binary, started as the extension starts it, answers
/// the demo question, and hover and goto work on the citation it gives. VS Code itself is not
/// run: code-server (npm) needs Node 24 and headers from nodejs.org, which this machine cannot
/// reach.
#[test]
fn the_platform_vsix_carries_a_lode_the_extension_runs_which_answers_hovers_and_goes_to() {
    use lode_testing::stdio_client::StdioClient;
    use serde_json::json;
    let vsix = std::env::var_os("LODE_TEST_VSIX").map(PathBuf::from).or_else(|| {
        std::fs::read_dir(repo().join("target/vsix")).ok()?.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "vsix"))
    });
    let vsix = vsix.expect("no platform .vsix: scripts/test.sh builds it (build_platform_vsix)");
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ext = home.join(".vscode/extensions/lode.lode-linux-x64");
    // Unpacked as VS Code unpacks it: entries under `extension/`, modes from the archive.
    let unzip = r#"
import sys, zipfile, os
z = zipfile.ZipFile(sys.argv[1])
for i in z.infolist():
    if not i.filename.startswith('extension/') or i.is_dir():
        continue
    out = os.path.join(sys.argv[2], i.filename[len('extension/'):])
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, 'wb') as f:
        f.write(z.read(i))
    mode = (i.external_attr >> 16) & 0o777
    if mode:
        os.chmod(out, mode)
"#;
    let o = Command::new("python3").args(["-c", unzip]).arg(&vsix).arg(&ext).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bundled = ext.join("server/lode");
    assert!(ext.join("dist/extension.js").is_file() && ext.join("package.json").is_file(), "not an extension: {}", ext.display());
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&bundled).unwrap().permissions().mode();
        assert!(mode & 0o111 != 0, "the packaged binary is not executable once installed ({mode:o})");
    }
    // The extension's choice, with a PATH that has no lode and no `lode.path` setting.
    let choose = "const b = require(process.argv[1]);\n\
const r = b.chooseBinary(undefined, process.argv[2], { platform: 'linux', PATH: '/usr/bin:/bin', home: process.argv[3] });\n\
console.log(JSON.stringify(r));";
    let o = Command::new("node")
        .args(["-e", choose])
        .arg(repo().join("editors/vscode/out/binary.js"))
        .arg(&bundled)
        .arg(&home)
        .output()
        .expect("node (scripts/test.sh installs it)");
    let chosen: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(chosen, json!({"ok": true, "path": bundled.to_string_lossy()}), "the extension would not run the binary it carries");

    // Started as the extension starts it (`lode serve`, stdio), on the example vault.
    let vault = tmp.path().join("notes");
    copy_dir(&repo().join("fixtures/vault"), &vault);
    let _ = std::fs::remove_dir_all(vault.join(".lode"));
    let env = [("HOME", home.to_string_lossy().into_owned()), ("PATH", "/usr/bin:/bin".to_owned())];
    let mut lsp = StdioClient::spawn_env(&bundled, ["serve"], env).unwrap();
    let root = format!("file://{}", vault.display());
    lsp.request("initialize", json!({"processId": null, "rootUri": root, "capabilities": {}})).unwrap();
    lsp.notify("initialized", json!({})).unwrap();
    lsp.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end").unwrap();
    let a = lsp.request("lode/ask", json!({"question": "How often are staging certificates rotated?"})).unwrap();
    let claim = a["result"]["claims"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["rung"] == "verified" && c["text"].as_str().is_some_and(|t| t.contains("every 60 days")))
        .unwrap_or_else(|| panic!("no verified answer: {a}"))
        .clone();
    let cit = &claim["citations"][0];
    assert_eq!(cit["path"], "runbooks/rotate-staging-certs.md", "{claim}");
    let link = lode_core::citation::render(
        "answers.md",
        "runbooks/rotate-staging-certs.md",
        cit["line"].as_u64().unwrap() as usize,
        cit["version_id"].as_str().unwrap(),
        cit["start"].as_u64().unwrap() as usize..cit["end"].as_u64().unwrap() as usize,
    );
    let answers = format!("- Staging certificates are rotated every 60 days {link}\n");
    let uri = format!("{root}/answers.md");
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": answers}}))
        .unwrap();
    let at = json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": answers.find("](").unwrap()}});
    let h = lsp.request("textDocument/hover", at.clone()).unwrap();
    let shown = h["result"]["contents"]["value"].as_str().unwrap_or_default();
    assert!(shown.contains(cit["quoted_span"].as_str().unwrap()), "hover shows the quoted span: {h}");
    let g = lsp.request("textDocument/definition", at).unwrap();
    assert!(g.to_string().contains("rotate-staging-certs.md"), "goto resolves the citation: {g}");
}
