//! The navigable items of a note ([`links`]) and the item under a cursor ([`at`]): plain data
//! with byte ranges, including the part of each item that a rename edits.

use std::collections::HashMap;
use std::ops::Range;

use super::blocks::{self, Blocks};
use super::inline::{self, valid_tag, Defs};
use super::outline::{outline_in, Section};
use super::{clamp_offset, line_end, trim_end_range, trim_range};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NavKind {
    /// `[[Note]]`, `[[Note#Heading|alias]]`, `[[#Heading]]`; `![[Note]]` has `embed`.
    WikiLink,
    /// `[text](path.md#slug "title")`; `![alt](img.png)` has `embed`.
    InlineLink,
    /// `[text][ref]`, `[ref][]`, `[ref]`, only when `ref` is defined in the note.
    RefLink,
    /// `[ref]: target "title"`.
    RefDef,
    /// `[^label]`, defined or not.
    FootnoteRef,
    /// `[^label]: text` at a line start.
    FootnoteDef,
    /// `#tag` in text.
    Tag,
    /// An entry of `tags:` (or `tag:`) in the frontmatter.
    FrontmatterTag,
}

/// What an item leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dest {
    /// A markdown note (no extension, or `.md`/`.markdown`).
    Note,
    /// A file that is not markdown (image, PDF, …).
    File,
    /// A URL with a scheme (`https://…`, `mailto:`).
    External,
    /// A place in the same note: a heading, a footnote.
    SameNote,
    Tag,
}

/// A piece of an item: its text exactly as written, and where it is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Part {
    pub text: String,
    pub range: Range<usize>,
}

/// One navigable item. Every part's range lies within `range`, and so does `edit`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NavLink {
    pub kind: NavKind,
    /// The whole item (`![[…]]`, `[…](…)`, a definition's line, `#tag`).
    pub range: Range<usize>,
    /// What a rename edits: the note part of a link to another note, else its heading part; the
    /// label of references, definitions and footnotes; the name of a tag (without `#`). An empty
    /// range where a link has an empty destination.
    pub edit: Range<usize>,
    /// The note or path part of the target as written (percent-encoded for markdown links, see
    /// [`super::resolve_markdown`]); the whole URL for external links; `None` for the same note.
    pub note: Option<Part>,
    /// The heading part (`#Heading` of wiki links, `#slug` of markdown links), without `#`.
    pub heading: Option<Part>,
    /// The reference label (inside its brackets), footnote label (without `^`) or tag name.
    pub label: Option<Part>,
    /// The shown text: a wiki link's alias, a markdown link's text (inside the brackets).
    pub text: Option<Part>,
    /// A markdown link or definition title, without its delimiters.
    pub title: Option<String>,
    /// What the target is. A reference link has the destination kind of its definition; find the
    /// definition itself by [`normalize_label`] of the labels.
    pub dest: Dest,
    /// An embed (`![[…]]`) or image (`![…](…)`, `![…][…]`).
    pub embed: bool,
}

impl NavLink {
    /// An item with nothing set (a tag with empty ranges): a base to fill with struct update.
    pub fn empty() -> NavLink {
        NavLink {
            kind: NavKind::Tag,
            range: 0..0,
            edit: 0..0,
            note: None,
            heading: None,
            label: None,
            text: None,
            title: None,
            dest: Dest::SameNote,
            embed: false,
        }
    }
}

/// Which part of an item a cursor is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Focus {
    Note,
    Heading,
    Label,
    Text,
    /// Delimiters, or a title.
    Other,
}

/// What is under a cursor.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NavItem {
    Link {
        link: NavLink,
        focus: Focus,
    },
    /// A heading line of the note; `index` is its place in [`super::outline`].
    Heading {
        index: usize,
        section: Section,
    },
}

/// CommonMark label matching key (for references and footnotes): trimmed, inner whitespace
/// collapsed, Unicode-lowercased (lowercasing approximates CommonMark's case fold).
pub fn normalize_label(label: &str) -> String {
    label.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Whether a target is a URL: a scheme of two or more characters followed by `://`, or a
/// `mailto:`/`tel:` address.
pub(crate) fn is_external(target: &str) -> bool {
    let t = target.trim();
    let Some((scheme, rest)) = t.split_once(':') else { return false };
    let valid = scheme.len() >= 2
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid && (rest.starts_with("//") || scheme.eq_ignore_ascii_case("mailto") || scheme.eq_ignore_ascii_case("tel"))
}

/// The extension of the last path segment, when it looks like one (1–8 ASCII alphanumerics
/// with a letter, after a non-empty stem): `v1.2` and `.hidden` have none.
pub(crate) fn extension(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let (stem, ext) = name.rsplit_once('.')?;
    let ok = !stem.is_empty()
        && (1..=8).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic());
    ok.then_some(ext)
}

