"""Checks you can run yourself: `hpcgrade check autograd-no-track FILE` (the grader's own use
other values)."""

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
from worker.harness.remote import StudentError


def _flag(value, expected: bool, what: str) -> None:
    if value is not expected:
        raise Fail(
            Diagnostic("requires-grad-wrong", {"what": what, "got": value, "expected": expected})
        )


@check(
    "frozen-copy-example",
    points=1,
    uses="frozen_copy",
    en="frozen_copy(x) of the statement: same values and memory, no gradient",
    es="frozen_copy(x) del enunciado: mismos valores y memoria, sin gradiente",
)
def frozen_copy_example(ctx: Context) -> None:
    x = ctx.student.put(torch.tensor([1.0, 2.0], requires_grad=True))
    copy = expect_tensor(call(ctx, "frozen_copy", x), "`frozen_copy(x)`", shape=(2,))
    expect_close(copy, torch.tensor([1.0, 2.0]), "`frozen_copy(x)`")
    # memory shared: values written into x show in the copy
    ctx.student.method(
        expect_tensor(ctx.student.attr(x, "data"), "`x`"), "copy_", torch.tensor([5.0, 7.0])
    )
    seen = expect_tensor(ctx.student.attr(copy, "data"), "`frozen_copy(x)`", shape=(2,))
    if not torch.equal(seen.value, torch.tensor([5.0, 7.0])):
        raise Fail(Diagnostic("storage-not-shared", {"what": "`frozen_copy(x)`"}))
    # x still requires grad: a backward pass through it reaches it
    try:
        ctx.student.new("accumulate_grad", x, torch.tensor([1.0, 1.0]))
    except StudentError:
        _flag(False, True, "`frozen_copy(x); x`")


@check(
    "sgd-example",
    points=1,
    uses="sgd_update_",
    en="sgd_update_(w, 0.1) of the statement: w = [0.8, 1.6], still a leaf, gradient cleared",
    es="sgd_update_(w, 0.1) del enunciado: w = [0.8, 1.6], sigue siendo hoja, gradiente borrado",
)
def sgd_example(ctx: Context) -> None:
    w = ctx.student.put(torch.tensor([1.0, 2.0], requires_grad=True))
    ctx.student.new("accumulate_grad", w, torch.tensor([2.0, 4.0]))  # w.grad = [2, 4]
    call(ctx, "sgd_update_", w, 0.1)
    what = "`sgd_update_(w, 0.1); w`"
    expect_close(ctx.student.attr(w, "data"), torch.tensor([0.8, 1.6]), what)
    grad = ctx.student.attr(w, "grad")
    if grad is not None:
        expect_close(grad, torch.zeros(2), "`sgd_update_(w, 0.1); w.grad`")
    # still a leaf that requires grad: the next backward pass fills w.grad
    ctx.student.new("accumulate_grad", w, torch.tensor([1.0, 3.0]))
    grad = ctx.student.attr(w, "grad")
    if grad is None:
        raise Fail(Diagnostic("leaf-replaced", {"what": "`w`", "got": "`w - lr * w.grad`"}))
    expect_close(grad, torch.tensor([1.0, 3.0]), "`w.grad` after the next backward pass")


@check(
    "predict-example",
    points=1,
    uses="predict",
    en="predict on small_model(7): eval-mode values, no graph",
    es="predict con small_model(7): valores en modo evaluación, sin grafo",
)
def predict_example(ctx: Context) -> None:
    model = ctx.student.new("small_model", 7)
    x = ctx.student.put(torch.tensor([[1.0, -0.5, 2.0, 0.0], [-1.5, 0.5, 0.25, 1.0]]))
    output = expect_tensor(call(ctx, "predict", model, x), "`predict(model, x)`", shape=(2, 3))
    expect_close(
        output,
        torch.tensor([[1.21104, 0.340304, 0.0510443], [0.716629, -0.881467, -0.20538]]),
        "`predict(model, x)`",
        rtol=1e-4,
        atol=1e-4,
    )
    try:  # no graph: a backward pass from the output has nothing to go through
        ctx.student.new("accumulate_grad", output, torch.ones(2, 3))
    except StudentError:
        return
    raise Fail(
        Diagnostic("tracked-in-inference", {"what": "`predict(model, x)`", "got": "a graph"})
    )
