"""Hidden checks for training-step: consecutive SGD steps of a small network.

A check passes only on values the grader reads back after every call of train_step: each
parameter, the reference's, and its .grad, the reference's or cleared where the reference's is the
one its step() used (the statement allows clearing after `optimizer.step()`), or the value
returned. support.py's RecordingSGD logs, inside the student process, when each backward() reaches
a parameter and the .grad each step() finds; that log, which the submission can rewrite, only
chooses which mistake a failure names.
"""

from dataclasses import dataclass

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteObject,
    RemoteTensor,
    call,
    check,
    expect_float,
)
from worker.harness.diagnostics import (
    close,
    compare_grad,
    compare_values,
    scale_factor,
    value_error_details,
)
from worker.harness.remote import StudentError

RTOL, ATOL = 1e-5, 1e-6
FIXED_SEED = 4  # a batch of 5 rows: a factor of the batch size is not one of the 3 outputs
SUM_HINT = {
    "en": "The loss is `(prediction - labels).sum()`: a sum, not a mean, and not scaled; any "
    "factor in the loss multiplies every gradient.",
    "es": "La pérdida es `(prediction - labels).sum()`: una suma, no una media, y sin escalar; "
    "cualquier factor en la pérdida multiplica todos los gradientes.",
}
CLEARED_HINT = {
    "en": "The gradient was cleared before it was used: `zero_grad()` ran between "
    "`loss.backward()` and `optimizer.step()`. Clear it at the start of the step, or after "
    "`optimizer.step()`.",
    "es": "El gradiente se borró antes de usarlo: `zero_grad()` se ejecutó entre `loss.backward()` "
    "y `optimizer.step()`. Bórralo al principio del paso o después de `optimizer.step()`.",
}
STEP_FIRST_HINT = {
    "en": "`optimizer.step()` ran before this call's `loss.backward()`, so it did not use this "
    "batch's gradient: call `loss.backward()` first, then `optimizer.step()`.",
    "es": "`optimizer.step()` se ejecutó antes del `loss.backward()` de esta llamada, así que no "
    "usó el gradiente de este lote: llama primero a `loss.backward()` y después a "
    "`optimizer.step()`.",
}
INPLACE_HINT = {
    "en": "A tensor the backward pass needs changed in place between the forward pass and "
    "`loss.backward()`: most often `optimizer.step()`, which updates the parameters in "
    "place, ran before `loss.backward()`. Call `loss.backward()` first, then "
    "`optimizer.step()`.",
    "es": "Un tensor que necesita el paso hacia atrás cambió «in situ» entre el paso hacia "
    "delante y `loss.backward()`: casi siempre porque `optimizer.step()`, que actualiza "
    "los parámetros «in situ», se ejecutó antes de `loss.backward()`. Llama primero a "
    "`loss.backward()` y después a `optimizer.step()`.",
}
SCALAR_LOSS_HINT = {
    "en": "The loss must be a single number: `(prediction - labels).sum()`, summed over every "
    "element, with no `dim=`. A loss that keeps one value per row or per output (such as "
    "`.sum(dim=0)`) is not a scalar, and its `backward()` asks for `gradient=`.",
    "es": "La pérdida debe ser un solo número: `(prediction - labels).sum()`, sumada sobre todos "
    "los elementos, sin `dim=`. Una pérdida que conserva un valor por fila o por salida "
    "(como `.sum(dim=0)`) no es un escalar, y su `backward()` pide `gradient=`.",
}
STEP_HINT = {
    "en": "Each call makes one SGD step on its own batch: clear the gradients, "
    "`loss.backward()`, then `optimizer.step()` of the optimizer passed to `train_step`.",
    "es": "Cada llamada da un paso de SGD con su propio lote: borra los gradientes, "
    "`loss.backward()` y después `optimizer.step()` del optimizador que recibe "
    "`train_step`.",
}
UPDATE_HINT = {
    "en": "The gradients were right but the update was not: let `optimizer.step()` of the "
    "optimizer passed to `train_step` update the parameters, and nothing else.",
    "es": "Los gradientes eran correctos pero la actualización no: deja que `optimizer.step()` del "
    "optimizador que recibe `train_step` actualice los parámetros, y nada más.",
}
STEP_COUNT_HINTS = {
    "other": {
        "en": "The parameters changed, but not through the optimizer passed to "
        "`train_step`: update them with that optimizer's `step()` (do not build "
        "another optimizer or change them by hand).",
        "es": "Los parámetros cambiaron, pero no mediante el optimizador que recibe "
        "`train_step`: actualízalos con el `step()` de ese optimizador (no crees otro "
        "optimizador ni los cambies a mano).",
    },
    "none": {
        "en": "`train_step` must call `optimizer.step()` once, after `loss.backward()`.",
        "es": "`train_step` debe llamar a `optimizer.step()` una vez, después de "
        "`loss.backward()`.",
    },
    "many": {
        "en": "`train_step` must call `optimizer.step()` exactly once.",
        "es": "`train_step` debe llamar a `optimizer.step()` exactamente una vez.",
    },
}


