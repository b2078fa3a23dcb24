//! Egress rules: which notes may leave the machine, what counts as leaving it, and scrubbing
//! secrets from whatever does.

use std::ops::Range;
use std::sync::OnceLock;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::Regex;
use serde_json::Value;

/// Notes that must never be sent to a remote model: by frontmatter flag or by path pattern.
#[derive(Debug, Clone, Default)]
pub struct EgressRules {
    globs: Option<GlobSet>,
    /// Per glob: it names directories only (the pattern ended in `/`), so it is tried against the
    /// directories above a note and never against the note's own path.
    dir_only: Vec<bool>,
    patterns: Vec<String>,
    /// Hosts (and their subdomains) whose snapshots stay on the machine, lower-cased.
    domains: Vec<String>,
}

impl EgressRules {
    /// `patterns` are gitignore-style patterns over vault-relative paths:
    /// - `/private/**`: a leading `/` anchors at the vault root;
    /// - `private/`: a trailing `/` names a directory (anywhere, as the pattern has no other `/`)
    ///   and covers everything below it;
    /// - `private`, `*.secret.md`: a pattern without `/` matches a file or directory of that name
    ///   at any depth; a matching directory covers everything below it;
    /// - `docs/private/*`, `**/journal-*.md`: a `/` inside anchors at the root; `*` stays within
    ///   one path segment and `**` spans any number of them.
    ///
    /// Matching ignores case, so a rule still holds on a case-insensitive file system where
    /// `Private/` and `private/` are one directory. Negation (`!`) is refused rather than
    /// ignored: a pattern the user believes re-includes notes must not silently do nothing.
    pub fn new(patterns: &[String]) -> Result<EgressRules, String> {
        if patterns.is_empty() {
            return Ok(EgressRules::default());
        }
        let mut b = GlobSetBuilder::new();
        let mut dir_only = Vec::with_capacity(patterns.len());
        for p in patterns {
            let (glob, dir) = gitignore_glob(p)?;
            let g = GlobBuilder::new(&glob)
                .literal_separator(true)
                .case_insensitive(true)
                .build()
                .map_err(|e| format!("bad no-egress pattern {p:?}: {e}"))?;
            b.add(g);
            dir_only.push(dir);
        }
        let globs = b.build().map_err(|e| e.to_string())?;
        Ok(EgressRules { globs: Some(globs), dir_only, patterns: patterns.to_vec(), domains: Vec::new() })
    }

    /// Adds domains whose snapshots may not leave the machine and which a model's tool call may
    /// not fetch. `example.com` covers `docs.example.com`; a leading `*.` or `.` is accepted.
    pub fn with_domains(mut self, domains: &[String]) -> Result<EgressRules, String> {
        for d in domains {
            let d = d.trim().trim_start_matches("*.").trim_start_matches('.').trim_end_matches('.').to_ascii_lowercase();
            if d.is_empty() || d.contains(['/', ':', ' ', '*']) {
                return Err(format!("no-egress domain {d:?}: give a host name such as `intranet.example.com`"));
            }
            self.domains.push(d);
        }
        Ok(self)
    }

    /// The configured domain covering the host of `url`, if any.
    pub fn domain_withheld(&self, url: &str) -> Option<String> {
        let host = url::Url::parse(url.trim()).ok()?.host_str()?.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.domains.iter().find(|d| host == d.as_str() || host.ends_with(&format!(".{d}"))).cloned()
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// The patterns that match none of `paths` (vault-relative note paths), in configured order:
    /// most likely typos, which the caller warns about since they withhold nothing.
    pub fn unmatched_patterns(&self, paths: &[&str]) -> Vec<String> {
        let mut used = vec![false; self.patterns.len()];
        for path in paths {
            for i in self.matching(path) {
                used[i] = true;
            }
        }
        self.patterns.iter().zip(used).filter(|(_, u)| !u).map(|(p, _)| p.clone()).collect()
    }

    /// How many of `paths` each pattern matches, in configured order (a note matched by two
    /// patterns counts for both).
    pub fn matches_per_pattern(&self, paths: &[&str]) -> Vec<(String, usize)> {
        let mut n = vec![0usize; self.patterns.len()];
        for path in paths {
            for i in self.matching(path) {
                n[i] += 1;
            }
        }
        self.patterns.iter().cloned().zip(n).collect()
    }

    /// Indices of the patterns matching a note path, ascending.
    fn matching(&self, path: &str) -> Vec<usize> {
        let Some(g) = &self.globs else { return Vec::new() };
        let path = path.replace('\\', "/");
        let path = path.trim_start_matches("./").trim_start_matches('/');
        let mut hits: Vec<usize> = g.matches(path).into_iter().filter(|&i| !self.dir_only[i]).collect();
        // Every directory above the note: a pattern matching a directory covers what is below it.
        for (end, _) in path.match_indices('/') {
            hits.extend(g.matches(&path[..end]));
        }
        hits.sort_unstable();
        hits.dedup();
        hits
    }

    /// Why a note may not leave the machine, if it may not. Metadata keys are compared without
    /// case, and a flag may be a string (`"yes"`, `"true # private"`), a bool or a number, so
    /// metadata from any source reads the same way.
    pub fn withheld_because(&self, path: &str, meta: &serde_json::Map<String, Value>) -> Option<String> {
        for (key, v) in meta {
            if matches!(key.trim().to_lowercase().as_str(), "no_egress" | "no-egress" | "noegress") && is_flag(v) {
                return Some(format!("frontmatter `{key}: true`"));
            }
        }
        for (key, v) in meta {
            if key.trim().eq_ignore_ascii_case("egress") {
                if let Some(shown) = local_only(v) {
                    return Some(format!("frontmatter `{key}: {shown}`"));
                }
            }
        }
        if path.contains("://") {
            // A snapshot: its path is the page's URL, and its text may come from where that
            // redirected.
            let landed = meta.get("final_url").and_then(|v| v.as_str());
            if let Some(d) = std::iter::once(path).chain(landed).find_map(|u| self.domain_withheld(u)) {
                return Some(format!("snapshot of a no-egress domain ({d})"));
            }
        }
        let which = self.matching(path).first().map(|&i| self.patterns[i].clone())?;
        Some(format!("path matches no-egress pattern {which:?}"))
    }
}

/// A gitignore-style pattern as a glob for [`GlobSet`], and whether it names directories only.
fn gitignore_glob(pattern: &str) -> Result<(String, bool), String> {
    let p = pattern.trim();
    if p.is_empty() {
        return Err("empty no-egress pattern".to_owned());
    }
    if p.starts_with('!') {
        return Err(format!("no-egress pattern {pattern:?}: negation is not supported (a note matching any pattern is withheld)"));
    }
    let rooted = p.starts_with('/') || p.starts_with("./");
    let p = p.trim_start_matches("./").trim_start_matches('/');
    let dir_only = p.ends_with('/');
    let body = p.trim_end_matches('/');
    if body.is_empty() {
        // `/`: the vault root itself, so every note.
        return Ok(("**".to_owned(), false));
    }
    // As in gitignore, a `/` at the start or inside anchors the pattern at the root; without
    // one it matches at any depth.
    let glob = if rooted || body.contains('/') { body.to_owned() } else { format!("**/{body}") };
    Ok((glob, dir_only))
}

/// Whether a `no_egress` value turns the flag on.
fn is_flag(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => lode_core::frontmatter::is_true(s),
        _ => false,
    }
}

