# A cross-encoder with the shape of cross-encoder/ms-marco-MiniLM-L-6-v2 (BERT, 6 layers, 384
# hidden, a 384x384 pooler with tanh and a 384x1 classifier on [CLS]), its encoder weights taken
# from the packaged all-MiniLM-L6-v2 int8 model: fp32 (folded by ONNX Runtime, as the hub's
# onnx/model.onnx is) or int8 (as stored). Its scores mean nothing; its size and compute are the
# real model's. For memory figures only (docs/benchmarks.md, "A reranker's share").
#
#   PYTHONPATH=.lode-tools/py python3 scripts/cross_encoder_shaped.py \
#       .lode-tools/models/all-MiniLM-L6-v2/model.onnx /tmp/ms-fp32/model.onnx fp32   # or int8
#
# then put tokenizer.json and a lode-model.toml (kind = "cross-encoder", logit_index = 0) beside it.
import os, sys, numpy as np, onnx, onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper
src, out, kind = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "fp32":
    so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = out + ".folded.onnx"
    ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    m = onnx.load(out + ".folded.onnx")
    os.remove(out + ".folded.onnx")
else:
    m = onnx.load(src)
g = m.graph
hidden = g.output[0].name
rng = np.random.default_rng(1)
inits = [numpy_helper.from_array(np.array([0], dtype=np.int64), "cls_index"),
         numpy_helper.from_array((rng.standard_normal((384, 384)) * 0.05).astype(np.float32), "pooler_w"),
         numpy_helper.from_array(np.zeros(384, dtype=np.float32), "pooler_b"),
         numpy_helper.from_array((rng.standard_normal((384, 1)) * 0.05).astype(np.float32), "cls_w"),
         numpy_helper.from_array(np.zeros(1, dtype=np.float32), "cls_b")]
g.initializer.extend(inits)
g.node.extend([
    helper.make_node("Gather", [hidden, "cls_index"], ["cls_tok"], axis=1),
    helper.make_node("Reshape", ["cls_tok", "shape_b384"], ["cls_vec"]),
    helper.make_node("MatMul", ["cls_vec", "pooler_w"], ["p0"]), helper.make_node("Add", ["p0", "pooler_b"], ["p1"]),
    helper.make_node("Tanh", ["p1"], ["pooled"]),
    helper.make_node("MatMul", ["pooled", "cls_w"], ["l0"]), helper.make_node("Add", ["l0", "cls_b"], ["logits"]),
])
g.initializer.append(numpy_helper.from_array(np.array([-1, 384], dtype=np.int64), "shape_b384"))
del g.output[:]
g.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1]))
onnx.save(m, out)
s = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
feeds = {i.name: np.ones((2, 7), dtype=np.int64) for i in s.get_inputs()}
print(out, s.run(None, feeds)[0].shape)
