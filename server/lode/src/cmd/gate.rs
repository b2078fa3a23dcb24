//! `lode gate --json`: the faithfulness gate alone, for evaluation from outside. Reads JSON lines
//! `{"claim": str, "spans": [str], "source": str}` (the source standing for the cited version's
//! text) and prints one JSON line per input with the verdict, the deciding step and the reason.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use lode_core::gate::{self, Claim, GateConfig, Outcome, ScorerSlot, Support};
use serde::Deserialize;

#[derive(Args)]
pub struct GateArgs {
    /// Print JSON lines (the only output format; accepted for symmetry with other commands)
    #[arg(long)]
    pub json: bool,
    /// Entailment threshold for step 3
    #[arg(long, default_value_t = GateConfig::default().entailment_threshold)]
    pub threshold: f32,
    /// NLI model for step 3 (kind = "nli" in its lode-model.toml) (a folder under the models dir, or a path); without
    /// one, claims that are not quoted outright are dropped
    #[arg(long, value_name = "MODEL")]
    pub nli: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    claim: String,
    spans: Vec<String>,
    source: String,
}

/// Runs one claim through the gate against one source text; the verdict as a JSON object.
pub fn verdict(claim: &str, spans: &[String], source: &str, scorer: &mut ScorerSlot<'_>, cfg: &GateConfig) -> serde_json::Value {
    let eligible = HashMap::from([("source".to_owned(), source)]);
    let c = Claim {
        text: claim.to_owned(),
        support: spans.iter().map(|s| Support { version_id: "source".into(), quoted_span: s.clone() }).collect(),
    };
    match gate::check_one(c, &eligible, scorer, cfg) {
        Outcome::Verified(v) => {
            let (verdict, step, score) = match v.verification {
                gate::Verification::Coupled { .. } => ("coupled", "coupling", None),
                gate::Verification::Entailed { score } => ("entailed", "entailment", Some(score)),
            };
            serde_json::json!({"verdict": verdict, "step": step, "label": v.label, "score": score,
                               "spans": v.spans.iter().map(|s| [s.range.start, s.range.end]).collect::<Vec<_>>(),
                               "context": v.spans.iter().map(|s| s.context.clone()).collect::<Vec<_>>()})
        }
        // The claim is not verified; an answer would show its evidence only.
        Outcome::EvidenceOnly(e) => {
            serde_json::json!({"verdict": "dropped", "step": "entailment", "rung": "evidence_only", "reason": e.reason, "why": e.why,
                                                      "context": e.spans.iter().map(|s| s.context.clone()).collect::<Vec<_>>(),
                                                      "spans": e.spans.iter().map(|s| [s.range.start, s.range.end]).collect::<Vec<_>>()})
        }
        Outcome::Dropped(d) => serde_json::json!({"verdict": "dropped", "step": d.step, "reason": d.reason}),
    }
}

/// The entailment step's model, loaded on first use: a name under the models directory, or a
/// path; none, and step 3 verifies nothing.
pub fn nli_slot(name: Option<String>) -> ScorerSlot<'static> {
    let models = crate::config::ModelsSection::default();
    match name {
        Some(name) => ScorerSlot::lazy(move || {
            lode_models::NliModel::load(&models.resolve(&name), models.runtime.as_deref(), models.threads)
                .map(|ce| Box::new(ce) as Box<dyn lode_core::gate::EntailmentScorer>)
                .map_err(|e| e.to_string())
        }),
        None => ScorerSlot::None,
    }
}

pub fn run(args: GateArgs) -> Result<ExitCode> {
    let cfg = GateConfig { entailment_threshold: args.threshold, ..GateConfig::default() };
    let mut scorer = nli_slot(args.nli.clone());
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut bad = 0;
    for (n, line) in stdin.lock().lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v = match serde_json::from_str::<Input>(&line) {
            Ok(i) => verdict(&i.claim, &i.spans, &i.source, &mut scorer, &cfg),
            Err(e) => {
                bad += 1;
                serde_json::json!({"verdict": "error", "line": n + 1, "reason": format!("expected {{\"claim\", \"spans\", \"source\"}}: {e}")})
            }
        };
        writeln!(out, "{v}")?;
    }
    out.flush()?;
    if bad > 0 {
        eprintln!("error: {bad} input lines were not valid gate input (each answered with an error line)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
