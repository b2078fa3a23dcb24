//! A note's own egress marks: the frontmatter flags and `#no-egress` tags that keep it on the
//! machine, in every spelling a user plausibly writes, and the near-misses lode warns about.
//!
//! Invariants:
//! - Fail closed: a spelling lode half-recognises (a typo of the key, a value it cannot read, a
//!   flag outside the frontmatter) keeps the note local *and* is reported; it never means "send".
//! - Only lode's documented spellings are silent. Everything else that keeps the note local says
//!   so with a [`NearMiss`], so the user can see what lode made of it.
//! - Text in code (fenced, indented, inline) is never a mark: a note *about* the setting is not
//!   marked by it.

use std::ops::Range;

/// What a note's own text says about leaving the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// Why the note keeps itself local (the first mark found, as written), if it does.
    pub local: Option<String>,
    /// Spellings that are not lode's documented ones, in text order.
    pub near_misses: Vec<NearMiss>,
}

/// A spelling lode read but does not document: where it is and what lode made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NearMiss {
    /// Bytes of the note (the key and its value, or the tag).
    pub range: Range<usize>,
    pub message: String,
    /// Whether it keeps the note local (else it is ignored, and the message says so).
    pub withholds: bool,
}

/// A `key: value` pair found in the note, with where it came from.
#[derive(Debug, Clone)]
struct Entry {
    /// The key path as written (`lode.no_egress` has two parts).
    path: Vec<String>,
    /// The value's text: unquoted, without a comment; `None` for a key with no scalar value.
    value: Option<String>,
    /// List items under the key (`tags: [a, b]`, or `- a` lines below it).
    items: Vec<String>,
    range: Range<usize>,
    place: Place,
}

/// Where an entry was found: the documented place, or a place lode reads only to fail closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// YAML (`---`) or TOML (`+++`) frontmatter starting on the first line.
    Frontmatter,
    /// A frontmatter block after blank lines, or one without its closing fence.
    Misplaced(&'static str),
    /// A JSON object as frontmatter (bare, or between `---` fences).
    Json,
    /// A `no_egress: …` line in the body (outside code).
    Body,
}

/// Keys that are lode's (normalised: lowercase, without `_`, `-`, space and `.`).
const NO_EGRESS: &str = "noegress";
const EGRESS: &str = "egress";
/// Other words users write for the same intent, read as `no_egress` when their value is true.
const PRIVACY_KEYS: &[&str] = &[
    "private",
    "confidential",
    "sensitive",
    "secret",
    "personal",
    "localonly",
    "keeplocal",
    "isprivate",
    "noai",
    "nollm",
    "donotshare",
    "noshare",
    "nocloud",
    "offline",
];
/// Keys whose value is a level, read as local when it names a private one.
const LEVEL_KEYS: &[&str] = &["visibility", "classification", "access", "sharing"];
const PRIVATE_LEVELS: &[&str] =
    &["private", "confidential", "secret", "restricted", "personal", "localonly", "local", "sensitive", "internal", "internalonly"];
/// Values of `egress` that keep a note local: documented, then read with a note.
const EGRESS_LOCAL: &[&str] = &["local", "none", "no", "false", "off"];
const EGRESS_LOCAL_ALIASES: &[&str] =
    &["never", "private", "deny", "denied", "localonly", "offline", "disabled", "block", "blocked", "0", "n"];
/// Values of `egress` that let a note go to a remote model.
const EGRESS_REMOTE: &[&str] = &["remote", "yes", "true", "on", "allow", "allowed", "any", "1"];
/// Tag spellings (normalised) that keep a note local.
const TAGS: &[&str] = &["noegress"];
/// Keys whose value *allows* sharing, read as `no_egress: true` when it is false.
const SHARE_KEYS: &[&str] = &["share", "shareable", "sharing", "public", "allowremote", "external", "ai", "llm", "cloud"];
/// Other tags users put on private notes: honoured, and reported.
const PRIVATE_TAGS: &[&str] = &["private", "confidential", "noai", "nollm", "localonly", "keeplocal"];

/// Whether a tag is one users put on private notes, other than lode's.
fn is_private_tag(t: &str) -> bool {
    let t = t.trim().trim_matches(['"', '\'', '[', ']']).trim_start_matches('#');
    // Any part: a child tag (`#private/work`) is filed under its parent.
    t.split('/').any(|part| PRIVATE_TAGS.contains(&norm(part).as_str()))
}

