"""Unprivileged sandbox layers applied by the student process to itself, right after fork.

Each layer is tried independently; what is active on this machine is returned so the report can
say it. Nothing here needs root, so the same code confines students inside a normal Slurm job.
"""

from __future__ import annotations

import ctypes
import glob
import os
import resource
import sys
import tempfile
from dataclasses import dataclass

from worker.harness import mounts, seccomp
from worker.harness.syscalls import PR_SET_NO_NEW_PRIVS
from worker.harness.syscalls import check as _check
from worker.harness.syscalls import libc as _libc

PR_SET_DUMPABLE = 4


@dataclass(frozen=True)
class Confinement:
    """What the student process may use: its scratch directory, resource limits, a device."""

    scratch: str
    memory_bytes: int
    cpu_seconds: int
    file_bytes: int
    open_files: int
    read_paths: tuple[str, ...]
    device: str = "cpu"
    scratch_bytes: int = 256 << 20
    threads: int = 1  # torch's pool, which the task limit leaves room for
    sealed: bool = True  # seal.py; taken away only by tests of what it stops
    gpu_memory_bytes: int = 0  # on CUDA, what torch's allocator may hold (gpu_memory.py)


# --- namespaces ------------------------------------------------------------------------------


def enter_namespaces() -> None:
    """Private user, network and mount namespaces: no interface but a down loopback, so no
    network, and mounts of its own (see enter_fresh_root)."""
    mounts.unshare_as_self(mounts.CLONE_NEWNET | mounts.CLONE_NEWNS)


def enter_pid_namespace() -> None:
    """The children this process forks from now on are in a PID namespace of their own (the
    student's keeper, before it forks the student: zygote.py)."""
    _check(_libc.unshare(mounts.CLONE_NEWPID), "unshare(CLONE_NEWPID)")


def in_own_pid_namespace(c: Confinement, why_not: str | None) -> None:
    """The layer in the student process: the first process of its PID namespace, which holds no
    other (its parent and every process outside are nameless there). On CUDA, with /proc its
    own, whose thread ids are the ones the driver writes names under (on the CPU the fresh root
    holds nothing of /proc that names a process)."""
    if os.getpid() != 1:
        raise OSError(0, why_not or "not the first process of a PID namespace of its own")
    if c.device == "cuda":
        mounts.mount_own_proc()


def enter_ipc_namespace() -> None:
    """System V shared memory, semaphores and message queues of its own, inside the user
    namespace: the host's would be shared with other runs, and would outlive the process (its
    shared memory counted in no limit of it); these go with it."""
    _check(_libc.unshare(mounts.CLONE_NEWIPC), "unshare")


# --- what a device adds: on CUDA, what the driver needs as it starts ---------------------------

# What the CUDA driver reads when a student process initialises it (never the zygote: see zygote.py).
# "/proc/self" is opened by the student process itself, so it names that process alone.
CUDA_READ_PATHS = (
    "/proc/self",
    "/proc/driver/nvidia",
    "/sys/bus/pci",
    "/sys/devices",
    "/sys/module/nvidia",
    "/etc/nvidia",
    "/usr/local/cuda",
    "/usr/local/nvidia",
)
# What it writes there: the names of the threads it starts (task/TID/comm); without them it fails
# with "Error 304: OS call failed" (seen on an H200 node, driver 580).
CUDA_WRITE_PATHS = ("/proc/self/task",)


def devices(c: Confinement) -> tuple[str, ...]:
    """What the student process may open in /dev: a few, and on CUDA the NVIDIA devices."""
    if c.device != "cuda":
        return mounts.DEVICES
    return mounts.DEVICES + tuple(sorted(os.path.basename(p) for p in glob.glob("/dev/nvidia*")))


def read_paths(c: Confinement) -> tuple[str, ...]:
    """The confinement's read paths, and on CUDA what the driver reads."""
    return c.read_paths + (CUDA_READ_PATHS if c.device == "cuda" else ())


def write_paths(c: Confinement) -> tuple[str, ...]:
    """Paths inside the read paths that the student process may write, beside its scratch."""
    return CUDA_WRITE_PATHS if c.device == "cuda" else ()


def enter_fresh_root(c: Confinement) -> None:
    """The filesystem is the read paths, a few devices and the scratch: see mounts.py."""
    mounts.enter_fresh_root(c.scratch, read_paths(c), devices(c), write_paths(c))


def make_undumpable() -> None:
    """No core dump, no ptrace or /proc/PID/mem from processes of the same user.

    Only after the namespace: a non-dumpable process's /proc/self files belong to root, so a
    normal user could no longer write its uid_map (root could, which hid the order).
    """
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


