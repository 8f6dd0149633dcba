"""Hidden checks for autograd-no-track: detach, in-place updates under no_grad, inference.

Every check runs a fixed case first (values on which each known wrong program differs from the
reference), then a random one. Expected values, flags and memory sharing are the reference's.

No point rests on what the student's process says about a tensor (its flags, its storage
address, its grad_fn, a model's `training`): the submission can rewrite those answers. Each
property is tested by behaviour, with values the grader chose and reads back:
- memory shared: fresh values written into one tensor show in the other;
- requires grad, still a leaf: a backward pass the grader asks for brings the gradient, with
  its values, into `.grad`;
- no graph: a backward pass through the tensor does not reach the leaf it was computed from
  (or fails, having nothing to go through);
- eval mode: the model's output equals the eval-mode output computed here.
"""

from dataclasses import dataclass

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteTensor,
    call,
    check,
    diagnose_exception,
    expect_close,
    expect_grad,
    expect_tensor,
)
from worker.harness.diagnostics import close, compare_grad, compare_values, value_error_details
from worker.harness.remote import StudentError

FIXED_X = [[1.0, -2.0, 0.5], [3.0, 0.25, -1.5]]
FIXED_SGD = ([1.0, -2.0, 0.5, 3.0], [0.5, 1.0, -2.0, 0.25], 0.1)  # w, w.grad, lr
FIXED_MODEL_SEED = 1234
FIXED_BATCH = [
    [1.0, -0.5, 2.0, 0.0],
    [-1.5, 0.5, 0.25, 1.0],
    [0.0, 2.0, -1.0, -2.0],
    [0.75, -1.25, 1.5, 0.5],
]
UPDATED = "`sgd_update_(w, lr); w`"
PREDICTED = "`predict(model, x)`"

REBOUND = {
    "en": "Inside `sgd_update_`, `w = w - lr * w.grad` only rebinds the local name `w` to a new "
    "tensor: the caller's `w` keeps its values and its `.grad`. Update it in place under "
    "`torch.no_grad()`: `w -= lr * w.grad`, then clear `w.grad`.",
    "es": "Dentro de `sgd_update_`, `w = w - lr * w.grad` solo reasigna el nombre local `w` a un "
    "tensor nuevo: el `w` de quien llama conserva sus valores y su `.grad`. Actualízalo «in "
    "situ» dentro de `torch.no_grad()`: `w -= lr * w.grad`, y después borra `w.grad`.",
}
CLEARED_FIRST = {
    "en": "`w` did not change: its gradient was cleared (`w.grad.zero_()` or `w.grad = None`) "
    "before `w -= lr * w.grad` used it. Update first, then clear the gradient.",
    "es": "`w` no cambió: su gradiente se borró (`w.grad.zero_()` o `w.grad = None`) antes de "
    "que `w -= lr * w.grad` lo usara. Actualiza primero y borra el gradiente después.",
}
NOT_CLEARED = {
    "en": "`w.grad` still held the gradient the update used, and the next `backward()` added to "
    "it: clear it at the end of `sgd_update_` (`w.grad = None` or `w.grad.zero_()`).",
    "es": "`w.grad` aún tenía el gradiente usado en la actualización, y el siguiente `backward()` "
    "se le sumó: bórralo al final de `sgd_update_` (`w.grad = None` o `w.grad.zero_()`).",
}
NEW_MEMORY = {
    "en": "`w.data = …` gives `w` new memory; update in place: "
    "`with torch.no_grad(): w -= lr * w.grad`.",
    "es": "`w.data = …` da a `w` memoria nueva; actualízalo «in situ»: "
    "`with torch.no_grad(): w -= lr * w.grad`.",
}
ASCENT = {
    "en": "`w` moved by `+lr * w.grad`, up the gradient, as `w += lr * w.grad` "
    "does. A descent step subtracts it: `w -= lr * w.grad`.",
    "es": "`w` se movió `+lr * w.grad`, cuesta arriba por el gradiente, como hace "
    "`w += lr * w.grad`. Un paso de descenso lo resta: `w -= lr * w.grad`.",
}
NO_LR = {
    "en": "`w` moved by the whole `w.grad`, without `lr`: the step is `w -= lr * w.grad`.",
    "es": "`w` se movió todo `w.grad`, sin `lr`: el paso es `w -= lr * w.grad`.",
}
CLASSES = {
    "en": "Your `predict` returns the predicted class of each row (`argmax` of the output): return "
    "the model's output itself, one row of 3 scores per input row.",
    "es": "Tu `predict` devuelve la clase predicha de cada fila (el `argmax` de la salida): devuelve "
    "la propia salida del modelo, una fila de 3 valores por cada fila de entrada.",
}
STILL_TRAINING = {
    "en": "`model.training` is still True after `predict`: dropout and batch norm behave as in "
    "training. Call `model.eval()` before the forward pass.",
    "es": "`model.training` sigue siendo True tras `predict`: dropout y batch norm se comportan "
    "como en el entrenamiento. Llama a `model.eval()` antes del paso hacia delante.",
}


