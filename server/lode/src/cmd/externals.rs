//! `lode externals`: mirror the pages notes link to (`refresh`), list what is mirrored and how
//! old it is (`list`), and show one external with its snapshots and annotations (`show`).

use std::io::Write;
use std::process::ExitCode;
use std::sync::mpsc;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use lode_externals::{annotations, describe_age, FetchOptions, Recorded, State};
use lode_store::{now_ms, ExternalInfo, Store, Via};

use super::Vault;
use crate::progress::Progress;
use crate::VaultArgs;

#[derive(Subcommand)]
pub enum ExternalsCommand {
    /// Fetch linked pages again (every linked page when no URL is given) and store new snapshots
    Refresh(RefreshArgs),
    /// Every external: linked pages (mirrored or not) and pages an answer fetched
    List(ListArgs),
    /// One external: its current snapshot, earlier ones, the notes linking it and annotations
    Show(ShowArgs),
}

#[derive(Args)]
pub struct RefreshArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
    /// Pages fetched at once
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub parallel: usize,
    /// Only pages never mirrored, or stale ones
    #[arg(long)]
    pub stale: bool,
    /// URLs to fetch [default: every page the vault's notes link to]
    pub urls: Vec<String>,
}

#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
}

#[derive(Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
    pub url: String,
}

pub fn run(c: ExternalsCommand) -> Result<ExitCode> {
    match c {
        ExternalsCommand::Refresh(a) => refresh(a),
        ExternalsCommand::List(a) => list(a),
        ExternalsCommand::Show(a) => show(a),
    }
}

