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
        Some("bool") => {
            Tensor::from_array((shape, values.iter().map(|v| v.as_bool().unwrap_or(false)).collect::<Vec<_>>())).map_err(err)?.into()
        }
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

/// How two runs' outputs differ, if they do (names and types: the bytes are too long to print).
fn difference(a: &[(String, String, Vec<u8>)], b: &[(String, String, Vec<u8>)]) -> Option<String> {
    let shown = |o: &[(String, String, Vec<u8>)]| o.iter().map(|o| format!("{} {}", o.0, o.1)).collect::<Vec<_>>();
    (a != b).then(|| format!("outputs differ: {:?} vs {:?}", shown(a), shown(b)))
}

#[test]
fn adversarial_graphs_are_rewritten_only_where_it_changes_nothing() {
    let dir = lode_testing::models().parent().unwrap().join("graph-cases");
    let cases: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(dir.join("cases.json"))
            .unwrap_or_else(|e| panic!("{}: {e} (scripts/setup-models.sh generates the cases)", dir.display())),
    )
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
                (Ok(a), Ok(b)) => failures.extend(difference(&a, &b).map(|d| format!("{name} ({class}, folding {fold}): {d}"))),
                (Ok(_), Err(e)) => failures.push(format!("{name} ({class}, folding {fold}): the rewritten model fails: {e}")),
                (Err(e), _) => failures.push(format!("{name} ({class}): the original does not run here: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
    assert!(rewritten_count >= 30, "only {rewritten_count} rewritten");
}

/// Blind cases whose label follows a reading of the rule the implementation does not take,
/// with why the implementation's reading is the one documented (`graph::externalize`).
const DECIDED_OTHERWISE: &[(&str, &str)] = &[
    ("types_zero_size_only", "an empty weight is never moved: `min_bytes` 0 counts as 1"),
    // After the blind cases showed that an external shape or axes tensor stops ONNX Runtime
    // from loading the model, and an external bool is not normalised, the rule moves only
    // weight types: INT32, INT64 and BOOL stay inline.
    ("types_int32", "int32 is a type of shapes and indices: stays inline"),
    ("types_bool", "bool bytes are normalised only inline: stays inline"),
    ("order_two_data_types", "the last data_type is INT64: stays inline"),
    // Narrower than the rule as first written, on purpose: a sparse and a dense initializer of
    // one name resolve differently once the dense one is external (scope_sparse_same_name_as_init),
    // so any sparse initializer declines; and any EXTERNAL data_location declines, even one a
    // later DEFAULT overrides.
    ("scope_sparse_and_init", "a model with a sparse initializer is left as it is"),
    ("order_data_location_1_then_0", "any EXTERNAL data_location declines, overridden or not"),
];

/// Cases whose `expect` is "either" are left to the implementation; others must match.
fn externalize_expected(c: &Value) -> Option<bool> {
    match c["expect"].as_str() {
        Some("externalize") => Some(true),
        Some("decline") => Some(false),
        _ => None,
    }
}

/// Large weights moved to a data file beside the model (`lode_models::externalize_weights`),
/// against two adversarial sets: the rewrite's 96 graphs with every weight moved (`min_bytes`
/// 1), and `scripts/make_external_cases.py`'s cases (written blind, from the documented rule
/// only; generated into `.lode-tools/external-cases`), each with its own `min_bytes`. For each:
/// it moves weights where the case expects it, never on malformed bytes, and a moved model,
/// loaded by the real ONNX Runtime from its file, computes bit for bit what the original does
/// (with and without constant folding); a model ONNX Runtime rejects is not made loadable.
#[test]
fn adversarial_graphs_compute_the_same_with_their_weights_moved_out() {
    let root = lode_testing::models().parent().unwrap().to_path_buf();
    let mut sets = Vec::new();
    for (set, default_min) in [("graph-cases", Some(1)), ("external-cases", None)] {
        let dir = root.join(set);
        let cases: Vec<Value> = serde_json::from_str(
            &std::fs::read_to_string(dir.join("cases.json"))
                .unwrap_or_else(|e| panic!("{}: {e} (scripts/setup-models.sh generates the cases)", dir.display())),
        )
        .unwrap();
        sets.push((dir, default_min, cases));
    }
    assert!(sets[1].2.len() >= 40, "{} blind cases", sets[1].2.len());
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let (mut moved, mut total) = (0, 0);
    for (dir, default_min, cases) in &sets {
        for c in cases {
            total += 1;
            let name = c["case"].as_str().unwrap();
            let class = c["class"].as_str().unwrap_or_default();
            let path = dir.join(format!("{name}.onnx"));
            let bytes = std::fs::read(&path).unwrap();
            let min = default_min.unwrap_or_else(|| c["min_bytes"].as_u64().unwrap_or(1) as usize);
            let ext = lode_models::externalize_weights(&bytes, min, "w.data");
            let got = ext.is_some();
            moved += usize::from(got);
            let expected =
                if default_min.is_some() || DECIDED_OTHERWISE.iter().any(|d| d.0 == name) { None } else { externalize_expected(c) };
            if expected.is_some_and(|e| e != got) && (got || c["loads"] != false) {
                failures.push(format!("{name} ({class}): moved {got}, expected {expected:?}: {}", c["why"]));
            }
            let Some(ext) = ext else { continue };
            let out = tmp.path().join(name);
            std::fs::create_dir_all(&out).unwrap();
            std::fs::write(out.join("model.onnx"), &ext.model).unwrap();
            std::fs::write(out.join("w.data"), &ext.data).unwrap();
            // Weights a case keeps in a file of its own (in a subgraph, say) stay where they are.
            for side in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
                if side.to_string_lossy().ends_with(".side.bin") {
                    std::fs::copy(&side, out.join(side.file_name().unwrap())).unwrap();
                }
            }
            for fold in [true, false] {
                let before = outputs(Err(&path), fold, &c["inputs"]);
                let after = outputs(Err(&out.join("model.onnx")), fold, &c["inputs"]);
                match (before, after) {
                    (Ok(a), Ok(b)) => failures.extend(difference(&a, &b).map(|d| format!("{name} ({class}, folding {fold}): {d}"))),
                    (Ok(_), Err(e)) => failures.push(format!("{name} ({class}, folding {fold}): the moved model fails: {e}")),
                    (Err(_), Ok(_)) => failures.push(format!("{name} ({class}, folding {fold}): loads only with its weights moved")),
                    (Err(_), Err(_)) => {}
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {total} cases:\n{}", failures.len(), failures.join("\n"));
    assert!(moved >= 80, "only {moved} of {total} moved");
}
