"""Celery tasks: thin, they take ids; the work is in worker/grading/dispatch.py and
server/core/runs.py (a run's states).

A task that finds the database away is tried again with back-off (a new message, then this one
is acknowledged), never acknowledged as done; a report in hand waits for the database inside
its task (Dispatcher._record_patiently).
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Callable, ContextManager

from celery import shared_task
from flask import current_app

from server.core import notice_rounds, notices, runs, task_names
from server.core.config import app_settings
from server.core.ldap_directory import DirectoryUnavailable
from server.core.ldap_sync import describe, sync_enrolments
from server.core.mail import MailAway, mail_configured, report_refused, send_links
from server.core.models import ScheduleRun, User, VisibleCheck, utcnow
from server.core.queue import enqueue, send_notice, stuck
from worker.grading import heartbeat, liveness, spool_prune, visible_checks
from worker.grading.dispatch import Dispatcher
from worker.grading.executor import Executor
from worker.grading.executors import make_executor
from worker.grading.local import LocalExecutor
from worker.grading.one_at_a_time import one_at_a_time
from worker.grading.preview import PreviewGrader

log = logging.getLogger(__name__)
_executor: list[Executor] = []
_check_harnesses: list[LocalExecutor] = []
# a worker's main process answers at once, even while its pool grades; one that is slow to
# (a loaded node) is asked once more, longer, before its runs are taken for lost
INSPECT_SECONDS = (1.0, 5.0)
# while the database is away: tried again after about 1, 2, 4, 8, 8… seconds, for about an hour
RETRY_WHILE_AWAY = dict(
    autoretry_for=liveness.DATABASE_AWAY,
    retry_backoff=1,
    retry_backoff_max=8,
    retry_jitter=True,
    max_retries=450,
)
MAIL_RETRY_SECONDS = 60  # a mail server that is away is tried again this often, for 450 tries


def dispatcher(node: str | None = None) -> Dispatcher:
    """Each course's exercises are read again when its folder changed, so edits apply without
    a restart."""
    return Dispatcher.from_settings(
        current_app.extensions["hpcgrade.db"], worker_executor(), app_settings(), node
    )


def worker_executor() -> Executor:
    """One executor per worker process, made by its first task (the local one imports torch
    once)."""
    if not _executor:
        _executor.append(make_executor(app_settings()))
    return _executor[0]


def alone(name: str) -> ContextManager[bool]:
    """Whether this task holds the lock `name` of every worker host
    (worker/grading/one_at_a_time.py)."""
    return one_at_a_time(
        current_app.extensions["hpcgrade.db"], Path(app_settings().spool_dir), name
    )


@shared_task(name=task_names.DISPATCH, bind=True, **RETRY_WHILE_AWAY)
def dispatch(self, arrived: list[int]) -> dict[int, str]:
    """A submission arrived (`arrived`: its id, for the logs and Flower; the queue's order, fair
    between students, decides what is graded), or a slot came free: grade what is due. Runs of
    this node's dead
    pool processes go back to the queue first (this may be their task, delivered again). On a
    cluster, one dispatch claims every submission that is due, so one runs at a time: one that
    finds another under way leaves the work to it, or to the next collect's, within
    COLLECT_SECONDS (a rush's hundreds of dispatch messages would each redo the first's work,
    and hold the collects back behind them)."""
    if worker_executor().synchronous:
        return _dispatch(self.request.hostname)
    with alone("dispatch") as mine:
        return _dispatch(self.request.hostname) if mine else {}


def _dispatch(node: str | None) -> dict[int, str]:
    grading_here = dispatcher(node)
    grading_here.recover(liveness.gone_here(node))
    done = grading_here.dispatch()
    _follow_up(done.more, done.due_in)
    _tell_graded(done.outcomes)
    return done.outcomes


@shared_task(name=task_names.COLLECT, bind=True)
def collect(self) -> dict[int, str]:
    """Reports into grades, ended jobs settled; then the batches that came due (a run sent back
    to the queue goes out with them). A synchronous executor's runs are graded and recorded by
    dispatch tasks alone: this schedule never takes a grading slot. One collect at a time, on
    every worker host: one that finds another under way leaves the work to it (after an outage,
    the collects queued meanwhile would each poll Slurm)."""
    grading_here = dispatcher(self.request.hostname)
    if grading_here.executor.synchronous:
        return {}
    with alone("collect") as mine:
        if not mine:
            return {}
        outcomes = grading_here.collect()
        # not under the dispatch lock: it would turn away a new submission's own dispatch,
        # which would then wait for the next collect
        done = grading_here.dispatch()
    _follow_up(done.more, done.due_in)
    if mail_configured():  # a query of collect's runs' submissions, every COLLECT_SECONDS
        _tell_graded(
            done.outcomes | runs.submission_outcomes(grading_here.database.sessions, outcomes)
        )
    return outcomes


@shared_task(name=task_names.CANCEL, **RETRY_WHILE_AWAY)
def cancel(submission_ids: list[int]) -> list[int]:
    return dispatcher().cancel(submission_ids)


@shared_task(name=task_names.PREVIEW, bind=True, **RETRY_WHILE_AWAY)
def preview(self, regrade_id: int) -> dict[int, str]:
    """Grade a regrade's preview runs (worker/grading/preview.py); nothing is published."""
    grader = PreviewGrader(dispatcher(self.request.hostname), app_settings().slurm_poll_seconds)
    return grader.grade_previews(regrade_id, liveness.gone_here(self.request.hostname))


