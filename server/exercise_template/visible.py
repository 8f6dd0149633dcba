"""Visible checks: fixed inputs and their expected values written here; students run them."""

import torch

from worker.harness.checks import Context, call, check, expect_close, expect_grad


@check(
    "example",
    points=1,
    uses="scaled_square",
    en="the statement's example",
    es="el ejemplo del enunciado",
)
def example(ctx: Context) -> None:
    (x,) = ctx.student.put((torch.tensor([1.0, 2.0], requires_grad=True),))
    out = call(ctx, "scaled_square", x, 3.0)
    expect_close(out, torch.tensor([3.0, 12.0]), "`scaled_square(x, 3.0)`")
    ctx.student.method(ctx.student.method(out, "sum"), "backward")
    expect_grad(ctx.student.attr(x, "grad"), torch.tensor([6.0, 12.0]), "x.grad")
