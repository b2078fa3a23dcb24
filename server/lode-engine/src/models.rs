//! The cross-encoder (rerank) and entailment (NLI) models of a vault, as `lode ask` uses them:
//! each loaded on first use, inside an ask's blocking work (never on the message loop), lent to
//! one ask at a time from a pool of up to [`COPIES`] copies, so concurrent asks score side by
//! side instead of queueing behind one lock, and dropped when the client goes.
//!
//! Invariants: a model that failed to load stays failed for the server's life (the reason is in
//! `lode/status`, and an ask goes on without it, as `lode ask` does); a copy is only ever used by
//! the ask holding its lease; after [`Pool::release`] nothing is loaded or lent again.

use std::path::PathBuf;

use parking_lot::{Condvar, Mutex};
use serde_json::{json, Value};

/// Where a model is and how to run it.
#[derive(Clone, Debug)]
pub struct ModelSettings {
    pub dir: PathBuf,
    pub runtime: Option<PathBuf>,
    pub threads: usize,
}

/// Copies of one model at most: on two cores, two asks score at once; a third waits for a copy.
/// Each copy costs the model's weights again (tens of MB for the small cross-encoders).
const COPIES: usize = 2;

/// A model lode can pool: how to load it, and its id.
pub trait Pooled: Sized + Send {
    fn load(s: &ModelSettings) -> Result<Self, String>;
    fn id(&self) -> String;
}

impl Pooled for lode_models::CrossEncoder {
    fn load(s: &ModelSettings) -> Result<Self, String> {
        lode_models::CrossEncoder::load(&s.dir, s.runtime.as_deref(), s.threads).map_err(|e| e.to_string())
    }
    fn id(&self) -> String {
        lode_models::CrossEncoder::id(self).to_owned()
    }
}

impl Pooled for lode_models::NliModel {
    fn load(s: &ModelSettings) -> Result<Self, String> {
        lode_models::NliModel::load(&s.dir, s.runtime.as_deref(), s.threads).map_err(|e| e.to_string())
    }
    fn id(&self) -> String {
        lode_models::NliModel::id(self).to_owned()
    }
}

pub struct Pool<T> {
    settings: ModelSettings,
    state: Mutex<PoolState<T>>,
    returned: Condvar,
}

struct PoolState<T> {
    /// Copies not lent, with when each came back.
    idle: Vec<(T, std::time::Instant)>,
    /// Copies loaded (or loading), lent or idle.
    made: usize,
    id: Option<String>,
    failed: Option<String>,
    closed: bool,
    /// Copies released for idleness so far (for `lode/status`).
    released: usize,
}

/// One copy, lent to one ask; back to the pool when dropped.
pub struct Lease<'a, T> {
    pool: &'a Pool<T>,
    item: Option<T>,
}

impl<T> std::ops::Deref for Lease<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.item.as_ref().expect("a lease holds its copy until dropped")
    }
}

impl<T> std::ops::DerefMut for Lease<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.item.as_mut().expect("a lease holds its copy until dropped")
    }
}

impl<T> Drop for Lease<'_, T> {
    fn drop(&mut self) {
        let Some(item) = self.item.take() else { return };
        let mut st = self.pool.state.lock();
        if st.closed {
            st.made -= 1;
        } else {
            st.idle.push((item, std::time::Instant::now()));
        }
        drop(st);
        self.pool.returned.notify_one();
    }
}

impl lode_core::gate::EntailmentScorer for Lease<'_, lode_models::NliModel> {
    fn entailment(&mut self, premise: &str, hypothesis: &str) -> Result<f32, String> {
        lode_core::gate::EntailmentScorer::entailment(&mut **self, premise, hypothesis)
    }
}

impl<T: Pooled> Pool<T> {
    pub fn new(settings: ModelSettings) -> Pool<T> {
        Pool {
            settings,
            state: Mutex::new(PoolState { idle: Vec::new(), made: 0, id: None, failed: None, closed: false, released: 0 }),
            returned: Condvar::new(),
        }
    }

    /// A copy for one ask: an idle one, else a new one (loaded here, blocking: call it off the
    /// message loop) while there are fewer than [`COPIES`], else the next one returned.
    pub fn take(&self) -> Result<Lease<'_, T>, String> {
        let mut st = self.state.lock();
        loop {
            if st.closed {
                return Err("the server is shutting down".into());
            }
            if let Some(e) = &st.failed {
                return Err(e.clone());
            }
            if let Some((item, _)) = st.idle.pop() {
                return Ok(Lease { pool: self, item: Some(item) });
            }
            if st.made < COPIES {
                st.made += 1;
                drop(st);
                let settings = &self.settings;
                let loaded = std::panic::catch_unwind(|| T::load(settings)).unwrap_or_else(|_| Err("loading the model panicked".into()));
                let mut st = self.state.lock();
                return match loaded {
                    Ok(item) => {
                        st.id.get_or_insert_with(|| item.id());
                        Ok(Lease { pool: self, item: Some(item) })
                    }
                    Err(e) => {
                        st.made -= 1;
                        st.failed = Some(e.clone());
                        drop(st);
                        self.returned.notify_all();
                        Err(e)
                    }
                };
            }
            self.returned.wait(&mut st);
        }
    }

    /// For `lode/status`: where the model is, its id and copies once loaded, or why it failed.
    pub fn status(&self) -> Value {
        let st = self.state.lock();
        let state = match (&st.failed, st.made) {
            (Some(e), _) => format!("failed: {e}"),
            (None, 0) if st.released > 0 => "released while unused; loaded again on next use".to_owned(),
            (None, 0) => "configured; loaded on first use".to_owned(),
            (None, n) => format!("loaded ({n} cop{})", if n == 1 { "y" } else { "ies" }),
        };
        json!({"path": self.settings.dir, "id": st.id, "state": state, "loaded": st.made, "error": st.failed})
    }

    /// Drops the idle copies and lends no more (lent ones are dropped when returned).
    pub fn release(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        let idle = std::mem::take(&mut st.idle);
        st.made -= idle.len();
        drop(st);
        drop(idle);
        self.returned.notify_all();
    }

    /// Drops the copies unused for `after` (loaded again by the next ask that needs one):
    /// whether any was dropped.
    pub fn release_idle(&self, after: std::time::Duration) -> bool {
        let mut st = self.state.lock();
        let (old, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut st.idle).into_iter().partition(|(_, at)| at.elapsed() >= after);
        st.idle = keep;
        st.made -= old.len();
        st.released += old.len();
        drop(st);
        let any = !old.is_empty();
        if any {
            tracing::info!("{} released after {} s unused", self.settings.dir.display(), after.as_secs());
        }
        drop(old);
        any
    }
}
