"""Packed binary embeddings (EmbedRequest.embedding_type) against
sentence-transformers' quantize_embeddings, on real weights.

For "binary" and "ubinary", the server's packed vectors must equal, bit
for bit, quantize_embeddings applied to the server's own float vectors of
the same texts (the packing), and agree with quantize_embeddings applied
to sentence-transformers' encode of them (the model); the same through
/v1/embeddings (lists of ints, and base64 of the bytes). Each comparison
leaves out bits whose value lies within 1e-5 of zero: the floats come from
another call or another library, whose rounding may flip such a sign.

For "int8" and "uint8" (a byte per value in per-dimension ranges): without
ranges, the ranges the response returns are the min and max of the
server's floats (within NEAR_EDGE: they come from a second
call), and the bytes are quantize_embeddings of those floats in those
ranges;
with calibration ranges (sentence-transformers' min and max of encode over
other texts), byte for byte quantize_embeddings(ranges=...), values
outside their range clipped to the byte's end as it clips them; and the
bytes inside the ranges map back within one step of the float vectors.
The byte checks against quantize_embeddings leave out values within 1e-6
of a step edge or range bound, which the float rounding of a second call
may move across it (counted, at most 5%). The same over /v1/embeddings.
"""
import base64

import numpy as np

NEAR_ZERO = 1e-5
# How far a float of a second call may be from the first's, and so how
# close to a step edge or range bound it may be for its byte to move:
# the two calls' batches can be formed differently (they are, when other
# work shares the cores), a batch may run on one or two threads, and a
# product's terms summed in another order differ by a few units in the
# last place of the terms, not of the sum: ranges 5e-8 off were seen on a
# quiet host and 1.5e-7 off in a run beside other tests. Steps are about
# 9e-4 wide (the median over MiniLM's dimensions), so 1e-6 leaves out
# about 0.1% of the values for it; a few dimensions span a tiny range, and
# most of their values count as near (2.2% of all values with calibration
# ranges, against 2.1% at 2e-7).
NEAR_EDGE = 1e-6


def _bits(packed):
    """The sign bits of packed rows; binary's bytes are shifted by -128."""
    if packed.dtype == np.int8:
        packed = (packed.astype(np.int16) + 128).astype(np.uint8)
    return np.unpackbits(packed, axis=1)


