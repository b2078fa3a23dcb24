//! HTML → markdown for snapshots: the readable content of a page, with headings, lists, tables,
//! code and quotes kept as markdown so the chunker structures a snapshot the way it structures a
//! note. html5ever parses (through `scraper`); this module only walks the tree it builds.
//!
//! What a citation can quote is what a reader of the page sees: scripts, styles, hidden
//! elements (`hidden`, `aria-hidden`, `display:none`), forms and navigation chrome are left out;
//! zero-width characters and soft hyphens are removed and non-breaking spaces become spaces, so
//! text cannot carry invisible differences from what it shows. Links and emphasis become their
//! text: a quote reads as the sentence, not as markup. Text that would read as markdown syntax
//! at a line start is escaped, so a page's prose never turns into a heading or a list.

use std::time::{Duration, Instant};

use ego_tree::NodeRef;
use html5ever::tendril::TendrilSink;
use scraper::{Html, HtmlTreeSink, Node};

/// A page as readable markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The document's `<title>`, whitespace collapsed.
    pub title: Option<String>,
    /// Blocks separated by blank lines, ending in a newline (empty for a page with no text).
    pub markdown: String,
}

/// Nesting below this depth is read as plain text: a hostile page nesting 100,000 elements
/// must not exhaust the stack.
const MAX_DEPTH: usize = 200;

/// Quotes and lists nested deeper than this are read as plain blocks: each level re-prefixes
/// everything inside it, so unbounded nesting would copy the page once per level.
const MAX_NEST: usize = 8;

fn nest_of(node: NodeRef<'_, Node>) -> usize {
    node.ancestors().filter(|a| is(*a, "blockquote") || is(*a, "ul") || is(*a, "ol")).count()
}

/// The page took longer than its budget to parse: html5ever's tree construction is quadratic
/// in nesting depth (every `<div>` looks for an open `<p>` down the whole stack), so 100,000
/// nested elements would take hours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the page is too deeply nested to read (parsing took over {0} s)")]
pub struct TooComplex(pub u64);

/// Input is fed to the parser in pieces of this many bytes; the budget is checked between them.
const PIECE: usize = 4096;

/// Converts an HTML document to markdown, giving up when parsing takes longer than `budget`.
pub fn to_markdown(html: &str, budget: Duration) -> Result<Page, TooComplex> {
    let started = Instant::now();
    let mut parser = html5ever::driver::parse_document(HtmlTreeSink::new(Html::new_document()), Default::default());
    let mut at = 0;
    while at < html.len() {
        let mut end = (at + PIECE).min(html.len());
        while !html.is_char_boundary(end) {
            end += 1;
        }
        parser.process(html[at..end].into());
        at = end;
        if started.elapsed() > budget {
            return Err(TooComplex(budget.as_secs().max(1)));
        }
    }
    let doc = parser.finish();
    Ok(convert(&doc))
}

fn convert(doc: &Html) -> Page {
    let root = doc.tree.root();
    let title = find(root, &|n| is(n, "title")).map(|t| collapse(&text_of(t))).filter(|t| !t.is_empty());
    // The page's own content when it says where that is: the first <main>, else a sole
    // <article>, else the body.
    let articles: Vec<_> = root.descendants().filter(|n| is(*n, "article")).take(2).collect();
    let content = find(root, &|n| is(n, "main"))
        .or(if articles.len() == 1 { Some(articles[0]) } else { None })
        .or_else(|| find(root, &|n| is(n, "body")))
        .unwrap_or(root);
    let mut blocks = Vec::new();
    container(content, 0, &mut blocks);
    let has_h1 = blocks.iter().any(|b| b.starts_with("# "));
    if let (false, Some(t)) = (has_h1, &title) {
        blocks.insert(0, format!("# {}", escape_line_start(t)));
    }
    let mut markdown = blocks.join("\n\n");
    if !markdown.is_empty() {
        markdown.push('\n');
    }
    Page { title, markdown }
}

