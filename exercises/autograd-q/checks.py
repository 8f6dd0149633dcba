"""Hidden checks for autograd-q: Q = 3a³ − b², backward with a cotangent v.

Each check first runs a fixed case on which every known wrong program gives other gradients (v
is not constant, and no element of a or b is 0 or ±1, which would hide a factor), then a random
one.
"""

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    call,
    check,
    expect_tensor,
    expect_tuple,
    refuse_hand_written_grads,
)
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
    "`b.grad`.",
}


TWICE_V = {
    "en": "Your {name}.grad is {formula}·v², multiplied by `v` twice: `Q.backward(gradient=v)` "
    "already multiplies ∂Q/∂{name} by `v`, so return `{name}.grad` as it is.",
    "es": "Tu {name}.grad es {formula}·v², multiplicado dos veces por `v`: `Q.backward(gradient=v)` "
    "ya multiplica ∂Q/∂{name} por `v`, así que devuelve `{name}.grad` tal cual.",
}
SQUARE_A = {
    "en": "Your a.grad is 6a·v, the gradient of 3a², not of 3a³: Q = 3a³ − b², so ∂Q/∂a = 9a².",
    "es": "Tu a.grad es 6a·v, el gradiente de 3a², no de 3a³: Q = 3a³ − b², así que ∂Q/∂a = 9a².",
}
NO_THREE_A = {
    "en": "Your a.grad is 3a²·v, the gradient of a³: Q = 3a³ − b² keeps the factor 3, so ∂Q/∂a = 9a².",
    "es": "Tu a.grad es 3a²·v, el gradiente de a³: Q = 3a³ − b² conserva el factor 3, así que ∂Q/∂a = 9a².",
}
ONLY_1D = {
    "en": "`q_grads` works for 1-D inputs but raised for 2-D ones: an operation in it works only "
    "for 1-D tensors (`torch.dot`, or `@`, which is a matrix product for 2-D). "
    "`Q.backward(gradient=v)` takes a `v` of `Q`'s shape, whatever its number of dimensions.",
    "es": "`q_grads` funciona con entradas 1-D pero falló con entradas 2-D: una operación que usas "
    "sirve solo para 1-D (`torch.dot`, o `@`, que para 2-D es un producto de matrices). "
    "`Q.backward(gradient=v)` acepta un `v` con la forma de `Q`, tenga las dimensiones que tenga.",
}


def _formula_hint(got: torch.Tensor, case: tuple, name: str) -> dict | None:
    """The hint whose formula, computed here from the same (a, b, v), the gradient matches."""
    a, b, v = (t.double() for t in case)
    candidates = (
        [
            (9 * a**2 * v * v, "twice", "9a²"),
            (6 * a * v, SQUARE_A, None),
            (3 * a**2 * v, NO_THREE_A, None),
        ]
        if name == "a"
        else [(-2 * b * v * v, "twice", "−2b")]
    )
    for value, hint, formula in candidates:
        if got.shape == value.shape and torch.allclose(got.double(), value, rtol=1e-4, atol=1e-5):
            if hint == "twice":
                return {
                    lang: text.format(name=name, formula=formula) for lang, text in TWICE_V.items()
                }
            return hint
    return None


def _cases(ctx: Context, fixed: tuple, shape: tuple[int, ...]):
    """(a, b, v): the fixed case, then a random one of `shape`."""
    yield tuple(torch.tensor(values, dtype=torch.float32) for values in fixed)
    yield tuple(ctx.randn(*shape, dtype=torch.float32) for _ in range(3))


def _grads(ctx: Context, a: torch.Tensor, b: torch.Tensor, v: torch.Tensor):
    """The student's leaves and returned gradients; the reference's returned gradients and
    the gradients its leaves hold afterwards."""
    a_ref, b_ref = a.clone().requires_grad_(), b.clone().requires_grad_()
    returned = ctx.reference.q_grads(a_ref, b_ref, v.clone())
    leaves = ctx.student.put(
        (ctx.on_device(a).requires_grad_(), ctx.on_device(b).requires_grad_(), ctx.on_device(v))
    )
    got = expect_tuple(call(ctx, "q_grads", *leaves), 2, "the value returned by `q_grads`")
    return leaves[:2], got, returned, (a_ref.grad, b_ref.grad)


