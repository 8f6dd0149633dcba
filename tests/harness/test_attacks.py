"""Hostile submissions: each must score 0 (or be a platform error) and leave no trace."""

import os
import time
from pathlib import Path

import pytest
from helpers import IDLE_HARNESS, SECRETS, codes, descendants, settled

WRONG = "\n    return a.detach() * 0, b.detach() * 0\n"


def assert_zero(report: dict) -> None:
    assert report["status"] in ("graded", "error")
    if report["status"] == "graded":
        assert report["score"] == 0, report


def test_fake_report_printed_and_written(grade, tmp_path):
    fake = '{"exercise": "autograd-q", "status": "graded", "score": 10.0, "max_score": 10.0, "checks": []}'
    report = grade(
        "autograd-q",
        f"""
import os, sys
FAKE = {fake!r}
print(FAKE); sys.stdout.flush(); os.write(1, (FAKE + "\\n").encode()); os.write(2, FAKE.encode())
for path in ("report.json", "/tmp/hpcgrade-fake-report.json", {str(tmp_path / "forged.json")!r}):
    try:
        open(path, "w").write(FAKE)
    except OSError:
        pass
def q_grads(a, b, v):
    print(FAKE)
    return a.detach() * 0, b.detach() * 0
""",
    )
    assert_zero(report)
    assert not Path("/tmp/hpcgrade-fake-report.json").exists()
    assert not (tmp_path / "forged.json").exists()
    assert '"score": 10.0' in report["output"]  # kept as the student's output, nothing more


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "seal-taken-away"])
def test_monkeypatched_helpers(request, sealed):
    """Sealed, the patch of torch's types is refused as the file loads, and the patched functions
    of torch's modules are found before the reply; without the seal, the patches answer, and the
    grader's own comparisons still see wrong gradients."""
    grade = request.getfixturevalue("grade" if sealed else "grade_unsealed")
    report = grade(
        "autograd-q",
        """
import torch, torch.autograd
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
torch.autograd.gradcheck = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: True
torch.Tensor.__sub__ = lambda self, other: torch.zeros_like(self)
torch.Tensor.tolist = lambda self: [0.0]
import numpy
numpy.allclose = lambda *a, **k: True
def q_grads(a, b, v):"""
        + WRONG,
    )
    assert_zero(report)
    if sealed:
        assert report["notes"][0]["code"] == "forbidden-operation", report["notes"]
        assert "`Tensor.__eq__`" in report["notes"][0]["message"], report["notes"]
    else:
        assert "grad-mismatch" in codes(report) or "grad-scaled" in codes(report)


def test_search_disk_for_reference_and_checks(grade):
    report = grade(
        "autograd-q",
        """
import os
FOUND = []
roots = ["/work", "/root", "/home", "/srv", "/opt", "/tmp", "/var", "/etc", os.getcwd()]
for root in roots:
    for dirpath, dirs, files in os.walk(root):
        for name in files:
            if name in ("reference.py", "checks.py"):
                try:
                    text = open(os.path.join(dirpath, name)).read()
                except OSError:
                    continue
                if "q_grads" in text:
                    FOUND.append(text)
        if len(FOUND) > 1:
            break
namespace = {}
for text in FOUND:
    try:
        exec(text, namespace)
    except Exception:
        pass
if "q_grads" in namespace:
    q_grads = namespace["q_grads"]
else:
    def q_grads(a, b, v):"""
        + "    "
        + WRONG.replace("\n    ", "\n        "),
    )
    assert_zero(report)


def test_network_to_loopback(grade, listener):
    port, received = listener
    report = grade(
        "autograd-q",
        f"""
import socket
RESULTS = []
for port in ({port}, 6379, 5432):
    for family, address in ((socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port))):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect(address)
            s.sendall(b"PWNED\\r\\n")
            RESULTS.append(port)
        except OSError as e:
            pass
def q_grads(a, b, v):
    socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(b"PWNED")
"""
        + "    return a, b\n",
    )
    assert_zero(report)
    assert "forbidden-operation" in codes(report)
    time.sleep(0.3)
    assert received == []


