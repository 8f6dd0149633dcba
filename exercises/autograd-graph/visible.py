"""Checks you can run before submitting: `hpcgrade check autograd-graph FILE`."""

import torch

from worker.harness.checks import Context, Diagnostic, Fail, call, check, expect_grad

FLAGS_HINT = {
    "en": "Return the flags the tensors have (`.is_leaf`, `.requires_grad`), not the ones you expect.",
    "es": "Devuelve los indicadores que tienen los tensores (`.is_leaf`, `.requires_grad`), no los que esperas.",
}


def _expect_flags(got: object, expected: dict, about: str) -> None:
    if got != expected:
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": f"`is_leaf_report(a, b)` ({about})",
                    "got": got,
                    "expected": expected,
                    "worst_index": [],
                    "hint": FLAGS_HINT,
                },
            )
        )


@check(
    "gradients",
    points=1,
    uses="leaf_grads",
    en="the gradients for x1, x2, x3, x4 = 2, 3, 5, 7",
    es="los gradientes con x1, x2, x3, x4 = 2, 3, 5, 7",
)
def gradients(ctx: Context) -> None:
    xs = ctx.student.put([torch.tensor(v, requires_grad=True) for v in (2.0, 3.0, 5.0, 7.0)])
    got = call(ctx, "leaf_grads", *xs)
    if not isinstance(got, dict):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": "`leaf_grads(x1, x2, x3, x4)`",
                    "got_type": getattr(got, "type_name", type(got).__name__),
                    "expected_type": "dict",
                },
            )
        )
    for key, value in {"x1": 3.0, "x2": 2.0, "x3": 7.0, "x4": 5.0, "z1": 1.0, "z2": 1.0}.items():
        expect_grad(got.get(key), torch.tensor(value), f'`leaf_grads(x1, x2, x3, x4)["{key}"]`')


@check(
    "leaves",
    points=1,
    uses="is_leaf_report",
    en="`is_leaf_report` for two leaves that require grad",
    es="`is_leaf_report` con dos hojas que requieren gradiente",
)
def leaves(ctx: Context) -> None:
    a, b = ctx.student.put([torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)])
    _expect_flags(
        call(ctx, "is_leaf_report", a, b),
        {"a": True, "b": True, "c": False, "c_requires_grad": True},
        "a, b require grad",
    )


@check(
    "no-grad",
    points=1,
    uses="is_leaf_report",
    en="`is_leaf_report` for two tensors that do not require grad",
    es="`is_leaf_report` con dos tensores que no requieren gradiente",
)
def no_grad(ctx: Context) -> None:
    a, b = ctx.student.put([torch.ones(2), torch.ones(2)])
    _expect_flags(
        call(ctx, "is_leaf_report", a, b),
        {"a": True, "b": True, "c": True, "c_requires_grad": False},
        "neither requires grad",
    )
