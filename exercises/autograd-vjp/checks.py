"""Hidden checks for autograd-vjp: z = 2·(x + 2)² backward with a cotangent v, and the Jacobian of
softmax built one row per backward pass of a one-hot cotangent."""

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteTensor,
    call,
    check,
    expect_close,
    expect_grad,
    expect_tensor,
    refuse_hand_written_grads,
)
from worker.harness.diagnostics import close

# a cotangent that is not all ones, and not a multiple of ones
VJP_FIXED = (torch.tensor([-1.0, 0.5, 2.0, -3.0]), torch.tensor([1.0, -2.0, 0.5, 3.0]))
JACOBIAN_FIXED = torch.tensor([1.0, 2.0, 0.5, -1.0], dtype=torch.float64)
# exp(x) is inf in float32 above about 88.7: a softmax written as exp(x) / exp(x).sum() gives NaN
# the other class of inputs vjp takes (2-D, float64), before the random ones
VJP_FIXED_2D = (
    torch.tensor([[0.5, -2.5, 1.0], [-1.5, 3.0, 0.25]], dtype=torch.float64),
    torch.tensor([[2.0, -1.0, 0.5], [1.5, -0.5, -3.0]], dtype=torch.float64),
)
LARGE = torch.tensor([100.0, 99.0, 97.5, 90.0])
FLOAT32 = {"rtol": 1e-4, "atol": 1e-6}
ACCUMULATED_HINT = {
    "en": "`x.grad` adds up across `backward()` calls: set `x.grad = None` before each row, so "
    "that row i is the gradient of output i alone.",
    "es": "`x.grad` se acumula entre llamadas a `backward()`: pon `x.grad = None` antes de cada "
    "fila, para que la fila i sea solo el gradiente de la salida i.",
}
OVERFLOW_HINT = {
    "en": "In float32, `exp(x)` overflows to inf for x above about 88, and inf / inf is NaN: "
    "subtract the maximum first, `exp(x - x.max()) / exp(x - x.max()).sum()` (the same "
    "softmax), or use `torch.softmax`.",
    "es": "En float32, `exp(x)` se desborda a inf para x por encima de 88 aproximadamente, e "
    "inf / inf es NaN: resta antes el máximo, `exp(x - x.max()) / exp(x - x.max()).sum()` "
    "(la misma softmax), o usa `torch.softmax`.",
}


NONE_GRAD_HINT = {
    "en": "`x.grad` is None until a backward pass reaches `x`: a fresh leaf has no gradient to "
    "clear, so `x.grad.zero_()` fails on it. Clear it with `x.grad = None` (which always "
    "works), or only `if x.grad is not None`.",
    "es": "`x.grad` es None hasta que un paso hacia atrás llega a `x`: una hoja recién creada no "
    "tiene gradiente que borrar, así que `x.grad.zero_()` falla con ella. Bórralo con "
    "`x.grad = None` (que siempre funciona), o solo `if x.grad is not None`.",
}
DTYPE_HINT = {
    "en": "Your Jacobian is float32 while `x` is float64: a tensor made without `dtype=` "
    "(`torch.zeros(n, n)`, `torch.empty(n, n)`) is float32, PyTorch's default, and the "
    "rows written into it are rounded to float32. Create it with `dtype=x.dtype`, or "
    "`torch.stack` the rows.",
    "es": "Tu jacobiano es float32 mientras que `x` es float64: un tensor creado sin `dtype=` "
    "(`torch.zeros(n, n)`, `torch.empty(n, n)`) es float32, el tipo por defecto de PyTorch, "
    "y las filas que escribes en él se redondean a float32. Créalo con `dtype=x.dtype`, o "
    "apila las filas con `torch.stack`.",
}
FIRST_ROW_MISSING = {
    "en": "Your Jacobian has rows 1 to n − 1 of the right one: row 0 is missing. Python counts "
    "from 0: loop over `range(n)`.",
    "es": "Tu jacobiano tiene las filas 1 a n − 1 del correcto: falta la fila 0. Python cuenta "
    "desde 0: recorre `range(n)`.",
}
LAST_ROW_MISSING = {
    "en": "Your Jacobian has rows 0 to n − 2 of the right one: the last row, n − 1, is missing. "
    "`range(n)` already stops before n: loop over `range(n)`, not `range(n - 1)`.",
    "es": "Tu jacobiano tiene las filas 0 a n − 2 del correcto: falta la última fila, la n − 1. "
    "`range(n)` ya se detiene antes de n: recorre `range(n)`, no `range(n - 1)`.",
}
CAT_HINT = {
    "en": "Your result holds the n rows of the Jacobian one after another in a single vector: "
    "`torch.cat` joins them end to end, `torch.stack(rows)` makes them the rows of an "
    "(n, n) matrix.",
    "es": "Tu resultado contiene las n filas del jacobiano una tras otra en un único vector: "
    "`torch.cat` las une por los extremos, `torch.stack(rows)` las convierte en las filas "
    "de una matriz (n, n).",
}


