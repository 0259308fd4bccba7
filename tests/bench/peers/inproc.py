"""One in-process runtime at one precision and thread count: the forward
limit at given batch sizes and lengths, and the embeddings of the quality
texts. Prints one JSON object on stdout. Run by bench.py, one process per
(runtime, precision, threads), so CPU time and resident memory are its own.

Runtimes:
  ort       ONNX Runtime, the fused graph (fp32) or its dynamic int8
  openvino  OpenVINO CPU plugin on model.onnx, INFERENCE_PRECISION_HINT
            f32 or bf16
  st        sentence-transformers on torch, float32, bfloat16 (model.to),
            or int8 (torch.ao dynamic quantization of the Linear layers)

The timed region is the forward and the pooling on pre-tokenized inputs of
exactly --length tokens (the same for every runtime: no tokenizer time),
as encoder-bench-forward times ours.
"""
import argparse
import json
import os
import pathlib
import resource
import sys
import time

import numpy as np


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def mean_pool(hidden, mask):
    m = mask[..., None].astype(np.float32)
    return (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)


def normalize(x):
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class Onnx:
    def __init__(self, a, model_dir):
        self.model_dir = model_dir
        base = pathlib.Path(a.model_root)
        if a.runtime == "ort":
            import onnxruntime as ort
            so = ort.SessionOptions()
            so.intra_op_num_threads = a.threads
            so.inter_op_num_threads = 1
            so.graph_optimization_level = (
                ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
            name = {"fp32": "model_fp32.onnx",
                    "int8": "model_int8.onnx"}[a.precision]
            self.sess = ort.InferenceSession(
                str(base / "ort" / name), so,
                providers=["CPUExecutionProvider"])
            self.inputs = [i.name for i in self.sess.get_inputs()]
            self.run = lambda feed: self.sess.run(None, feed)[0]
            self.version = "onnxruntime " + ort.__version__
        else:
            import openvino as ov
            core = ov.Core()
            hint = {"fp32": "f32", "bf16": "bf16"}[a.precision]
            model = core.read_model(str(base / "onnx" / "model.onnx"))
            self.inputs = [i.get_any_name() for i in model.inputs]
            compiled = core.compile_model(model, "CPU", {
                "INFERENCE_PRECISION_HINT": hint,
                "INFERENCE_NUM_THREADS": a.threads,
                "PERFORMANCE_HINT": "LATENCY",
                "NUM_STREAMS": 1})
            self.req = compiled.create_infer_request()
            self.run = lambda feed: self.req.infer(feed)[0]
            self.version = "openvino " + ov.__version__
            self.precision_used = str(compiled.get_property(
                "INFERENCE_PRECISION_HINT"))

    def feed(self, enc):
        return {n: enc[n].astype(np.int64) for n in self.inputs}

    def embed_ids(self, enc):
        hidden = self.run(self.feed(enc))
        return normalize(mean_pool(np.asarray(hidden, dtype=np.float32),
                                   enc["attention_mask"]))


class SentenceTransformers:
    def __init__(self, a, model_dir):
        import torch
        from sentence_transformers import SentenceTransformer
        torch.set_num_threads(a.threads)
        torch.set_num_interop_threads(1)
        self.torch = torch
        self.model = SentenceTransformer(str(model_dir), device="cpu").eval()
        if a.precision == "bf16":
            self.model.to(torch.bfloat16)
        elif a.precision == "int8":
            self.model[0].auto_model = torch.ao.quantization.quantize_dynamic(
                self.model[0].auto_model, {torch.nn.Linear},
                dtype=torch.qint8)
        import sentence_transformers
        self.version = "sentence-transformers %s, torch %s" % (
            sentence_transformers.__version__, torch.__version__)

    def embed_ids(self, enc):
        feats = {k: self.torch.from_numpy(v.astype(np.int64))
                 for k, v in enc.items()}
        with self.torch.inference_mode():
            out = self.model(feats)["sentence_embedding"]
        return out.float().numpy()

    def embed_texts(self, texts):
        return self.model.encode(texts, batch_size=32,
                                 convert_to_numpy=True).astype(np.float32)


def encode(tok, texts, length):
    enc = tok(texts, padding="max_length", truncation=True,
              max_length=length, return_tensors="np")
    return {k: v for k, v in enc.items()
            if k in ("input_ids", "attention_mask", "token_type_ids")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runtime", required=True,
                   choices=["ort", "openvino", "st"])
    p.add_argument("--precision", default="fp32")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model-root", required=True,
                   help="WORK/models/<key> (st/, onnx/, ort/)")
    p.add_argument("--texts", required=True, help="WORK/texts/<key>")
    p.add_argument("--batch-sizes", default="1,32")
    p.add_argument("--lengths", default="16,128,512")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--min-runs", type=int, default=3)
    p.add_argument("--quality-out",
                   help="write the quality texts' embeddings here (.npy)")
    a = p.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers import AutoTokenizer
    model_dir = pathlib.Path(a.model_root) / "st"
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    t0 = time.perf_counter()
    rt = (SentenceTransformers(a, model_dir) if a.runtime == "st"
          else Onnx(a, model_dir))
    load_s = time.perf_counter() - t0
    out = {"runtime": a.runtime, "precision": a.precision,
           "threads": a.threads, "version": rt.version,
           "load_s": load_s, "rss_after_load_kib": rss_kib(), "cells": []}
    if hasattr(rt, "precision_used"):
        out["precision_used"] = rt.precision_used

    texts_dir = pathlib.Path(a.texts)
    if a.quality_out:
        texts = json.loads((texts_dir / "quality.json").read_text())
        embs = []
        for i in range(0, len(texts), 32):
            chunk = texts[i:i + 32]
            if a.runtime == "st":
                embs.append(rt.embed_texts(chunk))
            else:
                enc = tok(chunk, padding=True, truncation=True,
                          max_length=512, return_tensors="np")
                enc = {k: v for k, v in enc.items() if k in
                       ("input_ids", "attention_mask", "token_type_ids")}
                embs.append(rt.embed_ids(enc))
        np.save(a.quality_out, np.concatenate(embs))

    for length in [int(x) for x in a.lengths.split(",")]:
        rows = [json.loads(line) for line in
                open(texts_dir / ("len-%d.jsonl" % length))]
        for batch in [int(x) for x in a.batch_sizes.split(",")]:
            texts = [rows[i % len(rows)]["text"] for i in range(batch)]
            enc = encode(tok, texts, length)
            rt.embed_ids(enc)  # warm-up, unmeasured
            times = []
            c0, w0 = cpu_s(), time.perf_counter()
            while True:
                s = time.perf_counter()
                rt.embed_ids(enc)
                times.append(time.perf_counter() - s)
                if (time.perf_counter() - w0 >= a.seconds
                        and len(times) >= a.min_runs):
                    break
            wall, cpu = time.perf_counter() - w0, cpu_s() - c0
            seqs = batch * len(times)
            times.sort()
            out["cells"].append({
                "batch": batch, "length": length, "runs": len(times),
                "sequences_per_s": seqs / sum(times),
                "p50_ms": 1000 * times[len(times) // 2],
                "p99_ms": 1000 * times[min(len(times) - 1,
                                           int(0.99 * len(times)))],
                "cpu_ms_per_seq": 1000 * cpu / seqs,
                "cpu_per_wall": cpu / wall,
                "rss_kib": rss_kib()})
            print("[inproc] %s %s t=%d b=%d n=%d: %.1f seq/s" % (
                a.runtime, a.precision, a.threads, batch, length,
                out["cells"][-1]["sequences_per_s"]), file=sys.stderr,
                flush=True)
    out["peak_rss_kib"] = resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