def _expect(got, expected: torch.Tensor | None, what, case: tuple = (), name: str = "") -> None:
    """Compare a gradient; no gradient is right where the reference's leaf has none either (a
    wrong program standing in for it). `case` (a, b, v) and `name` ("a" or "b") let a wrong
    gradient be matched with the formulas of classic slips."""
    if expected is None:
        if got is not None:
            raise Fail(Diagnostic("grad-mismatch", {"what": what}))
        return
    diagnostic = compare_grad(
        None if got is None else expect_tensor(got, what).value, expected, what
    )
    if diagnostic is not None and diagnostic.code == "grad-mismatch" and case:
        hint = _formula_hint(expect_tensor(got, what).value, case, name)
        if hint:
            raise Fail(Diagnostic(diagnostic.code, dict(diagnostic.details, hint=hint)))
    if diagnostic is not None:  # the fresh leaves here had no gradient from earlier steps
        raise Fail(
            Diagnostic(diagnostic.code, dict(diagnostic.details, hint=ONE_BACKWARD))
            if diagnostic.code == "grad-accumulated"
            else diagnostic
        )


def _vector(ctx: Context) -> tuple[int, ...]:
    return (int(ctx.randint(2, 7, ())),)


@check("grad-a", points=3, uses="q_grads", en="a.grad = 9a²·v", es="a.grad = 9a²·v")
def grad_a(ctx: Context) -> None:
    for case in _cases(ctx, FIXED_VECTOR, _vector(ctx)):
        _, (ga, _), (ea, _), _ = _grads(ctx, *case)
        _expect(ga, ea, "a.grad", case, "a")


@check("grad-b", points=3, uses="q_grads", en="b.grad = −2b·v", es="b.grad = −2b·v")
def grad_b(ctx: Context) -> None:
    for case in _cases(ctx, FIXED_VECTOR, _vector(ctx)):
        _, (_, gb), (_, eb), _ = _grads(ctx, *case)
        _expect(gb, eb, "b.grad", case, "b")


def _only_1d(ctx: Context, diagnostic: Diagnostic) -> Diagnostic:
    """An exception for 2-D inputs, told apart when the fixed 1-D case runs without one (run
    only once the check has failed: it chooses words, never points)."""
    if diagnostic.code != "exception":
        return diagnostic
    try:
        _grads(ctx, *(torch.tensor(values, dtype=torch.float32) for values in FIXED_VECTOR))
    except Fail:
        return diagnostic
    return Diagnostic(diagnostic.code, dict(diagnostic.details, hint=ONLY_1D))


@check("matrix-inputs", points=2, uses="q_grads", en="2-D inputs", es="entradas 2-D")
def matrix_inputs(ctx: Context) -> None:
    for case in _cases(ctx, FIXED_MATRIX, tuple(int(n) for n in ctx.randint(2, 5, (2,)))):
        try:
            _, (ga, gb), (ea, eb), _ = _grads(ctx, *case)
        except Fail as failure:
            raise Fail(*(_only_1d(ctx, d) for d in failure.diagnostics)) from None
        _expect(ga, ea, "a.grad", case, "a")
        _expect(gb, eb, "b.grad", case, "b")


@check(
    "stored-in-leaves",
    points=2,
    uses="q_grads",
    en="the gradients come from backward()",
    es="los gradientes vienen de backward()",
)
def stored_in_leaves(ctx: Context) -> None:
    for case in _cases(ctx, FIXED_VECTOR, _vector(ctx)):
        (ra, rb), _, _, (ea, eb) = _grads(ctx, *case)
        _expect(ctx.student.attr(ra, "grad"), ea, A_AFTER, case, "a")
        _expect(ctx.student.attr(rb, "grad"), eb, B_AFTER, case, "b")
    refuse_hand_written_grads(ctx, "`q_grads(a, b, v)`")
