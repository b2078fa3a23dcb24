"""Adversarial fixtures for the dequantized-table Gather rewrite
(`Gather(Mul(Cast(W_q), scale), ids)` -> `Mul(Cast(Gather(W_q, ids)), Gather(scale, ids))`).

Writes one tiny ONNX model per case into OUT_DIR as <case>.onnx (plus any external-data file a
case needs), and OUT_DIR/cases.json: a list of
  {"case", "class", "expect_rewrite", "why", "inputs": {name: {"dtype", "shape", "values"}}}
with "loads": false on malformed cases onnxruntime itself rejects.

Classes: scope (does the pattern apply at all), order (node / field order), shape (broadcasting and
rank traps), types (element types), structure (graph-level features the rewrite must bail on or
survive), encoding (legal-but-unusual protobuf bytes), malformed (byte-level corruption).

Many cases are built by raw protobuf surgery on onnx's SerializeToString output (see `pb_*`); their
"why" says so. Those bytes are what the rewrite sees; onnx/onnxruntime parse them with ordinary
protobuf semantics (last scalar wins, repeated fields concatenate, unknown fields kept).

usage: make_graph_cases.py OUT_DIR [--check]
  --check  loads every case with onnxruntime, runs it on its inputs and prints output shapes;
           malformed cases with "loads": false must fail to load. It also applies a naive
           reference rewrite (no safety guards) with onnx: for expect_rewrite=true cases the
           rewritten model must give bit-identical outputs; for the others it reports whether the
           naive rewrite would have broken the model (informational).
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
ROWS, DIM = 12, 8
rng = np.random.default_rng(20240917)
W8 = rng.integers(-128, 128, size=(ROWS, DIM)).astype(np.int8)
W8[0, 0], W8[1, 1] = -128, 127  # extremes
SROW = (rng.random((ROWS, 1)) * 0.05 + 0.001).astype(np.float32)
SONE = np.float32(0.0123456789)
IDS = [0, 11, 5, 5, 3, 7]  # duplicates on purpose

CASES = []


# ----------------------------------------------------------------------------- protobuf bytes
def enc_varint(n, pad=0):
    """Varint of n (negative as 64-bit two's complement); pad>0 adds redundant 0x80 bytes
    (non-minimal but valid encoding)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n or pad:
            out.append(b | 0x80)
            if not n:
                pad -= 1
                while pad > 0:
                    out.append(0x80)
                    pad -= 1
                out.append(0x00)
                return bytes(out)
        else:
            out.append(b)
            return bytes(out)


def dec_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def key(field, wt):
    return enc_varint((field << 3) | wt)


def pb_parse(buf):
    """A message's fields in wire order: [field, wire_type, value]; value is int for varints,
    bytes otherwise."""
    i, out = 0, []
    while i < len(buf):
        k, i = dec_varint(buf, i)
        f, wt = k >> 3, k & 7
        if wt == 0:
            v, i = dec_varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = dec_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("groups not expected")
        out.append([f, wt, v])
    return out


def pb_emit(fields, pad=0):
    """Inverse of pb_parse. An entry [None, None, raw] is copied verbatim. pad>0 makes every
    length prefix and varint value non-minimal."""
    out = bytearray()
    for f, wt, v in fields:
        if f is None:
            out += v
            continue
        out += key(f, wt)
        if wt == 0:
            out += enc_varint(v, pad)
        elif wt == 2:
            out += enc_varint(len(v), pad) + v
        else:
            out += v
    return bytes(out)


def unknown_fields(field=99):
    """Field `field` with each legal non-group wire type, plus a max-field-number varint."""
    return [
        [field, 0, 0xFFFFFFFFFFFFFFFF],
        [field, 1, b"\x01\x02\x03\x04\x05\x06\x07\x08"],
        [field, 2, b"unknown \xe2\x9c\x93 bytes"],
        [field, 5, b"\xde\xad\xbe\xef"],
        [1000, 2, b""],
        [536870911, 0, 1],
    ]


def submsgs(fields, num):
    return [e for e in fields if e[0] == num]


def field_str(fields, num):
    for e in fields:
        if e[0] == num:
            return e[2].decode("utf-8", "replace")
    return None


def node_by_output(graph_fields, out_name):
    for e in graph_fields:
        if e[0] == 1:
            nf = pb_parse(e[2])
            if out_name in [x[2].decode() for x in nf if x[0] == 2]:
                return e, nf
    raise KeyError(out_name)


def tensor_by_name(graph_fields, name):
    for e in graph_fields:
        if e[0] == 5:
            tf = pb_parse(e[2])
            if field_str(tf, 8) == name:
                return e, tf
    raise KeyError(name)


def model_graph(mbytes):
    mf = pb_parse(mbytes)
    ge = submsgs(mf, 7)[0]
    return mf, ge, pb_parse(ge[2])


# ----------------------------------------------------------------------------- model builders
def inp(name="ids", shape=(2, 3), values=None, dtype="int64"):
    values = IDS if values is None else values
    return {name: {"dtype": dtype, "shape": list(shape), "values": list(values)}}


ELEM = {"int64": TensorProto.INT64, "int32": TensorProto.INT32, "bool": TensorProto.BOOL,
        "float32": TensorProto.FLOAT}


def vi_for(inputs):
    return [helper.make_tensor_value_info(n, ELEM[s["dtype"]], s["shape"]) for n, s in inputs.items()]


def pattern(W="W_q", S="scale", C="W_f", M="table", G="emb", I="ids", to=F, scale_first=False,
            axis=None, mul_domain="", gather_domain="", cast_domain="", tag=""):
    cast = helper.make_node("Cast", [W], [C], name=f"/embed{tag}/Cast", domain=cast_domain, to=to) \
        if not cast_domain else helper.make_node("Cast", [W], [C], name=f"/embed{tag}/Cast", domain=cast_domain)
    mul = helper.make_node("Mul", [S, C] if scale_first else [C, S], [M], name=f"/embed{tag}/Mul",
                           domain=mul_domain)
    kw = {} if axis is None else {"axis": axis}
    gat = helper.make_node("Gather", [M, I], [G], name=f"/embed{tag}/Gather", domain=gather_domain, **kw)
    return [cast, mul, gat]


def make(nodes, inits, inputs, outputs, value_info=(), functions=(), extra_opsets=(), ir=8,
         sparse=(), graph_inputs_extra=()):
    """inputs: the cases.json dict (becomes graph inputs); outputs: [(name, elem, shape)]."""
    g = helper.make_graph(
        nodes, "dq_embed", vi_for(inputs) + list(graph_inputs_extra),
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=inits, value_info=list(value_info), sparse_initializer=list(sparse))
    opsets = [helper.make_opsetid("", 17)] + [helper.make_opsetid(d, 1) for d in extra_opsets]
    m = helper.make_model(g, opset_imports=opsets, ir_version=ir, functions=list(functions),
                          producer_name="make_graph_cases")
    return m


def base_inits(W="W_q", S="scale", w=W8, s=SROW):
    return [numpy_helper.from_array(w, W), numpy_helper.from_array(np.asarray(s), S)]


def base(**kw):
    """The canonical per-row pattern, ids int64 [2,3] -> emb float [2,3,8]."""
    inputs = kw.pop("inputs", inp())
    inits = kw.pop("inits", base_inits())
    out = kw.pop("outputs", [("emb", F, None)])
    extra_nodes = kw.pop("extra_nodes", [])
    mk = {k: kw.pop(k) for k in list(kw) if k in ("value_info", "functions", "extra_opsets", "ir",
                                                   "sparse", "graph_inputs_extra")}
    return make(pattern(**kw) + extra_nodes, inits, inputs, out, **mk), inputs


def add(case, cls, expect, why, model, inputs, files=None, loads=True):
    b = model if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
    e = {"case": case, "class": cls, "expect_rewrite": expect, "why": why, "inputs": inputs}
    if cls == "malformed":
        e["loads"] = loads
    CASES.append((e, bytes(b), files or {}))


# ============================================================================= scope
m, i = base()
add("per_row_int8", "scope", True, "Canonical pattern: int8 [12,8] table, per-row scale [12,1], "
    "Gather axis absent, ids int64 [2,3] with a repeated id.", m, i)

m, i = base(inits=base_inits(s=np.array([SONE], np.float32)))
add("single_scale_shape_1", "scope", True, "Single scale of shape [1]; the rewrite may use it as is.", m, i)

m, i = base(inits=base_inits(s=np.array(SONE, np.float32)))
add("single_scale_rank0", "scope", True, "Single scale of shape [] (rank 0).", m, i)

m, i = base(inits=base_inits(s=np.array([[SONE]], np.float32)))
add("single_scale_1x1", "scope", True, "Single scale of shape [1,1] with ids of rank 2: "
    "Mul(Cast(Gather) [2,3,8], [1,1]) keeps shape [2,3,8].", m, i)

m, i = base(axis=0)
add("gather_axis0_explicit", "scope", True, "Gather with axis=0 written explicitly.", m, i)

m, i = base(extra_nodes=[helper.make_node("Gather", ["table", "ids2"], ["emb2"], axis=0)],
            inputs={**inp(), **inp("ids2", (4,), [1, 2, 3, 11])}, outputs=[("emb", F, None), ("emb2", F, None)])
add("two_gathers_same_table", "scope", False, "The Mul output (dequantized table) is read by two "
    "Gathers, so it is not used only by one Gather.", m, i)

m, i = base(outputs=[("emb", F, None), ("table", F, [ROWS, DIM])])
add("table_is_graph_output", "scope", False, "The Mul output is also a graph output; removing the "
    "Mul would drop an output.", m, i)

m, i = base(outputs=[("emb", F, None), ("W_f", F, [ROWS, DIM])])
add("cast_is_graph_output", "scope", False, "The Cast output is also a graph output.", m, i)

proj = numpy_helper.from_array((rng.random((DIM, 4)) - 0.5).astype(np.float32), "proj")
m, i = base(inits=base_inits() + [proj], extra_nodes=[helper.make_node("MatMul", ["W_f", "proj"], ["wproj"])],
            outputs=[("emb", F, None), ("wproj", F, None)])
add("cast_also_matmul", "scope", False, "The Cast output also feeds a MatMul, so the Cast must stay "
    "and it is not used only by the pattern.", m, i)

mm = pattern()
mm[1] = helper.make_node("Mul", ["W_f", "W_f"], ["table"])
m = make(mm, base_inits(), inp(), [("emb", F, None)])
add("mul_cast_squared", "scope", False, "Mul(Cast(W), Cast(W)): the other Mul input is the Cast "
    "output, not a scale initializer.", m, inp())

m, i = base(axis=1, inputs=inp(values=[0, 7, 3, 3, 1, 6]))
add("gather_axis1", "scope", False, "Gather axis=1 selects columns; ids < 8 so the original runs.", m, i)

m, i = base(axis=-2)
add("gather_axis_minus2", "scope", False, "Gather axis=-2 on a rank-2 table is axis 0, so a rewrite "
    "would be correct, but the documented rule accepts only absent or 0.", m, i)

m, i = base(graph_inputs_extra=[helper.make_tensor_value_info("W_q", TensorProto.INT8, [ROWS, DIM])])
add("wq_also_graph_input", "scope", False, "W_q is an initializer also listed as a graph input, "
    "so a caller may override it: not a constant (run uses the default).", m, i)

m, i = base(graph_inputs_extra=[helper.make_tensor_value_info("scale", F, [ROWS, 1])])
add("scale_also_graph_input", "scope", False, "The scale is an initializer also listed as a graph "
    "input (overridable).", m, i)

cn = helper.make_node("Constant", [], ["scale"], value=numpy_helper.from_array(SROW, "scale_c"))
m, i = base(inits=[numpy_helper.from_array(W8, "W_q")], extra_nodes=[cn])
add("scale_from_constant_node", "scope", False, "The scale comes from a Constant node, not an "
    "initializer (outside the documented rule).", m, i)

m, i = base(inputs={**inp(), "scale": {"dtype": "float32", "shape": [ROWS, 1],
                                        "values": [float(x) for x in SROW.ravel()]}},
            inits=[numpy_helper.from_array(W8, "W_q")])
add("scale_is_runtime_input", "scope", False, "The scale is a plain graph input, not an initializer.", m, i)

ids_init = numpy_helper.from_array(np.array([[3, 0], [11, 3]], np.int64), "ids")
m = make(pattern(), base_inits() + [ids_init], {}, [("emb", F, None)])
add("ids_from_initializer", "scope", True, "ids are themselves an initializer and the model has "
    "no inputs; the pattern is otherwise canonical.", m, {})

one = numpy_helper.from_array(np.array(1, np.int64), "one")
m, i = base(I="ids_p1", inits=base_inits() + [one], extra_nodes=[helper.make_node("Add", ["ids", "one"], ["ids_p1"])],
            inputs=inp(values=[-1, 10, 4, 4, 2, 6]))
add("ids_computed", "scope", True, "ids are computed by an Add node before the Gather.", m, i)

m, i = base(inputs=inp(values=[-1, -12, 0, 11, -6, -6]))
add("ids_negative", "scope", True, "Negative ids (-1, -12) count from the end; Gather on W_q and on "
    "the per-row scale resolve them the same way.", m, i)

fn_mul = helper.make_function("attack.ops", "Mul", ["A", "B"], ["C"],
                              [helper.make_node("Add", ["A", "B"], ["C"])], [helper.make_opsetid("", 17)])
m, i = base(mul_domain="attack.ops", functions=[fn_mul], extra_opsets=["attack.ops"])
add("mul_custom_domain", "scope", False, "The Mul is attack.ops::Mul, a model-local function that "
    "computes Add; ignoring the domain would change the output.", m, i)

fn_gat = helper.make_function("attack.ops", "Gather", ["D", "X"], ["Y"],
                              [helper.make_node("Gather", ["D", "X"], ["g"], axis=0),
                               helper.make_node("Neg", ["g"], ["Y"])], [helper.make_opsetid("", 17)])
m, i = base(gather_domain="attack.ops", functions=[fn_gat], extra_opsets=["attack.ops"])
add("gather_custom_domain", "scope", False, "The Gather is attack.ops::Gather, a local function that "
    "negates the gathered rows.", m, i)

fn_cast = helper.make_function("attack.ops", "Cast", ["X"], ["Y"],
                               [helper.make_node("Cast", ["X"], ["c"], to=F), helper.make_node("Abs", ["c"], ["Y"])],
                               [helper.make_opsetid("", 17)])
m, i = base(cast_domain="attack.ops", functions=[fn_cast], extra_opsets=["attack.ops"])
add("cast_custom_domain", "scope", False, "The Cast is attack.ops::Cast (no 'to' attribute), a local "
    "function computing Abs(Cast(x)).", m, i)

m, i = base(mul_domain="ai.onnx")
add("mul_domain_ai_onnx", "scope", True, "The Mul's domain is spelled 'ai.onnx', the standard ONNX "
    "domain alias (rewriting is correct; bailing is merely conservative).", m, i)

inner = helper.make_graph([helper.make_node("Cast", ["W_q"], ["wf_inner"], to=F),
                           helper.make_node("Mul", ["wf_inner", "scale"], ["t_inner"]),
                           helper.make_node("Gather", ["t_inner", "ids"], ["o"])], "body",
                          [helper.make_tensor_value_info("W_q", TensorProto.INT8, [ROWS, DIM]),
                           helper.make_tensor_value_info("scale", F, [ROWS, 1]),
                           helper.make_tensor_value_info("ids", I64, None)],
                          [helper.make_tensor_value_info("o", F, None)])
fn_dq = helper.make_function("local", "DqGather", ["W_q", "scale", "ids"], ["o"], list(inner.node),
                             [helper.make_opsetid("", 17)])
m = make([helper.make_node("DqGather", ["W_q", "scale", "ids"], ["emb"], domain="local")], base_inits(),
         inp(), [("emb", F, None)], functions=[fn_dq], extra_opsets=["local"])
add("pattern_inside_function", "scope", False, "The pattern exists only inside a model-local function "
    "body (ModelProto.functions) on function inputs, not on graph initializers.", m, inp())

# pattern only inside the bytes of an unused initializer; the real graph has no Cast/Mul.
decoy = base()[0].graph.SerializeToString()
wf = numpy_helper.from_array((W8.astype(np.float32) * SROW), "W_float")
blob = numpy_helper.from_array(np.frombuffer(decoy, np.uint8).copy(), "blob")
m = make([helper.make_node("Gather", ["W_float", "ids"], ["emb"])], [wf, blob], inp(), [("emb", F, None)])
add("pattern_bytes_in_raw_data", "scope", False, "No Cast/Mul in the graph; a serialized GraphProto "
    "containing the pattern sits in an unused uint8 initializer's raw_data (byte scanners beware).", m, inp())

# ============================================================================= order
m, i = base(scale_first=True)
add("scale_first_in_mul", "order", True, "Mul(scale, Cast(W_q)): scale is the first Mul input.", m, i)

m, i = base()
m.graph.node.reverse()
add("nodes_reverse_topological", "order", True, "Nodes stored Gather, Mul, Cast (not topological, "
    "still a valid graph; onnxruntime sorts).", m, i)

m, i = base(scale_first=True, extra_nodes=[helper.make_node("Relu", ["emb"], ["act"])],
            outputs=[("act", F, None)])
n = list(m.graph.node)
del m.graph.node[:]
m.graph.node.extend([n[3], n[2], n[0], n[1]])
add("nodes_shuffled_consumer_first", "order", True, "Relu consumer first, then Gather, Cast, Mul; "
    "the Gather output feeds a Relu instead of a graph output.", m, i)

def desc(fields):  # fields by descending field number; same-number entries keep their order
    return sorted(fields, key=lambda e: -e[0])


m, i = base(axis=0)
mf, ge, gf = model_graph(m.SerializeToString())
for e in gf:
    if e[0] in (1, 5, 11, 12):
        sub = desc(pb_parse(e[2]))
        if e[0] == 1:
            for a in sub:
                if a[0] == 5:
                    a[2] = pb_emit(desc(pb_parse(a[2])))
        e[2] = pb_emit(sub)
ge[2] = pb_emit(desc(gf))
add("fields_reversed", "order", True, "Raw surgery: fields of ModelProto, GraphProto, NodeProto, "
    "AttributeProto, TensorProto and ValueInfoProto written in descending field-number order (graph "
    "before ir_version, outputs before initializers before nodes, raw_data before dims); entries of "
    "one repeated field keep their order.", pb_emit(desc(mf)), i)

nodes = pattern()
filler = [helper.make_node("Identity", ["ids"], ["f0"])] + \
    [helper.make_node("Neg" if k % 2 else "Abs", [f"f{k}"], [f"f{k + 1}"]) for k in range(6)]
m = make([nodes[0]] + filler[:3] + [nodes[2]] + filler[3:] + [nodes[1]], base_inits(), inp(),
         [("emb", F, None), ("f6", I64, None)])
add("pattern_nodes_scattered", "order", True, "Cast first, Gather in the middle and Mul last in "
    "the node list, separated by unrelated nodes.", m, inp())

m, i = base()
mf, ge, gf = model_graph(m.SerializeToString())
nodes, inits = submsgs(gf, 1), submsgs(gf, 5)
rest = [e for e in gf if e[0] not in (1, 5, 11, 12)]
gat_e, gat_f = node_by_output(gf, "emb")
# Gather: input[0], op_type, output, name, input[1]
ins = [e for e in gat_f if e[0] == 1]
others = [e for e in gat_f if e[0] != 1]
gat_e[2] = pb_emit([ins[0]] + others + [ins[1]])
mul_e, mul_f = node_by_output(gf, "table")
ins = [e for e in mul_f if e[0] == 1]
mul_e[2] = pb_emit([ins[0]] + [e for e in mul_f if e[0] != 1] + [ins[1]])
new = [nodes[0], inits[0], submsgs(gf, 11)[0], rest[0], nodes[1], submsgs(gf, 12)[0], inits[1], nodes[2]] + rest[1:]
ge[2] = pb_emit(new)
add("repeated_fields_interleaved", "order", True, "Raw surgery: GraphProto node/initializer/input/"
    "output entries interleaved with each other and with name; Gather and Mul inputs split around "
    "op_type/output/name (protobuf concatenates them in order).", pb_emit(mf), i)

# ============================================================================= shape
m, i = base(inputs=inp(shape=(), values=[7]))
add("ids_rank0", "shape", True, "Scalar ids with per-row scale: Gather(scale,[12,1],scalar)=[1] "
    "times [8] keeps [8].", m, i)

m, i = base(inputs=inp(shape=(5,), values=[11, 0, 2, 2, 9]))
add("ids_rank1", "shape", True, "ids of rank 1.", m, i)

m, i = base(inputs=inp(shape=(2, 2, 2), values=[0, 1, 2, 3, 11, 10, 9, 0]))
add("ids_rank3", "shape", True, "ids of rank 3 -> output [2,2,2,8].", m, i)

m, i = base(inputs={"ids": {"dtype": "int64", "shape": [2, 3], "values": IDS}})
m.graph.input[0].CopyFrom(helper.make_tensor_value_info("ids", I64, ["batch", "seq"]))
m.graph.output[0].CopyFrom(helper.make_tensor_value_info("emb", F, ["batch", "seq", DIM]))
add("ids_symbolic_dims", "shape", True, "ids declared with symbolic dims [batch, seq].", m, i)

m, i = base(inits=base_inits(s=np.array([[SONE]], np.float32)), inputs=inp(shape=(), values=[4]))
add("single_scale_1x1_ids_rank0", "shape", False, "Scale [1,1] with scalar ids: the original gives "
    "[8] but Mul(Cast(Gather) [8], [1,1]) would give [1,8]; using the single scale as is changes "
    "the output shape.", m, i)

m, i = base(inits=base_inits(s=np.array([[[SONE]]], np.float32)), inputs=inp(values=[0, -1, 0, 0, -1, 0]))
add("single_scale_1x1x1", "shape", False, "Scale [1,1,1] has one element but makes the Mul output "
    "[1,12,8]; Gather axis 0 then indexes that leading 1 (ids 0/-1) giving [2,3,12,8].", m, i)

m, i = base(inits=base_inits(s=(rng.random((1, DIM)) * 0.05).astype(np.float32)))
add("per_column_scale_1xdim", "shape", False, "Scale [1,8] is per-column, not per-row; "
    "Gather(scale, ids) would be out of range / wrong.", m, i)

W12 = rng.integers(-128, 128, size=(ROWS, ROWS)).astype(np.int8)
m, i = base(inits=base_inits(w=W12, s=(rng.random((ROWS,)) * 0.05).astype(np.float32)))
add("square_table_scale_vector", "shape", False, "Table 12x12 with scale [12]: broadcasting aligns "
    "the scale with the last axis (per-column) even though its length equals rows.", m, i)

m, i = base(inits=base_inits(s=(rng.random((ROWS, DIM)) * 0.05).astype(np.float32)))
add("full_elementwise_scale", "shape", False, "Scale [12,8] (one per element) is neither single nor "
    "[rows,1]; outside the documented rule.", m, i)

m, i = base(inits=base_inits(w=W8[:1], s=SROW))
add("wq_one_row_scale_12_rows", "shape", False, "W_q is [1,8] and the scale [12,1]: Mul broadcasts "
    "the table to [12,8]; ids up to 11 are valid originally but out of range on W_q.", m, i)

W3 = rng.integers(-128, 128, size=(3, ROWS, DIM)).astype(np.int8)
m, i = base(inits=base_inits(w=W3, s=SROW), inputs=inp(values=[0, 2, 1, 1, -1, 0]))
add("wq_rank3", "shape", False, "W_q is rank 3 [3,12,8]; the [12,1] scale broadcasts along axis 1, "
    "not the gathered axis.", m, i)

m, i = base(inits=base_inits(w=W8[:, :1], s=(rng.random((1, DIM)) * 0.05).astype(np.float32)))
add("wq_one_column_scale_row_vector", "shape", False, "W_q [12,1] times scale [1,8] broadcasts to an "
    "outer product [12,8]; the scale is per-column.", m, i)

m, i = base(inits=base_inits(w=W8[:1], s=np.array([[SONE]], np.float32)), inputs=inp(values=[0, 0, -1, 0, 0, -1]))
add("one_row_table", "shape", True, "A 1x8 table with a [1,1] scale (both single and per-row); ids "
    "0 and -1.", m, i)

# ============================================================================= types
m, i = base(inits=base_inits(w=W8.view(np.uint8)))
add("wq_uint8", "types", True, "W_q is uint8 (same bytes as the int8 case, values 0..255).", m, i)

m, i = base(inputs=inp(dtype="int32"))
m.graph.input[0].type.tensor_type.elem_type = TensorProto.INT32
add("ids_int32", "types", True, "ids of type int32.", m, i)

m, i = base(inputs=inp(dtype="int32", values=[-12, -1, 0, 11, 3, 3]))
m.graph.input[0].type.tensor_type.elem_type = TensorProto.INT32
add("ids_int32_negative", "types", True, "Negative int32 ids.", m, i)

m, i = base(to=TensorProto.FLOAT16, outputs=[("emb", TensorProto.FLOAT16, None)], inits=base_inits(s=SROW.astype(np.float16)))
add("cast_to_float16", "types", False, "Cast to float16 with a float16 scale: equivalent if rewritten "
    "(same per-element ops) but the documented rule says Cast to float.", m, i)

m, i = base(to=TensorProto.DOUBLE, outputs=[("emb", TensorProto.DOUBLE, None)], inits=base_inits(s=SROW.astype(np.float64)))
add("cast_to_double", "types", False, "Cast to double with a double scale (outside 'Cast converts it "
    "to float').", m, i)

m, i = base(to=TensorProto.INT32, outputs=[("emb", TensorProto.INT32, None)], inits=base_inits(s=np.arange(1, ROWS + 1, dtype=np.int32).reshape(ROWS, 1)))
add("cast_to_int32", "types", False, "Cast to int32 with an int32 scale: integer Mul, not a float "
    "dequantization.", m, i)

m, i = base(inits=base_inits(w=W8.astype(np.int16) * 3))
add("wq_int16", "types", False, "W_q is int16, not int8/uint8.", m, i)

m, i = base(inits=base_inits(w=W8.astype(np.float32) / 7))
add("wq_float_cast_noop", "types", False, "W_q is already float; the Cast is a no-op, nothing is "
    "quantized.", m, i)

special = np.array([-0.0, 1e-45, np.inf, -np.inf, 3e38, 1.0, -1.0, 0.0, 1.17549435e-38, 0.1, 7.0, 0.0],
                   np.float32).reshape(ROWS, 1)
special.view(np.uint32)[7, 0] = 0x7FC01234  # quiet NaN with a payload
m, i = base(inits=base_inits(s=special), inputs=inp(shape=(12,), values=list(range(12))))
add("scale_special_floats", "types", True, "Per-row scales -0, denormal, +-inf, 3e38 (overflows to "
    "inf), a NaN with payload; W_q has zeros (0*inf=NaN). Outputs must stay bit-identical.", m, i)

# ============================================================================= structure
m, i = base(extra_nodes=[helper.make_node("Shape", ["W_q"], ["w_shape"]),
                         helper.make_node("Mul", ["scale", "scale"], ["scale_sq"])],
            outputs=[("emb", F, None), ("w_shape", I64, None), ("scale_sq", F, None)])
add("wq_and_scale_used_elsewhere", "structure", True, "W_q also feeds Shape and the scale another "
    "Mul; the rewrite must keep both initializers.", m, i)

m, i = base(outputs=[("emb", F, None), ("W_q", TensorProto.INT8, None), ("scale", F, None)])
add("initializers_are_graph_outputs", "structure", True, "W_q and scale are also graph outputs "
    "(their values are unchanged by the rewrite, which must keep them).", m, i)

ids2 = inp("ids2", (4,), [1, 2, 3, 11])
m = make(pattern() + pattern(C="W_f2", M="table2", G="emb2", I="ids2", tag="2"), base_inits(),
         {**inp(), **ids2}, [("emb", F, None), ("emb2", F, None)])
add("two_patterns_shared_weights", "structure", True, "Two Cast/Mul/Gather chains over the same W_q "
    "and scale; both can be rewritten but their new tensor names must not collide.", m, {**inp(), **ids2})

m = make(pattern() + pattern(C="W_f2", M="table2", G="emb2", I="ids2", tag="2"), base_inits(),
         {**inp(), **ids2}, [("emb", F, None), ("emb2", F, None)])
for n in m.graph.node:
    n.name = ""
add("two_patterns_empty_node_names", "structure", True, "As two_patterns_shared_weights, with every "
    "node name explicitly set to the empty string (field present, length 0).", m, {**inp(), **ids2})

wb = rng.integers(0, 256, size=(6, 4)).astype(np.uint8)
m = make(pattern() + pattern(W="W_b", S="scale_b", C="W_bf", M="table_b", G="emb_b", I="ids_b", tag="_b"),
         base_inits() + base_inits("W_b", "scale_b", wb, np.array([0.5], np.float32)),
         {**inp(), **inp("ids_b", (3,), [5, 0, -6])}, [("emb", F, None), ("emb_b", F, None)])
add("two_independent_tables", "structure", True, "Two separate tables (int8 per-row, uint8 single "
    "scale).", m, {**inp(), **inp("ids_b", (3,), [5, 0, -6])})

m, i = base(value_info=[helper.make_tensor_value_info("W_f", F, [ROWS, DIM]),
                        helper.make_tensor_value_info("table", F, [ROWS, DIM]),
                        helper.make_tensor_value_info("emb", F, [2, 3, DIM])])
add("value_info_for_removed", "structure", True, "value_info describes W_f and table [12,8]; after "
    "the rewrite they no longer exist (stale entries must not be attached to new tensors).", m, i)

m, i = base(value_info=[helper.make_tensor_value_info("table", F, [2 ** 62, DIM])])
add("value_info_huge_dim", "structure", True, "value_info declares table as [2^62, 8] (10-byte "
    "varint dim); onnxruntime only warns about the mismatch.", m, i)

SUFFIXES = ["_q", "_rows", "_row", "_gathered", "_gather", "_Gather", "_deq", "_dq", "_dequant",
            "_scale", "_scales", "_cast", "_Cast", "_mul", "_f", "_float", "/rows", "/gather",
            "/Gather", "/Cast", "/Mul", ".rows", ":0", "_0", "_1", "__rows", "__gather", "__scale",
            "__cast", "_lode", "__lode", "_lode_rows", "_rewritten", "_idx", "_ids", "_row_scale",
            "_q_rows", "_gathered_q", "_gathered_scale", "_scale_rows", "_sel", "_selected"]
TRAP = [b + s for b in ("W_q", "scale", "W_f", "table", "emb", "ids") for s in SUFFIXES]
vi = [helper.make_tensor_value_info(n, TensorProto.STRING, [7, 7, 7]) for n in TRAP]
m, i = base(value_info=vi)
add("value_info_name_traps", "structure", True, "value_info declares 252 non-existent tensors named "
    "<pattern name><likely suffix> as string [7,7,7]; a new tensor reusing one would fail type "
    "checking (fresh names or bailing both acceptable).", m, i)

chain, prev = [], "ids"
for n in TRAP:
    chain.append(helper.make_node("Identity", [prev], [n], name=n))
    prev = n
chain.append(helper.make_node("Identity", [prev], ["ids_echo"]))
m, i = base(extra_nodes=chain, outputs=[("emb", F, None), ("ids_echo", I64, None)])
add("names_with_likely_suffixes", "structure", True, "252 real tensors and nodes named <pattern "
    "name><likely suffix> (an Identity chain on ids); new names must be fresh, or the rewrite bails.", m, i)

u = dict(W="重み/W_q🙂", S="échelle\u200b", C="Cast出力", M="テーブル", G="埋め込み", I="ids")
m, i = base(inits=base_inits(u["W"], u["S"]), outputs=[("埋め込み", F, None)], **u)
add("names_non_ascii", "encoding", True, "Tensor names with multi-byte UTF-8 (CJK, emoji, accents, "
    "zero-width space).", m, i)

cond_g = lambda sign: helper.make_graph(
    [helper.make_node("Gather", ["table", "ids"], ["g" + sign]),
     helper.make_node("Neg" if sign == "n" else "Identity", ["g" + sign], ["b" + sign])], "branch_" + sign,
    [], [helper.make_tensor_value_info("b" + sign, F, None)])
flag = {"flag": {"dtype": "bool", "shape": [], "values": [True]}}
m, i = base(inputs={**inp(), **flag}, outputs=[("emb", F, None), ("branch", F, None)],
            extra_nodes=[helper.make_node("If", ["flag"], ["branch"], then_branch=cond_g("p"), else_branch=cond_g("n"))])
add("if_subgraph_reads_table", "structure", False, "An If node's branches read the dequantized table "
    "from the outer scope (an implicit use invisible in the main graph's node inputs).", m, i)

sub = lambda s: helper.make_graph([helper.make_node("Shape", ["W_q"], ["s" + s])], "b" + s, [],
                                  [helper.make_tensor_value_info("s" + s, I64, None)])
m, i = base(inputs={**inp(), **flag}, outputs=[("emb", F, None), ("wshape", I64, None)],
            extra_nodes=[helper.make_node("If", ["flag"], ["wshape"], then_branch=sub("t"), else_branch=sub("e"))])
add("if_subgraph_reads_wq", "structure", False, "The canonical pattern plus an If whose branches read "
    "W_q: the model has subgraphs, which the rewrite does not handle.", m, i)

loop_body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                               helper.make_node("Gather", ["table", "ids"], ["lg"])], "loop_body",
                              [helper.make_tensor_value_info("iter", I64, []),
                               helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                               helper.make_tensor_value_info("lg", F, None)])
