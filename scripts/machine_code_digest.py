"""Digests of the machine code blasdx compiles for sm_90 (the .text sections of the cubins), to show that a
change to the package leaves the kernels that run as they were, even where their source text moved (no GPU).

    python scripts/machine_code_digest.py --out before.json      # on the earlier tree
    python scripts/machine_code_digest.py --compare before.json  # on this one: lists the kernels that differ

The kernels: the batched kernels execute() launches (on the descriptor's alignment and on 16-byte aligned
arrays) and a device-API K loop for block GEMMs of each precision family, and Grid() kernels (plain, fused
gelu or relu + bias, and TMA on aligned arrays).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys

import blasdx
import blasdx.pipeline
from blasdx import SM, Arrangement, Block, Grid, Precision, Size
from blasdx.plan import grid_with_alignment, with_alignment

K_LOOP = r"""
extern "C" __global__ void k_loop(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int tiles) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  gemm::accumulator acc = gemm::make_accumulator();
  for (int t = 0; t < tiles; ++t) {
    gemm::load_a(a + t * gemm::m * gemm::k, sa);
    gemm::load_b(b + t * gemm::k * gemm::n, sb);
    gemm::copy_wait();
    gemm::multiply(sa, sb, acc);
    __syncthreads();
  }
  gemm::store(acc, c, gemm::global_ldc, gemm::scalar_t(1), gemm::scalar_t(0));
}
"""
BLOCKS = [((32, 32, 32), ("float16",) * 3, "rrr"), ((64, 64, 64), ("float16",) * 3, "rrr"),
          ((128, 128, 64), ("float16", "float16", "float32"), "rrr"), ((64, 64, 64), ("float16", "float16", "float32"), "rcr"),
          ((32, 32, 32), ("float32",) * 3, "rrr"), ((64, 64, 64), ("float32",) * 3, "rcc"),
          ((32, 32, 32), ("float64",) * 3, "rrr"), ((16, 16, 16), ("float64",) * 3, "rrr"),
          ((64, 64, 64), ("bfloat16", "bfloat16", "float32"), "rcr"), ((64, 64, 64), ("int8", "int8", "int32"), "rcr"),
          ((64, 64, 64), ("float8_e4m3", "float8_e4m3", "float32"), "rcr"), ((32, 32, 32), ("tfloat32", "tfloat32", "float32"), "rcr")]
GRIDS = [((4096, 4096, 4096), ("float16", "float16", "float32")), ((4000, 3000, 1000), ("float16",) * 3),
         ((4096, 4096, 4096), ("bfloat16", "bfloat16", "float32")), ((4096,) * 3, ("float32",) * 3),
         ((4096,) * 3, ("float64",) * 3), ((512, 512, 8192), ("float16",) * 3), ((2048,) * 3, ("int8", "int8", "int32"))]
LAYOUT = {"r": "row_major", "c": "col_major"}


def text_digests(cubin: bytes) -> list[str]:
    """A digest of each .text.* section of an ELF64 cubin, in section order."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    out = []
    for name_at, _, _, _, offset, size, *_ in sections:
        name = cubin[names + name_at:cubin.index(b"\0", names + name_at)].decode()
        if name.startswith(".text."):
            out.append(hashlib.sha256(cubin[offset:offset + size]).hexdigest()[:16])
    return out


def digests() -> dict[str, list[str]]:
    out = {}
    for size, precision, arrangement in BLOCKS:
        desc = (Size(*size) + Precision(*precision) + Arrangement(*(LAYOUT[x] for x in arrangement)) + SM(900)
                + Block())
        name = f"block {'x'.join(map(str, size))} {'-'.join(precision)} {arrangement}"
        out[f"{name} batched"] = text_digests(desc.compile(arch=900).cubin)
        aligned = with_alignment(desc.plan, (16, 16, 16))
        out[f"{name} batched aligned"] = text_digests(blasdx.pipeline.compile_for_arch(aligned, 900).cubin)
        out[f"{name} device API"] = text_digests(
            blasdx.compile_kernel(desc.device_source("gemm") + K_LOOP, "k_loop", sm=900).cubin)
    for size, precision in GRIDS:
        desc = Size(*size) + Precision(*precision) + Arrangement("row_major", "col_major", "row_major") + SM(900) + Grid()
        name = f"grid {'x'.join(map(str, size))} {'-'.join(precision)}"
        out[name] = text_digests(desc.compile(arch=900).cubin)
        epilogue = "gelu" if precision[2].startswith("float") else "relu"
        out[f"{name} {epilogue} bias"] = text_digests(desc.compile(arch=900, epilogue=epilogue, bias=True).cubin)
        aligned = grid_with_alignment(desc.plan, (16, 16, 16))
        out[f"{name} aligned"] = text_digests(blasdx.pipeline.compile_for_arch(aligned, 900).cubin)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="write the digests to this JSON file")
    group.add_argument("--compare", help="compare with the digests in this JSON file")
    args = parser.parse_args()
    found = digests()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(found, f, indent=1)
        print(f"{len(found)} kernels")
        return 0
    with open(args.compare) as f:
        before = json.load(f)
    differ = [name for name in found if before.get(name) != found[name]]
    for name in differ:
        print(f"DIFFERS {name}")
    print(f"{len(differ)} of {len(found)} differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
