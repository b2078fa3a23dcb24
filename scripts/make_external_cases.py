#!/usr/bin/env python3
"""Adversarial fixtures for the ONNX "externalize large initializers" rewrite.

Usage:  make_external_cases.py OUT_DIR [--check]

Writes OUT_DIR/<case>.onnx (plus a side file for the few cases whose
subgraph / Constant tensors are already external, named <case>.side.bin) and
OUT_DIR/cases.json.  Every model is built byte by byte (own protobuf writer),
so field order, duplicates, unknown fields and broken encodings are exact.

--check: loads every case with onnxruntime from its file, confirms `loads`,
runs it, and for every `externalize` case applies two reference
externalizations -- a naive one through the onnx library and a careful
byte-level one that follows the documented rule literally -- reloads them from
file and requires bit-identical outputs.  For the "hazard" cases (see HAZARDS)
it instead confirms that the literal rule *does* break ONNX Runtime, and that
keeping the named tensors inline fixes it.  The byte-level reference must also
agree with every `externalize` / `decline` expectation.

Run with PYTHONPATH=/work/main/.lode-tools/py
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np

# ----------------------------------------------------------------------------
# protobuf writer
# ----------------------------------------------------------------------------


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def nm_varint(n, length):
    """Non-minimal varint of exactly `length` bytes (n must fit)."""
    out = bytearray()
    for _ in range(length - 1):
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    assert n < 128
    out.append(n)
    return bytes(out)


def tag(f, wt):
    return varint((f << 3) | wt)


def fv(f, v):
    return tag(f, 0) + varint(v)


def fl(f, b):
    if isinstance(b, str):
        b = b.encode()
    return tag(f, 2) + varint(len(b)) + b


def f32(f, b4):
    assert len(b4) == 4
    return tag(f, 5) + b4


def f64(f, b8):
    assert len(b8) == 8
    return tag(f, 1) + b8


FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL = 1, 2, 3, 4, 5, 6, 7, 8, 9
FLOAT16, DOUBLE, UINT32, UINT64 = 10, 11, 12, 13
BFLOAT16, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, UINT4, INT4 = 16, 17, 18, 19, 20, 21, 22


def packed(f, vals):
    return fl(f, b"".join(varint(v) for v in vals))


def T(name, dt, dims, raw=None, pre=b"", post=b"", packed_dims=False):
    """TensorProto: pre, dims, data_type, name, raw_data, post."""
    b = pre
    if packed_dims and dims:
        b += packed(1, dims)
    else:
        b += b"".join(fv(1, d) for d in dims)
    b += fv(2, dt)
    if name is not None:
        b += fl(8, name)
    if raw is not None:
        b += fl(9, raw)
    return b + post


def SS(k, v):
    return fl(1, k) + fl(2, v)


def EXT(location, offset, length):
    return fl(13, SS("location", location)) + fl(13, SS("offset", str(offset))) + \
        fl(13, SS("length", str(length))) + fv(14, 1)


def shape(dims):
    return b"".join(fl(1, fv(1, d) if isinstance(d, int) else fl(2, d)) for d in dims)


def VI(name, elem, dims=None):
    tt = fv(1, elem) + (fl(2, shape(dims)) if dims is not None else b"")
    return fl(1, name) + fl(2, fl(1, tt))


def A(name, type_, payload):
    return fl(1, name) + fv(20, type_) + payload


def Ai(name, v):
    return A(name, 2, fv(3, v))


def At(name, tensor):
    return A(name, 4, fl(5, tensor))


def Ag(name, graph):
    return A(name, 5, fl(6, graph))


def Nd(op, ins, outs, attrs=(), name=None, domain=None, post=b""):
    b = b"".join(fl(1, i) for i in ins) + b"".join(fl(2, o) for o in outs)
    if name:
        b += fl(3, name)
    b += fl(4, op)
    if domain is not None:
        b += fl(7, domain)
    b += b"".join(fl(5, a) for a in attrs)
    return b + post


def G(nodes=(), inits=(), inputs=(), outputs=(), name="g", extra=b"", sparse=(), order=None):
    parts = {
        "node": b"".join(fl(1, n) for n in nodes),
        "name": fl(2, name),
        "init": b"".join(fl(5, t) for t in inits),
        "sparse": b"".join(fl(15, s) for s in sparse),
        "input": b"".join(fl(11, v) for v in inputs),
        "output": b"".join(fl(12, v) for v in outputs),
    }
    order = order or ["node", "name", "init", "sparse", "input", "output"]
    return b"".join(parts[k] for k in order) + extra


def OP(domain, ver):
    return fl(8, fl(1, domain) + fv(2, ver))


def M(graph, ir=10, opsets=(("", 21),), pre=b"", mid=b"", post=b"", graph_field=None):
    gf = fl(7, graph) if graph_field is None else graph_field
    return fv(1, ir) + fl(2, "lode-adversarial") + pre + gf + mid + \
        b"".join(OP(d, v) for d, v in opsets) + post


# ----------------------------------------------------------------------------
# careful byte-level reference of the documented rule
# ----------------------------------------------------------------------------


class Decline(Exception):
    pass


def rd_varint(b, p, end):
    v = 0
    for k in range(10):
        if p >= end:
            raise Decline("truncated varint")
        c = b[p]
        p += 1
        v |= (c & 0x7F) << (7 * k)
        if not c & 0x80:
            return v & ((1 << 64) - 1), p
    raise Decline("varint longer than 10 bytes")


def parse_fields(b, start, end):
    out = []
    p = start
    while p < end:
        s = p
        key, p = rd_varint(b, p, end)
        fn, wt = key >> 3, key & 7
        if fn == 0 or fn >= (1 << 29):
            raise Decline("bad field number")
        if wt == 0:
            v, p = rd_varint(b, p, end)
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            if p + n > end:
                raise Decline("truncated fixed")
            v = bytes(b[p:p + n])
            p += n
        elif wt == 2:
            n, p = rd_varint(b, p, end)
            if n > end - p:
                raise Decline("length past end")
            v = (p, p + n)
            p += n
        else:
            raise Decline("wire type %d" % wt)
        out.append((fn, wt, v, s, p))
    return out


def careful_externalize(b, min_bytes, location, lenient=False):
    """Literal reading of the rule. Returns (model, data) or None.

    lenient=True follows protobuf exactly where the rule is silent: a known
    field number with the wrong wire type is an unknown field (copied), and
    data_location is read as ORT's int32 enum."""
    try:
        top = parse_fields(b, 0, len(b))
        gs = [f for f in top if f[0] == 7 and (f[1] == 2 or not lenient)]
        if len(gs) != 1 or gs[0][1] != 2:
            raise Decline("graph count")
        gfields = parse_fields(b, *gs[0][2])
        data = bytearray()
        any_moved = False
        new_graph = bytearray()
        for fn, wt, v, s, e in gfields:
            if fn != 5 or (lenient and wt != 2):
                new_graph += b[s:e]
                continue
            if wt != 2:
                raise Decline("initializer with wrong wire type")
            tf = parse_fields(b, *v)
            raw = None
            dl = 0
            for tfn, twt, tv, ts, te in tf:
                if lenient and (twt != (0 if tfn == 14 else 2)) and tfn in (9, 13, 14):
                    continue
                if tfn == 9:
                    if twt != 2:
                        raise Decline("raw_data wire type")
                    raw = tv
                elif tfn == 13:
                    raise Decline("already has external_data")
                elif tfn == 14:
                    if twt != 0:
                        raise Decline("data_location wire type")
                    dl = tv
                    if lenient:
                        dl &= 0xFFFFFFFF
            if dl != 0:
                raise Decline("data_location not DEFAULT")
            if raw is None or raw[1] - raw[0] < min_bytes:
                new_graph += b[s:e]
                continue
            off = (len(data) + 4095) // 4096 * 4096
            data += b"\0" * (off - len(data))
            data += b[raw[0]:raw[1]]
            nt = b"".join(b[ts:te] for tfn, twt, tv, ts, te in tf if not (tfn == 9 and twt == 2))
            nt += EXT(location, off, raw[1] - raw[0])
            new_graph += fl(5, nt)
            any_moved = True
        if not any_moved:
            raise Decline("nothing large enough")
        s, e = gs[0][3], gs[0][4]
        return bytes(b[:s]) + fl(7, bytes(new_graph)) + bytes(b[e:]), bytes(data)
    except Decline:
        return None


