//! Fetching model files from the Hugging Face hub (or a mirror of its layout): each file from
//! `<repo>/resolve/<commit>/<path>` at the commit the catalogue pins, resumed with a ranged
//! request where a partial download was left, and checked against the catalogue's SHA-256 (and
//! size) before it is kept. The hub's own listing is never a checksum (docs/security.md).
//!
//! Invariants: no file is kept unless it matches the catalogue compiled into lode (or given by
//! the user with `--catalogue`); a partial download is kept only in the user's cache, named by
//! the checksum it must reach, so a file under its own name is always a whole, checked one;
//! every request goes to the one endpoint given (a redirect may lead elsewhere, as the hub's
//! CDN does, and never carries the token); the token goes only to a hub the user chose, over
//! https or loopback.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sha2::Digest;

/// The public hub, when neither `[models] mirror` nor `HF_ENDPOINT` says otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

pub struct Hub {
    pub endpoint: String,
    token: Option<String>,
    /// Why a token that is set is not sent to this hub.
    pub token_withheld: Option<String>,
    agent: ureq::Agent,
}

/// The hub could not be reached at all (no network, a wrong endpoint, a firewall): the one
/// failure where copying the files by hand is the advice.
#[derive(Debug)]
pub struct Unreachable(String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// One file to fetch: its path in the repository and what the catalogue pins it to.
#[derive(Debug, Clone)]
pub struct Pinned {
    pub path: String,
    pub sha256: String,
    pub size: Option<u64>,
}

impl Hub {
    /// The hub at `mirror` (the `[models] mirror` setting in force), else `HF_ENDPOINT`, else
    /// the public hub. `HF_TOKEN` (or `HUGGING_FACE_HUB_TOKEN`) is sent only to the public hub
    /// over https, or to a hub the user named (`user_mirror`, the user config's own mirror, or
    /// `HF_ENDPOINT`) over https or loopback.
    pub fn new(mirror: Option<&str>, user_mirror: Option<&str>) -> Hub {
        let from_env = std::env::var("HF_ENDPOINT").ok().filter(|e| !e.trim().is_empty());
        let endpoint = mirror
            .map(str::to_owned)
            .filter(|e| !e.trim().is_empty())
            .or_else(|| from_env.clone())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned())
            .trim_end_matches('/')
            .to_owned();
        let token = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"].iter().find_map(|k| std::env::var(k).ok()).filter(|t| !t.trim().is_empty());
        let named = |e: Option<&str>| e.is_some_and(|e| e.trim_end_matches('/') == endpoint);
        let secure = endpoint.to_ascii_lowercase().starts_with("https://") || lode_answer::egress::is_loopback(&endpoint);
        let withheld = if endpoint == DEFAULT_ENDPOINT {
            None
        } else if !(named(user_mirror) || named(from_env.as_deref())) {
            Some(format!("{endpoint} is not a hub you named (your user config's [models] mirror, or HF_ENDPOINT)"))
        } else if !secure {
            Some(format!("{endpoint} is plain http and not on this machine"))
        } else {
            None
        };
        let token_withheld = match (&token, withheld) {
            (Some(_), Some(why)) => Some(format!("HF_TOKEN is not sent: {why}")),
            _ => None,
        };
        let token = token.filter(|_| token_withheld.is_none());
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(15)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .max_redirects(10)
            // The CDN's URLs are signed: the token never follows a redirect.
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::Never)
            .user_agent(concat!("lode/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Hub { endpoint, token, token_withheld, agent }
    }

    fn get(&self, url: &str, range_from: Option<u64>) -> Result<ureq::http::Response<ureq::Body>> {
        let mut req = self.agent.get(url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        if let Some(from) = range_from {
            req = req.header("Range", &format!("bytes={from}-"));
        }
        req.call().map_err(|e| anyhow::Error::new(Unreachable(format!("cannot reach the model hub at {} ({e})", self.endpoint))))
    }

    /// Downloads `file` of `repo` at `commit` to `dest`, resuming the partial download an
    /// earlier run left in `partials` (named by the checksum), and checks it against the pin.
    /// `progress(done, total)` as bytes arrive.
    pub fn download(
        &self,
        repo: &str,
        commit: &str,
        file: &Pinned,
        dest: &Path,
        partials: &Path,
        mut progress: impl FnMut(u64, Option<u64>),
    ) -> Result<()> {
        std::fs::create_dir_all(partials).with_context(|| format!("cannot create {}", partials.display()))?;
        let partial = partial_path(partials, file);
        let mut have = std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
        if file.size.is_some_and(|s| have > s) {
            have = 0;
        }
        let url = format!("{}/{repo}/resolve/{commit}/{}", self.endpoint, file.path);
        let resp = self.get(&url, (have > 0).then_some(have))?;
        let status = resp.status().as_u16();
        let refused = || match &self.token_withheld {
            Some(why) => format!("; {why}"),
            None => String::new(),
        };
        let append = match status {
            206 => true,
            200 => false, // no ranges here: start over
            416 if file.size == Some(have) => true,
            404 => bail!("{repo} has no {} at {commit} on {} (404)", file.path, self.endpoint),
            401 | 403 => {
                bail!("the model hub refused {}/{} ({status}): set HF_TOKEN to a token that may read it{}", repo, file.path, refused())
            }
            s => bail!("downloading {url} failed: HTTP {s}"),
        };
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&partial)
            .with_context(|| format!("cannot write {}", partial.display()))?;
        let mut done = if append { have } else { 0 };
        if status != 416 {
            let mut body = resp.into_body().into_reader();
            let mut buf = vec![0u8; 256 << 10];
            loop {
                let n = match body.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => {
                        let _ = out.flush();
                        bail!("the download of {} stopped at {done} bytes ({e}); run `lode setup` again to resume it", file.path);
                    }
                };
                out.write_all(&buf[..n]).with_context(|| format!("cannot write {}", partial.display()))?;
                done += n as u64;
                if file.size.is_some_and(|s| done > s) {
                    drop(out);
                    let _ = std::fs::remove_file(&partial);
                    bail!(
                        "{} is larger than the catalogue's {} bytes (an altered download); nothing was installed",
                        file.path,
                        file.size.unwrap_or(0)
                    );
                }
                progress(done, file.size);
            }
        }
        out.sync_all().with_context(|| format!("cannot write {}", partial.display()))?;
        drop(out);
        if let Some(size) = file.size {
            if done < size {
                bail!("the download of {} ended at {done} of {size} bytes; run `lode setup` again to resume it", file.path);
            }
        }
        if let Err(e) = verify(&partial, file) {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        std::fs::copy(&partial, dest).with_context(|| format!("cannot write {}", dest.display()))?;
        let _ = std::fs::remove_file(&partial);
        Ok(())
    }
}

/// Where a partial download of `file` waits to be resumed: named by the checksum it must reach.
pub fn partial_path(partials: &Path, file: &Pinned) -> PathBuf {
    partials.join(format!("{}.partial", file.sha256.to_ascii_lowercase()))
}

/// Checks a downloaded file against its pin: size, then SHA-256, reading it in pieces (a
/// reranker's weights are over a gigabyte).
fn verify(path: &Path, file: &Pinned) -> Result<()> {
    let len = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.len();
    if let Some(size) = file.size {
        if len != size {
            bail!("{} is {len} bytes, the catalogue pins {size}; nothing was installed", file.path);
        }
    }
    let mut h = sha2::Sha256::new();
    let mut r = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = r.read(&mut buf).with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let got: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if !got.eq_ignore_ascii_case(&file.sha256) {
        bail!("{} has SHA-256 {got}, the catalogue pins {} (a damaged or altered download); nothing was installed", file.path, file.sha256);
    }
    Ok(())
}