# --- resource limits -------------------------------------------------------------------------


def _address_space_in_use() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def apply_rlimits(c: Confinement) -> list[str]:
    limits = {
        # SIGKILL at the limit: the first process of a PID namespace ignores a SIGXCPU it has
        # no handler for (the soft limit's), and the submission's thread may not set one
        resource.RLIMIT_CPU: (c.cpu_seconds, c.cpu_seconds),
        resource.RLIMIT_FSIZE: (c.file_bytes, c.file_bytes),
        resource.RLIMIT_NOFILE: (c.open_files, c.open_files),
        resource.RLIMIT_CORE: (0, 0),
    }
    # CUDA reserves terabytes of virtual address space, so there only Slurm's cgroup bounds memory.
    if c.device == "cpu":
        limit = _address_space_in_use() + c.memory_bytes
        limits[resource.RLIMIT_AS] = (limit, limit)
    for which, (soft, hard) in limits.items():
        resource.setrlimit(which, _within_hard_limit(which, soft, hard))
    return ["rlimits"]


# Threads the student process may have beside torch's pool (the exercise's `threads`): its own,
# the CUDA driver's and a few a submission may start; without a bound it made about 760 before
# the address space ran out, each with kernel memory of its own.
MAX_TASKS = 64


def limit_tasks(c: Confinement) -> list[str]:
    """RLIMIT_NPROC, set inside the student's own user namespace, where it counts that process's
    threads alone. The kernel never enforces it for root (uid 0 of the host), so there it is
    missing; a grading account that is not root, as deployed, has it."""
    if os.getuid() == 0:
        raise OSError(0, "not enforced for root (a grading account that is not root has it)")
    tasks = MAX_TASKS + c.threads
    resource.setrlimit(
        resource.RLIMIT_NPROC, _within_hard_limit(resource.RLIMIT_NPROC, tasks, tasks)
    )
    return [f"task-limit({tasks})"]


def _within_hard_limit(which: int, soft: int, hard: int) -> tuple[int, int]:
    """No one may raise a hard limit here (root neither, inside its own user namespace), and
    Slurm hands a job the login node's limits: a stricter one is kept, where asking for more
    made setrlimit fail every student."""
    current = resource.getrlimit(which)[1]
    if current == resource.RLIM_INFINITY:
        return soft, hard
    return min(soft, current), min(hard, current)


# --- Landlock --------------------------------------------------------------------------------

SYS_landlock_create_ruleset, SYS_landlock_add_rule, SYS_landlock_restrict_self = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH, LANDLOCK_RULE_NET_PORT = 1, 2

FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_ALL_BY_ABI = {
    1: (1 << 13) - 1,
    2: (1 << 14) - 1,
    3: (1 << 15) - 1,
    4: (1 << 15) - 1,
    5: (1 << 16) - 1,
    6: (1 << 16) - 1,
    7: (1 << 16) - 1,
}
FS_TRUNCATE, FS_IOCTL_DEV = 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


# the highest Landlock ABI used, below what the kernel offers: for the tests of a kernel without
# the signal scope (ABI 5, before Linux 6.12) on one that has it; read as the zygote starts
LANDLOCK_ABI_CAP = "HPCGRADE_LANDLOCK_ABI"
_abi_cap = int(os.environ.get(LANDLOCK_ABI_CAP, "0") or 0)


def landlock_abi() -> int:
    abi = max(
        _libc.syscall(SYS_landlock_create_ruleset, None, 0, LANDLOCK_CREATE_RULESET_VERSION), 0
    )
    return min(abi, _abi_cap) if _abi_cap > 0 else abi


