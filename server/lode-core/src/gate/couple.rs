//! Extractive coupling (gate step 2): whether one quote carries a claim *as the source says it*.
//!
//! The claim's content tokens must appear, in order and contiguous (only glue may differ), inside
//! the quote and inside one sentence of the source. Then the sentence around the quote is read:
//! negation, modality and tense in the same clause, conditions, attribution, hedges and questions
//! anywhere in the sentence, contrast words just before the run, comparators and units around a
//! number at the run's edge, and a retraction right after, all block coupling unless the claim
//! states them too. Every check here can only remove a coupling, never add one.

use std::ops::Range;

use super::lexicon::*;
use super::markup;

/// Longest quote accepted as evidence, in bytes: a quote is a sentence or two, not a note.
pub const MAX_QUOTE_BYTES: usize = 1200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Word,
    Number,
    Symbol,
}

/// A token with its byte range in the text it came from. `norm` is case-folded, without
/// apostrophes (so `doesn't`, `doesʼnt` and `doesnt` are one word) and with minus signs as `-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tok {
    pub norm: String,
    pub range: Range<usize>,
    pub kind: Kind,
}

fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '\u{2019}' | '\u{02BC}' | '\u{00B4}' | '\u{2018}' | '\u{FF07}' | '\u{2032}')
}

/// An ASCII or a full-width digit (`１５:００` reads as `15:00`).
fn digit(c: char) -> bool {
    c.is_ascii_digit() || ('\u{FF10}'..='\u{FF19}').contains(&c)
}

fn ascii_symbol(c: char, next: Option<char>) -> Option<char> {
    match (c, next?) {
        ('>', '=') => Some('≥'),
        ('<', '=') => Some('≤'),
        ('!', '=') => Some('≠'),
        ('-', '>') => Some('→'),
        _ => None,
    }
}

fn is_sign(c: char) -> bool {
    matches!(c, '-' | '\u{2212}' | '+' | '\u{2013}')
}

fn is_symbol(c: char) -> bool {
    matches!(
        c,
        '%' | '$'
            | '€'
            | '£'
            | '¥'
            | '<'
            | '>'
            | '≤'
            | '≥'
            | '~'
            | '≈'
            | '±'
            | '='
            | '×'
            | '‰'
            | '+'
            | '≠'
            | '≡'
            | '≢'
            | '≮'
            | '≯'
            | '≰'
            | '≱'
            | '→'
            | '←'
            | '↑'
            | '↓'
            | '↔'
            | '⇒'
            | '⇐'
            | '⇔'
            | '⟶'
            | '⟵'
    )
}

/// Tokens of `s`: words and numbers (hyphenated compounds, contractions, decimals, signed numbers
/// and dates stay one token) and unit or comparison symbols. Tokens inside `skip` are left out.
pub fn lex(s: &str, skip: &[Range<usize>]) -> Vec<Tok> {
    let cs: Vec<(usize, char)> = s.char_indices().collect();
    let end_of = |j: usize| cs.get(j).map_or(s.len(), |&(b, _)| b);
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let (b, c) = cs[i];
        let prev_alnum = i > 0 && cs[i - 1].1.is_alphanumeric();
        let signed = is_sign(c) && !prev_alnum && cs.get(i + 1).is_some_and(|&(_, n)| n.is_ascii_digit());
        if crate::text::is_cjk(c) {
            // Scripts written without spaces: every character is a token.
            out.push(Tok { norm: c.to_string(), range: b..end_of(i + 1), kind: Kind::Word });
            i += 1;
        } else if c.is_alphanumeric() || signed {
            let mut j = i + 1;
            loop {
                // Combining marks and invisible code points are part of the word they sit in.
                let inside = |c: char| {
                    (c.is_alphanumeric() && !crate::text::is_cjk(c))
                        || unicode_normalization::char::is_combining_mark(c)
                        || crate::text::is_invisible(c)
                };
                if j < cs.len() && inside(cs[j].1) {
                    j += 1;
                    continue;
                }
                // Invisible code points do not part a compound: "Re\u{200B}-titre" is "Re-titre".
                let back = (i..j).rev().find(|&k| !crate::text::is_invisible(cs[k].1)).unwrap_or(j - 1);
                if j + 1 < cs.len() && cs[back].1.is_alphanumeric() && cs[j + 1].1.is_alphanumeric() {
                    let (p, jc, n) = (cs[back].1, cs[j].1, cs[j + 1].1);
                    let joins = match jc {
                        '-' | '_' | '\u{2011}' | '.' => true,
                        ',' | ':' => digit(p) && digit(n),
                        c if is_apostrophe(c) => p.is_alphabetic() && n.is_alphabetic(),
                        _ => false,
                    };
                    if joins {
                        j += 2;
                        continue;
                    }
                }
                break;
            }
            let range = b..end_of(j);
            let raw = &s[range.clone()];
            // Compared as a reader sees it: `µs` and `μs`, `ﬁle` and `file`, `１２` and `12`.
            // (ASCII, the common case, needs no folding and no copy.)
            let folded;
            let raw = if raw.is_ascii() {
                raw
            } else {
                folded = crate::text::fold_for_reader(raw);
                folded.as_str()
            };
            let norm: String = raw
                .chars()
                .filter(|&c| !is_apostrophe(c))
                .map(|c| if c == '\u{2212}' || c == '\u{2013}' { '-' } else { c })
                .flat_map(char::to_lowercase)
                .collect();
            let first = norm.trim_start_matches(['-', '+']).chars().next();
            let kind = if first.is_some_and(|f| f.is_ascii_digit()) { Kind::Number } else { Kind::Word };
            out.push(Tok { norm, range, kind });
            i = j;
        } else if is_sign(c) && !prev_alnum && cs.get(i + 1).is_some_and(|&(_, n)| matches!(n, '$' | '€' | '£' | '¥')) {
            // "−£240": the sign of an amount is content too.
            out.push(Tok { norm: "-".into(), range: b..b + c.len_utf8(), kind: Kind::Symbol });
            i += 1;
        } else if let Some(sym) = ascii_symbol(c, cs.get(i + 1).map(|&(_, n)| n)) {
            // ">=", "<=", "!=", "->" are how a keyboard writes "≥", "≤", "≠", "→".
            out.push(Tok { norm: sym.to_string(), range: b..end_of(i + 2), kind: Kind::Symbol });
            i += 2;
        } else if !c.is_alphanumeric() && cs.get(i + 1).is_some_and(|&(_, n)| unicode_normalization::char::is_combining_mark(n)) {
            // A mark over a symbol makes another one: "=" and U+0338 read as "≠".
            let mut j = i + 1;
            while j < cs.len() && unicode_normalization::char::is_combining_mark(cs[j].1) {
                j += 1;
            }
            let shown = crate::text::fold_for_reader(&s[b..end_of(j)]);
            out.push(Tok { norm: shown, range: b..end_of(j), kind: Kind::Symbol });
            i = j;
        } else if is_symbol(c) && !blockquote_marker(s, b, c) {
            out.push(Tok { norm: c.to_string(), range: b..b + c.len_utf8(), kind: Kind::Symbol });
            i += 1;
        } else {
            i += 1;
        }
    }
    if !skip.is_empty() {
        out.retain(|t| !skip.iter().any(|r| r.start <= t.range.start && t.range.end <= r.end));
    }
    out
}

