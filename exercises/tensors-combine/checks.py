"""Hidden checks for tensors-combine: stacking, splitting into batches, chunks, non-zero positions.

Every known wrong program must run on all of a check's inputs (the grader names it by running
the check again with it in place of the reference), so inputs on which `hstack` or
`column_stack` raise have a check of their own, "stack-sizes".
"""

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteObject,
    RemoteTensor,
    call,
    check,
    expect_close,
    expect_tensor,
)

ROWS_HINT = {
    "en": "`stack_rows` puts the rows of `b` below those of `a`: the number of columns "
    "stays, and two 1-D tensors become the two rows of a matrix.",
    "es": "`stack_rows` pone las filas de `b` debajo de las de `a`: el número de columnas "
    "no cambia, y dos tensores 1-D pasan a ser las dos filas de una matriz.",
}
COLS_HINT = {
    "en": "`stack_cols` puts the columns of `b` to the right of those of `a`: the number "
    "of rows stays, and two 1-D tensors are joined one after the other.",
    "es": "`stack_cols` pone las columnas de `b` a la derecha de las de `a`: el número "
    "de filas no cambia, y dos tensores 1-D se unen uno tras otro.",
}
BATCHES_HINT = {
    "en": "`size` is the number of rows of each piece, the last one having the rows "
    "left over; it is not the number of pieces.",
    "es": "`size` es el número de filas de cada trozo, y el último lleva las filas que "
    "sobran; no es el número de trozos.",
}
CHUNKS_HINT = {
    "en": "`chunk(k)` makes pieces of ⌈n/k⌉ elements (the last one shorter), so it can "
    "give fewer than k pieces: count them in Python for a few n and k.",
    "es": "`chunk(k)` hace trozos de ⌈n/k⌉ elementos (el último más corto), así que "
    "puede dar menos de k trozos: cuéntalos en Python para algunos n y k.",
}
INT_HINT = {
    "en": "Return the number of pieces as a Python `int`.",
    "es": "Devuelve el número de trozos como `int` de Python.",
}
NONZERO_HINT = {
    "en": "One tensor with a row per non-zero element, holding its index along each "
    "dimension of `t`: shape (number of non-zeros, `t.dim()`).",
    "es": "Un solo tensor con una fila por elemento no nulo, con su índice en cada "
    "dimensión de `t`: forma (número de no nulos, `t.dim()`).",
}


def _size(ctx: Context, low: int, high: int) -> int:
    return int(ctx.randint(low, high, ()))


def _kind(value: object) -> str:
    if isinstance(value, RemoteObject):
        return value.type_name
    return "torch.Tensor" if isinstance(value, RemoteTensor) else type(value).__name__


def _expect_like(got: object, expected: torch.Tensor, what: str | dict, hint: dict) -> None:
    """The reference's tensor: a tensor and its shape (with the exercise's hint), dtype, device,
    then values."""
    if not isinstance(got, RemoteTensor):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": what,
                    "got_type": _kind(got),
                    "expected_type": "torch.Tensor",
                    "hint": hint,
                },
            )
        )
    if got.shape != tuple(expected.shape):
        raise Fail(
            Diagnostic(
                "shape-mismatch",
                {
                    "what": what,
                    "got": list(got.shape),
                    "expected": list(expected.shape),
                    "hint": hint,
                },
            )
        )
    expect_tensor(got, what, dtype=expected.dtype, device=expected.device)
    expect_close(got, expected.cpu(), what, hint=hint)


def _pair_hint(name: str, a: torch.Tensor, b: torch.Tensor, got: object) -> dict | None:
    """What the result is, where the grader can tell from its shape and values alone."""
    if not isinstance(got, RemoteTensor) or a.shape != b.shape:
        return None
    if (
        a.dim() == 2
        and got.shape == (2, *a.shape)
        and torch.equal(got.value, torch.stack((a, b)).cpu())
    ):
        side = {
            "stack_rows": ("below", "debajo de"),
            "stack_cols": ("to the right of", "a la derecha de"),
        }[name]
        return {
            "en": f"Your result {list(got.shape)} holds `a` and `b` whole along a new "
            "dimension in front, as `torch.stack` gives: for matrices "
            f"`{name}` adds no dimension, it puts `b` {side[0]} `a`.",
            "es": f"Tu resultado {list(got.shape)} contiene `a` y `b` enteros a lo largo de "
            "una dimensión nueva delante, como da `torch.stack`: con matrices "
            f"`{name}` no añade ninguna dimensión, pone `b` {side[1]} `a`.",
        }
    return None


