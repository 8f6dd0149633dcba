"""The queue with a real Celery worker on Redis and PostgreSQL: graded once, whatever fails."""

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import (
    REFERENCE_Q,
    end_process,
    graded_through_api,
    logged_in,
    postgres_database,
    the_course,
)

from server.core import migrate
from server.core.exercises import sync_exercises
from server.core.models import Exercise, GradingRun, Submission, User
from server.core.queue import enqueue, stuck
from server.web.app import create_app
from server.web.submissions import Rules, accept

pytestmark = [pytest.mark.services, pytest.mark.faults]
ROOT = Path(__file__).parents[2]
SLOW_REFERENCE = "import time\ntime.sleep(4)\n" + REFERENCE_Q


@pytest.fixture
def stack(redis_server, catalogue, tmp_path):
    """PostgreSQL database at head, the app, and a Celery worker process consuming grading tasks."""
    for url in postgres_database():
        migrate.upgrade(url)
        settings = {
            "DATABASE_URL": url,
            "BROKER_URL": redis_server.url,
            "SECRET_KEY": "test",
            "GRADING_LEASE_SECONDS": 600,
            "REQUEUE_AFTER_SECONDS": 1,
            "SPOOL_DIR": str(tmp_path / "spool"),
        }
        app = create_app(settings)
        database = app.extensions["hpcgrade.db"]
        with database.sessions.begin() as session:
            sync_exercises(session, the_course(session), catalogue)
            session.add(User(username="ana", name="Ana", email="a@uni.es", password_hash="x"))
        env = dict(
            os.environ,
            HPCGRADE_DATABASE_URL=url,
            HPCGRADE_BROKER_URL=redis_server.url,
            HPCGRADE_SECRET_KEY="test",
            HPCGRADE_REQUEUE_AFTER_SECONDS="1",
            HPCGRADE_SPOOL_DIR=str(tmp_path / "spool"),
        )
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "worker.celery_app",
                "worker",
                "--concurrency=1",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "warning",
            ],
            cwd=ROOT,
            env=env,
        )
        try:
            yield app
        finally:
            end_process(worker)
            database.dispose()


def submit(app, code: str) -> int:
    database = app.extensions["hpcgrade.db"]
    with database.sessions() as session:
        submission = accept(
            session,
            session.scalar(sa.select(User)),
            session.scalar(sa.select(Exercise).where(Exercise.slug == "autograd-q")),
            "work.py",
            code.encode(),
            Rules(1024, 100, 60),
            dt.datetime.now(dt.timezone.utc),
        )
        session.commit()
        enqueue(app.extensions["celery"], session, [submission.id])
        return submission.id


def wait_for(app, submission_id: int, status: str, seconds: float = 60):
    database = app.extensions["hpcgrade.db"]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with database.sessions() as session:
            submission = session.get(Submission, submission_id)
            if submission.status == status:
                return submission, list(submission.runs)
        time.sleep(0.2)
    raise AssertionError(f"submission {submission_id} never reached {status}")


def test_submitted_then_graded_by_the_worker(stack):
    submission, runs = wait_for(stack, submit(stack, REFERENCE_Q), "graded")
    assert submission.score == 10 and len(runs) == 1 and runs[0].status == "done"


def test_redis_down_while_submitting(stack, redis_server):
    redis_server.stop()
    submission_id = submit(stack, REFERENCE_Q)
    with stack.extensions["hpcgrade.db"].sessions() as session:
        stored = session.get(Submission, submission_id)
        assert stored.status == "queued" and stored.enqueued_at is None
    redis_server.start()
    time.sleep(1.5)
    with stack.extensions["hpcgrade.db"].sessions() as session:
        assert submission_id in stuck(session, dt.timedelta(seconds=1), 1)
        assert enqueue(stack.extensions["celery"], session, [submission_id]) == [submission_id]
    submission, runs = wait_for(stack, submission_id, "graded")
    assert submission.score == 10 and len(runs) == 1


def test_worker_killed_mid_grading_is_retried_with_one_grade(stack):
    submission_id = submit(stack, SLOW_REFERENCE)
    _, runs = wait_for(stack, submission_id, "running")
    pid = int(runs[0].worker.rpartition(":")[2])
    os.kill(pid, signal.SIGKILL)  # the pool process in the middle of grading
    submission, runs = wait_for(stack, submission_id, "graded", seconds=90)
    assert submission.score == 10
    assert [r.status for r in runs] == ["lost", "done"]
    with stack.extensions["hpcgrade.db"].sessions() as session:
        assert (
            session.scalar(
                sa.select(sa.func.count())
                .select_from(GradingRun)
                .where(GradingRun.status == "done")
            )
            == 1
        )


def test_the_api_flow_end_to_end(stack):
    from server.core.users import add_user

    database = stack.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:
        add_user(session, "bea", "Bea", "b@uni.es", "student", "long-password")
    status = graded_through_api(stack, "bea")
    assert status["score"] == 10 and len(status["checks"]) == 4
    assert all(c["passed"] for c in status["checks"])


def test_the_web_flow_end_to_end(stack):
    from server.core.users import add_user

    with stack.extensions["hpcgrade.db"].sessions.begin() as session:
        add_user(session, "cris", "Cris", "c@uni.es", "student", "long-password")
    client, token = logged_in(stack, "cris")
    sent = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": REFERENCE_Q.replace("- b**2", "+ b**2")},
    )
    deadline = time.monotonic() + 60
    while client.get(sent.headers["Location"] + "/status").json["status"] != "graded":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    page = client.get(sent.headers["Location"]).text
    assert "3 / 10" in page and "grad-sign-flipped" in page and "opposite sign" in page
