"""Hidden checks: each draws its inputs from ctx.rng and takes its expected values from
ctx.reference, so that a known wrong program can stand in for the reference."""

from worker.harness.checks import (
    Context,
    Fail,
    call,
    check,
    diagnose_exception,
    expect_close,
    expect_grad,
)
from worker.harness.remote import StudentError


def _case(ctx: Context, shape: tuple[int, ...]):
    x, c = ctx.randn(*shape), float(ctx.randint(2, 6, ()))
    reference_x = x.clone().requires_grad_()
    expected = ctx.reference.scaled_square(reference_x, c)
    expected.sum().backward()
    (sent,) = ctx.student.put((ctx.on_device(x).requires_grad_(),))
    return sent, c, expected.detach(), reference_x.grad


@check("values", points=4, uses="scaled_square", en="the values c·x²", es="los valores c·x²")
def values(ctx: Context) -> None:
    x, c, expected, _ = _case(ctx, (5,))
    expect_close(call(ctx, "scaled_square", x, c), expected, "`scaled_square(x, c)`")


@check("gradient", points=6, uses="scaled_square", en="the gradient 2·c·x", es="el gradiente 2·c·x")
def gradient(ctx: Context) -> None:
    x, c, _, expected_grad = _case(ctx, (3, 4))
    out = call(ctx, "scaled_square", x, c)
    # by behaviour, never by the flags the student's process reports (out.claims): a detached
    # output makes backward() raise, which diagnose_exception names detached-output
    try:
        ctx.student.method(ctx.student.method(out, "sum"), "backward")
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, "`scaled_square(x, c).sum()`")) from None
    expect_grad(ctx.student.attr(x, "grad"), expected_grad, "x.grad")
