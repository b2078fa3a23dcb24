//! The Emacs package (editors/emacs/lode.el) driven by real Emacs in batch mode (Debian's
//! emacs-nox with elpa-eglot) against the real `lode serve`: Eglot starts lode for a note of the
//! vault, `lode-ask` inserts the verified answer under the question, hovering its citation shows
//! the quoted span, going to its definition opens the cited note, and `lode-status` gives the
//! status line. The script is tests/emacs/ask_test.el.

use std::path::Path;
use std::process::Command;

#[test]
fn emacs_asks_hovers_and_follows_a_citation() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let emacs = Command::new("emacs").arg("--version").output();
    assert!(emacs.is_ok_and(|o| o.status.success()), "emacs is not installed: scripts/test.sh installs Debian's emacs-nox and elpa-eglot");
    let tmp = tempfile::tempdir().unwrap();
    let (vault, note) = super::support::question_vault(tmp.path());
    let out = tmp.path().join("out.json");
    let status = Command::new("emacs")
        .args(["--batch", "-Q", "-l"])
        .arg(root.join("tests/emacs/ask_test.el"))
        .env("LODE_BIN", env!("CARGO_BIN_EXE_lode"))
        .env("LODE_PLUGIN", root.join("editors/emacs"))
        .env("LODE_NOTE", &note)
        .env("LODE_OUT", &out)
        .env("HOME", tmp.path())
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .status()
        .unwrap();
    assert!(status.success());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).expect("the script wrote its result")).unwrap();
    assert!(v["error"].is_null(), "{}", v["error"]);
    // The vault is the folder holding .lode, not wherever Emacs was started.
    assert_eq!(Path::new(v["root"].as_str().unwrap()).canonicalize().unwrap(), vault.canonicalize().unwrap());
    let lines: Vec<&str> = v["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert_eq!(lines[2], "How often are staging certificates rotated?");
    let answer = lines[3..].join("\n");
    assert!(answer.contains("every 60 days") && answer.contains("*(verified)*") && answer.contains("rotate-staging-certs.md"), "{answer}");
    let hover = v["hover"].as_str().unwrap_or_default();
    assert!(hover.contains("runbooks/rotate-staging-certs.md") && hover.contains("> ") && hover.contains("every 60 days"), "{hover}");
    let def = v["definition"].as_str().unwrap_or_default();
    assert!(def.ends_with("runbooks/rotate-staging-certs.md"), "{def}");
    let status = v["status"].as_str().unwrap_or_default();
    assert!(status.starts_with("lode: 14 notes"), "{status}");
}
