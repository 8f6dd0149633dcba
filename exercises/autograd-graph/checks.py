"""Hidden checks for autograd-graph: f = x1·x2 + x3·x4, gradients of leaves and intermediates,
and which tensors are leaves.

The inputs are scalars, so one wrong gradient alone is always some multiple of the right one:
the gradients of a group (x1…x4, or z1 and z2) are classified together, and a doubled group is
`grad-accumulated` while two swapped values are `grad-mismatch`.
"""

import torch

from worker.harness.checks import Context, Diagnostic, Fail, call, check, expect_tensor
from worker.harness.diagnostics import close, compare_grad, value_error_details
from worker.harness.remote import RemoteTensor

KEYS = ("x1", "x2", "x3", "x4", "z1", "z2")
REPORT_KEYS = ("a", "b", "c", "c_requires_grad")
# how a tensor given to is_leaf_report was made
KINDS = {
    "grad": ("a leaf that requires grad", "una hoja que requiere gradiente"),
    "plain": ("a tensor that does not require grad", "un tensor que no requiere gradiente"),
    "computed": (
        "`w * 2` for a leaf `w` that requires grad",
        "`w * 2` con `w` una hoja que requiere gradiente",
    ),
}
LEAF_RULE = {
    "en": "A tensor is a leaf unless an operation autograd recorded created it: `c = a + b` gets a "
    "`grad_fn` (and requires grad) only when `a` or `b` requires grad.",
    "es": "Un tensor es una hoja salvo que lo haya creado una operación que autograd registró: "
    "`c = a + b` tiene `grad_fn` (y requiere gradiente) solo si `a` o `b` requieren "
    "gradiente.",
}
NUMBER_HINT = {
    "en": "Each gradient must be a scalar tensor, and yours is a Python number (`.item()`, `float()`): "
    "return the tensor itself (`x1.grad`, `z1.grad`, …), not its value.",
    "es": "Cada gradiente debe ser un tensor escalar y el tuyo es un número de Python (`.item()`, "
    "`float()`): devuelve el propio tensor (`x1.grad`, `z1.grad`, …), no su valor.",
}
CUT_HINT = {
    "en": "`z1` and `z2` got their gradients, but none reached `x1`…`x4`: the `z1`, `z2` you "
    "differentiated are not connected to `x1`…`x4` in the graph (made anew with "
    "`torch.tensor(...)`, `.detach()`, `.item()`, or from copies of the arguments). Compute "
    "`z1 = x1 * x2` and `z2 = x3 * x4` from the arguments themselves, and call `retain_grad()` on them.",
    "es": "`z1` y `z2` recibieron sus gradientes, pero a `x1`…`x4` no llegó ninguno: los `z1`, `z2` "
    "que derivaste no están conectados con `x1`…`x4` en el grafo (creados de nuevo con "
    "`torch.tensor(...)`, `.detach()`, `.item()` o a partir de copias de los argumentos). Calcula "
    "`z1 = x1 * x2` y `z2 = x3 * x4` con los propios argumentos y llama a `retain_grad()` sobre ellos.",
}


def _what(key: str) -> str:
    return f'`leaf_grads(x1, x2, x3, x4)["{key}"]`'


def _leaf_grads(ctx: Context, values: list[float] | None = None) -> tuple[dict, dict]:
    """(the student's gradients, the reference's) for scalar leaves x1…x4."""
    xs = (
        [torch.tensor(v, dtype=torch.float64) for v in values]
        if values
        else list(ctx.randn(4, dtype=torch.float64))
    )
    expected = ctx.reference.leaf_grads(*(x.clone().requires_grad_() for x in xs))
    got = call(ctx, "leaf_grads", *ctx.student.put([x.clone().requires_grad_() for x in xs]))
    if not isinstance(got, dict):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": "`leaf_grads(x1, x2, x3, x4)`",
                    "expected_type": "dict",
                    "got_type": getattr(got, "type_name", type(got).__name__),
                },
            )
        )
    return got, expected


def _graph_cut(got: dict, expected: dict) -> bool:
    """Whether no gradient reached x1…x4 while z1 and z2 got the right ones."""
    return all(got.get(k) is None for k in KEYS[:4]) and all(
        isinstance(got.get(k), RemoteTensor)
        and got[k].value.numel() == 1
        and close(got[k].value.double(), expected[k].detach().double(), 1e-4, 1e-6)
        for k in KEYS[4:]
    )


