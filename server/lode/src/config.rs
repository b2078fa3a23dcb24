//! Settings: defaults, overridden by the user's own config, overridden by what the vault's
//! `.lode/config.toml` may set (docs/security.md), overridden by flags.
//!
//! Invariant: a setting that loads code, sends data off the machine, chooses where credentials
//! go or raises a limit is taken from a vault's config only when the user approved that folder
//! with exactly those settings (`lode trust`); otherwise it is ignored and said once.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lode_core::ChunkConfig;
use lode_store::{SearchOptions, StoreOptions};
use serde::{Deserialize, Serialize};

use crate::trust::{self, Approval};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub chunk: ChunkSection,
    pub index: IndexSection,
    pub search: SearchSection,
    pub answer: AnswerSection,
    pub egress: EgressSection,
    /// An OpenAI-compatible endpoint for `lode ask --llm`.
    pub llm: Option<lode_answer::llm::LlmConfig>,
    pub models: ModelsSection,
    pub externals: ExternalsSection,
    pub gate: GateSection,
    /// The team's shared tier, searched beside this vault (`lode publish` makes one).
    pub shared: Option<SharedSection>,
    /// What only the user's own config may say (ignored in a vault's config).
    pub trust: TrustSection,
    /// What the vault's config asked for that was not honoured, and why (not a setting).
    #[serde(skip)]
    pub report: TrustReport,
}

/// `[trust]`, read from the user's config only.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrustSection {
    /// Environment variables an approved vault's `[llm] api_key_env` may name (the user
    /// config's own `[llm] api_key_env` is allowed without being listed).
    pub api_key_env: Vec<String>,
    /// MCP clients (`lode mcp`) are local: they see what the user sees, no-egress notes and
    /// secrets included. Off by default: an MCP client usually forwards what it gets to a
    /// remote model.
    pub mcp_local: bool,
}

/// What a vault's config asked for beyond what a folder may set, and whether the user approved it.
#[derive(Debug, Clone, Default)]
pub struct TrustReport {
    /// The vault folder (canonical) and its config file.
    pub folder: PathBuf,
    pub file: PathBuf,
    /// The settings not honoured until the user approves the folder, as the user reads them
    /// (`[llm]`, `[models] runtime`, ...).
    pub ignored: Vec<String>,
    /// The settings not honoured whatever the approval: only the user's own config may say
    /// them (`[trust]`, a key variable it does not list).
    pub user_only: Vec<String>,
    /// The guarded settings and limits the vault's config holds, one `[section] key = value`
    /// each: what `lode trust` approves.
    pub guarded: Vec<String>,
    /// SHA-256 of those settings (`None`: the vault's config holds none).
    pub hash: Option<String>,
    pub approval: Option<Approval>,
    /// The user config's own `[models] mirror` (a hub token may go there).
    pub user_mirror: Option<String>,
    /// The user config, when there is one.
    pub user_file: Option<PathBuf>,
}

impl TrustReport {
    /// The one line said when settings were ignored: which, and the command that approves them.
    pub fn notice(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.ignored.is_empty() {
            let changed = if self.approval == Some(Approval::Changed) { " (they changed since you approved this folder)" } else { "" };
            parts.push(format!(
                "settings a folder may not set without your approval{changed}: {}; to approve them run `lode trust --vault {}`",
                self.ignored.join(", "),
                self.folder.display()
            ));
        }
        if !self.user_only.is_empty() {
            let user = self
                .user_file
                .clone()
                .or_else(trust::user_config_path)
                .map_or_else(|| "~/.config/lode/config.toml".to_owned(), |p| p.display().to_string());
            parts.push(format!(
                "settings `lode trust` cannot approve, which only your user config ({user}) may give: {}",
                self.user_only.join(", ")
            ));
        }
        (!parts.is_empty()).then(|| format!("lode: ignoring in {}: {} (docs/security.md)", self.file.display(), parts.join("; and ")))
    }
}

/// `[shared] index = "s3://bucket/prefix"` (or a folder): a vault published with `lode
/// publish`, searched in place and read-only. Credentials never go here: they come from the
/// environment, `~/.aws/credentials` or the instance's role.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SharedSection {
    pub index: String,
    /// Object-store options that are not secrets: `endpoint`, `region`, `allow_http`, ...
    #[serde(default)]
    pub options: std::collections::HashMap<String, String>,
    /// Longest a question waits for the shared tier before answering from this vault alone.
    #[serde(default = "default_shared_timeout")]
    pub timeout_secs: f64,
}

fn default_shared_timeout() -> f64 {
    10.0
}

impl SharedSection {
    pub fn config(&self) -> lode_retrieval::shared::SharedConfig {
        let mut c = lode_retrieval::shared::SharedConfig::new(&self.index);
        c.options = self.options.clone();
        // NaN clamps to NaN, which no Duration holds: the default then.
        let secs = if self.timeout_secs.is_nan() { default_shared_timeout() } else { self.timeout_secs.clamp(0.5, 600.0) };
        c.timeout = std::time::Duration::from_secs_f64(secs);
        c
    }
}

/// Your own words that mark parts of a note as not asserting what they say, added to the
/// built-in lists (`server/lode-core/data/context-words.txt`): headings in another language,
/// your team's lead-ins. See docs/gate.md.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateSection {
    /// A line under a heading holding one of these is not stated as fact ("Mythen", "Verworfen").
    pub headings: Vec<String>,
    /// Only when the heading starts with it ("Alt", "Vorher").
    pub heading_openers: Vec<String>,
    /// A lead-in (a line ending in ":") or parent item holding one of these qualifies its list.
    pub lead_ins: Vec<String>,
    /// Callout types (`> [!type]`) whose content is not asserted.
    pub callouts: Vec<String>,
    /// Words of the paragraph after a block quote that dispute it.
    pub disputes: Vec<String>,
    /// Words of a footnote that narrow the sentence referencing it.
    pub footnotes: Vec<String>,
    /// Status words that mark a note or a section as not current ("verworfen", "Entwurf"):
    /// frontmatter `status:`, a title's "(…)", a banner, a section's first line.
    pub status: Vec<String>,
}

