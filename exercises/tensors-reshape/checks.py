"""Hidden checks for tensors-reshape: reshape, transpose, unsqueeze and a flat view.

Each check runs a fixed case first, whose sizes all differ (so that no wrong dimension order can
give the right shape by chance), then a random one. Expected values are the reference's.

Every point rests on values the grader reads back: what the functions return, from fresh hidden
inputs, and for flat-view-shares whether values the grader writes into one tensor show in the
other (a behaviour, never the storage address the student's process reports).
"""

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    call,
    check,
    expect_close,
    expect_sharing,
    expect_tensor,
)


def _sizes(ctx: Context, count: int, low: int, high: int) -> list[int]:
    return [int(n) for n in ctx.randint(low, high, (count,))]


def _arange(*shape: int) -> torch.Tensor:
    """Distinct values in order: a wrong order of the elements shows in every check."""
    return torch.arange(float(torch.Size(shape).numel())).reshape(shape)


# Right shape, wrong order: the usual way to get there is a reshape where a transpose was meant.
SWAP_HINT = {
    "en": "`reshape`/`view` keep the order of the elements; swapping two dimensions "
    "needs `transpose(-2, -1)` (or `mT`).",
    "es": "`reshape`/`view` mantienen el orden de los elementos; intercambiar dos "
    "dimensiones requiere `transpose(-2, -1)` (o `mT`).",
}


def _swapped_pair(shape: tuple, got: tuple) -> tuple[int, int] | None:
    """The two dimensions of `shape` whose swap gives `got`, if there is exactly such a pair."""
    if len(shape) != len(got) or shape == got:
        return None
    differ = [i for i, (a, b) in enumerate(zip(shape, got)) if a != b]
    if (
        len(differ) == 2
        and shape[differ[0]] == got[differ[1]]
        and shape[differ[1]] == got[differ[0]]
    ):
        return differ[0], differ[1]
    return None


