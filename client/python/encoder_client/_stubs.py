"""The encoder.v1 protocol for Python: message classes, enums and the
service's method table, built at run time from a FileDescriptorSet compiled
from the repository's proto/encoder/v1/encoder.proto.

An installed package carries the descriptor set in _stubs_gen/ (setup.py
compiles it while building). Used from a source checkout
(PYTHONPATH=client/python, or an editable install), it is compiled at first
import into a temporary directory, which is removed at once.

Why a descriptor set and not protoc's encoder_pb2.py modules: generated
modules check at import that the installed protobuf and grpcio are at least
as new as the generator (protobuf 5.26 and grpcio-tools 1.63 on). A package
built in pip's isolated build environment, with the newest grpcio-tools,
would then refuse the protobuf or grpcio a user already has. A descriptor
set is data that every protobuf runtime reads.
"""

import importlib.util
import pathlib
import shutil
import subprocess
import tempfile

PROTO_FILE = "encoder/v1/encoder.proto"
SERVICE = "encoder.v1.EncoderService"
DESCRIPTOR_SET = "encoder.desc"
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


def compile_descriptor_set(proto_root, out_file):
    """Compiles encoder.proto (and anything it imports) into the serialized
    FileDescriptorSet `out_file`, with grpc_tools.protoc when the
    grpcio-tools package is importable, else with protoc from PATH
    (Debian: protobuf-compiler)."""
    args = [f"-I{proto_root}", "--include_imports",
            f"--descriptor_set_out={out_file}", PROTO_FILE]
    if importlib.util.find_spec("grpc_tools") is not None:
        from grpc_tools import protoc
        if protoc.main(["protoc", *args]) != 0:
            raise RuntimeError("grpc_tools.protoc failed on " + PROTO_FILE)
        return
    compiler = shutil.which("protoc")
    if compiler is None:
        raise RuntimeError(
            "compiling encoder.proto needs the grpcio-tools package, or "
            "protoc on PATH (Debian: protobuf-compiler)")
    subprocess.run([compiler, *args], check=True)


def descriptor_set_bytes():
    """The serialized FileDescriptorSet: the packaged one, else compiled
    from the source tree."""
    packaged = _GENERATED / DESCRIPTOR_SET
    if packaged.is_file():
        return packaged.read_bytes()
    with tempfile.TemporaryDirectory(prefix="encoder-client-") as tmp:
        out = pathlib.Path(tmp) / DESCRIPTOR_SET
        compile_descriptor_set(find_proto_root(pathlib.Path(__file__).parent),
                               out)
        return out.read_bytes()


def _message_class_getter(pool):
    from google.protobuf import message_factory
    get = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get is not None:
        return get
    return message_factory.MessageFactory(pool).GetPrototype


class Protocol:
    """encoder.proto loaded into a descriptor pool of its own (so that it
    never clashes with another copy of the same file in the default pool):
    `namespace` maps names to what a generated encoder_pb2 module holds
    (message classes, enum wrappers, enum values); `methods` lists
    (name, path, request class, response class, client streaming, server
    streaming) for each method of the service."""

    def __init__(self, data):
        from google.protobuf import descriptor_pb2, descriptor_pool
        from google.protobuf.internal import enum_type_wrapper
        files = descriptor_pb2.FileDescriptorSet.FromString(data).file
        pool = descriptor_pool.DescriptorPool()
        for file_proto in files:
            pool.Add(file_proto)
        self.file = pool.FindFileByName(PROTO_FILE)
        get_class = _message_class_getter(pool)
        namespace = {"DESCRIPTOR": self.file}

        def add_messages(descriptors, parent):
            for descriptor in descriptors:
                cls = get_class(descriptor)
                if parent is None:
                    namespace[descriptor.name] = cls
                elif not hasattr(parent, descriptor.name):
                    setattr(parent, descriptor.name, cls)
                add_messages(descriptor.nested_types, cls)

        add_messages(self.file.message_types_by_name.values(), None)
        for name, enum in self.file.enum_types_by_name.items():
            namespace[name] = enum_type_wrapper.EnumTypeWrapper(enum)
            for value in enum.values:
                namespace[value.name] = value.number
        self.namespace = namespace

        proto = next(f for f in files if f.name == PROTO_FILE)
        service = next(s for s in proto.service
                       if f"{proto.package}.{s.name}" == SERVICE)
        self.methods = []
        for method in service.method:
            request = pool.FindMessageTypeByName(method.input_type.lstrip("."))
            response = pool.FindMessageTypeByName(
                method.output_type.lstrip("."))
            self.methods.append((method.name, f"/{SERVICE}/{method.name}",
                                 get_class(request), get_class(response),
                                 method.client_streaming,
                                 method.server_streaming))


_PROTOCOL = None


def protocol():
    """The one Protocol of this process, loaded on first use."""
    global _PROTOCOL
    if _PROTOCOL is None:
        _PROTOCOL = Protocol(descriptor_set_bytes())
    return _PROTOCOL
