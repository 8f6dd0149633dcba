"""Celery tasks: thin, they take ids; the work is in worker/dispatch.py and worker/grading.py."""
from __future__ import annotations

import datetime as dt
import logging

from celery import shared_task
from flask import current_app

from server.catalogue import load_catalogue
from server.queue import enqueue, stuck
from worker.dispatch import Dispatcher
from worker.executor import Executor
from worker.executors import make_executor

log = logging.getLogger(__name__)
_executor: list[Executor] = []


def dispatcher() -> Dispatcher:
    """One executor per worker process, made by its first task (the local one imports torch
    once); the exercises are read again for every task, so edits apply without a restart."""
    if not _executor:
        _executor.append(make_executor(current_app.config))
    return Dispatcher.from_config(current_app.extensions["hpcgrade.db"], _executor[0],
                                  load_catalogue(), current_app.config)


@shared_task(name="hpcgrade.dispatch")
def dispatch(submission_ids: list[int]) -> dict[int, str]:
    done = dispatcher().dispatch(submission_ids)
    _follow_up(done.requeued, done.due_in)
    return done.outcomes


@shared_task(name="hpcgrade.collect")
def collect() -> dict[int, str]:
    """Reports into grades, ended jobs settled; then the batches that came due (a run sent back
    to the queue goes out with them)."""
    grading = dispatcher()
    outcomes = grading.collect()
    done = grading.dispatch([])
    _follow_up(done.requeued, done.due_in)
    return outcomes


@shared_task(name="hpcgrade.cancel")
def cancel(submission_ids: list[int]) -> list[int]:
    return dispatcher().cancel(submission_ids)


@shared_task(name="hpcgrade.reconcile")
def reconcile() -> list[int]:
    database = current_app.extensions["hpcgrade.db"]
    with database.sessions() as session:
        ids = stuck(session, dt.timedelta(seconds=current_app.config["REQUEUE_AFTER_SECONDS"]))
        return enqueue(current_app.extensions["celery"], session, ids)


def _follow_up(requeued: list[int], due_in: float | None) -> None:
    """Grader failures go back in the queue now, not at the next reconcile; a batch still
    filling up is looked at again when it is due."""
    if requeued:
        with current_app.extensions["hpcgrade.db"].sessions() as session:
            enqueue(current_app.extensions["celery"], session, requeued)
    if due_in is not None:
        try:
            dispatch.apply_async(args=[[]], countdown=due_in, retry=False)
        except Exception as exc:  # the broker is away: the collect task dispatches it anyway
            log.warning("cannot schedule the next batch: %s", exc)
