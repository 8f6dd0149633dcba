"""Hidden checks for autograd-finetune: freeze a small CNN, give it a new head, train only that.

Both processes build the model with support.py: the same "pretrained" weights for a seed and the
same starting values for the new head (`seed_head`), so that the student's parameters after
training compare with the reference's one by one. Every expected value comes from the
reference's two functions run on the grader's copy.

No point rests on what the student's process says about the model (its parameters'
`requires_grad`, its modules' class names) or the optimizer (its class, its param_groups): the
submission can rewrite those answers. Which parameters are frozen is read from their values after
one step of an optimizer the grader makes over every parameter (a frozen one does not move, a
trainable one moves where the reference's does); the new head from the model's output; the
optimizer from the parameters after training with it. The claims only choose a diagnostic's words.
Hints follow the same values: which old parameters moved (all, the biases only, some), a head
parameter left still while the rest of the head moved, a head weight of transposed shape.
"""

from dataclasses import dataclass, field

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteObject,
    RemoteTensor,
    call,
    check,
    diagnose_exception,
    expect_close,
    expect_tensor,
)
from worker.harness.remote import StudentError

RTOL, ATOL = 1e-4, 1e-6
PROBE_LR = 0.5  # the grader's own SGD step over every parameter, in trainable-flags
# The fixed case: 7 classes, so that a head hard-coded to 10 (or left at 1000) cannot pass.
FIXED_SEED, FIXED_CLASSES, FIXED_BATCH = 3, 7, 4
STEPS = {
    1: {"en": "one training step", "es": "un paso de entrenamiento"},
    2: {"en": "two training steps", "es": "dos pasos de entrenamiento"},
}
HYPERPARAMETERS = ("lr", "momentum", "dampening", "weight_decay", "nesterov")
HEAD_HINT = {
    "en": "Replace only `model.fc`, with `nn.Linear(512, num_classes)`: 512 inputs as the old head "
    "(`model.fc.in_features`), `num_classes` outputs, and a bias (the default).",
    "es": "Sustituye solo `model.fc`, por `nn.Linear(512, num_classes)`: 512 entradas como la "
    "cabeza anterior (`model.fc.in_features`), `num_classes` salidas y sesgo (por defecto).",
}
LEARNING_HINT = {
    "en": "The new head learns with the optimizer `make_optimizer(model)` returns: "
    "`torch.optim.SGD` with lr 1e-2 and momentum 0.9, over the new head's parameters.",
    "es": "La nueva cabeza aprende con el optimizador que devuelve `make_optimizer(model)`: "
    "`torch.optim.SGD` con lr 1e-2 y momento 0.9, sobre los parámetros de la nueva cabeza.",
}
SETTINGS_HINT = {
    "en": "`make_optimizer` returns `torch.optim.SGD` with `lr=1e-2` and `momentum=0.9`, "
    "nothing else changed.",
    "es": "`make_optimizer` devuelve `torch.optim.SGD` con `lr=1e-2` y `momentum=0.9`, sin "
    "cambiar nada más.",
}


NOT_FROZEN = {
    "all": {
        "en": "No old parameter is frozen: set `requires_grad = False` on every parameter of the "
        "model you are given (`for p in model.parameters(): p.requires_grad = False`, or "
        "`model.requires_grad_(False)`), before the new head. `model.eval()` freezes "
        "nothing, and neither does `requires_grad = False` set on a module "
        "(`layer.requires_grad = False`): that is a plain attribute its parameters never "
        "see.",
        "es": "Ningún parámetro anterior está congelado: pon `requires_grad = False` en cada "
        "parámetro del modelo que recibes (`for p in model.parameters(): "
        "p.requires_grad = False`, o `model.requires_grad_(False)`), antes de la nueva "
        "cabeza. `model.eval()` no congela nada, y tampoco `requires_grad = False` puesto "
        "en un módulo (`layer.requires_grad = False`): es un atributo cualquiera que sus "
        "parámetros nunca ven.",
    },
    "biases": {
        "en": "The old weights are frozen, but not their biases ({names}): freeze every parameter "
        "of the model, biases included (`for p in model.parameters(): "
        "p.requires_grad = False`).",
        "es": "Los pesos anteriores están congelados, pero no sus sesgos ({names}): congela todos "
        "los parámetros del modelo, sesgos incluidos (`for p in model.parameters(): "
        "p.requires_grad = False`).",
    },
    "some": {
        "en": "These old parameters are not frozen: {names}. Freeze every parameter of the model "
        "you are given (`for p in model.parameters(): p.requires_grad = False`), then "
        "replace the head.",
        "es": "Estos parámetros anteriores no están congelados: {names}. Congela todos los "
        "parámetros del modelo que recibes (`for p in model.parameters(): "
        "p.requires_grad = False`) y sustituye después la cabeza.",
    },
}
HEAD_STILL = {
    "en": "{still} did not move in {steps}, while {moved_words}: the optimizer "
    "`make_optimizer` returns does not update it (it is not among the optimizer's "
    "parameters, or it does not require grad). Give SGD every parameter of the new head, "
    "`model.fc.parameters()` (or all the model's).",
    "es": "{still} no se movió en {steps}, mientras que {moved_words}: el "
    "optimizador que devuelve `make_optimizer` no lo actualiza (no está entre los "
    "parámetros del optimizador, o no requiere gradiente). Dale a SGD todos los parámetros "
    "de la nueva cabeza, `model.fc.parameters()` (o todos los del modelo).",
}
HEAD_TRANSPOSED = {
    "en": "`model.fc.weight` has the shape of `nn.Linear({outputs}, {inputs})`: "
    "`nn.Linear(in_features, out_features)` takes the inputs first, so the new head is "
    "`nn.Linear(512, num_classes)` (its weight is (num_classes, 512)).",
    "es": "`model.fc.weight` tiene la forma de `nn.Linear({outputs}, {inputs})`: "
    "`nn.Linear(in_features, out_features)` recibe primero las entradas, así que la nueva "
    "cabeza es `nn.Linear(512, num_classes)` (su peso es (num_classes, 512)).",
}