/// A `>` that only marks a block quote (first non-space character of its line, or following
/// other such markers).
fn blockquote_marker(s: &str, at: usize, c: char) -> bool {
    c == '>' && s[..at].rsplit('\n').next().is_some_and(|before| before.chars().all(|c| c == '>' || c == ' ' || c == '\t'))
}

fn is_glue(t: &Tok) -> bool {
    t.kind == Kind::Word && GLUE.contains(&t.norm.as_str())
}

/// Whether the text between two tokens separates clauses: `, ; : | — –`, a spaced hyphen.
fn clause_gap(gap: &str) -> bool {
    gap.contains([',', ';', ':', '|', '—', '–']) || gap.contains(" - ") || gap.contains("--")
}

/// Sentence ranges of `body[window]`: a blank line, a list item, heading, table row or fence
/// line, and `. ! ?` before whitespace (not after an abbreviation, an initial or a list number)
/// end a sentence. Hard-wrapped lines stay one sentence.
pub fn sentences(body: &str, window: Range<usize>) -> Vec<Range<usize>> {
    let mut cuts: Vec<usize> = vec![window.start];
    let mut pos = window.start;
    // Whether the line before ended a statement (or there was none): a field line after "The
    // contractor said that" continues that sentence.
    let mut after_stop = true;
    let mut prev_field = false;
    for line in body[window.clone()].split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let ended = after_stop;
        let trimmed_end = line.trim_end();
        after_stop = trimmed_end.is_empty()
            || trimmed_end.ends_with(['.', '!', '?', ':', ';', '*', '_', '|', ')', '"', '”'])
            || trimmed_end.trim_start().starts_with(['#', '-', '*', '+', '>']);
        let content = line.trim_start_matches([' ', '\t', '>']);
        let lead = line.len() - content.len();
        let t = content.trim_end();
        // A field line ("Cons: needs bigger radiators") is its own sentence, as a reader reads it.
        let field = (ended || prev_field) && {
            let u = t.trim_start_matches(['*', '_']);
            u.find(':').is_some_and(|c| {
                let label = u[..c].trim_end_matches(['*', '_']);
                c > 0
                    && u[c + 1..].starts_with([' ', '*', '_'])
                    && label.chars().next().is_some_and(char::is_uppercase)
                    && label.split_whitespace().count() <= 3
                    && label.chars().all(|ch| ch.is_alphanumeric() || matches!(ch, ' ' | '-' | '(' | ')' | '.' | '\''))
            })
        };
        prev_field = field;
        let marker = field
            || t.is_empty()
            || t.starts_with('#')
            || t.starts_with('|')
            || t.starts_with("```")
            || t.starts_with("~~~")
            || t.starts_with("<!--")
            || list_marker(t);
        if marker {
            cuts.push(start);
        }
        // An irony mark ends what it marks: "… nobody needs backups /s".
        let ironic = t.ends_with(" /s") || t.ends_with(" /j") || t == "/s";
        if t.is_empty() || t.starts_with('#') || t.starts_with('|') || t.starts_with("```") || t.starts_with("~~~") || ironic {
            cuts.push(pos);
        }
        // Sentence ends inside the line.
        let text_start = start + lead;
        let chars: Vec<(usize, char)> = content.char_indices().collect();
        for (k, &(i, c)) in chars.iter().enumerate() {
            let stop = match c {
                '.' | '!' | '?' | '…' => {
                    // Closing quotes and brackets stay with the sentence they close.
                    let mut m = k + 1;
                    while chars.get(m).is_some_and(|&(_, n)| matches!(n, '"' | '\'' | '’' | '”' | ')' | ']' | '*' | '_')) {
                        m += 1;
                    }
                    // A footnote reference right after the stop belongs to the sentence.
                    if chars.get(m).is_some_and(|&(_, n)| n == '[') && chars.get(m + 1).is_some_and(|&(_, n)| n == '^') {
                        if let Some(close) = chars[m..].iter().position(|&(_, n)| n == ']' || n.is_whitespace()) {
                            if chars[m + close].1 == ']' {
                                m += close + 1;
                            }
                        }
                    }
                    // An inline note right after the stop (`.^[Source: …]`) is a sentence of its own.
                    let note_after = chars.get(m).is_some_and(|&(_, n)| n == '^') && chars.get(m + 1).is_some_and(|&(_, n)| n == '[');
                    let after_ok = chars.get(m).is_none_or(|&(_, n)| n.is_whitespace()) || note_after;
                    after_ok && !(c == '.' && crate::chunk::not_a_stop(content, i, ABBREVIATIONS))
                }
                '。' | '！' | '？' => true,
                _ => false,
            };
            if stop {
                let mut m = k + 1;
                while chars.get(m).is_some_and(|&(_, n)| !n.is_whitespace() && n != '^') {
                    m += 1;
                }
                cuts.push(text_start + chars.get(m).map_or(content.len(), |&(b, _)| b));
            }
        }
    }
    cuts.push(window.end);
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    for w in cuts.windows(2) {
        let s = &body[w[0]..w[1]];
        let lead = s.len() - s.trim_start().len();
        let trail = s.len() - s.trim_end().len();
        if w[0] + lead < w[1] - trail {
            out.push(w[0] + lead..w[1] - trail);
        }
    }
    out
}

