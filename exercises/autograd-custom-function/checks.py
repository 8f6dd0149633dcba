"""Hidden checks for autograd-custom-function: SiLU(x) = x·σ(x) as a torch.autograd.Function.

Each check runs a fixed case first (v is not constant and x spans both signs, so that no known
wrong program passes it), then a random one. Expected values are the reference's. A gradient is
compared with the reference's where the Function's forward is right, and otherwise, where `silu`
is that Function applied (read in the file), with central differences of the student's own
forward, evaluated in the student process at points chosen here and differenced here in float64:
a backward consistent with a wrong forward is still right.
Whether `silu` applies the student's Function is read in the submission's source
(worker/harness/source_rules.py), never asked of the student's process: its answers (the node
names of its graph, its flags) are the submission's to rewrite. The gradients are those of the
student's Function itself: the grader calls `SiLU.apply` (on the class, reached from an instance
the student process makes) and starts the backward pass from its output, once the source shows
`SiLU` as a subclass of torch's own autograd.Function that nothing else changes; so a gradient
comes from that Function's `backward`, not from autograd differentiating whatever `silu` returns.
A wrong gradient (where the forward is right) is named only when it equals, element by element, one
of WRONG_DERIVATIVES computed here from the same x and v; autograd's complaint about the shape or
number of the gradients backward returned, and an error on x.t() alone (the same values in
contiguous memory going through), choose a hint's words.
"""

import re

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteObject,
    RemoteTensor,
    call,
    check,
    diagnose_exception,
    expect_close,
    expect_tensor,
)
from worker.harness.diagnostics import close, compare_grad
from worker.harness.remote import StudentError
from worker.harness.source_rules import applies_own_function, obfuscated_lookups, own_function

STEP = 1e-6  # float64: truncation error ~STEP², rounding error ~1e-16/STEP
FIXED_X = [[-3.0, -1.0, 0.0], [0.5, 2.0, 4.0]]
FIXED_V = [[1.0, -2.0, 0.5], [3.0, -0.5, 2.0]]
SAME_DTYPE = {
    "en": "The output keeps the input's dtype: compute it from `x` alone, without `.float()`, "
    "`.double()` or new tensors of a fixed dtype (`torch.tensor(...)`, `torch.ones(...)`) "
    "inside `forward`.",
    "es": "La salida conserva el dtype de la entrada: calcúlala solo a partir de `x`, sin "
    "`.float()`, `.double()` ni tensores nuevos de un dtype fijo (`torch.tensor(...)`, "
    "`torch.ones(...)`) dentro de `forward`.",
}
APPLIED_TO_EXPRESSION = {
    "en": "Your Function is applied to the result of other operations, which autograd "
    "differentiates itself: pass `x` itself to `SiLU.apply` and compute x·σ(x) inside "
    "`forward`, so that your `backward` gives the gradient.",
    "es": "Tu Function se aplica al resultado de otras operaciones, que autograd deriva por su "
    "cuenta: pasa el propio `x` a `SiLU.apply` y calcula x·σ(x) dentro de `forward`, para "
    "que sea tu `backward` quien dé el gradiente.",
}


# Wrong backwards recognised by their values, (name, derivative of x·σ(x) they return in place of
# σ(x)(1 + x(1 − σ(x))), times grad_output unless said), computed here in float64 from x: a hint
# is given only when the student's x.grad is that one, element by element.
def _sigma(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x)