def _names(names: list[str]) -> str:
    return ", ".join(f"`model.{name}`" for name in names)


def _not_frozen_hint(unfrozen: list[str], frozen: list[str]) -> dict:
    """Words for the old parameters that moved, `unfrozen`, of those that should not, `frozen`
    (the grader's reading of the values after a step)."""
    if set(unfrozen) == set(frozen):
        return NOT_FROZEN["all"]
    biases = [name for name in frozen if name.endswith(".bias")]
    kind = "biases" if sorted(unfrozen) == sorted(biases) else "some"
    return {lang: NOT_FROZEN[kind][lang].format(names=_names(unfrozen)) for lang in ("en", "es")}


@dataclass
class Case:
    seed: int
    num_classes: int
    images: torch.Tensor
    labels: torch.Tensor


@dataclass
class Expected:
    head_class: str
    parameters: dict[str, torch.Tensor]  # after freeze_and_replace_head and seed_head
    requires_grad: dict[str, bool]
    output: torch.Tensor
    optimizer: torch.optim.Optimizer | None = None
    trained: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass
class Got:
    model: RemoteObject
    parameters: dict[str, RemoteTensor]
    optimizer: object = None
    settings: dict = field(default_factory=dict)  # describe() of the optimizer
    trained: dict[str, RemoteTensor] = field(default_factory=dict)


def _cases(ctx: Context) -> list[Case]:
    generator = torch.Generator().manual_seed(FIXED_SEED)
    fixed = Case(
        FIXED_SEED,
        FIXED_CLASSES,
        torch.randn(FIXED_BATCH, 3, 16, 16, generator=generator),
        torch.randint(0, FIXED_CLASSES, (FIXED_BATCH,), generator=generator),
    )
    classes, batch = int(ctx.randint(2, 30, ())), int(ctx.randint(2, 9, ()))
    drawn = Case(
        int(ctx.randint(0, 1 << 30, ())),
        classes,
        ctx.randn(batch, 3, 16, 16, dtype=torch.float32),
        ctx.randint(0, classes, (batch,)),
    )
    return [fixed, drawn]


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _expected(ctx: Context, case: Case, steps: int) -> Expected:
    model = ctx.reference.freeze_and_replace_head(
        ctx.support.small_cnn(case.seed), case.num_classes
    )
    ctx.support.seed_head(model, case.seed)
    with torch.no_grad():
        output = model(case.images)
    expected = Expected(
        type(model.fc).__name__,
        _snapshot(model),
        {name: p.requires_grad for name, p in model.named_parameters()},
        output,
    )
    if steps:
        expected.optimizer = ctx.reference.make_optimizer(model)
        ctx.support.train(model, expected.optimizer, case.images, case.labels, steps)
        expected.trained = _snapshot(model)
    return expected


def _in_student(ctx: Context, name: str, *args, what: dict) -> object:
    """A support.py function run on the student's objects; its exception is the student's."""
    try:
        return ctx.student.new(name, *args)
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, what)) from None


