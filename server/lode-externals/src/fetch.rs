//! Bounded fetching of one web page: http and https only, a global timeout, a size cap (checked
//! on the declared length and again while reading), a limited number of redirects, and no
//! private, loopback or link-local address unless the user allows them. The address check runs
//! in the resolver, at every hop, on the addresses actually connected to: a redirect to
//! `http://169.254.169.254/` or a name that resolves to `127.0.0.1` is refused like a literal.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use crate::html;

/// Limits of one fetch.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// For the whole fetch: resolving, connecting, redirects and reading the body.
    pub timeout: Duration,
    /// Bodies above this many bytes are refused.
    pub max_bytes: u64,
    pub max_redirects: u32,
    /// Fetch from private, shared and link-local addresses too (an intranet wiki).
    pub allow_private: bool,
    /// Fetch from loopback addresses too (a page served on this machine; tests).
    pub allow_loopback: bool,
    /// Once set, the fetch stops within ~25 ms: its connection is closed and it fails with
    /// [`FetchError::Cancelled`] (the question that asked for the page was cancelled).
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            timeout: Duration::from_secs(20),
            max_bytes: 10 * 1024 * 1024,
            max_redirects: 5,
            allow_private: false,
            allow_loopback: false,
            cancel: None,
        }
    }
}

impl FetchOptions {
    /// These options for a fetch a model asked for (its `fetch_url` tool): never loopback,
    /// private, shared or link-local addresses, whatever the settings allow for the user's own
    /// fetches (docs/security.md).
    pub fn for_model(self) -> FetchOptions {
        FetchOptions { allow_private: false, allow_loopback: false, ..self }
    }
}

/// A fetched page as text a snapshot can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub url: String,
    pub final_url: String,
    pub status: u16,
    /// The media type, without parameters.
    pub content_type: String,
    pub title: Option<String>,
    /// Readable markdown (HTML converted; plain text and markdown kept).
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("not a web URL: {0} (only http and https links are mirrored)")]
    NotWeb(String),
    #[error("{0}: not a public address (set `allow_private = true`, or `allow_loopback = true` for this machine, under [externals] to fetch from it)")]
    Private(String),
    #[error("HTTP {0}")]
    Status(u16),
    #[error("the page is larger than the {} MB limit (`max_mb` under [externals])", *.0 as f64 / (1024.0 * 1024.0))]
    TooLarge(u64),
    #[error("content type {0:?} is not text lode can read (HTML, plain text or markdown)")]
    NotText(String),
    /// The declared type is text, the bytes are not (NUL bytes): the type is `""` when none
    /// was declared.
    #[error("the page's bytes are binary, not text{}", if .0.is_empty() { " (no content type was given)".to_owned() } else { format!(", though it is served as {:?}", .0) })]
    Binary(String),
    #[error(transparent)]
    TooComplex(#[from] html::TooComplex),
    #[error("timed out after {0} s")]
    Timeout(u64),
    #[error("more than {0} redirects")]
    Redirects(u32),
    /// A redirect that leads nowhere lode may go: no `Location`, or not http(s) (`file:`,
    /// `ftp:`, `data:` …). Refused at every hop.
    #[error("redirect refused: {0}")]
    BadRedirect(String),
    #[error("{0}")]
    Network(String),
    #[error("cancelled")]
    Cancelled,
}

impl FetchError {
    /// The HTTP status, when the server answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            FetchError::Status(s) => Some(*s),
            _ => None,
        }
    }
}

const PRIVATE: &str = "lode-private-address:";

/// Refuses addresses that are not on the public internet (unless allowed), at every hop.
#[derive(Debug)]
struct Guard {
    allow_private: bool,
    allow_loopback: bool,
}

impl Resolver for Guard {
    fn resolve(&self, uri: &Uri, config: &Config, timeout: NextTimeout) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let all = DefaultResolver::default().resolve(uri, config, timeout)?;
        let mut out = self.empty();
        let mut refused = None;
        for a in all.iter() {
            let ip = a.ip();
            let loopback = ip.is_loopback() || matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()));
            if is_public(ip) || (self.allow_loopback && loopback) || (self.allow_private && is_private_network(ip)) {
                out.push(*a);
            } else {
                refused = Some(a.ip());
            }
        }
        match (out.is_empty(), refused) {
            (true, Some(ip)) => {
                let host = uri.host().unwrap_or_default();
                Err(ureq::Error::Io(io::Error::new(io::ErrorKind::PermissionDenied, format!("{PRIVATE}{host} ({ip})"))))
            }
            _ => Ok(out),
        }
    }
}

