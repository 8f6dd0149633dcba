"""Filesystem confinement that needs no Landlock: a fresh root in a mount namespace.

Done unprivileged, as bubblewrap does: in a user namespace of its own a process may mount. The
zygote gives each student a scratch directory that is a tmpfs of bounded size (a full disk is an
error in the student's process, nothing more); the student builds a root of its own on a small
tmpfs holding read-only binds of the interpreter, the venv and the few system files it reads, and
its scratch, and pivots into it. Nothing else (the checkout, the exercises, the spool, the
service's settings, other runs' scratch) exists for it.
"""

from __future__ import annotations

import os
import platform

from worker.harness.syscalls import check, libc

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
CLONE_NEWIPC, CLONE_NEWPID = 0x08000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2
# the flags a bind inherits and a remount must keep: the kernel locks them in a user namespace
KEPT_FLAGS = (
    (os.ST_NOSUID, MS_NOSUID),
    (os.ST_NODEV, MS_NODEV),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203}
ROOT_SIZE = "size=4m,nr_inodes=4k,mode=0755"
DEVICES = ("null", "zero", "urandom", "random")


def unshare_as_self(flags: int) -> None:
    """New namespaces, a user namespace among them, where this process keeps its own uid and gid
    (without a mapping it could not create files in its scratch)."""
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(CLONE_NEWUSER | flags), "unshare")
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def _mount(
    source: str | None, target: str, kind: str | None, flags: int, options: str | None = None
) -> None:
    check(
        libc.mount(
            source.encode() if source else None,
            target.encode(),
            kind.encode() if kind else None,
            flags,
            options.encode() if options else None,
        ),
        f"mount {source or kind} on {target}",
    )


def make_mounts_private() -> None:
    """Nothing mounted here from now on reaches the namespace this one was copied from."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def mount_own_proc() -> None:
    """A mount namespace of this process's own whose /proc is a procfs of its PID namespace:
    the numbers there are the ones its calls return (the CUDA driver names the threads it starts
    through /proc/self/task/TID/comm, a TID of its namespace). Done before it leaves the user
    namespace that owns its PID namespace, the zygote's, where it may mount one."""
    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    make_mounts_private()
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


# --- the zygote's side: a bounded scratch per student ------------------------------------------

# Files the scratch may hold. Each costs kernel memory outside its size (about 1 KiB an empty
# one): unbounded, 300,000 empty files took about 300 MiB in 3.6 s, counted nowhere.
SCRATCH_FILES = 4096


def mount_scratch(path: str, size_bytes: int) -> int:
    """A tmpfs of `size_bytes` and SCRATCH_FILES files on the student's scratch directory; a
    descriptor of its root, through which the grader looks at what the student left there."""
    _mount(
        "tmpfs",
        path,
        "tmpfs",
        MS_NOSUID | MS_NODEV,
        f"size={max(size_bytes, 1 << 20)},nr_inodes={SCRATCH_FILES},mode=0700",
    )
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def unmount(path: str) -> None:
    libc.umount2(path.encode(), MNT_DETACH)


# --- the student's side: a fresh root --------------------------------------------------------


def enter_fresh_root(
    scratch: str,
    read_paths: tuple[str, ...],
    devices: tuple[str, ...],
    writable: tuple[str, ...] = (),
) -> None:
    """Pivot into a root holding `read_paths` (read-only), `devices` from /dev, `writable` (paths
    inside the read paths, bound again read-write) and `scratch` (read-write), each at its own
    path. The new root is a tmpfs mounted on the scratch directory itself, which is reached
    beforehand through a descriptor."""
    scratch_fd = os.open(scratch, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        make_mounts_private()
        _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, ROOT_SIZE)
        new_root = scratch
        for path in _outermost(read_paths):
            _bind(path, new_root + path, read_only=True)
        for name in devices:
            _bind(f"/dev/{name}", f"{new_root}/dev/{name}", read_only=False)
        for path in writable:
            _bind(path, new_root + path, read_only=False)
        # not recursive: the new root is mounted on the scratch, so it would come along on top
        _bind(
            f"/proc/self/fd/{scratch_fd}",
            new_root + scratch,
            read_only=False,
            directory=True,
            recursive=False,
        )
    finally:
        os.close(scratch_fd)
    os.chdir(new_root)
    pivot = SYS_PIVOT_ROOT.get(platform.machine())
    if pivot is None:
        raise OSError(0, f"pivot_root: no system call number known for {platform.machine()}")
    check(libc.syscall(pivot, b".", b"."), "pivot_root")
    check(libc.umount2(b".", MNT_DETACH), "umount of the old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(scratch)


def _outermost(paths: tuple[str, ...]) -> list[str]:
    """The paths that exist, a link's target beside the link, none inside another."""
    wanted: set[str] = set()
    for path in paths:
        if os.path.lexists(path):
            wanted.add(os.path.normpath(path))
            if os.path.islink(path):
                wanted.add(os.path.realpath(path))
    kept: list[str] = []
    for path in sorted(wanted, key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _bind(
    source: str,
    target: str,
    *,
    read_only: bool,
    directory: bool | None = None,
    recursive: bool = True,
) -> None:
    if directory is None and os.path.islink(source):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.readlink(source), target)
        return
    if directory if directory is not None else os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    _mount(source, target, None, MS_BIND | (MS_REC if recursive else 0))
    if read_only:
        kept = os.statvfs(target).f_flag
        flags = sum(ms for st, ms in KEPT_FLAGS if kept & st)
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | flags)
