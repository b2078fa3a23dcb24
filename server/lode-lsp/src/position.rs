//! Conversions between LSP positions (line, character in the negotiated encoding) and byte
//! offsets — the only place positions exist; everything behind it speaks bytes.

use ropey::Rope;
use tower_lsp_server::ls_types::{Position, Range};

/// The position encoding agreed at `initialize`: UTF-8 when the client offers it, else UTF-16.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
}

fn unit_len(c: char, enc: Encoding) -> usize {
    match enc {
        Encoding::Utf8 => c.len_utf8(),
        Encoding::Utf16 => c.len_utf16(),
    }
}

/// Byte offset of `pos`. Positions past the end of a line clamp to the line's end (before its
/// line break), past the last line to the end of the text; a position inside a character (a
/// UTF-16 surrogate half, a byte in a UTF-8 sequence) clamps to that character's start.
pub fn offset(rope: &Rope, pos: Position, enc: Encoding) -> usize {
    let line = pos.line as usize;
    if line >= rope.len_lines() {
        return rope.len_bytes();
    }
    let start = rope.line_to_byte(line);
    let mut units = 0usize;
    let mut bytes = 0usize;
    for c in rope.line(line).chars() {
        if c == '\n' || c == '\r' {
            break;
        }
        let u = unit_len(c, enc);
        if units + u > pos.character as usize {
            break;
        }
        units += u;
        bytes += c.len_utf8();
    }
    start + bytes
}

/// Applies one notification's content changes to a buffer, in order: each range is read in the
/// text the previous change left, as editors send them. A change without a range replaces all.
pub fn apply_changes(rope: &mut Rope, changes: impl IntoIterator<Item = (Option<Range>, String)>, enc: Encoding) {
    for (range, text) in changes {
        match range {
            Some(r) => {
                let b = byte_range(rope, r, enc);
                let (s, e) = (rope.byte_to_char(b.start), rope.byte_to_char(b.end.max(b.start)));
                rope.remove(s..e);
                rope.insert(s, &text);
            }
            None => *rope = Rope::from_str(&text),
        }
    }
}

/// LSP position of byte `offset` (clamped to the text, and back to a char boundary).
pub fn position(rope: &Rope, offset: usize, enc: Encoding) -> Position {
    let mut offset = offset.min(rope.len_bytes());
    while offset > 0 && rope.try_byte_to_char(offset).is_ok_and(|c| rope.char_to_byte(c) != offset) {
        offset -= 1;
    }
    let line = rope.byte_to_line(offset);
    let start = rope.line_to_byte(line);
    let mut units = 0usize;
    let mut at = start;
    for c in rope.line(line).chars() {
        if at >= offset {
            break;
        }
        units += unit_len(c, enc);
        at += c.len_utf8();
    }
    Position { line: line as u32, character: units as u32 }
}

pub fn range(rope: &Rope, r: std::ops::Range<usize>, enc: Encoding) -> Range {
    Range { start: position(rope, r.start, enc), end: position(rope, r.end, enc) }
}

