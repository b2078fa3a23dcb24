//! Text utilities: decoding note bytes (lossily when they are not UTF-8) while keeping every
//! offset in the raw bytes, line numbers, and whitespace normalisation.

use std::ops::Range;

/// A note's bytes decoded for parsing. When the bytes are valid UTF-8, `text` is the bytes and the
/// offset maps are the identity. Otherwise each invalid sequence becomes U+FFFD in `text`, and
/// [`NoteText::to_raw`] maps offsets in `text` back to offsets in the raw bytes.
///
/// Invariant: every range lode stores or reports is a range of the *raw* version bytes.
#[derive(Debug, Clone)]
pub struct NoteText {
    pub text: String,
    /// `(text_offset, raw_offset)` at the start of every segment after a replacement; empty when
    /// the bytes were valid UTF-8.
    segments: Vec<(usize, usize)>,
}

impl NoteText {
    pub fn decode(raw: &[u8]) -> NoteText {
        match std::str::from_utf8(raw) {
            Ok(s) => NoteText { text: s.to_owned(), segments: Vec::new() },
            Err(_) => {
                let mut text = String::with_capacity(raw.len() + 16);
                let mut segments = vec![(0, 0)];
                let mut raw_pos = 0;
                for chunk in raw.utf8_chunks() {
                    text.push_str(chunk.valid());
                    raw_pos += chunk.valid().len();
                    if !chunk.invalid().is_empty() {
                        text.push(char::REPLACEMENT_CHARACTER);
                        raw_pos += chunk.invalid().len();
                        segments.push((text.len(), raw_pos));
                    }
                }
                NoteText { text, segments }
            }
        }
    }

    /// Whether decoding replaced invalid bytes.
    pub fn is_lossy(&self) -> bool {
        !self.segments.is_empty()
    }

    /// Maps an offset in `text` (on a char boundary) to the raw bytes.
    pub fn to_raw(&self, offset: usize) -> usize {
        if self.segments.is_empty() {
            return offset;
        }
        let i = self.segments.partition_point(|&(t, _)| t <= offset) - 1;
        let (t, r) = self.segments[i];
        r + (offset - t)
    }

    pub fn range_to_raw(&self, range: Range<usize>) -> Range<usize> {
        self.to_raw(range.start)..self.to_raw(range.end)
    }
}

/// 1-based line number of a byte offset.
pub fn line_of(bytes: &[u8], offset: usize) -> usize {
    let end = offset.min(bytes.len());
    1 + bytes[..end].iter().filter(|&&b| b == b'\n').count()
}

/// Collapses every run of whitespace to a single space and trims both ends.
pub fn normalize_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Code points a reader does not see: zero-width spaces and joiners, the word joiner, a byte
/// order mark and a soft hyphen.
pub fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{2060}'..='\u{2064}' | '\u{180E}' | '\u{FEFF}' | '\u{00AD}')
}

/// Characters whose compatibility form reads as another value: superscripts and subscripts
/// (`10²` is not `102`), vulgar fractions and circled numbers. They are compared as written.
/// Subscripts keep theirs too: `1010₂` is a base-2 number, not `10102`.
fn keeps_its_form(c: char) -> bool {
    matches!(c, '\u{00B2}' | '\u{00B3}' | '\u{00B9}' | '\u{00AA}' | '\u{00BA}' | '\u{00BC}'..='\u{00BE}' | '\u{2070}'..='\u{209F}' | '\u{2150}'..='\u{218F}' | '\u{2460}'..='\u{24FF}' | '\u{2776}'..='\u{2793}')
}

/// `s` as a reader sees it, for comparison: Unicode compatibility and canonical equivalence
/// (NFKC: `µ` and `μ`, precomposed and combining accents, full-width digits, ligatures, a
/// no-break space), curly quotes as straight ones, invisible code points dropped, the minus sign
/// as a hyphen. Letters of different scripts stay different (a Cyrillic `а` is not a Latin `a`),
/// and so do superscripts, fractions and circled numbers ([`keeps_its_form`]).
pub fn fold_for_reader(s: &str) -> String {
    if s.is_ascii() {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    for run in reader_runs(s) {
        out.push_str(&fold_run(&s[run]));
    }
    out
}

/// A starter with the combining marks that follow it: the unit canonical equivalence reorders
/// and composes within.
pub fn reader_runs(s: &str) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for (i, c) in s.char_indices() {
        let mark = unicode_normalization::char::is_combining_mark(c);
        match runs.last_mut() {
            Some(r) if mark => r.end = i + c.len_utf8(),
            _ => runs.push(i..i + c.len_utf8()),
        }
    }
    runs
}

