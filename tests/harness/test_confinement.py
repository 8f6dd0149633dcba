"""The filesystem confinement without Landlock, and a sandbox that fails closed.

Each attack runs against a throwaway copy of the harness and of an exercise, owned by the account
that grades (as when one account owns the checkout and runs jobs): an attack that got out would
write there, and into a spool and settings beside it, never into this checkout. It runs with the
kernel's Landlock and without it (tests/harness/deny_syscalls.py answers ENOSYS to its system
calls, as RHEL/Rocky 8's kernel does), as root and as the unprivileged grading account.
"""

import ast
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import REFERENCE_Q
from test_unprivileged import PYTHON, USER, as_user, needs_account

from worker.harness.jobs import REQUIRED_LAYERS
from worker.harness.sandbox import LANDLOCK_ABI_CAP

ROOT = Path(__file__).resolve().parents[2]
DENY = str(ROOT / "tests" / "harness" / "deny_syscalls.py")
SECRET = "S3CRET-IN-SETTINGS"

ATTACK = """
import os
TARGETS = {targets!r}
FOUND = []
def q_grads(a, b, v):
    import worker.harness
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(worker.harness.__file__))))
    for path in TARGETS["read"] + [os.path.join(checkout, "exercises/autograd-q/reference.py")]:
        try:
            with open(path) as f:
                FOUND.append(("read", path, f.read(100)))
        except OSError:
            pass
    for path in TARGETS["write"] + [os.path.join(checkout, "worker/harness/grader.py"),
                                    os.path.join(checkout, "exercises/autograd-q/checks.py")]:
        try:
            with open(path, "a") as f:
                f.write("\\n# written by a submission\\n")
            FOUND.append(("wrote", path))
        except OSError:
            pass
    seen = set()
    for folder in (os.path.dirname(os.getcwd()), TARGETS["spool"], checkout):
        try:
            seen.update(os.listdir(folder))
        except OSError:
            pass
    print("FOUND", FOUND)
    print("SEEN", sorted(seen))
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
"""


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def copy():
    """A checkout of the harness and of autograd-q, a spool with another student's run and the
    service's settings, all owned by the grading account (or root, without one)."""
    folder = Path(tempfile.mkdtemp(prefix="hpcgrade-confinement-"))
    shutil.copytree(
        ROOT / "worker" / "harness",
        folder / "worker" / "harness",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (folder / "worker" / "__init__.py").write_text("")
    shutil.copytree(ROOT / "exercises" / "autograd-q", folder / "exercises" / "autograd-q")
    (folder / "spool" / "runs" / "other").mkdir(parents=True)
    (folder / "instance").mkdir()
    (folder / "instance" / "settings.toml").write_text(f'SECRET_KEY = "{SECRET}"\n')
    (folder / "scratch").mkdir()
    (folder / "submission.py").write_text("")
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# Landlock as the kernel offers it, capped at ABI 5 (no signal scope: kernels before 6.12, most
# clusters today), or missing (RHEL/Rocky 8)
LANDLOCKS = pytest.mark.parametrize(
    "landlock", [True, 5, False], ids=["with-landlock", "landlock-abi-5", "without-landlock"]
)


def grade_in(
    folder: Path,
    source: str,
    *,
    landlock: bool | int,
    user: str | None = None,
    required: list[str] | None = None,
    deny: str = "",
    sealed: bool = True,
) -> dict:
    """`sealed=False`: the seal taken away (its tests are test_seal.py), for attacks that reach
    the other layers through what it refuses (ctypes, a signal)."""
    (folder / "submission.py").write_text(source)
    if user:
        subprocess.run(["chown", "-R", f"{user}:{user}", str(folder)], check=True)
    job = {
        "exercise": "autograd-q",
        "exercise_dir": str(folder / "exercises" / "autograd-q"),
        "submission": str(folder / "submission.py"),
        "filename": "submission.py",
        "seed": 3,
    }
    if required is not None:
        job["required_layers"] = required
    elif not sealed:
        job["required_layers"] = [layer for layer in REQUIRED_LAYERS if layer != "seal"]
    python = PYTHON if user else sys.executable
    denied = ",".join(filter(None, [deny, "" if landlock else "landlock"]))
    command = [python, DENY, denied, python] if denied else [python]
    command += [
        "-m",
        "worker.harness",
        "serve",
        "--scratch",
        str(folder / "scratch"),
        *([] if sealed else ["--unsealed"]),
    ]
    done = subprocess.run(
        as_user(*command, user=user) if user else command,
        cwd=folder,
        env=None
        if user
        else {"PATH": os.environ["PATH"], "PYTHONPATH": str(folder), **abi_cap(landlock)},
        input=json.dumps(job) + "\n",
        capture_output=True,
        text=True,
        timeout=180,
    )
    lines = done.stdout.splitlines()
    assert lines and json.loads(lines[0]) == {"ready": True}, done.stderr[-2000:]
    return json.loads(lines[1])


def abi_cap(landlock: bool | int) -> dict[str, str]:
    return {} if landlock is True or landlock is False else {LANDLOCK_ABI_CAP: str(landlock)}


def attack(folder: Path) -> str:
    return ATTACK.format(
        targets={
            "read": [
                str(folder / "exercises/autograd-q/reference.py"),
                str(folder / "instance/settings.toml"),
            ],
            "write": [
                str(folder / "worker/harness/student.py"),
                str(folder / "exercises/autograd-q/checks.py"),
                str(folder / "spool/runs/other/report.json"),
            ],
            "spool": str(folder / "spool/runs"),
        }
    )


def assert_contained(folder: Path, report: dict, before: dict) -> None:
    assert report["status"] == "graded", report
    found = [line for line in report["output"].splitlines() if line.startswith("FOUND")]
    assert found and all(line == "FOUND []" for line in found), report["output"][-3000:]
    # its own scratch and the mount points on the way to it and to the harness, nothing else
    seen = {line for line in report["output"].splitlines() if line.startswith("SEEN")}
    assert len(seen) == 1 and not {"exercises", "spool", "instance", "other"} & set(
        ast.literal_eval(seen.pop().removeprefix("SEEN "))
    ), report["output"][-3000:]
    assert digest(folder / "worker") == before["worker"]
    assert digest(folder / "exercises") == before["exercises"]
    assert not (folder / "spool/runs/other/report.json").exists()


@LANDLOCKS
def test_as_root_the_submission_finds_nothing_and_writes_nothing(copy, landlock):
    before = {"worker": digest(copy / "worker"), "exercises": digest(copy / "exercises")}
    report = grade_in(copy, attack(copy), landlock=landlock)
    assert_contained(copy, report, before)
    layers = report["sandbox"]["layers"]
    assert "mount-namespace" in layers and any(x.startswith("scratch-limit") for x in layers)
    assert any(x.startswith("landlock-fs") for x in layers) == bool(landlock)
    if landlock is not True:  # capped below the signal scope, or none
        assert "landlock-scope" not in layers


@pytest.mark.machine_wide
@needs_account
@pytest.mark.parametrize("landlock", [True, False], ids=["with-landlock", "without-landlock"])
def test_as_the_grading_account_the_submission_finds_nothing_and_writes_nothing(copy, landlock):
    before = {"worker": digest(copy / "worker"), "exercises": digest(copy / "exercises")}
    report = grade_in(copy, attack(copy), landlock=landlock, user=USER)
    assert_contained(copy, report, before)
    assert "mount-namespace" in report["sandbox"]["layers"]


MAKES_THREADS = """
import threading
def q_grads(a, b, v):
    stop, made = threading.Event(), 0
    try:
        for _ in range(2000):
            threading.Thread(target=stop.wait, daemon=True).start()
            made += 1
    except RuntimeError as exc:
        print("STOPPED", made, exc)
    stop.set()
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
"""


@pytest.mark.machine_wide
@needs_account
def test_as_the_grading_account_the_student_process_has_a_bounded_number_of_threads(copy):
    """Unbounded, about 760 threads before the address space ran out."""
    report = grade_in(copy, MAKES_THREADS, landlock=True, user=USER)
    assert (report["status"], report["score"]) == ("graded", 10), report
    stopped = [
        line.split()[1] for line in report["output"].splitlines() if line.startswith("STOPPED")
    ]
    assert stopped and all(int(made) < 65 for made in stopped), report["output"][-2000:]
    assert "task-limit(65)" in report["sandbox"]["layers"]


def test_as_root_the_task_limit_is_missing_and_says_why(copy):
    report = grade_in(copy, REFERENCE_Q, landlock=True)
    assert (report["status"], report["score"]) == ("graded", 10), report
    assert (
        "task-limit: not enforced for root (a grading account that is not root has it)"
        in report["sandbox"]["unavailable"]
    )


def test_a_missing_required_layer_is_a_grader_error_naming_it(copy):
    report = grade_in(copy, REFERENCE_Q, landlock=False, required=["network-namespace", "landlock"])
    assert report["status"] == "error", report
    assert "landlock" in report["error"] and "required sandbox layers missing" in report["error"]


def test_without_landlock_the_mount_namespace_is_the_filesystem_layer(copy):
    report = grade_in(copy, REFERENCE_Q, landlock=False)
    assert (report["status"], report["score"]) == ("graded", 10), report
    assert "landlock: not offered by this kernel or system" in report["sandbox"]["unavailable"]


def test_with_neither_filesystem_layer_nothing_is_graded(copy):
    report = grade_in(copy, REFERENCE_Q, landlock=False, deny="pivot_root")
    assert report["status"] == "error", report
    assert "filesystem" in report["error"] and "pivot_root" in report["error"]


def test_the_scratch_is_bounded_in_total(copy):
    """Many files under the size a file may have: the tmpfs fills, the submission gets an
    error of its own, and the grade goes on."""
    report = grade_in(
        copy,
        """
import os
def q_grads(a, b, v):
    written = 0
    try:
        for i in range(200):
            with open(f"block{i}", "wb") as f:
                for _ in range(8):
                    f.write(b"0" * (1 << 20))
                    written += 1
    except OSError as exc:
        print("STOPPED", written, exc.errno)
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
""",
        landlock=True,
    )
    assert (report["status"], report["score"]) == ("graded", 10), report
    stopped = [line.split() for line in report["output"].splitlines() if line.startswith("STOPPED")]
    assert stopped and all(int(mb) <= 256 and errno == "28" for _, mb, errno in stopped), stopped


def test_the_scratch_holds_a_bounded_number_of_files(copy):
    """Empty files cost no size but kernel memory: 300,000 of them took about 300 MiB."""
    report = grade_in(
        copy,
        """
import os
def q_grads(a, b, v):
    made = 0
    try:
        for i in range(100_000):
            open(f"f{i}", "w").close()
            made += 1
    except OSError as exc:
        print("STOPPED", made, exc.errno)
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
""",
        landlock=True,
    )
    assert (report["status"], report["score"]) == ("graded", 10), report
    stopped = [line.split() for line in report["output"].splitlines() if line.startswith("STOPPED")]
    assert stopped and all(int(made) <= 4096 and errno == "28" for _, made, errno in stopped), (
        report["output"][-2000:]
    )
    assert any(x.endswith("4096 files)") for x in report["sandbox"]["layers"]), report["sandbox"]


def test_the_probe_names_what_is_missing_and_what_the_account_could_write(copy):
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(copy)}
    command = [
        sys.executable,
        DENY,
        "landlock",
        sys.executable,
        "-m",
        "worker.harness",
        "probe",
        "--require",
        "filesystem,landlock",
        "--code",
        str(copy / "exercises"),
    ]
    answer = json.loads(
        subprocess.run(
            command, env=env, cwd=copy, capture_output=True, text=True, check=True, timeout=120
        ).stdout
    )
    assert answer["absent"] == ["landlock"], answer
    assert "mount-namespace" in answer["layers"]
    assert answer["writable"] and not answer["ok"]  # root may write anything
    assert "cuda" not in answer  # no GPU here: a grade here runs on the CPU (test_gpu_node.py)


