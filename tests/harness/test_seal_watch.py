"""The seal's second half (worker/harness/watch.py): the submission's code runs on a thread whose
frames lead nowhere near the server, and no reply goes out once the modules or types the replies
are made with, torch's per-thread modes, the process's threads or its signal handlers changed.

Each attack is the correct function plus a change that, with the seal taken away, the harness
runs into (it prints FORGED when the harness calls what the submission put there): sealed, the
change is refused or found before the reply, and the grade is the submission's zero with a
diagnostic that names it."""

import pytest
from helpers import REFERENCE_Q

HARNESS_FUNCTION = """
import sys
protocol = sys.modules["worker.harness.protocol"]
_span = protocol.span_bytes
def forged(t):
    print("FORGED")
    return _span(t)
protocol.span_bytes = forged
"""
BUILTINS = """
import builtins
_getattr = builtins.getattr
def forged(obj, name, *default):
    if str(name).startswith("op_"):
        print("FORGED")
    return _getattr(obj, name, *default)
builtins.getattr = forged
"""
# a type's real dict, leaked by a mappingproxy compared with an object of the submission's
TYPE_DICT = """
import sys, torch
class Leak:
    def __eq__(self, other):
        Leak.real = other
        return False
torch._C.TensorBase.__dict__ == Leak()
_stride = Leak.real["stride"]
def forged(self, *args):
    print("FORGED")
    return _stride(self, *args)
Leak.real["stride"] = forged
sys._clear_type_cache()
"""
DISPATCH_MODE = """
import torch
from torch.utils._python_dispatch import TorchDispatchMode
class Forged(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        print("FORGED")
        return func(*args, **(kwargs or {}))
"""
LIBRARY = """
import torch
KEPT = []
def forged(*args):
    print("FORGED")
    return args[0]
"""
FRAMES = """
import sys
def find_server():
    frame = sys._getframe()
    while frame is not None:
        if type(frame.f_locals.get("self")).__name__ == "Server":
            print("FORGED")
            return
        frame = frame.f_back
    print("NOT-FOUND")
"""
THREAD = """
import threading, time
"""
CODE = """
import sys
protocol = sys.modules["worker.harness.protocol"]
def forged(t):
    print("FORGED")
    return bytes(t.untyped_storage())[:0]
"""

# what the main thread makes replies with beyond the modules' own entries: a class's method,
# numpy, the collector's callbacks, an audit hook of its own (each found by a second review)
JSON_CLASS = """
import json.decoder
_decode = json.decoder.JSONDecoder.decode
def forged(self, *args, **kwargs):
    print("FORGED")
    return _decode(self, *args, **kwargs)
json.decoder.JSONDecoder.decode = forged
"""
NUMPY = """
import numpy
_frombuffer = numpy.frombuffer
def forged(*args, **kwargs):
    print("FORGED")
    return _frombuffer(*args, **kwargs)
numpy.frombuffer = forged
"""
GC_CALLBACK = """
import gc
def forged(phase, info):
    if phase == "start" and not getattr(forged, "said", False):
        forged.said = True
        print("FORGED")
gc.callbacks.append(forged)
gc.set_threshold(1, 1, 1)
"""
AUDIT_HOOK = """
import os, sys
SAID = []
def forged(event, args):  # print() inside a hook prints nothing
    if not SAID:
        SAID.append(os.write(1, b"FORGED\\n"))
sys.addaudithook(forged)
id(SAID)  # an event: the hook runs if it was added
"""
WARNINGS = """
import warnings
warnings.showwarning = lambda *args, **kwargs: print("FORGED")
"""

