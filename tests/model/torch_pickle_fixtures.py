#!/usr/bin/env python3
"""Writes the files torch_pickle_test.cc reads, with torch.save itself.

Each case is a file torch.save wrote and, in expected.json, what
torch.load reads back from it (every value as a float
or integer, row-major, with its shape and dtype), or, for a file the
reader must refuse, the text its error must contain.

Usage: torch_pickle_fixtures.py OUT_DIR (the committed copy lives in
tests/model/.fixtures/torch_pickle; rerun after changing a case).
"""
import collections
import io
import json
import os
import sys
import zipfile

import torch


class _Shell:
    """An object whose pickle runs a shell command when Python loads it."""

    def __reduce__(self):
        return (os.system, ("echo unpickled",))


def _linear_state(seed, dims, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.nn.Linear(*dims).to(dtype).state_dict()


def cases():
    """name -> (object to save, torch.save keyword arguments)."""
    flag = _linear_state(1, (6, 4))
    # FlagEmbedding's save: the state dictionary copied into a new
    # OrderedDict (no _metadata).
    flag = type(flag)({k: v.clone() for k, v in flag.items()})
    torch.manual_seed(2)
    base = torch.randn(4, 6)
    return {
        # nn.Module.state_dict() as torch.save(model.state_dict()) writes
        # it: an OrderedDict with _metadata (BUILD).
        "state_dict": (_linear_state(0, (5, 3)), {}),
        "flag_embedding": (flag, {}),
        "plain_dict": ({"w": torch.arange(6, dtype=torch.int64).view(2, 3)},
                       {}),
        # Views of one storage: an offset, a transposed stride, a column.
        "shared_views": ({"full": base, "rows": base[1:3],
                          "transposed": base.t(), "column": base[:, 2]}, {}),
        "half_and_bf16": ({"h": torch.randn(3, 2).half(),
                           "b": torch.randn(2, 3).bfloat16()}, {}),
        "protocol4": (_linear_state(3, (3, 2)), {"pickle_protocol": 4}),
        "parameters": ({"p": torch.nn.Parameter(torch.randn(2, 2))}, {}),
        "empty": ({"e": torch.zeros(0, 4)}, {}),
        "shell": ({"w": torch.ones(1), "x": _Shell()}, {}),
        "legacy": (_linear_state(4, (2, 2)),
                   {"_use_new_zipfile_serialization": False}),
        "not_a_dict": ([torch.ones(2)], {}),
    }


REFUSED = {
    "shell": "global posix.system",
    "legacy": "not a zip archive",
    "not_a_dict": "does not hold a dictionary",
}


def describe(path):
    # weights_only=False: these files were just written here, and the
    # restricted loader refuses protocol 4's FRAME.
    state = torch.load(path, weights_only=False)
    out = {}
    for name, t in state.items():
        t = t.detach()
        values = t.to(torch.float64 if t.is_floating_point() else torch.int64)
        out[name] = {"shape": list(t.shape),
                     "dtype": str(t.dtype).replace("torch.", ""),
                     "values": values.reshape(-1).tolist()}
    return out


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    expected = {}
    for name, (obj, kwargs) in cases().items():
        path = os.path.join(out_dir, name + ".pt")
        torch.save(obj, path, **kwargs)
        if name in REFUSED:
            expected[name] = {"error": REFUSED[name]}
        else:
            expected[name] = {"tensors": describe(path)}
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