def onnx_externalize(model_bytes, min_bytes, location, keep_inline=()):
    """Naive reference through the onnx library."""
    import onnx
    m = onnx.ModelProto()
    m.ParseFromString(model_bytes)
    data = bytearray()
    for t in m.graph.initializer:
        if t.name in keep_inline:
            continue
        if t.HasField("raw_data") and len(t.raw_data) >= min_bytes:
            off = (len(data) + 4095) // 4096 * 4096
            data += b"\0" * (off - len(data))
            data += t.raw_data
            n = len(t.raw_data)
            t.ClearField("raw_data")
            for k, v in (("location", location), ("offset", str(off)), ("length", str(n))):
                ent = t.external_data.add()
                ent.key = k
                ent.value = v
            t.data_location = onnx.TensorProto.EXTERNAL
    return m.SerializeToString(), bytes(data)


# ----------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------

CASES = []
HAZARDS = {}   # case -> tensor names a correct implementation must keep inline


def inp(dtype, shape_, values):
    return {"dtype": dtype, "shape": list(shape_), "values": list(values)}


def case(name, cls, expect, min_bytes, why, loads, model, inputs=None, side=None,
         hazard_keep=None):
    assert expect in ("externalize", "decline", "either")
    CASES.append(dict(case=name, cls=cls, expect=expect, min_bytes=min_bytes, why=why,
                      loads=loads, model=model, inputs=inputs or {}, side=side or {}))
    if hazard_keep is not None:
        HAZARDS[name] = hazard_keep


RNG = np.random.default_rng(20240611)
Wf = RNG.standard_normal((32, 4)).astype(np.float32)   # 512 bytes
WB = Wf.tobytes()
IDX = np.array([0, 17, 31], np.int64)
I_IN = {"i": inp("int64", [3], IDX.tolist())}
VI_I = VI("i", INT64, [3])


def gather_w(tensor=None, extra_inits=(), gextra=b"", **mk):
    tensor = T("W", FLOAT, [32, 4], WB) if tensor is None else tensor
    g = G([Nd("Gather", ["W", "i"], ["y"])], [tensor, *extra_inits], [VI_I], [VI("y", FLOAT)],
          extra=gextra)
    return M(g, **mk)


def normal(shape_, dtype=np.float32, scale=1.0):
    return (RNG.standard_normal(shape_) * scale).astype(dtype)


