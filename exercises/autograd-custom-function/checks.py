"""Hidden checks for autograd-custom-function: SiLU(x) = x·σ(x) as a torch.autograd.Function.

Every gradient is compared with central differences of the student's own forward, evaluated in
the student process at points chosen here and differenced here in float64.
"""
import torch

from worker.harness.checks import (Context, Diagnostic, Fail, RemoteTensor, call, check,
                                   diagnose_exception, expect_close, expect_tensor)
from worker.harness.diagnostics import compare_grad
from worker.harness.remote import StudentError

STEP = 1e-6  # float64: truncation error ~STEP², rounding error ~1e-16/STEP
FUNCTION_NODE = "SiLUBackward"  # the grad_fn class autograd names after a Function called SiLU


def _random_shape(ctx: Context) -> tuple[int, ...]:
    return tuple(int(n) for n in ctx.randint(2, 7, (2,)))


def _points(ctx: Context, shape: tuple[int, ...]) -> torch.Tensor:
    return 3 * ctx.randn(*shape, dtype=torch.float64)


def _silu(ctx: Context, x: RemoteTensor, dtype: torch.dtype | None) -> RemoteTensor:
    return expect_tensor(call(ctx, "silu", x), "`silu(x)`", shape=x.shape, dtype=dtype)


def _finite_differences(ctx: Context, x: torch.Tensor) -> torch.Tensor:
    """dSiLU/dx elementwise: SiLU acts elementwise, so one shift of every element gives them all."""
    plus, minus = ctx.student.put((ctx.on_device(x + STEP), ctx.on_device(x - STEP)))
    f_plus = _silu(ctx, plus, torch.float64).value
    f_minus = _silu(ctx, minus, torch.float64).value
    return (f_plus - f_minus) / (2 * STEP)


def _backward(ctx: Context, y: RemoteTensor, v: torch.Tensor) -> None:
    if not y.requires_grad:
        raise Fail(Diagnostic("detached-output", {"what": "`silu(x)`"}))
    try:
        ctx.student.method(y, "backward", ctx.on_device(v))
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, "`silu(x).backward(v)`")) from None


def _expect_backward(ctx: Context, x: RemoteTensor, expected: torch.Tensor, *,
                     dtype: torch.dtype = torch.float64, **tolerances: float) -> None:
    what = "`x.grad`"
    grad = ctx.student.attr(x, "grad")
    if grad is not None:
        grad = expect_tensor(grad, what, dtype=dtype).value
    diagnostic = compare_grad(grad, expected, what, **tolerances)
    if diagnostic is not None and diagnostic.code == "grad-mismatch":
        diagnostic = Diagnostic("custom-backward-mismatch", diagnostic.details)
    if diagnostic is not None:
        raise Fail(diagnostic)


@check("forward-values", points=2, uses="silu", en="forward: silu(x) = x·σ(x)",
       es="forward: silu(x) = x·σ(x)")
def forward_values(ctx: Context) -> None:
    x = _points(ctx, _random_shape(ctx))
    y = _silu(ctx, ctx.student.put(ctx.on_device(x).requires_grad_()), torch.float64)
    expect_close(y, ctx.reference.silu(x), "`silu(x)`")


@check("backward-finite-differences", points=3, uses="silu",
       en="backward agrees with finite differences of forward",
       es="backward coincide con las diferencias finitas de forward")
def backward_finite_differences(ctx: Context) -> None:
    x0 = _points(ctx, _random_shape(ctx))
    v = ctx.randn(*x0.shape, dtype=torch.float64)
    x = ctx.student.put(ctx.on_device(x0).requires_grad_())
    _backward(ctx, _silu(ctx, x, torch.float64), v)
    _expect_backward(ctx, x, v * _finite_differences(ctx, x0))


@check("graph-uses-function", points=2, uses=("silu", "SiLU"),
       en="silu(x) goes through your Function", es="silu(x) pasa por tu Function")
def graph_uses_function(ctx: Context) -> None:
    x = ctx.student.put(ctx.on_device(_points(ctx, (5,))).requires_grad_())
    y = _silu(ctx, x, None)
    names = [node["name"] for node in ctx.student.describe(y)["graph"]]
    if FUNCTION_NODE not in names:
        raise Fail(Diagnostic("custom-function-unused",
                              {"what": "`silu(x)`", "got": names[0] if names else None}))


@check("non-contiguous-input", points=1, uses="silu", en="a non-contiguous input (x.t())",
       es="una entrada no contigua (x.t())")
def non_contiguous_input(ctx: Context) -> None:
    x0 = _points(ctx, _random_shape(ctx))
    v = ctx.randn(*reversed(x0.shape), dtype=torch.float64)
    x = ctx.student.put(ctx.on_device(x0).requires_grad_())
    transposed = ctx.student.method(x, "t")
    y = _silu(ctx, transposed, torch.float64)
    expect_close(y, ctx.reference.silu(x0.t()), "`silu(x.t())`")
    _backward(ctx, y, v)
    _expect_backward(ctx, x, (v * _finite_differences(ctx, x0.t().contiguous())).t())


@check("float32", points=2, uses="silu", en="float32 in, float32 out (values and gradient)",
       es="float32 en la entrada y en la salida (valores y gradiente)")
def float32(ctx: Context) -> None:
    x0 = _points(ctx, _random_shape(ctx))
    v = ctx.randn(*x0.shape, dtype=torch.float64)
    x = ctx.student.put(ctx.on_device(x0.float()).requires_grad_())
    y = _silu(ctx, x, torch.float32)
    expect_close(y, ctx.reference.silu(x0.float()), "`silu(x)`")
    _backward(ctx, y, v.float())
    _expect_backward(ctx, x, v.float().double() * _finite_differences(ctx, x0.float().double()),
                     dtype=torch.float32, rtol=1e-4, atol=1e-5)
