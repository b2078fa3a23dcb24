//! `lode doctor`: every fact a user needs to know why lode answers the way it does — binary,
//! ONNX Runtime, models, settings, the vault's index, the LLM endpoint, egress rules — and a
//! non-zero exit when something is wrong.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};

use crate::config::{state_dir, Config};
use crate::VaultArgs;

#[derive(Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
    /// Also check that the configured LLM endpoint answers
    #[arg(long)]
    pub llm: bool,
}

/// How bad a finding is: `Fail` makes the exit status non-zero.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Ok,
    Note,
    Fail,
}

struct Report {
    lines: Vec<(Level, &'static str, String)>,
    json: serde_json::Map<String, Value>,
}

impl Report {
    fn line(&mut self, level: Level, what: &'static str, text: impl Into<String>) {
        self.lines.push((level, what, text.into()));
    }
}

pub fn run(args: DoctorArgs) -> Result<ExitCode> {
    let mut r = Report { lines: Vec::new(), json: serde_json::Map::new() };
    r.json.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    r.line(
        Level::Ok,
        "lode",
        format!("{} ({})", env!("CARGO_PKG_VERSION"), std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default()),
    );

    let root = match &args.vault.vault {
        Some(v) => v.clone(),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
    };
    let root = root.canonicalize().unwrap_or(root);
    let config = settings(&mut r, &root);
    runtime(&mut r, &config);
    models(&mut r, &config);
    vault(&mut r, &root, &config, args.vault.db.as_deref());
    shared(&mut r, &config);
    if args.llm {
        llm(&mut r, &config);
    }

    let failed = r.lines.iter().any(|(l, _, _)| *l == Level::Fail);
    let problems: Vec<String> = r.lines.iter().filter(|(l, _, _)| *l == Level::Fail).map(|(_, w, t)| format!("{w}: {t}")).collect();
    if args.vault.json {
        r.json.insert("ok".into(), json!(!failed));
        r.json.insert("problems".into(), json!(problems));
        println!("{}", Value::Object(r.json));
    } else {
        for (level, what, text) in &r.lines {
            let mark = match level {
                Level::Ok => "ok  ",
                Level::Note => "note",
                Level::Fail => "FAIL",
            };
            println!("{mark}  {what:<12} {text}");
        }
        if failed {
            println!("\n{} problem(s): lode runs, but not as configured. See the FAIL lines above.", problems.len());
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn settings(r: &mut Report, root: &Path) -> Config {
    let path = state_dir(root).join("config.toml");
    let exists = path.is_file();
    match Config::load(root) {
        Ok(c) => {
            r.line(
                Level::Ok,
                "settings",
                if exists { format!("{} parses", path.display()) } else { format!("defaults ({} does not exist)", path.display()) },
            );
            r.json.insert("config".into(), json!({"path": path, "exists": exists, "ok": true}));
            let user = crate::trust::user_config_path();
            r.line(
                Level::Ok,
                "user config",
                match &user {
                    Some(p) if p.is_file() => format!("{} parses (trusted: your own settings)", p.display()),
                    Some(p) => format!("none ({} does not exist)", p.display()),
                    None => "none (neither XDG_CONFIG_HOME nor HOME is set)".to_owned(),
                },
            );
            match c.report.notice() {
                // Not a failure: lode runs on its defaults; the user decides.
                Some(n) => r.line(Level::Note, "trust", n),
                None if c.report.approval == Some(crate::trust::Approval::Current) => {
                    r.line(Level::Ok, "trust", format!("{} is approved (`lode trust`)", root.display()))
                }
                None => r.line(Level::Ok, "trust", "this folder's config sets nothing that needs approval"),
            }
            r.json.insert(
                "trust".into(),
                json!({"user_config": user, "ignored": c.report.ignored, "user_only": c.report.user_only, "guarded": c.report.guarded, "notice": c.report.notice()}),
            );
            c
        }
        Err(e) => {
            r.line(Level::Fail, "settings", format!("{e:#}; using the defaults meanwhile"));
            r.json.insert("config".into(), json!({"path": path, "exists": exists, "ok": false, "error": format!("{e:#}")}));
            Config::default()
        }
    }
}

fn runtime(r: &mut Report, config: &Config) {
    let configured = config.models.runtime.as_deref();
    let searched = lode_models::runtime_candidates(configured);
    let needed = config.models.embedder_is_local_model() || config.models.reranker.is_some() || config.models.nli.is_some();
    match lode_models::environment(configured) {
        Ok(_) => {
            let path = lode_models::loaded_runtime().unwrap_or_default();
            let version = ort_version(&path);
            r.line(Level::Ok, "onnxruntime", format!("{} ({})", path.display(), version.as_deref().unwrap_or("version unknown")));
            r.json.insert("runtime".into(), json!({"found": true, "path": path, "version": version, "searched": searched}));
        }
        Err(e) => {
            let level = if needed { Level::Fail } else { Level::Note };
            r.line(level, "onnxruntime", format!("{e}; run `lode setup` to install it"));
            r.json.insert("runtime".into(), json!({"found": false, "error": e.to_string(), "searched": searched}));
        }
    }
}

/// The version in a library's file name (`libonnxruntime.so.1.32.0`).
fn ort_version(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let v = name.strip_prefix("libonnxruntime.so.").or_else(|| name.strip_prefix("libonnxruntime."))?;
    let v = v.trim_end_matches(".dylib");
    (!v.is_empty() && v.chars().next()?.is_ascii_digit()).then(|| v.to_owned())
}

fn models(r: &mut Report, config: &Config) {
    let m = &config.models;
    let rt = m.runtime.as_deref();
    let mut out = Vec::new();
    let roles: [(&str, Option<&String>); 3] =
        [("embedder", Some(&m.embedder).filter(|e| !e.trim().is_empty())), ("reranker", m.reranker.as_ref()), ("nli", m.nli.as_ref())];
    for (role, name) in roles {
        let Some(name) = name else {
            let what = match role {
                "embedder" => "none configured: lexical retrieval only",
                "reranker" => "none configured (optional: `--mode rerank`)",
                _ => "none configured (optional: claims not carried by one quote are shown as evidence only)",
            };
            r.line(if role == "embedder" { Level::Note } else { Level::Ok }, label(role), what);
            out.push(json!({"role": role, "configured": false}));
            continue;
        };
        let dir = m.resolve(name);
        let loaded: Result<String, String> = match role {
            "embedder" => m
                .embedder_source(crate::models::scrub())
                .map_err(|e| format!("{e:#}"))
                .and_then(|s| lode_models::Embedder::open(&s).map_err(|e| e.to_string()))
                .map(|e| {
                    let off = if e.sends_off_machine() { "; off this machine: no-egress notes withheld, secrets masked" } else { "" };
                    format!("{} ({} dimensions{off})", e.id(), e.dimensions())
                }),
            "reranker" => lode_models::CrossEncoder::load(&dir, rt, 1).map(|e| e.id().to_owned()).map_err(|e| e.to_string()),
            _ => lode_models::NliModel::load(&dir, rt, 1).map(|e| e.id().to_owned()).map_err(|e| e.to_string()),
        };
        match loaded {
            Ok(id) => {
                // Installed by `lode setup --…` from the hub: where from, pinned to which commit.
                let source = std::fs::read_to_string(dir.join("lode-source.toml")).ok().and_then(|t| t.parse::<toml::Table>().ok());
                let from =
                    source.as_ref().and_then(|t| Some(format!("{}@{}", t.get("repo")?.as_str()?, t.get("commit")?.as_str()?.get(..12)?)));
                let via = from.as_ref().map_or(String::new(), |f| format!(", from {f}"));
                r.line(Level::Ok, label(role), format!("{id} from {}{via}", dir.display()));
                out.push(json!({"role": role, "configured": true, "name": name, "path": dir, "loaded": true, "id": id, "source": from}));
            }
            Err(e) => {
                let fix = match role {
                    "embedder" if name == "all-MiniLM-L6-v2" => "; run `lode setup` to install it".to_owned(),
                    "embedder" => format!("; `lode setup --embedder {name}` installs it if it is in the catalogue (`lode setup --list`)"),
                    "reranker" => format!("; `lode setup --reranker {name}` installs it if it is in the catalogue (`lode setup --list`)"),
                    _ => format!("; `lode setup --nli {name}` installs it if it is in the catalogue (`lode setup --list`)"),
                };
                r.line(Level::Fail, label(role), format!("{name}: {e}{fix}"));
                out.push(json!({"role": role, "configured": true, "name": name, "path": dir, "loaded": false, "error": e}));
            }
        }
    }
    // Every model folder present, configured or not (what `lode setup` installed).
    let installed: Vec<String> = std::fs::read_dir(m.models_dir())
        .map(|rd| {
            let mut v: Vec<String> = rd
                .flatten()
                .filter(|e| e.path().join("lode-model.toml").is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        })
        .unwrap_or_default();
    if !installed.is_empty() {
        r.line(Level::Ok, "models", format!("installed in {}: {}", m.models_dir().display(), installed.join(", ")));
    }
    r.json.insert("models".into(), Value::Array(out));
    r.json.insert("installed_models".into(), json!(installed));
}

fn label(role: &str) -> &'static str {
    match role {
        "embedder" => "embedder",
        "reranker" => "reranker",
        _ => "nli",
    }
}

fn vault(r: &mut Report, root: &Path, config: &Config, db: Option<&Path>) {
    let db = db.map(Path::to_path_buf).unwrap_or_else(|| state_dir(root).join("lode.db"));
    if !root.is_dir() {
        r.line(Level::Fail, "vault", format!("{} is not a folder", root.display()));
        r.json.insert("vault".into(), json!({"path": root, "indexed": false, "error": "not a folder"}));
        return;
    }
    if !db.is_file() {
        r.line(
            Level::Note,
            "vault",
            format!("{} has no index yet; `lode index --vault {}` or opening it in an editor makes one", root.display(), root.display()),
        );
        r.json.insert("vault".into(), json!({"path": root, "db": db, "indexed": false}));
        return;
    }
    if crate::trust::judge(&db, &config.store_options()).is_ok_and(|v| v == crate::trust::Verdict::NotOurs) {
        let e = crate::trust::foreign_error(&db, root);
        r.line(Level::Fail, "vault", e.to_string());
        r.json.insert("vault".into(), json!({"path": root, "db": db, "indexed": false, "foreign": true, "error": e.to_string()}));
        return;
    }
    let opts = lode_store::StoreOptions { read_only: true, ..config.store_options() };
    let store = match lode_store::Store::open(&db, opts) {
        Ok(s) => s,
        Err(e @ lode_store::StoreError::Outdated { .. }) => {
            r.line(Level::Note, "vault", e.to_string());
            r.json.insert("vault".into(), json!({"path": root, "db": db, "indexed": true, "outdated": true}));
            return;
        }
        Err(e) => {
            r.line(Level::Fail, "vault", e.to_string());
            r.json.insert("vault".into(), json!({"path": root, "db": db, "indexed": false, "error": e.to_string()}));
            return;
        }
    };
    let facts = (|| -> Result<Value, lode_store::StoreError> {
        let s = store.stats()?;
        // The model's id (what its vectors are recorded under), from its manifest.
        let model = config.models.embedder_id();
        let fresh = store.vector_freshness(&model)?;
        let vectors_dir = state_dir(root).join("vectors");
        // After `[models] embedder` changed: the model that answers until the new one is done.
        let switching = lode_retrieval::Serving::read(&vectors_dir)
            .filter(|rec| !model.is_empty() && rec.id != model && fresh.with_vectors < fresh.passages);
        let index_opts = lode_store::vault::IndexOptions { max_file_bytes: config.index.max_file_mb * 1_000_000, ..Default::default() };
        let plan = lode_store::vault::plan(&store, root, &index_opts, |_| {})?;
        let (mut new, mut changed, mut renamed, mut deleted) = (0, 0, 0, 0);
        for step in &plan.steps {
            match step {
                lode_store::vault::Step::Save { rel } if plan.same_bytes.contains(rel) => {}
                lode_store::vault::Step::Save { rel } if store.head_of(rel)?.is_some() => changed += 1,
                lode_store::vault::Step::Save { .. } => new += 1,
                lode_store::vault::Step::Rename(_) => renamed += 1,
                lode_store::vault::Step::Delete { .. } => deleted += 1,
            }
        }
        let pending = new + changed + renamed + deleted;
        let pct = if fresh.passages > 0 { 100.0 * fresh.with_vectors as f64 / fresh.passages as f64 } else { 100.0 };
        r.line(Level::Ok, "vault", format!("{}: {} notes, {} passages ({})", root.display(), s.notes, s.passages, db.display()));
        if model.trim().is_empty() {
            r.line(Level::Note, "vectors", "none (no embedder configured)");
        } else {
            r.line(Level::Ok, "vectors", format!("{}/{} passages ({pct:.0}%, {model})", fresh.with_vectors, fresh.passages));
            if let Some(rec) = &switching {
                r.line(
                    Level::Note,
                    "vectors",
                    format!("switching from {} to {model}: {pct:.0}% re-embedded; the language server answers with {} until then (`lode index` finishes it)", rec.id, rec.id),
                );
            }
            let queued = store.vector_deletions(&model)?.len() as i64;
            if let Some((broken, msg)) = crate::models::check_vector_table(&state_dir(root).join("vectors"), &model, fresh.windows, queued)
            {
                r.line(if broken { Level::Fail } else { Level::Note }, "vectors", msg);
            }
        }
        if pending == 0 {
            r.line(Level::Ok, "scan", "the index matches the folder");
        } else {
            r.line(Level::Note, "scan", format!("{new} new, {changed} changed, {renamed} renamed, {deleted} deleted on disk since the last scan; `lode index` or the language server picks them up"));
        }
        Ok(json!({
            "path": root, "db": db, "indexed": true, "notes": s.notes, "passages": s.passages,
            "vectors": {"model": model, "with_vectors": fresh.with_vectors, "passages": fresh.passages, "switching_from": switching.map(|r| r.id)},
            "pending": {"new": new, "changed": changed, "renamed": renamed, "deleted": deleted, "skipped": plan.report.skipped.len()},
        }))
    })();
    match facts {
        Ok(v) => {
            r.json.insert("vault".into(), v);
            egress(r, &store, config, root);
        }
        Err(e) => {
            r.line(Level::Fail, "vault", e.to_string());
            r.json.insert("vault".into(), json!({"path": root, "db": db, "indexed": true, "error": e.to_string()}));
        }
    }
}

/// Near-miss spellings listed one per line, at most this many (then a count).
const NEAR_MISS_LINES: usize = 40;

fn egress(r: &mut Report, store: &lode_store::Store, config: &Config, root: &Path) {
    let rules = match config.egress_rules() {
        Ok(rules) => rules,
        Err(e) => {
            r.line(Level::Fail, "egress", format!("{e:#}"));
            r.json.insert("egress".into(), json!({"error": format!("{e:#}")}));
            return;
        }
    };
    let notes = store.notes().unwrap_or_default();
    let paths: Vec<&str> = notes.iter().map(|n| n.path.as_str()).collect();
    let per_pattern = rules.matches_per_pattern(&paths);
    // Each note as it is on disk now: its marks (every spelling, near-misses listed), its path
    // rules, and the rules of a nested vault it sits in.
    let mut nested = lode_answer::egress::NestedRules::new(root);
    let (mut withheld, mut by_marks, mut by_nested) = (0, 0, 0);
    let mut near: Vec<Value> = Vec::new();
    for n in notes.iter().filter(|n| !n.path.contains("://")) {
        let text = lode_store::vault::read_note_file(root, &n.path, lode_store::vault::DEFAULT_MAX_FILE_BYTES)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let marks = lode_answer::egress::marks::read(&text);
        let meta = store.note_meta(n.id).unwrap_or_default();
        let in_nested = nested.withheld(&n.path);
        withheld += usize::from(marks.local.is_some() || in_nested.is_some() || rules.withheld_because(&n.path, &meta).is_some());
        by_marks += usize::from(marks.local.is_some());
        by_nested += usize::from(in_nested.is_some());
        for m in &marks.near_misses {
            let line = text[..m.range.start.min(text.len())].matches('\n').count() + 1;
            near.push(json!({"path": n.path, "line": line, "message": m.message, "withholds": m.withholds}));
        }
    }
    for (p, n) in &per_pattern {
        let level = if *n == 0 { Level::Note } else { Level::Ok };
        r.line(level, "egress", format!("no_egress {p:?} withholds {n} note(s){}", if *n == 0 { " (a typo?)" } else { "" }));
    }
    for (folder, state) in nested.found() {
        match state {
            Ok(k) => r.line(Level::Ok, "egress", format!("nested vault {folder}/ keeps its own rules ({k} no_egress pattern(s))")),
            Err(e) => r.line(
                Level::Fail,
                "egress",
                format!("nested vault {folder}/: its .lode/config.toml cannot be read ({e}); its notes are withheld"),
            ),
        }
    }
    for v in near.iter().take(NEAR_MISS_LINES) {
        r.line(
            Level::Note,
            "egress",
            format!("{}:{}: {}", v["path"].as_str().unwrap_or_default(), v["line"], v["message"].as_str().unwrap_or_default()),
        );
    }
    if near.len() > NEAR_MISS_LINES {
        r.line(
            Level::Note,
            "egress",
            format!("… and {} more near-miss spellings (`lode doctor --json` lists them all)", near.len() - NEAR_MISS_LINES),
        );
    }
    r.line(
        Level::Ok,
        "egress",
        format!("{withheld} of {} notes never go to a remote model ({by_marks} by their own frontmatter or tags, {by_nested} by a nested vault's rules)", notes.len()),
    );
    r.json.insert(
        "egress".into(),
        json!({
            "patterns": per_pattern.iter().map(|(p, n)| json!({"pattern": p, "withholds": n})).collect::<Vec<_>>(),
            "frontmatter": by_marks,
            "nested": by_nested,
            "withheld": withheld,
            "near_misses": near,
        }),
    );
}

/// The team's shared tier: reachable, its newest publish, and whether the dense leg can run on it
/// with this vault's embedder.
fn shared(r: &mut Report, config: &Config) {
    let Some(s) = &config.shared else { return };
    let cfg = s.config();
    match lode_retrieval::shared::SharedIndex::open(&cfg) {
        Ok(ix) => {
            let p = ix.publish();
            let age_h = (lode_store::now_ms() - p.published_at) as f64 / 3_600_000.0;
            let embedder = config.models.embedder.trim();
            let vectors = if p.embedder.is_empty() {
                "full text only (published without vectors)".to_owned()
            } else if p.embedder == embedder {
                format!("vectors of {} (this vault's embedder: both legs run)", p.embedder)
            } else {
                format!("vectors of {}, this vault embeds with {:?}: its dense leg is skipped", p.embedder, embedder)
            };
            r.line(
                Level::Ok,
                "shared",
                format!("{}: publish {} ({:.1} h ago), {} notes, {} passages; {vectors}", cfg.uri, p.seq, age_h, p.notes, p.passages),
            );
            r.json.insert("shared".into(), json!({"uri": cfg.uri, "reachable": true, "publish": p}));
        }
        Err(e) => {
            // Questions still work: the vault's own notes answer. The tier is what is broken.
            r.line(Level::Fail, "shared", format!("{}: {}; questions are answered from this vault alone", cfg.uri, e.detail));
            r.json.insert("shared".into(), json!({"uri": cfg.uri, "reachable": false, "error": e.detail}));
        }
    }
}

fn llm(r: &mut Report, config: &Config) {
    let Some(cfg) = &config.llm else {
        r.line(Level::Fail, "llm", "no [llm] section in the settings");
        r.json.insert("llm".into(), json!({"configured": false}));
        return;
    };
    if let Err(e) = cfg.validate() {
        r.line(Level::Fail, "llm", e.to_string());
        r.json.insert("llm".into(), json!({"configured": true, "endpoint": cfg.endpoint, "reachable": false, "error": e.to_string()}));
        return;
    }
    let remote = cfg.is_remote();
    match cfg.probe() {
        Ok(detail) => {
            r.line(
                Level::Ok,
                "llm",
                format!("{} answers ({detail}){}", cfg.endpoint, if remote { "; remote: egress rules apply" } else { "" }),
            );
            r.json.insert("llm".into(), json!({"configured": true, "endpoint": cfg.endpoint, "model": cfg.model, "remote": remote, "reachable": true, "detail": detail}));
        }
        Err(e) => {
            r.line(Level::Fail, "llm", e.to_string());
            r.json.insert("llm".into(), json!({"configured": true, "endpoint": cfg.endpoint, "model": cfg.model, "remote": remote, "reachable": false, "error": e.to_string()}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_versions_come_from_the_file_name() {
        assert_eq!(ort_version(Path::new("/x/libonnxruntime.so.1.32.0")).as_deref(), Some("1.32.0"));
        assert_eq!(ort_version(Path::new("/x/libonnxruntime.1.20.1.dylib")).as_deref(), Some("1.20.1"));
        assert_eq!(ort_version(Path::new("/x/libonnxruntime.so")), None);
        assert_eq!(ort_version(Path::new("/x/other.so.1")), None);
    }
}
