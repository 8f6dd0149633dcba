"""Checks you can run before submitting: `hpcgrade check training-step FILE`.

The model is one linear layer, W = [[1, 2]], b = [0], trained with plain SGD (lr 0.1) on the
same batch every call: the prediction is [3, 2], the loss (3 − 0) + (2 − 1) = 4, and the
gradients are [[3, 1]] for W (the sum of the rows of data) and [2] for b.
"""

import torch

from worker.harness.checks import Context, Diagnostic, Fail, call, check, expect_close, expect_float

DATA, LABELS = [[1.0, 1.0], [2.0, 0.0]], [[0.0], [1.0]]


def _train(ctx: Context, calls: int):
    model = ctx.student.new("linear_model", [[1.0, 2.0]], [0.0])
    optimizer = ctx.student.new("RecordingSGD", ctx.student.method(model, "parameters"), 0.1)
    data, labels = ctx.student.put((torch.tensor(DATA), torch.tensor(LABELS)))
    losses = [call(ctx, "train_step", model, data, labels, optimizer) for _ in range(calls)]
    return model, losses


def _expect_parameters(
    ctx: Context, model, weight: list, bias: list, when: dict, hint: dict
) -> None:
    for name, values in (("weight", weight), ("bias", bias)):
        expect_close(
            ctx.student.attr(model, name),
            torch.tensor(values),
            {lang: f"`model.{name}` {text}" for lang, text in when.items()},
            hint=hint,
        )


@check(
    "loss",
    points=1,
    uses="train_step",
    en="the loss returned, a float: 4.0",
    es="la pérdida devuelta, un float: 4.0",
)
def loss(ctx: Context) -> None:
    _, (got,) = _train(ctx, 1)
    try:
        expect_float(got, 4.0, "`train_step(model, data, labels, optimizer)`", tol=1e-5)
    except Fail as fail:
        wrong = fail.diagnostics[0]
        if "got_type" in wrong.details:  # not a number: the general hint says what to return
            raise
        raise Fail(
            Diagnostic(
                wrong.code,
                dict(
                    wrong.details,
                    hint={
                        "en": "The loss is `(prediction - labels).sum()`: (3 − 0) + (2 − 1) = 4.",
                        "es": "La pérdida es `(prediction - labels).sum()`: (3 − 0) + (2 − 1) = 4.",
                    },
                ),
            )
        ) from None


@check(
    "one-step",
    points=1,
    uses="train_step",
    en="after one call: W = [[0.7, 1.9]], b = [-0.2]",
    es="tras una llamada: W = [[0.7, 1.9]], b = [-0.2]",
)
def one_step(ctx: Context) -> None:
    model, _ = _train(ctx, 1)
    _expect_parameters(
        ctx,
        model,
        [[0.7, 1.9]],
        [-0.2],
        {"en": "after one call", "es": "tras una llamada"},
        hint={
            "en": "One call: `loss.backward()` gives the gradients [[3, 1]] and [2], then "
            "`optimizer.step()` moves W and b by −0.1 times them.",
            "es": "Una llamada: `loss.backward()` da los gradientes [[3, 1]] y [2], y después "
            "`optimizer.step()` mueve W y b −0.1 veces esos gradientes.",
        },
    )


@check(
    "two-steps",
    points=1,
    uses="train_step",
    en="after two calls: W = [[0.4, 1.8]], b = [-0.4]",
    es="tras dos llamadas: W = [[0.4, 1.8]], b = [-0.4]",
)
def two_steps(ctx: Context) -> None:
    model, _ = _train(ctx, 2)
    _expect_parameters(
        ctx,
        model,
        [[0.4, 1.8]],
        [-0.4],
        {"en": "after two calls", "es": "tras dos llamadas"},
        hint={
            "en": "The second call's gradients are again [[3, 1]] and [2]: clear them in every call "
            "(`optimizer.zero_grad()`); W = [[0.1, 1.7]] means the first call's were added.",
            "es": "Los gradientes de la segunda llamada son otra vez [[3, 1]] y [2]: bórralos en cada "
            "llamada (`optimizer.zero_grad()`); W = [[0.1, 1.7]] indica que se sumaron los de "
            "la primera.",
        },
    )
