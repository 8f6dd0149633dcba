"""Checks you can run before submitting: `hpcgrade check autograd-saved-hooks FILE`.

The files are counted as the hidden checks count them: by the grader, in its own process, in your
process's temporary directory, emptied of files before each call."""

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

COUNT_HINT = {
    "en": "A file of its own in `tempfile.gettempdir()` for each saved tensor with at least "
    "`SAVE_ON_DISK_THRESHOLD` elements (`numel()`, not bytes), written while `fn(x)` runs "
    "under the hooks and kept until it is read back; none for smaller tensors.",
    "es": "Un archivo propio en `tempfile.gettempdir()` por cada tensor guardado con al menos "
    "`SAVE_ON_DISK_THRESHOLD` elementos (`numel()`, no bytes), escrito mientras `fn(x)` se "
    "ejecuta con los hooks activos y conservado hasta que se vuelve a leer; ninguno para los "
    "tensores más pequeños.",
}


def _files_after(ctx: Context, run, *args) -> int:
    """Files in the student's temporary directory after `run(*args)`, counted from a clean start."""
    ctx.student.request("reset")
    ctx.clear_files()
    run(*args)
    return len(ctx.files_left())


def _pack(ctx: Context, n: int) -> None:
    call(ctx, "pack_hook", ctx.student.put(torch.ones(n)))


def _offload(ctx: Context, n: int):
    grad = call(
        ctx,
        "grad_with_offload",
        ctx.student.new("OffloadExample"),
        ctx.student.put(torch.full((n,), 0.5, dtype=torch.float64, requires_grad=True)),
    )
    ctx.student.new("collect_garbage")  # before files are counted: frees what only a cycle holds
    return grad


@check(
    "round-trip",
    points=1,
    uses=("pack_hook", "unpack_hook"),
    en="`unpack_hook(pack_hook(t))` for a 30×40 float64 tensor",
    es="`unpack_hook(pack_hook(t))` para un tensor float64 de 30×40",
)
def round_trip(ctx: Context) -> None:
    t = torch.arange(1200, dtype=torch.float64).reshape(30, 40) / 7
    back = call(ctx, "unpack_hook", call(ctx, "pack_hook", ctx.student.put(t)))
    expect_tensor(back, "`unpack_hook(pack_hook(t))`", shape=(30, 40), dtype=torch.float64)
    expect_close(
        back,
        torch.arange(1200, dtype=torch.float64).reshape(30, 40) / 7,
        "`unpack_hook(pack_hook(t))`",
        rtol=0.0,
        atol=0.0,
    )


@check(
    "gradient",
    points=1,
    uses="grad_with_offload",
    en="the gradient of `OffloadExample()(x).sum()` at x = 0.5 (1200 elements)",
    es="el gradiente de `OffloadExample()(x).sum()` en x = 0.5 (1200 elementos)",
)
def gradient(ctx: Context) -> None:
    expected = torch.full((1200,), 0.6378697926)  # -sin(0.5)·0.5 + cos(0.5)
    expected[:16] += 5.4365636569  # 2·exp(2·0.5), from the first 16 elements' exp(x)²
    expect_grad(_offload(ctx, 1200), expected, "`grad_with_offload(OffloadExample(), x)`")


@check(
    "files",
    points=1,
    uses=("pack_hook", "grad_with_offload"),
    en="1 file for `pack_hook` of 1000 elements, none for 999; after `grad_with_offload` with "
    "1200 elements, the 3 files of the kept branch and no other",
    es="1 archivo para `pack_hook` de 1000 elementos, ninguno para 999; tras `grad_with_offload` "
    "con 1200 elementos, los 3 archivos de la rama conservada y ningún otro",
)
def files(ctx: Context) -> None:
    for what, run, args, wanted in (
        ("`pack_hook(torch.ones(1000))`", _pack, (ctx, 1000), 1),
        ("`pack_hook(torch.ones(999))`", _pack, (ctx, 999), 0),
        (
            "`grad_with_offload(OffloadExample(), torch.full((1200,), 0.5))`",
            _offload,
            (ctx, 1200),
            3,
        ),
    ):
        found = _files_after(ctx, run, *args)
        if found > wanted and run is _offload:
            raise Fail(Diagnostic("temp-file-leak", {"what": what, "count": found - wanted}))
        if found != wanted:
            raise Fail(
                Diagnostic(
                    "output-mismatch",
                    {
                        "what": {"en": f"Files after {what}", "es": f"Archivos tras {what}"},
                        "got": found,
                        "expected": wanted,
                        "worst_index": [],
                        "hint": COUNT_HINT,
                    },
                )
            )
