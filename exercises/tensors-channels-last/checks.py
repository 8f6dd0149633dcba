"""Hidden checks for tensors-channels-last: the same NCHW batch, stored channels-last.

Every point rests on what the grader reads itself: values returned from fresh hidden inputs, and
layouts (strides, channels-last or contiguous) that the grader derives from the memory the
student's process sends, a tensor's storage span rebuilt here with `as_strided`, whose values
must be right too. A flag or a stride the student's process merely reports earns nothing.
"""

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
# C, H and W all differ: an NHWC permutation cannot keep this shape, a reshape to (N, H, W, C)
# cannot keep the values, and no dimension of size 1 makes two memory formats look alike
FIXED_SHAPE = (2, 3, 4, 5)

# Shown only when the values returned are, on every input of the check, those of a reshape/view
# to (N, H, W, C) (see _values_hint): the reshape regroups the values in their memory order.
MOVED_HINT = {
    "en": "channels_last keeps each value at its index (n, c, h, w) and only changes "
    "the order in memory; `reshape`/`view` to (N, H, W, C) regroups the values "
    "instead. Use `x.contiguous(memory_format=torch.channels_last)`.",
    "es": "channels_last mantiene cada valor en su índice (n, c, h, w) y solo cambia "
    "el orden en memoria; `reshape`/`view` a (N, H, W, C) reagrupa los valores. "
    "Usa `x.contiguous(memory_format=torch.channels_last)`.",
}
# the values of `x`'s memory, unmoved, read with channels-last strides (`as_strided`, `set_`…)
NOT_MOVED_HINT = {
    "en": "Your result has channels-last strides, but its memory holds `x`'s values in `x`'s own "
    "memory order: the strides were changed but the values were not moved, so each index "
    "(n, c, h, w) reads another value. channels_last needs the values copied into the new "
    "order: `x.contiguous(memory_format=torch.channels_last)`.",
    "es": "Tu resultado tiene pasos (strides) de channels_last, pero su memoria guarda los valores "
    "de `x` en el orden de memoria del propio `x`: se cambiaron los pasos pero los valores "
    "no se movieron, así que cada índice (n, c, h, w) lee otro valor. channels_last "
    "necesita copiar los valores en el orden nuevo: "
    "`x.contiguous(memory_format=torch.channels_last)`.",
}
# the same values in a result whose layout is not channels-last
NOT_MOVED_OTHER_LAYOUT_HINT = {
    "en": "Your values are `x`'s memory in its own order, read as if it were channels-last: the "
    "values were not moved to their channels-last places, so each index (n, c, h, w) "
    "reads another value. Use `x.contiguous(memory_format=torch.channels_last)`, which "
    "copies them into the new order.",
    "es": "Tus valores son la memoria de `x` en su propio orden, leída como si fuera "
    "channels_last: los valores no se movieron a su lugar en channels_last, así que cada "
    "índice (n, c, h, w) lee otro valor. Usa "
    "`x.contiguous(memory_format=torch.channels_last)`, que los copia en el orden nuevo.",
}
# both of the above fit (contiguous inputs only: there the two give the same tensor)
REGROUPED_HINT = {
    "en": "Your result reads `x`'s values in their memory order as if they were (N, H, W, C): "
    "the values were not moved to their channels-last places (as with strides set over "
    "`x`'s memory, or a `reshape`/`view` to (N, H, W, C)), so each index (n, c, h, w) "
    "reads another value. Use `x.contiguous(memory_format=torch.channels_last)`.",
    "es": "Tu resultado lee los valores de `x` en su orden de memoria como si fueran "
    "(N, H, W, C): los valores no se movieron a su lugar en channels_last (como ocurre al "
    "fijar pasos sobre la memoria de `x`, o con un `reshape`/`view` a (N, H, W, C)), así "
    "que cada índice (n, c, h, w) lee otro valor. Usa "
    "`x.contiguous(memory_format=torch.channels_last)`.",
}
# x's values, every one, but at other indices
PERMUTED_HINT = {
    "en": "Your result holds the values of `x`, but at other indices: channels_last keeps each "
    "value at its index, `result[n, c, h, w] == x[n, c, h, w]`, and changes only the order "
    "in memory.",
    "es": "Tu resultado contiene los valores de `x`, pero en otros índices: channels_last "
    "mantiene cada valor en su índice, `result[n, c, h, w] == x[n, c, h, w]`, y solo "
    "cambia el orden en memoria.",
}
KEEP_INDEX_HINT = {
    "en": "Your values are not those of `x`: channels_last keeps each value at its index, "
    "`result[n, c, h, w] == x[n, c, h, w]`, and changes only the order in memory.",
    "es": "Tus valores no son los de `x`: channels_last mantiene cada valor en su índice, "
    "`result[n, c, h, w] == x[n, c, h, w]`, y solo cambia el orden en memoria.",
}
INPUT_HINT = {
    "en": "Leave `x` as it is: return a new tensor (`x.contiguous(memory_format=…)`) "
    "instead of changing `x` (`x.data = …`, in-place operations).",
    "es": "Deja `x` como está: devuelve un tensor nuevo "
    "(`x.contiguous(memory_format=…)`) en lugar de cambiar `x` (`x.data = …`, "
    "operaciones *in-place*).",
}


