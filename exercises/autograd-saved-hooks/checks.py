"""Hidden checks for autograd-saved-hooks: saved tensors offloaded to files by their size.

The grader counts the files itself (`ctx.files_left()`, in the grader's process) in the
student process's scratch directory (its `tempfile.gettempdir()` and the only place it may
write), and reads their bytes (`ctx.file_contents`, never unpickled) to find the saved tensors'
values in them. Nothing the student's process says about its files decides a point. Before
each counted call the grader drops what it holds in that process and deletes the files left
there, so that each count is that call's alone. The expected counts come from the reference (or
the wrong program standing in for it) run the same way in the grader, in a fresh directory of
the grader's own.
"""

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from worker.harness.checks import (
    Context,
    Diagnostic,
    Fail,
    call,
    check,
    expect_close,
    expect_grad,
    expect_tensor,
)

THRESHOLD = 1000  # the statement's SAVE_ON_DISK_THRESHOLD
DTYPES = (torch.float32, torch.float64, torch.int64)
TOLERANCES = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-6},
    torch.float64: {"rtol": 1e-10, "atol": 1e-12},
}  # unpacking must give back the same bits

NO_FILE = {
    "en": "No file was there: `pack_hook` must write each saved tensor with at least "
    "`SAVE_ON_DISK_THRESHOLD` elements (exactly that many included) to a file of its own in "
    "`tempfile.gettempdir()`, and the file must stay until it is read back.",
    "es": "No había ningún archivo: `pack_hook` debe escribir cada tensor guardado con al menos "
    "`SAVE_ON_DISK_THRESHOLD` elementos (también si tiene exactamente esos) en un archivo "
    "propio de `tempfile.gettempdir()`, y el archivo debe seguir ahí hasta que se vuelva a leer.",
}
TOO_MANY = {
    "en": "More files than saved tensors with at least `SAVE_ON_DISK_THRESHOLD` elements: one file "
    "for each of them, and smaller tensors stay in memory. Compare the number of elements, "
    "`t.numel()`, not bytes.",
    "es": "Más archivos que tensores guardados con al menos `SAVE_ON_DISK_THRESHOLD` elementos: un "
    "archivo para cada uno, y los más pequeños se quedan en memoria. Compara el número de "
    "elementos, `t.numel()`, no bytes.",
}
TOO_FEW = {
    "en": "Fewer files than saved tensors with at least `SAVE_ON_DISK_THRESHOLD` elements: a tensor "
    "with exactly that many goes to disk too, and each one needs a file of its own (a new "
    "name each time, such as `str(uuid.uuid4())`).",
    "es": "Menos archivos que tensores guardados con al menos `SAVE_ON_DISK_THRESHOLD` elementos: un "
    "tensor con exactamente esos también va a disco, y cada uno necesita un archivo propio "
    "(un nombre nuevo cada vez, como `str(uuid.uuid4())`).",
}
# the causes the grader can tell from what it counts itself (a probe of its own when needed)
COUNTED_LEN = {
    "en": "No file for this tensor of {numel} elements, though your `pack_hook` writes one for a "
    "1-D tensor of as many: the size test counts its first dimension (`len(t)`, "
    "`t.shape[0]`, here {rows}) rather than its elements. Compare `t.numel()`.",
    "es": "Ningún archivo para este tensor de {numel} elementos, aunque tu `pack_hook` escribe uno "
    "para un tensor 1-D con los mismos: la prueba del tamaño cuenta su primera dimensión "
    "(`len(t)`, `t.shape[0]`, aquí {rows}) en vez de sus elementos. Compara `t.numel()`.",
}
ONE_NAME = {
    "en": "Two tensors packed one after the other left one file: both were written to the same "
    "name, so the second overwrote the first (whose `unpack_hook` reads the wrong tensor), "
    "and deleting one deletes the other's. Give each file a new name, such as "
    "`str(uuid.uuid4())`.",
    "es": "Dos tensores empaquetados uno tras otro dejaron un solo archivo: los dos se "
    "escribieron con el mismo nombre, así que el segundo sobrescribió al primero (cuyo "
    "`unpack_hook` lee el tensor equivocado) y borrar uno borra el del otro. Da a cada "
    "archivo un nombre nuevo, como `str(uuid.uuid4())`.",
}
DELETED_TOO_EARLY = {
    "en": "`unpack_hook` found no file: it was deleted before the backward pass read it. A file "
    "must live until `unpack_hook` has loaded it: delete it there, after `torch.load`, or "
    "when the object `pack_hook` returned is freed (`__del__`), not in `pack_hook` nor when "
    "a `with` block inside it ends.",
    "es": "`unpack_hook` no encontró el archivo: se borró antes de que el paso hacia atrás lo "
    "leyera. Un archivo debe existir hasta que `unpack_hook` lo haya cargado: bórralo ahí, "
    "después de `torch.load`, o cuando se libere el objeto que devolvió `pack_hook` "
    "(`__del__`), no en `pack_hook` ni al terminar un bloque `with` dentro de él.",
}
HOOKS_INACTIVE = {
    "en": "Your `pack_hook` writes files when called, but none came from `grad_with_offload`: "
    "tensors are packed when the forward pass saves them, so call `fn(x)` inside "
    "`with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):`.",
    "es": "Tu `pack_hook` escribe archivos cuando se le llama, pero `grad_with_offload` no dejó "
    "ninguno: los tensores se empaquetan cuando el paso hacia delante los guarda, así que "
    "llama a `fn(x)` dentro de "
    "`with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):`.",
}