trip = numpy_helper.from_array(np.array(2, np.int64), "trip")
m, i = base(inits=base_inits() + [trip], inputs={**inp(), **flag}, outputs=[("emb", F, None), ("scan_out", F, None)],
            extra_nodes=[helper.make_node("Loop", ["trip", "flag"], ["scan_out"], body=loop_body)])
add("loop_body_reads_table", "structure", False, "A Loop body gathers from the outer-scope table "
    "every iteration (scan output [2,2,3,8]).", m, i)


def external(tensor, fname, payload):
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for k, v in (("location", fname), ("offset", "0"), ("length", str(len(payload)))):
        e = tensor.external_data.add()
        e.key, e.value = k, v


m, i = base()
external(m.graph.initializer[0], "external_wq.bin", W8.tobytes())
add("external_data_wq", "structure", False, "W_q's data is in external_wq.bin next to the model "
    "(data_location=EXTERNAL).", m, i, files={"external_wq.bin": W8.tobytes()})

m, i = base()
external(m.graph.initializer[1], "external_scale.bin", SROW.tobytes())
add("external_data_scale", "structure", False, "Only the scale's data is external "
    "(external_scale.bin).", m, i, files={"external_scale.bin": SROW.tobytes()})

sp = helper.make_sparse_tensor(numpy_helper.from_array(SROW.ravel(), "scale"),
                               numpy_helper.from_array(np.arange(ROWS, dtype=np.int64), "scale_idx"), [ROWS, 1])
