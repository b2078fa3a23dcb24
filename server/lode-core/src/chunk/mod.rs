//! Structural chunker: turns a note's bytes into passages that follow its own structure
//! (heading sections, paragraphs, list items, quotes, code blocks, tables), sub-splitting any
//! block over the token budget at sentence or line boundaries with a small overlap.
//!
//! Invariants, relied on by the store, the gate and citations:
//! - every passage range is a range of the raw note bytes, and `bytes[range]` (decoded lossily if
//!   the note is not UTF-8) is exactly the passage text, with no leading or trailing whitespace;
//! - the same bytes and config always give the same passages, in document order;
//! - frontmatter is metadata, never a passage;
//! - no model, no network, no panic on any input.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::OnceLock;

use tree_sitter::{Node, Parser, Query, Tree};

use crate::frontmatter;
use crate::links::{self, Link};
use crate::text::{floor_char_boundary, is_cjk, token_count, NoteText};

pub const BLOCKS_QUERY: &str = include_str!("../../../../queries/blocks.scm");

/// Chunking settings. `max_tokens` bounds a passage (see [`token_count`]); a block over it is
/// split, and consecutive pieces share up to `overlap_tokens` of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChunkConfig {
    pub max_tokens: usize,
    pub overlap_tokens: usize,
    /// Nesting depth past which a block is treated as plain lines (guards the recursion).
    pub max_depth: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig { max_tokens: 200, overlap_tokens: 24, max_depth: 48 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PassageKind {
    Heading,
    Paragraph,
    ListItem,
    Quote,
    Code,
    Table,
    Html,
}

impl PassageKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PassageKind::Heading => "heading",
            PassageKind::Paragraph => "paragraph",
            PassageKind::ListItem => "list_item",
            PassageKind::Quote => "quote",
            PassageKind::Code => "code",
            PassageKind::Table => "table",
            PassageKind::Html => "html",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passage {
    /// Raw byte range of the passage in the note.
    pub range: Range<usize>,
    pub kind: PassageKind,
    /// Texts of the enclosing headings, outermost first.
    pub heading_path: Vec<String>,
    /// Raw byte range of the enclosing block used for small-to-big expansion: the section, list
    /// or split block the passage belongs to (the whole note for top-level text).
    pub parent: Range<usize>,
    /// True when the passage is a piece of a block that was over the token budget.
    pub split: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    pub level: u8,
    pub text: String,
    pub range: Range<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct ChunkedNote {
    /// `title` from frontmatter, else the first level-1 heading.
    pub title: Option<String>,
    pub frontmatter: Option<Range<usize>>,
    pub meta: Vec<(String, String)>,
    pub headings: Vec<Heading>,
    pub passages: Vec<Passage>,
    pub links: Vec<Link>,
    /// The bytes were not valid UTF-8 and were decoded with replacements.
    pub lossy: bool,
    /// The note's tags as [`crate::nav::links`] finds them, read from the chunker's own parse;
    /// `None` when they were not (bytes that are not UTF-8, a text the grammar could not parse):
    /// then whoever needs them parses the bytes themselves.
    pub tags: Option<Vec<Tag>>,
}

/// A tag of a note: its name as written (without `#`) and the whole item's byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    pub name: String,
    pub range: Range<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Section,
    Heading,
    Container,
    Item,
    Prose,
    Lines,
    Frontmatter,
}

/// Node kind id → role, read from `queries/blocks.scm`. Every pattern there is a single node type
/// with one capture, so roles are a property of the kind, looked up without running a query
/// cursor on every save. The file is still compiled as a real query (in tests and at first use)
/// so a malformed edit fails loudly.
fn roles_by_kind() -> &'static [Option<Role>] {
    static ROLES: OnceLock<Vec<Option<Role>>> = OnceLock::new();
    ROLES.get_or_init(|| {
        let lang: tree_sitter::Language = tree_sitter_md::LANGUAGE.into();
        Query::new(&lang, BLOCKS_QUERY).expect("queries/blocks.scm is compiled into the binary and checked by tests");
        let mut table = vec![None; lang.node_kind_count()];
        for line in BLOCKS_QUERY.lines().map(str::trim).filter(|l| l.starts_with('(')) {
            let Some((pattern, capture)) = line.split_once('@') else { continue };
            let kind = pattern.trim().trim_start_matches('(').trim_end_matches(')').trim();
            let role = match capture.trim() {
                "section" => Role::Section,
                "heading" => Role::Heading,
                "container" => Role::Container,
                "item" => Role::Item,
                "prose" => Role::Prose,
                "lines" => Role::Lines,
                "frontmatter" => Role::Frontmatter,
                other => panic!("queries/blocks.scm: unknown capture @{other}"),
            };
            let id = lang.id_for_node_kind(kind, true);
            assert!(id != 0, "queries/blocks.scm: unknown node kind {kind}");
            table[id as usize] = Some(role);
        }
        table
    })
}

