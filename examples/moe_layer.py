"""A mixture-of-experts feed-forward layer on blasdx.pytorch.grouped_gemm: a router picks each token's top-2 of 8
experts, the tokens are permuted so that each expert's rows lie together (its offsets, on the device: no host
synchronisation), one grouped GEMM computes every expert's gate and up projections at once and joins them by
SwiGLU in its epilogue (the gate and up values never reach memory), a second grouped GEMM projects down, and the rows go back to their tokens weighted by the router. The
output and the gradients of the experts' weights are checked against a plain PyTorch loop over the experts in
float64.

Needs PyTorch (pip install torch) and an SM 90 GPU (Grouped() runs Hopper's TMA kernel); without them it compiles
the layer's kernels, says what it skipped and exits with status 0."""

from __future__ import annotations

from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Grouped, Precision, Size, swiglu

TOKENS, HIDDEN, INTER, EXPERTS, TOP = 512, 256, 384, 8, 2
BF16 = Precision("bfloat16", "bfloat16", "bfloat16")
RCR = Arrangement("row_major", "col_major", "row_major")
ROWS_A_GROUP = TOKENS * TOP // EXPERTS  # a typical expert's rows: chooses the tile
GATE_UP = Size(ROWS_A_GROUP, 2 * INTER, HIDDEN) + BF16 + RCR + SM(900) + Grouped()
DOWN = Size(ROWS_A_GROUP, HIDDEN, INTER) + BF16 + RCR + SM(900) + Grouped()


def main() -> None:
    try:
        import torch

        import blasdx.pytorch as bt
    except ImportError:
        GATE_UP.compile(arch=900)
        return print("moe layer: compiled; needs PyTorch (pip install torch), not installed here, so not run")
    if not GPU or not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        GATE_UP.compile(arch=900)
        DOWN.compile(arch=900)
        return skip_run("moe layer (an SM 90 GPU)")

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(TOKENS, HIDDEN, device="cuda", generator=gen).bfloat16()
    router = torch.randn(HIDDEN, EXPERTS, device="cuda", generator=gen).bfloat16()
    # each expert's weights as nn.Linear keeps them: (out, in), so that B = w.transpose(1, 2) is column-major; the
    # gate and up rows interleaved (row 2j the gate's j, 2j + 1 the up's), as the fused SwiGLU reads them
    w_gate_up = (torch.randn(EXPERTS, 2 * INTER, HIDDEN, device="cuda", generator=gen) / HIDDEN**0.5).bfloat16()
    w_down = (torch.randn(EXPERTS, HIDDEN, INTER, device="cuda", generator=gen) / INTER**0.5).bfloat16()
    w_gate_up.requires_grad_()
    w_down.requires_grad_()

    # routing: top-2 experts a token, their softmax weights; rows sorted by expert, offsets = running counts
    probs, experts = torch.topk(torch.softmax((x @ router).float(), dim=-1), TOP, dim=-1)
    order = torch.argsort(experts.flatten(), stable=True)
    token_of_row = order // TOP
    offsets = torch.bincount(experts.flatten(), minlength=EXPERTS).cumsum(0).to(torch.int32)

    def layer(x, w_gate_up, w_down):
        rows = x[token_of_row]  # permuted: each expert's rows together
        hidden = bt.grouped_gemm(GATE_UP, rows, w_gate_up.transpose(1, 2), offsets, epilogue=swiglu(layout="interleaved"))
        down = bt.grouped_gemm(DOWN, hidden, w_down.transpose(1, 2), offsets)
        out = torch.zeros(TOKENS, HIDDEN, device="cuda")
        return out.index_add(0, token_of_row, down.float() * probs.flatten()[order, None])

    def reference(x, w_gate_up, w_down):  # a loop over the experts, float64
        out = torch.zeros(TOKENS, HIDDEN, device="cuda", dtype=torch.float64)
        for e in range(EXPERTS):
            token, slot = torch.nonzero(experts == e, as_tuple=True)
            gate_up = x[token].double() @ w_gate_up[e].double().t()
            hidden = torch.nn.functional.silu(gate_up[:, 0::2]) * gate_up[:, 1::2]
            out.index_add_(0, token, (hidden @ w_down[e].double().t()) * probs[token, slot, None].double())
        return out

    out = layer(x, w_gate_up, w_down)
    out.square().sum().backward()
    ours = (w_gate_up.grad.float().cpu().numpy(), w_down.grad.float().cpu().numpy())
    w64 = [w.detach().double().requires_grad_() for w in (w_gate_up, w_down)]
    ref = reference(x, *w64)
    ref.square().sum().backward()
    check("MoE layer output vs a float64 loop over the experts", out.detach().cpu().numpy(),
          ref.detach().cpu().numpy(), 2e-2)
    check("dL/dW gate+up vs the loop", ours[0], w64[0].grad.cpu().numpy(), 3e-2)
    check("dL/dW down vs the loop", ours[1], w64[1].grad.cpu().numpy(), 3e-2)
    compiled = torch.compile(layer, fullgraph=True)
    check("torch.compile(fullgraph=True) vs eager", compiled(x, w_gate_up, w_down).detach().cpu().numpy(),
          out.detach().cpu().numpy(), 1e-6)


if __name__ == "__main__":
    main()
