#!/usr/bin/env python3
"""Converts a Hugging Face model directory that ships only PyTorch pickles
(pytorch_model.bin, or its shards listed in pytorch_model.bin.index.json)
into safetensors, the only weight format the server reads, in place:
model.safetensors (or model-0000N-of-0000M.safetensors shards with
model.safetensors.index.json when the source is sharded). Tensors keep
their names, dtypes and values; tensors that share storage (tied
embeddings) are written once each as their own copy. The pickles are left
where they are.

Loading a pickle runs code from the file: torch.load is called with
weights_only=True, which refuses anything but tensors and plain containers.

Usage (in the project's Python environment, scripts/python_env.sh):
    .venv/bin/python scripts/convert_to_safetensors.py models/NAME
"""
import argparse
import json
import pathlib
import sys

import torch
from safetensors.torch import save_file


def load(path):
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        sys.exit(f"{path}: not a state_dict")
    # Own, contiguous copies: safetensors refuses shared or strided storage.
    return {k: v.detach().clone().contiguous() for k, v in state.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("--force", action="store_true",
                        help="overwrite existing safetensors files")
    args = parser.parse_args()
    d = pathlib.Path(args.model_dir)
    existing = list(d.glob("*.safetensors"))
    if existing and not args.force:
        sys.exit(f"{d} already has {existing[0].name}; --force overwrites")
    index = d / "pytorch_model.bin.index.json"
    metadata = {"format": "pt"}
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        shards = sorted(set(weight_map.values()))
        new_map = {}
        for i, shard in enumerate(shards, 1):
            name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
            tensors = load(d / shard)
            save_file(tensors, d / name, metadata=metadata)
            new_map.update({k: name for k in tensors})
            print(f"{shard} -> {name} ({len(tensors)} tensors)")
        (d / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {}, "weight_map": new_map}, indent=2))
    elif (d / "pytorch_model.bin").is_file():
        tensors = load(d / "pytorch_model.bin")
        save_file(tensors, d / "model.safetensors", metadata=metadata)
        print(f"pytorch_model.bin -> model.safetensors ({len(tensors)} "
              "tensors)")
    else:
        sys.exit(f"{d}: no pytorch_model.bin or pytorch_model.bin.index.json")


if __name__ == "__main__":
    main()
