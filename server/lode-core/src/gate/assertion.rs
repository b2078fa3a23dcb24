//! The assertion status of a note's sentences: whether the note, read as a whole, asserts a line
//! *now*. A line can be verbatim, its sentence clean and its section plain, and the note still not
//! assert it: the note is marked rejected, draft or outdated (frontmatter, tags, title, a banner);
//! a first line scopes or marks its section ("Staging only.", "Status: rejected"); a legend the
//! note defines marks it ("‡ = not verified"), or a verdict mark does (❌); it is a speaker's turn
//! in a meeting (`**Ana:** we should ship Friday`); a later line of the note corrects it ("Update
//! 2026-03: the rent went up to €1,020"); it is marked as a joke ("/s"); or it is a link's label.
//!
//! [`Reading::of`] reads the note once; [`Reading::blockers`] answers for one quote with the
//! reason phrase a reader sees ("the note is marked “rejected”", "Ana, in the meeting",
//! "corrected on 2026-03-04 below: “…”") and, where a claim may carry the context by restating
//! it, the note's own text that carries it (the status, the scope line, the speaker's name).
//!
//! Invariants: like every structural check this only removes verifications; a note with none
//! of these reads exactly as before; every range is a byte range of the version's text; nothing
//! here panics on any input (scans are line based and bounded by the text).

use std::ops::Range;

use super::context::{heading_blocks, lead_in_blocks, norm_tokens, Blocker, ContextWords};
use super::couple::{self, lex, Kind};
use crate::structure::{clip, Context, Structure};

/// A region of the note that the note does not assert, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Governs {
    range: Range<usize>,
    why: String,
    /// The note's text that says so, when a claim may restate it (never blocked by itself).
    carrier: Option<Range<usize>>,
    /// Sections whose heading is a background role stay asserted (a note-level status only).
    spares_background: bool,
    /// The status word, for a note-level status: a line that states it is the note's own.
    word: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Marker {
    Symbol(String),
    Italic,
    Bold,
    Highlight,
}

impl Governs {
    /// Whether the region holds the quote starting at `at`.
    fn holds(&self, at: usize) -> bool {
        self.range.start <= at && at < self.range.end.max(self.range.start + 1)
    }

    /// Whether the quote starting at `at` opens on the carrier itself.
    fn opens_on_carrier(&self, at: usize) -> bool {
        self.carrier.as_ref().is_some_and(|c| c.start <= at && at <= c.end)
    }
}

/// What the note, as a whole, says about its own sentences. See the module doc.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    governs: Vec<Governs>,
    legend: Vec<(Marker, String, Range<usize>)>,
    /// Marks the note's legend says confirm a line ("Entries in **bold** are confirmed").
    confirming: Vec<(Marker, Range<usize>)>,
    /// The note grades lines with ✅/❌ marks: a ⚠️ or ❓ among them is not a plain yes.
    scale: bool,
    /// Sections under a background heading ("Context", "Background"), by range.
    background: Vec<Range<usize>>,
    /// The note's status says it was accepted: its "Proposal" section is what was decided.
    pub accepted: bool,
    /// The banner at the top, when there is one: the note's own current word about itself.
    pub banner: Option<Range<usize>>,
    /// In an accepted note: how many headings propose, and the first line of each "Decision"
    /// section (what was chosen), as tokens.
    proposals: usize,
    decisions: Vec<Vec<String>>,
}

/// Marks that say "no" on the line they stand on, and marks that say "not quite" when the note
/// grades with a scale.
const NO_MARKS: &[&str] = &["❌", "✗", "✘", "✖", "🚫", "⛔", "👎", "❎", "🔴"];
const DOUBT_MARKS: &[&str] = &["⚠", "❓", "❔", "🤔", "🟡", "🟠", "⁉"];
const YES_MARKS: &[&str] = &["✅", "✔", "☑", "👍", "🟢"];

/// Headings of sections that state background a rejected or outdated note still asserts.
const BACKGROUND: &[&str] = &[
    "background",
    "context",
    "motivation",
    "problem",
    "problem statement",
    "facts",
    "references",
    "prior art",
    "current state",
    "status",
    "history",
    "glossary",
    "definitions",
    "context and problem statement",
];

/// Roles a speaker's label may end with ("Defense counsel", "Support agent").
const ROLES: &[&str] = &[
    "counsel",
    "attorney",
    "lawyer",
    "judge",
    "witness",
    "expert",
    "rep",
    "representative",
    "engineer",
    "doctor",
    "nurse",
    "officer",
    "agent",
    "host",
    "guest",
    "interviewer",
    "interviewee",
    "caller",
    "customer",
    "speaker",
    "moderator",
    "chair",
    "claimant",
    "respondent",
    "defendant",
    "plaintiff",
    "mediator",
    "landlord",
    "tenant",
    "contractor",
    "vendor",
    "coach",
    "teacher",
    "parent",
];

/// Labels in a meeting that are the note's own voice, not a speaker's.
const OWN_LABELS: &[&str] = &[
    "decision",
    "decisions",
    "decided",
    "agreed",
    "agreement",
    "action",
    "actions",
    "action item",
    "action items",
    "ai",
    "outcome",
    "result",
    "results",
    "conclusion",
    "conclusions",
    "summary",
    "resolution",
    "resolved",
    "next steps",
    "next step",
    "owner",
    "owners",
    "due",
    "date",
    "time",
    "when",
    "where",
    "location",
    "attendees",
    "present",
    "absent",
    "apologies",
    "agenda",
    "notes",
    "note",
    "todo",
    "to do",
    "update",
    "edit",
    "status",
    "tldr",
    "tl dr",
    "context",
    "background",
    "goal",
    "goals",
    "problem",
    "fix",
    "cause",
    "root cause",
    "answer",
    "question",
    "q",
    "a",
    "re",
    "subject",
    "topic",
    "minutes",
    "follow up",
    "setup",
    "set up",
    "result",
    "finding",
    "findings",
    "plan",
    "budget",
    "cost",
    "costs",
    "price",
    "total",
    "step",
    "steps",
    "tip",
    "tips",
    "warning",
    "example",
    "hypothesis",
    "observation",
    "observations",
    "method",
    "methods",
    "verdict",
    "score",
    "rating",
    "pros",
    "cons",
    "why",
    "how",
    "what",
    "who",
    "effect",
    "impact",
    "symptom",
    "symptoms",
    "dose",
    "rent",
    "deadline",
    "scope",
    "follow-up",
    "followup",
    "follow ups",
    "blockers",
    "risks",
    "risk",
    "links",
    "link",
    "source",
    "sources",
    "ps",
    "nb",
];

const WEEKDAYS: &[&str] = &[
    "mon",
    "tue",
    "tues",
    "wed",
    "thu",
    "thur",
    "thurs",
    "fri",
    "sat",
    "sun",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "today",
    "yesterday",
    "tomorrow",
    "morning",
    "afternoon",
    "evening",
    "night",
    "weekend",
    "week",
    "day",
];

/// Words that make a meeting of a note: its title, a heading, a frontmatter type or tag.
const MEETING: &[&str] = &[
    "meeting",
    "meetings",
    "minutes",
    "transcript",
    "interview",
    "standup",
    "stand-up",
    "retro",
    "retrospective",
    "1:1",
    "1-1",
    "one-on-one",
    "conversation",
    "debate",
    "podcast",
    "kickoff",
    "kick-off",
    "workshop",
    "huddle",
    "townhall",
    "all-hands",
    "hearing",
    "deposition",
    "testimony",
    "mediation",
    "trial",
];

/// Words that make a meeting of a note only in its title or frontmatter ("Release sync",
/// "Call with the plumber"), where they name the note, not a topic.
const MEETING_TITLE: &[&str] = &["sync", "call", "chat", "discussion", "review", "offsite", "session", "catch-up", "catchup"];

/// Line openers that announce a later correction of what came before.
const CORRECTION_OPENERS: &[&str] = &[
    "update",
    "updated",
    "updates",
    "upd",
    "edit",
    "edited",
    "edit2",
    "correction",
    "corrected",
    "corrections",
    "erratum",
    "errata",
    "addendum",
    "revision",
    "revised",
    "retraction",
    "later",
    "followup",
    "follow-up",
    "ps",
    "p.s",
    "amendment",
    "amended",
];

/// Phrases by which a later line says an earlier line of the note was wrong: about the note's
/// own words, not a change in the world ("cells that no longer express CD19" corrects nothing).
const STRONG_CORRECTIONS: &[&[&str]] = &[
    &["was", "wrong"],
    &["were", "wrong"],
    &["is", "wrong"],
    &["was", "incorrect"],
    &["is", "incorrect"],
    &["not", "true"],
    &["was", "false"],
    &["scratch", "that"],
    &["never", "mind"],
    &["should", "read"],
    &["misread"],
    &["typo"],
    &["disregard"],
    &["misheard"],
    &["misremembered"],
    &["was", "mistaken"],
    &["were", "mistaken"],
    &["my", "mistake"],
    &["i", "was", "wrong"],
    &["ignore", "the", "above"],
    &["reverted"],
    &["rolled", "back"],
    &["turned", "out", "to", "be", "wrong"],
    &["turned", "out", "to", "be", "false"],
    &["turns", "out", "that"],
    &["turned", "out", "that"],
    &["was", "faulty"],
    &["were", "faulty"],
    &["superseded"],
    &["retracted"],
];

/// Words by which a later line changes a value ("raised to", "now", "instead").
const CHANGES: &[&str] = &[
    "now",
    "changed",
    "increased",
    "decreased",
    "raised",
    "lowered",
    "reduced",
    "reduce",
    "increase",
    "decrease",
    "cut",
    "moved",
    "switched",
    "stopped",
    "stop",
    "went",
    "bumped",
    "adjusted",
    "revised",
    "renegotiated",
    "upped",
    "halved",
    "doubled",
    "dropped",
    "cancelled",
    "canceled",
    "postponed",
    "rescheduled",
    "instead",
    "became",
    "becomes",
    "replaced",
    "longer",
    "anymore",
    "gone",
];

/// Headings whose section corrects what came before.
const UPDATE_HEADINGS: &[&str] =
    &["changelog", "changes", "corrections", "errata", "retest", "recheck", "revisited", "follow-up", "followup", "later", "amendments"];

/// Words too common to name what a line is about.
const NOT_A_SUBJECT: &[&str] = &[
    "the",
    "and",
    "for",
    "with",
    "this",
    "that",
    "these",
    "those",
    "was",
    "were",
    "has",
    "have",
    "had",
    "been",
    "being",
    "from",
    "now",
    "not",
    "but",
    "are",
    "our",
    "its",
    "they",
    "them",
    "then",
    "than",
    "also",
    "just",
    "very",
    "still",
    "will",
    "would",
    "should",
    "could",
    "can",
    "may",
    "might",
    "must",
    "into",
    "onto",
    "over",
    "under",
    "about",
    "after",
    "before",
    "again",
    "more",
    "less",
    "most",
    "all",
    "any",
    "some",
    "each",
    "every",
    "per",
    "via",
    "out",
    "off",
    "too",
    "only",
    "yet",
    "new",
    "old",
    "turned",
    "turns",
    "wrong",
    "update",
    "updated",
    "edit",
    "edited",
    "correction",
    "actually",
    "previously",
    "instead",
    "changed",
    "change",
    "went",
    "set",
    "get",
    "got",
    "use",
    "used",
    "using",
    "make",
    "made",
    "one",
    "two",
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
    "today",
    "yesterday",
    "tomorrow",
    "time",
    "times",
    "thing",
    "things",
    "did",
    "does",
    "done",
    "dont",
    "doesnt",
    "didnt",
    "isnt",
    "wasnt",
    "what",
    "which",
    "who",
    "whom",
    "when",
    "where",
    "why",
    "how",
    "there",
    "here",
    "you",
    "your",
    "yours",
    "we",
    "us",
    "my",
    "mine",
    "his",
    "her",
    "him",
    "she",
    "he",
    "it",
    "i",
    "is",
    "be",
    "a",
    "an",
    "of",
    "to",
    "in",
    "on",
    "at",
    "by",
    "or",
    "as",
    "if",
    "so",
    "no",
    "do",
    "up",
    "down",
    "true",
    "me",
    "am",
    "go",
    "oh",
    "ok",
    "vs",
    "re",
    "ie",
    "eg",
    "et",
    "al",
    "yes",
    "per",
    "via",
    "mr",
    "ms",
    "dr",
    "st",
    "false",
    "wrong",
    "right",
    "fine",
    "good",
    "bad",
    "better",
    "worse",
    "really",
    "much",
    "many",
    "lot",
    "lots",
    "bit",
    "january",
    "february",
    "march",
    "april",
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
    "note",
    "notes",
    "line",
    "above",
    "below",
    "later",
    "earlier",
    "first",
    "last",
    "next",
    "previous",
    "same",
    "other",
    "another",
    "like",
    "think",
    "thought",
    "see",
    "seems",
    "seemed",
    "said",
    "says",
    "going",
    "gone",
    "come",
    "came",
    "take",
    "took",
    "taken",
    "give",
    "gave",
    "need",
    "needs",
    "needed",
    "want",
    "wanted",
    "work",
    "works",
    "worked",
    "working",
    "keep",
    "kept",
    "per",
    "everything",
    "nothing",
    "something",
    "anything",
    "ever",
    "never",
    "always",
    "sometimes",
    "often",
    "instead",
    "rather",
    "anymore",
    "longer",
    "actually",
    "fact",
    "reverted",
    "increased",
    "decreased",
    "raised",
    "lowered",
    "reduced",
    "moved",
    "switched",
    "stopped",
    "bumped",
    "adjusted",
    "revised",
    "now",
    "currently",
    "current",
    "since",
    "until",
    "till",
    "back",
    "rolled",
    "true",
    "correct",
    "incorrect",
    "mistake",
];

