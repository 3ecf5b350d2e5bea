"""Digests of the CUDA source blasdx renders for a sweep of descriptors, to show that a change
to the package's structure leaves every generated kernel as it was (no GPU needed).

    python scripts/render_digest.py --out before.json      # on the earlier tree
    python scripts/render_digest.py --compare before.json  # on this one: lists the kernels that differ

Each case renders the device source, the kernel compile() builds, the one execute() launches on
16-byte aligned arrays and its fused form (bias + relu); kernel names' digests are masked, since
they hash the plans' reprs, which a restructuring may rename.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys

from blasdx import SM, Arrangement, Block, Grid, Precision, Size, Type, Warp
from blasdx.errors import DescriptorError
from blasdx.kinds import aligned_plan
from blasdx.pipeline import device_source, fusion, kernel_source

PRECISIONS = [("float16", "float16", "float32"), ("float16",) * 3, ("bfloat16", "bfloat16", "float32"),
              ("tfloat32", "tfloat32", "float32"), ("float32",) * 3, ("float64",) * 3,
              ("float8_e4m3", "float8_e5m2", "float32"), ("int8", "int8", "int32"), ("int4", "int4", "int32"),
              ("binary", "binary", "int32")]
ARRANGEMENTS = ["rcr", "rrr", "ccc"]
SMS = [750, 800, 890, 900, 1000, 1200]
BLOCK_SIZES = [(64, 64, 64), (128, 128, 64), (30, 31, 33), (16, 16, 256)]
GRID_SIZES = [(4000, 3000, 1000), (256, 256, 64), (64, 64, 8192)]
WARP_SIZES = [(32, 32, 32), (16, 8, 64)]
LAYOUT = {"r": "row_major", "c": "col_major"}


def cases():
    for prec, arr, sm in itertools.product(PRECISIONS, ARRANGEMENTS, SMS):
        ops = (Precision(*prec), Arrangement(*(LAYOUT[x] for x in arr)), SM(sm))
        for size in BLOCK_SIZES:
            yield f"block {prec} {arr} sm{sm} {size}", lambda ops=ops, size=size: sum(ops, Size(*size) + Block())
        for size in GRID_SIZES:
            yield f"grid {prec} {arr} sm{sm} {size}", lambda ops=ops, size=size: sum(ops, Size(*size) + Grid())
        for size in WARP_SIZES:
            yield f"warp {prec} {arr} sm{sm} {size}", lambda ops=ops, size=size: sum(ops, Size(*size) + Warp())
    for sm in (800, 900):
        yield (f"block complex sm{sm}",
               lambda sm=sm: Size(32, 32, 32) + Precision("float32") + Type("complex") + SM(sm) + Block())
        yield (f"grid complex sm{sm}",
               lambda sm=sm: Size(300, 200, 100) + Precision("float64") + Type("complex") + SM(sm) + Grid())


def sources(desc):
    plan = desc.plan
    aligned = aligned_plan(plan, (16, 16, 16))
    integer = desc.precision.c.startswith(("int", "uint"))
    fused = fusion(desc, None, None if desc.is_complex or integer else "relu", None, None, None, None, True)
    yield "device", device_source(plan, "gemm")
    yield "compiled", kernel_source(plan)
    yield "aligned", kernel_source(aligned)
    yield "fused", kernel_source(aligned, fused)


def digest(text: str) -> str:
    masked = re.sub(r"(blasdx_(?:gemm|grid|warp_gemm)_\w+?)_[0-9a-f]{8}(_f[0-9a-f]{8})?\b", r"\1", text)
    return hashlib.sha256(masked.encode()).hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the digests to this JSON file")
    parser.add_argument("--compare", help="compare with the digests in this JSON file")
    args = parser.parse_args()
    found = {}
    for name, describe in cases():
        try:
            for part, text in sources(describe()):
                found[f"{name} {part}"] = digest(text)
        except DescriptorError as exc:  # refused descriptors: the refusal is part of the behaviour
            found[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
    print(f"{len(found)} sources")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(found, f, indent=0, sort_keys=True)
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        differ = sorted(k for k in before.keys() | found.keys() if before.get(k) != found.get(k))
        for key in differ:
            print(f"DIFFERS {key}: {before.get(key)} -> {found.get(key)}")
        print(f"{len(differ)} of {len(before)} differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