/// An `egress` value that keeps the note on the machine, as it reads in the reason.
fn local_only(v: &Value) -> Option<String> {
    match v {
        Value::Bool(false) => Some("false".to_owned()),
        Value::Number(n) if n.as_f64() == Some(0.0) => Some(n.to_string()),
        Value::String(s) => {
            let s = lode_core::frontmatter::strip_comment(s).trim().trim_matches(['"', '\'']).trim().to_lowercase();
            matches!(s.as_str(), "none" | "no" | "false" | "local" | "off").then_some(s)
        }
        _ => None,
    }
}

/// `host[:port]` of an endpoint URL.
pub fn destination(endpoint: &str) -> String {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    // URL parsers end the authority at `\` too: `http://evil.com\@127.0.0.1` is evil.com.
    let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or("");
    authority.rsplit_once('@').map_or(authority, |(_, h)| h).to_owned()
}

/// Whether an endpoint is on this machine (loopback), so nothing sent to it leaves the machine.
/// A `\` before the path makes the host ambiguous (URL parsers and HTTP clients disagree on
/// where the authority ends), and an ambiguous host is not loopback.
pub fn is_loopback(endpoint: &str) -> bool {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    if rest.split(['/', '?', '#']).next().unwrap_or("").contains('\\') {
        return false;
    }
    let dest = destination(endpoint);
    let host = if let Some(rest) = dest.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        dest.rsplit_once(':').map_or(dest.as_str(), |(h, p)| if p.bytes().all(|b| b.is_ascii_digit()) { h } else { dest.as_str() })
    };
    let host = host.to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

struct SecretPattern {
    kind: &'static str,
    re: Regex,
    /// Capture group holding the secret (0 = the whole match).
    group: usize,
}

/// Secrets recognisable by their own shape, most specific first: where two findings overlap,
/// the kind of the earlier pattern names the merged redaction.
fn patterns() -> &'static [SecretPattern] {
    static P: OnceLock<Vec<SecretPattern>> = OnceLock::new();
    P.get_or_init(|| {
        let p = |kind, re: &str, group| SecretPattern { kind, re: Regex::new(re).expect("secret pattern compiles"), group };
        vec![
            // A key block; without its END line (text cut short) everything after BEGIN goes.
            p(
                "private-key",
                r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)",
                0,
            ),
            // The tail of a key block whose BEGIN line lies before the text (text cut short).
            p("private-key", r"(?m)(?:^[ \t]*[A-Za-z0-9+/=]{16,}[ \t]*\r?\n)+[ \t]*-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----", 0),
            p("aws-access-key", r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)", 0),
            p("github-token", r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})(?-u:\b)", 0),
            p("gitlab-token", r"(?-u:\b)gl(?:pat|ptt|dt|rt|ft|soat)-[A-Za-z0-9_\-]{20,}", 0),
            p("stripe-key", r"(?-u:\b)(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}", 0),
            p("api-key", r"(?-u:\b)sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}", 0),
            p("slack-token", r"(?-u:\b)xox[abprs]-[A-Za-z0-9\-]{10,}", 0),
            p("google-api-key", r"(?-u:\b)AIza[0-9A-Za-z_\-]{35,}", 0),
            p("jwt", r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", 0),
            p(
                "auth-header",
                r#"(?i)(?-u:\b)authorization(?-u:\b)["']?[ \t]*[:=][ \t]*["']?(?:bearer|basic|token|digest)[ \t]+([^\s"',;]+)"#,
                1,
            ),
            p("bearer-token", r"(?i)(?-u:\b)bearer\s+([A-Za-z0-9._~+/\-]{20,}=*)", 1),
            // The password of `scheme://user:password@host`, greedy up to the authority's last
            // `@`. The scheme plays no part: what is glued before `://` cannot hide the password.
            p("url-credential", r"://[^\s/?#@:]*:([^\s/?#]+)@", 1),
        ]
    })
}

/// Words that name a secret inside a key (`DB_PASSWORD`, `apiKey`, `x-auth-token`).
const KEYWORDS: &[&str] = &[
    "password", "passwd", "pwd", "passphrase", "secret", "secretkey", "token", "apikey", "api_key", "api-key", "privatekey",
    "private_key", "private-key", "accesskey", "access_key", "access-key", "credential",
];

