//! `lode-bench lsp`: the language server's figures on a vault (a BEIR corpus written out, or a
//! generated one of `--notes N`) — initialize (process start included), cold scan and its peak
//! RSS, didSave → committed, hover on a citation, `workspace/symbol` per keystroke, diagnostics
//! publishing, restart → searchable and the restart's scan (unchanged files skipped). No models.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use lode_testing::stdio_client::StdioClient;
use serde_json::{json, Value};

/// Pause between an edit and its save in the paced run: five saves a second, faster than
/// anyone saves by hand (VS Code's autosave waits 1 s after the last keystroke).
const SAVE_GAP: Duration = Duration::from_millis(200);

/// The stdio client, with answers the bench can wait up to 10 minutes for. The server's log
/// goes to the bench's stderr when `LODE_LOG` asks for one (e.g. `LODE_LOG=lode_lsp=debug,lode_engine=debug`
/// times every request and writer job).
pub(super) fn spawn(exe: &Path, vault: &Path) -> Result<StdioClient> {
    let log = if std::env::var_os("LODE_LOG").is_some() { std::process::Stdio::inherit() } else { std::process::Stdio::null() };
    let args = [OsStr::new("serve"), OsStr::new("--vault"), vault.as_os_str()];
    let mut c = StdioClient::spawn_with(exe, args, std::iter::empty::<(String, String)>(), log)?;
    c.timeout = Duration::from_secs(600);
    Ok(c)
}