m, i = base(inits=[numpy_helper.from_array(W8, "W_q")], sparse=[sp])
add("scale_sparse_initializer", "structure", False, "The scale is a sparse_initializer (GraphProto "
    "field 15), not a dense initializer.", m, i)

# a second `graph` field: protobuf merges the two (repeated fields concatenated)
m, i = base()
g = m.graph
ga, gb = onnx.GraphProto(), onnx.GraphProto()
ga.node.extend(g.node[:2]); ga.initializer.extend(g.initializer[:1]); ga.name = "part_a"
gb.node.extend(g.node[2:]); gb.initializer.extend(g.initializer[1:]); gb.input.extend(g.input)
gb.output.extend(g.output); gb.name = "dq_embed"
mf, ge, gf = model_graph(m.SerializeToString())
idx = mf.index(ge)
mf[idx:idx + 1] = [[7, 2, ga.SerializeToString()], [8, 2, submsgs(mf, 8)[0][2]], [7, 2, gb.SerializeToString()]]
add("second_graph_field_split", "structure", False, "Raw surgery: ModelProto.graph appears twice "
    "(Cast+Mul+W_q in the first, Gather+scale+I/O in the second, opset_import between); protobuf "
    "merges them into the full pattern.", pb_emit(mf), i)

m, i = base()
gb = onnx.GraphProto()
gb.node.extend([helper.make_node("Identity", ["table"], ["table_copy"])])
gb.output.extend([helper.make_tensor_value_info("table_copy", F, None)])
mf = pb_parse(m.SerializeToString()) + [[7, 2, gb.SerializeToString()]]
add("second_graph_field_adds_consumer", "structure", False, "Raw surgery: a complete pattern in the "
    "first graph field; a second graph field (at the end) adds a consumer of the table and an output, "
    "so after merging the table is used twice.", pb_emit(mf), i)

