//! What several of the end-to-end modules set up the same way.

use std::path::{Path, PathBuf};

/// A user's own environment for one test: HOME and the XDG folders under `home` (approvals,
/// store records, the user config and the models' default place live there).
pub fn user_home(home: &Path) -> Vec<(String, String)> {
    let h = |p: &str| home.join(p).display().to_string();
    vec![
        ("HOME".into(), home.display().to_string()),
        ("XDG_CONFIG_HOME".into(), h(".config")),
        ("XDG_DATA_HOME".into(), h(".local/share")),
        ("XDG_CACHE_HOME".into(), h(".cache")),
    ]
}

/// The example vault under `dir` with a note whose third line is the demo question, for the
/// editor tests: (vault, note).
pub fn question_vault(dir: &Path) -> (PathBuf, PathBuf) {
    let vault = dir.join("vault");
    lode_testing::copy_dir(&lode_testing::repo().join("fixtures/vault"), &vault);
    std::fs::create_dir_all(vault.join(".lode")).unwrap();
    let note = vault.join("questions.md");
    std::fs::write(&note, "# Questions\n\nHow often are staging certificates rotated?\n").unwrap();
    (vault, note)
}
