//! Test support shared by lode's crates (a dev-dependency only): copies of the example vault and
//! where the models installed by `scripts/setup-models.sh` live.

pub mod llm;
pub mod web;

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    // The running test's package (cargo sets this at run time; every crate is `server/<name>`),
    // else this crate's at build time. A build cache shared by two checkouts can hand this
    // crate over compiled in the other one, with the other one's path baked in.
    let package = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    package.join("../..")
}

/// Copies a folder recursively, leaving out lode's state folder (`.lode`).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() == ".lode" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A fresh copy of `fixtures/vault` at `<dir>/vault`.
pub fn example_vault(dir: &Path) -> PathBuf {
    let v = dir.join("vault");
    copy_dir(&repo().join("fixtures/vault"), &v);
    v
}

/// The models folder (`$LODE_MODELS`, else `.lode-tools/models`); fails clearly when missing.
pub fn models() -> PathBuf {
    let dir = std::env::var_os("LODE_MODELS").map(PathBuf::from).unwrap_or_else(|| repo().join(".lode-tools/models"));
    assert!(dir.join("all-MiniLM-L6-v2/model.onnx").is_file(), "models missing in {}: run scripts/setup-models.sh", dir.display());
    dir
}

/// Overwrites every data file of the LanceDB tables under `vectors` with junk of the same length
/// (a damaged vector table: it opens, and fails when read). Returns how many files it damaged.
pub fn damage_vector_tables(vectors: &Path) -> usize {
    let mut stack = vec![vectors.to_path_buf()];
    let mut damaged = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.parent().is_some_and(|d| d.ends_with("data")) {
                let len = std::fs::metadata(&p).unwrap().len() as usize;
                std::fs::write(&p, vec![0x5a; len]).unwrap();
                damaged += 1;
            }
        }
    }
    damaged
}
