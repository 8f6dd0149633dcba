"""Checks you can run yourself: `hpcgrade check tensors-reshape FILE` (the grader's own use
random shapes and values)."""

import torch

from worker.harness.checks import Context, call, check, expect_close, expect_sharing, expect_tensor

A = [[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]]  # (2, 2, 3)


def _expect(ctx: Context, name: str, x: list, expected: list, what: str):
    sent = ctx.student.put(torch.tensor(x))
    expected = torch.tensor(expected)
    got = expect_tensor(call(ctx, name, sent), what, shape=tuple(expected.shape))
    expect_close(got, expected, what)
    return sent, got


@check(
    "rows-small",
    points=1,
    uses="rows",
    en="rows of a (2, 2, 3) tensor → (4, 3)",
    es="rows de un tensor (2, 2, 3) → (4, 3)",
)
def rows_small(ctx: Context) -> None:
    _expect(
        ctx,
        "rows",
        A,
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]],
        "`rows(a)`",
    )


@check(
    "swap-last-small",
    points=1,
    uses="swap_last",
    en="swap_last of a (2, 2, 3) tensor → (2, 3, 2)",
    es="swap_last de un tensor (2, 2, 3) → (2, 3, 2)",
)
def swap_last_small(ctx: Context) -> None:
    _expect(
        ctx,
        "swap_last",
        A,
        [[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]], [[6.0, 9.0], [7.0, 10.0], [8.0, 11.0]]],
        "`swap_last(a)`",
    )


@check(
    "add-batch-dim-small",
    points=1,
    uses="add_batch_dim",
    en="add_batch_dim of a (2, 1, 2) image → (1, 2, 1, 2)",
    es="add_batch_dim de una imagen (2, 1, 2) → (1, 2, 1, 2)",
)
def add_batch_dim_small(ctx: Context) -> None:
    _expect(
        ctx,
        "add_batch_dim",
        [[[1.0, 2.0]], [[3.0, 4.0]]],
        [[[[1.0, 2.0]], [[3.0, 4.0]]]],
        "`add_batch_dim(img)`",
    )


@check(
    "flat-view-small",
    points=1,
    uses="flat_view",
    en="flat_view of a (2, 3) matrix: values and memory",
    es="flat_view de una matriz (2, 3): valores y memoria",
)
def flat_view_small(ctx: Context) -> None:
    sent, got = _expect(
        ctx,
        "flat_view",
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]],
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        "`flat_view(x)`",
    )
    x = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    # values written into the result must show in x: a view shares x's memory
    expect_sharing(
        ctx,
        got,
        sent,
        (x.view(-1), x),
        {
            "en": "`x` after a write into `flat_view(x)`",
            "es": "`x` tras escribir en `flat_view(x)`",
        },
    )
