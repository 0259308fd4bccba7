"""What Client and AsyncClient share: the retry policy, the per-request
input limit learned from the server, encode()'s argument handling and
result conventions, and the merging of reranked parts."""

import random
import re
import sys
from typing import Sequence, Tuple, Union

import grpc
import numpy as np

from .errors import InvalidInput, Overloaded, RequestTooLarge, Unavailable

# An input: a text, raw text bytes, or token ids.
Input = Union[str, bytes, Sequence[int]]
# classify's input: a text, or a text and its pair.
ClassifyInput = Union[str, Tuple[str, str]]

# encode()'s default inputs per call, as sentence-transformers' batch_size.
DEFAULT_BATCH_SIZE = 32
# The largest response Client accepts by default: the server's default
# --max-send-message-bytes (gRPC's own default is 4 MiB).
DEFAULT_MAX_RECEIVE_BYTES = 64 << 20

# The server's refusal of a request with more inputs than it takes:
# "request has 300 inputs; at most 256 per request (...)" (Embed, Rerank,
# Classify, EmbedSparse) or "300 texts in one request; at most 256"
# (Tokenize).
_LIMIT = re.compile(r"(?:request has \d+ \w+|\d+ texts in one request); "
                    r"at most (\d+)")


# The methods whose per-request limit ListModelsResponse reports, by field.
_LIMIT_FIELDS = {
    "Embed": "max_inputs_per_request",
    "EmbedSparse": "max_inputs_per_request",
    "Classify": "max_inputs_per_request",
    "Rerank": "max_inputs_per_request",
    "Tokenize": "max_tokenize_texts_per_request",
}


def limits_from_list_models(response):
    """{method: inputs per request} from a ListModelsResponse; empty from a
    server that predates the fields (they read 0)."""
    limits = {}
    for method, field in _LIMIT_FIELDS.items():
        value = getattr(response, field, 0)
        if value > 0:
            limits[method] = int(value)
    return limits


def learned_limit(error, sent):
    """The server's per-request input limit when `error` refused a request
    of `sent` inputs for having too many; None otherwise."""
    if not isinstance(error, InvalidInput) or \
            error.code != grpc.StatusCode.INVALID_ARGUMENT:
        return None
    match = _LIMIT.search(error.message)
    if match is None:
        return None
    limit = int(match.group(1))
    return limit if 0 < limit < sent else None


class RetryPolicy:
    """Which failures are retried and how long to wait first: UNAVAILABLE
    and RESOURCE_EXHAUSTED (not a request too large), at most `retries`
    times, after exponential backoff with jitter (backoff * 2^attempt,
    capped at max_backoff, the wait drawn from its upper half) or the
    server's retry_after when that is longer."""

    def __init__(self, retries=3, backoff=0.1, max_backoff=5.0, rng=None):
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if backoff < 0 or max_backoff < 0:
            raise ValueError("backoff and max_backoff must be >= 0")
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self._random = rng or random.random

    def delay(self, attempt, error):
        """Seconds to wait before retry number attempt + 1 after `error`,
        or None when it is not retried."""
        if attempt >= self.retries:
            return None
        if isinstance(error, RequestTooLarge):
            return None
        if isinstance(error, Overloaded):
            if error.retry_refused:
                return None
        elif not (isinstance(error, Unavailable) and
                  error.code == grpc.StatusCode.UNAVAILABLE):
            return None
        ceiling = min(self.max_backoff, self.backoff * (2 ** attempt))
        wait = ceiling / 2 + self._random() * ceiling / 2
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait


def check_batch_size(batch_size):
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or int(batch_size) != batch_size or \
            batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, not "
                         f"{batch_size!r}")
    return int(batch_size)


def request_size(batch_size, limit):
    """Inputs per request: batch_size, at most the server's limit learned
    so far (None when neither bounds it)."""
    if limit is None:
        return batch_size
    return limit if batch_size is None else min(batch_size, limit)


def rerank_options(*, model, return_documents, raw_scores, truncate,
                   truncation_side, attention_layers, attention_heads,
                   average_heads, positional_probes, weights=None,
                   instruction=None):
    """rerank's arguments as _requests.rerank_request's options and
    rerank_results' (Client and AsyncClient alike)."""
    options = dict(model=model, return_documents=return_documents,
                   raw_scores=raw_scores, truncate=truncate,
                   truncation_side=truncation_side,
                   attention_layers=attention_layers,
                   attention_heads=attention_heads,
                   average_heads=average_heads,
                   positional_probes=positional_probes, weights=weights,
                   instruction=instruction)
    results_options = dict(return_documents=return_documents,
                           attention=bool(attention_layers),
                           positional_probes=positional_probes)
    return options, results_options


def check_concurrency(max_concurrency):
    if isinstance(max_concurrency, bool) or \
            int(max_concurrency) != max_concurrency or max_concurrency < 1:
        raise ValueError("max_concurrency must be a positive int")
    return int(max_concurrency)


def split(items, size):
    """[(offset, items[offset:offset + size]), ...]; one part when size is
    None."""
    if size is None or size >= len(items):
        return [(0, items)]
    return [(i, items[i:i + size]) for i in range(0, len(items), size)]


