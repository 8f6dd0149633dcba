"""Hidden checks for conv2d-einsum: PyTorch's conv2d (a valid cross-correlation) with einsum.

Expected values and gradients are the reference's, computed here on the CPU; the student's code
runs on the grading device. Which operations computed the output is read in the submission's
source (worker/harness/source_rules.py), never asked of the student's process, whose answers
(node names of its graph, flags) the submission can rewrite. The speed bonus times the
student's conv2d (a call, its output brought back, or the CPU its process spent from the
inputs' arrival to the output's reading, whichever is longer) against PyTorch's own, timed
here on the same device with its output brought to the CPU too, interleaved, and compares the
best times: noise only ever makes a call slower. The baseline is timed in the grader because the
student's process is theirs: a baseline there could be slowed down by the submission itself.
"""

import time

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
    refused_in_source,
)
from worker.harness.diagnostics import compare_grad, value_error_details
from worker.harness.remote import StudentError
from worker.harness.source_rules import forbidden_uses, obfuscated_lookups, own_functions

# (B, C, H, W), (O, C, kh, kw): B, C and O different and above 1, kernels and outputs not square,
# so that swapped axes change the shape and a flipped kernel changes the values
FIXED = (((2, 3, 6, 7), (4, 3, 3, 2)), ((3, 2, 5, 8), (2, 2, 2, 4)))
# the statement's other classes of shapes, run before the random ones in every other check so
# that a mistake made for one class only fails on every seed: one image, one channel and one
# filter with a kernel as large as the image (a 1 × 1 output), and a 1 × 1 kernel
EDGE = (((1, 1, 4, 5), (1, 1, 4, 5)), ((1, 2, 3, 5), (3, 2, 1, 1)))
FLOAT32 = {"rtol": 1e-4, "atol": 1e-5}
# enough work per call that the round trip to the student's process is small beside it, and
# many output positions: a Python loop over positions pays thousands of calls
SPEED_SHAPES = ((2, 16, 40, 40), (4, 16, 3, 3))
REPETITIONS = 5
# allowed: SLOWDOWN_ALLOWED × PyTorch's conv2d + CALL_SECONDS, a call's round trip to the
# student's process (about 2 ms here): an einsum takes about 10 × here, a loop over positions 150 ×
SLOWDOWN_ALLOWED = 20
# the bonus's values: float32 sums of C·kh·kw = 144 products, in whatever order the student's
# einsum (or PyTorch's own conv2d, its baseline) adds them, compared with the exact sum (float64):
# rtol as the values checks, plus the rounding such a sum may carry, a few units of float32's
# 2⁻²⁴ per √(terms) on the sum of the products' magnitudes
SUM_ROUNDING = 8 * 2.0**-24
CALL_SECONDS = 0.005
CLEARLY_SLOW_S = 2.0  # one call this slow settles it: no machine is that noisy
BUILT_IN_HINT = {
    "en": "Write the convolution yourself with `torch.einsum`: `F.conv2d`, `torch.conv2d` and "
    "`nn.Conv2d` are what it is checked against.",
    "es": "Escribe tú la convolución con `torch.einsum`: `F.conv2d`, `torch.conv2d` y "
    "`nn.Conv2d` son aquello con lo que se compara.",
}
# what the grader's reading of the source refuses: any name with "conv" in it that the file
# reaches on something other than its own definitions (PyTorch's functional and module
# convolutions, aten's and torch._C's under every name: convolution, _convolution, thnn_conv2d,
# slow_conv*, mkldnn_/cudnn_convolution, conv_tbc, conv_transpose*; NumPy's and SciPy's
# convolve), and the correlations NumPy and SciPy have (a Function of one's own could
# differentiate those). The file's own `def conv2d` stays its own.
BUILT_IN_WORDS = ("conv", "correlat")


def _built_in(name: str) -> bool:
    """A convolution's or a correlation's name, in any case."""
    return any(word in name.lower() for word in BUILT_IN_WORDS)


