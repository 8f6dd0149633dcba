"""Hidden checks for tensors-reshape: reshape, transpose, unsqueeze and a flat view.

Each check runs a fixed case first, whose sizes all differ (so that no wrong dimension order can
give the right shape by chance), then a random one. Expected values are the reference's.

Every point rests on values the grader reads back: what the functions return, from fresh hidden
inputs, and for flat-view-shares whether values the grader writes into one tensor show in the
other (a behaviour, never the storage address the student's process reports).
"""
import torch

from worker.harness.checks import (Context, call, check, expect_close, expect_sharing,
                                   expect_tensor)


def _sizes(ctx: Context, count: int, low: int, high: int) -> list[int]:
    return [int(n) for n in ctx.randint(low, high, (count,))]


def _arange(*shape: int) -> torch.Tensor:
    """Distinct values in order: a wrong order of the elements shows in every check."""
    return torch.arange(float(torch.Size(shape).numel())).reshape(shape)


# Right shape, wrong order: the usual way to get there is a reshape where a transpose was meant.
SWAP_HINT = {"en": "`reshape`/`view` keep the order of the elements; swapping two dimensions "
                   "needs `transpose(-2, -1)` (or `mT`).",
             "es": "`reshape`/`view` mantienen el orden de los elementos; intercambiar dos "
                   "dimensiones requiere `transpose(-2, -1)` (o `mT`)."}


def _result(ctx: Context, name: str, x: torch.Tensor, what: str, hint: dict | None = None):
    """Send x, call `name` on it and check shape, dtype and values against the reference's."""
    expected = getattr(ctx.reference, name)(x.clone())
    sent = ctx.student.put(ctx.on_device(x))
    got = expect_tensor(call(ctx, name, sent), what, shape=expected.shape, dtype=expected.dtype)
    expect_close(got, expected, what, hint=hint)


@check("rows-example", points=2, uses="rows", en="rows: (2, 4, 4) → (8, 4)", es="rows: (2, 4, 4) → (8, 4)")
def rows_example(ctx: Context) -> None:
    _result(ctx, "rows", _arange(2, 4, 4), "`rows(a)`")
    _result(ctx, "rows", ctx.randn(2, 4, 4, dtype=torch.float32), "`rows(a)`")


@check("rows-any-shape", points=2, uses="rows", en="rows: (n, r, c) → (n·r, c) for random shapes",
       es="rows: (n, r, c) → (n·r, c) con formas aleatorias")
def rows_any_shape(ctx: Context) -> None:
    _result(ctx, "rows", _arange(3, 2, 5), "`rows(a)`")
    # c in 5..7 never divides 32, so the example's (8, 4) cannot fit by chance
    n, r, c = _sizes(ctx, 1, 2, 6) + _sizes(ctx, 1, 2, 5) + _sizes(ctx, 1, 5, 8)
    _result(ctx, "rows", ctx.randn(n, r, c), "`rows(a)`")


@check("swap-last-matrix", points=1, uses="swap_last", en="swap_last of a matrix",
       es="swap_last de una matriz")
def swap_last_matrix(ctx: Context) -> None:
    _result(ctx, "swap_last", _arange(2, 3), "`swap_last(a)`", SWAP_HINT)
    # no dimension of size 1: there a reshape would pass for a transpose
    _result(ctx, "swap_last", ctx.randn(*_sizes(ctx, 2, 2, 7)), "`swap_last(a)`", SWAP_HINT)


@check("swap-last-batch", points=2, uses="swap_last", en="swap_last of a 3-D or 4-D tensor",
       es="swap_last de un tensor 3-D o 4-D")
def swap_last_batch(ctx: Context) -> None:
    _result(ctx, "swap_last", _arange(4, 2, 3), "`swap_last(a)`", SWAP_HINT)
    sizes = _sizes(ctx, int(ctx.randint(3, 5, ())), 2, 6)
    # first and last sizes differ, so reversing every dimension (`.T`) gives the wrong shape
    sizes[0] += sizes[0] == sizes[-1]
    _result(ctx, "swap_last", ctx.randn(*sizes, dtype=torch.float32), "`swap_last(a)`", SWAP_HINT)


@check("add-batch-dim", points=2, uses="add_batch_dim", en="add_batch_dim: (C, H, W) → (1, C, H, W)",
       es="add_batch_dim: (C, H, W) → (1, C, H, W)")
def add_batch_dim(ctx: Context) -> None:
    _result(ctx, "add_batch_dim", _arange(3, 4, 5), "`add_batch_dim(img)`")
    shape = _sizes(ctx, 1, 1, 5) + _sizes(ctx, 2, 2, 9)
    _result(ctx, "add_batch_dim", ctx.randn(*shape, dtype=torch.float32), "`add_batch_dim(img)`")


def _flat_inputs(ctx: Context) -> list[torch.Tensor]:
    ndim = int(ctx.randint(2, 5, ()))
    return [_arange(2, 3, 4), ctx.randn(*_sizes(ctx, ndim, 2, 6), dtype=torch.float32)]


@check("flat-view-values", points=1, uses="flat_view", en="flat_view: 1-D, values in order",
       es="flat_view: 1-D, valores en orden")
def flat_view_values(ctx: Context) -> None:
    for x in _flat_inputs(ctx):
        _result(ctx, "flat_view", x, "`flat_view(x)`")


@check("flat-view-shares", points=2, uses="flat_view", en="flat_view shares memory with x",
       es="flat_view comparte memoria con x")
def flat_view_shares(ctx: Context) -> None:
    """By behaviour: fresh values the grader writes into the result must show in x, and the
    other way round, exactly as they do for the reference's view."""
    for x in _flat_inputs(ctx):
        x_ref = x.clone()
        expected = ctx.reference.flat_view(x_ref)
        sent = ctx.student.put(ctx.on_device(x))
        got = expect_tensor(call(ctx, "flat_view", sent), "`flat_view(x)`", shape=expected.shape)
        expect_sharing(ctx, got, sent, (expected, x_ref), {
            "en": "`x` after a write into `flat_view(x)`",
            "es": "`x` tras escribir en `flat_view(x)`"})
        expect_sharing(ctx, sent, got, (x_ref, expected), {
            "en": "`flat_view(x)` after a write into `x`",
            "es": "`flat_view(x)` tras escribir en `x`"})
