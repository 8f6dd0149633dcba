"""Hidden checks for autograd-accumulation: the course's ExampleLinear trained with accumulation.

A check passes only on values the grader reads back from the student's process: `model.weight`
after training on the first 1, 2, … windows of a case (so after every `step()`), `.grad` cleared
when `train_accumulated` returns, and the weight it returns. The gradient a wrong `step()` used is
read from how far the weight moved (plain SGD: weight −= lr · grad), against the one the
reference's step() used (RecordingSGD's log in the grader). The student's RecordingSGD log, which
the submission can rewrite, is read only to name a step() that never ran. Each check trains first
on two fixed cases, accumulation_steps 2 then 3 (a program right for one value only fails on every
seed; every known wrong program goes astray on the first or the second), then on a random one.
A wrong weight is explained by a rule (a wrong divisor, a micro-batch left out) only when the
grader's own run of that rule gives every weight read back in the check, right ones included.
"""

from dataclasses import dataclass

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteObject,
    advice,
    call,
    check,
    expect_tensor,
)
from worker.harness.diagnostics import close, short, value_error_details
from worker.harness.remote import StudentError

RTOL, ATOL = 1e-4, 1e-6
RETURNED = "`train_accumulated(...)`"
WEIGHT, GRAD = "`model.weight`", "`model.weight.grad`"
# the gradient a step used, read from float32 weights: only to name the mistake
IMPLIED_RTOL, IMPLIED_ATOL = 1e-2, 1e-3
STEPS = {
    "en": "the number of `step()` calls on the optimizer passed to `train_accumulated`",
    "es": "el número de llamadas a `step()` del optimizador que recibe `train_accumulated`",
}
OTHER_OPTIMIZER = {
    "en": "`model.weight` changed all the same: another optimizer, created in your code with its "
    "own learning rate, made the steps. Use the `optimizer` argument; do not create one.",
    "es": "Aun así, `model.weight` cambió: los pasos los dio otro optimizador, creado en tu "
    "código con su propia tasa de aprendizaje. Usa el argumento `optimizer`; no crees otro.",
}
NO_STEP = {
    "en": "Call `optimizer.step()` (of the optimizer you are given) after every "
    "`accumulation_steps` micro-batches, then `optimizer.zero_grad()`.",
    "es": "Llama a `optimizer.step()` (del optimizador que recibes) cada `accumulation_steps` "
    "micro-lotes, y después a `optimizer.zero_grad()`.",
}
ZEROED_BEFORE_STEP = {
    "en": "`model.weight` did not move at this `step()`: `.grad` was None (or zero) there, "
    "although the window's `backward()` calls had run. Most often "
    "`optimizer.zero_grad()` came before `optimizer.step()`: step first, then zero.",
    "es": "`model.weight` no se movió en este `step()`: `.grad` era None (o cero) en él, aunque "
    "los `backward()` de la ventana ya se habían ejecutado. Lo más frecuente es que "
    "`optimizer.zero_grad()` fuera antes que `optimizer.step()`: primero el paso, después "
    "zero_grad.",
}
MEAN_HINT = {
    "en": "At each `step()`, `.grad` must be the mean of the window's micro-batch gradients: "
    "divide every micro-batch's loss by `accumulation_steps`, let every one reach `.grad` "
    "before `optimizer.step()`, and clear `.grad` only after the step.",
    "es": "En cada `step()`, `.grad` debe ser la media de los gradientes de los micro-lotes de la "
    "ventana: divide la pérdida de cada micro-lote entre `accumulation_steps`, haz que "
    "todas lleguen a `.grad` antes de `optimizer.step()` y borra `.grad` solo tras el paso.",
}
LEFT_OVER = {
    "en": "`.grad` still holds a gradient after the last `optimizer.step()`: call "
    "`optimizer.zero_grad()` after every `step()`, so that the next window (or the next "
    "training run) starts from zero.",
    "es": "`.grad` aún tiene un gradiente tras el último `optimizer.step()`: llama a "
    "`optimizer.zero_grad()` tras cada `step()`, para que la ventana siguiente (o el "
    "siguiente entrenamiento) empiece de cero.",
}
FINAL_HINT = {
    "en": "Each window makes one SGD step whose `.grad` is the mean of the window's micro-batch "
    "gradients; return `model.weight` at the end.",
    "es": "Cada ventana da un paso de SGD cuyo `.grad` es la media de los gradientes de sus "
    "micro-lotes; devuelve `model.weight` al final.",
}


