"""The grader's client of the zygote process (see zygote.py), with the standard library only.

Without torch here, the grader starts the zygote before it imports torch itself: the two imports,
the bulk of a cold start, then run side by side on two cores instead of one after the other.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from worker.harness import sandbox
from worker.harness.jobs import Limits


def child_environment() -> dict[str, str]:
    """What the zygote (and so every student) starts with: no secret, ever."""
    env = {k: os.environ[k] for k in sandbox.SAFE_ENVIRONMENT if k in os.environ}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    return env


class Zygote:
    """Starts the zygote at once; `wait_ready` (or the first request) waits for its warm-up."""

    def __init__(self, env: dict[str, str]):
        ours, theirs = socket.socketpair()
        # exec'd, never forked from the grader: nothing hidden is in the memory students inherit
        self.process = subprocess.Popen(
            [sys.executable, "-m", "worker.harness.zygote", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno(), cwd="/")
        theirs.close()
        self.sock = ours
        self.reader = ours.makefile("rb")
        self.ready = False

    def wait_ready(self) -> None:
        if not self.ready:
            if json.loads(self.reader.readline() or b"{}").get("ready") is not True:
                raise RuntimeError("the zygote process failed to start; see its stderr")
            self.ready = True

    def spawn(self, confinement: sandbox.Confinement, limits: Limits) -> tuple[dict, list[int]]:
        """A sandboxed student process: the zygote's answer (its pid, and its scratch: the
        layer it makes, or why it is missing), its three pipes and, where the scratch is a
        bounded tmpfs, a descriptor of its root."""
        self.wait_ready()
        request = {"op": "spawn", "threads": limits.threads, "reply_bytes": limits.reply_mb << 20,
                   "confinement": {**confinement.__dict__, "read_paths": list(confinement.read_paths)}}
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        message, fds, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, 4)
        if len(fds) not in (3, 4):
            raise OSError("the zygote did not answer")
        return json.loads(message), fds

    def warm_up(self) -> None:
        """Pay the rest of the warm-up now, not after the first student (a pilot, which must be
        as fast on its first run as on every other)."""
        self.wait_ready()
        self.sock.sendall(b'{"op": "warm"}\n')
        if json.loads(self.reader.readline() or b"{}").get("warm") is not True:
            raise RuntimeError("the zygote did not warm up; see its stderr")

    def reap(self, pid: int, grace: float) -> dict:
        self.sock.sendall(json.dumps({"op": "reap", "pid": pid, "grace": grace}).encode() + b"\n")
        return json.loads(self.reader.readline())

    def close(self) -> None:
        """Killed, not asked: it holds nothing to save, and may be busy warming up. Its spare and
        any student die with it (PR_SET_PDEATHSIG)."""
        self.sock.close()
        self.reader.close()
        self.process.kill()
        self.process.wait()