/// Frontmatter tags and line tags that say the note (or the line) is not a current fact.
const TAG_CUES: &[&str] = &[
    "myth",
    "myths",
    "draft",
    "drafts",
    "outdated",
    "deprecated",
    "archived",
    "archive",
    "rejected",
    "superseded",
    "obsolete",
    "wip",
    "fiction",
    "joke",
    "jokes",
    "satire",
    "hypothesis",
    "speculation",
    "unverified",
    "idea",
    "ideas",
    "brainstorm",
    "rumor",
    "rumour",
    "debunked",
    "false",
    "disputed",
    "stale",
    "abandoned",
    "withdrawn",
    "proposal",
    "proposed",
];

/// Words that mark a note's or a section's status as not current.
fn status_words(words: &ContextWords) -> &[Vec<String>] {
    &words.status
}

fn is_status(words: &ContextWords, toks: &[String]) -> Option<String> {
    status_words(words).iter().find(|p| !p.is_empty() && toks.windows(p.len()).any(|w| w == p.as_slice())).map(|p| p.join(" "))
}

/// Lines of `text` with their byte ranges (without the line break).
fn lines(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut pos = 0;
    for l in text.split_inclusive('\n') {
        let body = l.trim_end_matches(['\n', '\r']);
        out.push(pos..pos + body.len());
        pos += l.len();
    }
    out
}

/// A line's content after block markers (`>`, list markers, checkboxes) and leading emphasis.
fn content_start(text: &str, line: &Range<usize>) -> usize {
    let s = &text[line.clone()];
    let mut t = s.trim_start_matches([' ', '\t', '>']);
    loop {
        let before = t.len();
        for m in ["- ", "* ", "+ "] {
            if let Some(r) = t.strip_prefix(m) {
                t = r.trim_start();
            }
        }
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && digits <= 9 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") ")) {
            t = t[digits + 2..].trim_start();
        }
        if t.len() > 3 && t.starts_with('[') && t.as_bytes().get(2) == Some(&b']') && t.is_char_boundary(3) {
            t = t[3..].trim_start();
        }
        t = t.trim_start_matches([' ', '\t', '>']);
        if t.len() == before {
            break;
        }
    }
    line.end - t.len()
}

/// The frontmatter block (`---` … `---` at the very top): its range and `key: value` pairs
/// (list values one per item), each value with its byte range.
fn frontmatter(text: &str) -> Option<(Range<usize>, Vec<(String, Range<usize>)>)> {
    let first = text.lines().next()?;
    if first.trim_end() != "---" {
        return None;
    }
    let ls = lines(text);
    let close = ls.iter().skip(1).position(|l| matches!(text[l.clone()].trim_end(), "---" | "..."))? + 1;
    let mut pairs = Vec::new();
    let mut key = String::new();
    for l in &ls[1..close] {
        let s = &text[l.clone()];
        let t = s.trim_start();
        if let Some(item) = t.strip_prefix("- ") {
            let start = l.end - item.len();
            pairs.push((key.clone(), trim_value(text, start..l.end)));
            continue;
        }
        let Some(colon) = s.find(':') else { continue };
        key = s[..colon].trim().to_lowercase();
        let v = l.start + colon + 1..l.end;
        let raw = text[v.clone()].trim();
        if raw.starts_with('[') && raw.ends_with(']') {
            let open = v.start + text[v.clone()].find('[').unwrap_or(0) + 1;
            let mut at = open;
            for part in text[open..v.end].trim_end().trim_end_matches(']').split(',') {
                pairs.push((key.clone(), trim_value(text, at..at + part.len())));
                at += part.len() + 1;
            }
        } else if !raw.is_empty() {
            pairs.push((key.clone(), trim_value(text, v)));
        }
    }
    Some((0..ls[close].end, pairs))
}

fn trim_value(text: &str, r: Range<usize>) -> Range<usize> {
    let s = &text[r.clone()];
    let t = s.trim().trim_matches(['"', '\'', '#']);
    let start = r.start + s.find(t).unwrap_or(0);
    start..start + t.len()
}

fn has(toks: &[String], list: &[&str]) -> bool {
    toks.iter().any(|t| list.contains(&t.as_str()))
}

fn phrase_in(toks: &[String], p: &[&str]) -> bool {
    !p.is_empty() && toks.windows(p.len()).any(|w| w.iter().zip(p).all(|(a, b)| a == b))
}

/// A date a line or heading is dated by: `2026-03-04`, `2026-03`, `4 March`, `Mar 4`, `3/4/2026`.
fn date_in(s: &str) -> Option<String> {
    const MONTHS: &[&str] = &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    let toks = lex(s, &[]);
    // A day label opening a journal line: "Wed: …", "Day 3 —".
    if let Some(first) = toks.first() {
        let after = &s[first.range.end..];
        let labelled = after.trim_start().starts_with([':', '—', '–', '-', ',']);
        if labelled && first.range.start <= 4 && WEEKDAYS[..14].contains(&first.norm.as_str()) {
            return Some(s[first.range.clone()].to_owned());
        }
        if first.norm == "day" && toks.get(1).is_some_and(|t| t.kind == Kind::Number) {
            return Some(s[first.range.start..toks[1].range.end].to_owned());
        }
    }
    for (k, t) in toks.iter().enumerate() {
        let n = t.norm.as_str();
        let iso = n.len() >= 7 && n.as_bytes()[..4].iter().all(u8::is_ascii_digit) && n.as_bytes()[4] == b'-';
        let slashed = s[t.range.clone()].matches('/').count() >= 1 && n.chars().all(|c| c.is_ascii_digit() || c == '/') && n.len() >= 3;
        if iso || (slashed && t.kind == Kind::Number) {
            return Some(s[t.range.clone()].to_owned());
        }
        let month = MONTHS.iter().any(|m| n.starts_with(m) && n.len() <= 9 && n.chars().all(char::is_alphabetic));
        if month && n != "may" || (n == "may" && s[t.range.clone()].starts_with('M')) {
            let num = |j: Option<&couple::Tok>| j.is_some_and(|t| t.kind == Kind::Number && t.norm.len() <= 4);
            if num(toks.get(k + 1)) {
                return Some(format!("{} {}", &s[t.range.clone()], &s[toks[k + 1].range.clone()]));
            }
            if k > 0 && num(toks.get(k - 1)) {
                return Some(format!("{} {}", &s[toks[k - 1].range.clone()], &s[t.range.clone()]));
            }
        }
    }
    None
}

/// Content words of a sentence: what it is about, for pairing it with a later correction.
fn subjects(text: &str) -> Vec<String> {
    fn stem(w: &str) -> String {
        for (suffix, keep) in [("ing", 4), ("ed", 4), ("es", 4), ("s", 3)] {
            if let Some(s) = w.strip_suffix(suffix).filter(|s| s.len() >= keep) {
                return s.to_owned();
            }
        }
        w.to_owned()
    }
    let mut out: Vec<String> = lex(text, &super::markup::unread(text))
        .into_iter()
        .filter(|t| {
            (t.kind == Kind::Word && t.norm.chars().count() >= 2 && !NOT_A_SUBJECT.contains(&t.norm.as_str()))
                // A ratio names its subject too: "1:5:5" (a time does not).
                || (t.kind == Kind::Number && t.norm.matches(':').count() >= 2)
        })
        .map(|t| stem(&t.norm))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The label of a field line ("Stop 4: …", "**Dana:** …"): up to three words before a colon.
fn field_label(s: &str) -> Option<&str> {
    let u = s.trim_start_matches(['*', '_']);
    let colon = u.find(':')?;
    let label = u[..colon].trim_end_matches(['*', '_']).trim();
    let ok = !label.is_empty()
        && label.split_whitespace().count() <= 3
        && u[colon + 1..].starts_with([' ', '*', '_'])
        && label.chars().all(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '(' | ')' | '.' | '\''));
    ok.then_some(label)
}

fn numbers(text: &str) -> Vec<String> {
    lex(text, &[]).into_iter().filter(|t| t.kind == Kind::Number && !t.norm.contains('-')).map(|t| t.norm).collect()
}

/// A speaker label at the start of a line: `**Ana:**`, `Ana:`, `[00:12] Ana Lima:`, `@bob:`. The
/// name's range.
fn speaker_label(text: &str, line: &Range<usize>) -> Option<Range<usize>> {
    // A task's assignee (`- [x] @li: booked the venue`) is an action item, not a turn.
    let item = text[line.clone()].trim_start();
    let after_marker = ["- ", "* ", "+ "].iter().find_map(|m| item.strip_prefix(m)).unwrap_or(item).trim_start();
    if after_marker.len() >= 4 && after_marker.starts_with('[') && after_marker.as_bytes()[2] == b']' {
        return None;
    }
    let start = content_start(text, line);
    let s = &text[start..line.end];
    // A timestamp before the name, inside emphasis or not: `[00:12]`, `**(10:02) ana:**`.
    let lead_marks = s.len() - s.trim_start_matches(['*', '_']).len();
    let stamp_end =
        if s[lead_marks..].starts_with(['[', '(']) { s[lead_marks..].find([']', ')']).map_or(0, |c| lead_marks + c + 1) } else { 0 };
    let colon = stamp_end + s[stamp_end..].find(':')?;
    if colon == 0 || colon > 48 || s[colon + 1..].starts_with(|c: char| c.is_ascii_digit() || c == '/') {
        return None;
    }
    let mut name_start = start + stamp_end;
    let label = &s[stamp_end..colon];
    let lead = label.len() - label.trim_start_matches(['*', '_', ' ']).len();
    let name = label.trim_start_matches(['*', '_', ' ']).trim_end_matches(['*', '_', ' ']);
    name_start += lead;
    // "Guest (Dr Kim)": the name before a parenthetical is what must look like one.
    let bare = name.split('(').next().unwrap_or(name).trim_end();
    if bare.is_empty() || (name.contains('(') && !name.ends_with(')')) {
        return None;
    }
    let words: Vec<&str> = bare.split_whitespace().collect();
    // In a chat log, after a timestamp, a lowercase handle is a name too: "[10:02] dmitri:".
    let stamped = stamp_end > 0;
    let handle = stamped && words.len() == 1 && words[0].chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    // A name or a role: "Ana", "Dr Patel", "Plaintiff's counsel", "@li".
    let name_like = handle
        || (1..=3).contains(&words.len())
            && words.first().is_some_and(|w| w.chars().next().is_some_and(|c| c.is_uppercase() || c == '@'))
            && words.iter().all(|w| w.chars().enumerate().all(|(i, c)| c.is_alphabetic() || (i == 0 && c == '@') || matches!(c, '.' | '-' | '\'' | '’')))
            // Later words capitalised ("Dr Patel"), or a role ("Plaintiff's counsel").
            && (words.iter().skip(1).all(|w| w.starts_with(char::is_uppercase)) || words.last().is_some_and(|w| ROLES.contains(&w.to_lowercase().as_str())));
    if !name_like {
        return None;
    }
    let lower = bare.to_lowercase().replace(['.', '\''], "");
    if date_in(name).is_some()
        || WEEKDAYS.contains(&lower.as_str())
        || lower.starts_with(['h', 'q']) && lower.len() <= 3 && lower[1..].chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    if OWN_LABELS.contains(&lower.as_str()) || OWN_LABELS.iter().any(|l| lower.starts_with(&format!("{l} "))) {
        return None;
    }
    // "Hale (claimant)": the name is what a claim restates.
    Some(name_start..name_start + bare.len())
}

