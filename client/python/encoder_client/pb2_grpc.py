"""The encoder.v1.EncoderService client stub, as a generated
encoder_pb2_grpc module offers it: EncoderServiceStub(channel) has one
callable per method (stub.Embed(request, timeout=..., metadata=...)).
It works on grpc channels and on grpc.aio channels alike."""

from . import _stubs

__all__ = ["EncoderServiceStub"]


class EncoderServiceStub:
    """One attribute per method of encoder.v1.EncoderService."""

    def __init__(self, channel):
        for (name, path, request, response, client_streaming,
             server_streaming) in _stubs.protocol().methods:
            kind = {(False, False): channel.unary_unary,
                    (False, True): channel.unary_stream,
                    (True, False): channel.stream_unary,
                    (True, True): channel.stream_stream}[
                        (client_streaming, server_streaming)]
            setattr(self, name, kind(
                path, request_serializer=request.SerializeToString,
                response_deserializer=response.FromString))