NOT_DIVIDED = {
    "en": "`.grad` at this step is `accumulation_steps` ({k}) times the expected one: the sum of "
    "the window's micro-batch gradients, not their mean, which is what losses not divided "
    "by `accumulation_steps` give. Divide each micro-batch's loss by `accumulation_steps` "
    "before its `backward()`.",
    "es": "El `.grad` de este paso es `accumulation_steps` ({k}) veces el esperado: la suma de "
    "los gradientes de los micro-lotes de la ventana, no su media, que es lo que dan unas "
    "pérdidas sin dividir entre `accumulation_steps`. Divide la pérdida de cada micro-lote "
    "entre `accumulation_steps` antes de su `backward()`.",
}
# Mistakes recognised by the whole training: the weight after every run of the case (1, 2, …
# windows) is the one the grader computes for that rule. Each hint says only what the values show.
DIVIDED_BY = {
    "en": "These are the values of dividing each micro-batch's loss by {d}{name} instead of by "
    "`accumulation_steps` ({k}), in every training the grader ran. A window has exactly "
    "`accumulation_steps` micro-batches: divide by that number.",
    "es": "Son los valores de dividir la pérdida de cada micro-lote entre {d}{name} en lugar "
    "de entre `accumulation_steps` ({k}), en todos los entrenamientos que hizo el "
    "corrector. Una ventana tiene exactamente `accumulation_steps` micro-lotes: divide "
    "entre ese número.",
}
DIVISOR_NAMES = {
    "plus_one": {"en": " (= `accumulation_steps + 1`)", "es": " (= `accumulation_steps + 1`)"},
    "minus_one": {"en": " (= `accumulation_steps - 1`)", "es": " (= `accumulation_steps - 1`)"},
    "twice": {
        "en": " (`accumulation_steps` twice, {k}·{k})",
        "es": " (dos veces `accumulation_steps`, {k}·{k})",
    },
    "all": {
        "en": " (`len(batches)`, the number of all micro-batches of that training: the mean "
        "of the whole training rather than of one window; with a single window the two "
        "agree)",
        "es": " (`len(batches)`, el número de todos los micro-lotes de ese entrenamiento: la "
        "media de todo el entrenamiento y no la de una ventana; con una sola ventana "
        "coinciden)",
    },
    "constant": {
        "en": " (a fixed number: the same for every `accumulation_steps` the grader tried, {ks})",
        "es": " (un número fijo: el mismo para todos los `accumulation_steps` que probó "
        "el corrector, {ks})",
    },
    "": {"en": "", "es": ""},
}
SCALED_BY = {
    "en": "The factor is the same at every step of every training the grader ran: each window's "
    "micro-batch gradients all reach `.grad`, but scaled by {s:.4g} instead of "
    "`1/accumulation_steps` = {r:.4g}. Divide each micro-batch's loss by "
    "`accumulation_steps`, and scale it by nothing else.",
    "es": "El factor es el mismo en cada paso de todos los entrenamientos que hizo el corrector: "
    "todos los gradientes de los micro-lotes de cada ventana llegan a `.grad`, pero "
    "escalados por {s:.4g} en lugar de por `1/accumulation_steps` = {r:.4g}. Divide la "
    "pérdida de cada micro-lote entre `accumulation_steps` y no la escales por nada más.",
}
BY_LENGTH = {
    "en": "These are the values of dividing each micro-batch's loss by its own length `len(x)` "
    "instead of by `accumulation_steps` ({k}), in every training the grader ran. The MSE "
    "is already a mean over the micro-batch's elements (`.mean()`); what is left is to "
    "divide by the number of micro-batches in a window, `accumulation_steps`.",
    "es": "Son los valores de dividir la pérdida de cada micro-lote entre su propia longitud "
    "`len(x)` en lugar de entre `accumulation_steps` ({k}), en todos los entrenamientos que "
    "hizo el corrector. El MSE ya es una media sobre los elementos del micro-lote "
    "(`.mean()`); lo que falta es dividir entre el número de micro-lotes de una ventana, "
    "`accumulation_steps`.",
}
LAST_MISSING = {
    "en": "These are the values of a training in which each `step()` leaves out the gradient of "
    "the last micro-batch of its window, in every training the grader ran: that gradient "
    "had not reached `.grad` when the step ran. Look for a loop or a slice that stops one "
    "micro-batch short (`batches[i:i + accumulation_steps - 1]`), or a `step()` that comes "
    "before the last micro-batch's `backward()`.",
    "es": "Son los valores de un entrenamiento en el que cada `step()` deja fuera el gradiente "
    "del último micro-lote de su ventana, en todos los entrenamientos que hizo el "
    "corrector: ese gradiente aún no había llegado a `.grad` cuando se dio el paso. Busca "
    "un bucle o un corte que se quede a un micro-lote del final "
    "(`batches[i:i + accumulation_steps - 1]`), o un `step()` que vaya antes del "
    "`backward()` del último micro-lote.",
}


