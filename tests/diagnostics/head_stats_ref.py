"""Reference attention statistics for head_stats_test.cc, computed with torch
in float64 independently of the C++ code.

Usage: head_stats_ref.py FILE
FILE holds whitespace-separated numbers: one or more blocks, each H S then
H*S*S probabilities in row-major [head, query, key] order. Prints one line
per head, blocks in order:
entropy mean_distance self_mass prev_mass next_mass first_mass
(each a mean over the S query rows; rows without a previous or next key
contribute 0), with 17 significant digits.
"""
import sys

import torch


def head_stats(a):
    s = a.shape[0]
    safe = torch.where(a > 0, a, torch.ones_like(a))
    entropy = -(a * torch.log(safe)).sum() / s
    i = torch.arange(s, dtype=torch.float64)
    distance = (i[:, None] - i[None, :]).abs()
    mean_distance = (a * distance).sum() / s
    self_mass = torch.diagonal(a).sum() / s
    prev_mass = sum(a[q, q - 1] for q in range(1, s)) / s if s > 1 else 0.0
    next_mass = sum(a[q, q + 1] for q in range(s - 1)) / s if s > 1 else 0.0
    first_mass = a[:, 0].sum() / s
    return [float(v) for v in (entropy, mean_distance, self_mass, prev_mass,
                               next_mass, first_mass)]


def main():
    with open(sys.argv[1]) as f:
        values = f.read().split()
    at = 0
    while at < len(values):
        heads, s = int(values[at]), int(values[at + 1])
        count = heads * s * s
        numbers = [float(v) for v in values[at + 2:at + 2 + count]]
        at += 2 + count
        probs = torch.tensor(numbers, dtype=torch.float64).reshape(heads, s, s)
        for h in range(heads):
            print(" ".join("%.17g" % v for v in head_stats(probs[h])))


if __name__ == "__main__":
    main()