/// Plain text (a `text/plain` body) as markdown: paragraphs kept, every line escaped where it
/// would read as syntax.
pub fn plain_to_markdown(text: &str) -> String {
    let cleaned = clean_chars(text);
    let mut out = String::with_capacity(cleaned.len());
    for line in cleaned.lines() {
        out.push_str(&escape_line_start(line.trim_end()));
        out.push('\n');
    }
    out
}

fn is(n: NodeRef<'_, Node>, name: &str) -> bool {
    matches!(n.value(), Node::Element(e) if e.name() == name)
}

fn find<'a>(root: NodeRef<'a, Node>, pred: &dyn Fn(NodeRef<'a, Node>) -> bool) -> Option<NodeRef<'a, Node>> {
    root.descendants().find(|n| pred(*n))
}

/// Elements whose content is never readable text.
fn skipped(name: &str) -> bool {
    matches!(
        name,
        "head"
            | "script"
            | "style"
            | "noscript"
            | "template"
            | "svg"
            | "math"
            | "canvas"
            | "iframe"
            | "object"
            | "embed"
            | "form"
            | "button"
            | "select"
            | "input"
            | "textarea"
            | "nav"
            | "aside"
            | "footer"
            | "audio"
            | "video"
            | "map"
            | "img"
            | "picture"
            | "source"
            | "track"
            | "meta"
            | "link"
            | "dialog"
    )
}

fn hidden(e: &scraper::node::Element) -> bool {
    if e.attr("hidden").is_some() || e.attr("aria-hidden").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return true;
    }
    e.attr("style").is_some_and(|s| {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_lowercase();
        s.contains("display:none") || s.contains("visibility:hidden")
    })
}

fn block_level(name: &str) -> bool {
    matches!(
        name,
        "address"
            | "article"
            | "blockquote"
            | "body"
            | "center"
            | "dd"
            | "details"
            | "div"
            | "dl"
            | "dt"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "header"
            | "hgroup"
            | "hr"
            | "html"
            | "li"
            | "main"
            | "ol"
            | "p"
            | "pre"
            | "section"
            | "summary"
            | "table"
            | "ul"
            | "caption"
            | "tbody"
            | "thead"
            | "tfoot"
            | "tr"
            | "td"
            | "th"
            | "legend"
            | "search"
    )
}

/// Renders the children of a block container as markdown blocks.
fn container(node: NodeRef<'_, Node>, depth: usize, blocks: &mut Vec<String>) {
    container_from(node.children(), depth, blocks);
}

fn container_from<'a>(children: impl Iterator<Item = NodeRef<'a, Node>>, depth: usize, blocks: &mut Vec<String>) {
    let mut para = String::new();
    for child in children {
        match child.value() {
            Node::Text(_) => inline(child, depth + 1, &mut para),
            Node::Element(e) => {
                let name = e.name();
                if skipped(name) || hidden(e) {
                    continue;
                }
                if block_level(name) {
                    flush(&mut para, blocks);
                    block(child, name, depth + 1, blocks);
                } else {
                    inline(child, depth + 1, &mut para);
                }
            }
            _ => {}
        }
    }
    flush(&mut para, blocks);
}

/// A paragraph from collected inline text, if it has any.
fn flush(para: &mut String, blocks: &mut Vec<String>) {
    let lines: Vec<String> = para.split('\n').map(|l| escape_line_start(l.trim())).filter(|l| !l.is_empty()).collect();
    if !lines.is_empty() {
        blocks.push(lines.join("\n"));
    }
    para.clear();
}

