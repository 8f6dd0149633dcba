"""Hidden checks for tensors-create: tensors from lists and arrays, ones of a dtype, metadata.

Every expectation comes from the reference, sharing of memory included: whether a write through
one object shows in the other is measured on the reference's result in the grader, then tested on
the student's in their process with fresh random values the grader writes and reads back. Every
point rests on values the grader reads back (returned from fresh hidden inputs, or after its own
writes): never on a storage address, a flag or a type name the student's process reports.
`describe` is graded on the values it returns, types included: a `torch.device` arrives as a
`torch.device`, so it is not the string asked for, on any node.
"""

import numpy as np
import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    RemoteObject,
    RemoteTensor,
    call,
    check,
    expect_close,
    expect_sharing,
    expect_tensor,
    expect_tuple,
)

DTYPE_HINT = {
    "en": "The dtype must follow the values: int64 for a list of integers, PyTorch's "
    "default float32 as soon as there is a float. Let PyTorch infer it rather than "
    "fixing it, and remember that NumPy's floats are float64.",
    "es": "El dtype debe seguir a los valores: int64 para una lista de enteros y el "
    "float32 por defecto de PyTorch en cuanto hay un decimal. Deja que PyTorch lo "
    "deduzca en lugar de fijarlo, y recuerda que los decimales de NumPy son "
    "float64.",
}
NEW_TENSOR_HINT = {
    "en": "The result must be a new tensor: `.float()` and `.to(...)` return `x` "
    "itself when it already has that dtype, and an in-place change to it "
    "then overwrites `x`.",
    "es": "El resultado debe ser un tensor nuevo: `.float()` y `.to(...)` devuelven "
    "el propio `x` cuando ya tiene ese dtype, y un cambio «in situ» sobre él "
    "sobrescribe `x`.",
}
DESCRIBE_HINT = {
    "en": "Return the tuple `(shape, dtype, device type)` with these types: a tuple "
    "of ints, a `torch.dtype` and a str.",
    "es": "Devuelve la tupla `(forma, dtype, tipo de dispositivo)` con estos tipos: "
    "una tupla de enteros, un `torch.dtype` y una cadena.",
}
INPUT_KEPT_HINT = {
    "en": "`ones_like_float` must leave `x` as it was.",
    "es": "`ones_like_float` debe dejar `x` como estaba.",
}
ARRAY_DTYPES = (torch.float64, torch.float32, torch.int64, torch.int32)


def _shape(ctx: Context) -> list[int]:
    return [int(n) for n in ctx.randint(1, 6, (int(ctx.randint(1, 3, ())),))]