def test_fork_bomb_and_daemon_leave_nothing(grade, harness, tmp_path):
    marker = tmp_path / "daemon-was-here"
    assert settled(harness.process.pid, IDLE_HARNESS)
    report = grade(
        "autograd-q",
        f"""
import os, time
for _ in range(64):
    try:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(1)
                open({str(marker)!r}, "w").write("alive")
                time.sleep(300)
            os._exit(0)
    except OSError:
        pass
def q_grads(a, b, v):
    os.fork()
"""
        + "    return a, b\n",
    )
    assert_zero(report)
    assert "forbidden-operation" in codes(report)
    time.sleep(1.5)
    assert not marker.exists()
    assert settled(harness.process.pid, IDLE_HARNESS)


def test_memory_bomb(grade):
    report = grade(
        "autograd-q",
        """
import torch
def q_grads(a, b, v):
    hoard = []
    while True:
        hoard.append(torch.ones(64 << 20, dtype=torch.uint8))
""",
    )
    assert_zero(report)
    assert "memory-limit" in codes(report)


def test_infinite_loop_ignoring_signals(grade):
    started = time.monotonic()
    report = grade(
        "autograd-q",
        """
import signal
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGXCPU, signal.SIGHUP):
    try:  # refused sealed (the submission's thread is not the main one)
        signal.signal(s, signal.SIG_IGN)
    except ValueError:
        pass
def q_grads(a, b, v):
    while True:
        pass
""",
        call_seconds=1,
    )
    assert_zero(report)
    assert codes(report) == {"timeout"}
    assert time.monotonic() - started < 15  # three strikes, then the remaining checks fail at once


def test_a_loop_that_spends_its_cpu_time_is_killed_at_the_limit(grade):
    """The student process is its PID namespace's first, which ignores a SIGXCPU it has no
    handler for: the CPU limit is a SIGKILL, counted as the limit, long before the wall clock's
    deadline."""
    report = grade(
        "autograd-q",
        """
def q_grads(a, b, v):
    while True:
        pass
""",
        cpu_seconds=1,
        call_seconds=60,
    )
    assert_zero(report)
    details = [d["details"] for c in report["checks"] for d in c["diagnostics"]]
    assert details and all(d.get("cpu_limit") and d.get("signal") == "SIGKILL" for d in details)


def test_hundred_megabytes_of_output(grade):
    report = grade(
        "autograd-q",
        """
import sys
line = "x" * 1023 + "\\n"
for _ in range(100 * 1024):
    sys.stdout.write(line)
def q_grads(a, b, v):"""
        + WRONG,
    )
    assert_zero(report)
    assert len(report["output"]) < 70_000
    assert "more bytes of output dropped" in report["output"]


def test_secrets_from_environment_and_proc(grade):
    report = grade(
        "autograd-q",
        """
import os
LEAK = [repr(dict(os.environ))]
for path in ["/proc/self/environ", "/proc/1/environ", f"/proc/{os.getppid()}/environ",
             f"/proc/{os.getppid()}/cmdline"] + [f"/proc/{p}/environ" for p in range(1, 4000)]:
    try:
        LEAK.append(open(path, "rb").read().decode("latin-1"))
    except OSError:
        pass
def q_grads(a, b, v):
    raise RuntimeError(" | ".join(LEAK))
""",
    )
    assert_zero(report)
    text = str(report)
    for secret in ("S3CRET-DB-PASSWORD", "S3CRET-SESSION-KEY", "S3CRET-REDIS"):
        assert secret not in text
    assert any(v in os.environ.values() for v in SECRETS.values())  # they were there to steal


def test_tensor_subclass_lying_about_equality(grade):
    report = grade(
        "autograd-q",
        """
import torch
class Liar(torch.Tensor):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True
def q_grads(a, b, v):
    return (torch.zeros_like(a).as_subclass(Liar), torch.zeros_like(b).as_subclass(Liar))
""",
    )
    assert_zero(report)
    assert "output-mismatch" in codes(report)


