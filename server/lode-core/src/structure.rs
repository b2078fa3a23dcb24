//! The structural context a reader sees around a sentence of a note: the headings it sits
//! under, the lead-in that introduces its list (and the parent item of a nested item), its task
//! state, the block quote or callout holding it and what the note says right after that quote,
//! the footnotes its sentence references, and its table row and column. Read from the
//! tree-sitter-md block tree of the version's text, so the gate, the extractive synthesizer and
//! every display see the same context for the same bytes.
//!
//! Invariants: every range is a byte range of the text given to [`Structure::parse`]; a text the
//! grammar cannot parse has an empty context everywhere (no context never blocks anything by
//! itself, so the gate's other checks still run); nothing here panics on any input.

use std::ops::Range;

use serde::Serialize;
use tree_sitter::{Node, Tree};

use crate::nav::blocks::parse;

/// A piece of the note's own text that gives context: a heading, a lead-in, a cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unit {
    /// The text as a reader sees it (markers such as `#`, `- `, `[ ]`, `**` removed).
    pub text: String,
    /// Where the text is, markers excluded.
    pub range: Range<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeadInKind {
    /// A paragraph or line ending in `:` right before the list (or paragraph).
    LeadIn,
    /// The item a nested list hangs under.
    ParentItem,
    /// The part of the sentence's own line before a `:` ("Don't: run it on Fridays").
    Label,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeadIn {
    pub kind: LeadInKind,
    pub unit: Unit,
}

/// A list item's checkbox, Obsidian's alternative states included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// `[ ]`
    Open,
    /// `[x]`
    Done,
    /// `[/]`
    InProgress,
    /// `[-]`
    Cancelled,
    /// `[>]` or `[<]`
    Deferred,
    /// `[?]`
    Question,
    /// Any other mark (`[!]`, `[*]`, `[i]`…): a highlight, not a state.
    Marked(char),
}

impl TaskState {
    fn from_mark(c: char) -> TaskState {
        match c {
            ' ' => TaskState::Open,
            'x' | 'X' => TaskState::Done,
            '/' => TaskState::InProgress,
            '-' => TaskState::Cancelled,
            '>' | '<' => TaskState::Deferred,
            '?' => TaskState::Question,
            other => TaskState::Marked(other),
        }
    }

    /// Whether a reader takes the item as something that is so (done, or a plain highlight).
    pub fn asserts(self) -> bool {
        matches!(self, TaskState::Done | TaskState::Marked(_))
    }

    /// How the breadcrumb names it.
    pub fn describe(self) -> String {
        match self {
            TaskState::Open => "[ ] open task".into(),
            TaskState::Done => "[x] done task".into(),
            TaskState::InProgress => "[/] task in progress".into(),
            TaskState::Cancelled => "[-] cancelled task".into(),
            TaskState::Deferred => "[>] deferred task".into(),
            TaskState::Question => "[?] open question".into(),
            TaskState::Marked(c) => format!("[{c}] marked item"),
        }
    }
}

/// The block quote (or Obsidian callout) a sentence is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuoteBlock {
    /// The callout type, lowercased (`warning` for `> [!WARNING]`), when it is one.
    pub callout: Option<String>,
    pub range: Range<usize>,
    /// The block right after the quote, when it is prose: what the note says about the quote.
    pub followed_by: Option<Unit>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Footnote {
    pub label: String,
    /// Where the note references it near the range.
    pub refs: Vec<Range<usize>>,
    /// The definition's text, without `[^label]:`.
    pub unit: Unit,
}

/// The table cell a sentence is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableCell {
    /// Header cells, left to right.
    pub header: Vec<Unit>,
    /// The cells of the sentence's row, left to right (the header row's own cells for a header).
    pub row: Vec<Unit>,
    /// Which cell of the row holds the sentence.
    pub column: usize,
    /// Whether the sentence is in the header row.
    pub in_header: bool,
}

impl TableCell {
    /// The header of the sentence's column.
    pub fn column_header(&self) -> Option<&Unit> {
        if self.in_header {
            None
        } else {
            self.header.get(self.column).filter(|u| !u.text.is_empty())
        }
    }
}

