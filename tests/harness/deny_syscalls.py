"""Runs a command with some system calls answering ENOSYS, as on an older kernel: `landlock`
stands for the three landlock_* calls (absent from RHEL/Rocky 8's 4.18); `pid-namespace` for
`unshare(CLONE_NEWPID)`, which answers EINVAL, as a kernel built without PID namespaces does. A
seccomp filter loaded before exec, inherited by every child.

    python tests/harness/deny_syscalls.py landlock[,pivot_root,pid-namespace…] COMMAND [ARG...]
"""

import ctypes
import ctypes.util
import errno
import os
import sys

SCMP_ACT_ALLOW = 0x7FFF0000
PR_SET_NO_NEW_PRIVS = 38
LANDLOCK = ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self")
CLONE_NEWPID, SCMP_CMP_MASKED_EQ = 0x20000000, 7


class ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def deny(names: list[str]) -> None:
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp"), use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ArgCmp),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    for name in names:
        if name == "pid-namespace":
            flag = (ArgCmp * 1)(ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_NEWPID, CLONE_NEWPID))
            if (
                lib.seccomp_rule_add_array(
                    ctx,
                    0x00050000 | errno.EINVAL,
                    lib.seccomp_syscall_resolve_name(b"unshare"),
                    1,
                    flag,
                )
                < 0
            ):
                raise OSError("seccomp rule for unshare(CLONE_NEWPID)")
            continue
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0 or lib.seccomp_rule_add(ctx, 0x00050000 | errno.ENOSYS, number, 0) < 0:
            raise OSError(f"seccomp rule for {name}")
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if lib.seccomp_load(ctx) < 0:
        raise OSError("seccomp_load")


if __name__ == "__main__":
    deny(
        [
            call
            for name in sys.argv[1].split(",")
            for call in (LANDLOCK if name == "landlock" else (name,))
        ]
    )
    os.execvp(sys.argv[2], sys.argv[2:])
