"""A student process's GPU memory (gpu_memory.py), on a CPU: the process's resident memory
stands for the driver's count of its device memory, and the student says what a CUDA student
says once its allocator is bounded. What needs a GPU (the allocator's bound itself, NVML's
count) waits for one: docs/benchmarks.md."""

import ctypes.util
import dataclasses
import time

import pytest
import torch

from worker.harness import gpu_memory
from worker.harness.diagnostics import Fail
from worker.harness.grader import Harness
from worker.harness.jobs import REQUIRED_LAYERS, Limits
from worker.harness.remote import Student
from worker.harness.session import SandboxIncomplete, Session
from worker.harness.student_process import StudentDied
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

    def spawn(self, confinement, limits, output, optimizers=False):
        self.confinements.append(confinement)
        process = self.harness.spawn(
            dataclasses.replace(confinement, device="cpu"), limits, output, optimizers
        )
        process.hello = dict(process.hello, cuda="ready", gpu_memory=self.bounded)
        return process

    def gpu_memory_used(self):
        return self.used_bytes()


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    with Harness(str(tmp_path_factory.mktemp("scratch"))) as harness:
        yield harness


def session(students, code: str, required: tuple[str, ...] = REQUIRED_LAYERS) -> Session:
    exercise = type(
        "Exercise", (), {"functions": (), "support_source": None, "steps_optimizers": False}
    )()
    source = Source(cells=(("submission.py", code),), notebook=False)
    return Session(
        students, Limits(gpu_memory_mb=32), torch.device("cuda"), source, exercise, required
    )


def state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def test_a_student_past_its_gpu_memory_is_stopped_as_its_own_failure(harness, monkeypatch):
    """The watch counts from the process's memory when it was ready; past the limit (here no
    room for the driver's own), the process is killed while the grader waits for it, and the
    submission fails with the memory-limit diagnostic; within it, it runs."""
    monkeypatch.setattr(gpu_memory, "DRIVER_ROOM", 0)
    reads = []
    students = CudaStudents(harness, lambda: lambda pid: reads.append(pid) or resident_bytes(pid))
    within = session(students, "kept = b'1' * (4 << 20)\n")
    try:
        assert within.load() == []
        assert "gpu-memory(32 MiB)" in within.layers
        assert students.confinements[0].gpu_memory_bytes == 32 << 20  # the allocator's bound
        watch = within.process.gpu_watch
    finally:
        within.close_process()
    read = len(reads)
    time.sleep(4 * gpu_memory.PERIOD)
    assert not watch._thread.is_alive() and len(reads) == read  # stopped before the reap
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
    cases = (
        []
        if ctypes.util.find_library("nvidia-ml")
        else [  # this machine has none
            (CudaStudents(harness, lambda: gpu_memory.Nvml().used_bytes), "NVML cannot be loaded")
        ]
    )
    for students, reason in (
        *cases,
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


HOARDS_LATER = """
import threading, time
kept = []
def hoard():
    time.sleep(3)  # the load has returned long before
    kept.append(b'1' * (128 << 20))
    time.sleep(60)
threading.Thread(target=hoard, daemon=True).start()
"""


def test_a_student_past_its_gpu_memory_between_requests_is_stopped_too(tmp_path, monkeypatch):
    """With the seal taken away, a thread of the submission's keeps running after its job: the
    watch reads the process while no request runs (the grader's own work on the device), kills
    it, and the next request says why."""
    monkeypatch.setattr(gpu_memory, "DRIVER_ROOM", 0)
    with Harness(str(tmp_path), sealed=False) as unsealed:
        students = CudaStudents(unsealed, lambda: resident_bytes)
        later = session(students, HOARDS_LATER, tuple(set(REQUIRED_LAYERS) - {"seal"}))
        try:
            assert later.load() == []
            pid = later.process.pid
            deadline = time.monotonic() + 10
            while state(pid) not in ("Z", None) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert state(pid) in ("Z", None)  # killed while no request ran
            with pytest.raises(StudentDied) as died:
                Student(later.process, torch.device("cuda")).request("reset")
            assert died.value.code == "memory-limit"
        finally:
            later.close_process()


def test_a_count_lost_while_the_submission_runs_is_the_graders_error(harness):
    """Once the driver's count cannot be read, the process is stopped and the grade is a grader
    error naming the layer, never the submission's failure."""
    readings = []

    def fails_after_the_first(pid):
        readings.append(pid)
        if len(readings) > 1:
            raise gpu_memory.Unwatched("NVML's nvmlDeviceGetComputeRunningProcesses_v3 failed")
        return resident_bytes(pid)

    students = CudaStudents(harness, lambda: fails_after_the_first)
    lost = session(students, "import time\ntime.sleep(5)\n")
    try:
        with pytest.raises(gpu_memory.Unwatched, match="gpu-memory: its count was lost"):
            lost.start()
    finally:
        lost.close_process()


class Driver:
    """NVML's listing of each device's processes, as the driver fills the caller's buffer."""

    def __init__(self, listed: dict[int, list[tuple[int, int]]]):
        self.listed, self.calls = listed, 0

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle, count, infos):
        self.calls += 1
        processes = self.listed[handle.value]
        room, count._obj.value = count._obj.value, len(processes)
        if room < len(processes):
            return gpu_memory.NVML_ERROR_INSUFFICIENT_SIZE
        for info, (pid, used) in zip(infos, processes, strict=False):
            info.pid, info.usedGpuMemory = pid, used
        return gpu_memory.NVML_SUCCESS


def counted(listed: dict[int, list[tuple[int, int]]]) -> tuple[gpu_memory.Nvml, Driver]:
    nvml = gpu_memory.Nvml.__new__(gpu_memory.Nvml)  # without the library this machine lacks
    nvml.lib = Driver(listed)
    nvml.devices = [ctypes.c_void_p(handle) for handle in listed]
    return nvml, nvml.lib


def test_the_drivers_count_sums_every_device_and_reads_a_long_list():
    """A process's memory on each device it uses, summed; a list longer than the buffer is
    read again in a larger one; a count the driver does not give is the grader's failure."""
    crowd = [(1000 + n, 1 << 20) for n in range(40)]
    nvml, driver = counted({1: [*crowd, (7, 300 << 20)], 2: [(7, 200 << 20), (8, 5 << 20)]})
    assert nvml.used_bytes(7) == 500 << 20
    assert driver.calls == 3  # the first device's list twice: 41 processes, room for 32
    assert nvml.used_bytes(9) is None  # no device lists it
    nvml, _ = counted({1: [(7, gpu_memory.NOT_AVAILABLE)]})
    with pytest.raises(gpu_memory.Unwatched, match="does not say"):
        nvml.used_bytes(7)
