"""Checks you can run yourself: `hpcgrade check metrics FILE` (the grader's own use other and
random values)."""

import torch

from worker.harness.checks import Context, RemoteTensor, call, check, expect_float

OUTPUTS = [[0.1, 2.0, -1.0], [1.5, 0.3, 0.2], [0.0, 0.1, 3.0], [2.0, 1.0, 0.5]]
LABELS = [1, 0, 1, 0]


def _ask(ctx: Context, name: str, x: torch.Tensor, y: torch.Tensor):
    got = call(ctx, name, *ctx.student.put((x, y)))
    return (
        float(got.value.reshape(()))
        if isinstance(got, RemoteTensor) and got.value.numel() == 1
        else got
    )


@check(
    "accuracy-example",
    points=1,
    uses="accuracy",
    en="the statement's accuracy example: 0.75",
    es="el ejemplo de accuracy del enunciado: 0.75",
)
def accuracy_example(ctx: Context) -> None:
    got = _ask(ctx, "accuracy", torch.tensor(OUTPUTS), torch.tensor(LABELS))
    expect_float(got, 0.75, "`accuracy(outputs, labels)`")


@check(
    "mae-example",
    points=1,
    uses="mae",
    en="the statement's mae example: 0.8333…",
    es="el ejemplo de mae del enunciado: 0.8333…",
)
def mae_example(ctx: Context) -> None:
    got = _ask(ctx, "mae", torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.5, 2.0, 1.0]))
    expect_float(got, 2.5 / 3, "`mae(output, target)`", tol=1e-6)


@check(
    "python-floats",
    points=1,
    uses=("accuracy", "mae"),
    en="both return a Python float",
    es="las dos devuelven un float de Python",
)
def python_floats(ctx: Context) -> None:
    for name, args in (
        ("accuracy", (torch.tensor(OUTPUTS), torch.tensor(LABELS))),
        ("mae", (torch.tensor([1.0, 2.0]), torch.tensor([0.0, 0.0]))),
    ):
        got = call(ctx, name, *ctx.student.put(args))
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            expect_float(got, 0.0, f"`{name}(...)`")  # output-mismatch with the type note
