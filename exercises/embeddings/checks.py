"""Hidden checks for embeddings: one-hot rows, and sentences embedded into a padded batch.

Every point rests on values the grader reads back: what the functions return from fresh hidden
inputs, and for embed-gradient the gradient that a backward pass from the batch leaves in
`embeddings.grad`. The autograd flags the student's process reports earn nothing.
"""

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteTensor,
    call,
    check,
    diagnose_exception,
    expect_close,
    expect_tensor,
)
from worker.harness.diagnostics import compare_grad, compare_values
from worker.harness.remote import StudentError

ONE_HOT = "`one_hot(indices, vocab_size)`"
EMBED = "`embed_batch(sentences, word_to_ix, embeddings)`"
PADDING = {
    "en": "The padding in `embed_batch(sentences, word_to_ix, embeddings)`",
    "es": "El relleno de `embed_batch(sentences, word_to_ix, embeddings)`",
}
WORDS = (
    "the",
    "dog",
    "ate",
    "apple",
    "everybody",
    "read",
    "that",
    "book",
    "cat",
    "sat",
    "on",
    "mat",
)
# The fixed cases. Indices below vocab_size - 1: F.one_hot without num_classes makes fewer columns.
FIXED_INDICES, FIXED_VOCAB = [2, 0, 3], 6
# T = 5 differs from B = 3 (a batch-first result has another shape), and the order is not by
# length (sorting the sentences moves them); the longest-first order is for the checks of padding
# and gradients, which sorting must not fail.
FIXED_LENGTHS, LONGEST_FIRST = (2, 5, 3), (5, 3, 2)
# the statement's other classes, fixed so that a mistake made for one of them only fails on every
# seed: a sentence of one word (longest first or not), and a batch of one sentence (B = 1)
ONE_WORD, ONE_WORD_LONGEST_FIRST, ONE_SENTENCE = (1, 4, 2), (4, 2, 1), (3,)
# and one index only (n = 1) for one_hot
ONE_INDEX = [4]

SHAPE_HINT = {
    "en": "The batch is (T, B, D): one row per position, one column per sentence, as "
    "`pad_sequence` gives by default (`batch_first=False`).",
    "es": "El lote es (T, B, D): una fila por posición y una columna por frase, como lo "
    "da `pad_sequence` por defecto (`batch_first=False`).",
}
WORDS_HINT = {
    "en": "Column b is `sentences[b]`, in the order given, and row t of it is the "
    "embedding of its t-th word: `embeddings[word_to_ix[word]]`.",
    "es": "La columna b es `sentences[b]`, en el orden dado, y su fila t es el vector "
    "de su palabra t: `embeddings[word_to_ix[word]]`.",
}
PADDING_HINT = {
    "en": "The positions after the end of a shorter sentence must be zeros, what "
    "`pad_sequence` fills in.",
    "es": "Las posiciones tras el final de una frase más corta deben ser ceros, que "
    "es lo que pone `pad_sequence`.",
}
NO_GRAD_HINT = {
    "en": "Compute the batch from `embeddings` itself with tensor operations "
    "(indexing, `F.embedding`): a new parameter made from it (`nn.Embedding`, "
    "`nn.Parameter`) gets the gradient in its own `.grad` instead.",
    "es": "Calcula el lote a partir del propio `embeddings` con operaciones de "
    "tensores (indexación, `F.embedding`): un parámetro nuevo creado a partir "
    "de él (`nn.Embedding`, `nn.Parameter`) recibe el gradiente en su propio "
    "`.grad`.",
}


def _all_rows_hint(got: torch.Tensor, indices: torch.Tensor, size: int) -> dict | None:
    """The words for one-hot rows that each hold a 1 in the column of every index, what
    `out[:, indices] = 1` gives; None for other values."""
    every = torch.zeros(len(indices), size)
    every[:, indices] = 1
    if (
        len(indices) > 1
        and tuple(got.shape) == tuple(every.shape)
        and torch.equal(got.double(), every.double())
    ):
        return {
            "en": "Each of your rows has a 1 in the column of every index, in every row: "
            "`out[:, indices] = 1` sets those columns in all the rows. Row i needs a 1 "
            "in column `indices[i]` only: `out[torch.arange(n), indices] = 1`, or "
            "`F.one_hot(indices, vocab_size)`.",
            "es": "Cada una de tus filas tiene un 1 en la columna de cada índice, en todas "
            "las filas: `out[:, indices] = 1` pone esas columnas en todas las filas. La "
            "fila i necesita un 1 solo en la columna `indices[i]`: "
            "`out[torch.arange(n), indices] = 1`, o `F.one_hot(indices, vocab_size)`.",
        }
    return None


