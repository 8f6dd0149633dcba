"""The seal: a PEP 578 audit hook the student process installs on itself before the submission
loads. Python offers no way to remove one, so what it refuses stays refused for the process's
life, whatever the submission does afterwards.

It refuses what no exercise of the course needs and what forgeries use to rewrite the grader's
view of the process from inside it:
- setting or deleting an attribute of torch's tensor types and their C base, `nn.Module` and
  torch's layers, `autograd.Function` and autograd's graph and modes, and the harness's own
  classes (`torch.Tensor.backward = …`, a patched `Server.encode_tensor`). Python raises no
  audit event for that, so the zygote makes those types immutable, as built-in types are
  (protect_loaded_types), and the hook refuses the raw memory that could undo it;
- ctypes (raw memory, foreign calls), `gc.get_objects`/`get_referrers`/`get_referents` (how a
  submission reaches the harness's objects), `sys.settrace`/`setprofile`, code objects made at
  run time;
- unpickling anything but plain data (`pickle.loads(b"ctorch.nn.functional\\nconv2d\\n.")`
  reaches a function the source never names);
- signals to any process but its own, and importing the harness's modules.

A refusal raises SealRefused (a PermissionError), or TypeError for an immutable type, where the
submission asked: the submission's failure on what it touches (refusal_words names it for the
diagnostics), never the grader's.

The seal is one layer, not the wall: values the grader computes from fresh hidden inputs, its
own reading of the source, seccomp and the namespaces stay. Its other half is watch.py: the
submission's code runs on a thread of its own (on the grader's thread this hook refuses frames),
and no reply goes out once what the replies are made with changed.
"""

from __future__ import annotations

import _thread
import ctypes
import errno
import os
import re
import sys

HARNESS_PACKAGE = __name__.split(".")[0]  # "worker"

_protected = False  # whether protect_loaded_types made them immutable, in this process
# the modules whose classes the seal makes immutable: tensors, parameters, modules, optimizers
# (whose `step` torch wraps at a class's first instance: hook_optimizer_steps does it first),
# autograd's Functions, graphs and modes, and the harness's own. Not torch's other types
PROTECTED_MODULES = (
    "torch._tensor",
    "torch.nn.parameter",
    "torch.nn.modules.",
    "torch.optim.",
    "torch.autograd.function",
    "torch.autograd.graph",
    "torch.autograd.grad_mode",
    "torch.autograd.variable",
    HARNESS_PACKAGE + ".harness.",
)
PROTECTED_TYPES = ("Tensor", "TensorBase", "_TensorBase")  # also as torch and torch._C name them
Py_TPFLAGS_IMMUTABLETYPE, Py_TPFLAGS_HEAPTYPE = 1 << 8, 1 << 9
# what unpickling may build: tensors and their storages (torch.save, torch.load), containers
PLAIN_DATA_MODULES = frozenset(
    {
        "torch._utils",
        "torch.storage",
        "collections",
        "_codecs",
        "numpy.core.multiarray",
        "numpy._core.multiarray",
        "numpy",
    }
)
PLAIN_BUILTINS = frozenset(
    {
        "set",
        "frozenset",
        "complex",
        "slice",
        "range",
        "bytearray",
        "list",
        "dict",
        "tuple",
        "int",
        "float",
        "str",
        "bytes",
        "bool",
    }
)
# what is refused, as the grader says it (`{subject}`: what the process asked for)
REFUSALS = {
    "set": {
        "en": "setting `{subject}`, an attribute of a type the grader keeps as it is",
        "es": "cambiar `{subject}`, un atributo de un tipo que el corrector mantiene intacto",
    },
    "delete": {
        "en": "deleting `{subject}`, an attribute of a type the grader keeps as it is",
        "es": "borrar `{subject}`, un atributo de un tipo que el corrector mantiene intacto",
    },
    "ctypes": {"en": "ctypes (`{subject}`)", "es": "ctypes (`{subject}`)"},
    "introspection": {
        "en": "`{subject}`, which reaches the grader's objects",
        "es": "`{subject}`, que llega a los objetos del corrector",
    },
    "unpickle": {
        "en": "unpickling `{subject}`, which is no plain data",
        "es": "deserializar con pickle `{subject}`, que no son datos simples",
    },
    "signal": {
        "en": "a signal to process {subject}, not its own",
        "es": "una señal al proceso {subject}, que no es el suyo",
    },
    "import": {
        "en": "importing `{subject}`, the grader's own code",
        "es": "importar `{subject}`, el código del propio corrector",
    },
    "frame": {
        "en": "`{subject}` on the grader's thread, whose frames are the grader's",
        "es": "`{subject}` en el hilo del corrector, cuyos marcos son del corrector",
    },
    "library": {
        "en": "replacing PyTorch's kernel for `{subject}`",
        "es": "reemplazar el núcleo de PyTorch para `{subject}`",
    },
    "code": {
        "en": "replacing `{subject}` of a function",
        "es": "reemplazar `{subject}` de una función",
    },
    "tamper": {
        "en": "changing `{subject}`, which the grader answers with",
        "es": "cambiar `{subject}`, con lo que responde el corrector",
    },
    "thread": {
        "en": "leaving a thread of its own running after its function returned",
        "es": "dejar un hilo propio en marcha después de que su función termine",
    },
    "mode": {
        "en": "leaving a torch mode entered (a dispatch or function mode, or the python "
        "dispatcher)",
        "es": "dejar activo un modo de torch (de dispatch, de función o el python dispatcher)",
    },
    "handler": {"en": "setting a signal handler", "es": "instalar un manejador de señales"},
    "unreadable": {
        "en": "raising an exception that could not be read",
        "es": "lanzar una excepción que no se pudo leer",
    },
}
HINT = {
    "en": "Use PyTorch as it is: changing its classes or the grader's, reaching the grader's "
    "objects (gc, ctypes, tracing) or unpickling code is refused.",
    "es": "Usa PyTorch tal como es: cambiar sus clases o las del corrector, llegar a los "
    "objetos del corrector (gc, ctypes, trazas) o deserializar código está rechazado.",
}
INTROSPECTION = {
    "gc.get_objects": "gc.get_objects()",
    "gc.get_referrers": "gc.get_referrers()",
    "gc.get_referents": "gc.get_referents()",
    "sys.settrace": "sys.settrace()",
    "sys.setprofile": "sys.setprofile()",
    "code.__new__": "types.CodeType()",
    "sys._current_frames": "sys._current_frames()",
    # a hook of its own would run on every thread, the grader's too
    "sys.addaudithook": "sys.addaudithook()",
}
# where a frame is reached from without sys._getframe; refused on the grader's (main) thread
FRAME_ATTRIBUTES = {
    "tb_frame": "traceback.tb_frame",
    "gi_frame": "generator.gi_frame",
    "cr_frame": "coroutine.cr_frame",
    "ag_frame": "async_generator.ag_frame",
}
# what a function runs with: its code no exercise replaces (a forgery would replace the
# harness's); its defaults torch itself sets, so only the harness's functions keep theirs
FUNCTION_DEFAULTS = frozenset({"__defaults__", "__kwdefaults__"})


