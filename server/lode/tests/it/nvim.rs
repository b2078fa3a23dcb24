//! The Neovim plugin driven by real Neovim (headless, Debian's package) against the real
//! `lode serve`: :LodeAsk inserts a verified answer, hovering its citation shows the quote,
//! :LodeStatus echoes the index's state and `:checkhealth lode` reports the binary, the vault
//! (through `lode doctor --json`) and the attached client. The script is tests/nvim/ask_spec.lua.
//! On a folder whose settings the user has not approved, the plugin asks before starting lode
//! (tests/nvim/trust_spec.lua).

use std::path::Path;
use std::process::Command;

use lode_testing::copy_dir;

/// Runs `spec` (a script in tests/nvim/) in headless Neovim with the plugin and this `lode`, its
/// home in `home`, with the script's own variables; what the script wrote to $LODE_OUT.
fn run_spec(spec: &str, home: &Path, vars: &[(&str, &std::ffi::OsStr)]) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = home.join("out.json");
    let mut c = Command::new("nvim");
    c.args(["--headless", "-n", "-i", "NONE", "-u", "NONE", "-c"])
        .arg(format!("luafile {}", root.join("tests/nvim").join(spec).display()))
        .env("LODE_BIN", env!("CARGO_BIN_EXE_lode"))
        .env("LODE_PLUGIN", root.join("editors/nvim"))
        .env("LODE_SPECS", root.join("tests/nvim"))
        .env("LODE_OUT", &out)
        .env("HOME", home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME");
    for (k, v) in vars {
        c.env(k, v);
    }
    assert!(c.status().unwrap().success());
    serde_json::from_str(&std::fs::read_to_string(&out).expect("the script wrote its result")).unwrap()
}