def _shape(ctx: Context) -> tuple[int, int, int, int]:
    n = int(ctx.randint(1, 4, ()))
    c, h, w = (int(s) for s in ctx.randint(2, 7, (3,)))
    return n, c, h, w + (c == h == w)


def _send(ctx: Context, x: torch.Tensor, transposed: bool = False):
    """x in the student's process, and a grader-side copy laid out alike for the reference:
    NCHW-contiguous, or (transposed) a non-contiguous view of a tensor stored (N, C, W, H)."""
    if not transposed:
        return x.clone(), ctx.student.put(ctx.on_device(x))
    stored = x.transpose(2, 3).contiguous()
    sent = ctx.student.method(ctx.student.put(ctx.on_device(stored)), "transpose", 2, 3)
    return stored.clone().transpose(2, 3), sent


def _channels_last_strides(shape) -> tuple[int, int, int, int]:
    n, c, h, w = shape
    return c * h * w, 1, w * c, c


def _not_moved(x: torch.Tensor) -> torch.Tensor:
    """`x`'s memory as it is (x is laid out densely by the grader), read with channels-last
    strides: what setting the strides without moving the values gives."""
    return x.as_strided(x.shape, _channels_last_strides(x.shape), x.storage_offset()).cpu()


def _regrouped(x: torch.Tensor) -> torch.Tensor:
    """A reshape to (N, H, W, C), permuted back to NCHW: the values regrouped in index order."""
    n, c, h, w = x.shape
    return x.reshape(n, h, w, c).permute(0, 3, 1, 2).cpu()


def _values_hint(
    seen: list[tuple[torch.Tensor, torch.Tensor]],
    x: torch.Tensor,
    got: torch.Tensor,
    got_channels_last: bool,
) -> dict:
    """The hint for wrong values, from what the grader sees: `seen` holds (student's values,
    grader's copy of x) for every input of the check whose result had the right shape; a hint
    naming a mistake is shown only when the values are that mistake's on every one of them."""

    def fits(candidate) -> bool:
        return all(v.dtype == t.dtype and torch.equal(v, candidate(t)) for v, t in seen)

    not_moved, regrouped = fits(_not_moved), fits(_regrouped)
    if not_moved and regrouped:
        return REGROUPED_HINT
    if regrouped:
        return MOVED_HINT
    if not_moved:  # its first sentence is on the layout the grader rebuilt
        return NOT_MOVED_HINT if got_channels_last else NOT_MOVED_OTHER_LAYOUT_HINT
    x = x.cpu()
    if got.dtype == x.dtype and torch.equal(got.flatten().sort().values, x.flatten().sort().values):
        return PERMUTED_HINT
    return KEEP_INDEX_HINT