m, i = base()
mf = pb_parse(m.SerializeToString())
mf.insert(0, [7, 2, b""])
add("second_graph_field_empty", "structure", False, "Raw surgery: an empty graph field (length 0) "
    "precedes the real one; merging changes nothing but there are two graph fields.", pb_emit(mf), i)

# ============================================================================= encoding
m, i = base(axis=0)
mf, ge, gf = model_graph(m.SerializeToString())
gat_e, gat_f = node_by_output(gf, "emb")
for a in [e for e in gat_f if e[0] == 5]:
    a[2] = pb_emit(pb_parse(a[2]) + unknown_fields())
gat_e[2] = pb_emit(gat_f + unknown_fields())
we, wfields = tensor_by_name(gf, "W_q")
we[2] = pb_emit(unknown_fields() + wfields)
ge[2] = pb_emit(gf[:1] + unknown_fields() + gf[1:])
mf = unknown_fields() + mf + unknown_fields(98)
add("unknown_fields_everywhere", "encoding", True, "Raw surgery: unknown fields 99/1000/536870911 "
    "with wire types 0,1,2,5 in ModelProto, GraphProto, the Gather NodeProto, its axis AttributeProto "
    "and W_q's TensorProto; those in kept messages must survive.", pb_emit(mf), i)

m, i = base()
mf, ge, gf = model_graph(m.SerializeToString())
group = key(99, 3) + key(1, 0) + enc_varint(5) + key(2, 2) + enc_varint(3) + b"abc" + key(99, 4)
gat_e, gat_f = node_by_output(gf, "emb")
gat_e[2] = pb_emit(gat_f + [[None, None, group]])
ge[2] = pb_emit(gf + [[None, None, group]])
add("unknown_group_fields", "encoding", True, "Raw surgery: an unknown field 99 encoded as a group "
    "(wire types 3/4, with nested fields) in GraphProto and the Gather node.",
    pb_emit(mf + [[None, None, group]]), i)