OBFUSCATED_HINT = {
    "en": "Write the names you use: the grader reads your file to check that no built-in "
    "convolution computes the result, and a lookup by a computed name, `__import__`, "
    "`eval`/`exec`, `globals()` or `__dict__` hides what it reaches.",
    "es": "Escribe los nombres que usas: el corrector lee tu archivo para comprobar que ninguna "
    "convolución ya hecha calcula el resultado, y una búsqueda por un nombre calculado, "
    "`__import__`, `eval`/`exec`, `globals()` o `__dict__` oculta lo que alcanza.",
}
OWN_FUNCTION_HINT = {
    "en": "Compute the convolution with `torch.einsum` on tensor operations autograd tracks, and "
    "let autograd differentiate it: no `torch.autograd.Function` of your own.",
    "es": "Calcula la convolución con `torch.einsum` sobre operaciones de tensores que autograd "
    "sigue, y deja que autograd la derive: sin ninguna `torch.autograd.Function` propia.",
}
SLOW_HINT = {
    "en": "A Python loop over output positions runs thousands of small operations: take every "
    "window at once (`Tensor.unfold` or `as_strided`) and contract windows and filter in "
    "one `torch.einsum`.",
    "es": "Un bucle de Python sobre las posiciones de la salida ejecuta miles de operaciones "
    "pequeñas: toma todas las ventanas a la vez (`Tensor.unfold` o `as_strided`) y "
    "contrae ventanas y filtro en un solo `torch.einsum`.",
}


def _shape_hint(got: list, shapes: tuple) -> dict | None:
    """The words for an output of the wrong shape, where the shape says which mistake made it:
    one image instead of the batch, a window count taken from the other side of the kernel, or
    one window short. None where it says nothing this precise."""
    (batch, _, height, width), (outputs, _, kh, kw) = shapes
    if len(got) != 4:
        return None
    head, tail = tuple(got[:2]), tuple(got[2:])
    if tail == (height - kh + 1, width - kw + 1) and head == (1, outputs) and batch > 1:
        return {
            "en": f"Your output holds 1 image where the input holds {batch}: convolve every "
            "image of the batch (keep the batch letter `b` in the einsum instead of "
            "taking `input[0]`).",
            "es": f"Tu salida tiene 1 imagen donde la entrada tiene {batch}: convoluciona "
            "todas las imágenes del lote (conserva la letra del lote, `b`, en el einsum "
            "en vez de tomar `input[0]`).",
        }
    if head != (batch, outputs):
        return None
    sides = {
        (height - kh + 1, width - kh + 1): ("width", "kh", "kw", "anchura"),
        (height - kw + 1, width - kw + 1): ("height", "kw", "kh", "altura"),
    }
    if tail in sides and kh != kw:
        side, used, right, lado = sides[tail]
        return {
            "en": f"Your output's {side} counts its windows with `{used}` = "
            f"{kh if used == 'kh' else kw}, the kernel's other side: along the {side} "
            f"the kernel measures `{right}` = {kw if right == 'kw' else kh} "
            "(`kh, kw = filter.shape[2:]`); the filter need not be square.",
            "es": f"La {lado} de tu salida cuenta sus ventanas con `{used}` = "
            f"{kh if used == 'kh' else kw}, el otro lado del núcleo: a lo {lado} el "
            f"núcleo mide `{right}` = {kw if right == 'kw' else kh} "
            "(`kh, kw = filter.shape[2:]`); el filtro no tiene por qué ser cuadrado.",
        }
    if tail == (height - kw + 1, width - kh + 1) and kh != kw:
        return {
            "en": "Your output counts its rows with the kernel's width and its columns with "
            "its height: the filter is (O, C, kh, kw), height before width, and need "
            "not be square.",
            "es": "Tu salida cuenta sus filas con la anchura del núcleo y sus columnas con "
            "su altura: el filtro es (O, C, kh, kw), la altura antes que la anchura, y "
            "no tiene por qué ser cuadrado.",
        }
    if tail == (height - kh, width - kw):
        return {
            "en": "One window short in each direction: a kernel of height kh fits "
            "H − kh + 1 times in an input of height H (positions 0 to H − kh), and "
            "likewise along the width.",
            "es": "Falta una ventana en cada dirección: un núcleo de altura kh cabe "
            "H − kh + 1 veces en una entrada de altura H (posiciones 0 a H − kh), y lo "
            "mismo a lo ancho.",
        }
    return None


