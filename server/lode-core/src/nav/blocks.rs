//! Block structure of a note for navigation, from the tree-sitter-md block grammar: the spans of
//! inline text (where links and tags may live), top-level headings, link reference definitions,
//! and the opaque blocks (code, HTML, frontmatter) where nothing is a link.

use std::cell::RefCell;
use std::ops::Range;

use tree_sitter::{Node, Parser, Tree};

/// A heading at document level (not inside a quote or list).
#[derive(Debug, Clone)]
pub(crate) struct RawHeading {
    pub level: u8,
    /// The heading's lines, as the grammar gives them (may include the line ending).
    pub node: Range<usize>,
    /// The heading's inline content as written (ATX: closing `#`s still included).
    pub content: Option<Range<usize>>,
    pub setext: bool,
}

/// A link reference definition `[label]: destination "title"`.
#[derive(Debug, Clone)]
pub(crate) struct RawDef {
    pub node: Range<usize>,
    /// Inside the brackets.
    pub label: Range<usize>,
    /// As written, `<>` included.
    pub dest: Option<Range<usize>>,
    /// As written, delimiters included.
    pub title: Option<Range<usize>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpaqueKind {
    Fence,
    IndentedCode,
    Html,
    Frontmatter,
}

#[derive(Debug, Default)]
pub(crate) struct Blocks {
    /// The frontmatter block, fences included; `toml` when fenced by `+++`.
    pub frontmatter: Option<Range<usize>>,
    pub toml: bool,
    /// Inline text spans (paragraphs, heading contents, table cells), sorted and disjoint.
    pub segments: Vec<Range<usize>>,
    pub headings: Vec<RawHeading>,
    pub defs: Vec<RawDef>,
    pub lists: Vec<Range<usize>>,
    /// Blocks whose text is never inline content, sorted by start.
    pub opaque: Vec<(Range<usize>, OpaqueKind)>,
}

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// The block tree of `text`, with this thread's parser (one per thread, reused).
pub(crate) fn parse(text: &str) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            parser.set_language(&tree_sitter_md::LANGUAGE.into()).ok()?;
            *slot = Some(parser);
        }
        slot.as_mut()?.parse(text, None)
    })
}

/// Node ranges clamped to the text and snapped to char boundaries: the grammar reports byte
/// offsets, and the rest of the module slices with them.
fn node_range(text: &str, node: Node) -> Range<usize> {
    let start = super::clamp_offset(text, node.start_byte());
    let end = super::clamp_offset(text, node.end_byte()).max(start);
    start..end
}

/// Analyses the block structure. A text the grammar cannot parse has no blocks at all.
pub(crate) fn analyse(text: &str) -> Blocks {
    match parse(text) {
        Some(tree) => analyse_tree(text, &tree),
        None => Blocks::default(),
    }
}

/// [`analyse`] of a block tree already parsed from exactly `text` (the chunker's).
pub(crate) fn analyse_tree(text: &str, tree: &Tree) -> Blocks {
    let mut out = Blocks::default();
    // (node, at document level): headings count for the outline only at document level.
    let mut stack: Vec<(Node, bool)> = vec![(tree.root_node(), true)];
    while let Some((node, top)) = stack.pop() {
        let range = node_range(text, node);
        match node.kind() {
            "inline" | "pipe_table_cell" => {
                if range.start < range.end {
                    out.segments.push(range);
                }
                continue;
            }
            "minus_metadata" | "plus_metadata" => {
                out.toml = node.kind() == "plus_metadata";
                out.frontmatter = Some(range.clone());
                out.opaque.push((range, OpaqueKind::Frontmatter));
                continue;
            }
            "fenced_code_block" => {
                out.opaque.push((range, OpaqueKind::Fence));
                continue;
            }
            "indented_code_block" => {
                out.opaque.push((range, OpaqueKind::IndentedCode));
                continue;
            }
            "html_block" => {
                out.opaque.push((range, OpaqueKind::Html));
                continue;
            }
            "link_reference_definition" => {
                let mut def = RawDef { node: range, label: 0..0, dest: None, title: None };
                let mut cursor = node.walk();
                for child in node.children(&mut cursor) {
                    let r = node_range(text, child);
                    match child.kind() {
                        "link_label" => def.label = (r.start + 1).min(r.end)..r.end.saturating_sub(1).max(r.start),
                        "link_destination" => def.dest = Some(r),
                        "link_title" => def.title = Some(r),
                        _ => {}
                    }
                }
                if def.label.start <= def.label.end && text.is_char_boundary(def.label.start) && text.is_char_boundary(def.label.end) {
                    out.defs.push(def);
                }
                continue;
            }
            "atx_heading" | "setext_heading" if top => {
                out.headings.push(heading(text, node, range));
            }
            "list" => out.lists.push(range),
            _ => {}
        }
        let top = top && matches!(node.kind(), "document" | "section");
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev().map(|c| (c, top)));
    }
    out.segments.sort_by_key(|r| r.start);
    out.headings.sort_by_key(|h| h.node.start);
    out.defs.sort_by_key(|d| d.node.start);
    out.lists.sort_by_key(|r| r.start);
    out.opaque.sort_by_key(|(r, _)| r.start);
    out
}

fn heading(text: &str, node: Node, range: Range<usize>) -> RawHeading {
    let setext = node.kind() == "setext_heading";
    let mut level = 1;
    let mut content = None;
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        let kind = child.kind();
        if let Some(n) = kind.strip_prefix("atx_h").and_then(|k| k.strip_suffix("_marker")) {
            level = n.parse().unwrap_or(1);
        } else if kind == "setext_h2_underline" {
            level = 2;
        } else if kind == "inline" {
            content = Some(node_range(text, child));
        } else if kind == "paragraph" {
            let mut c2 = child.walk();
            content = child.children(&mut c2).find(|c| c.kind() == "inline").map(|c| node_range(text, c));
        }
    }
    RawHeading { level, node: range, content, setext }
}

impl Blocks {
    /// The opaque block strictly holding `offset` (a cursor at its very end counts only when the
    /// block runs to the end of the text, as an unclosed fence does while it is typed).
    pub(crate) fn opaque_at(&self, text_len: usize, offset: usize) -> Option<OpaqueKind> {
        self.opaque.iter().find(|(r, _)| r.start < offset && (offset < r.end || r.end == text_len)).map(|(_, k)| *k)
    }

    /// The inline segment holding `offset`, its end included.
    pub(crate) fn segment_at(&self, offset: usize) -> Option<Range<usize>> {
        let i = self.segments.partition_point(|r| r.end < offset);
        self.segments.get(i).filter(|r| r.start <= offset && offset <= r.end).cloned()
    }
}
