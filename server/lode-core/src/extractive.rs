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
    /// A heading passage: it names a section and answers nothing.
    pub is_heading: bool,
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
    let no_links = crate::text::index_text(&reference_links_as_text(&wiki_as_text(s)));
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

/// `[label][ref]` → `[label]`: a reference link reads as its label (`index_text` reads the rest).
fn reference_links_as_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("][") {
        let Some(close) = rest[at + 2..].find(']') else { break };
        out.push_str(&rest[..at + 1]);
        rest = &rest[at + 2 + close + 1..];
    }
    out.push_str(rest);
    out
}

/// The markdown shape of a sentence that cannot answer a question whatever words it shares with
/// it: a heading, a link reference definition, a line made only of links (a label names a page;
/// it states nothing), or an open task (work to do, not a fact) unless the question asks what is
/// left to do. `None` when the shape allows an answer.
pub fn label_shape(raw: &str, question_asks_tasks: bool) -> Option<&'static str> {
    let s = raw.trim();
    if s.starts_with('#') {
        return Some("a heading");
    }
    // `[ref]: destination`
    if s.starts_with('[') && !s.starts_with("[[") && s.find("]:").is_some_and(|i| !s[..i].contains(']')) {
        return Some("a link reference definition");
    }
    let mut body = s;
    loop {
        let before = body;
        body = body.trim_start_matches('>').trim_start();
        for marker in ["- ", "* ", "+ "] {
            body = body.strip_prefix(marker).unwrap_or(body);
        }
        let digits = body.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && (body[digits..].starts_with(". ") || body[digits..].starts_with(") ")) {
            body = &body[digits + 2..];
        }
        if body == before {
            break;
        }
    }
    if let Some(rest) = body.strip_prefix("[ ]") {
        if !question_asks_tasks {
            return Some("an open task");
        }
        body = rest;
    } else if let Some(rest) = body.strip_prefix("[x]").or_else(|| body.strip_prefix("[X]")) {
        body = rest;
    }
    links_only(body).then_some("a link label")
}

/// Whether `s` holds nothing but links (inline, reference, wiki, embeds, autolinks), emphasis
/// around them and separators.
fn links_only(s: &str) -> bool {
    let mut rest = s.trim();
    let mut links = 0;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || "*_~,;:|·•—–-/&.?()".contains(c));
        if rest.is_empty() {
            return links > 0;
        }
        if let Some(r) = rest.strip_prefix('!').filter(|r| !r.starts_with('[')) {
            rest = r;
            continue;
        }
        let after = if let Some(r) = rest.strip_prefix("![[").or_else(|| rest.strip_prefix("[[")) {
            r.find("]]").map(|i| &r[i + 2..])
        } else if let Some(r) = rest.strip_prefix("![").or_else(|| rest.strip_prefix('[')) {
            bracket_end(r).map(|i| {
                let r = &r[i + 1..];
                if let Some(d) = r.strip_prefix('(') {
                    d.find(')').map_or("", |j| &d[j + 1..])
                } else if let Some(d) = r.strip_prefix('[') {
                    d.find(']').map_or("", |j| &d[j + 1..])
                } else {
                    r
                }
            })
        } else if let Some(r) = rest.strip_prefix('<').filter(|r| r.starts_with("http://") || r.starts_with("https://")) {
            r.find('>').map(|i| &r[i + 1..])
        } else {
            None
        };
        match after {
            Some(a) => {
                links += 1;
                rest = a;
            }
            None => return false,
        }
    }
}

/// Index of the `]` closing a `[` already consumed, with nested brackets counted.
fn bracket_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' if depth == 0 => return Some(i),
            ']' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The thing a "which …"/"what …" question asks for: the word after it ("Which airline is the
/// flight booked with?" → "airline").
fn wh_target(question: &str) -> Option<String> {
    let words = crate::gate::tokens(question);
    let at = words.iter().position(|w| w == "which" || w == "what")?;
    words.get(at + 1).filter(|w| !query::is_stopword(w)).cloned()
}

/// Words that ask for open tasks rather than name what they are about.
const TASK_WORDS: &[&str] = &[
    "todo",
    "todos",
    "task",
    "tasks",
    "pending",
    "outstanding",
    "remaining",
    "unfinished",
    "undone",
    "left",
    "still",
    "need",
    "open",
    "items",
    "next",
    "steps",
    "step",
];

/// Whether a sentence is an open task item (`- [ ] …`, `1. [ ] …`).
fn is_open_task(raw: &str) -> bool {
    label_shape(raw, false) == Some("an open task")
}

/// The header row of the table holding the row that starts at `start`, if it is one.
fn table_header_before(text: &str, start: usize) -> Option<&str> {
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    if !text[line_start..].trim_start().starts_with('|') {
        return None;
    }
    let mut lines: Vec<&str> = text[..line_start].lines().collect();
    while let Some(l) = lines.pop() {
        let t = l.trim();
        if !t.starts_with('|') {
            return None;
        }
        if t.contains('-') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t')) {
            return lines.pop().filter(|h| h.trim().starts_with('|'));
        }
    }
    None
}