@dataclass(frozen=True)
class Case:
    """What one training run is given: micro-batches, accumulation steps, start weight, lr."""

    batches: list
    steps: int
    weight: float
    lr: float

    @property
    def windows(self) -> int:
        return len(self.batches) // self.steps


# micro-batch lengths differ, so per-micro-batch means matter, and no gradient is a multiple of
# another one
ONE_WINDOW = Case([[1.0, -2.0], [0.5, 3.0, -1.0], [2.0]], 3, 0.5, 0.03)
THREE_WINDOWS = Case(
    [[1.0, -2.0], [0.5, 3.0, -1.0], [2.0], [-1.5, 0.5], [3.0], [1.0, 1.5, -2.0]], 2, -0.5, 0.02
)
# the same with another accumulation_steps: a program right for one value only (a divisor or a
# condition fixed to the example's 2) fails on every seed
ONE_WINDOW_OF_TWO = Case([[1.5, -0.5, 2.0], [3.0]], 2, 1.25, 0.05)
THREE_WINDOWS_OF_THREE = Case(
    [
        [2.0],
        [1.0, -1.5],
        [0.5, 2.5, -1.0],
        [-2.0, 1.0],
        [1.5],
        [3.0, 0.5],
        [-0.5, 2.0, 1.0],
        [2.5],
        [1.0, -3.0],
    ],
    3,
    0.25,
    0.03,
)
FOUR_WINDOWS_OF_THREE = Case(
    [
        [0.5, 2.0],
        [-1.0],
        [2.5, 1.0, -0.5],
        [3.0, -2.0],
        [1.5],
        [-1.0, 0.5, 2.0],
        [2.0, 2.0],
        [-0.5],
        [1.0, 3.0, -1.5],
        [0.75],
        [2.0, -1.0],
        [1.25, 0.5],
    ],
    3,
    1.75,
    0.02,
)
FOUR_WINDOWS = Case(
    [
        [1.0, -2.0],
        [0.5, 3.0, -1.0],
        [2.0],
        [-1.5, 0.5],
        [3.0],
        [1.0, 1.5, -2.0],
        [0.25],
        [2.5, -0.5],
    ],
    2,
    1.5,
    0.04,
)


@dataclass
class Expected:
    """The reference on the grader's copy: weight and .grad after the call, the .grad its last
    step() used (None if it had none), and how many steps it made."""

    weight: torch.Tensor
    grad: torch.Tensor | None
    step_grad: torch.Tensor | None
    steps: int


@dataclass
class Got:
    """The student's call: what it returned, the weight and its .grad read back afterwards, and
    the optimizer (its log is read only to name a mistake)."""

    returned: object
    weight: torch.Tensor
    grad: torch.Tensor | None
    optimizer: RemoteObject


