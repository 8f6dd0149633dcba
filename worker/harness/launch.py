"""The grader's client of the zygote process (see zygote.py), with the standard library only.

A harness's first zygote is forked from it as it starts, once torch is imported and before it
reads a job (start_harness): one import of torch, the bulk of a cold start, rather than two. A
zygote started later, once the grader holds an exercise's checks and reference, is exec'd: nothing
hidden is ever in the memory students inherit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from worker.harness import sandbox
from worker.harness.jobs import Limits


def child_environment() -> dict[str, str]:
    """What the zygote (and so every student) starts with: no secret, ever."""
    env = {
        k: os.environ[k]
        for k in sandbox.SAFE_ENVIRONMENT + (sandbox.LANDLOCK_ABI_CAP,)
        if k in os.environ
    }
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    return env


# how long the zygote may take to answer: its start (importing torch on a loaded node), and
# any request (a spawn hands over a student made ahead, after at most the optimizers' warm-up
# of about a second; a reap waits `grace` more)
START_SECONDS = 120.0
ANSWER_SECONDS = 30.0
CLOSE_SECONDS = 2.0
STOPPED_STATES = ("T", "t")  # /proc/PID/stat: stopped by a signal, or in a tracing stop
STOPPED_AGAIN_SECONDS = 0.5


def is_stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (or in a tracing stop), from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # the state follows the command's name, which is in parentheses
            state = stat.read().rpartition(b")")[2].split()[0].decode()
    except (OSError, IndexError):
        return False
    return state in STOPPED_STATES


class ZygoteLost(RuntimeError):
    """The zygote did not answer in time, or died. `stopped`: it was found stopped, which only a
    signal (a process of this account's) does: the student process that ran meanwhile, where
    the kernel lets it reach the zygote."""

    def __init__(self, what: str, state: str):
        super().__init__(f"the zygote {state} ({what})")
        self.stopped = state == "is stopped"


def import_torch_for_a_forked_zygote() -> None:
    """torch imported here, before a zygote is forked from this process (Zygote with fork), with
    the settings its OpenMP runtime reads as it loads taken from child_environment, as an exec'd
    zygote would read them, not from the node's: the forked one keeps what was read here."""
    for name in [n for n in os.environ if n.startswith(("OMP_", "GOMP_", "KMP_", "MKL_"))]:
        del os.environ[name]
    os.environ["OMP_NUM_THREADS"] = child_environment()["OMP_NUM_THREADS"]
    import torch  # noqa: F401


def _exec_zygote(theirs: socket.socket, env: dict[str, str], sealed: bool) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worker.harness.zygote",
            str(theirs.fileno()),
            *([] if sealed else ["--unsealed"]),
        ],
        pass_fds=[theirs.fileno()],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=sys.stderr.fileno(),
        cwd="/",
    )


class ForkedZygote:
    """A zygote forked from this process (zygote.run_forked), behind the part of Popen's
    interface the grader uses: its pid, poll, wait and kill."""

    def __init__(self, fd: int, env: dict[str, str], sealed: bool):
        from worker.harness.zygote import run_forked  # here: the child must never raise

        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:
            try:
                run_forked(fd, env, sealed)
            finally:  # never back into the grader's code, holding its pipes
                os._exit(70)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None and self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        deadline = time.monotonic() + (timeout or 0)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout)
            time.sleep(0.005)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