/// Whether a tag is lode's own spelling (`no-egress`, `#no-egress`, a nested `lode/no-egress`).
fn is_lode_tag(t: &str) -> bool {
    let t = t.trim().trim_matches(['"', '\'', '[', ']']).trim_start_matches('#');
    TAGS.contains(&norm(t.rsplit('/').next().unwrap_or(t)).as_str())
}

/// Whether a tag keeps the note local as lode's does: lode's own, or a child of it
/// (`no-egress/drafts`), as Obsidian files a child tag under its parent. A child is honoured and
/// reported.
fn is_egress_tag(t: &str) -> bool {
    let t = t.trim().trim_matches(['"', '\'', '[', ']']).trim_start_matches('#');
    t.split('/').any(|part| TAGS.contains(&norm(part).as_str()))
}

/// Reads a note's marks. Works on any text; never panics.
pub fn read(text: &str) -> Marks {
    let mut entries = Vec::new();
    let body_start = frontmatter(text, &mut entries);
    let code: Vec<Range<usize>> = code_ranges(&text[body_start..]).into_iter().map(|r| r.start + body_start..r.end + body_start).collect();
    body_lines(text, body_start, &code, &mut entries);
    let mut marks = Marks::default();
    for e in &entries {
        judge(e, &mut marks);
    }
    for (range, tag) in inline_tags(text, body_start, &code) {
        if marks.local.is_none() {
            marks.local = Some(format!("tag `{tag}`"));
        }
        if !is_lode_tag(&tag) {
            marks.near_misses.push(NearMiss {
                message: format!("the tag `{tag}` is not lode's; lode keeps this note on this machine as if it were `#no-egress` (tag it `#no-egress` to say so)"),
                range,
                withholds: true,
            });
        }
    }
    marks.near_misses.sort_by_key(|n| n.range.start);
    marks
}

/// Why metadata (as the index stores a note's frontmatter, or any other source) keeps the note
/// local: the same reading as [`read`] gives a frontmatter block.
pub fn from_meta(meta: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    use serde_json::Value;
    let mut marks = Marks::default();
    for (k, v) in meta {
        let (value, items) = match v {
            Value::String(s) => scalar(s),
            Value::Bool(b) => (Some(b.to_string()), Vec::new()),
            Value::Number(n) => (Some(n.to_string()), Vec::new()),
            Value::Null | Value::Object(_) => (None, Vec::new()),
            Value::Array(a) => (None, a.iter().map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned)).collect()),
        };
        // Only keys that are lode's, or typos of them: other metadata (a snapshot's `url`,
        // `final_url`) is no flag.
        judge(&Entry { path: vec![k.clone()], value, items, range: 0..0, place: Place::Frontmatter }, &mut marks);
    }
    marks.local
}

/// Normalises a key or a value for comparison: lowercase, without `_`, `-`, spaces and dots.
fn norm(s: &str) -> String {
    s.chars().filter(|c| !matches!(c, '_' | '-' | ' ' | '.' | '\t')).flat_map(char::to_lowercase).collect()
}

/// How a flag value reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flag {
    On {
        documented: bool,
    },
    Off {
        documented: bool,
    },
    /// No value (`no_egress:` or `null`).
    Empty,
    Unknown,
}

fn flag(v: Option<&str>) -> Flag {
    let Some(v) = v else { return Flag::Empty };
    let v = v.trim().trim_matches(['"', '\'']).trim().to_lowercase();
    match v.as_str() {
        "" | "null" | "~" => Flag::Empty,
        "true" | "yes" | "on" => Flag::On { documented: true },
        "false" | "no" | "off" => Flag::Off { documented: true },
        "y" | "t" | "enabled" | "enable" | "always" => Flag::On { documented: false },
        "n" | "f" | "disabled" | "disable" => Flag::Off { documented: false },
        _ => match v.replace('_', "").parse::<f64>() {
            // Any number: non-zero is true (documented), as in YAML 1.1 and every language's truthiness.
            Ok(x) if x.is_finite() => {
                if x != 0.0 {
                    Flag::On { documented: true }
                } else {
                    Flag::Off { documented: true }
                }
            }
            _ => Flag::Unknown,
        },
    }
}

