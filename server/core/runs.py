"""A grading run's life: the one module that writes a run's status (tests/core/test_runs.py
says nothing else does), and, beside it, what the run's end makes of its submission.

A submission's run is claimed `running` by a worker (dispatch), and ends once:

    running ──record──▶ done         its report is a grade: the submission's result
            ──record──▶ failed       the grader failed: another run follows, or no grade
            ──refuse──▶ failed       the cluster cannot run it: a grader error at once
            ──lose────▶ lost         its worker died, or its job ended without its report
            ──cancel──▶ cancelled    staff stopped it
            ──release─▶ (no run)     it never reached the executor: as if never claimed

A regrade's preview run (server/web/regrade_preview.py, worker/grading/preview.py) is made
`previewing`, is claimed with a lease that its worker renews, and is never a submission's live
run nor its result until it is published:

    previewing ──record_preview──▶ preview ──publish_preview──▶ done
               ──record_preview──▶ failed
               ──discard_previews─▶ cancelled

Idempotent per submission: a duplicate delivery finds the submission graded, or its run still
alive, and does nothing; a run's end recorded after another run took over, or after staff
stopped it, is `stale` and changes nothing. A grader failure is never a grade: the submission
goes back to `queued` for another run, and only after MAX_RUNS runs to `error`.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, object_session, sessionmaker

from server.core.counters import START_BUCKETS, count, observe
from server.core.grades import penalised
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
# the moves a run's status may make: None is a run not made yet (release takes a `running` run
# back there, deleting it)
MOVES: dict[RunStatus | None, frozenset[RunStatus | None]] = {
    None: frozenset({RunStatus.running, RunStatus.previewing}),
    RunStatus.running: frozenset(
        {RunStatus.done, RunStatus.failed, RunStatus.lost, RunStatus.cancelled, None}
    ),
    RunStatus.previewing: frozenset({RunStatus.preview, RunStatus.failed, RunStatus.cancelled}),
    RunStatus.preview: frozenset({RunStatus.done}),
    RunStatus.done: frozenset(),
    RunStatus.failed: frozenset(),
    RunStatus.lost: frozenset(),
    RunStatus.cancelled: frozenset(),
}
DONE = (
    SubmissionStatus.graded.value,
    SubmissionStatus.error.value,
    SubmissionStatus.cancelled.value,
)


class IllegalMove(Exception):
    """A run asked to move where the table does not lead: a defect in the grader, never a
    student's doing."""


class Settled(str, enum.Enum):
    """What settling a run did to it and its submission (record, lose, cancel, refuse)."""

    graded = "graded"  # its report is a grade: the submission's result
    failed = "failed"  # its report is the grader's error: another run follows, or no grade
    requeued = "requeued"  # it ended without a report: another run follows
    error = "error"  # no run follows: the submission is a grader error, never a zero
    cancelled = "cancelled"  # staff stopped it
    stale = "stale"  # another run took over, or staff cancelled it: its word stands


@dataclass(frozen=True)
class Claim:
    """What a worker needs to grade a claimed run, read inside the claiming transaction."""

    run_id: int
    submission_id: int
    exercise: str
    filename: str
    code: bytes
    course_id: int  # the exercise is the slug among this course's


def _checked(before: RunStatus | None, after: RunStatus | None) -> None:
    if after not in MOVES[before]:
        raise IllegalMove(f"a grading run cannot go from {before} to {after}")


def _move(
    run: GradingRun, to: RunStatus, error: str | None = None, at: dt.datetime | None = None
) -> None:
    _checked(RunStatus(run.status), to)
    run.status = to.value
    if error is not None:
        run.error = error
    if at is not None:
        run.finished_at = at


# --- a submission's run --------------------------------------------------------------------


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
    _checked(None, RunStatus.running)
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


def _count_error(session: Session, cause: str) -> None:
    """A grader error, for the operators (hpcgrade_grader_errors_total, by cause)."""
    count(session, "grader_errors", cause=cause)


def record(
    session: Session, run_id: int, report: Report, now: dt.datetime | None = None
) -> Settled:
    """Store a report for a run that is still the submission's current one; returns the outcome:
    graded, failed (the grader failed: another run follows, or the submission is an error), or
    stale."""
    run = _current(session, run_id)
    if run is None:
        return Settled.stale
    if not _store(run, report, now or utcnow()):
        _move(run, RunStatus.failed)
        _after_failure(run)
        _count_error(session, "harness")
        return Settled.failed
    _take(run)
    return Settled.graded


def _take(run: GradingRun) -> None:
    """A graded run becomes its submission's result: the score after the submission's own late
    penalty."""
    _move(run, RunStatus.done)
    submission = run.submission
    submission.score = penalised(run.score, submission.penalty)
    submission.max_score = run.max_score
    submission.status = SubmissionStatus.graded.value


