"""The demo's processes, kept running: one that exits is started again within seconds, and a
worker whose heartbeat stops (alive, but taking nothing from the broker) is killed and started
again; each time the log says why. The others run on meanwhile: the portal keeps answering
while a worker is replaced, and what was queued waits in the database and the broker.

A process that keeps exiting soon after its start waits longer before each new start (1 s,
then doubled, at most a minute), so that a broken configuration does not spin the machine; one
killed by a signal starts again after a second, however often.
"""
from __future__ import annotations

import ctypes
import datetime as dt
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

from sqlalchemy import select

from server.core.db import Database
from server.core.models import WorkerHeartbeat, utcnow

FIRST_WAIT, LONGEST_WAIT = 1.0, 60.0  # seconds before a start again
RAN_LONG = 30.0  # seconds: a process that ran this long died of something new
# a new worker's first heartbeat comes within seconds; on a loaded machine, give it this long
FIRST_BEAT_SECONDS = 60.0
PR_SET_PDEATHSIG = 1


@dataclass
class Child:
    """One supervised process: its command, and when it may start again."""

    name: str
    command: list[str]
    process: subprocess.Popen | None = None
    started: float = 0.0  # time.monotonic()
    started_at: dt.datetime = field(default_factory=utcnow)
    wait: float = FIRST_WAIT
    due: float | None = None  # when it starts again, once it has ended

    def why_it_ended(self) -> str:
        code = self.process.returncode
        if code >= 0:
            return f"exited with status {code}"
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:  # a real-time signal, say
            return f"was killed by signal {-code}"


@dataclass
class Supervisor:
    env: dict
    cwd: str
    say: Callable[[str], None]
    children: dict[str, Child] = field(default_factory=dict)
    # the worker whose heartbeat is watched: (its name here, its Celery node, the database
    # its heartbeats go to, seconds after which one is missed)
    beating: tuple[str, str, Database, float] | None = None

    def start(self, name: str, command: list[str]) -> subprocess.Popen:
        child = self.children.setdefault(name, Child(name, command))
        # a session of its own: stopped with everything it started (a worker's pool, its
        # harness); and asked to end if the supervisor itself is killed
        child.process = subprocess.Popen(command, env=self.env, cwd=self.cwd,
                                         start_new_session=True, preexec_fn=_end_with_parent)
        child.started, child.started_at, child.due = time.monotonic(), utcnow(), None
        return child.process

    def watch_heartbeat(self, name: str, node: str, database: Database,
                        stale_after: float) -> None:
        self.beating = (name, node, database, stale_after)

    def check(self) -> None:
        """One round: ended processes started again when due, a worker without heartbeat
        replaced."""
        now = time.monotonic()
        for child in self.children.values():
            if child.due is None and child.process.poll() is not None:
                ran = now - child.started
                # one that exits soon after its start, again and again, cannot start (its
                # configuration, say): it waits longer each time; one killed did nothing wrong
                exited_soon = child.process.returncode >= 0 and ran < RAN_LONG
                child.wait = min(child.wait * 2, LONGEST_WAIT) if exited_soon else FIRST_WAIT
                child.due = now + child.wait
                self.say(f"the {child.name} {child.why_it_ended()} after {ran:.0f} s; it starts "
                         f"again in {child.wait:.0f} s")
            if child.due is not None and now >= child.due:
                self.start(child.name, child.command)
        if self.beating:
            self._check_heartbeat()

    def _check_heartbeat(self) -> None:
        name, node, database, stale_after = self.beating
        child = self.children[name]
        if child.due is not None:
            return
        with database.sessions() as session:
            beat_at = session.scalar(select(WorkerHeartbeat.beat_at)
                                     .where(WorkerHeartbeat.node == node))
        if beat_at is not None and beat_at >= child.started_at:
            silent = (utcnow() - beat_at).total_seconds()
        else:  # none yet from this process: its first may take a while
            silent = time.monotonic() - child.started - FIRST_BEAT_SECONDS
        if silent > stale_after:
            self.say(f"the {name} sent no heartbeat for {silent:.0f} s: it takes nothing from "
                     "the broker; it is stopped and started again")
            self._kill(child)
            self.start(name, child.command)

    def stop(self, grace: float = 20.0) -> None:
        """Every process asked to end (SIGTERM: a worker finishes the task in hand), then
        killed once `grace` seconds have passed."""
        for child in self.children.values():
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for child in self.children.values():
            try:
                child.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self._kill(child)

    @staticmethod
    def _kill(child: Child) -> None:
        try:
            os.killpg(child.process.pid, signal.SIGKILL)
        except OSError:
            pass
        child.process.wait()


def _end_with_parent() -> None:
    """In the child, before its exec: SIGTERM when the supervisor dies (prctl's
    PR_SET_PDEATHSIG), so that a supervisor killed with SIGKILL leaves nothing running."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
