"""Hidden checks for tensors-channels-last: the same NCHW batch, stored channels-last.

Every point rests on what the grader reads itself: values returned from fresh hidden inputs, and
layouts (strides, channels-last or contiguous) that the grader derives from the memory the
student's process sends, a tensor's storage span rebuilt here with `as_strided`, whose values
must be right too. A flag or a stride the student's process merely reports earns nothing.
"""
import torch

from worker.harness.checks import (Context, Diagnostic, Fail, call, check, expect_close,
                                   expect_tensor)

WHAT = "`to_channels_last(x)`"
# C, H and W all differ: an NHWC permutation cannot keep this shape, a reshape to (N, H, W, C)
# cannot keep the values, and no dimension of size 1 makes two memory formats look alike
FIXED_SHAPE = (2, 3, 4, 5)

MOVED_HINT = {"en": "channels_last keeps each value at its index (n, c, h, w) and only changes "
                    "the order in memory; `reshape`/`view` to (N, H, W, C) regroups the values "
                    "instead. Use `x.contiguous(memory_format=torch.channels_last)`.",
              "es": "channels_last mantiene cada valor en su índice (n, c, h, w) y solo cambia "
                    "el orden en memoria; `reshape`/`view` a (N, H, W, C) reagrupa los valores. "
                    "Usa `x.contiguous(memory_format=torch.channels_last)`."}
INPUT_HINT = {"en": "Leave `x` as it is: return a new tensor (`x.contiguous(memory_format=…)`) "
                    "instead of changing `x` (`x.data = …`, in-place operations).",
              "es": "Deja `x` como está: devuelve un tensor nuevo "
                    "(`x.contiguous(memory_format=…)`) en lugar de cambiar `x` (`x.data = …`, "
                    "operaciones *in-place*)."}


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


def _converted(ctx: Context, x: torch.Tensor, transposed: bool = False):
    ref_in, sent = _send(ctx, x, transposed)
    expected = ctx.reference.to_channels_last(ref_in)
    got = expect_tensor(call(ctx, "to_channels_last", sent), WHAT, shape=expected.shape)
    return got, expected


@check("same-values", points=3, uses="to_channels_last",
       en="same shape and values, contiguous or not",
       es="misma forma y mismos valores, sea o no contigua la entrada")
def same_values(ctx: Context) -> None:
    for shape, transposed in ((FIXED_SHAPE, False), (_shape(ctx), False), (_shape(ctx), True)):
        got, expected = _converted(ctx, ctx.randn(*shape, dtype=torch.float32), transposed)
        expect_close(expect_tensor(got, WHAT, device=ctx.device), expected, WHAT, hint=MOVED_HINT)


@check("channels-last", points=3, uses="to_channels_last", en="stored in channels_last format",
       es="guardado en formato channels_last")
def channels_last(ctx: Context) -> None:
    """The layout is the grader's reading of the memory the student's process sent (its storage
    span, rebuilt here with the strides it came with), and that memory must also hold the right
    values: a layout claimed over memory laid out otherwise gives wrong values, and no point."""
    for shape, transposed in ((FIXED_SHAPE, False), (_shape(ctx), True)):
        got, expected = _converted(ctx, ctx.randn(*shape, dtype=torch.float32), transposed)
        # both flags: a non-contiguous result is neither channels-last nor the default layout
        layout = (expected.is_contiguous(memory_format=torch.channels_last),
                  expected.is_contiguous())
        if (got.channels_last, got.contiguous) != layout:
            raise Fail(Diagnostic("memory-format-wrong", {
                "what": WHAT, "got": got.strides, "expected": list(expected.stride())}))
        expect_close(got, expected, WHAT, hint=MOVED_HINT)


@check("keeps-dtype", points=2, uses="to_channels_last",
       en="float64 and uint8 batches keep their dtype",
       es="los lotes float64 y uint8 conservan su dtype")
def keeps_dtype(ctx: Context) -> None:
    images = ctx.randint(0, 256, _shape(ctx)).to(torch.uint8)
    for x in (ctx.randn(*FIXED_SHAPE), images):
        got, expected = _converted(ctx, x)
        expect_close(expect_tensor(got, WHAT, dtype=expected.dtype), expected, WHAT)


@check("input-unchanged", points=2, uses="to_channels_last", en="x is left as it was",
       es="x queda como estaba")
def input_unchanged(ctx: Context) -> None:
    ref_in, sent = _send(ctx, ctx.randn(*FIXED_SHAPE, dtype=torch.float32))
    ctx.reference.to_channels_last(ref_in)
    call(ctx, "to_channels_last", sent)
    after = expect_tensor(ctx.student.attr(sent, "data"), "`x`")
    # strides read from the memory sent, whose values must be x's (checked next)
    if after.strides != list(ref_in.stride()):
        raise Fail(Diagnostic("output-mismatch", {
            "what": {"en": "`x.stride()` after calling `to_channels_last(x)`",
                     "es": "`x.stride()` tras llamar a `to_channels_last(x)`"},
            "got": tuple(after.strides), "expected": tuple(ref_in.stride()),
            "worst_index": [], "hint": INPUT_HINT}))
    expect_close(after, ref_in, {"en": "`x` after calling `to_channels_last(x)`",
                                 "es": "`x` tras llamar a `to_channels_last(x)`"}, hint=INPUT_HINT)