thread_local! {
    static BLOCK_PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

fn parse_blocks(text: &str) -> Option<Tree> {
    BLOCK_PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            parser.set_language(&tree_sitter_md::LANGUAGE.into()).ok()?;
            *slot = Some(parser);
        }
        slot.as_mut()?.parse(text, None)
    })
}

/// Chunks a note. Never fails: text the parser cannot structure is split as plain lines.
pub fn chunk_note(raw: &[u8], cfg: &ChunkConfig) -> ChunkedNote {
    let decoded = NoteText::decode(raw);
    let text = decoded.text.as_str();
    let cfg = ChunkConfig { max_tokens: cfg.max_tokens.max(8), ..*cfg };

    let mut walker = Walker { text, cfg, roles: roles_by_kind(), passages: Vec::new(), headings: Vec::new(), frontmatter: None };
    let mut links = Vec::new();
    let mut tags = None;
    match parse_blocks(text) {
        Some(tree) => {
            let root = tree.root_node();
            let mut path = Vec::new();
            walker.walk(root, &mut path, 0..text.len(), 0);
            // The grammar stops at bytes it treats as end of input (NUL); text it never reached, or
            // a tree with no passage at all over non-blank text, is kept as plain lines.
            let end = root.end_byte().min(text.len());
            let body_start = walker.frontmatter.as_ref().map_or(0, |f| f.end);
            if walker.passages.is_empty() {
                walker.leaf(body_start..text.len(), PassageKind::Paragraph, &[], 0..text.len(), true);
            } else if !text[end..].trim().is_empty() {
                walker.leaf(end..text.len(), PassageKind::Paragraph, &[], 0..text.len(), true);
            }
            links = links::extract(text, &tree);
            // Tags need the text's own byte ranges: only for bytes that are the text.
            if !decoded.is_lossy() {
                tags = Some(if crate::nav::may_have_tags(text) {
                    crate::nav::tags_in(text, &tree)
                        .into_iter()
                        .filter_map(|l| l.label.map(|label| Tag { name: label.text, range: l.range }))
                        .collect()
                } else {
                    Vec::new()
                });
            }
        }
        None => walker.leaf(0..text.len(), PassageKind::Paragraph, &[], 0..text.len(), true),
    }

    let meta = walker.frontmatter.clone().map(|r| frontmatter::parse(&text[r])).unwrap_or_default();
    let title = meta
        .iter()
        .find(|(k, _)| k == "title")
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty())
        .or_else(|| walker.headings.iter().find(|h| h.level == 1).map(|h| h.text.clone()));

    let to_raw = |r: Range<usize>| decoded.range_to_raw(r);
    ChunkedNote {
        title,
        frontmatter: walker.frontmatter.map(to_raw),
        meta,
        headings: walker.headings.into_iter().map(|h| Heading { range: to_raw(h.range), ..h }).collect(),
        passages: walker.passages.into_iter().map(|p| Passage { range: to_raw(p.range), parent: to_raw(p.parent), ..p }).collect(),
        links: links.into_iter().map(|l| Link { range: to_raw(l.range), ..l }).collect(),
        lossy: decoded.is_lossy(),
        tags,
    }
}

