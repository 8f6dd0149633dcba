"""Hidden checks for tensors-combine: stacking, splitting into batches, chunks, non-zero positions.

Every known wrong program must run on all of a check's inputs (the grader names it by running
the check again with it in place of the reference), so inputs on which `hstack` or
`column_stack` raise have a check of their own, "stack-sizes".
"""
import torch

from worker.harness.checks import (Context, Diagnostic, Fail, RemoteObject, RemoteTensor, call,
                                   check, expect_close, expect_tensor)

ROWS_HINT = {"en": "`stack_rows` puts the rows of `b` below those of `a`: the number of columns "
                   "stays, and two 1-D tensors become the two rows of a matrix.",
             "es": "`stack_rows` pone las filas de `b` debajo de las de `a`: el número de columnas "
                   "no cambia, y dos tensores 1-D pasan a ser las dos filas de una matriz."}
COLS_HINT = {"en": "`stack_cols` puts the columns of `b` to the right of those of `a`: the number "
                   "of rows stays, and two 1-D tensors are joined one after the other.",
             "es": "`stack_cols` pone las columnas de `b` a la derecha de las de `a`: el número "
                   "de filas no cambia, y dos tensores 1-D se unen uno tras otro."}
BATCHES_HINT = {"en": "`size` is the number of rows of each piece, the last one having the rows "
                      "left over; it is not the number of pieces.",
                "es": "`size` es el número de filas de cada trozo, y el último lleva las filas que "
                      "sobran; no es el número de trozos."}
CHUNKS_HINT = {"en": "`chunk(k)` makes pieces of ⌈n/k⌉ elements (the last one shorter), so it can "
                     "give fewer than k pieces: count them in Python for a few n and k.",
               "es": "`chunk(k)` hace trozos de ⌈n/k⌉ elementos (el último más corto), así que "
                     "puede dar menos de k trozos: cuéntalos en Python para algunos n y k."}
INT_HINT = {"en": "Return the number of pieces as a Python `int`.",
            "es": "Devuelve el número de trozos como `int` de Python."}
NONZERO_HINT = {"en": "One tensor with a row per non-zero element, holding its index along each "
                      "dimension of `t`: shape (number of non-zeros, `t.dim()`).",
                "es": "Un solo tensor con una fila por elemento no nulo, con su índice en cada "
                      "dimensión de `t`: forma (número de no nulos, `t.dim()`)."}


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
        raise Fail(Diagnostic("output-mismatch", {"what": what, "got_type": _kind(got),
                                                  "expected_type": "torch.Tensor", "hint": hint}))
    if got.shape != tuple(expected.shape):
        raise Fail(Diagnostic("shape-mismatch", {"what": what, "got": list(got.shape),
                                                 "expected": list(expected.shape), "hint": hint}))
    expect_tensor(got, what, dtype=expected.dtype, device=expected.device)
    expect_close(got, expected.cpu(), what, hint=hint)


def _pair(ctx: Context, name: str, a: torch.Tensor, b: torch.Tensor, hint: dict) -> None:
    a, b = ctx.on_device(a), ctx.on_device(b)
    expected = getattr(ctx.reference, name)(a.clone(), b.clone())
    what = f"`{name}(a, b)` (a: {list(a.shape)}, b: {list(b.shape)})"
    _expect_like(call(ctx, name, *ctx.student.put((a, b))), expected, what, hint)


@check("stack-rows", points=1.5, uses="stack_rows", en="stack_rows of two matrices or two vectors",
       es="stack_rows de dos matrices o dos vectores")
def stack_rows(ctx: Context) -> None:
    drawn = ((_size(ctx, 1, 6), _size(ctx, 2, 7)), (_size(ctx, 2, 8),))  # a matrix, a vector
    for shape in ((2, 3), (4,)) + drawn:
        _pair(ctx, "stack_rows", ctx.randn(*shape), ctx.randn(*shape), ROWS_HINT)


@check("stack-cols", points=1.5, uses="stack_cols", en="stack_cols of two matrices or two vectors",
       es="stack_cols de dos matrices o dos vectores")
