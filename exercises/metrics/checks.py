"""Hidden checks for metrics: accuracy (arg-max over dim 1) and mean absolute error, as floats.

Each check runs a fixed case first, on which every known wrong program gives another number
(some rows right and some wrong, no score equal to a label, errors of both signs and sizes other
than 0 and 1), then a random one. Expected values are the reference's.
"""

import torch

from worker.harness.checks import Context, Diagnostic, Fail, RemoteTensor, call, check, expect_float

ACCURACY, MAE = "`accuracy(outputs, labels)`", "`mae(output, target)`"
# arg-max over dim 1: [1, 0, 2, 3], so 3 rows of 4 are right; over dim 0: [3, 0, 2, 3] (2 of 4);
# the largest score of all is in row 0, so an arg-max without `dim` (the flat index 1) is right
# for 1 row of 4, and no maximum equals a label (0 of 4)
SQUARE = (
    [[0.1, 3.8, -1.0, 0.3], [1.5, 0.3, 0.2, -0.4], [0.0, 0.1, 3.5, 1.0], [2.0, 1.0, 0.5, 2.5]],
    [1, 0, 3, 3],
)
# arg-max over dim 1: [0, 0, 2, 1, 2, 1], so 3 rows of 6 are right (3 of K = 3 classes would be
# 1.0); the flat arg-max, 0, is right for 2 rows of 6
BATCH = (
    [
        [2.4, 1.5, -0.3],
        [2.1, 0.4, 0.9],
        [-1.0, -0.5, 0.7],
        [0.3, 0.8, 0.1],
        [1.2, -0.7, 1.9],
        [0.0, 2.2, 1.1],
    ],
    [1, 0, 1, 1, 0, 1],
)
# columns of different scales, so that a softmax over dim 0 (over the batch, per class) moves
# rows' arg-max: [0, 0, 0, 1, 0, 2] over dim 1 (3 rows of 6 right), [0, 2, 1, 1, 0, 2] after it
# (1 of 6); the flat arg-max, 0, is right for 4 rows of 6; 3 right rows over K = 3 classes is 1.0
COLUMNS_APART = (
    [
        [3.0, 0.5, 0.2],
        [2.5, 0.4, 1.8],
        [2.8, 1.1, 0.3],
        [0.1, 0.9, 0.6],
        [2.6, 0.0, 0.7],
        [0.2, 0.3, 2.9],
    ],
    [0, 0, 0, 0, 2, 1],
)
# the same, square: [0, 0, 0, 1] over dim 1 (2 rows of 4 right), [0, 2, 3, 1] after a softmax
# over dim 0 (1 of 4), [0, 2, 1, 2] over dim 0 (3 of 4)
SQUARE_COLUMNS_APART = (
    [[3.0, 0.5, 0.2, 0.1], [2.5, 0.4, 1.8, 0.0], [2.8, 1.1, 0.3, 0.9], [0.1, 0.9, 0.6, 0.4]],
    [0, 0, 1, 2],
)
VECTORS = ([1.0, 2.0, 3.0, 4.0, -1.5], [1.5, 2.0, 1.0, 5.0, 0.5])
MATRICES = ([[0.5, -1.0, 2.0], [3.0, 0.0, -2.5]], [[1.25, 1.0, 2.0], [1.5, -0.5, -1.0]])


