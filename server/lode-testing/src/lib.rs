//! Test support shared by lode's crates (a dev-dependency only): copies of the example vault and
//! where the models installed by `scripts/setup-models.sh` live.

pub mod llm;
pub mod stdio_client;
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
    let files = vector_data_files(vectors);
    for p in &files {
        let len = std::fs::metadata(p).unwrap().len() as usize;
        std::fs::write(p, vec![0x5a; len]).unwrap();
    }
    files.len()
}

/// Damages the data region of every data file (the first half, footer kept): what makes
/// LanceDB's decoder panic on a worker thread rather than refuse the file. Returns how many.
pub fn damage_vector_data_regions(vectors: &Path) -> usize {
    let files = vector_data_files(vectors);
    for p in &files {
        let mut b = std::fs::read(p).unwrap();
        let half = b.len() / 2;
        for i in (64..half).step_by(13) {
            b[i] ^= 0xff;
        }
        std::fs::write(p, b).unwrap();
    }
    files.len()
}

/// Every data file of the vector tables under `vectors` (files in a `data` folder).
fn vector_data_files(vectors: &Path) -> Vec<std::path::PathBuf> {
    let mut stack = vec![vectors.to_path_buf()];
    let mut out = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.parent().is_some_and(|d| d.ends_with("data")) {
                out.push(p);
            }
        }
    }
    out
}

/// A small disk for fault tests: a tmpfs of `bytes` mounted on a fresh folder in a mount
/// namespace of this thread's own, so only this thread and the processes it starts see it (a
/// test thread's namespace goes with it). `None` where that is not permitted (it needs root or
/// CAP_SYS_ADMIN): the caller skips and says so.
pub fn private_tmpfs(bytes: u64) -> Option<PathBuf> {
    use std::ffi::CString;
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir =
        std::env::temp_dir().join(format!("lode-disk-{}-{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)));
    std::fs::create_dir_all(&dir).ok()?;
    let c = |s: &str| CString::new(s).expect("no NUL");
    let (root, target, fs, opts) = (c("/"), c(dir.to_str()?), c("tmpfs"), c(&format!("size={bytes}")));
    // SAFETY: plain syscalls on valid NUL-terminated strings; unshare(CLONE_NEWNS) affects the
    // calling thread only (it implies CLONE_FS), and the mounts stay inside its namespace.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return None;
        }
        if libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0 {
            return None;
        }
        if libc::mount(fs.as_ptr(), target.as_ptr(), fs.as_ptr(), 0, opts.as_ptr().cast()) != 0 {
            return None;
        }
    }
    Some(dir)
}

/// Fills the disk holding `dir` with a file there until a write fails; returns the file.
pub fn fill_disk(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("create the filler");
    let block = vec![0u8; 64 << 10];
    while f.write_all(&block).is_ok() {}
    let small = [0u8; 512];
    while f.write_all(&small).is_ok() {}
    let _ = f.sync_all();
    path
}
