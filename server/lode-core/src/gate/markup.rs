//! Markup that is not assertion: the parts of a note a quote may not come from (HTML comments,
//! struck-through text, code blocks, answers lode inserted earlier) and the parts a reader does
//! not read as words (link destinations, URLs, HTML tags), which coupling skips.

use std::ops::Range;

/// Why a region of a note is not evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotEvidence {
    HtmlComment,
    Strikethrough,
    CodeBlock,
    LodeAnswer,
}

impl NotEvidence {
    pub fn describe(self) -> &'static str {
        match self {
            NotEvidence::HtmlComment => "inside an HTML comment",
            NotEvidence::Strikethrough => "struck through",
            NotEvidence::CodeBlock => "inside a code block",
            NotEvidence::LodeAnswer => "inside an answer lode inserted earlier",
        }
    }
}

/// The opening line of an answer block lode inserts (`render::markdown` in lode-answer).
pub const LODE_ANSWER_OPENER: &str = "> **lode** —";

/// Every region of `body` that is not evidence, in order of start.
pub fn not_evidence(body: &str) -> Vec<(Range<usize>, NotEvidence)> {
    let mut out = Vec::new();
    // Line-based: fenced code blocks and lode answer blocks.
    let mut fence: Option<(usize, char, usize)> = None; // (start, char, length)
    let mut answer: Option<usize> = None;
    let mut pos = 0;
    for line in body.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let content = line.trim_start_matches([' ', '\t']);
        let unquoted = content.trim_start_matches(['>', ' ', '\t']);
        if let Some((fs, ch, len)) = fence {
            let run = unquoted.chars().take_while(|&c| c == ch).count();
            if run >= len && unquoted[run * ch.len_utf8()..].trim().is_empty() {
                out.push((fs..pos, NotEvidence::CodeBlock));
                fence = None;
            }
            continue;
        }
        if let Some(a) = answer {
            if content.starts_with('>') && !content.starts_with(LODE_ANSWER_OPENER) {
                continue;
            }
            out.push((a..start, NotEvidence::LodeAnswer));
            answer = None;
        }
        if content.starts_with(LODE_ANSWER_OPENER) {
            answer = Some(start);
            continue;
        }
        for ch in ['`', '~'] {
            let run = unquoted.chars().take_while(|&c| c == ch).count();
            if run >= 3 {
                fence = Some((start, ch, run));
                break;
            }
        }
    }
    if let Some((fs, _, _)) = fence {
        out.push((fs..body.len(), NotEvidence::CodeBlock));
    }
    if let Some(a) = answer {
        out.push((a..body.len(), NotEvidence::LodeAnswer));
    }
    // HTML comments (an unterminated one runs to the end, as a renderer hides it).
    let mut from = 0;
    while let Some(i) = body[from..].find("<!--") {
        let s = from + i;
        let e = body[s + 4..].find("-->").map_or(body.len(), |j| s + 4 + j + 3);
        out.push((s..e, NotEvidence::HtmlComment));
        from = e;
    }
    // Strikethrough: `~~…~~` within a paragraph, and <del>/<s>/<strike> elements.
    let mut from = 0;
    while let Some(i) = body[from..].find("~~") {
        let s = from + i;
        if body[s..].starts_with("~~~") {
            from = s + body[s..].find(|c| c != '~').unwrap_or(body.len() - s);
            continue;
        }
        let rest = &body[s + 2..];
        let para_end = rest.find("\n\n").unwrap_or(rest.len());
        match rest[..para_end].find("~~") {
            Some(j) => {
                out.push((s..s + 2 + j + 2, NotEvidence::Strikethrough));
                from = s + 2 + j + 2;
            }
            None => from = s + 2,
        }
    }
    for (open, close) in [("<del>", "</del>"), ("<s>", "</s>"), ("<strike>", "</strike>")] {
        let lower = body.to_ascii_lowercase();
        let mut from = 0;
        while let Some(i) = lower[from..].find(open) {
            let s = from + i;
            let e = lower[s..].find(close).map_or(body.len(), |j| s + j + close.len());
            out.push((s..e, NotEvidence::Strikethrough));
            from = e;
        }
    }
    out.sort_by_key(|(r, _)| r.start);
    out
}

/// The first region `range` overlaps, if any.
pub fn overlapping(regions: &[(Range<usize>, NotEvidence)], range: &Range<usize>) -> Option<(Range<usize>, NotEvidence)> {
    regions.iter().find(|(r, _)| r.start < range.end && range.start < r.end).cloned()
}

