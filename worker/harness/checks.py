"""What an exercise's hidden checks are written with.

A check is a function of a `Context`, declared with `@check`. It draws its own inputs from
`ctx.rng`, computes the expected values in the grader (with `ctx.reference`), asks the student's
process through `ctx.student`, and raises `Fail` with diagnostics when something is wrong.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

from worker.harness import seal
from worker.harness.codes import (
    BACKWARD_ON,
    DETACHED_BACKWARD,
    EINSUM_SUBSCRIPTS,
    LEAF_IN_PLACE,
    NUMPY_LEAVES_THE_GRAPH,
    ONE_ELEMENT_ONLY,
    PERMUTE_DIMENSIONS,
    SAME_DEVICE,
    SAME_DTYPE,
    VIEW_SIZE,
    VIEW_STRIDES,
)
from worker.harness.diagnostics import Diagnostic, Fail, compare_grad, compare_values, short, shown
from worker.harness.remote import RemoteObject, RemoteTensor, Student, StudentError
from worker.harness.source_rules import Finding, hand_written_grads

__all__ = [
    "check",
    "Context",
    "Fail",
    "Diagnostic",
    "expect_tensor",
    "expect_close",
    "expect_grad",
    "expect_float",
    "expect_tuple",
    "expect_sharing",
    "call",
    "RemoteTensor",
    "RemoteObject",
]


@dataclass(frozen=True)
class CheckSpec:
    name: str
    points: float
    uses: tuple[str, ...]
    title: dict
    function: Callable[["Context"], None]
    timed: bool = False


def check(
    name: str,
    *,
    points: float,
    uses: tuple[str, ...] | str,
    en: str,
    es: str,
    timed: bool = False,
):
    """Declare a check: its stable name, points, the student functions it calls and its titles;
    `timed`: it compares a time (a speed bonus), so a loaded machine can take its points, and
    `hpcgrade exercise check` does not ask it to score alike on every seed."""

    def register(function: Callable[["Context"], None]) -> Callable[["Context"], None]:
        function.hpcgrade_check = CheckSpec(
            name,
            float(points),
            (uses,) if isinstance(uses, str) else tuple(uses),
            {"en": en, "es": es},
            function,
            timed,
        )
        return function

    return register


@dataclass(frozen=True)
class AdviceSpec:
    """Advice, not graded: a look at how a submission works, once its checks are graded, in the
    second look's process. Its function returns what to tell the student ({"en", "es"}) or None."""

    name: str
    uses: tuple[str, ...]
    function: Callable[["Context"], dict | None]


def advice(name: str, *, uses: tuple[str, ...] | str):
    """Declare advice: its stable name and the student functions it calls."""

    def register(
        function: Callable[["Context"], dict | None],
    ) -> Callable[["Context"], dict | None]:
        function.hpcgrade_advice = AdviceSpec(
            name, (uses,) if isinstance(uses, str) else tuple(uses), function
        )
        return function

    return register


# how many levels of folders files_left and clear_files walk below the scratch: a folder deeper
# is something left (reported like an unreadable one), and clear_files leaves it
MAX_SCRATCH_DEPTH = 32