/// Everything a reader sees around one range of a note.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Context {
    /// Enclosing headings, outermost first.
    pub headings: Vec<Unit>,
    /// Lead-ins and parent items, outermost first; a sentence's own label last.
    pub lead_ins: Vec<LeadIn>,
    /// The innermost list item's checkbox.
    pub task: Option<TaskState>,
    pub quote: Option<QuoteBlock>,
    /// Footnotes referenced in the sentence(s) around the range.
    pub footnotes: Vec<Footnote>,
    pub table: Option<TableCell>,
    /// The innermost block (paragraph, item text, cell, heading) holding the range.
    pub block: Option<Range<usize>>,
}

impl Context {
    /// What a reader sees around the quote, in one line: `Hiking kit › Myths`, `Launch checklist
    /// › [ ] open task`, `Services › table: row billing-api, column p99 latency`, `footnote 2: …`.
    pub fn breadcrumb(&self) -> String {
        let mut parts: Vec<String> = self.headings.iter().map(|h| h.text.clone()).collect();
        for l in &self.lead_ins {
            parts.push(clip(&l.unit.text, 60));
        }
        if let Some(q) = &self.quote {
            parts.push(match &q.callout {
                Some(c) => format!("> [!{c}]"),
                None => "> quote".to_owned(),
            });
        }
        if let Some(t) = self.task {
            parts.push(t.describe());
        }
        if let Some(t) = &self.table {
            let key = t.row.first().map(|u| u.text.as_str()).unwrap_or("");
            match (t.in_header, t.column_header()) {
                (true, _) => parts.push("table header".to_owned()),
                (false, Some(h)) if t.column > 0 => parts.push(format!("table: row {}, column {}", clip(key, 40), clip(&h.text, 40))),
                (false, Some(h)) => parts.push(format!("table: column {}", clip(&h.text, 40))),
                (false, None) => parts.push(format!("table: row {}", clip(key, 40))),
            }
        }
        for f in &self.footnotes {
            parts.push(format!("footnote {}: {}", f.label, clip(&f.unit.text, 80)));
        }
        parts.join(" › ")
    }
}

/// `s` cut to `n` characters, with `…` when cut.
pub(crate) fn clip(s: &str, n: usize) -> String {
    let c: String = s.chars().take(n).collect();
    if c.len() < s.len() {
        format!("{c}…")
    } else {
        c
    }
}

/// A parsed note, ready to answer [`Structure::context`] for any range.
pub struct Structure<'t> {
    text: &'t str,
    tree: Option<Tree>,
    footnotes: Vec<(String, Unit)>,
    /// Document-level headings (ATX and setext), in order, with their level and line range.
    headings: Vec<(u8, Range<usize>, Unit)>,
    /// What the note says about its own sentences, read once on first use.
    reading: std::sync::OnceLock<crate::gate::assertion::Reading>,
}

/// Node range clamped to the text and to char boundaries.
fn range_of(text: &str, node: Node) -> Range<usize> {
    let s = crate::text::floor_char_boundary(text, node.start_byte().min(text.len()));
    let e = crate::text::floor_char_boundary(text, node.end_byte().min(text.len())).max(s);
    s..e
}

/// `range` without surrounding whitespace.
fn trimmed(text: &str, range: Range<usize>) -> Range<usize> {
    let s = &text[range.clone()];
    let start = range.start + (s.len() - s.trim_start().len());
    let end = (range.end - (s.len() - s.trim_end().len())).max(start);
    start..end
}

/// A unit from a raw range: leading block markers (`>`, `#`, list markers, checkboxes) and
/// wrapping emphasis removed from the range, and the text with inner line breaks and quote
/// markers collapsed.
fn unit(text: &str, range: Range<usize>) -> Unit {
    let mut r = trimmed(text, range);
    loop {
        let s = &text[r.clone()];
        let stripped = strip_marker(s);
        if stripped.len() == s.len() {
            break;
        }
        r = trimmed(text, r.end - stripped.len()..r.end);
    }
    // Emphasis around the whole unit: `**Don't:**`.
    loop {
        let s = &text[r.clone()];
        let lead = s.len() - s.trim_start_matches(['*', '_']).len();
        let trail = s.len() - s.trim_end_matches(['*', '_']).len();
        if lead == 0 && trail == 0 || lead + trail >= s.len() {
            break;
        }
        r = trimmed(text, r.start + lead..r.end - trail);
    }
    let shown: Vec<&str> = text[r.clone()].lines().map(|l| l.trim().trim_start_matches('>').trim()).filter(|l| !l.is_empty()).collect();
    Unit { text: shown.join(" ").replace("**", "").replace("__", ""), range: r }
}