def _expect_grads(got: dict, expected: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        if key not in got:
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": "`leaf_grads(x1, x2, x3, x4)`",
                        "got_type": f"dict without the key {key!r}",
                        "expected_type": "dict with the keys " + ", ".join(KEYS),
                    },
                )
            )
        if got[key] is None or expected[key] is None:
            if got[key] is None and expected[key] is not None:
                details = {"what": _what(key)}
                if key in KEYS[:4] and _graph_cut(got, expected):
                    details["hint"] = CUT_HINT
                raise Fail(Diagnostic("grad-none", details))
            if got[key] is not None:
                raise Fail(
                    Diagnostic(
                        "output-mismatch",
                        {"what": _what(key), "got_type": "tensor", "expected_type": "None"},
                    )
                )
            continue
        if type(got[key]) in (float, int):
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": _what(key),
                        "got_type": type(got[key]).__name__,
                        "expected_type": "torch.Tensor",
                        "hint": NUMBER_HINT,
                    },
                )
            )
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


@check(
    "leaf-gradients",
    points=4,
    uses="leaf_grads",
    en="the gradients of f with respect to the leaves x1…x4",
    es="los gradientes de f respecto de las hojas x1…x4",
)
def leaf_gradients(ctx: Context) -> None:
    for values in ([2.0, -3.0, 0.5, 4.0], None):
        _expect_grads(*_leaf_grads(ctx, values), KEYS[:4])


@check(
    "intermediate-gradients",
    points=3,
    uses="leaf_grads",
    en="the gradients of f with respect to the intermediates z1 and z2",
    es="los gradientes de f respecto de los intermedios z1 y z2",
)
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


def _flags_hint(
    kinds: tuple[str, str],
    got: dict,
    expected: dict,
    claims: dict,
    key: str,
    not_requires_grad: bool,
) -> dict:
    """What the evidence says about the wrong flag `key` of one call, in both languages;
    `not_requires_grad`: an earlier call returned for `a` or `b` a flag other than its
    `requires_grad`."""
    wrong = [k for k in REPORT_KEYS if got[k] is not expected[k]]
    if any(type(got[k]) is not bool for k in wrong):
        odd = next(k for k in wrong if type(got[k]) is not bool)
        kind = (
            "tensor"
            if isinstance(got[odd], RemoteTensor)
            else getattr(got[odd], "type_name", type(got[odd]).__name__)
        )
        return {
            "en": f'Return Python booleans (`True`, `False`): your value for `"{odd}"` is a {kind}. '
            "`t.is_leaf` and `t.requires_grad` already are `bool`.",
            "es": f'Devuelve booleanos de Python (`True`, `False`): tu valor para `"{odd}"` es un {kind}. '
            "`t.is_leaf` y `t.requires_grad` ya son `bool`.",
        }
    tracked = [n for n, k in zip("ab", kinds) if k != "plain"]
    if expected["c_requires_grad"] and got["c"] is True and got["c_requires_grad"] is False:
        who_en = " and ".join(f"`{n}`" for n in tracked) + (
            " require" if len(tracked) > 1 else " requires"
        )
        who_es = " y ".join(f"`{n}`" for n in tracked) + (
            " requieren" if len(tracked) > 1 else " requiere"
        )
        return {
            "en": f"Your `c` is a leaf that does not require grad, although {who_en} grad: autograd did "
            "not record `c = a + b`, as happens when it is computed under `torch.no_grad()` (or "
            "from `.detach()`ed tensors). Compute `c = a + b` outside any `torch.no_grad()` block, "
            "so that it gets a `grad_fn`.",
            "es": f"Tu `c` es una hoja que no requiere gradiente, aunque {who_es} gradiente: autograd no "
            "registró `c = a + b`, como pasa cuando se calcula dentro de `torch.no_grad()` (o a "
            "partir de tensores con `.detach()`). Calcula `c = a + b` fuera de cualquier bloque "
            "`torch.no_grad()` para que tenga `grad_fn`.",
        }
    inputs = [k for k in wrong if k in ("a", "b")]
    if inputs:
        name = inputs[0]
        kind = dict(zip("ab", kinds))[name]
        en, es = KINDS[kind]
        if not not_requires_grad and all(
            got[k] is (dict(zip("ab", kinds))[k] != "plain") for k in inputs
        ):
            return {
                "en": f"Your value for `{name}` matches `.requires_grad` instead of `.is_leaf`: here "
                f"`{name}` is {en}, so `{name}.requires_grad` is {kind != 'plain'} but "
                f"`{name}.is_leaf` is {expected[name]}. A tensor that does not require grad is a "
                "leaf too; one computed from a tensor that requires grad is not, though it requires grad.",
                "es": f"Tu valor para `{name}` coincide con `.requires_grad` en vez de `.is_leaf`: aquí "
                f"`{name}` es {es}, así que `{name}.requires_grad` es {kind != 'plain'} pero "
                f"`{name}.is_leaf` es {expected[name]}. Un tensor que no requiere gradiente también "
                "es una hoja; uno calculado a partir de un tensor que requiere gradiente no lo es, "
                "aunque requiera gradiente.",
            }
        said = claims.get(name, {}).get("is_leaf")
        base = {
            "en": f"Here `{name}` is {en}, so `{name}.is_leaf` is {expected[name]}. ",
            "es": f"Aquí `{name}` es {es}, así que `{name}.is_leaf` es {expected[name]}. ",
        }
        if said is expected[name]:
            return {
                "en": base["en"] + f"Your own `{name}.is_leaf` says {said}, not what you returned: "
                "read the flags from the tensors (`.is_leaf`, `.requires_grad`) instead "
                "of guessing them.",
                "es": base["es"]
                + f"Tu propio `{name}.is_leaf` dice {said}, no lo que devolviste: lee los "
                "indicadores de los tensores (`.is_leaf`, `.requires_grad`) en vez de "
                "suponerlos.",
            }
        return base
    who = {
        "en": "`"
        + "` and `".join(tracked)
        + ("` require grad" if len(tracked) > 1 else "` requires grad")
        if tracked
        else "neither `a` nor `b` requires grad",
        "es": (
            "`"
            + "` y `".join(tracked)
            + ("` requieren" if len(tracked) > 1 else "` requiere")
            + " gradiente"
        )
        if tracked
        else "ni `a` ni `b` requieren gradiente",
    }
    if key == "c":
        return {
            "en": f"Here {who['en']}, so `c = a + b` {'is not' if tracked else 'is'} a leaf. "
            + LEAF_RULE["en"],
            "es": f"Aquí {who['es']}, así que `c = a + b` {'no es' if tracked else 'es'} una hoja. "
            + LEAF_RULE["es"],
        }
    return {
        "en": f"Here {who['en']}, so `c = a + b` {'requires' if tracked else 'does not require'} grad: "
        "`c` requires grad as soon as `a` or `b` does.",
        "es": f"Aquí {who['es']}, así que `c = a + b` {'requiere' if tracked else 'no requiere'} gradiente: "
        "`c` requiere gradiente en cuanto `a` o `b` lo requieren.",
    }


