"""A student process's GPU memory (gpu_memory.py), on a CPU: the process's resident memory
stands for the driver's count of its device memory, and the student says what a CUDA student
says once its allocator is bounded. What needs a GPU (the allocator's bound itself, NVML's
count) waits for one: docs/benchmarks.md."""

import ctypes.util
import dataclasses

import pytest
import torch

from worker.harness import gpu_memory
from worker.harness.diagnostics import Fail
from worker.harness.grader import Harness
from worker.harness.jobs import Limits
from worker.harness.session import SandboxIncomplete, Session
from worker.harness.submission import Source


def resident_bytes(pid: int) -> int | None:
    """The process's resident memory (VmRSS), standing for its device memory."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) << 10
    except FileNotFoundError:
        return None
    return None


class CudaStudents:
    """The harness's student processes as a GPU node has them: each says CUDA is ready and its
    allocator bounded, and `used_bytes` is the driver's count (or raises as NVML does)."""

    def __init__(self, harness: Harness, used_bytes, bounded: str = gpu_memory.BOUNDED):
        self.harness, self.used_bytes, self.bounded = harness, used_bytes, bounded
        self.scratch_root, self.read_paths = harness.scratch_root, harness.read_paths
        self.sealed = harness.sealed
        self.confinements = []

    def spawn(self, confinement, limits, output):
        self.confinements.append(confinement)
        process = self.harness.spawn(dataclasses.replace(confinement, device="cpu"), limits, output)
        process.hello = dict(process.hello, cuda="ready", gpu_memory=self.bounded)
        return process

    def gpu_memory_used(self):
        return self.used_bytes()


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    with Harness(str(tmp_path_factory.mktemp("scratch"))) as harness:
        yield harness


def session(students, code: str, gpu_memory_mb: int = 32) -> Session:
    exercise = type("Exercise", (), {"functions": (), "support_source": None})()
    source = Source(cells=(("submission.py", code),), notebook=False)
    return Session(
        students, Limits(gpu_memory_mb=gpu_memory_mb), torch.device("cuda"), source, exercise
    )


def test_a_student_past_its_gpu_memory_is_stopped_as_its_own_failure(harness, monkeypatch):
    """The watch counts from the process's memory when it was ready; past the limit (here no
    room for the driver's own), the process is killed while the grader waits for it, and the
    submission fails with the memory-limit diagnostic; within it, it runs."""
    monkeypatch.setattr(gpu_memory, "DRIVER_ROOM", 0)
    students = CudaStudents(harness, lambda: resident_bytes)
    within = session(students, "kept = b'1' * (4 << 20)\n")
    try:
        assert within.load() == []
        assert "gpu-memory(32 MiB)" in within.layers
        assert students.confinements[0].gpu_memory_bytes == 32 << 20  # the allocator's bound
    finally:
        within.close_process()
    past = session(students, "kept = b'1' * (128 << 20)\nimport time\ntime.sleep(5)\n")
    try:
        with pytest.raises(Fail) as failed:
            past.start()
    finally:
        past.close_process()
    died = failed.value.diagnostics[0]
    assert died.code == "memory-limit"
    assert died.details["gpu_memory_mb"] == 32 and died.details["gpu_used_mb"] >= 128


def test_the_grader_fails_closed_where_it_cannot_watch_the_gpu_memory(harness):
    """Without the driver's count (this machine has no NVML), or with an allocator that said it
    is not bounded, a CUDA student is never graded: a grader error that names the layer."""
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("this machine has NVML")
    for students, reason in (
        (CudaStudents(harness, lambda: gpu_memory.Nvml().used_bytes), "NVML cannot be loaded"),
        (
            CudaStudents(harness, lambda: resident_bytes, bounded="RuntimeError: no device"),
            "torch's allocator was not bounded: RuntimeError: no device",
        ),
        (CudaStudents(harness, lambda: lambda pid: None), "NVML lists no process"),
    ):
        unwatched = session(students, "x = 1\n")
        with pytest.raises(SandboxIncomplete) as incomplete:
            unwatched.start()
        assert "gpu-memory" in str(incomplete.value) and reason in str(incomplete.value)
        assert unwatched.process is None or not unwatched.process.alive
