"""A student process's GPU memory, bounded (the exercise's `limits.gpu_memory_mb`).

The wall is outside the process: from the moment it is handed a submission until it is
stopped, a thread of the grader's reads the process's device memory from NVML (the driver's
count, summed over every device) every PERIOD and kills the process once it holds more than
it held when ready (its CUDA context), its limit and DRIVER_ROOM for what the driver adds on its
own (each kernel it loads as first used, libraries' handles): the submission fails with
"memory-limit". What it held is freed by the driver as it ends, and a process serves one
submission, so nothing is left to the next. An allocation freed again within one period is
not seen: the wall bounds what a process keeps, not a burst.

Inside the process, before the submission loads, torch's caching allocator is bounded to the
limit on its device, so that honest code asking for more gets CUDA's out-of-memory error at its
own line (also "memory-limit") rather than a kill. That bound is a courtesy, not the wall: the
setters that would lift it are taken out of torch's C module, but a submission has other ways
to the device, and torch keeps references of its own.

NVML through ctypes: the harness runs under the course's venv, which brings torch and no NVML
binding; every node with an NVIDIA driver has libnvidia-ml.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable

BOUNDED = "bounded"
# what in torch's C module would lift the allocator's bound: the fraction, the allocator's
# settings, caching off (uncached allocations skip the bound), an allocator of one's own
ALLOCATOR_SETTERS = (
    "_cuda_setMemoryFraction",
    "_accelerator_setAllocatorSettings",
    "_cuda_cudaCachingAllocator_enable",
    "_cuda_customAllocator",
    "_cuda_changeCurrentAllocator",
)
# what the driver may add beyond the allocator's memory, counted from the process's memory when
# it said it was ready (its context): kernels loaded lazily, cuBLAS's and cuDNN's handles
DRIVER_ROOM = 512 << 20
PERIOD = 0.05  # seconds between two readings
TRIES = 3  # readings in a row that fail before the count is lost (NVML may fail once)
JOIN_SECONDS = 5.0  # what `stop` waits for a reading under way (NVML hangs with a lost GPU)
PROC_PID_INIT_INO = 0xEFFFFFFC  # the node's own PID namespace, as procfs numbers it


def bound_allocator(limit_bytes: int) -> str:
    """In the student process, CUDA started: BOUNDED, or why the bound could not be set."""
    import torch

    try:
        device = torch.cuda.current_device()
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit_bytes / total), device)
        for name in ALLOCATOR_SETTERS:
            if hasattr(torch._C, name):
                delattr(torch._C, name)
        # dynamo's table of torch._C's functions, cached once the zygote's warm-up imported it
        rules = getattr(
            sys.modules.get("torch._dynamo.trace_rules"), "get_torch_obj_rule_map", None
        )
        if hasattr(rules, "cache_clear"):
            rules.cache_clear()
    except Exception as exc:  # the driver's RuntimeError, or a torch without these
        return f"{type(exc).__name__}: {exc}"
    return BOUNDED


class Unwatched(RuntimeError):
    """The grader cannot read a student process's GPU memory: a layer missing, never a zero."""