def test_malicious_reduce(grade, tmp_path):
    marker = tmp_path / "unpickled"
    report = grade(
        "autograd-q",
        f"""
import os
class Evil:
    def __reduce__(self):
        return (os.system, ("touch {marker}",))
def q_grads(a, b, v):
    return Evil(), Evil()
""",
    )
    assert_zero(report)
    assert not marker.exists()


def test_exit_at_import(grade):
    report = grade("autograd-q", "import os\nos._exit(0)\n")
    assert_zero(report)
    assert codes(report) == {"crashed"}


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "seal-taken-away"])
def test_segfault(request, sealed):
    """Sealed, ctypes is refused; without the seal, the crash is the submission's."""
    grade = request.getfixturevalue("grade" if sealed else "grade_unsealed")
    report = grade(
        "autograd-q",
        """
import ctypes
def q_grads(a, b, v):
    ctypes.string_at(0)
""",
    )
    assert_zero(report)
    if sealed:
        assert set(codes(report)) == {"forbidden-operation"}, codes(report)
        return
    assert "crashed" in codes(report)
    assert any(
        d["details"].get("signal") == "SIGSEGV" for c in report["checks"] for d in c["diagnostics"]
    )


def test_killing_the_parent(grade, harness):
    report = grade(
        "autograd-q",
        """
import os, signal
for target in (os.getppid(), 1):
    for kill in (os.kill, os.killpg):
        try:
            kill(target, signal.SIGKILL)
        except OSError:
            pass
def q_grads(a, b, v):
    os.kill(os.getppid(), signal.SIGKILL)
""",
    )
    assert_zero(report)
    assert harness.process.poll() is None
    from helpers import REFERENCE_Q

    assert grade("autograd-q", REFERENCE_Q)["score"] == 10  # the harness still grades


def test_deeply_nested_return_value(grade):
    report = grade(
        "autograd-q",
        """
def q_grads(a, b, v):
    value = []
    for _ in range(100_000):
        value = [value]
    return value, value
""",
    )
    assert_zero(report)


def test_two_gibibyte_return_value(grade):
    report = grade(
        "autograd-q",
        """
import torch
def q_grads(a, b, v):
    big = torch.zeros(2 << 30, dtype=torch.uint8)
    return big, big
""",
        memory_mb=6144,
    )
    assert_zero(report)
    assert "memory-limit" in codes(report)


def test_zygote_killed_from_outside_is_replaced(grade, harness):
    from helpers import REFERENCE_Q

    assert settled(harness.process.pid, IDLE_HARNESS)
    (zygote,) = descendants(harness.process.pid, depth=1)
    os.kill(zygote, 9)
    time.sleep(0.2)
    assert grade("autograd-q", REFERENCE_Q)["score"] == 10
    assert settled(harness.process.pid, IDLE_HARNESS)


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "seal-taken-away"])
def test_slowing_pytorchs_own_convolution_earns_no_speed_bonus(request, sealed):
    """conv2d-einsum's bonus compares with F.conv2d timed in the grader: a slow loop that also
    slows every convolution of its own process still loses the bonus point. Sealed, the mode
    left entered is refused before the first reply."""
    grade = request.getfixturevalue("grade" if sealed else "grade_unsealed")
    loops = (
        Path(__file__).parents[2] / "exercises" / "conv2d-einsum" / "mutants" / "python_loops.py"
    ).read_text()
    report = grade(
        "conv2d-einsum",
        loops
        + """
import time
import torch.nn.functional
from torch.overrides import TorchFunctionMode


class SlowConvolutions(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if "conv" in getattr(func, "__name__", ""):
            time.sleep(0.5)
        return func(*args, **(kwargs or {}))


SlowConvolutions().__enter__()
""",
    )
    bonus = next(c for c in report["checks"] if c["name"] == "speed-bonus")
    if sealed:
        assert (
            report["score"] == 0 and "leaving a torch mode entered" in report["notes"][0]["message"]
        ), report["notes"]
    else:
        assert not bonus["passed"] and report["score"] == report["max_score"] - 1


