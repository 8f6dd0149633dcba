"""Visible checks for conv2d-einsum: small fixed inputs, expected values written out.

The hidden checks use other shapes and random values, gradients with random cotangents, and time
a larger input for the bonus point.
"""

import torch

from worker.harness.checks import (
    Context,
    Fail,
    call,
    check,
    diagnose_exception,
    expect_close,
    expect_grad,
    expect_tensor,
)
from worker.harness.remote import StudentError

EXAMPLE_INPUT = torch.arange(16.0).reshape(1, 1, 4, 4)
EXAMPLE_FILTER = torch.tensor([[[[1.0, 2.0], [0.0, -1.0]]]])


def _example(ctx: Context, requires_grad: bool) -> tuple:
    return ctx.student.put(
        tuple(
            ctx.on_device(t.clone()).requires_grad_(requires_grad)
            for t in (EXAMPLE_INPUT, EXAMPLE_FILTER)
        )
    )


@check(
    "example", points=1, uses="conv2d", en="the statement's example", es="el ejemplo del enunciado"
)
def example(ctx: Context) -> None:
    input, filter = _example(ctx, requires_grad=False)
    output = expect_tensor(
        call(ctx, "conv2d", input, filter),
        "`conv2d(input, filter)`",
        shape=(1, 1, 3, 3),
        dtype=torch.float32,
        device=ctx.device,
    )
    expect_close(
        output,
        torch.tensor([[[[-3.0, -1.0, 1.0], [5.0, 7.0, 9.0], [13.0, 15.0, 17.0]]]]),
        "`conv2d(input, filter)`",
    )


@check(
    "batch-and-channels",
    points=1,
    uses="conv2d",
    en="input (2, 3, 5, 6) of ones, filter (4, 3, 2, 3) with filter[o] = o + 1, float64",
    es="input (2, 3, 5, 6) de unos, filter (4, 3, 2, 3) con filter[o] = o + 1, float64",
)
def batch_and_channels(ctx: Context) -> None:
    filter = torch.arange(1.0, 5.0, dtype=torch.float64).reshape(4, 1, 1, 1).expand(4, 3, 2, 3)
    input, filter = ctx.student.put(
        (
            ctx.on_device(torch.ones(2, 3, 5, 6, dtype=torch.float64)),
            ctx.on_device(filter.contiguous()),
        )
    )
    output = expect_tensor(
        call(ctx, "conv2d", input, filter),
        "`conv2d(input, filter)`",
        shape=(2, 4, 4, 4),
        dtype=torch.float64,
        device=ctx.device,
    )
    # every window holds 3·2·3 = 18 ones
    expected = torch.tensor([18.0, 36.0, 54.0, 72.0], dtype=torch.float64).reshape(1, 4, 1, 1)
    expect_close(output, expected.expand(2, 4, 4, 4), "`conv2d(input, filter)`")


@check(
    "gradients",
    points=1,
    uses="conv2d",
    en="the example's gradients for a cotangent of ones",
    es="los gradientes del ejemplo con un cotangente de unos",
)
def gradients(ctx: Context) -> None:
    input, filter = _example(ctx, requires_grad=True)
    output = expect_tensor(
        call(ctx, "conv2d", input, filter), "`conv2d(input, filter)`", shape=(1, 1, 3, 3)
    )
    try:  # an output with no graph fails here, as `detached-output`
        ctx.student.method(output, "backward", ctx.on_device(torch.ones(1, 1, 3, 3)))
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, "`conv2d(input, filter)`")) from None
    expect_grad(
        ctx.student.attr(input, "grad"),
        torch.tensor(
            [
                [
                    [
                        [1.0, 3.0, 3.0, 2.0],
                        [1.0, 2.0, 2.0, 1.0],
                        [1.0, 2.0, 2.0, 1.0],
                        [0.0, -1.0, -1.0, -1.0],
                    ]
                ]
            ]
        ),
        "`input.grad`",
    )
    expect_grad(
        ctx.student.attr(filter, "grad"),
        torch.tensor([[[[45.0, 54.0], [81.0, 90.0]]]]),
        "`filter.grad`",
    )