def _accuracy_hint(got: float, outputs: torch.Tensor, labels: torch.Tensor) -> dict | None:
    """The words for a wrong accuracy that is, alone among the mistakes computed here from the
    same inputs, the value of one of them; None where none or several give it."""
    n, k = outputs.shape
    right = int((outputs.argmax(dim=1) == labels).sum())
    candidates = {  # the known wrong programs' values count too: a tie names nothing
        "no-dim": float((outputs.argmax() == labels).double().mean()),
        "over-classes": right / k,
        "max-values": float((outputs.max(dim=1).values == labels).double().mean()),
        "count": float(right),
        "softmax-dim-0": float((outputs.softmax(dim=0).argmax(dim=1) == labels).double().mean()),
    }
    if n == k:
        candidates["dim-0"] = float((outputs.argmax(dim=0) == labels).double().mean())
    matches = [name for name, value in candidates.items() if abs(value - got) <= 1e-6]
    if matches == ["no-dim"]:
        return {
            "en": "Your predictions are `outputs.argmax()` without `dim`: the index of the "
            "largest score in the whole tensor, flattened, one number compared with "
            "every label. Each row's prediction is its own arg-max, "
            "`outputs.argmax(dim=1)`.",
            "es": "Tus predicciones son `outputs.argmax()` sin `dim`: el índice de la "
            "puntuación más alta de todo el tensor, aplanado, un solo número que se "
            "compara con todas las etiquetas. La predicción de cada fila es su propio "
            "arg-max, `outputs.argmax(dim=1)`.",
        }
    if matches == ["over-classes"] and n != k:
        return {
            "en": f"Your `accuracy` divides the {right} right rows by the number of classes "
            f"(`outputs.shape[1]` = {k}), not by the number of rows ({n}): the share is "
            "over the examples, `len(labels)`. (With as many rows as classes, both "
            "agree.)",
            "es": f"Tu `accuracy` divide las {right} filas acertadas entre el número de "
            f"clases (`outputs.shape[1]` = {k}), no entre el número de filas ({n}): la "
            "proporción es sobre los ejemplos, `len(labels)`. (Con tantas filas como "
            "clases, ambas coinciden.)",
        }
    return None


def _mae_hint(got: float, output: torch.Tensor, target: torch.Tensor) -> dict | None:
    """The words for a mean absolute error divided by one dimension of a matrix instead of the
    count of its elements (`len(output)` counts its rows); None for other values."""
    if output.dim() < 2:
        return None
    total, numel = float((output - target).abs().double().sum()), output.numel()
    sizes = {
        "rows": (output.shape[0], "`len(output)`", "filas"),
        "columns": (output.shape[-1], "`output.shape[-1]`", "columnas"),
    }
    matches = [
        name
        for name, (size, _, _) in sizes.items()
        if size != numel and abs(total / size - got) <= 1e-6 * max(1.0, abs(got))
    ]
    if len(matches) != 1 or sizes["rows"][0] == sizes["columns"][0]:
        return None
    name = matches[0]
    size, code, nombre = sizes[name]
    return {
        "en": f"Your `mae` divides the sum of the absolute errors by the number of {name} "
        f"({code} = {size}), not by the number of elements ({numel}): on a matrix the "
        "mean runs over every element, `.abs().mean()` or `/ output.numel()`.",
        "es": f"Tu `mae` divide la suma de los errores absolutos entre el número de {nombre} "
        f"({code} = {size}), no entre el número de elementos ({numel}): en una matriz "
        "la media recorre todos los elementos, `.abs().mean()` o `/ output.numel()`.",
    }


HINTS = {"accuracy": _accuracy_hint, "mae": _mae_hint}


