"""Recovery: a run whose worker was killed goes back to the queue at the next reconcile (not at
the end of its lease), a busy worker's run is left alone, and a database that is away delays
grading without losing a report or acknowledging a task as done."""

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
    dispatcher,
    end_process,
    postgres_database,
    queue_submission,
    the_course,
)
from sqlalchemy.exc import OperationalError

from server.core import migrate, runs
from server.core.config import app_settings
from server.core.exercises import sync_exercises
from server.core.models import Submission, User
from server.core.queue import enqueue
from server.web.app import create_app
from worker.grading import dispatch as dispatch_module

pytestmark = pytest.mark.faults
ROOT = Path(__file__).parents[2]
LOOPING = "while True:\n    pass\n"


def away(times: int, real):
    """`real`, failing the first `times` calls as a database that is away does."""
    calls = []

    def flaky(*args, **kwargs):
        calls.append(args)
        if len(calls) <= times:
            raise OperationalError("SELECT 1", {}, Exception("connection refused"))
        return real(*args, **kwargs)

    return flaky, calls


def test_a_report_in_hand_waits_for_the_database(database, executor, catalogue, monkeypatch):
    monkeypatch.setattr(dispatch_module, "RECORD_BACKOFF", (0.01, 0.02))
    record, calls = away(3, runs.record)
    monkeypatch.setattr(runs, "record", record)
    submission_id = queue_submission(database, REFERENCE_Q)
    assert dispatcher(database, executor, catalogue).dispatch().outcomes == {
        submission_id: "graded"
    }
    assert len(calls) == 4
    with database.sessions() as session:
        assert session.get(Submission, submission_id).score == 10


def test_a_task_that_cannot_read_the_database_is_tried_again_not_done(tmp_path, monkeypatch):
    from worker.grading import tasks

    app = create_app(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
            "SECRET_KEY": "t",
            "BROKER_URL": "memory://",
        }
    )
    dispatch, calls = away(2, lambda self: dispatch_module.Dispatched({7: "graded"}))
    monkeypatch.setattr(dispatch_module.Dispatcher, "dispatch", dispatch)
    monkeypatch.setattr(dispatch_module.Dispatcher, "recover", lambda self, dead: [])
    with app.app_context():
        result = tasks.dispatch.apply(args=[[7]])
    assert result.successful() and result.get() == {7: "graded"} and len(calls) == 3


def test_the_schedule_never_grades_on_a_local_worker(tmp_path, monkeypatch):
    """Runs claimed by the collect task (every few seconds, from beat) would carry no Celery
    node and wait out their lease if the worker died: a local worker grades in dispatch alone."""
    from worker.grading import tasks

    app = create_app(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
            "SECRET_KEY": "t",
            "BROKER_URL": "memory://",
        }
    )
    migrate.upgrade(app_settings(app).database_url)
    graded = []
    monkeypatch.setattr(
        dispatch_module.Dispatcher,
        "dispatch",
        lambda self: graded.append("dispatched") or dispatch_module.Dispatched(),
    )
    with app.app_context():
        assert tasks.collect.apply().get() == {}
    assert graded == []


@pytest.fixture
def service(redis_server, catalogue):
    """PostgreSQL at head, the app, and a way to start Celery workers (stopped afterwards)."""
    for url in postgres_database():
        migrate.upgrade(url)
        app = create_app(
            {"DATABASE_URL": url, "BROKER_URL": redis_server.url, "SECRET_KEY": "test"}
        )
        with app.extensions["hpcgrade.db"].sessions.begin() as session:
            sync_exercises(session, the_course(session), catalogue)
            session.add(User(username="ana", name="Ana", email="a@uni.es", password_hash="x"))
        env = dict(
            os.environ,
            HPCGRADE_DATABASE_URL=url,
            HPCGRADE_BROKER_URL=redis_server.url,
            HPCGRADE_SECRET_KEY="test",
        )
        workers = []

        def start_worker() -> subprocess.Popen:
            workers.append(
                subprocess.Popen(
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
                        "-l",
                        "warning",
                    ],
                    cwd=ROOT,
                    env=env,
                )
            )
            return workers[-1]

        app.start_worker = start_worker
        try:
            yield app
        finally:
            for worker in workers:
                end_process(worker)
            app.extensions["hpcgrade.db"].dispose()


def wait_for(app, submission_id: int, status: str, seconds: float = 90) -> Submission:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with app.extensions["hpcgrade.db"].sessions() as session:
            submission = session.get(Submission, submission_id)
            if submission.status == status:
                submission.runs  # loaded while the session is open
                return submission
        time.sleep(0.2)
    raise AssertionError(f"submission {submission_id} never reached {status}")


@pytest.mark.services
def test_kill_9_of_the_main_worker_process_is_noticed_by_the_next_reconcile(service):
    from worker.grading.tasks import reconcile

    database = service.extensions["hpcgrade.db"]
    submission_id = queue_submission(database, LOOPING)
    with database.sessions() as session:
        enqueue(service.extensions["celery"], session, [submission_id])
    main = service.start_worker()
    run = wait_for(service, submission_id, "running").runs[-1]
    assert run.worker.startswith("celery@")
    reconcile()  # the worker is alive and grading: its run is left alone
    assert wait_for(service, submission_id, "running").runs[-1].status == "running"

    os.kill(main.pid, signal.SIGKILL)  # mid-grading: the file loops until its load time-out
    main.wait()
    reconcile()
    lost = wait_for(service, submission_id, "queued", seconds=1)
    assert [r.status for r in lost.runs] == ["lost"]
    assert "stopped before finishing" in lost.runs[0].error
    assert lost.enqueued_at is not None  # sent again, for the next worker

    service.start_worker()
    graded = wait_for(service, submission_id, "graded")
    assert [r.status for r in graded.runs] == ["lost", "done"] and graded.score == 0
    with database.sessions() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Submission)) == 1
