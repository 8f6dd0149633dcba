"""The demo's processes, kept running: one that exits is started again within seconds, and one
whose sign of life stops (a worker's heartbeat: alive, but taking nothing from the broker;
beat's schedule: its reconcile no longer runs) is killed and started again; each time the log
says why. The others run on meanwhile: the portal keeps answering
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

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from server.core.db import Database
from server.core.models import utcnow

FIRST_WAIT, LONGEST_WAIT = 1.0, 60.0  # seconds before a start again
RAN_LONG = 30.0  # seconds: a process that ran this long died of something new
# a new process's first sign of life comes within seconds (a worker's heartbeat) or a schedule's
# round (beat's reconcile); on a loaded machine, give it this long more
FIRST_SIGN_SECONDS = 60.0
PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: nothing is loaded after fork


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


@dataclass(frozen=True)
class Watch:
    """A process judged by a sign of life it leaves in the database: `last_sign` reads when it
    last gave one (None: never); older than `stale_after` seconds, the process is replaced, and
    `silence` says what that means."""

    child: str
    last_sign: Callable[[Session], dt.datetime | None]
    stale_after: float
    silence: str


@dataclass
class Supervisor:
    env: dict
    cwd: str
    say: Callable[[str], None]
    database: Database | None = None  # where the watched processes leave their signs of life
    children: dict[str, Child] = field(default_factory=dict)
    watches: list[Watch] = field(default_factory=list)
    unread: bool = False  # the signs could not be read last time (said once)

    def start(self, name: str, command: list[str]) -> subprocess.Popen:
        child = self.children.setdefault(name, Child(name, command))
        # a session of its own: stopped with everything it started (a worker's pool, its
        # harness); and asked to end if the supervisor itself is killed
        child.process = subprocess.Popen(
            command, env=self.env, cwd=self.cwd, start_new_session=True, preexec_fn=_end_with_parent
        )
        child.started, child.started_at, child.due = time.monotonic(), utcnow(), None
        return child.process

    def check(self) -> None:
        """One round: ended processes started again when due, silent ones replaced."""
        now = time.monotonic()
        for child in self.children.values():
            if child.due is None and child.process.poll() is not None:
                ran = now - child.started
                # one that exits soon after its start, again and again, cannot start (its
                # configuration, say): it waits longer each time; one killed did nothing wrong
                exited_soon = child.process.returncode >= 0 and ran < RAN_LONG
                child.wait = min(child.wait * 2, LONGEST_WAIT) if exited_soon else FIRST_WAIT
                child.due = now + child.wait
                self.say(
                    f"the {child.name} {child.why_it_ended()} after {ran:.0f} s; it starts "
                    f"again in {child.wait:.0f} s"
                )
            if child.due is not None and now >= child.due:
                self.start(child.name, child.command)
        if self.watches:
            self._check_signs()

    def _check_signs(self) -> None:
        try:
            with self.database.reads() as session:
                signs = [(watch, watch.last_sign(session)) for watch in self.watches]
        except DBAPIError as exc:  # locked, say: the processes are not the ones to blame
            if not self.unread:
                self.say(
                    f"cannot read the processes' signs of life ({exc.orig}); they are "
                    "left as they are"
                )
            self.unread = True
            return
        self.unread = False
        for watch, last in signs:
            child = self.children[watch.child]
            if child.due is not None:
                continue
            since_start = time.monotonic() - child.started
            if last is not None and last >= child.started_at:
                silent = (utcnow() - last).total_seconds()
                why, late = f"for {silent:.0f} s", silent > watch.stale_after
            else:  # none yet from this process: its first may take a while
                why = f"in the {since_start:.0f} s since it started"
                late = since_start > FIRST_SIGN_SECONDS + watch.stale_after
            if late:
                self.say(
                    f"the {watch.child} {watch.silence} {why}; it is stopped and started again"
                )
                self._kill(child)
                self.start(watch.child, child.command)

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
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