# Losses other than the statement's, recognised by their values: the gradients at step() (from the
# student's log: words only) or the loss returned equal, within tolerance, those of one of these,
# computed here on the grader's own copy of the network. (name, code, loss of (prediction, labels))
WRONG_LOSSES = (
    ("squared", "grad-mismatch", lambda p, l: ((p - l) ** 2).sum()),
    ("mse", "grad-mismatch", lambda p, l: ((p - l) ** 2).mean()),
    ("abs", "grad-mismatch", lambda p, l: (p - l).abs().sum()),
    ("mean", "grad-scaled", lambda p, l: (p - l).mean()),
    ("broadcast", "grad-scaled", lambda p, l: (p - l.unsqueeze(1)).sum()),
)
WRONG_LOSS_HINTS = {
    "squared": {
        "en": "These are the values of `((prediction - labels) ** 2).sum()`, the squared error: "
        "the loss of this exercise is `(prediction - labels).sum()`, with no square.",
        "es": "Son los valores de `((prediction - labels) ** 2).sum()`, el error cuadrático: la "
        "pérdida de este ejercicio es `(prediction - labels).sum()`, sin cuadrado.",
    },
    "mse": {
        "en": "These are the values of `((prediction - labels) ** 2).mean()`, the mean squared "
        "error: the loss of this exercise is `(prediction - labels).sum()`, with no square "
        "and no mean.",
        "es": "Son los valores de `((prediction - labels) ** 2).mean()`, el error cuadrático "
        "medio: la pérdida de este ejercicio es `(prediction - labels).sum()`, sin "
        "cuadrado ni media.",
    },
    "abs": {
        "en": "These are the values of `(prediction - labels).abs().sum()`, the absolute error: "
        "the loss of this exercise is `(prediction - labels).sum()`, with no `abs()`.",
        "es": "Son los valores de `(prediction - labels).abs().sum()`, el error absoluto: la "
        "pérdida de este ejercicio es `(prediction - labels).sum()`, sin `abs()`.",
    },
    "mean": {
        "en": "These are the values of `(prediction - labels).mean()`: a mean divides by the "
        "number of elements, {n} here ({b}×3). The loss is the sum, "
        "`(prediction - labels).sum()`.",
        "es": "Son los valores de `(prediction - labels).mean()`: una media divide entre el "
        "número de elementos, {n} aquí ({b}×3). La pérdida es la suma, "
        "`(prediction - labels).sum()`.",
    },
    "broadcast": {
        "en": "These are {b} times (the batch size) the expected values: those of `prediction` "
        "and `labels` broadcast to ({b}, {b}, 3) and summed, every prediction row against "
        "every label row, as when one of them gets an extra dimension "
        "(`labels.unsqueeze(1)`, `labels[:, None]`). Both have shape ({b}, 3): subtract "
        "them as they are.",
        "es": "Son {b} veces (el tamaño del lote) los valores esperados: los de `prediction` y "
        "`labels` difundidos (broadcast) a ({b}, {b}, 3) y sumados, cada fila de "
        "predicciones contra cada fila de etiquetas, como cuando uno de los dos recibe una "
        "dimensión de más (`labels.unsqueeze(1)`, `labels[:, None]`). Los dos tienen forma "
        "({b}, 3): réstalos tal como están.",
    },
}