/// Last words of a key that describe a secret rather than hold one (`password_policy`,
/// `token_url`, `api_key_env`, `secret_rotation_days`).
const DESCRIPTORS: &[&str] = &[
    "policy", "policies", "hint", "length", "len", "min", "max", "minimum", "maximum", "count", "limit", "limits", "budget",
    "size", "ttl", "expiry", "expires", "expiration", "lifetime", "timeout", "age", "days", "hours", "minutes", "seconds",
    "secs", "rotation", "reset", "url", "uri", "endpoint", "file", "path", "dir", "env", "var", "type", "kind", "name",
    "header", "manager", "store", "format", "required", "enabled", "strength", "prompt",
];

/// `key: value` and `KEY=value` assignments (also `"key": "value"`, `**Key:** value`,
/// `export KEY="value"`, `key => 'value'`); whether the key names a secret is decided in code.
fn assignment_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r#"(?P<key>[A-Za-z0-9_.\-]*(?i:password|passwd|pwd|passphrase|secret|token|api[_\-]?key|private[_\-]?key|access[_\-]?key|credential)[A-Za-z0-9_.\-]*)["'`]?[*_]{0,2}[ \t]*(?::=|=>|[:=])[*_]{0,2}[ \t]*(?:"(?P<dq>[^"\r\n]+)"|'(?P<sq>[^'\r\n]+)'|`(?P<bq>[^`\r\n]+)`|(?P<bare>[^\s"'`]+))"#,
        )
        .expect("assignment pattern compiles")
    })
}

/// A key line opening a YAML block scalar (`password: |`, `- private_key: >-  # pem`).
fn block_key_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r#"(?mR)^(?P<indent>[ \t]*)(?:-[ \t]+)?["']?(?P<key>[A-Za-z0-9_.\-]+)["']?[ \t]*:[ \t]*[|>][0-9+\-]*[ \t]*(?:#.*)?$"#)
            .expect("block key pattern compiles")
    })
}

/// A redaction already in the text: never redacted again, so `redact` is idempotent.
fn marker_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"\[REDACTED:[a-z0-9\-]+\]").expect("marker pattern compiles"))
}

/// Whether `key` names a secret, given the value assigned to it: it contains a keyword that ends
/// a word (`DB_PASSWORD`, `passwords`, `apiKeyId`, not `tokenizer` or `secretary`), and its last
/// word is no descriptor. `tokens` holding a count (`max_tokens: 1024`) is a size, not a secret.
fn secret_key(key: &str, value: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let named = KEYWORDS.iter().any(|kw| lower.match_indices(kw).any(|(i, _)| keyword_ends(key.as_bytes(), i + kw.len())));
    if !named {
        return false;
    }
    let last = last_word(key);
    if DESCRIPTORS.contains(&last.as_str()) {
        return false;
    }
    !(last == "tokens" && is_count(value))
}

/// Whether a keyword ending at byte `end` of a key ends a word there: at the end, before a
/// non-letter, before a plural `s`, or at a camelCase boundary.
fn keyword_ends(key: &[u8], end: usize) -> bool {
    match key.get(end) {
        None => true,
        Some(c) if !c.is_ascii_alphabetic() => true,
        Some(b's' | b'S') if key.get(end + 1).is_none_or(|c| !c.is_ascii_alphabetic()) => true,
        Some(c) => c.is_ascii_uppercase() && key[end - 1].is_ascii_lowercase(),
    }
}

/// The last word of a key, lowercase: after the last `_`, `-`, `.` or space, and after the last
/// camelCase boundary.
fn last_word(key: &str) -> String {
    let seg = key.rsplit(|c: char| !c.is_ascii_alphanumeric()).find(|s| !s.is_empty()).unwrap_or("");
    let b = seg.as_bytes();
    let start = (1..b.len()).rev().find(|&i| b[i].is_ascii_uppercase() && b[i - 1].is_ascii_lowercase()).unwrap_or(0);
    seg[start..].to_ascii_lowercase()
}

fn is_count(v: &str) -> bool {
    v.starts_with(|c: char| c.is_ascii_digit()) && v.chars().all(|c| c.is_ascii_digit() || c == '_' || c == ',')
}

/// A finding: bytes to replace, the kind named in the marker, and the rank of the rule that found
/// it (lower = more specific).
struct Hit {
    range: Range<usize>,
    kind: &'static str,
    rank: usize,
}

/// Replaces secrets (API keys, tokens, private keys, credential assignments, URL passwords,
/// secret YAML blocks and table cells) with `[REDACTED:kind]`. Returns the scrubbed text and how
/// many were replaced.
///
/// Rules that need context (a key before a value, a table header above a cell, a key line above
/// a YAML block) only see what is in `text`, so give it the whole note, not a window of it.
/// Works on any UTF-8 text (findings start and end on character boundaries) and is idempotent:
/// text inside an existing `[REDACTED:…]` marker is never a finding, and passes repeat until one
/// finds nothing, so redacting the result again finds nothing.
pub fn redact(text: &str) -> (String, usize) {
    let (mut out, mut count) = redact_once(text);
    // A marker can expose what the text it replaced hid (text glued to a secret reads apart
    // once the secret is a marker), so repeat until a pass finds nothing. Each pass that finds
    // something turns at least one byte outside markers into a marker and never touches one,
    // so this ends; the bound only caps work on text built to chain findings.
    let mut passes = 1;
    while passes < 32 {
        let (next, n) = redact_once(&out);
        if n == 0 {
            break;
        }
        (out, count, passes) = (next, count + n, passes + 1);
    }
    (out, count)
}