/// `s` without one leading block marker (`#…`, `>`, `- `, `1. `, `[ ] `), or `s` itself.
fn strip_marker(s: &str) -> &str {
    let t = s.trim_start();
    if let Some(rest) = t.strip_prefix('>') {
        return rest;
    }
    if t.starts_with('#') {
        let rest = t.trim_start_matches('#');
        if rest.is_empty() || rest.starts_with([' ', '\t']) {
            return rest;
        }
    }
    for m in ["- ", "* ", "+ "] {
        if let Some(rest) = t.strip_prefix(m) {
            return rest;
        }
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && digits <= 9 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") ")) {
        return &t[digits + 2..];
    }
    if let Some((_, rest)) = task_mark(t) {
        return rest;
    }
    s
}

/// `[c] rest` at the start of `t`: the checkbox's mark and what follows it.
fn task_mark(t: &str) -> Option<(char, &str)> {
    let rest = t.strip_prefix('[')?;
    let mut cs = rest.chars();
    let c = cs.next()?;
    let after = cs.as_str().strip_prefix(']')?;
    (after.is_empty() || after.starts_with([' ', '\t', '\n', '\r'])).then_some((c, after))
}

impl<'t> Structure<'t> {
    pub fn parse(text: &'t str) -> Structure<'t> {
        let tree = parse(text);
        let footnotes = if !text.contains("[^") { Vec::new() } else { crate::nav::links(text) }
            .into_iter()
            .filter(|l| l.kind == crate::nav::NavKind::FootnoteDef)
            .filter_map(|l| {
                let label = l.label?.text;
                // The definition's text: after `]:` on its line, and indented continuation lines.
                let line = &text[l.range.clone()];
                let colon = line.find("]:")? + 2;
                let mut end = l.range.end;
                let mut rest = &text[end..];
                while let Some(nl) = rest.find('\n') {
                    let next = &rest[nl + 1..];
                    let line_end = next.find('\n').unwrap_or(next.len());
                    let l2 = &next[..line_end];
                    if l2.starts_with("  ") || l2.starts_with('\t') {
                        if l2.trim().is_empty() {
                            break;
                        }
                        end += nl + 1 + line_end;
                        rest = &text[end..];
                    } else {
                        break;
                    }
                }
                Some((crate::nav::normalize_label(&label), unit(text, l.range.start + colon..end)))
            })
            .collect();
        let mut headings = Vec::new();
        if let Some(t) = &tree {
            collect_headings(text, t.root_node(), &mut headings);
        }
        Structure { text, tree, footnotes, headings, reading: std::sync::OnceLock::new() }
    }

    pub fn text(&self) -> &'t str {
        self.text
    }

    /// Document-level headings (level, line range, text), in order.
    pub fn heading_list(&self) -> &[(u8, Range<usize>, Unit)] {
        &self.headings
    }

    /// The note read as a whole ([`crate::gate::assertion::Reading`]), once per parse: the words
    /// of the first call are the ones read with.
    pub fn reading(&self, words: &crate::gate::context::ContextWords) -> &crate::gate::assertion::Reading {
        self.reading.get_or_init(|| crate::gate::assertion::Reading::of(self, words))
    }

