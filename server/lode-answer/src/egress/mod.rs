//! Egress rules: which notes may leave the machine, what counts as leaving it, and scrubbing
//! secrets from whatever does.

pub mod marks;
mod nested;
pub mod secrets;

pub use nested::{read_config_file, NestedRules, MAX_CONFIG_BYTES};
pub use secrets::{redact, redact_question, secret_spans};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
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
    /// Matching ignores case (Unicode case folding: `PRIVÉ/` is `privé/`, `STRASSE` is
    /// `Straße`) and Unicode normalisation form (a name typed composed matches a file system that
    /// stores it decomposed, as macOS does), so a rule still holds on a case-insensitive file
    /// system where `Private/` and `private/` are one directory. Negation (`!`) is refused rather than
    /// ignored: a pattern the user believes re-includes notes must not silently do nothing.
    pub fn new(patterns: &[String]) -> Result<EgressRules, String> {
        if patterns.is_empty() {
            return Ok(EgressRules::default());
        }
        let mut b = GlobSetBuilder::new();
        let mut dir_only = Vec::with_capacity(patterns.len());
        for p in patterns {
            let (glob, dir) = gitignore_glob(&fold(p))?;
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
        let path = fold(&path.replace('\\', "/"));
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

    /// Why a note may not leave the machine, judged on its metadata (as the index stores it) and
    /// its path. Metadata keys and values read as [`marks`] reads frontmatter: every documented
    /// spelling, and fail closed on the near-misses, so metadata from any source reads the same way.
    pub fn withheld_because(&self, path: &str, meta: &serde_json::Map<String, Value>) -> Option<String> {
        if let Some(why) = marks::from_meta(meta) {
            return Some(why);
        }
        if path.contains("://") {
            // A snapshot: its path is the page's URL, and its text may come from where that
            // redirected.
            let landed = meta.get("final_url").and_then(|v| v.as_str());
            if let Some(d) = std::iter::once(path).chain(landed).find_map(|u| self.domain_withheld(u)) {
                return Some(format!("snapshot of a no-egress domain ({d})"));
            }
        }
        self.path_withheld(path)
    }

    /// Why a note may not leave the machine, judged on its text (its own marks: frontmatter in
    /// every spelling, `#no-egress` tags) and its path.
    pub fn note_withheld(&self, path: &str, text: &str) -> Option<String> {
        marks::read(text).local.or_else(|| self.path_withheld(path))
    }

    /// The no-egress pattern the path matches, as the reason, if one does.
    pub fn path_withheld(&self, path: &str) -> Option<String> {
        let which = self.matching(path).first().map(|&i| self.patterns[i].clone())?;
        Some(format!("path matches no-egress pattern {which:?}"))
    }
}

/// A path or pattern for case- and form-blind matching: NFC, then Unicode lowercase with the
/// foldings lowercase alone misses (`ß` → `ss`, final sigma, long s).
fn fold(s: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let lower: String = s.nfc().collect::<String>().to_lowercase();
    if lower.is_ascii() {
        return lower;
    }
    lower.replace(['ß', 'ẞ'], "ss").replace('ς', "σ").replace('ſ', "s")
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
    host == "localhost" || host.ends_with(".localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
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

    #[test]
    fn loopback_detection() {
        for local in
            ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:9/v1", "http://127.5.5.5", "https://user@localhost/x"]
        {
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
        for off in ["false # true", "no", "0"] {
            assert_eq!(r.withheld_because("a.md", &meta(&[("no_egress", off.into())])), None, "{off:?}");
        }
        // A value that says nothing readable never means "send".
        for unknown in ["", "maybe", "# true"] {
            assert!(r.withheld_because("a.md", &meta(&[("no_egress", unknown.into())])).is_some(), "{unknown:?}");
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
        assert!(why("no_egress", Value::Null).is_some(), "no value is no permission");
        assert_eq!(why("no_egress", 2.into()).as_deref(), Some("frontmatter `no_egress: true`"), "a non-zero number is true");
        for (v, shown) in [("none", "none"), ("No", "no"), ("FALSE", "false"), ("local # laptop only", "local"), ("Off", "off")] {
            assert_eq!(why("egress", v.into()), Some(format!("frontmatter `egress: {shown}`")), "{v}");
        }
        assert_eq!(why("Egress", Value::Bool(false)).as_deref(), Some("frontmatter `Egress: false`"));
        assert_eq!(why("egress", "remote".into()), None);
        assert_eq!(why("egress", Value::Bool(true)), None);
    }
}
