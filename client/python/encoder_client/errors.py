"""Typed errors of Client and AsyncClient, one class per kind of failure,
mapped from the gRPC status code of a failed call:

    EncoderError                  every failure of a call (other codes too)
    +-- ModelNotFound             NOT_FOUND: no such model
    +-- InvalidInput              INVALID_ARGUMENT, OUT_OF_RANGE,
    |   |                         FAILED_PRECONDITION: the request is wrong
    |   +-- RequestTooLarge       RESOURCE_EXHAUSTED that no retry can fix
    +-- Overloaded                RESOURCE_EXHAUSTED: the server is busy
    +-- Unavailable               UNAVAILABLE, DEADLINE_EXCEEDED
    +-- Unauthenticated           UNAUTHENTICATED, PERMISSION_DENIED

Each keeps the status `code` (a grpc.StatusCode), the server's `message`,
the server's `request_id` when it sent one, and the grpc.RpcError as its
__cause__. InvalidInput is also a ValueError.
"""

import re

import grpc

__all__ = ["EncoderError", "ModelNotFound", "InvalidInput",
           "RequestTooLarge", "Overloaded", "Unavailable", "Unauthenticated",
           "from_rpc_error"]


class EncoderError(Exception):
    """A call to the encoder-server failed.

    code: the grpc.StatusCode (None when the failure is the client's own).
    message: the server's message (the status details).
    request_id: the server's x-request-id for the call ("" when absent),
    to find the call in its access log."""

    def __init__(self, message, code=None, request_id=""):
        super().__init__(message)
        self.message = message
        self.code = code
        self.request_id = request_id

    def __str__(self):
        if self.code is None:
            return self.message
        return f"{self.code.name}: {self.message}"


class ModelNotFound(EncoderError):
    """The server serves no model of the requested name (NOT_FOUND); the
    message lists the ones it serves."""


class InvalidInput(EncoderError, ValueError):
    """The request was refused as sent (INVALID_ARGUMENT, OUT_OF_RANGE or
    FAILED_PRECONDITION): an empty text, an input over the model's length
    with truncate=False, an unknown prompt name, a task the model does not
    serve... Retrying the same request fails the same way."""


class RequestTooLarge(InvalidInput):
    """RESOURCE_EXHAUSTED for a request that can never succeed as sent: its
    response would be over a message size limit, or one input alone needs
    more memory than the server's batch budget. Never retried; send fewer
    or shorter inputs, or ask for fewer outputs."""


class Overloaded(EncoderError):
    """The server is busy (RESOURCE_EXHAUSTED: its queue is full, too many
    calls wait, or its clients have too many unread responses). The client
    retries these itself (Client(retries=...)) before raising.

    retry_after: seconds the server asked the client to wait, from the
    call's trailing metadata (retry-after, or grpc-retry-pushback-ms); None
    when it gave none."""

    def __init__(self, message, code=None, request_id="", retry_after=None):
        super().__init__(message, code, request_id)
        self.retry_after = retry_after
        # gRPC's retry pushback: a negative grpc-retry-pushback-ms asks
        # clients not to retry.
        self.retry_refused = False


class Unavailable(EncoderError):
    """The server could not be reached or answered too late (UNAVAILABLE:
    down, starting, draining, or the connection failed; DEADLINE_EXCEEDED:
    the call took longer than its timeout). UNAVAILABLE is retried before
    this is raised; DEADLINE_EXCEEDED is not."""


class Unauthenticated(EncoderError):
    """The server refused the caller (UNAUTHENTICATED: no or a wrong
    bearer token; PERMISSION_DENIED)."""


_CLASSES = {
    grpc.StatusCode.NOT_FOUND: ModelNotFound,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidInput,
    grpc.StatusCode.OUT_OF_RANGE: InvalidInput,
    grpc.StatusCode.FAILED_PRECONDITION: InvalidInput,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Overloaded,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: Unauthenticated,
}

# RESOURCE_EXHAUSTED messages of requests too large to ever succeed: the
# server's send limit and batch memory budget, and gRPC's own message size
# limits (either side).
_TOO_LARGE = re.compile(r"over the send limit|batch memory budget|"
                        r"larger than max|message size limit", re.IGNORECASE)


def _metadata(error, name):
    """(key, value) pairs of the error's trailing then initial metadata
    (either may be missing)."""
    getter = getattr(error, name, None)
    if getter is None:
        return ()
    try:
        return tuple(getter() or ())
    except Exception:  # a call that never started has none
        return ()


def _retry_after(pairs):
    """(seconds to wait or None, whether a retry is refused) from
    retry-after (seconds) or grpc-retry-pushback-ms (milliseconds; negative:
    do not retry)."""
    for key, value in pairs:
        if isinstance(value, bytes):
            value = value.decode("ascii", "replace")
        try:
            if key == "retry-after":
                return max(0.0, float(value)), False
            if key == "grpc-retry-pushback-ms":
                ms = float(value)
                return (None, True) if ms < 0 else (ms / 1000.0, False)
        except ValueError:
            continue
    return None, False


def from_rpc_error(error):
    """The EncoderError of a grpc.RpcError (or grpc.aio.AioRpcError)."""
    code = error.code() if callable(getattr(error, "code", None)) else None
    details = error.details() if callable(getattr(error, "details", None)) \
        else str(error)
    details = details or (code.name if code is not None else str(error))
    pairs = (_metadata(error, "trailing_metadata") +
             _metadata(error, "initial_metadata"))
    request_id = next((v for k, v in pairs if k == "x-request-id"), "")
    if isinstance(request_id, bytes):
        request_id = request_id.decode("ascii", "replace")
    cls = _CLASSES.get(code, EncoderError)
    if cls is Overloaded and _TOO_LARGE.search(details):
        return RequestTooLarge(details, code, request_id)
    if cls is Overloaded:
        seconds, refused = _retry_after(pairs)
        error = Overloaded(details, code, request_id, seconds)
        error.retry_refused = refused
        return error
    return cls(details, code, request_id)
