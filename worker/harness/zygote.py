"""The zygote: a clean process with torch imported and autograd warmed up, that forks students.

A harness forks it as it starts, once torch is imported and before it reads a job (run_forked:
what an exec would give it, with one import of torch rather than two); one that replaces a lost
zygote, once the grader holds an exercise's checks and reference, is exec'd. So no hidden check,
reference or secret is in the memory its children inherit. It never runs a parallel CPU op (a
forked child would hang on the first one), never initialises CUDA (which does not survive fork)
and never runs autograd's engine: on a node with a GPU, the engine's first backward counts the
devices, which initialises CUDA, and starts a thread per device, after which every forked
child's backward refuses to run. So its warm-up imports what a first backward and a first
optimizer step import lazily, and computes forward only.

Its first act is to enter a user and mount namespace of its own, where it mounts each student's
scratch as a bounded tmpfs (mounts.py). A process with threads cannot do that, and importing
torch starts one: so an exec'd zygote imports torch after, in `main`, and the functions that
use it import it there too (a forked one has the forking thread alone).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from typing import NoReturn

from worker.harness import mounts, sandbox, seal, seccomp, syscalls

IDLE_BEFORE_WARM = 0.2  # seconds without a request
WARM_AT_LATEST = 5.0  # seconds after it is due: a busy queue leaves no quiet moment
# seconds each ready student sleeps before its set-up, where this is set in the zygote's
# environment: a slow start (CUDA's context on a GPU node) simulated on a CPU, for tests
READY_DELAY = "HPCGRADE_READY_DELAY_SECONDS"
TITLE = b"hpcgrade-zygote"  # the command line `ps` shows for one forked from its harness


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
    should not wait for, nor the next student's grade. So the zygote pays it once a spawn has
    said its student may step one (an exercise whose files use torch.optim: grader.
    load_exercise), a student has been reaped since, and no request has come for
    IDLE_BEFORE_WARM: the grader is done with that submission (a check that starts another
    student asks at once), and the next has not come; or WARM_AT_LATEST after, between two
    requests, when submissions keep coming. A zygote whose students never step one never pays
    it, nor carries torch._dynamo into each student it forks (a fork about a fifth dearer); a
    student whose own code imports it (an optimizer where the exercise has none, torch.func.grad,
    torch.compile) pays its import, about 1-2 s of its time. The gradients are set by hand: a
    backward would run the engine (see above).
    """
    import torch

    layer = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    for parameter in layer.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    optimizer.zero_grad()


