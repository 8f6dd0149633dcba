"""Celery tasks: thin, they take ids; the work is in worker/grading.py."""
from __future__ import annotations

import datetime as dt

from celery import shared_task
from flask import current_app

from server.queue import enqueue, stuck
from worker import grading
from worker.catalogue import load_catalogue
from worker.executors import Executor, make_executor

_executor: list[Executor] = []


def executor() -> Executor:
    """One executor per worker process, made by its first task: the local one imports torch once."""
    if not _executor:
        _executor.append(make_executor(current_app.config))
    return _executor[0]


@shared_task(name="hpcgrade.grade")
def grade(submission_id: int) -> str:
    database, celery = current_app.extensions["hpcgrade.db"], current_app.extensions["celery"]
    outcome = grading.grade(database, executor(), load_catalogue(), submission_id,
                            worker=grading.worker_name(),
                            lease=dt.timedelta(seconds=current_app.config["GRADING_LEASE_SECONDS"]))
    if outcome == "failed":  # back in the queue for another run now, not at the next reconcile
        with database.sessions() as session:
            enqueue(celery, session, [submission_id])
    return outcome


@shared_task(name="hpcgrade.reconcile")
def reconcile() -> list[int]:
    database = current_app.extensions["hpcgrade.db"]
    with database.sessions() as session:
        ids = stuck(session, dt.timedelta(seconds=current_app.config["REQUEUE_AFTER_SECONDS"]))
        return enqueue(current_app.extensions["celery"], session, ids)