@dataclass
class Context:
    student: Student
    rng: torch.Generator
    reference: ModuleType | None  # reference.py, or a known wrong program; None in visible.py
    support: ModuleType | None
    device: torch.device
    # the student process's scratch directory (its TMPDIR and HOME, the one place it may write),
    # as the grader sees it: what the submission left there, counted without asking it
    scratch: Path | None = None
    # the submission's code cells as the grader read them from the file, (label, code): for
    # checks that rest on the grader's own reading of the source (worker/harness/source_rules.py)
    source_cells: tuple[tuple[str, str], ...] = ()

    def randn(self, *shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return torch.randn(*shape, generator=self.rng, dtype=dtype)

    def randint(self, low: int, high: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=self.rng)

    def on_device(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device)

    def _scratch_top(self) -> str:
        """The scratch with a trailing "/.": where it is the grader's descriptor of the student's
        tmpfs (/proc/self/fd/N, a link to it) the walk must enter it, and no further link."""
        return os.path.join(str(self.scratch), ".")

    def files_left(self) -> list[str]:
        """What the submission left in its scratch directory: every entry that is not a folder
        (links included), and every folder that cannot be read or lies deeper than
        MAX_SCRATCH_DEPTH (with a trailing separator), by path relative to it. Walked through
        folder descriptors that never follow a link, so that a folder swapped for a link
        meanwhile cannot point the grader elsewhere."""
        return self._sweep(clear=False)

    def clear_files(self) -> None:
        """Delete what files_left finds (folders stay, and what lies deeper than
        MAX_SCRATCH_DEPTH), through the same descriptors."""
        self._sweep(clear=True)

    def file_contents(self, limit: int) -> dict[str, bytes]:
        """The first `limit` bytes of each regular file files_left finds, read by the grader
        through the same descriptors (never following a link): what the submission wrote, for
        checks that hold it against the tensors it stands for. Never unpickled."""
        contents: dict[str, bytes] = {}
        self._sweep(clear=False, contents=contents, limit=limit)
        return contents

    def _sweep(
        self, clear: bool, contents: dict[str, bytes] | None = None, limit: int = 0
    ) -> list[str]:
        """The walk of files_left, clear_files and file_contents: one folder descriptor open
        per level, at most MAX_SCRATCH_DEPTH of them, each opened with O_NOFOLLOW from its
        parent's."""
        found: list[str] = []

        def visit(descriptor: int, where: str, depth: int) -> None:
            try:
                names = os.listdir(descriptor)
            except OSError:
                found.append(where + os.sep)
                return
            for name in names:
                path = os.path.normpath(os.path.join(where, name))
                try:
                    mode = os.stat(name, dir_fd=descriptor, follow_symlinks=False).st_mode
                except OSError:
                    continue  # gone meanwhile
                if not stat.S_ISDIR(mode):
                    found.append(path)
                    if contents is not None and stat.S_ISREG(mode):
                        contents[path] = _read_file(name, descriptor, limit)
                    if clear:
                        with contextlib.suppress(OSError):
                            os.unlink(name, dir_fd=descriptor)
                    continue
                if depth >= MAX_SCRATCH_DEPTH:
                    found.append(path + os.sep)
                    continue
                try:
                    inner = os.open(
                        name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=descriptor
                    )
                except OSError:  # unreadable, or swapped for a link meanwhile
                    found.append(path + os.sep)
                    continue
                try:
                    visit(inner, path, depth + 1)
                finally:
                    os.close(inner)

        top = os.open(self._scratch_top(), os.O_RDONLY | os.O_DIRECTORY)
        try:
            visit(top, ".", 0)
        finally:
            os.close(top)
        return sorted(found)


def _read_file(name: str, folder: int, limit: int) -> bytes:
    """Up to `limit` bytes of a file in a folder descriptor, never through a link nor waiting
    on a pipe swapped in meanwhile; b"" when it cannot be read."""
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return b""
    try:
        parts, left = [], limit
        while left > 0:
            part = os.read(descriptor, min(left, 1 << 20))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)
    except OSError:
        return b""
    finally:
        os.close(descriptor)


