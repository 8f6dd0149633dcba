"""The rest of the seal: the submission's code runs in a thread of its own, and nothing is
answered until the grader's side of the process is seen unchanged.

A submission reaches what answers the grader through frames (a frame's `f_back` leads from its
own function up to the harness's), through modules (`sys.modules["worker.harness.protocol"]`,
`builtins.getattr`, `torch.Tensor`'s real dict leaked by a mappingproxy comparison), through
state torch keeps per thread (a dispatch or function mode left entered) or for the process (a
kernel of its own for one of torch's operators). So, once sealed:
- the server keeps its state on the main thread's stack, and runs every piece of the
  submission's code (loading it, calling it, reading its objects' attributes, dropping them) on
  the student thread, whose stack holds only `_student_loop`: from there no frame leads to the
  server. The main thread reads the submission's objects by identity and C-level look-ups alone
  (student.Server.encode), so none of its code runs there; and were one to (a finalizer), the
  hook refuses it frames on that thread;
- after each job, before the main thread touches what it returned, the check compares by
  identity every entry of the modules and types the replies are made with (for torch's modules,
  the names they use) with what they held when the ready process was prepared, counts the Python
  threads (the student thread's alone: any other could change things while a reply is made),
  looks at torch's per-thread state on both threads (modes, dispatch keys, saved-tensor hooks),
  the signal handlers, the collector's callbacks, torch's global hook registries, and the
  operators a reply reads tensors with (a kernel of the submission's leaves torch's
  "(inactive)"); once the exercise's support is loaded, the grader's copy of it too. Whatever
  changed taints the process for good: that reply and every later one is the refusal, which
  names it.
"""

from __future__ import annotations

import _signal
import _thread
import ast
import dis
import gc
import itertools
import json
import operator
import os
import sys
import time
import types
from collections import OrderedDict
from typing import Any, Callable

import torch

from worker.harness import protocol, seal, seccomp

# the modules the main thread makes its replies with (not `sys` or `warnings`, which honest
# code changes: redirected output, a filter); any other module the submission changes changes
# only what its own code does
WATCHED_MODULES = (
    "builtins",
    "os",
    "json",
    "json.decoder",
    "json.encoder",
    "json.scanner",
    "struct",
    "math",
)
# of torch's modules, which torch itself changes as it runs (an optimizer's first step replaces
# `torch.manual_seed`), the names the main thread reads
WATCHED_NAMES = {
    "torch": (
        "Tensor",
        "Size",
        "dtype",
        "device",
        "empty",
        "from_numpy",
        "frombuffer",
        "nn",
        "optim",
        "autograd",
        "_C",
        "bfloat16",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
        "uint8",
        "int8",
        "int16",
        "int32",
        "int64",
        "bool",
    ),
    "torch.nn": ("Parameter", "Module"),
    "torch.optim": ("Optimizer",),
    "torch.autograd": ("set_detect_anomaly",),
    "torch._C": ("TensorBase", "DisableTorchFunction"),
    "numpy": ("frombuffer", "uint8", "ndarray", "dtype"),
    # what calls code of the submission's on whichever thread an event happens: a warning torch
    # raises on the main thread, an exception no one can raise
    "warnings": (
        "showwarning",
        "_showwarnmsg",
        "_showwarnmsg_impl",
        "formatwarning",
        "warn",
        "warn_explicit",
    ),
    "sys": ("unraisablehook",),
}
# and the types, whose real dicts a mappingproxy comparison leaks (the harness's own classes too)
WATCHED_TYPES = (
    torch.Tensor,
    torch._C.TensorBase,
    torch.nn.Parameter,
    torch.Size,
    object,
    type,
    dict,
    list,
    tuple,
    str,
    bytes,
    bytearray,
    memoryview,
    int,
    float,
    bool,
    json.JSONDecoder,
    json.JSONEncoder,
)
# the operators a reply reads a tensor's bytes with (protocol.span_bytes): a kernel of the
# submission's for one of them (torch.library) leaves torch's own "(inactive)" in its entry
READ_WITH = (
    "aten::detach",
    "aten::as_strided",
    "aten::_to_copy",
    "aten::copy_",
    "aten::clone",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::contiguous",
    "aten::view",
)
_TOP_SAVED_HOOKS = torch._C._autograd._top_saved_tensors_default_hooks


