"""Builds encoder-client with encoder_client/_stubs_gen/encoder.desc, the
descriptor set of the repository's proto/encoder/v1/encoder.proto (two
directories up, or proto/ beside this file in a source distribution), so
that the installed package needs no compiler.

The descriptor set comes from grpc_tools.protoc when the grpcio-tools
package is importable (pip's isolated build installs it), else from protoc
on PATH (Debian: protobuf-compiler).
"""

import importlib.util
import os
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = pathlib.Path(__file__).resolve().parent


def _stubs():
    # Loaded from the source tree: the package is not built yet, and its
    # __init__ needs the descriptor set this build makes.
    spec = importlib.util.spec_from_file_location(
        "_encoder_client_stubs", HERE / "encoder_client" / "_stubs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithDescriptors(build_py):
    def run(self):
        super().run()
        stubs = _stubs()
        out = pathlib.Path(self.build_lib) / "encoder_client" / "_stubs_gen"
        os.makedirs(out, exist_ok=True)
        stubs.compile_descriptor_set(stubs.find_proto_root(HERE),
                                     out / stubs.DESCRIPTOR_SET)


class SdistWithProto(sdist):
    """A source distribution carries proto/ beside setup.py, so that it
    builds away from the repository."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        stubs = _stubs()
        source = stubs.find_proto_root(HERE) / stubs.PROTO_FILE
        target = pathlib.Path(base_dir) / "proto" / stubs.PROTO_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


# The repository's LICENSE. Here rather than in pyproject.toml: setuptools
# 77 on deprecates the table form there (license = {text = ...}), and
# releases before 77 (Debian 12 has 66) refuse the string form.
setup(license="Apache-2.0",
      cmdclass={"build_py": BuildPyWithDescriptors, "sdist": SdistWithProto})
