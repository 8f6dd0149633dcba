"""The queue: Celery bound in the app factory (Flask's own pattern) with the tasks' time limits
and the broker's transport, enqueueing after the commit, the order runs are claimed in (a course's
fair share, turns between students), a submission's place in it, cancelling, mail notices sent
through it, and the runs stuck in it."""

from __future__ import annotations

import datetime as dt
import logging

from celery import Celery, Task
from flask import Flask
from kombu import Queue
from sqlalchemy import bindparam, func, nulls_first, or_, select, update
from sqlalchemy.orm import Session

from server.core import folder_broker, redis_broker, task_names
from server.core.config import app_settings
from server.core.mail import mail_configured
from server.core.models import Exercise, GradingRun, Submission, SubmissionStatus, utcnow
from server.core.notice_rounds import FAILURE_ROUND_SECONDS, REMIND_SECONDS

log = logging.getLogger(__name__)
RECONCILE_SECONDS = 30.0
PRUNE_SECONDS = 3600.0
# the students' submissions go on Celery's default queue (its name kept, so that messages
# queued before an upgrade are still consumed); a regrade's preview (worker/grading/tasks.py,
# preview)
# grades a whole exercise in one task: on a queue of its own it does not wait behind them; mail
# (notices, set-password links) too, so that a slow mail server holds no grading slot, and a
# grading rush delays no mail; a comparison of an exercise's submissions for code alike
# (worker/grading/similarity.py) is the staff's long work too, on the previews' queue
SUBMISSIONS, PREVIEWS, MAIL = "celery", "previews", "mail"
MAIL_TASKS = (
    task_names.NOTIFY,
    task_names.MAIL_LINKS,
    task_names.REMIND_DEADLINES,
    task_names.REPORT_FAILURES,
)
# Each task's soft time limit, from the longest its work waits for; the hard limit (the pool
# process killed: its message is delivered again) comes HARD_AFTER_SOFT later. Within a task
# every wait has an end of its own (a Slurm command's COMMAND_SECONDS, a harness's answer, the
# mail and directory servers' time-outs): these are a backstop, never what usually ends a task.
HARD_AFTER_SOFT = 60.0
TIME_LIMITS = {
    # a Slurm poll and a few sbatch calls of 60 s at most, the reports read
    task_names.COLLECT: 300.0,
    task_names.CANCEL: 180.0,  # scancel
    # a regrade's whole exercise, its runs' leases renewed meanwhile: past this its page
    # offers to start it again, from where it stopped
    task_names.PREVIEW: 6 * 3600.0,
    **dict.fromkeys(MAIL_TASKS, 600.0),  # a round of mails, each within the SMTP time-out
    task_names.RECONCILE: 120.0,  # each worker node asked, 6 s at most
    task_names.PRUNE_SPOOL: 1800.0,  # a walk of the spool
    task_names.USERS_SYNC: 600.0,  # the directory's groups, each within LDAP_TIMEOUT_SECONDS
    task_names.SIMILARITY: 600.0,  # an exercise's submissions compared, 200 in well under a minute
    # a student's Check: a harness started (runner.START_SECONDS) and one run of visible checks
    task_names.VISIBLE_CHECK: 300.0,
}