def test_the_visible_checks_need_no_layer_on_the_students_own_machine(tmp_path):
    """`hpcgrade check` runs the student's own code against public checks: on a node without
    user namespaces (nor Landlock) it still runs them, with what layers there are."""
    work = tmp_path / "work.py"
    work.write_text(REFERENCE_Q)
    command = [
        sys.executable,
        DENY,
        "unshare,landlock",
        sys.executable,
        "-m",
        "worker.cli",
        "check",
        "autograd-q",
        str(work),
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    report = json.loads(done.stdout)
    assert report["status"] == "graded" and report["score"] == report["max_score"], report
    assert "network-namespace" not in report["sandbox"]["layers"]


def test_no_folder_holding_the_checkout_is_bound_whatever_points_at_it(monkeypatch):
    from worker.harness import sandbox

    monkeypatch.setenv("LD_LIBRARY_PATH", f"/opt/cuda/lib64:{ROOT.parent}:{ROOT}")
    paths = sandbox.python_read_paths()
    assert "/opt/cuda/lib64" in paths
    assert not [p for p in paths if (str(ROOT) + "/").startswith(os.path.join(p, ""))], paths


def test_sandbox_check_names_the_layers_here_and_refuses_code_the_account_can_write():
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "sandbox", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "mount-namespace" in done.stdout and "seccomp" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 1  # root may write the checkout
    assert "can write the code the jobs run" in done.stderr, done.stderr


SIGNALS_OUTSIDE = """
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
TGKILL, RT_SIGQUEUEINFO = 234, 129
OUTSIDE = {outside}  # a process of the same account outside the harness: the test's own

def tried(name, act):
    try:
        if act() < 0:
            raise OSError(ctypes.get_errno(), name)
        print("REACHED", name)
    except OSError as exc:
        print("REFUSED", name, exc.errno)

def q_grads(a, b, v):
    print("PARENT", os.getppid(), "SELF", os.getpid())
    tried("getpgid", lambda: os.getpgid(OUTSIDE))  # 0 signals: what it can see
    tried("kill", lambda: os.kill(OUTSIDE, 0) or 0)
    tried("killpg", lambda: os.killpg(OUTSIDE, 0) or 0)
    tried("tgkill", lambda: libc.syscall(TGKILL, OUTSIDE, OUTSIDE, 0))
    info = ctypes.create_string_buffer(128)
    tried("rt_sigqueueinfo", lambda: libc.syscall(RT_SIGQUEUEINFO, OUTSIDE, 0, info))
    tried("pidfd", lambda: signal.pidfd_send_signal(os.pidfd_open(OUTSIDE), 0) or 0)
    tried("itself", lambda: os.kill(os.getpid(), 0) or 0)
    kernel = ctypes.create_string_buffer(128)  # si_signo, si_errno, si_code = SI_KERNEL (0x80)
    kernel[0:12] = (19).to_bytes(4, "little") + bytes(4) + (0x80).to_bytes(4, "little")
    tried("stops-itself", lambda: libc.syscall(RT_SIGQUEUEINFO, os.getpid(), 19, kernel))
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
"""


def said(report: dict) -> dict[str, str]:
    return {
        line.split()[1]: line.split()[0]
        for line in report["output"].splitlines()
        if line.startswith(("REFUSED", "REACHED"))
    }


@LANDLOCKS
def test_a_submission_can_neither_see_nor_signal_a_process_outside(copy, landlock):
    """The student process is the first of a PID namespace of its own: no parent, and no
    process outside has a number there; signals go to itself alone besides (seccomp), with
    Landlock's signal scope or without it (kernels before 6.12): a review stopped the zygote by
    SIGSTOP without both, and the grade waited. The seal, which also refuses os.kill, is taken
    away here."""
    report = grade_in(
        copy, SIGNALS_OUTSIDE.format(outside=os.getpid()), landlock=landlock, sealed=False
    )
    assert (report["status"], report["score"]) == ("graded", 10), report
    assert "pid-namespace" in report["sandbox"]["layers"]
    assert "PARENT 0 SELF 1" in report["output"], report["output"]
    assert said(report) == {
        "getpgid": "REFUSED",
        "kill": "REFUSED",
        "killpg": "REFUSED",
        "tgkill": "REFUSED",
        "rt_sigqueueinfo": "REFUSED",
        "pidfd": "REFUSED",
        "itself": "REACHED",
        "stops-itself": "REFUSED",
    }, report["output"]


def test_without_a_pid_namespace_a_node_grades_nothing_and_seccomp_still_keeps_signals_in(copy):
    """A kernel that cannot make the PID namespace (taken away here) stops grading with a grader
    error that names it; allowed by the job, the grade goes on with the process outside seen
    and still out of a signal's reach."""
    refused = grade_in(copy, REFERENCE_Q, landlock=5, deny="pid-namespace")
    assert refused["status"] == "error", refused
    assert "pid-namespace" in json.dumps(refused["error"]), refused["error"]
    allowed = grade_in(
        copy,
        SIGNALS_OUTSIDE.format(outside=os.getpid()),
        landlock=5,
        deny="pid-namespace",
        sealed=False,
        required=[layer for layer in REQUIRED_LAYERS if layer not in ("seal", "pid-namespace")],
    )
    assert (allowed["status"], allowed["score"]) == ("graded", 10), allowed
    assert any(m.startswith("pid-namespace:") for m in allowed["sandbox"]["unavailable"])
    assert said(allowed) == {
        "getpgid": "REACHED",
        "kill": "REFUSED",
        "killpg": "REFUSED",
        "tgkill": "REFUSED",
        "rt_sigqueueinfo": "REFUSED",
        "pidfd": "REFUSED",
        "itself": "REACHED",
        "stops-itself": "REFUSED",
    }, allowed["output"]


HOLDS_SHARED_MEMORY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
def q_grads(a, b, v):
    for _ in range(4):  # 4 × 64 MiB, never removed: the host's would keep them for ever
        segment = libc.shmget(0, 64 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
        if segment < 0:
            print("REFUSED shmget", ctypes.get_errno())
            break
        address = libc.shmat(segment, None, 0)
        ctypes.memset(address, 1, 64 << 20)
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
"""


def shared_memory_segments() -> set[str]:
    """The host's segments of the size the submission asks: the table is the whole machine's,
    where other tests' PostgreSQL servers make (and remove) small segments of their own."""
    with open("/proc/sysvipc/shm") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return {row[1] for row in rows if int(row[3]) == 64 << 20}


@LANDLOCKS
def test_system_v_shared_memory_is_refused_and_none_is_left(copy, landlock):
    """Memory the kernel holds outside the address space its limit counts: on the host's IPC
    namespace, 3 GiB were left behind in 2 s, for every later run to meet. Seccomp refuses the
    segment (the seal, which refuses ctypes, taken away); the IPC namespace of its own stays,
    for what a kernel without the filter would let through."""
    before = shared_memory_segments()
    with postgres_like_segment():  # another test's server, meanwhile (it failed CI once)
        report = grade_in(copy, HOLDS_SHARED_MEMORY, landlock=landlock, sealed=False)
        assert shared_memory_segments() - before == set()
    assert report["status"] == "graded" and report["score"] == 10, report
    assert "REFUSED shmget 1" in report["output"], report["output"]
    assert "ipc-namespace" in report["sandbox"]["layers"]


@contextlib.contextmanager
def postgres_like_segment():
    """A small segment of the host's, as each PostgreSQL server makes at its start."""
    libc = ctypes.CDLL(None, use_errno=True)
    segment = libc.shmget(0, 56, 0o1000 | 0o600)
    assert segment >= 0, ctypes.get_errno()
    try:
        yield
    finally:
        libc.shmctl(segment, 0, None)  # IPC_RMID


ESCAPES_BY_THE_NEW_MOUNT_API = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
MOUNT_SETATTR, FSOPEN, FSCONFIG, FSMOUNT, OPEN_TREE = 442, 430, 431, 432, 428

class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

def tried(what, result):
    print("TRIED", what, "ok" if result >= 0 else ctypes.get_errno())
    return result

def q_grads(a, b, v):
    import worker.harness
    harness = os.path.dirname(os.path.abspath(worker.harness.__file__))
    writable = MountAttr(0, 1, 0, 0)  # clears MOUNT_ATTR_RDONLY
    tried("mount_setattr", libc.syscall(MOUNT_SETATTR, -100, harness.encode(), 0x8000,
                                        ctypes.byref(writable), ctypes.sizeof(writable)))
    try:
        with open(os.path.join(harness, "student.py"), "a") as f:
            f.write("# written by a submission\\n")
        print("WROTE the harness")
    except OSError:
        pass
    fs = tried("fsopen", libc.syscall(FSOPEN, b"tmpfs", 1))
    if fs >= 0:
        tried("fsconfig", libc.syscall(FSCONFIG, fs, 6, None, None, 0))  # FSCONFIG_CMD_CREATE
        tried("fsmount", libc.syscall(FSMOUNT, fs, 1, 0))
    tried("open_tree", libc.syscall(OPEN_TREE, -100, harness.encode(), 1 | 0x80000))  # a clone
    # a thread in a network namespace of its own (a thread that ran would share this stack: the
    # process would crash, and the test fail as it should)
    tried("clone", libc.syscall(56, 0x100 | 0x800 | 0x10000 | 0x40000000, None, None, None, None))
    try:
        os.memfd_create("held")
        print("TRIED memfd_create ok")
    except OSError as exc:
        print("TRIED memfd_create", exc.errno)
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad
"""


@LANDLOCKS
def test_the_new_mount_api_and_memfd_are_refused(copy, landlock):
    """Without Landlock (which forbids any change of mounts), `mount_setattr` made the
    student's read-only bind of the harness writable and root wrote into it; `fsopen` and
    `fsmount` made a tmpfs outside every bound; a memfd holds memory outside the address space.
    Seccomp refuses them all, with Landlock or without."""
    before = digest(copy / "worker")
    report = grade_in(copy, ESCAPES_BY_THE_NEW_MOUNT_API, landlock=landlock, sealed=False)
    assert (report["status"], report["score"]) == ("graded", 10), report
    tried = dict(
        line.split()[1:] for line in report["output"].splitlines() if line.startswith("TRIED")
    )
    assert tried == {
        "mount_setattr": "1",
        "fsopen": "1",
        "open_tree": "1",
        "clone": "1",
        "memfd_create": "1",
    }, report["output"]
    assert "WROTE" not in report["output"]
    assert digest(copy / "worker") == before