def check(served, name, path, texts, report):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.quantization import quantize_embeddings
    import torch
    texts = [t for t in texts if t][:64]
    st = SentenceTransformer(str(path), device="cpu",
                             model_kwargs={"dtype": torch.float32})
    theirs = st.encode(texts, convert_to_numpy=True, show_progress_bar=False)
    ours = served.client.embed(texts, model=name, truncate=True)
    for kind, dtype in (("binary", np.int8), ("ubinary", np.uint8)):
        got = served.client.embed(texts, model=name, truncate=True,
                                  embedding_type=kind)
        if got.dtype != dtype or got.shape != (len(texts), ours.shape[1] // 8):
            report.fail(f"{name}: {kind}: {got.dtype} {got.shape}, want "
                        f"{np.dtype(dtype)} {(len(texts), ours.shape[1] // 8)}")
            continue
        # `ours` comes from another call, whose batches may be formed
        # differently: signs of values within NEAR_ZERO of zero may differ.
        packed = quantize_embeddings(ours, precision=kind)
        near = np.abs(ours) <= NEAR_ZERO
        report.add(name, f"{kind}: bits off packing",
                   int(np.sum((_bits(got) != _bits(packed)) & ~near)), 0,
                   near.size)
        # Bits against sentence-transformers' own floats, near-zero values
        # excepted.
        want = quantize_embeddings(theirs, precision=kind)
        flip = _bits(got) != _bits(want)
        far = np.abs(theirs) > NEAR_ZERO
        report.add(name, f"{kind}: bits off encode", int(np.sum(flip & far)),
                   0, flip.size)
        for fmt in ("float", "base64"):
            data = served.post_embeddings(
                {"model": name, "input": texts[:8], "embedding_type": kind,
                 "encoding_format": fmt})["data"]
            rows = []
            for d in sorted(data, key=lambda d: d["index"]):
                e = d["embedding"]
                rows.append(np.frombuffer(base64.b64decode(e), dtype)
                            if fmt == "base64" else np.asarray(e, dtype))
            # Another call, so another batch: a bit whose value lies
            # within NEAR_ZERO of zero may come out the other way.
            flip = _bits(np.stack(rows)) != _bits(got[:8])
            report.add(name, f"{kind}: http {fmt} bits off grpc",
                       int(np.sum(flip & (np.abs(ours[:8]) > NEAR_ZERO))),
                       0, flip.size)


def _near_edge(values, ranges):
    """Values within NEAR_EDGE of a step edge or a bound of `ranges`
    ([2, D]: min, max), where a second call's rounding may move a byte."""
    step = (ranges[1] - ranges[0]) / 255
    pos = (values - ranges[0]) / step
    return (np.abs(pos - np.round(pos)) * step < NEAR_EDGE) | (
        np.minimum(np.abs(values - ranges[0]),
                   np.abs(values - ranges[1])) < NEAR_EDGE)


def check_scalar(served, name, path, texts, report):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.quantization import quantize_embeddings
    import torch
    texts = [t for t in texts if t]
    calibration, texts = texts[64:192], texts[:64]
    st = SentenceTransformer(str(path), device="cpu",
                             model_kwargs={"dtype": torch.float32})
    calib = st.encode(calibration, convert_to_numpy=True,
                      show_progress_bar=False)
    ranges = np.vstack((calib.min(0), calib.max(0))).astype(np.float32)
    ours = served.client.embed(texts, model=name, truncate=True)
    for kind, dtype, low, high in (("int8", np.int8, -128, 127),
                                   ("uint8", np.uint8, 0, 255)):
        response = served.client.embed_response(
            texts, model=name, truncate=True, embedding_type=kind)
        from encoder_client import tensor_to_numpy
        got = np.stack([tensor_to_numpy(r.pooled) for r in response.results])
        used = np.vstack((response.quantization_ranges.min,
                          response.quantization_ranges.max)).astype(np.float32)
        if got.dtype != dtype or got.shape != ours.shape:
            report.fail(f"{name}: {kind}: {got.dtype} {got.shape}")
            continue
        # The bytes come from a second call, whose floats may differ from
        # `ours` in the last bits (its batches can be formed differently,
        # and the products' sums rounded in another order). So the ranges
        # it reports may be a few units in the last place off `ours`'
        # min and max, and quantize_embeddings, which truncates, may put a
        # value within NEAR_EDGE of a step edge or a range bound one byte
        # either side. Those values are left out of the byte checks,
        # counted, and must be few.
        own = np.vstack((ours.min(0), ours.max(0)))
        report.add(name, f"{kind}: own ranges off floats",
                   float(np.abs(used - own).max()), NEAR_EDGE, used.size)
        edge = _near_edge(ours, used)
        want = quantize_embeddings(ours, precision=kind, ranges=used)
        report.add(name, f"{kind}: bytes off quantize",
                   int(np.sum((got != want) & ~edge)), 0, got.size)
        # Calibrated.
        got = served.client.embed(texts, model=name, truncate=True,
                                  embedding_type=kind,
                                  quantization_ranges=(ranges[0], ranges[1]))
        inside = (ours >= ranges[0]) & (ours <= ranges[1])
        step = (ranges[1] - ranges[0]) / 255
        edge = _near_edge(ours, ranges)
        report.add(name, f"{kind}: values near an edge (left out)",
                   int(edge.sum()), got.size // 20, got.size)
        want = quantize_embeddings(ours, precision=kind, ranges=ranges)
        report.add(name, f"{kind}: calibrated bytes off",
                   int(np.sum((got != want) & ~edge)), 0, got.size)
        clipped = np.where(ours < ranges[0], low, high)
        report.add(name, f"{kind}: clipped bytes off",
                   int(np.sum((got != clipped) & ~inside & ~edge)), 0,
                   int(np.sum(~inside)))
        back = ranges[0] + (got.astype(np.float64) +
                            (128 if kind == "int8" else 0)) * step
        # Values near an edge may sit a step and their drift off.
        kept = inside & ~edge
        err = np.abs(back - ours)[kept] / step[np.nonzero(kept)[1]]
        report.add(name, f"{kind}: dequantized error (steps)",
                   float(err.max()), 1.0 + 1e-3, int(kept.sum()))
        data = served.post_embeddings(
            {"model": name, "input": texts[:8], "embedding_type": kind,
             "quantization_ranges": {"min": ranges[0].tolist(),
                                     "max": ranges[1].tolist()}})
        rows = np.asarray([d["embedding"] for d in sorted(
            data["data"], key=lambda d: d["index"])], dtype)
        # Another call, formed into other batches than the gRPC one: values
        # near an edge may move a byte, as above.
        report.add(name, f"{kind}: http bytes off grpc",
                   int(np.sum((rows != got[:8]) & ~edge[:8])), 0, rows.size)
        if not np.allclose(data["quantization_ranges"]["min"], ranges[0]):
            report.fail(f"{name}: {kind}: /v1/embeddings ranges differ")

    # Refusals: ranges without a scalar type, of the wrong width, min > max.
    import grpc
    width = ours.shape[1]
    cases = [(dict(embedding_type="float",
                   quantization_ranges=(ranges[0], ranges[1])),
              "int8 and uint8"),
             (dict(embedding_type="int8",
                   quantization_ranges=(ranges[0][:5], ranges[1][:5])),
              f"keep {width} dimensions"),
             (dict(embedding_type="uint8",
                   quantization_ranges=(ranges[1], ranges[0])),
              "min <= max")]
    for fields, words in cases:
        try:
            served.client.embed(texts[:2], model=name, **fields)
            report.fail(f"{name}: ranges {words}: accepted")
        except grpc.RpcError as e:
            if (e.code() != grpc.StatusCode.INVALID_ARGUMENT or
                    words not in e.details()):
                report.fail(f"{name}: ranges {words}: {e.code()} "
                            f"{e.details()}")
