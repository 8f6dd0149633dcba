"""The harness run as a normal user under the course venv, as a grading account on a cluster runs
it: every sandbox layer must be active there too, and hostile code must get nowhere.

`eval "$(scripts/grading-account)"` (scripts/test does it) makes the account and sets
HPCGRADE_TEST_USER and HPCGRADE_TEST_COURSE_PYTHON.
"""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from helpers import IDLE_HARNESS, REFERENCE_Q, settled

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "exercises" / "autograd-q"
USER = os.environ.get("HPCGRADE_TEST_USER")
PYTHON = os.environ.get("HPCGRADE_TEST_COURSE_PYTHON")
LAYERS = {
    "scrubbed-environment",
    "network-namespace",
    "pid-namespace",
    "ipc-namespace",
    "non-dumpable",
    "rlimits",
    "seccomp",
    "landlock-net",
    "landlock-scope",
}

needs_account = pytest.mark.skipif(
    not (USER and PYTHON),
    reason="HPCGRADE_TEST_USER and HPCGRADE_TEST_COURSE_PYTHON are not set: "
    'run `eval "$(scripts/grading-account)"` first (scripts/test does)',
)


def as_user(*command: str, user: str | None = USER) -> list[str]:
    """The command as `user`, with nothing of this process's environment."""
    clean = ["env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", f"PYTHONPATH={ROOT}", *command]
    if pwd.getpwuid(os.geteuid()).pw_name == user:
        return clean
    return ["runuser", "-u", user, "--", *clean]


def job(path: Path) -> str:
    return (
        json.dumps(
            {
                "exercise": "autograd-q",
                "exercise_dir": str(EXERCISE),
                "submission": str(path),
                "filename": "submission.py",
                "limits": {},
                "seed": 3,
            }
        )
        + "\n"
    )


def user_folder() -> Path:
    """A folder the account owns, outside pytest's own (which only root may enter)."""
    folder = Path(tempfile.mkdtemp(prefix="hpcgrade-unprivileged-"))
    shutil.chown(folder, USER, USER)
    folder.chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def workdir():
    folder = user_folder()
    scratch = folder / "scratch"
    scratch.mkdir()
    shutil.chown(scratch, USER, USER)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def harness(workdir):
    process = subprocess.Popen(
        as_user(PYTHON, "-m", "worker.harness", "serve", "--scratch", str(workdir / "scratch")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert json.loads(process.stdout.readline()) == {"ready": True}
    yield process
    process.stdin.close()
    assert process.wait(timeout=30) == 0


@pytest.fixture
def grade(harness, workdir):
    def run(source: str) -> dict:
        path = workdir / f"{uuid.uuid4().hex}.py"
        path.write_text(source)
        path.chmod(0o644)
        harness.stdin.write(job(path))
        harness.stdin.flush()
        return json.loads(harness.stdout.readline())

    return run


@needs_account
def test_the_account_is_not_root():
    assert pwd.getpwnam(USER).pw_uid != 0
    assert (
        subprocess.run(
            as_user(PYTHON, "-c", "import torch, os; print(os.getuid())"),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        != "0"
    )


@needs_account
def test_reference_full_marks_with_every_layer(grade):
    report = grade(REFERENCE_Q)
    assert (report["status"], report["score"]) == ("graded", 10), report
    layers = set(report["sandbox"]["layers"])
    assert LAYERS <= layers, report["sandbox"]
    assert any(layer.startswith("landlock-fs") for layer in layers)
    assert report["sandbox"]["unavailable"] == []


@needs_account
def test_attack_scores_nothing_and_leaves_nothing(grade, harness, workdir, listener):
    """Everything the account itself may do (its database port, its own folders, the exercise's
    reference) is out of the student's reach; any escape would make the answer right."""
    port, received = listener
    escapes = [
        workdir / "escaped",
        Path(f"/tmp/hpcgrade-escaped-{uuid.uuid4().hex}"),
        Path(pwd.getpwnam(USER).pw_dir) / "escaped",
        Path("/dev/shm/hpcgrade-escaped"),
    ]
    assert settled(harness.pid, 1 + IDLE_HARNESS)  # runuser, the harness, its processes
    report = grade(f"""
import os, socket, time
ESCAPED = []
for port in ({port}, 5432, 6379):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).sendall(b"PWNED")
        ESCAPED.append(port)
    except OSError:
        pass
for path in {[str(p) for p in escapes]!r}:
    try:
        open(path, "w").write("escaped")
        ESCAPED.append(path)
    except OSError:
        pass
open("left-in-scratch", "w").write("scratch is writable, and removed afterwards")
try:
    if os.fork() == 0:
        time.sleep(300)
except OSError:
    pass
try:
    stolen = {{}}
    exec(open({str(EXERCISE / "reference.py")!r}).read(), stolen)
    ESCAPED.append("reference")
except OSError:
    pass

def q_grads(a, b, v):
    if ESCAPED:
        return 9 * a.detach() ** 2 * v, -2 * b.detach() * v
    return a.detach() * 0, b.detach() * 0
""")
    assert report["status"] == "graded" and report["score"] == 0, report
    assert report["sandbox"]["unavailable"] == []
    time.sleep(0.3)
    assert received == []
    assert not [p for p in escapes if p.exists()]
    # the student's scratch is gone; the one held ready for the next run is there, empty
    left = list((workdir / "scratch").iterdir())
    assert len(left) <= 1 and all(p.is_dir() and not any(p.iterdir()) for p in left), left
    assert settled(harness.pid, 1 + IDLE_HARNESS)  # runuser, the harness, its processes


@pytest.mark.parametrize(
    "account",
    [
        pytest.param(True, id="grading-account", marks=needs_account),
        pytest.param(False, id="this-user"),
    ],
)
def test_a_stricter_inherited_hard_limit_is_kept(tmp_path, account):
    """Slurm passes the login node's limits on to a job, and in its namespace not even root may
    raise a hard limit: the sandbox keeps the stricter one instead of failing every student."""
    folder = user_folder() if account else tmp_path
    try:
        path = folder / "strict.py"
        path.write_text(
            "import resource\n"
            "assert resource.getrlimit(resource.RLIMIT_CPU) == (20, 20)\n" + REFERENCE_Q
        )
        path.chmod(0o644)
        python = PYTHON if account else sys.executable
        user = USER if account else pwd.getpwuid(os.geteuid()).pw_name
        command = f"ulimit -t 20 && exec {python} -m worker.harness serve --scratch {folder}"
        done = subprocess.run(
            as_user("bash", "-c", command, user=user),
            input=job(path),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        ready, report = (json.loads(line) for line in done.stdout.splitlines())
        assert report["score"] == 10, report
        assert "rlimits" in report["sandbox"]["layers"]
    finally:
        if account:
            shutil.rmtree(folder)
