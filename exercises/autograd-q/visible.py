"""Checks you can run yourself: `hpcgrade check autograd-q FILE` (the grader's own use others)."""

import torch

from worker.harness.checks import Context, call, check, expect_grad, expect_tuple


def _q_grads(ctx: Context, a: list, b: list, v: list):
    leaves = ctx.student.put(
        (torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True), torch.tensor(v))
    )
    got = expect_tuple(call(ctx, "q_grads", *leaves), 2, "the value returned by `q_grads`")
    return leaves[:2], got


@check(
    "statement-example",
    points=1,
    uses="q_grads",
    en="the statement's example (v of ones)",
    es="el ejemplo del enunciado (v de unos)",
)
def statement_example(ctx: Context) -> None:
    _, (ga, gb) = _q_grads(ctx, [2.0, 3.0], [6.0, 4.0], [1.0, 1.0])
    expect_grad(ga, torch.tensor([36.0, 81.0]), "a.grad")
    expect_grad(gb, torch.tensor([-12.0, -8.0]), "b.grad")


@check(
    "cotangent-v",
    points=1,
    uses="q_grads",
    en="a cotangent v that is not all ones",
    es="un cotangente v que no es todo unos",
)
def cotangent_v(ctx: Context) -> None:
    _, (ga, gb) = _q_grads(ctx, [1.0, 2.0], [3.0, 1.0], [1.0, 0.5])
    expect_grad(ga, torch.tensor([9.0, 18.0]), "a.grad")
    expect_grad(gb, torch.tensor([-6.0, -1.0]), "b.grad")


@check(
    "matrix-in-leaves",
    points=1,
    uses="q_grads",
    en="2-D inputs: the gradients are in a.grad and b.grad",
    es="entradas 2-D: los gradientes están en a.grad y b.grad",
)
def matrix_in_leaves(ctx: Context) -> None:
    (a, b), _ = _q_grads(
        ctx, [[1.0, -1.0], [2.0, 0.5]], [[1.0, 2.0], [-1.0, 3.0]], [[1.0, 2.0], [0.5, -1.0]]
    )
    expect_grad(ctx.student.attr(a, "grad"), torch.tensor([[9.0, 18.0], [18.0, -2.25]]), "a.grad")
    expect_grad(ctx.student.attr(b, "grad"), torch.tensor([[-2.0, -8.0], [1.0, 6.0]]), "b.grad")
