"""Hidden checks for autograd-accumulation: the course's ExampleLinear trained with accumulation.

A check passes only on values the grader reads back from the student's process: `model.weight`
after training on the first 1, 2, … windows of a case (so after every `step()`), `.grad` cleared
when `train_accumulated` returns, and the weight it returns. The gradient a wrong `step()` used is
read from how far the weight moved (plain SGD: weight −= lr · grad), against the one the
reference's step() used (RecordingSGD's log in the grader). The student's RecordingSGD log, which
the submission can rewrite, is read only to name a step() that never ran. Each check trains first
on a fixed case, on which every known wrong program goes astray, then on a random one.
"""
from dataclasses import dataclass

import torch

from worker.harness.checks import (Context, Diagnostic, Fail, RemoteObject, call, check,
                                   expect_tensor)
from worker.harness.diagnostics import close, short, value_error_details
from worker.harness.remote import StudentError

RTOL, ATOL = 1e-4, 1e-6
RETURNED = "`train_accumulated(...)`"
WEIGHT, GRAD = "`model.weight`", "`model.weight.grad`"
# the gradient a step used, read from float32 weights: only to name the mistake
IMPLIED_RTOL, IMPLIED_ATOL = 1e-2, 1e-3
STEPS = {"en": "the number of `step()` calls on the optimizer passed to `train_accumulated`",
         "es": "el número de llamadas a `step()` del optimizador que recibe `train_accumulated`"}
OTHER_OPTIMIZER = {
    "en": "`model.weight` changed all the same: another optimizer, created in your code with its "
          "own learning rate, made the steps. Use the `optimizer` argument; do not create one.",
    "es": "Aun así, `model.weight` cambió: los pasos los dio otro optimizador, creado en tu "
          "código con su propia tasa de aprendizaje. Usa el argumento `optimizer`; no crees otro."}
NO_STEP = {
    "en": "Call `optimizer.step()` (of the optimizer you are given) after every "
          "`accumulation_steps` micro-batches, then `optimizer.zero_grad()`.",
    "es": "Llama a `optimizer.step()` (del optimizador que recibes) cada `accumulation_steps` "
          "micro-lotes, y después a `optimizer.zero_grad()`."}
ZEROED_BEFORE_STEP = {
    "en": "`model.weight` did not move at this `step()`: `.grad` was None (or zero) there, "
          "although the window's `backward()` calls had run. Most often "
          "`optimizer.zero_grad()` came before `optimizer.step()`: step first, then zero.",
    "es": "`model.weight` no se movió en este `step()`: `.grad` era None (o cero) en él, aunque "
          "los `backward()` de la ventana ya se habían ejecutado. Lo más frecuente es que "
          "`optimizer.zero_grad()` fuera antes que `optimizer.step()`: primero el paso, después "
          "zero_grad."}
MEAN_HINT = {
    "en": "At each `step()`, `.grad` must be the mean of the window's micro-batch gradients: "
          "divide every micro-batch's loss by `accumulation_steps`, let every one reach `.grad` "
          "before `optimizer.step()`, and clear `.grad` only after the step.",
    "es": "En cada `step()`, `.grad` debe ser la media de los gradientes de los micro-lotes de la "
          "ventana: divide la pérdida de cada micro-lote entre `accumulation_steps`, haz que "
          "todas lleguen a `.grad` antes de `optimizer.step()` y borra `.grad` solo tras el paso."}
LEFT_OVER = {
    "en": "`.grad` still holds a gradient after the last `optimizer.step()`: call "
          "`optimizer.zero_grad()` after every `step()`, so that the next window (or the next "
          "training run) starts from zero.",
    "es": "`.grad` aún tiene un gradiente tras el último `optimizer.step()`: llama a "
          "`optimizer.zero_grad()` tras cada `step()`, para que la ventana siguiente (o el "
          "siguiente entrenamiento) empiece de cero."}