fn block(node: NodeRef<'_, Node>, name: &str, depth: usize, blocks: &mut Vec<String>) {
    if depth > MAX_DEPTH {
        let t = collapse(&text_of(node));
        if !t.is_empty() {
            blocks.push(escape_line_start(&t));
        }
        return;
    }
    match name {
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
            // A heading left open swallows what follows it (malformed pages): its text is what
            // comes before the first block inside it; those blocks follow it as blocks.
            let level = (name.as_bytes()[1] - b'0') as usize;
            let mut t = String::new();
            let mut rest = node.children().peekable();
            while let Some(c) = rest.peek() {
                if matches!(c.value(), Node::Element(e) if block_level(e.name()) && !skipped(e.name())) {
                    break;
                }
                inline(*c, depth + 1, &mut t);
                rest.next();
            }
            let t = collapse(&t);
            if !t.is_empty() {
                blocks.push(format!("{} {}", "#".repeat(level), escape_heading(&t)));
            }
            container_from(rest, depth, blocks);
        }
        "pre" => {
            let code = clean_chars(&text_of(node));
            let code = code.trim_matches('\n');
            if code.trim().is_empty() {
                return;
            }
            let lang = language(node).unwrap_or_default();
            let fence = "`".repeat(longest_run(code, '`').max(2) + 1);
            blocks.push(format!("{fence}{lang}\n{code}\n{fence}"));
        }
        "ul" | "ol" | "blockquote" if nest_of(node) >= MAX_NEST => container(node, depth, blocks),
        "ul" | "ol" => {
            let list = list(node, name == "ol", depth);
            if !list.is_empty() {
                blocks.push(list);
            }
        }
        "blockquote" => {
            let mut inner = Vec::new();
            container(node, depth, &mut inner);
            if !inner.is_empty() {
                let joined = inner.join("\n\n");
                blocks.push(
                    joined.lines().map(|l| if l.is_empty() { ">".to_owned() } else { format!("> {l}") }).collect::<Vec<_>>().join("\n"),
                );
            }
        }
        "table" => {
            if let Some(t) = table(node, depth) {
                blocks.push(t);
            }
        }
        "hr" => blocks.push("---".to_owned()),
        _ => container(node, depth, blocks),
    }
}

/// `language-x` / `lang-x` from the class of a `<pre>` or its `<code>`.
fn language(pre: NodeRef<'_, Node>) -> Option<String> {
    let classes = |n: NodeRef<'_, Node>| match n.value() {
        Node::Element(e) => e.attr("class").map(str::to_owned),
        _ => None,
    };
    let mut all = classes(pre).unwrap_or_default();
    if let Some(code) = pre.children().find(|c| is(*c, "code")) {
        all.push(' ');
        all.push_str(&classes(code).unwrap_or_default());
    }
    all.split_whitespace()
        .find_map(|c| c.strip_prefix("language-").or_else(|| c.strip_prefix("lang-")))
        .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || "+-_#.".contains(c)))
        .map(str::to_owned)
}

fn list(node: NodeRef<'_, Node>, ordered: bool, depth: usize) -> String {
    let mut n: u64 = match node.value() {
        Node::Element(e) => e.attr("start").and_then(|s| s.trim().parse::<u32>().ok()).map_or(1, u64::from),
        _ => 1,
    };
    let mut items = Vec::new();
    for li in node.children() {
        let Node::Element(e) = li.value() else { continue };
        if hidden(e) {
            continue;
        }
        if e.name() != "li" {
            // A stray element inside a list (invalid HTML): its blocks join the items.
            if !skipped(e.name()) {
                let mut inner = Vec::new();
                container(li, depth + 1, &mut inner);
                items.extend(inner);
            }
            continue;
        }
        let mut inner = Vec::new();
        container(li, depth + 1, &mut inner);
        if inner.is_empty() {
            continue;
        }
        let marker = if ordered { format!("{n}. ") } else { "- ".to_owned() };
        n = n.saturating_add(1);
        let pad = " ".repeat(marker.len());
        // A nested list follows its item's text directly (a tight list); other blocks of an
        // item are paragraphs of it.
        let mut body = String::new();
        for (i, b) in inner.iter().enumerate() {
            if i > 0 {
                body.push_str(if starts_list(b) { "\n" } else { "\n\n" });
            }
            body.push_str(b);
        }
        let mut item = String::new();
        for (i, line) in body.lines().enumerate() {
            if i == 0 {
                item.push_str(&marker);
                item.push_str(line);
            } else {
                item.push('\n');
                if !line.is_empty() {
                    item.push_str(&pad);
                    item.push_str(line);
                }
            }
        }
        items.push(item);
    }
    items.join("\n")
}

fn starts_list(block: &str) -> bool {
    let digits = block.chars().take_while(char::is_ascii_digit).count();
    block.starts_with("- ") || (digits > 0 && block[digits..].starts_with(". "))
}

