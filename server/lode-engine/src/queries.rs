//! The questions every door asks of a vault, answered as plain data: `ask` (a cited answer
//! through the gate), `status`. Blocking: a door calls them off its message loop.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use lode_core::gate::ScorerSlot;
use serde_json::{json, Value};

use crate::writer::{Done, Job};
use crate::Engine;

/// A question for [`Engine::ask`].
#[derive(Debug, Default)]
pub struct AskRequest {
    pub question: String,
    /// Where the question was asked from (a note's path), kept out of its own evidence.
    pub origin: Option<String>,
    /// Answer from this note only (vault-relative path).
    pub pinned: Option<String>,
    /// Passages of context (1–50; the vault's `[ask]` setting when `None`).
    pub limit: Option<usize>,
    /// What an editor holds now, by note path: it decides egress for its notes, saved or not.
    pub buffers: HashMap<String, String>,
    /// Set by the door when the question is withdrawn: the work stops at its next check.
    pub cancel: Arc<AtomicBool>,
    /// Who reads the answer: for a reader off the machine, withheld notes are no evidence at
    /// all, secrets are redacted from every text, and the answer is logged as egress.
    pub audience: crate::lookup::Audience,
}

impl Engine {
    /// Why the question may not go to the embedding server, when that server is off the machine:
    /// nothing may leave now, or the question was taken from a note that may not.
    fn question_stays(
        &self,
        store: &lode_store::Store,
        rules: &lode_answer::egress::EgressRules,
        cfg: &lode_answer::AskConfig,
        origin: Option<&str>,
    ) -> Option<String> {
        let off =
            self.settings.vectors.as_ref().and_then(|v| v.embedder.as_ref().ok()).is_some_and(lode_models::EmbedderSource::off_machine);
        if !off {
            return None;
        }
        if let Some(why) = &cfg.egress_blocked {
            return Some(format!("nothing may leave this machine now ({why}), so the question was not sent to the embedding server"));
        }
        let path = origin?;
        let why = lode_answer::withheld_for_remote(store, rules, cfg, path, None)?;
        Some(format!(
            "the question comes from {path}, which may not leave this machine ({why}), so it was not sent to the embedding server"
        ))
    }