fn refresh(a: RefreshArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&a.vault)?;
    let mut store = vault.open_existing()?;
    let freshness = vault.config.externals.freshness();
    // A URL given that lode cannot fetch is reported with the others' results; it stops none
    // of them (and is not recorded: it names no page).
    let mut invalid: Vec<(String, String)> = Vec::new();
    let mut urls: Vec<String> = if a.urls.is_empty() {
        store.linked_urls()?
    } else {
        let mut v = Vec::new();
        for u in &a.urls {
            match lode_externals::fetch::check_url(u) {
                Ok(_) => v.push(u.trim().to_owned()),
                Err(e) => invalid.push((u.clone(), e.to_string())),
            }
        }
        v
    };
    let report_invalid = |json: bool| -> Result<()> {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for (url, why) in &invalid {
            if json {
                writeln!(out, "{}", serde_json::json!({"url": url, "ok": false, "error": why, "status": null}))?;
            } else {
                writeln!(out, "failed        {url}: {why}")?;
            }
        }
        Ok(())
    };
    report_invalid(a.vault.json)?;
    if a.urls.is_empty() {
        // A page linked only from notes that may not leave the machine is not fetched: the
        // request would carry the link, and whatever words of the note are in it, out.
        let rules = vault.config.egress_rules()?;
        let mut nested = lode_answer::egress::NestedRules::new(&vault.root);
        let mut verdict: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
        let mut withheld = |path: &str| -> bool {
            *verdict.entry(path.to_owned()).or_insert_with(|| {
                // A note that cannot be read (moved, unreadable) withholds its links: fail closed.
                let Ok(bytes) = lode_store::vault::read_note_file(&vault.root, path, lode_store::vault::DEFAULT_MAX_FILE_BYTES) else {
                    return true;
                };
                rules.note_withheld(path, &String::from_utf8_lossy(&bytes)).is_some() || nested.withheld(path).is_some()
            })
        };
        let infos = store.externals_for(&urls)?;
        let before = urls.len();
        urls =
            infos.into_iter().filter(|e| e.linked_from.is_empty() || !e.linked_from.iter().all(|p| withheld(p))).map(|e| e.url).collect();
        if urls.len() < before {
            eprintln!("{} linked page(s) skipped: linked only from notes that may not leave this machine", before - urls.len());
        }
    }
    if a.stale {
        let now = now_ms();
        let infos = store.externals_for(&urls)?;
        urls = infos.into_iter().filter(|e| !matches!(freshness.state(e, now), State::Fresh { .. })).map(|e| e.url).collect();
    }
    if urls.is_empty() {
        if !invalid.is_empty() {
            eprintln!("0 fetched: {} failed", invalid.len());
            return Ok(ExitCode::FAILURE);
        }
        eprintln!("no linked pages to fetch");
        return Ok(ExitCode::SUCCESS);
    }
    let opts = vault.config.externals.fetch_options();
    let results = fetch_all(&urls, &opts, a.parallel.max(1));
    let mut progress = Progress::new(!a.vault.json);
    let (mut changed, mut unchanged, mut failed) = (0usize, 0usize, invalid.len());
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (done, (url, fetched)) in results.enumerate() {
        progress.update("fetching", done + 1, urls.len(), &url);
        let recorded = lode_externals::record(&mut store, &url, Via::Link, fetched)?;
        if a.vault.json {
            let v = match &recorded {
                Recorded::Saved(s) => {
                    serde_json::json!({"url": url, "ok": true, "snapshot_id": s.snapshot_id, "changed": s.changed, "passages": s.passages})
                }
                Recorded::Failed(e) => serde_json::json!({"url": url, "ok": false, "error": e.to_string(), "status": e.status()}),
            };
            writeln!(out, "{v}")?;
        } else {
            progress.finish();
            match &recorded {
                Recorded::Saved(s) if s.changed => {
                    writeln!(out, "new snapshot  {url}  ({}, {} passages)", &s.snapshot_id[..12], s.passages)?
                }
                Recorded::Saved(_) => writeln!(out, "unchanged     {url}")?,
                Recorded::Failed(e) => writeln!(out, "failed        {url}: {e}")?,
            }
        }
        match recorded {
            Recorded::Saved(s) if s.changed => changed += 1,
            Recorded::Saved(_) => unchanged += 1,
            Recorded::Failed(_) => failed += 1,
        }
    }
    progress.finish();
    out.flush()?;
    eprintln!("{} fetched: {changed} new snapshots, {unchanged} unchanged, {failed} failed", urls.len());
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Fetches on `parallel` threads; results come back as they complete, and the single writer
/// (this thread) stores them one by one.
fn fetch_all(
    urls: &[String],
    opts: &FetchOptions,
    parallel: usize,
) -> impl Iterator<Item = (String, Result<lode_externals::Fetched, lode_externals::FetchError>)> {
    let (tx, rx) = mpsc::channel();
    let queue = std::sync::Arc::new(std::sync::Mutex::new(urls.iter().cloned().enumerate().collect::<Vec<_>>().into_iter()));
    for _ in 0..parallel.min(urls.len()) {
        let (tx, queue, opts) = (tx.clone(), queue.clone(), opts.clone());
        std::thread::spawn(move || loop {
            let next = queue.lock().map(|mut q| q.next()).unwrap_or(None);
            let Some((i, url)) = next else { break };
            let r = lode_externals::fetch(&url, &opts);
            if tx.send((i, url, r)).is_err() {
                break;
            }
        });
    }
    drop(tx);
    // A slow page does not hold back the ones after it.
    rx.into_iter().map(|(_, url, r)| (url, r))
}