    /// The context of `range` (clamped to the text).
    pub fn context(&self, range: Range<usize>) -> Context {
        let text = self.text;
        let start = crate::text::floor_char_boundary(text, range.start.min(text.len()));
        let end = crate::text::floor_char_boundary(text, range.end.min(text.len())).max(start);
        let mut ctx = Context::default();
        let Some(tree) = &self.tree else { return ctx };
        let root = tree.root_node();
        let probe_end = if end > start { end } else { (start + 1).min(text.len()) };
        let Some(deepest) = root.descendant_for_byte_range(start, probe_end) else { return ctx };
        // Ancestors, innermost first.
        let mut chain = Vec::new();
        let mut n = Some(deepest);
        while let Some(node) = n {
            chain.push(node);
            n = node.parent();
        }
        // Heading path: the last heading of each level above the range (a heading line itself is
        // not under its own heading).
        let mut stack: Vec<(u8, Unit)> = Vec::new();
        for (level, line, u) in self.headings.iter().take_while(|(_, line, _)| line.start <= start) {
            if line.start <= start && start < line.end {
                break;
            }
            stack.retain(|(l, _)| l < level);
            stack.push((*level, u.clone()));
        }
        ctx.headings = stack.into_iter().map(|(_, u)| u).collect();
        for (depth, node) in chain.iter().enumerate().rev() {
            match node.kind() {
                "list_item" => {
                    let inner = chain[..depth].iter().rev().find(|c| c.kind() == "list_item");
                    // Parent item: this item when a deeper item holds the range.
                    if inner.is_some() {
                        if let Some(p) = item_text(text, *node) {
                            ctx.lead_ins.push(LeadIn { kind: LeadInKind::ParentItem, unit: p });
                        }
                    } else {
                        ctx.task = item_task(text, *node);
                    }
                }
                "list" => {
                    // A nested list's lead-in is its parent item, taken above.
                    let nested = node.parent().is_some_and(|p| p.kind() == "list_item");
                    if let Some(l) = lead_in_before(text, *node).filter(|_| !nested) {
                        ctx.lead_ins.push(LeadIn { kind: LeadInKind::LeadIn, unit: l });
                    }
                }
                "block_quote" => {
                    // "From the Acme docs:" right before a quote introduces it.
                    let in_list = chain[depth + 1..].iter().any(|a| a.kind() == "list_item");
                    if let Some(l) = lead_in_before(text, *node).filter(|_| !in_list) {
                        ctx.lead_ins.push(LeadIn { kind: LeadInKind::LeadIn, unit: l });
                    }
                    let r = range_of(text, *node);
                    let callout = callout_of(&text[r.clone()]);
                    let followed_by = node.next_named_sibling().filter(|s| s.kind() == "paragraph").map(|s| unit(text, range_of(text, s)));
                    // The innermost quote wins.
                    ctx.quote = Some(QuoteBlock { callout, range: r, followed_by });
                }
                "pipe_table" => ctx.table = table_cell(text, *node, start),
                "paragraph" | "inline" | "pipe_table_cell" | "atx_heading" | "setext_heading" => {
                    if ctx.block.is_none() || node.kind() != "inline" {
                        ctx.block = Some(trimmed(text, range_of(text, *node)));
                    }
                    // A paragraph right after a lead-in paragraph ("Vendor says:").
                    if node.kind() == "paragraph" && !chain[depth + 1..].iter().any(|a| a.kind() == "list_item") {
                        if let Some(l) = lead_in_before(text, *node) {
                            ctx.lead_ins.push(LeadIn { kind: LeadInKind::LeadIn, unit: l });
                        }
                    }
                }
                _ => {}
            }
        }
        // The sentence's own label: "Don't: run it on Fridays" (the line up to a `:` before it).
        if let Some(block) = &ctx.block {
            let line_start = text[block.start..start.max(block.start)].rfind('\n').map_or(block.start, |i| block.start + i + 1);
            let before = &text[line_start..start.max(line_start)];
            if let Some(colon) = before.rfind(':') {
                let label = unit(text, line_start..line_start + colon + 1);
                let words = label.text.trim_end_matches([':', '*', '_', ' ']);
                // A time ("9:30"), a URL scheme or a long clause is not a label.
                let is_label = !words.is_empty()
                    && words.split_whitespace().count() <= 8
                    && !text[line_start + colon + 1..].starts_with(|c: char| c.is_ascii_digit() || c == '/');
                if is_label {
                    ctx.lead_ins.push(LeadIn { kind: LeadInKind::Label, unit: label });
                }
            }
        }
        // A line ending in ":" earlier in the same paragraph leads in the lines after it
        // ("When probing phospho-proteins:\nUse 5% BSA instead of milk.").
        if let Some(block) = &ctx.block {
            let quote_line = text[..start.max(block.start)].rfind('\n').map_or(0, |i| i + 1).max(block.start);
            if quote_line > block.start {
                let before = &text[block.start..quote_line];
                let mut line_end = before.len();
                for line in before.lines().rev() {
                    let line_start = before[..line_end].trim_end_matches(['\n', '\r']).len() - line.len();
                    let shown = line.trim().trim_end_matches(['*', '_', ' ']);
                    if shown.ends_with(':') {
                        let u = unit(text, block.start + line_start..block.start + line_start + line.len());
                        if !u.text.is_empty() && !ctx.lead_ins.iter().any(|l| l.unit.range == u.range) {
                            ctx.lead_ins.push(LeadIn { kind: LeadInKind::LeadIn, unit: u });
                        }
                        break;
                    }
                    line_end = line_start;
                }
            }
        }
        // Footnotes referenced in the block around the range (the sentence they qualify is read
        // by the caller; the block is what a reader sees the reference in).
        if !self.footnotes.is_empty() {
            let scope = ctx.block.clone().unwrap_or(start..end);
            let scope = scope.start.min(start)..scope.end.max(end);
            for (i, _) in text[scope.clone()].match_indices("[^") {
                let at = scope.start + i + 2;
                let Some(close) = text[at..].find(']') else { continue };
                let label = crate::nav::normalize_label(&text[at..at + close]);
                // `[^x]:` at a line start is a definition, not a reference.
                if text[at + close + 1..].starts_with(':') {
                    continue;
                }
                let r = at - 2..at + close + 1;
                if let Some(f) = ctx.footnotes.iter_mut().find(|f| crate::nav::normalize_label(&f.label) == label) {
                    f.refs.push(r);
                } else if let Some((_, u)) = self.footnotes.iter().find(|(l, _)| *l == label) {
                    ctx.footnotes.push(Footnote { label: text[at..at + close].to_owned(), refs: vec![r], unit: u.clone() });
                }
            }
        }
        // Inline notes: `^[text]`.
        if let Some(block) = ctx.block.clone() {
            let scope = block.start.min(start)..block.end.max(end);
            for (i, _) in text[scope.clone()].match_indices("^[") {
                let at = scope.start + i + 2;
                let Some(close) = text[at..].find(']') else { continue };
                let n = ctx.footnotes.len() + 1;
                ctx.footnotes.push(Footnote {
                    label: format!("inline {n}"),
                    refs: vec![at - 2..at + close + 1],
                    unit: unit(text, at..at + close),
                });
            }
        }
        ctx
    }
}

