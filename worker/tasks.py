"""Celery tasks: thin, they take ids; the work is in worker/grading.py."""
from __future__ import annotations

import atexit
import datetime as dt

from celery import shared_task
from flask import current_app

from server.queue import enqueue, stuck
from worker import grading
from worker.catalogue import load_catalogue
from worker.runner import HarnessProcess

_harness: list[HarnessProcess] = []


def warm_harness() -> HarnessProcess:
    """One harness per worker process, started by its first task: torch is imported once."""
    if not _harness or _harness[0].process.poll() is not None:
        _harness[:] = [HarnessProcess(python=current_app.config["COURSE_PYTHON"])]
        atexit.register(_harness[0].close)
    return _harness[0]


@shared_task(name="hpcgrade.grade")
def grade(submission_id: int) -> str:
    config = current_app.config
    return grading.grade(current_app.extensions["hpcgrade.db"], warm_harness(), load_catalogue(),
                         submission_id, executor=config["EXECUTOR"],
                         worker=grading.worker_name(),
                         lease=dt.timedelta(seconds=config["GRADING_LEASE_SECONDS"]))


@shared_task(name="hpcgrade.reconcile")
def reconcile() -> list[int]:
    database = current_app.extensions["hpcgrade.db"]
    with database.sessions() as session:
        ids = stuck(session, dt.timedelta(seconds=current_app.config["REQUEUE_AFTER_SECONDS"]))
        return enqueue(current_app.extensions["celery"], session, ids)