FIRST_CHANNEL_HINT = {
    "en": "Your output is the convolution of the first channel only (`input[:, 0]` with "
    "`filter[:, 0]`): the sum runs over every channel c as well, "
    "`out[b, o, y, x] = Σ_c Σ_i Σ_j input[b, c, y + i, x + j] · filter[o, c, i, j]`.",
    "es": "Tu salida es la convolución solo del primer canal (`input[:, 0]` con "
    "`filter[:, 0]`): la suma recorre también todos los canales c, "
    "`out[b, o, y, x] = Σ_c Σ_i Σ_j input[b, c, y + i, x + j] · filter[o, c, i, j]`.",
}


def _values_hint(got: torch.Tensor, input: torch.Tensor, filter: torch.Tensor) -> dict | None:
    """The words for an output of the right shape and wrong values, where the values are those
    of a mistake the grader computes itself from the same inputs (in float64); None otherwise."""
    if input.shape[1] > 1:
        first = torch.nn.functional.conv2d(input[:, :1].double(), filter[:, :1].double())
        if torch.allclose(got.double(), first, rtol=1e-4, atol=1e-5):
            return FIRST_CHANNEL_HINT
    return None


def _with_hint(failure: Fail, hint: dict | None) -> Fail:
    if hint is None:
        return failure
    first, *rest = failure.diagnostics
    return Fail(Diagnostic(first.code, dict(first.details, hint=hint)), *rest)


def _what(shapes: tuple) -> str:
    input_shape, filter_shape = shapes
    return f"`conv2d(input, filter)` (input {input_shape}, filter {filter_shape})"


def _random_shapes(ctx: Context) -> tuple:
    batch, channels, outputs, kh, kw = (int(n) for n in ctx.randint(1, 5, (5,)))
    height, width = (int(n) for n in ctx.randint(0, 6, (2,)) + torch.tensor([kh, kw]))
    return (batch, channels, height, width), (outputs, channels, kh, kw)


def _inputs(ctx: Context, shapes: tuple, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(ctx.randn(*shape, dtype=dtype) for shape in shapes)


def _send(
    ctx: Context, input: torch.Tensor, filter: torch.Tensor, requires_grad: bool
) -> tuple[RemoteTensor, RemoteTensor]:
    return ctx.student.put(
        tuple(ctx.on_device(t).detach().requires_grad_(requires_grad) for t in (input, filter))
    )


def _output(
    ctx: Context, remote: tuple, expected: torch.Tensor, what: str, shapes: tuple
) -> RemoteTensor:
    return _output_of(ctx, call(ctx, "conv2d", *remote), expected, what, shapes)


def _output_of(
    ctx: Context, value: object, expected: torch.Tensor, what: str, shapes: tuple
) -> RemoteTensor:
    try:
        return expect_tensor(
            value, what, shape=expected.shape, dtype=expected.dtype, device=ctx.device
        )
    except Fail as failure:
        if failure.diagnostics[0].code != "shape-mismatch":
            raise
        raise _with_hint(failure, _shape_hint(list(value.shape), shapes)) from None


def _expect_values(ctx: Context, shapes: tuple, dtype: torch.dtype, **tolerances: float) -> None:
    """Sent requiring grad, as a layer's input and weights would. A submission whose source
    uses a built-in convolution earns nothing here."""
    input, filter = _inputs(ctx, shapes, dtype)
    expected = ctx.reference.conv2d(input.clone(), filter.clone())
    what = _what(shapes)
    output = _output(ctx, _send(ctx, input, filter, requires_grad=True), expected, what, shapes)
    try:
        expect_close(output, expected, what, **tolerances)
    except Fail as failure:
        raise _with_hint(failure, _values_hint(output.value, input, filter)) from None
    _refuse_by_source(ctx, what, output)


def _gradients(ctx: Context, shapes: tuple) -> tuple:
    """(student's, expected) for input.grad and for filter.grad, after a backward pass from the
    student's output with a random cotangent. An output with no graph fails that backward pass
    (`detached-output`), whatever the student's process says about it."""
    input, filter = _inputs(ctx, shapes, torch.float64)
    leaves = input.clone().requires_grad_(), filter.clone().requires_grad_()
    expected = ctx.reference.conv2d(*leaves)
    cotangent = ctx.randn(*expected.shape, dtype=torch.float64)
    expected.backward(cotangent)
    what = _what(shapes)
    remote = _send(ctx, input, filter, requires_grad=True)
    output = _output(ctx, remote, expected, what, shapes)
    try:
        ctx.student.method(output, "backward", ctx.on_device(cotangent))
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, what)) from None
    return tuple((ctx.student.attr(r, "grad"), leaf.grad) for r, leaf in zip(remote, leaves))


