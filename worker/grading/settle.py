"""A submission's grading runs in the database: claimed, recorded once, lost, released, cancelled.

Idempotent per submission: a duplicate delivery finds the submission graded, or its run still
alive, and does nothing. A run is alive while its worker lives and holds the lease or, once an
executor has given it an external id, while the executor's poll says so
(worker/grading/dispatch.py);
`recover` sends the others back to the queue. A grader failure is never a grade: the
submission goes back to `queued` for another run, and only after MAX_RUNS runs to `error`.
"""

from __future__ import annotations

import datetime as dt
import enum
import os
import socket
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import delete, select
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, object_session, sessionmaker

from server.core.counters import START_BUCKETS, count, observe
from server.core.grades import take
from server.core.models import (
    CheckResult,
    DiagnosticResult,
    GradingRun,
    RunStatus,
    Submission,
    SubmissionStatus,
    utcnow,
)
from worker.harness.report import HARNESS_START, Report, clip

MAX_RUNS = 3


class Settled(str, enum.Enum):
    """What settling a run did to it and its submission (record, lose, cancel, refuse)."""

    graded = "graded"  # its report is a grade: the submission's result
    failed = "failed"  # its report is the grader's error: another run follows, or no grade
    requeued = "requeued"  # it ended without a report: another run follows
    error = "error"  # no run follows: the submission is a grader error, never a zero
    cancelled = "cancelled"  # staff stopped it
    stale = "stale"  # another run took over, or staff cancelled it: its word stands


# what the database raises while it is away (stopped, restarting, unreachable): worth waiting for
DATABASE_AWAY = (OperationalError, InterfaceError)
DONE = (
    SubmissionStatus.graded.value,
    SubmissionStatus.error.value,
    SubmissionStatus.cancelled.value,
)


@dataclass(frozen=True)
class Claim:
    """What a worker needs to grade a claimed run, read inside the claiming transaction."""

    run_id: int
    submission_id: int
    exercise: str
    filename: str
    code: bytes
    course_id: int  # the exercise is the slug among this course's


def claim(
    session: Session,
    submission_id: int,
    executor: str,
    worker: str,
    lease: dt.timedelta,
    now: dt.datetime | None = None,
) -> Claim | None:
    """A new run of a queued submission (the caller chose it, by its turn, see
    server/core/queue.py); None if it is not queued, or it has had its MAX_RUNS runs (then an
    error)."""
    now = now or utcnow()
    submission = session.get(Submission, submission_id, with_for_update=True)
    if submission is None or submission.status != SubmissionStatus.queued.value:
        return None
    runs = submission.runs
    # a regrade asked while it ran: that run's grade stands
    if runs and runs[-1].status == RunStatus.running.value:
        return None
    if len(runs) - submission.retry_from >= MAX_RUNS:
        submission.status = SubmissionStatus.error.value
        return None
    run = GradingRun(
        submission=submission,
        attempt=len(runs) + 1,
        executor=executor,
        status=RunStatus.running.value,
        worker=worker,
        started_at=now,
        lease_until=now + lease,
    )
    submission.status = SubmissionStatus.running.value
    session.add(run)
    session.flush()
    return Claim(
        run.id,
        submission.id,
        submission.exercise.slug,
        submission.filename,
        submission.code,
        submission.exercise.course_id,
    )


def worker_name(node: str | None = None) -> str:
    """Who grades a run: "<Celery node name>:<pid of the process grading>" (outside Celery, the
    host's name stands for the node)."""
    return f"{node or socket.gethostname()}:{os.getpid()}"


def gone_here(node: str | None) -> Callable[[str | None], bool]:
    """Whether a run's worker is a process of this node that no longer exists (its pool process
    was killed, and its task came back here)."""
    node = node or socket.gethostname()

    def gone(worker: str | None) -> bool:
        name, _, pid = (worker or "").rpartition(":")
        if name != node or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    return gone


def recover(
    sessions: sessionmaker, dead: Callable[[str | None], bool], now: dt.datetime | None = None
) -> list[int]:
    """Runs that nobody grades any more (the lease ran out, or `dead` says so of their worker)
    are lost: their submissions are queued again, or an error after MAX_RUNS runs. A run with an
    external id is left to its executor's poll. Returns the submissions queued again.
    The runs are read without locks, since `dead` may ask the workers over the network; each
    is then lost in a short transaction of its own, unless it ended meanwhile."""
    now = now or utcnow()
    with sessions() as session:
        runs = session.execute(
            select(
                GradingRun.id, GradingRun.submission_id, GradingRun.worker, GradingRun.lease_until
            ).where(GradingRun.status == RunStatus.running.value, GradingRun.external_id.is_(None))
        ).all()
    queued = []
    for run_id, submission_id, worker, lease_until in runs:
        if lease_until < now or dead(worker):
            with sessions.begin() as session:
                if (
                    lose(
                        session,
                        run_id,
                        f"{worker} stopped before finishing",
                        now,
                        cause="worker-lost",
                    )
                    == "requeued"
                ):
                    queued.append(submission_id)
    return queued


def _current(session: Session, run_id: int) -> GradingRun | None:
    """The run, locked, if it is still its submission's live run (else another run took over)."""
    run = session.get(GradingRun, run_id, with_for_update=True)
    if run is None or run.status != RunStatus.running.value or run.submission.status in DONE:
        return None
    return run


def _after_failure(run: GradingRun) -> Settled:
    """A run ended without a grade: the submission waits for another run, or is a grader error."""
    submission = run.submission
    if run.attempt - submission.retry_from < MAX_RUNS:
        submission.status = SubmissionStatus.queued.value
        submission.enqueued_at = None
        return Settled.requeued
    submission.status = SubmissionStatus.error.value
    return Settled.error