def _first_length_hint(sentences) -> dict:
    lengths = [len(s) for s in sentences]
    first, longest = lengths[0], max(lengths)
    b = lengths.index(longest)
    return {
        "en": f"Your batch has room for {first} positions, the length of the first sentence, "
        f"but sentence {b} has {longest} words: T is the length of the longest "
        "sentence (`max(len(s) for s in sentences)`), which need not come first.",
        "es": f"Tu lote tiene sitio para {first} posiciones, la longitud de la primera frase, "
        f"pero la frase {b} tiene {longest} palabras: T es la longitud de la frase más "
        "larga (`max(len(s) for s in sentences)`), que no tiene por qué ser la primera.",
    }


def _uses_one_hot_product(ctx: Context) -> bool:
    """Whether a line of the submission, as the grader read it, multiplies one-hot rows."""
    return any(
        "one_hot" in line and ("@" in line or "matmul" in line or "mm(" in line)
        for _, code in ctx.source_cells
        for line in code.splitlines()
    )


def _exception_hint(
    ctx: Context, diagnostic: Diagnostic, sentences, dtype: torch.dtype
) -> dict | None:
    """The words for an exception of embed_batch where its message and these inputs say which
    mistake raised it; None where they do not."""
    message = str(diagnostic.details.get("error", ""))
    first = len(sentences[0])
    if first < max(len(s) for s in sentences) and (
        f"with size {first}" in message or f"expanded size of the tensor ({first})" in message
    ):
        return _first_length_hint(sentences)
    matmul = "m1" in message or "mat1" in message
    if dtype == torch.float64 and "same dtype" in message and matmul and _uses_one_hot_product(ctx):
        return {
            "en": "Your one-hot rows are float32 (as `one_hot` returns them) and these "
            "embeddings are float64: `one_hot(...) @ embeddings` needs both of one "
            "dtype. Convert the rows (`.to(embeddings.dtype)`), or index the rows of "
            "`embeddings` directly (`embeddings[indices]`), which keeps its dtype.",
            "es": "Tus filas one-hot son float32 (como las devuelve `one_hot`) y estos "
            "embeddings son float64: `one_hot(...) @ embeddings` necesita que ambos "
            "tengan el mismo dtype. Convierte las filas (`.to(embeddings.dtype)`), o "
            "indexa directamente las filas de `embeddings` (`embeddings[indices]`), que "
            "conserva su dtype.",
        }
    return None


def _sizes(ctx: Context, low: int, high: int, count: int) -> list[int]:
    return [int(n) for n in ctx.randint(low, high, (count,))]


def _lengths(ctx: Context, longest_first: bool = False) -> list[int]:
    """2 to 4 different lengths, the longest not equal to their count, not longest first
    (or longest first, if asked)."""
    batch = int(ctx.randint(2, 5, ()))
    lengths = [int(n) + 1 for n in torch.randperm(7, generator=ctx.rng)[:batch]]
    if max(lengths) == batch:
        lengths[lengths.index(batch)] += 1
    ordered = sorted(lengths, reverse=True)
    if longest_first:
        return ordered
    return lengths[::-1] if lengths == ordered else lengths


def _batch(ctx: Context, lengths, dtype: torch.dtype):
    """Sentences of these lengths over a vocabulary whose indices are shuffled, and its
    embeddings (vocab_size, D)."""
    vocab_size, dim = _sizes(ctx, 6, len(WORDS) + 1, 1) + _sizes(ctx, 2, 6, 1)
    word_to_ix = {w: int(i) for w, i in zip(WORDS, torch.randperm(vocab_size, generator=ctx.rng))}
    sentences = [[WORDS[int(i)] for i in ctx.randint(0, vocab_size, (n,))] for n in lengths]
    return sentences, word_to_ix, ctx.randn(vocab_size, dim, dtype=dtype)