fn table(node: NodeRef<'_, Node>, depth: usize) -> Option<String> {
    // Rows of this table only: a nested table's rows are its cell's text.
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut stack: Vec<NodeRef<'_, Node>> = node.children().collect();
    stack.reverse();
    while let Some(n) = stack.pop() {
        let Node::Element(e) = n.value() else { continue };
        match e.name() {
            "thead" | "tbody" | "tfoot" => {
                let mut kids: Vec<_> = n.children().collect();
                kids.reverse();
                stack.extend(kids);
            }
            "tr" => {
                let cells: Vec<String> = n
                    .children()
                    .filter(|c| is(*c, "td") || is(*c, "th"))
                    .map(|c| {
                        let mut t = String::new();
                        if depth < MAX_DEPTH {
                            inline_children(c, depth + 1, &mut t);
                        }
                        escape_cell(&collapse(&t))
                    })
                    .collect();
                if !cells.is_empty() {
                    rows.push(cells);
                }
            }
            _ => {}
        }
    }
    let width = rows.iter().map(Vec::len).max()?;
    if rows.iter().all(|r| r.iter().all(String::is_empty)) {
        return None;
    }
    let line = |r: &[String]| {
        let mut cells: Vec<&str> = r.iter().map(String::as_str).collect();
        cells.resize(width, "");
        format!("| {} |", cells.join(" | "))
    };
    let mut out = vec![line(&rows[0]), format!("|{}", " --- |".repeat(width))];
    out.extend(rows[1..].iter().map(|r| line(r)));
    Some(out.join("\n"))
}

fn inline_children(node: NodeRef<'_, Node>, depth: usize, out: &mut String) {
    for c in node.children() {
        inline(c, depth + 1, out);
    }
}

/// Appends the inline text of `node`: words with whitespace collapsed, `<br>` as a line
/// break, inline code in backticks. Block elements met here (a `<p>` inside a `<span>`) add
/// their text.
fn inline(node: NodeRef<'_, Node>, depth: usize, out: &mut String) {
    match node.value() {
        Node::Text(t) => push_words(out, &clean_chars(t)),
        Node::Element(e) => {
            let name = e.name();
            if skipped(name) || hidden(e) {
                return;
            }
            if depth > MAX_DEPTH {
                push_words(out, &clean_chars(&text_of(node)));
                return;
            }
            match name {
                "br" => {
                    trim_trailing_space(out);
                    out.push('\n');
                }
                "code" | "kbd" | "samp" | "tt" => {
                    let code = collapse(&clean_chars(&text_of(node)));
                    if !code.is_empty() {
                        let ticks = "`".repeat(longest_run(&code, '`') + 1);
                        let pad = if code.starts_with('`') || code.ends_with('`') { " " } else { "" };
                        out.push_str(&format!("{ticks}{pad}{code}{pad}{ticks}"));
                    }
                }
                _ => {
                    if block_level(name) && !out.is_empty() && !out.ends_with([' ', '\n']) {
                        out.push(' ');
                    }
                    inline_children(node, depth, out);
                    if block_level(name) && !out.is_empty() && !out.ends_with([' ', '\n']) {
                        out.push(' ');
                    }
                }
            }
        }
        _ => {}
    }
}

fn trim_trailing_space(out: &mut String) {
    while out.ends_with(' ') {
        out.pop();
    }
}

/// Appends text with runs of whitespace collapsed to one space (none at the start of a line).
fn push_words(out: &mut String, text: &str) {
    let mut space = text.starts_with(is_html_space);
    for word in text.split(is_html_space).filter(|w| !w.is_empty()) {
        if space && !out.is_empty() && !out.ends_with([' ', '\n']) {
            out.push(' ');
        }
        out.push_str(word);
        space = true;
    }
    if text.ends_with(is_html_space) && !out.is_empty() && !out.ends_with([' ', '\n']) {
        out.push(' ');
    }
}

fn is_html_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c')
}