def _expect_flag(value, expected: bool, what: str) -> None:
    if value is not expected:
        raise Fail(
            Diagnostic("requires-grad-wrong", {"what": what, "got": value, "expected": expected})
        )


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _claim(tensor: object, key: str) -> object:
    """What the student's process says about a tensor (its grad_fn's name, say): words for a
    diagnostic, never a point."""
    if not isinstance(tensor, RemoteTensor):
        return None
    claims = getattr(tensor, "claims", None)
    if not isinstance(claims, dict) or key not in claims:
        claims = tensor.meta if isinstance(tensor.meta, dict) else {}
    value = claims.get(key)
    return value if isinstance(value, (str, bool, type(None))) else None


def _fresh(ctx: Context, like: torch.Tensor) -> torch.Tensor:
    """Values of `like`'s shape, each different from `like`'s own."""
    return (like.detach().double() + 1.0 + ctx.randn(*like.shape).abs()).to(like.dtype)


def _expect_tracked(
    ctx: Context, remote, reference: torch.Tensor, g: torch.Tensor, what: str, name: str
) -> bool:
    """Whether a backward pass with cotangent `g` reaches the student's tensor, as it reaches
    the reference's; requires-grad-wrong when it does not behave alike."""
    tracked_ref = _in_grader(ctx.support.accumulate_grad, reference, g)
    tracked = _in_student(ctx, "accumulate_grad", remote, ctx.on_device(g), what=what)
    if tracked != tracked_ref:
        raise Fail(
            Diagnostic(
                "requires-grad-wrong",
                {
                    "what": {
                        "en": f"{what} (a backward pass through `{name}` "
                        f"{'reached' if tracked else 'could not reach'} it)",
                        "es": f"{what} (un paso hacia atrás a través de `{name}` "
                        f"{'lo alcanzó' if tracked else 'no pudo alcanzarlo'})",
                    },
                    "got": tracked,
                    "expected": tracked_ref,
                },
            )
        )
    return tracked


def _in_student(ctx: Context, name: str, *args, what: str | dict) -> bool:
    """A support function run in the student's process: True if it ran, False if autograd
    refused it because nothing requires grad; any other exception is the submission's."""
    try:
        ctx.student.new(name, *args)
    except StudentError as exc:
        if "does not require grad" in str(exc.info.get("message", "")):
            return False
        raise Fail(diagnose_exception(exc.info, what)) from None
    return True


def _tracked(ctx: Context, remote: object, g: torch.Tensor, what: str | dict) -> bool:
    """Whether a backward pass with cotangent `g` goes through the student's output. Not the
    probe's word alone: a hook of the submission's can raise autograd's "does not require grad"
    itself, but not make its output stop requiring grad, as the harness reads it with its own
    C-level look-up (sealed); that can only say "tracked", where the reference's is not."""
    return _claim(remote, "requires_grad") is True or _in_student(
        ctx, "accumulate_grad", remote, ctx.on_device(g), what=what
    )


def _in_grader(function, *args) -> bool:
    """The same support function run here on the reference's tensors."""
    try:
        function(*args)
    except RuntimeError as exc:
        if "does not require grad" in str(exc):
            return False
        raise
    return True