IN_CALL = {
    "dispatch-mode": "    Forged().__enter__()\n",
    # kept: a library's kernels go when it is collected
    "library": "    KEPT.append(torch.library.Library('aten', 'IMPL', 'CPU'))\n"
    "    KEPT[0].impl('as_strided', forged)\n",
    "frames": "    find_server()\n",
    "thread": "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
    "code": "    protocol.span_bytes.__code__ = forged.__code__\n",
}
ATTACKS = {
    "harness-function": (HARNESS_FUNCTION, "changing `worker.harness.protocol`"),
    "builtins": (BUILTINS, "changing `builtins`"),
    "type-dict": (TYPE_DICT, "changing `TensorBase`"),
    "dispatch-mode": (DISPATCH_MODE, "leaving a torch mode entered"),
    "library": (LIBRARY, "replacing PyTorch's kernel for `aten::as_strided`"),
    "thread": (THREAD, "leaving a thread of its own running"),
    "code": (CODE, "replacing `__code__` of a function"),
    "json-class": (JSON_CLASS, "changing `JSONDecoder`"),
    "numpy": (NUMPY, "changing `numpy`"),
    "gc-callback": (GC_CALLBACK, "changing `gc`"),
    "warnings": (WARNINGS, "changing `warnings`"),
}


def attacked(name: str, prelude: str) -> str:
    body = REFERENCE_Q.replace("    Q = ", IN_CALL.get(name, "") + "    Q = ", 1)
    return prelude + "\n" + body


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_on_the_replies_is_the_submissions_zero_naming_it(grade, name):
    prelude, words = ATTACKS[name]
    report = grade("autograd-q", attacked(name, prelude))
    assert report["status"] == "graded" and report["score"] == 0, report
    said = [d for check in report["checks"] for d in check["diagnostics"]] + report["notes"]
    assert said and {d["code"] for d in said} == {"forbidden-operation"}, said
    assert words in said[0]["message"], said[0]
    assert said[0]["details"]["sealed"] is True
    # a mode, a kernel or a callback of its own also runs for the submission's own work
    if name not in ("dispatch-mode", "library", "gc-callback"):
        assert "FORGED" not in report["output"]


def test_an_audit_hook_of_the_submissions_own_is_never_added(grade):
    """It would run on the grader's thread for every event there. Python drops a hook an
    existing one refuses, silently: the file loads, the hook never runs."""
    report = grade("autograd-q", AUDIT_HOOK + "\n" + REFERENCE_Q)
    assert report["score"] == report["max_score"] and "FORGED" not in report["output"], report


@pytest.mark.parametrize(
    "name", sorted(set(ATTACKS) - {"thread", "warnings"}) + ["frames", "audit-hook"]
)
def test_with_the_seal_taken_away_the_harness_runs_into_each_attack(grade_unsealed, name):
    """What makes the tests above fail without the seal: each change reaches the harness."""
    prelude = {"frames": FRAMES, "audit-hook": AUDIT_HOOK}.get(name) or ATTACKS[name][0]
    report = grade_unsealed("autograd-q", attacked(name, prelude))
    assert "FORGED" in report["output"], report


def test_an_interrupt_the_submission_sends_itself_changes_nothing(grade):
    """A KeyboardInterrupt would land on the main thread as it hands a job over (a review's
    `os.kill(1, SIGINT)` left the student thread's lock released twice, a check timed out):
    the student process ignores SIGINT."""
    report = grade(
        "autograd-q",
        """import os, signal
def q_grads(a, b, v):
    os.kill(os.getpid(), signal.SIGINT)
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
""",
    )
    assert report["score"] == report["max_score"], report
    assert report["sandbox"]["student_processes"] == 1, report["sandbox"]


def test_the_submissions_frames_lead_nowhere_near_the_server(grade):
    report = grade("autograd-q", attacked("frames", FRAMES))
    assert "NOT-FOUND" in report["output"] and "FORGED" not in report["output"], report["output"]
    assert report["score"] == report["max_score"], report