def _no_saved_tensor_hooks() -> bool:
    return _TOP_SAVED_HOOKS(True) is None


# what torch keeps per thread that changes what the grader's calls compute: modes entered
# (function, dispatch) and dispatch keys forced in or out (the python dispatcher)
THREAD_STATE = (
    torch._C._len_torch_function_stack,
    torch._C._len_torch_dispatch_stack,
    torch._C._dispatch_tls_local_include_set,
    torch._C._dispatch_tls_local_exclude_set,
    # saved-tensor hooks left entered (True: none), which the grader's backward
    # passes on the student thread would run
    _no_saved_tensor_hooks,
)
THREAD_GRACE = 1.0  # seconds a thread of the submission's has to end once its job returned
# torch's registries of hooks every module or optimizer runs, the grader's probes too: their
# dicts (`_global_forward_hooks`, `_global_optimizer_pre_hooks`, …) must stay as they were
HOOK_REGISTRIES = ("torch.nn.modules.module", "torch.optim.optimizer")


def _student_loop(box: list, go: Any, done: Any, state: tuple, setup: Callable[[], None]) -> None:
    """The student thread: confines itself (`setup`), then runs each job the main thread leaves
    in box[1], puts back (ran, value or exception, torch's state for this thread) and parks
    again. The submission can read these locals, never rebind them; what it rebinds elsewhere
    the main thread's check finds."""
    try:
        setup()
        box[0] = sys._getframe()
    except BaseException as exc:  # said by the main thread: this process grades nothing
        box[0] = exc
    done.release()
    while True:
        go.acquire()
        job, box[1] = box[1], None
        try:
            box[1] = (True, job(), tuple(repr(read()) for read in state))
        except BaseException as exc:
            box[1] = (False, exc, tuple(repr(read()) for read in state))
        job = None
        done.release()


def _watched(harness_package: str) -> list[Any]:
    modules = [
        module
        for name, module in list(sys.modules.items())
        if module is not None
        and (
            name in WATCHED_MODULES
            or name in WATCHED_NAMES
            or name.startswith(harness_package + ".")
        )
    ]
    own_types = [
        value
        for module in modules
        if module.__name__.startswith(harness_package)
        for value in list(module.__dict__.values())
        if isinstance(value, type) and value.__module__ == module.__name__
    ]
    return modules + list(WATCHED_TYPES) + own_types


class Watch:
    """The student thread, and the check after each job. Made once, on the main thread, when
    the process is sealed; everything it reads is bound now, in its slots, out of the
    submission's reach (the server holds it on the main thread's stack alone)."""

    __slots__ = (
        "_box",
        "_go",
        "_done",
        "_park",
        "_student",
        "_baseline",
        "_current_frames",
        "_trusted",
        "_taint",
        "_sleep",
        "_find_change",
        "refuse",
        "_refused",
        "watch_also",
    )

    def __init__(self, trusted: list[bool], prepared: tuple, setup: Callable[[], None]):
        self._trusted = trusted  # the hook's: lets this thread read other threads' frames
        self._current_frames, self._sleep = sys._current_frames, time.sleep
        self._refused = seal.SealRefused
        self._taint: str | None = None
        self._box: list = [None, None]
        self._go, self._done = _thread.allocate_lock(), _thread.allocate_lock()
        self._go.acquire()
        self._done.acquire()
        self._student = _thread.start_new_thread(
            _student_loop, (self._box, self._go, self._done, THREAD_STATE, setup)
        )
        self._done.acquire()
        if isinstance(self._box[0], BaseException):
            raise OSError(0, f"the student thread: {self._box[0]}")
        self._park = (self._box[0], _PARK_LINE)
        self._baseline = tuple(repr(read()) for read in THREAD_STATE)
        self._find_change, self.watch_also = _change_finder(prepared, self._baseline)
        self.refuse = _refuser()

    def run(self, job: Callable[[], Any]) -> Any:
        """job() on the student thread, and its value; the refusal, if anything changed or the
        job raised (jobs describe their exceptions themselves: an exception of the
        submission's is never raised here, where its type's code would run)."""
        self._box[1] = job
        job = None
        self._go.release()
        self._done.acquire()
        # `done` is released by the loop, or by code of the submission's that reached it: either
        # way nothing goes on until the loop is parked again
        frame, line = self._park
        self._trusted[0] = True
        try:
            while not (
                self._current_frames().get(self._student) is frame and frame.f_lineno == line
            ):
                self._sleep(0)
        finally:
            self._trusted[0] = False
        ran, value, state = self._box[1]
        self._box[1] = None
        if state != self._baseline and self._taint is None:
            self._taint = "mode -"
        # found before the main thread touches what the job returned: a forged encoder or
        # kernel never runs there
        if self._taint is None:
            self._taint = self._find_change()
        if self._taint:
            raise self._refused(*self._taint.split(" ", 1))
        if not ran:
            raise self._refused("unreadable", "-")
        return value

    def tainted(self) -> str | None:
        """What of the grader's side changed, as "KIND SUBJECT" (seal.REFUSALS), or None: found
        after each job (the main thread runs no code of the submission's), said for good."""
        return self._taint


