"""Checks you can run before submitting: `hpcgrade check tensors-create FILE`. The grader's own
checks use other inputs, more dtypes and shapes, and write through both sides of the sharing."""

import numpy as np
import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    call,
    check,
    expect_close,
    expect_tensor,
    expect_tuple,
)


@check(
    "from-data", points=1, uses="from_data", en="from_data([1, 2, 3])", es="from_data([1, 2, 3])"
)
def from_data(ctx: Context) -> None:
    got = expect_tensor(
        call(ctx, "from_data", [1, 2, 3]), "`from_data([1, 2, 3])`", shape=(3,), dtype=torch.int64
    )
    expect_close(got, torch.tensor([1, 2, 3]), "`from_data([1, 2, 3])`")


@check(
    "from-numpy-shared",
    points=1,
    uses="from_numpy_shared",
    en="from_numpy_shared: `t += 1` shows in the array",
    es="from_numpy_shared: `t += 1` aparece en el array",
)
def from_numpy_shared(ctx: Context) -> None:
    arr = ctx.student.put(np.array([1.0, 2.0, 3.0]))
    got = expect_tensor(
        call(ctx, "from_numpy_shared", arr),
        "`from_numpy_shared(arr)`",
        shape=(3,),
        dtype=torch.float64,
    )
    ctx.student.method(got, "add_", 1)
    if ctx.student.method(arr, "tolist") != [2.0, 3.0, 4.0]:
        raise Fail(Diagnostic("storage-not-shared", {"what": "`from_numpy_shared(arr)`"}))


@check(
    "ones-like-float",
    points=1,
    uses="ones_like_float",
    en="ones_like_float of an integer matrix",
    es="ones_like_float de una matriz entera",
)
def ones_like_float(ctx: Context) -> None:
    got = call(ctx, "ones_like_float", ctx.student.put(torch.tensor([[1, 2], [3, 4]])))
    expect_tensor(got, "`ones_like_float(x)`", shape=(2, 2), dtype=torch.float32)
    expect_close(got, torch.tensor([[1.0, 1.0], [1.0, 1.0]]), "`ones_like_float(x)`")


@check(
    "describe",
    points=1,
    uses="describe",
    en="describe(torch.zeros(2, 3))",
    es="describe(torch.zeros(2, 3))",
)
def describe(ctx: Context) -> None:
    what = "`describe(torch.zeros(2, 3))`"
    got = expect_tuple(call(ctx, "describe", ctx.student.put(torch.zeros(2, 3))), 3, what)
    if got != ((2, 3), torch.float32, "cpu"):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": what,
                    "got": repr(got)[:120],
                    "expected": "((2, 3), torch.float32, 'cpu')",
                    "worst_index": [],
                    "max_abs_error": 0.0,
                    "max_rel_error": 0.0,
                    "hint": {
                        "en": "A tuple of ints, a `torch.dtype` and the device type as a str.",
                        "es": "Una tupla de enteros, un `torch.dtype` y el tipo de dispositivo "
                        "como cadena.",
                    },
                },
            )
        )
