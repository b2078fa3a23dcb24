//! The embedding worker: brings the vector index in line with the head passages — deletes
//! vectors of passages that left, embeds passages that lack one, in batches. Everything it needs
//! to resume is in SQLite, so a crash or restart only means running it again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use lode_models::Embedder;
use lode_store::{PendingPassage, Store};

use crate::index::{placeholder_vector, VectorIndex, VectorRow, WITHHELD};
use crate::RetrievalError;

/// What may go to an embedder off this machine. The door running the worker knows the egress
/// rules (`lode-answer`); the worker asks it about every passage before its text is sent, and a
/// worker whose embedder sends off the machine without one sends nothing (fail closed).
pub trait Outbound: Send + std::marker::Sync {
    /// Why the note at `path` may not leave this machine, if so (asked once per note a round).
    fn note_withheld(&self, store: &Store, path: &str) -> Option<String>;
    /// Why the passage `text` of that note may not, by the marks in its own bytes.
    fn passage_withheld(&self, path: &str, text: &str) -> Option<String>;
    /// `text` (bytes `range` of version `version_id`) with every secret the whole version holds
    /// masked, and how many: rules that need context (a table's header, a key line above a
    /// block) see the version, not the passage.
    fn mask(&self, store: &Store, version_id: &str, range: std::ops::Range<usize>, text: &str) -> (String, usize);
    /// Why nothing may leave now (a config being written, the vault closing): the round fails
    /// and is retried, rather than withholding for good what is only held up.
    fn blocked(&self) -> Option<String> {
        None
    }
}

/// Passages fetched and embedded per round: a round is what a just-saved note waits behind
/// (and what a question waits for before it can embed itself).
const ROUND: usize = 96;

/// A pass of this many rounds or more compacts the table when it ends (each round added a file),
/// and a long pass compacts every `COMPACT_EVERY` rounds on the way.
const COMPACT_AFTER: usize = 16;
const COMPACT_EVERY: usize = 128;

/// Tokens a round embeds at most (at least one window): a round is what a just-saved note may
/// wait behind, about half a second of MiniLM on two cores.
const ROUND_TOKENS: usize = 2_560;

/// Default size of an embedding window, in model tokens (heading included).
pub const WINDOW_TOKENS: usize = 128;

/// Groups passages (in note and document order) into embedding windows: runs of passages that
/// are consecutive in one section (same note, same heading, adjacent ordinals), each window at
/// most `budget` tokens (`tokens[i]` counts passage `i`, `heading[i]` its heading). A passage
/// over the budget is a window of its own. Returns index lists, in input order.
pub fn windows(batch: &[PendingPassage], tokens: &[usize], heading: &[usize], budget: usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut used = 0usize;
    for (i, p) in batch.iter().enumerate() {
        let joins = out.last().and_then(|w| w.last()).is_some_and(|&j| {
            let q = &batch[j];
            q.note_id == p.note_id && q.heading == p.heading && q.ordinal + 1 == p.ordinal && used + tokens[i] < budget
        });
        if joins {
            out.last_mut().expect("joins implies a window").push(i);
            used += tokens[i] + 1;
        } else {
            out.push(vec![i]);
            used = heading[i] + 1 + tokens[i];
        }
    }
    out
}

/// A batch (in note and document order) grouped into windows of at most `window_tokens` model
/// tokens (see [`windows`]; never more than the model reads), each with its cost in tokens: its
/// heading once, then each passage and a separator.
pub fn plan_windows(
    embedder: &Embedder,
    batch: &[PendingPassage],
    window_tokens: usize,
) -> Result<Vec<(Vec<usize>, usize)>, RetrievalError> {
    let tokens = embedder.token_counts(&batch.iter().map(|p| p.passage.as_str()).collect::<Vec<_>>())?;
    let heading = embedder.token_counts(&batch.iter().map(|p| p.heading.as_str()).collect::<Vec<_>>())?;
    let budget = window_tokens.min(embedder.max_length().saturating_sub(2)).max(1);
    Ok(windows(batch, &tokens, &heading, budget)
        .into_iter()
        .map(|w| {
            let cost = heading[w[0]] + w.iter().map(|&i| tokens[i] + 1).sum::<usize>();
            (w, cost)
        })
        .collect())
}

