//! Inline scanning of one span of inline text (a paragraph, heading or table cell): the opaque
//! spans (code spans, HTML comments, raw HTML tags, autolinks), then wiki links and footnotes,
//! then CommonMark links and images with a bracket stack, then tags in what is left.
//!
//! Every scan is near-linear in the span length: backtick closers are found by a per-length
//! index, an unclosed comment is searched for once, and destinations, titles, labels and HTML
//! tags are bounded, so a megabyte of brackets or backticks costs a pass or two, not a square.
//! All ranges produced start and end on ASCII delimiters or on the span's ends, so they are char
//! boundaries.

use std::collections::HashMap;
use std::ops::Range;

use super::items::{classify_dest, is_external, normalize_label, Dest, NavKind, NavLink, Part};
use super::{line_end, trim_end_range, trim_range};

/// Longest link label CommonMark allows.
const MAX_LABEL: usize = 999;
/// Bounds on a link destination, title and raw HTML tag; past them the syntax is not a link.
const MAX_DEST: usize = 4096;
const MAX_TITLE: usize = 4096;
const MAX_TAG: usize = 4096;
/// Parenthesis nesting a bare destination may have (as in cmark).
const MAX_PAREN_DEPTH: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaskKind {
    Code,
    Comment,
    Html,
    Autolink,
}

#[derive(Debug, Clone)]
pub(crate) struct Mask {
    pub range: Range<usize>,
    pub kind: MaskKind,
}

/// What a span holds: its opaque spans and its navigable items (sorted by start).
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub masks: Vec<Mask>,
    pub links: Vec<NavLink>,
}

/// Reference definitions of a note: normalised label → what the destination is.
pub(crate) type Defs = HashMap<String, Dest>;

fn is_escaped(b: &[u8], i: usize, start: usize) -> bool {
    let mut n = 0;
    let mut k = i;
    while k > start && b[k - 1] == b'\\' {
        n += 1;
        k -= 1;
    }
    n % 2 == 1
}

/// Opaque spans of `seg`, left to right: whichever starts first wins, as in CommonMark.
pub(crate) fn masks(text: &str, seg: Range<usize>) -> Vec<Mask> {
    let b = text.as_bytes();
    let end = seg.end;
    // Maximal backtick runs by length, for finding a closer of exactly the opener's length.
    let mut runs: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut i = seg.start;
    while i < end {
        if b[i] == b'`' {
            let s = i;
            while i < end && b[i] == b'`' {
                i += 1;
            }
            runs.entry(i - s).or_default().push(s);
        } else {
            i += 1;
        }
    }
    let mut out = Vec::new();
    let mut comment_unclosed = false;
    let mut i = seg.start;
    while i < end {
        match b[i] {
            b'\\' => i += if i + 1 < end && b[i + 1].is_ascii_punctuation() { 2 } else { 1 },
            b'`' => {
                let s = i;
                while i < end && b[i] == b'`' {
                    i += 1;
                }
                let n = i - s;
                if let Some(starts) = runs.get(&n) {
                    let k = starts.partition_point(|&p| p < i);
                    if let Some(&p) = starts.get(k) {
                        out.push(Mask { range: s..p + n, kind: MaskKind::Code });
                        i = p + n;
                    }
                }
            }
            b'<' => match html_like(text, i, end, &mut comment_unclosed) {
                Some((e, kind)) => {
                    out.push(Mask { range: i..e, kind });
                    i = e;
                }
                None => i += 1,
            },
            _ => i += 1,
        }
    }
    out
}

/// A comment, autolink or raw HTML tag starting at the `<` at `i`: its end and kind.
fn html_like(text: &str, i: usize, end: usize, comment_unclosed: &mut bool) -> Option<(usize, MaskKind)> {
    let rest = &text.as_bytes()[i..end];
    if rest.starts_with(b"<!--") {
        if rest.starts_with(b"<!-->") {
            return Some((i + 5, MaskKind::Comment));
        }
        if rest.starts_with(b"<!--->") {
            return Some((i + 6, MaskKind::Comment));
        }
        if *comment_unclosed {
            return None;
        }
        // `text[i + 4..end]` starts after ASCII bytes, so it is a char boundary.
        return match text[i + 4..end].find("-->") {
            Some(k) => Some((i + 4 + k + 3, MaskKind::Comment)),
            None => {
                *comment_unclosed = true;
                None
            }
        };
    }
    if let Some(e) = autolink(rest) {
        return Some((i + e, MaskKind::Autolink));
    }
    html_tag(rest).map(|e| (i + e, MaskKind::Html))
}