/// Edit distance, for keys a letter or two away from lode's.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Whether a normalised key is lode's, or a letter or two away from it.
fn is_lode_key(key: &str) -> bool {
    key == NO_EGRESS || key == EGRESS || (key.len() >= 6 && distance(key, NO_EGRESS) <= 2) || (key.len() >= 5 && distance(key, EGRESS) == 1)
}

/// What one entry says, added to `marks`.
fn judge(e: &Entry, marks: &mut Marks) {
    let Some(last) = e.path.last() else { return };
    let key = norm(last);
    let nested = e.path.len() > 1;
    let written = e.path.join(".");
    let shown = match &e.value {
        Some(v) => format!("{written}: {v}"),
        None if !e.items.is_empty() => format!("{written}: [{}]", e.items.join(", ")),
        None => format!("{written}:"),
    };
    let local = |marks: &mut Marks, why: String, near: Option<String>| {
        if marks.local.is_none() {
            marks.local = Some(why);
        }
        if let Some(message) = near {
            marks.near_misses.push(NearMiss { range: e.range.clone(), message, withholds: true });
        }
    };
    let place_note = match e.place {
        Place::Frontmatter => None,
        Place::Misplaced(why) => Some(why.to_owned()),
        Place::Json => Some("the frontmatter is JSON, not YAML".to_owned()),
        Place::Body => Some("it is outside the frontmatter".to_owned()),
    };
    // Tags are documented wherever a list of tags is.
    if matches!(key.as_str(), "tags" | "tag" | "keywords") {
        let items: Vec<String> = if e.items.is_empty() {
            e.value.iter().flat_map(|v| v.split([',', ' '])).map(str::to_owned).collect()
        } else {
            e.items.clone()
        };
        for t in items {
            let t = t.trim().trim_matches(['"', '\'', '[', ']']).trim_start_matches('#');
            if is_lode_tag(t) {
                let near =
                    place_note.as_ref().map(|p| format!("`{shown}` keeps this note on this machine, though {p}: lode reads it anyway"));
                local(marks, format!("frontmatter tag `{t}`"), near);
            } else if is_egress_tag(t) || is_private_tag(t) {
                local(
                    marks,
                    format!("frontmatter tag `{t}`"),
                    Some(format!("the tag `{t}` is not lode's; lode keeps this note on this machine as if it were `no-egress` (tag it `no-egress` to say so)")),
                );
            }
        }
        return;
    }
    let lode_key = if key == NO_EGRESS {
        Some(NO_EGRESS)
    } else if key == EGRESS {
        Some(EGRESS)
    } else if key.len() >= 6 && distance(&key, NO_EGRESS) <= 2 {
        Some(NO_EGRESS)
    } else if key.len() >= 5 && distance(&key, EGRESS) == 1 {
        Some(EGRESS)
    } else {
        None
    };
    let documented_key = !nested && matches!(last.trim().to_lowercase().as_str(), "no_egress" | "no-egress" | "noegress" | "egress");
    let spelled = if lode_key.is_some() && !documented_key {
        let want = if lode_key == Some(NO_EGRESS) { "no_egress" } else { "egress" };
        Some(if nested {
            format!("a nested key, read as `{want}`")
        } else {
            format!("`{last}` is not a lode setting; did you mean `{want}`?")
        })
    } else {
        None
    };
    let doubts: Vec<String> = place_note.iter().cloned().chain(spelled).collect();
    match lode_key {
        Some(NO_EGRESS) => match flag(e.value.as_deref()) {
            Flag::On { documented } => {
                let mut d = doubts.clone();
                if !documented {
                    d.push(format!("`{}` is read as true", e.value.as_deref().unwrap_or_default()));
                }
                let near = (!d.is_empty()).then(|| {
                    format!("`{shown}` keeps this note on this machine ({}); write `no_egress: true` in the frontmatter", d.join("; "))
                });
                let why = if d.is_empty() { format!("frontmatter `{last}: true`") } else { format!("`{shown}`") };
                local(marks, why, near);
            }
            Flag::Off { documented } => {
                if !documented || !doubts.is_empty() {
                    marks.near_misses.push(NearMiss {
                        range: e.range.clone(),
                        message: format!("`{shown}` is read as `no_egress: false`: this note may be sent to a remote model"),
                        withholds: false,
                    });
                }
            }
            Flag::Empty | Flag::Unknown => {
                let what = if flag(e.value.as_deref()) == Flag::Empty {
                    "has no value".to_owned()
                } else {
                    format!("`{}` is not true or false", e.value.as_deref().unwrap_or_default())
                };
                let mut d = doubts.clone();
                d.insert(0, what);
                local(
                    marks,
                    format!("`{shown}` (unreadable, so kept local)"),
                    Some(format!(
                        "`{shown}` keeps this note on this machine until it reads `no_egress: true` or `no_egress: false` ({})",
                        d.join("; ")
                    )),
                );
            }
        },
        Some(_) => {
            let v = e.value.as_deref().map(|v| norm(v.trim_matches(['"', '\'']))).unwrap_or_default();
            if EGRESS_LOCAL.contains(&v.as_str()) || EGRESS_LOCAL_ALIASES.contains(&v.as_str()) {
                let mut d = doubts.clone();
                if !EGRESS_LOCAL.contains(&v.as_str()) {
                    d.push(format!("`{}` is read as `local`", e.value.as_deref().unwrap_or_default()));
                }
                let near =
                    (!d.is_empty()).then(|| format!("`{shown}` keeps this note on this machine ({}); write `egress: local`", d.join("; ")));
                let why = if d.is_empty() { format!("frontmatter `{last}: {v}`") } else { format!("`{shown}`") };
                local(marks, why, near);
            } else if EGRESS_REMOTE.contains(&v.as_str()) {
                if !doubts.is_empty() {
                    marks.near_misses.push(NearMiss {
                        range: e.range.clone(),
                        message: format!("`{shown}` is read as `egress: remote` ({})", doubts.join("; ")),
                        withholds: false,
                    });
                }
            } else {
                let what = if v.is_empty() {
                    "has no value".to_owned()
                } else {
                    format!("`{}` is not `local` or `remote`", e.value.as_deref().unwrap_or_default())
                };
                let mut d = doubts.clone();
                d.insert(0, what);
                local(
                    marks,
                    format!("`{shown}` (unreadable, so kept local)"),
                    Some(format!(
                        "`{shown}` keeps this note on this machine until it reads `egress: local` or `egress: remote` ({})",
                        d.join("; ")
                    )),
                );
            }
        }
        None => {
            // Other words for the same intent: honoured, and said.
            let privacy = (PRIVACY_KEYS.contains(&key.as_str()) && matches!(flag(e.value.as_deref()), Flag::On { .. }))
                || (SHARE_KEYS.contains(&key.as_str()) && matches!(flag(e.value.as_deref()), Flag::Off { .. }));
            let level = LEVEL_KEYS.contains(&key.as_str())
                && e.value.as_deref().is_some_and(|v| PRIVATE_LEVELS.contains(&norm(v.trim_matches(['"', '\''])).as_str()));
            if (privacy || level) && e.place != Place::Body {
                local(
                    marks,
                    format!("`{shown}`"),
                    Some(format!("`{shown}` is not a lode setting; lode keeps this note on this machine as if it said `no_egress: true` (write that to say so)")),
                );
            }
        }
    }
}