def _shape_hint(x: torch.Tensor, got) -> dict | None:
    n, c, h, w = x.shape
    if tuple(got.shape) != (n, c, w, h):
        return None
    same = got.dtype == x.dtype and torch.equal(got.value, x.transpose(2, 3).cpu())
    values = {
        "en": ": each value of `x[n, c, h, w]` is at `[n, c, w, h]`" if same else "",
        "es": ": cada valor de `x[n, c, h, w]` está en `[n, c, w, h]`" if same else "",
    }
    return {
        "en": f"Your result has H and W swapped, shape {list(got.shape)}{values['en']}. "
        "channels_last keeps the shape (N, C, H, W); after `permute(0, 2, 3, 1)` "
        "(to NHWC) the way back to NCHW is `permute(0, 3, 1, 2)`.",
        "es": f"Tu resultado tiene H y W intercambiadas, forma {list(got.shape)}"
        f"{values['es']}. channels_last mantiene la forma (N, C, H, W); tras "
        "`permute(0, 2, 3, 1)` (a NHWC) la vuelta a NCHW es `permute(0, 3, 1, 2)`.",
    }


def _converted(ctx: Context, x: torch.Tensor, transposed: bool = False):
    """The student's result, the reference's, and the grader's copy of x (laid out as sent)."""
    ref_in, sent = _send(ctx, x, transposed)
    expected = ctx.reference.to_channels_last(
        ref_in.clone() if not transposed else ref_in.transpose(2, 3).clone().transpose(2, 3)
    )
    got = expect_tensor(call(ctx, "to_channels_last", sent), WHAT)
    if got.shape != tuple(expected.shape):
        details = {"what": WHAT, "got": list(got.shape), "expected": list(expected.shape)}
        hint = _shape_hint(ref_in, got)
        raise Fail(Diagnostic("shape-mismatch", dict(details, hint=hint) if hint else details))
    return got, expected, ref_in


def _all_values(ctx: Context, cases: list, layout: bool = False, dtype: bool = False) -> None:
    """Each case: (x, transposed). A layout, dtype or shape failure is raised at once; wrong
    values are raised after the remaining cases were also run (their values are evidence for
    which mistake it is: on contiguous inputs alone, two mistakes can give the same values)."""
    seen, first = [], None
    for x, transposed in cases:
        try:
            got, expected, ref_in = _converted(ctx, x, transposed)
        except Fail:
            if first is None:
                raise
            continue  # only evidence now: the first failure is the one reported
        if first is None:
            if layout:
                # both flags: a non-contiguous result is neither channels-last nor the default
                want = (
                    expected.is_contiguous(memory_format=torch.channels_last),
                    expected.is_contiguous(),
                )
                if (got.channels_last, got.contiguous) != want:
                    raise Fail(
                        Diagnostic(
                            "memory-format-wrong",
                            {"what": WHAT, "got": got.strides, "expected": list(expected.stride())},
                        )
                    )
            if dtype and got.dtype != expected.dtype:
                details = {"what": WHAT, "got": str(got.dtype), "expected": str(expected.dtype)}
                if torch.equal(got.value, expected.cpu().to(got.dtype)):
                    name = str(got.dtype).removeprefix("torch.")
                    details["hint"] = {
                        "en": f"Your result holds `x`'s values converted to {name}: the "
                        "memory format changes only the order in memory, the dtype stays "
                        "`x.dtype` (`x.contiguous(memory_format=torch.channels_last)` "
                        "keeps it); leave out the conversion.",
                        "es": f"Tu resultado contiene los valores de `x` convertidos a {name}: el "
                        "formato de memoria solo cambia el orden en memoria, el dtype "
                        "sigue siendo `x.dtype` (`x.contiguous(memory_format="
                        "torch.channels_last)` lo conserva); quita la conversión.",
                    }
                raise Fail(Diagnostic("dtype-mismatch", details))
            if dtype:
                expect_tensor(got, WHAT, dtype=expected.dtype)
            expect_tensor(got, WHAT, device=ctx.device)
        seen.append((got.value, ref_in))
        if first is None:
            try:
                expect_close(got, expected, WHAT)
            except Fail as fail:
                first = (fail, ref_in, got.value, got.channels_last)
    if first is not None:
        fail, ref_in, value, layout_cl = first
        diagnostic = fail.diagnostics[0]
        hint = _values_hint(seen, ref_in, value, layout_cl)
        raise Fail(Diagnostic(diagnostic.code, dict(diagnostic.details, hint=hint)))


