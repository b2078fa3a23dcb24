//! Settings: defaults, overridden by `<vault>/.lode/config.toml`, overridden by flags.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lode_core::ChunkConfig;
use lode_store::{SearchOptions, StoreOptions};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
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
}

/// `[shared] index = "s3://bucket/prefix"` (or a folder): a vault published with `lode
/// publish`, searched in place and read-only. Credentials never go here: they come from the
/// environment, `~/.aws/credentials` or the instance's role.
#[derive(Debug, Clone, Deserialize)]
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
        c.timeout = std::time::Duration::from_secs_f64(self.timeout_secs.clamp(0.5, 600.0));
        c
    }
}

/// Your own words that mark parts of a note as not asserting what they say, added to the
/// built-in lists (`server/lode-core/data/context-words.txt`): headings in another language,
/// your team's lead-ins. See docs/gate.md.
#[derive(Debug, Clone, Default, Deserialize)]
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
        ];
        let extra: Vec<(String, Vec<String>)> = lists.iter().filter(|(_, w)| !w.is_empty()).map(|(n, w)| (n.to_string(), (*w).clone())).collect();
        lode_core::gate::context::ContextWords::with_user(&extra).expect("every list named here is one ContextWords knows")
    }
}

/// Linked web pages: how they are fetched, and when a snapshot counts as stale.
#[derive(Debug, Clone, Deserialize)]
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

#[derive(Debug, Clone, Deserialize)]
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

    /// A model setting as a folder: a path if it has a separator, else a name under `dir`.
    pub fn resolve(&self, name: &str) -> PathBuf {
        if name.contains('/') {
            PathBuf::from(name)
        } else {
            self.models_dir().join(name)
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressSection {
    /// Globs of vault-relative paths never sent to a remote model.
    pub no_egress: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChunkSection {
    /// Passage budget in tokens (words; CJK characters count one each).
    pub max_tokens: usize,
    /// Tokens shared by consecutive pieces of a split block.
    pub overlap_tokens: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexSection {
    /// Files over this many megabytes are skipped with a warning.
    pub max_file_mb: u64,
}

#[derive(Debug, Clone, Deserialize)]
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

impl Default for Config {
    fn default() -> Self {
        Config {
            chunk: ChunkSection::default(),
            index: IndexSection::default(),
            search: SearchSection::default(),
            answer: AnswerSection::default(),
            egress: EgressSection::default(),
            llm: None,
            models: ModelsSection::default(),
            externals: ExternalsSection::default(),
            gate: GateSection::default(),
            shared: None,
        }
    }
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
    /// Reads `<vault>/.lode/config.toml` when it exists.
    pub fn load(vault: &Path) -> Result<Config> {
        let path = state_dir(vault).join("config.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let mut c = Config::parse(&text, &path)?;
                // A shared tier given as a relative folder is the vault's neighbour, wherever
                // the command or the editor's server was started.
                if let Some(s) = c.shared.as_mut().filter(|s| !s.index.contains("://") && Path::new(&s.index).is_relative()) {
                    s.index = vault.join(&s.index).to_string_lossy().into_owned();
                }
                Ok(c)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// The settings in `text`, the contents of the config file at `path` (named in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        toml::from_str(text).with_context(|| format!("invalid settings in {}", path.display()))
    }

    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            chunk: ChunkConfig {
                max_tokens: self.chunk.max_tokens,
                overlap_tokens: self.chunk.overlap_tokens,
                ..ChunkConfig::default()
            },
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
            std::fs::write(vault.join(".lode/config.toml"), format!("[shared]\nindex = \"{index}\"\n")).unwrap();
            let c = Config::load(&vault).unwrap();
            assert_eq!(c.shared.unwrap().config().uri, want, "{index}");
        }
    }

    #[test]
    fn unknown_keys_are_errors() {
        assert!(toml::from_str::<Config>("[search]\nlimt = 3\n").is_err());
    }
}
