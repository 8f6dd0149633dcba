"""Hidden checks for metrics: accuracy (arg-max over dim 1) and mean absolute error, as floats."""
import torch

from worker.harness.checks import Context, RemoteTensor, call, check, expect_float

ACCURACY, MAE = "`accuracy(outputs, labels)`", "`mae(output, target)`"


def _batch(ctx: Context, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n rows of k class scores; about half the labels are the right class, the first one always."""
    outputs = ctx.randn(n, k, dtype=torch.float32)
    hits = ctx.randint(0, 2, (n,)).bool()
    hits[0] = True  # an accuracy of 0 must be wrong, or `max` values compared to labels would pass
    labels = torch.where(hits, outputs.argmax(dim=1), ctx.randint(0, k, (n,)))
    return outputs, labels


def _pair(ctx: Context, *shape: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return ctx.randn(*shape, dtype=dtype), ctx.randn(*shape, dtype=dtype)


def _ask(ctx: Context, name: str, x: torch.Tensor, y: torch.Tensor):
    return call(ctx, name, *ctx.student.put((ctx.on_device(x), ctx.on_device(y))))


def _value(ctx: Context, name: str, x: torch.Tensor, y: torch.Tensor, what: str, tol: float = 1e-6):
    """Compare the value; a one-element tensor counts here, the `*-float` checks judge the type."""
    got = _ask(ctx, name, x, y)
    if isinstance(got, RemoteTensor) and got.value.numel() == 1:
        got = float(got.value.reshape(()))
    expect_float(got, getattr(ctx.reference, name)(x, y), what, tol=tol)


def _type(ctx: Context, name: str, x: torch.Tensor, y: torch.Tensor, what: str):
    got = _ask(ctx, name, x, y)
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        expect_float(got, 0.0, what)  # raises output-mismatch with the type note


@check("accuracy-square", points=2, uses="accuracy", en="accuracy with as many rows as classes",
       es="accuracy con tantas filas como clases")
def accuracy_square(ctx: Context) -> None:
    n = int(ctx.randint(3, 9, ()))
    for _ in range(100):  # redraw until the arg-max over dim 0 gives another accuracy
        outputs, labels = _batch(ctx, n, n)
        if (outputs.argmax(dim=0) == labels).sum() != (outputs.argmax(dim=1) == labels).sum():
            break
    _value(ctx, "accuracy", outputs, labels, ACCURACY)


@check("accuracy-batch", points=2, uses="accuracy", en="accuracy of a random batch",
       es="accuracy de un lote aleatorio")
def accuracy_batch(ctx: Context) -> None:
    n, k = int(ctx.randint(8, 33, ())), int(ctx.randint(2, 8, ()))
    _value(ctx, "accuracy", *_batch(ctx, n, k), ACCURACY)


@check("accuracy-float", points=1, uses="accuracy", en="accuracy returns a Python float",
       es="accuracy devuelve un float de Python")
def accuracy_float(ctx: Context) -> None:
    _type(ctx, "accuracy", *_batch(ctx, 10, 4), ACCURACY)


@check("mae-vector", points=2, uses="mae", en="mae of two vectors", es="mae de dos vectores")
def mae_vector(ctx: Context) -> None:
    # float32 sums in another order (or on a GPU) differ in the last digits
    _value(ctx, "mae", *_pair(ctx, int(ctx.randint(16, 65, ())), dtype=torch.float32), MAE, tol=1e-5)


@check("mae-matrix", points=2, uses="mae", en="mae of two float64 matrices",
       es="mae de dos matrices float64")
def mae_matrix(ctx: Context) -> None:
    shape = (int(n) for n in ctx.randint(4, 10, (2,)))
    _value(ctx, "mae", *_pair(ctx, *shape, dtype=torch.float64), MAE)


@check("mae-float", points=1, uses="mae", en="mae returns a Python float",
       es="mae devuelve un float de Python")
def mae_float(ctx: Context) -> None:
    _type(ctx, "mae", *_pair(ctx, 8, dtype=torch.float32), MAE)
