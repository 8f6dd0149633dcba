"""A student's "Check" from the portal: the exercise's visible checks run on the worker, using no
attempt. This module alone writes a check's status after the web adds it ("queued").

The web commits the check and sends `hpcgrade.visible_check` after the commit. The task gives
way while graded work waits (a check is nobody's grade), for WAIT_FOR_GRADED at most; then it
takes the check ("running"), runs the visible checks in the worker's own warm harness for the
course's python, with the sandbox's required layers as a grade has them (the code is as hostile
as a submission's), names a known wrong program as `hpcgrade check` does, and stores the
report: "done", or "failed" when the grader itself could not run them. A check left "running"
by a worker that died is taken again once it is older than STALE.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

from sqlalchemy import exists, select, update
from sqlalchemy.orm import Session

from server.core.catalogue import current_info
from server.core.config import Settings
from server.core.courses import exercise_folder
from server.core.models import (
    Submission,
    SubmissionStatus,
    VisibleCheck,
    VisibleCheckStatus,
    utcnow,
)
from worker.grading.shapes import course_shape
from worker.harness import spool, visible_mistakes
from worker.harness.jobs import Job
from worker.harness.report import Report
from worker.harness.submission import Unreadable, read

WAIT_FOR_GRADED = dt.timedelta(seconds=30)
STALE = dt.timedelta(minutes=10)
QUEUED, RUNNING = VisibleCheckStatus.queued.value, VisibleCheckStatus.running.value
# grade(job, python) → the harness's report: a local executor's warm harness (LocalExecutor.grade)
Grade = Callable[[Job, str | None], Report]


def graded_work_waits(session: Session) -> bool:
    return bool(
        session.scalar(select(exists().where(Submission.status == SubmissionStatus.queued.value)))
    )


def take(session: Session, check_id: int, now: dt.datetime) -> VisibleCheck | None:
    """The check, now "running", if nobody runs it: queued, or left running by a worker that
    died; None otherwise (another worker's, or over)."""
    taken = session.execute(
        update(VisibleCheck)
        .where(
            VisibleCheck.id == check_id,
            (VisibleCheck.status == QUEUED)
            | ((VisibleCheck.status == RUNNING) & (VisibleCheck.requested_at < now - STALE)),
        )
        .values(status=RUNNING)
    ).rowcount
    session.commit()
    return session.get(VisibleCheck, check_id) if taken else None


def run(session: Session, settings: Settings, check: VisibleCheck, grade: Grade) -> str:
    """Run a taken check and store its report; returns its new status."""
    exercise = check.exercise
    info = current_info(exercise_folder(exercise))
    if info is None:
        report = Report.grader_error(f"exercise {exercise.slug} is not installed", exercise.slug)
    else:
        shape = info.resources(course_shape(exercise.course, settings.slurm_resources))
        job = spool.write_run(
            settings.spool_dir,
            info.job(
                None,
                filename=check.filename,
                seed=0,
                lang=check.lang,
                job_id=f"check-{check.id}",
                device="cpu",
                visible=True,
                required_layers=settings.sandbox_required_layers,
            ),
            check.code,
        )
        try:
            report = grade(job, shape.python)
        finally:
            spool.remove_run(settings.spool_dir, job.id)
    stored = report.to_dict()
    if report.graded and info is not None:
        stored = visible_mistakes.recognised(
            stored, _mistakes(info.path), check.lang, _cells(check)
        )
    check.report = json.dumps(stored)
    check.status = (
        VisibleCheckStatus.done.value if report.graded else VisibleCheckStatus.failed.value
    )
    check.finished_at = utcnow()
    session.commit()
    return check.status


def _mistakes(folder) -> dict:
    try:
        return json.loads((folder / visible_mistakes.FILE).read_text())
    except (OSError, ValueError):
        return {}


def _cells(check: VisibleCheck) -> tuple[tuple[str, str], ...]:
    try:
        return read(check.code, check.filename, 1 << 30).cells
    except Unreadable:
        return ()