def _pair(ctx: Context, name: str, a: torch.Tensor, b: torch.Tensor, hint: dict) -> None:
    a, b = ctx.on_device(a), ctx.on_device(b)
    expected = getattr(ctx.reference, name)(a.clone(), b.clone())
    what = f"`{name}(a, b)` (a: {list(a.shape)}, b: {list(b.shape)})"
    try:
        got = call(ctx, name, *ctx.student.put((a, b)))
    except Fail as fail:
        first = fail.diagnostics[0]
        error = str(first.details.get("error", ""))
        if (
            first.code == "exception"
            and a.dim() == 1
            and b.dim() == 1
            and "Dimension out of range" in error
        ):
            # the inputs' rank is the grader's; the error text only chooses the words
            raise Fail(
                Diagnostic(
                    first.code,
                    dict(
                        first.details,
                        hint={
                            "en": f"Here `a` and `b` are 1-D, and 1-D tensors have no dimension 1 (only 0, "
                            f"or -1): your code asked for one they do not have. `{name}` must take "
                            "1-D tensors as well as matrices (`torch."
                            f"{'vstack' if name == 'stack_rows' else 'hstack'}` does both).",
                            "es": f"Aquí `a` y `b` son 1-D, y los tensores 1-D no tienen dimensión 1 (solo la "
                            f"0, o la -1): tu código pidió una que no tienen. `{name}` debe aceptar "
                            "tensores 1-D además de matrices (`torch."
                            f"{'vstack' if name == 'stack_rows' else 'hstack'}` hace ambas cosas).",
                        },
                    ),
                )
            ) from None
        if (
            first.code == "exception"
            and a.shape != b.shape
            and "stack expects each tensor to be equal size" in error
        ):
            raise Fail(
                Diagnostic(
                    first.code,
                    dict(
                        first.details,
                        hint={
                            "en": f"`torch.stack` joins tensors of one shape along a new dimension, and here "
                            f"`a` is {list(a.shape)} and `b` {list(b.shape)}: `{name}` adds no "
                            "dimension to matrices, it joins them along an existing one (as `torch."
                            f"{'vstack' if name == 'stack_rows' else 'hstack'}` does).",
                            "es": f"`torch.stack` une tensores de una misma forma a lo largo de una dimensión "
                            f"nueva, y aquí `a` es {list(a.shape)} y `b` {list(b.shape)}: `{name}` no "
                            "añade ninguna dimensión a las matrices, las une a lo largo de una que ya "
                            f"tienen (como hace `torch.{'vstack' if name == 'stack_rows' else 'hstack'}`).",
                        },
                    ),
                )
            ) from None
        raise
    _expect_like(got, expected, what, _pair_hint(name, a, b, got) or hint)


@check(
    "stack-rows",
    points=1.5,
    uses="stack_rows",
    en="stack_rows of two matrices or two vectors",
    es="stack_rows de dos matrices o dos vectores",
)
def stack_rows(ctx: Context) -> None:
    drawn = ((_size(ctx, 1, 6), _size(ctx, 2, 7)), (_size(ctx, 2, 8),))  # a matrix, a vector
    for shape in ((2, 3), (4,)) + drawn:
        _pair(ctx, "stack_rows", ctx.randn(*shape), ctx.randn(*shape), ROWS_HINT)


@check(
    "stack-cols",
    points=1.5,
    uses="stack_cols",
    en="stack_cols of two matrices or two vectors",
    es="stack_cols de dos matrices o dos vectores",
)
def stack_cols(ctx: Context) -> None:
    rows, length = _size(ctx, 1, 6), _size(ctx, 2, 8)
    for shape_a, shape_b in (
        ((2, 3), (2, 2)),
        ((3,), (3,)),
        ((rows, _size(ctx, 1, 5)), (rows, _size(ctx, 1, 5))),
        ((length,), (length,)),
    ):
        _pair(
            ctx,
            "stack_cols",
            ctx.randn(*shape_a, dtype=torch.float32),
            ctx.randn(*shape_b, dtype=torch.float32),
            COLS_HINT,
        )