struct Walker<'t> {
    text: &'t str,
    cfg: ChunkConfig,
    roles: &'static [Option<Role>],
    passages: Vec<Passage>,
    headings: Vec<Heading>,
    frontmatter: Option<Range<usize>>,
}

impl<'t> Walker<'t> {
    fn role(&self, node: Node) -> Option<Role> {
        // Anonymous tokens can share a name with a node kind; only named nodes have roles.
        if !node.is_named() {
            return None;
        }
        self.roles.get(node.kind_id() as usize).copied().flatten()
    }

    fn walk(&mut self, node: Node, path: &mut Vec<String>, parent: Range<usize>, depth: usize) {
        let range = node.byte_range();
        if depth > self.cfg.max_depth {
            self.leaf(range, PassageKind::Paragraph, path, parent, true);
            return;
        }
        match self.role(node) {
            Some(Role::Frontmatter) => self.frontmatter = Some(trim(self.text, range)),
            Some(Role::Section) => self.section(node, path, depth),
            Some(Role::Heading) => {
                // A heading outside a section (not produced by the grammar today): keep its text.
                if let Some(h) = self.heading(node) {
                    self.leaf(h.range, PassageKind::Heading, path, parent, false);
                }
            }
            Some(Role::Container) => {
                // An answer lode inserted earlier is not the user's note: never indexed, so it
                // can never be retrieved or become evidence for a later answer.
                if node.kind() == "block_quote"
                    && self.text[range.clone()].trim_start().starts_with(crate::gate::markup::LODE_ANSWER_OPENER)
                {
                    return;
                }
                if node.kind() == "block_quote" && self.fits(&range) {
                    self.leaf(range, PassageKind::Quote, path, parent, false);
                } else {
                    let own = trim(self.text, range);
                    self.children(node, path, own, depth);
                }
            }
            Some(Role::Item) => {
                if self.fits(&range) {
                    self.leaf(range, PassageKind::ListItem, path, parent, false);
                } else {
                    let own = trim(self.text, range);
                    self.children(node, path, own, depth);
                }
            }
            Some(Role::Prose) => self.leaf(range, PassageKind::Paragraph, path, parent, false),
            Some(Role::Lines) => {
                let kind = match node.kind() {
                    "pipe_table" => PassageKind::Table,
                    "html_block" => PassageKind::Html,
                    _ => PassageKind::Code,
                };
                self.leaf(range, kind, path, parent, true)
            }
            None => self.children(node, path, parent, depth),
        }
    }

    fn children(&mut self, node: Node, path: &mut Vec<String>, parent: Range<usize>, depth: usize) {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        for child in kids {
            self.walk(child, path, parent.clone(), depth + 1);
        }
    }

    fn section(&mut self, node: Node, path: &mut Vec<String>, depth: usize) {
        let own = trim(self.text, node.byte_range());
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        let heading = kids.first().filter(|k| self.role(**k) == Some(Role::Heading)).and_then(|k| self.heading(*k));
        let pushed = heading.is_some();
        if let Some(h) = &heading {
            path.push(h.text.clone());
        }
        let before = self.passages.len();
        let skip = usize::from(pushed);
        for child in kids.into_iter().skip(skip) {
            self.walk(child, path, own.clone(), depth + 1);
        }
        if pushed {
            path.pop();
        }
        // A section with nothing but its heading still makes the heading findable.
        if let (Some(h), true) = (heading, self.passages.len() == before) {
            if !h.text.is_empty() {
                self.passages.insert(
                    before,
                    Passage { range: h.range, kind: PassageKind::Heading, heading_path: path.clone(), parent: own, split: false },
                );
            }
        }
    }

