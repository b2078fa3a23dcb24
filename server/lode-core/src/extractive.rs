//! The extractive synthesizer: answers with verbatim sentences from the best passages, each claim
//! quoting itself. Offline, no model; what it says is exactly what the notes say.

use std::collections::HashMap;
use std::ops::Range;

use crate::gate::{Claim, Support};
use crate::query;

/// A passage offered to the synthesizer, in rank order.
#[derive(Debug, Clone)]
pub struct Source<'a> {
    pub version_id: &'a str,
    pub text: &'a str,
    /// Note title and heading path: terms found only here count half.
    pub heading: &'a str,
    /// Prose (paragraphs, quotes) wraps lines softly; other kinds break sentences at newlines.
    pub prose: bool,
}

#[derive(Debug, Clone)]
pub struct ExtractConfig {
    /// At most this many claims.
    pub max_claims: usize,
    /// Only the first this many sources are read.
    pub max_sources: usize,
    /// A sentence must match at least this share of the question's term weight.
    pub min_coverage: f64,
    /// Further claims must score at least this share of the best one.
    pub keep_ratio: f64,
    /// Bonus of the best-ranked source's sentences (divided by 1 + rank for the others).
    pub rank_weight: f64,
    /// When no sentence reaches `min_coverage`, the best sentence of the best-ranked source that
    /// reaches this share still answers (alone); equal to `min_coverage` turns that off.
    pub fallback_coverage: f64,
}

impl Default for ExtractConfig {
    fn default() -> Self {
        ExtractConfig { max_claims: 3, max_sources: 6, min_coverage: 0.4, keep_ratio: 0.8, rank_weight: 0.05, fallback_coverage: 0.25 }
    }
}

/// Sentence ranges of a passage text.
pub fn sentences(text: &str, prose: bool) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    for unit in crate::chunk::sentence_units(text, 0..text.len()) {
        if prose {
            out.push(unit);
            continue;
        }
        let mut start = unit.start;
        for (i, _) in text[unit.clone()].match_indices('\n') {
            out.push(start..unit.start + i);
            start = unit.start + i + 1;
        }
        out.push(start..unit.end);
    }
    out.into_iter()
        .map(|r| {
            let s = &text[r.clone()];
            let lead = s.len() - s.trim_start().len();
            let trail = s.len() - s.trim_end().len();
            r.start + lead..r.end - trail
        })
        .filter(|r| r.start < r.end)
        .collect()
}

/// A sentence as a reader would state it: list markers, heading marks, emphasis, code ticks and
/// link destinations removed. Only removes text, so the claim's tokens stay inside the quote's.
pub fn plain(sentence: &str) -> String {
    let mut s = sentence.trim();
    loop {
        let before = s;
        s = s.trim_start_matches('#').trim_start();
        s = s.trim_start_matches('>').trim_start();
        for marker in ["- [ ] ", "- [x] ", "- [X] ", "* [ ] ", "* [x] ", "- ", "* ", "+ "] {
            s = s.strip_prefix(marker).unwrap_or(s);
        }
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && (s[digits..].starts_with(". ") || s[digits..].starts_with(") ")) {
            s = &s[digits + 2..];
        }
        if s == before {
            break;
        }
    }
    let no_links = crate::text::index_text(&wiki_as_text(s));
    // Emphasis and code marks go; a `*` inside a word ("HLA-B*27") is part of it and stays.
    let chars: Vec<char> = no_links.chars().collect();
    let cleaned: String = chars
        .iter()
        .enumerate()
        .filter(|&(i, &c)| match c {
            '*' => i > 0 && chars[i - 1].is_alphanumeric() && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric()),
            '`' | '[' | ']' => false,
            _ => true,
        })
        .map(|(_, &c)| c)
        .collect();
    crate::text::normalize_whitespace(&cleaned).trim_matches('|').trim().to_owned()
}

/// `[[target|label]]` → label, `[[target]]` → target: how a reader sees a wiki link.
fn wiki_as_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find("[[") {
        let Some(close) = rest[open + 2..].find("]]") else { break };
        let inner = &rest[open + 2..open + 2 + close];
        out.push_str(&rest[..open]);
        out.push_str(inner.rsplit('|').next().unwrap_or(inner));
        rest = &rest[open + 2 + close + 2..];
    }
    out.push_str(rest);
    out
}