def _expect_grad(got: object, expected: torch.Tensor, name: str) -> None:
    if got is not None:
        got = expect_tensor(got, f"`{name}.grad`").value
    diagnostic = compare_grad(got, expected, f"`{name}.grad`")
    if diagnostic is not None and diagnostic.code == "grad-none":
        diagnostic = Diagnostic(
            "grad-none",
            dict(
                diagnostic.details,
                hint={
                    "en": f"The output must depend on `{name}` itself through tensor operations: no "
                    "`.detach()`, `.data` or copy made with `torch.tensor` on the way.",
                    "es": f"La salida debe depender del propio `{name}` mediante operaciones de "
                    "tensores: sin `.detach()`, `.data` ni copias hechas con `torch.tensor` por "
                    "el camino.",
                },
            ),
        )
    if diagnostic is not None:
        raise Fail(diagnostic)


GRAPH_NODES = 1 << 14  # what the graph search reads at most: a convolution buried deeper passes


def _refuse_by_graph(ctx: Context, output: object, what: str) -> None:
    """What ran, as autograd recorded it: the output's graph, read by the harness's own C-level
    look-ups (sealed), holds no convolution's node and no node of a Function of the file's own,
    however the source reached it (a name built at run time, a library's lookup)."""
    if not isinstance(output, RemoteTensor):
        return
    try:
        graph = ctx.student.describe(output, nodes=GRAPH_NODES)["graph"]
    except StudentError:
        return
    for node in graph if isinstance(graph, list) else ():
        name = str(node.get("name", "")) if isinstance(node, dict) else ""
        own = isinstance(node, dict) and node.get("python") is True
        if _built_in(name) or own:
            hint, rule = (
                (OWN_FUNCTION_HINT, "own-function")
                if own
                else (BUILT_IN_HINT, "built-in-convolution")
            )
            raise Fail(
                Diagnostic(
                    "forbidden-operation",
                    {
                        "what": what,
                        "hint": hint,
                        "rule": rule,
                        "found": name[:200],
                        "error": {
                            "en": f"its result was computed through `{name[:200]}`, read from its "
                            f"autograd graph: "
                            + ("a Function of your own" if own else "a built-in convolution"),
                            "es": f"su resultado se calculó a través de `{name[:200]}`, leído de "
                            f"su grafo de autograd: "
                            + ("una Function propia" if own else "una convolución ya hecha"),
                        },
                    },
                )
            )


