"""Celery, bound in the app factory (Flask's own pattern), and enqueueing after the commit."""
from __future__ import annotations

import datetime as dt
import logging

from celery import Celery, Task
from flask import Flask
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from .models import GradingRun, Submission, SubmissionStatus, utcnow

log = logging.getLogger(__name__)
RECONCILE_SECONDS = 30.0


def celery_init_app(app: Flask) -> Celery:
    class FlaskTask(Task):
        def __call__(self, *args, **kwargs):
            with app.app_context():
                return self.run(*args, **kwargs)

    celery = Celery(app.name, task_cls=FlaskTask, include=["worker.tasks"])
    celery.conf.update(
        broker_url=app.config["BROKER_URL"],
        broker_transport_options=app.config["BROKER_TRANSPORT_OPTIONS"],
        task_ignore_result=True,
        # a message is acknowledged when its task ends, so a killed worker's task comes back
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        beat_schedule={
            "reconcile": {"task": "hpcgrade.reconcile", "schedule": RECONCILE_SECONDS},
            "collect": {"task": "hpcgrade.collect", "schedule": app.config["COLLECT_SECONDS"]}},
    )
    celery.set_default()
    app.extensions["celery"] = celery
    return celery


def enqueue(celery: Celery, session: Session, submission_ids: list[int]) -> list[int]:
    """Send grading tasks for committed submissions; a broker that is down only delays them:
    the reconcile task sends what was never sent. Returns the ids that went out."""
    sent = []
    for submission_id in submission_ids:
        try:
            celery.send_task("hpcgrade.dispatch", args=[[submission_id]], retry=False)
        except Exception as exc:  # kombu raises many types for a broker that is away
            log.warning("submission %s stays queued: broker unavailable (%s)", submission_id, exc)
            break
        sent.append(submission_id)
    if sent:
        session.execute(update(Submission).where(Submission.id.in_(sent))
                        .values(enqueued_at=utcnow()))
        session.commit()
    return sent


def cancel_grading(celery: Celery, submission_ids: list[int]) -> bool:
    """Ask the workers to stop grading these submissions; False if the broker is away."""
    try:
        celery.send_task("hpcgrade.cancel", args=[submission_ids], retry=False)
    except Exception as exc:  # kombu raises many types for a broker that is away
        log.warning("cannot cancel %s: broker unavailable (%s)", submission_ids, exc)
        return False
    return True


def stuck(session: Session, older_than: dt.timedelta, now: dt.datetime | None = None) -> list[int]:
    """Submissions to send again: queued but never sent (or sent long ago), or running under a
    lease that ran out (their worker died). A run with an external id is not stuck: its
    executor's poll says whether its job is alive."""
    now = now or utcnow()
    queued = select(Submission.id).where(
        Submission.status == SubmissionStatus.queued.value,
        or_(Submission.enqueued_at.is_(None), Submission.enqueued_at < now - older_than))
    lapsed = select(GradingRun.submission_id).join(Submission).where(
        Submission.status == SubmissionStatus.running.value, GradingRun.status == "running",
        GradingRun.external_id.is_(None), GradingRun.lease_until < now)
    return sorted(set(session.scalars(queued)) | set(session.scalars(lapsed)))