@shared_task(name=task_names.VISIBLE_CHECK, bind=True, **RETRY_WHILE_AWAY)
def visible_check(self, check_id: int) -> str:
    """Run a student's Check (worker/grading/visible_checks.py) once graded work has its turn."""
    settings = app_settings()
    with current_app.extensions["hpcgrade.db"].sessions() as session:
        now = utcnow()
        check = session.get(VisibleCheck, check_id)
        if check is None:
            return "gone"
        if (
            check.requested_at > now - visible_checks.WAIT_FOR_GRADED
            and visible_checks.graded_work_waits(session)
        ):
            visible_check.apply_async((check_id,), countdown=2)
            return "after graded work"
        taken = visible_checks.take(session, settings, check_id, now)
        if taken is None:
            return "not ours"
        return visible_checks.run(session, settings, taken, _check_harness().grade)


def _check_harness() -> LocalExecutor:
    """The worker's warm harness where it grades locally; otherwise one of the checks' own, in
    this worker process, made by its first check."""
    executor = worker_executor()
    if isinstance(executor, LocalExecutor):
        return executor
    if not _check_harnesses:
        _check_harnesses.append(LocalExecutor(app_settings()))
    return _check_harnesses[0]


@shared_task(name=task_names.MAIL_LINKS, bind=True, **RETRY_WHILE_AWAY)
def mail_links(self, user_ids: list[int], base_url: str, lang: str, staff_id: int) -> int:
    """Mail new accounts their set-password links (server/core/mail.py), in the language of the
    staff member who made them, who gets a mail naming any address the server refused. A mail
    server that is away is tried again, for the accounts not mailed yet. Returns how many were
    refused. The mail sent is counted (server/core/counters.py) as it goes out."""
    with current_app.extensions["hpcgrade.db"].sessions() as session:
        try:
            refused = send_links(session, user_ids, base_url, lang)
        except MailAway as away:
            session.commit()
            log.warning("mail server away (%s): %s links wait", away, len(away.left))
            raise self.retry(
                args=[away.left, base_url, lang, staff_id], exc=away, countdown=MAIL_RETRY_SECONDS
            ) from away
        if refused:
            try:
                report_refused(session, session.get(User, staff_id), refused, lang)
            except MailAway as away:  # the links went out: only the report is lost
                log.error(
                    "links refused for %s; the report to staff %s was not mailed: %s",
                    [user.username for user, _answer in refused],
                    staff_id,
                    away,
                )
        session.commit()
    return len(refused)


@shared_task(name=task_names.NOTIFY, bind=True, **RETRY_WHILE_AWAY)
def notify(self, event: str, ids: list[int]) -> int:
    """Mail what `event` tells about these rows to whom it concerns (server/core/notices.py),
    sent once their change was committed. A mail server that is away is tried again, for the
    rows not mailed yet. Returns how many mails went out."""
    with current_app.extensions["hpcgrade.db"].sessions() as session:
        try:
            return notices.notify(session, event, ids)
        except MailAway as away:
            log.warning("mail server away (%s): %s notices %s wait", away, event, away.left)
            raise self.retry(
                args=[event, away.left], exc=away, countdown=MAIL_RETRY_SECONDS
            ) from away
        finally:
            session.commit()  # what went out, counted


@shared_task(name=task_names.REMIND_DEADLINES)
def remind_deadlines() -> int:
    """Hourly: a day before a deadline, the students who sent nothing to it yet and want to be
    reminded are, once (server/core/notice_rounds.py)."""
    with current_app.extensions["hpcgrade.db"].sessions() as session:
        return notice_rounds.remind_deadlines(session, utcnow())


@shared_task(name=task_names.REPORT_FAILURES)
def report_failures() -> int:
    """Every few minutes: each course's new grader failures, one mail to each instructor
    (server/core/notice_rounds.py). A mail server that is away leaves them to the next round."""
    with current_app.extensions["hpcgrade.db"].sessions() as session:
        try:
            return notice_rounds.report_failures(session, utcnow())
        except MailAway as away:
            log.warning("mail server away (%s): grader failures wait for the next round", away)
            return 0


