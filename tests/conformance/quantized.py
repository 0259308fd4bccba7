"""Packed binary embeddings (EmbedRequest.embedding_type) against
sentence-transformers' quantize_embeddings, on real weights.

For "binary" and "ubinary", the server's packed vectors must equal, byte
for byte, quantize_embeddings applied to the server's own float vectors of
the same texts (the packing), and agree with quantize_embeddings applied
to sentence-transformers' encode of them except in bits whose value lies
within 1e-5 of zero, where float rounding may flip a sign (the model). The
same through /v1/embeddings (lists of ints, and base64 of the bytes).
"""
import base64

import numpy as np

NEAR_ZERO = 1e-5


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
        packed = quantize_embeddings(ours, precision=kind)
        report.add(name, f"{kind}: bytes off packing",
                   int(np.sum(got != packed)), 0, got.size)
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
            report.add(name, f"{kind}: http {fmt} bytes off grpc",
                       int(np.sum(np.stack(rows) != got[:8])), 0,
                       got[:8].size)
