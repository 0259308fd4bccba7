"""The CPU image's runtime stage, without a container engine.

deploy/Dockerfile copies into a bare Debian only what scripts/libtorch.sh
unpacked, less the headers and CMake files (torch/lib and nvidia/.../lib),
plus the two binaries, and sets ENCODER_HEALTH_LISTEN for its HEALTHCHECK.
This test builds the same tree in a temporary prefix from the LibTorch the
build links (the libraries libtorch.sh keeps, read from the script itself,
so that a library dropped there fails here) and checks that:

- every LibTorch and CUDA runtime library the server loads resolves inside
  that prefix (ldd), none is missing;
- the server starts from it with the image's ENTRYPOINT flags (addresses
  on 127.0.0.1 port 0 here) and TLS on the gRPC port, and the image's
  HEALTHCHECK command, `encoder-client health` on the health port that
  ENCODER_HEALTH_LISTEN opens, reports SERVING; the same check on the TLS
  gRPC port without TLS fails, so the health check really is independent
  of the port's TLS;
- an --health-listen flag (what deploy/k8s passes) replaces the
  environment default instead of clashing with it.
The Debian packages the other libraries come from: image_packages_test.py.
"""
import os
import re
import shutil
import subprocess

import deploy_util as du


def kept_libraries(source_dir):
    """TORCH_LIBS and CUDA_LIBS of scripts/libtorch.sh."""
    with open(os.path.join(source_dir, "scripts", "libtorch.sh")) as f:
        text = f.read()
    libs = {}
    for name in ("TORCH_LIBS", "CUDA_LIBS"):
        match = re.search(name + r"\s*=\s*\{([^}]*)\}", text)
        if not match:
            raise du.CheckFailed(f"no {name} in scripts/libtorch.sh")
        libs[name] = re.findall(r'"([^"]+)"', match.group(1))
    return libs


def find_below(root, base):
    for d, _, files in os.walk(root):
        if base in files:
            return os.path.join(d, base)
    return None


def make_prefix(torch_dir, libs, prefix):
    """prefix/torch/lib and prefix/nvidia/.../lib as the image has them."""
    os.makedirs(os.path.join(prefix, "torch", "lib"))
    for base in libs["TORCH_LIBS"]:
        shutil.copy2(os.path.join(torch_dir, "lib", base),
                     os.path.join(prefix, "torch", "lib", base))
    nvidia = os.path.join(os.path.dirname(torch_dir), "nvidia")
    for base in libs["CUDA_LIBS"]:
        found = find_below(nvidia, base)
        if not found:
            raise du.CheckFailed(f"{base} not under {nvidia}")
        rel = os.path.relpath(found, os.path.dirname(torch_dir))
        os.makedirs(os.path.join(prefix, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(found, os.path.join(prefix, rel))


def self_signed(h):
    key, cert = h.path("tls.key"), h.path("tls.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                    "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def health(client, target, extra=()):
    return subprocess.run([client, "health", "--target", target,
                           "--deadline-ms", "5000", *extra],
                          capture_output=True, text=True, timeout=60)


def main():
    parser = du.common_args(__doc__)
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--torch-dir", required=True,
                        help="ENCODER_TORCH_WHEEL of the build")
    args = parser.parse_args()
    du.require_executable(args.server, "encoder-server")
    du.require_executable(args.client, "encoder-client")
    with du.Harness(args, "image-runtime") as h:
        checks = du.Checks()
        libs = kept_libraries(args.source_dir)
        prefix = h.path("opt", "libtorch")
        make_prefix(args.torch_dir, libs, prefix)
        # The image's library path: the prefix first (the build's run path
        # still names the build machine's copy, which the image does not
        # have; LD_LIBRARY_PATH is searched before it).
        env = dict(os.environ,
                   LD_LIBRARY_PATH=os.path.join(prefix, "torch", "lib"))
        env.pop("ENCODER_HEALTH_LISTEN", None)
        ldd = subprocess.run(["ldd", args.server], env=env,
                             capture_output=True, text=True, timeout=60)
        checks.equal(ldd.returncode, 0, f"ldd: {ldd.stderr}")
        checks.check("not found" not in ldd.stdout,
                     f"unresolved libraries:\n{ldd.stdout}")
        for base in libs["TORCH_LIBS"] + libs["CUDA_LIBS"]:
            line = next((x for x in ldd.stdout.splitlines()
                         if x.strip().startswith(base + " ")), None)
            if line is None:
                continue  # kept by libtorch.sh, not loaded by this binary
            checks.check(prefix in line,
                         f"{base} resolves outside the image tree: {line}")
        for base in ("libtorch_cpu.so", "libc10.so", "libcudart.so.13"):
            checks.check(re.search(r"^\s*" + re.escape(base) + r" ",
                                   ldd.stdout, re.MULTILINE),
                         f"the server does not load {base}")

        cert, key = self_signed(h)
        tls = ["--tls-cert=" + cert, "--tls-key=" + key]
        server, ready_path = h.start_server(
            "server", args.server, tls,
            env=dict(env, ENCODER_HEALTH_LISTEN="127.0.0.1:0"))
        ready = h.wait_server_info(server, ready_path)
        port = ready.get("health_port")
        checks.check(port, f"no health port from ENCODER_HEALTH_LISTEN: "
                           f"{ready}")
        if port:
            got = health(args.client, f"127.0.0.1:{port}")
            checks.check(got.returncode == 0 and "SERVING" in got.stdout,
                         f"HEALTHCHECK on the health port: {got.returncode} "
                         f"{got.stdout}{got.stderr}")
        plain = health(args.client, f"127.0.0.1:{ready['grpc_port']}")
        checks.check(plain.returncode != 0,
                     "plaintext health on the TLS gRPC port succeeded: the "
                     "port does not speak TLS")
        over_tls = health(args.client, f"127.0.0.1:{ready['grpc_port']}",
                          ["--ca", cert])
        checks.check(over_tls.returncode == 0,
                     f"health over TLS: {over_tls.stdout}{over_tls.stderr}")
        h.stop(server)

        # deploy/k8s's flags and the image's environment defaults together:
        # --health-listen replaces ENCODER_HEALTH_LISTEN, and an HTTP
        # address given in full (here port 0) replaces the image's PORT=80.
        server, ready_path = h.start_server(
            "server-k8s", args.server, ["--health-listen=127.0.0.1:0"],
            env=dict(env, ENCODER_HEALTH_LISTEN="127.0.0.1:1", PORT="80",
                     ENCODER_HTTP_ADDRESS="127.0.0.1"))
        ready = h.wait_server_info(server, ready_path)
        checks.check(ready.get("health_port") not in (None, 0, 1),
                     f"--health-listen did not replace the environment "
                     f"default: {ready}")
        checks.check(ready.get("http_port") not in (None, 0, 80),
                     f"the image's PORT=80 replaced --http-listen: {ready}")
        h.stop(server)
        checks.raise_if_failed()
    print("PASSED")


if __name__ == "__main__":
    du.run(main)
