"""A fault of the grading's infrastructure held while it lasts (server/core/conditions.py):
logged when it begins and when it ends, not at each cycle that meets it."""

import datetime as dt
import logging

from server.core import conditions
from server.core.conditions import SCHEDULE_STALE_SECONDS, Fault
from server.core.models import ScheduleRun, utcnow


def said(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == conditions.__name__]


def test_a_fault_is_logged_once_when_it_begins_and_once_when_it_ends(database, caplog):
    caplog.set_level(logging.WARNING, conditions.__name__)
    for free in (90, 80, 70):  # three cycles meet it
        with database.sessions.begin() as session:
            conditions.hold(session, Fault.spool_full, f"{free} MB free")
    with database.sessions() as session:
        held = conditions.current(session)
    assert list(held) == [Fault.spool_full] and held[Fault.spool_full].detail == "70 MB free"
    for _ in range(3):
        with database.sessions.begin() as session:
            conditions.clear(session, Fault.spool_full)
    assert said(caplog) == [
        "spool_full began: 90 MB free",
        f"spool_full ended after {0:.0f} s (it was: 70 MB free)",
    ]
    with database.sessions() as session:
        assert conditions.current(session) == {}


def test_a_schedule_that_stopped_is_held_until_beat_runs_again(database):
    now = utcnow()
    late = now - dt.timedelta(seconds=SCHEDULE_STALE_SECONDS + 1)
    with database.sessions.begin() as session:
        conditions.watch_the_schedule(session, now)  # never ran: a service just installed
        session.add(ScheduleRun(task="reconcile", ran_at=late))
    with database.sessions.begin() as session:
        assert conditions.current(session) == {}
        conditions.watch_the_schedule(session, now)
    with database.sessions.begin() as session:
        assert list(conditions.current(session)) == [Fault.schedule_stopped]
        session.get(ScheduleRun, "reconcile").ran_at = now
        conditions.watch_the_schedule(session, now)
    with database.sessions() as session:
        assert conditions.current(session) == {}
