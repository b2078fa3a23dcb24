//! `lode-bench scale`: the cold index's cost curve against its floor. For each vault size, a
//! generated vault is indexed from nothing by `lode index --no-vectors` (its own process), and
//! the same notes' paragraphs are inserted into a plain SQLite FTS5 table (porter tokenizer,
//! WAL on disk, one transaction, the SQLite lode itself links) in this process: the ratio says
//! what lode's work beyond full-text indexing costs, and the per-note cost says whether it
//! stays flat as the vault grows. A third leg times lode's own reading and parsing of the same
//! notes, on one thread and writing nothing: the part of the ratio no write path can remove.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};

#[derive(Args)]
pub struct ScaleArgs {
    /// Vault sizes in notes, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "5000,20000,50000")]
    pub notes: Vec<usize>,
    /// Where the generated vaults are kept between runs (written once, reused)
    #[arg(long, value_name = "DIR")]
    pub work: Option<std::path::PathBuf>,
}

/// The floor: every paragraph (blank-line separated block) of every note, read from disk and
/// inserted into a fresh FTS5 table in one transaction. Returns seconds and rows.
fn fts5_floor(vault: &Path, files: &[std::path::PathBuf], db: &Path) -> Result<(f64, usize)> {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let t = Instant::now();
    let mut conn = rusqlite::Connection::open(db)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.execute_batch("CREATE VIRTUAL TABLE p USING fts5(path UNINDEXED, body, tokenize = 'porter unicode61')")?;
    let tx = conn.transaction()?;
    let mut rows = 0;
    {
        let mut insert = tx.prepare("INSERT INTO p (path, body) VALUES (?1, ?2)")?;
        for f in files {
            let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            let rel = f.strip_prefix(vault).unwrap_or(f).to_string_lossy();
            for para in text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
                insert.execute(rusqlite::params![rel, para])?;
                rows += 1;
            }
        }
    }
    tx.commit()?;
    drop(conn);
    Ok((t.elapsed().as_secs_f64(), rows))
}

/// lode's preparation of every note as its scan's reader thread does it (read, version id,
/// tree-sitter parse and chunking), on one thread, writing nothing. Returns seconds and the
/// passages made (which the index must hold too: a check that this leg did the whole work).
fn parse_leg(files: &[std::path::PathBuf]) -> Result<(f64, usize)> {
    let cfg = lode_core::chunk::ChunkConfig::default();
    let t = Instant::now();
    let mut passages = 0;
    for f in files {
        let bytes = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        std::hint::black_box(lode_store::version_id(&bytes));
        passages += lode_core::chunk::chunk_note(&bytes, &cfg).passages.len();
    }
    Ok((t.elapsed().as_secs_f64(), passages))
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

pub fn run(a: ScaleArgs) -> Result<std::process::ExitCode> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; build with --release for representative figures");
    }
    let exe = crate::lode_exe()?;
    let mut rows = Vec::new();
    let mut first_per_note: Option<(f64, f64)> = None;
    for &n in &a.notes {
        let work = a.work.clone().unwrap_or_else(std::env::temp_dir).join(format!("lode-bench-scale-{n}"));
        let vault = work.join("vault");
        let mut progress = lode::progress::Progress::new(true);
        let bytes = crate::synth::write_vault(&vault, n, 1, |d, t| progress.update("writing notes", d, t, ""))?;
        drop(progress);
        // The notes lode indexes, by its own rule (sorted).
        let (files, _) = lode_store::vault::walk(&vault);

        // The floor first: it also brings the files into the page cache for both.
        let (floor_s, paragraphs) = fts5_floor(&vault, &files, &work.join("fts5-floor.db"))?;
        let (parse_s, parsed_passages) = parse_leg(&files)?;

        let state = vault.join(".lode");
        if state.exists() {
            std::fs::remove_dir_all(&state).with_context(|| format!("removing {}", state.display()))?;
        }
        let t = Instant::now();
        let out = Command::new(&exe).args(["index", "--no-vectors", "--json", "--vault"]).arg(&vault).output()?;
        let lode_s = t.elapsed().as_secs_f64();
        if !out.status.success() {
            bail!("lode index failed on {n} notes: {}", String::from_utf8_lossy(&out.stderr));
        }
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let db_mb = std::fs::metadata(state.join("lode.db")).map_or(0.0, |m| m.len() as f64 / 1e6);

        let per_note = (lode_s * 1e6 / n as f64, floor_s * 1e6 / n as f64);
        let base = *first_per_note.get_or_insert(per_note);
        eprintln!(
            "{n} notes: lode {lode_s:.1} s, FTS5 floor {floor_s:.1} s ({:.1}x); lode's parse alone {parse_s:.1} s ({:.1}x the floor)",
            lode_s / floor_s,
            parse_s / floor_s
        );
        rows.push(json!({
            "notes": n,
            "mb": round2(bytes as f64 / 1e6),
            "paragraphs": paragraphs,
            "lode_s": round2(lode_s),
            "fts5_floor_s": round2(floor_s),
            "ratio": round2(lode_s / floor_s),
            "lode_us_per_note": per_note.0.round(),
            "floor_us_per_note": per_note.1.round(),
            "lode_per_note_vs_first": round2(per_note.0 / base.0),
            "floor_per_note_vs_first": round2(per_note.1 / base.1),
            "parse_s": round2(parse_s),
            "parse_us_per_note": (parse_s * 1e6 / n as f64).round(),
            "parse_vs_floor": round2(parse_s / floor_s),
            "parse_passages": parsed_passages,
            "passages": report["passages"],
            "lode_peak_rss_mib": report["peak_rss_mib"],
            "lode_phase_s": report["phase_seconds"],
            "lode_db_mb": round2(db_mb),
        }));
    }
    let v = json!({"build": if cfg!(debug_assertions) { "debug" } else { "release" }, "runs": rows});
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(std::process::ExitCode::SUCCESS)
}