fn list_marker(t: &str) -> bool {
    if ["- ", "* ", "+ "].iter().any(|m| t.starts_with(m)) || matches!(t, "-" | "*" | "+") {
        return true;
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && digits <= 9 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") "))
}

/// Abbreviations whose period does not end a sentence (beyond those the chunker knows).
const ABBREVIATIONS: &[&str] = &["al", "approx", "cf", "dr", "e.g", "eg", "etc", "fig", "i.e", "ie", "mr", "mrs", "ms", "no", "vs", "st"];

/// The part of `body` a quote's context is read from: the paragraph(s) around `quote`, bounded.
fn context_window(body: &str, quote: &Range<usize>) -> Range<usize> {
    const REACH: usize = 4096;
    let lo = crate::text::floor_char_boundary(body, quote.start.saturating_sub(REACH));
    let hi = crate::text::floor_char_boundary(body, (quote.end + REACH).min(body.len()));
    // Start on a line boundary when possible, so line-based markers are seen.
    let start = match body[lo..quote.start].rfind("\n\n") {
        Some(i) => lo + i + 2,
        None if lo == 0 => 0,
        None => body[lo..quote.start].find('\n').map_or(lo, |i| lo + i + 1),
    };
    // End after the paragraph that follows, so a correction there ("EDIT: wrong, …") is seen.
    let para_end = body[quote.end..hi].find("\n\n").map_or(hi, |i| quote.end + i);
    let end =
        body[para_end..hi].trim_start_matches('\n').find("\n\n").map_or(hi, |i| hi - body[para_end..hi].trim_start_matches('\n').len() + i);
    start..end
}

/// `text` with the parts a reader does not read as words (see [`markup::unread`]) blanked to
/// spaces, byte for byte, so offsets are unchanged.
pub fn readable(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for r in markup::unread(text) {
        bytes[r].fill(b' ');
    }
    // Comments and struck-through text are not read either: a sentence reads on around them.
    for (r, kind) in markup::not_evidence(text) {
        if matches!(kind, markup::NotEvidence::HtmlComment | markup::NotEvidence::Strikethrough) {
            bytes[r].fill(b' ');
        }
    }
    // Unread ranges start and end on ASCII delimiters or char boundaries, and every byte of a
    // blanked char is blanked, so this stays UTF-8; fall back to the text if it ever did not.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

/// The sentence range(s) around `quote`, extended over a retraction that follows: what an
/// "evidence only" display shows so a quote is never read out of its sentence.
pub fn evidence_context(body: &str, quote: &Range<usize>) -> Range<usize> {
    let window = context_window(body, quote);
    let sents = sentences(body, window);
    let touching: Vec<&Range<usize>> = sents.iter().filter(|s| s.start < quote.end && quote.start < s.end).collect();
    let (Some(first), Some(last)) = (touching.first(), touching.last()) else { return quote.clone() };
    let mut end = last.end.max(quote.end);
    let idx = sents.iter().position(|s| s == *last).unwrap_or(0);
    if let Some(next) = sents.get(idx + 1) {
        if retracts(body, last, next) {
            end = next.end;
        }
    }
    let start = first.start.min(quote.start);
    skip_markers(body, start, quote.start)..end
}

/// `start` moved past block markers a reader does not read as words (`- `, `1. `, `[ ] `, `> `,
/// `#`), never past `limit`.
fn skip_markers(body: &str, start: usize, limit: usize) -> usize {
    let mut at = start;
    loop {
        let rest = &body[at..limit.max(at)];
        let t = rest.trim_start_matches([' ', '\t', '>']);
        let mut next = at + (rest.len() - t.len());
        if let Some(m) = ["- [ ] ", "- [x] ", "- [X] ", "* [ ] ", "* [x] ", "- ", "* ", "+ "].iter().find(|m| t.starts_with(**m)) {
            next += m.len();
        } else if t.starts_with('#') {
            next += t.len() - t.trim_start_matches('#').len();
        } else {
            let digits = t.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") ")) {
                next += digits + 2;
            }
        }
        let next = next.min(limit);
        if next == at {
            return at;
        }
        at = next;
    }
}

