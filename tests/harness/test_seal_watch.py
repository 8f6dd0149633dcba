"""The seal's second half (worker/harness/watch.py): the submission's code runs on a thread whose
frames lead nowhere near the server, and no reply goes out once the modules or types the replies
are made with, torch's per-thread modes, the process's threads or its signal handlers changed.

Each attack is the correct function plus a change that, with the seal taken away, the harness
runs into (it prints FORGED when the harness calls what the submission put there): sealed, the
change is refused or found before the reply, and the grade is the submission's zero with a
diagnostic that names it."""
import pytest

from helpers import REFERENCE_Q

HARNESS_FUNCTION = '''
import sys
protocol = sys.modules["worker.harness.protocol"]
_span = protocol.span_bytes
def forged(t):
    print("FORGED")
    return _span(t)
protocol.span_bytes = forged
'''
BUILTINS = '''
import builtins
_getattr = builtins.getattr
def forged(obj, name, *default):
    if str(name).startswith("op_"):
        print("FORGED")
    return _getattr(obj, name, *default)
builtins.getattr = forged
'''
# a type's real dict, leaked by a mappingproxy compared with an object of the submission's
TYPE_DICT = '''
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
'''
DISPATCH_MODE = '''
import torch
from torch.utils._python_dispatch import TorchDispatchMode
class Forged(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        print("FORGED")
        return func(*args, **(kwargs or {}))
'''
LIBRARY = '''
import torch
KEPT = []
def forged(*args):
    print("FORGED")
    return args[0]
'''
FRAMES = '''
import sys
def find_server():
    frame = sys._getframe()
    while frame is not None:
        if type(frame.f_locals.get("self")).__name__ == "Server":
            print("FORGED")
            return
        frame = frame.f_back
    print("NOT-FOUND")
'''
THREAD = '''
import threading, time
'''
CODE = '''
import sys
protocol = sys.modules["worker.harness.protocol"]
def forged(t):
    print("FORGED")
    return bytes(t.untyped_storage())[:0]
'''

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
    if name != "dispatch-mode":  # whose mode prints FORGED for the function's own operations
        assert "FORGED" not in report["output"]


@pytest.mark.parametrize("name", sorted(set(ATTACKS) - {"thread"}) + ["frames"])
def test_with_the_seal_taken_away_the_harness_runs_into_each_attack(grade_unsealed, name):
    """What makes the test above fail without the seal: each change reaches the harness."""
    prelude = ATTACKS[name][0] if name in ATTACKS else FRAMES
    report = grade_unsealed("autograd-q", attacked(name, prelude))
    assert "FORGED" in report["output"], report


def test_the_submissions_frames_lead_nowhere_near_the_server(grade):
    report = grade("autograd-q", attacked("frames", FRAMES))
    assert "NOT-FOUND" in report["output"] and "FORGED" not in report["output"], report["output"]
    assert report["score"] == report["max_score"], report


def test_honest_threads_modes_and_redirected_output_stay_allowed(grade):
    """A thread joined before the function returns, a mode left as it was entered, output
    redirected and put back, warnings filtered: no change is left, nothing is refused."""
    prelude = '''
import contextlib, io, threading, warnings
import torch
from torch.overrides import TorchFunctionMode
'''
    body = ('    t = threading.Thread(target=sum, args=([1, 2],)); t.start(); t.join()\n'
            '    with TorchFunctionMode():\n        pass\n'
            '    with contextlib.redirect_stdout(io.StringIO()):\n        print("quiet")\n'
            '    warnings.filterwarnings("ignore")\n')
    source = prelude + REFERENCE_Q.replace("    Q = ", body + "    Q = ", 1)
    report = grade("autograd-q", source)
    assert report["score"] == report["max_score"], report