/// All text below `node`, as written (iterative: any depth), skipping what is never read.
fn text_of(node: NodeRef<'_, Node>) -> String {
    let mut out = String::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        match n.value() {
            Node::Text(t) => out.push_str(t),
            Node::Element(e) if n.id() != node.id() && (skipped(e.name()) || hidden(e)) => continue,
            Node::Element(e) if e.name() == "br" => out.push('\n'),
            _ => {}
        }
        let mut kids: Vec<_> = n.children().collect();
        kids.reverse();
        stack.extend(kids);
    }
    out
}

/// Whitespace collapsed to single spaces, trimmed.
fn collapse(s: &str) -> String {
    let mut out = String::new();
    push_words(&mut out, &clean_chars(s));
    out.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Removes what is invisible (zero-width characters, soft hyphens, controls) and turns
/// non-breaking spaces into spaces.
fn clean_chars(s: &str) -> String {
    s.chars()
        .filter_map(|c| match c {
            '\u{a0}' | '\u{2007}' | '\u{202f}' => Some(' '),
            '\u{ad}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}' => None,
            '\n' | '\t' | '\r' | '\x0c' => Some(c),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect()
}

fn longest_run(s: &str, ch: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in s.chars() {
        if c == ch {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// Escapes what would make a line of prose read as block syntax: headings, quotes, list
/// markers, fences, tables, HTML blocks, thematic breaks and setext underlines.
fn escape_line_start(line: &str) -> String {
    let t = line.trim_start();
    let first = t.chars().next();
    let needs = match first {
        None => false,
        Some('#' | '>' | '|' | '<' | '=' | '~' | '`') => true,
        Some('-' | '+' | '*' | '_') => {
            t.len() == 1 || t[1..].starts_with([' ', '\t']) || t.chars().all(|c| c == first.unwrap() || c == ' ')
        }
        Some(c) if c.is_ascii_digit() => {
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            let rest = &t[digits..];
            digits <= 9 && (rest.starts_with(". ") || rest.starts_with(") ") || rest == "." || rest == ")")
        }
        _ => false,
    };
    if !needs {
        return t.to_owned();
    }
    match first {
        Some(c) if c.is_ascii_digit() => {
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            format!("{}\\{}", &t[..digits], &t[digits..])
        }
        _ => format!("\\{t}"),
    }
}

/// Heading text: a trailing run of `#` after a space would be read as the closing sequence, so
/// such a heading gets a closing sequence of its own (the chunker does not read `\#` there).
fn escape_heading(t: &str) -> String {
    let t = t.replace('\n', " ");
    let run = t.len() - t.trim_end_matches('#').len();
    if run > 0 && t[..t.len() - run].ends_with(' ') {
        format!("{t} #")
    } else {
        t
    }
}

fn escape_cell(t: &str) -> String {
    t.replace('\\', "\\\\").replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_beyond_the_limit_keeps_the_text() {
        let budget = Duration::from_secs(60);
        let deep = format!("{}deep text{}", "<div>".repeat(2_000), "</div>".repeat(2_000));
        let page = to_markdown(&format!("<html><body>{deep}</body></html>"), budget).unwrap();
        assert_eq!(page.markdown, "deep text\n");
        let lists = format!("{}item{}", "<ul><li>".repeat(1_000), "</li></ul>".repeat(1_000));
        assert!(to_markdown(&lists, budget).unwrap().markdown.contains("item"));
    }

    #[test]
    fn a_page_that_parses_too_slowly_is_refused_in_time() {
        let deep = "<div>".repeat(200_000);
        let t = Instant::now();
        assert_eq!(to_markdown(&deep, Duration::from_secs(1)), Err(TooComplex(1)));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }

    #[test]
    fn line_starts_that_read_as_syntax_are_escaped() {
        for (line, want) in [
            ("# not a heading", "\\# not a heading"),
            ("- not a list", "\\- not a list"),
            ("1. not a list", "1\\. not a list"),
            ("2024) a year", "2024\\) a year"),
            ("> not a quote", "\\> not a quote"),
            ("---", "\\---"),
            ("```", "\\```"),
            ("<div>", "\\<div>"),
            ("plain -", "plain -"),
            ("-1 degrees", "-1 degrees"),
            ("3.5 million", "3.5 million"),
        ] {
            assert_eq!(escape_line_start(line), want, "{line}");
        }
    }
}