def build_scope():
    c = "scope"
    m = gather_w()
    case("scope_exact_min", c, "externalize", 512,
         "raw_data is exactly min_bytes long: 'at least' includes equality", True, m, I_IN)
    case("scope_one_over_min", c, "decline", 513,
         "the only raw_data is one byte short of min_bytes", True, m, I_IN)

    F = normal((8, 4))
    Z = T("Z", FLOAT, [0, 4], b"")
    nodes = [Nd("Concat", ["W", "F", "Z"], ["c"], [Ai("axis", 0)]), Nd("Gather", ["c", "i"], ["y"])]
    g = G(nodes, [T("W", FLOAT, [32, 4], WB), T("F", FLOAT, [8, 4], post=fl(4, F.tobytes())), Z],
          [VI("i", INT64, [3])], [VI("y", FLOAT)])
    case("scope_min_zero_typed_and_empty", c, "externalize", 0,
         "min_bytes 0: W and the present-but-empty raw_data of zero-size Z qualify; F has no raw_data "
         "(float_data only) and must stay inline", True, M(g),
         {"i": inp("int64", [3], [1, 33, 39])})

    nodes = [Nd("Add", ["x", "S"], ["a"]), Nd("Concat", ["a", "Z"], ["y"], [Ai("axis", 0)])]
    g = G(nodes, [T("S", FLOAT, [], np.float32(1.25).tobytes()), T("Z", FLOAT, [0], b"")],
          [VI("x", FLOAT, [3])], [VI("y", FLOAT)])
    case("scope_min_one_scalar", c, "externalize", 1,
         "min_bytes 1: the 4-byte scalar S moves, the empty raw_data of Z (0 < 1) does not", True,
         M(g), {"x": inp("float32", [3], [0.5, -2.0, 3.0])})

    D = normal((16,), np.float64)
    I6 = np.arange(16, dtype=np.int64) * 3 - 7
    H16 = normal((16,), np.float16)
    nodes = [Nd("Gather", ["F", "i"], ["y"]), Nd("Gather", ["D", "i"], ["d"]),
             Nd("Gather", ["I", "i"], ["y2"]), Nd("Gather", ["H", "i"], ["h"]),
             Nd("Cast", ["d"], ["y3"], [Ai("to", FLOAT)]), Nd("Cast", ["h"], ["y4"], [Ai("to", FLOAT)])]
    inits = [T("F", FLOAT, [16], post=packed(4, []) + fl(4, normal((16,)).tobytes())),
             T("D", DOUBLE, [16], post=fl(10, D.tobytes())),
             T("I", INT64, [16], post=packed(7, [int(v) & (2**64 - 1) for v in I6])),
             T("H", FLOAT16, [16], post=packed(5, H16.view(np.uint16).tolist()))]
    g = G(nodes, inits, [VI_I], [VI(n, t) for n, t in (("y", FLOAT), ("y2", INT64), ("y3", FLOAT), ("y4", FLOAT))])
    case("scope_typed_fields_only_min0", c, "decline", 0,
         "no tensor has a raw_data field at all (float_data/double_data/int64_data/int32_data): an "
         "absent raw_data is not 'at least 0 bytes long'; moving one breaks ORT", True, M(g),
         {"i": inp("int64", [3], [0, 7, 15])})

    def branch(nm, arr):
        return G([Nd("Gather", ["B" + nm, "i"], ["o" + nm])], [T("B" + nm, FLOAT, list(arr.shape), arr.tobytes())],
                 [], [VI("o" + nm, FLOAT)], name="b" + nm)
    ifn = Nd("If", ["cond"], ["y"], [Ag("then_branch", branch("t", normal((32, 4)))),
                                     Ag("else_branch", branch("e", normal((32, 4))))])
    g = G([ifn], [], [VI("cond", BOOL, []), VI_I], [VI("y", FLOAT)])
    case("scope_subgraph_only", c, "decline", 512,
         "the only large tensors are initializers of If branches; subgraphs are out of scope", True,
         M(g), {"cond": inp("bool", [], [True]), **I_IN})

    def branch2(nm, arr):
        return G([Nd("Add", ["W", "B" + nm], ["s" + nm]), Nd("Gather", ["s" + nm, "i"], ["o" + nm])],
                 [T("B" + nm, FLOAT, [32, 4], arr.tobytes())], [], [VI("o" + nm, FLOAT)], name="b" + nm)
    ifn = Nd("If", ["cond"], ["y"], [Ag("then_branch", branch2("t", normal((32, 4)))),
                                     Ag("else_branch", branch2("e", normal((32, 4))))])
    g = G([ifn], [T("W", FLOAT, [32, 4], WB)], [VI("cond", BOOL, []), VI_I], [VI("y", FLOAT)])
    case("scope_subgraph_and_outer_ref", c, "externalize", 512,
         "main W moves (and is read from the If branches as an outer-scope value); the equally large "
         "branch initializers must stay inline", True, M(g), {"cond": inp("bool", [], [False]), **I_IN})

    cn = Nd("Constant", [], ["C"], [At("value", T("C", FLOAT, [32, 4], normal((32, 4)).tobytes()))])
    g = G([cn, Nd("Gather", ["C", "i"], ["y"])], [T("tiny", FLOAT, [1], b"\0\0\0\0")], [VI_I], [VI("y", FLOAT)])
    case("scope_constant_node_only", c, "decline", 64,
         "the only large tensor is a Constant node attribute; the lone initializer is 4 bytes", True, M(g), I_IN)

    cn = Nd("Constant", [], ["C"], [At("value", T("C", FLOAT, [32, 4], normal((32, 4)).tobytes()))])
    g = G([cn, Nd("Add", ["W", "C"], ["s"]), Nd("Gather", ["s", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)],
          [VI_I], [VI("y", FLOAT)])
    case("scope_constant_node_and_init", c, "externalize", 512,
         "W moves; the equally large Constant attribute tensor stays inline", True, M(g), I_IN)

    def sparse(name, n_total):
        vals = T(name, FLOAT, [200], normal((200,)).tobytes())
        inds = T("", INT64, [200], (np.arange(200, dtype=np.int64) * (n_total // 200)).tobytes())
        return fl(1, vals) + fl(2, inds) + fv(3, n_total // 4) + fv(3, 4)
    g = G([Nd("Gather", ["SP", "i"], ["y"])], [T("small", FLOAT, [2], b"\0" * 8)], [VI_I], [VI("y", FLOAT)],
          sparse=[sparse("SP", 400)])
    case("scope_sparse_only", c, "decline", 800,
         "the only large raw_data sits in a sparse_initializer (values 800 B, indices 1600 B)", True,
         M(g), {"i": inp("int64", [3], [0, 50, 99])})
    g = G([Nd("Add", ["W", "SP"], ["s"]), Nd("Gather", ["s", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)],
          [VI_I], [VI("y", FLOAT)], sparse=[sparse("SP", 128)])
    case("scope_sparse_and_init", c, "externalize", 512,
         "W moves; the sparse_initializer (indices 1600 B > min) must be left alone", True, M(g), I_IN)

    vals = T("W", FLOAT, [3], np.array([1.5, 2.5, 3.5], np.float32).tobytes())
    inds = T("", INT64, [3], np.array([0, 69, 127], np.int64).tobytes())
    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)], [VI_I], [VI("y", FLOAT)],
          sparse=[fl(1, vals) + fl(2, inds) + fv(3, 32) + fv(3, 4)])
    case("scope_sparse_same_name_as_init", c, "either", 512,
         "HAZARD: a dense initializer W and a sparse_initializer W share a name; ORT uses the dense one while "
         "it is inline (>=128 B) but the sparse one once W is external; only declining is correct", True,
         M(g), I_IN, hazard_keep=["W"])

    t = T("W", FLOAT, [32, 4], WB, post=fl(4, (Wf * 2).tobytes()))
    case("scope_raw_and_float_data", c, "externalize", 512,
         "W carries both raw_data (used by ORT) and a float_data copy of other values; only raw_data moves, "
         "float_data is copied", True, gather_w(t), I_IN)

    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)],
          [VI_I, VI("W", FLOAT, [32, 4])], [VI("y", FLOAT)])
    case("scope_shadowed_by_input", c, "externalize", 512,
         "W is also a graph input (overridable initializer, not fed): its default value must survive", True,
         M(g), I_IN)

    U = normal((64, 4))
    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("U", FLOAT, [64, 4], U.tobytes()), T("W", FLOAT, [32, 4], WB)],
          [VI_I], [VI("y", FLOAT)])
    case("scope_unused_initializer", c, "externalize", 512,
         "an unused 1 KiB initializer (ORT drops it) precedes the used W; both move", True, M(g), I_IN)

    big = [normal((32, 4)) for _ in range(3)]
    tiny = [np.float32(k * 0.125) for k in range(40)]
    inits, nodes, sums = [], [], []
    for k, a in enumerate(big):
        inits.append(T("L%d" % k, FLOAT, [32, 4], a.tobytes()))
        nodes.append(Nd("Gather", ["L%d" % k, "i"], ["g%d" % k]))
        sums.append("g%d" % k)
    for k, v in enumerate(tiny):
        inits.insert(k * 3 % (len(inits) + 1), T("t%d" % k, FLOAT, [], v.tobytes()))
        sums.append("t%d" % k)
    nodes.append(Nd("Sum", sums, ["y"]))
    case("scope_many_tiny_few_large", c, "externalize", 256,
         "40 four-byte scalars interleaved with three 512-byte tensors; only the three move", True,
         M(G(nodes, inits, [VI_I], [VI("y", FLOAT)])), I_IN)

    body = G([Nd("Gather", ["W", "i"], ["gg"]), Nd("Add", ["acc", "gg"], ["acc2"]),
              Nd("Identity", ["cin"], ["cout"])], [],
             [VI("it", INT64, []), VI("cin", BOOL, []), VI("acc", FLOAT, [3, 4])],
             [VI("cout", BOOL, []), VI("acc2", FLOAT, [3, 4])], name="body")
    g = G([Nd("Loop", ["trip", "", "z"], ["y"], [Ag("body", body)])],
          [T("W", FLOAT, [32, 4], WB), T("trip", INT64, [], np.int64(3).tobytes()),
           T("z", FLOAT, [3, 4], np.zeros(12, np.float32).tobytes())], [VI_I], [VI("y", FLOAT)])
    case("scope_loop_body_outer_ref", c, "externalize", 48,
         "W (and the 48-byte zero accumulator) move; W is read only inside a Loop body", True, M(g), I_IN)

    S = np.array([8, 16], np.int64)
    g = G([Nd("Reshape", ["W", "S"], ["r"]), Nd("Gather", ["r", "i"], ["y"])],
          [T("W", FLOAT, [32, 4], WB), T("S", INT64, [2], S.tobytes())], [VI_I], [VI("y", FLOAT)])
    case("scope_reshape_shape_init", c, "externalize", 16,
         "HAZARD: the rule also moves the 16-byte Reshape shape S, and ORT's load-time ONNX shape inference "
         "then fails ('Cannot parse data from external tensors'); a correct tool must keep S inline",
         True, M(g), {"i": inp("int64", [3], [0, 3, 7])}, hazard_keep=["S"])

    g = G([Nd("Reshape", ["x", "S"], ["y"])], [T("S", INT64, [2], np.array([2, 3], np.int64).tobytes())],
          [VI("x", FLOAT, [6])], [VI("y", FLOAT)])
    case("scope_reshape_shape_only", c, "either", 16,
         "HAZARD: the rule says move the 16-byte shape S, but ORT then rejects the model; only declining is "
         "correct, so the rule and the correctness property disagree", True, M(g),
         {"x": inp("float32", [6], [1, 2, 3, 4, 5, 6])}, hazard_keep=["S"])

    nodes = [Nd("Slice", ["W", "st", "en", "ax"], ["s"]), Nd("Unsqueeze", ["s", "ua"], ["u"]),
             Nd("Gather", ["u", "i"], ["y"], [Ai("axis", 1)])]
    inits = [T("W", FLOAT, [32, 4], WB), T("st", INT64, [1], np.int64(2).tobytes()),
             T("en", INT64, [1], np.int64(30).tobytes()), T("ax", INT64, [1], np.int64(0).tobytes()),
             T("ua", INT64, [1], np.int64(0).tobytes())]
    case("scope_slice_unsqueeze_inputs", c, "externalize", 8,
         "HAZARD: min_bytes 8 also moves Slice starts/ends/axes and Unsqueeze axes, which ORT's shape "
         "inference must read at load time; W alone can move safely", True,
         M(G(nodes, inits, [VI_I], [VI("y", FLOAT)])), {"i": inp("int64", [3], [0, 17, 27])}, hazard_keep=["st", "en", "ax", "ua"])