/// One pass of [`redact`].
fn redact_once(text: &str) -> (String, usize) {
    // Rules run on the text with each existing marker masked as a run of U+0001 as long as the
    // marker: an opaque run that is neither space nor word nor in any rule's character class, so
    // its `:` and brackets cannot change how the text around it parses, and it cannot lengthen a
    // token next to it into a finding. Byte offsets stay the same.
    let markers: Vec<Range<usize>> = marker_re().find_iter(text).map(|m| m.range()).collect();
    let mut masked = text.to_owned();
    for m in &markers {
        masked.replace_range(m.clone(), &"\u{1}".repeat(m.len()));
    }
    let mut hits: Vec<Hit> = Vec::new();
    let shaped = patterns();
    for (rank, p) in shaped.iter().enumerate() {
        for caps in p.re.captures_iter(&masked) {
            if let Some(m) = caps.get(p.group) {
                hits.push(Hit { range: m.range(), kind: p.kind, rank });
            }
        }
    }
    let rank = shaped.len();
    assignments(&masked, rank, &mut hits);
    yaml_blocks(&masked, rank, &mut hits);
    table_cells(&masked, rank, &mut hits);

    // Findings minus existing markers. What a marker leaves of a finding (the quote or full stop
    // after it) is kept unless it holds more than punctuation.
    let mut pieces: Vec<Hit> = Vec::with_capacity(hits.len());
    for h in hits {
        let mut start = h.range.start;
        let mut cut = false;
        for m in markers.iter().filter(|m| m.start < h.range.end && h.range.start < m.end) {
            push_piece(text, start..m.start.max(start), &h, true, &mut pieces);
            start = start.max(m.end);
            cut = true;
        }
        push_piece(text, start..h.range.end, &h, cut, &mut pieces);
    }

    // Overlapping findings become one redaction, named by the most specific rule among them.
    pieces.sort_by_key(|h| (h.range.start, h.rank));
    let mut merged: Vec<Hit> = Vec::with_capacity(pieces.len());
    for h in pieces {
        match merged.last_mut() {
            Some(last) if h.range.start < last.range.end => {
                last.range.end = last.range.end.max(h.range.end);
                if h.rank < last.rank {
                    last.rank = h.rank;
                    last.kind = h.kind;
                }
            }
            _ => merged.push(h),
        }
    }

    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for h in &merged {
        out.push_str(&text[at..h.range.start]);
        out.push_str("[REDACTED:");
        out.push_str(h.kind);
        out.push(']');
        at = h.range.end;
    }
    out.push_str(&text[at..]);
    (out, merged.len())
}

/// Redacts a question before it goes to a remote model: the question leaves the machine too, and
/// people paste secrets into questions ("why does `DB_PASSWORD=…` fail?"). The same rules as
/// [`redact`]; a named entry point so every path that sends text off the machine says so.
pub fn redact_question(q: &str) -> (String, usize) {
    redact(q)
}

/// Adds the part of a finding in `range`, trimmed of whitespace, if anything is left; of a piece
/// `cut` by a marker, only if it holds more than ASCII punctuation. (A secret may be all symbols
/// or emoji, so an uncut finding is never judged by its characters.)
fn push_piece(text: &str, range: Range<usize>, of: &Hit, cut: bool, out: &mut Vec<Hit>) {
    if range.start >= range.end {
        return;
    }
    let s = &text[range.clone()];
    let start = range.start + (s.len() - s.trim_start().len());
    let end = range.end - (s.len() - s.trim_end().len());
    if start < end && (!cut || text[start..end].chars().any(|c| !c.is_ascii_punctuation())) {
        out.push(Hit { range: start..end, kind: of.kind, rank: of.rank });
    }
}

/// Values assigned to keys that name a secret, however short (`password: abc`).
fn assignments(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    let re = assignment_re();
    let mut at = 0;
    while let Some(c) = re.captures_at(text, at) {
        let whole = c.get(0).expect("group 0 always matches");
        let value = ["dq", "sq", "bq", "bare"].iter().find_map(|g| c.name(g)).expect("one value alternative matches");
        let key = c.name("key").map_or("", |k| k.as_str());
        // A block scalar's indicator is no value: its lines are found by `yaml_blocks`.
        let indicator = c.name("bare").is_some_and(|b| is_block_indicator(b.as_str()));
        if !indicator && secret_key(key, value.as_str()) {
            hits.push(Hit { range: value.range(), kind: "credential", rank });
            at = whole.end();
        } else {
            // Not a secret's key: its value may still hold an assignment (`url: token=abc`).
            at = value.start().max(whole.start() + 1);
            while !text.is_char_boundary(at) {
                at += 1;
            }
        }
    }
}

fn is_block_indicator(v: &str) -> bool {
    v.starts_with(['|', '>']) && v[1..].bytes().all(|b| b.is_ascii_digit() || b == b'+' || b == b'-')
}

/// Every line, with the byte offset where it starts; without its `\n` or `\r\n`.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut start = 0;
    text.split('\n').map(move |l| {
        let at = start;
        start += l.len() + 1;
        (at, l.strip_suffix('\r').unwrap_or(l))
    })
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// The lines of a YAML block scalar under a key that names a secret (`password: |`), each
/// redacted apart so the block keeps its shape.
fn yaml_blocks(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    for c in block_key_re().captures_iter(text) {
        let key = c.name("key").map_or("", |k| k.as_str());
        if !secret_key(key, "") {
            continue;
        }
        let key_indent = c.name("indent").map_or(0, |m| m.len());
        let whole = c.get(0).expect("group 0 always matches");
        let Some(nl) = text[whole.end()..].find('\n') else { continue };
        let body = whole.end() + nl + 1;
        // Blank lines stay inside the block; the first line indented no deeper than the key ends it.
        for (off, line) in lines(&text[body..]) {
            if line.trim().is_empty() {
                continue;
            }
            let indent = indent_of(line);
            if indent <= key_indent {
                break;
            }
            let start = body + off + indent;
            hits.push(Hit { range: start..start + line.trim_end().len() - indent, kind: "credential", rank });
        }
    }
}

