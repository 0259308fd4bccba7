#!/usr/bin/python3
"""encoder-server precision on the CPU: --quantize int8 with a per-model
override, ListModels and the metrics report the precision and the CPU, and
an idle server burns no CPU time.

Usage: precision_test.py --server BIN --python-client minimal_client.py
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import unittest
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import ServerProcess  # noqa: E402

ARGS = None
SMALL = {"d_model": 64, "num_heads": 4, "num_layers": 2, "d_ff": 128}


def kernel_cpu():
    """The model name and flags as the kernel reads cpuid."""
    model, flags = "", []
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1].split()
    return model, flags


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_repo(tmp):
    """Two models of the same weights: "q" (the server's default precision)
    and "f" (float32 whatever the flags). Returns the repository's path."""
    repo = os.path.join(tmp, "repo.json")
    with open(repo, "w") as f:
        json.dump({"models": [
            {"name": "q", "config": SMALL, "seed": 1},
            {"name": "f", "config": SMALL, "seed": 1,
             "quantize": "none"}]}, f)
    return repo


def http_info(server):
    """/info of a ready server started with --http-listen."""
    with open(server.ready_file) as f:
        http_port = json.load(f)["http_port"]
    return json.load(urllib.request.urlopen(
        f"http://127.0.0.1:{http_port}/info", timeout=30))


def load_client():
    """The example client (--python-client) as a module."""
    spec = importlib.util.spec_from_file_location("client",
                                                  ARGS.python_client)
    client = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(client)
    return client


class PrecisionTest(unittest.TestCase):
    def test_int8_models_report_precision_and_cpu(self):
        client = load_client()
        with tempfile.TemporaryDirectory() as tmp:
            pb2, pb2_grpc = client.load_stubs(tmp)
            repo = write_repo(tmp)
            server = ServerProcess(
                ARGS.server, directory=tmp,
                extra_args=["--models=" + repo, "--quantize=int8",
                            "--metrics-listen=127.0.0.1:0"])
            try:
                server.wait_ready(120)
                stub = pb2_grpc.EncoderServiceStub(
                    grpc.insecure_channel(f"127.0.0.1:{server.port}"))
                listed = {m.name: m for m in
                          stub.ListModels(pb2.ListModelsRequest(),
                                          timeout=30).models}
                self.assertEqual(listed["q"].precision, "int8")
                self.assertEqual(listed["f"].precision, "float32")
                model, flags = kernel_cpu()
                # CPUID's brand string; the kernel's copy is read at boot
                # and goes stale when a virtual machine resumes on another
                # host (tests/model/cpu_features_test.cc).
                self.assertTrue(listed["q"].cpu_model.strip())
                if listed["q"].cpu_model != model:
                    print(f"note: CPUID brand {listed['q'].cpu_model!r}, "
                          f"kernel {model!r}")
                wanted = [n for n in ["avx2", "fma", "avx512f", "avx512_vnni",
                                      "avx512_bf16", "amx_bf16", "amx_int8"]
                          if n in flags]
                self.assertEqual(list(listed["q"].cpu_features), wanted)

                # The same weights (same seed) through both: int8 stays
                # close to float32.
                def pooled(name):
                    r = stub.Embed(pb2.EmbedRequest(
                        model=name, inputs=[pb2.Input(
                            token_ids=pb2.TokenIds(ids=list(range(5, 40))))]),
                        timeout=30)
                    return client.decode_tensor(pb2, r.results[0].pooled)
                q, f = pooled("q"), pooled("f")
                dot = sum(a * b for a, b in zip(q, f))
                cosine = dot / (sum(a * a for a in q) *
                                sum(b * b for b in f)) ** 0.5
                print(f"int8 vs float32 pooled cosine {cosine:.6f}")
                self.assertGreater(cosine, 0.99)
                self.assertLess(cosine, 1.0 - 1e-9)  # really quantized
                with open(server.ready_file) as f:
                    metrics_port = json.load(f)["metrics_port"]
                text = urllib.request.urlopen(
                    f"http://127.0.0.1:{metrics_port}/metrics",
                    timeout=30).read().decode()
                self.assertIn('encoder_cpu_info{', text)
                self.assertIn(f'features="{",".join(wanted) or "none"}"', text)
                self.assertRegex(text, r'encoder_model_info\{[^}]*'
                                       r'dtype="int8"[^}]*model="q"')

                # Idle: no thread spins (OpenMP/BLAS pools sleep).
                time.sleep(1)
                before = cpu_seconds(server.process.pid)
                time.sleep(5)
                idle = cpu_seconds(server.process.pid) - before
                print(f"idle server CPU time over 5 s: {idle:.2f} s")
                self.assertLess(idle, 0.25)
            finally:
                server.stop()

    def test_kernels_the_warm_up_ran_are_reported(self):
        """/info and ListModels name the library kernels each model's
        warm-up ran, from oneDNN's and MKL's own traces: an int8 model's
        products on oneDNN with u8 x s8 operands where the CPU has VNNI or
        AMX, on AMX tiles exactly where it has amx_int8; the log carries the
        same and no trace line reaches stdout."""
        client = load_client()
        _, flags = kernel_cpu()
        with tempfile.TemporaryDirectory() as tmp:
            pb2, pb2_grpc = client.load_stubs(tmp)
            repo = write_repo(tmp)
            server = ServerProcess(
                ARGS.server, directory=tmp,
                extra_args=["--models=" + repo, "--quantize=int8",
                            "--http-listen=127.0.0.1:0"])
            try:
                server.wait_ready(120)
                info = {m["name"]: m["kernels"]
                        for m in http_info(server)["models"]}
                stub = pb2_grpc.EncoderServiceStub(
                    grpc.insecure_channel(f"127.0.0.1:{server.port}"))
                listed = {m.name: m for m in
                          stub.ListModels(pb2.ListModelsRequest(),
                                          timeout=30).models}
            finally:
                server.stop()
            with open(server.log_path) as f:
                log = f.read()
        print(f"kernels: {json.dumps(info, indent=1)}")
        for name in ("q", "f"):
            # Every model's float32 or int8 products ran somewhere.
            self.assertTrue(info[name]["ran"], name)
            self.assertEqual(len(listed[name].kernels),
                             len(info[name]["ran"]))
            self.assertEqual(listed[name].onednn_isa,
                             info[name]["onednn_isa"])
            self.assertIn(f"model {name}: kernels (", log)
        self.assertNotIn("onednn_verbose", log)
        self.assertNotIn("MKL_VERBOSE", log)
        if "avx512_vnni" in flags or "amx_int8" in flags:
            int8 = [k for k in info["q"]["ran"] if k["library"] == "onednn"
                    and k["types"].startswith("u8:s8")]
            self.assertTrue(int8, info["q"])
            self.assertTrue(all(k["rows"][0] >= 1 for k in int8))
            self.assertEqual(
                any("amx" in k["implementation"] for k in int8),
                "amx_int8" in flags, int8)
            self.assertTrue(any("u8:s8->" in k for k in listed["q"].kernels),
                            list(listed["q"].kernels))

    def test_int8_models_are_packed_only_when_asked(self):
        """--pack-weights=auto leaves an int8 model's float32 weights plain
        (they serve full-precision passes only); true packs them too. The
        float32 model's weights (width 64: at most 12,288 elements) are
        under auto's --packed-min-elements, so auto leaves them plain too
        unless the limit is set to 0, and /info says the limit."""
        flags = kernel_cpu()[1]
        with tempfile.TemporaryDirectory() as tmp:
            repo = write_repo(tmp)
            kernels, limits = {}, {}
            for mode in ("auto", "true", "auto,0"):
                server = ServerProcess(
                    ARGS.server, directory=tmp,
                    extra_args=["--models=" + repo, "--quantize=int8",
                                "--pack-weights=" + mode.split(",")[0],
                                "--http-listen=127.0.0.1:0"] +
                    (["--packed-min-elements=0"] if "," in mode else []))
                try:
                    server.wait_ready(120)
                    models = http_info(server)["models"]
                    kernels[mode] = {m["name"]: m["linear_kernel"]
                                     for m in models}
                    limits[mode] = {m["name"]: m["packed_min_elements"]
                                    for m in models}
                finally:
                    server.stop()
            print(f"linear kernels: {kernels}, min elements: {limits}")
            self.assertEqual(kernels["auto"]["q"], "plain")
            self.assertEqual(kernels["auto"]["f"], "plain")
            self.assertEqual(limits["auto"], {"q": 0, "f": 0})
            # true packs wherever this LibTorch can (the float32 model
            # shows whether it can), int8 models alike, small weights too.
            self.assertIn(kernels["true"]["f"], ("packed", "plain"))
            self.assertEqual(kernels["true"]["q"], kernels["true"]["f"])
            self.assertEqual(limits["true"], {"q": 0, "f": 0})
            # auto with no limit packs the float32 model where AVX-512
            # makes packing the faster and this LibTorch can (an ISA cap
            # in the environment decides as the CPU it names).
            capped = any(os.environ.get(v) for v in
                         ("ENCODER_CPU_ISA", "ONEDNN_MAX_CPU_ISA"))
            if capped:
                self.assertIn(kernels["auto,0"]["f"], ("packed", "plain"))
            elif "avx512f" in flags and kernels["true"]["f"] == "packed":
                self.assertEqual(kernels["auto,0"]["f"], "packed")
            else:
                self.assertEqual(kernels["auto,0"]["f"], "plain")
            self.assertEqual(kernels["auto,0"]["q"], "plain")

    def test_bfloat16_models_are_packed_where_native(self):
        """--dtype=bfloat16: --pack-weights=auto packs every product where
        the CPU multiplies bfloat16 natively (/info says so), false leaves
        them plain; the two give the same vector within bfloat16 rounding.
        Emulated bfloat16 (--force-dtype) is never packed."""
        client = load_client()
        flags = kernel_cpu()[1]
        native = "avx512_bf16" in flags or "amx_bf16" in flags
        ids = list(range(5, 70))
        with tempfile.TemporaryDirectory() as tmp:
            pb2, pb2_grpc = client.load_stubs(tmp)
            repo = write_repo(tmp)
            got, kernels, rows = {}, {}, {}
            for mode in ("auto", "false"):
                server = ServerProcess(
                    ARGS.server, directory=tmp,
                    extra_args=["--models=" + repo, "--dtype=bfloat16",
                                "--force-dtype", "--pack-weights=" + mode,
                                "--http-listen=127.0.0.1:0"])
                try:
                    server.wait_ready(120)
                    models = {m["name"]: m for m in
                              http_info(server)["models"]}
                    kernels[mode] = models["q"]["linear_kernel"]
                    rows[mode] = models["q"]["packed_max_rows"]
                    stub = pb2_grpc.EncoderServiceStub(
                        grpc.insecure_channel(f"127.0.0.1:{server.port}"))
                    r = stub.Embed(pb2.EmbedRequest(
                        model="q", inputs=[pb2.Input(
                            token_ids=pb2.TokenIds(ids=ids))]), timeout=30)
                    got[mode] = client.decode_tensor(pb2, r.results[0].pooled)
                finally:
                    server.stop()
            print(f"bfloat16 linear kernels: {kernels}, max rows {rows}")
            self.assertEqual(kernels["false"], "plain")
            self.assertEqual(kernels["auto"], "packed" if native else "plain")
            if native:
                self.assertEqual(rows["auto"], 0)  # every product

            def cosine(a, b):
                return sum(x * y for x, y in zip(a, b)) / (
                    sum(x * x for x in a) * sum(y * y for y in b)) ** 0.5
            c = cosine(got["auto"], got["false"])
            print(f"bfloat16 pooled cosine, packed vs plain: {c:.7f}")
            self.assertGreater(c, 0.999)

    def test_int8_attention_follows_the_flag(self):
        """--int8-attention: /info names the kernel, bfloat16 attention
        stays within rounding of float32 attention, and a CPU or head size
        it cannot run on is refused at start."""
        client = load_client()
        native = "avx512_bf16" in kernel_cpu()[1]
        # Heads of 32 channels (the kernel's smallest) and of 16 (none).
        heads32 = dict(SMALL, num_heads=2)
        with tempfile.TemporaryDirectory() as tmp:
            pb2, pb2_grpc = client.load_stubs(tmp)
            repo = os.path.join(tmp, "repo.json")
            with open(repo, "w") as f:
                json.dump({"models": [
                    {"name": "q", "config": heads32, "seed": 3,
                     "quantize": "int8"},
                    {"name": "small_heads", "config": SMALL, "seed": 3,
                     "quantize": "int8"}]}, f)
            kernels, embeddings = {}, {}
            ids = [(i * 7919) % 900 + 5 for i in range(150)]
            for mode in ("auto", "float32"):
                server = ServerProcess(
                    ARGS.server, directory=tmp,
                    extra_args=["--models=" + repo, "--int8-attention=" + mode,
                                "--http-listen=127.0.0.1:0"])
                try:
                    server.wait_ready(120)
                    kernels[mode] = {m["name"]: m["attention_kernel"]
                                     for m in http_info(server)["models"]}
                    stub = pb2_grpc.EncoderServiceStub(
                        grpc.insecure_channel(f"127.0.0.1:{server.port}"))
                    r = stub.Embed(pb2.EmbedRequest(
                        model="q", inputs=[pb2.Input(
                            token_ids=pb2.TokenIds(ids=ids))]), timeout=30)
                    embeddings[mode] = client.decode_tensor(
                        pb2, r.results[0].pooled)
                finally:
                    server.stop()
            print(f"attention kernels: {kernels}")
            self.assertIn(kernels["float32"]["q"], ("fused", "explicit"))
            self.assertEqual(kernels["auto"]["small_heads"],
                             kernels["float32"]["q"])
            self.assertEqual(kernels["auto"]["q"],
                             "bfloat16" if native else kernels["float32"]["q"])
            a, b = embeddings["auto"], embeddings["float32"]
            cosine = sum(x * y for x, y in zip(a, b)) / (
                sum(x * x for x in a) * sum(y * y for y in b)) ** 0.5
            print(f"int8 pooled cosine, auto vs float32 attention: "
                  f"{cosine:.7f}")
            self.assertGreater(cosine, 0.9999)
            if native:
                self.assertNotEqual(a, b)  # really another kernel

            # bfloat16 where it cannot run: refused at start, by name.
            server = ServerProcess(
                ARGS.server, directory=tmp,
                extra_args=["--models=" + repo, "--int8-attention=bfloat16"])
            try:
                with self.assertRaises(RuntimeError) as refused:
                    server.wait_ready(120)
            finally:
                server.stop()
            self.assertIn("bfloat16", str(refused.exception))
            self.assertIn("avx512_bf16" if not native else "16 channels",
                          str(refused.exception))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