/// Whether an address is on the public internet: not loopback, private, link-local (cloud
/// metadata lives there), shared (CGNAT), unspecified, multicast, broadcast or documentation;
/// IPv4 mapped or embedded in IPv6 is judged as IPv4.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (o[1] & 0xfe) == 18)
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            // 64:ff9b::/96 (NAT64) and 2002::/16 (6to4) carry an IPv4 address.
            // 64:ff9b:1::/48: NAT64 for local use, whatever the address inside.
            if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
                return false;
            }
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let v4 = std::net::Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
                return is_public(IpAddr::V4(v4));
            }
            if s[0] == 0x2002 {
                let v4 = std::net::Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
                return is_public(IpAddr::V4(v4));
            }
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || s[..6] == [0, 0, 0, 0, 0, 0]) // IPv4-compatible (deprecated)
        }
    }
}

/// Private networks `allow_private` opens (RFC 1918, shared CGNAT space, IPv6 unique local):
/// never unspecified (`0.0.0.0` reaches this machine), link-local (cloud metadata lives at
/// `169.254.169.254`), multicast or broadcast.
fn is_private_network(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64)
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_private_network(IpAddr::V4(v4)),
            None => (v6.segments()[0] & 0xfe00) == 0xfc00,
        },
    }
}

/// Whether `url` is an http(s) URL with a host.
pub fn check_url(url: &str) -> Result<url::Url, FetchError> {
    let parsed = url::Url::parse(url.trim()).map_err(|e| FetchError::NotWeb(format!("{url} ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(FetchError::NotWeb(url.to_owned()));
    }
    Ok(parsed)
}

/// Fetches `url` within `opts` and turns the body into markdown.
pub fn fetch(url: &str, opts: &FetchOptions) -> Result<Fetched, FetchError> {
    let started = std::time::Instant::now();
    let parsed = check_url(url)?;
    if url.trim().chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(FetchError::NotWeb(format!("{:?} (a URL has no spaces or control characters)", url.trim())));
    }
    // Redirects are followed here, hop by hop, not by the HTTP library: each `Location` is
    // resolved against the page that sent it (RFC 3986: `?page=2` keeps the path, `#top` the
    // whole URL) and refused unless it is http(s); the address guard judges every hop.
    let config = Config::builder()
        .timeout_global(Some(opts.timeout))
        .max_redirects(0)
        .http_status_as_error(false)
        .https_only(false)
        // A proxy would hide the address actually connected to from the guard.
        .proxy(None)
        .user_agent(concat!("lode/", env!("CARGO_PKG_VERSION"), " (+snapshot of a linked page)"))
        .build();
    let agent = ureq::Agent::with_parts(
        config,
        DefaultConnector::default(),
        Guard { allow_private: opts.allow_private, allow_loopback: opts.allow_loopback },
    );
    let _watch = opts.cancel.clone().map(|flag| CancelWatch::start(flag, agent.clone()));
    let cancelled = || opts.cancel.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst));
    if cancelled() {
        return Err(FetchError::Cancelled);
    }
    let timeout_s = opts.timeout.as_secs().max(1);
    let failed = |e| if cancelled() { FetchError::Cancelled } else { map_error(e, opts, timeout_s, parsed.host_str().unwrap_or_default()) };
    let mut current = parsed.clone();
    let mut hops = 0u32;
    let mut resp = loop {
        // The whole fetch shares one time limit, whatever the number of hops.
        let left = opts.timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(FetchError::Timeout(timeout_s));
        }
        let resp = agent
            .get(current.as_str())
            .config()
            .timeout_global(Some(left))
            .build()
            .header("Accept", "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.8")
            .call()
            .map_err(failed)?;
        let status = resp.status().as_u16();
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            break resp;
        }
        hops += 1;
        if hops > opts.max_redirects {
            return Err(FetchError::Redirects(opts.max_redirects));
        }
        let location = resp.headers().get("location").and_then(|v| v.to_str().ok()).map(str::trim).unwrap_or("");
        if location.is_empty() {
            return Err(FetchError::BadRedirect(format!("{current} answered {status} with no Location")));
        }
        let next = current.join(location).map_err(|e| FetchError::BadRedirect(format!("{current} → {location:?} ({e})")))?;
        if !matches!(next.scheme(), "http" | "https") || next.host_str().is_none_or(str::is_empty) {
            return Err(FetchError::BadRedirect(format!("{current} → {next}: only http and https are followed")));
        }
        current = next;
    };
    let status = resp.status().as_u16();
    let final_url = current.to_string();
    if !(200..300).contains(&status) {
        return Err(FetchError::Status(status));
    }
    let header = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let media = header.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if !media.is_empty() && !readable(&media) {
        return Err(FetchError::NotText(media));
    }
    if let Some(len) = resp.headers().get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok()) {
        if len > opts.max_bytes {
            return Err(FetchError::TooLarge(opts.max_bytes));
        }
    }
    let bytes = resp.body_mut().with_config().limit(opts.max_bytes).read_to_vec().map_err(failed)?;
    if cancelled() {
        return Err(FetchError::Cancelled);
    }
    let text = decode(&bytes, &header, &media);
    if text.contains('\0') {
        return Err(FetchError::Binary(media));
    }
    let html_like = media.contains("html") || (media.is_empty() && text.trim_start().starts_with('<'));
    let (title, markdown) = if html_like {
        // Parsing shares the fetch's time limit (at least a second of it).
        let left = opts.timeout.saturating_sub(started.elapsed()).max(Duration::from_secs(1));
        let page = html::to_markdown(&text, left)?;
        (page.title, page.markdown)
    } else if media.contains("markdown") {
        (None, text.replace("\r\n", "\n"))
    } else {
        (None, html::plain_to_markdown(&text))
    };
    Ok(Fetched {
        url: url.trim().to_owned(),
        final_url,
        status,
        content_type: if media.is_empty() { "text/html".to_owned() } else { media },
        title,
        text: markdown,
    })
}