@check(
    "is-leaf",
    points=3,
    uses="is_leaf_report",
    en="`is_leaf_report(a, b)` for tensors with and without requires_grad, leaves or not",
    es="`is_leaf_report(a, b)` para tensores con y sin requires_grad, hojas o no",
)
def is_leaf(ctx: Context) -> None:
    names = list(KINDS)
    drawn = [tuple(names[int(i)] for i in ctx.randint(0, len(names), (2,))) for _ in range(2)]
    not_requires_grad = False  # a flag returned for `a` or `b` was not its `requires_grad`
    # every kind as `a` and as `b` in the fixed cases, before the drawn ones
    for kinds in [
        ("grad", "grad"),
        ("grad", "plain"),
        ("plain", "plain"),
        ("computed", "plain"),
        ("plain", "computed"),
        ("computed", "grad"),
        *drawn,
    ]:
        expected = ctx.reference.is_leaf_report(*(_made(ctx, k, False) for k in kinds))
        sent = [_made(ctx, k, True) for k in kinds]
        claims = {n: getattr(t, "claims", {}) for n, t in zip("ab", sent)}
        got = call(ctx, "is_leaf_report", *sent)
        en = f"a: {KINDS[kinds[0]][0]}; b: {KINDS[kinds[1]][0]}"
        es = f"a: {KINDS[kinds[0]][1]}; b: {KINDS[kinds[1]][1]}"
        if not isinstance(got, dict) or set(got) != set(REPORT_KEYS):
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": "`is_leaf_report(a, b)`",
                        "expected_type": "dict with the keys " + ", ".join(REPORT_KEYS),
                        "got_type": "dict with the keys " + ", ".join(sorted(map(str, got)))
                        if isinstance(got, dict)
                        else getattr(got, "type_name", type(got).__name__),
                    },
                )
            )
        for key in REPORT_KEYS:
            if got[key] is not expected[key]:
                raise Fail(
                    Diagnostic(
                        "output-mismatch",
                        {
                            "what": {
                                "en": f'`is_leaf_report(a, b)["{key}"]` ({en})',
                                "es": f'`is_leaf_report(a, b)["{key}"]` ({es})',
                            },
                            "got": got[key]
                            if isinstance(got[key], (bool, int, float, str, type(None)))
                            else type(got[key]).__name__,
                            "expected": expected[key],
                            "worst_index": [],
                            "hint": _flags_hint(
                                kinds, got, expected, claims, key, not_requires_grad
                            ),
                        },
                    )
                )
        not_requires_grad |= any(got[n] is not (k != "plain") for n, k in zip("ab", kinds))
