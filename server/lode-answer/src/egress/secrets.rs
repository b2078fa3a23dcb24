//! Scrubbing secrets from text that leaves the machine: shapes (keys, tokens, card numbers,
//! webhook URLs) and context (a key naming a secret, a table header, a YAML block above a value).

use std::ops::Range;
use std::sync::OnceLock;

use regex::Regex;

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
            p("slack-token", r"(?-u:\b)xox[abprse]-[A-Za-z0-9\-]{10,}", 0),
            // Twilio API key SIDs and Shopify access tokens.
            p("api-key", r"(?-u:\b)(?:SK[0-9a-f]{32}|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32})(?-u:\b)", 0),
            // Other services' prefixed secrets: Stripe webhook signing secrets, Hugging Face, npm,
            // PyPI, SendGrid, DigitalOcean, Grafana, Azure storage account keys.
            p(
                "api-key",
                r"(?-u:\b)(?:whsec_[A-Za-z0-9/+=]{16,}|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_\-]{50,}|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}|dop_v1_[a-f0-9]{40,}|glc_[A-Za-z0-9+/=]{30,})",
                0,
            ),
            p("credential", r"(?i)AccountKey=([A-Za-z0-9+/=]{20,})", 1),
            // `curl -u user:password`.
            p("credential", r#"(?:^|\s)(?:-u|--user)\s+['"]?[^\s:'"]+:([^\s'"]+)"#, 1),
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
    "passwort",
    "kennwort",
    "wachtwoord",
    "senha",
    "salasana",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "secretkey",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "privatekey",
    "private_key",
    "private-key",
    "accesskey",
    "access_key",
    "access-key",
    "credential",
];

/// Last words of a key that describe a secret rather than hold one (`password_policy`,
/// `token_url`, `api_key_env`, `secret_rotation_days`).
const DESCRIPTORS: &[&str] = &[
    "policy",
    "policies",
    "hint",
    "length",
    "len",
    "min",
    "max",
    "minimum",
    "maximum",
    "count",
    "limit",
    "limits",
    "budget",
    "size",
    "ttl",
    "expiry",
    "expires",
    "expiration",
    "lifetime",
    "timeout",
    "age",
    "days",
    "hours",
    "minutes",
    "seconds",
    "secs",
    "rotation",
    "reset",
    "url",
    "uri",
    "endpoint",
    "file",
    "path",
    "dir",
    "env",
    "var",
    "type",
    "kind",
    "name",
    "header",
    "manager",
    "store",
    "format",
    "required",
    "enabled",
    "strength",
    "prompt",
];

/// `key: value` and `KEY=value` assignments (also `"key": "value"`, `**Key:** value`,
/// `export KEY="value"`, `key => 'value'`); whether the key names a secret is decided in code.
fn assignment_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r#"(?mR)(?P<key>[A-Za-z0-9_.\-]*(?i:password|passwd|pwd|passphrase|passwort|kennwort|wachtwoord|senha|salasana|pass|auth|secret|token|api[_\-]?key|private[_\-]?key|access[_\-]?key|credential)[A-Za-z0-9_.\-]*)["'`]?[*_]{0,2}[ \t]*(?::=|=>|[:=])[*_]{0,2}[ \t]*(?:"(?P<dq>(?:\\\r?\n|\\.|[^"\\\r\n])+)(?:"|$)|'(?P<sq>(?:''|[^'\r\n])+)(?:'|$)|`(?P<bq>[^`\r\n]+)`|(?P<bare>(?:[^\s"'`]|'[^\s"'`,.;])+))"#,
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
    let b = key.as_bytes();
    let named = KEYWORDS.iter().any(|kw| lower.match_indices(kw).any(|(i, _)| keyword_ends(b, i + kw.len())))
        // `pass` and `auth` only as whole words (`DB_PASS`, `"auth"`; not `bypass`, `author`),
        // `auth` only holding something generated.
        || lower.match_indices("pass").any(|(i, _)| keyword_starts(b, i) && keyword_ends(b, i + 4))
        || (lower.match_indices("auth").any(|(i, _)| keyword_starts(b, i) && keyword_ends(b, i + 4)) && looks_generated(value));
    if !named || is_placeholder(value) {
        return false;
    }
    let last = last_word(key);
    if DESCRIPTORS.contains(&last.as_str()) {
        return false;
    }
    !(last == "tokens" && is_count(value))
}

