//! What is being typed at a cursor, for completion: a wiki-link note or heading, a markdown
//! link path or heading slug, or a tag. Never inside code, HTML, comments or frontmatter.

use std::ops::Range;

use super::blocks;
use super::inline::{self, is_tag_char, MaskKind};
use super::items::is_external;
use super::{clamp_offset, line_start};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionKind {
    /// `[[Par‸` or `![[Par‸`: a note name.
    WikiNote,
    /// `[[Note#Hea‸`: a heading of `note` as typed; `[[#Hea‸` has `note` empty (this note).
    WikiHeading { note: String },
    /// `[text](rel/pa‸`: a path relative to this note.
    MarkdownPath,
    /// `[text](path.md#sl‸`: a heading slug of `path` as typed; `](#sl‸` has `path` empty.
    MarkdownHeading { path: String },
    /// `#ta‸` at a word start.
    Tag,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CompletionContext {
    pub kind: CompletionKind,
    /// Inside an embed (`![[`) or image (`![…](`).
    pub embed: bool,
    /// What was typed of the part so far: the text of `replace`.
    pub prefix: String,
    /// From the start of the part being typed to the cursor.
    pub replace: Range<usize>,
    /// From the cursor to the end of the part (text already there after the cursor).
    pub rest: Range<usize>,
    /// The `]]`, `)` or `>)` that already closes the link after `rest`, if any.
    pub closing: Option<Range<usize>>,
}

/// The completion context at a byte offset (clamped into the text), if the cursor is in a wiki
/// link target, a markdown link destination or a tag.
pub fn completion_context(text: &str, offset: usize) -> Option<CompletionContext> {
    let offset = clamp_offset(text, offset);
    let blocks = blocks::analyse(text);
    if blocks.opaque_at(text.len(), offset).is_some() {
        return None;
    }
    let masks = blocks.segment_at(offset).map(|seg| inline::masks(text, seg)).unwrap_or_default();
    // Raw HTML and autolinks do not block link completion: a link destination is read before
    // them (`[t](<my note.md>)` is a link, not a tag `<my …>`), but they do hide tags.
    let masked_by = |p: usize, any: bool| {
        masks.iter().any(|m| (any || matches!(m.kind, MaskKind::Code | MaskKind::Comment)) && m.range.start < p && p < m.range.end)
    };
    let masked = |p: usize| masked_by(p, false);
    if masked(offset) {
        return None;
    }
    let ls = line_start(text, offset);
    let before = &text[ls..offset];
    let mut openers: Vec<(usize, bool)> = Vec::new();
    if let Some(p) = before.rfind("[[") {
        openers.push((ls + p, true));
    }
    if let Some(p) = before.rfind("](") {
        openers.push((ls + p, false));
    }
    openers.sort_by_key(|o| std::cmp::Reverse(o.0));
    for (p, is_wiki) in openers {
        if masked(p) || (p > 0 && masked(p - 1)) {
            continue;
        }
        let found = if is_wiki { wiki(text, p, offset) } else { markdown(text, p, offset) };
        if found.is_some() {
            return found;
        }
    }
    if masked_by(offset, true) {
        return None;
    }
    tag(text, ls, offset)
}

/// End of the part starting at `from`: the first char in `stops` or a line end.
fn part_end(text: &str, from: usize, stop: impl Fn(char) -> bool) -> usize {
    text[from..].find(|c: char| c == '\n' || c == '\r' || stop(c)).map_or(text.len(), |k| from + k)
}

fn wiki(text: &str, p: usize, offset: usize) -> Option<CompletionContext> {
    let start = p + 2;
    let typed = &text[start..offset];
    if typed.contains(['[', ']', '|']) {
        return None;
    }
    let embed = p > 0 && text.as_bytes()[p - 1] == b'!';
    let (kind, replace) = match typed.find('#') {
        Some(h) => (CompletionKind::WikiHeading { note: typed[..h].trim().to_owned() }, start + h + 1..offset),
        None => (CompletionKind::WikiNote, start..offset),
    };
    let heading = matches!(kind, CompletionKind::WikiHeading { .. });
    let end = part_end(text, offset, |c| matches!(c, '|' | ']' | '[') || (!heading && c == '#'));
    let closing = text[end..].starts_with("]]").then(|| end..end + 2);
    Some(CompletionContext { kind, embed, prefix: text[replace.clone()].to_owned(), replace, rest: offset..end, closing })
}

fn markdown(text: &str, p: usize, offset: usize) -> Option<CompletionContext> {
    let mut start = p + 2;
    let angle = text[start..offset].starts_with('<');
    if angle {
        start += 1;
    }
    let typed = &text[start..offset];
    if typed.contains([')', '>']) || (!angle && typed.contains(char::is_whitespace)) || is_external(typed) {
        return None;
    }
    let embed = text[..p].rfind('[').is_some_and(|o| o > 0 && text.as_bytes()[o - 1] == b'!');
    let (kind, replace) = match typed.find('#') {
        Some(h) => (CompletionKind::MarkdownHeading { path: typed[..h].to_owned() }, start + h + 1..offset),
        None => (CompletionKind::MarkdownPath, start..offset),
    };
    let heading = matches!(kind, CompletionKind::MarkdownHeading { .. });
    let end = part_end(text, offset, |c| matches!(c, ')' | '>') || (!angle && c.is_whitespace()) || (!heading && c == '#'));
    let closing =
        if angle && text[end..].starts_with(">)") { Some(end..end + 2) } else { text[end..].starts_with(')').then(|| end..end + 1) };
    Some(CompletionContext { kind, embed, prefix: text[replace.clone()].to_owned(), replace, rest: offset..end, closing })
}

fn tag(text: &str, ls: usize, offset: usize) -> Option<CompletionContext> {
    let name_len: usize = text[ls..offset].chars().rev().take_while(|&c| is_tag_char(c)).map(char::len_utf8).sum();
    let start = offset - name_len;
    let hash = start.checked_sub(1).filter(|&h| h >= ls && text.as_bytes()[h] == b'#')?;
    if hash > ls && !text[..hash].ends_with(char::is_whitespace) {
        return None;
    }
    // `# ` at a line start is a heading marker, not a tag being typed.
    if hash == ls && name_len == 0 && text[offset..].starts_with([' ', '\t']) {
        return None;
    }
    let end = offset + text[offset..].chars().take_while(|&c| is_tag_char(c)).map(char::len_utf8).sum::<usize>();
    Some(CompletionContext {
        kind: CompletionKind::Tag,
        embed: false,
        prefix: text[start..offset].to_owned(),
        replace: start..offset,
        rest: offset..end,
        closing: None,
    })
}