/// `<scheme:…>` or `<local@domain>`: the length up to and including `>`.
fn autolink(rest: &[u8]) -> Option<usize> {
    let mut k = 1;
    if rest.get(k).is_some_and(|c| c.is_ascii_alphabetic()) {
        let s = k;
        while k < rest.len() && (rest[k].is_ascii_alphanumeric() || matches!(rest[k], b'+' | b'.' | b'-')) && k - s < 32 {
            k += 1;
        }
        if k - s >= 2 && rest.get(k) == Some(&b':') {
            k += 1;
            while k < rest.len() && rest[k] > b' ' && rest[k] != b'<' && rest[k] != b'>' && rest[k] != 0x7f {
                k += 1;
            }
            if rest.get(k) == Some(&b'>') {
                return Some(k + 1);
            }
        }
    }
    let local = |c: u8| c.is_ascii_alphanumeric() || b".!#$%&'*+/=?^_{|}~-".contains(&c);
    k = 1;
    while k < rest.len() && local(rest[k]) {
        k += 1;
    }
    if k > 1 && rest.get(k) == Some(&b'@') {
        k += 1;
        let s = k;
        while k < rest.len() && (rest[k].is_ascii_alphanumeric() || rest[k] == b'.' || rest[k] == b'-') {
            k += 1;
        }
        if k > s && rest.get(k) == Some(&b'>') {
            return Some(k + 1);
        }
    }
    None
}

/// An open or closing HTML tag `<name …>` / `</name>`: the length up to and including `>`.
fn html_tag(rest: &[u8]) -> Option<usize> {
    let mut k = 1;
    let closing = rest.get(k) == Some(&b'/');
    if closing {
        k += 1;
    }
    if !rest.get(k).is_some_and(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    while k < rest.len() && (rest[k].is_ascii_alphanumeric() || rest[k] == b'-') {
        k += 1;
    }
    match rest.get(k) {
        Some(b'>') => return Some(k + 1),
        Some(c) if c.is_ascii_whitespace() || (*c == b'/' && !closing) => {}
        _ => return None,
    }
    let mut quote: Option<u8> = None;
    while k < rest.len() && k < MAX_TAG {
        let c = rest[k];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c == b'>' => return Some(k + 1),
            None if c == b'<' || (closing && !c.is_ascii_whitespace()) => return None,
            None => {}
        }
        k += 1;
    }
    None
}

/// Sorted, disjoint opaque ranges with a cursor that only moves forward.
struct Opaque<'a> {
    ranges: &'a [Range<usize>],
    k: usize,
}

impl Opaque<'_> {
    /// The end of the opaque range holding `i`, if any.
    fn skip(&mut self, i: usize) -> Option<usize> {
        while self.k < self.ranges.len() && self.ranges[self.k].end <= i {
            self.k += 1;
        }
        self.ranges.get(self.k).filter(|r| r.start <= i).map(|r| r.end)
    }

    /// The start of the first opaque range at or after `i`.
    fn next_start(&mut self, i: usize) -> usize {
        while self.k < self.ranges.len() && self.ranges[self.k].end <= i {
            self.k += 1;
        }
        self.ranges.get(self.k).map_or(usize::MAX, |r| r.start.max(i))
    }
}