def _scores(fixed: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(fixed[0]), torch.tensor(fixed[1])


def _batch(ctx: Context, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n rows of k class scores; about half the labels are the right class."""
    outputs = ctx.randn(n, k, dtype=torch.float32)
    hits = ctx.randint(0, 2, (n,)).bool()
    return outputs, torch.where(hits, outputs.argmax(dim=1), ctx.randint(0, k, (n,)))


def _pair(fixed: tuple, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(fixed[0], dtype=dtype), torch.tensor(fixed[1], dtype=dtype)


def _random_pair(
    ctx: Context, *shape: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    return ctx.randn(*shape, dtype=dtype), ctx.randn(*shape, dtype=dtype)


def _ask(ctx: Context, name: str, x: torch.Tensor, y: torch.Tensor):
    return call(ctx, name, *ctx.student.put((ctx.on_device(x), ctx.on_device(y))))


def _value(ctx: Context, name: str, x: torch.Tensor, y: torch.Tensor, what: str, tol: float = 1e-6):
    """Compare the value; a one-element tensor counts here, the `*-float` checks judge the type."""
    expected = getattr(ctx.reference, name)(x.clone(), y.clone())
    got = _ask(ctx, name, x, y)
    if isinstance(got, RemoteTensor) and got.value.numel() == 1:
        got = float(got.value.reshape(()))
    try:
        expect_float(got, float(expected), what, tol=tol)
    except Fail as failure:
        diagnostic, *rest = failure.diagnostics
        hint = (
            HINTS[name](got, x, y)
            if isinstance(got, (int, float)) and not isinstance(got, bool)
            else None
        )
        if hint is None:
            raise
        raise Fail(
            Diagnostic(diagnostic.code, dict(diagnostic.details, hint=hint)), *rest
        ) from None


def _type(ctx: Context, name: str, x: torch.Tensor, y: torch.Tensor, what: str):
    got = _ask(ctx, name, x, y)
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        expect_float(got, 0.0, what)  # raises output-mismatch with the type note


@check(
    "accuracy-square",
    points=2,
    uses="accuracy",
    en="accuracy with as many rows as classes",
    es="accuracy con tantas filas como clases",
)
def accuracy_square(ctx: Context) -> None:
    _value(ctx, "accuracy", *_scores(SQUARE), ACCURACY)
    _value(ctx, "accuracy", *_scores(SQUARE_COLUMNS_APART), ACCURACY)
    n = int(ctx.randint(3, 9, ()))
    _value(ctx, "accuracy", *_batch(ctx, n, n), ACCURACY)


@check(
    "accuracy-batch",
    points=2,
    uses="accuracy",
    en="accuracy of a random batch",
    es="accuracy de un lote aleatorio",
)
def accuracy_batch(ctx: Context) -> None:
    _value(ctx, "accuracy", *_scores(BATCH), ACCURACY)
    _value(ctx, "accuracy", *_scores(COLUMNS_APART), ACCURACY)
    n, k = int(ctx.randint(8, 33, ())), int(ctx.randint(2, 8, ()))
    _value(ctx, "accuracy", *_batch(ctx, n, k), ACCURACY)


@check(
    "accuracy-float",
    points=1,
    uses="accuracy",
    en="accuracy returns a Python float",
    es="accuracy devuelve un float de Python",
)
def accuracy_float(ctx: Context) -> None:
    _type(ctx, "accuracy", *_scores(BATCH), ACCURACY)
    _type(ctx, "accuracy", *_batch(ctx, 10, 4), ACCURACY)


@check("mae-vector", points=2, uses="mae", en="mae of two vectors", es="mae de dos vectores")
def mae_vector(ctx: Context) -> None:
    # float32 sums in another order (or on a GPU) differ in the last digits
    _value(ctx, "mae", *_pair(VECTORS, torch.float32), MAE, tol=1e-5)
    n = int(ctx.randint(16, 65, ()))
    _value(ctx, "mae", *_random_pair(ctx, n, dtype=torch.float32), MAE, tol=1e-5)


@check(
    "mae-matrix",
    points=2,
    uses="mae",
    en="mae of two float64 matrices",
    es="mae de dos matrices float64",
)
def mae_matrix(ctx: Context) -> None:
    _value(ctx, "mae", *_pair(MATRICES, torch.float64), MAE)
    shape = (int(n) for n in ctx.randint(4, 10, (2,)))
    _value(ctx, "mae", *_random_pair(ctx, *shape, dtype=torch.float64), MAE)


@check(
    "mae-float",
    points=1,
    uses="mae",
    en="mae returns a Python float",
    es="mae devuelve un float de Python",
)
def mae_float(ctx: Context) -> None:
    _type(ctx, "mae", *_pair(VECTORS, torch.float32), MAE)
    _type(ctx, "mae", *_random_pair(ctx, 8, dtype=torch.float32), MAE)
