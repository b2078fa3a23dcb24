//! `lode-bench externals`: snapshot ingest throughput — `lode externals refresh` of 100 KB HTML
//! pages served from loopback (fetch, HTML → markdown, chunk, store), in pages/s — and the cost
//! of snapshot diagnostics on a vault with 10,000 external links (a save → that note's
//! diagnostics published, through the real `lode serve`).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use lode_testing::stdio_client::StdioClient;
use serde_json::json;

#[derive(Args)]
pub struct ExternalsArgs {
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// 100 KB pages mirrored for the ingest figure
    #[arg(long, default_value_t = 200)]
    pub pages: usize,
    /// External links in the vault (each a distinct small page)
    #[arg(long, default_value_t = 10_000)]
    pub links: usize,
    /// Links per note
    #[arg(long, default_value_t = 100)]
    pub per_note: usize,
    /// Saves timed (save → diagnostics published)
    #[arg(long, default_value_t = 60)]
    pub saves: usize,
}

/// A page of about 100 KB: headings, paragraphs, a list and a table, as documentation has.
fn big_page(i: usize) -> String {
    let mut s = format!("<!DOCTYPE html><html><head><title>Page {i}</title><script>var x={i};</script></head><body><nav><a href=\"/\">Home</a></nav><main><h1>Reference page {i}</h1>");
    let mut k = 0;
    while s.len() < 100_000 {
        s.push_str(&format!(
            "<h2>Section {k}</h2><p>The service number {i} keeps {k} replicas in region {r} and rotates its keys every {d} days; \
             operators page the on-call engineer when latency exceeds {l} ms for five minutes.</p>\
             <ul><li>Limit {k}: {a} requests per second</li><li>Burst {k}: {b} requests</li></ul>\
             <table><tr><th>Setting</th><th>Value</th></tr><tr><td>pool_{k}</td><td>{a}</td></tr></table>",
            r = k % 7,
            d = 30 + k % 60,
            l = 100 + k,
            a = 1000 + k,
            b = 5000 + k
        ));
        k += 1;
    }
    s.push_str("</main><footer>© Example</footer></body></html>");
    s
}

fn small_page(i: usize) -> String {
    format!("<html><head><title>Small {i}</title></head><body><h1>Small page {i}</h1><p>Item {i} is documented here.</p></body></html>")
}

/// Serves `/big/N` and `/small/N` on loopback until the process ends.
fn serve() -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let base = format!("http://{}", listener.local_addr()?);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(match stream.try_clone() {
                    Ok(s) => s,
                    Err(_) => return,
                });
                let mut first = String::new();
                if reader.read_line(&mut first).unwrap_or(0) == 0 {
                    return;
                }
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let path = first.split_whitespace().nth(1).unwrap_or("/");
                let n = |p: &str| path.strip_prefix(p).and_then(|x| x.parse::<usize>().ok());
                let body = match (n("/big/"), n("/small/")) {
                    (Some(i), _) => big_page(i),
                    (_, Some(i)) => small_page(i),
                    _ => String::new(),
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    Ok(base)
}

