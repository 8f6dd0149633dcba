"""Hidden checks for autograd-vjp: z = 2·(x + 2)² backward with a cotangent v, and the Jacobian of
softmax built one row per backward pass of a one-hot cotangent."""
import torch

from worker.harness.checks import (Context, Diagnostic, Fail, RemoteTensor, call, check,
                                   expect_close, expect_grad, expect_tensor)
from worker.harness.diagnostics import close, scale_factor

# a cotangent that is not all ones, and not a multiple of ones
VJP_FIXED = (torch.tensor([-1., 0.5, 2., -3.]), torch.tensor([1., -2., 0.5, 3.]))
JACOBIAN_FIXED = torch.tensor([1., 2., 0.5, -1.], dtype=torch.float64)
# exp(x) is inf in float32 above about 88.7: a softmax written as exp(x) / exp(x).sum() gives NaN
LARGE = torch.tensor([100., 99., 97.5, 90.])
FLOAT32 = {"rtol": 1e-4, "atol": 1e-6}
ACCUMULATED_HINT = {
    "en": "`x.grad` adds up across `backward()` calls: set `x.grad = None` before each row, so "
          "that row i is the gradient of output i alone.",
    "es": "`x.grad` se acumula entre llamadas a `backward()`: pon `x.grad = None` antes de cada "
          "fila, para que la fila i sea solo el gradiente de la salida i."}
OVERFLOW_HINT = {
    "en": "In float32, `exp(x)` overflows to inf for x above about 88, and inf / inf is NaN: "
          "subtract the maximum first, `exp(x - x.max()) / exp(x - x.max()).sum()` (the same "
          "softmax), or use `torch.softmax`.",
    "es": "En float32, `exp(x)` se desborda a inf para x por encima de 88 aproximadamente, e "
          "inf / inf es NaN: resta antes el máximo, `exp(x - x.max()) / exp(x - x.max()).sum()` "
          "(la misma softmax), o usa `torch.softmax`."}


def _leaf(t: torch.Tensor) -> torch.Tensor:
    """A fresh leaf that requires grad: never the caller's tensor (`to` returns that one)."""
    return t.detach().clone().requires_grad_()


def _vjp(ctx: Context, x: torch.Tensor,
         v: torch.Tensor) -> tuple[RemoteTensor, object, torch.Tensor]:
    """The student's x (a leaf), what `vjp` returned, and the expected Jᵀv."""
    expected = ctx.reference.vjp(_leaf(x), v.clone())
    remote_x, remote_v = ctx.student.put((_leaf(ctx.on_device(x)), ctx.on_device(v)))
    return remote_x, call(ctx, "vjp", remote_x, remote_v), expected


def _expect_gradient(ctx: Context, got: object, expected: torch.Tensor, what: str | dict) -> None:
    if got is not None:
        expect_tensor(got, what, device=ctx.device)
    expect_grad(got, expected, what)


def _random_vector(ctx: Context) -> torch.Tensor:
    return ctx.randn(int(ctx.randint(2, 8, ())))


def _random_pair(ctx: Context, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    return ctx.randn(*shape), ctx.randn(*shape)


def _expect_jacobian(ctx: Context, x: torch.Tensor, what: str,
                     nonfinite_hint: dict | None = None, **tolerances: float) -> None:
    expected = ctx.reference.softmax_jacobian(_leaf(x))
    n = x.shape[0]
    got = expect_tensor(call(ctx, "softmax_jacobian", ctx.student.put(_leaf(ctx.on_device(x)))),
                        what, shape=(n, n), dtype=x.dtype, device=ctx.device)
    if not bool(torch.isfinite(got.value).all()):
        raise Fail(Diagnostic("grad-nonfinite", {"what": what, "hint": nonfinite_hint}))
    tolerances = tolerances or {"rtol": 1e-5, "atol": 1e-6}
    if not close(got.value, expected, **tolerances) \
            and close(got.value, expected.cumsum(0), **tolerances):
        raise Fail(Diagnostic("grad-accumulated", {
            "what": {"en": f"{what}, whose row i is the sum of rows 0 to i of the Jacobian,",
                     "es": f"{what}, cuya fila i es la suma de las filas 0 a i del jacobiano,"},
            # the least-squares factor, ½ for any x (J is symmetric, its columns add up to 0):
            # the code's message needs one, though no factor turns J into running sums of rows
            "factor": round(scale_factor(got.value, expected) or 0.0, 3),
            "hint": ACCUMULATED_HINT}))
    expect_close(got, expected, what, **tolerances)


@check("vjp-values", points=3, uses="vjp", en="vjp(x, v) = Jᵀv = 4·(x + 2)·v",
       es="vjp(x, v) = Jᵀv = 4·(x + 2)·v")
def vjp_values(ctx: Context) -> None:
    for x, v in (VJP_FIXED, _random_pair(ctx, (int(ctx.randint(2, 8, ())),)),
                 _random_pair(ctx, tuple(int(n) for n in ctx.randint(2, 5, (2,))))):
        _, got, expected = _vjp(ctx, x, v)
        _expect_gradient(ctx, got, expected, "`vjp(x, v)`")


@check("vjp-x-grad", points=2, uses="vjp", en="the result comes from backward(): it is x.grad",
       es="el resultado viene de backward(): es x.grad")
def vjp_x_grad(ctx: Context) -> None:
    for x, v in (VJP_FIXED, _random_pair(ctx, tuple(int(n) for n in ctx.randint(2, 5, (2,))))):
        remote_x, _, expected = _vjp(ctx, x, v)
        _expect_gradient(ctx, ctx.student.attr(remote_x, "grad"), expected,
                         {"en": "`x.grad` after `vjp(x, v)`", "es": "`x.grad` tras `vjp(x, v)`"})


@check("jacobian-fixed", points=2, uses="softmax_jacobian", en="softmax Jacobian, n = 4",
       es="jacobiano de softmax, n = 4")
def jacobian_fixed(ctx: Context) -> None:
    _expect_jacobian(ctx, JACOBIAN_FIXED, "`softmax_jacobian(x)`")


@check("jacobian-random", points=2, uses="softmax_jacobian",
       en="softmax Jacobian, random x of random length",
       es="jacobiano de softmax, x aleatorio de longitud aleatoria")
def jacobian_random(ctx: Context) -> None:
    for _ in range(2):
        x = _random_vector(ctx)
        _expect_jacobian(ctx, x, f"`softmax_jacobian(x)` (n = {x.shape[0]})")


@check("jacobian-large-inputs", points=1, uses="softmax_jacobian",
       en="softmax Jacobian for large inputs (up to 100, float32)",
       es="jacobiano de softmax con entradas grandes (hasta 100, float32)")
def jacobian_large_inputs(ctx: Context) -> None:
    _expect_jacobian(ctx, LARGE, f"`softmax_jacobian(x)` (x = {LARGE.tolist()}, float32)",
                     nonfinite_hint=OVERFLOW_HINT, **FLOAT32)