/// Reads the frontmatter into `entries`; returns where the body starts.
fn frontmatter(text: &str, entries: &mut Vec<Entry>) -> usize {
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    // Blank lines before a fence: not frontmatter to any markdown tool, but plainly meant as it.
    let mut at = bom;
    let mut blank_lead = false;
    while let Some(nl) = text[at..].find('\n') {
        if text[at..at + nl].trim().is_empty() {
            at += nl + 1;
            blank_lead = true;
        } else {
            break;
        }
    }
    let rest = &text[at..];
    if rest.starts_with('{') {
        // A JSON object as frontmatter (Hugo's style).
        let mut it = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
        if let Some(Ok(serde_json::Value::Object(map))) = it.next() {
            let end = at + it.byte_offset();
            json_entries(&map, &mut Vec::new(), at..end, entries);
            return end;
        }
        return bom;
    }
    let fence = ["---", "+++", ";;;"].into_iter().find(|f| {
        rest.starts_with(f)
            && rest[3..].chars().next().is_none_or(|c| c == '\n' || c == '\r')
            && !rest[3..].starts_with(f.chars().next().unwrap_or('-'))
    });
    let Some(fence) = fence else { return bom };
    let open_end = at + rest.find('\n').map_or(rest.len(), |n| n + 1);
    // The closing fence; without one, the block runs to the first blank line.
    let mut close = None;
    let mut pos = open_end;
    for line in text[open_end..].split_inclusive('\n') {
        let t = line.trim_end();
        if t == fence || (fence == "---" && t == "...") {
            close = Some((pos, pos + line.len()));
            break;
        }
        pos += line.len();
    }
    let (inner_end, body_start, place) = match close {
        Some((s, e)) => {
            (s, e, if blank_lead { Place::Misplaced("the frontmatter does not start on the first line") } else { Place::Frontmatter })
        }
        None => {
            let end = text[open_end..].find("\n\n").map_or(text.len(), |n| open_end + n + 1);
            (end, end, Place::Misplaced("the frontmatter has no closing fence"))
        }
    };
    let inner = &text[open_end..inner_end];
    if inner.trim_start().starts_with('{') || fence == ";;;" {
        let lead = inner.len() - inner.trim_start().len();
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(inner.trim()) {
            json_entries(&map, &mut Vec::new(), open_end + lead..inner_end, entries);
            return body_start;
        }
        // A YAML flow mapping (`{no_egress: true}`): read its pairs.
        flow_entries(inner, open_end, entries);
        for e in entries.iter_mut() {
            e.place = Place::Json;
        }
        return body_start;
    }
    if fence == "+++" {
        toml_entries(inner, open_end, place, entries);
    } else {
        yaml_entries(inner, open_end, place, entries);
    }
    body_start
}

