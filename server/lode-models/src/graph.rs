//! Reads an ONNX model's graph before ONNX Runtime loads it, and rewrites embedding lookups of
//! int8 models so that only the rows a batch asks for are dequantized.
//!
//! Int8 exports that dequantize with plain operators (all-MiniLM-L6-v2 int8 does) look tokens
//! up in a dequantized table: `Gather(Mul(Cast(W_q), scale), ids)`, where the `Cast` is to a
//! float type and the scale is one value for all or one per row. ONNX Runtime either folds
//! that table into fp32 at load (four times the int8 bytes, resident for the session's life) or,
//! with folding off, casts the whole table on every run. Gathering first —
//! `Mul(Cast(Gather(W_q, ids)), Gather(scale, ids))` — applies the same float operations to the
//! same elements, so the outputs are bit-identical, to the rows asked for only.
//!
//! Invariants: the rewrite works on the protobuf wire format and copies every field it does not
//! touch byte for byte; anything it does not fully understand (an unknown wire type, a second
//! graph, external data, subgraphs, a name clash) leaves the model as it is. It never fails a
//! load: the worst outcome is the original model.

use std::collections::{HashMap, HashSet};

/// What [`prepare`] found and made of a model.
#[derive(Debug, Default)]
pub struct Prepared {
    /// The rewritten model, when some lookup was rewritten.
    pub bytes: Option<Vec<u8>>,
    /// Embedding lookups now gathered before dequantizing.
    pub lookups: usize,
    /// Int8 initializers dequantized by a `Cast` node: constant folding would keep an fp32 copy
    /// of each for the session's life, so the session is better built without it.
    pub cast_dequantized: usize,
}

/// Reads `model` (the bytes of a `.onnx` file) and rewrites what it can; see the module doc.
pub fn prepare(model: &[u8]) -> Prepared {
    rewrite(model).unwrap_or_default()
}

// ONNX protobuf field numbers.
const MODEL_GRAPH: u64 = 7;
const MODEL_OPSET_IMPORT: u64 = 8;
const GRAPH_NODE: u64 = 1;
const GRAPH_INITIALIZER: u64 = 5;
const GRAPH_INPUT: u64 = 11;
const GRAPH_OUTPUT: u64 = 12;
const GRAPH_VALUE_INFO: u64 = 13;
const NODE_INPUT: u64 = 1;
const NODE_OUTPUT: u64 = 2;
const NODE_NAME: u64 = 3;
const NODE_OP_TYPE: u64 = 4;
const NODE_ATTRIBUTE: u64 = 5;
const NODE_DOMAIN: u64 = 7;
const ATTR_NAME: u64 = 1;
const ATTR_INT: u64 = 3;
const ATTR_GRAPH: u64 = 6;
const ATTR_GRAPHS: u64 = 11;
const TENSOR_DIMS: u64 = 1;
const TENSOR_DATA_TYPE: u64 = 2;
const TENSOR_NAME: u64 = 8;
const TENSOR_EXTERNAL_DATA: u64 = 13;
const TENSOR_DATA_LOCATION: u64 = 14;
const VALUE_INFO_NAME: u64 = 1;
const TYPE_UINT8: u64 = 2;
const TYPE_INT8: u64 = 3;
/// FLOAT, FLOAT16, DOUBLE, BFLOAT16: a dequantizing Cast's targets.
const FLOAT_TYPES: [u64; 4] = [1, 10, 11, 16];

#[derive(Clone, Copy, Debug)]
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// One field of a message: its number, its value, and its whole encoding (tag included).
#[derive(Clone, Copy, Debug)]
struct Field<'a> {
    number: u64,
    value: Value<'a>,
    raw: &'a [u8],
}

fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The fields of one message, in order; `None` when the bytes are not a well-formed message.
fn fields(buf: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let start = pos;
        let tag = varint(buf, &mut pos)?;
        let number = tag >> 3;
        if number == 0 {
            return None;
        }
        let value = match tag & 7 {
            0 => Value::Varint(varint(buf, &mut pos)?),
            1 | 5 => {
                pos = pos.checked_add(if tag & 7 == 1 { 8 } else { 4 })?;
                if pos > buf.len() {
                    return None;
                }
                Value::Fixed
            }
            2 => {
                // Lengths are 32-bit in protobuf's own parser (ONNX Runtime rejects a length
                // written in more than five bytes): read no other kind.
                let at = pos;
                let len = varint(buf, &mut pos)?;
                if pos - at > 5 || len > i32::MAX as u64 {
                    return None;
                }
                let len = usize::try_from(len).ok()?;
                let end = pos.checked_add(len)?;
                let bytes = buf.get(pos..end)?;
                pos = end;
                Value::Bytes(bytes)
            }
            // Groups (3, 4) are not used by ONNX; anything else is not protobuf.
            _ => return None,
        };
        out.push(Field { number, value, raw: &buf[start..pos] });
    }
    Some(out)
}

/// The value of a singular field: protobuf keeps the last of several.
fn last<'f, 'a>(fields: &'f [Field<'a>], number: u64) -> Option<&'f Field<'a>> {
    fields.iter().rev().find(|f| f.number == number)
}

fn bytes_of<'a>(f: &Field<'a>) -> Option<&'a [u8]> {
    match f.value {
        Value::Bytes(b) => Some(b),
        _ => None,
    }
}

fn str_of<'a>(f: &Field<'a>) -> Option<&'a str> {
    std::str::from_utf8(bytes_of(f)?).ok()
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
    put_varint(out, (number << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[derive(Debug)]
struct Node<'a> {
    inputs: Vec<&'a str>,
    outputs: Vec<&'a str>,
    op: &'a str,
    domain: &'a str,
    /// Each attribute field, whole (tag included), to copy into a new node.
    attributes: Vec<&'a [u8]>,
    /// `axis` when the node sets it (`i64::MAX` when it is not an integer).
    axis: Option<i64>,
    /// `to` (a Cast's target type) when the node sets it.
    to: Option<u64>,
    has_subgraph: bool,
}

fn node(buf: &[u8]) -> Option<Node<'_>> {
    let mut n = Node { inputs: vec![], outputs: vec![], op: "", domain: "", attributes: vec![], axis: None, to: None, has_subgraph: false };
    for f in fields(buf)? {
        match f.number {
            NODE_INPUT => n.inputs.push(str_of(&f)?),
            NODE_OUTPUT => n.outputs.push(str_of(&f)?),
            NODE_OP_TYPE => n.op = str_of(&f)?,
            NODE_DOMAIN => n.domain = str_of(&f)?,
            NODE_ATTRIBUTE => {
                n.attributes.push(f.raw);
                let attr = fields(bytes_of(&f)?)?;
                let name = last(&attr, ATTR_NAME).map(str_of).unwrap_or(Some(""))?;
                match (name, last(&attr, ATTR_INT).map(|a| a.value)) {
                    ("axis", Some(Value::Varint(i))) => n.axis = Some(i as i64),
                    ("axis", _) => n.axis = Some(i64::MAX),
                    ("to", Some(Value::Varint(t))) => n.to = Some(t),
                    _ => {}
                }
                n.has_subgraph |= attr.iter().any(|a| matches!(a.number, ATTR_GRAPH | ATTR_GRAPHS));
            }
            _ => {}
        }
    }
    Some(n)
}

fn encode_node(inputs: &[&str], outputs: &[&str], name: &str, op: &str, domain: &str, attributes: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for i in inputs {
        put_bytes(&mut out, NODE_INPUT, i.as_bytes());
    }
    for o in outputs {
        put_bytes(&mut out, NODE_OUTPUT, o.as_bytes());
    }
    put_bytes(&mut out, NODE_NAME, name.as_bytes());
    put_bytes(&mut out, NODE_OP_TYPE, op.as_bytes());
    for a in attributes {
        out.extend_from_slice(a);
    }
    if !domain.is_empty() {
        put_bytes(&mut out, NODE_DOMAIN, domain.as_bytes());
    }
    out
}

#[derive(Debug)]
struct Initializer {
    dims: Vec<i64>,
    data_type: u64,
}