def _none_grad(failure: Fail) -> Fail:
    """An exception from `x.grad.zero_()` on a leaf with no gradient yet, told so (the words
    come from the student's error message)."""
    out = []
    for d in failure.diagnostics:
        error = str(d.details.get("error", ""))
        if d.code == "exception" and "NoneType" in error and "zero_" in error:
            d = Diagnostic(d.code, dict(d.details, hint=NONE_GRAD_HINT))
        out.append(d)
    return Fail(*out)


def _shape_hint(got: torch.Tensor, expected: torch.Tensor) -> dict | None:
    """The hint a Jacobian of the wrong shape fits, compared with the expected one."""
    n = expected.shape[0]
    values = got.double()
    if tuple(got.shape) == (n * n,) and close(values, expected.double().flatten(), 1e-4, 1e-6):
        return CAT_HINT
    if n > 1 and tuple(got.shape) == (n - 1, n):
        if close(values, expected.double()[1:], 1e-4, 1e-6):
            return FIRST_ROW_MISSING
        if close(values, expected.double()[:-1], 1e-4, 1e-6):
            return LAST_ROW_MISSING
    return None


def _leaf(t: torch.Tensor) -> torch.Tensor:
    """A fresh leaf that requires grad: never the caller's tensor (`to` returns that one)."""
    return t.detach().clone().requires_grad_()


def _vjp(
    ctx: Context, x: torch.Tensor, v: torch.Tensor
) -> tuple[RemoteTensor, object, torch.Tensor]:
    """The student's x (a leaf), what `vjp` returned, and the expected Jᵀv."""
    expected = ctx.reference.vjp(_leaf(x), v.clone())
    remote_x, remote_v = ctx.student.put((_leaf(ctx.on_device(x)), ctx.on_device(v)))
    try:
        return remote_x, call(ctx, "vjp", remote_x, remote_v), expected
    except Fail as failure:
        raise _none_grad(failure) from None


def _expect_gradient(ctx: Context, got: object, expected: torch.Tensor, what: str | dict) -> None:
    if got is not None:
        expect_tensor(got, what, device=ctx.device)
    expect_grad(got, expected, what)


def _random_vector(ctx: Context) -> torch.Tensor:
    return ctx.randn(int(ctx.randint(2, 8, ())))


