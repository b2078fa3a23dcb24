//! The heading tree of a note: ATX and setext headings at document level (not inside quotes or
//! lists, nor in code, HTML or frontmatter), with plain text, unique GitHub slugs, and the byte
//! range of each heading and of its whole section.

use std::ops::Range;

use super::blocks::{self, Blocks, RawHeading};
use super::inline::{self, MaskKind};
use super::items::{def_map, normalize_label, NavKind};
use super::slug::{slug, Slugger};
use super::{percent_decode, trim_end_range, trim_range};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Section {
    /// 1–6.
    pub level: u8,
    /// Plain text: inline markup stripped (emphasis, code, links reduced to their text),
    /// closing `#`s removed, whitespace collapsed.
    pub text: String,
    /// GitHub slug, unique within the note (`foo`, `foo-1`, …).
    pub slug: String,
    /// The heading's line (both lines of a setext heading), without the line ending.
    pub heading: Range<usize>,
    /// The heading's text as written (what renaming the heading edits); empty for an empty heading.
    pub name: Range<usize>,
    /// The whole section: from the heading to the next heading of the same or a higher level
    /// (a lower or equal number), or the end of the text.
    pub range: Range<usize>,
    /// Index in the outline of the enclosing section.
    pub parent: Option<usize>,
}

/// The note's headings in document order, each with its parent.
pub fn outline(text: &str) -> Vec<Section> {
    outline_in(text, &blocks::analyse(text))
}

pub(crate) fn outline_in(text: &str, blocks: &Blocks) -> Vec<Section> {
    let defs = def_map(text, blocks);
    let mut slugger = Slugger::new();
    let mut out: Vec<Section> = Vec::with_capacity(blocks.headings.len());
    let mut open: Vec<usize> = Vec::new();
    for h in &blocks.headings {
        let heading = trim_end_range(text, h.node.clone());
        let name = name_range(text, h).unwrap_or(heading.end..heading.end);
        let plain = plain_text(text, name.clone(), &defs, 0);
        let slug = slugger.slug(&plain);
        while let Some(&top) = open.last() {
            if out[top].level >= h.level {
                out[top].range.end = h.node.start;
                open.pop();
            } else {
                break;
            }
        }
        out.push(Section {
            level: h.level,
            text: plain,
            slug,
            heading,
            name,
            range: h.node.start..text.len(),
            parent: open.last().copied(),
        });
        open.push(out.len() - 1);
    }
    out
}

/// The heading text as written: an ATX heading's content without its closing `#` sequence.
fn name_range(text: &str, h: &RawHeading) -> Option<Range<usize>> {
    let content = trim_range(text, h.content.clone()?);
    if h.setext {
        return Some(content);
    }
    let s = &text[content.clone()];
    let without = s.trim_end_matches('#');
    if without.len() == s.len() {
        return Some(content);
    }
    // A closing sequence is all `#`s, or `#`s after a space or tab.
    if without.is_empty() || without.ends_with([' ', '\t']) {
        return Some(trim_range(text, content.start..content.start + without.len()));
    }
    Some(content)
}

/// How deep link text inside link text (images in links) is reduced before it is kept raw.
const MAX_DEPTH: usize = 4;

/// Heading markup reduced to what a reader sees (and GitHub slugs): code spans keep their
/// content, links and embeds their shown text, HTML and comments vanish, escapes are resolved,
/// emphasis markers (`*`, `~~`, and `_` at a word edge) are dropped.
fn plain_text(text: &str, range: Range<usize>, defs: &inline::Defs, depth: usize) -> String {
    let scan = inline::scan(text, range.clone(), defs);
    let mut pieces: Vec<(Range<usize>, String)> = Vec::new();
    for m in &scan.masks {
        let s = &text[m.range.clone()];
        let shown = match m.kind {
            MaskKind::Code => {
                let inner = s.trim_matches('`');
                let stripped = inner.strip_prefix(' ').and_then(|x| x.strip_suffix(' ')).filter(|x| !x.trim().is_empty());
                stripped.unwrap_or(inner).to_owned()
            }
            MaskKind::Autolink => s.trim_start_matches('<').trim_end_matches('>').to_owned(),
            MaskKind::Comment | MaskKind::Html => String::new(),
        };
        pieces.push((m.range.clone(), shown));
    }
    for l in &scan.links {
        let shown = match l.kind {
            NavKind::WikiLink => match (&l.text, &l.note, &l.heading) {
                (Some(alias), _, _) => alias.text.clone(),
                (None, Some(n), Some(h)) => format!("{} > {}", n.text, h.text),
                (None, Some(n), None) => n.text.clone(),
                (None, None, Some(h)) => h.text.clone(),
                (None, None, None) => String::new(),
            },
            NavKind::InlineLink | NavKind::RefLink => {
                let t = l.text.as_ref().map_or(0..0, |t| t.range.clone());
                if depth < MAX_DEPTH {
                    plain_text(text, t, defs, depth + 1)
                } else {
                    plain_chars(&text[t])
                }
            }
            NavKind::FootnoteRef | NavKind::FootnoteDef => String::new(),
            _ => continue,
        };
        pieces.push((l.range.clone(), shown));
    }
    pieces.sort_by_key(|(r, _)| r.start);
    let mut out = String::new();
    let mut pos = range.start;
    for (r, shown) in pieces {
        if r.start < pos {
            continue;
        }
        out.push_str(&plain_chars(&text[pos..r.start]));
        out.push_str(&shown);
        pos = r.end;
    }
    out.push_str(&plain_chars(&text[pos..range.end]));
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Backslash escapes of ASCII punctuation resolved (an escaped character is kept as it
/// renders), emphasis markers dropped: `*`, `~` next to `~`, and `_` at a word edge.
fn plain_chars(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            if let Some(&n) = chars.get(i + 1).filter(|n| n.is_ascii_punctuation()) {
                out.push(n);
                i += 2;
                continue;
            }
        }
        let prev = i.checked_sub(1).map(|k| chars[k]);
        let next = chars.get(i + 1).copied();
        let drop = match c {
            '*' => true,
            '~' => prev == Some('~') || next == Some('~'),
            '_' => !prev.is_some_and(char::is_alphanumeric) || !next.is_some_and(char::is_alphanumeric),
            _ => false,
        };
        if !drop {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// The section a link fragment names: by slug (`#straße--co`), then by heading text ignoring
/// case and spacing (`[[Note#Straße & Co]]`), then by the fragment's own slug. A fragment with
/// several `#` (`A#B`, Obsidian's sub-heading path) is matched by its last part. Percent
/// escapes are decoded first.
pub fn find_section(sections: &[Section], fragment: &str) -> Option<usize> {
    let decoded = percent_decode(fragment.trim());
    let f = decoded.rsplit('#').next().unwrap_or("").trim();
    if f.is_empty() {
        return None;
    }
    let lower = f.to_lowercase();
    sections
        .iter()
        .position(|s| s.slug == lower)
        .or_else(|| {
            let key = normalize_label(f);
            sections.iter().position(|s| normalize_label(&s.text) == key)
        })
        .or_else(|| {
            let own = slug(f);
            sections.iter().position(|s| !own.is_empty() && s.slug == own)
        })
}