def _cases(ctx: Context, fixed: tuple[Case, ...], fewest: int, most: int):
    """The fixed cases (accumulation_steps 2 and 3), then a random one with `fewest` to `most`
    windows."""
    for case in fixed:
        yield Case([torch.tensor(b) for b in case.batches], case.steps, case.weight, case.lr)
    windows = int(ctx.randint(fewest, most + 1, ()))
    steps = int(ctx.randint(2, 5, ()))
    sizes = ctx.randint(1, 7, (windows * steps,)).tolist()
    batches = [ctx.randn(n, dtype=torch.float32) for n in sizes]
    weight = float(torch.rand((), generator=ctx.rng)) * 2.5 - 1.0
    yield Case(batches, steps, weight, 0.01 + 0.04 * float(torch.rand((), generator=ctx.rng)))


def _reference(ctx: Context, case: Case, windows: int) -> Expected:
    model = ctx.support.ExampleLinear(case.weight)
    optimizer = ctx.support.RecordingSGD(model.parameters(), case.lr)
    ctx.reference.train_accumulated(
        model, optimizer, [b.clone() for b in case.batches[: windows * case.steps]], case.steps
    )
    steps = [event for event in optimizer.events if event[0] == "step"]
    grad = model.weight.grad
    return Expected(
        model.weight.detach().double().clone(),
        None if grad is None else grad.detach().double().clone(),
        steps[-1][3].double() if steps and steps[-1][3] is not None else None,
        len(steps),
    )


def _student(ctx: Context, case: Case, windows: int) -> Got:
    # The CPU on purpose: the exercise asks for no GPU, and support.py builds the model there.
    model = ctx.student.new("ExampleLinear", case.weight)
    parameter = expect_tensor(ctx.student.attr(model, "weight"), WEIGHT)
    optimizer = ctx.student.new("RecordingSGD", [parameter], case.lr)
    returned = call(
        ctx,
        "train_accumulated",
        model,
        optimizer,
        ctx.student.put(case.batches[: windows * case.steps]),
        case.steps,
    )
    grad = ctx.student.attr(parameter, "grad")
    weight = expect_tensor(ctx.student.attr(parameter, "data"), WEIGHT)
    return Got(
        returned,
        weight.value.double(),
        None if grad is None else expect_tensor(grad, GRAD, shape=weight.shape).value.double(),
        optimizer,
    )


def _cleared(grad: torch.Tensor | None) -> bool:
    return grad is None or not bool(grad.any())


def _steps_logged(ctx: Context, optimizer: RemoteObject) -> int | None:
    """How many step() calls the student's RecordingSGD logged; None if its log is unreadable."""
    try:
        events = ctx.student.attr(optimizer, "events")
    except StudentError:
        return None
    if not isinstance(events, list):
        return None
    return sum(isinstance(e, tuple) and e[:1] == ("step",) and e[1:2] == (0,) for e in events)


def _wrong_step(
    ctx: Context,
    case: Case,
    k: int,
    got: Got,
    want: Expected,
    before: torch.Tensor,
    previous: torch.Tensor | None,
) -> Diagnostic:
    """Why the weight after step() k is wrong, given that every earlier one was right."""
    where = {
        "en": f"`optimizer.step()` {k}/{case.windows}",
        "es": f"`optimizer.step()` {k}/{case.windows}",
    }
    if got.weight.shape != want.weight.shape:
        return Diagnostic(
            "shape-mismatch",
            {"what": "`model.weight`", "got": list(got.weight.shape), "expected": [1]},
        )
    moved = not torch.equal(got.weight, before)
    if _steps_logged(ctx, got.optimizer) == 0 and want.steps:
        return Diagnostic(
            "output-mismatch",
            {
                "what": STEPS,
                "got": 0,
                "expected": want.steps,
                "worst_index": [],
                "max_abs_error": want.steps,
                "max_rel_error": 1.0,
                "hint": OTHER_OPTIMIZER if moved else NO_STEP,
            },
        )
    what = {
        "en": f"`model.weight.grad` at {where['en']} (from how far `model.weight` moved)",
        "es": f"`model.weight.grad` en {where['es']} (según cuánto se movió `model.weight`)",
    }
    if not moved and want.step_grad is not None and bool(want.step_grad.any()):
        return Diagnostic("grad-none", {"what": what, "hint": ZEROED_BEFORE_STEP})
    if want.step_grad is None or not bool(want.step_grad.any()):
        return Diagnostic(
            "output-mismatch",
            {"what": f"`model.weight` ({where['en']})", **_numbers(got.weight, want.weight)},
        )
    implied, expected = (before - got.weight) / case.lr, want.step_grad
    factor = float(implied / expected)
    if case.steps > 1 and abs(factor - case.steps) < IMPLIED_RTOL:
        return Diagnostic(
            "grad-scaled",
            {"what": what, "factor": case.steps, "hint": _format(NOT_DIVIDED, k=case.steps)},
        )
    if previous is not None and close(implied, expected + previous, IMPLIED_RTOL, IMPLIED_ATOL):
        return Diagnostic("grad-accumulated", {"what": what, "factor": round(factor, 3)})
    if abs(factor + 1) < IMPLIED_RTOL:
        return Diagnostic("grad-sign-flipped", {"what": what})
    return Diagnostic(
        "grad-mismatch", {"what": what, "hint": MEAN_HINT, **_numbers(implied, expected)}
    )


