#!/usr/bin/python3
"""End-to-end tests of encoder-client (and the Python example client)
against a real encoder-server on a loopback port.

Usage: client_cli_test.py --server PATH --client PATH --python-client PATH
       [unittest arguments]

The server is started once with --listen=127.0.0.1:0 and a ready file in a
temporary directory, and is killed when the tests end, pass or fail.
"""

import argparse
import json
import math
import re
import sys
import unittest

import server_process
from server_process import ServerProcess

ARGS = None  # parsed command line, set in __main__
MODELS = ["none", "sinusoidal", "learned", "rope", "alibi", "relative"]
VOCAB_SIZE = 10000
D_MODEL = 512
READY_TIMEOUT_S = 180
CALL_TIMEOUT_S = 120


def run(command, timeout=CALL_TIMEOUT_S):
    return server_process.run(command, timeout)


class ClientCliTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(ARGS.server)
        try:
            cls.server.wait_ready(READY_TIMEOUT_S)
        except BaseException:
            cls.server.stop()
            raise
        cls.target = f"127.0.0.1:{cls.server.port}"
        cls.models = cls.list_models()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    @classmethod
    def client(cls, subcommand, *args, timeout=CALL_TIMEOUT_S):
        return run([ARGS.client, subcommand, "--target", cls.target,
                    "--deadline-ms", "60000", *args], timeout=timeout)

    @classmethod
    def list_models(cls):
        result = cls.client("models")
        if result.returncode != 0:
            raise RuntimeError(f"models failed: {result.stderr}")
        return {m["name"]: m for m in json.loads(result.stdout)["models"]}

    def client_json(self, subcommand, *args):
        result = self.client(subcommand, *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def assert_rpc_error(self, result, code):
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn(f"error: {code}: ", result.stderr)

    def test_health_is_serving(self):
        for service in ["", "encoder.v1.EncoderService"]:
            result = self.client("health", "--service", service)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stdout.strip(), "SERVING")

    def test_health_of_unknown_service_fails(self):
        result = self.client("health", "--service", "no.such.Service")
        self.assertNotEqual(result.returncode, 0)

    def test_models_lists_six_builtin_schemes(self):
        response = self.client_json("models")
        self.assertEqual(response["default_model"], "sinusoidal")
        schemes = {m["name"]: m["positional"]["scheme"]
                   for m in response["models"]}
        self.assertEqual(schemes, {name: name for name in MODELS})
        for model in response["models"]:
            self.assertEqual(model["vocab_size"], VOCAB_SIZE)
            self.assertEqual(model["d_model"], D_MODEL)
            self.assertEqual(model["is_default"],
                             model["name"] == "sinusoidal")

    def test_tokenize_and_decode_with_the_byte_tokenizer(self):
        response = self.client_json("tokenize", "--model", "rope",
                                    "--text", "Hé", "--text", "abcdef",
                                    "--truncate", "--max-length", "4",
                                    "--truncation-side", "left")
        self.assertEqual(response["tokenizer"], "byte")
        first, second = response["encodings"]
        # Byte b is id b + 4; left truncation to 4 keeps [CLS] (1) and
        # [SEP] (2) around the last bytes: 'é' = 0xc3 0xa9.
        self.assertEqual([int(i) for i in first["ids"]],
                         [1, 4 + 0xC3, 4 + 0xA9, 2])
        self.assertEqual(first["tokens"][0], "[CLS]")
        self.assertEqual([int(i) for i in second["ids"]],
                         [1, 4 + ord("e"), 4 + ord("f"), 2])
        self.assertTrue(second["truncated"])
        decoded = self.client_json("decode", "--model", "rope", "--ids",
                                   "1,76,199,173,2", "--skip-special-tokens")
        self.assertEqual(decoded["texts"], ["Hé"])
        self.assert_rpc_error(
            self.client("decode", "--model", "rope", "--ids", "1,999999"),
            "INVALID_ARGUMENT")

    def test_embed_text_on_every_model(self):
        text = "héllo, encoder"  # 15 UTF-8 bytes
        for name in MODELS:
            with self.subTest(model=name):
                response = self.client_json("embed", "--model", name,
                                            "--text", text)
                self.assertEqual(response["model"], name)
                [result] = response["results"]
                self.assertEqual(len(result["pooled"]), D_MODEL)
                self.assertTrue(all(math.isfinite(v)
                                    for v in result["pooled"]))
                self.assertEqual(result["num_tokens"],
                                 len(text.encode()) + 2)
                self.assertFalse(result["truncated"])
                self.assertGreaterEqual(result["batch"]["batch_size"], 1)

    def test_embed_keeps_input_order_and_options(self):
        response = self.client_json(
            "embed", "--text", "a", "--ids", "5,6,7,8", "--text", "bcd",
            "--normalize", "--tokens")
        self.assertEqual([r["num_tokens"] for r in response["results"]],
                         [3, 4, 5])
        for result in response["results"]:
            norm = math.sqrt(sum(v * v for v in result["pooled"]))
            self.assertAlmostEqual(norm, 1.0, places=4)
            tokens = result["token_embeddings"]
            self.assertEqual(len(tokens), result["num_tokens"])
            self.assertEqual({len(row) for row in tokens}, {D_MODEL})

    def assert_rows_sum_to_one(self, maps, rank):
        """maps: nested lists of rank `rank`; its last axis are the rows."""
        if rank == 2:
            for row in maps:
                self.assertAlmostEqual(sum(row), 1.0, delta=1e-4)
                self.assertTrue(all(v >= 0 for v in row))
            return
        for sub in maps:
            self.assert_rows_sum_to_one(sub, rank - 1)

    def test_attention_maps_are_row_stochastic(self):
        text = "attention!"
        seq = len(text) + 2
        for name in MODELS:
            with self.subTest(model=name):
                heads = self.models[name]["num_heads"]
                response = self.client_json(
                    "embed", "--model", name, "--text", text,
                    "--attention-layers", "0,1")
                [result] = response["results"]
                attention = result["attention"]
                self.assertEqual(attention["shape"], [2, heads, seq, seq])
                self.assertEqual(result["attention_layers"], [0, 1])
                self.assert_rows_sum_to_one(attention["values"], 4)

    def test_averaged_selected_heads(self):
        response = self.client_json(
            "embed", "--model", "alibi", "--ids", "1,2,3,4",
            "--attention-layers", "0", "--attention-heads", "0,3",
            "--average-heads", "--attention-stats")
        [result] = response["results"]
        self.assertEqual(result["attention"]["shape"], [1, 4, 4])
        self.assert_rows_sum_to_one(result["attention"]["values"], 3)
        model = self.models["alibi"]
        self.assertEqual(len(result["attention_stats"]),
                         model["num_layers"] * model["num_heads"])

    def test_hidden_states(self):
        model = self.models["rope"]
        layers, width = model["num_layers"], model["d_model"]
        response = self.client_json(
            "embed", "--model", "rope", "--ids", "1,2,3,4", "--tokens",
            "--hidden-states=-1,0")
        [result] = response["results"]
        self.assertEqual(result["hidden_state_layers"], [layers, 0])
        states = result["hidden_states"]
        self.assertEqual(states["shape"], [2, 4, width])
        # Post-norm built-in model: the last hidden state is the output.
        self.assertEqual(states["values"][0], result["token_embeddings"])
        pooled = self.client_json(
            "embed", "--model", "rope", "--ids", "1,2,3,4", "--pooling",
            "first", "--hidden-states", "0", "--pool-hidden-states")
        [result] = pooled["results"]
        self.assertEqual(result["hidden_states"]["shape"], [1, width])
        self.assertEqual(result["hidden_states"]["values"][0],
                         states["values"][1][0])
        self.assert_rpc_error(self.client(
            "embed", "--model", "rope", "--ids", "1,2",
            f"--hidden-states={layers + 1}"), "INVALID_ARGUMENT")

    def test_unknown_model_is_not_found(self):
        result = self.client("embed", "--model", "no-such-model",
                             "--text", "x")
        self.assert_rpc_error(result, "NOT_FOUND")

    def test_token_id_beyond_vocabulary_is_invalid(self):
        result = self.client("embed", "--ids", f"1,{VOCAB_SIZE}")
        self.assert_rpc_error(result, "INVALID_ARGUMENT")
        self.client_json("embed", "--ids", f"1,{VOCAB_SIZE - 1}")

    def test_usage_errors_exit_2(self):
        self.assertEqual(self.client("embed").returncode, 2)
        self.assertEqual(self.client("embed", "--ids", "1,x").returncode, 2)
        self.assertEqual(self.client("diagnose", "--text", "a", "--probes",
                                     "bogus").returncode, 2)

    def test_diagnose_permutation(self):
        for name, equivariant in [("none", True), ("sinusoidal", False)]:
            with self.subTest(model=name):
                response = self.client_json(
                    "diagnose", "--model", name, "--random-length", "12",
                    "--seed", "3", "--probes", "permutation")
                self.assertEqual(response["scheme"], name)
                self.assertEqual(len(response["token_ids"]), 12)
                self.assertEqual(response["permutation"]["equivariant"],
                                 equivariant)

    def test_diagnose_extrapolation(self):
        response = self.client_json(
            "diagnose", "--model", "learned", "--ids", "5,6,7",
            "--extrapolation", "--lengths", "8,512,600", "--prefix-length",
            "4")
        probe = response["extrapolation"]
        self.assertNotIn("permutation", response)  # only this probe ran
        self.assertEqual(probe["trained_length"], 512)
        self.assertEqual(probe["prefix_length"], 4)
        self.assertEqual(probe["source_ids"], [5, 6, 7])
        points = probe["points"]
        self.assertEqual([p["length"] for p in points], [8, 512, 600])
        self.assertEqual([p.get("ran", False) for p in points],
                         [True, True, False])
        self.assertIn("512 positions", points[2]["skipped_reason"])
        self.assertEqual(len(points[1]["entropy"]), 4)  # one per layer
        # Over the server's limit (2048): a usage of the RPC, not a crash.
        result = self.client("diagnose", "--model", "rope", "--ids", "5",
                             "--extrapolation", "--lengths", "8,4096")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("INVALID_ARGUMENT", result.stderr)
        self.assertIn("2048", result.stderr)

    def check_bench(self, *extra):
        result = self.client("bench", "--requests", "24", "--concurrency",
                             "4", "--min-length", "8", "--max-length", "24",
                             "--inputs-per-request", "2", "--json", *extra)
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        self.assertEqual(report["requests"], 24)
        self.assertEqual(report["failed_requests"], 0)
        self.assertEqual(report["errors"], {})
        self.assertGreater(report["throughput"]["requests_per_s"], 0)
        throughput = report["throughput"]
        self.assertAlmostEqual(throughput["sequences_per_s"],
                               2 * throughput["requests_per_s"],
                               delta=1e-9 * throughput["sequences_per_s"])
        latency = report["latency_ms"]
        self.assertTrue(0 < latency["p50"] <= latency["p90"]
                        <= latency["p99"] <= latency["max"])
        histogram = report["batch_size"]["histogram"]
        self.assertEqual(sum(histogram.values()), 48)
        self.assertGreaterEqual(report["batch_size"]["mean"], 1.0)
        return report

    def test_bench_unary(self):
        self.assertEqual(self.check_bench()["mode"], "unary")

    def test_bench_stream(self):
        self.assertEqual(self.check_bench("--stream")["mode"], "stream")

    def test_python_example_client(self):
        result = run(["/usr/bin/python3", ARGS.python_client,
                      "--target", self.target, "--text", "abc"])
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.strip().splitlines()
        self.assertEqual(sorted(line.split()[0] for line in lines),
                         sorted(MODELS))
        for line in lines:
            fields = dict(re.findall(r"(\w+)=\s*(\S+)", line))
            self.assertEqual(int(fields["tokens"]), 5)
            self.assertEqual(int(fields["dim"]), D_MODEL)
            self.assertGreater(float(fields["pooled_norm"]), 0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
