"""Builds encoderclient with its gRPC stubs compiled from the repository's
proto/encoder/v1/encoder.proto (two directories up) into
encoderclient/_stubs, so that the installed package needs no compiler.

The stubs come from grpc_tools.protoc when the grpcio-tools package is
importable, else from protoc with grpc_python_plugin (Debian:
protobuf-compiler, protobuf-compiler-grpc).
"""

import os
import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        # Imported from the source tree: the package is not built yet.
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "_encoderclient_stubs", HERE / "encoderclient" / "_stubs.py")
        stubs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(stubs)
        out = pathlib.Path(self.build_lib) / "encoderclient" / "_stubs_gen"
        os.makedirs(out, exist_ok=True)
        stubs.compile_stubs(stubs.find_proto_root(HERE), out)


setup(cmdclass={"build_py": BuildPyWithStubs})
