//! lode's versioned note store: one SQLite file holding every version of every note, the
//! passages of head versions, their FTS5 index and the link graph; plus vault indexing.
//!
//! Invariants:
//! - versions are immutable and content-addressed (`id` = SHA-256 of the bytes);
//! - only head versions have passages, and passages + FTS5 + links of a note change in one
//!   transaction, so no half-indexed version is ever visible;
//! - a deleted or renamed note keeps its versions.

mod egress;
mod error;
pub mod externals;
mod migrate;
mod prechunk;
mod search;
mod store;
pub mod vault;
mod vectors;

pub use egress::EgressRecord;
pub use error::StoreError;
pub use externals::{ExternalInfo, NewSnapshot, SnapshotOf, SnapshotSaved, Via};
pub use migrate::SCHEMA_VERSION;
pub use prechunk::{Prechunked, MAX_BYTES as PRECHUNK_MAX_BYTES};
pub use search::{Hit, MatchMode, SearchOptions, SearchResult, SharedOrigin, Source};
pub use store::{log_frames, now_ms, DiskStat, NoteInfo, PassageRow, SaveOutcome, SaveStatus, Stats, Store, StoreOptions, Verification};
pub use vectors::{Freshness, PendingPassage};

/// Hex SHA-256 of a note's bytes: its version id.
pub fn version_id(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        use std::fmt::Write;
        let _ = write!(s, "{b:02x}");
    }
    s
}