def _wrong_losses(ctx: Context, case: "Case", k: int, parameters: dict) -> list:
    """(name, code, loss value, {parameter: gradient}) of each of WRONG_LOSSES for call k of
    `case`, on the grader's copy of the network with `parameters` (those before the call)."""
    model = ctx.support.tiny_net(case.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(parameters[name])
    data, labels = case.batches[k - 1]
    found = []
    for name, code, loss_of in WRONG_LOSSES:
        if name == "broadcast" and len(data) == 1:
            continue  # one row: the same as the right loss
        loss = loss_of(model(data), labels)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        found.append(
            (
                name,
                code,
                float(loss.detach()),
                {n: g for (n, _), g in zip(model.named_parameters(), grads)},
            )
        )
    return found


def _wrong_loss_hint(name: str, batch: int) -> dict:
    return {
        lang: text.format(n=3 * batch, b=batch) for lang, text in WRONG_LOSS_HINTS[name].items()
    }


@dataclass
class Case:
    seed: int
    lr: float
    momentum: float
    batches: list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class Call:
    """What one call of train_step did, as the optimizer's log tells it."""

    steps: int
    backward_first: bool  # a backward() reached the parameters before the first step()
    grads: list  # each parameter's .grad at the first step(); None where it had none


@dataclass
class Result:
    """One call of train_step: what it returned, each parameter and its .grad afterwards, and
    the log's account of the call (the student's only names a mistake; None if unreadable)."""

    returned: object
    parameters: dict[str, torch.Tensor]
    grads: dict[str, torch.Tensor | None]
    call: Call | None


def _case(generator: torch.Generator, calls: int, seed: int, lr: float, momentum: float) -> Case:
    size = int(torch.randint(2, 9, (), generator=generator))
    return Case(
        seed,
        lr,
        momentum,
        [
            (torch.randn(size, 6, generator=generator), torch.randn(size, 3, generator=generator))
            for _ in range(calls)
        ],
    )


def _cases(ctx: Context, calls: tuple[int, int]) -> list[Case]:
    """A fixed case first, so that no wrong program passes by chance, then a drawn one."""
    lr, momentum = (float(x) for x in torch.rand(2, generator=ctx.rng))
    return [
        _case(torch.Generator().manual_seed(FIXED_SEED), calls[0], FIXED_SEED, 0.05, 0.9),
        _case(
            ctx.rng, calls[1], int(ctx.randint(0, 1 << 30, ())), 0.01 + 0.09 * lr, 0.95 * momentum
        ),
    ]


def _grad(value: object) -> torch.Tensor | None | bool:
    value = value.value if isinstance(value, RemoteTensor) else value
    if value is None or isinstance(value, torch.Tensor) and value.is_floating_point():
        return value
    return False


def _call(events: object, count: int) -> Call | None:
    """Read one call's part of the log; None if support.py would not have written it."""
    if not isinstance(events, list):
        return None
    done = Call(0, False, [None] * count)
    for event in events:
        known = (
            isinstance(event, tuple)
            and len(event) in (2, 3)
            and isinstance(event[1], int)
            and 0 <= event[1] < count
        )
        if known and event[0] == "backward" and len(event) == 2:
            done.backward_first |= done.steps == 0
        elif known and event[0] == "step" and len(event) == 3 and _grad(event[2]) is not False:
            done.steps += event[1] == 0
            if done.steps == 1:
                done.grads[event[1]] = _grad(event[2])
        else:
            return None
    return done


def _expected(ctx: Context, case: Case) -> tuple[list[str], list[Result]]:
    model = ctx.support.tiny_net(case.seed)
    names = [name for name, _ in model.named_parameters()]
    optimizer = ctx.support.RecordingSGD(model.parameters(), case.lr, case.momentum)
    results = []
    for data, labels in case.batches:
        start = len(optimizer.events)
        returned = ctx.reference.train_step(model, data.clone(), labels.clone(), optimizer)
        parameters = dict(model.named_parameters())
        results.append(
            Result(
                returned,
                {n: p.detach().clone() for n, p in parameters.items()},
                {
                    n: None if p.grad is None else p.grad.detach().clone()
                    for n, p in parameters.items()
                },
                _call(optimizer.events[start:], len(names)),
            )
        )
    return names, results


def _train_step(ctx: Context, *args: object) -> object:
    try:
        return call(ctx, "train_step", *args)
    except Fail as fail:
        first = fail.diagnostics[0]
        hint = {"inplace-modified": INPLACE_HINT, "nonscalar-backward": SCALAR_LOSS_HINT}
        if first.code not in hint:
            raise
        raise Fail(Diagnostic(first.code, dict(first.details, hint=hint[first.code]))) from None


def _events(ctx: Context, optimizer: RemoteObject) -> object:
    """The student's log, or None: what the submission made of it never costs points."""
    try:
        return ctx.student.attr(optimizer, "events")
    except StudentError:
        return None


def _student(ctx: Context, case: Case, names: list[str]) -> tuple[dict, list[Result]]:
    """The student's train_step called once per batch; the parameters before the first call."""
    # The CPU on purpose: the exercise asks for no GPU, and support.py builds the model there.
    model = ctx.student.new("tiny_net", case.seed)
    optimizer = ctx.student.new(
        "RecordingSGD", ctx.student.method(model, "parameters"), case.lr, case.momentum
    )
    start, results, seen = ctx.student.describe(model, "parameters")["parameters"], [], 0
    for data, labels in case.batches:
        returned = _train_step(ctx, model, *ctx.student.put((data, labels)), optimizer)
        parameters = ctx.student.describe(model, "parameters")["parameters"]
        if sorted(parameters) != sorted(names):
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": {
                            "en": "The names of the model's parameters after `train_step`",
                            "es": "Los nombres de los parámetros del modelo tras `train_step`",
                        },
                        "got": sorted(parameters),
                        "expected": sorted(names),
                        "worst_index": [],
                        "hint": STEP_HINT,
                    },
                )
            )
        grads = {name: ctx.student.attr(p, "grad") for name, p in parameters.items()}
        events = _events(ctx, optimizer)
        logged = isinstance(events, list) and len(events) >= seen
        results.append(
            Result(
                returned,
                {name: p.value for name, p in parameters.items()},
                {name: g.value if isinstance(g, RemoteTensor) else g for name, g in grads.items()},
                _call(events[seen:], len(names)) if logged else None,
            )
        )
        seen = len(events) if logged else 0
    return {name: t.value for name, t in start.items()}, results