def _grad_of(ctx: Context, tensor: RemoteTensor, what: str | dict) -> torch.Tensor | None:
    """`.grad` read back: its values, or None."""
    grad = ctx.student.attr(tensor, "grad")
    return None if grad is None else expect_tensor(grad, what).value


def _inputs(ctx: Context) -> list[torch.Tensor]:
    shape = tuple(int(n) for n in ctx.randint(2, 6, (2,)))
    return [torch.tensor(FIXED_X), ctx.randn(*shape, dtype=torch.float32)]


@check(
    "frozen-shares-memory",
    points=2,
    uses="frozen_copy",
    en="frozen_copy shares memory with x and leaves x as it was",
    es="frozen_copy comparte memoria con x y deja x como estaba",
)
def frozen_shares_memory(ctx: Context) -> None:
    """Values first; then memory: fresh values the grader writes into `x` must show in the copy
    (or not, as in the reference's); then `x` still requires grad: a backward pass through it
    brings a gradient the grader chose."""
    for values in _inputs(ctx):
        x_ref = values.clone().requires_grad_()
        expected = ctx.reference.frozen_copy(x_ref)
        x = ctx.student.put(ctx.on_device(values.clone()).requires_grad_())
        what = "`frozen_copy(x)`"
        copy = expect_tensor(
            call(ctx, "frozen_copy", x), what, shape=values.shape, dtype=values.dtype
        )
        expect_close(copy, expected.detach(), what)
        fresh, shares = _fresh(ctx, values), _shares(expected, x_ref)
        ctx.student.method(
            expect_tensor(ctx.student.attr(x, "data"), "`x`"), "copy_", ctx.on_device(fresh)
        )
        seen = expect_tensor(ctx.student.attr(copy, "data"), what, shape=values.shape).value
        if torch.equal(seen, fresh) != shares:
            raise Fail(
                Diagnostic(
                    "storage-not-shared" if shares else "storage-shared",
                    {
                        "what": {
                            "en": f"{what} (values written into `x` afterwards "
                            f"{'did not show' if shares else 'showed'} in it)",
                            "es": f"{what} (los valores escritos después en `x` "
                            f"{'no aparecieron' if shares else 'aparecieron'} en él)",
                        }
                    },
                )
            )
        g = ctx.randn(*values.shape, dtype=values.dtype)
        x_what = "`frozen_copy(x); x`"
        tracked = _expect_tracked(ctx, x, x_ref, g, x_what, "x")
        if tracked:
            expect_grad(
                ctx.student.attr(x, "grad"),
                x_ref.grad,
                {
                    "en": "`x.grad` after `frozen_copy(x)` and a backward pass",
                    "es": "`x.grad` tras `frozen_copy(x)` y un paso hacia atrás",
                },
            )


@check(
    "frozen-no-grad",
    points=1,
    uses="frozen_copy",
    en="frozen_copy of a computed tensor does not require grad",
    es="frozen_copy de un tensor calculado no requiere gradiente",
)
def frozen_no_grad(ctx: Context) -> None:
    """For x = 2·leaf: one backward pass from (x·h).sum() + (frozen_copy(x)·g).sum(), with h and
    g drawn here. The leaf's gradient is 2h when the copy is out of the graph (2h + 2g when it
    is not), and the copy itself gets no gradient: values the grader reads back."""
    what = "`frozen_copy(x)`"
    for values in _inputs(ctx):
        h, g = (ctx.randn(*values.shape, dtype=values.dtype) for _ in range(2))
        leaf_ref = values.clone().requires_grad_()
        x_ref = leaf_ref.mul(2.0)
        copy_ref = ctx.reference.frozen_copy(x_ref)
        ctx.support.backward_from([x_ref, copy_ref], [h, g])
        leaf = ctx.student.put(ctx.on_device(values).requires_grad_())
        x = expect_tensor(ctx.student.method(leaf, "mul", 2.0), "`x`", shape=values.shape)
        copy = expect_tensor(call(ctx, "frozen_copy", x), what, shape=x.shape)
        _in_student(
            ctx,
            "backward_from",
            [x, copy],
            [ctx.on_device(h), ctx.on_device(g)],
            what={
                "en": f"a backward pass through `x` and {what}",
                "es": f"un paso hacia atrás a través de `x` y de {what}",
            },
        )
        got = _grad_of(ctx, leaf, what)
        reached = got is None or leaf_ref.grad is None or not close(got, leaf_ref.grad, 1e-5, 1e-6)
        if got is None and leaf_ref.grad is None:
            reached = False
        got_own = _grad_of(ctx, copy, what) is not None
        own = copy_ref.is_leaf and copy_ref.grad is not None
        if reached or got_own != own:
            raise Fail(
                Diagnostic(
                    "requires-grad-wrong",
                    {
                        "what": {
                            "en": f"{what} (a backward pass through it "
                            f"{'reached the tensor it copies' if reached else 'gave it a gradient'})",
                            "es": f"{what} (un paso hacia atrás a través de él "
                            f"{'llegó al tensor que copia' if reached else 'le dio un gradiente'})",
                        },
                        "got": True,
                        "expected": False,
                    },
                )
            )


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
    memory: RemoteTensor  # `w.data` taken before the update: a view of w's memory as it was


