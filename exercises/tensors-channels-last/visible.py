"""Checks students run before submitting: the statement's example, with its expected values."""

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    call,
    check,
    expect_close,
    expect_tensor,
)

WHAT = "`to_channels_last(x)`"
INPUT_HINT = {
    "en": "Leave `x` as it is: return a new tensor instead of changing `x`.",
    "es": "Deja `x` como está: devuelve un tensor nuevo en lugar de cambiar `x`.",
}


def _example(ctx: Context):
    x = ctx.student.put(torch.arange(24.0).reshape(2, 3, 2, 2))
    return x, call(ctx, "to_channels_last", x)


@check(
    "example-values",
    points=1,
    uses="to_channels_last",
    en="the example: shape and values",
    es="el ejemplo: forma y valores",
)
def example_values(ctx: Context) -> None:
    _, y = _example(ctx)
    expect_close(
        expect_tensor(y, WHAT, shape=(2, 3, 2, 2), dtype=torch.float32),
        torch.arange(24.0).reshape(2, 3, 2, 2),
        WHAT,
    )


@check(
    "example-strides",
    points=1,
    uses="to_channels_last",
    en="the example: channels_last strides",
    es="el ejemplo: pasos (strides) de channels_last",
)
def example_strides(ctx: Context) -> None:
    _, y = _example(ctx)
    y = expect_tensor(y, WHAT, shape=(2, 3, 2, 2))
    if y.strides != [12, 1, 6, 3]:
        raise Fail(
            Diagnostic(
                "memory-format-wrong", {"what": WHAT, "got": y.strides, "expected": [12, 1, 6, 3]}
            )
        )
    # the strides are read from the memory sent, which must hold the example's values too
    expect_close(y, torch.arange(24.0).reshape(2, 3, 2, 2), WHAT)


@check(
    "example-input",
    points=1,
    uses="to_channels_last",
    en="the example: x unchanged",
    es="el ejemplo: x no cambia",
)
def example_input(ctx: Context) -> None:
    x, _ = _example(ctx)
    after = expect_tensor(ctx.student.attr(x, "data"), "`x`")
    if after.strides != [12, 4, 2, 1]:
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": {
                        "en": "`x.stride()` after calling `to_channels_last(x)`",
                        "es": "`x.stride()` tras llamar a `to_channels_last(x)`",
                    },
                    "got": tuple(after.strides),
                    "expected": (12, 4, 2, 1),
                    "worst_index": [],
                    "hint": INPUT_HINT,
                },
            )
        )
    expect_close(after, torch.arange(24.0).reshape(2, 3, 2, 2), "`x`", hint=INPUT_HINT)