NOT_THE_TENSOR = {
    "en": "Your files do not hold the tensors they stand for: the grader read them and found "
    "{found} of {wanted} with the saved tensor's values in them. `pack_hook` must write the "
    "tensor itself to its file (`torch.save(tensor, name)`) and `unpack_hook` read it back "
    "from there; a file that stands in for a tensor kept in memory saves nothing.",
    "es": "Tus archivos no contienen los tensores que representan: el corrector los leyó y "
    "encontró {found} de {wanted} con los valores del tensor guardado. `pack_hook` debe "
    "escribir el propio tensor en su archivo (`torch.save(tensor, nombre)`) y `unpack_hook` "
    "leerlo de ahí; un archivo que sustituye a un tensor guardado en memoria no ahorra nada.",
}


def _raw(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().numpy().tobytes()


def _expect_held(ctx: Context, tensor: torch.Tensor, wanted: int, what: dict) -> None:
    """At least `wanted` of the files in the student's directory hold `tensor`'s values, as the
    grader reads their bytes (torch.save, numpy and raw writes all keep them whole; the
    grader never unpickles): empty files standing in for tensors kept in memory fail."""
    raw = _raw(tensor)
    found = sum(raw in content for content in ctx.file_contents(8 * len(raw) + (1 << 16)).values())
    if found < wanted:
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": what,
                    "got": found,
                    "expected": wanted,
                    "worst_index": [],
                    "hint": {
                        lang: text.format(found=found, wanted=wanted)
                        for lang, text in NOT_THE_TENSOR.items()
                    },
                },
            )
        )


@contextmanager
def _grader_tempdir() -> Iterator[str]:
    """`tempfile` pointed at a fresh directory of the grader's while the reference runs."""
    before = tempfile.tempdir
    directory = tempfile.mkdtemp(prefix="hpcgrade-offload-")
    tempfile.tempdir = directory
    try:
        yield directory
    finally:
        tempfile.tempdir = before
        shutil.rmtree(directory, ignore_errors=True)


def _expected_files(ctx: Context, run: Callable[..., object], *args: object) -> int:
    """Files the reference leaves in its directory while what `run(*args)` returns is alive."""
    with _grader_tempdir() as directory:
        alive = run(*args)
        count = sum(len(files) for _, _, files in os.walk(directory))
        del alive  # before the directory goes: the reference deletes its files itself
    return count


def _clean_start(ctx: Context) -> None:
    """No object of the grader's left in the student's process, no file in its directory."""
    ctx.student.request("reset")
    ctx.clear_files()


def _count(found: list[str], expected: int, what: dict, hint: dict) -> None:
    if len(found) != expected:
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": what,
                    "got": len(found),
                    "expected": expected,
                    "worst_index": [],
                    "hint": hint,
                },
            )
        )


def _count_hint(found: int, expected: int) -> dict:
    return NO_FILE if found == 0 else TOO_MANY if found > expected else TOO_FEW


def _about(t: torch.Tensor) -> tuple[str, str]:
    dtype = str(t.dtype).removeprefix("torch.")
    return (
        f"{list(t.shape)}, {dtype}, {t.numel()} elements",
        f"{list(t.shape)}, {dtype}, {t.numel()} elementos",
    )