fn merge(into: &mut Vec<Range<usize>>, add: impl Iterator<Item = Range<usize>>) {
    into.extend(add);
    into.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(into.len());
    for r in into.drain(..) {
        match merged.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    *into = merged;
}

/// Scans one span of inline text.
pub(crate) fn scan(text: &str, seg: Range<usize>, defs: &Defs) -> Scan {
    let masks = masks(text, seg.clone());
    let mut opaque: Vec<Range<usize>> = masks.iter().map(|m| m.range.clone()).collect();
    let mut links = Vec::new();
    let consumed = wiki_and_footnotes(text, seg.clone(), &opaque, &mut links);
    merge(&mut opaque, consumed.into_iter());
    let n = links.len();
    markdown_links(text, seg.clone(), &opaque, defs, &mut links);
    merge(&mut opaque, links[n..].iter().map(|l| l.range.clone()));
    tags(text, seg, &opaque, &mut links);
    links.sort_by_key(|l| (l.range.start, l.range.end));
    Scan { masks, links }
}

fn part(text: &str, range: Range<usize>) -> Part {
    Part { text: text[range.clone()].to_owned(), range }
}

/// Whether only spaces, tabs and quote markers stand between the line start and `i`.
fn at_line_start(b: &[u8], i: usize, start: usize) -> bool {
    let mut k = i;
    while k > start && matches!(b[k - 1], b' ' | b'\t' | b'>') {
        k -= 1;
    }
    k == start || b[k - 1] == b'\n'
}

/// Wiki links, embeds, footnote references and definitions. Returns the ranges they consume
/// (a footnote definition consumes its `[^label]:` marker only; the rest of its line is text).
fn wiki_and_footnotes(text: &str, seg: Range<usize>, opaque: &[Range<usize>], out: &mut Vec<NavLink>) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut op = Opaque { ranges: opaque, k: 0 };
    let mut consumed = Vec::new();
    let mut i = seg.start;
    while i + 1 < seg.end {
        if let Some(e) = op.skip(i) {
            i = e;
            continue;
        }
        if b[i] != b'[' || is_escaped(b, i, seg.start) || !matches!(b[i + 1], b'[' | b'^') {
            i += 1;
            continue;
        }
        let stop = op.next_start(i + 1).min(seg.end);
        let mut j = i + 2;
        if b[i + 1] == b'[' {
            while j < stop && !matches!(b[j], b'[' | b']' | b'\n' | b'\r') {
                j += 1;
            }
            if j + 1 < stop && b[j] == b']' && b[j + 1] == b']' {
                let embed = i > seg.start && b[i - 1] == b'!' && !is_escaped(b, i - 1, seg.start);
                let whole = if embed { i - 1..j + 2 } else { i..j + 2 };
                if let Some(link) = wiki(text, whole.clone(), i + 2..j, embed) {
                    out.push(link);
                    consumed.push(whole);
                    i = j + 2;
                    continue;
                }
            }
        } else {
            while j < stop && j - i <= MAX_LABEL && !(b[j].is_ascii_whitespace() || matches!(b[j], b'[' | b']')) {
                j += 1;
            }
            if j < stop && b[j] == b']' && j > i + 2 {
                let label = part(text, i + 2..j);
                if j + 1 < stop && b[j + 1] == b':' && at_line_start(b, i, seg.start) {
                    let line = trim_end_range(text, i..line_end(text, j).clamp(j + 2, seg.end));
                    out.push(NavLink {
                        kind: NavKind::FootnoteDef,
                        range: line,
                        edit: label.range.clone(),
                        label: Some(label),
                        dest: Dest::SameNote,
                        ..NavLink::empty()
                    });
                    consumed.push(i..j + 2);
                    i = j + 2;
                } else {
                    out.push(NavLink {
                        kind: NavKind::FootnoteRef,
                        range: i..j + 1,
                        edit: label.range.clone(),
                        label: Some(label),
                        dest: Dest::SameNote,
                        ..NavLink::empty()
                    });
                    consumed.push(i..j + 1);
                    i = j + 1;
                }
                continue;
            }
        }
        i += 1;
    }
    consumed
}