def _steps(ctx: Context):
    size = int(ctx.randint(3, 9, ()))
    yield tuple(torch.tensor(v) for v in FIXED_SGD[:2]) + (FIXED_SGD[2],)
    yield (
        ctx.randn(size, dtype=torch.float32),
        ctx.randn(size, dtype=torch.float32),
        int(ctx.randint(1, 50, ())) / 100,
    )


def _sgd_step(ctx: Context, start: torch.Tensor, grad: torch.Tensor, lr: float) -> Step:
    w_ref = start.clone().requires_grad_()
    ctx.support.accumulate_grad(w_ref, grad)
    memory = w_ref.untyped_storage().data_ptr()
    ctx.reference.sgd_update_(w_ref, lr)
    w = ctx.student.put(ctx.on_device(start.clone()).requires_grad_())
    ctx.student.new("accumulate_grad", w, ctx.on_device(grad))
    view = expect_tensor(ctx.student.attr(w, "data"), "`w`")
    try:
        returned = ctx.student.call("sgd_update_", w, lr)
    except StudentError as exc:
        diagnostic = diagnose_exception(exc.info, "`sgd_update_`")
        data = ctx.student.attr(w, "data")
        if (
            ctx.student.attr(w, "grad") is None
            and isinstance(data, RemoteTensor)
            and tuple(data.shape) == tuple(start.shape)
            and torch.equal(data.value, start)
        ):
            diagnostic = Diagnostic(diagnostic.code, dict(diagnostic.details, hint=CLEARED_FIRST))
        raise Fail(diagnostic) from None
    return Step(w, w_ref, start, grad, returned, w_ref.untyped_storage().data_ptr() == memory, view)


def _cleared(grad: object) -> bool:
    value = grad.value if isinstance(grad, RemoteTensor) else grad
    return value is None or isinstance(value, torch.Tensor) and not bool(value.any())


def _step_hint(moved: torch.Tensor, moved_ref: torch.Tensor, grad: torch.Tensor) -> dict | None:
    """The hint the step `w` took fits, against the reference's, for a gradient `grad`."""
    if not bool(moved_ref.abs().gt(1e-6).any()):
        return None
    if close(moved, -moved_ref, 1e-5, 1e-6):
        return ASCENT
    if close(moved, -grad, 1e-5, 1e-6):
        return NO_LR
    return None