def apply_landlock(c: Confinement) -> list[str]:
    """Read-only system and venv, read-write scratch, no TCP, no signals or sockets outward."""
    abi = landlock_abi()
    if abi < 1:
        return []
    handled_fs = FS_ALL_BY_ABI[min(abi, 7)]
    attr = _RulesetAttr(
        handled_fs,
        (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _check(
        _libc.syscall(SYS_landlock_create_ruleset, ctypes.byref(attr), size, 0),
        "landlock_create_ruleset",
    )
    try:
        read = FS_READ_FILE | FS_READ_DIR
        for path in read_paths(c):
            _allow(ruleset, path, read, handled_fs)
        _allow(ruleset, "/dev", read | FS_WRITE_FILE | FS_IOCTL_DEV, handled_fs, only=devices(c))
        _allow(ruleset, c.scratch, handled_fs & ~FS_EXECUTE, handled_fs)
        for path in write_paths(c):
            _allow(ruleset, path, read | FS_WRITE_FILE | FS_TRUNCATE, handled_fs)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _check(_libc.syscall(SYS_landlock_restrict_self, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    layers = [f"landlock-fs(abi {abi})"]
    if abi >= 4:
        layers.append("landlock-net")
    if abi >= 6:
        layers.append("landlock-scope")
    return layers


def _allow(ruleset: int, path: str, access: int, handled: int, only: tuple[str, ...] = ()) -> None:
    targets = [os.path.join(path, name) for name in only] if only else [path]
    for target in targets:
        try:
            fd = os.open(target, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            allowed = (
                access
                if os.path.isdir(target)
                else access
                & (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)
            )
            rule = _PathBeneath(allowed & handled, fd)
            _check(
                _libc.syscall(
                    SYS_landlock_add_rule,
                    ruleset,
                    LANDLOCK_RULE_PATH_BENEATH,
                    ctypes.byref(rule),
                    0,
                ),
                f"landlock_add_rule({target})",
            )
        finally:
            os.close(fd)


# --- putting it together ---------------------------------------------------------------------

SAFE_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES")


def scrub_environment(scratch: str) -> None:
    kept = {k: os.environ[k] for k in SAFE_ENVIRONMENT if k in os.environ}
    os.environ.clear()
    os.environ.update(kept, HOME=scratch, TMPDIR=scratch, TEMP=scratch, TMP=scratch)
    # the zygote's warm-up asked tempfile already (torch._dynamo does), which keeps the answer:
    # forget it, so that gettempdir() reads TMPDIR again and names the scratch directory
    tempfile.tempdir = None


def absent(required: tuple[str, ...], active: list[str]) -> list[str]:
    """The required layers (jobs.SANDBOX_LAYERS) that are not among the active ones."""

    def has(name: str) -> bool:
        return any(a == name or a.startswith((name + "(", name + "-")) for a in active)

    return [
        name
        for name in required
        if not (has("mount-namespace") or has("landlock") if name == "filesystem" else has(name))
    ]


def confine(c: Confinement, pid_namespace: str | None = None) -> tuple[list[str], list[str]]:
    """Apply every layer this machine offers; return (active layers, reasons for missing ones).
    `pid_namespace`: why the zygote could not make one, where it could not."""
    active, missing = ["scrubbed-environment"], []
    scrub_environment(c.scratch)

    def raise_layer(name: str, layer) -> bool:
        try:
            result = layer()
        except OSError as exc:
            missing.append(f"{name}: {exc.strerror or exc}")
            return False
        if result is None:
            active.append(name)
        elif result:
            active.extend(result)
        else:
            missing.append(f"{name}: not offered by this kernel or system")
        return bool(result is None or result)

    raise_layer("pid-namespace", lambda: in_own_pid_namespace(c, pid_namespace))
    raise_layer("rlimits", lambda: apply_rlimits(c))  # it reads /proc, which the fresh root lacks
    if raise_layer("network-namespace", enter_namespaces):
        raise_layer("task-limit", lambda: limit_tasks(c))
        raise_layer("ipc-namespace", enter_ipc_namespace)
        raise_layer("mount-namespace", lambda: enter_fresh_root(c))
    else:
        missing.append("mount-namespace: no user namespace to make it in")
    for name, layer in (
        ("non-dumpable", make_undumpable),
        ("seccomp", lambda: seccomp.apply_seccomp(unix_sockets=c.device == "cuda")),
        ("landlock", lambda: apply_landlock(c)),
    ):
        raise_layer(name, layer)
    return active, missing


def python_read_paths() -> tuple[str, ...]:
    """Interpreter, stdlib and site-packages: what imports may read, never the exercises."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.__file__)}
    paths.update(p for p in sys.path if p and os.path.isdir(p) and "site-packages" in p)
    paths.add(os.path.dirname(os.path.abspath(__file__)))
    # libraries a module system points at (`module load cuda`), which torch may load lazily
    paths.update(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if os.path.isabs(p))
    # never a folder that holds the checkout (and so the exercises), whatever points at it
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = {p for p in paths if not (checkout + os.sep).startswith(os.path.join(p, ""))}
    return tuple(sorted(paths)) + (
        "/usr/lib",
        "/usr/lib64",
        "/lib",
        "/lib64",
        "/usr/share/zoneinfo",
        "/etc/ld.so.cache",
        "/etc/localtime",
        "/sys/devices/system/cpu",
        "/proc/cpuinfo",
        "/proc/meminfo",
    )