def _embed(
    ctx: Context, sentences, word_to_ix, embeddings, dtype: torch.dtype = torch.float32
) -> RemoteTensor:
    """The student's batch, called twice on the same input: the two must agree."""
    try:
        first, second = (
            call(ctx, "embed_batch", sentences, word_to_ix, embeddings) for _ in range(2)
        )
    except Fail as failure:
        diagnostic, *rest = failure.diagnostics
        hint = (
            _exception_hint(ctx, diagnostic, sentences, dtype)
            if diagnostic.code == "exception"
            else None
        )
        if hint is None:
            raise
        raise Fail(Diagnostic("exception", dict(diagnostic.details, hint=hint)), *rest) from None
    if (
        isinstance(first, RemoteTensor)
        and isinstance(second, RemoteTensor)
        and (
            (first.shape, first.dtype) != (second.shape, second.dtype)
            or not torch.allclose(first.value, second.value, rtol=0, atol=0, equal_nan=True)
        )
    ):
        raise Fail(
            Diagnostic(
                "nondeterministic",
                {
                    "what": EMBED,
                    "hint": {
                        "en": "Looking up embeddings involves no randomness: no dropout here.",
                        "es": "Buscar los vectores no tiene nada de aleatorio: aquí no va dropout.",
                    },
                },
            )
        )
    return expect_tensor(first, EMBED)


def _embedded(ctx: Context, lengths, dtype: torch.dtype = torch.float32):
    """The student's batch, with the right shape, and the reference's."""
    sentences, word_to_ix, embeddings = _batch(ctx, lengths, dtype)
    expected = ctx.reference.embed_batch(sentences, word_to_ix, embeddings.clone())
    got = _embed(ctx, sentences, word_to_ix, ctx.student.put(ctx.on_device(embeddings)), dtype)
    return _expect_shape(got, expected, sentences), expected


def _expect_shape(got: RemoteTensor, expected: torch.Tensor, sentences) -> RemoteTensor:
    if got.shape != tuple(expected.shape):
        first = len(sentences[0])
        hint = (
            _first_length_hint(sentences)
            if got.shape[1:] == tuple(expected.shape[1:])
            and got.shape[0] == first < expected.shape[0]
            else SHAPE_HINT
        )
        raise Fail(
            Diagnostic(
                "shape-mismatch",
                {
                    "what": EMBED,
                    "got": list(got.shape),
                    "expected": list(expected.shape),
                    "hint": hint,
                },
            )
        )
    return got


def _expect_where(
    got: RemoteTensor, expected: torch.Tensor, where: torch.Tensor, what, hint: dict
) -> None:
    """The values at the positions `where` marks (broadcast over D) only."""
    diagnostic = compare_values(
        torch.where(where, got.value.double(), 0.0),
        torch.where(where, expected.double(), 0.0),
        what,
    )
    if diagnostic:
        raise Fail(Diagnostic(diagnostic.code, dict(diagnostic.details, hint=hint)))


def _words_mask(lengths, longest: int) -> torch.Tensor:
    """(T, B, 1): True where sentence b has a t-th word."""
    return (torch.arange(longest)[:, None] < torch.tensor(lengths)[None, :])[..., None]


@check(
    "one-hot-rows",
    points=2,
    uses="one_hot",
    en="one_hot: one row per index, vocab_size columns",
    es="one_hot: una fila por índice, vocab_size columnas",
)
def one_hot_rows(ctx: Context) -> None:
    n, vocab_size = _sizes(ctx, 2, 9, 1) + _sizes(ctx, 9, 13, 1)
    for indices, size in (
        (torch.tensor(FIXED_INDICES), FIXED_VOCAB),
        (torch.tensor(ONE_INDEX), FIXED_VOCAB),
        (ctx.randint(0, vocab_size, (n,)), vocab_size),
    ):
        expected = ctx.reference.one_hot(indices.clone(), size)
        got = call(ctx, "one_hot", ctx.student.put(ctx.on_device(indices)), size)
        got = expect_tensor(got, ONE_HOT, shape=expected.shape, device=ctx.device)
        expect_close(got, expected, ONE_HOT, hint=_all_rows_hint(got.value, indices, size))


@check(
    "one-hot-float", points=1, uses="one_hot", en="one_hot: float rows", es="one_hot: filas float"
)
def one_hot_float(ctx: Context) -> None:
    indices = torch.tensor(FIXED_INDICES)
    expected = ctx.reference.one_hot(indices.clone(), FIXED_VOCAB)
    got = call(ctx, "one_hot", ctx.student.put(ctx.on_device(indices)), FIXED_VOCAB)
    expect_tensor(got, ONE_HOT, dtype=expected.dtype)


