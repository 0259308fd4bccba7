"""The error measures the conformance checks share."""
import numpy as np


def max_abs(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"shape {list(a.shape)} != {list(b.shape)}")
    return float(np.abs(a - b).max()) if a.size else 0.0


def scaled(a, b):
    """max |a - b| / max(1, max |b|): b is the reference."""
    err = max_abs(a, b)
    return err / max(1.0, float(np.abs(np.asarray(b)).max()))
