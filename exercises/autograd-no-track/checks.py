"""Hidden checks for autograd-no-track: detach, in-place updates under no_grad, inference.

Every check runs a fixed case first (values on which each known wrong program differs from the
reference), then a random one. Expected values, flags and memory sharing are the reference's.
Once `sgd_update_` has run, no support code runs in the student's process: `w` and `w.grad` are
read back, and the next `backward()` is added to `w.grad` in the grader.
"""
from dataclasses import dataclass

import torch

from worker.harness.checks import (Context, Diagnostic, Fail, RemoteTensor, call, check,
                                   diagnose_exception, expect_close, expect_tensor)
from worker.harness.diagnostics import close, compare_grad, value_error_details
from worker.harness.remote import StudentError

FIXED_X = [[1.0, -2.0, 0.5], [3.0, 0.25, -1.5]]
FIXED_SGD = ([1.0, -2.0, 0.5, 3.0], [0.5, 1.0, -2.0, 0.25], 0.1)  # w, w.grad, lr
FIXED_MODEL_SEED = 1234
FIXED_BATCH = [[1.0, -0.5, 2.0, 0.0], [-1.5, 0.5, 0.25, 1.0], [0.0, 2.0, -1.0, -2.0],
               [0.75, -1.25, 1.5, 0.5]]
UPDATED = "`sgd_update_(w, lr); w`"
PREDICTED = "`predict(model, x)`"

REBOUND = {
    "en": "Inside `sgd_update_`, `w = w - lr * w.grad` only rebinds the local name `w` to a new "
          "tensor: the caller's `w` keeps its values and its `.grad`. Update it in place under "
          "`torch.no_grad()`: `w -= lr * w.grad`, then clear `w.grad`.",
    "es": "Dentro de `sgd_update_`, `w = w - lr * w.grad` solo reasigna el nombre local `w` a un "
          "tensor nuevo: el `w` de quien llama conserva sus valores y su `.grad`. Actualízalo «in "
          "situ» dentro de `torch.no_grad()`: `w -= lr * w.grad`, y después borra `w.grad`."}
CLEARED_FIRST = {
    "en": "`w` did not change: its gradient was cleared (`w.grad.zero_()` or `w.grad = None`) "
          "before `w -= lr * w.grad` used it. Update first, then clear the gradient.",
    "es": "`w` no cambió: su gradiente se borró (`w.grad.zero_()` o `w.grad = None`) antes de "
          "que `w -= lr * w.grad` lo usara. Actualiza primero y borra el gradiente después."}
NOT_CLEARED = {
    "en": "`w.grad` still held the gradient the update used, and the next `backward()` added to "
          "it: clear it at the end of `sgd_update_` (`w.grad = None` or `w.grad.zero_()`).",
    "es": "`w.grad` aún tenía el gradiente usado en la actualización, y el siguiente `backward()` "
          "se le sumó: bórralo al final de `sgd_update_` (`w.grad = None` o `w.grad.zero_()`)."}
NEW_MEMORY = {
    "en": "`w.data = …` gives `w` new memory; update in place: "
          "`with torch.no_grad(): w -= lr * w.grad`.",
    "es": "`w.data = …` da a `w` memoria nueva; actualízalo «in situ»: "
          "`with torch.no_grad(): w -= lr * w.grad`."}
STILL_TRAINING = {
    "en": "`model.training` is still True after `predict`: dropout and batch norm behave as in "
          "training. Call `model.eval()` before the forward pass.",
    "es": "`model.training` sigue siendo True tras `predict`: dropout y batch norm se comportan "
          "como en el entrenamiento. Llama a `model.eval()` antes del paso hacia delante."}


def _expect_flag(value, expected: bool, what: str) -> None:
    if value is not expected:
        raise Fail(Diagnostic("requires-grad-wrong", {"what": what, "got": value,
                                                      "expected": expected}))


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _inputs(ctx: Context) -> list[torch.Tensor]:
    shape = tuple(int(n) for n in ctx.randint(2, 6, (2,)))
    return [torch.tensor(FIXED_X), ctx.randn(*shape, dtype=torch.float32)]


@check("frozen-shares-memory", points=2, uses="frozen_copy",
       en="frozen_copy shares memory with x and leaves x as it was",
       es="frozen_copy comparte memoria con x y deja x como estaba")