impl GateSection {
    pub fn words(&self) -> std::sync::Arc<lode_core::gate::context::ContextWords> {
        let lists = [
            ("headings", &self.headings),
            ("heading-openers", &self.heading_openers),
            ("lead-ins", &self.lead_ins),
            ("callouts", &self.callouts),
            ("disputes", &self.disputes),
            ("footnotes", &self.footnotes),
            ("status", &self.status),
        ];
        let extra: Vec<(String, Vec<String>)> =
            lists.iter().filter(|(_, w)| !w.is_empty()).map(|(n, w)| (n.to_string(), (*w).clone())).collect();
        lode_core::gate::context::ContextWords::with_user(&extra).expect("every list named here is one ContextWords knows")
    }
}

/// Linked web pages: how they are fetched, and when a snapshot counts as stale.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExternalsSection {
    /// A snapshot older than this many days (since a fetch last confirmed it) is stale.
    pub stale_days: f64,
    /// For a whole fetch, redirects and body included.
    pub timeout_secs: u64,
    /// Pages larger than this are refused.
    pub max_mb: f64,
    pub max_redirects: u32,
    /// Fetch from private, shared and link-local addresses (an intranet wiki).
    pub allow_private: bool,
    /// Fetch from this machine's loopback addresses.
    pub allow_loopback: bool,
    /// Domains whose snapshots never go to a remote model, and which a model's tool call may
    /// not fetch; a domain covers its subdomains.
    pub no_egress_domains: Vec<String>,
}

impl Default for ExternalsSection {
    fn default() -> Self {
        let f = lode_externals::FetchOptions::default();
        ExternalsSection {
            stale_days: lode_externals::Freshness::default().stale_days,
            timeout_secs: f.timeout.as_secs(),
            max_mb: f.max_bytes as f64 / (1024.0 * 1024.0),
            max_redirects: f.max_redirects,
            allow_private: f.allow_private,
            allow_loopback: f.allow_loopback,
            no_egress_domains: Vec::new(),
        }
    }
}

impl ExternalsSection {
    pub fn fetch_options(&self) -> lode_externals::FetchOptions {
        lode_externals::FetchOptions {
            timeout: std::time::Duration::from_secs(self.timeout_secs.max(1)),
            max_bytes: (self.max_mb.max(0.0) * 1024.0 * 1024.0) as u64,
            max_redirects: self.max_redirects,
            allow_private: self.allow_private,
            allow_loopback: self.allow_loopback,
            cancel: None,
        }
    }

    pub fn freshness(&self) -> lode_externals::Freshness {
        lode_externals::Freshness { stale_days: self.stale_days }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelsSection {
    /// Folder of model folders [default: $LODE_MODELS, else .lode-tools/models of the checkout the
    /// binary was built in, else ~/.local/share/lode/models (`lode setup`)].
    pub dir: Option<PathBuf>,
    /// ONNX Runtime library [default: $ORT_DYLIB_PATH, else .lode-tools/onnxruntime/, else
    /// ~/.local/share/lode/onnxruntime/ (`lode setup`)].
    pub runtime: Option<PathBuf>,
    /// Embedding model: a folder name under `dir`, or a path. Empty: no dense retrieval.
    pub embedder: String,
    /// Cross-encoder for `--mode rerank` (optional).
    pub reranker: Option<String>,
    /// NLI model (`kind = "nli"`) for the gate's entailment step (optional; without it, claims
    /// that are not carried by one quote are shown as evidence only).
    pub nli: Option<String>,
    /// Where `lode setup --embedder/--reranker/--nli` fetches models: a mirror of the Hugging
    /// Face hub's layout (`<url>/api/models/…`, `<url>/<repo>/resolve/…`) [default: $HF_ENDPOINT,
    /// else https://huggingface.co].
    pub mirror: Option<String>,
    /// Inference threads.
    pub threads: usize,
    /// Embedding window size in model tokens: consecutive passages of a section are embedded
    /// together up to this length (citations still point at single passages).
    pub window_tokens: usize,
    /// The API base of an OpenAI-compatible embedding server (`http://127.0.0.1:11434/v1` for
    /// Ollama), used when `embedder = "openai:<model>"`. Your user config only.
    pub embedder_url: Option<String>,
    /// Environment variable holding that server's key, if it wants one. Your user config only.
    pub embedder_api_key_env: Option<String>,
    /// The loopback endpoint is a tunnel to another machine: treat what it is sent as leaving
    /// this one (no-egress notes withheld, secrets masked). Your user config only.
    pub embedder_off_machine: bool,
    /// Inputs per request to the embedding server.
    pub embedder_batch: usize,
    /// Longest wait for one request to the embedding server, in seconds.
    pub embedder_timeout_secs: u64,
    /// Tokens the server's model reads per input (windows are planned within it).
    pub embedder_max_tokens: usize,
    /// `lode serve` releases a model unused for this many seconds (its memory goes back to the
    /// system) and loads it again on next use, which costs a second or so; 0 keeps models loaded.
    pub unload_after_secs: f64,
}

impl Default for ModelsSection {
    fn default() -> Self {
        ModelsSection {
            dir: None,
            runtime: None,
            embedder: "all-MiniLM-L6-v2".into(),
            reranker: None,
            nli: None,
            mirror: None,
            threads: lode_models::default_threads(),
            window_tokens: lode_retrieval::WINDOW_TOKENS,
            unload_after_secs: 300.0,
            embedder_url: None,
            embedder_api_key_env: None,
            embedder_off_machine: false,
            embedder_batch: lode_models::remote::DEFAULT_BATCH,
            embedder_timeout_secs: 60,
            embedder_max_tokens: 512,
        }
    }
}

impl ModelsSection {
    pub fn models_dir(&self) -> PathBuf {
        if let Some(d) = &self.dir {
            return d.clone();
        }
        if let Some(d) = std::env::var_os("LODE_MODELS") {
            return PathBuf::from(d);
        }
        let exe_relative = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().and_then(Path::parent).and_then(Path::parent).map(|r| r.join(".lode-tools/models")));
        if let Some(d) = exe_relative.filter(|d| d.is_dir()) {
            return d;
        }
        // Installed: where `lode setup` puts them (named in errors even before it has run).
        match lode_models::user_data_dir() {
            Some(d) => d.join("models"),
            None => PathBuf::from(".lode-tools/models"),
        }
    }

    /// The id the configured embedder's vectors are recorded under, without loading it: a
    /// folder's manifest id (its name if the manifest cannot be read), a server's
    /// `openai:<model>@<url>`.
    pub fn embedder_id(&self) -> String {
        let name = self.embedder.trim();
        if name.is_empty() {
            return String::new();
        }
        match (name.strip_prefix("openai:"), self.embedder_url.as_deref()) {
            (Some(model), Some(url)) => lode_models::remote::HttpConfig::new(model, url).id(),
            (Some(_), None) => name.to_owned(),
            (None, _) => lode_models::Manifest::load(&self.resolve(name)).map(|m| m.id).unwrap_or_else(|_| name.to_owned()),
        }
    }

    /// Whether the embedder runs here on ONNX Runtime (not a server).
    pub fn embedder_is_local_model(&self) -> bool {
        let name = self.embedder.trim();
        !name.is_empty() && !name.starts_with("openai:")
    }

    /// Where the configured embedder comes from: `openai:<model>` is a server
    /// (`embedder_url`), anything else a model folder. `scrub` masks secrets in what goes to a
    /// server off this machine.
    pub fn embedder_source(&self, scrub: lode_models::remote::Scrub) -> Result<lode_models::EmbedderSource> {
        let name = self.embedder.trim();
        let Some(model) = name.strip_prefix("openai:") else {
            return Ok(lode_models::EmbedderSource::Onnx { dir: self.resolve(name), runtime: self.runtime.clone(), threads: self.threads });
        };
        let user = trust::user_config_path().map_or_else(|| "~/.config/lode/config.toml".to_owned(), |p| p.display().to_string());
        let Some(url) = self.embedder_url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
            anyhow::bail!(
                "[models] embedder = {name:?} needs the server's address: add `embedder_url = \"http://127.0.0.1:11434/v1\"` (Ollama; LM Studio: http://127.0.0.1:1234/v1, llama.cpp: http://127.0.0.1:8080/v1) under [models] in your user config ({user})"
            );
        };
        let mut h = lode_models::remote::HttpConfig::new(model, url);
        anyhow::ensure!(
            !h.model.is_empty(),
            "[models] embedder = {name:?} names no model: write \"openai:<model>\", e.g. \"openai:nomic-embed-text\""
        );
        h.api_key_env = self.embedder_api_key_env.clone().filter(|v| !v.trim().is_empty());
        h.batch = self.embedder_batch.clamp(1, 2048);
        h.timeout = std::time::Duration::from_secs(self.embedder_timeout_secs.clamp(1, 3600));
        h.max_tokens = self.embedder_max_tokens.clamp(16, 32_768);
        h.off_machine = self.embedder_off_machine || !lode_answer::egress::is_loopback(&h.url);
        h.scrub = Some(scrub);
        Ok(lode_models::EmbedderSource::Http(h))
    }