WRONG_DERIVATIVES = (
    ("sigma-term-missing", lambda x: x * _sigma(x) * (1 - _sigma(x)), True),
    ("sigma-only", lambda x: _sigma(x), True),
    ("sigma-prime-only", lambda x: _sigma(x) * (1 - _sigma(x)), True),
    ("sigma-of-minus-x", lambda x: _sigma(-x) * (1 + x * (1 - _sigma(-x))), True),
    ("no-grad-output", lambda x: _sigma(x) * (1 + x * (1 - _sigma(x))), False),
)
WRONG_DERIVATIVE_HINTS = {
    "sigma-term-missing": {
        "en": "Your backward returns `grad_output · x·σ(x)(1 − σ(x))` alone, without the `σ(x)` "
        "term: by the product rule d(x·σ(x))/dx = 1·σ(x) + x·σ'(x) = σ(x) + "
        "x·σ(x)(1 − σ(x)).",
        "es": "Tu backward devuelve `grad_output · x·σ(x)(1 − σ(x))` solo, sin el término "
        "`σ(x)`: por la regla del producto, d(x·σ(x))/dx = 1·σ(x) + x·σ'(x) = σ(x) + "
        "x·σ(x)(1 − σ(x)).",
    },
    "sigma-only": {
        "en": "Your backward returns `grad_output · σ(x)`: by the product rule d(x·σ(x))/dx = "
        "σ(x) + x·σ(x)(1 − σ(x)); the second term is missing.",
        "es": "Tu backward devuelve `grad_output · σ(x)`: por la regla del producto, "
        "d(x·σ(x))/dx = σ(x) + x·σ(x)(1 − σ(x)); falta el segundo término.",
    },
    "sigma-prime-only": {
        "en": "Your backward returns `grad_output · σ(x)(1 − σ(x))`, the derivative of σ alone, "
        "not of x·σ(x): by the product rule d(x·σ(x))/dx = σ(x) + x·σ(x)(1 − σ(x)).",
        "es": "Tu backward devuelve `grad_output · σ(x)(1 − σ(x))`, la derivada de σ sola y no "
        "la de x·σ(x): por la regla del producto, d(x·σ(x))/dx = σ(x) + "
        "x·σ(x)(1 − σ(x)).",
    },
    "sigma-of-minus-x": {
        "en": "Your backward's values are the right formula with σ(−x) where σ(x) belongs: check "
        "the sign of the exponent where backward computes σ, σ(x) = 1 / (1 + e^(−x)) "
        "(`torch.exp(-x)`), or use `torch.sigmoid(x)`.",
        "es": "Los valores de tu backward son los de la fórmula correcta con σ(−x) donde "
        "corresponde σ(x): revisa el signo del exponente donde backward calcula σ, "
        "σ(x) = 1 / (1 + e^(−x)) (`torch.exp(-x)`), o usa `torch.sigmoid(x)`.",
    },
    "no-grad-output": {
        "en": "Your backward returns the derivative σ(x)(1 + x(1 − σ(x))) alone: by the chain "
        "rule it must be multiplied by `grad_output`.",
        "es": "Tu backward devuelve solo la derivada σ(x)(1 + x(1 − σ(x))): por la regla de la "
        "cadena hay que multiplicarla por `grad_output`.",
    },
}
NON_CONTIGUOUS = {
    "en": "This input is `x.t()`, a non-contiguous tensor, and only it fails: the same values "
    "in contiguous memory went through. {hint}",
    "es": "Esta entrada es `x.t()`, un tensor no contiguo, y solo ella falla: los mismos valores "
    "en memoria contigua pasaron. {hint}",
}
NON_CONTIGUOUS_GENERIC = {
    "en": "Work elementwise on `x` as it comes (`x * torch.sigmoid(x)`), or use `reshape` / "
    "`.contiguous()` where you regroup it: `view` needs contiguous memory.",
    "es": "Trabaja elemento a elemento sobre `x` tal como llega (`x * torch.sigmoid(x)`), o usa "
    "`reshape` / `.contiguous()` donde lo reagrupes: `view` necesita memoria contigua.",
}
GRADIENT_SHAPE = {
    "en": "Your `backward` returned a gradient of shape [{got}] for an `x` of shape "
    "[{expected}]: it must return one gradient per element of `x`, with `x`'s shape: "
    "`grad_output` times the derivative, element by element.{reduced}",
    "es": "Tu `backward` devolvió un gradiente de forma [{got}] para un `x` de forma "
    "[{expected}]: debe devolver un gradiente por elemento de `x`, con la forma de `x`: "
    "`grad_output` por la derivada, elemento a elemento.{reduced}",
}
REDUCED = {
    "en": " Shape [] is a single number: a reduction (`.sum()`, `.mean()`) collapsed it.",
    "es": " La forma [] es un solo número: una reducción (`.sum()`, `.mean()`) lo redujo.",
}
GRADIENT_IN_PLACE = {
    "en": "After `y.sum().backward()`, as in the statement, your `backward` wrote in place into a "
    "tensor whose elements share one memory location: that is the `grad_output` autograd "
    "hands it there (ones, expanded). Return a new tensor, `return grad_output * ...`, "
    "rather than changing `grad_output` (`mul_`, `*=`).",
    "es": "Tras `y.sum().backward()`, como en el enunciado, tu `backward` escribió «in situ» en un "
    "tensor cuyos elementos comparten una misma posición de memoria: es el `grad_output` "
    "que autograd le pasa ahí (unos, expandidos). Devuelve un tensor nuevo, "
    "`return grad_output * ...`, en lugar de modificar `grad_output` (`mul_`, `*=`).",
}
GRADIENT_COUNT = {
    "en": "Your `backward` returned {got} gradients: `forward` has one input besides `ctx`, `x`, "
    "so `backward` returns one tensor (`return grad_output * ...`), not a tuple.",
    "es": "Tu `backward` devolvió {got} gradientes: `forward` tiene una sola entrada además de "
    "`ctx`, `x`, así que `backward` devuelve un tensor (`return grad_output * ...`), no "
    "una tupla.",
}


