"""Checks you can run yourself: `hpcgrade check autograd-accumulation FILE` (the grader's own
use random micro-batches)."""

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteTensor,
    call,
    check,
    expect_close,
    expect_tensor,
)


def _train(ctx: Context, weight: float, batches: list, steps: int, lr: float):
    model = ctx.student.new("ExampleLinear", weight)
    parameter = expect_tensor(ctx.student.attr(model, "weight"), "`model.weight`")
    optimizer = ctx.student.new("RecordingSGD", [parameter], lr)
    returned = call(
        ctx,
        "train_accumulated",
        model,
        optimizer,
        ctx.student.put([torch.tensor(b) for b in batches]),
        steps,
    )
    return returned, ctx.student.attr(parameter, "data"), ctx.student.attr(optimizer, "events")


def _expect_grads_at_steps(events: object, expected: list[float]) -> None:
    """The .grad RecordingSGD found at each step() must be `expected`."""
    grads = [
        e[3].value.item() if isinstance(e[3], RemoteTensor) and e[3].value.numel() == 1 else None
        for e in (events if isinstance(events, list) else [])
        if isinstance(e, tuple) and len(e) == 4 and e[0] == "step"
    ]
    if len(grads) != len(expected) or any(
        g is None or abs(g - e) > 1e-4 for g, e in zip(grads, expected)
    ):
        raise Fail(
            Diagnostic(
                "grad-mismatch",
                {
                    "what": "`model.weight.grad` at each `optimizer.step()`",
                    "worst_index": [],
                    "got": grads,
                    "expected": expected,
                },
            )
        )


@check(
    "statement-example",
    points=1,
    uses="train_accumulated",
    en="the statement's example: W = 1, x = [1, 2] and [3, 4], two steps of accumulation → 1.15",
    es="el ejemplo del enunciado: W = 1, x = [1, 2] y [3, 4], acumulación de dos pasos → 1.15",
)
def statement_example(ctx: Context) -> None:
    returned, weight, _ = _train(ctx, 1.0, [[1.0, 2.0], [3.0, 4.0]], 2, 0.01)
    expect_close(returned, torch.tensor([1.15]), "`train_accumulated(...)`")
    expect_close(weight, torch.tensor([1.15]), "`model.weight`")


@check(
    "grad-at-step",
    points=1,
    uses="train_accumulated",
    en="W = 0, x = [1], [1], [2], accumulation_steps = 3: `.grad` is −8 at the one `step()`",
    es="W = 0, x = [1], [1], [2], accumulation_steps = 3: `.grad` vale −8 en el único `step()`",
)
def grad_at_step(ctx: Context) -> None:
    _, weight, events = _train(ctx, 0.0, [[1.0], [1.0], [2.0]], 3, 0.1)
    _expect_grads_at_steps(events, [-8.0])
    expect_close(weight, torch.tensor([0.8]), "`model.weight`")


@check(
    "two-windows",
    points=1,
    uses="train_accumulated",
    en="W = 1, x = [1], [2], [3], [4], accumulation_steps = 2: two steps, W = 1.2875",
    es="W = 1, x = [1], [2], [3], [4], accumulation_steps = 2: dos pasos, W = 1.2875",
)
def two_windows(ctx: Context) -> None:
    _, weight, events = _train(ctx, 1.0, [[1.0], [2.0], [3.0], [4.0]], 2, 0.01)
    _expect_grads_at_steps(events, [-5.0, -23.75])
    expect_close(weight, torch.tensor([1.2875]), "`model.weight`")