class SealRefused(PermissionError):
    """What the seal refused: its kind (a key of REFUSALS) and subject, as "KIND SUBJECT"."""

    def __init__(self, kind: str, subject: str):
        super().__init__(errno.EPERM, f"{kind} {subject}")

    def __str__(self) -> str:  # without OSError's "[Errno 1]": refusal_words reads it back
        return self.strerror


CLASS_ASSIGNMENT = "__class__ assignment only supported for mutable types or ModuleType subclasses"
IMMUTABLE = re.compile(r"cannot (set|delete) '(\w+)' attribute of immutable type '([\w.]+)'")


def refusal_words(kind: str, message: str) -> dict[str, str] | None:
    """What the seal refused, from an exception's type and message, in the course's languages;
    None for any other exception."""
    if kind == "TypeError" and IMMUTABLE.fullmatch(message):
        verb, attribute, owner = IMMUTABLE.fullmatch(message).groups()
        refusal, subject = verb, f"{owner}.{attribute}"
    elif kind == "TypeError" and message == CLASS_ASSIGNMENT:  # `tensor.__class__ = Mine`
        refusal, subject = "set", "__class__"
    elif kind == "SealRefused":
        refusal, _, subject = message.partition(" ")
    else:
        return None
    if refusal not in REFUSALS:
        return None
    return {lang: text.format(subject=subject[:200]) for lang, text in REFUSALS[refusal].items()}


def _in_protected_module(name: str) -> bool:
    return name.startswith(PROTECTED_MODULES) or name + "." in PROTECTED_MODULES


def _protected_types() -> list[type]:
    found: dict[int, type] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not _in_protected_module(name):
            continue
        for value in list(getattr(module, "__dict__", {}).values()):
            # issubclass of its type, never value.__class__, which may warn
            if issubclass(type(value), type) and _in_protected_module(
                str(getattr(value, "__module__", ""))
            ):
                found[id(value)] = value
    import torch

    for value in (
        torch.Tensor,
        torch.nn.Module,
        torch.nn.Parameter,
        torch.autograd.Function,
        *(getattr(torch._C, n) for n in PROTECTED_TYPES if hasattr(torch._C, n)),
    ):
        found[id(value)] = value
    return list(found.values())