def _described(ctx: Context, model: object) -> dict:
    """describe() of the model freeze_and_replace_head returned: its modules and parameters."""
    what = "`freeze_and_replace_head(model, num_classes)`"
    described = ctx.student.describe(model) if isinstance(model, RemoteObject) else {}
    if not isinstance(described.get("parameters"), dict):
        got = model.type_name if isinstance(model, RemoteObject) else type(model).__name__
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": what,
                    "got_type": got,
                    "expected_type": "nn.Module",
                    "hint": {
                        "en": "Return the model (`return model`) once its head is replaced.",
                        "es": "Devuelve el modelo (`return model`) una vez sustituida su cabeza.",
                    },
                },
            )
        )
    return described


def _expect_head(described: dict, expected: Expected) -> None:
    """`model.fc`'s parameters, read back with their values: the reference's names and shapes.
    (The class the process names for `model.fc` only words the hint.)"""
    modules = [m for m in described.get("modules", []) if isinstance(m, list) and len(m) == 2]
    head = dict(modules).get("fc")
    hint = (
        HEAD_HINT
        if head in (None, expected.head_class)
        else {lang: f"{text} (`model.fc`: nn.{head})" for lang, text in HEAD_HINT.items()}
    )
    got = described["parameters"]
    for name in list(expected.parameters) + [n for n in got if n not in expected.parameters]:
        what = f"`model.{name}`"
        if (name in got) != (name in expected.parameters):
            present = "nn.Parameter"
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": what,
                        "got": present if name in got else None,
                        "worst_index": [],
                        "expected": present if name in expected.parameters else None,
                        "hint": hint,
                    },
                )
            )
        if not isinstance(got[name], RemoteTensor):
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {"what": what, "got_type": "?", "expected_type": "nn.Parameter"},
                )
            )
        want = list(expected.parameters[name].shape)
        if list(got[name].shape) != want:
            shape = list(got[name].shape)
            if (
                name == "fc.weight"
                and len(want) == 2
                and shape == want[::-1]
                and want[0] != want[1]
            ):
                hint = {
                    lang: HEAD_TRANSPOSED[lang].format(outputs=want[0], inputs=want[1])
                    for lang in HEAD_TRANSPOSED
                }
            raise Fail(
                Diagnostic(
                    "shape-mismatch", {"what": what, "got": shape, "expected": want, "hint": hint}
                )
            )


def _frozen(ctx: Context, case: Case) -> Got:
    """The student's freeze_and_replace_head on a fresh model."""
    model = call(
        ctx, "freeze_and_replace_head", ctx.student.new("small_cnn", case.seed), case.num_classes
    )
    return Got(model, _described(ctx, model)["parameters"])


def _prepared(ctx: Context, case: Case, expected: Expected) -> Got:
    """The model frozen, its new head checked and given its starting values, the optimizer made."""
    got = _frozen(ctx, case)
    _expect_head(_described(ctx, got.model), expected)
    _in_student(ctx, "seed_head", got.model, case.seed, what="`seed_head(model)`")
    got.parameters = _described(ctx, got.model)["parameters"]
    got.optimizer = call(ctx, "make_optimizer", got.model)
    if not isinstance(got.optimizer, RemoteObject):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": "`make_optimizer(model)`",
                    "got_type": type(got.optimizer).__name__,
                    "expected_type": "torch.optim.Optimizer",
                    "hint": SETTINGS_HINT,
                },
            )
        )
    got.settings = _optimizer_settings(ctx, got.optimizer)
    return got


def _train(ctx: Context, got: Got, case: Case, steps: int) -> None:
    images, labels = ctx.student.put((case.images, case.labels))
    _in_student(
        ctx,
        "train",
        got.model,
        got.optimizer,
        images,
        labels,
        steps,
        what={
            lang: f"{words} (`loss.backward(); optimizer.step()`)"
            for lang, words in STEPS[steps].items()
        },
    )
    got.trained = _described(ctx, got.model)["parameters"]


