//! Chunkings made ahead of a save: the server chunks an open buffer while the user pauses
//! typing, and a save whose bytes are exactly that buffer's skips the parse (tree-sitter is
//! about half of a save's time on a 10 KB note).
//!
//! Invariant: an entry is keyed by the version id (SHA-256) of the bytes it was made from and
//! the chunking settings, so using one is the same as chunking the saved bytes: nothing the
//! editor holds can change what is indexed, only when the work is done.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use lode_core::chunk::{chunk_note, ChunkConfig, ChunkedNote};

/// Buffers remembered: more than anyone edits at once.
const KEEP: usize = 16;

/// Shared between the thread that prepares chunkings and the store that saves (cheap to clone).
#[derive(Clone, Default)]
pub struct Prechunked {
    entries: Arc<Mutex<VecDeque<Entry>>>,
    /// Saves that used a prepared chunking.
    used: Arc<AtomicUsize>,
}

struct Entry {
    version_id: String,
    cfg: ChunkConfig,
    chunked: Arc<ChunkedNote>,
}

impl Prechunked {
    /// Chunks `bytes` with `cfg` for a later save of exactly these bytes.
    pub fn prepare(&self, bytes: &[u8], cfg: &ChunkConfig) {
        let version_id = crate::version_id(bytes);
        if self.find(&version_id, cfg).is_some() {
            return;
        }
        let chunked = Arc::new(chunk_note(bytes, cfg));
        let mut q = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        q.retain(|e| e.version_id != version_id || e.cfg != *cfg);
        q.push_back(Entry { version_id, cfg: *cfg, chunked });
        while q.len() > KEEP {
            q.pop_front();
        }
    }

    /// The chunking of the bytes whose version id is `version_id`, if one was prepared with
    /// `cfg`; counted as used.
    pub fn take(&self, version_id: &str, cfg: &ChunkConfig) -> Option<Arc<ChunkedNote>> {
        let found = self.find(version_id, cfg);
        if found.is_some() {
            self.used.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// How many saves used a prepared chunking.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn find(&self, version_id: &str, cfg: &ChunkConfig) -> Option<Arc<ChunkedNote>> {
        let q = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        q.iter().find(|e| e.version_id == version_id && e.cfg == *cfg).map(|e| e.chunked.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreOptions};

    #[test]
    fn a_save_uses_a_chunking_prepared_from_exactly_its_bytes_and_settings() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("lode.db"), StoreOptions::default()).unwrap();
        let p = Prechunked::default();
        store.set_prechunked(p.clone());
        let cfg = StoreOptions::default().chunk;
        let text = "# Plan\n\nThe launch moves to March.\n\n## Risks\n\nThe vendor is late.\n";
        p.prepare(text.as_bytes(), &cfg);
        // Other settings, and other bytes of the same text (a BOM, CRLF), are other entries.
        p.prepare(text.as_bytes(), &ChunkConfig { max_tokens: 50, ..cfg });
        store.save_note("plan.md", text.as_bytes()).unwrap();
        assert_eq!(p.used(), 1);
        let fresh = chunk_note(text.as_bytes(), &cfg);
        let stored: Vec<(usize, usize)> = store.passages_of("plan.md").unwrap().into_iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(stored, fresh.passages.iter().map(|x| (x.range.start, x.range.end)).collect::<Vec<_>>());

        let bom = format!("\u{feff}{text}");
        store.save_note("plan.md", bom.as_bytes()).unwrap();
        let crlf = text.replace('\n', "\r\n");
        store.save_note("plan.md", crlf.as_bytes()).unwrap();
        assert_eq!(p.used(), 1, "bytes nobody prepared are chunked by the save itself");
        let with_crlf = store.search("vendor late", &crate::SearchOptions::default()).unwrap();
        assert_eq!(with_crlf.hits.len(), 1);
        assert_eq!(with_crlf.hits[0].text, "The vendor is late.");
    }
}