/// Headings outside lists and quotes, in document order.
fn collect_headings(text: &str, node: Node, out: &mut Vec<(u8, Range<usize>, Unit)>) {
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        match child.kind() {
            "atx_heading" | "setext_heading" => {
                let raw = &text[range_of(text, child)];
                let level = if child.kind() == "atx_heading" {
                    raw.trim_start().bytes().take_while(|&b| b == b'#').count().clamp(1, 6) as u8
                } else if raw.trim_end().ends_with('=') {
                    1
                } else {
                    2
                };
                out.push((level, range_of(text, child), heading_unit(text, child)));
            }
            "section" | "document" => collect_headings(text, child, out),
            _ => {}
        }
    }
}

fn heading_unit(text: &str, h: Node) -> Unit {
    let r = trimmed(text, range_of(text, h));
    if h.kind() == "setext_heading" {
        // Text lines, then the underline.
        let s = &text[r.clone()];
        let body_end = s.trim_end().rfind('\n').map_or(s.len(), |i| i);
        return unit(text, r.start..r.start + body_end);
    }
    let mut u = unit(text, r);
    // Closing `#`s of an ATX heading.
    let s = &text[u.range.clone()];
    let closed = s.trim_end_matches('#');
    if closed.len() < s.len() && (closed.is_empty() || closed.ends_with([' ', '\t'])) {
        u = unit(text, u.range.start..u.range.start + closed.trim_end().len());
    }
    u
}

/// The text of a list item's own first block (its marker and checkbox removed).
fn item_text(text: &str, item: Node) -> Option<Unit> {
    let mut cursor = item.walk();
    let first = item.named_children(&mut cursor).find(|c| c.kind() == "paragraph")?;
    let u = unit(text, range_of(text, first));
    (!u.text.is_empty()).then_some(u)
}

fn item_task(text: &str, item: Node) -> Option<TaskState> {
    let r = range_of(text, item);
    let s = text[r].trim_start();
    let after_marker = strip_list_marker(s)?;
    task_mark(after_marker.trim_start_matches([' ', '\t'])).map(|(c, _)| TaskState::from_mark(c))
}