fn first_person(text: &str) -> bool {
    lex(text, &[]).iter().any(|t| {
        matches!(
            t.norm.as_str(),
            "i" | "im" | "ive" | "id" | "ill" | "we" | "were" | "weve" | "lets" | "my" | "our" | "me" | "us" | "you" | "youre"
        )
    })
}

impl Reading {
    /// Reads the note once: its status, section marks, legend, speakers and corrections.
    pub fn of(st: &Structure<'_>, words: &ContextWords) -> Reading {
        let text = st.text();
        let mut r = Reading::default();
        let ls = lines(text);
        let headings = st.heading_list();
        let whole = 0..text.len();
        let fm = frontmatter(text);
        let body_start = fm.as_ref().map_or(0, |(range, _)| range.end);

        // Sections under background headings stay asserted under a note-level status.
        for (i, (level, line, u)) in headings.iter().enumerate() {
            let toks = norm_tokens(&u.text);
            if BACKGROUND.iter().any(|b| toks.join(" ") == *b) {
                let end = headings[i + 1..].iter().find(|(l, _, _)| l <= level).map_or(text.len(), |(_, h, _)| h.start);
                r.background.push(line.start..end);
            }
        }

        // The note's own status: frontmatter, tags, title, a banner, an ADR's Status section.
        let note = |why: String, carrier: Range<usize>, word: &str| Governs {
            range: whole.clone(),
            why,
            carrier: Some(carrier),
            spares_background: true,
            word: Some(word.to_owned()),
        };
        let mut title: Option<(String, Range<usize>)> = None;
        let mut meeting = false;
        if let Some((_, pairs)) = &fm {
            for (k, v) in pairs {
                let value = &text[v.clone()];
                let toks = norm_tokens(value);
                match k.as_str() {
                    "status" | "state" | "stage" | "lifecycle" => {
                        // "accepted", not "not accepted" or "accepted?": the value is the word.
                        r.accepted |= toks.len() <= 2
                            && toks.first().is_some_and(|t| {
                                matches!(t.as_str(), "accepted" | "approved" | "adopted" | "implemented" | "decided" | "done" | "shipped")
                            })
                            && !value.contains('?');
                        if let Some(w) = is_status(words, &toks) {
                            r.governs.push(note(format!("the note's status is “{w}”"), v.clone(), &w));
                        }
                    }
                    "tags" | "tag" | "labels" | "categories" | "category" | "type" | "kind" => {
                        let parts: Vec<String> =
                            value.split(['/', ' ', ',']).map(|p| p.trim_matches(['#', '"', '\'']).to_lowercase()).collect();
                        if let Some(t) = parts.iter().find(|p| TAG_CUES.contains(&p.as_str())) {
                            r.governs.push(note(format!("the note is tagged “{t}”"), v.clone(), t));
                        }
                        meeting |= toks.iter().any(|t| MEETING.contains(&t.as_str()));
                    }
                    "title" => title = Some((value.to_owned(), v.clone())),
                    "attendees" | "participants" | "present" | "speakers" => meeting = true,
                    _ => {}
                }
            }
        }
        if let Some((level, line, u)) = headings.first() {
            let only_blank_before = text[body_start..line.start].trim().is_empty();
            if *level == 1 || only_blank_before {
                title.get_or_insert((u.text.clone(), u.range.clone()));
            }
        }
        if title.is_none() {
            // A first line that reads as a title: short, no full stop, not a list or a quote.
            if let Some(first) = ls.iter().find(|l| l.start >= body_start && !text[(*l).clone()].trim().is_empty()) {
                let t = text[first.clone()].trim();
                let words_n = t.split_whitespace().count();
                if words_n <= 12 && !t.ends_with(['.', ':', '?', '!']) && !t.starts_with(['-', '*', '+', '>', '|', '`', '#']) {
                    title = Some((t.to_owned(), content_start(text, first)..first.end));
                }
            }
        }
        // The first heading, when it is the title, says the status too ("# RFC 12: … (rejected)").
        if let Some((level, line, u)) = headings.first() {
            if (*level == 1 || text[body_start..line.start].trim().is_empty()) && title.as_ref().is_some_and(|(_, r)| *r != u.range) {
                if let Some(w) = title_status(words, &u.text) {
                    r.governs.push(note(format!("the note is titled “{}” ({w})", clip(&u.text, 60)), u.range.clone(), &w));
                }
            }
        }
        if let Some((t, range)) = &title {
            if let Some(w) = title_status(words, t) {
                r.governs.push(note(format!("the note is titled “{}” ({w})", clip(t, 60)), range.clone(), &w));
            }
        }
        // A banner: the first block after the title (a quote, a callout, or a short paragraph
        // about "this page").
        let after_title = title
            .as_ref()
            .filter(|(_, r)| r.start >= body_start)
            .map_or(body_start, |(_, r)| ls.iter().find(|l| l.start <= r.start && r.start <= l.end).map_or(r.end, |l| l.end));
        // What a reader sees first: an HTML comment is not a banner.
        let firsts: Vec<Range<usize>> = [body_start, after_title]
            .iter()
            .filter_map(|&from| {
                ls.iter()
                    .find(|l| {
                        l.start >= from && !text[(*l).clone()].trim().is_empty() && !text[(*l).clone()].trim_start().starts_with("<!--")
                    })
                    .cloned()
            })
            .collect();
        for first in firsts.iter().take(if after_title > body_start { 2 } else { 1 }) {
            let quoted = text[first.clone()].trim_start().starts_with('>');
            let block_end = ls
                .iter()
                .skip_while(|l| l.start < first.start)
                .take_while(|l| !text[(*l).clone()].trim().is_empty() && (!quoted || text[(*l).clone()].trim_start().starts_with('>')))
                .last()
                .map_or(first.end, |l| l.end);
            let block = first.start..block_end;
            let shown = &text[block.clone()];
            let toks = norm_tokens(shown);
            let about_itself = [
                "page",
                "note",
                "doc",
                "document",
                "article",
                "guide",
                "wiki",
                "file",
                "runbook",
                "spec",
                "rfc",
                "adr",
                "content",
                "information",
                "info",
            ]
            .iter()
            .any(|w| phrase_in(&toks, &["this", w]));
            // A line ending in ":" leads in what follows, the context step reads it; a table, a
            // list or a heading is not a banner.
            let raw_first = text[block.clone()].trim_start();
            let heading_line = raw_first.starts_with(['#', '|', '-', '+'])
                || (raw_first.starts_with('*') && !raw_first.starts_with("**"))
                || raw_first.starts_with(|c: char| c.is_ascii_digit())
                || shown.trim_end().trim_end_matches(['*', '_']).ends_with(':');
            // A quote, a callout, a short line, or a paragraph about "this page" — not the first
            // paragraph of an abstract that happens to hold "proposed".
            if !heading_line && (quoted || (about_itself && toks.len() <= 30) || toks.len() <= 12) {
                if let Some(w) = is_status(words, &toks).or_else(|| banner_phrase(&toks)) {
                    // What the banner says of the page (its sentences holding the status or a
                    // pointer elsewhere) is the note's current word; other lines in it are not.
                    let stating: Vec<Range<usize>> = couple::sentences(text, block.clone())
                        .into_iter()
                        .filter(|s| {
                            let t = norm_tokens(&text[s.clone()]);
                            is_status(words, &t).is_some()
                                || banner_phrase(&t).is_some()
                                || has(&t, &["instead", "see", "use", "replaced", "superseded", "moved", "now", "new"])
                        })
                        .collect();
                    r.banner = stating.first().map(|f| f.start..stating.last().map_or(f.end, |l| l.end));
                    // "The durability section below reflects the pre-alpha build": that section only.
                    let named = has(&toks, &["section", "part", "chapter"]).then(|| {
                        headings.iter().enumerate().find(|(_, (_, h, u))| {
                            h.start > block.end && norm_tokens(&u.text).iter().any(|t| t.len() > 3 && toks.contains(t))
                        })
                    });
                    if let Some(Some((i, (level, h, _)))) = named {
                        let end = headings[i + 1..].iter().find(|(l, _, _)| l <= level).map_or(text.len(), |(_, n, _)| n.start);
                        let why = format!("in a section the note marks {w}: {}", quoted_text(&text[block.clone()]));
                        r.governs.push(Governs { range: h.start..end, why, carrier: None, spares_background: false, word: None });
                        continue;
                    }
                    let carrier = content_start(text, first)..block_end;
                    // A callout's title ("> [!WARNING] Outdated") is what a claim restates.
                    let callout_title = text[first.clone()]
                        .find("]")
                        .filter(|_| text[first.clone()].contains("[!"))
                        .map(|i| first.start + i + 1..first.end);
                    let carrier = callout_title
                        .filter(|t| is_status(words, &norm_tokens(&text[t.clone()])).is_some())
                        .map_or(carrier, |t| trim_value(text, t));
                    let g = note(format!("the note says it is {w}: {}", quoted_text(&text[block.clone()])), carrier, &w);
                    if !r.governs.contains(&g) {
                        r.governs.push(g);
                    }
                }
            }
        }
        // An ADR's `## Status` section whose first line is a status.
        for (i, (level, line, u)) in headings.iter().enumerate() {
            if norm_tokens(&u.text) != ["status"] {
                continue;
            }
            let Some(first) = ls.iter().find(|l| l.start >= line.end && !text[(*l).clone()].trim().is_empty()) else { continue };
            let next_heading = headings.get(i + 1).map_or(text.len(), |(_, h, _)| h.start);
            if first.start >= next_heading {
                continue;
            }
            let carrier = content_start(text, first)..first.end;
            let toks = norm_tokens(&text[carrier.clone()]);
            if toks.len() <= 8 {
                if let Some(w) = is_status(words, &toks) {
                    let g = if *level <= 2 {
                        Governs {
                            range: whole.clone(),
                            why: format!("the note's status is “{w}”"),
                            carrier: Some(carrier),
                            spares_background: true,
                            word: Some(w.clone()),
                        }
                    } else {
                        let end = headings[i + 1..].iter().find(|(l, _, _)| l < level).map_or(text.len(), |(_, h, _)| h.start);
                        let start = headings[..i].iter().rev().find(|(l, _, _)| l < level).map_or(0, |(_, h, _)| h.end);
                        Governs {
                            range: start..end,
                            why: format!("in a section marked “{w}”"),
                            carrier: Some(carrier),
                            spares_background: false,
                            word: None,
                        }
                    };
                    r.governs.push(g);
                }
            }
        }

        // A section's first line that marks or scopes it; a "Status: …" line under an item.
        for (i, (level, line, u)) in headings.iter().enumerate() {
            let next = headings.get(i + 1).map_or(text.len(), |(_, h, _)| h.start);
            // A heading that already qualifies its section ("Staging only") is what a claim
            // restates; a scope line under it says the same.
            if heading_blocks(words, &u.text) {
                continue;
            }
            let Some(first) = ls.iter().find(|l| l.start >= line.end && l.start < next && !text[(*l).clone()].trim().is_empty()) else {
                continue;
            };
            let raw = text[first.clone()].trim_start();
            if raw.starts_with(['-', '*', '+', '|', '#', '`']) || raw.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            // The line's first sentence: "Rules below apply to X. Older accounts …".
            let c = content_start(text, first);
            let carrier = couple::sentences(text, c..first.end).into_iter().next().unwrap_or(c..first.end);
            if let Some(why) = section_mark(words, &text[carrier.clone()]) {
                // The whole section for "everything in this section/note", else up to the next heading.
                let toks = norm_tokens(&text[carrier.clone()]);
                let whole_section = has(&toks, &["everything", "whole", "entire", "page", "note"]);
                let end = if whole_section {
                    headings[i + 1..].iter().find(|(l, _, _)| l <= level).map_or(text.len(), |(_, h, _)| h.start)
                } else {
                    next
                };
                r.governs.push(Governs { range: carrier.end..end, why, carrier: Some(carrier), spares_background: false, word: None });
            }
        }
        // The same before the first heading (or right under the title): "All costs are per person."
        let intro = headings.first().map_or(text.len(), |(_, h, _)| h.start);
        {
            let from = if intro > body_start { body_start } else { after_title };
            let mut until = if intro > body_start { intro } else { headings.get(1).map_or(text.len(), |(_, h, _)| h.start) };
            // The first block only, and not when the title already scopes the note ("Pricing — EU only").
            let title_scopes = headings.first().is_some_and(|(l, _, u)| *l == 1 && heading_blocks(words, &u.text));
            let first_block = ls.iter().find(|l| l.start >= from && l.start < until && !text[(*l).clone()].trim().is_empty());
            if let Some(first) =
                first_block.filter(|l| !title_scopes && !text[(*l).clone()].trim_start().starts_with(['#', '-', '*', '+', '|', '>', '`']))
            {
                let c = content_start(text, first);
                let carrier = couple::sentences(text, c..first.end).into_iter().next().unwrap_or(c..first.end);
                let is_title = title.as_ref().is_some_and(|(_, r)| r.start <= carrier.start && carrier.start < r.end.max(r.start + 1));
                if has(&norm_tokens(&text[carrier.clone()]), &["below", "following"]) {
                    // "Rules below apply to …": everything after it, subsections included.
                    until = headings.iter().skip(1).find(|(l, _, _)| *l == 1).map_or(text.len(), |(_, h, _)| h.start);
                }
                if !is_title {
                    if let Some(why) = section_mark(words, &text[carrier.clone()]) {
                        r.governs.push(Governs {
                            range: carrier.end..until,
                            why,
                            carrier: Some(carrier),
                            spares_background: false,
                            word: None,
                        });
                    }
                }
            }
        }
        // A line that scopes what came before it: "(All figures above are for the pilot site.)"
        for l in ls.iter().filter(|l| l.start >= body_start) {
            let c = content_start(text, l);
            let line = text[c..l.end].trim();
            let toks = norm_tokens(line);
            if toks.len() > 16 || !has(&toks, &["above"]) || section_mark(words, line).is_none() {
                continue;
            }
            let start = headings.iter().rev().find(|(_, h, _)| h.end <= l.start).map_or(body_start, |(_, h, _)| h.end);
            let why = format!("in a part the note scopes below it: {}", quoted_text(line));
            r.governs.push(Governs { range: start..l.start, why, carrier: Some(c..l.end), spares_background: false, word: None });
        }
        // Hypotheses labelled as such: "**H1.** …", "Hypothesis: …" (unless confirmed).
        for l in ls.iter().filter(|l| l.start >= body_start) {
            let c = content_start(text, l);
            let line = &text[c..l.end];
            let bare = line.trim_start_matches(['*', '_']);
            let label_len = bare.find(['.', ':', ')']).filter(|&n| n <= 24).unwrap_or(0);
            let label = &bare[..label_len];
            let lt = norm_tokens(label);
            let hypothesis = matches!(lt.first().map(String::as_str), Some(w) if (w.len() <= 3 && w.starts_with('h') && w[1..].chars().all(|c| c.is_ascii_digit()) && w.len() > 1) || matches!(w, "hypothesis" | "hypotheses" | "conjecture" | "prediction" | "guess" | "hunch" | "assumption"));
            // "H1 (confirmed):": the label's own parenthesis says so; "to be verified" does not.
            let head_end = bare.find(':').filter(|&c| c <= 40).unwrap_or(label_len + 1).min(bare.len());
            let head = norm_tokens(&bare[..crate::text::floor_char_boundary(bare, head_end)]);
            let confirmed = head.iter().any(|w| matches!(w.as_str(), "confirmed" | "verified" | "supported" | "validated"))
                && !head.iter().any(|w| {
                    super::lexicon::is_negation(w) || matches!(w.as_str(), "to" | "if" | "unless" | "still" | "yet" | "pending" | "be")
                });
            if hypothesis && !confirmed && label_len > 0 {
                let start = c + (line.len() - bare.len());
                r.governs.push(Governs {
                    range: start + label_len..l.end,
                    why: format!("a hypothesis ({})", label.trim()),
                    carrier: Some(start..start + label_len),
                    spares_background: false,
                    word: None,
                });
            }
        }
        for (k, l) in ls.iter().enumerate().filter(|(_, l)| l.start >= body_start) {
            let c = content_start(text, l);
            let s = &text[c..l.end];
            let toks = norm_tokens(s);
            let status_line = toks.first().is_some_and(|t| matches!(t.as_str(), "status" | "state" | "verdict")) && s.contains(':');
            if !status_line || toks.len() > 10 {
                continue;
            }
            let Some(w) = is_status(words, &toks[1..]) else { continue };
            let indent = |l: &Range<usize>| text[l.clone()].len() - text[l.clone()].trim_start().len();
            let in_list = text[l.clone()].trim_start().starts_with(['-', '*', '+']);
            let why = format!("marked “{}”", clip(s.trim_matches(['*', '_', ' ']), 60));
            let range = if in_list && indent(l) > 0 {
                // A nested "Status: rejected" item marks its parent item and everything under it.
                let parent = ls[..k].iter().rev().find(|p| !text[(*p).clone()].trim().is_empty() && indent(p) < indent(l));
                match parent {
                    Some(p) => {
                        let pi = indent(p);
                        let end = ls[k + 1..]
                            .iter()
                            .find(|n| !text[(*n).clone()].trim().is_empty() && indent(n) <= pi)
                            .map_or(text.len(), |n| n.start);
                        p.start..end
                    }
                    None => continue,
                }
            } else {
                // Otherwise the section it is in (the note, before any heading but the title).
                let inner = headings.iter().rposition(|(_, h, _)| h.end <= l.start);
                match inner {
                    Some(hi) if hi > 0 || headings[hi].0 > 1 => {
                        let level = headings[hi].0;
                        let end = headings[hi + 1..].iter().find(|(lv, _, _)| *lv <= level).map_or(text.len(), |(_, h, _)| h.start);
                        headings[hi].1.start..end
                    }
                    _ => whole.clone(),
                }
            };
            let _ = w;
            r.governs.push(Governs { range, why, carrier: Some(c..l.end), spares_background: false, word: None });
        }

        // A legend the note defines, and verdict marks.
        for l in &ls {
            let c = content_start(text, l);
            let line = text[c..l.end].trim();
            let toks = norm_tokens(line);
            let body = match toks.first().map(String::as_str) {
                Some("legend" | "key" | "legende" | "marks" | "symbols" | "notation") if line.contains(':') => {
                    line.split_once(':').map_or(line, |(_, b)| b)
                }
                _ => line,
            };
            let is_legend_line = body.len() != line.len();
            for entry in body.split([',', ';', '·']) {
                if let Some((m, meaning)) = legend_entry(words, entry) {
                    r.legend.push((m, meaning, l.clone()));
                } else if let Some(m) = confirming_entry(entry, is_legend_line) {
                    r.confirming.push((m, l.clone()));
                }
            }
        }
        r.scale = YES_MARKS.iter().chain(NO_MARKS).any(|m| text.contains(m));

        // Speakers: a meeting, or dialogue between named speakers.
        meeting |= headings.iter().any(|(_, _, u)| norm_tokens(&u.text).iter().any(|t| MEETING.contains(&t.as_str())))
            || title
                .as_ref()
                .is_some_and(|(t, _)| norm_tokens(t).iter().any(|w| MEETING.contains(&w.as_str()) || MEETING_TITLE.contains(&w.as_str())));
        let labelled: Vec<(usize, Range<usize>)> =
            ls.iter().enumerate().filter_map(|(k, l)| speaker_label(text, l).map(|n| (k, n))).collect();
        let names: Vec<String> = labelled.iter().map(|(_, n)| text[n.clone()].to_lowercase()).collect();
        let mut distinct = names.clone();
        distinct.sort();
        distinct.dedup();
        let attendees: Vec<String> = ls
            .iter()
            .filter_map(|l| {
                let s = &text[content_start(text, l)..l.end];
                let t = norm_tokens(s);
                (t.first().is_some_and(|w| matches!(w.as_str(), "attendees" | "participants" | "present" | "speakers" | "with"))
                    && s.contains(':'))
                .then(|| s.to_lowercase())
            })
            .collect();
        let speaks = |n: &Range<usize>, k: usize| first_person(&text[n.end..ls[k].end]);
        let recurs = |who: &str| names.iter().filter(|n| *n == who).count() >= 2;
        // Dialogue: two named speakers or more, one of whom speaks again or talks in the first
        // person. A list of fields ("Redis: …", "Postgres: …") is neither.
        let dialogue = distinct.len() >= 2 && labelled.iter().any(|(k, n)| speaks(n, *k) || recurs(&text[n.clone()].to_lowercase()));
        for (k, name) in &labelled {
            let who = text[name.clone()].to_owned();
            let lower = who.to_lowercase();
            // The author's own lines ("Me:", "My take:") are the note's voice.
            if matches!(lower.as_str(), "me" | "i" | "myself" | "author" | "us" | "we") || lower.starts_with("my ") {
                continue;
            }
            let given = lower.split(['(', ' ']).next().unwrap_or("").to_owned();
            let listed = attendees.iter().any(|a| norm_tokens(a).contains(&given));
            if !(listed || meeting || dialogue) {
                continue;
            }
            // The turn runs to the end of its paragraph or item, or the next speaker.
            let mut end = ls[*k].end;
            for n in &ls[k + 1..] {
                let t = text[n.clone()].trim_start();
                if t.is_empty() || t.starts_with(['-', '*', '+', '#', '|']) || speaker_label(text, n).is_some() {
                    break;
                }
                end = n.end;
            }
            let why = if meeting { format!("{who}, in the meeting") } else { format!("{who}, speaking") };
            // From the start of the label's line: a quote that opens before the name is in the turn.
            r.governs.push(Governs { range: ls[*k].start..end, why, carrier: Some(name.clone()), spares_background: false, word: None });
        }

        // An accepted note's proposals and what its decision names.
        if r.accepted {
            r.proposals = headings
                .iter()
                .filter(|(_, _, u)| super::context::heading_cues(words, &u.text).iter().any(|c| c.len() == 1 && c[0].starts_with("propos")))
                .count();
            r.decisions = headings
                .iter()
                .filter(|(_, _, u)| {
                    let t = norm_tokens(&u.text);
                    matches!(t.as_slice(), [w] if w == "decision" || w == "outcome")
                        || t == ["decision", "outcome"]
                        || t == ["chosen", "option"]
                })
                .filter_map(|(_, line, _)| {
                    text[line.end.min(text.len())..]
                        .lines()
                        .map(str::trim)
                        .find(|l| !l.is_empty())
                        .filter(|l| !l.starts_with('#'))
                        .map(norm_tokens)
                })
                .collect();
        }
        // Corrections: a later line about the same subject that corrects, reverts or supersedes.
        r.corrections(st, words, &ls, body_start);
        // Quoted and clipped text the note answers later.
        let clipped_note = fm.as_ref().is_some_and(|(_, pairs)| {
            pairs
                .iter()
                .any(|(k, _)| matches!(k.as_str(), "source" | "url" | "clipped" | "clip" | "via" | "original" | "link" | "canonical"))
        });
        r.answered_quotes(st, words, &ls, body_start, clipped_note);
        r
    }

