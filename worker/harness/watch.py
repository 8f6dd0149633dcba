"""The rest of the seal: the submission's code runs in a thread of its own, and nothing is
answered until the grader's side of the process is seen unchanged.

A submission reaches what answers the grader through frames (a frame's `f_back` leads from its
own function up to the harness's), through modules (`sys.modules["worker.harness.protocol"]`,
`builtins.getattr`, `torch.Tensor`'s real dict leaked by a mappingproxy comparison), and through
state torch keeps per thread (a dispatch or function mode left entered). So, once sealed:
- the harness's server keeps its state on the main thread's stack, and runs every piece of the
  submission's code (loading it, calling it, reading its objects' attributes) on the student
  thread, whose stack holds only `_student_loop`: from there no frame leads to the server. On
  the main thread the seal refuses frames (`sys._getframe`, a traceback's or a generator's
  frame), so code of the submission's that runs there (a `__del__`, a metaclass's `__name__`)
  finds none either;
- before each reply, `first_change` compares, by identity, every entry of the modules and types
  the reply is made with against what they held when the process was sealed, counts the Python
  threads (the student thread only: any other could change things while a reply is made) and
  looks at the state torch keeps per thread on both; whatever changed taints the process for
  good: every later reply is the refusal, which names it;
- new kernels for torch's own operators (`torch.library`) are refused.
"""
from __future__ import annotations

import _thread
import itertools
import _signal
import os
import sys
import time
from typing import Any, Callable

import torch

from worker.harness import protocol, seal

# the modules the main thread makes its replies with (not `sys` or `warnings`, which honest
# code changes: redirected output, a filter); any other module the submission changes changes
# only what its own code does
WATCHED_MODULES = ("builtins", "torch", "torch.nn", "torch.autograd", "torch.optim", "os",
                   "json", "struct", "math")
# and the types, whose real dicts a mappingproxy comparison leaks (the harness's own classes too)
WATCHED_TYPES = (torch.Tensor, torch._C.TensorBase, torch.nn.Parameter, torch.Size, object, type,
                 dict, list, tuple, str, bytes, bytearray, memoryview, int, float, bool)
# what torch keeps per thread that changes what the grader's calls compute: modes entered
# (function, dispatch) and dispatch keys forced in or out (the python dispatcher)
THREAD_STATE = (torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack,
                torch._C._dispatch_tls_local_include_set, torch._C._dispatch_tls_local_exclude_set)


def _student_loop(box: list, go: Any, done: Any, state: tuple) -> None:
    """The student thread: runs each job the main thread leaves in box[1], puts back (ran,
    value or exception, torch's state for this thread) and parks again. The submission can
    read these locals, never rebind them; what it rebinds elsewhere the main thread's check
    finds."""
    frame = sys._getframe()
    box[0] = (frame, frame.f_lineno + 3)  # the line where it parks: `go.acquire()` below
    done.release()
    while True:
        go.acquire()
        job, box[1] = box[1], None
        try:
            box[1] = (True, job(), tuple(repr(read()) for read in state))
        except BaseException as exc:
            box[1] = (False, exc, tuple(repr(read()) for read in state))
        job = exc = None
        done.release()


def _watched(harness_package: str) -> list[Any]:
    modules = [module for name, module in list(sys.modules.items())
               if module is not None and (name in WATCHED_MODULES
                                          or name.startswith(harness_package + "."))]
    own_types = [value for module in modules if module.__name__.startswith(harness_package)
                 for value in list(module.__dict__.values())
                 if isinstance(value, type) and value.__module__ == module.__name__]
    return modules + list(WATCHED_TYPES) + own_types


def refuse_new_torch_kernels() -> None:
    """No library (`torch.library`) may be made: a kernel registered for `aten::clone` would
    answer what the grader computes, and no exercise registers operators. Nothing keeps the
    original: a reference the refusal held, the submission could reach."""
    refused_as = seal.SealRefused

    def refused(kind: object, namespace: object, *_args: object) -> None:
        raise refused_as("library", f"torch.library.Library({str(namespace)[:60]!r})")
    torch._C._dispatch_library = refused