def is_single_text(value):
    return isinstance(value, (str, bytes, bytearray))


class Progress:
    """A progress bar over `total` inputs: tqdm's when it is installed,
    else a line on stderr that is rewritten."""

    def __init__(self, total, enabled, desc="Batches"):
        self.total = total
        self.done = 0
        self._bar = None
        self._enabled = enabled and total > 0
        if not self._enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            self._bar = tqdm(total=total, desc=desc, unit="input")

    def update(self, count):
        if not self._enabled:
            return
        self.done += count
        if self._bar is not None:
            self._bar.update(count)
        else:
            sys.stderr.write(f"\r{self.done}/{self.total} inputs")
            sys.stderr.flush()

    def close(self):
        if not self._enabled:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _torch(what):
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"{what} returns torch tensors and needs PyTorch, which is not "
            "installed (pip install torch); leave it unset for numpy "
            "arrays") from None
    return torch


class EncodePlan:
    """encode()'s arguments checked and resolved: the inputs in the order
    they are sent (longest first, as sentence-transformers does, so that
    a request's inputs have similar lengths), what the server is asked for,
    and how the vectors come back to the caller."""

    def __init__(self, sentences, *, normalize, dimensions, prompt_name,
                 prompt, convert_to_numpy, convert_to_tensor, device,
                 normalize_embeddings, truncate_dim):
        self.single = is_single_text(sentences)
        if sentences is None:
            raise TypeError("sentences is a str or a list of str")
        self.items = [sentences] if self.single else list(sentences)
        if normalize is not None and normalize_embeddings is not None:
            raise ValueError("give normalize or normalize_embeddings, not "
                             "both")
        if dimensions is not None and truncate_dim is not None:
            raise ValueError("give dimensions or truncate_dim, not both")
        for name, value in (("dimensions", dimensions),
                            ("truncate_dim", truncate_dim)):
            if value is not None and (isinstance(value, bool) or
                                      int(value) != value or value < 1):
                raise ValueError(f"{name} must be a positive int")
        if prompt_name and prompt is not None:
            raise ValueError("give prompt_name or prompt, not both")
        # sentence-transformers' normalize_embeddings: True normalizes the
        # final vectors; False adds nothing to what the model does.
        self.client_normalize = False
        self.truncate_dim = truncate_dim
        if normalize_embeddings is not None:
            if truncate_dim is not None and normalize_embeddings:
                # Cut first, then normalize: done here, after the cut.
                self.client_normalize = True
                normalize = None
            else:
                normalize = True if normalize_embeddings else None
        self.normalize = normalize
        self.dimensions = dimensions
        self.prompt_name = prompt_name or ""
        self.prompt = prompt
        self.convert_to_numpy = convert_to_numpy
        self.convert_to_tensor = convert_to_tensor
        self.device = device
        if convert_to_tensor or not convert_to_numpy:
            _torch("convert_to_tensor=True or convert_to_numpy=False")
        lengths = [len(item) for item in self.items]
        self.order = np.argsort(-np.asarray(lengths, dtype=np.int64),
                                kind="stable")
        self.sent = [self.items[i] for i in self.order]

    def request_options(self):
        return dict(normalize=self.normalize, dimensions=self.dimensions,
                    prompt_name=self.prompt_name, prompt=self.prompt)

    def finish(self, sorted_vectors):
        """The caller's result from the vectors of self.sent, [N, D]."""
        if not self.items:
            vectors = np.zeros((0,), dtype=np.float32)
        else:
            vectors = np.empty_like(sorted_vectors, dtype=np.float32)
            vectors[self.order] = sorted_vectors
            if self.truncate_dim is not None:
                vectors = np.ascontiguousarray(
                    vectors[:, :self.truncate_dim])
            if self.client_normalize:
                norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                vectors = vectors / np.maximum(norms, 1e-12)
                vectors = vectors.astype(np.float32, copy=False)
        if self.convert_to_tensor:
            torch = _torch("convert_to_tensor=True")
            tensor = torch.from_numpy(vectors)
            if self.device is not None:
                tensor = tensor.to(self.device)
            return tensor[0] if self.single else tensor
        if self.convert_to_numpy:
            return vectors[0] if self.single else vectors
        torch = _torch("convert_to_numpy=False")
        rows = [torch.from_numpy(row) for row in vectors]
        if self.device is not None:
            rows = [row.to(self.device) for row in rows]
        return rows[0] if self.single else rows


def concat_arrays(parts):
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def concat_lists(parts):
    out = []
    for part in parts:
        out.extend(part)
    return out


def merge_rerank(parts, *, keep_order, top_n):
    """One ranking from the rankings of consecutive slices of the
    documents, [(offset, results in the slice's order), ...]."""
    results = []
    for offset, part in parts:
        for item in part:
            item["index"] += offset
            results.append(item)
    results.sort(key=lambda r: r["index"])
    if not keep_order:
        results.sort(key=lambda r: -r["score"])
    return results[:top_n] if top_n else results


def single_classify_input(inputs):
    """Whether classify's `inputs` is one input: a text, or one
    (text, text_pair) tuple."""
    return isinstance(inputs, str) or (
        isinstance(inputs, tuple) and len(inputs) == 2 and
        all(isinstance(t, str) for t in inputs))