    /// A model setting as a folder: a path if it has a separator, else a name under `dir`.
    pub fn resolve(&self, name: &str) -> PathBuf {
        if name.contains('/') {
            PathBuf::from(name)
        } else {
            self.models_dir().join(name)
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnswerSection {
    /// Passages retrieved as context for an answer.
    pub context: usize,
    /// Entailment probability a synthesized claim must exceed (step 3 of the gate).
    pub entailment_threshold: f32,
    /// At most this many claims from the extractive synthesizer.
    pub max_claims: usize,
}

impl Default for AnswerSection {
    fn default() -> Self {
        let a = lode_answer::AskConfig::default();
        AnswerSection { context: a.context_limit, entailment_threshold: a.gate.entailment_threshold, max_claims: a.extract.max_claims }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressSection {
    /// Globs of vault-relative paths never sent to a remote model.
    pub no_egress: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChunkSection {
    /// Passage budget in tokens (words; CJK characters count one each).
    pub max_tokens: usize,
    /// Tokens shared by consecutive pieces of a split block.
    pub overlap_tokens: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexSection {
    /// Files over this many megabytes are skipped with a warning.
    pub max_file_mb: u64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchSection {
    pub limit: usize,
    /// How many of the rarest question terms the OR fallback uses.
    pub or_terms: usize,
    /// BM25 weight of note titles and headings relative to body text.
    pub heading_weight: f64,
    /// Weight of the section leg (whole sections ranked by BM25) against the passage leg; 0
    /// ranks passages alone.
    pub section_weight: f64,
}

impl Default for ChunkSection {
    fn default() -> Self {
        let c = ChunkConfig::default();
        ChunkSection { max_tokens: c.max_tokens, overlap_tokens: c.overlap_tokens }
    }
}

impl Default for IndexSection {
    fn default() -> Self {
        IndexSection { max_file_mb: 10 }
    }
}

impl Default for SearchSection {
    fn default() -> Self {
        let s = SearchOptions::default();
        SearchSection { limit: s.limit, or_terms: s.or_terms, heading_weight: s.heading_weight, section_weight: s.section_weight }
    }
}

/// Where a vault keeps lode's files.
pub fn state_dir(vault: &Path) -> PathBuf {
    vault.join(".lode")
}

impl Config {
    /// The settings for the vault at `vault` (canonical): defaults, the user's config, then what
    /// `<vault>/.lode/config.toml` may set (docs/security.md).
    pub fn load(vault: &Path) -> Result<Config> {
        let path = state_dir(vault).join("config.toml");
        match lode_answer::egress::read_config_file(&path) {
            Ok(bytes) => Config::layered(vault, Some(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Config::layered(vault, None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// [`Config::load`] with the vault config's bytes given (`None`: it has none): the language
    /// server reads them again when the file changes.
    pub fn layered(vault: &Path, vault_bytes: Option<&[u8]>) -> Result<Config> {
        // Approvals are keyed to the canonical folder, whichever path the editor opened it by.
        let canonical = vault.canonicalize();
        let vault = canonical.as_deref().unwrap_or(vault);
        let user = read_user_config()?;
        let vault_file = state_dir(vault).join("config.toml");
        let vault_table = match vault_bytes {
            Some(b) => {
                let text = std::str::from_utf8(b).with_context(|| format!("invalid settings in {}: not UTF-8", vault_file.display()))?;
                text.parse::<toml::Table>().with_context(|| format!("invalid settings in {}", vault_file.display()))?
            }
            None => toml::Table::new(),
        };
        layer(vault, &vault_file, user, vault_table)
    }

    /// Numbers no setting may hold, whoever wrote it: a weight or threshold that is not finite
    /// (TOML has `nan` and `inf`) breaks ranking or every comparison, and a weight's scale is
    /// bounded. Each is put back to its default or clamped.
    fn sanitize(&mut self) {
        let d = Config::default();
        let finite = |v: f64, default: f64| if v.is_finite() { v } else { default };
        self.search.heading_weight = finite(self.search.heading_weight, d.search.heading_weight).clamp(0.0, 100.0);
        self.search.section_weight = finite(self.search.section_weight, d.search.section_weight).clamp(0.0, 100.0);
        self.externals.stale_days = finite(self.externals.stale_days, d.externals.stale_days).max(0.0);
        self.externals.max_mb = finite(self.externals.max_mb, d.externals.max_mb).max(0.0);
        if !self.answer.entailment_threshold.is_finite() {
            self.answer.entailment_threshold = d.answer.entailment_threshold;
        }
        self.answer.entailment_threshold = self.answer.entailment_threshold.clamp(0.0, 1.0);
        self.models.unload_after_secs = finite(self.models.unload_after_secs, d.models.unload_after_secs).max(0.0);
        if let Some(s) = self.shared.as_mut() {
            s.timeout_secs = finite(s.timeout_secs, default_shared_timeout());
        }
    }

    pub fn store_options(&self) -> StoreOptions {
        // Any folder may shape its passages, within bounds that keep chunking linear.
        let max_tokens = self.chunk.max_tokens.clamp(16, 8192);
        StoreOptions {
            chunk: ChunkConfig { max_tokens, overlap_tokens: self.chunk.overlap_tokens.min(max_tokens / 2), ..ChunkConfig::default() },
            // Versions of the team's tier kept for this vault, in the user's cache: never files
            // that came with the folder (docs/security.md).
            shared_cache: lode_models::user_cache_dir()
                .map(|c| c.join("shared-versions").join(trust::sha256_hex(self.report.folder.as_os_str().as_encoded_bytes()))),
            ..StoreOptions::default()
        }
    }

    pub fn ask_config(&self) -> lode_answer::AskConfig {
        let mut a = lode_answer::AskConfig { context_limit: self.answer.context, search: self.search_options(), ..Default::default() };
        a.gate.entailment_threshold = self.answer.entailment_threshold;
        a.gate.words = self.gate.words();
        a.extract.max_claims = self.answer.max_claims;
        a.stale_days = self.externals.stale_days;
        a.shared = self.shared.as_ref().map(|s| std::sync::Arc::new(lode_retrieval::shared::SharedTier::new(s.config())));
        a
    }

    pub fn egress_rules(&self) -> Result<lode_answer::egress::EgressRules> {
        lode_answer::egress::EgressRules::new(&self.egress.no_egress)
            .map_err(|e| anyhow::anyhow!("[egress] no_egress: {e}"))?
            .with_domains(&self.externals.no_egress_domains)
            .map_err(|e| anyhow::anyhow!("[externals] no_egress_domains: {e}"))
    }

    pub fn search_options(&self) -> SearchOptions {
        SearchOptions {
            limit: self.search.limit,
            or_terms: self.search.or_terms,
            heading_weight: self.search.heading_weight,
            section_weight: self.search.section_weight,
            ..SearchOptions::default()
        }
    }
}

/// The user's config as a table, and its path (`None`: there is none).
fn read_user_config() -> Result<Option<(toml::Table, PathBuf)>> {
    let Some(path) = trust::user_config_path() else { return Ok(None) };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let t = text.parse::<toml::Table>().with_context(|| format!("invalid settings in your user config {}", path.display()))?;
            Ok(Some((t, path)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read your user config {}", path.display())),
    }
}

/// How a key of a vault's config is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Shapes results only: taken as written.
    Free,
    /// A list that makes lode stricter: added to the user's.
    Union,
    /// Loads code, sends data off the machine or chooses where credentials go: needs approval.
    Guarded,
    /// A limit: may be lowered freely; raising it needs approval.
    Lower,
    /// A threshold: may be raised freely; lowering it needs approval.
    Raise,
    /// Only the user's own config may say it.
    UserOnly,
}

/// A model named as a folder under the user's models folder (not a path of the vault's choosing).
fn plain_model_name(v: &toml::Value) -> bool {
    v.as_str().is_some_and(|n| {
        let n = n.trim();
        n.is_empty() || (n != "." && n != ".." && !n.contains(['/', '\\', ':', '\0']) && !n.starts_with('~'))
    })
}

fn class(section: &str, key: &str, value: &toml::Value) -> Class {
    match (section, key) {
        ("trust", _) => Class::UserOnly,
        ("llm" | "shared", _) => Class::Guarded,
        // Where notes go and with whose key: the user's word only, like `[trust]`.
        ("models", "embedder_url" | "embedder_api_key_env" | "embedder_off_machine") => Class::UserOnly,
        ("models", "dir" | "runtime" | "mirror") => Class::Guarded,
        ("models", "embedder" | "reranker" | "nli") if !plain_model_name(value) => Class::Guarded,
        ("models", "threads" | "window_tokens" | "embedder_batch" | "embedder_timeout_secs" | "embedder_max_tokens") => Class::Lower,
        ("externals", "allow_private" | "allow_loopback") if value.as_bool() != Some(false) => Class::Guarded,
        ("externals", "timeout_secs" | "max_mb" | "max_redirects") => Class::Lower,
        ("externals", "no_egress_domains") | ("egress", "no_egress") | ("gate", _) => Class::Union,
        ("index", "max_file_mb") => Class::Lower,
        ("answer", "entailment_threshold") => Class::Raise,
        // More passages, claims or results cost time and, with a remote model, money.
        ("answer", "context" | "max_claims") | ("search", "limit") => Class::Lower,
        ("models", "unload_after_secs") => Class::Free,
        _ => Class::Free,
    }
}

/// Text from a folder made safe to print on one line of a terminal: control characters
/// (escape sequences, carriage returns), bidirectional overrides and invisible format
/// characters are written as `\u{..}` escapes, so a key name cannot move the cursor, rewrite
/// what the user is about to approve, or hide a setting.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let format = matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}');
        if c.is_control() || format {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A TOML value as the user reads it on one line.
fn shown(v: &toml::Value) -> String {
    let s = printable(&serde_json::to_string(v).unwrap_or_default());
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

/// What the user approves, whole: one line per value, a table's keys each on a line of their
/// own (sorted), never cut, so no part of what is approved sits past what is shown.
fn approval_lines(at: &str, v: &toml::Value, out: &mut Vec<String>) {
    match v {
        toml::Value::Table(t) if !t.is_empty() => {
            let mut keys: Vec<&String> = t.keys().collect();
            keys.sort();
            for k in keys {
                approval_lines(&format!("{at}.{}", printable(k)), &t[k.as_str()], out);
            }
        }
        other => out.push(format!("{at} = {}", printable(&serde_json::to_string(other).unwrap_or_default()))),
    }
}

/// JSON with every object's keys sorted, whatever order the parser kept: the hash of the same
/// settings is the same.
fn canonical(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let mut keys: Vec<&String> = t.keys().collect();
            keys.sort();
            let inner: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", serde_json::to_string(k).unwrap_or_default(), canonical(&t[k.as_str()]))).collect();
            format!("{{{}}}", inner.join(","))
        }
        toml::Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Defaults ← the user's table ← the vault's table as the folder may set it.
fn layer(vault: &Path, vault_file: &Path, user: Option<(toml::Table, PathBuf)>, vault_table: toml::Table) -> Result<Config> {
    let (user_table, user_file) = match user {
        Some((t, p)) => (t, Some(p)),
        None => (toml::Table::new(), None),
    };
    let base: Config = toml::Value::Table(user_table.clone())
        .try_into()
        .with_context(|| format!("invalid settings in your user config {}", user_file.as_deref().unwrap_or(Path::new("?")).display()))?;
    let base_json = serde_json::to_value(&base).unwrap_or_default();

    // The guarded settings and limits of the vault's config, for the approval's hash.
    let mut guarded = toml::Table::new();
    let mut guarded_lines = Vec::new();
    for (section, v) in &vault_table {
        let Some(t) = v.as_table() else { continue };
        for (key, value) in t {
            if matches!(class(section, key, value), Class::Guarded | Class::Lower | Class::Raise) {
                guarded
                    .entry(section.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                    .as_table_mut()
                    .map(|s| s.insert(key.clone(), value.clone()));
                approval_lines(&format!("[{}] {}", printable(section), printable(key)), value, &mut guarded_lines);
            }
        }
    }
    let hash = (!guarded.is_empty()).then(|| trust::sha256_hex(canonical(&toml::Value::Table(guarded)).as_bytes()));
    let approval = hash.as_ref().map(|h| trust::approval(vault, h));
    let approved = approval == Some(Approval::Current);
    // A library inside the folder is never loaded on the folder's word, approved or not: a
    // pull could swap it, or a library beside it that it loads, after the approval.
    // Checked on the file system only once approved: an unapproved folder's path is not even
    // looked at (it could name a network mount).
    let runtime_inside = vault_table
        .get("models")
        .and_then(|m| m.get("runtime"))
        .and_then(|r| r.as_str())
        .map(|r| vault_path(vault, r))
        .is_some_and(|p| p.starts_with(vault) || (approved && std::fs::canonicalize(&p).is_ok_and(|c| c.starts_with(vault))));

    let mut merged = user_table.clone();
    let mut ignored: Vec<String> = Vec::new();
    let mut user_only: Vec<String> = Vec::new();
    // The folder's own keys that were taken as written (approved or free): only their paths are
    // the folder's.
    let mut taken: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    for (section, v) in &vault_table {
        let Some(t) = v.as_table() else {
            // A section written as a value (`models = [...]`, `llm = "..."`) would be read by
            // position, past every class: it is not taken at all.
            user_only.push(format!("{} = {} (a section must be a [table])", printable(section), shown(v)));
            continue;
        };
        let mut whole_section_ignored = false;
        for (key, value) in t {
            let class = class(section, key, value);
            if runtime_inside && section == "models" && key == "runtime" {
                user_only.push("[models] runtime (a library inside the folder: name it in your user config to load it)".into());
                continue;
            }
            let base_v = base_json.get(section).and_then(|s| s.get(key));
            let take = match class {
                Class::Free => Some(value.clone()),
                Class::Union => {
                    let mut list: Vec<toml::Value> =
                        user_table.get(section).and_then(|s| s.get(key)).and_then(|l| l.as_array()).cloned().unwrap_or_default();
                    match value.as_array() {
                        Some(a) => list.extend(a.iter().cloned()),
                        None => list.push(value.clone()),
                    }
                    Some(toml::Value::Array(list))
                }
                Class::UserOnly => {
                    user_only.push(format!("[{}] {}", printable(section), printable(key)));
                    None
                }
                Class::Guarded if approved => Some(value.clone()),
                Class::Guarded => {
                    if matches!(section.as_str(), "llm" | "shared") {
                        whole_section_ignored = true;
                    } else {
                        ignored.push(format!("[{}] {}", printable(section), printable(key)));
                    }
                    None
                }
                Class::Lower | Class::Raise if approved => Some(value.clone()),
                Class::Lower | Class::Raise => {
                    let (Some(want), Some(have)) =
                        (value.as_float().or(value.as_integer().map(|i| i as f64)), base_v.and_then(|b| b.as_f64()))
                    else {
                        // Not a number: deserialization names it.
                        merged_section(&mut merged, section).insert(key.clone(), value.clone());
                        continue;
                    };
                    let stricter = if class == Class::Lower { want <= have } else { want >= have };
                    if stricter {
                        Some(value.clone())
                    } else {
                        ignored.push(format!(
                            "[{}] {} = {} (kept at {})",
                            printable(section),
                            printable(key),
                            shown(value),
                            base_v.map(|b| b.to_string()).unwrap_or_default()
                        ));
                        None
                    }
                }
            };
            if let Some(v) = take {
                taken.insert((section.clone(), key.clone()));
                merged_section(&mut merged, section).insert(key.clone(), v);
            }
        }
        if whole_section_ignored {
            ignored.push(format!("[{}]", printable(section)));
        }
    }

    // Paths the folder's config gives are the folder's: relative to it, never to wherever lode
    // was started.
    if let Some(m) = merged.get_mut("models").and_then(|m| m.as_table_mut()) {
        // Only values taken from the folder: the user's own paths stay the user's.
        let from_vault = |key: &str| taken.contains(&("models".to_owned(), key.to_owned()));
        for key in ["dir", "runtime"] {
            if from_vault(key) {
                if let Some(p) = m.get(key).and_then(|v| v.as_str()).map(|p| vault_path(vault, p)) {
                    m.insert(key.into(), toml::Value::String(p.to_string_lossy().into_owned()));
                }
            }
        }
        for key in ["embedder", "reranker", "nli"] {
            if from_vault(key) {
                if let Some(p) = m.get(key).and_then(|v| v.as_str()).filter(|n| n.contains('/') && !Path::new(n).is_absolute()) {
                    let p = vault_path(vault, p);
                    m.insert(key.into(), toml::Value::String(p.to_string_lossy().into_owned()));
                }
            }
        }
    }
    let mut c: Config = toml::Value::Table(merged).try_into().with_context(|| format!("invalid settings in {}", vault_file.display()))?;
    // `[trust]` is the user's alone, whatever the merge did.
    c.trust = base.trust.clone();

    // A key goes only where the user sent it: the variable is the user config's own key for
    // the user config's own endpoint, or one its `[trust] api_key_env` lists.
    let user_llm = base.llm.as_ref().map(|l| (l.api_key_env.clone(), l.endpoint.clone()));
    if let Some(llm) = c.llm.as_mut() {
        if let Some(var) = llm.api_key_env.clone() {
            let users_own = user_llm.as_ref().is_some_and(|(k, e)| k.as_deref() == Some(var.as_str()) && e == &llm.endpoint);
            if !users_own && !base.trust.api_key_env.iter().any(|v| v == &var) {
                llm.api_key_env = None;
                user_only.push(format!(
                    "[llm] api_key_env = {} (list it under [trust] api_key_env to allow it)",
                    printable(&serde_json::to_string(&var).unwrap_or_default())
                ));
            }
        }
    }

    c.sanitize();
    // A shared tier given as a relative folder is the vault's neighbour, wherever the command
    // or the editor's server was started.
    if let Some(s) = c.shared.as_mut().filter(|s| !s.index.contains("://") && Path::new(&s.index).is_relative()) {
        s.index = vault.join(&s.index).to_string_lossy().into_owned();
    }
    c.report = TrustReport {
        folder: vault.to_path_buf(),
        file: vault_file.to_path_buf(),
        ignored,
        user_only,
        guarded: guarded_lines,
        hash,
        approval,
        user_mirror: base.models.mirror.clone(),
        user_file,
    };
    Ok(c)
}

/// A path a vault's config gives, as the folder means it: relative to the vault.
fn vault_path(vault: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        vault.join(p)
    }
}

fn merged_section<'a>(merged: &'a mut toml::Table, section: &str) -> &'a mut toml::Table {
    let entry = merged.entry(section.to_owned()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if !entry.is_table() {
        *entry = toml::Value::Table(toml::Table::new());
    }
    entry.as_table_mut().expect("made a table above")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_gate_words_reach_the_gate() {
        let c: Config = toml::from_str("[gate]\nheadings = [\"Mythen\"]\n").unwrap();
        let words = c.ask_config().gate.words;
        assert!(lode_core::gate::context::heading_blocks(&words, "Mythen und Fakten"));
        assert!(lode_core::gate::context::heading_blocks(&words, "Myths"), "the built-in words stay");
        assert!(!lode_core::gate::context::heading_blocks(&Config::default().ask_config().gate.words, "Mythen"));
    }

    #[test]
    fn readme_configuration_example_parses() {
        let readme = include_str!("../../../README.md");
        let start = readme.find("```toml\n[chunk]").expect("README has the configuration example") + "```toml\n".len();
        let block = &readme[start..start + readme[start..].find("```").unwrap()];
        let c: Config = toml::from_str(block).expect("README's example is valid configuration");
        let d = Config::default();
        assert_eq!(c.chunk.max_tokens, d.chunk.max_tokens, "README shows the defaults");
        assert_eq!(c.search.or_terms, d.search.or_terms);
        assert_eq!(c.search.heading_weight, d.search.heading_weight);
        assert_eq!(c.answer.context, d.answer.context);
        assert_eq!(c.answer.entailment_threshold, d.answer.entailment_threshold);
        assert!(c.llm.is_some());
        assert!(c.egress_rules().is_ok());
        let start = readme.find("```toml\n[models]").expect("README has the models example") + "```toml\n".len();
        let block = &readme[start..start + readme[start..].find("```").unwrap()];
        let c: Config = toml::from_str(block).expect("README's models example is valid configuration");
        assert_eq!(c.models.embedder, d.models.embedder);
    }

    /// `[shared] index` as a relative folder names the same tier from any working directory.
    #[test]
    fn a_relative_shared_folder_is_the_vaults_neighbour() {
        let dir = tempfile::tempdir().unwrap();
        let vault = dir.path().join("notes");
        std::fs::create_dir_all(vault.join(".lode")).unwrap();
        for (index, want) in [
            ("../team-tier", lode_retrieval::shared::normalize_uri(&vault.join("../team-tier").to_string_lossy())),
            ("s3://team/handbook", "s3://team/handbook".to_owned()),
            ("/srv/tier", "file:///srv/tier".to_owned()),
        ] {
            let user: toml::Table = format!("[shared]\nindex = \"{index}\"\n").parse().unwrap();
            let c = layer(&vault, &vault.join(".lode/config.toml"), Some((user, PathBuf::from("user.toml"))), toml::Table::new()).unwrap();
            assert_eq!(c.shared.unwrap().config().uri, want, "{index}");
        }
    }

    /// What a folder may set on its own, what it may only make stricter, and what it may not set
    /// at all without approval: by class, each spelling a vault could use.
    #[test]
    fn a_folder_sets_only_what_it_may() {
        let dir = tempfile::tempdir().unwrap();
        let vault = dir.path();
        let run = |user: &str, folder: &str| {
            let u: toml::Table = user.parse().unwrap();
            let f: toml::Table = folder.parse().unwrap();
            layer(vault, &vault.join(".lode/config.toml"), Some((u, PathBuf::from("user.toml"))), f).unwrap()
        };
        // Guarded: ignored, and named.
        for folder in [
            "[models]\nruntime = \"/tmp/evil.so\"\n",
            "models.runtime = \"/tmp/evil.so\"\n",
            "[models]\ndir = \"models\"\n",
            "[models]\nmirror = \"http://127.0.0.1:9/\"\n",
            "[models]\nembedder = \"../../tmp/m\"\n",
            "[models]\nnli = \"/abs/nli\"\n",
            "[models]\nreranker = \"..\"\n",
            "[models]\nembedder = \"C:\\\\m\"\n",
            "[llm]\nendpoint = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
            "llm = { endpoint = \"https://evil.example/v1\", model = \"m\" }\n",
            "[shared]\nindex = \"s3://b/p\"\noptions = { endpoint = \"http://127.0.0.1:9\" }\n",
            "[externals]\nallow_loopback = true\n",
            "[externals]\nallow_private = true\n",
            "[trust]\napi_key_env = [\"AWS_SECRET_ACCESS_KEY\"]\n",
        ] {
            let c = run("", folder);
            let d = Config::default();
            let said = if folder.starts_with("[trust]") { "only your user config" } else { "lode trust" };
            assert!(c.report.notice().is_some_and(|n| n.contains(said)), "{folder}: {:?}", c.report);
            assert!(c.llm.is_none() && c.shared.is_none(), "{folder}");
            assert_eq!((c.models.runtime, c.models.dir, c.models.mirror), (None, None, None), "{folder}");
            assert_eq!((c.models.embedder, c.models.reranker, c.models.nli), (d.models.embedder, None, None), "{folder}");
            assert!(!c.externals.allow_loopback && !c.externals.allow_private, "{folder}");
            assert!(c.trust.api_key_env.is_empty(), "{folder}");
        }
        // Limits: lowered freely, raised only with approval (kept at the user's value).
        let c = run(
            "[index]\nmax_file_mb = 20\n",
            "[index]\nmax_file_mb = 500\n[externals]\nmax_mb = 1\ntimeout_secs = 5000\n[models]\nthreads = 64\n",
        );
        assert_eq!(c.index.max_file_mb, 20);
        assert_eq!(c.externals.max_mb, 1.0);
        assert_eq!(c.externals.timeout_secs, Config::default().externals.timeout_secs);
        assert_eq!(c.models.threads, Config::default().models.threads.min(64));
        assert!(c.report.notice().unwrap().contains("max_file_mb"));
        let c = run("", "[answer]\nentailment_threshold = 0.0\n");
        assert_eq!(c.answer.entailment_threshold, Config::default().answer.entailment_threshold, "a folder cannot loosen the gate");
        let c = run("", "[answer]\nentailment_threshold = 0.99\n");
        assert_eq!(c.answer.entailment_threshold, 0.99, "but it can tighten it");
        assert!(c.report.notice().is_none());
        // Stricter lists add to the user's; free settings and plain model names are taken.
        let c = run("[egress]\nno_egress = [\"hr/\"]\n", "[egress]\nno_egress = [\"legal/\"]\n[externals]\nallow_loopback = false\nno_egress_domains = [\"corp.example\"]\n[models]\nembedder = \"bge-small-en-v1.5\"\n[search]\nlimit = 3\n");
        assert_eq!(c.egress.no_egress, ["hr/", "legal/"]);
        assert_eq!(c.externals.no_egress_domains, ["corp.example"]);
        assert_eq!((c.models.embedder.as_str(), c.search.limit), ("bge-small-en-v1.5", 3));
        assert!(c.report.notice().is_none(), "{:?}", c.report);
        // The user's own settings are the user's.
        let c = run("[models]\nruntime = \"/opt/ort/libonnxruntime.so\"\n[externals]\nallow_loopback = true\n", "");
        assert_eq!(c.models.runtime.as_deref(), Some(Path::new("/opt/ort/libonnxruntime.so")));
        assert!(c.externals.allow_loopback && c.report.notice().is_none());
    }

    /// No number from a config breaks lode: `nan` and `inf` are put back to defaults or clamped.
    #[test]
    fn numbers_that_are_not_finite_are_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let f: toml::Table =
            "[search]\nheading_weight = nan\nsection_weight = inf\n[externals]\nstale_days = nan\n[models]\nunload_after_secs = inf\n"
                .parse()
                .unwrap();
        let c = layer(dir.path(), &dir.path().join("c.toml"), None, f).unwrap();
        let d = Config::default();
        assert_eq!(c.search.heading_weight, d.search.heading_weight);
        assert_eq!(c.search.section_weight, d.search.section_weight);
        assert_eq!(c.externals.stale_days, d.externals.stale_days);
        assert_eq!(c.models.unload_after_secs, d.models.unload_after_secs);
    }

    /// Generated folder configs by the thousand: every section and key a folder could name, in
    /// every shape TOML allows (strings, numbers including nan and inf, booleans, arrays,
    /// tables, sections written as values). Loading one never panics, and an unapproved one never
    /// gets a guarded setting through or raises a limit.
    #[test]
    fn generated_folder_configs_never_get_a_guarded_setting_through() {
        let dir = tempfile::tempdir().unwrap();
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let sections = ["models", "llm", "shared", "externals", "index", "search", "answer", "egress", "gate", "chunk", "trust", "x"];
        let keys = [
            "runtime",
            "dir",
            "mirror",
            "embedder",
            "reranker",
            "nli",
            "endpoint",
            "model",
            "api_key_env",
            "tools",
            "remote",
            "index",
            "options",
            "allow_loopback",
            "allow_private",
            "timeout_secs",
            "max_mb",
            "max_redirects",
            "max_file_mb",
            "threads",
            "window_tokens",
            "limit",
            "context",
            "max_claims",
            "entailment_threshold",
            "no_egress",
            "no_egress_domains",
            "heading_weight",
            "max_tokens",
            "headings",
        ];
        let d = Config::default();
        let mut loaded = 0;
        for round in 0..6000 {
            let mut t = toml::Table::new();
            for _ in 0..(next() % 5) {
                let section = sections[(next() % sections.len() as u64) as usize].to_owned();
                if next() % 7 == 0 {
                    t.insert(section, value(&mut next, 1));
                    continue;
                }
                // Mostly the section's own keys (so the combinations that matter come often),
                // sometimes any key.
                let own: &[&str] = match section.as_str() {
                    "models" => &["runtime", "dir", "mirror", "embedder", "reranker", "nli", "threads", "window_tokens"],
                    "llm" => &["endpoint", "model", "api_key_env", "tools", "remote"],
                    "shared" => &["index", "options", "timeout_secs"],
                    "externals" => &["allow_loopback", "allow_private", "timeout_secs", "max_mb", "max_redirects", "no_egress_domains"],
                    "index" => &["max_file_mb"],
                    "search" => &["limit", "heading_weight"],
                    "answer" => &["context", "max_claims", "entailment_threshold"],
                    _ => &keys,
                };
                let mut inner = toml::Table::new();
                for _ in 0..(1 + next() % 3) {
                    let key = if next() % 5 == 0 {
                        keys[(next() % keys.len() as u64) as usize]
                    } else {
                        own[(next() % own.len() as u64) as usize]
                    };
                    // Mostly a value of the key's own type (so the config loads and the checks
                    // run), sometimes any.
                    let v = match (next() % 4, key) {
                        (0, _) => value(&mut next, 0),
                        (_, "allow_loopback" | "allow_private" | "tools" | "remote") => toml::Value::Boolean(true),
                        (_, "no_egress" | "no_egress_domains" | "headings") => toml::Value::Array(vec![toml::Value::String("a/".into())]),
                        (_, "options") => toml::Value::Table(toml::Table::from_iter([(
                            "endpoint".to_owned(),
                            toml::Value::String("http://127.0.0.1:9".into()),
                        )])),
                        (
                            _,
                            "threads" | "window_tokens" | "limit" | "context" | "max_claims" | "max_file_mb" | "timeout_secs"
                            | "max_redirects" | "max_tokens",
                        ) => toml::Value::Integer([64i64, 100_000, 1 << 40][(next() % 3) as usize]),
                        (_, "max_mb" | "heading_weight" | "entailment_threshold") => {
                            toml::Value::Float([f64::NAN, 1e9, 0.0][(next() % 3) as usize])
                        }
                        _ => toml::Value::String(
                            ["/tmp/evil.so", "../x", "http://127.0.0.1:9/v1", "C:\\m", "sub/model"][(next() % 5) as usize].into(),
                        ),
                    };
                    inner.insert(key.to_owned(), v);
                }
                t.insert(section, toml::Value::Table(inner));
            }
            // Errors are fine (a value of the wrong type is named); panics and leaks are not.
            let Ok(c) = layer(dir.path(), &dir.path().join("c.toml"), None, t.clone()) else { continue };
            loaded += 1;
            let shown = format!("round {round}: {t:?}");
            assert!(c.llm.is_none() && c.shared.is_none(), "{shown}");
            assert_eq!((&c.models.runtime, &c.models.dir, &c.models.mirror), (&None, &None, &None), "{shown}");
            assert!(c.models.reranker.as_deref().is_none_or(plain), "{shown}");
            assert!(c.models.nli.as_deref().is_none_or(plain), "{shown}");
            assert!(plain(&c.models.embedder), "{shown}");
            assert!(!c.externals.allow_loopback && !c.externals.allow_private && c.trust.api_key_env.is_empty(), "{shown}");
            assert!(c.index.max_file_mb <= d.index.max_file_mb && c.externals.max_mb <= d.externals.max_mb, "{shown}");
            assert!(c.externals.timeout_secs <= d.externals.timeout_secs && c.models.threads <= d.models.threads, "{shown}");
            assert!(c.search.limit <= d.search.limit && c.answer.context <= d.answer.context, "{shown}");
            assert!(c.answer.entailment_threshold >= d.answer.entailment_threshold, "{shown}");
            assert!(c.search.heading_weight.is_finite() && c.externals.stale_days.is_finite(), "{shown}");
            assert!(c.report.notice().is_none_or(|n| !n.contains('\u{1b}')), "{shown}");
        }
        // Enough of them load for the checks to mean something (the rest are type errors).
        assert!(loaded >= 1000, "only {loaded} of 6000 generated configs loaded");

        fn plain(n: &str) -> bool {
            !n.contains(['/', '\\', ':']) && n != ".." && n != "."
        }

        fn value(next: &mut dyn FnMut() -> u64, depth: usize) -> toml::Value {
            match next() % if depth > 0 { 6 } else { 8 } {
                0 => toml::Value::String(
                    ["/tmp/evil.so", "../x", "http://127.0.0.1:9/v1", "C:\\m", "", "all-MiniLM-L6-v2", "\u{1b}[2K"][(next() % 7) as usize]
                        .into(),
                ),
                1 => toml::Value::Integer([0i64, 1, 3, 64, 100_000, 1 << 40][(next() % 6) as usize]),
                2 => toml::Value::Float([f64::NAN, f64::INFINITY, 1e9, 0.0, 0.99, 1e308][(next() % 6) as usize]),
                3 => toml::Value::Boolean(next().is_multiple_of(2)),
                4 => toml::Value::Array(vec![toml::Value::String("a/".into())]),
                5 => {
                    toml::Value::Table(toml::Table::from_iter([("endpoint".to_owned(), toml::Value::String("http://127.0.0.1:9".into()))]))
                }
                6 => toml::Value::Array(vec![toml::Value::String("/tmp".into()), toml::Value::String("/tmp/evil.so".into())]),
                _ => toml::Value::Table(toml::Table::new()),
            }
        }
    }

    /// What `lode trust` shows is all it approves: long values whole, a table's keys each shown.
    #[test]
    fn approval_shows_every_value_whole() {
        let dir = tempfile::tempdir().unwrap();
        let pad = "x".repeat(300);
        let f: toml::Table = format!(
            "[shared]\nindex = \"s3://b/p\"\noptions = {{ allow_http = \"true\", aaa = \"{pad}\", endpoint = \"http://attacker.example\" }}\n[llm]\nendpoint = \"https://api.example{pad}@evil.example/v1\"\nmodel = \"m\"\n"
        )
        .parse()
        .unwrap();
        let c = layer(dir.path(), &dir.path().join("c.toml"), None, f).unwrap();
        let lines = c.report.guarded.join("\n");
        assert!(lines.contains("[shared] options.endpoint = \"http://attacker.example\""), "{lines}");
        assert!(lines.contains("@evil.example/v1"), "{lines}");
        assert!(c.report.guarded.iter().all(|l| !l.contains('…')), "{lines}");
    }

    /// A key variable goes only where the user sent it.
    #[test]
    fn a_key_goes_only_where_the_user_sent_it() {
        let dir = tempfile::tempdir().unwrap();
        let vault = dir.path();
        let user: toml::Table = "[llm]\nendpoint = \"https://api.example/v1\"\nmodel = \"m\"\napi_key_env = \"MY_KEY\"\n".parse().unwrap();
        let c = layer(vault, &vault.join("c.toml"), Some((user.clone(), PathBuf::from("u"))), toml::Table::new()).unwrap();
        assert_eq!(c.llm.unwrap().api_key_env.as_deref(), Some("MY_KEY"));
        // A folder that names a key variable (unapproved) gets nothing of it.
        let f: toml::Table = "[llm]\nendpoint = \"https://evil.example/v1\"\nmodel = \"m\"\napi_key_env = \"MY_KEY\"\n".parse().unwrap();
        let c = layer(vault, &vault.join("c.toml"), Some((user, PathBuf::from("u"))), f).unwrap();
        assert_eq!(c.llm.as_ref().map(|l| l.endpoint.as_str()), Some("https://api.example/v1"), "the user's endpoint stays");
    }

    #[test]
    fn unknown_keys_are_errors() {
        assert!(toml::from_str::<Config>("[search]\nlimt = 3\n").is_err());
    }
}
