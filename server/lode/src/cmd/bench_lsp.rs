//! `lode bench lsp`: the language server's figures on a BEIR corpus written out as a vault —
//! initialize (process start included), cold scan, restart to searchable, didSave → committed,
//! hover on a citation, RSS after the scan (no models).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use lode_lsp::stdio_client::StdioClient;
use serde_json::{json, Value};

/// The stdio client, with answers the bench can wait up to 10 minutes for.
fn spawn(exe: &Path, vault: &Path) -> Result<StdioClient> {
    let mut c = StdioClient::spawn(exe, [OsStr::new("serve"), OsStr::new("--vault"), vault.as_os_str()])?;
    c.timeout = Duration::from_secs(600);
    Ok(c)
}

fn uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

fn init(c: &mut StdioClient, vault: &Path) -> Result<()> {
    c.request("initialize", json!({"processId": null, "rootUri": uri(vault), "capabilities": {}}))?;
    Ok(c.notify("initialized", json!({}))?)
}

pub fn run(exe: &Path, vault: &Path, saves: usize) -> Result<Value> {
    // No models: the RSS target is for the server alone.
    let state = vault.join(".lode");
    if state.exists() {
        std::fs::remove_dir_all(&state)?;
    }
    std::fs::create_dir_all(&state)?;
    std::fs::write(state.join("config.toml"), "[models]\nembedder = \"\"\n")?;

    // Cold start: initialize answered at once, then the scan.
    let t = Instant::now();
    let mut c = spawn(exe, vault)?;
    c.request("initialize", json!({"processId": null, "rootUri": uri(vault), "capabilities": {}}))?;
    let initialize_ms = t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    c.notify("initialized", json!({}))?;
    c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end")?;
    let cold_scan_s = t.elapsed().as_secs_f64();
    let rss_after_scan = c.rss_mib();

    // didSave → committed, observed by the next request (which waits for the save).
    let note = vault.join("bench-lsp-note.md");
    let body: String = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(180);
    let mut save_ms = Vec::new();
    for i in 0..saves {
        let text = format!("# Bench {i}\n\n{body}\n\nEdit number {i}.\n");
        let t = Instant::now();
        c.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&note)}, "text": text}))?;
        c.request("textDocument/hover", json!({"textDocument": {"uri": uri(&note)}, "position": {"line": 0, "character": 0}}))?;
        save_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }

    // Hover on a citation.
    let a = c.request("lode/ask", json!({"question": "Edit number"}))?;
    let cit = &a["result"]["claims"][0]["citations"][0];
    let (vid, s, e) = (cit["version_id"].as_str().unwrap_or_default(), cit["start"].as_u64().unwrap_or(0), cit["end"].as_u64().unwrap_or(0));
    let doc = vault.join("bench-lsp-citing.md");
    let text = format!("- claim [x.md:1](x.md#L1 \"lode {vid}:{s}-{e}\")\n");
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri(&doc), "languageId": "markdown", "version": 1, "text": text}}))?;
    let mut hover_ms = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let h = c.request("textDocument/hover", json!({"textDocument": {"uri": uri(&doc)}, "position": {"line": 0, "character": 10}}))?;
        hover_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if h["result"].is_null() {
            return Err(anyhow!("hover found no citation: {h}"));
        }
    }
    c.stop()?;

    // Restart over the indexed vault: how soon does a question find its passage?
    let t = Instant::now();
    let mut c = spawn(exe, vault)?;
    init(&mut c, vault)?;
    let restart_searchable_ms = loop {
        let a = c.request("lode/ask", json!({"question": "Edit number"}))?;
        if a["result"]["claims"].as_array().is_some_and(|x| !x.is_empty()) {
            break t.elapsed().as_secs_f64() * 1000.0;
        }
    };
    c.stop()?;
    let _ = std::fs::remove_file(&note);
    std::fs::remove_file(state.join("config.toml"))?;

    Ok(json!({
        "initialize_ms_with_process_start": initialize_ms,
        "cold_scan_s": cold_scan_s,
        "rss_mib_after_scan_no_models": rss_after_scan,
        "did_save_10kb_committed_ms": super::bench::stats(save_ms),
        "hover_citation_ms": super::bench::stats(hover_ms),
        "restart_to_searchable_ms": restart_searchable_ms,
    }))
}

pub fn vault_of(work: &Path) -> PathBuf {
    work.join("vault")
}
