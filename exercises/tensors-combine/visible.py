"""Checks you can run before submitting: `hpcgrade check tensors-combine FILE`. The grader's own
checks use other inputs, random shapes and sizes included."""

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    call,
    check,
    expect_close,
    expect_tensor,
)


def _expect(got: object, expected: torch.Tensor, what: str) -> None:
    expect_tensor(got, what, shape=expected.shape, dtype=expected.dtype)
    expect_close(got, expected, what)


@check(
    "stack",
    points=1,
    uses=("stack_rows", "stack_cols"),
    en="stack_rows and stack_cols",
    es="stack_rows y stack_cols",
)
def stack(ctx: Context) -> None:
    a, b = ctx.student.put((torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])))
    _expect(
        call(ctx, "stack_rows", a, b),
        torch.tensor([[1, 2, 3], [4, 5, 6]]),
        "`stack_rows(tensor([1, 2, 3]), tensor([4, 5, 6]))`",
    )
    c, d = ctx.student.put((torch.tensor([[1], [2]]), torch.tensor([[3, 4], [5, 6]])))
    _expect(
        call(ctx, "stack_cols", c, d),
        torch.tensor([[1, 3, 4], [2, 5, 6]]),
        "`stack_cols(tensor([[1], [2]]), tensor([[3, 4], [5, 6]]))`",
    )


@check(
    "batches",
    points=1,
    uses="batches",
    en="batches(torch.arange(5), 2)",
    es="batches(torch.arange(5), 2)",
)
def batches(ctx: Context) -> None:
    got = call(ctx, "batches", ctx.student.put(torch.arange(5)), 2)
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": "`batches(torch.arange(5), 2)`",
                    "got_type": type(got).__name__
                    + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""),
                    "expected_type": "tuple of 3 tensors",
                    "hint": {
                        "en": "Pieces of `size` rows each; the last one has the rows left over.",
                        "es": "Trozos de `size` filas cada uno; el último lleva las filas que sobran.",
                    },
                },
            )
        )
    for i, want in enumerate((torch.tensor([0, 1]), torch.tensor([2, 3]), torch.tensor([4]))):
        _expect(got[i], want, f"`batches(torch.arange(5), 2)[{i}]`")


@check("n-chunks", points=1, uses="n_chunks", en="n_chunks(13, 6)", es="n_chunks(13, 6)")
def n_chunks(ctx: Context) -> None:
    got = call(ctx, "n_chunks", 13, 6)
    if got != 5 or type(got) is not int:
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": "`n_chunks(13, 6)`",
                    "got": repr(got)[:80],
                    "expected": 5,
                    "worst_index": [],
                    "max_abs_error": 0.0,
                    "max_rel_error": 0.0,
                    "hint": {
                        "en": "Count the pieces of `torch.arange(13).chunk(6)` in Python; "
                        "return an `int`.",
                        "es": "Cuenta los trozos de `torch.arange(13).chunk(6)` en Python; "
                        "devuelve un `int`.",
                    },
                },
            )
        )


@check(
    "nonzero-positions",
    points=1,
    uses="nonzero_positions",
    en="nonzero_positions of a 2×2 matrix",
    es="nonzero_positions de una matriz 2×2",
)
def nonzero_positions(ctx: Context) -> None:
    got = call(ctx, "nonzero_positions", ctx.student.put(torch.tensor([[0, 1], [2, 0]])))
    _expect(got, torch.tensor([[0, 1], [1, 0]]), "`nonzero_positions(tensor([[0, 1], [2, 0]]))`")