def _refuse_by_source(ctx: Context, what: str, output: object = None) -> None:
    """Refuse a submission whose source, as the grader read it from the file, uses a built-in
    convolution, defines an autograd.Function of its own (what its forward computes is out of
    autograd's sight: F.conv2d wrapped in a Function named `Einsum` would pass as einsum), or
    reaches names it does not write out. Read here, not asked of the student's process, whose
    answers (its graph's node names among them) are the submission's to rewrite. Then, where
    there is an output, what ran (_refuse_by_graph)."""
    cells = ctx.source_cells
    rules = (
        (
            lambda: forbidden_uses(cells, _built_in),
            BUILT_IN_HINT,
            "built-in-convolution",
            ("uses", "a built-in convolution"),
            ("usa", "una convolución ya hecha"),
        ),
        (
            lambda: own_functions(cells),
            OWN_FUNCTION_HINT,
            "own-function",
            ("defines", "an `autograd.Function` of your own, whose inside autograd cannot see"),
            ("define", "una `autograd.Function` propia, cuyo interior autograd no ve"),
        ),
        (
            lambda: obfuscated_lookups(cells),
            OBFUSCATED_HINT,
            "obfuscated-lookup",
            ("uses", "a lookup the grader cannot follow in your source"),
            ("usa", "una búsqueda que el corrector no puede seguir en tu código"),
        ),
    )
    for find, hint, rule, (en_verb, en_what), (es_verb, es_what) in rules:
        found = find()
        if found:
            raise Fail(
                refused_in_source(
                    what,
                    hint,
                    rule,
                    found[0],
                    {"en": en_verb, "es": es_verb},
                    {"en": en_what, "es": es_what},
                )
            )
    _refuse_by_graph(ctx, output, what)


def speed_values_close(
    got: torch.Tensor, input: torch.Tensor, filter: torch.Tensor, reference
) -> bool:
    """Whether `got` (float32) is conv2d(input, filter) up to the rounding of float32 sums of
    that length, in any order: compared element by element with the sum in float64, within
    FLOAT32's rtol plus SUM_ROUNDING·√terms·Σ|products|."""
    exact = reference.conv2d(input.double(), filter.double())
    magnitude = reference.conv2d(input.double().abs(), filter.double().abs())
    terms = filter.shape[1] * filter.shape[2] * filter.shape[3]
    allowed = FLOAT32["rtol"] * exact.abs() + SUM_ROUNDING * terms**0.5 * magnitude
    return tuple(got.shape) == tuple(exact.shape) and bool(
        ((got.double() - exact).abs() <= allowed).all()
    )


def _timed(request) -> tuple[object, float]:
    started = time.perf_counter()
    value = request()
    return value, time.perf_counter() - started


@check(
    "values-fixed",
    points=3,
    uses="conv2d",
    en="values as F.conv2d's, float32: batches, several channels, non-square kernels",
    es="valores como los de F.conv2d, float32: lotes, varios canales, núcleos no cuadrados",
)
def values_fixed(ctx: Context) -> None:
    for shapes in FIXED:
        _expect_values(ctx, shapes, torch.float32, **FLOAT32)


@check(
    "values-random",
    points=2,
    uses="conv2d",
    en="values in float64: one image, one channel, 1 × 1 kernels, then random shapes",
    es="valores en float64: una imagen, un canal, núcleos 1 × 1, luego formas aleatorias",
)
def values_random(ctx: Context) -> None:
    for shapes in (*FIXED, *EDGE):  # every class of shapes, on every seed
        _expect_values(ctx, shapes, torch.float64)
    for _ in range(3):
        _expect_values(ctx, _random_shapes(ctx), torch.float64)


@check(
    "grad-input",
    points=2,
    uses="conv2d",
    en="gradient with respect to input",
    es="gradiente respecto a input",
)
def grad_input(ctx: Context) -> None:
    for shapes in (*FIXED, *EDGE, _random_shapes(ctx)):
        (got, expected), _ = _gradients(ctx, shapes)
        _expect_grad(got, expected, "input")


@check(
    "grad-filter",
    points=2,
    uses="conv2d",
    en="gradient with respect to filter",
    es="gradiente respecto a filter",
)
def grad_filter(ctx: Context) -> None:
    for shapes in (*FIXED, *EDGE, _random_shapes(ctx)):
        _, (got, expected) = _gradients(ctx, shapes)
        _expect_grad(got, expected, "filter")


