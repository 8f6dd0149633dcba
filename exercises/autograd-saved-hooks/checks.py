"""Hidden checks for autograd-saved-hooks: saved tensors offloaded to files by their size.

The files are written in the student's process, so support.py counts them there: in a fresh
`tempfile` directory, when the backward pass starts and once `grad_with_offload` has returned.
The expected counts come from the reference run the same way in the grader, in a fresh directory
of the grader's own. The student's process reports its own counts: a submission that rewrites
them only fools itself about which mistake it makes, the gradient is checked on its own.
"""
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from worker.harness.checks import (Context, Diagnostic, Fail, call, check, expect_close,
                                   expect_grad, expect_tensor)

THRESHOLD = 1000  # the statement's SAVE_ON_DISK_THRESHOLD
DTYPES = (torch.float32, torch.float64)
TOLERANCES = {torch.float32: {"rtol": 1e-5, "atol": 1e-6},
              torch.float64: {"rtol": 1e-10, "atol": 1e-12}}  # unpacking must give back the same bits

NO_FILE = {
    "en": "No file was there: `pack_hook` must write each saved tensor with at least "
          "`SAVE_ON_DISK_THRESHOLD` elements (exactly that many included) to a file of its own in "
          "`tempfile.gettempdir()`, asked when `pack_hook` runs (the grader points it at a fresh "
          "directory after loading your file), and the file must stay until it is read back.",
    "es": "No había ningún archivo: `pack_hook` debe escribir cada tensor guardado con al menos "
          "`SAVE_ON_DISK_THRESHOLD` elementos (también si tiene exactamente esos) en un archivo "
          "propio de `tempfile.gettempdir()`, consultado cuando se ejecuta `pack_hook` (el corrector "
          "lo apunta a un directorio nuevo después de cargar tu archivo), y el archivo debe seguir "
          "ahí hasta que se vuelva a leer."}
TOO_MANY = {
    "en": "More files than saved tensors with at least `SAVE_ON_DISK_THRESHOLD` elements: smaller "
          "tensors stay in memory. Compare the number of elements, `t.numel()`, not bytes.",
    "es": "Más archivos que tensores guardados con al menos `SAVE_ON_DISK_THRESHOLD` elementos: los "
          "más pequeños se quedan en memoria. Compara el número de elementos, `t.numel()`, no bytes."}
TOO_FEW = {
    "en": "Fewer files than saved tensors with at least `SAVE_ON_DISK_THRESHOLD` elements: a tensor "
          "with exactly that many goes to disk too, and each one needs a file of its own (a new "
          "name each time, such as `str(uuid.uuid4())`).",
    "es": "Menos archivos que tensores guardados con al menos `SAVE_ON_DISK_THRESHOLD` elementos: un "
          "tensor con exactamente esos también va a disco, y cada uno necesita un archivo propio "
          "(un nombre nuevo cada vez, como `str(uuid.uuid4())`)."}
HOOKS_INACTIVE = {
    "en": "Tensors are packed when the forward pass saves them: call `fn(x)` inside "
          "`with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):`.",
    "es": "Los tensores se empaquetan cuando el paso hacia delante los guarda: llama a `fn(x)` "
          "dentro de `with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):`."}


@dataclass
class Offload:
    """What one `grad_with_offload(probe, x)` gave and what support.py counted."""
    grad: object
    hooks_active: object
    files_during_backward: object
    files_after: object


@contextmanager
def _grader_tempdir(ctx: Context):
    """`tempfile` pointed at a fresh directory of the grader's while the reference runs."""
    before = tempfile.tempdir
    directory = ctx.support.fresh_tempdir()
    try:
        yield directory
    finally:
        tempfile.tempdir = before
        shutil.rmtree(directory, ignore_errors=True)


def _offload(ctx: Context, x: torch.Tensor) -> tuple[Offload, Offload]:
    """(the student's run, the reference's run) on the same x."""
    with _grader_tempdir(ctx) as directory:
        probe = ctx.support.OffloadProbe(directory)
        grad = ctx.reference.grad_with_offload(probe, x.clone().requires_grad_())
        expected = Offload(grad, probe.hooks_active, probe.files_during_backward,
                           ctx.support.count_files(directory))
    directory = ctx.student.new("fresh_tempdir")
    probe = ctx.student.new("OffloadProbe", directory)
    grad = call(ctx, "grad_with_offload", probe, ctx.student.put(x.clone().requires_grad_()))
    got = Offload(grad, ctx.student.attr(probe, "hooks_active"),
                  ctx.student.attr(probe, "files_during_backward"),
                  ctx.student.new("count_files", directory))
    return got, expected


def _random_input(ctx: Context, low: int, high: int) -> torch.Tensor:
    dtype = DTYPES[int(ctx.randint(0, len(DTYPES), ()))]
    return ctx.randn(int(ctx.randint(low, high, ())), dtype=dtype)


