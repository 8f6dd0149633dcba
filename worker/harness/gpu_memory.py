"""A student process's GPU memory, bounded twice (the exercise's `limits.gpu_memory_mb`).

Inside the process, before the submission loads: torch's caching allocator may hold no more
than the limit on the device, so that a submission asking for more gets CUDA's out-of-memory
error in its own code (a "memory-limit" diagnostic, its failure, never the grader's); the two
setters that would raise that bound again are taken out of torch's C module.

That bound is the submission's own process's word, and a submission has other ways to the
device than the allocator. The wall is outside it: while the grader waits for a reply, it
reads the process's device memory from NVML (the driver's count, summed over every device) and
kills a process past its limit, with room for what the driver adds on its own (each kernel it
loads as it is first used, libraries' handles). The driver frees what a process held when it
ends, and each process serves one submission, so nothing is left to the next.

NVML through ctypes: the harness runs under the course's venv, which brings torch and no NVML
binding; every node with an NVIDIA driver has libnvidia-ml.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

BOUNDED = "bounded"
# setters in torch's C module that would raise the allocator's bound again (the fraction, and
# the allocator's settings)
ALLOCATOR_SETTERS = ("_cuda_setMemoryFraction", "_accelerator_setAllocatorSettings")
# what the driver may add beyond the allocator's memory, counted from the process's memory when
# it said it was ready (its context): kernels loaded lazily, cuBLAS's and cuDNN's handles
DRIVER_ROOM = 512 << 20
# seconds between two readings while the grader waits for the process
PERIOD = 0.05


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
    except Exception as exc:  # the driver's RuntimeError, or a torch without these
        return f"{type(exc).__name__}: {exc}"
    return BOUNDED


class Unwatched(RuntimeError):
    """The grader cannot read a student process's GPU memory: a layer missing, never a zero."""


class _ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t, as nvmlDeviceGetComputeRunningProcesses_v3 fills it."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE = 0, 7
NOT_AVAILABLE = ctypes.c_ulonglong(-1).value  # NVML_VALUE_NOT_AVAILABLE


class Nvml:
    """The driver's count of each process's device memory."""

    def __init__(self, library: str = "libnvidia-ml.so.1"):
        try:
            self.lib = ctypes.CDLL(library)
        except OSError as exc:
            raise Unwatched(f"NVML cannot be loaded ({exc})") from None
        self._call("nvmlInit_v2")
        count = ctypes.c_uint()
        self._call("nvmlDeviceGetCount_v2", ctypes.byref(count))
        self.devices = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            self._call("nvmlDeviceGetHandleByIndex_v2", index, ctypes.byref(handle))
            self.devices.append(handle)

    def _call(self, name: str, *args) -> int:
        code = getattr(self.lib, name)(*args)
        if code not in (NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE):
            self.lib.nvmlErrorString.restype = ctypes.c_char_p
            words = self.lib.nvmlErrorString(code).decode(errors="replace")
            raise Unwatched(f"NVML's {name} failed: {words} ({code})")
        return code

    def used_bytes(self, pid: int) -> int | None:
        """What `pid` holds on every device, or None where no device lists it."""
        used = None
        for handle in self.devices:
            size = 16
            while True:
                count = ctypes.c_uint(size)
                infos = (_ProcessInfo * size)()
                code = self._call(
                    "nvmlDeviceGetComputeRunningProcesses_v3", handle, ctypes.byref(count), infos
                )
                if code == NVML_SUCCESS:
                    break
                size = count.value + 8  # more processes started meanwhile
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
    """One student process's device memory against its limit, from its memory when ready."""

    def __init__(self, used_bytes: Callable[[int], int | None], pid: int, limit_bytes: int):
        self.used_bytes, self.pid, self.limit_bytes = used_bytes, pid, limit_bytes
        ready = used_bytes(pid)
        if ready is None:
            raise Unwatched(
                f"NVML lists no process {pid} with a CUDA context (is the grader in another "
                "PID namespace than the node's?)"
            )
        self.allowed = ready + limit_bytes + DRIVER_ROOM

    def past_limit(self) -> int | None:
        """The bytes the process holds where they are more than allowed, else None."""
        used = self.used_bytes(self.pid)
        return used if used is not None and used > self.allowed else None
