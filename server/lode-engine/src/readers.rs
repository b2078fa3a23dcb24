//! Read connections for requests. Every read (ask, hover, goto, symbols, status, diagnostics)
//! takes a connection of its own from a small pool — WAL readers are cheap and never block each
//! other — so a slow answer (an LLM taking seconds) never holds up a hover.

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;

use lode_store::{Store, StoreOptions};
use parking_lot::Mutex;

/// Idle connections kept for reuse; more may be open at once, and are closed when returned.
const KEEP_IDLE: usize = 4;

pub struct Readers {
    db: PathBuf,
    opts: StoreOptions,
    idle: Mutex<Vec<Store>>,
}

impl Readers {
    pub fn new(db: PathBuf, opts: StoreOptions, first: Store) -> Arc<Readers> {
        Arc::new(Readers { db, opts, idle: Mutex::new(vec![first]) })
    }

    /// A connection for one read: an idle one, or a new one.
    pub fn get(self: &Arc<Self>) -> Result<Reader, String> {
        let idle = self.idle.lock().pop();
        let store = match idle {
            Some(s) => s,
            None => Store::open(&self.db, self.opts.clone()).map_err(|e| e.to_string())?,
        };
        Ok(Reader { pool: self.clone(), store: Some(store) })
    }

    #[cfg(test)]
    fn idle(&self) -> usize {
        self.idle.lock().len()
    }
}

/// A read connection, back in the pool when dropped (also when its request panicked).
pub struct Reader {
    pool: Arc<Readers>,
    store: Option<Store>,
}

impl Deref for Reader {
    type Target = Store;
    fn deref(&self) -> &Store {
        self.store.as_ref().expect("present until dropped")
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Some(s) = self.store.take() {
            let mut idle = self.pool.idle.lock();
            if idle.len() < KEEP_IDLE {
                idle.push(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_reads_get_their_own_connections() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("lode.db");
        let first = Store::open(&db, StoreOptions::default()).unwrap();
        let pool = Readers::new(db, StoreOptions::default(), first);
        let a = pool.get().unwrap();
        let b = pool.get().unwrap(); // does not wait for `a`
        assert_eq!(pool.idle(), 0);
        assert!(a.notes().unwrap().is_empty() && b.notes().unwrap().is_empty());
        drop(a);
        drop(b);
        assert_eq!(pool.idle(), 2);
        let held: Vec<Reader> = (0..6).map(|_| pool.get().unwrap()).collect();
        drop(held);
        assert_eq!(pool.idle(), KEEP_IDLE, "extra connections are closed, not kept");
    }
}