/// A wiki link from its whole range and the range between `[[` and `]]`; `None` when it names
/// neither a note nor a heading (`[[]]`, `[[|x]]`, `[[#]]`).
fn wiki(text: &str, whole: Range<usize>, inner: Range<usize>, embed: bool) -> Option<NavLink> {
    let s = &text[inner.clone()];
    // `\|` separates the alias too: it is how a wiki link is written inside a table cell.
    let (target_end, alias) = match s.find('|') {
        Some(k) => {
            let t = if k > 0 && s.as_bytes()[k - 1] == b'\\' { k - 1 } else { k };
            (inner.start + t, Some(inner.start + k + 1..inner.end))
        }
        None => (inner.end, None),
    };
    let target = inner.start..target_end;
    let (note, heading) = match text[target.clone()].find('#') {
        Some(h) => (target.start..target.start + h, Some(target.start + h + 1..target.end)),
        None => (target.clone(), None),
    };
    let note = Some(trim_range(text, note)).filter(|r| !r.is_empty()).map(|r| part(text, r));
    let heading = heading.map(|r| trim_range(text, r)).filter(|r| !r.is_empty()).map(|r| part(text, r));
    let alias = alias.map(|r| trim_range(text, r)).filter(|r| !r.is_empty()).map(|r| part(text, r));
    let edit = note.as_ref().or(heading.as_ref())?.range.clone();
    let dest = match &note {
        None => Dest::SameNote,
        Some(n) if is_external(&n.text) => Dest::External,
        Some(n) => classify_dest(&n.text),
    };
    Some(NavLink { kind: NavKind::WikiLink, range: whole, edit, note, heading, text: alias, dest, embed, ..NavLink::empty() })
}

struct Opener {
    /// Where the link starts (`!` of an image, else `[`).
    pos: usize,
    text_start: usize,
    image: bool,
    active: bool,
}