class Zygote:
    """Starts the zygote at once; `wait_ready` (or the first request) waits for its warm-up.
    Every answer it owes has a deadline: one it misses is ZygoteLost."""

    def __init__(self, env: dict[str, str], sealed: bool = True, fork: bool = False):
        """`sealed`: its students' types protected (seal.py); False only in tests of the seal.
        `fork`: forked from this process, which must hold nothing a student may not see and
        must have run no torch operation yet (else it is exec'd)."""
        ours, theirs = socket.socketpair()
        self.process = (
            ForkedZygote(theirs.fileno(), env, sealed)
            if fork
            else _exec_zygote(theirs, env, sealed)
        )
        theirs.close()
        self.sock = ours
        self.reader = ours.makefile("rb")
        self.ready = False
        self.lost: ZygoteLost | None = None  # once it is, it is asked nothing more
        # the scratches of the students `end` asked it to reap, whose answers are owed: read
        # before the next request is sent (the zygote removes each scratch as it answers)
        self.owed: list[str | None] = []

    def wait_ready(self) -> None:
        if not self.ready:
            if self._answer("its start", START_SECONDS).get("ready") is not True:
                raise RuntimeError("the zygote process failed to start; see its stderr")
            self.ready = True

    def spawn(
        self, confinement: sandbox.Confinement, limits: Limits, optimizers: bool = False
    ) -> tuple[dict, list[int]]:
        """A sandboxed student process: the zygote's answer (its pid, and its scratch: its
        path, the layer it makes or why it is missing), its three pipes and, where the scratch
        is a bounded tmpfs, a descriptor of its root. `confinement.scratch`: the folder the
        zygote makes the student's own scratch in (it may have made it, and the student, ahead:
        zygote.Ready). `optimizers`: its program may step a torch optimizer, so the zygote
        pays their warm-up at its next quiet moment (zygote.warm_up_optimizers)."""
        self.wait_ready()
        request = {
            "op": "spawn",
            "optimizers": optimizers,
            "threads": limits.threads,
            "reply_bytes": limits.reply_mb << 20,
            "confinement": {**confinement.__dict__, "read_paths": list(confinement.read_paths)},
        }
        self._ask(request, "a spawn")
        try:
            self.sock.settimeout(ANSWER_SECONDS)
            message, fds, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, 4)
        except OSError as exc:  # TimeoutError among them
            raise self._lost("a spawn", exc) from None
        try:
            if len(fds) not in (3, 4):
                raise ValueError(f"{len(fds)} descriptors")
            return json.loads(message), fds
        except ValueError as exc:  # it died while it answered
            for fd in fds:
                os.close(fd)
            raise self._lost("a spawn", exc) from None

    def warm_up(self) -> None:
        """Pay the rest of the warm-up now, not after the first student (a pilot, which must be
        as fast on its first run as on every other)."""
        self.wait_ready()
        self._ask({"op": "warm"}, "its warm-up")
        if self._answer("its warm-up", START_SECONDS).get("warm") is not True:
            raise RuntimeError("the zygote did not warm up; see its stderr")

    def ready_pid(self) -> int | None:
        """The pid of the student it holds ready for the next spawn (zygote.Ready), if any."""
        self._ask({"op": "ready"}, "which student is ready")
        return self._answer("which student is ready", ANSWER_SECONDS)["pid"]

    def reap(self, pid: int, grace: float) -> dict:
        """How a student ended, once it has (its process group killed past `grace` seconds)."""
        self._ask({"op": "reap", "pid": pid, "grace": grace}, "a reap")
        return self._answer("a reap", grace + ANSWER_SECONDS)

    def end(self, pid: int, scratch: str | None) -> None:
        """Reap a student the grader has killed, without waiting: the zygote's answer comes once
        its memory is freed (about 6 ms for a process forked from torch's), and is read before
        the next request, so that a grade is not kept waiting for it."""
        self._ask({"op": "reap", "pid": pid, "grace": 0.0}, "a reap")
        self.owed.append(scratch)

    def settle(self) -> None:
        """Before a grade: the answers owed from the grade before. A zygote found stopped now
        was stopped by a student of that grade, not by this one's, which has not run: it is
        lost (the grade replaces it before its time starts), and blames no one."""
        if not self.owed or self.lost is not None:
            return
        try:
            self.check()
            self._read_owed()
        except ZygoteLost as lost:
            if lost.stopped:
                self.lost = ZygoteLost(str(lost), "is stopped, by a student of an earlier grade")

    def state(self) -> str | None:
        """Why it cannot answer, if it cannot: it exited, or is stopped; None while it can."""
        code = self.process.poll()
        if code is not None:
            return f"exited with status {code}" if code >= 0 else f"was killed by signal {-code}"
        return "is stopped" if is_stopped(self.process.pid) else None

    def check(self) -> None:
        """ZygoteLost now if it cannot answer (a cheap look, before waiting on it). A stop is
        looked at twice: a job that Slurm suspends and resumes is stopped and continued whole,
        the grader with it, which may run again a moment before the zygote does."""
        state = self.state()
        if state == "is stopped":
            time.sleep(STOPPED_AGAIN_SECONDS)
            state = self.state()
        if state is not None:
            raise self._lost("looked at", state)

    def _ask(self, request: dict, what: str) -> None:
        self.check()
        self._read_owed()
        try:
            self.sock.sendall(json.dumps(request).encode() + b"\n")
        except OSError as exc:
            raise self._lost(what, exc) from None

    def _read_owed(self) -> None:
        """The answers to the reaps `end` asked for, each in its turn."""
        while self.owed:
            self._answer("an earlier reap", ANSWER_SECONDS)
            self.owed.pop(0)

    def _answer(self, what: str, seconds: float) -> dict:
        try:
            self.sock.settimeout(seconds)
            line = self.reader.readline()
        except OSError as exc:  # TimeoutError among them
            raise self._lost(what, exc) from None
        if not line:
            raise self._lost(what, "no answer")
        try:
            return json.loads(line)
        except ValueError:  # it died while it answered
            raise self._lost(what, line[:100]) from None

    def _lost(self, what: str, why: object) -> ZygoteLost:
        self.lost = ZygoteLost(f"{what}: {why}", self.state() or "does not answer")
        return self.lost

    def close(self) -> None:
        """Told to end by the end of its requests: it reaps the students it was asked to,
        removes their scratches and that of the student it holds ready, and exits. Killed after
        CLOSE_SECONDS (it may be warming up, or lost: one stopped, by a student, is continued
        first), or ANSWER_SECONDS while it answers still and owes a reap (as long as a reap may
        take). Its students die with it (PR_SET_PDEATHSIG); the scratches of those it had not
        reaped are removed here. One continued is given ANSWER_SECONDS too: it may be
        halfway through making its ready student, whose scratch only it knows (killed after 2 s
        on a loaded machine, it left that folder behind)."""
        continued = self.state() == "is stopped"
        if continued:
            os.kill(self.process.pid, signal.SIGCONT)
        if self.process.poll() is None:
            owes = self.owed and self.lost is None
            seconds = ANSWER_SECONDS if owes or continued else CLOSE_SECONDS
            try:
                self.sock.shutdown(socket.SHUT_WR)
                self.process.wait(timeout=seconds)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.sock.close()
        self.reader.close()
        self.process.kill()
        self.process.wait()
        for scratch in self.owed:
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
