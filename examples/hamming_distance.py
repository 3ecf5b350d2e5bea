"""Nearest binary codes by Hamming distance on the 1-bit tensor cores (xor + popcount).

Each of 512 groups holds 64 query codes and 64 candidate codes of 256 bits (a common
size for learned hashes). One binary GEMM per group counts the differing bits of every
(query, candidate) pair: popcount(q xor c) summed over 256 bits. The codes are packed 32
bits per uint32 with blasdx.pack; the result is checked exactly against NumPy.
"""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run

import blasdx
from blasdx import SM, Arrangement, BitOp, Block, Precision, Size

GROUPS, QUERIES, CANDIDATES, BITS = 512, 64, 64, 256


def main() -> None:
    gemm = (Size(QUERIES, CANDIDATES, BITS) + Precision("binary", "binary", "int32") + BitOp("xor")
            + Arrangement("row_major", "col_major", "row_major") + SM(800) + Block())
    print(gemm.explain().splitlines()[2])
    if not GPU:
        gemm.compile(arch=900)
        return skip_run("Hamming distances")
    import cupy

    rng = np.random.default_rng(0)
    queries = rng.integers(0, 2, (GROUPS, QUERIES, BITS), dtype=np.uint8)
    candidates = rng.integers(0, 2, (GROUPS, CANDIDATES, BITS), dtype=np.uint8)
    # A is (queries, bits) packed along its rows; B is (bits, candidates), packed along its
    # columns, which is the candidates' own rows: pack them along the bits, then transpose.
    a = blasdx.pack(cupy.asarray(queries), "binary", axis=-1)  # (groups, 64, 8) uint32
    b = blasdx.pack(cupy.asarray(candidates), "binary", axis=-1).transpose(0, 2, 1)  # (groups, 8, 64)
    distances = cupy.zeros((GROUPS, QUERIES, CANDIDATES), dtype=cupy.int32)
    gemm.execute(a, b, distances)
    nearest = distances.argmin(axis=-1)

    ref = (queries[:, :, None, :] != candidates[:, None, :, :]).sum(-1)
    check(f"Hamming distances, {GROUPS} groups of {QUERIES}x{CANDIDATES} codes of {BITS} bits",
          distances.get(), ref, 0)
    check("nearest candidate per query", nearest.get(), ref.argmin(axis=-1), 0)


if __name__ == "__main__":
    main()