def _cases(ctx: Context, dtype: torch.dtype = torch.float64):
    """(x, v): the fixed case, then a random one."""
    yield torch.tensor(FIXED_X, dtype=dtype), torch.tensor(FIXED_V, dtype=dtype)
    shape = tuple(int(n) for n in ctx.randint(2, 7, (2,)))
    yield (3 * ctx.randn(*shape, dtype=torch.float64)).to(dtype), ctx.randn(*shape, dtype=dtype)


def _silu(ctx: Context, x: RemoteTensor, expected: torch.Tensor) -> RemoteTensor:
    """The student's silu(x), of the reference's shape."""
    return expect_tensor(call(ctx, "silu", x), "`silu(x)`", shape=expected.shape)


def _expect_dtype(y: RemoteTensor, x_dtype: torch.dtype, expected: torch.Tensor) -> None:
    if y.dtype != expected.dtype:
        name = str(x_dtype).removeprefix("torch.")
        raise Fail(
            Diagnostic(
                "dtype-mismatch",
                {
                    "what": {
                        "en": f"`silu(x)` for a {name} `x`",
                        "es": f"`silu(x)` para un `x` {name}",
                    },
                    "got": str(y.dtype),
                    "expected": str(expected.dtype),
                    "hint": SAME_DTYPE,
                },
            )
        )