FINAL_HINT = {
    "en": "Each window makes one SGD step whose `.grad` is the mean of the window's micro-batch "
          "gradients; return `model.weight` at the end.",
    "es": "Cada ventana da un paso de SGD cuyo `.grad` es la media de los gradientes de sus "
          "micro-lotes; devuelve `model.weight` al final."}


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
THREE_WINDOWS = Case([[1.0, -2.0], [0.5, 3.0, -1.0], [2.0], [-1.5, 0.5], [3.0], [1.0, 1.5, -2.0]],
                     2, -0.5, 0.02)
FOUR_WINDOWS = Case([[1.0, -2.0], [0.5, 3.0, -1.0], [2.0], [-1.5, 0.5], [3.0], [1.0, 1.5, -2.0],
                     [0.25], [2.5, -0.5]], 2, 1.5, 0.04)


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


def _cases(ctx: Context, fixed: Case, fewest: int, most: int):
    """The fixed case, then a random one with `fewest` to `most` windows."""
    yield Case([torch.tensor(b) for b in fixed.batches], fixed.steps, fixed.weight, fixed.lr)
    windows = int(ctx.randint(fewest, most + 1, ()))
    steps = int(ctx.randint(2, 5, ()))
    sizes = ctx.randint(1, 7, (windows * steps,)).tolist()
    batches = [ctx.randn(n, dtype=torch.float32) for n in sizes]
    weight = float(torch.rand((), generator=ctx.rng)) * 2.5 - 1.0
    yield Case(batches, steps, weight, 0.01 + 0.04 * float(torch.rand((), generator=ctx.rng)))


def _reference(ctx: Context, case: Case, windows: int) -> Expected:
    model = ctx.support.ExampleLinear(case.weight)
    optimizer = ctx.support.RecordingSGD(model.parameters(), case.lr)
    ctx.reference.train_accumulated(model, optimizer, [b.clone() for b in
                                                       case.batches[:windows * case.steps]],
                                    case.steps)
    steps = [event for event in optimizer.events if event[0] == "step"]
    grad = model.weight.grad
    return Expected(model.weight.detach().double().clone(),
                    None if grad is None else grad.detach().double().clone(),
                    steps[-1][3].double() if steps and steps[-1][3] is not None else None,
                    len(steps))


def _student(ctx: Context, case: Case, windows: int) -> Got:
    # The CPU on purpose: the exercise asks for no GPU, and support.py builds the model there.
    model = ctx.student.new("ExampleLinear", case.weight)
    parameter = expect_tensor(ctx.student.attr(model, "weight"), WEIGHT)
    optimizer = ctx.student.new("RecordingSGD", [parameter], case.lr)
    returned = call(ctx, "train_accumulated", model, optimizer,
                    ctx.student.put(case.batches[:windows * case.steps]), case.steps)
    grad = ctx.student.attr(parameter, "grad")
    weight = expect_tensor(ctx.student.attr(parameter, "data"), WEIGHT)
    return Got(returned, weight.value.double(),
               None if grad is None else expect_tensor(grad, GRAD, shape=weight.shape).value.double(),
               optimizer)


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