/// The hypervisor's steal counter (`/proc/stat`, summed over all CPUs, so a stall of the other
/// CPU counts too; in ticks of 10 ms, so short stalls may not; 0 where the kernel does not
/// report it). On a VM the host now and then takes a CPU away for tens of milliseconds (a busy
/// loop here saw a 100 ms gap): a sample such a stall lands in measures the host, not lode.
fn steal_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines().next().and_then(|l| l.split_whitespace().nth(8)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Latency samples in ms, each marked when the host stole CPU while it ran.
#[derive(Default)]
struct Samples(Vec<(f64, bool)>);

impl Samples {
    /// Times `f`, and returns what it returned with its time in ms.
    fn measure<T>(&mut self, f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
        let before = steal_ticks();
        let t = Instant::now();
        let out = f()?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        self.0.push((ms, steal_ticks() != before));
        Ok((out, ms))
    }

    /// The usual figures over every sample, plus how many the host stalled and the p99 of the
    /// others (reported beside the plain p99, never instead of it).
    fn figures(self) -> Value {
        let stalled = self.0.iter().filter(|s| s.1).count();
        let clean: Vec<f64> = self.0.iter().filter(|s| !s.1).map(|s| s.0).collect();
        let mut v = crate::bench::stats(self.0.iter().map(|s| s.0).collect());
        v["host_stalled"] = json!(stalled);
        v["p99_without_host_stalls"] = crate::bench::stats(clean)["p99"].clone();
        v
    }
}

/// The ten slowest `workspace/symbol` requests: what the tail is made of.
fn slowest(mut queries: Vec<(f64, String, usize)>) -> Value {
    queries.sort_by(|a, b| b.0.total_cmp(&a.0));
    queries.iter().take(10).map(|(ms, q, n)| json!({"query": q, "ms": (ms * 100.0).round() / 100.0, "symbols": n})).collect()
}

fn uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

pub(super) fn init(c: &mut StdioClient, vault: &Path) -> Result<()> {
    c.request("initialize", json!({"processId": null, "rootUri": uri(vault), "capabilities": {}}))?;
    Ok(c.notify("initialized", json!({}))?)
}

/// What to measure beyond the basics.
pub struct Options {
    pub saves: usize,
    /// `workspace/symbol` queries: each heading typed one keystroke at a time.
    pub symbol_headings: Vec<String>,
    /// Navigation: vault-relative paths of notes to link to, complete and find references of.
    pub nav_notes: Vec<String>,
    /// Keep the index a previous run left (its "cold scan" is then a restart's scan): for
    /// repeated measurements of the other figures.
    pub keep_index: bool,
}

pub fn run(exe: &Path, vault: &Path, opts: &Options) -> Result<Value> {
    // No models: the RSS target is for the server alone.
    let state = vault.join(".lode");
    if state.exists() && !opts.keep_index {
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
    // A cold scan of a large vault takes minutes; requests still answer within the usual limit.
    c.timeout = Duration::from_secs(4 * 3600);
    let end = c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end")?;
    c.timeout = Duration::from_secs(600);
    let cold_scan_s = t.elapsed().as_secs_f64();
    eprintln!("cold scan: {cold_scan_s:.1} s ({})", end["params"]["value"]["message"]);
    let peak_rss_scan = c.peak_rss_mib();
    let rss_after_scan = c.rss_mib();
    let status = c.request("lode/status", json!(null))?;

    // didSave → committed, observed by the next request (which waits for the save): a hover
    // in a document that is not open, so it costs nothing of its own once the save is in.
    let probe = vault.join("bench-lsp-probe.md");
    let observe = |c: &mut StdioClient| -> Result<()> {
        c.request("textDocument/hover", json!({"textDocument": {"uri": uri(&probe)}, "position": {"line": 0, "character": 0}}))?;
        Ok(())
    };
    let body: String = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(180);
    let text_of = |i: usize| format!("# Bench {i}\n\n{body}\n\nEdit number {i}.\n");
    // 1. A buffer with no file (the text comes with didSave), saved again as soon as the last
    //    save is seen: the figure of earlier runs.
    let buffer = vault.join("bench-lsp-buffer.md");
    let _ = std::fs::remove_file(&buffer);
    let steal_at_start = steal_ticks();
    let mut save_ms = Samples::default();
    for i in 0..opts.saves {
        save_ms.measure(|| {
            c.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&buffer)}, "text": text_of(i)}))?;
            observe(&mut c)
        })?;
    }
    // 2. As an editor saves an open note: the buffer changes (didChange), the editor writes the
    //    file and sends didSave (the file event follows). First as a burst: the writer never
    //    idles, so saves pay the log's checkpoints, and no buffer is chunked ahead. Then as
    //    typing: an edit, a pause of SAVE_GAP, its save.
    let note = vault.join("bench-lsp-note.md");
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri(&note), "languageId": "markdown", "version": 0, "text": ""}}))?;
    let editor_save = |c: &mut StdioClient, i: usize, pause: Duration, samples: &mut Samples| -> Result<()> {
        let text = text_of(i);
        c.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri(&note), "version": i + 1}, "contentChanges": [{"text": &text}]}),
        )?;
        std::thread::sleep(pause);
        std::fs::write(&note, &text)?;
        samples.measure(|| {
            c.notify("textDocument/didSave", json!({"textDocument": {"uri": uri(&note)}}))?;
            observe(c)
        })?;
        Ok(())
    };
    let mut editor_burst_ms = Samples::default();
    for i in 0..opts.saves {
        editor_save(&mut c, i, Duration::ZERO, &mut editor_burst_ms)?;
    }
    let mut editor_paced_ms = Samples::default();
    for i in opts.saves..2 * opts.saves {
        editor_save(&mut c, i, SAVE_GAP, &mut editor_paced_ms)?;
    }
    // …and findable: the last edit answers a question.
    let a = c.request("lode/ask", json!({"question": "Edit number"}))?;
    let last = format!("Edit number {}", (2 * opts.saves).saturating_sub(1));
    if !a["result"]["claims"].to_string().contains(&last) {
        return Err(anyhow!("the last save is not findable: {a}"));
    }

    // Hover on a citation.
    let cit = &a["result"]["claims"][0]["citations"][0];
    let (vid, s, e) =
        (cit["version_id"].as_str().unwrap_or_default(), cit["start"].as_u64().unwrap_or(0), cit["end"].as_u64().unwrap_or(0));
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

    // Diagnostics: a note citing 50 passages, opened → its diagnostics published.
    let many: String = (0..50).map(|i| format!("- claim {i} [x.md:1](x.md#L1 \"lode {vid}:{s}-{e}\")\n")).collect();
    let diag_doc = vault.join("bench-lsp-diagnostics.md");
    let mut diag_ms = Vec::new();
    for round in 0..40 {
        let t = Instant::now();
        c.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri(&diag_doc), "languageId": "markdown", "version": round, "text": many}}),
        )?;
        c.wait_for(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri(&diag_doc) && m["params"]["version"] == round
        })?;
        diag_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        c.notify("textDocument/didClose", json!({"textDocument": {"uri": uri(&diag_doc)}}))?;
    }

    // workspace/symbol, one request per keystroke, twice over: the first pass meets the page
    // cache as the session left it (at a million notes the store is larger than memory, and a
    // keystroke's answer is a few hundred scattered rows), the second meets it warm — as typing
    // a name again, or narrowing one, does.
    let mut symbol_passes = Vec::new();
    let mut symbol_hits = 0usize;
    for pass in 0..2 {
        let mut ms_of = Samples::default();
        let mut queries: Vec<(f64, String, usize)> = Vec::new();
        for h in &opts.symbol_headings {
            let chars: Vec<char> = h.chars().collect();
            for n in 1..=chars.len().min(16) {
                let q: String = chars[..n].iter().collect();
                let (r, ms) = ms_of.measure(|| Ok(c.request("workspace/symbol", json!({"query": &q}))?))?;
                queries.push((ms, q, r["result"].as_array().map_or(0, Vec::len)));
                if pass == 0 && n == chars.len().min(16) && r["result"].as_array().is_some_and(|x| !x.is_empty()) {
                    symbol_hits += 1;
                }
            }
        }
        symbol_passes.push((ms_of, queries));
    }
    let (symbol_warm_ms, symbol_warm_queries) = symbol_passes.pop().expect("two passes");
    let (symbol_ms, symbol_queries) = symbol_passes.pop().expect("two passes");
    let steal_ms = steal_ticks().saturating_sub(steal_at_start) * 10;
    let nav = if opts.nav_notes.is_empty() { Value::Null } else { nav_figures(&mut c, vault, &opts.nav_notes)? };
    c.seen.clear();
    c.stop()?;

    // Restart over the indexed vault: how soon does a question find its passage, and how long
    // the restart's scan takes when nothing changed (files skipped by size + mtime).
    let t = Instant::now();
    let mut c = spawn(exe, vault)?;
    init(&mut c, vault)?;
    let restart_searchable_ms = loop {
        let a = c.request("lode/ask", json!({"question": "Edit number"}))?;
        if a["result"]["claims"].as_array().is_some_and(|x| !x.is_empty()) {
            break t.elapsed().as_secs_f64() * 1000.0;
        }
    };
    let restart_end = c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end")?;
    let restart_scan_s = t.elapsed().as_secs_f64();
    let restart_message = end_message(&restart_end);
    let rss_after_restart = c.rss_mib();
    let peak_rss_restart = c.peak_rss_mib();
    c.stop()?;
    let _ = std::fs::remove_file(&note);
    std::fs::remove_file(state.join("config.toml"))?;

    Ok(json!({
        "notes": status["result"]["notes"], "passages": status["result"]["passages"],
        "initialize_ms_with_process_start": initialize_ms,
        "cold_scan_s": cold_scan_s,
        "cold_scan_message": end_message(&end),
        "peak_rss_mib_cold_scan": peak_rss_scan,
        "rss_mib_after_scan_no_models": rss_after_scan,
        "did_save_10kb_committed_ms": save_ms.figures(),
        "did_save_10kb_open_note_burst_ms": editor_burst_ms.figures(),
        "did_save_10kb_open_note_every_200ms_ms": editor_paced_ms.figures(),
        "hover_citation_ms": crate::bench::stats(hover_ms),
        "diagnostics_50_citations_open_to_publish_ms": crate::bench::stats(diag_ms),
        "workspace_symbol_per_keystroke_ms": symbol_ms.figures(),
        "host_cpu_steal_ms_saves_to_symbols": steal_ms,
        "workspace_symbol_slowest": slowest(symbol_queries),
        "workspace_symbol_warm_per_keystroke_ms": symbol_warm_ms.figures(),
        "workspace_symbol_warm_slowest": slowest(symbol_warm_queries),
        "workspace_symbol_full_headings_found": format!("{symbol_hits}/{}", opts.symbol_headings.len()),
        "restart_to_searchable_ms": restart_searchable_ms,
        "restart_scan_unchanged_s": restart_scan_s,
        "restart_scan_message": restart_message,
        "rss_mib_after_restart_scan": rss_after_restart,
        "peak_rss_mib_restart": peak_rss_restart,
        "navigation": nav,
        "db_mib": std::fs::metadata(state.join("lode.db")).map(|m| m.len() as f64 / 1048576.0).ok(),
    }))
}