def _store(run: GradingRun, report: Report, now: dt.datetime) -> bool:
    """A report's facts on its run (its checks, seed and score, or the grader's error); whether
    it is a grade. The one place where a report becomes rows: one larger than the service
    stores never got here (Report.parse made it the grader's error)."""
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
    _move(run, RunStatus.lost, reason, now or utcnow())
    return _after_failure(run)


def cancel(session: Session, submission: Submission, reason: str) -> list[GradingRun]:
    """Staff stop grading the submission (locked by the caller, not done): its running runs are
    cancelled, and it is shown as before (stop). Returns the runs cancelled, whose jobs the
    caller cancels on the cluster."""
    runs = [r for r in submission.runs if r.status == RunStatus.running.value]
    for run in runs:
        _move(run, RunStatus.cancelled, reason, utcnow())
    stop(submission)
    return runs


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
    _move(run, RunStatus.failed, reason, now or utcnow())
    run.submission.status = SubmissionStatus.error.value
    _count_error(session, "cluster-refused")
    return Settled.error


def release(session: Session, run_ids: list[int]) -> None:
    """Runs whose submissions never reached the executor (sbatch failed): as if never claimed."""
    _checked(RunStatus.running, None)
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


# --- a regrade's preview runs ----------------------------------------------------------------


def start_previews(
    session: Session,
    regrade_id: int,
    attempts: dict[int, int],
    executor: str,
    now: dt.datetime,
    waits_until: dt.datetime,
) -> None:
    """A preview run for each submission (id → the attempt the run is), unclaimed: if no worker
    has taken them by `waits_until`, the regrade's page offers to start again."""
    _checked(None, RunStatus.previewing)
    session.add_all(
        GradingRun(
            submission_id=submission_id,
            attempt=attempt,
            executor=executor,
            status=RunStatus.previewing.value,
            regrade_id=regrade_id,
            started_at=now,
            lease_until=waits_until,
        )
        for submission_id, attempt in attempts.items()
    )


def unclaimed_previews_stall(session: Session, regrade_id: int) -> None:
    """The preview's runs no worker has claimed are offered to start again at once (the broker
    did not take the task)."""
    session.execute(
        update(GradingRun)
        .where(
            GradingRun.regrade_id == regrade_id,
            GradingRun.status == RunStatus.previewing.value,
            GradingRun.worker.is_(None),
        )
        .values(lease_until=utcnow())
    )


def claim_preview(
    run: GradingRun, worker: str, executor: str, lease_until: dt.datetime
) -> str | None:
    """A preview run (locked by the caller) becomes this worker's, to be sent again from the
    start; returns the job its last worker sent it in on this executor (an orphan to cancel)."""
    orphan = run.external_id if run.external_id and run.executor == executor else None
    run.worker, run.executor, run.lease_until = worker, executor, lease_until
    run.external_id = run.job_state = run.node = None
    return orphan


def renew_previews(session: Session, regrade_id: int, worker: str, until: dt.datetime) -> None:
    """The worker's preview runs of the regrade still on get a lease until `until`."""
    session.execute(
        update(GradingRun)
        .where(
            GradingRun.regrade_id == regrade_id,
            GradingRun.status == RunStatus.previewing.value,
            GradingRun.worker == worker,
        )
        .values(lease_until=until)
    )


def record_preview(
    session: Session, run_id: int, worker: str, report: Report, now: dt.datetime | None = None
) -> str:
    """Store a report on a preview run still this worker's: "preview" (graded) or "failed";
    "stale" when the run was taken over, or its regrade discarded."""
    run = session.get(GradingRun, run_id, with_for_update=True)
    if run is None or run.status != RunStatus.previewing.value or run.worker != worker:
        return "stale"
    graded = _store(run, report, now or utcnow())
    _move(run, RunStatus.preview if graded else RunStatus.failed)
    return run.status


def publish_preview(run: GradingRun) -> None:
    """A graded preview run becomes its submission's result (the caller locked the
    submission, and checked it was not graded again since)."""
    if run.status != RunStatus.preview.value:
        raise IllegalMove(f"only a graded preview run is published, not a {run.status} one")
    _take(run)


def discard_previews(session: Session, regrade_id: int, now: dt.datetime) -> None:
    """The regrade's runs still waiting are cancelled (a worker grading them stops, and records
    nothing). The error is a note for staff, in English like the workers'."""
    _checked(RunStatus.previewing, RunStatus.cancelled)
    session.execute(
        update(GradingRun)
        .where(GradingRun.regrade_id == regrade_id, GradingRun.status == RunStatus.previewing.value)
        .values(
            status=RunStatus.cancelled.value, error="the preview was discarded", finished_at=now
        )
    )