/// CommonMark inline links, images and reference links, by the bracket-stack algorithm.
fn markdown_links(text: &str, seg: Range<usize>, opaque: &[Range<usize>], defs: &Defs, out: &mut Vec<NavLink>) {
    let b = text.as_bytes();
    let mut op = Opaque { ranges: opaque, k: 0 };
    let mut stack: Vec<Opener> = Vec::new();
    let mut i = seg.start;
    while i < seg.end {
        if let Some(e) = op.skip(i) {
            i = e;
            continue;
        }
        match b[i] {
            b'\\' => i += if i + 1 < seg.end && b[i + 1].is_ascii_punctuation() { 2 } else { 1 },
            b'[' => {
                let image = i > seg.start && b[i - 1] == b'!' && !is_escaped(b, i - 1, seg.start);
                stack.push(Opener { pos: if image { i - 1 } else { i }, text_start: i + 1, image, active: true });
                i += 1;
            }
            b']' => {
                let Some(opener) = stack.pop() else {
                    i += 1;
                    continue;
                };
                if !opener.active {
                    i += 1;
                    continue;
                }
                match link_after(text, seg.end, &opener, i, defs) {
                    Some(link) => {
                        i = link.range.end;
                        if !opener.image {
                            // Links do not contain links: earlier `[` openers can no longer close.
                            for o in stack.iter_mut().filter(|o| !o.image) {
                                o.active = false;
                            }
                        }
                        out.push(link);
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
}

/// The link whose text closes at the `]` at `close`, if what follows makes one.
fn link_after(text: &str, end: usize, opener: &Opener, close: usize, defs: &Defs) -> Option<NavLink> {
    let b = text.as_bytes();
    let text_range = opener.text_start..close;
    let shown = Some(part(text, text_range.clone()));
    let next = close + 1;
    if next < end && b[next] == b'(' {
        if let Some(tail) = inline_tail(b, next, end) {
            let dest_str = &text[tail.dest.clone()];
            let (note, heading, dest) = if is_external(dest_str) {
                (Some(part(text, tail.dest.clone())), None, Dest::External)
            } else {
                let (path, frag) = match dest_str.find('#') {
                    Some(h) => (tail.dest.start..tail.dest.start + h, Some(tail.dest.start + h + 1..tail.dest.end)),
                    None => (tail.dest.clone(), None),
                };
                let note = Some(path).filter(|r| !r.is_empty()).map(|r| part(text, r));
                let heading = frag.filter(|r| !r.is_empty()).map(|r| part(text, r));
                let dest = note.as_ref().map_or(Dest::SameNote, |n| classify_dest(&percent_decode_lossy(&n.text)));
                (note, heading, dest)
            };
            let edit = note.as_ref().or(heading.as_ref()).map_or(tail.dest.start..tail.dest.start, |p| p.range.clone());
            return Some(NavLink {
                kind: NavKind::InlineLink,
                range: opener.pos..tail.end,
                edit,
                note,
                heading,
                text: shown,
                title: tail.title.map(|r| text[r].to_owned()),
                dest,
                embed: opener.image,
                ..NavLink::empty()
            });
        }
    }
    let (label, link_end) = match reference_label(b, next, end) {
        // `[text][]` is collapsed: the text is the label.
        Some(l) if normalize_label(&text[l.clone()]).is_empty() => {
            if !valid_label(b, text_range.clone()) {
                return None;
            }
            (text_range.clone(), l.end + 1)
        }
        Some(l) => (l.clone(), l.end + 1),
        // A shortcut `[text]` not followed by a label.
        None => {
            if !valid_label(b, text_range.clone()) {
                return None;
            }
            (text_range.clone(), next)
        }
    };
    let dest = *defs.get(&normalize_label(&text[label.clone()]))?;
    Some(NavLink {
        kind: NavKind::RefLink,
        range: opener.pos..link_end,
        edit: label.clone(),
        label: Some(part(text, label)),
        text: shown,
        dest,
        embed: opener.image,
        ..NavLink::empty()
    })
}

/// A link label `[…]` starting at `open`: the range inside the brackets.
fn reference_label(b: &[u8], open: usize, end: usize) -> Option<Range<usize>> {
    if open >= end || b[open] != b'[' {
        return None;
    }
    let mut k = open + 1;
    while k < end && k - open <= MAX_LABEL + 1 {
        match b[k] {
            b'\\' => k += 1,
            b'[' => return None,
            b']' => return Some(open + 1..k),
            _ => {}
        }
        k += 1;
    }
    None
}

/// Whether `range` can be a link label: bounded, with no unescaped bracket and not blank.
fn valid_label(b: &[u8], range: Range<usize>) -> bool {
    if range.len() > MAX_LABEL {
        return false;
    }
    let mut k = range.start;
    while k < range.end {
        match b[k] {
            b'\\' => k += 1,
            b'[' | b']' => return false,
            _ => {}
        }
        k += 1;
    }
    b[range].iter().any(|c| !c.is_ascii_whitespace())
}

struct Tail {
    /// The destination, inside `<>` when it had them.
    dest: Range<usize>,
    /// The title, inside its delimiters.
    title: Option<Range<usize>>,
    /// Just past the closing `)`.
    end: usize,
}

fn skip_ws(b: &[u8], mut p: usize, end: usize) -> usize {
    let mut newline = false;
    while p < end {
        match b[p] {
            b' ' | b'\t' => p += 1,
            b'\r' if !newline => p += 1,
            b'\n' if !newline => {
                newline = true;
                p += 1;
            }
            _ => break,
        }
    }
    p
}

/// `(destination "title")` starting at the `(` at `open`.
fn inline_tail(b: &[u8], open: usize, end: usize) -> Option<Tail> {
    let mut p = skip_ws(b, open + 1, end);
    let dest;
    if p < end && b[p] == b'<' {
        let s = p + 1;
        let mut q = s;
        while q < end && b[q] != b'>' {
            if b[q] == b'\n' || b[q] == b'<' || q - s > MAX_DEST {
                return None;
            }
            q += if b[q] == b'\\' { 2 } else { 1 };
        }
        if q >= end {
            return None;
        }
        dest = s..q;
        p = q + 1;
    } else {
        let s = p;
        let mut depth = 0usize;
        while p < end {
            let c = b[p];
            if c == b'\\' && p + 1 < end && b[p + 1].is_ascii_punctuation() {
                p += 2;
                continue;
            }
            if c <= b' ' || c == 0x7f {
                break;
            }
            if c == b'(' {
                depth += 1;
                if depth > MAX_PAREN_DEPTH {
                    return None;
                }
            } else if c == b')' {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            p += 1;
            if p - s > MAX_DEST {
                return None;
            }
        }
        if depth != 0 {
            return None;
        }
        dest = s..p;
    }
    let before = p;
    p = skip_ws(b, p, end);
    let mut title = None;
    if p > before && p < end && matches!(b[p], b'"' | b'\'' | b'(') {
        let closer = if b[p] == b'(' { b')' } else { b[p] };
        let s = p + 1;
        let mut q = s;
        while q < end && b[q] != closer {
            if (closer == b')' && b[q] == b'(') || q - s > MAX_TITLE {
                return None;
            }
            q += if b[q] == b'\\' { 2 } else { 1 };
        }
        if q >= end {
            return None;
        }
        title = Some(s..q);
        p = skip_ws(b, q + 1, end);
    }
    (p < end && b[p] == b')').then(|| Tail { dest, title, end: p + 1 })
}

fn percent_decode_lossy(s: &str) -> String {
    super::resolve::percent_decode(s)
}

/// Whether `c` may appear in a tag name (after the `#`).
pub(crate) fn is_tag_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-' || c == '/'
}

/// Whether `name` (without `#`) is a tag: not empty, not starting with `/`, not only digits.
pub(crate) fn valid_tag(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('/') && name.chars().all(is_tag_char) && name.chars().any(|c| !c.is_ascii_digit() && c != '/')
}

/// Whether `text` may hold a tag: a `#` followed by a tag character, or a
/// frontmatter block (which may list `tags:`). Never false for a note with tags; cheap, so
/// callers skip the full parse for the many notes whose only `#` starts a heading.
pub fn may_have_tags(text: &str) -> bool {
    if text.starts_with("---") || text.starts_with("+++") || text.starts_with("\u{feff}") {
        return true;
    }
    // Any `#` before a tag character: a superset of `tags`' word-start rule, since a span may
    // start right after a code span or link.
    text.match_indices('#').any(|(i, _)| text[i + 1..].chars().next().is_some_and(is_tag_char))
}

/// `#tag` at a word start (after whitespace or at the span's start), outside opaque ranges.
fn tags(text: &str, seg: Range<usize>, opaque: &[Range<usize>], out: &mut Vec<NavLink>) {
    let b = text.as_bytes();
    let mut op = Opaque { ranges: opaque, k: 0 };
    let mut i = seg.start;
    while i < seg.end {
        if let Some(e) = op.skip(i) {
            i = e;
            continue;
        }
        if b[i] != b'#' || (i > seg.start && !b[i - 1].is_ascii_whitespace()) {
            i += 1;
            continue;
        }
        let stop = op.next_start(i + 1).min(seg.end);
        let name_len: usize = text[i + 1..stop].chars().take_while(|&c| is_tag_char(c)).map(char::len_utf8).sum();
        let name = text[i + 1..i + 1 + name_len].trim_end_matches('/');
        if valid_tag(name) {
            let r = i + 1..i + 1 + name.len();
            out.push(NavLink {
                kind: NavKind::Tag,
                range: i..r.end,
                edit: r.clone(),
                label: Some(part(text, r)),
                dest: Dest::Tag,
                ..NavLink::empty()
            });
        }
        i += 1 + name_len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask_texts(s: &str) -> Vec<&str> {
        masks(s, 0..s.len()).iter().map(|m| &s[m.range.clone()]).collect()
    }

    #[test]
    fn opaque_spans_follow_commonmark_precedence() {
        assert_eq!(mask_texts("a `b` ``c ` d`` `e"), ["`b`", "``c ` d``"]);
        assert_eq!(mask_texts(r"\`x` `y`"), ["` `"]);
        assert_eq!(
            mask_texts("<!-- c --> <http://x.y/#a> <a href=\"#x\"> <b and c> a<b"),
            ["<!-- c -->", "<http://x.y/#a>", "<a href=\"#x\">", "<b and c>"]
        );
        assert_eq!(mask_texts("<!-- open <!-- --> x"), ["<!-- open <!-- -->"]);
        assert_eq!(mask_texts("<!-- never closed <!-- again"), Vec::<&str>::new());
    }

    #[test]
    fn inline_tails() {
        let t = |s: &str| inline_tail(s.as_bytes(), 0, s.len()).map(|t| (s[t.dest].to_owned(), t.title.map(|r| s[r].to_owned())));
        assert_eq!(t("(a.md)"), Some(("a.md".into(), None)));
        assert_eq!(t("(<a b.md> 'T')"), Some(("a b.md".into(), Some("T".into()))));
        assert_eq!(t("(a(b)c \"t\")"), Some(("a(b)c".into(), Some("t".into()))));
        assert_eq!(t("(a b)"), None);
        assert_eq!(t("(a\"t\")"), Some(("a\"t\"".into(), None)));
        assert_eq!(t("()"), Some(("".into(), None)));
        assert_eq!(t("((((("), None);
    }
}