fn list(a: ListArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&a.vault)?;
    let store = vault.open_existing()?;
    let freshness = vault.config.externals.freshness();
    let rules = vault.config.egress_rules()?;
    let now = now_ms();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let all = store.externals()?;
    for e in &all {
        let no_egress = rules.domain_withheld(&e.url).is_some();
        if a.vault.json {
            writeln!(out, "{}", to_json(e, now, no_egress))?;
        } else {
            writeln!(out, "{}  {}{}", e.url, state_text(&freshness.state(e, now)), if no_egress { "  [no egress]" } else { "" })?;
            if !e.linked_from.is_empty() {
                writeln!(out, "    linked from {}", e.linked_from.join(", "))?;
            } else if e.discovered_via.as_deref() == Some("ask") {
                writeln!(out, "    fetched by an answer")?;
            }
        }
    }
    if !a.vault.json && all.is_empty() {
        writeln!(out, "no externals: no note links to a web page")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn to_json(e: &ExternalInfo, now: i64, no_egress: bool) -> serde_json::Value {
    serde_json::json!({
        "url": e.url,
        "snapshot_id": e.snapshot_id,
        "title": e.title,
        "fetched_at": e.fetched_at,
        "seen_at": e.seen_at,
        // Unrounded: a snapshot stale under a fractional `stale_days` never reads 0.0.
        "age_days": e.age_days(now),
        "status": e.status,
        "content_type": e.content_type,
        "final_url": e.final_url,
        "linked_from": e.linked_from,
        "discovered_via": e.discovered_via,
        "no_egress": no_egress,
        "snapshots": e.snapshots,
        "last_error": e.last_error,
        "last_status": e.last_status,
    })
}

fn state_text(s: &State) -> String {
    match s {
        State::Missing => "never mirrored".to_owned(),
        State::Fresh { age_days } => format!("fresh, checked {} ago", describe_age(*age_days)),
        State::Stale { age_days } => format!("stale, checked {} ago", describe_age(*age_days)),
        State::Failed { error, has_snapshot, .. } => {
            format!("last fetch failed: {error}{}", if *has_snapshot { " (the earlier snapshot is kept)" } else { "" })
        }
    }
}

fn show(a: ShowArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&a.vault)?;
    let store = vault.open_existing()?;
    let url = a.url.trim();
    let e = store.external(url)?;
    if e.snapshot_id.is_none() && e.linked_from.is_empty() && e.last_attempt_at.is_none() {
        bail!("{url} is not an external of this vault (no note links to it and it was never fetched)");
    }
    let now = now_ms();
    let freshness = vault.config.externals.freshness();
    let rules = vault.config.egress_rules()?;
    let annotations = annotations_of(&store, &e)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if a.vault.json {
        let mut v = to_json(&e, now, rules.domain_withheld(url).is_some());
        v["history"] = serde_json::json!(store.history(url)?);
        v["annotations"] = serde_json::json!(annotations
            .iter()
            .map(|(path, quotes)| serde_json::json!({"path": path, "quotes": quotes.iter().map(|(q, anchored)| serde_json::json!({"line_text": q, "anchored": anchored})).collect::<Vec<_>>()}))
            .collect::<Vec<_>>());
        writeln!(out, "{v}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "{url}")?;
    writeln!(out, "  state       {}", state_text(&freshness.state(&e, now)))?;
    if let Some(id) = &e.snapshot_id {
        writeln!(out, "  snapshot    {id}")?;
        if let Some(t) = &e.title {
            writeln!(out, "  title       {t}")?;
        }
        writeln!(
            out,
            "  fetched     {} (first seen {})",
            e.status.map(|s| s.to_string()).unwrap_or_default(),
            describe_age((now - e.fetched_at.unwrap_or(now)) as f64 / 86_400_000.0) + " ago"
        )?;
        writeln!(out, "  type        {}", e.content_type.clone().unwrap_or_default())?;
        if e.final_url.as_deref().is_some_and(|f| f != url) {
            writeln!(out, "  redirected  {}", e.final_url.clone().unwrap_or_default())?;
        }
        writeln!(out, "  snapshots   {} kept", e.snapshots)?;
    }
    if !e.linked_from.is_empty() {
        writeln!(out, "  linked from {}", e.linked_from.join(", "))?;
    }
    for (path, quotes) in &annotations {
        let orphaned = quotes.iter().filter(|(_, a)| !a).count();
        writeln!(out, "  annotation  {path}: {} quotes, {orphaned} orphaned", quotes.len())?;
        for (q, anchored) in quotes.iter().filter(|(_, a)| !a) {
            let _ = anchored;
            writeln!(out, "      orphaned: {}", q.chars().take(80).collect::<String>())?;
        }
    }
    if let Some(id) = &e.snapshot_id {
        let body = store.version_body(id)?.unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        writeln!(out)?;
        for line in text.lines().take(12) {
            writeln!(out, "  | {line}")?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Notes annotating `e`, each with its quotes and whether each is found in the current snapshot.
pub fn annotations_of(store: &Store, e: &ExternalInfo) -> Result<Vec<(String, Vec<(String, bool)>)>> {
    let snapshot = match &e.snapshot_id {
        Some(id) => String::from_utf8_lossy(&store.version_body(id)?.unwrap_or_default()).into_owned(),
        None => String::new(),
    };
    let mut out = Vec::new();
    for (path, head, meta) in store.notes_with_meta_mentioning(&e.url)? {
        if annotations::annotated_url(&meta).as_deref() != Some(e.url.as_str()) {
            continue;
        }
        let body = store.version_body(&head)?.unwrap_or_default();
        let quotes = annotations::check(&body, &snapshot)
            .into_iter()
            .map(|(q, a)| (q.text, matches!(a, annotations::Anchor::Anchored { .. })))
            .collect();
        out.push((path, quotes));
    }
    Ok(out)
}
