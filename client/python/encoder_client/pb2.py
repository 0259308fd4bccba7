"""The encoder.v1 messages and enums, as a protoc-generated encoder_pb2
module offers them: `pb2.EmbedRequest`, `pb2.DTYPE_FLOAT32`,
`pb2.LongInput.POLICY_CHUNK`, `pb2.DESCRIPTOR`, ...

Built from the package's descriptor set (see _stubs), so they work with any
protobuf runtime the package supports."""

from . import _stubs

globals().update(_stubs.protocol().namespace)
