#!/usr/bin/python3
"""Example Python client of encoder.v1.EncoderService, without the
encoder_client package: plain grpcio and stubs compiled at start-up.

Lists the served models, embeds one text with each and prints the norm of
the pooled embedding and the number of tokens the model saw.

Needs the Debian packages python3-grpcio, python3-protobuf,
protobuf-compiler and protobuf-compiler-grpc; the Python stubs are generated
from proto/encoder/v1/encoder.proto into a temporary directory at start-up.
The encoder_client package (docs/python-client.md) does all of this for you.

Usage: minimal_client.py [--target HOST:PORT] [--text TEXT]
           [--tls] [--ca CA.pem] [--cert CLIENT.pem --key CLIENT.key]
           [--token-file TOKEN]
"""

import argparse
import importlib
import math
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile

import grpc

PROTO_ROOT = pathlib.Path(__file__).resolve().parents[3] / "proto"
PROTO_FILE = "encoder/v1/encoder.proto"


def load_stubs(out_dir):
    """Compiles encoder.proto into out_dir and imports (pb2, pb2_grpc)."""
    plugin = shutil.which("grpc_python_plugin")
    if shutil.which("protoc") is None or plugin is None:
        sys.exit("error: protoc and grpc_python_plugin are needed "
                 "(protobuf-compiler, protobuf-compiler-grpc)")
    subprocess.run(
        ["protoc", f"-I{PROTO_ROOT}", f"--python_out={out_dir}",
         f"--plugin=protoc-gen-grpc_python={plugin}",
         f"--grpc_python_out={out_dir}", PROTO_FILE],
        check=True)
    sys.path.insert(0, out_dir)
    return (importlib.import_module("encoder.v1.encoder_pb2"),
            importlib.import_module("encoder.v1.encoder_pb2_grpc"))


def decode_tensor(pb2, tensor):
    """Values of a Tensor message as a flat list of floats."""
    formats = {pb2.DTYPE_FLOAT32: "f", pb2.DTYPE_FLOAT64: "d",
               pb2.DTYPE_FLOAT16: "e", pb2.DTYPE_INT64: "q"}
    if tensor.dtype == pb2.DTYPE_BFLOAT16:  # the high half of a float32
        halves = struct.unpack(f"<{len(tensor.data) // 2}H", tensor.data)
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                for h in halves]
    fmt = formats[tensor.dtype]
    count = len(tensor.data) // struct.calcsize(fmt)
    return list(struct.unpack(f"<{count}{fmt}", tensor.data))


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_token(path):
    """The first line of the file that is neither blank nor a comment."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                return line
    sys.exit(f"error: --token-file: no token in {path}")


def open_channel(args):
    """A TLS channel when --tls, --ca or --cert is given, else plaintext."""
    if bool(args.cert) != bool(args.key):
        sys.exit("error: --cert and --key go together")
    if not (args.tls or args.ca or args.cert):
        return grpc.insecure_channel(args.target)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read_bytes(args.ca) if args.ca else None,
        private_key=read_bytes(args.key) if args.key else None,
        certificate_chain=read_bytes(args.cert) if args.cert else None)
    return grpc.secure_channel(args.target, credentials)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--text", default="Positions matter.")
    parser.add_argument("--tls", action="store_true",
                        help="connect with TLS (implied by --ca, --cert)")
    parser.add_argument("--ca", help="PEM CA of the server's certificate")
    parser.add_argument("--cert", help="PEM client certificate (mutual TLS)")
    parser.add_argument("--key", help="PEM private key of --cert")
    parser.add_argument("--token-file",
                        help="file whose first line is the bearer token")
    args = parser.parse_args()
    metadata = ()
    if args.token_file:
        metadata = (("authorization", "Bearer " + read_token(args.token_file)),)

    with tempfile.TemporaryDirectory() as stub_dir:
        pb2, pb2_grpc = load_stubs(stub_dir)
        with open_channel(args) as channel:
            stub = pb2_grpc.EncoderServiceStub(channel)
            try:
                models = stub.ListModels(pb2.ListModelsRequest(), timeout=30,
                                         metadata=metadata)
                for model in models.models:
                    response = stub.Embed(
                        pb2.EmbedRequest(model=model.name,
                                         inputs=[pb2.Input(text=args.text)]),
                        timeout=30, metadata=metadata)
                    result = response.results[0]
                    pooled = decode_tensor(pb2, result.pooled)
                    norm = math.sqrt(sum(v * v for v in pooled))
                    print(f"{model.name:12s} scheme={model.positional.scheme:10s}"
                          f" tokens={result.num_tokens:4d} dim={len(pooled)}"
                          f" pooled_norm={norm:.6f}")
            except grpc.RpcError as error:
                print(f"error: {error.code().name}: {error.details()}",
                      file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