def _reference(ctx: Context, x: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's silu(x) and x.grad after silu(x).backward(v)."""
    leaf = x.detach().clone().requires_grad_()
    y = ctx.reference.silu(leaf)
    y.backward(v)
    return y.detach(), leaf.grad


def _finite_differences(ctx: Context, function: RemoteObject, x: torch.Tensor) -> torch.Tensor:
    """dSiLU/dx elementwise, of the Function's own forward: SiLU acts elementwise, so one shift
    of every element gives them all. Differences of STEP need a float64 forward: one of another
    dtype cannot be differenced."""
    x = x.detach().double()
    plus, minus = ctx.student.put((ctx.on_device(x + STEP), ctx.on_device(x - STEP)))
    f_plus, f_minus = (_apply(ctx, function, shifted, x) for shifted in (plus, minus))
    for f in (f_plus, f_minus):
        _expect_dtype(f, torch.float64, x)
    return (f_plus.value - f_minus.value) / (2 * STEP)


FUNCTION_HINT = {
    "en": "Write `class SiLU(torch.autograd.Function)` with static `forward` and `backward` "
    "(no `apply`, `__init__` or `__new__` of your own, no metaclass, nothing that changes it "
    "after its definition): the grader measures the gradient of `SiLU.apply` itself.",
    "es": "Escribe `class SiLU(torch.autograd.Function)` con `forward` y `backward` estáticos "
    "(sin `apply`, `__init__` ni `__new__` propios, sin metaclase, sin nada que la cambie "
    "después de definirla): el corrector mide el gradiente del propio `SiLU.apply`.",
}


def _function(ctx: Context) -> RemoteObject:
    """The student's class SiLU, as a handle in its process, once the grader has read in the
    file that it is a subclass of torch's own autograd.Function, with forward and backward,
    that nothing else changes (and that no lookup hides what the file reaches). Without it no
    backward of the student's own can be measured, and the gradient points are not earned."""
    _refuse_obfuscated(ctx)
    if not own_function(ctx.source_cells, "SiLU"):
        raise Fail(
            Diagnostic(
                "custom-function-unused", {"what": "`SiLU`", "got": None, "hint": FUNCTION_HINT}
            )
        )
    instance = call(ctx, "SiLU")  # the class's `apply` is a classmethod: reached from here
    if not isinstance(instance, RemoteObject):
        raise Fail(
            Diagnostic(
                "custom-function-unused", {"what": "`SiLU`", "got": None, "hint": FUNCTION_HINT}
            )
        )
    try:
        function = ctx.student.attr(instance, "__class__")
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, "`SiLU`")) from None
    if not isinstance(function, RemoteObject):
        raise Fail(
            Diagnostic(
                "custom-function-unused", {"what": "`SiLU`", "got": None, "hint": FUNCTION_HINT}
            )
        )
    return function


def _apply(
    ctx: Context, function: RemoteObject, x: RemoteTensor, expected: torch.Tensor
) -> RemoteTensor:
    """The student's SiLU.apply(x), of the reference's shape."""
    try:
        y = ctx.student.method(function, "apply", x)
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, "`SiLU.apply(x)`")) from None
    return expect_tensor(y, "`SiLU.apply(x)`", shape=expected.shape)


def _function_backward(
    ctx: Context,
    function: RemoteObject,
    x0: torch.Tensor,
    v: torch.Tensor,
    *,
    transposed: bool = False,
    summed: bool = False,
    **tolerances: float,
) -> None:
    """x.grad after the grader's own y = SiLU.apply(x0).backward(v) in the student's process,
    where x0 is a fresh x or, `transposed`, x.t(): the student's backward, whatever `silu`
    does. `summed`: y.sum().backward() instead, as the statement and a notebook run it (v is
    then ones)."""
    x = ctx.student.put(ctx.on_device((x0.t() if transposed else x0).clone()).requires_grad_())
    sent = ctx.student.method(x, "t") if transposed else x
    expected_y = _reference(ctx, x0, v)[0]
    y = _apply(ctx, function, sent, expected_y)
    _expect_dtype(y, x0.dtype, expected_y)
    _backward(ctx, y, None if summed else v)
    _expect_backward(ctx, function, x, x0, y, v, transposed=transposed, **tolerances)


def _backward(ctx: Context, y: RemoteTensor, v: torch.Tensor | None) -> None:
    """The backward pass, in the student's process: an output with no graph fails it
    (`detached-output`), whatever the process says about the output's flags. `v` None:
    y.sum().backward(), where autograd hands backward an expanded `grad_output`."""
    try:
        if v is None:
            ctx.student.method(ctx.student.method(y, "sum"), "backward")
        else:
            ctx.student.method(y, "backward", ctx.on_device(v))
    except StudentError as exc:
        diagnostic = diagnose_exception(
            exc.info, "`silu(x).sum().backward()`" if v is None else "`silu(x).backward(v)`"
        )
        hint = _backward_error_hint(str(exc.info.get("message", "")))
        if hint and diagnostic.code == "exception":
            diagnostic = Diagnostic("exception", dict(diagnostic.details, hint=hint))
        raise Fail(diagnostic) from None