def _cleared(grad: torch.Tensor | None) -> bool:
    return grad is None or isinstance(grad, torch.Tensor) and not bool(grad.any())


def _left_right(got: object, want: Result, i: int, name: str) -> bool:
    """A parameter's .grad after the call: the reference's or, when the reference's is the one
    its step() used, cleared (the statement allows clearing after `optimizer.step()`)."""
    left, used = want.grads[name], want.call.grads[i]
    if _cleared(left):
        return _cleared(got)
    if isinstance(got, torch.Tensor) and got.shape == left.shape and close(got, left, RTOL, ATOL):
        return True
    return _cleared(got) and used is not None and close(left, used, RTOL, ATOL)


def _right(names: list[str], got: Result, want: Result) -> bool:
    return all(
        got.parameters[n].shape == want.parameters[n].shape
        and close(got.parameters[n], want.parameters[n], RTOL, ATOL)
        and _left_right(got.grads[n], want, i, n)
        for i, n in enumerate(names)
    )


def _grad_diagnostic(
    got: torch.Tensor | None,
    want: torch.Tensor | None,
    previous: torch.Tensor | None,
    what: dict,
    backward_first: bool,
) -> Diagnostic | None:
    if got is None and want is None:
        return None
    if want is None:
        return Diagnostic(
            "grad-mismatch", {"what": what, **value_error_details(got, torch.zeros_like(got))}
        )
    if got is None:
        return Diagnostic(
            "grad-none", {"what": what, **({"hint": CLEARED_HINT} if backward_first else {})}
        )
    diagnostic = compare_grad(got, want, what, rtol=RTOL, atol=ATOL)
    if diagnostic is None or diagnostic.code not in (
        "grad-scaled",
        "grad-accumulated",
        "grad-mismatch",
    ):
        return diagnostic
    factor = round(scale_factor(got, want) or 0.0, 3)
    if previous is not None and close(got, want + previous, RTOL, ATOL):
        return Diagnostic("grad-accumulated", dict(diagnostic.details, factor=factor))
    if diagnostic.code == "grad-mismatch":
        return diagnostic
    return Diagnostic("grad-scaled", dict(diagnostic.details, factor=factor, hint=SUM_HINT))