@check(
    "stack-sizes",
    points=1,
    uses=("stack_rows", "stack_cols"),
    en="stack_rows of matrices of different heights, stack_cols of vectors of different lengths",
    es="stack_rows de matrices de distinta altura, stack_cols de vectores de distinta longitud",
)
def stack_sizes(ctx: Context) -> None:
    columns, length = _size(ctx, 2, 6), _size(ctx, 1, 6)
    for rows_a, rows_b in ((1, 3), (_size(ctx, 1, 4), _size(ctx, 4, 7))):
        _pair(ctx, "stack_rows", ctx.randn(rows_a, columns), ctx.randn(rows_b, columns), ROWS_HINT)
    for length_a, length_b in ((2, 5), (length + 1, length)):
        _pair(ctx, "stack_cols", ctx.randn(length_a), ctx.randn(length_b), COLS_HINT)


def _batches_hint(got: object, expected: tuple, rows: int, size: int) -> dict:
    """What the pieces show: the right ones with an empty one after them, or without the last
    one (each said only when the grader sees exactly that), `size` pieces (as a number of
    pieces would give), or else how many pieces there are."""
    pieces = list(got) if isinstance(got, (tuple, list)) else []
    same = all(isinstance(p, RemoteTensor) for p in pieces) and all(
        p.shape == tuple(w.shape) and torch.equal(p.value, w.cpu())
        for p, w in zip(pieces, expected)
    )
    if same and len(pieces) == len(expected) - 1:
        left = rows % size or size
        return {
            "en": f"Your first {len(pieces)} pieces are right, but the last one, of the "
            f"{left} row{'s' if left > 1 else ''} left over, is missing: check the "
            "bound of your loop or range.",
            "es": f"Tus primeros {len(pieces)} trozos son correctos, pero falta el último, "
            f"con {'las' if left > 1 else 'la'} {left} fila{'s' if left > 1 else ''} "
            f"que sobra{'n' if left > 1 else ''}: revisa el límite de tu bucle o range.",
        }
    if same and len(pieces) == len(expected) + 1 and pieces[-1].shape[:1] == (0,):
        return {
            "en": f"Your first {len(expected)} pieces are right, but after them comes an "
            f"empty last piece (0 rows): {size} divides the {rows} rows, so there are "
            f"no rows left over and no piece after the {len(expected)} full ones.",
            "es": f"Tus primeros {len(expected)} trozos son correctos, pero tras ellos viene "
            f"un último trozo vacío (0 filas): {size} divide las {rows} filas, así que "
            f"no sobra ninguna y no hay trozo después de los {len(expected)} completos.",
        }
    if len(pieces) == size and size != len(expected):
        return BATCHES_HINT
    return {
        "en": f"Your result has {len(pieces)} pieces; {rows} rows in pieces of {size} are "
        f"{len(expected)}, the last one with the rows left over.",
        "es": f"Tu resultado tiene {len(pieces)} trozos; {rows} filas en trozos de {size} "
        f"son {len(expected)}, el último con las filas que sobran.",
    }


@check(
    "batches",
    points=2,
    uses="batches",
    en="batches: pieces of `size` rows, the last one smaller",
    es="batches: trozos de `size` filas, el último más pequeño",
)
def batches(ctx: Context) -> None:
    rows = _size(ctx, 5, 17)
    drawn = ((rows, _size(ctx, 1, 4)), _size(ctx, 1, rows + 1))
    # the statement's example, and one row left over (a range that stops one short drops it)
    for shape, size in (((5,), 2), ((10, 3), 4), ((7, 3), 3), ((6, 2), 3), drawn):
        x = ctx.on_device(ctx.randn(*shape, dtype=torch.float32))
        expected = ctx.reference.batches(x.clone(), size)
        what = f"`batches(x, {size})` (x: {list(shape)})"
        got = call(ctx, "batches", ctx.student.put(x), size)
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            count = f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": what,
                        "got_type": _kind(got) + count,
                        "expected_type": f"tuple of {len(expected)} tensors",
                        "hint": _batches_hint(got, expected, shape[0], size),
                    },
                )
            )
        for i, (piece, want) in enumerate(zip(got, expected)):
            _expect_like(piece, want, f"`batches(x, {size})[{i}]` (x: {list(shape)})", BATCHES_HINT)