# (text in the exception's message, code, hint that replaces the code's general one or None)
EXCEPTION_PATTERNS = (
    ("grad can be implicitly created only for scalar outputs", "nonscalar-backward", None),
    ("backward through the graph a second time", "graph-freed", None),
    ("modified by an inplace operation", "inplace-modified", None),
    ("does not require grad and does not have a grad_fn", "detached-output", DETACHED_BACKWARD),
    (
        "a leaf Variable that requires grad is being used in an in-place operation",
        "exception",
        LEAF_IN_PLACE,
    ),
    ("can't allocate memory", "memory-limit", None),
    ("out of memory", "memory-limit", None),
    ("Can't call numpy() on Tensor that requires grad", "detached-output", NUMPY_LEAVES_THE_GRAPH),
    ("only one element tensors can be converted to Python scalars", "exception", ONE_ELEMENT_ONLY),
    ("cannot be converted to Scalar", "exception", ONE_ELEMENT_ONLY),
    ("einsum():", "exception", EINSUM_SUBSCRIPTS),
    (
        "does not match the length of the desired ordering of dimensions",
        "exception",
        PERMUTE_DIMENSIONS,
    ),
    ("is invalid for input of size", "exception", VIEW_SIZE),
    ("view size is not compatible with input tensor's size and stride", "exception", VIEW_STRIDES),
    ("Expected all tensors to be on the same device", "exception", SAME_DEVICE),
    ("expected scalar type", "exception", SAME_DTYPE),
    ("must have the same dtype", "exception", SAME_DTYPE),
    ("to have the same dtype", "exception", SAME_DTYPE),
)


def student_place(frames: object) -> tuple[str | None, int | None]:
    """The file (or cell) and line of the last of the student's frames, as the student process
    reported them: a name and a whole number, or nothing (the process is the submission's)."""
    last = frames[-1] if isinstance(frames, list) and frames else None
    if not isinstance(last, dict):
        return None, None
    file, line = last.get("file"), last.get("line")
    return (
        file if isinstance(file, str) and len(file) <= 200 else None,
        line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else None,
    )


def diagnose_exception(info: dict, what: str | dict) -> Diagnostic:
    """Name the student's exception: a known autograd mistake, a sandbox refusal or a plain raise.
    The line is the student's last one in the traceback or, for an error inside `backward()`, the
    one that made the tensor involved (the student process adds it)."""
    message, kind = str(info.get("message", "")), str(info.get("type", "Exception"))
    file, line = student_place(info.get("frames"))
    details = {"what": what, "type": kind, "error": message[:500], "file": file, "line": line}
    if isinstance(info.get("made_at"), dict):  # anomaly mode found where the tensor was made
        details["file"], details["line"] = student_place([info["made_at"]])
        details["made_at"] = True
    if kind in ("MemoryError", "ValueTooLarge"):  # ValueTooLarge: the student process's own
        return Diagnostic("memory-limit", details)
    for pattern, code, hint in EXCEPTION_PATTERNS:
        if pattern in message:
            if hint is DETACHED_BACKWARD:  # the subject is the tensor, not the function
                details["what"] = {
                    lang: BACKWARD_ON[lang].format(
                        what=what.get(lang, what.get("en")) if isinstance(what, dict) else what
                    )
                    for lang in BACKWARD_ON
                }
            return Diagnostic(code, dict(details, hint=hint) if hint else details)
    refused = seal.refusal_words(kind, message)
    if refused:
        return Diagnostic(
            "forbidden-operation", dict(details, error=refused, hint=seal.HINT, sealed=True)
        )
    if kind in ("PermissionError", "OSError", "BlockingIOError") and info.get("errno") in (
        errno.EPERM,
        errno.EACCES,
        errno.ENETUNREACH,
        errno.ENOSYS,
    ):
        return Diagnostic("forbidden-operation", details)
    return Diagnostic("exception", details)