    /// A quotation (a block quote, or a clipped page's body) that the note's author answers later
    /// ("In our January bill Acme came out 15% more expensive", "My notes: we still saw cold
    /// starts") is the source's word, not the note's.
    fn answered_quotes(&mut self, st: &Structure<'_>, words: &ContextWords, ls: &[Range<usize>], body_start: usize, clipped_note: bool) {
        let text = st.text();
        let headings = st.heading_list();
        let quoted_line = |l: &Range<usize>| {
            let t = text[l.clone()].trim_start();
            t.starts_with('>') && !(t.contains("[!") && !t.to_lowercase().contains("[!quote") && !t.to_lowercase().contains("[!cite"))
        };
        // The author's own sections of a clipped page: "My notes", "My thoughts", "Takeaways".
        let author_section = |at: usize| {
            headings.iter().rev().find(|(_, h, _)| h.end <= at).is_some_and(|(_, _, u)| {
                let t = norm_tokens(&u.text);
                t.first().is_some_and(|w| {
                    matches!(
                        w.as_str(),
                        "my" | "notes"
                            | "thoughts"
                            | "comments"
                            | "commentary"
                            | "review"
                            | "verdict"
                            | "opinion"
                            | "reaction"
                            | "response"
                            | "critique"
                            | "personal"
                    )
                })
            })
        };
        let mut regions: Vec<Range<usize>> = Vec::new();
        let mut k = 0;
        while k < ls.len() {
            // A callout's first line marks the whole callout: the note's own unless quote or cite.
            if ls[k].start >= body_start && quoted_line(&ls[k]) && !text[ls[k].clone()].contains("[!") {
                let start = ls[k].start;
                while k < ls.len() && text[ls[k].clone()].trim_start().starts_with('>') {
                    k += 1;
                }
                regions.push(start..ls[k - 1].end);
            } else {
                k += 1;
            }
        }
        if clipped_note {
            let mut start = body_start;
            for (_, h, _) in headings.iter() {
                if author_section(h.end) {
                    regions.push(start..h.start);
                    start = text.len();
                } else if start == text.len() {
                    start = h.start;
                }
            }
            if start < text.len() {
                regions.push(start..text.len());
            }
        }
        if regions.is_empty() {
            return;
        }
        let all: Vec<Range<usize>> = couple::sentences(text, body_start..text.len());
        let inside = |s: &Range<usize>| regions.iter().any(|r| r.start <= s.start && s.start < r.end);
        let responses: Vec<(Range<usize>, Vec<String>, Vec<String>, bool, bool)> = all
            .iter()
            .filter(|s| !inside(s) && !text[(*s).clone()].trim_start().starts_with('#'))
            .map(|s| {
                let t = &text[s.clone()];
                let toks = norm_tokens(t);
                let dispute = toks.iter().any(|w| super::lexicon::is_negation(w) || super::lexicon::FALSITY.contains(&w.as_str()))
                    || words.disputes.iter().any(|p| phrase_in(&toks, &p.iter().map(String::as_str).collect::<Vec<_>>()))
                    || has(
                        &toks,
                        &["still", "instead", "expensive", "slower", "worse", "more", "less", "missed", "failed", "broke", "timed"],
                    );
                let marked = author_section(s.start)
                    || toks.first().is_some_and(|w| {
                        matches!(
                            w.as_str(),
                            "my" | "i"
                                | "we"
                                | "our"
                                | "measured"
                                | "tested"
                                | "compared"
                                | "actually"
                                | "however"
                                | "but"
                                | "reality"
                                | "personally"
                                | "after"
                                | "update"
                                | "edit"
                                | "disagree"
                        )
                    })
                    || phrase_in(&toks, &["in", "our"])
                    || phrase_in(&toks, &["in", "my"])
                    || phrase_in(&toks, &["in", "practice"]);
                (s.clone(), subjects(t), numbers(t), dispute, marked)
            })
            .collect();
        for s in all.iter().filter(|s| inside(s)) {
            let t = &text[s.clone()];
            let (subj, nums) = (subjects(t), numbers(t));
            let answer = responses.iter().filter(|(r, ..)| r.start >= s.end).find(|(_, rs, rn, dispute, marked)| {
                let shared = subj.iter().any(|w| rs.contains(w));
                let numbers_differ = !nums.is_empty() && !rn.is_empty() && rn.iter().any(|n| !nums.contains(n));
                (shared && (*dispute || numbers_differ || *marked)) || (clipped_note && *dispute && *marked)
            });
            if let Some((r, ..)) = answer {
                let why = format!("quoted, and the note answers it later: {}", quoted_text(&text[r.clone()]));
                self.governs.push(Governs { range: s.clone(), why, carrier: None, spares_background: false, word: None });
            }
        }
    }