@shared_task(name=task_names.RECONCILE)
def reconcile() -> list[int]:
    """Runs whose worker died go back to the queue (the workers are asked which tasks they are
    running), then every submission queued but not sent, or sent long ago, is sent. That it
    ran says the schedule is alive (/healthz, /metrics, the demo's supervisor)."""
    database = current_app.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:
        session.merge(ScheduleRun(task="reconcile", ran_at=utcnow()))
    dispatcher().recover(dead_workers(current_app.extensions["celery"]))
    with database.sessions() as session:
        settings = app_settings()
        ids = stuck(
            session,
            dt.timedelta(seconds=settings.requeue_after_seconds),
            settings.max_running_per_student,
        )
        return enqueue(current_app.extensions["celery"], session, ids)


@shared_task(name=task_names.PRUNE_SPOOL)
def prune_spool() -> str:
    """Hourly: job logs, dead pilots' folders and runs' folders left behind leave the spool
    SPOOL_KEEP_DAYS after their last change (worker/grading/spool_prune.py), and the heartbeats
    of workers gone a day leave the database."""
    database = current_app.extensions["hpcgrade.db"]
    pruned = spool_prune.prune_spool(app_settings(), database)
    with database.sessions.begin() as session:
        forgotten = heartbeat.forget_gone(session)
    log.info("spool pruned: %s; heartbeats of gone workers forgotten: %s", pruned, forgotten)
    return str(pruned)


@shared_task(name=task_names.USERS_SYNC, **RETRY_WHILE_AWAY)
def users_sync() -> int:
    """Every LDAP_SYNC_MINUTES: enrolments from the directory's groups (server/core/ldap_sync.py);
    a directory that cannot be read is read at the next one. How many enrolments changed."""
    try:
        with current_app.extensions["hpcgrade.db"].sessions.begin() as session:
            report = sync_enrolments(session, app_settings())
    except DirectoryUnavailable as away:
        log.warning("enrolments not synced from the directory: %s", away)
        return 0
    for change in report.changes:
        log.info("from the directory's groups: %s", describe(change))
    for username, why in report.refused:
        log.warning("no account for the directory's %s: %s", username, why)
    for slug, groups in report.unread:
        log.error(
            "%s not synced: the directory gave no members of %s (missing, renamed, "
            "empty or hidden from the service account)",
            slug,
            ", ".join(groups),
        )
    return len(report.changes)


def dead_workers(celery) -> Callable[[str | None], bool]:
    """Whether a run's worker (liveness.worker_name) is dead: its Celery node does not answer, or
    answers without a task in that pool process. Asked once, lazily, of the nodes named; a run
    of a worker outside Celery, or when the broker cannot be asked, waits for its lease."""
    answers: dict[str, dict[str, set]] = {}

    def dead(worker: str | None) -> bool:
        node, _, pid = (worker or "").rpartition(":")
        if "@" not in node or not pid.isdigit():
            return False
        if node not in answers:
            answers[node] = _busy(celery, node)
        busy = answers[node]
        return busy is not None and int(pid) not in busy

    return dead


def _busy(celery, node: str) -> set[int] | None:
    """The pool processes of a node that are running a task: empty if it did not answer, None
    if the broker could not be asked."""
    replies: dict = {}
    for seconds in INSPECT_SECONDS:
        try:
            replies = (
                celery.control.inspect(destination=[node], timeout=seconds, limit=1).active() or {}
            )
        except Exception as exc:  # kombu raises many types for a broker that is away
            log.warning("cannot ask %s which tasks it runs: %s", node, exc)
            return None
        if node in replies:
            break
    return {task.get("worker_pid") for task in replies.get(node, [])}


def _tell_graded(outcomes: dict[int, str]) -> None:
    """The students who asked to be told when a submission is graded are, once the grade is
    committed (the recorder commits each run's)."""
    graded = [
        submission_id
        for submission_id, outcome in outcomes.items()
        if outcome == runs.Settled.graded
    ]
    send_notice(current_app.extensions["celery"], "graded", graded)


def _follow_up(more: bool, due_in: float | None) -> None:
    """A run ended and a queued submission may be claimed (a student's next file, a failed
    run's next try): another dispatch now, not at the next reconcile; a batch still filling up
    is looked at again when it is due."""
    try:
        if more:
            dispatch.apply_async(args=[[]], retry=False)
        if due_in is not None:
            dispatch.apply_async(args=[[]], countdown=due_in, retry=False)
    except Exception as exc:  # the broker is away: reconcile or collect dispatches it anyway
        log.warning("cannot send the next dispatch: %s", exc)


@shared_task(name=task_names.SIMILARITY, **RETRY_WHILE_AWAY)
def similarity(run_id: int) -> int:
    """Compare an exercise's counted submissions for code alike (worker/grading/similarity.py),
    as its staff asked; returns how many were compared."""
    # copydetect imports matplotlib, about a second: a worker pays it at its first comparison,
    # not at every start
    from worker.grading.similarity import compare

    return compare(current_app.extensions["hpcgrade.db"], run_id)