fn strip_list_marker(s: &str) -> Option<&str> {
    for m in ["- ", "* ", "+ "] {
        if let Some(rest) = s.strip_prefix(m) {
            return Some(rest);
        }
    }
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && digits <= 9 && (s[digits..].starts_with(". ") || s[digits..].starts_with(") "))).then(|| &s[digits + 2..])
}

/// The paragraph right before `node` when it ends in `:` (a lead-in). Emphasis around the
/// colon counts ("**Don't:**", "*Avoid*:").
fn lead_in_before(text: &str, node: Node) -> Option<Unit> {
    let prev = node.prev_named_sibling()?;
    let para = match prev.kind() {
        "paragraph" => prev,
        _ => return None,
    };
    let u = unit(text, range_of(text, para));
    // Only the paragraph's last line leads in: "Some context.\nDon't:".
    let last_line_start = text[u.range.clone()].rfind('\n').map_or(u.range.start, |i| u.range.start + i + 1);
    let last = unit(text, last_line_start..u.range.end);
    let t = last.text.trim_end_matches(['*', '_', ' ']);
    // A short line all in bold ("**Cons**") before a list heads it as a lead-in does.
    let para_raw = &text[range_of(text, para)];
    let raw = para_raw.trim_end().rsplit('\n').next().unwrap_or("").trim();
    let bold_only = node.kind() == "list"
        && raw.len() > 4
        && (raw.starts_with("**") && raw.ends_with("**") || raw.starts_with("__") && raw.ends_with("__"))
        && !raw[2..raw.len() - 2].contains("**")
        && last.text.split_whitespace().count() <= 6;
    (t.ends_with(':') || bold_only).then_some(last)
}

/// `> [!type] title` on the quote's first line: the callout type, lowercased.
fn callout_of(quote: &str) -> Option<String> {
    let first = quote.lines().next()?.trim_start().trim_start_matches('>').trim_start();
    let rest = first.strip_prefix("[!")?;
    let close = rest.find(']')?;
    let kind = rest[..close].trim().to_lowercase();
    (!kind.is_empty()).then_some(kind)
}

