"""Training with blasdx.pytorch.gemm: a batch of 256 independent linear layers (one weight
matrix and bias per item, as in a mixture of small experts), relu(x @ W + b), fitted to a
teacher of the same shape by Adam. The weights are float32 master copies cast to float16
for the op (mixed precision: float16 operands, float32 accumulation and output); the
gradients of W and b come from blasdx GEMMs. The first step's gradients are checked
against float64 PyTorch, the loss must fall, and the same step under
torch.compile(fullgraph=True) must give the same loss.

Needs PyTorch (pip install torch) besides blasdx's cu13 or cu12 extra; without PyTorch, or
without a GPU, it compiles the layer's kernel, says what it skipped and exits with status 0."""

from __future__ import annotations

import sys

from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Block, Precision, Size

ITEMS, ROWS, IN, OUT = 256, 64, 64, 64
LAYER = (Size(ROWS, OUT, IN) + Precision("float16", "float16", "float32")
         + Arrangement("row_major", "row_major", "row_major") + SM(800) + Block())


def main() -> None:
    try:
        import torch

        import blasdx.pytorch as bt
    except ImportError:
        LAYER.compile(arch=900)
        return print("torch training: compiled; needs PyTorch (pip install torch), not installed here, so not run")
    if not GPU or not torch.cuda.is_available():
        LAYER.compile(arch=900)
        return skip_run("torch training")

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(ITEMS, ROWS, IN, device="cuda", generator=gen).half()
    teacher_w = torch.randn(ITEMS, IN, OUT, device="cuda", generator=gen) / IN**0.5
    teacher_b = torch.randn(ITEMS, 1, OUT, device="cuda", generator=gen)
    target = torch.relu(x.float() @ teacher_w + teacher_b)
    w = (torch.randn(ITEMS, IN, OUT, device="cuda", generator=gen) / IN**0.5).requires_grad_(True)
    b = torch.zeros(ITEMS, 1, OUT, device="cuda", requires_grad=True)

    def loss_of(x, w, b):
        y = bt.gemm(LAYER, x, w.half(), bias=b, epilogue="relu")  # (ITEMS, ROWS, OUT) float32
        return torch.nn.functional.mse_loss(y, target)

    # The first step's gradients against float64 PyTorch, with relu's kink where blasdx put it.
    loss = loss_of(x, w, b)
    loss.backward()
    w64, b64 = (t.detach().double().requires_grad_(True) for t in (w, b))
    z64 = x.double() @ w64.half().double() + b64  # the same float16 rounding of W as the op sees
    with torch.no_grad():
        kink = bt.gemm(LAYER, x, w.half(), bias=b, epilogue="relu") > 0
    torch.nn.functional.mse_loss(z64 * kink, target.double()).backward()
    check("first-step dL/dW vs float64 PyTorch", w.grad.cpu().numpy(), w64.grad.cpu().numpy(), 2e-3)
    check("first-step dL/db vs float64 PyTorch", b.grad.cpu().numpy(), b64.grad.cpu().numpy(), 2e-3)

    opt = torch.optim.Adam([w, b], lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = loss_of(x, w, b)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    verdict(f"eager training: loss {losses[0]:.4f} -> {losses[-1]:.4f} in 30 steps", losses[-1] < 0.5 * losses[0])

    compiled = torch.compile(loss_of, fullgraph=True)
    with torch.no_grad():
        eager_loss = loss_of(x, w, b).item()
    opt.zero_grad()
    loss = compiled(x, w, b)
    loss.backward()
    verdict(f"torch.compile(fullgraph=True) step: loss {loss.item():.6f} vs eager {eager_loss:.6f}",
            abs(loss.item() - eager_loss) <= 1e-5 * abs(eager_loss) and w.grad is not None)


def verdict(what: str, ok: bool) -> None:
    print(f"{what} {'OK' if ok else 'FAILED'}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