def _backward_error_hint(message: str) -> dict | None:
    """Words for autograd's own complaint about what a backward returned (its message only
    chooses them)."""
    shape = re.search(
        r"returned an invalid gradient at index 0 - got \[([\d, ]*)\] but expected "
        r"shape compatible with \[([\d, ]*)\]",
        message,
    )
    if shape:
        got, expected = shape.groups()
        return {
            lang: GRADIENT_SHAPE[lang].format(
                got=got, expected=expected, reduced=REDUCED[lang] if not got else ""
            )
            for lang in GRADIENT_SHAPE
        }
    if (
        "more than one element of the written-to tensor refers to a single memory location"
        in message
    ):
        return GRADIENT_IN_PLACE
    count = re.search(
        r"returned an incorrect number of gradients \(expected 1, got (\d+)\)", message
    )
    if count:
        return {lang: GRADIENT_COUNT[lang].format(got=count.group(1)) for lang in GRADIENT_COUNT}
    return None


def _expect_backward(
    ctx: Context,
    function: RemoteObject,
    x: RemoteTensor,
    x0: torch.Tensor,
    y: RemoteTensor,
    v: torch.Tensor,
    *,
    transposed: bool = False,
    **tolerances: float,
) -> None:
    """x.grad after y = SiLU.apply(x0).backward(v), where x0 is x or, `transposed`, x.t()."""
    expected_y, expected = _reference(ctx, x0, v)
    # a backward consistent with a wrong forward is still right, where that forward is silu's
    # (read in the file, and silu(x0) gives the same values here): a Function that silu does
    # not apply, or whose forward answers the grader otherwise than silu, has none to excuse
    if (
        not close(y.value, expected_y, 1e-5, 1e-6)
        and applies_own_function(ctx.source_cells, "silu").applied
        and _as_silu_gives(ctx, x0, y)
    ):
        expected = (v.double() * _finite_differences(ctx, function, x0)).to(v.dtype)
    what = "`x.grad`"
    grad = ctx.student.attr(x, "grad")
    if grad is not None:
        grad = expect_tensor(grad, what, dtype=expected.dtype).value
    diagnostic = compare_grad(grad, expected.t() if transposed else expected, what, **tolerances)
    if diagnostic is not None and diagnostic.code == "grad-mismatch":
        diagnostic = Diagnostic("custom-backward-mismatch", diagnostic.details)
        if close(y.value, expected_y, 1e-5, 1e-6) and grad is not None:
            hint = _wrong_derivative(grad, x0, v, transposed, **tolerances)
            if hint:
                diagnostic = Diagnostic(
                    "custom-backward-mismatch", dict(diagnostic.details, hint=hint)
                )
    if diagnostic is not None:
        raise Fail(diagnostic)


def _as_silu_gives(ctx: Context, x0: torch.Tensor, y: RemoteTensor) -> bool:
    """Whether the student's `silu(x0)` gives the values its Function gave the grader (a
    review's forward told the two callers apart by its stack, and gave silu's right values)."""
    try:
        got = call(ctx, "silu", ctx.student.put(x0.detach().clone()))
    except Fail:
        return False
    return (
        isinstance(got, RemoteTensor) and got.shape == y.shape and torch.equal(got.value, y.value)
    )