def _expect_learning(got: Got, expected: Expected, steps: int, hint: dict = LEARNING_HINT) -> None:
    """The frozen parameters did not move; the trained ones are where the reference's are."""
    missing = [
        name
        for name in expected.parameters
        if name not in got.parameters or name not in got.trained
    ]
    if missing:
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": f"`model.{missing[0]}`",
                    "got": "no such parameter",
                    "expected": "a parameter",
                    "worst_index": [],
                    "hint": {
                        "en": "Keep every parameter of the model: freeze them (`requires_grad = False`), "
                        "never remove one.",
                        "es": "Conserva todos los parámetros del modelo: congélalos "
                        "(`requires_grad = False`), nunca quites ninguno.",
                    },
                },
            )
        )
    frozen = [
        name
        for name, before in expected.parameters.items()
        if torch.equal(before, expected.trained[name])
    ]
    unfrozen = [
        name
        for name in frozen
        if not torch.equal(got.parameters[name].value, got.trained[name].value)
    ]
    if unfrozen:
        raise Fail(
            Diagnostic(
                "frozen-param-changed",
                {"what": f"`model.{unfrozen[0]}`", "hint": _not_frozen_hint(unfrozen, frozen)},
            )
        )
    trained = [name for name in expected.parameters if name not in frozen]
    still = [
        name for name in trained if torch.equal(got.parameters[name].value, got.trained[name].value)
    ]
    if still and len(still) < len(trained):
        moved = [name for name in trained if name not in still]
        what = f"`model.{still[0]}`"
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": {
                        "en": f"How much {what} changed in {STEPS[steps]['en']}",
                        "es": f"Cuánto cambió {what} en {STEPS[steps]['es']}",
                    },
                    "got": 0.0,
                    "expected": "> 0",
                    "worst_index": [],
                    "hint": {
                        lang: HEAD_STILL[lang].format(
                            still=_names(still),
                            steps=STEPS[steps][lang],
                            moved_words={
                                "en": f"{_names(moved)} moved",
                                "es": f"{_names(moved)} sí se movió",
                            }[lang],
                        )
                        for lang in HEAD_STILL
                    },
                },
            )
        )
    for name in expected.parameters:
        what = f"`model.{name}`"
        expect_close(
            got.trained[name],
            expected.trained[name],
            {"en": f"{what} after {STEPS[steps]['en']}", "es": f"{what} tras {STEPS[steps]['es']}"},
            hint=hint,
            rtol=RTOL,
            atol=ATOL,
        )


@check(
    "only-head-learns",
    points=3,
    uses=("freeze_and_replace_head", "make_optimizer"),
    en="a training step changes the new head, and nothing else",
    es="un paso de entrenamiento cambia la nueva cabeza y nada más",
)
def only_head_learns(ctx: Context) -> None:
    for case in _cases(ctx):
        expected = _expected(ctx, case, steps=1)
        got = _prepared(ctx, case, expected)
        _train(ctx, got, case, steps=1)
        _expect_learning(got, expected, steps=1)


@check(
    "trainable-flags",
    points=3,
    uses="freeze_and_replace_head",
    en="only the new head requires grad (one SGD step over every parameter moves only it)",
    es="solo la nueva cabeza requiere gradiente (un paso de SGD sobre todos los parámetros "
    "solo la mueve a ella)",
)
def trainable_flags(ctx: Context) -> None:
    """One step of the grader's own SGD over every parameter, on both models: a parameter moves
    if and only if it requires grad, and a trainable one moves where the reference's does."""
    for case in _cases(ctx):
        model_ref = ctx.reference.freeze_and_replace_head(
            ctx.support.small_cnn(case.seed), case.num_classes
        )
        ctx.support.seed_head(model_ref, case.seed)
        before_ref = _snapshot(model_ref)
        ctx.support.step_all(model_ref, case.images, case.labels, PROBE_LR)
        after_ref = _snapshot(model_ref)
        got = _frozen(ctx, case)
        _in_student(ctx, "seed_head", got.model, case.seed, what="`seed_head(model)`")
        before = _described(ctx, got.model)["parameters"]
        images, labels = ctx.student.put((case.images, case.labels))
        _in_student(
            ctx,
            "step_all",
            got.model,
            images,
            labels,
            PROBE_LR,
            what={
                "en": "one SGD step over every parameter of your model",
                "es": "un paso de SGD sobre todos los parámetros de tu modelo",
            },
        )
        after = _described(ctx, got.model)["parameters"]
        for name in before_ref:
            if name not in before or name not in after:
                continue
            trainable = not torch.equal(before_ref[name], after_ref[name])
            # one that requires grad counts as moved, though it did not: a hook of the
            # submission's dropped its gradient (its `requires_grad` read by the harness)
            shifted = not torch.equal(before[name].value, after[name].value)
            moved = shifted or getattr(before[name], "claims", {}).get("requires_grad") is True
            if moved != trainable:
                frozen = [n for n in before_ref if torch.equal(before_ref[n], after_ref[n])]
                unfrozen = [
                    n
                    for n in frozen
                    if n in before
                    and n in after
                    and not torch.equal(before[n].value, after[n].value)
                ]
                hint = {"hint": _not_frozen_hint(unfrozen, frozen)} if moved else {}
                raise Fail(
                    Diagnostic(
                        "requires-grad-wrong",
                        {
                            **hint,
                            "what": {
                                "en": f"`model.{name}` (one SGD step over every parameter "
                                f"{'moved' if shifted else 'left'} it)",
                                "es": f"`model.{name}` (un paso de SGD sobre todos los parámetros "
                                f"lo {'movió' if shifted else 'dejó igual'})",
                            },
                            "got": moved,
                            "expected": trainable,
                        },
                    )
                )
            if moved and after[name].shape == after_ref[name].shape:
                expect_close(
                    after[name],
                    after_ref[name],
                    {
                        "en": f"`model.{name}` after one SGD step over every parameter",
                        "es": f"`model.{name}` tras un paso de SGD sobre todos los parámetros",
                    },
                    hint=HEAD_HINT,
                    rtol=RTOL,
                    atol=ATOL,
                )


