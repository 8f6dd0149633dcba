"""Seccomp filters (libseccomp via ctypes): the student process's, which every thread of it has,
and the student thread's own (watch.py), which keeps the submission off the grader's pipes."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import socket
from typing import Callable

from worker.harness.syscalls import PR_SET_NO_NEW_PRIVS
from worker.harness.syscalls import check as _check
from worker.harness.syscalls import libc as _libc

CLONE_THREAD = 0x00010000
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_NE, SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ = 1, 4, 7
# The mounts are set up before the filter is loaded; after it none changes. The new mount API
# has no hook Landlock sees: without this, mount_setattr made a read-only bind writable and
# fsopen/fsmount a tmpfs outside every bound. A memfd holds memory no rlimit counts.
DENIED_SYSCALLS = (
    "fork",
    "vfork",
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "unshare",
    "setns",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "init_module",
    "finit_module",
    "reboot",
    "swapon",
    "pivot_root",
    "chroot",
    "io_uring_setup",
    "mount_setattr",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "memfd_create",
    "memfd_secret",
    # System V and POSIX IPC: memory and queues held by the kernel, outside the
    # address space its limit counts (no exercise needs them)
    "shmget",
    "msgget",
    "semget",
    "mq_open",
)
# a thread made with new namespaces (clone refuses most of these beside CLONE_THREAD; not all)
CLONE_NEW_NAMESPACES = (
    0x00000080,
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
)  # time, mount, cgroup, uts, ipc, user, pid, net


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _scmp_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


_libseccomp: list = []


def load_libseccomp() -> ctypes.CDLL | None:
    """Find libseccomp once, in the zygote: finding it runs ldconfig, which the sandbox forbids."""
    if not _libseccomp:
        name = ctypes.util.find_library("seccomp")
        _libseccomp.append(ctypes.CDLL(name, use_errno=True) if name else None)
    return _libseccomp[0]


Deny = Callable[..., None]


def _load(rules: Callable[[Deny], None]) -> bool:
    """Load a filter that allows all but what `rules(deny)` denies, on the calling thread and
    the threads it starts later; False where libseccomp is missing."""
    lib = load_libseccomp()
    if lib is None:
        return False
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        return False
    try:

        def deny(syscall: str, code: int, *conditions: _ArgCmp) -> None:
            nr = lib.seccomp_syscall_resolve_name(syscall.encode())
            if nr < 0:
                return
            array = (_ArgCmp * len(conditions))(*conditions) if conditions else None
            result = lib.seccomp_rule_add_array(ctx, _scmp_errno(code), nr, len(conditions), array)
            if result < 0:
                raise OSError(-result, f"seccomp rule for {syscall}")

        rules(deny)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        result = lib.seccomp_load(ctx)
        if result < 0:
            raise OSError(-result, "seccomp_load")
    finally:
        lib.seccomp_release(ctx)
    return True


def apply_seccomp(unix_sockets: bool = False) -> list[str]:
    """EPERM for sockets, new processes and namespaces, exec, tracing, mounts, memfds, IPC,
    signals to other processes and kernel administration.

    Threads stay allowed (clone with CLONE_THREAD); clone3 answers ENOSYS so libc falls back to
    clone, whose flags a filter can see. `unix_sockets` lets Unix sockets through, which the CUDA
    driver opens as it starts: they reach nothing outside, since abstract ones belong to the
    network namespace and the fresh root holds no socket file.
    """

    def rules(deny: Deny) -> None:
        for syscall in DENIED_SYSCALLS:
            deny(syscall, errno.EPERM)
        if unix_sockets:
            deny("socket", errno.EPERM, _ArgCmp(0, SCMP_CMP_NE, socket.AF_UNIX, 0))
        else:
            deny("socket", errno.EPERM)
        deny("clone", errno.EPERM, _ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0))
        for flag in CLONE_NEW_NAMESPACES:
            deny("clone", errno.EPERM, _ArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag))
        deny("clone3", errno.ENOSYS)
        # signals to itself alone: the zygote and the grader stay out of reach with no Landlock
        # signal scope (kernels before 6.12), and the process has no children of its own
        own = os.getpid()
        for syscall in ("kill", "tgkill"):
            deny(syscall, errno.EPERM, _ArgCmp(0, SCMP_CMP_NE, own, 0))
        # nor a signal with a siginfo of its own making: to itself, one that claims to come
        # from the kernel stops or kills even its PID namespace's first process (a review)
        for syscall in (
            "tkill",
            "pidfd_open",
            "pidfd_send_signal",
            "pidfd_getfd",
            "rt_sigqueueinfo",
            "rt_tgsigqueueinfo",
        ):
            deny(syscall, errno.EPERM)

    return ["seccomp"] if _load(rules) else []


# where each call takes the descriptor it writes to, or reads from (argument index)
WRITES = {
    "write": 0,
    "writev": 0,
    "pwrite64": 0,
    "pwritev": 0,
    "pwritev2": 0,
    "sendto": 0,
    "sendmsg": 0,
    "sendmmsg": 0,
    "vmsplice": 0,
    "sendfile": 0,
    "splice": 2,
    "tee": 1,
    "copy_file_range": 2,
}
READS = {
    "read": 0,
    "readv": 0,
    "pread64": 0,
    "preadv": 0,
    "preadv2": 0,
    "recvfrom": 0,
    "recvmsg": 0,
    "recvmmsg": 0,
    "splice": 0,
    "tee": 0,
    "sendfile": 1,
    "copy_file_range": 0,
}


def keep_off_pipes(request_fd: int, reply_fd: int) -> None:
    """On the student thread (and the threads it starts): the grader's request pipe is never
    read there, its reply pipe never written, and neither is copied, changed or closed. A
    review wrote a forged reply on the reply pipe, framed to swallow the harness's own."""

    def rules(deny: Deny) -> None:
        for syscall, index in WRITES.items():
            deny(syscall, errno.EPERM, _ArgCmp(index, SCMP_CMP_EQ, reply_fd, 0))
        for syscall, index in READS.items():
            deny(syscall, errno.EPERM, _ArgCmp(index, SCMP_CMP_EQ, request_fd, 0))
        for fd in (request_fd, reply_fd):
            for syscall in ("dup", "dup2", "dup3", "fcntl", "close", "ioctl", "fchmod", "fchown"):
                deny(syscall, errno.EPERM, _ArgCmp(0, SCMP_CMP_EQ, fd, 0))
            for syscall in ("dup2", "dup3"):  # nor made to stand for another file
                deny(syscall, errno.EPERM, _ArgCmp(1, SCMP_CMP_EQ, fd, 0))
        deny("close_range", errno.EPERM)

    if not _load(rules):
        raise OSError(0, "libseccomp is missing: the student thread cannot be kept off the pipes")
