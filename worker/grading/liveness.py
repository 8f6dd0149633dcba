"""Who grades a run, and whether they still live: a run is alive while its worker lives and
holds the lease or, once an executor has given it an external id, while the executor's poll says
so (worker/grading/collect.py); `recover` sends the others back to the queue
(server/core/runs.py, `lose`)."""

from __future__ import annotations

import datetime as dt
import os
import socket
from typing import Callable

from sqlalchemy import select
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import sessionmaker

from server.core import runs
from server.core.models import GradingRun, RunStatus, utcnow

# what the database raises while it is away (stopped, restarting, unreachable): worth waiting for
DATABASE_AWAY = (OperationalError, InterfaceError)


def worker_name(node: str | None = None) -> str:
    """Who grades a run: "<Celery node name>:<pid of the process grading>" (outside Celery, the
    host's name stands for the node)."""
    return f"{node or socket.gethostname()}:{os.getpid()}"


def gone_here(node: str | None) -> Callable[[str | None], bool]:
    """Whether a run's worker is a process of this node that no longer exists (its pool process
    was killed, and its task came back here)."""
    node = node or socket.gethostname()

    def gone(worker: str | None) -> bool:
        name, _, pid = (worker or "").rpartition(":")
        if name != node or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    return gone


def recover(
    sessions: sessionmaker, dead: Callable[[str | None], bool], now: dt.datetime | None = None
) -> list[int]:
    """Runs that nobody grades any more (the lease ran out, or `dead` says so of their worker)
    are lost: their submissions are queued again, or an error after MAX_RUNS runs. A run with an
    external id is left to its executor's poll. Returns the submissions queued again.
    The runs are read without locks, since `dead` may ask the workers over the network; each
    is then lost in a short transaction of its own, unless it ended meanwhile."""
    now = now or utcnow()
    with sessions() as session:
        found = session.execute(
            select(
                GradingRun.id, GradingRun.submission_id, GradingRun.worker, GradingRun.lease_until
            ).where(GradingRun.status == RunStatus.running.value, GradingRun.external_id.is_(None))
        ).all()
    queued = []
    for run_id, submission_id, worker, lease_until in found:
        if lease_until < now or dead(worker):
            with sessions.begin() as session:
                reason = f"{worker} stopped before finishing"
                if runs.lose(session, run_id, reason, now, cause="worker-lost") == "requeued":
                    queued.append(submission_id)
    return queued
