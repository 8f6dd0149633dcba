"""Checks you can run yourself: `hpcgrade check autograd-custom-function FILE` (the grader's own
use other inputs)."""

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    call,
    check,
    diagnose_exception,
    expect_close,
    expect_grad,
    expect_tensor,
)
from worker.harness.remote import StudentError


def _silu_backward(ctx: Context, x: torch.Tensor, v: torch.Tensor | None):
    """y = silu(x), then y.backward(v), or y.sum().backward() where `v` is None."""
    leaf = ctx.student.put(x.requires_grad_())
    y = expect_tensor(call(ctx, "silu", leaf), "`silu(x)`", shape=tuple(x.shape), dtype=x.dtype)
    try:  # an output with no graph fails here, as `detached-output`
        if v is None:
            ctx.student.method(ctx.student.method(y, "sum"), "backward")
        else:
            ctx.student.method(y, "backward", v)
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, "`silu(x)`")) from None
    return y, ctx.student.attr(leaf, "grad")


@check(
    "statement-example",
    points=1,
    uses="silu",
    en="the statement's example: x = [−1, 0, 2], y.sum().backward()",
    es="el ejemplo del enunciado: x = [−1, 0, 2], y.sum().backward()",
)
def statement_example(ctx: Context) -> None:
    y, grad = _silu_backward(ctx, torch.tensor([-1.0, 0.0, 2.0]), None)
    expect_close(y, torch.tensor([-0.268941, 0.0, 1.761594]), "`silu(x)`", rtol=1e-5, atol=1e-5)
    expect_grad(grad, torch.tensor([0.0723295, 0.5, 1.0907843]), "`x.grad`", atol=1e-5)


@check(
    "float64-with-v",
    points=1,
    uses="silu",
    en="a float64 matrix and a cotangent v: values, gradient and dtype",
    es="una matriz float64 y un cotangente v: valores, gradiente y dtype",
)
def float64_with_v(ctx: Context) -> None:
    x = torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64)
    v = torch.tensor([[1.0, 2.0], [-1.0, 0.5]], dtype=torch.float64)
    y, grad = _silu_backward(ctx, x, v)
    expect_close(
        y,
        torch.tensor(
            [[0.7310585786, -0.2384058440], [0.3112296656, 2.8577223805]], dtype=torch.float64
        ),
        "`silu(x)`",
    )
    expect_grad(
        grad,
        torch.tensor(
            [[0.9276705119, -0.1815684976], [-0.7399611873, 0.5440520530]], dtype=torch.float64
        ),
        "`x.grad`",
    )


@check(
    "uses-your-function",
    points=1,
    uses=("silu", "SiLU"),
    en="silu(x) goes through SiLU.apply",
    es="silu(x) pasa por SiLU.apply",
)
def uses_your_function(ctx: Context) -> None:
    y = call(ctx, "silu", ctx.student.put(torch.tensor([1.0, -1.0], requires_grad=True)))
    names = [node["name"] for node in ctx.student.describe(expect_tensor(y, "`silu(x)`"))["graph"]]
    if "SiLUBackward" not in names:
        raise Fail(
            Diagnostic(
                "custom-function-unused", {"what": "`silu(x)`", "got": names[0] if names else None}
            )
        )
