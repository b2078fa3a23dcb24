//! Windows of redacted note bodies: secrets are redacted in a whole body first, then the window
//! the model is sent is cut from the redacted body, so no window can split a secret into halves
//! that no pattern recognises.

use std::ops::Range;

use lode_core::text::floor_char_boundary;

const TOKEN: &str = "[REDACTED:";

/// A body as it may leave the machine: secrets redacted, with the map back to the original.
pub struct Redacted {
    pub text: String,
    pub count: usize,
    /// Replaced ranges: (range in the original, range of its `[REDACTED:kind]` in `text`).
    replaced: Vec<(Range<usize>, Range<usize>)>,
}

impl Redacted {
    /// Redacts `body` with [`crate::egress::redact`] and records where each replacement went.
    pub fn new(body: &str) -> Redacted {
        let (text, count) = crate::egress::redact(body);
        let replaced = if count == 0 { Vec::new() } else { align(body, &text) };
        Redacted { text, count, replaced }
    }

    /// The identity: nothing redacted (an endpoint on this machine).
    pub fn unchanged(body: &str) -> Redacted {
        Redacted { text: body.to_owned(), count: 0, replaced: Vec::new() }
    }

    /// The redacted text of the original range `r`. A boundary inside a secret widens to the
    /// whole replacement, so a window never shows part of a secret's original bytes.
    pub fn window(&self, r: Range<usize>) -> &str {
        let (s, e) = (self.map(r.start, false), self.map(r.end, true));
        let s = floor_char_boundary(&self.text, s);
        let e = floor_char_boundary(&self.text, e.max(s));
        &self.text[s..e]
    }

    fn map(&self, at: usize, end: bool) -> usize {
        let mut shift: isize = 0;
        for (orig, red) in &self.replaced {
            if at <= orig.start {
                break;
            }
            if at < orig.end {
                return if end { red.end } else { red.start };
            }
            shift += red.len() as isize - orig.len() as isize;
        }
        (at as isize + shift).max(0) as usize
    }
}

/// Recovers the replacements that turned `orig` into `red`, where `red` is `orig` with some
/// disjoint ranges replaced by `[REDACTED:kind]` tokens and nothing else changed.
fn align(orig: &str, red: &str) -> Vec<(Range<usize>, Range<usize>)> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0usize, 0usize);
    while j < red.len() {
        let Some(k) = red[j..].find(TOKEN) else { break };
        // Identical up to the token. (A token already in the original aligns with itself.)
        i += k;
        j += k;
        let tok_end = red[j..].find(']').map_or(red.len(), |x| j + x + 1);
        let next = red[tok_end..].find(TOKEN).map_or(red.len(), |x| tok_end + x);
        let lit = &red[tok_end..next];
        let probe = &lit[..floor_char_boundary(lit, 64)];
        let found = if probe.is_empty() {
            if next == red.len() {
                orig.len()
            } else {
                i
            }
        } else {
            orig.get(i + 1..).and_then(|o| o.find(probe)).map_or(orig.len(), |x| i + 1 + x)
        };
        out.push((i..found, j..tok_end));
        i = found;
        j = tok_end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_never_splits_a_secret() {
        let key =
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----";
        let body = format!("# Deploy\n\nThe deploy key:\n{key}\nRotate it yearly. password: hunter2hunter2 ok\n");
        let r = Redacted::new(&body);
        assert_eq!(r.count, 2, "{}", r.text);
        // A window that starts before the key and ends in the middle of it.
        let mid = body.find("AAAABG5v").unwrap();
        let w = r.window(0..mid);
        assert!(!w.contains("b3BlbnNzaC1") && !w.contains("BEGIN OPENSSH"), "{w}");
        assert!(w.ends_with("[REDACTED:private-key]"), "{w}");
        // A window starting inside the key.
        let w = r.window(mid..body.len());
        assert!(w.starts_with("[REDACTED:private-key]") && w.contains("Rotate it yearly") && !w.contains("hunter2"), "{w}");
        // Text outside secrets maps exactly.
        let at = body.find("Rotate").unwrap();
        assert_eq!(r.window(at..at + 6), "Rotate");
        assert_eq!(Redacted::unchanged("abc").window(1..2), "b");
    }
}