def packed_dims(tfields, split=False):
    dims = [e[2] for e in tfields if e[0] == 1]
    rest = [e for e in tfields if e[0] != 1]
    if split:  # first dim packed, the rest unpacked, data_type in between
        return [[1, 2, b"".join(enc_varint(d) for d in dims[:1])]] + rest[:1] + \
            [[1, 0, d] for d in dims[1:]] + rest[1:]
    return [[1, 2, b"".join(enc_varint(d) for d in dims)]] + rest


m, i = base()
mf, ge, gf = model_graph(m.SerializeToString())
for e in gf:
    if e[0] == 5:
        e[2] = pb_emit(packed_dims(pb_parse(e[2])))
ge[2] = pb_emit(gf)
add("dims_packed", "encoding", True, "Raw surgery: TensorProto.dims (declared unpacked) written "
    "packed (one length-delimited field) for W_q and scale.", pb_emit(mf), i)

m, i = base()
mf, ge, gf = model_graph(m.SerializeToString())
for e in gf:
    if e[0] == 5:
        e[2] = pb_emit(packed_dims(pb_parse(e[2]), split=True))
ge[2] = pb_emit(gf)
add("dims_split_packed_unpacked", "encoding", True, "Raw surgery: dims split: first dim packed, then "
    "data_type, then the second dim unpacked; scale is still [12,1] (reading one form only gives [12]).",
    pb_emit(mf), i)