class Ready:
    """A student process made before its submission comes, for the spawn request before it (the
    same confinement, limits and threads: its `shape`): its scratch made and mounted, then
    forked, and in the student confined, CUDA started on a GPU and sealed (student.run), waiting
    for the grader's first request. Made as soon as the one before is handed over, it is
    prepared while that submission is graded, not on the next one's critical path (CUDA's
    context, about 0.6 s, above all). Each serves one submission and is never reused.

    The zygote's child is the student's keeper: it makes a PID namespace (it has the rights, in
    the zygote's user namespace, and no thread) and forks the student into it as that
    namespace's first process, which sees neither the zygote nor the grader and cannot name them
    to a signal. The keeper says the student's pid, then its wait status as it ends, and exits
    unwaited for (the zygote ignores SIGCHLD): the grade never waits for a second process's exit.
    """

    def __init__(
        self, shape: dict, warm: bool, sealed: bool, scratches: Scratches, delay: float
    ) -> None:
        """`warm`: forked after warm_up_optimizers; `delay`: seconds the student sleeps before
        it confines itself (READY_DELAY), standing for CUDA's start where there is no GPU."""
        self.shape, self.warm = shape, warm
        self.scratch = tempfile.mkdtemp(prefix="hpcgrade-", dir=shape["confinement"]["scratch"])
        confinement = dict(shape["confinement"], scratch=self.scratch)
        self.scratch_fds, self.scratch_layer = scratches.mount(confinement)
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.out_r, out_w = os.pipe()
        told_r, told_w = os.pipe()  # the student's pid, as the zygote and grader see it
        self.ended_r, ended_w = os.pipe()  # its wait status
        released_r, self.released_w = os.pipe()  # closed once the grader is done with its pid
        if os.fork() == 0:
            try:
                sandbox._libc.prctl(1, signal.SIGKILL, 0, 0, 0)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the keeper waits for the student
                # every other descriptor is the zygote's, or another student's (a copy of a
                # keeper's release pipe held here would keep that keeper waiting)
                syscalls.close_all_but(req_r, rep_w, out_w, told_w, ended_w, released_r)
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

                time.sleep(delay)
                prepared = watch.prepare() if sealed else None
                student.run(
                    req_r,
                    rep_w,
                    out_w,
                    sandbox.Confinement(
                        **dict(confinement, read_paths=tuple(confinement["read_paths"]))
                    ),
                    shape["threads"],
                    shape["reply_bytes"],
                    prepared,
                    pid_namespace,
                )
            finally:  # never back into the zygote's loop, whatever failed here
                os._exit(70)
        for fd in (req_r, rep_w, out_w, told_w, ended_w, released_r):
            os.close(fd)
        with os.fdopen(told_r, "rb") as told:
            self.pid = int(told.read() or b"0")

    def alive(self) -> bool:
        """Whether its student is there to take: not ended, nor its keeper gone."""
        return bool(self.pid) and not select.select([self.ended_r], [], [], 0)[0]

    def take(self, scratches: Scratches, endings: dict) -> tuple[dict, list[int]]:
        """The spawn's answer (the student's pid, its scratch: path, and the layer it makes or
        why it is missing) and the descriptors the grader gets (its pipes' ends, the scratch's
        root); the zygote reaps it later through `endings`."""
        endings[self.pid] = self.ended_r, self.released_w
        scratches.handed[self.pid] = self.scratch, bool(self.scratch_fds)
        answer = {"pid": self.pid, "scratch": {"path": self.scratch, **self.scratch_layer}}
        return answer, [self.req_w, self.rep_r, self.out_r, *self.scratch_fds]

    def discard(self, scratches: Scratches) -> None:
        """Never handed over (another shape was asked for, a warm one replaces it, it died, or
        the zygote ends): killed, its scratch unmounted and removed."""
        if self.pid:
            _kill_group(self.pid)
        for fd in (self.req_w, self.rep_r, self.out_r, self.ended_r, self.released_w):
            os.close(fd)  # the keeper reaps the student and exits
        for fd in self.scratch_fds:
            os.close(fd)
        if self.scratch_fds:
            mounts.unmount(self.scratch)
        shutil.rmtree(self.scratch, ignore_errors=True)


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
    except BrokenPipeError:  # a ready student discarded: no one asks
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
    namespace (the grader's descriptor keeps it readable until the grader lets go), unmounted
    and removed when the student is reaped."""

    def __init__(self) -> None:
        self.handed: dict[int, tuple[str, bool]] = {}  # a student's: its path, whether mounted
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

    def remove(self, pid: int) -> None:
        """A handed-over student's scratch, once the student has ended: unmounted where it is a
        tmpfs, and removed (the grader does not wait for that end: Zygote.end)."""
        path, mounted = self.handed.pop(pid)
        if mounted:
            mounts.unmount(path)
        shutil.rmtree(path, ignore_errors=True)


def main(fd: int, sealed: bool = True) -> None:
    sandbox._libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # die with the grader
    scratches = Scratches()  # before torch starts a thread
    import torch

    # in memory before the first student: none imports it
    from worker.harness import student  # noqa: F401

    torch.set_num_threads(1)
    warm_up_autograd()

    def ready_to_fork() -> None:
        """What every student shares is loaded: sealed against change, and frozen out of the
        collector's reach, so that a full collection in a student walks only its own objects
        (torch's 170,000 cost 70 ms each time), as Python's gc docs advise a forking server."""
        if sealed:
            seal.protect_loaded_types()
        gc.collect()
        gc.freeze()

    ready_to_fork()
    warm = False
    expected = False  # a spawn said its student may step an optimizer
    due: float | None = None  # when a student was reaped since: warm up at a quiet moment
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # keepers are never waited for
    delay = float(os.environ.get(READY_DELAY, "0"))
    ready: Ready | None = None  # for the shape the last spawn asked for: none before the first

    def made_again(shape: dict) -> Ready:
        if ready is not None:
            ready.discard(scratches)
        return Ready(shape, warm, sealed, scratches, delay)

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
            ready_to_fork()
            warm, due = True, None
            if ready is not None:  # the next student is made warm, now rather than at its spawn
                ready = made_again(ready.shape)
            continue
        line = requests.readline()
        if not line:
            break
        request = json.loads(line)
        if request["op"] == "spawn":
            expected = expected or request["optimizers"]
            shape = {k: request[k] for k in ("threads", "reply_bytes", "confinement")}
            if ready is None or ready.shape != shape or not ready.alive():
                ready = made_again(shape)
            answer, fds = ready.take(scratches, endings)
            socket.send_fds(sock, [json.dumps(answer).encode() + b"\n"], fds)
            for f in fds:
                os.close(f)
            ready = Ready(shape, warm, sealed, scratches, delay)  # the next, made meanwhile
        elif request["op"] == "reap":
            ended, released = endings.pop(request["pid"])
            sock.sendall(json.dumps(reap(ended, request["pid"], request["grace"])).encode() + b"\n")
            os.close(released)  # the grader signals the pid no more: answered after its kill
            scratches.remove(request["pid"])
            if expected and not warm and due is None:
                due = time.monotonic()
        elif request["op"] == "warm":  # a pilot, before it takes runs: every student warm
            if not warm:
                warm_up_optimizers()
                ready_to_fork()
                warm, due = True, None
                if ready is not None:
                    ready = made_again(ready.shape)
            sock.sendall(b'{"warm": true}\n')
        elif request["op"] == "ready":  # which student is ready (the pool's tests)
            sock.sendall(json.dumps({"pid": ready.pid if ready else None}).encode() + b"\n")
    if ready is not None:
        ready.discard(scratches)


def run_forked(fd: int, env: dict[str, str], sealed: bool) -> NoReturn:
    """In a child forked from a harness as it starts (launch.ForkedZygote): what an exec would
    have given it, then `main`. It never returns into the grader's code that forked it."""
    code = 0
    try:
        _as_if_exec(fd, env)
        main(fd, sealed)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the grader is gone: nobody to answer
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _as_if_exec(fd: int, env: dict[str, str]) -> None:
    """Only `fd` open beside stdin (/dev/null) and stdout (stderr), as launch's exec passes
    them: the grader's pipes (its jobs, its reports) stay out of every student's reach; its
    signal handlers, environment and directory replaced; and its command line (sys.argv too)
    and first environment, which /proc shows to the process and its students, overwritten."""
    gc.collect()  # garbage of the grader's that holds a descriptor closes it now, not later
    for signum in signal.valid_signals():
        handler = signal.getsignal(signum)
        if callable(handler) and handler is not signal.default_int_handler:
            signal.signal(signum, signal.SIG_DFL)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
    os.environ.clear()  # glibc's environment is then its own copy, off the exec'd strings
    os.environ.update(env)
    sys.argv = sys.orig_argv = [TITLE.decode()]
    sys.dont_write_bytecode = "PYTHONDONTWRITEBYTECODE" in env
    os.chdir("/")
    with open("/proc/self/stat") as stat:
        # fields 48 to 51: where the exec'd command line and environment lie in memory
        fields = stat.read().rpartition(")")[2].split()
    arg_start, arg_end, env_start, env_end = (int(x) for x in fields[45:49])
    ctypes.memset(env_start, 0, env_end - env_start)
    ctypes.memset(arg_start, 0, arg_end - arg_start)
    ctypes.memmove(arg_start, TITLE, min(len(TITLE), arg_end - arg_start - 1))


if __name__ == "__main__":
    try:
        main(int(sys.argv[1]), sealed="--unsealed" not in sys.argv[2:])
    except (BrokenPipeError, ConnectionResetError):
        # the grader died before this process asked to die with it (a `check` stopped with
        # Ctrl-C as it started): nobody to answer, and a traceback would reach their terminal
        os._exit(0)