fn initializer(buf: &[u8]) -> Option<(&str, Initializer)> {
    let mut name = None;
    let mut t = Initializer { dims: vec![], data_type: 0 };
    for f in fields(buf)? {
        match (f.number, f.value) {
            (TENSOR_DIMS, Value::Varint(d)) => t.dims.push(d as i64),
            (TENSOR_DIMS, Value::Bytes(packed)) => {
                let mut pos = 0;
                while pos < packed.len() {
                    t.dims.push(varint(packed, &mut pos)? as i64);
                }
            }
            (TENSOR_DATA_TYPE, Value::Varint(d)) => t.data_type = d,
            (TENSOR_NAME, _) => name = Some(str_of(&f)?),
            // Weights in a file beside the model: the rewritten bytes would lose the folder they
            // are resolved against.
            (TENSOR_EXTERNAL_DATA, _) => return None,
            (TENSOR_DATA_LOCATION, Value::Varint(1)) => return None,
            _ => {}
        }
    }
    Some((name?, t))
}

fn is_onnx_domain(d: &str) -> bool {
    d.is_empty() || d == "ai.onnx"
}

/// One lookup to rewrite: the nodes (indexes into the graph's node list) and names involved.
struct Lookup<'a> {
    gather: usize,
    cast: usize,
    mul: usize,
    quantized: &'a str,
    scale: &'a str,
    /// The scale has one value per row (gathered with the rows) rather than one in all.
    per_row: bool,
    cast_first: bool,
}

/// A model's only graph: a model with several (or none) is not one this reads.
fn single_graph<'f, 'a>(model_fields: &'f [Field<'a>]) -> Option<&'f Field<'a>> {
    let mut graphs = model_fields.iter().filter(|f| f.number == MODEL_GRAPH);
    let graph = graphs.next()?;
    graphs.next().is_none().then_some(graph)
}