pub(crate) fn is_markdown_ext(ext: &str) -> bool {
    ["md", "markdown", "mdown", "mkd"].iter().any(|e| ext.eq_ignore_ascii_case(e))
}

/// [`Dest::Note`] for a path with no extension or a markdown one, else [`Dest::File`].
pub(crate) fn classify_dest(path: &str) -> Dest {
    match extension(path.trim()) {
        Some(ext) if !is_markdown_ext(ext) => Dest::File,
        _ => Dest::Note,
    }
}

fn part(text: &str, range: Range<usize>) -> Part {
    Part { text: text[range.clone()].to_owned(), range }
}

/// The note's reference definitions, first definition of a label winning (as in CommonMark).
pub(crate) fn def_map(text: &str, blocks: &Blocks) -> Defs {
    let mut defs: Defs = HashMap::new();
    for d in &blocks.defs {
        let label = &text[d.label.clone()];
        if label.starts_with('^') {
            continue;
        }
        let dest = d.dest.clone().map_or(Dest::SameNote, |r| dest_parts(text, r).2);
        defs.entry(normalize_label(label)).or_insert(dest);
    }
    defs
}

/// Note and heading parts and kind of a destination as written (`<>` allowed).
fn dest_parts(text: &str, raw: Range<usize>) -> (Option<Part>, Option<Part>, Dest) {
    let s = &text[raw.clone()];
    let r = if s.len() >= 2 && s.starts_with('<') && s.ends_with('>') { raw.start + 1..raw.end - 1 } else { raw };
    let s = &text[r.clone()];
    if is_external(s) {
        return (Some(part(text, r)), None, Dest::External);
    }
    let (path, frag) = match s.find('#') {
        Some(h) => (r.start..r.start + h, Some(r.start + h + 1..r.end)),
        None => (r.clone(), None),
    };
    let note = Some(path).filter(|p| !p.is_empty()).map(|p| part(text, p));
    let heading = frag.filter(|f| !f.is_empty()).map(|f| part(text, f));
    let dest = note.as_ref().map_or(Dest::SameNote, |n| classify_dest(&super::percent_decode(&n.text)));
    (note, heading, dest)
}

/// Every navigable item of a note, in document order (by start, then end).
pub fn links(text: &str) -> Vec<NavLink> {
    let blocks = blocks::analyse(text);
    links_in(text, &blocks)
}

/// The tags (inline and frontmatter) of `text`, as [`links`] finds them, from a block tree
/// already parsed from exactly `text`: what an index stores of a note's tags without a
/// second parse.
pub fn tags_in(text: &str, tree: &tree_sitter::Tree) -> Vec<NavLink> {
    let blocks = blocks::analyse_tree(text, tree);
    let mut out = links_in(text, &blocks);
    out.retain(|l| matches!(l.kind, NavKind::Tag | NavKind::FrontmatterTag));
    out
}

pub(crate) fn links_in(text: &str, blocks: &Blocks) -> Vec<NavLink> {
    let mut out = Vec::new();
    if let Some(fm) = &blocks.frontmatter {
        frontmatter_tags(text, fm.clone(), blocks.toml, &mut out);
    }
    let defs = def_map(text, blocks);
    for d in &blocks.defs {
        let label = &text[d.label.clone()];
        let range = trim_end_range(text, d.node.clone());
        if let Some(footnote) = label.strip_prefix('^') {
            if footnote.is_empty() {
                continue;
            }
            let l = part(text, d.label.start + 1..d.label.end);
            out.push(NavLink { kind: NavKind::FootnoteDef, range, edit: l.range.clone(), label: Some(l), ..NavLink::empty() });
            continue;
        }
        let (note, heading, dest) = d.dest.clone().map_or((None, None, Dest::SameNote), |r| dest_parts(text, r));
        let title = d.title.clone().filter(|t| t.len() >= 2).and_then(|t| text.get(t.start + 1..t.end - 1)).map(str::to_owned);
        out.push(NavLink {
            kind: NavKind::RefDef,
            range,
            edit: d.label.clone(),
            note,
            heading,
            label: Some(part(text, d.label.clone())),
            title,
            dest,
            ..NavLink::empty()
        });
    }
    for seg in &blocks.segments {
        out.extend(inline::scan(text, seg.clone(), &defs).links);
    }
    out.sort_by_key(|l| (l.range.start, l.range.end));
    out
}

/// Range of `v` up to a comment: a `#` at its start or after whitespace, outside quotes.
fn strip_comment(text: &str, v: Range<usize>) -> Range<usize> {
    let mut quote = None;
    let mut prev_space = true;
    for (i, c) in text[v.clone()].char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev_space => return v.start..v.start + i,
            None => {}
        }
        prev_space = c.is_whitespace();
    }
    v
}

