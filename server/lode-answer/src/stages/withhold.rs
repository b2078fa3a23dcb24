//! Answer stage 1, *withhold*: what may leave the machine. A question asked from a no-egress
//! note, or asked while the egress rules cannot be read, is answered locally; for a remote
//! synthesizer every item's egress marks are read from the index, from the exact bytes about to
//! be sent, from the editor's buffer and from the note on disk now (where it is now: a note gone
//! from its indexed path is withheld), and what is withheld is listed. Reads every cited
//! version's body once for the stages after it.

use std::collections::{BTreeMap, HashMap};

use lode_store::Store;

use crate::egress::EgressRules;
use crate::{is_cancelled, withheld_note, AskConfig, AskError, ContextItem, Live, Synthesizer, Withheld};

/// The synthesizer a question from a no-egress note falls back to.
static LOCAL: Synthesizer = Synthesizer::Extractive;

pub(crate) struct Withholding<'s> {
    /// The synthesizer that answers: the one asked for, or the local one.
    pub synth: &'s Synthesizer,
    /// Why the synthesizer was changed, when it was.
    pub notice: Option<String>,
    /// Whether the synthesizer sends anything off the machine.
    pub remote: bool,
    /// Body of every version in context, by version id.
    pub bodies: BTreeMap<String, String>,
    pub withheld: Vec<Withheld>,
}

/// Marks `items` withheld where a remote synthesizer may not see them (`withheld` set).
pub(crate) fn withhold<'s>(
    store: &Store,
    origin: Option<&str>,
    cfg: &AskConfig,
    rules: &EgressRules,
    synth: &'s Synthesizer,
    items: &mut [ContextItem],
) -> Result<Withholding<'s>, AskError> {
    let mut origin_notice = None;
    let mut synth = synth;
    if synth.is_remote() {
        if let Some(why) = &cfg.egress_blocked {
            origin_notice = Some(format!("nothing may leave this machine now ({why}): answered locally with the extractive synthesizer"));
            synth = &LOCAL;
        }
    }
    if synth.is_remote() {
        if let Some(path) = origin {
            if let Some(why) = withheld_note(store, rules, cfg, path) {
                origin_notice = Some(format!(
                    "the question comes from {path}, which may not leave this machine ({why}): answered locally with the extractive synthesizer"
                ));
                synth = &LOCAL;
            }
        }
    }
    // The rest: context, egress, synthesis, the gate.
    let cancelled = || is_cancelled(cfg);
    if cancelled() {
        return Err(AskError::Cancelled);
    }
    let remote = synth.is_remote();
    // A reader off the machine (an MCP client) is judged as a remote model is.
    let judge = remote || cfg.audience_remote;

    // Bodies of every version in context; only those the synthesizer may see are eligible.
    let mut bodies: BTreeMap<String, String> = BTreeMap::new();
    for it in items.iter() {
        if !bodies.contains_key(&it.version_id) {
            if let Some(b) = store.version_body(&it.version_id)? {
                bodies.insert(it.version_id.clone(), String::from_utf8_lossy(&b).into_owned());
            }
        }
    }
    if judge {
        // The index's metadata may be stale: the flags in the exact bytes about to be sent, and
        // in the note on disk now, count too.
        let mut fresh: HashMap<(String, String), Option<String>> = HashMap::new();
        let mut live = Live::new(cfg, rules);
        for it in items.iter_mut().filter(|i| i.withheld.is_none()) {
            let key = (it.path.clone(), it.version_id.clone());
            if !fresh.contains_key(&key) {
                // A body that cannot be read is no body to send: withheld.
                let w = match bodies.get(&it.version_id) {
                    // A shared note has no file here: its marks are in the bytes to be sent.
                    Some(b) if it.source == lode_store::Source::Shared => {
                        let prefix = cfg.shared.as_ref().map(|t| t.config().address(""));
                        let rel = prefix.as_deref().and_then(|p| it.path.strip_prefix(p)).unwrap_or(&it.path);
                        live.rules().note_withheld(rel, b)
                    }
                    Some(b) => live.withheld(&it.path, Some(b), true),
                    None => Some("its stored text could not be read; withheld to be safe".to_owned()),
                };
                let shared = it.source == lode_store::Source::Shared;
                // A page reached only through links in notes that may not leave the machine:
                // its URL (and text) would carry those notes' words out.
                let w = w.or_else(|| {
                    if it.path.contains("://") && !shared {
                        linked_only_from_withheld(store, &mut live, &it.path)
                    } else {
                        None
                    }
                });
                fresh.insert(key.clone(), w);
            }
            it.withheld = fresh[&key].clone();
        }
    }
    let withheld: Vec<Withheld> = if judge {
        items
            .iter()
            .filter_map(|i| i.withheld.as_ref().map(|r| Withheld { path: i.path.clone(), passage_id: i.passage_id, reason: r.clone() }))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Withholding { synth, notice: origin_notice, remote, bodies, withheld })
}

/// Why a snapshot may not be sent because every note linking it is withheld, if so. A page no
/// note links to (fetched for an answer) is judged on its own rules. Fails closed.
pub(crate) fn linked_only_from_withheld(store: &Store, live: &mut Live<'_>, url: &str) -> Option<String> {
    let info = match store.external(url) {
        Ok(i) => i,
        Err(e) => return Some(format!("the notes linking it could not be read ({e}); withheld to be safe")),
    };
    if info.linked_from.is_empty() {
        return None;
    }
    let all = info.linked_from.iter().all(|p| live.withheld(p, None, false).is_some() || withheld_by_index(store, live, p));
    all.then(|| format!("linked only from notes that may not leave this machine ({})", info.linked_from.join(", ")))
}

/// Whether the index's metadata of the note at `path` withholds it.
fn withheld_by_index(store: &Store, live: &Live<'_>, path: &str) -> bool {
    match store.note_id(path) {
        Ok(Some(id)) => store.note_meta(id).map(|m| live.rules().withheld_because(path, &m).is_some()).unwrap_or(true),
        Ok(None) => false,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::LlmConfig;

    #[test]
    fn a_question_from_a_no_egress_note_is_answered_locally() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("diary.md"), "---\nno_egress: true\n---\n# Diary\n\nWhy is the boiler loud?\n").unwrap();
        let mut store = Store::open(&tmp.path().join("lode.db"), lode_store::StoreOptions::default()).unwrap();
        lode_store::vault::index_vault(&mut store, &root, &lode_store::vault::IndexOptions::default(), |_| {}).unwrap();
        let remote = Synthesizer::Llm(LlmConfig { endpoint: "https://llm.example/v1".into(), remote: Some(true), ..Default::default() });
        let w = withhold(&store, Some("diary.md"), &AskConfig::default(), &EgressRules::default(), &remote, &mut []).unwrap();
        assert!(matches!(w.synth, Synthesizer::Extractive) && !w.remote);
        assert!(w.notice.unwrap().contains("diary.md, which may not leave this machine"));
        // From an ordinary note the model asked for answers.
        std::fs::write(root.join("plain.md"), "# Plain\n\nWhy?\n").unwrap();
        lode_store::vault::index_vault(&mut store, &root, &lode_store::vault::IndexOptions::default(), |_| {}).unwrap();
        let w = withhold(&store, Some("plain.md"), &AskConfig::default(), &EgressRules::default(), &remote, &mut []).unwrap();
        assert!(w.remote && w.notice.is_none());
    }
}
