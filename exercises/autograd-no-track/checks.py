"""Hidden checks for autograd-no-track: detach, in-place updates under no_grad, inference."""
import torch

from worker.harness.checks import (Context, Diagnostic, Fail, RemoteTensor, call, check,
                                   diagnose_exception, expect_close, expect_grad, expect_tensor)
from worker.harness.remote import StudentError


def _expect_flag(value, expected: bool, what: str) -> None:
    if value is not expected:
        raise Fail(Diagnostic("requires-grad-wrong", {"what": what, "got": value,
                                                      "expected": expected}))


def _leaf(ctx: Context, shape: tuple[int, ...]) -> tuple[torch.Tensor, RemoteTensor]:
    values = ctx.randn(*shape, dtype=torch.float32)
    return values, ctx.student.put(ctx.on_device(values).requires_grad_())


def _random_shape(ctx: Context) -> tuple[int, ...]:
    return tuple(int(n) for n in ctx.randint(2, 6, (2,)))


@check("frozen-shares-memory", points=2, uses="frozen_copy",
       en="frozen_copy shares memory with x and leaves x as it was",
       es="frozen_copy comparte memoria con x y deja x como estaba")
def frozen_shares_memory(ctx: Context) -> None:
    values, x = _leaf(ctx, _random_shape(ctx))
    copy = expect_tensor(call(ctx, "frozen_copy", x), "`frozen_copy(x)`", shape=values.shape,
                         dtype=values.dtype)
    if copy.storage != x.storage:
        raise Fail(Diagnostic("storage-not-shared", {"what": "`frozen_copy(x)`"}))
    expect_close(copy, values, "`frozen_copy(x)`")
    _expect_flag(ctx.student.attr(x, "requires_grad"), True, "`frozen_copy(x); x`")


@check("frozen-no-grad", points=1, uses="frozen_copy",
       en="frozen_copy of a computed tensor does not require grad",
       es="frozen_copy de un tensor calculado no requiere gradiente")
def frozen_no_grad(ctx: Context) -> None:
    _, leaf = _leaf(ctx, _random_shape(ctx))
    x = ctx.student.method(leaf, "mul", 2.0)
    copy = expect_tensor(call(ctx, "frozen_copy", x), "`frozen_copy(x)`", shape=x.shape)
    _expect_flag(copy.requires_grad, False, "`frozen_copy(x)`")


def _sgd_step(ctx: Context):
    """A leaf w whose .grad comes from a backward pass, after the student's sgd_update_(w, lr)."""
    size = int(ctx.randint(3, 9, ()))
    start, w = _leaf(ctx, (size,))
    grad = ctx.randn(size, dtype=torch.float32)
    lr = int(ctx.randint(1, 50, ())) / 100
    ctx.student.new("accumulate_grad", w, ctx.on_device(grad))
    returned = call(ctx, "sgd_update_", w, lr)
    return w, start, grad, lr, returned


@check("sgd-in-place", points=2, uses="sgd_update_", en="sgd_update_ changes w in place",
       es="sgd_update_ modifica w «in situ»")
def sgd_in_place(ctx: Context) -> None:
    w, start, grad, lr, returned = _sgd_step(ctx)
    updated = ctx.student.attr(w, "data")
    what = "`sgd_update_(w, lr); w`"
    if updated.storage != w.storage:
        raise Fail(Diagnostic("storage-not-shared", {"what": what}))
    if torch.equal(updated.value, start):
        # the caller's w is untouched: the update went to a new tensor under the same name
        got = "`w - lr * w.grad`"
        if isinstance(returned, RemoteTensor):
            got = f"`tensor(..., grad_fn=<{returned.grad_fn}>)`" if returned.grad_fn \
                else "`tensor(...)`"
        raise Fail(Diagnostic("leaf-replaced", {"what": "`w`", "got": got}))
    expect_close(updated, start - lr * grad, what)


@check("sgd-keeps-leaf", points=1, uses="sgd_update_",
       en="w stays a leaf that requires grad", es="w sigue siendo una hoja que requiere gradiente")
def sgd_keeps_leaf(ctx: Context) -> None:
    w, *_ = _sgd_step(ctx)
    _expect_flag(ctx.student.attr(w, "requires_grad"), True, "`sgd_update_(w, lr); w`")
    if ctx.student.attr(w, "is_leaf") is not True:
        raise Fail(Diagnostic("leaf-replaced", {"what": "`w`", "got": "`w - lr * w.grad`"}))


@check("sgd-clears-grad", points=1, uses="sgd_update_", en="sgd_update_ clears w.grad",
       es="sgd_update_ borra w.grad")
def sgd_clears_grad(ctx: Context) -> None:
    w, _, grad, _, _ = _sgd_step(ctx)
    try:
        ctx.student.new("accumulate_grad", w, ctx.on_device(grad))
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, "`sgd_update_(w, lr); loss.backward()`")) \
            from None
    expect_grad(ctx.student.attr(w, "grad"), grad, "`sgd_update_(w, lr); loss.backward(); w.grad`")


def _predict(ctx: Context):
    seed = int(ctx.randint(0, 1 << 30, ()))
    x = ctx.randn(int(ctx.randint(4, 9, ())), 4, dtype=torch.float32)
    model = ctx.student.new("small_model", seed, ctx.device.type)
    output = call(ctx, "predict", model, ctx.student.put(ctx.on_device(x)))
    output = expect_tensor(output, "`predict(model, x)`", shape=(x.shape[0], 3),
                           dtype=torch.float32)
    return model, x, seed, output


@check("predict-eval-values", points=2, uses="predict", en="predict gives the eval-mode output",
       es="predict da la salida en modo evaluación")
def predict_eval_values(ctx: Context) -> None:
    model, x, seed, output = _predict(ctx)
    expected = ctx.reference.predict(ctx.support.small_model(seed), x)
    what = "`predict(model, x)`"
    if ctx.student.describe(model).get("training") is True:
        what += " [`model.training == True`]"
    expect_close(output, expected, what)


@check("predict-no-graph", points=1, uses="predict", en="predict builds no graph",
       es="predict no construye grafo")
def predict_no_graph(ctx: Context) -> None:
    _, _, _, output = _predict(ctx)
    if output.requires_grad or output.grad_fn is not None:
        raise Fail(Diagnostic("tracked-in-inference",
                              {"what": "`predict(model, x)`", "got": output.grad_fn}))
