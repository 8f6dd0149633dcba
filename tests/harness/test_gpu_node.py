"""Grading on a GPU node. A student process there may do beyond a CPU one exactly what the CUDA
driver needs as it starts (seen on an H200 node, driver 580), and nothing more; where CUDA cannot
start in it, the grader fails, closed. Run here without a GPU: the layers are the same, only the
devices are absent."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.core.catalogue import default_root, load_exercise_info
from worker.grading.sandbox_probe import unsafe
from worker.harness import grader, mounts, sandbox, seccomp
from worker.harness.session import CudaUnavailable

TRIES = {
    "unix-socket": lambda: __import__("socket").socket(__import__("socket").AF_UNIX).close(),
    "inet-socket": lambda: __import__("socket").socket(__import__("socket").AF_INET).close(),
    "thread-name": lambda: _name_a_thread(),
    "own-comm": lambda: os.close(os.open("/proc/self/comm", os.O_RDWR)),
    "passwd": lambda: open("/etc/passwd").read(),
}


def _name_a_thread() -> None:
    """As the driver names the threads it starts: pthread_setname_np opens
    /proc/self/task/TID/comm read-write."""
    import threading

    done = threading.Event()
    worker = threading.Thread(target=done.wait)
    worker.start()
    try:
        fd = os.open(f"/proc/self/task/{worker.native_id}/comm", os.O_RDWR)
        try:
            os.write(fd, b"cuda-worker")
        finally:
            os.close(fd)
    finally:
        done.set()
        worker.join()


def confined(device: str, tmp_path) -> dict:
    """Which of TRIES succeed in a process confined for `device`, every layer raised: forked, as
    the zygote's keeper forks it, into a PID namespace of its own."""
    scratch = tmp_path / device
    scratch.mkdir()
    seccomp.load_libseccomp()  # as the zygote does: finding it runs ldconfig, which is refused
    read, write = os.pipe()
    keeper = os.fork()
    if keeper == 0:
        try:
            mounts.unshare_as_self(0)  # the zygote's user namespace
            sandbox.enter_pid_namespace()
        except BaseException:  # noqa: BLE001  (the student process says it missing)
            pass
        student = os.fork()
        if student:
            os.waitpid(student, 0)
            os._exit(0)
        os.close(read)
        try:
            active, missing = sandbox.confine(
                sandbox.Confinement(
                    scratch=str(scratch),
                    memory_bytes=1 << 30,
                    cpu_seconds=30,
                    file_bytes=1 << 20,
                    open_files=64,
                    read_paths=sandbox.python_read_paths(),
                    device=device,
                )
            )
            allowed = {}
            for name, attempt in TRIES.items():
                try:
                    attempt()
                    allowed[name] = True
                except OSError:
                    allowed[name] = False
            answer = {"missing": missing, "allowed": allowed}
        except BaseException as exc:  # noqa: BLE001  (said to the parent, which fails the test)
            answer = {"error": repr(exc)}
        os.write(write, json.dumps(answer).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        answer = json.loads(f.read())
    os.waitpid(keeper, 0)
    # the kernel never holds root to a task limit (sandbox.limit_tasks)
    missing = [
        m
        for m in answer.get("missing", [])
        if not (os.getuid() == 0 and m.startswith("task-limit:"))
    ]
    assert "error" not in answer and not missing, answer
    return answer["allowed"]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_gpu_student_may_open_unix_sockets_and_name_its_threads_and_nothing_more(
    device, tmp_path
):
    allowed = confined(device, tmp_path)
    gpu = device == "cuda"
    assert allowed == {
        "unix-socket": gpu,
        "inet-socket": False,
        "thread-name": gpu,
        "own-comm": False,
        "passwd": False,
    }


def test_where_cuda_cannot_start_in_the_student_process_grading_fails_closed(tmp_path, monkeypatch):
    """Here torch has no CUDA at all; on a node, a driver the sandbox stopped said the same. Each
    check raised in the student's process, and the reference scored 0 as if its code had failed."""
    monkeypatch.setattr(grader, "environment", lambda device: {"device": str(device)})
    info = load_exercise_info(default_root() / "autograd-q")
    with grader.Harness(str(tmp_path)) as harness:
        with pytest.raises(CudaUnavailable, match="CUDA cannot start in a confined student"):
            harness.grade_job(info.job(info.path / "reference.py", seed=1, device="cuda"))


def test_the_sandbox_probe_on_cuda_says_whether_cuda_starts_in_a_student_process():
    """`hpcgrade slurm check` and `sandbox check` probe a node as a grade there would use it:
    on CUDA where torch sees a GPU (where it sees none, as here, the answer has no "cuda": the
    probes of test_confinement.py). Forced onto CUDA here, CUDA cannot start, and the probe says
    so and is not ok."""
    done = subprocess.run(
        [sys.executable, "-m", "worker.harness", "probe", "--device", "cuda"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    answer = json.loads(done.stdout)
    assert answer["cuda"].startswith("AssertionError: Torch not compiled with CUDA"), answer
    assert not answer["ok"]
    assert [line for line in unsafe(answer) if "CUDA cannot start" in line]