def _park_line() -> int:
    """The line where the student thread waits for a job: `go.acquire()` in _student_loop."""
    for instruction in dis.get_instructions(_student_loop):
        if instruction.argval == "acquire":
            return instruction.positions.lineno
    raise RuntimeError("_student_loop waits nowhere")


_PARK_LINE = _park_line()


def _refuser() -> Callable[[int, str], None]:
    """What answers a reply once something changed: the refusal, framed here with what was bound
    at the seal (protocol.py's own code may be what changed). `change` is one of the names taken
    then, as "KIND SUBJECT" (seal.REFUSALS); the JSON is written by hand for the same reason."""
    head, write, encode = protocol.HEADER.pack, os.write, str.encode

    def refuse(fd: int, change: str) -> None:
        body = encode(
            '{"error":{"type":"SealRefused","message":"'
            + change
            + '","frames":[],"made_at":null,"errno":1}}'
        )
        view = memoryview(head(len(body), 0) + body)
        while view:
            view = view[write(fd, view) :]

    return refuse


def prepare(harness_package: str = seal.HARNESS_PACKAGE) -> tuple:
    """What the check compares with: for each watched module and type, its type, the names
    watched (None: every entry, in order), their values now, its name, and whether it may not
    gain entries. Taken in the ready student process before it is given its submission: reading
    it there costs about 5 ms of copy-on-write faults (the reads change reference counts), off
    the grade's path."""
    kept = []
    for owner in _watched(harness_package):
        names = (
            WATCHED_NAMES.get(getattr(owner, "__name__", None))
            if not isinstance(owner, type)
            else None
        )
        # a type or a harness module may not even gain an entry (it would shadow an inherited
        # method, or a builtin)
        kept.append(
            _entry(
                owner, names, isinstance(owner, type) or owner.__name__.startswith(harness_package)
            )
        )
    registries = tuple(
        (registry, len(registry), f"{module}.{name}")
        for module in HOOK_REGISTRIES
        for name, registry in vars(sys.modules[module]).items()
        if name.startswith("_global_") and type(registry) in (dict, OrderedDict)
    )
    return tuple(kept), registries


def _entry(owner: Any, names: tuple[str, ...] | None, exact: bool) -> tuple:
    """What the check keeps of a module or type: see prepare()."""
    entries = owner.__dict__
    if not isinstance(owner, type):  # what a warning adds to the globals it points at
        entries.setdefault("__warningregistry__", {})
    values = tuple(entries.get(n) for n in names) if names else tuple(entries.values())
    return owner, type(owner), names, values, _name(owner), exact


