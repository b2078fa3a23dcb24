"""Embeds the texts of a JSON-lines file with ONNX Runtime's Python API — the same model,
tokenizer settings (truncation at the manifest's max_length, padding to the longest in a batch),
threads and batching as lode (inputs sorted by length, at most BATCH per call and at most
BATCH_TOKENS padded tokens) — and prints inputs per second and tokens per second (real tokens,
special tokens included, padding excluded). `lode-bench dense` reports lode's throughput as a
ratio of this one, and divides the vault's tokens by its tokens/s for the one-pass floor.

usage: bench_python_embed.py MODEL_DIR TEXTS.jsonl THREADS BATCH MAX_LENGTH BATCH_TOKENS
"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

model_dir, texts_path, threads, batch, max_length = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
batch_tokens = int(sys.argv[6]) if len(sys.argv) > 6 else batch * 128
texts = [json.loads(l)["text"] for l in open(texts_path)]
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
sess = ort.InferenceSession(f"{model_dir}/model.onnx", opts, providers=["CPUExecutionProvider"])
names = [i.name for i in sess.get_inputs()]
tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
tok.enable_truncation(max_length)
tok.enable_padding()


def batches(texts):
    """Length-sorted batches bounded like lode's (embedder::length_batches)."""
    lens = [len(e.ids) for e in tok.encode_batch(texts)]
    order = sorted(range(len(texts)), key=lambda i: (lens[i], i))
    out, cur = [], []
    for i in order:
        if cur and (len(cur) >= batch or (len(cur) + 1) * lens[i] > batch_tokens):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return [[texts[i] for i in b] for b in out]


def run(chunk):
    enc = tok.encode_batch(chunk)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in names:
        feeds["token_type_ids"] = np.array([e.type_ids for e in enc], dtype=np.int64)
    h = sess.run(None, feeds)[0]
    v = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    return int(mask.sum())


run(texts[:batch])  # warm-up
t = time.perf_counter()
tokens = 0
for chunk in batches(texts):
    tokens += run(chunk)
secs = time.perf_counter() - t
print(json.dumps({"passages": len(texts), "inputs": len(texts), "tokens": tokens, "seconds": secs,
                  "per_second": len(texts) / secs, "tokens_per_second": tokens / secs}))