/// Definition, references, completion per keystroke and heading rename, over `notes`.
fn nav_figures(c: &mut StdioClient, vault: &Path, notes: &[String]) -> Result<Value> {
    let stem = |p: &str| p.rsplit('/').next().unwrap_or(p).trim_end_matches(".md").to_owned();
    let doc = vault.join("bench-nav.md");
    let text: String = notes.iter().map(|n| format!("- see [[{}]] and [it](/{n})\n", stem(n))).collect();
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri(&doc), "languageId": "markdown", "version": 1, "text": text}}))?;
    let (mut def_ms, mut resolved) = (Vec::new(), 0);
    for (line, _) in notes.iter().enumerate() {
        for character in [10, 30] {
            let t = Instant::now();
            let r = c.request(
                "textDocument/definition",
                json!({"textDocument": {"uri": uri(&doc)}, "position": {"line": line, "character": character}}),
            )?;
            def_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            resolved += usize::from(!r["result"].is_null());
        }
    }
    let (mut ref_ms, mut refs) = (Vec::new(), 0);
    for n in notes {
        let body = std::fs::read_to_string(vault.join(n))?;
        c.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri(&vault.join(n)), "languageId": "markdown", "version": 1, "text": body}}),
        )?;
        let t = Instant::now();
        let r = c.request("textDocument/references", json!({"textDocument": {"uri": uri(&vault.join(n))}, "position": {"line": 0, "character": 0}, "context": {"includeDeclaration": false}}))?;
        ref_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        refs += r["result"].as_array().map_or(0, |a| a.len());
        c.notify("textDocument/didClose", json!({"textDocument": {"uri": uri(&vault.join(n))}}))?;
    }
    // Completion: `[[` and the note's name typed one keystroke at a time.
    let scratch = vault.join("bench-complete.md");
    let mut complete_ms = Vec::new();
    let mut found = 0;
    for (v, n) in notes.iter().enumerate() {
        let name = stem(n);
        for k in 0..=name.chars().count().min(10) {
            let typed: String = format!("[[{}", name.chars().take(k).collect::<String>());
            c.notify(
                "textDocument/didOpen",
                json!({"textDocument": {"uri": uri(&scratch), "languageId": "markdown", "version": v * 20 + k, "text": typed}}),
            )?;
            let t = Instant::now();
            let r = c.request(
                "textDocument/completion",
                json!({"textDocument": {"uri": uri(&scratch)}, "position": {"line": 0, "character": typed.chars().count()}}),
            )?;
            complete_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            if k == name.chars().count().min(10) && r["result"]["items"].to_string().contains(&name) {
                found += 1;
            }
            c.notify("textDocument/didClose", json!({"textDocument": {"uri": uri(&scratch)}}))?;
        }
    }
    // Heading rename: the edit for every link to a section (computed, not applied).
    let mut rename_ms = Vec::new();
    for n in notes.iter().take(20) {
        let body = std::fs::read_to_string(vault.join(n))?;
        let Some(line) = body.lines().position(|l| l.starts_with("## ")) else { continue };
        c.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri(&vault.join(n)), "languageId": "markdown", "version": 1, "text": body}}),
        )?;
        let t = Instant::now();
        let r = c.request(
            "textDocument/rename",
            json!({"textDocument": {"uri": uri(&vault.join(n))}, "position": {"line": line, "character": 4}, "newName": "Renamed section"}),
        )?;
        rename_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if r["result"].is_null() {
            return Err(anyhow!("rename gave no edit: {r}"));
        }
        c.notify("textDocument/didClose", json!({"textDocument": {"uri": uri(&vault.join(n))}}))?;
    }
    Ok(json!({
        "definition_ms": crate::bench::stats(def_ms), "definitions_resolved": format!("{resolved}/{}", notes.len() * 2),
        "references_ms": crate::bench::stats(ref_ms), "references_found": refs,
        "completion_per_keystroke_ms": crate::bench::stats(complete_ms), "completion_found": format!("{found}/{}", notes.len()),
        "rename_heading_ms": crate::bench::stats(rename_ms),
    }))
}

fn end_message(end: &Value) -> Value {
    end["params"]["value"]["message"].clone()
}

/// `n` markdown files of the vault (every k-th, sorted), vault-relative.
pub fn some_notes(vault: &Path, n: usize) -> Result<Vec<String>> {
    let (files, _) = lode_store::vault::walk(vault);
    let step = (files.len() / n.max(1)).max(1);
    Ok(files.iter().step_by(step).take(n).filter_map(|f| lode_store::vault::relative_path(vault, f)).collect())
}

pub fn vault_of(work: &Path) -> PathBuf {
    work.join("vault")
}
