//! Finding and loading the ONNX Runtime shared library, once per process.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;

use crate::ModelError;

/// lode's folder in the user's data directory: `$XDG_DATA_HOME/lode`, else
/// `~/.local/share/lode`. `lode setup` installs ONNX Runtime and the default model there.
pub fn user_data_dir() -> Option<PathBuf> {
    xdg_dir("XDG_DATA_HOME", ".local/share")
}

/// lode's folder in the user's cache directory: `$XDG_CACHE_HOME/lode`, else `~/.cache/lode`.
/// Files lode can make again live there (versions materialized for an editor to open).
pub fn user_cache_dir() -> Option<PathBuf> {
    xdg_dir("XDG_CACHE_HOME", ".cache")
}

/// `$<var>/lode` when that variable holds an absolute path, else `$HOME/<under_home>/lode`.
pub fn xdg_dir(var: &str, under_home: &str) -> Option<PathBuf> {
    let xdg = std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    let base = xdg.or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(under_home)))?;
    Some(base.join("lode"))
}

/// Where lode looks for `libonnxruntime.so`: the configured path if there is one, else
/// `ORT_DYLIB_PATH` if set (either is used alone: a wrong explicit setting is an error, not a
/// reason to load some other library), else `.lode-tools/onnxruntime/` of the repository the
/// binary was built in (so a checkout works after `scripts/setup-models.sh` with no setting),
/// else the user's data directory (after `lode setup`).
pub fn runtime_candidates(configured: Option<&Path>) -> Vec<PathBuf> {
    if let Some(p) = configured {
        return vec![p.to_path_buf()];
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return vec![PathBuf::from(p)];
    }
    let mut out = Vec::new();
    let mut dirs = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        // target/{debug,release}/lode → repository root
        if let Some(root) = exe.parent().and_then(Path::parent).and_then(Path::parent) {
            dirs.push(root.join(".lode-tools/onnxruntime"));
        }
    }
    if let Some(d) = user_data_dir() {
        dirs.push(d.join("onnxruntime"));
    }
    dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.lode-tools/onnxruntime"));
    for d in dirs {
        if let Ok(rd) = std::fs::read_dir(&d) {
            let mut libs: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libonnxruntime.so")))
                .collect();
            libs.sort();
            out.extend(libs.into_iter().rev());
        }
    }
    out
}

static ENV: OnceLock<Result<(PathBuf, Environment), ModelError>> = OnceLock::new();

/// The process-wide ONNX Runtime environment, loading the library on first use. The library can
/// be loaded once per process: later calls get the first outcome whatever path they name.
pub fn environment(configured: Option<&Path>) -> Result<&'static Environment, ModelError> {
    let outcome = ENV.get_or_init(|| {
        let candidates = runtime_candidates(configured);
        let Some(path) = candidates.iter().find(|p| p.is_file()).cloned() else {
            return Err(ModelError::RuntimeMissing { searched: candidates });
        };
        // A wrong library can abort inside its initialiser; catch what unwinds.
        let loaded = std::panic::catch_unwind(|| ort::init_from(&path).map(|b| b.with_name("lode").build()));
        match loaded {
            Ok(Ok(Ok(env))) => Ok((path, env)),
            Ok(Ok(Err(e))) => Err(ModelError::RuntimeLoad { path, detail: e.to_string() }),
            Ok(Err(e)) => Err(ModelError::RuntimeLoad { path, detail: e.to_string() }),
            Err(_) => Err(ModelError::RuntimeLoad { path, detail: "the library panicked while loading".into() }),
        }
    });
    match outcome {
        Ok((_, env)) => Ok(env),
        Err(e) => Err(e.clone()),
    }
}

/// The library this process loaded, if it has loaded one.
pub fn loaded_runtime() -> Option<PathBuf> {
    ENV.get().and_then(|o| o.as_ref().ok()).map(|(p, _)| p.clone())
}