def _values(ctx: Context, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        return ctx.randn(*shape, dtype=dtype)
    return ctx.randint(-50, 50, tuple(shape)).to(dtype)


# --- from_data ---------------------------------------------------------------------------------


def _kind(data: list) -> dict:
    """The class of input `data` is, in words: its depth, and what numbers it holds."""
    flat = [v for row in data for v in row] if data and isinstance(data[0], list) else list(data)
    nested = bool(data) and isinstance(data[0], list)
    floats = [isinstance(v, float) for v in flat]
    if not any(floats):
        return (
            {"en": "list of lists of integers", "es": "lista de listas de enteros"}
            if nested
            else {"en": "list of integers", "es": "lista de enteros"}
        )
    if all(floats):
        return (
            {"en": "list of lists of floats", "es": "lista de listas de decimales"}
            if nested
            else {"en": "list of floats", "es": "lista de decimales"}
        )
    return (
        {
            "en": "list of lists mixing integers and floats",
            "es": "lista de listas que mezcla enteros y decimales",
        }
        if nested
        else {"en": "list mixing integers and floats", "es": "lista que mezcla enteros y decimales"}
    )


def _dtype_hint(
    data: list, got: torch.dtype, expected: torch.dtype, right: list[tuple[list, torch.dtype]]
) -> dict:
    """What differs, said precisely: the class of `data`, the dtype the student gave it, and the
    classes of input (fixed cases of this check) where their dtype was right."""
    kind = _kind(data)
    got_s, exp_s = str(got).removeprefix("torch."), str(expected).removeprefix("torch.")
    hint = {
        "en": f"For a {kind['en']} your tensor is {got_s}, but it must be {exp_s}",
        "es": f"Para una {kind['es']} tu tensor es {got_s}, pero debe ser {exp_s}",
    }
    kinds = []
    for other, _ in right:
        k = _kind(other)
        if k != kind and k not in kinds:
            kinds.append(k)
    if kinds:
        hint["en"] += (
            ", although your dtype was right for a "
            + " and for a ".join(k["en"] for k in kinds)
            + ": the dtype depends on every value, at every depth, "
            "not on the first element or on the rank."
        )
        hint["es"] += (
            ", aunque tu dtype era correcto para una "
            + " y para una ".join(k["es"] for k in kinds)
            + ": el dtype depende de todos los valores, en todos los "
            "niveles, no del primer elemento ni del rango."
        )
    else:
        hint["en"] += ". " + DTYPE_HINT["en"]
        hint["es"] += ". " + DTYPE_HINT["es"]
    return hint


def _from_data(ctx: Context, data: list, right: list | None = None) -> None:
    """`right`: the (data, dtype) cases of this check the student got right so far."""
    text = str(data)
    what = f"`from_data({text})`" if len(text) <= 40 else "`from_data(data)`"
    expected = ctx.reference.from_data(data)
    got = expect_tensor(call(ctx, "from_data", data), what, shape=expected.shape)
    if got.dtype != expected.dtype:
        raise Fail(
            Diagnostic(
                "dtype-mismatch",
                {
                    "what": what,
                    "got": str(got.dtype),
                    "expected": str(expected.dtype),
                    "hint": _dtype_hint(data, got.dtype, expected.dtype, right or []),
                },
            )
        )
    expect_close(got, expected, what)
    if right is not None:
        right.append((data, expected.dtype))


@check(
    "from-data-integers",
    points=1,
    uses="from_data",
    en="from_data of lists of integers",
    es="from_data con listas de enteros",
)
def from_data_integers(ctx: Context) -> None:
    right: list = []
    for data in ([3, 1, 4, 1, 5], [[1, -2], [3, 4], [0, 7]]):  # 1-D, 2-D
        _from_data(ctx, data, right)
    _from_data(ctx, ctx.randint(-50, 50, tuple(_shape(ctx))).tolist(), right)


@check(
    "from-data-floats",
    points=1,
    uses="from_data",
    en="from_data of lists with floats",
    es="from_data con listas con decimales",
)
def from_data_floats(ctx: Context) -> None:
    # 1-D floats; 2-D mixing integers and floats; 1-D mixing, its first element an integer
    right: list = []
    for data in ([0.5, -1.25, 3.0], [[1, 2.5], [-3, 4]], [2, -0.5, 1.5]):
        _from_data(ctx, data, right)
    rows = ctx.randn(int(ctx.randint(1, 6, ())), 3).tolist()
    _from_data(ctx, [[round(v, 3) for v in row] for row in rows], right)


# --- from_numpy_shared -------------------------------------------------------------------------

NUMPY_WHAT = "`from_numpy_shared(arr)`"


def _arrays(ctx: Context) -> list[np.ndarray]:
    """A float64 and an int32 array (only float32 ones survive a conversion to float32), then
    random ones."""
    fixed = [np.array([[1.5, -2.0, 3.25], [0.0, 4.0, -5.5]]), np.array([3, -1, 4], dtype=np.int32)]
    dtype = ARRAY_DTYPES[int(ctx.randint(0, len(ARRAY_DTYPES), ()))]
    return fixed + [_values(ctx, _shape(ctx), dtype).numpy()]


def _from_numpy(
    ctx: Context, arr: np.ndarray
) -> tuple[np.ndarray, torch.Tensor, RemoteObject, RemoteTensor]:
    """The reference's array and tensor; the student's (the array stays in their process)."""
    ref_arr = arr.copy()
    expected = ctx.reference.from_numpy_shared(ref_arr)
    sent = ctx.student.put(arr.copy())
    got = expect_tensor(call(ctx, "from_numpy_shared", sent), NUMPY_WHAT, shape=expected.shape)
    if got.dtype != expected.dtype:
        details = {"what": NUMPY_WHAT, "got": str(got.dtype), "expected": str(expected.dtype)}
        if torch.equal(got.value, expected.to(got.dtype)):
            # the array's values, in another dtype: a conversion, which also copies
            got_s = str(got.dtype).removeprefix("torch.")
            arr_s = str(arr.dtype)
            details["hint"] = {
                "en": f"Your tensor holds the values of the {arr_s} array converted to {got_s} "
                f"(as `.to(torch.{got_s})`, `dtype=` or a conversion method make): keep the "
                "array's dtype; a conversion also copies, so the tensor would no longer "
                "share the array's memory.",
                "es": f"Tu tensor contiene los valores del array {arr_s} convertidos a {got_s} "
                f"(como hacen `.to(torch.{got_s})`, `dtype=` o un método de conversión): "
                "conserva el dtype del array; una conversión además copia, así que el "
                "tensor ya no compartiría la memoria del array.",
            }
        raise Fail(Diagnostic("dtype-mismatch", details))
    expect_close(got, expected, NUMPY_WHAT)
    return ref_arr, expected, sent, got


@check(
    "from-numpy-values",
    points=1,
    uses="from_numpy_shared",
    en="from_numpy_shared: the array's values, shape and dtype",
    es="from_numpy_shared: los valores, la forma y el dtype del array",
)
def from_numpy_values(ctx: Context) -> None:
    for arr in _arrays(ctx):
        _from_numpy(ctx, arr)


@check(
    "from-numpy-shares",
    points=2,
    uses="from_numpy_shared",
    en="from_numpy_shared: a write to the tensor shows in the array, and the other way round",
    es="from_numpy_shared: lo que se escribe en el tensor aparece en el array, y al revés",
)
def from_numpy_shares(ctx: Context) -> None:
    """By behaviour: fresh values the grader writes into one show in the other, exactly as they
    do for the reference's tensor and array."""
    for arr in _arrays(ctx):
        ref_arr, expected, sent, got = _from_numpy(ctx, arr)
        expect_sharing(
            ctx,
            got,
            sent,
            (expected, ref_arr),
            {
                "en": f"{NUMPY_WHAT} (`arr` after a write into the tensor)",
                "es": f"{NUMPY_WHAT} (`arr` tras escribir en el tensor)",
            },
        )
        expect_sharing(
            ctx,
            sent,
            got,
            (ref_arr, expected),
            {
                "en": f"{NUMPY_WHAT} (the tensor after a write into `arr`)",
                "es": f"{NUMPY_WHAT} (el tensor tras escribir en `arr`)",
            },
        )


# --- ones_like_float ---------------------------------------------------------------------------

ONES_WHAT = "`ones_like_float(x)`"


def _ones(
    ctx: Context, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, RemoteTensor, RemoteTensor]:
    x_ref = ctx.on_device(x.clone())
    expected = ctx.reference.ones_like_float(x_ref)
    sent = ctx.student.put(ctx.on_device(x))
    got = expect_tensor(call(ctx, "ones_like_float", sent), ONES_WHAT)
    if got.shape != tuple(expected.shape):
        raise Fail(
            Diagnostic(
                "shape-mismatch",
                {
                    "what": ONES_WHAT,
                    "got": list(got.shape),
                    "expected": list(expected.shape),
                    "hint": _shape_hint(got.shape, x.shape),
                },
            )
        )
    expect_tensor(got, ONES_WHAT, dtype=expected.dtype, device=expected.device)
    expect_close(got, expected.cpu(), ONES_WHAT)
    return x_ref, expected, sent, got


def _shape_hint(got: tuple, shape: torch.Size) -> dict:
    """What the wrong shape is, in terms of `x`'s: its first dimension only (as `len(x)` gives),
    its number of elements, or else just that it must be `x.shape`."""
    got, shape = tuple(got), tuple(shape)
    if len(shape) > 1 and got == shape[:1]:
        return {
            "en": f"Your shape {list(got)} is only `x`'s first dimension, as `len(x)` gives "
            f"(the number of rows): the result needs all of `x.shape`, {list(shape)}.",
            "es": f"Tu forma {list(got)} es solo la primera dimensión de `x`, la que da "
            f"`len(x)` (el número de filas): el resultado necesita todo `x.shape`, "
            f"{list(shape)}.",
        }
    if len(shape) != 1 and got == (int(torch.Size(shape).numel()),):
        return {
            "en": f"Your shape {list(got)} is `x`'s number of elements (`x.numel()`) in one "
            f"dimension: the result needs `x.shape`, {list(shape)}.",
            "es": f"Tu forma {list(got)} es el número de elementos de `x` (`x.numel()`) en "
            f"una sola dimensión: el resultado necesita `x.shape`, {list(shape)}.",
        }
    return {
        "en": f"The result must have `x`'s shape, {list(shape)}: pass `x.shape` (or use a "
        "`*_like` function).",
        "es": f"El resultado debe tener la forma de `x`, {list(shape)}: pasa `x.shape` (o usa "
        "una función `*_like`).",
    }


@check(
    "ones-like-float",
    points=2,
    uses="ones_like_float",
    en="ones_like_float of integer and float64 tensors: float32 ones",
    es="ones_like_float de tensores enteros y float64: unos en float32",
)
def ones_like_float(ctx: Context) -> None:
    # never float32 here: that case, where a conversion returns x itself, is the next check's
    fixed = [
        torch.tensor([[1, 2, 3], [4, 5, 6]]),
        torch.tensor([7, -8], dtype=torch.int32),
        torch.tensor([0.25, -1.5], dtype=torch.float64),
    ]
    dtype = (torch.int64, torch.int32, torch.float64)[int(ctx.randint(0, 3, ()))]
    for x in fixed + [_values(ctx, _shape(ctx) + [2], dtype)]:
        _ones(ctx, x)


@check(
    "ones-like-float-new",
    points=1,
    uses="ones_like_float",
    en="ones_like_float of a float32 tensor: a new tensor, x unchanged",
    es="ones_like_float de un tensor float32: un tensor nuevo, x sin cambios",
)
def ones_like_float_new(ctx: Context) -> None:
    drawn = ctx.randn(*_shape(ctx), dtype=torch.float32)
    for x in (torch.tensor([[0.5, -2.0], [3.0, 4.5]]), drawn):
        x_ref, expected, sent, got = _ones(ctx, x)
        # by behaviour: fresh values written into the result must leave x as it is (as they
        # leave the reference's x_ref, which the comparison below then reads)
        expect_sharing(
            ctx,
            got,
            sent,
            (expected, x_ref),
            {
                "en": f"`x` after a write into {ONES_WHAT}",
                "es": f"`x` tras escribir en {ONES_WHAT}",
            },
            hint=NEW_TENSOR_HINT,
        )
        expect_close(
            ctx.student.attr(sent, "data"),
            x_ref.cpu(),
            {"en": f"`x` after {ONES_WHAT}", "es": f"`x` tras {ONES_WHAT}"},
            hint=INPUT_KEPT_HINT,
        )


# --- describe ----------------------------------------------------------------------------------


def _type_name(value: object) -> str:
    if isinstance(value, RemoteObject):
        return value.type_name
    if isinstance(value, RemoteTensor):
        return "torch.Tensor"
    return "torch.dtype" if isinstance(value, torch.dtype) else type(value).__name__


def _type_hint(got: object, expected: object) -> dict:
    """The entry's value in the wrong type, when the grader can tell which: the dtype's name
    (`str(t.dtype)`), the shape as a list; else the general hint."""
    if isinstance(expected, torch.dtype) and isinstance(got, str) and got == str(expected):
        return {
            "en": f"You returned the dtype's name as a string ({got!r}, as `str(t.dtype)` "
            "gives): return `t.dtype` itself, a `torch.dtype`.",
            "es": f"Devolviste el nombre del dtype como cadena ({got!r}, lo que da "
            "`str(t.dtype)`): devuelve el propio `t.dtype`, un `torch.dtype`.",
        }
    if isinstance(expected, tuple) and isinstance(got, list) and tuple(got) == expected:
        return {
            "en": "The shape has the right sizes but is a list: return it as a tuple "
            "(`tuple(t.shape)`).",
            "es": "La forma tiene los tamaños correctos pero es una lista: devuélvela como "
            "tupla (`tuple(t.shape)`).",
        }
    return DESCRIBE_HINT


def _expect_part(got: object, expected: object, what: dict) -> None:
    """One entry of describe's tuple: the same type as the reference's, then the same value."""
    if _type_name(got) != _type_name(expected):
        shown = "" if isinstance(got, (RemoteObject, RemoteTensor)) else f" {got!r}"[:80]
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": what,
                    "got_type": _type_name(got) + shown,
                    "expected_type": _type_name(expected),
                    "hint": _type_hint(got, expected),
                },
            )
        )
    if got != expected:
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": what,
                    "got": repr(got)[:80],
                    "expected": repr(expected),
                    "worst_index": [],
                    "max_abs_error": 0.0,
                    "max_rel_error": 0.0,
                    "hint": DESCRIBE_HINT,
                },
            )
        )


