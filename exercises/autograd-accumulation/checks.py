"""Hidden checks for autograd-accumulation: the course's ExampleLinear trained with accumulation.

The classic mistakes all end in some wrong weight, so support.py's RecordingSGD logs, inside the
student process, every backward() gradient and the .grad found at every step(). The student can
rewrite that log: it only ever chooses which mistake a failure names. A check passes only when the
parameter itself ends where the reference's does. Each check trains once on a fixed case, on
which every known wrong program goes astray, then once on a random one.
"""
from dataclasses import dataclass, field

import torch

from worker.harness.checks import (Context, Diagnostic, Fail, RemoteTensor, call, check,
                                   expect_close)
from worker.harness.diagnostics import close, compare_grad, scale_factor, value_error_details

RTOL, ATOL = 1e-4, 1e-6
LOG_FORMAT = '("backward", 0, grad) | ("step", 0, weight, grad)'
STEPS = {"en": "the number of `step()` calls on the optimizer passed to `train_accumulated`",
         "es": "el número de llamadas a `step()` del optimizador que recibe `train_accumulated`"}
BACKWARDS = {"en": "the number of `backward()` calls before the last `optimizer.step()`",
             "es": "el número de llamadas a `backward()` antes del último `optimizer.step()`"}
OTHER_OPTIMIZER = {
    "en": "`model.weight` changed all the same: another optimizer, created in your code with its "
          "own learning rate, made the steps. Use the `optimizer` argument; do not create one.",
    "es": "Aun así, `model.weight` cambió: los pasos los dio otro optimizador, creado en tu "
          "código con su propia tasa de aprendizaje. Usa el argumento `optimizer`; no crees otro."}
ZEROED_BEFORE_STEP = {
    "en": "`.grad` was None at this `step()` although `backward()` had run since the previous "
          "one (×{count}): `optimizer.zero_grad()` came before `optimizer.step()`. Step first, "
          "then zero.",
    "es": "`.grad` era None en este `step()` aunque `backward()` se había ejecutado desde el "
          "anterior (×{count}): `optimizer.zero_grad()` fue antes que `optimizer.step()`. Primero "
          "el paso, después zero_grad."}


@dataclass(frozen=True)
class Case:
    """What one training run is given: micro-batches, accumulation steps, start weight, lr."""
    batches: list
    steps: int
    weight: float
    lr: float


# micro-batch lengths differ, so per-micro-batch means matter, and no gradient is a multiple of
# another one
ONE_WINDOW = Case([[1.0, -2.0], [0.5, 3.0, -1.0], [2.0]], 3, 0.5, 0.03)
THREE_WINDOWS = Case([[1.0, -2.0], [0.5, 3.0, -1.0], [2.0], [-1.5, 0.5], [3.0], [1.0, 1.5, -2.0]],
                     2, -0.5, 0.02)
FOUR_WINDOWS = Case([[1.0, -2.0], [0.5, 3.0, -1.0], [2.0], [-1.5, 0.5], [3.0], [1.0, 1.5, -2.0],
                     [0.25], [2.5, -0.5]], 2, 1.5, 0.04)


@dataclass
class Window:
    """The micro-batches up to one step(): their backward() gradients, then weight and .grad."""
    backward: list = field(default_factory=list)
    weight: torch.Tensor | None = None
    grad: torch.Tensor | None = None


@dataclass
class Run:
    accumulation_steps: int
    start: float
    returned: object
    parameter: RemoteTensor
    events: object
    expected_windows: list[Window]
    expected_weight: torch.Tensor


def _tensor(value: object) -> torch.Tensor | None:
    value = value.value if isinstance(value, RemoteTensor) else value
    if isinstance(value, torch.Tensor) and value.is_floating_point() and tuple(value.shape) == (1,):
        return value.detach().double()
    return None


def _windows(events: object) -> list[Window]:
    """Split the log at each step(); anything support.py would not have written is refused."""
    windows, current = [], Window()
    for index, event in enumerate(events if isinstance(events, list) else [events]):
        kind = event[:2] if isinstance(event, tuple) else None
        tensors = [_tensor(v) for v in event[2:]] if kind else []
        if kind == ("backward", 0) and len(tensors) == 1 and tensors[0] is not None:
            current.backward.append(tensors[0])
        elif kind == ("step", 0) and len(tensors) == 2 and tensors[0] is not None \
                and (tensors[1] is not None or event[3] is None):
            current.weight, current.grad = tensors
            windows.append(current)
            current = Window()
        else:
            what = f"`optimizer.events[{index}]`" if isinstance(events, list) else "`optimizer.events`"
            got = getattr(event, "type_name", type(event).__name__)
            raise Fail(Diagnostic("output-mismatch", {"what": what, "got_type": got,
                                                      "expected_type": LOG_FORMAT}))
    return windows


def _cases(ctx: Context, fixed: Case, fewest: int, most: int):
    """The fixed case, then a random one with `fewest` to `most` windows."""
    yield Case([torch.tensor(b) for b in fixed.batches], fixed.steps, fixed.weight, fixed.lr)
    windows = int(ctx.randint(fewest, most + 1, ()))
    steps = int(ctx.randint(2, 5, ()))
    sizes = ctx.randint(1, 7, (windows * steps,)).tolist()
    batches = [ctx.randn(n, dtype=torch.float32) for n in sizes]
    weight = float(torch.rand((), generator=ctx.rng)) * 2.5 - 1.0
    yield Case(batches, steps, weight, 0.01 + 0.04 * float(torch.rand((), generator=ctx.rng)))


