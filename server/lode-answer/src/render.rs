//! An answer as markdown, to insert into a note: each claim with its citation links (see
//! `lode_core::citation`) and the label saying how it was verified. Text that came from a model
//! or a note is rendered as plain text: markup in it cannot change what the reader sees.

use crate::{Answer, Rung};

/// Renders `answer` for insertion into the note at `from` (vault-relative path).
pub fn markdown(answer: &Answer, from: &str) -> String {
    let mut out = format!("{} {}\n>\n", lode_core::gate::markup::LODE_ANSWER_OPENER, plain_text(answer.question.trim()));
    if let Some(n) = &answer.notice {
        out.push_str(&format!("> *{}*\n>\n", plain_text(n)));
    }
    if answer.abstained {
        out.push_str(&format!("> {}\n", plain_text(answer.abstain_reason.as_deref().unwrap_or("your notes don't answer this"))));
        for r in &answer.related {
            let link = lode_core::citation::render(from, &r.path, r.line, &r.short_id, r.start..r.end);
            out.push_str(&format!("> - related: {link}\n"));
        }
    }
    for c in &answer.claims {
        let links: Vec<String> = c
            .citations
            .iter()
            .map(|cit| lode_core::citation::render(from, &cit.path, cit.line, &cit.short_id, cit.start..cit.end))
            .collect();
        let text = plain_text(c.text.trim());
        let shown = match c.rung {
            Rung::Verified => text,
            Rung::EvidenceOnly => format!("“{text}”"),
        };
        // What the reader of the note would see around each quote, once per distinct context.
        let mut contexts: Vec<&str> = Vec::new();
        for cit in &c.citations {
            if !cit.context.is_empty() && !contexts.contains(&cit.context.as_str()) {
                contexts.push(&cit.context);
            }
        }
        let context = if contexts.is_empty() { String::new() } else { format!(" — in {}", plain_text(&contexts.join("; "))) };
        // The label is lode's own text, shown as written; only a reason quoting the note (a
        // heading, a lead-in) is escaped.
        let label = match (c.rung, c.why.as_deref()) {
            (Rung::EvidenceOnly, Some(why)) if c.label != lode_core::gate::EVIDENCE_ONLY_LABEL => {
                format!("{}{}", lode_core::gate::EVIDENCE_ONLY_PREFIX, plain_text(why))
            }
            _ => c.label.clone(),
        };
        out.push_str(&format!("> - {shown} {} *({label})*{context}\n", links.join(" ")));
    }
    if !answer.withheld.is_empty() {
        out.push_str(&format!(">\n> {} passages were withheld from remote synthesis (no-egress).\n", answer.withheld.len()));
    }
    out
}

/// `s` as literal text on one markdown line: line breaks become spaces; bidi, zero-width and
/// other control characters are removed; every ASCII punctuation character markdown or HTML
/// could read (`<!--`, `~~`, `[x](y)`, `*`, `` ` ``, `&`…) is backslash-escaped.
pub fn plain_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\t' | '\u{2028}' | '\u{2029}' | '\u{85}' => out.push(' '),
            '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200B}'..='\u{200F}' | '\u{061C}' | '\u{2060}' | '\u{FEFF}' => {}
            c if c.is_control() => {}
            '\\' | '`' | '*' | '_' | '~' | '[' | ']' | '(' | ')' | '<' | '>' | '#' | '|' | '!' | '{' | '}' | '&' | '$' | '=' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_text_cannot_change_what_the_reader_sees() {
        for (input, want) in [
            ("hidden <!-- comment --> text", "hidden \\<\\!-- comment --\\> text"),
            ("~~struck~~", "\\~\\~struck\\~\\~"),
            ("[click](https://evil.example)", "\\[click\\]\\(https://evil.example\\)"),
            ("abc\u{202E}fed\u{2066}x\u{200B}y", "abcfedxy"),
            ("two\nlines\r\n> quote", "two lines  \\> quote"),
            ("plain words, 60 days.", "plain words, 60 days."),
        ] {
            assert_eq!(plain_text(input), want, "{input:?}");
        }
    }
}
