"""Whether an executor's cluster takes jobs: the one writer of the cluster_states table.

sbatch that fails in a way that passes (the controller busy or away) makes the cluster rest:
nothing is sent to it for a while, the first rest 5 s and each failure in a row doubling it, up
to 5 minutes; a job that goes through ends the rest. The state is in the database, not in one
worker's memory: every dispatcher rests together, and students (server/web/results.py) and
operators (/metrics) read the same.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from server.core.models import ClusterState, utcnow

FIRST_REST, LONGEST_REST = 5.0, 300.0  # seconds


def resting_seconds(session: Session, executor: str, now: dt.datetime | None = None) -> float:
    """How long the cluster rests still (0.0 once it takes jobs again)."""
    state = session.get(ClusterState, executor)
    if state is None or state.resting_until is None:
        return 0.0
    return max((state.resting_until - (now or utcnow())).total_seconds(), 0.0)


def failed(session: Session, executor: str, reason: str, now: dt.datetime | None = None) -> float:
    """sbatch failed in a way that passes: the rest it starts, in seconds."""
    now = now or utcnow()
    state = session.get(ClusterState, executor, with_for_update=True)
    if state is None:
        state = ClusterState(executor=executor, failures=0)
        session.add(state)
    state.failures = (state.failures or 0) + 1
    rest = min(FIRST_REST * 2 ** (state.failures - 1), LONGEST_REST)
    state.resting_until = now + dt.timedelta(seconds=rest)
    state.since = state.since or now
    state.reason = reason
    return rest


def took_a_job(session: Session, executor: str) -> None:
    """A job went through: the cluster takes jobs (a write only where a rest was recorded)."""
    state = session.get(ClusterState, executor, with_for_update=True)
    if state is not None and state.failures:
        state.failures, state.resting_until, state.since, state.reason = 0, None, None, None
