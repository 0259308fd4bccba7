"""The encoder.v1 protobuf and gRPC modules.

An installed package carries them in _stubs_gen (compiled by setup.py).
Used from a source checkout (PYTHONPATH=client/python), they are compiled
at first import from proto/encoder/v1/encoder.proto into a temporary
directory that is removed at exit.
"""

import atexit
import importlib
import pathlib
import shutil
import subprocess
import sys
import tempfile

PROTO_FILE = "encoder/v1/encoder.proto"
_GENERATED = pathlib.Path(__file__).resolve().parent / "_stubs_gen"


def find_proto_root(start):
    """The nearest `proto` directory holding encoder.proto at or above
    `start`."""
    start = pathlib.Path(start).resolve()
    for directory in [start, *start.parents]:
        candidate = directory / "proto"
        if (candidate / PROTO_FILE).is_file():
            return candidate
    raise FileNotFoundError(
        f"{PROTO_FILE} not found in a proto/ directory above {start}")


def compile_stubs(proto_root, out_dir):
    """Compiles encoder.proto into out_dir (encoder/v1/encoder_pb2*.py)."""
    args = [f"-I{proto_root}", f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}", PROTO_FILE]
    try:
        from grpc_tools import protoc  # grpcio-tools, when installed
    except ImportError:
        protoc = None
    if protoc is not None:
        if protoc.main(["protoc", *args]) != 0:
            raise RuntimeError("grpc_tools.protoc failed on " + PROTO_FILE)
        return
    compiler = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if compiler is None or plugin is None:
        raise RuntimeError(
            "compiling the encoder.v1 stubs needs grpcio-tools, or protoc and "
            "grpc_python_plugin (Debian: protobuf-compiler, "
            "protobuf-compiler-grpc)")
    subprocess.run([compiler, f"--plugin=protoc-gen-grpc_python={plugin}",
                    *args], check=True)


def _stub_dir():
    if (_GENERATED / PROTO_FILE.replace(".proto", "_pb2.py")).is_file():
        return _GENERATED
    out = tempfile.mkdtemp(prefix="encoderclient-stubs-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    compile_stubs(find_proto_root(pathlib.Path(__file__).parent), out)
    return pathlib.Path(out)


def load():
    """(encoder_pb2, encoder_pb2_grpc)."""
    directory = str(_stub_dir())
    if directory not in sys.path:
        # The generated gRPC module imports `encoder.v1.encoder_pb2`.
        sys.path.insert(0, directory)
    return (importlib.import_module("encoder.v1.encoder_pb2"),
            importlib.import_module("encoder.v1.encoder_pb2_grpc"))