def test_every_student_process_has_its_scratch_as_temporary_directory(grade):
    """Not an attack: the zygote's warm-up asked tempfile for /tmp, which the sandbox forbids;
    every process forked after the first must still write its temporary files in its scratch."""
    temporary = """import tempfile
with tempfile.NamedTemporaryFile() as f:
    f.write(b"x")
print("TEMP", tempfile.gettempdir())
""" + (Path(__file__).parents[2] / "exercises" / "autograd-q" / "reference.py").read_text()
    for _ in range(2):
        report = grade("autograd-q", temporary)
        assert report["score"] == report["max_score"], report["notes"]
        assert "TEMP /tmp\n" not in report["output"] and "hpcgrade-" in report["output"]


def test_rebinding_the_support_module_does_not_reach_what_the_grader_builds(harness, tmp_path):
    """ctx.student.new builds from the grader's own copy of support.py, not from the module the
    submission imports (and can rebind): its objects stay the exercise's."""
    import shutil

    from server.core.catalogue import load_exercise_info

    folder = tmp_path / "scaled-square"
    shutil.copytree(Path(__file__).parents[2] / "server" / "exercise_template", folder)
    (folder / "support.py").write_text("def honest():\n    return 'support'\n")
    (folder / "checks.py").write_text(
        (folder / "checks.py").read_text()
        + """

@check("support", points=1, uses="scaled_square", en="support", es="support")
def built_by_the_grader(ctx: Context) -> None:
    if ctx.student.new("honest") != "support":
        raise Fail(Diagnostic("output-mismatch", {"what": "support"}))
"""
    )
    submission = tmp_path / "work.py"
    submission.write_text(
        "import exercise_support\nexercise_support.honest = lambda: 'forged'\n"
        "def scaled_square(x, c):\n    return c * x**2\n"
    )
    report = harness.report_for(load_exercise_info(folder).job(submission, seed=1)).to_dict()
    assert report["score"] == report["max_score"] == 11, report["checks"]


def test_the_graders_look_at_the_scratch_never_follows_the_submissions_links(tmp_path):
    """ctx.files_left and ctx.clear_files: a link (to a folder of the grader's) is a file left,
    never a way in; clearing deletes the link, not what it points at."""
    from worker.harness.checks import Context

    scratch, outside = tmp_path / "scratch", tmp_path / "hidden-checks"
    (scratch / "d").mkdir(parents=True)
    outside.mkdir()
    (outside / "checks.py").write_text("secret")
    (scratch / "a").write_text("left")
    (scratch / "d" / "x").write_text("left")
    (scratch / "d" / "to-checks").symlink_to(outside)
    ctx = Context(None, None, None, None, None, scratch)
    assert ctx.files_left() == ["a", "d/to-checks", "d/x"]
    ctx.clear_files()
    assert ctx.files_left() == [] and (outside / "checks.py").read_text() == "secret"
    assert (scratch / "d").is_dir()


def test_a_tensor_subclass_where_the_grader_reads_a_tensor_is_the_submissions_failure(grade):
    """A .grad or parameter of a subclass comes back as no tensor: the check fails the
    submission with the type, and the grader never breaks on it."""
    report = grade(
        "autograd-accumulation",
        """import torch

class S(torch.Tensor):
    pass

def train_accumulated(model, optimizer, batches, accumulation_steps):
    for i, x in enumerate(batches):
        ((model(x) - 2 * x) ** 2).mean().div(accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    model.weight.grad = torch.zeros(1).as_subclass(S)
    return model.weight
""",
    )
    assert report["status"] == "graded" and report["score"] < report["max_score"]
    first = report["checks"][0]["diagnostics"][0]
    assert (first["code"], first["details"]["got_type"]) == ("output-mismatch", "S")
