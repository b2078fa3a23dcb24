//! `lode serve`: the language server over stdio.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;

use crate::config::{state_dir, Config};

#[derive(Args)]
pub struct ServeArgs {
    /// The vault [default: the workspace folder the editor opens]
    #[arg(long, value_name = "DIR")]
    pub vault: Option<PathBuf>,
    /// Accepted for editors that pass it; stdio is the only transport
    #[arg(long, hide = true)]
    pub stdio: bool,
}

/// The server's log: stderr (editors show it in their log pane), warnings and errors unless
/// `LODE_LOG` says otherwise (`LODE_LOG=debug`, or per module: `LODE_LOG=lode_lsp::requests=debug`
/// times every request and notification).
pub fn init_log() {
    let filter = match std::env::var("LODE_LOG") {
        Err(_) => tracing_subscriber::EnvFilter::new("warn"),
        Ok(v) => tracing_subscriber::EnvFilter::try_new(&v).unwrap_or_else(|e| {
            eprintln!("lode: LODE_LOG={v:?} is not a log filter ({e}); logging warnings and errors");
            tracing_subscriber::EnvFilter::new("warn")
        }),
    };
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
}

/// The synthesizer the config names: its `[llm]`, else the extractive one.
fn synthesizer_of(config: &Config) -> lode_answer::Synthesizer {
    match &config.llm {
        Some(l) if !l.endpoint.is_empty() => lode_answer::Synthesizer::Llm(l.clone()),
        _ => lode_answer::Synthesizer::Extractive,
    }
}

/// How every long-running door (`lode serve`, `lode mcp`) opens a vault's engine: its config
/// (defaults ← the user's ← what the folder may set), its store bound to the user, its models.
pub fn engine_settings() -> lode_engine::SettingsFn {
    Arc::new(|root: &std::path::Path| {
        let config = Config::load(root)?;
        // The config's own trust notice is the server's to say (it follows the file); this
        // holds what else the user must hear.
        if let Some(n) = config.report.notice() {
            eprintln!("{n}");
        }
        let mut notices: Vec<String> = Vec::new();
        // A store that came with the folder is never cited from: moved aside, and the scan
        // rebuilds the index from the notes. A new store is made and bound here, before the
        // server opens it.
        let db = state_dir(root).join("lode.db");
        crate::trust::check_state_dir(&state_dir(root))?;
        let store_opts = config.store_options();
        // Unreadable files stay for the server's own open to name (corrupt, another program's).
        let verdict = crate::trust::judge(&db, &store_opts).unwrap_or(crate::trust::Verdict::Ours);
        if let Some(line) = crate::trust::ready_for_writing(&db, &state_dir(root).join("vectors"), &store_opts, verdict)? {
            eprintln!("{line}");
            notices.push(line);
        }
        let synthesizer = synthesizer_of(&config);
        let m = &config.models;
        let vectors = (!m.embedder.trim().is_empty()).then(|| lode_engine::VectorSettings {
            embedder: m.embedder_source(crate::models::scrub()).map_err(|e| format!("{e:#}")),
            runtime: m.runtime.clone(),
            threads: m.threads,
            window_tokens: m.window_tokens,
            dir: state_dir(root).join("vectors"),
        });
        let model = |name: &Option<String>| {
            name.as_ref().filter(|n| !n.trim().is_empty()).map(|n| lode_engine::ModelSettings {
                dir: m.resolve(n),
                runtime: m.runtime.clone(),
                threads: m.threads,
            })
        };
        let (reranker, nli) = (model(&m.reranker), model(&m.nli));
        Ok(lode_engine::Settings {
            db: state_dir(root).join("lode.db"),
            // A long-running server keeps three connections: small caches keep its footprint small.
            store: lode_store::StoreOptions { cache_kib: 2048, ..config.store_options() },
            index: lode_store::vault::IndexOptions { max_file_bytes: config.index.max_file_mb * 1_000_000, ..Default::default() },
            ask: config.ask_config(),
            rules: config.egress_rules()?,
            rules_source: Some(lode_engine::RulesSource {
                file: state_dir(root).join("config.toml"),
                also: crate::trust::user_config_path()
                    .into_iter()
                    .chain(crate::trust::approval_record(&root.canonicalize().unwrap_or_else(|_| root.to_path_buf())))
                    .collect(),
                load: {
                    let root = root.to_path_buf();
                    Arc::new(move |bytes: Option<&[u8]>| {
                        // The edited config is read as the folder's, like the first one: an
                        // `[llm]` added to an approved folder's config is not approved.
                        let config = Config::layered(&root, bytes).map_err(|e| format!("{e:#}"))?;
                        let rules = config.egress_rules().map_err(|e| format!("{e:#}"))?;
                        Ok(lode_engine::Reloaded { rules, synthesizer: synthesizer_of(&config), notice: config.report.notice() })
                    })
                },
            }),
            synthesizer,
            vectors,
            reranker,
            nli,
            externals: lode_engine::ExternalSettings { fetch: config.externals.fetch_options(), freshness: config.externals.freshness() },
            unload_after: (m.unload_after_secs > 0.0).then(|| std::time::Duration::try_from_secs_f64(m.unload_after_secs).ok()).flatten(),
            notices,
        })
    })
}

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    init_log();
    let settings = engine_settings();
    let vault = args.vault.map(|v| v.canonicalize().unwrap_or(v));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(lode_lsp::run_stdio(settings, vault));
    // Reading stdin parks a blocking thread that would keep the runtime alive after `exit`.
    rt.shutdown_background();
    Ok(ExitCode::SUCCESS)
}