def call(ctx: Context, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call the student's function; its exception becomes a failed check with the right code."""
    try:
        return ctx.student.call(name, *args, **kwargs)
    except StudentError as exc:
        raise Fail(diagnose_exception(exc.info, f"`{name}`")) from None


def expect_tensor(
    value: Any,
    what: str | dict,
    *,
    shape: tuple | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
) -> RemoteTensor:
    if not isinstance(value, RemoteTensor):
        kind = value.type_name if isinstance(value, RemoteObject) else type(value).__name__
        raise Fail(
            Diagnostic(
                "output-mismatch", {"what": what, "got_type": kind, "expected_type": "torch.Tensor"}
            )
        )
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise Fail(
            Diagnostic(
                "shape-mismatch", {"what": what, "got": list(value.shape), "expected": list(shape)}
            )
        )
    if dtype is not None and value.dtype != dtype:
        raise Fail(
            Diagnostic(
                "dtype-mismatch", {"what": what, "got": str(value.dtype), "expected": str(dtype)}
            )
        )
    if device is not None and torch.device(value.meta["device"]).type != device.type:
        raise Fail(
            Diagnostic(
                "device-mismatch",
                {"what": what, "got": value.meta["device"], "expected": str(device)},
            )
        )
    return value


def expect_tuple(value: Any, length: int, what: str | dict) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) != length:
        got = (
            f"{type(value).__name__} of length {len(value)}"
            if isinstance(value, (tuple, list))
            else getattr(value, "type_name", type(value).__name__)
        )
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {"what": what, "got_type": got, "expected_type": f"tuple of {length}"},
            )
        )
    return tuple(value)


def expect_close(
    value: Any,
    expected: torch.Tensor,
    what: str | dict,
    *,
    hint: dict | None = None,
    **tolerances: float,
) -> RemoteTensor:
    """`hint` ({"en": …, "es": …}) replaces the general hint when the values are wrong."""
    tensor = expect_tensor(value, what)
    diagnostic = compare_values(tensor.value, expected, what, **tolerances)
    if diagnostic:
        raise Fail(
            Diagnostic(diagnostic.code, dict(diagnostic.details, hint=hint)) if hint else diagnostic
        )
    return tensor


def expect_grad(value: Any, expected: torch.Tensor, what: str | dict, **tolerances: float) -> None:
    if value is not None:
        value = expect_tensor(value, what).value
    diagnostic = compare_grad(value, expected, what, **tolerances)
    if diagnostic:
        raise Fail(diagnostic)


def expect_float(value: Any, expected: float, what: str | dict, *, tol: float = 1e-6) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = (
            value.type_name
            if isinstance(value, RemoteObject)
            else ("torch.Tensor" if isinstance(value, RemoteTensor) else type(value).__name__)
        )
        raise Fail(
            Diagnostic(
                "output-mismatch", {"what": what, "got_type": kind, "expected_type": "float"}
            )
        )
    if not abs(value - expected) <= tol * max(1.0, abs(expected)):
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": what,
                    "got": short(float(value)),
                    "expected": short(expected),
                    "worst_index": [],
                    "max_abs_error": abs(value - expected),
                    "max_rel_error": abs(value - expected) / max(abs(expected), 1e-12),
                    **shown(torch.tensor(float(value)), torch.tensor(float(expected)), tol, 0.0),
                },
            )
        )
    return float(value)


def _fresh_like(ctx: Context, t: torch.Tensor) -> torch.Tensor:
    """Values of `t`'s shape and dtype drawn from `ctx.rng`, each different from `t`'s own."""
    if t.dtype == torch.bool:
        return ~t
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return (t.double() + 1.0 + ctx.randn(*t.shape).abs()).to(t.dtype)
    return t + ctx.randint(1, 50, tuple(t.shape)).to(t.dtype)


def _grader_side(obj: Any) -> torch.Tensor:
    """A tensor, or a NumPy array seen as a tensor on its own memory."""
    return obj if isinstance(obj, torch.Tensor) else torch.from_numpy(obj)


