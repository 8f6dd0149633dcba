"""Checks you can run before submitting: `hpcgrade check autograd-saved-hooks FILE`."""
import torch

from worker.harness.checks import (Context, Diagnostic, Fail, call, check, expect_close,
                                   expect_grad, expect_tensor)

COUNT_HINT = {
    "en": "A file for each saved tensor with at least `SAVE_ON_DISK_THRESHOLD` elements (`numel()`, "
          "not bytes), each with a name of its own, in `tempfile.gettempdir()` asked when `pack_hook` runs.",
    "es": "Un archivo por cada tensor guardado con al menos `SAVE_ON_DISK_THRESHOLD` elementos "
          "(`numel()`, no bytes), cada uno con su propio nombre, en el `tempfile.gettempdir()` "
          "consultado cuando se ejecuta `pack_hook`."}


def _offload(ctx: Context, x: torch.Tensor):
    """grad_with_offload with support.py's OffloadProbe; the gradient and the files it counted."""
    directory = ctx.student.new("fresh_tempdir")
    probe = ctx.student.new("OffloadProbe", directory)
    grad = call(ctx, "grad_with_offload", probe, ctx.student.put(x.requires_grad_()))
    return (grad, ctx.student.attr(probe, "files_during_backward"),
            ctx.student.new("count_files", directory))


@check("round-trip", points=1, uses=("pack_hook", "unpack_hook"),
       en="`unpack_hook(pack_hook(t))` for a 30×40 float64 tensor",
       es="`unpack_hook(pack_hook(t))` para un tensor float64 de 30×40")
def round_trip(ctx: Context) -> None:
    ctx.student.new("fresh_tempdir")
    t = torch.arange(1200, dtype=torch.float64).reshape(30, 40) / 7
    back = call(ctx, "unpack_hook", call(ctx, "pack_hook", ctx.student.put(t)))
    expect_tensor(back, "`unpack_hook(pack_hook(t))`", shape=(30, 40), dtype=torch.float64)
    expect_close(back, torch.arange(1200, dtype=torch.float64).reshape(30, 40) / 7,
                 "`unpack_hook(pack_hook(t))`", rtol=0.0, atol=0.0)


@check("gradient", points=1, uses="grad_with_offload",
       en="the gradient of `offload_example(x).sum()` at x = 0.5 (1200 elements)",
       es="el gradiente de `offload_example(x).sum()` en x = 0.5 (1200 elementos)")
def gradient(ctx: Context) -> None:
    grad, _, _ = _offload(ctx, torch.full((1200,), 0.5, dtype=torch.float64))
    expected = torch.full((1200,), 0.9182168195)  # cos(0.5)·0.5 + sin(0.5)
    expected[:16] += 5.4365636569  # 2·exp(2·0.5), from the first 16 elements' exp(x)²
    expect_grad(grad, expected, "`grad_with_offload(OffloadProbe(...), x)`")


@check("files", points=1, uses="grad_with_offload",
       en="3 files during backward for 1200 elements, none for 999; none left afterwards",
       es="3 archivos durante backward con 1200 elementos, ninguno con 999; ninguno al final")
def files(ctx: Context) -> None:
    for n, during in ((1200, [3]), (999, [0])):
        _, found, left = _offload(ctx, torch.randn(n, dtype=torch.float64))
        if found != during:
            raise Fail(Diagnostic("output-mismatch", {
                "what": f"`probe.files_during_backward` (x: {n} elements, float64)", "got": found,
                "expected": during, "worst_index": [], "hint": COUNT_HINT}))
        if left != 0:
            raise Fail(Diagnostic("temp-file-leak", {"what": "`grad_with_offload(fn, x)`", "count": left}))
