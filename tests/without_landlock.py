"""Runs a command as on a kernel without Landlock (RHEL/Rocky 8's 4.18): a seccomp filter that
answers ENOSYS to the three landlock_* system calls, inherited by every child.

    python tests/without_landlock.py COMMAND [ARG...]
"""
import ctypes
import ctypes.util
import errno
import os
import sys

SCMP_ACT_ALLOW = 0x7FFF0000
PR_SET_NO_NEW_PRIVS = 38


def deny_landlock() -> None:
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp"), use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    for name in (b"landlock_create_ruleset", b"landlock_add_rule", b"landlock_restrict_self"):
        number = lib.seccomp_syscall_resolve_name(name)
        if lib.seccomp_rule_add(ctx, 0x00050000 | errno.ENOSYS, number, 0) < 0:
            raise OSError(f"seccomp rule for {name.decode()}")
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if lib.seccomp_load(ctx) < 0:
        raise OSError("seccomp_load")


if __name__ == "__main__":
    deny_landlock()
    os.execvp(sys.argv[1], sys.argv[1:])