def build_order():
    c = "order"
    t = fl(9, WB) + fl(8, "W") + fv(2, FLOAT) + fv(1, 32) + fv(1, 4)
    case("order_raw_first", c, "externalize", 512,
         "raw_data is the first field of the tensor, name/data_type/dims after it", True, gather_w(t), I_IN)

    t = fv(1, 32) + fl(12, "doc") + fl(9, WB) + fl(8, "W") + fv(1, 4) + fv(2, FLOAT)
    case("order_interleaved_dims", c, "externalize", 512,
         "dims split around raw_data and name (repeated dims concatenate to [32,4]); order must be kept",
         True, gather_w(t), I_IN)

    small = normal((4,))
    t = fv(1, 4) + fv(2, FLOAT) + fl(8, "W") + fl(9, RNG.bytes(4096)) + fl(9, small.tobytes())
    g = G([Nd("Gather", ["W", "i"], ["y"])], [t], [VI_I], [VI("y", FLOAT)])
    case("order_two_raw_large_first", c, "decline", 1024,
         "raw_data twice: a 4096-byte junk first, the real 16-byte value last; last wins, so nothing is "
         "large enough", True, M(g), {"i": inp("int64", [3], [0, 1, 3])})

    t = fv(1, 32) + fv(1, 4) + fv(2, FLOAT) + fl(8, "W") + fl(9, b"\x01\x02\x03\x04") + fl(9, WB)
    case("order_two_raw_large_last", c, "externalize", 512,
         "raw_data twice: 4 junk bytes then the real 512; the last one must be the one moved, both removed",
         True, gather_w(t), I_IN)

    t = fv(1, 32) + fl(9, RNG.bytes(2048)) + fv(1, 4) + fv(2, FLOAT) + fl(8, "W") + fl(9, WB)
    case("order_two_raw_both_large", c, "externalize", 512,
         "raw_data twice, both over min_bytes (2048 junk, then the real 512): length must be 512 and the "
         "bytes the last occurrence's", True, gather_w(t), I_IN)

    t = fl(8, "decoy") + T("W", FLOAT, [32, 4], WB)
    W2 = normal((32, 4))
    g = G([Nd("Gather", ["W", "i"], ["y"]), Nd("Gather", ["decoy", "i"], ["y2"])],
          [t, T("decoy", FLOAT, [32, 4], W2.tobytes())], [VI_I], [VI("y", FLOAT), VI("y2", FLOAT)])
    case("order_two_names", c, "externalize", 512,
         "first tensor has name 'decoy' then 'W' (last wins: W); a second tensor really is 'decoy'", True,
         M(g), I_IN)

    Wi = (np.arange(64, dtype=np.int64) * 7919 - 100000)
    t = fv(2, FLOAT) + fv(1, 64) + fl(8, "W") + fv(2, INT64) + fl(9, Wi.tobytes())
    g = G([Nd("Gather", ["W", "i"], ["y"])], [t], [VI_I], [VI("y", INT64)])
    case("order_two_data_types", c, "externalize", 512,
         "data_type FLOAT then INT64: last wins, the tensor is int64[64] (512 bytes)", True, M(g),
         {"i": inp("int64", [3], [0, 40, 63])})

    t = T("W", FLOAT, [32, 4], WB, pre=fv(14, 1), post=fv(14, 0))
    case("order_data_location_1_then_0", c, "externalize", 512,
         "data_location EXTERNAL then DEFAULT, no external_data: last wins (DEFAULT), the tensor is inline; "
         "the rewrite must leave EXTERNAL as the last data_location", True, gather_w(t), I_IN)

    t = T("W", FLOAT, [32, 4], WB, pre=fv(14, 0))
    case("order_data_location_0_explicit", c, "externalize", 512,
         "explicit data_location DEFAULT before raw_data: eligible; it must end up EXTERNAL", True,
         gather_w(t), I_IN)

    W2 = normal((32, 4))
    g = G([Nd("Add", ["W", "V"], ["s"]), Nd("Gather", ["s", "i"], ["y"])],
          [T("W", FLOAT, [32, 4], WB), T("V", FLOAT, [32, 4], W2.tobytes())], [VI_I], [VI("y", FLOAT)])
    body = fl(5, T("V", FLOAT, [32, 4], W2.tobytes())) + fl(12, VI("y", FLOAT)) + \
        fl(1, Nd("Gather", ["s", "i"], ["y"])) + fl(2, "g") + fl(11, VI_I) + \
        fl(5, T("W", FLOAT, [32, 4], WB)) + fl(1, Nd("Add", ["W", "V"], ["s"]))
    case("order_graph_fields_shuffled", c, "externalize", 512,
         "graph fields interleaved: initializer, output, node(consumer first), name, input, initializer, "
         "node", True, M(body), I_IN)

    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)], [VI_I], [VI("y", FLOAT)])
    m = fl(7, g) + OP("", 21) + fl(6, "doc") + fv(1, 10) + fl(2, "p")
    case("order_model_graph_first", c, "externalize", 512,
         "ModelProto with graph first, then opset_import, doc_string, ir_version last", True, m, I_IN)

    g = G([Nd("Sub", ["W", "V"], ["s"]), Nd("Add", ["s", "W"], ["a"]), Nd("Gather", ["a", "i"], ["y"])],
          [T("W", FLOAT, [32, 4], WB), T("V", FLOAT, [32, 4], WB)], [VI_I], [VI("y", FLOAT)])
    case("order_same_bytes_two_tensors", c, "externalize", 512,
         "two initializers with byte-identical raw_data (dedup is allowed, mixing them up is not)", True,
         M(g), I_IN)

    first = normal((32, 4))
    g = G([Nd("Gather", ["W", "i"], ["y"])],
          [T("W", FLOAT, [32, 4], first.tobytes()), T("W", FLOAT, [32, 4], WB)], [VI_I], [VI("y", FLOAT)])
    case("order_duplicate_init_name", c, "either", 512,
         "HAZARD: two initializers named W (512 B each); ORT uses the first while inline but the last once "
         "external, so moving them changes outputs; only declining is correct", True, M(g), I_IN,
         hazard_keep=["W"])