def support_entries(support: types.ModuleType, source: str) -> list[tuple]:
    """The grader's copy of the exercise's support code, as loaded, to be watched like the
    harness: its module and classes, whole, and the names its code reads of the modules it
    uses (`torch.optim.SGD`, `F.cross_entropy`: its probes run on the student's side, and a
    submission reached its functions through a method's `__globals__`)."""
    seal.hook_optimizer_steps()  # its optimizers' classes wrapped now, not at their first use
    found = [_entry(support, None, True)]
    found += [
        _entry(value, None, True)
        for value in list(vars(support).values())
        if isinstance(value, type) and value.__module__ == support.__name__
    ]
    read: dict[int, tuple[types.ModuleType, set[str]]] = {}
    for node in ast.walk(ast.parse(source)):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if not (chain and isinstance(node, ast.Name)):
            continue
        owner = vars(support).get(node.id)
        for name in reversed(chain):
            if not isinstance(owner, types.ModuleType):
                break
            read.setdefault(id(owner), (owner, set()))[1].add(name)
            owner = getattr(owner, name, None)
    return found + [_entry(owner, tuple(sorted(names)), False) for owner, names in read.values()]


def _change_finder(
    prepared: tuple, baseline: tuple
) -> tuple[Callable[[], str | None], Callable[[Any], None]]:
    """The check, with every name it uses bound now as values of its closure (the builtins it
    calls too: a patched `builtins.list` must not answer for what it checks). Entries are
    compared with `is` (never `==`, which an object of the submission's answers; nor `id`,
    which raises an audit event per call)."""
    make_tuple, type_of, every, size = tuple, type, all, len
    kept, registries = list(prepared[0]), prepared[1]
    each, islice, same, text = map, itertools.islice, operator.is_, repr
    count_threads, state, pause, clock = _thread._count, THREAD_STATE, time.sleep, time.monotonic
    entry, inactive, read_with = torch._C._dispatch_dump, "(inactive)", READ_WITH
    # a handler set on the main thread would be called with the grader's frame; a collector's
    # callback, or a threshold that wakes it at will, on whichever thread allocates
    handler, signals = _signal.getsignal, make_tuple(_signal.valid_signals())
    handlers = make_tuple(handler(number) for number in signals)
    callbacks, threshold = gc.callbacks, gc.get_threshold
    callbacks_then, threshold_then = make_tuple(callbacks), threshold()

    def find_change() -> str | None:
        for owner, kind, names, then, name, exact in kept:
            now = owner.__dict__
            if type_of(owner) is not kind:
                return "tamper " + name
            if names:
                if not every(each(same, each(now.get, names), then)):
                    return "tamper " + name
            elif (
                size(now) < size(then)
                or exact
                and size(now) != size(then)
                or not every(each(same, islice(now.values(), size(then)), then))
            ):
                return "tamper " + name
        # a thread the job let go (an event set, a daemon's last line) may take a moment to end:
        # the main thread waits for it, touching nothing meanwhile
        until = clock() + THREAD_GRACE
        while count_threads() != 1:
            if clock() > until:
                return "thread -"
            pause(0.001)
        if make_tuple(text(read()) for read in state) != baseline:
            return "mode -"
        if not every(each(same, each(handler, signals), handlers)):
            return "handler -"
        if (
            size(callbacks) != size(callbacks_then)
            or not every(each(same, callbacks, callbacks_then))
            or threshold() != threshold_then
        ):
            return "tamper gc"
        for registry, length, name in registries:
            if size(registry) != length:
                return "tamper " + name
        for operator_name in read_with:
            if inactive in entry(operator_name):
                return "library " + operator_name
        return None

    def also(entries: list[tuple]) -> None:
        kept.extend(entries)

    return find_change, also


def _name(owner: Any) -> str:
    """How a refusal names a module or type (`torch`, `Tensor`): letters, digits and dots alone,
    since it is written into JSON by hand."""
    return "".join(c for c in str(getattr(owner, "__name__", "?")) if c.isalnum() or c in "._")


def seal_process(prepared: tuple, request_fd: int, reply_fd: int) -> Watch:
    """Start this process's student thread, kept off the grader's pipes, to check against
    `prepared` (prepare()), then seal the process (seal.py's hook, which refuses the ctypes the
    thread's filter is made with); an OSError names what could not be raised."""
    trusted = [False]
    watched = Watch(trusted, prepared, lambda: seccomp.keep_off_pipes(request_fd, reply_fd))
    seal.seal(trusted)
    return watched