class _ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_v2_t, as nvmlDeviceGetComputeRunningProcesses_v2 fills it (the _v3
    call's entries grew by a field in the R535 drivers, and shrank again after)."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


NVML_SUCCESS, NVML_ERROR_NO_PERMISSION, NVML_ERROR_INSUFFICIENT_SIZE = 0, 4, 7
NOT_AVAILABLE = ctypes.c_ulonglong(-1).value  # NVML_VALUE_NOT_AVAILABLE


class Nvml:
    """The driver's count of each process's device memory."""

    def __init__(self, library: str = "libnvidia-ml.so.1"):
        try:
            self.lib = ctypes.CDLL(library)
        except OSError as exc:
            raise Unwatched(f"NVML cannot be loaded ({exc})") from None
        if os.stat("/proc/self/ns/pid").st_ino != PROC_PID_INIT_INO:
            # a student's pid there may name another process of the node's
            raise Unwatched(
                "the grader runs in a PID namespace of its own, not the node's, whose pids "
                "NVML lists"
            )
        self._call("nvmlInit_v2")
        count = ctypes.c_uint()
        self._call("nvmlDeviceGetCount_v2", ctypes.byref(count))
        self.devices = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            # a device this job was not given (Slurm's device cgroup): not its to read, and
            # none of its processes can open it either
            code = self._call(
                "nvmlDeviceGetHandleByIndex_v2",
                index,
                ctypes.byref(handle),
                allowed=(NVML_SUCCESS, NVML_ERROR_NO_PERMISSION),
            )
            if code == NVML_SUCCESS:
                self.devices.append(handle)
        if not self.devices:
            raise Unwatched("NVML can read no device here")

    def _call(self, name: str, *args, allowed: tuple[int, ...] = (NVML_SUCCESS,)) -> int:
        try:
            function = getattr(self.lib, name)
        except AttributeError:
            raise Unwatched(f"this driver's NVML has no {name}") from None
        code = function(*args)
        if code not in allowed:
            try:
                error_string = self.lib.nvmlErrorString
                error_string.restype = ctypes.c_char_p
                said = (error_string(code) or b"").decode(errors="replace")
            except AttributeError:
                said = ""
            raise Unwatched(f"NVML's {name} failed: {said} ({code})")
        return code

    def used_bytes(self, pid: int) -> int | None:
        """What `pid` holds on every device, or None where no device lists it."""
        used = None
        for handle in self.devices:
            size = 32
            for _ in range(TRIES):
                count = ctypes.c_uint(size)
                infos = (_ProcessInfo * size)()
                code = self._call(
                    "nvmlDeviceGetComputeRunningProcesses_v2",
                    handle,
                    ctypes.byref(count),
                    infos,
                    allowed=(NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE),
                )
                if code == NVML_SUCCESS:
                    break
                size = count.value + 32  # more processes started meanwhile
            else:
                raise Unwatched("NVML's list of a device's processes kept growing")
            for info in infos[: count.value]:
                if info.pid == pid:
                    if info.usedGpuMemory == NOT_AVAILABLE:
                        raise Unwatched("NVML does not say a process's memory on this node")
                    used = (used or 0) + info.usedGpuMemory
        return used


def watch(
    hello: dict, pid: int, limit_bytes: int, used_bytes: Callable[[], Callable[[int], int | None]]
) -> Watch:
    """The grader's watch over a CUDA student process whose allocator said it is bounded (its
    hello); raises Unwatched. `used_bytes`: opens the driver's count (Nvml().used_bytes)."""
    if hello.get("gpu_memory") != BOUNDED:
        raise Unwatched(f"torch's allocator was not bounded: {hello.get('gpu_memory')}")
    return Watch(used_bytes(), pid, limit_bytes)


def layer(limit_bytes: int) -> str:
    """The layer's name among the active ones (jobs.SANDBOX_LAYERS's "gpu-memory")."""
    return f"gpu-memory({limit_bytes >> 20} MiB)"


class Watch:
    """One student process's device memory against its limit, counted from its memory when
    ready, read by a thread of the grader's until `stop`: past it (`past`, the bytes held) or
    unreadable (`lost`, why), the process is killed, and the grader says which as it finds
    the process dead."""

    def __init__(self, used_bytes: Callable[[int], int | None], pid: int, limit_bytes: int):
        self.used_bytes, self.pid = used_bytes, pid
        ready = used_bytes(pid)
        if ready is None:
            raise Unwatched(f"NVML lists no process {pid} with a CUDA context")
        self.allowed = ready + limit_bytes + DRIVER_ROOM
        # the process itself, whatever its pid names later (its keeper holds the pid now)
        self.pidfd = os.pidfd_open(pid)
        self.past: int | None = None
        self.lost: str | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"gpu-memory-{pid}", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        failures = 0
        while not self._stopped.wait(PERIOD):
            try:
                used = self.used_bytes(self.pid)
            except Exception as exc:  # whatever failed, the watch never ends unsaid
                failures += 1
                if failures < TRIES:
                    continue
                self.lost = f"{type(exc).__name__}: {exc}"
            else:
                failures = 0
                if used is None or used <= self.allowed:
                    continue
                self.past = used
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:  # it ended meanwhile
                pass
            return

    def stop(self) -> None:
        """No reading after this returns, but one that hangs in NVML (its process is killed
        and reaped all the same: its descriptor, left open then, names no other)."""
        self._stopped.set()
        self._thread.join(JOIN_SECONDS)
        if not self._thread.is_alive():
            os.close(self.pidfd)
