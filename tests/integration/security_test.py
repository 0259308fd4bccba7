#!/usr/bin/python3
"""TLS, mutual TLS, bearer tokens, health, reflection and the metrics
endpoint's TLS and basic auth, against real encoder-server processes on
loopback. Certificates are generated here with openssl.

Usage: security_test.py --server BIN --client BIN --python-client PY
"""
import argparse
import base64
import importlib.util
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import ServerProcess  # noqa: E402

ARGS = None
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
HEALTH_WATCH = "/grpc.health.v1.Health/Watch"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
# ServerReflectionRequest{list_services: "*"} (field 7, a string).
LIST_SERVICES = b"\x3a\x01*"
TOKENS = ["tok-current-7f3a", "tok-next-91bc"]
# A small model so that the servers start in seconds.
REPOSITORY = ('{"models": [{"name": "tiny", "seed": 3, "config": '
              '{"vocab_size": 300, "d_model": 32, "num_heads": 4, '
              '"num_layers": 1, "d_ff": 64}}]}')


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=60)


def make_ca(directory, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.pem", cwd=directory)


def make_leaf(directory, name, ca, server):
    """A key and certificate for `name` signed by `ca`."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory)
    ext = os.path.join(directory, f"{name}.ext")
    with open(ext, "w") as f:
        if server:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                    "extendedKeyUsage=serverAuth\n")
        else:
            f.write("extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
            "-CAkey", f"{ca}.key", "-CAcreateserial", "-days", "2",
            "-extfile", ext, "-out", f"{name}.pem", cwd=directory)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def load_stubs(directory):
    spec = importlib.util.spec_from_file_location("encoder_client",
                                                  ARGS.python_client)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_stubs(directory)


class SecurityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="encoder-sec-")
        d = cls.dir = cls.tmp.name
        make_ca(d, "ca")
        make_ca(d, "other_ca")
        make_leaf(d, "server", "ca", server=True)
        make_leaf(d, "client", "ca", server=False)
        make_leaf(d, "stranger", "other_ca", server=False)
        with open(cls.path("tokens"), "w") as f:
            f.write("# current and next\n" + "\n".join(TOKENS) + "\n")
        with open(cls.path("token"), "w") as f:
            f.write(TOKENS[1] + "\n")
        with open(cls.path("users"), "w") as f:
            f.write("prom:scrape-pass\n")
        with open(cls.path("repo.json"), "w") as f:
            f.write(REPOSITORY)
        cls.pb2, cls.pb2_grpc = load_stubs(d)
        common = [f"--models={cls.path('repo.json')}", "--no-warm-up",
                  f"--tls-cert={cls.path('server.pem')}",
                  f"--tls-key={cls.path('server.key')}",
                  f"--auth-token-file={cls.path('tokens')}",
                  "--metrics-listen=127.0.0.1:0"]
        # tls: server TLS, reflection on, health open, metrics over HTTPS
        # with basic auth.
        cls.tls = ServerProcess(ARGS.server, extra_args=common + [
            f"--metrics-tls-cert={cls.path('server.pem')}",
            f"--metrics-tls-key={cls.path('server.key')}",
            f"--metrics-basic-auth-file={cls.path('users')}"])
        # mtls: client certificates required, health closed, no reflection.
        cls.mtls = ServerProcess(ARGS.server, extra_args=common + [
            f"--tls-client-ca={cls.path('ca.pem')}", "--auth-health",
            "--reflection=false", "--health-listen=127.0.0.1:0"])
        for server in (cls.tls, cls.mtls):
            server.wait_ready(120)
        cls.ca = read(cls.path("ca.pem"))

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    @classmethod
    def tearDownClass(cls):
        for server in (cls.tls, cls.mtls):
            server.stop()
        cls.tmp.cleanup()

    def channel(self, server, ca="ca", client=None, plaintext=False):
        target = f"127.0.0.1:{server.port}"
        if plaintext:
            return grpc.insecure_channel(target)
        creds = grpc.ssl_channel_credentials(
            root_certificates=read(self.path(f"{ca}.pem")),
            private_key=read(self.path(f"{client}.key")) if client else None,
            certificate_chain=read(self.path(f"{client}.pem")) if client
            else None)
        return grpc.secure_channel(target, creds)

    def list_models(self, channel, token=None):
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        stub = self.pb2_grpc.EncoderServiceStub(channel)
        return stub.ListModels(self.pb2.ListModelsRequest(), timeout=10,
                               metadata=metadata)

    def assertCode(self, code, call):
        with self.assertRaises(grpc.RpcError) as caught:
            call()
        self.assertEqual(caught.exception.code(), code,
                         caught.exception.details())
        return caught.exception

    # --- transport ---

    def test_plaintext_client_to_tls_server_fails(self):
        with self.channel(self.tls, plaintext=True) as ch:
            self.assertCode(grpc.StatusCode.UNAVAILABLE,
                            lambda: self.list_models(ch, TOKENS[0]))

    def test_wrong_ca_fails(self):
        with self.channel(self.tls, ca="other_ca") as ch:
            self.assertCode(grpc.StatusCode.UNAVAILABLE,
                            lambda: self.list_models(ch, TOKENS[0]))

    def test_tls_with_token_succeeds(self):
        with self.channel(self.tls) as ch:
            models = self.list_models(ch, TOKENS[0])
        self.assertEqual([m.name for m in models.models], ["tiny"])
        self.assertEqual(models.models[0].weights, "seed:3")

    def test_mtls_without_client_certificate_fails(self):
        with self.channel(self.mtls) as ch:
            self.assertCode(grpc.StatusCode.UNAVAILABLE,
                            lambda: self.list_models(ch, TOKENS[0]))

    def test_mtls_with_untrusted_client_certificate_fails(self):
        with self.channel(self.mtls, client="stranger") as ch:
            self.assertCode(grpc.StatusCode.UNAVAILABLE,
                            lambda: self.list_models(ch, TOKENS[0]))

    def test_mtls_with_everything_right_succeeds(self):
        with self.channel(self.mtls, client="client") as ch:
            models = self.list_models(ch, TOKENS[1])
        self.assertEqual(models.default_model, "tiny")

    # --- tokens ---

    def test_token_missing_or_wrong_is_unauthenticated(self):
        with self.channel(self.tls) as ch:
            missing = self.assertCode(grpc.StatusCode.UNAUTHENTICATED,
                                      lambda: self.list_models(ch))
            self.assertIn("authorization: Bearer", missing.details())
            wrong = self.assertCode(
                grpc.StatusCode.UNAUTHENTICATED,
                lambda: self.list_models(ch, TOKENS[0] + "x"))
            self.assertNotIn(TOKENS[0], wrong.details())
            stub = self.pb2_grpc.EncoderServiceStub(ch)
            request = self.pb2.EmbedRequest(
                model="tiny", inputs=[self.pb2.Input(text="hi")])
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED,
                            lambda: stub.Embed(request, timeout=10))
            self.assertCode(
                grpc.StatusCode.UNAUTHENTICATED,
                lambda: list(stub.EmbedStream(iter([request]), timeout=10)))
            response = stub.Embed(
                request, timeout=10,
                metadata=(("authorization", f"Bearer {TOKENS[0]}"),))
            self.assertGreater(response.results[0].num_tokens, 0)

    def test_health_open_unless_closed(self):
        with self.channel(self.tls) as ch:
            check = ch.unary_unary(HEALTH_CHECK)
            self.assertEqual(check(b"", timeout=10), b"\x08\x01")  # SERVING
        with self.channel(self.mtls, client="client") as ch:
            check = ch.unary_unary(HEALTH_CHECK)
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED,
                            lambda: check(b"", timeout=10))
            self.assertEqual(
                check(b"", timeout=10,
                      metadata=(("authorization", f"Bearer {TOKENS[0]}"),)),
                b"\x08\x01")

    def test_health_watch_open_unless_closed(self):
        def first_update(ch, metadata=None):
            watch = ch.unary_stream(HEALTH_WATCH)
            call = watch(b"", timeout=10, metadata=metadata)
            try:
                return next(call)
            finally:
                call.cancel()

        with self.channel(self.tls) as ch:
            self.assertEqual(first_update(ch), b"\x08\x01")  # SERVING
        with self.channel(self.mtls, client="client") as ch:
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED,
                            lambda: first_update(ch))
            self.assertEqual(
                first_update(
                    ch, (("authorization", f"Bearer {TOKENS[0]}"),)),
                b"\x08\x01")

    def test_reflection_needs_a_token_and_can_be_off(self):
        with self.channel(self.tls) as ch:
            info = ch.stream_stream(REFLECTION)
            # Without a token every reply is emptied, then the call fails.
            replies = []
            self.assertCode(
                grpc.StatusCode.UNAUTHENTICATED,
                lambda: replies.extend(info(iter([LIST_SERVICES]),
                                            timeout=10)))
            self.assertNotIn(b"EncoderService", b"".join(replies))
            replies = list(info(
                iter([LIST_SERVICES]), timeout=10,
                metadata=(("authorization", f"Bearer {TOKENS[0]}"),)))
            self.assertIn(b"encoder.v1.EncoderService", b"".join(replies))
        with self.channel(self.mtls, client="client") as ch:
            info = ch.stream_stream(REFLECTION)
            self.assertCode(
                grpc.StatusCode.UNIMPLEMENTED,
                lambda: list(info(
                    iter([LIST_SERVICES]), timeout=10,
                    metadata=(("authorization", f"Bearer {TOKENS[0]}"),))))

    def test_plaintext_health_port_serves_health_only(self):
        import json
        with open(self.mtls.ready_file) as f:
            port = json.load(f)["health_port"]
        self.assertGreater(port, 0)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            check = ch.unary_unary(HEALTH_CHECK)
            self.assertEqual(check(b"", timeout=10), b"\x08\x01")
            self.assertCode(grpc.StatusCode.UNIMPLEMENTED,
                            lambda: self.list_models(ch, TOKENS[0]))

    # --- metrics endpoint ---

    def scrape(self, server, user=None):
        context = ssl.create_default_context(cafile=self.path("ca.pem"))
        request = urllib.request.Request(
            f"https://127.0.0.1:{self.metrics_port(server)}/metrics")
        if user:
            request.add_header(
                "Authorization",
                "Basic " + base64.b64encode(user.encode()).decode())
        with urllib.request.urlopen(request, context=context,
                                    timeout=10) as response:
            return response.read().decode()

    @staticmethod
    def metrics_port(server):
        import json
        with open(server.ready_file) as f:
            return json.load(f)["metrics_port"]

    def test_metrics_https_basic_auth_and_failure_counter(self):
        with self.channel(self.tls) as ch:
            for _ in range(3):
                self.assertCode(grpc.StatusCode.UNAUTHENTICATED,
                                lambda: self.list_models(ch))
            self.assertCode(grpc.StatusCode.UNAUTHENTICATED,
                            lambda: self.list_models(ch, "nope"))
        with self.assertRaises(urllib.error.HTTPError) as caught:
            self.scrape(self.tls)
        self.assertEqual(caught.exception.code, 401)
        with self.assertRaises(urllib.error.HTTPError) as caught:
            self.scrape(self.tls, "prom:wrong")
        self.assertEqual(caught.exception.code, 401)
        text = self.scrape(self.tls, "prom:scrape-pass")
        counts = dict(re.findall(
            r'encoder_auth_failures_total\{reason="(\w+)"\} (\d+)', text))
        # Other tests of this class add failures too: at least these.
        self.assertGreaterEqual(int(counts["missing"]), 3)
        self.assertGreaterEqual(int(counts["invalid"]), 1)
        # Plain HTTP to the HTTPS endpoint gets no metrics.
        with self.assertRaises(Exception):
            urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port(self.tls)}/metrics",
                timeout=5).read()
        # No token ever reaches the log.
        for server in (self.tls, self.mtls):
            log = server.log_tail(10000)
            for token in TOKENS:
                self.assertNotIn(token, log)

    def test_http_front_https_and_bearer_tokens(self):
        """The HTTP front takes the gRPC port's tokens; on the mtls server it
        inherits --tls-cert and requires a client certificate."""
        import json
        body = json.dumps({"input": [[1, 2, 3]]}).encode()

        def post(server, token=None, client=None):
            context = ssl.create_default_context(cafile=self.path("ca.pem"))
            if client:
                context.load_cert_chain(self.path(f"{client}.pem"),
                                        self.path(f"{client}.key"))
            request = urllib.request.Request(
                f"https://127.0.0.1:{self.metrics_port(server)}"
                "/v1/embeddings", data=body,
                headers={"Content-Type": "application/json"})
            if token:
                request.add_header("Authorization", f"Bearer {token}")
            with urllib.request.urlopen(request, context=context,
                                        timeout=30) as response:
                return json.loads(response.read())

        reply = post(self.tls, TOKENS[0])
        self.assertEqual(len(reply["data"][0]["embedding"]), 32)
        for token in (None, "nope"):
            with self.assertRaises(urllib.error.HTTPError) as caught:
                post(self.tls, token)
            self.assertEqual(caught.exception.code, 401)
        reply = post(self.mtls, TOKENS[1], client="client")
        self.assertEqual(reply["object"], "list")
        with self.assertRaises((ssl.SSLError, urllib.error.URLError,
                                ConnectionError)):
            post(self.mtls, TOKENS[1])

    # --- clients ---

    def test_cpp_client_flags(self):
        base = [ARGS.client, "models", f"--target=127.0.0.1:{self.mtls.port}"]
        creds = [f"--ca={self.path('ca.pem')}",
                 f"--cert={self.path('client.pem')}",
                 f"--key={self.path('client.key')}"]
        ok = subprocess.run(base + creds +
                            [f"--token-file={self.path('token')}"],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("tiny", ok.stdout)
        no_token = subprocess.run(base + creds, capture_output=True,
                                  text=True, timeout=60)
        self.assertEqual(no_token.returncode, 1)
        self.assertIn("UNAUTHENTICATED", no_token.stderr)
        health = subprocess.run(
            [ARGS.client, "health", f"--target=127.0.0.1:{self.tls.port}",
             "--tls", f"--ca={self.path('ca.pem')}"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(health.returncode, 0, health.stderr)
        bad = subprocess.run(base + ["--cert=" + self.path("client.pem")],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--cert and --key go together", bad.stderr)

    def test_python_client_flags(self):
        result = subprocess.run(
            ["/usr/bin/python3", ARGS.python_client,
             f"--target=127.0.0.1:{self.mtls.port}",
             f"--ca={self.path('ca.pem')}",
             f"--cert={self.path('client.pem')}",
             f"--key={self.path('client.key')}",
             f"--token-file={self.path('token')}"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("tiny", result.stdout)


class TokenReloadTest(unittest.TestCase):
    def test_sighup_rotates_tokens(self):
        with tempfile.TemporaryDirectory() as d:
            tokens = os.path.join(d, "tokens")
            repo = os.path.join(d, "repo.json")
            with open(tokens, "w") as f:
                f.write("first\n")
            with open(repo, "w") as f:
                f.write(REPOSITORY)
            server = ServerProcess(ARGS.server, extra_args=[
                f"--models={repo}", "--no-warm-up",
                f"--auth-token-file={tokens}"])
            try:
                server.wait_ready(120)
                pb2, pb2_grpc = load_stubs(d)
                with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
                    stub = pb2_grpc.EncoderServiceStub(ch)

                    def call(token):
                        return stub.ListModels(
                            pb2.ListModelsRequest(), timeout=10,
                            metadata=(("authorization", f"Bearer {token}"),))
                    call("first")
                    with open(tokens, "w") as f:
                        f.write("second\n")
                    server.process.send_signal(signal.SIGHUP)
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline:
                        try:
                            call("second")
                            break
                        except grpc.RpcError:
                            time.sleep(0.1)
                    call("second")
                    with self.assertRaises(grpc.RpcError) as caught:
                        call("first")
                    self.assertEqual(caught.exception.code(),
                                     grpc.StatusCode.UNAUTHENTICATED)
            finally:
                self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