    fn corrections(&mut self, st: &Structure<'_>, _words: &ContextWords, ls: &[Range<usize>], body_start: usize) {
        let text = st.text();
        let headings = st.heading_list();
        let sents: Vec<Range<usize>> = couple::sentences(text, body_start..text.len())
            .into_iter()
            // Footnote definitions qualify the sentences that cite them (the context step).
            .filter(|s| !text[s.clone()].trim_start().starts_with(['#', '|', '`', '~']) && !text[s.clone()].trim_start().starts_with("[^"))
            .collect();
        let line_at = |at: usize| ls.iter().find(|l| l.start <= at && at <= l.end).cloned().unwrap_or(at..at);
        // The block (paragraph, list item, heading, row) each line belongs to: a change in the same
        // paragraph ("X reduced A by 55%. Y increased B by 24%.") reports, it does not correct.
        let mut block_of_line: Vec<usize> = Vec::with_capacity(ls.len());
        let mut block = 0usize;
        let mut blank = true;
        for l in ls {
            let t = text[l.clone()].trim_start();
            let opens = t.starts_with(['-', '*', '+', '#', '|', '>']) || t.starts_with(|c: char| c.is_ascii_digit()) && t.contains(". ");
            if t.is_empty() {
                blank = true;
            } else {
                if blank || opens {
                    block += 1;
                }
                blank = false;
            }
            block_of_line.push(block);
        }
        let block_at = |at: usize| ls.iter().position(|l| l.start <= at && at <= l.end).map_or(0, |k| block_of_line[k]);
        // The date a sentence is dated by: its line's leading date, or its innermost dated heading.
        let dated = |s: &Range<usize>| -> Option<String> {
            let line = line_at(s.start);
            let c = content_start(text, &line);
            let head_end = crate::text::floor_char_boundary(text, (c + 28).min(line.end));
            date_in(&text[c..head_end])
                .or_else(|| headings.iter().rev().find(|(_, h, _)| h.end <= s.start).and_then(|(_, _, u)| date_in(&u.text)))
        };
        // A section whose heading announces updates ("## Update 2026-03", "## Changelog",
        // "## Retest, April") holds corrections throughout.
        // Short headings only ("## Update 2026-03", not a title "Changes in CP prevalence …").
        let update_section = |s: &Range<usize>| {
            headings.iter().enumerate().rev().find(|(_, (_, h, _))| h.end <= s.start).is_some_and(|(i, (level, _, u))| {
                let t: Vec<String> =
                    norm_tokens(&u.text).into_iter().filter(|w| !w.chars().next().is_some_and(|c| c.is_ascii_digit())).collect();
                let title = i == 0 && *level == 1;
                !title
                    && t.len() <= 4
                    && t.first().is_some_and(|w| CORRECTION_OPENERS.contains(&w.as_str()) || UPDATE_HEADINGS.contains(&w.as_str()))
            })
        };
        // A line that opens as a correction ("**Update 2026-03:**", "EDIT:", "_Later:_") makes
        // every sentence on it one.
        let opener_line = |line: &Range<usize>| {
            let c = content_start(text, line);
            let rest = &text[c..line.end];
            let toks = norm_tokens(rest);
            let opens = toks.first().is_some_and(|w| CORRECTION_OPENERS.contains(&w.as_str()))
                && rest.chars().take(40).any(|ch| matches!(ch, ':' | '—' | '–' | ')'));
            // "2024-02-19 follow-up — **correction:** …": a correction label early in the line.
            let head: String = rest.chars().take(60).collect::<String>().to_lowercase().replace(['*', '_'], "");
            let labelled = ["correction:", "update:", "updated:", "edit:", "erratum:", "errata:", "amendment:", "revision:"]
                .iter()
                .any(|l| head.contains(l));
            opens || labelled
        };
        struct Later {
            block: usize,
            /// A numbered label ("Stop 4", "Day 3"): another number is another subject.
            label_id: Option<String>,
            /// The sentence says it is history ("used to", "previously").
            past: bool,
            range: Range<usize>,
            subjects: Vec<String>,
            numbers: Vec<String>,
            /// Numbers with the unit after them: ("2.5", "ml").
            quantities: Vec<(String, String)>,
            date: Option<String>,
            /// Dates the sentence names ("reverted the 2025-09-01 change").
            mentions: Vec<String>,
            strong: bool,
            change: bool,
            anaphoric: bool,
        }
        let later: Vec<Later> = sents
            .iter()
            .map(|s| {
                let line = line_at(s.start);
                let c = content_start(text, &line).max(s.start).min(s.end);
                // Read without its list number and checkbox ("4. [x]" is not a quantity) and
                // without a speaker's or a field's label (a name is not a subject).
                let field = field_label(&text[c..s.end]);
                // "Stop 4", "Day 3" (a word and a number; a date is a date, not an id).
                let label_id = field
                    .filter(|l| l.chars().any(|ch| ch.is_ascii_digit()) && l.chars().any(char::is_alphabetic) && date_in(l).is_none())
                    .map(str::to_lowercase);
                // A label used on several lines is a speaker ("Dana:"); once, it names the
                // subject ("Rent: €1,150").
                let speaker = field.is_some_and(|l| {
                    let l = format!("{l}:");
                    text.matches(l.as_str()).count() >= 2
                });
                let skip = if speaker { field.map_or(0, |l| text[c..s.end].find(l).unwrap_or(0) + l.len() + 1) } else { 0 };
                let t = &text[(c + skip).min(s.end)..s.end];
                let t = t.trim_start_matches(['*', '_', ' ']);
                let toks = norm_tokens(&text[c..s.end]);
                // "Previously we thought …", "Actually, it was …": the note taking back its own words.
                let retakes = matches!(toks.first().map(String::as_str), Some("previously" | "originally" | "initially" | "earlier"))
                    && toks.get(1..4).is_some_and(|w| {
                        w.iter().any(|w| matches!(w.as_str(), "thought" | "believed" | "assumed" | "suspected" | "expected"))
                    });
                // A one-word cue ("reverted", "typo") corrects the note only when it opens the
                // sentence or points back ("this was a typo", "reverted the 2025-09-01 change"):
                // "cells reverted their hyperglycemia" reports a finding.
                let points_back = toks.iter().any(|w| matches!(w.as_str(), "above" | "earlier" | "previous" | "change" | "entry" | "line"))
                    || toks.first().is_some_and(|w| matches!(w.as_str(), "this" | "that" | "thats" | "it" | "its"));
                let cue = |p: &&&[&str]| phrase_in(&toks, p) && (p.len() > 1 || points_back || toks.first().is_some_and(|w| w == p[0]));
                let strong = opener_line(&line) || update_section(s) || STRONG_CORRECTIONS.iter().any(|p| cue(&p)) || retakes;
                let change = CHANGES.iter().any(|w| toks.iter().any(|t| t == w));
                let lexed = lex(t, &[]);
                // A number with its unit after it ("2.5 ml", "50 MB") or its currency before it ("£250").
                let mut quantities: Vec<(String, String)> = lexed
                    .windows(2)
                    .filter(|w| {
                        w[0].kind == Kind::Number
                            && (w[1].kind == Kind::Symbol
                                || (w[1].kind == Kind::Word && w[1].norm.len() <= 4 && !NOT_A_SUBJECT.contains(&w[1].norm.as_str())))
                    })
                    .map(|w| (w[0].norm.clone(), w[1].norm.clone()))
                    .collect();
                quantities.extend(
                    lexed
                        .windows(2)
                        .filter(|w| w[0].kind == Kind::Symbol && w[1].kind == Kind::Number)
                        .map(|w| (w[1].norm.clone(), w[0].norm.clone())),
                );
                let mentions = lexed
                    .iter()
                    .filter(|t| t.kind == Kind::Number && t.norm.len() >= 7 && t.norm.contains('-'))
                    .map(|t| t.norm.clone())
                    .collect();
                Later {
                    block: block_at(s.start),
                    label_id,
                    past: phrase_in(&toks, &["used", "to"]) || has(&toks, &["previously", "formerly", "originally", "initially"]),
                    range: s.clone(),
                    subjects: subjects(t),
                    numbers: numbers(t),
                    quantities,
                    date: dated(s),
                    mentions,
                    strong,
                    change,
                    anaphoric: toks.iter().take(6).any(|w| matches!(w.as_str(), "this" | "that" | "it" | "above" | "thats" | "its")),
                }
            })
            .collect();
        // From the last sentence back: a correction that is itself corrected (a raise later
        // reverted) corrects nothing.
        let mut superseded: Vec<Option<usize>> = vec![None; later.len()];
        for i in (0..later.len()).rev() {
            let s = &later[i];
            // Later in time: later in the note, or, between dated entries, a later date (a
            // changelog lists the newest first).
            let iso = |d: &Option<String>| d.as_ref().filter(|d| d.len() >= 7 && d.as_bytes()[..4].iter().all(u8::is_ascii_digit)).cloned();
            for (j, c) in later.iter().enumerate() {
                if j == i || superseded[j].is_some() || s.past {
                    continue;
                }
                match (iso(&s.date), iso(&c.date)) {
                    (Some(a), Some(b)) if a != b => {
                        if b < a {
                            continue;
                        }
                    }
                    _ => {
                        if c.range.start < s.range.end {
                            continue;
                        }
                    }
                }
                if s.label_id.is_some() && c.label_id.is_some() && s.label_id != c.label_id {
                    continue;
                }
                let shared = s.subjects.iter().filter(|w| c.subjects.contains(w)).count();
                let numbers_differ = !s.numbers.is_empty() && !c.numbers.is_empty() && c.numbers.iter().any(|n| !s.numbers.contains(n));
                let enough = shared >= 2 || (shared >= 1 && (s.subjects.len() <= 3 || numbers_differ));
                let same_quantity = c.quantities.iter().any(|(n, u)| s.quantities.iter().any(|(m, v)| u == v && n != m));
                let journal = s.date.is_some() && c.date.is_some() && s.date != c.date;
                let names_date = s.date.as_ref().is_some_and(|d| c.mentions.iter().any(|m| m == &d.to_lowercase()));
                let apart = c.block != s.block || journal;
                let corrects = (c.strong && (enough || names_date || same_quantity))
                    || (c.change && apart && ((same_quantity && shared >= 1) || (enough && journal)))
                    // A later dated entry giving the same thing a new amount ("Dose: 100 mg",
                    // "£1,010 a month"); a log of times or counts is events, not a value.
                    || (journal && shared >= 1 && same_quantity);
                // "EDIT: this was wrong" right after a line: that line.
                let adjacent = c.strong
                    && c.anaphoric
                    && shared == 0
                    && j == i + 1
                    && c.range.start >= s.range.end
                    && text[s.range.end..c.range.start].matches('\n').count() <= 2;
                if corrects || adjacent {
                    superseded[i] = Some(j);
                    break;
                }
            }
        }
        for (i, by) in superseded.iter().enumerate() {
            let Some(j) = *by else { continue };
            let c = &later[j];
            let when = c.date.as_deref().map(|d| format!("on {d} ")).unwrap_or_default();
            let why = format!("corrected {when}later in the note: {}", quoted_text(&text[c.range.clone()]));
            self.governs.push(Governs { range: later[i].range.clone(), why, carrier: None, spares_background: false, word: None });
        }
    }