/// What kind of answer a question asks for, from its wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerType {
    /// "how often", "how frequently": every N days, weekly, twice a year…
    Frequency,
    /// "when", "what date", "which day": a date or a time.
    Time,
    /// "how many", "how much", "how long", "what size": a number.
    Quantity,
    Other,
}

pub fn answer_type(question: &str) -> AnswerType {
    let q = question.to_lowercase();
    let words: Vec<&str> = q.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let has = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1] == b);
    if has("how", "often") || has("how", "frequently") {
        AnswerType::Frequency
    } else if ["how", "what"].iter().any(|h| ["many", "much", "long", "big", "large", "size", "percentage", "number"].iter().any(|w| has(h, w))) {
        AnswerType::Quantity
    } else if words.first() == Some(&"when") || has("what", "date") || has("what", "time") || has("which", "day") || words.contains(&"when") {
        AnswerType::Time
    } else {
        AnswerType::Other
    }
}

const MONTHS: &[&str] = &[
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "monday",
    "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "yesterday", "today", "tomorrow",
];
const FREQUENCY: &[&str] = &[
    "every", "daily", "weekly", "monthly", "yearly", "annually", "hourly", "nightly", "quarterly", "per", "once",
    "twice", "times", "always", "never",
];

/// Whether a sentence holds the kind of answer the question asks for.
pub fn fits_type(t: AnswerType, sentence: &str) -> bool {
    let words = crate::gate::tokens(sentence);
    let number = words.iter().any(|w| w.bytes().any(|b| b.is_ascii_digit()));
    match t {
        AnswerType::Frequency => words.iter().any(|w| FREQUENCY.contains(&w.as_str())),
        AnswerType::Quantity => number,
        AnswerType::Time => {
            words.iter().any(|w| MONTHS.contains(&w.as_str()))
                || words.iter().any(|w| w.len() == 4 && (w.starts_with("19") || w.starts_with("20")) && w.bytes().all(|b| b.is_ascii_digit()))
                || sentence.contains(':') && number
        }
        AnswerType::Other => false,
    }
}