def frozen_shares_memory(ctx: Context) -> None:
    for values in _inputs(ctx):
        x_ref = values.clone().requires_grad_()
        expected = ctx.reference.frozen_copy(x_ref)
        x = ctx.student.put(ctx.on_device(values.clone()).requires_grad_())
        copy = expect_tensor(call(ctx, "frozen_copy", x), "`frozen_copy(x)`",
                             shape=values.shape, dtype=values.dtype)
        if (copy.storage == x.storage) != _shares(expected, x_ref):
            raise Fail(Diagnostic("storage-shared" if copy.storage == x.storage
                                  else "storage-not-shared", {"what": "`frozen_copy(x)`"}))
        expect_close(copy, expected.detach(), "`frozen_copy(x)`")
        _expect_flag(ctx.student.attr(x, "requires_grad"), x_ref.requires_grad,
                     "`frozen_copy(x); x`")


@check("frozen-no-grad", points=1, uses="frozen_copy",
       en="frozen_copy of a computed tensor does not require grad",
       es="frozen_copy de un tensor calculado no requiere gradiente")
def frozen_no_grad(ctx: Context) -> None:
    for values in _inputs(ctx):
        expected = ctx.reference.frozen_copy(values.clone().requires_grad_().mul(2.0))
        x = ctx.student.method(ctx.student.put(ctx.on_device(values).requires_grad_()), "mul", 2.0)
        copy = expect_tensor(call(ctx, "frozen_copy", x), "`frozen_copy(x)`", shape=x.shape)
        _expect_flag(copy.requires_grad, expected.requires_grad, "`frozen_copy(x)`")


@dataclass
class Step:
    """One sgd_update_(w, lr) on a leaf whose .grad came from a backward pass: the student's w
    and the reference's (w_ref), from the same start, gradient and learning rate."""
    w: RemoteTensor
    w_ref: torch.Tensor
    start: torch.Tensor
    grad: torch.Tensor
    returned: object
    ref_kept_memory: bool  # w_ref's storage after the reference's update is the one it had


def _steps(ctx: Context):
    size = int(ctx.randint(3, 9, ()))
    yield tuple(torch.tensor(v) for v in FIXED_SGD[:2]) + (FIXED_SGD[2],)
    yield (ctx.randn(size, dtype=torch.float32), ctx.randn(size, dtype=torch.float32),
           int(ctx.randint(1, 50, ())) / 100)


def _sgd_step(ctx: Context, start: torch.Tensor, grad: torch.Tensor, lr: float) -> Step:
    w_ref = start.clone().requires_grad_()
    ctx.support.accumulate_grad(w_ref, grad)
    memory = w_ref.untyped_storage().data_ptr()
    ctx.reference.sgd_update_(w_ref, lr)
    w = ctx.student.put(ctx.on_device(start.clone()).requires_grad_())
    ctx.student.new("accumulate_grad", w, ctx.on_device(grad))
    try:
        returned = ctx.student.call("sgd_update_", w, lr)
    except StudentError as exc:
        diagnostic = diagnose_exception(exc.info, "`sgd_update_`")
        if ctx.student.attr(w, "grad") is None and \
                torch.equal(ctx.student.attr(w, "data").value, start):
            diagnostic = Diagnostic(diagnostic.code, dict(diagnostic.details, hint=CLEARED_FIRST))
        raise Fail(diagnostic) from None
    return Step(w, w_ref, start, grad, returned, w_ref.untyped_storage().data_ptr() == memory)


def _cleared(grad: object) -> bool:
    value = grad.value if isinstance(grad, RemoteTensor) else grad
    return value is None or isinstance(value, torch.Tensor) and not bool(value.any())


@check("sgd-in-place", points=2, uses="sgd_update_", en="sgd_update_ changes w in place",
       es="sgd_update_ modifica w «in situ»")
def sgd_in_place(ctx: Context) -> None:
    for case in _steps(ctx):
        step = _sgd_step(ctx, *case)
        updated = ctx.student.attr(step.w, "data")
        if (updated.storage == step.w.storage) != step.ref_kept_memory:
            raise Fail(Diagnostic("storage-not-shared", {"what": UPDATED, "hint": NEW_MEMORY})
                       if step.ref_kept_memory else Diagnostic("storage-shared", {"what": UPDATED}))
        expected = step.w_ref.detach()
        # a w left as it was is wrong in two ways, told apart by what happened to its gradient
        unchanged = torch.equal(updated.value, step.start)
        cleared = _cleared(ctx.student.attr(step.w, "grad"))
        if close(updated.value, expected, 1e-5, 1e-6) and (
                not unchanged or cleared == _cleared(step.w_ref.grad)):
            continue
        if unchanged and cleared:
            raise Fail(Diagnostic("output-mismatch", {
                "what": UPDATED, "hint": CLEARED_FIRST,
                **value_error_details(updated.value, expected)}))
        if unchanged:
            got = "`w - lr * w.grad`"
            if isinstance(step.returned, RemoteTensor):
                got = f"`tensor(..., grad_fn=<{step.returned.grad_fn}>)`" \
                    if step.returned.grad_fn else "`tensor(...)`"
            raise Fail(Diagnostic("leaf-replaced", {"what": "`w`", "got": got, "hint": REBOUND}))
        expect_close(updated, expected, UPDATED)