/// Whether the line ending at `end` is a table's header row: the next line is its delimiter
/// row (`|---|:--:|`).
fn is_table_header(text: &str, end: usize) -> bool {
    let next = text[end..].trim_start_matches(['\r', '\n']);
    let next = next.lines().next().unwrap_or("").trim();
    next.contains('-') && next.contains('|') && next.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

/// Whether a question asks what is left to do, so open tasks answer it.
pub fn asks_for_tasks(question: &str) -> bool {
    let q = question.to_lowercase();
    let words: Vec<&str> = q.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let has = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1] == b);
    words
        .iter()
        .any(|w| matches!(*w, "todo" | "todos" | "task" | "tasks" | "pending" | "outstanding" | "remaining" | "unfinished" | "undone"))
        || q.contains("to-do")
        || has("still", "need")
        || has("still", "have")
        || has("left", "to")
        || has("next", "steps")
        || has("next", "step")
        || has("open", "items")
        || has("need", "to")
        || has("have", "to")
}

/// Content words of a sentence the question does not already hold: a sentence without any
/// restates the question ("Staging certificates are rotated." for "How often are staging
/// certificates rotated?") and answers nothing.
fn new_words(words: &[String], question_words: &[String]) -> usize {
    words
        .iter()
        .filter(|w| !query::is_stopword(w) && !question_words.iter().any(|q| query::stem_match(w, q) || query::stem_match(q, w)))
        .count()
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
    /// "why": a reason ("because …", "due to …").
    Reason,
    Other,
}

/// Whether a question asks yes or no ("Did the failover complete?"): then a sentence that
/// restates it, negated or not, is its answer.
pub fn is_yes_no(question: &str) -> bool {
    const AUX: &[&str] = &[
        "do", "does", "did", "is", "are", "was", "were", "am", "can", "could", "will", "would", "should", "shall", "has", "have", "had",
        "may", "might", "must", "isn", "aren", "wasn", "weren", "don", "doesn", "didn", "won", "can't",
    ];
    let q = question.trim().to_lowercase();
    q.split(|c: char| !c.is_alphanumeric()).find(|w| !w.is_empty()).is_some_and(|w| AUX.contains(&w))
}

/// Whether the text asks something (a question mark, or a question word first) rather than
/// states something to look up.
pub fn is_question(text: &str) -> bool {
    const WH: &[&str] = &["what", "which", "who", "whom", "whose", "when", "where", "why", "how"];
    let t = text.trim().to_lowercase();
    t.ends_with('?') || t.split(|c: char| !c.is_alphanumeric()).find(|w| !w.is_empty()).is_some_and(|w| WH.contains(&w)) || is_yes_no(text)
}

pub fn answer_type(question: &str) -> AnswerType {
    let q = question.to_lowercase();
    let words: Vec<&str> = q.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let has = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1] == b);
    if is_yes_no(question) {
        // "Does cotton keep you warm when wet?" asks yes or no, not for a time.
        AnswerType::Other
    } else if has("how", "often") || has("how", "frequently") {
        AnswerType::Frequency
    } else if ["how", "what"]
        .iter()
        .any(|h| ["many", "much", "long", "big", "large", "size", "percentage", "number"].iter().any(|w| has(h, w)))
    {
        AnswerType::Quantity
    } else if words.first() == Some(&"when") || has("what", "date") || has("what", "time") || has("which", "day") || words.contains(&"when")
    {
        AnswerType::Time
    } else if words.first() == Some(&"why") || has("what", "reason") || has("what", "reasons") {
        AnswerType::Reason
    } else {
        AnswerType::Other
    }
}

