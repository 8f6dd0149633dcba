"""Visible checks for autograd-vjp: small fixed inputs, expected values written out.

The hidden checks use random inputs and cotangents, other lengths, and large inputs in float32.
"""

import torch

from worker.harness.checks import Context, call, check, expect_close, expect_grad, expect_tensor


def _leaf(ctx: Context, values: list[float]) -> torch.Tensor:
    return ctx.on_device(torch.tensor(values)).requires_grad_()


@check(
    "vjp-example",
    points=1,
    uses="vjp",
    en="the statement's vjp example",
    es="el ejemplo de vjp del enunciado",
)
def vjp_example(ctx: Context) -> None:
    x, v = ctx.student.put(
        (_leaf(ctx, [1.0, -2.0, 0.0]), ctx.on_device(torch.tensor([1.0, 0.5, 2.0])))
    )
    expected = torch.tensor([12.0, 0.0, 16.0])  # 4·(x + 2)·v
    expect_grad(
        expect_tensor(call(ctx, "vjp", x, v), "`vjp(x, v)`", device=ctx.device),
        expected,
        "`vjp(x, v)`",
    )
    expect_grad(
        ctx.student.attr(x, "grad"),
        expected,
        {"en": "`x.grad` after `vjp(x, v)`", "es": "`x.grad` tras `vjp(x, v)`"},
    )


def _expect_jacobian(ctx: Context, x: list[float], expected: torch.Tensor) -> None:
    got = call(ctx, "softmax_jacobian", ctx.student.put(_leaf(ctx, x)))
    n = len(x)
    expect_close(
        expect_tensor(
            got, "`softmax_jacobian(x)`", shape=(n, n), dtype=torch.float32, device=ctx.device
        ),
        expected,
        "`softmax_jacobian(x)`",
    )


@check(
    "jacobian-example",
    points=1,
    uses="softmax_jacobian",
    en="the statement's Jacobian: x = log([1, 2, 3])",
    es="el jacobiano del enunciado: x = log([1, 2, 3])",
)
def jacobian_example(ctx: Context) -> None:
    _expect_jacobian(
        ctx,
        torch.tensor([1.0, 2.0, 3.0]).log().tolist(),
        torch.tensor([[5.0, -2.0, -3.0], [-2.0, 8.0, -6.0], [-3.0, -6.0, 9.0]]) / 36,
    )


@check(
    "jacobian-uniform",
    points=1,
    uses="softmax_jacobian",
    en="x = [0, 0, 0, 0]",
    es="x = [0, 0, 0, 0]",
)
def jacobian_uniform(ctx: Context) -> None:
    _expect_jacobian(
        ctx, [0.0, 0.0, 0.0, 0.0], (4 * torch.eye(4) - 1) / 16
    )  # diag(s) − s·sᵀ, s = ¼