def expect_sharing(
    ctx: Context,
    written: Any,
    read: Any,
    reference: tuple,
    what: str | dict,
    *,
    hint: dict | None = None,
) -> None:
    """Whether `written` and `read` (two of the student's objects: tensors or NumPy arrays)
    share memory, tested by behaviour: the grader writes fresh random values into `written` in
    the student's process (into its `.data` with `copy_`, or an array's elements with `put`) and
    reads `read` back. `reference` is the grader's own pair (written, read), made by the
    reference: the same write into it says what `read` must hold afterwards, a write that shows
    in the other object or one that does not. A claim about storage cannot pass this: only
    memory that is shared shows the values the grader chose, in the places they must be."""
    written_ref, read_ref = (_grader_side(o) for o in reference)
    before = read_ref.detach().clone()
    with torch.no_grad():
        fresh = _fresh_like(ctx, written_ref.detach().cpu())
        written_ref.copy_(fresh.to(written_ref.device))
    expected = read_ref.detach().cpu().clone()
    shares = not torch.equal(expected, before.cpu())
    if isinstance(written, RemoteTensor):
        ctx.student.method(ctx.student.attr(written, "data"), "copy_", ctx.on_device(fresh))
    else:
        ctx.student.method(written, "put", list(range(fresh.numel())), fresh.reshape(-1).tolist())
    if isinstance(read, RemoteTensor):
        value = expect_tensor(ctx.student.attr(read, "data"), what).value
        same = (
            value.shape == expected.shape
            and value.dtype == expected.dtype
            and torch.equal(value, expected)
        )
        unchanged = value.shape == before.shape and torch.equal(value, before.cpu())
    else:
        value = ctx.student.method(read, "tolist")
        same, unchanged = value == expected.tolist(), value == before.cpu().tolist()
    if same:
        return
    details = {"what": what, **({"hint": hint} if hint else {})}
    if not shares:
        raise Fail(Diagnostic("storage-shared", details))
    if not unchanged:  # something else changed: name the values
        try:
            got = (
                value
                if isinstance(value, torch.Tensor)
                else torch.tensor(value, dtype=expected.dtype)
            )
        except (TypeError, ValueError, RuntimeError):
            got = None
        diagnostic = compare_values(got, expected, what) if got is not None else None
        if diagnostic:
            raise Fail(Diagnostic(diagnostic.code, dict(diagnostic.details, **details)))
    raise Fail(Diagnostic("storage-not-shared", details))


HAND_WRITTEN_GRAD = {
    "en": "Let backward() write the gradient: `y.backward(v)` (or `torch.autograd.grad`) fills "
    "`x.grad` for you; a gradient written by hand, even with the right formula, is not "
    "what this exercise asks.",
    "es": "Deja que backward() escriba el gradiente: `y.backward(v)` (o `torch.autograd.grad`) "
    "rellena `x.grad` por ti; un gradiente escrito a mano, aunque con la fórmula correcta, "
    "no es lo que pide este ejercicio.",
}


def refuse_hand_written_grads(ctx: Context, what: str | dict) -> None:
    """Fail the check when the source, as the grader read it, writes a gradient itself
    (source_rules.hand_written_grads): for the checks that say it comes from backward()."""
    found = hand_written_grads(ctx.source_cells)
    if found:
        raise Fail(
            refused_in_source(
                what,
                HAND_WRITTEN_GRAD,
                "hand-written-grad",
                found[0],
                {"en": "writes a gradient itself:", "es": "escribe un gradiente a mano:"},
            )
        )


def refused_in_source(
    what: str | dict,
    hint: dict,
    rule: str,
    found: Finding,
    does: dict[str, str],
    why: dict[str, str] | None = None,
) -> Diagnostic:
    """`forbidden-operation` for what the grader's reading of the source found: "your file
    {does} {found} ({where}), {why}" in both languages."""
    where, why = found.where(), why or {}
    return Diagnostic(
        "forbidden-operation",
        {
            "what": what,
            "hint": hint,
            "rule": rule,
            "found": found.name,
            "line": found.line,
            "file": found.cell,
            "error": {
                "en": f"your file {does['en']} {found.name} ({where})"
                + (f", {why['en']}" if why else ""),
                "es": f"tu archivo {does['es']} {found.name} ({where})"
                + (f", {why['es']}" if why else ""),
            },
        },
    )
