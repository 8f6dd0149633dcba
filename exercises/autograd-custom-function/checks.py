"""Hidden checks for autograd-custom-function: SiLU(x) = x·σ(x) as a torch.autograd.Function.

Each check runs a fixed case first (v is not constant and x spans both signs, so that no known
wrong program passes it), then a random one. Expected values are the reference's. A gradient is
compared with the reference's where the student's forward is right, and otherwise with central
differences of the student's own forward, evaluated in the student process at points chosen here
and differenced here in float64: a backward consistent with a wrong forward is still right.
"""
import torch

from worker.harness.checks import (Context, Diagnostic, Fail, RemoteTensor, call, check,
                                   diagnose_exception, expect_close, expect_tensor)
from worker.harness.diagnostics import close, compare_grad
from worker.harness.remote import StudentError

STEP = 1e-6  # float64: truncation error ~STEP², rounding error ~1e-16/STEP
FIXED_X = [[-3.0, -1.0, 0.0], [0.5, 2.0, 4.0]]
FIXED_V = [[1.0, -2.0, 0.5], [3.0, -0.5, 2.0]]
SAME_DTYPE = {
    "en": "The output keeps the input's dtype: compute it from `x` alone, without `.float()`, "
          "`.double()` or new tensors of a fixed dtype (`torch.tensor(...)`, `torch.ones(...)`) "
          "inside `forward`.",
    "es": "La salida conserva el dtype de la entrada: calcúlala solo a partir de `x`, sin "
          "`.float()`, `.double()` ni tensores nuevos de un dtype fijo (`torch.tensor(...)`, "
          "`torch.ones(...)`) dentro de `forward`."}
APPLIED_TO_EXPRESSION = {
    "en": "Your Function is applied to the result of other operations, which autograd "
          "differentiates itself: pass `x` itself to `SiLU.apply` and compute x·σ(x) inside "
          "`forward`, so that your `backward` gives the gradient.",
    "es": "Tu Function se aplica al resultado de otras operaciones, que autograd deriva por su "
          "cuenta: pasa el propio `x` a `SiLU.apply` y calcula x·σ(x) dentro de `forward`, para "
          "que sea tu `backward` quien dé el gradiente."}


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
        raise Fail(Diagnostic("dtype-mismatch", {
            "what": {"en": f"`silu(x)` for a {name} `x`", "es": f"`silu(x)` para un `x` {name}"},
            "got": str(y.dtype), "expected": str(expected.dtype), "hint": SAME_DTYPE}))


def _reference(ctx: Context, x: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's silu(x) and x.grad after silu(x).backward(v)."""
    leaf = x.detach().clone().requires_grad_()
    y = ctx.reference.silu(leaf)
    y.backward(v)
    return y.detach(), leaf.grad


def _finite_differences(ctx: Context, x: torch.Tensor) -> torch.Tensor:
    """dSiLU/dx elementwise: SiLU acts elementwise, so one shift of every element gives them all.
    Differences of STEP need a float64 forward: one of another dtype cannot be differenced."""
    x = x.detach().double()
    plus, minus = ctx.student.put((ctx.on_device(x + STEP), ctx.on_device(x - STEP)))
    f_plus, f_minus = (_silu(ctx, shifted, x) for shifted in (plus, minus))
    for f in (f_plus, f_minus):
        _expect_dtype(f, torch.float64, x)
    return (f_plus.value - f_minus.value) / (2 * STEP)


def _backward(ctx: Context, y: RemoteTensor, v: torch.Tensor) -> None:
    if not y.requires_grad:
        raise Fail(Diagnostic("detached-output", {"what": "`silu(x)`"}))
    try:
        ctx.student.method(y, "backward", ctx.on_device(v))
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, "`silu(x).backward(v)`")) from None


def _expect_backward(ctx: Context, x: RemoteTensor, x0: torch.Tensor, y: RemoteTensor,
                     v: torch.Tensor, *, transposed: bool = False, **tolerances: float) -> None:
    """x.grad after the student's y = silu(x0).backward(v), where x0 is x or, `transposed`, x.t()."""
    expected_y, expected = _reference(ctx, x0, v)
    if not close(y.value, expected_y, 1e-5, 1e-6):
        expected = (v.double() * _finite_differences(ctx, x0)).to(v.dtype)
    what = "`x.grad`"
    grad = ctx.student.attr(x, "grad")
    if grad is not None:
        grad = expect_tensor(grad, what, dtype=expected.dtype).value
    diagnostic = compare_grad(grad, expected.t() if transposed else expected, what, **tolerances)
    if diagnostic is not None and diagnostic.code == "grad-mismatch":
        diagnostic = Diagnostic("custom-backward-mismatch", diagnostic.details)
    if diagnostic is not None:
        raise Fail(diagnostic)