fn refresh(exe: &Path, vault: &Path, urls: &[String]) -> Result<f64> {
    let t = Instant::now();
    let mut cmd = Command::new(exe);
    cmd.args(["externals", "refresh", "--json", "--vault"]).arg(vault);
    if !urls.is_empty() {
        cmd.args(urls);
    }
    let out = cmd.output()?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("lode externals refresh failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(secs)
}

pub fn run(a: ExternalsArgs) -> Result<ExitCode> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; build with --release for representative figures");
    }
    let exe = crate::lode_exe()?;
    let work = a.work.clone().unwrap_or_else(|| std::env::temp_dir().join("lode-bench-externals"));
    let vault = work.join("vault");
    if vault.exists() {
        std::fs::remove_dir_all(&vault)?;
    }
    std::fs::create_dir_all(vault.join(".lode"))?;
    std::fs::write(vault.join(".lode/config.toml"), "[models]\nembedder = \"\"\n\n[externals]\nallow_loopback = true\n")?;
    let base = serve()?;
    let bigs: Vec<String> = (0..a.pages).map(|i| format!("{base}/big/{i}")).collect();
    std::fs::write(
        vault.join("big.md"),
        format!("# Big pages\n\n{}", bigs.iter().map(|u| format!("- [page]({u})\n")).collect::<String>()),
    )?;
    let notes = a.links.div_ceil(a.per_note.max(1));
    for n in 0..notes {
        let mut s = format!("# Links {n}\n\nReading for area {n}.\n\n");
        for k in 0..a.per_note {
            let i = n * a.per_note + k;
            if i < a.links {
                s.push_str(&format!("- [item {i}]({base}/small/{i}) — notes on item {i}\n"));
            }
        }
        std::fs::write(vault.join(format!("links-{n:03}.md")), s)?;
    }
    let o = Command::new(&exe).args(["index", "--quiet", "--no-vectors", "--vault"]).arg(&vault).output()?;
    if !o.status.success() {
        bail!("lode index failed: {}", String::from_utf8_lossy(&o.stderr));
    }

    // Ingest: 100 KB pages, then every small page.
    let big_s = refresh(&exe, &vault, &bigs)?;
    let big_again_s = refresh(&exe, &vault, &bigs)?;
    let html_bytes: usize = (0..a.pages).map(|i| big_page(i).len()).sum();
    eprintln!("ingest: {} pages of ~100 KB in {big_s:.2} s", a.pages);
    let all_s = refresh(&exe, &vault, &[])?;
    eprintln!("all {} linked pages in {all_s:.2} s", a.links + a.pages);
    // A third of the small pages stale, a third never mirrored.
    {
        let db = rusqlite::Connection::open(vault.join(".lode/lode.db"))?;
        db.execute("UPDATE snapshots SET seen_at = seen_at - 40 * 86400000 WHERE external_id % 3 = 1", [])?;
        db.execute("DELETE FROM snapshots WHERE external_id % 3 = 2", [])?;
        db.execute("UPDATE externals SET note_id = NULL, last_attempt_at = NULL, last_status = NULL WHERE id % 3 = 2", [])?;
    }

    // Diagnostics: a note of `per_note` links saved → its diagnostics published.
    let mut c = StdioClient::spawn(&exe, [OsStr::new("serve"), OsStr::new("--vault"), vault.as_os_str()])?;
    c.timeout = Duration::from_secs(600);
    c.request("initialize", json!({"processId": null, "rootUri": format!("file://{}", vault.display()), "capabilities": {}}))?;
    c.notify("initialized", json!({}))?;
    c.wait_for(|m| m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end")?;
    let path = vault.join("links-000.md");
    let doc = format!("file://{}", path.display());
    let text = std::fs::read_to_string(&path)?;
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": doc, "languageId": "markdown", "version": 0, "text": text}}))?;
    let first = c.wait_for(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == doc)?;
    let shown = first["params"]["diagnostics"].as_array().map_or(0, Vec::len);
    let mut save_ms = Vec::new();
    for v in 1..=a.saves as i64 {
        let edited = format!("{text}\nEdit {v}.\n");
        std::fs::write(&path, &edited)?;
        let t = Instant::now();
        c.notify("textDocument/didChange", json!({"textDocument": {"uri": doc, "version": v}, "contentChanges": [{"text": edited}]}))?;
        c.notify("textDocument/didSave", json!({"textDocument": {"uri": doc}}))?;
        c.wait_for(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == doc && m["params"]["version"] == v)?;
        save_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let report = json!({
        "pages_100kb": a.pages,
        "html_mb": html_bytes as f64 / 1e6,
        "ingest_100kb_pages_per_s": a.pages as f64 / big_s,
        "ingest_100kb_mb_per_s": html_bytes as f64 / 1e6 / big_s,
        "refetch_unchanged_100kb_pages_per_s": a.pages as f64 / big_again_s,
        "external_links": a.links + a.pages,
        "refresh_all_linked_s": all_s,
        "refresh_all_pages_per_s": (a.links + a.pages) as f64 / all_s,
        "links_in_saved_note": a.per_note,
        "diagnostics_in_saved_note": shown,
        "save_to_diagnostics_published_ms": crate::bench::stats(save_ms),
        "server_rss_mib": c.rss_mib(),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(ExitCode::SUCCESS)
}