def build_types():
    c = "types"

    def one(name, dt, arr_bytes, n, outs_nodes, out_vis, why, opset=21, min_bytes=None, extra_inits=()):
        g = G(outs_nodes, [T("W", dt, [n], arr_bytes), *extra_inits], [VI_I], out_vis)
        case(name, c, "externalize", len(arr_bytes) if min_bytes is None else min_bytes, why, True,
             M(g, opsets=(("", opset),)), {"i": inp("int64", [3], [0, n // 2, n - 1])})

    gather_cast = [Nd("Gather", ["W", "i"], ["g"]), Nd("Cast", ["g"], ["y"], [Ai("to", FLOAT)])]
    one("types_float16", FLOAT16, normal((100,), np.float16).tobytes(), 100, gather_cast, [VI("y", FLOAT)],
        "float16 raw_data (200 B), gathered and widened exactly to float32")
    bf = (normal((100,)).view(np.uint32) >> 16).astype(np.uint16)
    one("types_bfloat16", BFLOAT16, bf.tobytes(), 100, gather_cast, [VI("y", FLOAT)],
        "bfloat16 raw_data (200 B), gathered and widened exactly to float32")
    d = normal((64,), np.float64) * 1e10
    one("types_double", DOUBLE, d.tobytes(), 64,
        [Nd("Gather", ["W", "i"], ["g"]), Nd("Cast", ["g"], ["y"], [Ai("to", FLOAT)]),
         Nd("Cast", ["g"], ["y2"], [Ai("to", INT64)])], [VI("y", FLOAT), VI("y2", INT64)],
        "double raw_data (512 B), outputs as float32 and int64")

    a8 = RNG.integers(-128, 128, 200, dtype=np.int8)
    u8 = RNG.integers(0, 256, 200, dtype=np.uint8)
    a16 = RNG.integers(-32768, 32768, 100, dtype=np.int16)
    u16 = RNG.integers(0, 65536, 100, dtype=np.uint16)
    inits = [T("A", INT8, [200], a8.tobytes()), T("B", UINT8, [200], u8.tobytes()),
             T("C", INT16, [100], a16.tobytes()), T("D", UINT16, [100], u16.tobytes())]
    nodes, outs = [], []
    for k in "ABCD":
        nodes += [Nd("Gather", [k, "i"], ["g" + k]), Nd("Cast", ["g" + k], ["y" + k], [Ai("to", INT32)])]
        outs.append(VI("y" + k, INT32))
    case("types_int8_uint8_int16_uint16", c, "externalize", 200,
         "four 200-byte tensors of int8/uint8/int16/uint16, each gathered and cast to int32", True,
         M(G(nodes, inits, [VI_I], outs)), {"i": inp("int64", [3], [0, 50, 99])})

    a32 = RNG.integers(-2**31, 2**31, 128, dtype=np.int32)
    one("types_int32", INT32, a32.tobytes(), 128, [Nd("Gather", ["W", "i"], ["y"])], [VI("y", INT32)],
        "int32 raw_data (512 B)")

    a64 = RNG.integers(-2**62, 2**62, 64, dtype=np.int64)
    u64 = RNG.integers(0, 2**63, 64, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    u32 = RNG.integers(0, 2**32, 128, dtype=np.uint32)
    inits = [T("A", INT64, [64], a64.tobytes()), T("B", UINT64, [64], u64.tobytes()),
             T("C", UINT32, [128], u32.tobytes())]
    nodes = [Nd("Gather", ["A", "i"], ["yA"]), Nd("Gather", ["B", "i"], ["gB"]),
             Nd("Cast", ["gB"], ["yB"], [Ai("to", INT64)]), Nd("Gather", ["C", "i"], ["gC"]),
             Nd("Cast", ["gC"], ["yC"], [Ai("to", INT64)])]
    case("types_int64_uint64_uint32", c, "externalize", 512,
         "int64, uint64 and uint32 tensors of 512 B each (uint64 reinterpreted through a cast to int64)", True,
         M(G(nodes, inits, [VI_I], [VI("yA", INT64), VI("yB", INT64), VI("yC", INT64)])),
         {"i": inp("int64", [3], [0, 33, 63])})

    b = (RNG.random(300) < 0.5).astype(np.uint8)
    one("types_bool", BOOL, b.tobytes(), 300, [Nd("Gather", ["W", "i"], ["y"])], [VI("y", BOOL)],
        "bool raw_data of clean 0/1 bytes (300 B)")

    n = 301
    nib = RNG.bytes((n + 1) // 2)
    cast_all = [Nd("Cast", ["W"], ["f"], [Ai("to", FLOAT)]), Nd("Gather", ["f", "i"], ["y"])]
    one("types_int4_odd", INT4, nib, n, cast_all, [VI("y", FLOAT)],
        "int4 with an odd element count: 151 packed bytes, the last high nibble is padding")
    dq = [Nd("DequantizeLinear", ["W", "sc", "zp"], ["f"]), Nd("Gather", ["f", "i"], ["y"])]
    one("types_uint4_dequant", UINT4, RNG.bytes(150), 300, dq, [VI("y", FLOAT)],
        "uint4 (150 B) through DequantizeLinear; the 4-byte scale and 1-byte zero point stay inline",
        min_bytes=150, extra_inits=[T("sc", FLOAT, [], np.float32(0.375).tobytes()),
                                    T("zp", UINT4, [], b"\x03")])

    f8a = RNG.integers(0, 256, 256, dtype=np.uint8)
    f8a[f8a & 0x7F == 0x7F] = 0x10          # no NaN patterns
    f8b = RNG.integers(0, 256, 256, dtype=np.uint8)
    f8b[(f8b & 0x7C) == 0x7C] = 0x20        # no Inf/NaN patterns
    inits = [T("A", F8E4M3FN, [256], f8a.tobytes()), T("B", F8E5M2, [256], f8b.tobytes())]
    nodes = [Nd("Cast", ["A"], ["fa"], [Ai("to", FLOAT)]), Nd("Gather", ["fa", "i"], ["yA"]),
             Nd("Cast", ["B"], ["fb"], [Ai("to", FLOAT)]), Nd("Gather", ["fb", "i"], ["yB"])]
    case("types_float8", c, "externalize", 256,
         "float8e4m3fn and float8e5m2 tensors (256 B each), cast to float32", True,
         M(G(nodes, inits, [VI_I], [VI("yA", FLOAT), VI("yB", FLOAT)])),
         {"i": inp("int64", [3], [0, 100, 255])})

    g = G([Nd("Concat", ["x", "Z"], ["y"], [Ai("axis", 0)]), Nd("Shape", ["Z"], ["s"])],
          [T("Z", FLOAT, [0, 4], b"")], [VI("x", FLOAT, [2, 4])], [VI("y", FLOAT), VI("s", INT64)])
    case("types_zero_size_only", c, "externalize", 0,
         "min_bytes 0 and a zero-size tensor with an empty raw_data: it moves with length 0", True, M(g),
         {"x": inp("float32", [2, 4], [1, 2, 3, 4, 5, 6, 7, 8])})

    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB[:496])], [VI_I], [VI("y", FLOAT)])
    case("types_raw_length_mismatch", c, "externalize", 256,
         "raw_data 496 B for a float[32,4] (512 B): the rule moves it; ORT rejects the original", False, M(g),
         I_IN)

    wb = bytes([0, 1, 2, 255, 1, 0, 128, 3] * 32)
    A4 = np.array([1.5, -2.5, 3.5], np.float32)
    B4 = np.array([-7.0, 8.0, -9.0], np.float32)
    g = G([Nd("Gather", ["W", "i"], ["g"]), Nd("Where", ["g", "A4", "B4"], ["y"]),
           Nd("Cast", ["g"], ["y2"], [Ai("to", INT32)])],
          [T("W", BOOL, [256], wb), T("A4", FLOAT, [3], A4.tobytes()), T("B4", FLOAT, [3], B4.tobytes())],
          [VI_I], [VI("y", FLOAT), VI("y2", INT32)])
    case("types_bool_non_01_bytes", c, "either", 256,
         "HAZARD: bool raw bytes 2/255/128/3; ORT normalises them to 1 when inline but reads them verbatim "
         "when external, so Where/Cast outputs change; only declining (or normalising) is correct", True,
         M(g), {"i": inp("int64", [3], [2, 3, 6])}, hazard_keep=["W"])


def build_structure():
    c = "structure"
    half1 = G([Nd("Gather", ["W", "i"], ["y"])], [], [VI_I], [VI("y", FLOAT)])
    half2 = fl(5, T("W", FLOAT, [32, 4], WB))
    m = fv(1, 10) + fl(7, half1) + OP("", 21) + fl(7, half2)
    case("struct_two_graph_fields_merged", c, "decline", 512,
         "two graph fields (nodes in the first, the initializer in the second) that protobuf merges and ORT "
         "loads; not exactly one graph field", True, m, I_IN)

    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)], [VI_I], [VI("y", FLOAT)])
    m = fv(1, 10) + fl(7, g) + fl(7, g) + OP("", 21)
    case("struct_two_full_graphs", c, "decline", 512,
         "the same complete graph twice (merged: duplicate inputs, ORT rejects)", False, m, I_IN)

    m = fv(1, 10) + fl(2, "nograph") + OP("", 21) + fl(6, WB)
    case("struct_no_graph", c, "decline", 16, "no graph field (a 512-byte doc_string only)", False, m, I_IN)

    m = fv(1, 10) + fl(7, b"") + OP("", 21)
    case("struct_empty_graph", c, "decline", 0,
         "a zero-length graph: no initializers at all even with min_bytes 0", False, m, {})

    fbody = fl(1, "AddGather") + fl(10, "local") + fl(4, "X") + fl(4, "I") + fl(5, "Y") + \
        fl(7, Nd("Constant", [], ["K"], [At("value", T("K", FLOAT, [32, 4], normal((32, 4)).tobytes()))])) + \
        fl(7, Nd("Add", ["X", "K"], ["S"])) + fl(7, Nd("Gather", ["S", "I"], ["Y"])) + \
        fl(9, fl(1, "") + fv(2, 21))
    g = G([Nd("AddGather", ["W", "i"], ["y"], domain="local")], [T("W", FLOAT, [32, 4], WB)], [VI_I],
          [VI("y", FLOAT)])
    m = M(g, opsets=(("", 21), ("local", 1)), post=fl(25, fbody))
    case("struct_model_function", c, "externalize", 512,
         "main W moves; a model-local function holds an equally large Constant that must stay inline", True,
         m, I_IN)

    m = gather_w(post=fl(14, SS("k1", "v" * 600)) + fl(14, SS("k2", "")) + fl(14, b""), pre=fl(14, SS("k0", "x")))
    case("struct_metadata_props", c, "externalize", 512,
         "metadata_props before and after the graph, one with a 600-byte value, one empty entry", True, m, I_IN)

    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)], [VI_I], [VI("y", FLOAT)])
    m = OP("ai.onnx.ml", 3) + fv(1, 10) + OP("", 21) + fl(7, g) + OP("com.example", 1) + OP("", 21)
    case("struct_opset_odd_places", c, "externalize", 512,
         "opset_import before ir_version, between fields, after the graph, default domain listed twice",
         True, m, I_IN)

    t = T("W", FLOAT, [32, 4], WB, post=fl(12, "t" * 2000))
    g = G([Nd("Gather", ["W", "i"], ["y"], post=fl(6, "n" * 3000))], [t], [VI_I], [VI("y", FLOAT)],
          extra=fl(10, "g" * 5000))
    m = M(g, pre=fl(6, "m" * 20000))
    case("struct_big_doc_strings", c, "externalize", 512,
         "doc_strings of 20000/5000/3000/2000 bytes on model, graph, node and the tensor itself", True, m, I_IN)

    side = normal((32, 4))
    t_ext = T("E", FLOAT, [32, 4], post=EXT("struct_already_external.side.bin", 0, 512))
    g = G([Nd("Add", ["W", "E"], ["s"]), Nd("Gather", ["s", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB), t_ext],
          [VI_I], [VI("y", FLOAT)])
    case("struct_already_external", c, "decline", 512,
         "initializer E is already external (entries + EXTERNAL, file present) next to a large inline W", True,
         M(g), I_IN, side={"struct_already_external.side.bin": side.tobytes()})

    t = T("W", FLOAT, [32, 4], WB, post=fv(14, 1))
    case("struct_external_without_entries", c, "decline", 512,
         "data_location EXTERNAL with no external_data entries (ORT: missing location)", False,
         gather_w(t), I_IN)

    t = T("W", FLOAT, [32, 4], WB, post=fl(13, SS("location", "nowhere.bin")) + fl(13, SS("length", "512")))
    case("struct_entries_without_external", c, "decline", 512,
         "external_data entries but data_location unset: ORT reads raw_data, the rule declines", True,
         gather_w(t), I_IN)

    t = T("W", FLOAT, [32, 4], WB, post=fv(14, 5))
    case("struct_data_location_5", c, "decline", 512,
         "data_location 5 (unknown enum value; ORT treats it as DEFAULT) is 'other than DEFAULT'", True,
         gather_w(t), I_IN)

    t = T("W", FLOAT, [32, 4], WB, post=fv(14, 1 << 32))
    case("struct_data_location_2pow32", c, "either", 512,
         "AMBIGUOUS: data_location varint 2^32 reads as 0 (DEFAULT) in ORT's int32 enum but as non-zero in "
         "u64; both readings are safe", True, gather_w(t), I_IN)

    tb = G([Nd("Add", ["W", "S"], ["o"])],
           [T("S", FLOAT, [32, 4], post=EXT("struct_subgraph_external.side.bin", 0, 512))], [],
           [VI("o", FLOAT)], name="then")
    eb = G([Nd("Sub", ["W", "S2"], ["o2"])], [T("S2", FLOAT, [32, 4], normal((32, 4)).tobytes())], [],
           [VI("o2", FLOAT)], name="else")
    g = G([Nd("If", ["cond"], ["r"], [Ag("then_branch", tb), Ag("else_branch", eb)]),
           Nd("Gather", ["r", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)], [VI("cond", BOOL, []), VI_I],
          [VI("y", FLOAT)])
    case("struct_subgraph_already_external", c, "externalize", 512,
         "an If-branch initializer is already external (side file present); out of scope, so main W still "
         "moves and the side file must still resolve", True, M(g), {"cond": inp("bool", [], [True]), **I_IN},
         side={"struct_subgraph_external.side.bin": normal((32, 4)).tobytes()})

    cn = Nd("Constant", [], ["C"],
            [At("value", T("C", FLOAT, [32, 4], post=EXT("struct_constant_external.side.bin", 0, 512)))])
    g = G([cn, Nd("Mul", ["W", "C"], ["s"]), Nd("Gather", ["s", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)],
          [VI_I], [VI("y", FLOAT)])
    case("struct_constant_already_external", c, "externalize", 512,
         "a Constant node's tensor is already external (side file present); out of scope, W still moves",
         True, M(g), I_IN, side={"struct_constant_external.side.bin": normal((32, 4)).tobytes()})

    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)], [VI_I, VI("W", FLOAT, [32, 4])],
          [VI("y", FLOAT)])
    case("struct_ir_version_3", c, "externalize", 512,
         "IR version 3 / opset 9 (initializers listed as graph inputs)", True, M(g, ir=3, opsets=(("", 9),)),
         I_IN)

    ti = fl(1, G([Nd("Identity", ["W"], ["W2"])], [T("W", FLOAT, [32, 4], normal((32, 4)).tobytes())], [],
                 [VI("W2", FLOAT)], name="init")) + fl(3, SS("W", "W2"))
    m = gather_w(post=fl(20, ti))
    case("struct_training_info", c, "externalize", 512,
         "training_info.initialization has its own 512-byte initializer named W; only the main graph's W moves",
         True, m, I_IN)


