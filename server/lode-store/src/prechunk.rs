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

/// Buffers remembered: more than anyone edits at once. One entry per buffer, its latest
/// prepared version; a note over [`MAX_BYTES`] is never prepared, so the cache stays small.
const KEEP: usize = 16;
/// Buffers larger than this are chunked by their save, not ahead: preparing them while the user
/// types would cost more than it saves.
pub const MAX_BYTES: usize = 64 * 1024;

/// Shared between the thread that prepares chunkings and the store that saves (cheap to clone).
#[derive(Clone)]
pub struct Prechunked {
    entries: Arc<Mutex<VecDeque<Entry>>>,
    /// Saves that used a prepared chunking.
    used: Arc<AtomicUsize>,
    /// Entries kept; the oldest goes first.
    keep: usize,
}

impl Default for Prechunked {
    fn default() -> Self {
        Prechunked::with_capacity(KEEP)
    }
}

struct Entry {
    /// Whose buffer this is (the editor's document), so a newer version replaces an older one.
    buffer: String,
    version_id: String,
    cfg: ChunkConfig,
    chunked: Arc<ChunkedNote>,
}

impl Prechunked {
    /// Keeps up to `keep` prepared chunkings (a bulk scan prepares a batch ahead of its writer).
    pub fn with_capacity(keep: usize) -> Prechunked {
        Prechunked { entries: Arc::default(), used: Arc::default(), keep: keep.max(1) }
    }

    /// Keeps a chunking made elsewhere from bytes whose version id is `version_id` (a scan's
    /// reader thread chunks the files its writer is about to save). `buffer` names the file.
    pub fn insert(&self, buffer: &str, version_id: String, cfg: &ChunkConfig, chunked: Arc<ChunkedNote>) {
        let mut q = self.lock();
        q.retain(|e| e.buffer != buffer);
        q.push_back(Entry { buffer: buffer.to_owned(), version_id, cfg: *cfg, chunked });
        while q.len() > self.keep {
            q.pop_front();
        }
    }

    /// Chunks `bytes`, the current text of `buffer`, with `cfg` for a later save of exactly
    /// these bytes. Replaces what was prepared for `buffer` before; does nothing for a buffer
    /// over [`MAX_BYTES`].
    pub fn prepare(&self, buffer: &str, bytes: &[u8], cfg: &ChunkConfig) {
        if bytes.len() > MAX_BYTES {
            return;
        }
        let version_id = crate::version_id(bytes);
        if self.lock().iter().any(|e| e.buffer == buffer && e.version_id == version_id && e.cfg == *cfg) {
            return;
        }
        self.insert(buffer, version_id, cfg, Arc::new(chunk_note(bytes, cfg)));
    }

    /// Removes and returns the chunking of the bytes whose version id is `version_id`, if one
    /// was prepared with `cfg`.
    pub fn take(&self, version_id: &str, cfg: &ChunkConfig) -> Option<Arc<ChunkedNote>> {
        let mut q = self.lock();
        let i = q.iter().position(|e| e.version_id == version_id && e.cfg == *cfg)?;
        let e = q.remove(i)?;
        self.used.fetch_add(1, Ordering::Relaxed);
        Some(e.chunked)
    }

    /// Drops what was prepared for `buffer` (the editor closed it).
    pub fn forget(&self, buffer: &str) {
        self.lock().retain(|e| e.buffer != buffer);
    }

    /// How many saves used a prepared chunking.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
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
        // Prepared with other settings: not used.
        p.prepare("file:///v/plan.md", text.as_bytes(), &ChunkConfig { max_tokens: 50, ..cfg });
        store.save_note("plan.md", text.as_bytes()).unwrap();
        assert_eq!(p.used(), 0);
        store.delete_note("plan.md").unwrap();
        // An older version of the buffer is replaced by the newer one, which a save uses once.
        p.prepare("file:///v/plan.md", b"# Plan\n\nAn older draft.\n", &cfg);
        p.prepare("file:///v/plan.md", text.as_bytes(), &cfg);
        store.save_note("plan.md", text.as_bytes()).unwrap();
        assert_eq!(p.used(), 1);
        assert!(p.take(&crate::version_id(text.as_bytes()), &cfg).is_none(), "a prepared chunking is used once");
        assert!(p.take(&crate::version_id(b"# Plan\n\nAn older draft.\n"), &cfg).is_none(), "replaced by the newer version");
        let fresh = chunk_note(text.as_bytes(), &cfg);
        let stored: Vec<(usize, usize)> = store.passages_of("plan.md").unwrap().into_iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(stored, fresh.passages.iter().map(|x| (x.range.start, x.range.end)).collect::<Vec<_>>());

        // Other bytes of the same text (a BOM, CRLF) are chunked by the save itself.
        p.prepare("file:///v/plan.md", text.as_bytes(), &cfg);
        let bom = format!("\u{feff}{text}");
        store.save_note("plan.md", bom.as_bytes()).unwrap();
        let crlf = text.replace('\n', "\r\n");
        store.save_note("plan.md", crlf.as_bytes()).unwrap();
        assert_eq!(p.used(), 1, "bytes nobody prepared are chunked by the save itself");
        // A large buffer is not prepared; a closed one is forgotten.
        let big = format!("# Big\n\n{}", "word ".repeat(MAX_BYTES / 5 + 1));
        p.prepare("file:///v/big.md", big.as_bytes(), &cfg);
        p.forget("file:///v/plan.md");
        assert!(p.lock().is_empty());
        let with_crlf = store.search("vendor late", &crate::SearchOptions::default()).unwrap();
        assert_eq!(with_crlf.hits.len(), 1);
        assert_eq!(with_crlf.hits[0].text, "The vendor is late.");
    }
}
