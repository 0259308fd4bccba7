#!/usr/bin/python3
"""Plots one attention map of an encoder-server model to a PNG.

    python3 examples/plot_attention.py --target 127.0.0.1:50051 \\
        --model alibi --text "Positions matter." --layer 0 --out attention.png

Notebook-style: each step below is a cell's worth. Needs the encoder_client
package (pip-installed, or PYTHONPATH=client/python) and matplotlib
(Debian: python3-matplotlib).
"""

import argparse

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from encoder_client import EncoderClient  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--target", default="127.0.0.1:50051")
parser.add_argument("--model", default="", help="default: the server's")
parser.add_argument("--text", default="Positions matter.")
parser.add_argument("--layer", type=int, default=0)
parser.add_argument("--head", type=int, default=None,
                    help="one head (default: the mean over heads)")
parser.add_argument("--out", default="attention.png")
args = parser.parse_args()

with EncoderClient(args.target) as client:
    # 1. The tokens, to label the axes.
    [encoding] = client.tokenize([args.text], model=args.model)
    tokens = encoding["tokens"]

    # 2. The map: [1, H, S, S] for one layer, or [1, S, S] averaged.
    if args.head is None:
        maps = client.attention(args.text, model=args.model,
                                layers=[args.layer], average_heads=True)
        title = f"layer {args.layer}, mean over heads"
    else:
        maps = client.attention(args.text, model=args.model,
                                layers=[args.layer], heads=[args.head])[:, 0]
        title = f"layer {args.layer}, head {args.head}"
    attention = maps[0]

# 3. Rows are queries and sum to 1; columns are keys.
size = max(4.0, 0.35 * len(tokens) + 2)
figure, axes = plt.subplots(figsize=(size, size))
image = axes.imshow(attention, cmap="viridis", vmin=0.0)
axes.set_xticks(range(len(tokens)), tokens, rotation=90)
axes.set_yticks(range(len(tokens)), tokens)
axes.set_xlabel("key")
axes.set_ylabel("query")
axes.set_title(f"{args.model or 'default model'}: {title}")
figure.colorbar(image, ax=axes, fraction=0.046)
figure.tight_layout()
figure.savefig(args.out, dpi=100)
print(f"wrote {args.out}: {attention.shape[0]}x{attention.shape[1]} map")
