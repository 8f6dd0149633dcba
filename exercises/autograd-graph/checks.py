"""Hidden checks for autograd-graph: f = x1·x2 + x3·x4, gradients of leaves and intermediates,
and which tensors are leaves.

The inputs are scalars, so one wrong gradient alone is always some multiple of the right one:
the gradients of a group (x1…x4, or z1 and z2) are classified together, and a doubled group is
`grad-accumulated` while two swapped values are `grad-mismatch`.
"""
import torch

from worker.harness.checks import Context, Diagnostic, Fail, call, check, expect_tensor
from worker.harness.diagnostics import close, compare_grad, value_error_details

KEYS = ("x1", "x2", "x3", "x4", "z1", "z2")
REPORT_KEYS = ("a", "b", "c", "c_requires_grad")
# how a tensor given to is_leaf_report was made
KINDS = {
    "grad": ("a leaf that requires grad", "una hoja que requiere gradiente"),
    "plain": ("a tensor that does not require grad", "un tensor que no requiere gradiente"),
    "computed": ("`w * 2` for a leaf `w` that requires grad", "`w * 2` con `w` una hoja que requiere gradiente"),
}
LEAF_HINT = {
    "en": "A tensor is a leaf unless an operation autograd recorded created it: `c = a + b` gets a "
          "`grad_fn` (and requires grad) only when `a` or `b` requires grad. Read the flags from "
          "the tensors (`.is_leaf`, `.requires_grad`) instead of guessing them.",
    "es": "Un tensor es una hoja salvo que lo haya creado una operación que autograd registró: "
          "`c = a + b` tiene `grad_fn` (y requiere gradiente) solo si `a` o `b` requieren "
          "gradiente. Lee los indicadores de los tensores (`.is_leaf`, `.requires_grad`) en vez "
          "de suponerlos."}


def _what(key: str) -> str:
    return f'`leaf_grads(x1, x2, x3, x4)["{key}"]`'


def _leaf_grads(ctx: Context, values: list[float] | None = None) -> tuple[dict, dict]:
    """(the student's gradients, the reference's) for scalar leaves x1…x4."""
    xs = [torch.tensor(v, dtype=torch.float64) for v in values] if values else \
        list(ctx.randn(4, dtype=torch.float64))
    expected = ctx.reference.leaf_grads(*(x.clone().requires_grad_() for x in xs))
    got = call(ctx, "leaf_grads", *ctx.student.put([x.clone().requires_grad_() for x in xs]))
    if not isinstance(got, dict):
        raise Fail(Diagnostic("output-mismatch", {
            "what": "`leaf_grads(x1, x2, x3, x4)`", "expected_type": "dict",
            "got_type": getattr(got, "type_name", type(got).__name__)}))
    return got, expected


def _expect_grads(got: dict, expected: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        if key not in got:
            raise Fail(Diagnostic("output-mismatch", {
                "what": "`leaf_grads(x1, x2, x3, x4)`", "got_type": f"dict without the key {key!r}",
                "expected_type": "dict with the keys " + ", ".join(KEYS)}))
        if got[key] is None or expected[key] is None:
            if got[key] is None and expected[key] is not None:
                raise Fail(Diagnostic("grad-none", {"what": _what(key)}))
            if got[key] is not None:
                raise Fail(Diagnostic("output-mismatch", {"what": _what(key), "got_type": "tensor",
                                                          "expected_type": "None"}))
            continue
        expect_tensor(got[key], _what(key), shape=())
    present = [k for k in keys if expected[k] is not None]
    if not present:
        return
    actual = torch.stack([got[k].value.double() for k in present])
    wanted = torch.stack([expected[k].detach().double() for k in present])
    diagnostic = compare_grad(actual, wanted, "")
    if diagnostic is None:
        return
    if diagnostic.code in ("grad-mismatch", "grad-nonfinite"):
        key = next(k for k in present if not close(got[k].value, expected[k].detach(), 1e-4, 1e-6))
        details = {"what": _what(key)}
        if diagnostic.code == "grad-mismatch":
            details.update(value_error_details(got[key].value, expected[key].detach()))
        raise Fail(Diagnostic(diagnostic.code, details))
    keys = '`leaf_grads(x1, x2, x3, x4)["' + '"]`, `["'.join(present) + '"]`'
    group = {"en": f"Each of {keys}", "es": f"Cada uno de {keys}"}
    raise Fail(Diagnostic(diagnostic.code, dict(diagnostic.details, what=group)))


@check("leaf-gradients", points=4, uses="leaf_grads",
       en="the gradients of f with respect to the leaves x1…x4",
       es="los gradientes de f respecto de las hojas x1…x4")
def leaf_gradients(ctx: Context) -> None:
    for values in ([2.0, -3.0, 0.5, 4.0], None):
        _expect_grads(*_leaf_grads(ctx, values), KEYS[:4])


@check("intermediate-gradients", points=3, uses="leaf_grads",
       en="the gradients of f with respect to the intermediates z1 and z2",
       es="los gradientes de f respecto de los intermedios z1 y z2")
def intermediate_gradients(ctx: Context) -> None:
    for values in ([1.5, 2.0, -1.0, 3.0], None):
        _expect_grads(*_leaf_grads(ctx, values), KEYS[4:])


def _made(ctx: Context, kind: str, remote: bool):
    """A scalar tensor made as `kind` says, in the student's process or here."""
    t = ctx.randn(1, dtype=torch.float32)[0].requires_grad_(kind != "plain")
    if not remote:
        return t * 2 if kind == "computed" else t
    sent = ctx.student.put(t)
    return ctx.student.method(sent, "mul", 2.0) if kind == "computed" else sent


@check("is-leaf", points=3, uses="is_leaf_report",
       en="`is_leaf_report(a, b)` for tensors with and without requires_grad, leaves or not",
       es="`is_leaf_report(a, b)` para tensores con y sin requires_grad, hojas o no")
def is_leaf(ctx: Context) -> None:
    names = list(KINDS)
    drawn = [tuple(names[int(i)] for i in ctx.randint(0, len(names), (2,))) for _ in range(2)]
    for kinds in [("grad", "grad"), ("grad", "plain"), ("plain", "plain"), ("computed", "plain"),
                  *drawn]:
        expected = ctx.reference.is_leaf_report(*(_made(ctx, k, False) for k in kinds))
        got = call(ctx, "is_leaf_report", *(_made(ctx, k, True) for k in kinds))
        en = f"a: {KINDS[kinds[0]][0]}; b: {KINDS[kinds[1]][0]}"
        es = f"a: {KINDS[kinds[0]][1]}; b: {KINDS[kinds[1]][1]}"
        if not isinstance(got, dict) or set(got) != set(REPORT_KEYS):
            raise Fail(Diagnostic("output-mismatch", {
                "what": "`is_leaf_report(a, b)`", "expected_type": "dict with the keys "
                + ", ".join(REPORT_KEYS), "got_type": "dict with the keys " + ", ".join(
                    sorted(map(str, got))) if isinstance(got, dict)
                else getattr(got, "type_name", type(got).__name__)}))
        for key in REPORT_KEYS:
            if got[key] is not expected[key]:
                raise Fail(Diagnostic("output-mismatch", {
                    "what": {"en": f'`is_leaf_report(a, b)["{key}"]` ({en})',
                             "es": f'`is_leaf_report(a, b)["{key}"]` ({es})'},
                    "got": got[key] if isinstance(got[key], (bool, int, float, str, type(None)))
                    else type(got[key]).__name__,
                    "expected": expected[key], "worst_index": [], "hint": LEAF_HINT}))
