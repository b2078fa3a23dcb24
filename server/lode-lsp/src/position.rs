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
}