def stack_cols(ctx: Context) -> None:
    rows, length = _size(ctx, 1, 6), _size(ctx, 2, 8)
    for shape_a, shape_b in (((2, 3), (2, 2)), ((3,), (3,)),
                             ((rows, _size(ctx, 1, 5)), (rows, _size(ctx, 1, 5))),
                             ((length,), (length,))):
        _pair(ctx, "stack_cols", ctx.randn(*shape_a, dtype=torch.float32),
              ctx.randn(*shape_b, dtype=torch.float32), COLS_HINT)


@check("stack-sizes", points=1, uses=("stack_rows", "stack_cols"),
       en="stack_rows of matrices of different heights, stack_cols of vectors of different lengths",
       es="stack_rows de matrices de distinta altura, stack_cols de vectores de distinta longitud")
def stack_sizes(ctx: Context) -> None:
    columns, length = _size(ctx, 2, 6), _size(ctx, 1, 6)
    for rows_a, rows_b in ((1, 3), (_size(ctx, 1, 4), _size(ctx, 4, 7))):
        _pair(ctx, "stack_rows", ctx.randn(rows_a, columns), ctx.randn(rows_b, columns), ROWS_HINT)
    for length_a, length_b in ((2, 5), (length + 1, length)):
        _pair(ctx, "stack_cols", ctx.randn(length_a), ctx.randn(length_b), COLS_HINT)


@check("batches", points=2, uses="batches",
       en="batches: pieces of `size` rows, the last one smaller",
       es="batches: trozos de `size` filas, el último más pequeño")
def batches(ctx: Context) -> None:
    rows = _size(ctx, 5, 17)
    drawn = ((rows, _size(ctx, 1, 4)), _size(ctx, 1, rows + 1))
    for shape, size in (((10, 3), 4), ((6, 2), 3), drawn):
        x = ctx.on_device(ctx.randn(*shape, dtype=torch.float32))
        expected = ctx.reference.batches(x.clone(), size)
        what = f"`batches(x, {size})` (x: {list(shape)})"
        got = call(ctx, "batches", ctx.student.put(x), size)
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            count = f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""
            raise Fail(Diagnostic("output-mismatch", {
                "what": what, "got_type": _kind(got) + count,
                "expected_type": f"tuple of {len(expected)} tensors", "hint": BATCHES_HINT}))
        for i, (piece, want) in enumerate(zip(got, expected)):
            _expect_like(piece, want, f"`batches(x, {size})[{i}]` (x: {list(shape)})", BATCHES_HINT)


@check("n-chunks", points=2, uses="n_chunks", en="n_chunks(n, k): the number of pieces of chunk(k)",
       es="n_chunks(n, k): el número de trozos de chunk(k)")
def n_chunks(ctx: Context) -> None:
    drawn = [_size(ctx, 1, 41) for _ in range(3)]
    for n, k in [(13, 6), (6, 4), (5, 10)] + [(n, _size(ctx, 1, n + 4)) for n in drawn]:
        expected, what = ctx.reference.n_chunks(n, k), f"`n_chunks({n}, {k})`"
        got = call(ctx, "n_chunks", n, k)
        if type(got) is not int:
            raise Fail(Diagnostic("output-mismatch", {"what": what, "got_type": _kind(got),
                                                      "expected_type": "int", "hint": INT_HINT}))
        if got != expected:
            raise Fail(Diagnostic("output-mismatch", {
                "what": what, "got": got, "expected": expected, "worst_index": [],
                "max_abs_error": abs(got - expected),
                "max_rel_error": abs(got - expected) / expected,
                "hint": CHUNKS_HINT}))


@check("nonzero-positions", points=2, uses="nonzero_positions",
       en="nonzero_positions: one row of indices per non-zero element",
       es="nonzero_positions: una fila de índices por elemento no nulo")
def nonzero_positions(ctx: Context) -> None:
    # three non-zeros in a matrix and two in a vector: never as many as dimensions
    fixed = [torch.tensor([[0.0, 3.0, 0.0], [1.0, 0.0, 2.0]]), torch.tensor([0, 5, 0, 0, 7])]
    shape = [_size(ctx, 2, 5) for _ in range(_size(ctx, 1, 4))]
    for t in fixed + [ctx.randint(-2, 3, tuple(shape)).to(torch.float32)]:
        t = ctx.on_device(t)
        expected = ctx.reference.nonzero_positions(t.clone())
        what = f"`nonzero_positions(t)` (t: {list(t.shape)})"
        _expect_like(call(ctx, "nonzero_positions", ctx.student.put(t)), expected, what,
                     NONZERO_HINT)