def _format(text: dict, **values) -> dict:
    return {lang: words.format(**values) for lang, words in text.items()}


def _simulate(case: Case, windows: int, scale) -> torch.Tensor:
    """The weight, in float64, after plain SGD on the first `windows` windows of `case` when
    micro-batch j of a window, x, of a training on n micro-batches with accumulation_steps k adds
    scale(j, x, n, k) times its loss's gradient, 2(W - 2)·mean(x²), to `.grad`."""
    batches = case.batches[: windows * case.steps]
    weight = torch.tensor([case.weight], dtype=torch.float32).double()
    for start in range(0, len(batches), case.steps):
        grad = torch.zeros(1, dtype=torch.float64)
        for j, x in enumerate(batches[start : start + case.steps]):
            grad += (
                scale(j, x, len(batches), case.steps) * 2 * (weight - 2) * (x.double() ** 2).mean()
            )
        weight = weight - case.lr * grad
    return weight


# what each micro-batch's gradient is multiplied by, (j, x, n, k) -> scale, in the rules below
DIVISORS = {
    "plus_one": lambda k: k + 1,
    "minus_one": lambda k: k - 1 if k > 1 else float("nan"),
    "twice": lambda k: k * k,
}


def _named_mistake(evidence: list, failed: int) -> tuple[str, dict, float | None] | None:
    """(code, hint, factor) for a mistake that all the weights read back show: `evidence` is the
    check's cases so far, (Case, [(windows, Got)]), the failing one last, whose first wrong run
    had `failed` windows. None if no rule fits them all."""
    case = evidence[-1][0]
    k, n = case.steps, failed * case.steps

    def fits(scale) -> bool:
        return all(
            _right(got.weight, _simulate(c, windows, scale))
            for c, runs in evidence
            for windows, got in runs
        )

    def divided(d: int, name: str, **values) -> tuple[str, dict, float]:
        return (
            "grad-scaled",
            {
                lang: DIVIDED_BY[lang].format(
                    d=d, k=k, name=DIVISOR_NAMES[name][lang].format(k=k, **values)
                )
                for lang in DIVIDED_BY
            },
            k / d,
        )

    for name, divisor in DIVISORS.items():
        if fits(lambda j, x, n, k, divisor=divisor: 1 / divisor(k)):
            return divided(divisor(k), name)
    if fits(lambda j, x, n, k: 1 / n):
        return divided(n, "all")
    if fits(lambda j, x, n, k: 1 / x.numel()):
        return "grad-mismatch", _format(BY_LENGTH, k=k), None
    if k > 1 and fits(lambda j, x, n, k: (j < k - 1) / k):
        return "grad-mismatch", LAST_MISSING, None
    # one wrong number at every step: read it from the step of the failing case's run of one
    # window (when that run is already wrong), then ask all the weights to agree
    one = [got for windows, got in evidence[-1][1] if windows == 1]
    if failed != 1 or not one or one[0].weight.shape != (1,):
        return None
    start = torch.tensor([case.weight], dtype=torch.float32).double()
    window = float(sum(2 * (start - 2) * (x.double() ** 2).mean() for x in case.batches[:k]))
    if abs(window) < 1e-6:
        return None
    scale = float(start - one[0].weight) / (case.lr * window)  # SGD moved it by lr·scale·window
    if not 0 < scale < 1e6 or abs(scale * k - 1) < IMPLIED_RTOL or abs(scale - 1) < IMPLIED_RTOL:
        return None
    d = round(1 / scale)
    if d >= 1 and abs(1 / scale - d) < 1e-3 * d and fits(lambda j, x, n, k: 1 / d):
        ks = sorted({c.steps for c, _ in evidence})
        return divided(d, "constant" if len(ks) > 1 else "", ks=", ".join(map(str, ks)))
    # a factor read from one step fits any wrong number: say it only when several steps agree
    wrong = sum(
        not _right(got.weight, _simulate(case, windows, lambda j, x, n, k: 1 / k))
        for windows, got in evidence[-1][1]
    )
    if wrong > 1 and fits(lambda j, x, n, k: scale):
        return "grad-scaled", _format(SCALED_BY, s=scale, r=1 / k), scale * k
    return None