fn json_entries(map: &serde_json::Map<String, serde_json::Value>, prefix: &mut Vec<String>, range: Range<usize>, entries: &mut Vec<Entry>) {
    for (k, v) in map {
        prefix.push(k.clone());
        match v {
            serde_json::Value::Object(m) => json_entries(m, prefix, range.clone(), entries),
            serde_json::Value::Array(a) => entries.push(Entry {
                path: prefix.clone(),
                value: None,
                items: a.iter().map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned)).collect(),
                range: range.clone(),
                place: Place::Json,
            }),
            serde_json::Value::Null => {
                entries.push(Entry { path: prefix.clone(), value: None, items: Vec::new(), range: range.clone(), place: Place::Json })
            }
            other => entries.push(Entry {
                path: prefix.clone(),
                value: Some(other.as_str().map_or_else(|| other.to_string(), str::to_owned)),
                items: Vec::new(),
                range: range.clone(),
                place: Place::Json,
            }),
        }
        prefix.pop();
    }
}

/// `{a: b, "c": d}` pairs of a YAML flow mapping (one level).
fn flow_entries(inner: &str, offset: usize, entries: &mut Vec<Entry>) {
    let body = inner.trim().trim_start_matches('{').trim_end_matches('}');
    for pair in body.split(',') {
        if let Some((k, v)) = pair.split_once(':') {
            let k = unquote(k.trim());
            if !k.is_empty() {
                entries.push(Entry {
                    path: vec![k.to_owned()],
                    value: Some(unquote(v.trim()).to_owned()),
                    items: Vec::new(),
                    range: offset..offset + inner.len(),
                    place: Place::Json,
                });
            }
        }
    }
}

fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|x| x.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

/// A value: unquoted, without a trailing comment; inline lists split into items.
fn scalar(raw: &str) -> (Option<String>, Vec<String>) {
    let v = raw.trim();
    if v.starts_with('[') {
        let inner = lode_core::frontmatter::strip_comment(v).trim().trim_start_matches('[').trim_end_matches(']');
        return (None, inner.split(',').map(|x| unquote(x.trim()).to_owned()).filter(|x| !x.is_empty()).collect());
    }
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q) {
            if let Some(end) = inner.find(q) {
                return (Some(inner[..end].to_owned()), Vec::new());
            }
        }
    }
    let v = lode_core::frontmatter::strip_comment(v).trim();
    ((!v.is_empty()).then(|| v.to_owned()), Vec::new())
}

/// Splits `key: value` (the key may be quoted and hold spaces); `None` when the line is no pair.
fn split_pair(line: &str, sep: char) -> Option<(String, &str)> {
    let t = line.trim_start();
    if let Some(q) = t.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let close = t[1..].find(q)? + 1;
        let after = t[close + 1..].trim_start();
        let rest = after.strip_prefix(sep)?;
        return Some((t[1..close].to_owned(), rest));
    }
    // The first separator followed by a space or the end (so `a:b` in a URL value is no key).
    let mut idx = None;
    for (i, c) in t.char_indices() {
        if c == sep && t[i + 1..].chars().next().is_none_or(|n| n.is_whitespace() || sep == '=') {
            idx = Some(i);
            break;
        }
        if sep == ':' && c == '#' && i > 0 && t[..i].ends_with(' ') {
            return None;
        }
    }
    let i = idx?;
    let key = t[..i].trim();
    // A key is a name, not a sentence.
    (!key.is_empty() && key.len() <= 40 && key.split_whitespace().count() <= 3).then(|| (key.to_owned(), &t[i + 1..]))
}