class Watch:
    """The student thread, and the check before each reply. Made once, on the main thread, when
    the process is sealed; everything it reads is bound now, in its slots, out of the
    submission's reach (the server holds it on the main thread's stack alone)."""

    __slots__ = ("_box", "_go", "_done", "_park", "_student", "_baseline", "_current_frames",
                 "_trusted", "_taint", "_sleep", "_find_change", "refuse")

    def __init__(self, trusted: list[bool], harness_package: str):
        self._trusted = trusted  # the hook's: lets this thread read other threads' frames
        self._current_frames, self._sleep = sys._current_frames, time.sleep
        self._taint: str | None = None
        self._box: list = [None, None]
        self._go, self._done = _thread.allocate_lock(), _thread.allocate_lock()
        self._go.acquire()
        self._done.acquire()
        self._student = _thread.start_new_thread(
            _student_loop, (self._box, self._go, self._done, THREAD_STATE))
        self._done.acquire()
        self._park = self._box[0]
        self._baseline = tuple(repr(read()) for read in THREAD_STATE)
        self._find_change = _change_finder(_watched(harness_package), self._baseline)
        self.refuse = _refuser()

    def run(self, job: Callable[[], Any]) -> Any:
        """job() on the student thread: its value, or the exception it raised, raised here."""
        self._box[1] = job
        job = None
        self._go.release()
        self._done.acquire()
        # `done` is released by the loop, or by code of the submission's that reached it: either
        # way nothing goes on until the loop is parked again
        frame, line = self._park
        self._trusted[0] = True
        try:
            while not (self._current_frames().get(self._student) is frame
                       and frame.f_lineno == line):
                self._sleep(0)
        finally:
            self._trusted[0] = False
        ran, value, state = self._box[1]
        self._box[1] = None
        if state != self._baseline and self._taint is None:
            self._taint = "mode -"
        if not ran:
            raise value
        return value

    def first_change(self) -> str | None:
        """What of the grader's side changed since the seal, as "KIND SUBJECT" (seal.REFUSALS),
        or None; once something has, it is said for good."""
        if self._taint is None:
            self._taint = self._find_change()
        return self._taint


def _refuser() -> Callable[[int, str], None]:
    """What answers a reply once something changed: the refusal, framed here with what was bound
    at the seal (protocol.py's own code may be what changed). `change` is one of the names taken
    then, as "KIND SUBJECT" (seal.REFUSALS); the JSON is written by hand for the same reason."""
    head, write, encode = protocol.HEADER.pack, os.write, str.encode

    def refuse(fd: int, change: str) -> None:
        body = encode('{"error":{"type":"SealRefused","message":"' + change
                      + '","frames":[],"made_at":null,"errno":1}}')
        view = memoryview(head(len(body), 0) + body)
        while view:
            view = view[write(fd, view):]
    return refuse


def _change_finder(watched: list[Any], baseline: tuple) -> Callable[[], str | None]:
    """The check, with every name it uses bound now as values of its closure (the builtins it
    calls too: a patched `builtins.list` must not answer for what it checks)."""
    make_list, make_tuple, identity, type_of, zipped = list, tuple, id, type, zip
    each, islice, text, count_threads, state = map, itertools.islice, repr, _thread._count, THREAD_STATE
    # a handler set on the main thread would be called with the grader's frame
    handler, signals = _signal.getsignal, make_tuple(_signal.valid_signals())
    handlers = make_tuple(handler(number) for number in signals)

    def ids(owner: Any, length: int) -> list[int]:
        return make_list(each(identity, islice(owner.__dict__.values(), length)))
    kept = make_tuple((owner, type_of(owner), len(owner.__dict__), _name(owner)) for owner in watched)
    taken = make_tuple(ids(owner, length) for owner, _, length, _ in kept)

    def find_change() -> str | None:
        for (owner, kind, length, name), then in zipped(kept, taken):
            if type_of(owner) is not kind or ids(owner, length) != then:
                return "tamper " + name
        if count_threads() != 1:
            return "thread -"
        if make_tuple(text(read()) for read in state) != baseline:
            return "mode -"
        if make_tuple(handler(number) for number in signals) != handlers:
            return "handler -"
        return None
    return find_change


def _name(owner: Any) -> str:
    """How a refusal names a module or type (`torch`, `Tensor`): letters, digits and dots alone,
    since it is written into JSON by hand."""
    return "".join(c for c in str(getattr(owner, "__name__", "?")) if c.isalnum() or c in "._")


def seal_process() -> Watch:
    """Seal this process (seal.py's hook, its torch kernels refused) and start its student
    thread; an OSError names what could not be raised."""
    trusted = [False]
    seal.seal(trusted)
    refuse_new_torch_kernels()
    return Watch(trusted, seal.HARNESS_PACKAGE)
