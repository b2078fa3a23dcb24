//! `lode-bench memory`: the language server's resident memory with the embedder, read from
//! `/proc/<pid>/status` of the real `lode serve` over stdio — peak while it embeds a generated
//! vault, after that pass, serving questions after a restart (embedder loaded), and the same
//! server with no embedder configured.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use lode_testing::stdio_client::StdioClient;
use serde_json::{json, Value};

#[derive(Args)]
pub struct MemoryArgs {
    /// Generated notes in the vault (about six passages each)
    #[arg(long, default_value_t = 1500)]
    pub notes: usize,
    #[arg(long, value_name = "DIR")]
    pub work: Option<std::path::PathBuf>,
    /// Questions asked of the restarted server before its RSS is read (LanceDB's caches fill
    /// over the first few dozen searches, then stay)
    #[arg(long, default_value_t = 40)]
    pub questions: usize,
    /// Keep the vault's index and vectors from an earlier run of the same size: the embedding
    /// pass is skipped (its figures are then null), the serving figures are measured as usual
    #[arg(long)]
    pub keep_index: bool,
}

/// `lode serve` on the vault, initialized, with answers waited for up to an hour.
fn spawn(exe: &Path, vault: &Path) -> Result<StdioClient> {
    let mut c = crate::bench_lsp::spawn(exe, vault)?;
    c.timeout = Duration::from_secs(3600);
    crate::bench_lsp::init(&mut c, vault)?;
    Ok(c)
}

/// Polls `lode/status` until `done` holds of it (or, when the embedder is `needed`, the server
/// says dense retrieval is off).
fn status_until(c: &mut StdioClient, what: &str, needed: bool, done: impl Fn(&Value) -> bool) -> Result<Value> {
    let t = Instant::now();
    loop {
        let st = c.request("lode/status", json!(null))?["result"].clone();
        if let Some(off) = st["dense"].as_str().filter(|s| needed && s.starts_with("off")) {
            bail!("dense retrieval is {off}: this bench needs the embedder (run `lode setup`)");
        }
        if done(&st) {
            return Ok(st);
        }
        if t.elapsed() > Duration::from_secs(4 * 3600) {
            bail!("waited 4 hours for {what}: {st}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The largest parts of a process's resident memory (MiB, one decimal), the rest summed.
fn parts(by: &[(String, f64)]) -> Value {
    let mut m = serde_json::Map::new();
    for (name, mib) in by.iter().take(8) {
        m.insert(name.clone(), json!((mib * 10.0).round() / 10.0));
    }
    let rest: f64 = by.iter().skip(8).map(|p| p.1).sum();
    m.insert("the rest".into(), json!((rest * 10.0).round() / 10.0));
    Value::Object(m)
}

fn round(mib: Option<f64>) -> Value {
    mib.map_or(Value::Null, |m| json!(m.round()))
}

pub fn run(a: MemoryArgs) -> Result<std::process::ExitCode> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build (its code pages add ~100 MB to every figure); build with --release");
    }
    let exe = crate::lode_exe()?;
    let work = a.work.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("lode-bench-memory-{}", a.notes)));
    let vault = crate::bench_lsp::vault_of(&work);
    let mut progress = lode::progress::Progress::new(true);
    crate::synth::write_vault(&vault, a.notes, 1, |d, t| progress.update("writing notes", d, t, ""))?;
    drop(progress);
    let vault = vault.canonicalize()?;
    let state = vault.join(".lode");
    let kept = a.keep_index && state.join("lode.db").exists();
    if state.exists() && !kept {
        std::fs::remove_dir_all(&state).with_context(|| format!("removing {}", state.display()))?;
    }
    std::fs::create_dir_all(&state)?;

    // 1. From nothing: the scan, then every passage embedded (with --keep-index, only the
    //    rest of a pass an earlier run left unfinished).
    let t = Instant::now();
    let mut c = spawn(&exe, &vault)?;
    let st = status_until(&mut c, "every passage to have a vector", true, |st| {
        st["scanning"] == false && st["dense"]["with_vectors"].as_u64().is_some_and(|n| n > 0 && Some(n) == st["passages"].as_u64())
    })?;
    let embed_s = t.elapsed().as_secs_f64();
    // The pass's end (scratch handed back, malloc_trim) follows its last vector closely.
    std::thread::sleep(Duration::from_secs(2));
    let (peak_embedding, after_embedding) = if kept { (None, None) } else { (c.peak_rss_mib(), c.rss_mib()) };
    eprintln!("embedded {} passages in {embed_s:.0} s; peak {peak_embedding:?} MiB", st["passages"]);
    c.stop()?;

    // 2. Restarted: questions, each embedded by the loaded model.
    let questions: Vec<String> = (0..a.questions)
        .map(|i| {
            [
                "What did the team agree about the budget review?",
                "Which certificate rotation is next?",
                "When is the database migration planned?",
                "What is the latency threshold for the alert?",
            ][i % 4]
                .to_owned()
        })
        .collect();
    let mut c = spawn(&exe, &vault)?;
    status_until(&mut c, "the restart's scan", true, |st| st["scanning"] == false && st["dense"]["model"].is_string())?;
    let idle_restarted = c.rss_mib();
    let restarted_parts = c.rss_by_mapping();
    let mut ms = Vec::new();
    for (i, q) in questions.iter().enumerate() {
        let t = Instant::now();
        let r = c.request("lode/ask", json!({"question": q}))?;
        if r.get("error").is_some() {
            bail!("lode/ask failed: {r}");
        }
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if i == 0 && r["result"]["notice"].as_str().is_some_and(|n| n.contains("lexical")) {
            bail!("the restarted server answered lexically: {r}");
        }
    }
    let serving = c.rss_mib();
    let serving_peak = c.peak_rss_mib();
    let serving_parts = c.rss_by_mapping();
    c.stop()?;

    // 3. The same server with no embedder.
    std::fs::write(state.join("config.toml"), "[models]\nembedder = \"\"\n")?;
    let mut c = spawn(&exe, &vault)?;
    status_until(&mut c, "the scan without an embedder", false, |st| st["scanning"] == false)?;
    for q in &questions {
        c.request("lode/ask", json!({"question": q}))?;
    }
    let no_model = c.rss_mib();
    let no_model_parts = c.rss_by_mapping();
    c.stop()?;
    std::fs::remove_file(state.join("config.toml"))?;

    let v = json!({
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "notes": a.notes,
        "passages": st["passages"],
        "embedding": {"seconds": (embed_s * 10.0).round() / 10.0, "peak_rss_mib": round(peak_embedding), "rss_after_mib": round(after_embedding)},
        "serving": {
            "rss_restarted_mib": round(idle_restarted),
            "restarted_by_mapping": parts(&restarted_parts),
            "rss_after_questions_mib": round(serving),
            "peak_rss_mib": round(serving_peak),
            "after_questions_by_mapping": parts(&serving_parts),
            "questions": a.questions,
            "ask_ms": crate::bench::stats(ms),
        },
        "no_embedder": {"rss_after_questions_mib": round(no_model), "by_mapping": parts(&no_model_parts)},
    });
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(std::process::ExitCode::SUCCESS)
}