def _train(ctx: Context, case: Case) -> Run:
    model = ctx.support.ExampleLinear(case.weight)
    optimizer = ctx.support.RecordingSGD(model.parameters(), case.lr)
    ctx.reference.train_accumulated(model, optimizer, [b.clone() for b in case.batches],
                                    case.steps)

    # The CPU on purpose: the exercise asks for no GPU, and support.py builds the model there.
    remote_model = ctx.student.new("ExampleLinear", case.weight)
    parameter = ctx.student.attr(remote_model, "weight")
    remote_optimizer = ctx.student.new("RecordingSGD", [parameter], case.lr)
    returned = call(ctx, "train_accumulated", remote_model, remote_optimizer,
                    ctx.student.put(case.batches), case.steps)
    return Run(case.steps, case.weight, returned, ctx.student.attr(parameter, "data"),
               ctx.student.attr(remote_optimizer, "events"),
               _windows(optimizer.events), model.weight.detach().clone())


def _gradient_at_step(run: Run, windows: list[Window], k: int) -> Diagnostic | None:
    """Why step() k went wrong, given that every earlier one was right."""
    got, want = windows[k - 1], run.expected_windows[k - 1]
    steps, total = run.accumulation_steps, len(run.expected_windows)
    where = f"(`optimizer.step()` {k}/{total})"
    if not close(got.weight, want.weight, RTOL, ATOL):
        return Diagnostic("output-mismatch", {"what": f"`model.weight` {where}",
                                              **value_error_details(got.weight, want.weight)})
    if want.grad is None:  # a wrong program standing in for the reference zeroed it first
        return None if got.grad is None else Diagnostic("grad-mismatch", {
            "what": f"`model.weight.grad` {where}"})
    diagnostic = compare_grad(got.grad, want.grad, f"`model.weight.grad` {where}",
                              rtol=RTOL, atol=ATOL)
    if diagnostic and diagnostic.code == "grad-none" and got.backward:
        return Diagnostic("grad-none", dict(diagnostic.details, count=len(got.backward),
                                            hint=ZEROED_BEFORE_STEP))
    if diagnostic and diagnostic.code in ("grad-none", "grad-nonfinite"):
        return diagnostic
    if len(got.backward) != len(want.backward):
        # A right .grad from one backward() of the summed losses still kept every graph alive.
        name, actual, expected = ("`backward()` 1", got.backward[0], want.backward[0]) \
            if diagnostic is None and got.backward else ("`model.weight.grad`", got.grad, want.grad)
        return Diagnostic("grad-mismatch", {
            "what": f"{name} (`optimizer.step()` {k}/{total}: `backward()` ×{len(got.backward)},"
                    f" `accumulation_steps` = {steps})", **value_error_details(actual, expected)})
    if diagnostic is None:
        return None
    factor = round(scale_factor(got.grad, want.grad) or 0.0, 3)
    previous = windows[k - 2].grad if k > 1 else None
    if previous is not None and close(got.grad, want.grad + previous, RTOL, ATOL):
        return Diagnostic("grad-accumulated", dict(diagnostic.details, factor=factor))
    if diagnostic.code == "grad-accumulated":  # an integer factor, but no earlier gradient in it
        return Diagnostic("grad-scaled", dict(diagnostic.details, factor=factor))
    return diagnostic


def _expect_training(run: Run) -> None:
    windows = _windows(run.events)
    for k in range(1, min(len(windows), len(run.expected_windows)) + 1):
        diagnostic = _gradient_at_step(run, windows, k)
        if diagnostic:
            raise Fail(diagnostic)
    made, expected = len(windows), len(run.expected_windows)
    if made < expected:
        # a weight that moved all the same was stepped by another optimizer
        moved = not torch.equal(run.parameter.value, torch.tensor([run.start]))
        raise Fail(Diagnostic("output-mismatch", {
            "what": STEPS, "got": made, "expected": expected, "worst_index": [],
            "max_abs_error": expected - made, "max_rel_error": (expected - made) / expected,
            **({"hint": OTHER_OPTIMIZER} if made == 0 and moved else {})}))
    expect_close(run.parameter, run.expected_weight, "`model.weight`", rtol=RTOL, atol=ATOL)


@check("one-window", points=3, uses="train_accumulated",
       en="one window: a `backward()` per micro-batch; at `step()`, `.grad` is the mean of their gradients",
       es="una ventana: un `backward()` por micro-lote; en `step()`, `.grad` es la media de sus gradientes")
def one_window(ctx: Context) -> None:
    for case in _cases(ctx, ONE_WINDOW, 1, 1):
        _expect_training(_train(ctx, case))


@check("several-windows", points=4, uses="train_accumulated",
       en="several windows: `.grad` starts from zero again after each `step()`",
       es="varias ventanas: `.grad` vuelve a empezar de cero tras cada `step()`")
def several_windows(ctx: Context) -> None:
    for case in _cases(ctx, THREE_WINDOWS, 3, 4):
        _expect_training(_train(ctx, case))


@check("final-weight", points=3, uses="train_accumulated",
       en="the weight returned after training", es="el peso devuelto tras el entrenamiento")
def final_weight(ctx: Context) -> None:
    for case in _cases(ctx, FOUR_WINDOWS, 3, 5):
        run = _train(ctx, case)
        expect_close(run.returned, run.expected_weight, "`train_accumulated(...)`",
                     rtol=RTOL, atol=ATOL)
        expect_close(run.parameter, run.expected_weight, "`model.weight`", rtol=RTOL, atol=ATOL)
        # the same weight from fewer backward() calls: a mistake that only looks right here
        made, expected = (sum(len(w.backward) for w in windows)
                          for windows in (_windows(run.events), run.expected_windows))
        if made != expected:
            raise Fail(Diagnostic("output-mismatch", {
                "what": BACKWARDS, "got": made, "expected": expected, "worst_index": [],
                "max_abs_error": abs(expected - made),
                "max_rel_error": abs(expected - made) / max(expected, 1)}))
