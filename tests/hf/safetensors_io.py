"""Reads and writes the safetensors format with numpy and torch only.

Format: an 8-byte little-endian u64 N, N bytes of UTF-8 JSON (padded with
spaces to a multiple of 8), then the data buffer. Each JSON entry is
`name: {"dtype", "shape", "data_offsets": [begin, end]}` with offsets
relative to the buffer; an optional "__metadata__" maps strings to strings.
Sharded checkpoints add `model.safetensors.index.json`:
`{"metadata": {"total_size": bytes}, "weight_map": {name: file}}`.
"""
import json
import os
import struct

import numpy as np
import torch

_TORCH_TO_ST = {torch.float32: "F32", torch.float16: "F16",
                torch.bfloat16: "BF16", torch.int64: "I64",
                torch.float64: "F64", torch.int32: "I32"}
_ST_NUMPY = {"F32": np.float32, "F16": np.float16, "I64": np.int64,
             "F64": np.float64, "I32": np.int32}


def tensor_bytes(tensor):
    """Raw little-endian bytes of a contiguous CPU tensor."""
    tensor = tensor.detach().contiguous().cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().tobytes()
    return tensor.numpy().tobytes()


def write_file(path, tensors, metadata=None):
    """Writes {name: tensor} to path in insertion order."""
    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    chunks, offset = [], 0
    for name, tensor in tensors.items():
        data = tensor_bytes(tensor)
        header[name] = {"dtype": _TORCH_TO_ST[tensor.dtype],
                        "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


def write_sharded(directory, tensors, num_shards, base="model"):
    """Splits tensors over num_shards files plus the index file; returns the
    shard file names."""
    names = list(tensors)
    per_shard = -(-len(names) // num_shards)
    files, weight_map, total = [], {}, 0
    for k in range(num_shards):
        file = f"{base}-{k + 1:05d}-of-{num_shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k * per_shard:(k + 1) * per_shard]}
        write_file(os.path.join(directory, file), part,
                   metadata={"format": "pt"})
        for name, tensor in part.items():
            weight_map[name] = file
            total += tensor.numel() * tensor.element_size()
        files.append(file)
    with open(os.path.join(directory, f"{base}.safetensors.index.json"),
              "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": weight_map}, f, indent=2)
    return files


def read_file(path):
    """{name: torch tensor} of one safetensors file, in its stored dtype
    (bf16 comes back as torch.bfloat16)."""
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size].decode("utf-8"))
    buffer = memoryview(blob)[8 + size:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        shape, dtype = entry["shape"], entry["dtype"]
        if dtype == "BF16":
            raw = np.frombuffer(buffer[begin:end], dtype=np.int16).copy()
            out[name] = torch.from_numpy(raw).view(torch.bfloat16).reshape(
                shape)
        else:
            raw = np.frombuffer(buffer[begin:end], dtype=_ST_NUMPY[dtype])
            out[name] = torch.from_numpy(raw.copy()).reshape(shape)
    return out


def read_checkpoint(directory, base="model"):
    """Every tensor of a checkpoint directory: `model.safetensors`, or the
    shards listed by `model.safetensors.index.json`."""
    index = os.path.join(directory, f"{base}.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        out = {}
        for file in files:
            out.update(read_file(os.path.join(directory, file)))
        return out
    return read_file(os.path.join(directory, f"{base}.safetensors"))