/// Cell contents of a table row, as byte ranges of `line` (trimmed; `\|` does not split).
fn cells(line: &str) -> Vec<Range<usize>> {
    let lead = indent_of(line);
    let first = lead + usize::from(line[lead..].starts_with('|'));
    let bytes = line.as_bytes();
    let mut out = Vec::new();
    let mut start = first;
    for i in first..=line.len() {
        // Only an ASCII `|` (a character boundary) or the end of the line closes a cell.
        let closes = i == line.len() || (bytes[i] == b'|' && (i == 0 || bytes[i - 1] != b'\\'));
        if closes {
            let cell = &line[start..i];
            let s = start + (cell.len() - cell.trim_start().len());
            out.push(s..s + cell.trim().len());
            start = i + 1;
        }
    }
    // A closing `|` leaves an empty last cell that is no cell.
    if line.trim_end().ends_with('|') && out.last().is_some_and(|r| r.is_empty()) {
        out.pop();
    }
    out
}

fn is_delimiter_row(line: &str) -> bool {
    let t = line.trim().trim_start_matches('|').trim_end_matches('|');
    // GFM: a delimiter row has a `|` even with one column; `---` alone is a rule or a heading.
    line.contains('|')
        && line.contains('-')
        && t.split('|').all(|c| {
            let c = c.trim();
            let c = c.strip_prefix(':').unwrap_or(c);
            let c = c.strip_suffix(':').unwrap_or(c);
            !c.is_empty() && c.bytes().all(|b| b == b'-')
        })
}

/// A cell that reads as a key name (`password`, `DB_PASSWORD`, `**API key**`): the name with
/// spaces as `_`, if the cell is short, plain ASCII words.
fn cell_name(cell: &str) -> Option<String> {
    let c = cell.trim_matches(['*', '`', '_', ' ']).trim_end_matches(':').trim();
    let plain = c.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b' ' | b'_' | b'.' | b'-'));
    (!c.is_empty() && c.len() <= 40 && plain && c.split_whitespace().count() <= 3).then(|| c.split_whitespace().collect::<Vec<_>>().join("_"))
}

/// Secret cells of markdown tables: the cell after one naming a secret (`| prod db | password |
/// hunter2 |`), and every body cell under a header naming one (`| service | token |`, `| key |`).
fn table_cells(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    let all: Vec<(usize, &str)> = lines(text).collect();
    let mut cell_hit = |line_start: usize, r: &Range<usize>| {
        if !r.is_empty() {
            hits.push(Hit { range: line_start + r.start..line_start + r.end, kind: "credential", rank });
        }
    };
    let mut i = 0;
    while i < all.len() {
        let (start, line) = all[i];
        let is_header = line.contains('|') && all.get(i + 1).is_some_and(|(_, next)| is_delimiter_row(next));
        if !is_header {
            if line.trim_start().starts_with('|') {
                row_pairs(line, |r| cell_hit(start, r));
            }
            i += 1;
            continue;
        }
        let header: Vec<Option<String>> = cells(line).iter().map(|r| cell_name(&line[r.clone()])).collect();
        i += 2;
        while let Some(&(start, row)) = all.get(i) {
            if !row.contains('|') || row.trim().is_empty() {
                break;
            }
            let rc = cells(row);
            for (col, name) in header.iter().enumerate() {
                let (Some(name), Some(r)) = (name, rc.get(col)) else { continue };
                if name.eq_ignore_ascii_case("key") || secret_key(name, &row[r.clone()]) {
                    cell_hit(start, r);
                }
            }
            row_pairs(row, |r| cell_hit(start, r));
            i += 1;
        }
    }
}