    /// Answers a question from the vault: retrieval (dense when the vector thread is not
    /// holding the models, else lexical, and the answer says so), synthesis, the gate.
    pub fn ask(self: &Arc<Self>, req: AskRequest) -> Result<lode_answer::Answer, String> {
        let AskRequest { question, origin, pinned, limit, buffers, cancel, audience } = req;
        let store = self.readers.get()?;
        // Injected while a read connection is held (with one shared, locked connection, this
        // used to poison it for every later request).
        crate::faults::fault("ask");
        let mut cfg = self.settings.ask.clone();
        cfg.vault_root = Some(self.root.clone());
        cfg.cancel = Some(cancel);
        cfg.fetcher = Some(Arc::new(EngineFetcher(self.clone())));
        cfg.buffers = Arc::new(buffers);
        let (rules, synthesizer, blocked) = self.rules_now();
        if let (crate::lookup::Audience::Remote { .. }, Some(why)) = (&audience, &blocked) {
            return Err(format!("nothing may leave this machine now ({why})"));
        }
        cfg.egress_blocked = blocked;
        let remote = matches!(audience, crate::lookup::Audience::Remote { .. });
        cfg.audience_remote = remote;
        if let Some(l) = limit {
            cfg.context_limit = l.clamp(1, 50);
        }
        let wanted = cfg.context_limit;
        if remote {
            // A note this reader may not see reads as one that is not there.
            if let Some(p) = &pinned {
                if lode_answer::withheld_for_remote(&store, &rules, &cfg, p, None).is_some() {
                    return Err(lode_answer::AskError::UnknownNote(p.clone()).to_string());
                }
            }
            // Withheld passages are dropped after retrieval: enough candidates that they do
            // not crowd out what this reader may see.
            cfg.context_limit = (wanted * 4).clamp(64, 200);
        }
        // The models are lent for retrieval only: the lock is gone before synthesis, so a
        // slow model answer holds up neither another ask's dense leg nor the vector thread.
        // While the vector thread is embedding, answer lexically rather than wait for it: a
        // dense leg over a half-embedded index favours whatever was embedded first.
        // A vector table being rebuilt (or found gone) is not searched: a dense leg over
        // part of the vault favours what was embedded first. The answer says so.
        let unusable = self.dense_off.lock().unusable().or_else(|| self.question_stays(&store, &rules, &cfg, origin.as_deref()));
        // The reranker is lent for retrieval only, as the embedder is; one that cannot be
        // loaded leaves the fused order, as in `lode ask`.
        let mut reranker = self.reranker.as_ref().and_then(|pool| match pool.take() {
            Ok(lease) => Some(lease),
            Err(e) => {
                tracing::warn!("rerank skipped: {e}");
                None
            }
        });
        let (items, dense_failed, shortfalls) = {
            let mut dense = self.dense.try_lock();
            // An embedder released for idleness is loaded again here; one that cannot be
            // leaves this answer lexical, and says why.
            let mut reload_failed = None;
            let mut models = match dense.as_mut().and_then(|g| g.as_mut()).filter(|_| unusable.is_none()) {
                Some((r, i)) => match r.get() {
                    Ok(e) => lode_retrieval::Models { embedder: Some(e), index: Some(&*i), reranker: None },
                    Err(why) => {
                        reload_failed = Some(why);
                        lode_retrieval::Models::default()
                    }
                },
                None => lode_retrieval::Models::default(),
            };
            models.reranker = reranker.as_deref_mut();
            let (mut items, shortfalls) =
                lode_answer::gather_noting(&store, &question, pinned.as_deref(), &cfg, &rules, models).map_err(|e| e.to_string())?;
            if remote {
                items.retain(|it| lode_answer::withheld_for_remote(&store, &rules, &cfg, &it.path, Some(&it.text)).is_none());
                let mut kept = 0;
                items.retain(|it| {
                    kept += usize::from(!it.pinned);
                    it.pinned || kept <= wanted
                });
            }
            (items, shortfalls.dense_failed.clone().or(reload_failed), shortfalls)
        };
        drop(reranker);
        // The entailment model is taken only if a claim reaches the gate's third step.
        let mut scorer = match &self.nli {
            Some(pool) => ScorerSlot::lazy(|| pool.take().map(|lease| Box::new(lease) as Box<dyn lode_core::gate::EntailmentScorer + '_>)),
            None => ScorerSlot::None,
        };
        let dense_failed = self.dense_failed(dense_failed, unusable.is_some());
        let mut answer = lode_answer::answer_gathered(&store, &question, origin.as_deref(), &cfg, &rules, &synthesizer, items, &mut scorer)
            .map_err(|e| e.to_string())?;
        drop(scorer);
        shortfalls.tell(&mut answer);
        let lexical_because = unusable.or(dense_failed.map(|e| format!("dense retrieval failed ({e})")));
        if let Some(why) = lexical_because {
            let said = format!("{why}; this answer comes from lexical search only.");
            answer.notice = Some(match answer.notice.take() {
                Some(n) => format!("{n} {said}"),
                None => said,
            });
        }
        crate::memory::trim();
        if let crate::lookup::Audience::Remote { destination } = &audience {
            let redacted = redact_answer(&store, &mut answer);
            let passages: Vec<i64> = Vec::new();
            let bytes = serde_json::to_string(&answer).map_or(0, |s| s.len() as u64);
            if let Err(e) = store.log_egress(destination, "answer", &passages, bytes, redacted as u64) {
                tracing::warn!("the egress log could not be written: {e}");
            }
        }
        Ok(answer)
    }

    /// What an answer must say about saves it could not see: `all_saved` false when saves sent
    /// before the question were still being written when it was answered; and the saves the
    /// writer holds because the store would not take them (a lock, a full disk).
    pub fn unsaved_notice(&self, all_saved: bool) -> Option<String> {
        let unsaved = self.writer.unsaved();
        let mut said: Vec<String> = Vec::new();
        if !all_saved {
            said.push(
                "saves sent before this question are still being written; this answer comes from what was indexed before them.".into(),
            );
        }
        if !unsaved.is_empty() {
            let list: Vec<String> = unsaved.iter().map(|u| format!("{} ({})", u.path, u.error)).collect();
            said.push(format!(
                "{} save{} not indexed yet, kept and retried: {}; this answer does not include {}.",
                unsaved.len(),
                if unsaved.len() == 1 { " is" } else { "s are" },
                list.join("; "),
                if unsaved.len() == 1 { "it" } else { "them" }
            ));
        }
        (!said.is_empty()).then(|| said.join(" "))
    }

    /// The vector table's one health check, as a read sees it: a dense leg that failed (or a
    /// table found unusable) asks the vector thread to read the whole table before its next
    /// round and mend it if it cannot be read; the caller has already fallen back to lexical
    /// search and says so. Returns the failure, for the caller's notice.
    pub(crate) fn dense_failed(&self, failed: Option<String>, unusable: bool) -> Option<String> {
        if let Some(e) = &failed {
            tracing::warn!("the dense leg failed: {e}");
        }
        if failed.is_some() || unusable {
            self.dense_off.lock().check_asked = true;
            self.kick();
        }
        failed
    }

    /// What the index holds and how fresh it is: notes, passages, passages with vectors,
    /// whether a scan is running, dense retrieval and the other models, trust notices.
    pub fn status(&self) -> Result<Value, String> {
        // The config as it reads now (an approval given since shows at once).
        let _ = self.rules_now();
        let store = self.readers.get()?;
        let stats = store.stats().map_err(|e| e.to_string())?;
        // Not the models' lock: the vector thread holds it for as long as it embeds.
        let (dense, unusable) = {
            let mut d = self.dense_off.lock();
            let unusable = d.unusable();
            (d.clone(), unusable)
        };
        if dense.check_asked {
            self.kick();
        }
        let model = dense.model.clone();
        let fresh = match &model {
            Some(m) => Some(store.vector_freshness(m).map_err(|e| e.to_string())?),
            None => None,
        };
        // A table gone under the server holds no vectors, whatever the bookkeeping says
        // until the vector thread has reset it.
        let gone = dense.table.as_ref().is_some_and(|t| !t.is_dir());
        let fresh = fresh.map(|mut f| {
            if gone {
                f.with_vectors = 0;
                f.windows = 0;
            }
            f
        });
        Ok(json!({
            "vault": self.root, "notes": stats.notes, "passages": stats.passages,
            "scanning": self.scanning(),
            "trust": match self.trust_notices() { n if n.is_empty() => json!("ok"), n => json!(n.join(" ")) },
            "unsaved": self.writer.unsaved(),
            "reranker": self.reranker.as_ref().map_or(json!("off (no [models] reranker)"), |p| p.status()),
            "nli": self.nli.as_ref().map_or(json!("off (no [models] nli)"), |p| p.status()),
            "shared": self.settings.ask.shared.as_ref().map_or(json!("off (no [shared] index)"), |t| t.peek()),
            "dense": match (&model, self.settings.vectors.is_some()) {
                (Some(m), _) => {
                    let mut d = json!({"model": m, "with_vectors": fresh.map(|f| f.with_vectors), "windows": fresh.map(|f| f.windows)});
                    // Every passage has its vector and the table answers: dense search is whole.
                    d["complete"] = json!(unusable.is_none() && fresh.is_some_and(|f| f.passages > 0 && f.with_vectors >= f.passages));
                    // Whether the embedder is in memory now (released while unused, it is
                    // loaded again by the next question or save). Unknown while the vector
                    // thread holds it: then it is loaded.
                    d["resident"] = json!(self.dense.try_lock().is_none_or(|g| g.as_ref().is_some_and(|(r, _)| r.is_loaded())));
                    if let Some(why) = &dense.mended {
                        d["mended"] = json!(why);
                    }
                    if let Some(why) = unusable {
                        d["lexical_only"] = json!(why);
                    }
                    if let Some(to) = &dense.switching_to {
                        let f = store.vector_freshness(to).map_err(|e| e.to_string())?;
                        d["switching"] = json!({"to": to, "with_vectors": f.with_vectors, "windows": f.windows});
                    }
                    d
                }
                (None, true) => match dense.off {
                    Some(why) => json!(format!("off: {why} (fix: `lode setup`; `lode doctor` for details)")),
                    None => json!("loading the embedding model"),
                },
                (None, false) => json!("off (no embedder configured)"),
            },
        }))
    }
}

/// Redacts secrets from every text of an answer bound off the machine; how many. A quote is
/// masked where its version holds a secret, whatever part of the secret the quote holds.
fn redact_answer(store: &lode_store::Store, answer: &mut lode_answer::Answer) -> usize {
    let mut n = 0;
    // Each version's text and its secrets, read once.
    let mut versions: HashMap<String, (String, Vec<(std::ops::Range<usize>, &'static str)>)> = HashMap::new();
    let mut mask = |version_id: &str, range: std::ops::Range<usize>, text: &mut String| -> usize {
        let (body, secrets) = versions.entry(version_id.to_owned()).or_insert_with(|| {
            let body = store.version_body(version_id).ok().flatten().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            let secrets = lode_answer::egress::secrets::secret_spans(&body);
            (body, secrets)
        });
        if !secrets.iter().any(|(s, _)| s.start < range.end && range.start < s.end) {
            return 0;
        }
        // The window touches a secret: what is sent is the version's own bytes there, masked
        // (a quote may be the version's text with its whitespace read apart).
        let Some(window) = body.get(range.clone()) else {
            *text = "[REDACTED]".into();
            return 1;
        };
        let (masked, k) = lode_answer::egress::secrets::mask_spans(window, range, secrets);
        *text = masked;
        k
    };
    for cit in answer.claims.iter_mut().flat_map(|c| c.citations.iter_mut()) {
        n += mask(&cit.version_id, cit.start..cit.end, &mut cit.quoted_span);
    }
    for r in &mut answer.related {
        n += mask(&r.version_id, r.start..r.end, &mut r.text);
    }
    let mut red = |s: &mut String| {
        let (t, k) = lode_answer::egress::secrets::redact(s);
        *s = t;
        n += k;
    };
    for c in &mut answer.claims {
        red(&mut c.text);
        for t in [c.unverified_text.as_mut(), c.reason.as_mut(), c.why.as_mut()].into_iter().flatten() {
            red(t);
        }
        for cit in &mut c.citations {
            red(&mut cit.quoted_span);
            red(&mut cit.context);
            red(&mut cit.path);
        }
    }
    for d in &mut answer.dropped {
        red(&mut d.text);
        red(&mut d.reason);
    }
    for r in &mut answer.related {
        red(&mut r.text);
        red(&mut r.path);
    }
    n
}

/// The `fetch_url` tool inside the engine: fetches on the ask's own blocking thread, stores the
/// page through the single writer (never from a read connection) and waits for the commit.
struct EngineFetcher(Arc<Engine>);

impl std::fmt::Debug for EngineFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EngineFetcher({})", self.0.root.display())
    }
}

impl lode_answer::Fetcher for EngineFetcher {
    fn fetch_snapshot(&self, url: &str, cancel: Option<&Arc<AtomicBool>>) -> Result<lode_answer::StoredPage, String> {
        // A model's fetch never reaches loopback or private networks, whatever the settings say.
        let opts = lode_externals::FetchOptions { cancel: cancel.cloned(), ..self.0.settings.externals.fetch.clone() }.for_model();
        let fetched = lode_externals::fetch(url, &opts);
        // Not through the writer: a cancelled ask waits behind no queued save.
        if matches!(fetched, Err(lode_externals::FetchError::Cancelled)) {
            return Err("cancelled".into());
        }
        let final_url = fetched.as_ref().map(|f| f.final_url.clone()).unwrap_or_else(|_| url.to_owned());
        let (_, rx) = self.0.writer.submit(Job::Snapshot { url: url.to_owned(), via: lode_store::Via::Ask, fetched });
        match rx.blocking_recv() {
            Ok(Done::Recorded(lode_externals::Recorded::Saved(s))) => {
                self.0.kick();
                Ok(lode_answer::StoredPage { final_url, note_id: s.note_id, version_id: s.snapshot_id })
            }
            Ok(Done::Recorded(lode_externals::Recorded::Failed(e))) => Err(e.to_string()),
            Ok(Done::Failed(e)) => Err(format!("storing the page failed: {e}")),
            Ok(other) => Err(format!("unexpected writer result {other:?}")),
            Err(_) => Err("the writer stopped".into()),
        }
    }
}
