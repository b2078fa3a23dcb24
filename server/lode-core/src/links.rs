//! Link extraction: `[text](target)` links through the tree-sitter-md inline grammar (query in
//! `queries/inline.scm`), and `[[wiki]]` links by a scan of inline text outside code spans.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::OnceLock;

use tree_sitter::{Parser, Query, QueryCursor, StreamingIterator, Tree};

pub const INLINE_QUERY: &str = include_str!("../../../queries/inline.scm");

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// `[[target]]`, `[[target|label]]`, `[[target#heading]]`
    Wiki,
    /// `[label](target)`
    Markdown,
}

impl LinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Wiki => "wiki",
            LinkKind::Markdown => "markdown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub kind: LinkKind,
    /// The target as written, without `#fragment` or `|label`.
    pub target: String,
    /// Byte range of the whole link in the note text.
    pub range: Range<usize>,
}

impl Link {
    /// Whether the target names another place than a note (a URL with a scheme, or mail).
    pub fn is_external(&self) -> bool {
        let t = &self.target;
        t.contains("://") || t.starts_with("mailto:")
    }
}

fn inline_query() -> &'static Query {
    static QUERY: OnceLock<Query> = OnceLock::new();
    QUERY.get_or_init(|| {
        Query::new(&tree_sitter_md::INLINE_LANGUAGE.into(), INLINE_QUERY)
            .expect("queries/inline.scm is compiled into the binary and checked by tests")
    })
}

thread_local! {
    static INLINE_PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Extracts links from the inline content of a parsed block tree, in document order.
pub fn extract(text: &str, blocks: &Tree) -> Vec<Link> {
    let mut ranges = Vec::new();
    let mut wiki_only: Vec<Range<usize>> = Vec::new();
    let mut stack = vec![blocks.root_node()];
    while let Some(node) = stack.pop() {
        if node.kind() == "inline" {
            // Only inline content that can hold a link is worth the inline parse, which costs
            // more than the block parse: `](` for markdown links, and `[[` next to a backtick
            // (a code span may hide it; without one the plain scan below is exact).
            let s = &text[node.byte_range()];
            if s.contains("](") {
                ranges.push(node.range());
            } else if s.contains("[[") {
                if s.contains('`') {
                    ranges.push(node.range());
                } else {
                    wiki_only.push(node.byte_range());
                }
            }
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    let mut links = Vec::new();
    for r in &wiki_only {
        scan_wiki(text, r.clone(), &[], &mut links);
    }
    if ranges.is_empty() {
        links.sort_by_key(|l| l.range.start);
        return links;
    }
    ranges.sort_by_key(|r| r.start_byte);

    let Some(tree) = INLINE_PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut p = Parser::new();
            p.set_language(&tree_sitter_md::INLINE_LANGUAGE.into()).ok()?;
            *slot = Some(p);
        }
        let parser = slot.as_mut()?;
        parser.set_included_ranges(&ranges).ok()?;
        let tree = parser.parse(text, None);
        let _ = parser.set_included_ranges(&[]);
        tree
    }) else {
        return links;
    };

    let query = inline_query();
    let names = query.capture_names();
    let mut code: Vec<Range<usize>> = Vec::new();
    let mut cursor = QueryCursor::new();
    let mut caps = cursor.captures(query, tree.root_node(), text.as_bytes());
    while let Some((m, i)) = caps.next() {
        let cap = m.captures[*i];
        match names[cap.index as usize] {
            "link.destination" => {
                let target = clean_target(&text[cap.node.byte_range()]);
                let whole = cap.node.parent().map(|p| p.byte_range()).unwrap_or(cap.node.byte_range());
                if !target.is_empty() {
                    links.push(Link { kind: LinkKind::Markdown, target, range: whole });
                }
            }
            "code" => code.push(cap.node.byte_range()),
            _ => {}
        }
    }

    for r in &ranges {
        scan_wiki(text, r.start_byte..r.end_byte, &code, &mut links);
    }
    links.sort_by_key(|l| l.range.start);
    links.dedup();
    links
}

fn clean_target(raw: &str) -> String {
    let t = raw.trim().trim_start_matches('<').trim_end_matches('>');
    let t = t.split('#').next().unwrap_or("");
    // A URL stays as written: decoding `%2F` or `%26` would name another page, and the
    // editor (which reads the link as written) must find the same external.
    if t.contains("://") {
        return t.to_owned();
    }
    percent_decode(t)
}

/// Decodes `%20`-style escapes (common in markdown links to files with spaces).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() && s.is_char_boundary(i + 3) {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn scan_wiki(text: &str, range: Range<usize>, code: &[Range<usize>], out: &mut Vec<Link>) {
    let s = &text[range.clone()];
    let mut from = 0;
    while let Some(open) = s[from..].find("[[") {
        let start = from + open;
        let Some(close) = s[start + 2..].find("]]") else { break };
        let inner = &s[start + 2..start + 2 + close];
        let end = start + 2 + close + 2;
        from = end;
        let abs = range.start + start..range.start + end;
        if inner.contains('\n') || inner.contains('[') || code.iter().any(|c| c.start <= abs.start && abs.start < c.end) {
            from = start + 2;
            continue;
        }
        let target = inner.split('|').next().unwrap_or("").split('#').next().unwrap_or("").trim();
        if !target.is_empty() {
            out.push(Link { kind: LinkKind::Wiki, target: target.to_owned(), range: abs });
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::chunk::{chunk_note, ChunkConfig};

    use super::*;

    fn links(md: &str) -> Vec<(LinkKind, String, String)> {
        chunk_note(md.as_bytes(), &ChunkConfig::default()).links.into_iter().map(|l| (l.kind, l.target, md[l.range].to_owned())).collect()
    }

    #[test]
    fn finds_markdown_and_wiki_links_but_not_in_code() {
        let md = "# T\n\nSee [[other note|the other]] and [ADR](decisions/adr%207.md#ctx).\n\n`[[not a link]]` and\n\n```\n[[nor this]]\n```\n\n- item [[Nested#Heading]]\n";
        let got = links(md);
        assert_eq!(
            got,
            vec![
                (LinkKind::Wiki, "other note".into(), "[[other note|the other]]".into()),
                (LinkKind::Markdown, "decisions/adr 7.md".into(), "[ADR](decisions/adr%207.md#ctx)".into()),
                (LinkKind::Wiki, "Nested".into(), "[[Nested#Heading]]".into()),
            ]
        );
    }

    #[test]
    fn external_links_are_marked() {
        let got = chunk_note(b"[x](https://example.com/a)\n", &ChunkConfig::default()).links;
        assert!(got[0].is_external());
    }
}