m, i = base()
mf, ge, gf = model_graph(m.SerializeToString())
for e in gf:
    if e[0] in (1, 5):
        e[2] = pb_emit(pb_parse(e[2]), pad=2)
ge[2] = pb_emit(gf, pad=2)
add("non_minimal_varints", "encoding", True, "Raw surgery: every length prefix and varint value "
    "(dims, data_type, ir_version) padded with redundant 0x80 bytes; tags stay minimal.",
    pb_emit(mf, pad=2), i)

m, i = base(inits=[helper.make_tensor("W_q", TensorProto.INT8, [ROWS, DIM], W8.ravel().tolist()),
                   helper.make_tensor("scale", F, [ROWS, 1], SROW.ravel().tolist())])
add("typed_data_fields", "encoding", True, "W_q stored in int32_data and the scale in float_data "
    "(no raw_data).", m, i)

m, i = base()
mf, ge, gf = model_graph(m.SerializeToString())
mul_e, mul_f = node_by_output(gf, "table")
for e in mul_f:
    if e[0] == 4:
        e[2] = b"Mul"
mul_f.append([4, 2, b"Add"])
mul_e[2] = pb_emit(mul_f)
ge[2] = pb_emit(gf)
add("op_type_repeated_last_wins", "encoding", False, "Raw surgery: the 'Mul' node has op_type "
    "written twice, 'Mul' then 'Add'; protobuf keeps the last, so it is an Add.", pb_emit(mf), i)