def _lose(run: GradingRun, reason: str, now: dt.datetime) -> Settled:
    run.status, run.error, run.finished_at = RunStatus.lost.value, reason, now
    return _after_failure(run)


def _count_error(session: Session, cause: str) -> None:
    """A grader error, for the operators (hpcgrade_grader_errors_total, by cause)."""
    count(session, "grader_errors", cause=cause)


def record(
    session: Session, run_id: int, report: Report, now: dt.datetime | None = None
) -> Settled:
    """Store a report for a run that is still the submission's current one; returns the outcome:
    graded, failed (the grader failed: another run follows, or the submission is an error), or
    stale (another run took over, or staff cancelled it: its word stands)."""
    run = _current(session, run_id)
    if run is None:
        return Settled.stale
    if not store(run, report, now or utcnow()):
        run.status = RunStatus.failed.value
        _after_failure(run)
        _count_error(session, "harness")
        return Settled.failed
    take(run)
    return Settled.graded


def store(run: GradingRun, report: Report, now: dt.datetime) -> bool:
    """A report's facts on its run (its checks, seed and score, or the grader's error); whether
    it is a grade. The run's status and its submission are the caller's. The one place where
    a report becomes rows: one larger than the service stores never got here (Report.parse
    made it the grader's error)."""
    run.finished_at = now
    run.environment, run.timing = report.environment or None, report.timing or None
    run.seed = report.seed
    run.exercise_version = report.exercise_version
    exercise = run.submission.exercise
    run.exercise_commit = exercise.commit if report.exercise_version == exercise.version else None
    started_in = (report.timing or {}).get(HARNESS_START)
    if isinstance(started_in, (int, float)):  # the first run of a harness just started
        observe(object_session(run), "harness_start_seconds", float(started_in), START_BUCKETS)
    if not report.graded:
        run.error = clip(report.error or "the grader failed")
        return False
    run.sandbox, run.notes, run.output = report.sandbox, list(report.notes), report.output
    for position, check in enumerate(report.checks):
        run.checks.append(
            CheckResult(
                position=position,
                name=check.name,
                title=check.title,
                points=check.points,
                max_points=check.max_points,
                passed=check.passed,
                message=check.message,
                titles=check.titles,
                diagnostics=[
                    DiagnosticResult(
                        code=d["code"],
                        message=d["message"],
                        hint=d["hint"],
                        details=d["details"],
                        translations=d["translations"],
                    )
                    for d in check.diagnostics
                ],
            )
        )
    run.score, run.max_score = report.score, report.max_score
    return True


def lose(
    session: Session,
    run_id: int,
    reason: str,
    now: dt.datetime | None = None,
    cause: str = "job-ended",
) -> Settled:
    """The run's job ended without its report (failed, timed out, node lost…), or its worker
    died (`cause` worker-lost): another run follows (requeued), or after MAX_RUNS the
    submission is a grader error; or stale."""
    run = _current(session, run_id)
    if run is None:
        return Settled.stale
    _count_error(session, cause)
    return _lose(run, reason, now or utcnow())


def cancel(session: Session, run_id: int, reason: str, now: dt.datetime | None = None) -> Settled:
    """The run's job was cancelled: see stop."""
    run = _current(session, run_id)
    if run is None:
        return Settled.stale
    run.status, run.error, run.finished_at = RunStatus.cancelled.value, reason, now or utcnow()
    stop(run.submission)
    return Settled.cancelled


def stop(submission: Submission) -> None:
    """Grading stopped before a grade: the grade from before a regrade stands; a submission
    never graded is shown as cancelled, never as a zero."""
    submission.status = (
        SubmissionStatus.graded.value
        if submission.score is not None
        else SubmissionStatus.cancelled.value
    )


def refuse(session: Session, run_id: int, reason: str, now: dt.datetime | None = None) -> Settled:
    """The cluster cannot run this run (it asks more than any node has, or its job waited past
    the pending limit): a grader error at once, with the reason, since another run now would
    fail the same way."""
    run = _current(session, run_id)
    if run is None:
        return Settled.stale
    run.status, run.error, run.finished_at = RunStatus.failed.value, reason, now or utcnow()
    run.submission.status = SubmissionStatus.error.value
    _count_error(session, "cluster-refused")
    return Settled.error


def submission_outcomes(
    sessions: sessionmaker, run_outcomes: dict[int, Settled]
) -> dict[int, Settled]:
    """Outcomes by run (collect's) as outcomes by submission (dispatch's)."""
    if not run_outcomes:
        return {}
    with sessions() as session:
        submission_of = dict(
            session.execute(
                select(GradingRun.id, GradingRun.submission_id).where(
                    GradingRun.id.in_(list(run_outcomes))
                )
            ).all()
        )
    return {
        submission_of[run_id]: outcome
        for run_id, outcome in run_outcomes.items()
        if run_id in submission_of
    }


def release(session: Session, run_ids: list[int]) -> None:
    """Runs whose submissions never reached the executor (sbatch failed): as if never claimed."""
    submissions = session.scalars(
        select(Submission)
        .join(GradingRun)
        .where(GradingRun.id.in_(run_ids), GradingRun.status == RunStatus.running.value)
        .with_for_update(of=Submission)
    )
    for submission in submissions:
        submission.status = SubmissionStatus.queued.value
    session.execute(
        delete(GradingRun).where(
            GradingRun.id.in_(run_ids), GradingRun.status == RunStatus.running.value
        )
    )