/// Watches a fetch's cancel flag from a thread of its own, and closes the agent's connections
/// when it is set: a call blocked on the network in the fetching thread then fails at once.
/// Dropping the watch (the fetch returned) ends the thread.
struct CancelWatch {
    done: std::sync::mpsc::Sender<()>,
}

impl CancelWatch {
    fn start(flag: std::sync::Arc<std::sync::atomic::AtomicBool>, agent: ureq::Agent) -> CancelWatch {
        let (done, rx) = std::sync::mpsc::channel::<()>();
        let _ = std::thread::Builder::new().name("lode-fetch-cancel".into()).spawn(move || loop {
            match rx.recv_timeout(Duration::from_millis(25)) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if flag.load(std::sync::atomic::Ordering::SeqCst) => {
                    agent.shutdown();
                    return;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
        });
        CancelWatch { done }
    }
}

impl Drop for CancelWatch {
    fn drop(&mut self) {
        let _ = self.done.send(());
    }
}

fn readable(media: &str) -> bool {
    matches!(media, "text/html" | "application/xhtml+xml" | "text/plain" | "text/markdown" | "text/x-markdown")
}

fn map_error(e: ureq::Error, opts: &FetchOptions, timeout_s: u64, host: &str) -> FetchError {
    match e {
        ureq::Error::Timeout(_) => FetchError::Timeout(timeout_s),
        ureq::Error::BodyExceedsLimit(_) => FetchError::TooLarge(opts.max_bytes),
        ureq::Error::TooManyRedirects => FetchError::Redirects(opts.max_redirects),
        ureq::Error::StatusCode(s) => FetchError::Status(s),
        ureq::Error::Io(io) if io.kind() == io::ErrorKind::PermissionDenied && io.to_string().starts_with(PRIVATE) => {
            FetchError::Private(io.to_string()[PRIVATE.len()..].to_owned())
        }
        ureq::Error::Io(io) if io.kind() == io::ErrorKind::TimedOut => FetchError::Timeout(timeout_s),
        ureq::Error::Io(io) if io.to_string().contains("lookup address") => FetchError::Network(format!("cannot resolve {host}")),
        ureq::Error::Io(io) if io.kind() == io::ErrorKind::ConnectionRefused => {
            FetchError::Network(format!("{host} refused the connection"))
        }
        ureq::Error::HostNotFound => FetchError::Network(format!("cannot resolve {host}")),
        other => FetchError::Network(other.to_string()),
    }
}

/// Decodes a body: the charset the header declares, else a BOM, else (HTML) a `<meta>`
/// charset in the first 1024 bytes, else UTF-8 when valid, else windows-1252 (HTML's default).
/// Undecodable bytes become U+FFFD.
fn decode(bytes: &[u8], header: &str, media: &str) -> String {
    let declared = charset_param(header).and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()));
    let (bom, _) = encoding_rs::Encoding::for_bom(bytes).map_or((None, 0), |(e, n)| (Some(e), n));
    let meta = || (media.contains("html") || media.is_empty()).then(|| meta_charset(&bytes[..bytes.len().min(1024)])).flatten();
    let enc = bom.or(declared).or_else(meta).unwrap_or_else(|| {
        if std::str::from_utf8(bytes).is_ok() {
            encoding_rs::UTF_8
        } else {
            encoding_rs::WINDOWS_1252
        }
    });
    // UTF-16 declared by a meta tag is a lie (the tag itself was read as ASCII).
    let enc = if bom.is_none() && (enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE) { encoding_rs::UTF_8 } else { enc };
    let (text, _, _) = enc.decode(bytes);
    text.into_owned()
}