def _shape_hint(name: str, x: torch.Tensor, got: tuple, expected: tuple) -> dict | None:
    """What the wrong shape is, read from the shapes alone (only where it is exactly that)."""
    shape = tuple(x.shape)
    if (
        name == "rows"
        and len(shape) == 3
        and shape[1] != shape[2]
        and got == (x.numel() // shape[1], shape[1])
    ):
        n, r, c = shape
        return {
            "en": f"Your rows have {r} elements, `a.shape[1]` (r), but a row of the result "
            f"is a row of `a`: {c} elements, `a.shape[2]` (c). (n, r, c) = {list(shape)} "
            f"→ (n·r, c) = {list(expected)}.",
            "es": f"Tus filas tienen {r} elementos, `a.shape[1]` (r), pero una fila del "
            f"resultado es una fila de `a`: {c} elementos, `a.shape[2]` (c). "
            f"(n, r, c) = {list(shape)} → (n·r, c) = {list(expected)}.",
        }
    if name == "swap_last":
        pair = _swapped_pair(shape, got)
        nd = len(shape)
        if pair and pair != (nd - 2, nd - 1):
            i, j = pair
            return {
                "en": f"You swapped dimensions {i} and {j} of a {nd}-D tensor, not the last "
                f"two ({nd - 2} and {nd - 1} here): count them from the end, "
                "`transpose(-2, -1)`, which is right for any rank.",
                "es": f"Intercambiaste las dimensiones {i} y {j} de un tensor {nd}-D, no las "
                f"dos últimas (aquí la {nd - 2} y la {nd - 1}): cuéntalas desde el "
                "final, `transpose(-2, -1)`, que vale para cualquier rango.",
            }
    if name == "flat_view" and len(got) == 2 and x.numel() in got and 1 in got:
        one = (
            {"en": "a single row", "es": "una sola fila"}
            if got[0] == 1
            else {"en": "a single column", "es": "una sola columna"}
        )
        return {
            "en": f"Your result has shape {list(got)}, {one['en']}: that is still 2-D. A 1-D "
            f"tensor has one dimension, {list(expected)}: `view(-1)`.",
            "es": f"Tu resultado tiene forma {list(got)}, {one['es']}: sigue siendo 2-D. Un "
            f"tensor 1-D tiene una sola dimensión, {list(expected)}: `view(-1)`.",
        }
    return None


def _exception_hint(name: str, x: torch.Tensor, error: str, passed: list) -> dict | None:
    """An exception named from what the grader knows: the input's rank, and the inputs of this
    check the function handled before (the student's error text only chooses the words)."""
    nd = x.dim()
    if name == "swap_last" and "Dimension out of range" in error:
        return {
            "en": f"Here `a` is {nd}-D: its dimensions are 0…{nd - 1} (or -{nd}…-1), and your "
            "code asked for one it does not have. The last two dimensions are -2 and -1 "
            "whatever the rank: count them from the end, `transpose(-2, -1)`.",
            "es": f"Aquí `a` es {nd}-D: sus dimensiones son 0…{nd - 1} (o -{nd}…-1), y tu "
            "código pidió una que no tiene. Las dos últimas dimensiones son -2 y -1 sea "
            "cual sea el rango: cuéntalas desde el final, `transpose(-2, -1)`.",
        }
    if name == "add_batch_dim":
        ok = sorted({int(p.shape[0]) for p in passed if int(p.shape[0]) != int(x.shape[0])})
        if ok:
            c = int(x.shape[0])
            worked_en = " and ".join(f"{k} channel{'s' * (k != 1)}" for k in ok)
            worked_es = " y ".join(f"{k} canal{'es' * (k != 1)}" for k in ok)
            return {
                "en": f"Your `add_batch_dim` handled an image of {worked_en} but fails on one "
                f"of {c} channel{'s' * (c != 1)}, {list(x.shape)}: take every size from "
                "`img.shape` (or use `unsqueeze(0)`) instead of fixing the channels.",
                "es": f"Tu `add_batch_dim` funcionó con una imagen de {worked_es} pero falla "
                f"con una de {c} canal{'es' * (c != 1)}, {list(x.shape)}: toma cada "
                "tamaño de `img.shape` (o usa `unsqueeze(0)`) en lugar de fijar los "
                "canales.",
            }
    return None


def _result(
    ctx: Context,
    name: str,
    x: torch.Tensor,
    what: str,
    hint: dict | None = None,
    passed: list | None = None,
):
    """Send x, call `name` on it and check shape, dtype and values against the reference's.
    `passed`: the inputs of this check handled so far (evidence for a later failure's hint)."""
    expected = getattr(ctx.reference, name)(x.clone())
    sent = ctx.student.put(ctx.on_device(x))
    try:
        result = call(ctx, name, sent)
    except Fail as fail:
        first = fail.diagnostics[0]
        better = (
            _exception_hint(name, x, str(first.details.get("error", "")), passed or [])
            if first.code == "exception"
            else None
        )
        if better is None:
            raise
        raise Fail(Diagnostic(first.code, dict(first.details, hint=better))) from None
    got = expect_tensor(result, what)
    if got.shape != tuple(expected.shape):
        details = {"what": what, "got": list(got.shape), "expected": list(expected.shape)}
        better = _shape_hint(name, x, got.shape, tuple(expected.shape))
        if better is None and passed and name == "add_batch_dim":
            better = _exception_hint(name, x, "", passed)
        if better is not None:
            details["hint"] = better
        raise Fail(Diagnostic("shape-mismatch", details))
    expect_tensor(got, what, dtype=expected.dtype)
    expect_close(got, expected, what, hint=hint)
    if passed is not None:
        passed.append(x)


@check(
    "rows-example",
    points=2,
    uses="rows",
    en="rows: (2, 4, 4) → (8, 4)",
    es="rows: (2, 4, 4) → (8, 4)",
)
def rows_example(ctx: Context) -> None:
    _result(ctx, "rows", _arange(2, 4, 4), "`rows(a)`")
    _result(ctx, "rows", ctx.randn(2, 4, 4, dtype=torch.float32), "`rows(a)`")


@check(
    "rows-any-shape",
    points=2,
    uses="rows",
    en="rows: (n, r, c) → (n·r, c) for random shapes",
    es="rows: (n, r, c) → (n·r, c) con formas aleatorias",
)
def rows_any_shape(ctx: Context) -> None:
    _result(ctx, "rows", _arange(3, 2, 5), "`rows(a)`")
    # c in 5..7 never divides 32, so the example's (8, 4) cannot fit by chance
    n, r, c = _sizes(ctx, 1, 2, 6) + _sizes(ctx, 1, 2, 5) + _sizes(ctx, 1, 5, 8)
    _result(ctx, "rows", ctx.randn(n, r, c), "`rows(a)`")


@check(
    "swap-last-matrix",
    points=1,
    uses="swap_last",
    en="swap_last of a matrix",
    es="swap_last de una matriz",
)
def swap_last_matrix(ctx: Context) -> None:
    _result(ctx, "swap_last", _arange(2, 3), "`swap_last(a)`", SWAP_HINT)
    # no dimension of size 1: there a reshape would pass for a transpose
    _result(ctx, "swap_last", ctx.randn(*_sizes(ctx, 2, 2, 7)), "`swap_last(a)`", SWAP_HINT)


@check(
    "swap-last-batch",
    points=2,
    uses="swap_last",
    en="swap_last of a 3-D or 4-D tensor",
    es="swap_last de un tensor 3-D o 4-D",
)
def swap_last_batch(ctx: Context) -> None:
    # fixed: a 3-D and a 4-D tensor, all sizes distinct (each rank the statement names)
    _result(ctx, "swap_last", _arange(4, 2, 3), "`swap_last(a)`", SWAP_HINT)
    _result(ctx, "swap_last", _arange(2, 3, 4, 5), "`swap_last(a)`", SWAP_HINT)
    sizes = _sizes(ctx, int(ctx.randint(3, 5, ())), 2, 6)
    # first and last sizes differ, so reversing every dimension (`.T`) gives the wrong shape
    sizes[0] += sizes[0] == sizes[-1]
    _result(ctx, "swap_last", ctx.randn(*sizes, dtype=torch.float32), "`swap_last(a)`", SWAP_HINT)


@check(
    "add-batch-dim",
    points=2,
    uses="add_batch_dim",
    en="add_batch_dim: (C, H, W) → (1, C, H, W)",
    es="add_batch_dim: (C, H, W) → (1, C, H, W)",
)
def add_batch_dim(ctx: Context) -> None:
    # fixed: 3 channels (RGB), 1 (grey) and 4, so that a fixed channel count fails on every seed
    passed: list = []
    for img in (_arange(3, 4, 5), _arange(1, 6, 7), _arange(4, 2, 3)):
        _result(ctx, "add_batch_dim", img, "`add_batch_dim(img)`", passed=passed)
    shape = _sizes(ctx, 1, 1, 5) + _sizes(ctx, 2, 2, 9)
    _result(
        ctx,
        "add_batch_dim",
        ctx.randn(*shape, dtype=torch.float32),
        "`add_batch_dim(img)`",
        passed=passed,
    )


def _flat_inputs(ctx: Context) -> list[torch.Tensor]:
    ndim = int(ctx.randint(2, 5, ()))
    # fixed: each rank the statement names (2-D, 3-D, 4-D), then a random one
    return [
        _arange(3, 5),
        _arange(2, 3, 4),
        _arange(2, 3, 2, 2),
        ctx.randn(*_sizes(ctx, ndim, 2, 6), dtype=torch.float32),
    ]


@check(
    "flat-view-values",
    points=1,
    uses="flat_view",
    en="flat_view: 1-D, values in order",
    es="flat_view: 1-D, valores en orden",
)
def flat_view_values(ctx: Context) -> None:
    for x in _flat_inputs(ctx):
        _result(ctx, "flat_view", x, "`flat_view(x)`")


@check(
    "flat-view-shares",
    points=2,
    uses="flat_view",
    en="flat_view shares memory with x",
    es="flat_view comparte memoria con x",
)
def flat_view_shares(ctx: Context) -> None:
    """By behaviour: fresh values the grader writes into the result must show in x, and the
    other way round, exactly as they do for the reference's view."""
    for x in _flat_inputs(ctx):
        x_ref = x.clone()
        expected = ctx.reference.flat_view(x_ref)
        sent = ctx.student.put(ctx.on_device(x))
        got = expect_tensor(call(ctx, "flat_view", sent), "`flat_view(x)`", shape=expected.shape)
        expect_sharing(
            ctx,
            got,
            sent,
            (expected, x_ref),
            {
                "en": "`x` after a write into `flat_view(x)`",
                "es": "`x` tras escribir en `flat_view(x)`",
            },
        )
        expect_sharing(
            ctx,
            sent,
            got,
            (x_ref, expected),
            {
                "en": "`flat_view(x)` after a write into `x`",
                "es": "`flat_view(x)` tras escribir en `x`",
            },
        )