/// One frontmatter tag entry: unquoted, without a leading `#`, and only if it is a valid tag.
fn push_fm_tag(text: &str, item: Range<usize>, out: &mut Vec<NavLink>) {
    let mut r = trim_range(text, item);
    let s = &text[r.clone()];
    if s.len() >= 2 && ((s.starts_with('"') && s.ends_with('"')) || (s.starts_with('\'') && s.ends_with('\''))) {
        r = trim_range(text, r.start + 1..r.end - 1);
    }
    if text[r.clone()].starts_with('#') {
        r.start += 1;
    }
    if valid_tag(&text[r.clone()]) {
        out.push(NavLink {
            kind: NavKind::FrontmatterTag,
            range: r.clone(),
            edit: r.clone(),
            label: Some(part(text, r)),
            dest: Dest::Tag,
            ..NavLink::empty()
        });
    }
}

/// Splits a `tags:` value (`[a, "b"]`, `a, b`, `a b`) into entries.
fn push_fm_tag_list(text: &str, value: Range<usize>, out: &mut Vec<NavLink>) {
    let v = trim_range(text, value);
    let s = &text[v.clone()];
    let (inner, list) = match s.strip_prefix('[') {
        Some(rest) => {
            let close = rest.find(']').unwrap_or(rest.len());
            (v.start + 1..v.start + 1 + close, true)
        }
        None => (v, false),
    };
    let mut start = inner.start;
    for (i, c) in text[inner.clone()].char_indices() {
        if c == ',' || (!list && c.is_whitespace()) {
            push_fm_tag(text, start..inner.start + i, out);
            start = inner.start + i + c.len_utf8();
        }
    }
    push_fm_tag(text, start..inner.end, out);
}

/// Tags of a YAML (`tags: [a, b]`, `tags: a, b`, or a `- a` list under `tags:`) or TOML
/// (`tags = ["a"]`) frontmatter block.
fn frontmatter_tags(text: &str, fm: Range<usize>, toml: bool, out: &mut Vec<NavLink>) {
    let sep = if toml { '=' } else { ':' };
    let mut in_list = false;
    let mut pos = fm.start;
    for (n, line) in text[fm.clone()].split_inclusive('\n').enumerate() {
        let start = pos;
        pos += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        let end = start + body.len();
        if n == 0 || matches!(body.trim(), "---" | "+++" | "...") {
            continue;
        }
        let indented = body.starts_with([' ', '\t']);
        let t = body.trim_start();
        if in_list && (indented || t.starts_with('-')) {
            if let Some(rest) = t.strip_prefix('-') {
                if rest.is_empty() || rest.starts_with([' ', '\t']) {
                    let s = end - rest.len();
                    push_fm_tag(text, strip_comment(text, s..end), out);
                }
            }
            continue;
        }
        in_list = false;
        if indented {
            continue;
        }
        let Some(k) = body.find(sep) else { continue };
        let key = body[..k].trim().trim_matches(['"', '\'']).to_lowercase();
        if key != "tags" && key != "tag" {
            continue;
        }
        let value = strip_comment(text, start + k + 1..end);
        if text[value.clone()].trim().is_empty() {
            in_list = true;
        } else {
            push_fm_tag_list(text, value, out);
        }
    }
}

fn contains_incl(r: &Range<usize>, offset: usize) -> bool {
    r.start <= offset && offset <= r.end
}

/// The item at a byte offset: the innermost link, reference, footnote or tag holding it (a
/// cursor just past an item's end still counts, when no item starts there), else the heading
/// whose line holds it (trailing spaces included). Offsets past the text or inside a char are clamped.
pub fn at(text: &str, offset: usize) -> Option<NavItem> {
    let offset = clamp_offset(text, offset);
    let blocks = blocks::analyse(text);
    let all = links_in(text, &blocks);
    let inside = all.iter().filter(|l| l.range.start <= offset && offset < l.range.end).min_by_key(|l| l.range.len());
    let link = inside.or_else(|| all.iter().filter(|l| l.range.start < offset && l.range.end == offset).min_by_key(|l| l.range.len()));
    if let Some(l) = link {
        let focus = [(&l.note, Focus::Note), (&l.heading, Focus::Heading), (&l.label, Focus::Label), (&l.text, Focus::Text)]
            .into_iter()
            .find(|(p, _)| p.as_ref().is_some_and(|p| contains_incl(&p.range, offset)))
            .map_or(Focus::Other, |(_, f)| f);
        return Some(NavItem::Link { link: l.clone(), focus });
    }
    let sections: Vec<Section> = outline_in(text, &blocks);
    sections
        .into_iter()
        .enumerate()
        .find(|(_, s)| s.heading.start <= offset && offset <= line_end(text, s.heading.end))
        .map(|(index, section)| NavItem::Heading { index, section })
}