@check(
    "same-values",
    points=3,
    uses="to_channels_last",
    en="same shape and values, contiguous or not",
    es="misma forma y mismos valores, sea o no contigua la entrada",
)
def same_values(ctx: Context) -> None:
    _all_values(
        ctx,
        [
            (ctx.randn(*shape, dtype=torch.float32), transposed)
            for shape, transposed in (
                (FIXED_SHAPE, False),
                (_shape(ctx), False),
                (FIXED_SHAPE, True),
                (_shape(ctx), True),
            )
        ],
    )


@check(
    "channels-last",
    points=3,
    uses="to_channels_last",
    en="stored in channels_last format",
    es="guardado en formato channels_last",
)
def channels_last(ctx: Context) -> None:
    """The layout is the grader's reading of the memory the student's process sent (its storage
    span, rebuilt here with the strides it came with), and that memory must also hold the right
    values: a layout claimed over memory laid out otherwise gives wrong values, and no point."""
    _all_values(
        ctx,
        [
            (ctx.randn(*FIXED_SHAPE, dtype=torch.float32), False),
            (ctx.randn(*_shape(ctx), dtype=torch.float32), True),
        ],
        layout=True,
    )


@check(
    "keeps-dtype",
    points=2,
    uses="to_channels_last",
    en="float64 and uint8 batches keep their dtype",
    es="los lotes float64 y uint8 conservan su dtype",
)
def keeps_dtype(ctx: Context) -> None:
    # each dtype contiguous and not (fixed shapes), then a random uint8 batch
    images = ctx.randint(0, 256, _shape(ctx)).to(torch.uint8)
    _all_values(
        ctx,
        [
            (ctx.randn(*FIXED_SHAPE), False),
            (ctx.randn(*FIXED_SHAPE), True),
            (ctx.randint(0, 256, FIXED_SHAPE).to(torch.uint8), False),
            (ctx.randint(0, 256, FIXED_SHAPE).to(torch.uint8), True),
            (images, False),
        ],
        dtype=True,
    )


@check(
    "input-unchanged",
    points=2,
    uses="to_channels_last",
    en="x is left as it was",
    es="x queda como estaba",
)
def input_unchanged(ctx: Context) -> None:
    ref_in, sent = _send(ctx, ctx.randn(*FIXED_SHAPE, dtype=torch.float32))
    ctx.reference.to_channels_last(ref_in)
    call(ctx, "to_channels_last", sent)
    after = expect_tensor(ctx.student.attr(sent, "data"), "`x`")
    # strides read from the memory sent, whose values must be x's (checked next)
    if after.strides != list(ref_in.stride()):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": {
                        "en": "`x.stride()` after calling `to_channels_last(x)`",
                        "es": "`x.stride()` tras llamar a `to_channels_last(x)`",
                    },
                    "got": tuple(after.strides),
                    "expected": tuple(ref_in.stride()),
                    "worst_index": [],
                    "hint": INPUT_HINT,
                },
            )
        )
    expect_close(
        after,
        ref_in,
        {
            "en": "`x` after calling `to_channels_last(x)`",
            "es": "`x` tras llamar a `to_channels_last(x)`",
        },
        hint=INPUT_HINT,
    )