/// The lines of a frontmatter block as a reader parses them: a flow list or map spread over
/// several lines (`tags:` then `[` … `]` below it, as formatters wrap long lists) is one line,
/// with its line breaks as spaces. Each with the bytes (in `inner`) it spans, without its line
/// break.
fn logical_lines(inner: &str) -> Vec<(Range<usize>, String)> {
    let raw: Vec<(usize, &str)> = {
        let mut pos = 0;
        inner
            .split_inclusive('\n')
            .map(|l| {
                let at = pos;
                pos += l.len();
                (at, l)
            })
            .collect()
    };
    let depth = |s: &str| s.matches(['[', '{']).count() as i64 - s.matches([']', '}']).count() as i64;
    let mut out: Vec<(Range<usize>, String)> = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        let (at, first) = raw[i];
        let mut joined = first.trim_end_matches(['\n', '\r']).to_owned();
        let mut end = at + joined.len();
        i += 1;
        // A key with no value whose value opens on the next line.
        let opens_below = joined.trim_end().ends_with(':') && raw.get(i).is_some_and(|(_, n)| n.trim_start().starts_with(['[', '{']));
        if opens_below || depth(&joined) > 0 {
            while i < raw.len() && (depth(&joined) > 0 || (opens_below && !joined.contains(['[', '{']))) {
                joined.push(' ');
                joined.push_str(raw[i].1.trim());
                end = raw[i].0 + raw[i].1.trim_end().len();
                i += 1;
            }
        }
        out.push((at..end, joined));
    }
    out
}

fn yaml_entries(inner: &str, offset: usize, place: Place, entries: &mut Vec<Entry>) {
    // (indent, key) of the open parents.
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut last_open: Option<usize> = None; // entry index of a key with no value, for `- item` lines
    for (span, line) in logical_lines(inner) {
        let content = line.trim_end();
        let t = content.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let indent = content.len() - t.len();
        let range = offset + span.start + indent..offset + span.end;
        if let Some(item) = t.strip_prefix("- ").or_else(|| (t == "-").then_some("")) {
            if let Some(i) = last_open {
                let (v, _) = scalar(item);
                if let Some(v) = v {
                    entries[i].items.push(v);
                    entries[i].range.end = range.end;
                }
            }
            continue;
        }
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let (pair, place) = match split_pair(t, ':') {
            // A separator YAML does not read as one (a no-break space after the colon).
            Some((k, raw)) if raw.starts_with(|c: char| c.is_whitespace() && c != ' ' && c != '\t') => {
                (Some((k, raw)), Place::Misplaced("the space after the colon is not a plain space, so YAML reads the line as text"))
            }
            Some(p) => (Some(p), place),
            // `no-egress:true`: no space after the colon, so YAML reads it as text.
            None => match t.split_once(':') {
                Some((k, raw)) if is_lode_key(&norm(k)) => (
                    Some((k.trim().to_owned(), raw)),
                    Place::Misplaced("there is no space after the colon, so YAML reads the line as text"),
                ),
                _ => (None, place),
            },
        };
        let Some((key, raw)) = pair else { continue };
        let mut path: Vec<String> = stack.iter().map(|(_, k)| k.clone()).collect();
        path.extend(key.split('.').map(str::to_owned).filter(|k| !k.is_empty()));
        // A flow mapping as the value (`lode: {egress: local}`): its pairs, under the key.
        if raw.trim_start().starts_with('{') {
            let mut inner = Vec::new();
            flow_entries(raw, range.start, &mut inner);
            for mut e in inner {
                let mut p = path.clone();
                p.append(&mut e.path);
                entries.push(Entry { path: p, value: e.value, items: e.items, range: range.clone(), place });
            }
            last_open = None;
            continue;
        }
        let (value, items) = scalar(raw);
        let open = value.is_none() && items.is_empty();
        entries.push(Entry { path, value, items, range, place });
        last_open = open.then_some(entries.len() - 1);
        if open {
            stack.push((indent, key));
        }
    }
}