def _random_pair(ctx: Context, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    return ctx.randn(*shape), ctx.randn(*shape)


def _expect_jacobian(
    ctx: Context,
    x: torch.Tensor,
    what: str,
    nonfinite_hint: dict | None = None,
    **tolerances: float,
) -> None:
    expected = ctx.reference.softmax_jacobian(_leaf(x))
    n = x.shape[0]
    try:
        result = call(ctx, "softmax_jacobian", ctx.student.put(_leaf(ctx.on_device(x))))
    except Fail as failure:
        raise _none_grad(failure) from None
    try:
        got = expect_tensor(result, what, shape=(n, n), dtype=x.dtype, device=ctx.device)
    except Fail as failure:
        d = failure.diagnostics[0]
        hint = None
        if d.code == "shape-mismatch" and isinstance(result, RemoteTensor):
            hint = _shape_hint(result.value, expected.detach())
        elif (
            d.code == "dtype-mismatch"
            and isinstance(result, RemoteTensor)
            and result.value.dtype == torch.float32
            and x.dtype == torch.float64
        ):
            hint = DTYPE_HINT
        if hint is None:
            raise
        raise Fail(Diagnostic(d.code, dict(d.details, hint=hint))) from None
    if not bool(torch.isfinite(got.value).all()):
        raise Fail(Diagnostic("grad-nonfinite", {"what": what, "hint": nonfinite_hint}))
    tolerances = tolerances or {"rtol": 1e-5, "atol": 1e-6}
    if not close(got.value, expected, **tolerances) and close(
        got.value, expected.cumsum(0), **tolerances
    ):
        raise Fail(
            Diagnostic(
                "grad-accumulated",
                {
                    "what": {
                        "en": f"{what}, whose row i is the sum of rows 0 to i of the Jacobian,",
                        "es": f"{what}, cuya fila i es la suma de las filas 0 a i del jacobiano,",
                    },
                    # no factor: none turns J into running sums of its rows
                    "hint": ACCUMULATED_HINT,
                },
            )
        )
    expect_close(got, expected, what, **tolerances)


@check(
    "vjp-values",
    points=3,
    uses="vjp",
    en="vjp(x, v) = Jᵀv = 4·(x + 2)·v",
    es="vjp(x, v) = Jᵀv = 4·(x + 2)·v",
)
def vjp_values(ctx: Context) -> None:
    for x, v in (
        VJP_FIXED,
        VJP_FIXED_2D,
        _random_pair(ctx, (int(ctx.randint(2, 8, ())),)),
        _random_pair(ctx, tuple(int(n) for n in ctx.randint(2, 5, (2,)))),
    ):
        _, got, expected = _vjp(ctx, x, v)
        _expect_gradient(ctx, got, expected, "`vjp(x, v)`")


@check(
    "vjp-x-grad",
    points=2,
    uses="vjp",
    en="the result comes from backward(): it is x.grad",
    es="el resultado viene de backward(): es x.grad",
)
def vjp_x_grad(ctx: Context) -> None:
    for x, v in (
        VJP_FIXED,
        VJP_FIXED_2D,
        _random_pair(ctx, tuple(int(n) for n in ctx.randint(2, 5, (2,)))),
    ):
        remote_x, _, expected = _vjp(ctx, x, v)
        _expect_gradient(
            ctx,
            ctx.student.attr(remote_x, "grad"),
            expected,
            {"en": "`x.grad` after `vjp(x, v)`", "es": "`x.grad` tras `vjp(x, v)`"},
        )
    refuse_hand_written_grads(ctx, "`vjp(x, v)`")


@check(
    "jacobian-fixed",
    points=2,
    uses="softmax_jacobian",
    en="softmax Jacobian, n = 4",
    es="jacobiano de softmax, n = 4",
)
def jacobian_fixed(ctx: Context) -> None:
    _expect_jacobian(ctx, JACOBIAN_FIXED, "`softmax_jacobian(x)`")


@check(
    "jacobian-random",
    points=2,
    uses="softmax_jacobian",
    en="softmax Jacobian, random x of random length",
    es="jacobiano de softmax, x aleatorio de longitud aleatoria",
)
def jacobian_random(ctx: Context) -> None:
    for _ in range(2):
        x = _random_vector(ctx)
        _expect_jacobian(ctx, x, f"`softmax_jacobian(x)` (n = {x.shape[0]})")


@check(
    "jacobian-large-inputs",
    points=1,
    uses="softmax_jacobian",
    en="softmax Jacobian for large inputs (up to 100, float32)",
    es="jacobiano de softmax con entradas grandes (hasta 100, float32)",
)
def jacobian_large_inputs(ctx: Context) -> None:
    _expect_jacobian(
        ctx,
        LARGE,
        f"`softmax_jacobian(x)` (x = {LARGE.tolist()}, float32)",
        nonfinite_hint=OVERFLOW_HINT,
        **FLOAT32,
    )