def _logged_mistake(
    ctx: Context,
    case: Case,
    k: int,
    names: list[str],
    got: Result,
    want: Result,
    before: dict,
    previous: list | None,
) -> Diagnostic | None:
    """The mistake the student's log shows in call k: a step() count, a step() before
    backward(), or the .grad a step() found."""
    where = {"en": f"call {k}", "es": f"llamada {k}"}
    if got.call.steps != want.call.steps:
        moved = any(not torch.equal(got.parameters[n], before[n]) for n in names)
        hint = STEP_COUNT_HINTS["many" if got.call.steps else "other" if moved else "none"]
        return Diagnostic(
            "output-mismatch",
            {
                "what": {
                    "en": f"The number of `optimizer.step()` calls in call {k} of `train_step`",
                    "es": f"El número de llamadas a `optimizer.step()` en la llamada {k} a "
                    "`train_step`",
                },
                "got": got.call.steps,
                "expected": want.call.steps,
                "worst_index": [],
                "hint": hint,
            },
        )
    named = _logged_loss(ctx, case, k, names, got, want, before, where)
    if named:
        return named
    # From the output layer back: under this loss the last bias gets the same gradient in every
    # call, so a factor found there reads plainly (2× for one gradient left over).
    for i, name in reversed(list(enumerate(names))):
        what = {
            "en": f"`model.{name}.grad` at `optimizer.step()` ({where['en']})",
            "es": f"`model.{name}.grad` en `optimizer.step()` ({where['es']})",
        }
        got_grad, want_grad = got.call.grads[i], want.call.grads[i]
        if got.call.backward_first != want.call.backward_first:
            # the reference's backward() always comes first: a step before it is the mistake
            zeros = torch.zeros(got.parameters[name].shape)
            return Diagnostic(
                "grad-mismatch",
                {
                    "what": what,
                    "hint": STEP_FIRST_HINT,
                    **value_error_details(
                        zeros if got_grad is None else got_grad,
                        zeros if want_grad is None else want_grad,
                    ),
                },
            )
        diagnostic = _grad_diagnostic(
            got_grad, want_grad, previous[i] if previous else None, what, got.call.backward_first
        )
        if diagnostic:
            return diagnostic
    return None


def _logged_loss(
    ctx: Context,
    case: Case,
    k: int,
    names: list[str],
    got: Result,
    want: Result,
    before: dict,
    where: dict,
) -> Diagnostic | None:
    """The wrong loss whose gradients, computed here at the parameters before call k, are every
    .grad the student's step() found (its log: words only); None if none is."""
    grads = got.call.grads
    if (
        got.call.steps != 1
        or not got.call.backward_first
        or any(not isinstance(g, torch.Tensor) for g in grads)
    ):
        return None
    batch = len(case.batches[k - 1][0])
    for name, code, _, expected in _wrong_losses(ctx, case, k, before):
        if all(
            g.shape == expected[n].shape and close(g, expected[n], 1e-4, 1e-5)
            for g, n in zip(grads, names)
        ):
            i, last = len(names) - 1, names[-1]
            what = {
                "en": f"`model.{last}.grad` at `optimizer.step()` ({where['en']})",
                "es": f"`model.{last}.grad` en `optimizer.step()` ({where['es']})",
            }
            details = dict(
                value_error_details(grads[i], want.call.grads[i]),
                what=what,
                hint=_wrong_loss_hint(name, batch),
            )
            if code == "grad-scaled":
                details["factor"] = round(scale_factor(grads[i], want.call.grads[i]) or 0.0, 3)
            return Diagnostic(code, details)
    return None


