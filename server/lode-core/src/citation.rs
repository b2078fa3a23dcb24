//! Citation links: how an inserted answer points at the exact span it quotes. A citation is an
//! ordinary markdown link — it renders and navigates in any viewer — whose title carries the
//! version id and byte range: `[runbooks/x.md:5](../runbooks/x.md#L5 "lode <version>:<start>-<end>")`.

use std::ops::Range;

/// The shortest version id prefix a citation may carry.
pub const MIN_ID: usize = 12;

/// A citation found in a note's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CitationLink {
    /// Byte range of the whole link in the text it was found in.
    pub range: Range<usize>,
    /// The link destination as written (relative path, `#L` fragment included).
    pub target: String,
    /// As written: the full id or a prefix of it (12 hex or more).
    pub version_id: String,
    /// Byte range of the quoted span in that version.
    pub span: Range<usize>,
}

/// Renders a citation link from a note at `from` (vault-relative) to `to` (vault-relative, or
/// the URL of an external's snapshot: the link then leads to the page, and the title still
/// pins the snapshot and range).
pub fn render(from: &str, to: &str, line: usize, version_id: &str, span: Range<usize>) -> String {
    if to.contains("://") {
        let shown = to.split_once("://").map_or(to, |(_, rest)| rest).trim_end_matches('/');
        let shown = shown.replace(['[', ']'], "");
        let dest = to.replace(' ', "%20").replace('(', "%28").replace(')', "%29");
        return format!("[{shown}:{line}]({dest} \"lode {version_id}:{}-{}\")", span.start, span.end);
    }
    let rel = relative(from, to);
    format!("[{to}:{line}]({rel}#L{line} \"lode {version_id}:{}-{}\")", span.start, span.end)
}

/// The path of `to` relative to the folder of `from` (both vault-relative, `/`-separated).
pub fn relative(from: &str, to: &str) -> String {
    let from_dir: Vec<&str> = from.split('/').collect::<Vec<_>>().split_last().map(|(_, d)| d.to_vec()).unwrap_or_default();
    let to_parts: Vec<&str> = to.split('/').collect();
    let common = from_dir.iter().zip(&to_parts).take_while(|(a, b)| a == b).count();
    let mut out: Vec<&str> = std::iter::repeat_n("..", from_dir.len() - common).collect();
    out.extend(&to_parts[common..]);
    out.join("/")
}

/// Every citation link in `text`, in order.
pub fn find_all(text: &str) -> Vec<CitationLink> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(" \"lode ") {
        let title_start = from + at + 2;
        from = title_start;
        let Some(close) = text[title_start..].find("\")") else { break };
        let title = &text[title_start + 5..title_start + close];
        let Some((vid, range)) = title.split_once(':') else { continue };
        let Some((s, e)) = range.split_once('-') else { continue };
        let (Ok(s), Ok(e)) = (s.parse::<usize>(), e.parse::<usize>()) else { continue };
        // A full id (64 hex) or a prefix of it of at least 12 (what lode writes): resolved
        // against the store by whoever reads the citation.
        if !(MIN_ID..=64).contains(&vid.len()) || !vid.bytes().all(|b| b.is_ascii_hexdigit()) || s > e {
            continue;
        }
        // Walk back to the link's `](` and its `[`, on the same line.
        let line_start = text[..title_start].rfind('\n').map_or(0, |i| i + 1);
        let Some(paren) = text[line_start..title_start].rfind("](").map(|i| line_start + i) else { continue };
        let Some(open) = text[line_start..paren].rfind('[').map(|i| line_start + i) else { continue };
        let end = title_start + close + 2;
        out.push(CitationLink {
            range: open..end,
            target: text[paren + 2..title_start - 2].to_owned(),
            version_id: vid.to_owned(),
            span: s..e,
        });
        from = end;
    }
    out
}

/// The citation whose link covers byte `offset`.
pub fn at(text: &str, offset: usize) -> Option<CitationLink> {
    find_all(text).into_iter().find(|c| c.range.start <= offset && offset <= c.range.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: &str = "6f28d94244f8aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn render_and_find_round_trip() {
        let link = render("meetings/sync.md", "runbooks/certs.md", 5, V, 120..240);
        assert_eq!(link, format!("[runbooks/certs.md:5](../runbooks/certs.md#L5 \"lode {V}:120-240\")"));
        let text = format!("- Certs rotate every 60 days {link} — quoted & coupled\n- plain [x](y.md \"title\")\n");
        let found = find_all(&text);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].version_id, V);
        assert_eq!(found[0].span, 120..240);
        assert_eq!(found[0].target, "../runbooks/certs.md#L5");
        assert_eq!(&text[found[0].range.clone()], link);
        assert!(at(&text, found[0].range.start + 3).is_some());
        assert!(at(&text, 2).is_none());
    }

    #[test]
    fn a_snapshot_citation_links_to_the_page_and_pins_the_snapshot() {
        let link = render("notes/a.md", "https://docs.example.com/pool (v2)", 3, V, 10..40);
        assert_eq!(link, format!("[docs.example.com/pool (v2):3](https://docs.example.com/pool%20%28v2%29 \"lode {V}:10-40\")"));
        let found = find_all(&format!("- claim {link}\n"));
        assert_eq!((found.len(), found[0].span.clone(), found[0].version_id.as_str()), (1, 10..40, V));
        assert_eq!(found[0].target, "https://docs.example.com/pool%20%28v2%29");
    }

    #[test]
    fn relative_paths() {
        assert_eq!(relative("a.md", "b/c.md"), "b/c.md");
        assert_eq!(relative("x/y/a.md", "x/b.md"), "../b.md");
        assert_eq!(relative("x/a.md", "x/b.md"), "b.md");
    }

    #[test]
    fn malformed_titles_are_ignored() {
        for t in ["[a](b \"lode nothex:1-2\")", "[a](b \"lode ", "[a](b \"lode abc:5-1\")"] {
            assert!(find_all(t).is_empty(), "{t}");
        }
    }
}