def _wrong_step(ctx: Context, case: Case, k: int, got: Got, want: Expected,
                before: torch.Tensor, previous: torch.Tensor | None) -> Diagnostic:
    """Why the weight after step() k is wrong, given that every earlier one was right."""
    where = {"en": f"`optimizer.step()` {k}/{case.windows}",
             "es": f"`optimizer.step()` {k}/{case.windows}"}
    if got.weight.shape != want.weight.shape:
        return Diagnostic("shape-mismatch", {"what": "`model.weight`",
                                             "got": list(got.weight.shape), "expected": [1]})
    moved = not torch.equal(got.weight, before)
    if _steps_logged(ctx, got.optimizer) == 0 and want.steps:
        return Diagnostic("output-mismatch", {
            "what": STEPS, "got": 0, "expected": want.steps, "worst_index": [],
            "max_abs_error": want.steps, "max_rel_error": 1.0,
            "hint": OTHER_OPTIMIZER if moved else NO_STEP})
    what = {"en": f"`model.weight.grad` at {where['en']} (from how far `model.weight` moved)",
            "es": f"`model.weight.grad` en {where['es']} (según cuánto se movió `model.weight`)"}
    if not moved and want.step_grad is not None and bool(want.step_grad.any()):
        return Diagnostic("grad-none", {"what": what, "hint": ZEROED_BEFORE_STEP})
    if want.step_grad is None or not bool(want.step_grad.any()):
        return Diagnostic("output-mismatch", {"what": f"`model.weight` ({where['en']})",
                                              **_numbers(got.weight, want.weight)})
    implied, expected = (before - got.weight) / case.lr, want.step_grad
    factor = float(implied / expected)
    if case.steps > 1 and abs(factor - case.steps) < IMPLIED_RTOL:
        return Diagnostic("grad-scaled", {"what": what, "factor": case.steps})
    if previous is not None and close(implied, expected + previous, IMPLIED_RTOL, IMPLIED_ATOL):
        return Diagnostic("grad-accumulated", {"what": what, "factor": round(factor, 3)})
    if abs(factor + 1) < IMPLIED_RTOL:
        return Diagnostic("grad-sign-flipped", {"what": what})
    return Diagnostic("grad-mismatch", {"what": what, "hint": MEAN_HINT,
                                        **_numbers(implied, expected)})


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
    return Diagnostic("grad-mismatch", {
        "what": {"en": "`model.weight.grad` when `train_accumulated` returns",
                 "es": "`model.weight.grad` cuando `train_accumulated` termina"},
        "worst_index": [], "hint": LEFT_OVER,
        **{key: None if _cleared(grad) else short(float(grad))
           for key, grad in (("got", got.grad), ("expected", want.grad))}})


def _right(weight: torch.Tensor, expected: torch.Tensor) -> bool:
    return weight.shape == expected.shape and close(weight, expected, RTOL, ATOL)


def _expect_training(ctx: Context, case: Case) -> None:
    """Train on the first 1, 2, … windows: the weight after each, then the .grad left."""
    runs = [(_reference(ctx, case, k), _student(ctx, case, k)) for k in range(1, case.windows + 1)]
    before = torch.tensor([case.weight], dtype=torch.float32).double()
    previous = None
    for k, (want, got) in enumerate(runs, start=1):
        if not _right(got.weight, want.weight):
            raise Fail(_wrong_step(ctx, case, k, got, want, before, previous))
        before, previous = got.weight, want.step_grad
    for want, got in runs:
        diagnostic = _left_over(got, want)
        if diagnostic:
            raise Fail(diagnostic)


@check("one-window", points=3, uses="train_accumulated",
       en="one window: `model.weight` after the `step()`, and `.grad` cleared afterwards",
       es="una ventana: `model.weight` tras el `step()`, y `.grad` borrado después")
def one_window(ctx: Context) -> None:
    for case in _cases(ctx, ONE_WINDOW, 1, 1):
        _expect_training(ctx, case)


@check("several-windows", points=4, uses="train_accumulated",
       en="several windows: `model.weight` after every `step()`, and `.grad` cleared afterwards",
       es="varias ventanas: `model.weight` tras cada `step()`, y `.grad` borrado después")
def several_windows(ctx: Context) -> None:
    for case in _cases(ctx, THREE_WINDOWS, 3, 4):
        _expect_training(ctx, case)


@check("final-weight", points=3, uses="train_accumulated",
       en="the weight returned after training", es="el peso devuelto tras el entrenamiento")
def final_weight(ctx: Context) -> None:
    for case in _cases(ctx, FOUR_WINDOWS, 3, 5):
        want, got = _reference(ctx, case, case.windows), _student(ctx, case, case.windows)
        returned = expect_tensor(got.returned, RETURNED, shape=tuple(want.weight.shape))
        for what, weight in ((RETURNED, returned.value), ("`model.weight`", got.weight)):
            if not _right(weight, want.weight):
                raise Fail(Diagnostic("output-mismatch", {"what": what, "hint": FINAL_HINT,
                                                          **_numbers(weight, want.weight)}))
        # The .grad left is graded by the checks above; here it only tells apart wrong programs
        # whose weights agree (a zero_grad() per micro-batch leaves one, backward() only on the
        # last micro-batch does not).
        if not _cleared(want.grad):
            diagnostic = _left_over(got, want)
            if diagnostic:
                raise Fail(diagnostic)