@check(
    "sgd-in-place",
    points=2,
    uses="sgd_update_",
    en="sgd_update_ changes w in place",
    es="sgd_update_ modifica w «in situ»",
)
def sgd_in_place(ctx: Context) -> None:
    for case in _steps(ctx):
        step = _sgd_step(ctx, *case)
        updated = expect_tensor(
            ctx.student.attr(step.w, "data"), UPDATED, shape=tuple(step.start.shape)
        )
        # w's memory as it was before the update, read back: it holds the new values when the
        # update was made in it, the old ones when w was given new memory (`w.data = …`)
        in_memory = ctx.student.method(step.memory, "clone")
        kept = (
            isinstance(in_memory, RemoteTensor)
            and isinstance(updated, RemoteTensor)
            and in_memory.shape == updated.shape
            and torch.equal(in_memory.value, updated.value)
        )
        if kept != step.ref_kept_memory:
            raise Fail(
                Diagnostic("storage-not-shared", {"what": UPDATED, "hint": NEW_MEMORY})
                if step.ref_kept_memory
                else Diagnostic("storage-shared", {"what": UPDATED})
            )
        expected = step.w_ref.detach()
        # a w left as it was is wrong in two ways, told apart by what happened to its gradient
        unchanged = torch.equal(updated.value, step.start)
        cleared = _cleared(ctx.student.attr(step.w, "grad"))
        if close(updated.value, expected, 1e-5, 1e-6) and (
            not unchanged or cleared == _cleared(step.w_ref.grad)
        ):
            continue
        if unchanged and cleared:
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": UPDATED,
                        "hint": CLEARED_FIRST,
                        **value_error_details(updated.value, expected),
                    },
                )
            )
        step_hint = _step_hint(
            updated.value.double() - step.start.double(),
            expected.double() - step.start.double(),
            step.grad.double(),
        )
        if step_hint and not unchanged:
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": UPDATED,
                        "hint": step_hint,
                        **value_error_details(updated.value, expected),
                    },
                )
            )
        if unchanged:
            got = "`w - lr * w.grad`"
            if isinstance(step.returned, RemoteTensor):  # words only: what it says it is
                grad_fn = _claim(step.returned, "grad_fn")
                got = f"`tensor(..., grad_fn=<{grad_fn}>)`" if grad_fn else "`tensor(...)`"
            raise Fail(Diagnostic("leaf-replaced", {"what": "`w`", "got": got, "hint": REBOUND}))
        expect_close(updated, expected, UPDATED)


@check(
    "sgd-keeps-leaf",
    points=1,
    uses="sgd_update_",
    en="w stays a leaf that requires grad",
    es="w sigue siendo una hoja que requiere gradiente",
)
def sgd_keeps_leaf(ctx: Context) -> None:
    """After the update, a backward pass the grader asks for, with a gradient it draws, must
    arrive whole in `w.grad` (added to what the update left there), as in the reference's `w`:
    only a leaf that requires grad gets it."""
    for case in _steps(ctx):
        step = _sgd_step(ctx, *case)
        g = ctx.randn(*step.start.shape, dtype=step.start.dtype)
        left = _grad_of(ctx, step.w, UPDATED)
        left_ref = None if step.w_ref.grad is None else step.w_ref.grad.detach().clone()
        tracked = _expect_tracked(ctx, step.w, step.w_ref, g, UPDATED, "w")
        if not tracked:
            continue
        got = _grad_of(ctx, step.w, UPDATED)
        arrived = None if got is None else got.double() - (0 if left is None else left.double())
        arrived_ref = (
            None
            if step.w_ref.grad is None
            else step.w_ref.grad.double() - (0 if left_ref is None else left_ref.double())
        )
        if (
            (arrived is None) != (arrived_ref is None)
            or arrived is not None
            and (arrived.shape != arrived_ref.shape or not close(arrived, arrived_ref, 1e-5, 1e-6))
        ):
            raise Fail(Diagnostic("leaf-replaced", {"what": "`w`", "got": "`w - lr * w.grad`"}))


@check(
    "sgd-clears-grad",
    points=1,
    uses="sgd_update_",
    en="sgd_update_ clears w.grad",
    es="sgd_update_ borra w.grad",
)
def sgd_clears_grad(ctx: Context) -> None:
    """`w.grad` read back right after the update: cleared (None or zeros) when the reference's
    is. Otherwise what the next `backward()` would leave, the grader adds its gradient itself."""
    what = {
        "en": "`w.grad` after `sgd_update_(w, lr)` and the next `backward()`",
        "es": "`w.grad` tras `sgd_update_(w, lr)` y el siguiente `backward()`",
    }
    for case in _steps(ctx):
        step = _sgd_step(ctx, *case)
        got = ctx.student.attr(step.w, "grad")
        got = None if got is None else expect_tensor(got, what, shape=step.grad.shape).value
        left, left_ref = (None if _cleared(g) else g.double() for g in (got, step.w_ref.grad))
        if left is None and left_ref is None:
            continue
        diagnostic = compare_grad(
            step.grad if left is None else left + step.grad,
            step.grad if left_ref is None else left_ref + step.grad,
            what,
        )
        if diagnostic:
            raise Fail(
                Diagnostic(diagnostic.code, dict(diagnostic.details, hint=NOT_CLEARED))
                if diagnostic.code == "grad-accumulated"
                else diagnostic
            )