    /// Why the note does not assert the sentence at `quote` now (nothing when it does).
    pub fn blockers(&self, st: &Structure<'_>, ctx: &Context, quote: &Range<usize>, claim: &str) -> Vec<Blocker> {
        let text = st.text();
        let mut out = Vec::new();
        let in_background = self.in_background(quote.start);
        let claim_toks = norm_tokens(claim);
        for g in &self.governs {
            let inside = g.holds(quote.start);
            // A quote opening on the carrier (the speaker's name, the status line) is the note's
            // own word on it only when the claim says it too: "Bob: we ship" quoting "Bob:** we
            // ship", not "we ship" quoting the same.
            let on_carrier = g.opens_on_carrier(quote.start)
                && g.carrier.as_ref().is_some_and(|c| {
                    let said = norm_tokens(&text[c.clone()]);
                    !said.is_empty() && claim_toks.windows(said.len()).any(|w| w == said.as_slice())
                });
            // The banner is the note's current word about itself.
            let in_banner = g.word.is_some() && self.banner.as_ref().is_some_and(|b| b.start <= quote.start && quote.start < b.end);
            if !inside || on_carrier || in_banner || (g.spares_background && in_background) {
                continue;
            }
            // A line that states the status itself ("Rejected at the March review") is the note's
            // own word on it.
            if let Some(w) = &g.word {
                let line = sentence_toks(text, ctx, quote);
                if norm_tokens(w).iter().all(|w| line.contains(w)) {
                    continue;
                }
            }
            // "All temperatures in °C unless marked": a line that marks its own unit is not scoped.
            if let Some(c) = &g.carrier {
                let scope = text[c.clone()].to_lowercase();
                if scope.contains("unless") && marks_own_unit(&text[line_of(text, quote.start)], &scope) {
                    continue;
                }
            }
            out.push(Blocker { why: g.why.clone(), carrier: g.carrier.clone() });
        }
        let line = line_of(text, quote.start);
        let shown = &text[line.clone()];
        // A legend's mark on the line, or a verdict mark.
        for (m, meaning, def) in &self.legend {
            if def.start <= quote.start && quote.start <= def.end {
                continue;
            }
            let hit = match m {
                Marker::Symbol(s) => shown.contains(s.as_str()) && (s != "*" || shown.matches('*').count() % 2 == 1),
                Marker::Italic => within_emphasis(text, &line, quote, &["*", "_"]),
                Marker::Bold => within_emphasis(text, &line, quote, &["**", "__"]),
                Marker::Highlight => within_emphasis(text, &line, quote, &["=="]),
            };
            if hit {
                let mark = match m {
                    Marker::Symbol(s) => s.clone(),
                    Marker::Italic => "italics".into(),
                    Marker::Bold => "bold".into(),
                    Marker::Highlight => "highlight".into(),
                };
                out.push(Blocker {
                    why: format!("marked {mark}, which the note's legend defines as “{}”", clip(meaning, 40)),
                    carrier: None,
                });
            }
        }
        let legend_defines = |m: &str| self.legend.iter().any(|(k, _, _)| matches!(k, Marker::Symbol(s) if s == m));
        // A mark binds to its own part of the line: "Supports Python ≥ 3.9; 3.8 ✗" marks 3.8.
        let part = {
            let from = shown[..(quote.start - line.start).min(shown.len())].rfind(';').map_or(0, |i| i + 1);
            let to = shown[(quote.end.min(line.end) - line.start).min(shown.len())..]
                .find(';')
                .map_or(shown.len(), |i| (quote.end.min(line.end) - line.start).min(shown.len()) + i);
            if shown.trim_start().starts_with('|') {
                shown
            } else {
                &shown[crate::text::floor_char_boundary(shown, from)..crate::text::floor_char_boundary(shown, to)]
            }
        };
        let shown_part = part;
        if let Some(m) = NO_MARKS.iter().find(|m| shown_part.contains(**m) && !legend_defines(m)) {
            out.push(Blocker { why: format!("marked {m}"), carrier: None });
        } else if self.scale {
            if let Some(m) = DOUBT_MARKS.iter().find(|m| shown_part.contains(**m) && !legend_defines(m)) {
                out.push(Blocker { why: format!("marked {m}, not ✅"), carrier: None });
            }
        }
        // A tag on the line: `#myth`, `[myth]`, `(myth)`.
        for (i, ch) in shown.char_indices().filter(|(_, c)| matches!(c, '#' | '[' | '(')) {
            let rest = &shown[i + 1..];
            let word: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '-' || *c == '/').collect();
            let after = &rest[word.len()..];
            let closed = match ch {
                '#' => after.is_empty() || after.starts_with(|c: char| c.is_whitespace() || ",.;)".contains(c)),
                '[' => after.starts_with(']') && !after.starts_with("](") && !after.starts_with("]["),
                _ => after.starts_with(')'),
            };
            let last = word.rsplit('/').next().unwrap_or("").to_lowercase();
            let stated = claim_toks.iter().any(|t| t.trim_end_matches('s') == last.trim_end_matches('s'));
            if closed && TAG_CUES.contains(&last.as_str()) && !stated {
                out.push(Blocker { why: format!("tagged “{last}” on its line"), carrier: None });
                break;
            }
        }
        // A flag on the sentence: "[citation needed]", "[dubious]", "[source?]".
        let lower_line = shown.to_lowercase();
        if let Some(flag) = [
            "[citation needed]",
            "[citation-needed]",
            "[needs source]",
            "[source?]",
            "[dubious]",
            "[disputed]",
            "[unverified]",
            "[verify]",
            "[?]",
            "(citation needed)",
        ]
        .iter()
        .find(|f| lower_line.contains(**f))
        {
            out.push(Blocker { why: format!("flagged {flag} on its line"), carrier: None });
        }
        // A joke: "/s", "yeah right", "(not)".
        let sentence = sentence_range(text, ctx, quote);
        // An irony phrase marks its sentence; a mark at the end of the line ("/s", "lol", 🙄)
        // marks the line's last sentence.
        let tail_text = text[sentence.end.min(line.end)..line.end].replace("/s", "").replace("/j", "");
        let last_on_line = !tail_text.chars().any(char::is_alphanumeric);
        let line_end = if last_on_line { &text[sentence.end.min(line.end)..line.end] } else { "" };
        let around = &text[sentence.start..sentence.end.max(sentence.start)];
        let around_toks = norm_tokens(around);
        let tail = norm_tokens(&text[line.clone()]);
        let sarcasm = format!("{around} {line_end}")
            .split_whitespace()
            .any(|w| matches!(w.trim_end_matches(['.', ')', '!']), "/s" | "/j" | "/sarcasm"))
            || (last_on_line && tail.last().is_some_and(|w| matches!(w.as_str(), "lol" | "lmao" | "rofl")))
            || ["🙄", "😒", "🙃", "😏", "🤡"].iter().any(|e| around.contains(e) || line_end.contains(e))
            || phrase_in(&around_toks, &["yeah", "right"])
            || phrase_in(&around_toks, &["as", "if"])
            || around.contains("(not)")
            || around.contains("(kidding)")
            || around.contains("(joking)")
            || phrase_in(&around_toks, &["just", "kidding"])
            || phrase_in(&around_toks, &["oh", "great"])
            || phrase_in(&around_toks, &["oh", "sure"])
            || phrase_in(&around_toks, &["oh", "joy"])
            || phrase_in(&around_toks, &["what", "a", "surprise"])
            || around_toks.last().is_some_and(|w| matches!(w.as_str(), "lol" | "lmao" | "rofl"))
            || phrase_in(&around_toks, &["best", "idea", "ever"])
            || phrase_in(&around_toks, &["what", "could", "go", "wrong"])
            || phrase_in(&around_toks, &["what", "could", "possibly", "go", "wrong"])
            || phrase_in(&around_toks, &["thanks", "a", "lot"])
            || phrase_in(&around_toks, &["how", "convenient"])
            || phrase_in(&around_toks, &["love", "that", "for", "us"])
            || around_toks.starts_with(&["sure".to_owned(), "and".to_owned()])
            || phrase_in(&around_toks, &["only", "joking"]);
        // "… was a *great* idea. Truly.": a one-word affirmation after a sentence.
        let after = &text[sentence.end.min(text.len())..line.end.max(sentence.end).min(text.len())];
        let next_word: Vec<String> = norm_tokens(after.split(['.', '!']).next().unwrap_or(""));
        let sarcasm = sarcasm
            || (next_word.len() == 1
                && matches!(
                    next_word[0].as_str(),
                    "truly"
                        | "totally"
                        | "classic"
                        | "brilliant"
                        | "fantastic"
                        | "perfect"
                        | "wonderful"
                        | "lovely"
                        | "splendid"
                        | "genius"
                )
                && after.trim_start().split(['.', '!']).next().is_some_and(|w| w.trim().len() < 12)
                && after.contains(['.', '!']));
        if sarcasm {
            out.push(Blocker { why: "marked as irony".into(), carrier: None });
        }
        // A link's label names another note; it states nothing.
        if link_label_only(&text[sentence.clone()], claim) {
            out.push(Blocker { why: "a link's label, not a statement".into(), carrier: None });
        }
        out
    }

    /// In an accepted note, whether the proposal under `heading` is what was decided: the only
    /// proposal, or the one a "Decision" section names ("## Decision\nProposal A." for
    /// "## Proposal A: Kafka").
    pub fn decided(&self, heading: &str) -> bool {
        let label = norm_tokens(heading.split(':').next().unwrap_or(heading));
        self.proposals == 1 || (!label.is_empty() && self.decisions.iter().any(|d| d.windows(label.len()).any(|w| w == label.as_slice())))
    }

    fn in_background(&self, at: usize) -> bool {
        self.background.iter().any(|b| b.start <= at && at < b.end)
    }

    /// The carriers of the note's status that say the same as the one at `carrier` (the title's
    /// "(rejected)" and `status: rejected`): restating one carries the others. A different status
    /// ("draft" and a `myth` tag) is not carried by it.
    pub fn note_carriers_like(&self, carrier: Option<&Range<usize>>) -> Vec<Range<usize>> {
        let Some(c) = carrier else { return Vec::new() };
        let Some(word) = self.governs.iter().find(|g| g.carrier.as_ref() == Some(c)).and_then(|g| g.word.clone()) else {
            return Vec::new();
        };
        self.governs.iter().filter(|g| g.word.as_deref() == Some(word.as_str())).filter_map(|g| g.carrier.clone()).collect()
    }

    /// Whether the note's legend confirms the line at `quote` ("**bold** = confirmed").
    pub fn confirmed(&self, st: &Structure<'_>, quote: &Range<usize>) -> bool {
        let text = st.text();
        let line = line_of(text, quote.start);
        self.confirming.iter().any(|(m, def)| {
            !(def.start <= quote.start && quote.start <= def.end)
                && match m {
                    Marker::Symbol(s) => text[line.clone()].contains(s.as_str()),
                    Marker::Italic => within_emphasis(text, &line, quote, &["*", "_"]),
                    Marker::Bold => within_emphasis(text, &line, quote, &["**", "__"]),
                    Marker::Highlight => within_emphasis(text, &line, quote, &["=="]),
                }
        })
    }

    /// The carriers a claim may restate for the quote at `quote`, in the note's order.
    pub fn carriers(&self, quote: &Range<usize>) -> Vec<Range<usize>> {
        let mut out: Vec<Range<usize>> = self
            .governs
            .iter()
            .filter(|g| g.holds(quote.start) && !g.opens_on_carrier(quote.start))
            .filter_map(|g| g.carrier.clone())
            .collect();
        out.sort_by_key(|c| c.start);
        out.dedup();
        out
    }

    /// Phrases of the note's status at `quote`, for the breadcrumb (`the note's status is
    /// “rejected”`, `Ana, in the meeting`).
    pub fn describe(&self, quote: &Range<usize>) -> Vec<String> {
        let in_background = self.in_background(quote.start);
        let mut out: Vec<String> = self
            .governs
            .iter()
            .filter(|g| g.holds(quote.start) && !g.opens_on_carrier(quote.start) && !(g.spares_background && in_background))
            .map(|g| g.why.clone())
            .collect();
        out.dedup();
        out
    }
}