def _named_step(evidence: list, failed: int, diagnostic: Diagnostic) -> Diagnostic:
    """`diagnostic` (a grad-mismatch at a step), or the mistake all the weights read back show."""
    named = _named_mistake(evidence, failed)
    if named is None:
        return diagnostic
    code, hint, factor = named
    if code == "grad-scaled":
        k = evidence[-1][0].steps
        windows = {
            "en": "1 window" if failed == 1 else f"{failed} windows",
            "es": "1 ventana" if failed == 1 else f"{failed} ventanas",
        }
        what = {
            "en": f"`model.weight.grad` at each `optimizer.step()` of the training on "
            f"{windows['en']} of {k} micro-batches (from how far `model.weight` moved)",
            "es": f"`model.weight.grad` en cada `optimizer.step()` del entrenamiento con "
            f"{windows['es']} de {k} micro-lotes (según cuánto se movió "
            f"`model.weight`)",
        }
        return Diagnostic("grad-scaled", {"what": what, "factor": round(factor, 4), "hint": hint})
    return Diagnostic(diagnostic.code, {**diagnostic.details, "hint": hint})


def _numbers(got: torch.Tensor, expected: torch.Tensor) -> dict:
    """The details of one wrong number (the weight is a single one)."""
    return dict(value_error_details(got, expected), worst_index=[])


def _left_over(got: Got, want: Expected) -> Diagnostic | None:
    """`.grad` when train_accumulated returns: cleared (None or zeros) when the reference's is,
    else the reference's values."""
    if _cleared(want.grad):
        if _cleared(got.grad):
            return None
    elif got.grad is not None and close(got.grad, want.grad, RTOL, ATOL):
        return None
    return Diagnostic(
        "grad-mismatch",
        {
            "what": {
                "en": "`model.weight.grad` when `train_accumulated` returns",
                "es": "`model.weight.grad` cuando `train_accumulated` termina",
            },
            "worst_index": [],
            "hint": LEFT_OVER,
            **{
                key: None if _cleared(grad) else short(float(grad))
                for key, grad in (("got", got.grad), ("expected", want.grad))
            },
        },
    )


def _right(weight: torch.Tensor, expected: torch.Tensor) -> bool:
    return weight.shape == expected.shape and close(weight, expected, RTOL, ATOL)


def _expect_training(ctx: Context, case: Case, passed: list) -> None:
    """Train on the first 1, 2, … windows: the weight after each, then the .grad left. `passed`,
    the check's cases that went right, (Case, [(windows, Got)]), is evidence to name a mistake
    by; this one joins it if it goes right."""
    runs = [(_reference(ctx, case, k), _student(ctx, case, k)) for k in range(1, case.windows + 1)]
    evidence = passed + [(case, [(windows, run[1]) for windows, run in enumerate(runs, start=1)])]
    before = torch.tensor([case.weight], dtype=torch.float32).double()
    previous = None
    for k, (want, got) in enumerate(runs, start=1):
        if not _right(got.weight, want.weight):
            diagnostic = _wrong_step(ctx, case, k, got, want, before, previous)
            if diagnostic.code == "grad-mismatch":
                diagnostic = _named_step(evidence, k, diagnostic)
            raise Fail(diagnostic)
        before, previous = got.weight, want.step_grad
    for want, got in runs:
        diagnostic = _left_over(got, want)
        if diagnostic:
            raise Fail(diagnostic)
    passed.append(evidence[-1])


