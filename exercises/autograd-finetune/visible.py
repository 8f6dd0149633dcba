"""Checks you can run before submitting: `hpcgrade check autograd-finetune FILE`."""

import torch

from worker.harness.checks import Context, Diagnostic, Fail, RemoteObject, call, check

HEAD_HINT = {
    "en": "Replace only `model.fc`, with `nn.Linear(512, num_classes)` (bias included).",
    "es": "Sustituye solo `model.fc`, por `nn.Linear(512, num_classes)` (con sesgo).",
}
TRAINABLE = {
    "conv1.weight": False,
    "conv1.bias": False,
    "conv2.weight": False,
    "conv2.bias": False,
    "fc.weight": True,
    "fc.bias": True,
}


def _model(ctx: Context) -> RemoteObject:
    return call(ctx, "freeze_and_replace_head", ctx.student.new("small_cnn", 0), 5)


def _parameters(ctx: Context, model: object) -> dict:
    parameters = (
        ctx.student.describe(model).get("parameters") if isinstance(model, RemoteObject) else None
    )
    if not isinstance(parameters, dict):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": "`freeze_and_replace_head(model, 5)`",
                    "expected_type": "nn.Module",
                    "got_type": getattr(model, "type_name", type(model).__name__),
                    "hint": {
                        "en": "Return the model (`return model`) once its head is replaced.",
                        "es": "Devuelve el modelo (`return model`) una vez sustituida su cabeza.",
                    },
                },
            )
        )
    if set(parameters) != set(TRAINABLE):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": {
                        "en": "The list of the model's parameters",
                        "es": "La lista de parámetros del modelo",
                    },
                    "got": sorted(parameters),
                    "expected": sorted(TRAINABLE),
                    "worst_index": [],
                    "hint": HEAD_HINT,
                },
            )
        )
    return parameters


@check(
    "trainable",
    points=1,
    uses="freeze_and_replace_head",
    en="only the new head requires grad: one SGD step over every parameter moves only it",
    es="solo la nueva cabeza requiere gradiente: un paso de SGD sobre todos los parámetros "
    "solo la mueve a ella",
)
def trainable(ctx: Context) -> None:
    model = _model(ctx)
    before = _parameters(ctx, model)
    images, labels = ctx.student.put((torch.ones(2, 3, 16, 16), torch.tensor([0, 4])))
    ctx.student.new("step_all", model, images, labels, 0.5)
    after = _parameters(ctx, model)
    for name, parameter in after.items():
        moved = not torch.equal(before[name].value, parameter.value)
        if moved is not TRAINABLE[name]:
            raise Fail(
                Diagnostic(
                    "requires-grad-wrong",
                    {"what": f"`model.{name}`", "got": moved, "expected": TRAINABLE[name]},
                )
            )


@check(
    "head-shape",
    points=1,
    uses="freeze_and_replace_head",
    en="with 5 classes, `model.fc` has a 5 × 512 weight and a bias of 5",
    es="con 5 clases, `model.fc` tiene un peso de 5 × 512 y un sesgo de 5",
)
def head_shape(ctx: Context) -> None:
    parameters = _parameters(ctx, _model(ctx))
    for name, shape in (("fc.weight", [5, 512]), ("fc.bias", [5])):
        if list(parameters[name].shape) != shape:
            raise Fail(
                Diagnostic(
                    "shape-mismatch",
                    {
                        "what": f"`model.{name}`",
                        "got": list(parameters[name].shape),
                        "expected": shape,
                        "hint": HEAD_HINT,
                    },
                )
            )


@check(
    "optimizer",
    points=1,
    uses=("freeze_and_replace_head", "make_optimizer"),
    en="make_optimizer: SGD, lr 1e-2, momentum 0.9",
    es="make_optimizer: SGD, lr 1e-2, momento 0.9",
)
def optimizer(ctx: Context) -> None:
    optimizer = call(ctx, "make_optimizer", _model(ctx))
    described = ctx.student.describe(optimizer) if isinstance(optimizer, RemoteObject) else {}
    got = (
        described.get("class"),
        *[(g.get("lr"), g.get("momentum")) for g in described.get("param_groups", [])],
    )
    if got[0] != "SGD" or any(group != (0.01, 0.9) for group in got[1:]):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": {
                        "en": "The class and (lr, momentum) of `make_optimizer(model)`",
                        "es": "La clase y (lr, momentum) de `make_optimizer(model)`",
                    },
                    "got": got,
                    "expected": ("SGD", (0.01, 0.9)),
                    "worst_index": [],
                    "hint": {
                        "en": "Return `torch.optim.SGD(..., lr=1e-2, momentum=0.9)`.",
                        "es": "Devuelve `torch.optim.SGD(..., lr=1e-2, momentum=0.9)`.",
                    },
                },
            )
        )


@check(
    "one-step",
    points=1,
    uses=("freeze_and_replace_head", "make_optimizer"),
    en="a training step changes `model.fc` and nothing else",
    es="un paso de entrenamiento cambia `model.fc` y nada más",
)
def one_step(ctx: Context) -> None:
    model = _model(ctx)
    before = _parameters(ctx, model)
    images, labels = ctx.student.put((torch.ones(2, 3, 16, 16), torch.tensor([0, 4])))
    ctx.student.new("train", model, call(ctx, "make_optimizer", model), images, labels, 1)
    for name, parameter in _parameters(ctx, model).items():
        change = float((parameter.value - before[name].value).abs().max())
        if not TRAINABLE[name] and change > 0:
            raise Fail(Diagnostic("frozen-param-changed", {"what": f"`model.{name}`"}))
        if TRAINABLE[name] and change == 0:
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": {
                            "en": f"How much `model.{name}` changed in a training step",
                            "es": f"Cuánto cambió `model.{name}` en un paso de entrenamiento",
                        },
                        "got": change,
                        "expected": "> 0",
                        "worst_index": [],
                        "hint": {
                            "en": "The new head did not learn: give `make_optimizer`'s SGD its parameters.",
                            "es": "La nueva cabeza no aprendió: dale sus parámetros al SGD de "
                            "`make_optimizer`.",
                        },
                    },
                )
            )
