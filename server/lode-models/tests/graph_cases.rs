//! The load-time rewrite of dequantized embedding lookups (`lode_models::prepare_graph`) against
//! adversarial ONNX graphs: `scripts/make_graph_cases.py` (written blind, from the rewrite's
//! documented rule only; generated into `.lode-tools/graph-cases` by scripts/setup-models.sh)
//! writes 96 cases by class — scope, order, shape, types, structure, encoding, malformed. For
//! each: the rewrite happens where the case expects it, a rewritten model computes bit for bit
//! what the original does (run by the real ONNX Runtime, with and without constant folding), and
//! malformed bytes are left alone.

use std::path::Path;

use ort::session::{Session, SessionInputValue};
use ort::value::{DynTensorValueType, DynValue, Tensor, ValueType};
use serde_json::Value;

/// Cases whose writer was unsure whether the rule allows the rewrite, and where either answer is
/// safe: declining is always allowed, and a rewrite must still give identical outputs (checked).
const EITHER: &[&str] = &[
    "gather_axis_minus2",         // -2 is axis 0 on a rank-2 table; the rule says "absent or 0"
    "cast_to_float16",            // equivalent, but the rule speaks of a Cast to float
    "cast_to_double",             // likewise
    "full_elementwise_scale",     // a [rows, dim] scale: equivalent, outside the rule
    "scale_from_constant_node",   // a scale from a Constant node, not an initializer
    "mul_domain_ai_onnx",         // "ai.onnx" is the standard domain's other spelling
    "value_info_name_traps",      // whether names clash depends on the suffix chosen
    "names_with_likely_suffixes", // likewise
    "invalid_utf8_doc_string",    // a rewrite keeping those bytes untouched would be right too
    // Groups (wire types 3 and 4, deprecated): the rewrite reads no wire type it does not know,
    // and leaves such a model as it is (its documented rule).
    "unknown_group_fields",
    // A [1, 1] scale keeps the output's shape only when the ids have rank 1 or more; the rewrite
    // reads no shapes, so it declines every [1, 1] scale (see `single_scale_1x1_ids_rank0`).
    "single_scale_1x1",
];

fn input(name: &str, spec: &Value) -> Result<SessionInputValue<'static>, String> {
    let shape: Vec<i64> = spec["shape"].as_array().ok_or("no shape")?.iter().filter_map(Value::as_i64).collect();
    let values = spec["values"].as_array().ok_or("no values")?;
    let err = |e: ort::Error| format!("input {name}: {e}");
    Ok(match spec["dtype"].as_str() {
        Some("int64") => Tensor::from_array((shape, values.iter().filter_map(Value::as_i64).collect::<Vec<_>>())).map_err(err)?.into(),
        Some("int32") => {
            Tensor::from_array((shape, values.iter().filter_map(Value::as_i64).map(|v| v as i32).collect::<Vec<_>>())).map_err(err)?.into()
        }
        Some("float32") => {
            Tensor::from_array((shape, values.iter().filter_map(Value::as_f64).map(|v| v as f32).collect::<Vec<_>>())).map_err(err)?.into()
        }
        Some("bool") => Tensor::from_array((shape, values.iter().map(|v| v.as_bool().unwrap_or(false)).collect::<Vec<_>>())).map_err(err)?.into(),
        other => return Err(format!("input {name}: dtype {other:?} not handled by this harness")),
    })
}

/// Every output's name, type, shape and raw bytes.
fn outputs(model: Result<&[u8], &Path>, fold: bool, inputs: &Value) -> Result<Vec<(String, String, Vec<u8>)>, String> {
    let env = lode_models::environment(None).map_err(|e| e.to_string())?;
    let b = Session::builder(env).map_err(|e| e.to_string())?;
    let mut b = if fold { b } else { b.with_disabled_optimizers("ConstantFolding").map_err(|e| e.to_string())? };
    let mut session = match model {
        Ok(bytes) => b.commit_from_memory(bytes),
        Err(path) => b.commit_from_file(path),
    }
    .map_err(|e| format!("load: {e}"))?;
    let mut feeds: Vec<(String, SessionInputValue)> = Vec::new();
    for (name, spec) in inputs.as_object().into_iter().flatten() {
        feeds.push((name.clone(), input(name, spec)?));
    }
    let out = session.run(feeds).map_err(|e| format!("run: {e}"))?;
    let mut got = Vec::new();
    for (name, v) in out.iter() {
        let v: &DynValue = &v;
        let ty = match v.dtype() {
            ValueType::Tensor { ty, shape, .. } => format!("{ty:?} {shape:?}"),
            other => format!("{other:?}"),
        };
        let t = v.view().downcast::<DynTensorValueType>().map_err(|e| format!("output {name}: {e}"))?;
        let bytes = match t.size() {
            Some(0) | None => Vec::new(),
            // SAFETY: a CPU tensor's buffer of `size` bytes, read while `out` is alive.
            Some(n) => unsafe { std::slice::from_raw_parts(t.data_ptr().cast::<u8>(), n) }.to_vec(),
        };
        got.push((name.to_owned(), ty, bytes));
    }
    Ok(got)
}

#[test]
fn adversarial_graphs_are_rewritten_only_where_it_changes_nothing() {
    let dir = lode_testing::models().parent().unwrap().join("graph-cases");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap_or_else(|e| {
        panic!("{}: {e} (scripts/setup-models.sh generates the cases)", dir.display())
    }))
    .unwrap();
    assert!(cases.len() >= 90, "{} cases", cases.len());
    let mut failures = Vec::new();
    let mut rewritten_count = 0;
    for c in &cases {
        let name = c["case"].as_str().unwrap();
        let class = c["class"].as_str().unwrap_or_default();
        let path = dir.join(format!("{name}.onnx"));
        let bytes = std::fs::read(&path).unwrap();
        let p = lode_models::prepare_graph(&bytes);
        let expected = c["expect_rewrite"].as_bool().unwrap();
        let rewritten = p.bytes.is_some();
        rewritten_count += usize::from(rewritten);
        if rewritten != expected && !(EITHER.contains(&name) || (!rewritten && c["loads"] == false)) {
            failures.push(format!("{name} ({class}): rewritten {rewritten}, expected {expected}: {}", c["why"]));
        }
        if c["loads"] == false {
            if rewritten {
                failures.push(format!("{name} ({class}): malformed bytes were rewritten"));
            }
            continue;
        }
        let Some(new) = p.bytes else { continue };
        for fold in [true, false] {
            let before = outputs(Err(&path), fold, &c["inputs"]);
            let after = outputs(Ok(&new), fold, &c["inputs"]);
            match (before, after) {
                (Ok(a), Ok(b)) if a == b => {}
                (Ok(a), Ok(b)) => {
                    let a: Vec<_> = a.iter().map(|o| (&o.0, &o.1)).collect();
                    let b: Vec<_> = b.iter().map(|o| (&o.0, &o.1)).collect();
                    failures.push(format!("{name} ({class}, folding {fold}): outputs differ: {a:?} vs {b:?}"));
                }
                (Ok(_), Err(e)) => failures.push(format!("{name} ({class}, folding {fold}): the rewritten model fails: {e}")),
                (Err(e), _) => failures.push(format!("{name} ({class}): the original does not run here: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
    assert!(rewritten_count >= 30, "only {rewritten_count} rewritten");
}
