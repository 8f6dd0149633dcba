"""The C library calls the sandbox makes, through ctypes (no compiled extension in a course venv)."""

from __future__ import annotations

import ctypes
import os

PR_SET_NO_NEW_PRIVS = 38

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def close_all_but(*fds: int) -> None:
    """Close every descriptor above stderr but `fds`."""
    kept = sorted(set(fds) - {0, 1, 2})
    for low, high in zip([2] + kept, kept + [os.sysconf("SC_OPEN_MAX")]):
        os.closerange(low + 1, high)
