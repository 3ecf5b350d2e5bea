"""Every fact about an SM and an instruction, in one place.

- The SMs a descriptor may name and each one's shared-memory limit per block.
- The tensor-core instructions: shape, scope, PTX spelling (one per architecture form),
  accumulator type, fragment registers, ldmatrix use and the padding unit of their
  fragment loads; plain FMA beside them.
- ``choose_instruction``: the only place that decides between a tensor-core ``mma``
  instruction and FMA for precisions on an SM, with the reason ``explain()`` prints.

The planner, the renderer and (through the rendered context) the templates read these
facts; none of them spells an instruction again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# The SMs cuBLASDx 0.7 accepts (CUDA 13: Volta and Xavier gone, Thor named 1100; 1010 is
# its CUDA 12 name). A descriptor also needs an NVRTC that targets its SM (see
# ``nvrtc_targets``).
SUPPORTED_SMS: tuple[int, ...] = (750, 800, 860, 870, 890, 900, 1000, 1010, 1030, 1100, 1200, 1210)

# Per-block shared memory limit of each SM, in KiB (opt-in maximum of the architecture).
SHARED_MEMORY_LIMIT_KIB: dict[int, int] = {
    750: 64, 800: 163, 860: 99, 870: 163, 890: 99, 900: 227,
    1000: 227, 1010: 227, 1030: 227, 1100: 227, 1200: 99, 1210: 99,
}

def _unknown_targets() -> tuple[tuple[int, int], tuple[int, ...]] | None:
    return None


# ((major, minor), SMs) of the installed NVRTC, or None where it is not known without
# importing CuPy. blasdx.compiler, which owns NVRTC, puts its query here when it is
# imported (as ``import blasdx`` does); SM() reads it, so that a descriptor naming an SM
# the toolchain cannot compile for is refused when it is built.
nvrtc_targets: Callable[[], tuple[tuple[int, int], tuple[int, ...]] | None] = _unknown_targets


def accepted_sms() -> tuple[int, ...]:
    """The SMs a descriptor may name: those blasdx supports that the installed NVRTC targets
    (all it supports where NVRTC's targets are not known). Every list blasdx prints is this one."""
    targets = nvrtc_targets()
    return SUPPORTED_SMS if targets is None else tuple(sm for sm in SUPPORTED_SMS if sm in targets[1])

# cp.async (global -> shared copies that bypass registers) exists from SM 80.
CP_ASYNC_MIN_SM = 800
# The tensor memory accelerator (cp.async.bulk.tensor, with mbarriers and clusters) from SM 90.
TMA_MIN_SM = 900
# stmatrix (a warp's fragments to shared memory, 16 bytes a lane) from SM 90.
STMATRIX_MIN_SM = 900
# Packed operands: mma.sync m8n8k32 .s4/.u4 and m8n8k128 .b1 .xor.popc from SM 75 (every
# supported SM); .and.popc from SM 80.
BIT_AND_MIN_SM = 800

# PTX type of an mma operand, where it differs per precision.
PTX_TYPE: dict[str, str] = {"int8": "s8", "uint8": "u8", "float8_e4m3": "e4m3", "float8_e5m2": "e5m2",
                            "int4": "s4", "uint4": "u4", "binary": "b1"}


# Shared memory the GPU keeps for each resident block, beside what the block asks for.
BLOCK_RESERVED_SHARED = 1024


def shared_memory_limit(sm: int) -> int:
    """Bytes of shared memory one block may use on ``sm``."""
    return SHARED_MEMORY_LIMIT_KIB[sm] * 1024


@dataclass(frozen=True)
class Instruction:
    """A warp-level ``mma.sync`` shape and everything the kernel needs to know of it, or FMA
    (name ``"fma"``, shape 1x1x1).

    ``ptx`` is the instruction's PTX with ``{a}``, ``{b}`` (operand types, PTX_TYPE) and
    ``{op}`` (the bit operation) to fill in; it compiles from ``ptx_arch`` (0: from
    ``min_sm``). ``ptx_sm75`` is the older, smaller form that SM 75 issues several times
    instead (empty where there is none)."""

    name: str  # "mma_f16", "mma_bf16", "mma_tf32", "mma_f64", "mma_f64_m16n8k8", "mma_i8", "mma_fp8",
    # "mma_i4", "mma_b1" or "fma"
    m: int
    n: int
    k: int
    ptx: str
    min_sm: int  # descriptor SM from which blasdx uses it
    scope: str = "warp"  # the threads that issue one instruction together
    accumulator: str = ""  # C++ type of the instruction's accumulator registers
    operand_bits: int = 0  # bits of one operand element in a fragment register
    a_regs: int = 4  # fragment registers per thread: A, B and accumulator values
    b_regs: int = 2
    c_values: int = 4
    fragment_type: str = "unsigned"
    # How fragments load (the partial templates/gemm/fragments_<this>.cuh.j2): "m16n8"
    # element-wise (or ldmatrix) into 32-bit words, "packed" whole words of k, "f64" doubles.
    fragments: str = "m16n8"
    ldmatrix: bool = False  # 16-bit operands: fragments load with ldmatrix
    packed: bool = False  # 4-bit and 1-bit operands: fragments are whole 32-bit words of k
    padding_unit: int = 16  # bytes a warp's fragment load takes from one row (see padded_leading_dimension)
    ptx_arch: int = 0  # the arch from which ``ptx`` compiles, where later than min_sm
    ptx_sm75: str = ""
    # wgmma: the warp-level mma.sync that computes the same fragments where wgmma cannot run
    # (a device other than sm_90a, operands not 1024-byte aligned, load hooks).
    fallback: Instruction | None = None
    # Whether the tensor cores keep the running sum in fewer bits than the accumulator's type: FP8
    # wgmma's about 14 (the DeepSeek-V3 report), where mma.sync's FP8 keeps float32's (benchmarks/RESULTS.md,
    # FP8 accumulation). Its partial sums are promoted into float32 (PROMOTION_K).
    narrow_accumulation: bool = False

    @property
    def is_mma(self) -> bool:
        return self.name != "fma"

    @property
    def is_wgmma(self) -> bool:
        return self.scope == "warpgroup"

    @property
    def reads_transposed(self) -> bool:
        """wgmma: whether it reads A and B MN-major too (16-bit operands), not K-major only."""
        return self.is_wgmma and self.operand_bits == 16

    def spelled(self, a: str, b: str, bit_op: str = "", ptx: str | None = None, n: int = 0) -> str:
        """``ptx`` (default: the instruction's own) for operand precisions a, b, a bit op and
        (wgmma) the instruction's n."""
        return (self.ptx if ptx is None else ptx).format(a=PTX_TYPE.get(a, ""), b=PTX_TYPE.get(b, ""), op=bit_op, n=n)


MMA_F16 = Instruction("mma_f16", 16, 8, 16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 750,
                      accumulator="float", operand_bits=16, ldmatrix=True, ptx_arch=800,
                      ptx_sm75="mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32")
MMA_BF16 = Instruction("mma_bf16", 16, 8, 16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 800,
                       accumulator="float", operand_bits=16, ldmatrix=True)
MMA_TF32 = Instruction("mma_tf32", 16, 8, 8, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 800,
                       accumulator="float", operand_bits=32)
# Double fragments are read four rows a time by half a warp: 32-byte padding units.
MMA_F64 = Instruction("mma_f64", 8, 8, 4, "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", 800,
                      accumulator="double", operand_bits=64, a_regs=1, b_regs=1, c_values=2,
                      fragment_type="double", fragments="f64", padding_unit=32)
# SM 90's double-precision shapes: m16n8k8 issues as much work as four m8n8k4, which run at
# a fraction of the tensor cores' double rate there. Fragments: A (g + 8 (j & 1), t + 4 (j >> 1)),
# B (t + 4 j, g), accumulators as the m16n8 shapes of the other types.
MMA_F64_M16N8K8 = Instruction("mma_f64_m16n8k8", 16, 8, 8, "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64", 900,
                              accumulator="double", operand_bits=64, a_regs=4, b_regs=2, c_values=4,
                              fragment_type="double", fragments="f64", padding_unit=32)
MMA_I8 = Instruction("mma_i8", 16, 8, 32, "mma.sync.aligned.m16n8k32.row.col.s32.{a}.{b}.s32", 800,
                     accumulator="int", operand_bits=8)
MMA_FP8 = Instruction("mma_fp8", 16, 8, 32, "mma.sync.aligned.m16n8k32.row.col.f32.{a}.{b}.f32", 890,
                      accumulator="float", operand_bits=8)
# Packed operands (k counts values): the same register layout as mma_i8, 32 bytes of k.
# SM 75 has them as m8n8k32 / m8n8k128 (xor only), which the kernel issues four at a time.
MMA_I4 = Instruction("mma_i4", 16, 8, 64, "mma.sync.aligned.m16n8k64.row.col.s32.{a}.{b}.s32", 750,
                     accumulator="int", operand_bits=4, packed=True, fragments="packed", ptx_arch=800,
                     ptx_sm75="mma.sync.aligned.m8n8k32.row.col.s32.{a}.{b}.s32")
MMA_B1 = Instruction("mma_b1", 16, 8, 256, "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.{op}.popc", 750,
                     accumulator="int", operand_bits=1, packed=True, fragments="packed", ptx_arch=800,
                     ptx_sm75="mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc")
# Hopper's warpgroup MMA (sm_90a only): four warps issue wgmma.mma_async m64nNk16 together
# (N a multiple of 8 up to 256), A and B read from shared memory through matrix descriptors
# in the swizzled layouts of ``swizzle_width``. Warp w of the group holds rows 16w..16w+15 of
# the 64-row tile with the accumulator layout of mma m16n8 (n pieces of 8 columns), so its
# mma.sync fallback computes the same fragments.
WGMMA_F16 = Instruction("wgmma_f16", 64, 8, 16, "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16", 900,
                        scope="warpgroup", accumulator="float", operand_bits=16, ldmatrix=True, fallback=MMA_F16)
WGMMA_BF16 = Instruction("wgmma_bf16", 64, 8, 16, "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16", 900,
                         scope="warpgroup", accumulator="float", operand_bits=16, ldmatrix=True, fallback=MMA_BF16)
# The 32- and 8-bit forms read A and B K-major only (row-major A, column-major B).
WGMMA_TF32 = Instruction("wgmma_tf32", 64, 8, 8, "wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32", 900,
                         scope="warpgroup", accumulator="float", operand_bits=32, fallback=MMA_TF32)
WGMMA_FP8 = Instruction("wgmma_fp8", 64, 8, 32, "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{a}.{b}", 900,
                        scope="warpgroup", accumulator="float", operand_bits=8, fallback=MMA_FP8,
                        narrow_accumulation=True)
WGMMA_I8 = Instruction("wgmma_i8", 64, 8, 32, "wgmma.mma_async.sync.aligned.m64n{n}k32.s32.{a}.{b}", 900,
                       scope="warpgroup", accumulator="int", operand_bits=8, fallback=MMA_I8)
WGMMA_OF: dict[str, Instruction] = {x.fallback.name: x for x in (WGMMA_F16, WGMMA_BF16, WGMMA_TF32, WGMMA_FP8, WGMMA_I8)
                                    if x.fallback is not None}
# The most k an instruction with narrow_accumulation sums before its partial sums go into float32
# registers (cuBLAS and DeepGEMM promote every 128 as well): 4 wgmma of k32.
PROMOTION_K = 128
# wgmma runs on exactly this SM (compiled for sm_90a: ``compile_arch_name``).
WGMMA_SM = 900
WGMMA_MAX_N = 256
# 32-bit registers of an SM's register file, which a block's threads share.
REGISTERS_PER_SM = 65536
# The most 32-bit registers one thread can hold.
MAX_REGISTERS_PER_THREAD = 255
# Float accumulator registers a thread may hold for its warpgroup tiles (64 x N: N / 2 each).
WGMMA_MAX_ACC_REGS = 128
# ... and with partial sums promoted into them, the accumulators and one tile's partial sums.
WGMMA_MAX_PROMOTED_REGS = 192
# The swizzled shared-memory layouts wgmma reads: rows of 128, 64 or 32 bytes, each 16-byte
# piece of a row XOR-permuted by the row's place in a group of eight. A matrix starts on a
# multiple of this many bytes, where the hardware's permutation and the layout's agree.
SWIZZLE_WIDTHS = (128, 64, 32)
SWIZZLE_ALIGNMENT = 1024


def swizzle_width(contiguous_bytes: int) -> int:
    """The widest swizzle whose rows divide ``contiguous_bytes`` (0: none does)."""
    return next((w for w in SWIZZLE_WIDTHS if contiguous_bytes % w == 0), 0)


def compile_arch_name(arch: int) -> str:
    """NVRTC's name of ``arch``: sm_90a for SM 900 (whose wgmma needs the arch-specific
    target; such a cubin runs on sm_90 devices, the only ones with SM 900), sm_XX otherwise."""
    return f"sm_{arch // 10}" + ("a" if arch == WGMMA_SM else "")


FMA = Instruction("fma", 1, 1, 1, "", 0, scope="thread", a_regs=0, b_regs=0, c_values=0, fragment_type="")

# SM 90 has no 4-bit tensor-core path of its own (mma .s4/.u4 runs several times slower than
# int8 there): 4-bit fragments are widened to bytes and multiplied with int8 mma.
WIDEN_4BIT_MIN_ARCH = 900
# ldmatrix and the smaller mma forms (Instruction.ptx_sm75) compile from sm_75.
SM75_FORMS_MIN_ARCH = 750

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
        candidate = MMA_F64_M16N8K8 if sm >= MMA_F64_M16N8K8.min_sm else MMA_F64
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
