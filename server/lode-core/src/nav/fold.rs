//! Folding ranges of a note: sections, multi-line lists, fenced code, frontmatter and
//! multi-line HTML comments, as byte ranges that end at the last non-blank character.

use std::ops::Range;

use super::blocks::{self, OpaqueKind};
use super::inline::{self, MaskKind};
use super::outline::outline_in;
use super::trim_end_range;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FoldKind {
    Section,
    List,
    Code,
    Frontmatter,
    Comment,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fold {
    /// From the first byte of the folded block to the end of its last non-blank line; always
    /// spans at least two lines.
    pub range: Range<usize>,
    pub kind: FoldKind,
}

/// The note's folding ranges, sorted by start (outer before inner at the same start).
pub fn folding_ranges(text: &str) -> Vec<Fold> {
    let blocks = blocks::analyse(text);
    let mut out = Vec::new();
    let mut push = |range: Range<usize>, kind: FoldKind| {
        let range = trim_end_range(text, range);
        if text[range.clone()].contains('\n') {
            out.push(Fold { range, kind });
        }
    };
    for s in outline_in(text, &blocks) {
        push(s.range, FoldKind::Section);
    }
    for l in &blocks.lists {
        push(l.clone(), FoldKind::List);
    }
    for (r, kind) in &blocks.opaque {
        match kind {
            OpaqueKind::Fence => push(r.clone(), FoldKind::Code),
            OpaqueKind::Frontmatter => push(r.clone(), FoldKind::Frontmatter),
            OpaqueKind::Html if text[r.clone()].trim_start().starts_with("<!--") => push(r.clone(), FoldKind::Comment),
            _ => {}
        }
    }
    for seg in &blocks.segments {
        if !text[seg.clone()].contains("<!--") {
            continue;
        }
        for m in inline::masks(text, seg.clone()) {
            if m.kind == MaskKind::Comment {
                push(m.range, FoldKind::Comment);
            }
        }
    }
    out.sort_by(|a, b| a.range.start.cmp(&b.range.start).then(b.range.end.cmp(&a.range.end)));
    out
}