m, i = base(axis=0, inputs=inp(values=[0, 7, 3, 3, 1, 6]))
mf, ge, gf = model_graph(m.SerializeToString())
gat_e, gat_f = node_by_output(gf, "emb")
for a in gat_f:
    if a[0] == 5:
        af = pb_parse(a[2])
        af.append([3, 0, 1])
        a[2] = pb_emit(af)
gat_e[2] = pb_emit(gat_f)
ge[2] = pb_emit(gf)
add("axis_repeated_last_wins", "encoding", False, "Raw surgery: Gather's axis AttributeProto has i "
    "written twice, 0 then 1; protobuf keeps the last, so the Gather is on axis 1.", pb_emit(mf), i)

m, i = base()
mf, ge, gf = model_graph(m.SerializeToString())
cast_e, cast_f = node_by_output(gf, "W_f")
for a in cast_f:
    if a[0] == 5:
        af = pb_parse(a[2])
        af.insert(0, [3, 0, TensorProto.DOUBLE])
        a[2] = pb_emit(af)
cast_e[2] = pb_emit(cast_f)
ge[2] = pb_emit(gf)
add("cast_to_repeated_last_wins", "encoding", True, "Raw surgery: Cast's 'to' has i written twice, "
    "DOUBLE then FLOAT; the effective value is FLOAT (a copied attribute must keep that meaning).",
    pb_emit(mf), i)

m, i = base()
m.graph.doc_string = "x"
mf, ge, gf = model_graph(m.SerializeToString())
for e in gf:
    if e[0] == 10:
        e[2] = b"bad utf-8: \xff\xfe\xc3("
ge[2] = pb_emit(gf)
add("invalid_utf8_doc_string", "encoding", False, "Raw surgery: GraphProto.doc_string holds invalid "
    "UTF-8; proto2 C++ parsing accepts it; a rewrite that decodes strings strictly should bail.",
    pb_emit(mf), i)

# ============================================================================= malformed
good = base()[0].SerializeToString()
mi = inp()
mf, ge, gf = model_graph(good)
graph_off = good.index(key(7, 2) + enc_varint(len(ge[2])))
raw_w = W8.tobytes()
add("truncated_in_raw_data", "malformed", False, "The file cut in the middle of W_q's raw_data.",
    good[:good.index(raw_w) + 40], mi, loads=False)
add("truncated_in_length_varint", "malformed", False, "The file cut after the graph tag and the first "
    "byte of its two-byte length varint.", good[:graph_off + 2], mi, loads=False)
add("empty_file", "malformed", False, "Zero bytes: an empty ModelProto (no graph).", b"", mi, loads=False)
add("varint_too_long", "malformed", False, "An 11-byte varint (ten 0xFF continuation bytes) appended "
    "as a tag.", good + b"\xff" * 10 + b"\x01", mi, loads=False)
gl = len(ge[2])
add("length_past_end", "malformed", False, "The graph field's length prefix is 1000 larger than the "
    "bytes that follow.", good.replace(key(7, 2) + enc_varint(gl), key(7, 2) + enc_varint(gl + 1000), 1),
    mi, loads=False)
# nested: last node's length grows by 3 so it runs past the end of the enclosing graph
mf2, ge2, gf2 = model_graph(good)
nodes_b = b"".join(pb_emit([e]) for e in gf2 if e[0] == 1)
last = submsgs(gf2, 1)[-1]
bad_node = key(1, 2) + enc_varint(len(last[2]) + 3) + last[2]
gbytes = pb_emit(gf2)
old_node = pb_emit([last])
gbytes_bad = gbytes.replace(old_node, bad_node, 1)
mf2[mf2.index(ge2)] = [None, None, key(7, 2) + enc_varint(len(gbytes_bad)) + gbytes_bad]
add("nested_length_past_parent", "malformed", False, "The Gather node's length prefix runs 3 bytes "
    "past the end of its enclosing GraphProto (the file itself has the bytes).", pb_emit(mf2), mi, loads=False)
add("wire_type_7", "malformed", False, "A field with wire type 7 (does not exist) appended.",
    good + key(99, 7) + b"\x00", mi, loads=False)