def build_encoding():
    c = "encoding"
    tb = T("W", FLOAT, [32, 4], post=tag(9, 2) + nm_varint(512, 5) + WB)
    gb = fl(1, Nd("Gather", ["W", "i"], ["y"])) + fl(2, "g") + \
        nm_varint((5 << 3) | 2, 3) + nm_varint(len(tb), 4) + tb + fl(11, VI_I) + fl(12, VI("y", FLOAT))
    m = fv(1, 10) + nm_varint((7 << 3) | 2, 5) + nm_varint(len(gb), 5) + gb + OP("", 21)
    case("enc_nonminimal_tags_lengths", c, "externalize", 512,
         "graph tag and length as 5-byte varints, initializer tag 3 bytes, lengths 4-5 bytes (all accepted "
         "by protobuf)", True, m, I_IN)

    t = tag(1, 0) + nm_varint(32, 10) + tag(1, 0) + nm_varint(4, 10) + tag(2, 0) + nm_varint(FLOAT, 10) + \
        fl(8, "W") + fl(9, WB)
    m = tag(1, 0) + nm_varint(10, 10) + fl(7, G([Nd("Gather", ["W", "i"], ["y"])], [t], [VI_I], [VI("y", FLOAT)])) + \
        OP("", 21)
    case("enc_nonminimal_values", c, "externalize", 512,
         "ir_version, dims and data_type as 10-byte non-minimal varints", True, m, I_IN)

    m = tag(1, 0) + b"\x8a\x80\x80\x80\x80\x80\x80\x80\x80\x7e" + gather_w()[2:]
    case("enc_varint10_overflow_bits", c, "either", 512,
         "AMBIGUOUS: ir_version is a 10-byte varint whose last byte carries bits past 2^64 (protobuf accepts "
         "and truncates; a strict reader may refuse it)", True, m, I_IN)

    case("enc_packed_dims", c, "externalize", 512, "dims written packed (one length-delimited field)", True,
         gather_w(T("W", FLOAT, [32, 4], WB, packed_dims=True)), I_IN)

    unk = fv(99, 7) + f64(98, b"\x01" * 8) + f32(97, b"\x02" * 4) + fl(96, RNG.bytes(700))
    t = T("W", FLOAT, [32, 4], WB, pre=fv(15, 3) + fl(17, RNG.bytes(600)), post=unk)
    m = gather_w(t, gextra=unk + fl(9, T("X", FLOAT, [32, 4], WB)) + fl(3, RNG.bytes(600)),
                 pre=unk, post=unk + fl(9, RNG.bytes(600)))
    case("enc_unknown_fields_everywhere", c, "externalize", 512,
         "unknown fields of wire types 0/1/2/5 in model, graph and tensor; unknown length-delimited blobs over "
         "min_bytes (incl. a TensorProto-shaped one at graph field 9) must not be touched", True, m, I_IN)

    mx = (1 << 29) - 1
    t = T("W", FLOAT, [32, 4], WB, post=fv(mx, 1) + fl(mx - 1, "x"))
    m = gather_w(t, gextra=fv(mx, 2) + f32(mx, b"abcd"), post=fl(mx, b"z" * 10) + f64(mx, b"\0" * 8))
    case("enc_max_field_numbers", c, "externalize", 512,
         "unknown fields numbered 2^29-1 (5-byte tags) in model, graph and tensor", True, m, I_IN)

    t = T("W", FLOAT, [32, 4], WB, post=fl(16, b"") + fl(12, b""))
    g = G([Nd("Gather", ["W", "i"], ["y"], post=fl(9, b""))], [t], [VI_I], [VI("y", FLOAT)],
          extra=fl(13, b"") + fl(14, b"") + fl(16, b"") + fl(10, b""))
    m = M(g, pre=fl(6, b"") + fl(14, b""), post=fl(20, b"") + fl(14, b""))
    case("enc_zero_length_submessages", c, "externalize", 512,
         "empty metadata_props / value_info / quantization_annotation / training_info / doc_strings", True,
         m, I_IN)

    grp = tag(1000, 3) + fv(1, 5) + fl(2, "g") + tag(1000, 4)
    case("enc_group_in_model", c, "decline", 512,
         "an unknown group (wire types 3/4) at model level; protobuf and ORT skip it, the rule declines",
         True, gather_w(pre=grp), I_IN)
    case("enc_group_in_graph", c, "decline", 512, "an unknown group inside the main graph", True,
         gather_w(gextra=grp), I_IN)
    case("enc_group_in_tensor", c, "decline", 512, "an unknown group inside the large initializer", True,
         gather_w(T("W", FLOAT, [32, 4], WB, post=grp)), I_IN)
    case("enc_group_numbered_7", c, "decline", 512,
         "a group with field number 7 (the graph's number, wrong wire type: an unknown field to protobuf)", True,
         gather_w(post=tag(7, 3) + tag(7, 4)), I_IN)

    g = G([Nd("Gather", ["W", "i"], ["y"], post=grp)], [T("W", FLOAT, [32, 4], WB)], [VI_I], [VI("y", FLOAT)])
    case("enc_group_in_node", c, "either", 512,
         "AMBIGUOUS: a group nested inside a NodeProto; a tool that copies nodes opaquely can externalize "
         "correctly, one that parses everything declines", True, M(g), I_IN)

    t = T("W", FLOAT, [32, 4], WB, post=fl(14, b"\x01"))
    case("enc_data_location_len_delimited", c, "either", 512,
         "AMBIGUOUS: field 14 with wire type 2 is an unknown field to protobuf (data_location stays DEFAULT); "
         "a tool may ignore or refuse it", True, gather_w(t), I_IN)

    f = normal((4,))
    t2 = T("F", FLOAT, [4], post=fl(4, f.tobytes()) + f32(9, b"\xde\xad\xbe\xef"))
    g = G([Nd("Gather", ["W", "i"], ["y"]), Nd("Add", ["y", "F"], ["y2"])], [t2, T("W", FLOAT, [32, 4], WB)],
          [VI_I], [VI("y2", FLOAT)])
    case("enc_raw_data_fixed32", c, "either", 4,
         "AMBIGUOUS: tensor F has field 9 with wire type 5 (not raw_data to protobuf) next to float_data; it "
         "must not be moved as a 4-byte raw_data (W may move)", True, M(g), I_IN)

    t = T("W", FLOAT, [32, 4], WB, post=fv(9, 77))
    case("enc_raw_data_then_varint9", c, "either", 512,
         "AMBIGUOUS: raw_data then a varint field 9 (unknown to protobuf): raw_data is still the 512 bytes",
         True, gather_w(t), I_IN)

    case("enc_graph_number_as_varint", c, "either", 512,
         "AMBIGUOUS: a varint field 7 before the real graph; protobuf sees one graph (the varint is unknown), a "
         "tool counting field numbers sees two", True, gather_w(pre=fv(7, 1)), I_IN)

    t = T("W", FLOAT, [32, 4], WB, post=fv(13, 1))
    case("enc_external_data_varint", c, "either", 512,
         "AMBIGUOUS: field 13 as a varint is not an external_data entry to protobuf; tool may refuse or move W",
         True, gather_w(t), I_IN)