@check(
    "new-head",
    points=2,
    uses="freeze_and_replace_head",
    en="the new head: `nn.Linear(512, num_classes)`, and the model's output",
    es="la nueva cabeza: `nn.Linear(512, num_classes)`, y la salida del modelo",
)
def new_head(ctx: Context) -> None:
    for case in _cases(ctx):
        expected = _expected(ctx, case, steps=0)
        model = _frozen(ctx, case).model
        _expect_head(_described(ctx, model), expected)
        _in_student(ctx, "seed_head", model, case.seed, what="`seed_head(model)`")
        what = "`model(images)`"
        try:
            output = ctx.student.method(model, "__call__", ctx.student.put(case.images))
        except StudentError as exc:
            raise Fail(diagnose_exception(exc.info, what)) from None
        expect_tensor(output, what, shape=expected.output.shape)
        expect_close(output, expected.output, what, rtol=RTOL, atol=ATOL)


def _same(got: object, want: object) -> bool:
    got = got.value.item() if isinstance(got, RemoteTensor) and got.value.numel() == 1 else got
    if isinstance(want, bool) or not isinstance(want, (int, float)):
        return got == want
    return (
        isinstance(got, (int, float))
        and not isinstance(got, bool)
        and abs(got - want) <= 1e-9 * max(1.0, abs(want))
    )


def _optimizer_settings(ctx: Context, optimizer: object) -> dict:
    """describe() of what make_optimizer returned: what the student's process says it is, for
    the words of a diagnostic only."""
    try:
        described = ctx.student.describe(optimizer) if isinstance(optimizer, RemoteObject) else {}
    except (StudentError, Fail):
        return {}
    return described if isinstance(described, dict) else {}


def _expect_settings(described: dict, expected: torch.optim.Optimizer) -> None:
    want_class = type(expected).__name__
    if described.get("class") != want_class:
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": {
                        "en": "The class of `make_optimizer(model)`",
                        "es": "La clase de `make_optimizer(model)`",
                    },
                    "got": f"`{described.get('class')}`",
                    "expected": f"`{want_class}`",
                    "worst_index": [],
                    "hint": SETTINGS_HINT,
                },
            )
        )
    wanted = expected.param_groups
    for index, group in enumerate(described["param_groups"]):
        want = wanted[min(index, len(wanted) - 1)]
        for key in (k for k in HYPERPARAMETERS if k in want):
            got = group.get(key) if isinstance(group, dict) else None
            if not _same(got, want[key]):
                raise Fail(
                    Diagnostic(
                        "output-mismatch",
                        {
                            "what": f"`optimizer.param_groups[{index}]['{key}']`",
                            "worst_index": [],
                            "got": got.value.tolist() if isinstance(got, RemoteTensor) else got,
                            "expected": want[key],
                            "hint": SETTINGS_HINT,
                        },
                    )
                )


@check(
    "optimizer-settings",
    points=2,
    uses=("freeze_and_replace_head", "make_optimizer"),
    en="make_optimizer: SGD, lr 1e-2, momentum 0.9 (two training steps)",
    es="make_optimizer: SGD, lr 1e-2, momento 0.9 (dos pasos de entrenamiento)",
)
def optimizer_settings(ctx: Context) -> None:
    """The parameters after two training steps with the student's optimizer are the reference's
    (momentum shows in the second). What the process says of its optimizer (class, lr,
    momentum) only words the diagnostic when they are not."""
    for case in _cases(ctx):
        expected = _expected(ctx, case, steps=2)
        got = _prepared(ctx, case, expected)
        _train(ctx, got, case, steps=2)
        try:
            _expect_learning(got, expected, steps=2)
        except Fail as fail:
            if fail.diagnostics[0].code != "output-mismatch" or not isinstance(
                got.settings.get("param_groups"), list
            ):
                raise
            try:
                _expect_settings(got.settings, expected.optimizer)
            except Fail as said:
                raise said from None
            raise