@check("sgd-keeps-leaf", points=1, uses="sgd_update_",
       en="w stays a leaf that requires grad", es="w sigue siendo una hoja que requiere gradiente")
def sgd_keeps_leaf(ctx: Context) -> None:
    for case in _steps(ctx):
        step = _sgd_step(ctx, *case)
        _expect_flag(ctx.student.attr(step.w, "requires_grad"), step.w_ref.requires_grad, UPDATED)
        if ctx.student.attr(step.w, "is_leaf") is not step.w_ref.is_leaf:
            raise Fail(Diagnostic("leaf-replaced", {"what": "`w`", "got": "`w - lr * w.grad`"}))


@check("sgd-clears-grad", points=1, uses="sgd_update_", en="sgd_update_ clears w.grad",
       es="sgd_update_ borra w.grad")
def sgd_clears_grad(ctx: Context) -> None:
    """`w.grad` read back right after the update: cleared (None or zeros) when the reference's
    is. Otherwise what the next `backward()` would leave, the grader adds its gradient itself."""
    what = {"en": "`w.grad` after `sgd_update_(w, lr)` and the next `backward()`",
            "es": "`w.grad` tras `sgd_update_(w, lr)` y el siguiente `backward()`"}
    for case in _steps(ctx):
        step = _sgd_step(ctx, *case)
        got = ctx.student.attr(step.w, "grad")
        got = None if got is None else expect_tensor(got, what, shape=step.grad.shape).value
        left, left_ref = (None if _cleared(g) else g.double() for g in (got, step.w_ref.grad))
        if left is None and left_ref is None:
            continue
        diagnostic = compare_grad(step.grad if left is None else left + step.grad,
                                  step.grad if left_ref is None else left_ref + step.grad, what)
        if diagnostic:
            raise Fail(Diagnostic(diagnostic.code, dict(diagnostic.details, hint=NOT_CLEARED))
                       if diagnostic.code == "grad-accumulated" else diagnostic)


def _predictions(ctx: Context):
    """(grader's model after the reference's predict, its output, student's model, output, x)."""
    cases = [(FIXED_MODEL_SEED, torch.tensor(FIXED_BATCH)),
             (int(ctx.randint(0, 1 << 30, ())),
              ctx.randn(int(ctx.randint(4, 9, ())), 4, dtype=torch.float32))]
    for seed, x in cases:
        model_ref = ctx.support.small_model(seed)
        expected = ctx.reference.predict(model_ref, x.clone())
        model = ctx.student.new("small_model", seed, ctx.device.type)
        output = call(ctx, "predict", model, ctx.student.put(ctx.on_device(x)))
        yield model_ref, expected, model, expect_tensor(output, PREDICTED, shape=(x.shape[0], 3),
                                                        dtype=torch.float32)


@check("predict-eval-values", points=2, uses="predict", en="predict gives the eval-mode output",
       es="predict da la salida en modo evaluación")
def predict_eval_values(ctx: Context) -> None:
    for model_ref, expected, model, output in _predictions(ctx):
        training = ctx.student.describe(model).get("training") is True
        if training != model_ref.training:
            details = {"what": PREDICTED, **value_error_details(output.value, expected)}
            raise Fail(Diagnostic("output-mismatch", dict(
                details, what=PREDICTED + " [`model.training == True`]", hint=STILL_TRAINING)
                if training else details))
        if not training:  # in training mode dropout draws other values each time
            expect_close(output, expected, PREDICTED)


@check("predict-no-graph", points=1, uses="predict", en="predict builds no graph",
       es="predict no construye grafo")
def predict_no_graph(ctx: Context) -> None:
    # `model(x).detach()` passes too: a graph built and dropped inside `predict` leaves nothing
    # the grader can read back
    for _, expected, _, output in _predictions(ctx):
        tracked = bool(output.requires_grad or output.grad_fn is not None)
        if tracked != expected.requires_grad:
            raise Fail(Diagnostic("tracked-in-inference" if tracked else "requires-grad-wrong", {
                "what": PREDICTED, "got": output.grad_fn if tracked else False,
                "expected": expected.requires_grad}))