def _about(x: torch.Tensor) -> tuple[str, str]:
    dtype = str(x.dtype).removeprefix("torch.")
    return f"x: {x.numel()} elements, {dtype}", f"x: {x.numel()} elementos, {dtype}"


def _one(values: object) -> object:
    return values[0] if isinstance(values, list) and len(values) == 1 else values


def _expect_files_during_backward(got: Offload, expected: Offload, x: torch.Tensor) -> None:
    if got.hooks_active != expected.hooks_active:
        raise Fail(Diagnostic("output-mismatch", {
            "what": {"en": "`saved_tensors_hooks` active while `fn(x)` ran",
                     "es": "`saved_tensors_hooks` activo mientras se ejecutaba `fn(x)`"},
            "got": _one(got.hooks_active), "expected": _one(expected.hooks_active),
            "worst_index": [], "hint": HOOKS_INACTIVE}))
    found, wanted = got.files_during_backward, expected.files_during_backward
    if found == wanted:
        return
    en, es = _about(x)
    hint = TOO_FEW
    if isinstance(found, list) and len(found) == len(wanted) and all(type(n) is int for n in found):
        hint = NO_FILE if not any(found) else TOO_MANY if found > wanted else TOO_FEW
    raise Fail(Diagnostic("output-mismatch", {
        "what": {"en": f"Files in `tempfile.gettempdir()` when the backward pass starts ({en})",
                 "es": f"Archivos en `tempfile.gettempdir()` al empezar el paso hacia atrás ({es})"},
        "got": _one(found), "expected": _one(wanted), "worst_index": [], "hint": hint}))


@check("round-trip", points=2, uses=("pack_hook", "unpack_hook"),
       en="`unpack_hook(pack_hook(t))` gives back `t`: same shape, dtype and values",
       es="`unpack_hook(pack_hook(t))` devuelve `t`: misma forma, dtype y valores")
def round_trip(ctx: Context) -> None:
    fixed = [ctx.randn(40, 25, dtype=torch.float64), ctx.randint(-100, 100, (3, 5)),
             ctx.randn(2000, dtype=torch.float32)]
    rows, cols = (int(n) for n in ctx.randint(10, 80, (2,)))
    for t in fixed + [ctx.randn(rows, cols, dtype=DTYPES[int(ctx.randint(0, 2, ()))])]:
        with _grader_tempdir(ctx):
            expected = ctx.reference.unpack_hook(ctx.reference.pack_hook(t.clone()))
        ctx.student.new("fresh_tempdir")
        packed = call(ctx, "pack_hook", ctx.student.put(t))
        back = call(ctx, "unpack_hook", packed)
        dtype = str(t.dtype).removeprefix("torch.")
        what = f"`unpack_hook(pack_hook(t))` (t: {list(t.shape)}, {dtype})"
        expect_tensor(back, what, shape=tuple(expected.shape), dtype=expected.dtype)
        expect_close(back, expected, what, rtol=0.0, atol=0.0)


@check("same-gradient", points=3, uses="grad_with_offload",
       en="the gradient of `fn(x).sum()` is the one computed without hooks",
       es="el gradiente de `fn(x).sum()` es el que se obtiene sin hooks")
def same_gradient(ctx: Context) -> None:
    fixed = [ctx.randn(1500, dtype=torch.float64), ctx.randn(999, dtype=torch.float32)]
    for x in fixed + [_random_input(ctx, 500, 2500)]:
        got, expected = _offload(ctx, x)
        en, es = _about(x)
        expect_grad(got.grad, expected.grad, {"en": f"`grad_with_offload(fn, x)` ({en})",
                                              "es": f"`grad_with_offload(fn, x)` ({es})"},
                    **TOLERANCES[x.dtype])


@check("files-for-large-tensors", points=3, uses="grad_with_offload",
       en="a file for each saved tensor with at least `SAVE_ON_DISK_THRESHOLD` elements, none for smaller ones",
       es="un archivo por cada tensor guardado con al menos `SAVE_ON_DISK_THRESHOLD` elementos, ninguno para los más pequeños")
def files_for_large_tensors(ctx: Context) -> None:
    fixed = [ctx.randn(THRESHOLD, dtype=torch.float32), ctx.randn(THRESHOLD - 1, dtype=torch.float32),
             ctx.randn(1500, dtype=torch.float64)]
    for x in fixed + [_random_input(ctx, 10, 3000)]:
        got, expected = _offload(ctx, x)
        _expect_files_during_backward(got, expected, x)


@check("no-file-left", points=2, uses="grad_with_offload",
       en="no file is left once `grad_with_offload` returns",
       es="no queda ningún archivo cuando `grad_with_offload` termina")
def no_file_left(ctx: Context) -> None:
    for x in [ctx.randn(1500, dtype=torch.float32), _random_input(ctx, THRESHOLD, 3000)]:
        got, expected = _offload(ctx, x)
        if got.files_after != expected.files_after:
            raise Fail(Diagnostic("temp-file-leak", {"what": "`grad_with_offload(fn, x)`",
                                                     "count": got.files_after}))