def _describe(ctx: Context, t: torch.Tensor) -> None:
    t = ctx.on_device(t)
    expected = ctx.reference.describe(t.clone())
    got = expect_tuple(call(ctx, "describe", ctx.student.put(t)), len(expected), "`describe(t)`")
    shape, dtype = list(t.shape), str(t.dtype).removeprefix("torch.")
    for i, (part, want) in enumerate(zip(got, expected)):
        _expect_part(
            part,
            want,
            {
                "en": f"`describe(t)[{i}]` (t of shape {shape}, {dtype})",
                "es": f"`describe(t)[{i}]` (t de forma {shape}, {dtype})",
            },
        )


@check(
    "describe",
    points=2,
    uses="describe",
    en="describe: (shape, dtype, device type)",
    es="describe: (forma, dtype, tipo de dispositivo)",
)
def describe(ctx: Context) -> None:
    dtypes = (torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool)
    for t in (torch.zeros(2, 3), torch.arange(5), torch.tensor(2.5, dtype=torch.float64)):
        _describe(ctx, t)
    shape = [int(n) for n in ctx.randint(1, 6, (int(ctx.randint(0, 4, ())),))]
    _describe(ctx, torch.zeros(shape, dtype=dtypes[int(ctx.randint(0, len(dtypes), ()))]))
