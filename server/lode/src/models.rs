//! Loading the configured models and vector index for a command, never failing: what cannot be
//! loaded becomes a status line and the command carries on lexical-only.

use lode_models::{CrossEncoder, Embedder};
use lode_retrieval::VectorIndex;

use crate::cmd::Vault;

#[derive(Default)]
pub struct Loaded {
    pub embedder: Option<Embedder>,
    pub index: Option<VectorIndex>,
    pub reranker: Option<CrossEncoder>,
    /// Why something is missing, for the user.
    pub problems: Vec<String>,
}

impl Loaded {
    pub fn status(&self) -> String {
        match (&self.embedder, &self.index) {
            (Some(e), Some(_)) => format!("dense retrieval on ({})", e.id()),
            _ => format!("lexical only: {}", self.problems.first().map(String::as_str).unwrap_or("no embedding model configured")),
        }
    }
}

/// What masks secrets in text sent to an embedding server off this machine.
pub fn scrub() -> lode_models::remote::Scrub {
    std::sync::Arc::new(|text: &str| lode_answer::egress::redact(text))
}

/// The egress rules of `vault` for `lode index` embedding through a server off this machine.
pub fn outbound(vault: &Vault) -> anyhow::Result<std::sync::Arc<dyn lode_retrieval::Outbound>> {
    let mut cfg = vault.config.ask_config();
    cfg.vault_root = Some(vault.root.clone());
    Ok(std::sync::Arc::new(lode_engine::vectors::FixedOutbound { rules: vault.config.egress_rules()?, cfg, secrets: Default::default() }))
}

/// Loads the embedder and its vector index (when `dense`), and the reranker (when `rerank`).
/// Loads the models a command needs. `index`: the command makes vectors (`lode index`), so a
/// missing vector table is created and a damaged one replaced; every other command only reads
/// them, so nothing is created and a missing or damaged table is a problem said (the command
/// answers lexically).
pub fn load(vault: &Vault, dense: bool, rerank: bool) -> Loaded {
    load_for(vault, dense, rerank, false)
}

/// [`load`] for `lode index`.
pub fn load_for_index(vault: &Vault) -> Loaded {
    load_for(vault, true, false, true)
}

pub(crate) fn load_for(vault: &Vault, dense: bool, rerank: bool, index: bool) -> Loaded {
    let m = &vault.config.models;
    let mut out = Loaded { embedder: None, index: None, reranker: None, problems: Vec::new() };
    if dense {
        if m.embedder.trim().is_empty() {
            out.problems.push("no embedder configured ([models] embedder)".into());
        } else {
            match m.embedder_source(scrub()).map_err(|e| format!("{e:#}")).and_then(|s| Embedder::open(&s).map_err(|e| e.to_string())) {
                Ok(e) => {
                    let dir = vault.vectors_dir();
                    if index {
                        match VectorIndex::open(&dir, e.id(), e.dimensions()) {
                            Ok(i) => {
                                if let Some(why) = i.mended() {
                                    out.problems.push(why.to_owned());
                                }
                                out.index = Some(i);
                            }
                            Err(err) => out.problems.push(err.to_string()),
                        }
                    } else {
                        match VectorIndex::open_existing(&dir, e.id(), e.dimensions()) {
                            Ok(Some(i)) => out.index = Some(i),
                            Ok(None) => out.problems.push(format!(
                                "no vector table for {} under {} (`lode index` or the language server makes it); answering lexically",
                                e.id(),
                                dir.display()
                            )),
                            Err(err) => out.problems.push(format!(
                                "{err}; answering lexically (`lode index` or the language server moves it aside and rebuilds it from the passages)"
                            )),
                        }
                    }
                    out.embedder = Some(e);
                }
                Err(err) => out.problems.push(err),
            }
        }
    }
    if rerank {
        match &m.reranker {
            Some(r) => match CrossEncoder::load(&m.resolve(r), m.runtime.as_deref(), m.threads) {
                Ok(ce) => out.reranker = Some(ce),
                Err(err) => out.problems.push(err.to_string()),
            },
            None => out.problems.push("no reranker configured ([models] reranker)".into()),
        }
    }
    out
}

/// Whether the vector table of `model` reads and holds what the bookkeeping says (`windows`
/// rows, and up to `queued` more awaiting deletion): a damaged, truncated or deleted table is
/// said by `lode doctor` and `lode stats --check`, not found out by a search. `(broken, why)`:
/// broken when it is missing or cannot be read, else only out of step.
pub fn check_vector_table(dir: &std::path::Path, model: &str, windows: i64, queued: i64) -> Option<(bool, String)> {
    let prefix = lode_retrieval::table_name(model, 0);
    let prefix = prefix.strip_suffix('0').unwrap_or(&prefix).to_owned();
    let tables: Vec<usize> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten().filter_map(|e| e.file_name().to_str()?.strip_prefix(&prefix)?.strip_suffix(".lance")?.parse().ok()).collect()
        })
        .unwrap_or_default();
    let Some(&dims) = tables.first() else {
        return (windows > 0).then(|| {
            (true, format!("the vector table is missing under {} though {windows} vectors were made; `lode index` (or the language server) rebuilds it from the passages, searches answer lexically until then", dir.display()))
        });
    };
    // Read whole (`check`): a damaged page of one column leaves the count and the first row
    // readable.
    match lode_retrieval::VectorIndex::open_existing(dir, model, dims).and_then(|i| i.map(|i| i.check().and_then(|()| i.count())).transpose()) {
        Err(e) => Some((true, format!("{e}; `lode index` (or the language server) moves it aside and rebuilds it from the passages, searches answer lexically until then"))),
        // Rows of deleted passages may wait for the worker: up to `queued` more is in order.
        Ok(Some(rows)) if (rows as i64) < windows || rows as i64 > windows + queued => Some((
            false,
            format!("the vector table holds {rows} vectors where {windows} were recorded; the next `lode index` (or the language server) rebuilds it"),
        )),
        Ok(_) => None,
    }
}