fn table_cell(text: &str, table: Node, at: usize) -> Option<TableCell> {
    let mut cursor = table.walk();
    let rows: Vec<Node> =
        table.named_children(&mut cursor).filter(|r| matches!(r.kind(), "pipe_table_header" | "pipe_table_row")).collect();
    let cells = |row: Node| -> Vec<Unit> {
        let mut c = row.walk();
        row.named_children(&mut c).filter(|n| n.kind() == "pipe_table_cell").map(|n| unit(text, range_of(text, n))).collect()
    };
    let header = rows.first().filter(|r| r.kind() == "pipe_table_header").map(|r| cells(*r)).unwrap_or_default();
    for row in &rows {
        let r = range_of(text, *row);
        if !(r.start <= at && at < r.end.max(r.start + 1)) {
            continue;
        }
        let row_cells = cells(*row);
        let mut c = row.walk();
        let column = row
            .named_children(&mut c)
            .filter(|n| n.kind() == "pipe_table_cell")
            .position(|n| n.start_byte() <= at && at <= n.end_byte())
            .unwrap_or(0);
        return Some(TableCell { header: header.clone(), row: row_cells, column, in_header: row.kind() == "pipe_table_header" });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(note: &str, needle: &str) -> Context {
        let at = note.find(needle).unwrap_or_else(|| panic!("{needle:?} not in note"));
        Structure::parse(note).context(at..at + needle.len())
    }

    #[test]
    fn headings_lead_ins_tasks_and_parents() {
        let note = "# Hiking kit\n\n## Myths\n\nThings people say:\n\n- Cotton keeps you warm.\n- [ ] Buy wool socks\n- Don't:\n  - cross rivers in flood\n";
        let c = ctx(note, "Cotton keeps");
        assert_eq!(c.headings.iter().map(|h| h.text.as_str()).collect::<Vec<_>>(), ["Hiking kit", "Myths"]);
        assert_eq!(c.lead_ins.len(), 1);
        assert_eq!(c.lead_ins[0].unit.text, "Things people say:");
        assert_eq!(c.task, None);
        assert_eq!(ctx(note, "Buy wool").task, Some(TaskState::Open));
        let nested = ctx(note, "cross rivers");
        assert_eq!(nested.lead_ins.last().unwrap().kind, LeadInKind::ParentItem);
        assert_eq!(nested.lead_ins.last().unwrap().unit.text, "Don't:");
        assert_eq!(nested.breadcrumb(), "Hiking kit › Myths › Things people say: › Don't:");
    }

    #[test]
    fn obsidian_task_states_callouts_and_footnotes() {
        let note = "- [/] Migrate billing\n- [-] Drop the cache\n- [x] Rotate keys\n\n> [!question] Is it?\n> The queue drops jobs.\n\nNot in our experience.\n\nRefunds take 5 days.[^1]\n\n[^1]: Only for orders shipped within the EU.\n";
        assert_eq!(ctx(note, "Migrate billing").task, Some(TaskState::InProgress));
        assert_eq!(ctx(note, "Drop the cache").task, Some(TaskState::Cancelled));
        assert_eq!(ctx(note, "Rotate keys").task, Some(TaskState::Done));
        let q = ctx(note, "The queue drops jobs.");
        let quote = q.quote.unwrap();
        assert_eq!(quote.callout.as_deref(), Some("question"));
        assert_eq!(quote.followed_by.unwrap().text, "Not in our experience.");
        let f = ctx(note, "Refunds take 5 days.");
        assert_eq!(f.footnotes.len(), 1);
        assert_eq!(f.footnotes[0].unit.text, "Only for orders shipped within the EU.");
        assert!(f.breadcrumb().contains("footnote 1: Only for orders"), "{}", f.breadcrumb());
    }

    #[test]
    fn table_cells_know_their_row_and_column() {
        let note = "## Services\n\n| Service | Team | p99 latency |\n|---|---|---|\n| billing-api | Payments | 180 ms |\n| search | Core | 95 ms |\n";
        let c = ctx(note, "180 ms");
        let t = c.table.clone().unwrap();
        assert_eq!(t.row.iter().map(|u| u.text.as_str()).collect::<Vec<_>>(), ["billing-api", "Payments", "180 ms"]);
        assert_eq!(t.column, 2);
        assert_eq!(t.column_header().unwrap().text, "p99 latency");
        assert_eq!(c.breadcrumb(), "Services › table: row billing-api, column p99 latency");
    }

    /// Every note of the gate's structure fixtures, at ranges starting on every char boundary:
    /// no panic, and every range reported lies inside the text.
    #[test]
    fn any_range_of_the_fixture_notes_has_a_context() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gate");
        let mut notes = 0;
        for file in ["structure.jsonl", "structure-heldout.jsonl"] {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            for line in text.lines().filter(|l| !l.trim().is_empty()).step_by(3) {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                let note = v["source"].as_str().unwrap();
                let st = Structure::parse(note);
                notes += 1;
                for (i, _) in note.char_indices().step_by(5) {
                    for len in [0, 1, 17, 400] {
                        let c = st.context(i..i + len);
                        let ranges =
                            c.headings.iter().map(|u| &u.range).chain(c.lead_ins.iter().map(|l| &l.unit.range)).chain(c.block.iter());
                        for r in ranges {
                            assert!(r.start <= r.end && r.end <= note.len(), "{r:?} in a note of {} bytes", note.len());
                        }
                        let _ = c.breadcrumb();
                    }
                }
            }
        }
        assert!(notes > 150, "{notes}");
    }

    #[test]
    fn labels_setext_headings_and_unparsable_input() {
        let note = "Old setup\n=========\n\n**Avoid**: running it on Fridays.\n\nStandup: ~~Tuesday~~ Thursday 9:30\n";
        let c = ctx(note, "running it");
        assert_eq!(c.headings[0].text, "Old setup");
        assert_eq!(c.lead_ins.last().unwrap().kind, LeadInKind::Label);
        assert_eq!(c.lead_ins.last().unwrap().unit.text, "Avoid:");
        // A time is not a label.
        let t = ctx(note, "30");
        assert!(t.lead_ins.iter().all(|l| l.unit.text != "Standup: ~~Tuesday~~ Thursday 9:"), "{t:?}");
        // Nothing panics on odd input.
        for s in ["", "\0", "> [!", "| a |\n", "- [", "[^", "[^x]:", "#"] {
            let st = Structure::parse(s);
            let _ = st.context(0..s.len());
            let _ = st.context(s.len()..s.len() + 5);
        }
    }
}