def _wrong_derivative(
    grad: torch.Tensor,
    x0: torch.Tensor,
    v: torch.Tensor,
    transposed: bool,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> dict | None:
    """The hint of the one wrong backward of WRONG_DERIVATIVES whose values, computed here from
    x0 and v, are the student's x.grad; None if none is."""
    x, cotangent = x0.detach().double(), v.double()
    for name, derivative, chained in WRONG_DERIVATIVES:
        candidate = derivative(x) * (cotangent if chained else 1)
        candidate = candidate.t() if transposed else candidate
        if grad.shape == candidate.shape and close(
            grad, candidate, max(rtol, 1e-4), max(atol, 1e-5)
        ):
            return WRONG_DERIVATIVE_HINTS[name]
    return None


def _claim(tensor: RemoteTensor, key: str) -> object:
    """What the student's process says about a tensor (its grad_fn's name, say): words for a
    diagnostic, never a point."""
    claims = getattr(tensor, "claims", None)
    if not isinstance(claims, dict) or key not in claims:
        claims = tensor.meta if isinstance(tensor.meta, dict) else {}
    return claims.get(key)


def _reference_state(y: torch.Tensor) -> str:
    """How the grader's own silu (the reference, or a known wrong program standing in for it)
    uses a Function, read from the graph of its output here, in the grader: "applied" (a
    Function's node straight on the leaf), "to-expression" (more below it) or "unused"."""
    fn = y.grad_fn
    if not isinstance(fn, torch.autograd.function.BackwardCFunction):
        return "unused"
    below = [f for f, _ in fn.next_functions if f is not None]
    return (
        "applied" if all(type(f).__name__ == "AccumulateGrad" for f in below) else "to-expression"
    )


OBFUSCATED_HINT = {
    "en": "Write the names you use: the grader reads your file to check that `silu` applies your "
    "Function, and a lookup by a computed name, `__import__`, `eval`/`exec`, `globals()`, "
    "`__dict__` or `sys.modules` hides what it reaches.",
    "es": "Escribe los nombres que usas: el corrector lee tu archivo para comprobar que `silu` "
    "aplica tu Function, y una búsqueda por un nombre calculado, `__import__`, "
    "`eval`/`exec`, `globals()`, `__dict__` o `sys.modules` oculta lo que alcanza.",
}


def _refuse_obfuscated(ctx: Context) -> None:
    """The checks that rest on the reading of the file fail where it uses a lookup the reading
    cannot follow."""
    found = obfuscated_lookups(ctx.source_cells)
    if found:
        first = found[0]
        raise Fail(
            Diagnostic(
                "forbidden-operation",
                {
                    "what": "`silu(x)`",
                    "hint": OBFUSCATED_HINT,
                    "rule": "obfuscated-lookup",
                    "found": first.name,
                    "line": first.line,
                    "file": first.cell,
                    "error": {
                        "en": f"your file uses {first.name} ({first.where()}), a lookup the "
                        "grader cannot follow in your source",
                        "es": f"tu archivo usa {first.name} ({first.where()}), una búsqueda que "
                        "el corrector no puede seguir en tu código",
                    },
                },
            )
        )


@check(
    "forward-values",
    points=2,
    uses="silu",
    en="forward: silu(x) = x·σ(x)",
    es="forward: silu(x) = x·σ(x)",
)
def forward_values(ctx: Context) -> None:
    for x, _ in _cases(ctx):
        expected = ctx.reference.silu(x.clone().requires_grad_()).detach()
        x_sent = ctx.student.put(ctx.on_device(x.clone()).requires_grad_())
        y = _silu(ctx, x_sent, expected)
        _expect_dtype(y, x.dtype, expected)
        expect_close(y, expected, "`silu(x)`")


@check(
    "backward-finite-differences",
    points=3,
    uses=("silu", "SiLU"),
    en="backward of SiLU.apply, with a cotangent v and after y.sum(), agrees with finite "
    "differences of forward",
    es="el backward de SiLU.apply, con un cotangente v y tras y.sum(), coincide con las "
    "diferencias finitas de forward",
)
def backward_finite_differences(ctx: Context) -> None:
    function = _function(ctx)
    for x0, v in _cases(ctx):
        _function_backward(ctx, function, x0, v)
    x0, _ = next(_cases(ctx))
    _function_backward(ctx, function, x0, torch.ones_like(x0), summed=True)


@check(
    "graph-uses-function",
    points=2,
    uses=("silu", "SiLU"),
    en="silu(x) is your Function applied to x (read in your file)",
    es="silu(x) es tu Function aplicada a x (leído en tu archivo)",
)
def graph_uses_function(ctx: Context) -> None:
    """Read in the source: `silu`, as the file leaves it, calls `C.apply(x)` on its own argument
    `x` (unchanged), where C is a class of the file derived from torch.autograd.Function with a
    forward and a backward (or `silu = C.apply`). `C.apply(x * torch.sigmoid(x))` applies it to an
    expression autograd already differentiates. A call whose result is dropped earns nothing a
    correct call would not: the other checks score silu's values and gradients. What the
    student's process says (its output's grad_fn) only words the diagnostic."""
    _refuse_obfuscated(ctx)
    x0, _ = next(_cases(ctx))
    applied = applies_own_function(ctx.source_cells, "silu")
    state = "applied" if applied.applied else "to-expression" if applied.to_expression else "unused"
    if state == _reference_state(ctx.reference.silu(x0.clone().requires_grad_())):
        return
    got = None
    try:  # words only: the grad_fn the student's process names for silu(x)
        y = ctx.student.call("silu", ctx.student.put(ctx.on_device(x0).requires_grad_()))
        got = _claim(y, "grad_fn") if isinstance(y, RemoteTensor) else None
    except StudentError:
        pass
    got = got if isinstance(got, str) and len(got) <= 100 else applied.returned
    if applied.to_expression:
        raise Fail(
            Diagnostic(
                "custom-function-unused",
                {"what": "`silu(x)`", "got": got, "hint": APPLIED_TO_EXPRESSION},
            )
        )
    raise Fail(Diagnostic("custom-function-unused", {"what": "`silu(x)`", "got": got}))


@check(
    "non-contiguous-input",
    points=1,
    uses=("silu", "SiLU"),
    en="a non-contiguous input (x.t()): silu's values, SiLU.apply's gradient",
    es="una entrada no contigua (x.t()): valores de silu, gradiente de SiLU.apply",
)
def non_contiguous_input(ctx: Context) -> None:
    for x0, _ in _cases(ctx):
        x = ctx.student.put(ctx.on_device(x0.clone()).requires_grad_())
        transposed = ctx.student.method(x, "t")
        expected = ctx.reference.silu(x0.t()).detach()
        try:
            y = _silu(ctx, transposed, expected)
        except Fail as fail:
            raise _non_contiguous(ctx, fail, x0, expected) from None
        expect_close(y, expected, "`silu(x.t())`")
    function = _function(ctx)
    for x0, v in _cases(ctx):
        _function_backward(ctx, function, x0.t(), v.t(), transposed=True)


def _non_contiguous(ctx: Context, fail: Fail, x0: torch.Tensor, expected: torch.Tensor) -> Fail:
    """`fail`, raised by silu(x.t()), with the input named as its cause when the same values in
    contiguous memory go through silu (one more call, only on failure)."""
    if [d.code for d in fail.diagnostics] != ["exception"]:
        return fail
    try:
        contiguous = ctx.student.put(ctx.on_device(x0.t().contiguous()).requires_grad_())
        y = ctx.student.call("silu", contiguous)
    except StudentError:
        return fail
    if (
        not isinstance(y, RemoteTensor)
        or tuple(y.shape) != tuple(expected.shape)
        or not close(y.value, expected, 1e-5, 1e-6)
    ):
        return fail
    details = fail.diagnostics[0].details
    hint = details.get("hint") or NON_CONTIGUOUS_GENERIC
    return Fail(
        Diagnostic(
            "exception",
            dict(
                details,
                hint={
                    lang: NON_CONTIGUOUS[lang].format(
                        hint=hint.get(lang, hint.get("en")) if isinstance(hint, dict) else hint
                    )
                    for lang in NON_CONTIGUOUS
                },
            ),
        )
    )


@check(
    "float32",
    points=2,
    uses=("silu", "SiLU"),
    en="float32 in, float32 out (silu's values, SiLU.apply's gradient)",
    es="float32 en la entrada y en la salida (valores de silu, gradiente de SiLU.apply)",
)
def float32(ctx: Context) -> None:
    for x0, _ in _cases(ctx, torch.float32):
        x = ctx.student.put(ctx.on_device(x0.clone()).requires_grad_())
        expected = ctx.reference.silu(x0.clone()).detach()
        y = _silu(ctx, x, expected)
        _expect_dtype(y, x0.dtype, expected)
        expect_close(y, expected, "`silu(x)`")
    function = _function(ctx)
    for x0, v in _cases(ctx, torch.float32):
        _function_backward(ctx, function, x0, v, rtol=1e-4, atol=1e-5)