@check(
    "embed-shape",
    points=2,
    uses="embed_batch",
    en="embed_batch: shape (T, B, D) and dtype",
    es="embed_batch: forma (T, B, D) y dtype",
)
def embed_shape(ctx: Context) -> None:
    # float64 first: a batch made with torch.zeros' default dtype fails on the dtype, whatever
    # the device (the dtype is checked before the device)
    for lengths, dtype in (
        (FIXED_LENGTHS, torch.float64),
        (ONE_WORD, torch.float32),
        (ONE_SENTENCE, torch.float64),
        (_lengths(ctx), torch.float32),
    ):
        got, expected = _embedded(ctx, lengths, dtype)
        expect_tensor(got, EMBED, dtype=expected.dtype, device=ctx.device)


@check(
    "embed-words",
    points=2,
    uses="embed_batch",
    en="embed_batch: each word's vector in its place",
    es="embed_batch: el vector de cada palabra en su sitio",
)
def embed_words(ctx: Context) -> None:
    for lengths, dtype in (
        (FIXED_LENGTHS, torch.float32),
        (ONE_WORD, torch.float64),
        (ONE_SENTENCE, torch.float32),
        (_lengths(ctx), torch.float64),
    ):
        got, expected = _embedded(ctx, lengths, dtype)
        _expect_where(got, expected, _words_mask(lengths, max(lengths)), EMBED, WORDS_HINT)


@check(
    "embed-padding",
    points=1,
    uses="embed_batch",
    en="embed_batch: zeros for padding",
    es="embed_batch: ceros de relleno",
)
def embed_padding(ctx: Context) -> None:
    for lengths in (LONGEST_FIRST, ONE_WORD_LONGEST_FIRST, _lengths(ctx, longest_first=True)):
        got, expected = _embedded(ctx, lengths)
        _expect_where(got, expected, ~_words_mask(lengths, max(lengths)), PADDING, PADDING_HINT)


@check(
    "embed-gradient",
    points=2,
    uses="embed_batch",
    en="embed_batch: gradients reach the embeddings",
    es="embed_batch: los gradientes llegan a embeddings",
)
def embed_gradient(ctx: Context) -> None:
    for lengths in (LONGEST_FIRST, ONE_WORD_LONGEST_FIRST, ONE_SENTENCE):
        _expect_gradient(ctx, lengths)


def _expect_gradient(ctx: Context, lengths) -> None:
    sentences, word_to_ix, embeddings = _batch(ctx, lengths, torch.float32)
    leaf = embeddings.clone().requires_grad_()
    expected = ctx.reference.embed_batch(sentences, word_to_ix, leaf)
    cotangent = ctx.randn(*expected.shape, dtype=torch.float32)
    sent = ctx.student.put(ctx.on_device(embeddings).requires_grad_())
    got = _expect_shape(_embed(ctx, sentences, word_to_ix, sent), expected, sentences)
    # by behaviour, never by the flags the student's process reports: a backward pass from the
    # batch, then the gradient read back from embeddings
    try:
        ctx.student.method(got, "backward", ctx.on_device(cotangent))
    except StudentError as exc:
        diagnostic = diagnose_exception(exc.info, EMBED)
        if not expected.requires_grad and diagnostic.code == "detached-output":
            return  # detached as the known wrong program standing in for the reference is
        raise Fail(diagnostic) from None
    if not expected.requires_grad:  # a known wrong program's batch is detached, this one not
        raise Fail(Diagnostic("grad-mismatch", {"what": "`embeddings.grad`"}))
    expected.backward(cotangent)
    grad = ctx.student.attr(sent, "grad")
    if grad is not None:
        grad = expect_tensor(grad, "`embeddings.grad`").value
    diagnostic = compare_grad(grad, leaf.grad, "`embeddings.grad`")
    if diagnostic:  # no gradient at all: most likely it went to a parameter made from embeddings
        raise Fail(
            Diagnostic(diagnostic.code, dict(diagnostic.details, hint=NO_GRAD_HINT))
            if diagnostic.code == "grad-none"
            else diagnostic
        )
