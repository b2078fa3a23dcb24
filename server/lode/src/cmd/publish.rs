//! `lode publish`: the vault as the team's shared tier, on object storage or in a folder, for
//! members to search in place (`[shared] index`). Run it where the team's docs live (a CI job).

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use lode_retrieval::shared::{self, NoteToPublish};
use lode_store::vault::{index_vault, IndexOptions};

use super::Vault;
use crate::progress::Progress;
use crate::VaultArgs;

#[derive(Args)]
pub struct PublishArgs {
    #[command(flatten)]
    pub vault: VaultArgs,
    /// Where to publish: s3://bucket/prefix, or a folder
    #[arg(long, value_name = "URI")]
    pub to: String,
    /// An object-store option that is not a secret (endpoint, region, allow_http); repeatable.
    /// Credentials come from the environment or ~/.aws/credentials.
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Full text only: do not embed passages
    #[arg(long)]
    pub no_vectors: bool,
    /// No progress lines
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(args: PublishArgs) -> Result<ExitCode> {
    let vault = Vault::resolve(&args.vault)?;
    let started = Instant::now();
    let mut cfg = shared::SharedConfig::new(&args.to);
    cfg.timeout = std::time::Duration::from_secs(120);
    for o in &args.options {
        let (k, v) = o.split_once('=').with_context(|| format!("--option {o:?}: expected KEY=VALUE"))?;
        cfg.options.insert(k.trim().to_owned(), v.trim().to_owned());
    }
    let quiet = args.quiet || args.vault.json;

    // The vault's own index first: what is published is exactly what lode indexed.
    let mut store = vault.open_for_write()?;
    let opts = IndexOptions { max_file_bytes: vault.config.index.max_file_mb * 1_000_000, ..Default::default() };
    let mut progress = Progress::new(!quiet);
    index_vault(&mut store, &vault.root, &opts, |p| progress.update(p.phase, p.done, p.total, p.path))?;
    progress.finish();

    // Notes the publisher's egress rules keep on this machine are not published: the tier
    // is somewhere else by definition.
    let rules = vault.config.egress_rules()?;
    let mut notes = Vec::new();
    let mut kept_back: Vec<(String, String)> = Vec::new();
    // Passages holding a detected secret: `(note:line, kind)`, never published.
    let mut secrets_kept: Vec<(String, &'static str)> = Vec::new();
    let mut nested = lode_answer::egress::NestedRules::new(&vault.root);
    for n in store.notes()? {
        let Some(head) = n.head_version.clone() else { continue };
        let body = store.version_body(&head)?.unwrap_or_default();
        let meta = store.note_meta(n.id)?;
        let text = String::from_utf8_lossy(&body);
        if let Some(why) = rules.withheld_because(&n.path, &meta).or_else(|| rules.note_withheld(&n.path, &text)) {
            kept_back.push((n.path, why));
            continue;
        }
        let passages = store.passages_of(&n.path)?;
        // A nested vault's own rules hold for its notes wherever they are published from.
        if let Some(why) = nested.withheld(&n.path) {
            kept_back.push((n.path, why));
            continue;
        }
        // Title, headings and frontmatter go on every published row: a secret in any of them
        // is masked there too.
        let title = mask_secrets(&n.title);
        let meta = mask_meta(meta);
        match without_secrets(&n.path, &text, passages, &mut secrets_kept) {
            // Whatever is left of the note, with each secret's bytes masked: a version of its own.
            Some((masked, kept)) if masked != text => {
                let version_id = lode_store::version_id(masked.as_bytes());
                notes.push(NoteToPublish { path: n.path, title, version_id, body: masked.into_bytes(), meta, passages: kept });
            }
            Some((_, kept)) => notes.push(NoteToPublish { path: n.path, title, version_id: head, body, meta, passages: kept }),
            None => kept_back.push((n.path, "it holds secrets lode could not mask; nothing of it is published".into())),
        }
    }

    let mut loaded = (!args.no_vectors).then(|| crate::models::load(&vault, true, false));
    let mut embed_fn;
    let embed = match loaded.as_mut().and_then(|l| l.embedder.as_mut()) {
        Some(e) => {
            let (id, dims) = (e.id().to_owned(), e.dimensions());
            embed_fn = move |texts: &[String]| -> Result<Vec<Vec<f32>>, String> {
                let mut out = Vec::with_capacity(texts.len());
                for batch in texts.chunks(32) {
                    let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
                    out.extend(e.embed_passages(&refs).map_err(|e| e.to_string())?);
                }
                Ok(out)
            };
            Some((id, dims, &mut embed_fn as &mut shared::EmbedFn<'_>))
        }
        None => {
            if let (Some(l), false) = (&loaded, quiet) {
                eprintln!("note: publishing full text only: {}", l.status());
            }
            None
        }
    };
    let mut say = |m: &str| {
        if !quiet {
            eprintln!("publish: {m}");
        }
    };
    let report = shared::publish(&cfg, &notes, embed, &mut say)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.vault.json {
        let mut v = serde_json::to_value(&report)?;
        v["kept_back"] = serde_json::json!(kept_back.iter().map(|(p, w)| serde_json::json!({"path": p, "reason": w})).collect::<Vec<_>>());
        v["secrets_kept_back"] =
            serde_json::json!(secrets_kept.iter().map(|(at, kind)| serde_json::json!({"at": at, "kind": kind})).collect::<Vec<_>>());
        v["seconds"] = serde_json::json!(started.elapsed().as_secs_f64());
        writeln!(out, "{v}")?;
    } else {
        writeln!(
            out,
            "published {} notes to {} (publish {}): {} changed, {} removed, {} unchanged; {} passages and {} versions written{}",
            report.notes,
            report.uri,
            report.seq,
            report.changed,
            report.removed,
            report.unchanged,
            report.passages_added,
            report.versions_added,
            report.embedder.as_deref().map(|m| format!(", embedded with {m}")).unwrap_or_default(),
        )?;
        if report.restored {
            writeln!(out, "an interrupted publish had left unrecorded changes there; they were rolled back first")?;
        }
        for (p, w) in &kept_back {
            writeln!(out, "kept back: {p} ({w})")?;
        }
        for (at, kind) in &secrets_kept {
            writeln!(out, "kept back: {at}: a passage holding a secret ({kind})")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The note without its secrets, for a tier every member reads: the passages that hold a
/// detected secret are left out (each said in `kept`, as `note:line` and the secret's kind), and
/// the note's text has each secret's bytes masked with `*` (same length, so every kept passage's
/// byte range still holds its text). `None` when masking leaves something the detector still
/// reads as a secret: then nothing of the note is published.
fn without_secrets(
    path: &str,
    text: &str,
    passages: Vec<lode_store::PassageRow>,
    kept: &mut Vec<(String, &'static str)>,
) -> Option<(String, Vec<lode_store::PassageRow>)> {
    let spans = lode_answer::egress::secret_spans(text);
    if spans.is_empty() {
        let passages = passages.into_iter().map(|p| lode_store::PassageRow { heading: mask_secrets(&p.heading), ..p }).collect();
        return Some((text.to_owned(), passages));
    }
    let mut masked = text.to_owned();
    for (r, _) in &spans {
        masked.replace_range(r.clone(), &"*".repeat(r.len()));
    }
    if lode_answer::egress::redact(&masked).1 > 0 {
        return None;
    }
    let mut out = Vec::with_capacity(passages.len());
    for p in passages {
        match spans.iter().find(|(r, _)| r.start < p.end && p.start < r.end) {
            Some((r, kind)) => {
                let line = text[..r.start.min(text.len())].matches('\n').count() + 1;
                kept.push((format!("{path}:{line}"), kind));
            }
            None => out.push(lode_store::PassageRow {
                text: masked.get(p.start..p.end).unwrap_or(&p.text).to_owned(),
                heading: mask_secrets(&p.heading),
                ..p
            }),
        }
    }
    Some((masked, out))
}

/// `text` with each detected secret's bytes masked with `*`, and anything the detector still
/// reads as one after that replaced by its redaction marker.
fn mask_secrets(text: &str) -> String {
    let mut masked = text.to_owned();
    for (r, _) in lode_answer::egress::secret_spans(text) {
        masked.replace_range(r.clone(), &"*".repeat(r.len()));
    }
    lode_answer::egress::redact(&masked).0
}

/// Frontmatter with its secrets masked: each string value is read with its key before it
/// (`password: hunter2` is a secret where `hunter2` alone is not).
fn mask_meta(meta: serde_json::Map<String, serde_json::Value>) -> serde_json::Map<String, serde_json::Value> {
    fn value(key: &str, v: serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::String(s) => {
                let line = format!("{key}: {s}");
                let masked = mask_secrets(&line);
                if masked == line {
                    serde_json::Value::String(s)
                } else {
                    serde_json::Value::String(
                        masked.strip_prefix(&format!("{key}: ")).map(str::to_owned).unwrap_or_else(|| "[REDACTED]".to_owned()),
                    )
                }
            }
            serde_json::Value::Array(a) => serde_json::Value::Array(a.into_iter().map(|x| value(key, x)).collect()),
            serde_json::Value::Object(o) => serde_json::Value::Object(
                o.into_iter()
                    .map(|(k, x)| {
                        let x = value(&k, x);
                        (k, x)
                    })
                    .collect(),
            ),
            other => other,
        }
    }
    meta.into_iter()
        .map(|(k, v)| {
            let v = value(&k, v);
            (k, v)
        })
        .collect()
}
