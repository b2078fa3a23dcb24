//! Markdown navigation, protocol-free: heading outline and slugs, every navigable item of a note
//! (wiki links, markdown links, references, footnotes, tags), wiki-link resolution over candidate
//! notes, folding ranges and completion contexts. Works on one note's `&str` and byte offsets.
//!
//! Invariants every public function keeps, for any input text and any offset:
//! - it never panics, and every range it returns lies within the text, on char boundaries,
//!   with `start <= end`;
//! - nothing inside code spans, fenced or indented code, HTML blocks, HTML comments or frontmatter
//!   is a link or tag, except the `tags:` entries of frontmatter;
//! - results are in document order and the same text always gives the same results.
//!
//! Block structure comes from the tree-sitter-md block grammar (as in [`crate::chunk`]); inline
//! syntax is scanned by hand (module `inline`), so wiki links, footnotes and tags follow the same
//! precedence as CommonMark links (code spans and raw HTML bind tighter than links, which bind
//! tighter than tags).

pub(crate) mod blocks;
mod complete;
mod fold;
mod inline;
mod items;
mod outline;
mod resolve;
mod slug;

#[cfg(test)]
mod tests;

pub use complete::{completion_context, CompletionContext, CompletionKind};
pub use fold::{folding_ranges, Fold, FoldKind};
pub use inline::may_have_tags;
pub use items::{at, links, normalize_label, tags_in, Dest, Focus, NavItem, NavKind, NavLink, Part};
pub use outline::{find_section, outline, Section};
pub use resolve::{percent_decode, resolve_markdown, resolve_wiki, MatchKind, NoteKey, Resolution};
pub use slug::{slug, Slugger};

/// `offset` clamped into `text` and moved back onto a char boundary.
fn clamp_offset(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while !text.is_char_boundary(o) {
        o -= 1;
    }
    o
}

/// Byte offset of the start of the line holding `offset` (a char boundary).
fn line_start(text: &str, offset: usize) -> usize {
    text[..offset].rfind('\n').map_or(0, |i| i + 1)
}

/// Byte offset of the end of the line holding `offset`, before its `\n` or `\r\n`.
fn line_end(text: &str, offset: usize) -> usize {
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    if end > offset && text.as_bytes()[end - 1] == b'\r' {
        end - 1
    } else {
        end
    }
}

/// `range` without trailing whitespace (never before `range.start`).
fn trim_end_range(text: &str, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let s = &text[range.clone()];
    range.start..range.start + s.trim_end().len()
}

/// `range` without leading and trailing whitespace.
fn trim_range(text: &str, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let s = &text[range.clone()];
    let start = range.start + (s.len() - s.trim_start().len());
    start..start.max(range.start + s.trim_end().len())
}