def _turns():
    """Each queued submission's turn and place in the queue. Its turn counts the submissions of
    its student that would be in flight with it (those running, those queued before it, itself);
    a turn beyond MAX_RUNNING_PER_STUDENT waits for the student's earlier ones. The queue goes
    by turn, then round-robin between courses (the course whose last run started longest ago,
    or that never had one, first), then round-robin between the course's students (the one
    whose last run started longest ago, or who never had one, first), then by age; a
    regrade's preview run serves no student, so it does not count. One course's 400 files do
    not delay another course's first, and a student with ten files does not delay one with
    one, whatever the number of grading slots."""
    waiting = Submission.status == SubmissionStatus.queued.value
    running = (
        select(Submission.user_id, func.count().label("running"))
        .where(Submission.status == SubmissionStatus.running.value)
        .group_by(Submission.user_id)
        .subquery()
    )
    served = (
        select(Submission.user_id, func.max(GradingRun.started_at).label("at"))
        .join(GradingRun, GradingRun.submission_id == Submission.id)
        .where(
            Submission.user_id.in_(select(Submission.user_id).where(waiting)),
            GradingRun.regrade_id.is_(None),
        )
        .group_by(Submission.user_id)
        .subquery()
    )
    waiting_courses = select(Exercise.course_id).join(Submission).where(waiting)
    course_served = (
        select(Exercise.course_id, func.max(GradingRun.started_at).label("at"))
        .join(Submission, Submission.exercise_id == Exercise.id)
        .join(GradingRun, GradingRun.submission_id == Submission.id)
        .where(Exercise.course_id.in_(waiting_courses), GradingRun.regrade_id.is_(None))
        .group_by(Exercise.course_id)
        .subquery()
    )
    rank = func.row_number().over(partition_by=Submission.user_id, order_by=Submission.id)
    queued = (
        select(Submission.id, Submission.user_id, Exercise.course_id, rank.label("rank"))
        .join(Exercise)
        .where(waiting)
        .subquery()
    )
    turn = queued.c.rank + func.coalesce(running.c.running, 0)
    turns = (
        select(queued.c.id, queued.c.course_id, turn.label("turn"), served.c.at.label("served"))
        .outerjoin(running, running.c.user_id == queued.c.user_id)
        .outerjoin(served, served.c.user_id == queued.c.user_id)
        .subquery()
    )
    # a window cannot order another: the place among the course's students is a column first
    in_course = func.row_number().over(
        partition_by=(turns.c.course_id, turns.c.turn),
        order_by=(nulls_first(turns.c.served), turns.c.id),
    )
    ranked = select(turns, in_course.label("in_course")).subquery()
    position = func.row_number().over(
        order_by=(
            ranked.c.turn,
            ranked.c.in_course,
            nulls_first(course_served.c.at),
            ranked.c.course_id,
        )
    )
    return (
        select(ranked.c.id, ranked.c.turn, position.label("position"))
        .outerjoin(course_served, course_served.c.course_id == ranked.c.course_id)
        .subquery("turns")
    )


TURNS = _turns()
# built once: a submission's place is asked by every poll of a waiting submission
_PLACE = select(TURNS.c.position, TURNS.c.turn).where(TURNS.c.id == bindparam("submission_id"))


def place(session: Session, submission_id: int) -> tuple[int, int] | None:
    """(position, turn) of a queued submission: position 1 is claimed next; None if it is
    not queued."""
    row = session.execute(_PLACE, {"submission_id": submission_id}).one_or_none()
    return tuple(row) if row is not None else None


def broker_transport(url: str) -> str | None:
    """kombu's transport for the broker's URL, with our mends where we have them."""
    for scheme, transport in (
        ("redis://", redis_broker.TRANSPORT),
        ("filesystem://", folder_broker.TRANSPORT),
    ):
        if url.startswith(scheme):
            return transport
    return None


def transport_options(settings) -> dict:
    """kombu's transport options, BROKER_TRANSPORT_OPTIONS on top. Redis hands a message that
    is not acknowledged within its visibility time-out (kombu's default: an hour) to another
    worker, and a task acknowledges its message when it ends (task_acks_late): a regrade's
    preview of six hours would run twice, then thrice. It outlasts every task's hard limit."""
    if not settings.broker_url.startswith("redis://"):
        return dict(settings.broker_transport_options)
    longest = max(time_limits(settings).values()) + HARD_AFTER_SOFT
    return {"visibility_timeout": int(longest) + 600, **settings.broker_transport_options}


def time_limits(settings) -> dict[str, float]:
    """Every task's soft time limit: a dispatch (a local grade, or the batches sent to Slurm)
    ends within its runs' lease, past which they are taken for lost and sent again anyway."""
    return {task_names.DISPATCH: float(settings.grading_lease_seconds), **TIME_LIMITS}