const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "yesterday",
    "today",
    "tomorrow",
];
const FREQUENCY: &[&str] = &[
    "every",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "annually",
    "hourly",
    "nightly",
    "quarterly",
    "per",
    "once",
    "twice",
    "times",
    "always",
    "never",
    "each",
    "biweekly",
    "fortnightly",
    "semiannually",
    "interval",
    "intervals",
    "cycle",
    "cadence",
];
/// Units of time: with a number they say how often ("after 60 days") or when ("in 2 weeks").
const TIME_UNITS: &[&str] = &[
    "second", "seconds", "minute", "minutes", "hour", "hours", "day", "days", "week", "weeks", "month", "months", "year", "years", "s",
    "min", "mins", "h", "hr", "hrs", "d", "wk", "wks",
];
/// Words that place an event in time without a date ("after the last frost", "two weeks ago").
const WHEN: &[&str] = &[
    "after",
    "before",
    "until",
    "since",
    "during",
    "ago",
    "tonight",
    "noon",
    "midnight",
    "morning",
    "evening",
    "night",
    "weekend",
    "weekends",
    "spring",
    "summer",
    "autumn",
    "fall",
    "winter",
    "quarter",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "annually",
    "every",
    "next",
    "end",
    "start",
    "beginning",
    "deadline",
    "due",
    "dawn",
    "dusk",
    "sunrise",
    "sunset",
    "midday",
    "afternoon",
    "today",
    "tomorrow",
    "yesterday",
    "early",
    "late",
    "soon",
    "later",
    "now",
    "then",
    "hourly",
    "nightly",
    "clock",
    "am",
    "pm",
    "eve",
    "holidays",
    "christmas",
    "easter",
    "once",
    "when",
    "whenever",
];
const NUMBER_WORDS: &[&str] = &[
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "fifteen", "twenty", "thirty",
    "forty", "fifty", "sixty", "hundred", "thousand", "million", "billion", "dozen", "half", "single", "double", "twice", "none", "zero",
];

/// Whether a sentence holds the kind of answer the question asks for. A sentence of another
/// kind is not an answer to a typed question, however many of its words it shares: "Rotation is
/// handled by the cert-rotator job." does not say how often.
pub fn fits_type(t: AnswerType, sentence: &str) -> bool {
    let words = crate::gate::tokens(sentence);
    // A number starts its word ("40", "$40", "2026-04-01", "3rd"); "v2.3" and "Q3" are names.
    let number = sentence
        .split_whitespace()
        .map(|w| w.trim_start_matches(|c: char| !c.is_alphanumeric()))
        .any(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        || words.iter().any(|w| NUMBER_WORDS.contains(&w.as_str()));
    let unit = words.iter().any(|w| TIME_UNITS.contains(&w.as_str()));
    match t {
        AnswerType::Frequency => words.iter().any(|w| FREQUENCY.contains(&w.as_str())) || number && unit,
        AnswerType::Quantity => number,
        AnswerType::Time => {
            words.iter().any(|w| MONTHS.contains(&w.as_str()) || WHEN.contains(&w.as_str()))
                || words.iter().any(|w| w.len() == 4 && (w.starts_with("19") || w.starts_with("20")) && w.bytes().all(|b| b.is_ascii_digit()))
                || number && (unit || sentence.contains(':'))
                // An ordinal day ("by the 3rd working day").
                || words.iter().any(|w| ["st", "nd", "rd", "th"].iter().any(|x| w.strip_suffix(x).is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))))
        }
        AnswerType::Reason => {
            words.iter().any(|w| REASON.contains(&w.as_str())) || sentence.contains("in order to") || sentence.contains("so that")
        }
        AnswerType::Other => false,
    }
}

/// Words that give a reason.
const REASON: &[&str] = &[
    "because",
    "since",
    "due",
    "reason",
    "reasons",
    "therefore",
    "hence",
    "thanks",
    "given",
    "instead",
    "avoid",
    "avoids",
    "avoiding",
    "allows",
    "enables",
    "lets",
    "needed",
    "required",
    "requires",
    "cheaper",
    "faster",
    "simpler",
    "safer",
    "better",
    "easier",
    "fewer",
    "less",
    "drop",
    "removes",
    "why",
    "motivation",
    "rationale",
    "so",
];