def build_malformed():
    c = "malformed"
    base = gather_w()
    # locate offsets in base for interesting truncations
    gstart = base.index(b"\x3a")                 # graph tag (field 7, wt 2)
    rawpos = base.index(WB)
    opset_pos = base.rindex(OP("", 21))
    case("mal_empty_file", c, "decline", 0, "zero bytes: a valid but empty ModelProto, no graph", False, b"", {})
    for name, cut, why in (
            ("mal_trunc_in_first_varint", 1, "cut after the ir_version tag, inside its value"),
            ("mal_trunc_in_graph_length", gstart + 2, "cut inside the 2-byte graph length varint"),
            ("mal_trunc_in_raw_data", rawpos + 100, "cut 100 bytes into the raw_data payload"),
            ("mal_trunc_last_byte", len(base) - 1, "last byte (inside the trailing opset_import) missing")):
        case(name, c, "decline", 512, "truncated: " + why, False, base[:cut], I_IN)
    case("mal_trunc_at_field_boundary", c, "externalize", 512,
         "cut exactly before opset_import: still well-formed protobuf with one graph, so the rule applies; "
         "ORT rejects the original (no opset)", False, base[:opset_pos], I_IN)

    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)], [VI_I], [VI("y", FLOAT)])
    m = fv(1, 10) + tag(7, 2) + varint(len(g) + 40) + g + OP("", 21)
    case("mal_graph_length_past_end", c, "decline", 512,
         "graph length claims 40 bytes more than the buffer has after the opset", False, m, I_IN)

    t = fv(1, 32) + fv(1, 4) + fv(2, FLOAT) + fl(8, "W") + tag(9, 2) + varint(512) + WB[:400]
    rest = fl(11, VI_I) + fl(12, VI("y", FLOAT)) + fl(1, Nd("Gather", ["W", "i"], ["y"]))
    g = fl(5, t) + rest
    m = M(g)
    case("mal_raw_length_past_tensor", c, "decline", 256,
         "raw_data declares 512 bytes but its tensor message ends after 400 (the rest is graph bytes)", False,
         m, I_IN)

    case("mal_wire_type_6", c, "decline", 512, "a field with wire type 6 at model level", False,
         gather_w(pre=tag(1000, 6) + b"\x00"), I_IN)
    case("mal_wire_type_7_in_tensor", c, "decline", 512, "a field with wire type 7 inside the initializer",
         False, gather_w(T("W", FLOAT, [32, 4], WB, post=tag(50, 7))), I_IN)
    g = G([Nd("Gather", ["W", "i"], ["y"], post=tag(50, 6) + b"\x00")], [T("W", FLOAT, [32, 4], WB)], [VI_I],
          [VI("y", FLOAT)])
    case("mal_wire_type_6_in_node", c, "either", 512,
         "wire type 6 nested inside a NodeProto: ORT rejects; a tool copying nodes opaquely may externalize "
         "(ORT must then reject the new model too)", False, M(g), I_IN)
    case("mal_varint_11_bytes", c, "decline", 512, "an unknown varint field whose value runs 11 bytes", False,
         gather_w(pre=tag(1000, 0) + b"\xff" * 10 + b"\x01"), I_IN)
    case("mal_unmatched_end_group", c, "decline", 512, "an end-group tag (wire type 4) with no start", False,
         gather_w(gextra=tag(33, 4)), I_IN)
    case("mal_field_number_0", c, "either", 512,
         "AMBIGUOUS: a tag with field number 0 (wire type 0) inside the graph: ORT rejects it, the rule only "
         "names wire types; copied verbatim ORT must reject the new model too", False,
         gather_w(gextra=b"\x00\x05"), I_IN)
    g = G([Nd("Gather", ["W", "i"], ["y"])], [T("W", FLOAT, [32, 4], WB)], [VI_I], [VI("y", FLOAT)])
    m = fv(1, 10) + tag(7, 2) + nm_varint(len(g), 6) + g + OP("", 21)
    case("mal_length_varint_6_bytes", c, "either", 512,
         "AMBIGUOUS: graph length as a 6-byte non-minimal varint: ORT's protobuf rejects (>5 bytes), a 64-bit "
         "varint reader accepts; re-encoding it would make ORT accept the new model", False, m, I_IN)
    case("mal_all_ff", c, "decline", 0, "64 bytes of 0xff (an endless varint)", False, b"\xff" * 64, {})