fn toml_entries(inner: &str, offset: usize, place: Place, entries: &mut Vec<Entry>) {
    let mut table: Vec<String> = Vec::new();
    for (span, line) in logical_lines(inner) {
        let line = line.as_str();
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t.starts_with('[') && t.ends_with(']') {
            table = t.trim_matches(['[', ']']).split('.').map(|s| unquote(s.trim()).to_owned()).collect();
            continue;
        }
        let Some((key, raw)) = split_pair(t, '=') else { continue };
        let (value, items) = scalar(raw);
        let mut path = table.clone();
        path.extend(key.split('.').map(|s| unquote(s.trim()).to_owned()));
        let indent = line.len() - line.trim_start().len();
        entries.push(Entry { path, value, items, range: offset + span.start + indent..offset + span.end, place });
    }
}

/// Byte ranges of code: fenced blocks, indented blocks after a blank line, inline code spans.
fn code_ranges(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut fence: Option<(char, usize, usize)> = None; // (char, length, start)
    let mut prev_blank = true;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let run = |c: char| t.chars().take_while(|x| *x == c).count();
        match fence {
            Some((c, n, s)) => {
                if run(c) >= n && t[run(c) * c.len_utf8()..].trim().is_empty() {
                    out.push(s..pos);
                    fence = None;
                }
            }
            None => {
                if indent <= 3 && (run('`') >= 3 || run('~') >= 3) {
                    let c = if run('`') >= 3 { '`' } else { '~' };
                    fence = Some((c, run(c), start));
                } else if line.starts_with("    ") || line.starts_with('\t') {
                    // A nested list item after a blank line is a list, not code.
                    let item = t.starts_with(['-', '*', '+']) && t[1..].starts_with([' ', '\t'])
                        || t.split_once(['.', ')'])
                            .is_some_and(|(n, rest)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && rest.starts_with(' '));
                    if prev_blank && !t.trim().is_empty() && !item {
                        out.push(start..pos);
                        continue;
                    }
                } else {
                    // Inline code spans on this line.
                    let b = line.as_bytes();
                    let mut i = 0;
                    while i < b.len() {
                        if b[i] == b'`' {
                            let n = b[i..].iter().take_while(|x| **x == b'`').count();
                            let close = line[i + n..].find(&"`".repeat(n)).map(|k| i + n + k + n);
                            match close {
                                Some(e) => {
                                    out.push(start + i..start + e);
                                    i = e;
                                }
                                None => i += n,
                            }
                        } else {
                            i += 1;
                        }
                    }
                }
            }
        }
        prev_blank = t.trim().is_empty();
    }
    if let Some((_, _, s)) = fence {
        out.push(s..text.len());
    }
    out
}

fn in_code(code: &[Range<usize>], at: usize) -> bool {
    code.iter().any(|r| r.contains(&at))
}

/// `no_egress: …` / `egress: …` lines in the body (outside code): a flag written in the wrong
/// place still keeps the note local.
fn body_lines(text: &str, from: usize, code: &[Range<usize>], entries: &mut Vec<Entry>) {
    let mut pos = from;
    for line in text[from..].split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        if in_code(code, start) {
            continue;
        }
        let content = line.trim_end();
        let t = content.trim_start().trim_start_matches(['-', '*', '>', ' ']);
        // A flag hidden from the rendered note is a flag all the same: `<!-- no_egress: true -->`
        // (an HTML comment) and `%% no_egress: true %%` (an Obsidian comment).
        let t = t.strip_prefix("<!--").map_or(t, |r| r.trim_end().trim_end_matches("-->").trim());
        let t = if t.starts_with("%%") { t.trim_matches('%').trim() } else { t };
        let Some((key, raw)) = split_pair(t, ':').or_else(|| split_pair(t, '=')) else { continue };
        let k = norm(&key);
        if k != NO_EGRESS && k != EGRESS {
            continue;
        }
        let (value, items) = scalar(raw);
        let indent = content.len() - t.len();
        entries.push(Entry { path: vec![key], value, items, range: start + indent..start + content.len(), place: Place::Body });
    }
}

