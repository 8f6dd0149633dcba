"""Checks students run before submitting: the statement's example, with its expected values."""

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

ONE_HOT = "`one_hot(indices, vocab_size)`"
EMBED = "`embed_batch(sentences, word_to_ix, embeddings)`"
# column 0: "the cat" and a zero row of padding; column 1: "the dog ate"
EXPECTED_BATCH = torch.tensor(
    [[[1.0, 0.0], [1.0, 0.0]], [[2.0, -1.0], [0.0, 1.0]], [[0.0, 0.0], [1.0, 1.0]]]
)
BATCH_HINT = {
    "en": "Column b is `sentences[b]`, in the order given, padded with zeros after its "
    "end; the batch is (T, B, D), as `pad_sequence` gives by default.",
    "es": "La columna b es `sentences[b]`, en el orden dado, con ceros tras su final; "
    "el lote es (T, B, D), como lo da `pad_sequence` por defecto.",
}


def _example_batch(ctx: Context):
    embeddings = ctx.student.put(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]]))
    return expect_tensor(
        call(
            ctx,
            "embed_batch",
            [["the", "cat"], ["the", "dog", "ate"]],
            {"the": 0, "dog": 1, "ate": 2, "cat": 3},
            embeddings,
        ),
        EMBED,
    )


@check(
    "example-one-hot", points=1, uses="one_hot", en="the example: one_hot", es="el ejemplo: one_hot"
)
def example_one_hot(ctx: Context) -> None:
    got = call(ctx, "one_hot", ctx.student.put(torch.tensor([1, 0, 2])), 4)
    expect_close(
        expect_tensor(got, ONE_HOT, shape=(3, 4), dtype=torch.float32),
        torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]),
        ONE_HOT,
    )


@check(
    "example-batch-shape",
    points=1,
    uses="embed_batch",
    en="the example: shape (T, B, D)",
    es="el ejemplo: forma (T, B, D)",
)
def example_batch_shape(ctx: Context) -> None:
    got = _example_batch(ctx)
    if got.shape != (3, 2, 2):
        raise Fail(
            Diagnostic(
                "shape-mismatch",
                {"what": EMBED, "got": list(got.shape), "expected": [3, 2, 2], "hint": BATCH_HINT},
            )
        )
    expect_tensor(got, EMBED, dtype=torch.float32)


@check(
    "example-batch-values",
    points=1,
    uses="embed_batch",
    en="the example: word vectors and padding",
    es="el ejemplo: vectores y relleno",
)
def example_batch_values(ctx: Context) -> None:
    expect_close(
        expect_tensor(_example_batch(ctx), EMBED, shape=(3, 2, 2)),
        EXPECTED_BATCH,
        EMBED,
        hint=BATCH_HINT,
    )