def celery_init_app(app: Flask) -> Celery:
    class FlaskTask(Task):
        def __call__(self, *args, **kwargs):
            with app.app_context():
                return self.run(*args, **kwargs)

    # the tasks are the worker's to import (worker/celery_app.py): the core sends them by name
    celery = Celery(app.name, task_cls=FlaskTask)
    settings = app_settings(app)
    celery.conf.update(
        broker_url=settings.broker_url,
        broker_transport=broker_transport(settings.broker_url),
        broker_transport_options=transport_options(settings),
        task_ignore_result=True,
        task_annotations={
            name: {"soft_time_limit": soft, "time_limit": soft + HARD_AFTER_SOFT}
            for name, soft in time_limits(settings).items()
        },
        # a message is acknowledged when its task ends, so a killed worker's task comes back
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        # a worker started without -Q consumes every queue named here; each its own routing key,
        # or the default exchange would copy every message into both
        task_queues=[Queue(name, routing_key=name) for name in (SUBMISSIONS, PREVIEWS, MAIL)],
        task_routes={
            task_names.PREVIEW: {"queue": PREVIEWS},
            task_names.SIMILARITY: {"queue": PREVIEWS},
            **{task: {"queue": MAIL} for task in MAIL_TASKS},
        },
        # a scheduled task expires once the next is due: those queued while no worker ran
        # are dropped, not run in a burst at its restart
        beat_schedule={
            name: {"task": task, "schedule": period, "options": {"expires": period}}
            for name, task, period in (
                ("reconcile", task_names.RECONCILE, RECONCILE_SECONDS),
                ("prune", task_names.PRUNE_SPOOL, PRUNE_SECONDS),
                *(
                    [("directory sync", task_names.USERS_SYNC, settings.ldap_sync_minutes * 60.0)]
                    if settings.ldap_url
                    else []
                ),
                ("collect", task_names.COLLECT, settings.collect_seconds),
                ("deadline reminders", task_names.REMIND_DEADLINES, REMIND_SECONDS),
                ("grader failures", task_names.REPORT_FAILURES, FAILURE_ROUND_SECONDS),
            )
        },
    )
    celery.set_default()
    app.extensions["celery"] = celery
    return celery


def enqueue(celery: Celery, session: Session, submission_ids: list[int]) -> list[int]:
    """Send grading tasks for committed submissions; a broker that is down only delays them:
    the reconcile task sends what was never sent. Returns the ids that went out.

    Each is marked sent, and committed, before its message goes: a worker takes a message
    within milliseconds, and its dispatch skips the rows another transaction holds (FOR UPDATE
    SKIP LOCKED); marked after, the row was held by this update as the dispatch looked, which
    then found nothing to grade, and the submission waited for the reconcile."""
    sent = []
    for submission_id in submission_ids:
        _mark_sent(session, submission_id, utcnow())
        try:
            celery.send_task(task_names.DISPATCH, args=[[submission_id]], retry=False)
        except Exception as exc:  # kombu raises many types for a broker that is away
            log.warning("submission %s stays queued: broker unavailable (%s)", submission_id, exc)
            _mark_sent(session, submission_id, None)
            break
        sent.append(submission_id)
    return sent


def _mark_sent(session: Session, submission_id: int, when: dt.datetime | None) -> None:
    session.execute(
        update(Submission).where(Submission.id == submission_id).values(enqueued_at=when)
    )
    session.commit()


def send_notice(celery: Celery, event: str, ids: list[int]) -> bool:
    """Ask a worker to mail what changed (server/core/notices.py), once the change is
    committed: a request never waits for the mail server. A broker that is away loses the
    notice, never the change; False then (and when there is nothing to send, or no mail)."""
    if not ids or not mail_configured():
        return False
    try:
        celery.send_task(task_names.NOTIFY, args=[event, ids], retry=False)
    except Exception as exc:  # kombu raises many types for a broker that is away
        log.warning("notice %s of %s not sent: broker unavailable (%s)", event, ids, exc)
        return False
    return True


def cancel_grading(celery: Celery, submission_ids: list[int]) -> bool:
    """Ask the workers to stop grading these submissions; False if the broker is away."""
    try:
        celery.send_task(task_names.CANCEL, args=[submission_ids], retry=False)
    except Exception as exc:  # kombu raises many types for a broker that is away
        log.warning("cannot cancel %s: broker unavailable (%s)", submission_ids, exc)
        return False
    return True


def stuck(
    session: Session, older_than: dt.timedelta, per_student: int, now: dt.datetime | None = None
) -> list[int]:
    """Queued submissions to send again: never sent, or sent long ago (their message was lost),
    among those whose turn has come (one waiting for its student's earlier ones is sent by the
    dispatch that ends them). Runs whose worker died are sent back to the queue first, by the
    reconcile task (worker/grading/liveness.py, recover)."""
    now = now or utcnow()
    return list(
        session.scalars(
            select(Submission.id)
            .join(TURNS, TURNS.c.id == Submission.id)
            .where(
                Submission.status == SubmissionStatus.queued.value,
                TURNS.c.turn <= per_student,
                or_(Submission.enqueued_at.is_(None), Submission.enqueued_at < now - older_than),
            )
            .order_by(TURNS.c.position)
        )
    )