/// One run ([`reader_runs`]) folded as [`fold_for_reader`] does.
pub fn fold_run(run: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let first = run.chars().next().unwrap_or(' ');
    if is_invisible(first) {
        return String::new();
    }
    let mapped = match first {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' | '\u{02BC}' | '\u{00B4}' => Some("'"),
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => Some("\""),
        '\u{2212}' | '\u{2010}' | '\u{2011}' => Some("-"),
        _ => None,
    };
    if let Some(m) = mapped {
        return m.to_owned();
    }
    let folded: String = if keeps_its_form(first) { run.nfc().collect() } else { run.nfkc().collect() };
    folded.chars().filter(|&c| !is_invisible(c)).collect()
}

/// Approximate token count used to bound passage size: one per whitespace-separated word, and one
/// per CJK character (scripts written without spaces would otherwise count as a single word).
pub fn token_count(s: &str) -> usize {
    s.split_whitespace().map(|w| w.chars().filter(|&c| is_cjk(c)).count().max(1)).sum()
}

pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF
        | 0x20000..=0x2FA1F)
}

/// The largest char boundary of `s` that is `<= i`.
pub fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The text of a passage as the lexical index sees it: markdown link destinations (`](…)`), bare
/// URLs and unlabelled wiki links (`[[note-name]]`) are blanked, so a list of links does not
/// outrank the prose it points to. Link labels (`[label](…)`, `[[name|label]]`) stay.
pub fn index_text(text: &str) -> String {
    let unwikied;
    let mut rest = text;
    if text.contains("[[") {
        unwikied = blank_wiki_links(text);
        rest = &unwikied;
    }
    let mut out = String::with_capacity(text.len());
    loop {
        let dest = rest.find("](");
        let url = rest.find("://");
        match (dest, url) {
            (Some(d), u) if u.is_none_or(|u| d < u) => {
                out.push_str(&rest[..d + 1]);
                let after = &rest[d + 2..];
                match after.find(')') {
                    Some(close) if !after[..close].contains('\n') => {
                        out.push(' ');
                        rest = &after[close + 1..];
                    }
                    _ => {
                        out.push('(');
                        rest = after;
                    }
                }
            }
            (_, Some(u)) => {
                // Back up over the scheme, forward over the URL.
                let start = rest[..u].rfind(|c: char| !c.is_ascii_alphanumeric() && c != '+').map_or(0, |i| i + 1);
                let end = rest[u..].find(|c: char| c.is_whitespace() || matches!(c, ')' | '>' | '"' | ']')).map_or(rest.len(), |e| u + e);
                out.push_str(&rest[..start]);
                out.push(' ');
                rest = &rest[end..];
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

fn blank_wiki_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("[[") {
        let Some(close) = rest[open + 2..].find("]]") else { break };
        let inner = &rest[open + 2..open + 2 + close];
        out.push_str(&rest[..open]);
        if inner.contains('\n') {
            out.push_str("[[");
            rest = &rest[open + 2..];
            continue;
        }
        match inner.split_once('|') {
            Some((_, label)) => out.push_str(label),
            None => out.push(' '),
        }
        rest = &rest[open + 2 + close + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossy_offsets_map_back_to_raw_bytes() {
        let raw = b"ab\xffcd\xe2\x82xyz";
        let nt = NoteText::decode(raw);
        assert!(nt.is_lossy());
        assert_eq!(nt.text, "ab\u{FFFD}cd\u{FFFD}xyz");
        let x = nt.text.find('x').unwrap();
        assert_eq!(&raw[nt.to_raw(x)..], b"xyz");
        let c = nt.text.find('c').unwrap();
        assert_eq!(&raw[nt.range_to_raw(c..c + 2)], b"cd");
        assert_eq!(nt.to_raw(0), 0);
        assert_eq!(nt.to_raw(nt.text.len()), raw.len());
    }

    #[test]
    fn valid_utf8_is_identity() {
        let nt = NoteText::decode("héllo".as_bytes());
        assert!(!nt.is_lossy());
        assert_eq!(nt.to_raw(3), 3);
    }

    #[test]
    fn index_text_blanks_link_destinations_and_urls() {
        assert_eq!(
            index_text("See [the runbook](../runbooks/rotate.md) and https://example.com/a?b=c now, [[wiki-name]]."),
            "See [the runbook]  and   now,  ."
        );
        assert_eq!(index_text("broken ](unclosed\n) text"), "broken ](unclosed\n) text");
        assert_eq!(index_text("<https://x.y/z>"), "< >");
        assert_eq!(index_text("a [[note|the label]] b [[x"), "a the label b [[x");
    }

    #[test]
    fn token_count_counts_cjk_characters() {
        assert_eq!(token_count("hello  world"), 2);
        assert_eq!(token_count("日本語 text"), 4);
    }
}
