"""Which instruction computes a GEMM on which SM: the one table of tensor-core support.

``choose_instruction`` is the only place that decides between a tensor-core ``mma``
instruction and plain FMA; ``explain()`` reports its choice and reason.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Instruction:
    """A warp-level ``mma.sync`` shape, or FMA (name ``"fma"``, shape 1x1x1)."""

    name: str  # "mma_f16", "mma_bf16", "mma_tf32", "mma_f64", "mma_i8", "mma_fp8", "mma_i4",
    # "mma_b1" or "fma"
    m: int
    n: int
    k: int
    ptx: str  # the PTX instruction (empty for FMA)
    min_sm: int  # descriptor SM from which blasdx uses it

    @property
    def is_mma(self) -> bool:
        return self.name != "fma"


MMA_F16 = Instruction("mma_f16", 16, 8, 16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 700)
MMA_BF16 = Instruction("mma_bf16", 16, 8, 16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 800)
MMA_TF32 = Instruction("mma_tf32", 16, 8, 8, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 800)
MMA_F64 = Instruction("mma_f64", 8, 8, 4, "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", 800)
MMA_I8 = Instruction("mma_i8", 16, 8, 32, "mma.sync.aligned.m16n8k32.row.col.s32.{a}.{b}.s32", 800)
MMA_FP8 = Instruction("mma_fp8", 16, 8, 32, "mma.sync.aligned.m16n8k32.row.col.f32.{a}.{b}.f32", 890)
# Packed operands (k counts values): the same register layout as mma_i8, 32 bytes of k.
# SM 75 has them as m8n8k32 / m8n8k128 (xor only), which the kernel issues four at a time.
MMA_I4 = Instruction("mma_i4", 16, 8, 64, "mma.sync.aligned.m16n8k64.row.col.s32.{a}.{b}.s32", 750)
MMA_B1 = Instruction("mma_b1", 16, 8, 256, "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.{op}.popc", 750)
FMA = Instruction("fma", 1, 1, 1, "", 0)

_FLOAT_ACC = ("float16", "float32")


def choose_instruction(a: str, b: str, c: str, complex_: bool, sm: int) -> tuple[Instruction, str]:
    """Return the instruction for precisions (a, b, c) on ``sm`` and the reason for it."""
    if complex_:
        return FMA, "complex GEMMs use FMA on complex values"
    pair = (a, b)
    candidate: Instruction | None = None
    if pair == ("float16", "float16") and c in _FLOAT_ACC:
        candidate = MMA_F16
    elif pair == ("bfloat16", "bfloat16") and c in ("bfloat16", "float32"):
        candidate = MMA_BF16
    elif pair == ("tfloat32", "tfloat32") and c == "float32":
        candidate = MMA_TF32
    elif pair == ("float64", "float64") and c == "float64":
        candidate = MMA_F64
    elif set(pair) <= {"int8", "uint8"} and c in ("int32", "uint32", "int64"):
        candidate = MMA_I8
    elif set(pair) <= {"float8_e4m3", "float8_e5m2"} and c in ("float16", "float32", "bfloat16"):
        candidate = MMA_FP8
    elif set(pair) <= {"int4", "uint4"} and c == "int32":
        candidate = MMA_I4
    elif pair == ("binary", "binary") and c == "int32":
        candidate = MMA_B1
    if candidate is None:
        return FMA, f"no tensor-core instruction takes {a} x {b} -> {c}; FMA"
    if sm < candidate.min_sm:
        return FMA, (f"{a} x {b} tensor-core instructions need SM {candidate.min_sm} or newer, "
                     f"the descriptor says SM {sm}; FMA")
    return candidate, f"{candidate.ptx.split('.row')[0]} (SM {candidate.min_sm}+) takes {a} x {b} -> {c}"
