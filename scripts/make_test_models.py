"""Generates the tiny ONNX models lode's tests use (no real cross-encoder or NLI model is published
on a package registry). Both have the real interface — input_ids, attention_mask and
token_type_ids in, logits per pair out — and score a pair by counting, in the second segment,
tokens of a few marker words. The cross-encoder: "banana" +2, "cherry" +1, "rotten" -3 (one
logit). The NLI model: see below (three logits, in a non-default label order).

usage: make_test_models.py MODELS_DIR   (MODELS_DIR/all-MiniLM-L6-v2/tokenizer.json must exist)
"""
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

models = sys.argv[1]
tok_path = os.path.join(models, "all-MiniLM-L6-v2", "tokenizer.json")
vocab = json.load(open(tok_path))["model"]["vocab"]
weights = np.zeros((len(vocab), 1), dtype=np.float32)
for word, w in {"banana": 2.0, "cherry": 1.0, "rotten": -3.0}.items():
    weights[vocab[word], 0] = w

ints = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])


def second_segment_model(name, weights, bias=None):
    """A pair classifier over the real interface: per output, the sum over the tokens of the
    second segment (token_type_ids = 1) of `weights[token]`, plus `bias`."""
    nodes = [
        helper.make_node("Gather", ["W", "input_ids"], ["g"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["t"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["m", "t"], ["mt"]),
        helper.make_node("Unsqueeze", ["mt", "axis2"], ["mt3"]),
        helper.make_node("Mul", ["g", "mt3"], ["p"]),
        helper.make_node("ReduceSum", ["p", "axis1"], ["s" if bias is not None else "logits"], keepdims=0),
    ]
    inits = [
        numpy_helper.from_array(weights, "W"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
    ]
    if bias is not None:
        nodes.append(helper.make_node("Add", ["s", "B"], ["logits"]))
        inits.append(numpy_helper.from_array(bias, "B"))
    graph = helper.make_graph(
        nodes,
        name,
        [ints("input_ids"), ints("attention_mask"), ints("token_type_ids")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", weights.shape[1]])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="lode-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write_model(folder, model, manifest):
    out = os.path.join(models, folder)
    os.makedirs(out, exist_ok=True)
    onnx.save(model, os.path.join(out, "model.onnx"))
    shutil.copy(tok_path, os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "lode-model.toml"), "w") as f:
        f.write(manifest)
    print(f"wrote {out}")


write_model(
    "tiny-cross-encoder",
    second_segment_model("tiny_cross_encoder", weights),
    'id = "tiny-cross-encoder"\nkind = "cross-encoder"\nmax_length = 128\nlogit_index = 0\n',
)

# A tiny 3-class NLI model with the real interface (premise first, hypothesis second) and a label
# order that is NOT the usual one, so a test can tell whether lode honours the manifest's labels.
# Logits per pair, from tokens of the SECOND segment (the hypothesis) only:
#   contradiction = 3 * count("rotten"), entailment = 3 * count("banana"), neutral = 1.
nli_w = np.zeros((len(vocab), 3), dtype=np.float32)
nli_w[vocab["rotten"], 0] = 3.0
nli_w[vocab["banana"], 1] = 3.0
write_model(
    "tiny-nli",
    second_segment_model("tiny_nli", nli_w, bias=np.array([0.0, 0.0, 1.0], dtype=np.float32)),
    'id = "tiny-nli"\nkind = "nli"\nmax_length = 32\nlabels = ["contradiction", "entailment", "neutral"]\n',
)

# A model whose inputs are not a text model's: loading it must fail with a clear message.
bad = helper.make_graph(
    [helper.make_node("Identity", ["pixel_values"], ["out"])],
    "not_a_text_model",
    [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3])],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 3])],
)
bad_model = helper.make_model(bad, opset_imports=[helper.make_opsetid("", 13)], producer_name="lode-tests")
bad_model.ir_version = 8
write_model("bad-inputs", bad_model, 'id = "bad-inputs"\nkind = "embedder"\nmax_length = 16\ndimensions = 3\n')