/// Calls `hit` with each cell that follows a cell naming a secret, in one table row.
fn row_pairs(line: &str, mut hit: impl FnMut(&Range<usize>)) {
    let rc = cells(line);
    for pair in rc.windows(2) {
        let value = &line[pair[1].clone()];
        if cell_name(&line[pair[0].clone()]).is_some_and(|name| secret_key(&name, value)) {
            hit(&pair[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(patterns: &[&str]) -> EgressRules {
        EgressRules::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn meta(pairs: &[(&str, Value)]) -> serde_json::Map<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    /// `redact`, checked to be idempotent: a second pass changes nothing and counts nothing.
    fn red(text: &str) -> (String, usize) {
        let (out, n) = redact(text);
        assert_eq!(redact(&out), (out.clone(), 0), "not idempotent on {text:?}");
        (out, n)
    }

    #[test]
    fn loopback_detection() {
        for local in ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:9/v1", "http://127.5.5.5", "https://user@localhost/x"] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in [
            "https://api.openai.com/v1",
            "http://192.168.1.5:8000",
            "http://localhost.evil.com/v1",
            "http://10.0.0.1",
            "http://evil.com\\@127.0.0.1/v1",
            "http://127.0.0.1\\@evil.com/v1",
            "http://127.0.0.1@evil.com/v1",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
        assert_eq!(destination("https://key@api.example.com:443/v1/chat"), "api.example.com:443");
        assert_eq!(destination("http://evil.com\\@127.0.0.1/v1"), "evil.com");
    }

    #[test]
    fn rooted_pattern() {
        let r = rules(&["/private/**"]);
        assert_eq!(r.withheld_because("private/diary.md", &meta(&[])).as_deref(), Some("path matches no-egress pattern \"/private/**\""));
        assert!(r.withheld_because("private/a/b.md", &meta(&[])).is_some());
        assert!(r.withheld_because("notes/private/diary.md", &meta(&[])).is_none(), "anchored at the vault root");
        assert!(r.withheld_because("privateer.md", &meta(&[])).is_none());
        // Without the slash, a pattern with a `/` inside is anchored too (gitignore).
        assert!(rules(&["private/**"]).withheld_because("private/diary.md", &meta(&[])).is_some());
        assert!(rules(&["private/**"]).withheld_because("x/private/diary.md", &meta(&[])).is_none());
    }

    #[test]
    fn directory_pattern() {
        let r = rules(&["private/"]);
        for path in ["private/diary.md", "private/2024/jan.md", "notes/private/diary.md", "Private/Diary.md"] {
            assert!(r.withheld_because(path, &meta(&[])).is_some(), "{path}");
        }
        for path in ["private", "private.md", "notes/privateer/a.md", "notes/a.md"] {
            assert!(r.withheld_because(path, &meta(&[])).is_none(), "a directory pattern never matches a file: {path}");
        }
        let r = rules(&["/work/clients/"]);
        assert!(r.withheld_because("work/clients/acme.md", &meta(&[])).is_some());
        assert!(r.withheld_because("old/work/clients/acme.md", &meta(&[])).is_none());
    }

    #[test]
    fn bare_name_pattern() {
        let r = rules(&["private"]);
        for path in ["private", "notes/private", "private/diary.md", "a/b/private/c/d.md"] {
            assert!(r.withheld_because(path, &meta(&[])).is_some(), "{path}");
        }
        for path in ["private.md", "privately/a.md", "a/unprivate/b.md"] {
            assert!(r.withheld_because(path, &meta(&[])).is_none(), "{path}");
        }
    }

    #[test]
    fn wildcard_patterns() {
        let r = rules(&["*.secret.md", "**/journal-*.md"]);
        let why = |p: &str| r.withheld_because(p, &meta(&[]));
        assert_eq!(why("keys.secret.md").as_deref(), Some("path matches no-egress pattern \"*.secret.md\""));
        assert!(why("ops/deep/keys.secret.md").is_some(), "a name pattern matches at any depth");
        assert_eq!(why("journal-2024.md").as_deref(), Some("path matches no-egress pattern \"**/journal-*.md\""));
        assert!(why("me/2024/journal-03.md").is_some());
        assert!(why("keys.secret.md.bak").is_none());
        assert!(why("me/journal/notes.md").is_none());
        // `*` stays within a segment: `docs/*.md` is docs' own notes, not those below.
        let r = rules(&["docs/*.md"]);
        assert!(r.withheld_because("docs/a.md", &meta(&[])).is_some());
        assert!(r.withheld_because("docs/sub/a.md", &meta(&[])).is_none());
        // A wildcard matching a directory covers everything below it.
        assert!(rules(&["clients/*"]).withheld_because("clients/acme/contract.md", &meta(&[])).is_some());
        // Windows separators in stored paths.
        assert!(rules(&["/private/**"]).withheld_because("private\\diary.md", &meta(&[])).is_some());
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert_eq!(EgressRules::new(&["".to_owned()]).unwrap_err(), "empty no-egress pattern");
        assert_eq!(
            EgressRules::new(&["!public/**".to_owned()]).unwrap_err(),
            "no-egress pattern \"!public/**\": negation is not supported (a note matching any pattern is withheld)"
        );
        assert!(EgressRules::new(&["[".to_owned()]).unwrap_err().starts_with("bad no-egress pattern \"[\": "));
        assert!(rules(&["/"]).withheld_because("any/note.md", &meta(&[])).is_some(), "`/` is the whole vault");
    }

    #[test]
    fn unmatched_patterns_are_listed() {
        let r = rules(&["/private/**", "privat/", "*.secret.md", "**/journal-*.md", "archive"]);
        let paths = ["private/diary.md", "ops/keys.secret.md", "notes/a.md", "old/archive/2019.md"];
        assert_eq!(r.unmatched_patterns(&paths), vec!["privat/".to_owned(), "**/journal-*.md".to_owned()]);
        assert_eq!(r.unmatched_patterns(&[]).len(), 5);
        assert!(EgressRules::default().unmatched_patterns(&paths).is_empty());
    }

    #[test]
    fn frontmatter_flags_with_comments() {
        let r = EgressRules::default();
        for block in ["---\nno_egress: true  # private\n---", "---\nno-egress: yes # x\n---", "---\nNoEgress: \"on\"\n---"] {
            let m: serde_json::Map<String, Value> =
                lode_core::frontmatter::parse(block).into_iter().map(|(k, v)| (k, Value::String(v))).collect();
            let key = m.keys().next().unwrap().clone();
            assert_eq!(r.withheld_because("a.md", &m), Some(format!("frontmatter `{key}: true`")), "{block}");
        }
        // Metadata stored before comments were stripped still counts.
        assert!(r.withheld_because("a.md", &meta(&[("no_egress", "true  # private".into())])).is_some());
        for off in ["false # true", "no", ""] {
            assert_eq!(r.withheld_because("a.md", &meta(&[("no_egress", off.into())])), None, "{off:?}");
        }
    }

    #[test]
    fn flags_that_are_not_strings() {
        let r = EgressRules::default();
        let why = |k: &str, v: Value| r.withheld_because("a.md", &meta(&[(k, v)]));
        assert_eq!(why("no_egress", Value::Bool(true)).as_deref(), Some("frontmatter `no_egress: true`"));
        assert_eq!(why("noegress", 1.into()).as_deref(), Some("frontmatter `noegress: true`"));
        assert_eq!(why("No-Egress", Value::Bool(true)).as_deref(), Some("frontmatter `No-Egress: true`"));
        assert_eq!(why("no_egress", Value::Bool(false)), None);
        assert_eq!(why("no_egress", 0.into()), None);
        assert_eq!(why("no_egress", Value::Null), None);
        for (v, shown) in [("none", "none"), ("No", "no"), ("FALSE", "false"), ("local # laptop only", "local"), ("Off", "off")] {
            assert_eq!(why("egress", v.into()), Some(format!("frontmatter `egress: {shown}`")), "{v}");
        }
        assert_eq!(why("Egress", Value::Bool(false)).as_deref(), Some("frontmatter `Egress: false`"));
        assert_eq!(why("egress", "remote".into()), None);
        assert_eq!(why("egress", Value::Bool(true)), None);
    }

    #[test]
    fn shaped_secrets() {
        let text = "aws AKIAIOSFODNN7EXAMPLE and ghp_0123456789abcdefghijABCDEFGHIJ012345 \
            key sk-proj-abcdefghijklmnopqrstuvwx\npassword: hunter2hunter2\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz012345\n\
            -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\nplain words stay";
        assert_eq!(
            red(text),
            (
                "aws [REDACTED:aws-access-key] and [REDACTED:github-token] key [REDACTED:api-key]\npassword: [REDACTED:credential]\n\
                Authorization: Bearer [REDACTED:auth-header]\n[REDACTED:private-key]\nplain words stay"
                    .to_owned(),
                6
            )
        );
        for (secret, kind) in [
            ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe-key"),
            ("sk_test_4eC39HqLyjWDarjtT1zdp7dc", "stripe-key"),
            ("rk_live_51H8abcdefGHIJKLmnop", "stripe-key"),
            ("pk_live_51H8abcdefGHIJKLmnop", "stripe-key"),
            ("glpat-xY9zAbCdEfGhIjKlMnOp", "gitlab-token"),
            ("xoxb-1234567890-abcdefghij", "slack-token"),
            ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "google-api-key"),
            ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github-token"),
            ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N", "jwt"),
        ] {
            assert_eq!(red(&format!("use {secret} here")), (format!("use [REDACTED:{kind}] here"), 1), "{secret}");
        }
        assert_eq!(red("Authorization: Basic dXNlcjpwYXNz"), ("Authorization: Basic [REDACTED:auth-header]".to_owned(), 1));
    }

    #[test]
    fn cut_private_keys() {
        // A window that ends inside a key, and one that starts inside it.
        assert_eq!(
            red("before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3\nxfn/ygWyF8"),
            ("before\n[REDACTED:private-key]".to_owned(), 1)
        );
        assert_eq!(
            red("MIIEpAIBAAKCAQEA0Z3VS5JJcds3\nxfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I\n-----END RSA PRIVATE KEY-----\nafter"),
            ("[REDACTED:private-key]\nafter".to_owned(), 1)
        );
        assert_eq!(
            red("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0\n-----END PGP PRIVATE KEY BLOCK-----\nok"),
            ("[REDACTED:private-key]\nok".to_owned(), 1)
        );
    }

    #[test]
    fn assignments_are_redacted_however_short() {
        for (text, want) in [
            ("DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED:credential]"),
            ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=[REDACTED:credential]"),
            ("export API_TOKEN=\"abc123xyz\"", "export API_TOKEN=\"[REDACTED:credential]\""),
            ("GITHUB_TOKEN: ghp_0123456789abcdefghijABCDEFGHIJ012345", "GITHUB_TOKEN: [REDACTED:github-token]"),
            ("password: abc", "password: [REDACTED:credential]"),
            ("db.passwd = s3", "db.passwd = [REDACTED:credential]"),
            ("MY_APIKEY: k1", "MY_APIKEY: [REDACTED:credential]"),
            ("api_key=k2", "api_key=[REDACTED:credential]"),
            ("private_key: x", "private_key: [REDACTED:credential]"),
            ("CLIENT_CREDENTIALS=y", "CLIENT_CREDENTIALS=[REDACTED:credential]"),
            ("credential: z", "credential: [REDACTED:credential]"),
            ("aws_access_key: q", "aws_access_key: [REDACTED:credential]"),
            ("secretKey: w", "secretKey: [REDACTED:credential]"),
            ("{\"apiKey\": \"v a l\"}", "{\"apiKey\": \"[REDACTED:credential]\"}"),
            ("'password' => 'pw'", "'password' => '[REDACTED:credential]'"),
            ("**Password:** hunter2", "**Password:** [REDACTED:credential]"),
            ("- `ADMIN_PASSWORD`: `hunter2`", "- `ADMIN_PASSWORD`: `[REDACTED:credential]`"),
            ("callback?code=1&token=abc123", "callback?code=1&token=[REDACTED:credential]"),
            ("url: token=abc", "url: token=[REDACTED:credential]"),
            ("tokenizer: password=abc", "tokenizer: password=[REDACTED:credential]"),
            ("API_TOKEN=123456", "API_TOKEN=[REDACTED:credential]"),
            ("password: !@#$%^&", "password: [REDACTED:credential]"),
            ("password: [REDACTED:x]hunter2", "password: [REDACTED:x][REDACTED:credential]"),
        ] {
            assert_eq!(red(text), (want.to_owned(), 1), "{text}");
        }
        assert_eq!(
            red("the token: supersecretvalue123.\npassword = hunter2 # old"),
            ("the token: [REDACTED:credential]\npassword = [REDACTED:credential] # old".to_owned(), 2)
        );
    }

    #[test]
    fn url_credentials() {
        for (text, want) in [
            ("postgres://user:pass@host:5432/db", "postgres://user:[REDACTED:url-credential]@host:5432/db"),
            ("see https://admin:s3cr3t@example.com.", "see https://admin:[REDACTED:url-credential]@example.com."),
            ("redis://:p@ss@cache:6379/0", "redis://:[REDACTED:url-credential]@cache:6379/0"),
            ("[db](mysql+pymysql://app:x1@db.internal/app)", "[db](mysql+pymysql://app:[REDACTED:url-credential]@db.internal/app)"),
        ] {
            assert_eq!(red(text), (want.to_owned(), 1), "{text}");
        }
        for text in ["http://localhost:8080/v1", "ssh://git@github.com/a/b", "https://example.com/a:b@c", "mail me at a:b c@d.org"] {
            assert_eq!(red(text), (text.to_owned(), 0), "{text}");
        }
    }

    #[test]
    fn yaml_block_scalars() {
        let text = "db:\n  password: |\n    line one\n    line two\n\n  user: app\n";
        assert_eq!(red(text), ("db:\n  password: |\n    [REDACTED:credential]\n    [REDACTED:credential]\n\n  user: app\n".to_owned(), 2));
        let text = "private_key: >-  # pem\r\n  MIIEabc\r\n  def\r\nnext: 1\r\n";
        assert_eq!(red(text), ("private_key: >-  # pem\r\n  [REDACTED:credential]\r\n  [REDACTED:credential]\r\nnext: 1\r\n".to_owned(), 2));
        let text = "- token: |+\n    abc\nnotes: |\n  plain text stays\n";
        assert_eq!(red(text), ("- token: |+\n    [REDACTED:credential]\nnotes: |\n  plain text stays\n".to_owned(), 1));
        let text = "password_policy: |\n  at least 12 characters\n";
        assert_eq!(red(text), (text.to_owned(), 0));
    }

    #[test]
    fn table_secrets() {
        assert_eq!(
            red("| prod db | password | hunter2 |\n| staging | user | app |"),
            ("| prod db | password | [REDACTED:credential] |\n| staging | user | app |".to_owned(), 1)
        );
        let text = "| service | Token | owner |\n|---|:---:|---|\n| ci | abc123 | ops |\n| deploy |  | dev |\n\n| x | y |";
        assert_eq!(
            red(text),
            ("| service | Token | owner |\n|---|:---:|---|\n| ci | [REDACTED:credential] | ops |\n| deploy |  | dev |\n\n| x | y |".to_owned(), 1)
        );
        let text = "Name | Key\n--- | ---\nstripe | abc\\|def\ngitlab | g1";
        assert_eq!(red(text), ("Name | Key\n--- | ---\nstripe | [REDACTED:credential]\ngitlab | [REDACTED:credential]".to_owned(), 2));
        let text = "| Variable | Value |\n|---|---|\n| DB_PASSWORD | hunter2 |\n| max_tokens | 4096 |\n| password_policy | 12 chars |";
        assert_eq!(red(text), ("| Variable | Value |\n|---|---|\n| DB_PASSWORD | [REDACTED:credential] |\n| max_tokens | 4096 |\n| password_policy | 12 chars |".to_owned(), 1));
        let text = "| Secrets | Budget tokens |\n|---|---|\n| s1 | 4096 |";
        assert_eq!(red(text), ("| Secrets | Budget tokens |\n|---|---|\n| [REDACTED:credential] | 4096 |".to_owned(), 1));
    }

    #[test]
    fn prose_is_kept() {
        for text in [
            "token budget is 4096 tokens",
            "the password policy requires 12 characters",
            "We keep secrets in the vault; the token bucket refills every second.",
            "max_tokens: 1024",
            "maxTokens = 2048",
            "tokenizer: bert-base",
            "secretary: Jane",
            "passwordless: true",
            "password_min_length: 12",
            "token_url: https://auth.example.com/token",
            "api_key_env: OPENAI_API_KEY",
            "Rotate the password:\n\nthe runbook explains how.",
            "| Step | Action |\n|---|---|\n| 1 | Rotate the token monthly |",
            "some text | with a pipe\n---\nnext",
            "[REDACTED:credential] is what a redaction looks like",
        ] {
            assert_eq!(red(text), (text.to_owned(), 0), "{text}");
        }
    }

    #[test]
    fn multibyte_text_around_secrets() {
        for (text, want) in [
            ("🔑 パスワード password: 秘密のhunter2 🎉 — 完了", "🔑 パスワード password: [REDACTED:credential] 🎉 — 完了"),
            ("密钥 token=abc😀def 结束", "密钥 token=[REDACTED:credential] 结束"),
            ("密码是AKIAIOSFODNN7EXAMPLE，请保密", "密码是[REDACTED:aws-access-key]，请保密"),
            ("链接postgres://u:密码@host/db", "链接postgres://u:[REDACTED:url-credential]@host/db"),
            ("| 服务 | password | 秘密🎉 |", "| 服务 | password | [REDACTED:credential] |"),
            ("é\npassword: |\n  🎉🎉\n  日本\nü", "é\npassword: |\n  [REDACTED:credential]\n  [REDACTED:credential]\nü"),
        ] {
            let (out, _) = red(text);
            assert_eq!(out, want, "{text}");
        }
        // Whatever the bytes, no panic and a second pass finds nothing.
        for text in ["", "|", "||", "\\|", "| |\n|-|", "password:", "password: |", "-----BEGIN  PRIVATE KEY-----", "🎉|🎉\n|---|\n|日|", "a://:@", "token=\u{3000}x"] {
            red(text);
        }
    }

    #[test]
    fn any_mix_of_fragments_is_safe_and_idempotent() {
        const FRAGMENTS: &[&str] = &[
            "password", "DB_TOKEN", "tokens", ": ", "=", " ", "|", "\n", "\r\n", "  ", "🎉", "日本", "é", "AKIAIOSFODNN7EXAMPLE", "https://",
            "u:p@h", "@", "/", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA0Z3VS5JJ", "|---|",
            "\"", "'", "`", "[REDACTED:x]", "\\", "key", "|-", ">", "-", "#", "**", "4096", "Bearer ", "sk_live_abcdefghij12",
        ];
        const ROUNDS: usize = 3000;
        // A fixed xorshift sequence: the same mixes on every run.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..ROUNDS {
            let mut text = String::new();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            for k in 0..(state % 12) {
                text.push_str(FRAGMENTS[((state >> (k * 5)) % FRAGMENTS.len() as u64) as usize]);
            }
            red(&text);
        }
    }

    #[test]
    fn question_is_redacted_like_text() {
        assert_eq!(
            redact_question("why does DB_PASSWORD=hunter2 fail?"),
            ("why does DB_PASSWORD=[REDACTED:credential] fail?".to_owned(), 1)
        );
        assert_eq!(redact_question("how many tokens does the budget allow?"), ("how many tokens does the budget allow?".to_owned(), 0));
    }
}