/// What a window embeds: its heading once, then its passages, one per line.
pub fn window_text(batch: &[PendingPassage], w: &[usize]) -> String {
    embedded_text(&batch[w[0]].heading, w.iter().map(|&i| batch[i].passage.as_str()))
}

/// The model input for passages under `heading`: the heading once, then each passage, one
/// per line (what [`window_text`] builds, and what a passage embedded at query time gets).
pub(crate) fn embedded_text<'a>(heading: &str, passages: impl IntoIterator<Item = &'a str>) -> String {
    let mut text = heading.to_owned();
    for p in passages {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(p);
    }
    text
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SyncReport {
    /// Passages that got a vector.
    pub embedded: usize,
    /// Vectors made: one per embedding window.
    pub windows: usize,
    /// Tokens the model read (headings included).
    pub tokens: usize,
    /// Seconds spent in the model (tokenizing included).
    pub model_seconds: f64,
    pub rounds: usize,
    /// The longest round: what a just-saved note can wait before its own round starts.
    pub round_seconds_max: f64,
    pub deleted: usize,
    /// The index had lost vectors the bookkeeping recorded (folder deleted or damaged): they
    /// were rebuilt from the passages.
    pub rebuilt: bool,
    pub seconds: f64,
}

/// One pass of bringing the vector index in line, in rounds a caller can interleave with other
/// work (the language server releases the models between rounds so questions can embed).
pub struct Sync {
    model: String,
    started: Instant,
    /// Notes before this one have nothing pending unless a save added passages since: the
    /// backlog is read from here on, and from the start once more before the pass ends.
    cursor: i64,
    /// Embedding window size in tokens (a window of one passage may be longer).
    pub window_tokens: usize,
    /// Passages lacking a vector when the pass started (progress is out of this).
    pub total: usize,
    pub report: SyncReport,
    /// Required when the embedder sends off the machine (see [`Outbound`]).
    pub outbound: Option<Arc<dyn Outbound>>,
}

impl Sync {
    /// Rebuilds a lost index's bookkeeping, applies queued deletions, and counts the work.
    pub fn start(store: &mut Store, index: &VectorIndex, model: &str) -> Result<Sync, RetrievalError> {
        let started = Instant::now();
        let mut report = SyncReport::default();
        // The table must hold every recorded window, and nothing else but rows queued for
        // deletion. Fewer: the folder lost data. More: the bookkeeping was reset without it.
        // Either way both are rebuilt from the passages.
        let fresh = store.vector_freshness(model)?;
        let rows = index.count()? as i64;
        let queued = store.vector_deletions(model)?.len() as i64;
        if rows < fresh.windows || rows > fresh.windows + queued {
            index.clear()?;
            store.reset_vectors(Some(model))?;
            report.rebuilt = true;
        }
        let gone = store.vector_deletions(model)?;
        if !gone.is_empty() {
            index.delete(&gone)?;
            store.clear_vector_deletions(model, &gone)?;
            report.deleted = gone.len();
        }
        let fresh = store.vector_freshness(model)?;
        let total = (fresh.passages - fresh.with_vectors).max(0) as usize;
        Ok(Sync { model: model.to_owned(), started, cursor: 0, window_tokens: WINDOW_TOKENS, total, report, outbound: None })
    }

    /// Embeds one round: passages of the notes at `first` before any other. Returns whether it
    /// found anything to do (`false`: every head passage has a vector).
    pub fn round(
        &mut self,
        store: &mut Store,
        index: &VectorIndex,
        embedder: &mut Embedder,
        first: &[String],
    ) -> Result<bool, RetrievalError> {
        let mut batch = if first.is_empty() { Vec::new() } else { store.pending_vectors_of(&self.model, first, ROUND)? };
        let backlog = batch.is_empty();
        if backlog {
            batch = store.pending_vectors(&self.model, self.cursor, ROUND)?;
            if batch.is_empty() && self.cursor > 0 {
                self.cursor = 0;
                batch = store.pending_vectors(&self.model, 0, ROUND)?;
            }
            // A full batch may end inside a note: that note's passages wait for the next round
            // (whole sections make whole windows), unless it is the only note in the batch.
            if batch.len() == ROUND {
                let last = batch[batch.len() - 1].note_id;
                if batch[0].note_id != last {
                    batch.retain(|p| p.note_id != last);
                }
            }
        }
        if batch.is_empty() {
            return Ok(false);
        }
        let round_started = Instant::now();
        let t = Instant::now();
        let mut planned = plan_windows(embedder, &batch, self.window_tokens)?;
        // Bound the round's work (at least one window); the rest stays pending for the next.
        let mut spent = 0;
        let keep = planned
            .iter()
            .take_while(|(_, cost)| {
                spent += cost;
                spent <= ROUND_TOKENS
            })
            .count()
            .max(1);
        planned.truncate(keep);
        let (windows, costs): (Vec<Vec<usize>>, Vec<usize>) = planned.into_iter().unzip();
        if backlog {
            // Windows are a prefix of the batch (note and document order): every pending passage
            // of notes before the first one left out has been embedded.
            let next = windows.iter().flatten().max().map_or(0, |&i| i + 1);
            self.cursor = batch.get(next).unwrap_or(&batch[batch.len() - 1]).note_id;
        }
        // Each window's text, or `None`: none of its passages may leave the machine.
        let texts: Vec<Option<String>> = if embedder.sends_off_machine() {
            self.screen(store, embedder, &batch, &windows)?
        } else {
            windows.iter().map(|w| Some(window_text(&batch, w))).collect()
        };
        let refs: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
        let mut vectors = embedder.embed_passages(&refs)?.into_iter();
        self.report.model_seconds += t.elapsed().as_secs_f64();
        self.report.tokens += costs.iter().sum::<usize>();
        let mut rows: Vec<VectorRow> = Vec::with_capacity(windows.len());
        for (w, text) in windows.iter().zip(&texts) {
            let p = &batch[w[0]];
            let (vector, version_id) = match text {
                Some(_) => {
                    (vectors.next().ok_or_else(|| RetrievalError::Unavailable("fewer vectors than windows".into()))?, p.version_id.clone())
                }
                None => (placeholder_vector(embedder.dimensions()), format!("{WITHHELD}{}", p.version_id)),
            };
            rows.push(VectorRow { passage_id: p.id, note_id: p.note_id, version_id, vector });
        }
        // Only leaders whose earlier window is queued for deletion can have a row already; the
        // others are queued first, so a crash before they are recorded leaves no orphan rows.
        let leaders: Vec<i64> = rows.iter().map(|r| r.passage_id).collect();
        let stale = store.queued_deletions(&self.model, &leaders)?;
        index.delete(&stale)?;
        store.queue_vector_deletions(&self.model, &leaders)?;
        index.add(&rows)?;
        let members: Vec<Vec<i64>> = windows.iter().map(|w| w.iter().map(|&i| batch[i].id).collect()).collect();
        store.mark_windows(&self.model, &members)?;
        self.report.embedded += members.iter().map(Vec::len).sum::<usize>();
        self.report.windows += windows.len();
        self.report.rounds += 1;
        if self.report.rounds.is_multiple_of(COMPACT_EVERY) {
            index.compact()?;
        }
        self.report.round_seconds_max = self.report.round_seconds_max.max(round_started.elapsed().as_secs_f64());
        Ok(true)
    }

    /// For an embedder off this machine: each window's text without the passages that may not
    /// leave it (`None`: none may), its secrets masked; what is sent goes in the egress log.
    fn screen(
        &mut self,
        store: &Store,
        embedder: &Embedder,
        batch: &[PendingPassage],
        windows: &[Vec<usize>],
    ) -> Result<Vec<Option<String>>, RetrievalError> {
        let Some(outbound) = self.outbound.clone() else {
            return Err(RetrievalError::Unavailable(
                "the embedder sends off this machine and no egress rules were given to this pass: nothing was sent".into(),
            ));
        };
        if let Some(why) = outbound.blocked() {
            return Err(RetrievalError::Unavailable(format!("nothing was sent to the embedding server: {why}")));
        }
        // Per note: its path, if the index has it and the note may leave the machine.
        let mut notes: HashMap<i64, Option<String>> = HashMap::new();
        let (mut sent, mut bytes, mut masked) = (Vec::new(), 0u64, 0u64);
        let mut out = Vec::with_capacity(windows.len());
        for w in windows {
            let mut keep = Vec::new();
            for &i in w {
                let p = &batch[i];
                let path = match notes.get(&p.note_id) {
                    Some(v) => v.clone(),
                    None => {
                        // A note the index no longer knows is withheld: its rules cannot be read.
                        let v = store.note_path(p.note_id)?.filter(|path| outbound.note_withheld(store, path).is_none());
                        notes.insert(p.note_id, v.clone());
                        v
                    }
                };
                let ok = path.is_some_and(|path| outbound.passage_withheld(&path, &p.passage).is_none());
                if ok {
                    keep.push(i);
                }
            }
            if keep.is_empty() {
                out.push(None);
                continue;
            }
            let heading = &batch[keep[0]].heading;
            let mut found = 0;
            let passages: Vec<String> = keep
                .iter()
                .map(|&i| {
                    let p = &batch[i];
                    let (t, n) = outbound.mask(store, &p.version_id, p.start..p.end, &p.passage);
                    found += n;
                    t
                })
                .collect();
            let (text, n) = embedder.scrub(&embedded_text(heading, passages.iter().map(String::as_str)));
            let n = n + found;
            sent.extend(keep.iter().map(|&i| batch[i].id));
            bytes += text.len() as u64;
            masked += n as u64;
            out.push(Some(text));
        }
        if !sent.is_empty() {
            store.log_egress(embedder.destination().unwrap_or("embedding server"), "embed passages", &sent, bytes, masked)?;
        }
        Ok(out)
    }

    /// For an embedder off this machine: windows that were withheld (placeholder rows) in notes
    /// that may leave the machine now (a no-egress pattern removed, a flag taken off without the
    /// text changing) are made pending again, so this pass embeds them. Returns how many.
    /// Reads the table's placeholder rows: run once per process (`lode index`, a server's first
    /// pass), not every round.
    pub fn release_withheld(&mut self, store: &mut Store, index: &VectorIndex, embedder: &Embedder) -> Result<usize, RetrievalError> {
        let Some(outbound) = self.outbound.clone().filter(|_| embedder.sends_off_machine()) else { return Ok(0) };
        if outbound.blocked().is_some() {
            return Ok(0);
        }
        let rows = index.withheld_rows()?;
        let mut verdict: HashMap<i64, bool> = HashMap::new();
        let mut leaders = Vec::new();
        for (leader, note) in rows {
            let free = match verdict.get(&note) {
                Some(&v) => v,
                None => {
                    let v = store.note_path(note)?.is_some_and(|path| outbound.note_withheld(store, &path).is_none());
                    verdict.insert(note, v);
                    v
                }
            };
            if free {
                leaders.push(leader);
            }
        }
        if leaders.is_empty() {
            return Ok(0);
        }
        store.release_windows(&self.model, &leaders)?;
        index.delete(&leaders)?;
        store.clear_vector_deletions(&self.model, &leaders)?;
        let fresh = store.vector_freshness(&self.model)?;
        self.total = (fresh.passages - fresh.with_vectors).max(0) as usize;
        Ok(leaders.len())
    }

    /// Passages embedded so far out of [`Sync::total`] (saves during the pass may add more).
    pub fn done(&self) -> usize {
        self.report.embedded.min(self.total)
    }

    /// Ends the pass: once this model is complete, vectors of any other model are dropped.
    pub fn finish(mut self, store: &mut Store, index: &VectorIndex) -> Result<SyncReport, RetrievalError> {
        // Windows that could not be recorded (a member left mid-round) are dropped now.
        let gone = store.vector_deletions(&self.model)?;
        if !gone.is_empty() {
            index.delete(&gone)?;
            store.clear_vector_deletions(&self.model, &gone)?;
            self.report.deleted += gone.len();
        }
        // Complete: other models' bookkeeping and tables go. The tables are looked at every time
        // (a listing): a crash between the two steps must not leave a table behind for good.
        let fresh = store.vector_freshness(&self.model)?;
        if fresh.with_vectors == fresh.passages {
            store.drop_other_models(&self.model)?;
            index.drop_other_tables()?;
        }
        if self.report.rounds >= COMPACT_AFTER {
            index.compact()?;
            // A large table gets (or updates) its approximate index once a pass has added to it.
            index.maintain_ann()?;
        }
        self.report.seconds = self.started.elapsed().as_secs_f64();
        Ok(self.report)
    }
}

/// Runs until every head passage has a vector for the embedder's model. `progress(done, total)`
/// is called after every round; returning `false` from `keep_going` stops between rounds.
pub fn sync_vectors(
    store: &mut Store,
    index: &VectorIndex,
    embedder: &mut Embedder,
    window_tokens: usize,
    outbound: Option<Arc<dyn Outbound>>,
    mut progress: impl FnMut(usize, usize),
    mut keep_going: impl FnMut() -> bool,
) -> Result<SyncReport, RetrievalError> {
    let model = embedder.id().to_owned();
    let mut sync = Sync::start(store, index, &model)?;
    sync.window_tokens = window_tokens;
    sync.outbound = outbound;
    sync.release_withheld(store, index, embedder)?;
    progress(0, sync.total);
    while keep_going() {
        if !sync.round(store, index, embedder, &[])? {
            break;
        }
        progress(sync.done(), sync.total);
    }
    sync.finish(store, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: i64, note: i64, ordinal: i64, heading: &str) -> PendingPassage {
        PendingPassage {
            id,
            note_id: note,
            version_id: String::new(),
            ordinal,
            heading: heading.into(),
            passage: String::new(),
            text: String::new(),
            start: 0,
            end: 0,
        }
    }

    #[test]
    fn windows_stay_inside_one_section_of_one_note_and_within_budget() {
        let batch = [
            p(1, 1, 0, "A"),
            p(2, 1, 1, "A"),
            p(3, 1, 2, "A"),     // budget reached before this one
            p(4, 1, 3, "A › B"), // another section
            p(5, 1, 5, "A › B"), // ordinal 4 is not pending (it has a vector): not adjacent
            p(6, 2, 0, "A › B"), // another note, same heading text
            p(7, 2, 1, "A › B"),
            p(8, 3, 0, "C"), // longer than the budget on its own
        ];
        let tokens = [10, 10, 10, 5, 5, 5, 5, 500];
        let heading = [2, 2, 2, 4, 4, 4, 4, 1];
        let w = windows(&batch, &tokens, &heading, 26);
        // 2 + 1 + 10 = 13, + 11 = 24 ≤ 26, + 11 = 35 > 26.
        assert_eq!(w, vec![vec![0, 1], vec![2], vec![3], vec![4], vec![5, 6], vec![7]]);
        // Every passage in exactly one window, in input order.
        assert_eq!(w.concat(), (0..batch.len()).collect::<Vec<_>>());
        assert!(windows(&[], &[], &[], 128).is_empty());
    }
}