pub fn byte_range(rope: &Rope, r: Range, enc: Encoding) -> std::ops::Range<usize> {
    let (a, b) = (offset(rope, r.start, enc), offset(rope, r.end, enc));
    a.min(b)..a.max(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: u32, character: u32) -> Position {
        Position { line, character }
    }

    #[test]
    fn round_trips_on_non_ascii_text() {
        // CJK (3 bytes, 1 UTF-16 unit), emoji (4 bytes, 2 units), a combining mark (2 bytes,
        // 1 unit), CRLF line endings.
        let text = "a日本\r\n🚀x e\u{301}z\r\nlast";
        let rope = Rope::from_str(text);
        let cases = [
            // (byte, utf16 position, utf8 position)
            (0, p(0, 0), p(0, 0)),
            (1, p(0, 1), p(0, 1)),
            (4, p(0, 2), p(0, 4)),
            (7, p(0, 3), p(0, 7)),
            (9, p(1, 0), p(1, 0)),
            (13, p(1, 2), p(1, 4)),
            (14, p(1, 3), p(1, 5)),
            (15, p(1, 4), p(1, 6)),
            (16, p(1, 5), p(1, 7)),
            (18, p(1, 6), p(1, 9)),
            (19, p(1, 7), p(1, 10)),
            (21, p(2, 0), p(2, 0)),
            (25, p(2, 4), p(2, 4)),
        ];
        for (byte, u16, u8) in cases {
            assert_eq!(&text[..byte].len(), &byte);
            assert_eq!(position(&rope, byte, Encoding::Utf16), u16, "byte {byte} → utf16");
            assert_eq!(position(&rope, byte, Encoding::Utf8), u8, "byte {byte} → utf8");
            assert_eq!(offset(&rope, u16, Encoding::Utf16), byte, "utf16 {u16:?} → byte");
            assert_eq!(offset(&rope, u8, Encoding::Utf8), byte, "utf8 {u8:?} → byte");
        }
    }

    #[test]
    fn out_of_range_positions_clamp() {
        let rope = Rope::from_str("ab\r\n🚀\n");
        assert_eq!(offset(&rope, p(0, 99), Encoding::Utf16), 2, "past the line end: before CRLF");
        assert_eq!(offset(&rope, p(1, 1), Encoding::Utf16), 4, "inside a surrogate pair: its start");
        assert_eq!(offset(&rope, p(1, 2), Encoding::Utf8), 4, "inside a UTF-8 sequence: its start");
        assert_eq!(offset(&rope, p(99, 0), Encoding::Utf16), rope.len_bytes());
        assert_eq!(position(&rope, 999, Encoding::Utf16), p(2, 0));
        assert_eq!(position(&rope, 6, Encoding::Utf8), p(1, 0), "inside a char: back to its start");
    }

    /// An editor's own reading of LSP positions, written independently of ropey: lines end at
    /// `\n`, `\r\n` or `\r` only.
    fn reference_offset(text: &str, pos: Position, enc: Encoding) -> usize {
        let mut line_start = 0;
        let mut line = 0;
        let b = text.as_bytes();
        while line < pos.line {
            let Some(i) = text[line_start..].find(['\n', '\r']) else { return text.len() };
            let i = line_start + i;
            line_start = if b[i] == b'\r' && b.get(i + 1) == Some(&b'\n') { i + 2 } else { i + 1 };
            line += 1;
        }
        let end = text[line_start..].find(['\n', '\r']).map_or(text.len(), |i| line_start + i);
        let mut units = 0;
        for (i, c) in text[line_start..end].char_indices() {
            let u = unit_len(c, enc);
            if units + u > pos.character as usize {
                return line_start + i;
            }
            units += u;
        }
        end
    }

    fn reference_apply(text: &mut String, range: Range, new: &str, enc: Encoding) {
        let s = reference_offset(text, range.start, enc);
        let e = reference_offset(text, range.end, enc).max(s);
        text.replace_range(s..e, new);
    }

    #[test]
    fn line_breaks_are_lsps_not_unicodes() {
        // U+2028, NEL, VT and FF are characters of a line, not breaks; lone CR is a break.
        let text = "a\u{2028}b\u{85}c\u{0B}d\u{0C}e\rf\ng";
        let rope = Rope::from_str(text);
        assert_eq!(rope.len_lines(), 3);
        assert_eq!(position(&rope, text.find('e').unwrap(), Encoding::Utf16), p(0, 8));
        assert_eq!(position(&rope, text.find('f').unwrap(), Encoding::Utf16), p(1, 0));
        assert_eq!(offset(&rope, p(2, 0), Encoding::Utf16), text.find('g').unwrap());
    }

    #[test]
    fn incremental_edits_match_the_editors_result() {
        const PIECES: &[&str] =
            &["a", "bc", " ", "é", "日本", "🚀", "e\u{301}", "\n", "\r\n", "\r", "\u{2028}", "\u{2029}", "\u{85}", "\u{0B}", "\u{0C}"];
        let mut seed = 0x243F6A8885A308D3u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for enc in [Encoding::Utf16, Encoding::Utf8] {
            for _ in 0..300 {
                let mut text: String = (0..next(30)).map(|_| PIECES[next(PIECES.len())]).collect();
                let mut rope = Rope::from_str(&text);
                // Several changes per notification, positions in range and beyond it.
                for _ in 0..5 {
                    let changes: Vec<(Option<Range>, String)> = (0..1 + next(3))
                        .map(|_| {
                            let a = p(next(6) as u32, next(8) as u32);
                            let b = p(next(6) as u32, next(8) as u32);
                            let (s, e) = if (a.line, a.character) <= (b.line, b.character) { (a, b) } else { (b, a) };
                            let new: String = (0..next(4)).map(|_| PIECES[next(PIECES.len())]).collect();
                            (Some(Range { start: s, end: e }), new)
                        })
                        .collect();
                    for (r, new) in &changes {
                        reference_apply(&mut text, r.unwrap(), new, enc);
                    }
                    apply_changes(&mut rope, changes, enc);
                    assert_eq!(rope.to_string(), text, "{enc:?}");
                }
            }
        }
    }
}