/// Byte ranges of `text` a reader does not read as words: link destinations (`](…)`), bare
/// URLs, the target of a labelled wiki link (`[[target|label]]`), HTML tags, and the URL of a
/// reference definition. Tokens inside them are skipped by coupling, in claims and sources alike.
pub fn unread(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            // A footnote reference `[^label]`: a pointer to another part of the note, not words of
            // this sentence (the structural step reads the definition). An inline note `^[text]`
            // stays readable: its words qualify the sentence they stand in.
            b'[' if b.get(i + 1) == Some(&b'^') => {
                let rest = &text[i + 2..];
                match rest.find(']') {
                    Some(c) if c > 0 && c < 100 && !rest[..c].contains(['\n', ' ']) && !rest[c + 1..].starts_with(':') => {
                        out.push(i..i + 2 + c + 1);
                        i += 2 + c + 1;
                    }
                    _ => i += 2,
                }
            }
            b']' if b.get(i + 1) == Some(&b'(') => {
                let rest = &text[i + 2..];
                match rest.find(')') {
                    Some(c) if !rest[..c].contains('\n') => {
                        out.push(i + 1..i + 2 + c + 1);
                        i += 2 + c + 1;
                    }
                    _ => i += 1,
                }
            }
            b'[' if b.get(i + 1) == Some(&b'[') => {
                let rest = &text[i + 2..];
                match rest.find("]]") {
                    Some(c) if !rest[..c].contains('\n') => {
                        if let Some(bar) = rest[..c].find('|') {
                            out.push(i..i + 2 + bar + 1);
                        }
                        i += 2 + c + 2;
                    }
                    _ => i += 2,
                }
            }
            b'<' => {
                let rest = &text[i + 1..];
                let tagish = rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/');
                match rest.find('>') {
                    Some(c) if tagish && !rest[..c].contains('\n') && c < 200 => {
                        out.push(i..i + 1 + c + 1);
                        i += 1 + c + 1;
                    }
                    _ => i += 1,
                }
            }
            b':' if text[i..].starts_with("://") => {
                let start = text[..i]
                    .char_indices()
                    .rev()
                    .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '+' || c == '.' || c == '-'))
                    .map_or(0, |(s, c)| s + c.len_utf8());
                let end =
                    text[i..].find(|c: char| c.is_whitespace() || matches!(c, ')' | '>' | '"' | ']' | '`')).map_or(text.len(), |e| i + e);
                out.push(start..end);
                i = end;
            }
            _ => i += 1,
        }
    }
    out.sort_by_key(|r| r.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(body: &str) -> Vec<(&str, NotEvidence)> {
        not_evidence(body).into_iter().map(|(r, k)| (&body[r], k)).collect()
    }

    #[test]
    fn finds_regions_that_are_not_evidence() {
        let body = "Real text.\n<!-- rotated every 30 days -->\nMore ~~every 90 days~~ every 60 days.\n\n```sh\nexport X=1\n```\n\n> **lode** — how often?\n>\n> - every 90 days *(quoted)*\n\nAfter.\n";
        let got = kinds(body);
        assert_eq!(
            got,
            vec![
                ("<!-- rotated every 30 days -->", NotEvidence::HtmlComment),
                ("~~every 90 days~~", NotEvidence::Strikethrough),
                ("```sh\nexport X=1\n```\n", NotEvidence::CodeBlock),
                ("> **lode** — how often?\n>\n> - every 90 days *(quoted)*\n", NotEvidence::LodeAnswer),
            ]
        );
        assert_eq!(kinds("open <!-- never closed"), vec![("<!-- never closed", NotEvidence::HtmlComment)]);
        assert_eq!(kinds("~~~\ncode\n"), vec![("~~~\ncode\n", NotEvidence::CodeBlock)]);
        assert_eq!(kinds("a ~~b\n\nc~~ d"), vec![], "strikethrough does not cross paragraphs");
        assert_eq!(kinds("x <del>old</del> y"), vec![("<del>old</del>", NotEvidence::Strikethrough)]);
    }

    #[test]
    fn unread_parts() {
        let t = "See [the runbook](../runbooks/rotate.md), https://x.y/z?a=1 and [[target|label]] <br/> ok";
        let got: Vec<&str> = unread(t).into_iter().map(|r| &t[r]).collect();
        assert_eq!(got, vec!["(../runbooks/rotate.md)", "https://x.y/z?a=1", "[[target|", "<br/>"]);
        assert!(unread("a < b and c > d").is_empty());
    }
}
