"""Generates the tiny ONNX cross-encoder lode's tests use (no real cross-encoder or NLI model is
published on a package registry). It has the real interface — input_ids, attention_mask and
token_type_ids in, one logit per pair out — and scores a pair by counting, in the second segment
(the passage), tokens of a few marker words: "banana" +2, "cherry" +1, "rotten" -3.

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
graph = helper.make_graph(
    [
        helper.make_node("Gather", ["W", "input_ids"], ["g"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["t"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["m", "t"], ["mt"]),
        helper.make_node("Unsqueeze", ["mt", "axis2"], ["mt3"]),
        helper.make_node("Mul", ["g", "mt3"], ["p"]),
        helper.make_node("ReduceSum", ["p", "axis1"], ["logits"], keepdims=0),
    ],
    "tiny_cross_encoder",
    [ints("input_ids"), ints("attention_mask"), ints("token_type_ids")],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
    [
        numpy_helper.from_array(weights, "W"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
    ],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="lode-tests")
model.ir_version = 8
onnx.checker.check_model(model)

out = os.path.join(models, "tiny-cross-encoder")
os.makedirs(out, exist_ok=True)
onnx.save(model, os.path.join(out, "model.onnx"))
shutil.copy(tok_path, os.path.join(out, "tokenizer.json"))
with open(os.path.join(out, "lode-model.toml"), "w") as f:
    f.write('id = "tiny-cross-encoder"\nkind = "cross-encoder"\nmax_length = 128\nlogit_index = 0\n')
print(f"wrote {out}")

# A tiny 3-class NLI model with the real interface (premise first, hypothesis second) and a label
# order that is NOT the usual one, so a test can tell whether lode honours the manifest's labels.
# Logits per pair, from tokens of the SECOND segment (the hypothesis) only:
#   contradiction = 3 * count("rotten"), entailment = 3 * count("banana"), neutral = 1.
nli_w = np.zeros((len(vocab), 3), dtype=np.float32)
nli_w[vocab["rotten"], 0] = 3.0
nli_w[vocab["banana"], 1] = 3.0
bias = np.array([0.0, 0.0, 1.0], dtype=np.float32)
nli = helper.make_graph(
    [
        helper.make_node("Gather", ["W", "input_ids"], ["g"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["t"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["m", "t"], ["mt"]),
        helper.make_node("Unsqueeze", ["mt", "axis2"], ["mt3"]),
        helper.make_node("Mul", ["g", "mt3"], ["p"]),
        helper.make_node("ReduceSum", ["p", "axis1"], ["s"], keepdims=0),
        helper.make_node("Add", ["s", "B"], ["logits"]),
    ],
    "tiny_nli",
    [ints("input_ids"), ints("attention_mask"), ints("token_type_ids")],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
    [
        numpy_helper.from_array(nli_w, "W"),
        numpy_helper.from_array(bias, "B"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
    ],
)
nli_model = helper.make_model(nli, opset_imports=[helper.make_opsetid("", 13)], producer_name="lode-tests")
nli_model.ir_version = 8
onnx.checker.check_model(nli_model)
out = os.path.join(models, "tiny-nli")
os.makedirs(out, exist_ok=True)
onnx.save(nli_model, os.path.join(out, "model.onnx"))
shutil.copy(tok_path, os.path.join(out, "tokenizer.json"))
with open(os.path.join(out, "lode-model.toml"), "w") as f:
    f.write('id = "tiny-nli"\nkind = "nli"\nmax_length = 32\nlabels = ["contradiction", "entailment", "neutral"]\n')
print(f"wrote {out}")

# A model whose inputs are not a text model's: loading it must fail with a clear message.
bad = helper.make_graph(
    [helper.make_node("Identity", ["pixel_values"], ["out"])],
    "not_a_text_model",
    [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3])],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 3])],
)
bad_model = helper.make_model(bad, opset_imports=[helper.make_opsetid("", 13)], producer_name="lode-tests")
bad_model.ir_version = 8
out = os.path.join(models, "bad-inputs")
os.makedirs(out, exist_ok=True)
onnx.save(bad_model, os.path.join(out, "model.onnx"))
shutil.copy(tok_path, os.path.join(out, "tokenizer.json"))
with open(os.path.join(out, "lode-model.toml"), "w") as f:
    f.write('id = "bad-inputs"\nkind = "embedder"\nmax_length = 16\ndimensions = 3\n')
print(f"wrote {out}")