def _flags_offset() -> int:
    """Where a type object keeps its flags (tp_flags), found against `__flags__` itself."""
    probes = (int, type, type("Probe", (), {}))
    for offset in range(0, 64 * 8, 8):
        if all(ctypes.c_ulong.from_address(id(t) + offset).value == t.__flags__ for t in probes):
            return offset
    raise OSError(0, "the flags of a type object were not found")


def hook_optimizer_steps() -> None:
    """What torch.optim.Optimizer._patch_step_function does to a class at its first instance
    (wrap its `step` for the profiler, once), done now for every optimizer class loaded, so
    that none is changed once immutable."""
    import torch.optim

    pending = [torch.optim.Optimizer]
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        if kind is not torch.optim.Optimizer and not getattr(kind.step, "hooked", None):
            kind.step = torch.optim.Optimizer.profile_hook_step(kind.step)
            kind.step.hooked = True


def protect_loaded_types() -> None:
    """Make the protected types loaded now immutable, as built-in types are: setting or deleting
    their attributes raises TypeError. Done in the zygote after each warm-up, before it forks
    (about 2 ms), so every student process inherits it and none pays for it; nothing undoes it
    but raw memory, which the seal refuses."""
    hook_optimizer_steps()
    offset = _flags_offset()
    for kind in _protected_types():
        if kind.__flags__ & Py_TPFLAGS_HEAPTYPE:  # the others are immutable already
            flags = ctypes.c_ulong.from_address(id(kind) + offset)
            flags.value |= Py_TPFLAGS_IMMUTABLETYPE
    import torch

    try:  # a Python that ignored the flag (before 3.10) leaves the seal missing: fail closed
        torch.Tensor.backward = torch.Tensor.backward
    except TypeError:
        global _protected
        _protected = True


def _make_hook(pid: int, main_thread: int, trusted: list[bool]):
    """The hook, with everything it reads bound now, as values of its closure alone: a
    submission that rebinds this module's names, or mutates what they name, changes nothing it
    refuses (a review rebound `_refusal` through sys.modules and turned the seal off). What the
    event carries is read by type, never through its own methods: an object of the
    submission's could otherwise run its code inside the hook."""
    introspection = dict(INTROSPECTION)  # a copy of its own, which nothing else can reach
    frame_attributes, function_defaults = dict(FRAME_ATTRIBUTES), frozenset(FUNCTION_DEFAULTS)
    function_type = type(_make_hook)
    plain_modules, plain_builtins = frozenset(PLAIN_DATA_MODULES), frozenset(PLAIN_BUILTINS)
    harness, refused_as = HARNESS_PACKAGE, SealRefused
    str_type, int_type, thread = str, int, _thread.get_ident

    def name(value: object) -> str:
        return value if type(value) is str_type else "?"

    def hook(event: str, args: tuple) -> None:
        if event.startswith("ctypes."):
            raise refused_as("ctypes", event)
        if event == "sys._current_frames" and trusted[0] and thread() == main_thread:
            return  # watch.py, making sure the student thread is parked
        if event in introspection:
            raise refused_as("introspection", introspection[event])
        if event == "sys._getframe" and thread() == main_thread:
            raise refused_as("frame", "sys._getframe()")
        if (
            event == "object.__getattr__"
            and name(args[1]) in frame_attributes
            and thread() == main_thread
        ):
            raise refused_as("frame", frame_attributes[name(args[1])])
        if event == "object.__setattr__" and type(args[0]) is function_type:
            if (
                name(args[1]) == "__code__"
                or name(args[1]) in function_defaults
                and name(args[0].__module__).partition(".")[0] == harness
            ):
                raise refused_as("code", name(args[1]))
        if event == "pickle.find_class":
            module, what = name(args[0]), name(args[1])
            if not (
                module in plain_modules
                or module == "builtins"
                and what in plain_builtins
                or module == "torch"
                and what.endswith(("Storage", "Size"))
            ):
                raise refused_as("unpickle", f"{module}.{what}")
        elif event in ("os.kill", "os.killpg"):
            if not (type(args[0]) is int_type and args[0] == pid):
                raise refused_as("signal", str(args[0]) if type(args[0]) is int_type else "?")
        elif event == "import" and name(args[0]).partition(".")[0] == harness:
            raise refused_as("import", name(args[0]))

    return hook


def seal(trusted: list[bool]) -> None:
    """Install the hook on this process, for good, with this thread as the grader's (main)
    thread; `trusted[0]`, set by watch.py alone, lets that thread read the student thread's
    frame. The sandbox layer "seal", with watch.py's student thread and checks."""
    if not _protected:
        raise OSError(0, "torch's types are not protected: the zygote did not make them immutable")
    sys.addaudithook(_make_hook(os.getpid(), _thread.get_ident(), trusted))
