//! Fetching model files from the Hugging Face hub (or a mirror of its layout): a revision
//! resolved to a commit with every file's size and checksum (`api/models/<repo>/revision/<rev>`),
//! then each file from `<repo>/resolve/<commit>/<path>`, resumed with a ranged request where a
//! partial download was left, and checked against the listing's checksum before it is kept.
//!
//! Invariants: no file is kept unless its size and checksum match the hub's listing (SHA-256
//! for files stored with LFS, the git blob id otherwise); a partial download is kept only under
//! its `.partial` name, so a file under its own name is always a whole, checked one; every
//! request goes to the one endpoint given (a redirect may lead elsewhere, as the hub's CDN does).

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use sha2::Digest;

/// The public hub, when neither `[models] mirror` nor `HF_ENDPOINT` says otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

pub struct Hub {
    pub endpoint: String,
    token: Option<String>,
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

/// A repository at one commit: its files with their sizes and checksums.
#[derive(Debug, Clone)]
pub struct Revision {
    pub commit: String,
    pub files: Vec<Listed>,
}

#[derive(Debug, Clone)]
pub struct Listed {
    pub path: String,
    pub size: Option<u64>,
    /// Files stored with LFS (weights): their SHA-256.
    pub sha256: Option<String>,
    /// Other files: their git blob id (SHA-1 of `blob <len>\0<bytes>`).
    pub blob: Option<String>,
}

impl Hub {
    /// The hub at `mirror` (a `[models] mirror` setting), else `HF_ENDPOINT`, else the public
    /// hub; with `HF_TOKEN` (or `HUGGING_FACE_HUB_TOKEN`) as a bearer token when set.
    pub fn new(mirror: Option<&str>) -> Hub {
        let endpoint = mirror
            .map(str::to_owned)
            .or_else(|| std::env::var("HF_ENDPOINT").ok())
            .filter(|e| !e.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let token = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"].iter().find_map(|k| std::env::var(k).ok()).filter(|t| !t.trim().is_empty());
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(15)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .max_redirects(10)
            .user_agent(concat!("lode/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Hub { endpoint: endpoint.trim_end_matches('/').to_owned(), token, agent }
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

    /// `repo` at `revision` (a branch, tag or commit): the commit it names now and its files.
    pub fn revision(&self, repo: &str, revision: &str) -> Result<Revision> {
        let url = format!("{}/api/models/{repo}/revision/{revision}?blobs=true", self.endpoint);
        let resp = self.get(&url, None)?;
        let status = resp.status().as_u16();
        let body = resp.into_body().read_to_string().with_context(|| format!("reading {url}"))?;
        match status {
            200 => {}
            401 | 403 => bail!("the model hub refused {repo} ({status}): it may be gated or private; set HF_TOKEN to a token that may read it"),
            404 => bail!("the model hub at {} has no {repo} at revision {revision} (404)", self.endpoint),
            s => bail!("the model hub at {} answered {s} for {repo}@{revision}: {}", self.endpoint, body.chars().take(200).collect::<String>()),
        }
        let v: serde_json::Value = serde_json::from_str(&body).with_context(|| format!("{url} did not answer with JSON"))?;
        let commit = v["sha"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| anyhow!("{url}: no commit (`sha`) in the answer"))?.to_owned();
        let files = v["siblings"]
            .as_array()
            .map(|s| {
                s.iter()
                    .filter_map(|f| {
                        Some(Listed {
                            path: f["rfilename"].as_str()?.to_owned(),
                            size: f["lfs"]["size"].as_u64().or(f["size"].as_u64()),
                            sha256: f["lfs"]["sha256"].as_str().map(str::to_owned),
                            blob: f["blobId"].as_str().map(str::to_owned),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Revision { commit, files })
    }

    /// Downloads `file` of `repo` at `commit` to `dest`, resuming `dest.partial` if an earlier
    /// run left one, and checks it against the listing. `progress(done, total)` as bytes arrive.
    pub fn download(&self, repo: &str, commit: &str, file: &Listed, dest: &Path, mut progress: impl FnMut(u64, Option<u64>)) -> Result<()> {
        let partial = dest.with_file_name(format!("{}.partial", dest.file_name().and_then(|n| n.to_str()).unwrap_or("download")));
        let mut have = std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
        if file.size.is_some_and(|s| have > s) {
            have = 0;
        }
        let url = format!("{}/{repo}/resolve/{commit}/{}", self.endpoint, file.path);
        let resp = self.get(&url, (have > 0).then_some(have))?;
        let status = resp.status().as_u16();
        let append = match status {
            206 => true,
            200 => false, // no ranges here: start over
            416 if file.size == Some(have) => true,
            404 => bail!("{repo} has no {} at {commit} on {} (404)", file.path, self.endpoint),
            401 | 403 => bail!("the model hub refused {}/{} ({status}): set HF_TOKEN to a token that may read it", repo, file.path),
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
        std::fs::rename(&partial, dest).with_context(|| format!("cannot move {} into place", partial.display()))?;
        Ok(())
    }
}

/// Checks a downloaded file against the listing: size, then SHA-256 (LFS) or the git blob id,
/// reading it in pieces (a reranker's weights are over a gigabyte).
fn verify(path: &Path, file: &Listed) -> Result<()> {
    let len = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.len();
    if let Some(size) = file.size {
        if len != size {
            bail!("{} is {len} bytes, the hub lists {size}; nothing was installed", file.path);
        }
    }
    let each = |f: &mut dyn FnMut(&[u8])| -> Result<()> {
        let mut r = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = r.read(&mut buf).with_context(|| format!("cannot read {}", path.display()))?;
            if n == 0 {
                return Ok(());
            }
            f(&buf[..n]);
        }
    };
    if let Some(want) = &file.sha256 {
        let mut h = sha2::Sha256::new();
        each(&mut |b| h.update(b))?;
        let got = hex(&h.finalize());
        if !got.eq_ignore_ascii_case(want) {
            bail!("{} has SHA-256 {got}, the hub lists {want} (a damaged or altered download); nothing was installed", file.path);
        }
    } else if let Some(want) = &file.blob {
        let mut h = sha1_smol::Sha1::new();
        h.update(format!("blob {len}\0").as_bytes());
        each(&mut |b| h.update(b))?;
        let got = h.digest().to_string();
        if !got.eq_ignore_ascii_case(want) {
            bail!("{} has git blob id {got}, the hub lists {want} (a damaged or altered download); nothing was installed", file.path);
        }
    } else {
        bail!("the hub lists no checksum for {}; lode does not install unchecked files", file.path);
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
