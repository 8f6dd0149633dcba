"""Hidden checks for autograd-q: Q = 3a³ − b², backward with a cotangent v."""
import torch

from worker.harness.checks import Context, call, check, expect_grad, expect_tuple


def _inputs(ctx: Context, shape: tuple[int, ...]):
    a, b, v = (ctx.randn(*shape, dtype=torch.float32) for _ in range(3))
    ref_a, ref_b = a.clone().requires_grad_(), b.clone().requires_grad_()
    expected = ctx.reference.q_grads(ref_a, ref_b, v)
    sent = ctx.student.put((ctx.on_device(a).requires_grad_(), ctx.on_device(b).requires_grad_(),
                            ctx.on_device(v)))
    return sent, expected


def _grads(ctx: Context, shape: tuple[int, ...]):
    (a, b, v), expected = _inputs(ctx, shape)
    got = expect_tuple(call(ctx, "q_grads", a, b, v), 2, "the value returned by `q_grads`")
    return (a, b), got, expected


@check("grad-a", points=3, uses="q_grads", en="a.grad = 9a²·v", es="a.grad = 9a²·v")
def grad_a(ctx: Context) -> None:
    _, (ga, _), (ea, _) = _grads(ctx, (int(ctx.randint(2, 7, ())),))
    expect_grad(ga, ea, "a.grad")


@check("grad-b", points=3, uses="q_grads", en="b.grad = −2b·v", es="b.grad = −2b·v")
def grad_b(ctx: Context) -> None:
    _, (_, gb), (_, eb) = _grads(ctx, (int(ctx.randint(2, 7, ())),))
    expect_grad(gb, eb, "b.grad")


@check("matrix-inputs", points=2, uses="q_grads", en="2-D inputs", es="entradas 2-D")
def matrix_inputs(ctx: Context) -> None:
    shape = tuple(int(n) for n in ctx.randint(2, 5, (2,)))
    _, (ga, gb), (ea, eb) = _grads(ctx, shape)
    expect_grad(ga, ea, "a.grad")
    expect_grad(gb, eb, "b.grad")


@check("stored-in-leaves", points=2, uses="q_grads", en="the gradients come from backward()",
       es="los gradientes vienen de backward()")
def stored_in_leaves(ctx: Context) -> None:
    (a, b), _, (ea, eb) = _grads(ctx, (3,))
    expect_grad(ctx.student.attr(a, "grad"), ea, {"en": "a.grad after the call",
                                                   "es": "a.grad tras la llamada"})
    expect_grad(ctx.student.attr(b, "grad"), eb, {"en": "b.grad after the call",
                                                   "es": "b.grad tras la llamada"})