/// Why a quote is not a well-formed piece of evidence, if it is not: it cuts a word or number,
/// or is too long.
pub fn malformed_quote(body: &str, quote: &Range<usize>) -> Option<String> {
    if quote.len() > MAX_QUOTE_BYTES {
        return Some(format!("the quote is {} bytes long; a quote is at most {MAX_QUOTE_BYTES} bytes, not a whole note", quote.len()));
    }
    let line_start = body[..quote.start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = body[quote.end..].find('\n').map_or(body.len(), |i| quote.end + i);
    let line = &body[line_start..line_end];
    for t in lex(line, &[]) {
        let r = t.range.start + line_start..t.range.end + line_start;
        let cuts_start = r.start < quote.start && quote.start < r.end;
        let cuts_end = r.start < quote.end && quote.end < r.end;
        if cuts_start || cuts_end {
            let at = if cuts_start { "starts" } else { "ends" };
            return Some(format!("the quote {at} inside the word {:?} of the source", &body[r]));
        }
    }
    None
}

/// Coupling of `claim` with the quote at `quote` in `body`: `Ok` when it couples, else why not.
pub fn couple(claim: &str, body: &str, quote: &Range<usize>) -> Result<(), String> {
    let claim = &readable(claim);
    let claim_toks: Vec<Tok> = lex(claim, &[]).into_iter().filter(|t| !is_glue(t)).collect();
    if claim_toks.len() < 2 {
        return Err("the claim has too few words to be carried by a quote".into());
    }
    // Punctuation between consecutive claim tokens: a run may cross a clause boundary of the
    // source only where the claim has one too.
    let claim_gaps: Vec<bool> = claim_toks.windows(2).map(|w| clause_gap(&claim[w[0].range.end..w[1].range.start])).collect();
    let window = context_window(body, quote);
    // Everything below reads the window with link destinations, URLs and tags blanked, in
    // offsets relative to the window (coupling reports no offsets).
    let blanked = readable(&body[window.clone()]);
    let body = blanked.as_str();
    let quote = &(quote.start - window.start..quote.end - window.start);
    let sents = sentences(body, 0..body.len());
    let mut why = "the claim's words are not in one sentence of the quote, in the same order".to_owned();
    for (si, sent) in sents.iter().enumerate() {
        if !(sent.start < quote.end && quote.start < sent.end) {
            continue;
        }
        let text = &body[sent.clone()];
        let toks: Vec<Tok> = lex(text, &[])
            .into_iter()
            .map(|mut t| {
                t.range = t.range.start + sent.start..t.range.end + sent.start;
                t
            })
            .collect();
        let content: Vec<usize> = (0..toks.len()).filter(|&i| !is_glue(&toks[i])).collect();
        let inside = |i: usize| quote.start <= toks[i].range.start && toks[i].range.end <= quote.end;
        let n = claim_toks.len();
        for s in 0..content.len().saturating_sub(n - 1) {
            let run = &content[s..s + n];
            if !run.iter().zip(&claim_toks).all(|(&i, c)| toks[i].norm == c.norm && inside(i)) {
                continue;
            }
            let crosses = run
                .windows(2)
                .zip(&claim_gaps)
                .any(|(w, &claim_gap)| !claim_gap && clause_gap(&body[toks[w[0]].range.end..toks[w[1]].range.start]));
            if crosses {
                why = "the claim joins words the source keeps in separate clauses".into();
                continue;
            }
            let next = sents.get(si + 1);
            match scope(body, sent, &toks, run[0]..run[n - 1] + 1, next) {
                Ok(()) => return Ok(()),
                Err(e) => why = e,
            }
        }
    }
    Err(why)
}

/// Whether the text between two tokens ends a *part* of a sentence: a semicolon, colon or dash,
/// or a comma before a coordinator ("…, and if it crashes"). Conditions, attribution and hedges
/// reach to the end of their part, not across it.
fn part_gap(gap: &str, next: &Tok) -> bool {
    let strong = gap.contains([';', ':', '—', '–']) || gap.contains(" - ") || gap.contains("--");
    let coordinated = next.kind == Kind::Word
        && (PART_OPENERS.contains(&next.norm.as_str()) && gap.contains(',') || STRONG_COORDINATORS.contains(&next.norm.as_str()));
    strong || coordinated
}

/// Reads the sentence around a matched run (token indices `run` of `toks`).
fn scope(body: &str, sent: &Range<usize>, toks: &[Tok], run: Range<usize>, next: Option<&Range<usize>>) -> Result<(), String> {
    let text = body[sent.clone()].trim_end_matches(['"', '\'', ')', ']', '*', '_', '”', '’', ' ']);
    // As a reader sees it: "﹖", "？" and "⁇" ask too; so does a line opened by an auxiliary
    // and left without a full stop ("- is parking included in the rent").
    let opened = body[sent.clone()].trim_start_matches(['-', '*', '+', ' ', '\t']);
    let first_word = opened.split_whitespace().next().unwrap_or("").to_lowercase();
    let bare_question = matches!(
        first_word.as_str(),
        "is" | "are" | "was" | "were" | "do" | "does" | "did" | "can" | "could" | "will" | "would" | "should" | "has" | "have" | "shall"
    ) && !text.trim_end().ends_with(['.', '!', ':', ';'])
        && opened.split_whitespace().nth(1).is_some_and(|w| !matches!(w.to_lowercase().as_str(), "not" | "also"));
    let asks = crate::text::fold_for_reader(text).trim_end().ends_with('?') || bare_question;
    if text.ends_with('?') || text.ends_with('？') || asks {
        return Err("the source sentence is a question, not a statement".into());
    }
    // Clause and part index of every token: punctuation boundaries and coordinators open a new
    // clause; strong boundaries open a new part.
    let mut clause = vec![0usize; toks.len()];
    let mut part = vec![0usize; toks.len()];
    let mut part_start = vec![true; toks.len()];
    for i in 1..toks.len() {
        let gap = &body[toks[i - 1].range.end..toks[i].range.start];
        let opens = clause_gap(gap) || (toks[i].kind == Kind::Word && COORDINATORS.contains(&toks[i].norm.as_str()));
        clause[i] = clause[i - 1] + usize::from(opens);
        let new_part = part_gap(gap, &toks[i]);
        part[i] = part[i - 1] + usize::from(new_part);
        part_start[i] = new_part;
    }
    let (first, last) = (run.start, run.end - 1);
    let in_clause = |i: usize| clause[i] >= clause[first] && clause[i] <= clause[last];
    let in_part = |i: usize| part[i] >= part[first] && part[i] <= part[last];
    for (i, t) in toks.iter().enumerate() {
        if run.contains(&i) || t.kind != Kind::Word {
            continue;
        }
        let w = t.norm.as_str();
        // "Wrong, …" / "No, …" opening a part answers something said before, not this part.
        let interjection = part_start[i]
            && (FALSITY.contains(&w) || is_negation(w) || w == "actually")
            && toks.get(i + 1).is_some_and(|n| body[t.range.end..n.range.start].contains(','));
        if interjection {
            continue;
        }
        // "that's wrong, X" / "this is false, X": a verdict on what came before, then X.
        let verdict_before = FALSITY.contains(&w) && i < run.start && {
            let opener = (0..i).rev().take(3).find(|&k| part_start[k]);
            opener.is_some_and(|k| matches!(toks[k].norm.as_str(), "thats" | "that" | "this"))
                && toks.get(i + 1).is_some_and(|n| body[t.range.end..n.range.start].contains(','))
        };
        if verdict_before {
            continue;
        }
        // A cue that opens a later clause of its own binds to that clause: "X, likely
        // facilitating Y", "X, possibly reflecting Y", "X, probably because Y", "X, even when Y".
        if i > last && clause[i] != clause[last] && binds_to_own_clause(toks, &clause, i) {
            continue;
        }
        // "per" is attribution before a source ("per the vendor", "per Bob"), a rate before a
        // unit or number ("12 per 100,000", "per day").
        if w == "per" && !attribution_per(body, toks, i) {
            continue;
        }
        let bigram = |a: &str, b: &str| w == a && toks.get(i + 1).is_some_and(|n| n.norm == b);
        // "a program provided a modest improvement": the verb, not "provided that".
        const OBJECTS: &[&str] = &[
            "a",
            "an",
            "access",
            "evidence",
            "support",
            "data",
            "information",
            "insight",
            "insights",
            "additional",
            "further",
            "new",
            "significant",
            "modest",
            "no",
            "more",
            "some",
        ];
        if matches!(w, "provided" | "providing") && !part_start[i] && toks.get(i + 1).is_some_and(|n| OBJECTS.contains(&n.norm.as_str())) {
            continue;
        }
        // "associated with premature aging": an adjective of a later clause's noun, not a verdict.
        let adjectival = matches!(w, "premature" | "false" | "wrong" | "incorrect" | "inaccurate" | "outdated" | "obsolete" | "mistaken")
            && !(i > 0 && matches!(toks[i - 1].norm.as_str(), "a" | "an" | "the" | "this" | "that" | "is" | "was" | "are" | "were"))
            && i > last
            && clause[i] != clause[last]
            && toks.get(i + 1).is_some_and(|n| n.kind == Kind::Word && clause[i + 1] == clause[i])
            && !(i.saturating_sub(2)..i).any(|k| {
                matches!(toks[k].norm.as_str(), "is" | "was" | "be" | "been" | "are" | "were" | "that" | "this" | "it" | "thats" | "its")
            });
        if adjectival {
            continue;
        }
        if in_part(i) {
            if SENTENCE_MARKERS.contains(&w) || FALSITY.contains(&w) && w != "thought" {
                return Err(format!("the source says {w:?} around the quote, which the claim leaves out"));
            }
            if bigram("in", "case")
                || bigram("so", "called")
                || bigram("what", "if")
                || bigram("as", "long")
                || bigram("in", "the") && toks.get(i + 2).is_some_and(|n| n.norm == "event")
            {
                return Err(format!("the source says {w:?} {:?} around the quote, which the claim leaves out", toks[i + 1].norm));
            }
        }
        if w == "thought" {
            return Err("the source says \"thought\" around the quote, which the claim leaves out".into());
        }
        if in_clause(i) {
            if is_negation(w) {
                return Err(format!("the quoted clause is negated by {w:?} in the source"));
            }
            if CLAUSE_CUES.contains(&w) || bigram("used", "to") {
                return Err(format!("the quoted clause says {w:?} in the source, which the claim leaves out"));
            }
        }
    }
    // Subject-auxiliary inversion opening the sentence: "Should the migration fail, …",
    // "Had we known, …", "Were it cached, …" — a condition (or a question), not an assertion.
    let label = toks.get(1).is_some_and(|n| body[toks[0].range.end..n.range.start].contains(':'));
    if first > 0 && toks[0].kind == Kind::Word && INVERTED_OPENERS.contains(&toks[0].norm.as_str()) && !label {
        return Err(format!("the source sentence opens with {:?}: a condition, not an assertion", toks[0].norm));
    }
    // Reported speech: "… concluded that X", "… is a myth that X".
    if first >= 2 && toks[first - 1].norm == "that" && toks[first - 2].kind == Kind::Word && clause[first - 1] == clause[first] {
        return Err(format!("the quote is what the source reports after \"{} that\", not what it asserts", toks[first - 2].norm));
    }
    // Contrast just before the run, in its clause: "instead of B", "rather than B", "not B".
    for i in first.saturating_sub(3)..first {
        let w = toks[i].norm.as_str();
        if clause[i] == clause[first] && (CONTRAST.contains(&w) || is_negation(w)) {
            return Err(format!("the quote follows {w:?}: the source contrasts it, not asserts it"));
        }
    }
    // "everything but X", "all except X": the run is the exception.
    for i in first.saturating_sub(3)..first {
        if toks[i].norm == "but" && i > 0 && UNIVERSALS.contains(&toks[i - 1].norm.as_str()) {
            return Err(format!("the quote follows \"{} but\": the source excepts it", toks[i - 1].norm));
        }
    }
    if restricting_clause(toks, &clause, last) {
        return Err("a later clause of the sentence restricts the quote, which the claim leaves out".into());
    }
    // "open daily except Mondays": an exception right after the run.
    if let Some(n) = toks.get(last + 1) {
        if EXCEPTIONS.contains(&n.norm.as_str()) {
            return Err(format!("the source goes on {:?} right after the quote, which the claim leaves out", n.norm));
        }
    }
    // A number at the run's edges keeps its comparator, sign, currency and unit.
    if toks[first].kind == Kind::Number && first > 0 {
        let p = &toks[first - 1];
        let range_before = matches!(p.norm.as_str(), "and" | "to" | "or") && first >= 2 && toks[first - 2].kind == Kind::Number;
        if p.kind != Kind::Word || COMPARATORS.contains(&p.norm.as_str()) || range_before {
            return Err(format!("the number {:?} is qualified by {:?} in the source", toks[first].norm, p.norm));
        }
    }
    // "Bottle when gravity hits 1.004 and holds steady for 3 days": a condition the claim cuts.
    if let Some(n) = toks.get(last + 1).filter(|n| matches!(n.norm.as_str(), "and" | "or")) {
        let opened = (first..=last)
            .rev()
            .take_while(|&k| clause[k] == clause[last])
            .any(|k| matches!(toks[k].norm.as_str(), "when" | "if" | "once" | "until" | "unless" | "after" | "before" | "whenever"));
        if opened {
            return Err(format!("the condition goes on ({:?} …) past the quote, which the claim leaves out", n.norm));
        }
    }
    // "Kids liked it more than the chickpea curry": a comparison the claim leaves out.
    if let (Some(a), Some(b)) = (toks.get(last + 1), toks.get(last + 2)) {
        if clause[last + 1] == clause[last] && COMPARATIVES.contains(&a.norm.as_str()) && matches!(b.norm.as_str(), "than" | "as") {
            return Err(format!(
                "the source goes on {:?} right after the quote, which the claim leaves out",
                format!("{} {}", a.norm, b.norm)
            ));
        }
    }
    // "£6 a month more than the Sky deal", "18% lower": a quantity the source compares.
    let quantity_at_end = toks[first..=last].iter().rev().take(4).any(|t| t.kind == Kind::Number);
    if let Some(n) =
        toks.get(last + 1).filter(|n| quantity_at_end && clause[last + 1] == clause[last] && COMPARATIVES.contains(&n.norm.as_str()))
    {
        return Err(format!("the quantity at the end of the quote is compared ({:?}) in the source", n.norm));
    }
    if toks[last].kind == Kind::Number {
        // "back to 3 (the change to 5 in 2.8.0 …)": an aside in brackets, not the number's unit.
        let aside = |n: &Tok| {
            body.get(toks[last].range.end..n.range.start).is_some_and(|g| g.contains('('))
                && matches!(n.norm.as_str(), "the" | "this" | "that" | "which" | "see" | "was" | "i" | "we" | "it")
        };
        if let Some(n) = toks.get(last + 1).filter(|n| clause[last + 1] == clause[last] && !aside(n)) {
            if n.kind != Kind::Word || !AFTER_NUMBER_OK.contains(&n.norm.as_str()) {
                return Err(format!("the number {:?} is followed by {:?} in the source", toks[last].norm, n.norm));
            }
        }
    }
    // A later part of the same sentence that takes it back: "…, but it isn't", "… — that was
    // premature", "…, which is a myth".
    let mut i = last + 1;
    while i < toks.len() {
        let c = clause[i];
        let j = (i..toks.len()).find(|&k| clause[k] != c).unwrap_or(toks.len());
        if clause[i] != clause[last] && (bare_retraction(&toks[i..j]) || anaphoric_falsity(&toks[i..j])) {
            return Err("the source takes the statement back in the same sentence".into());
        }
        i = j;
    }
    // A sibling list item is another entry of the list, not a comment on this one.
    let item_indent = |r: &Range<usize>| {
        let line_start = body[..r.start].rfind('\n').map_or(0, |i| i + 1);
        let line = &body[line_start..];
        let indent = line.len() - line.trim_start_matches([' ', '\t', '>']).len();
        list_marker(line[indent..].trim_end()).then_some(indent)
    };
    // Another item at this level or above (not one nested under this item) is its own entry;
    // a lead-in ("Don't:") introduces what follows it, not a verdict on what came before.
    let own_line = |n: &Range<usize>| {
        body[..n.start].rsplit('\n').next().is_some_and(|before| before.chars().all(|c| c == ' ' || c == '\t' || c == '>'))
    };
    let sibling = next.is_some_and(|n| {
        let (a, b) = (item_indent(sent), item_indent(n));
        own_line(n) && ((a.is_some() && b.is_some() && b <= a) || body[n.clone()].trim_end().trim_end_matches(['*', '_']).ends_with(':'))
    });
    if let Some(next) = next.filter(|_| !sibling) {
        if retracts(body, sent, next) {
            return Err(format!("the next sentence takes it back: {:?}", clip(&body[next.clone()])));
        }
    }
    Ok(())
}

/// Whether the cue at `i` governs only its own, later clause: a hedge before a participle or a
/// reason ("likely facilitating", "possibly reflecting", "probably because"), or a concessive
/// "even when/if/though".
fn binds_to_own_clause(toks: &[Tok], clause: &[usize], i: usize) -> bool {
    let w = toks[i].norm.as_str();
    // "…, or possibly by a cigarette": an alternative to the earlier clause, not its own.
    let clause_start = (0..=i).rev().take_while(|&k| clause[k] == clause[i]).last().unwrap_or(i);
    if toks[clause_start..i].iter().any(|t| matches!(t.norm.as_str(), "or" | "so" | "nor")) || (i > 0 && toks[i - 1].norm == "or") {
        return false;
    }
    let next = toks.get(i + 1).map_or("", |t| t.norm.as_str());
    let prev = if i > 0 { toks[i - 1].norm.as_str() } else { "" };
    const HEDGES: &[&str] = &["likely", "possibly", "probably", "perhaps", "presumably", "potentially", "maybe", "plausibly"];
    let after_next = toks.get(i + 2).map_or("", |t| t.norm.as_str());
    let participle = next.len() > 4 && (next.ends_with("ing") || ((next.ends_with("ed") || next.ends_with("en")) && after_next == "by"));
    let reason = matches!(next, "because" | "due" | "owing" | "through" | "via" | "by" | "from" | "as" | "thanks");
    const TIMES: &[&str] = &[
        "transition",
        "period",
        "time",
        "times",
        "day",
        "days",
        "year",
        "years",
        "point",
        "stage",
        "phase",
        "moment",
        "age",
        "night",
        "week",
        "weeks",
        "month",
        "months",
        "era",
        "maximum",
        "peak",
        "onset",
        "stages",
    ];
    const FREQUENCY: &[&str] = &["often", "usually", "sometimes", "generally", "typically", "mostly", "occasionally", "frequently"];
    let rest_of_clause = (i + 1..toks.len()).take_while(|&k| clause[k] == clause[i]).count();
    (HEDGES.contains(&w) && (participle || reason))
        || (prev == "even" && matches!(w, "when" | "if" | "whenever" | "though" | "once"))
        // "women appear to be at increased risk": a hedge of its own clause's subject.
        || (matches!(w, "appear" | "appears" | "appeared" | "seem" | "seems" | "seemed") && next == "to" && !matches!(prev, "it" | "so" | "this" | "that" | "there"))
        // "the night-day transition, when it reduced …": a relative clause about a time.
        || (w == "when" && TIMES.contains(&prev))
        // "whether expressed as …": either way, the earlier clause holds.
        || (w == "whether" && next.ends_with("ed"))
        // "occurring, stochastically, more often in …": an adverb of its own verb phrase.
        || (FREQUENCY.contains(&w) && rest_of_clause >= 1 && !matches!(next, "the" | "a" | "speaking"))
        // "…, physio says build up slowly": a speaker opening a later clause with a complement of
        // its own ("…, the vendor says." with nothing after it attributes the earlier clause).
        || (matches!(w, "says" | "said" | "recommends" | "recommended" | "advises" | "advised" | "suggests" | "suggested" | "thinks")
            && i >= 1
            && clause_start + 1 >= i
            && clause_start > 0
            && rest_of_clause >= 2
            // "…, Ana said over lunch": a time or place after the verb, not a complement.
            && !matches!(next, "that" | "so" | "it" | "this" | "over" | "at" | "in" | "on" | "during" | "yesterday" | "today" | "later" | "earlier" | "last" | "after" | "before" | "again" | "once" | "when" | "while" | "to" | "privately" | "publicly" | "afterwards"))
}

/// Whether "per" at `i` names a source: followed by a determiner or possessive, or by a
/// capitalised word that is not a unit.
fn attribution_per(body: &str, toks: &[Tok], i: usize) -> bool {
    let Some(n) = toks.get(i + 1) else { return false };
    if n.kind != Kind::Word {
        return false;
    }
    const UNITS: &[&str] = &[
        "day",
        "days",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "hour",
        "hours",
        "minute",
        "minutes",
        "second",
        "seconds",
        "person",
        "persons",
        "people",
        "patient",
        "patients",
        "capita",
        "cent",
        "centum",
        "head",
        "user",
        "users",
        "unit",
        "units",
        "night",
        "nights",
        "mile",
        "miles",
        "km",
        "kg",
        "item",
        "items",
        "visit",
        "visits",
        "dose",
        "doses",
        "session",
        "sessions",
        "serving",
        "servings",
        "annum",
        "share",
        "shares",
        "page",
        "pages",
        "request",
        "requests",
        "household",
        "households",
        "kilogram",
        "litre",
        "liter",
        "gram",
        "meter",
        "metre",
        "mg",
        "ml",
        "kwh",
        "gb",
        "mb",
        "million",
        "thousand",
        "hundred",
        "billion",
        "live",
        "births",
        "admission",
        "admissions",
        "case",
        "cases",
        // "per one standard deviation", "per each": a rate by a number word.
        "one",
        "two",
        "three",
        "ten",
        "each",
        "every",
        "standard",
        "sd",
        "increment",
        "increase",
        "doubling",
        "log",
    ];
    // "per one of the nurses" names a source.
    if toks.get(i + 2).is_some_and(|t| t.norm == "of") {
        return true;
    }
    !(n.kind == Kind::Number || UNITS.contains(&n.norm.as_str()) || n.norm.contains("-years"))
        || body[n.range.clone()].starts_with(|c: char| c.is_uppercase()) && n.kind == Kind::Word && !UNITS.contains(&n.norm.as_str())
}

/// A later clause that restricts the quoted one: "X, in patients who were not on aspirin",
/// "X, at least in a warm kitchen", "X, only on weekdays", "X, among adults over 60".
fn restricting_clause(toks: &[Tok], clause: &[usize], last: usize) -> bool {
    let Some(start) = (last + 1..toks.len()).find(|&k| clause[k] != clause[last]) else { return false };
    let c = clause[start];
    // Only a closing phrase restricts: "in postnatal mice, cooperation …" opens the next clause.
    if toks[start..].iter().zip(&clause[start..]).any(|(_, &k)| k != c) {
        return false;
    }
    let words: Vec<&str> = (start..toks.len()).take_while(|&k| clause[k] == c).map(|k| toks[k].norm.as_str()).collect();
    let w = |k: usize| words.get(k).copied().unwrap_or("");
    const RESTRICTED: &[&str] = &[
        "who",
        "whose",
        "without",
        "not",
        "only",
        "own",
        "trial",
        "trials",
        "study",
        "studies",
        "sample",
        "cohort",
        "experiment",
        "test",
        "tests",
        "patients",
        "children",
        "adults",
        "mice",
        "rats",
        "cells",
        "women",
        "men",
        "people",
        "users",
        "customers",
        "over",
        "under",
        "aged",
        "made",
        "bought",
        "placed",
        "first",
    ];
    match w(0) {
        "only" | "among" | "excluding" | "except" | "unless" | "provided" | "assuming" => true,
        "at" => matches!(w(1), "least" | "most"),
        "but" | "and" => w(1) == "only",
        "in" | "for" | "on" => words.iter().any(|x| RESTRICTED.contains(x)),
        _ => false,
    }
}

/// "that was premature", "which is a myth": an anaphor, then a word calling it false.
fn anaphoric_falsity(toks: &[Tok]) -> bool {
    let mut words = toks.iter().map(|t| t.norm.as_str()).skip_while(|w| COORDINATORS.contains(w));
    // "…, which is a myth", "…, which isn't true since March".
    let denies_truth = toks.iter().any(|t| is_negation(&t.norm))
        && toks.iter().any(|t| matches!(t.norm.as_str(), "true" | "correct" | "case" | "right" | "accurate" | "valid" | "so"));
    words.next().is_some_and(|w| ANAPHORS.contains(&w)) && (toks.iter().any(|t| FALSITY.contains(&t.norm.as_str())) || denies_truth)
}

/// Tokens that consist of a negation or falsity word and filler only: "it is not", "not really".
fn bare_retraction(toks: &[Tok]) -> bool {
    let mut cue = false;
    for t in toks {
        let w = t.norm.as_str();
        if is_negation(w) || FALSITY.contains(&w) {
            cue = true;
        } else if !(GLUE.contains(&w) || RETRACTION_FILLER.contains(&w) || COORDINATORS.contains(&w) || CLAUSE_CUES.contains(&w)) {
            return false;
        }
    }
    cue
}

/// Whether sentence `next` takes back sentence `sent`: it opens with "Correction", "Edit",
/// "Actually", "Scratch that"…; or it opens with an anaphor or "I"/"we" and calls it false; or
/// its first part is a bare retraction ("It is not — …", "Not anymore.").
fn retracts(body: &str, _sent: &Range<usize>, next: &Range<usize>) -> bool {
    let text = &body[next.clone()];
    // "— from the vendor's deck": an attribution line under a quotation.
    if text.starts_with(['—', '―', '–']) || text.starts_with("-- ") {
        return true;
    }
    let toks = lex(text, &[]);
    let Some(first) = toks.first() else { return false };
    let w = |i: usize| toks.get(i).map_or("", |t| t.norm.as_str());
    if RETRACTION_OPENERS.contains(&w(0)) || (w(0) == "never" && w(1) == "mind") {
        return true;
    }
    if toks.len() <= 24 && toks.iter().any(|t| REVERSALS.contains(&t.norm.as_str())) {
        return true;
    }
    let anaphor = ANAPHORS.contains(&first.norm.as_str()) || matches!(first.norm.as_str(), "i" | "we");
    let false_now = toks.iter().any(|t| FALSITY.contains(&t.norm.as_str()) || matches!(t.norm.as_str(), "until" | "anymore" | "longer"));
    if toks.len() <= 24 && anaphor && false_now {
        return true;
    }
    // The first part, up to a strong boundary.
    let end = (1..toks.len()).find(|&i| part_gap(&text[toks[i - 1].range.end..toks[i].range.start], &toks[i])).unwrap_or(toks.len());
    bare_retraction(&toks[..end])
}

fn clip(s: &str) -> String {
    let c: String = s.chars().take(60).collect();
    if c.len() < s.len() {
        format!("{c}…")
    } else {
        c
    }
}