#[test]
fn neovim_asks_and_hovers() {
    let nvim = Command::new("nvim").arg("--version").output();
    assert!(nvim.is_ok_and(|o| o.status.success()), "nvim is not installed: scripts/test.sh installs Debian's neovim");
    let tmp = tempfile::tempdir().unwrap();
    let (_, note) = super::support::question_vault(tmp.path());
    let v = run_spec("ask_spec.lua", tmp.path(), &[("LODE_NOTE", note.as_os_str())]);
    assert!(v["error"].is_null(), "{}", v["error"]);
    let lines: Vec<&str> = v["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert_eq!(lines[2], "How often are staging certificates rotated?");
    let answer = lines[3..].join("\n");
    assert!(answer.contains("every 60 days") && answer.contains("*(verified)*"), "{answer}");
    let hover = v["hover"].as_str().unwrap_or_default();
    assert!(hover.contains("runbooks/rotate-staging-certs.md") && hover.contains("> "), "{hover}");

    // :LodeStatus: one line, "lode: N notes · …", N as lode/status counts the vault.
    let notes = v["status_notes"].as_u64().expect("lode/status answered");
    assert!(notes >= 14, "the fixture vault and questions.md are indexed: {notes}");
    let message = v["status_message"].as_str().unwrap_or_default();
    assert!(message == format!("lode: {notes} notes") || message.starts_with(&format!("lode: {notes} notes · ")), "{message}");
    let forms = &v["status_forms"];
    for (state, want) in [
        ("loading", "lode: 3 notes · loading model · scanning"),
        ("embedding", "lode: 3 notes · embedding 40%"),
        ("complete", "lode: 3 notes"),
        ("switching", "lode: 3 notes · embedding 50% (new model)"),
        ("off", "lode: 3 notes · lexical only (off: no ONNX Runtime)"),
        ("mended", "lode: 3 notes · lexical only (the vector table is being rebuilt)"),
    ] {
        assert_eq!(forms[state].as_str(), Some(want), "{state}: {forms}");
    }

    // :checkhealth lode: the section, the binary found, doctor's view of the vault, the client.
    let health: Vec<&str> = v["health"].as_array().expect("the health report").iter().map(|l| l.as_str().unwrap()).collect();
    let report = health.join("\n");
    let ok_line = |needles: &[&str]| health.iter().any(|l| l.contains("OK") && needles.iter().all(|n| l.contains(n)));
    assert!(health.iter().any(|l| l.trim() == "## lode" || l.trim() == "lode ~"), "{report}");
    assert!(ok_line(&["is executable", env!("CARGO_BIN_EXE_lode")]), "{report}");
    assert!(ok_line(&["vault ", &format!("{notes} notes")]), "doctor's vault line: {report}");
    assert!(ok_line(&["is attached to", "questions.md"]), "{report}");
    assert!(!report.contains("printed no report") && !report.contains("Failed to run healthcheck"), "{report}");
}

/// The plugin asks before starting lode on a folder whose config holds settings the user has not
/// approved, once per folder and session: "Approve" runs `lode trust` and starts lode, "Don't
/// start" leaves it off.
#[test]
fn neovim_asks_before_starting_on_an_unapproved_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for choice in ["Approve (lode trust)", "Don't start"] {
        let tmp = tempfile::tempdir().unwrap();
        let vault = tmp.path().join("vault");
        copy_dir(&root.join("fixtures/vault"), &vault);
        std::fs::create_dir_all(vault.join(".lode")).unwrap();
        std::fs::write(
            vault.join(".lode/config.toml"),
            "[models]\nembedder = \"\"\n\n[llm]\nendpoint = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
        )
        .unwrap();
        let (note, note2) = (vault.join("runbooks/rotate-staging-certs.md"), vault.join("notes/reading-list.md"));
        let v = run_spec(
            "trust_spec.lua",
            tmp.path(),
            &[("LODE_NOTE", note.as_os_str()), ("LODE_NOTE2", note2.as_os_str()), ("LODE_CHOICE", choice.as_ref())],
        );
        assert!(v["error"].is_null(), "{choice}: {}", v["error"]);
        let asked = v["asked"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{choice}: asked once per folder: {v}");
        let prompt = asked[0]["prompt"].as_str().unwrap();
        assert!(prompt.contains("lode trust") && prompt.contains("[llm]"), "{v}");
        assert!(prompt.contains("http://127.0.0.1:9/v1"), "the prompt shows what is approved, values included: {prompt}");
        assert_eq!(asked[0]["running"], 0, "lode ran before the user answered: {v}");
        let trust = Command::new(env!("CARGO_BIN_EXE_lode"))
            .args(["trust", "--status", "--vault"])
            .arg(&vault)
            .env("HOME", tmp.path())
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap()
            .status;
        if choice.starts_with("Approve") {
            assert!(v["running"].as_u64().unwrap() >= 1, "{v}");
            assert_eq!(trust.code(), Some(0), "approved by the plugin");
        } else {
            assert_eq!(v["running"], 0, "{v}");
            assert_eq!(trust.code(), Some(3), "nothing approved");
        }
    }
}

/// The nvim-lspconfig / Neovim 0.11 config (editors/nvim/lsp/lode.lua) loads in Neovim and
/// starts `lode serve` for markdown at a vault's markers.
#[test]
fn the_lsp_config_for_neovim_0_11_and_lspconfig_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = root.join("editors/nvim/lsp/lode.lua");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cfg.json");
    let lua = format!(
        "lua local c = dofile('{}'); local f = io.open('{}', 'w'); f:write(vim.fn.json_encode(c)); f:close()",
        file.display(),
        out.display()
    );
    let status = Command::new("nvim")
        .args(["--headless", "-n", "-i", "NONE", "-u", "NONE", "-c", &lua, "-c", "qa!"])
        .env("HOME", tmp.path())
        .status()
        .unwrap();
    assert!(status.success());
    let c: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(c["cmd"], serde_json::json!(["lode", "serve"]));
    assert_eq!(c["filetypes"], serde_json::json!(["markdown"]));
    assert_eq!(c["root_markers"], serde_json::json!([".lode", ".obsidian", ".git"]));
}