/// `#no-egress` tags in the body (outside code), as Obsidian reads tags: after the start of a
/// line or whitespace, ending at a character that cannot continue a tag.
fn inline_tags(text: &str, from: usize, code: &[Range<usize>]) -> Vec<(Range<usize>, String)> {
    let mut out = Vec::new();
    let mut i = from;
    while let Some(k) = text[i..].find('#') {
        let at = i + k;
        i = at + 1;
        if text[..at].chars().next_back().is_some_and(|c| !c.is_whitespace() && !matches!(c, '(' | '[' | ',' | '*' | '_')) {
            continue;
        }
        let end = text[at + 1..].find(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '/'))).map_or(text.len(), |e| at + 1 + e);
        let tag = &text[at + 1..end];
        if (is_egress_tag(tag) || is_private_tag(tag)) && !in_code(code, at) {
            out.push((at..end, format!("#{tag}")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(text: &str) -> Option<String> {
        read(text).local
    }

    #[test]
    fn documented_spellings_are_silent() {
        for text in [
            "---\nno_egress: true\n---\n# A\n",
            "---\nNo-Egress: yes # private\n---\n",
            "---\nnoegress: 1\n---\n",
            "---\nno_egress: 2\n---\n",
            "---\n\"no_egress\": true\n---\n",
            "---\negress: local\n---\n",
            "+++\nno_egress = true\n+++\n",
            "---\ntags: [work, no-egress]\n---\n",
            "---\ntags:\n  - work\n  - no-egress\n---\n",
            "# Diary\n\nToday. #no-egress\n",
        ] {
            let m = read(text);
            assert!(m.local.is_some(), "{text:?}");
            assert!(m.near_misses.is_empty(), "{text:?}: {:?}", m.near_misses);
        }
        for text in ["---\nno_egress: false\n---\n", "---\negress: remote\n---\n", "# Plain\n\nWords.\n", "---\nno_egress: 0\n---\n"] {
            assert_eq!(read(text), Marks::default(), "{text:?}");
        }
    }

    #[test]
    fn near_misses_keep_the_note_local_and_say_so() {
        for (text, says) in [
            ("---\negress: never\n---\n", "`never` is read as `local`"),
            ("---\nno egress: true\n---\n", "did you mean `no_egress`"),
            ("---\nno_egres: true\n---\n", "did you mean `no_egress`"),
            ("---\nno_egress: maybe\n---\n", "`maybe` is not true or false"),
            ("---\nno_egress:\n---\n", "has no value"),
            ("---\negress: ask-me\n---\n", "not `local` or `remote`"),
            ("---\nlode:\n  no_egress: true\n---\n", "nested key"),
            ("---\nlode.no_egress: true\n---\n", "nested key"),
            ("---\nprivate: true\n---\n", "not a lode setting"),
            ("\n---\nno_egress: true\n---\n", "does not start on the first line"),
            ("---\nno_egress: true\n\n# Body\n", "no closing fence"),
            ("{\"no_egress\": true, \"title\": \"x\"}\n# Body\n", "JSON"),
            ("---\n{\"no_egress\": true}\n---\n", "JSON"),
            ("# Title\n\nno_egress: true\n\nBody.\n", "outside the frontmatter"),
            ("---\nno_egress: y\n---\n", "is read as true"),
        ] {
            let m = read(text);
            assert!(m.local.is_some(), "{text:?}");
            assert!(m.near_misses.iter().any(|n| n.withholds && n.message.contains(says)), "{text:?}: {:?}", m.near_misses);
        }
    }

    #[test]
    fn mentions_are_not_marks() {
        for text in [
            "# Setup\n\nAdd `no_egress: true` to keep a note local.\n",
            "# Setup\n\n```yaml\nno_egress: true\n```\n",
            "# Setup\n\n    no_egress: true\n",
            "# Tags\n\nThe `#no-egress` tag.\n",
            "# Issue\n\nSee issue#no-egress for details.\n",
            "---\ntitle: no_egress: true\n---\n",
        ] {
            assert_eq!(local(text), None, "{text:?}");
        }
    }

    #[test]
    fn never_panics_on_odd_text() {
        for text in [
            "",
            "---",
            "---\n",
            "+++\n+++",
            "{",
            "{}",
            "\u{feff}---\nno_egress: true\n---",
            "---\n: x\n---",
            "#",
            "#no-egress",
            "é#no-egress",
            "---\n\"\n---",
        ] {
            let _ = read(text);
        }
        assert!(local("\u{feff}---\nno_egress: true\n---").is_some());
        assert!(local("#no-egress").is_some());
    }
}
