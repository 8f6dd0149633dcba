"""A student's Check on the worker (worker/grading/visible_checks.py), on a database of its own
with its own connections, as the worker and the portal have them."""

import dataclasses
import sqlite3

import pytest
import sqlalchemy as sa
from helpers import REFERENCE_Q

from server.core.config import Settings
from server.core.models import Exercise, User, VisibleCheck, utcnow
from worker.grading import visible_checks


@pytest.fixture
def check_id(database) -> int:
    with database.sessions.begin() as session:
        check = VisibleCheck(
            user_id=session.scalar(sa.select(User.id).where(User.username == "ana")),
            exercise=session.scalar(sa.select(Exercise).where(Exercise.slug == "autograd-q")),
            filename="work.py",
            code=REFERENCE_Q.encode(),
            lang="en",
            requested_at=utcnow(),
        )
        session.add(check)
        session.flush()
        return check.id


def test_no_transaction_is_held_while_the_checks_run(database, check_id, harness, tmp_path):
    """On SQLite a check held a write transaction through its run: every other write (a
    submission, the demo's worker heartbeat) waited, then failed with "database is locked",
    and the demo took its worker for dead."""
    settings = dataclasses.replace(Settings(), spool_dir=str(tmp_path))
    writes = []

    def grade_while_another_writes(job, python):
        url = database.engine.url
        if url.get_backend_name() == "sqlite":
            other = sqlite3.connect(url.database, timeout=0.5)
            other.execute("BEGIN IMMEDIATE")  # raises "database is locked" under a writer
            other.rollback()
            other.close()
        else:
            with database.sessions.begin() as other:
                other.execute(sa.text("SET LOCAL lock_timeout = '500ms'"))
                other.execute(sa.text("UPDATE visible_checks SET lang = lang"))
        writes.append(job.id)
        return harness.report_for(job)

    with database.sessions() as session:
        taken = visible_checks.take(session, settings, check_id, utcnow())
        done = visible_checks.run(session, settings, taken, grade_while_another_writes)
    assert done == "done" and writes == [f"check-{check_id}"]
    with database.sessions() as session:
        assert session.get(VisibleCheck, check_id).report is not None