def _tensor(ctx: Context, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return ctx.randint(-100, 100, shape) if dtype == torch.int64 else ctx.randn(*shape, dtype=dtype)


def _random_dtype(ctx: Context, dtypes: tuple[torch.dtype, ...]) -> torch.dtype:
    return dtypes[int(ctx.randint(0, len(dtypes), ()))]


def _random_input(ctx: Context, low: int, high: int) -> torch.Tensor:
    return ctx.randn(int(ctx.randint(low, high, ())), dtype=_random_dtype(ctx, DTYPES[:2]))


def _reference_grad(ctx: Context, x: torch.Tensor) -> torch.Tensor:
    return ctx.reference.grad_with_offload(ctx.support.OffloadExample(), x.clone().requires_grad_())


def _reference_kept(ctx: Context, x: torch.Tensor) -> object:
    """The `fn` after the reference's `grad_with_offload`: its branch's files live as long as it."""
    fn = ctx.support.OffloadExample()
    ctx.reference.grad_with_offload(fn, x.clone().requires_grad_())
    return fn


def _student_grad(ctx: Context, x: torch.Tensor) -> object:
    """`grad_with_offload(OffloadExample(), x)` in the student's process, where the grader's
    handle keeps that `fn`, and its kept branch, alive until the next `_clean_start`."""
    return call(
        ctx,
        "grad_with_offload",
        ctx.student.new("OffloadExample"),
        ctx.student.put(x.clone().requires_grad_()),
    )


def _kept_files(ctx: Context, x: torch.Tensor) -> tuple[list[str], int]:
    """(the student's files, the reference's count) once `grad_with_offload(OffloadExample(), x)`
    has returned. Both checks that use it want the kept branch's files there, so that code
    writing no file at all, or none when it guesses that leaks are counted, passes neither."""
    expected = _expected_files(ctx, _reference_kept, ctx, x)
    _clean_start(ctx)
    _student_grad(ctx, x)
    ctx.student.new("collect_garbage")  # frees what only a reference cycle still holds
    return ctx.files_left(), expected


def _kept_what(x: torch.Tensor) -> dict:
    en, es = _about(x)
    return {
        "en": f"Files once `grad_with_offload(OffloadExample(), x)` has returned, its `fn` "
        f"still keeping a branch (x: {en})",
        "es": f"Archivos cuando `grad_with_offload(OffloadExample(), x)` ha terminado, con su "
        f"`fn` conservando aún una rama (x: {es})",
    }


def _expect_kept(ctx: Context, found: list[str], expected: int, x: torch.Tensor) -> None:
    """At least the files of the kept branch, its saved tensors packed to disk and still there,
    holding them (`sin(x) * x` saves x twice: two hold x's values), and none where the kept
    branch has none (what is left beyond them is no-file-left's)."""
    if len(found) < expected or (found and not expected):
        hint = HOOKS_INACTIVE if not found else _count_hint(len(found), expected)
        if 0 < len(found) < expected and _files_for(ctx, x.clone(), x.clone()) == 1:
            hint = ONE_NAME
        _count(found, expected, _kept_what(x), hint)
    if expected:
        en, es = _about(x)
        _expect_held(
            ctx,
            x,
            2,
            {
                "en": f"Files holding x's values once `grad_with_offload(OffloadExample(), x)` has "
                f"returned (x: {en})",
                "es": f"Archivos con los valores de x cuando `grad_with_offload(OffloadExample(), x)` "
                f"ha terminado (x: {es})",
            },
        )


def _files_for(ctx: Context, *tensors: torch.Tensor) -> int:
    """The grader's probe: the files the student's `pack_hook` leaves for these tensors, all
    packed and alive at once, counted by the grader."""
    _clean_start(ctx)
    for t in tensors:
        call(ctx, "pack_hook", ctx.student.put(t))
    return len(ctx.files_left())


@check(
    "round-trip",
    points=2,
    uses=("pack_hook", "unpack_hook"),
    en="`unpack_hook(pack_hook(t))` gives back `t`: same shape, dtype and values",
    es="`unpack_hook(pack_hook(t))` devuelve `t`: misma forma, dtype y valores",
)
def round_trip(ctx: Context) -> None:
    fixed = [
        ctx.randn(40, 25, dtype=torch.float64),
        ctx.randint(-100, 100, (3, 5)),
        ctx.randn(2000, dtype=torch.float32),
    ]
    rows, cols = (int(n) for n in ctx.randint(10, 80, (2,)))
    for t in fixed + [ctx.randn(rows, cols, dtype=_random_dtype(ctx, DTYPES[:2]))]:
        with _grader_tempdir():
            expected = ctx.reference.unpack_hook(ctx.reference.pack_hook(t.clone()))
        back = call(ctx, "unpack_hook", call(ctx, "pack_hook", ctx.student.put(t)))
        dtype = str(t.dtype).removeprefix("torch.")
        what = f"`unpack_hook(pack_hook(t))` (t: {list(t.shape)}, {dtype})"
        expect_tensor(back, what, shape=tuple(expected.shape), dtype=expected.dtype)
        expect_close(back, expected, what, rtol=0.0, atol=0.0)


@check(
    "same-gradient",
    points=3,
    uses="grad_with_offload",
    en="the gradient of `fn(x).sum()` is the one computed without hooks",
    es="el gradiente de `fn(x).sum()` es el que se obtiene sin hooks",
)
def same_gradient(ctx: Context) -> None:
    # on disk in float64 and (exactly at the threshold) in float32, in memory below it
    fixed = [
        ctx.randn(1500, dtype=torch.float64),
        ctx.randn(THRESHOLD, dtype=torch.float32),
        ctx.randn(999, dtype=torch.float32),
    ]
    for x in fixed + [_random_input(ctx, 500, 2500)]:
        with _grader_tempdir():
            expected = _reference_grad(ctx, x)
        en, es = _about(x)
        try:
            grad = _student_grad(ctx, x)
        except Fail as failure:
            raise Fail(*(_with_cause(ctx, d) for d in failure.diagnostics)) from None
        expect_grad(
            grad,
            expected,
            {
                "en": f"`grad_with_offload(OffloadExample(), x)` (x: {en})",
                "es": f"`grad_with_offload(OffloadExample(), x)` (x: {es})",
            },
            **TOLERANCES[x.dtype],
        )


def _with_cause(ctx: Context, diagnostic: Diagnostic) -> Diagnostic:
    """A file missing when the backward pass unpacks is one deleted too early, or one that
    another tensor's file of the same name took with it (the grader's probe tells which)."""
    if diagnostic.details.get("type") != "FileNotFoundError":
        return diagnostic
    shared = _files_for(ctx, ctx.randn(THRESHOLD), ctx.randn(THRESHOLD)) == 1
    return Diagnostic(
        diagnostic.code, dict(diagnostic.details, hint=ONE_NAME if shared else DELETED_TOO_EARLY)
    )


@check(
    "files-for-large-tensors",
    points=3,
    uses=("pack_hook", "grad_with_offload"),
    en="a file for each saved tensor with at least `SAVE_ON_DISK_THRESHOLD` elements, none for smaller ones",
    es="un archivo por cada tensor guardado con al menos `SAVE_ON_DISK_THRESHOLD` elementos, ninguno para los más pequeños",
)
def files_for_large_tensors(ctx: Context) -> None:
    fixed = [
        ((999,), torch.float32),
        ((4, 4), torch.float32),
        ((25, 40), torch.float32),
        ((1500,), torch.float64),
        ((THRESHOLD,), torch.int64),
    ]
    drawn = ((int(ctx.randint(10, 3000, ())),), _random_dtype(ctx, DTYPES))
    for shape, dtype in fixed + [drawn]:
        t = _tensor(ctx, shape, dtype)
        expected = _expected_files(ctx, ctx.reference.pack_hook, t.clone())
        _clean_start(ctx)
        call(ctx, "pack_hook", ctx.student.put(t))  # what it returns stays alive until counted
        found = ctx.files_left()
        en, es = _about(t)
        hint = _count_hint(len(found), expected)
        if not found and expected and t.dim() > 1 and _files_for(ctx, t.reshape(-1)):
            hint = {
                lang: text.format(numel=t.numel(), rows=t.shape[0])
                for lang, text in COUNTED_LEN.items()
            }
        what = {
            "en": f"The number of files `pack_hook(t)` wrote (t: {en})",
            "es": f"El número de archivos que escribió `pack_hook(t)` (t: {es})",
        }
        _count(found, expected, what, hint)
        if expected:
            _expect_held(
                ctx,
                t,
                1,
                {
                    "en": f"Files holding t's values among those `pack_hook(t)` wrote (t: {en})",
                    "es": f"Archivos con los valores de t entre los que escribió `pack_hook(t)` "
                    f"(t: {es})",
                },
            )
    for x in [
        ctx.randn(1500, dtype=torch.float64),
        ctx.randn(THRESHOLD, dtype=torch.float32),
        _random_input(ctx, 10, 3000),
    ]:
        _expect_kept(ctx, *_kept_files(ctx, x), x)


@check(
    "no-file-left",
    points=2,
    uses="grad_with_offload",
    en="once `grad_with_offload` returns, no file is left but those of the branch `fn` keeps",
    es="cuando `grad_with_offload` termina, no queda más archivo que los de la rama que `fn` conserva",
)
def no_file_left(ctx: Context) -> None:
    # above the threshold in float32, exactly at it in float64, then a random size above it
    for x in [
        ctx.randn(1500, dtype=torch.float32),
        ctx.randn(THRESHOLD, dtype=torch.float64),
        _random_input(ctx, THRESHOLD, 3000),
    ]:
        found, expected = _kept_files(ctx, x)
        _expect_kept(ctx, found, expected, x)  # no file written: nothing shown to be deleted
        if len(found) > expected:
            raise Fail(
                Diagnostic(
                    "temp-file-leak",
                    {
                        "what": "`grad_with_offload(OffloadExample(), x)`",
                        "count": len(found) - expected,
                    },
                )
            )
