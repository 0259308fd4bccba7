"""Python client of encoder-server (encoder.v1.EncoderService over gRPC).

    from encoder_client import Client

    client = Client("127.0.0.1:50051")
    vectors = client.encode(["first text", "second text"])  # [2, D] float32

Client.encode follows SentenceTransformer.encode: a str gives one vector,
a list gives a matrix, in order, however many inputs (they go in batches,
several requests at once). AsyncClient offers the same methods as
coroutines. Failures raise the typed errors of encoder_client.errors, after
retries when the server was busy or unreachable. EncoderClient is the
low-level client: one call per method, every option of the protocol, and
grpc.RpcError on failure. pb2 and pb2_grpc hold the protocol's messages and
stub. docs/python-client.md in the repository describes it all.
"""

from . import errors, pb2, pb2_grpc
from ._aio import AsyncClient
from ._client import Client
from ._legacy import EncoderClient
from ._requests import tensor_to_numpy
from ._version import __version__
from .errors import (EncoderError, InvalidInput, ModelNotFound, Overloaded,
                     RequestTooLarge, Unauthenticated, Unavailable)

__all__ = ["Client", "AsyncClient", "EncoderClient", "EncoderError",
           "ModelNotFound", "InvalidInput", "RequestTooLarge", "Overloaded",
           "Unavailable", "Unauthenticated", "tensor_to_numpy", "pb2",
           "pb2_grpc", "errors", "__version__"]
