//! GitHub-style heading slugs (as github-slugger makes them), and their de-duplication within a
//! note (`foo`, `foo-1`, `foo-2`).

use std::collections::HashMap;

/// The GitHub slug of a heading's plain text: Unicode-lowercased, every character that is not a
/// letter, digit, combining mark, connector punctuation (`_`), `-` or space dropped, then each
/// space turned into `-`. Spaces are not collapsed: `"a & b"` gives `"a--b"`.
pub fn slug(heading: &str) -> String {
    let mut out = String::with_capacity(heading.len());
    for c in heading.trim().chars().flat_map(char::to_lowercase) {
        if c == ' ' {
            out.push('-');
        } else if c.is_alphanumeric() || c == '-' || is_mark(c) || is_connector(c) {
            out.push(c);
        }
    }
    out
}

/// Connector punctuation (Unicode `Pc`).
fn is_connector(c: char) -> bool {
    matches!(c, '_' | '\u{203F}' | '\u{2040}' | '\u{2054}' | '\u{FE33}' | '\u{FE34}' | '\u{FE4D}'..='\u{FE4F}' | '\u{FF3F}')
}

/// Combining marks that are not already alphabetic: the combining blocks, and the variation
/// selectors. An approximation of Unicode `M` without tables; letters' own marks in Indic
/// scripts are `Alphabetic` and kept by `is_alphanumeric`.
fn is_mark(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036F}'
        | '\u{0483}'..='\u{0489}'
        | '\u{0591}'..='\u{05BD}'
        | '\u{1AB0}'..='\u{1AFF}'
        | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}'
        | '\u{3099}'..='\u{309A}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{FE20}'..='\u{FE2F}')
}

/// Makes slugs unique within one note, in document order, the way GitHub does: the second
/// `foo` becomes `foo-1`, the third `foo-2`, and a generated slug that collides with a later
/// heading's own slug is skipped over.
#[derive(Debug, Clone, Default)]
pub struct Slugger {
    occurrences: HashMap<String, usize>,
}

impl Slugger {
    pub fn new() -> Slugger {
        Slugger::default()
    }

    /// The unique slug for the next heading with this plain text.
    pub fn slug(&mut self, heading: &str) -> String {
        let base = slug(heading);
        let mut result = base.clone();
        while self.occurrences.contains_key(&result) {
            let n = self.occurrences.entry(base.clone()).or_insert(0);
            *n += 1;
            result = format!("{base}-{n}");
        }
        self.occurrences.insert(result.clone(), 0);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_slugs() {
        let cases = [
            ("Straße & Co. (2024)", "straße--co-2024"),
            ("Hello, World!", "hello-world"),
            ("  Trim me  ", "trim-me"),
            ("snake_case and kebab-case", "snake_case-and-kebab-case"),
            ("Ünïcödé Çase", "ünïcödé-çase"),
            ("日本語の見出し", "日本語の見出し"),
            ("Emoji 🎉 party", "emoji--party"),
            ("ΑΒΓ", "αβγ"),
            ("C++ / C#", "c--c"),
            ("", ""),
        ];
        for (h, want) in cases {
            assert_eq!(slug(h), want, "{h:?}");
        }
    }

    #[test]
    fn duplicates_are_numbered_like_github() {
        let mut s = Slugger::new();
        let got: Vec<String> = ["Foo", "Foo", "foo-1", "Foo", ""].iter().map(|h| s.slug(h)).collect();
        assert_eq!(got, ["foo", "foo-1", "foo-1-1", "foo-2", ""]);
    }
}