    fn heading(&mut self, node: Node) -> Option<Heading> {
        let range = trim(self.text, node.byte_range());
        let raw = &self.text[range.clone()];
        let (level, text) = if raw.starts_with('#') {
            let level = raw.bytes().take_while(|&b| b == b'#').count().min(6) as u8;
            let t = raw.trim_start_matches('#').trim();
            // A closing sequence is all `#`s, or `#`s after a space or tab ("C# and F#" keeps
            // its last `#`), as CommonMark has it.
            let closed = t.trim_end_matches('#');
            let t = if closed.is_empty() || closed.ends_with([' ', '\t']) { closed.trim_end() } else { t };
            (level, t.to_owned())
        } else {
            // setext: text lines, then an underline of = (level 1) or - (level 2)
            let mut lines: Vec<&str> = raw.lines().collect();
            let underline = lines.pop().unwrap_or("");
            let level = if underline.trim_start().starts_with('=') { 1 } else { 2 };
            (level, lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" "))
        };
        let h = Heading { level, text, range };
        self.headings.push(h.clone());
        Some(h)
    }

    fn fits(&self, range: &Range<usize>) -> bool {
        token_count(&self.text[range.clone()]) <= self.cfg.max_tokens
    }

    /// Emits `range` as one passage, or as overlapping pieces when it is over budget.
    fn leaf(&mut self, range: Range<usize>, kind: PassageKind, path: &[String], parent: Range<usize>, by_lines: bool) {
        let range = trim(self.text, range);
        if range.is_empty() {
            return;
        }
        let push = |w: &mut Self, r: Range<usize>, parent: Range<usize>, split: bool| {
            w.passages.push(Passage { range: r, kind, heading_path: path.to_vec(), parent, split });
        };
        if self.fits(&range) {
            push(self, range, parent, false);
            return;
        }
        let units = if by_lines { line_units(self.text, range.clone()) } else { sentence_units(self.text, range.clone()) };
        for piece in pack(self.text, &units, &self.cfg) {
            let piece = trim(self.text, piece);
            if !piece.is_empty() {
                push(self, piece, range.clone(), true);
            }
        }
    }
}

/// Shrinks `range` to exclude leading and trailing whitespace.
fn trim(text: &str, range: Range<usize>) -> Range<usize> {
    let s = &text[range.clone()];
    let start = range.start + (s.len() - s.trim_start().len());
    let end = range.end - (s.len() - s.trim_end().len());
    if start >= end {
        start..start
    } else {
        start..end
    }
}

/// Sentence ranges covering `range`: a sentence ends after `.`, `!`, `?` (or their CJK forms)
/// followed by whitespace, and a blank line always ends one. A period does not end a sentence
/// after a list number at the start of a line ("2. Restart"), an initial ("J. Smith") or a
/// common abbreviation ("e.g. this").
pub(crate) fn sentence_units(text: &str, range: Range<usize>) -> Vec<Range<usize>> {
    const ABBREVIATIONS: &[&str] = &["al", "approx", "cf", "dr", "e.g", "eg", "fig", "i.e", "ie", "mr", "mrs", "ms", "vs"];
    let s = &text[range.clone()];
    let mut units = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end_here = match c {
            '.' | '!' | '?' => chars.peek().is_some_and(|&(_, n)| n.is_whitespace()) && !(c == '.' && not_a_stop(s, i, ABBREVIATIONS)),
            '。' | '！' | '？' => true,
            '\n' => chars.peek().is_some_and(|&(_, n)| n == '\n' || n == '\r'),
            _ => false,
        };
        if end_here {
            let end = i + c.len_utf8();
            units.push(range.start + start..range.start + end);
            start = end;
        }
    }
    if start < s.len() {
        units.push(range.start + start..range.end);
    }
    units
}