def _graph(fn) -> list[dict]:
    """The grad_fn graph as ctx.student.describe gives it: breadth-first, class names and the
    indices of each node's next nodes."""
    nodes, index, queue = [], {}, [fn] if fn is not None else []
    while queue:
        node = queue.pop(0)
        if id(node) not in index:
            index[id(node)] = len(nodes)
            nexts = [f for f, _ in node.next_functions if f is not None]
            nodes.append({"name": type(node).__name__, "next": nexts})
            queue.extend(nexts)
    for node in nodes:
        node["next"] = [index[id(f)] for f in node["next"]]
    return nodes


def _path(graph: list[dict]) -> str:
    """The graph from its root, always along the first edge: `A → B → AccumulateGrad`."""
    names, at = [], 0 if graph else None
    while at is not None and len(names) < len(graph):
        names.append(graph[at]["name"])
        at = graph[at]["next"][0] if graph[at]["next"] else None
    return " → ".join(names)


@check("forward-values", points=2, uses="silu", en="forward: silu(x) = x·σ(x)",
       es="forward: silu(x) = x·σ(x)")
def forward_values(ctx: Context) -> None:
    for x, _ in _cases(ctx):
        expected = ctx.reference.silu(x.clone().requires_grad_()).detach()
        x_sent = ctx.student.put(ctx.on_device(x.clone()).requires_grad_())
        y = _silu(ctx, x_sent, expected)
        _expect_dtype(y, x.dtype, expected)
        expect_close(y, expected, "`silu(x)`")


@check("backward-finite-differences", points=3, uses="silu",
       en="backward agrees with finite differences of forward",
       es="backward coincide con las diferencias finitas de forward")
def backward_finite_differences(ctx: Context) -> None:
    for x0, v in _cases(ctx):
        x = ctx.student.put(ctx.on_device(x0.clone()).requires_grad_())
        y = _silu(ctx, x, _reference(ctx, x0, v)[0])
        _backward(ctx, y, v)
        _expect_backward(ctx, x, x0, y, v)


@check("graph-uses-function", points=2, uses=("silu", "SiLU"),
       en="silu(x) is your Function applied to x", es="silu(x) es tu Function aplicada a x")
def graph_uses_function(ctx: Context) -> None:
    """The student's graph is the reference's, node for node and edge for edge (for a leaf x:
    SiLUBackward → AccumulateGrad): the Function applied to an expression autograd already
    differentiates, `SiLU.apply(x * torch.sigmoid(x))`, has the right root but more below it."""
    for x0, _ in _cases(ctx):
        y_ref = ctx.reference.silu(x0.clone().requires_grad_())
        expected = _graph(y_ref.grad_fn)
        y = _silu(ctx, ctx.student.put(ctx.on_device(x0.clone()).requires_grad_()), y_ref)
        graph = ctx.student.describe(y)["graph"]
        if graph == expected:
            continue
        if graph and expected and graph[0]["name"] == expected[0]["name"]:
            raise Fail(Diagnostic("custom-function-unused", {
                "what": "`silu(x)`", "got": _path(graph), "hint": APPLIED_TO_EXPRESSION}))
        raise Fail(Diagnostic("custom-function-unused",
                              {"what": "`silu(x)`", "got": graph[0]["name"] if graph else None}))


@check("non-contiguous-input", points=1, uses="silu", en="a non-contiguous input (x.t())",
       es="una entrada no contigua (x.t())")
def non_contiguous_input(ctx: Context) -> None:
    for x0, v in _cases(ctx):
        x = ctx.student.put(ctx.on_device(x0.clone()).requires_grad_())
        transposed = ctx.student.method(x, "t")
        expected = ctx.reference.silu(x0.t()).detach()
        y = _silu(ctx, transposed, expected)
        expect_close(y, expected, "`silu(x.t())`")
        _backward(ctx, y, v.t())
        _expect_backward(ctx, x, x0.t(), y, v.t(), transposed=True)


@check("float32", points=2, uses="silu", en="float32 in, float32 out (values and gradient)",
       es="float32 en la entrada y en la salida (valores y gradiente)")
def float32(ctx: Context) -> None:
    for x0, v in _cases(ctx, torch.float32):
        x = ctx.student.put(ctx.on_device(x0.clone()).requires_grad_())
        expected = ctx.reference.silu(x0.clone()).detach()
        y = _silu(ctx, x, expected)
        _expect_dtype(y, x0.dtype, expected)
        expect_close(y, expected, "`silu(x)`")
        _backward(ctx, y, v)
        _expect_backward(ctx, x, x0, y, v, rtol=1e-4, atol=1e-5)
