//! An answer as markdown, to insert into a note: each claim with its citation links (see
//! `lode_core::citation`) and the label saying how it was verified.

use crate::Answer;

/// Renders `answer` for insertion into the note at `from` (vault-relative path).
pub fn markdown(answer: &Answer, from: &str) -> String {
    let mut out = format!("> **lode** — {}\n>\n", answer.question.trim());
    if answer.abstained {
        out.push_str(&format!("> {}\n", answer.abstain_reason.as_deref().unwrap_or("your notes don't answer this")));
        for r in &answer.related {
            let link = lode_core::citation::render(from, &r.path, r.line, &r.version_id, r.start..r.end);
            out.push_str(&format!("> - related: {link}\n"));
        }
    }
    for c in &answer.claims {
        let links: Vec<String> = c
            .citations
            .iter()
            .map(|cit| lode_core::citation::render(from, &cit.path, cit.line, &cit.version_id, cit.start..cit.end))
            .collect();
        out.push_str(&format!("> - {} {} *({})*\n", c.text.trim(), links.join(" "), c.label));
    }
    if !answer.withheld.is_empty() {
        out.push_str(&format!(">\n> {} passages were withheld from remote synthesis (no-egress).\n", answer.withheld.len()));
    }
    out
}
