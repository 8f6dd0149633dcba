"""Faults of the grading's infrastructure while they last: the one writer of the conditions
table. Whoever meets a fault holds its condition, each time it meets it; whoever finds it gone
clears it. Its start and its end are logged once each (not once a cycle), and what it means is
said to the students whose submissions it holds back (server/web/results.py) and to operators
(/metrics). A fault's own words, the logs' and staff's, are in English like every worker's.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.models import Condition, ScheduleRun, aware, utcnow
from server.core.queue import RECONCILE_SECONDS

log = logging.getLogger(__name__)
SCHEDULE_STALE_SECONDS = 3 * RECONCILE_SECONDS  # three reconciles missed: beat is gone or stuck


class Fault(str, enum.Enum):
    spool_full = "spool_full"  # below SPOOL_MIN_FREE_MB: nothing is sent (dispatch)
    cluster_away = "cluster_away"  # squeue/sacct fail: jobs' ends are not seen (collect)
    schedule_stopped = "schedule_stopped"  # Celery beat: no collect, no reconcile (heartbeat)


def hold(session: Session, fault: Fault, detail: str, now: dt.datetime | None = None) -> None:
    """The fault is there: its condition starts (logged), or goes on with the latest detail."""
    row = session.get(Condition, fault.value, with_for_update=True)
    if row is None:
        session.add(Condition(name=fault.value, since=now or utcnow(), detail=detail))
        log.warning("%s began: %s", fault.value, detail)
    elif row.detail != detail:
        row.detail = detail


def clear(session: Session, fault: Fault, now: dt.datetime | None = None) -> None:
    """The fault is gone: its condition ends (logged with how long it lasted), if it was held."""
    if session.get(Condition, fault.value) is None:  # most often: read, no lock taken
        return
    row = session.get(Condition, fault.value, with_for_update=True, populate_existing=True)
    if row is None:
        return
    lasted = ((now or utcnow()) - aware(row.since)).total_seconds()
    log.warning("%s ended after %.0f s (it was: %s)", fault.value, lasted, row.detail)
    session.delete(row)


def current(session: Session) -> dict[Fault, Condition]:
    """The conditions that hold now."""
    return {
        Fault(row.name): row
        for row in session.scalars(select(Condition))
        if row.name in Fault._value2member_map_
    }


def watch_the_schedule(session: Session, now: dt.datetime | None = None) -> None:
    """Whether Celery beat runs (its reconcile, every RECONCILE_SECONDS): asked by each worker's
    heartbeat, which beat does not drive, so that a beat stopped is logged and told at once."""
    now = now or utcnow()
    ran_at = session.scalar(select(ScheduleRun.ran_at).where(ScheduleRun.task == "reconcile"))
    if ran_at is not None and (now - aware(ran_at)).total_seconds() > SCHEDULE_STALE_SECONDS:
        hold(
            session,
            Fault.schedule_stopped,
            f"Celery beat's reconcile last ran at {aware(ran_at):%Y-%m-%d %H:%M:%S} UTC: no "
            "collect and no reconcile run until beat is back",
            now,
        )
    else:
        clear(session, Fault.schedule_stopped, now)