def _predictions(ctx: Context):
    """(grader's model after the reference's predict, its output, student's model, output, x)."""
    cases = [
        (FIXED_MODEL_SEED, torch.tensor(FIXED_BATCH)),
        (
            int(ctx.randint(0, 1 << 30, ())),
            ctx.randn(int(ctx.randint(4, 9, ())), 4, dtype=torch.float32),
        ),
    ]
    for seed, x in cases:
        model_ref = ctx.support.small_model(seed)
        expected = ctx.reference.predict(model_ref, x.clone())
        model = ctx.student.new("small_model", seed, ctx.device.type)
        output = call(ctx, "predict", model, ctx.student.put(ctx.on_device(x)))
        if (
            isinstance(output, RemoteTensor)
            and tuple(output.shape) == (x.shape[0],)
            and isinstance(expected, torch.Tensor)
            and expected.dim() == 2
            and torch.equal(output.value.long(), expected.detach().argmax(dim=1))
        ):
            raise Fail(
                Diagnostic(
                    "shape-mismatch",
                    {
                        "what": PREDICTED,
                        "got": [x.shape[0]],
                        "expected": [x.shape[0], 3],
                        "hint": CLASSES,
                    },
                )
            )
        yield (
            model_ref,
            expected,
            model,
            expect_tensor(output, PREDICTED, shape=(x.shape[0], 3), dtype=torch.float32),
        )


def _training(ctx: Context, model: object) -> bool:
    """Whether the student's process says the model is in training mode: words for the
    diagnostic, never a point."""
    try:
        return ctx.student.describe(model).get("training") is True
    except (StudentError, Fail, AttributeError):
        return False


@check(
    "predict-eval-values",
    points=2,
    uses="predict",
    en="predict gives the eval-mode output",
    es="predict da la salida en modo evaluación",
)
def predict_eval_values(ctx: Context) -> None:
    """The output must be the eval-mode output computed here (dropout off, batch norm with its
    running statistics): in training mode neither holds. What the process says about
    `model.training` only chooses the hint."""
    for model_ref, expected, model, output in _predictions(ctx):
        expected = expected.detach()
        if model_ref.training:
            # Only a known wrong program standing in for the reference (the second look, whose
            # outcome only chooses a diagnostic's words) leaves the model in training mode, where
            # dropout draws other values each time: there the claim is all there is to compare.
            if _training(ctx, model):
                continue
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {"what": PREDICTED, **value_error_details(output.value, expected)},
                )
            )
        if compare_values(output.value, expected, PREDICTED) is None:
            continue
        details = {"what": PREDICTED, **value_error_details(output.value, expected)}
        if _training(ctx, model) and not model_ref.training:
            details.update(what=PREDICTED + " [`model.training == True`]", hint=STILL_TRAINING)
        raise Fail(Diagnostic("output-mismatch", details))


@check(
    "predict-no-graph",
    points=1,
    uses="predict",
    en="predict builds no graph",
    es="predict no construye grafo",
)
def predict_no_graph(ctx: Context) -> None:
    """A backward pass from the output, with a cotangent drawn here, must find no graph to go
    through (it fails, as the reference's output would): `model(x).detach()` passes too, a graph
    built and dropped inside `predict` leaves nothing to go through."""
    for _, expected, _, output in _predictions(ctx):
        g = ctx.randn(*expected.shape, dtype=expected.dtype)
        tracked = _tracked(ctx, output, g, PREDICTED)
        if tracked != expected.requires_grad:
            grad_fn = _claim(output, "grad_fn")  # words only
            raise Fail(
                Diagnostic(
                    "tracked-in-inference" if tracked else "requires-grad-wrong",
                    {
                        "what": PREDICTED,
                        "got": f"<{grad_fn}>" if tracked and grad_fn else tracked,
                        "expected": expected.requires_grad,
                    },
                )
            )