fn charset_param(header: &str) -> Option<String> {
    header.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case("charset").then(|| v.trim().trim_matches(['"', '\'']).to_owned())
    })
}

/// `charset=` inside a `<meta>` tag of the document's head (the prescan, simplified: the tag's
/// bytes are ASCII in every encoding a page may declare this way).
fn meta_charset(head: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut at = 0;
    while let Some(i) = find(&lower[at..], b"<meta") {
        let start = at + i;
        let end = lower[start..].iter().position(|&b| b == b'>').map_or(lower.len(), |e| start + e);
        let tag = &lower[start..end];
        if let Some(c) = find(tag, b"charset=") {
            let rest = &tag[c + 8..];
            let rest: Vec<u8> = rest.iter().copied().skip_while(|b| *b == b'"' || *b == b'\'' || *b == b' ').collect();
            let label: Vec<u8> = rest.into_iter().take_while(|b| b.is_ascii_alphanumeric() || b"-_:.".contains(b)).collect();
            if let Some(enc) = encoding_rs::Encoding::for_label(&label) {
                return Some(enc);
            }
        }
        at = end;
        if at >= lower.len() {
            break;
        }
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_off_the_public_internet_are_refused() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "::127.0.0.1",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:2800:220:1:248:1893:25c8:1946", "::ffff:8.8.8.8"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn allowing_private_networks_never_allows_this_machine_or_metadata() {
        for ip in ["10.0.0.1", "192.168.1.2", "172.20.0.1", "100.64.1.1", "fd00::1", "::ffff:10.1.1.1"] {
            assert!(is_private_network(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "0.0.0.0",
            "::",
            "169.254.169.254",
            "fe80::1",
            "224.0.0.1",
            "255.255.255.255",
            "127.0.0.1",
            "::1",
            "::ffff:169.254.169.254",
            "64:ff9b:1::a00:1",
        ] {
            assert!(!is_private_network(ip.parse().unwrap()) && !is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn only_web_urls_are_fetched() {
        for bad in ["file:///etc/passwd", "ftp://example.com/x", "javascript:alert(1)", "notes/a.md", "http://", "gopher://x", "https://"] {
            assert!(matches!(check_url(bad), Err(FetchError::NotWeb(_))), "{bad}");
        }
        assert!(check_url("https://example.com/a?b=c").is_ok());
    }

    #[test]
    fn bodies_decode_from_the_declared_charset_then_the_page() {
        let latin1 = b"caf\xe9 cr\xe8me";
        assert_eq!(decode(latin1, "text/plain; charset=iso-8859-1", "text/plain"), "café crème");
        assert_eq!(decode(latin1, "text/plain", "text/plain"), "café crème", "not UTF-8: windows-1252");
        let meta = b"<html><head><meta charset=\"shift_jis\"></head><body>\x93\xfa\x96\x7b</body></html>";
        assert!(decode(meta, "text/html", "text/html").contains("日本"));
        let http_equiv = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=koi8-r\"><p>\xf0\xd2\xc9\xd7\xc5\xd4</p>";
        assert!(decode(http_equiv, "text/html", "text/html").contains("Привет"));
        let bom16 = [0xff, 0xfe, b'h', 0, b'i', 0];
        assert_eq!(decode(&bom16, "text/html; charset=utf-8", "text/html"), "hi", "a BOM wins over the header");
        assert_eq!(decode(b"ok \xff", "text/plain; charset=utf-8", "text/plain"), "ok \u{fffd}");
    }
}