/// Whether `line` names a unit or a period the scope line does not ("°F" under "°C unless
/// marked", "/yr" under "per month unless marked").
fn marks_own_unit(line: &str, scope: &str) -> bool {
    const UNITS: &[&str] = &[
        "°f",
        "°c",
        "/yr",
        "/year",
        "per year",
        "a year",
        "annual",
        "/mo",
        "/month",
        "per month",
        "a month",
        "monthly",
        "/wk",
        "per week",
        "/day",
        "per day",
        "/h",
        "per hour",
        "usd",
        "eur",
        "gbp",
        "$",
        "€",
        "£",
        "%",
        " kg",
        " lb",
        " km",
        " mi",
        " ml",
        " oz",
    ];
    let line = line.to_lowercase();
    UNITS.iter().any(|u| line.contains(u) && !scope.contains(u))
}

/// The note's text as a reader sees it, quoted and clipped: emphasis and quote markers removed.
fn quoted_text(s: &str) -> String {
    let shown: Vec<&str> = s.lines().map(|l| l.trim_start().trim_start_matches('>').trim()).collect();
    let shown = crate::text::normalize_whitespace(&shown.join(" ")).replace("**", "").replace("__", "");
    format!("“{}”", clip(shown.trim_matches(['*', '_', ' ']), 60))
}

fn line_of(text: &str, at: usize) -> Range<usize> {
    let at = crate::text::floor_char_boundary(text, at.min(text.len()));
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    start..end
}

fn sentence_range(text: &str, ctx: &Context, quote: &Range<usize>) -> Range<usize> {
    let Some(block) = ctx.block.clone().filter(|b| b.start <= quote.start && quote.start <= b.end) else { return quote.clone() };
    couple::sentences(text, block)
        .into_iter()
        .find(|s| s.start <= quote.start && quote.start < s.end.max(s.start + 1))
        .unwrap_or(quote.clone())
}

fn sentence_toks(text: &str, ctx: &Context, quote: &Range<usize>) -> Vec<String> {
    norm_tokens(&text[sentence_range(text, ctx, quote)])
}

/// Whether the quote lies inside an emphasis span of one of `marks` on its line.
fn within_emphasis(text: &str, line: &Range<usize>, quote: &Range<usize>, marks: &[&str]) -> bool {
    let s = &text[line.clone()];
    for m in marks {
        let mut at = 0;
        while let Some(open) = s[at..].find(m).map(|i| at + i) {
            let after = open + m.len();
            // `*` of `**` is not italics; `**` of `***` is bold.
            let doubled = m.len() == 1 && s[after..].starts_with(m);
            let Some(close) = s[after..].find(m).map(|i| after + i) else { break };
            if doubled {
                at = after + m.len();
                continue;
            }
            let (a, b) = (line.start + after, line.start + close);
            if a <= quote.start && quote.end <= b + 1 && quote.start < b {
                return true;
            }
            at = close + m.len();
        }
    }
    false
}

/// `MARK = meaning`, `MARK: meaning`, `MARK — meaning`, `*italics* = planned`, `Bold: confirmed`:
/// a legend entry whose meaning the gate reads as not asserting.
fn legend_entry(words: &ContextWords, s: &str) -> Option<(Marker, String)> {
    let s = s.trim();
    let seps = [" = ", " — ", " – ", " → ", " means ", " - ", ": ", "= ", " =", ":"];
    let (mark, meaning) = seps.iter().filter_map(|sep| s.split_once(sep)).min_by_key(|(m, _)| m.len())?;
    let mark = mark.trim();
    let meaning = meaning.trim();
    // A footnote's definition (`[^2]: …`) qualifies only the sentences that reference it.
    if mark.is_empty() || meaning.is_empty() || mark.chars().count() > 14 || mark.starts_with("[^") || s.starts_with("[^") {
        return None;
    }
    let lower = mark.to_lowercase();
    let plain = lower.trim_matches(['*', '_', '=', '(', ')']);
    let marker = if plain.starts_with("italic")
        || (mark.starts_with('_') || mark.starts_with('*') && !mark.starts_with("**")) && mark.chars().any(char::is_alphabetic)
    {
        Marker::Italic
    } else if plain.starts_with("bold") || ((mark.starts_with("**") || mark.starts_with("__")) && mark.chars().any(char::is_alphabetic)) {
        Marker::Bold
    } else if plain.starts_with("highlight") || mark.starts_with("==") {
        Marker::Highlight
    } else if !mark.chars().any(char::is_alphanumeric) && !mark.contains(['[', '('])
        || (mark.starts_with('[') && mark.ends_with(']') || mark.starts_with('(') && mark.ends_with(')')) && mark.chars().count() <= 6
    {
        if matches!(mark, "-" | "*" | "+" | ">" | "#" | "|") && !s.starts_with(mark) {
            return None;
        }
        Marker::Symbol(mark.to_owned())
    } else {
        return None;
    };
    let toks = norm_tokens(meaning);
    const NOT_ASSERTED: &[&str] = &[
        "planned",
        "plan",
        "plans",
        "guess",
        "guessed",
        "guesses",
        "estimate",
        "estimated",
        "estimates",
        "approximate",
        "tentative",
        "pending",
        "tbd",
        "tbc",
        "todo",
        "untested",
        "uncertain",
        "unknown",
        "disputed",
        "unsure",
        "recheck",
        "proposed",
        "idea",
        "ideas",
        "assumption",
        "assumed",
        "rumor",
        "rumour",
        "hearsay",
        "anecdotal",
        "speculative",
        "expected",
        "projected",
        "forecast",
        "target",
        "goal",
        "wish",
        "optional",
        "maybe",
        "possibly",
        "probably",
        "likely",
        "unclear",
        "doubtful",
        "contested",
        "retracted",
        "false",
        "wrong",
        "outdated",
        "stale",
        "superseded",
        "rejected",
        "myth",
        "broken",
        "failed",
        "fails",
        "unconfirmed",
        "unverified",
        "verify",
        "check",
        "confirm",
    ];
    let cue = toks.iter().any(|t| NOT_ASSERTED.contains(&t.as_str()))
        || lead_in_blocks(words, meaning)
        || heading_blocks(words, meaning)
        || is_status(words, &toks).is_some();
    cue.then(|| (marker, meaning.to_owned()))
}

/// A legend entry that confirms what it marks: "Entries in **bold** are confirmed by
/// facilities", "✓ = verified", "Bold: tested".
fn confirming_entry(s: &str, on_legend_line: bool) -> Option<Marker> {
    let toks = norm_tokens(s);
    const CONFIRMS: &[&str] = &["confirmed", "verified", "tested", "checked", "proven", "official"];
    let negated = toks
        .iter()
        .any(|t| super::lexicon::is_negation(t) || matches!(t.as_str(), "unless" | "if" | "until" | "pending" | "yet" | "still"));
    if !toks.iter().any(|t| CONFIRMS.contains(&t.as_str())) || negated || s.contains('?') {
        return None;
    }
    let lower = s.trim().to_lowercase();
    // The line names the mark as a convention: "Entries in **bold** are confirmed", "Bold =
    // verified", "✓ = tested"; not any bold line that says "checked".
    let names = |kind: &str, example: &str| {
        lower.contains(&format!("in {kind}"))
            || lower.starts_with(&format!("{kind} ="))
            || lower.starts_with(&format!("{kind}:"))
            || (lower.contains(&format!("in {example}")))
    };
    if names("bold", "**bold**") || names("bold", "__bold__") {
        Some(Marker::Bold)
    } else if names("italics", "*italics*") || names("italic", "_italic_") {
        Some(Marker::Italic)
    } else if names("highlight", "==highlight==") || lower.contains("highlighted") && lower.contains(" are ") {
        Some(Marker::Highlight)
    } else {
        let (mark, rest) = s.trim().split_once([' ', '='])?;
        let separated = rest.trim_start().starts_with(['=', ':']) || s.trim()[mark.len()..].trim_start().starts_with('=') || on_legend_line;
        (separated
            && !mark.is_empty()
            && !mark.chars().any(char::is_alphanumeric)
            && mark.chars().count() <= 4
            && !matches!(mark, "-" | "—" | "–" | "*" | "+" | ">" | "#"))
        .then(|| Marker::Symbol(mark.to_owned()))
    }
}

/// A status written into a title: `RFC 12: Kafka (rejected)`, `DRAFT — Q3 plan`, `[ARCHIVED] Old
/// wiki`, `Travel policy – superseded`. A status word inside a phrase ("Rejected payments") is not.
fn title_status(words: &ContextWords, title: &str) -> Option<String> {
    // A lifecycle status, not a topic: "Systematic reviews: myths and misconceptions" is about myths.
    let words = &ContextWords {
        status: words
            .status
            .iter()
            .filter(|p| {
                !matches!(p.first().map(String::as_str), Some("myth" | "myths" | "unverified" | "unconfirmed" | "disputed" | "debunked"))
            })
            .cloned()
            .collect(),
        ..Default::default()
    };
    let toks = norm_tokens(title);
    // A leading all-caps status word: "DRAFT RFC 12", "WIP notes".
    if let Some(first) = title.split_whitespace().next() {
        let w = first.trim_matches(|c: char| !c.is_alphanumeric());
        if w.len() >= 3 && w.chars().all(|c| c.is_uppercase()) {
            if let Some(s) = is_status(words, &norm_tokens(w)) {
                return Some(s);
            }
        }
    }
    let segments: Vec<&str> = title
        .split(['(', ')', '[', ']', ':', '—', '–', '|'])
        .flat_map(|s| s.split(" - "))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if segments.len() < 2 && toks.len() > 1 {
        return None;
    }
    segments.iter().find_map(|seg| {
        let t = norm_tokens(seg);
        let w = is_status(words, &t)?;
        // The segment is the status: "rejected", "superseded by RFC 14", "draft v2".
        (t.len() <= 4 && t.first().is_some_and(|f| w.split(' ').next() == Some(f.as_str()))).then_some(w)
    })
}

