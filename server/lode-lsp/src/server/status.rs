//! `lode/status`: what the index holds and how fresh it is.

use super::*;

impl Backend {
    /// What the index holds and how fresh it is: notes, passages, passages with vectors, whether
    /// the first scan is still running and whether dense retrieval is on.
    pub(super) async fn lode_status(&self, _: Value) -> Result<Value> {
        let state = self.state().await?;
        // `$/cancelRequest` (or a client that goes away) drops this future; the guard then
        // tells the blocking work to stop, and the LLM wait is abandoned at once.
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _guard = CancelOnDrop(cancel.clone());
        let st = state.clone();
        let folders = self.folders.lock().clone().unwrap_or_default();
        blocking(move || {
            // The config as it reads now (an approval given since shows at once).
            let _ = st.rules_now();
            let store = st.readers.get()?;
            let stats = store.stats().map_err(|e| e.to_string())?;
            // Not the models' lock: the vector thread holds it for as long as it embeds.
            let (dense, unusable) = {
                let mut d = st.dense_off.lock();
                let unusable = d.unusable();
                (d.clone(), unusable)
            };
            if dense.check_asked {
                st.kick();
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
                "vault": st.root, "vaults": folders, "notes": stats.notes, "passages": stats.passages,
                "scanning": st.scanning.load(Ordering::SeqCst),
                "trust": match st.trust_notices() { n if n.is_empty() => json!("ok"), n => json!(n.join(" ")) },
                "unsaved": st.writer.unsaved(),
                "reranker": st.reranker.as_ref().map_or(json!("off (no [models] reranker)"), |p| p.status()),
                "nli": st.nli.as_ref().map_or(json!("off (no [models] nli)"), |p| p.status()),
                "shared": st.settings.ask.shared.as_ref().map_or(json!("off (no [shared] index)"), |t| t.peek()),
                "dense": match (&model, st.settings.vectors.is_some()) {
                    (Some(m), _) => {
                        let mut d = json!({"model": m, "with_vectors": fresh.map(|f| f.with_vectors), "windows": fresh.map(|f| f.windows)});
                        // Whether the embedder is in memory now (released while unused, it is
                        // loaded again by the next question or save). Unknown while the vector
                        // thread holds it: then it is loaded.
                        d["resident"] = json!(st.dense.try_lock().map_or(true, |g| g.as_ref().is_some_and(|(r, _)| r.is_loaded())));
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
        })
        .await
    }
}