def test_an_exception_whose_type_runs_code_when_named_is_described_without_running_it(grade):
    """Its metaclass's `__name__` and its `__str__` are the submission's code: neither runs on
    the grader's thread (a review patched the harness there, after the check)."""
    source = """
import sys
class Named(type):
    @property
    def __name__(cls):
        print("FORGED name on", __import__("threading").current_thread().name)
        raise RuntimeError("no name")
class E1(Exception, metaclass=Named):
    def __str__(self):
        print("FORGED str")
        return "x"
def q_grads(a, b, v):
    raise E1()
"""
    report = grade("autograd-q", source)
    assert report["score"] == 0 and report["status"] == "graded", report
    assert "FORGED name" not in report["output"], report["output"]
    said = [d for check in report["checks"] for d in check["diagnostics"]]
    assert said and "raised E1" in said[0]["message"], said


def test_honest_threads_modes_and_redirected_output_stay_allowed(grade):
    """A thread joined before the function returns, one let go that ends a moment after, a
    mode left as it was entered, output redirected and put back, warnings filtered: no change
    is left, nothing is refused (a thread let go failed the grading account's test once)."""
    prelude = """
import contextlib, io, threading, warnings
import torch
from torch.overrides import TorchFunctionMode
"""
    body = (
        "    t = threading.Thread(target=sum, args=([1, 2],)); t.start(); t.join()\n"
        # let go, not joined: it ends a moment after the function returns (grader's grace)
        "    stop = threading.Event()\n"
        "    threading.Thread(target=stop.wait, daemon=True).start(); stop.set()\n"
        "    with TorchFunctionMode():\n        pass\n"
        '    with contextlib.redirect_stdout(io.StringIO()):\n        print("quiet")\n'
        '    warnings.filterwarnings("ignore")\n'
    )
    source = prelude + REFERENCE_Q.replace("    Q = ", body + "    Q = ", 1)
    report = grade("autograd-q", source)
    assert report["score"] == report["max_score"], report


FINDS_THE_PIPES = """
import fcntl, os, stat

def pipes():
    found = []
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                found.append(fd)
        except OSError:
            pass
    return found

def tried(fd, name, act):
    try:
        act()
        print("ALLOWED", fd, name)
    except OSError as exc:
        print("REFUSED", fd, name, exc.errno)

def q_grads(a, b, v):
    for fd in pipes():
        tried(fd, "flags", lambda: fcntl.fcntl(fd, fcntl.F_GETFL))
        tried(fd, "dup", lambda: os.dup(fd))
        tried(fd, "write", lambda: os.write(fd, b""))
        tried(fd, "read", lambda: os.read(fd, 0))
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
"""


def test_the_submissions_thread_cannot_touch_the_graders_pipes(grade):
    """A review wrote forged replies on the reply pipe, framed to swallow the harness's own:
    on the student thread the request and reply pipes cannot be read, written, copied,
    changed or closed (its output pipe, stdout, stays its own)."""
    report = grade("autograd-q", FINDS_THE_PIPES)
    assert report["score"] == report["max_score"], report
    said = [
        line.split()
        for line in report["output"].splitlines()
        if line.startswith(("ALLOWED", "REFUSED"))
    ]
    pipes = {fd for _, fd, *_ in said}
    assert len(pipes) >= 2, report["output"]  # the request and reply pipes at least
    touched = {(fd, name) for verdict, fd, name, *_ in said if verdict == "ALLOWED"}
    refused = {fd for verdict, fd, *_ in said if verdict == "REFUSED"}
    assert len(refused) == 2 and not {fd for fd, _ in touched} & refused, report["output"]


def test_with_the_seal_taken_away_the_pipes_are_within_reach(grade_unsealed):
    report = grade_unsealed("autograd-q", FINDS_THE_PIPES)
    said = [
        line.split()
        for line in report["output"].splitlines()
        if line.startswith(("ALLOWED", "REFUSED"))
    ]
    # each pipe's flags read and the pipe copied (its wrong-way read or write: EBADF)
    assert said and all(
        verdict == "ALLOWED" for verdict, _, name, *_ in said if name in ("flags", "dup")
    ), report["output"]