/// The model's fields as they were, its graph replaced by `graph`.
fn with_graph(model_fields: &[Field<'_>], graph: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(graph.len() + 64);
    for f in model_fields {
        if f.number == MODEL_GRAPH {
            put_bytes(&mut bytes, MODEL_GRAPH, graph);
        } else {
            bytes.extend_from_slice(f.raw);
        }
    }
    bytes
}

fn rewrite(model: &[u8]) -> Option<Prepared> {
    let model_fields = fields(model)?;
    // A model without an operator set is not one ONNX Runtime loads: nothing to rewrite.
    last(&model_fields, MODEL_OPSET_IMPORT)?;
    let graph_field = single_graph(&model_fields)?;
    let graph_fields = fields(bytes_of(graph_field)?)?;

    let mut nodes = Vec::new();
    let mut inits = HashMap::new();
    let mut graph_inputs = HashSet::new();
    let mut graph_outputs = HashSet::new();
    for f in &graph_fields {
        match f.number {
            GRAPH_NODE => nodes.push(node(bytes_of(f)?)?),
            GRAPH_INITIALIZER => {
                let (name, t) = initializer(bytes_of(f)?)?;
                inits.insert(name, t);
            }
            GRAPH_INPUT | GRAPH_OUTPUT => {
                let name = last(&fields(bytes_of(f)?)?, VALUE_INFO_NAME).and_then(str_of)?;
                if f.number == GRAPH_INPUT {
                    graph_inputs.insert(name)
                } else {
                    graph_outputs.insert(name)
                };
            }
            _ => {}
        }
    }
    // A constant is an initializer no graph input can override.
    let constant = |name: &str| inits.get(name).filter(|_| !graph_inputs.contains(name));
    let quantized = |name: &str| constant(name).is_some_and(|t| matches!(t.data_type, TYPE_INT8 | TYPE_UINT8));

    let mut prepared = Prepared {
        cast_dequantized: nodes.iter().filter(|n| n.op == "Cast" && n.inputs.len() == 1 && quantized(n.inputs[0])).count(),
        ..Prepared::default()
    };
    // Outer names a subgraph may read cannot be counted reliably: leave such models as they are.
    if nodes.iter().any(|n| n.has_subgraph) {
        return Some(prepared);
    }

    let mut producer = HashMap::new();
    let mut uses: HashMap<&str, usize> = HashMap::new();
    let mut names: HashSet<&str> = inits.keys().copied().chain(graph_inputs.iter().copied()).collect();
    for (i, n) in nodes.iter().enumerate() {
        for o in &n.outputs {
            producer.insert(*o, i);
            names.insert(o);
        }
        for input in &n.inputs {
            *uses.entry(input).or_default() += 1;
        }
    }
    let only_use = |name: &str| uses.get(name) == Some(&1) && !graph_outputs.contains(name);

    let mut lookups = Vec::new();
    for (g, n) in nodes.iter().enumerate() {
        if n.op != "Gather" || !is_onnx_domain(n.domain) || n.inputs.len() != 2 || n.outputs.len() != 1 || n.axis.unwrap_or(0) != 0 {
            continue;
        }
        let Some(&m) = producer.get(n.inputs[0]) else { continue };
        let mul = &nodes[m];
        if mul.op != "Mul" || !is_onnx_domain(mul.domain) || mul.inputs.len() != 2 || !only_use(n.inputs[0]) {
            continue;
        }
        let cast_at = mul.inputs.iter().position(|i| producer.get(i).is_some_and(|&c| nodes[c].op == "Cast"));
        let Some(cast_at) = cast_at else { continue };
        let c = producer[mul.inputs[cast_at]];
        let cast = &nodes[c];
        if !is_onnx_domain(cast.domain)
            || cast.inputs.len() != 1
            || !cast.to.is_some_and(|t| FLOAT_TYPES.contains(&t))
            || !quantized(cast.inputs[0])
            || !only_use(mul.inputs[cast_at])
        {
            continue;
        }
        let scale = mul.inputs[1 - cast_at];
        let (Some(table), Some(s)) = (constant(cast.inputs[0]), constant(scale)) else { continue };
        let per_row = match (table.dims.as_slice(), s.dims.as_slice()) {
            // One value for all, of a rank the gathered rows (rank >= the table's - 1, whatever
            // the ids' rank) broadcast to without growing: [] or [1] on a rank-2 table.
            (_, dims) if dims.iter().product::<i64>() == 1 && dims.len() < table.dims.len() => false,
            ([rows, _], [scale_rows, 1]) if rows == scale_rows => true,
            _ => continue,
        };
        lookups.push(Lookup { gather: g, cast: c, mul: m, quantized: cast.inputs[0], scale, per_row, cast_first: cast_at == 0 });
    }

    // The new tensors' names, checked free.
    let new_names = |l: &Lookup| {
        let out = nodes[l.gather].outputs[0];
        ["rows_q", "rows_f", "rows_scale"].map(|s| format!("{out}/lode_{s}"))
    };
    lookups.retain(|l| new_names(l).iter().all(|n| !names.contains(n.as_str())));
    if lookups.is_empty() {
        return Some(prepared);
    }

    let removed_nodes: HashSet<usize> = lookups.iter().flat_map(|l| [l.cast, l.mul]).collect();
    let removed_values: HashSet<&str> = lookups.iter().flat_map(|l| [nodes[l.cast].outputs[0], nodes[l.mul].outputs[0]]).collect();
    let by_gather: HashMap<usize, &Lookup> = lookups.iter().map(|l| (l.gather, l)).collect();

    let mut graph = Vec::with_capacity(bytes_of(graph_field)?.len());
    let mut node_index = 0;
    for f in &graph_fields {
        match f.number {
            GRAPH_NODE => {
                let i = node_index;
                node_index += 1;
                if removed_nodes.contains(&i) {
                    continue;
                }
                let Some(l) = by_gather.get(&i) else {
                    graph.extend_from_slice(f.raw);
                    continue;
                };
                let (gather, cast) = (&nodes[l.gather], &nodes[l.cast]);
                let [rows_q, rows_f, rows_scale] = new_names(l);
                let ids = gather.inputs[1];
                let out = gather.outputs[0];
                let gather_attrs = gather.attributes.as_slice();
                let encoded = [
                    encode_node(&[l.quantized, ids], &[&rows_q], &rows_q, "Gather", gather.domain, gather_attrs),
                    encode_node(&[&rows_q], &[&rows_f], &rows_f, "Cast", cast.domain, &cast.attributes),
                ];
                for n in encoded {
                    put_bytes(&mut graph, GRAPH_NODE, &n);
                }
                let scale = if l.per_row {
                    let n = encode_node(&[l.scale, ids], &[&rows_scale], &rows_scale, "Gather", gather.domain, gather_attrs);
                    put_bytes(&mut graph, GRAPH_NODE, &n);
                    rows_scale.as_str()
                } else {
                    l.scale
                };
                let operands = if l.cast_first { [rows_f.as_str(), scale] } else { [scale, rows_f.as_str()] };
                let mul = encode_node(&operands, &[out], &format!("{out}/lode_rows"), "Mul", nodes[l.mul].domain, &[]);
                put_bytes(&mut graph, GRAPH_NODE, &mul);
            }
            GRAPH_VALUE_INFO => {
                let name = last(&fields(bytes_of(f)?)?, VALUE_INFO_NAME).and_then(str_of);
                if !name.is_some_and(|n| removed_values.contains(n)) {
                    graph.extend_from_slice(f.raw);
                }
            }
            _ => graph.extend_from_slice(f.raw),
        }
    }

    let bytes = with_graph(&model_fields, &graph);
    prepared.lookups = lookups.len();
    prepared.bytes = Some(bytes);
    Some(prepared)
}

const TENSOR_RAW_DATA: u64 = 9;
const ENTRY_KEY: u64 = 1;
const ENTRY_VALUE: u64 = 2;
const GRAPH_SPARSE_INITIALIZER: u64 = 15;
/// Element types of the weights moved: the float types (32, 16, 64 bits, bfloat16, the float8
/// and float4 kinds) and the small integers quantized weights come in (8, 16, 4 bits, and
/// unsigned 32/64). Not INT32 and INT64, the types of shapes, axes and indices: ONNX Runtime's
/// load-time shape inference cannot read an external tensor, so a model whose `Reshape` shape
/// is external fails to load (the blind cases found it). Not BOOL: ONNX Runtime normalises a
/// bool byte to 0 or 1 inline but not from external data. Not strings or complex numbers.
const MAPPED_TYPES: [u64; 17] = [1, 2, 3, 4, 5, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23];
/// Offsets of externalized weights are multiples of this: ONNX Runtime maps each weight from
/// the file where it starts on a page boundary.
const DATA_ALIGN: usize = 4096;

/// A model whose large weights are moved to a file beside it.
#[derive(Debug)]
pub struct Externalized {
    /// The model, each moved weight naming `location` with its offset and length.
    pub model: Vec<u8>,
    /// The weights' bytes, each at a multiple of 4096.
    pub data: Vec<u8>,
    /// Weights moved.
    pub tensors: usize,
}

/// Moves every weight initializer (float or small-integer: [`MAPPED_TYPES`]) whose raw bytes are
/// `min_bytes` or more (and at least one) out of `model` into one data file, named `location`
/// relative to the model file (ONNX's external data). ONNX
/// Runtime maps such weights from the file instead of copying them onto its heap: a weight
/// only partly read (a token-embedding table, of which a batch reads the rows of its tokens)
/// is then only partly resident, and what is resident is clean file pages the kernel can take
/// back. `None` when nothing is that large or the model is not what this reads: one graph,
/// no weight external already, no sparse initializer, no two initializers of one name (the
/// model then loads as it is). Subgraphs and `Constant` nodes keep their tensors inline.
pub fn externalize(model: &[u8], min_bytes: usize, location: &str) -> Option<Externalized> {
    let model_fields = fields(model)?;
    let graph_field = single_graph(&model_fields)?;
    let graph_fields = fields(bytes_of(graph_field)?)?;
    // Two initializers of one name, or a sparse initializer beside dense ones: which one ONNX
    // Runtime takes differs between inline and external weights (found by the blind cases).
    if graph_fields.iter().any(|f| f.number == GRAPH_SPARSE_INITIALIZER) {
        return None;
    }
    let mut names = HashSet::new();
    let mut data = Vec::new();
    let mut tensors = 0;
    let mut graph = Vec::with_capacity(bytes_of(graph_field)?.len() / 8);
    for f in graph_fields {
        if f.number != GRAPH_INITIALIZER {
            graph.extend_from_slice(f.raw);
            continue;
        }
        let tensor = fields(bytes_of(&f)?)?;
        if !names.insert(last(&tensor, TENSOR_NAME).and_then(bytes_of).unwrap_or_default()) {
            return None;
        }
        if tensor
            .iter()
            .any(|t| t.number == TENSOR_EXTERNAL_DATA || (t.number == TENSOR_DATA_LOCATION && !matches!(t.value, Value::Varint(0))))
        {
            return None;
        }
        let weight_type = matches!(last(&tensor, TENSOR_DATA_TYPE).map(|t| t.value), Some(Value::Varint(t)) if MAPPED_TYPES.contains(&t));
        let raw = last(&tensor, TENSOR_RAW_DATA).and_then(bytes_of).filter(|r| weight_type && r.len() >= min_bytes.max(1));
        let Some(raw) = raw else {
            graph.extend_from_slice(f.raw);
            continue;
        };
        data.resize(data.len().next_multiple_of(DATA_ALIGN), 0);
        let offset = data.len();
        data.extend_from_slice(raw);
        let mut t = Vec::with_capacity(256);
        for field in tensor.iter().filter(|t| !matches!(t.number, TENSOR_RAW_DATA | TENSOR_DATA_LOCATION)) {
            t.extend_from_slice(field.raw);
        }
        for (key, value) in [("location", location.to_owned()), ("offset", offset.to_string()), ("length", raw.len().to_string())] {
            let mut entry = Vec::new();
            put_bytes(&mut entry, ENTRY_KEY, key.as_bytes());
            put_bytes(&mut entry, ENTRY_VALUE, value.as_bytes());
            put_bytes(&mut t, TENSOR_EXTERNAL_DATA, &entry);
        }
        put_varint(&mut t, TENSOR_DATA_LOCATION << 3);
        put_varint(&mut t, 1);
        put_bytes(&mut graph, GRAPH_INITIALIZER, &t);
        tensors += 1;
    }
    if tensors == 0 {
        return None;
    }
    let bytes = with_graph(&model_fields, &graph);
    Some(Externalized { model: bytes, data, tensors })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str, dims: &[u64], data_type: u64) -> Vec<u8> {
        let mut t = Vec::new();
        for d in dims {
            put_varint(&mut t, TENSOR_DIMS << 3);
            put_varint(&mut t, *d);
        }
        put_varint(&mut t, TENSOR_DATA_TYPE << 3);
        put_varint(&mut t, data_type);
        put_bytes(&mut t, TENSOR_NAME, name.as_bytes());
        t
    }

    fn attr_int(name: &str, i: u64) -> Vec<u8> {
        let mut a = Vec::new();
        put_bytes(&mut a, ATTR_NAME, name.as_bytes());
        put_varint(&mut a, ATTR_INT << 3);
        put_varint(&mut a, i);
        let mut f = Vec::new();
        put_bytes(&mut f, NODE_ATTRIBUTE, &a);
        f
    }

    /// A graph holding one dequantized lookup, `Gather(Mul(Cast(w_q), scale), ids)`.
    fn model(scale_dims: &[u64], extra_use: bool, axis: u64) -> Vec<u8> {
        let mut g = Vec::new();
        let cast_to = attr_int("to", 1);
        let axis = attr_int("axis", axis);
        put_bytes(&mut g, GRAPH_NODE, &encode_node(&["w_q"], &["w_f"], "cast", "Cast", "", &[&cast_to]));
        put_bytes(&mut g, GRAPH_NODE, &encode_node(&["w_f", "scale"], &["w"], "mul", "Mul", "", &[]));
        put_bytes(&mut g, GRAPH_NODE, &encode_node(&["w", "ids"], &["emb"], "gather", "Gather", "", &[&axis]));
        if extra_use {
            put_bytes(&mut g, GRAPH_NODE, &encode_node(&["w"], &["w2"], "other", "Identity", "", &[]));
        }
        put_bytes(&mut g, GRAPH_INITIALIZER, &tensor("w_q", &[10, 4], TYPE_INT8));
        put_bytes(&mut g, GRAPH_INITIALIZER, &tensor("scale", scale_dims, 1));
        let mut vi = Vec::new();
        put_bytes(&mut vi, VALUE_INFO_NAME, b"w_f");
        put_bytes(&mut g, GRAPH_VALUE_INFO, &vi);
        let mut m = Vec::new();
        put_varint(&mut m, 1 << 3); // ir_version
        put_varint(&mut m, 10);
        put_bytes(&mut m, MODEL_GRAPH, &g);
        put_bytes(&mut m, MODEL_OPSET_IMPORT, &[0x10, 17]); // version 17 of the default domain
        m
    }

    fn ops(model: &[u8]) -> Vec<(String, Vec<String>, Vec<String>)> {
        let f = fields(model).unwrap();
        let g = f.iter().find(|f| f.number == MODEL_GRAPH).unwrap();
        fields(bytes_of(g).unwrap())
            .unwrap()
            .iter()
            .filter(|f| f.number == GRAPH_NODE)
            .map(|f| {
                let n = node(bytes_of(f).unwrap()).unwrap();
                (n.op.to_owned(), n.inputs.iter().map(|s| s.to_string()).collect(), n.outputs.iter().map(|s| s.to_string()).collect())
            })
            .collect()
    }

    #[test]
    fn a_per_row_lookup_gathers_rows_and_scales_before_the_cast() {
        let p = prepare(&model(&[10, 1], false, 0));
        assert_eq!((p.lookups, p.cast_dequantized), (1, 1));
        let out = p.bytes.unwrap();
        let got = ops(&out);
        let names: Vec<_> = got.iter().map(|(op, i, o)| format!("{op}({}) -> {}", i.join(", "), o.join(", "))).collect();
        assert_eq!(
            names,
            [
                "Gather(w_q, ids) -> emb/lode_rows_q",
                "Cast(emb/lode_rows_q) -> emb/lode_rows_f",
                "Gather(scale, ids) -> emb/lode_rows_scale",
                "Mul(emb/lode_rows_f, emb/lode_rows_scale) -> emb",
            ]
        );
        // The removed tensor's value info went with it; the model's other fields are kept.
        assert!(!out.windows(3).any(|w| w == b"w_f"));
        assert_eq!(&out[..2], &[0x08, 10]);
    }

    #[test]
    fn a_single_scale_is_used_as_it_is() {
        let p = prepare(&model(&[], false, 0));
        let got = ops(&p.bytes.unwrap());
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].1, ["emb/lode_rows_f", "scale"]);
    }

    #[test]
    fn lookups_it_cannot_prove_equal_are_left_alone() {
        // The dequantized table is used elsewhere; the scale is per column; another axis.
        for m in [model(&[10, 1], true, 0), model(&[1, 4], false, 0), model(&[10, 1], false, 1)] {
            let p = prepare(&m);
            assert!(p.bytes.is_none() && p.lookups == 0, "{:?}", ops(&m));
            assert_eq!(p.cast_dequantized, 1);
        }
    }

    #[test]
    fn malformed_bytes_never_panic_and_are_left_alone() {
        let good = model(&[10, 1], false, 0);
        // Cut anywhere, the graph's length runs past the end, or there is no graph or no
        // operator set.
        for end in 0..good.len() {
            assert!(prepare(&good[..end]).bytes.is_none(), "cut at {end}");
        }
        assert!(prepare(&good).bytes.is_some());
        for bytes in [&b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"[..], b"\x3a\xff\xff\xff\xff\x0f", b"\x0b", b"not a model"] {
            assert!(prepare(bytes).bytes.is_none());
        }
    }

    fn raw_tensor(name: &str, raw: &[u8]) -> Vec<u8> {
        let mut t = tensor(name, &[raw.len() as u64], TYPE_INT8);
        put_bytes(&mut t, TENSOR_RAW_DATA, raw);
        t
    }

    fn graph_model(inits: &[Vec<u8>]) -> Vec<u8> {
        let mut g = Vec::new();
        put_bytes(&mut g, GRAPH_NODE, &encode_node(&["big", "ids"], &["out"], "gather", "Gather", "", &[]));
        for t in inits {
            put_bytes(&mut g, GRAPH_INITIALIZER, t);
        }
        let mut m = Vec::new();
        put_varint(&mut m, 1 << 3);
        put_varint(&mut m, 10);
        put_bytes(&mut m, MODEL_GRAPH, &g);
        put_bytes(&mut m, MODEL_OPSET_IMPORT, &[0x10, 17]);
        m
    }

    /// (name, raw bytes inline, external entries) of each initializer.
    fn initializers(model: &[u8]) -> Vec<(String, Option<Vec<u8>>, Vec<(String, String)>)> {
        let f = fields(model).unwrap();
        let g = f.iter().find(|f| f.number == MODEL_GRAPH).unwrap();
        let mut out = Vec::new();
        for init in fields(bytes_of(g).unwrap()).unwrap().iter().filter(|f| f.number == GRAPH_INITIALIZER) {
            let t = fields(bytes_of(init).unwrap()).unwrap();
            let name = str_of(last(&t, TENSOR_NAME).unwrap()).unwrap().to_owned();
            let raw = last(&t, TENSOR_RAW_DATA).and_then(bytes_of).map(<[u8]>::to_vec);
            let entries = t
                .iter()
                .filter(|f| f.number == TENSOR_EXTERNAL_DATA)
                .map(|e| {
                    let kv = fields(bytes_of(e).unwrap()).unwrap();
                    (str_of(last(&kv, ENTRY_KEY).unwrap()).unwrap().to_owned(), str_of(last(&kv, ENTRY_VALUE).unwrap()).unwrap().to_owned())
                })
                .collect();
            out.push((name, raw, entries));
        }
        out
    }

    #[test]
    fn large_weights_move_to_page_aligned_data_and_small_ones_stay() {
        let big: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let other: Vec<u8> = (0..5_000u32).map(|i| (i * 3 + 1) as u8).collect();
        let m = graph_model(&[raw_tensor("big", &big), raw_tensor("small", b"tiny"), raw_tensor("other", &other)]);
        let ext = externalize(&m, 1000, "k.data").unwrap();
        assert_eq!(ext.tensors, 2);
        let got = initializers(&ext.model);
        assert_eq!(got[1], ("small".to_owned(), Some(b"tiny".to_vec()), vec![]));
        for ((name, raw, entries), want) in [(&got[0], &big), (&got[2], &other)] {
            assert!(raw.is_none(), "{name} still inline");
            let e: HashMap<_, _> = entries.iter().cloned().collect();
            assert_eq!(e["location"], "k.data");
            let (offset, length): (usize, usize) = (e["offset"].parse().unwrap(), e["length"].parse().unwrap());
            assert_eq!(offset % DATA_ALIGN, 0, "{name} at {offset}");
            assert_eq!(&ext.data[offset..offset + length], &want[..], "{name}'s bytes");
        }
        // Everything else of the model is kept: the node, the operator set, the IR version.
        assert_eq!(ops(&ext.model), ops(&m));
        assert_eq!(&ext.model[..2], &m[..2]);
        // Nothing that large: left as it is.
        assert!(externalize(&m, 20_000, "k.data").is_none());
    }

    #[test]
    fn weights_already_external_or_malformed_models_are_left_alone() {
        let mut t = tensor("big", &[4], TYPE_INT8);
        let mut entry = Vec::new();
        put_bytes(&mut entry, ENTRY_KEY, b"location");
        put_bytes(&mut entry, ENTRY_VALUE, b"weights.bin");
        put_bytes(&mut t, TENSOR_EXTERNAL_DATA, &entry);
        let big = raw_tensor("other", &[1; 5000]);
        assert!(externalize(&graph_model(&[t, big.clone()]), 100, "k.data").is_none());
        let good = graph_model(&[big]);
        assert!(externalize(&good, 100, "k.data").is_some());
        for end in 0..good.len() {
            let _ = externalize(&good[..end], 100, "k.data");
        }
    }
}