@check(
    "own-convolution",
    points=1,
    uses="conv2d",
    en="your own convolution, not a built-in one",
    es="tu propia convolución, no una ya hecha",
)
def own_convolution(ctx: Context) -> None:
    input, filter = _inputs(ctx, FIXED[0], torch.float32)
    remote = _send(ctx, input, filter, requires_grad=True)
    what = _what(FIXED[0])
    _refuse_by_source(ctx, what, expect_tensor(call(ctx, "conv2d", *remote), what))


@check(
    "speed-bonus",
    points=1,
    uses="conv2d",
    timed=True,
    en=f"bonus: input {SPEED_SHAPES[0]}, at most {SLOWDOWN_ALLOWED} × the time of F.conv2d "
    f"+ {CALL_SECONDS * 1e3:.0f} ms",
    es=f"bonus: input {SPEED_SHAPES[0]}, como mucho {SLOWDOWN_ALLOWED} × el tiempo de F.conv2d "
    f"+ {CALL_SECONDS * 1e3:.0f} ms",
)
def speed_bonus(ctx: Context) -> None:
    what = _what(SPEED_SHAPES)
    # fresh inputs for every call, each result checked: remembering an earlier answer earns nothing
    inputs = [_inputs(ctx, SPEED_SHAPES, torch.float32) for _ in range(REPETITIONS + 1)]
    expected = [ctx.reference.conv2d(input.clone(), filter.clone()) for input, filter in inputs]

    def timed_student(k: int) -> float:
        """The call's time, or the CPU time the student's process spent from before its inputs
        were sent to after its output was read (its CPU clock, read from outside it), whichever
        is longer: work moved out of the call (done as the inputs arrive, the call returning a
        cache) counts too."""
        spent = ctx.student.cpu_seconds()
        remote = _send(ctx, *inputs[k], requires_grad=True)
        output, seconds = _timed(lambda: call(ctx, "conv2d", *remote))
        got = _output_of(ctx, output, expected[k], what, SPEED_SHAPES).value
        seconds = max(seconds, ctx.student.cpu_seconds() - spent)
        if not speed_values_close(got, *inputs[k], ctx.reference):
            raise _with_hint(
                Fail(
                    Diagnostic(
                        "output-mismatch", {"what": what, **value_error_details(got, expected[k])}
                    )
                ),
                _values_hint(got, *inputs[k]),
            )
        if k == 0:
            _refuse_by_source(ctx, what, output)
        return seconds

    def timed_baseline(k: int) -> float:
        input, filter = (ctx.on_device(t).requires_grad_() for t in inputs[k])
        return _timed(lambda: torch.nn.functional.conv2d(input, filter).cpu())[1]

    student = timed_student(0)  # the first calls warm up: the student's counts, as a slow sample
    timed_baseline(0)
    baseline, calls = float("inf"), 1
    for k in range(1, REPETITIONS + 1):
        baseline = min(baseline, timed_baseline(k))
        if student > CLEARLY_SLOW_S:
            break
        student = min(student, timed_student(k))
        calls += 1
    allowed = SLOWDOWN_ALLOWED * baseline + CALL_SECONDS
    if student > allowed:
        raise Fail(
            Diagnostic(
                "timeout",
                {
                    "seconds": round(student, 4),
                    "hint": SLOW_HINT,
                    "what": {
                        "en": f"`conv2d` on input {SPEED_SHAPES[0]}, filter {SPEED_SHAPES[1]} (best of "
                        f"{calls}: {student * 1e3:.1f} ms; allowed: {allowed * 1e3:.1f} ms, "
                        f"{SLOWDOWN_ALLOWED} × F.conv2d's + {CALL_SECONDS * 1e3:.0f} ms)",
                        "es": f"`conv2d` con input {SPEED_SHAPES[0]}, filter {SPEED_SHAPES[1]} (el mejor de "
                        f"{calls}: {student * 1e3:.1f} ms; permitido: {allowed * 1e3:.1f} ms, "
                        f"{SLOWDOWN_ALLOWED} × lo de F.conv2d + {CALL_SECONDS * 1e3:.0f} ms)",
                    },
                },
            )
        )