def _explain_call(
    ctx: Context,
    case: Case,
    k: int,
    names: list[str],
    got: Result,
    want: Result,
    before: dict,
    previous: list | None,
) -> Diagnostic:
    """Why call k went wrong, given that every earlier one was right: what the log shows if it
    shows it, else the parameters, else the .grad left after the call."""
    where = {"en": f"call {k}", "es": f"llamada {k}"}
    diagnostic = (
        _logged_mistake(ctx, case, k, names, got, want, before, previous) if got.call else None
    )
    if diagnostic:
        return diagnostic
    for name in names:
        what = {lang: f"`model.{name}` ({where[lang]})" for lang in ("en", "es")}
        diagnostic = compare_values(
            got.parameters[name], want.parameters[name], what, rtol=RTOL, atol=ATOL
        )
        if diagnostic:
            return Diagnostic(
                diagnostic.code,
                dict(diagnostic.details, hint=UPDATE_HINT if got.call else STEP_HINT),
            )
    # the parameters are right: some .grad left after the call is not
    i, name = next(
        (i, name)
        for i, name in reversed(list(enumerate(names)))
        if not _left_right(got.grads[name], want, i, name)
    )
    what = {
        "en": f"`model.{name}.grad` after {where['en']}",
        "es": f"`model.{name}.grad` tras la {where['es']}",
    }
    left = None if _cleared(got.grads[name]) else got.grads[name]
    return _grad_diagnostic(
        left, want.grads[name], previous[i] if previous else None, what, False
    ) or Diagnostic("grad-mismatch", {"what": what})


def _expect_training(ctx: Context, case: Case) -> None:
    names, expected = _expected(ctx, case)
    before, got = _student(ctx, case, names)
    previous = None
    for k, (result, want) in enumerate(zip(got, expected), start=1):
        if not _right(names, result, want):
            raise Fail(_explain_call(ctx, case, k, names, result, want, before, previous))
        before, previous = result.parameters, want.call.grads


@check(
    "first-step",
    points=3,
    uses="train_step",
    en="one call: the parameters and their `.grad` after it",
    es="una llamada: los parámetros y su `.grad` después",
)
def first_step(ctx: Context) -> None:
    for case in _cases(ctx, (1, 1)):
        _expect_training(ctx, case)


@check(
    "consecutive-steps",
    points=4,
    uses="train_step",
    en="two and three consecutive calls are independent SGD steps",
    es="dos y tres llamadas seguidas son pasos de SGD independientes",
)
def consecutive_steps(ctx: Context) -> None:
    for case in _cases(ctx, (2, 3)):
        _expect_training(ctx, case)


@check(
    "returns-loss",
    points=3,
    uses="train_step",
    en="the loss returned, as a Python float",
    es="la pérdida devuelta, como un float de Python",
)
def returns_loss(ctx: Context) -> None:
    # one call per model: the loss then depends on nothing that a wrong step could change
    for case in _cases(ctx, (1, 1)):
        names, expected = _expected(ctx, case)
        start, got = _student(ctx, case, names)
        try:
            expect_float(
                got[0].returned,
                expected[0].returned,
                "`train_step(model, data, labels, optimizer)`",
                tol=1e-5,
            )
        except Fail as fail:
            returned = got[0].returned
            wrong = fail.diagnostics[0]
            if (
                "got_type" in wrong.details
                or not isinstance(returned, (int, float))
                or isinstance(returned, bool)
            ):
                raise
            for name, _, value, _ in _wrong_losses(ctx, case, 1, start):
                if abs(returned - value) <= 1e-4 * max(1.0, abs(value)):
                    raise Fail(
                        Diagnostic(
                            wrong.code,
                            dict(
                                wrong.details, hint=_wrong_loss_hint(name, len(case.batches[0][0]))
                            ),
                        )
                    ) from None
            raise
