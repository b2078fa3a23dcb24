//! Egress rules: which notes may leave the machine, what counts as leaving it, and scrubbing
//! secrets from whatever does.

use std::sync::OnceLock;

use globset::{Glob, GlobSet, GlobSetBuilder};
use regex::Regex;

/// Notes that must never be sent to a remote model: by frontmatter flag or by path glob.
#[derive(Debug, Clone, Default)]
pub struct EgressRules {
    globs: Option<GlobSet>,
    patterns: Vec<String>,
}

impl EgressRules {
    /// `patterns` are globs over vault-relative paths (`private/**`, `**/journal-*.md`).
    pub fn new(patterns: &[String]) -> Result<EgressRules, String> {
        if patterns.is_empty() {
            return Ok(EgressRules::default());
        }
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            b.add(Glob::new(p).map_err(|e| format!("bad no-egress glob {p:?}: {e}"))?);
        }
        let globs = b.build().map_err(|e| e.to_string())?;
        Ok(EgressRules { globs: Some(globs), patterns: patterns.to_vec() })
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Why a note may not leave the machine, if it may not.
    pub fn withheld_because(&self, path: &str, meta: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
        for key in ["no_egress", "no-egress", "noegress"] {
            if meta.get(key).and_then(|v| v.as_str()).is_some_and(lode_core::frontmatter::is_true) {
                return Some(format!("frontmatter `{key}: true`"));
            }
        }
        if meta.get("egress").and_then(|v| v.as_str()).is_some_and(|v| matches!(v.trim(), "none" | "no" | "false" | "local")) {
            return Some("frontmatter `egress: none`".to_owned());
        }
        if let Some(g) = &self.globs {
            if g.is_match(path) {
                let which = g.matches(path).first().map(|&i| self.patterns[i].clone()).unwrap_or_default();
                return Some(format!("path matches no-egress glob {which:?}"));
            }
        }
        None
    }
}

/// `host[:port]` of an endpoint URL.
pub fn destination(endpoint: &str) -> String {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.rsplit_once('@').map_or(authority, |(_, h)| h).to_owned()
}

/// Whether an endpoint is on this machine (loopback), so nothing sent to it leaves the machine.
pub fn is_loopback(endpoint: &str) -> bool {
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

fn patterns() -> &'static [SecretPattern] {
    static P: OnceLock<Vec<SecretPattern>> = OnceLock::new();
    P.get_or_init(|| {
        let p = |kind, re: &str, group| SecretPattern { kind, re: Regex::new(re).expect("secret pattern compiles"), group };
        vec![
            p("private-key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----", 0),
            p("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", 0),
            p("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b", 0),
            p("api-key", r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}", 0),
            p("slack-token", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}", 0),
            p("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}\b", 0),
            p("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", 0),
            p("bearer-token", r"(?i)\bbearer\s+([A-Za-z0-9._~+/\-]{20,}=*)", 1),
            p(
                "credential",
                r#"(?i)\b(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|token|password|passwd|pwd)\b\s*[:=]\s*["']?([^\s"'`]{8,})"#,
                1,
            ),
        ]
    })
}

/// Replaces secrets (API keys, tokens, private keys, credential assignments) with
/// `[REDACTED:kind]`. Returns the scrubbed text and how many were replaced.
pub fn redact(text: &str) -> (String, usize) {
    let mut out = text.to_owned();
    let mut count = 0;
    for p in patterns() {
        let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
        for caps in p.re.captures_iter(&out) {
            if let Some(m) = caps.get(p.group) {
                if !out[m.range()].starts_with("[REDACTED:") {
                    ranges.push(m.range());
                }
            }
        }
        for r in ranges.into_iter().rev() {
            out.replace_range(r, &format!("[REDACTED:{}]", p.kind));
            count += 1;
        }
    }
    (out, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_detection() {
        for local in ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:9/v1", "http://127.5.5.5", "https://user@localhost/x"] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in ["https://api.openai.com/v1", "http://192.168.1.5:8000", "http://localhost.evil.com/v1", "http://10.0.0.1"] {
            assert!(!is_loopback(remote), "{remote}");
        }
        assert_eq!(destination("https://key@api.example.com:443/v1/chat"), "api.example.com:443");
    }

    #[test]
    fn secrets_are_redacted() {
        let text = "aws AKIAIOSFODNN7EXAMPLE and ghp_0123456789abcdefghijABCDEFGHIJ012345 \
            key sk-proj-abcdefghijklmnopqrstuvwx\npassword: hunter2hunter2\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz012345\n\
            -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\nplain words stay";
        let (out, n) = redact(text);
        assert_eq!(n, 6, "{out}");
        for secret in ["AKIAIOSFODNN7EXAMPLE", "ghp_0123", "sk-proj-abc", "hunter2", "abcdefghijklmnopqrstuvwxyz012345", "b3BlbnNzaC1"] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
        assert!(out.contains("plain words stay") && out.contains("password: [REDACTED:credential]"), "{out}");
        assert_eq!(redact("token budget is 4096 tokens"), ("token budget is 4096 tokens".to_owned(), 0));
    }

    #[test]
    fn no_egress_by_frontmatter_and_glob() {
        let rules = EgressRules::new(&["private/**".to_owned()]).unwrap();
        let mut meta = serde_json::Map::new();
        assert!(rules.withheld_because("notes/a.md", &meta).is_none());
        assert!(rules.withheld_because("private/diary.md", &meta).unwrap().contains("private/**"));
        meta.insert("no_egress".into(), "true".into());
        assert!(rules.withheld_because("notes/a.md", &meta).is_some());
        assert!(EgressRules::new(&["[".to_owned()]).is_err());
    }
}