def build_all():
    build_scope()
    build_order()
    build_types()
    build_structure()
    build_encoding()
    build_malformed()
    names = [k["case"] for k in CASES]
    assert len(names) == len(set(names)), "duplicate case names"


# ----------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------


def write(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    meta = []
    total = 0
    for k in CASES:
        with open(os.path.join(out_dir, k["case"] + ".onnx"), "wb") as fh:
            fh.write(k["model"])
        total += len(k["model"])
        assert len(k["model"]) < 1 << 20, k["case"]
        for fn, data in k["side"].items():
            with open(os.path.join(out_dir, fn), "wb") as fh:
                fh.write(data)
        meta.append({"case": k["case"], "class": k["cls"], "expect": k["expect"],
                     "min_bytes": k["min_bytes"], "why": k["why"], "loads": k["loads"],
                     "inputs": k["inputs"]})
    assert total < 20 << 20
    with open(os.path.join(out_dir, "cases.json"), "w") as fh:
        json.dump(meta, fh, indent=1)
    return total


# ----------------------------------------------------------------------------
# checking
# ----------------------------------------------------------------------------

NP = {"int64": np.int64, "int32": np.int32, "float32": np.float32, "bool": np.bool_}


def feeds_of(inputs):
    return {n: np.array(v["values"], dtype=NP[v["dtype"]]).reshape(v["shape"]) for n, v in inputs.items()}


def ort_run(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4
    try:
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        return "load", str(e).splitlines()[0][:200]
    try:
        return "ok", s.run(None, feeds)
    except Exception as e:  # noqa: BLE001
        return "run", str(e).splitlines()[0][:200]


def identical(a, b):
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and
                                     x.tobytes() == y.tobytes() for x, y in zip(a, b))


def try_rewrite(tmp, k, model, data, feeds, tagname, location):
    d = os.path.join(tmp, k["case"] + "." + tagname)
    os.makedirs(d)
    for fn, sd in k["side"].items():
        with open(os.path.join(d, fn), "wb") as fh:
            fh.write(sd)
    p = os.path.join(d, "model.onnx")
    with open(p, "wb") as fh:
        fh.write(model)
    with open(os.path.join(d, location), "wb") as fh:
        fh.write(data)
    return ort_run(p, feeds)


def check(out_dir):
    import onnxruntime as ort
    ort.set_default_logger_severity(4)
    with open(os.path.join(out_dir, "cases.json")) as fh:
        meta = {m["case"]: m for m in json.load(fh)}
    by_class = {}
    problems = []
    notes = []
    tmp = tempfile.mkdtemp(prefix="extcheck.")
    loc = "weights.data"
    try:
        for k in CASES:
            name = k["case"]
            assert meta[name]["expect"] == k["expect"]
            fails = []
            feeds = feeds_of(k["inputs"])
            st, orig = ort_run(os.path.join(out_dir, name + ".onnx"), feeds)
            loads = st != "load"
            if loads != k["loads"]:
                fails.append("loads=%s but ORT says %s (%s)" % (k["loads"], loads, orig if st != "ok" else ""))
            if st == "run":
                fails.append("original fails to run: " + orig)
            careful = careful_externalize(k["model"], k["min_bytes"], loc)
            if k["expect"] == "externalize" and careful is None:
                fails.append("careful reference declined")
            if k["expect"] == "decline" and careful is not None:
                fails.append("careful reference externalized")
            hazard = name in HAZARDS
            if st == "ok":
                if hazard:
                    broke = False
                    if careful is not None:
                        s2, out2 = try_rewrite(tmp, k, *careful, feeds, "careful", loc)
                        broke = s2 != "ok" or not identical(orig, out2)
                    if not broke:
                        fails.append("hazard did not bite: literal rule still gives identical outputs")
                    mb, data = onnx_externalize(k["model"], k["min_bytes"], loc, keep_inline=HAZARDS[name])
                    if data:
                        s3, out3 = try_rewrite(tmp, k, mb, data, feeds, "keepinline", loc)
                        if s3 != "ok" or not identical(orig, out3):
                            fails.append("keeping %s inline does not fix it: %s" % (HAZARDS[name], s3))
                    else:
                        notes.append("%s: with %s inline nothing is left to move -> decline" % (name, HAZARDS[name]))
                else:
                    if k["expect"] == "externalize":
                        mb, data = onnx_externalize(k["model"], k["min_bytes"], loc)
                        s2, out2 = try_rewrite(tmp, k, mb, data, feeds, "onnxlib", loc)
                        if s2 != "ok" or not identical(orig, out2):
                            fails.append("onnx-lib reference differs: %s %s" % (s2, out2 if s2 != "ok" else ""))
                        # every output must depend on the moved bytes
                        flipped = bytes(b ^ 0xFF for b in data)
                        s4, out4 = try_rewrite(tmp, k, mb, flipped, feeds, "flipped", loc)
                        if s4 == "ok":
                            same_out = [j for j, (x, y) in enumerate(zip(orig, out4)) if x.tobytes() == y.tobytes()]
                            if same_out and len(data) > 0:
                                fails.append("outputs %s do not depend on the moved bytes" % same_out)
                    if careful is not None:
                        s3, out3 = try_rewrite(tmp, k, *careful, feeds, "careful", loc)
                        if s3 != "ok" or not identical(orig, out3):
                            fails.append("careful reference differs: %s %s" % (s3, out3 if s3 != "ok" else ""))
            elif careful is not None:
                s3, _ = try_rewrite(tmp, k, *careful, feeds, "careful", loc)
                notes.append("%s: original rejected; careful rewrite -> %s" % (name, s3))
            if k["expect"] == "either" and not hazard:
                lenient = careful_externalize(k["model"], k["min_bytes"], loc, lenient=True)
                if st == "ok" and lenient is not None:
                    s5, out5 = try_rewrite(tmp, k, *lenient, feeds, "lenient", loc)
                    if s5 != "ok" or not identical(orig, out5):
                        fails.append("lenient reference differs: %s" % s5)
                notes.append("%s (either): strict reference %s, lenient %s" %
                             (name, "declines" if careful is None else "externalizes",
                              "declines" if lenient is None else "externalizes") +
                             (" (outputs checked)" if st == "ok" and (careful or lenient) else ""))
            cl = by_class.setdefault(k["cls"], [0, 0, {"externalize": 0, "decline": 0, "either": 0}])
            cl[0] += 1
            cl[2][k["expect"]] += 1
            if fails:
                cl[1] += 1
                problems.append((name, fails))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for cls, (n, bad, ex) in by_class.items():
        print("%-10s %3d cases  %3d bad   (externalize %d, decline %d, either %d)" %
              (cls, n, bad, ex["externalize"], ex["decline"], ex["either"]))
    for n in notes:
        print("note:", n)
    for name, fails in problems:
        for f in fails:
            print("MISMATCH %s: %s" % (name, f))
    print("hazard cases (literal rule breaks ORT):", ", ".join(sorted(HAZARDS)))
    print("%d cases, %d with mismatches" % (len(CASES), len(problems)))
    return not problems


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 1 or any(a not in ("--check",) for a in argv[1:] if a.startswith("--")):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    build_all()
    total = write(args[0])
    print("wrote %d cases (%d bytes of models) to %s" % (len(CASES), total, args[0]))
    if "--check" in argv:
        return 0 if check(args[0]) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