@check(
    "one-window",
    points=3,
    uses="train_accumulated",
    en="one window: `model.weight` after the `step()`, and `.grad` cleared afterwards",
    es="una ventana: `model.weight` tras el `step()`, y `.grad` borrado después",
)
def one_window(ctx: Context) -> None:
    passed = []
    for case in _cases(ctx, (ONE_WINDOW_OF_TWO, ONE_WINDOW), 1, 1):
        _expect_training(ctx, case, passed)


@check(
    "several-windows",
    points=4,
    uses="train_accumulated",
    en="several windows: `model.weight` after every `step()`, and `.grad` cleared afterwards",
    es="varias ventanas: `model.weight` tras cada `step()`, y `.grad` borrado después",
)
def several_windows(ctx: Context) -> None:
    passed = []
    for case in _cases(ctx, (THREE_WINDOWS, THREE_WINDOWS_OF_THREE), 3, 4):
        _expect_training(ctx, case, passed)


@check(
    "final-weight",
    points=3,
    uses="train_accumulated",
    en="the weight returned after training",
    es="el peso devuelto tras el entrenamiento",
)
def final_weight(ctx: Context) -> None:
    passed = []
    for case in _cases(ctx, (FOUR_WINDOWS, FOUR_WINDOWS_OF_THREE), 3, 5):
        want, got = _reference(ctx, case, case.windows), _student(ctx, case, case.windows)
        evidence = passed + [(case, [(case.windows, got)])]
        returned = expect_tensor(got.returned, RETURNED, shape=tuple(want.weight.shape))
        for what, weight in ((RETURNED, returned.value), ("`model.weight`", got.weight)):
            if not _right(weight, want.weight):
                named = _named_mistake(evidence, case.windows)
                raise Fail(
                    Diagnostic(
                        "output-mismatch",
                        {
                            "what": what,
                            "hint": FINAL_HINT if named is None else named[1],
                            **_numbers(weight, want.weight),
                        },
                    )
                )
        # The .grad left is graded by the checks above; here it only tells apart wrong programs
        # whose weights agree (a zero_grad() per micro-batch leaves one, backward() only on the
        # last micro-batch does not).
        if not _cleared(want.grad):
            diagnostic = _left_over(got, want)
            if diagnostic:
                raise Fail(diagnostic)
        passed.append(evidence[-1])


ONE_BACKWARD = {
    "en": "Your code calls `backward()` once per window, on the sum of its micro-batches' "
    "losses: the values are right and the marks the same, but the graphs of all the "
    "window's micro-batches are in memory at once, just what accumulation is meant to "
    "avoid. Call `backward()` on each micro-batch's loss as soon as you have it.",
    "es": "Tu código llama a `backward()` una vez por ventana, sobre la suma de las pérdidas de "
    "sus micro-lotes: los valores son correctos y la nota es la misma, pero los grafos de "
    "todos los micro-lotes de la ventana están a la vez en memoria, justo lo que la "
    "acumulación quiere evitar. Llama a `backward()` sobre la pérdida de cada micro-lote "
    "en cuanto la tengas.",
}


@advice("one-backward-per-micro-batch", uses="train_accumulated")
def one_backward_per_micro_batch(ctx: Context) -> dict | None:
    """A single backward() per window, read from the student's RecordingSGD log (the process's
    own word, which is why this is advice and never a point): one gradient sent to the weight
    before each of the window's step()s, where there are three micro-batches."""
    case = next(_cases(ctx, (THREE_WINDOWS_OF_THREE,), 1, 1))
    got = _student(ctx, case, case.windows)
    events = ctx.student.attr(got.optimizer, "events")
    kinds = (
        [e[0] for e in events if isinstance(e, tuple) and e[1:2] == (0,)]
        if isinstance(events, list)
        else []
    )
    windows = "".join("b" if kind == "backward" else "s" for kind in kinds).split("s")[:-1]
    if len(windows) == case.windows and all(window == "b" for window in windows):
        return ONE_BACKWARD
    return None