/// Whether the period at `dot` belongs to a list number, an initial or an abbreviation.
pub(crate) fn not_a_stop(s: &str, dot: usize, abbreviations: &[&str]) -> bool {
    // After the whitespace character, whatever its width (a no-break space is two bytes).
    let word_start = s[..dot].char_indices().rfind(|(_, c)| c.is_whitespace()).map_or(0, |(i, c)| i + c.len_utf8());
    let word = &s[word_start..dot];
    if word.is_empty() {
        return false;
    }
    let line_start = s[..word_start].rfind('\n').map_or(0, |i| i + 1);
    let first_on_line = s[line_start..word_start].trim().is_empty();
    if first_on_line && word.len() <= 3 && word.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    let mut letters = word.chars();
    if letters.next().is_some_and(char::is_uppercase) && letters.next().is_none() {
        return true;
    }
    let lower = word.trim_start_matches(['(', '"', '\'']).to_lowercase();
    abbreviations.contains(&lower.as_str())
}

fn line_units(text: &str, range: Range<usize>) -> Vec<Range<usize>> {
    let s = &text[range.clone()];
    let mut units = Vec::new();
    let mut start = 0;
    for (i, _) in s.match_indices('\n') {
        units.push(range.start + start..range.start + i + 1);
        start = i + 1;
    }
    if start < s.len() {
        units.push(range.start + start..range.end);
    }
    units
}

/// Greedily packs units into pieces of at most `max_tokens`, each piece after the first starting
/// with up to `overlap_tokens` worth of the previous piece's last units. A unit over budget on its
/// own is cut into token windows.
fn pack(text: &str, units: &[Range<usize>], cfg: &ChunkConfig) -> Vec<Range<usize>> {
    let tokens: Vec<usize> = units.iter().map(|u| token_count(&text[u.clone()])).collect();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < units.len() {
        if tokens[i] > cfg.max_tokens {
            pieces.extend(token_windows(text, units[i].clone(), cfg));
            i += 1;
            continue;
        }
        let mut j = i;
        let mut sum = 0;
        while j < units.len() && tokens[j] <= cfg.max_tokens && sum + tokens[j] <= cfg.max_tokens {
            sum += tokens[j];
            j += 1;
        }
        pieces.push(units[i].start..units[j - 1].end);
        if j >= units.len() {
            break;
        }
        let mut k = j;
        let mut overlap = 0;
        while k - 1 > i && overlap + tokens[k - 1] <= cfg.overlap_tokens {
            overlap += tokens[k - 1];
            k -= 1;
        }
        i = k;
    }
    pieces
}

/// Cuts one over-long unit into windows of `max_tokens` tokens overlapping by `overlap_tokens`.
/// A token is a whitespace-delimited word (at most 64 bytes; longer runs are cut) or one CJK
/// character, so text without spaces is bounded too.
fn token_windows(text: &str, range: Range<usize>, cfg: &ChunkConfig) -> Vec<Range<usize>> {
    const MAX_WORD: usize = 64;
    let s = &text[range.clone()];
    let mut toks: Vec<Range<usize>> = Vec::new();
    let mut word_start: Option<usize> = None;
    for (i, c) in s.char_indices() {
        if c.is_whitespace() || is_cjk(c) {
            if let Some(ws) = word_start.take() {
                toks.push(ws..i);
            }
            if is_cjk(c) {
                toks.push(i..i + c.len_utf8());
            }
        } else {
            match word_start {
                None => word_start = Some(i),
                Some(ws) if i - ws >= MAX_WORD => {
                    toks.push(ws..i);
                    word_start = Some(i);
                }
                _ => {}
            }
        }
    }
    if let Some(ws) = word_start {
        toks.push(ws..s.len());
    }
    let step = cfg.max_tokens.saturating_sub(cfg.overlap_tokens).max(1);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let j = (i + cfg.max_tokens).min(toks.len());
        let start = floor_char_boundary(s, toks[i].start);
        out.push(range.start + start..range.start + toks[j - 1].end);
        if j == toks.len() {
            break;
        }
        i += step;
    }
    out
}

#[cfg(test)]
mod tests;