def _chunks_hint(n: int, k: int, got: int) -> dict | None:
    """The count of full pieces only (the left-over elements not counted): said only when the
    value is exactly that."""
    size = -(-n // k)
    if n % size and got == n // size:
        left = n % size
        rest_en = (
            "the element left over makes" if left == 1 else f"the {left} elements left over make"
        )
        rest_es = (
            "el elemento que sobra forma"
            if left == 1
            else f"los {left} elementos que sobran forman"
        )
        return {
            "en": f"Your {got} is the number of full pieces of ⌈n/k⌉ = {size} elements; "
            f"{rest_en} one more, shorter, piece: {got + 1}.",
            "es": f"Tu {got} es el número de trozos completos de ⌈n/k⌉ = {size} elementos; "
            f"{rest_es} un trozo más, más corto: {got + 1}.",
        }
    return None


@check(
    "n-chunks",
    points=2,
    uses="n_chunks",
    en="n_chunks(n, k): the number of pieces of chunk(k)",
    es="n_chunks(n, k): el número de trozos de chunk(k)",
)
def n_chunks(ctx: Context) -> None:
    drawn = [_size(ctx, 1, 41) for _ in range(3)]
    for n, k in [(13, 6), (6, 4), (5, 10)] + [(n, _size(ctx, 1, n + 4)) for n in drawn]:
        expected, what = ctx.reference.n_chunks(n, k), f"`n_chunks({n}, {k})`"
        got = call(ctx, "n_chunks", n, k)
        if type(got) is not int:
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": what,
                        "got_type": _kind(got),
                        "expected_type": "int",
                        "hint": INT_HINT,
                    },
                )
            )
        if got != expected:
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": what,
                        "got": got,
                        "expected": expected,
                        "worst_index": [],
                        "max_abs_error": abs(got - expected),
                        "max_rel_error": abs(got - expected) / expected,
                        "hint": _chunks_hint(n, k, got) or CHUNKS_HINT,
                    },
                )
            )


@check(
    "nonzero-positions",
    points=2,
    uses="nonzero_positions",
    en="nonzero_positions: one row of indices per non-zero element",
    es="nonzero_positions: una fila de índices por elemento no nulo",
)
def nonzero_positions(ctx: Context) -> None:
    # three non-zeros in a matrix and two in a vector: never as many as dimensions
    # and a 3-D one with negative values (each rank the statement names, and both signs)
    fixed = [
        torch.tensor([[0.0, 3.0, 0.0], [1.0, 0.0, 2.0]]),
        torch.tensor([0, 5, 0, 0, 7]),
        torch.tensor(
            [[[0.0, -1.0], [2.0, 0.0]], [[-3.0, 0.0], [0.0, 4.0]], [[0.0, 0.0], [-5.0, 6.0]]]
        ),
    ]
    shape = [_size(ctx, 2, 5) for _ in range(_size(ctx, 1, 4))]
    for t in fixed + [ctx.randint(-2, 3, tuple(shape)).to(torch.float32)]:
        t = ctx.on_device(t)
        expected = ctx.reference.nonzero_positions(t.clone())
        what = f"`nonzero_positions(t)` (t: {list(t.shape)})"
        got = call(ctx, "nonzero_positions", ctx.student.put(t))
        _expect_like(got, expected, what, _nonzero_hint(t, got) or NONZERO_HINT)


def _nonzero_hint(t: torch.Tensor, got: object) -> dict | None:
    """The positions of the positive elements only: said only when the values are exactly
    those (and `t` has negative ones)."""
    if not isinstance(got, RemoteTensor) or not bool((t < 0).any()):
        return None
    positive = torch.argwhere(t > 0).cpu()
    if got.shape != tuple(positive.shape) or not torch.equal(got.value, positive.to(got.dtype)):
        return None
    return {
        "en": "Your rows are the positions of the positive elements only, but negative "
        "elements are non-zero too: test `t != 0` (or use `torch.argwhere(t)`).",
        "es": "Tus filas son las posiciones de los elementos positivos solamente, pero los "
        "elementos negativos también son distintos de cero: comprueba `t != 0` (o usa "
        "`torch.argwhere(t)`).",
    }
