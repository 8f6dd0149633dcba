"""The zygote: a clean process with torch imported and autograd warmed up, that forks students.

It is started with `exec`, never forked from the grader, so that no hidden check, reference or
secret is in the memory its children inherit. It never runs a parallel CPU op (a forked child
would hang on the first one), never initialises CUDA (which does not survive fork) and never
runs autograd's engine: on a node with a GPU, the engine's first backward counts the devices,
which initialises CUDA, and starts a thread per device, after which every forked child's
backward refuses to run. So its warm-up imports what a first backward and a first optimizer
step import lazily, and computes forward only.

Its first act is to enter a user and mount namespace of its own, where it mounts each student's
scratch as a bounded tmpfs (mounts.py). A process with threads cannot do that, and importing
torch starts one: so torch is imported after, in `main`, and the functions that use it import
it there too.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import time
from typing import NoReturn

from worker.harness import mounts, sandbox, seal, seccomp, syscalls

IDLE_BEFORE_WARM = 0.2  # seconds without a request
WARM_AT_LATEST = 5.0  # seconds after it is due: a busy queue leaves no quiet moment


def warm_up_autograd() -> None:
    """Pay once the lazy imports that a first backward, Function and module cost every student."""
    import math  # noqa: F401,E401  (students' usual imports)

    import numpy
    import torch
    import torch.fx.experimental.symbolic_shapes  # noqa: F401  (what a first backward imports)
    import torch.nn.functional as F

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    layer = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3, requires_grad=True)
    F.mse_loss(layer(Square.apply(x)).softmax(dim=1), torch.zeros(4, 2))
    (x.sigmoid() * x).sum()
    with torch.no_grad():
        layer.eval()(x)
    torch.einsum("bi,oi->bo", x.detach(), layer.weight.detach())
    torch.from_numpy(numpy.zeros(2)).unsqueeze(0).reshape(2).flatten().chunk(2)
    seccomp.load_libseccomp()


def warm_up_optimizers() -> None:
    """An optimizer's first step imports torch._dynamo: about 1 s, which a cold single grade
    should not wait for, nor the next student's grade. So the zygote pays it once its first
    student has been reaped and no request has come for IDLE_BEFORE_WARM: the grader is done with
    that submission (a check that starts another student asks at once), and the next has not
    come; or WARM_AT_LATEST after, between two requests, when submissions keep coming. The
    gradients are set by hand: a backward would run the engine (see above).
    """
    import torch

    layer = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    for parameter in layer.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    optimizer.zero_grad()


class Spare:
    """A student process forked ahead of time, idle until it is told its confinement.

    Forking and preparing it (watch.prepare) is paid while the previous submission is being
    graded instead of on the next one's critical path. The zygote's child is the student's
    keeper: it makes a PID namespace (it has the rights, in the zygote's user namespace, and no
    thread) and forks the student into it as that namespace's first process, which sees neither
    the zygote nor the grader and cannot name them to a signal. The keeper says the student's
    pid, then its wait status as it ends, and exits unwaited for (the zygote ignores SIGCHLD):
    the grade never waits for a second process's exit.
    """

    def __init__(self, warm: bool, sealed: bool) -> None:
        self.warm = warm  # forked after warm_up_optimizers
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.out_r, out_w = os.pipe()
        spec_r, self.spec_w = os.pipe()
        self.told_r, told_w = os.pipe()  # the student's pid, as the zygote and grader see it
        self.ended_r, ended_w = os.pipe()  # its wait status
        released_r, self.released_w = os.pipe()  # closed once the grader is done with its pid
        if os.fork() == 0:
            sandbox._libc.prctl(1, signal.SIGKILL, 0, 0, 0)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the keeper waits for the student
            # every other descriptor is the zygote's, or another student's (a copy of a keeper's
            # release pipe held here would keep that keeper waiting)
            syscalls.close_all_but(req_r, rep_w, out_w, spec_r, told_w, ended_w, released_r)
            try:
                sandbox.enter_pid_namespace()
                pid_namespace = None
            except OSError as exc:
                pid_namespace = exc.strerror or str(exc)
            student_pid = os.fork()
            if student_pid:
                keep(student_pid, told_w, ended_w, released_r)
            for fd in (told_w, ended_w, released_r):
                os.close(fd)
            from worker.harness import student, watch

            prepared = watch.prepare() if sealed else None
            with os.fdopen(spec_r, "rb") as spec:
                request = json.loads(spec.read() or b"null")
            if request is None:
                os._exit(0)
            c = request["confinement"]
            confinement = sandbox.Confinement(**dict(c, read_paths=tuple(c["read_paths"])))
            student.run(
                req_r,
                rep_w,
                out_w,
                confinement,
                request["threads"],
                request["reply_bytes"],
                prepared,
                pid_namespace,
            )
        for fd in (req_r, rep_w, out_w, spec_r, told_w, ended_w, released_r):
            os.close(fd)

    def start(self, request: dict) -> tuple[int, list[int]]:
        """The student's pid, and the grader's ends of its pipes."""
        os.write(self.spec_w, json.dumps(request).encode())
        os.close(self.spec_w)
        with os.fdopen(self.told_r, "rb") as told:
            student_pid = int(told.read() or b"0")
        if not student_pid:
            raise RuntimeError("the spare's keeper ended before it forked the student")
        return student_pid, [self.req_w, self.rep_r, self.out_r]

    def discard(self) -> None:
        for fd in (
            self.spec_w,
            self.req_w,
            self.rep_r,
            self.out_r,
            self.told_r,
            self.ended_r,
            self.released_w,
        ):
            os.close(fd)  # an empty spec: the student exits, and its keeper with it


def keep(student_pid: int, told: int, ended: int, released: int) -> NoReturn:
    """The keeper's life once the student is forked: say its pid, hold no descriptor of the
    student's or the zygote's but these, say how the student ended, and reap it only once the
    zygote lets go (until then its pid, which the grader may still signal, names no other
    process)."""
    os.write(told, b"%d" % student_pid)
    syscalls.close_all_but(ended, released)
    ending = os.waitid(os.P_PID, student_pid, os.WEXITED | os.WNOWAIT)
    try:
        os.write(ended, b"%d %d" % (ending.si_code, ending.si_status))
    except BrokenPipeError:  # a spare discarded: no one asks
        pass
    os.read(released, 1)
    os.waitpid(student_pid, 0)
    os._exit(0)


def reap(ended: int, student_pid: int, grace: float) -> dict:
    """Wait for a student that is ending (its keeper says how on `ended`); kill its process
    group if it lingers."""
    deadline = time.monotonic() + grace
    killed = False
    while not select.select(
        [ended], [], [], None if killed else max(deadline - time.monotonic(), 0)
    )[0]:
        _kill_group(student_pid)
        killed = True
    text = os.read(ended, 32)
    os.close(ended)
    if not text:  # its keeper is gone (it dies with the zygote alone)
        return {"exit_code": None, "signal": None, "killed": killed}
    code, status = map(int, text.split())
    return {
        "exit_code": status if code == os.CLD_EXITED else None,
        "signal": status if code in (os.CLD_KILLED, os.CLD_DUMPED) else None,
        "killed": killed,
    }


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Scratches:
    """Each student's scratch directory, a tmpfs of bounded size in the zygote's own mount
    namespace, unmounted when the student is reaped (the grader's descriptor keeps it readable
    until the grader lets go)."""

    def __init__(self) -> None:
        self.mounted: dict[int, str] = {}
        self.unavailable: str | None = None
        try:
            mounts.unshare_as_self(mounts.CLONE_NEWNS)
            mounts.make_mounts_private()
        except OSError as exc:
            self.unavailable = f"scratch-limit: {exc.strerror or exc}"

    def mount(self, confinement: dict) -> tuple[list[int], dict]:
        """The descriptor of a fresh scratch, and the layer it makes (or why it could not)."""
        if self.unavailable:
            return [], {"missing": self.unavailable}
        try:
            fd = mounts.mount_scratch(confinement["scratch"], confinement["scratch_bytes"])
        except OSError as exc:
            return [], {"missing": f"scratch-limit: {exc.strerror or exc}"}
        return [fd], {
            "layer": f"scratch-limit({confinement['scratch_bytes'] >> 20} MiB, "
            f"{mounts.SCRATCH_FILES} files)"
        }

    def unmount(self, pid: int) -> None:
        path = self.mounted.pop(pid, None)
        if path:
            mounts.unmount(path)


def main(fd: int, sealed: bool = True) -> None:
    sandbox._libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # die with the grader
    scratches = Scratches()  # before torch starts a thread
    import torch

    # in memory before the first spare: no student imports it
    from worker.harness import student  # noqa: F401

    torch.set_num_threads(1)
    warm_up_autograd()

    def protect() -> None:  # what a student may not change: what is loaded now
        if sealed:
            seal.protect_loaded_types()

    protect()
    warm = False
    due: float | None = None  # when the first student was reaped: warm up at a quiet moment
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # keepers are never waited for
    spare = Spare(warm, sealed)
    # each student's pid: where its keeper says how it ended, and what lets the keeper reap it
    endings: dict[int, tuple[int, int]] = {}
    sock = socket.socket(fileno=fd)
    sock.sendall(b'{"ready": true}\n')
    requests = sock.makefile("rb")
    while True:
        # the grader waits for each answer before it asks again, so nothing is left in the
        # reader's buffer here, and the socket alone says whether a request is waiting
        if due is not None and (
            time.monotonic() - due > WARM_AT_LATEST
            or not select.select([sock], [], [], IDLE_BEFORE_WARM)[0]
        ):
            warm_up_optimizers()
            protect()
            warm, due = True, None
            spare.discard()  # the next student is forked warm, now rather than at its spawn
            spare = Spare(warm, sealed)
            continue
        line = requests.readline()
        if not line:
            break
        request = json.loads(line)
        if request["op"] == "spawn":
            scratch_fds, scratch = scratches.mount(request["confinement"])
            pid, fds = spare.start(request)
            endings[pid] = spare.ended_r, spare.released_w
            if scratch_fds:
                scratches.mounted[pid] = request["confinement"]["scratch"]
            socket.send_fds(
                sock,
                [json.dumps({"pid": pid, "scratch": scratch}).encode() + b"\n"],
                fds + scratch_fds,
            )
            for f in fds + scratch_fds:
                os.close(f)
            spare = Spare(warm, sealed)
        elif request["op"] == "reap":
            ended, released = endings.pop(request["pid"])
            sock.sendall(json.dumps(reap(ended, request["pid"], request["grace"])).encode() + b"\n")
            os.close(released)  # the grader signals the pid no more: answered after its kill
            scratches.unmount(request["pid"])
            if not warm and due is None:
                due = time.monotonic()
        elif request["op"] == "warm":  # a pilot, before it takes runs: every student warm
            if not warm:
                warm_up_optimizers()
                protect()
                warm, due = True, None
                spare.discard()
                spare = Spare(warm, sealed)
            sock.sendall(b'{"warm": true}\n')


if __name__ == "__main__":
    try:
        main(int(sys.argv[1]), sealed="--unsealed" not in sys.argv[2:])
    except (BrokenPipeError, ConnectionResetError):
        # the grader died before this process asked to die with it (a `check` stopped with
        # Ctrl-C as it started): nobody to answer, and a traceback would reach their terminal
        os._exit(0)