/// Whether a keyword starting at byte `start` of a key starts a word there: at the start, after
/// a non-letter, or at a camelCase boundary.
fn keyword_starts(key: &[u8], start: usize) -> bool {
    start == 0 || !key[start - 1].is_ascii_alphabetic() || (key[start].is_ascii_uppercase() && key[start - 1].is_ascii_lowercase())
}

/// A value that stands for a secret rather than being one: `<your-api-key>`, `${SECRET}`,
/// `$(pass show db)`, `{{ token }}`, `XXXXXXXX`, `changeme`.
fn is_placeholder(v: &str) -> bool {
    let v = v.trim().trim_matches(['"', '\'', '`']).trim();
    let lower = v.to_ascii_lowercase();
    (v.starts_with('<') && v.ends_with('>'))
        || v.starts_with("${")
        || v.starts_with("$(")
        || v.starts_with("{{")
        || (v.starts_with('$') && v.len() > 1 && v[1..].bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'))
        || (v.len() >= 3 && v.chars().all(|c| matches!(c, 'x' | 'X' | '*' | '.' | '•')))
        || matches!(
            lower.as_str(),
            "changeme"
                | "placeholder"
                | "redacted"
                | "your-api-key"
                | "your_api_key"
                | "yourpassword"
                | "your-password"
                | "secret"
                | "password"
                | "example"
                | "todo"
                | "tbd"
                | "none"
                | "null"
        )
}

/// A token that looks generated (a password, key or token rather than a word or a name): at
/// least 8 characters, not an e-mail address or a URL, and random in one of the ways generated
/// secrets are — lower case with 3 or more digits (`sonnenblume8942`), mixed case with 2 or more
/// digits, a digit and a symbol, or case flipping 3 or more times (`GD6udrJrIL`), upper case with
/// 2 or more digits. `1Password`, `eu-west-1`, `base64url-encoded` and `iPad` are not.
fn looks_generated(v: &str) -> bool {
    let v = v.trim_matches(['"', '\'', '`']);
    if v.chars().count() < 8 || v.contains("://") || v.starts_with('[') {
        return false;
    }
    let email = v.contains('@')
        && v.rsplit('@').next().is_some_and(|d| d.contains('.') && d.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'));
    if email {
        return false;
    }
    let upper = v.chars().filter(|c| c.is_uppercase()).count();
    let lower = v.chars().filter(|c| c.is_lowercase()).count();
    let digits = v.chars().filter(|c| c.is_ascii_digit()).count();
    let symbols = v.chars().filter(|c| !c.is_alphanumeric()).count();
    let letters: Vec<bool> = v.chars().filter(|c| c.is_alphabetic()).map(char::is_uppercase).collect();
    let flips = letters.windows(2).filter(|w| w[0] != w[1]).count();
    match (upper > 0, lower > 0) {
        (false, false) => false,
        (false, true) => digits >= 3,
        (true, false) => digits >= 2,
        (true, true) => digits >= 2 || (digits >= 1 && symbols >= 1) || flips >= 3,
    }
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

/// Where `text` holds secrets, and their kinds: the findings of one pass of [`redact`], merged.
/// For a publisher that must keep back exactly the passages holding one (`lode publish`); a
/// caller that masks these ranges should check the result with [`redact`], which may find more.
pub fn secret_spans(text: &str) -> Vec<(Range<usize>, &'static str)> {
    findings(text).into_iter().map(|h| (h.range, h.kind)).collect()
}

/// `window` (bytes `at` of a text whose secrets are `spans`, from [`secret_spans`] of the whole
/// text: rules that need context see it all) with every part of a secret
/// replaced by a marker; how many secrets it touched.
pub fn mask_spans(window: &str, at: Range<usize>, spans: &[(Range<usize>, &'static str)]) -> (String, usize) {
    let mut out = String::with_capacity(window.len());
    let (mut from, mut n) = (0, 0);
    for (s, kind) in spans {
        let (a, b) = (s.start.max(at.start), s.end.min(at.end));
        if a >= b {
            continue;
        }
        let (a, b) = (a - at.start, b - at.start);
        if a < from || !window.is_char_boundary(a) || !window.is_char_boundary(b) {
            continue;
        }
        out.push_str(&window[from..a]);
        out.push_str(&format!("[REDACTED:{kind}]"));
        from = b;
        n += 1;
    }
    out.push_str(&window[from..]);
    (out, n)
}

/// One pass of [`redact`].
fn redact_once(text: &str) -> (String, usize) {
    let merged = findings(text);
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

/// The findings of one pass, merged where they overlap, in order.
fn findings(text: &str) -> Vec<Hit> {
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
    webhooks(&masked, rank, &mut hits);
    card_numbers(&masked, rank, &mut hits);
    aws_secrets(&masked, rank, &mut hits);
    let rank = rank + 1;
    assignments(&masked, rank, &mut hits);
    sql_passwords(&masked, rank, &mut hits);
    netrc(&masked, rank, &mut hits);
    prose_passwords(&masked, rank, &mut hits);
    secret_sentences(&masked, rank, &mut hits);
    continued(&masked, &mut hits);
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
    merged
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
        // A structure (`{user: x, password: y}`) is no value: the pairs inside are found on.
        let structure = c.name("bare").is_some_and(|b| b.as_str().starts_with(['{', '[']));
        // Words about the secret (`password: in the drawer`, `see 1Password`): not one.
        let words = c.name("bare").is_some_and(|b| {
            NOT_A_PASSWORD.contains(&b.as_str().to_lowercase().trim_end_matches([',', '.', ':']))
                && text[b.end()..].starts_with([' ', '\t'])
                && text[b.end()..].trim_start().starts_with(|c: char| c.is_alphanumeric() || c == '(')
        });
        if !indicator && !structure && !words && secret_key(key, value.as_str()) {
            let range = if c.name("bare").is_some() {
                // In a URL's query, a value ends at the next parameter.
                let query = text[..whole.start()].ends_with(['?', '&']);
                trim_bare(text, value.range(), query)
            } else {
                value.range()
            };
            hits.push(Hit { range, kind: "credential", rank });
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

/// An unquoted value without the markdown or punctuation that closes around it: emphasis
/// closers (`**`, `_`), a table's `|`, a bracket or parenthesis it did not open, an HTML tag
/// (`<br>`), and a sentence's `.`, `,` or `;` before a space or the end of the line. What a
/// secret could end in otherwise stays part of it.
fn trim_bare(text: &str, r: Range<usize>, query: bool) -> Range<usize> {
    let v = &text[r.clone()];
    let mut end = v.len();
    // The next parameter of a URL query, of a connection string (`;Encrypt=true`), or a link's
    // target (`](https://…)`): not the value's.
    if query {
        if let Some(i) = v.find(['&', '#']) {
            end = end.min(i);
        }
    }
    static NEXT: OnceLock<Regex> = OnceLock::new();
    let next = NEXT.get_or_init(|| Regex::new(r"(?:;[A-Za-z][A-Za-z ]*=|\]\()").expect("a valid pattern"));
    if let Some(m) = next.find(v).filter(|m| m.start() > 0) {
        end = end.min(m.start());
    }
    // An HTML tag glued to the value.
    if let Some(i) = v.find('<').filter(|&i| i > 0 && v[i + 1..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')) {
        end = end.min(i);
    }
    // Brackets opened and closed in what is kept, counted once (not once per dropped character).
    let (mut parens, mut brackets) = (0i64, 0i64);
    for c in v[..end].chars() {
        match c {
            '(' => parens += 1,
            ')' => parens -= 1,
            '[' => brackets += 1,
            ']' => brackets -= 1,
            _ => {}
        }
    }
    while let Some(last) = v[..end].chars().next_back() {
        let drop = match last {
            '*' | '_' | '|' | '.' | ',' | ';' | ':' => true,
            ')' => parens < 0,
            ']' => brackets < 0,
            _ => false,
        };
        if !drop || end <= 1 {
            break;
        }
        match last {
            ')' => parens += 1,
            ']' => brackets += 1,
            _ => {}
        }
        end -= last.len_utf8();
    }
    r.start..r.start + end
}

/// Shannon entropy of `s`, in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in s.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let n = s.chars().count() as f64;
    counts.values().map(|&k| -(k as f64 / n) * (k as f64 / n).log2()).sum()
}

/// An AWS secret access key in prose (not only after its key name): exactly 40 characters of
/// the base64 alphabet standing alone, mixing upper case, lower case and digits, as random as a
/// key is (a path, a hash or a word run is not).
fn aws_secrets(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    static R: OnceLock<Regex> = OnceLock::new();
    let re = R.get_or_init(|| Regex::new(r"[A-Za-z0-9/+]{40,}").expect("a valid pattern"));
    for m in re.find_iter(text) {
        let v = m.as_str();
        let before = text[..m.start()].chars().next_back();
        let after = text[m.end()..].chars().next();
        let glued = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || matches!(c, '=' | '/' | '+' | '-' | '_' | '.' | '%'));
        if v.len() != 40 || glued(before) || (glued(after) && after != Some('.')) {
            continue;
        }
        let has = |f: fn(&char) -> bool| v.chars().any(|c| f(&c));
        if !(has(char::is_ascii_uppercase) && has(char::is_ascii_lowercase) && has(char::is_ascii_digit))
            || v.contains("//")
            || v.matches('/').count() > 4
        {
            continue;
        }
        if entropy(v) >= 4.2 {
            hits.push(Hit { range: m.range(), kind: "aws-secret-key", rank });
        }
    }
}

/// Payment card numbers: 13 to 19 digits (in groups split by spaces or dashes, or none) that pass
/// the Luhn check and start as a card network's numbers do.
fn card_numbers(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    static R: OnceLock<Regex> = OnceLock::new();
    let re = R.get_or_init(|| Regex::new(r"(?-u:\b)\d(?:[ \-]?\d){12,18}(?-u:\b)").expect("a valid pattern"));
    for m in re.find_iter(text) {
        let v = m.as_str();
        // One separator throughout, and not glued into a longer number or a version.
        let seps: std::collections::HashSet<char> = v.chars().filter(|c| !c.is_ascii_digit()).collect();
        if seps.len() > 1
            || text[..m.start()].ends_with(['.', ',', '/'])
            || text[m.end()..].starts_with(|c: char| c == '.' && text[m.end() + 1..].starts_with(|d: char| d.is_ascii_digit()))
        {
            continue;
        }
        let digits: Vec<u32> = v.chars().filter_map(|c| c.to_digit(10)).collect();
        if (13..=19).contains(&digits.len()) && luhn(&digits) && card_prefix(&digits) {
            hits.push(Hit { range: m.range(), kind: "card-number", rank });
        }
    }
}

fn luhn(digits: &[u32]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                if d * 2 > 9 {
                    d * 2 - 9
                } else {
                    d * 2
                }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Whether the number starts as Visa, Mastercard, American Express, Discover, JCB, Diners Club
/// or UnionPay numbers do, with a length that network uses.
fn card_prefix(d: &[u32]) -> bool {
    let n = |k: usize| d[..k].iter().fold(0u32, |a, &x| a * 10 + x);
    let len = d.len();
    match d[0] {
        4 => matches!(len, 13 | 16 | 19),
        5 => (51..=55).contains(&n(2)) && len == 16,
        2 => (2221..=2720).contains(&n(4)) && len == 16,
        3 => {
            (matches!(n(2), 34 | 37) && len == 15)
                || (n(2) == 35 && (16..=19).contains(&len))
                || (matches!(n(2), 30 | 36 | 38 | 39) && (14..=19).contains(&len))
        }
        6 => (n(4) == 6011 || n(2) == 65 || (644..=649).contains(&n(3)) || n(2) == 62) && (16..=19).contains(&len),
        _ => false,
    }
}

/// Webhook URLs whose path is their secret: Slack, Discord, Teams, and any `…/hooks/…` or
/// `…/webhooks/…` path holding a token-like segment. The host and the path up to the hooks
/// segment stay; the rest of the path goes.
fn webhooks(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    static R: OnceLock<Regex> = OnceLock::new();
    let re = R.get_or_init(|| {
        Regex::new(r"(?i)https?://[^\s/<>()\[\]]+/(?:[^\s?#<>()\[\]]*/)?(?:services|workflows|triggers|hooks?|webhooks?|webhookb2|IncomingWebhook)/(?P<secret>[^\s?#<>()\[\]`'\x22|]+)")
            .expect("a valid pattern")
    });
    for c in re.captures_iter(text) {
        let (Some(whole), Some(m)) = (c.get(0), c.name("secret")) else { continue };
        let host_slack = whole.as_str().to_ascii_lowercase().contains("hooks.slack.com/");
        let secret = m.as_str().trim_end_matches(['.', ',', ';', ':', '!', '?', '*', '_']);
        let tokenish =
            |seg: &str| seg.len() >= 16 && seg.chars().any(|c| c.is_ascii_digit()) && seg.chars().any(|c| c.is_ascii_alphabetic());
        let discord = whole.as_str().to_ascii_lowercase().contains("discord");
        // Up to the last token-like segment: a trailing `/trigger` is the endpoint's, not its secret.
        let segs: Vec<&str> = secret.split('/').collect();
        let Some(last) = segs.iter().rposition(|s| tokenish(s) || ((host_slack || discord) && s.len() >= 8)) else { continue };
        let len: usize = segs[..=last].iter().map(|s| s.len() + 1).sum::<usize>() - 1;
        // Documented placeholders (`T00000000/B00000000/XXXXXXXX`).
        let placeholder = segs[..=last].iter().all(|s| s.chars().skip(1).all(|c| matches!(c, '0' | 'X' | 'x')));
        if !placeholder {
            hits.push(Hit { range: m.start()..m.start() + len, kind: "webhook", rank });
        }
    }
}

/// `.netrc` entries: the value after `password` (or `passwd`) on a line that names a `machine`,
/// `login` or `default`, or that follows such a line.
fn netrc(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    const TOKENS: &[&str] = &["machine", "default", "login", "password", "passwd", "account", "macdef"];
    let mut context = 0usize; // lines left in which a bare `password x` line belongs to an entry
    for (start, line) in lines(text) {
        let words: Vec<(usize, &str)> = line.split_whitespace().map(|w| (w.as_ptr() as usize - line.as_ptr() as usize, w)).collect();
        // A netrc line is made of netrc tokens and their values: it starts with one (after a
        // list marker or a code mark) and every other word is one.
        let first = words.iter().map(|(_, w)| w.trim_start_matches('`')).find(|w| !matches!(*w, "-" | "*" | ">" | ""));
        let shaped = first.is_some_and(|f| TOKENS.contains(&f))
            && words
                .iter()
                .map(|(_, w)| w.trim_start_matches('`'))
                .skip_while(|w| matches!(*w, "-" | "*" | ">"))
                .step_by(2)
                .all(|w| TOKENS.contains(&w));
        let entry = shaped && first.is_some_and(|f| matches!(f, "machine" | "default"));
        if shaped && (entry || context > 0) {
            for pair in words.windows(2) {
                if matches!(pair[0].1.trim_start_matches('`'), "password" | "passwd") {
                    let (off, v) = pair[1];
                    let r = bare_token(text, start + off..start + off + v.len());
                    if !is_placeholder(&text[r.clone()]) && !r.is_empty() {
                        hits.push(Hit { range: r, kind: "credential", rank });
                    }
                }
            }
        }
        context = if entry {
            3
        } else if shaped {
            context
        } else {
            context.saturating_sub(1)
        };
        if line.trim().is_empty() {
            context = 0;
        }
    }
}

/// SQL: `PASSWORD 'x'` (`CREATE USER … WITH PASSWORD`, `ALTER ROLE … PASSWORD`) and
/// `IDENTIFIED BY 'x'`.
fn sql_passwords(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    static R: OnceLock<Regex> = OnceLock::new();
    let re = R.get_or_init(|| {
        Regex::new(r#"(?i)(?-u:\b)(?:password|identified\s+by)\s+(?:'(?P<sq>(?:''|\\.|[^'\\\r\n])+)'|"(?P<dq>(?:\\.|[^"\\\r\n])+)"|(?P<bare>[^\s'";]+))"#).expect("a valid pattern")
    });
    static SQL: OnceLock<Regex> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        Regex::new(r"(?i)(?-u:\b)(?:create|alter|grant)(?-u:\b).*(?-u:\b)(?:user|role|login|to)(?-u:\b)").expect("a valid pattern")
    });
    for c in re.captures_iter(text) {
        if let Some(m) = c.name("sq").or_else(|| c.name("dq")) {
            hits.push(Hit { range: m.range(), kind: "credential", rank });
        } else if let Some(m) = c.name("bare") {
            // Unquoted (`IDENTIFIED BY tiger`): only in a statement, and not a word of prose.
            let line_start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
            let statement = c.get(0).is_some_and(|w| w.as_str().to_ascii_lowercase().starts_with("identified"))
                && sql.is_match(&text[line_start..m.start()]);
            let v = &text[bare_token(text, m.range())];
            if statement && !is_placeholder(v) && !NOT_A_PASSWORD.contains(&v.to_lowercase().as_str()) {
                hits.push(Hit { range: bare_token(text, m.range()), kind: "credential", rank });
            }
        }
    }
}

/// Words that follow "the password is" without being one (`on the fridge`, `changed monthly`).
const NOT_A_PASSWORD: &[&str] = &[
    "a",
    "an",
    "the",
    "on",
    "in",
    "at",
    "of",
    "for",
    "to",
    "by",
    "with",
    "from",
    "under",
    "behind",
    "inside",
    "written",
    "stored",
    "kept",
    "saved",
    "set",
    "not",
    "no",
    "never",
    "always",
    "still",
    "now",
    "same",
    "different",
    "required",
    "needed",
    "optional",
    "empty",
    "blank",
    "unknown",
    "missing",
    "wrong",
    "correct",
    "right",
    "expired",
    "changed",
    "reset",
    "rotated",
    "managed",
    "shared",
    "printed",
    "taped",
    "available",
    "located",
    "listed",
    "also",
    "too",
    "very",
    "long",
    "short",
    "weak",
    "strong",
    "secret",
    "private",
    "hidden",
    "lost",
    "forgotten",
    "case",
    "usually",
    "probably",
    "somewhere",
    "there",
    "here",
    "what",
    "whatever",
    "given",
    "sent",
    "emailed",
    "it",
    "this",
    "that",
    "mine",
    "yours",
    "his",
    "her",
    "their",
    "our",
    "my",
    "your",
    "default",
    "defaults",
    "generated",
    "random",
    "unique",
    "per",
    "only",
    "just",
    "and",
    "or",
    "but",
    "if",
    "because",
    "so",
    "easy",
    "hard",
    "simple",
    "complex",
    "characters",
    "chars",
    "digits",
    "letters",
    "see",
    "check",
    "ask",
    "call",
    "contact",
    "pinned",
    "posted",
];

/// A secret continued on the next line of a shell command (`"abc\` + `def"`, a header split with
/// `\`): each finding that ends at a line continuation takes the next line's token too.
fn continued(text: &str, hits: &mut [Hit]) {
    for h in hits.iter_mut() {
        // Only in a shell command or inside a quote left open on the line: elsewhere a `\` at
        // the end of a line is markdown's hard line break, and the next line is prose.
        let line_start = text[..h.range.start].rfind('\n').map_or(0, |i| i + 1);
        let before = &text[line_start..h.range.start];
        let lead = before.trim_start().trim_start_matches(['$', '>', ' ']);
        let shell = ["export ", "set ", "curl ", "-H ", "-e ", "--env", "--header", "wget ", "http ", "env ", "setx "]
            .iter()
            .any(|p| lead.starts_with(p))
            || before.contains(" -H ")
            || before.matches('"').count() % 2 == 1
            || before.matches('\'').count() % 2 == 1;
        loop {
            let rest = &text[h.range.end..];
            let after = if text[..h.range.end].ends_with('\\') {
                rest
            } else if let Some(r) = rest.strip_prefix('\\') {
                r
            } else {
                break;
            };
            let Some(next) = after.strip_prefix("\r\n").or_else(|| after.strip_prefix('\n')) else { break };
            let indent = next.len() - next.trim_start_matches([' ', '\t']).len();
            let len = next[indent..].find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`')).unwrap_or(next.len() - indent);
            // Outside a shell command, only a generated-looking run continues the secret.
            if len == 0 || !(shell || looks_generated(&next[indent..indent + len])) {
                break;
            }
            h.range.end = text.len() - next.len() + indent + len;
        }
    }
}

/// A token without the quotes, code marks, emphasis and sentence punctuation around it: the
/// byte range of what is left inside `m`.
fn bare_token(text: &str, m: Range<usize>) -> Range<usize> {
    let raw = &text[m.clone()];
    let inner = raw.trim_start_matches(['"', '\'', '`', '“', '‘', '«', '*', '_', '(', '[']);
    let lead = raw.len() - inner.len();
    let mut v = inner;
    loop {
        let t = v.trim_end_matches(['"', '\'', '`', '”', '’', '»', '*', '_', ')', ']', '.', ',', ';', ':', '!', '?']);
        if t.len() == v.len() {
            break;
        }
        v = t;
    }
    m.start + lead..m.start + lead + v.len()
}

/// Words for a password in the languages notes are often written in, and the verbs that follow.
const PASSWORD_WORDS: &str = r"password|passcode|passphrase|passwd|pw|pwd|pin|passwort|kennwort|contraseña|clave|mot\s+de\s+passe|wachtwoord|senha|lösenord|salasana|hasło|heslo|parola";
const IS_WORDS: &str = r"is|was|will\s+be|reads|=|ist|war|lautet|es|era|est|était|è|é|är|jest|je";

/// "The wifi password is X", "root password was X", "the PIN is 4821", "das WLAN-Passwort ist X",
/// "my password for the school portal is X", "password X?": the token after it, unless that is
/// an ordinary word of the sentence (or, without a verb, unless it looks generated).
fn prose_passwords(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    static R: OnceLock<Regex> = OnceLock::new();
    let re = R.get_or_init(|| {
        Regex::new(&format!(
            r"(?i)(?P<k>{PASSWORD_WORDS})s?(?:\s+(?:for|of|to|on|del|de|für|du|van|do|da)\s+(?:(?:the|my|our|el|la|le|den|die|das|het)\s+)?[^\s.,;:]+(?:\s+[^\s.,;:]+){{0,2}}?)?(?:\s+(?P<verb>{IS_WORDS})(?:\s+(?:now|still|currently|just|jetzt|ahora))?\s*:?|\s*(?P<colon>:))?\s+(?P<v>[^\s]+)"
        ))
        .expect("a valid pattern")
    });
    for c in re.captures_iter(text) {
        let (Some(m), Some(k)) = (c.name("v"), c.name("k")) else { continue };
        // The keyword starts a word (`Passwort` in `WLAN-Passwort`, not `bypass`).
        if text[..k.start()].chars().next_back().is_some_and(char::is_alphanumeric) {
            continue;
        }
        // A quoted value may hold spaces ("correct horse battery staple"): up to its closing quote.
        let quoted = ['"', '“', '\'', '`'].into_iter().find_map(|q| {
            let close = match q {
                '“' => '”',
                c => c,
            };
            let inner = text[m.start()..].strip_prefix(q)?;
            let line = &inner[..inner.find('\n').unwrap_or(inner.len())];
            let end = line.find(close)?;
            let start = m.start() + q.len_utf8();
            (end > 0).then(|| start..start + end)
        });
        let r = quoted.clone().unwrap_or_else(|| {
            // An HTML tag glued to the value (`x<br>next`) is not part of it.
            let r = bare_token(text, m.range());
            let v = &text[r.clone()];
            match v.find('<').filter(|&i| i > 0 && v[i + 1..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')) {
                Some(i) => bare_token(text, r.start..r.start + i),
                None => r,
            }
        });
        let v = &text[r.clone()];
        let pin = k.as_str().eq_ignore_ascii_case("pin");
        let lower = v.to_lowercase();
        if !v.chars().any(char::is_alphanumeric)
            || is_placeholder(v)
            || (pin && !v.chars().any(|c| c.is_ascii_digit()))
            || (quoted.is_none() && NOT_A_PASSWORD.contains(&lower.as_str()))
        {
            continue;
        }
        let said = c.name("verb").is_some() || c.name("colon").is_some() || quoted.is_some();
        let pin_number = pin && (4..=8).contains(&v.len()) && v.chars().all(|c| c.is_ascii_digit());
        if !said && !looks_generated(v) && !pin_number {
            continue; // "password reset", "password manager"
        }
        if v.chars().all(char::is_alphabetic)
            && v.chars().all(char::is_lowercase)
            && (v.ends_with("ed") || v.ends_with("ing") || v.ends_with("ly"))
        {
            continue;
        }
        // A length, not a password: "is 12 characters long".
        let next = text[m.end()..].split_whitespace().next().unwrap_or("").to_lowercase();
        if v.chars().all(|c| c.is_ascii_digit())
            && ["characters", "chars", "digits", "letters", "symbols", "long"].iter().any(|u| next.starts_with(u))
        {
            continue;
        }
        hits.push(Hit { range: r, kind: "credential", rank });
    }
}

/// In a sentence about a secret (it names a password, secret, token, credentials, API key or
/// PIN), every token that looks generated: "Jenkins creds: deploy / Gr33n-Lantern-06", "the
/// signing secret is whsec_… (base64url: d2hz…)", "Feed token is `UDZt…`".
fn secret_sentences(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    static KW: OnceLock<Regex> = OnceLock::new();
    let kw = KW.get_or_init(|| {
        Regex::new(&format!(r"(?i)(?:^|[^\p{{L}}])(?:{PASSWORD_WORDS}|secret|token|creds|credentials?|api[\s_-]?key|access[\s_-]?key|private[\s_-]?key|signing\s+key)s?(?:$|[^\p{{L}}])"))
            .expect("a valid pattern")
    });
    static TOKEN: OnceLock<Regex> = OnceLock::new();
    let token = TOKEN.get_or_init(|| Regex::new(r"[^\s]+").expect("a valid pattern"));
    static END: OnceLock<Regex> = OnceLock::new();
    let end = END.get_or_init(|| Regex::new(r"[.!?](?:\s|$)|\n").expect("a valid pattern"));
    let mut start = 0;
    let mut bounds: Vec<Range<usize>> = Vec::new();
    for m in end.find_iter(text) {
        bounds.push(start..m.start());
        start = m.end();
    }
    bounds.push(start..text.len());
    for sentence in bounds {
        let s = &text[sentence.clone()];
        if !kw.is_match(s) {
            continue;
        }
        for t in token.find_iter(s) {
            let r = bare_token(text, sentence.start + t.start()..sentence.start + t.end());
            let v = &text[r.clone()];
            // Links and markdown around the token are other rules' business.
            // An assignment (`DB_PASSWORD=x`) is the assignment rule's: its key stays.
            if looks_generated(v)
                && !v.trim_end_matches('=').contains(['=', ':', '(', ')', '{', '}', '"', '<', '>', '|'])
                && !is_placeholder(v)
                && !v.starts_with(['#', '/'])
                && !v.contains("[REDACTED")
            {
                hits.push(Hit { range: r, kind: "credential", rank });
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
    (!c.is_empty() && c.len() <= 40 && plain && c.split_whitespace().count() <= 3)
        .then(|| c.split_whitespace().collect::<Vec<_>>().join("_"))
}

/// Secret cells of markdown tables: the cell after one naming a secret (`| prod db | password |
/// hunter2 |`), and every body cell under a header naming one (`| service | token |`, `| key |`).
fn table_cells(text: &str, rank: usize, hits: &mut Vec<Hit>) {
    let all: Vec<(usize, &str)> = lines(text).collect();
    let mut cell_hit = |line_start: usize, r: &Range<usize>| {
        let cell = &text[line_start + r.start..line_start + r.end];
        // An assignment in the cell is the assignment rule's; words about a secret ("see vault")
        // and placeholders are none.
        let assignment = cell.contains('=') || cell.contains(": ");
        let first = cell.split_whitespace().next().unwrap_or("").to_lowercase();
        let words = cell.split_whitespace().count() > 1 && NOT_A_PASSWORD.contains(&first.as_str());
        if !r.is_empty() && !assignment && !words && !is_placeholder(cell) {
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

    /// `redact`, checked to be idempotent: a second pass changes nothing and counts nothing.
    fn red(text: &str) -> (String, usize) {
        let (out, n) = redact(text);
        assert_eq!(redact(&out), (out.clone(), 0), "not idempotent on {text:?}");
        (out, n)
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
            ("the token: [REDACTED:credential].\npassword = [REDACTED:credential] # old".to_owned(), 2)
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
        assert_eq!(
            red(text),
            ("private_key: >-  # pem\r\n  [REDACTED:credential]\r\n  [REDACTED:credential]\r\nnext: 1\r\n".to_owned(), 2)
        );
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
            (
                "| service | Token | owner |\n|---|:---:|---|\n| ci | [REDACTED:credential] | ops |\n| deploy |  | dev |\n\n| x | y |"
                    .to_owned(),
                1
            )
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
        for text in [
            "",
            "|",
            "||",
            "\\|",
            "| |\n|-|",
            "password:",
            "password: |",
            "-----BEGIN  PRIVATE KEY-----",
            "🎉|🎉\n|---|\n|日|",
            "a://:@",
            "token=\u{3000}x",
        ] {
            red(text);
        }
    }

    #[test]
    fn any_mix_of_fragments_is_safe_and_idempotent() {
        const FRAGMENTS: &[&str] = &[
            "password",
            "DB_TOKEN",
            "tokens",
            ": ",
            "=",
            " ",
            "|",
            "\n",
            "\r\n",
            "  ",
            "🎉",
            "日本",
            "é",
            "AKIAIOSFODNN7EXAMPLE",
            "https://",
            "u:p@h",
            "@",
            "/",
            "-----BEGIN RSA PRIVATE KEY-----",
            "-----END RSA PRIVATE KEY-----",
            "MIIEpAIBAAKCAQEA0Z3VS5JJ",
            "|---|",
            "\"",
            "'",
            "`",
            "[REDACTED:x]",
            "\\",
            "key",
            "|-",
            ">",
            "-",
            "#",
            "**",
            "4096",
            "Bearer ",
            "sk_live_abcdefghij12",
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
