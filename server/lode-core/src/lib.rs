//! Protocol-free core of lode: structural chunking, link extraction, frontmatter, lexical query
//! building and text utilities. Speaks byte offsets and plain data; knows nothing of LSP or SQLite.

pub mod chunk;
pub mod citation;
pub mod extractive;
pub mod frontmatter;
pub mod fusion;
pub mod gate;
pub mod links;
pub mod nav;
pub mod query;
pub mod structure;
pub mod text;

pub use chunk::{chunk_note, ChunkConfig, ChunkedNote, Passage, PassageKind};
pub use text::NoteText;