/// Picks the sentences that best answer `question` and returns them as self-quoting claims.
/// `weights` gives each question term's weight (e.g. its inverse document frequency); terms
/// without one weigh 1.
pub fn extract(question: &str, sources: &[Source<'_>], weights: &HashMap<String, f64>, cfg: &ExtractConfig) -> Vec<Claim> {
    let terms = query::terms(question);
    if terms.is_empty() {
        return Vec::new();
    }
    let weight = |t: &str| weights.get(t).copied().unwrap_or(1.0).max(0.0);
    let total: f64 = terms.iter().map(|t| weight(t)).sum();
    if total <= 0.0 {
        return Vec::new();
    }

    struct Candidate<'a> {
        score: f64,
        version_id: &'a str,
        quote: &'a str,
        claim: String,
    }
    let wanted = answer_type(question);
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut fallback: Option<(usize, Candidate)> = None;
    for (rank, src) in sources.iter().take(cfg.max_sources).enumerate() {
        let heading_words = crate::gate::tokens(src.heading);
        for r in sentences(src.text, src.prose) {
            let quote = &src.text[r];
            if quote.trim_end().ends_with('?') {
                continue; // a question states nothing
            }
            let claim = plain(quote);
            let words = crate::gate::tokens(&claim);
            if words.len() < 3 {
                continue; // a heading or a fragment states nothing
            }
            let mut own = 0.0;
            let mut context = 0.0;
            for t in &terms {
                if words.iter().any(|w| query::stem_match(w, t)) {
                    own += weight(t);
                } else if heading_words.iter().any(|w| query::stem_match(w, t)) {
                    context += weight(t) / 2.0;
                }
            }
            let coverage = (own + context) / total;
            if own == 0.0 {
                continue;
            }
            if coverage < cfg.min_coverage {
                // The fallback must hold the question's weightiest term: "How many days does the
                // quokka policy allow?" is not answered by a sentence about what an SLO allows.
                let key = terms.iter().max_by(|a, b| weight(a).total_cmp(&weight(b)));
                let holds_key = key.is_some_and(|k| words.iter().any(|w| query::stem_match(w, k)));
                if holds_key && coverage >= cfg.fallback_coverage && fallback.as_ref().is_none_or(|(r, c)| (*r, -c.score) > (rank, -coverage)) {
                    fallback = Some((rank, Candidate { score: coverage, version_id: src.version_id, quote, claim }));
                }
                continue;
            }
            // A statement beats a label ("Rotate staging certificates"): up to 12 words earn a
            // small bonus; earlier sources break ties.
            // A sentence of the kind the question asks for ("how often" → "every 60 days").
            let typed = if wanted != AnswerType::Other && fits_type(wanted, quote) { 0.15 } else { 0.0 };
            let score = coverage + typed + (words.len().min(12) as f64) / 120.0 + cfg.rank_weight / (rank + 1) as f64;
            candidates.push(Candidate { score, version_id: src.version_id, quote, claim });
        }
    }
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
    if candidates.is_empty() {
        if let Some((_, c)) = fallback {
            candidates.push(c);
        }
    }
    let Some(best) = candidates.first().map(|c| c.score) else { return Vec::new() };
    let mut out: Vec<Claim> = Vec::new();
    for c in candidates {
        if out.len() >= cfg.max_claims || c.score < best * cfg.keep_ratio {
            break;
        }
        if out.iter().any(|o| o.text == c.claim) {
            continue;
        }
        out.push(Claim {
            text: c.claim,
            support: vec![Support { version_id: c.version_id.to_owned(), quoted_span: c.quote.to_owned() }],
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_answering_sentence_and_quotes_it() {
        let a = "Let's Encrypt certificates are valid for 90 days, but staging certificates are rotated every 60 days so that we always have a 30-day safety margin. The certificates use the DNS-01 challenge.";
        let b = "9. Post \"staging certs rotated\" in `#kestrel-staging` to close the announcement.";
        let sources = [
            Source { version_id: "v2", text: b, heading: "Runbook › Steps", prose: false },
            Source { version_id: "v1", text: a, heading: "Runbook", prose: true },
        ];
        let claims = extract("How often are staging certificates rotated?", &sources, &HashMap::new(), &ExtractConfig::default());
        assert!(claims[0].text.contains("every 60 days"), "{claims:?}");
        assert_eq!(claims[0].support[0].version_id, "v1");
        assert!(a.contains(&claims[0].support[0].quoted_span));
        for c in &claims {
            let body = [a, b].into_iter().find(|s| s.contains(&c.support[0].quoted_span)).unwrap();
            assert!(crate::gate::couples_in(&c.text, body, &c.support[0].quoted_span), "claims couple with their own quote: {c:?}");
        }
    }

    #[test]
    fn answer_types() {
        assert_eq!(answer_type("How often are certs rotated?"), AnswerType::Frequency);
        assert_eq!(answer_type("When is the next rotation due?"), AnswerType::Time);
        assert_eq!(answer_type("How many connections does the pool allow?"), AnswerType::Quantity);
        assert_eq!(answer_type("Which policy was chosen?"), AnswerType::Other);
        assert!(fits_type(AnswerType::Frequency, "rotated every 60 days"));
        assert!(fits_type(AnswerType::Time, "due on 2026-04-20"));
        assert!(fits_type(AnswerType::Time, "starts at 14:02 UTC"));
        assert!(!fits_type(AnswerType::Time, "under supervision"));
    }

    #[test]
    fn nothing_relevant_means_no_claims() {
        let sources = [Source { version_id: "v", text: "Unrelated words about gardening and tomatoes.", heading: "", prose: true }];
        assert!(extract("redis eviction policy", &sources, &HashMap::new(), &ExtractConfig::default()).is_empty());
    }

    #[test]
    fn plain_strips_markup_only() {
        assert_eq!(plain("HLA-B*27 and **bold** and *em*"), "HLA-B*27 and bold and em");
        assert_eq!(plain("1. Trigger the renewal: `cmctl renew x`"), "Trigger the renewal: cmctl renew x");
        assert_eq!(plain("- [x] Read [the runbook](../r.md) **now**"), "Read the runbook now");
        assert_eq!(plain("> **Warning:** do not"), "Warning: do not");
        assert_eq!(plain("| `GET /a` | 45 ms |"), "GET /a | 45 ms");
        assert_eq!(plain("we chose in [[adr-008]] and [[x|the ADR]]."), "we chose in adr-008 and the ADR.");
    }

    #[test]
    fn list_passages_split_at_lines() {
        let text = "2. Confirm the credentials.\n   - The secret is `x`.\n   - It belongs to user y.";
        let s: Vec<&str> = sentences(text, false).into_iter().map(|r| &text[r]).collect();
        assert_eq!(s, ["2. Confirm the credentials.", "- The secret is `x`.", "- It belongs to user y."]);
    }
}

/// The extractive claims restated with the context their note gives them, where the note's
/// structure would otherwise keep them from being verified: a line under "Myths" becomes
/// "Myths: …", an item under "If the cache is cold:" carries the condition, a table row answers
/// with its row key, the column header and the cell the question asks about. A claim is only
/// replaced when the gate verifies the restated one; everything else is left for the gate to
/// show as evidence with its context (an open task, a disputed quote, a narrowing footnote).
pub fn with_context<'b>(
    question: &str,
    claims: Vec<Claim>,
    body_of: impl Fn(&str) -> Option<&'b str>,
    cfg: &crate::gate::GateConfig,
) -> Vec<Claim> {
    use crate::gate::{self, context, Eligible, Outcome, ScorerSlot};
    use crate::structure::Structure;
    let q_terms: Vec<String> = query::terms(question);
    claims
        .into_iter()
        .map(|claim| {
            let [support] = claim.support.as_slice() else { return claim };
            let Some(body) = body_of(&support.version_id) else { return claim };
            let Some((range, _)) = gate::locate(body, &support.quoted_span) else { return claim };
            let st = Structure::parse(body);
            let ctx = st.context(range.clone());
            let cite = |r: &Range<usize>| Support { version_id: support.version_id.clone(), quoted_span: body[r.clone()].to_owned() };
            let candidate = if let Some(t) = ctx.table.as_ref().filter(|t| !t.in_header && t.row.len() >= 2 && !t.header.is_empty()) {
                // The cell the question asks about: most question terms in its header or text;
                // ties go to the rightmost (values usually follow their key).
                let score = |c: usize| {
                    let h = t.header.get(c).map_or(String::new(), |u| u.text.to_lowercase());
                    let v = t.row[c].text.to_lowercase();
                    q_terms.iter().filter(|w| h.contains(w.as_str()) || v.contains(w.as_str())).count()
                };
                let Some(col) = (1..t.row.len()).filter(|&c| !t.row[c].text.is_empty()).max_by_key(|&c| (score(c), c)) else { return claim };
                let (key, header, cell) = (&t.row[0], t.header.get(col), &t.row[col]);
                let Some(header) = header.filter(|h| !h.text.is_empty()) else { return claim };
                Claim {
                    text: format!("{}: {}: {}", plain(&key.text), plain(&header.text), plain(&cell.text)),
                    support: vec![cite(&key.range), cite(&header.range), cite(&cell.range)],
                }
            } else {
                let blocked = context::blockers(&st, &ctx, &range, &claim.text, &cfg.words);
                if blocked.is_empty() || blocked.iter().any(|b| b.carrier.is_none()) {
                    return claim;
                }
                let mut carriers: Vec<Range<usize>> = blocked.iter().filter_map(|b| b.carrier.clone()).collect();
                carriers.sort_by_key(|r| r.start);
                carriers.dedup();
                let mut text = carriers.iter().map(|r| plain(&body[r.clone()]).trim_end_matches(':').to_owned()).collect::<Vec<_>>().join(": ");
                text.push_str(": ");
                text.push_str(&claim.text);
                let mut support: Vec<Support> = carriers.iter().map(cite).collect();
                support.push(support_of(&claim));
                Claim { text, support }
            };
            let eligible: Eligible = std::collections::HashMap::from([(support.version_id.clone(), body)]);
            match gate::check_one(candidate.clone(), &eligible, &mut ScorerSlot::None, cfg) {
                Outcome::Verified(_) => candidate,
                _ => claim,
            }
        })
        .collect()
}

fn support_of(claim: &Claim) -> Support {
    claim.support[0].clone()
}