/// Banner phrases that say a page is not current.
fn banner_phrase(toks: &[String]) -> Option<String> {
    const PHRASES: &[&[&str]] = &[
        &["no", "longer"],
        &["out", "of", "date"],
        &["do", "not", "use"],
        &["dont", "use"],
        &["not", "maintained"],
        &["unmaintained"],
        &["replaced", "by"],
        &["see", "instead"],
        &["work", "in", "progress"],
        &["not", "current"],
        &["not", "approved"],
        &["not", "reviewed"],
        &["not", "final"],
        &["not", "yet", "approved"],
        &["historical"],
        &["kept", "for", "history"],
    ];
    PHRASES.iter().find(|p| phrase_in(toks, p)).map(|p| p.join(" "))
}

/// A section's first line that marks it ("Rejected.", "Superseded by ADR-14.", "Status:
/// draft") or scopes it ("Staging only.", "Applies to the EU plan.", "All prices below are for
/// 2023."). The reason phrase, or nothing.
fn section_mark(words: &ContextWords, line: &str) -> Option<String> {
    let toks = norm_tokens(line);
    if toks.is_empty() || toks.len() > 14 || line.trim_end().trim_end_matches(['*', '_']).ends_with(':') {
        return None;
    }
    let shown = clip(line.trim().trim_matches(['*', '_', ' ']), 60);
    if toks.len() <= 5 {
        if let Some(w) = is_status(words, &toks) {
            if toks.first().is_some_and(|f| w.starts_with(f.as_str()))
                || toks.first().is_some_and(|f| matches!(f.as_str(), "status" | "state"))
            {
                return Some(format!("in a section marked “{shown}”"));
            }
        }
    }
    let convention = toks.first().is_some_and(|t| {
        matches!(
            t.as_str(),
            "all"
                | "figures"
                | "prices"
                | "amounts"
                | "values"
                | "numbers"
                | "costs"
                | "times"
                | "dates"
                | "salaries"
                | "doses"
                | "weights"
                | "sizes"
                | "distances"
        )
    });
    let convention = convention
        || ["figures", "amounts", "prices", "values", "numbers", "costs", "times", "temperatures", "doses", "weights"]
            .iter()
            .any(|w| phrase_in(&toks, &["all", w]));
    let scope = (convention && toks.len() <= 12 && has(&toks, &["are", "is", "in", "per", "include", "exclude", "assume", "gross", "net"]))
        || toks.last().is_some_and(|t| t == "only")
        || toks.first().is_some_and(|t| t == "only")
        || phrase_in(&toks, &["applies", "to"])
        || phrase_in(&toks, &["apply", "to"])
        || phrase_in(&toks, &["applies", "only"])
        || phrase_in(&toks, &["valid", "for"])
        || phrase_in(&toks, &["valid", "only"])
        || phrase_in(&toks, &["valid", "until"])
        || ((has(&toks, &["below"])
            || phrase_in(&toks, &["the", "following"])
            || phrase_in(&toks, &["this", "section"])
            || toks.first().is_some_and(|w| matches!(w.as_str(), "these" | "everything")))
            && has(
                &toks,
                &[
                    "for",
                    "only",
                    "per",
                    "are",
                    "apply",
                    "applies",
                    "estimates",
                    "estimated",
                    "assume",
                    "assumes",
                    "assuming",
                    "hypothetical",
                    "unverified",
                    "approximate",
                    "guesses",
                    "projections",
                    "targets",
                    "planned",
                    "proposed",
                    "in",
                    "from",
                    "as",
                    "if",
                    "unless",
                    "except",
                    "excluding",
                    "before",
                    "after",
                    "until",
                    "during",
                    "mistake",
                    "mistakes",
                    "error",
                    "errors",
                    "wrong",
                    "false",
                    "incorrect",
                    "fictional",
                    "examples",
                    "template",
                    "placeholders",
                ],
            ))
        || (toks.len() <= 8
            && toks.first().is_some_and(|t| matches!(t.as_str(), "for" | "in" | "during" | "until" | "before" | "after" | "except"))
            && !line.contains(',')
            && line.trim_end().ends_with(['.', ')'])
            && !toks.iter().any(|t| matches!(t.as_str(), "is" | "are" | "was" | "were" | "has" | "have")));
    scope.then(|| format!("in a section scoped “{shown}”"))
}

/// Whether every content word of the claim lies in one link label of `sentence`
/// (`[why caching always helps](x.md)`, `[[Caching always helps]]`, `[[x|label]]`).
fn link_label_only(sentence: &str, claim: &str) -> bool {
    let claim_toks: Vec<String> = norm_tokens(claim).into_iter().filter(|t| !super::GLUE.contains(&t.as_str())).collect();
    if claim_toks.is_empty() {
        return false;
    }
    let mut labels: Vec<&str> = Vec::new();
    let mut at = 0;
    while let Some(open) = sentence[at..].find('[').map(|i| at + i) {
        let wiki = sentence[open..].starts_with("[[");
        let inner_start = open + if wiki { 2 } else { 1 };
        let close_pat = if wiki { "]]" } else { "]" };
        let Some(close) = sentence[inner_start..].find(close_pat).map(|i| inner_start + i) else { break };
        let inner = &sentence[inner_start..close];
        let is_link = wiki || sentence[close + 1..].starts_with('(') || sentence[close + 1..].starts_with('[');
        if is_link {
            labels.push(if wiki { inner.rsplit('|').next().unwrap_or(inner) } else { inner });
        }
        at = close + close_pat.len();
    }
    labels.iter().any(|l| {
        let lt: Vec<String> = norm_tokens(l).into_iter().filter(|t| !super::GLUE.contains(&t.as_str())).collect();
        lt.len() >= claim_toks.len() && lt.windows(claim_toks.len()).any(|w| w == claim_toks.as_slice())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{check_one, Claim, Eligible, GateConfig, Outcome, ScorerSlot, Support};
    use std::collections::HashMap;

    /// The gate's outcome for a claim quoting `quotes` of `note`: "verified" or the reader's why.
    fn why(note: &str, claim: &str, quotes: &[&str]) -> String {
        let el: Eligible = HashMap::from([("v".to_owned(), note)]);
        let c = Claim {
            text: claim.into(),
            support: quotes.iter().map(|q| Support { version_id: "v".into(), quoted_span: (*q).into() }).collect(),
        };
        match check_one(c, &el, &mut ScorerSlot::None, &GateConfig::default()) {
            Outcome::Verified(v) => format!("verified in {}", v.spans.iter().map(|s| s.context.clone()).collect::<Vec<_>>().join(" | ")),
            Outcome::EvidenceOnly(e) => {
                format!("{} in {}", e.why, e.spans.iter().map(|s| s.context.clone()).collect::<Vec<_>>().join(" | "))
            }
            Outcome::Dropped(d) => format!("dropped: {}", d.reason),
        }
    }

    #[test]
    fn each_status_says_why_in_the_readers_words_and_a_claim_may_carry_it() {
        let rfc = "---\nstatus: rejected\n---\n# RFC 12: Kafka event bus\n\n## Context\nOur broker is one RabbitMQ node.\n\n## Decision\nWe adopt Kafka for the event bus.\n";
        let cases: &[(&str, &str, &[&str], &str)] = &[
            (rfc, "We adopt Kafka for the event bus", &["We adopt Kafka for the event bus."], "the note's status is “rejected” in RFC 12: Kafka event bus › Decision › the note's status is “rejected”"),
            (rfc, "Our broker is one RabbitMQ node", &["Our broker is one RabbitMQ node."], "verified in RFC 12: Kafka event bus › Context"),
            (rfc, "rejected: we adopt Kafka for the event bus", &["rejected", "We adopt Kafka for the event bus."], "verified in  | RFC 12: Kafka event bus › Decision › the note's status is “rejected”"),
            (
                "# Release sync\n\nAttendees: Ana, Ben\n\n**Ana:** we should ship on Friday.\n**Decision:** ship on Tuesday.\n",
                "We should ship on Friday",
                &["we should ship on Friday."],
                "Ana, in the meeting in Release sync › Ana: › Ana, in the meeting",
            ),
            (
                "# Release sync\n\nAttendees: Ana, Ben\n\n**Ana:** we should ship on Friday.\n**Decision:** ship on Tuesday.\n",
                "Ana: we should ship on Friday",
                &["Ana", "we should ship on Friday."],
                "verified in Release sync | Release sync › Ana: › Ana, in the meeting",
            ),
            (
                "# Flat\n\nRent: €1,150 per month.\n\nDeposit: three months.\n\n**Update 2026-03:** landlord raised rent to €1,240 per month.\n",
                "Rent: €1,150 per month",
                &["Rent: €1,150 per month."],
                "corrected on 2026-03 later in the note: “Update 2026-03: landlord raised rent to €1,240 per month.” in Flat › corrected on 2026-03 later in the note: “Update 2026-03: landlord raised rent to €1,240 per month.”",
            ),
            ("# Kit\n\nLegend: ‡ = not verified\n\n- The stove weighs 80 g ‡\n", "The stove weighs 80 g", &["The stove weighs 80 g"], "marked ‡, which the note's legend defines as “not verified” in Kit"),
            ("# NAS\n\nBecause nobody needs backups /s\n\nRAID is a backup /s\n", "RAID is a backup", &["RAID is a backup"], "marked as irony in NAS"),
            ("# Cache\n\nSee [why caching always helps](x.md) for the debate.\n", "Caching always helps", &["why caching always helps"], "a link's label, not a statement in Cache"),
        ];
        let mut wrong = Vec::new();
        for (note, claim, quotes, want) in cases {
            let got = why(note, claim, quotes);
            if got != *want {
                wrong.push(format!("{claim:?}\n  want {want}\n   got {got}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn random_notes_never_panic_and_keep_ranges_valid() {
        let alphabet: Vec<&str> = vec![
            "---\n",
            "status: ",
            "rejected",
            "draft",
            "tags: [myth]",
            "# ",
            "## ",
            "\n",
            "\n\n",
            " ",
            "> ",
            "> [!WARNING] ",
            "Outdated",
            "- ",
            "  - ",
            "1. ",
            "[x] ",
            "[ ] ",
            "**",
            "*",
            "_",
            "==",
            "Ana:",
            "**Bob:** ",
            "Me: ",
            "Attendees: Ana, Bob",
            "Update 2026-03:",
            "EDIT:",
            "2026-01-02: ",
            "Mon: ",
            "Legend:",
            "‡",
            " = ",
            "not verified",
            "✅",
            "❌",
            "⚠️",
            "/s",
            "lol",
            "🙄",
            "[label](x.md)",
            "[[a|b]]",
            "|",
            "| Status |",
            "|---|",
            "rejected |",
            "Status: rejected",
            "Staging only.",
            "All prices below are for 2023.",
            "(All figures above are for X.)",
            "H1.",
            "Hypothesis:",
            "rent",
            "€1,150",
            "per month",
            "raised",
            "reverted",
            "turned out",
            "is",
            "the",
            "Rent: ",
            "1:5:5",
            "12",
            "ml",
            "μ",
            "µ",
            "e\u{301}",
            "\u{a0}",
            "\u{200b}",
            "１５",
            "ﬁ",
            "’",
            "“",
            "а",
            "10²",
            ".",
            ",",
            ":",
            "?",
            "(no)",
            "日本",
            "\r\n",
            "[^1]",
            "\n[^1]: Only on weekends.",
            "<!-- x -->",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut below = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let words = ContextWords::built_in();
        for _ in 0..1500 {
            let n = below(60);
            let mut text = String::new();
            for _ in 0..n {
                text.push_str(alphabet[below(alphabet.len())]);
            }
            let st = Structure::parse(&text);
            let reading = st.reading(&words);
            for g in &reading.governs {
                assert!(g.range.start <= g.range.end && g.range.end <= text.len(), "{g:?} in {text:?}");
                assert!(text.is_char_boundary(g.range.start) && text.is_char_boundary(g.range.end));
                if let Some(c) = &g.carrier {
                    assert!(c.end <= text.len() && text.is_char_boundary(c.start) && text.is_char_boundary(c.end), "{c:?} in {text:?}");
                }
            }
            for _ in 0..4 {
                let a = crate::text::floor_char_boundary(&text, below(text.len() + 1));
                let b = crate::text::floor_char_boundary(&text, (a + below(40)).min(text.len())).max(a);
                let ctx = st.context(a..b);
                let _ = reading.blockers(&st, &ctx, &(a..b), &text[a..b]);
                let _ = reading.describe(&(a..b));
                let _ = super::super::context::compose(&text[a..b], &st, &[vec![a..b], vec![0..a]], &words);
            }
        }
    }
}
