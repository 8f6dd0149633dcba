"""Hidden checks for autograd-q: Q = 3a³ − b², backward with a cotangent v.

Each check first runs a fixed case on which every known wrong program gives other gradients (v
is not constant, and no element of a or b is 0 or ±1, which would hide a factor), then a random
one.
"""
import torch

from worker.harness.checks import (Context, Diagnostic, Fail, call, check, expect_tensor,
                                   expect_tuple)
from worker.harness.diagnostics import compare_grad

FIXED_VECTOR = ([2.0, -1.5, 0.5], [3.0, -2.0, 1.5], [1.0, -2.0, 0.5])
FIXED_MATRIX = ([[2.0, -1.5], [0.5, 1.5]], [[3.0, -2.0], [1.5, -0.5]], [[1.0, -2.0], [0.5, 3.0]])
A_AFTER = {"en": "a.grad after the call", "es": "a.grad tras la llamada"}
B_AFTER = {"en": "b.grad after the call", "es": "b.grad tras la llamada"}
ONE_BACKWARD = {
    "en": "Each `backward()` adds to `.grad`, and `a` and `b` had no gradient before the call: "
          "call `Q.backward(gradient=v)` once; it fills `a.grad` and `b.grad` together.",
    "es": "Cada `backward()` se suma a `.grad`, y `a` y `b` no tenían gradiente antes de la "
          "llamada: llama una sola vez a `Q.backward(gradient=v)`; rellena a la vez `a.grad` y "
          "`b.grad`."}


def _cases(ctx: Context, fixed: tuple, shape: tuple[int, ...]):
    """(a, b, v): the fixed case, then a random one of `shape`."""
    yield tuple(torch.tensor(values, dtype=torch.float32) for values in fixed)
    yield tuple(ctx.randn(*shape, dtype=torch.float32) for _ in range(3))


def _grads(ctx: Context, a: torch.Tensor, b: torch.Tensor, v: torch.Tensor):
    """The student's leaves and returned gradients; the reference's returned gradients and
    the gradients its leaves hold afterwards."""
    a_ref, b_ref = a.clone().requires_grad_(), b.clone().requires_grad_()
    returned = ctx.reference.q_grads(a_ref, b_ref, v.clone())
    leaves = ctx.student.put((ctx.on_device(a).requires_grad_(),
                              ctx.on_device(b).requires_grad_(), ctx.on_device(v)))
    got = expect_tuple(call(ctx, "q_grads", *leaves), 2, "the value returned by `q_grads`")
    return leaves[:2], got, returned, (a_ref.grad, b_ref.grad)


def _expect(got, expected: torch.Tensor | None, what) -> None:
    """Compare a gradient; no gradient is right where the reference's leaf has none either (a
    wrong program standing in for it)."""
    if expected is None:
        if got is not None:
            raise Fail(Diagnostic("grad-mismatch", {"what": what}))
        return
    diagnostic = compare_grad(None if got is None else expect_tensor(got, what).value,
                              expected, what)
    if diagnostic is not None:  # the fresh leaves here had no gradient from earlier steps
        raise Fail(Diagnostic(diagnostic.code, dict(diagnostic.details, hint=ONE_BACKWARD))
                   if diagnostic.code == "grad-accumulated" else diagnostic)


def _vector(ctx: Context) -> tuple[int, ...]:
    return (int(ctx.randint(2, 7, ())),)


@check("grad-a", points=3, uses="q_grads", en="a.grad = 9a²·v", es="a.grad = 9a²·v")
def grad_a(ctx: Context) -> None:
    for case in _cases(ctx, FIXED_VECTOR, _vector(ctx)):
        _, (ga, _), (ea, _), _ = _grads(ctx, *case)
        _expect(ga, ea, "a.grad")


@check("grad-b", points=3, uses="q_grads", en="b.grad = −2b·v", es="b.grad = −2b·v")
def grad_b(ctx: Context) -> None:
    for case in _cases(ctx, FIXED_VECTOR, _vector(ctx)):
        _, (_, gb), (_, eb), _ = _grads(ctx, *case)
        _expect(gb, eb, "b.grad")


@check("matrix-inputs", points=2, uses="q_grads", en="2-D inputs", es="entradas 2-D")
def matrix_inputs(ctx: Context) -> None:
    for case in _cases(ctx, FIXED_MATRIX, tuple(int(n) for n in ctx.randint(2, 5, (2,)))):
        _, (ga, gb), (ea, eb), _ = _grads(ctx, *case)
        _expect(ga, ea, "a.grad")
        _expect(gb, eb, "b.grad")


@check("stored-in-leaves", points=2, uses="q_grads", en="the gradients come from backward()",
       es="los gradientes vienen de backward()")
def stored_in_leaves(ctx: Context) -> None:
    for case in _cases(ctx, FIXED_VECTOR, _vector(ctx)):
        (ra, rb), _, _, (ea, eb) = _grads(ctx, *case)
        _expect(ctx.student.attr(ra, "grad"), ea, A_AFTER)
        _expect(ctx.student.attr(rb, "grad"), eb, B_AFTER)