/// Picks the sentences that best answer `question` and returns them as self-quoting claims.
/// `weights` gives each question term's weight (e.g. its inverse document frequency); terms
/// without one weigh 1.
pub fn extract(question: &str, sources: &[Source<'_>], weights: &HashMap<String, f64>, cfg: &ExtractConfig) -> Vec<Claim> {
    let tasks_wanted = asks_for_tasks(question);
    let mut terms = query::terms(question);
    if tasks_wanted {
        // "What is left to do for the move?": the open tasks under "Move" answer it; "left"
        // names what is asked for, like "how often".
        terms.retain(|t| !TASK_WORDS.contains(&t.as_str()));
    }
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
    let yes_no = is_yes_no(question);
    // A statement to check ("Cotton keeps you warm when wet.") is answered by a sentence that
    // restates it; only a question needs something beyond its own words and topic.
    let asks = is_question(question) && !yes_no;
    let question_words = crate::gate::tokens(question);
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut fallback: Option<(usize, Candidate)> = None;
    for (rank, src) in sources.iter().take(cfg.max_sources).enumerate() {
        if src.is_heading {
            continue; // a heading names a section; it answers nothing
        }
        let heading_words = crate::gate::tokens(src.heading);
        // The question's topic here: its terms the heading path (note title included) already
        // names. A sentence must hold a term beyond the topic, when the question has one:
        // "Staging certificates live in Vault." under "Staging certificates" does not say how
        // often they are rotated.
        let beyond_topic: Vec<&String> = terms.iter().filter(|t| !heading_words.iter().any(|w| query::stem_match(w, t))).collect();
        for r in sentences(src.text, src.prose) {
            if !src.prose && is_table_header(src.text, r.end) {
                continue; // a table's header row names its columns; it states nothing
            }
            // A table row is read with its column names, as a sentence with its heading.
            let header_words =
                if src.prose { Vec::new() } else { table_header_before(src.text, r.start).map(crate::gate::tokens).unwrap_or_default() };
            let open_task = tasks_wanted && is_open_task(&src.text[r.clone()]);
            let quote = &src.text[r];
            if quote.trim_end().ends_with('?') {
                continue; // a question states nothing
            }
            if label_shape(quote, tasks_wanted).is_some() {
                continue;
            }
            let claim = plain(quote);
            if claim.trim_end().ends_with('?') {
                continue; // a question (in a link or emphasis) states nothing
            }
            let words = crate::gate::tokens(&claim);
            if words.len() < 3 {
                continue; // a fragment states nothing
            }
            // Something beyond the question's own words, and of the kind it asks for.
            if asks && new_words(&words, &question_words) == 0 || wanted != AnswerType::Other && !fits_type(wanted, quote) {
                continue;
            }
            if asks && !beyond_topic.is_empty() && !beyond_topic.iter().any(|t| words.iter().any(|w| query::stem_match(w, t))) {
                continue;
            }
            let mut own = 0.0;
            let mut context = 0.0;
            for t in &terms {
                if words.iter().any(|w| query::stem_match(w, t)) {
                    own += weight(t);
                } else if heading_words.iter().chain(&header_words).any(|w| query::stem_match(w, t)) {
                    context += weight(t) / 2.0;
                }
            }
            let coverage = (own + context) / total;
            // An open task answers "what is left to do for the move?" from its heading alone.
            if own == 0.0 && !(open_task && context > 0.0) {
                continue;
            }
            if coverage < cfg.min_coverage {
                // The fallback must hold the question's weightiest term: "How many days does the
                // quokka policy allow?" is not answered by a sentence about what an SLO allows.
                let key = terms.iter().max_by(|a, b| weight(a).total_cmp(&weight(b)));
                let holds_key = key.is_some_and(|k| words.iter().any(|w| query::stem_match(w, k)));
                if holds_key
                    && coverage >= cfg.fallback_coverage
                    && fallback.as_ref().is_none_or(|(r, c)| (*r, -c.score) > (rank, -coverage))
                {
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
        out.push(Claim { text: c.claim, support: vec![Support { version_id: c.version_id.to_owned(), quoted_span: c.quote.to_owned() }] });
    }
    out
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
                // Then a cell of the kind the question asks for ("how often" → "every 3 months").
                // Then the column "which airline" names.
                let wanted = answer_type(question);
                let target = wh_target(question);
                let score = |c: usize| {
                    let h = t.header.get(c).map_or(String::new(), |u| u.text.to_lowercase());
                    let v = t.row[c].text.to_lowercase();
                    let held = q_terms.iter().filter(|w| h.contains(w.as_str()) || v.contains(w.as_str())).count();
                    let named = target.as_ref().is_some_and(|w| crate::gate::tokens(&h).iter().any(|x| query::stem_match(x, w)));
                    (held, named, wanted != AnswerType::Other && fits_type(wanted, &t.row[c].text))
                };
                let Some(col) = (1..t.row.len()).filter(|&c| !t.row[c].text.is_empty()).max_by_key(|&c| (score(c), c)) else {
                    return claim;
                };
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
                let mut text =
                    carriers.iter().map(|r| plain(&body[r.clone()]).trim_end_matches(':').to_owned()).collect::<Vec<_>>().join(": ");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_answering_sentence_and_quotes_it() {
        let a = "Let's Encrypt certificates are valid for 90 days, but staging certificates are rotated every 60 days so that we always have a 30-day safety margin. The certificates use the DNS-01 challenge.";
        let b = "9. Post \"staging certs rotated\" in `#kestrel-staging` to close the announcement.";
        let sources = [
            Source { version_id: "v2", text: b, heading: "Runbook › Steps", prose: false, is_heading: false },
            Source { version_id: "v1", text: a, heading: "Runbook", prose: true, is_heading: false },
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
        let sources = [Source {
            version_id: "v",
            text: "Unrelated words about gardening and tomatoes.",
            heading: "",
            prose: true,
            is_heading: false,
        }];
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