add("unmatched_end_group", "malformed", False, "An end-group tag (wire type 4) with no start group "
    "at the top level.", good + key(99, 4), mi, loads=False)
add("field_number_zero", "malformed", False, "A tag with field number 0 (invalid) inserted before "
    "the graph.", good[:graph_off] + b"\x00\x00" + good[graph_off:], mi, loads=False)
mf3 = pb_parse(good)
for e in mf3:
    if e[0] == 7:
        e[1], e[2] = 0, 1
add("graph_wrong_wire_type", "malformed", False, "ModelProto.graph (field 7) encoded as a varint: "
    "protobuf keeps it as an unknown field, so the model has no graph.", pb_emit(mf3), mi, loads=False)
mf4, ge4, gf4 = model_graph(good)
mul_e, mul_f = node_by_output(gf4, "table")
for e in mul_f:
    if e[0] == 4:
        e[1], e[2] = 5, b"Mul\x00"
mul_e[2] = pb_emit(mul_f)
ge4[2] = pb_emit(gf4)
add("op_type_wrong_wire_type", "malformed", False, "The Mul node's op_type written as fixed32 "
    "'Mul\\0': protobuf treats it as unknown, the node has no op_type.", pb_emit(mf4), mi, loads=False)
mh = base()[0]
del mh.graph.initializer[0].dims[:]
mh.graph.initializer[0].dims.extend([2 ** 62, DIM])
add("huge_dims_initializer", "malformed", False, "W_q claims dims [2^62, 8] but carries 96 bytes "
    "(rows*dim overflows 64-bit byte counts).", mh, mi, loads=False)
add("truncated_at_field_boundary", "malformed", False, "The file ends right after the graph field: "
    "valid protobuf, but opset_import is gone.", good[:graph_off + len(key(7, 2) + enc_varint(gl)) + gl],
    mi, loads=False)
add("garbage_bytes", "malformed", False, "A gzip header followed by random bytes.",
    b"\x1f\x8b\x08\x00" + rng.integers(0, 256, 64).astype(np.uint8).tobytes(), mi, loads=False)


# ============================================================================= writing / checking
def np_inputs(inputs):
    return {n: np.array(s["values"], dtype=np.dtype(s["dtype"] if s["dtype"] != "float32" else np.float32))
            .reshape(s["shape"]) for n, s in inputs.items()}


def naive_rewrite(model):
    """Rewrites every Gather(Mul(Cast(init), init)) with no safety checks (keeps Cast/Mul)."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    done = 0
    for k, n in enumerate(list(g.node)):
        if n.op_type != "Gather" or n.input[0] not in prod:
            continue
        m = prod[n.input[0]]
        if m.op_type != "Mul":
            continue
        for ci, si in ((0, 1), (1, 0)):
            c = prod.get(m.input[ci])
            if c is not None and c.op_type == "Cast" and c.input[0] in inits and m.input[si] in inits:
                break
        else:
            continue
        s = m.input[si]
        out = n.output[0]
        attrs = list(n.attribute)
        new = [helper.make_node("Gather", [c.input[0], n.input[1]], [out + "__ref_wq"]),
               helper.make_node("Cast", [out + "__ref_wq"], [out + "__ref_f"])]
        new[0].attribute.extend(attrs)
        new[1].attribute.extend(c.attribute)
        if int(np.prod(inits[s].dims)) == 1:
            sc = s
        else:
            sc = out + "__ref_s"
            new.append(helper.make_node("Gather", [s, n.input[1]], [sc]))
            new[-1].attribute.extend(attrs)
        new.append(helper.make_node("Mul", [out + "__ref_f", sc], [out]))
        g.node.remove(n)
        g.node.extend(new)
        done += 1
    return done


def run(ort, data, inputs, path=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    sess = ort.InferenceSession(path or data, so, providers=["CPUExecutionProvider"])
    return sess.run(None, np_inputs(inputs))


def check(out_dir):
    import onnxruntime as ort
    ort.set_default_logger_severity(4)
    cases = json.load(open(os.path.join(out_dir, "cases.json")))
    bad = 0
    for c in cases:
        path = os.path.join(out_dir, c["case"] + ".onnx")
        data = open(path, "rb").read()
        if c["class"] == "malformed" and not c.get("loads", True):
            try:
                run(ort, data, c["inputs"], path)
                print(f"FAIL {c['case']}: expected onnxruntime to reject it, but it loaded")
                bad += 1
            except Exception as e:
                print(f"ok   {c['case']:36s} rejected: {str(e).splitlines()[0][:70]}")
            continue
        try:
            outs = run(ort, data, c["inputs"], path)
        except Exception as e:
            print(f"FAIL {c['case']}: {str(e).splitlines()[0][:200]}")
            bad += 1
            continue
        note = ""
        try:
            m = onnx.load(path)
            n = naive_rewrite(m)
            if n:
                try:
                    outs2 = run(ort, m.SerializeToString(), c["inputs"])
                    same = len(outs) == len(outs2) and all(
                        a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
                        for a, b in zip(outs, outs2))
                    note = "naive rewrite: " + ("identical" if same else "DIFFERENT output")
                except Exception as e:
                    same = False
                    note = "naive rewrite: fails (" + str(e).splitlines()[0][:60] + ")"
            else:
                same, note = None, "naive rewrite: no match"
            if c["expect_rewrite"] and not same:
                print(f"FAIL {c['case']}: expect_rewrite but reference rewrite not identical ({note})")
                bad += 1
                continue
        except Exception as e:
            note = f"(reference skipped: {str(e)[:50]})"
        shapes = " ".join(str(list(o.shape)) for o in outs)
        print(f"ok   {c['case']:36s} rewrite={str(c['expect_rewrite']):5s} outputs {shapes}  {note}")
    by = {}
    for c in cases:
        by[c["class"]] = by.get(c["class"], 0) + 1
    print(f"{len(cases)} cases {by}; {bad} failures")
    return bad == 0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    out_dir = args[0]
    os.makedirs(out_dir, exist_ok=True)
    names = [e["case"] for e, _, _ in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    for e, b, files in CASES:
        with open(os.path.join(out_dir, e["case"] + ".onnx"), "wb") as f:
            f.write(b)
        for fn, payload in files.items():
            with open(os.path.join(out_dir, fn), "wb") as f:
                f.write(payload)
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump([e for e, _, _ in CASES], f, indent=1, ensure_ascii=False)
    print(f"wrote {len(CASES)} cases to {out_dir}")
    if "--check" in sys.argv[1:]:
        sys.exit(0 if check(out_dir) else 1)


if __name__ == "__main__":
    main()
